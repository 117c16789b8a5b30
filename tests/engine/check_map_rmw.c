/*
 * check_map_rmw.c — read-modify-write maps (ovstage_ext_map_attribute with
 * OVSTAGE_EXT_MAP_READ_CURRENT, docs/api.md): the buffer holds the latest sealed values (zero for
 * prims without one), modified in place it commits as any map, later writes and seals leave it
 * alone, the commit follows the same-ordinal rule, every refusal comes at the call with a message
 * and leaves no trace, and racing read-current maps of one column lose no update.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ovstage/ovstage.h>
#include <ovstage/ovstage_ext.h>
#include <ovx/path_dictionary/path_dictionary.h>

#include "stage_test_util.h"

#define NP 16 /* prims of the fixture's query: /R/P0 .. /R/P15 */

typedef struct fixture {
	ovstage_instance_t *st;
	path_dictionary_instance_t *pd;
	ovstage_query_handle_t q;
} fixture;

static const ovstage_cuda_sync_t NONE = { 0, 0 };

static ovstage_query_handle_t query_paths(fixture *f, const char *const *paths, size_t n)
{
	return tst_query_of(f->st, f->pd, paths, n, NULL);
}

static void setup(fixture *f)
{
	memset(f, 0, sizeof *f);
	ovstage_instance_desc_t d = { "check_map_rmw" };
	ck_assert_int_eq(ovstage_create_instance(&d, &f->st), OVSTAGE_OK);
	f->pd = ovstage_get_path_dictionary(f->st);
	char names[NP][16];
	const char *p[NP];
	for (int i = 0; i < NP; i++) {
		snprintf(names[i], sizeof names[i], "/R/P%d", i);
		p[i] = names[i];
	}
	f->q = query_paths(f, p, NP);
}

static void release_query(fixture *f, ovstage_query_handle_t q)
{
	tst_wait_ok(f->st, ovstage_release_query(f->st, q));
}

static void teardown(fixture *f)
{
	release_query(f, f->q);
	ck_assert_int_eq(ovstage_destroy_instance(f->st), OVSTAGE_OK);
}

static DLDataType dt(uint8_t code, uint8_t bits, uint16_t lanes)
{
	DLDataType t = { code, bits, lanes };
	return t;
}

static const DLDataType F32 = { kDLFloat, 32, 1 };

/* Writes n rows of vals (dtype t) over q at ord and waits. */
static void write_rows(fixture *f, ovstage_query_handle_t q, ovx_token_t a, uint64_t ord, void *vals, int64_t n,
		       DLDataType t)
{
	tst_tensor tt;
	ovstage_write_data_t w = tst_wdata(&tt, vals, n, t.code, t.bits, t.lanes);
	tst_wait_ok(f->st, ovstage_write_attribute(f->st, q, tst_attr(a), ord, w, OVSTAGE_PRIM_MODE_UPSERT));
}

static void seal(fixture *f, uint64_t n)
{
	ovstage_write_floor_desc_t d = { n, OVSTAGE_SCOPE_ALL, NULL, 0 };
	tst_wait_ok(f->st, ovstage_advance_write_floor(f->st, &d));
}

static void seal_col(ovstage_instance_t *st, ovx_token_t a, uint64_t n)
{
	ovstage_write_floor_desc_t d = { n, OVSTAGE_SCOPE_INCLUDE, &a, 1 };
	tst_wait_ok(st, ovstage_advance_write_floor(st, &d));
}

/* A latest read of a over q as of end, rb bytes per prim, into out (nq * rb) and present[]:
 * returns the read's status (at the call or the op's: OUT_OF_RANGE when the op found the state
 * gone from retention, else OP_FAILED). */
static _Thread_local uint64_t g_read_ordinal; /* the last read_latest's group ordinal (this thread's) */

static ovstage_api_status_t read_latest(ovstage_instance_t *st, ovstage_query_handle_t q, ovx_token_t a, uint64_t end,
					size_t rb, size_t nq, unsigned char *out, bool *present)
{
	g_read_ordinal = 0;
	memset(out, 0, nq * rb);
	memset(present, 0, nq * sizeof *present);
	ovstage_read_handle_t rh;
	ovstage_ordinal_range_t rg = { 0, end, false };
	ovstage_enqueue_result_t e = ovstage_read_attributes(st, q, &a, 1, rg, &rh);
	if (e.status != OVSTAGE_OK)
		return e.status;
	char msg[600];
	if (tst_wait_op(st, e, msg, sizeof msg)) {
		tst_wait_ok(st, ovstage_release_read(st, rh));
		/* the state as of end left retention between the call's check and the op's pin */
		return strstr(msg, "no longer retained") ? OVSTAGE_ERROR_OUT_OF_RANGE : OVSTAGE_ERROR_OP_FAILED;
	}
	ovstage_read_group_t g;
	ovstage_api_status_t s;
	while ((s = ovstage_fetch_read_next(st, rh, 0, &g)) == OVSTAGE_OK) {
		ck_assert(!g.is_delete && g.data.mask == NULL && g.data.tensor_count == 1);
		g_read_ordinal = g.ordinal;
		const unsigned char *base = (const unsigned char *)g.data.tensors[0].data + g.data.tensors[0].byte_offset;
		for (uint32_t j = 0; j < g.prims.count; j++) {
			uint32_t p = g.prims.index_map ? g.prims.index_map[j] : g.prims.offset + j;
			uint32_t r = g.data.index_map ? g.data.index_map[j] : j;
			ck_assert_uint_lt(p, nq);
			memcpy(out + (size_t)p * rb, base + (size_t)r * rb, rb);
			present[p] = true;
		}
		ck_assert_int_eq(ovstage_release_group(st, &g), OVSTAGE_OK);
	}
	ck_assert_int_eq(s, OVSTAGE_ERROR_END_OF_ITERATION);
	tst_wait_ok(st, ovstage_release_read(st, rh));
	return OVSTAGE_OK;
}

/* A read-current map of a (dtype t, zero: the column's) over q at ord: the enqueue status; when OK,
 * the map op was waited (it must succeed) and *g is the fetched group. */
static ovstage_api_status_t rmw_open(ovstage_instance_t *st, ovstage_query_handle_t q, ovx_token_t a, uint64_t ord,
				     DLDataType t, ovstage_map_handle_t *m, ovstage_map_group_t *g)
{
	ovstage_map_desc_t d;
	memset(&d, 0, sizeof d);
	d.attribute = tst_attr(a);
	d.dtype = t;
	d.prim_mode = OVSTAGE_PRIM_MODE_UPSERT;
	*m = 12345;
	ovstage_enqueue_result_t e =
		ovstage_ext_map_attribute(st, q, &d, ord, NULL, 0, OVSTAGE_EXT_MAP_READ_CURRENT, m);
	if (e.status != OVSTAGE_OK) {
		ck_assert_uint_eq(*m, OVSTAGE_INVALID_MAP_HANDLE);
		ck_assert_msg(ovstage_get_last_error().length > 0, "refused without a message");
		return e.status;
	}
	tst_wait_ok(st, e);
	ck_assert_int_eq(ovstage_fetch_map_next(st, *m, OVSTAGE_TIMEOUT_INFINITE, g), OVSTAGE_OK);
	ck_assert_int_eq(g->data.tensor_count, 1);
	ck_assert_ptr_null(g->data.index_map);
	ck_assert_ptr_null(g->prims.index_map);
	return OVSTAGE_OK;
}

static void unmap(ovstage_instance_t *st, ovstage_map_handle_t m)
{
	tst_wait_ok(st, ovstage_unmap_attribute(st, m, NONE));
}

static float *group_f32(const ovstage_map_group_t *g)
{
	return (float *)((char *)g->data.tensors[0].data + g->data.tensors[0].byte_offset);
}

/* ---- the values ------------------------------------------------------------------------------ */

/* The buffer equals a latest read; modified in place, it commits without a copy; a group held from
 * before keeps its values (the buffer is a copy of the sealed chunks, never the chunks). */
START_TEST(test_rmw_fills_latest_sealed)
{
	fixture f;
	setup(&f);
	ovx_token_t pos = tst_tok(f.pd, "pos");
	DLDataType t3 = dt(kDLFloat, 32, 3);
	float v[NP * 3];
	for (int i = 0; i < NP * 3; i++)
		v[i] = (float)(i * 10);
	write_rows(&f, f.q, pos, 1, v, NP, t3);
	seal(&f, 1);
	const char *sub[2] = { "/R/P3", "/R/P7" };
	ovstage_query_handle_t qs = query_paths(&f, sub, 2);
	float w[6] = { -1, -2, -3, -4, -5, -6 };
	write_rows(&f, qs, pos, 2, w, 2, t3);
	seal(&f, 2);
	/* a group of the version as of 2, held across the session */
	ovstage_read_handle_t rh;
	ovstage_ordinal_range_t r2 = { 0, 2, false };
	tst_wait_ok(f.st, ovstage_read_attributes(f.st, f.q, &pos, 1, r2, &rh));
	ovstage_read_group_t held;
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh, 0, &held), OVSTAGE_OK);
	float expect[NP * 3];
	bool present[NP];
	ck_assert_int_eq(read_latest(f.st, f.q, pos, 3, 12, NP, (unsigned char *)expect, present), OVSTAGE_OK);
	ck_assert_float_eq(expect[3 * 3], -1.f);
	ck_assert_float_eq(expect[7 * 3 + 2], -6.f);
	ovstage_map_handle_t m;
	ovstage_map_group_t g;
	ck_assert_int_eq(rmw_open(f.st, f.q, pos, 3, dt(0, 0, 0), &m, &g), OVSTAGE_OK);
	ck_assert_int_eq(g.data.tensors[0].dtype.lanes, 3);
	ck_assert_int_eq(g.data.tensors[0].shape[0], NP);
	float *b = group_f32(&g);
	ck_assert_mem_eq(b, expect, sizeof expect);
	ck_assert_ptr_ne(b, held.data.tensors[0].data); /* a copy, not the sealed chunk */
	for (int i = 0; i < NP * 3; i++)
		b[i] += 0.5f;
	unmap(f.st, m);
	seal(&f, 3);
	float got[NP * 3];
	ck_assert_int_eq(read_latest(f.st, f.q, pos, 3, 12, NP, (unsigned char *)got, present), OVSTAGE_OK);
	for (int i = 0; i < NP * 3; i++)
		ck_assert_float_eq(got[i], expect[i] + 0.5f);
	/* the whole column mapped in row order: the buffer became the version (zero copy at the seal) */
	ovstage_read_handle_t rh3;
	ovstage_ordinal_range_t r3 = { 0, 3, false };
	tst_wait_ok(f.st, ovstage_read_attributes(f.st, f.q, &pos, 1, r3, &rh3));
	ovstage_read_group_t g3;
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh3, 0, &g3), OVSTAGE_OK);
	ck_assert_ptr_eq(g3.data.tensors[0].data, b);
	ck_assert_int_eq(ovstage_release_group(f.st, &g3), OVSTAGE_OK);
	tst_wait_ok(f.st, ovstage_release_read(f.st, rh3));
	/* the held group and the history as of 2 are untouched */
	const float *h = held.data.tensors[0].data;
	ck_assert_mem_eq(h, expect, sizeof expect);
	ck_assert_int_eq(ovstage_release_group(f.st, &held), OVSTAGE_OK);
	tst_wait_ok(f.st, ovstage_release_read(f.st, rh));
	ck_assert_int_eq(read_latest(f.st, f.q, pos, 2, 12, NP, (unsigned char *)got, present), OVSTAGE_OK);
	ck_assert_mem_eq(got, expect, sizeof expect);
	release_query(&f, qs);
	teardown(&f);
}
END_TEST

/* A map through a query naming a subset, in another order, with a deleted prim and prims the
 * column has never seen: their sealed values, zeros for the rest; the commit touches those rows. */
START_TEST(test_rmw_sparse_new_and_deleted)
{
	fixture f;
	setup(&f);
	ovx_token_t s = tst_tok(f.pd, "s");
	const char *first8[8] = { "/R/P0", "/R/P1", "/R/P2", "/R/P3", "/R/P4", "/R/P5", "/R/P6", "/R/P7" };
	ovstage_query_handle_t q8 = query_paths(&f, first8, 8);
	float v[8] = { 10, 11, 12, 13, 14, 15, 16, 17 };
	write_rows(&f, q8, s, 1, v, 8, F32);
	seal(&f, 1);
	const char *p2 = "/R/P2";
	ovstage_query_handle_t q2 = query_paths(&f, &p2, 1);
	ovx_string_or_token_t sa = tst_attr(s);
	tst_wait_ok(f.st, ovstage_delete_attributes(f.st, q2, &sa, 1, 2));
	seal(&f, 2);
	const char *mix[5] = { "/R/P5", "/R/P2", "/R/P1", "/R/P12", "/R/New" };
	ovstage_query_handle_t qm = query_paths(&f, mix, 5);
	ovstage_map_handle_t m;
	ovstage_map_group_t g;
	ck_assert_int_eq(rmw_open(f.st, qm, s, 3, F32, &m, &g), OVSTAGE_OK);
	ck_assert_int_eq(g.prims.count, 5);
	float *b = group_f32(&g);
	const float want[5] = { 15, 0, 11, 0, 0 };
	ck_assert_mem_eq(b, want, sizeof want);
	for (int i = 0; i < 5; i++)
		b[i] = b[i] * 2 + 100;
	unmap(f.st, m);
	seal(&f, 3);
	float got[5];
	bool present[5];
	ck_assert_int_eq(read_latest(f.st, qm, s, 3, 4, 5, (unsigned char *)got, present), OVSTAGE_OK);
	for (int i = 0; i < 5; i++) {
		ck_assert(present[i]);
		ck_assert_float_eq(got[i], want[i] * 2 + 100);
	}
	float rest[8];
	bool p8[8];
	ck_assert_int_eq(read_latest(f.st, q8, s, 3, 4, 8, (unsigned char *)rest, p8), OVSTAGE_OK);
	ck_assert_float_eq(rest[0], 10.f); /* not mapped: unchanged */
	ck_assert_float_eq(rest[7], 17.f);
	ck_assert_float_eq(rest[2], 100.f); /* deleted, then committed by the map */
	release_query(&f, qm);
	release_query(&f, q2);
	release_query(&f, q8);
	teardown(&f);
}
END_TEST

/* ---- refusals -------------------------------------------------------------------------------- */

/* Whether an advance through ord completes without waiting for a session (none holds it). */
static void seal_is_free(fixture *f, uint64_t ord)
{
	ovstage_write_floor_desc_t d = { ord, OVSTAGE_SCOPE_ALL, NULL, 0 };
	ovstage_enqueue_result_t e = ovstage_advance_write_floor(f->st, &d);
	ck_assert_int_eq(e.status, OVSTAGE_OK);
	ovstage_op_wait_result_t w;
	ck_assert_int_eq(ovstage_wait_op(f->st, e.op_index, 5000000000ull, &w), OVSTAGE_OK);
	ck_assert_uint_eq(w.error_op_id_count, 0);
	ck_assert_int_eq(ovstage_release_op(f->st, e.op_index), OVSTAGE_OK);
}

static void unsealed_is_zero(fixture *f)
{
	ovstage_ext_memory_stats_t ms;
	ck_assert_int_eq(ovstage_ext_get_memory_stats(f->st, &ms), OVSTAGE_OK);
	ck_assert_uint_eq(ms.unsealed_bytes, 0);
}

START_TEST(test_rmw_refusals_leave_no_trace)
{
	fixture f;
	setup(&f);
	ovstage_map_handle_t m;
	ovstage_map_group_t g;
	/* a column that does not exist, without a dtype: INVALID_ARGUMENT at the call */
	ovx_token_t fresh = tst_tok(f.pd, "fresh");
	ck_assert_int_eq(rmw_open(f.st, f.q, fresh, 1, dt(0, 0, 0), &m, &g), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(tst_last_error(), "desc.dtype is required"), "%s", tst_last_error());
	unsealed_is_zero(&f);
	seal_is_free(&f, 1);
	/* no schema was installed: any dtype may create the column now */
	int32_t iv[NP] = { 0 };
	write_rows(&f, f.q, fresh, 2, iv, NP, dt(kDLInt, 32, 1));
	seal(&f, 2);
	/* the wrong dtype for an existing column: INVALID_ARGUMENT naming both */
	ck_assert_int_eq(rmw_open(f.st, f.q, fresh, 3, F32, &m, &g), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(tst_last_error(), "int32") && strstr(tst_last_error(), "float32"), "%s", tst_last_error());
	unsealed_is_zero(&f);
	seal_is_free(&f, 3);
	/* unknown flag bits, array sizes, the ordinal at the floor, NULL and foreign instances */
	ovstage_map_desc_t d;
	memset(&d, 0, sizeof d);
	d.attribute = tst_attr(fresh);
	d.prim_mode = OVSTAGE_PRIM_MODE_UPSERT;
	ck_assert_int_eq(ovstage_ext_map_attribute(f.st, f.q, &d, 4, NULL, 0, 0x80, &m).status,
			 OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(tst_last_error(), "flags"), "%s", tst_last_error());
	ck_assert_uint_eq(m, OVSTAGE_INVALID_MAP_HANDLE);
	size_t sizes[NP] = { 1 };
	ck_assert_int_eq(ovstage_ext_map_attribute(f.st, f.q, &d, 4, sizes, NP, OVSTAGE_EXT_MAP_READ_CURRENT, &m).status,
			 OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_assert_int_eq(ovstage_ext_map_attribute(f.st, f.q, &d, 3, NULL, 0, OVSTAGE_EXT_MAP_READ_CURRENT, &m).status,
			 OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION);
	ck_assert_int_eq(ovstage_ext_map_attribute(NULL, f.q, &d, 4, NULL, 0, OVSTAGE_EXT_MAP_READ_CURRENT, &m).status,
			 OVSTAGE_ERROR_INVALID_ARGUMENT);
	ovstage_instance_t fake = *f.st;
	fake.vtable = NULL;
	ck_assert_int_eq(ovstage_ext_map_attribute(&fake, f.q, &d, 4, NULL, 0, OVSTAGE_EXT_MAP_READ_CURRENT, &m).status,
			 OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ovstage_ext_map_attribute(f.st, 987654, &d, 4, NULL, 0, OVSTAGE_EXT_MAP_READ_CURRENT, &m).status,
			 OVSTAGE_ERROR_INVALID_HANDLE);
	/* unsealed writes of the column: WRITE_FLOOR_VIOLATION until they are sealed */
	int32_t w5[NP];
	for (int i = 0; i < NP; i++)
		w5[i] = 500 + i;
	write_rows(&f, f.q, fresh, 5, w5, NP, dt(kDLInt, 32, 1));
	ck_assert_int_eq(rmw_open(f.st, f.q, fresh, 6, dt(0, 0, 0), &m, &g), OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION);
	ck_assert_msg(strstr(tst_last_error(), "unsealed writes"), "%s", tst_last_error());
	seal(&f, 5);
	ck_assert_int_eq(rmw_open(f.st, f.q, fresh, 6, dt(0, 0, 0), &m, &g), OVSTAGE_OK);
	ck_assert_mem_eq(g.data.tensors[0].data, w5, sizeof w5);
	/* an open session is a write admitted above the floor: a second read-current map is refused,
	 * a plain map (0.2.1's) is not */
	ovstage_map_handle_t m2;
	ovstage_map_group_t g2;
	ck_assert_int_eq(rmw_open(f.st, f.q, fresh, 7, dt(0, 0, 0), &m2, &g2), OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION);
	ovstage_map_handle_t mp;
	tst_wait_ok(f.st, ovstage_ext_map_attribute(f.st, f.q, &d, 7, NULL, 0, 0, &mp));
	ck_assert_int_eq(ovstage_fetch_map_next(f.st, mp, OVSTAGE_TIMEOUT_INFINITE, &g2), OVSTAGE_OK);
	memset(g2.data.tensors[0].data, 0, sizeof w5);
	unmap(f.st, m);
	unmap(f.st, mp);
	seal(&f, 7);
	int32_t got[NP];
	bool present[NP];
	ck_assert_int_eq(read_latest(f.st, f.q, fresh, 7, 4, NP, (unsigned char *)got, present), OVSTAGE_OK);
	ck_assert_int_eq(got[3], 0);
	/* a new column with a dtype: zeros */
	ovx_token_t nc = tst_tok(f.pd, "newcol");
	ck_assert_int_eq(rmw_open(f.st, f.q, nc, 8, F32, &m, &g), OVSTAGE_OK);
	float zeros[NP] = { 0 };
	ck_assert_mem_eq(group_f32(&g), zeros, sizeof zeros);
	for (int i = 0; i < NP; i++)
		group_f32(&g)[i] = 7.f;
	unmap(f.st, m);
	seal(&f, 8);
	float fg[NP];
	ck_assert_int_eq(read_latest(f.st, f.q, nc, 8, 4, NP, (unsigned char *)fg, present), OVSTAGE_OK);
	ck_assert_float_eq(fg[NP - 1], 7.f);
	teardown(&f);
}
END_TEST

/* ---- concurrency ----------------------------------------------------------------------------- */

/* While the session is open, writes at its ordinal and above and seals of other columns proceed
 * and do not touch its buffer; the commit is placed at unmap_attribute among same-ordinal writes:
 * a write submitted between map and unmap is overwritten on the mapped rows, one after the unmap
 * wins. */
START_TEST(test_rmw_open_session_and_order)
{
	fixture f;
	setup(&f);
	ovx_token_t c = tst_tok(f.pd, "c"), o = tst_tok(f.pd, "o");
	float v[NP];
	for (int i = 0; i < NP; i++)
		v[i] = (float)(i + 1);
	write_rows(&f, f.q, c, 1, v, NP, F32);
	write_rows(&f, f.q, o, 1, v, NP, F32);
	seal(&f, 1);
	const char *half[NP / 2] = { "/R/P0", "/R/P1", "/R/P2", "/R/P3", "/R/P4", "/R/P5", "/R/P6", "/R/P7" };
	ovstage_query_handle_t qh = query_paths(&f, half, NP / 2);
	ovstage_map_handle_t m;
	ovstage_map_group_t g;
	ck_assert_int_eq(rmw_open(f.st, qh, c, 2, F32, &m, &g), OVSTAGE_OK);
	float *b = group_f32(&g);
	float before[NP / 2];
	memcpy(before, b, sizeof before);
	ck_assert_mem_eq(before, v, sizeof before);
	/* between map and unmap: a write at the session ordinal, one above, and a seal of another column */
	float w50[NP], w70[NP], w9[NP];
	for (int i = 0; i < NP; i++) {
		w50[i] = 50.f + (float)i;
		w70[i] = 70.f + (float)i;
		w9[i] = 9.f;
	}
	write_rows(&f, f.q, c, 2, w50, NP, F32);
	write_rows(&f, f.q, c, 3, w70, NP, F32);
	write_rows(&f, f.q, o, 2, w9, NP, F32);
	seal_col(f.st, o, 2);
	float og[NP];
	bool present[NP];
	ck_assert_int_eq(read_latest(f.st, f.q, o, 2, 4, NP, (unsigned char *)og, present), OVSTAGE_OK);
	ck_assert_float_eq(og[0], 9.f);
	ck_assert_mem_eq(b, before, sizeof before); /* the buffer is the session's alone */
	for (int i = 0; i < NP / 2; i += 2)
		b[i] += 1000.f; /* the odd rows are committed as read */
	unmap(f.st, m);
	const char *p1 = "/R/P1";
	ovstage_query_handle_t q1 = query_paths(&f, &p1, 1);
	float w99 = 99.f;
	write_rows(&f, q1, c, 2, &w99, 1, F32); /* after the unmap: wins */
	seal(&f, 2);
	float got[NP];
	ck_assert_int_eq(read_latest(f.st, f.q, c, 2, 4, NP, (unsigned char *)got, present), OVSTAGE_OK);
	for (int i = 0; i < NP; i++) {
		float want = i == 1 ? 99.f : i < NP / 2 ? v[i] + (i % 2 == 0 ? 1000.f : 0.f) : w50[i];
		ck_assert_msg(got[i] == want, "prim %d: %g, want %g", i, (double)got[i], (double)want);
	}
	seal(&f, 3);
	ck_assert_int_eq(read_latest(f.st, f.q, c, 3, 4, NP, (unsigned char *)got, present), OVSTAGE_OK);
	ck_assert_mem_eq(got, w70, sizeof w70);
	release_query(&f, q1);
	release_query(&f, qh);
	teardown(&f);
}
END_TEST

/* Threads increment a counter column through read-current maps at "the floor + 1", retrying when
 * refused (another session is open, or the floor moved); a thread writes and seals another column;
 * a reader checks that the state as of each sealed ordinal s holds s - 1 in every row. Every
 * accepted session adds one: no update is lost (admission and the unsealed-write check are one
 * step under the sequencer's lock). */
#define RMW_THREADS 3

/* A failing ck_assert off the main thread garbles Check's report in CK_FORK=no mode ("Bad message
 * type"): the threads' own checks print what they saw and abort instead. */
#define THREAD_CHECK(cond, ...)                                                        \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "%s:%d: %s failed: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                  \
			fputc('\n', stderr);                                           \
			abort();                                                       \
		}                                                                      \
	} while (0)
#define RMW_STEPS 60
#define RMW_ROWS 64

typedef struct rmw_shared {
	ovstage_instance_t *st;
	ovstage_query_handle_t q;
	ovx_token_t ctr, other;
	_Atomic uint64_t sealed; /* the newest ordinal a thread sealed the counter through */
	_Atomic int done;        /* incrementing threads finished */
	_Atomic uint64_t refusals;
} rmw_shared;

static void *rmw_incrementer(void *arg)
{
	rmw_shared *sh = arg;
	for (int k = 0; k < RMW_STEPS;) {
		/* acquire: pairs with the release below, after that thread's seal completed */
		uint64_t ord = atomic_load_explicit(&sh->sealed, memory_order_acquire) + 1;
		ovstage_map_handle_t m;
		ovstage_map_group_t g;
		ovstage_api_status_t s = rmw_open(sh->st, sh->q, sh->ctr, ord, dt(0, 0, 0), &m, &g);
		if (s == OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION) {
			/* relaxed: a statistic */
			atomic_fetch_add_explicit(&sh->refusals, 1, memory_order_relaxed);
			sched_yield();
			continue;
		}
		THREAD_CHECK(s == OVSTAGE_OK, "read-current map at %llu = %d", (unsigned long long)ord, (int)s);
		int64_t *b = g.data.tensors[0].data;
		for (int i = 0; i < RMW_ROWS; i++) {
			/* the state as of ord - 1 */
			THREAD_CHECK(b[i] == (int64_t)ord - 2, "map at %llu row %d = %lld", (unsigned long long)ord, i,
				     (long long)b[i]);
			b[i]++;
		}
		unmap(sh->st, m);
		seal_col(sh->st, sh->ctr, ord);
		/* release: the seal above happened before a thread that reads this ordinal maps above it */
		atomic_store_explicit(&sh->sealed, ord, memory_order_release);
		k++;
	}
	/* release: orders this thread's work before the reader's final check */
	atomic_fetch_add_explicit(&sh->done, 1, memory_order_release);
	return NULL;
}

static void *rmw_other_writer(void *arg)
{
	rmw_shared *sh = arg;
	int64_t v[RMW_ROWS];
	for (uint64_t ord = 1; ord <= RMW_STEPS * 2; ord++) {
		for (int i = 0; i < RMW_ROWS; i++)
			v[i] = (int64_t)ord;
		tst_tensor tt;
		ovstage_write_data_t w = tst_wdata(&tt, v, RMW_ROWS, kDLInt, 64, 1);
		tst_wait_ok(sh->st, ovstage_write_attribute(sh->st, sh->q, tst_attr(sh->other), ord, w,
							    OVSTAGE_PRIM_MODE_UPSERT));
		seal_col(sh->st, sh->other, ord);
	}
	return NULL;
}

static void *rmw_reader(void *arg)
{
	rmw_shared *sh = arg;
	int64_t got[RMW_ROWS];
	bool present[RMW_ROWS];
	/* acquire: pairs with the incrementers' release increments */
	while (atomic_load_explicit(&sh->done, memory_order_acquire) < RMW_THREADS) {
		uint64_t s = atomic_load_explicit(&sh->sealed, memory_order_acquire);
		ovstage_api_status_t rs = read_latest(sh->st, sh->q, sh->ctr, s, 8, RMW_ROWS, (unsigned char *)got, present);
		if (rs == OVSTAGE_ERROR_OUT_OF_RANGE)
			continue; /* s already left retention */
		THREAD_CHECK(rs == OVSTAGE_OK, "read as of %llu = %d", (unsigned long long)s, (int)rs);
		/* as of s (s - 1 increments), or as of the newest version's ordinal o > s when s left
		 * retention before the read ran (a latest read never fails for that): o - 1 */
		uint64_t o = g_read_ordinal > s ? g_read_ordinal : s;
		for (int i = 0; i < RMW_ROWS; i++)
			THREAD_CHECK(present[i] && got[i] == (int64_t)o - 1, "as of %llu (group ordinal %llu) row %d = %lld",
				     (unsigned long long)s, (unsigned long long)g_read_ordinal, i, (long long)got[i]);
	}
	return NULL;
}

START_TEST(test_rmw_threads_lose_no_update)
{
	fixture f;
	setup(&f);
	char names[RMW_ROWS][16];
	const char *p[RMW_ROWS];
	for (int i = 0; i < RMW_ROWS; i++) {
		snprintf(names[i], sizeof names[i], "/T/P%d", i);
		p[i] = names[i];
	}
	rmw_shared sh;
	memset(&sh, 0, sizeof sh);
	sh.st = f.st;
	sh.q = query_paths(&f, p, RMW_ROWS);
	sh.ctr = tst_tok(f.pd, "ctr");
	sh.other = tst_tok(f.pd, "other");
	int64_t zero[RMW_ROWS] = { 0 };
	tst_tensor tt;
	ovstage_write_data_t w = tst_wdata(&tt, zero, RMW_ROWS, kDLInt, 64, 1);
	tst_wait_ok(f.st, ovstage_write_attribute(f.st, sh.q, tst_attr(sh.ctr), 1, w, OVSTAGE_PRIM_MODE_UPSERT));
	seal_col(f.st, sh.ctr, 1);
	atomic_init(&sh.sealed, 1);
	pthread_t th[RMW_THREADS + 2];
	for (int i = 0; i < RMW_THREADS; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, rmw_incrementer, &sh), 0);
	ck_assert_int_eq(pthread_create(&th[RMW_THREADS], NULL, rmw_other_writer, &sh), 0);
	ck_assert_int_eq(pthread_create(&th[RMW_THREADS + 1], NULL, rmw_reader, &sh), 0);
	for (int i = 0; i < RMW_THREADS + 2; i++)
		pthread_join(th[i], NULL);
	uint64_t last = atomic_load_explicit(&sh.sealed, memory_order_relaxed);
	ck_assert_uint_eq(last, 1 + RMW_THREADS * RMW_STEPS);
	int64_t got[RMW_ROWS];
	bool present[RMW_ROWS];
	ck_assert_int_eq(read_latest(f.st, sh.q, sh.ctr, last, 8, RMW_ROWS, (unsigned char *)got, present), OVSTAGE_OK);
	for (int i = 0; i < RMW_ROWS; i++)
		ck_assert_int_eq(got[i], RMW_THREADS * RMW_STEPS);
	release_query(&f, sh.q);
	teardown(&f);
}
END_TEST

static Suite *rmw_suite(void)
{
	Suite *s = suite_create("map_rmw");
	TCase *tc = tcase_create("rmw");
	tcase_add_test(tc, test_rmw_fills_latest_sealed);
	tcase_add_test(tc, test_rmw_sparse_new_and_deleted);
	tcase_add_test(tc, test_rmw_refusals_leave_no_trace);
	tcase_add_test(tc, test_rmw_open_session_and_order);
	tcase_add_test(tc, test_rmw_threads_lose_no_update);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(rmw_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
