/*
 * report.h — what every benchmark prints: one table of rows (figure, the peer measured in the same
 * run, the ratio, the target, whether it is met), notes under it, and the machine's CPU model.
 * Shared by ovstage_bench_jobs and ovstage_bench_stage. Single-threaded (the benchmark's main
 * thread builds the table); cells are copied, so arguments may be temporaries (see report_fmt).
 */
#ifndef OVSTAGE_BENCH_REPORT_H
#define OVSTAGE_BENCH_REPORT_H

#include <stdbool.h>
#include <stddef.h>

/* The header of the peer-description column (default "Peer (same run)"). */
void table_set_peer_header(const char *h);
/* Appends a row (NULL cells print empty); rows beyond the table's capacity are dropped. */
void table_row(const char *measure, const char *ours, const char *peer, const char *peer_fig, const char *ratio,
	       const char *target, const char *met);
/* Prints the table with aligned columns: markdown (pipes, alignment row) or plain. */
void table_print(bool markdown);
/* snprintf into one of a ring of static buffers, for building cells inline. */
const char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
/* "yes", "**NO**", or "n/a" when the figure is not known. */
const char *met(bool known, bool ok);
/* A line printed under the table by notes_print ("- text"). */
void note(const char *f, ...) __attribute__((format(printf, 1, 2)));
void notes_print(void);
/* The "model name" of /proc/cpuinfo, or "unknown". */
void cpu_model(char *buf, size_t size);
/* Writes the table (every row: its cells as printed plus each figure's number, unit and bracketed
 * second number when it has one), the notes, the machine (CPU model, online CPUs, memory, compiler)
 * and the date (UTC) as one JSON object to `path` (bench/tools/plot.py reads it). `workers` is the
 * worker count the rows ran with (-1: one per core), `settings` free text. False (and a message on
 * stderr) when the file cannot be written. */
bool table_write_json(const char *path, const char *benchmark, int workers, const char *settings);

#endif /* OVSTAGE_BENCH_REPORT_H */
