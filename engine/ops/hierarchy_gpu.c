/*
 * hierarchy_gpu.c — the GPU hierarchy models' device work (hierarchy_gpu.h).
 *
 * The nodes to compute are sorted by depth (stable, so preorder within a level), and per node slot
 * j the host prepares its node id, its parent, whether it has a local xform and (host reset column)
 * its reset flag, plus (host xform column) its local matrix: one block, uploaded with one copy.
 * Device columns are gathered into the same device block by the chunked gather kernel (gather.h).
 * Then one kernel launch per depth level: every node of a level reads its parent's world, which the
 * previous launch (earlier on the same stream) or the previous compute wrote, and nothing of its own
 * level, so the launches need no other synchronisation.
 */
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "errors.h"
#include "gather.h"
#include "gpu.h"
#include "hierarchy_gpu.h"
#include "version.h"

#define XFORM_BYTES (16 * sizeof(double))

/* Whether row r of v holds a value (gather.c's test; for a host version the CPU model's too: a
 * present row's chunk exists). */
static bool has_value(const ovs_version *v, uint32_t r)
{
	return v && r != OVS_HF_NONE && r < v->rows && v->chunks[r >> v->chunk_shift] && ovs_version_present(v, r);
}

/* The m nodes of the items' subtrees by depth into order[], level k at [start[k], start[k + 1]);
 * *nlevels levels. NULL when out of memory. */
static uint32_t *level_order(const ovs_hforest *f, const uint32_t *items, size_t nitems, uint32_t *order,
			     uint32_t *nlevels)
{
	uint32_t *depth = malloc(((size_t)f->n + 1) * sizeof *depth), maxd = 0;
	if (!depth)
		return NULL;
	for (uint32_t i = 0; i < f->n; i++) /* preorder: a parent's depth is known before its children's */
		depth[i] = f->parent[i] == OVS_HF_NONE ? 0 : depth[f->parent[i]] + 1;
	for (size_t k = 0; k < nitems; k++)
		for (uint32_t i = items[k]; i < items[k] + f->size[items[k]]; i++)
			maxd = depth[i] > maxd ? depth[i] : maxd;
	uint32_t *start = calloc((size_t)maxd + 2, sizeof *start), *pos = malloc(((size_t)maxd + 2) * sizeof *pos);
	if (!start || !pos) {
		free(depth);
		free(start);
		free(pos);
		return NULL;
	}
	for (size_t k = 0; k < nitems; k++)
		for (uint32_t i = items[k]; i < items[k] + f->size[items[k]]; i++)
			start[depth[i] + 1]++;
	for (uint32_t d = 0; d <= maxd; d++)
		start[d + 1] += start[d];
	memcpy(pos, start, ((size_t)maxd + 2) * sizeof *pos);
	for (size_t k = 0; k < nitems; k++)
		for (uint32_t i = items[k]; i < items[k] + f->size[items[k]]; i++)
			order[pos[depth[i]]++] = i;
	free(depth);
	free(pos);
	*nlevels = maxd + 1;
	return start;
}

/* Byte offsets of the slot arrays in the scratch block of m slots. */
typedef struct hg_layout {
	size_t par, hasx, reset, local, head, total; /* order at 0; head: bytes before the locals */
} hg_layout;

static hg_layout layout_of(uint32_t m)
{
	hg_layout l;
	l.par = (size_t)m * 4;
	l.hasx = l.par + (size_t)m * 4;
	l.reset = l.hasx + m;
	l.head = l.reset + m;
	l.local = (l.head + 7) & ~(size_t)7;
	l.total = l.local + (size_t)m * XFORM_BYTES;
	return l;
}

/* The host block: node ids, parents, flags, and the host columns' values; *xr / *rr the rows for a
 * device gather (x_dev / r_dev). */
static void fill_host(const ovs_hforest *f, const uint32_t *order, uint32_t m, const ovs_version *vx, bool x_dev,
		      const ovs_version *vr, bool r_dev, unsigned char *h, uint32_t *xr, uint32_t *rr)
{
	hg_layout l = layout_of(m);
	uint32_t *par = (uint32_t *)(void *)(h + l.par);
	memcpy(h, order, (size_t)m * 4);
	for (uint32_t j = 0; j < m; j++) {
		uint32_t i = order[j], x = f->row[OVS_HF_XFORM][i], r = f->row[OVS_HF_RESET][i];
		par[j] = f->parent[i];
		bool hx = has_value(vx, x), hr = has_value(vr, r);
		h[l.hasx + j] = hx;
		if (x_dev)
			xr[j] = hx ? x : UINT32_MAX;
		else if (hx)
			memcpy(h + l.local + (size_t)j * XFORM_BYTES, ovs_version_row_ptr(vx, XFORM_BYTES, x), XFORM_BYTES);
		if (r_dev)
			rr[j] = hr ? r : UINT32_MAX; /* the gather writes 0 (inherit) where there is no value */
		else
			h[l.reset + j] = hr && *(const unsigned char *)ovs_version_row_ptr(vr, 1, r) != 0;
	}
}

/* Uploads the block, gathers the device columns into it, launches the levels. */
static bool launch(ovs_exec *x, const hg_layout *l, uint32_t m, const unsigned char *h, bool x_dev, bool r_dev,
		   const ovs_version *vx, const ovs_version *vr, const uint32_t *xr, const uint32_t *rr,
		   const uint32_t *start, uint32_t nlevels, double *world, char *err, size_t errlen)
{
	const ovs_memops *ops = ovs_gpu_memops();
	unsigned char *d = ovs_gpu_alloc(x->gpu, l->total);
	if (!d) {
		ovs_err_format(err, errlen, "out of device memory (%zu bytes of hierarchy tables)", l->total);
		return false;
	}
	ops->copy(x, d, h, x_dev ? l->head : l->total); /* pageable: staged before it returns */
	bool ok = true;
	if (x_dev)
		ok = ovs_version_gather(x, ops, vx, XFORM_BYTES, xr, m, d + l->local, err, errlen);
	if (ok && r_dev)
		ok = ovs_version_gather(x, ops, vr, 1, rr, m, d + l->reset, err, errlen);
	for (uint32_t k = 0; ok && k < nlevels; k++) {
		uint32_t s = start[k], n = start[k + 1] - start[k];
		if (n)
			ovs_gpu_hier_level(x, world, (const uint32_t *)(void *)d + s, (const uint32_t *)(void *)(d + l->par) + s,
					   d + l->hasx + s, d + l->reset + s,
					   (const double *)(void *)(d + l->local) + (size_t)s * 16, n);
	}
	ovs_gpu_free(x->gpu, d, l->total); /* stream-ordered: after the launches */
	return ok;
}

bool ovs_hier_gpu_run(ovs_exec *x, const ovs_hforest *f, const ovs_version *vx, bool x_dev, const ovs_version *vr,
		      bool r_dev, const uint32_t *items, size_t nitems, double *world, char *err, size_t errlen)
{
	uint64_t m64 = 0;
	for (size_t k = 0; k < nitems; k++)
		m64 += f->size[items[k]];
	if (!m64)
		return true;
	uint32_t m = (uint32_t)m64, nlevels = 0; /* the subtrees are disjoint: m <= f->n */
	hg_layout l = layout_of(m);
	uint32_t *order = malloc((size_t)m * sizeof *order);
	uint32_t *xr = x_dev ? malloc((size_t)m * sizeof *xr) : NULL, *rr = r_dev ? malloc((size_t)m * sizeof *rr) : NULL;
	unsigned char *h = calloc(1, x_dev ? l.head : l.total); /* zeroed: every uploaded byte is defined */
	uint32_t *start = order ? level_order(f, items, nitems, order, &nlevels) : NULL;
	bool ok = order && h && start && (!x_dev || xr) && (!r_dev || rr);
	if (!ok)
		ovs_err_format(err, errlen, "out of host memory preparing %u hierarchy nodes", m);
	else
		fill_host(f, order, m, vx, x_dev, vr, r_dev, h, xr, rr);
	if (ok)
		ok = launch(x, &l, m, h, x_dev, r_dev, vx, vr, xr, rr, start, nlevels, world, err, errlen);
	free(order);
	free(xr);
	free(rr);
	free(h);
	free(start);
	return ok;
}
