/*
 * rows_bulk.c — big columns on one stage whose query holds P prims (16 M; --quick: 1 M):
 *  - full-column copy-in write of P × float32x4 (256 MiB) beside memcpy into pre-faulted memory
 *    (one thread) and a 2-thread non-temporal copy; only the write op is timed (enqueue → wait
 *    return), after warm-up writes;
 *  - sparse writes of 1 % of the rows of a P-row float32 column (64 MiB): one contiguous block
 *    (through a mask, and through a narrower query over the block) and scattered uniformly (a mask
 *    with every 100th row), beside the full write of the same column; the write op alone and the
 *    write + its seal (the seal builds the new version);
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

static void sparse_writes(big *b, const bench_opts *o, ovx_token_t *out_attr)
{
	size_t P = b->P, bytes = P * sizeof(float);
	size_t K = P / 100, first = P / 2;
	size_t words = (P + 63) / 64;
	float *src = alloc_prefaulted(bytes);
	uint64_t *mblock = calloc(words, sizeof *mblock), *mscat = calloc(words, sizeof *mscat);
	ovx_token_t attr = stg_token(&b->s, "sparse_f32");
	ovx_primpath_list_t blist;
	ovstage_query_handle_t qb = OVSTAGE_INVALID_QUERY_HANDLE;
	*out_attr = 0;
	if (!src || !mblock || !mscat || !attr)
		goto out;
	fill_pattern(src, bytes, 2);
	size_t nscat = 0;
	for (size_t i = first; i < first + K; i++)
		mblock[i / 64] |= (uint64_t)1 << (i % 64);
	for (size_t i = 0; i < P; i += 100, nscat++)
		mscat[i / 64] |= (uint64_t)1 << (i % 64);
	qb = stg_query_range(&b->s, "big", first, K, &blist);
	uint64_t t0 = now_ns();
	bool ok = qb != OVSTAGE_INVALID_QUERY_HANDLE && timed_write(b, b->q, attr, src, P, 1, NULL) && timed_seal(b);
	ok = ok && timed_write(b, b->q, attr, src, P, 1, NULL) && timed_seal(b); /* warm-up */
	progress("sparse: setup (block query of %zu prims, first writes) %.0f ms", K, (double)(now_ns() - t0) / 1e6);
	enum { FULL, BLOCK_MASK, BLOCK_QUERY, SCATTER, N };
	uint64_t w[N] = { 0 }, ws[N] = { 0 }, sl[N] = { 0 };
	const char *names[N] = { "full", "block (mask)", "block (query)", "scattered (mask)" };
	for (int r = 0; ok && r < o->reps; r++) {
		for (int k = 0; ok && k < N; k++) {
			uint64_t tw;
			switch (k) {
			case FULL: tw = timed_write(b, b->q, attr, src, P, 1, NULL); break;
			case BLOCK_MASK: tw = timed_write(b, b->q, attr, src, P, 1, mblock); break;
			case BLOCK_QUERY: tw = timed_write(b, qb, attr, src + first, K, 1, NULL); break;
			default: tw = timed_write(b, b->q, attr, src, P, 1, mscat); break;
			}
			uint64_t ts = timed_seal(b);
			ok = tw && ts;
			keep_min(&w[k], tw);
			keep_min(&ws[k], tw + ts);
			keep_min(&sl[k], ts);
			progress("sparse rep %d %-16s: write %.2f ms, seal %.2f ms", r + 1, names[k], (double)tw / 1e6,
				 (double)ts / 1e6);
		}
	}
	const char *col = fmt("%s float32 column (%zu rows)", size_str(bytes), P);
	struct {
		int k;
		const char *label;
		size_t rows;
		double target; /* fraction of full; < 0: strictly below 1 */
	} rs[3] = {
		{ BLOCK_MASK, "1 %% contiguous block through a mask", K, 0.05 },
		{ BLOCK_QUERY, "1 %% contiguous block through a narrower query", K, 0.05 },
		{ SCATTER, "1 %% scattered uniformly (every 100th row, mask)", nscat, -1 },
	};
	for (int i = 0; i < 3; i++) {
		int k = rs[i].k;
		for (int seal = 0; seal < 2; seal++) {
			uint64_t ours = seal ? ws[k] : w[k], full = seal ? ws[FULL] : w[FULL];
			bool known = ours && full;
			double f = known ? (double)ours / (double)full : 0;
			bool okk = rs[i].target < 0 ? f < 1.0 : f <= rs[i].target;
			table_row(fmt("sparse write, %s, %zu rows of a %s, %s", fmt(rs[i].label, 0), rs[i].rows, col,
				      seal ? "write + seal" : "write op"),
				  ms(ours), seal ? "full write + seal of the same column" : "full write of the same column",
				  ms(full), known ? fmt("%.1f %% of full", 100.0 * f) : "n/a",
				  rs[i].target < 0 ? "< 100 % of full" : "≤ 5 % of full", met(known, okk));
		}
	}
	note("sparse writes: the seal alone (best): full %.2f ms, block (mask) %.2f ms, block (query) %.2f ms, "
	     "scattered (mask) %.2f ms; a masked write is validated and mapped element by element over all %zu "
	     "elements of the query, the narrower query only over its %zu",
	     (double)sl[FULL] / 1e6, (double)sl[BLOCK_MASK] / 1e6, (double)sl[BLOCK_QUERY] / 1e6,
	     (double)sl[SCATTER] / 1e6, P, K);
	*out_attr = ok ? attr : 0;
out:
	if (qb != OVSTAGE_INVALID_QUERY_HANDLE)
		stg_release_query(&b->s, qb, blist);
	free(mblock);
	free(mscat);
	free_prefaulted(src, bytes);
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
				if (stg_read_latest(&b->s, cs[i].q, &cs[i].attr, 1, b->ord - 1, &sum) != 1) {
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
			  o50 >= 0 && l50 > 0 ? fmt("%.0f× LMDB", o50 / l50) : "n/a", "≤ 5 µs, flat in size",
			  met(o50 >= 0, o50 <= 5.0));
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
