/*
 * hierarchy_compute.c — ovstage_compute_hierarchy: world matrices from local transforms along the
 * path hierarchy, CPU_INCREMENTAL on the job system and GPU_INCREMENTAL / GPU_GLOBAL as kernels on the
 * CUDA backend (hierarchy_gpu.c); hierarchy.h states the contract.
 *
 * The op runs in the stage's seal chain (submitted like a floor advance, after the previous one,
 * and the next one after it), so it reads the columns' version chains and publishes the world
 * matrices as a seal does, with nothing else touching them. The per-stage cache (the forest, the
 * version last published, the worlds of prims without a world row) is touched only by these ops,
 * which the chain serialises.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "column.h"
#include "device.h"
#include "errors.h"
#include "gpu.h"
#include "hierarchy.h"
#include "hierarchy_forest.h"
#include "hierarchy_gpu.h"
#include "hierarchy_walk.h"
#include "ops.h"
#include "rows_sort.h"
#include "seal.h"
#include "sequencer.h"
#include "version.h"
#include "xform.h"

#define XFORM_BYTES (16 * sizeof(double))

static const char *const g_col_names[OVS_HF_COLS] = { "omni:xform", "omni:resetXformStack",
						       "omni:fabric:worldMatrix" };

struct ovs_hier {
	uint64_t default_model;   /* RUNTIME_DEFAULT resolves to this (captured at stage creation) */
	bool valid;               /* the cache below holds a compute's result */
	bool forest_ok;           /* f was built from the prims and rows that key names (kept across
	                           * computes, also when the worlds must all be recomputed) */
	ovs_hforest f;            /* the forest of that compute */
	double (*world)[16];      /* GPU models: their world matrix per node (a download, when the world
	                           * column lives on the host); NULL for the CPU model, whose worlds are
	                           * the rows of `out` and, for nodes without a world row, `extra` */
	double (*extra)[16];      /* CPU model: the worlds of the nodes without a world row (f.xslot) */
	uint32_t *slot;           /* CPU model, during a compute: node -> its row's index in the sparse
	                           * output delta (OVS_HF_NONE: not recomputed; reset after each compute) */
	ovs_gpu *gpu;             /* a GPU model's cache: the device context dworld lives on (NULL: the
	                           * CPU model's; the other kind of model then starts over) */
	double *dworld;           /* a GPU model's world matrix per node, in device memory */
	size_t dworld_bytes;      /* what was allocated for it (its free gives the size back) */
	ovstage_ordinal_t input;  /* its input ordinal */
	uint64_t key[5];          /* what the forest was built from (rows per column, prim deletes and
	                           * creations) */
	ovs_version *out;         /* the world-matrix version it published (a reference), or NULL */
	uint64_t recomputed;      /* nodes the last compute recomputed (statistics, for tests) */
	uint64_t builds;          /* forests built (statistics, for tests) */
	uint32_t full_share;      /* CPU model: dirty nodes, in 1/1024 of the nodes, above which the
	                           * full path is taken (HC_FULL_SHARE; tests change it) */
	bool last_full;           /* the last compute took the full path (statistics, for tests) */
};

/* The CPU model's switch: an incremental compute costs, per dirty node, its product with the rows
 * fetched out of order, a slot in the sparse delta, the seal's scattered copy of its row and the
 * replays of that delta onto spare chunks; a full one, per node, the product over whole trees into a
 * FULL delta the seal adopts without a copy. Measured (docs/performance.md, session 13) the full
 * path is the cheaper one once the dirty subtrees hold more than about a quarter of the nodes. */
#define HC_FULL_SHARE 256u
/* Below this many nodes both paths take microseconds; the incremental one is kept there, since a FULL
 * delta makes the world column's spare chunks unusable while it is retained (store/chunk.c). */
#define HC_FULL_MIN_NODES 4096u

ovs_hier *ovs_hier_create(uint64_t default_model)
{
	ovs_hier *h = calloc(1, sizeof *h);
	if (h) {
		h->default_model = default_model;
		h->full_share = HC_FULL_SHARE;
	}
	return h;
}

static void cache_drop(ovs_hier *h)
{
	ovs_hforest_free(&h->f);
	h->forest_ok = false;
	free(h->world);
	h->world = NULL;
	free(h->extra);
	h->extra = NULL;
	free(h->slot);
	h->slot = NULL;
	if (h->dworld)
		ovs_gpu_free(h->gpu, h->dworld, h->dworld_bytes); /* stream-ordered on the engine stream */
	h->dworld = NULL;
	h->gpu = NULL;
	if (h->out)
		ovs_version_unref(h->out);
	h->out = NULL;
	h->valid = false;
}

void ovs_hier_destroy(ovs_hier *h)
{
	if (!h)
		return;
	cache_drop(h);
	free(h);
}

uint64_t ovs_hier_default_model(const ovs_hier *h)
{
	return h->default_model;
}

uint64_t ovs_hier_last_recomputed(const ovs_hier *h)
{
	return h->recomputed;
}

uint64_t ovs_hier_forest_builds(const ovs_hier *h)
{
	return h->builds;
}

bool ovs_hier_last_full(const ovs_hier *h)
{
	return h->last_full;
}

void ovs_hier_set_full_share(ovs_hier *h, uint32_t per1024)
{
	h->full_share = per1024;
}

/* ---- one compute ------------------------------------------------------------------------------- */

typedef struct hc_op {
	ovs_stage *st;
	ovstage_ordinal_t input, output;
	uint64_t model;           /* the resolved model */
	uint64_t seq;             /* this op's id (orders its delta after earlier ones at the ordinal) */
	ovs_exec *gx;             /* GPU models: the engine stream of the device the compute runs on */
	bool dev[OVS_HF_COLS];    /* GPU models: which contract columns live on that device */
} hc_op;

/* A column's version as of ordinal o, walking the seal-owned chain (the op runs in the chain).
 * *gone when no retained version answers and versions were already dropped. */
static ovs_version *as_of(ovs_column *c, ovstage_ordinal_t o, bool *gone)
{
	ovs_version *v = c ? c->latest : NULL;
	while (v && v->ordinal > o)
		v = atomic_load_explicit(&v->older, memory_order_relaxed); /* relaxed: seal-owned chain */
	/* relaxed: dropped_through is written by seals, which the chain orders before us. */
	if (!v && c && c->latest && atomic_load_explicit(&c->dropped_through, memory_order_relaxed))
		*gone = true;
	return v;
}

/* A growable list of node ids. */
typedef struct ulist {
	uint32_t *v;
	size_t n, cap;
} ulist;

static bool ulist_push(ulist *l, uint32_t x)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		uint32_t *nv = realloc(l->v, cap * sizeof *nv);
		if (!nv)
			return false;
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = x;
	return true;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Splits subtrees larger than `limit` into their root (computed first, serially: `pre`) and their
 * children's subtrees, until every item is small enough to balance across workers. */
static bool split_items(const ovs_hforest *f, ulist *items, ulist *pre, uint32_t limit)
{
	for (size_t k = 0; k < items->n;) {
		uint32_t r = items->v[k];
		if (f->size[r] <= limit) {
			k++;
			continue;
		}
		items->v[k] = items->v[--items->n]; /* replace by its children */
		if (!ulist_push(pre, r))
			return false;
		for (uint32_t c = r + 1; c < r + f->size[r]; c += f->size[c])
			if (!ulist_push(items, c))
				return false;
	}
	if (pre->n > 1)
		qsort(pre->v, pre->n, sizeof *pre->v, cmp_u32); /* preorder: ancestors first */
	return true;
}

/* Appends the nodes whose rows changed in versions with ordinals in (a, b]. 1: complete; 0: the
 * history does not say (a full write, a layout change, or versions already dropped); -1: OOM. */
static int collect_changes(ovs_column *c, const ovs_hforest *f, int k, ovstage_ordinal_t a, ovstage_ordinal_t b,
			   ulist *out)
{
	if (!c)
		return 1;
	ovs_version *v = c->latest;
	while (v && v->ordinal > b)
		v = atomic_load_explicit(&v->older, memory_order_relaxed); /* relaxed: seal-owned chain */
	while (v && v->ordinal > a) {
		ovs_version *older = atomic_load_explicit(&v->older, memory_order_relaxed);
		if (v->all_changed || (older && older->generation != v->generation))
			return 0;
		const ovs_chset *cs = v->cs;
		const uint32_t *list = cs->run ? NULL : ovs_chset_list(cs);
		for (uint32_t j = 0; j < cs->n; j++) {
			uint32_t r = cs->run ? cs->row0 + j : list[j];
			if (r < f->nrows[k] && f->node_of[k][r] != OVS_HF_NONE && !ulist_push(out, f->node_of[k][r]))
				return -1;
		}
		v = older;
	}
	/* relaxed: written by seals, ordered before us by the chain */
	return v || !atomic_load_explicit(&c->dropped_through, memory_order_relaxed) ? 1 : 0;
}

/* The subtrees under the changed nodes, as disjoint items (the changed list is sorted in place). */
static bool dirty_items(const ovs_hforest *f, ulist *changed, ulist *items)
{
	if (changed->n > 1) { /* a radix sort: qsort's comparisons were a visible part of the plan */
		uint32_t *tmp = malloc(changed->n * sizeof *tmp);
		ovs_rows_sort(changed->v, tmp, changed->n); /* tmp NULL: in place */
		free(tmp);
	}
	uint32_t end = 0;
	for (size_t j = 0; j < changed->n; j++) {
		uint32_t i = changed->v[j];
		if (j && i < end)
			continue; /* inside the previous subtree */
		if (!ulist_push(items, i))
			return false;
		end = i + f->size[i];
	}
	return true;
}

static void cache_key(ovs_stage *st, ovs_column *const cols[OVS_HF_COLS], uint64_t key[5])
{
	for (int k = 0; k < OVS_HF_COLS; k++)
		/* acquire: pairs with row creation's publication of nrows */
		key[k] = cols[k] ? atomic_load_explicit(&cols[k]->nrows, memory_order_acquire) : 0;
	/* acquire: pairs with ovs_prims_need_reassert's release */
	key[3] = atomic_load_explicit(&st->store.prim_deletes, memory_order_acquire);
	/* acquire: pairs with ovs_prim_set's release (a prim that came to exist, maybe on an old row) */
	key[4] = atomic_load_explicit(&st->store.prim_creations, memory_order_acquire);
}

/* Schema check of a contract column (exists and has a schema); NULL message when it fits. */
static bool schema_fits(ovs_column *c, int k, char *err, size_t errlen)
{
	/* acquire: the schema is published (release) with has_schema */
	if (!c || !atomic_load_explicit(&c->has_schema, memory_order_acquire))
		return true;
	const ovs_schema *s = &c->schema;
	bool ok = k == OVS_HF_RESET ? !s->is_array && s->dtype.bits == 8 && s->dtype.lanes == 1
				    : !s->is_array && s->dtype.code == kDLFloat && s->dtype.bits == 64 && s->dtype.lanes == 16;
	if (!ok)
		ovs_err_format(err, errlen, "compute_hierarchy: column %s has dtype (code %u, bits %u, lanes %u)%s; the "
			       "transform contract needs %s", g_col_names[k], s->dtype.code, s->dtype.bits, s->dtype.lanes,
			       s->is_array ? " with array rows" : "",
			       k == OVS_HF_RESET ? "fixed 8-bit rows (bool)" : "fixed float64 x16 rows (MATRIX)");
	return ok;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The delta's values: rows of the host world matrices, or (a world column on the compute's device) a
 * device buffer gathered from the device ones by a kernel. pairs[j] = row << 32 | node, sorted. */
static bool output_values(const ovs_hier *h, hc_op *o, const uint64_t *pairs, size_t n, ovs_delta *d)
{
	if (!(o->gx && o->dev[OVS_HF_WORLD])) {
		d->values = malloc((n + 1) * XFORM_BYTES);
		for (size_t j = 0; d->values && j < n; j++)
			memcpy(d->values + j * XFORM_BYTES, h->world[(uint32_t)pairs[j]], XFORM_BYTES);
		return d->values != NULL;
	}
	uint32_t *nodes = malloc((n + 1) * sizeof *nodes);
	d->values = nodes ? ovs_delta_array_in(&o->st->store, o->gx, (n ? n : 1) * XFORM_BYTES, &d->values_buf) : NULL;
	if (d->values) {
		for (size_t j = 0; j < n; j++)
			nodes[j] = (uint32_t)pairs[j];
		/* the node list is uploaded before it returns (cuda_memops.c), so it may go now */
		ovs_gpu_memops()->gather_rows(o->gx, d->values, h->dworld, nodes, NULL, (uint32_t)n, XFORM_BYTES);
	}
	free(nodes);
	return d->values != NULL;
}

/* Marks world row r in a bitmap of rows. */
static inline void mark_row(uint64_t *mark, uint32_t r)
{
	if (r != OVS_HF_NONE)
		mark[r / 64] |= 1ull << (r % 64);
}

/* The (row, node) pairs of the items' subtrees and the pre nodes, already in row order: their world
 * rows marked in a bitmap of rows, which is then read a word at a time (a zero word skips 64 rows).
 * For many nodes, where sorting their pairs costs more: the bitmap is nrows / 8 bytes (cached) and
 * the reverse map is read only at the marked rows. SIZE_MAX: out of memory. */
static size_t pairs_by_rows(const ovs_hforest *f, const ulist *items, const ulist *pre, uint64_t *pairs)
{
	size_t words = ((size_t)f->nrows[OVS_HF_WORLD] + 63) / 64;
	uint64_t *mark = calloc(words + 1, sizeof *mark);
	if (!mark)
		return SIZE_MAX;
	const uint32_t *wrow = f->row[OVS_HF_WORLD];
	for (size_t k = 0; k < pre->n; k++)
		mark_row(mark, wrow[pre->v[k]]);
	for (size_t k = 0; k < items->n; k++)
		for (uint32_t i = items->v[k]; i < items->v[k] + f->size[items->v[k]]; i++)
			mark_row(mark, wrow[i]);
	const uint32_t *node_of = f->node_of[OVS_HF_WORLD];
	size_t n = 0;
	for (size_t w = 0; w < words; w++)
		for (uint64_t m = mark[w]; m; m &= m - 1) {
			uint32_t r = (uint32_t)(w * 64 + (size_t)__builtin_ctzll(m));
			pairs[n++] = (uint64_t)r << 32 | node_of[r];
		}
	free(mark);
	return n;
}

/* The (row, node) pairs of the world rows to publish (items' subtrees and pre nodes, or every node),
 * sorted by row, in *out (malloc'd). Their number, or SIZE_MAX when out of memory. */
static size_t world_pairs(const ovs_hforest *f, const ulist *items, const ulist *pre, bool all, uint64_t **out)
{
	size_t cap = all ? f->n : pre->n;
	if (!all)
		for (size_t k = 0; k < items->n; k++)
			cap += f->size[items->v[k]];
	uint64_t *pairs = malloc((cap + 1) * sizeof *pairs); /* row << 32 | node */
	*out = pairs;
	if (!pairs)
		return SIZE_MAX;
	size_t n = 0;
	const uint32_t *wrow = f->row[OVS_HF_WORLD];
	if (all) {
		/* in row order through the reverse map (each row's node, or none): sorted as made */
		const uint32_t *node_of = f->node_of[OVS_HF_WORLD];
		for (uint32_t r = 0; r < f->nrows[OVS_HF_WORLD]; r++)
			if (node_of[r] != OVS_HF_NONE)
				pairs[n++] = (uint64_t)r << 32 | node_of[r];
		return n;
	}
	if (cap * 32 >= f->nrows[OVS_HF_WORLD])
		return pairs_by_rows(f, items, pre, pairs);
	for (size_t k = 0; k < pre->n; k++)
		if (wrow[pre->v[k]] != OVS_HF_NONE)
			pairs[n++] = (uint64_t)wrow[pre->v[k]] << 32 | pre->v[k];
	for (size_t k = 0; k < items->n; k++)
		for (uint32_t i = items->v[k]; i < items->v[k] + f->size[items->v[k]]; i++)
			if (wrow[i] != OVS_HF_NONE)
				pairs[n++] = (uint64_t)wrow[i] << 32 | i;
	if (n > 1)
		qsort(pairs, n, sizeof *pairs, cmp_u64); /* rows ascending: a sorted sparse delta */
	return n;
}

/* GPU models: the world rows to publish as a sparse delta, from their world matrices per node. */
static ovs_delta *output_delta(const ovs_hier *h, const ulist *items, const ulist *pre, bool all, hc_op *o)
{
	uint64_t *pairs;
	size_t n = world_pairs(&h->f, items, pre, all, &pairs);
	ovs_delta *d = n == SIZE_MAX ? NULL : calloc(1, sizeof *d);
	uint32_t *rows = d ? malloc((n + 1) * sizeof *rows) : NULL;
	if (!d || !rows || !output_values(h, o, pairs, n, d)) {
		free(pairs);
		free(rows);
		ovs_delta_free(d); /* with the values it holds */
		return NULL;
	}
	for (size_t j = 0; j < n; j++)
		rows[j] = (uint32_t)(pairs[j] >> 32);
	free(pairs);
	d->kind = OVS_DELTA_SPARSE;
	d->ordinal = o->output;
	d->seq = o->seq;
	d->nrows = (uint32_t)n;
	d->rows = rows;
	return d;
}

/* GPU models: recomputes the items' subtrees as kernels on the op's device; then the world matrices
 * are downloaded when the world column lives on the host, which also waits for the kernels and
 * reports their errors. 0 OK, else a status with err set. */
static ovstage_api_status_t recompute_gpu(ovs_hier *h, const ovs_version *vx, const ovs_version *vr, hc_op *o,
					  ulist *items, char *err, size_t errlen)
{
	if (!ovs_hier_gpu_run(o->gx, &h->f, vx, o->dev[OVS_HF_XFORM], vr, o->dev[OVS_HF_RESET], items->v, items->n,
			      h->dworld, err, errlen))
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	if (o->gx->err) {
		ovs_err_format(err, errlen, "compute_hierarchy: the hierarchy kernels on CUDA device %d failed (%s)",
			       ovs_gpu_device(o->gx->gpu), ovs_gpu_error_name(o->gx->err));
		return OVSTAGE_ERROR_OP_FAILED;
	}
	if (!o->dev[OVS_HF_WORLD] && h->f.n &&
	    !ovs_gpu_copy_to_host(o->gx, h->world, h->dworld, (size_t)h->f.n * XFORM_BYTES, err, errlen))
		return OVSTAGE_ERROR_OP_FAILED;
	return OVSTAGE_OK;
}

/* What changed in the inputs since the cache's compute, as nodes: 1 listed in changed, 0 the history
 * does not say (recompute all), -1 out of memory. */
static int input_changes(ovs_hier *h, ovs_column *const cols[OVS_HF_COLS], ovstage_ordinal_t input, ulist *changed)
{
	for (int k = OVS_HF_XFORM; k <= OVS_HF_RESET && input > h->input; k++) {
		int r = collect_changes(cols[k], &h->f, k, h->input, input, changed);
		if (r <= 0)
			return r;
	}
	return 1;
}

/* The roots of every tree, as items (a full recompute). */
static bool all_roots(const ovs_hforest *f, ulist *items)
{
	for (uint32_t i = 0; i < f->n; i++)
		if (f->parent[i] == OVS_HF_NONE && !ulist_push(items, i))
			return false;
	return true;
}

/* GPU models: chooses full or incremental, computes, and returns what to recompute (items) and
 * whether every world row must be published. GPU_GLOBAL is always full; a cache of the other kind of
 * model (host / device) is never reused. 0 OK, else a status with err set. */
static ovstage_api_status_t plan_and_compute_gpu(ovs_stage *st, ovs_exec *x, ovs_column *const cols[OVS_HF_COLS],
						 const ovs_version *vx, const ovs_version *vr, hc_op *o, ulist *items,
						 bool *all, char *err, size_t errlen)
{
	ovs_hier *h = st->hier;
	uint64_t key[5];
	cache_key(st, cols, key);
	bool full = !h->valid || memcmp(key, h->key, sizeof key) != 0 || o->input < h->input ||
		    o->model == OVSTAGE_HIERARCHY_COMPUTATION_MODEL_GPU_GLOBAL || h->gpu != o->gx->gpu || !h->world;
	ulist changed = { 0 };
	int r = full ? 0 : input_changes(h, cols, o->input, &changed);
	if (r < 0)
		goto oom;
	full = r == 0;
	if (full) {
		cache_drop(h);
		h->builds++;
		if (!ovs_hforest_build(&h->f, st, x, cols))
			goto oom;
		h->world = malloc(((size_t)h->f.n + 1) * sizeof *h->world);
		if (!h->world)
			goto oom;
		h->gpu = o->gx->gpu;
		h->dworld_bytes = ((size_t)h->f.n + 1) * XFORM_BYTES;
		h->dworld = ovs_gpu_alloc(h->gpu, h->dworld_bytes);
		if (!h->dworld || !all_roots(&h->f, items))
			goto oom;
		memcpy(h->key, key, sizeof key);
	} else if (!dirty_items(&h->f, &changed, items)) {
		goto oom;
	}
	free(changed.v);
	changed.v = NULL;
	ovstage_api_status_t s = recompute_gpu(h, vx, vr, o, items, err, errlen);
	if (s != OVSTAGE_OK) {
		cache_drop(h);
		return s;
	}
	h->recomputed = 0;
	for (size_t k = 0; k < items->n; k++)
		h->recomputed += h->f.size[items->v[k]];
	h->input = o->input;
	h->valid = true;
	/* every row when the forest is new or someone else wrote the world column since our output */
	*all = full || cols[OVS_HF_WORLD]->latest != h->out;
	return OVSTAGE_OK;
oom:
	free(changed.v);
	cache_drop(h);
	ovs_err_format(err, errlen, "compute_hierarchy: out of memory");
	return OVSTAGE_ERROR_OUT_OF_MEMORY;
}

/* Publishes the delta as a new sealed version of the world column at the output ordinal. */
static ovstage_api_status_t publish_world(ovs_stage *st, ovs_exec *x, ovs_column *wc, ovs_delta *d, char *err,
					  size_t errlen)
{
	ovs_hier *h = st->hier;
	d->shape_known = true;
	d->sorted = d->kind == OVS_DELTA_SPARSE;
	d->contig = d->sorted;
	for (uint32_t j = 1; d->sorted && j < d->nrows; j++)
		d->contig = d->contig && d->rows[j] == d->rows[j - 1] + 1;
	ovs_column_push_delta(&st->store, wc, d);
	ovs_column *one[1] = { wc };
	ovstage_api_status_t s = ovs_store_seal(&st->store, x, one, 1, d->ordinal, false, err, errlen);
	if (s != OVSTAGE_OK)
		return s;
	if (h->out)
		ovs_version_unref(h->out);
	h->out = wc->latest; /* what we published: the next compute may then publish changed rows only */
	ovs_version_ref(h->out);
	return OVSTAGE_OK;
}

/* ---- the CPU model ------------------------------------------------------------------------------
 * The worlds are computed once, straight into the output delta, and the seal adopts it: a FULL delta
 * (every world row, in row order, in a pooled buffer that becomes the new version's chunks without a
 * copy) when every node is recomputed and every world row belongs to a node, else a sparse delta whose
 * values are written by slot (the row's index in the delta's sorted rows). A node that is not
 * recomputed is read from the version the last compute published (still the column's latest: else
 * everything is recomputed), one without a world row from h->extra. No world matrix per node is kept. */

/* CPU model: whether recomputing every world costs less than the dirty subtrees (HC_FULL_SHARE). */
static bool full_is_cheaper(const ovs_hier *h, const ulist *items)
{
	uint64_t dirty = 0;
	if (h->f.n < HC_FULL_MIN_NODES)
		return false;
	for (size_t k = 0; k < items->n; k++)
		dirty += h->f.size[items->v[k]];
	return dirty * 1024 > (uint64_t)h->f.n * h->full_share;
}

/* CPU model: the forest (kept while the prims and rows it was built from stay) and what to
 * recompute: every tree (*all) or the subtrees under changed inputs. 0 OK, else a status with err. */
static ovstage_api_status_t plan_cpu(ovs_stage *st, ovs_exec *x, ovs_column *const cols[OVS_HF_COLS], hc_op *o,
				     ulist *items, bool *all, char *err, size_t errlen)
{
	ovs_hier *h = st->hier;
	uint64_t key[5];
	cache_key(st, cols, key);
	bool rebuild = !h->forest_ok || memcmp(key, h->key, sizeof key) != 0 || h->world || h->gpu;
	*all = rebuild || !h->valid || o->input < h->input || cols[OVS_HF_WORLD]->latest != h->out;
	ulist changed = { 0 };
	int r = *all ? 0 : input_changes(h, cols, o->input, &changed);
	if (r < 0)
		goto oom;
	*all = r == 0;
	if (rebuild) {
		cache_drop(h);
		h->builds++;
		if (!ovs_hforest_build(&h->f, st, x, cols))
			goto oom;
		h->extra = malloc(((size_t)h->f.nx + 1) * sizeof *h->extra);
		if (!h->extra)
			goto oom;
		memcpy(h->key, key, sizeof key);
		h->forest_ok = true;
	}
	bool ok = *all ? all_roots(&h->f, items) : dirty_items(&h->f, &changed, items);
	if (ok && !*all && full_is_cheaper(h, items)) {
		items->n = 0;
		*all = true;
		ok = all_roots(&h->f, items);
	}
	free(changed.v);
	if (ok)
		return OVSTAGE_OK;
	changed.v = NULL;
oom:
	free(changed.v);
	cache_drop(h);
	ovs_err_format(err, errlen, "compute_hierarchy: out of memory");
	return OVSTAGE_ERROR_OUT_OF_MEMORY;
}

/* CPU model: h->slot, all none, made at the first sparse delta of a forest: a full compute (the first
 * one of a stage) does not need it, and its 4 bytes per node written in a serial loop were part of
 * the first compute. false when out of memory. */
static bool cpu_slots(ovs_hier *h)
{
	if (!h->slot && (h->slot = malloc(((size_t)h->f.n + 1) * sizeof *h->slot)) != NULL)
		memset(h->slot, 0xff, ((size_t)h->f.n + 1) * sizeof *h->slot); /* OVS_HF_NONE */
	return h->slot != NULL;
}

/* CPU model: the output delta, its values not yet written (*out: where they go), and h->slot set for
 * a sparse one. FULL when every node is recomputed and every world row is a node's. NULL: OOM. */
static ovs_delta *cpu_delta(ovs_hier *h, ovs_store *store, const ovs_exec *x, const ulist *items, const ulist *pre,
			    bool all, const hc_op *o, unsigned char **out)
{
	const ovs_hforest *f = &h->f;
	uint32_t nw = f->nrows[OVS_HF_WORLD];
	ovs_delta *d = calloc(1, sizeof *d);
	*out = NULL;
	if (!d)
		return NULL;
	d->ordinal = o->output;
	d->seq = o->seq;
	if (all && nw && f->n - f->nx == nw) {
		d->kind = OVS_DELTA_FULL;
		d->nrows = nw;
		d->full = ovs_buffer_new_par(store, x, (size_t)nw * XFORM_BYTES); /* pooled, else faulted in parallel */
		*out = d->full ? d->full->data : NULL;
	} else if (cpu_slots(h)) {
		uint64_t *pairs;
		size_t n = world_pairs(f, items, pre, all, &pairs);
		d->kind = OVS_DELTA_SPARSE;
		d->nrows = n == SIZE_MAX ? 0 : (uint32_t)n;
		d->rows = n == SIZE_MAX ? NULL : ovs_delta_array(store, (n + 1) * sizeof *d->rows, &d->rows_buf);
		d->values = d->rows ? ovs_delta_array(store, (n + 1) * XFORM_BYTES, &d->values_buf) : NULL;
		for (size_t j = 0; d->values && j < n; j++) {
			d->rows[j] = (uint32_t)(pairs[j] >> 32);
			h->slot[(uint32_t)pairs[j]] = (uint32_t)j;
		}
		free(pairs);
		*out = d->values;
	}
	if (*out)
		return d;
	d->nrows = 0; /* no slots were set */
	ovs_delta_free(d);
	return NULL;
}

/* CPU model: the slots a sparse delta set go back to none. */
static void cpu_slots_reset(ovs_hier *h, const ovs_delta *d)
{
	for (uint32_t j = 0; d->kind == OVS_DELTA_SPARSE && j < d->nrows; j++)
		h->slot[h->f.node_of[OVS_HF_WORLD][d->rows[j]]] = OVS_HF_NONE;
}

/* CPU model: plans, computes into the output delta (split roots serially, then the subtrees in
 * parallel) and publishes it. 0 OK, else a status with err set. */
static ovstage_api_status_t compute_cpu(ovs_stage *st, ovs_exec *x, ovs_column *const cols[OVS_HF_COLS],
					const ovs_version *vx, const ovs_version *vr, hc_op *o, char *err, size_t errlen)
{
	ovs_hier *h = st->hier;
	ulist items = { 0 }, pre = { 0 };
	bool all = false;
	ovstage_api_status_t s = plan_cpu(st, x, cols, o, &items, &all, err, errlen);
	uint32_t limit = h->f.n / 64 > 1024 ? h->f.n / 64 : 1024;
	ovs_delta *d = NULL;
	unsigned char *out = NULL;
	if (s == OVSTAGE_OK && (items.n || all) &&
	    (!split_items(&h->f, &items, &pre, limit) || !(d = cpu_delta(h, &st->store, x, &items, &pre, all, o, &out)))) {
		ovs_err_format(err, errlen, "compute_hierarchy: out of memory");
		s = OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	if (s == OVSTAGE_OK && d) {
		ovs_hwalk w = { &h->f, out, d->kind == OVS_DELTA_FULL ? NULL : h->slot, all ? NULL : h->out, h->extra,
				vx, vr };
		bool walked = ovs_hwalk_run(x, &w, items.v, items.n, pre.v, pre.n);
		cpu_slots_reset(h, d);
		h->last_full = all;
		h->recomputed = pre.n;
		for (size_t k = 0; k < items.n; k++)
			h->recomputed += h->f.size[items.v[k]];
		if (walked && d->nrows) {
			s = publish_world(st, x, cols[OVS_HF_WORLD], d, err, errlen);
		} else {
			ovs_delta_free(d);
			if (!walked) {
				ovs_err_format(err, errlen, "compute_hierarchy: out of memory");
				s = OVSTAGE_ERROR_OUT_OF_MEMORY;
			}
		}
	} else if (s == OVSTAGE_OK) {
		h->recomputed = 0;
		h->last_full = false;
	}
	if (s == OVSTAGE_OK) {
		h->input = o->input;
		h->valid = true;
	}
	free(items.v);
	free(pre.v);
	return s;
}

/* Where the contract columns live: CPU_INCREMENTAL needs them on the host; a GPU model runs on the
 * CUDA device of those on a device (all on one), else on the instance's CUDA device (or 0): *dev. */
static ovstage_api_status_t check_devices(hc_op *o, ovs_column *const cols[OVS_HF_COLS], int *dev, char *err,
					  size_t errlen)
{
	*dev = -1;
	for (int k = 0; k < OVS_HF_COLS; k++) {
		/* acquire: has_schema publishes the schema's device */
		if (!cols[k] || !atomic_load_explicit(&cols[k]->has_schema, memory_order_acquire) ||
		    cols[k]->schema.device.device_type != kDLCUDA)
			continue;
		int d = (int)cols[k]->schema.device.device_id;
		if (o->model == OVSTAGE_HIERARCHY_COMPUTATION_MODEL_CPU_INCREMENTAL) {
			ovs_err_format(err, errlen, "compute_hierarchy: column %s lives on CUDA device %d; CPU_INCREMENTAL "
				       "needs the transform columns on the CPU (GPU_INCREMENTAL and GPU_GLOBAL read them "
				       "there)", g_col_names[k], d);
			return OVSTAGE_ERROR_NOT_SUPPORTED;
		}
		if (*dev >= 0 && d != *dev) {
			ovs_err_format(err, errlen, "compute_hierarchy: column %s lives on CUDA device %d and another "
				       "transform column on device %d; the GPU models need them on one device",
				       g_col_names[k], d, *dev);
			return OVSTAGE_ERROR_NOT_SUPPORTED;
		}
		*dev = d;
		o->dev[k] = true;
	}
	if (*dev < 0 && o->model != OVSTAGE_HIERARCHY_COMPUTATION_MODEL_CPU_INCREMENTAL)
		*dev = o->st->cuda_device >= 0 ? o->st->cuda_device : 0;
	return OVSTAGE_OK;
}

/* Execution-time checks: inputs sealed through the input ordinal, the output ordinal sealed and
 * not below the world column's latest version, the schemas of the contract. */
static ovstage_api_status_t check_columns(hc_op *o, ovs_column *const cols[OVS_HF_COLS], char *err, size_t errlen)
{
	for (int k = 0; k < OVS_HF_COLS; k++) {
		if (!cols[k])
			continue;
		if (!schema_fits(cols[k], k, err, errlen))
			return OVSTAGE_ERROR_INVALID_ARGUMENT;
		ovstage_ordinal_t want = k == OVS_HF_WORLD ? o->output : o->input;
		/* acquire: pairs with publish's release of the floor (the snapshot through it is out) */
		uint64_t fl = atomic_load_explicit(&cols[k]->floor, memory_order_acquire);
		if (want > fl) {
			ovs_err_format(err, errlen, "compute_hierarchy: %s %llu is above the write floor %llu of %s: "
				       "seal it first (advance_write_floor)", k == OVS_HF_WORLD ? "output_ordinal" : "input_ordinal",
				       (unsigned long long)want, (unsigned long long)fl, g_col_names[k]);
			return OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION;
		}
	}
	ovs_version *wl = cols[OVS_HF_WORLD] ? cols[OVS_HF_WORLD]->latest : NULL;
	if (wl && wl->ordinal > o->output) {
		ovs_err_format(err, errlen, "compute_hierarchy: output_ordinal %llu is below the latest sealed ordinal %llu "
			       "of %s (computed rows can only stamp its latest state)", (unsigned long long)o->output,
			       (unsigned long long)wl->ordinal, g_col_names[OVS_HF_WORLD]);
		return OVSTAGE_ERROR_INVALID_ARGUMENT;
	}
	return OVSTAGE_OK;
}

static ovstage_api_status_t compute(hc_op *o, ovs_exec *x, char *err, size_t errlen)
{
	ovs_stage *st = o->st;
	ovs_column *cols[OVS_HF_COLS];
	for (int k = 0; k < OVS_HF_COLS; k++) {
		ovx_token_t t = ovs_pd_find_token(st->pd, g_col_names[k], strlen(g_col_names[k]));
		cols[k] = t ? ovs_column_find(&st->store, t) : NULL;
	}
	int dev;
	ovstage_api_status_t s = check_devices(o, cols, &dev, err, errlen);
	if (s == OVSTAGE_OK)
		s = check_columns(o, cols, err, errlen);
	if (s != OVSTAGE_OK || !cols[OVS_HF_WORLD] || !cols[OVS_HF_WORLD]->latest)
		return s; /* no world rows to update: nothing to do (the column is never created) */
	bool gone = false;
	const ovs_version *vx = as_of(cols[OVS_HF_XFORM], o->input, &gone);
	const ovs_version *vr = as_of(cols[OVS_HF_RESET], o->input, &gone);
	if (gone) {
		ovs_err_format(err, errlen, "compute_hierarchy: input_ordinal %llu is below the retained history of the "
			       "transform inputs", (unsigned long long)o->input);
		return OVSTAGE_ERROR_OUT_OF_RANGE;
	}
	ovs_exec gx;
	if (dev >= 0) {
		if (!ovs_store_exec(&st->store, (DLDevice){ kDLCUDA, dev }, x->w, &gx, err, errlen))
			return OVSTAGE_ERROR_NOT_SUPPORTED;
		o->gx = &gx; /* this frame's: cleared before it returns */
	}
	if (!o->gx) {
		s = compute_cpu(st, x, cols, vx, vr, o, err, errlen);
		if (s != OVSTAGE_OK)
			cache_drop(st->hier); /* a failed op leaves no half-updated cache behind */
		return s;
	}
	ulist items = { 0 };
	bool all = false;
	s = plan_and_compute_gpu(st, x, cols, vx, vr, o, &items, &all, err, errlen);
	if (s == OVSTAGE_OK && (all || items.n)) {
		ulist none = { 0 };
		ovs_delta *d = output_delta(st->hier, &items, &none, all, o);
		if (!d) {
			ovs_err_format(err, errlen, "compute_hierarchy: out of memory");
			s = OVSTAGE_ERROR_OUT_OF_MEMORY;
		} else if (o->gx->err) { /* the device delta's gather */
			ovs_delta_free(d);
			ovs_err_format(err, errlen, "compute_hierarchy: gathering the world rows on CUDA device %d failed (%s)",
				       ovs_gpu_device(o->gx->gpu), ovs_gpu_error_name(o->gx->err));
			s = OVSTAGE_ERROR_OP_FAILED;
		} else if (d->nrows == 0) {
			ovs_delta_free(d);
		} else {
			s = publish_world(st, x, cols[OVS_HF_WORLD], d, err, errlen);
		}
	}
	if (s != OVSTAGE_OK) {
		ovs_gpu_sync(o->gx); /* nothing of a failed op still runs on the device behind it */
		cache_drop(st->hier); /* a failed op leaves no half-updated cache behind */
	}
	free(items.v);
	o->gx = NULL;
	return s;
}

static void compute_body(jobs_worker *w, void *arg, jobs_run *run)
{
	hc_op *o = arg;
	o->seq = jobs_run_id(run);
	ovs_exec x = ovs_exec_cpu(w);
	char err[512] = "";
	/* CUDA work sets the thread's device: put it back (inline, this is the caller's thread) */
	int tdev = o->model != OVSTAGE_HIERARCHY_COMPUTATION_MODEL_CPU_INCREMENTAL ? ovs_gpu_thread_device() : -1;
	ovstage_api_status_t s = compute(o, &x, err, sizeof err);
	ovs_gpu_thread_restore(tdev);
	if (s != OVSTAGE_OK)
		ovs_op_fail(run, s, "%s", err);
}

static void compute_cleanup(void *arg, bool ran)
{
	(void)ran;
	free(arg);
}

/* ---- the call ---------------------------------------------------------------------------------- */

static const char *model_name(uint64_t m)
{
	switch (m) {
	case OVSTAGE_HIERARCHY_COMPUTATION_MODEL_CPU_INCREMENTAL: return "cpu-incremental";
	case OVSTAGE_HIERARCHY_COMPUTATION_MODEL_GPU_INCREMENTAL: return "gpu-incremental";
	case OVSTAGE_HIERARCHY_COMPUTATION_MODEL_GPU_GLOBAL: return "gpu-global";
	}
	return "?";
}

/* The model to run (RUNTIME_DEFAULT resolved), or a rejection with the last error set. */
static ovstage_api_status_t resolve_model(ovs_stage *st, ovstage_hierarchy_computation_model_id_t id, uint64_t *out)
{
	static const char fn[] = "ovstage_compute_hierarchy";
	uint64_t m = (uint64_t)id;
	if (id == OVSTAGE_HIERARCHY_COMPUTATION_MODEL_RUNTIME_DEFAULT)
		m = ovs_hier_default_model(st->hier);
	switch (m) {
	case OVSTAGE_HIERARCHY_COMPUTATION_MODEL_CPU_INCREMENTAL:
		*out = m;
		return OVSTAGE_OK;
	case OVSTAGE_HIERARCHY_COMPUTATION_MODEL_GPU_INCREMENTAL:
	case OVSTAGE_HIERARCHY_COMPUTATION_MODEL_GPU_GLOBAL:
		if (ovs_gpu_available()) {
			*out = m;
			return OVSTAGE_OK;
		}
		return ovs_err_set(OVSTAGE_ERROR_NOT_SUPPORTED,
				   "%s: model %s (%llu%s) runs on the CUDA backend, which this process cannot use (%s); "
				   "use OVSTAGE_HIERARCHY_COMPUTATION_MODEL_CPU_INCREMENTAL", fn, model_name(m),
				   (unsigned long long)m, id == OVSTAGE_HIERARCHY_COMPUTATION_MODEL_RUNTIME_DEFAULT
								  ? ", the configured runtime default" : "", ovs_gpu_reason());
	}
	return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s: computation_model_id %d is not a model", fn, (int)id);
}

OVSTAGE_API ovstage_enqueue_result_t ovstage_compute_hierarchy(
	ovstage_instance_t *instance, ovstage_hierarchy_computation_model_id_t computation_model_id,
	ovstage_ordinal_t input_ordinal, ovstage_ordinal_t output_ordinal)
{
	ovs_err_clear();
	if (!instance || !instance->context)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "ovstage_compute_hierarchy: instance is NULL"));
	ovs_stage *st = ovs_stage_of(instance->context);
	uint64_t model = 0;
	ovstage_api_status_t s = resolve_model(st, computation_model_id, &model);
	if (s != OVSTAGE_OK)
		return ovs_rejected(s);
	hc_op *o = calloc(1, sizeof *o);
	if (!o)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "ovstage_compute_hierarchy: out of memory"));
	o->st = st;
	o->model = model;
	o->input = input_ordinal;
	o->output = output_ordinal;
	/* In the seal chain: after the previous floor advance (so the inputs it sealed are in place and
	 * every write at or below them is done), before the next one. No column's floor moves. */
	ovs_op_desc d = { .fn = compute_body, .arg = o, .cleanup = compute_cleanup, .run_after_failure = true };
	return ovs_sequencer_submit_advance(st, 0, NULL, 0, false, &d);
}
