/*
 * api.h — the engine's implementations of the vtable slots (one file per concern:
 * floor.c, query.c, read.c, write.c, delete.c, map.c; ops.c for wait/release).
 * Every slot clears the thread's last error on entry and sets it on a synchronous rejection.
 */
#ifndef OVSTAGE_ENGINE_API_H
#define OVSTAGE_ENGINE_API_H

#include <ovstage/ovstage.h>
#include <ovstage/ovstage_ext.h>

/* floor.c */
ovstage_enqueue_result_t ovs_advance_write_floor(ovstage_context_t *ctx, const ovstage_write_floor_desc_t *desc);
ovstage_enqueue_result_t ovs_get_oldest_preserved_ordinal(ovstage_context_t *ctx,
							   ovstage_ordinal_query_handle_t *out_handle);
ovstage_enqueue_result_t ovs_get_attribute_write_floor(ovstage_context_t *ctx, ovx_string_or_token_t attribute,
							ovstage_ordinal_query_handle_t *out_handle);
ovstage_api_status_t ovs_fetch_ordinal(ovstage_context_t *ctx, ovstage_ordinal_query_handle_t handle,
				       ovstage_timeout_ns_t timeout, ovstage_ordinal_t *out_ordinal);
ovstage_enqueue_result_t ovs_release_ordinal_query(ovstage_context_t *ctx, ovstage_ordinal_query_handle_t handle);

/* query.c */
ovstage_enqueue_result_t ovs_query_filter(ovstage_context_t *ctx, const ovstage_filter_t *filter, const ovx_token_t *attrs,
				   size_t attr_count, ovstage_query_handle_t *out_query_handle);
ovstage_api_status_t ovs_query_from_path_list(ovstage_context_t *ctx, ovx_primpath_list_t path_list,
					      ovstage_query_handle_t *out_handle);
ovstage_api_status_t ovs_fetch_query_result(ovstage_context_t *ctx, ovstage_query_handle_t query_handle,
					    ovstage_timeout_ns_t timeout, ovstage_query_result_t *out_result);
ovstage_api_status_t ovs_release_query_result(ovstage_context_t *ctx, const ovstage_query_result_t *result);
ovstage_enqueue_result_t ovs_release_query(ovstage_context_t *ctx, ovstage_query_handle_t handle);

/* read.c */
ovstage_enqueue_result_t ovs_read_attributes(ovstage_context_t *ctx, ovstage_query_handle_t handle,
					     const ovx_token_t *attrs, size_t attr_count, ovstage_ordinal_range_t range,
					     ovstage_read_handle_t *out_read_handle);
ovstage_api_status_t ovs_fetch_read_next(ovstage_context_t *ctx, ovstage_read_handle_t read_handle,
					 ovstage_timeout_ns_t timeout, ovstage_read_group_t *out_group);
ovstage_api_status_t ovs_release_group(ovstage_context_t *ctx, const ovstage_read_group_t *group);
ovstage_enqueue_result_t ovs_release_read(ovstage_context_t *ctx, ovstage_read_handle_t read_handle);
/* Test hook: when set, a range read calls it after each pin of a column's versions and change sets,
 * before it reads them (on the reading thread), so a test can seal and fold meanwhile. */
typedef void (*ovs_read_range_hook_fn)(void);
void ovs_read_set_range_hook(ovs_read_range_hook_fn fn);

/* write.c */
ovstage_enqueue_result_t ovs_write_attribute(ovstage_context_t *ctx, ovstage_query_handle_t handle,
					     ovx_string_or_token_t attribute, ovstage_ordinal_t ordinal,
					     ovstage_write_data_t data, ovstage_prim_mode_t prim_mode);
ovstage_enqueue_result_t ovs_write_attributes(ovstage_context_t *ctx, ovstage_query_handle_t handle,
					      const ovstage_attribute_write_t *writes, size_t write_count,
					      ovstage_ordinal_t ordinal, ovstage_prim_mode_t prim_mode);

/* delete.c */
ovstage_enqueue_result_t ovs_delete_attributes(ovstage_context_t *ctx, ovstage_query_handle_t handle,
					       const ovx_string_or_token_t *attributes, size_t attribute_count,
					       ovstage_ordinal_t ordinal);

/* map.c */
ovstage_enqueue_result_t ovs_map_attribute(ovstage_context_t *ctx, ovstage_query_handle_t handle,
					   const ovstage_map_desc_t *desc, ovstage_ordinal_t ordinal,
					   const size_t *element_sizes, size_t element_count,
					   ovstage_map_handle_t *out_map_handle);
/* ovstage_ext_map_attribute (flags: OVSTAGE_EXT_MAP_*); flags 0 is ovs_map_attribute. */
ovstage_enqueue_result_t ovs_map_attribute_ext(ovstage_context_t *ctx, ovstage_query_handle_t handle,
					       const ovstage_map_desc_t *desc, ovstage_ordinal_t ordinal,
					       const size_t *element_sizes, size_t element_count,
					       ovstage_ext_map_flags_t flags, ovstage_map_handle_t *out_map_handle);
ovstage_api_status_t ovs_fetch_map_next(ovstage_context_t *ctx, ovstage_map_handle_t map_handle,
					ovstage_timeout_ns_t timeout, ovstage_map_group_t *out_group);
ovstage_enqueue_result_t ovs_unmap_group(ovstage_context_t *ctx, ovstage_map_handle_t map_handle,
					 const ovstage_map_group_t *group, ovstage_cuda_sync_t write_done_sync);
ovstage_enqueue_result_t ovs_unmap_attribute(ovstage_context_t *ctx, ovstage_map_handle_t map_handle,
					     ovstage_cuda_sync_t write_done_sync);

/* clone.c (exported as ovstage_clone) */
ovstage_enqueue_result_t ovs_clone(ovstage_instance_t *instance, ovx_string_t source_path,
				   const ovx_string_t *target_paths, size_t num_target_paths, ovstage_ordinal_t ordinal);

#endif /* OVSTAGE_ENGINE_API_H */
