/*
 * hierarchy_walk.c — the CPU model's walk over subtrees of the forest (hierarchy_walk.h).
 *
 * A node's world costs a 4x4 product; what it waits for is memory: its local row, its output row and
 * the forest's entries for it sit at rows made in whatever order the prims were written, so each is a
 * cache miss unless fetched ahead. The walk therefore runs a cursor HW_AHEAD nodes ahead through the
 * batch's node stream (across subtree boundaries) prefetching those rows, and a second cursor twice
 * as far ahead that prefetches the forest's per-node entries where a new subtree starts (inside a
 * subtree they are consecutive, which the hardware prefetcher follows).
 */
#include "hierarchy_walk.h"

#include <stdlib.h>
#include <string.h>

#include "xform.h"

#define XFORM_BYTES (16 * sizeof(double))

enum {
	HW_AHEAD = 8,           /* nodes ahead whose rows are prefetched */
	HW_BATCH_NODES = 4096,  /* nodes per batch the workers take in turn (whole subtrees) */
};

static const double g_identity[16] = { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1 };

/* Where node i's world is written this compute (i is recomputed). */
static double *world_dst(const ovs_hwalk *c, uint32_t i)
{
	const ovs_hforest *f = c->f;
	uint32_t r = f->row[OVS_HF_WORLD][i];
	if (r == OVS_HF_NONE)
		return c->extra[f->xslot[i]];
	return (double *)(void *)(c->out + (size_t)(c->slot ? c->slot[i] : r) * XFORM_BYTES);
}

/* Node p's world as a child reads it: this compute's, or (not recomputed) the last one's. */
static const double *world_src(const ovs_hwalk *c, uint32_t p)
{
	const ovs_hforest *f = c->f;
	uint32_t r = f->row[OVS_HF_WORLD][p];
	if (r == OVS_HF_NONE || !c->slot || c->slot[p] != OVS_HF_NONE)
		return world_dst(c, p);
	/* the last compute published every node's row (else this one recomputes all): present */
	if (!c->prev || r >= c->prev->rows || !ovs_version_present(c->prev, r))
		return g_identity;
	return ovs_version_row_ptr(c->prev, XFORM_BYTES, r);
}

static void node_world(const ovs_hwalk *c, uint32_t i)
{
	const ovs_hforest *f = c->f;
	double local[16];
	uint32_t r = f->row[OVS_HF_XFORM][i];
	if (r != OVS_HF_NONE && c->vx && r < c->vx->rows && ovs_version_present(c->vx, r))
		memcpy(local, ovs_version_row_ptr(c->vx, XFORM_BYTES, r), XFORM_BYTES);
	else
		ovs_xform_identity(local);
	bool reset = false;
	r = f->row[OVS_HF_RESET][i];
	if (r != OVS_HF_NONE && c->vr && r < c->vr->rows && ovs_version_present(c->vr, r))
		reset = *(const unsigned char *)ovs_version_row_ptr(c->vr, 1, r) != 0;
	uint32_t p = f->parent[i];
	double *w = world_dst(c, i);
	if (reset || p == OVS_HF_NONE)
		memcpy(w, local, sizeof local);
	else
		ovs_xform_mul(local, world_src(c, p), w);
}

/* A position in a batch's node stream: node i of subtree k (items[k] = its root, end its end). */
typedef struct hw_cursor {
	const uint32_t *items; /* the subtree roots */
	size_t k, hi;          /* the current subtree, and the batch's end */
	uint32_t i, end;       /* the current node, and its subtree's end */
} hw_cursor;

static void cur_enter(hw_cursor *u, const ovs_hforest *f)
{
	if (u->k < u->hi) {
		u->i = u->items[u->k];
		u->end = u->i + f->size[u->i];
	}
}

/* Moves to the next node of the stream; true when it starts a new subtree (or the stream ended). */
static bool cur_next(hw_cursor *u, const ovs_hforest *f)
{
	if (u->k >= u->hi)
		return false;
	if (++u->i < u->end)
		return false;
	u->k++;
	cur_enter(u, f);
	return true;
}

/* Prefetch addresses of node i's inputs and output (NULL: none), and, for a subtree root (root), of
 * its parent's published world: the rows its compute will wait for. GCC judges a function that only
 * prefetches "pure" and drops its calls, so the prefetches are issued by the caller. */
typedef struct hw_rows {
	const char *local, *world, *reset, *parent;
} hw_rows;

static hw_rows node_rows(const ovs_hwalk *c, uint32_t i, bool root)
{
	const ovs_hforest *f = c->f;
	hw_rows a = { NULL, NULL, NULL, NULL };
	uint32_t r = f->row[OVS_HF_XFORM][i];
	if (r != OVS_HF_NONE && c->vx && r < c->vx->rows)
		a.local = ovs_version_row_ptr(c->vx, XFORM_BYTES, r);
	r = f->row[OVS_HF_RESET][i];
	if (r != OVS_HF_NONE && c->vr && r < c->vr->rows)
		a.reset = ovs_version_row_ptr(c->vr, 1, r);
	r = f->row[OVS_HF_WORLD][i];
	if (r != OVS_HF_NONE && (!c->slot || c->slot[i] != OVS_HF_NONE))
		a.world = (const char *)world_dst(c, i);
	uint32_t p = f->parent[i];
	if (root && p != OVS_HF_NONE)
		a.parent = (const char *)world_src(c, p);
	return a;
}

#define HW_PREFETCH_ROWS(c, i, root)                            \
	do {                                                    \
		hw_rows a_ = node_rows((c), (i), (root));       \
		if (a_.local) {                                 \
			__builtin_prefetch(a_.local);           \
			__builtin_prefetch(a_.local + 64);      \
		}                                               \
		if (a_.world) {                                 \
			__builtin_prefetch(a_.world, 1);        \
			__builtin_prefetch(a_.world + 64, 1);   \
		}                                               \
		if (a_.reset)                                   \
			__builtin_prefetch(a_.reset);           \
		if (a_.parent) {                                \
			__builtin_prefetch(a_.parent);          \
			__builtin_prefetch(a_.parent + 64);     \
		}                                               \
	} while (0)

/* The forest's entries of node i (a subtree's first: the ones after it follow in order). */
#define HW_PREFETCH_NODE(c, i)                                            \
	do {                                                              \
		const ovs_hforest *f_ = (c)->f;                           \
		__builtin_prefetch(&f_->row[OVS_HF_XFORM][(i)]);          \
		__builtin_prefetch(&f_->row[OVS_HF_RESET][(i)]);          \
		__builtin_prefetch(&f_->row[OVS_HF_WORLD][(i)]);          \
		__builtin_prefetch(&f_->parent[(i)]);                     \
		__builtin_prefetch(&f_->size[(i)]);                       \
		if ((c)->slot)                                            \
			__builtin_prefetch(&(c)->slot[(i)]);              \
	} while (0)

/* Subtrees items[lo, hi) in order, each in preorder (parents first), prefetching ahead. */
static void walk_items(const ovs_hwalk *c, const uint32_t *items, size_t lo, size_t hi)
{
	const ovs_hforest *f = c->f;
	hw_cursor cur = { items, lo, hi, 0, 0 }, near = cur, far = cur;
	cur_enter(&cur, f);
	cur_enter(&near, f);
	cur_enter(&far, f);
	for (int a = 0; a < 2 * HW_AHEAD && far.k < hi; a++)
		if (cur_next(&far, f) && far.k < hi)
			HW_PREFETCH_NODE(c, far.i);
	bool root = true;
	for (int a = 0; a < HW_AHEAD && near.k < hi; a++) {
		HW_PREFETCH_ROWS(c, near.i, root);
		root = cur_next(&near, f);
	}
	while (cur.k < hi) {
		if (far.k < hi && cur_next(&far, f) && far.k < hi)
			HW_PREFETCH_NODE(c, far.i);
		if (near.k < hi) {
			HW_PREFETCH_ROWS(c, near.i, root);
			root = cur_next(&near, f);
		}
		node_world(c, cur.i);
		cur_next(&cur, f);
	}
}

/* What the parallel part reads: the walk, the subtrees, and the batches' first subtrees. */
typedef struct hw_job {
	const ovs_hwalk *w;    /* the walk */
	const uint32_t *items; /* the subtree roots */
	const size_t *cut;     /* batch b = items [cut[b], cut[b + 1]) */
} hw_job;

static void batch_range(void *arg, size_t lo, size_t hi)
{
	const hw_job *j = arg;
	for (size_t b = lo; b < hi; b++)
		walk_items(j->w, j->items, j->cut[b], j->cut[b + 1]);
}

bool ovs_hwalk_run(const ovs_exec *x, const ovs_hwalk *w, const uint32_t *items, size_t nitems,
		   const uint32_t *pre, size_t npre)
{
	for (size_t k = 0; k < npre; k++) /* the split roots first, serially (each a single node) */
		node_world(w, pre[k]);
	if (!nitems)
		return true;
	size_t *cut = malloc((nitems + 1) * sizeof *cut);
	if (!cut)
		return false;
	size_t nb = 0, in = 0;
	for (size_t k = 0; k < nitems; k++) {
		if (in == 0)
			cut[nb++] = k;
		in += w->f->size[items[k]];
		if (in >= HW_BATCH_NODES)
			in = 0;
	}
	cut[nb] = nitems;
	hw_job j = { w, items, cut };
	ovs_parallel_for(x, nb, 1, 1, batch_range, &j);
	free(cut);
	return true;
}
