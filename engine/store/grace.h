/*
 * grace.h — the snapshot grace period: how readers reach the latest sealed versions without locks,
 * and when the sealer may free what a seal retired.
 *
 * Contract
 *  - Readers never touch the grace section themselves: they *pin* versions (ovs_pin_latest,
 *    ovs_pin_all_latest, ovs_pin_history) and later unpin them (ovs_unpin). A pinned version and
 *    everything it references (chunks, runs, presence, changed rows, blobs) stay valid and unchanged
 *    until it is unpinned, while later seals publish newer versions.
 *  - The sealer (one per stage at a time: seals are chained by the op ordering) publishes a snapshot
 *    (ovs_grace_publish), then retires the previous one and the versions it cut from retention:
 *    ovs_grace_flip returns the parity that protects them, and they may be freed once
 *    ovs_grace_quiet(parity) is true (or after ovs_grace_wait(parity)).
 *
 * Progress: pins are lock-free (a reader retries only when a seal flipped the parity between its
 * two loads, which happens at most once per seal); unpin is wait-free; publish and flip are wait-free;
 * ovs_grace_wait blocks until the readers of one parity have left (each is inside a section of a few
 * dozen instructions, so it spins, then yields).
 *
 * Proof (C11; the orders below are the ones in grace.c, each named at its site)
 *  Reader R: p = load(parity); RMW readers[p] += 1 (seq_cst); q = load(parity) (seq_cst);
 *            if q != p { readers[p] -= 1; retry } ; s = load(snapshot) (acquire); take references;
 *            readers[p] -= 1 (release).
 *  Sealer S: store(snapshot, new) (release); store(parity, p ^ 1) (seq_cst); ...;
 *            free the old snapshot and the cut versions only after load(readers[p]) (seq_cst) == 0.
 *  1. Nothing R can reach is freed under it. The four seq_cst operations lie in one total order S.
 *     If R's re-check reads p (the old parity), it precedes the flip in S, so R's increment does
 *     too, and the sealer's seq_cst load of readers[p], after the flip in S, reads R's increment
 *     or a later value: the sealer sees R inside until R's release decrement, which then
 *     happens-before the free (the load that reads 0 is also an acquire). If R's re-check reads
 *     p ^ 1, it read the flip, which is a release store after the snapshot store in the sealer's
 *     order: R's snapshot load reads the new snapshot or a later one, never the retired one.
 *     R reaching the retired snapshot after re-checking p would need the load of parity to precede
 *     the flip — the case above.
 *  2. R sees complete versions: everything a seal builds is written before the release store of
 *     the snapshot that R's acquire load reads (or a later one in its release sequence: snapshots
 *     are published by one thread, each after the previous).
 *  3. Versions cut from a chain (`older` set to NULL with release) stay alive until the grace period
 *     of the seal that cut them ends, so a reader that loaded the old link inside its section may
 *     follow it and take a reference.
 *  The protocol is model-checked in verify/ (spin), with the two variants that break it.
 *
 * Layout: the snapshot pointer and the parity (written together by the sealer once per publication,
 * read by every pin) share one cache line; the reader counters are sharded over OVS_GRACE_SHARDS
 * lines, so a pin's RMWs touch its own thread's line and never the one other readers load the
 * snapshot from. One shared counter line made the read side collapse with threads: 1.5 M sections/s
 * per thread at 16 threads against ck_epoch's 73 M (bench/ck, 16 cores). The sealer pays one load
 * per shard at each publication.
 *
 * Sharding keeps the proof: each reader's increment and re-check, and the sealer's seq_cst load of
 * that reader's shard after the flip, are the same four seq_cst operations in S as with one counter;
 * the sealer frees only when every shard of the old parity reads 0.
 */
#ifndef OVSTAGE_ENGINE_GRACE_H
#define OVSTAGE_ENGINE_GRACE_H

#include <assert.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

#define OVS_CACHE_LINE 64

/* Reader counters are sharded: a thread counts itself in its own shard (threads are spread over the
 * shards round-robin at their first pin), so pins on different threads touch different lines. "The
 * readers of parity p" is the sum over the shards of n[p]. */
#define OVS_GRACE_SHARDS 16
typedef struct ovs_grace_shard {
	_Alignas(OVS_CACHE_LINE) _Atomic uint64_t n[2]; /* readers of this shard inside, per parity */
} ovs_grace_shard;

typedef struct ovs_grace {
	/* written by the sealer once per publication, read by every pin: one line, one miss per seal */
	_Alignas(OVS_CACHE_LINE) _Atomic(ovs_snapshot *) snapshot; /* the latest sealed state */
	_Atomic uint32_t parity;                                   /* which counter new readers use */
	ovs_grace_shard shards[OVS_GRACE_SHARDS];                  /* RMW by pins, read by the sealer */
} ovs_grace;

static_assert(offsetof(ovs_grace, shards) == OVS_CACHE_LINE, "the shards after the first line");
static_assert(sizeof(ovs_grace_shard) == OVS_CACHE_LINE, "one shard per line");

void ovs_grace_init(ovs_grace *g);

/* The raw section, for the pins in grace.c and for benchmarks (bench/ck): enter returns the parity
 * to leave with; leave must run on the entering thread. Inside, ovs_grace_snapshot_acq loads the
 * snapshot (acquire). */
unsigned ovs_grace_enter(ovs_grace *g);
void ovs_grace_leave(ovs_grace *g, unsigned p);
ovs_snapshot *ovs_grace_snapshot_acq(ovs_grace *g);

/* Sealer side. */
/* Publishes a new snapshot (release): every version it holds is complete. Returns the previous. */
ovs_snapshot *ovs_grace_publish(ovs_grace *g, ovs_snapshot *snap);
/* Flips the parity; returns the parity whose readers may still reach what was retired before. */
unsigned ovs_grace_flip(ovs_grace *g);
/* Whether every reader of parity p has left (then what p protects may be freed). */
bool ovs_grace_quiet(ovs_grace *g, unsigned p);
/* Waits until ovs_grace_quiet(g, p). */
void ovs_grace_wait(ovs_grace *g, unsigned p);
/* The current snapshot, for the sealer (which alone replaces it) and for destroy. */
ovs_snapshot *ovs_grace_snapshot_owner(ovs_grace *g);

/* Reader side: pins. Each pinned version holds one reference, dropped by ovs_unpin. */
/* The latest sealed version of each of n columns, all from one snapshot; out[i] = NULL where a
 * column has none. */
void ovs_pin_latest(ovs_grace *g, ovs_column *const *cols, size_t n, ovs_version **out);
/* Every column of one snapshot that has a version, restricted to `names` when nnames > 0 (in the
 * order of names), at most cap; returns how many were pinned into cols/vers. */
size_t ovs_pin_all_latest(ovs_grace *g, const ovx_token_t *names, size_t nnames, ovs_column **cols,
			  ovs_version **vers, size_t cap);
/* The history of column c for a read up to ordinal `end`: out[0] = the version as of end (the newest
 * at or below it), then, when has_start, older versions back to (and including) the first one below
 * `start` or written in full — at most cap. Returns how many were pinned; *had_any tells whether c
 * had any sealed version at all (false: a column that was never sealed). */
size_t ovs_pin_history(ovs_grace *g, ovs_column *c, ovstage_ordinal_t end, bool has_start,
		       ovstage_ordinal_t start, ovs_version **out, size_t cap, bool *had_any);
/* Latest reads of n columns up to `end` in one grace section: out[i] = the newest version of cols[i]
 * at or below end, pinned, or NULL (none, or cols[i] NULL); had[i] as *had_any of ovs_pin_history.
 * The same as n calls of ovs_pin_history without a start, from one snapshot and with one enter and
 * leave: a 100-column read made 200 locked RMWs on its shard's line for them. */
void ovs_pin_history_many(ovs_grace *g, ovs_column *const *cols, size_t n, ovstage_ordinal_t end, ovs_version **out,
			  bool *had);
/* What a range read pins (ovs_pin_range). The caller provides v (room for cap versions) and sets
 * (room for setcap change sets). */
typedef struct ovs_range_pins {
	ovs_version **v;          /* newest first: the version as of end (the newest at or below it) and
	                           * every older version the chain still reaches (asof), or, when the
	                           * chain no longer reaches the state as of end, the newest version and
	                           * every older one (!asof) */
	size_t n, cap;            /* versions (also when more than cap: then none pinned), room */
	ovs_chset **sets;         /* then, newest first, the change sets below the last of them that are
	                           * not folded yet (ordinal above `folded`); older ones are in the
	                           * column's fold table (lastchange.h) */
	size_t nsets, setcap;     /* sets (also when more than setcap: then none pinned), room */
	uint64_t folded;          /* the column's `folded` that decided which sets were pinned */
	bool asof, had_any;       /* had_any as for ovs_pin_history */
} ovs_range_pins;
/* A range read ending at `end`: pins into p as described there. Returns p->n; when p->n > p->cap or
 * p->nsets > p->setcap nothing was pinned (retry with room for the counts). Unpin each version
 * (ovs_unpin) and each set (ovs_chset_unref). */
size_t ovs_pin_range(ovs_grace *g, ovs_column *c, ovstage_ordinal_t end, ovs_range_pins *p);
/* For a holder of c's fold flag: pins into out the oldest (at most cap) change sets below the
 * chain of c's latest published version that are not folded yet, newest first; returns how many. */
size_t ovs_pin_unfolded(ovs_grace *g, ovs_column *c, ovs_chset **out, size_t cap);
/* Drops a pin (NULL is ignored). */
void ovs_unpin(ovs_version *v);

#endif /* OVSTAGE_ENGINE_GRACE_H */
