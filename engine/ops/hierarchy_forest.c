/*
 * hierarchy_forest.c — the existing prims as a preorder forest (hierarchy_forest.h).
 *
 * The build, in steps (the lookups spread over the op's workers; the sweeps are serial, O(n) over
 * arrays of 4-byte entries):
 *  1. collect: the existing prims in path-id order (existence per path id, in blocks: a count per
 *     block, then each block fills its place);
 *  2. parents: each prim's nearest existing ancestor, by walking its path's parents;
 *  3. preorder: a path's parent is interned before the path (path_dictionary.c creates a child of an
 *     existing parent), so in path-id order every parent comes before its children. Then the
 *     subtree sizes are one reverse sweep, and each node's preorder position one forward sweep: its
 *     parent's position + 1 + the sizes of its earlier siblings (children in path-id order, as a DFS
 *     visiting them in that order numbers them). Should an order ever break that rule, the explicit-
 *     stack DFS numbers them instead;
 *  4. rows: each node's row in the three columns, and the reverse maps (a row belongs to one prim,
 *     so the parallel parts write disjoint entries).
 */
#include "hierarchy_forest.h"

#include <stdlib.h>
#include <string.h>

#include "column.h"

/* Path ids per block of the collection (its count and fill run on one worker). */
#define HF_BLOCK 16384u

void ovs_hforest_free(ovs_hforest *f)
{
	free(f->path);
	free(f->parent);
	free(f->size);
	for (int k = 0; k < OVS_HF_COLS; k++) {
		free(f->row[k]);
		free(f->node_of[k]);
	}
	free(f->xslot);
	memset(f, 0, sizeof *f);
}

/* What the parallel parts of a build read and write. */
typedef struct hf_build {
	ovs_stage *st;                 /* the stage (prim existence, the dictionary) */
	size_t npaths;                 /* path ids [1, npaths] */
	uint32_t *count;               /* existing prims per block of path ids (the first pass) */
	uint32_t *off;                 /* per block: the prims of the blocks before it */
	bool *filled;                  /* per block: the second pass placed exactly count prims */
	ovx_primpath_t *prims;         /* the existing prims, in path-id order */
	uint32_t *index_of;            /* path id -> its index in prims (OVS_HF_NONE: not a prim) */
	uint32_t *par;                 /* prim index -> parent's prim index (OVS_HF_NONE: a root) */
	uint32_t *pos;                 /* prim index -> preorder position */
	uint32_t *sz;                  /* prim index -> subtree size (fast numbering only, else NULL) */
	ovs_hforest *f;                /* the forest being filled */
	ovs_column *const *cols;       /* the three columns (entries may be NULL) */
} hf_build;

static bool exists(const hf_build *b, ovx_primpath_t p)
{
	return p != OVS_PD_ROOT && ovs_prim_exists(&b->st->store, p);
}

/* Blocks [lo, hi): how many existing prims each holds. */
static void count_blocks(void *arg, size_t lo, size_t hi)
{
	hf_build *b = arg;
	for (size_t k = lo; k < hi; k++) {
		size_t a = 1 + k * HF_BLOCK, e = a + HF_BLOCK <= b->npaths + 1 ? a + HF_BLOCK : b->npaths + 1;
		uint32_t c = 0;
		for (size_t p = a; p < e; p++)
			c += exists(b, (ovx_primpath_t)p);
		b->count[k] = c;
	}
}

/* Blocks [lo, hi): their prims from the index the block's prefix count gives (off[k]), at most as
 * many as count[k] found; filled[k]: whether it placed exactly that many. Writes at later ordinals
 * run beside the op and may create or delete prims between the two passes: then a block's second
 * pass disagrees with its first, and collect starts over serially. */
static void fill_blocks(void *arg, size_t lo, size_t hi)
{
	hf_build *b = arg;
	for (size_t k = lo; k < hi; k++) {
		size_t a = 1 + k * HF_BLOCK, e = a + HF_BLOCK <= b->npaths + 1 ? a + HF_BLOCK : b->npaths + 1;
		uint32_t n = b->off[k], end = n + b->count[k];
		bool same = true;
		for (size_t p = a; p < e; p++) {
			b->index_of[p] = OVS_HF_NONE;
			if (!exists(b, (ovx_primpath_t)p))
				continue;
			if (n == end) {
				same = false; /* a prim more than counted: left out, and the block redone */
				continue;
			}
			b->index_of[p] = n;
			b->prims[n++] = (ovx_primpath_t)p;
		}
		b->filled[k] = same && n == end;
	}
}

/* Existing prims in path-id order (b->prims, b->index_of); their number. */
static uint32_t collect(hf_build *b, const ovs_exec *x)
{
	size_t nb = (b->npaths + HF_BLOCK - 1) / HF_BLOCK;
	b->index_of[0] = OVS_HF_NONE;
	ovs_parallel_for(x, nb, 1, 1, count_blocks, b);
	uint32_t n = 0;
	for (size_t k = 0; k < nb; k++) {
		b->off[k] = n;
		n += b->count[k];
	}
	ovs_parallel_for(x, nb, 1, 1, fill_blocks, b);
	bool same = true;
	for (size_t k = 0; k < nb; k++)
		same = same && b->filled[k];
	if (same)
		return n;
	n = 0; /* the prims changed between the passes: one serial pass */
	for (size_t p = 1; p <= b->npaths; p++) {
		b->index_of[p] = OVS_HF_NONE;
		if (exists(b, (ovx_primpath_t)p)) {
			b->index_of[p] = n;
			b->prims[n++] = (ovx_primpath_t)p;
		}
	}
	return n;
}

/* Prims [lo, hi): the parent (in collection order), the nearest existing ancestor. */
static void link_parents(void *arg, size_t lo, size_t hi)
{
	hf_build *b = arg;
	for (size_t i = lo; i < hi; i++) {
		ovx_primpath_t a = ovs_pd_path_parent(b->st->pd, b->prims[i]);
		b->par[i] = OVS_HF_NONE;
		while (a && a != OVS_PD_ROOT) {
			if (a <= b->npaths && b->index_of[a] != OVS_HF_NONE) {
				b->par[i] = b->index_of[a];
				break;
			}
			a = ovs_pd_path_parent(b->st->pd, a);
		}
	}
}

/* Preorder positions by two sweeps, when every parent precedes its children (step 3 above). false
 * when one does not (then nothing is decided: the DFS numbers them) or out of memory (*oom). */
static bool number_sweeps(hf_build *b, uint32_t n, bool *oom)
{
	for (uint32_t i = 0; i < n; i++)
		if (b->par[i] != OVS_HF_NONE && b->par[i] >= i)
			return false;
	uint32_t *acc = calloc((size_t)n + 1, sizeof *acc); /* per parent (n: the roots): sizes placed so far */
	b->sz = malloc(((size_t)n + 1) * sizeof *b->sz);
	if (!acc || !b->sz) {
		free(acc);
		*oom = true;
		return false;
	}
	for (uint32_t i = 0; i < n; i++)
		b->sz[i] = 1;
	for (uint32_t i = n; i-- > 0;)
		if (b->par[i] != OVS_HF_NONE)
			b->sz[b->par[i]] += b->sz[i];
	for (uint32_t i = 0; i < n; i++) {
		uint32_t p = b->par[i], slot = p == OVS_HF_NONE ? n : p;
		b->pos[i] = (p == OVS_HF_NONE ? 0 : b->pos[p] + 1) + acc[slot];
		acc[slot] += b->sz[i];
	}
	free(acc);
	return true;
}

/* Preorder positions by an explicit-stack DFS over children lists (a counting sort by parent),
 * children visited in collection order: the same numbering as the sweeps, for any order. */
static bool number_dfs(uint32_t n, const uint32_t *par, uint32_t *pos)
{
	uint32_t *start = calloc((size_t)n + 2, sizeof *start), *kids = malloc(((size_t)n + 1) * sizeof *kids);
	uint32_t *stack = malloc(((size_t)n + 1) * sizeof *stack), *fill = malloc(((size_t)n + 1) * sizeof *fill);
	bool ok = start && kids && stack && fill;
	if (ok) {
		/* bucket n = the roots (no parent) */
		for (uint32_t i = 0; i < n; i++)
			start[(par[i] == OVS_HF_NONE ? n : par[i]) + 1]++;
		for (uint32_t c = 0; c <= n; c++)
			start[c + 1] += start[c];
		memcpy(fill, start, ((size_t)n + 1) * sizeof *fill);
		for (uint32_t i = 0; i < n; i++)
			kids[fill[par[i] == OVS_HF_NONE ? n : par[i]]++] = i;
		uint32_t sp = 0, k = 0;
		for (uint32_t j = start[n + 1]; j-- > start[n];)
			stack[sp++] = kids[j];
		while (sp) {
			uint32_t v = stack[--sp];
			pos[v] = k++;
			for (uint32_t j = start[v + 1]; j-- > start[v];)
				stack[sp++] = kids[j];
		}
	}
	free(start);
	free(kids);
	free(stack);
	free(fill);
	return ok;
}

/* Prims [lo, hi): path, parent and (after the sweeps) size at their preorder positions. */
static void place_nodes(void *arg, size_t lo, size_t hi)
{
	hf_build *b = arg;
	ovs_hforest *f = b->f;
	for (size_t i = lo; i < hi; i++) {
		uint32_t k = b->pos[i], p = b->par[i];
		f->path[k] = b->prims[i];
		f->parent[k] = p == OVS_HF_NONE ? OVS_HF_NONE : b->pos[p];
		f->size[k] = b->sz ? b->sz[i] : 1;
	}
}

/* Rows [lo, hi) of every column's reverse map: none yet. */
static void clear_node_of(void *arg, size_t lo, size_t hi)
{
	hf_build *b = arg;
	for (int k = 0; k < OVS_HF_COLS; k++)
		for (size_t r = lo; r < hi && r < b->f->nrows[k]; r++)
			b->f->node_of[k][r] = OVS_HF_NONE;
}

/* Prims [lo, hi) in collection order: their nodes' rows in each column (lock-free lookups), and
 * the reverse maps. In path-id order, so the row maps' radix leaves are walked in order (in
 * preorder the lookups missed the cache: 2-3x slower, measured). */
static void lookup_rows(void *arg, size_t lo, size_t hi)
{
	hf_build *b = arg;
	ovs_hforest *f = b->f;
	for (int k = 0; k < OVS_HF_COLS; k++)
		for (size_t i = lo; i < hi; i++) {
			uint32_t r = b->cols[k] ? ovs_column_row(b->cols[k], b->prims[i]) : UINT32_MAX, v = b->pos[i];
			f->row[k][v] = r < f->nrows[k] ? r : OVS_HF_NONE;
			if (r < f->nrows[k])
				f->node_of[k][r] = v;
		}
}

/* Node rows in each column, the reverse maps, and the slots of the nodes without a world row. */
static bool map_rows(hf_build *b, const ovs_exec *x)
{
	ovs_hforest *f = b->f;
	uint32_t most = 0;
	for (int k = 0; k < OVS_HF_COLS; k++) {
		f->row[k] = malloc(((size_t)f->n + 1) * sizeof *f->row[k]);
		/* acquire: rows created so far (row creation publishes nrows) */
		f->nrows[k] = b->cols[k] ? atomic_load_explicit(&b->cols[k]->nrows, memory_order_acquire) : 0;
		f->node_of[k] = malloc(((size_t)f->nrows[k] + 1) * sizeof *f->node_of[k]);
		if (!f->row[k] || !f->node_of[k])
			return false;
		most = f->nrows[k] > most ? f->nrows[k] : most;
	}
	ovs_parallel_for(x, most, 4096, 1, clear_node_of, b);
	ovs_parallel_for(x, f->n, 4096, 1, lookup_rows, b);
	f->nx = 0;
	for (uint32_t i = 0; i < f->n; i++)
		f->nx += f->row[OVS_HF_WORLD][i] == OVS_HF_NONE;
	if (!f->nx)
		return true; /* every node has a world row: no slots (4 bytes a node written serially) */
	f->xslot = malloc(((size_t)f->n + 1) * sizeof *f->xslot);
	if (!f->xslot)
		return false;
	for (uint32_t i = 0, j = 0; i < f->n; i++)
		f->xslot[i] = f->row[OVS_HF_WORLD][i] == OVS_HF_NONE ? j++ : OVS_HF_NONE;
	return true;
}

/* Steps 2-4 once the prims are collected: parents, preorder, placement, rows. */
static bool build_nodes(hf_build *b, const ovs_exec *x, uint32_t n)
{
	ovs_hforest *f = b->f;
	ovs_parallel_for(x, n, 4096, 1, link_parents, b);
	bool oom = false;
	if (!number_sweeps(b, n, &oom) && (oom || !number_dfs(n, b->par, b->pos)))
		return false;
	f->n = n;
	f->path = malloc(((size_t)n + 1) * sizeof *f->path);
	f->parent = malloc(((size_t)n + 1) * sizeof *f->parent);
	f->size = malloc(((size_t)n + 1) * sizeof *f->size);
	if (!f->path || !f->parent || !f->size)
		return false;
	ovs_parallel_for(x, n, 4096, 1, place_nodes, b);
	/* after the DFS: subtree sizes by a reverse sweep (children come after their parent) */
	for (uint32_t k = n; !b->sz && k-- > 0;)
		if (f->parent[k] != OVS_HF_NONE)
			f->size[f->parent[k]] += f->size[k];
	return map_rows(b, x);
}

bool ovs_hforest_build(ovs_hforest *f, ovs_stage *st, const ovs_exec *x, ovs_column *const cols[OVS_HF_COLS])
{
	memset(f, 0, sizeof *f);
	hf_build b = { .st = st, .npaths = ovs_pd_path_count(st->pd), .f = f, .cols = cols };
	size_t np = b.npaths + 1;
	size_t nb = (b.npaths + HF_BLOCK - 1) / HF_BLOCK + 1;
	b.count = malloc(nb * sizeof *b.count);
	b.off = malloc(nb * sizeof *b.off);
	b.filled = malloc(nb * sizeof *b.filled);
	b.prims = malloc(np * sizeof *b.prims);
	b.index_of = malloc(np * sizeof *b.index_of);
	b.par = malloc(np * sizeof *b.par);
	b.pos = malloc(np * sizeof *b.pos);
	bool ok = b.count && b.off && b.filled && b.prims && b.index_of && b.par && b.pos;
	ok = ok && build_nodes(&b, x, collect(&b, x));
	free(b.count);
	free(b.off);
	free(b.filled);
	free(b.prims);
	free(b.index_of);
	free(b.par);
	free(b.pos);
	free(b.sz);
	if (!ok)
		ovs_hforest_free(f);
	return ok;
}
