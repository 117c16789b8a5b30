/*
 * serial.c — the serial baseline: plain recursive fib, in its own translation unit and noinline so
 * that the compiler cannot fold it into the timing code. Same flags as our fork-join frames (-O2).
 */
#include "bench.h"

__attribute__((noinline)) long bench_fib_serial(int n)
{
	if (n < 2)
		return n;
	return bench_fib_serial(n - 1) + bench_fib_serial(n - 2);
}

static __attribute__((noinline)) void count(int n, uint64_t *spawns)
{
	if (n < 2)
		return;
	++*spawns; /* the fork-join version spawns fib(n-1) here and runs fib(n-2) itself */
	count(n - 1, spawns);
	count(n - 2, spawns);
}

uint64_t bench_fib_count_spawns(int n)
{
	uint64_t s = 0;
	count(n, &s);
	return s;
}
