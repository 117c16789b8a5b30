/*
 * check_shutdown.c — jobs_sched_destroy: runnable work in flight all runs; jobs blocked on fences
 * nobody resolves (and their dependents) are cancelled — destroy returns, each cleanup runs once
 * with ran == false; unreleased receipts (failed ones with messages included) are freed (ASan/LSan
 * check); pools of 0, 1 and 2 workers created and destroyed repeatedly.
 */
#include <check.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "jobs.h"
#include "jobs_forkjoin.h"
#include "jobs_test_fib.h"
#include "jobs_test_util.h"

struct tally {
	jobs_sched *s;
	_Atomic int bodies;
	_Atomic int cleanups;
	_Atomic int cleanups_ran;    /* cleanup with ran == true */
	_Atomic int children;        /* jobs submitted from inside jobs */
	_Atomic int child_refused;
};

/* A job: bumps the counters; kind 1 forks a small fib; kind 2 submits two children. */
struct work {
	struct tally *t;
	int kind;
	_Atomic int body;
	_Atomic int cleanup;
	_Atomic int cleanup_ran;
};

static void work_cleanup(void *arg, bool ran);
static void child_cleanup_free(void *arg, bool ran);

static void work_body(jobs_worker *w, void *arg, jobs_run *run)
{
	struct work *wk = arg;
	struct tally *t = wk->t;
	atomic_fetch_add(&wk->body, 1);
	atomic_fetch_add(&t->bodies, 1);
	if (wk->kind == 1) {
		struct fib f = {12, 0};
		fib_frame(w, &f);
		jt_check(f.r == 144, "fib(12) = %ld during shutdown", f.r);
	} else if (wk->kind == 2) {
		for (int i = 0; i < 2; i++) {
			struct work *ch = calloc(1, sizeof *ch);
			ch->t = t;
			jobs_job_desc d = {.fn = work_body, .arg = ch, .cleanup = child_cleanup_free};
			jobs_id id;
			jobs_status st = jobs_submit(t->s, &d, &id);
			if (st == JOBS_OK) {
				atomic_fetch_add(&t->children, 1);
				(void)jobs_release(t->s, id);
			} else {
				atomic_fetch_add(&t->child_refused, 1);
				free(ch);
			}
		}
	}
}

/* Children (allocated by their parent) free themselves; top-level works are owned by the test. */
static void work_cleanup(void *arg, bool ran)
{
	struct work *wk = arg;
	struct tally *t = wk->t;
	atomic_fetch_add(&t->cleanups, 1);
	if (ran)
		atomic_fetch_add(&t->cleanups_ran, 1);
	atomic_fetch_add(&wk->cleanup, 1);
	if (ran)
		atomic_fetch_add(&wk->cleanup_ran, 1);
}

static void child_cleanup_free(void *arg, bool ran)
{
	work_cleanup(arg, ran);
	free(arg);
}

/* ---------------------------------------------------------------------------------------------
 * (a) runnable work in flight
 */
static void check_runnable_in_flight(int workers)
{
	jobs_sched *s = jt_sched(workers);
	struct tally t = {.s = s};
	int n = (int)jt_scaled(3000, 300);
	struct work *wk = calloc((size_t)n, sizeof *wk);
	jobs_id *ids = calloc((size_t)n, sizeof *ids);
	jobs_id last = 0;
	int with_children = 0;
	for (int i = 0; i < n; i++) {
		wk[i].t = &t;
		wk[i].kind = i % 10 == 3 ? 1 : i % 10 == 7 ? 2 : 0;
		with_children += wk[i].kind == 2;
		jobs_id after[2];
		size_t na = 0;
		if (i > 0 && i % 3 == 0)
			after[na++] = ids[i - 1];
		if (i > 10 && i % 5 == 0)
			after[na++] = ids[i - 10];
		jobs_job_desc d = {.fn = work_body, .arg = &wk[i], .cleanup = work_cleanup, .after = after,
				   .after_count = na};
		ids[i] = jt_submit(s, &d, last);
		last = ids[i];
	}
	/* release some receipts before destroy; keep the others for destroy to free */
	for (int i = 0; i < n; i += 2)
		jt_assert_status(jobs_release(s, ids[i]), JOBS_OK, "release in flight");
	jobs_sched_destroy(s);
	jt_assert_no_thread_failures();
	int children = atomic_load(&t.children);
	ck_assert_msg(atomic_load(&t.child_refused) == 0, "workers=%d: %d child submissions refused",
		      workers, atomic_load(&t.child_refused));
	ck_assert_msg(children == 2 * with_children, "workers=%d: %d children submitted, expected %d",
		      workers, children, 2 * with_children);
	ck_assert_msg(atomic_load(&t.bodies) == n + children,
		      "workers=%d: %d bodies ran, %d jobs were submitted (%d by jobs)", workers,
		      atomic_load(&t.bodies), n + children, children);
	ck_assert_msg(atomic_load(&t.cleanups) == n + children && atomic_load(&t.cleanups_ran) == n + children,
		      "workers=%d: %d cleanups (%d with ran), expected %d", workers,
		      atomic_load(&t.cleanups), atomic_load(&t.cleanups_ran), n + children);
	for (int i = 0; i < n; i++)
		ck_assert_msg(atomic_load(&wk[i].body) == 1 && atomic_load(&wk[i].cleanup_ran) == 1,
			      "workers=%d: job %d: body %d, cleanup(ran) %d", workers, i,
			      atomic_load(&wk[i].body), atomic_load(&wk[i].cleanup_ran));
	free(wk);
	free(ids);
}

START_TEST(test_runnable_in_flight)
{
	static const int workers[] = {0, 1, 2, 4};
	check_runnable_in_flight(workers[_i]);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * (b) jobs blocked on fences nobody resolves, and their dependents
 */
static void check_blocked(int workers)
{
	jobs_sched *s = jt_sched(workers);
	struct tally t = {.s = s};
	enum { N = 40 };
	struct work *wk = calloc(N, sizeof *wk);
	jobs_id ids[N];
	/* dependents that may run after a failed dependency: outcome at shutdown not asserted beyond
	 * "cleanup exactly once" */
	bool lenient[N] = {false};
	for (int i = 0; i < N; i++)
		wk[i].t = &t;
	/* 0..9: one fence each, never resolved */
	for (int i = 0; i < 10; i++) {
		jobs_job_desc d = {.fn = work_body, .arg = &wk[i], .cleanup = work_cleanup, .fences = 1};
		jt_assert_status(jobs_submit(s, &d, &ids[i]), JOBS_OK, "held");
	}
	/* 10..19: chains of dependents on them */
	for (int i = 10; i < 20; i++) {
		jobs_id dep = ids[i - 10];
		jobs_job_desc d = {.fn = work_body, .arg = &wk[i], .cleanup = work_cleanup, .after = &dep,
				   .after_count = 1};
		jt_assert_status(jobs_submit(s, &d, &ids[i]), JOBS_OK, "dependent");
	}
	for (int i = 20; i < 30; i++) {
		jobs_id dep[2] = {ids[i - 10], ids[i - 20]};
		jobs_job_desc d = {.fn = work_body, .arg = &wk[i], .cleanup = work_cleanup, .after = dep,
				   .after_count = 2};
		jt_assert_status(jobs_submit(s, &d, &ids[i]), JOBS_OK, "second-level dependent");
	}
	/* 30..34: two fences, one resolved */
	for (int i = 30; i < 35; i++) {
		jobs_job_desc d = {.fn = work_body, .arg = &wk[i], .cleanup = work_cleanup, .fences = 2};
		jt_assert_status(jobs_submit(s, &d, &ids[i]), JOBS_OK, "two fences");
		jt_assert_status(jobs_fence_resolve(s, ids[i]), JOBS_OK, "resolve one of two");
	}
	/* 35..39: run-after-failed-dependency dependents of held jobs, receipts released early */
	for (int i = 35; i < 40; i++) {
		jobs_id dep = ids[i - 35];
		jobs_job_desc d = {.fn = work_body, .arg = &wk[i], .cleanup = work_cleanup, .after = &dep,
				   .after_count = 1, .flags = JOBS_RUN_AFTER_FAILED_DEPENDENCY};
		jt_assert_status(jobs_submit(s, &d, &ids[i]), JOBS_OK, "lenient dependent");
		jt_assert_status(jobs_release(s, ids[i]), JOBS_OK, "release lenient dependent");
		lenient[i] = true;
	}
	/* release a few of the held ones too: released receipts are cancelled as well */
	for (int i = 0; i < 10; i += 3)
		jt_assert_status(jobs_release(s, ids[i]), JOBS_OK, "release held");
	/* plus runnable work that must still run */
	struct work ok = {.t = &t};
	jobs_job_desc dok = {.fn = work_body, .arg = &ok, .cleanup = work_cleanup};
	jobs_id idok;
	jt_assert_status(jobs_submit(s, &dok, &idok), JOBS_OK, "runnable");
	for (int i = 0; i < N; i++)
		jt_assert_status(jobs_poll(s, ids[i]), lenient[i] || (i < 10 && i % 3 == 0) ? JOBS_INVALID
											  : JOBS_PENDING,
				 "poll before destroy");

	jobs_sched_destroy(s); /* must return */
	jt_assert_no_thread_failures();
	ck_assert_msg(atomic_load(&ok.body) == 1, "workers=%d: the runnable job ran %d times", workers,
		      atomic_load(&ok.body));
	for (int i = 0; i < N; i++) {
		ck_assert_msg(atomic_load(&wk[i].cleanup) == 1, "workers=%d: blocked job %d: %d cleanups",
			      workers, i, atomic_load(&wk[i].cleanup));
		if (lenient[i])
			continue;
		ck_assert_msg(atomic_load(&wk[i].body) == 0 && atomic_load(&wk[i].cleanup_ran) == 0,
			      "workers=%d: blocked job %d: body ran %d times, cleanup(ran) %d", workers, i,
			      atomic_load(&wk[i].body), atomic_load(&wk[i].cleanup_ran));
	}
	free(wk);
}

START_TEST(test_blocked_cancelled)
{
	static const int workers[] = {0, 1, 2};
	check_blocked(workers[_i]);
}
END_TEST

/* Many blocked jobs with long dependent chains: destroy cancels them all. */
START_TEST(test_blocked_chains)
{
	jobs_sched *s = jt_sched(2);
	struct tally t = {.s = s};
	int n = (int)jt_scaled(2000, 200);
	struct work *wk = calloc((size_t)n, sizeof *wk);
	jobs_id *ids = calloc((size_t)n, sizeof *ids);
	for (int i = 0; i < n; i++) {
		wk[i].t = &t;
		jobs_job_desc d = {.fn = work_body, .arg = &wk[i], .cleanup = work_cleanup};
		if (i % 50 == 0) {
			d.fences = 1 + (uint32_t)(i % 3);
		} else {
			d.after = &ids[i - 1];
			d.after_count = 1;
		}
		jt_assert_status(jobs_submit(s, &d, &ids[i]), JOBS_OK, "submit");
	}
	jobs_sched_destroy(s);
	ck_assert_msg(atomic_load(&t.bodies) == 0, "%d blocked bodies ran", atomic_load(&t.bodies));
	ck_assert_msg(atomic_load(&t.cleanups) == n && atomic_load(&t.cleanups_ran) == 0,
		      "%d cleanups (%d with ran) for %d blocked jobs", atomic_load(&t.cleanups),
		      atomic_load(&t.cleanups_ran), n);
	free(wk);
	free(ids);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * (c) unreleased receipts of every kind at destroy (leaks would show under ASan/LSan)
 */
static void fail_body(jobs_worker *w, void *arg, jobs_run *run)
{
	jobs_job_fail(run, 3, "failure message number %d that must be freed", 3);
}

START_TEST(test_unreleased_receipts)
{
	static const int workers[] = {0, 1, 2};
	jobs_sched *s = jt_sched(workers[_i]);
	struct tally t = {.s = s};
	struct work a = {.t = &t}, b = {.t = &t};
	jobs_job_desc df = {.fn = fail_body};
	jobs_id f1, f2, f3, ok1, held;
	jt_assert_status(jobs_submit(s, &df, &f1), JOBS_OK, "failing");
	jobs_job_desc ddep = {.fn = work_body, .arg = &a, .cleanup = work_cleanup, .after = &f1,
			      .after_count = 1};
	jt_assert_status(jobs_submit(s, &ddep, &f2), JOBS_OK, "dependent of failing");
	jt_assert_status(jobs_wait(s, f2, JT_WAIT_NS), JOBS_FAILED, "dependent fails");
	jt_assert_status(jobs_submit(s, &df, &f3), JOBS_OK, "failing, not waited");
	jobs_job_desc dok = {.fn = work_body, .arg = &b, .cleanup = work_cleanup};
	jt_assert_status(jobs_submit(s, &dok, &ok1), JOBS_OK, "ok");
	jobs_job_desc dheld = {.fn = fail_body, .fences = 1};
	jt_assert_status(jobs_submit(s, &dheld, &held), JOBS_OK, "held (cancelled with a message)");
	jobs_sched_destroy(s);
	ck_assert_int_eq(atomic_load(&a.cleanup), 1);
	ck_assert_int_eq(atomic_load(&b.cleanup), 1);
	ck_assert_int_eq(atomic_load(&b.body), 1);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * (d) create and destroy repeatedly
 */
START_TEST(test_create_destroy_repeatedly)
{
	static const int workers[] = {0, 1, 2};
	int w = workers[_i];
	int reps = (int)jt_scaled(200, 20);
	for (int r = 0; r < reps; r++) {
		jobs_sched *s = jt_sched(w);
		ck_assert_int_eq(jobs_sched_workers(s), w);
		ck_assert_msg(jobs_current_worker(s) == NULL, "the test thread is not a worker");
		if (r % 3 == 1) {
			struct tally t = {.s = s};
			struct work wk = {.t = &t, .kind = r % 2 ? 1 : 2};
			jobs_job_desc d = {.fn = work_body, .arg = &wk, .cleanup = work_cleanup};
			jobs_id id;
			jt_assert_status(jobs_submit(s, &d, &id), JOBS_OK, "submit");
			if (r % 2)
				jt_assert_status(jobs_wait(s, id, JT_WAIT_NS), JOBS_OK, "wait");
			jobs_sched_destroy(s);
			ck_assert_int_eq(atomic_load(&wk.body), 1);
			ck_assert_int_eq(atomic_load(&wk.cleanup), 1);
			ck_assert_int_eq(atomic_load(&t.bodies), 1 + atomic_load(&t.children));
			ck_assert_int_eq(atomic_load(&t.cleanups), 1 + atomic_load(&t.children));
		} else {
			jobs_sched_destroy(s);
		}
	}
	jobs_sched_destroy(NULL); /* harmless */
}
END_TEST

START_TEST(test_default_workers)
{
	jobs_sched *s = jt_sched(-1);
	ck_assert_msg(jobs_sched_workers(s) >= 1, "workers = -1 gave %d workers", jobs_sched_workers(s));
	struct tally t = {.s = s};
	struct work wk = {.t = &t, .kind = 1};
	jobs_job_desc d = {.fn = work_body, .arg = &wk, .cleanup = work_cleanup};
	jobs_id id;
	jt_assert_status(jobs_submit(s, &d, &id), JOBS_OK, "submit");
	jt_assert_status(jobs_wait(s, id, JT_WAIT_NS), JOBS_OK, "wait");
	jobs_sched_destroy(s);
	jt_assert_no_thread_failures();
}
END_TEST

START_TEST(test_bad_config)
{
	jobs_config cfg;
	jobs_config_default(&cfg);
	cfg.workers = 1;
	cfg.deque_capacity = 16; /* below the minimum */
	const char *err = NULL;
	jobs_sched *s = jobs_sched_create(&cfg, &err);
	ck_assert_msg(s == NULL && err != NULL, "deque_capacity 16 accepted");
	jobs_config_default(&cfg);
	cfg.topology = "this is not a topology";
	err = NULL;
	s = jobs_sched_create(&cfg, &err);
	ck_assert_msg(s == NULL && err != NULL, "a bogus synthetic topology was accepted");
	/* NULL config: defaults */
	s = jobs_sched_create(NULL, NULL);
	ck_assert_msg(s != NULL, "jobs_sched_create(NULL) failed");
	jobs_sched_destroy(s);
}
END_TEST


/* A poll source that never completes must not hang destroy: the job it gates is cancelled after
 * the grace period, with its cleanup run once (ran == false). */
static unsigned always_outstanding(void *ctx)
{
	atomic_fetch_add((_Atomic unsigned *)ctx, 1);
	return 1;
}

static _Atomic int gated_cleanups, gated_ran;
static void gated_body(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	(void)arg;
	(void)run;
	atomic_fetch_add(&gated_ran, 1);
}
static void gated_cleanup(void *arg, bool ran)
{
	(void)arg;
	if (!ran)
		atomic_fetch_add(&gated_cleanups, 1);
}

START_TEST(test_destroy_with_never_settling_poll_source)
{
	for (int workers = 0; workers <= 2; workers++) {
		atomic_store(&gated_cleanups, 0);
		atomic_store(&gated_ran, 0);
		jobs_sched *s = jt_sched(workers);
		_Atomic unsigned *calls = calloc(1, sizeof *calls);
		ck_assert_int_eq(jobs_add_poll_hook(s, always_outstanding, (void *)calls), JOBS_OK);
		jobs_job_desc d = {.fn = gated_body, .cleanup = gated_cleanup, .fences = 1};
		jobs_id id;
		ck_assert_int_eq(jobs_submit(s, &d, &id), JOBS_OK);
		jobs_sched_destroy(s); /* must return */
		ck_assert_int_eq(atomic_load(&gated_ran), 0);
		ck_assert_int_eq(atomic_load(&gated_cleanups), 1);
		ck_assert_uint_gt(atomic_load(calls), 0);
		free((void *)calls);
	}
}
END_TEST

static Suite *shutdown_suite(void)
{
	Suite *su = suite_create("jobs_shutdown");
	TCase *tc = tcase_create("in_flight");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_runnable_in_flight, 0, 4);
	suite_add_tcase(su, tc);
	tc = tcase_create("blocked");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_blocked_cancelled, 0, 3);
	tcase_add_test(tc, test_blocked_chains);
	tcase_add_test(tc, test_destroy_with_never_settling_poll_source);
	tcase_add_loop_test(tc, test_unreleased_receipts, 0, 3);
	suite_add_tcase(su, tc);
	tc = tcase_create("lifecycle");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_create_destroy_repeatedly, 0, 3);
	tcase_add_test(tc, test_default_workers);
	tcase_add_test(tc, test_bad_config);
	suite_add_tcase(su, tc);
	return su;
}

JT_MAIN(shutdown_suite)
