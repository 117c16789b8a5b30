/*
 * fuzz/fuzz_read.c — libFuzzer target: decodes reads (ovstage_read_attributes with ordinal ranges
 * including 0, huge and start > end; attribute lists; fetch_read_next / release_group) and map
 * sessions (map_attribute / fetch_map_next / unmap_group / unmap_attribute) over an instance seeded
 * with a few sealed writes (and one unsealed column), and checks:
 *  - every call returns a documented status (never INTERNAL), enqueues an op id iff accepted;
 *  - a group's tensors and index maps are readable for their whole extent (ASan checks), rows of a
 *    fixed group's index_map are inside its tensor; a released group cannot be released again;
 *  - every handle, group and op is released: the periodic destroy (every FZ_RESET_EVERY
 *    iterations) must succeed, and LSan finds no leak at exit.
 */
#include "fuzz_common.h"

#define FZ_MAX_GROUPS 64

static void seed(void);
static fz_proc FP = { .seed = seed };
static volatile uint8_t sink;

static void write_f32(ovstage_query_handle_t q, int attr, uint64_t ord, uint32_t rows, uint16_t lanes, int code)
{
	float v[64];
	for (int i = 0; i < 64; i++)
		v[i] = (float)i;
	int64_t shape[1] = { rows };
	DLTensor t;
	memset(&t, 0, sizeof t);
	t.data = v;
	t.device.device_type = kDLCPU;
	t.ndim = 1;
	t.dtype.code = (uint8_t)code;
	t.dtype.bits = 32;
	t.dtype.lanes = lanes;
	t.shape = shape;
	ovstage_write_data_t w;
	memset(&w, 0, sizeof w);
	w.tensors = &t;
	w.tensor_count = 1;
	ovx_string_or_token_t a = { FP.f.tok[attr], { NULL, 0 } };
	ovstage_enqueue_result_t r = ovstage_write_attribute(FP.f.st, q, a, ord, w, OVSTAGE_PRIM_MODE_UPSERT);
	FZ_CHECK(r.status == OVSTAGE_OK, "seed write");
	FZ_CHECK(fz_wait_release(FP.f.st, r.op_index) == 0, "seed write failed");
}

static void seed(void)
{
	write_f32(FP.f.q, 0, 1, FZ_NPRIMS, 1, kDLFloat); /* a: float */
	write_f32(FP.f.q, 1, 1, FZ_NPRIMS, 3, kDLInt);   /* b: int32x3 */
	write_f32(FP.f.q, 2, 2, FZ_NPRIMS, 1, kDLFloat); /* c: float, later deleted on the sub query */
	/* arr: a per-row array column, rows of 1..4 floats */
	{
		float v[16] = { 0 };
		DLTensor t[FZ_NPRIMS];
		int64_t shape[FZ_NPRIMS];
		for (int i = 0; i < FZ_NPRIMS; i++) {
			memset(&t[i], 0, sizeof t[i]);
			shape[i] = i + 1;
			t[i].data = v;
			t[i].device.device_type = kDLCPU;
			t[i].ndim = 1;
			t[i].dtype.code = kDLFloat;
			t[i].dtype.bits = 32;
			t[i].dtype.lanes = 1;
			t[i].shape = &shape[i];
		}
		ovstage_attribute_write_t w;
		memset(&w, 0, sizeof w);
		w.attribute.token = FP.f.tok[3];
		w.data.tensors = t;
		w.data.tensor_count = FZ_NPRIMS;
		w.data.is_array = true;
		ovstage_enqueue_result_t r = ovstage_write_attributes(FP.f.st, FP.f.q, &w, 1, 2, OVSTAGE_PRIM_MODE_UPSERT);
		FZ_CHECK(r.status == OVSTAGE_OK, "seed array write");
		FZ_CHECK(fz_wait_release(FP.f.st, r.op_index) == 0, "seed array write failed");
	}
	ovx_string_or_token_t c = { FP.f.tok[2], { NULL, 0 } };
	ovstage_enqueue_result_t r = ovstage_delete_attributes(FP.f.st, FP.f.q_sub, &c, 1, 3);
	FZ_CHECK(r.status == OVSTAGE_OK, "seed delete");
	FZ_CHECK(fz_wait_release(FP.f.st, r.op_index) == 0, "seed delete failed");
	ovstage_write_floor_desc_t d = { 3, OVSTAGE_SCOPE_ALL, NULL, 0 };
	fz_enqueue_wait(FP.f.st, ovstage_advance_write_floor(FP.f.st, &d), "seed floor");
	FP.floor_ord = 3;
	write_f32(FP.f.q_sub, 7, 10, 2, 1, kDLFloat); /* s: unsealed on prims 1 and 3 */
}

static void at_exit(void)
{
	fz_proc_exit(&FP);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_proc_init(&FP, at_exit); /* the instance, seeded */
	return 0;
}

static uint64_t pick_ordinal(fz_in *in)
{
	uint8_t b = fz_u8(in);
	switch (b >> 5) {
	case 0: return 0;
	case 1: return b & 15;
	case 2: return UINT64_MAX;
	case 3: return UINT64_MAX - (b & 3);
	case 4: return fz_u64(in);
	case 5: return FP.floor_ord;
	default: return FP.floor_ord + 1 + (b & 15);
	}
}

static void touch(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint8_t x = 0;
	for (size_t i = 0; i < n; i++)
		x ^= b[i];
	sink ^= x;
}

/* Reads (or, for maps, writes) every byte of a returned 1-D tensor. */
static uint64_t check_tensor(const DLTensor *t, int write)
{
	FZ_CHECK(t->ndim == 1 && t->shape != NULL, "returned tensor ndim %d shape %p", (int)t->ndim,
		 (const void *)t->shape);
	FZ_CHECK(t->shape[0] >= 0, "negative shape");
	FZ_CHECK(t->strides == NULL || t->strides[0] == 1 || t->shape[0] <= 1, "non-compact stride");
	uint64_t eb = ((uint64_t)t->dtype.bits * t->dtype.lanes + 7) / 8;
	FZ_CHECK(eb > 0, "zero-size dtype");
	size_t n = (size_t)((uint64_t)t->shape[0] * eb);
	FZ_CHECK(n == 0 || t->data != NULL, "NULL data with %zu bytes", n);
	uint8_t *p = (uint8_t *)t->data + t->byte_offset;
	if (n && write)
		memset(p, 0x5a, n);
	else if (n)
		touch(p, n);
	return (uint64_t)t->shape[0];
}

static void check_data(const ovstage_data_t *d, int is_delete, int write)
{
	if (is_delete) {
		FZ_CHECK(d->tensor_count == 0, "tombstone group with %u tensors", d->tensor_count);
		return;
	}
	FZ_CHECK(d->tensor_count >= 1 && d->tensors != NULL, "value group with %u tensors", d->tensor_count);
	uint64_t rows0 = 0;
	for (uint32_t i = 0; i < d->tensor_count; i++) {
		uint64_t r = check_tensor(&d->tensors[i], write);
		if (i == 0)
			rows0 = r;
	}
	FZ_CHECK(!(d->index_map && d->mask), "group with index_map and mask");
	if (d->index_map) {
		touch(d->index_map, sizeof(uint32_t) * d->count);
		if (d->tensor_count == 1)
			for (uint32_t i = 0; i < d->count; i++)
				FZ_CHECK(d->index_map[i] < rows0, "index_map[%u] = %u >= %" PRIu64 " rows", i, d->index_map[i],
					 rows0);
	}
	if (d->mask)
		touch(d->mask, sizeof(uint64_t) * ((d->count + 63) / 64));
}

static void check_prims(const ovstage_prim_group_t *p)
{
	if (p->index_map)
		touch(p->index_map, sizeof(uint32_t) * p->count);
}

static void release_groups(ovstage_read_group_t *g, int n, fz_in *in)
{
	for (int i = 0; i < n; i++) {
		int j = i + (int)(fz_u8(in) % (uint8_t)(n - i)); /* any order */
		ovstage_read_group_t t = g[i];
		g[i] = g[j];
		g[j] = t;
		ovstage_api_status_t s = ovstage_release_group(FP.f.st, &g[i]);
		FZ_CHECK(s == OVSTAGE_OK, "release_group = %d", (int)s);
	}
	if (n && (fz_u8(in) & 0x80)) {
		ovstage_api_status_t s = ovstage_release_group(FP.f.st, &g[0]);
		FZ_CHECK(s != OVSTAGE_OK && s != OVSTAGE_ERROR_INTERNAL && fz_status_documented(s),
			 "second release_group = %d", (int)s);
	}
}

static void one_read(fz_in *in)
{
	ovstage_query_handle_t q = fz_pick_query(&FP.f, fz_u8(in));
	uint8_t ab = fz_u8(in);
	ovx_token_t attrs[6];
	size_t na = ab & 7;
	if (na > 6)
		na = 6;
	for (size_t i = 0; i < na; i++) {
		uint8_t b = fz_u8(in);
		attrs[i] = b >= 0xf0 ? (b & 1 ? 0 : 0xbadbadull) : FP.f.tok[b % FZ_NATTRS];
	}
	const ovx_token_t *ap = (ab & 0x80) ? NULL : attrs; /* NULL with a count, sometimes */
	if (na == 0 && (ab & 0x40))
		ap = NULL;
	ovstage_ordinal_range_t range;
	memset(&range, 0, sizeof range);
	uint8_t rb = fz_u8(in);
	range.has_start_ordinal = rb & 1;
	range.start_ordinal = pick_ordinal(in);
	range.end_ordinal = pick_ordinal(in);
	ovstage_read_handle_t rh = 12345;
	ovstage_enqueue_result_t r = ovstage_read_attributes(FP.f.st, q, ap, na, range, &rh);
	fz_check_enqueue(r, "read_attributes");
	if (r.status != OVSTAGE_OK) {
		FZ_CHECK(rh == OVSTAGE_INVALID_READ_HANDLE, "rejected read left handle %" PRIu64, rh);
		return;
	}
	FZ_CHECK(rh != OVSTAGE_INVALID_READ_HANDLE, "accepted read without a handle");
	if (rb & 2)
		fz_wait_release(FP.f.st, r.op_index);
	ovstage_read_group_t groups[FZ_MAX_GROUPS];
	int ng = 0;
	int early_release = (rb & 4) != 0;
	for (int iter = 0; iter < 1000; iter++) {
		ovstage_read_group_t g;
		ovstage_timeout_ns_t to = (rb & 8) && iter < 3 ? 0 : OVSTAGE_TIMEOUT_INFINITE;
		ovstage_api_status_t s = ovstage_fetch_read_next(FP.f.st, rh, to, &g);
		FZ_CHECK(fz_status_documented(s) && s != OVSTAGE_ERROR_INTERNAL, "fetch_read_next = %d", (int)s);
		if (s == OVSTAGE_ERROR_TIMEOUT) {
			FZ_CHECK(to != OVSTAGE_TIMEOUT_INFINITE, "TIMEOUT on an infinite fetch");
			continue;
		}
		if (s != OVSTAGE_OK)
			break;
		FZ_CHECK(g.read_group_id != OVSTAGE_INVALID_READ_GROUP_ID, "group without an id");
		check_data(&g.data, g.is_delete, 0);
		check_prims(&g.prims);
		if (early_release && (fz_u8(in) & 1)) {
			FZ_CHECK(ovstage_release_group(FP.f.st, &g) == OVSTAGE_OK, "early release_group");
			continue;
		}
		FZ_CHECK(ng < FZ_MAX_GROUPS, "more than %d groups", FZ_MAX_GROUPS);
		groups[ng++] = g;
	}
	if (rb & 0x10) { /* groups outlive the read handle */
		fz_enqueue_wait(FP.f.st, ovstage_release_read(FP.f.st, rh), "release_read");
		release_groups(groups, ng, in);
	} else {
		release_groups(groups, ng, in);
		fz_enqueue_wait(FP.f.st, ovstage_release_read(FP.f.st, rh), "release_read");
	}
	if (!(rb & 2))
		fz_wait_release(FP.f.st, r.op_index);
	/* the handle is gone */
	ovstage_read_group_t g;
	ovstage_api_status_t s = ovstage_fetch_read_next(FP.f.st, rh, 0, &g);
	FZ_CHECK(s != OVSTAGE_OK && fz_status_documented(s) && s != OVSTAGE_ERROR_INTERNAL,
		 "fetch on a released read = %d", (int)s);
}

static void one_map(fz_in *in)
{
	ovstage_query_handle_t q = fz_pick_query(&FP.f, fz_u8(in));
	ovstage_map_desc_t desc;
	memset(&desc, 0, sizeof desc);
	desc.attribute = fz_pick_attr(&FP.f, fz_u8(in));
	uint8_t b = fz_u8(in);
	if (b & 1)
		desc.dtype = fz_dtype(in);
	desc.semantic = (ovstage_attribute_semantic_t)((b >> 1) & 15);
	desc.prim_mode = (ovstage_prim_mode_t)((b & 0x20) ? ((b & 0x40) ? 7 : 1) : 0);
	uint64_t ord = pick_ordinal(in);
	size_t sizes[FZ_NPRIMS + 2];
	size_t nsizes = 0;
	const size_t *sp = NULL;
	if (b & 0x80) {
		nsizes = fz_u8(in) % (FZ_NPRIMS + 3);
		for (size_t i = 0; i < nsizes; i++)
			sizes[i] = fz_u8(in) % 5;
		sp = nsizes ? sizes : NULL;
	}
	ovstage_map_handle_t mh = 777;
	ovstage_enqueue_result_t r = ovstage_map_attribute(FP.f.st, q, &desc, ord, sp, nsizes, &mh);
	fz_check_enqueue(r, "map_attribute");
	if (r.status != OVSTAGE_OK)
		return;
	FZ_CHECK(mh != OVSTAGE_INVALID_MAP_HANDLE, "accepted map without a handle");
	uint8_t fb = fz_u8(in);
	for (int iter = 0; iter < 4; iter++) {
		ovstage_map_group_t g;
		ovstage_api_status_t s = ovstage_fetch_map_next(FP.f.st, mh, OVSTAGE_TIMEOUT_INFINITE, &g);
		FZ_CHECK(fz_status_documented(s) && s != OVSTAGE_ERROR_INTERNAL && s != OVSTAGE_ERROR_TIMEOUT,
			 "fetch_map_next = %d", (int)s);
		if (s != OVSTAGE_OK)
			break;
		check_data(&g.data, 0, 1);
		check_prims(&g.prims);
		if (fb & 1) {
			ovstage_cuda_sync_t sync = { (fb & 2) ? 1 : 0, 0 };
			fz_enqueue_wait(FP.f.st, ovstage_unmap_group(FP.f.st, mh, &g, sync), "unmap_group");
		}
	}
	if (fb & 4) { /* a CUDA sync on a CPU build: rejected, the handle stays */
		ovstage_cuda_sync_t sync = { 0, 1 };
		ovstage_enqueue_result_t u = ovstage_unmap_attribute(FP.f.st, mh, sync);
		fz_enqueue_wait(FP.f.st, u, "unmap_attribute sync");
		if (u.status == OVSTAGE_OK)
			goto done;
	}
	ovstage_cuda_sync_t none = { 0, 0 };
	fz_enqueue_wait(FP.f.st, ovstage_unmap_attribute(FP.f.st, mh, none), "unmap_attribute");
done:
	fz_wait_release(FP.f.st, r.op_index);
	ovstage_cuda_sync_t none2 = { 0, 0 };
	ovstage_enqueue_result_t again = ovstage_unmap_attribute(FP.f.st, mh, none2);
	fz_check_enqueue(again, "second unmap_attribute");
	FZ_CHECK(again.status != OVSTAGE_OK, "second unmap_attribute accepted");
}

static void advance_floor(fz_in *in)
{
	uint8_t b = fz_u8(in);
	fz_advance_floor(&FP, b, (b & 0x80) ? pick_ordinal(in) : 0, FP.f.tok[7]);
}

static void bogus_handles(fz_in *in)
{
	uint64_t h = fz_u8(in) & 1 ? fz_u64(in) : (uint64_t)fz_u8(in);
	ovstage_read_group_t g;
	ovstage_api_status_t s = ovstage_fetch_read_next(FP.f.st, h, 0, &g);
	FZ_CHECK(fz_status_documented(s) && s != OVSTAGE_ERROR_INTERNAL && s != OVSTAGE_OK, "fetch bogus = %d", (int)s);
	memset(&g, 0, sizeof g);
	g.read_group_id = h;
	s = ovstage_release_group(FP.f.st, &g);
	FZ_CHECK(fz_status_documented(s) && s != OVSTAGE_ERROR_INTERNAL && s != OVSTAGE_OK, "release bogus = %d",
		 (int)s);
	ovstage_map_group_t mg;
	s = ovstage_fetch_map_next(FP.f.st, h, 0, &mg);
	FZ_CHECK(fz_status_documented(s) && s != OVSTAGE_ERROR_INTERNAL && s != OVSTAGE_OK, "map fetch bogus = %d",
		 (int)s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz_proc_next_input(&FP);
	fz_in in = { data, size };
	for (int cmd = 0; cmd < 8 && in.n; cmd++) {
		uint8_t c = fz_u8(&in);
		switch (c % 8) {
		case 0: case 1: case 2: case 3: one_read(&in); break;
		case 4: case 5: one_map(&in); break;
		case 6: advance_floor(&in); break;
		default: bogus_handles(&in); break;
		}
	}
	return 0;
}
