/*
 * trace.h — a Chrome / Perfetto JSON trace of the job system and of stage ops, for trace viewers
 * (ui.perfetto.dev, chrome://tracing). Off unless the environment variable OVSTAGE_TRACE names a
 * file when the first scheduler is created (docs/jobs.md, "Tracing").
 *
 * What is recorded (one JSON event each):
 *  - jobs: "spawn" (a submission: a flow start, id = receipt), "run" (a job body: a complete event on
 *    the thread that ran it, with the flow's end, so the viewer draws an arrow from the submitting
 *    span to the run), "steal" (a frame taken from another worker: an instant, id = victim),
 *    "park" (a worker asleep on its futex: a complete event). Fork-join frames spawned on the fast
 *    path are not recorded one by one (fib(40) spawns ~10^8); their steals are.
 *  - stage ops (cat "op"): "write", "seal", "read" — the API call on the caller's thread, a complete
 *    event whose id is the op's receipt (the "run" of the same id is the op's body).
 *  - the CUDA backend (cat "gpu", gpu/cuda_internal.h): a complete event around each CUDA call that
 *    can cost a host thread time — copies and kernel launches, uploads, cache-missing allocations,
 *    event records and waits, synchronisations, the poll passes that resolved a completion, the
 *    kick that wakes a poller.
 *
 * Cost when off: one relaxed load of a flag and a branch per hook. When on, each thread appends to
 * a buffer of its own (no locks, no shared writes per event); jobs_trace_flush() writes every
 * buffer to the file (rewriting it: the file always holds all events so far, as one JSON object).
 * It runs at process exit and when the last stage instance is destroyed.
 *
 * Thread safety: every function may be called from any thread at any time.
 */
#ifndef OVSTAGE_JOBS_TRACE_H
#define OVSTAGE_JOBS_TRACE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Non-zero while tracing. Written once, by jobs_trace_init. */
extern _Atomic int jobs_trace_flag;

/* Whether tracing is on: the only cost of a hook when it is off. */
static inline bool jobs_trace_on(void)
{
	/* relaxed: a hint that gates recording into this thread's own buffer; nothing is read through
	 * it. A thread that sees it late misses a few events at the start, never more. */
	return atomic_load_explicit(&jobs_trace_flag, memory_order_relaxed) != 0;
}

/* Reads OVSTAGE_TRACE once per process (the first call wins; later calls return at once). */
void jobs_trace_init(void);

/* Monotonic nanoseconds (the events' clock). */
uint64_t jobs_trace_now(void);

/* A complete event ("ph":"X") from t0 to t1 (ns) on the calling thread; `id` goes into args
 * (0: none). cat and name must be string literals (they are stored, not copied). */
void jobs_trace_span(const char *cat, const char *name, uint64_t t0, uint64_t t1, uint64_t id);
/* An instant event ("ph":"i", thread scope) now. */
void jobs_trace_instant(const char *cat, const char *name, uint64_t id);
/* A flow event now: ph 's' (start) or 'f' (finish, bound to the enclosing span), flow id `id`. */
void jobs_trace_flow(char ph, const char *name, uint64_t id);
/* Names the calling thread in the trace (copied; at most 31 bytes kept). */
void jobs_trace_thread_name(const char *name);

/* Writes every event recorded so far to the file (replacing it). No-op when tracing is off. */
void jobs_trace_flush(void);

#ifdef __cplusplus
}
#endif
#endif /* OVSTAGE_JOBS_TRACE_H */
