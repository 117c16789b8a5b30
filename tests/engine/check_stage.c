/*
 * check_stage.c — the stage through its public C API: writes, seals, reads (latest and range),
 * retention, deletes, lifetimes, every bad input with its status and message, and a multi-thread
 * stress that checks by checksum that every sealed value is read back exactly.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ovstage/ovstage.h>
#include <ovstage/ovstage_ext.h>
#include <ovx/path_dictionary/path_dictionary.h>

#include "stage_test_util.h"

/* ---- helpers -------------------------------------------------------------------------------- */

typedef struct fixture {
	ovstage_instance_t *st;
	path_dictionary_instance_t *pd;
	ovx_primpath_list_t list;
	ovstage_query_handle_t q;
	size_t n;
} fixture;

static const char *last_error(void)
{
	return tst_last_error();
}

static ovx_token_t tok(fixture *f, const char *s)
{
	return tst_tok(f->pd, s);
}

static ovstage_query_handle_t query_of(fixture *f, const char *const *paths, size_t n, ovx_primpath_list_t *out_list)
{
	return tst_query_of(f->st, f->pd, paths, n, out_list);
}

static void setup_n(fixture *f, size_t n)
{
	memset(f, 0, sizeof *f);
	ovstage_instance_desc_t d = { "check_stage" };
	ck_assert_int_eq(ovstage_create_instance(&d, &f->st), OVSTAGE_OK);
	f->pd = ovstage_get_path_dictionary(f->st);
	ck_assert_ptr_nonnull(f->pd);
	char **names = calloc(n, sizeof *names);
	for (size_t i = 0; i < n; i++) {
		names[i] = malloc(32);
		snprintf(names[i], 32, "/World/P%zu", i);
	}
	f->q = query_of(f, (const char *const *)names, n, &f->list);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	f->n = n;
}

static void teardown(fixture *f)
{
	ovstage_enqueue_result_t r = ovstage_release_query(f->st, f->q);
	ck_assert_int_eq(r.status, OVSTAGE_OK);
	ovstage_op_wait_result_t w;
	ck_assert_int_eq(ovstage_wait_op(f->st, r.op_index, OVSTAGE_TIMEOUT_INFINITE, &w), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_release_op(f->st, r.op_index), OVSTAGE_OK);
	path_dictionary_release_path_list_reference(f->pd, f->list);
	ck_assert_int_eq(ovstage_destroy_instance(f->st), OVSTAGE_OK);
}

/* Waits for an op; returns the number of failed ops reported (and their first message in msg). */
static size_t wait_op(fixture *f, ovstage_enqueue_result_t e, char *msg, size_t msglen)
{
	return tst_wait_op(f->st, e, msg, msglen);
}

static void wait_ok(fixture *f, ovstage_enqueue_result_t e)
{
	tst_wait_ok(f->st, e);
}

static ovx_string_or_token_t A(ovx_token_t t)
{
	return tst_attr(t);
}

typedef tst_tensor tensor1;

static ovstage_write_data_t fdata(tensor1 *tt, float *vals, int64_t rows, int lanes)
{
	return tst_wdata(tt, vals, rows, kDLFloat, 32, (uint16_t)lanes);
}

/* Submits a write without waiting. The API borrows the tensor descriptor until the op completes,
 * so it lives in a per-thread ring (every test waits long before 256 more writes). */
static ovstage_enqueue_result_t write_f(fixture *f, ovstage_query_handle_t q, ovx_token_t attr, uint64_t ord,
					float *vals, int64_t rows)
{
	static _Thread_local tensor1 ring[256];
	static _Thread_local unsigned next;
	tensor1 *tt = &ring[next++ % 256];
	ovstage_write_data_t w = fdata(tt, vals, rows, 1);
	return ovstage_write_attribute(f->st, q, A(attr), ord, w, OVSTAGE_PRIM_MODE_UPSERT);
}

static void seal(fixture *f, uint64_t n)
{
	ovstage_write_floor_desc_t d = { n, OVSTAGE_SCOPE_ALL, NULL, 0 };
	wait_ok(f, ovstage_advance_write_floor(f->st, &d));
}

/* Reads one attribute into out[n_query] (NAN where absent); returns groups seen and the ordinal of
 * the value group. Status of the read op is returned through *status. */
typedef struct read_result {
	ovstage_api_status_t status;
	int value_groups;
	int tombstone_groups;
	uint64_t ordinal;
	float vals[64];
	bool present[64];
	bool deleted[64];
	char msg[600];
} read_result;

static void read_f(fixture *f, ovstage_query_handle_t q, ovx_token_t attr, ovstage_ordinal_range_t range,
		   read_result *res)
{
	memset(res, 0, sizeof *res);
	ovstage_read_handle_t rh;
	ovstage_enqueue_result_t e = ovstage_read_attributes(f->st, q, &attr, 1, range, &rh);
	if (e.status != OVSTAGE_OK) { /* refused at the call (a ready query is validated there) */
		ck_assert_uint_eq(rh, OVSTAGE_INVALID_READ_HANDLE);
		res->status = e.status;
		snprintf(res->msg, sizeof res->msg, "%.*s", (int)sizeof res->msg - 1, last_error());
		return;
	}
	size_t nfail = wait_op(f, e, res->msg, sizeof res->msg);
	ovstage_read_group_t g;
	ovstage_api_status_t s;
	while ((s = ovstage_fetch_read_next(f->st, rh, OVSTAGE_TIMEOUT_INFINITE, &g)) == OVSTAGE_OK) {
		ck_assert_uint_eq(g.attribute, attr);
		if (g.is_delete) {
			res->tombstone_groups++;
			ck_assert_uint_eq(g.data.tensor_count, 0);
			for (uint32_t i = 0; i < g.prims.count; i++) {
				uint32_t e2 = g.prims.index_map ? g.prims.index_map[i] : g.prims.offset + i;
				res->deleted[e2] = true;
			}
		} else {
			res->value_groups++;
			res->ordinal = g.ordinal;
			ck_assert_uint_eq(g.data.tensor_count, 1);
			ck_assert_int_eq(g.data.tensors[0].ndim, 1);
			const float *d = g.data.tensors[0].data;
			for (uint32_t i = 0; i < g.prims.count; i++) {
				uint32_t e2 = g.prims.index_map ? g.prims.index_map[i] : g.prims.offset + i;
				uint32_t row = g.data.index_map ? g.data.index_map[i] : i;
				ck_assert_int_lt(row, g.data.tensors[0].shape[0]);
				res->vals[e2] = d[row];
				res->present[e2] = true;
			}
		}
		ck_assert_int_eq(ovstage_release_group(f->st, &g), OVSTAGE_OK);
	}
	res->status = nfail ? s : OVSTAGE_OK;
	if (nfail)
		ck_assert_msg(s != OVSTAGE_ERROR_END_OF_ITERATION, "failed read must not iterate");
	else
		ck_assert_int_eq(s, OVSTAGE_ERROR_END_OF_ITERATION);
	wait_ok(f, ovstage_release_read(f->st, rh));
}

static ovstage_ordinal_range_t latest(uint64_t n)
{
	ovstage_ordinal_range_t r = { 0, n, false };
	return r;
}

static ovstage_ordinal_range_t span(uint64_t a, uint64_t b)
{
	ovstage_ordinal_range_t r = { a, b, true };
	return r;
}

/* ---- basic write / seal / read -------------------------------------------------------------- */

START_TEST(test_write_seal_read)
{
	fixture f;
	setup_n(&f, 3);
	ovx_token_t t = tok(&f, "temperature");
	float v[] = { 1, 2, 3 };
	wait_ok(&f, write_f(&f, f.q, t, 1, v, 3));
	seal(&f, 1);
	read_result r;
	read_f(&f, f.q, t, latest(1), &r);
	ck_assert_int_eq(r.status, OVSTAGE_OK);
	ck_assert_int_eq(r.value_groups, 1);
	ck_assert_uint_eq(r.ordinal, 1);
	for (int i = 0; i < 3; i++)
		ck_assert_float_eq(r.vals[i], (float)(i + 1));
	teardown(&f);
}
END_TEST

/* A step over many columns, as bench/stage --only columns: one write of 40 columns (the duplicate
 * check's table, past 8 entries), then reads naming them with a missing name and a derived one in
 * between (the latest read pins 32 names per grace section: two sections), groups fetched and
 * released after the read and after later seals (each group holds its version: a group takes over
 * the read's pin). */
enum { MC_COLS = 40, MC_PRIMS = 8 };
START_TEST(test_many_columns_step)
{
	fixture f;
	setup_n(&f, MC_PRIMS);
	ovx_token_t t[MC_COLS];
	char nm[32];
	for (int c = 0; c < MC_COLS; c++) {
		snprintf(nm, sizeof nm, "mc%d", c);
		t[c] = tok(&f, nm);
	}
	static float vals[MC_COLS][MC_PRIMS];
	tensor1 tt[MC_COLS];
	ovstage_attribute_write_t w[MC_COLS];
	/* a duplicate far apart: refused at the call, naming both entries */
	for (int c = 0; c < MC_COLS; c++) {
		w[c].attribute = A(c == 37 ? t[3] : t[c]);
		w[c].data = fdata(&tt[c], vals[c], MC_PRIMS, 1);
	}
	ovstage_enqueue_result_t e = ovstage_write_attributes(f.st, f.q, w, MC_COLS, 1, OVSTAGE_PRIM_MODE_UPSERT);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(last_error(), "writes[3] and writes[37] both write"));
	for (uint64_t ord = 1; ord <= 3; ord++) {
		for (int c = 0; c < MC_COLS; c++) {
			for (int i = 0; i < MC_PRIMS; i++)
				vals[c][i] = (float)(ord * 10000 + (uint64_t)c * 100 + (uint64_t)i);
			w[c].attribute = A(t[c]);
			w[c].data = fdata(&tt[c], vals[c], MC_PRIMS, 1);
		}
		wait_ok(&f, ovstage_write_attributes(f.st, f.q, w, MC_COLS, ord, OVSTAGE_PRIM_MODE_UPSERT));
		seal(&f, ord);
	}
	/* names: the 40 columns, with a missing one at 5 and usd-path at 33 */
	ovx_token_t names[MC_COLS + 2];
	int col_of[MC_COLS + 2];
	size_t nn = 0;
	for (int c = 0; c < MC_COLS; c++) {
		if (c == 5) {
			col_of[nn] = -1;
			names[nn++] = tok(&f, "mc_missing");
		}
		if (c == 33) {
			col_of[nn] = -2;
			names[nn++] = tok(&f, "usd-path");
		}
		col_of[nn] = c;
		names[nn++] = t[c];
	}
	ovstage_read_group_t g[2][MC_COLS + 2];
	int ng[2] = { 0, 0 };
	for (int k = 0; k < 2; k++) { /* as of 2 (an older retained version), then latest (3) */
		uint64_t end = k == 0 ? 2 : 3;
		ovstage_read_handle_t rh;
		wait_ok(&f, ovstage_read_attributes(f.st, f.q, names, nn, latest(end), &rh));
		while (ovstage_fetch_read_next(f.st, rh, OVSTAGE_TIMEOUT_INFINITE, &g[k][ng[k]]) == OVSTAGE_OK)
			ng[k]++;
		wait_ok(&f, ovstage_release_read(f.st, rh)); /* the groups outlive it */
		ck_assert_int_eq(ng[k], MC_COLS + 1); /* every column and usd-path; nothing for the missing name */
	}
	/* later seals: the groups keep their versions */
	for (uint64_t ord = 4; ord <= 6; ord++) {
		for (int c = 0; c < MC_COLS; c++)
			for (int i = 0; i < MC_PRIMS; i++)
				vals[c][i] = -1.0f;
		wait_ok(&f, ovstage_write_attributes(f.st, f.q, w, MC_COLS, ord, OVSTAGE_PRIM_MODE_UPSERT));
		seal(&f, ord);
	}
	for (int k = 0; k < 2; k++) {
		uint64_t end = k == 0 ? 2 : 3;
		int gi = 0;
		for (size_t j = 0; j < nn; j++) {
			if (col_of[j] == -1)
				continue;
			ovstage_read_group_t *gr = &g[k][gi++];
			ck_assert_uint_eq(gr->attribute, names[j]); /* in the order of the names */
			if (col_of[j] == -2)
				continue; /* usd-path: path ids */
			ck_assert_uint_eq(gr->ordinal, end);
			ck_assert_uint_eq(gr->prims.count, MC_PRIMS);
			const float *d = gr->data.tensors[0].data;
			for (int i = 0; i < MC_PRIMS; i++)
				ck_assert_float_eq(d[i], (float)(end * 10000 + (uint64_t)col_of[j] * 100 + (uint64_t)i));
		}
		for (int i = ng[k] - 1; i >= 0; i--) /* released last to first */
			ck_assert_int_eq(ovstage_release_group(f.st, &g[k][i]), OVSTAGE_OK);
		ck_assert_int_eq(ovstage_release_group(f.st, &g[k][0]), OVSTAGE_ERROR_INVALID_HANDLE);
	}
	teardown(&f);
}
END_TEST

START_TEST(test_unsealed_not_visible)
{
	fixture f;
	setup_n(&f, 3);
	ovx_token_t t = tok(&f, "x");
	float v[] = { 1, 2, 3 };
	wait_ok(&f, write_f(&f, f.q, t, 1, v, 3));
	read_result r;
	read_f(&f, f.q, t, latest(1), &r); /* floor 0, write pending above it: WFV */
	ck_assert_int_eq(r.status, OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION);
	ck_assert_msg(strstr(r.msg, "above the write floor 0"), "message: %s", r.msg);
	read_f(&f, f.q, t, latest(0), &r); /* as of 0: nothing sealed, zero groups */
	ck_assert_int_eq(r.status, OVSTAGE_OK);
	ck_assert_int_eq(r.value_groups, 0);
	teardown(&f);
}
END_TEST

/* ---- ordinal rules ---------------------------------------------------------------------------- */

START_TEST(test_floor_violation_sync)
{
	fixture f;
	setup_n(&f, 3);
	ovx_token_t t = tok(&f, "x");
	float v[] = { 1, 2, 3 };
	ovstage_enqueue_result_t e = write_f(&f, f.q, t, 0, v, 3); /* floor starts at 0: 0 is never writable */
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION);
	ck_assert_uint_eq(e.op_index, OVSTAGE_INVALID_OP_ID);
	ck_assert_msg(strstr(last_error(), "ordinal 0 is not above the write floor 0"), "%s", last_error());
	wait_ok(&f, write_f(&f, f.q, t, 5, v, 3));
	seal(&f, 5);
	e = write_f(&f, f.q, t, 5, v, 3);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION);
	ck_assert_msg(strstr(last_error(), "\"x\""), "message names the column: %s", last_error());
	e = write_f(&f, f.q, t, 3, v, 3);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION);
	/* the floor only moves up: a backward advance is a silent no-op */
	seal(&f, 2);
	e = write_f(&f, f.q, t, 4, v, 3);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION);
	teardown(&f);
}
END_TEST

START_TEST(test_same_ordinal_submission_order)
{
	fixture f;
	setup_n(&f, 4);
	ovx_token_t t = tok(&f, "x");
	/* many writes at one ordinal, without waiting in between: the last submitted wins per row */
	ovstage_enqueue_result_t e[20];
	float v[20][4];
	for (int k = 0; k < 20; k++) {
		for (int i = 0; i < 4; i++)
			v[k][i] = (float)(k * 10 + i);
		e[k] = write_f(&f, f.q, t, 7, v[k], 4);
	}
	for (int k = 0; k < 20; k++)
		wait_ok(&f, e[k]);
	seal(&f, 7);
	read_result r;
	read_f(&f, f.q, t, latest(7), &r);
	for (int i = 0; i < 4; i++)
		ck_assert_float_eq(r.vals[i], (float)(190 + i));
	teardown(&f);
}
END_TEST

START_TEST(test_parallel_ordinals_and_seal_order)
{
	fixture f;
	setup_n(&f, 4);
	ovx_token_t t = tok(&f, "x");
	/* writes at ordinals submitted out of order complete independently; the seal applies them in
	 * ordinal order */
	uint64_t ords[] = { 9, 3, 7, 1, 5 };
	float v[5][4];
	ovstage_enqueue_result_t e[5];
	for (int k = 0; k < 5; k++) {
		for (int i = 0; i < 4; i++)
			v[k][i] = (float)(ords[k] * 100 + (uint64_t)i);
		e[k] = write_f(&f, f.q, t, ords[k], v[k], 4);
	}
	seal(&f, 9); /* depends on all five */
	for (int k = 0; k < 5; k++)
		wait_ok(&f, e[k]);
	read_result r;
	read_f(&f, f.q, t, latest(9), &r);
	ck_assert_uint_eq(r.ordinal, 9);
	for (int i = 0; i < 4; i++)
		ck_assert_float_eq(r.vals[i], (float)(900 + i));
	/* retention 2: ordinal 7 is still readable as a latest read */
	read_f(&f, f.q, t, latest(8), &r);
	ck_assert_int_eq(r.status, OVSTAGE_OK);
	ck_assert_uint_eq(r.ordinal, 7);
	ck_assert_float_eq(r.vals[0], 700.f);
	/* ordinal 5's version left retention: the newest version, as 0.2.1 answers every latest read
	 * (a latest read never fails OUT_OF_RANGE) */
	read_f(&f, f.q, t, latest(5), &r);
	ck_assert_int_eq(r.status, OVSTAGE_OK);
	ck_assert_uint_eq(r.ordinal, 9);
	for (int i = 0; i < 4; i++)
		ck_assert_float_eq(r.vals[i], (float)(900 + i));
	teardown(&f);
}
END_TEST

START_TEST(test_scopes_include_exclude)
{
	fixture f;
	setup_n(&f, 2);
	ovx_token_t a = tok(&f, "a"), b = tok(&f, "b");
	float v[] = { 1, 2 };
	wait_ok(&f, write_f(&f, f.q, a, 3, v, 2));
	wait_ok(&f, write_f(&f, f.q, b, 3, v, 2));
	ovstage_write_floor_desc_t inc = { 3, OVSTAGE_SCOPE_INCLUDE, &a, 1 };
	wait_ok(&f, ovstage_advance_write_floor(f.st, &inc));
	read_result r;
	read_f(&f, f.q, a, latest(3), &r);
	ck_assert_int_eq(r.status, OVSTAGE_OK);
	ck_assert_int_eq(r.value_groups, 1);
	read_f(&f, f.q, b, latest(3), &r); /* b not sealed */
	ck_assert_int_eq(r.status, OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION);
	/* b still writable at 2 (its floor is 0); a is not */
	ck_assert_int_eq(write_f(&f, f.q, a, 2, v, 2).status, OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION);
	wait_ok(&f, write_f(&f, f.q, b, 2, v, 2));
	ovstage_write_floor_desc_t exc = { 3, OVSTAGE_SCOPE_EXCLUDE, &a, 1 };
	wait_ok(&f, ovstage_advance_write_floor(f.st, &exc));
	read_f(&f, f.q, b, latest(3), &r);
	ck_assert_int_eq(r.status, OVSTAGE_OK);
	/* global floor = min over attributes = 3 */
	ovstage_ordinal_query_handle_t h;
	ovx_string_or_token_t none = { 0, { NULL, 0 } };
	ovstage_enqueue_result_t e = ovstage_get_attribute_write_floor(f.st, none, &h);
	wait_ok(&f, e);
	uint64_t fl = 0;
	ck_assert_int_eq(ovstage_fetch_ordinal(f.st, h, OVSTAGE_TIMEOUT_INFINITE, &fl), OVSTAGE_OK);
	ck_assert_uint_eq(fl, 3);
	wait_ok(&f, ovstage_release_ordinal_query(f.st, h));
	teardown(&f);
}
END_TEST

/* ---- range reads, deletes, retention --------------------------------------------------------- */

START_TEST(test_range_read_and_tombstones)
{
	fixture f;
	setup_n(&f, 4);
	ovx_token_t t = tok(&f, "s");
	/* producer-consumer of spec 7.2 in miniature: per-prim queries */
	ovstage_query_handle_t one[4];
	for (int i = 0; i < 4; i++) {
		char p[32];
		snprintf(p, sizeof p, "/World/P%d", i);
		const char *pp = p;
		one[i] = query_of(&f, &pp, 1, NULL);
	}
	float v;
	v = 10;
	wait_ok(&f, write_f(&f, one[0], t, 1, &v, 1));
	v = 11;
	wait_ok(&f, write_f(&f, one[1], t, 1, &v, 1));
	seal(&f, 1);
	v = 21;
	wait_ok(&f, write_f(&f, one[1], t, 2, &v, 1));
	v = 22;
	wait_ok(&f, write_f(&f, one[2], t, 2, &v, 1));
	seal(&f, 2);
	wait_ok(&f, ovstage_delete_attributes(f.st, one[2], NULL, 0, 3)); /* whole prim */
	v = 33;
	wait_ok(&f, write_f(&f, one[3], t, 3, &v, 1));
	seal(&f, 3);
	read_result r;
	read_f(&f, f.q, t, span(2, 3), &r);
	ck_assert_int_eq(r.status, OVSTAGE_OK);
	ck_assert_int_eq(r.value_groups, 1);
	ck_assert_int_eq(r.tombstone_groups, 1);
	ck_assert(!r.present[0]); /* unchanged in [2, 3] */
	ck_assert(r.present[1] && r.vals[1] == 21.f);
	ck_assert(r.deleted[2]);
	ck_assert(r.present[3] && r.vals[3] == 33.f);
	/* values as of the range end, not the latest */
	v = 41;
	wait_ok(&f, write_f(&f, one[1], t, 4, &v, 1));
	v = 43;
	wait_ok(&f, write_f(&f, one[3], t, 4, &v, 1));
	seal(&f, 4);
	read_f(&f, f.q, t, span(3, 3), &r);
	ck_assert_int_eq(r.status, OVSTAGE_OK);
	ck_assert(!r.present[1]);                    /* changed at 4, not in [3, 3] */
	ck_assert(r.present[3] && r.vals[3] == 33.f); /* as of 3, although 43 is newer */
	ck_assert(r.deleted[2]);
	/* ordinal 2's version has left retention (2 versions kept: 3 and 4), but the end's is kept:
	 * membership comes from the rows' last changes as of 4 (P1 and P3 at 4, P2 deleted at 3) */
	read_f(&f, f.q, t, span(2, 4), &r);
	ck_assert_int_eq(r.status, OVSTAGE_OK);
	ck_assert(!r.present[0] && r.present[1] && r.deleted[2] && r.present[3]);
	ck_assert_float_eq(r.vals[1], 41.f);
	ovstage_ordinal_query_handle_t h;
	wait_ok(&f, ovstage_get_oldest_preserved_ordinal(f.st, &h));
	uint64_t oldest = 0;
	ck_assert_int_eq(ovstage_fetch_ordinal(f.st, h, 0, &oldest), OVSTAGE_OK);
	ck_assert_uint_eq(oldest, 3);
	wait_ok(&f, ovstage_release_ordinal_query(f.st, h));
	read_f(&f, f.q, t, span(3, 4), &r);
	ck_assert_int_eq(r.status, OVSTAGE_OK);
	ck_assert(r.present[1] && r.vals[1] == 41.f);
	/* attribute delete on one prim */
	wait_ok(&f, ovstage_delete_attributes(f.st, one[0], (ovx_string_or_token_t[]){ A(t) }, 1, 5));
	seal(&f, 5);
	read_f(&f, f.q, t, latest(5), &r);
	ck_assert(!r.present[0] && r.present[1] && !r.present[2] && r.present[3]);
	for (int i = 0; i < 4; i++)
		wait_ok(&f, ovstage_release_query(f.st, one[i]));
	teardown(&f);
}
END_TEST

START_TEST(test_atomic_multi_column_seal)
{
	fixture f;
	setup_n(&f, 2);
	ovx_token_t a = tok(&f, "pose"), b = tok(&f, "vel");
	float va[2], vb[2];
	for (uint64_t n = 1; n <= 30; n++) {
		va[0] = va[1] = vb[0] = vb[1] = (float)n;
		ovstage_enqueue_result_t e1 = write_f(&f, f.q, a, n, va, 2);
		ovstage_enqueue_result_t e2 = write_f(&f, f.q, b, n, vb, 2);
		seal(&f, n);
		wait_ok(&f, e1);
		wait_ok(&f, e2);
		/* one read of both columns sees the same sealed ordinal for both */
		ovx_token_t both[2] = { a, b };
		ovstage_read_handle_t rh;
		wait_ok(&f, ovstage_read_attributes(f.st, f.q, both, 2, latest(n), &rh));
		ovstage_read_group_t g;
		float seen[2] = { -1, -1 };
		int k = 0;
		while (ovstage_fetch_read_next(f.st, rh, 0, &g) == OVSTAGE_OK) {
			seen[g.attribute == a ? 0 : 1] = ((const float *)g.data.tensors[0].data)[0];
			k++;
			ck_assert_int_eq(ovstage_release_group(f.st, &g), OVSTAGE_OK);
		}
		ck_assert_int_eq(k, 2);
		ck_assert_float_eq(seen[0], (float)n);
		ck_assert_float_eq(seen[1], (float)n);
		wait_ok(&f, ovstage_release_read(f.st, rh));
	}
	teardown(&f);
}
END_TEST

/* ---- lifetimes ------------------------------------------------------------------------------- */

START_TEST(test_group_outlives_read_and_later_writes)
{
	fixture f;
	setup_n(&f, 3);
	ovx_token_t t = tok(&f, "x");
	float v1[] = { 1, 2, 3 }, v2[] = { 7, 8, 9 };
	wait_ok(&f, write_f(&f, f.q, t, 1, v1, 3));
	seal(&f, 1);
	ovstage_read_handle_t rh;
	wait_ok(&f, ovstage_read_attributes(f.st, f.q, &t, 1, latest(1), &rh));
	ovstage_read_group_t g;
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh, 0, &g), OVSTAGE_OK);
	wait_ok(&f, ovstage_release_read(f.st, rh)); /* the group stays valid */
	/* writes to the same prims proceed under the unreleased group, and seal */
	for (uint64_t n = 2; n <= 6; n++) {
		wait_ok(&f, write_f(&f, f.q, t, n, v2, 3));
		seal(&f, n);
	}
	const float *d = g.data.tensors[0].data;
	ck_assert_float_eq(d[0], 1.f);
	ck_assert_float_eq(d[2], 3.f);
	ck_assert_uint_eq(g.ordinal, 1);
	ck_assert(g.data.cuda_sync.stream == 0 && g.data.cuda_sync.wait_event == 0); /* CPU data: no sync */
	ck_assert_int_eq(ovstage_release_group(f.st, &g), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_release_group(f.st, &g), OVSTAGE_ERROR_INVALID_HANDLE);
	read_result r;
	read_f(&f, f.q, t, latest(6), &r);
	ck_assert_float_eq(r.vals[1], 8.f);
	teardown(&f);
}
END_TEST

/* ---- sparsity -------------------------------------------------------------------------------- */

START_TEST(test_mask_and_index_map)
{
	fixture f;
	setup_n(&f, 4);
	ovx_token_t t = tok(&f, "x");
	float base[] = { 1, 2, 3, 4 };
	wait_ok(&f, write_f(&f, f.q, t, 1, base, 4));
	/* mask: write elements 1 and 3 only; the payload still has a row per element */
	float mv[] = { 0, 20, 0, 40 };
	uint64_t mask = (1u << 1) | (1u << 3) | (1ull << 40); /* bits above count ignored */
	tensor1 tt;
	ovstage_write_data_t w = fdata(&tt, mv, 4, 1);
	w.mask = &mask;
	w.count = 4;
	wait_ok(&f, ovstage_write_attribute(f.st, f.q, A(t), 2, w, OVSTAGE_PRIM_MODE_UPSERT));
	/* index_map: broadcast one row to elements 0 and 2 of the first three, reorder */
	float iv[] = { 100, 200 };
	uint32_t im[] = { 1, 0, 1 };
	w = fdata(&tt, iv, 2, 1);
	w.index_map = im;
	w.count = 3;
	wait_ok(&f, ovstage_write_attribute(f.st, f.q, A(t), 3, w, OVSTAGE_PRIM_MODE_UPSERT));
	seal(&f, 3);
	read_result r;
	read_f(&f, f.q, t, latest(3), &r);
	ck_assert_float_eq(r.vals[0], 200.f);
	ck_assert_float_eq(r.vals[1], 100.f);
	ck_assert_float_eq(r.vals[2], 200.f);
	ck_assert_float_eq(r.vals[3], 40.f);
	read_f(&f, f.q, t, latest(2), &r);
	ck_assert_float_eq(r.vals[0], 1.f);
	ck_assert_float_eq(r.vals[1], 20.f);
	ck_assert_float_eq(r.vals[2], 3.f);
	ck_assert_float_eq(r.vals[3], 40.f);
	teardown(&f);
}
END_TEST

START_TEST(test_convenience_lanes_and_strides)
{
	fixture f;
	setup_n(&f, 2);
	ovx_token_t t = tok(&f, "p");
	/* (N, 3) lanes 1, transposed storage via strides: column-major 3x2 source */
	float src[6] = { 1, 4, 2, 5, 3, 6 }; /* element (r, c) at c * 2 + r */
	DLTensor d;
	memset(&d, 0, sizeof d);
	int64_t shape[2] = { 2, 3 }, strides[2] = { 1, 2 };
	d.data = src;
	d.device.device_type = kDLCPU;
	d.ndim = 2;
	d.dtype.code = kDLFloat;
	d.dtype.bits = 32;
	d.dtype.lanes = 1;
	d.shape = shape;
	d.strides = strides;
	ovstage_write_data_t w;
	memset(&w, 0, sizeof w);
	w.tensors = &d;
	w.tensor_count = 1;
	w.semantic = OVSTAGE_SEMANTIC_POINT;
	wait_ok(&f, ovstage_write_attribute(f.st, f.q, A(t), 1, w, OVSTAGE_PRIM_MODE_UPSERT));
	seal(&f, 1);
	ovstage_read_handle_t rh;
	wait_ok(&f, ovstage_read_attributes(f.st, f.q, &t, 1, latest(1), &rh));
	ovstage_read_group_t g;
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh, 0, &g), OVSTAGE_OK);
	/* canonical: 1-D, lanes 3 */
	ck_assert_int_eq(g.data.tensors[0].ndim, 1);
	ck_assert_int_eq(g.data.tensors[0].dtype.lanes, 3);
	ck_assert_int_eq(g.data.tensors[0].shape[0], 2);
	ck_assert_int_eq(g.semantic, OVSTAGE_SEMANTIC_POINT);
	const float *o = g.data.tensors[0].data;
	float want[6] = { 1, 2, 3, 4, 5, 6 };
	for (int i = 0; i < 6; i++)
		ck_assert_float_eq(o[i], want[i]);
	ck_assert_int_eq(ovstage_release_group(f.st, &g), OVSTAGE_OK);
	wait_ok(&f, ovstage_release_read(f.st, rh));
	teardown(&f);
}
END_TEST

/* ---- bad input ------------------------------------------------------------------------------- */

static _Atomic int deleter_calls;
static void count_deleter(DLManagedTensorVersioned *self)
{
	(void)self;
	atomic_fetch_add(&deleter_calls, 1);
}

START_TEST(test_bad_inputs)
{
	fixture f;
	setup_n(&f, 3);
	ovx_token_t t = tok(&f, "x");
	float v[] = { 1, 2, 3 };
	tensor1 tt;
	ovstage_write_data_t w = fdata(&tt, v, 3, 1);
	/* stale query handle */
	ovstage_enqueue_result_t e = ovstage_write_attribute(f.st, 987654, A(t), 1, w, OVSTAGE_PRIM_MODE_UPSERT);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_INVALID_HANDLE);
	ck_assert_msg(strstr(last_error(), "987654"), "%s", last_error());
	/* wrong shape: 2 rows for 3 prims */
	w = fdata(&tt, v, 2, 1);
	e = ovstage_write_attribute(f.st, f.q, A(t), 1, w, OVSTAGE_PRIM_MODE_UPSERT);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(last_error(), "\"x\""), "%s", last_error());
	/* index_map out of range */
	uint32_t im[] = { 0, 5, 1 };
	w = fdata(&tt, v, 3, 1);
	w.index_map = im;
	w.count = 3;
	e = ovstage_write_attribute(f.st, f.q, A(t), 1, w, OVSTAGE_PRIM_MODE_UPSERT);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(last_error(), "index_map[1] = 5"), "%s", last_error());
	/* index_map with mask */
	uint64_t mask = 7;
	w.mask = &mask;
	e = ovstage_write_attribute(f.st, f.q, A(t), 1, w, OVSTAGE_PRIM_MODE_UPSERT);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_INVALID_ARGUMENT);
	/* count above query count */
	w = fdata(&tt, v, 3, 1);
	w.count = 4;
	w.mask = &mask;
	e = ovstage_write_attribute(f.st, f.q, A(t), 1, w, OVSTAGE_PRIM_MODE_UPSERT);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_INVALID_ARGUMENT);
	/* bad prim mode */
	w = fdata(&tt, v, 3, 1);
	e = ovstage_write_attribute(f.st, f.q, A(t), 1, w, (ovstage_prim_mode_t)7);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_INVALID_ARGUMENT);
	/* dtype change rejected once the column exists */
	wait_ok(&f, ovstage_write_attribute(f.st, f.q, A(t), 1, w, OVSTAGE_PRIM_MODE_UPSERT));
	int32_t iv[] = { 1, 2, 3 };
	w = fdata(&tt, NULL, 3, 1);
	tt.t.data = iv;
	tt.t.dtype.code = kDLInt;
	e = ovstage_write_attribute(f.st, f.q, A(t), 2, w, OVSTAGE_PRIM_MODE_UPSERT);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(last_error(), "float32"), "%s", last_error());
	/* INSERT on existing prims */
	w = fdata(&tt, v, 3, 1);
	char msg[600];
	ck_assert_uint_eq(wait_op(&f, ovstage_write_attribute(f.st, f.q, A(t), 2, w, OVSTAGE_PRIM_MODE_INSERT), msg,
				  sizeof msg), 1);
	ck_assert_msg(strstr(msg, "already exists"), "%s", msg);
	/* op ids: unknown, released twice, other instance */
	ck_assert_int_eq(ovstage_release_op(f.st, 123456789), OVSTAGE_ERROR_INVALID_HANDLE);
	e = write_f(&f, f.q, t, 3, v, 3);
	ck_assert_int_eq(e.status, OVSTAGE_OK);
	ovstage_instance_t *other;
	ck_assert_int_eq(ovstage_create_instance(NULL, &other), OVSTAGE_OK);
	ovstage_op_wait_result_t wr;
	ck_assert_int_eq(ovstage_wait_op(other, e.op_index, 0, &wr), OVSTAGE_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(ovstage_release_op(other, e.op_index), OVSTAGE_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(ovstage_destroy_instance(other), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_wait_op(f.st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_release_op(f.st, e.op_index), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_release_op(f.st, e.op_index), OVSTAGE_ERROR_INVALID_HANDLE);
	/* range start after end */
	ovstage_read_handle_t rh;
	e = ovstage_read_attributes(f.st, f.q, &t, 1, span(5, 2), &rh);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_uint_eq(rh, OVSTAGE_INVALID_READ_HANDLE);
	/* NULLs */
	ck_assert_int_eq(ovstage_advance_write_floor(f.st, NULL).status, OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, 42, 0, NULL), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ovstage_read_group_t g;
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, 42, 0, &g), OVSTAGE_ERROR_INVALID_HANDLE);
	/* destroy with caller-visible data held (a query result) reports it and keeps the instance
	 * (a destroy with only queries or op ids left releases them: check_destroy.c) */
	ovstage_query_handle_t extra = query_of(&f, (const char *[]){ "/World/P0" }, 1, NULL);
	ovstage_query_result_t res;
	ck_assert_int_eq(ovstage_fetch_query_result(f.st, extra, OVSTAGE_TIMEOUT_INFINITE, &res), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_destroy_instance(f.st), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(last_error(), "1 query result"), "%s", last_error());
	ck_assert_int_eq(ovstage_release_query_result(f.st, &res), OVSTAGE_OK);
	wait_ok(&f, ovstage_release_query(f.st, extra));
	teardown(&f);
}
END_TEST

START_TEST(test_managed_deleter_exactly_once)
{
	fixture f;
	setup_n(&f, 3);
	ovx_token_t t = tok(&f, "m");
	atomic_store(&deleter_calls, 0);
	float v[] = { 1, 2, 3 };
	int64_t shape[] = { 3 };
	DLManagedTensorVersioned mt;
	memset(&mt, 0, sizeof mt);
	mt.dl_tensor.data = v;
	mt.dl_tensor.device.device_type = kDLCPU;
	mt.dl_tensor.ndim = 1;
	mt.dl_tensor.dtype.code = kDLFloat;
	mt.dl_tensor.dtype.bits = 32;
	mt.dl_tensor.dtype.lanes = 1;
	mt.dl_tensor.shape = shape;
	mt.deleter = count_deleter;
	const DLManagedTensorVersioned *arr[1] = { &mt };
	ovstage_write_data_t w;
	memset(&w, 0, sizeof w);
	w.managed_tensors = arr;
	w.tensor_count = 1;
	/* accepted and adopted zero-copy: the deleter runs when the version is reclaimed */
	wait_ok(&f, ovstage_write_attribute(f.st, f.q, A(t), 1, w, OVSTAGE_PRIM_MODE_UPSERT));
	seal(&f, 1);
	read_result r;
	read_f(&f, f.q, t, latest(1), &r);
	ck_assert_float_eq(r.vals[2], 3.f);
	ck_assert_int_eq(atomic_load(&deleter_calls), 0);
	/* two more full writes push version 1 out of retention */
	float v2[] = { 4, 5, 6 };
	wait_ok(&f, write_f(&f, f.q, t, 2, v2, 3));
	seal(&f, 2);
	wait_ok(&f, write_f(&f, f.q, t, 3, v2, 3));
	seal(&f, 3);
	ck_assert_int_eq(atomic_load(&deleter_calls), 1);
	/* rejected synchronously (floor violation): the deleter runs once at the call */
	ovstage_enqueue_result_t e = ovstage_write_attribute(f.st, f.q, A(t), 1, w, OVSTAGE_PRIM_MODE_UPSERT);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION);
	ck_assert_int_eq(atomic_load(&deleter_calls), 2);
	/* rejected for a bad layout */
	mt.dl_tensor.ndim = -1;
	e = ovstage_write_attribute(f.st, f.q, A(t), 5, w, OVSTAGE_PRIM_MODE_UPSERT);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(atomic_load(&deleter_calls), 3);
	/* duplicated within a batch: rejected, released once */
	mt.dl_tensor.ndim = 1;
	ovstage_attribute_write_t ws[2] = { { A(t), w }, { A(tok(&f, "m2")), w } };
	e = ovstage_write_attributes(f.st, f.q, ws, 2, 6, OVSTAGE_PRIM_MODE_UPSERT);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(atomic_load(&deleter_calls), 4);
	/* copied (sparse via mask): the deleter runs when the op is done */
	uint64_t mask = 1;
	w.mask = &mask;
	w.count = 3;
	wait_ok(&f, ovstage_write_attribute(f.st, f.q, A(t), 7, w, OVSTAGE_PRIM_MODE_UPSERT));
	ck_assert_int_eq(atomic_load(&deleter_calls), 5);
	teardown(&f);
	ck_assert_int_eq(atomic_load(&deleter_calls), 5);
}
END_TEST


/* ---- map / unmap ----------------------------------------------------------------------------- */

static ovstage_map_handle_t map_open(fixture *f, ovstage_query_handle_t q, ovx_token_t t, uint64_t ord, int lanes,
				     ovstage_map_group_t *g)
{
	ovstage_map_desc_t d;
	memset(&d, 0, sizeof d);
	d.attribute = A(t);
	d.dtype.code = kDLFloat;
	d.dtype.bits = 32;
	d.dtype.lanes = (uint16_t)lanes;
	d.prim_mode = OVSTAGE_PRIM_MODE_UPSERT;
	ovstage_map_handle_t m;
	wait_ok(f, ovstage_map_attribute(f->st, q, &d, ord, NULL, 0, &m));
	ck_assert_int_eq(ovstage_fetch_map_next(f->st, m, OVSTAGE_TIMEOUT_INFINITE, g), OVSTAGE_OK);
	ck_assert_int_eq(g->data.tensor_count, 1);
	ck_assert_int_eq(g->data.tensors[0].ndim, 1);
	ck_assert_int_eq(g->data.tensors[0].dtype.lanes, lanes);
	return m;
}

START_TEST(test_map_unmap_zero_copy)
{
	fixture f;
	setup_n(&f, 4);
	ovx_token_t t = tok(&f, "pose");
	ovstage_cuda_sync_t none = { 0, 0 };
	ovstage_map_group_t g;
	/* a new column mapped whole: the session buffer becomes the sealed version's buffer */
	ovstage_map_handle_t m = map_open(&f, f.q, t, 1, 2, &g);
	float *dst = g.data.tensors[0].data;
	for (int i = 0; i < 8; i++)
		dst[i] = (float)(i + 1);
	ovstage_map_group_t g2;
	ck_assert_int_eq(ovstage_fetch_map_next(f.st, m, 0, &g2), OVSTAGE_ERROR_END_OF_ITERATION);
	wait_ok(&f, ovstage_unmap_group(f.st, m, &g, none));
	/* a floor advance through the session ordinal waits for the commit */
	ovstage_write_floor_desc_t fd = { 1, OVSTAGE_SCOPE_ALL, NULL, 0 };
	ovstage_enqueue_result_t sealer = ovstage_advance_write_floor(f.st, &fd);
	ck_assert_int_eq(sealer.status, OVSTAGE_OK);
	ovstage_op_wait_result_t wr;
	ck_assert_int_eq(ovstage_wait_op(f.st, sealer.op_index, 20000000, &wr), OVSTAGE_ERROR_TIMEOUT);
	wait_ok(&f, ovstage_unmap_attribute(f.st, m, none));
	wait_ok(&f, sealer);
	ck_assert_int_eq(ovstage_unmap_attribute(f.st, m, none).status, OVSTAGE_ERROR_INVALID_HANDLE);
	ovstage_read_handle_t rh;
	wait_ok(&f, ovstage_read_attributes(f.st, f.q, &t, 1, latest(1), &rh));
	ovstage_read_group_t rg;
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh, 0, &rg), OVSTAGE_OK);
	ck_assert_ptr_eq(rg.data.tensors[0].data, dst); /* zero copy, end to end */
	ck_assert_float_eq(((const float *)rg.data.tensors[0].data)[7], 8.f);
	ck_assert_int_eq(ovstage_release_group(f.st, &rg), OVSTAGE_OK);
	wait_ok(&f, ovstage_release_read(f.st, rh));
	/* a partial map (one prim): staging, committed as rows */
	const char *p2 = "/World/P2";
	ovstage_query_handle_t one = query_of(&f, &p2, 1, NULL);
	m = map_open(&f, one, t, 2, 2, &g);
	((float *)g.data.tensors[0].data)[0] = 50.f;
	((float *)g.data.tensors[0].data)[1] = 60.f;
	wait_ok(&f, ovstage_unmap_attribute(f.st, m, none));
	seal(&f, 2);
	read_result r;
	ovstage_read_handle_t rh2;
	wait_ok(&f, ovstage_read_attributes(f.st, f.q, &t, 1, latest(2), &rh2));
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh2, 0, &rg), OVSTAGE_OK);
	const float *o = rg.data.tensors[0].data;
	ck_assert_float_eq(o[2 * 2], 50.f);
	ck_assert_float_eq(o[2 * 2 + 1], 60.f);
	ck_assert_float_eq(o[0], 1.f);
	ck_assert_int_eq(ovstage_release_group(f.st, &rg), OVSTAGE_OK);
	wait_ok(&f, ovstage_release_read(f.st, rh2));
	(void)r;
	/* errors: new column without dtype (fails in the op), dtype change, array map, CUDA sync */
	ovstage_map_desc_t d;
	memset(&d, 0, sizeof d);
	d.attribute = A(tok(&f, "fresh"));
	char msg[600];
	ck_assert_uint_eq(wait_op(&f, ovstage_map_attribute(f.st, f.q, &d, 3, NULL, 0, &m), msg, sizeof msg), 1);
	ck_assert_msg(strstr(msg, "desc.dtype is required"), "%s", msg);
	ck_assert_int_eq(ovstage_fetch_map_next(f.st, m, OVSTAGE_TIMEOUT_INFINITE, &g), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(last_error(), "map failed"), "%s", last_error());
	ck_assert_uint_ge(wait_op(&f, ovstage_unmap_attribute(f.st, m, none), msg, sizeof msg), 1);
	d.attribute = A(t);
	d.dtype.code = kDLInt;
	d.dtype.bits = 32;
	d.dtype.lanes = 2;
	ck_assert_int_eq(ovstage_map_attribute(f.st, f.q, &d, 3, NULL, 0, &m).status, OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(last_error(), "float32x2"), "%s", last_error());
	size_t sizes[4] = { 1, 2, 3, 4 };
	ck_assert_int_eq(ovstage_map_attribute(f.st, f.q, &d, 3, sizes, 4, &m).status, OVSTAGE_ERROR_NOT_SUPPORTED);
	d.dtype.code = kDLFloat;
	m = map_open(&f, f.q, t, 4, 2, &g);
	ovstage_cuda_sync_t cs = { 1, 0 };
	ck_assert_int_eq(ovstage_unmap_attribute(f.st, m, cs).status, OVSTAGE_ERROR_NOT_SUPPORTED);
	wait_ok(&f, ovstage_unmap_attribute(f.st, m, none));
	/* below the floor: rejected at the call */
	ck_assert_int_eq(ovstage_map_attribute(f.st, f.q, &d, 2, NULL, 0, &m).status,
			 OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION);
	wait_ok(&f, ovstage_release_query(f.st, one));
	teardown(&f);
}
END_TEST


/* ---- sparse seals against a model (recycled buffers must replay every retained delta) -------- */

START_TEST(test_sparse_seals_match_model)
{
	enum { N = 40, STEPS = 60 };
	fixture f;
	setup_n(&f, N);
	ovx_token_t t = tok(&f, "model");
	float model[STEPS + 1][N];
	bool present[STEPS + 1][N];
	static float src[STEPS + 1][N];
	static uint64_t masks[STEPS + 1];
	uint64_t rng = 12345;
	ovstage_read_group_t held;
	bool holding = false;
	for (int s = 1; s <= STEPS; s++) {
		for (int i = 0; i < N; i++) {
			model[s][i] = s > 1 ? model[s - 1][i] : 0;
			present[s][i] = s > 1 ? present[s - 1][i] : false;
			src[s][i] = (float)(s * 1000 + i);
		}
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		int kind = s == 1 ? 0 : (int)((rng >> 33) % 5); /* 0 full, 1-3 sparse, 4 delete a few */
		tensor1 tt;
		ovstage_write_data_t w = fdata(&tt, src[s], N, 1);
		if (kind == 0) {
			wait_ok(&f, ovstage_write_attribute(f.st, f.q, A(t), (uint64_t)s, w, OVSTAGE_PRIM_MODE_UPSERT));
			for (int i = 0; i < N; i++) {
				model[s][i] = src[s][i];
				present[s][i] = true;
			}
		} else if (kind < 4) {
			masks[s] = ((rng >> 7) & ((1ull << N) - 1)) | 1;
			w.mask = &masks[s];
			w.count = N;
			wait_ok(&f, ovstage_write_attribute(f.st, f.q, A(t), (uint64_t)s, w, OVSTAGE_PRIM_MODE_UPSERT));
			for (int i = 0; i < N; i++)
				if ((masks[s] >> i) & 1) {
					model[s][i] = src[s][i];
					present[s][i] = true;
				}
		} else {
			int victim = (int)((rng >> 40) % N);
			char p[32];
			snprintf(p, sizeof p, "/World/P%d", victim);
			const char *pp = p;
			ovstage_query_handle_t one = query_of(&f, &pp, 1, NULL);
			wait_ok(&f, ovstage_delete_attributes(f.st, one, (ovx_string_or_token_t[]){ A(t) }, 1, (uint64_t)s));
			wait_ok(&f, ovstage_release_query(f.st, one));
			present[s][victim] = false;
		}
		seal(&f, (uint64_t)s);
		/* sometimes hold a group across seals: its version's buffer must not be recycled */
		if (s % 7 == 3 && !holding) {
			ovstage_read_handle_t rh;
			wait_ok(&f, ovstage_read_attributes(f.st, f.q, &t, 1, latest((uint64_t)s), &rh));
			holding = ovstage_fetch_read_next(f.st, rh, 0, &held) == OVSTAGE_OK;
			wait_ok(&f, ovstage_release_read(f.st, rh));
		} else if (holding && s % 7 == 6) {
			ck_assert_int_eq(ovstage_release_group(f.st, &held), OVSTAGE_OK);
			holding = false;
		}
		if (holding) { /* the held view never changes */
			const float *d = held.data.tensors[0].data;
			for (uint32_t k = 0; k < held.prims.count; k++) {
				uint32_t i = held.prims.index_map ? held.prims.index_map[k] : k;
				uint32_t row = held.data.index_map ? held.data.index_map[k] : k;
				ck_assert_float_eq(d[row], model[held.ordinal][i]);
			}
		}
		for (uint64_t back = 0; back < 2 && back < (uint64_t)s; back++) {
			read_result r;
			read_f(&f, f.q, t, latest((uint64_t)s - back), &r);
			ck_assert_int_eq(r.status, OVSTAGE_OK);
			for (int i = 0; i < N; i++) {
				ck_assert_msg(r.present[i] == present[s - back][i], "step %d as of %llu prim %d presence", s,
					      (unsigned long long)(s - back), i);
				if (present[s - back][i])
					ck_assert_msg(r.vals[i] == model[s - back][i], "step %d as of %llu prim %d: %g != %g", s,
						      (unsigned long long)(s - back), i, r.vals[i], model[s - back][i]);
			}
		}
	}
	if (holding)
		ck_assert_int_eq(ovstage_release_group(f.st, &held), OVSTAGE_OK);
	teardown(&f);
}
END_TEST

/* Reads the latest value of every element of f->q, a float32 x lanes column, into vals (lane 0; n
 * of them); false where absent. Every other lane k must be lane 0 + k (the tests' values). */
static void read_all_lanes(fixture *f, ovx_token_t attr, uint64_t n_ord, int lanes, float *vals, bool *present)
{
	memset(present, 0, f->n * sizeof *present);
	ovstage_read_handle_t rh;
	wait_ok(f, ovstage_read_attributes(f->st, f->q, &attr, 1, latest(n_ord), &rh));
	ovstage_read_group_t g;
	ovstage_api_status_t s;
	while ((s = ovstage_fetch_read_next(f->st, rh, OVSTAGE_TIMEOUT_INFINITE, &g)) == OVSTAGE_OK) {
		const float *d = g.data.tensors[0].data;
		for (uint32_t i = 0; i < g.prims.count; i++) {
			uint32_t e = g.prims.index_map ? g.prims.index_map[i] : g.prims.offset + i;
			const float *row = d + (size_t)(g.data.index_map ? g.data.index_map[i] : i) * (size_t)lanes;
			for (int k = 1; k < lanes; k++)
				ck_assert_msg(row[k] == row[0] + (float)k, "prim %u lane %d: %g, lane 0 %g", e, k,
					      (double)row[k], (double)row[0]);
			vals[e] = row[0];
			present[e] = true;
		}
		ck_assert_int_eq(ovstage_release_group(f->st, &g), OVSTAGE_OK);
	}
	ck_assert_int_eq(s, OVSTAGE_ERROR_END_OF_ITERATION);
	wait_ok(f, ovstage_release_read(f->st, rh));
}

/* The same for a float32 column. */
static void read_all_f(fixture *f, ovx_token_t attr, uint64_t n_ord, float *vals, bool *present)
{
	read_all_lanes(f, attr, n_ord, 1, vals, present);
}

/* After step s of test_large_masks_*: every element i of n read back present with model[i]. */
static void expect_model(int s, const float *got, const bool *present, const float *model, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		ck_assert_msg(present[i] && got[i] == model[i], "step %d element %u: %g, want %g", s, i,
			      present[i] ? (double)got[i] : -1.0, (double)model[i]);
}

/* Step s's pattern of test_large_masks_*: whether element i of n is selected. */
static bool large_mask_selects(int s, uint32_t i, uint32_t n, uint64_t *rng)
{
	return s == 1 ? true
	       : s == 2 ? i >= 37000 && i < 77000
	       : s == 3 ? i % 3 == 0
	       : s == 4 ? tst_rnd(rng) % 10 < 3
	       : s == 5 ? tst_rnd(rng) % 200 == 0
	       : s == 6 ? i >= n - 20000
			: i >= 65536 - 64 * 300 && i < 65536 + 64 * 300;
}

START_TEST(test_large_masks_parallel_gather)
{
	/* Masks over a query of N elements (seven 32 Ki-element blocks, the last word partial): the
	 * count and the gather of a masked contiguous payload split across the workers by blocks, and
	 * every element must get exactly its own value or keep the previous one. Patterns: a block
	 * crossing block boundaries, every third element, ~30 % at random, a few (one thread gathers
	 * them), the tail, and a whole word range at a block boundary. */
	enum { N = 200003, STEPS = 7 };
	fixture f;
	setup_n(&f, N);
	ovx_token_t t = tok(&f, "masked");
	float *src = malloc(N * sizeof *src), *model = malloc(N * sizeof *model), *got = malloc(N * sizeof *got);
	bool *present = malloc(N * sizeof *present);
	uint64_t *mask = calloc((N + 63) / 64, sizeof *mask);
	ck_assert(src && model && got && present && mask);
	uint64_t rng = 99;
	for (int s = 1; s <= STEPS; s++) {
		memset(mask, 0, (N + 63) / 64 * sizeof *mask);
		for (uint32_t i = 0; i < N; i++) {
			if (large_mask_selects(s, i, N, &rng))
				mask[i / 64] |= (uint64_t)1 << (i % 64);
			src[i] = (float)i + 0.25f * (float)s;
		}
		mask[(N - 1) / 64] |= ~(uint64_t)0 << (N % 64); /* bits past the count are ignored */
		tensor1 tt;
		ovstage_write_data_t w = fdata(&tt, src, N, 1);
		if (s > 1) {
			w.mask = mask;
			w.count = N;
		}
		wait_ok(&f, ovstage_write_attribute(f.st, f.q, A(t), (uint64_t)s, w, OVSTAGE_PRIM_MODE_UPSERT));
		for (uint32_t i = 0; i < N; i++)
			if (s == 1 || (mask[i / 64] >> (i % 64) & 1))
				model[i] = src[i];
		seal(&f, (uint64_t)s);
		read_all_f(&f, t, (uint64_t)s, got, present);
		expect_model(s, got, present, model, N);
	}
	free(src);
	free(model);
	free(got);
	free(present);
	free(mask);
	teardown(&f);
}
END_TEST

START_TEST(test_large_masks_strided_rows)
{
	/* The same patterns from a strided host source (every other float32x8 of a 2N array: 6.4 MB,
	 * so the write runs on a worker), which lists the selected elements' rows from the mask (split
	 * across the workers by the same blocks) and copies the values apart, through three cached row
	 * maps: the fixture's query (the identity), a reversed one (element j is prim N-1-j) and a block
	 * (element j is prim B0+j: the rows' shape is set from the mask, not scanned). Every element
	 * must get exactly its own value or keep the previous one. */
	enum { N = 200003, STEPS = 7, L = 8, B0 = 3001 };
	fixture f;
	setup_n(&f, N);
	ovx_token_t t = tok(&f, "strided");
	char (*names)[32] = malloc(N * sizeof *names);
	const char **rev = malloc(N * sizeof *rev), **blk = malloc(N * sizeof *blk);
	float *src = malloc(2 * N * L * sizeof *src), *model = malloc(N * sizeof *model), *got = malloc(N * sizeof *got);
	bool *present = malloc(N * sizeof *present);
	uint64_t *mask = calloc((N + 63) / 64, sizeof *mask);
	ck_assert(names && rev && blk && src && model && got && present && mask);
	for (uint32_t j = 0; j < N; j++) {
		snprintf(names[j], sizeof names[j], "/World/P%u", j);
		rev[j] = names[N - 1 - j];
	}
	for (uint32_t j = 0; j < N - B0; j++)
		blk[j] = names[B0 + j];
	ovstage_query_handle_t qs[3] = { f.q, query_of(&f, rev, N, NULL), query_of(&f, blk, N - B0, NULL) };
	uint64_t rng = 7;
	for (int s = 1; s <= 3 * STEPS; s++) {
		int phase = (s - 1) / STEPS, pat = s - phase * STEPS;
		uint32_t nq = phase == 2 ? N - B0 : N; /* elements of the query */
		memset(mask, 0, (N + 63) / 64 * sizeof *mask);
		for (uint32_t j = 0; j < nq; j++) {
			if (large_mask_selects(pat, j, nq, &rng))
				mask[j / 64] |= (uint64_t)1 << (j % 64);
			for (int k = 0; k < L; k++) {
				src[(2 * j) * L + k] = (float)j + 0.25f * (float)s + (float)k;
				src[(2 * j + 1) * L + k] = -1.0f; /* never written: the stride skips it */
			}
		}
		int64_t stride = 2;
		tensor1 tt;
		ovstage_write_data_t w = fdata(&tt, src, nq, L);
		tt.t.strides = &stride;
		if (pat > 1) {
			w.mask = mask;
			w.count = nq;
		}
		wait_ok(&f, ovstage_write_attribute(f.st, qs[phase], A(t), (uint64_t)s, w, OVSTAGE_PRIM_MODE_UPSERT));
		for (uint32_t j = 0; j < nq; j++)
			if (pat == 1 || (mask[j / 64] >> (j % 64) & 1))
				model[phase == 0 ? j : phase == 1 ? N - 1 - j : B0 + j] = src[2 * j * L];
		seal(&f, (uint64_t)s);
		read_all_lanes(&f, t, (uint64_t)s, L, got, present);
		expect_model(s, got, present, model, N);
	}
	wait_ok(&f, ovstage_release_query(f.st, qs[1]));
	wait_ok(&f, ovstage_release_query(f.st, qs[2]));
	free(names);
	free(rev);
	free(blk);
	free(src);
	free(model);
	free(got);
	free(present);
	free(mask);
	teardown(&f);
}
END_TEST

START_TEST(test_blocks_overwriting_whole_chunks)
{
	/* Producers each writing their own block of a column at every ordinal: the seal builds chunks
	 * that several contiguous deltas overwrite in full (with copy slots and spares; the chunk1k run
	 * has 256-row chunks). Blocks of 50,000 rows (not chunk-aligned),
	 * some ordinals leaving a block out or overlapping two, a group held across seals: every value
	 * of every version read is checked, and the held group never changes. */
	enum { N = 200000, B = 50000, STEPS = 12 };
	fixture f;
	setup_n(&f, N);
	ovx_token_t t = tok(&f, "blocks");
	char **names = malloc(N * sizeof *names);
	for (int i = 0; i < N; i++) {
		names[i] = malloc(24);
		snprintf(names[i], 24, "/World/P%d", i);
	}
	ovstage_query_handle_t q[5];
	for (int b = 0; b < 4; b++)
		q[b] = query_of(&f, (const char *const *)names + b * B, B, NULL);
	q[4] = query_of(&f, (const char *const *)names + 30000, 40000, NULL); /* overlaps blocks 0 and 1 */
	float *src = malloc(N * sizeof *src), *model = malloc(N * sizeof *model), *got = malloc(N * sizeof *got),
	      *held_model = malloc(N * sizeof *held_model);
	bool *present = malloc(N * sizeof *present);
	ck_assert(src && model && got && held_model && present);
	ovstage_read_group_t held;
	bool holding = false;
	for (int s = 1; s <= STEPS; s++) {
		for (int i = 0; i < N; i++)
			src[i] = (float)(s * 1000000 + i);
		ovstage_enqueue_result_t e[5];
		int ne = 0;
		for (int b = 0; b < 4; b++) {
			if (s > 1 && s % 4 == b) /* now and then a block is left out: its chunks are shared */
				continue;
			e[ne++] = write_f(&f, q[b], t, (uint64_t)s, src + b * B, B);
			for (int i = b * B; i < (b + 1) * B; i++)
				model[i] = src[i];
		}
		if (s % 3 == 0) { /* a block over two others, submitted last: it wins where they overlap */
			for (int i = 30000; i < 70000; i++)
				src[i] += 0.5f;
			e[ne++] = write_f(&f, q[4], t, (uint64_t)s, src + 30000, 40000);
			for (int i = 30000; i < 70000; i++)
				model[i] = src[i];
		}
		seal(&f, (uint64_t)s);
		for (int k = 0; k < ne; k++)
			wait_ok(&f, e[k]);
		read_all_f(&f, t, (uint64_t)s, got, present);
		for (int i = 0; i < N; i++)
			ck_assert_msg(present[i] && got[i] == model[i], "ordinal %d element %d: %g, want %g", s, i,
				      present[i] ? (double)got[i] : -1.0, (double)model[i]);
		if (s == 4) { /* hold the version of 4 for the rest of the test */
			ovstage_read_handle_t rh;
			wait_ok(&f, ovstage_read_attributes(f.st, f.q, &t, 1, latest(4), &rh));
			holding = ovstage_fetch_read_next(f.st, rh, 0, &held) == OVSTAGE_OK;
			wait_ok(&f, ovstage_release_read(f.st, rh));
			memcpy(held_model, model, N * sizeof *model);
		}
	}
	ck_assert(holding);
	const float *d = held.data.tensors[0].data;
	for (uint32_t k = 0; k < held.prims.count; k++) {
		uint32_t i = held.prims.index_map ? held.prims.index_map[k] : held.prims.offset + k;
		ck_assert_float_eq(d[held.data.index_map ? held.data.index_map[k] : k], held_model[i]);
	}
	ck_assert_int_eq(ovstage_release_group(f.st, &held), OVSTAGE_OK);
	for (int b = 0; b < 5; b++)
		wait_ok(&f, ovstage_release_query(f.st, q[b]));
	for (int i = 0; i < N; i++)
		free(names[i]);
	free(names);
	free(src);
	free(model);
	free(got);
	free(held_model);
	free(present);
	teardown(&f);
}
END_TEST

/* ---- clone ----------------------------------------------------------------------------------- */

START_TEST(test_clone_subtree)
{
	fixture f;
	setup_n(&f, 1);
	ovx_token_t mass = tok(&f, "mass");
	const char *src[2] = { "/World/Proto/Rig", "/World/Proto/Rig/Arm" };
	ovstage_query_handle_t qs = query_of(&f, src, 2, NULL);
	float v[2] = { 5, 7 };
	wait_ok(&f, write_f(&f, qs, mass, 2, v, 2));
	/* a relationship on the rig: one target inside the subtree, one outside */
	ovx_string_t rp[3] = { { "/World/Proto/Rig/Arm", 20 }, { "/World/Other", 12 }, { "/World/Env0/Rig/Arm", 19 } };
	ovx_primpath_t rids[3];
	ck_assert_int_eq(path_dictionary_create_paths_from_strings(f.pd, rp, 3, rids).status, OVX_API_SUCCESS);
	ovx_token_t rel = tok(&f, "physics:body");
	uint64_t targets[2] = { rids[0], rids[1] };
	int64_t tlen = 2;
	DLTensor rt;
	memset(&rt, 0, sizeof rt);
	rt.data = targets;
	rt.device.device_type = kDLCPU;
	rt.ndim = 1;
	rt.dtype.code = kDLUInt;
	rt.dtype.bits = 64;
	rt.dtype.lanes = 1;
	rt.shape = &tlen;
	ovstage_write_data_t rw;
	memset(&rw, 0, sizeof rw);
	rw.tensors = &rt;
	rw.tensor_count = 1;
	rw.count = 1;
	rw.mask = (const uint64_t[]){ 1 };
	rw.is_array = true;
	rw.semantic = OVSTAGE_SEMANTIC_RELATIONSHIP_PATH_ID;
	wait_ok(&f, ovstage_write_attribute(f.st, qs, A(rel), 2, rw, OVSTAGE_PRIM_MODE_UPSERT));
	seal(&f, 2);
	ovx_string_t from = { "/World/Proto/Rig", strlen("/World/Proto/Rig") };
	ovx_string_t to[2] = { { "/World/Env0/Rig", 15 }, { "/World/Env1/Rig", 15 } };
	wait_ok(&f, ovstage_clone(f.st, from, to, 2, 3));
	seal(&f, 3);
	const char *dst[5] = { "/World/Env0/Rig", "/World/Env0/Rig/Arm", "/World/Env1/Rig", "/World/Env1/Rig/Arm",
			       "/World/Proto/Rig" };
	ovstage_query_handle_t qd = query_of(&f, dst, 5, NULL);
	read_result r;
	read_f(&f, qd, mass, latest(3), &r);
	ck_assert_int_eq(r.status, OVSTAGE_OK);
	ck_assert(r.present[0] && r.vals[0] == 5.f);
	ck_assert(r.present[1] && r.vals[1] == 7.f);
	ck_assert(r.present[2] && r.vals[2] == 5.f);
	ck_assert(r.present[3] && r.vals[3] == 7.f);
	ck_assert(r.present[4] && r.vals[4] == 5.f);
	/* path values inside the source subtree point into each clone; outside ones are unchanged */
	ovstage_read_handle_t rrh;
	wait_ok(&f, ovstage_read_attributes(f.st, qd, &rel, 1, latest(3), &rrh));
	ovstage_read_group_t rgp;
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, rrh, 0, &rgp), OVSTAGE_OK);
	ck_assert(rgp.is_array);
	bool checked_env0 = false;
	for (uint32_t k = 0; k < rgp.prims.count; k++) {
		uint32_t e = rgp.prims.index_map ? rgp.prims.index_map[k] : k;
		const uint64_t *d = rgp.data.tensors[k].data;
		ck_assert_int_eq(rgp.data.tensors[k].shape[0], 2);
		ck_assert_uint_eq(d[1], rids[1]);
		if (e == 0) { /* /World/Env0/Rig */
			ck_assert_uint_eq(d[0], rids[2]);
			checked_env0 = true;
		}
		if (e == 4) /* the source keeps its own */
			ck_assert_uint_eq(d[0], rids[0]);
	}
	ck_assert(checked_env0);
	ck_assert_int_eq(ovstage_release_group(f.st, &rgp), OVSTAGE_OK);
	wait_ok(&f, ovstage_release_read(f.st, rrh));
	/* the clone is change-tracked at its ordinal */
	read_f(&f, qd, mass, span(3, 3), &r);
	ck_assert(r.present[0] && r.present[3] && !r.present[4]);
	/* existing target: PRIM_NOT_FOUND, nothing created */
	char msg[600];
	ovx_string_t again[2] = { { "/World/Env2/Rig", 15 }, { "/World/Env0/Rig", 15 } };
	ck_assert_uint_eq(wait_op(&f, ovstage_clone(f.st, from, again, 2, 4), msg, sizeof msg), 1);
	ck_assert_msg(strstr(msg, "/World/Env0/Rig") && strstr(msg, "already exists"), "%s", msg);
	seal(&f, 4);
	const char *env2 = "/World/Env2/Rig";
	ovstage_query_handle_t q2 = query_of(&f, &env2, 1, NULL);
	read_f(&f, q2, mass, latest(4), &r);
	ck_assert(!r.present[0]);
	/* missing source: NOT_FOUND */
	ovx_string_t missing = { "/World/Nope", 11 };
	ck_assert_uint_eq(wait_op(&f, ovstage_clone(f.st, missing, to, 1, 5), msg, sizeof msg), 1);
	ck_assert_msg(strstr(msg, "does not exist"), "%s", msg);
	/* synchronous rejections */
	ovx_string_t inside = { "/World/Proto/Rig/Arm/Copy", 25 };
	ck_assert_int_eq(ovstage_clone(f.st, from, &inside, 1, 6).status, OVSTAGE_ERROR_INVALID_ARGUMENT);
	ovx_string_t bad = { "World", 5 };
	ck_assert_int_eq(ovstage_clone(f.st, from, &bad, 1, 6).status, OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(last_error(), "target_paths[0]"), "%s", last_error());
	ck_assert_int_eq(ovstage_clone(f.st, from, to, 1, 4).status, OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION);
	wait_ok(&f, ovstage_release_query(f.st, qs));
	wait_ok(&f, ovstage_release_query(f.st, qd));
	wait_ok(&f, ovstage_release_query(f.st, q2));
	teardown(&f);
}
END_TEST



/* ---- array (ragged) columns ------------------------------------------------------------------ */

/* Reads an array attribute: per element, its length and a copy of up to 8 floats. */
typedef struct array_read {
	ovstage_api_status_t status;
	int groups, tombstones;
	bool present[16], deleted[16];
	int64_t len[16];
	float v[16][8];
} array_read;

static void read_arrays(fixture *f, ovstage_query_handle_t q, ovx_token_t t, ovstage_ordinal_range_t range,
			array_read *out)
{
	memset(out, 0, sizeof *out);
	ovstage_read_handle_t rh;
	char msg[600];
	size_t nf = wait_op(f, ovstage_read_attributes(f->st, q, &t, 1, range, &rh), msg, sizeof msg);
	out->status = nf ? OVSTAGE_ERROR_OP_FAILED : OVSTAGE_OK;
	ovstage_read_group_t g;
	while (!nf && ovstage_fetch_read_next(f->st, rh, 0, &g) == OVSTAGE_OK) {
		if (g.is_delete) {
			out->tombstones++;
			for (uint32_t i = 0; i < g.prims.count; i++)
				out->deleted[g.prims.index_map ? g.prims.index_map[i] : i] = true;
		} else {
			out->groups++;
			ck_assert(g.is_array);
			ck_assert_uint_eq(g.data.tensor_count, g.prims.count); /* per-row transport */
			for (uint32_t i = 0; i < g.prims.count; i++) {
				uint32_t e = g.prims.index_map ? g.prims.index_map[i] : i;
				const DLTensor *t2 = &g.data.tensors[i];
				ck_assert_int_eq(t2->ndim, 1);
				out->present[e] = true;
				out->len[e] = t2->shape[0];
				for (int64_t k = 0; k < t2->shape[0] && k < 8; k++)
					out->v[e][k] = ((const float *)t2->data)[k];
			}
		}
		ck_assert_int_eq(ovstage_release_group(f->st, &g), OVSTAGE_OK);
	}
	wait_ok(f, ovstage_release_read(f->st, rh));
}

START_TEST(test_array_columns)
{
	fixture f;
	setup_n(&f, 3);
	ovx_token_t t = tok(&f, "samples");
	/* per-row transport: three rows of different lengths */
	float r0[] = { 1 }, r1[] = { 2, 3, 4 }, r2[1];
	int64_t s0[] = { 1 }, s1[] = { 3 }, s2[] = { 0 };
	DLTensor rows[3];
	memset(rows, 0, sizeof rows);
	float *datas[3] = { r0, r1, r2 };
	int64_t *shapes[3] = { s0, s1, s2 };
	for (int i = 0; i < 3; i++) {
		rows[i].data = datas[i];
		rows[i].device.device_type = kDLCPU;
		rows[i].ndim = 1;
		rows[i].dtype.code = kDLFloat;
		rows[i].dtype.bits = 32;
		rows[i].dtype.lanes = 1;
		rows[i].shape = shapes[i];
	}
	ovstage_write_data_t w;
	memset(&w, 0, sizeof w);
	w.tensors = rows;
	w.tensor_count = 3;
	w.is_array = true;
	wait_ok(&f, ovstage_write_attribute(f.st, f.q, A(t), 1, w, OVSTAGE_PRIM_MODE_UPSERT));
	seal(&f, 1);
	array_read a;
	read_arrays(&f, f.q, t, latest(1), &a);
	ck_assert_int_eq(a.status, OVSTAGE_OK);
	ck_assert_int_eq(a.groups, 1);
	ck_assert_int_eq(a.len[0], 1);
	ck_assert_int_eq(a.len[1], 3);
	ck_assert_int_eq(a.len[2], 0);
	ck_assert_float_eq(a.v[1][2], 4.f);
	/* packed transport with an index map: two uniform rows of 2, broadcast to elements 0 and 2 */
	float packed[4] = { 10, 11, 20, 21 };
	int64_t ps[1] = { 4 };
	DLTensor pt;
	memset(&pt, 0, sizeof pt);
	pt.data = packed;
	pt.device.device_type = kDLCPU;
	pt.ndim = 1;
	pt.dtype.code = kDLFloat;
	pt.dtype.bits = 32;
	pt.dtype.lanes = 1;
	pt.shape = ps;
	uint32_t im[3] = { 1, 0, 1 };
	memset(&w, 0, sizeof w);
	w.tensors = &pt;
	w.tensor_count = 1;
	w.is_array = true;
	w.index_map = im;
	w.count = 3;
	wait_ok(&f, ovstage_write_attribute(f.st, f.q, A(t), 2, w, OVSTAGE_PRIM_MODE_UPSERT));
	seal(&f, 2);
	read_arrays(&f, f.q, t, latest(2), &a);
	ck_assert_int_eq(a.len[0], 2);
	ck_assert_float_eq(a.v[0][0], 20.f);
	ck_assert_float_eq(a.v[1][1], 11.f);
	ck_assert_float_eq(a.v[2][1], 21.f);
	/* history: as of 1 still the ragged rows */
	read_arrays(&f, f.q, t, latest(1), &a);
	ck_assert_int_eq(a.len[1], 3);
	/* a delete shows as a tombstone in a range read; the others keep their rows */
	const char *p1 = "/World/P1";
	ovstage_query_handle_t one = query_of(&f, &p1, 1, NULL);
	wait_ok(&f, ovstage_delete_attributes(f.st, one, (ovx_string_or_token_t[]){ A(t) }, 1, 3));
	seal(&f, 3);
	read_arrays(&f, f.q, t, span(3, 3), &a);
	ck_assert_int_eq(a.tombstones, 1);
	ck_assert(a.deleted[1] && !a.present[0]);
	/* schema: an array of float32x3 onto the float32[] column is rejected; so is a fixed write */
	memset(&w, 0, sizeof w);
	pt.dtype.lanes = 3;
	ps[0] = 3;
	w.tensors = &pt;
	w.tensor_count = 1;
	w.is_array = true;
	ck_assert_int_eq(ovstage_write_attribute(f.st, f.q, A(t), 4, w, OVSTAGE_PRIM_MODE_UPSERT).status,
			 OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(last_error(), "float32x3"), "%s", last_error());
	/* clone shares array rows */
	ovx_string_t from = { "/World/P2", 9 }, to = { "/World/Copy", 11 };
	wait_ok(&f, ovstage_clone(f.st, from, &to, 1, 4));
	seal(&f, 4);
	const char *cp = "/World/Copy";
	ovstage_query_handle_t qc = query_of(&f, &cp, 1, NULL);
	read_arrays(&f, qc, t, latest(4), &a);
	ck_assert_int_eq(a.len[0], 2);
	ck_assert_float_eq(a.v[0][1], 21.f);
	/* byte strings: STRING semantic = ragged uint8 rows */
	ovx_token_t name = tok(&f, "label");
	const char *words[3] = { "alpha", "be", "" };
	DLTensor st[3];
	int64_t sl[3];
	memset(st, 0, sizeof st);
	for (int i = 0; i < 3; i++) {
		sl[i] = (int64_t)strlen(words[i]);
		st[i].data = (void *)(uintptr_t)words[i];
		st[i].device.device_type = kDLCPU;
		st[i].ndim = 1;
		st[i].dtype.code = kDLUInt;
		st[i].dtype.bits = 8;
		st[i].dtype.lanes = 1;
		st[i].shape = &sl[i];
	}
	memset(&w, 0, sizeof w);
	w.tensors = st;
	w.tensor_count = 3;
	w.is_array = true;
	w.semantic = OVSTAGE_SEMANTIC_STRING;
	wait_ok(&f, ovstage_write_attribute(f.st, f.q, A(name), 5, w, OVSTAGE_PRIM_MODE_UPSERT));
	seal(&f, 5);
	ovstage_read_handle_t rh;
	wait_ok(&f, ovstage_read_attributes(f.st, f.q, &name, 1, latest(5), &rh));
	ovstage_read_group_t g;
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh, 0, &g), OVSTAGE_OK);
	ck_assert_int_eq(g.semantic, OVSTAGE_SEMANTIC_STRING);
	ck_assert_int_eq(g.data.tensors[0].shape[0], 5);
	ck_assert_int_eq(memcmp(g.data.tensors[0].data, "alpha", 5), 0);
	ck_assert_int_eq(g.data.tensors[2].shape[0], 0);
	ck_assert_int_eq(ovstage_release_group(f.st, &g), OVSTAGE_OK);
	wait_ok(&f, ovstage_release_read(f.st, rh));
	wait_ok(&f, ovstage_release_query(f.st, one));
	wait_ok(&f, ovstage_release_query(f.st, qc));
	teardown(&f);
}
END_TEST


/* ---- derived built-ins ----------------------------------------------------------------------- */

START_TEST(test_derived_columns)
{
	fixture f;
	setup_n(&f, 1);
	ovx_token_t t = tok(&f, "x");
	const char *paths[4] = { "/A", "/A/B", "/A/C", "/A/B/D" };
	ovstage_query_handle_t q = query_of(&f, paths, 4, NULL);
	float v[4] = { 1, 2, 3, 4 };
	wait_ok(&f, write_f(&f, q, t, 1, v, 4));
	seal(&f, 1);
	ovx_primpath_t ids[4];
	ovx_string_t ps[4];
	for (int i = 0; i < 4; i++)
		ps[i] = (ovx_string_t){ paths[i], strlen(paths[i]) };
	ck_assert_int_eq(path_dictionary_create_paths_from_strings(f.pd, ps, 4, ids).status, OVX_API_SUCCESS);
	ovx_token_t dp = tok(&f, "usd-path"), dpar = tok(&f, "usd-parent"), dch = tok(&f, "usd-children");
	ovx_token_t want[3] = { dp, dpar, dch };
	ovstage_read_handle_t rh;
	wait_ok(&f, ovstage_read_attributes(f.st, q, want, 3, latest(1), &rh));
	ovstage_read_group_t g;
	int seen = 0;
	while (ovstage_fetch_read_next(f.st, rh, 0, &g) == OVSTAGE_OK) {
		seen++;
		if (g.attribute == dp) {
			ck_assert_uint_eq(g.prims.count, 4);
			const uint64_t *d = g.data.tensors[0].data;
			for (int i = 0; i < 4; i++)
				ck_assert_uint_eq(d[i], ids[i]);
		} else if (g.attribute == dpar) {
			ck_assert_uint_eq(g.prims.count, 4); /* /A's parent is the root */
			const uint64_t *d = g.data.tensors[0].data;
			ck_assert_uint_eq(d[1], ids[0]);
			ck_assert_uint_eq(d[3], ids[1]);
		} else {
			ck_assert(g.is_array);
			ck_assert_uint_eq(g.data.tensor_count, 4);
			ck_assert_int_eq(g.data.tensors[0].shape[0], 2); /* /A: B, C */
			ck_assert_int_eq(g.data.tensors[1].shape[0], 1); /* /A/B: D */
			ck_assert_int_eq(g.data.tensors[2].shape[0], 0);
			ck_assert_uint_eq(((const uint64_t *)g.data.tensors[1].data)[0], ids[3]);
		}
		ck_assert_int_eq(ovstage_release_group(f.st, &g), OVSTAGE_OK);
	}
	ck_assert_int_eq(seen, 3);
	wait_ok(&f, ovstage_release_read(f.st, rh));
	/* derived names have no change history: a range read gives zero groups; writing them fails */
	read_result r;
	read_f(&f, q, dp, span(1, 1), &r);
	ck_assert_int_eq(r.status, OVSTAGE_OK);
	ck_assert_int_eq(r.value_groups, 0);
	ck_assert_int_eq(write_f(&f, q, dp, 2, v, 4).status, OVSTAGE_ERROR_NOT_SUPPORTED);
	wait_ok(&f, ovstage_release_query(f.st, q));
	teardown(&f);
}
END_TEST


/* ---- op failures reach the log callback ------------------------------------------------------ */

static char g_logged[2048];
static _Atomic int g_log_calls;
static void capture_log(ovstage_log_severity_t sev, double ts, ovx_string_t msg, void *user)
{
	(void)ts;
	(void)user;
	if (sev == OVSTAGE_LOG_WARNING && msg.ptr && strstr(msg.ptr, "already exists")) {
		snprintf(g_logged, sizeof g_logged, "%.*s", (int)msg.length, msg.ptr);
		atomic_fetch_add(&g_log_calls, 1);
	}
}

START_TEST(test_op_failure_logged)
{
	fixture f;
	setup_n(&f, 2);
	ovx_token_t t = tok(&f, "x");
	float v[2] = { 1, 2 };
	wait_ok(&f, write_f(&f, f.q, t, 1, v, 2));
	ck_assert_int_eq(ovstage_set_log_callback(OVSTAGE_LOG_WARNING, NULL, capture_log, NULL), OVSTAGE_OK);
	tensor1 tt;
	ovstage_write_data_t w = fdata(&tt, v, 2, 1);
	char msg[600];
	ck_assert_uint_eq(wait_op(&f, ovstage_write_attribute(f.st, f.q, A(t), 2, w, OVSTAGE_PRIM_MODE_INSERT), msg,
				  sizeof msg), 1);
	ck_assert_int_eq(ovstage_flush_log(OVSTAGE_TIMEOUT_INFINITE), OVSTAGE_OK);
	ck_assert_int_eq(atomic_load(&g_log_calls), 1);
	ck_assert_msg(strstr(g_logged, "[ops]") && strstr(g_logged, "failed"), "logged: %s", g_logged);
	ck_assert_int_eq(ovstage_set_log_callback(OVSTAGE_LOG_WARNING, NULL, NULL, NULL), OVSTAGE_OK);
	teardown(&f);
}
END_TEST


/* ---- back-pressure: unsealed data is bounded ---------------------------------------------------- */

START_TEST(test_unsealed_backpressure)
{
	ovstage_config_entry_t e = ovstage_config_entry_uint64(OVSTAGE_CONFIG_EXT_MAX_UNSEALED_MB, 1);
	ovstage_config_t cfg = { &e, 1 };
	ck_assert_int_eq(ovstage_initialize(&cfg), OVSTAGE_OK);
	fixture f;
	setup_n(&f, 256);
	ovx_token_t t = tok(&f, "wide");
	static float src[256 * 250];
	tensor1 tt;
	ovstage_write_data_t w = fdata(&tt, src, 256, 250); /* 1000 B rows: 250 KB per write */
	uint64_t ord = 1;
	ovstage_enqueue_result_t r;
	int accepted = 0;
	while ((r = ovstage_write_attribute(f.st, f.q, A(t), ord, w, OVSTAGE_PRIM_MODE_UPSERT)).status == OVSTAGE_OK) {
		wait_ok(&f, r);
		accepted++;
		ord++;
		ck_assert_int_lt(accepted, 50);
	}
	ck_assert_int_eq(r.status, OVSTAGE_ERROR_QUEUE_FULL);
	ck_assert_msg(strstr(last_error(), "advance_write_floor"), "%s", last_error());
	ck_assert_int_ge(accepted, 4); /* about 1 MiB went in first */
	seal(&f, ord - 1);
	wait_ok(&f, ovstage_write_attribute(f.st, f.q, A(t), ord, w, OVSTAGE_PRIM_MODE_UPSERT));
	teardown(&f);
	ck_assert_int_eq(ovstage_shutdown(), OVSTAGE_OK);
}
END_TEST

/* ---- the active-GPU list: malformed lists refused naming the value -------------------------------- */

static ovstage_api_status_t init_cuda_devices(const char *v, size_t len)
{
	ovstage_config_entry_t e;
	memset(&e, 0, sizeof e);
	e.key_type = OVSTAGE_CONFIG_KEY_TYPE_STRING;
	e.key.string_key = OVSTAGE_CONFIG_EXT_CUDA_DEVICES;
	e.value.string_value.ptr = v;
	e.value.string_value.length = len;
	ovstage_config_t cfg = { &e, 1 };
	return ovstage_initialize(&cfg);
}

START_TEST(test_cuda_device_list_parsing)
{
	const char *bad[] = { ",", "0,", ",1", "0,,1", "a", "-1", "1024", "0 1", "99999999", "1;2" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		ck_assert_int_eq(init_cuda_devices(bad[i], strlen(bad[i])), OVSTAGE_ERROR_INVALID_ARGUMENT);
		char want[64];
		snprintf(want, sizeof want, "\"%s\" is not a CUDA device ordinal", bad[i]);
		ck_assert_msg(strstr(last_error(), want), "%s: %s", bad[i], last_error());
	}
	ck_assert_int_eq(init_cuda_devices(NULL, 3), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(last_error(), "NULL ptr"), "%s", last_error());
	char many[400] = "";
	for (int i = 0; i < 65; i++) /* one more than a list holds */
		snprintf(many + strlen(many), sizeof many - strlen(many), i ? ",%d" : "%d", i % 10);
	ck_assert_int_eq(init_cuda_devices(many, strlen(many)), OVSTAGE_ERROR_INVALID_ARGUMENT);
	const char *good[] = { "", "0", "3", "0,1,2,1023" };
	for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
		ck_assert_int_eq(init_cuda_devices(good[i], strlen(good[i])), OVSTAGE_OK);
		ck_assert_int_eq(ovstage_shutdown(), OVSTAGE_OK);
	}
	/* the environment wins and is checked likewise */
	setenv("OVSTAGE_CUDA_DEVICES", "0,x", 1);
	ck_assert_int_eq(init_cuda_devices("0", 1), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(last_error(), "environment OVSTAGE_CUDA_DEVICES = \"0,x\""), "%s", last_error());
	unsetenv("OVSTAGE_CUDA_DEVICES");
	/* with no list an instance has no CUDA device */
	ovstage_instance_t *st = NULL;
	ck_assert_int_eq(ovstage_create_instance(NULL, &st), OVSTAGE_OK);
	int d = 7;
	ck_assert_int_eq(ovstage_ext_get_instance_cuda_device(st, &d), OVSTAGE_OK);
	ck_assert_int_eq(d, -1);
	ck_assert_int_eq(ovstage_ext_get_instance_cuda_device(st, NULL), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ovstage_ext_get_instance_cuda_device(NULL, &d), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ovstage_destroy_instance(st), OVSTAGE_OK);
}
END_TEST

/* ---- retention soak: memory stays bounded ---------------------------------------------------- */

void ovs_store_counters(int64_t *versions, int64_t *buffers, int64_t *buffer_bytes);

START_TEST(test_retention_soak_bounded)
{
	/* Thousands of seals of full and sparse writes on two columns, with a reader holding a group for
	 * a while now and then: live versions and buffer bytes must stay bounded by retention (2), the
	 * spare buffer per column and the pinned groups, and return to zero after destroy. */
	enum { N = 256 };
	int64_t v0, b0, by0;
	ovs_store_counters(&v0, &b0, &by0);
	fixture f;
	setup_n(&f, N);
	ovx_token_t a = tok(&f, "a"), b = tok(&f, "b");
	static float src[2][N];
	static uint64_t mask[(N + 63) / 64];
	const char *sc = getenv("OVSTAGE_TEST_SCALE");
	int steps = (int)(3000 * (sc ? atof(sc) : 1.0));
#ifdef OVSTAGE_TSAN
	steps /= 10;
#endif
	int64_t max_versions = 0, max_bytes = 0;
	ovstage_read_group_t held;
	bool holding = false;
	for (int s = 1; s <= steps; s++) {
		for (int i = 0; i < N; i++)
			src[0][i] = src[1][i] = (float)s;
		tensor1 ta, tb;
		ovstage_write_data_t wa = fdata(&ta, src[0], N, 1), wb = fdata(&tb, src[1], N, 1);
		if (s % 3 == 0) { /* sparse: every 8th prim */
			for (int w = 0; w < (N + 63) / 64; w++)
				mask[w] = 0x0101010101010101ull;
			wb.mask = mask;
			wb.count = N;
		}
		ovstage_attribute_write_t ws[2] = { { A(a), wa }, { A(b), wb } };
		ovstage_enqueue_result_t e = ovstage_write_attributes(f.st, f.q, ws, 2, (uint64_t)s, OVSTAGE_PRIM_MODE_UPSERT);
		seal(&f, (uint64_t)s);
		wait_ok(&f, e);
		if (s % 50 == 10 && !holding) {
			ovstage_read_handle_t rh;
			wait_ok(&f, ovstage_read_attributes(f.st, f.q, &b, 1, latest((uint64_t)s), &rh));
			holding = ovstage_fetch_read_next(f.st, rh, 0, &held) == OVSTAGE_OK;
			wait_ok(&f, ovstage_release_read(f.st, rh));
		} else if (holding && s % 50 == 40) {
			ck_assert_int_eq(ovstage_release_group(f.st, &held), OVSTAGE_OK);
			holding = false;
		}
		int64_t v, bu, by;
		ovs_store_counters(&v, &bu, &by);
		if (s > 10) {
			max_versions = v - v0 > max_versions ? v - v0 : max_versions;
			max_bytes = by - by0 > max_bytes ? by - by0 : max_bytes;
		}
	}
	/* 2 columns x (retention 2 + 1 pinned by the held group + 1 retired while a reader was inside,
	 * freed by the next seal) versions; buffers: those versions' buffers, each column's spare, and the deltas' buffers still
	 * referenced: a small constant. */
	ck_assert_msg(max_versions <= 2 * 4, "live versions reached %lld", (long long)max_versions);
	ck_assert_msg(max_bytes <= 16 * (int64_t)(N * sizeof(float) + 64), "live buffer bytes reached %lld",
		      (long long)max_bytes);
	if (holding)
		ck_assert_int_eq(ovstage_release_group(f.st, &held), OVSTAGE_OK);
	teardown(&f);
	int64_t v1, b1, by1;
	ovs_store_counters(&v1, &b1, &by1);
	ck_assert_int_eq(v1, v0);
	ck_assert_int_eq(b1, b0);
	ck_assert_int_eq(by1, by0);
}
END_TEST

/* ---- multi-thread stress --------------------------------------------------------------------- */

#define STRESS_PRIMS 64
#define STRESS_COLS 3

typedef struct stress {
	fixture *f;
	ovx_token_t cols[STRESS_COLS];
	uint64_t ordinals;          /* writes at 1..ordinals */
	_Atomic uint64_t next_ord;  /* writers take ordinals from here */
	_Atomic bool *submitted;    /* submitted[n]: every column's write at n was accepted */
	_Atomic int writers_done;
	_Atomic bool sealer_done;      /* the sealer sealed every ordinal (or gave up) */
	_Atomic uint64_t reads_checked;
	_Atomic uint64_t mismatches;
	char first_error[1200];
	_Atomic int error_set;
} stress;

/* The value of (column c, prim i) at ordinal n: a checksum pattern. */
static float pattern(int c, int i, uint64_t n)
{
	return (float)((n * 1000 + (uint64_t)i * 7 + (uint64_t)c) % 1000003);
}

static void stress_error(stress *s, const char *m)
{
	int z = 0;
	if (atomic_compare_exchange_strong(&s->error_set, &z, 1))
		snprintf(s->first_error, sizeof s->first_error, "%s", m);
}

static void *stress_writer(void *arg)
{
	stress *s = arg;
	fixture *f = s->f;
	/* One source, descriptor and mask per in-flight write: the API borrows them until it completes. */
	float v[STRESS_COLS][STRESS_PRIMS];
	tensor1 tt[STRESS_COLS];
	uint64_t mask = 0x5555555555555555ull;
	for (;;) {
		uint64_t n = atomic_fetch_add(&s->next_ord, 1);
		if (n > s->ordinals)
			break;
		ovstage_enqueue_result_t e[STRESS_COLS];
		for (int c = 0; c < STRESS_COLS; c++) {
			for (int i = 0; i < STRESS_PRIMS; i++)
				v[c][i] = pattern(c, i, n);
			/* every other ordinal is sparse: half the prims through a mask, the rest kept */
			ovstage_write_data_t w = fdata(&tt[c], v[c], STRESS_PRIMS, 1);
			if (n % 2 == 0) {
				w.mask = &mask;
				w.count = STRESS_PRIMS;
			}
			e[c] = ovstage_write_attribute(f->st, f->q, A(s->cols[c]), n, w, OVSTAGE_PRIM_MODE_UPSERT);
			if (e[c].status != OVSTAGE_OK)
				stress_error(s, last_error());
		}
		atomic_store(&s->submitted[n], true); /* the sealer may seal n from now on */
		for (int c = 0; c < STRESS_COLS; c++) {
			if (e[c].status != OVSTAGE_OK)
				continue;
			ovstage_op_wait_result_t wr;
			ovstage_wait_op(f->st, e[c].op_index, OVSTAGE_TIMEOUT_INFINITE, &wr);
			if (wr.error_op_id_count)
				stress_error(s, "a write failed");
			ovstage_release_op(f->st, e[c].op_index);
		}
	}
	atomic_fetch_add(&s->writers_done, 1);
	return NULL;
}

/* Expected value of (c, i) as of ordinal n: the last ordinal <= n that wrote it. */
static float expected(int c, int i, uint64_t n)
{
	uint64_t m = n;
	if (m % 2 == 0 && i % 2 == 1)
		m--; /* even ordinals are masked: odd prims keep the previous (odd) ordinal's value */
	return pattern(c, i, m);
}

static void *stress_reader(void *arg)
{
	stress *s = arg;
	fixture *f = s->f;
	while (atomic_load(&s->writers_done) < 2 || atomic_load(&s->reads_checked) < 50) {
		bool sealer_was_done = atomic_load(&s->sealer_done);
		ovstage_ordinal_query_handle_t h;
		ovx_string_or_token_t none = { 0, { NULL, 0 } };
		ovstage_enqueue_result_t e = ovstage_get_attribute_write_floor(f->st, none, &h);
		if (e.status != OVSTAGE_OK)
			continue;
		uint64_t floor = 0;
		ovstage_fetch_ordinal(f->st, h, OVSTAGE_TIMEOUT_INFINITE, &floor);
		ovstage_release_op(f->st, e.op_index);
		ovstage_enqueue_result_t rel = ovstage_release_ordinal_query(f->st, h);
		if (rel.status == OVSTAGE_OK) {
			ovstage_op_wait_result_t wr;
			ovstage_wait_op(f->st, rel.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr);
			ovstage_release_op(f->st, rel.op_index);
		}
		if (floor == 0) {
			/* nothing sealed yet (writers may well finish before the first seal does); give up
			 * only if the sealer had finished before the floor was asked for */
			if (sealer_was_done)
				break;
			sched_yield();
			continue;
		}
		ovstage_read_handle_t rh;
		e = ovstage_read_attributes(f->st, f->q, s->cols, STRESS_COLS, latest(floor), &rh);
		if (e.status != OVSTAGE_OK) {
			stress_error(s, last_error());
			break;
		}
		ovstage_op_wait_result_t wr;
		ovstage_wait_op(f->st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr);
		size_t nerr = wr.error_op_id_count;
		ovstage_release_op(f->st, e.op_index);
		ovstage_read_group_t g;
		while (!nerr && ovstage_fetch_read_next(f->st, rh, 0, &g) == OVSTAGE_OK) {
			int c = 0;
			while (c < STRESS_COLS && s->cols[c] != g.attribute)
				c++;
			const float *d = g.data.tensors[0].data;
			/* above the floor read at only when the floor's version left retention before the
			 * read ran (the newest version answers, as 0.2.1); never an unwritten ordinal, and
			 * the values below are checked against the group's own ordinal */
			if (g.ordinal == 0 || g.ordinal > s->ordinals)
				stress_error(s, "group ordinal that was never written");
			for (uint32_t k = 0; k < g.prims.count; k++) {
				uint32_t i = g.prims.index_map ? g.prims.index_map[k] : g.prims.offset + k;
				uint32_t row = g.data.index_map ? g.data.index_map[k] : k;
				if (d[row] != expected(c, (int)i, g.ordinal)) {
					atomic_fetch_add(&s->mismatches, 1);
					char m[160];
					snprintf(m, sizeof m, "col %d prim %u at ordinal %llu: got %g want %g", c, i,
						 (unsigned long long)g.ordinal, d[row], expected(c, (int)i, g.ordinal));
					stress_error(s, m);
				}
			}
			atomic_fetch_add(&s->reads_checked, 1);
			ovstage_release_group(f->st, &g);
		}
		ovstage_enqueue_result_t rr = ovstage_release_read(f->st, rh);
		if (rr.status == OVSTAGE_OK) {
			ovstage_wait_op(f->st, rr.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr);
			ovstage_release_op(f->st, rr.op_index);
		}
	}
	return NULL;
}

static void *stress_sealer(void *arg)
{
	stress *s = arg;
	fixture *f = s->f;
	uint64_t last = 0;
	while (last < s->ordinals) {
		/* seal the longest prefix of ordinals whose writes were all submitted */
		uint64_t target = last;
		while (target < s->ordinals && atomic_load(&s->submitted[target + 1]))
			target++;
		if (target <= last) {
			sched_yield();
			continue;
		}
		ovstage_write_floor_desc_t d = { target, OVSTAGE_SCOPE_ALL, NULL, 0 };
		ovstage_enqueue_result_t e = ovstage_advance_write_floor(f->st, &d);
		if (e.status != OVSTAGE_OK) {
			stress_error(s, last_error());
			break;
		}
		ovstage_op_wait_result_t wr;
		ovstage_wait_op(f->st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr);
		if (wr.error_op_id_count)
			stress_error(s, "a seal failed");
		ovstage_release_op(f->st, e.op_index);
		last = target;
	}
	atomic_store(&s->sealer_done, true);
	return NULL;
}

START_TEST(test_stress_writers_sealers_readers)
{
	fixture f;
	setup_n(&f, STRESS_PRIMS);
	stress s;
	memset(&s, 0, sizeof s);
	s.f = &f;
	s.cols[0] = tok(&f, "pose");
	s.cols[1] = tok(&f, "vel");
	s.cols[2] = tok(&f, "force");
	const char *scale = getenv("OVSTAGE_TEST_SCALE");
	double k = scale ? atof(scale) : 1.0;
#ifdef OVSTAGE_TSAN
	k *= 0.2;
#endif
	s.ordinals = (uint64_t)(400 * k) + 10;
	atomic_store(&s.next_ord, 1);
	s.submitted = calloc(s.ordinals + 2, sizeof *s.submitted);
	/* Writers race ahead of the sealer; the sealer only seals ordinals whose writes were all
	 * submitted (writes at a sealed ordinal would be rejected, which the writers report). */
	pthread_t w1, w2, sl, r1, r2;
	pthread_create(&w1, NULL, stress_writer, &s);
	pthread_create(&w2, NULL, stress_writer, &s);
	pthread_create(&sl, NULL, stress_sealer, &s);
	pthread_create(&r1, NULL, stress_reader, &s);
	pthread_create(&r2, NULL, stress_reader, &s);
	pthread_join(w1, NULL);
	pthread_join(w2, NULL);
	pthread_join(sl, NULL);
	pthread_join(r1, NULL);
	pthread_join(r2, NULL);
	free(s.submitted);
	ck_assert_msg(!atomic_load(&s.error_set), "stress error: %s", s.first_error);
	ck_assert_uint_eq(atomic_load(&s.mismatches), 0);
	ck_assert_uint_gt(atomic_load(&s.reads_checked), 0);
	/* after the last seal every column reads back exactly as of the last ordinal */
	for (int c = 0; c < STRESS_COLS; c++) {
		read_result r;
		read_f(&f, f.q, s.cols[c], latest(s.ordinals), &r);
		ck_assert_int_eq(r.status, OVSTAGE_OK);
		for (int i = 0; i < STRESS_PRIMS; i++)
			ck_assert_float_eq(r.vals[i], expected(c, i, s.ordinals));
	}
	teardown(&f);
}
END_TEST

/* ---- ordering of map commits, traces of failed ops, errors at the call, range starts -------- */

/* Thread payload: one write of `v` (rows values) at `ord`, submitted and waited on another thread. */
typedef struct bg_write {
	fixture *f;
	ovx_token_t t;
	uint64_t ord;
	float *v;
	int64_t rows;
} bg_write;

static void *bg_write_main(void *arg)
{
	bg_write *b = arg;
	wait_ok(b->f, write_f(b->f, b->f->q, b->t, b->ord, b->v, b->rows));
	return NULL;
}

/* The write at the map's ordinal, from another thread; returns once it completed. */
static void write_from_thread(fixture *f, ovx_token_t t, uint64_t ord, float *v, int64_t rows)
{
	bg_write b = { f, t, ord, v, rows };
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, bg_write_main, &b), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
}

/* Fills a map session's group with base + i and unmaps it. */
static void fill_and_unmap(fixture *f, ovstage_map_handle_t m, ovstage_map_group_t *g, float base)
{
	ovstage_cuda_sync_t none = { 0, 0 };
	float *dst = g->data.tensors[0].data;
	for (int64_t i = 0; i < g->data.tensors[0].shape[0]; i++)
		dst[i] = base + (float)i;
	wait_ok(f, ovstage_unmap_attribute(f->st, m, none));
}

/* A map commit takes its place among same-ordinal writes at unmap_attribute's submission (as in
 * 0.2.1's serialized lane): a write submitted between map and unmap loses to the mapped values, a
 * write submitted after the unmap wins over them. */
START_TEST(test_map_commit_ordered_at_unmap)
{
	fixture f;
	setup_n(&f, 4);
	ovx_token_t t = tok(&f, "x");
	float w[4] = { 100, 101, 102, 103 };
	ovstage_map_group_t g;
	read_result r;
	/* write between map and unmap, same thread: the map's values win */
	ovstage_map_handle_t m = map_open(&f, f.q, t, 5, 1, &g);
	wait_ok(&f, write_f(&f, f.q, t, 5, w, 4));
	fill_and_unmap(&f, m, &g, 10);
	seal(&f, 5);
	read_f(&f, f.q, t, latest(5), &r);
	ck_assert_int_eq(r.status, OVSTAGE_OK);
	for (int i = 0; i < 4; i++)
		ck_assert_float_eq(r.vals[i], 10.f + (float)i);
	/* the same with the write from another thread */
	m = map_open(&f, f.q, t, 6, 1, &g);
	write_from_thread(&f, t, 6, w, 4);
	fill_and_unmap(&f, m, &g, 20);
	seal(&f, 6);
	read_f(&f, f.q, t, latest(6), &r);
	for (int i = 0; i < 4; i++)
		ck_assert_float_eq(r.vals[i], 20.f + (float)i);
	/* write after the unmap (this thread, then another thread): the write wins */
	m = map_open(&f, f.q, t, 7, 1, &g);
	fill_and_unmap(&f, m, &g, 30);
	wait_ok(&f, write_f(&f, f.q, t, 7, w, 4));
	seal(&f, 7);
	read_f(&f, f.q, t, latest(7), &r);
	for (int i = 0; i < 4; i++)
		ck_assert_float_eq(r.vals[i], 100.f + (float)i);
	m = map_open(&f, f.q, t, 8, 1, &g);
	fill_and_unmap(&f, m, &g, 40);
	write_from_thread(&f, t, 8, w, 4);
	seal(&f, 8);
	read_f(&f, f.q, t, latest(8), &r);
	for (int i = 0; i < 4; i++)
		ck_assert_float_eq(r.vals[i], 100.f + (float)i);
	teardown(&f);
}
END_TEST

/* A write refused in its op fixes no schema: a later valid write of another dtype is accepted. */
START_TEST(test_failed_write_fixes_no_schema)
{
	fixture f;
	setup_n(&f, 3);
	ovx_token_t t = tok(&f, "fresh");
	char msg[600];
	float v[] = { 1, 2, 3 };
	/* INSERT onto existing prims (made by a write to another column), refused in the op */
	wait_ok(&f, write_f(&f, f.q, tok(&f, "other"), 1, v, 3));
	tensor1 tt;
	ovstage_write_data_t w = fdata(&tt, v, 3, 1);
	ck_assert_uint_eq(wait_op(&f, ovstage_write_attribute(f.st, f.q, A(t), 1, w, OVSTAGE_PRIM_MODE_INSERT), msg,
				  sizeof msg), 1);
	ck_assert_msg(strstr(msg, "already exists"), "%s", msg);
	/* a valid write of another dtype: no schema was fixed by the failed one */
	int32_t iv[] = { 7, 8, 9 };
	ovstage_write_data_t wi = tst_wdata(&tt, iv, 3, kDLInt, 32, 1);
	wait_ok(&f, ovstage_write_attribute(f.st, f.q, A(t), 1, wi, OVSTAGE_PRIM_MODE_UPSERT));
	teardown(&f);
}
END_TEST

/* A failed write leaves no unsealed mark: latest reads above the floor still succeed. */
START_TEST(test_failed_write_leaves_no_unsealed_mark)
{
	fixture f;
	setup_n(&f, 3);
	ovx_token_t t = tok(&f, "x");
	float v[] = { 1, 2, 3 };
	char msg[600];
	wait_ok(&f, write_f(&f, f.q, t, 1, v, 3));
	seal(&f, 1);
	/* INSERT on existing prims: admitted at the call, refused in the op */
	tensor1 tt;
	ovstage_write_data_t w = fdata(&tt, v, 3, 1);
	ck_assert_uint_eq(wait_op(&f, ovstage_write_attribute(f.st, f.q, A(t), 2, w, OVSTAGE_PRIM_MODE_INSERT), msg,
				  sizeof msg), 1);
	read_result r;
	read_f(&f, f.q, t, latest(3), &r);
	ck_assert_msg(r.status == OVSTAGE_OK, "read after a failed write: %d %s", r.status, r.msg);
	ck_assert_float_eq(r.vals[2], 3.f);
	/* a failed map (INSERT on existing prims) likewise */
	ovstage_map_desc_t d;
	memset(&d, 0, sizeof d);
	d.attribute = A(t);
	d.prim_mode = OVSTAGE_PRIM_MODE_INSERT;
	ovstage_map_handle_t m;
	ck_assert_uint_eq(wait_op(&f, ovstage_map_attribute(f.st, f.q, &d, 2, NULL, 0, &m), msg, sizeof msg), 1);
	ovstage_cuda_sync_t none = { 0, 0 };
	ck_assert_uint_ge(wait_op(&f, ovstage_unmap_attribute(f.st, m, none), msg, sizeof msg), 1);
	read_f(&f, f.q, t, latest(3), &r);
	ck_assert_msg(r.status == OVSTAGE_OK, "read after a failed map: %d %s", r.status, r.msg);
	/* a failed INSERT creates no prim: a new prim refused with its batch stays absent */
	const char *np[] = { "/World/P0", "/World/New" };
	ovstage_query_handle_t q2 = query_of(&f, np, 2, NULL);
	float v2[] = { 5, 6 };
	w = fdata(&tt, v2, 2, 1);
	ck_assert_uint_eq(wait_op(&f, ovstage_write_attribute(f.st, q2, A(tok(&f, "y")), 2, w, OVSTAGE_PRIM_MODE_INSERT),
				  msg, sizeof msg), 1);
	ovstage_read_handle_t rh;
	ovx_token_t path = tok(&f, "usd-path");
	wait_ok(&f, ovstage_read_attributes(f.st, q2, &path, 1, latest(3), &rh));
	ovstage_read_group_t g;
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh, 0, &g), OVSTAGE_OK);
	ck_assert_uint_eq(g.prims.count, 1); /* /World/P0 only */
	ck_assert_int_eq(ovstage_release_group(f.st, &g), OVSTAGE_OK);
	wait_ok(&f, ovstage_release_read(f.st, rh));
	wait_ok(&f, ovstage_release_query(f.st, q2));
	teardown(&f);
}
END_TEST

/* A CUDA tensor the process cannot take is refused at the call, with the device named: NOT_SUPPORTED
 * without a usable GPU (the reason quoted), INVALID_ARGUMENT for ordinal 7 where GPUs exist but fewer
 * than eight. */
START_TEST(test_cuda_tensor_rejected_at_call)
{
	fixture f;
	setup_n(&f, 3);
	ovx_token_t t = tok(&f, "x");
	float v[] = { 1, 2, 3 };
	tensor1 tt;
	ovstage_write_data_t w = fdata(&tt, v, 3, 1);
	tt.t.device.device_type = kDLCUDA;
	tt.t.device.device_id = 7;
	int ngpu = 0; /* asked first: the call clears the thread's last error */
	ck_assert_int_eq(ovstage_ext_get_gpu_status(&ngpu, NULL), OVSTAGE_OK);
	ovstage_enqueue_result_t e = ovstage_write_attribute(f.st, f.q, A(t), 1, w, OVSTAGE_PRIM_MODE_UPSERT);
	if (ngpu > 7)
		return; /* an eight-GPU machine: ordinal 7 exists (the GPU suite covers bad pointers) */
	ck_assert_int_eq(e.status, ngpu ? OVSTAGE_ERROR_INVALID_ARGUMENT : OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_assert_uint_eq(e.op_index, OVSTAGE_INVALID_OP_ID);
	ck_assert_msg(strstr(last_error(), "CUDA:7"), "%s", last_error());
	/* nothing was fixed: a CPU write of another dtype is accepted */
	int32_t iv[] = { 7, 8, 9 };
	ovstage_write_data_t wi = tst_wdata(&tt, iv, 3, kDLInt, 32, 1);
	wait_ok(&f, ovstage_write_attribute(f.st, f.q, A(t), 1, wi, OVSTAGE_PRIM_MODE_UPSERT));
	teardown(&f);
}
END_TEST

/* A read through a ready query of unsealed data is refused at the call. */
START_TEST(test_unsealed_read_rejected_at_call)
{
	fixture f;
	setup_n(&f, 3);
	ovx_token_t t = tok(&f, "x");
	float v[] = { 1, 2, 3 };
	wait_ok(&f, write_f(&f, f.q, t, 1, v, 3));
	ovstage_read_handle_t rh;
	ovstage_enqueue_result_t e = ovstage_read_attributes(f.st, f.q, &t, 1, latest(1), &rh);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION);
	ck_assert_uint_eq(rh, OVSTAGE_INVALID_READ_HANDLE);
	ck_assert_msg(strstr(last_error(), "\"x\"") && strstr(last_error(), "end_ordinal 1"), "%s", last_error());
	/* every column (attr_count 0) likewise */
	e = ovstage_read_attributes(f.st, f.q, NULL, 0, latest(1), &rh);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION);
	seal(&f, 1);
	read_result r;
	read_f(&f, f.q, t, latest(1), &r);
	ck_assert_int_eq(r.status, OVSTAGE_OK);
	teardown(&f);
}
END_TEST

/* A range from ordinal 0 on a stage that has reclaimed nothing reads every change. */
START_TEST(test_range_from_zero_nothing_reclaimed)
{
	fixture f;
	setup_n(&f, 3);
	ovx_token_t t = tok(&f, "x");
	float v[] = { 1, 2, 3 };
	wait_ok(&f, write_f(&f, f.q, t, 1, v, 3));
	seal(&f, 1);
	read_result r;
	read_f(&f, f.q, t, span(0, 1), &r);
	ck_assert_msg(r.status == OVSTAGE_OK, "range [0, 1]: %d %s", r.status, r.msg);
	ck_assert_int_eq(r.value_groups, 1);
	for (int i = 0; i < 3; i++)
		ck_assert_float_eq(r.vals[i], (float)(i + 1));
	teardown(&f);
}
END_TEST

/* A map session whose op failed (INSERT of prims that exist) commits nothing: it does not hold the
 * floor. advance_write_floor through its ordinal completes without its unmap_attribute (0.2.1 never
 * waits for a session, and a failed one has nothing to commit); reads above the floor are not
 * refused for it; the handle stays the caller's until unmap_attribute, whose op reports the map's
 * failure (root cause: the map op). Before, the advance waited for the unmap. */
START_TEST(test_failed_map_does_not_hold_the_floor)
{
	fixture f;
	setup_n(&f, 4);
	ovx_token_t t = tok(&f, "fm");
	float v[4] = { 1, 2, 3, 4 };
	wait_ok(&f, write_f(&f, f.q, t, 1, v, 4)); /* the prims exist, and the column has values */
	seal(&f, 1);
	ovstage_map_desc_t d;
	memset(&d, 0, sizeof d);
	d.attribute = A(t);
	d.dtype.code = kDLFloat;
	d.dtype.bits = 32;
	d.dtype.lanes = 1;
	d.prim_mode = OVSTAGE_PRIM_MODE_INSERT;
	ovstage_map_handle_t m = 0;
	ovstage_enqueue_result_t e = ovstage_map_attribute(f.st, f.q, &d, 3, NULL, 0, &m);
	ck_assert_int_eq(e.status, OVSTAGE_OK);
	ovstage_op_wait_result_t w;
	/* INSERT of existing prims: 0.2.1's status (wait_op returns it), the failure listed */
	ck_assert_int_eq(ovstage_wait_op(f.st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &w), OVSTAGE_ERROR_PRIM_NOT_FOUND);
	ck_assert_uint_eq(w.error_op_id_count, 1);
	ck_assert_int_eq(ovstage_release_op(f.st, e.op_index), OVSTAGE_OK);
	/* a latest read of the column above the floor: nothing written there is pending (the values of 1) */
	ovstage_read_handle_t rh;
	ovstage_ordinal_range_t rg = { 0, 5, false };
	e = ovstage_read_attributes(f.st, f.q, &t, 1, rg, &rh);
	ck_assert_msg(e.status == OVSTAGE_OK, "read above the floor refused for a failed session: %s", last_error());
	wait_ok(&f, e);
	ovstage_read_group_t g;
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh, OVSTAGE_TIMEOUT_INFINITE, &g), OVSTAGE_OK);
	ck_assert_uint_eq(g.prims.count, 4);
	ck_assert_int_eq(ovstage_release_group(f.st, &g), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh, OVSTAGE_TIMEOUT_INFINITE, &g), OVSTAGE_ERROR_END_OF_ITERATION);
	wait_ok(&f, ovstage_release_read(f.st, rh));
	/* the advance through ordinal 3 completes with the session still open (2 s: it does not wait) */
	ovstage_write_floor_desc_t fd = { 4, OVSTAGE_SCOPE_ALL, NULL, 0 };
	e = ovstage_advance_write_floor(f.st, &fd);
	ck_assert_int_eq(e.status, OVSTAGE_OK);
	ovstage_api_status_t s = ovstage_wait_op(f.st, e.op_index, 2000000000ull, &w);
	ck_assert_msg(s == OVSTAGE_OK, "the floor advance waits for the failed session's unmap (%d)", s);
	ck_assert_uint_eq(w.error_op_id_count, 0);
	ck_assert_int_eq(ovstage_release_op(f.st, e.op_index), OVSTAGE_OK);
	/* the handle is still the caller's: fetch says the map failed, unmap reports it, once */
	ovstage_map_group_t mg;
	ck_assert_int_eq(ovstage_fetch_map_next(f.st, m, 0, &mg), OVSTAGE_ERROR_PRIM_NOT_FOUND);
	ovstage_cuda_sync_t none = { 0, 0 };
	char msg[600];
	ck_assert_uint_ge(wait_op(&f, ovstage_unmap_attribute(f.st, m, none), msg, sizeof msg), 1);
	ck_assert_msg(strstr(msg, "already exists") != NULL, "unmap's root cause: %s", msg);
	ck_assert_int_eq(ovstage_unmap_attribute(f.st, m, none).status, OVSTAGE_ERROR_INVALID_HANDLE);
	/* nothing of the session reached the column: the values of 1, and no change in [2, 4] */
	e = ovstage_read_attributes(f.st, f.q, &t, 1, (ovstage_ordinal_range_t){ 2, 4, true }, &rh);
	wait_ok(&f, e);
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh, OVSTAGE_TIMEOUT_INFINITE, &g), OVSTAGE_ERROR_END_OF_ITERATION);
	wait_ok(&f, ovstage_release_read(f.st, rh));
	teardown(&f);
}
END_TEST

/* New columns created by concurrent calls: 4 threads each write the same 8 new columns at ordinal
 * 2 while another advances EXCLUDE floors (of an unrelated column) through 1; before them a thread
 * made refused writes (at the floor) to 8 other new columns. Each written column exists once: it
 * reads the values of one of the writes (a whole row of one thread); each column only a refused
 * call named does not exist (its write floor is the stage floor, 0, where the EXCLUDE advances
 * would have moved a column record to 1).
 * Under ThreadSanitizer this checks the preparation and publication of new columns (column.c,
 * sequencer.c). */
#define NEWCOL_THREADS 4
#define NEWCOLS 8
typedef struct newcol_arg {
	fixture *f;
	int id;
} newcol_arg;

static void *newcol_writer(void *p)
{
	newcol_arg *a = p;
	for (int c = 0; c < NEWCOLS; c++) {
		char name[16];
		snprintf(name, sizeof name, "nc%d", c);
		float v[4];
		for (int i = 0; i < 4; i++)
			v[i] = (float)(a->id * 100 + c * 10 + i);
		tensor1 tt;
		ovstage_write_data_t w = fdata(&tt, v, 4, 1);
		wait_ok(a->f, ovstage_write_attribute(a->f->st, a->f->q, A(tok(a->f, name)), 2, w, OVSTAGE_PRIM_MODE_UPSERT));
	}
	return NULL;
}

static void *newcol_refused(void *p)
{
	newcol_arg *a = p;
	for (int c = 0; c < NEWCOLS; c++) {
		char name[16];
		snprintf(name, sizeof name, "rc%d", c);
		float v[4] = { 0, 0, 0, 0 };
		tensor1 tt;
		ovstage_write_data_t w = fdata(&tt, v, 4, 1);
		ovstage_enqueue_result_t e =
			ovstage_write_attribute(a->f->st, a->f->q, A(tok(a->f, name)), 0, w, OVSTAGE_PRIM_MODE_UPSERT);
		ck_assert_int_eq(e.status, OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION);
	}
	return NULL;
}

static void *newcol_sealer(void *p)
{
	newcol_arg *a = p;
	ovx_token_t ex = tok(a->f, "unrelated");
	for (int i = 0; i < 20; i++) {
		ovstage_write_floor_desc_t d = { 1, OVSTAGE_SCOPE_EXCLUDE, &ex, 1 };
		wait_ok(a->f, ovstage_advance_write_floor(a->f->st, &d));
	}
	return NULL;
}

START_TEST(test_new_columns_created_concurrently)
{
	fixture f;
	setup_n(&f, 4);
	newcol_arg args[NEWCOL_THREADS + 2];
	pthread_t th[NEWCOL_THREADS + 2];
	args[NEWCOL_THREADS] = (newcol_arg){ &f, NEWCOL_THREADS };
	pthread_create(&th[NEWCOL_THREADS], NULL, newcol_refused, &args[NEWCOL_THREADS]);
	pthread_join(th[NEWCOL_THREADS], NULL);
	for (int i = 0; i < NEWCOL_THREADS + 2; i++) {
		if (i == NEWCOL_THREADS)
			continue;
		args[i] = (newcol_arg){ &f, i };
		pthread_create(&th[i], NULL, i < NEWCOL_THREADS ? newcol_writer : newcol_sealer, &args[i]);
	}
	for (int i = 0; i < NEWCOL_THREADS + 2; i++)
		if (i != NEWCOL_THREADS)
			pthread_join(th[i], NULL);
	for (int c = 0; c < NEWCOLS; c++) {
		char name[16];
		snprintf(name, sizeof name, "rc%d", c);
		ovstage_ordinal_query_handle_t h;
		wait_ok(&f, ovstage_get_attribute_write_floor(f.st, A(tok(&f, name)), &h));
		ovstage_ordinal_t o = 99;
		ck_assert_int_eq(ovstage_fetch_ordinal(f.st, h, OVSTAGE_TIMEOUT_INFINITE, &o), OVSTAGE_OK);
		wait_ok(&f, ovstage_release_ordinal_query(f.st, h));
		ck_assert_msg(o == 0, "%s, named only by refused writes, has floor %llu (the stage floor is 0)", name,
			      (unsigned long long)o);
	}
	seal(&f, 2);
	for (int c = 0; c < NEWCOLS; c++) {
		char name[16];
		snprintf(name, sizeof name, "nc%d", c);
		ovx_token_t t = tok(&f, name);
		ovstage_read_handle_t rh;
		ovstage_enqueue_result_t e = ovstage_read_attributes(f.st, f.q, &t, 1, (ovstage_ordinal_range_t){ 0, 2, false },
								     &rh);
		wait_ok(&f, e);
		ovstage_read_group_t g;
		int n = 0, writer = -1;
		while (ovstage_fetch_read_next(f.st, rh, OVSTAGE_TIMEOUT_INFINITE, &g) == OVSTAGE_OK) {
			const float *x = (const float *)((const char *)g.data.tensors[0].data + g.data.tensors[0].byte_offset);
			for (uint32_t j = 0; j < g.prims.count; j++) {
				uint32_t pos = g.prims.index_map ? g.prims.index_map[j] : g.prims.offset + j;
				uint32_t r = g.data.index_map ? g.data.index_map[j] : j;
				int who = (int)x[r] / 100;
				if (writer < 0)
					writer = who;
				ck_assert_msg(who == writer && x[r] == (float)(who * 100 + c * 10 + (int)pos),
					      "%s[%u] = %f: not one write's row", name, pos, (double)x[r]);
				n++;
			}
			ck_assert_int_eq(ovstage_release_group(f.st, &g), OVSTAGE_OK);
		}
		ck_assert_int_eq(n, 4);
		wait_ok(&f, ovstage_release_read(f.st, rh));
	}
	teardown(&f);
}
END_TEST

static Suite *stage_suite(void)
{
	Suite *su = suite_create("stage");
	TCase *tc = tcase_create("api");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_write_seal_read);
	tcase_add_test(tc, test_many_columns_step);
	tcase_add_test(tc, test_unsealed_not_visible);
	tcase_add_test(tc, test_floor_violation_sync);
	tcase_add_test(tc, test_same_ordinal_submission_order);
	tcase_add_test(tc, test_parallel_ordinals_and_seal_order);
	tcase_add_test(tc, test_scopes_include_exclude);
	tcase_add_test(tc, test_range_read_and_tombstones);
	tcase_add_test(tc, test_atomic_multi_column_seal);
	tcase_add_test(tc, test_group_outlives_read_and_later_writes);
	tcase_add_test(tc, test_mask_and_index_map);
	tcase_add_test(tc, test_convenience_lanes_and_strides);
	tcase_add_test(tc, test_bad_inputs);
	tcase_add_test(tc, test_managed_deleter_exactly_once);
	tcase_add_test(tc, test_map_unmap_zero_copy);
	tcase_add_test(tc, test_sparse_seals_match_model);
	tcase_add_test(tc, test_large_masks_parallel_gather);
	tcase_add_test(tc, test_large_masks_strided_rows);
	tcase_add_test(tc, test_blocks_overwriting_whole_chunks);
	tcase_add_test(tc, test_clone_subtree);
	tcase_add_test(tc, test_retention_soak_bounded);
	tcase_add_test(tc, test_array_columns);
	tcase_add_test(tc, test_derived_columns);
	tcase_add_test(tc, test_op_failure_logged);
	tcase_add_test(tc, test_unsealed_backpressure);
	tcase_add_test(tc, test_cuda_device_list_parsing);
	tcase_add_test(tc, test_stress_writers_sealers_readers);
	tcase_add_test(tc, test_map_commit_ordered_at_unmap);
	tcase_add_test(tc, test_failed_write_fixes_no_schema);
	tcase_add_test(tc, test_failed_write_leaves_no_unsealed_mark);
	tcase_add_test(tc, test_cuda_tensor_rejected_at_call);
	tcase_add_test(tc, test_unsealed_read_rejected_at_call);
	tcase_add_test(tc, test_range_from_zero_nothing_reclaimed);
	tcase_add_test(tc, test_failed_map_does_not_hold_the_floor);
	tcase_add_test(tc, test_new_columns_created_concurrently);
	suite_add_tcase(su, tc);
	return su;
}

int main(void)
{
	SRunner *sr = srunner_create(stage_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
