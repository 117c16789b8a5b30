/*
 * lastchange.h — the last changes of a column's rows beyond retention (docs/store.md, *Range reads:
 * last changes*).
 *
 * A range read selects a row when its last change (a value written, or a delete) as of the range's
 * end is in the range. For the versions still chained, a version's own `changed` rows (or
 * all_changed) say that; for everything older, each column keeps ONE table, its *fold*: per row, the
 * ordinal of its last change in the versions that left retention. The sealer folds a version into
 * it when trim_retention cuts the version from the chain — before the cut is published, so a reader
 * that pinned a chain finds everything older than the chain's oldest version already folded. The
 * cost of a seal is then that of the version leaving retention: one store per changed row (a full
 * write: one uniform entry), never a copy of a table.
 *
 * The fold only moves forward (a row's entry only grows), while readers read it without a lock. A
 * reader that pinned the chain v[0..n-1] (oldest v[n-1]) asks the fold only for rows that no pinned
 * version changed; the true answer is then below v[n-1]'s ordinal, so a value at or above it means
 * the sealer folded newer versions meanwhile (the reader was slow): the read pins again
 * (ovs_lc_fold_get reports it as stale).
 *
 * Layout: a directory of chunks of 2^12 rows (32 KiB of ordinals, allocated the first time a fold
 * touches them; a missing chunk reads 0), published by release stores; the directory is replaced
 * when the column outgrows it (old directories are freed with the column). The uniform entry
 * (rows [0, un) last changed at uo at the latest: a folded full write) is a seqlocked pair.
 */
#ifndef OVSTAGE_ENGINE_LASTCHANGE_H
#define OVSTAGE_ENGINE_LASTCHANGE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OVS_LC_SHIFT 12u
#define OVS_LC_ROWS (1u << OVS_LC_SHIFT)

typedef struct ovs_lcdir {
	uint32_t n;                          /* chunks it can hold */
	_Atomic(_Atomic uint64_t *) ch[];    /* chunk j: rows [j << OVS_LC_SHIFT, ...); NULL: all 0 */
} ovs_lcdir;

typedef struct ovs_lcfold {
	_Atomic(ovs_lcdir *) dir;            /* NULL: nothing folded yet */
	_Atomic uint32_t useq;               /* seqlock of (uo, un): odd while the sealer writes */
	_Atomic uint64_t uo;                 /* uniform entry: ordinal ... */
	_Atomic uint32_t un;                 /* ... of rows [0, un) */
	/* the sealer's alone */
	ovs_lcdir **old;                     /* replaced directories (readers may still hold one) */
	size_t nold;
	void **slabs;                        /* the chunks' memory (lastchange.c) */
	size_t nslabs;
	size_t slab_used;                    /* chunks handed out of the last slab */
	uint32_t full_through;               /* chunks [0, full_through) of the directory exist */
} ovs_lcfold;

struct ovs_version;

/* Folds version u (the sealer, before u is cut from the chain; versions are folded oldest first).
 * False when out of memory (nothing is lost: the caller keeps u chained and folds it later). */
bool ovs_lc_fold_version(ovs_lcfold *f, const struct ovs_version *u);
/* Allocates what folding u will need and prefetches the entries it will store (the sealer, early
 * in the seal that will cut u, so that the fold's scattered stores find their lines in cache). */
void ovs_lc_fold_prefetch(ovs_lcfold *f, const struct ovs_version *u);
/* Frees the fold (column teardown: no readers left). */
void ovs_lc_fold_fini(ovs_lcfold *f);

/* A reader's view of the fold, taken once per read. */
typedef struct ovs_lcview {
	const ovs_lcdir *dir;
	uint64_t uo;
	uint32_t un;
	uint64_t limit; /* values at or above it are stale (see above) */
} ovs_lcview;

void ovs_lc_view(const ovs_lcfold *f, uint64_t limit, ovs_lcview *out);

/* Row r's last change among the folded versions (0: none); *stale set when the fold moved past
 * the reader's chain (then the value is not to be used). */
static inline uint64_t ovs_lc_fold_get(const ovs_lcview *w, uint32_t r, bool *stale)
{
	uint64_t o = 0;
	if (w->dir && (r >> OVS_LC_SHIFT) < w->dir->n) {
		/* acquire: the chunk's zeroed memory is visible before its pointer (published by release) */
		_Atomic uint64_t *k = atomic_load_explicit(&((ovs_lcdir *)w->dir)->ch[r >> OVS_LC_SHIFT],
							   memory_order_acquire);
		/* relaxed: an entry the reader must see was stored before the chain cut it acquired
		 * (trim_retention's release store); a newer one is detected as stale below */
		if (k)
			o = atomic_load_explicit(&k[r & (OVS_LC_ROWS - 1)], memory_order_relaxed);
	}
	if (r < w->un && w->uo > o)
		o = w->uo;
	if (o >= w->limit)
		*stale = true;
	return o;
}

#endif /* OVSTAGE_ENGINE_LASTCHANGE_H */
