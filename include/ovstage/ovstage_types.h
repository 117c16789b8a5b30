/*
 * ovstage/ovstage_types.h — types of the exported (non-vtable) ovstage functions: instance
 * descriptor, process configuration, logging, and hierarchy lookup / computation.
 *
 * Contract: enum values and struct field orders are ABI. Configuration entries are validated by
 * ovstage_initialize; `key_type` selects which member of `key` and of `value` is meaningful.
 * Hierarchy handles follow the usual rule: uint64_t, 0 is invalid.
 */
#ifndef OVSTAGE_TYPES_H
#define OVSTAGE_TYPES_H

#include "ovstage_api/ovstage_api_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Instance descriptor --------------------------------------------------------------------- */

/** Arguments of ovstage_create_instance. */
typedef struct
{
    const char* name; /**< optional debug name (NUL-terminated), or NULL */
} ovstage_instance_desc_t;

/* ---- Process configuration ------------------------------------------------------------------- */

/** Which key enum and which value member a configuration entry uses. */
typedef enum
{
    OVSTAGE_CONFIG_KEY_TYPE_BOOL,
    OVSTAGE_CONFIG_KEY_TYPE_INT64,
    OVSTAGE_CONFIG_KEY_TYPE_UINT64,
    OVSTAGE_CONFIG_KEY_TYPE_DOUBLE,
    OVSTAGE_CONFIG_KEY_TYPE_STRING,
    OVSTAGE_CONFIG_KEY_TYPE_BLOB,
    OVSTAGE_CONFIG_KEY_TYPE_COUNT,
} ovstage_config_key_type_t;

/** Boolean configuration keys (none yet). */
typedef enum
{
    OVSTAGE_CONFIG_BOOL_COUNT,
} ovstage_config_bool_t;

/** Signed integer configuration keys (none yet). */
typedef enum
{
    OVSTAGE_CONFIG_INT64_COUNT,
} ovstage_config_int64_t;

/** Unsigned integer configuration keys. */
typedef enum
{
    /* Process default hierarchy computation model (an ovstage_hierarchy_computation_model_id_t). */
    OVSTAGE_CONFIG_RUNTIME_DEFAULT_HIERARCHY_COMPUTATION_MODEL,
    OVSTAGE_CONFIG_UINT64_COUNT,
} ovstage_config_uint64_t;

/** Floating-point configuration keys (none yet). */
typedef enum
{
    OVSTAGE_CONFIG_DOUBLE_COUNT,
} ovstage_config_double_t;

/** String configuration keys. */
typedef enum
{
    /* Root of the binary package, read by the static loader; may contain OVX_CONFIG_EXECUTABLE_DIR_TOKEN. */
    OVSTAGE_CONFIG_BINARY_PACKAGE_ROOT_PATH,
    OVSTAGE_CONFIG_STRING_COUNT,
} ovstage_config_string_t;

/** Binary configuration keys (none yet). */
typedef enum
{
    OVSTAGE_CONFIG_BLOB_COUNT,
} ovstage_config_blob_t;

/** One configuration setting. */
typedef struct
{
    ovstage_config_key_type_t key_type; /**< selects the meaningful member of `key` and of `value` */
    union
    {
        ovstage_config_bool_t bool_key;     /**< key when key_type is BOOL */
        ovstage_config_int64_t int64_key;   /**< key when key_type is INT64 */
        ovstage_config_uint64_t uint64_key; /**< key when key_type is UINT64 */
        ovstage_config_double_t double_key; /**< key when key_type is DOUBLE */
        ovstage_config_string_t string_key; /**< key when key_type is STRING */
        ovstage_config_blob_t blob_key;     /**< key when key_type is BLOB */
    } key;                                  /**< which setting */
    union
    {
        bool bool_value;          /**< value when key_type is BOOL */
        int64_t int_value;        /**< value when key_type is INT64 */
        uint64_t uint_value;      /**< value when key_type is UINT64 */
        double double_value;      /**< value when key_type is DOUBLE */
        ovx_string_t string_value; /**< value when key_type is STRING */
        struct
        {
            const void* data; /**< first byte of the blob */
            size_t size;      /**< blob size in bytes */
        } blob_value;         /**< value when key_type is BLOB */
    } value;                  /**< the setting's value */
} ovstage_config_entry_t;

/** A set of configuration settings; NULL or zero entries means defaults. */
typedef struct
{
    const ovstage_config_entry_t* entries; /**< the settings */
    size_t entry_count;                    /**< number of settings */
} ovstage_config_t;

/* ---- Logging --------------------------------------------------------------------------------- */

/** Message severity and callback threshold (there is no value 2; NONE is a threshold only). */
typedef enum
{
    OVSTAGE_LOG_VERBOSE = -2,
    OVSTAGE_LOG_INFO = -1,
    OVSTAGE_LOG_WARNING = 0,
    OVSTAGE_LOG_ERROR = 1,
    OVSTAGE_LOG_NONE = 3,
} ovstage_log_severity_t;

/**
 * Receives one log message on the dispatcher thread (calls are serialized). `timestamp` is wall
 * seconds since the epoch; `message` is valid only during the call.
 */
typedef void (*ovstage_log_callback_t)(ovstage_log_severity_t severity, double timestamp, ovx_string_t message,
                                       void* user_data);

/* ---- Hierarchy ------------------------------------------------------------------------------- */

typedef uint64_t ovstage_hierarchy_handle_t;
#define OVSTAGE_INVALID_HIERARCHY_HANDLE ((ovstage_hierarchy_handle_t)0)

typedef uint64_t ovstage_hierarchy_result_id_t;
#define OVSTAGE_INVALID_HIERARCHY_RESULT_ID ((ovstage_hierarchy_result_id_t)0)

/** Hierarchy computation models; the DEFAULT_* names are aliases, not new ids. */
typedef enum
{
    OVSTAGE_HIERARCHY_COMPUTATION_MODEL_INVALID = 0,
    OVSTAGE_HIERARCHY_COMPUTATION_MODEL_CPU_INCREMENTAL = 1,
    OVSTAGE_HIERARCHY_COMPUTATION_MODEL_GPU_INCREMENTAL = 2,
    OVSTAGE_HIERARCHY_COMPUTATION_MODEL_GPU_GLOBAL = 3,
    OVSTAGE_HIERARCHY_COMPUTATION_MODEL_RUNTIME_DEFAULT = 4,
    OVSTAGE_HIERARCHY_COMPUTATION_MODEL_DEFAULT_CPU = OVSTAGE_HIERARCHY_COMPUTATION_MODEL_CPU_INCREMENTAL,
    OVSTAGE_HIERARCHY_COMPUTATION_MODEL_DEFAULT_GPU = OVSTAGE_HIERARCHY_COMPUTATION_MODEL_GPU_GLOBAL,
} ovstage_hierarchy_computation_model_id_t;

#define OVSTAGE_INVALID_HIERARCHY_COMPUTATION_MODEL_ID OVSTAGE_HIERARCHY_COMPUTATION_MODEL_INVALID

/** Which relatives get_hierarchy looks up. */
typedef enum
{
    OVSTAGE_HIERARCHY_PARENT = 0,   /* zero or one path; a top-level prim has none */
    OVSTAGE_HIERARCHY_CHILDREN = 1,
    OVSTAGE_HIERARCHY_SIBLINGS = 2,
} ovstage_hierarchy_relation_t;

/** Lookup result of one input prim. */
typedef struct
{
    ovstage_api_status_t status; /**< OVSTAGE_OK, or OVSTAGE_ERROR_NOT_FOUND for a missing input prim */
    size_t path_offset;          /**< first entry of this item in ovstage_hierarchy_result_t.paths */
    size_t path_count;           /**< number of related paths */
} ovstage_hierarchy_item_t;

/** Result of a get_hierarchy lookup. */
typedef struct
{
    ovstage_hierarchy_result_id_t hierarchy_result_id; /**< id of this result, for release_hierarchy_result */
    ovstage_ordinal_t ordinal;                         /**< ordinal the lookup was requested at */
    const ovstage_hierarchy_item_t* items;             /**< one item per input prim, in input order */
    size_t input_count;                                /**< number of items */
    const ovx_string_or_token_t* paths;                /**< related paths of all items, flattened (ovstage-owned) */
    size_t path_count;                                 /**< number of paths */
} ovstage_hierarchy_result_t;

/** Description of one hierarchy computation model. */
typedef struct
{
    ovstage_hierarchy_computation_model_id_t model_id; /**< model id */
    ovx_string_t name;                                 /**< short name, e.g. "cpu-incremental" */
    ovx_string_t description;                          /**< human-readable description */
} ovstage_hierarchy_computation_model_desc_t;

#ifdef __cplusplus
}
#endif

#endif /* OVSTAGE_TYPES_H */
