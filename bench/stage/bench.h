/*
 * bench.h — shared declarations of the stage benchmark (ovstage_bench_stage).
 *
 * Layout: util.c (clocks, percentiles, memcpy peers), ../common/report.c (the table), stage_util.c (a stage with N prims,
 * tensors, waits), rows_latency.c (tiny write round trip, read latency), rows_bulk.c (full and sparse
 * writes), rows_commit.c (per-ordinal commits and producer scaling), rows_steploop.c (a simulator's step
 * loop beside a bare loop), rows_hierarchy.c (world matrices of a forest, full and incremental, beside
 * a serial loop), rows_columns.c (a 100-column step: write, seal, latest read, beside the bare copies),
 * lmdb_peer.c (the LMDB side).
 * Every measurement function runs ONE repetition and returns its figure; the caller keeps the best.
 */
#ifndef OVSTAGE_BENCH_STAGE_H
#define OVSTAGE_BENCH_STAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ovstage/ovstage.h>
#include <ovx/path_dictionary/path_dictionary.h>

#include "report.h"

#define MIB ((size_t)1 << 20)

/* ---- options ---- */
typedef struct bench_opts {
	bool quick;
	int reps;
	const char *only; /* NULL = every section; else "latency", "bulk", "commit", "paths", "steploop", "hierarchy" or "columns" */
} bench_opts;

/* ---- util.c ---- */
uint64_t now_ns(void);
double pct_us(uint64_t *ns, size_t n, double p); /* sorts ns; p-th percentile in µs */
void *alloc_prefaulted(size_t bytes);           /* mmap + MAP_POPULATE, then written once */
void free_prefaulted(void *p, size_t bytes);
void fill_pattern(void *p, size_t bytes, uint32_t seed);
/* memcpy peers: one thread (libc memcpy), and `threads` threads with non-temporal stores */
uint64_t memcpy_ns(void *dst, const void *src, size_t n);
uint64_t memcpy_nt_threads_ns(void *dst, const void *src, size_t n, int threads);

/* the table, notes and machine description: ../common/report.h */
void progress(const char *f, ...) __attribute__((format(printf, 1, 2))); /* stderr */

/* ---- stage_util.c ---- */
typedef struct stg {
	ovstage_instance_t *st;
	path_dictionary_instance_t *pd;
} stg;

bool stg_open(stg *s, const char *name);
void stg_close(stg *s);
/* A query over n fresh prims /<prefix>_<i / 4096>/p<i % 4096> (created from tokens, in order). */
ovstage_query_handle_t stg_query(stg *s, const char *prefix, size_t n, ovx_primpath_list_t *out_list,
				 uint64_t *setup_ns);
/* A query over positions [first, first + n) of prims made by the same prefix. */
ovstage_query_handle_t stg_query_range(stg *s, const char *prefix, size_t first, size_t n,
				       ovx_primpath_list_t *out_list);
void stg_release_query(stg *s, ovstage_query_handle_t q, ovx_primpath_list_t list);
ovx_token_t stg_token(stg *s, const char *name);
/* Waits and releases an op; false (and a message on stderr) if it was rejected or failed. */
bool stg_wait(stg *s, ovstage_enqueue_result_t e, const char *what);
/* Seals through ordinal n (ALL scope) and waits. */
bool stg_seal(stg *s, uint64_t n);
/* A float32 x lanes CPU tensor of `rows` rows over data (shape[0] = rows, compact). */
typedef struct ftensor {
	DLTensor t;
	int64_t shape[1];
} ftensor;
ovstage_write_data_t stg_fdata(ftensor *ft, void *data, int64_t rows, int lanes);
/* Reads attrs (latest as of n) on q, fetches every group, touches the first byte of each, releases
 * everything. Returns groups fetched, -1 on failure. */
int stg_read_latest(stg *s, ovstage_query_handle_t q, const ovx_token_t *attrs, size_t nattrs, uint64_t n,
		    uint64_t *sum);

/* ---- lmdb_peer.c ---- */
typedef struct lmdb_peer lmdb_peer;
bool lmdb_available(void);
const char *lmdb_version_str(void);
lmdb_peer *lmdb_open_peer(const char *tag, size_t map_bytes); /* NULL if unavailable */
void lmdb_close_peer(lmdb_peer *p);
/* One write txn: put ncols values of `bytes` (key = col, ordinal), delete ordinal - keep, commit. */
bool lmdb_commit(lmdb_peer *p, int ncols, uint64_t ordinal, const void *const *vals, size_t bytes, int keep);
/* Read txn + get of (col, ordinal) for ncols columns; touches the first byte; returns values found. */
int lmdb_read(lmdb_peer *p, int ncols, uint64_t ordinal, uint64_t *sum);
/* Read latency of one get of (col, ordinal) (txn begin + get + abort); 0 on failure */
uint64_t lmdb_read_one_ns(lmdb_peer *p, int col, uint64_t ordinal, uint64_t *sum);

/* ---- rows ---- */
void rows_latency(const bench_opts *o);
void rows_bulk(const bench_opts *o);
void rows_commit(const bench_opts *o);
void rows_paths(const bench_opts *o);
void rows_steploop(const bench_opts *o);
void rows_hierarchy(const bench_opts *o);
void rows_columns(const bench_opts *o);

#endif /* OVSTAGE_BENCH_STAGE_H */
