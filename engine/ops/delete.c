/*
 * delete.c — delete_attributes: tombstones for the listed attributes of the query's prims, or, with
 * no attributes, for every attribute of those prims (whole-prim delete; the prims stop existing).
 * Ordinal-keyed like writes: admitted above the floor, sealed by a floor advance, reported by range
 * reads as is_delete groups.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "errors.h"
#include "ops.h"
#include "query.h"
#include "sequencer.h"

typedef struct delete_op {
	ovs_stage *st;              /* stage */
	ovs_query *q;               /* prims (reference held) */
	ovs_column **cols;          /* listed columns, or NULL = whole prims */
	size_t ncols;               /* entries */
	ovstage_ordinal_t ordinal;  /* ordinal */
	ovs_inflight *inflight;     /* sequencer record */
} delete_op;

static void delete_free(void *arg, bool ran)
{
	(void)ran;
	delete_op *d = arg;
	if (d->inflight)
		ovs_inflight_done(d->st, d->inflight);
	ovs_query_put(d->q);
	for (size_t i = 0; d->cols && i < d->ncols; i++)
		ovs_column_discard(&d->st->store, d->cols[i]); /* a refused delete's new columns */
	free(d->cols);
	free(d);
}

/* Tombstones the query's prims in column c. */
static bool tombstone(delete_op *d, ovs_column *c, uint64_t seq)
{
	size_t n = d->q->count;
	uint32_t *rows = malloc((n ? n : 1) * sizeof *rows);
	if (!rows)
		return false;
	uint32_t k = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t r = ovs_column_row(c, d->q->paths[i]);
		if (r != UINT32_MAX)
			rows[k++] = r;
	}
	if (!k) {
		free(rows);
		return true;
	}
	ovs_delta *del = calloc(1, sizeof *del);
	if (!del) {
		free(rows);
		return false;
	}
	del->kind = OVS_DELTA_TOMBSTONE;
	del->ordinal = d->ordinal;
	del->seq = seq;
	del->nrows = k;
	del->rows = rows;
	ovs_column_push_delta(&d->st->store, c, del);
	return true;
}

static void delete_job(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	delete_op *d = arg;
	ovs_stage *st = d->st;
	uint64_t seq = jobs_run_id(run);
	if (d->cols) {
		for (size_t i = 0; i < d->ncols; i++)
			if (!tombstone(d, d->cols[i], seq)) {
				ovs_op_fail(run, OVSTAGE_ERROR_OUT_OF_MEMORY, "delete_attributes: out of memory");
				return;
			} else {
				ovs_sequencer_applied(d->cols[i], d->ordinal);
			}
		return;
	}
	size_t nc = atomic_load_explicit(&st->store.ncols, memory_order_acquire);
	ovs_column **all = atomic_load_explicit(&st->store.cols, memory_order_acquire);
	for (size_t i = 0; i < nc; i++)
		if (!tombstone(d, all[i], seq)) {
			ovs_op_fail(run, OVSTAGE_ERROR_OUT_OF_MEMORY, "delete_attributes: out of memory");
			return;
		}
	ovs_prims_need_reassert(&st->store);
	for (size_t i = 0; i < d->q->count; i++)
		ovs_prim_set(&st->store, d->q->paths[i], 2);
}

ovstage_enqueue_result_t ovs_delete_attributes(ovstage_context_t *ctx, ovstage_query_handle_t handle,
					       const ovx_string_or_token_t *attributes, size_t attribute_count,
					       ovstage_ordinal_t ordinal)
{
	ovs_err_clear();
	ovs_stage *st = ovs_stage_of(ctx);
	if (!st)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "instance is NULL"));
	if (attribute_count && !attributes)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
						"attributes is NULL with attribute_count = %zu", attribute_count));
	ovs_query *q = ovs_query_get(st, handle);
	if (!q)
		return ovs_rejected(OVSTAGE_ERROR_INVALID_HANDLE);
	delete_op *d = calloc(1, sizeof *d);
	ovx_token_t *toks = attribute_count ? malloc(attribute_count * sizeof *toks) : NULL;
	if (d && attribute_count)
		d->cols = malloc(attribute_count * sizeof *d->cols);
	if (!d || (attribute_count && (!toks || !d->cols))) {
		if (d)
			free(d->cols);
		free(d);
		free(toks);
		ovs_query_put(q);
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory"));
	}
	d->st = st;
	d->q = q;
	d->ordinal = ordinal;
	for (size_t i = 0; i < attribute_count; i++) {
		char what[48];
		snprintf(what, sizeof what, "attributes[%zu]", i);
		ovstage_api_status_t s = ovs_resolve_attr(st, attributes[i], false, &toks[i], what);
		if (s == OVSTAGE_OK && ovs_attr_is_derived(st, toks[i]))
			s = ovs_err_set(OVSTAGE_ERROR_NOT_SUPPORTED, "attributes[%zu] = \"%s\" is derived and cannot be "
					"deleted", i, ovs_attr_name(st, toks[i]));
		/* a new column is prepared only: the sequencer publishes it if the delete is admitted */
		if (s == OVSTAGE_OK && !(d->cols[i] = ovs_column_prepare(&st->store, toks[i])))
			s = ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory");
		d->ncols = s == OVSTAGE_OK ? i + 1 : i; /* what delete_free discards */
		if (s != OVSTAGE_OK) {
			free(toks);
			delete_free(d, false);
			return ovs_rejected(s);
		}
	}
	d->ncols = attribute_count;
	ovs_column ***slots = attribute_count ? malloc(attribute_count * sizeof *slots) : NULL;
	if (attribute_count && !slots) {
		free(toks);
		delete_free(d, false);
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory"));
	}
	for (size_t i = 0; i < attribute_count; i++)
		slots[i] = &d->cols[i];
	/* A query still resolving: run after its op (its prims are read in the job). */
	bool pending = !ovs_query_ready(q);
	ovs_op_desc od = { .fn = delete_job, .arg = d, .cleanup = delete_free, .after = pending ? &q->op : NULL,
			   .after_count = pending ? 1 : 0 };
	ovstage_enqueue_result_t r = ovs_sequencer_submit_mutation(st, ordinal, toks, attribute_count, slots, &od,
								   &d->inflight);
	free(slots);
	return r;
}
