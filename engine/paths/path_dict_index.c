/*
 * path_dict_index.c — the path dictionary's building blocks: segmented record arrays, 64-bit
 * hashing and the sharded insert-only hash index (layout and protocol in path_dict_internal.h).
 */
#include "path_dict_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- segmented array ----------------------------------------------------------------------------- */

void pd_seg_init(pd_seg *s, size_t elem_size)
{
	for (size_t c = 0; c < PD_SEG_CHUNKS; c++)
		atomic_init(&s->chunks[c], NULL);
	s->elem_size = elem_size;
}

void pd_seg_fini(pd_seg *s)
{
	for (size_t c = 0; c < PD_SEG_CHUNKS; c++) {
		/* relaxed: fini runs after every other call has returned (destroy never races). */
		free(atomic_load_explicit(&s->chunks[c], memory_order_relaxed));
		atomic_store_explicit(&s->chunks[c], NULL, memory_order_relaxed);
	}
}

/* Chunk index and offset of a valid id (1 <= id <= PD_MAX_ID). */
static inline void seg_locate(uint64_t id, unsigned *chunk, uint64_t *offset)
{
	uint64_t x = id - 1 + ((uint64_t)1 << PD_SEG_FIRST_BITS);
	unsigned msb = 63u - (unsigned)__builtin_clzll(x);
	*chunk = msb - PD_SEG_FIRST_BITS;
	*offset = x - ((uint64_t)1 << msb);
}

void *pd_seg_get(const pd_seg *s, uint64_t id)
{
	if (id == 0 || id > PD_MAX_ID)
		return NULL;
	unsigned c;
	uint64_t off;
	seg_locate(id, &c, &off);
	/* acquire: pairs with the release CAS that published the chunk, so its zero fill (and every
	 * record write that happens-before a later publication of the record) is visible. */
	unsigned char *chunk = atomic_load_explicit(&s->chunks[c], memory_order_acquire);
	if (!chunk)
		return NULL;
	return chunk + off * s->elem_size;
}

void *pd_seg_ensure(pd_seg *s, uint64_t id)
{
	if (id == 0 || id > PD_MAX_ID)
		return NULL;
	unsigned c;
	uint64_t off;
	seg_locate(id, &c, &off);
	/* acquire: as in pd_seg_get, we will write into the chunk. */
	unsigned char *chunk = atomic_load_explicit(&s->chunks[c], memory_order_acquire);
	if (!chunk) {
		size_t n = (size_t)1 << (c + PD_SEG_FIRST_BITS);
		unsigned char *fresh = calloc(n, s->elem_size);
		if (!fresh)
			return NULL;
		unsigned char *expected = NULL;
		/* acq_rel on success: release publishes the zeroed chunk to every acquire reader;
		 * acquire on failure: we adopt the winner's chunk and must see its zero fill. */
		if (atomic_compare_exchange_strong_explicit(&s->chunks[c], &expected, fresh, memory_order_acq_rel,
							    memory_order_acquire)) {
			chunk = fresh;
		} else {
			free(fresh);
			chunk = expected;
		}
	}
	return chunk + off * s->elem_size;
}

/* ---- hashing ------------------------------------------------------------------------------------- */

/* The 64-bit finaliser of SplitMix64: a bijection that spreads every input bit over all outputs. */
static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

uint64_t pd_hash_bytes(const char *p, size_t n)
{
	uint64_t h = 0x6a09e667f3bcc909ull ^ ((uint64_t)n * 0x9e3779b97f4a7c15ull);
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, 8); /* memcpy: the view may be unaligned */
		h = (h ^ mix64(w)) * 0x9e3779b97f4a7c15ull;
		h = (h << 31) | (h >> 33);
		p += 8;
		n -= 8;
	}
	if (n) {
		uint64_t w = 0;
		memcpy(&w, p, n);
		h = (h ^ mix64(w ^ ((uint64_t)n << 56))) * 0x9e3779b97f4a7c15ull;
	}
	return mix64(h);
}

uint64_t pd_hash_pair(uint32_t parent, uint32_t name)
{
	return mix64(((uint64_t)parent << 32 | name) ^ 0x3c6ef372fe94f82bull);
}

/* ---- hash index ---------------------------------------------------------------------------------- */

static pd_slots *slots_new(size_t capacity)
{
	pd_slots *t = calloc(1, sizeof(pd_slots) + capacity * sizeof(_Atomic uint64_t));
	if (!t)
		return NULL;
	t->mask = capacity - 1;
	t->retired_next = NULL;
	for (size_t i = 0; i < capacity; i++)
		atomic_init(&t->e[i], 0);
	return t;
}

bool pd_index_init(pd_index *ix, const pd_index_ops *ops)
{
	ix->ops = ops;
	for (size_t s = 0; s < PD_SHARDS; s++) {
		pd_shard *sh = &ix->shards[s];
		pd_slots *t = slots_new(PD_SHARD_INITIAL_CAPACITY);
		if (!t || pthread_mutex_init(&sh->lock, NULL) != 0) {
			free(t);
			for (size_t k = 0; k < s; k++) {
				pthread_mutex_destroy(&ix->shards[k].lock);
				free(atomic_load_explicit(&ix->shards[k].slots, memory_order_relaxed));
			}
			return false;
		}
		atomic_init(&sh->slots, t);
		sh->count = 0;
		sh->retired = NULL;
		sh->arena = (pd_arena){ NULL, NULL, 0, NULL };
	}
	return true;
}

void pd_index_fini(pd_index *ix)
{
	for (size_t s = 0; s < PD_SHARDS; s++) {
		pd_shard *sh = &ix->shards[s];
		/* relaxed: fini never races with anything (destroy's contract). */
		free(atomic_load_explicit(&sh->slots, memory_order_relaxed));
		for (pd_slots *t = sh->retired; t;) {
			pd_slots *next = t->retired_next;
			free(t);
			t = next;
		}
		sh->retired = NULL;
		pd_arena_fini(&sh->arena);
		pthread_mutex_destroy(&sh->lock);
	}
}

static inline uint32_t entry_tag(uint64_t hash)
{
	return (uint32_t)(hash >> 32);
}

uint32_t pd_index_find(const pd_index *ix, const ovs_pd *pd, uint64_t hash, const void *key)
{
	const pd_shard *sh = &ix->shards[hash & (PD_SHARDS - 1)];
	/* acquire: pairs with the release store that published this table (initial or grown), so the
	 * entries copied into it before publication are visible. */
	const pd_slots *t = atomic_load_explicit(&sh->slots, memory_order_acquire);
	size_t i = (size_t)(hash >> PD_SHARD_BITS) & t->mask;
	uint32_t tag = entry_tag(hash);
	for (;;) {
		/* acquire: pairs with the inserter's release store of this entry, so the record of the id
		 * (written completely before that store) is visible to ops->matches. */
		uint64_t e = atomic_load_explicit(&t->e[i], memory_order_acquire);
		if (e == 0)
			return 0; /* load factor <= 1/2 guarantees an empty entry ends every probe */
		if ((uint32_t)(e >> 32) == tag && ix->ops->matches(pd, (uint32_t)e, key))
			return (uint32_t)e;
		i = (i + 1) & t->mask;
	}
}

/* Index of the first empty entry on `hash`'s probe sequence (caller holds the shard mutex). */
static size_t probe_empty(const pd_slots *t, uint64_t hash)
{
	size_t i = (size_t)(hash >> PD_SHARD_BITS) & t->mask;
	/* relaxed: only the mutex holder writes entries, and it is us. */
	while (atomic_load_explicit(&t->e[i], memory_order_relaxed) != 0)
		i = (i + 1) & t->mask;
	return i;
}

/* Replaces the shard's table by one of `cap` entries (a power of two, larger than the old one),
 * copying the entries (caller holds the mutex). */
static bool shard_grow_to(const pd_index *ix, const ovs_pd *pd, pd_shard *sh, pd_slots *old, size_t cap)
{
	pd_slots *t = slots_new(cap);
	if (!t)
		return false;
	for (size_t i = 0; i <= old->mask; i++) {
		/* relaxed: entries are only written under the mutex we hold. */
		uint64_t e = atomic_load_explicit(&old->e[i], memory_order_relaxed);
		if (e == 0)
			continue;
		uint64_t h = ix->ops->hash_of(pd, (uint32_t)e);
		/* relaxed: the new table is private until the release store of sh->slots below. */
		atomic_store_explicit(&t->e[probe_empty(t, h)], e, memory_order_relaxed);
	}
	old->retired_next = sh->retired;
	sh->retired = old;
	/* release: readers that acquire the new table pointer see every entry copied above (and, through
	 * the copied entries' original release stores, the records they name). */
	atomic_store_explicit(&sh->slots, t, memory_order_release);
	return true;
}

/* Doubles the shard's table (caller holds the mutex). */
static bool shard_grow(const pd_index *ix, const ovs_pd *pd, pd_shard *sh, pd_slots *old)
{
	return shard_grow_to(ix, pd, sh, old, (old->mask + 1) * 2);
}

uint32_t pd_index_find_or_insert(pd_index *ix, ovs_pd *pd, uint64_t hash, const void *key, pd_index_make_fn make,
				 void *arg)
{
	pd_shard *sh = &ix->shards[hash & (PD_SHARDS - 1)];
	uint32_t tag = entry_tag(hash);
	pthread_mutex_lock(&sh->lock);
	/* relaxed: the table pointer is only replaced under the mutex we hold. */
	pd_slots *t = atomic_load_explicit(&sh->slots, memory_order_relaxed);
	size_t i = (size_t)(hash >> PD_SHARD_BITS) & t->mask;
	for (;;) {
		/* relaxed: every entry was written under this mutex, which orders it before us. */
		uint64_t e = atomic_load_explicit(&t->e[i], memory_order_relaxed);
		if (e == 0)
			break;
		if ((uint32_t)(e >> 32) == tag && ix->ops->matches(pd, (uint32_t)e, key)) {
			pthread_mutex_unlock(&sh->lock);
			return (uint32_t)e;
		}
		i = (i + 1) & t->mask;
	}
	if ((sh->count + 1) * 2 > t->mask + 1) {
		if (!shard_grow(ix, pd, sh, t)) {
			pthread_mutex_unlock(&sh->lock);
			return 0;
		}
		t = atomic_load_explicit(&sh->slots, memory_order_relaxed); /* relaxed: we just stored it */
		i = probe_empty(t, hash);
	}
	uint32_t id = make(pd, key, hash, arg);
	if (id != 0) {
		/* release: publishes the complete record of `id` (written by make) to every reader that
		 * acquires this entry in pd_index_find. */
		atomic_store_explicit(&t->e[i], (uint64_t)tag << 32 | id, memory_order_release);
		sh->count++;
	}
	pthread_mutex_unlock(&sh->lock);
	return id;
}

/* ---- batch insertion into one shard (path_dict_bulk.c) ------------------------------------------- */

void pd_shard_lock(pd_shard *sh)
{
	pthread_mutex_lock(&sh->lock);
}

void pd_shard_unlock(pd_shard *sh)
{
	pthread_mutex_unlock(&sh->lock);
}

bool pd_shard_reserve(const pd_index *ix, const ovs_pd *pd, pd_shard *sh, size_t extra)
{
	/* relaxed: the table pointer is only replaced under the mutex the caller holds. */
	pd_slots *t = atomic_load_explicit(&sh->slots, memory_order_relaxed);
	size_t need = sh->count + extra;
	if (need < sh->count)
		return false;
	size_t cap = t->mask + 1;
	if (need * 2 <= cap)
		return true;
	while (need * 2 > cap) {
		if (cap > SIZE_MAX / 4)
			return false;
		cap *= 2;
	}
	/* One growth to the final size instead of a doubling (and a rehash) per power of two. */
	return shard_grow_to(ix, pd, sh, t, cap);
}

uint32_t pd_shard_find_locked(const pd_index *ix, const ovs_pd *pd, const pd_shard *sh, uint64_t hash,
			      const void *key)
{
	/* relaxed: the table and its entries are only written under the mutex the caller holds. */
	const pd_slots *t = atomic_load_explicit(&sh->slots, memory_order_relaxed);
	size_t i = (size_t)(hash >> PD_SHARD_BITS) & t->mask;
	uint32_t tag = entry_tag(hash);
	for (;;) {
		uint64_t e = atomic_load_explicit(&t->e[i], memory_order_relaxed); /* relaxed: as above */
		if (e == 0)
			return 0;
		if ((uint32_t)(e >> 32) == tag && ix->ops->matches(pd, (uint32_t)e, key))
			return (uint32_t)e;
		i = (i + 1) & t->mask;
	}
}

void pd_shard_insert_locked(pd_shard *sh, uint64_t hash, uint32_t id)
{
	/* relaxed: only the mutex holder replaces the table. */
	pd_slots *t = atomic_load_explicit(&sh->slots, memory_order_relaxed);
	size_t i = probe_empty(t, hash);
	/* release: publishes the complete record of `id` (written before this call) to every reader
	 * that acquires this entry in pd_index_find. */
	atomic_store_explicit(&t->e[i], (uint64_t)entry_tag(hash) << 32 | id, memory_order_release);
	sh->count++;
}

/* ---- string arenas ------------------------------------------------------------------------------- */

typedef struct pd_arena_chunk {
	struct pd_arena_chunk *next; /* older chunk */
	char data[];
} pd_arena_chunk;

char *pd_arena_alloc(pd_arena *a, size_t bytes)
{
	if ((size_t)(a->end - a->cur) < bytes || !a->cur) {
		/* Chunks grow with use (4 KiB up to 1 MiB), so a dictionary with few paths stays small and
		 * one with millions allocates rarely; a request larger than that gets a chunk of its own. */
		size_t size = a->next_size ? a->next_size : 4096;
		if (size < bytes)
			size = bytes;
		if (size > SIZE_MAX - sizeof(pd_arena_chunk))
			return NULL;
		pd_arena_chunk *c = malloc(sizeof(pd_arena_chunk) + size);
		if (!c)
			return NULL;
		c->next = a->chunks;
		a->chunks = c;
		a->cur = c->data;
		a->end = c->data + size;
		if (a->next_size < ((size_t)1 << 20))
			a->next_size = a->next_size ? a->next_size * 2 : 8192;
	}
	char *p = a->cur;
	a->cur += bytes;
	return p;
}

void pd_arena_fini(pd_arena *a)
{
	for (pd_arena_chunk *c = a->chunks; c;) {
		pd_arena_chunk *n = c->next;
		free(c);
		c = n;
	}
	a->chunks = NULL;
	a->cur = a->end = NULL;
	a->next_size = 0;
}
