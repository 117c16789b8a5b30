/*
 * layout.c — validation and normalisation of write payloads (see layout.h for the contract).
 *
 * Structure: ovs_layout_from_write checks the write-level rules (ownership, counts, sparsity),
 * then every tensor descriptor on its own (check_tensor: ndim, shape, dtype, device, sizes,
 * strides, data), then the rules of the transport (fixed / per-row array / packed array), and
 * last the index_map against the transported row count. Row copies go through one strided-view
 * gather (view_copy) that serves all three transports: fixed row r and packed row r are linear
 * element ranges of the single source tensor, a per-row array row is the whole of its tensor.
 */
#include "layout.h"

#include "gpu.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>
#include <stdatomic.h>

#include "store.h"

/* ---- Messages -------------------------------------------------------------------------------- */

static ovstage_api_status_t fail(char *err, size_t err_size, ovstage_api_status_t st, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static ovstage_api_status_t fail(char *err, size_t err_size, ovstage_api_status_t st, const char *fmt, ...)
{
	if (err != NULL && err_size > 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, err_size, fmt, ap);
		va_end(ap);
	}
	return st;
}

static const char *const dtype_names[] = {
	"int",         "uint",        "float",         "opaque",          "bfloat",
	"complex",     "bool",        "float8_e3m4",   "float8_e4m3",     "float8_e4m3b11fnuz",
	"float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
	"float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn",
};

const char *ovs_dtype_format(DLDataType t, char *buf, size_t n)
{
	if (buf == NULL || n == 0)
		return buf;
	unsigned code = t.code, bits = t.bits, lanes = t.lanes;
	if (code < 7)
		snprintf(buf, n, "%s%ux%u", dtype_names[code], bits, lanes);
	else if (code < sizeof dtype_names / sizeof dtype_names[0])
		snprintf(buf, n, "%s(%u bits)x%u", dtype_names[code], bits, lanes);
	else
		snprintf(buf, n, "code%u_%ux%u", code, bits, lanes);
	return buf;
}

static const char *const semantic_names[] = {
	"NONE",   "ASSET_PATH_ID", "TOKEN_ID",   "PATH_EXPRESSION_STRING", "RELATIONSHIP_PATH_ID", "POINT",
	"VECTOR", "NORMAL",        "COLOR",      "QUATERNION",             "MATRIX",               "TEXTURE_COORDINATE",
	"CONNECTION_PATH_ID", "STRING", "TIME_CODE", "FRAME",
};

const char *ovs_semantic_name(ovstage_attribute_semantic_t s)
{
	unsigned v = (unsigned)s;
	return v < sizeof semantic_names / sizeof semantic_names[0] ? semantic_names[v] : "UNKNOWN";
}

static const char *device_name(DLDeviceType t)
{
	switch ((int)t) {
	case 1: return "CPU";
	case 2: return "CUDA";
	case 3: return "CUDAHost";
	case 4: return "OpenCL";
	case 7: return "Vulkan";
	case 8: return "Metal";
	case 9: return "VPI";
	case 10: return "ROCM";
	case 11: return "ROCMHost";
	case 12: return "ExtDev";
	case 13: return "CUDAManaged";
	case 14: return "OneAPI";
	case 15: return "WebGPU";
	case 16: return "Hexagon";
	case 17: return "MAIA";
	case 18: return "Trn";
	default: return "unknown";
	}
}

/* ---- Dtypes ---------------------------------------------------------------------------------- */

size_t ovs_dtype_bytes(DLDataType t)
{
	return ((size_t)t.bits * (size_t)t.lanes) / 8u;
}

bool ovs_dtype_equal(DLDataType a, DLDataType b)
{
	return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

bool ovs_dtype_supported(DLDataType t)
{
	switch (t.code) {
	case 0: /* kDLInt */
	case 1: /* kDLUInt */
		return t.bits == 8 || t.bits == 16 || t.bits == 32 || t.bits == 64;
	case 2: /* kDLFloat */
		return t.bits == 16 || t.bits == 32 || t.bits == 64;
	case 4: /* kDLBfloat */
		return t.bits == 16;
	case 5: /* kDLComplex */
		return t.bits == 64 || t.bits == 128;
	case 6: /* kDLBool: one byte per element */
		return t.bits == 8;
	case 7: case 8: case 9: case 10: case 11: case 12: case 13: case 14: /* kDLFloat8_* */
		return t.bits == 8;
	default: /* kDLOpaqueHandle, sub-byte FP6/FP4, unknown codes */
		return false;
	}
}

/* ---- Strided views --------------------------------------------------------------------------- */

/* Builds the normalised view of an already validated tensor part: ndim dims of shape (with
 * element strides, or compact row-major when strides is NULL), elements of eb bytes at base. */
static void view_build(ovs_layout_view *v, const uint8_t *base, size_t eb, int32_t ndim, const int64_t *shape,
		       const int64_t *strides)
{
	/* The scalars only: shape and stride are read below ndim alone (view_offset, view_copy), and
	 * zeroing their 2 x 32 entries twice per column was 4-6 % of a small commit (perf, session 12). */
	v->base = base;
	v->elem_bytes = eb;
	v->ndim = 0;
	v->dense = false;
	uint64_t elems = 1;
	for (int32_t k = 0; k < ndim; k++)
		elems *= (uint64_t)shape[k];
	v->elems = elems;
	if (elems <= 1) {
		v->dense = true;
		return;
	}
	/* compact element stride of dim k = product of the extents inside it */
	int64_t compact = 1;
	int64_t cstride[OVS_LAYOUT_MAX_NDIM];
	for (int32_t k = ndim - 1; k >= 0; k--) {
		cstride[k] = compact;
		compact *= shape[k];
	}
	int32_t n = 0;
	for (int32_t k = 0; k < ndim; k++) {
		if (shape[k] == 1)
			continue; /* a size-1 dim's stride never moves */
		int64_t bstride;
		/* Validated spans fit int64; only a view reaching no element (the row view of an empty
		 * tensor, whose strides were not checked) can overflow here: saturate, it is never walked. */
		if (__builtin_mul_overflow(strides != NULL ? strides[k] : cstride[k], (int64_t)eb, &bstride))
			bstride = INT64_MAX;
		int64_t whole;
		if (n > 0 && !__builtin_mul_overflow(shape[k], bstride, &whole) && v->stride[n - 1] == whole) {
			/* the outer dim steps exactly over the whole inner one: one longer dim */
			v->shape[n - 1] *= shape[k];
			v->stride[n - 1] = bstride;
		} else {
			v->shape[n] = shape[k];
			v->stride[n] = bstride;
			n++;
		}
	}
	v->ndim = n;
	v->dense = n == 1 && v->stride[0] == (int64_t)eb;
}

static int64_t view_offset(const ovs_layout_view *v, const int64_t *idx)
{
	int64_t off = 0;
	for (int32_t k = 0; k < v->ndim; k++)
		off += idx[k] * v->stride[k];
	return off;
}

/* Copies linear elements [start, start + n) of v (row-major over the original shape) to dst. */
static void view_copy(const ovs_layout_view *v, uint64_t start, uint64_t n, uint8_t *dst)
{
	if (n == 0)
		return;
	const size_t eb = v->elem_bytes;
	if (v->dense) {
		memcpy(dst, v->base + start * eb, (size_t)n * eb);
		return;
	}
	int64_t idx[OVS_LAYOUT_MAX_NDIM];
	uint64_t rem = start;
	for (int32_t k = v->ndim - 1; k >= 0; k--) {
		idx[k] = (int64_t)(rem % (uint64_t)v->shape[k]);
		rem /= (uint64_t)v->shape[k];
	}
	const int32_t last = v->ndim - 1;
	const bool inner_contig = v->stride[last] == (int64_t)eb;
	int64_t off = view_offset(v, idx);
	while (n > 0) {
		uint64_t run = 1;
		if (inner_contig) {
			run = (uint64_t)(v->shape[last] - idx[last]);
			if (run > n)
				run = n;
		}
		memcpy(dst, v->base + off, (size_t)run * eb);
		dst += run * eb;
		n -= run;
		idx[last] += (int64_t)run;
		if (idx[last] < v->shape[last]) {
			off += (int64_t)run * v->stride[last];
			continue;
		}
		/* carry into the outer dims, then recompute the offset (stays inside the checked span) */
		for (int32_t k = last; k > 0 && idx[k] == v->shape[k]; k--) {
			idx[k] = 0;
			idx[k - 1]++;
		}
		if (n > 0)
			off = view_offset(v, idx);
	}
}

/* ---- Tensor checks --------------------------------------------------------------------------- */

typedef struct {
	uint64_t elems; /* product of the shape */
	uint64_t bytes; /* elems * element bytes */
} tensor_info;

static bool device_known(DLDeviceType t)
{
	return t == kDLCPU || t == kDLCUDA || t == kDLCUDAHost || (int)t == 13 /* kDLCUDAManaged */;
}

/* Checks one descriptor on its own; tn names it in messages ("tensors[2]"). */
static ovstage_api_status_t check_tensor(const DLTensor *t, const char *tn, tensor_info *info, char *err,
					 size_t err_size)
{
	char dts[OVS_DTYPE_STR_MAX];
	if (t->ndim < 0)
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT, "%s.ndim = %d is negative", tn, (int)t->ndim);
	if (t->ndim > OVS_LAYOUT_MAX_NDIM)
		return fail(err, err_size, OVSTAGE_ERROR_NOT_SUPPORTED, "%s.ndim = %d exceeds the supported %d dimensions",
			    tn, (int)t->ndim, OVS_LAYOUT_MAX_NDIM);
	if (t->ndim > 0 && t->shape == NULL)
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT, "%s.shape is NULL with ndim = %d", tn,
			    (int)t->ndim);

	const DLDataType dt = t->dtype;
	if (dt.bits == 0 || dt.lanes == 0)
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
			    "%s.dtype = {code %u, bits %u, lanes %u}: bits and lanes must be non-zero", tn,
			    (unsigned)dt.code, (unsigned)dt.bits, (unsigned)dt.lanes);
	if (!ovs_dtype_supported(dt))
		return fail(err, err_size, OVSTAGE_ERROR_NOT_SUPPORTED,
			    "%s.dtype = %s (code %u, bits %u) is not a storable dtype (int/uint 8-64, float 16-64, "
			    "bfloat16, complex 64/128, bool 8, float8)",
			    tn, ovs_dtype_format(dt, dts, sizeof dts), (unsigned)dt.code, (unsigned)dt.bits);
	if (dt.lanes > OVS_LAYOUT_MAX_LANES)
		return fail(err, err_size, OVSTAGE_ERROR_NOT_SUPPORTED, "%s.dtype.lanes = %u exceeds the cap of %u lanes",
			    tn, (unsigned)dt.lanes, OVS_LAYOUT_MAX_LANES);

	if (!device_known(t->device.device_type))
		return fail(err, err_size, OVSTAGE_ERROR_NOT_SUPPORTED,
			    "%s.device = %s (device_type %d) is not supported (CPU, CUDA, CUDAHost, CUDAManaged)", tn,
			    device_name(t->device.device_type), (int)t->device.device_type);
	if (t->device.device_id < 0)
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT, "%s.device.device_id = %d is negative", tn,
			    (int)t->device.device_id);

	const uint64_t eb = ovs_dtype_bytes(dt);
	uint64_t elems = 1;
	bool overflow = false;
	int32_t overflow_dim = -1;
	for (int32_t k = 0; k < t->ndim; k++) {
		if (t->shape[k] < 0)
			return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT, "%s.shape[%d] = %" PRId64 " is negative",
				    tn, (int)k, t->shape[k]);
		uint64_t p;
		if (!overflow && (__builtin_mul_overflow(elems, (uint64_t)t->shape[k], &p) || p > (uint64_t)INT64_MAX)) {
			overflow = true;
			overflow_dim = k;
		} else if (!overflow) {
			elems = p;
		}
	}
	/* A zero extent anywhere makes the tensor empty, whatever the other extents are. */
	bool empty = false;
	for (int32_t k = 0; k < t->ndim; k++)
		empty = empty || t->shape[k] == 0;
	if (empty) {
		elems = 0;
	} else if (overflow) {
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
			    "%s.shape[%d] = %" PRId64 ": the element count overflows int64", tn, (int)overflow_dim,
			    t->shape[overflow_dim]);
	}
	uint64_t bytes;
	if (__builtin_mul_overflow(elems, eb, &bytes) || bytes > (uint64_t)INT64_MAX || bytes > (uint64_t)SIZE_MAX)
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
			    "%s: %" PRIu64 " elements of %" PRIu64 " bytes overflow the int64/size_t byte size", tn, elems,
			    eb);
	if (t->byte_offset > (uint64_t)INT64_MAX)
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT, "%s.byte_offset = %" PRIu64 " overflows int64",
			    tn, (uint64_t)t->byte_offset);

	/* The byte span the strides reach must be representable (view offsets are int64). */
	if (t->strides != NULL && elems > 1) {
		uint64_t span = 0;
		for (int32_t k = 0; k < t->ndim; k++) {
			if (t->shape[k] <= 1)
				continue;
			int64_t s = t->strides[k];
			uint64_t mag = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
			uint64_t reach;
			if (__builtin_mul_overflow(mag, (uint64_t)(t->shape[k] - 1), &reach) ||
			    __builtin_mul_overflow(reach, eb, &reach) || __builtin_add_overflow(span, reach, &span) ||
			    span > (uint64_t)INT64_MAX)
				return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
					    "%s.strides[%d] = %" PRId64 ": the byte span of the tensor overflows int64", tn,
					    (int)k, s);
		}
	}

	if (t->data == NULL && bytes > 0)
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT, "%s.data is NULL with %" PRIu64 " bytes of payload",
			    tn, bytes);
	info->elems = elems;
	info->bytes = bytes;
	return OVSTAGE_OK;
}

/* "tensors[i]" or "managed_tensors[i]->dl_tensor" into buf (>= 48 bytes). Built by hand: it runs for
 * every tensor of every write, and only an error message ever reads it (snprintf was a tenth of a
 * small commit's cost). */
static void tensor_label(char *buf, size_t n, bool managed, uint32_t i)
{
	(void)n;
	const char *head = managed ? "managed_tensors[" : "tensors[";
	size_t o = strlen(head);
	memcpy(buf, head, o);
	char digits[10];
	int nd = 0;
	do {
		digits[nd++] = (char)('0' + i % 10);
		i /= 10;
	} while (i);
	while (nd)
		buf[o++] = digits[--nd];
	const char *tail = managed ? "]->dl_tensor" : "]";
	size_t tl = strlen(tail);
	memcpy(buf + o, tail, tl + 1);
}

ovstage_api_status_t ovs_layout_check_host(const ovstage_write_data_t *wd, char *err, size_t err_size)
{
	const bool managed = wd->managed_tensors != NULL;
	for (uint32_t i = 0; (managed || wd->tensors) && i < wd->tensor_count; i++) {
		const DLTensor *t = managed ? (wd->managed_tensors[i] ? &wd->managed_tensors[i]->dl_tensor : NULL)
					    : &wd->tensors[i];
		if (!t || t->device.device_id < 0)
			continue;
		if (t->device.device_type != kDLCUDA && (int)t->device.device_type != 13 /* kDLCUDAManaged */)
			continue;
		char tn[64];
		tensor_label(tn, sizeof tn, managed, i);
		if (!ovs_gpu_available())
			return fail(err, err_size, OVSTAGE_ERROR_NOT_SUPPORTED, "%s.device = %s:%d: CUDA tensors cannot be used: %s",
				    tn, device_name(t->device.device_type), (int)t->device.device_id, ovs_gpu_reason());
		if (t->device.device_id >= ovs_gpu_device_count())
			return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
				    "%s.device = %s:%d: CUDA device ordinal %d is out of range (%d visible)", tn,
				    device_name(t->device.device_type), (int)t->device.device_id, (int)t->device.device_id,
				    ovs_gpu_device_count());
	}
	return OVSTAGE_OK;
}

bool ovs_column_install_schema(struct ovs_column *c, bool is_array, DLDataType dtype,
			       ovstage_attribute_semantic_t semantic, size_t row_bytes, DLDevice device)
{
	/* acquire: pairs with the release below; a present schema's fields are then stable. */
	if (atomic_load_explicit(&c->has_schema, memory_order_acquire))
		return false;
	bool installed = false;
	pthread_mutex_lock(&c->schema_lock);
	if (!atomic_load_explicit(&c->has_schema, memory_order_relaxed)) {
		c->schema.is_array = is_array;
		c->schema.dtype = dtype;
		c->schema.semantic = semantic;
		c->schema.device = device; /* where its storage lives from now on */
		c->row_bytes = row_bytes;
		/* release: whoever sees has_schema sees the fields above. */
		atomic_store_explicit(&c->has_schema, true, memory_order_release);
		installed = true;
	}
	pthread_mutex_unlock(&c->schema_lock);
	return installed;
}

const DLTensor *ovs_layout_tensor(const ovs_layout *l, uint32_t i)
{
	if (l->managed_tensors != NULL)
		return &l->managed_tensors[i]->dl_tensor;
	return &l->tensors[i];
}

/* ---- Transports ------------------------------------------------------------------------------ */

/* data + byte_offset; NULL for an empty tensor with NULL data (NULL + offset is undefined). */
static const uint8_t *tensor_base(const DLTensor *t)
{
	return t->data != NULL ? (const uint8_t *)t->data + t->byte_offset : NULL;
}

static ovstage_api_status_t check_index_map(const ovs_layout *l, const char *what, char *err, size_t err_size)
{
	for (uint32_t i = 0; i < l->count; i++)
		if ((uint64_t)l->index_map[i] >= l->row_count)
			return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
				    "index_map[%" PRIu32 "] = %" PRIu32 " >= row count %" PRIu64 " (%s)", i,
				    l->index_map[i], l->row_count, what);
	return OVSTAGE_OK;
}

static ovstage_api_status_t layout_fixed(ovs_layout *l, const DLTensor *t, const char *tn, char *err,
					 size_t err_size)
{
	char dts[OVS_DTYPE_STR_MAX];
	if (t->ndim == 0)
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
			    "%s.ndim = 0: a fixed-size write needs a leading row dimension (shape = [N])", tn);
	/* Fold the trailing dims into lanes: lanes = dtype.lanes * product(shape[1..]). */
	uint64_t lanes = t->dtype.lanes;
	for (int32_t k = 1; k < t->ndim; k++) {
		if (t->shape[k] == 0)
			return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
				    "%s.shape[%d] = 0 does not fold into lanes: a fixed-size row needs at least one lane", tn,
				    (int)k);
		uint64_t before = lanes;
		lanes *= (uint64_t)t->shape[k]; /* shape[k] <= INT64_MAX and lanes <= 255 here: no overflow */
		if (lanes > OVS_LAYOUT_MAX_LANES)
			return fail(err, err_size, OVSTAGE_ERROR_NOT_SUPPORTED,
				    "%s.shape[%d] = %" PRId64 " does not fold into lanes: %" PRIu64 " x %" PRId64
				    " exceeds the cap of %u lanes per fixed-size row (dtype %s)",
				    tn, (int)k, t->shape[k], before, t->shape[k], OVS_LAYOUT_MAX_LANES,
				    ovs_dtype_format(t->dtype, dts, sizeof dts));
	}
	const size_t src_eb = ovs_dtype_bytes(t->dtype);
	l->dtype.code = t->dtype.code;
	l->dtype.bits = t->dtype.bits;
	l->dtype.lanes = (uint16_t)lanes;
	l->elem_bytes = ovs_dtype_bytes(l->dtype);
	l->row_bytes = l->elem_bytes;
	if (l->row_bytes > OVS_LAYOUT_MAX_ROW_BYTES)
		return fail(err, err_size, OVSTAGE_ERROR_NOT_SUPPORTED,
			    "%s: a fixed-size row of %s is %zu bytes, over the cap of %u bytes", tn,
			    ovs_dtype_format(l->dtype, dts, sizeof dts), l->row_bytes, OVS_LAYOUT_MAX_ROW_BYTES);
	l->src_row_elems = lanes / t->dtype.lanes;
	l->row_count = (uint64_t)t->shape[0];

	const uint8_t *base = tensor_base(t);
	view_build(&l->view, base, src_eb, t->ndim, t->shape, t->strides);
	ovs_layout_view row;
	view_build(&row, base, src_eb, t->ndim - 1, t->shape + 1, t->strides != NULL ? t->strides + 1 : NULL);
	l->row_dense = row.dense;
	l->row_base = base;
	l->row_stride = (t->strides != NULL && t->shape[0] > 1) ? t->strides[0] * (int64_t)src_eb
								: (int64_t)l->row_bytes;
	l->contiguous = l->view.dense;

	if (l->index_map == NULL) {
		if (l->row_count != l->count)
			return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
				    "%s.shape[0] = %" PRId64 " != logical element count %" PRIu32
				    ": without index_map the leading dimension is the row count (a flat (N*L,) "
				    "tensor is not N rows of L lanes: use shape (N, L) or lanes = L)",
				    tn, t->shape[0], l->count);
		return OVSTAGE_OK;
	}
	char what[96];
	snprintf(what, sizeof what, "%s.shape[0]", tn);
	return check_index_map(l, what, err, err_size);
}

static ovstage_api_status_t layout_packed(ovs_layout *l, const DLTensor *t, const char *tn, const tensor_info *ti,
					  char *err, size_t err_size)
{
	char dts[OVS_DTYPE_STR_MAX];
	uint64_t rows = l->count;
	if (l->index_map != NULL) {
		uint32_t mx = 0;
		for (uint32_t i = 0; i < l->count; i++)
			mx = l->index_map[i] > mx ? l->index_map[i] : mx;
		rows = (uint64_t)mx + 1;
	}
	l->row_count = rows;
	if (ti->bytes % rows != 0)
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
			    "%s holds %" PRIu64 " bytes (%" PRIu64 " x %s), which do not divide evenly into %" PRIu64
			    " packed rows (%s)",
			    tn, ti->bytes, ti->elems, ovs_dtype_format(t->dtype, dts, sizeof dts), rows,
			    l->index_map != NULL ? "max(index_map) + 1" : "the logical element count");
	const uint64_t row_bytes = ti->bytes / rows;
	if (row_bytes % l->elem_bytes != 0)
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
			    "%s: %" PRIu64 " bytes / %" PRIu64 " packed rows = %" PRIu64
			    " bytes per row, not a whole number of %s elements (%zu bytes)",
			    tn, ti->bytes, rows, row_bytes, ovs_dtype_format(t->dtype, dts, sizeof dts), l->elem_bytes);
	l->row_len = row_bytes / l->elem_bytes;
	l->row_bytes = (size_t)row_bytes;
	l->src_row_elems = l->row_len;
	view_build(&l->view, tensor_base(t), l->elem_bytes, t->ndim, t->shape, t->strides);
	l->contiguous = l->view.dense;
	return OVSTAGE_OK;
}

/* ---- Entry point ----------------------------------------------------------------------------- */

/* The layout of the commonest payload, without the general path's loops: one compact 1-D tensor of a
 * fixed-size write (shape [N], no strides or a unit stride), no index map or mask, N the logical
 * count. True when wd is such a payload and passes every rule the general path checks for it (then
 * *l is exactly what the general path makes of it); false leaves the general path to decide,
 * errors included. A 100-column write spent ~420 instructions a column in the general path. */
static bool layout_fast_fixed(const ovstage_write_data_t *wd, uint32_t query_count, ovs_layout *l)
{
	if (query_count == 0 || wd->is_array || wd->tensor_count != 1 || wd->index_map != NULL || wd->mask != NULL ||
	    (wd->tensors == NULL) == (wd->managed_tensors == NULL) || (unsigned)wd->semantic > (unsigned)OVSTAGE_SEMANTIC_FRAME)
		return false;
	uint32_t count = wd->count != 0 ? wd->count : query_count;
	if (count > query_count)
		return false;
	const DLTensor *t = wd->managed_tensors != NULL ? (wd->managed_tensors[0] ? &wd->managed_tensors[0]->dl_tensor : NULL)
						       : &wd->tensors[0];
	if (t == NULL || t->ndim != 1 || t->shape == NULL || t->shape[0] != (int64_t)count ||
	    (t->strides != NULL && t->strides[0] != 1) || t->data == NULL || t->byte_offset > (uint64_t)INT64_MAX ||
	    t->dtype.bits == 0 || t->dtype.lanes == 0 || t->dtype.lanes > OVS_LAYOUT_MAX_LANES ||
	    !ovs_dtype_supported(t->dtype) || !device_known(t->device.device_type) || t->device.device_id < 0)
		return false;
	size_t eb = ovs_dtype_bytes(t->dtype);
	if (eb > OVS_LAYOUT_MAX_ROW_BYTES) /* count <= 2^32 rows of at most 4096 bytes: no overflow below */
		return false;
	/* What ovs_layout_from_write, layout_fixed and view_build make of it (one row dimension, no
	 * trailing dimensions to fold, one element per row). */
	l->kind = OVS_LAYOUT_FIXED;
	l->is_array = false;
	l->semantic = wd->semantic;
	l->tensors = wd->tensors;
	l->managed_tensors = wd->managed_tensors;
	l->tensor_count = 1;
	l->count = count;
	l->device = t->device;
	l->host_accessible = t->device.device_type == kDLCPU || t->device.device_type == kDLCUDAHost ||
			     (int)t->device.device_type == 13 /* kDLCUDAManaged */;
	l->dtype.code = t->dtype.code;
	l->dtype.bits = t->dtype.bits;
	l->dtype.lanes = t->dtype.lanes;
	l->elem_bytes = eb;
	l->row_bytes = eb;
	l->src_row_elems = 1;
	l->row_count = (uint64_t)count;
	const uint8_t *base = tensor_base(t);
	l->view.base = base;
	l->view.elem_bytes = eb;
	l->view.elems = (uint64_t)count;
	l->view.dense = true;
	if (count > 1) {
		l->view.ndim = 1;
		l->view.shape[0] = (int64_t)count;
		l->view.stride[0] = (int64_t)eb;
	}
	l->row_base = base;
	l->row_stride = (int64_t)eb;
	l->row_dense = true;
	l->contiguous = true;
	return true;
}

ovstage_api_status_t ovs_layout_from_write(const ovstage_write_data_t *wd, uint32_t query_count, ovs_layout *out,
					   char *err, size_t err_size)
{
	if (wd == NULL || out == NULL)
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT, "%s is NULL", wd == NULL ? "wd" : "out");
	/* Zero but the view's shape and stride arrays (2 x 32 entries, read only below its ndim, which
	 * is zeroed: view_build): ~80 instructions of zeroing per column of every write. */
	memset(out, 0, offsetof(ovs_layout, view) + offsetof(ovs_layout_view, shape));
	out->view.dense = false;
	memset(&out->src_row_elems, 0, sizeof *out - offsetof(ovs_layout, src_row_elems));
	if (layout_fast_fixed(wd, query_count, out))
		return OVSTAGE_OK;
	/* not the fast path's payload: the general path decides, on the zeroed layout (the fast path
	 * wrote fields only when it returned true) */
	ovs_layout *l = out;
	l->is_array = wd->is_array;
	l->semantic = wd->semantic;
	l->tensors = wd->tensors;
	l->managed_tensors = wd->managed_tensors;
	l->tensor_count = wd->tensor_count;
	if (query_count == 0) {
		/* Spec 2.10: an empty query skips the payload checks; there is nothing to write. */
		l->kind = OVS_LAYOUT_EMPTY;
		return OVSTAGE_OK;
	}

	/* Write-level rules. */
	if (wd->tensors != NULL && wd->managed_tensors != NULL)
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
			    "both tensors and managed_tensors are set; exactly one must be non-NULL");
	if (wd->tensors == NULL && wd->managed_tensors == NULL)
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
			    "neither tensors nor managed_tensors is set; exactly one must be non-NULL");
	if (wd->tensor_count == 0)
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
			    "tensor_count = 0 for a query of %" PRIu32 " prims; a write needs at least one tensor",
			    query_count);
	if ((unsigned)wd->semantic > (unsigned)OVSTAGE_SEMANTIC_FRAME)
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
			    "semantic = %u is not an ovstage_attribute_semantic_t value", (unsigned)wd->semantic);
	if (wd->index_map != NULL && wd->mask != NULL)
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
			    "index_map and mask are both set; they are mutually exclusive");
	if (wd->count == 0 && (wd->index_map != NULL || wd->mask != NULL))
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
			    "count = 0 with %s set; count (the logical element count) is required with index_map or mask",
			    wd->index_map != NULL ? "index_map" : "mask");
	if (wd->count > query_count)
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
			    "count = %" PRIu32 " exceeds the query's %" PRIu32 " prims", wd->count, query_count);
	l->count = wd->count != 0 ? wd->count : query_count;
	l->index_map = wd->index_map;
	l->mask = wd->mask;
	if (!wd->is_array && wd->tensor_count != 1)
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
			    "tensor_count = %" PRIu32 " for a fixed-size write (is_array = false); it must be 1",
			    wd->tensor_count);
	if (wd->managed_tensors != NULL)
		for (uint32_t i = 0; i < wd->tensor_count; i++)
			if (wd->managed_tensors[i] == NULL)
				return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
					    "managed_tensors[%" PRIu32 "] is NULL", i);

	/* Every descriptor on its own, then dtype and device agreement with tensor 0. */
	const bool managed = wd->managed_tensors != NULL;
	/* tensor 0's label is a constant: a fixed-size write (one tensor) builds no label at all */
	char tn_buf[64];
	const char *t0n = managed ? "managed_tensors[0]->dl_tensor" : "tensors[0]", *tn = t0n;
	const DLTensor *t0 = ovs_layout_tensor(l, 0);
	tensor_info ti0 = {0, 0};
	for (uint32_t i = 0; i < wd->tensor_count; i++) {
		const DLTensor *t = ovs_layout_tensor(l, i);
		if (i) {
			tensor_label(tn_buf, sizeof tn_buf, managed, i);
			tn = tn_buf;
		}
		tensor_info ti = {0, 0};
		ovstage_api_status_t st = check_tensor(t, tn, &ti, err, err_size);
		if (st != OVSTAGE_OK)
			return st;
		if (i == 0) {
			ti0 = ti;
			continue;
		}
		if (!ovs_dtype_equal(t->dtype, t0->dtype)) {
			char a[OVS_DTYPE_STR_MAX], b[OVS_DTYPE_STR_MAX];
			return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
				    "%s.dtype = %s differs from %s.dtype = %s; all tensors of a write share one dtype", tn,
				    ovs_dtype_format(t->dtype, a, sizeof a), t0n, ovs_dtype_format(t0->dtype, b, sizeof b));
		}
		if (t->device.device_type != t0->device.device_type || t->device.device_id != t0->device.device_id)
			return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
				    "%s.device = %s:%d differs from %s.device = %s:%d; all tensors of a write share one device",
				    tn, device_name(t->device.device_type), (int)t->device.device_id, t0n,
				    device_name(t0->device.device_type), (int)t0->device.device_id);
	}
	l->device = t0->device;
	/* managed (unified) memory is host-addressable too: host code reads it after the producer's fence */
	l->host_accessible = t0->device.device_type == kDLCPU || t0->device.device_type == kDLCUDAHost ||
			     (int)t0->device.device_type == 13 /* kDLCUDAManaged */;

	if (!wd->is_array) {
		l->kind = OVS_LAYOUT_FIXED;
		return layout_fixed(l, t0, t0n, err, err_size);
	}
	l->dtype = t0->dtype;
	l->elem_bytes = ovs_dtype_bytes(l->dtype);
	if (wd->tensor_count == 1) {
		l->kind = OVS_LAYOUT_ARRAY_PACKED;
		return layout_packed(l, t0, t0n, &ti0, err, err_size);
	}
	l->kind = OVS_LAYOUT_ARRAY_PER_ROW;
	l->row_count = wd->tensor_count;
	if (l->index_map == NULL) {
		if (l->row_count != l->count)
			return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
				    "tensor_count = %" PRIu32 " != logical element count %" PRIu32
				    ": per-row array transport without index_map carries one tensor per element",
				    wd->tensor_count, l->count);
		return OVSTAGE_OK;
	}
	return check_index_map(l, "tensor_count, per-row array transport", err, err_size);
}

/* ---- Row access ------------------------------------------------------------------------------ */

bool ovs_layout_selected(const ovs_layout *l, uint32_t i)
{
	if (i >= l->count)
		return false;
	if (l->mask == NULL)
		return true;
	return ((l->mask[i / 64u] >> (i % 64u)) & 1u) != 0;
}

uint32_t ovs_layout_source_row(const ovs_layout *l, uint32_t i)
{
	return l->index_map != NULL ? l->index_map[i] : i;
}

const void *ovs_layout_contiguous_base(const ovs_layout *l)
{
	if ((l->kind == OVS_LAYOUT_FIXED || l->kind == OVS_LAYOUT_ARRAY_PACKED) && l->contiguous)
		return l->view.base;
	return NULL;
}

void ovs_layout_copy_row(const ovs_layout *l, uint64_t row, void *dst)
{
	if (l->kind != OVS_LAYOUT_FIXED)
		return;
	view_copy(&l->view, row * l->src_row_elems, l->src_row_elems, (uint8_t *)dst);
}

uint64_t ovs_layout_array_len(const ovs_layout *l, uint32_t row)
{
	if (l->kind == OVS_LAYOUT_ARRAY_PACKED)
		return l->row_len;
	if (l->kind != OVS_LAYOUT_ARRAY_PER_ROW)
		return 0;
	const DLTensor *t = ovs_layout_tensor(l, row);
	uint64_t n = 1;
	for (int32_t k = 0; k < t->ndim; k++)
		n *= (uint64_t)t->shape[k]; /* validated: no overflow, or a zero extent */
	return n;
}

const void *ovs_layout_array_row_base(const ovs_layout *l, uint32_t row)
{
	if (l->kind == OVS_LAYOUT_ARRAY_PACKED)
		return l->contiguous ? l->view.base + (size_t)row * l->row_bytes : NULL;
	if (l->kind != OVS_LAYOUT_ARRAY_PER_ROW)
		return NULL;
	const DLTensor *t = ovs_layout_tensor(l, row);
	ovs_layout_view v;
	view_build(&v, tensor_base(t), l->elem_bytes, t->ndim, t->shape, t->strides);
	return v.dense ? v.base : NULL;
}

void ovs_layout_copy_array_row(const ovs_layout *l, uint32_t row, void *dst)
{
	if (l->kind == OVS_LAYOUT_ARRAY_PACKED) {
		view_copy(&l->view, (uint64_t)row * l->row_len, l->row_len, (uint8_t *)dst);
		return;
	}
	if (l->kind != OVS_LAYOUT_ARRAY_PER_ROW)
		return;
	const DLTensor *t = ovs_layout_tensor(l, row);
	ovs_layout_view v;
	view_build(&v, tensor_base(t), l->elem_bytes, t->ndim, t->shape, t->strides);
	view_copy(&v, 0, v.elems, (uint8_t *)dst);
}

/* ---- Schema ---------------------------------------------------------------------------------- */

static void kind_format(bool is_array, DLDataType t, char *buf, size_t n)
{
	char d[OVS_DTYPE_STR_MAX];
	snprintf(buf, n, "%s%s", ovs_dtype_format(t, d, sizeof d), is_array ? "[]" : "");
}

ovstage_api_status_t ovs_layout_check_reserved(bool is_array, DLDataType dtype, ovstage_attribute_semantic_t semantic,
					       const char *name, char *err, size_t err_size)
{
	const char *nm = name != NULL ? name : "";
	if ((unsigned)semantic > (unsigned)OVSTAGE_SEMANTIC_FRAME)
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
			    "attribute \"%s\": semantic = %u is not an ovstage_attribute_semantic_t value", nm,
			    (unsigned)semantic);
	unsigned bits = 0, lanes = 0;
	int need_array = -1; /* -1 either kind, 1 arrays only */
	switch (semantic) {
	case OVSTAGE_SEMANTIC_TOKEN_ID: bits = 64, lanes = 1; break;
	case OVSTAGE_SEMANTIC_PATH_EXPRESSION_STRING: bits = 64, lanes = 1; break;
	case OVSTAGE_SEMANTIC_ASSET_PATH_ID: bits = 64, lanes = 2; break;
	case OVSTAGE_SEMANTIC_RELATIONSHIP_PATH_ID: bits = 64, lanes = 1, need_array = 1; break;
	case OVSTAGE_SEMANTIC_CONNECTION_PATH_ID: bits = 64, lanes = 2, need_array = 1; break;
	case OVSTAGE_SEMANTIC_STRING: bits = 8, lanes = 1, need_array = 1; break;
	default: return OVSTAGE_OK;
	}
	const DLDataType want = {.code = (uint8_t)kDLUInt, .bits = (uint8_t)bits, .lanes = (uint16_t)lanes};
	if (!ovs_dtype_equal(dtype, want) || (need_array == 1 && !is_array)) {
		char have[OVS_DTYPE_STR_MAX + 2], need[OVS_DTYPE_STR_MAX + 2];
		kind_format(is_array, dtype, have, sizeof have);
		kind_format(need_array == 1, want, need, sizeof need);
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
			    "attribute \"%s\": semantic %s requires layout %s%s; write is %s", nm,
			    ovs_semantic_name(semantic), need, need_array == 1 ? "" : " (scalar or array)", have);
	}
	return OVSTAGE_OK;
}

ovstage_api_status_t ovs_layout_check_schema_of(bool is_array, DLDataType dtype, ovstage_attribute_semantic_t semantic,
						bool col_is_array, DLDataType col_dtype,
						ovstage_attribute_semantic_t col_semantic, const char *name, char *err,
						size_t err_size)
{
	ovstage_api_status_t st = ovs_layout_check_reserved(is_array, dtype, semantic, name, err, err_size);
	if (st != OVSTAGE_OK)
		return st;
	const char *nm = name != NULL ? name : "";
	if (is_array != col_is_array || !ovs_dtype_equal(dtype, col_dtype)) {
		char have[OVS_DTYPE_STR_MAX + 2], col[OVS_DTYPE_STR_MAX + 2];
		kind_format(is_array, dtype, have, sizeof have);
		kind_format(col_is_array, col_dtype, col, sizeof col);
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
			    "column \"%s\" is %s; write is %s (a schema change: delete the attribute first)", nm, col, have);
	}
	if (semantic != col_semantic)
		return fail(err, err_size, OVSTAGE_ERROR_INVALID_ARGUMENT,
			    "column \"%s\" has semantic %s; write has semantic %s (a column's role is immutable)", nm,
			    ovs_semantic_name(col_semantic), ovs_semantic_name(semantic));
	return OVSTAGE_OK;
}

ovstage_api_status_t ovs_layout_check_schema(const ovs_layout *l, ovstage_attribute_semantic_t semantic,
					     bool col_is_array, DLDataType col_dtype,
					     ovstage_attribute_semantic_t col_semantic, const char *name, char *err,
					     size_t err_size)
{
	return ovs_layout_check_schema_of(l->is_array, l->dtype, semantic, col_is_array, col_dtype, col_semantic, name,
					  err, err_size);
}
