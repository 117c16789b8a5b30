/* grace.c — the snapshot grace period and version pins (see grace.h for the contract and proof). */
#include "grace.h"

#include <sched.h>
#include <stdint.h>

#include "store.h"
#include "seal.h"
#include "version.h"

void ovs_grace_init(ovs_grace *g)
{
	atomic_init(&g->snapshot, NULL);
	atomic_init(&g->parity, 0);
	for (unsigned i = 0; i < OVS_GRACE_SHARDS; i++) {
		atomic_init(&g->shards[i].n[0], 0);
		atomic_init(&g->shards[i].n[1], 0);
	}
}

/* This thread's shard: assigned round-robin at the first pin, then fixed (a section is left on the
 * thread that entered it, so enter and leave find the same counter). */
static _Atomic unsigned g_next_shard;
static _Thread_local unsigned tls_shard = UINT32_MAX;

static _Atomic uint64_t *shard_counter(ovs_grace *g, unsigned p)
{
	if (tls_shard == UINT32_MAX)
		/* relaxed: only a spread of threads over the shards; any value is correct. */
		tls_shard = atomic_fetch_add_explicit(&g_next_shard, 1, memory_order_relaxed) % OVS_GRACE_SHARDS;
	return &g->shards[tls_shard].n[p];
}

unsigned ovs_grace_enter(ovs_grace *g)
{
	for (;;) {
		/* relaxed: only a guess of the counter to use; the seq_cst re-check below decides. */
		unsigned p = atomic_load_explicit(&g->parity, memory_order_relaxed);
		_Atomic uint64_t *c = shard_counter(g, p);
		/* seq_cst RMW, then seq_cst load: the reader's half of the Dekker pattern (grace.h, 1). */
		atomic_fetch_add_explicit(c, 1, memory_order_seq_cst);
		if (atomic_load_explicit(&g->parity, memory_order_seq_cst) == p)
			return p;
		/* relaxed: we read nothing under this count; the sealer waiting on it loses nothing. */
		atomic_fetch_sub_explicit(c, 1, memory_order_relaxed);
	}
}

void ovs_grace_leave(ovs_grace *g, unsigned p)
{
	/* release: our reads of the snapshot and our reference increments happen-before the sealer's
	 * load that reads the counter at zero (seq_cst, hence also acquire). */
	atomic_fetch_sub_explicit(shard_counter(g, p), 1, memory_order_release);
}

ovs_snapshot *ovs_grace_snapshot_acq(ovs_grace *g)
{
	/* acquire: pairs with ovs_grace_publish (grace.h, 2). */
	return atomic_load_explicit(&g->snapshot, memory_order_acquire);
}

ovs_snapshot *ovs_grace_publish(ovs_grace *g, ovs_snapshot *snap)
{
	/* relaxed: the sealer alone stores the snapshot. */
	ovs_snapshot *old = atomic_load_explicit(&g->snapshot, memory_order_relaxed);
	/* release: the versions and everything sealed into them are visible to readers that load it. */
	atomic_store_explicit(&g->snapshot, snap, memory_order_release);
	return old;
}

unsigned ovs_grace_flip(ovs_grace *g)
{
	/* relaxed: the sealer alone stores the parity. */
	unsigned p = atomic_load_explicit(&g->parity, memory_order_relaxed);
	/* seq_cst: the sealer's half of the Dekker pattern (grace.h, 1); also a release of the snapshot
	 * store before it, for readers that see the flip. */
	atomic_store_explicit(&g->parity, p ^ 1u, memory_order_seq_cst);
	return p;
}

bool ovs_grace_quiet(ovs_grace *g, unsigned p)
{
	/* seq_cst: each load must follow the flip in the total order S (grace.h, 1); an acquire load
	 * could miss a reader's increment that precedes the flip. Also acquires the readers' release
	 * decrements. */
	for (unsigned i = 0; i < OVS_GRACE_SHARDS; i++)
		if (atomic_load_explicit(&g->shards[i].n[p], memory_order_seq_cst) != 0)
			return false;
	return true;
}

void ovs_grace_wait(ovs_grace *g, unsigned p)
{
	for (unsigned spins = 0; !ovs_grace_quiet(g, p);)
		if (++spins > 64)
			sched_yield();
}

ovs_snapshot *ovs_grace_snapshot_owner(ovs_grace *g)
{
	/* relaxed: called by the sealer (the only writer) or at destroy (after every thread left). */
	return atomic_load_explicit(&g->snapshot, memory_order_relaxed);
}

void ovs_pin_latest(ovs_grace *g, ovs_column *const *cols, size_t n, ovs_version **out)
{
	unsigned p = ovs_grace_enter(g);
	ovs_snapshot *snap = ovs_grace_snapshot_acq(g);
	for (size_t i = 0; i < n; i++) {
		out[i] = cols[i] ? ovs_snapshot_version(snap, cols[i]) : NULL;
		if (out[i])
			ovs_version_ref(out[i]);
	}
	ovs_grace_leave(g, p);
}

/* Pins entry i of snap into cols/vers at *k. */
static void pin_entry(const ovs_snapshot *snap, size_t i, ovs_column **cols, ovs_version **vers, size_t *k)
{
	cols[*k] = snap->cols[i];
	vers[*k] = snap->versions[i];
	ovs_version_ref(vers[(*k)++]);
}

size_t ovs_pin_all_latest(ovs_grace *g, const ovx_token_t *names, size_t nnames, ovs_column **cols,
			  ovs_version **vers, size_t cap)
{
	size_t k = 0;
	unsigned p = ovs_grace_enter(g);
	ovs_snapshot *snap = ovs_grace_snapshot_acq(g);
	for (size_t j = 0; snap && j < (nnames ? nnames : 1); j++)
		for (size_t i = 0; i < snap->ncols && k < cap; i++) {
			if (!snap->versions[i] || (nnames && snap->cols[i]->name != names[j]))
				continue;
			pin_entry(snap, i, cols, vers, &k);
			if (nnames)
				break;
		}
	ovs_grace_leave(g, p);
	return k;
}

size_t ovs_pin_history(ovs_grace *g, ovs_column *c, ovstage_ordinal_t end, bool has_start,
		       ovstage_ordinal_t start, ovs_version **out, size_t cap, bool *had_any)
{
	size_t n = 0;
	unsigned p = ovs_grace_enter(g);
	ovs_version *v = ovs_snapshot_version(ovs_grace_snapshot_acq(g), c);
	*had_any = v != NULL;
	/* acquire on `older`: pairs with the seal's chain links (published by the snapshot) and with
	 * trim_retention's release store of NULL (grace.h, 3). */
	while (v && v->ordinal > end)
		v = atomic_load_explicit(&v->older, memory_order_acquire);
	for (; v && n < cap; v = atomic_load_explicit(&v->older, memory_order_acquire)) {
		ovs_version_ref(v);
		out[n++] = v;
		if (!has_start || v->ordinal < start || v->all_changed)
			break;
	}
	ovs_grace_leave(g, p);
	return n;
}

void ovs_pin_history_many(ovs_grace *g, ovs_column *const *cols, size_t n, ovstage_ordinal_t end, ovs_version **out,
			  bool *had)
{
	unsigned p = ovs_grace_enter(g);
	ovs_snapshot *snap = ovs_grace_snapshot_acq(g);
	for (size_t i = 0; i < n; i++) {
		ovs_version *v = cols[i] ? ovs_snapshot_version(snap, cols[i]) : NULL;
		had[i] = v != NULL;
		/* acquire on `older`: as in ovs_pin_history */
		while (v && v->ordinal > end)
			v = atomic_load_explicit(&v->older, memory_order_acquire);
		if (v)
			ovs_version_ref(v);
		out[i] = v;
	}
	ovs_grace_leave(g, p);
}

/* The change sets below the chain that ends at `last` (its versions left retention) with an
 * ordinal above `folded`, newest first: counts them all, pins (into out) those from index skip on,
 * at most cap (*pinned of them). Inside the grace section. */
static size_t pin_unfolded(const ovs_version *last, uint64_t folded, ovs_chset **out, size_t skip, size_t cap,
			   size_t *pinned)
{
	size_t n = 0, k = 0;
	/* acquire on `older`: pairs with the seal's links (published by the snapshot) and with the
	 * sealer's release store of NULL when it cuts folded sets (lastchange.h; grace.h, 3): a reader
	 * that finds the chain cut also sees the folds the cut waited for. */
	ovs_chset *s = last ? atomic_load_explicit(&last->cs->older, memory_order_acquire) : NULL;
	for (; s && s->ordinal > folded; s = atomic_load_explicit(&s->older, memory_order_acquire), n++)
		if (n >= skip && k < cap) {
			ovs_chset_ref(s);
			out[k++] = s;
		}
	*pinned = k;
	return n;
}

/* The last version of the chain from v (inside the grace section). */
static const ovs_version *chain_end(const ovs_version *v)
{
	/* acquire on `older`: as in ovs_pin_history */
	for (const ovs_version *o; v && (o = atomic_load_explicit(&v->older, memory_order_acquire));)
		v = o;
	return v;
}

size_t ovs_pin_range(ovs_grace *g, ovs_column *c, ovstage_ordinal_t end, ovs_range_pins *p)
{
	size_t n = 0;
	unsigned q = ovs_grace_enter(g);
	/* acquire: the sets at or below it are in the fold table, visible to this reader */
	uint64_t folded = atomic_load_explicit(&c->lcfold.folded, memory_order_acquire);
	ovs_version *top = ovs_snapshot_version(ovs_grace_snapshot_acq(g), c), *v = top;
	p->had_any = top != NULL;
	/* acquire on `older`: as in ovs_pin_history (what the chain no longer reaches is in the change
	 * sets below it: pin_unfolded) */
	while (v && v->ordinal > end)
		v = atomic_load_explicit(&v->older, memory_order_acquire);
	p->asof = v != NULL;
	if (!v)
		v = top; /* the state as of end is not reachable: the newest version and every older one */
	/* One walk that counts and pins (the first p->cap): a seal may cut the chain at any moment
	 * (trim_retention's release store of NULL into `older`; the grace section keeps the versions
	 * alive, not the links), so a second walk could end early. It counted first and pinned in a
	 * second walk, and dereferenced the NULL of a cut made in between (TSan's demo run in CI). What
	 * a cut drops is found in the change sets below the chain's end (pin_unfolded). */
	for (ovs_version *u = v; u; u = atomic_load_explicit(&u->older, memory_order_acquire), n++)
		if (n < p->cap) {
			ovs_version_ref(u);
			p->v[n] = u;
		}
	p->n = n;
	p->nsets = 0;
	if (n <= p->cap) {
		const ovs_version *last = n ? p->v[n - 1] : NULL;
		size_t k;
		p->nsets = pin_unfolded(last, folded, p->sets, 0, p->setcap, &k);
		if (p->nsets > p->setcap) /* pinned only some of them: drop those, retry with room */
			for (size_t i = 0; i < k; i++)
				ovs_chset_unref(p->sets[i]);
	}
	p->folded = folded;
	ovs_grace_leave(g, q);
	for (size_t i = 0; n > p->cap && i < p->cap; i++) /* too many: none stay pinned, the caller retries */
		ovs_version_unref(p->v[i]);
	return n;
}

size_t ovs_pin_unfolded(ovs_grace *g, ovs_column *c, ovs_chset **out, size_t cap)
{
	unsigned q = ovs_grace_enter(g);
	/* relaxed: the caller holds the fold flag, and only its holders store `folded` */
	uint64_t folded = atomic_load_explicit(&c->lcfold.folded, memory_order_relaxed);
	const ovs_version *last = chain_end(ovs_snapshot_version(ovs_grace_snapshot_acq(g), c));
	size_t k;
	size_t n = pin_unfolded(last, folded, out, 0, 0, &k); /* count only */
	(void)pin_unfolded(last, folded, out, n > cap ? n - cap : 0, cap, &k); /* the oldest cap */
	ovs_grace_leave(g, q);
	return k;
}

void ovs_unpin(ovs_version *v)
{
	if (v)
		ovs_version_unref(v);
}
