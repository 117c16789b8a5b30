/*
 * peer_omp.c — OpenMP tasks peer: fib with `#pragma omp task` and no cutoff, the same recursion
 * shape as ours (task for n-1, n-2 in place, taskwait). Only this file is compiled with -fopenmp.
 */
#include <omp.h>

#include "bench.h"

static long fib_omp(int n)
{
	if (n < 2)
		return n;
	long x, y;
#pragma omp task shared(x) firstprivate(n)
	x = fib_omp(n - 1);
	y = fib_omp(n - 2);
#pragma omp taskwait
	return x + y;
}

bool omp_available(void)
{
	return true;
}

int omp_spec_version(void)
{
	return _OPENMP;
}

uint64_t omp_fib_ns(int threads, int n, long *result)
{
	uint64_t t0 = 0, t1 = 0;
	long r = -1;
#pragma omp parallel num_threads(threads) shared(r, t0, t1)
	{
#pragma omp single
		{
			t0 = bench_now_ns();
			r = fib_omp(n);
			t1 = bench_now_ns();
		}
	}
	*result = r;
	return t1 - t0;
}

double omp_idle_pct(int threads, int n, uint64_t settle_ns, uint64_t measure_ns)
{
	long r;
	(void)omp_fib_ns(threads, n, &r);
	return bench_idle_cpu_pct(settle_ns, measure_ns);
}
