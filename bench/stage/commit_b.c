/*
 * commit_b.c — row (b) of `ovstage_bench_stage --only commit` driven one side per process, for A/B
 * runs and profiles: per ordinal one write_attributes of 8 columns x 4 KiB, advance_write_floor,
 * wait, release (rows_commit.c's commit_one, included below, so the commit is the bench's own), with
 * or without the reader thread; or LMDB's peer the same way. Prints one line:
 *   commit_b side=<ours|lmdb> reader=<0|1> commits=<n> rate=<commits/s> cpu_us=<writer CPU per commit>
 * The writer's CPU time per commit (CLOCK_THREAD_CPUTIME_ID) is disturbed less by other load than
 * the rate. With a commit count instead of seconds (N > 0) it runs exactly N commits after the
 * warm-up: callgrind's instruction counts of two counts, subtracted, give instructions per commit.
 *
 * Public API only, so bench/tools/commit_ab.sh compiles this file against another revision's library.
 * Usage: ovstage_bench_commit_b ours|lmdb READER(0|1) SECONDS [N]
 */
#include <time.h>

#include "rows_commit.c"

static double thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Exactly n commits of ours, writer alone (callgrind). */
static bool count_ours(cctx *c, long n)
{
	for (long i = 0; i < n; i++)
		if (!commit_one(c, NULL))
			return false;
	return true;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: %s ours|lmdb READER(0|1) SECONDS [N]\n", argv[0]);
		return 2;
	}
	bool lmdb = strcmp(argv[1], "lmdb") == 0, with_reader = atoi(argv[2]) != 0;
	double secs = atof(argv[3]);
	long count = argc > 4 ? atol(argv[4]) : 0;
	cctx c;
	if (!cctx_open(&c, "commit_b", 4096)) {
		cctx_close(&c);
		return 1;
	}
	lmdb_peer *lp = lmdb ? lmdb_open_peer("commit_b", 512 * MIB) : NULL;
	if (lmdb && !lp) {
		fprintf(stderr, "commit_b: LMDB unavailable\n");
		cctx_close(&c);
		return 1;
	}
	uint64_t lord = 1;
	/* warm-up, as the bench: rows created, buffers faulted, LMDB pages allocated */
	if (lmdb)
		run_lmdb(lp, &c, 0.25, &lord, false);
	else if (count > 0)
		count_ours(&c, 1000); /* a fixed warm-up: two counts' runs differ only in the counted commits */
	else
		run_ours(&c, 0.25, NULL, false);
	double cpu0 = thread_cpu_ns();
	uint64_t o0 = lmdb ? lord : c.ord;
	run_result r = { -1, -1, 0, 0 };
	if (count > 0 && !lmdb)
		r.rate = count_ours(&c, count) ? 0 : -1;
	else
		r = lmdb ? run_lmdb(lp, &c, secs, &lord, with_reader) : run_ours(&c, secs, NULL, with_reader);
	double cpu = thread_cpu_ns() - cpu0;
	uint64_t n = (lmdb ? lord : c.ord) - o0;
	printf("commit_b side=%s reader=%d commits=%llu rate=%.0f cpu_us=%.3f reads=%.0f\n", lmdb ? "lmdb" : "ours",
	       with_reader ? 1 : 0, (unsigned long long)n, r.rate, n ? cpu / (double)n / 1e3 : 0.0, r.read_rate);
	if (lp)
		lmdb_close_peer(lp);
	cctx_close(&c);
	return r.rate < 0;
}
