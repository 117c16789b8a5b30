/* lastchange.c — change sets and the fold of those that left retention (see lastchange.h,
 * docs/store.md). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "lastchange.h"
#include "model.h"

void ovs_chset_ref(ovs_chset *s)
{
	/* relaxed: the caller already holds a reference, or reaches s inside the grace section */
	atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

void ovs_chset_unref(ovs_chset *s)
{
	ovs_chset_release(s, NULL);
}

void ovs_chset_release(ovs_chset *s, ovs_recycle *rc)
{
	while (s) {
		/* acq_rel: the last holder sees every reader's accesses before the free */
		if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
			return;
		ovs_chset *older = atomic_load_explicit(&s->older, memory_order_relaxed); /* last holder */
		if (s->map)
			ovs_rowmap_unref(s->map);
		if (s->own) /* a run or every row has none: no call of free(NULL) per set */
			free(s->own);
		uint32_t *copy = atomic_load_explicit(&s->copy, memory_order_relaxed); /* last holder */
		if (copy)
			free(copy);
		if (s->counter && s->bytes)
			/* relaxed: a statistic */
			atomic_fetch_sub_explicit(s->counter, (int64_t)s->bytes, memory_order_relaxed);
		ovs_recycle_put(rc ? &rc->chsets : NULL, s);
		s = older; /* the reference this set held on the older one */
	}
}

bool ovs_chset_copy(ovs_chset *s)
{
	if (!s->pooled || atomic_load_explicit(&s->copy, memory_order_acquire)) /* acquire: as below */
		return true;
	size_t bytes = (size_t)s->n * sizeof *s->list;
	uint32_t *c = malloc(bytes ? bytes : 1), *none = NULL;
	if (!c)
		return false;
	memcpy(c, s->list, bytes);
	/* acq_rel: release publishes the rows with the pointer; acquire (on failure) sees the winner's */
	if (!atomic_compare_exchange_strong_explicit(&s->copy, &none, c, memory_order_acq_rel, memory_order_acquire)) {
		free(c);
		return true;
	}
	if (s->counter) /* relaxed: a statistic */
		atomic_fetch_add_explicit(s->counter, (int64_t)bytes, memory_order_relaxed);
	s->bytes += bytes; /* read only by the last holder, which acquires this thread's accesses */
	return true;
}

bool ovs_chset_has(const ovs_chset *s, uint32_t r)
{
	if (r >= s->rows)
		return false;
	if (s->all_changed)
		return true;
	if (s->run)
		return r - s->row0 < s->n; /* unsigned: r below row0 wraps above n */
	const uint32_t *list = ovs_chset_list(s);
	uint32_t lo = 0, hi = s->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (list[mid] < r)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < s->n && list[lo] == r;
}

bool ovs_lc_fold_trylock(ovs_lcfold *f)
{
	/* relaxed pre-check: a busy flag is not worth an RMW; acquire on the exchange: the previous
	 * holder's table (its release in unlock) is visible to this one */
	return !atomic_load_explicit(&f->busy, memory_order_relaxed) &&
	       !atomic_exchange_explicit(&f->busy, true, memory_order_acquire);
}

void ovs_lc_fold_unlock(ovs_lcfold *f)
{
	/* release: pairs with the next holder's acquire exchange */
	atomic_store_explicit(&f->busy, false, memory_order_release);
}

static void count(ovs_lcfold *f, size_t bytes)
{
	if (f->counter) /* relaxed: a statistic */
		atomic_fetch_add_explicit(f->counter, (int64_t)bytes, memory_order_relaxed);
}

/* The directory, grown to hold `rows` rows. Its chunk pointers are followed by the per-chunk
 * uniform entries (uni). */
static ovs_lcdir *dir_reserve(ovs_lcfold *f, uint32_t rows)
{
	/* relaxed: the flag holder is the only writer */
	ovs_lcdir *d = atomic_load_explicit(&f->dir, memory_order_relaxed);
	uint32_t need = (uint32_t)(((uint64_t)rows + OVS_LC_ROWS - 1) >> OVS_LC_SHIFT);
	if (d && d->n >= need)
		return d;
	uint32_t n = d && d->n * 2 > need ? d->n * 2 : need;
	if (d) { /* room to keep the old directory first */
		ovs_lcdir **old = realloc(f->old, (f->nold + 1) * sizeof *old);
		if (!old)
			return NULL;
		f->old = old;
	}
	size_t bytes = sizeof(ovs_lcdir) + (size_t)n * (sizeof d->ch[0] + sizeof(uint64_t));
	ovs_lcdir *nd = calloc(1, bytes);
	if (!nd)
		return NULL;
	count(f, bytes);
	nd->n = n;
	nd->uni = (_Atomic uint64_t *)(void *)((char *)nd + sizeof(ovs_lcdir) + (size_t)n * sizeof nd->ch[0]);
	for (uint32_t j = 0; d && j < d->n; j++) {
		atomic_init(&nd->ch[j], atomic_load_explicit(&d->ch[j], memory_order_relaxed));
		atomic_init(&nd->uni[j], atomic_load_explicit(&d->uni[j], memory_order_relaxed));
	}
	if (d)
		f->old[f->nold++] = d; /* a reader may still hold it: freed with the column */
	/* release: the copied chunk pointers and uniform entries are visible before the directory */
	atomic_store_explicit(&f->dir, nd, memory_order_release);
	return nd;
}

/* Chunks are carved from 2 MiB slabs (64 chunks), aligned so that the kernel can back each with
 * one huge page: a fold's stores are scattered over the table, and with 4 KiB pages most of them
 * would also miss the TLB. */
#define LC_SLAB_BYTES ((size_t)2 << 20)
#define LC_SLAB_CHUNKS (LC_SLAB_BYTES / (OVS_LC_ROWS * sizeof(uint64_t)))

/* Chunk j of d, allocated (zeroed) on first use. */
static _Atomic uint64_t *chunk_of(ovs_lcfold *f, ovs_lcdir *d, uint32_t j)
{
	_Atomic uint64_t *k = atomic_load_explicit(&d->ch[j], memory_order_relaxed); /* holder-owned */
	if (k)
		return k;
	if (f->slab_used == LC_SLAB_CHUNKS || !f->nslabs) {
		void **sl = realloc(f->slabs, (f->nslabs + 1) * sizeof *sl);
		if (!sl)
			return NULL;
		f->slabs = sl;
		void *m = aligned_alloc(LC_SLAB_BYTES, LC_SLAB_BYTES);
		if (!m)
			return NULL;
#ifdef MADV_HUGEPAGE
		madvise(m, LC_SLAB_BYTES, MADV_HUGEPAGE); /* a hint: 4 KiB pages work too */
#endif
		memset(m, 0, LC_SLAB_BYTES);
		count(f, LC_SLAB_BYTES);
		f->slabs[f->nslabs++] = m;
		f->slab_used = 0;
	}
	k = (_Atomic uint64_t *)f->slabs[f->nslabs - 1] + (size_t)f->slab_used++ * OVS_LC_ROWS;
	/* release: the zeroed chunk is visible before its pointer */
	atomic_store_explicit(&d->ch[j], k, memory_order_release);
	return k;
}

/* Rows [r0, r0 + n) changed at o, within one chunk: the chunk's uniform entry when they cover
 * it, else one store per row. False when out of memory. */
static bool fold_in_chunk(ovs_lcfold *f, ovs_lcdir *d, uint32_t r0, uint32_t n, uint64_t o)
{
	uint32_t j = r0 >> OVS_LC_SHIFT;
	/* relaxed (all): published by the fold's release store of `folded` */
	if (n == OVS_LC_ROWS) {
		atomic_store_explicit(&d->uni[j], o, memory_order_relaxed);
		return true;
	}
	_Atomic uint64_t *k = chunk_of(f, d, j);
	if (!k)
		return false;
	for (uint32_t i = 0, b = r0 & (OVS_LC_ROWS - 1); i < n; i++)
		atomic_store_explicit(&k[b + i], o, memory_order_relaxed);
	return true;
}

/* Rows [r0, r0 + n) changed at o: a run, folded chunk by chunk. */
static bool fold_run(ovs_lcfold *f, ovs_lcdir *d, uint32_t r0, uint32_t n, uint64_t o)
{
	while (n) {
		uint32_t room = OVS_LC_ROWS - (r0 & (OVS_LC_ROWS - 1));
		uint32_t m = n < room ? n : room;
		if (!fold_in_chunk(f, d, r0, m, o))
			return false;
		r0 += m;
		n -= m;
	}
	return true;
}

/* A sorted row list: each maximal run of consecutive rows folded as a run. */
static bool fold_list(ovs_lcfold *f, ovs_lcdir *d, const uint32_t *rows, uint32_t n, uint64_t o)
{
	for (uint32_t i = 0; i < n;) {
		uint32_t e = i + 1;
		while (e < n && rows[e] == rows[e - 1] + 1)
			e++;
		if (e - i == 1) {
			_Atomic uint64_t *k = chunk_of(f, d, rows[i] >> OVS_LC_SHIFT);
			if (!k)
				return false;
			atomic_store_explicit(&k[rows[i] & (OVS_LC_ROWS - 1)], o, memory_order_relaxed);
		} else if (!fold_run(f, d, rows[i], e - i, o)) {
			return false;
		}
		i = e;
	}
	return true;
}

/* A full write: rows [0, s->rows) last changed at s at the latest (older entries are below it,
 * and a reader takes the larger; rows only grow, so un does not shrink). */
static void fold_all(ovs_lcfold *f, const ovs_chset *s)
{
	uint32_t q = atomic_load_explicit(&f->useq, memory_order_relaxed); /* holder-owned */
	atomic_store_explicit(&f->useq, q + 1, memory_order_relaxed);
	/* release fence: a reader that sees a new uo or un also sees the odd sequence number */
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&f->uo, s->ordinal, memory_order_relaxed);
	atomic_store_explicit(&f->un, s->rows, memory_order_relaxed);
	/* release: the pair before the even number that closes it */
	atomic_store_explicit(&f->useq, q + 2, memory_order_release);
}

bool ovs_lc_fold_set(ovs_lcfold *f, const ovs_chset *s)
{
	if (s->all_changed) {
		fold_all(f, s);
		return true;
	}
	if (!s->n)
		return true;
	const uint32_t *list = s->run ? NULL : ovs_chset_list(s);
	uint32_t last = s->run ? s->row0 + s->n - 1 : list[s->n - 1];
	ovs_lcdir *d = dir_reserve(f, last + 1);
	if (!d)
		return false;
	/* A failure part-way leaves some rows stored: harmless, since the set stays unfolded (readers
	 * consult it) and the stored values are its own ordinal, which a later fold stores again. */
	return s->run ? fold_run(f, d, s->row0, s->n, s->ordinal) : fold_list(f, d, list, s->n, s->ordinal);
}

void ovs_lc_view(const ovs_lcfold *f, uint64_t limit, ovs_lcview *out)
{
	ovs_lcfold *m = (ovs_lcfold *)f;
	out->limit = limit;
	/* acquire: pairs with dir_reserve's release store (the chunk pointers it copied) */
	out->dir = atomic_load_explicit(&m->dir, memory_order_acquire);
	for (;;) {
		/* seqlock read: acquire on the number, the pair, an acquire fence, the number again */
		uint32_t q = atomic_load_explicit(&m->useq, memory_order_acquire);
		out->uo = atomic_load_explicit(&m->uo, memory_order_relaxed);
		out->un = atomic_load_explicit(&m->un, memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (!(q & 1) && atomic_load_explicit(&m->useq, memory_order_relaxed) == q)
			return;
	}
}

void ovs_lc_fold_fini(ovs_lcfold *f)
{
	ovs_lcdir *d = atomic_load_explicit(&f->dir, memory_order_relaxed);
	free(d);
	for (size_t i = 0; i < f->nslabs; i++)
		free(f->slabs[i]);
	free(f->slabs);
	for (size_t i = 0; i < f->nold; i++)
		free(f->old[i]); /* their chunks are the current directory's */
	free(f->old);
	memset(f, 0, sizeof *f);
}
