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

#include "buffer.h"
#include "column.h"
#include "delta.h"
#include "grace.h"
#include "handles.h"
#include "jobs.h"
#include "path_dictionary.h"
#include "runtime.h"
#include "seal.h"
#include "store.h"
#include "version.h"

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

	/* --- column memory (buffer.h) --- */
	ovs_pool pool;                  /* free, already-faulted buffers by size class */
	ovs_mem_counters mem;           /* live buffers of this stage */

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

/* Some column may now hold rows of prims that do not exist (a whole-prim delete, or an op that
 * created rows and then failed): from now on writes through a cached row map re-assert the
 * existence of their prims instead of inferring it from the rows. */
static inline void ovs_prims_need_reassert(ovs_stage *st)
{
	/* release: a write that sees the count also sees the prim states set before it. */
	atomic_fetch_add_explicit(&st->prim_deletes, 1, memory_order_release);
}

#endif /* OVSTAGE_ENGINE_STAGE_H */
