/*
 * ceiling.c — the machine's all-core throughput on serial fib: W threads each run the serial fib at
 * once, with nothing shared between them (no tasks, no stealing, no cache line in common). How much
 * longer that takes than one serial run alone is what the cores lose when all of them are busy
 * (shared execution units of SMT siblings, a lower all-core clock, a shared cache). It is not a
 * ceiling for a fork-join speedup — on the H200 host W = 16 runs gave 10.98 cores' worth and our
 * 16-worker fib a 12.58x speedup, the recursion of one run suffering more from a busy neighbour
 * than the scheduler's split work — but t_all / W is the time a scheduler with no overhead would
 * take on cores that busy, which the bench sets our W-worker time against.
 */
#include <pthread.h>

#include "bench.h"

typedef struct ceiling_run {
	pthread_mutex_t lock;  /* guards go */
	pthread_cond_t gate;   /* broadcast when go is set */
	int go;                /* 1: run; -1: a runner could not be started, return at once */
	int n;                 /* fib(n) */
	long result[BENCH_MAX_THREADS];
	uint64_t end_ns[BENCH_MAX_THREADS];
} ceiling_run;

typedef struct ceiling_arg {
	ceiling_run *run;
	int i; /* this runner's slot */
} ceiling_arg;

static void *runner(void *p)
{
	ceiling_arg *a = p;
	ceiling_run *r = a->run;
	pthread_mutex_lock(&r->lock);
	while (!r->go)
		pthread_cond_wait(&r->gate, &r->lock);
	int go = r->go;
	pthread_mutex_unlock(&r->lock);
	r->result[a->i] = go > 0 ? bench_fib_serial(r->n) : -1;
	r->end_ns[a->i] = bench_now_ns();
	return NULL;
}

static void open_gate(ceiling_run *r, int go)
{
	pthread_mutex_lock(&r->lock);
	r->go = go;
	pthread_cond_broadcast(&r->gate);
	pthread_mutex_unlock(&r->lock);
}

uint64_t bench_fib_serial_many_ns(int threads, int n, long *result)
{
	static ceiling_run r = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, { 0 }, { 0 } };
	static ceiling_arg args[BENCH_MAX_THREADS];
	pthread_t th[BENCH_MAX_THREADS];
	if (threads < 1 || threads > BENCH_MAX_THREADS)
		return 0;
	r.go = 0;
	r.n = n;
	int started = 0;
	for (; started < threads; started++) {
		args[started] = (ceiling_arg){ &r, started };
		if (pthread_create(&th[started], NULL, runner, &args[started]))
			break;
	}
	/* The runners are parked on the gate: opening it starts them together (the wake-up of 16
	 * threads takes microseconds against a run of hundreds of milliseconds). */
	open_gate(&r, started == threads ? 1 : -1);
	uint64_t t0 = bench_now_ns(), last = t0;
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	if (started < threads)
		return 0; /* could not run them all at once: no figure */
	*result = r.result[0];
	for (int i = 0; i < threads; i++) {
		if (r.result[i] != r.result[0])
			*result = -1; /* flagged as a wrong result by the caller */
		if (r.end_ns[i] > last)
			last = r.end_ns[i];
	}
	return last - t0;
}
