/*
 * check_read_compat.c — reads as programs written for ovstage 0.2.1 expect them (issue 11, items 1, 2
 * and 6): a query whose rows form one ascending block reads as a sub-view without index maps; range
 * reads are answered from change membership whatever the retention; execution-time failures that
 * 0.2.1 documents with a specific status report it from wait_op and the fetches.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ovstage/ovstage.h>
#include <ovx/path_dictionary/path_dictionary.h>

#include "stage_test_util.h"

typedef struct fixture {
	ovstage_instance_t *st;
	path_dictionary_instance_t *pd;
	ovstage_query_handle_t all;       /* /W/P0 .. /W/P{n-1} */
	ovstage_query_handle_t one[32];   /* one query per prim */
	size_t n;
	ovx_token_t t;                    /* "v", float32 */
} fixture;

static void setup_n(fixture *f, size_t n)
{
	memset(f, 0, sizeof *f);
	ck_assert_int_le(n, 32);
	ovstage_instance_desc_t d = { "check_read_compat" };
	ck_assert_int_eq(ovstage_create_instance(&d, &f->st), OVSTAGE_OK);
	f->pd = ovstage_get_path_dictionary(f->st);
	char names[32][16];
	const char *pp[32];
	for (size_t i = 0; i < n; i++) {
		snprintf(names[i], sizeof names[i], "/W/P%zu", i);
		pp[i] = names[i];
		f->one[i] = tst_query_of(f->st, f->pd, &pp[i], 1, NULL);
	}
	f->all = tst_query_of(f->st, f->pd, pp, n, NULL);
	f->n = n;
	f->t = tst_tok(f->pd, "v");
}

static void teardown(fixture *f)
{
	for (size_t i = 0; i < f->n; i++)
		tst_wait_ok(f->st, ovstage_release_query(f->st, f->one[i]));
	tst_wait_ok(f->st, ovstage_release_query(f->st, f->all));
	ck_assert_int_eq(ovstage_destroy_instance(f->st), OVSTAGE_OK);
}

/* Writes vals[0..n) through q at ordinal ord and waits (the tensor lives until the op is done). */
static void write_q(fixture *f, ovstage_query_handle_t q, uint64_t ord, float *vals, int64_t n)
{
	tst_tensor tt;
	ovstage_write_data_t w = tst_wdata(&tt, vals, n, kDLFloat, 32, 1);
	tst_wait_ok(f->st, ovstage_write_attribute(f->st, q, tst_attr(f->t), ord, w, OVSTAGE_PRIM_MODE_UPSERT));
}

static void write_one(fixture *f, size_t i, uint64_t ord, float v)
{
	write_q(f, f->one[i], ord, &v, 1);
}

static void seal(fixture *f, uint64_t n)
{
	ovstage_write_floor_desc_t d = { n, OVSTAGE_SCOPE_ALL, NULL, 0 };
	tst_wait_ok(f->st, ovstage_advance_write_floor(f->st, &d));
}

/* What one read gave: per query position, the value or a tombstone; the groups' raw layouts. */
typedef struct result {
	ovstage_api_status_t call;   /* read_attributes' status */
	ovstage_api_status_t wait;   /* wait_op's return */
	size_t nfailed;              /* failed op ids wait_op listed */
	ovstage_api_status_t fetch;  /* the first fetch's status */
	char msg[1200];              /* the failure's message */
	int values, tombstones;      /* groups */
	uint64_t ordinal;            /* of the last value group */
	float val[32];
	bool present[32], deleted[32];
	const void *data0;           /* the first value group's data pointer, shape, maps */
	int64_t shape0;
	const uint32_t *dmap0, *pmap0;
	uint32_t poff0;
} result;

static void read_q(fixture *f, ovstage_query_handle_t q, ovstage_ordinal_range_t rg, result *r)
{
	memset(r, 0, sizeof *r);
	ovstage_read_handle_t rh;
	ovstage_enqueue_result_t e = ovstage_read_attributes(f->st, q, &f->t, 1, rg, &rh);
	r->call = e.status;
	if (e.status != OVSTAGE_OK) {
		snprintf(r->msg, sizeof r->msg, "%s", tst_last_error());
		return;
	}
	ovstage_op_wait_result_t w;
	r->wait = ovstage_wait_op(f->st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &w);
	r->nfailed = w.error_op_id_count;
	if (r->nfailed) {
		ovx_string_t m = ovstage_get_last_op_error(f->st, w.error_op_ids[0]);
		snprintf(r->msg, sizeof r->msg, "%.*s", (int)m.length, m.ptr ? m.ptr : "");
	}
	ck_assert_int_eq(ovstage_release_op(f->st, e.op_index), OVSTAGE_OK);
	ovstage_read_group_t g;
	ovstage_api_status_t s;
	bool first = true;
	while ((s = ovstage_fetch_read_next(f->st, rh, OVSTAGE_TIMEOUT_INFINITE, &g)) == OVSTAGE_OK) {
		for (uint32_t i = 0; i < g.prims.count; i++) {
			uint32_t p = g.prims.index_map ? g.prims.index_map[i] : g.prims.offset + i;
			ck_assert_uint_lt(p, 32);
			if (g.is_delete) {
				r->deleted[p] = true;
				continue;
			}
			uint32_t row = g.data.index_map ? g.data.index_map[i] : i;
			ck_assert_int_lt(row, g.data.tensors[0].shape[0]);
			r->val[p] = ((const float *)g.data.tensors[0].data)[row];
			r->present[p] = true;
		}
		if (g.is_delete) {
			r->tombstones++;
		} else {
			r->values++;
			r->ordinal = g.ordinal;
			if (first) {
				r->data0 = g.data.tensors[0].data;
				r->shape0 = g.data.tensors[0].shape[0];
				r->dmap0 = g.data.index_map;
				r->pmap0 = g.prims.index_map;
				r->poff0 = g.prims.offset;
				first = false;
			}
		}
		ck_assert_int_eq(ovstage_release_group(f->st, &g), OVSTAGE_OK);
	}
	if (s != OVSTAGE_ERROR_END_OF_ITERATION || r->fetch == OVSTAGE_OK)
		r->fetch = s;
	tst_wait_ok(f->st, ovstage_release_read(f->st, rh));
}

static ovstage_ordinal_range_t latest(uint64_t n)
{
	return (ovstage_ordinal_range_t){ 0, n, false };
}

static ovstage_ordinal_range_t span(uint64_t a, uint64_t b)
{
	return (ovstage_ordinal_range_t){ a, b, true };
}

/* ---- item 2: a contiguous ascending selection reads as a sub-view ---------------------------- */

/* authoring-hierarchy's reads: a 17-row column read through one-prim queries gives, for each, a
 * tensor of shape 1 whose data is that prim's row (no index map); a block of three consecutive prims
 * gives shape 3 at its first row, prims by offset; a selection that is not one ascending block keeps
 * the index maps. */
START_TEST(test_block_selection_is_a_subview)
{
	fixture f;
	setup_n(&f, 17);
	float v[17];
	for (int i = 0; i < 17; i++)
		v[i] = 100.f + (float)i;
	write_q(&f, f.all, 1, v, 17);
	seal(&f, 1);
	result whole;
	read_q(&f, f.all, latest(1), &whole);
	ck_assert_int_eq(whole.values, 1);
	ck_assert_int_eq(whole.shape0, 17);
	ck_assert_ptr_null(whole.dmap0);
	const float *base = whole.data0;
	for (size_t k = 0; k < 17; k++) {
		result r;
		read_q(&f, f.one[k], latest(1), &r);
		ck_assert_int_eq(r.values, 1);
		ck_assert_int_eq(r.shape0, 1);          /* was 17, with data.index_map = [k] */
		ck_assert_ptr_null(r.dmap0);
		ck_assert_ptr_null(r.pmap0);
		ck_assert_uint_eq(r.poff0, 0);
		ck_assert_ptr_eq(r.data0, base + k);     /* a view of the same memory: zero copy */
		ck_assert_float_eq(*(const float *)r.data0, 100.f + (float)k);
	}
	/* /W/P5, /W/P6, /W/P7: rows 5..7 */
	const char *three[] = { "/W/P5", "/W/P6", "/W/P7" };
	ovstage_query_handle_t q3 = tst_query_of(f.st, f.pd, three, 3, NULL);
	result r;
	read_q(&f, q3, latest(1), &r);
	ck_assert_int_eq(r.shape0, 3);
	ck_assert_ptr_eq(r.data0, base + 5);
	ck_assert_ptr_null(r.dmap0);
	ck_assert_ptr_null(r.pmap0);
	ck_assert(r.present[0] && r.present[1] && r.present[2]);
	ck_assert_float_eq(r.val[2], 107.f);
	tst_wait_ok(f.st, ovstage_release_query(f.st, q3));
	/* rows 7, 5: not ascending, keeps the data index map (the whole run) */
	const char *rev[] = { "/W/P7", "/W/P5" };
	ovstage_query_handle_t q2 = tst_query_of(f.st, f.pd, rev, 2, NULL);
	read_q(&f, q2, latest(1), &r);
	ck_assert_ptr_nonnull(r.dmap0);
	ck_assert_int_eq(r.shape0, 17);
	ck_assert_float_eq(r.val[0], 107.f);
	ck_assert_float_eq(r.val[1], 105.f);
	tst_wait_ok(f.st, ovstage_release_query(f.st, q2));
	/* rows 2, 4: ascending but not one block: index map */
	const char *gap[] = { "/W/P2", "/W/P4" };
	ovstage_query_handle_t qg = tst_query_of(f.st, f.pd, gap, 2, NULL);
	read_q(&f, qg, latest(1), &r);
	ck_assert_ptr_nonnull(r.dmap0);
	ck_assert_float_eq(r.val[1], 104.f);
	tst_wait_ok(f.st, ovstage_release_query(f.st, qg));
	teardown(&f);
}
END_TEST

/* A range read whose changed rows are one block, selected from the middle of the query: the data is
 * a sub-view (no data index map), the prims an offset into the query. */
START_TEST(test_range_block_is_a_subview)
{
	fixture f;
	setup_n(&f, 6);
	float v[6] = { 0, 1, 2, 3, 4, 5 };
	write_q(&f, f.all, 1, v, 6);
	seal(&f, 1);
	write_one(&f, 2, 2, 20.f);
	write_one(&f, 3, 2, 30.f);
	seal(&f, 2);
	result r;
	read_q(&f, f.all, span(2, 2), &r);
	ck_assert_int_eq(r.values, 1);
	ck_assert_int_eq(r.shape0, 2);
	ck_assert_ptr_null(r.dmap0);
	ck_assert_ptr_null(r.pmap0);
	ck_assert_uint_eq(r.poff0, 2);
	ck_assert(!r.present[0] && !r.present[1] && r.present[2] && r.present[3] && !r.present[4]);
	ck_assert_float_eq(r.val[3], 30.f);
	teardown(&f);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("read_compat");
	TCase *tc = tcase_create("read");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_block_selection_is_a_subview);
	tcase_add_test(tc, test_range_block_is_a_subview);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
