/*
 * rows_columns.c — the per-column cost of a many-column step (section `columns`).
 *
 * One step, as bench/gpu's step loop does it with BENCH_GPU_HOST_COLUMNS=1, public API only: one
 * write_attributes of 100 columns × 4096 float32 rows (copy-in from host memory, one query over the
 * 4096 prims) at the next ordinal, wait, release; advance_write_floor(ALL) to it, wait, release;
 * read_attributes of the 100 columns latest, wait, release; fetch_read_next until the end (touching
 * the first byte of each group) and release_group of each; release_read, wait, release.
 *
 * Peer (same run): the bare work of the step, the same 100 memcpys of 16 KiB from the same sources
 * into a pre-faulted destination. The ratio is ours / bare (how many times the bare copies the step
 * costs); the note line breaks our step into phases (write op, seal, read op, fetches, group
 * releases, release_read), each the mean over the timed steps of the best repetition.
 *
 * OVSTAGE_BENCH_COLUMNS_STEPS=N (N > 0) runs exactly 200 untimed warm-up steps and then N steps,
 * with no clock read inside a step, and prints nothing but one line: for callgrind, whose counts
 * of two such runs (say N = 2000 and 1000), subtracted, are the instructions of N steps (as
 * bench/stage/commit_b.c does for commits).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { COLS_N = 100, COLS_ROWS = 4096 };

typedef struct colctx {
	stg s;
	ovstage_query_handle_t q;
	ovx_primpath_list_t list;
	ovx_token_t a[COLS_N];
	float *src;                    /* COLS_N × COLS_ROWS, column c at c × COLS_ROWS */
	float *dst;                    /* the peer's destination */
	ftensor ft[COLS_N];
	ovstage_attribute_write_t w[COLS_N];
	uint64_t ord;                  /* the last ordinal written */
	uint64_t sum;                  /* first bytes of the groups (kept live) */
} colctx;

/* Time per phase, summed over steps (ns). */
typedef struct colparts {
	uint64_t write, seal, read, fetch, release_group, release_read;
} colparts;

static const size_t COL_BYTES = (size_t)COLS_ROWS * sizeof(float);

static void colctx_close(colctx *c)
{
	if (c->q != OVSTAGE_INVALID_QUERY_HANDLE)
		stg_release_query(&c->s, c->q, c->list);
	stg_close(&c->s);
	free_prefaulted(c->src, COLS_N * COL_BYTES);
	free_prefaulted(c->dst, COLS_N * COL_BYTES);
}

static bool colctx_open(colctx *c)
{
	memset(c, 0, sizeof *c);
	c->q = OVSTAGE_INVALID_QUERY_HANDLE;
	if (!stg_open(&c->s, "columns"))
		return false;
	c->q = stg_query(&c->s, "columns_p", COLS_ROWS, &c->list, NULL);
	c->src = alloc_prefaulted(COLS_N * COL_BYTES);
	c->dst = alloc_prefaulted(COLS_N * COL_BYTES);
	bool ok = c->q != OVSTAGE_INVALID_QUERY_HANDLE && c->src && c->dst;
	if (ok)
		fill_pattern(c->src, COLS_N * COL_BYTES, 7);
	for (int i = 0; ok && i < COLS_N; i++) {
		char nm[16];
		snprintf(nm, sizeof nm, "col%d", i);
		ok = (c->a[i] = stg_token(&c->s, nm)) != 0;
		c->w[i].attribute.token = c->a[i];
		c->w[i].attribute.string.ptr = NULL;
		c->w[i].attribute.string.length = 0;
		c->w[i].data = stg_fdata(&c->ft[i], c->src + (size_t)i * COLS_ROWS, COLS_ROWS, 1);
	}
	return ok;
}

static inline uint64_t tick(bool timed)
{
	return timed ? now_ns() : 0;
}

/* One step; adds its phases to *p when p is not NULL (no clock is read otherwise). False on a
 * failure (reported on stderr). */
static bool colstep(colctx *c, colparts *p)
{
	bool timed = p != NULL;
	uint64_t t0 = tick(timed);
	uint64_t n = ++c->ord;
	if (!stg_wait(&c->s, ovstage_write_attributes(c->s.st, c->q, c->w, COLS_N, n, OVSTAGE_PRIM_MODE_UPSERT),
		      "write_attributes"))
		return false;
	uint64_t t1 = tick(timed);
	if (!stg_seal(&c->s, n))
		return false;
	uint64_t t2 = tick(timed);
	ovstage_read_handle_t rh = OVSTAGE_INVALID_READ_HANDLE;
	ovstage_ordinal_range_t range = { 0, n, false };
	if (!stg_wait(&c->s, ovstage_read_attributes(c->s.st, c->q, c->a, COLS_N, range, &rh), "read_attributes"))
		return false;
	uint64_t t3 = tick(timed), tf = 0, trg = 0;
	int groups = 0;
	for (;;) {
		ovstage_read_group_t g;
		uint64_t f0 = tick(timed);
		if (ovstage_fetch_read_next(c->s.st, rh, OVSTAGE_TIMEOUT_INFINITE, &g) != OVSTAGE_OK)
			break;
		uint64_t f1 = tick(timed);
		if (g.data.tensor_count && g.data.tensors[0].data)
			c->sum += *(const unsigned char *)g.data.tensors[0].data;
		uint64_t f2 = tick(timed);
		ovstage_release_group(c->s.st, &g);
		uint64_t f3 = tick(timed);
		tf += f1 - f0;
		trg += f3 - f2;
		groups++;
	}
	uint64_t t4 = tick(timed);
	bool ok = stg_wait(&c->s, ovstage_release_read(c->s.st, rh), "release_read");
	uint64_t t5 = tick(timed);
	if (groups != COLS_N) {
		fprintf(stderr, "ovstage_bench_stage: columns: %d groups, expected %d\n", groups, COLS_N);
		return false;
	}
	if (p) {
		p->write += t1 - t0;
		p->seal += t2 - t1;
		p->read += t3 - t2;
		p->fetch += tf;
		p->release_group += trg;
		p->release_read += t5 - t4;
	}
	return ok;
}

/* The peer's step: the same 100 copies, bare. */
static void barestep(colctx *c)
{
	for (int i = 0; i < COLS_N; i++)
		memcpy(c->dst + (size_t)i * COLS_ROWS, c->src + (size_t)i * COLS_ROWS, COL_BYTES);
	__asm__ __volatile__("" ::"r"(c->dst) : "memory");
}

void rows_columns(const bench_opts *o)
{
	colctx c;
	if (!colctx_open(&c)) {
		colctx_close(&c);
		table_row("100 columns × 4096 rows write + seal + latest read, per step", "n/a", "100 × memcpy of 16 KiB",
			  "n/a", "n/a", "— (info)", "—");
		return;
	}
	const char *cnt = getenv("OVSTAGE_BENCH_COLUMNS_STEPS");
	long count = cnt ? atol(cnt) : 0;
	if (count > 0) { /* callgrind: a fixed warm-up, then exactly `count` steps */
		bool ok = true;
		for (int i = 0; ok && i < 200; i++)
			ok = colstep(&c, NULL);
		for (long i = 0; ok && i < count; i++)
			ok = colstep(&c, NULL);
		printf("columns steps=%ld ok=%d sum=%llu\n", count, ok, (unsigned long long)c.sum);
		colctx_close(&c);
		return;
	}
	const int steps = o->quick ? 1000 : 4000;
	double best_o = 0, best_b = 0;
	colparts best_p = { 0 };
	bool ok = true;
	for (int i = 0; ok && i < 200; i++) /* rows created, buffers pooled, caches warm */
		ok = colstep(&c, NULL);
	for (int r = 0; ok && r < o->reps; r++) {
		uint64_t t0 = now_ns();
		for (int i = 0; i < steps; i++)
			barestep(&c);
		double b = (double)(now_ns() - t0) / 1e3 / steps;
		colparts p = { 0 };
		t0 = now_ns();
		for (int i = 0; ok && i < steps; i++)
			ok = colstep(&c, &p);
		double us = (double)(now_ns() - t0) / 1e3 / steps;
		if (!best_b || b < best_b)
			best_b = b;
		if (ok && (!best_o || us < best_o)) {
			best_o = us;
			best_p = p;
		}
		progress("columns rep %d: ours %.1f µs/step, bare %.1f µs/step", r + 1, us, b);
	}
	bool known = ok && best_o > 0 && best_b > 0;
	table_row("100 columns × 4096 rows write + seal + latest read, per step", known ? fmt("%.1f µs", best_o) : "n/a",
		  "100 × memcpy of 16 KiB (the step's bare copies)", known ? fmt("%.1f µs", best_b) : "n/a",
		  known ? fmt("%.2f× bare", best_o / best_b) : "n/a", "— (info)", "—");
	if (known) {
		double k = 1e3 * steps;
		note("columns step (100 × 4096 f32, per step, mean of the best repetition): write op %.1f µs, seal %.1f µs, "
		     "read op %.1f µs, fetches %.1f µs, group releases %.1f µs, release_read %.1f µs; per column %.2f µs "
		     "(bare copy %.2f µs)",
		     (double)best_p.write / k, (double)best_p.seal / k, (double)best_p.read / k, (double)best_p.fetch / k,
		     (double)best_p.release_group / k, (double)best_p.release_read / k, best_o / COLS_N, best_b / COLS_N);
	}
	colctx_close(&c);
}
