/*
 * ovstage/ovstage_api/ovstage_api.h — the stage instance function table.
 *
 * Contract: the slot order of ovstage_vtable_t is ABI (other libraries bind to it); slots are only
 * ever appended. Every slot takes the instance context first and is thread-safe on a shared
 * instance. Enqueue slots return at once with an ovstage_enqueue_result_t; synchronous slots return
 * a status and are complete on return. Call the slots through the static inline ovstage_<slot>
 * wrappers of ovstage_api_utils.h (included at the end of this header).
 */
#ifndef OVSTAGE_API_H
#define OVSTAGE_API_H

#include "ovstage_api_types.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ovstage_vtable_t
{
    /* 1 */ ovstage_api_status_t (*wait_op)(ovstage_context_t* instance, ovstage_op_id_t op_id,
                                            ovstage_timeout_ns_t timeout, ovstage_op_wait_result_t* out_wait_result);
    /* 2 */ ovstage_api_status_t (*release_op)(ovstage_context_t* instance, ovstage_op_id_t op_id);
    /* 3 */ ovstage_enqueue_result_t (*advance_write_floor)(ovstage_context_t* instance,
                                                            const ovstage_write_floor_desc_t* desc);
    /* 4 */ ovstage_enqueue_result_t (*get_oldest_preserved_ordinal)(ovstage_context_t* instance,
                                                                     ovstage_ordinal_query_handle_t* out_handle);
    /* 5 */ ovstage_enqueue_result_t (*get_attribute_write_floor)(ovstage_context_t* instance,
                                                                  ovx_string_or_token_t attribute,
                                                                  ovstage_ordinal_query_handle_t* out_handle);
    /* 6 */ ovstage_api_status_t (*fetch_ordinal)(ovstage_context_t* instance, ovstage_ordinal_query_handle_t handle,
                                                  ovstage_timeout_ns_t timeout, ovstage_ordinal_t* out_ordinal);
    /* 7 */ ovstage_enqueue_result_t (*release_ordinal_query)(ovstage_context_t* instance,
                                                              ovstage_ordinal_query_handle_t handle);
    /* 8 */ ovstage_enqueue_result_t (*query)(ovstage_context_t* instance, const ovstage_filter_t* filter,
                                              const ovx_token_t* attrs, size_t attr_count,
                                              ovstage_query_handle_t* out_query_handle);
    /* 9 */ ovstage_api_status_t (*query_from_path_list)(ovstage_context_t* instance, ovx_primpath_list_t path_list,
                                                         ovstage_query_handle_t* out_handle);
    /* 10 */ ovstage_api_status_t (*fetch_query_result)(ovstage_context_t* instance, ovstage_query_handle_t query_handle,
                                                        ovstage_timeout_ns_t timeout, ovstage_query_result_t* out_result);
    /* 11 */ ovstage_api_status_t (*release_query_result)(ovstage_context_t* instance,
                                                          const ovstage_query_result_t* result);
    /* 12 */ ovstage_enqueue_result_t (*release_query)(ovstage_context_t* instance, ovstage_query_handle_t handle);
    /* 13 */ ovstage_enqueue_result_t (*read_attributes)(ovstage_context_t* instance, ovstage_query_handle_t handle,
                                                         const ovx_token_t* attrs, size_t attr_count,
                                                         ovstage_ordinal_range_t range,
                                                         ovstage_read_handle_t* out_read_handle);
    /* 14 */ ovstage_api_status_t (*fetch_read_next)(ovstage_context_t* instance, ovstage_read_handle_t read_handle,
                                                     ovstage_timeout_ns_t timeout, ovstage_read_group_t* out_group);
    /* 15 */ ovstage_api_status_t (*release_group)(ovstage_context_t* instance, const ovstage_read_group_t* group);
    /* 16 */ ovstage_enqueue_result_t (*release_read)(ovstage_context_t* instance, ovstage_read_handle_t read_handle);
    /* 17 */ ovstage_enqueue_result_t (*write_attribute)(ovstage_context_t* instance, ovstage_query_handle_t handle,
                                                         ovx_string_or_token_t attribute, ovstage_ordinal_t ordinal,
                                                         ovstage_write_data_t data, ovstage_prim_mode_t prim_mode);
    /* 18 */ ovstage_enqueue_result_t (*map_attribute)(ovstage_context_t* instance, ovstage_query_handle_t handle,
                                                       const ovstage_map_desc_t* desc, ovstage_ordinal_t ordinal,
                                                       const size_t* element_sizes, size_t element_count,
                                                       ovstage_map_handle_t* out_map_handle);
    /* 19 */ ovstage_api_status_t (*fetch_map_next)(ovstage_context_t* instance, ovstage_map_handle_t map_handle,
                                                    ovstage_timeout_ns_t timeout, ovstage_map_group_t* out_group);
    /* 20 */ ovstage_enqueue_result_t (*unmap_group)(ovstage_context_t* instance, ovstage_map_handle_t map_handle,
                                                     const ovstage_map_group_t* group,
                                                     ovstage_cuda_sync_t write_done_sync);
    /* 21 */ ovstage_enqueue_result_t (*unmap_attribute)(ovstage_context_t* instance, ovstage_map_handle_t map_handle,
                                                         ovstage_cuda_sync_t write_done_sync);
    /* 22 */ ovstage_enqueue_result_t (*delete_attributes)(ovstage_context_t* instance, ovstage_query_handle_t handle,
                                                           const ovx_string_or_token_t* attributes,
                                                           size_t attribute_count, ovstage_ordinal_t ordinal);
    /* 23 */ void (*get_version)(ovstage_context_t* instance, uint32_t* out_major, uint32_t* out_minor,
                                 uint32_t* out_patch);
    /* 24 */ const char* (*get_error_string)(ovstage_context_t* instance, ovstage_api_status_t error);
    /* 25 */ ovx_string_t (*get_last_op_error)(ovstage_context_t* instance, ovstage_op_id_t op_id);
    /* 26 */ path_dictionary_instance_t* (*get_path_dictionary)(ovstage_context_t* instance);
    /* 27 */ ovstage_enqueue_result_t (*write_attributes)(ovstage_context_t* instance, ovstage_query_handle_t handle,
                                                          const ovstage_attribute_write_t* writes, size_t write_count,
                                                          ovstage_ordinal_t ordinal, ovstage_prim_mode_t prim_mode);
    /* 28 */ ovstage_api_status_t (*query_extension)(ovstage_context_t* instance, const char* name,
                                                     const void** out_extension);
};

/**
 * Detail of the latest synchronous failure on the calling thread (any instance, including a failed
 * ovstage_create_instance). Valid until the thread's next API call; {NULL, 0} when there is none.
 */
OVSTAGE_API ovx_string_t ovstage_get_last_error(void);

#ifdef __cplusplus
}
#endif

#include "ovstage_api_utils.h"

#endif /* OVSTAGE_API_H */
