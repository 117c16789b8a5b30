/*
 * clone.c — ovstage_clone: copy the subtree under a source prim to each target path, at an ordinal.
 *
 * At the call: the paths are validated and the op is admitted like a whole-prim mutation (above the
 * floor of every column). In the op, all-or-nothing checks come first — a missing source is
 * NOT_FOUND, any existing target prim (for the source or any of its descendants) is PRIM_NOT_FOUND —
 * then, for every column, the source prims' values as of the latest sealed version are written to
 * the target prims as one sparse delta at the clone's ordinal (sealed, like any write, by a floor
 * advance); array rows are shared by reference (they are immutable), except path-valued rows
 * (RELATIONSHIP_PATH_ID path-id arrays, CONNECTION_PATH_ID (path id, token) arrays) whose paths
 * point inside the source subtree: those are rebased to each target. Paths outside stay unchanged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "errors.h"
#include "ops.h"
#include "path_dict_internal.h" /* pd_path_syntax */
#include "query.h"
#include "sequencer.h"

typedef struct clone_op {
	ovs_stage *st;                /* stage */
	ovx_primpath_t source;        /* interned source path */
	ovx_primpath_t *targets;      /* interned target roots */
	size_t ntargets;              /* entries */
	ovstage_ordinal_t ordinal;    /* ordinal */
	ovs_inflight *inflight;       /* sequencer record */
} clone_op;

static void clone_free(void *arg, bool ran)
{
	(void)ran;
	clone_op *c = arg;
	if (c->inflight)
		ovs_inflight_done(c->st, c->inflight);
	free(c->targets);
	free(c);
}

/* The path of `p` (under `src`) moved under `dst`. 0 on failure. */
static ovx_primpath_t rebase(ovs_pd *pd, ovx_primpath_t src, ovx_primpath_t dst, ovx_primpath_t p)
{
	if (p == src)
		return dst;
	ovx_primpath_t parent = rebase(pd, src, dst, ovs_pd_path_parent(pd, p));
	return parent ? ovs_pd_intern_child(pd, parent, ovs_pd_path_name(pd, p)) : 0;
}

/* For a path-valued array row (relationship targets: path ids; connections: (path id, token)
 * pairs), a copy whose paths inside the source subtree point into the clone at `dst`; NULL when no
 * element needs rebasing (the row is then shared). `lanes` elements per entry, the path id first. */
static ovs_blob *rebased_row(ovs_pd *pd, ovx_primpath_t src, ovx_primpath_t dst, const ovs_blob *b,
			     unsigned lanes, bool *oom)
{
	uint64_t entries = b->len / lanes;
	bool any = false;
	for (uint64_t e = 0; e < entries && !any; e++) {
		uint64_t p;
		memcpy(&p, b->data + e * lanes * sizeof p, sizeof p);
		any = p && ovs_pd_path_is_valid(pd, p) && ovs_pd_path_is_prefix(pd, src, p);
	}
	if (!any)
		return NULL;
	ovs_blob *nb = ovs_blob_new(b->len, sizeof(uint64_t));
	if (!nb) {
		*oom = true;
		return NULL;
	}
	memcpy(nb->data, b->data, (size_t)b->len * sizeof(uint64_t));
	for (uint64_t e = 0; e < entries; e++) {
		uint64_t p;
		memcpy(&p, nb->data + e * lanes * sizeof p, sizeof p);
		if (p && ovs_pd_path_is_valid(pd, p) && ovs_pd_path_is_prefix(pd, src, p)) {
			uint64_t q = rebase(pd, src, dst, p);
			if (!q) {
				*oom = true;
				ovs_blob_unref(nb);
				return NULL;
			}
			memcpy(nb->data + e * lanes * sizeof q, &q, sizeof q);
		}
	}
	return nb;
}

/* The first of the columns that lives on a CUDA device, or NULL. Clone copies rows on the host, so it
 * is refused, before anything changes, in a stage with one (docs/api.md). acquire: has_schema
 * publishes the schema's device. */
static ovs_column *device_column(ovs_column **cols, size_t nc)
{
	for (size_t k = 0; k < nc; k++)
		if (atomic_load_explicit(&cols[k]->has_schema, memory_order_acquire) &&
		    cols[k]->schema.device.device_type == kDLCUDA)
			return cols[k];
	return NULL;
}

static void clone_job(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	clone_op *c = arg;
	ovs_stage *st = c->st;
	ovs_pd *pd = st->pd;
	if (!ovs_prim_exists(&st->store, c->source)) {
		ovs_op_fail(run, OVSTAGE_ERROR_NOT_FOUND, "clone: source %s does not exist",
			    ovs_pd_path_string(pd, c->source).ptr);
		return;
	}
	/* The source subtree: existing prims at or under the source. */
	size_t npaths = ovs_pd_path_count(pd);
	ovx_primpath_t *sub = malloc((npaths + 1) * sizeof *sub);
	ovx_primpath_t *dst = malloc((npaths + 1) * c->ntargets * sizeof *dst);
	if (!sub || !dst) {
		free(sub);
		free(dst);
		ovs_op_fail(run, OVSTAGE_ERROR_OUT_OF_MEMORY, "clone: out of memory");
		return;
	}
	size_t n = 0;
	for (ovx_primpath_t p = 1; p <= npaths; p++)
		if (ovs_prim_exists(&st->store, p) && ovs_pd_path_is_prefix(pd, c->source, p))
			sub[n++] = p;
	/* All or nothing: every target prim must be new. */
	for (size_t t = 0; t < c->ntargets; t++)
		for (size_t i = 0; i < n; i++) {
			ovx_primpath_t d = rebase(pd, c->source, c->targets[t], sub[i]);
			if (!d) {
				free(sub);
				free(dst);
				ovs_op_fail(run, OVSTAGE_ERROR_OUT_OF_MEMORY, "clone: out of memory interning paths");
				return;
			}
			if (ovs_prim_exists(&st->store, d)) {
				ovs_op_fail(run, OVSTAGE_ERROR_PRIM_NOT_FOUND, "clone: target prim %s already exists",
					    ovs_pd_path_string(pd, d).ptr);
				free(sub);
				free(dst);
				return;
			}
			dst[t * n + i] = d;
		}
	/* Values: the latest sealed version of every column, pinned inside the grace section. */
	size_t nc = atomic_load_explicit(&st->store.ncols, memory_order_acquire);
	ovs_column **cols = atomic_load_explicit(&st->store.cols, memory_order_acquire);
	ovstage_api_status_t s = OVSTAGE_OK;
	ovs_column *dev = device_column(cols, nc);
	if (dev) {
		ovs_op_fail(run, OVSTAGE_ERROR_NOT_SUPPORTED, "clone: attribute \"%s\" lives on CUDA device %d; "
			    "clone of stages with device columns is not supported in this version",
			    ovs_attr_name(st, dev->name), (int)dev->schema.device.device_id);
		free(sub);
		free(dst);
		return;
	}
	/* All or nothing: the deltas are pushed, and the targets made to exist, only once every
	 * column's delta is built (a clone failing on its k-th column left the first k - 1 columns
	 * written and the targets existing: check_alloc_fail finding). */
	ovs_delta **built = calloc(nc ? nc : 1, sizeof *built);
	if (!built)
		s = OVSTAGE_ERROR_OUT_OF_MEMORY;
	for (size_t k = 0; k < nc && s == OVSTAGE_OK; k++) {
		ovs_column *col = cols[k];
		if (!atomic_load_explicit(&col->has_schema, memory_order_acquire))
			continue;
		bool arr = col->schema.is_array;
		/* Path-valued arrays are rebased per target when they point inside the source subtree. */
		unsigned path_lanes = 0;
		if (arr && col->schema.dtype.bits == 64 &&
		    col->schema.semantic == OVSTAGE_SEMANTIC_RELATIONSHIP_PATH_ID && col->schema.dtype.lanes == 1)
			path_lanes = 1;
		else if (arr && col->schema.dtype.bits == 64 &&
			 col->schema.semantic == OVSTAGE_SEMANTIC_CONNECTION_PATH_ID && col->schema.dtype.lanes == 2)
			path_lanes = 2;
		ovs_version *v;
		ovs_pin_latest(&st->store.grace, &col, 1, &v);
		if (!v)
			continue;
		size_t rb = col->row_bytes;
		ovs_delta *d = calloc(1, sizeof *d);
		if (d) {
			d->rows = malloc((n * c->ntargets + 1) * sizeof *d->rows);
			if (arr)
				d->blobs = calloc(n * c->ntargets + 1, sizeof *d->blobs);
			else
				d->values = malloc((n * c->ntargets + 1) * rb);
		}
		if (!d || !d->rows || (arr ? !d->blobs : !d->values)) {
			ovs_delta_free(d);
			ovs_version_unref(v);
			s = OVSTAGE_ERROR_OUT_OF_MEMORY;
			break;
		}
		d->kind = OVS_DELTA_SPARSE;
		d->ordinal = c->ordinal;
		d->seq = jobs_run_id(run);
		for (size_t i = 0; i < n; i++) {
			uint32_t row = ovs_column_row(col, sub[i]);
			if (row >= v->rows || !ovs_version_present(v, row))
				continue;
			for (size_t t = 0; t < c->ntargets; t++) {
				bool created;
				uint32_t r = ovs_column_row_create(col, dst[t * n + i], &created);
				if (r == UINT32_MAX) {
					s = OVSTAGE_ERROR_OUT_OF_MEMORY;
					break;
				}
				if (arr) { /* array rows are immutable blobs: share them, or rebase path values */
					ovs_blob *nb = NULL;
					bool oom = false;
					if (path_lanes && v->blobs[row])
						nb = rebased_row(pd, c->source, c->targets[t], v->blobs[row], path_lanes, &oom);
					if (oom) {
						s = OVSTAGE_ERROR_OUT_OF_MEMORY;
						break;
					}
					if (!nb) {
						nb = v->blobs[row];
						ovs_blob_ref(nb);
					}
					d->blobs[d->nrows] = nb;
				} else {
					memcpy(d->values + (size_t)d->nrows * rb, ovs_version_row_ptr(v, rb, row), rb);
				}
				d->rows[d->nrows++] = r;
			}
		}
		ovs_version_unref(v);
		if (s != OVSTAGE_OK || !d->nrows) {
			ovs_delta_free(d);
			continue;
		}
		built[k] = d;
	}
	for (size_t k = 0; built && k < nc; k++)
		if (built[k] && s == OVSTAGE_OK)
			ovs_column_push_delta(&st->store, cols[k], built[k]);
		else if (built[k])
			ovs_delta_free(built[k]);
	free(built);
	if (s == OVSTAGE_OK)
		for (size_t i = 0; i < n * c->ntargets; i++)
			ovs_prim_set(&st->store, dst[i], 1);
	else
		ovs_prims_need_reassert(&st->store); /* rows it gave the targets stay, as holes */
	free(sub);
	free(dst);
	if (s != OVSTAGE_OK)
		ovs_op_fail(run, s, "clone: out of memory copying values");
}

/* Interns a path string, or sets the last error. */
static ovstage_api_status_t path_arg(ovs_stage *st, ovx_string_t s, const char *what, ovx_primpath_t *out)
{
	if (!s.ptr || !s.length)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s is empty", what);
	*out = ovs_pd_intern_path(st->pd, s.ptr, s.length);
	size_t bad;
	/* interning fails for bad syntax or for want of memory: tell them apart (check_alloc_fail
	 * finding: an allocation failure was reported as INVALID_ARGUMENT) */
	if (!*out && pd_path_syntax(s.ptr, s.length, &bad) == PD_SYNTAX_OK)
		return ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "%s = \"%.*s\": out of memory interning the path", what,
				   (int)(s.length > 200 ? 200 : s.length), s.ptr);
	if (!*out)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s = \"%.*s\" is not an absolute prim path", what,
				   (int)(s.length > 200 ? 200 : s.length), s.ptr);
	return OVSTAGE_OK;
}

ovstage_enqueue_result_t ovs_clone(ovstage_instance_t *instance, ovx_string_t source_path,
				   const ovx_string_t *target_paths, size_t num_target_paths, ovstage_ordinal_t ordinal)
{
	ovs_err_clear();
	ovs_stage *st = instance ? ovs_stage_of(instance->context) : NULL;
	if (!st)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "instance is NULL"));
	if (num_target_paths && !target_paths)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
						"target_paths is NULL with num_target_paths = %zu", num_target_paths));
	clone_op *c = calloc(1, sizeof *c);
	if (c)
		c->targets = malloc((num_target_paths ? num_target_paths : 1) * sizeof *c->targets);
	if (!c || !c->targets) {
		if (c)
			free(c->targets);
		free(c);
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory"));
	}
	c->st = st;
	c->ordinal = ordinal;
	c->ntargets = num_target_paths;
	ovstage_api_status_t s = path_arg(st, source_path, "source_path", &c->source);
	for (size_t i = 0; s == OVSTAGE_OK && i < num_target_paths; i++) {
		char what[48];
		snprintf(what, sizeof what, "target_paths[%zu]", i);
		s = path_arg(st, target_paths[i], what, &c->targets[i]);
		if (s != OVSTAGE_OK)
			break;
		if (ovs_pd_path_is_prefix(st->pd, c->source, c->targets[i]))
			s = ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s = \"%.*s\" is inside the source subtree", what,
					(int)target_paths[i].length, target_paths[i].ptr);
		for (size_t j = 0; s == OVSTAGE_OK && j < i; j++)
			if (c->targets[j] == c->targets[i])
				s = ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "target_paths[%zu] repeats target_paths[%zu]", i, j);
	}
	if (s != OVSTAGE_OK) {
		clone_free(c, false);
		return ovs_rejected(s);
	}
	ovs_op_desc d = { .fn = clone_job, .arg = c, .cleanup = clone_free };
	return ovs_sequencer_submit_mutation(st, ordinal, NULL, 0, NULL, &d, &c->inflight);
}
