/* gpu_status.c — ovstage_ext_get_gpu_status: whether this process can keep columns on CUDA devices. */
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
