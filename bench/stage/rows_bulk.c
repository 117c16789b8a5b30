/*
 * rows_bulk.c — big columns on one stage whose query holds P prims (16 M; --quick: 1 M):
 *  - full-column copy-in write of P × float32x4 (256 MiB) beside memcpy into pre-faulted memory
 *    (one thread) and a 2-thread non-temporal copy; only the write op is timed (enqueue → wait
 *    return), after warm-up writes;
 *  - sparse writes of 1 % of the rows of a P-row float32 column (64 MiB): one contiguous block
 *    (through a mask, and through a narrower query over the block) and scattered uniformly (a mask
 *    with every 100th row), beside the full write of the same column; the write op alone and the
 *    write + its seal (the seal builds the new version); once as a steady stream of one pattern
 *    (the targets) and once alternating with full writes (the worst case, for information);
 *  - latest-read latency of sealed columns of 1 MiB (a 256 Ki-prim query), P × 4 B and P × 16 B,
 *    beside an LMDB read transaction + get of one value of the same size.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef struct big {
	stg s;
	uint64_t ord; /* next ordinal to write; everything below is sealed */
	size_t P;     /* prims of the main query */
	ovx_primpath_list_t list;
	ovstage_query_handle_t q;
} big;

/* Writes data (rows × lanes float32, optional mask over `rows` elements) at b->ord; returns the
 * enqueue → wait-return time, 0 on failure. */
static uint64_t timed_write(big *b, ovstage_query_handle_t q, ovx_token_t attr, void *data, size_t rows, int lanes,
			    const uint64_t *mask)
{
	ftensor ft;
	ovstage_write_data_t w = stg_fdata(&ft, data, (int64_t)rows, lanes);
	if (mask) {
		w.mask = mask;
		w.count = (uint32_t)rows;
	}
	ovx_string_or_token_t a = { attr, { NULL, 0 } };
	uint64_t t0 = now_ns();
	bool ok = stg_wait(&b->s, ovstage_write_attribute(b->s.st, q, a, b->ord, w, OVSTAGE_PRIM_MODE_UPSERT), "write");
	uint64_t t = now_ns() - t0;
	return ok ? (t ? t : 1) : 0;
}

/* Seals b->ord (advance_write_floor ALL + wait) and moves to the next ordinal; returns its time. */
static uint64_t timed_seal(big *b)
{
	uint64_t t0 = now_ns();
	bool ok = stg_seal(&b->s, b->ord);
	uint64_t t = now_ns() - t0;
	b->ord++;
	return ok ? (t ? t : 1) : 0;
}

static void keep_min(uint64_t *best, uint64_t v)
{
	if (v && (!*best || v < *best))
		*best = v;
}

static const char *size_str(size_t bytes)
{
	return bytes >= MIB ? fmt("%zu MiB", bytes / MIB) : fmt("%zu KiB", bytes >> 10);
}

static const char *gbs(size_t bytes, uint64_t ns)
{
	return ns ? fmt("%.2f GB/s (%.1f ms)", (double)bytes / (double)ns, (double)ns / 1e6) : "n/a";
}

static const char *ms(uint64_t ns)
{
	return ns ? fmt("%.2f ms", (double)ns / 1e6) : "n/a";
}

/* ---- full-column copy-in write ---- */

static void full_write(big *b, const bench_opts *o, ovx_token_t *out_attr)
{
	const int lanes = 4;
	size_t bytes = b->P * lanes * sizeof(float);
	float *src = alloc_prefaulted(bytes), *dst = alloc_prefaulted(bytes);
	ovx_token_t attr = stg_token(&b->s, "full_f32x4");
	*out_attr = 0;
	if (!src || !dst || !attr)
		goto out;
	fill_pattern(src, bytes, 1);
	uint64_t t0 = now_ns();
	uint64_t first = timed_write(b, b->q, attr, src, b->P, lanes, NULL);
	bool ok = first && timed_seal(b);
	progress("full write: first write (creates %zu rows) %.0f ms, + seal %.0f ms", b->P, (double)first / 1e6,
		 (double)(now_ns() - t0 - first) / 1e6);
	ok = ok && timed_write(b, b->q, attr, src, b->P, lanes, NULL) && timed_seal(b); /* warm-up */
	uint64_t w_best = 0, m_best = 0, nt_best = 0, seal_best = 0;
	for (int r = 0; ok && r < o->reps; r++) {
		uint64_t w = timed_write(b, b->q, attr, src, b->P, lanes, NULL);
		uint64_t s = timed_seal(b);
		uint64_t m = memcpy_ns(dst, src, bytes);
		uint64_t nt = memcpy_nt_threads_ns(dst, src, bytes, 2);
		ok = w && s;
		keep_min(&w_best, w);
		keep_min(&seal_best, s);
		keep_min(&m_best, m);
		keep_min(&nt_best, nt);
		progress("full write %s rep %d: write op %.1f ms, seal %.1f ms; memcpy %.1f ms, 2-thread NT %.1f ms",
			 size_str(bytes), r + 1, (double)w / 1e6, (double)s / 1e6, (double)m / 1e6, (double)nt / 1e6);
	}
	const char *what = fmt("full-column copy-in write, %s (%zu prims × float32x4), write op only", size_str(bytes),
			       b->P);
	bool k = w_best && m_best;
	double ratio = k ? (double)m_best / (double)w_best : 0;
	table_row(what, gbs(bytes, w_best), "memcpy (glibc, 1 thread) into pre-faulted memory", gbs(bytes, m_best),
		  k ? fmt("%.2f× memcpy", ratio) : "n/a", "≥ 0.9× memcpy", met(k, ratio >= 0.9));
	k = w_best && nt_best;
	table_row(what, gbs(bytes, w_best), "2 threads × non-temporal stores into pre-faulted memory",
		  gbs(bytes, nt_best), k ? fmt("%.2f× 2-thread NT copy", (double)nt_best / (double)w_best) : "n/a",
		  "— (peer for \"better\")", "—");
	note("full-column write: 256 MiB is reached with lanes (%zu prims × float32x4 = 16 B rows) because creating "
	     "64 Mi prims in the path dictionary takes ~3 min here (~1–3 µs per path); the same %zu-prim query serves "
	     "the sparse and read rows. Seal of a full write (not in the figure): best %.1f ms",
	     b->P, b->P, (double)seal_best / 1e6);
	*out_attr = ok ? attr : 0;
out:
	free_prefaulted(src, bytes);
	free_prefaulted(dst, bytes);
}

/* ---- sparse writes ---- */

enum { SP_FULL, SP_BLOCK_MASK, SP_BLOCK_QUERY, SP_SCATTER, SP_N };

typedef struct sparse_ctx {
	big *b;
	ovx_token_t attr;
	ovstage_query_handle_t qb; /* the block's own query */
	float *src;
	uint64_t *mblock, *mscat;
	size_t P, K, first;
} sparse_ctx;

/* One write of pattern k at b->ord; its op time, 0 on failure. */
static uint64_t sparse_write(sparse_ctx *x, int k)
{
	switch (k) {
	case SP_FULL: return timed_write(x->b, x->b->q, x->attr, x->src, x->P, 1, NULL);
	case SP_BLOCK_MASK: return timed_write(x->b, x->b->q, x->attr, x->src, x->P, 1, x->mblock);
	case SP_BLOCK_QUERY: return timed_write(x->b, x->qb, x->attr, x->src + x->first, x->K, 1, NULL);
	default: return timed_write(x->b, x->b->q, x->attr, x->src, x->P, 1, x->mscat);
	}
}

typedef struct sp_fig {
	uint64_t w, ws, s; /* best write op, write + seal, seal */
} sp_fig;

static void keep_fig(sp_fig *f, uint64_t tw, uint64_t ts)
{
	keep_min(&f->w, tw);
	keep_min(&f->ws, tw && ts ? tw + ts : 0);
	keep_min(&f->s, ts);
}

static const char *names_sp[SP_N] = { "full", "block (mask)", "block (query)", "scattered (mask)" };

static void sparse_rows(const char *what, const sp_fig *f, const size_t *rows, const char *col, bool targets)
{
	struct {
		int k;
		const char *label;
		double target; /* fraction of full; < 0: strictly below 1 */
	} rs[3] = {
		{ SP_BLOCK_MASK, "1 %% contiguous block through a mask", 0 }, /* info: scans the query's mask */
		{ SP_BLOCK_QUERY, "1 %% contiguous block through a narrower query", 0.05 },
		{ SP_SCATTER, "1 %% scattered uniformly (every 100th row, mask)", -1 },
	};
	for (int i = 0; i < 3; i++) {
		int k = rs[i].k;
		for (int seal = 0; seal < 2; seal++) {
			uint64_t ours = seal ? f[k].ws : f[k].w, full = seal ? f[SP_FULL].ws : f[SP_FULL].w;
			bool known = ours && full;
			double r = known ? (double)ours / (double)full : 0;
			bool okk = rs[i].target < 0 ? r < 1.0 : r <= rs[i].target;
			table_row(fmt("sparse write, %s, %zu rows of a %s, %s, %s", fmt(rs[i].label, 0), rows[k], col, what,
				      seal ? "write + seal" : "write op"),
				  ms(ours), seal ? "full write + seal of the same column" : "full write of the same column",
				  ms(full), known ? fmt("%.1f %% of full", 100.0 * r) : "n/a",
				  targets && rs[i].target ? (rs[i].target < 0 ? "< 100 % of full" : "≤ 5 % of full") : "— (info)",
				  targets && rs[i].target ? met(known, okk) : "—");
		}
	}
}

static void sparse_writes(big *b, const bench_opts *o, ovx_token_t *out_attr)
{
	sparse_ctx x = { .b = b, .P = b->P, .K = b->P / 100, .first = b->P / 2, .qb = OVSTAGE_INVALID_QUERY_HANDLE };
	size_t bytes = x.P * sizeof(float), words = (x.P + 63) / 64;
	x.src = alloc_prefaulted(bytes);
	x.mblock = calloc(words, sizeof *x.mblock);
	x.mscat = calloc(words, sizeof *x.mscat);
	x.attr = stg_token(&b->s, "sparse_f32");
	ovx_primpath_list_t blist;
	*out_attr = 0;
	if (!x.src || !x.mblock || !x.mscat || !x.attr)
		goto out;
	fill_pattern(x.src, bytes, 2);
	size_t rows[SP_N] = { x.P, x.K, x.K, 0 };
	for (size_t i = x.first; i < x.first + x.K; i++)
		x.mblock[i / 64] |= (uint64_t)1 << (i % 64);
	for (size_t i = 0; i < x.P; i += 100, rows[SP_SCATTER]++)
		x.mscat[i / 64] |= (uint64_t)1 << (i % 64);
	x.qb = stg_query_range(&b->s, "big", x.first, x.K, &blist);
	uint64_t t0 = now_ns();
	bool ok = x.qb != OVSTAGE_INVALID_QUERY_HANDLE && sparse_write(&x, SP_FULL) && timed_seal(b);
	ok = ok && sparse_write(&x, SP_FULL) && timed_seal(b); /* warm-up */
	progress("sparse: setup (block query of %zu prims, first writes) %.0f ms", x.K, (double)(now_ns() - t0) / 1e6);
	/* Steady state: a stream of writes of one pattern (as a simulation writes the same subset every
	 * step), after a full write and two warm-up writes of the pattern; best of the repetitions. */
	sp_fig steady[SP_N], after[SP_N];
	memset(steady, 0, sizeof steady);
	memset(after, 0, sizeof after);
	for (int k = 0; ok && k < SP_N; k++) {
		ok = sparse_write(&x, SP_FULL) && timed_seal(b);
		for (int r = 0; ok && r < 2 + o->reps; r++) {
			uint64_t tw = sparse_write(&x, k), ts = timed_seal(b);
			ok = tw && ts;
			if (r >= 2)
				keep_fig(&steady[k], tw, ts);
			progress("sparse steady %-16s rep %d: write %.2f ms, seal %.2f ms", names_sp[k], r - 1,
				 (double)tw / 1e6, (double)ts / 1e6);
		}
	}
	/* Right after a full write: full, block (mask), block (query), scattered, repeated. The first
	 * sparse seals find the full write's buffer shared with the retained version; the scattered one
	 * then changes every chunk of a column whose chunks all belong to retained versions. */
	for (int r = 0; ok && r < o->reps; r++)
		for (int k = 0; ok && k < SP_N; k++) {
			uint64_t tw = sparse_write(&x, k), ts = timed_seal(b);
			ok = tw && ts;
			keep_fig(&after[k], tw, ts);
			progress("sparse after-full %-16s rep %d: write %.2f ms, seal %.2f ms", names_sp[k], r + 1,
				 (double)tw / 1e6, (double)ts / 1e6);
		}
	const char *col = fmt("%s float32 column (%zu rows)", size_str(bytes), x.P);
	sparse_rows("steady stream", steady, rows, col, true);
	sparse_rows("alternating with full writes", after, rows, col, false);
	note("sparse writes, steady stream — the seal alone (best): full %.2f ms, block (mask) %.2f ms, block (query) "
	     "%.2f ms, scattered (mask) %.2f ms. The contiguous block's target applies to the write through a query "
	     "of the block; through a mask over the whole query the write also reads the mask of all %zu elements "
	     "(%zu words, twice: count, then gather), which the narrower query (%zu prims) does not have",
	     (double)steady[SP_FULL].s / 1e6, (double)steady[SP_BLOCK_MASK].s / 1e6,
	     (double)steady[SP_BLOCK_QUERY].s / 1e6, (double)steady[SP_SCATTER].s / 1e6, x.P, words, x.K);
	note("sparse writes alternating with full writes (full, block, block, scattered, …) — the seal alone (best): "
	     "block (mask) %.2f ms, block (query) %.2f ms, scattered %.2f ms. The scattered write changes every chunk "
	     "while the full write's chunks are still held by the two retained versions, so its seal copies the "
	     "column once (no older copy of those rows exists to catch up)",
	     (double)after[SP_BLOCK_MASK].s / 1e6, (double)after[SP_BLOCK_QUERY].s / 1e6, (double)after[SP_SCATTER].s / 1e6);
	/* End on a full write: the read-latency rows read this column as written in full (one run). */
	ok = ok && sparse_write(&x, SP_FULL) && timed_seal(b);
	*out_attr = ok ? x.attr : 0;
out:
	if (x.qb != OVSTAGE_INVALID_QUERY_HANDLE)
		stg_release_query(&b->s, x.qb, blist);
	free(x.mblock);
	free(x.mscat);
	free_prefaulted(x.src, bytes);
}

/* ---- read latency ---- */

typedef struct rd_case {
	ovstage_query_handle_t q;
	ovx_token_t attr;
	size_t prims, bytes;
	int lanes;
} rd_case;

static void read_latency(big *b, const bench_opts *o, rd_case *cs, int n)
{
	size_t map = 0;
	for (int i = 0; i < n; i++)
		map += cs[i].bytes;
	lmdb_peer *lp = lmdb_open_peer("read", 2 * map + 64 * MIB);
	long iters_max = o->quick ? 200 : 1000;
	double budget_s = o->quick ? 0.3 : 1.0;
	long used[8] = { 0 };
	for (int i = 0; i < n; i++) {
		if (!cs[i].attr || cs[i].q == OVSTAGE_INVALID_QUERY_HANDLE)
			continue;
		if (lp) {
			void *v = alloc_prefaulted(cs[i].bytes);
			if (v) {
				fill_pattern(v, cs[i].bytes, 3);
				const void *vv = v;
				lmdb_commit(lp, 1, (uint64_t)i + 1, &vv, cs[i].bytes, 1000);
				free_prefaulted(v, cs[i].bytes);
			}
		}
		uint64_t *ns = malloc((size_t)iters_max * sizeof *ns), *lns = malloc((size_t)iters_max * sizeof *lns);
		double o50 = -1, o99 = -1, l50 = -1, l99 = -1;
		uint64_t sum = 0;
		bool ok = ns && lns;
		for (int r = 0; ok && r < o->reps; r++) {
			long k = 0;
			uint64_t start = now_ns();
			for (; k < iters_max && (k < 3 || (double)(now_ns() - start) < budget_s * 1e9); k++) {
				uint64_t t = now_ns();
				if (stg_read_latest(&b->s, cs[i].q, &cs[i].attr, 1, b->ord - 1, &sum) < 1) {
					ok = false;
					break;
				}
				ns[k] = now_ns() - t;
			}
			if (!ok)
				break;
			used[i] = k;
			double p50 = pct_us(ns, (size_t)k, 50), p99 = pct_us(ns, (size_t)k, 99);
			if (o50 < 0 || p50 < o50)
				o50 = p50;
			if (o99 < 0 || p99 < o99)
				o99 = p99;
			long m = 0;
			for (; lp && m < iters_max; m++)
				if (!(lns[m] = lmdb_read_one_ns(lp, 0, (uint64_t)i + 1, &sum)))
					break;
			if (lp && m == iters_max) {
				double a50 = pct_us(lns, (size_t)m, 50), a99 = pct_us(lns, (size_t)m, 99);
				if (l50 < 0 || a50 < l50)
					l50 = a50;
				if (l99 < 0 || a99 < l99)
					l99 = a99;
			}
			progress("read %s rep %d: %ld reads, p50 %.2f µs p99 %.2f µs; LMDB p50 %.2f µs", size_str(cs[i].bytes),
				 r + 1, k, p50, p99, l50);
		}
		table_row(fmt("latest read of a sealed column, %s (%zu prims × float32%s), p50 [p99]",
			      size_str(cs[i].bytes), cs[i].prims, cs[i].lanes > 1 ? fmt("x%d", cs[i].lanes) : ""),
			  o50 >= 0 ? fmt("%.1f µs [%.1f]", o50, o99) : "n/a",
			  "LMDB read txn + mdb_get + abort, one value of the same size",
			  l50 >= 0 ? fmt("%.2f µs [%.2f]", l50, l99) : "n/a",
			  o50 >= 0 && l50 > 0 ? fmt("%.0f× LMDB", o50 / l50) : "n/a", "≤ 1 µs [≤ 3], flat in size (issue 12)",
			  met(o50 >= 0, o50 <= 1.0 && o99 <= 3.0));
		free(ns);
		free(lns);
	}
	note("read latency: read_attributes (latest) + wait_op + fetch_read_next + release_group + release_read (+ its "
	     "wait_op); per repetition up to %ld reads or %.1f s (reads done: %ld / %ld / %ld)",
	     iters_max, budget_s, used[0], used[1], used[2]);
	lmdb_close_peer(lp);
}

void rows_bulk(const bench_opts *o)
{
	big b;
	memset(&b, 0, sizeof b);
	b.ord = 1;
	b.P = o->quick ? ((size_t)1 << 20) : ((size_t)16 << 20);
	if (!stg_open(&b.s, "bench.bulk"))
		return;
	fprintf(stderr, "big columns (%zu prims):\n", b.P);
	uint64_t setup = 0;
	b.q = stg_query(&b.s, "big", b.P, &b.list, &setup);
	progress("query of %zu prims: %.1f s", b.P, (double)setup / 1e9);
	if (b.q == OVSTAGE_INVALID_QUERY_HANDLE) {
		stg_close(&b.s);
		return;
	}
	ovx_token_t full4 = 0, sparse1 = 0;
	full_write(&b, o, &full4);
	sparse_writes(&b, o, &sparse1);
	/* 1 MiB column: a query over the first 256 Ki prims, written once and sealed */
	size_t small = (size_t)1 << 18;
	ovx_primpath_list_t slist;
	ovstage_query_handle_t qs = stg_query_range(&b.s, "big", 0, small, &slist);
	ovx_token_t r1 = stg_token(&b.s, "read_1mib");
	float *src = alloc_prefaulted(small * sizeof(float));
	if (src && qs != OVSTAGE_INVALID_QUERY_HANDLE && r1) {
		fill_pattern(src, small * sizeof(float), 4);
		if (!timed_write(&b, qs, r1, src, small, 1, NULL) || !timed_seal(&b))
			r1 = 0;
	}
	free_prefaulted(src, small * sizeof(float));
	rd_case cs[3] = {
		{ qs, r1, small, small * sizeof(float), 1 },
		{ b.q, sparse1, b.P, b.P * sizeof(float), 1 },
		{ b.q, full4, b.P, b.P * 4 * sizeof(float), 4 },
	};
	fprintf(stderr, "read latency:\n");
	read_latency(&b, o, cs, 3);
	if (qs != OVSTAGE_INVALID_QUERY_HANDLE)
		stg_release_query(&b.s, qs, slist);
	uint64_t t0 = now_ns();
	stg_release_query(&b.s, b.q, b.list);
	stg_close(&b.s);
	progress("teardown %.1f s", (double)(now_ns() - t0) / 1e9);
}
