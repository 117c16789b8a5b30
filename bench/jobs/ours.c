/*
 * ours.c — the job system's side of the benchmark: fork-join fib, flat spawn/sync batches, and the
 * external submit + wait round trip. Compiled with the same flags as the serial baseline (-O2).
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "jobs.h"
#include "jobs_forkjoin.h"
#include "jobs_task.h"

struct ours_pool {
	jobs_sched *s;
};

ours_pool *ours_create(int workers)
{
	jobs_config cfg;
	jobs_config_default(&cfg);
	cfg.workers = workers;
	const char *err = NULL;
	jobs_sched *s = jobs_sched_create(&cfg, &err);
	if (!s) {
		fprintf(stderr, "ovstage_bench_jobs: jobs_sched_create failed: %s\n", err ? err : "?");
		return NULL;
	}
	ours_pool *p = malloc(sizeof *p);
	if (!p) {
		jobs_sched_destroy(s);
		return NULL;
	}
	p->s = s;
	return p;
}

void ours_destroy(ours_pool *p)
{
	if (!p)
		return;
	jobs_sched_destroy(p->s);
	free(p);
}

int ours_workers(const ours_pool *p)
{
	return jobs_sched_workers(p->s);
}

void ours_stats(ours_pool *p, uint64_t *steals, uint64_t *sleeps)
{
	jobs_stats st;
	jobs_sched_stats(p->s, &st);
	*steals = st.steals;
	*sleeps = st.sleeps;
}

/* Submits fn(arg) from this thread and waits for it. */
static bool run_job(ours_pool *p, jobs_job_fn fn, void *arg)
{
	jobs_job_desc d = {0};
	d.fn = fn;
	d.arg = arg;
	jobs_id id;
	if (jobs_submit(p->s, &d, &id) != JOBS_OK)
		return false;
	jobs_status st = jobs_wait(p->s, id, JOBS_TIMEOUT_INFINITE);
	jobs_release(p->s, id);
	return st == JOBS_OK;
}

/* ---- fork-join fib: the recursion shape of jobs_forkjoin.h's example (spawn n-1, run n-2, sync) */

struct fib {
	int n;
	long r;
};
JOBS_PAYLOAD_FITS(struct fib);

static void fib_frame(jobs_worker *w, void *p)
{
	struct fib *a = p;
	if (a->n < 2) {
		a->r = a->n;
		return;
	}
	/* Fill the whole argument struct in one go: a partial store followed by jobs_sync's wider
	 * copy of the payload would stall on store-to-load forwarding. */
	struct fib *child = jobs_spawn_args(w);
	*child = (struct fib){a->n - 1, 0};
	jobs_spawn(w, fib_frame);
	struct fib mine = {a->n - 2, 0};
	fib_frame(w, &mine);
	struct fib done;
	jobs_sync(w, &done, sizeof done);
	a->r = done.r + mine.r;
}

struct fib_job {
	int n;
	long r;
	uint64_t t0, t1; /* timed inside the job: excludes the submit/wake/wait round trip */
};

static void fib_job(jobs_worker *w, void *arg, jobs_run *run)
{
	struct fib_job *j = arg;
	struct fib a = {j->n, 0};
	j->t0 = bench_now_ns();
	fib_frame(w, &a);
	j->t1 = bench_now_ns();
	j->r = a.r;
}

uint64_t ours_fib_ns(ours_pool *p, int n, long *result)
{
	struct fib_job j = {n, -1, 0, 0};
	if (!run_job(p, fib_job, &j))
		return 0;
	*result = j.r;
	return j.t1 - j.t0;
}

/* ---- typed fork-join fib (jobs_task.h): the same recursion shape, arguments in registers */

JOBS_TASK_1(long, tfib, int, n)
{
	if (n < 2)
		return n;
	JOBS_SPAWN(tfib, n - 1);
	long b = JOBS_CALL(tfib, n - 2);
	long a = JOBS_SYNC(tfib);
	return a + b;
}

static void tfib_job(jobs_worker *w, void *arg, jobs_run *run)
{
	struct fib_job *j = arg;
	j->t0 = bench_now_ns();
	j->r = JOBS_TASK_RUN(w, tfib, j->n);
	j->t1 = bench_now_ns();
}

uint64_t ours_fib_typed_ns(ours_pool *p, int n, long *result)
{
	struct fib_job j = {n, -1, 0, 0};
	if (!run_job(p, tfib_job, &j))
		return 0;
	*result = j.r;
	return j.t1 - j.t0;
}

/* ---- flat spawn/sync batches on one worker */

struct tiny {
	long i;
	long r;
};
JOBS_PAYLOAD_FITS(struct tiny);

static void tiny_frame(jobs_worker *w, void *p)
{
	struct tiny *t = p;
	t->r = 2 * t->i + 1;
}

struct batch_job {
	long k, batches, sum;
	uint64_t t0, t1;
};

static void batch_job(jobs_worker *w, void *arg, jobs_run *run)
{
	struct batch_job *j = arg;
	long sum = 0;
	j->t0 = bench_now_ns();
	for (long b = 0; b < j->batches; b++) {
		for (long i = 0; i < j->k; i++) {
			struct tiny *t = jobs_spawn_args(w);
			t->i = i;
			jobs_spawn(w, tiny_frame);
		}
		for (long i = 0; i < j->k; i++) {
			struct tiny out;
			jobs_sync(w, &out, sizeof out);
			sum += out.r;
		}
	}
	j->t1 = bench_now_ns();
	j->sum = sum;
}

uint64_t ours_spawn_batches_ns(ours_pool *p, long k, long batches, long *check)
{
	struct batch_job j = {k, batches, 0, 0, 0};
	if (!run_job(p, batch_job, &j))
		return 0;
	*check = j.sum;
	return j.t1 - j.t0;
}

/* ---- external round trip */

static void trivial_job(jobs_worker *w, void *arg, jobs_run *run)
{
	++*(volatile long *)arg;
}

bool ours_roundtrip(ours_pool *p, long iters, uint64_t *ns)
{
	volatile long counter = 0;
	jobs_job_desc d = {0};
	d.fn = trivial_job;
	d.arg = (void *)&counter;
	for (long i = 0; i < iters; i++) {
		uint64_t t0 = bench_now_ns();
		jobs_id id;
		if (jobs_submit(p->s, &d, &id) != JOBS_OK)
			return false;
		jobs_status st = jobs_wait(p->s, id, JOBS_TIMEOUT_INFINITE);
		jobs_release(p->s, id);
		uint64_t t1 = bench_now_ns();
		if (st != JOBS_OK)
			return false;
		ns[i] = t1 - t0;
	}
	return counter == iters;
}

/* ---- a trickle of jobs: what the pool burns between them */

/* The jobs are released unwaited, so some may run after the trickle returns: their counter is
 * static, not on the trickle's stack. (Counted with plain increments by whichever worker runs
 * them; nobody reads it, it only keeps the body from being empty.) */
static volatile long trickle_counter;

struct trickle {
	ours_pool *p;
	uint64_t sleeps0, sleeps1; /* the workers' sleeps at the first send and after the last */
	uint64_t empty0, empty1;   /* their wake-ups that found nothing, likewise */
	long sent;                 /* jobs sent */
	bench_threads th0, th1;    /* per-thread run times at the first send and after the last */
};

static void trickle_send(void *ctx)
{
	struct trickle *t = ctx;
	jobs_job_desc d = {0};
	d.fn = trivial_job;
	d.arg = (void *)&trickle_counter;
	jobs_id id;
	if (jobs_submit(t->p->s, &d, &id) == JOBS_OK)
		jobs_release(t->p->s, id);
	t->sent++;
}

static void trickle_mark(void *ctx, bool end)
{
	struct trickle *t = ctx;
	jobs_stats st;
	jobs_sched_stats(t->p->s, &st);
	*(end ? &t->sleeps1 : &t->sleeps0) = st.sleeps;
	*(end ? &t->empty1 : &t->empty0) = st.empty_wakeups;
	bench_threads_snapshot(end ? &t->th1 : &t->th0);
}

double ours_trickle_pct(ours_pool *p, double rate_hz, uint64_t measure_ns, double *sleeps_per_job,
			double *empty_per_job, int *workers_busy)
{
	static struct trickle t; /* two thread snapshots: too big for a worker-sized stack frame */
	t = (struct trickle){.p = p};
	double pct = bench_trickle_pct(rate_hz, measure_ns, trickle_send, &t, trickle_mark);
	if (sleeps_per_job)
		*sleeps_per_job = t.sent ? (double)(t.sleeps1 - t.sleeps0) / (double)t.sent : -1;
	if (empty_per_job)
		*empty_per_job = t.sent ? (double)(t.empty1 - t.empty0) / (double)t.sent : -1;
	if (workers_busy) /* a worker that ran at all: woken at least once */
		*workers_busy = bench_threads_active(&t.th0, &t.th1, 1);
	return pct;
}
