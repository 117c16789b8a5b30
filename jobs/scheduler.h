/*
 * scheduler.h — the scheduler's shared state and the internal functions that tie workers, receipts and
 * queues together. Internal to jobs/.
 */
#ifndef OVSTAGE_JOBS_SCHED_H
#define OVSTAGE_JOBS_SCHED_H

#include <pthread.h>
#include <stdatomic.h>

#include "inject.h"
#include "jobs.h"
#include "receipt.h"
#include "topology.h"
#include "worker.h"

#define JOBS_MAX_POLL_HOOKS 8
#define JOBS_MAX_HELP_DEPTH 32 /* nesting of help loops on one worker's stack */
#define JOBS_MAX_WORKERS 4096  /* worker threads in one pool */
#define JOBS_ASLEEP_WORDS (JOBS_MAX_WORKERS / 64) /* jobs_sched.asleep: one bit per worker */

/* jobs_poll_hook.ref: ACTIVE (callable) | CLAIMED (entry in use) | generation << 32 | calls in
 * flight. Only ever modified by read-modify-writes, so every value lies in the release sequence of
 * every earlier release RMW on it. */
#define JOBS_HOOK_ACTIVE (1ull << 63)
#define JOBS_HOOK_CLAIMED (1ull << 62)
#define JOBS_HOOK_GEN_SHIFT 32
#define JOBS_HOOK_GEN_MASK ((1ull << 30) - 1)
#define JOBS_HOOK_GEN(v) (((v) >> JOBS_HOOK_GEN_SHIFT) & JOBS_HOOK_GEN_MASK)
#define JOBS_HOOK_CALLS(v) ((uint32_t)(v))

/* One cache line per entry: every searching worker reads it on every round of its spin. */
typedef struct jobs_poll_hook {
	_Alignas(JOBS_CACHE_LINE) _Atomic uint64_t ref; /* JOBS_HOOK_* state, generation and calls in flight */
	_Atomic uint32_t busy;        /* rate-limited hooks: 1 while one thread calls fn (try-lock) */
	_Atomic uint32_t outstanding; /* rate-limited hooks: what the last call reported */
	_Atomic uint64_t last_ns;     /* rate-limited hooks: when the last call started (under busy) */
	jobs_poll_fn fn;              /* written by the registrar, published by the release of ACTIVE */
	void *ctx;                    /* its argument (likewise) */
	_Atomic uint64_t interval_ns; /* minimum time between call starts; 0 = no limit (likewise; atomic
	                               * because the not-due check reads it without counting itself in) */
} jobs_poll_hook;
_Static_assert(sizeof(jobs_poll_hook) == JOBS_CACHE_LINE, "a poll hook entry is one cache line");

struct jobs_sched {
	jobs_config cfg;          /* the configuration, defaults filled in */
	int n_workers;            /* worker threads (0 allowed) */
	int n_ctx;                /* worker contexts: max(n_workers, 1); ctx 0 is the helper when 0 */
	jobs_worker **ctx;        /* n_ctx contexts */
	pthread_t *threads;       /* n_workers threads */
	jobs_topology topo;       /* placement and steal order */
	jobs_receipts receipts;   /* the receipt table (also the job pool) */
	jobs_inject inject;       /* external submissions */

	/* Ready stack: jobs made runnable by a thread that has no deque of ours (a fence resolved from
	 * outside, a deque too full). Treiber push; consumers take everything at once (exchange), so
	 * there is no ABA. */
	_Alignas(JOBS_CACHE_LINE) jobs_slot *_Atomic ready;

	/* Sleep protocol (docs/jobs.md, "Sleeping and waking"). `idle` holds both counts in one word,
	 * so that a notifier reads them with one read-modify-write: JOBS_IDLE_SEARCHING, awake workers
	 * looking for work, and JOBS_IDLE_SLEEPERS, workers parked (or about to park) on their own
	 * jobs_worker.park. Only ever modified by read-modify-writes, so any value read from it lies in
	 * the release sequence of every earlier release RMW on it. */
	_Alignas(JOBS_CACHE_LINE) _Atomic uint64_t idle;

	/* Which workers may be woken: bit i % 64 of word i / 64 is set by worker i (release) before it
	 * counts itself asleep, and cleared by the notifier that claims its wake-up (acquire) or by the
	 * worker itself once awake. A notifier claims the lowest set bit, so that under a trickle the
	 * same worker (warm cache, short window) serves every job and the others stay asleep. Only
	 * ever modified by read-modify-writes (release sequences, as for `idle`). Its own lines: the
	 * searchers' RMWs on `idle` do not contend with claims. */
	_Alignas(JOBS_CACHE_LINE) _Atomic uint64_t asleep[JOBS_ASLEEP_WORDS];

	_Alignas(JOBS_CACHE_LINE) _Atomic uint32_t stopping;   /* destroy requested: exit when idle */
	_Atomic uint32_t cancelling; /* destroy's second phase: jobs complete as CANCELLED */
	_Atomic uint32_t helper_busy;/* 0-worker pools: a waiting thread owns ctx[0] while 1 */
	_Atomic uint32_t n_hooks;    /* active poll hooks (a hint: 0 lets pollers skip the table) */
	jobs_poll_hook hooks[JOBS_MAX_POLL_HOOKS]; /* each entry publishes itself (its ref word); lines
	                              * of their own, away from `stopping` that every spin round reads */
};

#define JOBS_IDLE_SEARCHER 1ull                /* one searching worker in jobs_sched.idle */
#define JOBS_IDLE_SLEEPER (1ull << 32)         /* one sleeping worker in jobs_sched.idle */
#define JOBS_IDLE_SEARCHING(v) ((uint32_t)(v)) /* searching workers in a value of idle */
#define JOBS_IDLE_SLEEPERS(v) ((uint32_t)((v) >> 32))

/* The calling thread's worker context in `s`, or NULL. */
jobs_worker *jobs_tls_worker(const jobs_sched *s);
void jobs_tls_set(jobs_worker *w);

/* Called after publishing work somewhere a sleeper could take it: wakes one if nobody searches. */
void jobs_notify_work(jobs_sched *s);

/* Wakes every worker that sleeps or is about to (destroy: after setting `stopping`). */
void jobs_wake_all(jobs_sched *s);

/* Makes a job whose pending count reached zero runnable. */
void jobs_schedule_ready(jobs_sched *s, jobs_slot *sl);

/* Makes a ready job runnable through the shared ready stack (never the caller's deque) and wakes a
 * worker: nothing runs on the calling thread. */
void jobs_schedule_ready_shared(jobs_sched *s, jobs_slot *sl);

/* Runs (or cancels) a job and completes its receipt; propagates to dependents (unless the body
 * deferred its completion, which jobs_complete then finishes). */
void jobs_run_slot(jobs_worker *w, jobs_sched *s, jobs_slot *sl);

/* Completes sl (id `id`) with result flags, code and message (ownership taken) and makes the
 * dependents that become ready runnable: with jobs_schedule_ready, or, if `shared`, with
 * jobs_schedule_ready_shared. sl may be recycled once this returns. */
void jobs_complete_slot(jobs_sched *s, jobs_slot *sl, jobs_id id, uint32_t result, int code,
			char *message, bool shared);

/* Finds one unit of work for w (its own detached frames, the injection queue, the ready stack,
 * stealing) and runs it, returning to the same deque top. False if there was none. */
bool jobs_find_and_run(jobs_worker *w);

/* Called when w obtains work, before running it: a worker that was searching stops being counted
 * as searching (so that publishers wake a sleeper for the work it spawns), and if it was the last
 * searcher while others sleep, it wakes one to keep a thief awake. */
void jobs_worker_found_work(jobs_worker *w);

/* Calls every registered poll hook once (a rate-limited one only when it is due and nobody else
 * calls it; otherwise its last report counts); returns the outstanding sources they report. */
unsigned jobs_poll_hooks(jobs_sched *s);
/* The same, for a thread spinning in jobs_wait: a rate-limited hook is due for it 1 us after its
 * previous call, whatever its own interval (JOBS_WAITER_POLL_NS, worker.c). The interval keeps idle
 * workers, many and with nothing to wait for, from querying a source back to back; a waiter waits
 * for what the hook resolves, and at most one call runs at a time either way. For a GPU op's
 * receipt this removes most of one interval (4 us) between the device finishing and the receipt
 * completing, and the worker's wake-up of the waiter when the waiter resolves it itself
 * (docs/performance.md, session 19). */
unsigned jobs_poll_hooks_waiter(jobs_sched *s);

/* Whether the calling thread is inside a poll hook's call (removal is refused there). */
bool jobs_in_poll_hook(void);

/* Is there anything a sleeping worker could take? (Racy; the sleep protocol orders it.) */
bool jobs_work_visible(jobs_sched *s);

/* Allocates a worker context (deque mapped lazily). */
jobs_worker *jobs_worker_new(jobs_sched *s, int index, uint32_t capacity);
void jobs_worker_free(jobs_worker *w);

/* The worker thread's main loop. */
void *jobs_worker_main(void *arg);

#endif /* OVSTAGE_JOBS_SCHED_H */
