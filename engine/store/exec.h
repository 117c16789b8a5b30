/*
 * exec.h — the execution context of engine work (copies, applies, seals), and one parallel for.
 *
 * On the CPU a context carries the worker that runs the op, for fork-join; it is NULL on a thread
 * outside the pool (an op running inline on the caller's thread), and then everything runs serially.
 * A device backend's context also carries the stream its work is issued on and the event recorded
 * when it ends: readers wait on that event before they touch the data (a version's readiness).
 *
 * Thread safety: a context belongs to the thread running the op; it is passed down, never shared.
 */
#ifndef OVSTAGE_ENGINE_EXEC_H
#define OVSTAGE_ENGINE_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "jobs.h"

/* Small device-to-device copies an op has issued but not yet launched (device backends): the
 * backend appends them (ovs_memops.copy_device) and launches them all as one kernel at a flush
 * (ovs_memops.flush), instead of one cudaMemcpyAsync each. The owner of the context keeps the
 * storage and flushes before anything on its stream may read a pending destination, before a
 * pending destination is freed, and before its completion is recorded (docs/gpu.md). */
#define OVS_COPY_BATCH_MAX 128 /* copies per launch: the kernel takes them by value (kernels.h) */

typedef struct ovs_copy_seg {
	void *dst;       /* device lists: memory of the context's device; host lists (copy.h): host memory */
	const void *src; /* memory that device (or the host) can read */
	size_t bytes;    /* > 0; device lists: below the backend's batching threshold */
} ovs_copy_seg;

typedef struct ovs_copy_batch {
	uint32_t n;                            /* pending copies in seg */
	ovs_copy_seg seg[OVS_COPY_BATCH_MAX];  /* in issue order; they run concurrently, so no dst may
	                                        * overlap another pending copy's src or dst */
} ovs_copy_batch;

typedef struct ovs_exec {
	jobs_worker *w; /* the worker running the op (fork-join), or NULL: serial on this thread */
	void *stream;   /* device backends: the stream work is issued on (NULL on the CPU) */
	void *event;    /* device backends: the completion recorded last (NULL on the CPU) */
	struct ovs_gpu *gpu; /* the CUDA backend: the stage's context on the device (NULL on the CPU) */
	int err;        /* device backends: the first error an operation issued on x met (0: none); the
	                 * op that owns x fails with it */
	ovs_copy_batch *batch; /* device backends: where copy_device defers small copies until a flush
	                        * (owned by the op; NULL: copies are issued at once) */
} ovs_exec;

/* A CPU context for worker w (may be NULL). */
static inline ovs_exec ovs_exec_cpu(jobs_worker *w)
{
	return (ovs_exec){ .w = w, .stream = NULL, .event = NULL, .gpu = NULL, .err = 0, .batch = NULL };
}

/* Calls fn(ctx, lo, hi) over disjoint ranges covering [0, n), each at most `grain` long (a larger
 * grain for serial contexts is fine: fn sees one range), with range boundaries multiples of `align`
 * (a power of two; 1 for rows). On a worker the ranges are halves split by fork-join (stealable); the
 * join orders every range's plain stores before the call returns. Serial when x->w is NULL or
 * n <= grain. fn must tolerate running on any worker. */
typedef void (*ovs_range_fn)(void *ctx, size_t lo, size_t hi);
void ovs_parallel_for(const ovs_exec *x, size_t n, size_t grain, size_t align, ovs_range_fn fn, void *ctx);

#endif /* OVSTAGE_ENGINE_EXEC_H */
