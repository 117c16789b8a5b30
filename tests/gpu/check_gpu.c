/*
 * check_gpu.c — the GPU suite: device-resident columns through the public API (residency, sparse
 * writes as kernels, the cuda_sync rules, managed device tensors' deleters, bad input, a mixed
 * CPU/GPU read, array (ragged) columns on the device and CUDA rows into a CPU array column, a
 * multi-thread stress checking every sealed value, the device buffer pool and its bound).
 *
 * Where the process cannot use CUDA (no device, no driver, CPU-only mode, or a build without the
 * backend) only the "unavailable" case runs: a CUDA tensor must then be refused at the call with a
 * message naming why. It says so on stderr; the GPU cases run on the device machine (docs/gpu.md).
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include <ovstage/ovstage.h>
#include <ovstage/ovstage_ext.h>
#include <ovx/path_dictionary/path_dictionary.h>

#include "gpu_test_util.h"

int tst_gpu_spin_fill(void *stream, float *dst, unsigned n, float base, long long spin_cycles);
int tst_gpu_add(void *stream, float *dst, unsigned n, float delta);
int tst_gpu_spin_bytes(void *stream, unsigned char *dst, unsigned n, unsigned seed, long long spin_cycles);

#define CU(call) ck_assert_msg((call) == cudaSuccess, "%s: %s", #call, cudaGetErrorString(cudaGetLastError()))
#define SPIN (20LL * 1000 * 1000) /* ~10 ms of GPU clocks: the write is submitted while it runs */

typedef struct fixture {
	ovstage_instance_t *st;
	path_dictionary_instance_t *pd;
	ovstage_query_handle_t q;
	uint32_t n;
} fixture;

static float *dev_alloc(size_t bytes)
{
	void *p = NULL;
	CU(cudaMalloc(&p, bytes));
	return p;
}

/* OVSTAGE_GPU_TEST_DIV=k divides the prim counts by k (at least 1000 stay): the compute-sanitizer
 * runs, which are slow per kernel thread. */
static uint32_t scaled(uint32_t n)
{
	const char *v = getenv("OVSTAGE_GPU_TEST_DIV");
	uint32_t k = v ? (uint32_t)strtoul(v, NULL, 10) : 1;
	return k > 1 && n / k >= 1000 ? n / k : k > 1 && n > 1000 ? 1000 : n;
}

static void fx_open(fixture *f, uint32_t n)
{
	n = scaled(n);
	memset(f, 0, sizeof *f);
	ck_assert_int_eq(ovstage_create_instance(NULL, &f->st), OVSTAGE_OK);
	f->pd = ovstage_get_path_dictionary(f->st);
	f->n = n;
	f->q = gtu_query_n(f->st, f->pd, n, "/w/p");
}

static void fx_close(fixture *f)
{
	tst_wait_ok(f->st, ovstage_release_query(f->st, f->q));
	ck_assert_int_eq(ovstage_destroy_instance(f->st), OVSTAGE_OK);
}

/* A 1-D float32 tensor of `rows` rows at p on device dev (kDLCUDA) or the host. */
static ovstage_write_data_t wdata_dev(tst_tensor *tt, void *p, int64_t rows, DLDeviceType type)
{
	ovstage_write_data_t w = tst_wdata(tt, p, rows, kDLFloat, 32, 1);
	tt->t.device.device_type = type;
	tt->t.device.device_id = 0;
	return w;
}

static ovstage_enqueue_result_t write1(fixture *f, ovx_token_t a, ovstage_ordinal_t o, ovstage_write_data_t w)
{
	return ovstage_write_attribute(f->st, f->q, tst_attr(a), o, w, OVSTAGE_PRIM_MODE_UPSERT);
}

static void seal(fixture *f, ovstage_ordinal_t o)
{
	ovstage_write_floor_desc_t d = { o, OVSTAGE_SCOPE_ALL, NULL, 0 };
	tst_wait_ok(f->st, ovstage_advance_write_floor(f->st, &d));
}

/* A group's rows on the host (malloc'd, shape[0] floats): a device group's copied after its event. */
static float *group_to_host(const ovstage_read_group_t *g)
{
	const DLTensor *t = &g->data.tensors[0];
	size_t rows = (size_t)t->shape[0];
	float *h = malloc((rows ? rows : 1) * sizeof *h);
	if (t->device.device_type == kDLCUDA) {
		ck_assert_int_eq(t->device.device_id, 0);
		if (g->data.cuda_sync.wait_event)
			CU(cudaStreamWaitEvent(cudaStreamPerThread, (cudaEvent_t)g->data.cuda_sync.wait_event, 0));
		CU(cudaMemcpyAsync(h, t->data, rows * sizeof *h, cudaMemcpyDeviceToHost, cudaStreamPerThread));
		CU(cudaStreamSynchronize(cudaStreamPerThread));
	} else {
		ck_assert_int_eq(g->data.cuda_sync.wait_event, 0);
		memcpy(h, t->data, rows * sizeof *h);
	}
	return h;
}

/* The latest values of attributes a (one or two) into vals (prim order; NAN where absent), with the
 * device of the groups seen per attribute in dev[k]. Device groups are read after their event. */
static void read_latest(fixture *f, const ovx_token_t *a, size_t na, float *vals, DLDeviceType *dev)
{
	ovstage_read_handle_t rh;
	ovstage_ordinal_range_t r = { 0, 0, false };
	r.end_ordinal = UINT64_MAX;
	tst_wait_ok(f->st, ovstage_read_attributes(f->st, f->q, a, na, r, &rh));
	for (size_t k = 0; k < na * f->n; k++)
		vals[k] = __builtin_nanf("");
	ovstage_read_group_t g;
	ovstage_api_status_t s;
	while ((s = ovstage_fetch_read_next(f->st, rh, OVSTAGE_TIMEOUT_INFINITE, &g)) == OVSTAGE_OK) {
		size_t k = g.attribute == a[0] ? 0 : 1;
		ck_assert(!g.is_delete);
		const DLTensor *t = &g.data.tensors[0];
		dev[k] = t->device.device_type;
		size_t rows = (size_t)t->shape[0];
		float *h = group_to_host(&g);
		for (uint32_t i = 0; i < g.prims.count; i++) {
			uint32_t e = g.prims.index_map ? g.prims.index_map[i] : g.prims.offset + i;
			uint32_t row = g.data.index_map ? g.data.index_map[i] : i;
			ck_assert_uint_lt(row, rows);
			vals[k * f->n + e] = h[row];
		}
		free(h);
		ck_assert_int_eq(ovstage_release_group(f->st, &g), OVSTAGE_OK);
	}
	ck_assert_int_eq(s, OVSTAGE_ERROR_END_OF_ITERATION);
	tst_wait_ok(f->st, ovstage_release_read(f->st, rh));
}

static void expect(const float *vals, const float *want, uint32_t n, const char *what)
{
	for (uint32_t i = 0; i < n; i++)
		ck_assert_msg(vals[i] == want[i], "%s: prim %u = %g, expected %g", what, i, (double)vals[i],
			      (double)want[i]);
}

/* The latest values of a on f's prims are base + prim, in a device group. */
static void expect_device_ramp(fixture *f, ovx_token_t a, float base, const char *what)
{
	float *vals = malloc(f->n * sizeof *vals), *want = malloc(f->n * sizeof *want);
	DLDeviceType dev[1];
	read_latest(f, &a, 1, vals, dev);
	ck_assert_int_eq(dev[0], kDLCUDA);
	for (uint32_t i = 0; i < f->n; i++)
		want[i] = base + (float)i;
	expect(vals, want, f->n, what);
	free(vals);
	free(want);
}

/* ---- residency and sparse kernels ------------------------------------------------------------- */

START_TEST(test_full_write_stays_on_device)
{
	fixture f;
	fx_open(&f, 100000); /* several 256 KiB chunks */
	ovx_token_t a = tst_tok(f.pd, "pos");
	float *d;
	cudaStream_t s;
	d = dev_alloc(f.n * sizeof *d);
	CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	ck_assert_int_eq(tst_gpu_spin_fill(s, d, f.n, 1000.f, SPIN), 0);
	tst_tensor tt;
	ovstage_write_data_t w = wdata_dev(&tt, d, f.n, kDLCUDA);
	w.cuda_sync.stream = (uintptr_t)s; /* drained: the kernel is still spinning now */
	tst_wait_ok(f.st, write1(&f, a, 1, w));
	seal(&f, 1);
	expect_device_ramp(&f, a, 1000.f, "full write");
	CU(cudaStreamDestroy(s));
	CU(cudaFree(d));
	fx_close(&f);
}
END_TEST

START_TEST(test_sparse_writes_run_on_device)
{
	fixture f;
	fx_open(&f, 150000);
	ovx_token_t a = tst_tok(f.pd, "vel");
	float *d, *h = malloc(f.n * sizeof *h), *want = malloc(f.n * sizeof *want), *vals = malloc(f.n * sizeof *vals);
	d = dev_alloc(f.n * sizeof *d);
	for (uint32_t i = 0; i < f.n; i++)
		h[i] = want[i] = (float)i;
	CU(cudaMemcpy(d, h, f.n * sizeof *h, cudaMemcpyHostToDevice));
	tst_tensor tt;
	tst_wait_ok(f.st, write1(&f, a, 1, wdata_dev(&tt, d, f.n, kDLCUDA)));
	seal(&f, 1);
	/* ordinal 2: every third prim, through a mask, from a device source of new values */
	for (uint32_t i = 0; i < f.n; i++)
		h[i] = -(float)i;
	CU(cudaMemcpy(d, h, f.n * sizeof *h, cudaMemcpyHostToDevice));
	uint64_t *mask = calloc((f.n + 63) / 64, sizeof *mask);
	for (uint32_t i = 0; i < f.n; i += 3) {
		mask[i / 64] |= 1ull << (i % 64);
		want[i] = -(float)i;
	}
	ovstage_write_data_t w = wdata_dev(&tt, d, f.n, kDLCUDA);
	w.mask = mask;
	w.count = f.n;
	tst_wait_ok(f.st, write1(&f, a, 2, w));
	seal(&f, 2);
	DLDeviceType dev[1];
	read_latest(&f, &a, 1, vals, dev);
	ck_assert_int_eq(dev[0], kDLCUDA);
	expect(vals, want, f.n, "masked write");
	/* ordinal 3: an index map broadcasting source row 7 to the first 1000 prims (count = 1000) */
	uint32_t *map = malloc(1000 * sizeof *map);
	for (uint32_t i = 0; i < 1000; i++) {
		map[i] = 7;
		want[i] = -7.f;
	}
	w = wdata_dev(&tt, d, 8, kDLCUDA);
	w.index_map = map;
	w.count = 1000;
	tst_wait_ok(f.st, write1(&f, a, 3, w));
	seal(&f, 3);
	read_latest(&f, &a, 1, vals, dev);
	expect(vals, want, f.n, "index-mapped write");
	/* ordinal 4: a host source into the device column (gathered on the host, one upload) */
	for (uint32_t i = 0; i < f.n; i += 1000) {
		mask[i / 64] = 0;
	}
	memset(mask, 0, (f.n + 63) / 64 * sizeof *mask);
	for (uint32_t i = 5; i < f.n; i += 1000) {
		mask[i / 64] |= 1ull << (i % 64);
		h[i] = 0.5f + (float)i;
		want[i] = h[i];
	}
	w = wdata_dev(&tt, h, f.n, kDLCPU);
	w.mask = mask;
	w.count = f.n;
	tst_wait_ok(f.st, write1(&f, a, 4, w));
	seal(&f, 4);
	read_latest(&f, &a, 1, vals, dev);
	ck_assert_int_eq(dev[0], kDLCUDA);
	expect(vals, want, f.n, "host write into a device column");
	CU(cudaFree(d));
	free(h);
	free(want);
	free(vals);
	free(mask);
	free(map);
	fx_close(&f);
}
END_TEST

START_TEST(test_cuda_into_cpu_column_and_mixed_read)
{
	fixture f;
	fx_open(&f, 4096);
	ovx_token_t ab[2] = { tst_tok(f.pd, "host_col"), tst_tok(f.pd, "dev_col") };
	float *h = malloc(f.n * sizeof *h), *d, *vals = malloc(2 * f.n * sizeof *vals), *want = malloc(2 * f.n * sizeof *want);
	d = dev_alloc(f.n * sizeof *d);
	for (uint32_t i = 0; i < f.n; i++)
		h[i] = 3.f * (float)i;
	tst_tensor t1, t2;
	tst_wait_ok(f.st, write1(&f, ab[0], 1, wdata_dev(&t1, h, f.n, kDLCPU))); /* a CPU column */
	ck_assert_int_eq(tst_gpu_spin_fill(NULL, d, f.n, 7.f, SPIN), 0);      /* legacy stream */
	ovstage_write_data_t w = wdata_dev(&t2, d, f.n, kDLCUDA);
	w.cuda_sync.stream = 1;
	tst_wait_ok(f.st, write1(&f, ab[1], 1, w)); /* a device column */
	seal(&f, 1);
	/* ordinal 2: CUDA values into the CPU column (staged to the host), on the per-thread stream */
	ck_assert_int_eq(tst_gpu_spin_fill(cudaStreamPerThread, d, f.n, 50.f, SPIN), 0);
	w = wdata_dev(&t2, d, f.n, kDLCUDA);
	w.cuda_sync.stream = 2;
	tst_wait_ok(f.st, write1(&f, ab[0], 2, w));
	seal(&f, 2);
	DLDeviceType dev[2] = { 0, 0 };
	read_latest(&f, ab, 2, vals, dev);
	ck_assert_int_eq(dev[0], kDLCPU);
	ck_assert_int_eq(dev[1], kDLCUDA);
	for (uint32_t i = 0; i < f.n; i++) {
		want[i] = 50.f + (float)i;
		want[f.n + i] = 7.f + (float)i;
	}
	expect(vals, want, 2 * f.n, "mixed read");
	CU(cudaFree(d));
	free(h);
	free(vals);
	free(want);
	fx_close(&f);
}
END_TEST

/* ---- synchronisation ------------------------------------------------------------------------- */

START_TEST(test_wait_event_is_snapshotted_at_the_call)
{
	fixture f;
	fx_open(&f, 8192);
	ovx_token_t a = tst_tok(f.pd, "ev");
	float *d, *vals = malloc(f.n * sizeof *vals), *want = malloc(f.n * sizeof *want);
	d = dev_alloc(f.n * sizeof *d);
	cudaStream_t s;
	cudaEvent_t ev;
	CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CU(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
	ck_assert_int_eq(tst_gpu_spin_fill(s, d, f.n, 11.f, SPIN), 0);
	CU(cudaEventRecord(ev, s));
	tst_tensor tt;
	ovstage_write_data_t w = wdata_dev(&tt, d, f.n, kDLCUDA);
	w.cuda_sync.wait_event = (uintptr_t)ev;
	ovstage_enqueue_result_t e = write1(&f, a, 1, w);
	/* After the call the producer queues a second fill (spinning first) and re-records the event
	 * behind it: the write must wait for the state the event had at the call (the first fill), so it
	 * copies the first fill's values before the second overwrites them. */
	ck_assert_int_eq(tst_gpu_spin_fill(s, d, f.n, 99.f, 2 * SPIN), 0);
	CU(cudaEventRecord(ev, s));
	tst_wait_ok(f.st, e);
	seal(&f, 1);
	DLDeviceType dev[1];
	read_latest(&f, &a, 1, vals, dev);
	for (uint32_t i = 0; i < f.n; i++)
		want[i] = 11.f + (float)i;
	expect(vals, want, f.n, "event-synchronised write");
	CU(cudaEventDestroy(ev));
	CU(cudaStreamDestroy(s));
	CU(cudaFree(d));
	free(vals);
	free(want);
	fx_close(&f);
}
END_TEST

/* ---- managed device tensors ------------------------------------------------------------------ */

static _Atomic int g_deleted;

static void count_deleter(DLManagedTensorVersioned *mt)
{
	atomic_fetch_add_explicit(&g_deleted, 1, memory_order_relaxed);
	(void)cudaFree(mt->dl_tensor.data);
	free(mt->dl_tensor.shape);
	free(mt);
}

START_TEST(test_managed_device_tensor_adopted_deleted_once)
{
	fixture f;
	fx_open(&f, 2048);
	ovx_token_t a = tst_tok(f.pd, "adopt");
	atomic_store(&g_deleted, 0);
	DLManagedTensorVersioned *mt = calloc(1, sizeof *mt);
	mt->version.major = DLPACK_MAJOR_VERSION;
	mt->dl_tensor.device = (DLDevice){ kDLCUDA, 0 };
	mt->dl_tensor.ndim = 1;
	mt->dl_tensor.dtype = (DLDataType){ kDLFloat, 32, 1 };
	mt->dl_tensor.shape = malloc(sizeof(int64_t));
	mt->dl_tensor.shape[0] = f.n;
	CU(cudaMalloc(&mt->dl_tensor.data, f.n * sizeof(float)));
	ck_assert_int_eq(tst_gpu_spin_fill(NULL, mt->dl_tensor.data, f.n, 5.f, SPIN), 0);
	mt->deleter = count_deleter;
	const DLManagedTensorVersioned *list[1] = { mt };
	ovstage_write_data_t w;
	memset(&w, 0, sizeof w);
	w.managed_tensors = list;
	w.tensor_count = 1;
	w.cuda_sync.stream = 1;
	tst_wait_ok(f.st, write1(&f, a, 1, w));
	seal(&f, 1);
	float *vals = malloc(f.n * sizeof *vals), *want = malloc(f.n * sizeof *want);
	DLDeviceType dev[1];
	read_latest(&f, &a, 1, vals, dev);
	for (uint32_t i = 0; i < f.n; i++)
		want[i] = 5.f + (float)i;
	expect(vals, want, f.n, "adopted tensor");
	ck_assert_int_eq(atomic_load(&g_deleted), 0); /* still the sealed version's memory */
	fx_close(&f);                                 /* destroy: the last holder goes */
	ck_assert_int_eq(atomic_load(&g_deleted), 1);
	free(vals);
	free(want);
}
END_TEST

/* ---- bad input ------------------------------------------------------------------------------- */

static void rows_over(DLTensor *t, int64_t *shape, float *base, const int64_t *len, uint32_t n, DLDeviceType type);
static ovstage_write_data_t rows_wdata(const DLTensor *rows, uint32_t n);

START_TEST(test_bad_device_input_refused_at_call)
{
	fixture f;
	fx_open(&f, 16);
	ovx_token_t a = tst_tok(f.pd, "bad");
	float host[16] = { 0 };
	tst_tensor tt;
	ovstage_enqueue_result_t e = write1(&f, a, 1, wdata_dev(&tt, host, 16, kDLCUDA));
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(tst_last_error(), "not memory of CUDA device 0") || strstr(tst_last_error(), "not CUDA memory"),
		      "%s", tst_last_error());
	float *d;
	d = dev_alloc(16 * sizeof *d);
	ovstage_write_data_t w = wdata_dev(&tt, d, 16, kDLCUDA);
	tt.t.device.device_id = 63;
	e = write1(&f, a, 1, w);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(tst_last_error(), "ordinal 63"), "%s", tst_last_error());
	/* array rows: rows inside one device buffer are checked through one query of its allocation;
	 * a later row in host memory, or inside that buffer but naming another device, is still refused */
	ovx_token_t arr = tst_tok(f.pd, "bad_rows");
	DLTensor rows[16];
	int64_t len[16], shape[16];
	for (uint32_t i = 0; i < 16; i++)
		len[i] = 1;
	for (int k = 0; k < 2; k++) {
		rows_over(rows, shape, d, len, 16, kDLCUDA);
		if (k == 0)
			rows[9].data = host; /* host memory after nine rows of the device buffer */
		else
			rows[9].device.device_id = 1; /* in the buffer, naming another device */
		e = write1(&f, arr, 1, rows_wdata(rows, 16));
		ck_assert_int_eq(e.status, OVSTAGE_ERROR_INVALID_ARGUMENT);
		const char *m = tst_last_error();
		ck_assert_msg(k == 0 ? strstr(m, "tensors[9].data") && strstr(m, "not memory of CUDA device 0")
			             : strstr(m, "ordinal 1") || strstr(m, "tensor says device 1"), "%s", m);
	}
	/* two entries: the first's buffer is cached, the second's host pointer is still refused */
	tst_tensor t0, t1;
	ovstage_attribute_write_t two[2] = { { tst_attr(a), wdata_dev(&t0, d, 16, kDLCUDA) },
					     { tst_attr(arr), wdata_dev(&t1, host, 16, kDLCUDA) } };
	e = ovstage_write_attributes(f.st, f.q, two, 2, 1, OVSTAGE_PRIM_MODE_UPSERT);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(tst_last_error(), "writes[1]") && strstr(tst_last_error(), "not memory of CUDA device 0"),
		      "%s", tst_last_error());
	/* nothing was written: the column has no sealed value */
	seal(&f, 1);
	float vals[16];
	DLDeviceType dev[1];
	ovstage_read_handle_t rh;
	ovstage_ordinal_range_t r = { 0, UINT64_MAX, false };
	tst_wait_ok(f.st, ovstage_read_attributes(f.st, f.q, &a, 1, r, &rh));
	ovstage_read_group_t g;
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh, OVSTAGE_TIMEOUT_INFINITE, &g), OVSTAGE_ERROR_END_OF_ITERATION);
	tst_wait_ok(f.st, ovstage_release_read(f.st, rh));
	(void)vals;
	(void)dev;
	CU(cudaFree(d));
	fx_close(&f);
}
END_TEST


/* Maps and clones of device columns, and value filters over them: refused with NOT_SUPPORTED and a
 * message (docs/api.md), leaving the column as it was. */
/* ---- maps of device columns, the instance's CUDA device ---------------------------------------- */

/* The process configuration with the active-GPU list `list`, for the instances created next: an
 * ovstage_initialize reference holds it (without one the next bootstrap would start from defaults);
 * cuda_devices_end clears the list and drops the reference. */

static void cuda_devices_begin(const char *list)
{
	gtu_config_cuda_devices(list);
}

static void cuda_devices_end(void)
{
	gtu_config_cuda_devices("");
	ck_assert_int_eq(ovstage_shutdown(), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_shutdown(), OVSTAGE_OK);
}

/* A map session over f's query at ordinal o: its group (device tensor checked), filled on stream s
 * after the group's event by a spinning kernel with base, then unmapped with {stream s} at once. */
static void map_fill_unmap(fixture *f, ovstage_query_handle_t q, uint32_t n, ovx_token_t a, ovstage_ordinal_t o,
			   float base, cudaStream_t s, uintptr_t unmap_stream)
{
	ovstage_map_desc_t md;
	memset(&md, 0, sizeof md);
	md.attribute = tst_attr(a);
	md.dtype = (DLDataType){ kDLFloat, 32, 1 };
	md.prim_mode = OVSTAGE_PRIM_MODE_UPSERT;
	ovstage_map_handle_t mh = OVSTAGE_INVALID_MAP_HANDLE;
	tst_wait_ok(f->st, ovstage_map_attribute(f->st, q, &md, o, NULL, 0, &mh));
	ovstage_map_group_t g;
	ck_assert_int_eq(ovstage_fetch_map_next(f->st, mh, OVSTAGE_TIMEOUT_INFINITE, &g), OVSTAGE_OK);
	const DLTensor *t = &g.data.tensors[0];
	ck_assert_int_eq(t->device.device_type, kDLCUDA);
	ck_assert_int_eq(t->device.device_id, 0);
	ck_assert_int_eq(t->shape[0], n);
	ck_assert_int_eq(g.prims.count, n);
	ck_assert_msg(g.data.cuda_sync.wait_event != 0, "a device map group carries its buffer's event");
	CU(cudaStreamWaitEvent(s, (cudaEvent_t)g.data.cuda_sync.wait_event, 0));
	ck_assert_int_eq(tst_gpu_spin_fill(s, t->data, n, base, SPIN), 0);
	ovstage_cuda_sync_t none = { 0, 0 }, done = { unmap_stream, 0 };
	tst_wait_ok(f->st, ovstage_unmap_group(f->st, mh, &g, none));
	/* returns while the kernel still spins: the commit's receipt waits for it, the seal after it */
	tst_wait_ok(f->st, ovstage_unmap_attribute(f->st, mh, done));
}

START_TEST(test_map_creates_device_column_on_instance_gpu)
{
	cuda_devices_begin("0");
	fixture f;
	fx_open(&f, 50000);
	int cd = -2;
	ck_assert_int_eq(ovstage_ext_get_instance_cuda_device(f.st, &cd), OVSTAGE_OK);
	ck_assert_int_eq(cd, 0);
	ovx_token_t a = tst_tok(f.pd, "mapped");
	cudaStream_t s;
	CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	/* a new column: the whole query, zero copy (the buffer becomes the version's) */
	map_fill_unmap(&f, f.q, f.n, a, 1, 5.f, s, (uintptr_t)s);
	seal(&f, 1);
	expect_device_ramp(&f, a, 5.f, "full map on the device");
	float *vals = malloc(f.n * sizeof *vals), *want = malloc(f.n * sizeof *want);
	DLDeviceType dev[1];
	for (uint32_t i = 0; i < f.n; i++)
		want[i] = 5.f + (float)i;
	/* a sparse session: every third prim, committed by a scatter kernel; unmapped on the legacy
	 * default stream's handle (1) after a fill on it */
	uint32_t k = (f.n + 2) / 3;
	char **paths = malloc(k * sizeof *paths);
	for (uint32_t i = 0; i < k; i++) {
		paths[i] = malloc(24);
		snprintf(paths[i], 24, "/w/p%u", 3 * i);
	}
	ovstage_query_handle_t q3 = tst_query_of(f.st, f.pd, (const char *const *)paths, k, NULL);
	map_fill_unmap(&f, q3, k, a, 2, 1000.f, (cudaStream_t)0, 1);
	seal(&f, 2);
	read_latest(&f, &a, 1, vals, dev);
	ck_assert_int_eq(dev[0], kDLCUDA);
	for (uint32_t i = 0; i < k; i++)
		want[3 * i] = 1000.f + (float)i;
	expect(vals, want, f.n, "sparse map on the device");
	for (uint32_t i = 0; i < k; i++)
		free(paths[i]);
	free(paths);
	tst_wait_ok(f.st, ovstage_release_query(f.st, q3));
	free(vals);
	free(want);
	CU(cudaStreamDestroy(s));
	fx_close(&f);
	cuda_devices_end();
}
END_TEST

START_TEST(test_instance_devices_round_robin_and_invisible_refused)
{
	int n = 0;
	ck_assert_int_eq(ovstage_ext_get_gpu_status(&n, NULL), OVSTAGE_OK);
	char list[32];
	snprintf(list, sizeof list, "0,%d", n); /* ordinal n is one past the last visible device */
	cuda_devices_begin(list);
	ovstage_instance_t *a = NULL, *b = NULL, *c = NULL;
	ck_assert_int_eq(ovstage_create_instance(NULL, &a), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_create_instance(NULL, &b), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_ptr_null(b);
	char want[48];
	snprintf(want, sizeof want, "CUDA device %d of the active-GPU list", n);
	ck_assert_msg(strstr(tst_last_error(), want), "%s", tst_last_error());
	ck_assert_int_eq(ovstage_create_instance(NULL, &c), OVSTAGE_OK); /* the list's next entry again: 0 */
	int da = -2, dc = -2;
	ck_assert_int_eq(ovstage_ext_get_instance_cuda_device(a, &da), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_ext_get_instance_cuda_device(c, &dc), OVSTAGE_OK);
	ck_assert_int_eq(da, 0);
	ck_assert_int_eq(dc, 0);
	ck_assert_int_eq(ovstage_destroy_instance(a), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_destroy_instance(c), OVSTAGE_OK);
	cuda_devices_end();
	ck_assert_int_eq(ovstage_create_instance(NULL, &a), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_ext_get_instance_cuda_device(a, &da), OVSTAGE_OK);
	ck_assert_int_eq(da, -1); /* no list: no device (maps then create CPU columns) */
	ck_assert_int_eq(ovstage_destroy_instance(a), OVSTAGE_OK);
}
END_TEST

/* Whether sysfs lists every online CPU as local to PCI device `id` (lower-case hex), and so whether
 * hwloc must put every worker near it: 1 yes, 0 no, -1 sysfs does not say. */
static int sysfs_all_cpus_local(const char *id)
{
	char path[128], list[256], low[32];
	size_t i = 0;
	for (; id[i] && i + 1 < sizeof low; i++)
		low[i] = (char)(id[i] >= 'A' && id[i] <= 'F' ? id[i] - 'A' + 'a' : id[i]);
	low[i] = 0;
	snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/local_cpulist", low);
	FILE *fp = fopen(path, "r");
	if (!fp)
		return -1;
	bool got = fgets(list, sizeof list, fp) != NULL;
	fclose(fp);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	char want[32];
	snprintf(want, sizeof want, cpus > 1 ? "0-%ld\n" : "0\n", cpus - 1);
	return got && strcmp(list, want) == 0;
}

/* Issue 9: where a device is served from. Its PCI bus ID is CUDA's; the workers hwloc placed near
 * it are all of them on a machine where sysfs calls every CPU local to it (the H200 host), and its
 * own poller resolves the completions of the device's work (each device has one). */
START_TEST(test_device_info_near_workers_and_poller)
{
	ovstage_ext_gpu_device_info_t info;
	ck_assert_int_eq(ovstage_ext_get_gpu_device_info(0, NULL), OVSTAGE_ERROR_INVALID_ARGUMENT);
	int n = 0;
	ck_assert_int_eq(ovstage_ext_get_gpu_status(&n, NULL), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_ext_get_gpu_device_info(n, &info), OVSTAGE_ERROR_INVALID_ARGUMENT);
	char want[48];
	snprintf(want, sizeof want, "ordinal %d", n);
	ck_assert_msg(strstr(tst_last_error(), want), "%s", tst_last_error());
	ck_assert_int_eq(ovstage_ext_get_gpu_device_info(-1, &info), OVSTAGE_ERROR_INVALID_ARGUMENT);

	cuda_devices_begin("0"); /* the runtime starts here: its workers are placed near device 0 */
	fixture f;
	fx_open(&f, 4096);
	ck_assert_int_eq(ovstage_ext_get_gpu_device_info(0, &info), OVSTAGE_OK);
	char bus[32];
	CU(cudaDeviceGetPCIBusId(bus, sizeof bus, 0));
	ck_assert_msg(strcmp(info.pci_bus_id, bus) == 0, "bus ID \"%s\", CUDA says \"%s\"", info.pci_bus_id, bus);
	ck_assert_msg(info.near_workers >= 0 && info.near_workers <= info.worker_count, "%d near of %d workers",
		      info.near_workers, info.worker_count);
	int all = sysfs_all_cpus_local(bus);
	fprintf(stderr, "device 0 (%s): %d of %d workers near it (sysfs: every CPU local = %d)\n", bus,
		info.near_workers, info.worker_count, all);
	if (all == 1)
		ck_assert_msg(info.near_workers == info.worker_count, "%d of %d workers near %s, where every CPU is local",
			      info.near_workers, info.worker_count, bus);
	uint64_t before = info.completions, others[8] = { 0 };
	for (int d = 1; d < n && d < 8; d++) {
		ovstage_ext_gpu_device_info_t o;
		ck_assert_int_eq(ovstage_ext_get_gpu_device_info(d, &o), OVSTAGE_OK);
		others[d] = o.completions;
	}
	ovx_token_t a = tst_tok(f.pd, "served");
	float *d = dev_alloc(f.n * sizeof *d);
	CU(cudaMemset(d, 0, f.n * sizeof *d));
	tst_tensor tt;
	for (int o = 1; o <= 3; o++) {
		tst_wait_ok(f.st, write1(&f, a, (ovstage_ordinal_t)o, wdata_dev(&tt, d, f.n, kDLCUDA)));
		seal(&f, (ovstage_ordinal_t)o);
	}
	ck_assert_int_eq(ovstage_ext_get_gpu_device_info(0, &info), OVSTAGE_OK);
	ck_assert_msg(info.completions >= before + 3, "device 0's poller resolved %llu completions, had %llu before 3 writes",
		      (unsigned long long)info.completions, (unsigned long long)before);
	for (int dv = 1; dv < n && dv < 8; dv++) {
		ovstage_ext_gpu_device_info_t o;
		ck_assert_int_eq(ovstage_ext_get_gpu_device_info(dv, &o), OVSTAGE_OK);
		ck_assert_msg(o.completions == others[dv], "device %d's poller resolved device 0's work", dv);
	}
	CU(cudaFree(d));
	fx_close(&f);
	cuda_devices_end();
}
END_TEST

START_TEST(test_map_of_written_device_column_and_clone_refused)
{
	fixture f;
	fx_open(&f, 64);
	ovx_token_t a = tst_tok(f.pd, "devmap");
	float *d = dev_alloc(64 * sizeof(float));
	ck_assert_int_eq(tst_gpu_spin_fill(NULL, d, 64, 2.f, 0), 0);
	CU(cudaDeviceSynchronize());
	tst_tensor tt;
	tst_wait_ok(f.st, write1(&f, a, 1, wdata_dev(&tt, d, 64, kDLCUDA)));
	seal(&f, 1);
	/* the column lives on the device (its first write's): a map of it too, in an instance with
	 * no CUDA device of its own; filled on the per-thread default stream, unmapped with handle 2 */
	map_fill_unmap(&f, f.q, f.n, a, 2, 40.f, cudaStreamPerThread, 2);
	ovx_string_t src = { "/w/p1", 5 }, dstp = { "/w/copy", 7 };
	ovstage_enqueue_result_t e = ovstage_clone(f.st, src, &dstp, 1, 3);
	char msg[600];
	ck_assert_int_eq(e.status, OVSTAGE_OK);
	ck_assert_uint_eq(tst_wait_op(f.st, e, msg, sizeof msg), 1);
	ck_assert_msg(strstr(msg, "lives on CUDA device 0"), "%s", msg);
	seal(&f, 3); /* the refused clone's ordinal (a latest read is refused while it has admitted writes) */
	float vals[64], want[64];
	DLDeviceType dev[1];
	read_latest(&f, &a, 1, vals, dev);
	ck_assert_int_eq(dev[0], kDLCUDA);
	for (int i = 0; i < 64; i++)
		want[i] = 40.f + (float)i;
	expect(vals, want, 64, "after the map and the refused clone");
	CU(cudaFree(d));
	fx_close(&f);
}
END_TEST

/* ---- read-current maps (OVSTAGE_EXT_MAP_READ_CURRENT) ------------------------------------------ */

/* A read-current map of device column a over q (n prims) at o: its device group, and the buffer's
 * values copied to host[] on stream s after the group's event. */
static ovstage_map_handle_t rmw_open_dev(fixture *f, ovstage_query_handle_t q, uint32_t n, ovx_token_t a,
					 ovstage_ordinal_t o, cudaStream_t s, ovstage_map_group_t *g, float *host)
{
	ovstage_map_desc_t md;
	memset(&md, 0, sizeof md);
	md.attribute = tst_attr(a);
	md.prim_mode = OVSTAGE_PRIM_MODE_UPSERT;
	ovstage_map_handle_t mh = OVSTAGE_INVALID_MAP_HANDLE;
	tst_wait_ok(f->st, ovstage_ext_map_attribute(f->st, q, &md, o, NULL, 0, OVSTAGE_EXT_MAP_READ_CURRENT, &mh));
	ck_assert_int_eq(ovstage_fetch_map_next(f->st, mh, OVSTAGE_TIMEOUT_INFINITE, g), OVSTAGE_OK);
	const DLTensor *t = &g->data.tensors[0];
	ck_assert_int_eq(t->device.device_type, kDLCUDA);
	ck_assert_int_eq(t->shape[0], n);
	ck_assert_msg(g->data.cuda_sync.wait_event != 0, "a device map group carries its fill's event");
	/* a non-blocking stream: only the event orders it after the fill on the engine stream */
	CU(cudaStreamWaitEvent(s, (cudaEvent_t)g->data.cuda_sync.wait_event, 0));
	CU(cudaMemcpyAsync(host, t->data, n * sizeof *host, cudaMemcpyDeviceToHost, s));
	CU(cudaStreamSynchronize(s));
	return mh;
}

/* The buffer of a read-current map of a device column holds the sealed values (a column of several
 * chunks, partly rewritten by a sparse session so that its version spans several buffers), zeros
 * for a prim new to the column, in query order for a sparse reversed query; a kernel modifying it
 * in place on the producer's stream, unmapped with that stream, commits the modified values. */
START_TEST(test_read_current_map_of_device_column)
{
	fixture f;
	fx_open(&f, 200000); /* 800 KB of float32: four 256 KiB chunks */
	ovx_token_t a = tst_tok(f.pd, "rmwdev");
	cudaStream_t s;
	CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	float *d = dev_alloc(f.n * sizeof *d);
	ck_assert_int_eq(tst_gpu_spin_fill(s, d, f.n, 3.f, 0), 0);
	CU(cudaStreamSynchronize(s));
	tst_tensor tt;
	tst_wait_ok(f.st, write1(&f, a, 1, wdata_dev(&tt, d, f.n, kDLCUDA)));
	seal(&f, 1);
	float *want = malloc(f.n * sizeof *want), *host = malloc(f.n * sizeof *host);
	for (uint32_t i = 0; i < f.n; i++)
		want[i] = 3.f + (float)i;
	/* every fifth prim rewritten by a plain (sparse) map: the version's chunks now differ in memory */
	uint32_t k = (f.n + 4) / 5;
	char **paths = malloc((k + 1) * sizeof *paths);
	for (uint32_t i = 0; i < k; i++) {
		paths[i] = malloc(24);
		snprintf(paths[i], 24, "/w/p%u", 5 * i);
	}
	ovstage_query_handle_t q5 = tst_query_of(f.st, f.pd, (const char *const *)paths, k, NULL);
	map_fill_unmap(&f, q5, k, a, 2, 1e6f, s, (uintptr_t)s);
	seal(&f, 2);
	for (uint32_t i = 0; i < k; i++)
		want[5 * i] = 1e6f + (float)i;
	/* the whole column */
	ovstage_map_group_t g;
	ovstage_map_handle_t mh = rmw_open_dev(&f, f.q, f.n, a, 3, s, &g, host);
	expect(host, want, f.n, "read-current map of the whole device column");
	ck_assert_int_eq(tst_gpu_add(s, g.data.tensors[0].data, f.n, 0.5f), 0);
	ovstage_cuda_sync_t on_s = { (uintptr_t)s, 0 };
	tst_wait_ok(f.st, ovstage_unmap_attribute(f.st, mh, on_s));
	seal(&f, 3);
	for (uint32_t i = 0; i < f.n; i++)
		want[i] += 0.5f;
	float *vals = malloc(f.n * sizeof *vals);
	DLDeviceType dev[1];
	read_latest(&f, &a, 1, vals, dev);
	ck_assert_int_eq(dev[0], kDLCUDA);
	expect(vals, want, f.n, "after the in-place kernel and the unmap");
	/* a sparse reversed query with a prim the column has never seen: its values, then zero */
	uint32_t m = 99;
	for (uint32_t i = 0; i < m; i++)
		snprintf(paths[i], 24, "/w/p%u", f.n - 1 - 2 * i);
	snprintf(paths[m], 24, "/w/new");
	ovstage_query_handle_t qr = tst_query_of(f.st, f.pd, (const char *const *)paths, m + 1, NULL);
	mh = rmw_open_dev(&f, qr, m + 1, a, 4, s, &g, host);
	for (uint32_t i = 0; i < m; i++)
		ck_assert_msg(host[i] == want[f.n - 1 - 2 * i], "sparse element %u = %g, want %g", i, (double)host[i],
			      (double)want[f.n - 1 - 2 * i]);
	ck_assert_msg(host[m] == 0.f, "a new prim's value = %g, want 0", (double)host[m]);
	ck_assert_int_eq(tst_gpu_add(s, g.data.tensors[0].data, m + 1, 1.f), 0);
	tst_wait_ok(f.st, ovstage_unmap_attribute(f.st, mh, on_s));
	seal(&f, 4);
	read_latest(&f, &a, 1, vals, dev);
	for (uint32_t i = 0; i < m; i++)
		want[f.n - 1 - 2 * i] += 1.f;
	expect(vals, want, f.n, "after the sparse in-place session");
	for (uint32_t i = 0; i < k; i++)
		free(paths[i]);
	free(paths);
	tst_wait_ok(f.st, ovstage_release_query(f.st, qr));
	tst_wait_ok(f.st, ovstage_release_query(f.st, q5));
	free(vals);
	free(want);
	free(host);
	CU(cudaFree(d));
	CU(cudaStreamDestroy(s));
	fx_close(&f);
}
END_TEST

/* ---- array (ragged) columns on the device -------------------------------------------------------- */

enum { ARR_MAXLEN = 8 }; /* the longest row the array cases write */

/* A read of an array column per query element (or what a case expects of one): whether it has a row,
 * its length and values (read on the host after the group's event), its tensor's data pointer; the
 * elements a range read reports deleted; the device of the value groups. */
typedef struct arr_read {
	uint32_t n;          /* query elements */
	bool *present;       /* element e has a row */
	bool *deleted;       /* element e is in an is_delete group */
	int64_t *len;        /* its row's elements */
	float *v;            /* its values: v[e * ARR_MAXLEN + j] */
	const void **ptr;    /* its row tensor's data */
	DLDeviceType dev;    /* device of the value groups (0: none seen) */
	bool mixed;          /* value groups on different devices */
} arr_read;

static arr_read *ar_alloc(uint32_t n)
{
	arr_read *a = calloc(1, sizeof *a);
	ck_assert_ptr_nonnull(a);
	a->n = n;
	a->present = calloc(n, sizeof *a->present);
	a->deleted = calloc(n, sizeof *a->deleted);
	a->len = calloc(n, sizeof *a->len);
	a->v = calloc((size_t)n * ARR_MAXLEN, sizeof *a->v);
	a->ptr = calloc(n, sizeof *a->ptr);
	ck_assert(a->present && a->deleted && a->len && a->v && a->ptr);
	return a;
}

static void ar_reset(arr_read *a)
{
	memset(a->present, 0, a->n * sizeof *a->present);
	memset(a->deleted, 0, a->n * sizeof *a->deleted);
	memset(a->len, 0, a->n * sizeof *a->len);
	memset(a->v, 0, (size_t)a->n * ARR_MAXLEN * sizeof *a->v);
	memset(a->ptr, 0, a->n * sizeof *a->ptr);
	a->dev = 0;
	a->mixed = false;
}

static void ar_copy(arr_read *dst, const arr_read *src)
{
	ck_assert_uint_eq(dst->n, src->n);
	memcpy(dst->present, src->present, src->n * sizeof *src->present);
	memcpy(dst->deleted, src->deleted, src->n * sizeof *src->deleted);
	memcpy(dst->len, src->len, src->n * sizeof *src->len);
	memcpy(dst->v, src->v, (size_t)src->n * ARR_MAXLEN * sizeof *src->v);
	memcpy(dst->ptr, src->ptr, src->n * sizeof *src->ptr);
	dst->dev = src->dev;
	dst->mixed = src->mixed;
}

static void ar_free(arr_read *a)
{
	free(a->present);
	free(a->deleted);
	free(a->len);
	free(a->v);
	free(a->ptr);
	free(a);
}

/* Query element of position i of a group. */
static uint32_t group_elem(const ovstage_read_group_t *g, uint32_t i)
{
	return g->prims.index_map ? g->prims.index_map[i] : g->prims.offset + i;
}

/* Adds group g to a: a device group's rows are copied on the non-blocking stream s after it waited
 * on the group's event (a host group must carry none). */
static void ar_collect(arr_read *a, const ovstage_read_group_t *g, cudaStream_t s)
{
	if (g->is_delete) {
		ck_assert_uint_eq(g->data.tensor_count, 0);
		for (uint32_t i = 0; i < g->prims.count; i++) {
			uint32_t e = group_elem(g, i);
			ck_assert_uint_lt(e, a->n);
			a->deleted[e] = true;
		}
		return;
	}
	ck_assert(g->is_array);
	ck_assert_uint_eq(g->data.tensor_count, g->prims.count); /* per-row transport */
	ck_assert_ptr_null(g->data.index_map);
	DLDeviceType dt = g->prims.count ? g->data.tensors[0].device.device_type : kDLCPU;
	if (dt == kDLCUDA) {
		ck_assert_msg(g->data.cuda_sync.wait_event != 0, "a device array group carries its version's event");
		CU(cudaStreamWaitEvent(s, (cudaEvent_t)g->data.cuda_sync.wait_event, 0));
	} else {
		ck_assert_int_eq(g->data.cuda_sync.wait_event, 0);
	}
	for (uint32_t i = 0; i < g->prims.count; i++) {
		const DLTensor *t = &g->data.tensors[i];
		uint32_t e = group_elem(g, i);
		ck_assert_uint_lt(e, a->n);
		ck_assert_int_eq(t->device.device_type, dt); /* one group, one device */
		ck_assert_int_eq(t->device.device_id, 0);
		ck_assert_int_eq(t->ndim, 1);
		ck_assert(t->dtype.code == kDLFloat && t->dtype.bits == 32 && t->dtype.lanes == 1);
		ck_assert_uint_eq(t->byte_offset, 0);
		int64_t len = t->shape[0];
		ck_assert_msg(len >= 0 && len <= ARR_MAXLEN, "element %u: row of %lld elements", e, (long long)len);
		a->present[e] = true;
		a->len[e] = len;
		a->ptr[e] = t->data;
		if (!len)
			continue;
		ck_assert_ptr_nonnull(t->data);
		if (dt == kDLCUDA)
			CU(cudaMemcpyAsync(&a->v[(size_t)e * ARR_MAXLEN], t->data, (size_t)len * sizeof(float),
					   cudaMemcpyDeviceToHost, s));
		else
			memcpy(&a->v[(size_t)e * ARR_MAXLEN], t->data, (size_t)len * sizeof(float));
	}
	if (dt == kDLCUDA)
		CU(cudaStreamSynchronize(s));
	if (!g->prims.count)
		return;
	if (!a->dev)
		a->dev = dt;
	else if (a->dev != dt)
		a->mixed = true;
}

/* A read of attributes attrs (na of them) through q over range r into out[k] (reset first), one
 * arr_read per attribute. */
static void ar_read(fixture *f, ovstage_query_handle_t q, const ovx_token_t *attrs, size_t na,
		    ovstage_ordinal_range_t r, arr_read *const *out, cudaStream_t s)
{
	for (size_t k = 0; k < na; k++)
		ar_reset(out[k]);
	ovstage_read_handle_t rh;
	tst_wait_ok(f->st, ovstage_read_attributes(f->st, q, attrs, na, r, &rh));
	ovstage_read_group_t g;
	ovstage_api_status_t st;
	while ((st = ovstage_fetch_read_next(f->st, rh, OVSTAGE_TIMEOUT_INFINITE, &g)) == OVSTAGE_OK) {
		size_t k = 0;
		while (k < na && attrs[k] != g.attribute)
			k++;
		ck_assert_uint_lt(k, na);
		ar_collect(out[k], &g, s);
		ck_assert_int_eq(ovstage_release_group(f->st, &g), OVSTAGE_OK);
	}
	ck_assert_int_eq(st, OVSTAGE_ERROR_END_OF_ITERATION);
	tst_wait_ok(f->st, ovstage_release_read(f->st, rh));
}

/* Every element of got as want says: present or not, and a present one's length and values. */
static void ar_expect(const arr_read *got, const arr_read *want, const char *what)
{
	ck_assert_uint_eq(got->n, want->n);
	for (uint32_t e = 0; e < want->n; e++) {
		ck_assert_msg(got->present[e] == want->present[e], "%s: element %u present = %d, expected %d", what, e,
			      (int)got->present[e], (int)want->present[e]);
		if (!want->present[e])
			continue;
		ck_assert_msg(got->len[e] == want->len[e], "%s: element %u has %lld elements, expected %lld", what, e,
			      (long long)got->len[e], (long long)want->len[e]);
		for (int64_t j = 0; j < want->len[e]; j++)
			ck_assert_msg(got->v[(size_t)e * ARR_MAXLEN + j] == want->v[(size_t)e * ARR_MAXLEN + j],
				      "%s: element %u [%lld] = %g, expected %g", what, e, (long long)j,
				      (double)got->v[(size_t)e * ARR_MAXLEN + j], (double)want->v[(size_t)e * ARR_MAXLEN + j]);
	}
}

/* Per-row tensors (float32) over rows stored back to back at base (row i: len[i] elements), on the
 * host or device 0; an empty row points at base (memory its device owns). */
static void rows_over(DLTensor *t, int64_t *shape, float *base, const int64_t *len, uint32_t n, DLDeviceType type)
{
	size_t off = 0;
	for (uint32_t i = 0; i < n; i++) {
		memset(&t[i], 0, sizeof t[i]);
		t[i].data = len[i] ? base + off : base;
		t[i].device = (DLDevice){ type, 0 };
		t[i].ndim = 1;
		t[i].dtype = (DLDataType){ kDLFloat, 32, 1 };
		shape[i] = len[i];
		t[i].shape = &shape[i];
		off += (size_t)len[i];
	}
}

/* Write data of per-row array tensors rows[0..n). */
static ovstage_write_data_t rows_wdata(const DLTensor *rows, uint32_t n)
{
	ovstage_write_data_t w;
	memset(&w, 0, sizeof w);
	w.tensors = rows;
	w.tensor_count = n;
	w.is_array = true;
	return w;
}

/* Write data of one packed float32 array tensor of `elems` elements at p on CUDA device 0. */
static ovstage_write_data_t packed_dev(tst_tensor *tt, float *p, int64_t elems)
{
	ovstage_write_data_t w = wdata_dev(tt, p, elems, kDLCUDA);
	w.is_array = true;
	return w;
}

/* The model of rows of len[] elements stored back to back in a ramp (element k of the source is
 * base + k): element e gets row e, for every e (sel NULL) or those with sel[e]. */
static void model_ramp_rows(arr_read *want, const int64_t *len, uint32_t n, float base, const bool *sel)
{
	size_t off = 0;
	for (uint32_t e = 0; e < n; e++) {
		if (!sel || sel[e]) {
			want->present[e] = true;
			want->len[e] = len[e];
			for (int64_t j = 0; j < len[e]; j++)
				want->v[(size_t)e * ARR_MAXLEN + j] = base + (float)(off + (size_t)j);
		}
		off += (size_t)len[e];
	}
}

static const ovstage_ordinal_range_t k_latest = { 0, UINT64_MAX, false };

/* An array column created by per-row CUDA tensors lives on the device: its rows come back as device
 * tensors (one per prim, wait_event set) viewing the sealed rows without a copy (a second read, and
 * a later version, hand out the same addresses for rows it did not change); a group pinned across a
 * later seal keeps its version's rows; a masked packed CUDA write (gathered by a kernel), a host
 * write through an index map (staged, uploaded once) and a delete update it; a range read returns
 * the rows changed in it on the device, and the delete. */
START_TEST(test_array_column_on_device)
{
	fixture f;
	fx_open(&f, 2000);
	uint32_t n = f.n;
	ovx_token_t a = tst_tok(f.pd, "ragged");
	cudaStream_t s, rs;
	CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CU(cudaStreamCreateWithFlags(&rs, cudaStreamNonBlocking));
	arr_read *want = ar_alloc(n), *want1 = ar_alloc(n), *got = ar_alloc(n), *old = ar_alloc(n);
	/* ordinal 1: rows of 0..6 elements over one buffer that a spinning kernel fills on s; the write is
	 * fenced on s (submitted while the kernel runs) */
	int64_t *len = malloc(n * sizeof *len), *shape = malloc(n * sizeof *shape);
	size_t total = 0;
	for (uint32_t i = 0; i < n; i++) {
		len[i] = i % 7;
		total += (size_t)len[i];
	}
	float *d = dev_alloc(total * sizeof(float));
	ck_assert_int_eq(tst_gpu_spin_fill(s, d, (unsigned)total, 1000.f, SPIN), 0);
	DLTensor *rows = malloc(n * sizeof *rows);
	rows_over(rows, shape, d, len, n, kDLCUDA);
	ovstage_write_data_t w = rows_wdata(rows, n);
	w.cuda_sync.stream = (uintptr_t)s;
	tst_wait_ok(f.st, write1(&f, a, 1, w));
	seal(&f, 1);
	model_ramp_rows(want, len, n, 1000.f, NULL);
	ar_read(&f, f.q, &a, 1, k_latest, &got, rs);
	ck_assert_int_eq(got->dev, kDLCUDA);
	ck_assert(!got->mixed);
	ar_expect(got, want, "per-row CUDA rows");
	ar_read(&f, f.q, &a, 1, k_latest, &old, rs);
	for (uint32_t i = 0; i < n; i++)
		if (len[i])
			ck_assert_msg(old->ptr[i] == got->ptr[i], "element %u: two reads of one version differ", i);
	ar_copy(want1, want);
	/* a group of ordinal 1, held across the next seal */
	ovstage_read_handle_t rh1;
	tst_wait_ok(f.st, ovstage_read_attributes(f.st, f.q, &a, 1, k_latest, &rh1));
	ovstage_read_group_t held;
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh1, OVSTAGE_TIMEOUT_INFINITE, &held), OVSTAGE_OK);
	/* ordinal 2: a packed CUDA tensor of rows of 3, every fifth prim through a mask */
	float *p = dev_alloc((size_t)n * 3 * sizeof(float));
	ck_assert_int_eq(tst_gpu_spin_fill(s, p, n * 3, 500000.f, SPIN), 0);
	uint64_t *mask = calloc((n + 63) / 64, sizeof *mask);
	for (uint32_t i = 0; i < n; i += 5) {
		mask[i / 64] |= 1ull << (i % 64);
		want->len[i] = 3;
		for (int j = 0; j < 3; j++)
			want->v[(size_t)i * ARR_MAXLEN + j] = 500000.f + (float)(3 * i + j);
	}
	tst_tensor pt;
	w = packed_dev(&pt, p, (int64_t)n * 3);
	w.mask = mask;
	w.count = n;
	w.cuda_sync.stream = (uintptr_t)s;
	tst_wait_ok(f.st, write1(&f, a, 2, w));
	seal(&f, 2);
	ar_reset(old);
	ar_collect(old, &held, rs);
	ar_expect(old, want1, "a group of ordinal 1 held across the seal of 2");
	ck_assert_int_eq(ovstage_release_group(f.st, &held), OVSTAGE_OK);
	tst_wait_ok(f.st, ovstage_release_read(f.st, rh1));
	ar_read(&f, f.q, &a, 1, k_latest, &got, rs);
	ck_assert_int_eq(got->dev, kDLCUDA);
	ar_expect(got, want, "masked packed CUDA rows");
	for (uint32_t i = 0; i < n; i++)
		if (i % 5 && len[i]) /* rows the seal did not touch are shared with ordinal 1 */
			ck_assert_msg(got->ptr[i] == old->ptr[i], "element %u: an unchanged row moved", i);
	/* ordinal 3: host rows of 0, 1, 2 and 5 elements through an index map over the first m prims */
	float hb[8];
	for (int k = 0; k < 8; k++)
		hb[k] = 7000.f + (float)k;
	int64_t hl[4] = { 0, 1, 2, 5 }, hoff[4] = { 0, 0, 1, 3 }, hshape[4];
	DLTensor hrows[4];
	rows_over(hrows, hshape, hb, hl, 4, kDLCPU);
	uint32_t m = n < 100 ? n : 100, *map = malloc(m * sizeof *map);
	for (uint32_t i = 0; i < m; i++) {
		map[i] = (i * 7) % 4;
		want->len[i] = hl[map[i]];
		for (int64_t j = 0; j < hl[map[i]]; j++)
			want->v[(size_t)i * ARR_MAXLEN + j] = 7000.f + (float)(hoff[map[i]] + j);
	}
	w = rows_wdata(hrows, 4);
	w.index_map = map;
	w.count = m;
	tst_wait_ok(f.st, write1(&f, a, 3, w));
	/* ordinal 4: prim 1 deleted */
	const char *p1 = "/w/p1";
	ovstage_query_handle_t q1 = tst_query_of(f.st, f.pd, &p1, 1, NULL);
	tst_wait_ok(f.st, ovstage_delete_attributes(f.st, q1, (ovx_string_or_token_t[]){ tst_attr(a) }, 1, 4));
	want->present[1] = false;
	seal(&f, 4);
	ar_read(&f, f.q, &a, 1, k_latest, &got, rs);
	ck_assert_int_eq(got->dev, kDLCUDA);
	ar_expect(got, want, "after the host rows and the delete");
	/* a range read [2, 4]: the rows changed in it (every fifth prim, the first m) as of 4, and the
	 * delete */
	arr_read *rg = ar_alloc(n);
	ar_copy(rg, want);
	for (uint32_t i = 0; i < n; i++)
		rg->present[i] = want->present[i] && (i % 5 == 0 || i < m);
	ovstage_ordinal_range_t span = { 2, 4, true };
	ar_read(&f, f.q, &a, 1, span, &got, rs);
	ck_assert_int_eq(got->dev, kDLCUDA);
	ar_expect(got, rg, "range read [2, 4]");
	for (uint32_t i = 0; i < n; i++)
		ck_assert_msg(got->deleted[i] == (i == 1), "range read [2, 4]: element %u deleted = %d", i,
			      (int)got->deleted[i]);
	tst_wait_ok(f.st, ovstage_release_query(f.st, q1));
	CU(cudaFree(d));
	CU(cudaFree(p));
	CU(cudaStreamDestroy(s));
	CU(cudaStreamDestroy(rs));
	free(len);
	free(shape);
	free(rows);
	free(mask);
	free(map);
	ar_free(want);
	ar_free(want1);
	ar_free(got);
	ar_free(old);
	ar_free(rg);
	fx_close(&f);
}
END_TEST

/* CUDA rows written into an array column on the CPU: per-row tensors under a mask (packed on the
 * device, downloaded once) and a packed tensor through an index map (downloaded whole); one read of
 * that column and of a device array column returns a host group (no event) and a device group. */
START_TEST(test_cuda_arrays_into_cpu_column_and_mixed_read)
{
	fixture f;
	fx_open(&f, 1500);
	uint32_t n = f.n;
	ovx_token_t ab[2] = { tst_tok(f.pd, "harr"), tst_tok(f.pd, "darr") };
	cudaStream_t s, rs;
	CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CU(cudaStreamCreateWithFlags(&rs, cudaStreamNonBlocking));
	arr_read *wh = ar_alloc(n), *wd = ar_alloc(n), *gh = ar_alloc(n), *gd = ar_alloc(n);
	/* ordinal 1: "harr" from host rows (a CPU column); "darr" from a packed CUDA tensor of rows of 2
	 * (a device column) */
	int64_t *len = malloc(n * sizeof *len), *shape = malloc(n * sizeof *shape);
	size_t total = 0;
	for (uint32_t i = 0; i < n; i++) {
		len[i] = i % 4;
		total += (size_t)len[i];
	}
	float *h = malloc((total ? total : 1) * sizeof *h);
	for (size_t k = 0; k < total; k++)
		h[k] = 10.f + (float)k;
	DLTensor *rows = malloc(n * sizeof *rows);
	rows_over(rows, shape, h, len, n, kDLCPU);
	tst_wait_ok(f.st, write1(&f, ab[0], 1, rows_wdata(rows, n)));
	model_ramp_rows(wh, len, n, 10.f, NULL);
	float *p = dev_alloc((size_t)n * 2 * sizeof(float));
	ck_assert_int_eq(tst_gpu_spin_fill(s, p, n * 2, 20000.f, SPIN), 0);
	tst_tensor pt;
	ovstage_write_data_t w = packed_dev(&pt, p, (int64_t)n * 2);
	w.cuda_sync.stream = (uintptr_t)s;
	tst_wait_ok(f.st, write1(&f, ab[1], 1, w));
	int64_t *two = malloc(n * sizeof *two);
	for (uint32_t i = 0; i < n; i++)
		two[i] = 2;
	model_ramp_rows(wd, two, n, 20000.f, NULL);
	seal(&f, 1);
	/* ordinal 2: per-row CUDA tensors of 1..5 elements into the CPU column, every third prim */
	int64_t *len2 = malloc(n * sizeof *len2);
	size_t total2 = 0;
	bool *sel = calloc(n, sizeof *sel);
	uint64_t *mask = calloc((n + 63) / 64, sizeof *mask);
	for (uint32_t i = 0; i < n; i++) {
		len2[i] = i % 5 + 1;
		total2 += (size_t)len2[i];
		sel[i] = i % 3 == 0;
		if (sel[i])
			mask[i / 64] |= 1ull << (i % 64);
	}
	float *d2 = dev_alloc(total2 * sizeof(float));
	ck_assert_int_eq(tst_gpu_spin_fill(s, d2, (unsigned)total2, 300000.f, SPIN), 0);
	DLTensor *rows2 = malloc(n * sizeof *rows2);
	int64_t *shape2 = malloc(n * sizeof *shape2);
	rows_over(rows2, shape2, d2, len2, n, kDLCUDA);
	w = rows_wdata(rows2, n);
	w.mask = mask;
	w.count = n;
	w.cuda_sync.stream = (uintptr_t)s;
	tst_wait_ok(f.st, write1(&f, ab[0], 2, w));
	model_ramp_rows(wh, len2, n, 300000.f, sel);
	/* ordinal 3: a packed CUDA tensor (5 rows of 4) into the CPU column through an index map over the
	 * first m prims; its producer ran on the legacy default stream (handle 1) */
	float *p3 = dev_alloc(20 * sizeof(float));
	ck_assert_int_eq(tst_gpu_spin_fill(NULL, p3, 20, 9000.f, SPIN), 0);
	uint32_t m = 50, map[50];
	for (uint32_t i = 0; i < m; i++) {
		map[i] = i % 5;
		wh->present[i] = true;
		wh->len[i] = 4;
		for (int j = 0; j < 4; j++)
			wh->v[(size_t)i * ARR_MAXLEN + j] = 9000.f + (float)(4 * map[i] + (uint32_t)j);
	}
	tst_tensor p3t;
	w = packed_dev(&p3t, p3, 20);
	w.index_map = map;
	w.count = m;
	w.cuda_sync.stream = 1;
	tst_wait_ok(f.st, write1(&f, ab[0], 3, w));
	seal(&f, 3);
	arr_read *outs[2] = { gh, gd };
	ar_read(&f, f.q, ab, 2, k_latest, outs, rs);
	ck_assert_int_eq(gh->dev, kDLCPU);
	ck_assert_int_eq(gd->dev, kDLCUDA);
	ck_assert(!gh->mixed && !gd->mixed);
	ar_expect(gh, wh, "CUDA rows in the CPU column");
	ar_expect(gd, wd, "the device column beside it");
	CU(cudaFree(p));
	CU(cudaFree(d2));
	CU(cudaFree(p3));
	CU(cudaStreamDestroy(s));
	CU(cudaStreamDestroy(rs));
	free(len);
	free(shape);
	free(h);
	free(rows);
	free(two);
	free(len2);
	free(sel);
	free(mask);
	free(rows2);
	free(shape2);
	ar_free(wh);
	ar_free(wd);
	ar_free(gh);
	ar_free(gd);
	fx_close(&f);
}
END_TEST

/* A strided per-row CUDA tensor cannot be gathered by the device's copy: the write fails with
 * NOT_SUPPORTED naming it (found as the op runs) and the column keeps its rows. */
START_TEST(test_strided_cuda_array_row_refused)
{
	fixture f;
	fx_open(&f, 16);
	uint32_t n = f.n;
	ovx_token_t a = tst_tok(f.pd, "sarr");
	cudaStream_t rs;
	CU(cudaStreamCreateWithFlags(&rs, cudaStreamNonBlocking));
	float *d = dev_alloc(64 * sizeof(float));
	ck_assert_int_eq(tst_gpu_spin_fill(NULL, d, 64, 1.f, 0), 0);
	CU(cudaDeviceSynchronize());
	tst_tensor pt;
	tst_wait_ok(f.st, write1(&f, a, 1, packed_dev(&pt, d, 2 * (int64_t)n))); /* rows of 2: element i = {1 + 2i, 2 + 2i} */
	seal(&f, 1);
	int64_t len[16], shape[16], stride2[1] = { 2 };
	for (uint32_t i = 0; i < n; i++)
		len[i] = 2;
	DLTensor rows[16];
	rows_over(rows, shape, d, len, n, kDLCUDA);
	rows[3].strides = stride2; /* every other element: not adjacent */
	char msg[600];
	ovstage_write_data_t w = rows_wdata(rows, n);
	ck_assert_uint_eq(tst_wait_op(f.st, write1(&f, a, 2, w), msg, sizeof msg), 1);
	ck_assert_msg(strstr(msg, "array row 3 is a strided CUDA tensor"), "%s", msg);
	seal(&f, 2);
	arr_read *want = ar_alloc(n), *got = ar_alloc(n);
	model_ramp_rows(want, len, n, 1.f, NULL); /* the rows of 2 of ordinal 1 */
	ar_read(&f, f.q, &a, 1, k_latest, &got, rs);
	ck_assert_int_eq(got->dev, kDLCUDA);
	ar_expect(got, want, "after the refused strided write");
	ar_free(want);
	ar_free(got);
	CU(cudaFree(d));
	CU(cudaStreamDestroy(rs));
	fx_close(&f);
}
END_TEST

/* ---- stress ---------------------------------------------------------------------------------- */

enum { STRESS_THREADS = 6, STRESS_STEPS = 40, STRESS_N = 20000 };

typedef struct stress_arg {
	fixture *f;
	int id;
	int failures;
} stress_arg;

static void *stress_thread(void *p)
{
	stress_arg *sa = p;
	fixture *f = sa->f;
	char name[32];
	snprintf(name, sizeof name, "stress%d", sa->id);
	ovx_token_t a = tst_tok(f->pd, name);
	float *d, *vals = malloc(f->n * sizeof *vals);
	cudaStream_t s;
	CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	d = dev_alloc(f->n * sizeof *d);
	for (int step = 1; step <= STRESS_STEPS; step++) {
		float base = (float)(sa->id * 100000 + step * 1000);
		ck_assert_int_eq(tst_gpu_spin_fill(s, d, f->n, base, step % 4 == 0 ? SPIN / 10 : 0), 0);
		tst_tensor tt;
		ovstage_write_data_t w = wdata_dev(&tt, d, f->n, kDLCUDA);
		w.cuda_sync.stream = (uintptr_t)s;
		tst_wait_ok(f->st, write1(f, a, (ovstage_ordinal_t)step, w));
		ovstage_write_floor_desc_t fd = { (ovstage_ordinal_t)step, OVSTAGE_SCOPE_INCLUDE, &a, 1 };
		tst_wait_ok(f->st, ovstage_advance_write_floor(f->st, &fd));
		DLDeviceType dev[1];
		read_latest(f, &a, 1, vals, dev);
		for (uint32_t i = 0; i < f->n; i++)
			if (vals[i] != base + (float)i)
				sa->failures++;
	}
	CU(cudaStreamSynchronize(s));
	CU(cudaStreamDestroy(s));
	CU(cudaFree(d));
	free(vals);
	return NULL;
}

START_TEST(test_threads_write_seal_read_device_columns)
{
	fixture f;
	fx_open(&f, STRESS_N);
	pthread_t th[STRESS_THREADS];
	stress_arg sa[STRESS_THREADS];
	for (int i = 0; i < STRESS_THREADS; i++) {
		sa[i] = (stress_arg){ &f, i, 0 };
		ck_assert_int_eq(pthread_create(&th[i], NULL, stress_thread, &sa[i]), 0);
	}
	for (int i = 0; i < STRESS_THREADS; i++) {
		pthread_join(th[i], NULL);
		ck_assert_msg(sa[i].failures == 0, "thread %d saw %d wrong values", i, sa[i].failures);
	}
	fx_close(&f);
}
END_TEST

/* ---- the device buffer pool ------------------------------------------------------------------ */

static ovstage_ext_gpu_pool_stats_t pool_stats(void)
{
	ovstage_ext_gpu_pool_stats_t s;
	ck_assert_int_eq(ovstage_ext_get_gpu_pool_stats(0, &s), OVSTAGE_OK);
	ck_assert_uint_le(s.retained_bytes, s.bound_bytes);
	return s;
}

/* The bound the process runs under: OVSTAGE_GPU_POOL_MB (ctest runs this case at 1 and 0 too), else
 * 256 MiB. */
static uint64_t expected_bound(void)
{
	const char *v = getenv("OVSTAGE_GPU_POOL_MB");
	long long mb = v && *v ? atoll(v) : 256;
	return mb > 0 ? (uint64_t)mb << 20 : 0;
}

/* Steady-state writes of device columns reuse freed blocks when the bound has room for them, the
 * pool never retains more than its bound, a stage's blocks go when it does, and CUDA's pool below
 * keeps nothing past a synchronisation. Bad ordinals and a NULL out are refused. */
START_TEST(test_device_pool_reuses_within_its_bound)
{
	ovstage_ext_gpu_pool_stats_t s0 = pool_stats(), s;
	ck_assert_uint_eq(s0.bound_bytes, expected_bound());
	ck_assert_int_eq(ovstage_ext_get_gpu_pool_stats(-1, &s), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(tst_last_error(), "ordinal -1"), "%s", tst_last_error());
	ck_assert_int_eq(ovstage_ext_get_gpu_pool_stats(99, &s), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(tst_last_error(), "ordinal 99"), "%s", tst_last_error());
	ck_assert_int_eq(ovstage_ext_get_gpu_pool_stats(0, NULL), OVSTAGE_ERROR_INVALID_ARGUMENT);
	fixture f;
	fx_open(&f, 1 << 18); /* 1 MiB float32 columns */
	ovx_token_t a = tst_tok(f.pd, "pool_a"), b = tst_tok(f.pd, "pool_b");
	float *d = dev_alloc(f.n * sizeof *d);
	uint32_t *rows = malloc(f.n / 7 * sizeof *rows);
	for (uint32_t i = 0; i < f.n / 7; i++)
		rows[i] = i * 7;
	for (int step = 1; step <= 16; step++) {
		float base = (float)(step * 1000000);
		ck_assert_int_eq(tst_gpu_spin_fill(cudaStreamPerThread, d, f.n, base, 0), 0);
		tst_tensor ta, tb;
		ovstage_write_data_t wa = wdata_dev(&ta, d, f.n, kDLCUDA), wb = wdata_dev(&tb, d, f.n, kDLCUDA);
		wa.cuda_sync.stream = wb.cuda_sync.stream = 2; /* this thread's per-thread default stream */
		wb.index_map = rows; /* a gather on the device: its index map is uploaded through the pool */
		wb.count = f.n / 7;
		tst_wait_ok(f.st, write1(&f, a, (ovstage_ordinal_t)step, wa));
		tst_wait_ok(f.st, write1(&f, b, (ovstage_ordinal_t)step, wb));
		seal(&f, (ovstage_ordinal_t)step);
		expect_device_ramp(&f, a, base, "pooled column");
		s = pool_stats(); /* retained <= bound at every step */
	}
	s = pool_stats();
	if (s.bound_bytes >= 4 * (uint64_t)f.n * sizeof(float)) /* room for the blocks of leaving versions */
		ck_assert_msg(s.hits > s0.hits, "no pool hit in 16 steady-state steps (hits %llu -> %llu)",
			      (unsigned long long)s0.hits, (unsigned long long)s.hits);
	if (!s.bound_bytes) {
		ck_assert_uint_eq(s.hits, s0.hits);
		ck_assert_uint_eq(s.retained_bytes, 0);
		ck_assert_uint_gt(s.releases, s0.releases); /* every free went back to CUDA */
	}
	ck_assert_uint_gt(s.misses, s0.misses);
	free(rows);
	CU(cudaFree(d));
	fx_close(&f);
	s = pool_stats();
	ck_assert_msg(s.retained_bytes == 0, "%llu bytes retained after the last stage was destroyed",
		      (unsigned long long)s.retained_bytes);
	CU(cudaDeviceSynchronize());
	s = pool_stats();
	ck_assert_msg(s.cuda_used_bytes == 0 && s.cuda_reserved_bytes <= s.bound_bytes,
		      "CUDA's pool holds %llu bytes (%llu in use) after a synchronisation, bound %llu",
		      (unsigned long long)s.cuda_reserved_bytes, (unsigned long long)s.cuda_used_bytes,
		      (unsigned long long)s.bound_bytes);
}
END_TEST

/* A column's full device buffer that left retention goes to the column's next full write of the same
 * size (handoff.h) — but never while a read group still holds it: a group of step 3 is held across
 * nine more full writes and seals and still reads step 3's values, no later version hands out its
 * address, the column's buffers are reused (a few addresses cycle), the pool's retained bytes (the
 * slot's buffer among them) stay within the bound, and nothing is retained once the stage is gone. */
START_TEST(test_full_device_buffer_reused_never_under_a_held_group)
{
	enum { STEPS = 12, HELD = 3 };
	fixture f;
	fx_open(&f, 4096); /* 16 KiB: one chunk, the column's whole buffer */
	ovx_token_t a = tst_tok(f.pd, "handed");
	float *d = dev_alloc(f.n * sizeof *d);
	ovstage_read_group_t held;
	ovstage_read_handle_t held_rh = 0;
	void *addr[STEPS + 1] = { 0 };
	for (int step = 1; step <= STEPS; step++) {
		ck_assert_int_eq(tst_gpu_spin_fill(cudaStreamPerThread, d, f.n, (float)(step * 10000), 0), 0);
		tst_tensor tt;
		ovstage_write_data_t w = wdata_dev(&tt, d, f.n, kDLCUDA);
		w.cuda_sync.stream = 2; /* this thread's per-thread default stream: the fill */
		tst_wait_ok(f.st, write1(&f, a, (ovstage_ordinal_t)step, w));
		seal(&f, (ovstage_ordinal_t)step);
		ovstage_read_handle_t rh;
		ovstage_ordinal_range_t r = { 0, UINT64_MAX, false };
		tst_wait_ok(f.st, ovstage_read_attributes(f.st, f.q, &a, 1, r, &rh));
		ovstage_read_group_t g;
		ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh, OVSTAGE_TIMEOUT_INFINITE, &g), OVSTAGE_OK);
		ck_assert_int_eq(g.data.tensors[0].device.device_type, kDLCUDA);
		addr[step] = g.data.tensors[0].data;
		if (step > HELD)
			ck_assert_msg(addr[step] != addr[HELD], "step %d's version hands out the held group's buffer %p",
				      step, addr[step]);
		if (step == HELD) {
			held = g;
			held_rh = rh;
		} else {
			ck_assert_int_eq(ovstage_release_group(f.st, &g), OVSTAGE_OK);
			tst_wait_ok(f.st, ovstage_release_read(f.st, rh));
		}
		(void)pool_stats(); /* retained <= bound at every step */
	}
	float *h = malloc(f.n * sizeof *h);
	if (held.data.cuda_sync.wait_event)
		CU(cudaStreamWaitEvent(cudaStreamPerThread, (cudaEvent_t)held.data.cuda_sync.wait_event, 0));
	CU(cudaMemcpyAsync(h, held.data.tensors[0].data, f.n * sizeof *h, cudaMemcpyDeviceToHost, cudaStreamPerThread));
	CU(cudaStreamSynchronize(cudaStreamPerThread));
	for (uint32_t i = 0; i < f.n; i++)
		ck_assert_msg(h[i] == (float)(HELD * 10000) + (float)i, "held group row %u = %g, written %g", i, h[i],
			      (double)((float)(HELD * 10000) + (float)i));
	ck_assert_int_eq(ovstage_release_group(f.st, &held), OVSTAGE_OK);
	tst_wait_ok(f.st, ovstage_release_read(f.st, held_rh));
	expect_device_ramp(&f, a, (float)(STEPS * 10000), "the last step");
	size_t distinct = 0; /* addresses of steps HELD + 1 .. STEPS */
	for (int i = HELD + 1; i <= STEPS; i++) {
		bool seen = false;
		for (int j = HELD + 1; j < i; j++)
			seen = seen || addr[j] == addr[i];
		distinct += !seen;
	}
	if (expected_bound() >= 8 * (uint64_t)f.n * sizeof(float)) /* room to keep a few 16 KiB blocks */
		ck_assert_msg(distinct <= 5, "%zu distinct buffers in %d steady-state full writes", distinct,
			      STEPS - HELD);
	free(h);
	CU(cudaFree(d));
	fx_close(&f);
	ovstage_ext_gpu_pool_stats_t s = pool_stats();
	ck_assert_msg(s.retained_bytes == 0, "%llu bytes retained after the stage was destroyed",
		      (unsigned long long)s.retained_bytes);
}
END_TEST

/* A full device write's buffer that newer versions still read (their unchanged chunks) is not handed
 * on when its own version leaves retention: after a full write of 200,000 rows (several 256 KiB
 * chunks, one buffer) and two masked writes into the first chunk, the first version leaves
 * retention; a group of the third version is held across the next full write of the same size and
 * still reads the first write's values in its untouched chunks. */
START_TEST(test_full_device_buffer_kept_while_newer_versions_share_it)
{
	fixture f;
	fx_open(&f, 200000);
	ovx_token_t a = tst_tok(f.pd, "shared");
	float *d = dev_alloc(f.n * sizeof *d), *h = malloc(f.n * sizeof *h), *want = malloc(f.n * sizeof *want);
	uint64_t *mask = calloc((f.n + 63) / 64, sizeof *mask);
	tst_tensor tt;
	for (uint32_t i = 0; i < f.n; i++)
		h[i] = want[i] = 1000.f + (float)i;
	CU(cudaMemcpy(d, h, f.n * sizeof *h, cudaMemcpyHostToDevice));
	tst_wait_ok(f.st, write1(&f, a, 1, wdata_dev(&tt, d, f.n, kDLCUDA)));
	seal(&f, 1);
	for (uint32_t o = 2; o <= 3; o++) { /* row o - 2 of the first chunk = -o */
		for (uint32_t i = 0; i < f.n; i++)
			h[i] = -(float)o;
		CU(cudaMemcpy(d, h, f.n * sizeof *h, cudaMemcpyHostToDevice));
		memset(mask, 0, (f.n + 63) / 64 * sizeof *mask);
		mask[0] = 1ull << (o - 2);
		want[o - 2] = -(float)o;
		ovstage_write_data_t w = wdata_dev(&tt, d, f.n, kDLCUDA);
		w.mask = mask;
		w.count = f.n;
		tst_wait_ok(f.st, write1(&f, a, o, w));
		seal(&f, o); /* at 3 the first version leaves retention (2 retained) */
	}
	enum { MAXG = 64 };
	ovstage_read_group_t held[MAXG];
	uint32_t ng = 0;
	ovstage_read_handle_t rh;
	ovstage_ordinal_range_t r = { 0, UINT64_MAX, false };
	tst_wait_ok(f.st, ovstage_read_attributes(f.st, f.q, &a, 1, r, &rh));
	while (ng < MAXG && ovstage_fetch_read_next(f.st, rh, OVSTAGE_TIMEOUT_INFINITE, &held[ng]) == OVSTAGE_OK)
		ng++;
	ck_assert_uint_gt(ng, 0);
	for (uint32_t i = 0; i < f.n; i++) /* the next full write, the same size: it takes the slot */
		h[i] = 5000.f + (float)i;
	CU(cudaMemcpy(d, h, f.n * sizeof *h, cudaMemcpyHostToDevice));
	tst_wait_ok(f.st, write1(&f, a, 4, wdata_dev(&tt, d, f.n, kDLCUDA)));
	seal(&f, 4);
	tst_wait_ok(f.st, write1(&f, a, 5, wdata_dev(&tt, d, f.n, kDLCUDA)));
	seal(&f, 5);
	uint32_t seen = 0;
	for (uint32_t k = 0; k < ng; k++) {
		const ovstage_read_group_t *g = &held[k];
		float *gh = group_to_host(g);
		for (uint32_t i = 0; i < g->prims.count; i++, seen++) {
			uint32_t e = g->prims.index_map ? g->prims.index_map[i] : g->prims.offset + i;
			uint32_t row = g->data.index_map ? g->data.index_map[i] : i;
			ck_assert_msg(gh[row] == want[e], "held version 3, prim %u = %g, want %g", e, gh[row], want[e]);
		}
		free(gh);
		ck_assert_int_eq(ovstage_release_group(f.st, &held[k]), OVSTAGE_OK);
	}
	ck_assert_uint_eq(seen, f.n);
	tst_wait_ok(f.st, ovstage_release_read(f.st, rh));
	expect_device_ramp(&f, a, 5000.f, "after the full writes");
	free(mask);
	free(want);
	free(h);
	CU(cudaFree(d));
	fx_close(&f);
}
END_TEST

/* ---- batched copies ----------------------------------------------------------------------------
 * One write call of more columns than one batch launch holds (OVS_COPY_BATCH_MAX = 128), with rows
 * of 1, 3, 4, 12 and 16 bytes at source offsets that defeat the wide words (odd for bytes, 4 or 8 mod
 * 16 for floats), and three columns of 320-byte rows, which at 4096 rows (1.25 MiB) are above the
 * 1 MiB batching threshold (cudaMemcpyAsync). Every source is produced by one kernel still spinning
 * on a non-default stream when the write is submitted; every byte of every column is checked. */

#define BATCH_COLS 300

/* Byte i of the producer's pattern (gpu_test_kernels.cu: spin_bytes). */
static unsigned char batch_byte(uint32_t i, unsigned seed)
{
	return (unsigned char)(((i * 2654435761u) >> 13) + seed);
}

/* Column c's dtype: five row widths in turn, and 320 bytes for c = 50, 150, 250. */
static DLDataType batch_dtype(uint32_t c)
{
	static const DLDataType kinds[5] = { { kDLUInt, 8, 1 }, { kDLUInt, 8, 3 }, { kDLFloat, 32, 1 },
					     { kDLFloat, 32, 3 }, { kDLFloat, 64, 2 } };
	if (c % 100 == 50)
		return (DLDataType){ kDLFloat, 32, 80 };
	return kinds[c % 5];
}

static size_t dtype_bytes(DLDataType t)
{
	return (size_t)t.bits / 8 * t.lanes;
}

/* The source offsets in the arena: 16-aligned plus a shift of 0, 1 or 2 scalar widths (odd for bytes,
 * 4 or 8 mod 16 for float32, 8 mod 16 for float64). Returns the arena's size. */
static size_t batch_layout(uint32_t n, size_t *off)
{
	size_t at = 0;
	for (uint32_t c = 0; c < BATCH_COLS; c++) {
		DLDataType t = batch_dtype(c);
		at = (at + 15) & ~(size_t)15;
		off[c] = at + (size_t)(c % 3) * (t.bits / 8);
		at = off[c] + (size_t)n * dtype_bytes(t);
	}
	return at;
}

/* Checks one read group of the batch's columns against the pattern; counts the prims it covers. */
static void batch_check_group(fixture *f, const ovstage_read_group_t *g, const ovx_token_t *a, const size_t *off,
			      unsigned seed, uint32_t *seen)
{
	uint32_t c = 0;
	while (c < BATCH_COLS && a[c] != g->attribute)
		c++;
	ck_assert_uint_lt(c, BATCH_COLS);
	ck_assert(!g->is_delete);
	const DLTensor *t = &g->data.tensors[0];
	ck_assert_int_eq(t->device.device_type, kDLCUDA);
	size_t rb = dtype_bytes(t->dtype);
	for (int d = 1; d < t->ndim; d++)
		rb *= (size_t)t->shape[d];
	ck_assert_uint_eq(rb, dtype_bytes(batch_dtype(c)));
	size_t rows = (size_t)t->shape[0];
	unsigned char *h = malloc(rows * rb + 1);
	if (g->data.cuda_sync.wait_event)
		CU(cudaStreamWaitEvent(cudaStreamPerThread, (cudaEvent_t)g->data.cuda_sync.wait_event, 0));
	CU(cudaMemcpyAsync(h, (const unsigned char *)t->data + t->byte_offset, rows * rb, cudaMemcpyDeviceToHost,
			   cudaStreamPerThread));
	CU(cudaStreamSynchronize(cudaStreamPerThread));
	for (uint32_t i = 0; i < g->prims.count; i++) {
		uint32_t e = g->prims.index_map ? g->prims.index_map[i] : g->prims.offset + i;
		uint32_t row = g->data.index_map ? g->data.index_map[i] : i;
		ck_assert_uint_lt(e, f->n);
		ck_assert_uint_lt(row, rows);
		for (size_t b = 0; b < rb; b++) {
			unsigned char want = batch_byte((uint32_t)(off[c] + (size_t)e * rb + b), seed);
			ck_assert_msg(h[(size_t)row * rb + b] == want, "column %u (%zu-byte rows, %u rows), prim %u, byte "
				      "%zu: %u, expected %u", c, rb, f->n, e, b, h[(size_t)row * rb + b], want);
		}
		seen[c]++;
	}
	free(h);
}

/* The batch case over a query of n prims. */
static void batch_write_check(uint32_t n, unsigned seed)
{
	fixture f;
	fx_open(&f, n);
	static ovx_token_t a[BATCH_COLS];
	static tst_tensor tt[BATCH_COLS];
	static ovstage_attribute_write_t w[BATCH_COLS];
	static size_t off[BATCH_COLS];
	static uint32_t seen[BATCH_COLS];
	size_t bytes = batch_layout(f.n, off);
	unsigned char *arena = (unsigned char *)dev_alloc(bytes);
	cudaStream_t s;
	CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	ck_assert_int_eq(tst_gpu_spin_bytes(s, arena, (unsigned)bytes, seed, SPIN), 0);
	for (uint32_t c = 0; c < BATCH_COLS; c++) {
		char name[24];
		snprintf(name, sizeof name, "batch%u", c);
		a[c] = tst_tok(f.pd, name);
		DLDataType t = batch_dtype(c);
		w[c].attribute = tst_attr(a[c]);
		w[c].data = tst_wdata(&tt[c], arena + off[c], f.n, t.code, t.bits, t.lanes);
		tt[c].t.device = (DLDevice){ kDLCUDA, 0 };
		w[c].data.cuda_sync.stream = (uintptr_t)s; /* drained: the kernel is still spinning now */
		seen[c] = 0;
	}
	tst_wait_ok(f.st, ovstage_write_attributes(f.st, f.q, w, BATCH_COLS, 1, OVSTAGE_PRIM_MODE_UPSERT));
	seal(&f, 1);
	ovstage_read_handle_t rh;
	ovstage_ordinal_range_t r = { 0, UINT64_MAX, false };
	tst_wait_ok(f.st, ovstage_read_attributes(f.st, f.q, a, BATCH_COLS, r, &rh));
	ovstage_read_group_t g;
	ovstage_api_status_t st;
	while ((st = ovstage_fetch_read_next(f.st, rh, OVSTAGE_TIMEOUT_INFINITE, &g)) == OVSTAGE_OK) {
		batch_check_group(&f, &g, a, off, seed, seen);
		ck_assert_int_eq(ovstage_release_group(f.st, &g), OVSTAGE_OK);
	}
	ck_assert_int_eq(st, OVSTAGE_ERROR_END_OF_ITERATION);
	tst_wait_ok(f.st, ovstage_release_read(f.st, rh));
	for (uint32_t c = 0; c < BATCH_COLS; c++)
		ck_assert_msg(seen[c] == f.n, "column %u: %u of %u prims read", c, seen[c], f.n);
	CU(cudaStreamDestroy(s));
	CU(cudaFree(arena));
	fx_close(&f);
}

START_TEST(test_write_batches_small_device_copies)
{
	batch_write_check(4096, 7); /* 297 batched copies (three launches) and three cudaMemcpyAsync */
	batch_write_check(1, 11);   /* one row per column: 1- to 320-byte copies, all batched */
	batch_write_check(3, 13);   /* odd byte counts: 3, 9, 12, 36, 48 and 960 bytes */
}
END_TEST

/* ---- no GPU ---------------------------------------------------------------------------------- */

START_TEST(test_unavailable_refuses_cuda_at_call)
{
	int n = -1;
	const char *why = NULL;
	ck_assert_int_eq(ovstage_ext_get_gpu_status(&n, &why), OVSTAGE_OK);
	ck_assert_int_eq(n, 0);
	ck_assert(why && *why);
	ovstage_ext_gpu_pool_stats_t ps;
	ck_assert_int_eq(ovstage_ext_get_gpu_pool_stats(0, &ps), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(tst_last_error(), "CUDA device 0") && strstr(tst_last_error(), why), "%s", tst_last_error());
	ovstage_ext_gpu_device_info_t info;
	ck_assert_int_eq(ovstage_ext_get_gpu_device_info(0, &info), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(tst_last_error(), "CUDA device 0") && strstr(tst_last_error(), why), "%s", tst_last_error());
	fixture f;
	fx_open(&f, 4);
	ovx_token_t a = tst_tok(f.pd, "nogpu");
	float host[4] = { 1, 2, 3, 4 };
	tst_tensor tt;
	ovstage_enqueue_result_t e = write1(&f, a, 1, wdata_dev(&tt, host, 4, kDLCUDA));
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_assert_msg(strstr(tst_last_error(), why), "message \"%s\" does not say why (\"%s\")", tst_last_error(), why);
	ovstage_write_data_t w = wdata_dev(&tt, host, 4, kDLCPU);
	w.cuda_sync.stream = 1;
	e = write1(&f, a, 1, w);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_assert_msg(strstr(tst_last_error(), why), "%s", tst_last_error());
	/* a map session: write_done_sync naming CUDA work is refused at the call, naming why; the
	 * session stays open and unmaps with {0, 0} */
	ovstage_map_desc_t md;
	memset(&md, 0, sizeof md);
	md.attribute = tst_attr(tst_tok(f.pd, "nogpu_map"));
	md.dtype = (DLDataType){ kDLFloat, 32, 1 };
	ovstage_map_handle_t mh = OVSTAGE_INVALID_MAP_HANDLE;
	tst_wait_ok(f.st, ovstage_map_attribute(f.st, f.q, &md, 1, NULL, 0, &mh));
	ovstage_map_group_t g;
	ck_assert_int_eq(ovstage_fetch_map_next(f.st, mh, OVSTAGE_TIMEOUT_INFINITE, &g), OVSTAGE_OK);
	ck_assert_int_eq(g.data.tensors[0].device.device_type, kDLCPU);
	ck_assert_int_eq(g.data.cuda_sync.wait_event, 0);
	memcpy(g.data.tensors[0].data, host, sizeof host);
	ovstage_cuda_sync_t cs = { 2, 0 }, none = { 0, 0 };
	ck_assert_int_eq(ovstage_unmap_group(f.st, mh, &g, cs).status, OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_assert_msg(strstr(tst_last_error(), why), "%s", tst_last_error());
	ck_assert_int_eq(ovstage_unmap_attribute(f.st, mh, cs).status, OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_assert_msg(strstr(tst_last_error(), "write_done_sync: cuda_sync = {stream 0x2"), "%s", tst_last_error());
	tst_wait_ok(f.st, ovstage_unmap_attribute(f.st, mh, none));
	/* the host path still works */
	tst_wait_ok(f.st, write1(&f, a, 1, wdata_dev(&tt, host, 4, kDLCPU)));
	seal(&f, 1);
	float vals[4];
	DLDeviceType dev[1];
	read_latest(&f, &a, 1, vals, dev);
	ck_assert_int_eq(dev[0], kDLCPU);
	expect(vals, host, 4, "host write in CPU-only mode");
	fx_close(&f);
	/* an active-GPU list is ignored in CPU-only mode (with a warning): the instance has no device */
	cuda_devices_begin("0,3");
	fx_open(&f, 4);
	int cd = -2;
	ck_assert_int_eq(ovstage_ext_get_instance_cuda_device(f.st, &cd), OVSTAGE_OK);
	ck_assert_int_eq(cd, -1);
	fx_close(&f);
	cuda_devices_end();
}
END_TEST

int main(void)
{
	int n = 0;
	const char *why = "";
	ovstage_ext_get_gpu_status(&n, &why);
	Suite *su = suite_create("gpu");
	TCase *tc = tcase_create(n > 0 ? "gpu" : "unavailable");
	tcase_set_timeout(tc, 300);
	if (n > 0) {
		tcase_add_test(tc, test_full_write_stays_on_device);
		tcase_add_test(tc, test_sparse_writes_run_on_device);
		tcase_add_test(tc, test_cuda_into_cpu_column_and_mixed_read);
		tcase_add_test(tc, test_wait_event_is_snapshotted_at_the_call);
		tcase_add_test(tc, test_managed_device_tensor_adopted_deleted_once);
		tcase_add_test(tc, test_bad_device_input_refused_at_call);
		tcase_add_test(tc, test_map_of_written_device_column_and_clone_refused);
		tcase_add_test(tc, test_map_creates_device_column_on_instance_gpu);
		tcase_add_test(tc, test_read_current_map_of_device_column);
		tcase_add_test(tc, test_instance_devices_round_robin_and_invisible_refused);
		tcase_add_test(tc, test_device_info_near_workers_and_poller);
		tcase_add_test(tc, test_array_column_on_device);
		tcase_add_test(tc, test_cuda_arrays_into_cpu_column_and_mixed_read);
		tcase_add_test(tc, test_strided_cuda_array_row_refused);
		tcase_add_test(tc, test_threads_write_seal_read_device_columns);
		tcase_add_test(tc, test_write_batches_small_device_copies);
	} else {
		fprintf(stderr, "check_gpu: no usable CUDA device (%s): only the CPU-only checks run; the GPU cases "
			"run on a machine with a GPU\n", why);
		tcase_add_test(tc, test_unavailable_refuses_cuda_at_call);
	}
	suite_add_tcase(su, tc);
	if (n > 0) { /* its own case: ctest runs it alone under other pool bounds (CK_RUN_CASE=pool) */
		TCase *pool = tcase_create("pool");
		tcase_set_timeout(pool, 300);
		tcase_add_test(pool, test_device_pool_reuses_within_its_bound);
		tcase_add_test(pool, test_full_device_buffer_reused_never_under_a_held_group);
		tcase_add_test(pool, test_full_device_buffer_kept_while_newer_versions_share_it);
		suite_add_tcase(su, pool);
	}
	SRunner *sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
