/*
 * stage.h — one stage (the context behind an ovstage_instance_t): its path dictionary, handle
 * tables, columns, snapshot and op sequencing. Internal to engine/.
 */
#ifndef OVSTAGE_ENGINE_STAGE_H
#define OVSTAGE_ENGINE_STAGE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <ovstage/ovstage.h>

#include "grace.h"
#include "handles.h"
#include "jobs.h"
#include "path_dictionary.h"
#include "runtime.h"
#include "store.h"

/* Free buffers a stage keeps for reuse (see ovs_buffer_new). */
#define OVS_POOL_SLOTS 32

/* An op id handed out by this stage is a jobs receipt tagged with the stage's serial. */

/* A mutation in flight (write, delete, clone, map commit): what a later floor advance waits for. */
typedef struct ovs_inflight {
	jobs_id op;                 /* its receipt */
	ovstage_ordinal_t ordinal;  /* its ordinal */
	ovx_token_t *cols;          /* columns it touches (NULL = every column: whole-prim delete) */
	size_t ncols;               /* entries in cols */
	_Atomic bool done;          /* set by the op when it finished (pruned at the next submission) */
	struct ovs_inflight *next;  /* list link */
} ovs_inflight;

struct ovs_stage {
	ovstage_instance_t pub;         /* what the caller holds: {vtable, context = this} */
	uint64_t serial;                /* tags this stage's receipts */
	char *name;                     /* debug name from the instance desc */
	jobs_sched *sched;              /* the process scheduler */
	ovs_pd *pd;                     /* path dictionary */
	uint32_t retention;             /* sealed versions retained per column */
	size_t chunk_bytes;             /* copy-on-write chunk of fixed-size columns (OVSTAGE_CHUNK_KB) */

	/* --- columns --- */
	pthread_mutex_t cols_lock;      /* guards creating columns */
	_Atomic(ovs_column **) cols;    /* published array of columns (grows; old arrays kept) */
	_Atomic size_t ncols;           /* entries valid in cols */
	size_t cols_cap;                /* capacity of the current array (under cols_lock) */
	void **old_arrays;              /* superseded column arrays, freed at destroy */
	size_t n_old_arrays;            /* entries in old_arrays */

	/* --- pool of free, already-faulted buffers (reused by writes, delta arrays and seals) --- */
	pthread_mutex_t pool_lock;      /* guards the pool (one short critical section per buffer) */
	ovs_buffer *pool[OVS_POOL_SLOTS]; /* free buffers (large ones and small ones alike) */
	size_t npool;                   /* entries */
	size_t pool_bytes;              /* their capacity in total (bounded by OVS_POOL_MAX_BYTES) */

	/* --- prim existence (latest state): path id -> 0 unknown, 1 exists, 2 deleted --- */
	ovs_radix prims;

	/* --- snapshot publication (grace.h) --- */
	ovs_grace grace;                /* the latest snapshot and its grace period (own cache lines) */
	ovs_limbo limbo;                /* the previous seal's retirees (seal-owned) */

	/* --- op sequencing (short critical sections at submission; execution is lock-free) --- */
	pthread_mutex_t seq_lock;       /* guards the fields below */
	ovs_inflight *inflight;         /* mutations not yet known to be done */
	jobs_id last_seal;              /* the previous floor advance (seals run in order) */
	uint64_t all_floor_requested;   /* highest ALL-scope floor accepted */
	_Atomic uint64_t all_floor;     /* the stage floor new columns start from (sealed) */

	/* --- handles --- */
	ovs_handles handles;            /* queries, reads, ordinal queries, maps */
	ovx_token_t derived[3];         /* usd-path, usd-parent, usd-children (interned at creation) */
	_Atomic uint64_t prim_deletes;  /* whole-prim deletes executed, and failed ops that left rows of
	                                 * prims that do not exist (writes re-assert existence if any) */
	_Atomic int64_t unsealed_bytes; /* bytes held by deltas not yet sealed */
	int64_t max_unsealed_bytes;     /* back-pressure limit (0 = none), from OVSTAGE_MAX_UNSEALED_MB */
	_Atomic int64_t live_ops;       /* op ids issued and not yet released */
	_Atomic int64_t jobs_in_flight; /* op jobs submitted and not yet finished (destroy waits) */
};

static inline ovs_stage *ovs_stage_of(ovstage_context_t *ctx)
{
	return (ovs_stage *)(void *)ctx;
}

/* Columns */
ovs_column *ovs_column_find(ovs_stage *st, ovx_token_t name);
ovs_column *ovs_column_get_or_create(ovs_stage *st, ovx_token_t name);
/* Row of a path in a column, or UINT32_MAX if it has none. Lock-free. */
uint32_t ovs_column_row(ovs_column *c, ovx_primpath_t path);
/* Row of a path, creating it (lock-free; a racing creator may waste a row). UINT32_MAX on OOM. */
uint32_t ovs_column_row_create(ovs_column *c, ovx_primpath_t path, bool *created);

/* Prim existence (latest state). */
bool ovs_prim_exists(ovs_stage *st, ovx_primpath_t path);
bool ovs_prim_set(ovs_stage *st, ovx_primpath_t path, uint32_t state);
/* Some column may now hold rows of prims that do not exist (a whole-prim delete, or an op that
 * created rows and then failed): from now on writes through a cached row map re-assert the
 * existence of their prims instead of inferring it from the rows. */
static inline void ovs_prims_need_reassert(ovs_stage *st)
{
	/* release: a write that sees the count also sees the prim states set before it. */
	atomic_fetch_add_explicit(&st->prim_deletes, 1, memory_order_release);
}

/* The latest version of a column in a snapshot, or NULL. */
ovs_version *ovs_snapshot_version(const ovs_snapshot *snap, const ovs_column *c);

void ovs_version_ref(ovs_version *v);
void ovs_version_unref(ovs_version *v);

/* Hands a delta to its column's inbox (lock-free) and counts its bytes as unsealed. */
void ovs_column_push_delta(ovs_stage *st, ovs_column *c, ovs_delta *d);

/* Back-pressure: OVSTAGE_ERROR_QUEUE_FULL (with a message) when the stage holds more unsealed
 * written data than its limit; OVSTAGE_OK otherwise. Checked by writes and maps at the call. */
ovstage_api_status_t ovs_check_unsealed(ovs_stage *st);
void ovs_delta_free(ovs_delta *d);

/* Memory for a delta's rows or values: malloc'd when small, else a pooled buffer (*buf set; large
 * per-step deltas then reuse already-faulted memory instead of faulting in fresh pages each write).
 * Release with ovs_delta_array_free, or store buf in the delta's rows_buf / values_buf. */
#define OVS_DELTA_POOLED_MIN ((size_t)64 << 10)
void *ovs_delta_array(ovs_stage *st, size_t bytes, ovs_buffer **buf);
void ovs_delta_array_free(void *p, ovs_buffer *buf);

/* Seals `cols` (ncols columns) through ordinal n and publishes one snapshot. Runs as a job; w is
 * the worker (for parallel work). Returns OVSTAGE_OK or a status with a message in err. */
ovstage_api_status_t ovs_store_seal(ovs_stage *st, jobs_worker *w, ovs_column **cols, size_t ncols,
				    ovstage_ordinal_t n, bool advance_stage_floor, char *err, size_t errlen);

/* The oldest ordinal whose change history every column still has. */
ovstage_ordinal_t ovs_store_oldest_preserved(ovs_stage *st);

/* Process-wide counts of live versions, buffers and buffer bytes (soak tests, diagnostics). */
void ovs_store_counters(int64_t *versions, int64_t *buffers, int64_t *buffer_bytes);

/* Frees all store state (destroy). */
void ovs_store_fini(ovs_stage *st);

/* Blobs: rows of array columns (len elements of elem_bytes), one reference on return. */
ovs_blob *ovs_blob_new(uint64_t len, size_t elem_bytes);
void ovs_blob_ref(ovs_blob *b);
void ovs_blob_unref(ovs_blob *b);

/* Buffers. A buffer comes from the stage's pool when one of the same (rounded) size is free, else
 * from a pre-faulted mapping (>= 1 MiB) or the allocator; released buffers return to the pool while
 * it has room (OVS_POOL_SLOTS, OVS_POOL_MAX_BYTES), so steady-state writes and seals neither map nor
 * fault memory. */
#define OVS_POOL_MAX_BYTES ((size_t)1 << 30)
void ovs_buffer_pool_fini(ovs_stage *st);
ovs_buffer *ovs_buffer_new(ovs_stage *st, size_t bytes);
ovs_buffer *ovs_buffer_adopt(ovs_stage *st, DLManagedTensorVersioned *mt, void *data, size_t bytes);
void ovs_buffer_unref(ovs_buffer *b);

#endif /* OVSTAGE_ENGINE_STAGE_H */
