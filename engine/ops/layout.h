/*
 * layout.h — validation and normalisation of a write payload (ovstage_write_data_t) into one
 * storage-independent description, ovs_layout, plus the row access a writer needs, the schema
 * checks of a payload against an existing column, and the 1-D tensor descriptor read and map groups
 * hand out (ovs_tensor_1d). Implements seed 000 and spec section 5.
 *
 * Contract:
 *  - Every function here is pure: no global state, no locks, no allocation, no I/O. All of them
 *    are thread-safe for concurrent calls; an ovs_layout is immutable after ovs_layout_from_write
 *    returns and may be shared read-only between threads.
 *  - An ovs_layout borrows everything it points to (the write's tensors array or managed_tensors
 *    array and the tensors they describe, index_map, mask, tensor data). The caller keeps them
 *    alive and unchanged while the layout is used. Nothing needs releasing: there is no fini.
 *  - ovs_layout_from_write never touches tensor data, only the DLTensor descriptors, the
 *    index_map (every entry is read once) and nothing of the mask. It may therefore run on
 *    descriptors of device (CUDA) memory.
 *  - The row copy functions dereference tensor data: call them only when layout.host_accessible
 *    is true (CPU or CUDA pinned host memory). Device payloads are described faithfully (base,
 *    strides, shape) for a device backend to gather on its own.
 *  - Errors: every rejection returns its status and, when err != NULL and err_size > 0, writes a
 *    NUL-terminated message naming the field and its value ("index_map[3] = 9 >= row count 4"),
 *    truncated to err_size. On success err is left untouched.
 *
 * Decisions where seed 000 and the spec are silent (see ovs_layout_from_write for the full list):
 *  - query_count == 0 skips every payload check (spec 2.10: "Empty query ... payload checks
 *    skipped"): the result is an OVS_LAYOUT_EMPTY layout with count 0.
 *  - Strides: honoured in elements of the tensor's dtype (per DLPack); negative, zero and
 *    overlapping strides are accepted, because a write only reads its source.
 *  - Fixed rows are capped at OVS_LAYOUT_MAX_LANES lanes and OVS_LAYOUT_MAX_ROW_BYTES bytes
 *    (NOT_SUPPORTED beyond); tensors have at most OVS_LAYOUT_MAX_NDIM dimensions (NOT_SUPPORTED).
 */
#ifndef OVSTAGE_ENGINE_LAYOUT_H
#define OVSTAGE_ENGINE_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ovstage/ovstage_api/ovstage_api_types.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Most lanes of a dtype (the tuple width of a fixed row after folding; spec 5: "caps lanes at 255"). */
#define OVS_LAYOUT_MAX_LANES 255u
/** Most bytes of one fixed-size row; wider rows are OVSTAGE_ERROR_NOT_SUPPORTED. With 255 lanes of
 *  at most 16 bytes (complex128) a row is at most 4080 bytes, so the lane cap binds first today;
 *  the byte cap keeps the bound explicit should wider element types be admitted. */
#define OVS_LAYOUT_MAX_ROW_BYTES 4096u
/** Most dimensions of one DLTensor (the row copies keep an index per dimension on the stack). */
#define OVS_LAYOUT_MAX_NDIM 32
/** Buffer size that always holds ovs_dtype_format's text (with a "[]" suffix appended). */
#define OVS_DTYPE_STR_MAX 48

/** How the payload's rows are transported. */
typedef enum {
	OVS_LAYOUT_EMPTY = 0,         /**< query_count was 0: nothing to write, nothing validated */
	OVS_LAYOUT_FIXED = 1,         /**< is_array=false: one tensor, shape[0] rows of one tuple each */
	OVS_LAYOUT_ARRAY_PER_ROW = 2, /**< is_array=true, tensor_count > 1: tensor r is source row r */
	OVS_LAYOUT_ARRAY_PACKED = 3,  /**< is_array=true, tensor_count == 1: uniform rows cut from one tensor */
} ovs_layout_kind;

/**
 * A strided view of one tensor's elements in row-major order, normalised: dimensions of size 1
 * are dropped (their strides are meaningless) and adjacent dimensions that are dense relative to
 * each other are merged. Linear element k of the tensor (row-major over its original shape) is
 * the k-th element of this view. Strides may be negative or zero (see the header contract).
 */
typedef struct {
	const uint8_t *base;                 /**< address of element [0,...,0]: data + byte_offset */
	size_t elem_bytes;                   /**< bytes of one source element: bits * lanes / 8 of the tensor's own dtype */
	uint64_t elems;                      /**< total element count (product of the original shape) */
	int32_t ndim;                        /**< dimensions left after dropping size-1 and merging dense ones; 0 = at most one element */
	int64_t shape[OVS_LAYOUT_MAX_NDIM];  /**< extent of each remaining dimension (each >= 2) */
	int64_t stride[OVS_LAYOUT_MAX_NDIM]; /**< byte step of each remaining dimension (signed) */
	bool dense;                          /**< all elements adjacent, ascending, in row-major order (one memcpy) */
} ovs_layout_view;

/** The normalised description of one write payload (see ovs_layout_from_write). */
typedef struct {
	ovs_layout_kind kind;   /**< transport; OVS_LAYOUT_EMPTY only when query_count was 0 */
	bool is_array;          /**< wd->is_array: the attribute kind (never inferred) */
	ovstage_attribute_semantic_t semantic; /**< wd->semantic, as given (checked by ovs_layout_check_*) */

	/** Canonical dtype. Fixed: {code, bits, full tuple width} with trailing dims folded into lanes.
	 *  Arrays: the element dtype exactly as given (lanes kept, trailing dims never folded). */
	DLDataType dtype;
	size_t elem_bytes;      /**< bytes of one canonical element: bits * lanes / 8 (fixed: == row_bytes) */

	uint32_t count;         /**< logical element count N: wd->count, or query_count when wd->count == 0 */
	uint64_t row_count;     /**< transported source rows: shape[0] (fixed), tensor_count (per-row),
	                             max(index_map) + 1 or N (packed) */
	size_t row_bytes;       /**< fixed: bytes of one canonical row (== elem_bytes); packed: row_len * elem_bytes;
	                             per-row arrays: 0 (rows differ) */
	uint64_t row_len;       /**< packed arrays: elements (of dtype) in every row; 0 for other kinds */

	DLDevice device;        /**< device of every tensor (all equal), as given */
	bool host_accessible;   /**< device is kDLCPU or kDLCUDAHost: data may be dereferenced on the CPU */

	const uint32_t *index_map; /**< borrowed wd->index_map (count entries, each < row_count) or NULL */
	ovstage_mask_t mask;       /**< borrowed wd->mask (ceil(count/64) words) or NULL */

	/* Fixed and packed transport: the single source tensor. */
	ovs_layout_view view;   /**< the whole source tensor (fixed, packed); unused (zero) for per-row arrays */
	uint64_t src_row_elems; /**< source-dtype elements per row: fixed = product of trailing dims,
	                             packed = row_len; 0 for per-row arrays */
	const uint8_t *row_base; /**< fixed: address of row 0 (== view.base); NULL otherwise */
	int64_t row_stride;     /**< fixed: signed byte step from one row to the next (strides[0] * source
	                             element bytes, or the compact row size when strides is NULL) */
	bool row_dense;         /**< fixed: the bytes of each single row are adjacent (one memcpy per row) */
	bool contiguous;        /**< fixed / packed: all rows adjacent at row_bytes stride from view.base */

	/* Per-row array transport (also set for the other kinds; exactly one pointer is non-NULL). */
	const DLTensor *tensors;                                /**< borrowed wd->tensors or NULL */
	const DLManagedTensorVersioned *const *managed_tensors; /**< borrowed wd->managed_tensors or NULL */
	uint32_t tensor_count;                                  /**< wd->tensor_count */
} ovs_layout;

/* ---- Validation ------------------------------------------------------------------------------ */

/**
 * Validates wd against every DLPack rule of seed 000 / spec section 5 and fills *out.
 * query_count is the number of prims the write's query selects.
 *
 * INVALID_ARGUMENT: NULL wd/out; both or neither of tensors / managed_tensors; a NULL managed
 * entry; tensor_count 0 (query_count > 0); count > query_count; count 0 with index_map or mask;
 * index_map together with mask; is_array=false with tensor_count != 1; negative ndim, NULL shape,
 * negative shape entry; ndim 0 for a fixed write (no row axis); a trailing dim of 0 in a fixed write;
 * bits or lanes 0; tensors whose dtypes or devices differ; a negative device_id; NULL data with a
 * non-zero byte size; element counts, byte sizes, byte spans or byte_offset overflowing int64/size_t;
 * without index_map a row count (shape[0] fixed, tensor_count per-row) != N; an index_map entry
 * >= the row count; a packed payload that does not cut evenly into the inferred rows, or whose rows
 * are not a whole number of dtype elements.
 *
 * NOT_SUPPORTED: a dtype that cannot be stored (see ovs_dtype_supported); lanes > 255 (as given,
 * or after folding a fixed row); a fixed row over OVS_LAYOUT_MAX_ROW_BYTES; ndim > OVS_LAYOUT_MAX_NDIM;
 * a device type other than kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged.
 *
 * Decisions where seed/spec are silent:
 *  - query_count == 0: OK with kind OVS_LAYOUT_EMPTY and count 0; nothing else is read.
 *  - Fixed ndim 0 is rejected; an array row tensor of ndim 0 is one element.
 *  - Folding a fixed tensor: lanes = dtype.lanes * product(shape[1..]); the row is the tensor's
 *    sub-tensor at index r, gathered in row-major order through any strides.
 *  - Per-row transport without index_map requires tensor_count == N, like shape[0] for fixed.
 *  - A packed payload with zero elements is valid (every row empty).
 *  - Devices must be identical (type and id); kDLCUDAManaged is recorded as device memory.
 *  - bool is {kDLBool, 8, L}; kDLBool with other bit widths is NOT_SUPPORTED.
 */
ovstage_api_status_t ovs_layout_from_write(const ovstage_write_data_t *wd, uint32_t query_count, ovs_layout *out,
					   char *err, size_t err_size);

/* ---- Row access ------------------------------------------------------------------------------ */

/** True when logical element i (< count) is written: mask bit i % 64 of word i / 64, LSB first;
 *  always true without a mask. False for i >= count (bits above count are ignored). */
bool ovs_layout_selected(const ovs_layout *l, uint32_t i);

/** The source row logical element i (< count) reads: index_map[i], or i without an index_map. */
uint32_t ovs_layout_source_row(const ovs_layout *l, uint32_t i);

/** Tensor i (< tensor_count) of the payload: tensors[i] or managed_tensors[i]->dl_tensor. */
const DLTensor *ovs_layout_tensor(const ovs_layout *l, uint32_t i);

/** Fixed and packed layouts: the address of row 0 when every row lies densely at row_bytes
 *  stride (source row r at base + r * row_bytes), so rows can be copied with memcpy; else NULL
 *  (strided source, per-row arrays, empty layouts). Valid for device memory as an address. */
const void *ovs_layout_contiguous_base(const ovs_layout *l);

/** Fixed layouts: copies source row `row` (< row_count) into row_bytes bytes at dst, gathering
 *  through strides. Requires host_accessible. */
void ovs_layout_copy_row(const ovs_layout *l, uint64_t row, void *dst);

/** Array layouts: element count of source row `row` (< row_count); 0 for other kinds. */
uint64_t ovs_layout_array_len(const ovs_layout *l, uint32_t row);

/** Array layouts: the address of source row `row`'s bytes when they are adjacent in ascending order
 *  (its ovs_layout_array_len(l, row) * elem_bytes bytes can be copied at once), else NULL (a strided
 *  row; also NULL for other kinds). For a row with no elements the result may be NULL. Never
 *  dereferences: valid for device memory as an address. */
const void *ovs_layout_array_row_base(const ovs_layout *l, uint32_t row);

/** Array layouts: copies source row `row` into ovs_layout_array_len(l, row) * elem_bytes bytes at
 *  dst, gathering through strides. Requires host_accessible. */
void ovs_layout_copy_array_row(const ovs_layout *l, uint32_t row, void *dst);

/* ---- Dtypes ---------------------------------------------------------------------------------- */

/** Bytes of one element of t: bits * lanes / 8 (rounded down; bits is a multiple of 8 for every
 *  supported dtype). */
size_t ovs_dtype_bytes(DLDataType t);

/** Same code, bits and lanes. */
bool ovs_dtype_equal(DLDataType a, DLDataType b);

/** Whether the (code, bits) pair is storable: int/uint 8,16,32,64; float 16,32,64; bfloat 16;
 *  complex 64,128; bool 8; the FP8 codes (kDLFloat8_*) 8. Lanes are not considered. */
bool ovs_dtype_supported(DLDataType t);

/** Writes "float32x3" style text (code name, bits, "x", lanes; unknown codes as "code<N>") into
 *  buf (size n) and returns buf. */
const char *ovs_dtype_format(DLDataType t, char *buf, size_t n);

/** "POINT", "TOKEN_ID", ... ; "UNKNOWN" for values outside the enum. */
const char *ovs_semantic_name(ovstage_attribute_semantic_t s);

/* ---- Schema ---------------------------------------------------------------------------------- */

/**
 * Checks a kind/dtype/semantic triple against the reserved-semantic layouts of spec 5 (for a new
 * column, a map descriptor or a write): TOKEN_ID {uint,64,1}; RELATIONSHIP_PATH_ID {uint,64,1}
 * is_array; CONNECTION_PATH_ID {uint,64,2} is_array; ASSET_PATH_ID {uint,64,2};
 * PATH_EXPRESSION_STRING {uint,64,1}; STRING {uint,8,1} is_array. Other semantics take any layout.
 * A semantic outside the enum is rejected. name (may be NULL) names the attribute in messages.
 * Returns OK or INVALID_ARGUMENT.
 */
ovstage_api_status_t ovs_layout_check_reserved(bool is_array, DLDataType dtype, ovstage_attribute_semantic_t semantic,
					       const char *name, char *err, size_t err_size);

/**
 * Checks a write of (is_array, dtype, semantic) against an existing column (col_is_array,
 * col_dtype, col_semantic): first ovs_layout_check_reserved on the write, then a kind or dtype
 * change ("column \"x\" is float32x3; write is float32x1") and a semantic change ("column \"x\"
 * has semantic POINT; write has semantic VECTOR"), all INVALID_ARGUMENT. The comparison is exact:
 * semantic NONE onto a POINT column is a change (decision: the spec lists semantic as part of the
 * schema without an "unspecified" value).
 */
ovstage_api_status_t ovs_layout_check_schema_of(bool is_array, DLDataType dtype, ovstage_attribute_semantic_t semantic,
						bool col_is_array, DLDataType col_dtype,
						ovstage_attribute_semantic_t col_semantic, const char *name, char *err,
						size_t err_size);

/** Checks device-resident source tensors (kDLCUDA, kDLCUDAManaged) at the call: NOT_SUPPORTED naming
 * the tensor, the device and why when the process cannot use CUDA (no backend built in, CPU-only
 * mode, no driver or device); INVALID_ARGUMENT naming the ordinal when it is out of range.
 * Needs no prim count (a deferred query's write is checked too); a negative device_id or NULL
 * descriptor is left to ovs_layout_from_write (INVALID_ARGUMENT). */
ovstage_api_status_t ovs_layout_check_host(const ovstage_write_data_t *wd, char *err, size_t err_size);

struct ovs_column;
/** Installs a column's schema (kind, dtype, role, storage device, row bytes) if it has none yet;
 * true if this call installed it, false if one was there (check against it then). Thread-safe:
 * the first of concurrent callers wins, under the column's schema lock. */
bool ovs_column_install_schema(struct ovs_column *c, bool is_array, DLDataType dtype,
			       ovstage_attribute_semantic_t semantic, size_t row_bytes, DLDevice device);

/** ovs_layout_check_schema_of with the write's kind and canonical dtype taken from l. */
ovstage_api_status_t ovs_layout_check_schema(const ovs_layout *l, ovstage_attribute_semantic_t semantic,
					     bool col_is_array, DLDataType col_dtype,
					     ovstage_attribute_semantic_t col_semantic, const char *name, char *err,
					     size_t err_size);

/* ---- Group tensors --------------------------------------------------------------------------- */

/** Fills t as the 1-D view a read or map group hands out: data on device, dtype, *shape elements
 *  at strides *stride, byte_offset 0. shape and stride are the caller's (they live in the group,
 *  which outlives t). Inline: array reads fill one tensor per row. */
static inline void ovs_tensor_1d(DLTensor *t, void *data, DLDevice device, DLDataType dtype, int64_t *shape,
				 int64_t *stride)
{
	t->data = data;
	t->device = device;
	t->ndim = 1;
	t->dtype = dtype;
	t->shape = shape;
	t->strides = stride;
	t->byte_offset = 0;
}

#ifdef __cplusplus
}
#endif

#endif /* OVSTAGE_ENGINE_LAYOUT_H */
