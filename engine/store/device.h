/*
 * device.h — where a stage's work on a device is issued: the execution context for a column's device
 * (the host's, or the stage's engine stream on a CUDA device, created at first use).
 *
 * Thread safety: any thread; a device's context is created once (gpu.h).
 */
#ifndef OVSTAGE_ENGINE_DEVICE_H
#define OVSTAGE_ENGINE_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include <ovstage/ovstage.h>

#include "exec.h"

typedef struct ovs_store ovs_store;

/* *x = the context for work on `dev` by worker w (NULL: the calling thread). False with a message
 * (INVALID_ARGUMENT-worthy: naming the device) when dev cannot be used. */
bool ovs_store_exec(ovs_store *st, DLDevice dev, jobs_worker *w, ovs_exec *x, char *err, size_t errlen);

/* The device context a thread made last in a sequence of work (a seal's columns, a write's
 * entries), so that the next one on the same device costs nothing: making one calls cudaGetDevice
 * (~0.1 us), 100 times per step for 100 device columns. Zero-initialise it (no context yet); one
 * thread uses it, and every device context of the sequence must come through it, so that its
 * device is the one current on the thread. */
typedef struct ovs_exec_last {
	ovs_exec x; /* that context as it was made (x.gpu NULL: none yet); its device is current */
} ovs_exec_last;

/* ovs_store_exec through `last`: a device context of the device `last` holds is given again (with
 * no event, error or batch, as made), without a CUDA call; any other is made and, when it is a
 * device context, remembered. */
bool ovs_store_exec_reuse(ovs_store *st, ovs_exec_last *last, DLDevice dev, jobs_worker *w, ovs_exec *x, char *err,
			  size_t errlen);
/* Counts a column whose schema was just installed on dev, if dev is a CUDA device (the caller
 * installed it: once per column). Before the column's first delta is pushed. */
void ovs_store_count_device_column(ovs_store *st, DLDevice dev);
/* Whether the stage has a device column that a seal covering writes completed before this call
 * could touch: false means the seal makes no CUDA call. Any thread. */
bool ovs_store_has_device_columns(ovs_store *st);
/* Destroys the stage's device contexts (store fini, after every buffer is released). */
void ovs_store_devices_fini(ovs_store *st);

#endif /* OVSTAGE_ENGINE_DEVICE_H */
