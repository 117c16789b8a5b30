/*
 * main.c — ovstage_bench_jobs: the job system against oneTBB, OpenMP tasks, serial C and a pthread
 * condvar handoff, measured in the same run and printed as one table.
 *
 *   ovstage_bench_jobs [--quick] [--fib N] [--reps R] [--workers W] [--lace PATH] [--markdown | --plain]
 *                      [--json PATH]
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
} opts;

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
		"  --json PATH  also write every row, the machine and the date as JSON (bench/tools/plot.py)\n",
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
	int fib = -1, reps = -1;
	o->quick = false;
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
	o->rt_iters = o->quick ? 20000 : 100000;
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

static double idle_child(const idle_arg *a)
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
		double pct = ours_trickle_pct(p, a->rate_hz, IDLE_NS);
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

static double idle_in_child(idle_arg a)
{
	int fd[2];
	if (pipe(fd) != 0)
		return -1;
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		close(fd[0]);
		close(fd[1]);
		return -1;
	}
	if (pid == 0) {
		close(fd[0]);
		double v = idle_child(&a);
		ssize_t wr = write(fd[1], &v, sizeof v);
		(void)wr;
		_exit(0);
	}
	close(fd[1]);
	double v = -1;
	if (read(fd[0], &v, sizeof v) != (ssize_t)sizeof v)
		v = -1;
	close(fd[0]);
	waitpid(pid, NULL, 0);
	return v;
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

int main(int argc, char **argv)
{
	table_set_peer_header("Peer / baseline (same run)");
	opts o;
	parse(argc, argv, &o);
	lace_set_driver(o.lace);
	if (o.lace && !lace_available())
		fprintf(stderr, "ovstage_bench_jobs: --lace %s is not an executable; Lace rows print n/a\n", o.lace);
	setvbuf(stdout, NULL, _IOLBF, 0);

	/* Machine: hwloc's core count through the job system (a default pool has one worker per core). */
	int hw_cores = -1;
	{
		ours_pool *p = ours_create(-1);
		if (p) {
			hw_cores = ours_workers(p);
			ours_destroy(p);
		}
	}
	int W = o.workers > 0 ? o.workers : (hw_cores > 0 ? hw_cores : (int)sysconf(_SC_NPROCESSORS_ONLN));
	if (W < 1)
		W = 1;
	char model[256];
	cpu_model(model, sizeof model);
	char date[64];
	time_t now = time(NULL);
	strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S %Z", localtime(&now));
	const int N = o.fib_n, R = o.reps;
	const uint64_t spawns = bench_fib_spawns(N);

	/* The spawn count formula, checked by counting the recursion (up to n = 30: 1.3M calls). */
	int verified_to = N < 30 ? N : 30;
	bool formula_ok = true;
	for (int n = 0; n <= verified_to; n++)
		if (bench_fib_count_spawns(n) != bench_fib_spawns(n))
			formula_ok = false;

	printf("# ovstage_bench_jobs — job system vs oneTBB / OpenMP / serial / pthread condvar\n\n");
	printf("- date: %s\n", date);
	printf("- cpu: %s; online cpus (sysconf): %ld; cores (hwloc, via jobs): %d\n", model,
	       sysconf(_SC_NPROCESSORS_ONLN), hw_cores);
	printf("- compiler: gcc %s; benchmark TUs -O2; peers: %s, OpenMP %d (libgomp), %s\n", __VERSION__,
	       tbb_available() ? tbb_version() : "oneTBB n/a", omp_spec_version(),
	       lace_available() ? fmt("%s (bench/peers/lace.sh: its own Release build, driver -O2, child process)", lace_version())
				: "Lace n/a (build it with bench/peers/lace.sh, pass --lace)");
	printf("- settings: fib(%d), best of %d repetitions, all workers = %d, round trips = %ld, "
	       "spawn batches = %ld x %ld%s\n",
	       N, R, W, o.rt_iters, o.spawn_batches, o.spawn_k, o.quick ? " (--quick)" : "");
	printf("- serial fib: plain recursion, noinline, same flags as our frames; gcc -O2 keeps one of the two "
	       "recursive calls and turns the other into a loop (tail-recursion accumulator)\n");
	printf("- fib(%d) spawns fib(%d)-1 = %llu frames; formula %s by counting for n = 0..%d\n\n", N,
	       N + 1, (unsigned long long)spawns, formula_ok ? "verified" : "CONTRADICTED", verified_to);
	fflush(stdout);

	/* 1. Idle CPU: in children, before any thread of ours exists. */
	int idle_fib = N < 30 ? N : 30;
	fprintf(stderr, "idle: 4 x 1.2 s ...\n");
	double idle_fresh = idle_in_child((idle_arg){W, 0, 0, 0});
	double idle_ours = idle_in_child((idle_arg){W, idle_fib, 0, 0});
	double idle_omp = o.slow_peers ? idle_in_child((idle_arg){W, idle_fib, 1, 0}) : -1;
	double idle_tbb = o.slow_peers ? idle_in_child((idle_arg){W, idle_fib, 2, 0}) : -1;
	/* A trickle of trivial jobs: between two jobs the pool is idle; how much does it burn? */
	static const double trickle_hz[] = {100, 1000, 10000};
	enum { N_TRICKLE = 3 };
	double tr_ours[N_TRICKLE], tr_cv[N_TRICKLE];
	fprintf(stderr, "trickles: %d x 2 x 1.1 s ...\n", N_TRICKLE);
	for (int i = 0; i < N_TRICKLE; i++) {
		tr_ours[i] = idle_in_child((idle_arg){W, 0, 3, trickle_hz[i]});
		tr_cv[i] = idle_in_child((idle_arg){W, 0, 4, trickle_hz[i]});
		fprintf(stderr, "  %.0f jobs/s: ours %.2f %%, condvar %.2f %%\n", trickle_hz[i], tr_ours[i], tr_cv[i]);
	}

	/* 2. fib, repetitions interleaved across the sides. A figure whose repetitions already took
	 * REP_BUDGET is not repeated further (the peers without cutoff take tens of seconds at fib(40));
	 * the table then says how many repetitions it is the best of. */
	ours_pool *p1 = ours_create(1);
	ours_pool *pw = ours_create(W);
	long expect = (long)bench_fib_iter(N);
	const uint64_t REP_BUDGET = 10000000000ull;
	enum { F_SERIAL, F_T1, F_L1, F_TW, F_LW, F_O1, F_OW, F_TBB1, F_TBBW, F_OMP1, F_OMPW, F_COUNT };
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
				      fmt("OpenMP tasks, %d threads", W)};
	uint64_t fbest[F_COUNT] = {0}, fspent[F_COUNT] = {0};
	int freps[F_COUNT] = {0};
	bool fwrong[F_COUNT] = {false};
	bool favail[F_COUNT] = {true, p1 != NULL, lace_available(), pw != NULL, lace_available(),
				p1 != NULL, pw != NULL, o.slow_peers && tbb_available(), o.slow_peers && tbb_available(),
				o.slow_peers && omp_available(), o.slow_peers && omp_available()};
	fprintf(stderr, "fib(%d):\n", N);
	for (int rep = 0; rep < R; rep++) {
		for (int f = 0; f < F_COUNT; f++) {
			if (!favail[f] || (rep > 0 && fspent[f] >= REP_BUDGET))
				continue;
			long r = -1;
			uint64_t t = 0;
			switch (f) {
			case F_SERIAL: {
				uint64_t t0 = bench_now_ns();
				r = bench_fib_serial(N);
				t = bench_now_ns() - t0;
				break;
			}
			case F_T1: t = ours_fib_typed_ns(p1, N, &r); break;
			case F_TW: t = ours_fib_typed_ns(pw, N, &r); break;
			case F_L1: t = lace_fib_ns(1, N, &r); break;
			case F_LW: t = lace_fib_ns(W, N, &r); break;
			case F_O1: t = ours_fib_ns(p1, N, &r); break;
			case F_OW: t = ours_fib_ns(pw, N, &r); break;
			case F_TBB1: t = tbb_fib_ns(1, N, &r); break;
			case F_TBBW: t = tbb_fib_ns(W, N, &r); break;
			case F_OMP1: t = omp_fib_ns(1, N, &r); break;
			default: t = omp_fib_ns(W, N, &r); break;
			}
			if (!t) {
				favail[f] = false; /* failed: n/a */
				fbest[f] = 0;
				continue;
			}
			if (r != expect) {
				fwrong[f] = true;
				fprintf(stderr, "  %s: fib(%d) = %ld, expected %ld (WRONG RESULT)\n", fname[f], N, r,
					expect);
			}
			keep_min(&fbest[f], t);
			fspent[f] += t;
			freps[f]++;
			progress(fname[f], rep, R, t);
		}
	}
	uint64_t t_serial = fbest[F_SERIAL], t_o1 = fbest[F_O1], t_ow = fbest[F_OW], t_tbb1 = fbest[F_TBB1],
		 t_tbbw = fbest[F_TBBW], t_omp1 = fbest[F_OMP1], t_ompw = fbest[F_OMPW];
	bool wrong_o = fwrong[F_O1] || fwrong[F_OW];
	uint64_t t_t1 = fbest[F_T1], t_tw = fbest[F_TW], t_l1 = fbest[F_L1], t_lw = fbest[F_LW];
	bool wrong_t = fwrong[F_T1] || fwrong[F_TW];
	uint64_t steals = 0, sleeps = 0;
	if (pw)
		ours_stats(pw, &steals, &sleeps);

	/* 3. Spawn throughput: flat batches of K frames spawned then joined by one worker. */
	uint64_t sp_o1 = 0, sp_ow = 0, sp_t1 = 0, sp_tw = 0;
	long K = o.spawn_k, B = o.spawn_batches;
	long sp_expect = B * K * K; /* sum over a batch of 2i+1 = K^2 */
	bool sp_wrong = false;
	fprintf(stderr, "spawn throughput (%ld x %ld):\n", B, K);
	for (int rep = 0; rep < R; rep++) {
		long chk;
		uint64_t t;
		if (p1) {
			chk = 0;
			t = ours_spawn_batches_ns(p1, K, B, &chk);
			sp_wrong |= chk != sp_expect;
			keep_min(&sp_o1, t);
			progress("ours, 1 worker", rep, R, t);
		}
		if (pw) {
			chk = 0;
			t = ours_spawn_batches_ns(pw, K, B, &chk);
			sp_wrong |= chk != sp_expect;
			keep_min(&sp_ow, t);
			progress(fmt("ours, %d workers", W), rep, R, t);
		}
		if (o.slow_peers && tbb_available()) {
			chk = 0;
			t = tbb_spawn_batches_ns(1, K, B, &chk);
			sp_wrong |= t && chk != sp_expect;
			keep_min(&sp_t1, t);
			progress("oneTBB task_group, 1 thread", rep, R, t);
			chk = 0;
			t = tbb_spawn_batches_ns(W, K, B, &chk);
			sp_wrong |= t && chk != sp_expect;
			keep_min(&sp_tw, t);
			progress(fmt("oneTBB task_group, %d threads", W), rep, R, t);
		}
	}
	ours_destroy(p1);
	p1 = NULL;

	/* 4. External round trip from this (non-worker) thread. Warm-up first, then iters samples. */
	long I = o.rt_iters;
	uint64_t *lat = malloc((size_t)I * sizeof *lat);
	double rt_o50 = -1, rt_o99 = -1, rt_t50 = -1, rt_t99 = -1, rt_c50 = -1, rt_c99 = -1;
	fprintf(stderr, "round trips (%ld):\n", I);
	if (lat && pw) {
		(void)ours_roundtrip(pw, I < 1000 ? I : 1000, lat);
		if (ours_roundtrip(pw, I, lat)) {
			rt_o50 = bench_percentile_us(lat, (size_t)I, 50);
			rt_o99 = bench_percentile_us(lat, (size_t)I, 99);
		}
		fprintf(stderr, "  ours: p50 %.2f us p99 %.2f us\n", rt_o50, rt_o99);
	}
	ours_destroy(pw);
	pw = NULL;
	if (lat && tbb_available()) {
		(void)tbb_roundtrip(W, I < 1000 ? I : 1000, lat);
		if (tbb_roundtrip(W, I, lat)) {
			rt_t50 = bench_percentile_us(lat, (size_t)I, 50);
			rt_t99 = bench_percentile_us(lat, (size_t)I, 99);
		}
		fprintf(stderr, "  oneTBB: p50 %.2f us p99 %.2f us\n", rt_t50, rt_t99);
	}
	if (lat) {
		(void)condvar_roundtrip(I < 1000 ? I : 1000, lat);
		if (condvar_roundtrip(I, lat)) {
			rt_c50 = bench_percentile_us(lat, (size_t)I, 50);
			rt_c99 = bench_percentile_us(lat, (size_t)I, 99);
		}
		fprintf(stderr, "  condvar: p50 %.2f us p99 %.2f us\n", rt_c50, rt_c99);
	}
	free(lat);

	/* ---- the table ---- */
	char fibname[32];
	snprintf(fibname, sizeof fibname, "fib(%d)", N);
	const char *wrong = " (WRONG RESULT)";
	/* fib rows: typed tasks (the fast path) against serial and Lace */
	{
		bool k = t_t1 && t_serial;
		double r = k ? (double)t_t1 / (double)t_serial : 0;
		table_row(fmt("%s typed tasks (jobs_task.h), 1 worker vs serial", fibname), ms_or_na(t_t1),
		    "serial C (recursive, noinline)", ms_or_na(t_serial), k ? fmt("%.2f× serial", r) : "n/a",
		    "≤ 2.0× serial", wrong_t ? "WRONG RESULT" : met(k, r <= 2.0));
	}
	{
		uint64_t ot[2] = {t_t1, t_tw}, lt[2] = {t_l1, t_lw};
		int th[2] = {1, W};
		for (int i = 0; i < 2; i++) {
			bool k = ot[i] && lt[i];
			double r = k ? (double)lt[i] / (double)ot[i] : 0;
			bool wl = fwrong[i ? F_LW : F_L1];
			table_row(fmt("%s, %d worker%s: ours (typed) vs Lace", fibname, th[i], th[i] > 1 ? "s" : ""),
			    ms_or_na(ot[i]),
			    fmt("%s, %d worker%s%s", lace_version(), th[i], th[i] > 1 ? "s" : "", wl ? wrong : ""),
			    ms_or_na(lt[i]), k ? fmt("Lace/ours = %.2f×", r) : "n/a", "≥ 1.0× (as fast as Lace)",
			    wrong_t ? "WRONG RESULT" : met(k, r >= 1.0));
		}
	}
	{
		bool k = t_t1 && t_tw;
		double sp = k ? (double)t_t1 / (double)t_tw : 0;
		double tgt = W == 2 ? 1.85 : 0.925 * W;
		table_row(fmt("%s typed, %d workers vs 1 worker (speedup)", fibname, W), ms_or_na(t_tw),
		    "ours typed, 1 worker", ms_or_na(t_t1), k ? fmt("%.2f× faster", sp) : "n/a",
		    W == 2 ? "≥ 1.85× (2 cores)" : fmt("≥ %.2f× (1.85× per 2 cores)", tgt),
		    wrong_t ? "WRONG RESULT" : met(k, sp >= tgt));
	}
	/* fib rows: the generic frames (jobs_forkjoin.h) */
	{
		bool k = t_o1 && t_serial;
		double r = k ? (double)t_o1 / (double)t_serial : 0;
		table_row(fmt("%s generic frames (jobs_forkjoin.h), 1 worker vs serial", fibname), ms_or_na(t_o1),
		    "serial C (recursive, noinline)", ms_or_na(t_serial), k ? fmt("%.2f× serial", r) : "n/a",
		    "— (info: use typed tasks)", wrong_o ? "WRONG RESULT" : "—");
	}
	{
		bool k = t_o1 && t_ow;
		double sp = k ? (double)t_o1 / (double)t_ow : 0;
		double tgt = W == 2 ? 1.85 : 0.925 * W;
		table_row(fmt("%s generic, %d workers vs 1 worker (speedup)", fibname, W), ms_or_na(t_ow), "ours generic, 1 worker",
		    ms_or_na(t_o1), k ? fmt("%.2f× faster", sp) : "n/a",
		    W == 2 ? "≥ 1.85× (2 cores)" : fmt("≥ %.2f× (1.85× per 2 cores)", tgt),
		    wrong_o ? "WRONG RESULT" : met(k, sp >= tgt));
	}
	struct {
		const char *name;
		uint64_t peer, ours;
		int threads;
		bool wrong;
		int reps;
	} fr[4] = {
		{"oneTBB task_group", t_tbb1, t_t1, 1, fwrong[F_TBB1], freps[F_TBB1]},
		{"oneTBB task_group", t_tbbw, t_tw, W, fwrong[F_TBBW], freps[F_TBBW]},
		{"OpenMP tasks (no cutoff)", t_omp1, t_t1, 1, fwrong[F_OMP1], freps[F_OMP1]},
		{"OpenMP tasks (no cutoff)", t_ompw, t_tw, W, fwrong[F_OMPW], freps[F_OMPW]},
	};
	for (int i = 0; i < 4; i++) {
		bool k = fr[i].peer && fr[i].ours && t_serial;
		table_row(fmt("%s, %d thread%s: ours (typed) vs %s", fibname, fr[i].threads, fr[i].threads > 1 ? "s" : "",
			fr[i].name),
		    ms_or_na(fr[i].ours),
		    fmt("%s, %d thread%s%s%s", fr[i].name, fr[i].threads, fr[i].threads > 1 ? "s" : "",
			fr[i].reps && fr[i].reps < R ? fmt(" (best of %d)", fr[i].reps) : "",
			fr[i].wrong ? wrong : ""),
		    ms_or_na(fr[i].peer),
		    k ? fmt("peer = %.2f× serial, %.2f× ours", (double)fr[i].peer / (double)t_serial,
			    (double)fr[i].peer / (double)fr[i].ours)
		      : "n/a",
		    "— (info)", "—");
	}
	/* per-spawn overhead */
	double ov_o = t_t1 && t_serial ? ((double)t_t1 - (double)t_serial) / (double)spawns : -1;
	double ov_t = t_tbb1 && t_serial ? ((double)t_tbb1 - (double)t_serial) / (double)spawns : -1;
	double ov_m = t_omp1 && t_serial ? ((double)t_omp1 - (double)t_serial) / (double)spawns : -1;
	{
		bool k = ov_o > -1 && ov_t > -1;
		double r = k && ov_o > 0 ? ov_t / ov_o : 0;
		table_row(fmt("per-spawn overhead, typed (T1 − Tserial)/%llu spawns", (unsigned long long)spawns),
		    ov_o > -1 ? fmt("%.2f ns", ov_o) : "n/a", "oneTBB task_group, 1 thread",
		    ov_t > -1 ? fmt("%.2f ns", ov_t) : "n/a",
		    !k ? "n/a" : ov_o > 0 ? fmt("TBB/ours = %.1f×", r) : "ours ≤ 0 (noise)",
		    "ours ≥ 10× lower than oneTBB", met(k, ov_o <= 0 || r >= 10.0));
		bool km = ov_o > -1 && ov_m > -1;
		table_row(fmt("per-spawn overhead, typed (T1 − Tserial)/%llu spawns", (unsigned long long)spawns),
		    ov_o > -1 ? fmt("%.2f ns", ov_o) : "n/a", "OpenMP tasks, 1 thread",
		    ov_m > -1 ? fmt("%.2f ns", ov_m) : "n/a",
		    !km ? "n/a" : ov_o > 0 ? fmt("OpenMP/ours = %.1f×", ov_m / ov_o) : "ours ≤ 0 (noise)",
		    "— (info)", "—");
	}
	/* spawn throughput */
	{
		double tasks = (double)K * (double)B;
		char lab[160];
		snprintf(lab, sizeof lab, "spawn+join throughput, flat %ld × %ld, ", B, K);
		uint64_t o_[2] = {sp_o1, sp_ow}, t_[2] = {sp_t1, sp_tw};
		int th[2] = {1, W};
		for (int i = 0; i < 2; i++) {
			bool k = o_[i] && t_[i];
			table_row(fmt("%s%d %s%s", lab, th[i], th[i] > 1 ? "workers" : "worker",
				sp_wrong ? " (WRONG RESULT)" : ""),
			    o_[i] ? fmt("%.1f M/s", tasks / MS(o_[i]) / 1e3) : "n/a",
			    fmt("oneTBB task_group run()+wait(), %d thread%s", th[i], th[i] > 1 ? "s" : ""),
			    t_[i] ? fmt("%.1f M/s", tasks / MS(t_[i]) / 1e3) : "n/a",
			    k ? fmt("ours %.2f× TBB", (double)t_[i] / (double)o_[i]) : "n/a", "— (info)", "—");
		}
	}
	/* round trips */
	{
		char lab[160];
		snprintf(lab, sizeof lab, "submit+wait+release round trip from main, %d workers", W);
		bool k = rt_o50 >= 0 && rt_t50 >= 0;
		table_row(fmt("%s, p50", lab), rt_o50 >= 0 ? fmt("%.2f µs", rt_o50) : "n/a",
		    "oneTBB task_arena::enqueue + spin/yield on a flag", rt_t50 >= 0 ? fmt("%.2f µs", rt_t50) : "n/a",
		    k ? fmt("TBB/ours = %.2f×", rt_t50 / rt_o50) : "n/a", "ours p50 ≤ 2 µs",
		    met(rt_o50 >= 0, rt_o50 <= 2.0));
		k = rt_o99 >= 0 && rt_t99 >= 0;
		table_row(fmt("%s, p99", lab), rt_o99 >= 0 ? fmt("%.2f µs", rt_o99) : "n/a",
		    "oneTBB task_arena::enqueue + spin/yield on a flag", rt_t99 >= 0 ? fmt("%.2f µs", rt_t99) : "n/a",
		    k ? fmt("TBB/ours = %.2f×", rt_t99 / rt_o99) : "n/a", "— (info)", "—");
		k = rt_o50 >= 0 && rt_c50 >= 0;
		table_row(fmt("%s, p50", lab), rt_o50 >= 0 ? fmt("%.2f µs", rt_o50) : "n/a",
		    "pthread mutex+condvar handoff to 1 thread", rt_c50 >= 0 ? fmt("%.2f µs", rt_c50) : "n/a",
		    k ? fmt("condvar/ours = %.2f×", rt_c50 / rt_o50) : "n/a", "— (baseline)", "—");
		k = rt_o99 >= 0 && rt_c99 >= 0;
		table_row(fmt("%s, p99", lab), rt_o99 >= 0 ? fmt("%.2f µs", rt_o99) : "n/a",
		    "pthread mutex+condvar handoff to 1 thread", rt_c99 >= 0 ? fmt("%.2f µs", rt_c99) : "n/a",
		    k ? fmt("condvar/ours = %.2f×", rt_c99 / rt_o99) : "n/a", "— (baseline)", "—");
	}
	/* idle */
	{
		table_row(fmt("idle CPU, %d workers, fresh pool (200 ms settle, 1 s)", W), pct_or_na(idle_fresh),
		    fmt("OpenMP (libgomp) pool after fib(%d), %d threads", idle_fib, W), pct_or_na(idle_omp),
		    "% of one core", "ours ≤ 1 %", met(idle_fresh >= 0, idle_fresh <= 1.0));
		table_row(fmt("idle CPU, %d workers, after fib(%d) (200 ms settle, 1 s)", W, idle_fib),
		    pct_or_na(idle_ours), fmt("oneTBB pool after fib(%d), %d threads", idle_fib, W),
		    pct_or_na(idle_tbb), "% of one core", "ours ≤ 1 %", met(idle_ours >= 0, idle_ours <= 1.0));
		for (int i = 0; i < N_TRICKLE; i++) {
			bool k = tr_ours[i] >= 0 && tr_cv[i] > 0;
			table_row(fmt("CPU under a trickle of %.0f trivial jobs/s, %d workers (1 s)", trickle_hz[i], W),
			    pct_or_na(tr_ours[i]), "pthread mutex+condvar handoff to 1 thread, same trickle",
			    pct_or_na(tr_cv[i]), k ? fmt("ours/condvar = %.2f×", tr_ours[i] / tr_cv[i]) : "n/a",
			    "ours ≤ 2× condvar", met(k, tr_ours[i] <= 2.0 * tr_cv[i]));
		}
	}

	printf("- ours, %d workers, during the fib runs: %llu steals, %llu sleeps\n\n", W,
	       (unsigned long long)steals, (unsigned long long)sleeps);
	table_print(o.markdown);
	if (o.json)
		table_write_json(o.json, "ovstage_bench_jobs", W, fmt("fib(%d), best of %d repetitions%s", o.fib_n, o.reps,
								    o.quick ? "; --quick" : ""));
	return 0;
}
