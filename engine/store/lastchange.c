/* lastchange.c — the fold of the versions that left retention (see lastchange.h, docs/store.md). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "lastchange.h"
#include "model.h"

/* The directory, grown to hold `rows` rows (the sealer). */
static ovs_lcdir *dir_reserve(ovs_lcfold *f, uint32_t rows)
{
	/* relaxed: the sealer is the only writer */
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
	ovs_lcdir *nd = calloc(1, sizeof *nd + (size_t)n * sizeof nd->ch[0]);
	if (!nd)
		return NULL;
	nd->n = n;
	for (uint32_t j = 0; d && j < d->n; j++)
		atomic_init(&nd->ch[j], atomic_load_explicit(&d->ch[j], memory_order_relaxed));
	if (d)
		f->old[f->nold++] = d; /* a reader may still hold it: freed with the column */
	/* release: the copied chunk pointers are visible before the directory */
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
	_Atomic uint64_t *k = atomic_load_explicit(&d->ch[j], memory_order_relaxed); /* sealer-owned */
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
		f->slabs[f->nslabs++] = m;
		f->slab_used = 0;
	}
	k = (_Atomic uint64_t *)f->slabs[f->nslabs - 1] + (size_t)f->slab_used++ * OVS_LC_ROWS;
	/* release: the zeroed chunk is visible before its pointer */
	atomic_store_explicit(&d->ch[j], k, memory_order_release);
	return k;
}

/* The directory and every chunk u's changed rows fall into, allocated (the first pass of a fold;
 * O(1) once every chunk below u's last row exists, as it soon does under scattered writes). */
static ovs_lcdir *reserve_for(ovs_lcfold *f, const ovs_version *u)
{
	/* changed is sorted: its last row is the largest */
	uint32_t need = (u->changed[u->nchanged - 1] >> OVS_LC_SHIFT) + 1;
	ovs_lcdir *d = dir_reserve(f, u->changed[u->nchanged - 1] + 1);
	if (!d || need <= f->full_through)
		return d;
	uint32_t last = UINT32_MAX;
	for (uint32_t i = 0; i < u->nchanged; i++) {
		uint32_t j = u->changed[i] >> OVS_LC_SHIFT;
		if (j != last && !chunk_of(f, d, j))
			return NULL;
		last = j;
	}
	while (f->full_through < d->n && atomic_load_explicit(&d->ch[f->full_through], memory_order_relaxed))
		f->full_through++;
	return d;
}

void ovs_lc_fold_prefetch(ovs_lcfold *f, const ovs_version *u)
{
	if (!u || u->all_changed || !u->nchanged)
		return;
	ovs_lcdir *d = reserve_for(f, u);
	for (uint32_t i = 0; d && i < u->nchanged; i++) {
		uint32_t r = u->changed[i];
		_Atomic uint64_t *k = atomic_load_explicit(&d->ch[r >> OVS_LC_SHIFT], memory_order_relaxed);
		__builtin_prefetch((const void *)&k[r & (OVS_LC_ROWS - 1)], 1, 1);
	}
}

bool ovs_lc_fold_version(ovs_lcfold *f, const ovs_version *u)
{
	if (u->all_changed) {
		/* a full write: rows [0, u->rows) last changed at u (older entries are below it, and the
		 * reader takes the larger; rows only grow, so un does not shrink) */
		uint32_t s = atomic_load_explicit(&f->useq, memory_order_relaxed);
		atomic_store_explicit(&f->useq, s + 1, memory_order_relaxed);
		/* release fence: a reader that sees a new uo or un also sees the odd sequence number */
		atomic_thread_fence(memory_order_release);
		atomic_store_explicit(&f->uo, u->ordinal, memory_order_relaxed);
		atomic_store_explicit(&f->un, u->rows, memory_order_relaxed);
		/* release: the pair before the even number that closes it */
		atomic_store_explicit(&f->useq, s + 2, memory_order_release);
		return true;
	}
	if (!u->nchanged)
		return true;
	/* every chunk first, so that a failure stores nothing (a later retry folds u again) */
	ovs_lcdir *d = reserve_for(f, u);
	if (!d)
		return false;
	for (uint32_t i = 0; i < u->nchanged; i++) {
		uint32_t r = u->changed[i];
		_Atomic uint64_t *k = atomic_load_explicit(&d->ch[r >> OVS_LC_SHIFT], memory_order_relaxed);
		/* relaxed: published by trim_retention's release store of the cut */
		atomic_store_explicit(&k[r & (OVS_LC_ROWS - 1)], u->ordinal, memory_order_relaxed);
	}
	return true;
}

void ovs_lc_view(const ovs_lcfold *f, uint64_t limit, ovs_lcview *out)
{
	out->limit = limit;
	/* acquire: pairs with dir_reserve's release store (the chunk pointers it copied) */
	out->dir = atomic_load_explicit(&((ovs_lcfold *)f)->dir, memory_order_acquire);
	for (;;) {
		/* seqlock read: acquire on the number, the pair, an acquire fence, the number again */
		uint32_t s = atomic_load_explicit(&((ovs_lcfold *)f)->useq, memory_order_acquire);
		out->uo = atomic_load_explicit(&((ovs_lcfold *)f)->uo, memory_order_relaxed);
		out->un = atomic_load_explicit(&((ovs_lcfold *)f)->un, memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (!(s & 1) && atomic_load_explicit(&((ovs_lcfold *)f)->useq, memory_order_relaxed) == s)
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
