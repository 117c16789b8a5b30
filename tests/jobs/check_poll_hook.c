/*
 * check_poll_hook.c — idle-time poll hooks: idle workers call them; a fence that a hook resolves
 * (the way a CUDA event query would) completes its job even when every worker was asleep, once
 * jobs_kick wakes one; hooks reporting outstanding sources keep workers polling; at most 8 hooks.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "jobs.h"
#include "jobs_test_util.h"

/* A simulated asynchronous event source: the test "completes the event" by setting `flag`; the
 * hook notices on its next poll and resolves the fence of the job waiting for it. */
struct event_src {
	jobs_sched *s;
	_Atomic jobs_id id;       /* the fenced job (0: nothing outstanding) */
	_Atomic int flag;         /* set by the test: the event completed */
	_Atomic int resolved;     /* times the hook resolved the fence */
	_Atomic uint64_t calls;   /* hook calls */
	_Atomic int resolve_errors;
};

static unsigned event_hook(void *ctx)
{
	struct event_src *e = ctx;
	atomic_fetch_add_explicit(&e->calls, 1, memory_order_relaxed);
	jobs_id id = atomic_load_explicit(&e->id, memory_order_acquire);
	if (!id)
		return 0;
	if (!atomic_load_explicit(&e->flag, memory_order_acquire))
		return 1; /* still outstanding: keep polling */
	/* the event completed: exactly one caller claims it (hooks run on several workers) */
	if (atomic_compare_exchange_strong(&e->id, &id, 0)) {
		if (jobs_fence_resolve(e->s, id) != JOBS_OK)
			atomic_fetch_add(&e->resolve_errors, 1);
		atomic_fetch_add(&e->resolved, 1);
	}
	return 0;
}

struct cnt {
	_Atomic int body;
};

/* The job is ready as soon as the hook resolved its fence: waits beyond this are a safety net. */
#define HOOK_WAIT_NS (5ull * 1000000000ull)

static void cnt_body(jobs_worker *w, void *arg, jobs_run *run)
{
	atomic_fetch_add(&((struct cnt *)arg)->body, 1);
}

static void wait_until_asleep(jobs_sched *s, uint64_t sleeps_before, const char *what)
{
	uint64_t start = jt_now_ns();
	jobs_stats st;
	for (;;) {
		jobs_sched_stats(s, &st);
		if (st.sleeps > sleeps_before)
			return;
		ck_assert_msg(jt_now_ns() - start < JT_SAFETY_NS, "%s: workers never went to sleep", what);
		jt_sleep_us(200);
	}
}

START_TEST(test_hook_called_by_idle_workers)
{
	jobs_sched *s = jt_sched(_i + 1);
	struct event_src *e = calloc(1, sizeof *e); /* heap: hooks outlive a failed test */
	e->s = s;
	jt_assert_status(jobs_add_poll_hook(s, event_hook, e), JOBS_OK, "add hook");
	uint64_t start = jt_now_ns();
	while (atomic_load(&e->calls) == 0) {
		ck_assert_msg(jt_now_ns() - start < JT_SAFETY_NS, "idle workers never called the hook");
		jobs_kick(s);
		jt_sleep_us(100);
	}
	jobs_sched_destroy(s);
	free(e);
}
END_TEST

/* Workers asleep (indefinitely: nothing outstanding); then a fenced job is registered with the
 * hook and the test kicks; the event completes later and the hook resolves the fence. */
START_TEST(test_hook_resolves_fence_after_sleep)
{
	int workers = _i + 1;
	jobs_sched *s = jt_sched(workers);
	struct event_src *e = calloc(1, sizeof *e); /* heap: hooks outlive a failed test */
	e->s = s;
	jt_assert_status(jobs_add_poll_hook(s, event_hook, e), JOBS_OK, "add hook");
	int rounds = (int)jt_scaled(20, 4);
	uint64_t sleeps_seen = 0; /* a worker that ran or was kicked sleeps again afterwards */
	for (int r = 0; r < rounds; r++) {
		wait_until_asleep(s, sleeps_seen, "before registering");
		jobs_stats st;
		jobs_sched_stats(s, &st);
		sleeps_seen = st.sleeps;
		struct cnt c = {0};
		jobs_job_desc d = {.fn = cnt_body, .arg = &c, .fences = 1};
		jobs_id id;
		jt_assert_status(jobs_submit(s, &d, &id), JOBS_OK, "submit fenced");
		atomic_store(&e->flag, 0);
		atomic_store_explicit(&e->id, id, memory_order_release);
		if (r % 2 == 0) {
			/* kick first: a worker wakes, sees the source outstanding, keeps polling */
			jobs_kick(s);
			jt_sleep_us(500);
			atomic_store_explicit(&e->flag, 1, memory_order_release);
		} else {
			/* event completes first, then the kick */
			atomic_store_explicit(&e->flag, 1, memory_order_release);
			jobs_kick(s);
		}
		jobs_status ws = jobs_wait(s, id, HOOK_WAIT_NS);
		if (ws != JOBS_OK) {
			jobs_kick(s);
			jobs_status after_kick = jobs_wait(s, id, HOOK_WAIT_NS);
			jobs_sched_destroy(s); /* before failing: the job and hook refer to this frame */
			free(e);
			ck_assert_msg(0,
				      "workers=%d round %d: fenced job %s 5 s after the hook's event "
				      "(after another jobs_kick: %s)",
				      workers, r, jt_status_name(ws), jt_status_name(after_kick));
		}
		ck_assert_int_eq(atomic_load(&c.body), 1);
		jt_assert_status(jobs_release(s, id), JOBS_OK, "release");
	}
	ck_assert_msg(atomic_load(&e->resolved) == rounds, "hook resolved %d fences, expected %d",
		      atomic_load(&e->resolved), rounds);
	ck_assert_msg(atomic_load(&e->resolve_errors) == 0, "%d resolve errors in the hook",
		      atomic_load(&e->resolve_errors));
	jobs_sched_destroy(s);
	free(e);
}
END_TEST

/* The event completes while the worker is going idle (spinning, about to sleep), at a random
 * moment: whichever of the worker's hook calls resolves the fence, the job must run — the worker
 * must not fall asleep with the job it just made ready. */
START_TEST(test_hook_resolves_while_going_idle)
{
	jobs_config cfg;
	jobs_config_default(&cfg);
	cfg.workers = 1;
	cfg.spin_us = 20;
	jobs_sched *s = jt_sched_cfg(&cfg);
	struct event_src *e = calloc(1, sizeof *e); /* heap: hooks outlive a failed test */
	e->s = s;
	jt_assert_status(jobs_add_poll_hook(s, event_hook, e), JOBS_OK, "add hook");
	int rounds = (int)jt_scaled(3000, 300);
	uint64_t rng = 5;
	for (int r = 0; r < rounds; r++) {
		struct cnt c = {0}, warm = {0};
		jobs_job_desc d = {.fn = cnt_body, .arg = &c, .fences = 1};
		jobs_id id, idw;
		jt_assert_status(jobs_submit(s, &d, &id), JOBS_OK, "submit fenced");
		atomic_store(&e->flag, 0);
		atomic_store_explicit(&e->id, id, memory_order_release);
		/* a plain job: when it is done the worker starts going idle, polling the hook */
		jobs_job_desc dw = {.fn = cnt_body, .arg = &warm};
		jt_assert_status(jobs_submit(s, &dw, &idw), JOBS_OK, "submit plain");
		jt_assert_status(jobs_wait(s, idw, JT_WAIT_NS), JOBS_OK, "wait plain");
		jt_assert_status(jobs_release(s, idw), JOBS_OK, "release plain");
		unsigned delay = (unsigned)jt_below(&rng, 60);
		if (delay)
			jt_sleep_us(delay);
		atomic_store_explicit(&e->flag, 1, memory_order_release);
		/* no kick: the worker polls on its own while the source is outstanding */
		jobs_status ws = jobs_wait(s, id, HOOK_WAIT_NS);
		if (ws == JOBS_PENDING) {
			jobs_kick(s); /* does a kick get it going? (for the message) */
			jobs_status after_kick = jobs_wait(s, id, HOOK_WAIT_NS);
			int resolved = atomic_load(&e->resolved);
			jobs_sched_destroy(s); /* before failing: the hook's context must outlive the pool */
			free(e);
			ck_assert_msg(0,
				      "round %d of %d: the hook resolved the fence (%d fences so far) but the "
				      "job did not run for 5 s; after jobs_kick: %s (the worker slept with "
				      "the job it had just made ready)",
				      r, rounds, resolved, jt_status_name(after_kick));
		}
		ck_assert_msg(ws == JOBS_OK, "round %d: fenced job %s", r, jt_status_name(ws));
		jt_assert_status(jobs_release(s, id), JOBS_OK, "release");
	}
	jobs_sched_destroy(s);
	free(e);
}
END_TEST

/* Many outstanding sources resolved at random moments from another thread, with dependents. */
struct multi_src {
	jobs_sched *s;
	int n;
	_Atomic jobs_id *ids;  /* fenced jobs */
	_Atomic int *flags;    /* completed events */
	_Atomic int pending;   /* sources not yet resolved */
	_Atomic int errors;
};

static unsigned multi_hook(void *ctx)
{
	struct multi_src *m = ctx;
	unsigned outstanding = 0;
	for (int i = 0; i < m->n; i++) {
		jobs_id id = atomic_load_explicit(&m->ids[i], memory_order_acquire);
		if (!id)
			continue;
		if (!atomic_load_explicit(&m->flags[i], memory_order_acquire)) {
			outstanding++;
			continue;
		}
		if (atomic_compare_exchange_strong(&m->ids[i], &id, 0)) {
			if (jobs_fence_resolve(m->s, id) != JOBS_OK)
				atomic_fetch_add(&m->errors, 1);
			atomic_fetch_sub(&m->pending, 1);
		}
	}
	return outstanding;
}

static void *completer_main(void *arg)
{
	struct multi_src *m = arg;
	uint64_t rng = 99;
	for (int i = m->n - 1; i >= 0; i--) {
		if (jt_below(&rng, 4) == 0)
			jt_sleep_us((unsigned)jt_below(&rng, 300));
		atomic_store_explicit(&m->flags[i], 1, memory_order_release);
		if (jt_below(&rng, 2) == 0)
			jobs_kick(m->s);
	}
	return NULL;
}

START_TEST(test_hook_many_sources)
{
	jobs_sched *s = jt_sched(2);
	enum { N = 64 };
	/* heap, not stack: the hook and the jobs must not point into a frame a failed test left */
	struct many {
		struct multi_src m;
		_Atomic jobs_id ids[N];
		_Atomic int flags[N];
		struct cnt c[N], after;
		jobs_id plain[N];
	} *x = calloc(1, sizeof *x);
	struct multi_src *m = &x->m;
	m->s = s;
	m->n = N;
	m->ids = x->ids;
	m->flags = x->flags;
	atomic_init(&m->pending, N);
	jt_assert_status(jobs_add_poll_hook(s, multi_hook, m), JOBS_OK, "add hook");
	for (int i = 0; i < N; i++) {
		jobs_job_desc d = {.fn = cnt_body, .arg = &x->c[i], .fences = 1};
		jt_assert_status(jobs_submit(s, &d, &x->plain[i]), JOBS_OK, "submit fenced");
		atomic_store_explicit(&x->ids[i], x->plain[i], memory_order_release);
	}
	jobs_job_desc da = {.fn = cnt_body, .arg = &x->after, .after = x->plain, .after_count = N};
	jobs_id ida;
	jt_assert_status(jobs_submit(s, &da, &ida), JOBS_OK, "submit after all");
	pthread_t th;
	ck_assert(pthread_create(&th, NULL, completer_main, m) == 0);
	jobs_status ws = jobs_wait(s, ida, HOOK_WAIT_NS * 4);
	pthread_join(th, NULL);
	if (ws != JOBS_OK) {
		jobs_kick(s);
		jobs_status after_kick = jobs_wait(s, ida, HOOK_WAIT_NS);
		int pending = atomic_load(&m->pending);
		jobs_sched_destroy(s);
		free(x);
		ck_assert_msg(0, "joint dependent of 64 hook-resolved fences: %s (after a kick: %s), %d sources unresolved",
			      jt_status_name(ws), jt_status_name(after_kick), pending);
	}
	ck_assert_int_eq(atomic_load(&m->pending), 0);
	ck_assert_int_eq(atomic_load(&m->errors), 0);
	for (int i = 0; i < N; i++)
		ck_assert_msg(atomic_load(&x->c[i].body) == 1, "source %d: job ran %d times", i,
			      atomic_load(&x->c[i].body));
	ck_assert_int_eq(atomic_load(&x->after.body), 1);
	jobs_sched_destroy(s);
	free(x);
}
END_TEST

/* A hook that still reports a source outstanding at destroy: destroy returns once the source
 * completes (here, after a while, from another thread). */
struct late_src {
	_Atomic int outstanding;
};

static unsigned late_hook(void *ctx)
{
	struct late_src *l = ctx;
	return (unsigned)atomic_load_explicit(&l->outstanding, memory_order_acquire);
}

static void *late_main(void *arg)
{
	struct late_src *l = arg;
	jt_sleep_us(20000);
	atomic_store_explicit(&l->outstanding, 0, memory_order_release);
	return NULL;
}

START_TEST(test_destroy_with_finite_outstanding)
{
	jobs_sched *s = jt_sched(2);
	struct late_src *l = calloc(1, sizeof *l);
	atomic_init(&l->outstanding, 1);
	jt_assert_status(jobs_add_poll_hook(s, late_hook, l), JOBS_OK, "add hook");
	pthread_t th;
	ck_assert(pthread_create(&th, NULL, late_main, l) == 0);
	jobs_sched_destroy(s);
	pthread_join(th, NULL);
	free(l);
}
END_TEST

static unsigned nop_hook(void *ctx)
{
	atomic_fetch_add((_Atomic int *)ctx, 1);
	return 0;
}

static unsigned nop_hook_counting(void *ctx)
{
	atomic_fetch_add_explicit((_Atomic uint64_t *)ctx, 1, memory_order_relaxed);
	return 0;
}

START_TEST(test_hook_limit)
{
	jobs_sched *s = jt_sched(1);
	_Atomic int *calls = calloc(8, sizeof *calls);
	for (int i = 0; i < 8; i++) {
		atomic_init(&calls[i], 0);
		jt_assert_status(jobs_add_poll_hook(s, nop_hook, &calls[i]), JOBS_OK, "hook within 8");
	}
	_Atomic int extra = 0;
	jt_assert_status(jobs_add_poll_hook(s, nop_hook, &extra), JOBS_FULL, "9th hook");
	jt_assert_status(jobs_add_poll_hook(s, nop_hook, &extra), JOBS_FULL, "10th hook");
	/* every registered hook gets called */
	uint64_t start = jt_now_ns();
	for (int i = 0; i < 8; i++) {
		while (atomic_load(&calls[i]) == 0) {
			ck_assert_msg(jt_now_ns() - start < JT_SAFETY_NS, "hook %d never called", i);
			jobs_kick(s);
			jt_sleep_us(100);
		}
	}
	jobs_sched_destroy(s);
	free(calls);
	ck_assert_int_eq(atomic_load(&extra), 0);
}
END_TEST

/* ---- rate-limited hooks and removal ---- */

/* A rate-limited source: always outstanding (so idle workers keep polling), counts its calls and
 * checks that no two overlap. */
struct rated {
	_Atomic uint64_t calls;   /* hook calls */
	_Atomic int inside;       /* threads inside the hook right now */
	_Atomic int overlaps;     /* calls that found another one inside */
	long plain;               /* plain: only ever touched inside the hook (serialised calls) */
	unsigned report;          /* what the hook returns */
};

static unsigned rated_hook(void *ctx)
{
	struct rated *r = ctx;
	if (atomic_fetch_add(&r->inside, 1) != 0)
		atomic_fetch_add(&r->overlaps, 1);
	r->plain++; /* a data race (TSan) unless calls are ordered one after another */
	atomic_fetch_add_explicit(&r->calls, 1, memory_order_relaxed);
	atomic_fetch_sub(&r->inside, 1);
	return r->report;
}

/* Many idle workers (4x the cores), one hook limited to one call per 2 ms, polled for ~100 ms:
 * consecutive call starts lie 2 ms apart, and every call starts between t0 and t1, so there are
 * at most (t1 - t0) / 2 ms + 1 calls — a bound the code guarantees, not a timing measurement. */
START_TEST(test_hook_rate_limited)
{
	const uint64_t interval = 2000000; /* 2 ms */
	jobs_sched *s = jt_sched(8);
	struct rated *r = calloc(1, sizeof *r);
	struct rated *free_running = calloc(1, sizeof *free_running);
	r->report = 1;
	free_running->report = 0;
	uint64_t t0 = jt_now_ns();
	jobs_hook_id id = 0, id0 = 0;
	jt_assert_status(jobs_add_poll_hook_rate(s, rated_hook, r, interval, &id), JOBS_OK, "add rated");
	ck_assert(id != 0);
	/* an unlimited hook next to it is still called (and may overlap; not checked) */
	jt_assert_status(jobs_add_poll_hook_rate(s, nop_hook_counting, &free_running->calls, 0, &id0),
			 JOBS_OK, "add unlimited");
	uint64_t start = jt_now_ns();
	while (jt_now_ns() - start < 100000000u || atomic_load(&r->calls) < 2) {
		ck_assert_msg(jt_now_ns() - start < JT_SAFETY_NS, "the rated hook was not called twice");
		jobs_kick(s);
		jt_sleep_us(500);
	}
	jt_assert_status(jobs_remove_poll_hook(s, id), JOBS_OK, "remove rated");
	uint64_t t1 = jt_now_ns();
	uint64_t calls = atomic_load(&r->calls);
	ck_assert_msg(calls <= (t1 - t0) / interval + 1, "%llu calls in %llu ns with a %llu ns interval",
		      (unsigned long long)calls, (unsigned long long)(t1 - t0),
		      (unsigned long long)interval);
	ck_assert_int_eq(atomic_load(&r->overlaps), 0);
	ck_assert_int_eq(r->plain, (long)calls);
	jt_assert_status(jobs_remove_poll_hook(s, id0), JOBS_OK, "remove unlimited");
	ck_assert(atomic_load(&free_running->calls) > 0);
	jobs_sched_destroy(s);
	free(r);
	free(free_running);
}
END_TEST

/* The waiter's poll (jobs_poll_hooks_waiter): for a thread spinning in jobs_wait a rate-limited
 * hook is due 1 us after its previous call, whatever its interval. The hook's interval is an hour
 * and idle workers have made their first call, so only a waiter can resolve the fence; the job
 * completes for jobs_wait and the resolving call is the waiting thread's. */
static pthread_t g_waiter_thread;  /* written before the hook is registered */
static _Atomic int g_resolved_by_waiter;

static unsigned waiter_event_hook(void *ctx)
{
	struct event_src *e = ctx;
	int before = atomic_load(&e->resolved);
	unsigned r = event_hook(ctx);
	if (atomic_load(&e->resolved) != before)
		atomic_store(&g_resolved_by_waiter, pthread_equal(pthread_self(), g_waiter_thread) ? 1 : -1);
	return r;
}

START_TEST(test_hook_waiter_ignores_interval)
{
	jobs_sched *s = jt_sched(2);
	struct event_src *e = calloc(1, sizeof *e);
	e->s = s;
	g_waiter_thread = pthread_self();
	atomic_store(&g_resolved_by_waiter, 0);
	jobs_hook_id hid;
	jt_assert_status(jobs_add_poll_hook_rate(s, waiter_event_hook, e, 3600ull * 1000000000ull, &hid), JOBS_OK,
			 "add rated");
	uint64_t start = jt_now_ns();
	while (atomic_load(&e->calls) == 0) { /* the first call: due at once (nothing called it yet) */
		ck_assert_msg(jt_now_ns() - start < JT_SAFETY_NS, "idle workers never called the hook");
		jobs_kick(s);
		jt_sleep_us(100);
	}
	struct cnt c = {0};
	jobs_job_desc d = {.fn = cnt_body, .arg = &c, .fences = 1};
	jobs_id id;
	jt_assert_status(jobs_submit(s, &d, &id), JOBS_OK, "submit fenced");
	atomic_store_explicit(&e->flag, 1, memory_order_release); /* the "event" is complete already */
	atomic_store_explicit(&e->id, id, memory_order_release);
	jobs_kick(s); /* workers wake, find the hook not due for an hour, and sleep again */
	jobs_status ws;
	start = jt_now_ns();
	while ((ws = jobs_wait(s, id, 100000000ull)) != JOBS_OK) /* each call spins, polling, then parks */
		ck_assert_msg(jt_now_ns() - start < 10ull * 1000000000ull, "the waiter never resolved the fence (%s)",
			      jt_status_name(ws));
	ck_assert_int_eq(atomic_load(&c.body), 1);
	ck_assert_int_eq(atomic_load(&e->resolved), 1);
	ck_assert_msg(atomic_load(&g_resolved_by_waiter) == 1, "the fence was resolved by %s",
		      atomic_load(&g_resolved_by_waiter) < 0 ? "another thread" : "nobody");
	jt_assert_status(jobs_release(s, id), JOBS_OK, "release");
	jt_assert_status(jobs_remove_poll_hook(s, hid), JOBS_OK, "remove");
	jobs_sched_destroy(s);
	free(e);
}
END_TEST

/* After removal returns, the hook is never called again; ids are checked; entries are reused. */
START_TEST(test_hook_remove)
{
	jobs_sched *s = jt_sched(_i + 1);
	_Atomic int *calls = calloc(1, sizeof *calls);
	jobs_hook_id id;
	jt_assert_status(jobs_add_poll_hook_rate(s, nop_hook, calls, 0, &id), JOBS_OK, "add");
	uint64_t start = jt_now_ns();
	while (atomic_load(calls) == 0) {
		ck_assert_msg(jt_now_ns() - start < JT_SAFETY_NS, "hook never called");
		jobs_kick(s);
		jt_sleep_us(100);
	}
	jt_assert_status(jobs_remove_poll_hook(s, id), JOBS_OK, "remove");
	int after = atomic_load(calls);
	for (int k = 0; k < 20; k++) {
		jobs_kick(s);
		jt_sleep_us(200);
	}
	ck_assert_int_eq(atomic_load(calls), after); /* nothing after removal returned */
	jt_assert_status(jobs_remove_poll_hook(s, id), JOBS_INVALID, "second remove");
	jt_assert_status(jobs_remove_poll_hook(s, 0), JOBS_INVALID, "remove 0");
	jt_assert_status(jobs_remove_poll_hook(s, (id & ~0xffull) | 200), JOBS_INVALID, "bad index");
	/* all 8 entries are free again; a stale id does not remove the entry's new registration */
	_Atomic int *more = calloc(8, sizeof *more);
	jobs_hook_id ids[8];
	for (int i = 0; i < 8; i++)
		jt_assert_status(jobs_add_poll_hook_rate(s, nop_hook, &more[i], 0, &ids[i]), JOBS_OK, "re-add");
	jt_assert_status(jobs_add_poll_hook_rate(s, nop_hook, calls, 0, NULL), JOBS_FULL, "9th");
	jt_assert_status(jobs_remove_poll_hook(s, id), JOBS_INVALID, "stale id");
	for (int i = 0; i < 8; i++)
		jt_assert_status(jobs_remove_poll_hook(s, ids[i]), JOBS_OK, "remove each");
	jobs_sched_destroy(s);
	free(more);
	free(calls);
}
END_TEST

/* Removal from inside a hook is refused (it would wait for itself). */
struct self_remove {
	jobs_sched *s;
	_Atomic jobs_hook_id id;
	_Atomic int tried;    /* claimed by the first call */
	_Atomic int refused;  /* its result ... */
	_Atomic int done;     /* ... published after it (the test waits for this, not for tried) */
};

static unsigned self_remove_hook(void *ctx)
{
	struct self_remove *x = ctx;
	jobs_hook_id id = atomic_load(&x->id);
	if (id && !atomic_exchange(&x->tried, 1)) {
		atomic_store(&x->refused, jobs_remove_poll_hook(x->s, id) == JOBS_INVALID);
		atomic_store(&x->done, 1); /* seq_cst: after refused */
	}
	return 0;
}

START_TEST(test_hook_remove_from_hook)
{
	jobs_sched *s = jt_sched(1);
	struct self_remove *x = calloc(1, sizeof *x);
	x->s = s;
	jobs_hook_id id;
	jt_assert_status(jobs_add_poll_hook_rate(s, self_remove_hook, x, 0, &id), JOBS_OK, "add");
	atomic_store(&x->id, id);
	uint64_t start = jt_now_ns();
	while (!atomic_load(&x->done)) {
		ck_assert_msg(jt_now_ns() - start < JT_SAFETY_NS, "hook never called");
		jobs_kick(s);
		jt_sleep_us(100);
	}
	ck_assert(atomic_load(&x->refused));
	jt_assert_status(jobs_remove_poll_hook(s, id), JOBS_OK, "remove from outside");
	jobs_sched_destroy(s);
	free(x);
}
END_TEST

/* Register and remove repeatedly while idle workers poll: the hook's context is freed right after
 * each removal (ASan/TSan catch a call that outlives it). */
struct cookie {
	uint64_t magic;        /* plain: written before registration, read by the hook */
	_Atomic uint64_t calls; /* hook calls */
};

static unsigned cookie_hook(void *ctx)
{
	struct cookie *c = ctx;
	jt_check(c->magic == 0xC00C1Eu, "hook called with a dead context");
	atomic_fetch_add_explicit(&c->calls, 1, memory_order_relaxed);
	return 1; /* outstanding: keep the workers polling */
}

START_TEST(test_hook_remove_while_polled)
{
	jobs_sched *s = jt_sched(4);
	int rounds = (int)jt_scaled(300, 30);
	for (int r = 0; r < rounds; r++) {
		struct cookie *c = malloc(sizeof *c);
		c->magic = 0xC00C1Eu;
		atomic_init(&c->calls, 0);
		jobs_hook_id id;
		uint64_t interval = (r % 3) ? 0 : 100000; /* every third one rate-limited (100 us) */
		jt_assert_status(jobs_add_poll_hook_rate(s, cookie_hook, c, interval, &id), JOBS_OK, "add");
		if (r % 4 == 0)
			jt_sleep_us(200);
		jt_assert_status(jobs_remove_poll_hook(s, id), JOBS_OK, "remove");
		c->magic = 0;
		free(c);
	}
	jobs_sched_destroy(s);
	jt_assert_no_thread_failures();
}
END_TEST

static Suite *poll_hook_suite(void)
{
	Suite *su = suite_create("jobs_poll_hook");
	TCase *tc = tcase_create("hooks");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_hook_called_by_idle_workers, 0, 2);
	tcase_add_loop_test(tc, test_hook_resolves_fence_after_sleep, 0, 2);
	tcase_add_test(tc, test_hook_resolves_while_going_idle);
	tcase_add_test(tc, test_hook_many_sources);
	tcase_add_test(tc, test_destroy_with_finite_outstanding);
	tcase_add_test(tc, test_hook_limit);
	tcase_add_test(tc, test_hook_rate_limited);
	tcase_add_test(tc, test_hook_waiter_ignores_interval);
	tcase_add_loop_test(tc, test_hook_remove, 0, 2);
	tcase_add_test(tc, test_hook_remove_from_hook);
	tcase_add_test(tc, test_hook_remove_while_polled);
	suite_add_tcase(su, tc);
	return su;
}

JT_MAIN(poll_hook_suite)
