/*
 * map.c — zero-copy map/unmap write sessions. Not in this build yet: every entry point validates its
 * arguments and returns OVSTAGE_ERROR_NOT_SUPPORTED with a message (the handle outputs stay invalid),
 * so programs written against the anchor compile and fail cleanly.
 */
#include "api.h"
#include "errors.h"

ovstage_enqueue_result_t ovs_map_attribute(ovstage_context_t *ctx, ovstage_query_handle_t handle,
					   const ovstage_map_desc_t *desc, ovstage_ordinal_t ordinal,
					   const size_t *element_sizes, size_t element_count,
					   ovstage_map_handle_t *out_map_handle)
{
	ovs_err_clear();
	(void)handle;
	(void)desc;
	(void)ordinal;
	(void)element_sizes;
	(void)element_count;
	if (out_map_handle)
		*out_map_handle = OVSTAGE_INVALID_MAP_HANDLE;
	if (!ctx || !out_map_handle)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s is NULL",
						!ctx ? "instance" : "out_map_handle"));
	return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_NOT_SUPPORTED,
					"map_attribute is not implemented yet in this build; use write_attribute"));
}

ovstage_api_status_t ovs_fetch_map_next(ovstage_context_t *ctx, ovstage_map_handle_t map_handle,
					ovstage_timeout_ns_t timeout, ovstage_map_group_t *out_group)
{
	ovs_err_clear();
	(void)ctx;
	(void)timeout;
	(void)out_group;
	return ovs_err_set(OVSTAGE_ERROR_INVALID_HANDLE, "map handle %llu is not live (maps are not supported yet)",
			   (unsigned long long)map_handle);
}

ovstage_enqueue_result_t ovs_unmap_group(ovstage_context_t *ctx, ovstage_map_handle_t map_handle,
					 const ovstage_map_group_t *group, ovstage_cuda_sync_t write_done_sync)
{
	ovs_err_clear();
	(void)ctx;
	(void)group;
	(void)write_done_sync;
	return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_HANDLE,
					"map handle %llu is not live (maps are not supported yet)",
					(unsigned long long)map_handle));
}

ovstage_enqueue_result_t ovs_unmap_attribute(ovstage_context_t *ctx, ovstage_map_handle_t map_handle,
					     ovstage_cuda_sync_t write_done_sync)
{
	ovs_err_clear();
	(void)ctx;
	(void)write_done_sync;
	return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_HANDLE,
					"map handle %llu is not live (maps are not supported yet)",
					(unsigned long long)map_handle));
}
