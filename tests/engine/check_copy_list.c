/*
 * check_copy_list.c — the deferred host copies of engine/store/copy.h (ovs_copy_defer and
 * ovs_copy_flush), alone on a scheduler of our own and through a write of many columns.
 *
 * Invariants checked: every byte of every destination equals its source, nothing is written past a
 * destination's end (the list pads each copy to a cache line in its split space, and that padding
 * must never be copied), and a list fuller than OVS_COPY_BATCH_MAX flushes itself without losing a
 * copy. Both the parallel path (copies adding up to >= 4 MiB, run on a worker) and the serial one
 * (no worker, a small list, a single copy) are covered.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "copy.h"
#include "jobs.h"
#include "stage_test_util.h"

enum { GUARD = 256 };

typedef struct copy_case {
	uint32_t n;              /* copies */
	size_t *len;             /* their sizes */
	unsigned char **src;     /* sources (at odd offsets into src_block) */
	unsigned char **src_block;
	unsigned char **dst;     /* 64-aligned, each followed by GUARD bytes of 0xA5 */
	bool use_worker;         /* run the flush on a worker (parallel path) or with w = NULL */
	uint32_t most_pending;   /* the largest count the list reached (checked on the test's thread) */
	uint32_t left;           /* what the list held after the flush */
} copy_case;

static void case_make(copy_case *c, uint32_t n, size_t max_len, uint64_t seed, bool use_worker)
{
	c->n = n;
	c->use_worker = use_worker;
	c->len = calloc(n, sizeof *c->len);
	c->src = calloc(n, sizeof *c->src);
	c->src_block = calloc(n, sizeof *c->src_block);
	c->dst = calloc(n, sizeof *c->dst);
	uint64_t r = seed;
	for (uint32_t i = 0; i < n; i++) {
		/* sizes of every kind: tiny, odd, around a cache line, up to max_len */
		size_t len = 1 + tst_rnd(&r) % (i % 4 == 0 ? max_len : 200);
		size_t off = tst_rnd(&r) % 17;
		c->len[i] = len;
		c->src_block[i] = malloc(len + off);
		c->src[i] = c->src_block[i] + off;
		for (size_t k = 0; k < len; k++)
			c->src[i][k] = (unsigned char)(tst_rnd(&r) >> 24);
		size_t cap = (len + GUARD + 63) & ~(size_t)63;
		c->dst[i] = aligned_alloc(64, cap);
		ck_assert_ptr_nonnull(c->dst[i]);
		memset(c->dst[i], 0xA5, cap);
	}
}

static void case_check_free(copy_case *c)
{
	ck_assert_uint_le(c->most_pending, OVS_COPY_BATCH_MAX);
	ck_assert_uint_eq(c->left, 0);
	for (uint32_t i = 0; i < c->n; i++) {
		ck_assert_msg(memcmp(c->dst[i], c->src[i], c->len[i]) == 0, "copy %u (%zu bytes) differs", i,
			      c->len[i]);
		for (size_t k = c->len[i]; k < c->len[i] + GUARD; k++)
			ck_assert_msg(c->dst[i][k] == 0xA5, "copy %u (%zu bytes) wrote byte %zu past its end", i,
				      c->len[i], k - c->len[i]);
		free(c->src_block[i]);
		free(c->dst[i]);
	}
	free(c->len);
	free(c->src);
	free(c->src_block);
	free(c->dst);
}

static void run_case_body(jobs_worker *w, copy_case *c)
{
	ovs_copy_batch *b = malloc(sizeof *b);
	b->n = 0;
	c->most_pending = 0;
	for (uint32_t i = 0; i < c->n; i++) {
		ovs_copy_defer(w, b, c->dst[i], c->src[i], c->len[i]);
		c->most_pending = b->n > c->most_pending ? b->n : c->most_pending;
	}
	ovs_copy_defer(w, b, c->dst[0], c->src[0], 0); /* an empty copy is no entry */
	ovs_copy_flush(w, b);
	c->left = b->n;
	free(b);
}

static void case_job(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)run;
	run_case_body(w, arg);
}

/* Runs the case on a worker of a 4-worker scheduler, or on this thread with no worker. */
static void run_case(copy_case *c)
{
	if (!c->use_worker) {
		run_case_body(NULL, c);
		return;
	}
	jobs_config cfg;
	jobs_config_default(&cfg);
	cfg.workers = 4;
	const char *err = NULL;
	jobs_sched *s = jobs_sched_create(&cfg, &err);
	ck_assert_msg(s != NULL, "jobs_sched_create: %s", err ? err : "?");
	jobs_job_desc d = { 0 };
	d.fn = case_job;
	d.arg = c;
	jobs_id id;
	ck_assert_int_eq(jobs_submit(s, &d, &id), JOBS_OK);
	ck_assert_int_eq(jobs_wait(s, id, JOBS_TIMEOUT_INFINITE), JOBS_OK);
	ck_assert_int_eq(jobs_release(s, id), JOBS_OK);
	jobs_sched_destroy(s);
}

/* 300 copies (the list flushes itself at 128 and 256) adding up to well over 4 MiB: parallel. */
START_TEST(test_many_copies_parallel)
{
	copy_case c;
	case_make(&c, 300, 600000, 0x9e3779b97f4a7c15ull, true);
	run_case(&c);
	case_check_free(&c);
}
END_TEST

/* The same list with no worker: every copy on this thread. */
START_TEST(test_many_copies_serial)
{
	copy_case c;
	case_make(&c, 300, 600000, 0x1234567ull, false);
	run_case(&c);
	case_check_free(&c);
}
END_TEST

/* A few copies that add up to more than 4 MiB, one of them large and odd-sized: the split space
 * cuts inside copies, and the padding after each must not be written. */
START_TEST(test_few_large_copies_parallel)
{
	copy_case c;
	case_make(&c, 9, (size_t)3 << 20, 42, true);
	c.len[0] = ((size_t)5 << 20) + 13; /* make the total certainly parallel */
	free(c.src_block[0]);
	free(c.dst[0]);
	c.src_block[0] = malloc(c.len[0] + 3);
	c.src[0] = c.src_block[0] + 3;
	for (size_t k = 0; k < c.len[0]; k++)
		c.src[0][k] = (unsigned char)(k * 7 + 1);
	size_t cap = (c.len[0] + GUARD + 63) & ~(size_t)63;
	c.dst[0] = aligned_alloc(64, cap);
	memset(c.dst[0], 0xA5, cap);
	run_case(&c);
	case_check_free(&c);
}
END_TEST

/* One copy only: ovs_copy's own path (parallel itself from 4 MiB). */
START_TEST(test_single_copy)
{
	copy_case c;
	case_make(&c, 1, (size_t)6 << 20, 7, true);
	run_case(&c);
	case_check_free(&c);
}
END_TEST

/* Through the API: one write of 12 float32 x 3 columns of 60,000 rows (720,000 bytes each, 8.6 MB in
 * all: a worker runs it and copies the columns in parallel), sealed and read back value by value;
 * then a second write of the same columns with other values, so that a version's buffers come from
 * the pool. */
START_TEST(test_write_many_columns_read_back)
{
	enum { COLS = 12, ROWS = 60000, LANES = 3 };
	ovstage_instance_desc_t desc = { "check_copy_list" };
	ovstage_instance_t *st;
	ck_assert_int_eq(ovstage_create_instance(&desc, &st), OVSTAGE_OK);
	path_dictionary_instance_t *pd = ovstage_get_path_dictionary(st);
	char **names = malloc(ROWS * sizeof *names);
	for (int i = 0; i < ROWS; i++) {
		names[i] = malloc(24);
		snprintf(names[i], 24, "/W/p%d", i);
	}
	ovx_primpath_list_t list;
	ovstage_query_handle_t q = tst_query_of(st, pd, (const char *const *)names, ROWS, &list);
	for (int i = 0; i < ROWS; i++)
		free(names[i]);
	free(names);
	ovx_token_t tok[COLS];
	float *vals[COLS];
	for (int c = 0; c < COLS; c++) {
		char nm[16];
		snprintf(nm, sizeof nm, "col%d", c);
		tok[c] = tst_tok(pd, nm);
		vals[c] = malloc((size_t)ROWS * LANES * sizeof(float));
	}
	for (uint64_t ord = 1; ord <= 2; ord++) {
		tst_tensor tt[COLS];
		ovstage_attribute_write_t ws[COLS];
		for (int c = 0; c < COLS; c++) {
			for (int k = 0; k < ROWS * LANES; k++)
				vals[c][k] = (float)(ord * 1000000 + (uint64_t)c * 100000 + (uint64_t)k % 99991);
			memset(&ws[c], 0, sizeof ws[c]);
			ws[c].attribute.token = tok[c];
			ws[c].data = tst_wdata(&tt[c], vals[c], ROWS, kDLFloat, 32, LANES);
		}
		tst_wait_ok(st, ovstage_write_attributes(st, q, ws, COLS, ord, OVSTAGE_PRIM_MODE_UPSERT));
		ovstage_write_floor_desc_t fd = { ord, OVSTAGE_SCOPE_ALL, NULL, 0 };
		tst_wait_ok(st, ovstage_advance_write_floor(st, &fd));
		for (int c = 0; c < COLS; c++)
			memset(vals[c], 0, (size_t)ROWS * LANES * sizeof(float)); /* the stage keeps its own copy */
		ovstage_read_handle_t rh;
		ovstage_ordinal_range_t range = { 0, ord, false };
		ovstage_enqueue_result_t e = ovstage_read_attributes(st, q, tok, COLS, range, &rh);
		tst_wait_ok(st, e);
		ovstage_read_group_t g;
		size_t seen[COLS] = { 0 };
		while (ovstage_fetch_read_next(st, rh, OVSTAGE_TIMEOUT_INFINITE, &g) == OVSTAGE_OK) {
			int c = -1;
			for (int k = 0; k < COLS; k++)
				if (tok[k] == g.attribute)
					c = k;
			ck_assert_int_ge(c, 0);
			ck_assert_uint_eq(g.data.tensor_count, 1);
			const float *d = g.data.tensors[0].data;
			for (uint32_t i = 0; i < g.prims.count; i++) {
				uint32_t prim = g.prims.index_map ? g.prims.index_map[i] : g.prims.offset + i;
				uint32_t row = g.data.index_map ? g.data.index_map[i] : i;
				for (int l = 0; l < LANES; l++) {
					uint64_t k = (uint64_t)prim * LANES + (uint64_t)l;
					float want = (float)(ord * 1000000 + (uint64_t)c * 100000 + k % 99991);
					ck_assert_msg(d[(size_t)row * LANES + (size_t)l] == want,
						      "ordinal %llu column %d prim %u lane %d: %g, want %g",
						      (unsigned long long)ord, c, prim, l,
						      (double)d[(size_t)row * LANES + (size_t)l], (double)want);
				}
			}
			seen[c] += g.prims.count;
			ck_assert_int_eq(ovstage_release_group(st, &g), OVSTAGE_OK);
		}
		for (int c = 0; c < COLS; c++)
			ck_assert_uint_eq(seen[c], ROWS);
		tst_wait_ok(st, ovstage_release_read(st, rh));
	}
	for (int c = 0; c < COLS; c++)
		free(vals[c]);
	tst_wait_ok(st, ovstage_release_query(st, q));
	path_dictionary_release_path_list_reference(pd, list);
	ck_assert_int_eq(ovstage_destroy_instance(st), OVSTAGE_OK);
}
END_TEST

static Suite *copy_list_suite(void)
{
	Suite *s = suite_create("copy_list");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_many_copies_parallel);
	tcase_add_test(tc, test_many_copies_serial);
	tcase_add_test(tc, test_few_large_copies_parallel);
	tcase_add_test(tc, test_single_copy);
	tcase_add_test(tc, test_write_many_columns_read_back);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(copy_list_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
