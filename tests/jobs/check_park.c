/*
 * check_park.c — parking on receipts loses nothing: every waiter wakes and every completion is
 * seen, with many more threads than cores, waiters that time out and come back (stale SLEEPER
 * flags), and threads that release their ids at once (receipt.h, "Parking"; park.h's waiter flag).
 *
 * A lost wake-up shows as a waiter blocked forever in jobs_wait(JOBS_TIMEOUT_INFINITE): the test
 * thread then fails after the JT_SAFETY_NS safety net, naming how many waiters are still blocked.
 * "Seen" is checked through plain (non-atomic) writes of the job bodies that the waiters read after
 * their wait: under ThreadSanitizer a missing happens-before from the completion is a report.
 * In a 0-worker pool waiters sleep at most 1 ms at a time (they may have jobs to run), so there a
 * lost wake-up shows only as slowness; the 1- and 2-worker cases catch it (a mutant whose waiter
 * sleeps without setting SLEEPER failed all four of them, each after the safety net).
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jobs.h"
#include "jobs_test_util.h"

static const int worker_counts[] = {0, 1, 2};

/* A scheduler with a small receipt table, so that ids released at once are recycled at once. */
static jobs_sched *park_sched(int workers, uint32_t receipts)
{
	jobs_config cfg;
	jobs_config_default(&cfg);
	cfg.workers = workers;
	cfg.spin_us = 20;
	cfg.receipt_capacity = receipts;
	return jt_sched_cfg(&cfg);
}

/* Waits for *counter to reach `want` (acquire), yielding. After the safety net it sets *abandon
 * (so that the test's threads that are not blocked stop instead of spinning on) and fails. */
static void await_count(_Atomic long *counter, long want, _Atomic bool *abandon, const char *what)
{
	uint64_t start = jt_now_ns();
	long got;
	while ((got = atomic_load_explicit(counter, memory_order_acquire)) < want) {
		if (jt_now_ns() - start >= JT_SAFETY_NS) {
			atomic_store_explicit(abandon, true, memory_order_relaxed); /* relaxed: a stop hint */
			ck_abort_msg("%s: %ld of %ld still blocked after %llu s (a lost wake-up?)", what,
				     want - got, want, (unsigned long long)(JT_SAFETY_NS / 1000000000ull));
		}
		sched_yield();
	}
}

/* ---------------------------------------------------------------------------------------------
 * Many waiters per receipt, fences resolved at random moments
 */
enum { MW_THREADS = 48, MW_JOBS = 6 };

struct mw_job {
	long value;      /* plain: written by the body, read by the waiters after their wait */
	_Atomic int ran; /* bodies run this round */
	_Atomic int left; /* waiters of this round that have not finished yet */
};

struct mw_shared {
	jobs_sched *s;
	long rounds;
	jobs_id ids[MW_JOBS];        /* plain: written before `round` is published */
	struct mw_job job[MW_JOBS];
	_Atomic long round;          /* rounds published (release) */
	_Atomic long finished;       /* waiter-rounds finished (release) */
	_Atomic bool abandon;        /* the test failed: stop */
};

struct mw_arg {
	struct mw_shared *sh;
	int index;
};

static void mw_body(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	(void)run;
	struct mw_job *j = arg;
	j->value = -j->value; /* the submitter stored -(expected); the waiters check for +expected */
	atomic_fetch_add_explicit(&j->ran, 1, memory_order_relaxed);
}

static void *mw_waiter(void *p)
{
	struct mw_arg *a = p;
	struct mw_shared *sh = a->sh;
	uint64_t rng = 0x5eed0000u + (uint64_t)a->index;
	for (long r = 0; r < sh->rounds; r++) {
		while (atomic_load_explicit(&sh->round, memory_order_acquire) <= r) {
			if (atomic_load_explicit(&sh->abandon, memory_order_relaxed))
				return NULL;
			sched_yield();
		}
		int j = (int)((a->index + r) % MW_JOBS);
		jobs_id id = sh->ids[j];
		/* A third first waits briefly (often timing out: that leaves SLEEPER set with nobody
		 * asleep behind it), then everybody waits for good. */
		if (jt_below(&rng, 3) == 0) {
			jobs_status st = jobs_wait(sh->s, id, jt_below(&rng, 40000));
			jt_check(st == JOBS_OK || st == JOBS_PENDING, "round %ld: short wait got %s", r,
				 jt_status_name(st));
		}
		jobs_status st = jobs_wait(sh->s, id, JOBS_TIMEOUT_INFINITE);
		jt_check(st == JOBS_OK, "round %ld job %d: wait got %s", r, j, jt_status_name(st));
		long want = r * MW_JOBS + j + 1;
		jt_check(sh->job[j].value == want, "round %ld job %d: waiter read %ld, body wrote %ld", r,
			 j, sh->job[j].value, want);
		/* acq_rel: the last waiter of the job has seen every other waiter finish; it releases the
		 * id at once, so the slot is recycled while the other jobs' waiters may still sleep. */
		if (atomic_fetch_sub_explicit(&sh->job[j].left, 1, memory_order_acq_rel) == 1)
			jt_check(jobs_release(sh->s, id) == JOBS_OK, "round %ld job %d: release failed", r, j);
		atomic_fetch_add_explicit(&sh->finished, 1, memory_order_release);
	}
	return NULL;
}

START_TEST(test_park_many_waiters)
{
	int workers = worker_counts[_i];
	struct mw_shared *sh = calloc(1, sizeof *sh);
	sh->s = park_sched(workers, 64);
	sh->rounds = jt_scaled(1500, 600);
	struct mw_arg args[MW_THREADS];
	pthread_t th[MW_THREADS];
	for (int t = 0; t < MW_THREADS; t++) {
		args[t] = (struct mw_arg){sh, t};
		ck_assert(pthread_create(&th[t], NULL, mw_waiter, &args[t]) == 0);
	}
	uint64_t rng = 42;
	for (long r = 0; r < sh->rounds; r++) {
		int order[MW_JOBS];
		for (int j = 0; j < MW_JOBS; j++) {
			struct mw_job *job = &sh->job[j];
			job->value = -(r * MW_JOBS + j + 1);
			atomic_store_explicit(&job->ran, 0, memory_order_relaxed);
			int waiters = 0;
			for (int t = 0; t < MW_THREADS; t++)
				waiters += (int)((t + r) % MW_JOBS) == j;
			atomic_store_explicit(&job->left, waiters, memory_order_relaxed);
			jobs_job_desc d = {.fn = mw_body, .arg = job, .fences = 1,
					   .flags = j % 3 == 0 ? JOBS_RUN_INLINE : 0};
			sh->ids[j] = jt_submit(sh->s, &d, 0);
			order[j] = j;
		}
		/* release: the ids and the jobs' fields happen-before the waiters' acquire. */
		atomic_store_explicit(&sh->round, r + 1, memory_order_release);
		/* Resolve at a random moment (waiters spinning, falling asleep or asleep), in a random
		 * order, half synchronously (an inline job then runs here), half asynchronously. */
		for (int j = MW_JOBS - 1; j > 0; j--) {
			int k = (int)jt_below(&rng, (uint64_t)j + 1), x = order[j];
			order[j] = order[k];
			order[k] = x;
		}
		uint64_t pause = jt_below(&rng, 4) == 0 ? 0 : jt_below(&rng, 60);
		if (pause)
			jt_sleep_us((unsigned)pause);
		for (int j = 0; j < MW_JOBS; j++) {
			jobs_id id = sh->ids[order[j]];
			jobs_status st = (j & 1) ? jobs_fence_resolve_async(sh->s, id) : jobs_fence_resolve(sh->s, id);
			jt_assert_status(st, JOBS_OK, "resolve");
		}
		await_count(&sh->finished, (r + 1) * MW_THREADS, &sh->abandon, "waiters of the round");
		for (int j = 0; j < MW_JOBS; j++)
			ck_assert_msg(atomic_load_explicit(&sh->job[j].ran, memory_order_relaxed) == 1,
				      "workers=%d round %ld job %d: body ran %d times", workers, r, j,
				      atomic_load_explicit(&sh->job[j].ran, memory_order_relaxed));
	}
	for (int t = 0; t < MW_THREADS; t++)
		pthread_join(th[t], NULL);
	jt_assert_no_thread_failures();
	jobs_sched_destroy(sh->s);
	free(sh);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Round trips from many threads, every id released at once
 */
enum { RT_THREADS = 32 };

struct rt_cell {
	long a_value;    /* plain: written by job A */
	long b_saw;      /* plain: what job B read of A's value */
	long b_value;    /* plain: written by job B */
	int slow;        /* plain: the body busy-waits this many µs (the waiter parks before it ends) */
};

struct rt_shared {
	jobs_sched *s;
	long iters;
	_Atomic long done; /* threads finished (release) */
	_Atomic long bodies;
	_Atomic bool abandon; /* the test failed: stop */
};

struct rt_arg {
	struct rt_shared *sh;
	int index;
	struct rt_cell cell;
	long expect;
};

static void spin_us(int us)
{
	uint64_t until = jt_now_ns() + (uint64_t)us * 1000u;
	while (jt_now_ns() < until)
		;
}

static void rt_body_a(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	(void)run;
	struct rt_arg *a = arg;
	spin_us(a->cell.slow);
	a->cell.a_value = a->expect;
	atomic_fetch_add_explicit(&a->sh->bodies, 1, memory_order_relaxed);
}

static void rt_body_b(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	(void)run;
	struct rt_arg *a = arg;
	a->cell.b_saw = a->cell.a_value; /* A completed before B ran: its write happens-before */
	spin_us(a->cell.slow);
	a->cell.b_value = a->expect;
	atomic_fetch_add_explicit(&a->sh->bodies, 1, memory_order_relaxed);
}

static void *rt_thread(void *p)
{
	struct rt_arg *a = p;
	struct rt_shared *sh = a->sh;
	uint64_t rng = 0xabc000u + (uint64_t)a->index;
	for (long i = 0; i < sh->iters && !atomic_load_explicit(&sh->abandon, memory_order_relaxed); i++) {
		a->expect = (long)a->index * 1000000 + i + 1;
		/* One body in eight outlasts the waiter's spin (20 µs), so that it parks. */
		a->cell.slow = jt_below(&rng, 8) == 0 ? 40 : 0;
		jobs_job_desc da = {.fn = rt_body_a, .arg = a};
		jobs_id ida = jt_submit(sh->s, &da, 0);
		/* Released before it is waited for: B orders after it through a released receipt (or a
		 * recycled one, which counts as complete). */
		jt_check(jobs_release(sh->s, ida) == JOBS_OK, "iteration %ld: release of A failed", i);
		jobs_job_desc db = {.fn = rt_body_b, .arg = a, .after = &ida, .after_count = 1,
				    .flags = JOBS_AFTER_MAY_BE_RELEASED};
		jobs_id idb = jt_submit(sh->s, &db, 0);
		jobs_status st = jobs_wait(sh->s, idb, JOBS_TIMEOUT_INFINITE);
		jt_check(st == JOBS_OK, "iteration %ld: wait got %s", i, jt_status_name(st));
		jt_check(jobs_release(sh->s, idb) == JOBS_OK, "iteration %ld: release of B failed", i);
		jt_check(a->cell.b_saw == a->expect && a->cell.b_value == a->expect,
			 "thread %d iteration %ld: B saw A = %ld, wrote %ld, expected %ld", a->index, i,
			 a->cell.b_saw, a->cell.b_value, a->expect);
	}
	atomic_fetch_add_explicit(&sh->done, 1, memory_order_release);
	return NULL;
}

START_TEST(test_park_round_trips_release_at_once)
{
	int workers = worker_counts[_i];
	/* On the heap: a failed test leaves its threads behind (some blocked for good). */
	struct rt_shared *sh = calloc(1, sizeof *sh);
	sh->s = park_sched(workers, 64);
	sh->iters = jt_scaled(1500, 600);
	struct rt_arg *args = calloc(RT_THREADS, sizeof *args);
	pthread_t th[RT_THREADS];
	for (int t = 0; t < RT_THREADS; t++) {
		args[t].sh = sh;
		args[t].index = t;
		ck_assert(pthread_create(&th[t], NULL, rt_thread, &args[t]) == 0);
	}
	await_count(&sh->done, RT_THREADS, &sh->abandon, "round-trip threads");
	for (int t = 0; t < RT_THREADS; t++)
		pthread_join(th[t], NULL);
	jt_assert_no_thread_failures();
	ck_assert_int_eq(atomic_load(&sh->bodies), 2L * RT_THREADS * sh->iters);
	jobs_sched_destroy(sh->s);
	free(args);
	free(sh);
}
END_TEST

static Suite *park_suite(void)
{
	Suite *su = suite_create("jobs_park");
	TCase *tc = tcase_create("park");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_park_many_waiters, 0, 3);
	tcase_add_loop_test(tc, test_park_round_trips_release_at_once, 0, 3);
	suite_add_tcase(su, tc);
	return su;
}

JT_MAIN(park_suite)
