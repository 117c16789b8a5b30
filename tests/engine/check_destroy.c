/*
 * check_destroy.c — ovstage_destroy_instance with things left behind (issue 11, item 5).
 *
 * Destroy completes what is in flight and releases what holds no caller-visible data — op ids
 * (waited or not), queries, reads and ordinal queries — with one warning on the log naming what
 * was left, and returns OK; every receipt slot is given back to the process scheduler. It still
 * refuses, with a message naming each, while a read group, a map or a query result is held (memory
 * the caller may still be touching); the instance then stays usable and a retry after releasing
 * them succeeds.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ovstage/ovstage.h>
#include <ovx/path_dictionary/path_dictionary.h>

#include "jobs.h"
#include "runtime.h"
#include "stage_test_util.h"

/* ---- a log collector -------------------------------------------------------------------------- */

static pthread_mutex_t g_log_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_warn[4][1024]; /* the warnings delivered, in order */
static int g_nwarn;

static void collect(ovstage_log_severity_t sev, double ts, ovx_string_t msg, void *user)
{
	(void)ts;
	(void)user;
	char text[1024];
	snprintf(text, sizeof text, "%.*s", (int)msg.length, msg.ptr ? msg.ptr : "");
	if (sev != OVSTAGE_LOG_WARNING || !strstr(text, "destroy"))
		return;
	pthread_mutex_lock(&g_log_lock);
	if (g_nwarn < 4)
		memcpy(g_warn[g_nwarn], text, sizeof text);
	g_nwarn++;
	pthread_mutex_unlock(&g_log_lock);
}

/* The runtime is held across each test (so the scheduler survives the destroy and its receipt
 * count can be compared), with the collector installed. */
static void setup(void)
{
	ck_assert_int_eq(ovstage_initialize(NULL), OVSTAGE_OK);
	g_nwarn = 0;
	ck_assert_int_eq(ovstage_set_log_callback(OVSTAGE_LOG_WARNING, NULL, collect, NULL), OVSTAGE_OK);
}

static void teardown(void)
{
	ck_assert_int_eq(ovstage_set_log_callback(OVSTAGE_LOG_NONE, NULL, NULL, NULL), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_shutdown(), OVSTAGE_OK);
}

static uint64_t receipts_live(void)
{
	jobs_stats s;
	jobs_sched_stats(ovs_runtime_sched(), &s);
	return s.receipts_live;
}

/* ---- a small stage ---------------------------------------------------------------------------- */

typedef struct fix {
	ovstage_instance_t *st;
	path_dictionary_instance_t *pd;
	ovx_primpath_list_t list;
	ovstage_query_handle_t q;
	ovx_token_t a;
	float vals[4];
	tst_tensor tt;
} fix;

static void open_fix(fix *f)
{
	memset(f, 0, sizeof *f);
	ovstage_instance_desc_t d = { "destroy-test" };
	ck_assert_int_eq(ovstage_create_instance(&d, &f->st), OVSTAGE_OK);
	f->pd = ovstage_get_path_dictionary(f->st);
	f->a = tst_tok(f->pd, "a");
	const char *paths[] = { "/W/A", "/W/B", "/W/C", "/W/D" };
	f->q = tst_query_of(f->st, f->pd, paths, 4, &f->list);
	for (int i = 0; i < 4; i++)
		f->vals[i] = (float)i;
	ovstage_write_data_t w = tst_wdata(&f->tt, f->vals, 4, kDLFloat, 32, 1);
	tst_wait_ok(f->st, ovstage_write_attribute(f->st, f->q, tst_attr(f->a), 1, w, OVSTAGE_PRIM_MODE_UPSERT));
	ovstage_write_floor_desc_t fd = { 1, OVSTAGE_SCOPE_ALL, NULL, 0 };
	tst_wait_ok(f->st, ovstage_advance_write_floor(f->st, &fd));
}

static void flush(void)
{
	ck_assert_int_eq(ovstage_flush_log(OVSTAGE_TIMEOUT_INFINITE), OVSTAGE_OK);
}

static void destroy_ok(fix *f)
{
	ck_assert_msg(ovstage_destroy_instance(f->st) == OVSTAGE_OK, "destroy: %s", tst_last_error());
	f->st = NULL;
}

/* A destroy that must be refused: its message must name `what` (and `what2` unless NULL); the
 * instance stays usable. */
static void destroy_refused(fix *f, const char *what, const char *what2)
{
	ck_assert_int_eq(ovstage_destroy_instance(f->st), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(tst_last_error(), what), "message \"%s\" does not name %s", tst_last_error(), what);
	ck_assert_msg(!what2 || strstr(tst_last_error(), what2), "message \"%s\" does not name %s", tst_last_error(),
		      what2);
	/* still usable: a write and a seal at the next ordinal */
	static uint64_t ord = 10;
	ord++;
	ovstage_write_data_t w = tst_wdata(&f->tt, f->vals, 4, kDLFloat, 32, 1);
	tst_wait_ok(f->st, ovstage_write_attribute(f->st, f->q, tst_attr(f->a), ord, w, OVSTAGE_PRIM_MODE_UPSERT));
	ovstage_write_floor_desc_t fd = { ord, OVSTAGE_SCOPE_ALL, NULL, 0 };
	tst_wait_ok(f->st, ovstage_advance_write_floor(f->st, &fd));
}

/* ---- what destroy releases -------------------------------------------------------------------- */

/* NVIDIA's producer-consumer ends like this: an ordinal query fetched and released, its op id never
 * waited nor released. */
START_TEST(test_unreleased_ordinal_query_op)
{
	uint64_t base = receipts_live();
	fix f;
	open_fix(&f);
	ovstage_ordinal_query_handle_t o;
	ovx_string_or_token_t global = { 0, { NULL, 0 } };
	ovstage_enqueue_result_t e = ovstage_get_attribute_write_floor(f.st, global, &o);
	ck_assert_int_eq(e.status, OVSTAGE_OK);
	ovstage_ordinal_t floor = 0;
	ck_assert_int_eq(ovstage_fetch_ordinal(f.st, o, OVSTAGE_TIMEOUT_INFINITE, &floor), OVSTAGE_OK);
	ck_assert_uint_eq(floor, 1);
	ovstage_enqueue_result_t rel = ovstage_release_ordinal_query(f.st, o);
	ck_assert_int_eq(rel.status, OVSTAGE_OK);
	tst_wait_ok(f.st, ovstage_release_query(f.st, f.q));
	path_dictionary_release_path_list_reference(f.pd, f.list);
	destroy_ok(&f);
	flush();
	ck_assert_int_eq(g_nwarn, 1);
	ck_assert_msg(strstr(g_warn[0], "2 op ids"), "%s", g_warn[0]);
	ck_assert_uint_eq(receipts_live(), base);
}
END_TEST

/* Op ids (waited and not), a query, a read with no group fetched and an ordinal query, all left:
 * one warning names each count. */
START_TEST(test_releases_everything_without_caller_data)
{
	uint64_t base = receipts_live();
	fix f;
	open_fix(&f);
	ovstage_write_data_t w = tst_wdata(&f.tt, f.vals, 4, kDLFloat, 32, 1);
	ovstage_enqueue_result_t w1 = ovstage_write_attribute(f.st, f.q, tst_attr(f.a), 2, w, OVSTAGE_PRIM_MODE_UPSERT);
	ck_assert_int_eq(w1.status, OVSTAGE_OK);
	ovstage_op_wait_result_t wr;
	ck_assert_int_eq(ovstage_wait_op(f.st, w1.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr), OVSTAGE_OK);
	ovstage_read_handle_t r;
	ovstage_ordinal_range_t latest = { 0, 1, false };
	ck_assert_int_eq(ovstage_read_attributes(f.st, f.q, &f.a, 1, latest, &r).status, OVSTAGE_OK);
	ovstage_ordinal_query_handle_t o;
	ck_assert_int_eq(ovstage_get_oldest_preserved_ordinal(f.st, &o).status, OVSTAGE_OK);
	path_dictionary_release_path_list_reference(f.pd, f.list);
	destroy_ok(&f);
	flush();
	ck_assert_int_eq(g_nwarn, 1);
	ck_assert_msg(strstr(g_warn[0], "3 op ids") && strstr(g_warn[0], "1 query") && strstr(g_warn[0], "1 read") &&
			      strstr(g_warn[0], "1 ordinal query"),
		      "%s", g_warn[0]);
	ck_assert_uint_eq(receipts_live(), base);
}
END_TEST

/* A write still running when destroy is called: destroy completes it first. */
START_TEST(test_completes_in_flight)
{
	uint64_t base = receipts_live();
	fix f;
	open_fix(&f);
	enum { N = 1 << 16 };
	const char **paths = malloc(N * sizeof *paths);
	char (*names)[24] = malloc((size_t)N * 24);
	for (int i = 0; i < N; i++) {
		snprintf(names[i], 24, "/Big/P%d", i);
		paths[i] = names[i];
	}
	ovx_primpath_list_t list;
	ovstage_query_handle_t q = tst_query_of(f.st, f.pd, paths, N, &list);
	float *v = calloc(N, sizeof *v);
	tst_tensor tt;
	ovstage_write_data_t w = tst_wdata(&tt, v, N, kDLFloat, 32, 1);
	for (uint64_t ord = 2; ord < 10; ord++)
		ck_assert_int_eq(ovstage_write_attribute(f.st, q, tst_attr(f.a), ord, w, OVSTAGE_PRIM_MODE_UPSERT).status,
				 OVSTAGE_OK);
	ovstage_write_floor_desc_t fd = { 9, OVSTAGE_SCOPE_ALL, NULL, 0 };
	ck_assert_int_eq(ovstage_advance_write_floor(f.st, &fd).status, OVSTAGE_OK);
	path_dictionary_release_path_list_reference(f.pd, list);
	path_dictionary_release_path_list_reference(f.pd, f.list);
	destroy_ok(&f); /* the writes borrow v: destroy must not return before they are done */
	free(v);
	free(names);
	free(paths);
	flush();
	ck_assert_int_eq(g_nwarn, 1);
	ck_assert_msg(strstr(g_warn[0], "9 op ids") && strstr(g_warn[0], "2 queries"), "%s", g_warn[0]);
	ck_assert_uint_eq(receipts_live(), base);
}
END_TEST

/* A clean destroy says nothing. */
START_TEST(test_clean_destroy_is_silent)
{
	fix f;
	open_fix(&f);
	tst_wait_ok(f.st, ovstage_release_query(f.st, f.q));
	path_dictionary_release_path_list_reference(f.pd, f.list);
	destroy_ok(&f);
	flush();
	ck_assert_int_eq(g_nwarn, 0);
}
END_TEST

/* ---- what destroy refuses --------------------------------------------------------------------- */

START_TEST(test_refuses_while_group_held)
{
	fix f;
	open_fix(&f);
	ovstage_read_handle_t r;
	ovstage_ordinal_range_t latest = { 0, 1, false };
	tst_wait_ok(f.st, ovstage_read_attributes(f.st, f.q, &f.a, 1, latest, &r));
	ovstage_read_group_t g;
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, r, OVSTAGE_TIMEOUT_INFINITE, &g), OVSTAGE_OK);
	destroy_refused(&f, "1 read group", NULL);
	/* the group is intact after the refusal */
	ck_assert(((const float *)g.data.tensors[0].data)[3] == 3.f);
	ck_assert_int_eq(ovstage_release_group(f.st, &g), OVSTAGE_OK);
	tst_wait_ok(f.st, ovstage_release_read(f.st, r));
	tst_wait_ok(f.st, ovstage_release_query(f.st, f.q));
	path_dictionary_release_path_list_reference(f.pd, f.list);
	destroy_ok(&f);
	flush();
	ck_assert_int_eq(g_nwarn, 0);
}
END_TEST

START_TEST(test_refuses_while_map_held)
{
	fix f;
	open_fix(&f);
	ovstage_map_desc_t md;
	memset(&md, 0, sizeof md);
	md.attribute = tst_attr(tst_tok(f.pd, "m"));
	md.dtype.code = kDLFloat;
	md.dtype.bits = 32;
	md.dtype.lanes = 1;
	ovstage_map_handle_t m;
	tst_wait_ok(f.st, ovstage_map_attribute(f.st, f.q, &md, 50, NULL, 0, &m));
	ovstage_map_group_t mg;
	ck_assert_int_eq(ovstage_fetch_map_next(f.st, m, OVSTAGE_TIMEOUT_INFINITE, &mg), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_destroy_instance(f.st), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(tst_last_error(), "1 map"), "%s", tst_last_error());
	((float *)mg.data.tensors[0].data)[0] = 5.f; /* the mapped buffer is still ours */
	ovstage_cuda_sync_t none = { 0, 0 };
	tst_wait_ok(f.st, ovstage_unmap_attribute(f.st, m, none));
	tst_wait_ok(f.st, ovstage_release_query(f.st, f.q));
	path_dictionary_release_path_list_reference(f.pd, f.list);
	destroy_ok(&f);
}
END_TEST

START_TEST(test_refuses_while_query_result_held_and_names_each)
{
	fix f;
	open_fix(&f);
	ovstage_query_result_t res;
	ck_assert_int_eq(ovstage_fetch_query_result(f.st, f.q, OVSTAGE_TIMEOUT_INFINITE, &res), OVSTAGE_OK);
	ovstage_read_handle_t r;
	ovstage_ordinal_range_t latest = { 0, 1, false };
	tst_wait_ok(f.st, ovstage_read_attributes(f.st, f.q, &f.a, 1, latest, &r));
	ovstage_read_group_t g;
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, r, OVSTAGE_TIMEOUT_INFINITE, &g), OVSTAGE_OK);
	destroy_refused(&f, "1 query result", "1 read group");
	ck_assert_int_eq(res.total_prim_count, 4); /* still readable */
	ck_assert_int_eq(ovstage_release_query_result(f.st, &res), OVSTAGE_OK);
	destroy_refused(&f, "1 read group", NULL);
	ck_assert_int_eq(ovstage_release_group(f.st, &g), OVSTAGE_OK);
	/* the read, the query and an unwaited op id are left: released with a warning */
	ovstage_write_data_t w = tst_wdata(&f.tt, f.vals, 4, kDLFloat, 32, 1);
	ck_assert_int_eq(ovstage_write_attribute(f.st, f.q, tst_attr(f.a), 90, w, OVSTAGE_PRIM_MODE_UPSERT).status,
			 OVSTAGE_OK);
	path_dictionary_release_path_list_reference(f.pd, f.list);
	destroy_ok(&f);
	flush();
	ck_assert_int_eq(g_nwarn, 1);
	ck_assert_msg(strstr(g_warn[0], "1 op id") && strstr(g_warn[0], "1 query") && strstr(g_warn[0], "1 read"),
		      "%s", g_warn[0]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("destroy");
	TCase *tc = tcase_create("destroy");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_unreleased_ordinal_query_op);
	tcase_add_test(tc, test_releases_everything_without_caller_data);
	tcase_add_test(tc, test_completes_in_flight);
	tcase_add_test(tc, test_clean_destroy_is_silent);
	tcase_add_test(tc, test_refuses_while_group_held);
	tcase_add_test(tc, test_refuses_while_map_held);
	tcase_add_test(tc, test_refuses_while_query_result_held_and_names_each);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
