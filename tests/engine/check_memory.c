/*
 * check_memory.c — what a stage holds: the memory statistics call, back-pressure that never refuses
 * the write a seal needs (a lagging producer behind a fast one under a small budget), and a seal that
 * catches up on many ordinals holding a bounded number of versions.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ovstage/ovstage.h>
#include <ovstage/ovstage_ext.h>

#include "chunk.h"
#include "seal.h"
#include "stage.h"
#include "stage_test_util.h"

void ovs_store_counters(int64_t *versions, int64_t *buffers, int64_t *buffer_bytes);

enum { NPRIMS = 256, LANES = 250 }; /* 1000-byte rows: 250 KB per full write */

typedef struct fixture {
	ovstage_instance_t *st;
	path_dictionary_instance_t *pd;
	ovstage_query_handle_t q;
	ovx_token_t col;
} fixture;

static void init_with(uint64_t max_unsealed_mb, uint64_t retention)
{
	ovstage_config_entry_t e[2] = { ovstage_config_entry_uint64(OVSTAGE_CONFIG_EXT_MAX_UNSEALED_MB, max_unsealed_mb),
					ovstage_config_entry_uint64(OVSTAGE_CONFIG_EXT_RETENTION, retention) };
	ovstage_config_t cfg = { e, 2 };
	ck_assert_int_eq(ovstage_initialize(&cfg), OVSTAGE_OK);
}

static void setup(fixture *f)
{
	ck_assert_int_eq(ovstage_create_instance(NULL, &f->st), OVSTAGE_OK);
	f->pd = ovstage_get_path_dictionary(f->st);
	char names[NPRIMS][24];
	const char *paths[NPRIMS];
	for (int i = 0; i < NPRIMS; i++) {
		snprintf(names[i], sizeof names[i], "/p%d", i);
		paths[i] = names[i];
	}
	f->q = tst_query_of(f->st, f->pd, paths, NPRIMS, NULL);
	f->col = tst_tok(f->pd, "wide");
}

static void teardown(fixture *f)
{
	tst_wait_ok(f->st, ovstage_release_query(f->st, f->q));
	ck_assert_int_eq(ovstage_destroy_instance(f->st), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_shutdown(), OVSTAGE_OK);
}

/* Writes the whole column at ordinal o (values = o); returns the enqueue status (op waited for). */
static ovstage_api_status_t write_full(fixture *f, uint64_t o)
{
	static _Thread_local float src[NPRIMS * LANES];
	for (int i = 0; i < NPRIMS * LANES; i++)
		src[i] = (float)o;
	tst_tensor tt;
	ovstage_write_data_t w = tst_wdata(&tt, src, NPRIMS, kDLFloat, 32, LANES);
	ovstage_enqueue_result_t r = ovstage_write_attribute(f->st, f->q, tst_attr(f->col), o, w, OVSTAGE_PRIM_MODE_UPSERT);
	if (r.status == OVSTAGE_OK)
		tst_wait_ok(f->st, r);
	return r.status;
}

static void seal_to(fixture *f, uint64_t n)
{
	ovstage_write_floor_desc_t d = { n, OVSTAGE_SCOPE_ALL, NULL, 0 };
	tst_wait_ok(f->st, ovstage_advance_write_floor(f->st, &d));
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- the statistics call ------------------------------------------------------------------------ */

START_TEST(test_memory_stats_args)
{
	init_with(4096, 2);
	fixture f;
	setup(&f);
	ovstage_ext_memory_stats_t m;
	ck_assert_int_eq(ovstage_ext_get_memory_stats(NULL, &m), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(tst_last_error(), "instance"));
	ck_assert_int_eq(ovstage_ext_get_memory_stats(f.st, NULL), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(tst_last_error(), "out"));
	ovstage_instance_t fake = *f.st;
	fake.vtable = NULL;
	ck_assert_int_eq(ovstage_ext_get_memory_stats(&fake, &m), OVSTAGE_ERROR_INVALID_ARGUMENT);
	teardown(&f);
}
END_TEST

START_TEST(test_memory_stats_counts)
{
	init_with(64, 2);
	fixture f;
	setup(&f);
	ovstage_ext_memory_stats_t m0, m1, m2;
	ck_assert_int_eq(ovstage_ext_get_memory_stats(f.st, &m0), OVSTAGE_OK);
	ck_assert_uint_eq(m0.unsealed_bytes, 0);
	ck_assert_uint_eq(m0.unsealed_limit, (uint64_t)64 << 20);
	ck_assert_int_eq(write_full(&f, 1), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_ext_get_memory_stats(f.st, &m1), OVSTAGE_OK);
	size_t col = (size_t)NPRIMS * LANES * sizeof(float);
	ck_assert_uint_ge(m1.unsealed_bytes, col);
	ck_assert_uint_ge(m1.buffer_bytes, m0.buffer_bytes + col);
	ck_assert_uint_ge(m1.buffers, m0.buffers + 1);
	seal_to(&f, 1);
	ck_assert_int_eq(ovstage_ext_get_memory_stats(f.st, &m2), OVSTAGE_OK);
	ck_assert_uint_eq(m2.unsealed_bytes, 0);
	ck_assert_uint_ge(m2.buffer_bytes, col); /* the sealed version keeps the buffer */
	ck_assert_uint_le(m2.pooled_bytes, m2.buffer_bytes);
	teardown(&f);
}
END_TEST

/* ---- back-pressure: a lagging producer behind a fast one ---------------------------------------- */

typedef struct pc_state {
	fixture *f;
	uint64_t steps;                /* ordinals 1..steps, split between the producers */
	_Atomic uint64_t done_mask[4]; /* bit o - 1: ordinal o written (steps <= 256) */
	_Atomic bool fast_blocked;     /* the fast producer met QUEUE_FULL at least once */
	_Atomic bool failed;           /* a producer gave up */
	_Atomic int finished;          /* producers finished */
} pc_state;

typedef struct producer_arg {
	pc_state *s;
	uint64_t first; /* 1 (fast) or 2 (lagging) */
} producer_arg;

static void *producer(void *p)
{
	producer_arg *a = p;
	pc_state *s = a->s;
	if (a->first == 2) /* the lagging one starts once the fast one filled the budget */
		while (!atomic_load(&s->fast_blocked) && !atomic_load(&s->failed))
			sched_yield();
	for (uint64_t o = a->first; o <= s->steps && !atomic_load(&s->failed); o += 2) {
		double give_up = now_s() + 20.0;
		ovstage_api_status_t r;
		while ((r = write_full(s->f, o)) == OVSTAGE_ERROR_QUEUE_FULL) {
			if (a->first == 1)
				atomic_store(&s->fast_blocked, true);
			if (now_s() > give_up) {
				atomic_store(&s->failed, true);
				break;
			}
			struct timespec ts = { 0, 200000 };
			nanosleep(&ts, NULL);
		}
		if (r != OVSTAGE_OK)
			break;
		atomic_fetch_or(&s->done_mask[(o - 1) / 64], (uint64_t)1 << ((o - 1) % 64));
	}
	atomic_fetch_add(&s->finished, 1);
	return NULL;
}

START_TEST(test_backpressure_lagging_producer)
{
	init_with(1, 2); /* 1 MiB: four writes fill it */
	fixture f;
	setup(&f);
	pc_state s = { .f = &f, .steps = 64 };
	producer_arg fast = { &s, 1 }, slow = { &s, 2 };
	pthread_t t1, t2;
	ck_assert_int_eq(pthread_create(&t1, NULL, producer, &fast), 0);
	ck_assert_int_eq(pthread_create(&t2, NULL, producer, &slow), 0);
	/* The sealer: advance over the longest prefix of written ordinals. */
	uint64_t sealed = 0;
	while (sealed < s.steps && !atomic_load(&s.failed)) {
		uint64_t t = sealed;
		while (t < s.steps && (atomic_load(&s.done_mask[t / 64]) >> (t % 64) & 1))
			t++;
		if (t > sealed) {
			seal_to(&f, t);
			sealed = t;
		} else if (atomic_load(&s.finished) == 2) {
			break;
		} else {
			sched_yield();
		}
	}
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	ck_assert_msg(!atomic_load(&s.failed), "a producer was refused for 20 s: back-pressure deadlocked (%s)",
		      tst_last_error());
	ck_assert_uint_eq(sealed, s.steps);
	teardown(&f);
}
END_TEST

/* Over the budget, admission is decided per column written: a column that is never sealed does not
 * refuse the gap filler of another. */
START_TEST(test_backpressure_per_column)
{
	init_with(1, 2);
	fixture f;
	setup(&f);
	ovx_token_t a = tst_tok(f.pd, "a"), b = tst_tok(f.pd, "b");
	f.col = a;
	ck_assert_int_eq(write_full(&f, 1), OVSTAGE_OK);
	ovstage_write_floor_desc_t inc = { 1, OVSTAGE_SCOPE_INCLUDE, &a, 1 };
	tst_wait_ok(f.st, ovstage_advance_write_floor(f.st, &inc)); /* a sealed through 1 */
	f.col = b; /* b is written and never sealed, until the budget is full */
	uint64_t o = 1;
	while (write_full(&f, o) == OVSTAGE_OK)
		ck_assert_uint_lt(++o, 20);
	ck_assert_ptr_nonnull(strstr(tst_last_error(), "advance_write_floor"));
	f.col = a;
	ck_assert_msg(write_full(&f, 2) == OVSTAGE_OK, "a's floor + 1 refused: %s", tst_last_error());
	ck_assert_int_eq(write_full(&f, 3), OVSTAGE_ERROR_QUEUE_FULL); /* not a gap of a any more */
	teardown(&f);
}
END_TEST

/* ---- a seal that catches up holds a bounded number of versions ---------------------------------- */

static _Atomic int64_t g_versions0, g_versions_max;

static void count_versions(void)
{
	int64_t v, b, by;
	ovs_store_counters(&v, &b, &by);
	v -= atomic_load(&g_versions0);
	int64_t m = atomic_load(&g_versions_max);
	while (v > m && !atomic_compare_exchange_weak(&g_versions_max, &m, v))
		;
}

START_TEST(test_seal_catchup_bounded)
{
	enum { RETENTION = 4, ORDINALS = 96 };
	init_with(4096, RETENTION);
	fixture f;
	setup(&f);
	int64_t v0, b0, by0;
	ovs_store_counters(&v0, &b0, &by0);
	atomic_store(&g_versions0, v0);
	for (uint64_t o = 1; o <= ORDINALS; o++)
		ck_assert_int_eq(write_full(&f, o), OVSTAGE_OK);
	ovs_seal_set_test_hook(count_versions);
	seal_to(&f, ORDINALS); /* one advance over all of them */
	ovs_seal_set_test_hook(NULL);
	/* Live versions during the seal: the retained ones, those built since the last publication and
	 * those retired by it (at most a batch each), and the one being chained. */
	uint32_t batch = RETENTION / 2;
	int64_t bound = RETENTION + 2 * (int64_t)batch + 2;
	ck_assert_msg(atomic_load(&g_versions_max) <= bound, "a seal over %d ordinals held %lld versions (bound %lld)",
		      ORDINALS, (long long)atomic_load(&g_versions_max), (long long)bound);
	ck_assert_int_ge(atomic_load(&g_versions_max), RETENTION); /* the hook ran */
	teardown(&f);
}
END_TEST

/* ---- racing first writes: rows without holes, later writes replace the column whole ------------- */

typedef struct race_arg {
	fixture *f;
	uint64_t ordinal;
	pthread_barrier_t *go;
} race_arg;

static void *race_writer(void *p)
{
	race_arg *a = p;
	pthread_barrier_wait(a->go);
	ck_assert_int_eq(write_full(a->f, a->ordinal), OVSTAGE_OK);
	return NULL;
}

START_TEST(test_racing_first_writes_dense_rows)
{
	init_with(4096, 2);
	fixture f;
	setup(&f);
	ovs_stage *stg = ovs_stage_of(f.st->context);
	char name[32];
	for (int round = 0; round < 20; round++) {
		snprintf(name, sizeof name, "race%d", round);
		f.col = tst_tok(f.pd, name);
		uint64_t base = (uint64_t)round * 4;
		pthread_barrier_t go;
		pthread_barrier_init(&go, NULL, 2);
		race_arg a = { &f, base + 1, &go }, b = { &f, base + 2, &go };
		pthread_t ta, tb;
		ck_assert_int_eq(pthread_create(&ta, NULL, race_writer, &a), 0);
		ck_assert_int_eq(pthread_create(&tb, NULL, race_writer, &b), 0);
		pthread_join(ta, NULL);
		pthread_join(tb, NULL);
		pthread_barrier_destroy(&go);
		ovs_column *c = ovs_column_find(&stg->store, f.col);
		ck_assert_ptr_nonnull(c);
		uint32_t rows = atomic_load(&c->nrows);
		ck_assert_msg(rows == NPRIMS, "round %d: %u rows for %d prims (holes)", round, rows, NPRIMS);
		/* A later dense write through the same query replaces the column whole: its seal copies
		 * no chunk. */
		seal_to(&f, base + 2);
		ovs_chunk_stats_t s0, s1;
		ovs_chunk_stats(&s0);
		ck_assert_int_eq(write_full(&f, base + 3), OVSTAGE_OK);
		seal_to(&f, base + 3);
		ovs_chunk_stats(&s1);
		ck_assert_uint_eq(s1.copied, s0.copied);
	}
	teardown(&f);
}
END_TEST

static Suite *memory_suite(void)
{
	Suite *s = suite_create("memory");
	TCase *tc = tcase_create("memory");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_memory_stats_args);
	tcase_add_test(tc, test_memory_stats_counts);
	tcase_add_test(tc, test_backpressure_lagging_producer);
	tcase_add_test(tc, test_backpressure_per_column);
	tcase_add_test(tc, test_seal_catchup_bounded);
	tcase_add_test(tc, test_racing_first_writes_dense_rows);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(memory_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
