/*
 * main.c — ovstage_bench_stage: the stage's write, seal and read paths beside memcpy, the bare job
 * system and LMDB, measured in the same run and printed as one markdown table.
 *
 *   ovstage_bench_stage [--quick] [--reps R] [--only latency|bulk|commit|paths|steploop|hierarchy|columns] [--json PATH]
 *
 * --only runs one section of rows (to iterate on it); the default runs all seven. --json also writes
 * every row (figure, peer, ratio, target, met), the notes, the machine and the date to PATH
 * (bench/tools/plot.py turns it into plots).
 * Figures are the best of R repetitions (R = 3, --quick: 2 and smaller sizes where it says so).
 * Latencies are percentiles over all iterations of a repetition; the best repetition is kept.
 * Sections: latency (tiny write round trip, read latency), bulk (full and sparse writes), commit
 * (per-ordinal commits, producer scaling), paths (bulk path interning), steploop (a simulator's step
 * loop beside a bare loop), hierarchy (world matrices of 10^6 prims in 1000 trees, full and after
 * changing 1 % of the locals, beside a serial loop; rows_hierarchy.c), columns (a step of 100 columns ×
 * 4096 rows: write, seal, latest read, beside the bare copies; rows_columns.c).
 * The engine's worker count comes from OVSTAGE_WORKERS (default: one per core). Never asserts:
 * the exit status is always 0; a peer that is not available prints n/a.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

static long mem_total_mib(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	return pages > 0 && psz > 0 ? (long)((double)pages * (double)psz / 1048576.0) : -1;
}

int main(int argc, char **argv)
{
	bench_opts o = { false, -1, NULL };
	const char *json = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick"))
			o.quick = true;
		else if (!strcmp(argv[i], "--reps") && i + 1 < argc && atoi(argv[i + 1]) > 0)
			o.reps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--only") && i + 1 < argc &&
			 (!strcmp(argv[i + 1], "latency") || !strcmp(argv[i + 1], "bulk") || !strcmp(argv[i + 1], "commit") ||
			  !strcmp(argv[i + 1], "paths") || !strcmp(argv[i + 1], "steploop") ||
			  !strcmp(argv[i + 1], "hierarchy") || !strcmp(argv[i + 1], "columns")))
			o.only = argv[++i];
		else if (!strcmp(argv[i], "--json") && i + 1 < argc)
			json = argv[++i];
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: %s [--quick] [--reps R] [--only latency|bulk|commit|paths|steploop|hierarchy|columns] [--json PATH]\n", argv[0]);
			return 0;
		} else
			fprintf(stderr, "ovstage_bench_stage: ignoring unknown option '%s'\n", argv[i]);
	}
	if (o.reps < 1)
		o.reps = o.quick ? 2 : 3;
	setvbuf(stdout, NULL, _IOLBF, 0);

	char model[256];
	cpu_model(model, sizeof model);
	char date[64];
	time_t now = time(NULL);
	strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S %Z", localtime(&now));
	const char *w = getenv("OVSTAGE_WORKERS");
	printf("# ovstage_bench_stage — stage writes, seals and reads vs memcpy, the job system and LMDB\n\n");
	printf("- date: %s\n", date);
	printf("- machine: %s; online cpus: %ld; memory: %ld MiB\n", model, sysconf(_SC_NPROCESSORS_ONLN),
	       mem_total_mib());
	printf("- engine workers: %s; retention: %s (default 2)\n",
	       w && *w ? w : "default (one per core)", getenv("OVSTAGE_RETENTION") ? getenv("OVSTAGE_RETENTION") : "default");
	printf("- compiler: gcc %s; LMDB: %s (MDB_NOSYNC | MDB_WRITEMAP, on /dev/shm)\n", __VERSION__,
	       lmdb_version_str());
	printf("- settings: best of %d repetitions%s%s%s\n\n", o.reps, o.quick ? " (--quick: smaller sizes, fewer iterations)" : "",
	       o.only ? "; only the rows of section " : "", o.only ? o.only : "");
	fflush(stdout);

	uint64_t t0 = now_ns();
	if (!o.only || !strcmp(o.only, "latency"))
		rows_latency(&o);
	if (!o.only || !strcmp(o.only, "bulk"))
		rows_bulk(&o);
	if (!o.only || !strcmp(o.only, "commit"))
		rows_commit(&o);
	if (!o.only || !strcmp(o.only, "paths"))
		rows_paths(&o);
	if (!o.only || !strcmp(o.only, "steploop"))
		rows_steploop(&o);
	if (!o.only || !strcmp(o.only, "hierarchy"))
		rows_hierarchy(&o);
	if (!o.only || !strcmp(o.only, "columns"))
		rows_columns(&o);
	table_print(true);
	notes_print();
	printf("- total benchmark time: %.1f s\n", (double)(now_ns() - t0) / 1e9);
	if (json) {
		char settings[160];
		snprintf(settings, sizeof settings, "best of %d repetitions%s%s%s", o.reps, o.quick ? "; --quick" : "",
			 o.only ? "; --only " : "", o.only ? o.only : "");
		table_write_json(json, "ovstage_bench_stage", w && *w ? atoi(w) : -1, settings);
	}
	return 0;
}
