/*
 * sampler.c — a sampling CPU profiler for machines without perf (the device machine has none).
 *
 * Build: cc -O2 -shared -fPIC bench/tools/sampler.c -o libsampler.so
 * Use:   SAMPLER_OUT=prof.txt LD_PRELOAD=./libsampler.so PROGRAM ...
 *        python3 bench/tools/sampler_report.py prof.txt [TOP] [--focus FN]  (addr2line symbolises; top self and
 *                                                            inclusive functions)
 * Every millisecond of CPU time the process uses (ITIMER_PROF) the thread that is running takes a
 * backtrace into a preallocated table (async-signal-safe apart from backtrace(), whose one-time
 * initialisation runs in the constructor). At exit the table and /proc/self/maps go to SAMPLER_OUT.
 */
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define SAMPLER_MAX 400000 /* samples kept (400 s of CPU time at 1 kHz) */
#define SAMPLER_DEPTH 24   /* frames per sample */

static void *g_frames[SAMPLER_MAX][SAMPLER_DEPTH]; /* the samples' return addresses */
static unsigned char g_depth[SAMPLER_MAX];          /* frames recorded per sample */
static _Atomic size_t g_n;                          /* samples taken (may exceed SAMPLER_MAX) */

static void on_prof(int sig)
{
	(void)sig;
	/* relaxed: a unique index is all a sample needs; the table is read after the timer stops. */
	size_t i = atomic_fetch_add_explicit(&g_n, 1, memory_order_relaxed);
	if (i < SAMPLER_MAX)
		g_depth[i] = (unsigned char)backtrace(g_frames[i], SAMPLER_DEPTH);
}

static void sampler_write(void)
{
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_PROF, &off, NULL);
	const char *path = getenv("SAMPLER_OUT");
	FILE *f = path ? fopen(path, "w") : NULL;
	if (!f)
		return;
	size_t n = atomic_load_explicit(&g_n, memory_order_relaxed);
	n = n < SAMPLER_MAX ? n : SAMPLER_MAX;
	FILE *m = fopen("/proc/self/maps", "r");
	char line[4096];
	while (m && fgets(line, sizeof line, m))
		fprintf(f, "map %s", line);
	if (m)
		fclose(m);
	for (size_t i = 0; i < n; i++) {
		fputs("s", f);
		for (int d = 0; d < g_depth[i]; d++)
			fprintf(f, " %p", g_frames[i][d]);
		fputc('\n', f);
	}
	fclose(f);
}

__attribute__((constructor)) static void sampler_start(void)
{
	if (!getenv("SAMPLER_OUT"))
		return;
	void *warm[2];
	backtrace(warm, 2); /* loads the unwinder outside the signal handler */
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_prof;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGPROF, &sa, NULL);
	struct itimerval every = { { 0, 1000 }, { 0, 1000 } };
	setitimer(ITIMER_PROF, &every, NULL);
	atexit(sampler_write);
}
