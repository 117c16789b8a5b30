/*
 * floor.c — advance_write_floor (sealing) and the ordinal queries (write floors, retention frontier).
 */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "device.h"
#include "errors.h"
#include "gpu.h"
#include "ops.h"
#include "query.h"
#include "sequencer.h"

/* ---- advance_write_floor ---- */

typedef struct seal_op {
	ovs_stage *st;           /* stage */
	ovstage_ordinal_t n;     /* new floor */
	ovs_column **cols;       /* columns to seal */
	size_t ncols;            /* entries */
	bool all;                /* ALL scope: the stage floor moves too */
} seal_op;

static void seal_free(void *arg, bool ran)
{
	(void)ran;
	seal_op *s = arg;
	free(s->cols);
	free(s);
}

static void seal_job(jobs_worker *w, void *arg, jobs_run *run)
{
	seal_op *s = arg;
	char err[256];
	ovs_exec x = ovs_exec_cpu(w);
	/* Sealing device columns sets the thread's CUDA device: put it back (inline, this is the
	 * caller's thread, whose current device is the caller's business). A stage without device
	 * columns makes no CUDA call here. */
	int dev = ovs_store_has_device_columns(&s->st->store) ? ovs_gpu_thread_device() : -1;
	ovstage_api_status_t r = ovs_store_seal(&s->st->store, &x, s->cols, s->ncols, s->n, s->all, err, sizeof err);
	ovs_gpu_thread_restore(dev);
	if (r != OVSTAGE_OK)
		ovs_op_fail(run, r, "advance_write_floor(%llu): %s", (unsigned long long)s->n, err);
}

/* Seals that run on the calling thread (when their dependencies are already complete): every
 * column in scope is below the size at which ovs_copy splits a copy across workers (so running on
 * a thread outside the pool loses no parallelism), and all of them together are small enough that
 * the call returns promptly even if the seal has to copy each one. Larger seals go to a worker. */
#define SEAL_INLINE_COLUMN_MAX ((size_t)4 << 20) /* copy.c's OVS_PARALLEL_MIN */
#define SEAL_INLINE_TOTAL_MAX ((size_t)64 << 20)

/* Upper bound of what sealing column c may copy: its pointer table (arrays), or what its pending
 * deltas may touch, at most the column (fixed). A column without a schema has no rows yet. */
static size_t seal_cost_bound(ovs_column *c)
{
	/* acquire: has_schema publishes the schema fields (row_bytes, is_array). */
	if (!atomic_load_explicit(&c->has_schema, memory_order_acquire))
		return 0;
	/* relaxed: an estimate; rows added concurrently are sealed by a later advance or bounded by
	 * the writes this seal waits for, which are small if the caller asked for inline sealing. */
	size_t rows = atomic_load_explicit(&c->nrows, memory_order_relaxed);
	size_t whole = rows * (c->schema.is_array ? sizeof(void *) : c->row_bytes);
	if (c->schema.is_array)
		return whole;
	/* Fixed-size columns are chunked: a seal copies what its deltas touch (their estimate, added
	 * when they were pushed), which for a sparse write into a big column is far below the column. */
	/* relaxed (both): unordered, so the sealed part read may be newer than the pushed: clamp */
	uint64_t sealed = atomic_load_explicit(&c->seal_cost_sealed, memory_order_relaxed);
	uint64_t pushed = atomic_load_explicit(&c->seal_cost, memory_order_relaxed);
	size_t pending = pushed > sealed ? (size_t)(pushed - sealed) : 0;
	size_t bytes = pending < whole ? pending : whole;
	/* A device column's bytes are moved by its GPU (the seal only enqueues copies and kernels):
	 * the host's share is metadata, of the order of the version's presence bitmap (a bit per row).
	 * Running such a seal on the caller saves a worker's wake-up (measured on the H200: a 1 % masked
	 * seal of a 4 M-row column 345 us on a worker, 62 us on the caller). */
	if (c->schema.device.device_type == kDLCUDA)
		bytes = rows / 8;
	return bytes;
}

static bool listed(const ovx_token_t *ts, size_t n, ovx_token_t t)
{
	for (size_t i = 0; i < n; i++)
		if (ts[i] == t)
			return true;
	return false;
}

ovstage_enqueue_result_t ovs_advance_write_floor(ovstage_context_t *ctx, const ovstage_write_floor_desc_t *desc)
{
	ovs_err_clear();
	ovs_stage *st = ovs_stage_of(ctx);
	if (!st || !desc)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s is NULL", !st ? "instance" : "desc"));
	if (desc->scope != OVSTAGE_SCOPE_ALL && desc->scope != OVSTAGE_SCOPE_INCLUDE &&
	    desc->scope != OVSTAGE_SCOPE_EXCLUDE)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "desc.scope = %d is not ALL, INCLUDE or "
						"EXCLUDE", (int)desc->scope));
	if (desc->attribute_count && !desc->attributes)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
						"desc.attributes is NULL with attribute_count = %zu", desc->attribute_count));
	for (size_t i = 0; i < desc->attribute_count; i++)
		if (!ovs_pd_token_is_valid(st->pd, desc->attributes[i]))
			return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
							"desc.attributes[%zu] = %llu is not a valid token", i,
							(unsigned long long)desc->attributes[i]));
	bool all = desc->scope == OVSTAGE_SCOPE_ALL ||
		   (desc->scope == OVSTAGE_SCOPE_EXCLUDE && desc->attribute_count == 0);
	/* INCLUDE names columns that may not exist yet: create their records so that the floor sticks. */
	if (desc->scope == OVSTAGE_SCOPE_INCLUDE)
		for (size_t i = 0; i < desc->attribute_count; i++)
			if (!ovs_column_get_or_create(&st->store, desc->attributes[i]))
				return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory"));
	seal_op *s = calloc(1, sizeof *s);
	if (!s)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory"));
	s->st = st;
	s->n = desc->ordinal;
	s->all = all;
	size_t nc = atomic_load_explicit(&st->store.ncols, memory_order_acquire);
	ovs_column **cols = atomic_load_explicit(&st->store.cols, memory_order_acquire);
	s->cols = malloc((nc ? nc : 1) * sizeof *s->cols);
	if (!s->cols) {
		seal_free(s, false);
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory"));
	}
	size_t cost = 0;
	bool small = true;
	for (size_t i = 0; i < nc; i++) {
		bool in = all || (desc->scope == OVSTAGE_SCOPE_INCLUDE) == listed(desc->attributes, desc->attribute_count,
										   cols[i]->name);
		if (!in)
			continue;
		s->cols[s->ncols++] = cols[i];
		size_t cb = seal_cost_bound(cols[i]);
		cost += cb;
		small = small && cb < SEAL_INLINE_COLUMN_MAX && cost <= SEAL_INLINE_TOTAL_MAX;
	}
	/* Dependencies (the previous seal, the mutations in flight at ordinals <= N in scope) and the
	 * requested floors are the sequencer's. A small seal runs on this thread when they are complete. */
	ovs_op_desc d = { .fn = seal_job, .arg = s, .cleanup = seal_free, .run_after_failure = true,
			  .run_inline = small };
	return ovs_sequencer_submit_advance(st, desc->ordinal, s->cols, s->ncols, all, &d);
}

/* ---- ordinal queries ---- */

typedef struct ovs_ordq {
	ovs_hobj h;                 /* kind OVS_H_ORDQ */
	ovs_stage *st;              /* stage */
	jobs_id op;                 /* producing op */
	ovx_token_t attr;           /* 0 = global floor; else the attribute */
	bool oldest;                /* retention frontier instead of a floor */
	_Atomic uint64_t value;     /* the answer, published by state */
	ovs_opstate state;          /* the op's outcome, kept past the op id's release */
} ovs_ordq;

static void ordq_destroy(ovs_hobj *h)
{
	free(h);
}

static void ordq_job(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	(void)run;
	ovs_ordq *q = arg;
	ovs_stage *st = q->st;
	uint64_t v;
	if (q->oldest) {
		v = ovs_store_oldest_preserved(&st->store);
	} else if (q->attr) {
		ovs_column *c = ovs_column_find(&st->store, q->attr);
		v = c ? atomic_load_explicit(&c->floor, memory_order_acquire)
		      : atomic_load_explicit(&st->store.all_floor, memory_order_acquire);
	} else {
		/* global floor: the minimum over known columns (the stage floor when there are none) */
		size_t nc = atomic_load_explicit(&st->store.ncols, memory_order_acquire);
		ovs_column **cols = atomic_load_explicit(&st->store.cols, memory_order_acquire);
		v = nc ? UINT64_MAX : atomic_load_explicit(&st->store.all_floor, memory_order_acquire);
		for (size_t i = 0; i < nc; i++) {
			uint64_t f = atomic_load_explicit(&cols[i]->floor, memory_order_acquire);
			if (f < v)
				v = f;
		}
	}
	/* relaxed: published by ovs_opstate_finish (release). */
	atomic_store_explicit(&q->value, v, memory_order_relaxed);
	ovs_opstate_finish(&q->state, OVSTAGE_OK);
}

static void ordq_put(void *arg, bool ran)
{
	ovs_ordq *q = arg;
	if (!ran)
		ovs_opstate_finish(&q->state, OVSTAGE_ERROR_OP_FAILED);
	ovs_hobj_unref(&q->h);
}

static ovstage_enqueue_result_t submit_ordq(ovs_stage *st, ovx_token_t attr, bool oldest,
					    ovstage_ordinal_query_handle_t *out)
{
	ovs_ordq *q = calloc(1, sizeof *q);
	if (!q)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory"));
	ovs_hobj_init(&q->h, OVS_H_ORDQ, ordq_destroy);
	q->st = st;
	q->attr = attr;
	q->oldest = oldest;
	ovs_opstate_init(&q->state);
	ovs_hobj_ref(&q->h); /* the op's reference */
	ovs_op_desc d = { .fn = ordq_job, .arg = q, .cleanup = ordq_put };
	ovstage_enqueue_result_t r = ovs_op_submit(st, &d);
	if (r.status != OVSTAGE_OK) {
		ovs_hobj_unref(&q->h);
		return r;
	}
	q->op = r.op_index; /* read only by fetch_ordinal, after the handle is returned */
	uint64_t id = ovs_handle_insert(&st->handles, &q->h);
	ovs_hobj_unref(&q->h);
	if (!id) {
		ovs_release_op((ovstage_context_t *)(void *)st, r.op_index);
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory"));
	}
	*out = id;
	return r;
}

/* The common start of the ordinal-query calls: clears the error, invalidates *out_handle, and
 * returns the stage, or NULL with the rejection's status set. */
static ovs_stage *ordq_begin(ovstage_context_t *ctx, ovstage_ordinal_query_handle_t *out_handle)
{
	ovs_err_clear();
	ovs_stage *st = ovs_stage_of(ctx);
	if (out_handle)
		*out_handle = OVSTAGE_INVALID_ORDINAL_QUERY_HANDLE;
	if (!st || !out_handle) {
		ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s is NULL", !st ? "instance" : "out_handle");
		return NULL;
	}
	return st;
}

ovstage_enqueue_result_t ovs_get_oldest_preserved_ordinal(ovstage_context_t *ctx,
							   ovstage_ordinal_query_handle_t *out_handle)
{
	ovs_stage *st = ordq_begin(ctx, out_handle);
	if (!st)
		return ovs_rejected(OVSTAGE_ERROR_INVALID_ARGUMENT);
	return submit_ordq(st, 0, true, out_handle);
}

ovstage_enqueue_result_t ovs_get_attribute_write_floor(ovstage_context_t *ctx, ovx_string_or_token_t attribute,
							ovstage_ordinal_query_handle_t *out_handle)
{
	ovs_stage *st = ordq_begin(ctx, out_handle);
	if (!st)
		return ovs_rejected(OVSTAGE_ERROR_INVALID_ARGUMENT);
	ovx_token_t t;
	ovstage_api_status_t s = ovs_resolve_attr(st, attribute, true, &t, "attribute");
	if (s != OVSTAGE_OK)
		return ovs_rejected(s);
	return submit_ordq(st, t, false, out_handle);
}

ovstage_api_status_t ovs_fetch_ordinal(ovstage_context_t *ctx, ovstage_ordinal_query_handle_t handle,
				       ovstage_timeout_ns_t timeout, ovstage_ordinal_t *out_ordinal)
{
	ovs_err_clear();
	ovs_stage *st = ovs_stage_of(ctx);
	if (!st || !out_ordinal)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s is NULL", !st ? "instance" : "out_ordinal");
	ovs_hobj *h = ovs_handle_get(&st->handles, handle, OVS_H_ORDQ);
	if (!h)
		return ovs_handle_invalid(&st->handles, handle, "ordinal query handle");
	ovs_ordq *q = (ovs_ordq *)h;
	ovstage_api_status_t s = ovs_opstate_wait(st, &q->state, q->op, timeout);
	if (s == OVSTAGE_OK)
		*out_ordinal = atomic_load_explicit(&q->value, memory_order_relaxed);
	else if (s != OVSTAGE_ERROR_TIMEOUT)
		s = ovs_err_set(OVSTAGE_ERROR_OP_FAILED, "the ordinal query's op failed");
	ovs_hobj_unref(h);
	return s;
}

ovstage_enqueue_result_t ovs_release_ordinal_query(ovstage_context_t *ctx, ovstage_ordinal_query_handle_t handle)
{
	ovs_err_clear();
	ovs_stage *st = ovs_stage_of(ctx);
	if (!st)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "instance is NULL"));
	return ovs_release_handle_op(st, handle, OVS_H_ORDQ, "ordinal query handle");
}
