/* hierarchy_forest.c — the existing prims as a preorder forest (hierarchy_forest.h). */
#include "hierarchy_forest.h"

#include <stdlib.h>
#include <string.h>

#include "column.h"

void ovs_hforest_free(ovs_hforest *f)
{
	free(f->path);
	free(f->parent);
	free(f->size);
	for (int k = 0; k < OVS_HF_COLS; k++) {
		free(f->row[k]);
		free(f->node_of[k]);
	}
	memset(f, 0, sizeof *f);
}

/* Existing prims in path-id order, and each one's index in that order (by path id). */
static uint32_t collect(ovs_stage *st, size_t npaths, ovx_primpath_t *prims, uint32_t *index_of)
{
	uint32_t n = 0;
	for (ovx_primpath_t p = 1; p <= npaths; p++) {
		index_of[p] = OVS_HF_NONE;
		if (p != OVS_PD_ROOT && ovs_prim_exists(&st->store, p)) {
			index_of[p] = n;
			prims[n++] = p;
		}
	}
	return n;
}

/* Parent (in collection order) of each collected prim: the nearest existing ancestor. */
static void link_parents(ovs_stage *st, const ovx_primpath_t *prims, uint32_t n, const uint32_t *index_of,
			 size_t npaths, uint32_t *par)
{
	for (uint32_t i = 0; i < n; i++) {
		ovx_primpath_t a = ovs_pd_path_parent(st->pd, prims[i]);
		par[i] = OVS_HF_NONE;
		while (a && a != OVS_PD_ROOT) {
			if (a <= npaths && index_of[a] != OVS_HF_NONE) {
				par[i] = index_of[a];
				break;
			}
			a = ovs_pd_path_parent(st->pd, a);
		}
	}
}

/* Preorder numbering: children lists (counting sort by parent), then an explicit-stack DFS. */
static bool number_preorder(uint32_t n, const uint32_t *par, uint32_t *order)
{
	uint32_t *start = calloc((size_t)n + 2, sizeof *start), *kids = malloc(((size_t)n + 1) * sizeof *kids);
	uint32_t *stack = malloc(((size_t)n + 1) * sizeof *stack);
	if (!start || !kids || !stack) {
		free(start);
		free(kids);
		free(stack);
		return false;
	}
	/* bucket n = the roots (no parent) */
	for (uint32_t i = 0; i < n; i++)
		start[(par[i] == OVS_HF_NONE ? n : par[i]) + 1]++;
	for (uint32_t b = 0; b <= n; b++)
		start[b + 1] += start[b];
	uint32_t *fill = malloc(((size_t)n + 1) * sizeof *fill);
	if (!fill) {
		free(start);
		free(kids);
		free(stack);
		return false;
	}
	memcpy(fill, start, ((size_t)n + 1) * sizeof *fill);
	for (uint32_t i = 0; i < n; i++)
		kids[fill[par[i] == OVS_HF_NONE ? n : par[i]]++] = i;
	free(fill);
	uint32_t sp = 0, k = 0;
	for (uint32_t j = start[n + 1]; j-- > start[n];)
		stack[sp++] = kids[j];
	while (sp) {
		uint32_t v = stack[--sp];
		order[k++] = v;
		for (uint32_t j = start[v + 1]; j-- > start[v];)
			stack[sp++] = kids[j];
	}
	free(start);
	free(kids);
	free(stack);
	return true;
}

/* Node rows in each column, and the reverse maps. */
static bool map_rows(ovs_hforest *f, ovs_column *const cols[OVS_HF_COLS])
{
	for (int k = 0; k < OVS_HF_COLS; k++) {
		f->row[k] = malloc(((size_t)f->n + 1) * sizeof *f->row[k]);
		/* acquire: rows created so far (row creation publishes nrows) */
		f->nrows[k] = cols[k] ? atomic_load_explicit(&cols[k]->nrows, memory_order_acquire) : 0;
		f->node_of[k] = malloc(((size_t)f->nrows[k] + 1) * sizeof *f->node_of[k]);
		if (!f->row[k] || !f->node_of[k])
			return false;
		for (uint32_t r = 0; r < f->nrows[k]; r++)
			f->node_of[k][r] = OVS_HF_NONE;
		for (uint32_t i = 0; i < f->n; i++) {
			uint32_t r = cols[k] ? ovs_column_row(cols[k], f->path[i]) : UINT32_MAX;
			f->row[k][i] = r < f->nrows[k] ? r : OVS_HF_NONE;
			if (f->row[k][i] != OVS_HF_NONE)
				f->node_of[k][r] = i;
		}
	}
	return true;
}

bool ovs_hforest_build(ovs_hforest *f, ovs_stage *st, ovs_column *const cols[OVS_HF_COLS])
{
	memset(f, 0, sizeof *f);
	size_t npaths = ovs_pd_path_count(st->pd);
	ovx_primpath_t *prims = malloc((npaths + 1) * sizeof *prims);
	uint32_t *index_of = malloc((npaths + 1) * sizeof *index_of);
	uint32_t *par = malloc((npaths + 1) * sizeof *par), *order = malloc((npaths + 1) * sizeof *order);
	uint32_t *rank = malloc((npaths + 1) * sizeof *rank);
	bool ok = prims && index_of && par && order && rank;
	uint32_t n = ok ? collect(st, npaths, prims, index_of) : 0;
	if (ok) {
		link_parents(st, prims, n, index_of, npaths, par);
		ok = number_preorder(n, par, order);
	}
	f->n = n;
	f->path = malloc(((size_t)n + 1) * sizeof *f->path);
	f->parent = malloc(((size_t)n + 1) * sizeof *f->parent);
	f->size = malloc(((size_t)n + 1) * sizeof *f->size);
	ok = ok && f->path && f->parent && f->size;
	if (ok) {
		for (uint32_t k = 0; k < n; k++)
			rank[order[k]] = k;
		for (uint32_t k = 0; k < n; k++) {
			uint32_t v = order[k];
			f->path[k] = prims[v];
			f->parent[k] = par[v] == OVS_HF_NONE ? OVS_HF_NONE : rank[par[v]];
			f->size[k] = 1;
		}
		/* subtree sizes: children come after their parent in preorder, so a reverse sweep works */
		for (uint32_t k = n; k-- > 0;)
			if (f->parent[k] != OVS_HF_NONE)
				f->size[f->parent[k]] += f->size[k];
		ok = map_rows(f, cols);
	}
	free(prims);
	free(index_of);
	free(par);
	free(order);
	free(rank);
	if (!ok)
		ovs_hforest_free(f);
	return ok;
}
