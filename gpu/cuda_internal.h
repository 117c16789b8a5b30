/*
 * cuda_internal.h — what the backend's C files share (not seen by the engine): the per-device process
 * state and the stage context's layout.
 */
#ifndef OVSTAGE_GPU_CUDA_INTERNAL_H
#define OVSTAGE_GPU_CUDA_INTERNAL_H

#include <stdatomic.h>

#include <cuda_runtime_api.h>

#include "gpu.h"

#define OVS_GPU_MAX_DEVICES 64

/* The process state of one device (created once, at its first use). */
typedef struct gpu_device_state {
	cudaMemPool_t pool;   /* column memory (NULL: the device cannot be used; a message was set) */
	cudaStream_t fence;   /* fence snapshots */
} gpu_device_state;

gpu_device_state ovs_gpu_device_state(int dev, char *err, size_t errlen);
int64_t ovs_gpu_pool_mb(void);

/* A stage's context on one device. */
struct ovs_gpu {
	int dev;                    /* CUDA ordinal */
	cudaStream_t stream;        /* the engine stream (blocking: ordered with the legacy stream) */
	cudaMemPool_t pool;         /* the device's pool */
	jobs_sched *sched;          /* where completions resolve receipts */
	_Atomic int64_t pending;    /* completions not yet processed (destroy waits for zero) */
};

#endif /* OVSTAGE_GPU_CUDA_INTERNAL_H */
