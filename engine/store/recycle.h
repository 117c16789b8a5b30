/*
 * recycle.h — the sealer's object cache: version, change-set and chunk structs that a seal let go of,
 * kept for the versions the next seals build. A stream of full writes retires a version, its change
 * set and its chunk per column per seal and builds the same again, so in the steady state a seal
 * calls the allocator for none of them (session 13: ~40 allocations and frees per 8-column commit of
 * bench/stage row (b) before).
 *
 * Seal-owned: only the seal in progress pops or pushes (seals of a stage run one after another,
 * ordered by their receipts' release/acquire chain), so the lists take no lock and no atomic. An
 * object whose last reference another thread drops (a reader's release of a group) is freed there,
 * as before. Each list is bounded (OVS_RECYCLE_MAX); what does not fit is freed.
 */
#ifndef OVSTAGE_ENGINE_RECYCLE_H
#define OVSTAGE_ENGINE_RECYCLE_H

#include <stddef.h>
#include <stdint.h>

/* Objects a list keeps at most: a seal of this many columns finds every struct it needs cached. */
#define OVS_RECYCLE_MAX 256u

/* Free objects of one kind, linked through their first pointer-sized word. */
typedef struct ovs_recycle_list {
	void *head;                /* newest first (warm in the cache) */
	uint32_t n;                /* entries */
} ovs_recycle_list;

/* The store's cache (ovs_store.recycle; seal-owned). */
typedef struct ovs_recycle {
	ovs_recycle_list versions; /* ovs_version structs */
	ovs_recycle_list chsets;   /* ovs_chset structs */
	ovs_recycle_list chunks;   /* ovs_chunk structs */
} ovs_recycle;

/* An object of `size` bytes: a cached one (l non-NULL and not empty) or malloc'd; its bytes
 * are not initialised. NULL when out of memory. */
void *ovs_recycle_get(ovs_recycle_list *l, size_t size);
/* Keeps p for a later ovs_recycle_get of the list (l non-NULL and with room), else frees it. */
void ovs_recycle_put(ovs_recycle_list *l, void *p);
/* Frees every cached object (store destroy). */
void ovs_recycle_fini(ovs_recycle *rc);

#endif /* OVSTAGE_ENGINE_RECYCLE_H */
