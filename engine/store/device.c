/* device.c — a stage's execution contexts per device (see device.h). */
#include "device.h"

#include "errors.h"
#include "gpu.h"
#include "store.h"

bool ovs_store_exec(ovs_store *st, DLDevice dev, jobs_worker *w, ovs_exec *x, char *err, size_t errlen)
{
	if (dev.device_type != kDLCUDA) {
		*x = ovs_exec_cpu(w);
		return true;
	}
	if (dev.device_id < 0 || dev.device_id >= OVS_STORE_GPUS) {
		ovs_err_format(err, errlen, "CUDA device ordinal %d is out of range (a stage uses ordinals 0..%d)",
			       (int)dev.device_id, OVS_STORE_GPUS - 1);
		return false;
	}
	ovs_gpu *g = ovs_gpu_get(&st->gpu[dev.device_id], st->sched, dev.device_id, err, errlen);
	if (!g)
		return false;
	ovs_gpu_exec(g, x, w);
	return true;
}

bool ovs_store_exec_reuse(ovs_store *st, ovs_exec_last *last, DLDevice dev, jobs_worker *w, ovs_exec *x, char *err,
			  size_t errlen)
{
	if (dev.device_type == kDLCUDA && last->x.gpu && last->x.w == w &&
	    ovs_gpu_device(last->x.gpu) == (int)dev.device_id) {
		*x = last->x;
		return true;
	}
	if (!ovs_store_exec(st, dev, w, x, err, errlen))
		return false;
	if (x->gpu) /* a host context leaves the current device alone */
		last->x = *x;
	return true;
}

void ovs_store_count_device_column(ovs_store *st, DLDevice dev)
{
	/* release: sequenced before the column's first delta is pushed and its op completes; a seal
	 * covering that op starts after the completion and loads this with acquire. */
	if (dev.device_type == kDLCUDA)
		atomic_fetch_add_explicit(&st->device_columns, 1, memory_order_release);
}

bool ovs_store_has_device_columns(ovs_store *st)
{
	/* acquire: pairs with the increment above (through the covered ops' completions) */
	return atomic_load_explicit(&st->device_columns, memory_order_acquire) != 0;
}

void ovs_store_devices_fini(ovs_store *st)
{
	for (int d = 0; d < OVS_STORE_GPUS; d++) {
		/* relaxed: destroy runs after every op of the stage completed (ops_quiesce orders them). */
		ovs_gpu *g = atomic_load_explicit(&st->gpu[d], memory_order_relaxed);
		atomic_store_explicit(&st->gpu[d], NULL, memory_order_relaxed);
		ovs_gpu_destroy(g);
	}
}
