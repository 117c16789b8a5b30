/*
 * bench/gpu — device-resident columns beside bare CUDA measured in the same run: copy-in writes
 * (D2D and pinned H2D) against cudaMemcpyAsync of the same bytes, a sparse 1 % write against the full
 * write, a tiny write's receipt against a bare event poll, the host time a write call takes while the
 * producer's kernel still runs, and a step loop of 100 columns x 4096 rows (write, seal, read) against
 * one cudaMemcpyAsync per column, the device pool's hit against CUDA's stream-ordered allocator, and
 * an array (ragged) column's step against one copy of its bytes.
 * Prints one table; never asserts. Without a GPU it says so and exits 0. Linked against the static
 * library: the pool row calls the engine's allocator directly.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include <ovstage/ovstage.h>
#include <ovstage/ovstage_ext.h>
#include <ovx/path_dictionary/path_dictionary.h>

#include "gpu.h"
#include "report.h"

int bench_spin(void *stream, long long cycles);

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_d);
	return v[n / 2];
}

typedef struct stage {
	ovstage_instance_t *st;
	path_dictionary_instance_t *pd;
	ovstage_query_handle_t q;
	uint32_t n;
	ovstage_ordinal_t ord;
} stage;

static void wait_release(ovstage_instance_t *st, ovstage_enqueue_result_t e)
{
	if (e.status != OVSTAGE_OK) {
		ovx_string_t m = ovstage_get_last_error();
		fprintf(stderr, "bench_gpu: call refused: %.*s\n", (int)m.length, m.ptr);
		exit(1);
	}
	ovstage_op_wait_result_t w;
	ovstage_wait_op(st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &w);
	if (w.error_op_id_count) {
		ovx_string_t m = ovstage_get_last_op_error(st, w.error_op_ids[0]);
		fprintf(stderr, "bench_gpu: op failed: %.*s\n", (int)m.length, m.ptr);
		exit(1);
	}
	ovstage_release_op(st, e.op_index);
}

static void stage_open(stage *s, uint32_t n)
{
	memset(s, 0, sizeof *s);
	ovstage_create_instance(NULL, &s->st);
	s->pd = ovstage_get_path_dictionary(s->st);
	s->n = n;
	ovx_string_t *str = calloc(n, sizeof *str);
	char *buf = malloc((size_t)n * 16);
	for (uint32_t i = 0; i < n; i++) {
		int len = snprintf(buf + (size_t)i * 16, 16, "/b/%u", i);
		str[i] = (ovx_string_t){ buf + (size_t)i * 16, (size_t)len };
	}
	ovx_primpath_list_t list;
	path_dictionary_create_path_list_from_strings(s->pd, str, n, &list);
	ovstage_query_from_path_list(s->st, list, &s->q);
	path_dictionary_release_path_list_reference(s->pd, list);
	free(str);
	free(buf);
}

static void stage_close(stage *s)
{
	wait_release(s->st, ovstage_release_query(s->st, s->q));
	ovstage_destroy_instance(s->st);
}

static ovx_token_t tok(stage *s, const char *name)
{
	ovx_string_t str = { name, strlen(name) };
	ovx_token_t t = 0;
	path_dictionary_create_tokens_from_strings(s->pd, &str, 1, &t);
	return t;
}

static uint16_t g_lanes = 1; /* lanes per row of the next tensors */
static uint8_t g_bits = 32;  /* float bits of the next tensors */

static ovstage_write_data_t wdata(DLTensor *t, int64_t *shape, void *p, int64_t rows, DLDeviceType type)
{
	memset(t, 0, sizeof *t);
	t->data = p;
	t->device = (DLDevice){ type, 0 };
	t->ndim = 1;
	t->dtype = (DLDataType){ kDLFloat, g_bits, g_lanes };
	*shape = rows;
	t->shape = shape;
	ovstage_write_data_t w;
	memset(&w, 0, sizeof w);
	w.tensors = t;
	w.tensor_count = 1;
	return w;
}

static ovstage_enqueue_result_t write_attr(stage *s, ovx_token_t a, ovstage_write_data_t w)
{
	ovx_string_or_token_t at = { a, { NULL, 0 } };
	return ovstage_write_attribute(s->st, s->q, at, ++s->ord, w, OVSTAGE_PRIM_MODE_UPSERT);
}

static void seal_all(stage *s)
{
	ovstage_write_floor_desc_t d = { s->ord, OVSTAGE_SCOPE_ALL, NULL, 0 };
	wait_release(s->st, ovstage_advance_write_floor(s->st, &d));
}

/* Copy-in: a write of `bytes` from src (device or pinned host) until its receipt completes, against
 * cudaMemcpyAsync of the same bytes + stream sync. */
static void row_copy_in(size_t bytes, DLDeviceType type, const char *label)
{
	fprintf(stderr, "bench_gpu: %s\n", __func__);
	/* rows of 1 KiB (float64 x 128): the bytes, not the path count, are what is measured */
	uint32_t n = (uint32_t)(bytes / 1024);
	g_lanes = 128;
	g_bits = 64;
	stage s;
	stage_open(&s, n);
	ovx_token_t a = tok(&s, "col");
	void *src = NULL, *dst = NULL;
	if (type == kDLCUDA)
		cudaMalloc(&src, bytes);
	else
		cudaMallocHost(&src, bytes);
	cudaMalloc(&dst, bytes);
	cudaMemset(dst, 0, bytes);
	cudaStream_t cs;
	cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking);
	enum { REPS = 15 };
	double ours[REPS], peer[REPS];
	DLTensor t;
	int64_t shape;
	/* the column lives on the device: its first write is a device tensor */
	void *first = NULL;
	cudaMalloc(&first, bytes);
	wait_release(s.st, write_attr(&s, a, wdata(&t, &shape, first, n, kDLCUDA)));
	seal_all(&s);
	for (int r = 0; r < REPS; r++) {
		double t0 = now_s();
		wait_release(s.st, write_attr(&s, a, wdata(&t, &shape, src, n, type)));
		ours[r] = now_s() - t0;
		seal_all(&s);
		t0 = now_s();
		cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cs);
		cudaStreamSynchronize(cs);
		peer[r] = now_s() - t0;
	}
	double o = median(ours, REPS), p = median(peer, REPS);
	double gbo = (double)bytes / o / 1e9, gbp = (double)bytes / p / 1e9;
	table_row(fmt("%s write %zu MiB", label, bytes >> 20), fmt("%.1f GB/s", gbo), "cudaMemcpyAsync + sync",
		  fmt("%.1f GB/s", gbp), fmt("%.2fx", gbo / gbp), ">= 0.9x", met(true, gbo / gbp >= 0.9));
	cudaFree(first);
	cudaFree(dst);
	if (type == kDLCUDA)
		cudaFree(src);
	else
		cudaFreeHost(src);
	cudaStreamDestroy(cs);
	stage_close(&s);
	g_lanes = 1;
	g_bits = 32;
}

/* Sparse 1 % (masked) write + seal against the full write + seal of a 64 MiB column: 4 M rows of
 * float32 x 4 (interning 16 M paths for 16 M one-float rows would take most of the run). Two sparse
 * figures: in steady state (each step's seal after sparse steps: the chunks of the version that left
 * retention are caught up by replaying the retained deltas, the copy-on-write copies nothing), the
 * pattern of a simulator that moves 1 % of its rows per step; and right after a full write (every
 * chunk the mask touches must be copied: the retained version still holds the old ones). */
typedef struct step_parts {
	double call, wait, seal; /* medians: the write call, its wait, the seal (call + wait) */
} step_parts;

static double time_steps(stage *s, ovx_token_t a, ovstage_write_data_t w, int reps, int warm, step_parts *parts)
{
	double t[16], c[16], wt[16], sl[16];
	for (int r = -warm; r < reps; r++) {
		double t0 = now_s();
		ovstage_enqueue_result_t e = write_attr(s, a, w);
		double t1 = now_s();
		wait_release(s->st, e);
		double t2 = now_s();
		seal_all(s);
		if (r >= 0) {
			t[r] = now_s() - t0;
			c[r] = t1 - t0;
			wt[r] = t2 - t1;
			sl[r] = now_s() - t2;
		}
	}
	if (parts)
		*parts = (step_parts){ median(c, reps), median(wt, reps), median(sl, reps) };
	return median(t, reps);
}

static void row_sparse(void)
{
	fprintf(stderr, "bench_gpu: %s\n", __func__);
	uint32_t n = 4u << 20;
	g_lanes = 4;
	stage s;
	stage_open(&s, n);
	ovx_token_t a = tok(&s, "big");
	void *src;
	cudaMalloc(&src, (size_t)n * 16);
	cudaMemset(src, 0, (size_t)n * 16);
	DLTensor t;
	int64_t shape;
	uint64_t *mask = calloc((n + 63) / 64, 8);
	for (uint32_t i = 0; i < n; i += 100)
		mask[i / 64] |= 1ull << (i % 64);
	enum { REPS = 9 };
	ovstage_write_data_t full = wdata(&t, &shape, src, n, kDLCUDA), sparse = full;
	sparse.mask = mask;
	sparse.count = n;
	step_parts pf, ps;
	double f = time_steps(&s, a, full, REPS, 2, &pf);
	double steady = time_steps(&s, a, sparse, REPS, 3, &ps);
	double after[REPS];
	for (int r = 0; r < REPS; r++) {
		time_steps(&s, a, full, 1, 0, NULL);
		after[r] = time_steps(&s, a, sparse, 1, 0, NULL);
	}
	/* BENCH_GPU_SPARSE_LOOP=N: N more masked steps, untimed (for a profiler: bench/tools/sampler.c) */
	for (long r = 0, nl = getenv("BENCH_GPU_SPARSE_LOOP") ? atol(getenv("BENCH_GPU_SPARSE_LOOP")) : 0; r < nl; r++)
		time_steps(&s, a, sparse, 1, 0, NULL);
	note("masked step: write call %.0f us, its wait %.0f us, seal %.0f us; full step: %.0f / %.0f / %.0f us",
	     ps.call * 1e6, ps.wait * 1e6, ps.seal * 1e6, pf.call * 1e6, pf.wait * 1e6, pf.seal * 1e6);
	double af = median(after, REPS);
	/* The same rows' count at random positions (a fixed random mask): what a simulator's resets look
	 * like, and the pattern a branch predictor cannot learn (the listing's cost, mask_bits.h). */
	uint64_t *rmask = calloc((n + 63) / 64, 8), seed = 12345;
	for (uint32_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		if ((seed >> 33) % 100 == 0)
			rmask[i / 64] |= 1ull << (i % 64);
	}
	ovstage_write_data_t random = sparse;
	random.mask = rmask;
	step_parts pr;
	double rs = time_steps(&s, a, random, REPS, 3, &pr);
	note("random mask step: write call %.0f us, its wait %.0f us, seal %.0f us", pr.call * 1e6, pr.wait * 1e6,
	     pr.seal * 1e6);
	free(rmask);
	g_lanes = 1;
	table_row("1 % masked write + seal, 4 M rows x 16 B", fmt("%.0f us", steady * 1e6), "full write + seal (ours)",
		  fmt("%.0f us", f * 1e6), fmt("%.0f %%", 100 * steady / f), "<= 15 %", met(true, steady / f <= 0.15));
	table_row("  the same right after a full write", fmt("%.0f us", af * 1e6), "full write + seal (ours)",
		  fmt("%.0f us", f * 1e6), fmt("%.0f %%", 100 * af / f), "(info)", "-");
	table_row("  the same, a random 1 % mask", fmt("%.0f us", rs * 1e6), "full write + seal (ours)",
		  fmt("%.0f us", f * 1e6), fmt("%.0f %%", 100 * rs / f), "(info)", "-");
	free(mask);
	cudaFree(src);
	stage_close(&s);
}

/* A 4 KiB device write: call to receipt complete, against an empty kernel + event poll. Also the host
 * time of the call itself while a producer kernel still runs on the stream it names. */
static void row_latency(void)
{
	fprintf(stderr, "bench_gpu: %s\n", __func__);
	stage s;
	stage_open(&s, 1024);
	ovx_token_t a = tok(&s, "tiny");
	void *src;
	cudaMalloc(&src, 4096);
	cudaMemset(src, 0, 4096);
	cudaStream_t cs;
	cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking);
	DLTensor t;
	int64_t shape;
	wait_release(s.st, write_attr(&s, a, wdata(&t, &shape, src, 1024, kDLCUDA)));
	seal_all(&s);
	enum { REPS = 201 };
	double ours[REPS], peer[REPS], call[REPS], call0[REPS];
	cudaEvent_t ev;
	cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
	for (int r = 0; r < REPS; r++) {
		double t0 = now_s();
		ovstage_enqueue_result_t e0 = write_attr(&s, a, wdata(&t, &shape, src, 1024, kDLCUDA));
		call0[r] = now_s() - t0;
		wait_release(s.st, e0);
		ours[r] = now_s() - t0;
		t0 = now_s();
		bench_spin(cs, 0);
		cudaEventRecord(ev, cs);
		while (cudaEventQuery(ev) == cudaErrorNotReady) {
		}
		peer[r] = now_s() - t0;
		bench_spin(cs, 2000000); /* ~1 ms: the producer is still running during the call */
		ovstage_write_data_t w = wdata(&t, &shape, src, 1024, kDLCUDA);
		w.cuda_sync.stream = (uintptr_t)cs;
		t0 = now_s();
		ovstage_enqueue_result_t e = write_attr(&s, a, w);
		call[r] = now_s() - t0;
		wait_release(s.st, e);
		if (r % 50 == 0)
			seal_all(&s);
	}
	/* untimed, for a profiler: more of the first kind of write (BENCH_GPU_LATENCY_LOOP of them) */
	for (long r = 0, nl = getenv("BENCH_GPU_LATENCY_LOOP") ? atol(getenv("BENCH_GPU_LATENCY_LOOP")) : 0; r < nl; r++) {
		wait_release(s.st, write_attr(&s, a, wdata(&t, &shape, src, 1024, kDLCUDA)));
		if (r % 50 == 0)
			seal_all(&s);
	}
	double o = median(ours, REPS), p = median(peer, REPS), c = median(call, REPS);
	note("4 KiB write with no producer running: the call %.1f us of its %.1f us to the receipt (medians)",
	     median(call0, REPS) * 1e6, o * 1e6);
	table_row("4 KiB device write, call to receipt", fmt("%.1f us", o * 1e6), "empty kernel + event poll",
		  fmt("%.1f us", p * 1e6), fmt("%.2fx", o / p), "<= 12 us after the kernel", met(true, o * 1e6 <= 12));
	table_row("host time of a write call, producer running", fmt("%.2f us", c * 1e6), "(target)", "5 us",
		  fmt("%.2fx", c * 1e6 / 5), "<= 5 us", met(true, c * 1e6 <= 5));
	seal_all(&s);
	cudaEventDestroy(ev);
	cudaStreamDestroy(cs);
	cudaFree(src);
	stage_close(&s);
}

/* Fetches every group of read rh, orders consumer stream cs after each group's data (one wait per
 * distinct wait_event: the groups of one seal's columns share theirs) and releases the groups, then
 * the read. */
static void consume_read(ovstage_instance_t *st, ovstage_read_handle_t rh, cudaStream_t cs)
{
	ovstage_read_group_t g;
	uintptr_t waited = 0;
	while (ovstage_fetch_read_next(st, rh, OVSTAGE_TIMEOUT_INFINITE, &g) == OVSTAGE_OK) {
		if (g.data.cuda_sync.wait_event && g.data.cuda_sync.wait_event != waited)
			cudaStreamWaitEvent(cs, (cudaEvent_t)g.data.cuda_sync.wait_event, 0);
		waited = g.data.cuda_sync.wait_event;
		ovstage_release_group(st, &g);
	}
	wait_release(st, ovstage_release_read(st, rh));
}

/* An array (ragged) column on the device: 4096 rows of 1..8 float32 written each step from per-row
 * CUDA tensors in one device buffer (one write, packed into a device buffer by one kernel), sealed and
 * read (every group's wait event honoured), against one cudaMemcpyAsync of the same packed bytes +
 * sync: information (the issue sets no target for it), the cost of ragged rows over the bytes. */
static void row_array(void)
{
	fprintf(stderr, "bench_gpu: %s\n", __func__);
	enum { ROWS = 4096, STEPS = 100 };
	stage s;
	stage_open(&s, ROWS);
	ovx_token_t a = tok(&s, "ragged");
	DLTensor *t = calloc(ROWS, sizeof *t);
	int64_t *shape = calloc(ROWS, sizeof *shape);
	size_t total = 0;
	for (uint32_t i = 0; i < ROWS; i++)
		total += 1 + i % 8;
	void *sp = NULL, *dst = NULL;
	cudaMalloc(&sp, total * sizeof(float));
	cudaMalloc(&dst, total * sizeof(float));
	float *src = sp;
	cudaMemset(sp, 0, total * sizeof(float));
	for (uint32_t i = 0, off = 0; i < ROWS; i++) {
		t[i].data = src + off;
		t[i].device = (DLDevice){ kDLCUDA, 0 };
		t[i].ndim = 1;
		t[i].dtype = (DLDataType){ kDLFloat, 32, 1 };
		shape[i] = 1 + i % 8;
		t[i].shape = &shape[i];
		off += (uint32_t)shape[i];
	}
	ovstage_write_data_t w;
	memset(&w, 0, sizeof w);
	w.tensors = t;
	w.tensor_count = ROWS;
	w.is_array = true;
	cudaStream_t cs;
	cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking);
	double t0 = 0, tw = 0, ts = 0;
	for (int step = -5; step < STEPS; step++) {
		if (step == 0)
			t0 = now_s(), tw = ts = 0;
		double a0 = now_s();
		wait_release(s.st, write_attr(&s, a, w));
		double a1 = now_s();
		seal_all(&s);
		double a2 = now_s();
		tw += a1 - a0;
		ts += a2 - a1;
		ovstage_read_handle_t rh;
		ovstage_ordinal_range_t r = { 0, UINT64_MAX, false };
		wait_release(s.st, ovstage_read_attributes(s.st, s.q, &a, 1, r, &rh));
		consume_read(s.st, rh, cs);
	}
	cudaStreamSynchronize(cs);
	double ours = (now_s() - t0) / STEPS;
	t0 = now_s();
	for (int step = 0; step < STEPS; step++) {
		cudaMemcpyAsync(dst, src, total * sizeof *src, cudaMemcpyDeviceToDevice, cs);
		cudaStreamSynchronize(cs);
	}
	double bare = (now_s() - t0) / STEPS;
	note("array step: write op %.0f us, seal %.0f us, the rest (read, groups, release) %.0f us", tw / STEPS * 1e6,
	     ts / STEPS * 1e6, (ours - (tw + ts) / STEPS) * 1e6);
	table_row("array column 4096 rows x 1-8 f32 write+seal+read", fmt("%.0f us", ours * 1e6),
		  "one cudaMemcpyAsync of the bytes + sync", fmt("%.0f us", bare * 1e6), fmt("%.2fx", bare / ours), "(info)",
		  "-");
	cudaStreamDestroy(cs);
	cudaFree(src);
	cudaFree(dst);
	free(t);
	free(shape);
	stage_close(&s);
}

/* The device pool's hit: an allocation and free of 1 MiB through a stage context's cache (the
 * engine's own ovs_gpu_alloc / ovs_gpu_free, linked statically), against CUDA's stream-ordered
 * allocator on a pool whose release threshold is at its maximum (so it never returns memory), in
 * batches of 1000 pairs, median batch. */
static void row_pool(void)
{
	fprintf(stderr, "bench_gpu: %s\n", __func__);
	enum { BATCH = 1000, REPS = 51 };
	const size_t bytes = (size_t)1 << 20;
	char err[256];
	ovs_gpu *_Atomic slot = NULL;
	ovs_gpu *g = ovs_gpu_get(&slot, NULL, 0, err, sizeof err);
	if (!g) {
		note("pool row skipped: %s", err);
		return;
	}
	cudaMemPool_t pool;
	struct cudaMemPoolProps props;
	memset(&props, 0, sizeof props);
	props.allocType = cudaMemAllocationTypePinned;
	props.location.type = cudaMemLocationTypeDevice;
	props.location.id = 0;
	cudaMemPoolCreate(&pool, &props);
	uint64_t keep = UINT64_MAX;
	cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
	cudaStream_t cs;
	cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking);
	double ours[REPS], peer[REPS];
	for (int r = -1; r < REPS; r++) { /* r = -1 warms both */
		double t0 = now_s();
		for (int i = 0; i < BATCH; i++)
			ovs_gpu_free(g, ovs_gpu_alloc(g, bytes), bytes);
		double t1 = now_s();
		for (int i = 0; i < BATCH; i++) {
			void *p = NULL;
			cudaMallocFromPoolAsync(&p, bytes, pool, cs);
			cudaFreeAsync(p, cs);
		}
		double t2 = now_s();
		if (r >= 0)
			ours[r] = (t1 - t0) / BATCH, peer[r] = (t2 - t1) / BATCH;
	}
	cudaStreamSynchronize(cs);
	ovstage_ext_gpu_pool_stats_t st;
	ovstage_ext_get_gpu_pool_stats(0, &st);
	note("pool row: %llu hits, %llu misses in the process so far", (unsigned long long)st.hits,
	     (unsigned long long)st.misses);
	double o = median(ours, REPS), p = median(peer, REPS);
	table_row("pool hit: alloc + free of 1 MiB", fmt("%.3f us", o * 1e6), "cudaMallocFromPoolAsync + FreeAsync",
		  fmt("%.3f us", p * 1e6), fmt("%.2fx", p / o), "<= 0.5 us, faster", met(true, o <= 0.5e-6 && o < p));
	ovs_gpu_destroy(g);
	cudaStreamDestroy(cs);
	cudaMemPoolDestroy(pool);
}

/* The step loop: 100 columns x 4096 float32 rows written from CUDA tensors, sealed and read (every
 * group's wait event honoured) each step, against one cudaMemcpyAsync per column + sync. */
static void row_step_loop(void)
{
	fprintf(stderr, "bench_gpu: %s\n", __func__);
	enum { COLS = 100, ROWS = 4096 };
	/* BENCH_GPU_STEPS: more steps (for a profiler: bench/tools/sampler.c) */
	const int STEPS = getenv("BENCH_GPU_STEPS") ? atoi(getenv("BENCH_GPU_STEPS")) : 200;
	stage s;
	stage_open(&s, ROWS);
	ovx_token_t a[COLS];
	char name[16];
	for (int c = 0; c < COLS; c++) {
		snprintf(name, sizeof name, "c%d", c);
		a[c] = tok(&s, name);
	}
	void *src, *dst;
	bool host = getenv("BENCH_GPU_HOST_COLUMNS") != NULL; /* the same loop over CPU columns (diagnosis) */
	if (host)
		src = calloc((size_t)COLS * ROWS, 4);
	else
		cudaMalloc(&src, (size_t)COLS * ROWS * 4);
	cudaMalloc(&dst, (size_t)COLS * ROWS * 4);
	if (!host)
		cudaMemset(src, 0, (size_t)COLS * ROWS * 4);
	cudaStream_t cs;
	cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking);
	DLTensor t[COLS];
	int64_t shape[COLS];
	ovstage_attribute_write_t w[COLS];
	for (int c = 0; c < COLS; c++) {
		w[c].attribute = (ovx_string_or_token_t){ a[c], { NULL, 0 } };
		w[c].data = wdata(&t[c], &shape[c], (char *)src + (size_t)c * ROWS * 4, ROWS, host ? kDLCPU : kDLCUDA);
	}
	double t0 = 0, tw = 0, ts = 0, tr = 0, tsub = 0, tro = 0, tf = 0, tcw = 0, trg = 0;
	for (int step = -10; step < STEPS; step++) {
		if (step == 0)
			t0 = now_s(), tw = ts = tr = tsub = tro = tf = tcw = trg = 0;
		double a0 = now_s();
		ovstage_enqueue_result_t we = ovstage_write_attributes(s.st, s.q, w, COLS, ++s.ord, OVSTAGE_PRIM_MODE_UPSERT);
		tsub += now_s() - a0;
		wait_release(s.st, we);
		double a1 = now_s();
		seal_all(&s);
		double a2 = now_s();
		tw += a1 - a0;
		ts += a2 - a1;
		ovstage_read_handle_t rh;
		ovstage_ordinal_range_t r = { 0, UINT64_MAX, false };
		wait_release(s.st, ovstage_read_attributes(s.st, s.q, a, COLS, r, &rh));
		double b0 = now_s();
		tro += b0 - a2;
		ovstage_read_group_t g;
		uintptr_t waited = 0;
		for (;;) {
			double f0 = now_s();
			if (ovstage_fetch_read_next(s.st, rh, OVSTAGE_TIMEOUT_INFINITE, &g) != OVSTAGE_OK)
				break;
			double f1 = now_s();
			tf += f1 - f0;
			/* the groups of one seal's columns share its event: one wait covers them */
			if (g.data.cuda_sync.wait_event && g.data.cuda_sync.wait_event != waited)
				cudaStreamWaitEvent(cs, (cudaEvent_t)g.data.cuda_sync.wait_event, 0);
			waited = g.data.cuda_sync.wait_event;
			double f2 = now_s();
			tcw += f2 - f1;
			ovstage_release_group(s.st, &g);
			trg += now_s() - f2;
		}
		wait_release(s.st, ovstage_release_read(s.st, rh));
		tr += now_s() - a2;
	}
	cudaStreamSynchronize(cs);
	double ours = (now_s() - t0) / STEPS;
	note("step loop per step: write op %.0f us (the call %.0f us), seal %.0f us, read + release %.0f us (read op "
	     "%.0f us, fetches %.0f us, consumer waits %.0f us, group releases %.0f us)", tw / STEPS * 1e6,
	     tsub / STEPS * 1e6, ts / STEPS * 1e6, tr / STEPS * 1e6, tro / STEPS * 1e6, tf / STEPS * 1e6,
	     tcw / STEPS * 1e6, trg / STEPS * 1e6);
	t0 = now_s();
	for (int step = 0; step < STEPS; step++) {
		for (int c = 0; c < COLS; c++)
			cudaMemcpyAsync((char *)dst + (size_t)c * ROWS * 4, (char *)src + (size_t)c * ROWS * 4, ROWS * 4,
					cudaMemcpyDeviceToDevice, cs);
		cudaStreamSynchronize(cs);
	}
	double bare = (now_s() - t0) / STEPS;
	table_row("step: 100 cols x 4096 rows write+seal+read", fmt("%.0f us", ours * 1e6),
		  "100 x cudaMemcpyAsync + sync", fmt("%.0f us", bare * 1e6), fmt("%.2fx", bare / ours), ">= 5x faster",
		  met(true, bare / ours >= 5));
	cudaStreamDestroy(cs);
	if (host)
		free(src);
	else
		cudaFree(src);
	cudaFree(dst);
	stage_close(&s);
}

/* ---- two GPUs (issue 9) ------------------------------------------------------------------------
 * (1) The aggregate step rate of two instances on two GPUs, one thread each, against one instance on
 * one GPU: a step writes one 16 MiB column from a device tensor on the thread's GPU, seals it and reads
 * it latest (the consumer stream waits on the groups' events). (2) A 64 MiB write from GPU 1 into a
 * column on GPU 0 (a peer copy) until its receipt, against cudaMemcpyPeerAsync of the same bytes +
 * sync. With one GPU both rows say they were not measured. */
enum { TWO_GPU_STEPS = 40, TWO_GPU_ROWS = 1u << 20 }; /* rows of float32 x 4: 16 MiB */

typedef struct gpu_steps {
	int dev;        /* the thread's GPU */
	double seconds; /* wall time of its TWO_GPU_STEPS steps */
} gpu_steps;

static void *gpu_steps_thread(void *p)
{
	gpu_steps *gs = p;
	cudaSetDevice(gs->dev);
	stage s;
	stage_open(&s, TWO_GPU_ROWS);
	ovx_token_t a = tok(&s, "pose");
	void *src;
	cudaMalloc(&src, (size_t)TWO_GPU_ROWS * 16);
	cudaMemset(src, 1, (size_t)TWO_GPU_ROWS * 16);
	cudaStream_t cs;
	cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking);
	cudaDeviceSynchronize();
	DLTensor t;
	int64_t shape;
	double t0 = 0;
	for (int r = -2; r < TWO_GPU_STEPS; r++) { /* two untimed steps first */
		if (r == 0)
			t0 = now_s();
		ovstage_write_data_t w = wdata(&t, &shape, src, TWO_GPU_ROWS, kDLCUDA);
		t.device.device_id = gs->dev;
		wait_release(s.st, write_attr(&s, a, w));
		seal_all(&s);
		ovstage_read_handle_t rh;
		ovstage_ordinal_range_t range = { 0, s.ord, false };
		wait_release(s.st, ovstage_read_attributes(s.st, s.q, &a, 1, range, &rh));
		consume_read(s.st, rh, cs);
	}
	cudaStreamSynchronize(cs);
	gs->seconds = now_s() - t0;
	cudaStreamDestroy(cs);
	cudaFree(src);
	stage_close(&s);
	return NULL;
}

/* Steps per second of `ngpu` threads, thread k on GPU k, all running at once. */
static double gpu_step_rate(int ngpu)
{
	pthread_t th[2];
	gpu_steps gs[2];
	for (int k = 0; k < ngpu; k++) {
		gs[k] = (gpu_steps){ k, 0 };
		pthread_create(&th[k], NULL, gpu_steps_thread, &gs[k]);
	}
	for (int k = 0; k < ngpu; k++)
		pthread_join(th[k], NULL);
	double slowest = 0;
	for (int k = 0; k < ngpu; k++)
		slowest = gs[k].seconds > slowest ? gs[k].seconds : slowest;
	return ngpu * TWO_GPU_STEPS / slowest;
}

static void row_peer_copy_in(void)
{
	size_t bytes = (size_t)64 << 20;
	uint32_t n = (uint32_t)(bytes / 1024);
	g_lanes = 128;
	g_bits = 64;
	cudaSetDevice(0);
	stage s;
	stage_open(&s, n);
	ovx_token_t a = tok(&s, "col");
	void *first, *dst, *src;
	cudaMalloc(&first, bytes);
	cudaMalloc(&dst, bytes);
	cudaSetDevice(1);
	cudaMalloc(&src, bytes);
	cudaMemset(src, 3, bytes);
	cudaDeviceSynchronize();
	cudaSetDevice(0);
	cudaStream_t cs;
	cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking);
	DLTensor t;
	int64_t shape;
	wait_release(s.st, write_attr(&s, a, wdata(&t, &shape, first, n, kDLCUDA))); /* the column: GPU 0 */
	seal_all(&s);
	enum { REPS = 9 };
	double ours[REPS], peer[REPS];
	for (int r = 0; r < REPS; r++) {
		ovstage_write_data_t w = wdata(&t, &shape, src, n, kDLCUDA);
		t.device.device_id = 1;
		double t0 = now_s();
		wait_release(s.st, write_attr(&s, a, w));
		ours[r] = now_s() - t0;
		seal_all(&s);
		t0 = now_s();
		cudaMemcpyPeerAsync(dst, 0, src, 1, bytes, cs);
		cudaStreamSynchronize(cs);
		peer[r] = now_s() - t0;
	}
	double o = (double)bytes / median(ours, REPS) / 1e9, p = (double)bytes / median(peer, REPS) / 1e9;
	table_row("peer write 64 MiB, GPU 1 into a column on GPU 0", fmt("%.1f GB/s", o), "cudaMemcpyPeerAsync + sync",
		  fmt("%.1f GB/s", p), fmt("%.2fx", o / p), ">= 0.9x", met(true, o / p >= 0.9));
	cudaStreamDestroy(cs);
	cudaFree(first);
	cudaFree(dst);
	cudaSetDevice(1);
	cudaFree(src);
	cudaSetDevice(0);
	stage_close(&s);
	g_lanes = 1;
	g_bits = 32;
}

static void row_two_gpu(int ndev)
{
	fprintf(stderr, "bench_gpu: %s\n", __func__);
	if (ndev < 2) {
		table_row("two GPUs: write + seal + read steps/s, 2 instances on 2 GPUs", "not measured",
			  "1 instance on 1 GPU", "-", "-", ">= 1.8x", "-");
		table_row("peer write 64 MiB, GPU 1 into a column on GPU 0", "not measured", "cudaMemcpyPeerAsync + sync",
			  "-", "-", ">= 0.9x", "-");
		note("two-GPU rows not measured: %d CUDA device(s) visible (they need two: nvidia-h200-x2)", ndev);
		return;
	}
	g_lanes = 4;
	double one = gpu_step_rate(1), two = gpu_step_rate(2);
	g_lanes = 1;
	table_row("two GPUs: write + seal + read steps/s, 2 instances on 2 GPUs", fmt("%.0f /s", two),
		  "1 instance on 1 GPU", fmt("%.0f /s", one), fmt("%.2fx", two / one), ">= 1.8x", met(true, two / one >= 1.8));
	row_peer_copy_in();
}

int main(int argc, char **argv)
{
	bool md = false;
	for (int i = 1; i < argc; i++)
		md |= strcmp(argv[i], "--markdown") == 0;
	int n = 0;
	const char *why = "";
	ovstage_ext_get_gpu_status(&n, &why);
	if (n == 0) {
		printf("bench_gpu: no usable CUDA device (%s): nothing measured\n", why);
		return 0;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct cudaDeviceProp p;
	cudaGetDeviceProperties(&p, 0);
	char cpu[128];
	cpu_model(cpu, sizeof cpu);
	printf("bench_gpu on %s (%s)\n", p.name, cpu);
	table_set_peer_header("Peer (same run)");
	/* --only copy|sparse|latency|pool|array|step|two runs one group of rows (profiling) */
	const char *only = NULL;
	for (int i = 1; i + 1 < argc; i++)
		if (strcmp(argv[i], "--only") == 0)
			only = argv[i + 1];
	if (!only || !strcmp(only, "copy")) {
		row_copy_in((size_t)1 << 20, kDLCUDA, "D2D");
		row_copy_in((size_t)64 << 20, kDLCUDA, "D2D");
		row_copy_in((size_t)256 << 20, kDLCUDA, "D2D");
		row_copy_in((size_t)1 << 20, kDLCUDAHost, "H2D pinned");
		row_copy_in((size_t)256 << 20, kDLCUDAHost, "H2D pinned");
	}
	if (!only || !strcmp(only, "sparse"))
		row_sparse();
	if (!only || !strcmp(only, "latency"))
		row_latency();
	if (!only || !strcmp(only, "pool"))
		row_pool();
	if (!only || !strcmp(only, "array"))
		row_array();
	if (!only || !strcmp(only, "step"))
		row_step_loop();
	if (!only || !strcmp(only, "two"))
		row_two_gpu(n);
	table_print(md);
	notes_print();
	return 0;
}
