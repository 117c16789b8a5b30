/*
 * check_handles.c — instance-scoped handles (queries, query results, reads, read groups, ordinal
 * queries, maps) are accepted only by the instance that issued them, and only while live: a handle
 * of another instance, a released one or a forged value is OVSTAGE_ERROR_INVALID_HANDLE at the call,
 * with a message naming the value, and changes nothing. Two instances built by the same sequence of
 * calls would hand out equal handle numbers if handles were plain per-instance counters; each handle
 * of A is passed to every call of B that takes it, and B's own handles are checked intact afterwards.
 */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ovstage/ovstage.h>
#include <ovx/path_dictionary/path_dictionary.h>

#include "stage_test_util.h"

/* One instance with a live handle of every instance-scoped kind. */
typedef struct side {
	ovstage_instance_t *st;               /* the instance */
	path_dictionary_instance_t *pd;       /* its path dictionary */
	ovx_primpath_list_t list;             /* the query's path list (/W/P0, /W/P1) */
	ovx_token_t a, b, c;                  /* columns: a, b written at 1 and sealed; c mapped at 2 */
	ovstage_query_handle_t q;             /* path-list query over the two prims */
	ovstage_query_result_t res;           /* a fetched result of q (unreleased) */
	ovstage_read_handle_t r;              /* latest read of a and b: two groups */
	ovstage_read_group_t g;               /* the read's first group (unreleased) */
	ovstage_ordinal_query_handle_t o;     /* oldest-preserved ordinal query */
	ovstage_map_handle_t m;               /* map session of c at ordinal 2 */
	ovstage_map_group_t mg;               /* its group (fetched only when fetch_map is set) */
	float base;                           /* values written: a = base + i, b = base + 10 + i */
} side;

static const ovstage_cuda_sync_t no_sync = { 0, 0 };

static ovstage_ordinal_range_t latest(uint64_t n)
{
	ovstage_ordinal_range_t r = { 0, n, false };
	return r;
}

static ovstage_map_desc_t map_desc(ovx_token_t t)
{
	ovstage_map_desc_t d;
	memset(&d, 0, sizeof d);
	d.attribute = tst_attr(t);
	d.dtype.code = kDLFloat;
	d.dtype.bits = 32;
	d.dtype.lanes = 1;
	d.prim_mode = OVSTAGE_PRIM_MODE_UPSERT;
	return d;
}

static void write_col(side *s, ovx_token_t t, float v0, float v1)
{
	static float vals[2];
	vals[0] = v0;
	vals[1] = v1;
	tst_tensor tt;
	ovstage_write_data_t w = tst_wdata(&tt, vals, 2, kDLFloat, 32, 1);
	tst_wait_ok(s->st, ovstage_write_attribute(s->st, s->q, tst_attr(t), 1, w, OVSTAGE_PRIM_MODE_UPSERT));
}

/* Builds a side by a fixed sequence of calls (the same for every side, so plain per-instance
 * counters would give every side the same handle numbers). */
static void side_open(side *s, const char *name, float base, bool fetch_map)
{
	memset(s, 0, sizeof *s);
	s->base = base;
	ovstage_instance_desc_t d = { name };
	ck_assert_int_eq(ovstage_create_instance(&d, &s->st), OVSTAGE_OK);
	s->pd = ovstage_get_path_dictionary(s->st);
	ck_assert_ptr_nonnull(s->pd);
	s->a = tst_tok(s->pd, "a");
	s->b = tst_tok(s->pd, "b");
	s->c = tst_tok(s->pd, "c");
	const char *paths[] = { "/W/P0", "/W/P1" };
	s->q = tst_query_of(s->st, s->pd, paths, 2, &s->list);
	write_col(s, s->a, base, base + 1);
	write_col(s, s->b, base + 10, base + 11);
	ovstage_write_floor_desc_t fd = { 1, OVSTAGE_SCOPE_ALL, NULL, 0 };
	tst_wait_ok(s->st, ovstage_advance_write_floor(s->st, &fd));
	ck_assert_int_eq(ovstage_fetch_query_result(s->st, s->q, OVSTAGE_TIMEOUT_INFINITE, &s->res), OVSTAGE_OK);
	ovx_token_t ab[2] = { s->a, s->b };
	tst_wait_ok(s->st, ovstage_read_attributes(s->st, s->q, ab, 2, latest(1), &s->r));
	ck_assert_int_eq(ovstage_fetch_read_next(s->st, s->r, OVSTAGE_TIMEOUT_INFINITE, &s->g), OVSTAGE_OK);
	tst_wait_ok(s->st, ovstage_get_oldest_preserved_ordinal(s->st, &s->o));
	ovstage_map_desc_t md = map_desc(s->c);
	tst_wait_ok(s->st, ovstage_map_attribute(s->st, s->q, &md, 2, NULL, 0, &s->m));
	if (fetch_map)
		ck_assert_int_eq(ovstage_fetch_map_next(s->st, s->m, OVSTAGE_TIMEOUT_INFINITE, &s->mg), OVSTAGE_OK);
}

/* The values a group of this side must hold (a or b, prims 0 and 1). */
static void check_group(const side *s, const ovstage_read_group_t *g)
{
	ck_assert(g->attribute == s->a || g->attribute == s->b);
	float want = s->base + (g->attribute == s->b ? 10.f : 0.f);
	ck_assert_uint_eq(g->data.tensor_count, 1);
	const float *v = g->data.tensors[0].data;
	for (uint32_t i = 0; i < g->prims.count; i++) {
		uint32_t e = g->prims.index_map ? g->prims.index_map[i] : g->prims.offset + i;
		uint32_t row = g->data.index_map ? g->data.index_map[i] : i;
		ck_assert_float_eq(v[row], want + (float)e);
	}
}

/* The call failed with INVALID_HANDLE and its message names the value. */
#define ck_invalid(status, value)                                                                          \
	do {                                                                                               \
		ovstage_api_status_t s_ = (status);                                                        \
		char v_[32];                                                                               \
		snprintf(v_, sizeof v_, "%" PRIu64, (uint64_t)(value));                                    \
		ck_assert_msg(s_ == OVSTAGE_ERROR_INVALID_HANDLE, "%s: status %d (%s), want INVALID_HANDLE", \
			      #status, s_, tst_last_error());                                               \
		ck_assert_msg(strstr(tst_last_error(), v_), "%s: message \"%s\" does not name %s", #status, \
			      tst_last_error(), v_);                                                       \
	} while (0)

/* Every call that takes a handle, with `src`'s handles, on instance `dst` (tokens are dst's). */
static void use_foreign(side *dst, const side *src)
{
	ovstage_instance_t *st = dst->st;
	ovstage_query_result_t qr;
	ck_invalid(ovstage_fetch_query_result(st, src->q, 0, &qr), src->q);
	ovx_token_t ab[2] = { dst->a, dst->b };
	ovstage_read_handle_t rh = 77;
	ck_invalid(ovstage_read_attributes(st, src->q, ab, 2, latest(1), &rh).status, src->q);
	ck_assert_uint_eq(rh, OVSTAGE_INVALID_READ_HANDLE);
	float vals[2] = { -1, -1 };
	tst_tensor tt;
	ovstage_write_data_t w = tst_wdata(&tt, vals, 2, kDLFloat, 32, 1);
	ck_invalid(ovstage_write_attribute(st, src->q, tst_attr(dst->a), 5, w, OVSTAGE_PRIM_MODE_UPSERT).status,
		   src->q);
	ovstage_attribute_write_t aw = { tst_attr(dst->b), w };
	ck_invalid(ovstage_write_attributes(st, src->q, &aw, 1, 5, OVSTAGE_PRIM_MODE_UPSERT).status, src->q);
	ovx_string_or_token_t del = tst_attr(dst->a);
	ck_invalid(ovstage_delete_attributes(st, src->q, &del, 1, 5).status, src->q);
	ck_invalid(ovstage_delete_attributes(st, src->q, NULL, 0, 5).status, src->q);
	ovstage_map_desc_t md = map_desc(dst->c);
	ovstage_map_handle_t mh;
	ck_invalid(ovstage_map_attribute(st, src->q, &md, 5, NULL, 0, &mh).status, src->q);
	ovstage_read_group_t g;
	ck_invalid(ovstage_fetch_read_next(st, src->r, 0, &g), src->r);
	ovstage_ordinal_t ord;
	ck_invalid(ovstage_fetch_ordinal(st, src->o, 0, &ord), src->o);
	ovstage_map_group_t mg;
	ck_invalid(ovstage_fetch_map_next(st, src->m, 0, &mg), src->m);
	ck_invalid(ovstage_unmap_group(st, src->m, &src->mg, no_sync).status, src->m);
	/* the releases last: each would destroy dst's object of the same number */
	ck_invalid(ovstage_release_group(st, &src->g), src->g.read_group_id);
	ck_invalid(ovstage_release_query_result(st, &src->res), src->res.query_result_id);
	ck_invalid(ovstage_release_read(st, src->r).status, src->r);
	ck_invalid(ovstage_release_ordinal_query(st, src->o).status, src->o);
	ck_invalid(ovstage_unmap_attribute(st, src->m, no_sync).status, src->m);
	ck_invalid(ovstage_release_query(st, src->q).status, src->q);
}

/* Every handle of the side still works, exactly as if nothing had been tried on it; then releases
 * them all and destroys the instance (which refuses while any handle is live). */
static void check_intact_and_close(side *s, bool map_fetched)
{
	ovstage_instance_t *st = s->st;
	/* the fetched group: still mapped memory with its values (ASan: not freed) */
	check_group(s, &s->g);
	/* the read: its second group is still there */
	ovstage_read_group_t g2;
	ck_assert_int_eq(ovstage_fetch_read_next(st, s->r, OVSTAGE_TIMEOUT_INFINITE, &g2), OVSTAGE_OK);
	check_group(s, &g2);
	ck_assert(g2.attribute != s->g.attribute);
	ovstage_read_group_t g3;
	ck_assert_int_eq(ovstage_fetch_read_next(st, s->r, 0, &g3), OVSTAGE_ERROR_END_OF_ITERATION);
	/* the query and its result */
	ovstage_query_result_t qr;
	ck_assert_int_eq(ovstage_fetch_query_result(st, s->q, 0, &qr), OVSTAGE_OK);
	ck_assert_uint_eq(qr.all_handle, s->q);
	ck_assert_uint_eq(qr.total_prim_count, 2);
	ck_assert_int_eq(ovstage_release_query_result(st, &qr), OVSTAGE_OK);
	ck_assert_uint_eq(s->res.total_prim_count, 2);
	ck_assert_int_eq(ovstage_release_query_result(st, &s->res), OVSTAGE_OK);
	/* the ordinal query */
	ovstage_ordinal_t ord = 99;
	ck_assert_int_eq(ovstage_fetch_ordinal(st, s->o, 0, &ord), OVSTAGE_OK);
	/* the map: its one group is still unfetched (or still ours), and unmapping commits it */
	if (!map_fetched)
		ck_assert_int_eq(ovstage_fetch_map_next(st, s->m, OVSTAGE_TIMEOUT_INFINITE, &s->mg), OVSTAGE_OK);
	ovstage_map_group_t mg2;
	ck_assert_int_eq(ovstage_fetch_map_next(st, s->m, 0, &mg2), OVSTAGE_ERROR_END_OF_ITERATION);
	ck_assert_uint_eq(s->mg.data.tensor_count, 1);
	float *dst = s->mg.data.tensors[0].data;
	for (uint32_t i = 0; i < s->mg.prims.count; i++)
		dst[i] = s->base + 100.f + (float)(s->mg.prims.offset + i);
	tst_wait_ok(st, ovstage_unmap_group(st, s->m, &s->mg, no_sync));
	tst_wait_ok(st, ovstage_unmap_attribute(st, s->m, no_sync));
	ck_assert_int_eq(ovstage_release_group(st, &s->g), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_release_group(st, &g2), OVSTAGE_OK);
	tst_wait_ok(st, ovstage_release_read(st, s->r));
	tst_wait_ok(st, ovstage_release_ordinal_query(st, s->o));
	/* the map committed this side's values into c */
	ovstage_write_floor_desc_t fd = { 2, OVSTAGE_SCOPE_ALL, NULL, 0 };
	tst_wait_ok(st, ovstage_advance_write_floor(st, &fd));
	ovstage_read_handle_t rh;
	tst_wait_ok(st, ovstage_read_attributes(st, s->q, &s->c, 1, latest(2), &rh));
	ovstage_read_group_t gc;
	int n = 0;
	while (ovstage_fetch_read_next(st, rh, 0, &gc) == OVSTAGE_OK) {
		const float *v = gc.data.tensors[0].data;
		for (uint32_t i = 0; i < gc.prims.count; i++) {
			uint32_t e = gc.prims.index_map ? gc.prims.index_map[i] : gc.prims.offset + i;
			uint32_t row = gc.data.index_map ? gc.data.index_map[i] : i;
			ck_assert_float_eq(v[row], s->base + 100.f + (float)e);
			n++;
		}
		ck_assert_int_eq(ovstage_release_group(st, &gc), OVSTAGE_OK);
	}
	ck_assert_int_eq(n, 2);
	tst_wait_ok(st, ovstage_release_read(st, rh));
	tst_wait_ok(st, ovstage_release_query(st, s->q));
	path_dictionary_release_path_list_reference(s->pd, s->list);
	ck_assert_msg(ovstage_destroy_instance(st) == OVSTAGE_OK, "destroy: %s", tst_last_error());
}

/* ---- another instance's handles -------------------------------------------------------------- */

/* release_group(B, A's group) must not release B's group of the same number: B's group is read
 * before the status is checked, so that a wrong release shows as a use-after-free. */
START_TEST(test_foreign_release_group_keeps_group)
{
	side a, b;
	side_open(&a, "A", 1000.f, true);
	side_open(&b, "B", 2000.f, true);
	ovstage_api_status_t s = ovstage_release_group(b.st, &a.g);
	check_group(&b, &b.g);
	ck_invalid(s, a.g.read_group_id);
	ck_assert_msg(strstr(tst_last_error(), "not issued by this instance"), "%s", tst_last_error());
	check_intact_and_close(&b, true);
	check_intact_and_close(&a, true);
}
END_TEST

START_TEST(test_foreign_handles_rejected)
{
	side a, b;
	side_open(&a, "A", 1000.f, true);
	side_open(&b, "B", 2000.f, false);
	use_foreign(&b, &a);
	check_intact_and_close(&b, false);
	check_intact_and_close(&a, true);
}
END_TEST

/* The same in the other direction, and with both instances' maps fetched. */
START_TEST(test_foreign_handles_rejected_reverse)
{
	side a, b;
	side_open(&a, "A", 1000.f, true);
	side_open(&b, "B", 2000.f, true);
	use_foreign(&a, &b);
	use_foreign(&b, &a);
	check_intact_and_close(&a, true);
	check_intact_and_close(&b, true);
}
END_TEST

/* A handle of a destroyed instance is not accepted by a newer one built the same way. */
START_TEST(test_handles_of_destroyed_instance_rejected)
{
	side a, b;
	side_open(&a, "A", 1000.f, true);
	side old = a;
	check_intact_and_close(&a, true);
	side_open(&b, "B", 2000.f, false);
	use_foreign(&b, &old);
	check_intact_and_close(&b, false);
}
END_TEST

/* ---- released handles ------------------------------------------------------------------------ */

START_TEST(test_stale_handles_rejected)
{
	side s;
	side_open(&s, "S", 1000.f, true);
	ovstage_instance_t *st = s.st;
	side stale = s;
	/* release everything once (this also checks every handle worked) */
	check_group(&s, &s.g);
	ck_assert_int_eq(ovstage_release_group(st, &s.g), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_release_query_result(st, &s.res), OVSTAGE_OK);
	tst_wait_ok(st, ovstage_release_read(st, s.r));
	tst_wait_ok(st, ovstage_release_ordinal_query(st, s.o));
	tst_wait_ok(st, ovstage_unmap_group(st, s.m, &s.mg, no_sync));
	tst_wait_ok(st, ovstage_unmap_attribute(st, s.m, no_sync));
	/* a second query, so that a live query exists next to the stale one */
	const char *paths[] = { "/W/P0", "/W/P1" };
	ovx_primpath_list_t list2;
	ovstage_query_handle_t q2 = tst_query_of(st, s.pd, paths, 2, &list2);
	tst_wait_ok(st, ovstage_release_query(st, s.q));
	ck_assert_uint_ne(q2, s.q);
	/* every call on the released handles, releases (double release) included */
	use_foreign(&s, &stale);
	/* q2 is unaffected */
	ovstage_query_result_t qr;
	ck_assert_int_eq(ovstage_fetch_query_result(st, q2, 0, &qr), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_release_query_result(st, &qr), OVSTAGE_OK);
	ck_invalid(ovstage_release_query_result(st, &qr), qr.query_result_id);
	tst_wait_ok(st, ovstage_release_query(st, q2));
	ck_invalid(ovstage_release_query(st, q2).status, q2);
	ck_assert_msg(strstr(tst_last_error(), "not live"), "%s", tst_last_error());
	path_dictionary_release_path_list_reference(s.pd, list2);
	path_dictionary_release_path_list_reference(s.pd, s.list);
	ck_assert_msg(ovstage_destroy_instance(st) == OVSTAGE_OK, "destroy: %s", tst_last_error());
}
END_TEST

/* ---- forged values --------------------------------------------------------------------------- */

/* Is v one of the side's live handles? */
static bool is_live(const side *s, uint64_t v)
{
	return v == s->q || v == s->r || v == s->o || v == s->m || v == s->g.read_group_id ||
	       v == s->res.query_result_id;
}

/* A side whose handles carry forged values (every other field is the side's own). */
static side forged(const side *s, uint64_t v)
{
	side f = *s;
	f.q = f.r = f.o = f.m = v;
	f.g.read_group_id = v;
	f.res.query_result_id = v;
	return f;
}

START_TEST(test_forged_handles_rejected)
{
	side s;
	side_open(&s, "S", 1000.f, true);
	/* 0 (the invalid handle of every kind), small numbers, values near the live handles, the top */
	uint64_t vals[64 + 6 * 4 + 2];
	size_t n = 0;
	for (uint64_t v = 0; v < 64; v++)
		vals[n++] = v;
	uint64_t live[6] = { s.q, s.r, s.o, s.m, s.g.read_group_id, s.res.query_result_id };
	for (int i = 0; i < 6; i++) {
		vals[n++] = live[i] + 1000;
		vals[n++] = live[i] ^ (UINT64_C(1) << 63);
		vals[n++] = live[i] ^ (UINT64_C(1) << 40);
		vals[n++] = ~live[i];
	}
	vals[n++] = UINT64_MAX;
	vals[n++] = UINT64_MAX - 1;
	for (size_t i = 0; i < n; i++) {
		/* by the handle layout (engine/handles.h) none of these can be a live handle */
		ck_assert_msg(!is_live(&s, vals[i]), "%" PRIu64 " is a live handle", vals[i]);
		side f = forged(&s, vals[i]);
		use_foreign(&s, &f);
	}
	check_intact_and_close(&s, true);
}
END_TEST

/* A handle used as another kind, and an op id used as a handle: rejected, nothing changes. */
START_TEST(test_wrong_kind_rejected)
{
	side s;
	side_open(&s, "S", 1000.f, true);
	uint64_t live[6] = { s.q, s.r, s.o, s.m, s.g.read_group_id, s.res.query_result_id };
	/* each live handle passed as every kind (skipping the value's own kind) */
	for (int i = 0; i < 6; i++) {
		ovstage_query_result_t qr;
		ovstage_read_group_t g;
		ovstage_ordinal_t ord;
		ovstage_map_group_t mg;
		uint64_t v = live[i];
		if (v != s.q)
			ck_invalid(ovstage_fetch_query_result(s.st, v, 0, &qr), v);
		if (v != s.r)
			ck_invalid(ovstage_fetch_read_next(s.st, v, 0, &g), v);
		if (v != s.o)
			ck_invalid(ovstage_fetch_ordinal(s.st, v, 0, &ord), v);
		if (v != s.m)
			ck_invalid(ovstage_fetch_map_next(s.st, v, 0, &mg), v);
		if (v != s.g.read_group_id) {
			ovstage_read_group_t fg = s.g;
			fg.read_group_id = v;
			ck_invalid(ovstage_release_group(s.st, &fg), v);
		}
		if (v != s.res.query_result_id) {
			ovstage_query_result_t fr = s.res;
			fr.query_result_id = v;
			ck_invalid(ovstage_release_query_result(s.st, &fr), v);
		}
		if (v != s.r)
			ck_invalid(ovstage_release_read(s.st, v).status, v);
		if (v != s.o)
			ck_invalid(ovstage_release_ordinal_query(s.st, v).status, v);
		if (v != s.m)
			ck_invalid(ovstage_unmap_attribute(s.st, v, no_sync).status, v);
		if (v != s.q)
			ck_invalid(ovstage_release_query(s.st, v).status, v);
	}
	ck_invalid(ovstage_release_read(s.st, s.q).status, s.q);
	ck_assert_msg(strstr(tst_last_error(), "is a query handle of this instance, not a read handle"), "%s",
		      tst_last_error());
	/* op ids of this instance are not handles (a plausible mix-up: both are uint64) */
	ovstage_ordinal_query_handle_t o2;
	ovstage_enqueue_result_t e = ovstage_get_oldest_preserved_ordinal(s.st, &o2);
	ck_assert_int_eq(e.status, OVSTAGE_OK);
	ck_assert(!is_live(&s, e.op_index) && e.op_index != o2); /* op ids and handles never coincide */
	side f = forged(&s, e.op_index);
	use_foreign(&s, &f);
	tst_wait_ok(s.st, e);
	tst_wait_ok(s.st, ovstage_release_ordinal_query(s.st, o2));
	check_intact_and_close(&s, true);
}
END_TEST

static Suite *handles_suite(void)
{
	Suite *s = suite_create("handles");
	TCase *tc = tcase_create("instance-scoped");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_foreign_release_group_keeps_group);
	tcase_add_test(tc, test_foreign_handles_rejected);
	tcase_add_test(tc, test_foreign_handles_rejected_reverse);
	tcase_add_test(tc, test_handles_of_destroyed_instance_rejected);
	tcase_add_test(tc, test_stale_handles_rejected);
	tcase_add_test(tc, test_forged_handles_rejected);
	tcase_add_test(tc, test_wrong_kind_rejected);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(handles_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
