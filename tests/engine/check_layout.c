/*
 * check_layout.c — the DLPack write-payload rules of seed 000 / spec section 5, one test per rule,
 * against engine/layout.h: canonical and convenience fixed layouts, the flat-tensor non-rule,
 * index_map and mask sparsity, count rules, packed and per-row arrays, strides and byte_offset,
 * ownership (tensors / managed_tensors), malformed descriptors, dtype and row-width support,
 * devices, and the schema / reserved-semantic checks. Messages are checked where a rule has one.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"

static char err[512];

#define DT(c, b, l) ((DLDataType){.code = (uint8_t)(c), .bits = (uint8_t)(b), .lanes = (uint16_t)(l)})
#define F32(l) DT(kDLFloat, 32, l)
#define F64(l) DT(kDLFloat, 64, l)
#define U64(l) DT(kDLUInt, 64, l)
#define U8 DT(kDLUInt, 8, 1)

/* A CPU tensor over data. */
static DLTensor mk(const void *data, DLDataType dt, int32_t ndim, int64_t *shape, int64_t *strides)
{
	DLTensor t;
	memset(&t, 0, sizeof t);
	t.data = (void *)(uintptr_t)data;
	t.device.device_type = kDLCPU;
	t.device.device_id = 0;
	t.ndim = ndim;
	t.dtype = dt;
	t.shape = shape;
	t.strides = strides;
	return t;
}

static ovstage_write_data_t wd_of(const DLTensor *t, uint32_t tensor_count, bool is_array)
{
	ovstage_write_data_t wd;
	memset(&wd, 0, sizeof wd);
	wd.tensors = t;
	wd.tensor_count = tensor_count;
	wd.is_array = is_array;
	return wd;
}

static ovstage_api_status_t run(const ovstage_write_data_t *wd, uint32_t query_count, ovs_layout *l)
{
	err[0] = '\0';
	return ovs_layout_from_write(wd, query_count, l, err, sizeof err);
}

#define ASSERT_OK(st) ck_assert_msg((st) == OVSTAGE_OK, "expected OK, got %d: %s", (int)(st), err)
#define ASSERT_REJECT(st, want, substr)                                                                              \
	do {                                                                                                         \
		ovstage_api_status_t st_ = (st);                                                                     \
		ck_assert_msg(st_ == (want), "expected status %d, got %d: %s", (int)(want), (int)st_, err);          \
		ck_assert_msg(strstr(err, (substr)) != NULL, "message \"%s\" lacks \"%s\"", err, (substr));            \
	} while (0)

/* ---- Fixed-size layouts ---------------------------------------------------------------------- */

/* The fast path of a compact 1-D fixed tensor (shape [N], no strides or a unit stride) makes the
 * layout the general path makes of the same payload written as shape [N, 1] (one trailing dimension of
 * 1 folds into the same lanes), field by field; and its refusals are the general path's. */
static void layouts_equal(const ovs_layout *a, const ovs_layout *b)
{
	ck_assert_int_eq(a->kind, b->kind);
	ck_assert_int_eq(a->is_array, b->is_array);
	ck_assert_int_eq(a->semantic, b->semantic);
	ck_assert(a->dtype.code == b->dtype.code && a->dtype.bits == b->dtype.bits && a->dtype.lanes == b->dtype.lanes);
	ck_assert_uint_eq(a->elem_bytes, b->elem_bytes);
	ck_assert_uint_eq(a->count, b->count);
	ck_assert_uint_eq(a->row_count, b->row_count);
	ck_assert_uint_eq(a->row_bytes, b->row_bytes);
	ck_assert_uint_eq(a->row_len, b->row_len);
	ck_assert(a->device.device_type == b->device.device_type && a->device.device_id == b->device.device_id);
	ck_assert_int_eq(a->host_accessible, b->host_accessible);
	ck_assert_ptr_eq(a->index_map, b->index_map);
	ck_assert_ptr_eq(a->mask, b->mask);
	ck_assert_ptr_eq(a->view.base, b->view.base);
	ck_assert_uint_eq(a->view.elem_bytes, b->view.elem_bytes);
	ck_assert_uint_eq(a->view.elems, b->view.elems);
	ck_assert_int_eq(a->view.ndim, b->view.ndim);
	for (int32_t k = 0; k < a->view.ndim; k++) {
		ck_assert_int_eq(a->view.shape[k], b->view.shape[k]);
		ck_assert_int_eq(a->view.stride[k], b->view.stride[k]);
	}
	ck_assert_int_eq(a->view.dense, b->view.dense);
	ck_assert_uint_eq(a->src_row_elems, b->src_row_elems);
	ck_assert_ptr_eq(a->row_base, b->row_base);
	ck_assert_int_eq(a->row_stride, b->row_stride);
	ck_assert_int_eq(a->row_dense, b->row_dense);
	ck_assert_int_eq(a->contiguous, b->contiguous);
	ck_assert_uint_eq(a->tensor_count, b->tensor_count);
}

START_TEST(fixed_fast_path_matches_general)
{
	static float data[64];
	const DLDataType dts[] = { F32(1), F32(3), F64(2), U8, DT(kDLInt, 16, 4) };
	const int64_t ns[] = { 1, 2, 64 };
	for (size_t d = 0; d < sizeof dts / sizeof *dts; d++)
		for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
			for (int strided = 0; strided < 2; strided++) {
				int64_t s1[1] = { ns[k] }, one[1] = { 1 }, s2[2] = { ns[k], 1 };
				DLTensor t1 = mk(data, dts[d], 1, s1, strided ? one : NULL), t2 = mk(data, dts[d], 2, s2, NULL);
				t1.byte_offset = t2.byte_offset = 8;
				ovstage_write_data_t w1 = wd_of(&t1, 1, false), w2 = wd_of(&t2, 1, false);
				w1.semantic = w2.semantic = OVSTAGE_SEMANTIC_NONE;
				ovs_layout a, b;
				ASSERT_OK(run(&w1, (uint32_t)ns[k], &a));
				ASSERT_OK(run(&w2, (uint32_t)ns[k], &b));
				layouts_equal(&a, &b);
				ck_assert_ptr_eq(a.tensors, &t1);
				/* count given explicitly: the same */
				w1.count = (uint32_t)ns[k];
				ASSERT_OK(run(&w1, (uint32_t)ns[k] + 5, &a));
				layouts_equal(&a, &b);
			}
	/* what the fast path leaves to the general path is refused as before */
	int64_t s[1] = { 4 }, st2[1] = { 2 };
	DLTensor t = mk(data, F32(1), 1, s, NULL);
	ovstage_write_data_t w = wd_of(&t, 1, false);
	ASSERT_REJECT(run(&w, 5, &(ovs_layout){ 0 }), OVSTAGE_ERROR_INVALID_ARGUMENT, "shape[0] = 4 != logical element count 5");
	t.data = NULL;
	ASSERT_REJECT(run(&w, 4, &(ovs_layout){ 0 }), OVSTAGE_ERROR_INVALID_ARGUMENT, "data is NULL");
	t.data = data;
	t.dtype = DT(kDLFloat, 8, 1);
	ASSERT_REJECT(run(&w, 4, &(ovs_layout){ 0 }), OVSTAGE_ERROR_NOT_SUPPORTED, "not a storable dtype");
	t.dtype = F32(1);
	t.device.device_id = -1;
	ASSERT_REJECT(run(&w, 4, &(ovs_layout){ 0 }), OVSTAGE_ERROR_INVALID_ARGUMENT, "device_id = -1 is negative");
	t.device.device_id = 0;
	w.semantic = (ovstage_attribute_semantic_t)999;
	ASSERT_REJECT(run(&w, 4, &(ovs_layout){ 0 }), OVSTAGE_ERROR_INVALID_ARGUMENT, "semantic = 999");
	w.semantic = OVSTAGE_SEMANTIC_NONE;
	t.strides = st2; /* a stride of 2: the general path's strided view */
	ovs_layout g;
	ASSERT_OK(run(&w, 4, &g));
	ck_assert(!g.contiguous);
	ck_assert_int_eq(g.row_stride, 8);
}
END_TEST

START_TEST(fixed_canonical_and_convenience_normalise_alike)
{
	/* point3f: shape [2] lanes 3 == shape [2, 3] lanes 1 */
	float p[6] = {1, 2, 3, 4, 5, 6};
	int64_t s_canon[1] = {2}, s_conv[2] = {2, 3};
	DLTensor canon = mk(p, F32(3), 1, s_canon, NULL), conv = mk(p, F32(1), 2, s_conv, NULL);
	ovstage_write_data_t w1 = wd_of(&canon, 1, false), w2 = wd_of(&conv, 1, false);
	ovs_layout a, b;
	ASSERT_OK(run(&w1, 2, &a));
	ASSERT_OK(run(&w2, 2, &b));
	ck_assert_int_eq(a.kind, OVS_LAYOUT_FIXED);
	ck_assert(ovs_dtype_equal(a.dtype, F32(3)) && ovs_dtype_equal(b.dtype, F32(3)));
	ck_assert_uint_eq(a.row_bytes, 12);
	ck_assert_uint_eq(b.row_bytes, 12);
	ck_assert_uint_eq(a.row_count, 2);
	ck_assert_uint_eq(b.row_count, 2);
	ck_assert_ptr_eq(ovs_layout_contiguous_base(&a), p);
	ck_assert_ptr_eq(ovs_layout_contiguous_base(&b), p);
	float ra[3], rb[3];
	ovs_layout_copy_row(&a, 1, ra);
	ovs_layout_copy_row(&b, 1, rb);
	ck_assert(memcmp(ra, rb, sizeof ra) == 0 && ra[0] == 4 && ra[2] == 6);

	/* matrix4d: shape [2] lanes 16 == [2, 4, 4] lanes 1 == [2, 4] lanes 4 */
	double m[32];
	for (int i = 0; i < 32; i++)
		m[i] = i;
	int64_t s16[1] = {2}, s44[3] = {2, 4, 4}, s4[2] = {2, 4};
	DLTensor t16 = mk(m, F64(16), 1, s16, NULL), t44 = mk(m, F64(1), 3, s44, NULL), t4 = mk(m, F64(4), 2, s4, NULL);
	const DLTensor *ts[3] = {&t16, &t44, &t4};
	double rows[3][16];
	for (int k = 0; k < 3; k++) {
		ovstage_write_data_t w = wd_of(ts[k], 1, false);
		ovs_layout l;
		ASSERT_OK(run(&w, 2, &l));
		ck_assert(ovs_dtype_equal(l.dtype, F64(16)));
		ck_assert_uint_eq(l.row_bytes, 128);
		ck_assert_uint_eq(l.elem_bytes, 128);
		ck_assert(l.contiguous && l.row_dense);
		ovs_layout_copy_row(&l, 1, rows[k]);
	}
	ck_assert(memcmp(rows[0], rows[1], sizeof rows[0]) == 0 && memcmp(rows[0], rows[2], sizeof rows[0]) == 0);
	ck_assert(rows[0][0] == 16.0 && rows[0][15] == 31.0);
}
END_TEST

START_TEST(fixed_flat_tensor_not_reinterpreted)
{
	float p[6] = {0};
	int64_t shape[1] = {6}; /* N*L = 2*3, lanes 1: 6 rows of one lane, not 2 rows of 3 */
	DLTensor t = mk(p, F32(1), 1, shape, NULL);
	ovstage_write_data_t w = wd_of(&t, 1, false);
	ovs_layout l;
	ASSERT_REJECT(run(&w, 2, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "tensors[0].shape[0] = 6 != logical element count 2");
	/* it is accepted as 6 rows of 1 lane */
	ASSERT_OK(run(&w, 6, &l));
	ck_assert(ovs_dtype_equal(l.dtype, F32(1)));
	ck_assert_uint_eq(l.row_count, 6);
}
END_TEST

START_TEST(fixed_tensor_count_must_be_one)
{
	float p[2] = {0};
	int64_t shape[1] = {2};
	DLTensor t[2] = {mk(p, F32(1), 1, shape, NULL), mk(p, F32(1), 1, shape, NULL)};
	ovstage_write_data_t w = wd_of(t, 2, false);
	ovs_layout l;
	ASSERT_REJECT(run(&w, 2, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "tensor_count = 2 for a fixed-size write");
}
END_TEST

START_TEST(fixed_scalar_ndim0_rejected)
{
	float p = 1;
	DLTensor t = mk(&p, F32(1), 0, NULL, NULL);
	ovstage_write_data_t w = wd_of(&t, 1, false);
	ovs_layout l;
	ASSERT_REJECT(run(&w, 1, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "tensors[0].ndim = 0");
}
END_TEST

START_TEST(fixed_zero_trailing_dim_rejected)
{
	int64_t shape[2] = {2, 0};
	DLTensor t = mk(NULL, F32(1), 2, shape, NULL);
	ovstage_write_data_t w = wd_of(&t, 1, false);
	ovs_layout l;
	ASSERT_REJECT(run(&w, 2, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "tensors[0].shape[1] = 0 does not fold into lanes");
}
END_TEST

/* ---- index_map ------------------------------------------------------------------------------- */

START_TEST(index_map_gather_and_reorder)
{
	int32_t p[8] = {10, 11, 20, 21, 30, 31, 40, 41}; /* 4 rows of int32x2 */
	int64_t shape[1] = {4};
	DLTensor t = mk(p, DT(kDLInt, 32, 2), 1, shape, NULL);
	uint32_t map[3] = {3, 1, 0}; /* payload wider than the query; row 2 unreferenced */
	ovstage_write_data_t w = wd_of(&t, 1, false);
	w.count = 3;
	w.index_map = map;
	ovs_layout l;
	ASSERT_OK(run(&w, 5, &l));
	ck_assert_uint_eq(l.count, 3);
	ck_assert_uint_eq(l.row_count, 4);
	const int32_t want[3][2] = {{40, 41}, {20, 21}, {10, 11}};
	for (uint32_t i = 0; i < 3; i++) {
		int32_t r[2];
		ck_assert(ovs_layout_selected(&l, i));
		ovs_layout_copy_row(&l, ovs_layout_source_row(&l, i), r);
		ck_assert_int_eq(r[0], want[i][0]);
		ck_assert_int_eq(r[1], want[i][1]);
	}
}
END_TEST

START_TEST(index_map_broadcast)
{
	double v = 7.5;
	int64_t shape[1] = {1};
	DLTensor t = mk(&v, F64(1), 1, shape, NULL);
	uint32_t map[2] = {0, 0}; /* one row written to two prims */
	ovstage_write_data_t w = wd_of(&t, 1, false);
	w.count = 2;
	w.index_map = map;
	ovs_layout l;
	ASSERT_OK(run(&w, 2, &l));
	for (uint32_t i = 0; i < 2; i++) {
		double r = 0;
		ck_assert_uint_eq(ovs_layout_source_row(&l, i), 0);
		ovs_layout_copy_row(&l, ovs_layout_source_row(&l, i), &r);
		ck_assert(r == 7.5);
	}
}
END_TEST

START_TEST(index_map_out_of_range)
{
	float p[4] = {0};
	int64_t shape[1] = {4};
	DLTensor t = mk(p, F32(1), 1, shape, NULL);
	uint32_t map[4] = {0, 1, 2, 9};
	ovstage_write_data_t w = wd_of(&t, 1, false);
	w.count = 4;
	w.index_map = map;
	ovs_layout l;
	ASSERT_REJECT(run(&w, 4, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "index_map[3] = 9 >= row count 4");
}
END_TEST

/* ---- mask and count -------------------------------------------------------------------------- */

START_TEST(mask_semantics)
{
	enum { N = 70 };
	float p[N] = {0};
	int64_t shape[1] = {N};
	DLTensor t = mk(p, F32(1), 1, shape, NULL);
	/* exactly ceil(70/64) = 2 words on the heap, so that ASan catches any read past them; bits
	 * 70..127 set to show they are ignored */
	uint64_t *mask = malloc(2 * sizeof *mask);
	ck_assert_ptr_nonnull(mask);
	mask[0] = (1ull << 0) | (1ull << 5) | (1ull << 63);
	mask[1] = (1ull << 1) | ~((1ull << 6) - 1); /* element 65, plus bits >= 70 */
	ovstage_write_data_t w = wd_of(&t, 1, false);
	w.count = N;
	w.mask = mask;
	ovs_layout l;
	ASSERT_OK(run(&w, 100, &l));
	int selected = 0;
	for (uint32_t i = 0; i < N; i++) {
		bool want = i == 0 || i == 5 || i == 63 || i == 65;
		ck_assert_msg(ovs_layout_selected(&l, i) == want, "element %u", i);
		selected += ovs_layout_selected(&l, i);
		ck_assert_uint_eq(ovs_layout_source_row(&l, i), i);
	}
	ck_assert_int_eq(selected, 4);
	for (uint32_t i = N; i < 128; i++)
		ck_assert(!ovs_layout_selected(&l, i));
	free(mask);

	/* count 64: one word is all that is read */
	uint64_t *one = malloc(sizeof *one);
	ck_assert_ptr_nonnull(one);
	*one = 1ull << 63;
	shape[0] = 64;
	t = mk(p, F32(1), 1, shape, NULL);
	w = wd_of(&t, 1, false);
	w.count = 64;
	w.mask = one;
	ASSERT_OK(run(&w, 64, &l));
	for (uint32_t i = 0; i < 64; i++)
		ck_assert(ovs_layout_selected(&l, i) == (i == 63));
	free(one);

	/* a masked payload still carries a row for every logical element */
	uint64_t m1 = 1;
	shape[0] = 1;
	t = mk(p, F32(1), 1, shape, NULL);
	w = wd_of(&t, 1, false);
	w.count = 3;
	w.mask = &m1;
	ASSERT_REJECT(run(&w, 3, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "shape[0] = 1 != logical element count 3");

	/* no mask: every element selected */
	shape[0] = 3;
	t = mk(p, F32(1), 1, shape, NULL);
	w = wd_of(&t, 1, false);
	ASSERT_OK(run(&w, 3, &l));
	ck_assert(ovs_layout_selected(&l, 0) && ovs_layout_selected(&l, 2) && !ovs_layout_selected(&l, 3));
}
END_TEST

START_TEST(index_map_with_mask_rejected)
{
	float p[2] = {0};
	int64_t shape[1] = {2};
	DLTensor t = mk(p, F32(1), 1, shape, NULL);
	uint32_t map[2] = {0, 1};
	uint64_t mask = 3;
	ovstage_write_data_t w = wd_of(&t, 1, false);
	w.count = 2;
	w.index_map = map;
	w.mask = &mask;
	ovs_layout l;
	ASSERT_REJECT(run(&w, 2, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "mutually exclusive");
}
END_TEST

START_TEST(count_required_with_map_or_mask)
{
	float p[2] = {0};
	int64_t shape[1] = {2};
	DLTensor t = mk(p, F32(1), 1, shape, NULL);
	uint32_t map[2] = {0, 1};
	uint64_t mask = 3;
	ovstage_write_data_t w = wd_of(&t, 1, false);
	w.index_map = map;
	ovs_layout l;
	ASSERT_REJECT(run(&w, 2, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "count = 0 with index_map set");
	w.index_map = NULL;
	w.mask = &mask;
	ASSERT_REJECT(run(&w, 2, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "count = 0 with mask set");
}
END_TEST

START_TEST(count_exceeds_query)
{
	float p[5] = {0};
	int64_t shape[1] = {5};
	DLTensor t = mk(p, F32(1), 1, shape, NULL);
	ovstage_write_data_t w = wd_of(&t, 1, false);
	w.count = 5;
	ovs_layout l;
	ASSERT_REJECT(run(&w, 3, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "count = 5 exceeds the query's 3 prims");
}
END_TEST

START_TEST(count_zero_means_all_query_prims)
{
	float p[3] = {0};
	int64_t shape[1] = {3};
	DLTensor t = mk(p, F32(1), 1, shape, NULL);
	ovstage_write_data_t w = wd_of(&t, 1, false);
	ovs_layout l;
	ASSERT_OK(run(&w, 3, &l));
	ck_assert_uint_eq(l.count, 3);
	/* a count below the query count takes the leading prims */
	shape[0] = 2;
	t = mk(p, F32(1), 1, shape, NULL);
	w = wd_of(&t, 1, false);
	w.count = 2;
	ASSERT_OK(run(&w, 3, &l));
	ck_assert_uint_eq(l.count, 2);
}
END_TEST

START_TEST(empty_query_skips_payload_checks)
{
	ovstage_write_data_t w;
	memset(&w, 0, sizeof w); /* no tensors at all */
	ovs_layout l;
	ASSERT_OK(run(&w, 0, &l));
	ck_assert_int_eq(l.kind, OVS_LAYOUT_EMPTY);
	ck_assert_uint_eq(l.count, 0);
	/* with a query, no tensor is an error */
	DLTensor unused;
	memset(&unused, 0, sizeof unused);
	w.tensors = &unused; /* never read: tensor_count is 0 */
	ASSERT_REJECT(run(&w, 1, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "tensor_count = 0");
}
END_TEST

/* ---- Arrays ---------------------------------------------------------------------------------- */

START_TEST(packed_array_even_partition)
{
	float p[6] = {1, 2, 3, 4, 5, 6};
	int64_t shape[1] = {6};
	DLTensor t = mk(p, F32(1), 1, shape, NULL);
	ovstage_write_data_t w = wd_of(&t, 1, true);
	ovs_layout l;
	ASSERT_OK(run(&w, 3, &l));
	ck_assert_int_eq(l.kind, OVS_LAYOUT_ARRAY_PACKED);
	ck_assert_uint_eq(l.row_count, 3);
	ck_assert_uint_eq(l.row_len, 2);
	ck_assert_uint_eq(l.row_bytes, 8);
	ck_assert_uint_eq(ovs_layout_array_len(&l, 2), 2);
	float r[2];
	ovs_layout_copy_array_row(&l, 2, r);
	ck_assert(r[0] == 5 && r[1] == 6);
	ck_assert_ptr_eq(ovs_layout_contiguous_base(&l), p);
}
END_TEST

START_TEST(packed_array_uneven_rejected)
{
	uint8_t p[5] = {0};
	int64_t shape[1] = {5};
	DLTensor t = mk(p, U8, 1, shape, NULL);
	ovstage_write_data_t w = wd_of(&t, 1, true);
	ovs_layout l;
	ASSERT_REJECT(run(&w, 2, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "5 bytes (5 x uint8x1), which do not divide evenly into 2");
}
END_TEST

START_TEST(packed_array_non_integral_rejected)
{
	float p[6] = {0}; /* 3 float32x2 elements = 24 bytes; 4 rows of 6 bytes are not whole elements */
	int64_t shape[1] = {3};
	DLTensor t = mk(p, F32(2), 1, shape, NULL);
	ovstage_write_data_t w = wd_of(&t, 1, true);
	ovs_layout l;
	ASSERT_REJECT(run(&w, 4, &l), OVSTAGE_ERROR_INVALID_ARGUMENT,
		      "24 bytes / 4 packed rows = 6 bytes per row, not a whole number of float32x2 elements");
}
END_TEST

START_TEST(packed_array_index_map_defines_rows)
{
	int16_t p[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
	int64_t shape[1] = {9};
	DLTensor t = mk(p, DT(kDLInt, 16, 1), 1, shape, NULL);
	uint32_t map[2] = {2, 0}; /* max + 1 = 3 rows of 3 */
	ovstage_write_data_t w = wd_of(&t, 1, true);
	w.count = 2;
	w.index_map = map;
	ovs_layout l;
	ASSERT_OK(run(&w, 2, &l));
	ck_assert_uint_eq(l.row_count, 3);
	ck_assert_uint_eq(l.row_len, 3);
	int16_t r[3];
	ovs_layout_copy_array_row(&l, ovs_layout_source_row(&l, 0), r);
	ck_assert(r[0] == 6 && r[1] == 7 && r[2] == 8);
	ovs_layout_copy_array_row(&l, ovs_layout_source_row(&l, 1), r);
	ck_assert(r[0] == 0 && r[2] == 2);
	/* the same 18 bytes cut by map {1, 0} into 2 rows of 9 bytes: not whole int16 elements */
	map[0] = 1;
	ASSERT_REJECT(run(&w, 2, &l), OVSTAGE_ERROR_INVALID_ARGUMENT,
		      "18 bytes / 2 packed rows = 9 bytes per row, not a whole number of int16x1 elements (2 bytes)");
	/* and by map {3, 0} into 4 rows: 18 bytes do not divide evenly */
	map[0] = 3;
	ASSERT_REJECT(run(&w, 2, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "do not divide evenly into 4 packed rows");
}
END_TEST

START_TEST(packed_array_empty_rows)
{
	int64_t shape[1] = {0};
	DLTensor t = mk(NULL, U64(1), 1, shape, NULL);
	ovstage_write_data_t w = wd_of(&t, 1, true);
	ovs_layout l;
	ASSERT_OK(run(&w, 4, &l));
	ck_assert_uint_eq(l.row_len, 0);
	ck_assert_uint_eq(ovs_layout_array_len(&l, 3), 0);
}
END_TEST

START_TEST(per_row_arrays)
{
	uint64_t a[2] = {1, 2}, c[3] = {7, 8, 9};
	int64_t sa[1] = {2}, sb[1] = {0}, sc[1] = {3};
	DLTensor t[3] = {mk(a, U64(1), 1, sa, NULL), mk(NULL, U64(1), 1, sb, NULL), mk(c, U64(1), 1, sc, NULL)};
	ovstage_write_data_t w = wd_of(t, 3, true);
	ovs_layout l;
	ASSERT_OK(run(&w, 3, &l));
	ck_assert_int_eq(l.kind, OVS_LAYOUT_ARRAY_PER_ROW);
	ck_assert_uint_eq(l.row_count, 3);
	ck_assert_uint_eq(ovs_layout_array_len(&l, 0), 2);
	ck_assert_uint_eq(ovs_layout_array_len(&l, 1), 0);
	ck_assert_uint_eq(ovs_layout_array_len(&l, 2), 3);
	ck_assert_ptr_null(ovs_layout_contiguous_base(&l));
	uint64_t r[3] = {0};
	ovs_layout_copy_array_row(&l, 2, r);
	ck_assert(r[0] == 7 && r[1] == 8 && r[2] == 9);

	/* without index_map, one tensor per logical element */
	ASSERT_REJECT(run(&w, 4, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "tensor_count = 3 != logical element count 4");
	/* with index_map, entries are below tensor_count */
	uint32_t map[2] = {2, 3};
	w.count = 2;
	w.index_map = map;
	ASSERT_REJECT(run(&w, 4, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "index_map[1] = 3 >= row count 3");
	map[1] = 2;
	ASSERT_OK(run(&w, 4, &l));
	/* all tensors share one dtype */
	w = wd_of(t, 3, true);
	t[2].dtype = U64(2);
	ASSERT_REJECT(run(&w, 3, &l), OVSTAGE_ERROR_INVALID_ARGUMENT,
		      "tensors[2].dtype = uint64x2 differs from tensors[0].dtype = uint64x1");
}
END_TEST

/* The address of a source array row whose bytes are adjacent (what a device copies at once), NULL for
 * a strided one: packed rows of a compact tensor at row_bytes steps, per-row tensors that are dense
 * (with or without explicit strides, with a byte_offset), never for fixed layouts. */
START_TEST(array_row_base_of_adjacent_rows)
{
	float f[12];
	for (int i = 0; i < 12; i++)
		f[i] = (float)i;
	int64_t s6[1] = {6};
	DLTensor t = mk(f, F32(1), 1, s6, NULL);
	ovstage_write_data_t w = wd_of(&t, 1, true);
	ovs_layout l;
	ASSERT_OK(run(&w, 3, &l)); /* 3 packed rows of 2 */
	ck_assert_ptr_eq(ovs_layout_array_row_base(&l, 0), f);
	ck_assert_ptr_eq(ovs_layout_array_row_base(&l, 2), f + 4);
	int64_t st3[1] = {2}; /* every other element: strided packed rows */
	t = mk(f, F32(1), 1, s6, st3);
	ASSERT_OK(run(&w, 3, &l));
	ck_assert_ptr_null(ovs_layout_array_row_base(&l, 1));
	/* per-row: a dense row, a dense row with compact explicit strides and a byte_offset, a strided
	 * row, and an empty one */
	int64_t sa[1] = {3}, sb[2] = {2, 2}, stb[2] = {2, 1}, sc[1] = {2}, stc[1] = {3}, sd[1] = {0};
	DLTensor pr[4] = {mk(f, F32(1), 1, sa, NULL), mk(f, F32(1), 2, sb, stb), mk(f, F32(1), 1, sc, stc),
			  mk(NULL, F32(1), 1, sd, NULL)};
	pr[1].byte_offset = 5 * sizeof(float);
	w = wd_of(pr, 4, true);
	ASSERT_OK(run(&w, 4, &l));
	ck_assert_ptr_eq(ovs_layout_array_row_base(&l, 0), f);
	ck_assert_ptr_eq(ovs_layout_array_row_base(&l, 1), f + 5);
	ck_assert_ptr_null(ovs_layout_array_row_base(&l, 2));
	ck_assert_uint_eq(ovs_layout_array_len(&l, 3), 0);
	/* a fixed layout has no array rows */
	int64_t s2[1] = {2};
	t = mk(f, F32(3), 1, s2, NULL);
	w = wd_of(&t, 1, false);
	ASSERT_OK(run(&w, 2, &l));
	ck_assert_ptr_null(ovs_layout_array_row_base(&l, 0));
}
END_TEST

START_TEST(array_writes_never_fold)
{
	float p[12];
	for (int i = 0; i < 12; i++)
		p[i] = (float)i;
	/* packed (4, 3) lanes 1, 2 rows: 6 scalar elements per row, not 2 float3 */
	int64_t shape[2] = {4, 3};
	DLTensor t = mk(p, F32(1), 2, shape, NULL);
	ovstage_write_data_t w = wd_of(&t, 1, true);
	ovs_layout l;
	ASSERT_OK(run(&w, 2, &l));
	ck_assert(ovs_dtype_equal(l.dtype, F32(1)));
	ck_assert_uint_eq(l.row_len, 6);
	/* per-row (P, 3) lanes 1 rows: 3P elements of one lane */
	int64_t s0[2] = {2, 3}, s1[2] = {1, 3};
	DLTensor rows[2] = {mk(p, F32(1), 2, s0, NULL), mk(p + 6, F32(1), 2, s1, NULL)};
	w = wd_of(rows, 2, true);
	ASSERT_OK(run(&w, 2, &l));
	ck_assert(ovs_dtype_equal(l.dtype, F32(1)));
	ck_assert_uint_eq(ovs_layout_array_len(&l, 0), 6);
	ck_assert_uint_eq(ovs_layout_array_len(&l, 1), 3);
	/* lanes = 3 declares vec3 elements, kept as given */
	rows[0] = mk(p, F32(3), 1, s0, NULL);
	rows[1] = mk(p + 6, F32(3), 1, s1, NULL);
	ASSERT_OK(run(&w, 2, &l));
	ck_assert(ovs_dtype_equal(l.dtype, F32(3)));
	ck_assert_uint_eq(ovs_layout_array_len(&l, 0), 2);
	ck_assert_uint_eq(l.elem_bytes, 12);
}
END_TEST

/* ---- Strides and byte_offset ----------------------------------------------------------------- */

START_TEST(strides_and_byte_offset_honoured)
{
	/* A column-major (transposed) 3 x 2 int32 source behind an 8-byte header: element [r][c] is
	 * at 2 + c*3 + r. Written as (3, 2) lanes 1 -> 3 rows of int32x2. */
	int32_t buf[2 + 6] = {-1, -1, 0, 10, 20, 1, 11, 21};
	int64_t shape[2] = {3, 2}, strides[2] = {1, 3};
	DLTensor t = mk(buf, DT(kDLInt, 32, 1), 2, shape, strides);
	t.byte_offset = 2 * sizeof(int32_t);
	ovstage_write_data_t w = wd_of(&t, 1, false);
	ovs_layout l;
	ASSERT_OK(run(&w, 3, &l));
	ck_assert(ovs_dtype_equal(l.dtype, DT(kDLInt, 32, 2)));
	ck_assert_ptr_null(ovs_layout_contiguous_base(&l));
	ck_assert(!l.row_dense && !l.contiguous);
	ck_assert_int_eq(l.row_stride, 4);
	for (uint32_t r = 0; r < 3; r++) {
		int32_t row[2];
		ovs_layout_copy_row(&l, r, row);
		ck_assert_int_eq(row[0], (int32_t)(r * 10));
		ck_assert_int_eq(row[1], (int32_t)(r * 10 + 1));
	}

	/* every other row of a float3 array: row stride 2 tuples, each row dense */
	float f[12];
	for (int i = 0; i < 12; i++)
		f[i] = (float)i;
	int64_t s1[1] = {2}, st1[1] = {2};
	t = mk(f, F32(3), 1, s1, st1);
	w = wd_of(&t, 1, false);
	ASSERT_OK(run(&w, 2, &l));
	ck_assert(l.row_dense && !l.contiguous);
	ck_assert_int_eq(l.row_stride, 24);
	float r3[3];
	ovs_layout_copy_row(&l, 1, r3);
	ck_assert(r3[0] == 6 && r3[1] == 7 && r3[2] == 8);

	/* explicit compact strides are contiguous */
	int64_t s2[2] = {2, 3}, st2[2] = {3, 1};
	t = mk(f, F32(1), 2, s2, st2);
	w = wd_of(&t, 1, false);
	ASSERT_OK(run(&w, 2, &l));
	ck_assert_ptr_eq(ovs_layout_contiguous_base(&l), f);

	/* negative strides (reversed rows) are supported: data + byte_offset is element [0] */
	int64_t s3[1] = {4}, st3[1] = {-1};
	t = mk(f, F32(1), 1, s3, st3);
	t.byte_offset = 3 * sizeof(float);
	w = wd_of(&t, 1, false);
	ASSERT_OK(run(&w, 4, &l));
	float one;
	ovs_layout_copy_row(&l, 0, &one);
	ck_assert(one == 3);
	ovs_layout_copy_row(&l, 3, &one);
	ck_assert(one == 0);

	/* a zero stride (broadcast source) is supported: every row reads the same bytes */
	int64_t s4[2] = {3, 2}, st4[2] = {0, 1};
	t = mk(f, F32(1), 2, s4, st4);
	w = wd_of(&t, 1, false);
	ASSERT_OK(run(&w, 3, &l));
	float r2[2];
	ovs_layout_copy_row(&l, 2, r2);
	ck_assert(r2[0] == 0 && r2[1] == 1);

	/* strided packed array: a (4,) view with stride 3 over f, 2 rows of 2 */
	int64_t s5[1] = {4}, st5[1] = {3};
	t = mk(f, F32(1), 1, s5, st5);
	w = wd_of(&t, 1, true);
	ASSERT_OK(run(&w, 2, &l));
	ovs_layout_copy_array_row(&l, 1, r2);
	ck_assert(r2[0] == 6 && r2[1] == 9);

	/* strided per-row array rows */
	int64_t s6[2] = {2, 2}, st6[2] = {1, 4}; /* [[0,4],[1,5]] */
	int64_t s7[1] = {2};                     /* f[8], f[11] */
	DLTensor pr[2] = {mk(f, F32(1), 2, s6, st6), mk(f + 8, F32(1), 1, s7, st5)};
	w = wd_of(pr, 2, true);
	ASSERT_OK(run(&w, 2, &l));
	float r4[4];
	ovs_layout_copy_array_row(&l, 0, r4);
	ck_assert(r4[0] == 0 && r4[1] == 4 && r4[2] == 1 && r4[3] == 5);
	ovs_layout_copy_array_row(&l, 1, r4);
	ck_assert(r4[0] == 8 && r4[1] == 11);
}
END_TEST

/* ---- Ownership ------------------------------------------------------------------------------- */

START_TEST(managed_tensors_accepted)
{
	float p[6] = {1, 2, 3, 4, 5, 6};
	int64_t shape[2] = {2, 3};
	DLManagedTensorVersioned m;
	memset(&m, 0, sizeof m);
	m.version.major = 1;
	m.dl_tensor = mk(p, F32(1), 2, shape, NULL);
	const DLManagedTensorVersioned *mp[1] = {&m};
	ovstage_write_data_t w;
	memset(&w, 0, sizeof w);
	w.managed_tensors = mp;
	w.tensor_count = 1;
	ovs_layout l;
	ASSERT_OK(run(&w, 2, &l));
	ck_assert(ovs_dtype_equal(l.dtype, F32(3)));
	ck_assert_ptr_eq(ovs_layout_tensor(&l, 0), &m.dl_tensor);
	float r[3];
	ovs_layout_copy_row(&l, 1, r);
	ck_assert(r[0] == 4 && r[2] == 6);

	/* managed messages name the managed field */
	shape[1] = -3;
	ASSERT_REJECT(run(&w, 2, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "managed_tensors[0]->dl_tensor.shape[1] = -3");

	/* a NULL entry is rejected */
	const DLManagedTensorVersioned *mp2[2] = {&m, NULL};
	w.managed_tensors = mp2;
	w.tensor_count = 2;
	w.is_array = true;
	ASSERT_REJECT(run(&w, 2, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "managed_tensors[1] is NULL");
}
END_TEST

START_TEST(both_or_neither_tensor_sources_rejected)
{
	float p[1] = {0};
	int64_t shape[1] = {1};
	DLTensor t = mk(p, F32(1), 1, shape, NULL);
	DLManagedTensorVersioned m;
	memset(&m, 0, sizeof m);
	m.dl_tensor = t;
	const DLManagedTensorVersioned *mp[1] = {&m};
	ovstage_write_data_t w = wd_of(&t, 1, false);
	w.managed_tensors = mp;
	ovs_layout l;
	ASSERT_REJECT(run(&w, 1, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "both tensors and managed_tensors are set");
	w.tensors = NULL;
	w.managed_tensors = NULL;
	ASSERT_REJECT(run(&w, 1, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "neither tensors nor managed_tensors is set");
}
END_TEST

/* ---- Malformed descriptors ------------------------------------------------------------------- */

START_TEST(null_data_rejected)
{
	int64_t shape[1] = {2};
	DLTensor t = mk(NULL, F32(1), 1, shape, NULL);
	ovstage_write_data_t w = wd_of(&t, 1, false);
	ovs_layout l;
	ASSERT_REJECT(run(&w, 2, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "tensors[0].data is NULL with 8 bytes");
	/* NULL data is fine for an empty row */
	float p[1] = {0};
	int64_t s1[1] = {1}, s0[1] = {0};
	DLTensor rows[2] = {mk(p, F32(1), 1, s1, NULL), mk(NULL, F32(1), 1, s0, NULL)};
	w = wd_of(rows, 2, true);
	ASSERT_OK(run(&w, 2, &l));
}
END_TEST

START_TEST(negative_shape_rejected)
{
	float p[1] = {0};
	int64_t shape[1] = {-1};
	DLTensor t = mk(p, F32(1), 1, shape, NULL);
	ovstage_write_data_t w = wd_of(&t, 1, false);
	ovs_layout l;
	ASSERT_REJECT(run(&w, 1, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "tensors[0].shape[0] = -1 is negative");
	t.ndim = -1;
	ASSERT_REJECT(run(&w, 1, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "tensors[0].ndim = -1 is negative");
	t.ndim = 1;
	t.shape = NULL;
	ASSERT_REJECT(run(&w, 1, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "tensors[0].shape is NULL");
}
END_TEST

START_TEST(size_overflow_rejected)
{
	float p[1] = {0};
	/* shape product 2^40 * 2^40 overflows int64 */
	int64_t shape[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
	DLTensor t = mk(p, F32(1), 2, shape, NULL);
	ovstage_write_data_t w = wd_of(&t, 1, true);
	ovs_layout l;
	ASSERT_REJECT(run(&w, 1, &l), OVSTAGE_ERROR_INVALID_ARGUMENT,
		      "tensors[0].shape[1] = 1099511627776: the element count overflows int64");
	/* 2^61 float64 elements fit int64 as a count but not as bytes */
	int64_t s1[1] = {INT64_C(1) << 61};
	t = mk(p, F64(1), 1, s1, NULL);
	w = wd_of(&t, 1, true);
	ASSERT_REJECT(run(&w, 1, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "2305843009213693952 elements of 8 bytes overflow");
	/* strides reaching past int64 */
	int64_t s2[1] = {4}, st2[1] = {INT64_C(1) << 62};
	t = mk(p, F32(1), 1, s2, st2);
	w = wd_of(&t, 1, true);
	ASSERT_REJECT(run(&w, 1, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "tensors[0].strides[0] = 4611686018427387904");
	/* byte_offset past int64 */
	int64_t s3[1] = {1};
	t = mk(p, F32(1), 1, s3, NULL);
	t.byte_offset = UINT64_MAX;
	w = wd_of(&t, 1, false);
	ASSERT_REJECT(run(&w, 1, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "byte_offset = 18446744073709551615");
}
END_TEST

/* ---- Dtypes, widths, devices ----------------------------------------------------------------- */

START_TEST(unsupported_dtype_not_supported)
{
	float p[1] = {0};
	int64_t shape[1] = {1};
	const DLDataType bad[] = {
		DT(kDLOpaqueHandle, 64, 1), DT(kDLInt, 12, 1), DT(kDLFloat, 8, 1), DT(99, 32, 1),
		DT(6, 1, 1) /* 1-bit bool */, DT(17, 4, 1) /* float4 */, DT(kDLInt, 128, 1),
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		DLTensor t = mk(p, bad[i], 1, shape, NULL);
		ovstage_write_data_t w = wd_of(&t, 1, false);
		ovs_layout l;
		ASSERT_REJECT(run(&w, 1, &l), OVSTAGE_ERROR_NOT_SUPPORTED, "is not a storable dtype");
	}
	/* bits or lanes 0: malformed, not unsupported */
	DLTensor t = mk(p, DT(kDLFloat, 0, 1), 1, shape, NULL);
	ovstage_write_data_t w = wd_of(&t, 1, false);
	ovs_layout l;
	ASSERT_REJECT(run(&w, 1, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "bits and lanes must be non-zero");
	/* the storable set */
	const DLDataType good[] = {DT(kDLBool, 8, 1), DT(kDLBfloat, 16, 1), DT(kDLComplex, 128, 1), DT(kDLFloat, 16, 4),
				   DT(12, 8, 1) /* float8_e5m2 */};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		uint8_t buf[64] = {0};
		t = mk(buf, good[i], 1, shape, NULL);
		w = wd_of(&t, 1, false);
		ASSERT_OK(run(&w, 1, &l));
	}
}
END_TEST

START_TEST(over_wide_row_not_supported)
{
	double p[1] = {0};
	/* (N, 16, 16) float64 folds into 256 lanes */
	int64_t shape[3] = {1, 16, 16};
	DLTensor t = mk(p, F64(1), 3, shape, NULL);
	ovstage_write_data_t w = wd_of(&t, 1, false);
	ovs_layout l;
	ASSERT_REJECT(run(&w, 1, &l), OVSTAGE_ERROR_NOT_SUPPORTED,
		      "tensors[0].shape[2] = 16 does not fold into lanes: 16 x 16 exceeds the cap of 255 lanes");
	/* lanes over the cap as given */
	int64_t s1[1] = {1};
	t = mk(p, DT(kDLUInt, 8, 256), 1, s1, NULL);
	w = wd_of(&t, 1, true);
	ASSERT_REJECT(run(&w, 1, &l), OVSTAGE_ERROR_NOT_SUPPORTED, "tensors[0].dtype.lanes = 256 exceeds the cap");
	/* the widest row: 255 lanes of complex128 = 4080 bytes */
	static double big[255 * 2];
	t = mk(big, DT(kDLComplex, 128, 255), 1, s1, NULL);
	w = wd_of(&t, 1, false);
	ASSERT_OK(run(&w, 1, &l));
	ck_assert_uint_eq(l.row_bytes, 4080);
	/* too many dimensions */
	int64_t many[OVS_LAYOUT_MAX_NDIM + 1];
	for (int i = 0; i <= OVS_LAYOUT_MAX_NDIM; i++)
		many[i] = 1;
	t = mk(p, F64(1), OVS_LAYOUT_MAX_NDIM + 1, many, NULL);
	w = wd_of(&t, 1, false);
	ASSERT_REJECT(run(&w, 1, &l), OVSTAGE_ERROR_NOT_SUPPORTED, "tensors[0].ndim = 33 exceeds");
}
END_TEST

START_TEST(devices)
{
	float p[2] = {0};
	int64_t shape[1] = {1};
	DLTensor t[2] = {mk(p, F32(1), 1, shape, NULL), mk(p + 1, F32(1), 1, shape, NULL)};
	ovstage_write_data_t w = wd_of(t, 2, true);
	ovs_layout l;
	ASSERT_OK(run(&w, 2, &l));
	ck_assert(l.host_accessible);
	ck_assert_int_eq(l.device.device_type, kDLCPU);
	/* CUDA memory is recorded faithfully, not dereferenced */
	t[0].device.device_type = t[1].device.device_type = kDLCUDA;
	t[0].device.device_id = t[1].device.device_id = 1;
	ASSERT_OK(run(&w, 2, &l));
	ck_assert(!l.host_accessible);
	ck_assert_int_eq(l.device.device_type, kDLCUDA);
	ck_assert_int_eq(l.device.device_id, 1);
	t[0].device.device_type = t[1].device.device_type = kDLCUDAHost;
	ASSERT_OK(run(&w, 2, &l));
	ck_assert(l.host_accessible);
	/* mixed devices */
	t[1].device.device_type = kDLCUDA;
	ASSERT_REJECT(run(&w, 2, &l), OVSTAGE_ERROR_INVALID_ARGUMENT,
		      "tensors[1].device = CUDA:1 differs from tensors[0].device = CUDAHost:1");
	/* other device types are not supported; negative ids are malformed */
	t[0].device.device_type = t[1].device.device_type = kDLVulkan;
	ASSERT_REJECT(run(&w, 2, &l), OVSTAGE_ERROR_NOT_SUPPORTED, "tensors[0].device = Vulkan");
	t[0].device.device_type = t[1].device.device_type = kDLCUDA;
	t[0].device.device_id = -1;
	ASSERT_REJECT(run(&w, 2, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "tensors[0].device.device_id = -1");
}
END_TEST

START_TEST(dtype_helpers)
{
	char buf[OVS_DTYPE_STR_MAX];
	ck_assert_str_eq(ovs_dtype_format(F32(3), buf, sizeof buf), "float32x3");
	ck_assert_str_eq(ovs_dtype_format(U64(2), buf, sizeof buf), "uint64x2");
	ck_assert_str_eq(ovs_dtype_format(DT(kDLBool, 8, 1), buf, sizeof buf), "bool8x1");
	ck_assert_uint_eq(ovs_dtype_bytes(F64(16)), 128);
	ck_assert_uint_eq(ovs_dtype_bytes(DT(kDLComplex, 64, 2)), 16);
	ck_assert(ovs_dtype_equal(F32(3), F32(3)) && !ovs_dtype_equal(F32(3), F32(1)));
	ck_assert_str_eq(ovs_semantic_name(OVSTAGE_SEMANTIC_POINT), "POINT");
}
END_TEST

/* ---- Schema ---------------------------------------------------------------------------------- */

static void layout_f32(ovs_layout *l, uint16_t lanes, bool is_array)
{
	static float p[4];
	static int64_t shape[1] = {1};
	DLTensor t = mk(p, F32(lanes), 1, shape, NULL);
	ovstage_write_data_t w = wd_of(&t, 1, is_array);
	ASSERT_OK(run(&w, 1, l));
}

START_TEST(schema_change_rejected)
{
	ovs_layout l;
	layout_f32(&l, 1, false);
	ASSERT_OK(ovs_layout_check_schema(&l, OVSTAGE_SEMANTIC_NONE, false, F32(1), OVSTAGE_SEMANTIC_NONE, "x", err,
					  sizeof err));
	ASSERT_REJECT(ovs_layout_check_schema(&l, OVSTAGE_SEMANTIC_NONE, false, F32(3), OVSTAGE_SEMANTIC_NONE, "x", err,
					      sizeof err),
		      OVSTAGE_ERROR_INVALID_ARGUMENT, "column \"x\" is float32x3; write is float32x1");
	/* kind change: fixed onto an array column */
	ASSERT_REJECT(ovs_layout_check_schema(&l, OVSTAGE_SEMANTIC_NONE, true, F32(1), OVSTAGE_SEMANTIC_NONE, "x", err,
					      sizeof err),
		      OVSTAGE_ERROR_INVALID_ARGUMENT, "column \"x\" is float32x1[]; write is float32x1");
	/* a (P,3) lanes-1 array onto a float3[] column */
	layout_f32(&l, 1, true);
	ASSERT_REJECT(ovs_layout_check_schema(&l, OVSTAGE_SEMANTIC_NONE, true, F32(3), OVSTAGE_SEMANTIC_NONE, "pts", err,
					      sizeof err),
		      OVSTAGE_ERROR_INVALID_ARGUMENT, "column \"pts\" is float32x3[]; write is float32x1[]");
}
END_TEST

START_TEST(semantic_change_rejected)
{
	ovs_layout l;
	layout_f32(&l, 3, false);
	ASSERT_OK(ovs_layout_check_schema(&l, OVSTAGE_SEMANTIC_POINT, false, F32(3), OVSTAGE_SEMANTIC_POINT, "p", err,
					  sizeof err));
	ASSERT_REJECT(ovs_layout_check_schema(&l, OVSTAGE_SEMANTIC_VECTOR, false, F32(3), OVSTAGE_SEMANTIC_POINT, "p", err,
					      sizeof err),
		      OVSTAGE_ERROR_INVALID_ARGUMENT, "column \"p\" has semantic POINT; write has semantic VECTOR");
	/* NONE is a role like any other */
	ASSERT_REJECT(ovs_layout_check_schema(&l, OVSTAGE_SEMANTIC_NONE, false, F32(3), OVSTAGE_SEMANTIC_POINT, "p", err,
					      sizeof err),
		      OVSTAGE_ERROR_INVALID_ARGUMENT, "has semantic POINT; write has semantic NONE");
	/* MATRIX onto a FRAME column */
	ASSERT_REJECT(ovs_layout_check_schema(&l, OVSTAGE_SEMANTIC_MATRIX, false, F32(3), OVSTAGE_SEMANTIC_FRAME, "p", err,
					      sizeof err),
		      OVSTAGE_ERROR_INVALID_ARGUMENT, "has semantic FRAME; write has semantic MATRIX");
	/* a value outside the enum */
	float p[3] = {0};
	int64_t shape[1] = {1};
	DLTensor t = mk(p, F32(3), 1, shape, NULL);
	ovstage_write_data_t w = wd_of(&t, 1, false);
	w.semantic = (ovstage_attribute_semantic_t)42;
	ASSERT_REJECT(run(&w, 1, &l), OVSTAGE_ERROR_INVALID_ARGUMENT, "semantic = 42");
}
END_TEST

START_TEST(reserved_semantic_layouts)
{
	struct {
		ovstage_attribute_semantic_t s;
		DLDataType dt;
		bool scalar_ok, array_ok;
	} ok[] = {
		{OVSTAGE_SEMANTIC_TOKEN_ID, U64(1), true, true},
		{OVSTAGE_SEMANTIC_RELATIONSHIP_PATH_ID, U64(1), false, true},
		{OVSTAGE_SEMANTIC_CONNECTION_PATH_ID, U64(2), false, true},
		{OVSTAGE_SEMANTIC_ASSET_PATH_ID, U64(2), true, true},
		{OVSTAGE_SEMANTIC_PATH_EXPRESSION_STRING, U64(1), true, true},
		{OVSTAGE_SEMANTIC_STRING, U8, false, true},
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		ovstage_api_status_t want_scalar = ok[i].scalar_ok ? OVSTAGE_OK : OVSTAGE_ERROR_INVALID_ARGUMENT;
		ovstage_api_status_t want_array = ok[i].array_ok ? OVSTAGE_OK : OVSTAGE_ERROR_INVALID_ARGUMENT;
		ck_assert_int_eq(ovs_layout_check_reserved(false, ok[i].dt, ok[i].s, "a", err, sizeof err), want_scalar);
		ck_assert_int_eq(ovs_layout_check_reserved(true, ok[i].dt, ok[i].s, "a", err, sizeof err), want_array);
		/* a wrong dtype is always rejected */
		ck_assert_int_eq(ovs_layout_check_reserved(true, DT(kDLInt, 64, 1), ok[i].s, "a", err, sizeof err),
				 OVSTAGE_ERROR_INVALID_ARGUMENT);
		ck_assert_int_eq(ovs_layout_check_reserved(true, U64(3), ok[i].s, "a", err, sizeof err),
				 OVSTAGE_ERROR_INVALID_ARGUMENT);
	}
	ASSERT_REJECT(ovs_layout_check_reserved(false, U64(1), OVSTAGE_SEMANTIC_RELATIONSHIP_PATH_ID, "rel", err,
						sizeof err),
		      OVSTAGE_ERROR_INVALID_ARGUMENT,
		      "attribute \"rel\": semantic RELATIONSHIP_PATH_ID requires layout uint64x1[]; write is uint64x1");
	ASSERT_REJECT(ovs_layout_check_reserved(true, F32(1), OVSTAGE_SEMANTIC_STRING, "s", err, sizeof err),
		      OVSTAGE_ERROR_INVALID_ARGUMENT, "semantic STRING requires layout uint8x1[]; write is float32x1[]");
	/* a uint64x2 write with NONE semantic is just a plain column; non-reserved roles take any layout */
	ASSERT_OK(ovs_layout_check_reserved(false, U64(2), OVSTAGE_SEMANTIC_NONE, "a", err, sizeof err));
	ASSERT_OK(ovs_layout_check_reserved(false, F64(16), OVSTAGE_SEMANTIC_MATRIX, "a", err, sizeof err));
	/* check_schema applies the reserved rules to the write too */
	ovs_layout l;
	layout_f32(&l, 1, false);
	ASSERT_REJECT(ovs_layout_check_schema(&l, OVSTAGE_SEMANTIC_TOKEN_ID, false, F32(1), OVSTAGE_SEMANTIC_TOKEN_ID, "t",
					      err, sizeof err),
		      OVSTAGE_ERROR_INVALID_ARGUMENT, "semantic TOKEN_ID requires layout uint64x1");
}
END_TEST

static Suite *layout_suite(void)
{
	Suite *s = suite_create("layout");
	TCase *tc = tcase_create("rules");
	tcase_add_test(tc, fixed_canonical_and_convenience_normalise_alike);
	tcase_add_test(tc, fixed_fast_path_matches_general);
	tcase_add_test(tc, fixed_flat_tensor_not_reinterpreted);
	tcase_add_test(tc, fixed_tensor_count_must_be_one);
	tcase_add_test(tc, fixed_scalar_ndim0_rejected);
	tcase_add_test(tc, fixed_zero_trailing_dim_rejected);
	tcase_add_test(tc, index_map_gather_and_reorder);
	tcase_add_test(tc, index_map_broadcast);
	tcase_add_test(tc, index_map_out_of_range);
	tcase_add_test(tc, mask_semantics);
	tcase_add_test(tc, index_map_with_mask_rejected);
	tcase_add_test(tc, count_required_with_map_or_mask);
	tcase_add_test(tc, count_exceeds_query);
	tcase_add_test(tc, count_zero_means_all_query_prims);
	tcase_add_test(tc, empty_query_skips_payload_checks);
	tcase_add_test(tc, packed_array_even_partition);
	tcase_add_test(tc, packed_array_uneven_rejected);
	tcase_add_test(tc, packed_array_non_integral_rejected);
	tcase_add_test(tc, packed_array_index_map_defines_rows);
	tcase_add_test(tc, packed_array_empty_rows);
	tcase_add_test(tc, per_row_arrays);
	tcase_add_test(tc, array_row_base_of_adjacent_rows);
	tcase_add_test(tc, array_writes_never_fold);
	tcase_add_test(tc, strides_and_byte_offset_honoured);
	tcase_add_test(tc, managed_tensors_accepted);
	tcase_add_test(tc, both_or_neither_tensor_sources_rejected);
	tcase_add_test(tc, null_data_rejected);
	tcase_add_test(tc, negative_shape_rejected);
	tcase_add_test(tc, size_overflow_rejected);
	tcase_add_test(tc, unsupported_dtype_not_supported);
	tcase_add_test(tc, over_wide_row_not_supported);
	tcase_add_test(tc, devices);
	tcase_add_test(tc, dtype_helpers);
	tcase_add_test(tc, schema_change_rejected);
	tcase_add_test(tc, semantic_change_rejected);
	tcase_add_test(tc, reserved_semantic_layouts);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(layout_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
