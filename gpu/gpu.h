/*
 * gpu.h — the CUDA backend's contract with the engine: which devices exist, the column memory of a
 * device (an ovs_memops table), the engine stream of a stage on a device, fences that turn a
 * producer's CUDA work into a dependency, and completions that resolve an op's receipt when the GPU
 * work it issued has finished.
 *
 * Contract
 *  - Availability is decided once per process, at the first call that needs it: the backend is
 *    compiled in (nvcc was found at build time), CPU-only mode is off (OVSTAGE_DISABLE_GPU in the
 *    environment wins over the OVSTAGE_CONFIG_EXT_DISABLE_GPU entry), and the CUDA runtime reports at
 *    least one device. No driver, no device or a disabled GPU all mean: CPU-only, with a reason
 *    (ovs_gpu_reason) that errors quote. Nothing else in this header may be called then.
 *  - One *engine stream* per (stage, device): a blocking stream of the device's primary context, so
 *    that a consumer on the legacy default stream of that context is ordered after work already
 *    enqueued on it (seed 003). Every copy, kernel, allocation and free the stage issues on that
 *    device goes to it, so stream order alone makes buffer reuse safe; readers on other streams wait
 *    on the version's ready event.
 *  - Device memory (column buffers and the kernels' uploads) comes from the context's block cache
 *    (block_cache.h: size classes, reused in engine-stream order, so a freed block is reusable at
 *    once) in front of one cudaMemPool per device (stream-ordered allocation and free on the engine
 *    stream, release threshold 0). What the caches of a device retain is bounded by
 *    OVSTAGE_GPU_POOL_MB (default 256; <= 0 turns the cache off); CUDA's pool keeps nothing past a
 *    synchronisation, so the bound holds for the device.
 *  - Fences are captured on the calling thread inside the API call (handles 1 and 2 resolve against
 *    the caller's current context there, never on a worker): a snapshot of the user's stream and
 *    event, waited on later by the engine stream with no host wait.
 *  - Completions: ovs_gpu_complete_after records an event after the work issued so far and defers
 *    the running job's receipt; a poll hook on the job system (idle workers, or waiters of a 0-worker
 *    pool) queries the events in order and completes the receipts. CUDA's callback thread never runs
 *    engine code.
 *
 * Thread safety: every function may be called from any thread. The per-stage context is created
 * once under a mutex (first use); each device has its own completion poller: a lock-free push stack
 * drained by one thread at a time, so devices are polled independently and in parallel.
 */
#ifndef OVSTAGE_GPU_H
#define OVSTAGE_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ovstage/ovstage.h>
#include <ovstage/ovstage_ext.h>

#include "jobs.h"

struct ovs_exec;
struct ovs_memops;
struct ovs_buffer;
typedef struct ovs_gpu ovs_gpu;

/* Process-wide settings, applied before the first availability check (runtime.c sets them from its
 * configuration; later calls are ignored once the decision is made). */
void ovs_gpu_configure(bool disable, int64_t pool_mb);

/* Whether device columns can be used in this process (decided once). */
bool ovs_gpu_available(void);
/* Why not, for messages ("the CUDA backend is not built in", "CPU-only mode (OVSTAGE_DISABLE_GPU)",
 * "no CUDA driver", "no CUDA device"); "" when available. */
const char *ovs_gpu_reason(void);
/* CUDA devices visible to the process (0 when unavailable). */
int ovs_gpu_device_count(void);

/* The memory operations of CUDA device memory. */
const struct ovs_memops *ovs_gpu_memops(void);

/* The stage's context for device `dev` (created at first use: stream, pool access), or NULL with a
 * message when it cannot be made. `slot` is the stage's pointer for the device; `sched` is where its
 * completions resolve receipts. */
ovs_gpu *ovs_gpu_get(ovs_gpu *_Atomic *slot, jobs_sched *sched, int dev, char *err, size_t errlen);
/* Destroys a context after draining its stream and its completions (stage destroy). */
void ovs_gpu_destroy(ovs_gpu *g);
/* The execution context of work issued on g's engine stream by worker w. */
void ovs_gpu_exec(ovs_gpu *g, struct ovs_exec *x, jobs_worker *w);
int ovs_gpu_device(const ovs_gpu *g);

/* Device memory of at least `bytes` on g's device, for work on its engine stream (a cached block or
 * a stream-ordered allocation); NULL when out of memory. Freed with ovs_gpu_free, given the same
 * `bytes`, once the work that uses it has been issued (stream order keeps it alive until it ran). */
void *ovs_gpu_alloc(ovs_gpu *g, size_t bytes);
void ovs_gpu_free(ovs_gpu *g, void *p, size_t bytes);
/* Memory from ovs_gpu_alloc kept for g's next allocation of the same size outside its cache (a
 * column's handoff slot): counted against the device's retained bound while kept. retain: false
 * when the bound has no room (do not keep it). unretain when it leaves the slot; `reused`: it serves
 * an allocation (counted as a pool hit). The reuse is stream-ordered as a cache hit is: it must be
 * used on g's engine stream, after every earlier user issued its work there. */
bool ovs_gpu_retain(ovs_gpu *g, size_t bytes);
void ovs_gpu_unretain(ovs_gpu *g, size_t bytes, bool reused);
/* The device pool's figures of CUDA device `dev` (ovstage_ext.h); zeros before the device's first
 * use. INVALID_ARGUMENT with a message for an ordinal that cannot be used. */
ovstage_api_status_t ovs_gpu_pool_stats(int dev, ovstage_ext_gpu_pool_stats_t *out, char *err, size_t errlen);

/* ---- fences ---------------------------------------------------------------------------------------
 * A fence is an event recorded on a backend stream after everything `sync` names had been enqueued
 * at the time of the call: `stream` (1 = legacy default, 2 = per-thread default of the caller, > 2 a
 * cudaStream_t) drained, `wait_event` waited on. {0, 0}: *out = NULL. Returns OVSTAGE_OK or an
 * error with a message (an invalid stream or event, no current context for handles 1 and 2). */
ovstage_api_status_t ovs_gpu_fence_capture(ovstage_cuda_sync_t sync, void **out, char *err, size_t errlen);
/* Makes x's stream wait for the fence (device-side; returns at once). */
bool ovs_gpu_fence_wait(struct ovs_exec *x, void *fence, char *err, size_t errlen);
void ovs_gpu_fence_release(void *fence);
/* Whether the producer's work behind the fence is still running (one event query; false for NULL,
 * and on an error, which the op's wait reports). */
bool ovs_gpu_fence_pending(void *fence);
/* Blocks the calling worker until the fence has fired (host code must read the producer's data: a
 * pinned or managed source). False (with a message) on a CUDA error. */
bool ovs_gpu_fence_sync(void *fence, char *err, size_t errlen);

/* Whether kernels and copies on CUDA device `dst` may read memory of device `src` directly (true for
 * dst == src). Decided at the first call for the pair: when the topology allows it, peer access from
 * dst to src is enabled for the process (cudaDeviceEnablePeerAccess with dst current; a pair the
 * application enabled already counts), else the answer is false and cross-device writes are staged
 * (write.c). Ordinals outside [0, 64): false. */
bool ovs_gpu_peer_enable(int dst, int src);

/* ---- checks and host staging ---------------------------------------------------------------------- */

/* The allocation the last pointer checked by ovs_gpu_check_pointer lay in: a later pointer inside it
 * costs no driver call (an array write's 4096 per-row tensors in one buffer were 4096 queries). */
typedef struct ovs_gpu_ptr_cache {
	uintptr_t base, end; /* [base, end): an allocation found to be readable by device `dev` */
	int dev;             /* that device (end == 0: nothing cached) */
} ovs_gpu_ptr_cache;

/* Whether p is memory CUDA device `dev` can read as a kernel argument (device or managed memory of
 * that device), checked at the call. INVALID_ARGUMENT with a message naming p and the device.
 * `cache` (zeroed before the first check; may be NULL) remembers the allocation of an accepted p. */
ovstage_api_status_t ovs_gpu_check_pointer(const void *p, int dev, ovs_gpu_ptr_cache *cache, const char *what,
					   char *err, size_t errlen);
/* Copies n device bytes to host memory after the work issued on x (the producer fence included) and
 * waits for it: the one place a worker blocks on the GPU (a CUDA tensor written into a CPU column). */
bool ovs_gpu_copy_to_host(struct ovs_exec *x, void *dst, const void *src, size_t n, char *err, size_t errlen);
/* Waits for everything issued on x (failure paths only: a failed op must not leave GPU work reading
 * the caller's tensors behind it). */
void ovs_gpu_sync(struct ovs_exec *x);
/* The calling thread's current CUDA device (-1 if none can be read), and setting it back: an op that
 * runs inline on the caller's thread leaves the caller's device as it found it. */
int ovs_gpu_thread_device(void);
void ovs_gpu_thread_restore(int dev);
/* Makes dev the calling thread's current device for a while (*prev: the one to restore with
 * ovs_gpu_thread_restore, -1 if none could be read); false if dev could not be made current. */
bool ovs_gpu_thread_enter(int dev, int *prev);
/* The name of a CUDA error code recorded in an ovs_exec (x->err). */
const char *ovs_gpu_error_name(int code);

/* One depth level of the transform hierarchy on x's stream (kernels.h: ovs_cuda_hier_level; every
 * pointer is device memory of x's device). A launch failure lands in x->err. */
void ovs_gpu_hier_level(struct ovs_exec *x, double *world, const uint32_t *node, const uint32_t *par,
			const unsigned char *hasx, const unsigned char *reset, const double *local, uint32_t n);

/* ---- completion and readiness -------------------------------------------------------------------
 * "The work issued on x so far" includes the small copies deferred in x->batch (exec.h): the
 * functions below that record, wait for or synchronise it (ovs_gpu_record, ovs_gpu_complete_after,
 * ovs_gpu_sync, ovs_gpu_copy_to_host) launch them first. */

/* Records the completion of everything issued on x so far and defers `run`'s receipt until the GPU
 * has finished it (then the receipt completes with success, or fails with the CUDA error). False
 * (with a message) if the event could not be recorded: the caller then fails the op itself. */
bool ovs_gpu_complete_after(ovs_gpu *g, struct ovs_exec *x, jobs_sched *sched, jobs_run *run, char *err,
			    size_t errlen);
/* An event recorded after the work issued on x so far (a version's readiness, a read group's
 * wait_event), or NULL on failure. Released with ovs_gpu_event_release (safe while pending). */
void *ovs_gpu_record(struct ovs_exec *x);
/* Events are reference-counted (one reference from ovs_gpu_record): another holder (the versions of
 * one seal share an event). Returns ev. */
void *ovs_gpu_event_ref(void *ev);
void ovs_gpu_event_release(void *ev);
/* The cudaEvent_t of an event from ovs_gpu_record (0 for NULL): what a read group or map buffer
 * publishes in cuda_sync.wait_event. */
uintptr_t ovs_gpu_event_handle(const void *ev);
/* Runs `fn(arg)` on a poller thread once the work issued on g's engine stream so far has finished
 * (a managed tensor's deleter after the last GPU work that reads it). Falls back to synchronising
 * the stream and calling fn at once if the event cannot be recorded. */
void ovs_gpu_after_stream(ovs_gpu *g, void (*fn)(void *), void *arg);

/* Registers the completion poll hook with a scheduler (runtime.c, once per scheduler it creates). */
void ovs_gpu_sched_attach(jobs_sched *sched);

/* Polls completions now, every device's (tests and destroy; the job system's hook does the same).
 * Returns how many are still outstanding. */
unsigned ovs_gpu_poll(void);

/* Device dev's poller (0 <= dev < OVS_GPU_MAX_DEVICES): completions it resolved, and pushed but
 * not yet resolved (statistics). */
void ovs_gpu_poll_stats(int dev, uint64_t *resolved, uint64_t *pending);

/* The PCI bus ID of device dev as CUDA writes it ("0000:3B:00.0"), for hwloc placement; false (and
 * "" in buf) when the backend is unavailable or the device has none. Initialises CUDA. */
bool ovs_gpu_pci_bus_id(int dev, char *buf, size_t n);

#endif /* OVSTAGE_GPU_H */
