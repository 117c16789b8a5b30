/*
 * bench.h — shared declarations of the job-system benchmark (ovstage_bench_jobs).
 *
 * Each side (ours, the serial baseline, oneTBB, OpenMP, the pthread baseline) exposes plain C
 * functions that run ONE measurement and return its figure; main.c repeats them, keeps the best,
 * and prints the table. Peers report "unavailable" with a negative figure (printed as n/a).
 */
#ifndef OVSTAGE_BENCH_JOBS_H
#define OVSTAGE_BENCH_JOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- util.c ---- */
uint64_t bench_now_ns(void);
uint64_t bench_cpu_ns(void); /* CLOCK_PROCESS_CPUTIME_ID: the whole process, every thread */
void bench_sleep_ns(uint64_t ns);
/* Sleeps settle_ns, then returns the process CPU time spent over the next measure_ns of wall time,
 * as a percentage of one core. */
double bench_idle_cpu_pct(uint64_t settle_ns, uint64_t measure_ns);
uint64_t bench_thread_cpu_ns(void); /* CLOCK_THREAD_CPUTIME_ID */
/* A trickle: calls send(ctx) rate_hz times a second for measure_ns (after a 100 ms settle) and
 * returns the CPU time every other thread of the process spent meanwhile, in % of one core.
 * mark(ctx, end), if not NULL, is called just before the first send (end = false) and just after
 * the last (end = true): the caller reads its own counters there. */
double bench_trickle_pct(double rate_hz, uint64_t measure_ns, void (*send)(void *), void *ctx,
			 void (*mark)(void *ctx, bool end));
/* Per-thread run time of this process (/proc/self/task/TID/schedstat), to count how many threads
 * a trickle kept busy. */
#define BENCH_MAX_THREADS 512
typedef struct bench_threads {
	int n;                            /* threads listed */
	int tid[BENCH_MAX_THREADS];       /* their ids */
	uint64_t run_ns[BENCH_MAX_THREADS]; /* time each spent on a CPU so far */
} bench_threads;
void bench_threads_snapshot(bench_threads *t);
/* Threads other than the caller whose run time grew by at least min_ns from a to b. */
int bench_threads_active(const bench_threads *a, const bench_threads *b, uint64_t min_ns);

/* Sorts ns[0..n) and returns the p-th percentile (0 <= p <= 100) in microseconds. */
double bench_percentile_us(uint64_t *ns, size_t n, double p);
/* fib(k) by iteration; the number of spawns of fork-join fib(n) is fib(n+1) - 1. */
uint64_t bench_fib_iter(int k);
uint64_t bench_fib_spawns(int n);

/* ---- serial.c (its own translation unit, noinline) ---- */
long bench_fib_serial(int n);
/* Counts the calls that spawn (n >= 2) in the same recursion shape: checks bench_fib_spawns. */
uint64_t bench_fib_count_spawns(int n);

/* ---- ceiling.c ---- */
/* threads threads each run bench_fib_serial(n) at once, sharing nothing; returns the ns until the
 * last finishes (0 if they could not all be started), *result the common result (-1 if one differs) */
uint64_t bench_fib_serial_many_ns(int threads, int n, long *result);

/* ---- ours.c ---- */
typedef struct ours_pool ours_pool;
ours_pool *ours_create(int workers);   /* < 0 = one per core (hwloc) */
void ours_destroy(ours_pool *p);
int ours_workers(const ours_pool *p);
/* fork-join fib(n) run inside one job submitted from this (external) thread; returns ns, or 0 on error */
uint64_t ours_fib_ns(ours_pool *p, int n, long *result);
/* the same with typed tasks (jobs_task.h: JOBS_TASK_1, JOBS_SPAWN, JOBS_SYNC) */
uint64_t ours_fib_typed_ns(ours_pool *p, int n, long *result);
/* one worker spawns k trivial frames then syncs them, `batches` times; returns ns */
uint64_t ours_spawn_batches_ns(ours_pool *p, long k, long batches, long *check);
/* submit + wait + release of a trivial job from this thread, iters times; fills ns[iters] */
bool ours_roundtrip(ours_pool *p, long iters, uint64_t *ns);
void ours_stats(ours_pool *p, uint64_t *steals, uint64_t *sleeps);
/* a trickle of trivial jobs submitted (and released) from this thread: the pool's CPU, % of a core;
 * *sleeps_per_job (if not NULL): the workers' sleeps during the trickle per job sent (each sleep
 * but the last ends in a wake-up, so this counts the wake-ups a job costs); *empty_per_job: the
 * wake-ups per job after which a worker found nothing (jobs_stats.empty_wakeups); *workers_busy (if not
 * NULL): how many threads besides this one ran at all meanwhile (/proc schedstat): workers woken */
double ours_trickle_pct(ours_pool *p, double rate_hz, uint64_t measure_ns, double *sleeps_per_job,
			double *empty_per_job, int *workers_busy);

/* ---- peer_tbb.cpp ---- */
bool tbb_available(void);
const char *tbb_version(void);
uint64_t tbb_fib_ns(int threads, int n, long *result);
uint64_t tbb_spawn_batches_ns(int threads, long k, long batches, long *check);
bool tbb_roundtrip(int threads, long iters, uint64_t *ns);
/* runs fib(n) on `threads`, then measures the process idle; returns % of one core */
double tbb_idle_pct(int threads, int n, uint64_t settle_ns, uint64_t measure_ns);

/* ---- peer_omp.c ---- */
bool omp_available(void);
int omp_spec_version(void); /* _OPENMP, e.g. 201511 */
uint64_t omp_fib_ns(int threads, int n, long *result);
double omp_idle_pct(int threads, int n, uint64_t settle_ns, uint64_t measure_ns);

/* ---- peer_lace.c: Lace (built outside the repo by bench/peers/lace.sh), run as a child process ---- */
/* The driver's path (from --lace or $OVSTAGE_PEER_LACE), or NULL: the Lace rows print n/a. */
void lace_set_driver(const char *path);
bool lace_available(void);
const char *lace_version(void); /* from the VERSION file lace.sh writes beside the driver */
/* fib(n) on `workers` Lace workers, timed inside Lace's root task; returns ns, or 0 on error */
uint64_t lace_fib_ns(int workers, int n, long *result);

/* ---- baseline.c: a dedicated thread fed through a pthread mutex + condvar ---- */
bool condvar_roundtrip(long iters, uint64_t *ns);
/* the same trickle handed to one thread through a mutex + condvar (no reply): its CPU, % of a core */
double condvar_trickle_pct(double rate_hz, uint64_t measure_ns);

#ifdef __cplusplus
}
#endif
#endif /* OVSTAGE_BENCH_JOBS_H */
