/*
 * check_wake.c — the workers' sleep protocol loses no wake-up (docs/jobs.md, "Sleeping and waking"):
 * producers on more threads than cores submit bursts of jobs all at once, release the ids at once,
 * wait until the burst has run, then pause long enough for every worker to fall asleep (spin_us is
 * 1 µs), so that each burst lands on a pool whose workers sleep or are about to. A round barrier
 * keeps the producers in step: a lost wake-up is not masked by another producer's later
 * submission, and shows as a burst that never finishes — the waiting producer then fails after
 * the JT_SAFETY_NS safety net. Every job must run exactly once.
 *
 * The bursts mix the three ways work reaches a sleeper: the injection queue (external submissions),
 * a worker's deque (a dependent made ready by the job it waited for: a private frame published
 * because somebody sleeps), and a submission from inside a job body. Pools of 1, 3 and 16 workers,
 * and 70, which spans two words of the `asleep` mask (the claim then crosses a word boundary).
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "jobs.h"
#include "jobs_test_util.h"

static const int wake_workers[] = {1, 3, 16, 70};

enum { PRODUCERS = 6, MAX_BURST = 6, JOBS_PER_ITEM = 2 };

struct wake_shared;

/* One job's record: the body counts its runs; `value` is a plain write read after the burst. */
struct wake_cell {
	_Atomic int ran;  /* runs of this job's body (must end at exactly 1) */
	long value;       /* plain: written by the body, read by the producer after its wait */
	struct wake_shared *sh;
	int producer;     /* whose burst counter to bump */
};

struct wake_shared {
	jobs_sched *s;
	long rounds;
	struct wake_cell *cells;        /* rounds * PRODUCERS * MAX_BURST * JOBS_PER_ITEM */
	_Atomic long done[PRODUCERS];   /* bodies of each producer's bursts run so far (release) */
	pthread_barrier_t barrier;      /* one round at a time, all producers together */
	_Atomic bool abandon;           /* the test failed: stop */
	_Atomic int finished;           /* producers that finished every round */
};

static size_t cell_index(long round, int producer, int item, int part)
{
	return (((size_t)round * PRODUCERS + (size_t)producer) * MAX_BURST + (size_t)item) * JOBS_PER_ITEM +
	       (size_t)part;
}

static void count_run(struct wake_cell *c)
{
	c->value = (long)(c - c->sh->cells) * 7 + 1;
	/* relaxed: a count checked after the producer's acquire of `done`, which orders it. */
	atomic_fetch_add_explicit(&c->ran, 1, memory_order_relaxed);
	/* release: the producer's acquire of `done` then sees `value` and `ran`. */
	atomic_fetch_add_explicit(&c->sh->done[c->producer], 1, memory_order_release);
}

static void plain_job(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	(void)run;
	count_run(arg);
}

/* Submits its partner (the next cell) from inside the body, released at once, then counts itself. */
static void spawning_job(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	(void)run;
	struct wake_cell *c = arg;
	jobs_job_desc d = {0};
	d.fn = plain_job;
	d.arg = c + 1;
	jobs_id id;
	jobs_status st;
	uint64_t start = jt_now_ns();
	while ((st = jobs_submit(c->sh->s, &d, &id)) == JOBS_FULL && jt_now_ns() - start < JT_SAFETY_NS)
		sched_yield();
	jt_check(st == JOBS_OK, "submission from a job body: %s", jt_status_name(st));
	if (st == JOBS_OK)
		jobs_release(c->sh->s, id);
	count_run(c);
}

struct wake_arg {
	struct wake_shared *sh;
	int index;
};

static jobs_id submit_cell(jobs_sched *s, jobs_job_fn fn, struct wake_cell *c, const jobs_id *after)
{
	jobs_job_desc d = {0};
	d.fn = fn;
	d.arg = c;
	d.after = after;
	d.after_count = after ? 1 : 0;
	return jt_submit(s, &d, 0);
}

static void *wake_producer(void *argp)
{
	struct wake_arg *a = argp;
	struct wake_shared *sh = a->sh;
	int p = a->index;
	uint64_t rng = 0x5eed0000u + (uint64_t)p;
	long expect = 0;
	for (long r = 0; r < sh->rounds; r++) {
		pthread_barrier_wait(&sh->barrier);
		int burst = 1 + (int)jt_below(&rng, MAX_BURST);
		for (int i = 0; i < burst; i++) {
			struct wake_cell *c = &sh->cells[cell_index(r, p, i, 0)];
			switch (jt_below(&rng, 3)) {
			case 0: { /* two external submissions, released at once */
				jobs_id x = submit_cell(sh->s, plain_job, c, NULL);
				jobs_release(sh->s, x);
				jobs_id y = submit_cell(sh->s, plain_job, c + 1, NULL);
				jobs_release(sh->s, y);
				break;
			}
			case 1: { /* a dependent made ready on the worker that runs its dependency */
				jobs_id x = submit_cell(sh->s, plain_job, c, NULL);
				jobs_id y = submit_cell(sh->s, plain_job, c + 1, &x);
				jobs_release(sh->s, x);
				jobs_release(sh->s, y);
				break;
			}
			default: { /* a body that submits its partner */
				jobs_id x = submit_cell(sh->s, spawning_job, c, NULL);
				jobs_release(sh->s, x);
				break;
			}
			}
		}
		expect += (long)burst * JOBS_PER_ITEM;
		/* The burst must run without any further help from us: a lost wake-up leaves it queued. */
		uint64_t start = jt_now_ns();
		while (atomic_load_explicit(&sh->done[p], memory_order_acquire) < expect) {
			if (atomic_load_explicit(&sh->abandon, memory_order_relaxed)) /* relaxed: a stop hint */
				return NULL;
			if (jt_now_ns() - start >= JT_SAFETY_NS) {
				jt_check(false, "producer %d round %ld: %ld of %ld jobs never ran (a lost wake-up?)", p,
					 r, expect - atomic_load(&sh->done[p]), (long)burst * JOBS_PER_ITEM);
				atomic_store_explicit(&sh->abandon, true, memory_order_relaxed); /* relaxed: a hint */
				return NULL;
			}
			sched_yield();
		}
		for (int i = 0; i < burst; i++)
			for (int k = 0; k < JOBS_PER_ITEM; k++) {
				struct wake_cell *c = &sh->cells[cell_index(r, p, i, k)];
				jt_check(c->value == (long)(c - sh->cells) * 7 + 1, "job %ld: value %ld",
					 (long)(c - sh->cells), c->value);
			}
		/* Let the workers fall asleep: their window is 1 µs; most gaps are longer than a wake-up. */
		unsigned gap = (unsigned)jt_below(&rng, 8) == 0 ? 2000u : (unsigned)jt_below(&rng, 300);
		if (gap)
			jt_sleep_us(gap);
	}
	atomic_fetch_add_explicit(&sh->finished, 1, memory_order_release);
	return NULL;
}

START_TEST(test_wake_bursts_on_sleeping_pool)
{
	int workers = wake_workers[_i];
	/* On the heap: a failed test leaves its threads behind (some blocked for good). */
	struct wake_shared *sh = calloc(1, sizeof *sh);
	ck_assert_ptr_nonnull(sh);
	jobs_config cfg;
	jobs_config_default(&cfg);
	cfg.workers = workers;
	cfg.spin_us = 1; /* sleep almost at once: every burst meets sleeping workers */
	cfg.receipt_capacity = 256; /* ids released at once are recycled at once */
	sh->s = jt_sched_cfg(&cfg);
	sh->rounds = jt_scaled(workers > 16 ? 150 : 400, 40);
	size_t n_cells = cell_index(sh->rounds, 0, 0, 0);
	sh->cells = calloc(n_cells, sizeof *sh->cells);
	ck_assert_ptr_nonnull(sh->cells);
	for (long r = 0; r < sh->rounds; r++)
		for (int p = 0; p < PRODUCERS; p++)
			for (int i = 0; i < MAX_BURST; i++)
				for (int k = 0; k < JOBS_PER_ITEM; k++) {
					struct wake_cell *c = &sh->cells[cell_index(r, p, i, k)];
					c->sh = sh;
					c->producer = p;
				}
	ck_assert(pthread_barrier_init(&sh->barrier, NULL, PRODUCERS) == 0);
	struct wake_arg args[PRODUCERS];
	pthread_t th[PRODUCERS];
	for (int p = 0; p < PRODUCERS; p++) {
		args[p] = (struct wake_arg){sh, p};
		ck_assert(pthread_create(&th[p], NULL, wake_producer, &args[p]) == 0);
	}
	/* A producer that fails stops at the barrier's next round; the others then block there for
	 * good, so wait for the outcome rather than joining blindly. */
	uint64_t start = jt_now_ns();
	while (atomic_load_explicit(&sh->finished, memory_order_acquire) < PRODUCERS &&
	       !atomic_load_explicit(&sh->abandon, memory_order_relaxed) && jt_now_ns() - start < 4 * JT_SAFETY_NS)
		jt_sleep_us(1000);
	ck_assert_msg(!atomic_load(&sh->abandon), "a burst never ran on %d workers", workers);
	jt_assert_no_thread_failures();
	ck_assert_int_eq(atomic_load(&sh->finished), PRODUCERS);
	for (int p = 0; p < PRODUCERS; p++)
		pthread_join(th[p], NULL);
	/* Exactly once: every cell of every burst that was submitted ran once, the others never. */
	long ran = 0;
	for (size_t i = 0; i < n_cells; i++) {
		int n = atomic_load_explicit(&sh->cells[i].ran, memory_order_relaxed);
		ck_assert_msg(n == 0 || n == 1, "job %zu ran %d times", i, n);
		ran += n;
	}
	long want = 0;
	for (int p = 0; p < PRODUCERS; p++)
		want += atomic_load(&sh->done[p]);
	ck_assert_int_eq(ran, want);
	jobs_stats st;
	jobs_sched_stats(sh->s, &st);
	ck_assert_uint_eq(st.jobs_run, (uint64_t)ran);
	ck_assert_msg(st.wakeups <= st.sleeps && st.empty_wakeups <= st.wakeups,
		      "stats: %llu sleeps, %llu wake-ups, %llu empty", (unsigned long long)st.sleeps,
		      (unsigned long long)st.wakeups, (unsigned long long)st.empty_wakeups);
	jobs_sched_destroy(sh->s);
	pthread_barrier_destroy(&sh->barrier);
	free(sh->cells);
	free(sh);
}
END_TEST

static Suite *wake_suite(void)
{
	Suite *su = suite_create("jobs_wake");
	TCase *tc = tcase_create("wake");
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, test_wake_bursts_on_sleeping_pool, 0,
			    (int)(sizeof wake_workers / sizeof wake_workers[0]));
	suite_add_tcase(su, tc);
	return su;
}

JT_MAIN(wake_suite)
