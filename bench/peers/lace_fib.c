/*
 * lace_fib.c — the Lace peer of bench/jobs: fork-join fib(n) written with Lace's public macros
 * (TASK_1, SPAWN, CALL, SYNC), the same recursion shape as ours (spawn n-1, run n-2 here, sync).
 * Built by bench/peers/lace.sh against a Lace source tree that lives outside this repository;
 * nothing of Lace is committed here.
 *
 *   ovstage_peer_lace_fib -w WORKERS -n N [-r REPS]
 *
 * Prints one line per repetition: "<nanoseconds> <fib(N)>". The time is taken inside the root task
 * (like ours, which times inside its job), so it excludes the hand-off from the main thread. Lace
 * is started once per process; its idle workers busy-wait, which is why bench/jobs runs this
 * program as a child process per repetition instead of linking it into its own process.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "lace.h"

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

TASK_1(long, pfib, int, n)
{
	if (n < 2)
		return n;
	SPAWN(pfib, n - 1);
	long k = CALL(pfib, n - 2);
	long m = SYNC(pfib);
	return m + k;
}

/* The root: times fib(n) on a worker. Lace's tasks take at most a few words, so the result and the
 * time travel through a pointer to a caller-owned record. */
struct timed {
	int n;
	long r;
	uint64_t ns;
};

VOID_TASK_1(timed_fib, struct timed *, t)
{
	uint64_t t0 = now_ns();
	t->r = CALL(pfib, t->n);
	t->ns = now_ns() - t0;
}

int main(int argc, char **argv)
{
	int workers = 1, n = 30, reps = 1, c;
	while ((c = getopt(argc, argv, "w:n:r:")) != -1) {
		switch (c) {
		case 'w': workers = atoi(optarg); break;
		case 'n': n = atoi(optarg); break;
		case 'r': reps = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s -w WORKERS -n N [-r REPS]\n", argv[0]);
			return 2;
		}
	}
	if (workers < 1 || n < 0 || n > 60 || reps < 1) {
		fprintf(stderr, "%s: bad arguments\n", argv[0]);
		return 2;
	}
	/* a deque of 100000 tasks, Lace's default: fib's depth is n */
	lace_start((unsigned)workers, 0);
	for (int i = 0; i < reps; i++) {
		struct timed t = {n, -1, 0};
		RUN(timed_fib, &t);
		printf("%llu %ld\n", (unsigned long long)t.ns, t.r);
		fflush(stdout);
	}
	lace_stop();
	return 0;
}
