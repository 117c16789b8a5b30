/*
 * check_fuzz_regress.c — regression tests for the findings of the libFuzzer targets (fuzz/), each
 * the minimised input decoded by hand. They matter in the asan build (-fsanitize=address,undefined
 * with -fno-sanitize-recover): there any undefined behaviour aborts the test.
 *  - fuzz_write, 2026-12-01: an empty fixed-size tensor (shape[0] = 0) with NULL data and a non-zero
 *    byte_offset made layout.c compute NULL + byte_offset (UB: offset applied to a null pointer;
 *    clang's UBSan reports it, as in the fuzz build; gcc's does not, so the asan build of
 *    scripts/test.sh passes this one either way).
 *  - fuzz_write, 2026-12-01: an empty (N = 0, 2) tensor with a huge trailing stride: the stride span
 *    check is skipped for empty tensors, and the row view multiplied stride * element bytes in int64
 *    (signed overflow).
 *  - fuzz_api, 2026-12-01 (model-based target), four findings:
 *    a map_attribute refused at the call (write floor) still ran its map job, which created the
 *    prims and installed the column's schema (map.c); a write on an empty query installed a zero
 *    ("int0x0") schema, and was then refused against the column's real one (write.c); a range read
 *    whose start is above the retention frontier failed OUT_OF_RANGE in the op when nothing changed
 *    in the range and the state as of its end had left retention (read.c); wait_op of the
 *    unmap_attribute of a failed map named the internal commit op, released and without a message,
 *    as the root cause (map.c).
 *  - fuzz_api, 2026-12-01: a range read [0, b] reported an is_delete group for a prim that no
 *    version in the range changed: an older FULL version (every row changed) was taken to change
 *    every row of the newer, wider version too (read.c, mark_changed).
 *  - fuzz_api, 2026-12-02 (session 13, before it was committed): the sequencer read a mutation's
 *    column slots after submitting it; a delete that is not held by the sequencer's own fence can
 *    run on a worker and free its slots first (heap-use-after-free in sequencer.c). Deletes of an
 *    existing attribute in a loop, each racing its own submission.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ovstage/ovstage.h>
#include <ovx/path_dictionary/path_dictionary.h>

#include "stage_test_util.h"

typedef struct {
	ovstage_instance_t *st;
	path_dictionary_instance_t *pd;
	ovx_primpath_list_t list;
	ovstage_query_handle_t q;
} fixture;

static void setup(fixture *f)
{
	memset(f, 0, sizeof *f);
	ck_assert_int_eq(ovstage_create_instance(NULL, &f->st), OVSTAGE_OK);
	f->pd = ovstage_get_path_dictionary(f->st);
	const char *paths[] = { "/World/A", "/World/B", "/World/A/C", "/X" };
	f->q = tst_query_of(f->st, f->pd, paths, 4, &f->list);
}

static void teardown(fixture *f)
{
	tst_wait_ok(f->st, ovstage_release_query(f->st, f->q));
	path_dictionary_release_path_list_reference(f->pd, f->list);
	ck_assert_int_eq(ovstage_destroy_instance(f->st), OVSTAGE_OK);
}

/* An empty 1-D float tensor with NULL data and byte_offset 16: a malformed write (0 rows for 4
 * prims), refused with INVALID_ARGUMENT, without computing NULL + 16. */
START_TEST(test_empty_null_data_with_byte_offset)
{
	fixture f;
	setup(&f);
	int64_t shape[1] = { 0 };
	DLTensor t;
	memset(&t, 0, sizeof t);
	t.data = NULL;
	t.device.device_type = kDLCPU;
	t.ndim = 1;
	t.dtype.code = kDLFloat;
	t.dtype.bits = 32;
	t.dtype.lanes = 1;
	t.shape = shape;
	t.byte_offset = 16;
	ovstage_write_data_t w;
	memset(&w, 0, sizeof w);
	w.tensors = &t;
	w.tensor_count = 1;
	ovstage_enqueue_result_t e =
		ovstage_write_attribute(f.st, f.q, tst_attr(tst_tok(f.pd, "a")), 1, w, OVSTAGE_PRIM_MODE_UPSERT);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_uint_eq(e.op_index, OVSTAGE_INVALID_OP_ID);
	/* the same through a one-element batch, and as a managed tensor (released exactly once) */
	ovstage_attribute_write_t aw = { tst_attr(tst_tok(f.pd, "a")), w };
	e = ovstage_write_attributes(f.st, f.q, &aw, 1, 1, OVSTAGE_PRIM_MODE_UPSERT);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_INVALID_ARGUMENT);
	teardown(&f);
}
END_TEST

static int deleter_calls;
static void count_deleter(DLManagedTensorVersioned *self)
{
	(void)self;
	deleter_calls++;
}

/* shape (0, 2), strides (1, -7781938148375789569) float32: the fuzzer's value; stride * 4 overflows
 * int64. Refused (0 rows for 4 prims) without overflowing; the managed copy is released once. */
START_TEST(test_empty_tensor_huge_trailing_stride)
{
	fixture f;
	setup(&f);
	int64_t shape[2] = { 0, 2 };
	int64_t strides[2] = { 1, -7781938148375789569LL };
	DLManagedTensorVersioned mt;
	memset(&mt, 0, sizeof mt);
	mt.version.major = DLPACK_MAJOR_VERSION;
	mt.version.minor = DLPACK_MINOR_VERSION;
	mt.deleter = count_deleter;
	DLTensor *t = &mt.dl_tensor;
	float v[2] = { 0, 0 };
	t->data = v;
	t->device.device_type = kDLCPU;
	t->ndim = 2;
	t->dtype.code = kDLFloat;
	t->dtype.bits = 32;
	t->dtype.lanes = 1;
	t->shape = shape;
	t->strides = strides;
	ovstage_write_data_t w;
	memset(&w, 0, sizeof w);
	w.tensors = t;
	w.tensor_count = 1;
	ovx_string_or_token_t a = tst_attr(tst_tok(f.pd, "b"));
	ovstage_enqueue_result_t e = ovstage_write_attribute(f.st, f.q, a, 1, w, OVSTAGE_PRIM_MODE_UPSERT);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_INVALID_ARGUMENT);
	/* with an index map over no rows it is still refused (row 0 of 0 rows) */
	uint32_t im[1] = { 0 };
	w.index_map = im;
	w.count = 1;
	e = ovstage_write_attribute(f.st, f.q, a, 1, w, OVSTAGE_PRIM_MODE_UPSERT);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_INVALID_ARGUMENT);
	/* managed */
	memset(&w, 0, sizeof w);
	const DLManagedTensorVersioned *arr[1] = { &mt };
	w.managed_tensors = arr;
	w.tensor_count = 1;
	deleter_calls = 0;
	e = ovstage_write_attribute(f.st, f.q, a, 1, w, OVSTAGE_PRIM_MODE_UPSERT);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(deleter_calls, 1);
	teardown(&f);
}
END_TEST

/* Writes `vals` (one float per query prim) to attribute `name` at `ord` and waits for it. */
static void write_f32(fixture *f, ovstage_query_handle_t q, const char *name, uint64_t ord, float *vals, int64_t n,
		      ovstage_prim_mode_t mode)
{
	tst_tensor tt;
	ovstage_write_data_t w = tst_wdata(&tt, vals, n, kDLFloat, 32, 1);
	tst_wait_ok(f->st, ovstage_write_attribute(f->st, q, tst_attr(tst_tok(f->pd, name)), ord, w, mode));
}

static void seal(fixture *f, uint64_t n)
{
	ovstage_write_floor_desc_t d = { n, OVSTAGE_SCOPE_ALL, NULL, 0 };
	tst_wait_ok(f->st, ovstage_advance_write_floor(f->st, &d));
}

/* A map refused at the call (its ordinal is at the floor) creates neither prims nor a schema: an
 * INSERT of those prims and a write of another dtype to that column both succeed afterwards. */
START_TEST(test_refused_map_leaves_no_trace)
{
	fixture f;
	setup(&f);
	seal(&f, 5);
	ovstage_map_desc_t desc;
	memset(&desc, 0, sizeof desc);
	desc.attribute = tst_attr(tst_tok(f.pd, "m"));
	desc.dtype.code = kDLFloat;
	desc.dtype.bits = 32;
	desc.dtype.lanes = 1;
	ovstage_map_handle_t mh = 7;
	/* through a query of its own, released (and waited) afterwards: its release is ordered after
	 * the ops that hold it, so whatever the refused session submitted has run by then */
	const char *paths[] = { "/World/A", "/World/B", "/World/A/C", "/X" };
	ovstage_query_handle_t q2 = tst_query_of(f.st, f.pd, paths, 4, NULL);
	ovstage_enqueue_result_t e = ovstage_map_attribute(f.st, q2, &desc, 5, NULL, 0, &mh);
	ck_assert_int_eq(e.status, OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION);
	ck_assert_uint_eq(mh, OVSTAGE_INVALID_MAP_HANDLE);
	ck_assert_msg(strstr(tst_last_error(), "5") != NULL, "message does not name the ordinal: %s", tst_last_error());
	tst_wait_ok(f.st, ovstage_release_query(f.st, q2));
	/* the prims do not exist: a clone of one finds no source */
	ovx_string_t src = { "/World/A", 8 }, dst = { "/Z", 2 };
	char msg[600];
	ck_assert_msg(tst_wait_op(f.st, ovstage_clone(f.st, src, &dst, 1, 6), msg, sizeof msg) == 1,
		      "clone of a prim only a refused map named succeeded");
	ck_assert_msg(strstr(msg, "does not exist") != NULL, "clone: %s", msg);
	/* INSERT: every prim must still be new */
	float v[4] = { 1, 2, 3, 4 };
	write_f32(&f, f.q, "other", 6, v, 4, OVSTAGE_PRIM_MODE_INSERT);
	/* "m" has no schema: an int32 write defines it */
	int32_t iv[4] = { 1, 2, 3, 4 };
	tst_tensor tt;
	ovstage_write_data_t w = tst_wdata(&tt, iv, 4, kDLInt, 32, 1);
	tst_wait_ok(f.st, ovstage_write_attribute(f.st, f.q, desc.attribute, 6, w, OVSTAGE_PRIM_MODE_UPSERT));
	teardown(&f);
}
END_TEST

/* A write through an empty query installs no schema and is not checked against one. */
START_TEST(test_empty_query_write_has_no_schema)
{
	fixture f;
	setup(&f);
	ovx_primpath_list_t empty;
	ck_assert_int_eq(path_dictionary_create_path_list_from_strings(f.pd, NULL, 0, &empty).status, OVX_API_SUCCESS);
	ovstage_query_handle_t qe;
	ck_assert_int_eq(ovstage_query_from_path_list(f.st, empty, &qe), OVSTAGE_OK);
	/* an empty float write first, then an int32 column: accepted */
	write_f32(&f, qe, "e", 1, NULL, 0, OVSTAGE_PRIM_MODE_UPSERT);
	int32_t iv[4] = { 1, 2, 3, 4 };
	tst_tensor tt;
	ovstage_write_data_t w = tst_wdata(&tt, iv, 4, kDLInt, 32, 1);
	tst_wait_ok(f.st, ovstage_write_attribute(f.st, f.q, tst_attr(tst_tok(f.pd, "e")), 2, w, OVSTAGE_PRIM_MODE_UPSERT));
	/* and an empty float write onto that int32 column: nothing to check, accepted */
	write_f32(&f, qe, "e", 3, NULL, 0, OVSTAGE_PRIM_MODE_UPSERT);
	tst_wait_ok(f.st, ovstage_release_query(f.st, qe));
	path_dictionary_release_path_list_reference(f.pd, empty);
	teardown(&f);
}
END_TEST

/* Retention 2: versions at 4, 7 and 9 leave the frontier at 4. A range read [5, 6] starts above it
 * and nothing changed in it: zero groups, not OUT_OF_RANGE (the state as of 6 is version 4, gone). */
START_TEST(test_range_above_frontier_without_changes)
{
	fixture f;
	setup(&f);
	float v[4] = { 1, 2, 3, 4 };
	write_f32(&f, f.q, "r", 4, v, 4, OVSTAGE_PRIM_MODE_UPSERT);
	write_f32(&f, f.q, "r", 7, v, 4, OVSTAGE_PRIM_MODE_UPSERT);
	write_f32(&f, f.q, "r", 9, v, 4, OVSTAGE_PRIM_MODE_UPSERT);
	seal(&f, 9);
	ovx_token_t r = tst_tok(f.pd, "r");
	ovstage_read_handle_t rh;
	ovstage_ordinal_range_t rg = { 5, 6, true };
	ovstage_enqueue_result_t e = ovstage_read_attributes(f.st, f.q, &r, 1, rg, &rh);
	ck_assert_msg(e.status == OVSTAGE_OK, "range [5, 6] refused: %d %s", e.status, tst_last_error());
	char msg[600];
	ck_assert_msg(tst_wait_op(f.st, e, msg, sizeof msg) == 0, "range [5, 6] failed: %s", msg);
	ovstage_read_group_t g;
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh, OVSTAGE_TIMEOUT_INFINITE, &g), OVSTAGE_ERROR_END_OF_ITERATION);
	tst_wait_ok(f.st, ovstage_release_read(f.st, rh));
	/* [4, 6]: every row changed at 4, in the range, and again at 7, after it: OUT_OF_RANGE (from the
	 * op: range reads are no longer refused at the call for their start) */
	rg.start_ordinal = 4;
	e = ovstage_read_attributes(f.st, f.q, &r, 1, rg, &rh);
	ck_assert_int_eq(e.status, OVSTAGE_OK);
	ovstage_op_wait_result_t w;
	ovstage_api_status_t ws = ovstage_wait_op(f.st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &w);
	ck_assert(ws == OVSTAGE_OK || ws == OVSTAGE_ERROR_OUT_OF_RANGE);
	ck_assert_uint_eq(w.error_op_id_count, 1);
	ck_assert_int_eq(ovstage_release_op(f.st, e.op_index), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh, OVSTAGE_TIMEOUT_INFINITE, &g), OVSTAGE_ERROR_OUT_OF_RANGE);
	tst_wait_ok(f.st, ovstage_release_read(f.st, rh));
	teardown(&f);
}
END_TEST

/* The unmap of a failed map: wait_op's root cause is the map op, with its message. */
START_TEST(test_failed_map_root_cause_is_the_map_op)
{
	fixture f;
	setup(&f);
	ovstage_map_desc_t desc;
	memset(&desc, 0, sizeof desc);
	desc.attribute = tst_attr(tst_tok(f.pd, "nodtype")); /* a new column without a dtype: the op fails */
	ovstage_map_handle_t mh;
	ovstage_enqueue_result_t e = ovstage_map_attribute(f.st, f.q, &desc, 1, NULL, 0, &mh);
	ck_assert_int_eq(e.status, OVSTAGE_OK);
	ovstage_cuda_sync_t none = { 0, 0 };
	ovstage_enqueue_result_t u = ovstage_unmap_attribute(f.st, mh, none);
	ck_assert_int_eq(u.status, OVSTAGE_OK);
	ovstage_op_wait_result_t w;
	ck_assert_int_eq(ovstage_wait_op(f.st, u.op_index, OVSTAGE_TIMEOUT_INFINITE, &w), OVSTAGE_OK);
	ck_assert_uint_ge(w.error_op_id_count, 1);
	ck_assert_uint_eq(w.error_op_ids[0], e.op_index);
	ovx_string_t m = ovstage_get_last_op_error(f.st, w.error_op_ids[0]);
	ck_assert_msg(m.length > 0 && strstr(m.ptr, "dtype") != NULL, "root cause message: %.*s", (int)m.length,
		      m.ptr ? m.ptr : "");
	ck_assert_int_eq(ovstage_release_op(f.st, u.op_index), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_wait_op(f.st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &w), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_release_op(f.st, e.op_index), OVSTAGE_OK);
	teardown(&f);
}
END_TEST

/* fuzz_api, 2026-12-01 (fuzz/corpus/fuzz_api/regress-range-delete-1): a FULL write at 1 over the
 * column's first 3 rows, sealed (a version of 3 rows, every row changed); then a write at 6 of a
 * fourth prim, not sealed (the column now has a row for it, empty in every sealed version), and a
 * version at 3 that changes a fifth row (a clone onto a new prim). A range read [0, 3] over all of
 * them must give the 3 rows of 1 and the clone's target as values, and nothing for the fourth prim:
 * it changed in no version in [0, 3]. It came back as an is_delete group (the version at 1 counted
 * as changing every row of the newer, wider version). */
START_TEST(test_range_full_version_marks_only_its_rows)
{
	fixture f;
	setup(&f);
	const char *p3[] = { "/X", "/World/A/C", "/World/A" };
	ovx_primpath_list_t l3;
	ovstage_query_handle_t q3 = tst_query_of(f.st, f.pd, p3, 3, &l3);
	float v3[3] = { 1, 2, 3 };
	write_f32(&f, q3, "a", 1, v3, 3, OVSTAGE_PRIM_MODE_UPSERT);
	seal(&f, 2);
	float v4[4] = { 10, 11, 12, 13 }; /* /World/A, /World/B, /World/A/C, /X at 6: pending */
	write_f32(&f, f.q, "a", 6, v4, 4, OVSTAGE_PRIM_MODE_UPSERT);
	ovx_string_t src = { "/X", 2 }, dst = { "/Y", 2 };
	tst_wait_ok(f.st, ovstage_clone(f.st, src, &dst, 1, 3));
	ovstage_write_floor_desc_t d = { 4, OVSTAGE_SCOPE_INCLUDE, NULL, 1 };
	ovx_token_t a = tst_tok(f.pd, "a");
	d.attributes = &a;
	tst_wait_ok(f.st, ovstage_advance_write_floor(f.st, &d));
	const char *pall[] = { "/World/A", "/World/B", "/World/A/C", "/X", "/Y" };
	ovx_primpath_list_t lall;
	ovstage_query_handle_t qall = tst_query_of(f.st, f.pd, pall, 5, &lall);
	ovstage_read_handle_t rh;
	ovstage_ordinal_range_t rg = { 0, 3, true };
	ovstage_enqueue_result_t e = ovstage_read_attributes(f.st, qall, &a, 1, rg, &rh);
	ck_assert_msg(e.status == OVSTAGE_OK, "range [0, 3] refused: %d %s", e.status, tst_last_error());
	tst_wait_ok(f.st, e);
	/* what each query position got: 0 nothing, 1 a value, 2 a delete */
	int got[5] = { 0 };
	float val[5] = { 0 };
	ovstage_read_group_t g;
	ovstage_api_status_t s;
	while ((s = ovstage_fetch_read_next(f.st, rh, OVSTAGE_TIMEOUT_INFINITE, &g)) == OVSTAGE_OK) {
		for (uint32_t j = 0; j < g.prims.count; j++) {
			uint32_t p = g.prims.index_map ? g.prims.index_map[j] : g.prims.offset + j;
			ck_assert_uint_lt(p, 5);
			ck_assert_int_eq(got[p], 0);
			got[p] = g.is_delete ? 2 : 1;
			if (!g.is_delete) {
				const DLTensor *t = &g.data.tensors[0];
				uint32_t r = g.data.index_map ? g.data.index_map[j] : j;
				val[p] = ((const float *)((const char *)t->data + t->byte_offset))[r];
			}
		}
		ck_assert_int_eq(ovstage_release_group(f.st, &g), OVSTAGE_OK);
	}
	ck_assert_int_eq(s, OVSTAGE_ERROR_END_OF_ITERATION);
	ck_assert_msg(got[1] == 0, "/World/B, never sealed in \"a\", came back as %s", got[1] == 2 ? "a delete" : "a value");
	ck_assert_int_eq(got[0], 1);
	ck_assert_int_eq(got[2], 1);
	ck_assert_int_eq(got[3], 1);
	ck_assert_int_eq(got[4], 1);
	ck_assert(val[0] == 3 && val[2] == 2 && val[3] == 1 && val[4] == 1);
	tst_wait_ok(f.st, ovstage_release_read(f.st, rh));
	tst_wait_ok(f.st, ovstage_release_query(f.st, qall));
	tst_wait_ok(f.st, ovstage_release_query(f.st, q3));
	path_dictionary_release_path_list_reference(f.pd, lall);
	path_dictionary_release_path_list_reference(f.pd, l3);
	teardown(&f);
}
END_TEST

/* Deletes of an existing attribute, each submitted while the worker may already run it: the
 * submitter must not touch the op's state (its column slots) once it is runnable. */
START_TEST(test_delete_slots_not_read_after_submit)
{
	fixture f;
	setup(&f);
	float v[4] = { 1, 2, 3, 4 };
	ovx_string_or_token_t a = tst_attr(tst_tok(f.pd, "a"));
	for (uint64_t o = 1; o <= 2000; o += 2) {
		write_f32(&f, f.q, "a", o, v, 4, OVSTAGE_PRIM_MODE_UPSERT);
		tst_wait_ok(f.st, ovstage_delete_attributes(f.st, f.q, &a, 1, o + 1));
	}
	seal(&f, 2000);
	teardown(&f);
}
END_TEST

static Suite *fuzz_regress_suite(void)
{
	Suite *su = suite_create("fuzz_regress");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_empty_null_data_with_byte_offset);
	tcase_add_test(tc, test_empty_tensor_huge_trailing_stride);
	tcase_add_test(tc, test_refused_map_leaves_no_trace);
	tcase_add_test(tc, test_empty_query_write_has_no_schema);
	tcase_add_test(tc, test_range_above_frontier_without_changes);
	tcase_add_test(tc, test_failed_map_root_cause_is_the_map_op);
	tcase_add_test(tc, test_range_full_version_marks_only_its_rows);
	tcase_add_test(tc, test_delete_slots_not_read_after_submit);
	suite_add_tcase(su, tc);
	return su;
}

int main(void)
{
	SRunner *sr = srunner_create(fuzz_regress_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
