/*
 * rows_commit.c — per-ordinal commits against LMDB, and producer scaling.
 *
 * Ours, per ordinal: write_attributes of 8 columns at the ordinal, advance_write_floor(ordinal)
 * (scope ALL), wait for the seal (it depends on the write), release both ops. LMDB, per ordinal:
 * one write transaction that puts the same 8 values under (column, ordinal), deletes ordinal - 2
 * (the retention) and commits. Each side runs for a fixed wall time per repetition; the rate is
 * commits per second. A 1 MiB column is 65536 prims × float32x4 (16 B rows); 4 KiB is 256 prims ×
 * float32x4.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { NCOLS = 8, LANES = 4, KEEP = 2 };

typedef struct cctx {
	stg s;
	ovstage_query_handle_t q;
	ovx_primpath_list_t list;
	ovx_token_t cols[NCOLS];
	size_t prims, bytes;
	void *src[NCOLS];
	uint64_t ord; /* next ordinal (producer side) */
} cctx;

static bool cctx_open(cctx *c, const char *name, size_t bytes)
{
	memset(c, 0, sizeof *c);
	c->bytes = bytes;
	c->prims = bytes / (LANES * sizeof(float));
	c->ord = 1;
	if (!stg_open(&c->s, name))
		return false;
	char pre[32];
	snprintf(pre, sizeof pre, "%s_p", name);
	for (size_t i = 0; pre[i]; i++)
		if (pre[i] == '.')
			pre[i] = '_';
	c->q = stg_query(&c->s, pre, c->prims, &c->list, NULL);
	bool ok = c->q != OVSTAGE_INVALID_QUERY_HANDLE;
	for (int i = 0; ok && i < NCOLS; i++) {
		char nm[16];
		snprintf(nm, sizeof nm, "c%d", i);
		c->cols[i] = stg_token(&c->s, nm);
		c->src[i] = alloc_prefaulted(bytes);
		ok = c->cols[i] && c->src[i];
		if (ok)
			fill_pattern(c->src[i], bytes, (uint32_t)i);
	}
	return ok;
}

static void cctx_close(cctx *c)
{
	if (c->q != OVSTAGE_INVALID_QUERY_HANDLE)
		stg_release_query(&c->s, c->q, c->list);
	stg_close(&c->s);
	for (int i = 0; i < NCOLS; i++)
		free_prefaulted(c->src[i], c->bytes);
}

/* Enqueues the 8-column write at ordinal n, from the copy-in sources or from managed tensors. */
static ovstage_enqueue_result_t enqueue_write(cctx *c, uint64_t n, DLManagedTensorVersioned **managed)
{
	ftensor ft[NCOLS];
	ovstage_attribute_write_t w[NCOLS];
	const DLManagedTensorVersioned *mt[NCOLS];
	for (int i = 0; i < NCOLS; i++) {
		w[i].attribute.token = c->cols[i];
		w[i].attribute.string.ptr = NULL;
		w[i].attribute.string.length = 0;
		w[i].data = stg_fdata(&ft[i], c->src[i], (int64_t)c->prims, LANES);
		if (managed) {
			mt[i] = managed[i];
			w[i].data.tensors = NULL;
			w[i].data.managed_tensors = &mt[i];
		}
	}
	return ovstage_write_attributes(c->s.st, c->q, w, NCOLS, n, OVSTAGE_PRIM_MODE_UPSERT);
}

/* One synchronous commit: write + seal + wait. */
static bool commit_one(cctx *c, DLManagedTensorVersioned **managed)
{
	uint64_t n = c->ord++;
	ovstage_enqueue_result_t we = enqueue_write(c, n, managed);
	if (we.status != OVSTAGE_OK)
		return stg_wait(&c->s, we, "write_attributes");
	ovstage_write_floor_desc_t d = { n, OVSTAGE_SCOPE_ALL, NULL, 0 };
	bool ok = stg_wait(&c->s, ovstage_advance_write_floor(c->s.st, &d), "advance_write_floor");
	ovstage_release_op(c->s.st, we.op_index); /* done: the seal depended on it */
	return ok;
}

/* ---- managed tensors: a pool of buffers recycled by the deleter ---- */

typedef struct mpool mpool;
typedef struct mbuf {
	DLManagedTensorVersioned mt; /* first: the deleter gets &mt */
	int64_t shape;
	mpool *pool;
	struct mbuf *next;
} mbuf;

struct mpool {
	pthread_mutex_t lock;
	mbuf *free;
	mbuf *all;
	int n;
	size_t bytes;
	_Atomic long deleted;
};

static void mbuf_deleter(DLManagedTensorVersioned *self)
{
	mbuf *b = (mbuf *)(void *)self;
	mpool *p = b->pool;
	pthread_mutex_lock(&p->lock);
	b->next = p->free;
	p->free = b;
	pthread_mutex_unlock(&p->lock);
	atomic_fetch_add_explicit(&p->deleted, 1, memory_order_relaxed);
}

static bool mpool_init(mpool *p, int n, size_t bytes, size_t prims)
{
	memset(p, 0, sizeof *p);
	pthread_mutex_init(&p->lock, NULL);
	p->all = calloc((size_t)n, sizeof *p->all);
	if (!p->all)
		return false;
	p->n = n;
	p->bytes = bytes;
	for (int i = 0; i < n; i++) {
		mbuf *b = &p->all[i];
		void *data = alloc_prefaulted(bytes);
		if (!data)
			return false;
		fill_pattern(data, bytes, (uint32_t)i);
		b->pool = p;
		b->shape = (int64_t)prims;
		b->mt.version.major = 1;
		b->mt.dl_tensor.data = data;
		b->mt.dl_tensor.device.device_type = kDLCPU;
		b->mt.dl_tensor.ndim = 1;
		b->mt.dl_tensor.dtype.code = kDLFloat;
		b->mt.dl_tensor.dtype.bits = 32;
		b->mt.dl_tensor.dtype.lanes = LANES;
		b->mt.dl_tensor.shape = &b->shape;
		b->mt.deleter = mbuf_deleter;
		b->next = p->free;
		p->free = b;
	}
	return true;
}

static mbuf *mpool_get(mpool *p, long *stalls)
{
	for (;;) {
		pthread_mutex_lock(&p->lock);
		mbuf *b = p->free;
		if (b)
			p->free = b->next;
		pthread_mutex_unlock(&p->lock);
		if (b)
			return b;
		++*stalls;
		sched_yield();
	}
}

/* Every buffer must be back (the stage destroyed) before this. */
static void mpool_fini(mpool *p)
{
	if (p->all)
		for (int i = 0; i < p->n; i++)
			free_prefaulted(p->all[i].mt.dl_tensor.data, p->bytes);
	free(p->all);
	pthread_mutex_destroy(&p->lock);
}

/* ---- the reader thread of case (b) ---- */

typedef struct reader {
	cctx *c;          /* ours, or NULL for LMDB */
	lmdb_peer *lp;    /* LMDB, or NULL */
	_Atomic uint64_t latest; /* last committed ordinal (0 = none yet) */
	_Atomic bool stop;
	long reads, misses;
	uint64_t sum;
} reader;

static void *reader_main(void *arg)
{
	reader *r = arg;
	while (!atomic_load_explicit(&r->stop, memory_order_acquire)) {
		uint64_t n = atomic_load_explicit(&r->latest, memory_order_acquire);
		if (!n) {
			sched_yield();
			continue;
		}
		int got = r->c ? stg_read_latest(&r->c->s, r->c->q, r->c->cols, NCOLS, n, &r->sum)
			       : lmdb_read(r->lp, NCOLS, n, &r->sum);
		if (got == NCOLS)
			r->reads++;
		else
			r->misses++;
	}
	return NULL;
}

/* ---- one timed run of each side ---- */

typedef struct run_result {
	double rate;       /* commits per second */
	double read_rate;  /* reader: complete reads per second */
	long misses;       /* reader: reads that found the ordinal gone (or failed) */
	long stalls;       /* managed: waits for a free buffer */
} run_result;

static run_result run_ours(cctx *c, double secs, mpool *pool, bool with_reader)
{
	run_result res = { -1, -1, 0, 0 };
	reader rd;
	memset(&rd, 0, sizeof rd);
	rd.c = c;
	pthread_t th;
	bool reading = with_reader && pthread_create(&th, NULL, reader_main, &rd) == 0;
	long n = 0;
	bool ok = true;
	uint64_t t0 = now_ns(), t1;
	do {
		DLManagedTensorVersioned *mt[NCOLS];
		if (pool)
			for (int i = 0; i < NCOLS; i++)
				mt[i] = &mpool_get(pool, &res.stalls)->mt;
		ok = commit_one(c, pool ? mt : NULL);
		if (reading)
			atomic_store_explicit(&rd.latest, c->ord - 1, memory_order_release);
		n++;
		t1 = now_ns();
	} while (ok && (double)(t1 - t0) < secs * 1e9);
	if (reading) {
		atomic_store(&rd.stop, true);
		pthread_join(th, NULL);
		res.read_rate = (double)rd.reads / ((double)(now_ns() - t0) / 1e9);
		res.misses = rd.misses;
	}
	if (ok)
		res.rate = (double)n / ((double)(t1 - t0) / 1e9);
	return res;
}

static run_result run_lmdb(lmdb_peer *lp, cctx *c, double secs, uint64_t *lord, bool with_reader)
{
	run_result res = { -1, -1, 0, 0 };
	if (!lp)
		return res;
	reader rd;
	memset(&rd, 0, sizeof rd);
	rd.lp = lp;
	pthread_t th;
	bool reading = with_reader && pthread_create(&th, NULL, reader_main, &rd) == 0;
	const void *vals[NCOLS];
	for (int i = 0; i < NCOLS; i++)
		vals[i] = c->src[i];
	long n = 0;
	bool ok = true;
	uint64_t t0 = now_ns(), t1;
	do {
		uint64_t o = (*lord)++;
		ok = lmdb_commit(lp, NCOLS, o, vals, c->bytes, KEEP);
		if (reading)
			atomic_store_explicit(&rd.latest, o, memory_order_release);
		n++;
		t1 = now_ns();
	} while (ok && (double)(t1 - t0) < secs * 1e9);
	if (reading) {
		atomic_store(&rd.stop, true);
		pthread_join(th, NULL);
		res.read_rate = (double)rd.reads / ((double)(now_ns() - t0) / 1e9);
		res.misses = rd.misses;
	}
	if (ok)
		res.rate = (double)n / ((double)(t1 - t0) / 1e9);
	return res;
}

static void keep_best(run_result *best, run_result r)
{
	if (r.rate > best->rate) {
		best->rate = r.rate;
		best->misses = r.misses;
		best->stalls = r.stalls;
	}
	if (r.read_rate > best->read_rate)
		best->read_rate = r.read_rate;
}

static const char *rate_str(double r)
{
	return r < 0 ? "n/a" : r >= 10000 ? fmt("%.1f k/s", r / 1000) : fmt("%.0f /s", r);
}

/* One LMDB comparison row (a, b or c). */
static void lmdb_case(const bench_opts *o, char which, size_t bytes, bool managed, bool with_reader, double target)
{
	double secs = o->quick ? 0.3 : 1.0;
	cctx c;
	char name[32];
	snprintf(name, sizeof name, "commit.%c", which);
	mpool pool;
	bool have_pool = false;
	run_result ours = { -1, -1, 0, 0 }, peer = { -1, -1, 0, 0 };
	if (!cctx_open(&c, name, bytes))
		goto out;
	if (managed) {
		have_pool = mpool_init(&pool, NCOLS * 6, bytes, c.prims);
		if (!have_pool)
			goto out;
	}
	lmdb_peer *lp = lmdb_open_peer(name, 512 * MIB);
	uint64_t lord = 1;
	/* warm-up: rows created, buffers faulted, LMDB pages allocated */
	run_ours(&c, secs / 4, have_pool ? &pool : NULL, false);
	run_lmdb(lp, &c, secs / 4, &lord, false);
	for (int r = 0; r < o->reps; r++) {
		run_result a = run_ours(&c, secs, have_pool ? &pool : NULL, with_reader);
		run_result b = run_lmdb(lp, &c, secs, &lord, with_reader);
		keep_best(&ours, a);
		keep_best(&peer, b);
		progress("(%c) rep %d: ours %.0f commits/s (reads %.0f/s, misses %ld, stalls %ld); LMDB %.0f commits/s "
			 "(reads %.0f/s, misses %ld)",
			 which, r + 1, a.rate, a.read_rate, a.misses, a.stalls, b.rate, b.read_rate, b.misses);
	}
	lmdb_close_peer(lp);
	const char *label;
	if (which == 'a')
		label = fmt("(a) per-ordinal commit, 8 columns × %s copy-in (write_attributes + advance_write_floor + wait)",
			    bytes >= MIB ? fmt("%zu MiB", bytes / MIB) : fmt("%zu KiB", bytes >> 10));
	else if (which == 'b')
		label = fmt("(b) per-ordinal commit, 8 columns × %zu KiB, one reader thread reading the latest ordinal "
			    "in a loop", bytes >> 10);
	else
		label = fmt("(c) per-ordinal commit, 8 columns × %zu MiB as managed tensors (adopted, no copy)",
			    bytes / MIB);
	bool known = ours.rate > 0 && peer.rate > 0;
	double ratio = known ? ours.rate / peer.rate : 0;
	table_row(label, rate_str(ours.rate),
		  fmt("LMDB, 1 write txn per ordinal (8 puts + %s deletes, commit)%s", "8",
		      with_reader ? "; reader: read txn + 8 gets of the latest ordinal" : ""),
		  rate_str(peer.rate), known ? fmt("%.2f× LMDB", ratio) : "n/a", fmt("≥ %.1f× LMDB", target),
		  met(known, ratio >= target));
	if (with_reader)
		table_row("(b) reader thread during the commits: complete 8-column reads of the latest ordinal",
			  ours.read_rate >= 0 ? fmt("%s (%ld misses)", rate_str(ours.read_rate), ours.misses) : "n/a",
			  "LMDB reader thread", peer.read_rate >= 0 ? fmt("%s (%ld misses)", rate_str(peer.read_rate),
									  peer.misses) : "n/a",
			  ours.read_rate > 0 && peer.read_rate > 0 ? fmt("%.2f× LMDB", ours.read_rate / peer.read_rate)
								   : "n/a",
			  "— (info)", "—");
	if (managed)
		note("(c) managed: a pool of %d buffers of %zu MiB recycled by the deleter (it runs when a version leaves "
		     "retention); the producer waited for a free buffer %ld times in the best repetition; neither side "
		     "rewrites the bytes between ordinals (LMDB copies them into its map, the stage adopts them)",
		     NCOLS * 6, bytes / MIB, ours.stalls);
out:
	cctx_close(&c);
	if (have_pool)
		mpool_fini(&pool); /* after the stage: every adopted buffer came back through its deleter */
}

/* ---- scaling: T producer threads + one sealer thread ---- */

typedef struct scale {
	cctx *c;
	_Atomic uint64_t next;     /* next ordinal to take */
	_Atomic bool *submitted;   /* submitted[n]: the write at n was enqueued */
	uint64_t cap;              /* entries in submitted */
	_Atomic bool stop_taking;
	_Atomic uint64_t taken_max; /* highest ordinal taken */
	_Atomic int failed;
} scale;

static void *producer_main(void *arg)
{
	scale *sc = arg;
	cctx *c = sc->c;
	while (!atomic_load_explicit(&sc->stop_taking, memory_order_acquire)) {
		uint64_t n = atomic_fetch_add(&sc->next, 1);
		if (n >= sc->cap) {
			atomic_fetch_sub(&sc->next, 1);
			break;
		}
		uint64_t m = atomic_load(&sc->taken_max);
		while (n > m && !atomic_compare_exchange_weak(&sc->taken_max, &m, n))
			;
		ovstage_enqueue_result_t e = enqueue_write(c, n, NULL);
		atomic_store_explicit(&sc->submitted[n], true, memory_order_release);
		if (!stg_wait(&c->s, e, "write_attributes"))
			atomic_store(&sc->failed, 1);
	}
	return NULL;
}

/* Returns ordinals sealed per second with `producers` threads over ~secs of production. */
static double run_scaling(cctx *c, int producers, double secs)
{
	scale sc;
	memset(&sc, 0, sizeof sc);
	sc.c = c;
	sc.cap = c->ord + 1000000;
	sc.submitted = calloc(sc.cap + 1, sizeof *sc.submitted);
	if (!sc.submitted)
		return -1;
	uint64_t first = c->ord;
	atomic_store(&sc.next, first);
	atomic_store(&sc.taken_max, first - 1);
	pthread_t th[4];
	uint64_t t0 = now_ns();
	int started = 0;
	for (int i = 0; i < producers && i < 4; i++)
		if (pthread_create(&th[i], NULL, producer_main, &sc) == 0)
			started++;
	/* this thread is the sealer: seal the longest prefix whose writes were all enqueued */
	uint64_t sealed = first - 1;
	bool stopping = false;
	for (;;) {
		if (!stopping && (double)(now_ns() - t0) >= secs * 1e9) {
			atomic_store(&sc.stop_taking, true);
			for (int i = 0; i < started; i++)
				pthread_join(th[i], NULL);
			stopping = true;
		}
		uint64_t target = sealed;
		while (target + 1 < sc.cap && atomic_load_explicit(&sc.submitted[target + 1], memory_order_acquire))
			target++;
		if (target > sealed) {
			if (!stg_seal(&c->s, target))
				atomic_store(&sc.failed, 1);
			sealed = target;
		} else if (stopping) {
			break;
		} else {
			sched_yield();
		}
	}
	uint64_t t1 = now_ns();
	c->ord = atomic_load(&sc.next);
	free(sc.submitted);
	if (atomic_load(&sc.failed) || sealed + 1 != c->ord)
		return -1;
	return (double)(sealed - first + 1) / ((double)(t1 - t0) / 1e9);
}

static void scaling_case(const bench_opts *o)
{
	double secs = o->quick ? 0.3 : 1.0;
	cctx c;
	double one = -1, two = -1;
	if (cctx_open(&c, "scale", MIB)) {
		run_scaling(&c, 1, secs / 4); /* warm-up */
		for (int r = 0; r < o->reps; r++) {
			double a = run_scaling(&c, 1, secs), b = run_scaling(&c, 2, secs);
			if (a > one)
				one = a;
			if (b > two)
				two = b;
			progress("scaling rep %d: 1 producer %.0f ordinals/s, 2 producers %.0f ordinals/s", r + 1, a, b);
		}
	}
	cctx_close(&c);
	bool k = one > 0 && two > 0;
	table_row("scaling: 8 columns × 1 MiB copy-in, 2 producer threads (ordinals split between them) + 1 sealer thread",
		  rate_str(two), "the same with 1 producer thread + 1 sealer thread", rate_str(one),
		  k ? fmt("%.2f× 1 producer", two / one) : "n/a", "— (info; 2 cores)", "—");
	note("scaling: producers take ordinals from a shared counter, enqueue write_attributes (8 columns) and wait for "
	     "it; the sealer thread seals the longest prefix of enqueued ordinals (advance_write_floor ALL + wait); the "
	     "rate counts sealed ordinals over the whole run, drain included");
}

void rows_commit(const bench_opts *o)
{
	fprintf(stderr, "per-ordinal commits vs LMDB:\n");
	/* OVSTAGE_BENCH_COMMIT=b runs row (b) alone (profiling, A/B runs) */
	const char *only = getenv("OVSTAGE_BENCH_COMMIT");
	if (only && strcmp(only, "b") == 0) {
		lmdb_case(o, 'b', 4096, false, true, 2.0);
		return;
	}
	lmdb_case(o, 'a', MIB, false, false, 1.3);
	lmdb_case(o, 'b', 4096, false, true, 2.0);
	lmdb_case(o, 'c', MIB, true, false, 10.0);
	fprintf(stderr, "scaling:\n");
	scaling_case(o);
}
