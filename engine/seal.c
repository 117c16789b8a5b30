/* seal.c — sealing: retention, the limbo of retired versions, one floor advance and its publication (see seal.h, docs/store.md). */
#include <stdlib.h>
#include <string.h>

#include "chunk.h"
#include "errors.h"
#include "stage.h"

ovs_version *ovs_snapshot_version(const ovs_snapshot *snap, const ovs_column *c)
{
	if (!snap)
		return NULL;
	for (size_t i = 0; i < snap->ncols; i++)
		if (snap->cols[i] == c)
			return snap->versions[i];
	return NULL;
}

/* Cuts the versions beyond the retention depth from the chain starting at `head` and returns them
 * (the caller drops them after the grace period: a reader may be walking into them). */
static ovs_version *trim_retention(ovs_column *c, ovs_version *head, uint32_t keep)
{
	ovs_version *v = head;
	for (uint32_t i = 1; v && i < keep; i++)
		v = atomic_load_explicit(&v->older, memory_order_relaxed); /* seal-owned chain */
	if (!v)
		return NULL;
	ovs_version *drop = atomic_load_explicit(&v->older, memory_order_relaxed);
	if (!drop)
		return NULL;
	/* release: pairs with readers' acquire loads of `older` (they see either the old link, and
	 * the version stays alive until the grace period ends, or NULL). */
	atomic_store_explicit(&v->older, NULL, memory_order_release);
	uint64_t dropped = drop->ordinal;
	uint64_t cur = atomic_load_explicit(&c->dropped_through, memory_order_relaxed);
	if (dropped > cur)
		/* release: a reader that sees the frontier moved also sees the cut chain. */
		atomic_store_explicit(&c->dropped_through, dropped, memory_order_release);
	return drop;
}

static void bury(ovs_limbo *g, ovs_column *c, ovs_version *v)
{
	if (!v)
		return;
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 8;
		ovs_version **nv = realloc(g->v, cap * sizeof *nv);
		ovs_column **nc = nv ? realloc(g->c, cap * sizeof *nc) : NULL;
		if (nv)
			g->v = nv;
		if (!nc)
			return; /* leak rather than free under a reader: bounded by allocation failure */
		g->c = nc;
		g->cap = cap;
	}
	g->v[g->n] = v;
	g->c[g->n++] = c;
}

static void free_snapshot(ovs_snapshot *snap)
{
	if (!snap)
		return;
	for (size_t i = 0; i < snap->ncols; i++)
		ovs_version_unref(snap->versions[i]);
	free(snap->cols);
	free(snap->versions);
	free(snap);
}

/* Frees what the limbo holds (its readers have left), harvesting spare buffers if asked. */
static void empty_limbo(ovs_limbo *g, bool harvest)
{
	for (size_t i = 0; i < g->n; i++) {
		if (harvest)
			ovs_chunks_harvest(g->c[i], g->v[i]);
		ovs_version_unref(g->v[i]);
	}
	g->n = 0;
	free_snapshot(g->snap);
	g->snap = NULL;
	g->used = false;
}

/* Waits until the readers that could reach the limbo's contents have left, then frees them. */
static void reclaim_limbo(ovs_stage *st)
{
	ovs_limbo *g = &st->limbo;
	if (!g->used)
		return;
	ovs_grace_wait(&st->grace, g->parity);
	empty_limbo(g, true);
}

/* Seals one column through n: builds a version per ordinal, chains it, trims retention. */
static ovstage_api_status_t seal_column(ovs_stage *st, jobs_worker *w, ovs_column *c, ovstage_ordinal_t n,
					ovs_limbo *gy, char *err, size_t errlen)
{
	if (!ovs_column_take_inbox(c)) {
		ovs_err_format(err, errlen, "out of memory sorting pending writes of a column");
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	while (c->pending && c->pending->ordinal <= n) {
		/* cut the run of deltas at this ordinal */
		ovs_delta *ds = c->pending, *last = ds;
		int64_t sealed_bytes = (int64_t)ds->bytes;
		while (last->next && last->next->ordinal == ds->ordinal) {
			last = last->next;
			sealed_bytes += (int64_t)last->bytes;
		}
		c->pending = last->next;
		last->next = NULL;
		uint64_t sealed_cost = 0;
		for (ovs_delta *d = ds; d; d = d->next)
			sealed_cost += d->cost;
		ovs_version *v = ovs_version_build(st, w, c, c->latest, ds, err, errlen);
		if (!v) {
			/* keep the deltas for a later seal */
			last->next = c->pending;
			c->pending = ds;
			return OVSTAGE_ERROR_OUT_OF_MEMORY;
		}
		atomic_fetch_sub_explicit(&st->unsealed_bytes, sealed_bytes, memory_order_relaxed);
		atomic_fetch_sub_explicit(&c->seal_cost, sealed_cost, memory_order_relaxed); /* an estimate */
		/* relaxed: published to readers by the snapshot's release store. The chain's reference
		 * moves to the new version. */
		atomic_store_explicit(&v->older, c->latest, memory_order_relaxed);
		c->latest = v;
		bury(gy, c, trim_retention(c, v, st->retention));
	}
	return OVSTAGE_OK;
}

ovstage_api_status_t ovs_store_seal(ovs_stage *st, jobs_worker *w, ovs_column **cols, size_t ncols,
				    ovstage_ordinal_t n, bool advance_stage_floor, char *err, size_t errlen)
{
	/* The previous seal's retirees first (their spare buffers serve this seal's sparse versions). */
	reclaim_limbo(st);
	ovs_limbo *gy = &st->limbo;
	for (size_t i = 0; i < ncols; i++) {
		ovstage_api_status_t s = seal_column(st, w, cols[i], n, gy, err, errlen);
		if (s != OVSTAGE_OK) {
			/* Versions built so far stay chained (the next seal publishes them); the ones cut from
			 * retention are dropped after a grace period (rare path: wait for it here). */
			ovs_grace_wait(&st->grace, ovs_grace_flip(&st->grace));
			empty_limbo(gy, false);
			return s;
		}
	}
	/* Build the new snapshot: every column known now, with its latest version. */
	size_t total = atomic_load_explicit(&st->ncols, memory_order_acquire);
	ovs_column **all = atomic_load_explicit(&st->cols, memory_order_acquire);
	ovs_snapshot *snap = calloc(1, sizeof *snap);
	ovs_column **sc = malloc((total ? total : 1) * sizeof *sc);
	ovs_version **sv = malloc((total ? total : 1) * sizeof *sv);
	if (!snap || !sc || !sv) {
		free(snap);
		free(sc);
		free(sv);
		ovs_err_format(err, errlen, "out of memory publishing a snapshot");
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	size_t k = 0;
	for (size_t i = 0; i < total; i++) {
		if (!all[i]->latest)
			continue;
		sc[k] = all[i];
		sv[k] = all[i]->latest;
		ovs_version_ref(sv[k]);
		k++;
	}
	snap->cols = sc;
	snap->versions = sv;
	snap->ncols = k;
	ovs_snapshot *prev = ovs_grace_snapshot_owner(&st->grace);
	snap->seq = prev ? prev->seq + 1 : 1;
	/* The versions (and everything sealed into them) become visible to readers all at once. */
	ovs_snapshot *old = ovs_grace_publish(&st->grace, snap);
	/* Floors move after the snapshot: a reader that sees floor >= N then reads a snapshot that
	 * holds ordinal N. release: orders the snapshot store before the floor. */
	for (size_t i = 0; i < ncols; i++) {
		uint64_t f = atomic_load_explicit(&cols[i]->floor, memory_order_relaxed);
		if (n > f)
			atomic_store_explicit(&cols[i]->floor, n, memory_order_release);
	}
	if (advance_stage_floor && n > atomic_load_explicit(&st->all_floor, memory_order_relaxed))
		atomic_store_explicit(&st->all_floor, n, memory_order_release);
	/* Retire the old snapshot and the cut versions: new readers use the other counter from the
	 * flip on and cannot reach them; the readers of this parity are waited for by the next seal. */
	gy->snap = old;
	gy->parity = ovs_grace_flip(&st->grace);
	gy->used = true;
	/* Usually nobody is inside: free now; otherwise the next seal does (it waits for them then, by
	 * which time they have left). */
	if (ovs_grace_quiet(&st->grace, gy->parity))
		empty_limbo(gy, true);
	return OVSTAGE_OK;
}

void ovs_seal_fini(ovs_stage *st)
{
	empty_limbo(&st->limbo, false); /* no readers are left at destroy */
	free(st->limbo.v);
	free(st->limbo.c);
	free_snapshot(ovs_grace_snapshot_owner(&st->grace));
}
