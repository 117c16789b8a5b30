/*
 * jobs_test_fib.h — the recursive-fibonacci fork-join workload the jobs suites share (deque
 * stealing, topology placement, shutdown while frames are live), plus the serial answer to check
 * it against. fib(n) spawns about fib(n+1) frames, so a wrong result means a frame was lost, run
 * twice, or joined against the wrong child.
 */
#ifndef OVSTAGE_TEST_JOBS_FIB_H
#define OVSTAGE_TEST_JOBS_FIB_H

#include "jobs.h"
#include "jobs_forkjoin.h"

struct fib {
	int n;  /* argument */
	long r; /* result; -1 until computed */
};
JOBS_PAYLOAD_FITS(struct fib);

static void fib_frame(jobs_worker *w, void *p)
{
	struct fib *a = p;
	if (a->n < 2) {
		a->r = a->n;
		return;
	}
	struct fib *child = jobs_spawn_args(w);
	*child = (struct fib){a->n - 1, -1}; /* whole struct: the slot holds a previous frame's bytes */
	jobs_spawn(w, fib_frame);
	struct fib mine = {a->n - 2, -1};
	fib_frame(w, &mine);
	struct fib done;
	jobs_sync(w, &done, sizeof done);
	a->r = done.r + mine.r;
}

/* Root job: runs the frame tree on whichever worker picked the job up. */
static inline void fib_job(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)run;
	fib_frame(w, arg);
}

static inline long fib_serial(int n)
{
	long a = 0, b = 1;
	for (int i = 0; i < n; i++) {
		long t = a + b;
		a = b;
		b = t;
	}
	return a;
}

#endif /* OVSTAGE_TEST_JOBS_FIB_H */
