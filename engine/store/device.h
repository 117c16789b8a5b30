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
/* Counts a column whose schema was just installed on dev, if dev is a CUDA device (the caller
 * installed it: once per column). Before the column's first delta is pushed. */
void ovs_store_count_device_column(ovs_store *st, DLDevice dev);
/* Whether the stage has a device column that a seal covering writes completed before this call
 * could touch: false means the seal makes no CUDA call. Any thread. */
bool ovs_store_has_device_columns(ovs_store *st);
/* Destroys the stage's device contexts (store fini, after every buffer is released). */
void ovs_store_devices_fini(ovs_store *st);

#endif /* OVSTAGE_ENGINE_DEVICE_H */
