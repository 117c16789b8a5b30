/* gpu_status.c — ovstage_ext_get_gpu_status (whether this process can keep columns on CUDA devices)
 * and ovstage_ext_get_gpu_pool_stats (the device buffer pool of one device). */
#include <ovstage/ovstage_ext.h>

#include "errors.h"
#include "gpu.h"

OVSTAGE_API ovstage_api_status_t ovstage_ext_get_gpu_status(int *device_count, const char **reason)
{
	ovs_err_clear();
	if (!device_count)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "device_count is NULL");
	*device_count = ovs_gpu_device_count();
	if (reason)
		*reason = ovs_gpu_reason();
	return OVSTAGE_OK;
}

OVSTAGE_API ovstage_api_status_t ovstage_ext_get_gpu_pool_stats(int cuda_device, ovstage_ext_gpu_pool_stats_t *out)
{
	ovs_err_clear();
	if (!out)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "out is NULL");
	char err[256];
	ovstage_api_status_t s = ovs_gpu_pool_stats(cuda_device, out, err, sizeof err);
	return s == OVSTAGE_OK ? s : ovs_err_set(s, "%s", err);
}
