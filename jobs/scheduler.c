/*
 * scheduler.c — creating and destroying a scheduler, submitting jobs, and the receipt calls
 * (poll, wait, result, release, fence resolution).
 */
#include <sched.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"
#include "deque.h"
#include "park.h"
#include "scheduler.h"

void jobs_config_default(jobs_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->workers = -1;
	cfg->pin = false;
	cfg->near_pci = NULL;
	cfg->queue_capacity = 4096;
	cfg->receipt_capacity = 65536;
	cfg->deque_capacity = 1u << 16;
	cfg->spin_us = 100;
}

int jobs_sched_workers(const jobs_sched *s)
{
	return s->n_workers;
}

int jobs_sched_near_workers(const jobs_sched *s)
{
	return s->n_workers < s->topo.near_cores ? s->n_workers : s->topo.near_cores;
}

int jobs_sched_near_workers_of(const jobs_sched *s, const char *pci_bus_id)
{
	return jobs_topology_count_near(&s->topo, jobs_sched_near_workers(s), pci_bus_id);
}

jobs_worker *jobs_current_worker(const jobs_sched *s)
{
	return jobs_tls_worker(s);
}

static void sched_free(jobs_sched *s)
{
	if (s->ctx)
		for (int i = 0; i < s->n_ctx; i++)
			jobs_worker_free(s->ctx[i]);
	free(s->ctx);
	free(s->threads);
	if (s->receipts.slots)
		jobs_receipts_fini(&s->receipts);
	if (s->inject.cells)
		jobs_inject_fini(&s->inject);
	jobs_topology_fini(&s->topo);
	free(s);
}

jobs_sched *jobs_sched_create(const jobs_config *cfg_in, const char **err)
{
	static const char *dummy;
	if (!err)
		err = &dummy;
	jobs_trace_init(); /* OVSTAGE_TRACE, read once per process */
	jobs_config cfg;
	jobs_config_default(&cfg);
	if (cfg_in) {
		cfg = *cfg_in;
		if (!cfg.queue_capacity)
			cfg.queue_capacity = 4096;
		if (!cfg.receipt_capacity)
			cfg.receipt_capacity = 65536;
		if (!cfg.deque_capacity)
			cfg.deque_capacity = 1u << 16;
		if (!cfg.spin_us)
			cfg.spin_us = 100;
	}
	if (cfg.deque_capacity < 256 || cfg.deque_capacity > (1u << 30)) {
		*err = "deque_capacity must be within [256, 2^30]";
		return NULL;
	}
	if (cfg.workers > JOBS_MAX_WORKERS) {
		*err = "workers must be at most 4096";
		return NULL;
	}
	jobs_sched *s = aligned_alloc(JOBS_CACHE_LINE, sizeof *s);
	if (!s) {
		*err = "out of memory";
		return NULL;
	}
	memset(s, 0, sizeof *s);
	s->cfg = cfg;
	if (!jobs_topology_init(&s->topo, cfg.topology, cfg.near_pci, err)) {
		free(s);
		return NULL;
	}
	s->cfg.near_pci = NULL; /* read during create only: the caller's string need not outlive it */
	s->n_workers = cfg.workers < 0 ? s->topo.n_cores : cfg.workers;
	if (s->n_workers > JOBS_MAX_WORKERS) /* a topology with more cores than a pool may have */
		s->n_workers = JOBS_MAX_WORKERS;
	s->n_ctx = s->n_workers > 0 ? s->n_workers : 1;
	if (!jobs_receipts_init(&s->receipts, cfg.receipt_capacity) ||
	    !jobs_inject_init(&s->inject, cfg.queue_capacity)) {
		*err = "out of memory (receipt table or injection queue)";
		sched_free(s);
		return NULL;
	}
	s->ctx = calloc((size_t)s->n_ctx, sizeof *s->ctx);
	s->threads = calloc((size_t)(s->n_workers ? s->n_workers : 1), sizeof *s->threads);
	if (!s->ctx || !s->threads) {
		*err = "out of memory";
		sched_free(s);
		return NULL;
	}
	for (int i = 0; i < s->n_ctx; i++) {
		s->ctx[i] = jobs_worker_new(s, i, cfg.deque_capacity);
		if (!s->ctx[i]) {
			*err = "out of memory (worker deque)";
			sched_free(s);
			return NULL;
		}
		s->ctx[i]->victims = calloc((size_t)s->n_ctx, sizeof(int));
		if (!s->ctx[i]->victims) {
			*err = "out of memory";
			sched_free(s);
			return NULL;
		}
		s->ctx[i]->n_victims = s->n_workers > 1 ? s->n_workers - 1 : 0;
		jobs_topology_steal_order(&s->topo, i, s->n_ctx, s->ctx[i]->victims);
	}
	atomic_init(&s->ready, NULL);
	atomic_init(&s->idle, 0);
	for (int i = 0; i < JOBS_ASLEEP_WORDS; i++)
		atomic_init(&s->asleep[i], 0);
	atomic_init(&s->stopping, 0);
	atomic_init(&s->cancelling, 0);
	atomic_init(&s->helper_busy, 0);
	atomic_init(&s->n_hooks, 0);
	for (int i = 0; i < JOBS_MAX_POLL_HOOKS; i++) {
		atomic_init(&s->hooks[i].ref, 0);
		atomic_init(&s->hooks[i].busy, 0);
		atomic_init(&s->hooks[i].outstanding, 0);
		atomic_init(&s->hooks[i].last_ns, 0);
	}
	for (int i = 0; i < s->n_workers; i++) {
		if (pthread_create(&s->threads[i], NULL, jobs_worker_main, s->ctx[i]) != 0) {
			/* stop the ones already started */
			atomic_store_explicit(&s->stopping, 1, memory_order_release);
			jobs_wake_all(s); /* every context exists; waking one whose thread does not is harmless */
			for (int j = 0; j < i; j++)
				pthread_join(s->threads[j], NULL);
			*err = "pthread_create failed";
			sched_free(s);
			return NULL;
		}
	}
	return s;
}

/* Runs everything runnable on the calling thread through context ctx[0] (0-worker pools, and
 * destroy's drain). The caller owns ctx[0]. */
static void drain_on_helper(jobs_sched *s)
{
	jobs_worker *w = s->ctx[0];
	jobs_worker *prev = jobs_tls_worker(s);
	jobs_tls_set(w);
	while (jobs_find_and_run(w))
		;
	jobs_tls_set(prev);
}

static bool cancel_deferred(jobs_sched *s, jobs_slot *sl); /* "Deferred completion" below */

void jobs_sched_destroy(jobs_sched *s)
{
	if (!s)
		return;
	/* Phase 1: let the workers finish everything runnable, then exit. release: pairs with the
	 * workers' acquire; whatever was submitted before destroy is visible to them. */
	atomic_store_explicit(&s->stopping, 1, memory_order_release);
	jobs_wake_all(s);
	for (int i = 0; i < s->n_workers; i++)
		pthread_join(s->threads[i], NULL);
	/* 0-worker pools (and anything made ready after the workers exited): drain here. Poll sources
	 * (CUDA events, say) get a bounded grace period to complete, so that work they gate runs
	 * rather than being cancelled — but an event that never completes cannot hang destroy. */
	drain_on_helper(s);
	uint64_t grace_end = jobs_now_ns() + 200000000u; /* 200 ms */
	while (jobs_poll_hooks(s) > 0 && jobs_now_ns() < grace_end) {
		drain_on_helper(s);
		struct timespec ts = { 0, 100000 };
		nanosleep(&ts, NULL);
	}
	drain_on_helper(s);
	/* Phase 2: jobs still waiting for fences nobody will resolve complete as CANCELLED (their
	 * cleanup runs with ran = false), which may make dependents ready; those cancel in turn. */
	atomic_store_explicit(&s->cancelling, 1, memory_order_relaxed);
	for (;;) {
		bool any = false;
		for (uint64_t i = 0; i <= s->receipts.mask; i++) {
			jobs_slot *sl = &s->receipts.slots[i];
			uint32_t st = atomic_load_explicit(&sl->state, memory_order_acquire);
			if (!(st & JOBS_ST_LIVE) || (st & JOBS_ST_DONE))
				continue;
			if (cancel_deferred(s, sl)) {
				any = true;
				continue;
			}
			/* Resolve the fences nobody resolved; jobs that still wait for dependencies are
			 * cancelled when those complete (every chain ends in a fence or runnable work). */
			uint32_t f = atomic_exchange_explicit(&sl->fences_left, 0, memory_order_relaxed);
			if (f == 0)
				continue;
			any = true;
			if (atomic_fetch_sub_explicit(&sl->pending, (int32_t)f, memory_order_acq_rel) == (int32_t)f)
				jobs_schedule_ready(s, sl);
		}
		drain_on_helper(s);
		if (!any)
			break;
	}
	/* Free the edge lists of anything left (none should be) and the table itself. */
	sched_free(s);
}

/* ---------------------------------------------------------------------------------------------
 * Submission and fences
 */

jobs_status jobs_submit(jobs_sched *s, const jobs_job_desc *d, jobs_id *out_id)
{
	if (out_id)
		*out_id = JOBS_INVALID_ID;
	if (!s || !d || !d->fn || !out_id || (d->after_count && !d->after))
		return JOBS_INVALID;
	jobs_id id;
	jobs_slot *sl = jobs_slot_alloc(&s->receipts, &id);
	if (!sl)
		return JOBS_FULL;
	if (jobs_trace_on()) { /* the submission, and the start of its flow to the run */
		jobs_trace_instant("jobs", "spawn", id);
		jobs_trace_flow('s', "job", id);
	}
	sl->fn = d->fn;
	sl->arg = d->arg;
	sl->cleanup = d->cleanup;
	sl->flags = d->flags;
	sl->tag = d->tag;
	/* relaxed: nobody else can reach the slot until we add edges (release) or publish it. */
	atomic_store_explicit(&sl->fences_left, d->fences, memory_order_relaxed);
	atomic_store_explicit(&sl->pending, (int32_t)(1 + d->after_count + d->fences),
			      memory_order_relaxed);

	/* Pin every dependency first, so that a bad id rejects the submission before any edge exists. */
	jobs_slot *stackbuf[8];
	jobs_slot **deps = d->after_count <= 8 ? stackbuf : malloc(d->after_count * sizeof *deps);
	jobs_edge **edges = d->after_count ? malloc(d->after_count * sizeof *edges) : NULL;
	if ((d->after_count > 8 && !deps) || (d->after_count && !edges)) {
		if (deps != stackbuf)
			free(deps);
		free(edges);
		jobs_slot_abandon(&s->receipts, sl);
		return JOBS_NOMEM;
	}
	size_t pinned = 0;
	jobs_status st = JOBS_OK;
	bool may_be_gone = (d->flags & JOBS_AFTER_MAY_BE_RELEASED) != 0;
	for (; pinned < d->after_count; pinned++) {
		edges[pinned] = malloc(sizeof(jobs_edge));
		bool gone = false;
		if (!edges[pinned])
			deps[pinned] = NULL;
		else if (may_be_gone)
			deps[pinned] = jobs_slot_pin_or_gone(&s->receipts, d->after[pinned], &gone);
		else
			deps[pinned] = jobs_slot_pin(&s->receipts, d->after[pinned], false);
		if (gone) {
			/* Recycled: it completed, and its completion happens-before this point (the acquire
			 * in jobs_slot_pin_or_gone). Keep a NULL entry: no edge. */
			continue;
		}
		if (!deps[pinned]) {
			st = edges[pinned] ? JOBS_INVALID : JOBS_NOMEM;
			free(edges[pinned]);
			break;
		}
	}
	if (st != JOBS_OK) {
		for (size_t i = 0; i < pinned; i++) {
			if (deps[i])
				jobs_slot_unpin(&s->receipts, deps[i]);
			free(edges[i]);
		}
		if (deps != stackbuf)
			free(deps);
		free(edges);
		jobs_slot_abandon(&s->receipts, sl);
		return st;
	}
	for (size_t i = 0; i < d->after_count; i++) {
		bool failed = false;
		if (!deps[i]) { /* recycled dependency: complete */
			free(edges[i]);
			atomic_fetch_sub_explicit(&sl->pending, 1, memory_order_relaxed);
			continue;
		}
		if (!jobs_slot_add_edge(deps[i], sl, edges[i], &failed)) {
			free(edges[i]);
			if (failed) {
				jobs_id zero = 0;
				atomic_compare_exchange_strong_explicit(&sl->failed_dep, &zero, d->after[i],
									memory_order_relaxed,
									memory_order_relaxed);
			}
			/* relaxed: we still hold the submission count, so this cannot reach zero. */
			atomic_fetch_sub_explicit(&sl->pending, 1, memory_order_relaxed);
		}
		jobs_slot_unpin(&s->receipts, deps[i]);
	}
	if (deps != stackbuf)
		free(deps);
	free(edges);

	/* Publish the id before the job can run (its body and completion read it). */
	jobs_worker *w = jobs_tls_worker(s);
	jobs_slot_publish(sl, id);
	/* Drop the submission count. acq_rel: if we are last, we acquire the dependencies' effects. */
	if (atomic_fetch_sub_explicit(&sl->pending, 1, memory_order_acq_rel) == 1) {
		if (d->flags & JOBS_RUN_INLINE) {
			/* Runnable now and asked to run here. The slot cannot be recycled under us: its id
			 * has not been returned, so nobody can release it. */
			jobs_run_slot(w, s, sl);
		} else if (w) {
			jobs_schedule_ready(s, sl);
		} else if (!jobs_inject_push_mpmc(&s->inject, sl)) {
			/* Full. No edge points at us (all dependencies were complete) and the id has not been
			 * returned: unpublish it and give the slot back. Not accepted: the caller keeps `arg`;
			 * cleanup does not run. */
			/* release: every id store is one (receipt.h, "Gone receipts"). */
			atomic_store_explicit(&sl->id, 0, memory_order_release);
			jobs_slot_abandon(&s->receipts, sl);
			return JOBS_FULL;
		} else {
			jobs_notify_work(s);
		}
	}
	*out_id = id;
	return JOBS_OK;
}

/* Resolves one fence of `id`; if it was the last, runs the job here (JOBS_RUN_INLINE and `inline_ok`)
 * or schedules it (on our deque if we are a worker and `inline_ok`, else on the shared ready stack). */
static jobs_status fence_resolve(jobs_sched *s, jobs_id id, bool inline_ok)
{
	if (!s)
		return JOBS_INVALID;
	jobs_slot *sl = jobs_slot_pin(&s->receipts, id, true);
	if (!sl)
		return JOBS_INVALID;
	uint32_t f = atomic_load_explicit(&sl->fences_left, memory_order_relaxed);
	do {
		if (f == 0) {
			jobs_slot_unpin(&s->receipts, sl);
			return JOBS_INVALID;
		}
		/* relaxed: fences_left only guards against over-resolution; pending orders the data. */
	} while (!atomic_compare_exchange_weak_explicit(&sl->fences_left, &f, f - 1, memory_order_relaxed,
							memory_order_relaxed));
	/* acq_rel: as for dependency edges — the resolver's writes happen-before the job. */
	bool ready = atomic_fetch_sub_explicit(&sl->pending, 1, memory_order_acq_rel) == 1;
	jobs_slot_unpin(&s->receipts, sl);
	/* sl cannot be recycled below: it is not DONE until it runs. */
	if (!ready)
		return JOBS_OK;
	if (!inline_ok)
		jobs_schedule_ready_shared(s, sl);
	else if (sl->flags & JOBS_RUN_INLINE)
		jobs_run_slot(jobs_tls_worker(s), s, sl);
	else
		jobs_schedule_ready(s, sl);
	return JOBS_OK;
}

jobs_status jobs_fence_resolve(jobs_sched *s, jobs_id id)
{
	return fence_resolve(s, id, true);
}

jobs_status jobs_fence_resolve_async(jobs_sched *s, jobs_id id)
{
	return fence_resolve(s, id, false);
}

/* ---------------------------------------------------------------------------------------------
 * Deferred completion
 */

/* The message of a failed deferred completion: a copy of msg, or a generic one. */
static char *defer_message(jobs_id id, int code, const char *msg)
{
	char *m = NULL;
	if (msg)
		return strdup(msg);
	if (asprintf(&m, "op %llu failed (code %d)", (unsigned long long)id, code) < 0)
		return NULL;
	return m;
}

/* Claims the completion of a deferred job: false unless it deferred and nobody claimed it yet. */
static bool defer_claim(jobs_slot *sl)
{
	uint32_t v = atomic_load_explicit(&sl->defer, memory_order_relaxed);
	do {
		if (!(v & JOBS_DEFER_ARMED) || (v & JOBS_DEFER_CLAIMED))
			return false;
		/* relaxed: the claim only excludes other completers; GIVEN (acq_rel) orders the data. */
	} while (!atomic_compare_exchange_weak_explicit(&sl->defer, &v, v | JOBS_DEFER_CLAIMED,
							memory_order_relaxed, memory_order_relaxed));
	return true;
}

jobs_status jobs_complete(jobs_sched *s, jobs_id id, int code, const char *msg)
{
	if (!s)
		return JOBS_INVALID;
	jobs_slot *sl = jobs_slot_pin(&s->receipts, id, true);
	if (!sl)
		return JOBS_INVALID;
	if (!defer_claim(sl)) {
		jobs_slot_unpin(&s->receipts, sl);
		return JOBS_INVALID;
	}
	/* Plain writes: we own the result fields now; the body's return reads them only after
	 * acquiring GIVEN, and the DONE release publishes them to everyone else. */
	sl->code = code;
	sl->message = code ? defer_message(id, code, msg) : NULL;
	/* Not DONE, and only we (after GIVEN) or the body's return (after seeing GIVEN) complete it:
	 * it cannot be recycled under us without the pin. */
	jobs_slot_unpin(&s->receipts, sl);
	/* acq_rel: release — our result (and what we did before this call) happens-before the body's
	 * return if it completes; acquire — if it returned first, its effects happen-before ours. */
	uint32_t old = atomic_fetch_or_explicit(&sl->defer, JOBS_DEFER_GIVEN, memory_order_acq_rel);
	if (old & JOBS_DEFER_RETURNED)
		jobs_complete_slot(s, sl, id, code ? JOBS_ST_FAILED : 0, sl->code, sl->message, true);
	return JOBS_OK;
}

/* Destroy: a deferred job whose completion never came completes as cancelled (the caller of
 * destroy guarantees that no jobs_complete races with it). True if sl was one. */
static bool cancel_deferred(jobs_sched *s, jobs_slot *sl)
{
	uint32_t v = atomic_load_explicit(&sl->defer, memory_order_relaxed);
	if (!(v & JOBS_DEFER_RETURNED) || !defer_claim(sl))
		return false;
	jobs_id id = atomic_load_explicit(&sl->id, memory_order_relaxed);
	char *m = NULL;
	if (asprintf(&m, "op %llu cancelled: the scheduler was destroyed before its deferred completion",
		     (unsigned long long)id) < 0)
		m = NULL;
	jobs_complete_slot(s, sl, id, JOBS_ST_FAILED | JOBS_ST_CANCELLED, JOBS_CODE_CANCELLED, m, true);
	return true;
}

/* ---------------------------------------------------------------------------------------------
 * Receipts
 */

jobs_status jobs_poll(jobs_sched *s, jobs_id id)
{
	if (!s || id == JOBS_INVALID_ID)
		return JOBS_INVALID;
	jobs_slot *sl = &s->receipts.slots[id & s->receipts.mask];
	/* acquire, acquire, relaxed: id then state then id again. If the id is unchanged across the
	 * state load, the state belongs to our receipt (ids never repeat; recycling clears the id
	 * before freeing the state, and the acquire on state orders the second id load after it). */
	if (atomic_load_explicit(&sl->id, memory_order_acquire) != id)
		return JOBS_INVALID;
	uint32_t st = atomic_load_explicit(&sl->state, memory_order_acquire);
	if (atomic_load_explicit(&sl->id, memory_order_relaxed) != id || !(st & JOBS_ST_LIVE) ||
	    (st & JOBS_ST_RELEASED))
		return JOBS_INVALID;
	return jobs_status_of(st);
}

/* Helps from a worker thread: run other work until the slot is done or the deadline passes. */
static uint32_t wait_helping(jobs_worker *w, jobs_slot *sl, uint64_t deadline)
{
	unsigned spins = 0;
	uint32_t st;
	jobs_publish_all_owner(w); /* nothing we hold may be stuck private while we wait */
	while (!((st = atomic_load_explicit(&sl->state, memory_order_acquire)) & JOBS_ST_DONE)) {
		if (w->depth < JOBS_MAX_HELP_DEPTH) {
			w->depth++;
			bool did = jobs_find_and_run(w);
			w->depth--;
			if (did) {
				spins = 0;
				continue;
			}
		}
		if (deadline && jobs_now_ns() >= deadline)
			break;
		jobs_backoff(&spins);
	}
	return st;
}

/* Parks an external thread: spin a little (round trips are often a few microseconds), then sleep
 * on the state word. 0-worker pools: run the jobs ourselves. While poll sources are outstanding
 * (a GPU op's completion event, say) the spinning waiter polls them itself, every 16th look, and
 * keeps spinning up to WAIT_POLL_SPIN_NS: the receipt it waits for then completes when the source
 * does, not when an idle worker next wakes (workers with outstanding sources sleep 200 us). */
#define WAIT_SPIN_NS 20000ull        /* 20 us */
#define WAIT_POLL_SPIN_NS 1000000ull /* 1 ms, only while poll sources are outstanding */
static uint32_t wait_parking(jobs_sched *s, jobs_slot *sl, uint64_t deadline)
{
	uint32_t st;
	uint64_t now = jobs_now_ns();
	uint64_t start = now, spin_until = now + WAIT_SPIN_NS;
	unsigned spins = 0, iter = 0;
	for (;;) {
		st = atomic_load_explicit(&sl->state, memory_order_acquire);
		if (st & JOBS_ST_DONE)
			return st;
		/* The clock costs tens of ns: while spinning, read it every 16th look only. */
		if ((++iter & 15) == 0 || now >= spin_until)
			now = jobs_now_ns();
		if ((iter & 15) == 0 && now < spin_until && s->n_workers > 0 && jobs_poll_hooks_waiter(s) > 0 &&
		    spin_until < start + WAIT_POLL_SPIN_NS)
			spin_until = start + WAIT_POLL_SPIN_NS;
		if (deadline && now >= deadline)
			return st;
		if (s->n_workers == 0) {
			uint32_t zero = 0;
			/* acquire/release: ownership of ctx[0] passes between waiting threads. */
			if (atomic_compare_exchange_strong_explicit(&s->helper_busy, &zero, 1,
								    memory_order_acquire, memory_order_relaxed)) {
				jobs_worker *w = s->ctx[0];
				jobs_tls_set(w);
				(void)jobs_poll_hooks_waiter(s); /* no worker polls them in a 0-worker pool */
				bool did = jobs_find_and_run(w);
				jobs_tls_set(NULL);
				atomic_store_explicit(&s->helper_busy, 0, memory_order_release);
				if (did)
					continue;
			}
		}
		if (now < spin_until) {
			jobs_backoff(&spins);
			continue;
		}
		uint64_t left = deadline ? deadline - now : ~(uint64_t)0;
		if (s->n_workers == 0 && left > 1000000)
			left = 1000000; /* another helper may leave work behind: look again every 1 ms */
		/* Sleep on the state word with SLEEPER set, so that the completion wakes us (it skips
		 * the system call when no waiter set it): receipt.h, "Parking". The next look decides. */
		(void)jobs_futex_wait_flagged(&sl->state, st, JOBS_ST_SLEEPER, left);
	}
}

static jobs_status wait_pinned(jobs_sched *s, jobs_slot *sl, uint64_t timeout_ns)
{
	uint32_t st = atomic_load_explicit(&sl->state, memory_order_acquire);
	if (!(st & JOBS_ST_DONE) && timeout_ns != 0) {
		uint64_t deadline = timeout_ns == JOBS_TIMEOUT_INFINITE ? 0 : jobs_now_ns() + timeout_ns;
		jobs_worker *w = jobs_tls_worker(s);
		st = w ? wait_helping(w, sl, deadline) : wait_parking(s, sl, deadline);
	}
	return jobs_status_of(st);
}

jobs_status jobs_wait(jobs_sched *s, jobs_id id, uint64_t timeout_ns)
{
	if (!s)
		return JOBS_INVALID;
	jobs_slot *sl = jobs_slot_pin(&s->receipts, id, false);
	if (!sl)
		return JOBS_INVALID;
	jobs_status r = wait_pinned(s, sl, timeout_ns);
	jobs_slot_unpin(&s->receipts, sl);
	return r;
}

jobs_status jobs_receipt_result(jobs_sched *s, jobs_id id, int *code, char *buf, size_t size)
{
	if (code)
		*code = 0;
	if (buf && size)
		buf[0] = '\0';
	if (!s)
		return JOBS_INVALID;
	jobs_slot *sl = jobs_slot_pin(&s->receipts, id, false);
	if (!sl)
		return JOBS_INVALID;
	/* acquire: pairs with the DONE release; code and message are then stable. */
	uint32_t st = atomic_load_explicit(&sl->state, memory_order_acquire);
	if (st & JOBS_ST_DONE) {
		if (code)
			*code = sl->code;
		if (buf && size && sl->message)
			snprintf(buf, size, "%s", sl->message);
	}
	jobs_slot_unpin(&s->receipts, sl);
	return jobs_status_of(st);
}

jobs_status jobs_receipt_failed_dependency(jobs_sched *s, jobs_id id, jobs_id *dep)
{
	if (!s || !dep)
		return JOBS_INVALID;
	jobs_slot *sl = jobs_slot_pin(&s->receipts, id, false);
	if (!sl)
		return JOBS_INVALID;
	/* acquire: written (relaxed) before the dependency's acq_rel decrement that the completion of
	 * this job follows; observing DONE on this slot (acquire) orders it. */
	uint32_t st = atomic_load_explicit(&sl->state, memory_order_acquire);
	*dep = (st & JOBS_ST_DONE) ? atomic_load_explicit(&sl->failed_dep, memory_order_relaxed) : 0;
	jobs_slot_unpin(&s->receipts, sl);
	return JOBS_OK;
}

jobs_status jobs_receipt_tag(jobs_sched *s, jobs_id id, uint64_t *tag)
{
	if (!s || !tag)
		return JOBS_INVALID;
	jobs_slot *sl = jobs_slot_pin(&s->receipts, id, false);
	if (!sl)
		return JOBS_INVALID;
	*tag = sl->tag; /* written before the id was published (release), read under the pin */
	jobs_slot_unpin(&s->receipts, sl);
	return JOBS_OK;
}

jobs_status jobs_release(jobs_sched *s, jobs_id id)
{
	if (!s)
		return JOBS_INVALID;
	return jobs_slot_release(&s->receipts, id);
}

/* Pins id for its owner: NULL when it is unknown or released or carries another tag. */
static jobs_slot *pin_tagged(jobs_sched *s, jobs_id id, uint64_t tag)
{
	jobs_slot *sl = s ? jobs_slot_pin(&s->receipts, id, false) : NULL;
	if (sl && sl->tag != tag) { /* written before the id was published (release), read under the pin */
		jobs_slot_unpin(&s->receipts, sl);
		return NULL;
	}
	return sl;
}

jobs_status jobs_wait_tagged(jobs_sched *s, jobs_id id, uint64_t tag, uint64_t timeout_ns)
{
	jobs_slot *sl = pin_tagged(s, id, tag);
	if (!sl)
		return JOBS_INVALID;
	jobs_status r = wait_pinned(s, sl, timeout_ns);
	jobs_slot_unpin(&s->receipts, sl);
	return r;
}

jobs_status jobs_release_tagged(jobs_sched *s, jobs_id id, uint64_t tag)
{
	jobs_slot *sl = pin_tagged(s, id, tag);
	return sl ? jobs_slot_release_pinned(&s->receipts, sl) : JOBS_INVALID;
}

jobs_status jobs_submit_done(jobs_sched *s, uint64_t tag, jobs_id *out_id)
{
	if (out_id)
		*out_id = JOBS_INVALID_ID;
	if (!s || !out_id)
		return JOBS_INVALID;
	jobs_id id;
	jobs_slot *sl = jobs_slot_alloc(&s->receipts, &id);
	if (!sl)
		return JOBS_FULL;
	if (jobs_trace_on())
		jobs_trace_instant("jobs", "done", id);
	sl->fn = NULL; /* no body: nothing ever runs it (it is never made ready) */
	sl->arg = NULL;
	sl->cleanup = NULL;
	sl->flags = 0;
	sl->tag = tag;
	/* relaxed: the slot is ours until its id is published, and it has no dependencies or fences. */
	atomic_store_explicit(&sl->pending, 0, memory_order_relaxed);
	jobs_slot_publish(sl, id);
	/* Done before the id is returned: no edge can point at it yet (edges come from submitters that
	 * hold the id), so there is nothing to propagate. The DONE release publishes the slot's fields
	 * to whoever observes it, as for a job that ran. */
	jobs_edge *e = jobs_slot_complete(&s->receipts, sl, 0, 0, NULL);
	(void)e; /* NULL: see above */
	*out_id = id;
	return JOBS_OK;
}

/* Claims a free hook entry with a new generation; returns its index or -1 if none is free. */
static int hook_claim(jobs_sched *s, uint64_t *gen)
{
	for (int i = 0; i < JOBS_MAX_POLL_HOOKS; i++) {
		jobs_poll_hook *h = &s->hooks[i];
		uint64_t v = atomic_load_explicit(&h->ref, memory_order_relaxed);
		while (!(v & (JOBS_HOOK_CLAIMED | JOBS_HOOK_ACTIVE))) {
			uint64_t g = (JOBS_HOOK_GEN(v) + 1) & JOBS_HOOK_GEN_MASK;
			g = g ? g : 1;
			uint64_t nv = (v & 0xffffffffu) | JOBS_HOOK_CLAIMED | (g << JOBS_HOOK_GEN_SHIFT);
			/* acquire: pairs with the release that freed the entry: the previous registration's
			 * callers have finished reading fn/ctx before we overwrite them. */
			if (atomic_compare_exchange_weak_explicit(&h->ref, &v, nv, memory_order_acquire,
								  memory_order_relaxed)) {
				*gen = g;
				return i;
			}
		}
	}
	return -1;
}

jobs_status jobs_add_poll_hook_rate(jobs_sched *s, jobs_poll_fn fn, void *ctx, uint64_t min_interval_ns,
				    jobs_hook_id *out)
{
	if (out)
		*out = 0;
	if (!s || !fn)
		return JOBS_INVALID;
	uint64_t gen;
	int i = hook_claim(s, &gen);
	if (i < 0)
		return JOBS_FULL;
	jobs_poll_hook *h = &s->hooks[i];
	h->fn = fn;
	h->ctx = ctx;
	atomic_store_explicit(&h->interval_ns, min_interval_ns, memory_order_relaxed); /* relaxed: as below */
	/* relaxed: published by the release of ACTIVE below (busy is 0: the last holder released it). */
	atomic_store_explicit(&h->last_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&h->outstanding, 0, memory_order_relaxed);
	/* release: the fields above are visible to callers whose acquiring increment sees ACTIVE. */
	atomic_fetch_or_explicit(&h->ref, JOBS_HOOK_ACTIVE, memory_order_release);
	/* relaxed: a hint for pollers; the kick's RMW on `idle` orders it for sleepers. */
	atomic_fetch_add_explicit(&s->n_hooks, 1, memory_order_relaxed);
	jobs_kick(s);
	if (out)
		*out = (gen << 8) | (uint64_t)i;
	return JOBS_OK;
}

jobs_status jobs_add_poll_hook(jobs_sched *s, jobs_poll_fn fn, void *ctx)
{
	return jobs_add_poll_hook_rate(s, fn, ctx, 0, NULL);
}

jobs_status jobs_remove_poll_hook(jobs_sched *s, jobs_hook_id id)
{
	uint64_t idx = id & 0xffu, gen = id >> 8;
	if (!s || idx >= JOBS_MAX_POLL_HOOKS || gen == 0 || gen > JOBS_HOOK_GEN_MASK || jobs_in_poll_hook())
		return JOBS_INVALID;
	jobs_poll_hook *h = &s->hooks[idx];
	uint64_t v = atomic_load_explicit(&h->ref, memory_order_relaxed);
	do {
		if (!(v & JOBS_HOOK_ACTIVE) || JOBS_HOOK_GEN(v) != gen)
			return JOBS_INVALID; /* never registered, removed already, or a later registration */
		/* relaxed: this CAS only decides between removers; the wait below orders the calls. */
	} while (!atomic_compare_exchange_weak_explicit(&h->ref, &v, v & ~JOBS_HOOK_ACTIVE,
							memory_order_relaxed, memory_order_relaxed));
	atomic_fetch_sub_explicit(&s->n_hooks, 1, memory_order_relaxed); /* relaxed: a hint */
	/* acquire: the value read lies in the release sequence of every caller's decrement, so every
	 * call that saw ACTIVE has returned and happens-before our return. Callers that arrive now see
	 * ACTIVE clear and touch nothing but the count. */
	while (JOBS_HOOK_CALLS(atomic_load_explicit(&h->ref, memory_order_acquire)) != 0)
		sched_yield();
	/* release: pairs with the next registrar's acquiring claim. */
	atomic_fetch_and_explicit(&h->ref, ~JOBS_HOOK_CLAIMED, memory_order_release);
	return JOBS_OK;
}

void jobs_sched_stats(jobs_sched *s, jobs_stats *out)
{
	memset(out, 0, sizeof *out);
	for (int i = 0; i < s->n_ctx; i++) {
		out->jobs_run += atomic_load_explicit(&s->ctx[i]->n_run, memory_order_relaxed);
		out->steals += atomic_load_explicit(&s->ctx[i]->n_steals, memory_order_relaxed);
		out->sleeps += atomic_load_explicit(&s->ctx[i]->n_sleeps, memory_order_relaxed);
		out->wakeups += atomic_load_explicit(&s->ctx[i]->n_wakeups, memory_order_relaxed);
		out->empty_wakeups += atomic_load_explicit(&s->ctx[i]->n_empty_wakeups, memory_order_relaxed);
	}
	out->receipts_live = (uint64_t)atomic_load_explicit(&s->receipts.live, memory_order_relaxed);
}
