/*
 * check_inline.c — JOBS_RUN_INLINE: a job that is runnable at submission (or at the resolution of
 * its last fence) runs on the submitting (resolving) thread before the call returns, with that
 * thread's worker context (NULL outside the pool); one that still waits for a dependency runs
 * wherever the dependency completes, as usual. Every job runs exactly once, after its
 * dependencies, and its cleanup runs exactly once; failures and failed dependencies are reported
 * as for any job. The stress case mixes inline and ordinary jobs, fences resolved by other threads
 * and several external submitters (1, 2 and 4 workers); the single-job cases also with 0.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jobs.h"
#include "jobs_test_util.h"

static const int worker_counts[] = { 0, 1, 2, 4 };

/* ---- single jobs ---- */

typedef struct probe {
	pthread_t ran_on;        /* thread that ran the body */
	jobs_worker *w;          /* context it received */
	_Atomic int ran;         /* bodies run */
	_Atomic int cleaned;     /* cleanups */
	_Atomic int cleaned_ran; /* cleanups with ran = true */
	bool fail;               /* the body fails */
} probe;

static void probe_body(jobs_worker *w, void *arg, jobs_run *run)
{
	probe *p = arg;
	p->ran_on = pthread_self();
	p->w = w;
	atomic_fetch_add_explicit(&p->ran, 1, memory_order_relaxed);
	if (p->fail)
		jobs_job_fail(run, 42, "inline failure %d", 7);
}

static void probe_cleanup(void *arg, bool ran)
{
	probe *p = arg;
	atomic_fetch_add_explicit(&p->cleaned, 1, memory_order_relaxed);
	if (ran)
		atomic_fetch_add_explicit(&p->cleaned_ran, 1, memory_order_relaxed);
}

static jobs_job_desc probe_desc(probe *p, uint32_t fences, const jobs_id *after, size_t nafter)
{
	jobs_job_desc d;
	memset(&d, 0, sizeof d);
	d.fn = probe_body;
	d.arg = p;
	d.cleanup = probe_cleanup;
	d.fences = fences;
	d.after = after;
	d.after_count = nafter;
	d.flags = JOBS_RUN_INLINE;
	return d;
}

START_TEST(test_runs_on_submitter)
{
	jobs_sched *s = jt_sched(worker_counts[_i]);
	probe p;
	memset(&p, 0, sizeof p);
	jobs_job_desc d = probe_desc(&p, 0, NULL, 0);
	jobs_id id = 0;
	jt_assert_status(jobs_submit(s, &d, &id), JOBS_OK, "submit");
	/* It ran inside jobs_submit, on this thread, with no worker context. */
	ck_assert_int_eq(atomic_load(&p.ran), 1);
	ck_assert_int_eq(atomic_load(&p.cleaned_ran), 1);
	ck_assert(pthread_equal(p.ran_on, pthread_self()));
	ck_assert_ptr_null(p.w);
	jt_assert_status(jobs_poll(s, id), JOBS_OK, "poll");
	jt_assert_status(jobs_wait(s, id, JT_WAIT_NS), JOBS_OK, "wait");
	jt_assert_status(jobs_release(s, id), JOBS_OK, "release");
	jobs_sched_destroy(s);
	ck_assert_int_eq(atomic_load(&p.ran), 1);
	ck_assert_int_eq(atomic_load(&p.cleaned), 1);
}
END_TEST

START_TEST(test_fence_resolver_runs_it)
{
	jobs_sched *s = jt_sched(worker_counts[_i]);
	probe p;
	memset(&p, 0, sizeof p);
	jobs_job_desc d = probe_desc(&p, 2, NULL, 0);
	jobs_id id = 0;
	jt_assert_status(jobs_submit(s, &d, &id), JOBS_OK, "submit");
	jt_assert_status(jobs_fence_resolve(s, id), JOBS_OK, "resolve 1");
	ck_assert_int_eq(atomic_load(&p.ran), 0); /* one fence left */
	jt_assert_status(jobs_poll(s, id), JOBS_PENDING, "poll while fenced");
	jt_assert_status(jobs_fence_resolve(s, id), JOBS_OK, "resolve 2");
	ck_assert_int_eq(atomic_load(&p.ran), 1); /* ran in the resolving call */
	ck_assert(pthread_equal(p.ran_on, pthread_self()));
	jt_assert_status(jobs_poll(s, id), JOBS_OK, "poll");
	jt_assert_status(jobs_fence_resolve(s, id), JOBS_INVALID, "over-resolution");
	jt_assert_status(jobs_release(s, id), JOBS_OK, "release");
	jobs_sched_destroy(s);
	ck_assert_int_eq(atomic_load(&p.cleaned), 1);
}
END_TEST

/* jobs_fence_resolve_async never runs the job on the resolving thread, JOBS_RUN_INLINE or not. */
START_TEST(test_async_resolve_from_test_thread)
{
	jobs_sched *s = jt_sched(worker_counts[_i]);
	probe p;
	memset(&p, 0, sizeof p);
	jobs_job_desc d = probe_desc(&p, 2, NULL, 0);
	jobs_id id = 0;
	jt_assert_status(jobs_submit(s, &d, &id), JOBS_OK, "submit");
	jt_assert_status(jobs_fence_resolve_async(s, id), JOBS_OK, "resolve 1");
	jt_assert_status(jobs_fence_resolve_async(s, id), JOBS_OK, "resolve 2");
	if (worker_counts[_i] == 0) /* nobody else runs jobs: it cannot have run yet */
		ck_assert_int_eq(atomic_load(&p.ran), 0);
	jt_assert_status(jobs_fence_resolve_async(s, id), JOBS_INVALID, "over-resolution");
	jt_assert_status(jobs_wait(s, id, JT_WAIT_NS), JOBS_OK, "wait"); /* 0 workers: runs it here */
	ck_assert_int_eq(atomic_load(&p.ran), 1);
	if (worker_counts[_i] > 0)
		ck_assert_msg(p.w != NULL, "a worker ran it, with its context");
	jt_assert_status(jobs_release(s, id), JOBS_OK, "release");
	jt_assert_status(jobs_fence_resolve_async(s, id + 1000000), JOBS_INVALID, "unknown id");
	jobs_sched_destroy(s);
	ck_assert_int_eq(atomic_load(&p.cleaned), 1);
}
END_TEST

/* A plain pthread (a CUDA host callback's stand-in) resolves the last fences of many inline jobs. */
typedef struct async_resolver {
	jobs_sched *s;        /* the pool */
	const jobs_id *ids;   /* jobs to resolve */
	int n;                /* how many */
	pthread_t self;       /* the resolving thread, as it sees itself (before resolving) */
} async_resolver;

static void *async_resolver_main(void *arg)
{
	async_resolver *r = arg;
	r->self = pthread_self();
	for (int i = 0; i < r->n; i++)
		jt_check(jobs_fence_resolve_async(r->s, r->ids[i]) == JOBS_OK, "async resolve %d", i);
	return NULL;
}

START_TEST(test_async_resolve_from_pthread)
{
	jobs_sched *s = jt_sched(worker_counts[_i]);
	enum { N = 64 };
	probe *p = calloc(N, sizeof *p);
	jobs_id ids[N];
	for (int i = 0; i < N; i++) {
		jobs_job_desc d = probe_desc(&p[i], 1, NULL, 0);
		ids[i] = jt_submit(s, &d, 0);
	}
	async_resolver r = { .s = s, .ids = ids, .n = N };
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, async_resolver_main, &r), 0);
	pthread_join(th, NULL);
	for (int i = 0; i < N; i++) {
		jt_assert_status(jobs_wait(s, ids[i], JT_WAIT_NS), JOBS_OK, "wait");
		ck_assert_int_eq(atomic_load(&p[i].ran), 1);
		ck_assert_msg(!pthread_equal(p[i].ran_on, r.self), "job %d ran on the resolving thread", i);
		jt_assert_status(jobs_release(s, ids[i]), JOBS_OK, "release");
	}
	jobs_sched_destroy(s);
	jt_assert_no_thread_failures();
	free(p);
}
END_TEST

START_TEST(test_failure_and_failed_dependency)
{
	jobs_sched *s = jt_sched(worker_counts[_i]);
	probe a, b;
	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	a.fail = true;
	jobs_job_desc da = probe_desc(&a, 0, NULL, 0);
	jobs_id ia = 0, ib = 0;
	jt_assert_status(jobs_submit(s, &da, &ia), JOBS_OK, "submit a");
	jt_assert_status(jobs_poll(s, ia), JOBS_FAILED, "a failed");
	int code = 0;
	char msg[64];
	jt_assert_status(jobs_receipt_result(s, ia, &code, msg, sizeof msg), JOBS_FAILED, "result a");
	ck_assert_int_eq(code, 42);
	ck_assert_str_eq(msg, "inline failure 7");
	/* A dependent of a failed job does not run; its cleanup sees ran = false. */
	jobs_job_desc db = probe_desc(&b, 0, &ia, 1);
	jt_assert_status(jobs_submit(s, &db, &ib), JOBS_OK, "submit b");
	jt_assert_status(jobs_wait(s, ib, JT_WAIT_NS), JOBS_FAILED, "b failed");
	ck_assert_int_eq(atomic_load(&b.ran), 0);
	ck_assert_int_eq(atomic_load(&b.cleaned), 1);
	ck_assert_int_eq(atomic_load(&b.cleaned_ran), 0);
	jobs_id dep = 0;
	jt_assert_status(jobs_receipt_failed_dependency(s, ib, &dep), JOBS_OK, "failed dep");
	ck_assert_uint_eq(dep, ia);
	jt_assert_status(jobs_release(s, ia), JOBS_OK, "release a");
	jt_assert_status(jobs_release(s, ib), JOBS_OK, "release b");
	jobs_sched_destroy(s);
}
END_TEST

/* A dependency still pending at submission: the inline job is not run by the submitter; it runs
 * once, after the dependency, wherever that completes. */
START_TEST(test_pending_dependency)
{
	jobs_sched *s = jt_sched(worker_counts[_i]);
	probe a, b;
	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	jobs_job_desc da = probe_desc(&a, 1, NULL, 0);
	da.flags = 0; /* an ordinary job held by a fence */
	jobs_id ia = 0, ib = 0;
	jt_assert_status(jobs_submit(s, &da, &ia), JOBS_OK, "submit a");
	jobs_job_desc db = probe_desc(&b, 0, &ia, 1);
	jt_assert_status(jobs_submit(s, &db, &ib), JOBS_OK, "submit b");
	ck_assert_int_eq(atomic_load(&b.ran), 0);
	jt_assert_status(jobs_fence_resolve(s, ia), JOBS_OK, "resolve a");
	jt_assert_status(jobs_wait(s, ib, JT_WAIT_NS), JOBS_OK, "wait b");
	ck_assert_int_eq(atomic_load(&a.ran), 1);
	ck_assert_int_eq(atomic_load(&b.ran), 1);
	jt_assert_status(jobs_release(s, ia), JOBS_OK, "release a");
	jt_assert_status(jobs_release(s, ib), JOBS_OK, "release b");
	jobs_sched_destroy(s);
	ck_assert_int_eq(atomic_load(&b.cleaned), 1);
}
END_TEST

/* ---- stress: external submitters, inline and ordinary jobs, fences resolved elsewhere ---- */

#define SUBMITTERS 3
#define MAX_DEPS 3

typedef struct snode {
	struct stress *g;
	int index;
	uint64_t payload;          /* written by the body, read by dependents (plain: ordering test) */
} snode;

typedef struct stress {
	jobs_sched *s;
	int n;                     /* jobs per submitter */
	snode *nodes;              /* SUBMITTERS * n */
	_Atomic int *ran;
	_Atomic int *finished;     /* release at the end of the body */
	_Atomic int *cleaned;
	_Atomic jobs_id *fenced;   /* ids waiting for the resolver (0 = none / taken) */
	int *deps;                 /* MAX_DEPS per node, -1 = none */
	_Atomic int submitted;     /* submitters finished */
	_Atomic int errors;
} stress;

static uint64_t payload_of(int i)
{
	return (uint64_t)i * 0x9E3779B97F4A7C15ull + 3;
}

static void snode_body(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	(void)run;
	snode *nd = arg;
	stress *g = nd->g;
	for (int k = 0; k < MAX_DEPS; k++) {
		int d = g->deps[nd->index * MAX_DEPS + k];
		if (d < 0)
			continue;
		/* acquire: the dependency's completion happens-before our start. */
		if (!atomic_load_explicit(&g->finished[d], memory_order_acquire) || g->nodes[d].payload != payload_of(d))
			atomic_fetch_add(&g->errors, 1);
	}
	atomic_fetch_add_explicit(&g->ran[nd->index], 1, memory_order_relaxed);
	nd->payload = payload_of(nd->index);
	atomic_store_explicit(&g->finished[nd->index], 1, memory_order_release);
}

static void snode_cleanup(void *arg, bool ran)
{
	(void)ran;
	snode *nd = arg;
	atomic_fetch_add_explicit(&nd->g->cleaned[nd->index], 1, memory_order_relaxed);
}

typedef struct submitter {
	stress *g;
	int which;
	jobs_id *ids;              /* this submitter's ids, in order */
} submitter;

static void *submitter_main(void *arg)
{
	submitter *sb = arg;
	stress *g = sb->g;
	uint64_t rng = 0x1234567ull + (uint64_t)sb->which * 7919;
	for (int j = 0; j < g->n; j++) {
		int idx = sb->which * g->n + j;
		jobs_id after[MAX_DEPS];
		size_t na = 0;
		/* dependencies: earlier jobs of this submitter (ids known here) */
		for (int k = 0; k < MAX_DEPS; k++) {
			g->deps[idx * MAX_DEPS + k] = -1;
			if (j == 0 || jt_below(&rng, 3) == 0)
				continue;
			int back = 1 + (int)jt_below(&rng, (uint64_t)(j < 8 ? j : 8));
			g->deps[idx * MAX_DEPS + k] = idx - back;
			after[na++] = sb->ids[j - back];
		}
		jobs_job_desc d;
		memset(&d, 0, sizeof d);
		d.fn = snode_body;
		d.arg = &g->nodes[idx];
		d.cleanup = snode_cleanup;
		d.after = after;
		d.after_count = na;
		d.flags = JOBS_AFTER_MAY_BE_RELEASED | (jt_below(&rng, 4) ? JOBS_RUN_INLINE : 0u);
		bool fence = jt_below(&rng, 4) == 0;
		d.fences = fence ? 1 : 0;
		sb->ids[j] = jt_submit(g->s, &d, 0);
		if (fence)
			/* release: the resolver reads the id (acquire exchange) and resolves it. */
			atomic_store_explicit(&g->fenced[idx], sb->ids[j], memory_order_release);
		/* Half are released at once (later jobs still name them as dependencies), the rest at
		 * the end. */
		if (jt_below(&rng, 2) == 0)
			jt_check(jobs_release(g->s, sb->ids[j]) == JOBS_OK, "release %d", idx);
	}
	atomic_fetch_add_explicit(&g->submitted, 1, memory_order_release);
	return NULL;
}

static void *resolver_main(void *arg)
{
	stress *g = arg;
	int total = SUBMITTERS * g->n;
	for (;;) {
		/* acquire: pairs with the submitters' release increment; their last stores are seen. */
		bool last = atomic_load_explicit(&g->submitted, memory_order_acquire) == SUBMITTERS;
		for (int i = 0; i < total; i++) {
			jobs_id id = atomic_exchange_explicit(&g->fenced[i], 0, memory_order_acquire);
			if (id)
				jt_check(jobs_fence_resolve(g->s, id) == JOBS_OK, "resolve %d", i);
		}
		if (last)
			return NULL;
		jt_sleep_us(50);
	}
}

START_TEST(test_stress)
{
	stress *g = calloc(1, sizeof *g);
	ck_assert_ptr_nonnull(g);
	g->s = jt_sched(worker_counts[_i]);
	g->n = (int)jt_scaled(4000, 100);
	int total = SUBMITTERS * g->n;
	g->nodes = calloc((size_t)total, sizeof *g->nodes);
	g->ran = calloc((size_t)total, sizeof *g->ran);
	g->finished = calloc((size_t)total, sizeof *g->finished);
	g->cleaned = calloc((size_t)total, sizeof *g->cleaned);
	g->fenced = calloc((size_t)total, sizeof *g->fenced);
	g->deps = calloc((size_t)total * MAX_DEPS, sizeof *g->deps);
	ck_assert(g->nodes && g->ran && g->finished && g->cleaned && g->fenced && g->deps);
	for (int i = 0; i < total; i++) {
		g->nodes[i].g = g;
		g->nodes[i].index = i;
	}
	submitter sb[SUBMITTERS];
	pthread_t th[SUBMITTERS], res;
	for (int k = 0; k < SUBMITTERS; k++) {
		sb[k].g = g;
		sb[k].which = k;
		sb[k].ids = calloc((size_t)g->n, sizeof *sb[k].ids);
		ck_assert_ptr_nonnull(sb[k].ids);
	}
	ck_assert_int_eq(pthread_create(&res, NULL, resolver_main, g), 0);
	for (int k = 0; k < SUBMITTERS; k++)
		ck_assert_int_eq(pthread_create(&th[k], NULL, submitter_main, &sb[k]), 0);
	for (int k = 0; k < SUBMITTERS; k++)
		pthread_join(th[k], NULL);
	pthread_join(res, NULL);
	/* Every job finishes: wait for the flags (a safety net only, never a timing criterion). */
	uint64_t start = jt_now_ns();
	for (int i = 0; i < total; i++)
		while (!atomic_load_explicit(&g->finished[i], memory_order_acquire)) {
			ck_assert_msg(jt_now_ns() - start < JT_SAFETY_NS, "job %d never ran", i);
			jt_sleep_us(10);
		}
	for (int k = 0; k < SUBMITTERS; k++)
		for (int j = 0; j < g->n; j++)
			(void)jobs_release(g->s, sb[k].ids[j]); /* INVALID for those released already */
	jobs_sched_destroy(g->s);
	jt_assert_no_thread_failures();
	ck_assert_int_eq(atomic_load(&g->errors), 0);
	for (int i = 0; i < total; i++) {
		ck_assert_msg(atomic_load(&g->ran[i]) == 1, "job %d ran %d times", i, atomic_load(&g->ran[i]));
		ck_assert_msg(atomic_load(&g->cleaned[i]) == 1, "job %d cleaned %d times", i,
			      atomic_load(&g->cleaned[i]));
	}
	for (int k = 0; k < SUBMITTERS; k++)
		free(sb[k].ids);
	free(g->nodes);
	free(g->ran);
	free(g->finished);
	free(g->cleaned);
	free(g->fenced);
	free(g->deps);
	free(g);
}
END_TEST

static Suite *inline_suite(void)
{
	Suite *su = suite_create("jobs_inline");
	TCase *tc = tcase_create("single");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_runs_on_submitter, 0, 4);
	tcase_add_loop_test(tc, test_fence_resolver_runs_it, 0, 4);
	tcase_add_loop_test(tc, test_async_resolve_from_test_thread, 0, 4);
	tcase_add_loop_test(tc, test_async_resolve_from_pthread, 0, 4);
	tcase_add_loop_test(tc, test_failure_and_failed_dependency, 0, 4);
	tcase_add_loop_test(tc, test_pending_dependency, 0, 4);
	suite_add_tcase(su, tc);
	tc = tcase_create("stress");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_stress, 1, 4); /* pools with workers: nobody needs to wait */
	suite_add_tcase(su, tc);
	return su;
}

JT_MAIN(inline_suite)
