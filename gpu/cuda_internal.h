/*
 * cuda_internal.h — what the backend's C files share (not seen by the engine): the per-device process
 * state and the stage context's layout.
 */
#ifndef OVSTAGE_GPU_CUDA_INTERNAL_H
#define OVSTAGE_GPU_CUDA_INTERNAL_H

#include <stdatomic.h>

#include <cuda_runtime_api.h>

#include "block_cache.h"
#include "gpu.h"
#include "trace.h"

/* Trace spans (cat "gpu", jobs/trace.h) around the backend's CUDA calls, so that a trace shows which
 * call a host thread spent its time in: t = ovs_gpu_span_begin(); ...; ovs_gpu_span_end("name", t).
 * Off (no OVSTAGE_TRACE): a relaxed load and a branch at the begin, a branch at the end. name must
 * be a string literal. */
static inline uint64_t ovs_gpu_span_begin(void)
{
	return jobs_trace_on() ? jobs_trace_now() : 0;
}

static inline void ovs_gpu_span_end(const char *name, uint64_t t0)
{
	if (t0)
		jobs_trace_span("gpu", name, t0, jobs_trace_now(), 0);
}

#define OVS_GPU_MAX_DEVICES 64

/* The process state of one device (created once, at its first use). */
typedef struct gpu_device_state {
	cudaMemPool_t pool;   /* column memory (NULL: the device cannot be used; a message was set) */
	cudaStream_t fence;   /* fence snapshots */
	ovs_block_budget *budget; /* what the device's caches may retain (shared by its stage contexts) */
} gpu_device_state;

gpu_device_state ovs_gpu_device_state(int dev, char *err, size_t errlen);
int64_t ovs_gpu_pool_mb(void);

/* A pooled event of one device (cuda_events.c). The engine holds them as `void *` (gpu.h); users see
 * only the cudaEvent_t (ovs_gpu_event_handle). */
typedef struct ovs_gpu_event {
	cudaEvent_t ev;              /* a disable-timing event of device `dev` */
	int dev;                     /* whose pool it returns to */
	_Atomic uint32_t refs;       /* holders (ovs_gpu_event_ref); back to the pool at zero */
	struct ovs_gpu_event *next;  /* pool link while free */
} ovs_gpu_event;

/* An event of device dev from its pool (created with dev current if the pool is empty), or NULL. */
ovs_gpu_event *ovs_gpu_event_take(int dev);
/* Back to its pool, whatever its count (NULL: nothing). Safe while a record or a wait on it is
 * pending. Reference holders use ovs_gpu_event_release (gpu.h) instead. */
void ovs_gpu_event_give(ovs_gpu_event *e);
/* A pooled event of device dev recorded on stream s (a stream of dev), or NULL. */
ovs_gpu_event *ovs_gpu_event_record(int dev, cudaStream_t s);

/* Launches x->batch's pending copies (cuda_memops.c; the memops table's flush). Every function that
 * records, waits for or synchronises "the work issued on x so far" calls it first, so deferred
 * copies are part of that work. */
void ovs_cuda_batch_flush(struct ovs_exec *x);

/* A stage's context on one device. */
struct ovs_gpu {
	int dev;                    /* CUDA ordinal */
	cudaStream_t stream;        /* the engine stream (blocking: ordered with the legacy stream) */
	cudaMemPool_t pool;         /* the device's CUDA pool (below the cache) */
	ovs_block_cache cache;      /* free blocks of this context, reused in engine-stream order */
	jobs_sched *sched;          /* where completions resolve receipts */
	_Atomic int64_t pending;    /* completions not yet processed (destroy waits for zero) */
};

#endif /* OVSTAGE_GPU_CUDA_INTERNAL_H */
