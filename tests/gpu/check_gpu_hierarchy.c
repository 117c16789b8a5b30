/*
 * check_gpu_hierarchy.c — the GPU hierarchy models (GPU_GLOBAL, GPU_INCREMENTAL) against
 * CPU_INCREMENTAL: identical random forests on several stages, computed with each model, every
 * world matrix compared bitwise with the CPU model's (docs/api.md: the kernels round every product
 * and sum as the CPU does, no FMA).
 *
 * Forests: 4 x 10^4 prims (OVSTAGE_GPU_HIER_PRIMS sets another count, e.g. 100000;
 * OVSTAGE_GPU_TEST_DIV divides it), depth up to 64 (reached from 10^4 prims), about 1 % of them roots, resets
 * on 2 %, no xform value on 5 % (identity), reset values on half of the prims (the rest inherit),
 * world rows on 90 %. Rounds: a full compute; four rounds of partial updates (1 % of the locals, a
 * tenth of those toggling their reset); an unchanged recompute; the world rows overwritten by a
 * writer; a round where one GPU stage computes with CPU_INCREMENTAL and back (the caches of the other
 * kind are not reused); new prims (a new forest). Stages cover host columns, device columns and
 * mixes of both (the world column on the host: a download; on the device: a device delta).
 *
 * Without a usable GPU only the refusal runs: both GPU models answer NOT_SUPPORTED at the call with
 * a message that gives the reason (ovstage_ext_get_gpu_status's).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include <ovstage/ovstage.h>
#include <ovstage/ovstage_ext.h>
#include <ovx/path_dictionary/path_dictionary.h>

#include "../engine/stage_test_util.h"

#define CU(call) ck_assert_msg((call) == cudaSuccess, "%s: %s", #call, cudaGetErrorString(cudaGetLastError()))

enum { RDEPTH = 64, NSTAGES = 6, XF = 0, RS = 1, WM = 2 };
static const char *const k_attr[3] = { "omni:xform", "omni:resetXformStack", "omni:fabric:worldMatrix" };

/* Stage 0 is the reference (CPU_INCREMENTAL, host columns). dev[k]: column k written from CUDA
 * tensors (so it lives on device 0). */
typedef struct cfg {
	int model;
	bool dev[3];
} cfg;
static const cfg k_cfg[NSTAGES] = {
	{ OVSTAGE_HIERARCHY_COMPUTATION_MODEL_CPU_INCREMENTAL, { false, false, false } },
	{ OVSTAGE_HIERARCHY_COMPUTATION_MODEL_GPU_GLOBAL, { false, false, false } },
	{ OVSTAGE_HIERARCHY_COMPUTATION_MODEL_GPU_INCREMENTAL, { false, false, false } },
	{ OVSTAGE_HIERARCHY_COMPUTATION_MODEL_GPU_INCREMENTAL, { true, true, true } },
	{ OVSTAGE_HIERARCHY_COMPUTATION_MODEL_GPU_GLOBAL, { true, false, false } },
	{ OVSTAGE_HIERARCHY_COMPUTATION_MODEL_GPU_INCREMENTAL, { false, true, true } },
};

typedef struct forest {
	uint32_t n, cap;
	int *parent, *depth;
	char **path;
	double (*local)[16];
	unsigned char *reset;
	bool *has_x, *has_r, *has_w;
} forest;

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	return tst_rnd(&g_rng);
}
static double unit(void)
{
	return tst_unit(&g_rng);
}

static void random_local(double m[16])
{
	memset(m, 0, 16 * sizeof *m);
	m[0] = m[5] = m[10] = m[15] = 1;
	for (int i = 0; i < 3; i++) {
		m[12 + i] = unit() * 10;
		for (int j = 0; j < 3; j++)
			m[i * 4 + j] += unit() * 0.02; /* near-orthonormal: products of 64 stay bounded */
	}
}

static uint32_t scaled(uint32_t n)
{
	const char *v = getenv("OVSTAGE_GPU_TEST_DIV");
	uint32_t k = v ? (uint32_t)strtoul(v, NULL, 10) : 1;
	return k > 1 && n / k >= 1000 ? n / k : k > 1 && n > 1000 ? 1000 : n;
}

/* Appends prim i under a random parent (recent ones preferred, so that chains grow deep). */
static void add_prim(forest *f)
{
	uint32_t i = f->n++;
	int p = -1;
	if (i > 0 && rnd() % 100 >= 1) { /* ~1 % roots */
		p = (int)(rnd() % 4 == 0 ? rnd() % i : i - 1 - rnd() % (i < 8 ? i : 8));
		while (p >= 0 && f->depth[p] >= RDEPTH)
			p = f->parent[p];
	}
	f->parent[i] = p;
	f->depth[i] = p < 0 ? 1 : f->depth[p] + 1;
	char name[24];
	int nl = snprintf(name, sizeof name, "/n%u", i);
	size_t pl = p < 0 ? 0 : strlen(f->path[p]);
	f->path[i] = malloc(pl + (size_t)nl + 1);
	if (p >= 0)
		memcpy(f->path[i], f->path[p], pl);
	memcpy(f->path[i] + pl, name, (size_t)nl + 1);
	random_local(f->local[i]);
	f->reset[i] = rnd() % 50 == 0;
	f->has_x[i] = rnd() % 20 != 0;
	f->has_r[i] = f->reset[i] || rnd() % 2 == 0;
	f->has_w[i] = rnd() % 10 != 0;
}

static void make_forest(forest *f, uint32_t n, uint32_t cap)
{
	memset(f, 0, sizeof *f);
	f->cap = cap;
	f->parent = malloc(cap * sizeof *f->parent);
	f->depth = malloc(cap * sizeof *f->depth);
	f->path = malloc(cap * sizeof *f->path);
	f->local = malloc(cap * sizeof *f->local);
	f->reset = calloc(cap, 1);
	f->has_x = malloc(cap * sizeof(bool));
	f->has_r = malloc(cap * sizeof(bool));
	f->has_w = malloc(cap * sizeof(bool));
	while (f->n < n)
		add_prim(f);
}

static void free_forest(forest *f)
{
	for (uint32_t i = 0; i < f->n; i++)
		free(f->path[i]);
	free(f->parent);
	free(f->depth);
	free(f->path);
	free(f->local);
	free(f->reset);
	free(f->has_x);
	free(f->has_r);
	free(f->has_w);
}

typedef struct gstage {
	ovstage_instance_t *st;
	path_dictionary_instance_t *pd;
} gstage;

/* Writes rows values of attribute k through the prims idx[0..n) of f, from a host or (dev) a CUDA
 * tensor. Values: the locals, the reset flags, or zero world matrices. */
static void put(gstage *g, const forest *f, const uint32_t *idx, uint32_t n, int k, uint64_t o, bool dev)
{
	if (!n)
		return;
	size_t rb = k == RS ? 1 : 16 * sizeof(double);
	unsigned char *vals = calloc(n, rb);
	const char **paths = malloc(n * sizeof *paths);
	for (uint32_t j = 0; j < n; j++) {
		paths[j] = f->path[idx[j]];
		if (k == XF)
			memcpy(vals + j * rb, f->local[idx[j]], rb);
		else if (k == RS)
			vals[j] = f->reset[idx[j]];
	}
	ovstage_query_handle_t q = tst_query_of(g->st, g->pd, paths, n, NULL);
	void *p = vals;
	if (dev) {
		CU(cudaMalloc(&p, n * rb));
		CU(cudaMemcpy(p, vals, n * rb, cudaMemcpyHostToDevice));
	}
	tst_tensor tt;
	ovstage_write_data_t w = k == RS ? tst_wdata(&tt, p, n, kDLBool, 8, 1) : tst_wdata(&tt, p, n, kDLFloat, 64, 16);
	if (dev)
		tt.t.device.device_type = kDLCUDA;
	w.semantic = k == RS ? OVSTAGE_SEMANTIC_NONE : OVSTAGE_SEMANTIC_MATRIX;
	ovx_string_or_token_t a = { 0, { k_attr[k], strlen(k_attr[k]) } };
	tst_wait_ok(g->st, ovstage_write_attribute(g->st, q, a, o, w, OVSTAGE_PRIM_MODE_UPSERT));
	if (dev)
		CU(cudaFree(p)); /* a device write's receipt completes after its GPU work */
	tst_wait_ok(g->st, ovstage_release_query(g->st, q));
	free(vals);
	free(paths);
}

/* The prims of f [lo, n) that have attribute k's value. */
static uint32_t select_with(const forest *f, uint32_t lo, int k, uint32_t *idx)
{
	uint32_t m = 0;
	for (uint32_t i = lo; i < f->n; i++)
		if (k == XF ? f->has_x[i] : k == RS ? f->has_r[i] : f->has_w[i])
			idx[m++] = i;
	return m;
}

static void seal(gstage *g, uint64_t o)
{
	ovstage_write_floor_desc_t d = { o, OVSTAGE_SCOPE_ALL, NULL, 0 };
	tst_wait_ok(g->st, ovstage_advance_write_floor(g->st, &d));
}

/* World matrices of f's prims as of ordinal o into out[prim * 16] (all-ones bits where a prim has no
 * world row); device groups are copied after their event. */
static void read_world(gstage *g, const forest *f, uint64_t o, double *out)
{
	memset(out, 0xff, (size_t)f->n * 16 * sizeof *out);
	ovstage_query_handle_t q = tst_query_of(g->st, g->pd, (const char *const *)f->path, f->n, NULL);
	ovx_token_t t = tst_tok(g->pd, k_attr[WM]);
	ovstage_ordinal_range_t r = { 0, o, false };
	ovstage_read_handle_t rh;
	tst_wait_ok(g->st, ovstage_read_attributes(g->st, q, &t, 1, r, &rh));
	ovstage_read_group_t gr;
	ovstage_api_status_t s;
	while ((s = ovstage_fetch_read_next(g->st, rh, OVSTAGE_TIMEOUT_INFINITE, &gr)) == OVSTAGE_OK) {
		const DLTensor *tn = &gr.data.tensors[0];
		ck_assert_int_eq(tn->dtype.lanes, 16);
		size_t rows = (size_t)tn->shape[0], bytes = rows * 16 * sizeof(double);
		double *h = malloc(bytes ? bytes : 1);
		if (tn->device.device_type == kDLCUDA) {
			if (gr.data.cuda_sync.wait_event)
				CU(cudaStreamWaitEvent(cudaStreamPerThread, (cudaEvent_t)gr.data.cuda_sync.wait_event, 0));
			CU(cudaMemcpyAsync(h, tn->data, bytes, cudaMemcpyDeviceToHost, cudaStreamPerThread));
			CU(cudaStreamSynchronize(cudaStreamPerThread));
		} else {
			memcpy(h, tn->data, bytes);
		}
		for (uint32_t k = 0; k < gr.prims.count; k++) {
			uint32_t e = gr.prims.index_map ? gr.prims.index_map[k] : gr.prims.offset + k;
			uint32_t row = gr.data.index_map ? gr.data.index_map[k] : k;
			ck_assert_uint_lt(row, rows);
			memcpy(out + (size_t)e * 16, h + (size_t)row * 16, 16 * sizeof *h);
		}
		free(h);
		ck_assert_int_eq(ovstage_release_group(g->st, &gr), OVSTAGE_OK);
	}
	ck_assert_int_eq(s, OVSTAGE_ERROR_END_OF_ITERATION);
	tst_wait_ok(g->st, ovstage_release_read(g->st, rh));
	tst_wait_ok(g->st, ovstage_release_query(g->st, q));
}

/* Computes (o, o) on every stage (stage k with model override[k] when non-zero), then compares every
 * stage's world matrices with stage 0's, bitwise; stage 0's also with a serial reference (1e-9). */
static void compute_compare(gstage *g, const forest *f, uint64_t o, const int *override, const char *what)
{
	for (int k = 0; k < NSTAGES; k++) {
		int m = override && override[k] ? override[k] : k_cfg[k].model;
		tst_wait_ok(g[k].st, ovstage_compute_hierarchy(g[k].st, (ovstage_hierarchy_computation_model_id_t)m, o, o));
	}
	size_t bytes = (size_t)f->n * 16 * sizeof(double);
	double *want = malloc(bytes), *got = malloc(bytes), (*ref)[16] = malloc(bytes);
	read_world(&g[0], f, o, want);
	for (uint32_t i = 0; i < f->n; i++) { /* parents come first */
		const double *l = f->local[i], *pw = f->parent[i] >= 0 ? ref[f->parent[i]] : NULL;
		double id[16] = { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1 };
		if (!f->has_x[i])
			l = id;
		bool reset = f->has_r[i] && f->reset[i];
		for (int r = 0; r < 4; r++)
			for (int c = 0; c < 4; c++)
				ref[i][r * 4 + c] = reset || !pw ? l[r * 4 + c]
								 : l[r * 4] * pw[c] + l[r * 4 + 1] * pw[4 + c] +
									   l[r * 4 + 2] * pw[8 + c] + l[r * 4 + 3] * pw[12 + c];
		for (int e = 0; f->has_w[i] && e < 16; e++)
			ck_assert_msg(fabs(want[i * 16 + e] - ref[i][e]) <= 1e-9 * (1 + fabs(ref[i][e])),
				      "%s: cpu-incremental prim %u (%s) element %d: %.17g, reference %.17g", what, i, f->path[i],
				      e, want[i * 16 + e], ref[i][e]);
	}
	for (int k = 1; k < NSTAGES; k++) {
		read_world(&g[k], f, o, got);
		for (uint32_t i = 0; i < f->n; i++)
			ck_assert_msg(memcmp(got + i * 16, want + i * 16, 16 * sizeof(double)) == 0,
				      "%s: stage %d (model %d, devices %d%d%d) prim %u (%s, depth %d, has world %d): "
				      "element 12 %.17g, cpu-incremental %.17g", what, k, k_cfg[k].model, k_cfg[k].dev[0],
				      k_cfg[k].dev[1], k_cfg[k].dev[2], i, f->path[i], f->depth[i], f->has_w[i],
				      got[i * 16 + 12], want[i * 16 + 12]);
	}
	free(want);
	free(got);
	free(ref);
}

/* Writes attribute k of prims idx[0..n) on every stage at ordinal o. */
static void put_all(gstage *g, const forest *f, const uint32_t *idx, uint32_t n, int k, uint64_t o)
{
	for (int s = 0; s < NSTAGES; s++)
		put(&g[s], f, idx, n, k, o, k_cfg[s].dev[k]);
}

static void seal_all(gstage *g, uint64_t o)
{
	for (int s = 0; s < NSTAGES; s++)
		seal(&g[s], o);
}

/* One round of partial updates at ordinal o: 1 % of the locals, a tenth of those toggling resets. */
static void partial_round(gstage *g, forest *f, uint32_t *idx, uint64_t o)
{
	uint32_t n = 0, nr = 0;
	for (uint32_t i = 0; i < f->n; i++)
		if (f->has_x[i] && rnd() % 100 == 0) {
			idx[n++] = i;
			random_local(f->local[i]);
		}
	put_all(g, f, idx, n, XF, o);
	for (uint32_t j = 0; j < n; j += 10)
		if (f->has_r[idx[j]]) {
			f->reset[idx[j]] = !f->reset[idx[j]];
			idx[nr++] = idx[j];
		}
	put_all(g, f, idx, nr, RS, o);
	seal_all(g, o);
}

START_TEST(test_gpu_models_match_cpu_incremental)
{
	const char *pv = getenv("OVSTAGE_GPU_HIER_PRIMS");
	uint32_t n0 = scaled(pv && strtoul(pv, NULL, 10) >= 1000 ? (uint32_t)strtoul(pv, NULL, 10) : 40000);
	forest f;
	make_forest(&f, n0, n0 + 1000);
	int maxd = 0;
	for (uint32_t i = 0; i < f.n; i++)
		maxd = f.depth[i] > maxd ? f.depth[i] : maxd;
	if (n0 >= 10000) /* the default size (compute-sanitizer runs divide it) */
		ck_assert_int_eq(maxd, RDEPTH);
	uint32_t *idx = malloc(f.cap * sizeof *idx);
	gstage g[NSTAGES];
	for (int k = 0; k < NSTAGES; k++) {
		ovstage_instance_desc_t d = { "gpu-hier" };
		ck_assert_int_eq(ovstage_create_instance(&d, &g[k].st), OVSTAGE_OK);
		g[k].pd = ovstage_get_path_dictionary(g[k].st);
	}
	for (int k = 0; k < 3; k++)
		put_all(g, &f, idx, select_with(&f, 0, k, idx), k, 1);
	seal_all(g, 1);
	compute_compare(g, &f, 1, NULL, "full");
	for (uint64_t o = 2; o <= 5; o++) {
		partial_round(g, &f, idx, o);
		compute_compare(g, &f, o, NULL, "partial");
	}
	compute_compare(g, &f, 5, NULL, "unchanged");
	put_all(g, &f, idx, select_with(&f, 0, WM, idx), WM, 6); /* a writer zeroes the world rows */
	seal_all(g, 6);
	compute_compare(g, &f, 6, NULL, "world rows overwritten");
	int cpu_on_2[NSTAGES] = { 0, 0, OVSTAGE_HIERARCHY_COMPUTATION_MODEL_CPU_INCREMENTAL, 0, 0, 0 };
	partial_round(g, &f, idx, 7);
	compute_compare(g, &f, 7, cpu_on_2, "stage 2 on the CPU model");
	partial_round(g, &f, idx, 8);
	compute_compare(g, &f, 8, NULL, "stage 2 back on the GPU model");
	uint32_t old = f.n; /* new prims: a new forest */
	while (f.n < f.cap)
		add_prim(&f);
	for (int k = 0; k < 3; k++)
		put_all(g, &f, idx, select_with(&f, old, k, idx), k, 9);
	seal_all(g, 9);
	compute_compare(g, &f, 9, NULL, "new prims");
	partial_round(g, &f, idx, 10);
	compute_compare(g, &f, 10, NULL, "partial after new prims");
	for (int k = 0; k < NSTAGES; k++)
		ck_assert_int_eq(ovstage_destroy_instance(g[k].st), OVSTAGE_OK);
	free(idx);
	free_forest(&f);
}
END_TEST

START_TEST(test_gpu_models_refused_without_gpu)
{
	int n = 0;
	const char *why = "";
	ovstage_ext_get_gpu_status(&n, &why);
	ck_assert_int_eq(n, 0);
	ovstage_instance_t *st;
	ck_assert_int_eq(ovstage_create_instance(NULL, &st), OVSTAGE_OK);
	static const int models[] = { OVSTAGE_HIERARCHY_COMPUTATION_MODEL_GPU_GLOBAL,
				      OVSTAGE_HIERARCHY_COMPUTATION_MODEL_GPU_INCREMENTAL };
	static const char *const names[] = { "gpu-global", "gpu-incremental" };
	for (int k = 0; k < 2; k++) {
		ovstage_enqueue_result_t e =
			ovstage_compute_hierarchy(st, (ovstage_hierarchy_computation_model_id_t)models[k], 1, 1);
		ck_assert_int_eq(e.status, OVSTAGE_ERROR_NOT_SUPPORTED);
		ck_assert_msg(strstr(tst_last_error(), names[k]) && strstr(tst_last_error(), why) && why[0], "%s",
			      tst_last_error());
	}
	tst_wait_ok(st, ovstage_compute_hierarchy(st, OVSTAGE_HIERARCHY_COMPUTATION_MODEL_CPU_INCREMENTAL, 0, 0));
	ck_assert_int_eq(ovstage_destroy_instance(st), OVSTAGE_OK);
}
END_TEST

int main(void)
{
	int n = 0;
	const char *why = "";
	ovstage_ext_get_gpu_status(&n, &why);
	Suite *su = suite_create("gpu-hierarchy");
	TCase *tc = tcase_create(n > 0 ? "gpu" : "unavailable");
	tcase_set_timeout(tc, 600);
	if (n > 0) {
		tcase_add_test(tc, test_gpu_models_match_cpu_incremental);
	} else {
		fprintf(stderr, "check_gpu_hierarchy: no usable CUDA device (%s): only the refusal runs\n", why);
		tcase_add_test(tc, test_gpu_models_refused_without_gpu);
	}
	suite_add_tcase(su, tc);
	SRunner *sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
