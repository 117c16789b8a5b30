/*
 * main.c — ovstage_bench_jobs: the job system against oneTBB, OpenMP tasks, serial C and a pthread
 * condvar handoff, measured in the same run and printed as one table.
 *
 *   ovstage_bench_jobs [--quick] [--fib N] [--reps R] [--workers W] [--lace PATH] [--markdown | --plain]
 *                      [--json PATH] [--only SECTIONS] [--trickle-reps T] [--rt-iters I]
 *
 * --only trickle,roundtrip runs just the trickle rows and the round trips (a few seconds): the
 * figures of the idle-worker issue (docs/performance.md, "Job system").
 *
 * The Lace peer is a separate program built outside the repository by bench/peers/lace.sh; give
 * its path with --lace or $OVSTAGE_PEER_LACE (without it the Lace rows print n/a).
 *
 * Every figure is the best (minimum time) of R repetitions, repetitions interleaved across the
 * sides so that a burst of noise on the shared machine hits all of them alike. Latencies are
 * percentiles over all iterations. Benchmarks never assert: the exit status is always 0, a peer
 * that is not available prints n/a, a wrong result is flagged in the table.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "report.h"

#define MS(ns) ((double)(ns) / 1e6)

/* ---------------------------------------------------------------------------------------------
 * Options
 */

#define MAX_TRICKLE_REPS 64

typedef struct opts {
	bool quick;
	int fib_n;
	int reps;
	int workers; /* < 0: one per core (hwloc, through jobs) */
	bool markdown;
	const char *lace;   /* the Lace peer's driver, or NULL */
	bool slow_peers;    /* oneTBB and OpenMP (tens of seconds per fib(40) at 1 thread) */
	long rt_iters;      /* round-trip iterations */
	long spawn_k;       /* frames per batch */
	long spawn_batches; /* batches */
	const char *json;   /* --json PATH, or NULL */
	unsigned only;      /* sections to run (SEC_* bits) */
	int trickle_reps;   /* runs of each trickle, interleaved; the rows show the median */
} opts;

/* Sections (--only). */
enum { SEC_IDLE = 1, SEC_TRICKLE = 2, SEC_FIB = 4, SEC_SPAWN = 8, SEC_RT = 16, SEC_ALL = 31 };

static bool parse_only(const char *v, unsigned *out)
{
	static const struct {
		const char *name;
		unsigned bit;
	} sec[] = {{"idle", SEC_IDLE}, {"trickle", SEC_TRICKLE}, {"fib", SEC_FIB}, {"spawn", SEC_SPAWN},
		   {"roundtrip", SEC_RT}};
	unsigned m = 0;
	const char *p = v;
	while (*p) {
		size_t n = strcspn(p, ",");
		bool found = false;
		for (size_t i = 0; i < sizeof sec / sizeof sec[0]; i++)
			if (strlen(sec[i].name) == n && !strncmp(p, sec[i].name, n)) {
				m |= sec[i].bit;
				found = true;
			}
		if (!found)
			return false;
		p += n;
		if (*p == ',')
			p++;
	}
	*out = m;
	return m != 0;
}

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [--quick] [--fib N] [--reps R] [--workers W] [--lace PATH] [--markdown | --plain] [--json PATH]\n"
		"  --quick      fib 32, 2 repetitions, 20k round trips (unless given explicitly)\n"
		"  --fib N      fork-join fib(N) (default 40)\n"
		"  --reps R     repetitions per figure, best kept (default 3)\n"
		"  --workers W  workers for the 'all workers' figures (default: one per core)\n"
		"  --no-slow-peers  skip oneTBB and OpenMP (their rows print n/a)\n"
		"  --lace PATH  the Lace peer (bench/peers/lace.sh builds it; default $OVSTAGE_PEER_LACE)\n"
		"  --markdown   markdown table (default); --plain: aligned columns without pipes\n"
		"  --json PATH  also write every row, the machine and the date as JSON (bench/tools/plot.py)\n"
		"  --only LIST  run only these sections, comma-separated: idle, trickle, fib, spawn, roundtrip\n"
		"               (e.g. --only trickle,roundtrip: the idle-worker rows in a few seconds)\n"
		"  --trickle-reps T  run each trickle T times, interleaved with the condvar peer (default 1;\n"
		"               the rows show the median, stderr every run)\n"
		"  --rt-iters I round trips per side (default 100000, 20000 with --quick)\n",
		argv0);
}

static bool parse_int(const char *s, int lo, int hi, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || v < lo || v > hi)
		return false;
	*out = (int)v;
	return true;
}

static void parse(int argc, char **argv, opts *o)
{
	int fib = -1, reps = -1, rt = -1;
	o->quick = false;
	o->only = SEC_ALL;
	o->trickle_reps = 1;
	o->workers = -1;
	o->markdown = true;
	o->lace = getenv("OVSTAGE_PEER_LACE");
	o->slow_peers = true;
	o->json = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--quick")) {
			o->quick = true;
		} else if (!strcmp(a, "--markdown")) {
			o->markdown = true;
		} else if (!strcmp(a, "--plain")) {
			o->markdown = false;
		} else if (!strcmp(a, "--fib") && v && parse_int(v, 2, 60, &fib)) {
			i++;
		} else if (!strcmp(a, "--reps") && v && parse_int(v, 1, 1000, &reps)) {
			i++;
		} else if (!strcmp(a, "--workers") && v && parse_int(v, 1, 4096, &o->workers)) {
			i++;
		} else if (!strcmp(a, "--json") && v) {
			o->json = v;
			i++;
		} else if (!strcmp(a, "--only") && v && parse_only(v, &o->only)) {
			i++;
		} else if (!strcmp(a, "--trickle-reps") && v && parse_int(v, 1, MAX_TRICKLE_REPS, &o->trickle_reps)) {
			i++;
		} else if (!strcmp(a, "--rt-iters") && v && parse_int(v, 1, 10000000, &rt)) {
			i++;
		} else if (!strcmp(a, "--no-slow-peers")) {
			o->slow_peers = false;
		} else if (!strcmp(a, "--lace") && v) {
			o->lace = v;
			i++;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(argv[0]);
			exit(0);
		} else {
			fprintf(stderr, "ovstage_bench_jobs: ignoring unknown or malformed option '%s'\n", a);
			usage(argv[0]);
		}
	}
	o->fib_n = fib > 0 ? fib : (o->quick ? 32 : 40);
	o->reps = reps > 0 ? reps : (o->quick ? 2 : 3);
	o->rt_iters = rt > 0 ? rt : (o->quick ? 20000 : 100000);
	o->spawn_k = 1000;
	o->spawn_batches = o->quick ? 2000 : 10000;
}

static const char *ms_or_na(uint64_t ns)
{
	return ns ? fmt("%.1f ms", MS(ns)) : "n/a";
}

/* ---------------------------------------------------------------------------------------------
 * Idle measurements run in a child process each, before this process has started any thread:
 * every figure then counts exactly one pool (CLOCK_PROCESS_CPUTIME_ID covers all threads).
 */

typedef struct idle_arg {
	int workers;
	int fib_n; /* work done before settling; 0 = none */
	int which; /* 0 ours, 1 OpenMP, 2 oneTBB, 3 ours under a trickle, 4 condvar thread under a trickle */
	double rate_hz; /* trickles only */
} idle_arg;

static const uint64_t SETTLE_NS = 200000000u, IDLE_NS = 1000000000u;

/* A child's figures: the CPU (% of one core) and, for our trickles, sleeps per job (-1 if none). */
typedef struct idle_res {
	double pct, sleeps_per_job, empty_per_job;
	int busy; /* our trickles: workers that ran at all during the second (-1 if none) */
} idle_res;

static double idle_child(const idle_arg *a, double *sleeps_per_job, double *empty_per_job, int *busy)
{
	switch (a->which) {
	case 0: {
		ours_pool *p = ours_create(a->workers);
		if (!p)
			return -1;
		if (a->fib_n > 0) {
			long r;
			(void)ours_fib_ns(p, a->fib_n, &r);
		}
		double pct = bench_idle_cpu_pct(SETTLE_NS, IDLE_NS);
		ours_destroy(p);
		return pct;
	}
	case 3: {
		ours_pool *p = ours_create(a->workers);
		if (!p)
			return -1;
		double pct = ours_trickle_pct(p, a->rate_hz, IDLE_NS, sleeps_per_job, empty_per_job, busy);
		ours_destroy(p);
		return pct;
	}
	case 4:
		return condvar_trickle_pct(a->rate_hz, IDLE_NS);
	case 1:
		return omp_available() ? omp_idle_pct(a->workers, a->fib_n, SETTLE_NS, IDLE_NS) : -1;
	default:
		return tbb_available() ? tbb_idle_pct(a->workers, a->fib_n, SETTLE_NS, IDLE_NS) : -1;
	}
}

static idle_res idle_in_child2(idle_arg a)
{
	idle_res none = {-1, -1, -1, -1};
	int fd[2];
	if (pipe(fd) != 0)
		return none;
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		close(fd[0]);
		close(fd[1]);
		return none;
	}
	if (pid == 0) {
		close(fd[0]);
		idle_res r = {-1, -1, -1, -1};
		r.pct = idle_child(&a, &r.sleeps_per_job, &r.empty_per_job, &r.busy);
		ssize_t wr = write(fd[1], &r, sizeof r);
		(void)wr;
		_exit(0);
	}
	close(fd[1]);
	idle_res r = none;
	if (read(fd[0], &r, sizeof r) != (ssize_t)sizeof r)
		r = none;
	close(fd[0]);
	waitpid(pid, NULL, 0);
	return r;
}

static double idle_in_child(idle_arg a)
{
	return idle_in_child2(a).pct;
}

/* ---------------------------------------------------------------------------------------------
 * Helpers for best-of-R
 */

static void keep_min(uint64_t *best, uint64_t v)
{
	if (v && (!*best || v < *best))
		*best = v;
}

static void progress(const char *what, int rep, int reps, uint64_t ns)
{
	fprintf(stderr, "  %-40s rep %d/%d: %10.2f ms\n", what, rep + 1, reps, MS(ns));
}

static const char *pct_or_na(double v)
{
	return v < 0 ? "n/a" : fmt("%.2f %%", v);
}

/* ---------------------------------------------------------------------------------------------
 * One run: the settings, the pools, and every figure measured. The measurements (bench_*) fill it
 * in the order they run; the rows (rows_*) turn it into the table, in the table's order.
 */

/* The fib sides, in the order their repetitions interleave. */
enum { F_SERIAL, F_T1, F_L1, F_TW, F_LW, F_O1, F_OW, F_TBB1, F_TBBW, F_OMP1, F_OMPW, F_SW, F_COUNT };

static const double trickle_hz[] = {100, 1000, 10000};
enum { N_TRICKLE = 3 };

typedef struct run {
	opts o;
	int W, N, R;     /* all workers, fib(N), repetitions */
	int hw_cores;    /* hwloc's core count through the job system, or -1 */
	uint64_t spawns; /* frames that fork-join fib(N) spawns */
	char fibname[32];
	ours_pool *p1, *pw; /* 1 worker, W workers (NULL once destroyed or if creation failed) */
	/* idle and trickles */
	int idle_fib;
	double idle_fresh, idle_ours, idle_omp, idle_tbb;
	double tr_ours[N_TRICKLE], tr_cv[N_TRICKLE]; /* medians over the trickle repetitions */
	double tr_ours_lo[N_TRICKLE], tr_ours_hi[N_TRICKLE], tr_cv_lo[N_TRICKLE], tr_cv_hi[N_TRICKLE];
	double tr_sleeps[N_TRICKLE]; /* our workers' sleeps per job sent (median) */
	double tr_busy[N_TRICKLE];   /* our workers that ran at all during the second (median) */
	/* fib */
	uint64_t fbest[F_COUNT];
	int freps[F_COUNT];
	bool fwrong[F_COUNT];
	uint64_t steals, sleeps;
	/* spawn throughput */
	uint64_t sp_o1, sp_ow, sp_t1, sp_tw;
	bool sp_wrong;
	/* round trips */
	double rt_o50, rt_o99, rt_t50, rt_t99, rt_c50, rt_c99;
} run;

static const char *const wrong = " (WRONG RESULT)";

static void print_header(const run *b)
{
	char model[256];
	cpu_model(model, sizeof model);
	char date[64];
	time_t now = time(NULL);
	strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S %Z", localtime(&now));
	/* The spawn count formula, checked by counting the recursion (up to n = 30: 1.3M calls). */
	int verified_to = b->N < 30 ? b->N : 30;
	bool formula_ok = true;
	for (int n = 0; n <= verified_to; n++)
		if (bench_fib_count_spawns(n) != bench_fib_spawns(n))
			formula_ok = false;

	printf("# ovstage_bench_jobs — job system vs oneTBB / OpenMP / serial / pthread condvar\n\n");
	printf("- date: %s\n", date);
	printf("- cpu: %s; online cpus (sysconf): %ld; cores (hwloc, via jobs): %d\n", model,
	       sysconf(_SC_NPROCESSORS_ONLN), b->hw_cores);
	printf("- compiler: gcc %s; benchmark TUs -O2; peers: %s, OpenMP %d (libgomp), %s\n", __VERSION__,
	       tbb_available() ? tbb_version() : "oneTBB n/a", omp_spec_version(),
	       lace_available() ? fmt("%s (bench/peers/lace.sh: its own Release build, driver -O2, child process)", lace_version())
				: "Lace n/a (build it with bench/peers/lace.sh, pass --lace)");
	printf("- settings: fib(%d), best of %d repetitions, all workers = %d, round trips = %ld, "
	       "spawn batches = %ld x %ld%s\n",
	       b->N, b->R, b->W, b->o.rt_iters, b->o.spawn_batches, b->o.spawn_k, b->o.quick ? " (--quick)" : "");
	printf("- serial fib: plain recursion, noinline, same flags as our frames; gcc -O2 keeps one of the two "
	       "recursive calls and turns the other into a loop (tail-recursion accumulator)\n");
	printf("- fib(%d) spawns fib(%d)-1 = %llu frames; formula %s by counting for n = 0..%d\n\n", b->N,
	       b->N + 1, (unsigned long long)b->spawns, formula_ok ? "verified" : "CONTRADICTED", verified_to);
	fflush(stdout);
}

/* 1. Idle CPU: in children, before any thread of ours exists. */
static void bench_idle(run *b)
{
	int W = b->W;
	b->idle_fib = b->N < 30 ? b->N : 30;
	b->idle_fresh = b->idle_ours = b->idle_omp = b->idle_tbb = -1;
	if (!(b->o.only & SEC_IDLE))
		return;
	fprintf(stderr, "idle: 4 x 1.2 s ...\n");
	b->idle_fresh = idle_in_child((idle_arg){W, 0, 0, 0});
	b->idle_ours = idle_in_child((idle_arg){W, b->idle_fib, 0, 0});
	b->idle_omp = b->o.slow_peers ? idle_in_child((idle_arg){W, b->idle_fib, 1, 0}) : -1;
	b->idle_tbb = b->o.slow_peers ? idle_in_child((idle_arg){W, b->idle_fib, 2, 0}) : -1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Sorts v[0..n) and returns the median (-1 if any run failed). */
static double median_of(double *v, int n, double *lo, double *hi)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	*lo = v[0];
	*hi = v[n - 1];
	if (v[0] < 0)
		return -1;
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* 1b. A trickle of trivial jobs (between two jobs the pool is idle: how much does it burn?), in
 * children too, T times, the rates and the two sides interleaved. */
static void bench_trickle(run *b)
{
	int W = b->W, T = b->o.trickle_reps;
	for (int i = 0; i < N_TRICKLE; i++)
		b->tr_ours[i] = b->tr_cv[i] = b->tr_sleeps[i] = -1;
	if (!(b->o.only & SEC_TRICKLE))
		return;
	double ours[N_TRICKLE][MAX_TRICKLE_REPS], cv[N_TRICKLE][MAX_TRICKLE_REPS], sl[N_TRICKLE][MAX_TRICKLE_REPS],
		busy[N_TRICKLE][MAX_TRICKLE_REPS];
	fprintf(stderr, "trickles: %d x %d x 2 x 1.1 s ...\n", T, N_TRICKLE);
	for (int r = 0; r < T; r++)
		for (int i = 0; i < N_TRICKLE; i++) {
			idle_res o = idle_in_child2((idle_arg){W, 0, 3, trickle_hz[i]});
			ours[i][r] = o.pct;
			sl[i][r] = o.sleeps_per_job;
			busy[i][r] = o.busy;
			cv[i][r] = idle_in_child((idle_arg){W, 0, 4, trickle_hz[i]});
			fprintf(stderr, "  %.0f jobs/s: ours %.2f %% (%.2f sleeps/job, %.2f empty wake-ups/job, %d workers ran), condvar %.2f %%\n",
				trickle_hz[i], ours[i][r], sl[i][r], o.empty_per_job, o.busy, cv[i][r]);
		}
	for (int i = 0; i < N_TRICKLE; i++) {
		double lo, hi;
		b->tr_ours[i] = median_of(ours[i], T, &b->tr_ours_lo[i], &b->tr_ours_hi[i]);
		b->tr_cv[i] = median_of(cv[i], T, &b->tr_cv_lo[i], &b->tr_cv_hi[i]);
		b->tr_sleeps[i] = median_of(sl[i], T, &lo, &hi);
		b->tr_busy[i] = median_of(busy[i], T, &lo, &hi);
	}
}

/* One repetition of fib side f; 0 if it failed. */
static uint64_t fib_once(run *b, int f, long *r)
{
	int N = b->N, W = b->W;
	switch (f) {
	case F_SERIAL: {
		uint64_t t0 = bench_now_ns();
		*r = bench_fib_serial(N);
		return bench_now_ns() - t0;
	}
	case F_T1: return ours_fib_typed_ns(b->p1, N, r);
	case F_TW: return ours_fib_typed_ns(b->pw, N, r);
	case F_L1: return lace_fib_ns(1, N, r);
	case F_LW: return lace_fib_ns(W, N, r);
	case F_O1: return ours_fib_ns(b->p1, N, r);
	case F_OW: return ours_fib_ns(b->pw, N, r);
	case F_TBB1: return tbb_fib_ns(1, N, r);
	case F_TBBW: return tbb_fib_ns(W, N, r);
	case F_OMP1: return omp_fib_ns(1, N, r);
	case F_SW: return bench_fib_serial_many_ns(W, N, r);
	default: return omp_fib_ns(W, N, r);
	}
}

/* 2. fib, repetitions interleaved across the sides. A figure whose repetitions already took
 * REP_BUDGET is not repeated further (the peers without cutoff take tens of seconds at fib(40));
 * the table then says how many repetitions it is the best of. */
static void bench_fib(run *b)
{
	int N = b->N, R = b->R, W = b->W;
	long expect = (long)bench_fib_iter(N);
	const uint64_t REP_BUDGET = 10000000000ull;
	const char *fname[F_COUNT] = {"serial",
				      "ours typed, 1 worker",
				      "Lace, 1 worker",
				      fmt("ours typed, %d workers", W),
				      fmt("Lace, %d workers", W),
				      "ours generic, 1 worker",
				      fmt("ours generic, %d workers", W),
				      "oneTBB task_group, 1 thread",
				      fmt("oneTBB task_group, %d threads", W),
				      "OpenMP tasks, 1 thread",
				      fmt("OpenMP tasks, %d threads", W),
				      fmt("serial C, %d independent runs at once", W)};
	uint64_t fspent[F_COUNT] = {0};
	bool slow = b->o.slow_peers;
	bool favail[F_COUNT] = {true, b->p1 != NULL, lace_available(), b->pw != NULL, lace_available(),
				b->p1 != NULL, b->pw != NULL, slow && tbb_available(), slow && tbb_available(),
				slow && omp_available(), slow && omp_available(), W > 1};
	fprintf(stderr, "fib(%d):\n", N);
	for (int rep = 0; rep < R; rep++) {
		for (int f = 0; f < F_COUNT; f++) {
			if (!favail[f] || (rep > 0 && fspent[f] >= REP_BUDGET))
				continue;
			long r = -1;
			uint64_t t = fib_once(b, f, &r);
			if (!t) {
				favail[f] = false; /* failed: n/a */
				b->fbest[f] = 0;
				continue;
			}
			if (r != expect) {
				b->fwrong[f] = true;
				fprintf(stderr, "  %s: fib(%d) = %ld, expected %ld (WRONG RESULT)\n", fname[f], N, r,
					expect);
			}
			keep_min(&b->fbest[f], t);
			fspent[f] += t;
			b->freps[f]++;
			progress(fname[f], rep, R, t);
		}
	}
	if (b->pw)
		ours_stats(b->pw, &b->steals, &b->sleeps);
}

/* 3. Spawn throughput: flat batches of K frames spawned then joined by one worker. */
static void bench_spawn(run *b)
{
	int R = b->R, W = b->W;
	long K = b->o.spawn_k, B = b->o.spawn_batches;
	long sp_expect = B * K * K; /* sum over a batch of 2i+1 = K^2 */
	fprintf(stderr, "spawn throughput (%ld x %ld):\n", B, K);
	for (int rep = 0; rep < R; rep++) {
		long chk;
		uint64_t t;
		if (b->p1) {
			chk = 0;
			t = ours_spawn_batches_ns(b->p1, K, B, &chk);
			b->sp_wrong |= chk != sp_expect;
			keep_min(&b->sp_o1, t);
			progress("ours, 1 worker", rep, R, t);
		}
		if (b->pw) {
			chk = 0;
			t = ours_spawn_batches_ns(b->pw, K, B, &chk);
			b->sp_wrong |= chk != sp_expect;
			keep_min(&b->sp_ow, t);
			progress(fmt("ours, %d workers", W), rep, R, t);
		}
		if (b->o.slow_peers && tbb_available()) {
			chk = 0;
			t = tbb_spawn_batches_ns(1, K, B, &chk);
			b->sp_wrong |= t && chk != sp_expect;
			keep_min(&b->sp_t1, t);
			progress("oneTBB task_group, 1 thread", rep, R, t);
			chk = 0;
			t = tbb_spawn_batches_ns(W, K, B, &chk);
			b->sp_wrong |= t && chk != sp_expect;
			keep_min(&b->sp_tw, t);
			progress(fmt("oneTBB task_group, %d threads", W), rep, R, t);
		}
	}
}

/* One side's round trips: a warm-up, then I samples; p50/p99 stay -1 if it failed. */
static void roundtrip_side(bool (*rt)(void *ctx, long iters, uint64_t *lat), void *ctx, long I, uint64_t *lat,
			   const char *who, double *p50, double *p99)
{
	(void)rt(ctx, I < 1000 ? I : 1000, lat);
	if (rt(ctx, I, lat)) {
		*p50 = bench_percentile_us(lat, (size_t)I, 50);
		*p99 = bench_percentile_us(lat, (size_t)I, 99);
	}
	fprintf(stderr, "  %s: p50 %.2f us p99 %.2f us\n", who, *p50, *p99);
}

static bool rt_ours(void *ctx, long iters, uint64_t *lat)
{
	return ours_roundtrip(ctx, iters, lat);
}

static bool rt_tbb(void *ctx, long iters, uint64_t *lat)
{
	return tbb_roundtrip(*(int *)ctx, iters, lat);
}

static bool rt_condvar(void *ctx, long iters, uint64_t *lat)
{
	(void)ctx;
	return condvar_roundtrip(iters, lat);
}

/* 4. External round trip from this (non-worker) thread. */
static void bench_roundtrip(run *b)
{
	long I = b->o.rt_iters;
	uint64_t *lat = malloc((size_t)I * sizeof *lat);
	b->rt_o50 = b->rt_o99 = b->rt_t50 = b->rt_t99 = b->rt_c50 = b->rt_c99 = -1;
	fprintf(stderr, "round trips (%ld):\n", I);
	if (lat && b->pw)
		roundtrip_side(rt_ours, b->pw, I, lat, "ours", &b->rt_o50, &b->rt_o99);
	ours_destroy(b->pw);
	b->pw = NULL;
	if (lat && tbb_available())
		roundtrip_side(rt_tbb, &b->W, I, lat, "oneTBB", &b->rt_t50, &b->rt_t99);
	if (lat)
		roundtrip_side(rt_condvar, NULL, I, lat, "condvar", &b->rt_c50, &b->rt_c99);
	free(lat);
}

/* ---- the table, row by row ---- */

/* fib: typed tasks (the fast path) against serial */
static void row_fib_typed_serial(const run *b)
{
	uint64_t t1 = b->fbest[F_T1], ts = b->fbest[F_SERIAL];
	bool k = t1 && ts;
	double r = k ? (double)t1 / (double)ts : 0;
	table_row(fmt("%s typed tasks (jobs_task.h), 1 worker vs serial", b->fibname), ms_or_na(t1),
	    "serial C (recursive, noinline)", ms_or_na(ts), k ? fmt("%.2f× serial", r) : "n/a",
	    "≤ 2.0× serial", b->fwrong[F_T1] || b->fwrong[F_TW] ? "WRONG RESULT" : met(k, r <= 2.0));
}

/* fib: typed tasks against Lace, at 1 and at W workers */
static void rows_fib_lace(const run *b)
{
	uint64_t ot[2] = {b->fbest[F_T1], b->fbest[F_TW]}, lt[2] = {b->fbest[F_L1], b->fbest[F_LW]};
	int th[2] = {1, b->W};
	bool wrong_t = b->fwrong[F_T1] || b->fwrong[F_TW];
	for (int i = 0; i < 2; i++) {
		bool k = ot[i] && lt[i];
		double r = k ? (double)lt[i] / (double)ot[i] : 0;
		bool wl = b->fwrong[i ? F_LW : F_L1];
		table_row(fmt("%s, %d worker%s: ours (typed) vs Lace", b->fibname, th[i], th[i] > 1 ? "s" : ""),
		    ms_or_na(ot[i]),
		    fmt("%s, %d worker%s%s", lace_version(), th[i], th[i] > 1 ? "s" : "", wl ? wrong : ""),
		    ms_or_na(lt[i]), k ? fmt("Lace/ours = %.2f×", r) : "n/a", "≥ 1.0× (as fast as Lace)",
		    wrong_t ? "WRONG RESULT" : met(k, r >= 1.0));
	}
}

/* fib: W workers against 1 worker, for the side pair (one, all) */
static void row_fib_speedup(const run *b, const char *what, int one, int all)
{
	int W = b->W;
	uint64_t t1 = b->fbest[one], tw = b->fbest[all];
	bool k = t1 && tw;
	double sp = k ? (double)t1 / (double)tw : 0;
	double tgt = W == 2 ? 1.85 : 0.925 * W;
	table_row(fmt("%s %s, %d workers vs 1 worker (speedup)", b->fibname, what, W), ms_or_na(tw),
	    fmt("ours %s, 1 worker", what), ms_or_na(t1), k ? fmt("%.2f× faster", sp) : "n/a",
	    W == 2 ? "≥ 1.85× (2 cores)" : fmt("≥ %.2f× (1.85× per 2 cores)", tgt),
	    b->fwrong[one] || b->fwrong[all] ? "WRONG RESULT" : met(k, sp >= tgt));
}

/* fib: the machine's all-core throughput on this work (ceiling.c): W serial runs at once against one
 * alone, and our W-worker time against theirs divided by W. */
static void row_fib_ceiling(const run *b)
{
	int W = b->W;
	uint64_t ts = b->fbest[F_SERIAL], tall = b->fbest[F_SW], tw = b->fbest[F_TW];
	if (W < 2 || !ts || !tall)
		return;
	/* Not a ceiling on the speedup: W runs at once lose more to shared caches, SMT siblings and
	 * clocks than one fork-join run does (measured: 10.98 cores' worth of 16, our typed tasks
	 * 12.58x). What it gives is the time a scheduler with no overhead would take on cores that
	 * busy: t_all / W. */
	table_row(fmt("%s serial, %d independent runs at once vs one alone (all-core throughput)", b->fibname, W),
	    ms_or_na(tall), "serial C, one run alone", ms_or_na(ts),
	    fmt("%.2f cores' worth of %d", (double)W * (double)ts / (double)tall, W), "— (info)",
	    b->fwrong[F_SW] ? "WRONG RESULT" : "—");
	if (tw)
		table_row(fmt("%s typed, %d workers vs those runs' time / %d (no scheduling cost)", b->fibname, W, W),
		    ms_or_na(tw), "independent runs at once / W", fmt("%.1f ms", MS(tall) / W),
		    fmt("%.0f %% efficient", 100.0 * (double)tall / (double)W / (double)tw), "— (info)", "—");
}

/* fib: the generic frames (jobs_forkjoin.h) against serial */
static void row_fib_generic_serial(const run *b)
{
	uint64_t t1 = b->fbest[F_O1], ts = b->fbest[F_SERIAL];
	bool k = t1 && ts;
	double r = k ? (double)t1 / (double)ts : 0;
	table_row(fmt("%s generic frames (jobs_forkjoin.h), 1 worker vs serial", b->fibname), ms_or_na(t1),
	    "serial C (recursive, noinline)", ms_or_na(ts), k ? fmt("%.2f× serial", r) : "n/a",
	    "— (info: use typed tasks)", b->fwrong[F_O1] || b->fwrong[F_OW] ? "WRONG RESULT" : "—");
}

/* fib: typed tasks against oneTBB and OpenMP, at 1 and at W threads */
static void rows_fib_peers(const run *b)
{
	int W = b->W, R = b->R;
	uint64_t t_serial = b->fbest[F_SERIAL];
	struct {
		const char *name;
		int peer, ours, threads;
	} fr[4] = {
		{"oneTBB task_group", F_TBB1, F_T1, 1},
		{"oneTBB task_group", F_TBBW, F_TW, W},
		{"OpenMP tasks (no cutoff)", F_OMP1, F_T1, 1},
		{"OpenMP tasks (no cutoff)", F_OMPW, F_TW, W},
	};
	for (int i = 0; i < 4; i++) {
		uint64_t peer = b->fbest[fr[i].peer], ours = b->fbest[fr[i].ours];
		int reps = b->freps[fr[i].peer];
		bool k = peer && ours && t_serial;
		table_row(fmt("%s, %d thread%s: ours (typed) vs %s", b->fibname, fr[i].threads, fr[i].threads > 1 ? "s" : "",
			fr[i].name),
		    ms_or_na(ours),
		    fmt("%s, %d thread%s%s%s", fr[i].name, fr[i].threads, fr[i].threads > 1 ? "s" : "",
			reps && reps < R ? fmt(" (best of %d)", reps) : "", b->fwrong[fr[i].peer] ? wrong : ""),
		    ms_or_na(peer),
		    k ? fmt("peer = %.2f× serial, %.2f× ours", (double)peer / (double)t_serial, (double)peer / (double)ours)
		      : "n/a",
		    "— (info)", "—");
	}
}

/* Per-spawn overhead of fib side f on one thread against serial, in ns; -1 if unknown. */
static double spawn_overhead_ns(const run *b, int f)
{
	uint64_t t = b->fbest[f], ts = b->fbest[F_SERIAL];
	return t && ts ? ((double)t - (double)ts) / (double)b->spawns : -1;
}

/* per-spawn overhead: typed tasks against oneTBB and OpenMP */
static void rows_spawn_overhead(const run *b)
{
	double ov_o = spawn_overhead_ns(b, F_T1), ov_t = spawn_overhead_ns(b, F_TBB1), ov_m = spawn_overhead_ns(b, F_OMP1);
	const char *lab = fmt("per-spawn overhead, typed (T1 − Tserial)/%llu spawns", (unsigned long long)b->spawns);
	bool k = ov_o > -1 && ov_t > -1;
	double r = k && ov_o > 0 ? ov_t / ov_o : 0;
	table_row(lab, ov_o > -1 ? fmt("%.2f ns", ov_o) : "n/a", "oneTBB task_group, 1 thread",
	    ov_t > -1 ? fmt("%.2f ns", ov_t) : "n/a", !k ? "n/a" : ov_o > 0 ? fmt("TBB/ours = %.1f×", r) : "ours ≤ 0 (noise)",
	    "ours ≥ 10× lower than oneTBB", met(k, ov_o <= 0 || r >= 10.0));
	bool km = ov_o > -1 && ov_m > -1;
	table_row(lab, ov_o > -1 ? fmt("%.2f ns", ov_o) : "n/a", "OpenMP tasks, 1 thread",
	    ov_m > -1 ? fmt("%.2f ns", ov_m) : "n/a",
	    !km ? "n/a" : ov_o > 0 ? fmt("OpenMP/ours = %.1f×", ov_m / ov_o) : "ours ≤ 0 (noise)", "— (info)", "—");
}

/* spawn throughput, ours against oneTBB, at 1 and at W threads */
static void rows_spawn_throughput(const run *b)
{
	long K = b->o.spawn_k, B = b->o.spawn_batches;
	double tasks = (double)K * (double)B;
	uint64_t o_[2] = {b->sp_o1, b->sp_ow}, t_[2] = {b->sp_t1, b->sp_tw};
	int th[2] = {1, b->W};
	for (int i = 0; i < 2; i++) {
		bool k = o_[i] && t_[i];
		table_row(fmt("spawn+join throughput, flat %ld × %ld, %d %s%s", B, K, th[i], th[i] > 1 ? "workers" : "worker",
			b->sp_wrong ? " (WRONG RESULT)" : ""),
		    o_[i] ? fmt("%.1f M/s", tasks / MS(o_[i]) / 1e3) : "n/a",
		    fmt("oneTBB task_group run()+wait(), %d thread%s", th[i], th[i] > 1 ? "s" : ""),
		    t_[i] ? fmt("%.1f M/s", tasks / MS(t_[i]) / 1e3) : "n/a",
		    k ? fmt("ours %.2f× TBB", (double)t_[i] / (double)o_[i]) : "n/a", "— (info)", "—");
	}
}

/* One round-trip row: ours against a peer at one percentile. */
static void row_roundtrip(const run *b, const char *pct, double ours, const char *peer, double fig,
			  const char *peer_short, const char *target, const char *met_cell)
{
	bool k = ours >= 0 && fig >= 0;
	table_row(fmt("submit+wait+release round trip from main, %d workers, %s", b->W, pct),
	    ours >= 0 ? fmt("%.2f µs", ours) : "n/a", peer, fig >= 0 ? fmt("%.2f µs", fig) : "n/a",
	    k ? fmt("%s/ours = %.2f×", peer_short, fig / ours) : "n/a", target, met_cell);
}

/* round trips: ours against oneTBB and the condvar baseline, p50 and p99 */
static void rows_roundtrip(const run *b)
{
	if (!(b->o.only & SEC_RT))
		return;
	const char *tbb = "oneTBB task_arena::enqueue + spin/yield on a flag";
	const char *cv = "pthread mutex+condvar handoff to 1 thread";
	row_roundtrip(b, "p50", b->rt_o50, tbb, b->rt_t50, "TBB", "ours p50 ≤ 2 µs", met(b->rt_o50 >= 0, b->rt_o50 <= 2.0));
	row_roundtrip(b, "p99", b->rt_o99, tbb, b->rt_t99, "TBB", "— (info)", "—");
	row_roundtrip(b, "p50", b->rt_o50, cv, b->rt_c50, "condvar", "— (baseline)", "—");
	row_roundtrip(b, "p99", b->rt_o99, cv, b->rt_c99, "condvar", "— (baseline)", "—");
}

/* idle pools: ours against OpenMP's and oneTBB's */
static void rows_idle(const run *b)
{
	if (!(b->o.only & SEC_IDLE))
		return;
	int W = b->W;
	table_row(fmt("idle CPU, %d workers, fresh pool (200 ms settle, 1 s)", W), pct_or_na(b->idle_fresh),
	    fmt("OpenMP (libgomp) pool after fib(%d), %d threads", b->idle_fib, W), pct_or_na(b->idle_omp),
	    "% of one core", "ours ≤ 1 %", met(b->idle_fresh >= 0, b->idle_fresh <= 1.0));
	table_row(fmt("idle CPU, %d workers, after fib(%d) (200 ms settle, 1 s)", W, b->idle_fib),
	    pct_or_na(b->idle_ours), fmt("oneTBB pool after fib(%d), %d threads", b->idle_fib, W),
	    pct_or_na(b->idle_tbb), "% of one core", "ours ≤ 1 %", met(b->idle_ours >= 0, b->idle_ours <= 1.0));
}

/* trickles: ours against one condvar thread fed at the same rate */
static void rows_trickle(const run *b)
{
	if (!(b->o.only & SEC_TRICKLE))
		return;
	int T = b->o.trickle_reps;
	for (int i = 0; i < N_TRICKLE; i++) {
		double ours = b->tr_ours[i], cv = b->tr_cv[i];
		bool k = ours >= 0 && cv > 0;
		const char *oc = T > 1 && ours >= 0 ? fmt("%.2f %% [%.2f–%.2f]", ours, b->tr_ours_lo[i], b->tr_ours_hi[i])
						    : pct_or_na(ours);
		const char *cc = T > 1 && cv >= 0 ? fmt("%.2f %% [%.2f–%.2f]", cv, b->tr_cv_lo[i], b->tr_cv_hi[i])
						  : pct_or_na(cv);
		table_row(fmt("CPU under a trickle of %.0f trivial jobs/s, %d workers (1 s%s)", trickle_hz[i], b->W,
			T > 1 ? fmt(", median of %d", T) : ""),
		    oc, "pthread mutex+condvar handoff to 1 thread, same trickle", cc,
		    k ? fmt("ours/condvar = %.2f×; %.2f sleeps/job, %.0f workers ran", ours / cv, b->tr_sleeps[i], b->tr_busy[i])
		      : "n/a",
		    "ours ≤ 2× condvar", met(k, ours <= 2.0 * cv));
	}
}

int main(int argc, char **argv)
{
	table_set_peer_header("Peer / baseline (same run)");
	static run b; /* zero: no figure yet */
	parse(argc, argv, &b.o);
	lace_set_driver(b.o.lace);
	if (b.o.lace && !lace_available())
		fprintf(stderr, "ovstage_bench_jobs: --lace %s is not an executable; Lace rows print n/a\n", b.o.lace);
	setvbuf(stdout, NULL, _IOLBF, 0);

	/* Machine: hwloc's core count through the job system (a default pool has one worker per core). */
	b.hw_cores = -1;
	ours_pool *probe = ours_create(-1);
	if (probe) {
		b.hw_cores = ours_workers(probe);
		ours_destroy(probe);
	}
	b.W = b.o.workers > 0 ? b.o.workers : (b.hw_cores > 0 ? b.hw_cores : (int)sysconf(_SC_NPROCESSORS_ONLN));
	if (b.W < 1)
		b.W = 1;
	b.N = b.o.fib_n;
	b.R = b.o.reps;
	b.spawns = bench_fib_spawns(b.N);
	snprintf(b.fibname, sizeof b.fibname, "fib(%d)", b.N);
	print_header(&b);

	unsigned only = b.o.only;
	bench_idle(&b);    /* in child processes, before any thread of ours exists */
	bench_trickle(&b); /* likewise */
	if (only & (SEC_FIB | SEC_SPAWN))
		b.p1 = ours_create(1);
	if (only & (SEC_FIB | SEC_SPAWN | SEC_RT))
		b.pw = ours_create(b.W);
	if (only & SEC_FIB)
		bench_fib(&b);
	if (only & SEC_SPAWN)
		bench_spawn(&b);
	ours_destroy(b.p1);
	b.p1 = NULL;
	if (only & SEC_RT)
		bench_roundtrip(&b); /* destroys pw */
	ours_destroy(b.pw);
	b.pw = NULL;

	if (only & SEC_FIB) {
		row_fib_typed_serial(&b);
		rows_fib_lace(&b);
		row_fib_speedup(&b, "typed", F_T1, F_TW);
		row_fib_ceiling(&b);
		row_fib_generic_serial(&b);
		row_fib_speedup(&b, "generic", F_O1, F_OW);
		rows_fib_peers(&b);
		rows_spawn_overhead(&b);
	}
	if (only & SEC_SPAWN)
		rows_spawn_throughput(&b);
	rows_roundtrip(&b);
	rows_idle(&b);
	rows_trickle(&b);

	if (only & SEC_FIB)
		printf("- ours, %d workers, during the fib runs: %llu steals, %llu sleeps\n\n", b.W,
		       (unsigned long long)b.steals, (unsigned long long)b.sleeps);
	table_print(b.o.markdown);
	if (b.o.json)
		table_write_json(b.o.json, "ovstage_bench_jobs", b.W,
				 fmt("fib(%d), best of %d repetitions%s", b.o.fib_n, b.o.reps, b.o.quick ? "; --quick" : ""));
	return 0;
}
