/*
 * check_soak.c — a soak on OVSTAGE_SOAK_THREADS threads (default 4): OVSTAGE_SOAK_ORDINALS ordinals
 * (default 2000; the long test, ctest -C soak, runs 1000000). At each ordinal every thread writes its
 * own 4096-prim float column; thread 0 seals the ordinal; every thread then reads its column, checks
 * every value, and holds the read's first group across the next ordinal (releasing the previous one).
 * At the end of each ordinal, with the stage quiescent, thread 0 takes its memory statistics
 * (ovstage_ext_get_memory_stats: exact then) and checks that
 *  - the live bytes (buffers held, less the pooled ones) stay within a bound that does not grow with
 *    the ordinal count: per column, retention versions + the held group's version + the one a seal
 *    builds;
 *  - nothing is left unsealed.
 * The curve (ordinal, unsealed, buffer, pooled bytes, buffers, live column buffers, the process's
 * resident KiB) is written every
 * 1/1000th of the run to OVSTAGE_SOAK_CURVE (default soak_curve.tsv in the working directory).
 * Threads record the first failure (check's assertions are not thread-safe); the test asserts after
 * the join. Values are checked with plain loops: a ck_assert per value would write a check log
 * record per value.
 */
#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ovstage/ovstage.h>
#include <ovstage/ovstage_ext.h>
#include <ovx/path_dictionary/path_dictionary.h>

#include "stage_test_util.h"

#define NPRIMS 4096
#define MAX_THREADS 16

static uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);
	return v && *v ? strtoull(v, NULL, 10) : dflt;
}

typedef struct soak {
	ovstage_instance_t *st;
	ovstage_query_handle_t q;
	ovx_token_t cols[MAX_THREADS];
	uint32_t threads;
	uint64_t nord;
	pthread_barrier_t bar;
	FILE *curve;
	uint64_t live_bound;  /* live column buffers allowed, over all columns */
	uint64_t max_live;    /* the most seen (thread 0) */
	_Atomic bool failed;  /* the first failure stops every thread at the next barrier */
	char why[512];        /* its message (written once, by the thread that set failed) */
} soak;

typedef struct worker {
	soak *s;
	uint32_t id;
} worker;

static void soak_fail(soak *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void soak_fail(soak *s, const char *fmt, ...)
{
	if (atomic_exchange(&s->failed, true))
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->why, sizeof s->why, fmt, ap);
	va_end(ap);
}

/* Waits for an op and releases it; false (the failure recorded) if it was refused or failed. */
static bool op_ok(soak *s, ovstage_enqueue_result_t e, const char *what, uint64_t o)
{
	if (e.status != OVSTAGE_OK) {
		soak_fail(s, "ordinal %" PRIu64 ": %s refused (%d): %s", o, what, (int)e.status, tst_last_error());
		return false;
	}
	ovstage_op_wait_result_t w;
	ovstage_api_status_t ws = ovstage_wait_op(s->st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &w);
	bool ok = ws == OVSTAGE_OK && w.error_op_id_count == 0;
	if (!ok)
		soak_fail(s, "ordinal %" PRIu64 ": %s failed", o, what);
	ovstage_release_op(s->st, e.op_index);
	return ok;
}

static float value_at(uint32_t col, uint64_t o, uint32_t i)
{
	return (float)((o * 7 + col * 131 + (uint64_t)i) % 1000003);
}

/* Reads column id at o (latest), checks every value, holds the first group (releasing *held). */
static void read_and_hold(soak *s, uint32_t id, uint64_t o, ovstage_read_group_t *held, bool *have_held)
{
	ovstage_read_handle_t rh;
	ovstage_ordinal_range_t rg = { 0, o, false };
	if (!op_ok(s, ovstage_read_attributes(s->st, s->q, &s->cols[id], 1, rg, &rh), "read", o))
		return;
	ovstage_read_group_t g;
	int ngroups = 0;
	while (ovstage_fetch_read_next(s->st, rh, OVSTAGE_TIMEOUT_INFINITE, &g) == OVSTAGE_OK) {
		const float *p = (const float *)((const uint8_t *)g.data.tensors[0].data + g.data.tensors[0].byte_offset);
		uint32_t bad = UINT32_MAX;
		for (uint32_t j = 0; j < g.prims.count && bad == UINT32_MAX; j++)
			if (g.data.index_map || g.prims.index_map || p[j] != value_at(id, o, g.prims.offset + j))
				bad = j;
		if (bad != UINT32_MAX)
			soak_fail(s, "ordinal %" PRIu64 " column %u: prim %u reads %f (or unexpected index maps)", o, id,
				  g.prims.offset + bad, (double)p[bad]);
		if (ngroups++ == 0) {
			if (*have_held && ovstage_release_group(s->st, held) != OVSTAGE_OK)
				soak_fail(s, "ordinal %" PRIu64 ": release_group of the held group failed", o);
			*held = g;
			*have_held = true;
		} else if (ovstage_release_group(s->st, &g) != OVSTAGE_OK) {
			soak_fail(s, "ordinal %" PRIu64 ": release_group failed", o);
		}
	}
	if (!ngroups)
		soak_fail(s, "ordinal %" PRIu64 " column %u: no group", o, id);
	op_ok(s, ovstage_release_read(s->st, rh), "release_read", o);
}

/* The process's resident set in KiB (Linux /proc/self/statm), -1 where it cannot be read. */
static long rss_kb(void)
{
	long pages = -1, resident = -1;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
			resident = -1;
		fclose(f);
	}
	return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Thread 0, the stage quiescent: the memory bound and the curve. */
static void check_memory(soak *s, uint64_t o, uint64_t step)
{
	ovstage_ext_memory_stats_t ms;
	if (ovstage_ext_get_memory_stats(s->st, &ms) != OVSTAGE_OK) {
		soak_fail(s, "ordinal %" PRIu64 ": get_memory_stats failed", o);
		return;
	}
	const uint64_t col_bytes = NPRIMS * sizeof(float);
	uint64_t live_bytes = ms.buffer_bytes - ms.pooled_bytes;
	uint64_t live = (live_bytes + col_bytes - 1) / col_bytes; /* pooled buffers count in buffers too */
	if (live > s->max_live)
		s->max_live = live;
	if (live_bytes > s->live_bound * col_bytes)
		soak_fail(s, "ordinal %" PRIu64 ": %" PRIu64 " live bytes, bound %" PRIu64 " (%" PRIu64 " columns)", o,
			  live_bytes, s->live_bound * col_bytes, s->live_bound);
	if (ms.unsealed_bytes)
		soak_fail(s, "ordinal %" PRIu64 ": %" PRIu64 " unsealed bytes after the seal", o, ms.unsealed_bytes);
	if (o % step == 0 || o == s->nord)
		fprintf(s->curve, "%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%ld\n", o,
			ms.unsealed_bytes, ms.buffer_bytes, ms.pooled_bytes, ms.buffers, live, rss_kb());
}

static void *soak_thread(void *arg)
{
	worker *wk = arg;
	soak *s = wk->s;
	float *vals = malloc(NPRIMS * sizeof *vals);
	ovstage_read_group_t held;
	bool have_held = false;
	uint64_t step = s->nord / 1000 ? s->nord / 1000 : 1;
	for (uint64_t o = 1; o <= s->nord && vals; o++) {
		for (uint32_t i = 0; i < NPRIMS; i++)
			vals[i] = value_at(wk->id, o, i);
		tst_tensor t;
		op_ok(s, ovstage_write_attribute(s->st, s->q, tst_attr(s->cols[wk->id]), o,
						 tst_wdata(&t, vals, NPRIMS, kDLFloat, 32, 1), OVSTAGE_PRIM_MODE_UPSERT),
		      "write", o);
		pthread_barrier_wait(&s->bar); /* every column written at o */
		if (wk->id == 0) {
			ovstage_write_floor_desc_t d = { o, OVSTAGE_SCOPE_ALL, NULL, 0 };
			op_ok(s, ovstage_advance_write_floor(s->st, &d), "advance_write_floor", o);
		}
		pthread_barrier_wait(&s->bar); /* sealed */
		read_and_hold(s, wk->id, o, &held, &have_held);
		pthread_barrier_wait(&s->bar); /* every read released but the held groups */
		if (wk->id == 0)
			check_memory(s, o, step);
		pthread_barrier_wait(&s->bar);
		if (atomic_load(&s->failed))
			break; /* every thread sees it after the same barrier */
	}
	if (!vals)
		soak_fail(s, "out of memory");
	if (have_held && ovstage_release_group(s->st, &held) != OVSTAGE_OK)
		soak_fail(s, "release_group of the last held group failed");
	free(vals);
	return NULL;
}

START_TEST(test_soak_live_buffers_bounded)
{
	static soak s;
	memset(&s, 0, sizeof s);
	s.nord = env_u64("OVSTAGE_SOAK_ORDINALS", 2000);
	s.threads = (uint32_t)env_u64("OVSTAGE_SOAK_THREADS", 4);
	ck_assert_uint_ge(s.threads, 1);
	ck_assert_uint_le(s.threads, MAX_THREADS);
	const char *curve_path = getenv("OVSTAGE_SOAK_CURVE");
	s.curve = fopen(curve_path && *curve_path ? curve_path : "soak_curve.tsv", "w");
	ck_assert_msg(s.curve != NULL, "cannot write the memory curve");
	fprintf(s.curve, "ordinal\tunsealed_bytes\tbuffer_bytes\tpooled_bytes\tbuffers\tlive_buffers\trss_kb\n");
	ck_assert_int_eq(ovstage_create_instance(NULL, &s.st), OVSTAGE_OK);
	path_dictionary_instance_t *pd = ovstage_get_path_dictionary(s.st);
	char (*names)[24] = malloc(NPRIMS * sizeof *names);
	const char **paths = malloc(NPRIMS * sizeof *paths);
	for (int i = 0; i < NPRIMS; i++) {
		snprintf(names[i], sizeof names[i], "/P%d", i);
		paths[i] = names[i];
	}
	s.q = tst_query_of(s.st, pd, paths, NPRIMS, NULL);
	for (uint32_t c = 0; c < s.threads; c++) {
		char nm[16];
		snprintf(nm, sizeof nm, "v%u", c);
		s.cols[c] = tst_tok(pd, nm);
	}
	/* per column: retention (default 2) + the held group's version + the version a seal builds */
	s.live_bound = (uint64_t)s.threads * (2 + 1 + 1);
	ck_assert_int_eq(pthread_barrier_init(&s.bar, NULL, s.threads), 0);
	pthread_t th[MAX_THREADS];
	worker wk[MAX_THREADS];
	for (uint32_t i = 0; i < s.threads; i++) {
		wk[i] = (worker){ &s, i };
		ck_assert_int_eq(pthread_create(&th[i], NULL, soak_thread, &wk[i]), 0);
	}
	for (uint32_t i = 0; i < s.threads; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&s.bar);
	fclose(s.curve);
	ck_assert_msg(!atomic_load(&s.failed), "%s", s.why);
	fprintf(stderr, "check_soak: %" PRIu64 " ordinals on %u threads, at most %" PRIu64 " live column buffers (bound %" PRIu64
		")\n", s.nord, s.threads, s.max_live, s.live_bound);
	tst_wait_ok(s.st, ovstage_release_query(s.st, s.q));
	ck_assert_int_eq(ovstage_destroy_instance(s.st), OVSTAGE_OK);
	free(paths);
	free(names);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("soak");
	TCase *tc = tcase_create("soak");
	tcase_set_timeout(tc, 0); /* the long run's length is the caller's choice (no timing here) */
	tcase_add_test(tc, test_soak_live_buffers_bounded);
	suite_add_tcase(su, tc);
	SRunner *sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
