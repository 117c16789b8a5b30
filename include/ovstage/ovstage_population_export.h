/*
 * ovstage/ovstage_population_export.h — authoring a selected slice of a stage back to USD storage.
 *
 * Contract:
 *  - A descriptor (ovstage_population_export_desc_t) selects prims and properties with predicates
 *    and maps them with rule arrays (each at most 4096 entries); initialize it with one of the
 *    *_desc_init* functions, then refine. `ordinal` must equal the current committed ordinal.
 *  - Blocking entry points complete on return. The *_enqueue_* forms run on the instance's
 *    population FIFO and must each be consumed by exactly one terminal
 *    ovstage_population_export_wait_op, which also returns the report.
 *  - A destination is bound to its stage, which must outlive it; one destination per USD
 *    identifier per process. Nothing is persisted except by an explicit save (or _to_usd_file).
 *  - This implementation is built without OpenUSD: the exported functions report
 *    OVSTAGE_ERROR_NOT_SUPPORTED.
 */
#ifndef OVSTAGE_POPULATION_EXPORT_H
#define OVSTAGE_POPULATION_EXPORT_H

#include <stddef.h>
#include <stdint.h>
#include "ovstage.h"
#include "ovstage_population.h"
#include "ovstage_population_predicate.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Enums ----------------------------------------------------------------------------------- */

/** Which source state a descriptor exports. */
typedef enum
{
    OVSTAGE_POPULATION_EXPORT_SELECTION_EXPLICIT_PREDICATE = 0,             /* current state under the predicates */
    OVSTAGE_POPULATION_EXPORT_SELECTION_CHANGED_PROPERTIES_SINCE_ORDINAL = 1, /* properties changed in (since, ordinal] */
} ovstage_population_export_selection_t;

/** Specifier of newly authored prim specs. */
typedef enum
{
    OVSTAGE_POPULATION_EXPORT_LAYER_MODE_OVER = 0, /* sparse "over" opinions */
    OVSTAGE_POPULATION_EXPORT_LAYER_MODE_DEF = 1,  /* "def" definitions */
} ovstage_population_export_layer_mode_t;

/** How a rule path selects prims. */
typedef enum
{
    OVSTAGE_POPULATION_EXPORT_PATH_MATCH_EXACT = 0,  /* that prim only */
    OVSTAGE_POPULATION_EXPORT_PATH_MATCH_PREFIX = 1, /* that prim and its descendants */
} ovstage_population_export_path_match_t;

/** How a rule name selects runtime attributes. */
typedef enum
{
    OVSTAGE_POPULATION_EXPORT_NAME_MATCH_EXACT = 0,
    OVSTAGE_POPULATION_EXPORT_NAME_MATCH_GLOB = 1,
} ovstage_population_export_name_match_t;

/** How local transforms are authored. */
typedef enum
{
    OVSTAGE_POPULATION_EXPORT_TRANSFORM_USD_XFORM_OP = 0,   /* standard xformOp opinions */
    OVSTAGE_POPULATION_EXPORT_TRANSFORM_NONE = 1,           /* transforms are not exported */
    OVSTAGE_POPULATION_EXPORT_TRANSFORM_USD_MATRIX_OP = 2,  /* one explicit matrix op */
} ovstage_population_export_transform_policy_t;

/** What happens to selected metadata whose USD type is unknown. */
typedef enum
{
    OVSTAGE_POPULATION_EXPORT_UNKNOWN_METADATA_DROP = 0,
    OVSTAGE_POPULATION_EXPORT_UNKNOWN_METADATA_PRESERVE = 1,
    OVSTAGE_POPULATION_EXPORT_UNKNOWN_METADATA_FAIL = 2,
} ovstage_population_export_unknown_metadata_policy_t;

/** customData key that keeps unresolved applied API schema names under the PRESERVE policy. */
#define OVSTAGE_POPULATION_EXPORT_UNKNOWN_APPLIED_API_SCHEMAS_CUSTOM_DATA_KEY "ovpopulation:unknownAppliedAPISchemas"

/** Whether the applied API schemas recorded on source prims are authored. */
typedef enum
{
    OVSTAGE_POPULATION_EXPORT_SOURCE_API_SCHEMAS_EXPLICIT_ONLY = 0,   /* only api_schema_rules */
    OVSTAGE_POPULATION_EXPORT_SOURCE_API_SCHEMAS_APPLY_RECORDED = 1,  /* also each prim's recorded usd-schemas */
} ovstage_population_export_source_api_schema_policy_t;

/** Which runtime attributes are projected automatically. */
typedef enum
{
    OVSTAGE_POPULATION_EXPORT_PROJECTION_EXPLICIT_RULES = 0,   /* only attribute_rules */
    OVSTAGE_POPULATION_EXPORT_PROJECTION_SCHEMA_DECLARED = 1,  /* also attributes the prim's schemas declare */
} ovstage_population_export_projection_t;

/** Per-rule flags (OR-ed into a rule's `flags`). */
typedef enum
{
    OVSTAGE_POPULATION_EXPORT_RULE_NONE = 0,
    OVSTAGE_POPULATION_EXPORT_RULE_EXPORT_DEFAULT_VALUE = 1u << 0, /* export values equal to the fallback too */
    OVSTAGE_POPULATION_EXPORT_RULE_DERIVED_ALLOWED = 1u << 1,      /* accept a schema-derived value type */
    OVSTAGE_POPULATION_EXPORT_RULE_INFER_CUSTOM_TYPE = 1u << 3,    /* infer a custom type from the tensor layout */
    OVSTAGE_POPULATION_EXPORT_RULE_REQUIRED = 1u << 4,             /* a rule that authors nothing is an error */
} ovstage_population_export_rule_flags_t;

/** USD property kind a property-edge rule authors. */
typedef enum
{
    OVSTAGE_POPULATION_EXPORT_PROPERTY_INVALID = 0, /* rejected: choose a kind explicitly */
    OVSTAGE_POPULATION_EXPORT_PROPERTY_RELATIONSHIP = 1,
    OVSTAGE_POPULATION_EXPORT_PROPERTY_CONNECTION = 2,
    OVSTAGE_POPULATION_EXPORT_PROPERTY_MATERIAL_BINDING = 3,
} ovstage_population_export_property_kind_t;

/** Where a metadata rule authors. */
typedef enum
{
    OVSTAGE_POPULATION_EXPORT_METADATA_PRIM = 0,              /* prim metadata */
    OVSTAGE_POPULATION_EXPORT_METADATA_LAYER_CUSTOM_DATA = 1, /* layer customData */
    OVSTAGE_POPULATION_EXPORT_METADATA_REFERENCES = 2,        /* prim references */
    OVSTAGE_POPULATION_EXPORT_METADATA_LAYER_STANDARD = 3,    /* standard layer metadata */
} ovstage_population_export_metadata_kind_t;

/** Initial contents of a destination. */
typedef enum
{
    OVSTAGE_POPULATION_EXPORT_DESTINATION_EMPTY = 0,         /* start empty; storage replaced on save */
    OVSTAGE_POPULATION_EXPORT_DESTINATION_OPEN_EXISTING = 1, /* open the existing layer stack, author into its root */
} ovstage_population_export_destination_mode_t;

/** Handle of a reusable export destination; 0 is invalid. */
typedef uint64_t ovstage_population_export_destination_handle_t;
#define OVSTAGE_POPULATION_EXPORT_INVALID_DESTINATION_HANDLE ((ovstage_population_export_destination_handle_t)0)

/* ---- Rules ----------------------------------------------------------------------------------- */

/** Maps runtime attributes to USD attributes. */
typedef struct
{
    ovx_string_t path;                                                /**< prim path selector; empty = all selected prims */
    ovstage_population_export_path_match_t path_match;                /**< how `path` matches */
    ovx_string_t source_attribute_name;                               /**< runtime attribute name or pattern */
    ovstage_population_export_name_match_t source_attribute_name_match; /**< how `source_attribute_name` matches */
    ovx_string_t destination_attribute_name;                          /**< USD attribute to author; empty = source name */
    ovx_string_t usd_type_name;                                       /**< USD value type; empty = schema / existing / inferred */
    ovx_string_t required_schema_name;                                /**< schema used to resolve the type, optional */
    uint32_t flags;                                                   /**< OR of ovstage_population_export_rule_flags_t */
} ovstage_population_export_attribute_rule_t;

/** Forces prim specs and supplies or overrides their type. */
typedef struct
{
    ovx_string_t path;                                 /**< prim path selector */
    ovstage_population_export_path_match_t path_match; /**< how `path` matches */
    ovx_string_t usd_type_name;                        /**< USD type to author; empty = source type */
    ovx_string_t unknown_type_metadata_key;            /**< metadata key that keeps an unknown type name, optional */
} ovstage_population_export_prim_rule_t;

/** Applies a USD API schema. */
typedef struct
{
    ovx_string_t path;                                 /**< prim path selector */
    ovstage_population_export_path_match_t path_match; /**< how `path` matches */
    ovx_string_t schema_name;                          /**< API schema to apply */
    ovx_string_t instance_name;                        /**< instance of a multiple-apply schema; empty otherwise */
    uint32_t flags;                                    /**< OR of ovstage_population_export_rule_flags_t */
} ovstage_population_export_api_schema_rule_t;

/** Authors relationship / connection targets from path-valued runtime attributes. */
typedef struct
{
    ovx_string_t path;                                       /**< prim path selector; empty = all selected prims */
    ovstage_population_export_path_match_t path_match;       /**< how `path` matches */
    ovx_string_t source_property_name;                       /**< runtime property holding the targets */
    ovx_string_t destination_property_name;                  /**< USD property to author; empty = source name */
    ovx_string_t usd_type_name;                              /**< value type of a connection attribute */
    ovstage_population_export_property_kind_t property_kind; /**< kind of property to author */
    uint32_t flags;                                          /**< OR of ovstage_population_export_rule_flags_t */
} ovstage_population_export_property_edge_rule_t;

/** Maps runtime metadata attributes to USD metadata. */
typedef struct
{
    ovx_string_t path;                                       /**< prim path selector; empty = all selected prims */
    ovstage_population_export_path_match_t path_match;       /**< how `path` matches */
    ovx_string_t source_metadata_name;                       /**< runtime metadata attribute to read */
    ovx_string_t destination_metadata_name;                  /**< USD metadata key; empty = source name */
    ovstage_population_export_metadata_kind_t metadata_kind; /**< where to author */
    uint32_t flags;                                          /**< OR of ovstage_population_export_rule_flags_t */
} ovstage_population_export_metadata_rule_t;

/* ---- Descriptor and report ------------------------------------------------------------------- */

/** What to export and how. */
typedef struct
{
    uint32_t struct_size; /**< sizeof(ovstage_population_export_desc_t) */
    ovstage_population_export_source_api_schema_policy_t source_api_schema_policy; /**< recorded API schemas policy */
    ovstage_population_export_projection_t projection;                           /**< automatic attribute projection */
    ovstage_ordinal_t ordinal;       /**< current committed ordinal the caller expects */
    ovstage_ordinal_t since_ordinal; /**< lower bound (exclusive) for CHANGED_PROPERTIES_SINCE_ORDINAL */
    ovstage_population_export_selection_t selection;                             /**< which source state */
    ovstage_population_export_layer_mode_t layer_mode;                           /**< over or def */
    ovstage_population_export_transform_policy_t transform_policy;               /**< transform authoring */
    ovstage_population_export_unknown_metadata_policy_t unknown_metadata_policy; /**< unknown metadata handling */
    ovstage_population_prim_predicate_t prim_predicate;         /**< candidate prims (default ALL) */
    ovstage_population_property_predicate_t property_predicate; /**< candidate properties (default ALL) */
    const ovstage_population_export_prim_rule_t* prim_rules;             /**< prim rules */
    size_t prim_rule_count;                                              /**< number of prim rules */
    const ovstage_population_export_api_schema_rule_t* api_schema_rules; /**< API schema rules */
    size_t api_schema_rule_count;                                        /**< number of API schema rules */
    const ovstage_population_export_attribute_rule_t* attribute_rules;   /**< attribute rules */
    size_t attribute_rule_count;                                         /**< number of attribute rules */
    const ovstage_population_export_property_edge_rule_t* property_rules; /**< property-edge rules */
    size_t property_rule_count;                                          /**< number of property-edge rules */
    const ovstage_population_export_metadata_rule_t* metadata_rules;     /**< metadata rules */
    size_t metadata_rule_count;                                          /**< number of metadata rules */
} ovstage_population_export_desc_t;

/** Best-effort counters of one export. */
typedef struct
{
    size_t prims_examined;             /**< prims considered */
    size_t prims_exported;             /**< prims authored */
    size_t prims_skipped;              /**< prims not authored */
    size_t attributes_examined;        /**< attributes considered */
    size_t attributes_exported;        /**< attributes authored */
    size_t attributes_skipped;         /**< attributes not authored */
    size_t attributes_unsupported;     /**< attributes of an unsupported type */
    size_t api_schemas_examined;       /**< API schemas considered */
    size_t api_schemas_applied;        /**< API schemas applied */
    size_t api_schemas_skipped;        /**< API schemas not applied */
    size_t custom_attributes_inferred; /**< attributes authored with an inferred custom type */
    size_t unknown_metadata_preserved; /**< unknown metadata kept under the PRESERVE policy */
    size_t transforms_examined;        /**< transforms considered */
    size_t transforms_exported;        /**< transforms authored */
    size_t property_edges_examined;    /**< property edges considered */
    size_t property_edges_exported;    /**< property edges authored */
    size_t property_edges_skipped;     /**< property edges not authored */
    size_t property_edges_unsupported; /**< property edges of an unsupported kind */
    size_t metadata_examined;          /**< metadata considered */
    size_t metadata_exported;          /**< metadata authored */
    size_t metadata_skipped;           /**< metadata not authored */
    size_t metadata_unsupported;       /**< metadata of an unsupported type */
    size_t source_states_unavailable;  /**< times the requested source ordinal could not be read */
} ovstage_population_export_report_t;

/* ---- Functions ------------------------------------------------------------------------------- */

/** Defaults: explicit predicate, OVER, USD xform ops, DROP unknown metadata, both predicates ALL. */
OVSTAGE_API ovstage_api_status_t ovstage_population_export_desc_init(ovstage_population_export_desc_t* desc);

/** ovstage_population_export_desc_init, then `desc->ordinal = ordinal`. */
OVSTAGE_API ovstage_api_status_t ovstage_population_export_desc_init_snapshot(ovstage_population_export_desc_t* desc,
                                                                              ovstage_ordinal_t ordinal);

/** A typed DEF hierarchy under `*root_path` (borrowed: it must outlive the export or its enqueue). */
static inline ovstage_api_status_t ovstage_population_export_desc_init_typed_hierarchy(
    ovstage_population_export_desc_t* desc, ovstage_ordinal_t ordinal, const ovx_string_t* root_path)
{
    const ovstage_api_status_t status = ovstage_population_export_desc_init_snapshot(desc, ordinal);
    if (status != OVSTAGE_OK)
        return status;
    desc->layer_mode = OVSTAGE_POPULATION_EXPORT_LAYER_MODE_DEF;
    desc->source_api_schema_policy = OVSTAGE_POPULATION_EXPORT_SOURCE_API_SCHEMAS_APPLY_RECORDED;
    desc->projection = OVSTAGE_POPULATION_EXPORT_PROJECTION_SCHEMA_DECLARED;
    desc->prim_predicate = ovstage_population_prim_predicate_is_under_path(root_path, 1);
    return OVSTAGE_OK;
}

/** Creates a destination bound to `stage` (blocking). */
OVSTAGE_API ovstage_api_status_t ovstage_population_export_destination_create(
    ovstage_instance_t* stage, ovx_string_t usd_identifier, ovstage_population_export_destination_mode_t mode,
    ovstage_population_export_destination_handle_t* out_destination);

/** Enqueues creation of a destination; the handle is reserved at once. */
OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_export_destination_enqueue_create(
    ovstage_instance_t* stage, ovx_string_t usd_identifier, ovstage_population_export_destination_mode_t mode,
    ovstage_population_export_destination_handle_t* out_destination);

/** Exports into a destination without saving (blocking); `report` may be NULL. */
OVSTAGE_API ovstage_api_status_t ovstage_population_export_to_destination(
    ovstage_instance_t* stage, ovstage_population_export_destination_handle_t destination,
    const ovstage_population_export_desc_t* desc, ovstage_population_export_report_t* report);

/** Enqueues an export into a destination (the descriptor graph is copied). */
OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_export_enqueue_to_destination(
    ovstage_instance_t* stage, ovstage_population_export_destination_handle_t destination,
    const ovstage_population_export_desc_t* desc);

/** Saves a destination to its identifier (blocking). */
OVSTAGE_API ovstage_api_status_t ovstage_population_export_destination_save(
    ovstage_instance_t* stage, ovstage_population_export_destination_handle_t destination);

/** Enqueues a save of a destination. */
OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_export_destination_enqueue_save(
    ovstage_instance_t* stage, ovstage_population_export_destination_handle_t destination);

/** Destroys a destination without saving (blocking). */
OVSTAGE_API ovstage_api_status_t ovstage_population_export_destination_destroy(
    ovstage_instance_t* stage, ovstage_population_export_destination_handle_t destination);

/** Enqueues destruction of a destination without saving. */
OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_export_destination_enqueue_destroy(
    ovstage_instance_t* stage, ovstage_population_export_destination_handle_t destination);

/** Exports one snapshot to `usd_identifier` (create EMPTY, export, save, destroy; blocking). */
OVSTAGE_API ovstage_api_status_t ovstage_population_export_to_usd_file(ovstage_instance_t* stage,
                                                                       ovx_string_t usd_identifier,
                                                                       const ovstage_population_export_desc_t* desc,
                                                                       ovstage_population_export_report_t* report);

/** Enqueues ovstage_population_export_to_usd_file. */
OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_export_enqueue_to_usd_file(
    ovstage_instance_t* stage, ovx_string_t usd_identifier, const ovstage_population_export_desc_t* desc);

/** Terminal wait of an export op: consumes its result and fills `report` (may be NULL). */
OVSTAGE_API ovstage_api_status_t ovstage_population_export_wait_op(ovstage_instance_t* stage,
                                                                   ovstage_population_op_id_t op_id,
                                                                   ovstage_timeout_ns_t timeout_ns,
                                                                   ovstage_population_export_report_t* report);

#ifdef __cplusplus
}
#endif

#endif /* OVSTAGE_POPULATION_EXPORT_H */
