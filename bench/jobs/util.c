/* util.c — clocks, idle CPU measurement, percentiles, fib arithmetic for the jobs benchmark. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

uint64_t bench_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t bench_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void bench_sleep_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
	while (nanosleep(&ts, &ts) != 0)
		;
}

double bench_idle_cpu_pct(uint64_t settle_ns, uint64_t measure_ns)
{
	bench_sleep_ns(settle_ns);
	uint64_t c0 = bench_cpu_ns(), t0 = bench_now_ns();
	bench_sleep_ns(measure_ns);
	uint64_t c1 = bench_cpu_ns(), t1 = bench_now_ns();
	return 100.0 * (double)(c1 - c0) / (double)(t1 - t0);
}

uint64_t bench_thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double bench_trickle_pct(double rate_hz, uint64_t measure_ns, void (*send)(void *), void *ctx,
			 void (*mark)(void *ctx, bool end))
{
	bench_sleep_ns(100000000u); /* settle: the pool's or thread's start-up is not measured */
	uint64_t period = (uint64_t)(1e9 / rate_hz);
	if (mark)
		mark(ctx, false);
	uint64_t c0 = bench_cpu_ns(), m0 = bench_thread_cpu_ns(), t0 = bench_now_ns();
	for (uint64_t i = 1; i * period <= measure_ns; i++) {
		uint64_t due = t0 + i * period, now = bench_now_ns();
		if (due > now)
			bench_sleep_ns(due - now);
		send(ctx);
	}
	uint64_t c1 = bench_cpu_ns(), m1 = bench_thread_cpu_ns(), t1 = bench_now_ns();
	if (mark)
		mark(ctx, true);
	/* the process minus this (sending) thread: what the receiving side burnt */
	return 100.0 * ((double)(c1 - c0) - (double)(m1 - m0)) / (double)(t1 - t0);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

double bench_percentile_us(uint64_t *ns, size_t n, double p)
{
	if (n == 0)
		return -1;
	qsort(ns, n, sizeof *ns, cmp_u64);
	size_t i = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);
	if (i >= n)
		i = n - 1;
	return (double)ns[i] / 1000.0;
}

uint64_t bench_fib_iter(int k)
{
	uint64_t a = 0, b = 1;
	for (int i = 0; i < k; i++) {
		uint64_t t = a + b;
		a = b;
		b = t;
	}
	return a;
}

/* fork-join fib(n) spawns once per call with n >= 2. S(0) = S(1) = 0, S(n) = 1 + S(n-1) + S(n-2);
 * S(n) + 1 satisfies the Fibonacci recurrence with S(0)+1 = 1 = fib(1), S(1)+1 = 1 = fib(2), so
 * S(n) = fib(n+1) - 1. main.c checks it against bench_fib_count_spawns. */
uint64_t bench_fib_spawns(int n)
{
	return bench_fib_iter(n + 1) - 1;
}

void bench_threads_snapshot(bench_threads *t)
{
	t->n = 0;
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) && t->n < BENCH_MAX_THREADS) {
		int tid = atoi(e->d_name);
		if (tid <= 0)
			continue;
		char path[64];
		snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", tid);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		unsigned long long ns;
		if (fscanf(f, "%llu", &ns) == 1) {
			t->tid[t->n] = tid;
			t->run_ns[t->n] = ns;
			t->n++;
		}
		fclose(f);
	}
	closedir(d);
}

int bench_threads_active(const bench_threads *a, const bench_threads *b, uint64_t min_ns)
{
	int self = (int)syscall(SYS_gettid), n = 0;
	for (int j = 0; j < b->n; j++) {
		if (b->tid[j] == self)
			continue;
		uint64_t before = 0;
		for (int i = 0; i < a->n; i++)
			if (a->tid[i] == b->tid[j])
				before = a->run_ns[i];
		if (b->run_ns[j] - before >= min_ns)
			n++;
	}
	return n;
}
