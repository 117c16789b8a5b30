/*
 * lastchange.h — the last changes of a column's rows beyond retention (docs/store.md, *Range reads:
 * last changes*).
 *
 * A range read selects a row when its last change (a value written, or a delete) as of the range's
 * end is in the range. Every version carries a *change set* (ovs_chset): the rows changed at its
 * ordinal, as one run, a sorted row list or "every row". Change sets are reference-counted and
 * chained newest to oldest through `older`, like the versions, but the chain reaches further back:
 * when a version leaves retention its payload goes (chunks, blobs) and its change set stays
 * chained. The seal does nothing more for it (O(1) per version: the set already exists).
 *
 * Change sets that left retention are *folded* later, off the seal's path, into one table per
 * column (ovs_lcfold: per row, the ordinal of its last change among the folded sets), by whichever
 * of these gets the column's fold flag first (a try-lock: nobody ever waits for it):
 *  - a range read of the column, before it pins (it needs membership below retention), or
 *  - the store's fold job, which a seal submits after its publication once a column's unfolded sets
 *    pass a bound (OVS_LC_PENDING_SETS sets or OVS_LC_PENDING_ROWS listed rows).
 * A fold takes its sets oldest first and raises `folded` (release) after each. The sealer cuts the
 * chain below the oldest unfolded set when it sees `folded` pass (acquire), and the cut sets go
 * through the seal's limbo (the grace period), as cut versions do.
 *
 * A reader pins, inside the grace section, its versions and then the unfolded change sets below
 * them (those above the `folded` it loaded: the others are in the table, visible by that acquire),
 * and asks the table only for rows none of them changed; the answer is then below the oldest
 * pinned set's ordinal (`limit`), so a value at or above it means folds of newer sets overwrote
 * the entry while the reader was slow: the read pins again (ovs_lc_fold_get reports it as stale).
 *
 * Table layout: a directory of chunks of 2^12 rows (32 KiB of ordinals, allocated the first time a
 * fold stores a row in them; a missing chunk reads 0), and per chunk a uniform entry (a run that
 * covers the whole chunk is folded as that one store); published by release stores; the directory
 * is replaced when the column outgrows it (old ones are freed with the column). The column-wide
 * uniform entry (rows [0, un) last changed at uo at the latest: a folded full write) is a seqlocked
 * pair. An entry only grows.
 */
#ifndef OVSTAGE_ENGINE_LASTCHANGE_H
#define OVSTAGE_ENGINE_LASTCHANGE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "recycle.h"

#define OVS_LC_SHIFT 12u
#define OVS_LC_ROWS (1u << OVS_LC_SHIFT)

/* The bounds past which a seal submits the fold job for a column's unfolded change sets (a build
 * may lower them, e.g. -DOVS_LC_PENDING_SETS=2 to measure folds that run after nearly every seal). */
#ifndef OVS_LC_PENDING_SETS
#define OVS_LC_PENDING_SETS 64u
#endif
#ifndef OVS_LC_PENDING_ROWS
#define OVS_LC_PENDING_ROWS ((uint64_t)1 << 20) /* or the column's rows, if more */
#endif

struct ovs_buffer;
struct ovs_rowmap;

/* The rows one version changed. Immutable once built, except `older`. */
typedef struct ovs_chset {
	_Atomic uint32_t refs;        /* its version's, the newer set's `older` link, readers' pins */
	uint32_t rows;                /* rows of its version */
	uint64_t ordinal;             /* its version's ordinal */
	bool all_changed;             /* every row (a full write of every row) */
	bool run;                     /* rows [row0, row0 + n) */
	uint32_t row0;                /* run: the first row */
	uint32_t n;                   /* rows in the set */
	const uint32_t *list;         /* neither: the sorted, unique rows (n entries; ovs_chset_list) */
	/* the list's storage, owned by the set: malloc'd, or a query's row map */
	uint32_t *own;
	const struct ovs_rowmap *map;
	/* or the rows of the version's delta in a buffer of the store's pool, which the delta keeps
	 * (it goes back to the pool when the version is freed, as without change sets): valid while
	 * the version lives, so the set gets a copy of its own before the version leaves retention —
	 * from the fold job, or from the seal that cuts the version if the job has not run yet */
	bool pooled;
	uint32_t *_Atomic copy;       /* that copy (NULL: none yet); once set, list's rows for good */
	size_t bytes;                 /* its row lists (own, copy), counted in the store's history_bytes
	                               * while the set lives (0 for a run or every row: not counted) */
	_Atomic int64_t *counter;     /* that count */
	struct ovs_chset *_Atomic older; /* the previous version's set (owned reference); cut by the
	                                  * sealer once folded, so readers follow it only inside the
	                                  * snapshot grace section */
} ovs_chset;

/* The set's row list: its copy once made, else list (valid while its version lives). */
static inline const uint32_t *ovs_chset_list(const ovs_chset *s)
{
	/* acquire: the copy's rows are visible before its pointer (ovs_chset_copy's release CAS) */
	const uint32_t *c = atomic_load_explicit(&((ovs_chset *)s)->copy, memory_order_acquire);
	return c ? c : s->list;
}
/* A pooled set's copy of its rows (its version must be alive): made unless there is one. False
 * when out of memory. Any thread; one of racing copies wins. */
bool ovs_chset_copy(ovs_chset *s);
void ovs_chset_ref(ovs_chset *s);
/* Drops a reference; the last frees the set and drops its reference on `older` (iteratively). */
void ovs_chset_unref(ovs_chset *s);
/* As ovs_chset_unref; the structs of the sets it frees go to rc (the sealer's cache, recycle.h), or
 * are freed when rc is NULL. rc non-NULL: the sealer only. */
void ovs_chset_release(ovs_chset *s, ovs_recycle *rc);
/* Whether set s changed row r. */
bool ovs_chset_has(const ovs_chset *s, uint32_t r);

typedef struct ovs_lcdir {
	uint32_t n;                          /* chunks it can hold */
	_Atomic uint64_t *uni;               /* per chunk: every row changed at this ordinal at the latest */
	_Atomic(_Atomic uint64_t *) ch[];    /* chunk j: rows [j << OVS_LC_SHIFT, ...); NULL: all 0 */
} ovs_lcdir;

typedef struct ovs_lcfold {
	_Atomic(ovs_lcdir *) dir;            /* NULL: nothing folded yet */
	_Atomic uint32_t useq;               /* seqlock of (uo, un): odd while a fold writes */
	_Atomic uint64_t uo;                 /* uniform entry: ordinal ... */
	_Atomic uint32_t un;                 /* ... of rows [0, un) */
	_Atomic uint64_t folded;             /* every change set at or below this ordinal is folded */
	_Atomic uint64_t left;               /* the newest ordinal whose version left retention (sealer) */
	_Atomic bool busy;                   /* the fold flag (a try-lock: the holder folds) */
	/* the fold flag holder's alone */
	ovs_lcdir **old;                     /* replaced directories (readers may still hold one) */
	size_t nold;
	void **slabs;                        /* the chunks' memory (lastchange.c) */
	size_t nslabs;
	size_t slab_used;                    /* chunks handed out of the last slab */
	uint32_t full_through;               /* chunks [0, full_through) of the directory exist */
	_Atomic int64_t *counter;            /* the store's history_bytes (the table's memory is counted) */
} ovs_lcfold;

/* Folds s (the fold flag held; sets are folded oldest first). False when out of memory (nothing
 * is lost: s stays unfolded and a later fold takes it again). */
bool ovs_lc_fold_set(ovs_lcfold *f, const ovs_chset *s);
/* Frees the fold (column teardown: no readers left). */
void ovs_lc_fold_fini(ovs_lcfold *f);
/* Takes / drops the fold flag. Acquire / release: a holder sees the previous holder's table. */
bool ovs_lc_fold_trylock(ovs_lcfold *f);
void ovs_lc_fold_unlock(ovs_lcfold *f);

/* A reader's view of the fold, taken once per read (after it loaded `folded`). */
typedef struct ovs_lcview {
	const ovs_lcdir *dir;
	uint64_t uo;
	uint32_t un;
	uint64_t limit; /* values at or above it are stale (see above) */
} ovs_lcview;

void ovs_lc_view(const ovs_lcfold *f, uint64_t limit, ovs_lcview *out);

/* Row r's last change among the folded sets (0: none); *stale set when the fold moved past the
 * reader's pins (then the value is not to be used). */
static inline uint64_t ovs_lc_fold_get(const ovs_lcview *w, uint32_t r, bool *stale)
{
	uint64_t o = 0;
	if (w->dir && (r >> OVS_LC_SHIFT) < w->dir->n) {
		ovs_lcdir *d = (ovs_lcdir *)w->dir;
		/* acquire: the chunk's zeroed memory is visible before its pointer (published by release) */
		_Atomic uint64_t *k = atomic_load_explicit(&d->ch[r >> OVS_LC_SHIFT], memory_order_acquire);
		/* relaxed (both): an entry the reader must see was stored before the `folded` it acquired;
		 * a newer one is detected as stale below */
		if (k)
			o = atomic_load_explicit(&k[r & (OVS_LC_ROWS - 1)], memory_order_relaxed);
		uint64_t u = atomic_load_explicit(&d->uni[r >> OVS_LC_SHIFT], memory_order_relaxed);
		if (u > o)
			o = u;
	}
	if (r < w->un && w->uo > o)
		o = w->uo;
	if (o >= w->limit)
		*stale = true;
	return o;
}

#endif /* OVSTAGE_ENGINE_LASTCHANGE_H */
