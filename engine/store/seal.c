/* seal.c — sealing: retention, the limbo of retired versions, one floor advance and its publication (see seal.h, docs/store.md). */
#include <stdlib.h>
#include <string.h>

#include "chunk.h"
#include "errors.h"
#include "store.h"
#include "seal.h"
#include "column.h"
#include "delta.h"
#include "version.h"
#include "park.h"
#include "fold.h"

ovs_version *ovs_snapshot_version(const ovs_snapshot *snap, const ovs_column *c)
{
	/* Entry i is the column of index i (publish): one load, where a scan of the entries made every
	 * pin O(columns) — 26,000 instructions of a 100-column read. The column check answers for a
	 * column published after the snapshot (its index is past the end, or, prepared and never
	 * published, its index is 0 and entry 0 is another column). */
	if (!snap || c->index >= snap->ncols || snap->cols[c->index] != c)
		return NULL;
	return snap->versions[c->index];
}

/* Room in the column's ring of change sets that left retention for k more (sealer). */
static bool lcq_reserve(ovs_column *c, uint32_t k)
{
	if (c->lcq_n + k <= c->lcq_cap)
		return true;
	uint32_t cap = c->lcq_cap ? c->lcq_cap : 8;
	while (cap < c->lcq_n + k)
		cap *= 2;
	ovs_lcq_entry *q = malloc(cap * sizeof *q);
	if (!q)
		return false;
	for (uint32_t i = 0; i < c->lcq_n; i++) /* unrolled from the old ring, oldest first */
		q[i] = c->lcq[(c->lcq_head + i) & (c->lcq_cap - 1)];
	free(c->lcq);
	c->lcq = q;
	c->lcq_head = 0;
	c->lcq_cap = cap;
	return true;
}

static const ovs_lcq_entry *lcq_at(const ovs_column *c, uint32_t i)
{
	return &c->lcq[(c->lcq_head + i) & (c->lcq_cap - 1)];
}

/* Rows a set lists (a run or every row lists none: they cost nothing to keep). */
static uint64_t listed(const ovs_chset *s)
{
	return s->all_changed || s->run ? 0 : s->n;
}

/* Largest run the sealer folds itself: a run is folded chunk by chunk (2^12 rows each, one uniform
 * store per whole chunk), so this bounds the seal's fold to 64 stores or so. */
#define SEAL_FOLD_RUN_ROWS (64u << 12)

/* Whether folding s costs O(1): every row (the column-wide entry) or a short run; a row list costs
 * a store per row and is left to the fold job or a range read. */
static bool cheap_fold(const ovs_chset *s)
{
	return s->all_changed || !s->n || (s->run && s->n <= SEAL_FOLD_RUN_ROWS);
}

/* The change sets of the versions leaving retention (drop and older, k of them) join the ring,
 * oldest first: they stay chained (drop->cs is the newer set's `older`) until they are folded. */
static void lcq_push(ovs_column *c, ovs_version *drop, uint32_t k)
{
	uint32_t i = k;
	for (ovs_version *u = drop; u; u = atomic_load_explicit(&u->older, memory_order_relaxed)) {
		ovs_chset *s = u->cs; /* seal-owned chain */
		ovs_lcq_entry e = { s, s->ordinal, listed(s), cheap_fold(s) };
		c->lcq[(c->lcq_head + c->lcq_n + --i) & (c->lcq_cap - 1)] = e;
		c->lcq_rows += e.listed;
	}
	c->lcq_n += k;
	/* relaxed: a hint for ovs_lc_unfolded (folds decide from what they pin) */
	atomic_store_explicit(&c->lcfold.left, drop->ordinal, memory_order_relaxed);
}

/* Cuts the versions beyond the retention depth from the chain starting at `head` and returns them
 * (the caller drops them after the grace period: a reader may be walking into them). Their change
 * sets stay chained for range reads (lcq_push), to be folded off the seal's path (fold.h). */
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
	uint32_t k = 0; /* usually one version */
	for (ovs_version *u = drop; u; u = atomic_load_explicit(&u->older, memory_order_relaxed), k++)
		/* a pooled set's rows are the delta's: its copy first (usually the fold job made it) */
		if (!ovs_chset_copy(u->cs))
			return NULL; /* out of memory: cut nothing now (the next seal cuts them) */
	if (!lcq_reserve(c, k))
		return NULL;
	lcq_push(c, drop, k);
	c->oldest = v;
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

/* Keeps a cut change-set chain (its reference) until the grace period ends. */
static bool bury_sets(ovs_limbo *g, ovs_chset *s)
{
	if (g->ncs == g->cscap) {
		size_t cap = g->cscap ? g->cscap * 2 : 8;
		ovs_chset **ns = realloc(g->cs, cap * sizeof *ns);
		if (!ns)
			return false;
		g->cs = ns;
		g->cscap = cap;
	}
	g->cs[g->ncs++] = s;
	return true;
}

/* Cuts the change sets that a fold finished from the chain (below the oldest unfolded one, or
 * below the oldest retained version's set), into the limbo. O(1) per set. */
static void cut_folded(ovs_limbo *g, ovs_column *c, ovs_version *oldest)
{
	if (!c->lcq_n)
		return;
	/* acquire: pairs with the fold's release store; the sets at or below it are in the table
	 * before this cut (release below) lets a reader find the chain without them */
	uint64_t folded = atomic_load_explicit(&c->lcfold.folded, memory_order_acquire);
	uint32_t k = 0;
	while (k < c->lcq_n && lcq_at(c, k)->ordinal <= folded)
		k++;
	if (!k)
		return;
	ovs_chset *x = k < c->lcq_n ? lcq_at(c, k)->set : oldest->cs; /* the set whose `older` is cut */
	ovs_chset *cut = atomic_load_explicit(&x->older, memory_order_relaxed); /* = lcq_at(c, k - 1) */
	if (!bury_sets(g, cut))
		return; /* out of memory: they stay chained; a later seal cuts them */
	/* release: pairs with readers' acquire loads of `older` (pin_unfolded in grace.c) */
	atomic_store_explicit(&x->older, NULL, memory_order_release);
	for (uint32_t i = 0; i < k; i++)
		c->lcq_rows -= lcq_at(c, i)->listed;
	c->lcq_head = (c->lcq_head + k) & (c->lcq_cap - 1);
	c->lcq_n -= k;
}

/* Folds the oldest unfolded sets of c's ring while they are cheap, so that a stream of full or
 * block writes never needs the fold job (waking a sleeping worker every OVS_LC_PENDING_SETS seals:
 * a futex wake in the seal and the worker's run on a core the producer or a reader wanted, perf,
 * session 12). The ring's sets are chained and the chain is seal-owned: no pin is needed. A fold
 * that holds the flag (the job, a range read) makes us skip: it folds them. */
static void fold_cheap(ovs_column *c)
{
	if (!c->lcq_n || !lcq_at(c, c->lcq_n - 1)->cheap || !ovs_lc_fold_trylock(&c->lcfold))
		return;
	/* relaxed: only holders of the flag store it, and the trylock acquired the last holder's */
	uint64_t folded = atomic_load_explicit(&c->lcfold.folded, memory_order_relaxed);
	for (uint32_t i = 0; i < c->lcq_n; i++) { /* oldest first, as every fold */
		const ovs_lcq_entry *e = lcq_at(c, i);
		if (e->ordinal <= folded)
			continue;
		if (!e->cheap || !ovs_lc_fold_set(&c->lcfold, e->set))
			break;
		/* release: the set's entries before the ordinal that says they are there (readers'
		 * acquire loads of `folded`, and cut_folded's at the next seal) */
		atomic_store_explicit(&c->lcfold.folded, e->ordinal, memory_order_release);
	}
	ovs_lc_fold_unlock(&c->lcfold);
}

/* Whether c's unfolded change sets passed the bound at which the fold job runs (lastchange.h). */
static bool fold_due(ovs_column *c)
{
	/* relaxed: rows allocated so far, a size for the bound */
	uint64_t rows = atomic_load_explicit(&c->nrows, memory_order_relaxed);
	return c->lcq_n >= OVS_LC_PENDING_SETS || c->lcq_rows >= (rows > OVS_LC_PENDING_ROWS ? rows : OVS_LC_PENDING_ROWS);
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

static_assert(sizeof(ovs_snapshot) % sizeof(void *) == 0, "the arrays after a snapshot are aligned");

/* A snapshot holds no references of its own: every version it names is its column's latest or was
 * cut from the chain no earlier than the seal that retires the snapshot, and a cut version waits in
 * the same limbo as that snapshot (a seal that fails keeps its cuts there until the next
 * publication retires the snapshot that still names them). Two atomic RMWs per column and seal
 * fewer, on lines the seal would not touch otherwise (session 20). */
static void free_snapshot(ovs_snapshot *snap)
{
	free(snap); /* its arrays are in the same block (publish) */
}

/* Frees what the limbo holds (its readers have left), harvesting spare buffers if asked. The
 * structs go to the store's cache and full deltas to their columns' handoff slots (sealer). */
static void empty_limbo(ovs_store *st, bool harvest)
{
	ovs_limbo *g = &st->limbo;
	for (size_t i = 0; i < g->n; i++) {
		if (harvest)
			ovs_chunks_harvest(g->c[i], g->v[i]);
		ovs_version_release(st, g->c[i], g->v[i]);
	}
	g->n = 0;
	for (size_t i = 0; i < g->ncs; i++)
		ovs_chset_release(g->cs[i], &st->recycle);
	g->ncs = 0;
	free_snapshot(g->snap);
	g->snap = NULL;
	g->used = false;
}

/* Waits until the readers that could reach the limbo's contents have left, then frees them. */
static void reclaim_limbo(ovs_store *st)
{
	ovs_limbo *g = &st->limbo;
	if (!g->used)
		return;
	ovs_grace_wait(&st->grace, g->parity);
	empty_limbo(st, true);
}

/* acquire/release: the hook and whatever the test prepared for it are published together. */
static _Atomic(ovs_seal_hook_fn) g_seal_hook;

void ovs_seal_set_test_hook(ovs_seal_hook_fn fn)
{
	atomic_store_explicit(&g_seal_hook, fn, memory_order_release);
}

/* Seals one column's pending deltas through n: builds a version per ordinal, chains it, trims
 * retention. The inbox was taken by the caller. */
static ovstage_api_status_t seal_column(ovs_store *st, ovs_exec *x, ovs_exec_last *devx, ovs_column *c,
					ovstage_ordinal_t n, ovs_limbo *gy, bool *fold, bool *copy, int64_t *sealed,
					char *err, size_t errlen)
{
	if (c->latest) /* the change sets folded since the last seal leave the chain */
		cut_folded(gy, c, c->oldest);
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
		ovs_version *v = ovs_version_build(st, x, devx, c, c->latest, ds, err, errlen);
		if (!v) {
			/* keep the deltas for a later seal */
			last->next = c->pending;
			c->pending = ds;
			return OVSTAGE_ERROR_OUT_OF_MEMORY;
		}
		*sealed += sealed_bytes; /* subtracted once per batch (ovs_store_seal) */
		/* relaxed: an estimate; the sealer alone stores it */
		atomic_store_explicit(&c->seal_cost_sealed,
				      atomic_load_explicit(&c->seal_cost_sealed, memory_order_relaxed) + sealed_cost,
				      memory_order_relaxed);
		/* relaxed: published to readers by the snapshot's release store. The chain's reference
		 * moves to the new version. */
		atomic_store_explicit(&v->older, c->latest, memory_order_relaxed);
		if (!c->latest)
			c->oldest = v;
		c->latest = v;
		bury(gy, c, trim_retention(c, v, st->retention));
		fold_cheap(c);
		*fold |= fold_due(c);
		*copy |= v->cs->pooled; /* the fold job copies its rows while v is retained */
		ovs_seal_hook_fn hook = atomic_load_explicit(&g_seal_hook, memory_order_acquire);
		if (hook)
			hook();
	}
	return OVSTAGE_OK;
}

/* The end of the next batch: the `batch`-th distinct pending ordinal above `from` across the
 * columns, or n if fewer are pending at or below n. The pending lists are sorted. */
static ovstage_ordinal_t batch_end(ovs_column **cols, size_t ncols, ovstage_ordinal_t from, ovstage_ordinal_t n,
				   uint32_t batch)
{
	ovstage_ordinal_t cur = from;
	for (uint32_t k = 0; k < batch; k++) {
		ovstage_ordinal_t next = n;
		for (size_t i = 0; i < ncols; i++) {
			const ovs_delta *d = cols[i]->pending;
			while (d && d->ordinal <= cur)
				d = d->next;
			if (d && d->ordinal < next)
				next = d->ordinal;
		}
		if (next >= n)
			return n;
		cur = next;
	}
	return cur;
}

/* Publishes a snapshot of every column's latest version and raises the floors of `cols` to m. */
static ovstage_api_status_t publish(ovs_store *st, ovs_column **cols, size_t ncols, ovstage_ordinal_t m,
				    bool advance_stage_floor, char *err, size_t errlen)
{
	size_t total = atomic_load_explicit(&st->ncols, memory_order_acquire);
	ovs_column **all = atomic_load_explicit(&st->cols, memory_order_acquire);
	/* One block: the snapshot, then its version and column arrays (pointers: aligned after it). */
	size_t slots = total ? total : 1;
	ovs_snapshot *snap = malloc(sizeof *snap + slots * (sizeof(ovs_version *) + sizeof(ovs_column *)));
	if (!snap) {
		ovs_err_format(err, errlen, "out of memory publishing a snapshot");
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	ovs_version **sv = (ovs_version **)(void *)(snap + 1);
	ovs_column **sc = (ovs_column **)(void *)(sv + slots);
	/* Entry i is column i (ovs_snapshot_version looks a column up by its index), NULL where it has no
	 * version yet. */
	for (size_t i = 0; i < total; i++) {
		sc[i] = all[i];
		sv[i] = all[i]->latest; /* no reference (free_snapshot) */
	}
	snap->cols = sc;
	snap->versions = sv;
	snap->ncols = total;
	ovs_snapshot *prev = ovs_grace_snapshot_owner(&st->grace);
	snap->seq = prev ? prev->seq + 1 : 1;
	/* The versions (and everything sealed into them) become visible to readers all at once. */
	ovs_snapshot *old = ovs_grace_publish(&st->grace, snap);
	/* Floors move after the snapshot: a reader that sees floor >= m then reads a snapshot that
	 * holds ordinal m. release: orders the snapshot store before the floor. */
	for (size_t i = 0; i < ncols; i++) {
		uint64_t f = atomic_load_explicit(&cols[i]->floor, memory_order_relaxed);
		if (m > f)
			atomic_store_explicit(&cols[i]->floor, m, memory_order_release);
	}
	if (advance_stage_floor && m > atomic_load_explicit(&st->all_floor, memory_order_relaxed))
		atomic_store_explicit(&st->all_floor, m, memory_order_release);
	ovs_floor_notify(st); /* threads waiting for a floor look again */
	/* Retire the old snapshot and the cut versions: new readers use the other counter from the
	 * flip on and cannot reach them. */
	ovs_limbo *gy = &st->limbo;
	gy->snap = old;
	gy->parity = ovs_grace_flip(&st->grace);
	gy->used = true;
	/* Usually nobody is inside: free now; otherwise the next batch or seal waits for them (by then
	 * they have left: a pin is a few dozen instructions). */
	if (ovs_grace_quiet(&st->grace, gy->parity))
		empty_limbo(st, true);
	return OVSTAGE_OK;
}

ovstage_api_status_t ovs_store_seal(ovs_store *st, ovs_exec *x, ovs_column **cols, size_t ncols,
				    ovstage_ordinal_t n, bool advance_stage_floor, char *err, size_t errlen)
{
	/* The previous seal's retirees first (their spare buffers serve this seal's sparse versions). */
	reclaim_limbo(st);
	ovs_limbo *gy = &st->limbo;
	for (size_t i = 0; i < ncols; i++)
		if (!ovs_column_take_inbox(cols[i])) {
			ovs_err_format(err, errlen, "out of memory sorting pending writes of a column");
			return OVSTAGE_ERROR_OUT_OF_MEMORY;
		}
	/* Publish in batches of at most OVS_SEAL_BATCH ordinals: the versions cut from retention wait in
	 * the limbo only until their batch is published, so a seal that catches up on many ordinals
	 * holds a bounded number of retired versions, and readers see its progress. Each publication
	 * holds every ordinal up to its end, in every column of the scope. */
	uint32_t batch = st->retention / 2 > OVS_SEAL_BATCH ? OVS_SEAL_BATCH : (st->retention / 2 ? st->retention / 2 : 1);
	ovstage_ordinal_t done = 0;
	bool fold = false, copy = false; /* unfolded change sets passed the bound; a set to copy */
	ovs_exec_last devx = { 0 };      /* the device contexts of the seal's columns (device.h) */
	for (;;) {
		ovstage_ordinal_t m = batch_end(cols, ncols, done, n, batch);
		int64_t sealed = 0; /* the batch's sealed bytes: one locked subtraction, not one per column */
		for (size_t i = 0; i < ncols; i++) {
			ovstage_api_status_t s = seal_column(st, x, &devx, cols[i], m, gy, &fold, &copy, &sealed, err,
							     errlen);
			if (s != OVSTAGE_OK) {
				ovs_unsealed_add(st, -sealed);
				/* Versions built so far stay chained (the next seal publishes them, so they get
				 * their ready events now); the ones cut from retention stay in the limbo, unretired:
				 * the published snapshot may still name them, and the next publication retires it
				 * with them (free_snapshot). */
				ovs_version_ready_assign(st, x, &devx, cols, i + 1);
				return s;
			}
		}
		ovs_unsealed_add(st, -sealed);
		for (size_t i = 0; i < ncols; i++)
			ovs_column_min_unsealed_reset(cols[i]);
		ovs_version_ready_assign(st, x, &devx, cols, ncols); /* one event per device for the batch */
		ovstage_api_status_t s = publish(st, cols, ncols, m, advance_stage_floor, err, errlen);
		if (s == OVSTAGE_OK && m >= n && (fold || copy))
			ovs_lc_job_kick(st, fold); /* after the publication: the job never delays it */
		if (s != OVSTAGE_OK || m >= n)
			return s;
		reclaim_limbo(st); /* the batch's retirees, before the next batch cuts more */
		done = m;
	}
}

void ovs_seal_fini(ovs_store *st)
{
	empty_limbo(st, false); /* no readers are left at destroy */
	free(st->limbo.v);
	free(st->limbo.c);
	free(st->limbo.cs);
	free_snapshot(ovs_grace_snapshot_owner(&st->grace));
}

void ovs_floor_notify(ovs_store *st)
{
	/* seq_cst (both): a Dekker pair with ovstage_ext_wait_write_floor, which increments floor_waiters
	 * (seq_cst) before it reads floor_seq and the floors. Either this load sees the waiter, or the
	 * waiter's read of floor_seq comes after this bump in the single total order — and then also its
	 * reads of the floors, stored before the bump — so it never sleeps on a floor already reached. */
	atomic_fetch_add_explicit(&st->floor_seq, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&st->floor_waiters, memory_order_seq_cst))
		jobs_futex_wake(&st->floor_seq, INT32_MAX);
}
