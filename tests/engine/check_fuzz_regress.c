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

static Suite *fuzz_regress_suite(void)
{
	Suite *su = suite_create("fuzz_regress");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_empty_null_data_with_byte_offset);
	tcase_add_test(tc, test_empty_tensor_huge_trailing_stride);
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
