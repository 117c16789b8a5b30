/*
 * ovstage/ovstage_population.h — populating a stage instance from USD (files or inline USDA).
 *
 * Contract:
 *  - Population has its own asynchronous model: one FIFO worker per instance, its own op id space
 *    (ovstage_population_op_id_t) and its own wait, ovstage_population_wait_op, which fences every
 *    population op up to the id. Population ops need no release.
 *  - Entry points that carry an ordinal write through the normal write path: the ordinal must be
 *    above the effective write floor when the op executes (a new instance's first population uses
 *    an ordinal of at least 1).
 *  - Descriptions, selectors and predicate graphs are copied when an op is enqueued.
 *  - Error details are thread-local (ovstage_population_get_last_error / _get_last_op_error).
 *  - This implementation is built without OpenUSD: the functions exist so that code written
 *    against the reference API compiles and links, and report OVSTAGE_ERROR_NOT_SUPPORTED.
 */
#ifndef OVSTAGE_POPULATION_H
#define OVSTAGE_POPULATION_H

#include "ovstage_api/ovstage_api.h"
#include "ovstage_population_predicate.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Built-in population domains; a bitmask carried as `uint32_t domains`. */
typedef enum
{
    OVSTAGE_POPULATION_DOMAIN_NONE = 0u,           /* nothing */
    OVSTAGE_POPULATION_DOMAIN_RENDERING = 1u << 0, /* meshes, lights, materials, cameras */
    OVSTAGE_POPULATION_DOMAIN_PHYSICS = 1u << 1,   /* colliders, bodies, joints, articulations and their schema data */
    OVSTAGE_POPULATION_DOMAIN_ALL = OVSTAGE_POPULATION_DOMAIN_RENDERING | OVSTAGE_POPULATION_DOMAIN_PHYSICS,
} ovstage_population_domain_t;

/** One selector: which prims, which of their properties and which metadata are populated. */
typedef struct ovstage_population_selector_t
{
    ovstage_population_prim_predicate_t prim_predicate;         /**< prims this selector populates */
    ovstage_population_property_predicate_t property_predicate; /**< properties of those prims it populates */
    const ovx_string_t* prim_metadata_paths;      /**< prim metadata paths (field[:key...]), populated as usd-metadata:<path> */
    size_t prim_metadata_path_count;              /**< number of prim metadata paths */
    const ovx_string_t* property_metadata_paths;  /**< property metadata paths, populated as <property>:usd-metadata:<path> */
    size_t property_metadata_path_count;          /**< number of property metadata paths */
} ovstage_population_selector_t;

/** What to populate; zero-initialize, then fill. Several descs compose (domains OR-ed, selectors in order). */
typedef struct ovstage_population_desc_t
{
    uint32_t domains;                               /**< OR of ovstage_population_domain_t */
    const ovstage_population_selector_t* selectors; /**< selectors, or NULL */
    size_t selector_count;                          /**< number of selectors */
    const ovx_string_t* stage_metadata_paths;       /**< stage metadata paths, populated onto the root prim "/" */
    size_t stage_metadata_path_count;               /**< number of stage metadata paths */
} ovstage_population_desc_t;

/** Id of an enqueued population op; 0 is never live. */
typedef uint64_t ovstage_population_op_id_t;
#define OVSTAGE_POPULATION_INVALID_OP_ID ((ovstage_population_op_id_t)0)

/** Handle of a USD reference added by ovstage_population_add_usd_reference_*; 0 is never live. */
typedef uint64_t ovstage_population_usd_reference_handle_t;
#define OVSTAGE_POPULATION_INVALID_USD_REFERENCE_HANDLE ((ovstage_population_usd_reference_handle_t)0)

/** What every population enqueue returns. */
typedef struct ovstage_population_enqueue_result_t
{
    ovstage_api_status_t status;         /**< OVSTAGE_OK = accepted; otherwise rejected */
    ovstage_population_op_id_t op_index; /**< id of the accepted op; OVSTAGE_POPULATION_INVALID_OP_ID when rejected */
} ovstage_population_enqueue_result_t;

/** Output of ovstage_population_wait_op. */
typedef struct ovstage_population_op_wait_result_t
{
    const ovstage_population_op_id_t* error_op_ids; /**< ops of the waited range that failed (thread-local; each reported once) */
    size_t error_op_id_count;                       /**< number of entries in error_op_ids */
    ovstage_population_op_id_t lowest_pending_op_id; /**< on timeout, the lowest op still pending */
} ovstage_population_op_wait_result_t;

/** The usd-prim-type value of prims that have no USD type: "__ovstage_population_untyped__". */
static inline ovx_string_t ovstage_population_untyped_type_name(void)
{
    static const char name[] = "__ovstage_population_untyped__";
    ovx_string_t s;
    s.ptr = name;
    s.length = sizeof(name) - 1;
    return s;
}

/** Registers USD schema plug-in descriptors (process-wide, irreversible; call before reading USD). */
OVSTAGE_API ovstage_api_status_t ovstage_population_register_usd_schemas(const ovx_string_t* paths,
                                                                         size_t path_count);

/** Replaces the loaded USD with the file at `path` and populates `domains` at `ordinal`, `time` seconds. */
OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_open_usd_from_file(ovstage_instance_t* stage,
                                                                                      ovx_string_t path,
                                                                                      ovstage_ordinal_t ordinal,
                                                                                      double time, uint32_t domains);

/** As ovstage_population_open_usd_from_file, with USDA text instead of a file. */
OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_open_usd_from_string(ovstage_instance_t* stage,
                                                                                        ovx_string_t usda,
                                                                                        ovstage_ordinal_t ordinal,
                                                                                        double time, uint32_t domains);

/** As ovstage_population_open_usd_from_file, selecting what to populate with descriptions. */
OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_open_usd_from_file_with_desc(
    ovstage_instance_t* stage, ovx_string_t path, ovstage_ordinal_t ordinal, double time,
    const ovstage_population_desc_t* descs, size_t desc_count);

/** As ovstage_population_open_usd_from_string, selecting what to populate with descriptions. */
OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_open_usd_from_string_with_desc(
    ovstage_instance_t* stage, ovx_string_t usda, ovstage_ordinal_t ordinal, double time,
    const ovstage_population_desc_t* descs, size_t desc_count);

/** Adds a USD file as a reference at `target_path` (USD source only; apply_usd_changes propagates it). */
OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_add_usd_reference_from_file(
    ovstage_instance_t* stage, ovx_string_t ref_file_path, ovx_string_t target_path,
    ovstage_population_usd_reference_handle_t* out_handle);

/** As ovstage_population_add_usd_reference_from_file, with USDA text. */
OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_add_usd_reference_from_string(
    ovstage_instance_t* stage, ovx_string_t ref_str, ovx_string_t target_path,
    ovstage_population_usd_reference_handle_t* out_handle);

/** Undoes exactly one add_usd_reference (USD source only). */
OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_remove_usd_reference(
    ovstage_instance_t* stage, ovstage_population_usd_reference_handle_t handle);

/** Clears the USD source (USD source only). */
OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_reset_usd(ovstage_instance_t* stage);

/** Resamples time-varying values at `time` seconds, writing at `ordinal`. */
OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_apply_usd_time(ovstage_instance_t* stage,
                                                                                  ovstage_ordinal_t ordinal,
                                                                                  double time);

/** Propagates accumulated USD edits at `ordinal` (removals become tombstones). */
OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_apply_usd_changes(ovstage_instance_t* stage,
                                                                                     ovstage_ordinal_t ordinal);

/** Waits for every population op up to `op_id`; `out_wait_result` may be NULL. */
OVSTAGE_API ovstage_api_status_t ovstage_population_wait_op(ovstage_instance_t* stage,
                                                            ovstage_population_op_id_t op_id,
                                                            ovstage_timeout_ns_t timeout_ns,
                                                            ovstage_population_op_wait_result_t* out_wait_result);

/** Thread-local detail of the latest population failure on this thread; {NULL, 0} if none. */
OVSTAGE_API ovx_string_t ovstage_population_get_last_error(void);

/** Message of an op reported failed by this thread's last ovstage_population_wait_op; {NULL, 0} if unknown. */
OVSTAGE_API ovx_string_t ovstage_population_get_last_op_error(ovstage_population_op_id_t op_id);

#ifdef __cplusplus
}
#endif

#endif /* OVSTAGE_POPULATION_H */
