/*
 * block_cache.h — free memory blocks kept for reuse, by size class, under a byte budget shared by
 * every cache of one device. The CUDA backend keeps one cache per stage context on a device (its
 * blocks are reused in the order of that context's engine stream, so a block is reusable the moment
 * it is given back: every earlier user of it was issued on the same stream), and one budget per
 * device. The cache knows nothing about CUDA: blocks are opaque pointers, and the owner's `release`
 * frees the ones the cache does not keep.
 *
 * Contract
 *  - Sizes: a request of `bytes` is served by a block of its class (size_class.h); the owner
 *    allocates ovs_block_cache_capacity(budget, bytes) on a miss and gives the block back with the
 *    same `bytes` (or its capacity). Requests whose class capacity exceeds the bound are never
 *    cached, and their capacity is `bytes` itself (no rounding: a block the cache will not keep
 *    should not waste a quarter of itself).
 *  - take: a cached block of the class, newest first, or NULL (a miss). Counted as a hit or a miss.
 *  - give: keeps the block when the budget allows, evicting this cache's blocks given back longest
 *    ago to make room (released through `release`, outside the lock); false when it cannot keep
 *    it: the caller releases it. The budget's `retained` never exceeds its bound.
 *  - A bound <= 0 turns caching off: every take misses and every give returns false.
 *  - drain: releases every cached block (the owner's teardown).
 *
 * Progress: a mutex per cache, held for O(1) list operations (an eviction pass collects blocks under
 * it and releases them after). Not lock-free, deliberately: every caller pairs a take or give with
 * CUDA runtime calls that serialise on the driver's own lock, so a lock-free list would not make the
 * path lock-free, and the mutex keeps the age order that eviction needs in O(1). The budget's
 * counters are atomics shared across caches.
 *
 * Thread safety: every function may be called from any thread; a cache is used by many threads at
 * once (writers, sealers, readers of one stage). init/drain are not concurrent with other calls.
 */
#ifndef OVSTAGE_ENGINE_BLOCK_CACHE_H
#define OVSTAGE_ENGINE_BLOCK_CACHE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "size_class.h"

/* The shared limit of one device, and its statistics (relaxed counters: exact when quiescent). */
typedef struct ovs_block_budget {
	int64_t bound;                 /* the most bytes retained across its caches (<= 0: off); set
	                                * before the first cache uses it, then read-only */
	_Atomic int64_t retained;      /* bytes of blocks cached now, every cache of the budget, and of
	                                * blocks reserved outside them (ovs_block_budget_reserve) */
	_Atomic uint64_t hits;         /* takes served from a cache */
	_Atomic uint64_t misses;       /* takes that found nothing */
	_Atomic uint64_t releases;     /* blocks handed to `release` or refused by give */
} ovs_block_budget;

typedef struct ovs_block_node ovs_block_node;

typedef struct ovs_block_cache {
	pthread_mutex_t lock;                        /* guards the lists and `bytes` */
	ovs_block_node *classes[OVS_SIZE_CLASSES];   /* cached blocks per class, newest first */
	ovs_block_node *newest, *oldest;             /* the age list of every cached block */
	ovs_block_node *spare;                       /* nodes not in use (reused, freed at drain) */
	int64_t bytes;                               /* capacity of the cached blocks, this cache */
	ovs_block_budget *budget;                    /* the device's limit (shared) */
	void (*release)(void *ctx, void *p, size_t capacity); /* frees a block the cache lets go */
	void *ctx;                                   /* release's first argument */
} ovs_block_cache;

void ovs_block_budget_init(ovs_block_budget *b, int64_t bound);

void ovs_block_cache_init(ovs_block_cache *c, ovs_block_budget *budget,
			  void (*release)(void *ctx, void *p, size_t capacity), void *ctx);
/* Releases every cached block and the cache's own memory. */
void ovs_block_cache_drain(ovs_block_cache *c);

/* What the owner allocates on a miss for a request of `bytes` (see the contract). */
size_t ovs_block_cache_capacity(const ovs_block_budget *b, size_t bytes);
/* A cached block for a request of `bytes`, or NULL. */
void *ovs_block_cache_take(ovs_block_cache *c, size_t bytes);
/* Gives back block p, allocated for `bytes` (or its capacity); false: not kept, release it. */
bool ovs_block_cache_give(ovs_block_cache *c, void *p, size_t bytes);

/* A block of `bytes` kept for reuse outside every cache (a column's handoff slot, handoff.h) is
 * retained memory too: reserve counts its capacity against the bound (false: no room, or caching
 * is off; then it must not be kept), unreserve uncounts it when it leaves, counting a hit if it
 * serves an allocation there (`hit`). Lock-free (a CAS loop on `retained`). */
bool ovs_block_budget_reserve(ovs_block_budget *b, size_t bytes);
void ovs_block_budget_unreserve(ovs_block_budget *b, size_t bytes, bool hit);

#endif /* OVSTAGE_ENGINE_BLOCK_CACHE_H */
