/*
 * hierarchy_lookup.c — ovstage_get_hierarchy (PARENT / CHILDREN / SIBLINGS of prims by path
 * structure, over the existing prims), ovstage_fetch_hierarchy_result, ovstage_release_hierarchy_result
 * and ovstage_release_hierarchy.
 *
 * Semantics (ours where 0.2.1 says nothing more):
 *  - An input prim that does not exist: item status OVSTAGE_ERROR_NOT_FOUND, no paths; the batch
 *    is still OK. A relation with nothing in it: OK with 0 paths.
 *  - PARENT: the path's parent (as the usd-parent built-in), none for a top-level prim (never the
 *    pseudo-root). CHILDREN: the existing prims whose path parent is the prim. SIBLINGS: the
 *    existing prims with the same path parent, the prim excluded (top-level prims are siblings of
 *    each other). CHILDREN and SIBLINGS come in path-id order.
 *  - Paths are string-or-token views whose .string is the dictionary's path text (token 0), valid
 *    until the result is released (and for the dictionary's life).
 *  - The list is copied at the call; the lookup runs as an op (in the call: it is short) and
 *    observes the prims that exist when it runs. fetch is non-blocking (TIMEOUT until it ran).
 *
 * Thread-safety: the handle's object is reference-counted (handles.h); its result is written once
 * by the op before the op state is finished (release) and read only after it was seen finished
 * (acquire); a fetched result holds a reference to it.
 */
#include <stdlib.h>
#include <string.h>

#include "column.h"
#include "errors.h"
#include "ops.h"

typedef struct hl_obj {
	ovs_hobj h;                      /* OVS_H_HIER */
	ovs_stage *st;
	ovs_opstate state;               /* finished by the op */
	ovstage_hierarchy_relation_t relation;
	ovstage_ordinal_t ordinal;
	ovx_primpath_t *in;              /* the input paths (copied at the call) */
	size_t nin;
	ovstage_hierarchy_item_t *items; /* the result, once state is done and OK */
	ovx_string_or_token_t *paths;
	size_t npaths;
} hl_obj;

typedef struct hl_result {
	ovs_hobj h;   /* OVS_H_HRESULT */
	hl_obj *of;   /* a reference */
} hl_result;

static void hl_destroy(ovs_hobj *o)
{
	hl_obj *l = (hl_obj *)o;
	free(l->in);
	free(l->items);
	free(l->paths);
	free(l);
}

static void hr_destroy(ovs_hobj *o)
{
	hl_result *r = (hl_result *)o;
	ovs_hobj_unref(&r->of->h);
	free(r);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* (parent << 32 | child) for every existing prim, sorted. */
static uint64_t *family(ovs_stage *st, size_t *n)
{
	size_t np = ovs_pd_path_count(st->pd);
	uint64_t *pairs = malloc((np + 1) * sizeof *pairs);
	if (!pairs)
		return NULL;
	*n = 0;
	for (ovx_primpath_t p = 2; p <= np; p++)
		if (ovs_prim_exists(&st->store, p))
			pairs[(*n)++] = (uint64_t)ovs_pd_path_parent(st->pd, p) << 32 | (uint32_t)p;
	if (*n > 1)
		qsort(pairs, *n, sizeof *pairs, cmp_u64);
	return pairs;
}

/* First pair whose parent is `parent`. */
static size_t first_child(const uint64_t *pairs, size_t n, uint64_t parent)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if ((pairs[mid] >> 32) < parent)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool push_path(hl_obj *l, size_t *cap, ovx_primpath_t p)
{
	if (l->npaths == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		ovx_string_or_token_t *np = realloc(l->paths, c * sizeof *np);
		if (!np)
			return false;
		l->paths = np;
		*cap = c;
	}
	ovx_string_or_token_t v = { 0, ovs_pd_path_string(l->st->pd, p) };
	l->paths[l->npaths++] = v;
	return true;
}

/* The paths related to input path p (its item's status already OK). */
static bool relate(hl_obj *l, const uint64_t *pairs, size_t n, ovx_primpath_t p, size_t *cap)
{
	ovx_primpath_t parent = ovs_pd_path_parent(l->st->pd, p);
	if (l->relation == OVSTAGE_HIERARCHY_PARENT)
		return parent == OVS_PD_ROOT || !parent || push_path(l, cap, parent);
	uint64_t of = l->relation == OVSTAGE_HIERARCHY_CHILDREN ? p : parent;
	for (size_t j = first_child(pairs, n, of); j < n && (pairs[j] >> 32) == of; j++)
		if ((ovx_primpath_t)(uint32_t)pairs[j] != p && !push_path(l, cap, (uint32_t)pairs[j]))
			return false;
	return true;
}

static void lookup_body(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	hl_obj *l = arg;
	size_t n = 0, cap = 0;
	uint64_t *pairs = l->relation == OVSTAGE_HIERARCHY_PARENT ? NULL : family(l->st, &n);
	l->items = calloc(l->nin ? l->nin : 1, sizeof *l->items);
	bool ok = l->items && (pairs || l->relation == OVSTAGE_HIERARCHY_PARENT);
	for (size_t i = 0; ok && i < l->nin; i++) {
		l->items[i].path_offset = l->npaths;
		if (!ovs_prim_exists(&l->st->store, l->in[i])) {
			l->items[i].status = OVSTAGE_ERROR_NOT_FOUND;
			continue;
		}
		ok = relate(l, pairs, n, l->in[i], &cap);
		l->items[i].path_count = l->npaths - l->items[i].path_offset;
	}
	free(pairs);
	if (!ok) {
		ovs_op_fail(run, OVSTAGE_ERROR_OUT_OF_MEMORY, "get_hierarchy: out of memory");
		ovs_opstate_finish(&l->state, OVSTAGE_ERROR_OUT_OF_MEMORY);
		return;
	}
	ovs_opstate_finish(&l->state, OVSTAGE_OK);
}

static void lookup_cleanup(void *arg, bool ran)
{
	hl_obj *l = arg;
	if (!ran)
		ovs_opstate_finish(&l->state, OVSTAGE_ERROR_OP_FAILED);
	ovs_hobj_unref(&l->h);
}

/* Copies the caller's list (it may release it after the call). */
static ovstage_api_status_t copy_list(ovs_stage *st, ovx_primpath_list_t list, hl_obj *l)
{
	const ovx_primpath_t *paths;
	size_t count;
	if (!ovs_pd_list_add_ref(st->pd, list) || !ovs_pd_list_view(st->pd, list, &paths, &count)) {
		if (list)
			ovs_pd_list_release(st->pd, list);
		return ovs_err_set(OVSTAGE_ERROR_INVALID_HANDLE, "ovstage_get_hierarchy: prim_paths %llu is not a live path list",
				   (unsigned long long)list);
	}
	l->in = malloc((count ? count : 1) * sizeof *l->in);
	if (l->in) {
		if (count)
			memcpy(l->in, paths, count * sizeof *paths);
		l->nin = count;
	}
	ovs_pd_list_release(st->pd, list);
	return l->in ? OVSTAGE_OK : ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "ovstage_get_hierarchy: out of memory");
}

OVSTAGE_API ovstage_enqueue_result_t ovstage_get_hierarchy(ovstage_instance_t *instance, ovx_primpath_list_t prim_paths,
							   ovstage_ordinal_t ordinal, ovstage_hierarchy_relation_t relation,
							   ovstage_hierarchy_handle_t *out_hierarchy_handle)
{
	static const char fn[] = "ovstage_get_hierarchy";
	ovs_err_clear();
	if (out_hierarchy_handle)
		*out_hierarchy_handle = OVSTAGE_INVALID_HIERARCHY_HANDLE;
	if (!instance || !instance->context || !out_hierarchy_handle)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn,
						!out_hierarchy_handle ? "out_hierarchy_handle" : "instance"));
	if ((int)relation < OVSTAGE_HIERARCHY_PARENT || (int)relation > OVSTAGE_HIERARCHY_SIBLINGS)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s: relation %d is not PARENT (0), "
						"CHILDREN (1) or SIBLINGS (2)", fn, (int)relation));
	ovs_stage *st = ovs_stage_of(instance->context);
	hl_obj *l = calloc(1, sizeof *l);
	if (!l)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn));
	ovs_hobj_init(&l->h, OVS_H_HIER, hl_destroy);
	l->st = st;
	l->relation = relation;
	l->ordinal = ordinal;
	ovs_opstate_init(&l->state);
	ovstage_api_status_t s = copy_list(st, prim_paths, l);
	uint64_t id = s == OVSTAGE_OK ? ovs_handle_insert(&st->handles, &l->h) : 0;
	if (!id) {
		ovs_hobj_unref(&l->h);
		return ovs_rejected(s != OVSTAGE_OK ? s : ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn));
	}
	/* the creator's reference becomes the op's (its cleanup drops it, also when the submission fails) */
	ovs_op_desc d = { .fn = lookup_body, .arg = l, .cleanup = lookup_cleanup, .run_inline = true };
	ovstage_enqueue_result_t r = ovs_op_submit(st, &d);
	if (r.status != OVSTAGE_OK) {
		ovs_hobj *h = ovs_handle_remove(&st->handles, id, OVS_H_HIER); /* a failed call leaves no handle */
		if (h)
			ovs_hobj_unref(h);
		return r;
	}
	*out_hierarchy_handle = id;
	return r;
}

OVSTAGE_API ovstage_api_status_t ovstage_fetch_hierarchy_result(ovstage_instance_t *instance,
								ovstage_hierarchy_handle_t hierarchy_handle,
								ovstage_hierarchy_result_t *out_result)
{
	static const char fn[] = "ovstage_fetch_hierarchy_result";
	ovs_err_clear();
	if (out_result)
		memset(out_result, 0, sizeof *out_result);
	if (!instance || !instance->context || !out_result)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, !out_result ? "out_result" : "instance");
	ovs_stage *st = ovs_stage_of(instance->context);
	hl_obj *l = (hl_obj *)ovs_handle_get(&st->handles, hierarchy_handle, OVS_H_HIER);
	if (!l)
		return ovs_handle_invalid(&st->handles, hierarchy_handle, "hierarchy handle");
	/* acquire: pairs with ovs_opstate_finish's release (the result is complete) */
	ovstage_api_status_t s = OVSTAGE_ERROR_TIMEOUT;
	if (atomic_load_explicit(&l->state.done, memory_order_acquire))
		s = (ovstage_api_status_t)atomic_load_explicit(&l->state.status, memory_order_relaxed);
	hl_result *r = s == OVSTAGE_OK ? calloc(1, sizeof *r) : NULL;
	uint64_t id = 0;
	if (r) {
		ovs_hobj_init(&r->h, OVS_H_HRESULT, hr_destroy);
		r->of = l; /* takes the lookup's reference */
		id = ovs_handle_insert(&st->handles, &r->h);
		ovs_hobj_unref(&r->h); /* the table holds it now (or it is freed on failure) */
	} else {
		ovs_hobj_unref(&l->h);
	}
	if (s == OVSTAGE_ERROR_TIMEOUT)
		return ovs_err_set(s, "%s: hierarchy handle %llu is not ready yet", fn, (unsigned long long)hierarchy_handle);
	if (s != OVSTAGE_OK)
		return ovs_err_set(OVSTAGE_ERROR_OP_FAILED, "%s: the lookup of hierarchy handle %llu failed", fn,
				   (unsigned long long)hierarchy_handle);
	if (!id)
		return ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
	out_result->hierarchy_result_id = id;
	out_result->ordinal = l->ordinal;
	out_result->items = l->items;
	out_result->input_count = l->nin;
	out_result->paths = l->paths;
	out_result->path_count = l->npaths;
	return OVSTAGE_OK;
}

OVSTAGE_API ovstage_api_status_t ovstage_release_hierarchy_result(ovstage_instance_t *instance,
								  const ovstage_hierarchy_result_t *result)
{
	static const char fn[] = "ovstage_release_hierarchy_result";
	ovs_err_clear();
	if (!instance || !instance->context || !result)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, !result ? "result" : "instance");
	ovs_stage *st = ovs_stage_of(instance->context);
	ovs_hobj *h = ovs_handle_remove(&st->handles, result->hierarchy_result_id, OVS_H_HRESULT);
	if (!h)
		return ovs_handle_invalid(&st->handles, result->hierarchy_result_id, "hierarchy result");
	ovs_hobj_unref(h);
	return OVSTAGE_OK;
}

OVSTAGE_API ovstage_enqueue_result_t ovstage_release_hierarchy(ovstage_instance_t *instance,
							       ovstage_hierarchy_handle_t handle)
{
	ovs_err_clear();
	if (!instance || !instance->context)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "ovstage_release_hierarchy: instance is NULL"));
	return ovs_release_handle_op(ovs_stage_of(instance->context), handle, OVS_H_HIER, "hierarchy handle");
}
