/*
 * chunk.c — copy-on-write chunks of fixed-size columns: building a version's chunk table from the
 * previous version and one ordinal's deltas, its runs, compaction, and spare chunks.
 *
 * Who touches what: chunk tables, spares and chunk memory are written only by the column's sealer
 * (seals of a stage run one after another). A chunk's memory is written only while no published
 * version holds it: either it is new (a copy slot, a full write's buffer), or it is a spare — a chunk
 * of a version that left retention, harvested after the grace period when nothing else holds it.
 * Reference counts are the only state shared with other threads (read groups drop versions, and
 * with them chunks, from any thread).
 */
#include <stdlib.h>
#include <string.h>

#include "chunk.h"
#include "copy.h"
#include "delta.h"
#include "errors.h"
#include "exec.h"
#include "store.h"
#include "version.h"

/* A version fragmented into more runs than this, or whose chunks keep more than this many times its
 * size in buffers alive (a chunk holds its whole buffer), is compacted into one buffer: a full copy,
 * paid once for the many sparse seals that fragmented it. */
#define OVS_MAX_RUNS 64
#define OVS_MAX_HELD_FACTOR 3

/* Process-wide statistics (tests check that each path is taken; relaxed: counters only). */
static _Atomic uint64_t g_shared, g_copied, g_replayed, g_compactions, g_replays_skipped, g_adopted;

void ovs_chunk_stats(ovs_chunk_stats_t *out)
{
	out->shared = atomic_load_explicit(&g_shared, memory_order_relaxed);
	out->copied = atomic_load_explicit(&g_copied, memory_order_relaxed);
	out->replayed = atomic_load_explicit(&g_replayed, memory_order_relaxed);
	out->compactions = atomic_load_explicit(&g_compactions, memory_order_relaxed);
	out->replays_skipped = atomic_load_explicit(&g_replays_skipped, memory_order_relaxed);
	out->adopted = atomic_load_explicit(&g_adopted, memory_order_relaxed);
}

ovs_chunk *ovs_chunk_new(ovs_store *st, ovs_buffer *buf, size_t off, uint32_t cap_rows)
{
	static_assert(sizeof(ovs_chunk) >= sizeof(void *), "a cached chunk holds its list link");
	ovs_chunk *k = ovs_recycle_get(&st->recycle.chunks, sizeof *k);
	if (!k)
		return NULL;
	atomic_init(&k->refs, 1);
	k->cap_rows = cap_rows;
	ovs_buffer_ref(buf);
	k->buf = buf;
	k->off = off;
	return k;
}

static void chunk_ref(ovs_chunk *k)
{
	/* relaxed: the sealer holds a reference through the previous version. */
	atomic_fetch_add_explicit(&k->refs, 1, memory_order_relaxed);
}

void ovs_chunk_release(ovs_chunk *k, ovs_recycle *rc)
{
	/* acq_rel: the last holder sees every reader's accesses before the memory is released. */
	if (k && atomic_fetch_sub_explicit(&k->refs, 1, memory_order_acq_rel) == 1) {
		ovs_buffer_unref(k->buf);
		ovs_recycle_put(rc ? &rc->chunks : NULL, k);
	}
}

void ovs_chunk_unref(ovs_chunk *k)
{
	ovs_chunk_release(k, NULL);
}

uint32_t ovs_chunk_shift(size_t chunk_bytes, size_t rb)
{
	/* the largest s <= 30 with 2^s rows <= per: floor(log2(per)) capped (a loop of ~20 rounds per
	 * column per seal before) */
	size_t per = rb ? chunk_bytes / rb : chunk_bytes;
	if (per < 2)
		return 0;
	uint32_t lg = 63u - (uint32_t)__builtin_clzll((unsigned long long)per);
	return lg > 30 ? 30 : lg;
}

/* Rows of chunk j in a version of `rows` rows. */
static inline uint32_t rows_in(uint32_t rows, uint32_t shift, uint32_t j)
{
	uint64_t r0 = (uint64_t)j << shift, cr = (uint64_t)1 << shift;
	return r0 >= rows ? 0 : (uint32_t)(rows - r0 < cr ? rows - r0 : cr);
}

static inline char *chunk_data(const ovs_chunk *k)
{
	return (char *)k->buf->data + k->off;
}

/* Copies bytes into chunk k's memory with its device's operations (the seal's bulk copies). */
static void chunk_copy(ovs_exec *x, const ovs_chunk *k, void *dst, const void *src, size_t bytes)
{
	k->buf->ops->copy(x, dst, src, bytes);
}

/* Rows [lo, hi) of a scattered delta of rb = 4, 8 or 16 bytes (no library call per row). Rows far
 * apart miss the cache each: the lines are fetched a few rows ahead of use. */
static void apply_rows(ovs_chunk **t, const uint8_t *how, uint8_t want, uint32_t shift, size_t rb,
		       const ovs_delta *d, uint32_t lo, uint32_t hi)
{
	enum { AHEAD = 16 };
	uint32_t mask = (1u << shift) - 1;
	for (uint32_t i = lo; i < hi; i++) {
		if (i + AHEAD < hi) {
			uint32_t ra = d->rows[i + AHEAD];
			const ovs_chunk *ka = t[ra >> shift]; /* NULL: a chunk not filled in yet (replays) */
			if (ka && (!how || how[ra >> shift] == want))
				__builtin_prefetch(chunk_data(ka) + (size_t)(ra & mask) * rb, 1);
		}
		uint32_t r = d->rows[i], j = r >> shift;
		if (how && how[j] != want)
			continue;
		char *dst = chunk_data(t[j]) + (size_t)(r & mask) * rb;
		const unsigned char *src = d->values + (size_t)i * rb;
		if (rb == 4)
			memcpy(dst, src, 4);
		else if (rb == 8)
			memcpy(dst, src, 8);
		else
			memcpy(dst, src, 16);
	}
}

/* Rows [lo, hi) of a one-block delta: a memcpy per chunk they span. */
static void apply_block(ovs_chunk **t, const uint8_t *how, uint8_t want, uint32_t shift, size_t rb,
			const ovs_delta *d, uint32_t lo, uint32_t hi)
{
	uint32_t mask = (1u << shift) - 1;
	for (uint32_t i = lo; i < hi;) {
		uint32_t r = d->rows[0] + i, j = r >> shift, e = i + ((r | mask) - r + 1);
		if (e > hi)
			e = hi;
		if (!how || how[j] == want)
			memcpy(chunk_data(t[j]) + (size_t)(r & mask) * rb, d->values + (size_t)i * rb, (size_t)(e - i) * rb);
		i = e;
	}
}

/* Rows [lo, hi) of a scattered delta of any row size: consecutive rows inside one chunk in one
 * memcpy (a run that crosses hi is finished by the next range). */
static void apply_runs(ovs_chunk **t, const uint8_t *how, uint8_t want, uint32_t shift, size_t rb,
		       const ovs_delta *d, uint32_t lo, uint32_t hi)
{
	uint32_t mask = (1u << shift) - 1;
	for (uint32_t i = lo; i < hi;) {
		uint32_t r = d->rows[i], j = r >> shift, last = r | mask, e = i + 1;
		while (e < hi && d->rows[e] == d->rows[e - 1] + 1 && d->rows[e] <= last)
			e++;
		if (!how || how[j] == want)
			memcpy(chunk_data(t[j]) + (size_t)(r & mask) * rb, d->values + (size_t)i * rb, (size_t)(e - i) * rb);
		i = e;
	}
}

typedef void (*apply_fn)(ovs_chunk **t, const uint8_t *how, uint8_t want, uint32_t shift, size_t rb,
			 const ovs_delta *d, uint32_t lo, uint32_t hi);

/* A delta applied by a parallel for (exec.h). A one-block delta's rows are consecutive and a sorted
 * one's distinct, so the ranges write disjoint rows; the stores are plain and the join orders them
 * before the seal publishes the version. */
typedef struct apply_ctx {
	apply_fn fn;            /* the delta kind's loop */
	ovs_chunk **t;          /* the version's chunk table */
	const uint8_t *how;     /* chunk marks, or NULL */
	const ovs_delta *d;     /* the delta */
	size_t rb;              /* row bytes */
	uint32_t shift;         /* log2 rows per chunk */
	uint8_t want;           /* the mark to apply to */
} apply_ctx;

static void apply_range(void *p, size_t lo, size_t hi)
{
	const apply_ctx *a = p;
	a->fn(a->t, a->how, a->want, a->shift, a->rb, a->d, (uint32_t)lo, (uint32_t)hi);
}

enum {
	APPLY_GRAIN = 16384,       /* rows per range of a parallel apply of small scattered rows */
	APPLY_PAR_BYTES = 1u << 18 /* a copying apply splits into ranges of at least this many bytes */
};

/* fn over rows [0, d->nrows): split across the workers when the delta is big enough (and its rows
 * are disjoint), else on this thread. Scattered rows of 4-16 bytes are memory-latency bound (a
 * cache miss per row) and split from 2 * APPLY_GRAIN rows; copies from 2 * APPLY_PAR_BYTES (512 KiB):
 * with several producers per ordinal the seal applies every payload byte once more, and on one
 * thread that was half of the seal's samples (docs/performance.md, session 14). */
static void apply_split(ovs_exec *x, apply_fn fn, ovs_chunk **t, const uint8_t *how, uint8_t want, uint32_t shift,
			size_t rb, const ovs_delta *d, bool copies)
{
	size_t grain = copies ? (APPLY_PAR_BYTES + rb - 1) / rb : APPLY_GRAIN;
	if (x->w && (d->contig || d->sorted) && d->nrows > 2 * grain) {
		apply_ctx a = { fn, t, how, d, rb, shift, want };
		ovs_parallel_for(x, d->nrows, grain, 1, apply_range, &a);
	} else {
		fn(t, how, want, shift, rb, d, 0, d->nrows);
	}
}

/* Copies a sparse delta's rows into the chunks of t whose mark in `how` is `want` (how == NULL: every
 * chunk the delta touches, all private to the version being built). Consecutive rows inside one
 * chunk go in one memcpy. */
/* The device form of apply_sparse: one scatter kernel over the delta's rows, with a chunk table in
 * which chunks not to be written are NULL. */
static void apply_sparse_dev(ovs_store *st, ovs_exec *x, ovs_chunk **t, uint32_t nch, const uint8_t *how, uint8_t want,
			     uint32_t shift, size_t rb, ovs_delta *d)
{
	void **bases = malloc((nch ? nch : 1) * sizeof *bases);
	const ovs_chunk *any = NULL;
	if (!bases) {
		x->err = x->err ? x->err : 2; /* cudaErrorMemoryAllocation: the seal fails */
		return;
	}
	for (uint32_t j = 0; j < nch; j++) {
		bases[j] = t[j] && (!how || how[j] == want) ? chunk_data(t[j]) : NULL;
		any = any ? any : t[j];
	}
	/* the rows stay on the device with the delta: its replays in later seals upload only the table */
	if (any)
		any->buf->ops->scatter_chunked(x, bases, nch, shift, d->rows, ovs_delta_rows_dev(st, x, d), d->nrows,
					       d->values, rb);
	free(bases);
}

static void apply_sparse(ovs_store *st, ovs_exec *x, ovs_chunk **t, uint32_t nch, const uint8_t *how, uint8_t want,
			 uint32_t shift, size_t rb, ovs_delta *d)
{
	if (x->gpu) {
		apply_sparse_dev(st, x, t, nch, how, want, shift, rb, d);
		return;
	}
	if (d->contig) /* one block: a memcpy per chunk it spans */
		apply_split(x, apply_block, t, how, want, shift, rb, d, true);
	else if (rb == 4 || rb == 8 || rb == 16) /* scattered rows of a common size: no call per row */
		apply_split(x, apply_rows, t, how, want, shift, rb, d, false);
	else
		apply_split(x, apply_runs, t, how, want, shift, rb, d, true);
}

/* Whether this ordinal's deltas rewrite every row of d: then replaying d is wasted work. Checked
 * for the case that matters, a stream writing the same rows every ordinal (an equal row list). */
static bool overwritten(const ovs_delta *d, const ovs_delta *ds)
{
	if (!d->nrows)
		return true;
	for (const ovs_delta *n = ds; n; n = n->next)
		if (n->kind == OVS_DELTA_SPARSE && n->nrows == d->nrows &&
		    (n->contig && d->contig ? n->rows[0] == d->rows[0]
					    : !memcmp(n->rows, d->rows, (size_t)d->nrows * sizeof *d->rows)))
			return true;
	return false;
}

/* Copies a full delta's rows into the chunks of t (all private: the delta marked them) whose mark in
 * `how` is `want` (how == NULL: all of them). */
static void apply_full(ovs_exec *x, ovs_chunk **t, const uint8_t *how, uint8_t want, uint32_t shift, size_t rb,
		       const ovs_delta *d)
{
	for (uint32_t j = 0; ((uint64_t)j << shift) < d->nrows; j++)
		if (!how || how[j] == want)
			chunk_copy(x, t[j], chunk_data(t[j]), (const char *)d->full->data + ((size_t)j << shift) * rb,
				   (size_t)rows_in(d->nrows, shift, j) * rb);
}

static bool adjacent(const ovs_chunk *a, const ovs_chunk *b, uint32_t shift, size_t rb)
{
	return a->buf == b->buf && a->cap_rows == (1u << shift) && b->off == a->off + ((size_t)1 << shift) * rb;
}

/* Fills v->runs from the chunk table; *held = bytes of the buffers the chunks keep alive (a buffer
 * met again after another one is counted again: an over-estimate, which only compacts earlier). */
static bool compute_runs(ovs_version *v, size_t rb, size_t *held)
{
	uint32_t shift = v->chunk_shift, n = 0;
	if (v->nchunks == 1 && v->chunks[0]) { /* one chunk, one run (a small column) */
		if (v->runs && v->runs != &v->run1)
			free(v->runs);
		v->runs = &v->run1;
		v->nruns = 1;
		v->run1 = (ovs_run){ 0, rows_in(v->rows, shift, 0), chunk_data(v->chunks[0]) };
		*held = v->chunks[0]->buf->capacity;
		return true;
	}
	for (uint32_t j = 0; j < v->nchunks; j++)
		n += j == 0 || !adjacent(v->chunks[j - 1], v->chunks[j], shift, rb);
	if (v->runs != &v->run1)
		free(v->runs);
	v->runs = NULL;
	v->nruns = 0;
	*held = 0;
	if (!n)
		return true;
	v->runs = n == 1 ? &v->run1 : malloc(n * sizeof *v->runs);
	if (!v->runs)
		return false;
	const ovs_buffer *lastbuf = NULL;
	for (uint32_t j = 0; j < v->nchunks; j++) {
		if (j && adjacent(v->chunks[j - 1], v->chunks[j], shift, rb)) {
			v->runs[v->nruns - 1].nrows += rows_in(v->rows, shift, j);
			continue;
		}
		ovs_run *r = &v->runs[v->nruns++];
		r->row0 = j << shift;
		r->nrows = rows_in(v->rows, shift, j);
		r->data = chunk_data(v->chunks[j]);
		if (v->chunks[j]->buf != lastbuf)
			*held += v->chunks[j]->buf->capacity;
		lastbuf = v->chunks[j]->buf;
	}
	return true;
}

/* Rebuilds v's chunks in one new buffer (one run). Keeps v as it is if memory is short. */
static void compact(ovs_store *st, ovs_exec *x, ovs_version *v, size_t rb)
{
	uint32_t shift = v->chunk_shift;
	size_t bytes = (size_t)v->rows * rb;
	ovs_buffer *b = ovs_buffer_new_in(st, x, bytes);
	ovs_chunk *t1 = NULL;
	ovs_chunk **t = !b ? NULL : v->nchunks == 1 ? &t1 : calloc(v->nchunks, sizeof *t);
	if (!t) {
		ovs_buffer_unref(b);
		return;
	}
	size_t cap = b->capacity / rb;
	for (uint32_t j = 0; j < v->nchunks; j++) {
		uint64_t r0 = (uint64_t)j << shift;
		t[j] = ovs_chunk_new(st, b, (size_t)r0 * rb, (uint32_t)(cap - r0 < ((uint64_t)1 << shift) ? cap - r0 : (1u << shift)));
		if (!t[j]) {
			for (uint32_t i = 0; i < j; i++)
				ovs_chunk_unref(t[i]);
			if (t != &t1)
				free(t);
			ovs_buffer_unref(b);
			return;
		}
	}
	ovs_buffer_unref(b); /* the chunks hold it */
	atomic_fetch_add_explicit(&g_compactions, 1, memory_order_relaxed);
	for (uint32_t i = 0; i < v->nruns; i++)
		b->ops->copy(x, (char *)b->data + (size_t)v->runs[i].row0 * rb, v->runs[i].data, (size_t)v->runs[i].nrows * rb);
	for (uint32_t j = 0; j < v->nchunks; j++)
		ovs_chunk_unref(v->chunks[j]);
	if (v->chunks != &v->chunk1)
		free(v->chunks);
	if (t == &t1) {
		v->chunk1 = t1;
		t = &v->chunk1;
	}
	v->chunks = t;
}

/* Whether the column's spares can be caught up to prev by replaying deltas: they hold the rows as
 * of the version that the oldest retained version was built on, and no retained version holds a
 * full delta (then copying prev's chunk costs no more than the replay). Collects the chain from
 * the oldest retained version to prev into *chain (malloc'd) for the replay. */
static bool spares_usable(const ovs_column *c, ovs_version *prev, ovs_version ***chain, size_t *nchain)
{
	*chain = NULL;
	*nchain = 0;
	if (!c->nspares || !prev)
		return false;
	size_t n = 0;
	ovs_version *oldest = NULL;
	/* relaxed: the chain is seal-owned; we are the sealer. */
	for (ovs_version *u = prev; u; u = atomic_load_explicit(&u->older, memory_order_relaxed)) {
		for (ovs_delta *d = u->deltas; d; d = d->next)
			if (d->kind == OVS_DELTA_FULL)
				return false;
		oldest = u;
		n++;
	}
	if (oldest->base_ordinal != c->spare_ordinal)
		return false;
	ovs_version **a = malloc(n * sizeof *a);
	if (!a)
		return false;
	size_t i = n;
	for (ovs_version *u = prev; u; u = atomic_load_explicit(&u->older, memory_order_relaxed))
		a[--i] = u; /* oldest first */
	*chain = a;
	*nchain = n;
	return true;
}

/* The shape of the version being built. */
typedef struct chunk_geo {
	size_t rb;      /* row bytes */
	uint32_t shift; /* log2 rows per chunk */
	uint32_t cr;    /* rows per chunk */
	uint32_t rows;  /* rows of the version */
	uint32_t nch;   /* chunks of the version */
} chunk_geo;

/* A full write covering every row: its buffer becomes the version's chunks, no copy. What came
 * before it at this ordinal is overwritten; what came after applies on top. */
static bool adopt_full(ovs_store *st, ovs_exec *x, ovs_version *v, ovs_delta *last_full, const chunk_geo *g)
{
	ovs_buffer *b = last_full->full;
	uint64_t cap = b->capacity / g->rb;
	for (uint32_t j = 0; j < g->nch; j++) {
		uint64_t r0 = (uint64_t)j << g->shift;
		v->chunks[j] = ovs_chunk_new(st, b, (size_t)r0 * g->rb, (uint32_t)(cap - r0 < g->cr ? cap - r0 : g->cr));
		if (!v->chunks[j])
			return false;
	}
	for (ovs_delta *d = last_full->next; d; d = d->next)
		if (d->kind == OVS_DELTA_SPARSE)
			apply_sparse(st, x, v->chunks, g->nch, NULL, 0, g->shift, g->rb, d);
	return true;
}

/* Chunk marks of the version being built (build_cow). */
enum {
	HOW_SHARED = 0,  /* prev's chunk, shared */
	HOW_COPIED = 1,  /* a copy slot, filled from prev, then the ordinal's deltas */
	HOW_SPARE = 2,   /* a caught-up spare, then the ordinal's deltas */
	HOW_ADOPTED = 3  /* a block delta's own values (adoptable_chunks), nothing to copy or apply */
};

/* The chunks a block delta's values can be, with no copy: [*j0, *j1) are those whose rows of the
 * version it covers whole (the column's last chunk also when the block ends the version), for a
 * contiguous SPARSE delta whose values live in a buffer (a chunk holds a buffer). False if none. */
static bool adoptable_chunks(const ovs_delta *d, const chunk_geo *g, uint32_t *j0, uint32_t *j1)
{
	if (d->kind != OVS_DELTA_SPARSE || !d->contig || !d->nrows || !d->values_buf)
		return false;
	uint64_t r0 = d->rows[0], r1 = r0 + d->nrows; /* rows [r0, r1) */
	uint64_t a = (r0 + g->cr - 1) >> g->shift, b = r1 >= g->rows ? g->nch : r1 >> g->shift;
	*j0 = (uint32_t)a;
	*j1 = (uint32_t)b;
	return a < b;
}

/* Whether every chunk a block delta touches was adopted (apply marks 0), so that applying it would
 * write nothing: the seal of four producers' blocks then spawns no parallel apply that only skips. */
static bool block_adopted(const ovs_delta *d, const uint8_t *apply, const chunk_geo *g)
{
	if (!apply || !d->contig || !d->nrows)
		return false;
	uint32_t j0 = d->rows[0] >> g->shift, j1 = d->rows[d->nrows - 1] >> g->shift;
	for (uint32_t j = j0; j <= j1; j++)
		if (apply[j])
			return false;
	return true;
}

/* Marks in `how` the chunks this ordinal changes (HOW_COPIED), those a block delta covers whole with
 * nothing after it at this ordinal touching them (HOW_ADOPTED; from[j] = that delta, from == NULL:
 * nothing is adopted), and those prev cannot provide (new, or too small). The deltas are in op-id
 * order, so a later delta's mark replaces an earlier one's. Returns the count adopted. */
static uint32_t mark_changed(uint8_t *how, ovs_delta **from, ovs_delta *ds, const ovs_version *prev,
			     const chunk_geo *g)
{
	for (ovs_delta *d = ds; d; d = d->next) {
		uint32_t j0, j1;
		if (d->kind == OVS_DELTA_FULL)
			memset(how, HOW_COPIED, (size_t)(((uint64_t)d->nrows + g->cr - 1) >> g->shift));
		else if (d->kind == OVS_DELTA_SPARSE && d->contig && d->nrows)
			memset(how + (d->rows[0] >> g->shift), HOW_COPIED,
			       (size_t)((d->rows[d->nrows - 1] >> g->shift) - (d->rows[0] >> g->shift)) + 1);
		else if (d->kind == OVS_DELTA_SPARSE)
			for (uint32_t i = 0; i < d->nrows; i++)
				how[d->rows[i] >> g->shift] = HOW_COPIED;
		if (from && adoptable_chunks(d, g, &j0, &j1))
			for (uint32_t j = j0; j < j1; j++) {
				how[j] = HOW_ADOPTED;
				from[j] = d;
			}
	}
	uint32_t nadopt = 0;
	for (uint32_t j = 0; j < g->nch; j++) {
		if (how[j] == HOW_ADOPTED) { /* needs nothing of prev */
			nadopt++;
			continue;
		}
		if (!prev || j >= prev->nchunks || prev->chunks[j]->cap_rows < rows_in(g->rows, g->shift, j))
			how[j] = HOW_COPIED;
	}
	return nadopt;
}

/* The adopted chunks: views of their deltas' value buffers (a reference on the buffer each). */
static bool adopt_chunks(ovs_store *st, ovs_version *v, const uint8_t *how, ovs_delta *const *from,
			 const chunk_geo *g)
{
	for (uint32_t j = 0; j < g->nch; j++) {
		if (how[j] != HOW_ADOPTED)
			continue;
		const ovs_delta *d = from[j];
		uint64_t first = (uint64_t)j << g->shift, avail = (uint64_t)d->rows[0] + d->nrows - first;
		size_t off = (size_t)((const unsigned char *)d->values - (const unsigned char *)d->values_buf->data) +
			     (size_t)(first - d->rows[0]) * g->rb;
		v->chunks[j] = ovs_chunk_new(st, d->values_buf, off, (uint32_t)(avail < g->cr ? avail : g->cr));
		if (!v->chunks[j])
			return false;
	}
	return true;
}

/* Copies prev's rows into the copy slots (how == 1), runs of chunks adjacent on both sides in one
 * (parallel) copy. */
static void fill_from_prev(ovs_exec *x, ovs_version *v, const ovs_version *prev, const uint8_t *how,
			   const chunk_geo *g)
{
	for (uint32_t j = 0; j < g->nch;) {
		if (how[j] != 1 || !prev || j >= prev->nchunks) {
			j++;
			continue;
		}
		uint32_t e = j;
		size_t bytes = (size_t)rows_in(prev->rows, g->shift, j) * g->rb;
		while (e + 1 < g->nch && how[e + 1] == 1 && e + 1 < prev->nchunks &&
		       adjacent(prev->chunks[e], prev->chunks[e + 1], g->shift, g->rb) &&
		       adjacent(v->chunks[e], v->chunks[e + 1], g->shift, g->rb) &&
		       rows_in(prev->rows, g->shift, e) == g->cr) {
			e++;
			bytes += (size_t)rows_in(prev->rows, g->shift, e) * g->rb;
		}
		if (bytes)
			chunk_copy(x, v->chunks[j], chunk_data(v->chunks[j]), chunk_data(prev->chunks[j]), bytes);
		j = e + 1;
	}
}

/* Copy slots: one buffer, in chunk order, so neighbouring copied chunks stay one run. The last chunk
 * of the column gets room for its rows rounded up to a power of two (a small column does not pay
 * for a whole chunk; a growing one re-copies it O(log) times). Filled from prev. */
static bool copy_chunks(ovs_store *st, ovs_exec *x, ovs_version *v, const ovs_version *prev, const uint8_t *how,
			uint32_t ncopy, const chunk_geo *g)
{
	uint32_t last_cap = g->cr;
	if (how[g->nch - 1] == 1) {
		uint32_t need = rows_in(g->rows, g->shift, g->nch - 1);
		last_cap = 1;
		while (last_cap < need)
			last_cap <<= 1;
	}
	ovs_buffer *b = ovs_buffer_new_par(st, x, ((size_t)(ncopy - 1) * g->cr + last_cap) * g->rb);
	if (!b)
		return false;
	uint32_t s = 0;
	for (uint32_t j = 0; j < g->nch; j++)
		if (how[j] == 1) {
			v->chunks[j] = ovs_chunk_new(st, b, (size_t)s++ * g->cr * g->rb, j == g->nch - 1 ? last_cap : g->cr);
			if (!v->chunks[j]) {
				ovs_buffer_unref(b);
				return false;
			}
		}
	ovs_buffer_unref(b); /* the chunks hold it */
	fill_from_prev(x, v, prev, how, g);
	return true;
}

/* Spares (how == 2): take them and replay the retained versions' deltas (oldest first) onto them,
 * skipping a delta this ordinal rewrites anyway. */
static void catch_up_spares(ovs_store *st, ovs_exec *x, ovs_column *c, ovs_version *v, const uint8_t *how, ovs_version **chain,
			    size_t nchain, const ovs_delta *ds, const chunk_geo *g)
{
	for (uint32_t j = 0; j < g->nch; j++)
		if (how[j] == 2) {
			v->chunks[j] = c->spares[j];
			c->spares[j] = NULL;
		}
	for (size_t i = 0; i < nchain; i++)
		for (ovs_delta *d = chain[i]->deltas; d; d = d->next)
			if (d->kind != OVS_DELTA_SPARSE)
				continue;
			else if (overwritten(d, ds))
				atomic_fetch_add_explicit(&g_replays_skipped, 1, memory_order_relaxed);
			else
				apply_sparse(st, x, v->chunks, g->nch, how, 2, g->shift, g->rb, d);
}

/* The unmarked chunks are prev's, shared; then the statistics. */
static void share_rest(ovs_version *v, ovs_version *prev, const uint8_t *how, uint32_t ncopy, uint32_t nadopt,
		       const chunk_geo *g)
{
	uint32_t nshared = 0, nreplayed = 0;
	for (uint32_t j = 0; j < g->nch; j++) {
		nreplayed += how[j] == 2;
		if (!how[j]) {
			v->chunks[j] = prev->chunks[j];
			chunk_ref(v->chunks[j]);
			nshared++;
		}
	}
	/* only what moved: three locked adds of zero per column per seal took process-wide lines */
	if (nshared)
		atomic_fetch_add_explicit(&g_shared, nshared, memory_order_relaxed);
	if (ncopy)
		atomic_fetch_add_explicit(&g_copied, ncopy, memory_order_relaxed);
	if (nreplayed)
		atomic_fetch_add_explicit(&g_replayed, nreplayed, memory_order_relaxed);
	if (nadopt)
		atomic_fetch_add_explicit(&g_adopted, nadopt, memory_order_relaxed);
}

/* Builds the chunk table of a version that a full write does not cover: marks, copies, catches up,
 * shares, then applies this ordinal's deltas in op-id order onto the private chunks. */
static bool build_cow(ovs_store *st, ovs_exec *x, ovs_column *c, ovs_version *v, ovs_version *prev,
		      ovs_delta *ds, const chunk_geo *g)
{
	uint8_t *how = calloc(g->nch ? g->nch : 1, 1); /* per chunk: a HOW_ mark */
	if (!how)
		return false;
	/* a table of adopting deltas only when some delta could adopt a chunk (out of memory: copy) */
	ovs_delta **from = NULL;
	for (ovs_delta *d = ds; d && !from; d = d->next) {
		uint32_t j0, j1;
		if (adoptable_chunks(d, g, &j0, &j1))
			from = calloc(g->nch, sizeof *from);
	}
	uint32_t nadopt = mark_changed(how, from, ds, prev, g);
	ovs_version **chain = NULL;
	size_t nchain = 0;
	bool replay = spares_usable(c, prev, &chain, &nchain);
	uint32_t ncopy = 0;
	for (uint32_t j = 0; j < g->nch; j++) {
		if (how[j] != HOW_COPIED)
			continue;
		if (replay && j < c->nspares && c->spares[j] && c->spares[j]->cap_rows >= rows_in(g->rows, g->shift, j))
			how[j] = HOW_SPARE;
		else
			ncopy++;
	}
	bool ok = (!ncopy || copy_chunks(st, x, v, prev, how, ncopy, g)) && (!nadopt || adopt_chunks(st, v, how, from, g));
	if (ok) {
		if (replay)
			catch_up_spares(st, x, c, v, how, chain, nchain, ds, g);
		share_rest(v, prev, how, ncopy, nadopt, g);
		/* This ordinal's deltas in op-id order onto the private chunks; an adopted chunk holds its
		 * values already (its delta is the last to touch it), so the deltas skip it: mark 1 = apply. */
		const uint8_t *apply = NULL;
		if (nadopt) {
			for (uint32_t j = 0; j < g->nch; j++)
				how[j] = how[j] != HOW_ADOPTED;
			apply = how;
		}
		for (ovs_delta *d = ds; d; d = d->next) {
			if (d->kind == OVS_DELTA_FULL)
				apply_full(x, v->chunks, apply, 1, g->shift, g->rb, d);
			else if (d->kind == OVS_DELTA_SPARSE && !block_adopted(d, apply, g))
				apply_sparse(st, x, v->chunks, g->nch, apply, 1, g->shift, g->rb, d);
		}
	}
	free(how);
	free(from);
	free(chain);
	return ok;
}

bool ovs_chunks_build(ovs_store *st, ovs_exec *x, ovs_column *c, ovs_version *v, ovs_version *prev,
		      ovs_delta *ds, char *err, size_t errlen)
{
	chunk_geo g;
	g.rb = c->row_bytes;
	g.shift = ovs_chunk_shift(st->chunk_bytes, g.rb);
	g.cr = 1u << g.shift;
	g.rows = v->rows;
	g.nch = (uint32_t)(((uint64_t)g.rows + g.cr - 1) >> g.shift);
	v->chunk_shift = g.shift;
	v->nchunks = g.nch;
	v->chunks = g.nch <= 1 ? &v->chunk1 : calloc(g.nch, sizeof *v->chunks); /* small columns: no allocation */
	ovs_delta *last_full = NULL;
	for (ovs_delta *d = ds; d; d = d->next)
		if (d->kind == OVS_DELTA_FULL)
			last_full = d;
	bool whole = last_full && last_full->nrows == g.rows && last_full->full->capacity >= (size_t)g.rows * g.rb;
	bool ok = v->chunks && (whole ? adopt_full(st, x, v, last_full, &g) : build_cow(st, x, c, v, prev, ds, &g));
	size_t held;
	ok = ok && compute_runs(v, g.rb, &held);
	if (ok && (v->nruns > OVS_MAX_RUNS || held > OVS_MAX_HELD_FACTOR * ((size_t)g.rows * g.rb) + st->chunk_bytes)) {
		compact(st, x, v, g.rb);
		ok = compute_runs(v, g.rb, &held);
	}
	if (ok)
		return true;
	ovs_version_chunks_free(v);
	ovs_err_format(err, errlen, "out of memory building %u chunks of a column version", g.nch);
	return false;
}

void ovs_chunks_drop_spares(ovs_column *c)
{
	if (!c->spares) /* a stream of full writes never has spares: nothing to free each seal */
		return;
	for (uint32_t j = 0; j < c->nspares; j++)
		ovs_chunk_unref(c->spares[j]);
	free(c->spares);
	c->spares = NULL;
	c->nspares = 0;
	c->spare_ordinal = 0;
}

/* Whether a retained version of c holds a full delta. Spares harvested now could be caught up only
 * while the oldest retained version (the one built on them) stays, and the versions retained with
 * it leave no earlier than it does: such a delta makes them unusable for their whole life
 * (spares_usable), so a stream of full writes harvests nothing. */
static bool retained_full(const ovs_column *c)
{
	/* relaxed: the chain is seal-owned; we are the sealer. */
	for (const ovs_version *u = c->latest; u; u = atomic_load_explicit(&u->older, memory_order_relaxed))
		for (const ovs_delta *d = u->deltas; d; d = d->next)
			if (d->kind == OVS_DELTA_FULL)
				return true;
	return false;
}

void ovs_chunks_harvest(ovs_column *c, ovs_version *v)
{
	/* Older spares can no longer be caught up: the deltas of v are about to go. */
	ovs_chunks_drop_spares(c);
	/* acquire: pairs with the release decrements of read groups that held v; their reads are done. */
	if (!v->chunks || !v->nchunks || atomic_load_explicit(&v->refs, memory_order_acquire) != 1 ||
	    retained_full(c))
		return;
	ovs_chunk **sp = calloc(v->nchunks, sizeof *sp);
	if (!sp)
		return;
	uint32_t n = 0;
	for (uint32_t j = 0; j < v->nchunks; j++) {
		ovs_chunk *k = v->chunks[j];
		/* acquire: as above, for groups of other versions that shared the chunk. Nothing can take
		 * a new reference: v is unreachable and only the sealer builds chunk tables. Adopted
		 * producer buffers are never rewritten. */
		if (k && !k->buf->managed && atomic_load_explicit(&k->refs, memory_order_acquire) == 1) {
			sp[j] = k;
			v->chunks[j] = NULL;
			n++;
		}
	}
	if (!n) {
		free(sp);
		return;
	}
	c->spares = sp;
	c->nspares = v->nchunks;
	c->spare_ordinal = v->ordinal;
}

void ovs_version_chunks_free(ovs_version *v)
{
	ovs_version_chunks_release(v, NULL);
}

void ovs_version_chunks_release(ovs_version *v, ovs_recycle *rc)
{
	if (v->chunks)
		for (uint32_t j = 0; j < v->nchunks; j++)
			ovs_chunk_release(v->chunks[j], rc);
	if (v->chunks != &v->chunk1)
		free(v->chunks);
	if (v->runs != &v->run1)
		free(v->runs);
	v->chunks = NULL;
	v->runs = NULL;
	v->nchunks = 0;
	v->nruns = 0;
}
