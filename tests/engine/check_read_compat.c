/*
 * check_read_compat.c — reads as programs written for ovstage 0.2.1 expect them (issue 11, items 1, 2
 * and 6): a query whose rows form one ascending block reads as a sub-view without index maps; range
 * reads are answered from change membership whatever the retention; execution-time failures that
 * 0.2.1 documents with a specific status report it from wait_op and the fetches.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ovstage/ovstage.h>
#include <ovstage/ovstage_ext.h>
#include <ovx/path_dictionary/path_dictionary.h>

#include "api.h"
#include "column.h"
#include "filter_gate.h"
#include "stage.h"
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
	char names[32][24];
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

/* ---- item 1: range reads beyond the retention window ----------------------------------------- */

/* NVIDIA's producer-consumer with default settings (retention 2): ticks 1..3, a catch-up [1, 3],
 * ticks 4..6 (5 deletes S2 whole), a catch-up [4, 6] lagging three sealed ordinals. */
START_TEST(test_producer_consumer_lagging_consumer)
{
	fixture f;
	setup_n(&f, 4);
	static const int sub[6][2] = { { 0, 1 }, { 1, 2 }, { 2, 0 }, { 3, 0 }, { -1, -1 }, { 1, 3 } };
	result r;
	for (int tick = 1; tick <= 6; tick++) {
		if (tick == 5)
			tst_wait_ok(f.st, ovstage_delete_attributes(f.st, f.one[2], NULL, 0, 5));
		else
			for (int k = 0; k < 2; k++)
				write_one(&f, (size_t)sub[tick - 1][k], (uint64_t)tick, 10.f * (float)tick + (float)sub[tick - 1][k]);
		seal(&f, (uint64_t)tick);
		if (tick == 3) {
			read_q(&f, f.all, span(1, 3), &r);
			ck_assert_int_eq(r.call, OVSTAGE_OK);
			ck_assert_int_eq(r.nfailed, 0);
			ck_assert_int_eq(r.values, 1);
			ck_assert_int_eq(r.tombstones, 0);
			ck_assert_uint_eq(r.ordinal, 3);
			ck_assert(r.present[0] && r.present[1] && r.present[2] && !r.present[3]);
			ck_assert_float_eq(r.val[0], 30.f);
			ck_assert_float_eq(r.val[1], 21.f);
			ck_assert_float_eq(r.val[2], 32.f);
		}
	}
	/* ordinal 4's version left retention (5 and 6 are kept): answered from the last changes */
	read_q(&f, f.all, span(4, 6), &r);
	ck_assert_msg(r.call == OVSTAGE_OK && r.nfailed == 0, "[4, 6]: %d %zu %s", r.call, r.nfailed, r.msg);
	ck_assert_int_eq(r.values, 1);
	ck_assert_int_eq(r.tombstones, 1);
	ck_assert_uint_eq(r.ordinal, 6);
	ck_assert(r.present[0] && r.present[1] && !r.present[2] && r.present[3]);
	ck_assert(r.deleted[2]);
	ck_assert_float_eq(r.val[0], 40.f);
	ck_assert_float_eq(r.val[1], 61.f);
	ck_assert_float_eq(r.val[3], 63.f);
	/* a consumer that saw nothing: [1, 6] is every change, values as of 6 */
	read_q(&f, f.all, span(1, 6), &r);
	ck_assert_msg(r.call == OVSTAGE_OK && r.nfailed == 0, "[1, 6]: %s", r.msg);
	ck_assert(r.present[0] && r.present[1] && r.deleted[2] && r.present[3]);
	/* from 0 as well */
	read_q(&f, f.all, span(0, 6), &r);
	ck_assert_msg(r.call == OVSTAGE_OK && r.nfailed == 0, "[0, 6]: %s", r.msg);
	ck_assert(r.present[0] && r.present[1] && r.deleted[2] && r.present[3]);
	/* [6, 6]: S1 and S3 only */
	read_q(&f, f.all, span(6, 6), &r);
	ck_assert(!r.present[0] && r.present[1] && !r.deleted[2] && r.present[3]);
	teardown(&f);
}
END_TEST

/* The range's end older than every retained version: answered as 0.2.1 does (payloads of the
 * newest version, OUT_OF_RANGE for a selected row that changed after the end), and exact wherever
 * the retained versions decide membership. Retention 2; versions at 1..6:
 *   P0 changed at 1 only; P1 at 2 only; P2 at 3 and 6; P3 at 5 only; P4 at 1 and 6. */
START_TEST(test_range_end_older_than_retention)
{
	fixture f;
	setup_n(&f, 5);
	write_one(&f, 0, 1, 1.f);
	write_one(&f, 4, 1, 41.f);
	seal(&f, 1);
	write_one(&f, 1, 2, 12.f);
	seal(&f, 2);
	write_one(&f, 2, 3, 23.f);
	seal(&f, 3);
	seal(&f, 4);
	write_one(&f, 3, 5, 35.f);
	seal(&f, 5);
	write_one(&f, 2, 6, 26.f);
	write_one(&f, 4, 6, 46.f);
	seal(&f, 6);
	result r;
	/* P0, P1 over [2, 3]: P1 changed at 2 and not since, P0 before the range */
	const char *p01[] = { "/W/P0", "/W/P1" };
	ovstage_query_handle_t q01 = tst_query_of(f.st, f.pd, p01, 2, NULL);
	read_q(&f, q01, span(2, 3), &r);
	ck_assert_msg(r.call == OVSTAGE_OK && r.nfailed == 0, "[2, 3] over P0, P1: %d %s", r.call, r.msg);
	ck_assert(!r.present[0] && r.present[1]);
	ck_assert_float_eq(r.val[1], 12.f);
	tst_wait_ok(f.st, ovstage_release_query(f.st, q01));
	/* P4 changed at 1 and 6: not in [2, 3] (the oldest retained version, 5, says its last change
	 * before 6 was 1): zero groups, as 0.2.1 */
	read_q(&f, f.one[4], span(2, 3), &r);
	ck_assert_msg(r.call == OVSTAGE_OK && r.nfailed == 0, "[2, 3] over P4: %s", r.msg);
	ck_assert_int_eq(r.values + r.tombstones, 0);
	/* P2 changed at 3 and again at 6: its payload as of 3 is gone: OUT_OF_RANGE, as 0.2.1 */
	read_q(&f, f.one[2], span(2, 3), &r);
	ck_assert_int_eq(r.call, OVSTAGE_OK);
	ck_assert_int_eq(r.nfailed, 1);
	ck_assert_int_eq(r.fetch, OVSTAGE_ERROR_OUT_OF_RANGE);
	ck_assert_msg(strstr(r.msg, "/W/P2") && strstr(r.msg, "again at ordinal 6"), "%s", r.msg);
	/* P3 changed at 5, the oldest retained version: whether it changed in [2, 3] is not known any
	 * more: OUT_OF_RANGE naming it (0.2.1 would exclude it) */
	read_q(&f, f.one[3], span(2, 3), &r);
	ck_assert_int_eq(r.nfailed, 1);
	ck_assert_int_eq(r.fetch, OVSTAGE_ERROR_OUT_OF_RANGE);
	ck_assert_msg(strstr(r.msg, "/W/P3") && strstr(r.msg, "no longer retained"), "%s", r.msg);
	/* the whole query: fails, and nothing is handed out */
	read_q(&f, f.all, span(2, 3), &r);
	ck_assert_int_eq(r.fetch, OVSTAGE_ERROR_OUT_OF_RANGE);
	ck_assert_int_eq(r.values + r.tombstones, 0);
	teardown(&f);
}
END_TEST

/* Full writes (the fold's uniform entry once they leave retention), a column that grows past them,
 * sparse writes into many chunks, deletes: membership from the retained versions and the column's
 * fold of those that left retention equals a model's, over ranges whose end is retained and whose
 * start is anywhere, with 9000 rows (three chunks of the fold, whose directory grows). */
START_TEST(test_last_change_matches_model)
{
	enum { N = 9000 };
	ovstage_instance_t *st;
	ovstage_instance_desc_t d = { "lc_model" };
	ck_assert_int_eq(ovstage_create_instance(&d, &st), OVSTAGE_OK);
	path_dictionary_instance_t *pd = ovstage_get_path_dictionary(st);
	static char names[N][16];
	static const char *pp[N];
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof names[i], "/M/R%d", i);
		pp[i] = names[i];
	}
	ovstage_query_handle_t half = tst_query_of(st, pd, pp, N / 2 + 7, NULL), all = tst_query_of(st, pd, pp, N, NULL);
	ovx_token_t t = tst_tok(pd, "m");
	static float vals[N];
	static uint64_t model[N]; /* last change per row */
	static bool deleted[N];
	uint64_t seed = 12345;
	for (uint64_t ord = 1; ord <= 12; ord++) {
		if (ord == 1 || ord == 4) { /* full write of the first half + 7, then of everything */
			ovstage_query_handle_t q = ord == 1 ? half : all;
			int n = ord == 1 ? N / 2 + 7 : N;
			for (int i = 0; i < n; i++) {
				vals[i] = (float)(ord * 10000 + (uint64_t)i);
				model[i] = ord;
				deleted[i] = false;
			}
			tst_tensor tt;
			ovstage_write_data_t w = tst_wdata(&tt, vals, n, kDLFloat, 32, 1);
			tst_wait_ok(st, ovstage_write_attribute(st, q, tst_attr(t), ord, w, OVSTAGE_PRIM_MODE_UPSERT));
		} else { /* scattered rows of the existing ones: a mask over the whole query */
			int nrows = ord < 4 ? N / 2 + 7 : N;
			static uint64_t mask[(N + 63) / 64];
			memset(mask, 0, sizeof mask);
			for (int k = 0; k < 40; k++) {
				seed = seed * 6364136223846793005ull + 1442695040888963407ull;
				int i = (int)((seed >> 33) % (uint64_t)nrows);
				mask[i / 64] |= 1ull << (i % 64);
				model[i] = ord;
			}
			for (int i = 0; i < N; i++)
				vals[i] = (float)(ord * 10000 + (uint64_t)i);
			if (ord % 3 == 0) { /* delete the selected rows instead */
				for (int i = 0; i < N; i++)
					if (mask[i / 64] >> (i % 64) & 1) {
						ovstage_query_handle_t q1 = tst_query_of(st, pd, &pp[i], 1, NULL);
						tst_wait_ok(st, ovstage_delete_attributes(st, q1, (ovx_string_or_token_t[]){ tst_attr(t) }, 1, ord));
						tst_wait_ok(st, ovstage_release_query(st, q1));
						deleted[i] = true;
					}
			} else {
				for (int i = 0; i < N; i++)
					if (mask[i / 64] >> (i % 64) & 1)
						deleted[i] = false;
				tst_tensor tt;
				ovstage_write_data_t w = tst_wdata(&tt, vals, N, kDLFloat, 32, 1);
				w.mask = mask;
				w.count = N;
				tst_wait_ok(st, ovstage_write_attribute(st, all, tst_attr(t), ord, w, OVSTAGE_PRIM_MODE_UPSERT));
			}
		}
		ovstage_write_floor_desc_t fd = { ord, OVSTAGE_SCOPE_ALL, NULL, 0 };
		tst_wait_ok(st, ovstage_advance_write_floor(st, &fd));
		/* every start against the model, end = ord (retained) */
		for (uint64_t a = 0; a <= ord; a += (ord > 6 ? 3 : 1)) {
			ovstage_read_handle_t rh;
			ovstage_ordinal_range_t rg = { a, ord, true };
			ovstage_enqueue_result_t e = ovstage_read_attributes(st, all, &t, 1, rg, &rh);
			tst_wait_ok(st, e);
			static bool seen[N];
			memset(seen, 0, sizeof seen);
			ovstage_read_group_t g;
			while (ovstage_fetch_read_next(st, rh, OVSTAGE_TIMEOUT_INFINITE, &g) == OVSTAGE_OK) {
				for (uint32_t i = 0; i < g.prims.count; i++) {
					uint32_t p = g.prims.index_map ? g.prims.index_map[i] : g.prims.offset + i;
					ck_assert(!seen[p]);
					seen[p] = true;
					ck_assert_msg(g.is_delete == deleted[p], "row %u at [%llu, %llu]", p,
						      (unsigned long long)a, (unsigned long long)ord);
					if (!g.is_delete) {
						uint32_t row = g.data.index_map ? g.data.index_map[i] : i;
						float want = (float)(model[p] * 10000 + p);
						ck_assert_float_eq(((const float *)g.data.tensors[0].data)[row], want);
					}
				}
				ck_assert_int_eq(ovstage_release_group(st, &g), OVSTAGE_OK);
			}
			for (int p = 0; p < N; p++)
				ck_assert_msg(seen[p] == (model[p] && model[p] >= a), "row %d last changed at %llu, range [%llu, %llu]: %s",
					      p, (unsigned long long)model[p], (unsigned long long)a, (unsigned long long)ord,
					      seen[p] ? "selected" : "not selected");
			tst_wait_ok(st, ovstage_release_read(st, rh));
		}
	}
	tst_wait_ok(st, ovstage_release_query(st, half));
	tst_wait_ok(st, ovstage_release_query(st, all));
	ck_assert_int_eq(ovstage_destroy_instance(st), OVSTAGE_OK);
}
END_TEST

/* Range reads while seals fold versions out of retention: one thread writes a scattered tenth of a
 * 5000-row column at each ordinal n (row r when (7r + n) % 10 == 0, value n) and seals it, until the
 * other has made 40 reads (at least 300 ordinals); that one range-reads [a, b] up to the last
 * sealed ordinal meanwhile. Each read gives exactly the rows whose
 * last write as of b is at or after a, with that write's value, or OUT_OF_RANGE (b's version left
 * retention before the read pinned, and a selected row changed again); never anything else — also
 * when the fold moved past the read's chain while it ran (then it pins again). */
enum { CR_ROWS = 5000, CR_MIN_ORDS = 300, CR_MAX_ORDS = 20000, CR_MIN_READS = 40 };

typedef struct conc_read {
	ovstage_instance_t *st;
	ovstage_query_handle_t q;
	ovx_token_t t;
	_Atomic uint64_t sealed;
	_Atomic bool done;
	_Atomic int ok_reads, oor_reads;
} conc_read;

/* The last ordinal <= b that wrote row r (0: none). */
static uint64_t cr_last_write(uint32_t r, uint64_t b)
{
	for (uint64_t n = b; n >= 1 && n + 10 > b; n--)
		if ((7u * r + n) % 10 == 0)
			return n;
	return 0;
}

static void *cr_reader(void *arg)
{
	conc_read *c = arg;
	static bool seen[CR_ROWS];
	uint64_t k = 0;
	while (!atomic_load_explicit(&c->done, memory_order_acquire)) { /* pairs with the writer's release */
		uint64_t b = atomic_load_explicit(&c->sealed, memory_order_acquire); /* [1, b] is sealed */
		if (b < 2)
			continue;
		uint64_t a = 1 + (k++ * 7) % b; /* any start, the frontier included */
		ovstage_read_handle_t rh;
		ovstage_ordinal_range_t rg = { a, b, true };
		ovstage_enqueue_result_t e = ovstage_read_attributes(c->st, c->q, &c->t, 1, rg, &rh);
		ck_assert_int_eq(e.status, OVSTAGE_OK);
		ovstage_op_wait_result_t w;
		ovstage_api_status_t ws = ovstage_wait_op(c->st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &w);
		ck_assert_int_eq(ovstage_release_op(c->st, e.op_index), OVSTAGE_OK);
		ovstage_read_group_t g;
		if (ws != OVSTAGE_OK) {
			ck_assert_int_eq(ws, OVSTAGE_ERROR_OUT_OF_RANGE);
			ck_assert_int_eq(ovstage_fetch_read_next(c->st, rh, OVSTAGE_TIMEOUT_INFINITE, &g),
					 OVSTAGE_ERROR_OUT_OF_RANGE);
			atomic_fetch_add_explicit(&c->oor_reads, 1, memory_order_relaxed); /* progress counts */
		} else {
			memset(seen, 0, sizeof seen);
			while (ovstage_fetch_read_next(c->st, rh, OVSTAGE_TIMEOUT_INFINITE, &g) == OVSTAGE_OK) {
				ck_assert(!g.is_delete);
				for (uint32_t i = 0; i < g.prims.count; i++) {
					uint32_t p = g.prims.index_map ? g.prims.index_map[i] : g.prims.offset + i;
					uint32_t row = g.data.index_map ? g.data.index_map[i] : i;
					ck_assert(!seen[p]);
					seen[p] = true;
					ck_assert_float_eq(((const float *)g.data.tensors[0].data)[row],
							   (float)cr_last_write(p, b));
				}
				ck_assert_int_eq(ovstage_release_group(c->st, &g), OVSTAGE_OK);
			}
			for (uint32_t p = 0; p < CR_ROWS; p++)
				ck_assert_msg(seen[p] == (cr_last_write(p, b) >= a), "row %u, range [%llu, %llu]: %s", p,
					      (unsigned long long)a, (unsigned long long)b, seen[p] ? "selected" : "not selected");
			atomic_fetch_add_explicit(&c->ok_reads, 1, memory_order_relaxed);
		}
		tst_wait_ok(c->st, ovstage_release_read(c->st, rh));
	}
	return NULL;
}

START_TEST(test_range_reads_while_folding)
{
	conc_read c;
	memset(&c, 0, sizeof c);
	ovstage_instance_desc_t d = { "conc_read" };
	ck_assert_int_eq(ovstage_create_instance(&d, &c.st), OVSTAGE_OK);
	path_dictionary_instance_t *pd = ovstage_get_path_dictionary(c.st);
	static char names[CR_ROWS][16];
	static const char *pp[CR_ROWS];
	for (int i = 0; i < CR_ROWS; i++) {
		snprintf(names[i], sizeof names[i], "/C/R%d", i);
		pp[i] = names[i];
	}
	c.q = tst_query_of(c.st, pd, pp, CR_ROWS, NULL);
	c.t = tst_tok(pd, "cr");
	static float vals[CR_ROWS];
	static uint64_t mask[(CR_ROWS + 63) / 64];
	atomic_init(&c.sealed, 0);
	atomic_init(&c.done, false);
	atomic_init(&c.ok_reads, 0);
	atomic_init(&c.oor_reads, 0);
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, cr_reader, &c), 0);
	/* the writer goes on until the reader has read often enough, one of them answered (however the
	 * threads are scheduled: on 2 busy cores the reader may not run for the first thousands of
	 * ordinals); past CR_MAX_ORDS it stops writing and waits for the reads, of a column that holds
	 * still then */
	for (uint64_t n = 1;; n++) {
		int ok = atomic_load_explicit(&c.ok_reads, memory_order_relaxed); /* relaxed: progress counts */
		if (n > CR_MIN_ORDS && ok > 0 && ok + atomic_load_explicit(&c.oor_reads, memory_order_relaxed) >= CR_MIN_READS)
			break;
		if (n > CR_MAX_ORDS) {
			sched_yield();
			continue;
		}
		memset(mask, 0, sizeof mask);
		for (uint32_t r = 0; r < CR_ROWS; r++) {
			vals[r] = (float)n;
			if ((7u * r + n) % 10 == 0)
				mask[r / 64] |= 1ull << (r % 64);
		}
		tst_tensor tt;
		ovstage_write_data_t w = tst_wdata(&tt, vals, CR_ROWS, kDLFloat, 32, 1);
		w.mask = mask;
		w.count = CR_ROWS;
		tst_wait_ok(c.st, ovstage_write_attribute(c.st, c.q, tst_attr(c.t), n, w, OVSTAGE_PRIM_MODE_UPSERT));
		ovstage_write_floor_desc_t fd = { n, OVSTAGE_SCOPE_ALL, NULL, 0 };
		tst_wait_ok(c.st, ovstage_advance_write_floor(c.st, &fd));
		atomic_store_explicit(&c.sealed, n, memory_order_release); /* after the seal completed */
	}
	atomic_store_explicit(&c.done, true, memory_order_release);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_int_gt(atomic_load_explicit(&c.ok_reads, memory_order_relaxed), 0); /* after the join */
	tst_wait_ok(c.st, ovstage_release_query(c.st, c.q));
	ck_assert_int_eq(ovstage_destroy_instance(c.st), OVSTAGE_OK);
}
END_TEST

/* Range reads racing with the folds of change sets that left retention (docs/store.md): one thread
 * writes and seals ordinals 1..FR_ORDS of a FR_ROWS-row column — at ordinal n the rows with
 * (7r + n) % 10 == 0, a block of whole 4096-row chunks plus a partial one (a run: folded per chunk
 * and per row), and at 1 and every 50th ordinal every row (a full write) — while two readers range-read:
 * one without pause (it folds before it pins, or pins the sets another fold is taking), one in
 * bursts, pausing for more than OVS_LC_PENDING_SETS (64) seals between them, so that the seals'
 * fold job folds meanwhile. Every read gives exactly the rows last written in [a, b] with that
 * write's value, or OUT_OF_RANGE where b left retention before the read pinned (as in
 * test_range_reads_while_folding). Run under ThreadSanitizer by the tsan build. */
enum { FR_ROWS = 4 * 4096 + 300, FR_ORDS = 400, FR_CHUNKS = FR_ROWS / 4096 };

static bool fr_written(uint32_t r, uint64_t n)
{
	if (n == 1 || n % 50 == 0 || (7u * r + n) % 10 == 0)
		return true;
	uint32_t s = (uint32_t)((n * 2654435761u) % (FR_CHUNKS - 1)) * 4096u; /* chunk-aligned start */
	uint32_t len = 4096u * (uint32_t)(1 + n % 2) + (uint32_t)(n % 3) * 100u;
	return r >= s && r < s + len;
}

/* The last ordinal <= b that wrote row r (every row is written at least every 10 ordinals). */
static uint64_t fr_last(uint32_t r, uint64_t b)
{
	for (uint64_t n = b; n >= 1 && n + 10 > b; n--)
		if (fr_written(r, n))
			return n;
	return 0;
}

typedef struct fold_race {
	ovstage_instance_t *st;
	ovstage_query_handle_t q;
	ovx_token_t t;
	uint32_t rows;                        /* FR_ROWS, or PL_ROWS */
	uint64_t ords;                        /* ordinals written */
	bool (*written)(uint32_t r, uint64_t n);
	uint64_t (*last)(uint32_t r, uint64_t b);
	_Atomic uint64_t sealed;
	_Atomic bool done;
	_Atomic int reads[2], oor[2];
} fold_race;

/* One range read [a, b] checked against fr_last; false for OUT_OF_RANGE. */
static bool fr_read(fold_race *c, uint64_t a, uint64_t b, bool *seen)
{
	ovstage_read_handle_t rh;
	ovstage_ordinal_range_t rg = { a, b, true };
	ovstage_enqueue_result_t e = ovstage_read_attributes(c->st, c->q, &c->t, 1, rg, &rh);
	ck_assert_int_eq(e.status, OVSTAGE_OK);
	ovstage_op_wait_result_t w;
	ovstage_api_status_t ws = ovstage_wait_op(c->st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &w);
	ck_assert_int_eq(ovstage_release_op(c->st, e.op_index), OVSTAGE_OK);
	ovstage_read_group_t g;
	if (ws != OVSTAGE_OK) {
		ck_assert_int_eq(ws, OVSTAGE_ERROR_OUT_OF_RANGE);
		tst_wait_ok(c->st, ovstage_release_read(c->st, rh));
		return false;
	}
	memset(seen, 0, c->rows * sizeof *seen);
	while (ovstage_fetch_read_next(c->st, rh, OVSTAGE_TIMEOUT_INFINITE, &g) == OVSTAGE_OK) {
		ck_assert(!g.is_delete);
		for (uint32_t i = 0; i < g.prims.count; i++) {
			uint32_t p = g.prims.index_map ? g.prims.index_map[i] : g.prims.offset + i;
			uint32_t row = g.data.index_map ? g.data.index_map[i] : i;
			ck_assert(!seen[p]);
			seen[p] = true;
			ck_assert_float_eq(((const float *)g.data.tensors[0].data)[row], (float)c->last(p, b));
		}
		ck_assert_int_eq(ovstage_release_group(c->st, &g), OVSTAGE_OK);
	}
	for (uint32_t p = 0; p < c->rows; p++)
		ck_assert_msg(seen[p] == (c->last(p, b) >= a), "row %u, range [%llu, %llu]: %s", p, (unsigned long long)a,
			      (unsigned long long)b, seen[p] ? "selected" : "not selected");
	tst_wait_ok(c->st, ovstage_release_read(c->st, rh));
	return true;
}

typedef struct fr_arg {
	fold_race *c;
	int id; /* 0: without pause, 1: in bursts */
} fr_arg;

static void *fr_reader(void *arg)
{
	fr_arg *x = arg;
	fold_race *c = x->c;
	bool *seen = malloc(c->rows * sizeof *seen);
	ck_assert_ptr_nonnull(seen);
	uint64_t k = 0, next = 0;
	while (!atomic_load_explicit(&c->done, memory_order_acquire)) { /* pairs with the writer's release */
		uint64_t b = atomic_load_explicit(&c->sealed, memory_order_acquire); /* [1, b] is sealed */
		if (b < 2 || (x->id == 1 && b < next)) {
			sched_yield();
			continue;
		}
		uint64_t a = 1 + (k++ * 13 + (uint64_t)x->id) % b; /* any start: beyond retention too */
		if (fr_read(c, a, b, seen))
			atomic_fetch_add_explicit(&c->reads[x->id], 1, memory_order_relaxed); /* counted, read after the join */
		else
			atomic_fetch_add_explicit(&c->oor[x->id], 1, memory_order_relaxed);
		if (x->id == 1 && k % 3 == 0)
			next = b + 80; /* a pause of more than 64 seals: the fold job folds meanwhile */
	}
	free(seen);
	return NULL;
}

/* Every third row (from n % 3) at each ordinal, 20,000 of a 60,000-row column: row lists of 80 KB,
 * in buffers of the store's pool (the pooled change sets of lastchange.h: copied by the fold job,
 * or by the seal that cuts their version when the job is late). */
enum { PL_ROWS = 60000, PL_ORDS = 150 };

static bool pl_written(uint32_t r, uint64_t n)
{
	return n == 1 || n % 50 == 0 || r % 3 == n % 3;
}

static uint64_t pl_last(uint32_t r, uint64_t b)
{
	for (uint64_t n = b; n >= 1 && n + 3 > b; n--)
		if (pl_written(r, n))
			return n;
	return 0;
}

/* Whether each reader of c has read (answered or OUT_OF_RANGE). relaxed: progress counts. */
static bool fr_each_tried(fold_race *c)
{
	for (int i = 0; i < 2; i++)
		if (atomic_load_explicit(&c->reads[i], memory_order_relaxed) + atomic_load_explicit(&c->oor[i], memory_order_relaxed) == 0)
			return false;
	return true;
}

/* The writer of a fold race of c->rows rows over at least c->ords ordinals (the names made by the
 * caller). */
static void fold_race_run_on(fold_race *pc, const char *const *pp)
{
	fold_race c = *pc;
	path_dictionary_instance_t *pd = ovstage_get_path_dictionary(c.st);
	c.q = tst_query_of(c.st, pd, pp, c.rows, NULL);
	c.t = tst_tok(pd, "fr");
	float *vals = malloc(c.rows * sizeof *vals);
	uint64_t *mask = malloc((c.rows + 63) / 64 * sizeof *mask);
	ck_assert(vals && mask);
	pthread_t th[2];
	fr_arg args[2] = { { &c, 0 }, { &c, 1 } };
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, fr_reader, &args[i]), 0);
	/* c.ords ordinals, and more until each reader has read while seals ran (on 2 busy cores one may
	 * not have run yet) */
	uint64_t n = 1;
	for (; n <= c.ords || !fr_each_tried(&c); n++) {
		memset(mask, 0, (c.rows + 63) / 64 * sizeof *mask);
		for (uint32_t r = 0; r < c.rows; r++) {
			vals[r] = (float)n;
			if (c.written(r, n))
				mask[r / 64] |= 1ull << (r % 64);
		}
		tst_tensor tt;
		ovstage_write_data_t w = tst_wdata(&tt, vals, c.rows, kDLFloat, 32, 1);
		if (n != 1 && n % 50) { /* else a full write (the first: rows in prim order) */
			w.mask = mask;
			w.count = c.rows;
		}
		tst_wait_ok(c.st, ovstage_write_attribute(c.st, c.q, tst_attr(c.t), n, w, OVSTAGE_PRIM_MODE_UPSERT));
		ovstage_write_floor_desc_t fd = { n, OVSTAGE_SCOPE_ALL, NULL, 0 };
		tst_wait_ok(c.st, ovstage_advance_write_floor(c.st, &fd));
		atomic_store_explicit(&c.sealed, n, memory_order_release); /* after the seal completed */
	}
	/* the last reads see the whole history (the bursty reader's pause may have been pending) */
	uint64_t last = n - 1;
	bool *seen = malloc(c.rows * sizeof *seen);
	for (uint64_t a = 1; a <= last; a += 37)
		ck_assert(fr_read(&c, a, last, seen));
	free(seen);
	/* with retention 1 every read during the seals may have been OUT_OF_RANGE: the unpaused reader
	 * answers in full now that the column holds still */
	while (atomic_load_explicit(&c.reads[0], memory_order_relaxed) + atomic_load_explicit(&c.reads[1], memory_order_relaxed) == 0)
		sched_yield();
	atomic_store_explicit(&c.done, true, memory_order_release);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
	for (int i = 0; i < 2; i++) /* each reader read (with retention 1, often OUT_OF_RANGE) */
		ck_assert_int_gt(c.reads[i] + c.oor[i], 0);
	ck_assert_int_gt(c.reads[0] + c.reads[1], 0);
	free(vals);
	free(mask);
	tst_wait_ok(c.st, ovstage_release_query(c.st, c.q));
	ck_assert_int_eq(ovstage_destroy_instance(c.st), OVSTAGE_OK);
}

/* The race on a fresh stage named `stage` over `rows` prims /<prefix>/R<i>, `ords` ordinals, with
 * the given write pattern and its last-change rule. */
static void race_run(const char *stage, const char *prefix, uint32_t rows, uint64_t ords,
		     bool (*written)(uint32_t, uint64_t), uint64_t (*last)(uint32_t, uint64_t))
{
	fold_race c;
	memset(&c, 0, sizeof c);
	ovstage_instance_desc_t d = { stage };
	ck_assert_int_eq(ovstage_create_instance(&d, &c.st), OVSTAGE_OK);
	char (*names)[16] = malloc(rows * sizeof *names);
	const char **pp = malloc(rows * sizeof *pp);
	ck_assert(names && pp);
	for (uint32_t i = 0; i < rows; i++) {
		snprintf(names[i], sizeof names[i], "/%s/R%u", prefix, i);
		pp[i] = names[i];
	}
	c.rows = rows;
	c.ords = ords;
	c.written = written;
	c.last = last;
	fold_race_run_on(&c, pp);
	free(pp);
	free(names);
}

static void fold_race_run(void)
{
	race_run("fold_race", "F", FR_ROWS, FR_ORDS, fr_written, fr_last);
}

/* The same race over pooled row lists (pl_written), with retention 1 and the default. */
static void pooled_race_run(void)
{
	race_run("pooled_race", "P", PL_ROWS, PL_ORDS, pl_written, pl_last);
}

/* Change sets the sealer folds itself (seal.c, fold_cheap): at ordinal n every row (n == 1 or
 * n % 5 == 0: the fold's column-wide entry) or one block of rows (a run of up to two chunks and a
 * bit), and at every 17th ordinal a scattered tenth instead (a row list: the sealer stops there and
 * leaves it, and what follows, to the fold job or a range read). The same two racing readers as
 * fold_race check every range read against sf_last. */
enum { SF_ROWS = 4 * 4096 + 300, SF_ORDS = 400, SF_CHUNKS = SF_ROWS / 4096 };

static bool sf_written(uint32_t r, uint64_t n)
{
	if (n == 1 || n % 5 == 0)
		return true;
	if (n % 17 == 0)
		return (7u * r + (uint32_t)n) % 10 == 0;
	uint32_t s = (uint32_t)((n * 2654435761u) % (SF_CHUNKS - 1)) * 4096u + (uint32_t)(n % 7) * 37u;
	uint32_t len = 4096u * (uint32_t)(1 + n % 2) + (uint32_t)(n % 3) * 100u;
	return r >= s && r < s + len;
}

/* The last ordinal <= b that wrote row r (every row is written at least every 5 ordinals). */
static uint64_t sf_last(uint32_t r, uint64_t b)
{
	for (uint64_t n = b; n >= 1 && n + 5 > b; n--)
		if (sf_written(r, n))
			return n;
	return 0;
}

START_TEST(test_range_reads_race_seal_folds)
{
	race_run("cheap_race", "C", SF_ROWS, SF_ORDS, sf_written, sf_last);
	ovstage_config_entry_t e = ovstage_config_entry_uint64(OVSTAGE_CONFIG_EXT_RETENTION, 1);
	ovstage_config_t cfg = { &e, 1 };
	ck_assert_int_eq(ovstage_initialize(&cfg), OVSTAGE_OK);
	race_run("cheap_race1", "D", SF_ROWS, SF_ORDS, sf_written, sf_last);
	ck_assert_int_eq(ovstage_shutdown(), OVSTAGE_OK);
}
END_TEST

START_TEST(test_range_reads_race_pooled_lists)
{
	pooled_race_run();
	ovstage_config_entry_t e = ovstage_config_entry_uint64(OVSTAGE_CONFIG_EXT_RETENTION, 1);
	ovstage_config_t cfg = { &e, 1 };
	ck_assert_int_eq(ovstage_initialize(&cfg), OVSTAGE_OK);
	pooled_race_run();
	ck_assert_int_eq(ovstage_shutdown(), OVSTAGE_OK);
}
END_TEST

START_TEST(test_range_reads_race_folds)
{
	fold_race_run();
}
END_TEST

/* The same with retention 1: the version as of b leaves retention at the next seal, and a fold of
 * it and newer sets during a read makes the read pin again (the stale path of lastchange.h). */
START_TEST(test_range_reads_race_folds_retention1)
{
	ovstage_config_entry_t e = ovstage_config_entry_uint64(OVSTAGE_CONFIG_EXT_RETENTION, 1);
	ovstage_config_t cfg = { &e, 1 };
	ck_assert_int_eq(ovstage_initialize(&cfg), OVSTAGE_OK);
	fold_race_run();
	ck_assert_int_eq(ovstage_shutdown(), OVSTAGE_OK);
}
END_TEST

/* Range reads while every seal cuts the version chain (retention 1, tiny seals back to back): a
 * read counts and pins the chain in one walk. It used to count in one walk and pin in a second; a
 * cut between them made it take a reference through the NULL link (TSan's run of the demo in CI:
 * SEGV in ovs_version_ref from ovs_pin_range). Prim i is written at the ordinals of parity i with
 * the ordinal as its value; each answer of [1, b] must be those values as of b, or OUT_OF_RANGE
 * (b's payload left retention and a key changed after b). Checked after the join. */
enum { CUT_ORDS = 3000, CUT_READERS = 3, CUT_MIN_READS = 30 };

typedef struct cut_race {
	fixture f;
	_Atomic uint64_t sealed; /* the writer's last sealed ordinal (release: its seal completed) */
	_Atomic bool done;
	_Atomic int reads, stale, bad;
	_Atomic uint64_t bad_b;  /* the b of the first wrong answer */
} cut_race;

static bool cut_answer_ok(const result *r, uint64_t b)
{
	if (r->call == OVSTAGE_ERROR_OUT_OF_RANGE || r->wait == OVSTAGE_ERROR_OUT_OF_RANGE ||
	    r->fetch == OVSTAGE_ERROR_OUT_OF_RANGE)
		return true;
	if (r->call != OVSTAGE_OK || r->wait != OVSTAGE_OK || r->fetch != OVSTAGE_ERROR_END_OF_ITERATION || r->nfailed)
		return false; /* (read_q keeps END_OF_ITERATION as the fetch status of a complete read) */
	for (uint32_t i = 0; i < 2; i++) {
		uint64_t last = (b % 2 == i) ? b : b - 1; /* the last ordinal <= b of parity i */
		if (!r->present[i] || r->val[i] != (float)last)
			return false;
	}
	return true;
}

static void *cut_reader(void *arg)
{
	cut_race *c = arg;
	while (!atomic_load_explicit(&c->done, memory_order_acquire)) {
		/* acquire: pairs with the writer's release after its seal: [1, b] is sealed */
		uint64_t b = atomic_load_explicit(&c->sealed, memory_order_acquire);
		if (b < 3) {
			sched_yield();
			continue;
		}
		result r;
		read_q(&c->f, c->f.all, span(1, b), &r);
		atomic_fetch_add_explicit(&c->reads, 1, memory_order_relaxed); /* counters: read after the join */
		if (r.call == OVSTAGE_ERROR_OUT_OF_RANGE || r.wait == OVSTAGE_ERROR_OUT_OF_RANGE ||
		    r.fetch == OVSTAGE_ERROR_OUT_OF_RANGE)
			atomic_fetch_add_explicit(&c->stale, 1, memory_order_relaxed);
		if (!cut_answer_ok(&r, b) && atomic_fetch_add_explicit(&c->bad, 1, memory_order_relaxed) == 0)
			atomic_store_explicit(&c->bad_b, b, memory_order_relaxed);
	}
	return NULL;
}

START_TEST(test_range_reads_while_seals_cut_the_chain)
{
	ovstage_config_entry_t e = ovstage_config_entry_uint64(OVSTAGE_CONFIG_EXT_RETENTION, 1);
	ovstage_config_t cfg = { &e, 1 };
	ck_assert_int_eq(ovstage_initialize(&cfg), OVSTAGE_OK);
	cut_race *c = calloc(1, sizeof *c);
	ck_assert_ptr_nonnull(c);
	setup_n(&c->f, 2);
	pthread_t th[CUT_READERS];
	for (int i = 0; i < CUT_READERS; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, cut_reader, c), 0);
	/* CUT_ORDS seals, and more until the readers have read CUT_MIN_READS times while seals ran (on 2
	 * busy cores they may not run during the first thousands) */
	for (uint64_t ord = 1; ord <= CUT_ORDS || atomic_load_explicit(&c->reads, memory_order_relaxed) < CUT_MIN_READS;
	     ord++) {
		write_one(&c->f, ord % 2, ord, (float)ord);
		seal(&c->f, ord);
		atomic_store_explicit(&c->sealed, ord, memory_order_release);
	}
	atomic_store_explicit(&c->done, true, memory_order_release);
	for (int i = 0; i < CUT_READERS; i++)
		pthread_join(th[i], NULL);
	int reads = atomic_load_explicit(&c->reads, memory_order_relaxed);
	int bad = atomic_load_explicit(&c->bad, memory_order_relaxed);
	ck_assert_msg(bad == 0, "%d of %d range reads answered wrong (first at b = %llu)", bad, reads,
		      (unsigned long long)atomic_load_explicit(&c->bad_b, memory_order_relaxed));
	ck_assert_int_ge(reads, CUT_MIN_READS);
	teardown(&c->f);
	free(c);
	ck_assert_int_eq(ovstage_shutdown(), OVSTAGE_OK);
}
END_TEST

/* The stale path, deterministically: with retention 1, a range read [1, 3] pins version 3 (the
 * latest); a hook between its pin and its lookups (on the reading thread) writes and seals
 * ordinals 4 and 5 — every 5th row at each — and range-reads the column once more, which folds
 * the change sets of 3 and 4 that left retention. The first read then finds newer ordinals in the
 * fold for rows none of its pinned sets changed, pins again (the hook runs a second time, then
 * does nothing) and answers from the new pins: OUT_OF_RANGE, since rows written at 1 and 2 changed
 * again at 4 or 5 and their payloads as of 3 are gone. */
enum { ST_ROWS = 1000 };
static ovstage_instance_t *g_st_inst;
static ovstage_query_handle_t g_st_q;
static ovx_token_t g_st_t;
static _Atomic int g_st_calls;

static void st_write_seal(uint64_t n, uint32_t step)
{
	static float vals[ST_ROWS];
	static uint64_t mask[(ST_ROWS + 63) / 64];
	memset(mask, 0, sizeof mask);
	for (uint32_t r = 0; r < ST_ROWS; r++) {
		vals[r] = (float)n;
		if (r % step == n % step)
			mask[r / 64] |= 1ull << (r % 64);
	}
	tst_tensor tt;
	ovstage_write_data_t w = tst_wdata(&tt, vals, ST_ROWS, kDLFloat, 32, 1);
	w.mask = mask;
	w.count = ST_ROWS;
	tst_wait_ok(g_st_inst, ovstage_write_attribute(g_st_inst, g_st_q, tst_attr(g_st_t), n, w, OVSTAGE_PRIM_MODE_UPSERT));
	ovstage_write_floor_desc_t fd = { n, OVSTAGE_SCOPE_ALL, NULL, 0 };
	tst_wait_ok(g_st_inst, ovstage_advance_write_floor(g_st_inst, &fd));
}

static void st_hook(void)
{
	/* relaxed: a count (the hook runs on the reading thread; the test reads it after the read) */
	if (atomic_fetch_add_explicit(&g_st_calls, 1, memory_order_relaxed) != 0)
		return;
	st_write_seal(4, 5);
	st_write_seal(5, 5);
	ovstage_read_handle_t rh; /* folds what left retention before it pins */
	ovstage_ordinal_range_t rg = { 5, 5, true };
	tst_wait_ok(g_st_inst, ovstage_read_attributes(g_st_inst, g_st_q, &g_st_t, 1, rg, &rh));
	tst_wait_ok(g_st_inst, ovstage_release_read(g_st_inst, rh));
}

START_TEST(test_fold_during_read_pins_again)
{
	ovstage_config_entry_t e = ovstage_config_entry_uint64(OVSTAGE_CONFIG_EXT_RETENTION, 1);
	ovstage_config_t cfg = { &e, 1 };
	ck_assert_int_eq(ovstage_initialize(&cfg), OVSTAGE_OK);
	ovstage_instance_desc_t d = { "stale_fold" };
	ck_assert_int_eq(ovstage_create_instance(&d, &g_st_inst), OVSTAGE_OK);
	path_dictionary_instance_t *pd = ovstage_get_path_dictionary(g_st_inst);
	static char names[ST_ROWS][16];
	static const char *pp[ST_ROWS];
	for (int i = 0; i < ST_ROWS; i++) {
		snprintf(names[i], sizeof names[i], "/S/R%d", i);
		pp[i] = names[i];
	}
	g_st_q = tst_query_of(g_st_inst, pd, pp, ST_ROWS, NULL);
	g_st_t = tst_tok(pd, "st");
	for (uint64_t n = 1; n <= 3; n++)
		st_write_seal(n, 1 + (n == 3) * 4); /* every row at 1 and 2, every 5th at 3 */
	atomic_store_explicit(&g_st_calls, 0, memory_order_relaxed);
	ovs_read_set_range_hook(st_hook);
	ovstage_read_handle_t rh;
	ovstage_ordinal_range_t rg = { 1, 3, true };
	ovstage_enqueue_result_t er = ovstage_read_attributes(g_st_inst, g_st_q, &g_st_t, 1, rg, &rh);
	ck_assert_int_eq(er.status, OVSTAGE_OK);
	ovstage_op_wait_result_t w;
	ovstage_api_status_t ws = ovstage_wait_op(g_st_inst, er.op_index, OVSTAGE_TIMEOUT_INFINITE, &w);
	ovs_read_set_range_hook(NULL);
	ck_assert_int_eq(ovstage_release_op(g_st_inst, er.op_index), OVSTAGE_OK);
	ck_assert_int_eq(ws, OVSTAGE_ERROR_OUT_OF_RANGE);
	/* the first read's two pins and the hook's own read */
	ck_assert_int_ge(atomic_load_explicit(&g_st_calls, memory_order_relaxed), 3);
	tst_wait_ok(g_st_inst, ovstage_release_read(g_st_inst, rh));
	tst_wait_ok(g_st_inst, ovstage_release_query(g_st_inst, g_st_q));
	ck_assert_int_eq(ovstage_destroy_instance(g_st_inst), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_shutdown(), OVSTAGE_OK);
}
END_TEST

/* Without range reads, the change sets that left retention are folded by the seals' fold job once
 * OVS_LC_PENDING_SETS of them wait: 400 ordinals of scattered writes (listed rows, not runs) keep
 * the unfolded sets and the memory of change membership (history_bytes: the sets' row lists and
 * the fold table) bounded, and a range read afterwards still sees the whole history. */
START_TEST(test_unread_history_bounded)
{
	enum { HB_ROWS = 20000, HB_ORDS = 400 };
	ovstage_instance_t *st;
	ovstage_instance_desc_t d = { "hist_bound" };
	ck_assert_int_eq(ovstage_create_instance(&d, &st), OVSTAGE_OK);
	path_dictionary_instance_t *pd = ovstage_get_path_dictionary(st);
	static char names[HB_ROWS][16];
	static const char *pp[HB_ROWS];
	for (int i = 0; i < HB_ROWS; i++) {
		snprintf(names[i], sizeof names[i], "/H/R%d", i);
		pp[i] = names[i];
	}
	ovstage_query_handle_t q = tst_query_of(st, pd, pp, HB_ROWS, NULL);
	ovx_token_t t = tst_tok(pd, "hb");
	static float vals[HB_ROWS];
	static uint64_t mask[(HB_ROWS + 63) / 64];
	ovs_store *store = &ovs_stage_of(st->context)->store;
	for (uint64_t n = 1; n <= HB_ORDS + 1; n++) {
		if (n == HB_ORDS + 1) /* the last fold job done: the next seal cuts what it folded */
			for (int k = 0; k < 10000 && atomic_load_explicit(&store->lc_job_busy, memory_order_acquire); k++)
				usleep(1000);
		memset(mask, 0, sizeof mask);
		for (uint32_t r = 0; r < HB_ROWS; r++)
			vals[r] = (float)n;
		for (uint32_t r = (uint32_t)(n % 97); r < HB_ROWS; r += 97) /* every 97th row from n % 97 */
			mask[r / 64] |= 1ull << (r % 64);
		tst_tensor tt;
		ovstage_write_data_t w = tst_wdata(&tt, vals, HB_ROWS, kDLFloat, 32, 1);
		if (n > 1) { /* a full write first */
			w.mask = mask;
			w.count = HB_ROWS;
		}
		tst_wait_ok(st, ovstage_write_attribute(st, q, tst_attr(t), n, w, OVSTAGE_PRIM_MODE_UPSERT));
		ovstage_write_floor_desc_t fd = { n, OVSTAGE_SCOPE_ALL, NULL, 0 };
		tst_wait_ok(st, ovstage_advance_write_floor(st, &fd));
	}
	ovs_column *c = ovs_column_find(store, t);
	ck_assert_ptr_nonnull(c);
	ck_assert_uint_gt(atomic_load_explicit(&c->lcfold.folded, memory_order_acquire), 0); /* the job ran */
	ck_assert_uint_le(c->lcq_n, 2 * OVS_LC_PENDING_SETS);
	/* the table (one 2 MiB slab of chunks and its directory) and at most 2 x 64 sets of 207 rows */
	int64_t bound = (2 << 20) + 4096 + 2 * OVS_LC_PENDING_SETS * (int64_t)(sizeof(ovs_chset) + 207 * 4);
	ck_assert_int_le(atomic_load_explicit(&store->history_bytes, memory_order_relaxed), bound); /* a counter */
	/* every row's last write, from the start of the history */
	ovstage_read_handle_t rh;
	ovstage_ordinal_range_t rg = { 2, HB_ORDS + 1, true };
	tst_wait_ok(st, ovstage_read_attributes(st, q, &t, 1, rg, &rh));
	ovstage_read_group_t g;
	size_t seen = 0;
	while (ovstage_fetch_read_next(st, rh, OVSTAGE_TIMEOUT_INFINITE, &g) == OVSTAGE_OK) {
		for (uint32_t i = 0; i < g.prims.count; i++) {
			uint32_t p = g.prims.index_map ? g.prims.index_map[i] : g.prims.offset + i;
			uint32_t row = g.data.index_map ? g.data.index_map[i] : i;
			uint64_t last = 0; /* the last n in [2, HB_ORDS + 1] with n % 97 == p % 97 */
			for (uint64_t n = 2; n <= HB_ORDS + 1; n++)
				if (n % 97 == p % 97)
					last = n;
			ck_assert_float_eq(((const float *)g.data.tensors[0].data)[row], (float)last);
			seen++;
		}
		ck_assert_int_eq(ovstage_release_group(st, &g), OVSTAGE_OK);
	}
	ck_assert_uint_eq(seen, HB_ROWS); /* every row was written in [2, HB_ORDS + 1] */
	tst_wait_ok(st, ovstage_release_read(st, rh));
	tst_wait_ok(st, ovstage_release_query(st, q));
	ck_assert_int_eq(ovstage_destroy_instance(st), OVSTAGE_OK);
}
END_TEST

/* ---- item 6: execution-time failures report 0.2.1's documented status ------------------------ */

/* Waits for e: wait_op's status, the failed ids it listed (1 expected) and the first message. */
static ovstage_api_status_t wait_status(fixture *f, ovstage_enqueue_result_t e, size_t *nfailed, char *msg, size_t len)
{
	ck_assert_msg(e.status == OVSTAGE_OK, "rejected at the call: %d %s", e.status, tst_last_error());
	ovstage_op_wait_result_t w;
	ovstage_api_status_t s = ovstage_wait_op(f->st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &w);
	*nfailed = w.error_op_id_count;
	msg[0] = 0;
	if (w.error_op_id_count) {
		ovx_string_t m = ovstage_get_last_op_error(f->st, w.error_op_ids[0]);
		snprintf(msg, len, "%.*s", (int)m.length, m.ptr ? m.ptr : "");
	}
	ck_assert_int_eq(ovstage_release_op(f->st, e.op_index), OVSTAGE_OK);
	return s;
}

/* Several writes at one ordinal make one change set (merged on the seal's path): disjoint sorted
 * blocks (producers each writing their own block) are concatenated, anything else (overlapping,
 * out of order, a reversed query) is sorted; either way a range read [n, n] selects exactly the
 * union of the rows written at n, with the last write's values. */
START_TEST(test_many_writes_one_ordinal_change_set)
{
	enum { N = 32 };
	fixture f;
	setup_n(&f, N);
	float v[N];
	for (int i = 0; i < N; i++)
		v[i] = (float)i;
	write_q(&f, f.all, 1, v, N);
	seal(&f, 1);
	char names[N][24];
	const char *pp[N];
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof names[i], "/W/P%d", i);
		pp[i] = names[i];
	}
	/* ordinal 2: blocks [20, 28), [4, 10), [12, 16), written in that order (disjoint, sorted) */
	/* ordinal 3: [8, 14) and [10, 20) overlapping, then /W/P30, /W/P25, /W/P2 reversed */
	const int blocks2[3][2] = { { 20, 8 }, { 4, 6 }, { 12, 4 } }, blocks3[2][2] = { { 8, 6 }, { 10, 10 } };
	bool want[4][N];
	memset(want, 0, sizeof want);
	for (int b = 0; b < 3; b++) {
		ovstage_query_handle_t q = tst_query_of(f.st, f.pd, pp + blocks2[b][0], (size_t)blocks2[b][1], NULL);
		float w[N];
		for (int i = 0; i < blocks2[b][1]; i++) {
			w[i] = 200.f + (float)(blocks2[b][0] + i);
			want[2][blocks2[b][0] + i] = true;
		}
		write_q(&f, q, 2, w, blocks2[b][1]);
		tst_wait_ok(f.st, ovstage_release_query(f.st, q));
	}
	seal(&f, 2);
	for (int b = 0; b < 2; b++) {
		ovstage_query_handle_t q = tst_query_of(f.st, f.pd, pp + blocks3[b][0], (size_t)blocks3[b][1], NULL);
		float w[N];
		for (int i = 0; i < blocks3[b][1]; i++) {
			w[i] = 300.f + (float)(blocks3[b][0] + i) + (float)b * 0.5f; /* the second wins the overlap */
			want[3][blocks3[b][0] + i] = true;
		}
		write_q(&f, q, 3, w, blocks3[b][1]);
		tst_wait_ok(f.st, ovstage_release_query(f.st, q));
	}
	const char *rev[3] = { "/W/P30", "/W/P25", "/W/P2" };
	ovstage_query_handle_t qr = tst_query_of(f.st, f.pd, rev, 3, NULL);
	float wr[3] = { 330.f, 325.f, 302.f };
	write_q(&f, qr, 3, wr, 3);
	tst_wait_ok(f.st, ovstage_release_query(f.st, qr));
	want[3][30] = want[3][25] = want[3][2] = true;
	seal(&f, 3);
	for (uint64_t n = 2; n <= 3; n++) {
		result r;
		read_q(&f, f.all, span(n, n), &r);
		ck_assert_int_eq(r.call, OVSTAGE_OK);
		for (int i = 0; i < N; i++) {
			ck_assert_msg(r.present[i] == want[n][i], "[%llu, %llu]: /W/P%d present %d, want %d",
				      (unsigned long long)n, (unsigned long long)n, i, r.present[i], want[n][i]);
			/* values as of n (retained): at 3 ordinal 3's writes, else ordinal 2's, else 1's */
			float asof = n == 3 && want[3][i] ? (i == 30 ? 330.f : i == 25 ? 325.f : i == 2 ? 302.f
							     : 300.f + (float)i + (i >= 10 ? 0.5f : 0.f))
				     : want[2][i] ? 200.f + (float)i : (float)i;
			if (r.present[i])
				ck_assert_msg(r.val[i] == asof, "[%llu, %llu]: /W/P%d = %g, want %g", (unsigned long long)n,
					      (unsigned long long)n, i, (double)r.val[i], (double)asof);
		}
	}
	/* Ordinals 4..7 write /W/P31 only: 3's version leaves retention, and [3, 3] is answered from
	 * the change sets' membership (a search of the sorted list), with the newest payloads. */
	for (uint64_t n = 4; n <= 7; n++) {
		write_one(&f, 31, n, 1000.f + (float)n);
		seal(&f, n);
	}
	ovstage_query_handle_t q31 = tst_query_of(f.st, f.pd, pp, N - 1, NULL); /* all but /W/P31 */
	result r;
	read_q(&f, q31, span(3, 3), &r);
	tst_wait_ok(f.st, ovstage_release_query(f.st, q31));
	ck_assert_int_eq(r.call, OVSTAGE_OK);
	ck_assert_msg(r.fetch == OVSTAGE_OK || r.fetch == OVSTAGE_ERROR_END_OF_ITERATION, "%d %s", r.fetch, r.msg);
	for (int i = 0; i < N - 1; i++)
		ck_assert_msg(r.present[i] == want[3][i], "[3, 3] after retention: /W/P%d present %d, want %d", i,
			      r.present[i], want[3][i]);
	teardown(&f);
}
END_TEST

/* Blocks written at one ordinal that join into one run of rows (producers each writing their own
 * adjacent block, in any order) make a change set that is that run, or every row when they cover
 * the column; a range read [n, n] still selects exactly the rows written at n, also once n left
 * retention and membership is answered from the change sets alone. */
static void write_block(fixture *f, const char *const *pp, int first, int n, uint64_t ord, float base)
{
	ovstage_query_handle_t q = tst_query_of(f->st, f->pd, pp + first, (size_t)n, NULL);
	float w[32];
	for (int i = 0; i < n; i++)
		w[i] = base + (float)(first + i);
	write_q(f, q, ord, w, n);
	tst_wait_ok(f->st, ovstage_release_query(f->st, q));
}

static void check_span(fixture *f, ovstage_query_handle_t q, int nq, uint64_t a, uint64_t b, int lo, int hi,
		       float base)
{
	result r;
	read_q(f, q, span(a, b), &r);
	ck_assert_int_eq(r.call, OVSTAGE_OK);
	ck_assert_msg(r.fetch == OVSTAGE_OK || r.fetch == OVSTAGE_ERROR_END_OF_ITERATION, "%d %s", r.fetch, r.msg);
	for (int i = 0; i < nq; i++) {
		bool want = i >= lo && i < hi;
		ck_assert_msg(r.present[i] == want, "[%llu, %llu]: /W/P%d present %d, want %d", (unsigned long long)a,
			      (unsigned long long)b, i, r.present[i], want);
		if (want && base >= 0)
			ck_assert_msg(r.val[i] == base + (float)i, "[%llu, %llu]: /W/P%d = %g, want %g",
				      (unsigned long long)a, (unsigned long long)b, i, (double)r.val[i],
				      (double)(base + (float)i));
	}
}

START_TEST(test_adjacent_blocks_one_ordinal_change_set)
{
	enum { N = 32 };
	fixture f;
	setup_n(&f, N);
	float v[N];
	for (int i = 0; i < N; i++)
		v[i] = (float)i;
	write_q(&f, f.all, 1, v, N);
	seal(&f, 1);
	char names[N][24];
	const char *pp[N];
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof names[i], "/W/P%d", i);
		pp[i] = names[i];
	}
	write_block(&f, pp, 16, 16, 2, 200.f); /* ordinal 2: [16, 32) then [0, 16): every row */
	write_block(&f, pp, 0, 16, 2, 200.f);
	seal(&f, 2);
	write_block(&f, pp, 10, 10, 3, 300.f); /* ordinal 3: [10, 20) then [4, 10): the run [4, 20) */
	write_block(&f, pp, 4, 6, 3, 300.f);
	seal(&f, 3);
	check_span(&f, f.all, N, 2, 2, 0, N, 200.f);
	check_span(&f, f.all, N, 3, 3, 4, 20, 300.f);
	/* Ordinals 4..7 write /W/P31 only: 2's and 3's versions leave retention */
	for (uint64_t n = 4; n <= 7; n++) {
		write_one(&f, 31, n, 1000.f + (float)n);
		seal(&f, n);
	}
	ovstage_query_handle_t q31 = tst_query_of(f.st, f.pd, pp, N - 1, NULL); /* all but /W/P31 */
	check_span(&f, q31, N - 1, 3, 3, 4, 20, 300.f);
	tst_wait_ok(f.st, ovstage_release_query(f.st, q31));
	/* [2, 2] over prims no later ordinal changed: every one of them was written at 2 */
	ovstage_query_handle_t qt = tst_query_of(f.st, f.pd, pp + 20, 11, NULL); /* /W/P20 .. /W/P30 */
	result r;
	read_q(&f, qt, span(2, 2), &r);
	tst_wait_ok(f.st, ovstage_release_query(f.st, qt));
	ck_assert_int_eq(r.call, OVSTAGE_OK);
	ck_assert_msg(r.fetch == OVSTAGE_OK || r.fetch == OVSTAGE_ERROR_END_OF_ITERATION, "%d %s", r.fetch, r.msg);
	for (int i = 0; i < 11; i++)
		ck_assert_msg(r.present[i] && r.val[i] == 200.f + (float)(20 + i), "[2, 2]: /W/P%d present %d = %g", 20 + i,
			      r.present[i], (double)r.val[i]);
	teardown(&f);
}
END_TEST

START_TEST(test_insert_onto_existing_prim_status)
{
	fixture f;
	setup_n(&f, 2);
	write_one(&f, 0, 1, 1.f);
	float v = 2.f;
	tst_tensor tt;
	ovstage_write_data_t w = tst_wdata(&tt, &v, 1, kDLFloat, 32, 1);
	size_t n;
	char msg[600];
	/* the query is resolved, but whether the prim exists is decided by the op: PRIM_NOT_FOUND from wait_op */
	ovstage_api_status_t s = wait_status(&f, ovstage_write_attribute(f.st, f.one[0], tst_attr(f.t), 2, w,
									 OVSTAGE_PRIM_MODE_INSERT), &n, msg, sizeof msg);
	ck_assert_int_eq(s, OVSTAGE_ERROR_PRIM_NOT_FOUND);
	ck_assert_uint_eq(n, 1);
	ck_assert_msg(strstr(msg, "already exists"), "%s", msg);
	/* nothing changed: the value at 1 stays */
	seal(&f, 2);
	result r;
	read_q(&f, f.one[0], latest(2), &r);
	ck_assert_float_eq(r.val[0], 1.f);
	/* a map with INSERT onto it: the map op reports PRIM_NOT_FOUND, so does fetch_map_next; the
	 * unmap_attribute that depends on it reports OK with the map op listed first (root cause) */
	ovstage_map_desc_t md;
	memset(&md, 0, sizeof md);
	md.attribute = tst_attr(f.t);
	md.prim_mode = OVSTAGE_PRIM_MODE_INSERT;
	ovstage_map_handle_t mh;
	ovstage_enqueue_result_t me = ovstage_map_attribute(f.st, f.one[0], &md, 3, NULL, 0, &mh);
	ovstage_map_group_t mg;
	ck_assert_int_eq(ovstage_fetch_map_next(f.st, mh, OVSTAGE_TIMEOUT_INFINITE, &mg), OVSTAGE_ERROR_PRIM_NOT_FOUND);
	ovstage_cuda_sync_t nosync = { 0, 0 };
	s = wait_status(&f, ovstage_unmap_attribute(f.st, mh, nosync), &n, msg, sizeof msg);
	ck_assert_int_eq(s, OVSTAGE_OK);
	ck_assert_uint_eq(n, 2);
	ck_assert_msg(strstr(msg, "already exists"), "unmap root cause: [%s]", msg);
	ck_assert_int_eq(wait_status(&f, me, &n, msg, sizeof msg), OVSTAGE_ERROR_PRIM_NOT_FOUND);
	ck_assert_uint_eq(n, 1);
	/* a new prim with INSERT: OK */
	s = wait_status(&f, ovstage_write_attribute(f.st, f.one[1], tst_attr(f.t), 3, w, OVSTAGE_PRIM_MODE_INSERT), &n, msg,
			sizeof msg);
	ck_assert_int_eq(s, OVSTAGE_OK);
	ck_assert_uint_eq(n, 0);
	teardown(&f);
}
END_TEST

START_TEST(test_clone_statuses)
{
	fixture f;
	setup_n(&f, 2);
	write_one(&f, 0, 1, 1.f);
	write_one(&f, 1, 1, 2.f);
	size_t n;
	char msg[600];
	ovx_string_t missing = { "/W/Nope", 7 }, src = { "/W/P0", 5 }, existing = { "/W/P1", 5 };
	ovx_string_t fresh = { "/W/Q", 4 };
	ck_assert_int_eq(wait_status(&f, ovstage_clone(f.st, missing, &fresh, 1, 2), &n, msg, sizeof msg),
			 OVSTAGE_ERROR_NOT_FOUND);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(wait_status(&f, ovstage_clone(f.st, src, &existing, 1, 2), &n, msg, sizeof msg),
			 OVSTAGE_ERROR_PRIM_NOT_FOUND);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(wait_status(&f, ovstage_clone(f.st, src, &fresh, 1, 2), &n, msg, sizeof msg), OVSTAGE_OK);
	ck_assert_uint_eq(n, 0);
	teardown(&f);
}
END_TEST

/* A read through a query still resolving (a filter query) is checked by its op: an unsealed range
 * reports WRITE_FLOOR_VIOLATION from wait_op and fetch_read_next; a range whose payload is gone,
 * OUT_OF_RANGE. A read whose query failed reports OK + ids from wait_op (its own failure is that of
 * the op it depended on) and OP_FAILED from the fetch, as 0.2.1. */
START_TEST(test_deferred_read_statuses)
{
	fixture f;
	setup_n(&f, 2);
	write_one(&f, 0, 1, 1.f);
	seal(&f, 1);
	write_one(&f, 0, 2, 2.f); /* unsealed */
	ovstage_predicate_t pr = { tst_attr(f.t), OVSTAGE_FILTER_OP_HAS, NULL, 0 };
	ovstage_filter_t flt = { &pr, 1 };
	ovstage_query_handle_t qh;
	size_t n;
	char msg[600];
	gate_close(); /* the query stays unresolved until the read is submitted (else it may be ready
		       * first, and the read is refused at the call: a race CI lost once) */
	ovstage_enqueue_result_t qe = ovstage_query(f.st, &flt, NULL, 0, &qh);
	ck_assert_int_eq(qe.status, OVSTAGE_OK);
	gate_wait_entered();
	ovstage_read_handle_t rh;
	ovstage_enqueue_result_t e = ovstage_read_attributes(f.st, qh, &f.t, 1, span(1, 2), &rh);
	gate_open();
	ck_assert_int_eq(e.status, OVSTAGE_OK);
	ck_assert_int_eq(wait_status(&f, e, &n, msg, sizeof msg), OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION);
	ck_assert_uint_eq(n, 1);
	ovstage_read_group_t g;
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh, OVSTAGE_TIMEOUT_INFINITE, &g),
			 OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION);
	tst_wait_ok(f.st, ovstage_release_read(f.st, rh));
	tst_wait_ok(f.st, qe);
	tst_wait_ok(f.st, ovstage_release_query(f.st, qh));
	/* the same read through the ready query is refused at the call, as 0.2.1 */
	e = ovstage_read_attributes(f.st, f.one[0], &f.t, 1, span(1, 2), &rh);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION);
	teardown(&f);
}
END_TEST

START_TEST(test_out_of_range_status)
{
	fixture f;
	setup_n(&f, 1);
	for (uint64_t o = 1; o <= 4; o++) {
		write_one(&f, 0, o, (float)o);
		seal(&f, o);
	}
	/* [1, 2]: changed at 2 and again at 3, 4: its payload as of 2 is gone */
	ovstage_read_handle_t rh;
	size_t n;
	char msg[600];
	ovstage_enqueue_result_t e = ovstage_read_attributes(f.st, f.one[0], &f.t, 1, span(1, 2), &rh);
	ck_assert_int_eq(wait_status(&f, e, &n, msg, sizeof msg), OVSTAGE_ERROR_OUT_OF_RANGE);
	ck_assert_uint_eq(n, 1);
	ck_assert_msg(strstr(msg, "read_attributes") && strstr(msg, "/W/P0"), "%s", msg);
	ovstage_read_group_t g;
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh, 0, &g), OVSTAGE_ERROR_OUT_OF_RANGE);
	tst_wait_ok(f.st, ovstage_release_read(f.st, rh));
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
	tcase_add_test(tc, test_producer_consumer_lagging_consumer);
	tcase_add_test(tc, test_range_end_older_than_retention);
	tcase_add_test(tc, test_last_change_matches_model);
	tcase_add_test(tc, test_range_reads_while_folding);
	tcase_add_test(tc, test_range_reads_race_folds);
	tcase_add_test(tc, test_range_reads_race_folds_retention1);
	tcase_add_test(tc, test_range_reads_while_seals_cut_the_chain);
	tcase_add_test(tc, test_range_reads_race_pooled_lists);
	tcase_add_test(tc, test_range_reads_race_seal_folds);
	tcase_add_test(tc, test_fold_during_read_pins_again);
	tcase_add_test(tc, test_unread_history_bounded);
	tcase_add_test(tc, test_many_writes_one_ordinal_change_set);
	tcase_add_test(tc, test_adjacent_blocks_one_ordinal_change_set);
	tcase_add_test(tc, test_insert_onto_existing_prim_status);
	tcase_add_test(tc, test_clone_statuses);
	tcase_add_test(tc, test_deferred_read_statuses);
	tcase_add_test(tc, test_out_of_range_status);
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
