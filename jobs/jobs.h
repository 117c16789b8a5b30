/*
 * jobs.h — the work-stealing job system: scheduler, receipts, fences.
 *
 * The jobs layer knows nothing of stages. It runs two kinds of work:
 *
 *  - Fork-join frames (jobs_forkjoin.h): a function spawned onto the calling worker's split deque
 *    and joined with jobs_sync(). No allocation, no atomic read-modify-write on the owner's path
 *    while nobody steals. Used for parallel loops and recursive splitting.
 *
 *  - Jobs (this header): a function submitted to a scheduler, optionally after other jobs' receipts
 *    and after a number of fences that someone resolves later (another job, a thread outside the
 *    pool, a CUDA host callback). Submitting returns a receipt id: a monotonic 64-bit number,
 *    0 = invalid. The receipt records status, code and message until it is released.
 *
 * Contract
 *  - Thread safety: every function here may be called from any thread concurrently, workers
 *    included, except jobs_sched_destroy (which must not race with other calls on that scheduler).
 *  - Progress, call by call. "Lock-free" below means: CAS loops that retry only when another
 *    thread made progress, no lock of ours, nothing that waits for another thread; a call may
 *    still make one FUTEX_WAKE system call (never FUTEX_WAIT) to wake a sleeping worker or waiter.
 *    The injection queue is lock-free except that a producer stalled between claiming a cell and
 *    filling it (a few instructions) makes that cell look empty until it resumes (inject.h).
 *    - jobs_poll, jobs_job_defer, jobs_run_*, jobs_sched_workers, jobs_current_worker: wait-free.
 *      jobs_kick: wait-free plus at most one FUTEX_WAKE.
 *    - jobs_submit without dependencies (after_count 0): lock-free, no allocation (bounded slot
 *      search, then the injection queue, which fails with JOBS_FULL rather than block or grow;
 *      on a worker, a push onto its own deque). With JOBS_RUN_INLINE and nothing to wait for, it
 *      also runs the body and completes the job in the call (see below).
 *    - jobs_submit with dependencies: NOT lock-free. It mallocs one edge per dependency (and an
 *      array when after_count > 8), so it is as blocking as malloc; and for a dependency that is
 *      completing at that moment (its edge list already closed, DONE not yet set) it yields in a
 *      loop until the completing thread sets DONE — a few instructions later unless that thread
 *      is preempted there (jobs_slot_add_edge).
 *    - jobs_fence_resolve: lock-free, no allocation — unless it resolves the last fence of a
 *      JOBS_RUN_INLINE job, which then runs in the call. jobs_fence_resolve_async: lock-free, no
 *      allocation, never runs a job.
 *    - jobs_complete: lock-free; allocates a copy of the message for a failure; completing frees
 *      the job's edges (free()).
 *    - jobs_release, jobs_receipt_result, jobs_receipt_failed_dependency, jobs_receipt_tag:
 *      lock-free (a pin, a CAS loop); the call that recycles a slot frees its message (free()).
 *    - jobs_add_poll_hook, jobs_add_poll_hook_rate: lock-free. jobs_remove_poll_hook: blocking
 *      (yields until the calls of that hook in progress return).
 *    - jobs_wait: blocking by design. From a worker it helps run other work (bounded nesting);
 *      from any other thread it spins briefly, then parks on a futex.
 *    - jobs_sched_create, jobs_sched_destroy: blocking (thread creation, joins).
 *    A call that runs or completes a job (inline submission or resolution, a helping wait, a
 *    0-worker waiter) also runs the body and cleanup, may allocate the failure message of a
 *    failed dependency and frees the job's edges; such work has the progress of the body.
 *  - Ordering: a job runs after every receipt it was submitted after has completed, and after all of
 *    its fences were resolved; everything the dependencies wrote happens-before the job's start.
 *    Completion of a job happens-before a wait or poll that observes it.
 *  - Transitivity: a job runs only after its dependencies completed, so waiting for a receipt covers
 *    its whole dependency chain. A dependency that failed fails its dependents ("dependency op N
 *    failed"), unless the job was submitted with JOBS_RUN_AFTER_FAILED_DEPENDENCY.
 *  - Receipts are released exactly once. A second release, or any call on an unknown or released id,
 *    returns JOBS_INVALID — never a crash.
 *  - Shutdown: jobs_sched_destroy runs every job that is runnable (jobs may still submit jobs
 *    while they run), gives poll sources a bounded grace period (200 ms) to complete, then cancels
 *    the jobs whose fences will never be resolved (their receipts complete with JOBS_CANCELLED and
 *    a message; dependents of cancelled jobs are cancelled too, also those submitted with
 *    JOBS_RUN_AFTER_FAILED_DEPENDENCY), frees every receipt and joins the workers. It never hangs on
 *    unresolved fences or on poll sources that never complete. Job bodies must not block on work
 *    that can never run.
 *  - 0-worker pools: jobs run in the threads that wait on receipts (which also call the poll
 *    hooks); a job nobody waits for runs at the latest in jobs_sched_destroy.
 */
#ifndef OVSTAGE_JOBS_H
#define OVSTAGE_JOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct jobs_sched jobs_sched;   /* a pool of workers and its receipt table */
typedef struct jobs_worker jobs_worker; /* one worker's context (or the calling thread's, if helping) */
typedef uint64_t jobs_id;               /* a receipt id; 0 is never a valid receipt */

#define JOBS_INVALID_ID ((jobs_id)0)
#define JOBS_TIMEOUT_INFINITE (~(uint64_t)0)

typedef enum jobs_status {
	JOBS_OK = 0,        /* done and succeeded (poll/wait), or accepted (submit, release, resolve) */
	JOBS_PENDING = 1,   /* not complete yet: poll found it running, or wait timed out */
	JOBS_FAILED = 2,    /* the job failed (or a dependency did); see jobs_receipt_result() */
	JOBS_CANCELLED = 3, /* the scheduler shut down before the job could run */
	JOBS_INVALID = 4,   /* unknown, released or never-issued id; bad argument */
	JOBS_FULL = 5,      /* the injection queue or the receipt table is full; retry later */
	JOBS_NOMEM = 6      /* an allocation failed */
} jobs_status;

/* What a running job sees. Use jobs_job_fail() to report a failure. */
typedef struct jobs_run jobs_run;

/* A job body. `w` is the worker running it: pass it to jobs_spawn/jobs_sync for fork-join. */
typedef void (*jobs_job_fn)(jobs_worker *w, void *arg, jobs_run *run);

/* Called exactly once per accepted job, after the body ran or instead of it (cancelled, or a
 * dependency failed): the place to free `arg`. `ran` tells whether the body ran. */
typedef void (*jobs_cleanup_fn)(void *arg, bool ran);

enum {
	/* Run the body even when a dependency failed (the receipt then carries the body's own result). */
	JOBS_RUN_AFTER_FAILED_DEPENDENCY = 1u << 0,
	/* `after` ids may already be released or recycled (the submitter issued them itself and knows
	 * they were valid): a released receipt still orders the job, a recycled one counts as
	 * complete. Without this flag such ids are rejected with JOBS_INVALID. */
	JOBS_AFTER_MAY_BE_RELEASED = 1u << 1,
	/* The thread that makes the job runnable from jobs_submit (every dependency already complete,
	 * no fences) or from jobs_fence_resolve (the last fence) runs it itself before that call
	 * returns, instead of handing it to a worker: no wake-up, no queue, no second thread. The body
	 * then receives that thread's worker context, or NULL on a thread outside the pool (so it
	 * must not fork-join without checking). Meant for short bodies whose submitter waits anyway.
	 * A job made runnable by a completing dependency is scheduled as usual, and so is one made
	 * runnable by jobs_fence_resolve_async or jobs_complete (they never run a job inline). */
	JOBS_RUN_INLINE = 1u << 2,
};

typedef struct jobs_job_desc {
	jobs_job_fn fn;           /* the body; required */
	void *arg;                /* passed to fn and cleanup */
	jobs_cleanup_fn cleanup;  /* optional; runs exactly once per accepted job */
	const jobs_id *after;     /* receipts that must complete first (may be NULL if after_count 0) */
	size_t after_count;       /* number of entries in `after` */
	uint32_t fences;          /* extra dependencies resolved by jobs_fence_resolve() */
	uint32_t flags;           /* JOBS_RUN_AFTER_FAILED_DEPENDENCY, JOBS_AFTER_MAY_BE_RELEASED, JOBS_RUN_INLINE */
	uint64_t tag;             /* opaque owner tag kept with the receipt (jobs_receipt_tag) */
} jobs_job_desc;

/* Idle-time poll hook: workers with nothing to do call it. It returns how many sources it still
 * has outstanding (for example CUDA events not yet complete); while that is non-zero, idle workers
 * sleep with a short timeout instead of indefinitely, so they keep polling. */
typedef unsigned (*jobs_poll_fn)(void *ctx);

typedef struct jobs_config {
	int workers;              /* worker threads; < 0 = one per core hwloc reports; 0 = none (waiters run jobs) */
	bool pin;                 /* bind each worker to its core with hwloc */
	uint32_t queue_capacity;  /* injection queue slots (rounded up to a power of two); 0 = 4096 */
	uint32_t receipt_capacity;/* outstanding receipts (rounded up to a power of two); 0 = 65536 */
	uint32_t deque_capacity;  /* frames per worker deque; 0 = 1 << 16 */
	const char *topology;     /* optional hwloc synthetic topology ("package:2 core:2 pu:1") or XML
	                           * document (starts with '<') for tests; read during create only */
	const char *near_pci;     /* optional PCI bus IDs ("0000:3b:00.0", comma-separated) of the devices
	                           * the workers serve: workers go to the cores hwloc places near them
	                           * first, and unpinned near workers are bound to those cores; read
	                           * during create only (topology.h) */
	uint32_t spin_us;         /* how long an idle worker searches before sleeping; 0 = 100 */
} jobs_config;

/* Fills `cfg` with the defaults (workers = -1: one per core). */
void jobs_config_default(jobs_config *cfg);

/* Creates a scheduler and starts its workers. Returns NULL and sets *err (static text) on failure. */
jobs_sched *jobs_sched_create(const jobs_config *cfg, const char **err);

/* Finishes runnable work, cancels jobs waiting on fences that nobody resolved, frees every receipt
 * (released or not) and joins the workers. Must not race with any other call on `s`. */
void jobs_sched_destroy(jobs_sched *s);

/* Number of worker threads (0 when callers run the jobs themselves). */
int jobs_sched_workers(const jobs_sched *s);

/* How many workers are placed near the devices of `near_pci` (workers 0 .. n-1; 0 when no device
 * was given or hwloc knows none of them). */
int jobs_sched_near_workers(const jobs_sched *s);
/* Of them, how many are near the one device `pci_bus_id` (0 for a device not given at creation). */
int jobs_sched_near_workers_of(const jobs_sched *s, const char *pci_bus_id);

/* Submits a job. On JOBS_OK *out_id holds its receipt (never 0). On failure nothing ran, the
 * cleanup was NOT called (the caller still owns `arg`), and *out_id is 0. Fails with JOBS_INVALID
 * for a NULL fn, or an `after` id that is unknown or released; JOBS_FULL when the receipt table or
 * (for a job runnable at once, from a thread that is not a worker) the injection queue is full. */
jobs_status jobs_submit(jobs_sched *s, const jobs_job_desc *desc, jobs_id *out_id);
/* (Progress: see the contract above — lock-free without dependencies, malloc and a possible
 * yield loop with them.) */

/* Resolves one of the job's `fences`. Callable from any thread. It never blocks and never
 * allocates, except that a JOBS_RUN_INLINE job whose last fence this is runs in this call, on this
 * thread — threads that must not run job bodies (CUDA host callbacks) use jobs_fence_resolve_async.
 * Works until the job has run even if its receipt was already
 * released (the resolver usually got the id when the job was created). JOBS_INVALID if the id is
 * unknown, the job already ran, or no fence is unresolved. */
jobs_status jobs_fence_resolve(jobs_sched *s, jobs_id id);

/* As jobs_fence_resolve, but never runs anything on the calling thread: a job whose last fence
 * this is — JOBS_RUN_INLINE or not — goes to the shared ready stack and a worker is woken (in a
 * 0-worker pool a waiting thread runs it). For foreign threads (CUDA host callbacks, I/O
 * completion threads) that must return quickly, and for code on a worker that must not have a
 * job pushed onto its own deque. Never blocks, never allocates. Same status codes. */
jobs_status jobs_fence_resolve_async(jobs_sched *s, jobs_id id);

/* One look at a receipt: JOBS_PENDING, JOBS_OK, JOBS_FAILED, JOBS_CANCELLED or JOBS_INVALID. */
jobs_status jobs_poll(jobs_sched *s, jobs_id id);

/* Waits up to timeout_ns (0 = poll, JOBS_TIMEOUT_INFINITE = forever). JOBS_PENDING on timeout
 * (not terminal). On a worker thread it runs other work meanwhile. */
jobs_status jobs_wait(jobs_sched *s, jobs_id id, uint64_t timeout_ns);

/* The job's result code (0 unless jobs_job_fail set one) and message, copied into buf (always
 * NUL-terminated when size > 0). Returns the poll status; code/message are meaningful once terminal. */
jobs_status jobs_receipt_result(jobs_sched *s, jobs_id id, int *code, char *buf, size_t size);

/* The first failed dependency of a completed job (0 if none, or not complete yet) — also for a job
 * that ran anyway with JOBS_RUN_AFTER_FAILED_DEPENDENCY.
 * JOBS_INVALID for unknown or released ids. */
jobs_status jobs_receipt_failed_dependency(jobs_sched *s, jobs_id id, jobs_id *dep);

/* The tag the job was submitted with (for example the stage that owns an op id). JOBS_INVALID for
 * unknown or released ids. */
jobs_status jobs_receipt_tag(jobs_sched *s, jobs_id id, uint64_t *tag);

/* Retires a receipt. The job still runs if it has not yet; its id becomes invalid at once. */
jobs_status jobs_release(jobs_sched *s, jobs_id id);

/* jobs_wait and jobs_release for an owner that checks its tag first (jobs_receipt_tag, then the
 * call): one pin of the receipt instead of two. JOBS_INVALID, and nothing done, when the id is
 * unknown or released or carries another tag. Progress: as jobs_wait and jobs_release. */
jobs_status jobs_wait_tagged(jobs_sched *s, jobs_id id, uint64_t tag, uint64_t timeout_ns);
jobs_status jobs_release_tagged(jobs_sched *s, jobs_id id, uint64_t tag);

/* A receipt of a job with no body that is complete (JOBS_OK) when the call returns: for an owner
 * whose operation took effect in the call (a release) but hands out a receipt like any other.
 * Costs a slot, not a run (no body, no cleanup, no allocation). Lock-free. JOBS_FULL when the
 * receipt table is full (then *out_id is 0). */
jobs_status jobs_submit_done(jobs_sched *s, uint64_t tag, jobs_id *out_id);

/* Inside a job body: mark the job failed with an application code and a message (code 0 becomes 1,
 * since 0 means success; the first failure reported wins). */
void jobs_job_fail(jobs_run *run, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Inside a job body (or after its body returned, in the same call): whether jobs_job_fail was
 * called, and its message (NULL if none). */
bool jobs_run_failed(const jobs_run *run);
const char *jobs_run_message(const jobs_run *run);

/* Deferred completion. Inside a job body: the job does not complete when the body returns; its
 * receipt stays pending until jobs_complete() is called with the returned id, from any thread
 * (another job, a thread outside the pool, a CUDA host callback). Dependents run only then.
 *  - Returns the job's id (the token for jobs_complete), or JOBS_INVALID_ID if the body already
 *    called jobs_job_fail (the failure completes the job when the body returns). Calling it again
 *    returns the same id. Call it before handing the id to the completer.
 *  - The cleanup still runs when the body returns (ran = true): state that the completer needs
 *    must live elsewhere.
 *  - The completion may come before the body returns: the job then completes when the body
 *    returns, on the body's thread. A jobs_job_fail after jobs_job_defer completes the job failed
 *    at the body's return unless jobs_complete came first (the first result wins).
 *  - Ordering: the body and its cleanup, and whatever the completing thread did before
 *    jobs_complete, happen-before the dependents and any wait or poll that sees the completion.
 *  - A deferred job still pending at jobs_sched_destroy completes as JOBS_CANCELLED (dependents
 *    follow); jobs_complete must not race with jobs_sched_destroy. */
jobs_id jobs_job_defer(jobs_run *run);

/* Completes a job that deferred its completion (jobs_job_defer): code 0 = success (msg ignored);
 * any other code = failure with that code and a copy of msg (NULL: a generic message), which
 * propagates to dependents as for a failed body. Callable from any thread, also after the receipt
 * was released. It runs no job body and no cleanup on the calling thread: the dependents that
 * become ready go to the shared ready stack and a worker is woken (JOBS_RUN_INLINE dependents
 * included; in a 0-worker pool they run in a waiting thread). It does not block; it allocates
 * only the copy of msg (a failure without a message if that allocation fails). Returns
 * JOBS_INVALID if the id is unknown, its job did not defer, or it was already completed. */
jobs_status jobs_complete(jobs_sched *s, jobs_id id, int code, const char *msg);

/* Inside a job body: the receipt of the job being run. */
jobs_id jobs_run_id(const jobs_run *run);

/* Inside a job body whose dependency failed (only with JOBS_RUN_AFTER_FAILED_DEPENDENCY): the id of
 * the first failed dependency, else 0. */
jobs_id jobs_run_failed_dependency(const jobs_run *run);

/* A registered poll hook (for jobs_remove_poll_hook); 0 is never one. */
typedef uint64_t jobs_hook_id;

/* Registers an idle-time poll hook without a rate limit: every searching worker calls it, several
 * at once, as often as it searches (at most 8 hooks per scheduler, rate-limited ones included).
 * JOBS_FULL if no room. Not removable (use jobs_add_poll_hook_rate for that). */
jobs_status jobs_add_poll_hook(jobs_sched *s, jobs_poll_fn fn, void *ctx);

/* Registers a poll hook for one source, called by idle workers with a minimum interval: if
 * min_interval_ns > 0, at most one thread calls it at a time (so consecutive calls are ordered:
 * each happens-before the next) and idle workers' calls start at least min_interval_ns after the
 * previous call; workers that find it busy or not yet due count its last report as its
 * outstanding sources. For a thread spinning in jobs_wait it is due 1 us after the previous call,
 * whatever min_interval_ns: the waiter waits for what the hook resolves (so calls can come closer
 * than the interval while somebody waits).
 * min_interval_ns = 0 behaves as jobs_add_poll_hook. *out (if not NULL) receives the id for
 * jobs_remove_poll_hook. JOBS_FULL if 8 hooks are registered; JOBS_INVALID for a NULL fn. */
jobs_status jobs_add_poll_hook_rate(jobs_sched *s, jobs_poll_fn fn, void *ctx, uint64_t min_interval_ns,
				    jobs_hook_id *out);

/* Unregisters a hook. When it returns JOBS_OK, no call of the hook is in progress and none will
 * start, so ctx may be freed. Blocks (yielding) until the calls in progress return. JOBS_INVALID for
 * an unknown or already removed id, and when called from inside any poll hook (it could wait for
 * itself, or for a hook that waits for it). */
jobs_status jobs_remove_poll_hook(jobs_sched *s, jobs_hook_id id);

/* Wakes idle workers so that they call the poll hooks soon (for example after a CUDA event was
 * recorded). Cheap when nobody sleeps. */
void jobs_kick(jobs_sched *s);

/* The worker context of the calling thread for this scheduler, or NULL if it is not one of its
 * workers. Jobs receive theirs as an argument; this is for code that needs it elsewhere. */
jobs_worker *jobs_current_worker(const jobs_sched *s);

/* Counters for tests and benchmarks (approximate while work is in flight). */
typedef struct jobs_stats {
	uint64_t jobs_run;      /* job bodies executed */
	uint64_t steals;        /* frames stolen between workers */
	uint64_t sleeps;        /* times a worker went to sleep */
	uint64_t wakeups;       /* sleeps ended by a wake-up aimed at the sleeper (not a timeout) */
	uint64_t empty_wakeups; /* wake-ups after which the worker found nothing before sleeping again */
	uint64_t receipts_live; /* receipt slots in use */
} jobs_stats;
void jobs_sched_stats(jobs_sched *s, jobs_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* OVSTAGE_JOBS_H */
