/*
 * fuzz/fuzz_common.h — shared pieces of the libFuzzer targets: a byte reader over the input, the
 * instance fixture (one instance, a path-list query over a few prims, interned attribute tokens),
 * invariant checks that abort() with a message, the tensor-layout decoder that sizes a buffer we own
 * to exactly the bytes a decoded layout reaches (so ASan flags any read past it), and the process
 * of fuzz_read and fuzz_write (fz_proc: the instance kept across inputs, its periodic reset, the
 * exit checks, floor advances).
 */
#ifndef OVSTAGE_FUZZ_COMMON_H
#define OVSTAGE_FUZZ_COMMON_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sanitizer/lsan_interface.h>

#include <ovstage/ovstage.h>
#include <ovx/path_dictionary/path_dictionary.h>

#define FZ_CHECK(cond, ...)                                                                                   \
	do {                                                                                                  \
		if (!(cond)) {                                                                                \
			fprintf(stderr, "fuzz invariant failed at %s:%d: %s: ", __FILE__, __LINE__, #cond);  \
			fprintf(stderr, __VA_ARGS__);                                                         \
			ovx_string_t le_ = ovstage_get_last_error();                                          \
			fprintf(stderr, " (last error: %.*s)\n", (int)le_.length, le_.ptr ? le_.ptr : "");    \
			abort();                                                                              \
		}                                                                                             \
	} while (0)

/* ---- input reader ---------------------------------------------------------------------------- */

typedef struct {
	const uint8_t *p;
	size_t n;
} fz_in;

static inline uint8_t fz_u8(fz_in *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

static inline uint16_t fz_u16(fz_in *in)
{
	return (uint16_t)(fz_u8(in) | (uint16_t)fz_u8(in) << 8);
}

static inline uint32_t fz_u32(fz_in *in)
{
	return (uint32_t)fz_u16(in) | (uint32_t)fz_u16(in) << 16;
}

static inline uint64_t fz_u64(fz_in *in)
{
	return (uint64_t)fz_u32(in) | (uint64_t)fz_u32(in) << 32;
}

/* An "interesting" int64: small values mostly, sometimes extremes. */
static inline int64_t fz_i64_interesting(fz_in *in)
{
	uint8_t b = fz_u8(in);
	switch (b >> 5) {
	case 0: case 1: case 2: case 3:
		return (int64_t)(b & 7); /* 0..7 */
	case 4:
		return -(int64_t)(b & 7) - 1; /* -1..-8 */
	case 5:
		return (int64_t)(fz_u16(in) & 0x3ff);
	case 6: {
		static const int64_t big[8] = { INT64_MAX, INT64_MIN, (int64_t)1 << 32, (int64_t)1 << 62,
						-((int64_t)1 << 40), (int64_t)1 << 31, 65536, INT64_MAX / 3 };
		return big[b & 7];
	}
	default:
		return (int64_t)fz_u64(in);
	}
}

/* ---- status sets ----------------------------------------------------------------------------- */

static inline int fz_status_documented(ovstage_api_status_t s)
{
	return (s >= OVSTAGE_OK && s <= OVSTAGE_ERROR_OUT_OF_RANGE) || s == OVSTAGE_ERROR_INTERNAL;
}

/* An enqueue result is well formed: documented status, not INTERNAL, op id iff accepted. */
static inline void fz_check_enqueue(ovstage_enqueue_result_t e, const char *what)
{
	FZ_CHECK(fz_status_documented(e.status) && e.status != OVSTAGE_ERROR_INTERNAL, "%s: status %d", what,
		 (int)e.status);
	FZ_CHECK((e.status == OVSTAGE_OK) == (e.op_index != OVSTAGE_INVALID_OP_ID), "%s: status %d with op %" PRIu64,
		 what, (int)e.status, e.op_index);
}

/* Waits for an accepted op (infinite) and releases it; returns the number of failed ops reported.
 * wait_op returns OK, or — with the failure listed — the status 0.2.1 documents for an op that
 * itself failed with it (PRIM_NOT_FOUND, NOT_FOUND, WRITE_FLOOR_VIOLATION, OUT_OF_RANGE;
 * docs/errors.md); nothing else. */
static inline size_t fz_wait_release(ovstage_instance_t *st, ovstage_op_id_t op)
{
	ovstage_op_wait_result_t w;
	memset(&w, 0, sizeof w);
	ovstage_api_status_t s = ovstage_wait_op(st, op, OVSTAGE_TIMEOUT_INFINITE, &w);
	size_t n = w.error_op_id_count;
	FZ_CHECK(s == OVSTAGE_OK ||
			 (n > 0 && (s == OVSTAGE_ERROR_PRIM_NOT_FOUND || s == OVSTAGE_ERROR_NOT_FOUND ||
				    s == OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION || s == OVSTAGE_ERROR_OUT_OF_RANGE)),
		 "wait_op(%" PRIu64 ") = %d with %zu failures", op, (int)s, n);
	FZ_CHECK(n == 0 || w.error_op_ids != NULL, "error ids NULL with count %zu", n);
	s = ovstage_release_op(st, op);
	FZ_CHECK(s == OVSTAGE_OK, "release_op(%" PRIu64 ") = %d", op, (int)s);
	return n;
}

static inline void fz_enqueue_wait(ovstage_instance_t *st, ovstage_enqueue_result_t e, const char *what)
{
	fz_check_enqueue(e, what);
	if (e.status == OVSTAGE_OK)
		fz_wait_release(st, e.op_index);
}

/* ---- fixture --------------------------------------------------------------------------------- */

#define FZ_NPRIMS 4
#define FZ_NATTRS 8
static const char *const fz_prim_paths[FZ_NPRIMS] = { "/World/A", "/World/B", "/World/A/C", "/X" };
/* Attribute names the decoders pick from: plain columns, reserved metadata, a derived name. */
static const char *const fz_attr_names[FZ_NATTRS] = { "a", "b", "c", "arr", "usd-prim-type", "usd-schemas",
						       "usd-path", "s" };

typedef struct {
	ovstage_instance_t *st;
	path_dictionary_instance_t *pd;
	ovx_primpath_list_t list, sub_list, empty_list;
	ovstage_query_handle_t q, q_sub, q_empty; /* all prims, prims {1, 3}, no prims */
	ovx_token_t tok[FZ_NATTRS];
} fz_fixture;

static inline ovx_primpath_list_t fz_list_of(fz_fixture *f, const char *const *paths, size_t n)
{
	ovx_string_t s[FZ_NPRIMS];
	for (size_t i = 0; i < n; i++) {
		s[i].ptr = paths[i];
		s[i].length = strlen(paths[i]);
	}
	ovx_primpath_list_t l = 0;
	ovx_api_result_t r = path_dictionary_create_path_list_from_strings(f->pd, n ? s : NULL, n, &l);
	FZ_CHECK(r.status == OVX_API_SUCCESS, "path list");
	return l;
}

static inline void fz_setup(fz_fixture *f)
{
	memset(f, 0, sizeof *f);
	ovstage_instance_desc_t d = { "fuzz" };
	FZ_CHECK(ovstage_create_instance(&d, &f->st) == OVSTAGE_OK, "create_instance");
	f->pd = ovstage_get_path_dictionary(f->st);
	FZ_CHECK(f->pd != NULL, "path dictionary");
	f->list = fz_list_of(f, fz_prim_paths, FZ_NPRIMS);
	const char *sub[2] = { fz_prim_paths[1], fz_prim_paths[3] };
	f->sub_list = fz_list_of(f, sub, 2);
	f->empty_list = fz_list_of(f, NULL, 0);
	FZ_CHECK(ovstage_query_from_path_list(f->st, f->list, &f->q) == OVSTAGE_OK, "query");
	FZ_CHECK(ovstage_query_from_path_list(f->st, f->sub_list, &f->q_sub) == OVSTAGE_OK, "query sub");
	FZ_CHECK(ovstage_query_from_path_list(f->st, f->empty_list, &f->q_empty) == OVSTAGE_OK, "query empty");
	for (int i = 0; i < FZ_NATTRS; i++) {
		ovx_string_t s = { fz_attr_names[i], strlen(fz_attr_names[i]) };
		ovx_api_result_t r = path_dictionary_create_tokens_from_strings(f->pd, &s, 1, &f->tok[i]);
		FZ_CHECK(r.status == OVX_API_SUCCESS, "token");
	}
}

static inline void fz_teardown(fz_fixture *f)
{
	fz_enqueue_wait(f->st, ovstage_release_query(f->st, f->q), "release_query");
	fz_enqueue_wait(f->st, ovstage_release_query(f->st, f->q_sub), "release_query");
	fz_enqueue_wait(f->st, ovstage_release_query(f->st, f->q_empty), "release_query");
	path_dictionary_release_path_list_reference(f->pd, f->list);
	path_dictionary_release_path_list_reference(f->pd, f->sub_list);
	path_dictionary_release_path_list_reference(f->pd, f->empty_list);
	ovstage_api_status_t s = ovstage_destroy_instance(f->st);
	FZ_CHECK(s == OVSTAGE_OK, "destroy_instance = %d (something was left held)", (int)s);
	f->st = NULL;
}

/* A query handle chosen by the input: mostly the full query, sometimes the subset, empty or stale. */
static inline ovstage_query_handle_t fz_pick_query(fz_fixture *f, uint8_t b)
{
	switch (b & 15) {
	case 12: return f->q_sub;
	case 13: return f->q_empty;
	case 14: return 987654321u;
	case 15: return OVSTAGE_INVALID_QUERY_HANDLE;
	default: return f->q;
	}
}

static inline ovx_string_or_token_t fz_pick_attr(fz_fixture *f, uint8_t b)
{
	ovx_string_or_token_t a = { 0, { NULL, 0 } };
	int i = b % FZ_NATTRS;
	switch (b >> 5) {
	case 5: /* the name as a string */
		a.string.ptr = fz_attr_names[i];
		a.string.length = strlen(fz_attr_names[i]);
		return a;
	case 6: /* empty, or a bogus token */
		if (b & 1)
			a.token = 0xdeadbeefull;
		return a;
	default:
		a.token = f->tok[i];
		return a;
	}
}

/* ---- tensors --------------------------------------------------------------------------------- */

#define FZ_MAX_NDIM 5
#define FZ_BUF_CAP (64 * 1024)
#define FZ_LOGICAL_CAP (1024 * 1024)

/* A decoded DLTensor with the storage its pointers refer to. */
typedef struct {
	int64_t shape[FZ_MAX_NDIM];
	int64_t strides[FZ_MAX_NDIM];
	void *buf; /* malloc'd, exactly the reached bytes; NULL when data is NULL */
} fz_tensor_store;

static inline DLDataType fz_dtype(fz_in *in)
{
	DLDataType dt;
	uint8_t b = fz_u8(in);
	static const DLDataType common[12] = {
		{ kDLFloat, 32, 1 }, { kDLFloat, 32, 3 }, { kDLInt, 32, 1 }, { kDLUInt, 64, 1 },
		{ kDLUInt, 64, 2 }, { kDLFloat, 64, 16 }, { kDLUInt, 8, 1 }, { kDLBool, 8, 1 },
		{ kDLFloat, 16, 4 }, { kDLComplex, 64, 1 }, { kDLInt, 8, 255 }, { kDLBfloat, 16, 1 },
	};
	if (b < 200)
		return common[b % 12];
	dt.code = fz_u8(in);
	dt.bits = fz_u8(in);
	dt.lanes = fz_u16(in);
	return dt;
}

/*
 * Decodes one tensor into *t. Computes the byte range the layout reaches (shape, strides in
 * elements, byte_offset); when that range is finite and small, data points into a buffer of exactly
 * that size (filled from the input); otherwise data is NULL (the layout is then either empty or must
 * be rejected: the engine refuses NULL data with a non-empty payload).
 */
static inline void fz_decode_tensor(fz_in *in, DLTensor *t, fz_tensor_store *ts)
{
	memset(t, 0, sizeof *t);
	memset(ts, 0, sizeof *ts);
	uint8_t b = fz_u8(in);
	int32_t ndim = (int32_t)(b & 3); /* 0..3 */
	if ((b & 0xf0) == 0xf0)
		ndim = (b & 4) ? -1 : 4 + (b & 1); /* rare: negative or too many */
	t->ndim = ndim;
	t->dtype = fz_dtype(in);
	uint8_t dev = fz_u8(in);
	static const int32_t devs[8] = { kDLCPU, kDLCPU, kDLCPU, kDLCPU, kDLCUDAHost, kDLCUDA, 13, 4 };
	t->device.device_type = (DLDeviceType)devs[dev & 7];
	t->device.device_id = (dev & 0x80) ? ((dev & 0x40) ? -1 : (int32_t)(dev & 0x3f)) : 0;
	int nd = ndim > 0 ? ndim : 0;
	uint8_t flags = fz_u8(in);
	for (int k = 0; k < nd; k++) {
		uint8_t sb = fz_u8(in);
		ts->shape[k] = (sb & 0x80) ? fz_i64_interesting(in) : (int64_t)(sb & 7);
	}
	int explicit_strides = flags & 1;
	for (int k = 0; k < nd; k++)
		ts->strides[k] = explicit_strides ? fz_i64_interesting(in) : 0;
	t->shape = (flags & 2) && nd ? NULL : ts->shape; /* rare NULL shape */
	if (nd == 0 && (flags & 4))
		t->shape = ts->shape; /* a shape array with ndim 0 is legal and ignored */
	t->strides = explicit_strides ? ts->strides : NULL;
	t->byte_offset = (flags & 8) ? (uint64_t)fz_i64_interesting(in) : (uint64_t)(flags >> 4 & 3) * 4;

	/* the byte range reached, relative to data + byte_offset */
	const uint64_t eb = ((uint64_t)t->dtype.bits * t->dtype.lanes + 7) / 8;
	int reachable = t->shape != NULL || nd == 0;
	int empty = 0;
	for (int k = 0; k < nd && reachable; k++) {
		if (ts->shape[k] < 0)
			reachable = 0;
		else if (ts->shape[k] == 0)
			empty = 1;
	}
	__int128 lo = 0, hi = 0; /* element-0 relative byte offsets of the lowest and highest element */
	if (reachable && !empty) {
		__int128 stride = 1; /* compact row-major when strides is NULL */
		for (int k = nd - 1; k >= 0; k--) {
			__int128 s = explicit_strides ? (__int128)ts->strides[k] : stride;
			__int128 reach = 0;
			if (s != 0 && ts->shape[k] > 1) {
				__int128 mag = s < 0 ? -s : s;
				if (mag > ((__int128)1 << 62) || ts->shape[k] > ((int64_t)1 << 40)) {
					reachable = 0; /* far beyond the cap: data stays NULL */
					break;
				}
				reach = s * (__int128)(ts->shape[k] - 1) * (__int128)eb;
			}
			if (ts->shape[k] > 1) {
				if (reach < 0)
					lo += reach;
				else
					hi += reach;
			}
			stride *= ts->shape[k];
			if (stride > ((__int128)1 << 62) || hi > ((__int128)1 << 62) || lo < -((__int128)1 << 62)) {
				reachable = 0;
				break;
			}
		}
	}
	/* A zero-stride (broadcast) tensor reaches few bytes but may describe a huge payload, which
	 * the engine would legitimately copy: keep the logical size small too, or pass NULL data. */
	__int128 logical = reachable ? (__int128)eb : 0;
	for (int k = 0; k < nd && reachable && logical <= FZ_LOGICAL_CAP; k++)
		logical *= ts->shape[k];
	if (!reachable || logical > FZ_LOGICAL_CAP || (flags & 0x40) || t->byte_offset > FZ_BUF_CAP) {
		t->data = NULL;
		return;
	}
	__int128 size = empty ? 0 : (hi - lo + (__int128)eb);
	__int128 total = (__int128)t->byte_offset - lo + size;
	if (total > FZ_BUF_CAP || eb == 0) {
		t->data = NULL;
		return;
	}
	size_t n = (size_t)total;
	ts->buf = malloc(n ? n : 1);
	for (size_t i = 0; i < n; i++)
		((uint8_t *)ts->buf)[i] = in->n ? fz_u8(in) : (uint8_t)i;
	/* element 0 sits at data + byte_offset; the lowest reached byte must be the buffer's first */
	t->data = (uint8_t *)ts->buf + (size_t)(-lo);
	if (empty && (flags & 0x20)) {
		free(ts->buf);
		ts->buf = NULL;
		t->data = NULL; /* empty tensors may have NULL data */
	}
}

/* ---- the process of fuzz_read and fuzz_write --------------------------------------------------- */

/* One instance kept across inputs (ovstage_initialize holds the runtime across resets), our view of
 * the floor last advanced to, the iteration count; every FZ_RESET_EVERY inputs the instance is
 * destroyed (which must succeed: nothing left held) and made anew, and once more at exit, where
 * LeakSanitizer must then find nothing. The hooks: after_destroy checks what the destroyed
 * instance released (fuzz_write: its managed tensors' deleters), seed fills a new one (fuzz_read). */
#define FZ_RESET_EVERY 512

typedef struct {
	fz_fixture f;
	uint64_t floor_ord;
	uint64_t iterations;
	void (*after_destroy)(void);
	void (*seed)(void);
} fz_proc;

static inline void fz_proc_new(fz_proc *p)
{
	fz_setup(&p->f);
	p->floor_ord = 0;
	if (p->seed)
		p->seed();
}

static inline void fz_proc_destroy(fz_proc *p)
{
	fz_teardown(&p->f);
	if (p->after_destroy)
		p->after_destroy();
}

/* LLVMFuzzerInitialize: the runtime, the first instance, and at_exit (which calls fz_proc_exit). */
static inline void fz_proc_init(fz_proc *p, void (*at_exit)(void))
{
	FZ_CHECK(ovstage_initialize(NULL) == OVSTAGE_OK, "initialize"); /* keeps the runtime across resets */
	fz_proc_new(p);
	atexit(at_exit);
}

/* At the start of each input: the periodic full reset. */
static inline void fz_proc_next_input(fz_proc *p)
{
	if (++p->iterations % FZ_RESET_EVERY == 0) {
		fz_proc_destroy(p);
		fz_proc_new(p);
	}
}

static inline void fz_proc_exit(fz_proc *p)
{
	fz_proc_destroy(p);
	ovstage_shutdown();
	/* everything is released and the instance destroyed: nothing may remain allocated */
	FZ_CHECK(__lsan_do_recoverable_leak_check() == 0, "leak at exit");
	fprintf(stderr, "fuzz: clean exit after %" PRIu64 " iterations\n", p->iterations);
}

/* A floor advance decoded from b and the ordinal the target picked (b & 0x80: its own, else the
 * floor + (b & 7)): scope ALL, INCLUDE or EXCLUDE (b >> 3 & 3, invalid scopes too) of one or two
 * attributes (tok[b >> 5 & 3], and `second`); accepted ones are waited, and raise our floor. */
static inline void fz_advance_floor(fz_proc *p, uint8_t b, uint64_t picked, ovx_token_t second)
{
	ovstage_write_floor_desc_t d;
	memset(&d, 0, sizeof d);
	d.ordinal = (b & 0x80) ? picked : p->floor_ord + (b & 7);
	d.scope = (ovstage_scope_t)((b >> 3) & 3);
	ovx_token_t toks[2] = { p->f.tok[(b >> 5) & 3], second };
	if (d.scope != OVSTAGE_SCOPE_ALL) {
		d.attributes = toks;
		d.attribute_count = (b >> 2) & 1 ? 2 : 1;
	}
	ovstage_enqueue_result_t r = ovstage_advance_write_floor(p->f.st, &d);
	fz_check_enqueue(r, "advance_write_floor");
	if (r.status == OVSTAGE_OK) {
		fz_wait_release(p->f.st, r.op_index);
		if (d.scope == OVSTAGE_SCOPE_ALL && d.ordinal > p->floor_ord)
			p->floor_ord = d.ordinal;
	}
}

#endif /* OVSTAGE_FUZZ_COMMON_H */
