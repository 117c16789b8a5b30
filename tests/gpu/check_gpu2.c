/*
 * check_gpu2.c — the two-GPU suite (label "gpu2", issue 9): instances assigned round-robin over an
 * active-GPU list of two devices, writes from one GPU into a column on the other (peer copies,
 * fenced on a producer still running there) checked value by value, and a stress of two producer
 * threads, one per GPU, writing the same ordinals into one shared instance and into one instance
 * each, with a consumer reading both columns and checking every value it sees.
 *
 * With fewer than two usable CUDA devices nothing here can run: the suite says so on stderr and
 * runs only a check of the device count it was given. The cases run on a machine with two GPUs
 * (the device tool's nvidia-h200-x2; docs/gpu.md, "Device runs").
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include <ovstage/ovstage.h>
#include <ovstage/ovstage_ext.h>
#include <ovx/path_dictionary/path_dictionary.h>

#include "gpu_test_util.h"

int tst_gpu_spin_fill(void *stream, float *dst, unsigned n, float base, long long spin_cycles);

#define CU(call) ck_assert_msg((call) == cudaSuccess, "%s: %s", #call, cudaGetErrorString(cudaGetLastError()))
#define SPIN (20LL * 1000 * 1000) /* ~10 ms of GPU clocks: the write is submitted while it runs */

typedef struct stage2 {
	ovstage_instance_t *st;
	path_dictionary_instance_t *pd;
	ovstage_query_handle_t q;
	uint32_t n;
} stage2;

static void s2_open(stage2 *s, uint32_t n)
{
	memset(s, 0, sizeof *s);
	ck_assert_int_eq(ovstage_create_instance(NULL, &s->st), OVSTAGE_OK);
	s->pd = ovstage_get_path_dictionary(s->st);
	s->n = n;
	s->q = gtu_query_n(s->st, s->pd, n, "/g2/p");
}

static void s2_close(stage2 *s)
{
	tst_wait_ok(s->st, ovstage_release_query(s->st, s->q));
	ck_assert_int_eq(ovstage_destroy_instance(s->st), OVSTAGE_OK);
}

/* A float32 device buffer of n elements on device dev, filled with base + i on stream st of that
 * device after spinning `spin` GPU clocks (the caller's current device is kept). */
static float *ramp_on(int dev, cudaStream_t st, uint32_t n, float base, long long spin)
{
	int prev;
	CU(cudaGetDevice(&prev));
	CU(cudaSetDevice(dev));
	void *p = NULL;
	CU(cudaMalloc(&p, (size_t)n * sizeof(float)));
	ck_assert_int_eq(tst_gpu_spin_fill(st, p, n, base, spin), 0);
	CU(cudaSetDevice(prev));
	return p;
}

static ovstage_write_data_t dev_wdata(tst_tensor *tt, float *p, uint32_t n, int dev, cudaStream_t producer)
{
	ovstage_write_data_t w = tst_wdata(tt, p, n, kDLFloat, 32, 1);
	tt->t.device.device_type = kDLCUDA;
	tt->t.device.device_id = dev;
	w.cuda_sync.stream = (uintptr_t)producer; /* 0: nothing outstanding */
	return w;
}

static void s2_write(stage2 *s, ovx_token_t a, ovstage_ordinal_t o, ovstage_write_data_t w)
{
	tst_wait_ok(s->st, ovstage_write_attribute(s->st, s->q, tst_attr(a), o, w, OVSTAGE_PRIM_MODE_UPSERT));
}

static void s2_seal(stage2 *s, ovstage_ordinal_t o, const ovx_token_t *cols, uint32_t ncols)
{
	ovstage_write_floor_desc_t d = { o, cols ? OVSTAGE_SCOPE_INCLUDE : OVSTAGE_SCOPE_ALL, cols, ncols };
	tst_wait_ok(s->st, ovstage_advance_write_floor(s->st, &d));
}

/* The latest values of a into vals (prim order), the device of its groups into *dev and the
 * ordinal they were written at into *ord. Device groups are read after their event. */
static void s2_read(stage2 *s, ovx_token_t a, float *vals, DLDevice *dev, uint64_t *ord)
{
	ovstage_read_handle_t rh;
	ovstage_ordinal_range_t r = { 0, UINT64_MAX, false };
	tst_wait_ok(s->st, ovstage_read_attributes(s->st, s->q, &a, 1, r, &rh));
	ovstage_read_group_t g;
	ovstage_api_status_t st;
	uint32_t seen = 0;
	while ((st = ovstage_fetch_read_next(s->st, rh, OVSTAGE_TIMEOUT_INFINITE, &g)) == OVSTAGE_OK) {
		const DLTensor *t = &g.data.tensors[0];
		*dev = t->device;
		*ord = g.ordinal;
		size_t rows = (size_t)t->shape[0];
		float *h = malloc((rows ? rows : 1) * sizeof *h);
		if (t->device.device_type == kDLCUDA) {
			int prev;
			CU(cudaGetDevice(&prev));
			CU(cudaSetDevice(t->device.device_id));
			if (g.data.cuda_sync.wait_event)
				CU(cudaStreamWaitEvent(cudaStreamPerThread, (cudaEvent_t)g.data.cuda_sync.wait_event, 0));
			CU(cudaMemcpyAsync(h, t->data, rows * sizeof *h, cudaMemcpyDeviceToHost, cudaStreamPerThread));
			CU(cudaStreamSynchronize(cudaStreamPerThread));
			CU(cudaSetDevice(prev));
		} else {
			memcpy(h, t->data, rows * sizeof *h);
		}
		for (uint32_t i = 0; i < g.prims.count; i++) {
			uint32_t e = g.prims.index_map ? g.prims.index_map[i] : g.prims.offset + i;
			uint32_t row = g.data.index_map ? g.data.index_map[i] : i;
			ck_assert_uint_lt(row, rows);
			vals[e] = h[row];
		}
		seen += g.prims.count;
		free(h);
		ck_assert_int_eq(ovstage_release_group(s->st, &g), OVSTAGE_OK);
	}
	ck_assert_int_eq(st, OVSTAGE_ERROR_END_OF_ITERATION);
	ck_assert_uint_eq(seen, s->n);
	tst_wait_ok(s->st, ovstage_release_read(s->st, rh));
}

/* The latest values of a are want[i], on device dev, written at ordinal o. */
static void expect_vals(stage2 *s, ovx_token_t a, int dev, uint64_t o, const float *want, const char *what)
{
	float *v = malloc(s->n * sizeof *v);
	DLDevice d = { 0, 0 };
	uint64_t ord = 0;
	s2_read(s, a, v, &d, &ord);
	ck_assert_msg(d.device_type == kDLCUDA && d.device_id == dev, "%s: group on device (%d, %d), expected cuda %d",
		      what, (int)d.device_type, (int)d.device_id, dev);
	ck_assert_msg(ord == o, "%s: ordinal %llu, expected %llu", what, (unsigned long long)ord, (unsigned long long)o);
	for (uint32_t i = 0; i < s->n; i++)
		ck_assert_msg(v[i] == want[i], "%s: prim %u = %g, expected %g", what, i, (double)v[i], (double)want[i]);
	free(v);
}

/* The latest values of a are base + i, on device dev, written at ordinal o. */
static void expect_ramp(stage2 *s, ovx_token_t a, int dev, uint64_t o, float base, const char *what)
{
	float *want = malloc(s->n * sizeof *want);
	for (uint32_t i = 0; i < s->n; i++)
		want[i] = base + (float)i;
	expect_vals(s, a, dev, o, want, what);
	free(want);
}


/* ---- round-robin ------------------------------------------------------------------------------ */

/* Instances created under "0,1" take 0, 1, 0 in creation order; a map that creates a column creates
 * it on its instance's device, which a read then reports. */
START_TEST(test_round_robin_over_two_devices)
{
	gtu_config_cuda_devices("0,1");
	ovstage_instance_t *in[3];
	int want[3] = { 0, 1, 0 };
	for (int k = 0; k < 3; k++) {
		ck_assert_int_eq(ovstage_create_instance(NULL, &in[k]), OVSTAGE_OK);
		int d = -2;
		ck_assert_int_eq(ovstage_ext_get_instance_cuda_device(in[k], &d), OVSTAGE_OK);
		ck_assert_msg(d == want[k], "instance %d on device %d, expected %d", k, d, want[k]);
	}
	for (int k = 0; k < 3; k++)
		ck_assert_int_eq(ovstage_destroy_instance(in[k]), OVSTAGE_OK);
	gtu_config_cuda_devices("");
	ck_assert_int_eq(ovstage_shutdown(), OVSTAGE_OK); /* one per ovstage_initialize */
	ck_assert_int_eq(ovstage_shutdown(), OVSTAGE_OK);
}
END_TEST

/* ---- peer writes -------------------------------------------------------------------------------- */

/* A column created on device `home` takes writes from the other device: a full write whose producer
 * kernel still runs there (fenced by its stream), and one with nothing outstanding; then a masked
 * write fenced on a running producer and an index-mapped one (gathered in place through peer access,
 * or staged onto `home` first where the devices cannot reach each other). Every value is checked,
 * and the column stays on `home`. */
static void peer_writes_into(int home)
{
	int other = 1 - home;
	stage2 s;
	s2_open(&s, 50000);
	ovx_token_t a = tst_tok(s.pd, home ? "on1" : "on0");
	cudaStream_t ps[2];
	for (int d = 0; d < 2; d++) {
		CU(cudaSetDevice(d));
		CU(cudaStreamCreateWithFlags(&ps[d], cudaStreamNonBlocking));
	}
	CU(cudaSetDevice(0));
	tst_tensor tt;
	float *first = ramp_on(home, ps[home], s.n, 1.f, 0);
	CU(cudaStreamSynchronize(ps[home]));
	s2_write(&s, a, 1, dev_wdata(&tt, first, s.n, home, 0));
	s2_seal(&s, 1, NULL, 0);
	expect_ramp(&s, a, home, 1, 1.f, "first write on the home device");
	float *peer = ramp_on(other, ps[other], s.n, 5000.f, SPIN); /* still running at the write */
	s2_write(&s, a, 2, dev_wdata(&tt, peer, s.n, other, ps[other]));
	s2_seal(&s, 2, NULL, 0);
	expect_ramp(&s, a, home, 2, 5000.f, "peer write fenced on a running producer");
	float *peer2 = ramp_on(other, ps[other], s.n, 9000.f, 0);
	CU(cudaStreamSynchronize(ps[other]));
	s2_write(&s, a, 3, dev_wdata(&tt, peer2, s.n, other, 0));
	s2_seal(&s, 3, NULL, 0);
	expect_ramp(&s, a, home, 3, 9000.f, "peer write, nothing outstanding");
	float *want = malloc(s.n * sizeof *want);
	uint64_t *mask = calloc((s.n + 63) / 64, 8);
	float *peer3 = ramp_on(other, ps[other], s.n, 20000.f, SPIN); /* masked: every 7th row, fenced */
	for (uint32_t i = 0; i < s.n; i++) {
		bool sel = i % 7 == 3;
		if (sel)
			mask[i / 64] |= 1ull << (i % 64);
		want[i] = sel ? 20000.f + (float)i : 9000.f + (float)i;
	}
	ovstage_write_data_t mw = dev_wdata(&tt, peer3, s.n, other, ps[other]);
	mw.mask = mask;
	mw.count = s.n;
	s2_write(&s, a, 4, mw);
	s2_seal(&s, 4, NULL, 0);
	expect_vals(&s, a, home, 4, want, "masked peer write fenced on a running producer");
	uint32_t *map = malloc(s.n * sizeof *map); /* index-mapped: prim i takes source row n - 1 - i */
	for (uint32_t i = 0; i < s.n; i++) {
		map[i] = s.n - 1 - i;
		want[i] = 9000.f + (float)map[i];
	}
	ovstage_write_data_t iw = dev_wdata(&tt, peer2, s.n, other, 0);
	iw.index_map = map;
	iw.count = s.n;
	s2_write(&s, a, 5, iw);
	s2_seal(&s, 5, NULL, 0);
	expect_vals(&s, a, home, 5, want, "index-mapped peer write");
	free(map);
	free(mask);
	free(want);
	int ids[4] = { home, other, other, other };
	float *bufs[4] = { first, peer, peer2, peer3 };
	for (int k = 0; k < 4; k++) {
		CU(cudaSetDevice(ids[k]));
		CU(cudaFree(bufs[k]));
	}
	for (int d = 0; d < 2; d++) {
		CU(cudaSetDevice(d));
		CU(cudaStreamDestroy(ps[d]));
	}
	CU(cudaSetDevice(0));
	s2_close(&s);
}

START_TEST(test_peer_writes_into_device0)
{
	peer_writes_into(0);
}
END_TEST

START_TEST(test_peer_writes_into_device1)
{
	peer_writes_into(1);
}
END_TEST

/* ---- two producers, one per GPU, and a consumer --------------------------------------------- */

enum { STRESS_STEPS = 60, STRESS_N = 20000 };

typedef struct producer_arg {
	stage2 *s;        /* where this producer writes */
	int dev;          /* its GPU */
	ovx_token_t col;  /* its column */
	int failures;     /* values it read back wrong */
} producer_arg;

/* Value of prim i written by the producer on dev at ordinal o (exact in float32). */
static float stress_value(int dev, uint64_t o, uint32_t i)
{
	return (float)((uint64_t)dev * 4000000u + o * 20000u + i);
}

static void *producer_thread(void *p)
{
	producer_arg *pa = p;
	CU(cudaSetDevice(pa->dev));
	cudaStream_t st;
	CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	void *mem = NULL;
	CU(cudaMalloc(&mem, (size_t)pa->s->n * sizeof(float)));
	float *d = mem;
	for (uint64_t o = 1; o <= STRESS_STEPS; o++) {
		ck_assert_int_eq(tst_gpu_spin_fill(st, d, pa->s->n, stress_value(pa->dev, o, 0), o % 5 == 0 ? SPIN / 20 : 0),
				 0);
		tst_tensor tt;
		s2_write(pa->s, pa->col, o, dev_wdata(&tt, d, pa->s->n, pa->dev, st));
		s2_seal(pa->s, o, &pa->col, 1);
	}
	CU(cudaStreamSynchronize(st));
	CU(cudaFree(d));
	CU(cudaStreamDestroy(st));
	return NULL;
}

typedef struct consumer_arg {
	producer_arg *p;     /* the two producers */
	_Atomic int *done;   /* producers finished */
	int failures;        /* wrong values seen */
	int reads;           /* complete reads checked */
} consumer_arg;

/* Reads both columns latest until both producers are done, checking that every value is the one its
 * producer wrote at the group's ordinal. */
static void *consumer_thread(void *p)
{
	consumer_arg *ca = p;
	uint32_t n = ca->p[0].s->n;
	float *v = malloc(n * sizeof *v);
	for (int round = 0; atomic_load_explicit(ca->done, memory_order_acquire) < 2 || round < 2; round++) {
		for (int k = 0; k < 2; k++) {
			producer_arg *pa = &ca->p[k];
			DLDevice dev = { 0, 0 };
			uint64_t o = 0;
			if (tst_floor_of(pa->s->st, pa->col) == 0)
				continue; /* nothing sealed yet: a latest read would return no group */
			s2_read(pa->s, pa->col, v, &dev, &o);
			if (dev.device_type != kDLCUDA || dev.device_id != pa->dev)
				ca->failures++;
			for (uint32_t i = 0; i < n; i++)
				if (v[i] != stress_value(pa->dev, o, i))
					ca->failures++;
			ca->reads++;
		}
	}
	free(v);
	return NULL;
}

/* shared: both producers write their own column of one instance; else one instance each. */
static void two_gpu_stress(bool shared)
{
	stage2 st[2];
	s2_open(&st[0], STRESS_N);
	if (!shared)
		s2_open(&st[1], STRESS_N);
	uint64_t resolved[2]; /* each device's own poller resolves its completions (issue 9) */
	for (int k = 0; k < 2; k++) {
		ovstage_ext_gpu_device_info_t info;
		ck_assert_int_eq(ovstage_ext_get_gpu_device_info(k, &info), OVSTAGE_OK);
		resolved[k] = info.completions;
	}
	producer_arg pa[2];
	for (int k = 0; k < 2; k++) {
		stage2 *s = shared ? &st[0] : &st[k];
		pa[k] = (producer_arg){ s, k, tst_tok(s->pd, k ? "gpu1" : "gpu0"), 0 };
	}
	_Atomic int done = 0;
	consumer_arg ca = { pa, &done, 0, 0 };
	pthread_t th[3];
	ck_assert_int_eq(pthread_create(&th[2], NULL, consumer_thread, &ca), 0);
	for (int k = 0; k < 2; k++)
		ck_assert_int_eq(pthread_create(&th[k], NULL, producer_thread, &pa[k]), 0);
	for (int k = 0; k < 2; k++) {
		pthread_join(th[k], NULL);
		atomic_fetch_add_explicit(&done, 1, memory_order_release);
	}
	pthread_join(th[2], NULL);
	ck_assert_msg(ca.failures == 0, "the consumer saw %d wrong values in %d reads", ca.failures, ca.reads);
	ck_assert_int_ge(ca.reads, 4); /* at least the two final rounds over both columns */
	for (int k = 0; k < 2; k++)
		expect_ramp(pa[k].s, pa[k].col, k, STRESS_STEPS, stress_value(k, STRESS_STEPS, 0), "the last ordinal");
	for (int k = 0; k < 2; k++) {
		ovstage_ext_gpu_device_info_t info;
		ck_assert_int_eq(ovstage_ext_get_gpu_device_info(k, &info), OVSTAGE_OK);
		ck_assert_msg(info.completions >= resolved[k] + STRESS_STEPS,
			      "device %d's poller resolved %llu completions in %d steps of its producer", k,
			      (unsigned long long)(info.completions - resolved[k]), STRESS_STEPS);
	}
	s2_close(&st[0]);
	if (!shared)
		s2_close(&st[1]);
}

START_TEST(test_two_producers_one_shared_instance)
{
	two_gpu_stress(true);
}
END_TEST

START_TEST(test_two_producers_own_instances)
{
	two_gpu_stress(false);
}
END_TEST

/* Fewer than two devices: nothing above can run. The count the suite was given must be what the
 * engine reports (the check that keeps this case from passing vacuously). */
static int g_devices;

START_TEST(test_fewer_than_two_devices)
{
	int n = -1;
	ck_assert_int_eq(ovstage_ext_get_gpu_status(&n, NULL), OVSTAGE_OK);
	ck_assert_int_eq(n, g_devices);
	ck_assert_int_lt(n, 2);
}
END_TEST

int main(void)
{
	const char *why = "";
	ovstage_ext_get_gpu_status(&g_devices, &why);
	Suite *su = suite_create("gpu2");
	TCase *tc = tcase_create(g_devices >= 2 ? "gpu2" : "fewer");
	tcase_set_timeout(tc, 300);
	if (g_devices >= 2) {
		tcase_add_test(tc, test_round_robin_over_two_devices);
		tcase_add_test(tc, test_peer_writes_into_device0);
		tcase_add_test(tc, test_peer_writes_into_device1);
		tcase_add_test(tc, test_two_producers_one_shared_instance);
		tcase_add_test(tc, test_two_producers_own_instances);
	} else {
		fprintf(stderr, "check_gpu2: %d usable CUDA device(s)%s%s: the two-GPU cases need two and did not "
			"run (they run on a machine with two GPUs)\n", g_devices, *why ? ": " : "", why);
		tcase_add_test(tc, test_fewer_than_two_devices);
	}
	suite_add_tcase(su, tc);
	SRunner *sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
