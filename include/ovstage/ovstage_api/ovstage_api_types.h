/*
 * ovstage/ovstage_api/ovstage_api_types.h — version, status codes, scalars, handles, enums and
 * data structs of the ovstage data-plane API.
 *
 * Contract:
 *  - Every enum value and every struct field order here is ABI and never changes.
 *  - Handles are uint64_t; 0 is always the invalid handle of its kind.
 *  - Ordinals are application-chosen uint64_t ordering keys, not time; 0 is a valid value.
 *  - Tensors cross the API as DLPack 1.x DLTensor / DLManagedTensorVersioned (ovx/dlpack_compat.h
 *    supplies the 1.x types when the system DLPack header is older).
 *  - Exported (non-inline) functions of every ovstage header are declared with OVSTAGE_API, which
 *    defaults to default ELF visibility; the library build or a user may predefine it.
 */
#ifndef OVSTAGE_API_TYPES_H
#define OVSTAGE_API_TYPES_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <dlpack/dlpack.h>
#include <ovx/dlpack_compat.h>
#include <ovx/path_dictionary/path_dictionary_types.h>

/* ---- Version and attribute macros ------------------------------------------------------------ */

#define OVSTAGE_VERSION_MAJOR 0
#define OVSTAGE_VERSION_MINOR 2
#define OVSTAGE_VERSION_PATCH 1

/** Marks a declaration deprecated with a message; predefine it to override. */
#ifndef OVSTAGE_DEPRECATED
#if defined(__cplusplus) && __cplusplus >= 201402L
#define OVSTAGE_DEPRECATED(msg) [[deprecated(msg)]]
#elif defined(__GNUC__) || defined(__clang__)
#define OVSTAGE_DEPRECATED(msg) __attribute__((deprecated(msg)))
#elif defined(_MSC_VER)
#define OVSTAGE_DEPRECATED(msg) __declspec(deprecated(msg))
#else
#define OVSTAGE_DEPRECATED(msg)
#endif
#endif

/** Visibility of the functions the ovstage library exports; predefine it to override. */
#ifndef OVSTAGE_API
#if defined(__GNUC__) || defined(__clang__)
#define OVSTAGE_API __attribute__((visibility("default")))
#else
#define OVSTAGE_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Opaque forward declarations ------------------------------------------------------------- */

/** Opaque implementation state of a stage instance; never defined publicly. */
typedef struct ovstage_context_t ovstage_context_t;

/** Function table of a stage instance (body in ovstage_api.h). */
typedef struct ovstage_vtable_t ovstage_vtable_t;

/* ---- Status codes ---------------------------------------------------------------------------- */

/** Result of every synchronous call and of every enqueue. */
typedef enum ovstage_api_status_t
{
    OVSTAGE_OK = 0,
    OVSTAGE_ERROR_INVALID_ARGUMENT = 1,
    OVSTAGE_ERROR_INVALID_HANDLE = 2,          /* stale or invalid handle of any kind */
    OVSTAGE_ERROR_NOT_FOUND = 3,
    OVSTAGE_ERROR_PRIM_NOT_FOUND = 4,          /* misnomer: an INSERT / clone target already exists */
    OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION = 5,   /* write at or below the floor, or read of unsealed state */
    OVSTAGE_ERROR_NOT_SUPPORTED = 6,
    OVSTAGE_ERROR_QUEUE_FULL = 7,              /* back-pressure: the submit queue is full */
    OVSTAGE_ERROR_END_OF_ITERATION = 8,
    OVSTAGE_ERROR_OUT_OF_MEMORY = 9,
    OVSTAGE_ERROR_LAYOUT_CHANGED = 10,         /* layout changed during a map */
    OVSTAGE_ERROR_TIMEOUT = 11,                /* not ready yet; not terminal */
    OVSTAGE_ERROR_OP_FAILED = 12,              /* an enqueued op failed */
    OVSTAGE_ERROR_OUT_OF_RANGE = 13,           /* range cannot be served from retained payloads */
    OVSTAGE_ERROR_INTERNAL = 99,
} ovstage_api_status_t;

/* ---- Scalars --------------------------------------------------------------------------------- */

#ifndef OVSTAGE_ORDINAL_T_DECLARED
#define OVSTAGE_ORDINAL_T_DECLARED
/** Application-chosen ordering key of a mutation; no sentinel, 0 is valid. */
typedef uint64_t ovstage_ordinal_t;
#endif

/** Validity bitmask: NULL = all valid; element i is bit (i % 64) of word (i / 64), LSB first. */
typedef const uint64_t* ovstage_mask_t;

/** CUDA synchronization to apply around an operation; {0, 0} = none. */
typedef struct
{
    uintptr_t stream;     /**< 0 = none, 1 = the default stream, > 1 = a cudaStream_t to drain */
    uintptr_t wait_event; /**< 0 = none, else a cudaEvent_t to wait on */
} ovstage_cuda_sync_t;

/** Timeout in nanoseconds; 0 polls, OVSTAGE_TIMEOUT_INFINITE blocks. */
typedef uint64_t ovstage_timeout_ns_t;
#define OVSTAGE_TIMEOUT_INFINITE ((ovstage_timeout_ns_t)~0ULL)

/** Receipt of an enqueued operation; monotonic per instance. */
typedef uint64_t ovstage_op_id_t;
#define OVSTAGE_INVALID_OP_ID ((ovstage_op_id_t)0)

/** What every enqueue returns. */
typedef struct
{
    ovstage_api_status_t status; /**< OVSTAGE_OK = accepted (not yet executed); otherwise rejected */
    ovstage_op_id_t op_index;    /**< receipt of the accepted op; OVSTAGE_INVALID_OP_ID when rejected */
} ovstage_enqueue_result_t;

/* ---- Handles --------------------------------------------------------------------------------- */

typedef uint64_t ovstage_query_handle_t;
#define OVSTAGE_INVALID_QUERY_HANDLE ((ovstage_query_handle_t)0)

typedef uint64_t ovstage_read_handle_t;
#define OVSTAGE_INVALID_READ_HANDLE ((ovstage_read_handle_t)0)

typedef uint64_t ovstage_map_handle_t;
#define OVSTAGE_INVALID_MAP_HANDLE ((ovstage_map_handle_t)0)

typedef uint64_t ovstage_ordinal_query_handle_t;
#define OVSTAGE_INVALID_ORDINAL_QUERY_HANDLE ((ovstage_ordinal_query_handle_t)0)

typedef uint64_t ovstage_read_group_id_t;
#define OVSTAGE_INVALID_READ_GROUP_ID ((ovstage_read_group_id_t)0)

typedef uint64_t ovstage_query_result_id_t;
#define OVSTAGE_INVALID_QUERY_RESULT_ID ((ovstage_query_result_id_t)0)

/** Output of wait_op. */
typedef struct
{
    const ovstage_op_id_t* error_op_ids; /**< ops seen failed since this thread's previous wait_op (thread-local) */
    size_t error_op_id_count;            /**< number of entries in error_op_ids */
    ovstage_op_id_t lowest_pending_op_id; /**< on timeout, the lowest still pending op of the waited chain */
} ovstage_op_wait_result_t;

/* ---- Enums ----------------------------------------------------------------------------------- */

/** Comparison of a query predicate. */
typedef enum
{
    OVSTAGE_FILTER_OP_HAS = 0,      /* the attribute exists */
    OVSTAGE_FILTER_OP_IN = 1,       /* the value is one of the values */
    OVSTAGE_FILTER_OP_CONTAINS = 2, /* an array element / substring matches */
    OVSTAGE_FILTER_OP_PREFIX = 3,   /* byte prefix */
    OVSTAGE_FILTER_OP_LT = 4,
    OVSTAGE_FILTER_OP_LE = 5,
    OVSTAGE_FILTER_OP_GT = 6,
    OVSTAGE_FILTER_OP_GE = 7,
} ovstage_filter_op_t;

/** Whether a write may create and/or update prims. */
typedef enum
{
    OVSTAGE_PRIM_MODE_UPSERT = 0, /* create absent prims, update present ones (default) */
    OVSTAGE_PRIM_MODE_INSERT = 1, /* create only; an existing prim fails with OVSTAGE_ERROR_PRIM_NOT_FOUND */
} ovstage_prim_mode_t;

/** Which attributes a write-floor advance affects. */
typedef enum
{
    OVSTAGE_SCOPE_ALL = 0,
    OVSTAGE_SCOPE_INCLUDE = 1,
    OVSTAGE_SCOPE_EXCLUDE = 2,
} ovstage_scope_t;

/** Role of an attribute's bytes; not part of the storage layout. */
typedef enum
{
    OVSTAGE_SEMANTIC_NONE = 0,
    OVSTAGE_SEMANTIC_ASSET_PATH_ID = 1,
    OVSTAGE_SEMANTIC_TOKEN_ID = 2,
    OVSTAGE_SEMANTIC_PATH_EXPRESSION_STRING = 3,
    OVSTAGE_SEMANTIC_RELATIONSHIP_PATH_ID = 4,
    OVSTAGE_SEMANTIC_POINT = 5,
    OVSTAGE_SEMANTIC_VECTOR = 6,
    OVSTAGE_SEMANTIC_NORMAL = 7,
    OVSTAGE_SEMANTIC_COLOR = 8,
    OVSTAGE_SEMANTIC_QUATERNION = 9,
    OVSTAGE_SEMANTIC_MATRIX = 10,
    OVSTAGE_SEMANTIC_TEXTURE_COORDINATE = 11,
    OVSTAGE_SEMANTIC_CONNECTION_PATH_ID = 12,
    OVSTAGE_SEMANTIC_STRING = 13,
    OVSTAGE_SEMANTIC_TIME_CODE = 14,
    OVSTAGE_SEMANTIC_FRAME = 15,
} ovstage_attribute_semantic_t;

/* ---- Data structs ---------------------------------------------------------------------------- */

/** Payload of a read group or a map group. */
typedef struct
{
    const DLTensor* tensors;         /**< tensor_count tensors; NULL for tombstone groups */
    uint32_t tensor_count;           /**< 1 for fixed columns, one per row for per-row array transport, 0 for tombstones */
    uint32_t count;                  /**< logical element count; non-zero iff index_map or mask is present */
    const uint32_t* index_map;       /**< logical element i is tensor row index_map[i]; NULL = one-to-one */
    ovstage_mask_t mask;             /**< validity of the count logical elements; NULL = all valid */
    ovstage_cuda_sync_t cuda_sync;   /**< sync to apply before touching the data ({0,0} on CPU) */
} ovstage_data_t;

/** The prims a group covers: list[offset .. offset+count) or list[index_map[i]]. */
typedef struct
{
    ovx_primpath_list_t list;  /**< borrowed path list (the query's or a pinned copy); compare by handle */
    uint32_t offset;           /**< first covered position in list when index_map is NULL */
    uint32_t count;            /**< number of covered prims */
    const uint32_t* index_map; /**< covered prim i is list[index_map[i]]; NULL = contiguous range */
} ovstage_prim_group_t;

/** Storage facts of the attribute a group was produced from. */
typedef struct
{
    ovstage_ordinal_t attribute_write_floor_ordinal; /**< write floor in effect when the group was produced */
    uint64_t layout_generation;                       /**< bumps on structural change, stable across value updates */
} ovstage_attribute_meta_t;

/** Which ordinals a read selects. */
typedef struct
{
    ovstage_ordinal_t start_ordinal; /**< first ordinal of a change range (when has_start_ordinal) */
    ovstage_ordinal_t end_ordinal;   /**< last ordinal of a change range, or the snapshot of a latest read */
    bool has_start_ordinal;          /**< false: latest snapshot; true: change range [start, end] inclusive */
} ovstage_ordinal_range_t;

/** One group of a read: one attribute over a subset of the query's prims. */
typedef struct
{
    ovstage_read_group_id_t read_group_id;  /**< id of this group, for release_group */
    ovx_token_t attribute;                  /**< attribute name */
    ovstage_ordinal_t ordinal;              /**< informational ordinal of the group's data */
    bool is_delete;                         /**< tombstone group: the prims lost the attribute (no tensors) */
    bool is_array;                          /**< the attribute is an array (ragged) column */
    ovstage_attribute_semantic_t semantic;  /**< recorded role of the column */
    ovstage_prim_group_t prims;             /**< covered prims */
    ovstage_data_t data;                    /**< payload */
    ovstage_attribute_meta_t meta;          /**< storage facts */
} ovstage_read_group_t;

/** One writable group of a map session. */
typedef struct
{
    ovstage_prim_group_t prims;    /**< covered prims */
    ovstage_data_t data;           /**< buffers to fill (lane-canonical 1-D tensors) */
    ovstage_attribute_meta_t meta; /**< storage facts */
} ovstage_map_group_t;

/** What map_attribute maps. */
typedef struct
{
    ovx_string_or_token_t attribute;       /**< attribute name */
    DLDataType dtype;                      /**< element type; required to create a column, zero = existing schema */
    ovstage_attribute_semantic_t semantic; /**< role recorded for a new column */
    ovstage_prim_mode_t prim_mode;         /**< whether absent prims may be created */
} ovstage_map_desc_t;

/** One condition of a query filter. */
typedef struct
{
    ovx_string_or_token_t attribute; /**< attribute the condition tests */
    ovstage_filter_op_t op;          /**< comparison */
    const ovx_string_t* values;      /**< operand values (strings) */
    size_t value_count;              /**< number of values */
} ovstage_predicate_t;

/** A query filter: the AND of its predicates. */
typedef struct
{
    const ovstage_predicate_t* predicates; /**< conditions */
    size_t count;                          /**< number of conditions */
} ovstage_filter_t;

/** Resolved result of a query. */
typedef struct
{
    ovstage_query_result_id_t query_result_id; /**< id of this result, for release_query_result */
    const ovx_token_t* attributes;             /**< attributes found on the matched prims */
    size_t attribute_count;                    /**< number of attributes */
    ovstage_query_handle_t all_handle;         /**< the query's own handle */
    size_t total_prim_count;                   /**< number of matched prims */
} ovstage_query_result_t;

/** Arguments of advance_write_floor. */
typedef struct
{
    ovstage_ordinal_t ordinal;     /**< new floor; the floor never regresses */
    ovstage_scope_t scope;         /**< which attributes the advance affects */
    const ovx_token_t* attributes; /**< attributes for INCLUDE / EXCLUDE */
    size_t attribute_count;        /**< number of attributes */
} ovstage_write_floor_desc_t;

/** Payload of a write. */
typedef struct
{
    const DLTensor* tensors;                                  /**< client-managed tensors (valid until the op completes), or NULL */
    const DLManagedTensorVersioned* const* managed_tensors;   /**< tensors whose ownership transfers at the call, or NULL */
    uint32_t tensor_count;                                    /**< number of tensors */
    uint32_t count;                                           /**< logical element count; 0 = all query prims */
    const uint32_t* index_map;                                /**< logical element i reads row index_map[i]; NULL = one-to-one */
    ovstage_mask_t mask;                                      /**< which logical elements are written; NULL = all */
    ovstage_cuda_sync_t cuda_sync;                            /**< sync ovstage waits on before reading the tensors */
    ovstage_attribute_semantic_t semantic;                    /**< role of the column */
    bool is_array;                                            /**< the column is an array (ragged) column */
} ovstage_write_data_t;

/** One entry of write_attributes. */
typedef struct
{
    ovx_string_or_token_t attribute; /**< attribute name */
    ovstage_write_data_t data;       /**< payload */
} ovstage_attribute_write_t;

/* ---- Instance -------------------------------------------------------------------------------- */

#ifndef OVSTAGE_INSTANCE_T_DECLARED
#define OVSTAGE_INSTANCE_T_DECLARED
/** A stage instance: a function table plus its state. */
typedef struct ovstage_instance_t
{
    const ovstage_vtable_t* vtable; /**< function table; every data-plane call goes through it */
    ovstage_context_t* context;     /**< implementation state passed as the first argument of every slot */
} ovstage_instance_t;
#else
struct ovstage_instance_t
{
    const ovstage_vtable_t* vtable; /**< function table; every data-plane call goes through it */
    ovstage_context_t* context;     /**< implementation state passed as the first argument of every slot */
};
#endif

#ifdef __cplusplus
}
#endif

#endif /* OVSTAGE_API_TYPES_H */
