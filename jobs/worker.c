/*
 * worker.c — running jobs on workers: the worker loop, finding work, sleeping and waking, and
 * running a receipt's job. The sleep protocol is argued in docs/jobs.md ("Sleeping and waking").
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "trace.h"
#include "deque.h"
#include "park.h"
#include "scheduler.h"

static _Thread_local jobs_worker *tls_worker;

jobs_worker *jobs_tls_worker(const jobs_sched *s)
{
	jobs_worker *w = tls_worker;
	return (w && w->sched == s) ? w : NULL;
}

void jobs_tls_set(jobs_worker *w)
{
	tls_worker = w;
}

jobs_worker *jobs_worker_new(jobs_sched *s, int index, uint32_t capacity)
{
	jobs_worker *w = aligned_alloc(JOBS_CACHE_LINE, sizeof *w);
	if (!w)
		return NULL;
	memset(w, 0, sizeof *w);
	/* +1 guard frame: jobs_spawn_args may hand out the frame at `end` before the overflow check. */
	size_t bytes = ((size_t)capacity + 1) * sizeof(jobs_frame);
	void *dq = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			-1, 0);
	if (dq == MAP_FAILED) {
		free(w);
		return NULL;
	}
	w->dq = dq;
	w->top = w->dq;
	w->end = w->dq + capacity;
	w->allstolen_o = true;
	w->task_floor = w->dq; /* no marked frames (jobs_task_mark_owner) */
	w->task_lo = w->end + 1;
	jobs_set_split_owner(w, w->end);
	w->capacity = capacity;
	w->index = index;
	w->sched = s;
	w->pu = -1;
	atomic_init(&w->ts, 0);
	atomic_init(&w->allstolen, 1);
	atomic_init(&w->movesplit, 0);
	atomic_init(&w->park, 0);
	atomic_init(&w->n_run, 0);
	atomic_init(&w->n_steals, 0);
	atomic_init(&w->n_sleeps, 0);
	atomic_init(&w->n_wakeups, 0);
	atomic_init(&w->n_empty_wakeups, 0);
	return w;
}

void jobs_worker_free(jobs_worker *w)
{
	if (!w)
		return;
	munmap(w->dq, ((size_t)w->capacity + 1) * sizeof(jobs_frame));
	free(w->victims);
	free(w);
}

/* ---------------------------------------------------------------------------------------------
 * Running a job
 */

void jobs_job_fail(jobs_run *run, int code, const char *fmt, ...)
{
	if (run->failed)
		return; /* the first failure wins */
	run->failed = true;
	run->code = code ? code : 1;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&run->message, fmt, ap) < 0)
		run->message = NULL;
	va_end(ap);
}

bool jobs_run_failed(const jobs_run *run)
{
	return run->failed;
}

const char *jobs_run_message(const jobs_run *run)
{
	return run->message;
}

jobs_id jobs_run_id(const jobs_run *run)
{
	return run->id;
}

jobs_id jobs_run_failed_dependency(const jobs_run *run)
{
	return run->failed_dep;
}

static char *dup_printf(const char *fmt, unsigned long long v)
{
	char *m = NULL;
	if (asprintf(&m, fmt, v) < 0)
		return NULL;
	return m;
}

jobs_id jobs_job_defer(jobs_run *run)
{
	if (run->failed)
		return JOBS_INVALID_ID; /* the failure completes the job when the body returns */
	if (!run->deferred) {
		run->deferred = true;
		/* relaxed: only this thread writes the word before the id leaves it; whatever hands the id
		 * to the completer orders this store before the completer's claim (coherence). */
		atomic_store_explicit(&run->slot->defer, JOBS_DEFER_ARMED, memory_order_relaxed);
	}
	return run->id;
}

/* After a deferring body returned (and its cleanup ran): true if this thread completes the job now
 * (with *result and run's code/message), false if the completer will. */
static bool deferred_returned(jobs_slot *sl, jobs_run *run, uint32_t *result)
{
	if (run->failed) {
		uint32_t armed = JOBS_DEFER_ARMED;
		/* relaxed: the body's own failure claims the result unless a completer did; nothing is
		 * read from the completer either way. */
		if (atomic_compare_exchange_strong_explicit(&sl->defer, &armed,
							    armed | JOBS_DEFER_CLAIMED | JOBS_DEFER_RETURNED,
							    memory_order_relaxed, memory_order_relaxed))
			return true;
		free(run->message); /* a completer claimed first: its result stands */
		run->message = NULL;
		run->failed = false;
	}
	/* acq_rel: release — if the completer comes second, the body's effects and cleanup
	 * happen-before its completion; acquire — if it came first, we read its code and message. */
	uint32_t old = atomic_fetch_or_explicit(&sl->defer, JOBS_DEFER_RETURNED, memory_order_acq_rel);
	if (!(old & JOBS_DEFER_GIVEN))
		return false; /* sl may be completed and recycled from here on */
	run->code = sl->code;
	run->message = sl->message;
	*result = run->code ? JOBS_ST_FAILED : 0;
	return true;
}

void jobs_run_slot(jobs_worker *w, jobs_sched *s, jobs_slot *sl)
{
	jobs_run run = {0};
	run.slot = sl;
	/* relaxed: the slot was handed to us through a release/acquire chain (deque, queue, ready stack,
	 * or the pending count reaching zero with acq_rel), which ordered these writes before. */
	run.id = atomic_load_explicit(&sl->id, memory_order_relaxed);
	run.failed_dep = atomic_load_explicit(&sl->failed_dep, memory_order_relaxed);
	uint32_t result = 0;
	bool ran = false;
	if (atomic_load_explicit(&s->cancelling, memory_order_relaxed)) {
		result = JOBS_ST_FAILED | JOBS_ST_CANCELLED;
		run.code = JOBS_CODE_CANCELLED;
		run.message = dup_printf("op %llu cancelled: the scheduler was destroyed before it could run",
					 (unsigned long long)run.id);
	} else if (run.failed_dep && !(sl->flags & JOBS_RUN_AFTER_FAILED_DEPENDENCY)) {
		result = JOBS_ST_FAILED;
		run.code = JOBS_CODE_DEPENDENCY_FAILED;
		run.message = dup_printf("dependency op %llu failed", (unsigned long long)run.failed_dep);
	} else {
		uint64_t t0 = 0;
		if (jobs_trace_on()) { /* the end of the submission's flow, inside the run's span */
			t0 = jobs_trace_now();
			jobs_trace_flow('f', "job", run.id);
		}
		sl->fn(w, sl->arg, &run);
		if (t0)
			jobs_trace_span("jobs", "run", t0, jobs_trace_now(), run.id);
		ran = true;
		if (w)
			atomic_fetch_add_explicit(&w->n_run, 1, memory_order_relaxed);
		if (run.failed)
			result = JOBS_ST_FAILED;
	}
	if (sl->cleanup)
		sl->cleanup(sl->arg, ran);
	if (run.deferred && !deferred_returned(sl, &run, &result))
		return; /* jobs_complete completes it */
	jobs_complete_slot(s, sl, run.id, result, run.code, run.message, false);
}

void jobs_complete_slot(jobs_sched *s, jobs_slot *sl, jobs_id id, uint32_t result, int code,
			char *message, bool shared)
{
	jobs_edge *e = jobs_slot_complete(&s->receipts, sl, result, code, message);
	/* sl may be recycled from here on: use only id. */
	while (e) {
		jobs_edge *next = e->next;
		jobs_slot *d = e->dependent;
		if (result & JOBS_ST_FAILED) {
			jobs_id zero = 0;
			/* relaxed: read by the dependent only after its pending count hits zero, which the
			 * acq_rel decrement below orders after this store. */
			atomic_compare_exchange_strong_explicit(&d->failed_dep, &zero, id,
								memory_order_relaxed, memory_order_relaxed);
		}
		/* acq_rel: the last decrement acquires every earlier one (each released its
		 * predecessor's effects), so the job that becomes ready sees all of its dependencies. */
		if (atomic_fetch_sub_explicit(&d->pending, 1, memory_order_acq_rel) == 1) {
			if (shared)
				jobs_schedule_ready_shared(s, d);
			else
				jobs_schedule_ready(s, d);
		}
		free(e);
		e = next;
	}
}

void jobs_detached_frame(jobs_worker *w, void *payload)
{
	jobs_slot *sl;
	memcpy(&sl, payload, sizeof sl);
	jobs_run_slot(w, w->sched, sl);
}

static void ready_push(jobs_sched *s, jobs_slot *sl)
{
	jobs_slot *head = atomic_load_explicit(&s->ready, memory_order_relaxed);
	do {
		atomic_store_explicit(&sl->next, head, memory_order_relaxed);
		/* release: the slot (and the link just written) is visible to the exchanging consumer. */
	} while (!atomic_compare_exchange_weak_explicit(&s->ready, &head, sl, memory_order_release,
							memory_order_relaxed));
}

void jobs_schedule_ready(jobs_sched *s, jobs_slot *sl)
{
	jobs_worker *w = jobs_tls_worker(s);
	/* On one of our workers with room to spare: a detached frame on its own deque — LIFO, hot in
	 * cache, and stealable like any frame. Otherwise the shared ready stack. */
	if (w && (uint32_t)(w->top - w->dq) + 64 < w->capacity) {
		void *p = jobs_spawn_args(w);
		memcpy(p, &sl, sizeof sl);
		jobs_spawn(w, jobs_detached_frame);
		/* It may outlive the call that made it ready, under a typed task that holds top in a
		 * register: mark it (worker.h). */
		jobs_task_mark_owner(w, w->top - 1);
		/* A private frame is invisible to sleeping workers; if some sleep, publish it (which
		 * notifies) so that a ready job does not wait for us to finish what we are doing.
		 * relaxed: a heuristic for parallelism only — the owner runs its frames in any case. */
		if (JOBS_IDLE_SLEEPERS(atomic_load_explicit(&s->idle, memory_order_relaxed)) > 0)
			jobs_publish_all_owner(w);
		return;
	}
	ready_push(s, sl);
	jobs_notify_work(s);
}

void jobs_schedule_ready_shared(jobs_sched *s, jobs_slot *sl)
{
	ready_push(s, sl);
	jobs_notify_work(s);
}

/* ---------------------------------------------------------------------------------------------
 * Finding work
 */

static bool wake_one(jobs_sched *s);

static void start_searching(jobs_worker *w)
{
	if (!w->searching) {
		w->searching = true;
		/* relaxed: a notifier that reads this count and skips its wake-up relies on our later
		 * decrement of it (jobs_worker_found_work, or the pre-sleep RMW), an acquiring RMW that
		 * comes after the notifier's in the word's modification order; this increment only has
		 * to be an RMW, which keeps the release sequence going (docs/jobs.md, "Sleeping and
		 * waking"). */
		atomic_fetch_add_explicit(&w->sched->idle, JOBS_IDLE_SEARCHER, memory_order_relaxed);
	}
}

void jobs_worker_found_work(jobs_worker *w)
{
	if (w->searching) {
		w->searching = false;
		jobs_sched *s = w->sched;
		/* If we were the last searcher, others sleep and work is still visible, wake one so that
		 * a thief stays awake while stealable work remains. Work that becomes visible later
		 * wakes a sleeper itself (every publication notifies: jobs_notify_work), so a worker
		 * that took the only job no longer wakes a second one just to spin and sleep again
		 * (under a trickle of jobs that doubled the pool's CPU).
		 * acquire: a notifier that skipped its wake-up because it saw us searching read a value
		 * of `idle` that counts us, so its RMW (a release) precedes this one in the word's
		 * modification order and this one reads from its release sequence (the word is only
		 * modified by RMWs): the work it published happens-before our (relaxed) look below.
		 * The value we replace also tells us, in the same order, whether anybody sleeps. */
		uint64_t v = atomic_fetch_sub_explicit(&s->idle, JOBS_IDLE_SEARCHER, memory_order_acquire);
		if (JOBS_IDLE_SEARCHING(v) == 1 && JOBS_IDLE_SLEEPERS(v) > 0 && jobs_work_visible(s))
			(void)wake_one(s);
	}
}


bool jobs_find_and_run(jobs_worker *w)
{
	jobs_sched *s = w->sched;
	jobs_frame *base = w->top;

	/* 1. A detached job on top of our own deque (made ready by a job we ran). */
	if (w->top > w->dq && w->top[-1].fn == jobs_detached_frame) {
		jobs_worker_found_work(w);
		(void)jobs_pop_one_slow_owner(w, NULL, 0); /* private and stolen alike */
		return true;
	}
	/* 2. External submissions. */
	void *item;
	if (jobs_inject_pop_mpmc(&s->inject, &item)) {
		jobs_worker_found_work(w);
		jobs_run_slot(w, s, item);
		jobs_sync_to_owner(w, base);
		return true;
	}
	/* 3. Jobs made ready elsewhere: take them all, push them as detached frames (so that other
	 * workers can steal them from us), run them. */
	/* relaxed pre-check keeps the line shared while the stack is empty. */
	if (atomic_load_explicit(&s->ready, memory_order_relaxed)) {
		/* acquire: pairs with ready_push's release. */
		jobs_slot *list = atomic_exchange_explicit(&s->ready, NULL, memory_order_acquire);
		if (list) {
			jobs_worker_found_work(w);
			while (list) {
				jobs_slot *next = atomic_load_explicit(&list->next, memory_order_relaxed);
				if ((uint32_t)(w->top - w->dq) + 64 < w->capacity) {
					void *p = jobs_spawn_args(w);
					memcpy(p, &list, sizeof list);
					jobs_spawn(w, jobs_detached_frame);
				} else {
					ready_push(s, list); /* deque nearly full: leave the rest */
				}
				list = next;
			}
			jobs_publish_all_owner(w);
			jobs_sync_to_owner(w, base);
			return true;
		}
	}
	/* 4. Steal, nearest victims first. */
	for (int i = 0; i < w->n_victims; i++) {
		jobs_worker *v = s->ctx[w->victims[i]];
		int r = jobs_steal(w, v);
		if (r == JOBS_STEAL_OK) {
			if (jobs_trace_on())
				jobs_trace_instant("jobs", "steal", (uint64_t)w->victims[i] + 1); /* id: victim + 1 */
			return true;
		}
	}
	return false;
}

bool jobs_work_visible(jobs_sched *s)
{
	if (jobs_inject_maybe_nonempty(&s->inject))
		return true;
	if (atomic_load_explicit(&s->ready, memory_order_relaxed))
		return true;
	for (int i = 0; i < s->n_workers; i++) {
		jobs_worker *v = s->ctx[i];
		uint64_t ts = atomic_load_explicit(&v->ts, memory_order_relaxed);
		if (!atomic_load_explicit(&v->allstolen, memory_order_relaxed) &&
		    JOBS_TS_TAIL(ts) < JOBS_TS_SPLIT(ts))
			return true;
	}
	return false;
}

/* Wakes worker w: bumps its futex word and wakes it if it waits there. */
static void wake_worker(jobs_worker *w)
{
	/* relaxed: the sleeper's load of `park` happened-before this bump (wake_one: our claim of its
	 * bit acquired its release; destroy: see jobs_wake_all), so that load cannot read it (read-write
	 * coherence) and its FUTEX_WAIT either sees the new value in the kernel's compare and returns,
	 * or is queued before our FUTEX_WAKE looks (the kernel serialises both on the futex's bucket).
	 * No data is read on the strength of this value. */
	atomic_fetch_add_explicit(&w->park, 1, memory_order_relaxed);
	jobs_futex_wake(&w->park, 1);
}

/* Claims the wake-up of one worker that announced itself asleep (the lowest set bit of `asleep`:
 * the preferred worker, so that a trickle keeps one worker warm and the others asleep) and wakes
 * it. Returns false if no bit was set: every sleeper that the caller's value of `idle` counted is
 * then awake already or claimed by another notifier, and either way its next pre-sleep RMW
 * follows the caller's in `idle`'s order (docs/jobs.md, "Sleeping and waking"). */
static bool wake_one(jobs_sched *s)
{
	int words = (s->n_workers + 63) / 64;
	for (int k = 0; k < words; k++) {
		/* relaxed: a first look, to pick a bit; the claim below decides. The caller's acquiring
		 * RMW on `idle` made every counted sleeper's bit (set before its release RMW on `idle`)
		 * visible: this load reads it or a later value (write-read coherence). */
		uint64_t m = atomic_load_explicit(&s->asleep[k], memory_order_relaxed);
		while (m) {
			uint64_t bit = m & -m; /* the lowest: see above */
			/* acquire: pairs with the sleeper's release fetch_or of this bit (or, through the
			 * release sequence of RMWs, a later one), so its load of `park` happened-before our
			 * bump in wake_worker. The old value says whether the claim is ours: two notifiers
			 * never claim the same sleep, so a burst wakes distinct workers. */
			uint64_t old = atomic_fetch_and_explicit(&s->asleep[k], ~bit, memory_order_acquire);
			if (old & bit) {
				wake_worker(s->ctx[k * 64 + __builtin_ctzll(bit)]);
				return true;
			}
			m = old & ~bit; /* somebody else took it: look again at what is there now */
		}
	}
	return false;
}

void jobs_wake_all(jobs_sched *s)
{
	/* Called after the release store of `stopping`. A worker whose (acquiring) load of `park`
	 * reads our bump sees `stopping` set before it could sleep; one whose load read an older
	 * value waits on that value, which our bump changed: its FUTEX_WAIT returns at once or is
	 * woken by ours. Bits in `asleep` are left set: the workers clear their own. */
	for (int i = 0; i < s->n_workers; i++) {
		/* release: see above (pairs with the sleeper's acquiring load of `park`). */
		atomic_fetch_add_explicit(&s->ctx[i]->park, 1, memory_order_release);
		jobs_futex_wake(&s->ctx[i]->park, 1);
	}
}

/* The notifier's half of the sleep protocol: an RMW that changes nothing, on the word that the
 * sleepers and searchers modify with RMWs (ThreadSanitizer models it; it does not model the
 * seq_cst fence this used to be). acq_rel — Dekker with the sleeper, whose pre-sleep RMW on the
 * same word precedes its last look for work. The word's modification order puts one of the two
 * first. If ours comes first, the sleeper's RMW (acquire) reads from our release sequence, so the
 * work we published before this call happens-before its look, and it stays awake. If the
 * sleeper's comes first, ours reads a value that counts it asleep, and unless somebody searches
 * we claim the wake-up of a sleeper whose bit in `asleep` is set (wake_one): since we acquire the
 * sleeper's release, its bit is visible to us, and the claim acquires its load of `park` before
 * our bump, so its FUTEX_WAIT either sees the new value or is woken. If the bit is clear, the
 * sleeper is awake already or another notifier claimed it; either way it goes through a pre-sleep
 * RMW after ours before it can sleep again, and that RMW sees our work. A searcher that our value counts
 * decrements after our RMW in the same order and so acquires our publication before its own
 * look (jobs_worker_found_work, the pre-sleep RMW). Returns the value read. */
static uint64_t idle_sync(jobs_sched *s)
{
	return atomic_fetch_add_explicit(&s->idle, 0, memory_order_acq_rel);
}

void jobs_notify_work(jobs_sched *s)
{
	uint64_t v = idle_sync(s);
	if (JOBS_IDLE_SLEEPERS(v) > 0 && JOBS_IDLE_SEARCHING(v) == 0)
		(void)wake_one(s);
}

void jobs_kick(jobs_sched *s)
{
	if (JOBS_IDLE_SLEEPERS(idle_sync(s)) > 0) /* as in jobs_notify_work, searchers or not */
		(void)wake_one(s);
}

static _Thread_local unsigned tls_hook_depth; /* poll hook calls on this thread's stack */

bool jobs_in_poll_hook(void)
{
	return tls_hook_depth > 0;
}

static unsigned hook_invoke(jobs_poll_hook *h)
{
	tls_hook_depth++;
	unsigned r = h->fn(h->ctx);
	tls_hook_depth--;
	return r;
}

/* A rate-limited hook (interval > 0, read by the caller while counted in; a waiter's is shorter),
 * found due by hook_call's pre-check: one caller at a time (try-lock), a call starts at least
 * `interval` after the previous one. Callers that skip return the last report. */
static unsigned hook_call_limited(jobs_poll_hook *h, uint64_t interval)
{
	/* relaxed: the report is a hint for the sleep timeout, as the hook's result itself is. */
	unsigned r = atomic_load_explicit(&h->outstanding, memory_order_relaxed);
	/* acquire: pairs with the previous holder's release: its call (and its last_ns) happen-before
	 * ours, so calls are serialised and the hook needs no synchronisation between its calls. */
	if (atomic_exchange_explicit(&h->busy, 1, memory_order_acquire))
		return r;
	/* The clock is read under the lock: after the previous holder's read, so the difference is
	 * exact (CLOCK_MONOTONIC) and a call starts at least `interval` after the previous one. */
	uint64_t now = jobs_now_ns();
	uint64_t last = atomic_load_explicit(&h->last_ns, memory_order_relaxed);
	if (last == 0 || (now >= last && now - last >= interval)) { /* 0: never called, due at once */
		atomic_store_explicit(&h->last_ns, now, memory_order_relaxed); /* relaxed: under busy */
		r = hook_invoke(h);
		atomic_store_explicit(&h->outstanding, r, memory_order_relaxed); /* relaxed: a hint */
	}
	/* release: see the acquire above. */
	atomic_store_explicit(&h->busy, 0, memory_order_release);
	return r;
}

/* A waiter's interval for a rate-limited hook (jobs_poll_hooks_waiter): at most JOBS_WAITER_POLL_NS,
 * whatever the hook's; never 0 for a rate-limited hook, so that it stays rate-limited. */
#define JOBS_WAITER_POLL_NS 1000u
static uint64_t waiter_interval(uint64_t interval, bool waiter)
{
	return waiter && interval > JOBS_WAITER_POLL_NS ? JOBS_WAITER_POLL_NS : interval;
}

/* waiter: called by a thread waiting for a receipt (jobs_poll_hooks_waiter), which calls a
 * rate-limited hook at least every JOBS_WAITER_POLL_NS (1 us) but keeps its one-caller-at-a-time
 * rule. */
static unsigned hook_call(jobs_poll_hook *h, bool waiter)
{
	/* acquire: a pre-check that leaves the entry's line shared; the RMW below decides. Pairs with
	 * the registrar's release of ACTIVE, so the interval read next is a registration's. */
	if (!(atomic_load_explicit(&h->ref, memory_order_acquire) & JOBS_HOOK_ACTIVE))
		return 0;
	/* A rate-limited hook that is not due: its last report, without writing the entry. Searching
	 * workers call this on every round of their spin; with the counting RMWs below on every call,
	 * 16 of them kept the line moving between cores (and, before the entries had lines of their
	 * own, the `stopping` word beside it that every round reads): part of why a CPU-only step loop
	 * ran 2.6-4.5x slower in a build with the CUDA backend, whose poll hook is rate-limited (docs/
	 * performance.md, session 18). relaxed: hints (a stale or a later registration's value makes
	 * at most one call early or late, or one report stale, as the counted path's pre-check may). */
	uint64_t interval = waiter_interval(atomic_load_explicit(&h->interval_ns, memory_order_relaxed), waiter);
	uint64_t last = interval ? atomic_load_explicit(&h->last_ns, memory_order_relaxed) : 0;
	if (last && jobs_now_ns() - last < interval) /* last 0: never called (registration's value) */
		return atomic_load_explicit(&h->outstanding, memory_order_relaxed);
	/* acquire: pairs with the registrar's release of ACTIVE (fn, ctx, interval_ns visible). While
	 * we are counted, removal waits for us. */
	uint64_t v = atomic_fetch_add_explicit(&h->ref, 1, memory_order_acquire);
	unsigned r = 0;
	if (v & JOBS_HOOK_ACTIVE) {
		/* again, counted in: the registration we count in may be a later one than the pre-check
		 * saw, and a rate-limited hook must never be called unlimited. relaxed: fixed while
		 * counted, published by the acquire above. */
		interval = atomic_load_explicit(&h->interval_ns, memory_order_relaxed);
		r = interval ? hook_call_limited(h, waiter_interval(interval, waiter)) : hook_invoke(h);
	}
	/* release: our reads of the entry and the call happen-before the remover's acquire. */
	atomic_fetch_sub_explicit(&h->ref, 1, memory_order_release);
	return r;
}

static unsigned poll_hooks(jobs_sched *s, bool waiter)
{
	/* relaxed: a hint. A registration that we miss was followed by a jobs_kick, whose RMW on
	 * `idle` pairs with the sleeper's (docs/jobs.md, "Sleeping and waking"). */
	if (atomic_load_explicit(&s->n_hooks, memory_order_relaxed) == 0)
		return 0;
	unsigned outstanding = 0;
	for (uint32_t i = 0; i < JOBS_MAX_POLL_HOOKS; i++)
		outstanding += hook_call(&s->hooks[i], waiter);
	return outstanding;
}

unsigned jobs_poll_hooks(jobs_sched *s)
{
	return poll_hooks(s, false);
}

unsigned jobs_poll_hooks_waiter(jobs_sched *s)
{
	return poll_hooks(s, true);
}

void *jobs_worker_main(void *arg)
{
	jobs_worker *w = arg;
	jobs_sched *s = w->sched;
	jobs_tls_set(w);
	jobs_trace_thread_name("worker");
	if (s->cfg.pin)
		(void)jobs_topology_pin(&s->topo, w->index);
	else if (jobs_topology_is_near(&s->topo, w->index))
		(void)jobs_topology_bind_near(&s->topo); /* near the devices it serves, not one core */
	/* Adaptive spin window (docs/jobs.md, "Sleeping and waking"): a search that ends in sleep
	 * halves the next window; one that finds work while spinning, or a sleep that is woken
	 * within spin_max_ns / 4, doubles it; between spin_max_ns (the configured spin_us) and
	 * spin_max_ns / 128 (0.8 µs by default: at 1/32, 3 µs, the floor alone was more than half of
	 * a worker's CPU per job under a 10 kHz trickle). Under a trickle of jobs farther
	 * apart than the window every spin fails, so a woken worker spins briefly and sleeps again
	 * instead of burning the full window after each job; back-to-back work keeps it at the top.
	 * The clock (~30 ns) is read every 16th round while the backoff pauses (the first 64
	 * rounds, ~3 µs; 16 of them take about the bottom window) and on every round once it yields
	 * (each sched_yield ~1-1.4 µs here). Read every 16th round throughout, a window that ran
	 * out just after round 63 was only noticed at round 79: the 3 µs window lasted 20-26 µs,
	 * and under a trickle of jobs that overshoot was most of the pool's CPU. Read on every
	 * round throughout, the pauses took 64 clock reads longer to reach the first yield, and
	 * a worker sharing a core with the thread it waits for (2 loaded cores) handed the core
	 * over later: round trips 15 % slower (docs/performance.md). */
	const uint64_t spin_max_ns = (uint64_t)s->cfg.spin_us * 1000u;
	const uint64_t spin_min_ns = spin_max_ns / 128u;
	const uint64_t spin_wake_ns = spin_max_ns / 4u; /* a sleep shorter than this was too short */
	uint64_t spin_ns = spin_max_ns;
	const uint64_t asleep_bit = 1ull << (w->index % 64); /* ours in s->asleep[index / 64] */
	bool woken = false; /* the last sleep ended by a wake-up aimed at us, and we found nothing yet */
	start_searching(w);
	for (;;) {
		uint64_t idle_since = 0;
		unsigned spins = 0;
		for (;;) {
			if (jobs_find_and_run(w)) {
				woken = false;
				if (idle_since) /* found while spinning: the window paid off */
					spin_ns = spin_ns * 2u > spin_max_ns ? spin_max_ns : spin_ns * 2u;
				jobs_worker_found_work(w);
				/* keep draining; we come back searching when we run dry */
				while (jobs_find_and_run(w))
					;
				start_searching(w);
				idle_since = 0;
				spins = 0;
				continue;
			}
			(void)jobs_poll_hooks(s);
			/* acquire: pairs with destroy's release store; it then sees everything queued. Poll
			 * sources still outstanding do not hold a worker: destroy polls them for a bounded
			 * grace period itself, then cancels what still waits. */
			if (atomic_load_explicit(&s->stopping, memory_order_acquire) && !jobs_work_visible(s) &&
			    w->top == w->dq)
				goto out;
			if (!idle_since)
				idle_since = jobs_now_ns();
			else if (((spins & 15) == 15 || spins >= 64) && jobs_now_ns() - idle_since >= spin_ns)
				break; /* the clock: see above */
			jobs_backoff(&spins);
		}
		/* the window found nothing: halve the next one */
		spin_ns = spin_ns / 2u < spin_min_ns ? spin_min_ns : spin_ns / 2u;
		if (woken) /* the last wake-up brought us nothing (a statistic: the fan-out's cost) */
			atomic_fetch_add_explicit(&w->n_empty_wakeups, 1, memory_order_relaxed);
		woken = false;
		/* Sleep (docs/jobs.md, "Sleeping and waking"). acquire: pairs with destroy's release bump
		 * (jobs_wake_all): if we read it, we see `stopping` below. We read `park` before
		 * announcing ourselves, so a wake-up claimed after that changes the word and our
		 * FUTEX_WAIT returns at once. */
		uint32_t seq = atomic_load_explicit(&w->park, memory_order_acquire);
		/* release: a notifier that claims our bit (acquire, wake_one) then bumps `park` after our
		 * load above. Sequenced before the RMW on `idle` below, so a notifier whose RMW there
		 * counts us asleep also sees this bit (or its clearing by a claim or by us). */
		atomic_fetch_or_explicit(&s->asleep[w->index / 64], asleep_bit, memory_order_release);
		/* acq_rel: the sleeper's half of the Dekker pattern (idle_sync): one RMW counts us
		 * asleep and no longer searching (we were searching: the window above ran out). Acquire:
		 * a notifier whose RMW came first published work our look below sees. Release: a
		 * notifier whose RMW comes later acquires our bit in `asleep` (and our load of park). */
		w->searching = false;
		atomic_fetch_add_explicit(&s->idle, JOBS_IDLE_SLEEPER - JOBS_IDLE_SEARCHER, memory_order_acq_rel);
		unsigned outstanding = jobs_poll_hooks(s);
		/* A hook may have resolved a fence and made a job ready on our own deque (private: no other
		 * worker sees it), so look there too before sleeping. */
		if (w->top == w->dq && !jobs_work_visible(s) &&
		    !atomic_load_explicit(&s->stopping, memory_order_acquire)) {
			atomic_fetch_add_explicit(&w->n_sleeps, 1, memory_order_relaxed);
			/* With poll sources outstanding, sleep briefly so that we come back to poll them. */
			uint64_t slept_at = jobs_now_ns();
			jobs_futex_wait(&w->park, seq, outstanding ? 200000u : ~(uint64_t)0);
			/* relaxed: a statistic (was the sleep ended by a wake-up aimed at us?). */
			if (atomic_load_explicit(&w->park, memory_order_relaxed) != seq) {
				woken = true;
				atomic_fetch_add_explicit(&w->n_wakeups, 1, memory_order_relaxed);
			}
			if (jobs_trace_on()) /* the same clock (CLOCK_MONOTONIC) */
				jobs_trace_span("jobs", "park", slept_at, jobs_now_ns(), 0);
			/* Woken within a quarter of the full window of falling asleep: the wake-up (a
			 * system call on both sides, ~5-10 µs of CPU and tens of µs of latency) cost more
			 * than spinning that long would have. Double the window. Longer sleeps keep it:
			 * under a trickle of jobs 30-100 µs apart (10-30 kHz) the full-window rule grew the
			 * window to its top, and the worker spun most of each gap (10 kHz with 1 worker on
			 * the 16-core machine: 14.7 % of a core against 3.8 % for a condvar thread). */
			if (jobs_now_ns() - slept_at < spin_wake_ns)
				spin_ns = spin_ns * 2u > spin_max_ns ? spin_max_ns : spin_ns * 2u;
		}
		/* Withdraw our bit unless a notifier claimed it (then it is clear already). relaxed:
		 * the load only spares the RMW; the RMW itself only has to be an RMW (it continues the
		 * release sequences of the other sleepers' bits) — a notifier that finds our bit clear
		 * relies on nothing from us but that we are awake, and our next sleep goes through
		 * the announcing RMWs above. */
		if (atomic_load_explicit(&s->asleep[w->index / 64], memory_order_relaxed) & asleep_bit)
			atomic_fetch_and_explicit(&s->asleep[w->index / 64], ~asleep_bit, memory_order_relaxed);
		/* relaxed: awake again and searching, in one RMW; what we look at next is ordered by
		 * the publications' own releases, and we go back to sleep only through the pre-sleep
		 * RMW above. */
		w->searching = true;
		atomic_fetch_add_explicit(&s->idle, JOBS_IDLE_SEARCHER - JOBS_IDLE_SLEEPER, memory_order_relaxed);
	}
out:
	jobs_worker_found_work(w);
	jobs_tls_set(NULL);
	return NULL;
}
