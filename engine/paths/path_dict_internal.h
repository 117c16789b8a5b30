/*
 * path_dict_internal.h — layout of the path dictionary shared by its .c files (path_dictionary.c:
 * interning, paths and lists; path_dict_index.c: segmented arrays, sharded hash indexes, hashing;
 * path_dict_vtable.c: the 12 ovx vtable slots). Not for use outside engine/path_dict*.c: the rest of
 * the engine uses path_dictionary.h only.
 *
 * Building blocks
 *  - pd_seg: an append-only segmented array of fixed-size records indexed by a 1-based id. Chunk c
 *    holds 2^(c + PD_SEG_FIRST_BITS) records, so ids up to 2^32 need PD_SEG_CHUNKS chunks and a
 *    record never moves. Chunks are allocated on demand and published with a CAS (release); readers
 *    load the chunk pointer with acquire and never lock.
 *  - pd_index: a hash index from a key (bytes, or a (parent, name) pair) to a 32-bit id, split in
 *    PD_SHARDS shards by the low hash bits. Each shard is an insert-only open-addressing table with
 *    linear probing of 64-bit entries (hash high 32 bits << 32 | id; 0 = empty) and load factor
 *    <= 1/2. Readers probe without locking (acquire loads of the table pointer and the entries);
 *    inserters take the shard's mutex, re-probe, create the record, then publish the entry with a
 *    release store. Growth copies the entries into a table twice the size under the mutex and
 *    publishes it with a release store; the old table is kept (readers may be inside it) on the
 *    shard's retired chain and freed at destroy. A reader that misses in a superseded table simply
 *    falls through to the locked path, which probes the current table.
 */
#ifndef OVSTAGE_ENGINE_PATH_DICT_INTERNAL_H
#define OVSTAGE_ENGINE_PATH_DICT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ovx/path_dictionary/path_dictionary_vtable.h>

#include "path_dictionary.h"

/* ---- limits -------------------------------------------------------------------------------------- */

#define PD_CACHE_LINE 64
#define PD_MAX_ID ((uint64_t)UINT32_MAX - 1) /* largest token / path / list-slot id */
#define PD_SEG_FIRST_BITS 8                   /* the first chunk holds 256 records */
#define PD_SEG_CHUNKS 26                      /* enough chunks for every id <= PD_MAX_ID */
#define PD_SHARD_BITS 6
#define PD_SHARDS (1u << PD_SHARD_BITS)        /* shards per hash index */
#define PD_SHARD_INITIAL_CAPACITY 16u         /* entries of a shard's first table (power of two) */

/* ---- segmented array ----------------------------------------------------------------------------- */

/** Append-only array of records addressed by a 1-based id; records never move. */
typedef struct pd_seg {
	_Atomic(unsigned char *) chunks[PD_SEG_CHUNKS]; /* chunk c: 2^(c+PD_SEG_FIRST_BITS) records, zeroed; NULL until first needed */
	size_t elem_size;                                /* bytes per record */
} pd_seg;

void pd_seg_init(pd_seg *s, size_t elem_size);
void pd_seg_fini(pd_seg *s);
/** Record of `id`, or NULL when id is 0, too large, or its chunk was never allocated. Wait-free. */
void *pd_seg_get(const pd_seg *s, uint64_t id);
/** Record of `id`, allocating its chunk when needed; NULL on out of memory or a bad id. Lock-free. */
void *pd_seg_ensure(pd_seg *s, uint64_t id);

/* ---- hashing ------------------------------------------------------------------------------------- */

uint64_t pd_hash_bytes(const char *p, size_t n);
uint64_t pd_hash_pair(uint32_t parent, uint32_t name);

/* ---- hash index ---------------------------------------------------------------------------------- */

/** Key behaviour of one index: equality of a stored id against a lookup key, and the hash of a
 *  stored id (for rehashing on growth). Both run on published records only. */
typedef struct pd_index_ops {
	bool (*matches)(const struct ovs_pd *pd, uint32_t id, const void *key); /* does record `id` have key `key`? */
	uint64_t (*hash_of)(const struct ovs_pd *pd, uint32_t id);             /* the full hash of record `id`'s key */
} pd_index_ops;

/** One open-addressing table of a shard. */
typedef struct pd_slots {
	size_t mask;                   /* capacity - 1; capacity is a power of two */
	struct pd_slots *retired_next; /* next older table of the shard's retired chain (guarded by the shard mutex) */
	_Atomic uint64_t e[];          /* entries: (hash >> 32) << 32 | id; 0 = empty; written once */
} pd_slots;

/** A bump allocator of strings that live as long as the dictionary (guarded by its owner's lock). */
typedef struct pd_arena {
	char *cur, *end;                /* free bytes of the newest chunk */
	size_t next_size;               /* size of the next chunk (grows to 1 MiB) */
	struct pd_arena_chunk *chunks;  /* every chunk, newest first (freed at fini) */
} pd_arena;

/** `bytes` from the arena, NULL when out of memory. Not thread-safe: the caller holds the lock
 *  that guards the arena. */
char *pd_arena_alloc(pd_arena *a, size_t bytes);
void pd_arena_fini(pd_arena *a);

/** One shard: its current table, its insert lock and bookkeeping. */
typedef struct pd_shard {
	_Alignas(PD_CACHE_LINE) _Atomic(pd_slots *) slots; /* current table; replaced (release) on growth */
	pthread_mutex_t lock;                              /* serialises inserts and growth in this shard */
	size_t count;                                      /* entries in the current table (guarded by lock) */
	pd_slots *retired;                                 /* superseded tables, newest first (guarded by lock; freed at fini) */
	pd_arena arena;                                    /* pair index: the text of the paths made under this lock (guarded by lock) */
} pd_shard;

/** A sharded, insert-only hash index from keys to ids. */
typedef struct pd_index {
	const pd_index_ops *ops;   /* key equality and rehash callbacks */
	pd_shard shards[PD_SHARDS]; /* selected by hash & (PD_SHARDS - 1) */
} pd_index;

/** Creates a record for `key` (hash `hash`) and returns its id, or 0 on failure. Called with the
 *  shard mutex held, only after the key was found absent; the record must be complete (published)
 *  when it returns: the entry is published right after. */
typedef uint32_t (*pd_index_make_fn)(struct ovs_pd *pd, const void *key, uint64_t hash, void *arg);

bool pd_index_init(pd_index *ix, const pd_index_ops *ops);
void pd_index_fini(pd_index *ix);
/** The id stored for `key`, or 0. Lock-free and wait-free (never takes the shard mutex). */
uint32_t pd_index_find(const pd_index *ix, const struct ovs_pd *pd, uint64_t hash, const void *key);
/** The id stored for `key`, inserting make()'s record when absent; 0 when make fails or the table
 *  cannot grow. Takes the shard mutex; callers try pd_index_find first. */
uint32_t pd_index_find_or_insert(pd_index *ix, struct ovs_pd *pd, uint64_t hash, const void *key,
				 pd_index_make_fn make, void *arg);

/* Batch insertion (path_dict_bulk.c): the caller locks a shard once, reserves room for all its
 * keys (one growth instead of one per doubling), looks keys up and inserts ids under the lock. */
void pd_shard_lock(pd_shard *sh);
void pd_shard_unlock(pd_shard *sh);
/** Grows the shard's table (if needed) so that `extra` more entries keep the load <= 1/2; false
 *  when out of memory. Caller holds the lock. */
bool pd_shard_reserve(const pd_index *ix, const struct ovs_pd *pd, pd_shard *sh, size_t extra);
/** The id stored for `key` in this shard, or 0. Caller holds the lock. */
uint32_t pd_shard_find_locked(const pd_index *ix, const struct ovs_pd *pd, const pd_shard *sh, uint64_t hash,
			      const void *key);
/** Publishes (release) the entry of `id` (its record complete); room reserved. Caller holds the lock. */
void pd_shard_insert_locked(pd_shard *sh, uint64_t hash, uint32_t id);

/** Prefetches the first entry `hash` probes in its shard's current table (a hint; no ordering). */
static inline void pd_index_prefetch(const pd_index *ix, uint64_t hash)
{
	const pd_shard *sh = &ix->shards[hash & (PD_SHARDS - 1)];
	/* acquire: the table's mask is read next; it was written before the release store that
	 * published the table (another thread's growth), as in pd_index_find. (Relaxed here was a
	 * data race on the mask, found by test_bulk_stress under TSan.) */
	const pd_slots *t = atomic_load_explicit(&sh->slots, memory_order_acquire);
	__builtin_prefetch(&t->e[(size_t)(hash >> PD_SHARD_BITS) & t->mask]);
}

/* ---- records ------------------------------------------------------------------------------------- */

/** An interned token. `str` is published last (release); the other fields are immutable after. */
typedef struct pd_token_rec {
	_Atomic(const char *) str; /* NUL-terminated text; NULL until the record is published */
	size_t len;                /* bytes of text, NUL excluded */
	uint64_t hash;             /* pd_hash_bytes(str, len) */
} pd_token_rec;

/** An interned prim path. `str` is published last (release); the other fields are immutable after. */
typedef struct pd_path_rec {
	_Atomic(const char *) str; /* NUL-terminated full path text; NULL until the record is published */
	size_t len;                /* bytes of the full text, NUL excluded */
	uint64_t str_hash;         /* pd_hash_bytes(str, len): key of the string index */
	uint64_t pair_hash;        /* pd_hash_pair(parent, name): key of the structure index (0 for the root) */
	uint32_t parent;           /* parent path id; 0 for the root */
	uint32_t name;             /* last component token; 0 for the root */
	uint32_t depth;            /* number of components; 0 for the root */
} pd_path_rec;

/** Immutable payload of a path list, freed by whoever drops the last reference. */
typedef struct pd_list_payload {
	size_t count;            /* number of paths */
	ovx_primpath_t paths[];  /* the paths, in creation order */
} pd_list_payload;

/** A path-list slot: recycled, never freed before destroy. */
typedef struct pd_list_slot {
	_Atomic uint64_t state;                /* generation << 32 | reference count; live when count > 0 */
	_Atomic(pd_list_payload *) payload;    /* the list's paths while live; written before state goes live */
	_Atomic uint32_t next_free;            /* next slot of the free stack while this slot is free */
} pd_list_slot;

/** Key of the structure index. */
typedef struct pd_pair_key {
	uint32_t parent; /* parent path id */
	uint32_t name;   /* component token */
} pd_pair_key;

/** Key of the token index and the path-string index. */
typedef struct pd_bytes_key {
	const char *ptr; /* first byte */
	size_t len;      /* byte count */
} pd_bytes_key;

/** Path texts copied by a bulk call (records point into data); freed at destroy. */
typedef struct pd_blob {
	struct pd_blob *next;
	char data[];
} pd_blob;

/* ---- the dictionary ------------------------------------------------------------------------------ */

struct ovs_pd {
	path_dictionary_instance_t instance;  /* {&vtable, (context)this}: what ovs_pd_instance returns */
	path_dictionary_vtable_t vtable;      /* the 12 slots (path_dict_vtable.c); a per-dictionary copy */
	pd_seg tokens;                        /* pd_token_rec by token id */
	pd_seg paths;                         /* pd_path_rec by path id (1 = root) */
	pd_seg lists;                         /* pd_list_slot by slot id */
	pd_index token_index;                 /* token bytes -> token id */
	pd_index pair_index;                  /* (parent, name) -> path id: the authority for path identity */
	pd_index string_index;                /* full path bytes -> path id: a fast path for string lookups */
	_Alignas(PD_CACHE_LINE) _Atomic uint64_t token_next; /* next token id to hand out */
	_Atomic uint64_t path_next;           /* next path id to hand out */
	_Atomic uint64_t token_count;         /* tokens published (statistics) */
	_Atomic uint64_t path_count;          /* paths published (statistics) */
	_Atomic(pd_blob *) blobs;             /* bulk calls' text blocks (a push-only list, freed at destroy) */
	_Atomic(struct jobs_sched *) sched;  /* the job scheduler bulk calls fork out on (NULL: serial) */
	_Alignas(PD_CACHE_LINE) _Atomic uint64_t list_next; /* next never-used list slot id */
	_Atomic uint64_t list_free;           /* free-slot stack head: ABA tag << 32 | slot id (0 = empty) */
	_Atomic uint64_t list_live;           /* live lists (statistics) */
};

/* ---- internal entry points shared between the .c files ------------------------------------------- */

/** Fills pd->vtable with the 12 slots (path_dict_vtable.c). */
void pd_vtable_fill(path_dictionary_vtable_t *vt);

/** Published token / path record of an id, or NULL. Wait-free. */
const pd_token_rec *pd_token_get(const ovs_pd *pd, uint64_t id);
const pd_path_rec *pd_path_get(const ovs_pd *pd, uint64_t id);

/** Path syntax check. Returns PD_SYNTAX_OK or the error kind; *bad_offset gets the byte offset it
 *  concerns (for the NUL / empty-component errors). */
enum {
	PD_SYNTAX_OK = 0,
	PD_SYNTAX_EMPTY,           /* NULL or zero-length */
	PD_SYNTAX_NUL,             /* an embedded NUL byte at *bad_offset */
	PD_SYNTAX_RELATIVE,        /* does not start with '/' */
	PD_SYNTAX_EMPTY_COMPONENT, /* "//" : the empty component starts at *bad_offset */
	PD_SYNTAX_TRAILING_SLASH,  /* ends with '/' and is not "/" */
};
int pd_path_syntax(const char *ptr, size_t len, size_t *bad_offset);

/** Token interning of valid bytes (no NUL, non-empty); 0 when out of memory / ids. */
uint32_t pd_token_intern_valid(ovs_pd *pd, const char *ptr, size_t len);

/** Bulk interning (path_dict_bulk.c). Results of pd_intern_paths_bulk / pd_intern_token_paths_bulk. */
enum { PD_BULK_OK = 0, PD_BULK_BAD, PD_BULK_OOM };
/** Interns n path strings into out[0..n-1], validating all first: PD_BULK_BAD with *bad = the first
 *  index whose syntax is wrong (nothing interned), PD_BULK_OOM (some may be interned), PD_BULK_OK. */
int pd_intern_paths_bulk(ovs_pd *pd, const ovx_string_t *strs, size_t n, ovx_primpath_t *out, size_t *bad);
/** Interns n paths given as component tokens (create_paths_from_tokens' layout; tokens already
 *  validated as live and '/'-free): PD_BULK_OK or PD_BULK_OOM. */
int pd_intern_token_paths_bulk(ovs_pd *pd, const ovx_token_t *tokens, const size_t *counts, size_t n,
			       ovx_primpath_t *out);
/** The first of n tokens that is not a live token or contains '/', else SIZE_MAX (in parallel). */
size_t pd_tokens_first_bad(ovs_pd *pd, const ovx_token_t *tokens, size_t n);
/** The number of paths from which the bulk calls split their work over the workers. */
#define PD_BULK_MIN 2048

/** ovs_pd_list_create without checking the paths (the caller just interned them). */
ovx_primpath_list_t pd_list_create_trusted(ovs_pd *pd, const ovx_primpath_t *paths, size_t count);

/** Live-list check with a temporary reference: on true the caller holds one extra reference and
 *  must drop it with ovs_pd_list_release. Lock-free. */
bool pd_list_acquire(ovs_pd *pd, ovx_primpath_list_t list);

#endif /* OVSTAGE_ENGINE_PATH_DICT_INTERNAL_H */
