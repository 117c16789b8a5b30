/*
 * ovstage/ovstage.h — the ovstage entry header: process lifecycle, configuration, logging,
 * instance creation, clone and hierarchy; it also brings in the data-plane API (vtable and
 * wrappers), instancing and USD population.
 *
 * Contract:
 *  - Process state is reference counted: ovstage_initialize acquires one reference (optional;
 *    instance creation acquires one on demand) and ovstage_shutdown releases one.
 *  - Synchronous functions return a status and are complete on return; the *_enqueue style
 *    functions (clone, get_hierarchy, release_hierarchy, compute_hierarchy) return an
 *    ovstage_enqueue_result_t whose op must be waited and released like any vtable op.
 *  - Failures record a thread-local detail readable with ovstage_get_last_error().
 *  - Destroying an instance requires every op, handle and payload of it to be released first, and
 *    must not race with any other use of the instance.
 */
#ifndef OVSTAGE_H
#define OVSTAGE_H

#include "ovstage_api/ovstage_api.h"
#include "ovstage_config.h"
#include "ovstage_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Lifecycle and logging ------------------------------------------------------------------- */

/** Acquires one reference on process state (set up on 0 -> 1) and validates `config` (NULL = defaults). */
OVSTAGE_API ovstage_api_status_t ovstage_initialize(const ovstage_config_t* config);

/** Releases one reference on process state; torn down at the last one. */
OVSTAGE_API ovstage_api_status_t ovstage_shutdown(void);

/** Installs the process-wide log callback (NULL flushes, then disables); `channel_filter` may be NULL. */
OVSTAGE_API ovstage_api_status_t ovstage_set_log_callback(ovstage_log_severity_t severity,
                                                          const ovx_string_t* channel_filter,
                                                          ovstage_log_callback_t callback, void* user_data);

/** Waits until every message emitted before the call has been delivered. */
OVSTAGE_API ovstage_api_status_t ovstage_flush_log(ovstage_timeout_ns_t timeout);

/** Creates a stage instance. */
OVSTAGE_API ovstage_api_status_t ovstage_create_instance(const ovstage_instance_desc_t* desc,
                                                         ovstage_instance_t** out_instance);

/** Destroys a stage instance; NULL is a no-op. */
OVSTAGE_API ovstage_api_status_t ovstage_destroy_instance(ovstage_instance_t* instance);

/** Temporary: id of the USD stage associated with the instance, if any. */
OVSTAGE_API ovstage_api_status_t ovstage_get_usd_stage_id(ovstage_instance_t* instance, uint64_t* out_usd_stage_id);

/* ---- Clone ----------------------------------------------------------------------------------- */

/** Copies the subtree under `source_path` to each target path (all or nothing), at `ordinal`. */
OVSTAGE_API ovstage_enqueue_result_t ovstage_clone(ovstage_instance_t* instance, ovx_string_t source_path,
                                                   const ovx_string_t* target_paths, size_t num_target_paths,
                                                   ovstage_ordinal_t ordinal);

/* ---- Hierarchy ------------------------------------------------------------------------------- */

/** Looks up a relation of each prim of `prim_paths` (the list is copied at enqueue). */
OVSTAGE_API ovstage_enqueue_result_t ovstage_get_hierarchy(ovstage_instance_t* instance,
                                                           ovx_primpath_list_t prim_paths, ovstage_ordinal_t ordinal,
                                                           ovstage_hierarchy_relation_t relation,
                                                           ovstage_hierarchy_handle_t* out_hierarchy_handle);

/** Non-blocking fetch of a lookup result: OVSTAGE_OK, OVSTAGE_ERROR_TIMEOUT or OVSTAGE_ERROR_OP_FAILED. */
OVSTAGE_API ovstage_api_status_t ovstage_fetch_hierarchy_result(ovstage_instance_t* instance,
                                                                ovstage_hierarchy_handle_t hierarchy_handle,
                                                                ovstage_hierarchy_result_t* out_result);

/** Releases a fetched lookup result. */
OVSTAGE_API ovstage_api_status_t ovstage_release_hierarchy_result(ovstage_instance_t* instance,
                                                                  const ovstage_hierarchy_result_t* result);

/** Releases a lookup handle (ordered after the handle's in-flight ops). */
OVSTAGE_API ovstage_enqueue_result_t ovstage_release_hierarchy(ovstage_instance_t* instance,
                                                               ovstage_hierarchy_handle_t handle);

/** The available computation models (implementation-owned, valid for the instance's lifetime). */
OVSTAGE_API ovstage_api_status_t ovstage_get_hierarchy_computation_models(
    ovstage_instance_t* instance, const ovstage_hierarchy_computation_model_desc_t** out_models,
    size_t* out_model_count);

/** Recomputes hierarchy-derived data from inputs at `input_ordinal`, stamping `output_ordinal`. */
OVSTAGE_API ovstage_enqueue_result_t ovstage_compute_hierarchy(
    ovstage_instance_t* instance, ovstage_hierarchy_computation_model_id_t computation_model_id,
    ovstage_ordinal_t input_ordinal, ovstage_ordinal_t output_ordinal);

#ifdef __cplusplus
}
#endif

#include "ovstage_instancing.h"
#include "ovstage_population.h"

#endif /* OVSTAGE_H */
