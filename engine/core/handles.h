/*
 * handles.h — per-stage tables of the handles the API hands out (queries, reads, ordinal queries,
 * maps, read groups, query results). The object behind a handle is reference-counted, so a lookup
 * that races with a release keeps the object alive until the caller drops its reference.
 *
 * Handle values (0 = invalid, as the API says for every kind) are instance-scoped, like op ids:
 *
 *     bits 63..48  the table's space: 1 + (stage serial - 1) % 65535, never 0
 *     bits 47..0   a sequence number from one process-wide counter (from 1, never reused)
 *
 * The sequence alone makes every handle of the process distinct, so a handle of another instance,
 * live or destroyed, is never found in this table, and a released one is never reissued; the
 * space makes the value say which stage issued it: a lookup rejects a value of another space
 * before touching the table (an op id or a small forged number has space 0 and is never a handle).
 * Spaces repeat after 65535 instances; that only weakens the early rejection, not correctness (the
 * sequence is still distinct, so the table lookup still fails).
 * After 2^48 - 1 handles in one process, insertion fails (returns 0, as on OOM).
 *
 * Thread safety: all functions may be called concurrently. The table is sharded (16 shards, each a
 * chained hash map under its own spin lock held for a few instructions, that yields the processor
 * after a short spin); object reference counts are atomic. A handle of the wrong kind or of another instance is reported as not found, like a stale
 * one (ovs_handle_invalid then says which).
 */
#ifndef OVSTAGE_ENGINE_HANDLES_H
#define OVSTAGE_ENGINE_HANDLES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <ovstage/ovstage.h>

typedef enum ovs_handle_kind {
	OVS_H_QUERY = 1,
	OVS_H_READ = 2,
	OVS_H_ORDQ = 3,
	OVS_H_MAP = 4,
	OVS_H_GROUP = 5,
	OVS_H_QRESULT = 6,
	OVS_H_HIER = 7,    /* hierarchy handle (ovstage_get_hierarchy) */
	OVS_H_HRESULT = 8, /* fetched hierarchy result */
} ovs_handle_kind;

typedef struct ovs_hobj ovs_hobj;
struct ovs_hobj {
	_Atomic uint32_t refs;            /* the table's reference + lookups in progress + owners */
	ovs_handle_kind kind;             /* what it is */
	uint64_t id;                      /* its handle (0 until inserted) */
	void (*destroy)(ovs_hobj *obj);   /* frees the object when refs reaches zero */
	ovs_hobj *next;                   /* the table's chain while inserted (under its shard's lock):
	                                   * an object is inserted at most once, so it is its own node and
	                                   * insertion allocates nothing */
};

#define OVS_HANDLE_SPACE_SHIFT 48                                     /* space above, sequence below */
#define OVS_HANDLE_SEQ_MAX ((UINT64_C(1) << OVS_HANDLE_SPACE_SHIFT) - 1) /* last sequence number */
#define OVS_HANDLE_SPACES UINT64_C(65535)                             /* spaces 1..65535 */

#define OVS_HANDLE_SHARDS 16
#define OVS_HANDLE_BUCKETS 256

typedef struct ovs_handle_shard {
	_Atomic uint32_t lock;                         /* guards the buckets: 1 while held (a spin lock
	                                               * held for a few instructions, see handles.c) */
	_Atomic int64_t live[9];                       /* live handles of this shard per kind, by
	                                               * ovs_handle_kind: stored under the lock (no
	                                               * locked add on a line every insert shared),
	                                               * summed by ovs_handles_live */
	ovs_hobj *buckets[OVS_HANDLE_BUCKETS];         /* chained hash map id -> object (the table
	                                               * holds one reference to each) */
} ovs_handle_shard;

typedef struct ovs_handles {
	uint64_t space;                           /* this table's space (bits 63..48 of its handles) */
	ovs_handle_shard shards[OVS_HANDLE_SHARDS];
} ovs_handles;

/* serial: the stage's serial (tags its op ids too); it picks the table's space. */
void ovs_handles_init(ovs_handles *h, uint64_t serial);
/* Frees every remaining entry (dropping the table's references). */
void ovs_handles_fini(ovs_handles *h);
/* Initialises an object with one reference (the caller's). */
void ovs_hobj_init(ovs_hobj *o, ovs_handle_kind kind, void (*destroy)(ovs_hobj *));
/* Inserts: the table takes its own reference. Returns the new handle, 0 on OOM (or once the
 * process-wide sequence is exhausted). */
/* An insertion in two steps, for a call that must not fail once it has committed to something:
 * ovs_handle_prepare takes what insertion can fail on (the id, in a small allocation; NULL when out
 * of memory or out of ids), ovs_handle_insert_prepared then cannot fail; ovs_handle_unprepare drops
 * an unused one. (ovs_handle_insert allocates nothing: the object is the node.) */
void *ovs_handle_prepare(ovs_handles *h);
uint64_t ovs_handle_insert_prepared(ovs_handles *h, void *prepared, ovs_hobj *o);
void ovs_handle_unprepare(void *prepared);
uint64_t ovs_handle_insert(ovs_handles *h, ovs_hobj *o);
/* The same, but the table takes over the caller's reference instead of adding one (the caller must
 * not drop it; on failure, 0, it still holds it). */
uint64_t ovs_handle_insert_take(ovs_handles *h, ovs_hobj *o);
/* Looks up and takes a reference (NULL if absent, of another kind or of another instance). */
ovs_hobj *ovs_handle_get(ovs_handles *h, uint64_t id, ovs_handle_kind kind);
/* Removes the entry and returns the object with the table's reference transferred to the caller
 * (NULL if absent, of another kind or of another instance): exactly one remover succeeds. */
ovs_hobj *ovs_handle_remove(ovs_handles *h, uint64_t id, ovs_handle_kind kind);
void ovs_hobj_ref(ovs_hobj *o);
void ovs_hobj_unref(ovs_hobj *o);
/* Live handles of a kind. */
int64_t ovs_handles_live(ovs_handles *h, ovs_handle_kind kind);
/* For a handle that get/remove did not find: sets the thread's last error to INVALID_HANDLE with a
 * message naming `what` ("read handle") and the value and saying why (0; not issued by this
 * instance; a handle of another kind; not live) and returns OVSTAGE_ERROR_INVALID_HANDLE. */
ovstage_api_status_t ovs_handle_invalid(ovs_handles *h, uint64_t id, const char *what);

#endif /* OVSTAGE_ENGINE_HANDLES_H */
