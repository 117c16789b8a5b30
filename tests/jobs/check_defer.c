/*
 * check_defer.c — deferred completion: a body calls jobs_job_defer and returns; its receipt stays
 * pending until a plain pthread (standing in for a CUDA host callback) calls jobs_complete. Then
 * the chain of dependents runs — never on the completing thread, JOBS_RUN_INLINE dependents
 * included — and sees what the completer wrote before completing (a plain variable: TSan checks
 * the ordering). Failure codes and messages propagate like a failed body's; completion may come
 * before the body returns; misuse returns JOBS_INVALID; destroy cancels a completion that never
 * came. Pools of 0, 1 and 2 workers.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jobs.h"
#include "jobs_test_util.h"

static const int worker_counts[] = { 0, 1, 2 };

/* The deferred job and its completer thread. */
typedef struct deferred {
	jobs_sched *s;              /* the pool */
	_Atomic jobs_id token;      /* the id the body handed out (0 until then) */
	_Atomic int completed;      /* the completer's jobs_complete returned */
	_Atomic int body_returned;  /* the deferred body returned */
	_Atomic int cleanups;       /* the deferred job's cleanup calls (with ran = true) */
	pthread_t completer;        /* the completing thread's handle (for joining) */
	pthread_t completer_self;   /* the completing thread, as it sees itself (before completing) */
	int code;                   /* what the completer passes */
	const char *msg;            /* what the completer passes */
	bool wait_for_completion;   /* the body returns only after jobs_complete returned */
	long payload;               /* plain: written by the completer, read by the dependents */
	jobs_status complete_st;    /* jobs_complete's status (read after joining the completer) */
	jobs_status second_st;      /* a second jobs_complete's status */
} deferred;

static void deferred_body(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	deferred *d = arg;
	jobs_id id = jobs_job_defer(run);
	jt_check(id == jobs_run_id(run), "jobs_job_defer returned %llu, not the job's id",
		 (unsigned long long)id);
	jt_check(jobs_job_defer(run) == id, "a second jobs_job_defer returned another id");
	atomic_store_explicit(&d->token, id, memory_order_release);
	if (d->wait_for_completion) {
		uint64_t start = jt_now_ns();
		while (!atomic_load_explicit(&d->completed, memory_order_acquire) &&
		       jt_now_ns() - start < JT_SAFETY_NS)
			jt_sleep_us(20);
	}
	atomic_store_explicit(&d->body_returned, 1, memory_order_release);
}

static void deferred_cleanup(void *arg, bool ran)
{
	deferred *d = arg;
	jt_check(ran, "the deferred body's cleanup got ran = false");
	atomic_fetch_add_explicit(&d->cleanups, 1, memory_order_relaxed);
}

static void *completer_main(void *arg)
{
	deferred *d = arg;
	d->completer_self = pthread_self(); /* ordered before the dependents by jobs_complete */
	jobs_id id;
	uint64_t start = jt_now_ns();
	while (!(id = atomic_load_explicit(&d->token, memory_order_acquire))) {
		if (jt_now_ns() - start > JT_SAFETY_NS) {
			jt_fail_at(__FILE__, __LINE__, "the deferred body never ran");
			return NULL;
		}
		jt_sleep_us(20);
	}
	if (!d->wait_for_completion) /* let the body return first (usually) */
		jt_sleep_us(200);
	d->payload = 4242;
	d->complete_st = jobs_complete(d->s, id, d->code, d->msg);
	atomic_store_explicit(&d->completed, 1, memory_order_release);
	d->second_st = jobs_complete(d->s, id, 0, NULL);
	return NULL;
}

/* A dependent: records where it ran and what it saw. */
typedef struct dep {
	deferred *d;      /* whose payload it checks */
	_Atomic int ran;  /* body runs */
	_Atomic int cleaned; /* cleanup calls */
	bool ran_flag;    /* cleanup's `ran` */
} dep;

static void dep_body(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	(void)run;
	dep *p = arg;
	jt_check(!pthread_equal(pthread_self(), p->d->completer_self),
		 "a dependent ran on the thread that called jobs_complete");
	jt_check(p->d->payload == 4242, "a dependent saw payload %ld", p->d->payload);
	atomic_fetch_add_explicit(&p->ran, 1, memory_order_relaxed);
}

static void dep_cleanup(void *arg, bool ran)
{
	dep *p = arg;
	p->ran_flag = ran;
	atomic_fetch_add_explicit(&p->cleaned, 1, memory_order_relaxed);
}

enum { CHAIN = 6 };

/* Submits the deferred job and a chain of CHAIN dependents (every other one JOBS_RUN_INLINE; the
 * first two directly after the deferred job), starts the completer. */
static void start(jobs_sched *s, deferred *d, dep *deps, jobs_id *ids, uint32_t dep_flags)
{
	d->s = s;
	jobs_job_desc jd = { .fn = deferred_body, .arg = d, .cleanup = deferred_cleanup };
	ids[0] = jt_submit(s, &jd, 0);
	for (int i = 0; i < CHAIN; i++) {
		deps[i].d = d;
		jobs_id after = ids[i < 2 ? 0 : i];
		jobs_job_desc dd = { .fn = dep_body, .arg = &deps[i], .cleanup = dep_cleanup,
				     .after = &after, .after_count = 1,
				     .flags = dep_flags | (i % 2 ? JOBS_RUN_INLINE : 0u) };
		ids[i + 1] = jt_submit(s, &dd, 0);
	}
	ck_assert_int_eq(pthread_create(&d->completer, NULL, completer_main, d), 0);
}

START_TEST(test_complete_from_pthread)
{
	jobs_sched *s = jt_sched(worker_counts[_i]);
	int rounds = (int)jt_scaled(40, 8);
	for (int r = 0; r < rounds; r++) {
		deferred d = { .wait_for_completion = (r % 2) != 0 };
		dep deps[CHAIN];
		memset(deps, 0, sizeof deps);
		jobs_id ids[CHAIN + 1];
		start(s, &d, deps, ids, 0);
		for (int i = CHAIN; i >= 0; i--) /* last first: the whole chain, from the outside */
			jt_assert_status(jobs_wait(s, ids[i], JT_WAIT_NS), JOBS_OK, "wait chain");
		pthread_join(d.completer, NULL);
		jt_assert_status(d.complete_st, JOBS_OK, "jobs_complete");
		jt_assert_status(d.second_st, JOBS_INVALID, "second jobs_complete");
		ck_assert_int_eq(atomic_load(&d.cleanups), 1);
		ck_assert_int_eq(atomic_load(&d.body_returned), 1);
		for (int i = 0; i < CHAIN; i++) {
			ck_assert_int_eq(atomic_load(&deps[i].ran), 1);
			ck_assert_int_eq(atomic_load(&deps[i].cleaned), 1);
		}
		for (int i = 0; i <= CHAIN; i++)
			jt_assert_status(jobs_release(s, ids[i]), JOBS_OK, "release");
		jt_assert_no_thread_failures();
	}
	jobs_sched_destroy(s);
}
END_TEST

/* The receipt stays pending after the body returned, until jobs_complete. */
START_TEST(test_pending_until_complete)
{
	jobs_sched *s = jt_sched(worker_counts[_i]);
	deferred d = { .s = s };
	jobs_job_desc jd = { .fn = deferred_body, .arg = &d, .cleanup = deferred_cleanup };
	jobs_id id = jt_submit(s, &jd, 0);
	uint64_t t0 = jt_now_ns();
	while (!atomic_load_explicit(&d.body_returned, memory_order_acquire)) {
		(void)jobs_wait(s, id, 1000000); /* 0 workers: the waiter runs the body */
		ck_assert_msg(jt_now_ns() - t0 < JT_SAFETY_NS, "the deferred body never ran");
	}
	jt_assert_status(jobs_poll(s, id), JOBS_PENDING, "poll after the body returned");
	jt_assert_status(jobs_wait(s, id, 2000000), JOBS_PENDING, "wait 2 ms after the body returned");
	d.payload = 4242;
	jt_assert_status(jobs_complete(s, id, 0, NULL), JOBS_OK, "complete from the test thread");
	jt_assert_status(jobs_wait(s, id, JT_WAIT_NS), JOBS_OK, "wait");
	jt_assert_status(jobs_release(s, id), JOBS_OK, "release");
	jobs_sched_destroy(s);
	jt_assert_no_thread_failures();
}
END_TEST

START_TEST(test_failure_propagates)
{
	jobs_sched *s = jt_sched(worker_counts[_i]);
	deferred d = { .code = 7, .msg = "device error 7" };
	dep deps[CHAIN];
	memset(deps, 0, sizeof deps);
	jobs_id ids[CHAIN + 1];
	start(s, &d, deps, ids, 0);
	/* one more dependent that runs anyway */
	dep anyway = { .d = &d };
	jobs_job_desc ad = { .fn = dep_body, .arg = &anyway, .cleanup = dep_cleanup, .after = &ids[0],
			     .after_count = 1, .flags = JOBS_RUN_AFTER_FAILED_DEPENDENCY };
	jobs_id aid = jt_submit(s, &ad, 0);
	for (int i = CHAIN; i >= 1; i--) /* dependents 0 and 1 both follow the deferred job */
		jt_assert_status(jobs_wait(s, ids[i], JT_WAIT_NS), JOBS_FAILED, "wait dependent");
	jt_assert_status(jobs_wait(s, aid, JT_WAIT_NS), JOBS_OK, "wait run-anyway dependent");
	int code = 0;
	char buf[128];
	jt_assert_status(jobs_receipt_result(s, ids[0], &code, buf, sizeof buf), JOBS_FAILED, "result");
	ck_assert_int_eq(code, 7);
	ck_assert_str_eq(buf, "device error 7");
	jobs_id fd = 0;
	jt_assert_status(jobs_receipt_failed_dependency(s, ids[1], &fd), JOBS_OK, "failed dep");
	ck_assert_uint_eq(fd, ids[0]);
	jt_assert_status(jobs_receipt_result(s, ids[1], &code, buf, sizeof buf), JOBS_FAILED, "dep");
	ck_assert_msg(strstr(buf, "dependency op") != NULL, "dependent's message: %s", buf);
	pthread_join(d.completer, NULL);
	jt_assert_status(d.complete_st, JOBS_OK, "jobs_complete");
	for (int i = 0; i < CHAIN; i++) {
		ck_assert_int_eq(atomic_load(&deps[i].ran), 0);
		ck_assert_int_eq(atomic_load(&deps[i].cleaned), 1);
	}
	ck_assert_int_eq(atomic_load(&anyway.ran), 1);
	/* a failure without a message gets a generic one */
	deferred d2 = { .s = s };
	jobs_job_desc jd = { .fn = deferred_body, .arg = &d2 };
	jobs_id id2 = jt_submit(s, &jd, 0);
	while (!atomic_load_explicit(&d2.token, memory_order_acquire))
		(void)jobs_wait(s, id2, 1000000);
	jt_assert_status(jobs_complete(s, id2, -3, NULL), JOBS_OK, "complete without message");
	jt_assert_status(jobs_wait(s, id2, JT_WAIT_NS), JOBS_FAILED, "wait");
	jt_assert_status(jobs_receipt_result(s, id2, &code, buf, sizeof buf), JOBS_FAILED, "result");
	ck_assert_int_eq(code, -3);
	ck_assert_msg(strstr(buf, "failed") != NULL, "generic message: %s", buf);
	jobs_sched_destroy(s);
	jt_assert_no_thread_failures();
}
END_TEST

static void plain_body(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	(void)arg;
	(void)run;
}

static void fail_then_defer_body(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	jobs_job_fail(run, 5, "failed first");
	*(jobs_id *)arg = jobs_job_defer(run);
}

static void defer_then_fail_body(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	*(jobs_id *)arg = jobs_job_defer(run);
	jobs_job_fail(run, 6, "failed after deferring");
}

START_TEST(test_misuse)
{
	jobs_sched *s = jt_sched(worker_counts[_i]);
	/* a job that did not defer (fenced, so still pending; then done) */
	jobs_job_desc fd = { .fn = plain_body, .fences = 1 };
	jobs_id fid = jt_submit(s, &fd, 0);
	jt_assert_status(jobs_complete(s, fid, 0, NULL), JOBS_INVALID, "complete a fenced job");
	jt_assert_status(jobs_fence_resolve(s, fid), JOBS_OK, "resolve");
	jt_assert_status(jobs_wait(s, fid, JT_WAIT_NS), JOBS_OK, "wait");
	jt_assert_status(jobs_complete(s, fid, 0, NULL), JOBS_INVALID, "complete a done job");
	jt_assert_status(jobs_complete(s, 0, 0, NULL), JOBS_INVALID, "complete id 0");
	jt_assert_status(jobs_complete(s, fid + 1000000, 0, NULL), JOBS_INVALID, "complete unknown");
	jt_assert_status(jobs_complete(NULL, fid, 0, NULL), JOBS_INVALID, "complete NULL sched");
	/* jobs_job_defer after jobs_job_fail: no deferral, the failure completes it */
	jobs_id tok = 99;
	jobs_job_desc a = { .fn = fail_then_defer_body, .arg = &tok };
	jobs_id aid = jt_submit(s, &a, 0);
	jt_assert_status(jobs_wait(s, aid, JT_WAIT_NS), JOBS_FAILED, "fail then defer");
	ck_assert_uint_eq(tok, 0);
	/* jobs_job_fail after jobs_job_defer: completes failed at return (nobody completed first) */
	jobs_job_desc b = { .fn = defer_then_fail_body, .arg = &tok };
	jobs_id bid = jt_submit(s, &b, 0);
	int code = 0;
	jt_assert_status(jobs_wait(s, bid, JT_WAIT_NS), JOBS_FAILED, "defer then fail");
	ck_assert_uint_eq(tok, bid);
	jt_assert_status(jobs_receipt_result(s, bid, &code, NULL, 0), JOBS_FAILED, "result");
	ck_assert_int_eq(code, 6);
	jt_assert_status(jobs_complete(s, bid, 0, NULL), JOBS_INVALID, "complete after own failure");
	jobs_sched_destroy(s);
}
END_TEST

/* The waiter released the receipt before the completion: jobs_complete still works. */
START_TEST(test_complete_after_release)
{
	jobs_sched *s = jt_sched(worker_counts[_i]);
	deferred d = { 0 };
	dep deps[CHAIN];
	memset(deps, 0, sizeof deps);
	jobs_id ids[CHAIN + 1];
	start(s, &d, deps, ids, 0);
	jt_assert_status(jobs_release(s, ids[0]), JOBS_OK, "release the deferred job at once");
	for (int i = CHAIN; i >= 1; i--)
		jt_assert_status(jobs_wait(s, ids[i], JT_WAIT_NS), JOBS_OK, "wait dependent");
	pthread_join(d.completer, NULL);
	jt_assert_status(d.complete_st, JOBS_OK, "jobs_complete after release");
	jobs_sched_destroy(s);
	jt_assert_no_thread_failures();
}
END_TEST

/* Destroy with a completion that never comes: the job and its dependents are cancelled. */
START_TEST(test_destroy_cancels_pending)
{
	jobs_sched *s = jt_sched(worker_counts[_i]);
	deferred d = { .s = s };
	jobs_job_desc jd = { .fn = deferred_body, .arg = &d, .cleanup = deferred_cleanup };
	jobs_id id = jt_submit(s, &jd, 0);
	dep p = { .d = &d };
	jobs_job_desc dd = { .fn = dep_body, .arg = &p, .cleanup = dep_cleanup, .after = &id,
			     .after_count = 1, .flags = JOBS_RUN_AFTER_FAILED_DEPENDENCY };
	(void)jt_submit(s, &dd, 0);
	jobs_sched_destroy(s); /* runs the deferred body (0 workers: here), then cancels */
	ck_assert_int_eq(atomic_load(&d.cleanups), 1);
	ck_assert_int_eq(atomic_load(&p.ran), 0);
	ck_assert_int_eq(atomic_load(&p.cleaned), 1);
	ck_assert(!p.ran_flag);
	jt_assert_no_thread_failures();
}
END_TEST

static Suite *defer_suite(void)
{
	Suite *su = suite_create("jobs_defer");
	TCase *tc = tcase_create("defer");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_complete_from_pthread, 0, 3);
	tcase_add_loop_test(tc, test_pending_until_complete, 0, 3);
	tcase_add_loop_test(tc, test_failure_propagates, 0, 3);
	tcase_add_loop_test(tc, test_misuse, 0, 3);
	tcase_add_loop_test(tc, test_complete_after_release, 0, 3);
	tcase_add_loop_test(tc, test_destroy_cancels_pending, 0, 3);
	suite_add_tcase(su, tc);
	return su;
}

JT_MAIN(defer_suite)
