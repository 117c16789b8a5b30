/*
 * check_alloc_fail.c — allocation-failure injection (failalloc.h: the test is linked with --wrap
 * for every allocator the engine uses; no engine source changes). For each operation of a small
 * scenario — write (full and masked), seal, read, map session, clone, delete, query — and for
 * every n until the operation no longer reaches an n-th allocation, a fresh stage is set up, the
 * n-th allocation of the operation is made to fail, and:
 *  - every call returns OK or OUT_OF_MEMORY with a message naming the memory; an accepted op that
 *    fails reports itself (wait_op) with such a message; nothing returns another status, crashes or
 *    hangs;
 *  - a failed operation changes nothing: the values, floors and prims read afterwards are those of
 *    the state before it, and the same operation, retried, succeeds (the stage stays usable);
 *  - the stage is destroyed with OVSTAGE_OK (nothing left held), and LeakSanitizer (asan build,
 *    at exit) finds no leak.
 * The stage runs without workers (OVSTAGE_WORKERS=0, set by CMake) so that allocations happen in
 * this thread, in the same order on every run.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ovstage/ovstage.h>
#include <ovstage/ovstage_ext.h>
#include <ovx/path_dictionary/path_dictionary.h>

#include "failalloc.h"
#include "stage_test_util.h"

#define NPRIM 4
static const char *const PATHS[NPRIM] = { "/World/A", "/World/B", "/World/A/C", "/X" };

typedef struct {
	ovstage_instance_t *st;
	path_dictionary_instance_t *pd;
	ovx_primpath_list_t list;
	ovstage_query_handle_t q;
	ovx_token_t a, b, c;
} fixture;

/* a = {1, 2, 3, 4} sealed at 1; b = {7, 8, 9, 10} (int32) written at 2, not sealed. */
static void setup(fixture *f)
{
	memset(f, 0, sizeof *f);
	ck_assert_int_eq(ovstage_create_instance(NULL, &f->st), OVSTAGE_OK);
	f->pd = ovstage_get_path_dictionary(f->st);
	f->q = tst_query_of(f->st, f->pd, PATHS, NPRIM, &f->list);
	f->a = tst_tok(f->pd, "a");
	f->b = tst_tok(f->pd, "b");
	f->c = tst_tok(f->pd, "c");
	float av[NPRIM] = { 1, 2, 3, 4 };
	tst_tensor t;
	tst_wait_ok(f->st, ovstage_write_attribute(f->st, f->q, tst_attr(f->a), 1, tst_wdata(&t, av, NPRIM, kDLFloat, 32, 1),
						   OVSTAGE_PRIM_MODE_UPSERT));
	ovstage_write_floor_desc_t d = { 1, OVSTAGE_SCOPE_ALL, NULL, 0 };
	tst_wait_ok(f->st, ovstage_advance_write_floor(f->st, &d));
	int32_t bv[NPRIM] = { 7, 8, 9, 10 };
	tst_wait_ok(f->st, ovstage_write_attribute(f->st, f->q, tst_attr(f->b), 2, tst_wdata(&t, bv, NPRIM, kDLInt, 32, 1),
						   OVSTAGE_PRIM_MODE_UPSERT));
}

static void teardown(fixture *f)
{
	tst_wait_ok(f->st, ovstage_release_query(f->st, f->q));
	path_dictionary_release_path_list_reference(f->pd, f->list);
	ck_assert_msg(ovstage_destroy_instance(f->st) == OVSTAGE_OK, "destroy: %s", tst_last_error());
}

/* ---- outcomes under injection ---------------------------------------------------------------- */

/* While armed, nothing here calls Check (its assertions allocate, and would be the ones failing):
 * the first problem is recorded and asserted once disarmed. */
static char problem[2048];
#define PROBLEM(cond, ...)                                                                          \
	do {                                                                                        \
		if (!(cond) && !problem[0])                                                         \
			snprintf(problem, sizeof problem, __VA_ARGS__);                             \
	} while (0)

static bool names_memory(const char *m)
{
	return strstr(m, "memory") != NULL;
}

/* A call's status under injection: OK, or OUT_OF_MEMORY with a message. Returns whether OK. */
static bool call_ok(ovstage_api_status_t s, const char *what)
{
	if (s == OVSTAGE_OK)
		return true;
	PROBLEM(s == OVSTAGE_ERROR_OUT_OF_MEMORY, "%s = %d under injection: %s", what, s, tst_last_error());
	PROBLEM(names_memory(tst_last_error()), "%s: OUT_OF_MEMORY without saying so: '%s'", what,
		      tst_last_error());
	return false;
}

/* An enqueue under injection, waited: true when accepted and done without failure. A failed op's
 * root cause must name the memory. */
static bool op_ok(fixture *f, ovstage_enqueue_result_t e, const char *what)
{
	if (!call_ok(e.status, what))
		return false;
	ovstage_op_wait_result_t w;
	ovstage_api_status_t s = ovstage_wait_op(f->st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &w);
	PROBLEM(s == OVSTAGE_OK, "%s: wait_op = %d: %s", what, s, tst_last_error());
	bool ok = w.error_op_id_count == 0;
	if (!ok) {
		ovx_string_t m = ovstage_get_last_op_error(f->st, w.error_op_ids[0]);
		char buf[600];
		snprintf(buf, sizeof buf, "%.*s", (int)m.length, m.ptr ? m.ptr : "");
		/* also unmap_attribute's, when the session's commit fails (its op reports it) */
		PROBLEM(names_memory(buf), "%s failed under injection without naming the memory: '%s'", what, buf);
	}
	PROBLEM(ovstage_release_op(f->st, e.op_index) == OVSTAGE_OK, "%s: release_op", what);
	return ok;
}

/* ---- reading the state back (not armed) ------------------------------------------------------- */

/* Latest values of a float or int32 column at `ord` into v (NAN-free: a missing prim stays -1);
 * returns the number of prims with a value. */
static int read_col(fixture *f, ovx_token_t attr, uint64_t ord, int32_t *v)
{
	for (int i = 0; i < NPRIM; i++)
		v[i] = -1;
	ovstage_read_handle_t rh;
	ovstage_ordinal_range_t rg = { 0, ord, false };
	ovstage_enqueue_result_t e = ovstage_read_attributes(f->st, f->q, &attr, 1, rg, &rh);
	tst_wait_ok(f->st, e);
	int n = 0;
	ovstage_read_group_t g;
	ovstage_api_status_t s;
	while ((s = ovstage_fetch_read_next(f->st, rh, OVSTAGE_TIMEOUT_INFINITE, &g)) == OVSTAGE_OK) {
		const DLTensor *t = &g.data.tensors[0];
		for (uint32_t j = 0; j < g.prims.count; j++) {
			uint32_t p = g.prims.index_map ? g.prims.index_map[j] : g.prims.offset + j;
			if (g.data.mask && !((g.data.mask[j / 64] >> (j % 64)) & 1))
				continue;
			uint32_t r = g.data.index_map ? g.data.index_map[j] : j;
			const uint8_t *src = (const uint8_t *)t->data + t->byte_offset + (size_t)r * 4;
			if (t->dtype.code == kDLFloat) {
				float x;
				memcpy(&x, src, 4);
				v[p] = (int32_t)x;
			} else {
				memcpy(&v[p], src, 4);
			}
			n++;
		}
		ck_assert_int_eq(ovstage_release_group(f->st, &g), OVSTAGE_OK);
	}
	ck_assert_int_eq(s, OVSTAGE_ERROR_END_OF_ITERATION);
	tst_wait_ok(f->st, ovstage_release_read(f->st, rh));
	return n;
}

static uint64_t floor_of(fixture *f, ovx_token_t attr)
{
	return tst_floor_of(f->st, attr);
}

static void seal(fixture *f, uint64_t n)
{
	ovstage_write_floor_desc_t d = { n, OVSTAGE_SCOPE_ALL, NULL, 0 };
	tst_wait_ok(f->st, ovstage_advance_write_floor(f->st, &d));
}

static void expect_col(fixture *f, ovx_token_t attr, uint64_t ord, const int32_t *want, const char *what)
{
	int32_t v[NPRIM];
	read_col(f, attr, ord, v);
	for (int i = 0; i < NPRIM; i++)
		ck_assert_msg(v[i] == want[i], "%s: prim %d reads %d, expected %d", what, i, v[i], want[i]);
}

static const int32_t A0[NPRIM] = { 1, 2, 3, 4 };
static const int32_t B0[NPRIM] = { 7, 8, 9, 10 };
static const int32_t NONE[NPRIM] = { -1, -1, -1, -1 };

/* ---- the operations -------------------------------------------------------------------------- */

/* The retry, unarmed, of a release-type call (release_read, release_query, unmap_attribute) that
 * was refused with OUT_OF_MEMORY: a refused call changed nothing, so the handle is still the
 * caller's and the retry succeeds (and its op too: an unmap then commits the session). */
static void end_refused_release(fixture *f, ovstage_enqueue_result_t e, const char *what)
{
	ck_assert_msg(e.status == OVSTAGE_OK, "%s retried after a refused one = %d (the refused call released the "
		      "handle): %s", what, e.status, tst_last_error());
	tst_wait_ok(f->st, e);
}

typedef enum { OP_WRITE, OP_WRITE_MASKED, OP_SEAL, OP_READ, OP_MAP, OP_CLONE, OP_DELETE, OP_QUERY, OP_COUNT } op_kind;
static const char *const OP_NAMES[OP_COUNT] = { "write", "masked write", "seal", "read", "map session", "clone",
						"delete", "query" };

/* Runs one operation (armed by the caller); returns whether it fully succeeded. */
static bool run_op(fixture *f, op_kind k)
{
	tst_tensor t;
	switch (k) {
	case OP_WRITE: {
		float v[NPRIM] = { 10, 20, 30, 40 };
		return op_ok(f, ovstage_write_attribute(f->st, f->q, tst_attr(f->a), 3, tst_wdata(&t, v, NPRIM, kDLFloat, 32, 1),
							OVSTAGE_PRIM_MODE_UPSERT), "write");
	}
	case OP_WRITE_MASKED: {
		float v[NPRIM] = { 0, 50, 0, 60 };
		uint64_t mask = 0xa; /* elements 1 and 3 */
		ovstage_write_data_t w = tst_wdata(&t, v, NPRIM, kDLFloat, 32, 1);
		w.count = NPRIM;
		w.mask = &mask;
		return op_ok(f, ovstage_write_attribute(f->st, f->q, tst_attr(f->a), 3, w, OVSTAGE_PRIM_MODE_UPSERT),
			     "masked write");
	}
	case OP_SEAL: {
		ovstage_write_floor_desc_t d = { 2, OVSTAGE_SCOPE_ALL, NULL, 0 };
		return op_ok(f, ovstage_advance_write_floor(f->st, &d), "advance_write_floor");
	}
	case OP_READ: {
		ovstage_read_handle_t rh;
		ovstage_ordinal_range_t rg = { 0, 1, false };
		ovstage_enqueue_result_t e = ovstage_read_attributes(f->st, f->q, &f->a, 1, rg, &rh);
		if (!op_ok(f, e, "read_attributes")) {
			failalloc_disarm();
			if (e.status == OVSTAGE_OK)
				tst_wait_ok(f->st, ovstage_release_read(f->st, rh));
			return false;
		}
		bool ok = true;
		ovstage_read_group_t g;
		ovstage_api_status_t s;
		int n = 0;
		while ((s = ovstage_fetch_read_next(f->st, rh, OVSTAGE_TIMEOUT_INFINITE, &g)) == OVSTAGE_OK) {
			n += (int)g.prims.count;
			if (!call_ok(ovstage_release_group(f->st, &g), "release_group")) {
				ok = false;
				failalloc_disarm();
				PROBLEM((ovstage_release_group(f->st, &g)) == OVSTAGE_OK, "%s: line %d", OP_NAMES[k], __LINE__);
			}
		}
		if (s != OVSTAGE_ERROR_END_OF_ITERATION)
			ok = call_ok(s, "fetch_read_next") && false;
		if (ok)
			PROBLEM((n) == NPRIM, "%s: line %d", OP_NAMES[k], __LINE__); /* a read that succeeded gives every value */
		ovstage_enqueue_result_t r = ovstage_release_read(f->st, rh);
		if (!op_ok(f, r, "release_read")) {
			/* refused: the handle is still live; release it unarmed */
			failalloc_disarm();
			if (r.status != OVSTAGE_OK) {
				/* the read is still live: its iteration is at its end, not an invalid handle */
				PROBLEM(ovstage_fetch_read_next(f->st, rh, 0, &g) == OVSTAGE_ERROR_END_OF_ITERATION,
					"a refused release_read released the read");
				end_refused_release(f, ovstage_release_read(f->st, rh), "release_read");
			}
			return false;
		}
		return ok;
	}
	case OP_MAP: {
		ovstage_map_desc_t desc;
		memset(&desc, 0, sizeof desc);
		desc.attribute = tst_attr(f->c);
		desc.dtype.code = kDLFloat;
		desc.dtype.bits = 32;
		desc.dtype.lanes = 1;
		ovstage_map_handle_t mh;
		ovstage_enqueue_result_t e = ovstage_map_attribute(f->st, f->q, &desc, 3, NULL, 0, &mh);
		if (!call_ok(e.status, "map_attribute"))
			return false;
		ovstage_map_group_t g;
		ovstage_api_status_t s = ovstage_fetch_map_next(f->st, mh, OVSTAGE_TIMEOUT_INFINITE, &g);
		bool ok = s == OVSTAGE_OK;
		if (ok) {
			float v[NPRIM] = { 5, 6, 7, 8 };
			memcpy((uint8_t *)g.data.tensors[0].data + g.data.tensors[0].byte_offset, v, sizeof v);
		} else {
			PROBLEM(s == OVSTAGE_ERROR_OP_FAILED || s == OVSTAGE_ERROR_OUT_OF_MEMORY, "fetch_map_next = %d", s);
		}
		ovstage_cuda_sync_t none = { 0, 0 };
		ovstage_enqueue_result_t u = ovstage_unmap_attribute(f->st, mh, none);
		if (u.status != OVSTAGE_OK) {
			call_ok(u.status, "unmap_attribute");
			failalloc_disarm(); /* end the session unarmed (it commits) */
			/* the session is still open: its one group was handed out, the handle is valid */
			ovstage_map_group_t g2;
			ovstage_api_status_t s2 = ovstage_fetch_map_next(f->st, mh, 0, &g2);
			PROBLEM(s2 != OVSTAGE_ERROR_INVALID_HANDLE, "a refused unmap_attribute ended the "
				"session: fetch_map_next = %d", s2);
			end_refused_release(f, ovstage_unmap_attribute(f->st, mh, none), "unmap_attribute");
			ok = false;
		} else {
			ok = op_ok(f, u, "unmap_attribute") && ok;
		}
		failalloc_disarm();
		ovstage_op_wait_result_t w;
		PROBLEM((ovstage_wait_op(f->st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &w)) == OVSTAGE_OK, "%s: line %d", OP_NAMES[k], __LINE__);
		PROBLEM((ovstage_release_op(f->st, e.op_index)) == OVSTAGE_OK, "%s: line %d", OP_NAMES[k], __LINE__);
		return ok;
	}
	case OP_CLONE: {
		ovx_string_t src = { "/World/A", 8 }, dst = { "/Z", 2 };
		return op_ok(f, ovstage_clone(f->st, src, &dst, 1, 3), "clone");
	}
	case OP_DELETE:
		return op_ok(f, ovstage_delete_attributes(f->st, f->q, &(ovx_string_or_token_t){ f->a, { NULL, 0 } }, 1, 3),
			     "delete_attributes");
	case OP_QUERY: {
		ovstage_query_handle_t q2 = OVSTAGE_INVALID_QUERY_HANDLE;
		ovstage_api_status_t s = ovstage_query_from_path_list(f->st, f->list, &q2);
		if (!call_ok(s, "query_from_path_list")) {
			PROBLEM((q2) == OVSTAGE_INVALID_QUERY_HANDLE, "%s: line %d", OP_NAMES[k], __LINE__);
			return false;
		}
		ovstage_enqueue_result_t r = ovstage_release_query(f->st, q2);
		if (!op_ok(f, r, "release_query")) {
			failalloc_disarm();
			if (r.status != OVSTAGE_OK) {
				/* the query is still live */
				ovstage_query_result_t qr;
				PROBLEM(ovstage_fetch_query_result(f->st, q2, OVSTAGE_TIMEOUT_INFINITE, &qr) == OVSTAGE_OK &&
						ovstage_release_query_result(f->st, &qr) == OVSTAGE_OK,
					"a refused release_query released the query");
				end_refused_release(f, ovstage_release_query(f->st, q2), "release_query");
			}
			return false;
		}
		return true;
	}
	default:
		return false;
	}
}

/* The state after operation k, unarmed: `ok` says whether it succeeded. A failed one left the
 * state as before; then it is retried and must succeed. */
static void check_after(fixture *f, op_kind k, bool ok)
{
	const char *what = OP_NAMES[k];
	if (!ok && k == OP_SEAL) {
		/* a refused or failed seal moved no floor: ordinal 2 is still writable */
		float v[NPRIM] = { 0, 0, 0, 0 };
		tst_tensor t;
		ovstage_enqueue_result_t e = ovstage_write_attribute(f->st, f->q, tst_attr(tst_tok(f->pd, "d")), 2,
								     tst_wdata(&t, v, NPRIM, kDLFloat, 32, 1),
								     OVSTAGE_PRIM_MODE_UPSERT);
		ck_assert_msg(e.status == OVSTAGE_OK, "after a failed seal, a write at 2 is refused: %s", tst_last_error());
		tst_wait_ok(f->st, e);
	}
	if (!ok && k != OP_READ && k != OP_QUERY)
	{
		bool again = run_op(f, k);
		ck_assert_msg(!problem[0], "%s, retried: %s", what, problem);
		ck_assert_msg(again, "%s failed again without injection: %s", what, tst_last_error());
	}
	/* now the operation has happened exactly once */
	switch (k) {
	case OP_WRITE: {
		seal(f, 3);
		const int32_t want[NPRIM] = { 10, 20, 30, 40 };
		expect_col(f, f->a, 3, want, what);
		expect_col(f, f->a, 1, A0, "a as of 1");
		break;
	}
	case OP_WRITE_MASKED: {
		seal(f, 3);
		const int32_t want[NPRIM] = { 1, 50, 3, 60 };
		expect_col(f, f->a, 3, want, what);
		break;
	}
	case OP_SEAL:
		ck_assert_uint_eq(floor_of(f, f->b), 2);
		expect_col(f, f->b, 2, B0, what);
		expect_col(f, f->a, 2, A0, what);
		break;
	case OP_MAP: {
		seal(f, 3);
		const int32_t want[NPRIM] = { 5, 6, 7, 8 };
		expect_col(f, f->c, 3, want, what);
		break;
	}
	case OP_CLONE: {
		seal(f, 3);
		/* /Z holds /World/A's value: a query over it reads 1 */
		const char *z[1] = { "/Z" };
		ovstage_query_handle_t qz = tst_query_of(f->st, f->pd, z, 1, NULL);
		ovstage_read_handle_t rh;
		ovstage_ordinal_range_t rg = { 0, 3, false };
		tst_wait_ok(f->st, ovstage_read_attributes(f->st, qz, &f->a, 1, rg, &rh));
		ovstage_read_group_t g;
		ck_assert_int_eq(ovstage_fetch_read_next(f->st, rh, OVSTAGE_TIMEOUT_INFINITE, &g), OVSTAGE_OK);
		float x;
		memcpy(&x, (const uint8_t *)g.data.tensors[0].data + g.data.tensors[0].byte_offset +
				   (g.data.index_map ? g.data.index_map[0] : 0) * 4, 4);
		ck_assert_msg(x == 1.0f, "clone: /Z reads %f", (double)x);
		ck_assert_int_eq(ovstage_release_group(f->st, &g), OVSTAGE_OK);
		ck_assert_int_eq(ovstage_fetch_read_next(f->st, rh, 0, &g), OVSTAGE_ERROR_END_OF_ITERATION);
		tst_wait_ok(f->st, ovstage_release_read(f->st, rh));
		tst_wait_ok(f->st, ovstage_release_query(f->st, qz));
		expect_col(f, f->a, 3, A0, "a after the clone");
		break;
	}
	case OP_DELETE:
		seal(f, 3);
		expect_col(f, f->a, 3, NONE, what);
		expect_col(f, f->a, 1, A0, "a as of 1");
		break;
	case OP_READ:
	case OP_QUERY:
	default:
		/* nothing to undo; the stage still reads and writes */
		expect_col(f, f->a, 1, A0, what);
		break;
	}
	/* the untouched state: b still unsealed at 2 unless the seal ran */
	if (k != OP_SEAL) {
		ck_assert_uint_eq(floor_of(f, f->b), k == OP_WRITE || k == OP_WRITE_MASKED || k == OP_MAP ||
							 k == OP_CLONE || k == OP_DELETE ? 3 : 1);
	}
}

/* Sweeps n = 1, 2, ... over operation k until it no longer reaches an n-th allocation. */
START_TEST(test_alloc_failure_sweep)
{
	op_kind k = (op_kind)_i;
	uint64_t n;
	int failures = 0;
	for (n = 1; n < 100000; n++) {
		fixture f;
		setup(&f);
		problem[0] = 0;
		failalloc_arm(n);
		bool ok = run_op(&f, k);
		bool hit = failalloc_disarm();
		ck_assert_msg(!problem[0], "%s, allocation %llu failing: %s", OP_NAMES[k], (unsigned long long)n, problem);
		if (!hit) {
			ck_assert_msg(ok, "%s failed with no allocation failing (n = %llu)", OP_NAMES[k], (unsigned long long)n);
			check_after(&f, k, ok);
			teardown(&f);
			break;
		}
		failures += !ok;
		check_after(&f, k, ok);
		teardown(&f);
	}
	ck_assert_msg(n > 1, "%s allocates nothing: the injection did not reach the engine", OP_NAMES[k]);
	fprintf(stderr, "check_alloc_fail: %s: %llu allocations injected, %d of them failed the operation\n",
		OP_NAMES[k], (unsigned long long)(n - 1), failures);
}
END_TEST

/* ---- refused calls leave no column ------------------------------------------------------------ */

/* The column that a refused call named was not created: an EXCLUDE advance (of "a") to 5, which
 * moves the floor of every column that exists but "a", leaves its write floor at the stage floor
 * (1), and a write to it at 2 is admitted. (A column created by the refused call would now be at
 * floor 5 and refuse the write.) */
static void expect_no_column(fixture *f, ovx_token_t n, const char *what)
{
	ovx_token_t ex = f->a;
	ovstage_write_floor_desc_t d = { 5, OVSTAGE_SCOPE_EXCLUDE, &ex, 1 };
	tst_wait_ok(f->st, ovstage_advance_write_floor(f->st, &d));
	uint64_t fl = floor_of(f, n);
	ck_assert_msg(fl == 1, "%s: the refused call left a column record (its floor moved to %llu)", what,
		      (unsigned long long)fl);
	float v[NPRIM] = { 1, 2, 3, 4 };
	tst_tensor t;
	ovstage_enqueue_result_t e = ovstage_write_attribute(f->st, f->q, tst_attr(n), 2, tst_wdata(&t, v, NPRIM, kDLFloat,
											      32, 1), OVSTAGE_PRIM_MODE_UPSERT);
	ck_assert_msg(e.status == OVSTAGE_OK, "%s: a write at 2 after the refused call = %d: %s", what, e.status,
		      tst_last_error());
	tst_wait_ok(f->st, e);
}

static ovstage_map_desc_t map_desc_of(ovx_token_t n)
{
	ovstage_map_desc_t desc;
	memset(&desc, 0, sizeof desc);
	desc.attribute = tst_attr(n);
	desc.dtype.code = kDLFloat;
	desc.dtype.bits = 32;
	desc.dtype.lanes = 1;
	return desc;
}

/* Refusals at the call that are not about memory: each on a fresh stage, each on a new column. */
START_TEST(test_refused_call_creates_no_column)
{
	for (int k = 0; k < 5; k++) {
		fixture f;
		setup(&f);
		ovx_token_t n = tst_tok(f.pd, "n");
		float v[NPRIM] = { 1, 2, 3, 4 };
		tst_tensor t;
		ovstage_write_data_t w = tst_wdata(&t, v, NPRIM, kDLFloat, 32, 1);
		ovstage_enqueue_result_t e;
		ovstage_api_status_t want;
		const char *what;
		switch (k) {
		case 0: /* at the stage floor */
			what = "write at the floor";
			want = OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION;
			e = ovstage_write_attribute(f.st, f.q, tst_attr(n), 1, w, OVSTAGE_PRIM_MODE_UPSERT);
			break;
		case 1: { /* a CUDA tensor in a CPU-only build (or data that is not device memory, with CUDA) */
			what = "write of a CUDA tensor";
			int ngpu = 0;
			ck_assert_int_eq(ovstage_ext_get_gpu_status(&ngpu, NULL), OVSTAGE_OK);
			want = ngpu ? OVSTAGE_ERROR_INVALID_ARGUMENT : OVSTAGE_ERROR_NOT_SUPPORTED;
			t.t.device.device_type = kDLCUDA;
			e = ovstage_write_attribute(f.st, f.q, tst_attr(n), 3, w, OVSTAGE_PRIM_MODE_UPSERT);
			break;
		}
		case 2: /* 3 rows for 4 prims */
			what = "write of a short tensor";
			want = OVSTAGE_ERROR_INVALID_ARGUMENT;
			t.shape[0] = 3;
			e = ovstage_write_attribute(f.st, f.q, tst_attr(n), 3, w, OVSTAGE_PRIM_MODE_UPSERT);
			break;
		case 3:
			what = "delete at the floor";
			want = OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION;
			e = ovstage_delete_attributes(f.st, f.q, &(ovx_string_or_token_t){ n, { NULL, 0 } }, 1, 1);
			break;
		default: {
			what = "map at the floor";
			want = OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION;
			ovstage_map_desc_t desc = map_desc_of(n);
			ovstage_map_handle_t mh = 5;
			e = ovstage_map_attribute(f.st, f.q, &desc, 1, NULL, 0, &mh);
			ck_assert_uint_eq(mh, OVSTAGE_INVALID_MAP_HANDLE);
			break;
		}
		}
		ck_assert_msg(e.status == want, "%s = %d, expected %d: %s", what, e.status, want, tst_last_error());
		ck_assert_msg(tst_last_error()[0], "%s: refused without a message", what);
		expect_no_column(&f, n, what);
		teardown(&f);
	}
}
END_TEST

/* Out of memory at the call, for every allocation of a write, delete and map session naming a new
 * column until the call is accepted: the column is not created. */
START_TEST(test_oom_refused_call_creates_no_column)
{
	static const char *const names[3] = { "write", "delete", "map" };
	int k = _i;
	uint64_t n;
	int refused = 0;
	for (n = 1; n < 10000; n++) {
		fixture f;
		setup(&f);
		ovx_token_t nt = tst_tok(f.pd, "n");
		float v[NPRIM] = { 1, 2, 3, 4 };
		tst_tensor t;
		ovstage_write_data_t w = tst_wdata(&t, v, NPRIM, kDLFloat, 32, 1);
		ovstage_map_desc_t desc = map_desc_of(nt);
		ovstage_map_handle_t mh = 0;
		problem[0] = 0;
		failalloc_arm(n);
		ovstage_enqueue_result_t e;
		if (k == 0)
			e = ovstage_write_attribute(f.st, f.q, tst_attr(nt), 3, w, OVSTAGE_PRIM_MODE_UPSERT);
		else if (k == 1)
			e = ovstage_delete_attributes(f.st, f.q, &(ovx_string_or_token_t){ nt, { NULL, 0 } }, 1, 3);
		else
			e = ovstage_map_attribute(f.st, f.q, &desc, 3, NULL, 0, &mh);
		bool hit = failalloc_disarm();
		ovstage_api_status_t s = e.status;
		char msg[1200];
		snprintf(msg, sizeof msg, "%s", tst_last_error());
		if (s != OVSTAGE_OK) {
			ck_assert_msg(s == OVSTAGE_ERROR_OUT_OF_MEMORY && names_memory(msg), "%s, allocation %llu failing: "
				      "%d '%s'", names[k], (unsigned long long)n, s, msg);
			ck_assert_uint_eq(mh, OVSTAGE_INVALID_MAP_HANDLE);
			refused++;
			expect_no_column(&f, nt, names[k]);
			teardown(&f);
			continue;
		}
		/* accepted: end it (unarmed) */
		ovstage_op_wait_result_t wr;
		ck_assert_int_eq(ovstage_wait_op(f.st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr), OVSTAGE_OK);
		ck_assert_int_eq(ovstage_release_op(f.st, e.op_index), OVSTAGE_OK);
		if (k == 2) {
			ovstage_cuda_sync_t none = { 0, 0 };
			ovstage_enqueue_result_t u = ovstage_unmap_attribute(f.st, mh, none);
			ck_assert_int_eq(u.status, OVSTAGE_OK);
			ck_assert_int_eq(ovstage_wait_op(f.st, u.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr), OVSTAGE_OK);
			ck_assert_int_eq(ovstage_release_op(f.st, u.op_index), OVSTAGE_OK);
		}
		teardown(&f);
		if (!hit)
			break;
	}
	ck_assert_msg(refused > 0, "%s: no allocation failure refused the call", names[k]);
	fprintf(stderr, "check_alloc_fail: %s of a new column: %llu allocations injected, %d refused the call\n",
		names[k], (unsigned long long)(n - 1), refused);
}
END_TEST

static Suite *alloc_fail_suite(void)
{
	Suite *su = suite_create("alloc_fail");
	TCase *tc = tcase_create("sweep");
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, test_alloc_failure_sweep, 0, OP_COUNT);
	tcase_add_test(tc, test_refused_call_creates_no_column);
	tcase_add_loop_test(tc, test_oom_refused_call_creates_no_column, 0, 3);
	suite_add_tcase(su, tc);
	return su;
}

int main(void)
{
	SRunner *sr = srunner_create(alloc_fail_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
