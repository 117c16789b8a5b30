/*
 * check_released_after.c — JOBS_AFTER_MAY_BE_RELEASED with dependencies that were released and
 * whose slots were recycled before the dependent was submitted. Such a dependency counts as
 * complete, and everything its body wrote must still happen-before the dependent's body: each
 * chain owns a plain (non-atomic) counter that every job of the chain reads and increments, so a
 * missing happens-before edge is a data race (ThreadSanitizer reports it) and may lose increments
 * (the final count is checked in every build).
 *
 * Two patterns, each with many more submitting threads than cores:
 *  - shared chains (the engine's seals): threads take turns on a chain under the chain's mutex
 *    (read the last id, submit after it, store the new id), then wait for their own job and release
 *    it outside the lock, so the next submitter's dependency is often already recycled;
 *  - private chains released at once: each thread submits its chain job after job and releases
 *    every id right after submitting it, without ever waiting, so the dependency is recycled by
 *    the worker that completes it.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jobs.h"
#include "jobs_test_util.h"

/* A chain of jobs: each job's body checks and increments the counter. */
typedef struct chain {
	pthread_mutex_t lock; /* shared chains: serialises submissions (last id and order) */
	jobs_id last;         /* the chain's last submitted job (under lock, or owner-only) */
	long submitted;       /* jobs submitted on this chain (under lock, or owner-only) */
	long count;           /* plain: written only by the chain's job bodies, one after another */
	long bad_order;       /* plain, like count: bodies that saw an unexpected count */
} chain;

/* One job's argument. */
typedef struct link {
	chain *c;      /* the chain it belongs to */
	long expected; /* the count its body must see (its position in the chain) */
} link;

static void link_body(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	(void)run;
	link *l = arg;
	if (l->c->count != l->expected)
		l->c->bad_order++;
	l->c->count++;
}

static void link_cleanup(void *arg, bool ran)
{
	if (!ran)
		jt_fail_at(__FILE__, __LINE__, "a chain job did not run");
	free(arg);
}

/* Submits one job of chain c after c->last (the caller owns c->last). Retries while full. */
static jobs_id submit_link(jobs_sched *s, chain *c)
{
	link *l = malloc(sizeof *l);
	if (!l) {
		jt_fail_at(__FILE__, __LINE__, "out of memory");
		return JOBS_INVALID_ID;
	}
	l->c = c;
	l->expected = c->submitted;
	jobs_job_desc d;
	memset(&d, 0, sizeof d);
	d.fn = link_body;
	d.arg = l;
	d.cleanup = link_cleanup;
	d.after = &c->last;
	d.after_count = c->last ? 1 : 0;
	d.flags = JOBS_AFTER_MAY_BE_RELEASED;
	uint64_t start = jt_now_ns();
	for (;;) {
		jobs_id id = 0;
		jobs_status st = jobs_submit(s, &d, &id);
		if (st == JOBS_OK) {
			c->last = id;
			c->submitted++;
			return id;
		}
		if (st != JOBS_FULL || jt_now_ns() - start > JT_SAFETY_NS) {
			jt_fail_at(__FILE__, __LINE__, "jobs_submit: %s", jt_status_name(st));
			free(l);
			return JOBS_INVALID_ID;
		}
		jt_sleep_us(50);
	}
}

typedef struct submitter {
	jobs_sched *s;   /* the pool */
	chain *chains;   /* shared: all chains; private: this thread's own chain */
	int n_chains;    /* chains to pick from */
	long jobs;       /* jobs this thread submits */
	uint64_t seed;   /* chain choice */
	bool wait;       /* wait for each job before releasing it */
} submitter;

static void *shared_main(void *arg)
{
	submitter *t = arg;
	for (long i = 0; i < t->jobs; i++) {
		chain *c = &t->chains[jt_below(&t->seed, (uint64_t)t->n_chains)];
		pthread_mutex_lock(&c->lock);
		jobs_id id = submit_link(t->s, c);
		pthread_mutex_unlock(&c->lock);
		if (!id)
			return NULL;
		if (t->wait) {
			jobs_status ws = jobs_wait(t->s, id, JT_WAIT_NS);
			jt_check(ws == JOBS_OK, "wait: %s", jt_status_name(ws));
		}
		jobs_status rs = jobs_release(t->s, id);
		jt_check(rs == JOBS_OK, "release: %s", jt_status_name(rs));
	}
	return NULL;
}

/* Runs `threads` submitters over `n_chains` chains and checks every chain's final count. */
static void run_chains(int workers, int threads, int n_chains, bool shared, bool wait, long jobs)
{
	jobs_sched *s = jt_sched(workers);
	chain *chains = calloc((size_t)n_chains, sizeof *chains);
	submitter *sub = calloc((size_t)threads, sizeof *sub);
	pthread_t *th = calloc((size_t)threads, sizeof *th);
	ck_assert(chains && sub && th);
	for (int c = 0; c < n_chains; c++)
		pthread_mutex_init(&chains[c].lock, NULL);
	for (int k = 0; k < threads; k++) {
		sub[k] = (submitter){ .s = s, .chains = shared ? chains : &chains[k],
				      .n_chains = shared ? n_chains : 1, .jobs = jobs,
				      .seed = 0x5eed0000u + (uint64_t)k, .wait = wait };
		ck_assert_int_eq(pthread_create(&th[k], NULL, shared_main, &sub[k]), 0);
	}
	for (int k = 0; k < threads; k++)
		pthread_join(th[k], NULL);
	jobs_sched_destroy(s); /* runs whatever is still queued; orders it before the checks below */
	jt_assert_no_thread_failures();
	long total = 0;
	for (int c = 0; c < n_chains; c++) {
		ck_assert_msg(chains[c].count == chains[c].submitted,
			      "chain %d: count %ld after %ld jobs (lost increments)", c, chains[c].count,
			      chains[c].submitted);
		ck_assert_msg(chains[c].bad_order == 0, "chain %d: %ld bodies ran out of order", c,
			      chains[c].bad_order);
		total += chains[c].submitted;
		pthread_mutex_destroy(&chains[c].lock);
	}
	ck_assert_int_eq(total, (long)threads * jobs);
	free(th);
	free(sub);
	free(chains);
}

static const int thread_counts[] = { 8, 32 }; /* 4x and 16x the 2 cores of the test machine */

/* Shared chains, each caller waits for its own job and releases it at once (engine seals). */
START_TEST(test_shared_chains_wait_release)
{
	run_chains(2, thread_counts[_i], 4, true, true, jt_scaled(3000, 150));
}
END_TEST

/* Shared chains, ids released right after submission without waiting. */
START_TEST(test_shared_chains_release_at_once)
{
	run_chains(2, thread_counts[_i], 4, true, false, jt_scaled(3000, 150));
}
END_TEST

/* One private chain per thread, every id released right after submission without waiting. */
START_TEST(test_private_chains_release_at_once)
{
	int threads = thread_counts[_i];
	run_chains(2, threads, threads, false, false, jt_scaled(3000, 150));
}
END_TEST

static Suite *released_after_suite(void)
{
	Suite *su = suite_create("jobs_released_after");
	TCase *tc = tcase_create("released_after");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_shared_chains_wait_release, 0, 2);
	tcase_add_loop_test(tc, test_shared_chains_release_at_once, 0, 2);
	tcase_add_loop_test(tc, test_private_chains_release_at_once, 0, 2);
	suite_add_tcase(su, tc);
	return su;
}

JT_MAIN(released_after_suite)
