/* gpu_status.c — ovstage_ext_get_gpu_status (whether this process can keep columns on CUDA devices),
 * ovstage_ext_get_gpu_pool_stats (the device buffer pool of one device) and
 * ovstage_ext_get_gpu_device_info (where a device is served from: workers near it, its poller). */
#include <ovstage/ovstage_ext.h>

#include <string.h>

#include "errors.h"
#include "gpu.h"
#include "runtime.h"

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

OVSTAGE_API ovstage_api_status_t ovstage_ext_get_gpu_device_info(int cuda_device, ovstage_ext_gpu_device_info_t *out)
{
	ovs_err_clear();
	if (!out)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "out is NULL");
	memset(out, 0, sizeof *out);
	ovstage_ext_gpu_pool_stats_t unused;
	char err[256];
	/* the pool's check answers "can this process use the ordinal", with the message */
	ovstage_api_status_t s = ovs_gpu_pool_stats(cuda_device, &unused, err, sizeof err);
	if (s != OVSTAGE_OK)
		return ovs_err_set(s, "%s", err);
	(void)ovs_gpu_pci_bus_id(cuda_device, out->pci_bus_id, sizeof out->pci_bus_id);
	out->near_workers = ovs_runtime_near_workers(out->pci_bus_id, &out->worker_count);
	ovs_gpu_poll_stats(cuda_device, &out->completions, &out->pending);
	return OVSTAGE_OK;
}
