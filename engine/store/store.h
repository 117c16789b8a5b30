/*
 * store.h — the snapshot store of one stage: its columns, prim existence, column memory, the latest
 * snapshot with its grace period, and what bounds the unsealed data. Everything below the op layer
 * works on an ovs_store, never on the stage around it (the data model is in model.h).
 *
 * Thread safety: see each module (column.h, delta.h, version.h, seal.h, grace.h, buffer.h). The
 * fields marked seal-owned are touched only by the seal in progress (seals of a stage are chained).
 */
#ifndef OVSTAGE_ENGINE_STORE_H
#define OVSTAGE_ENGINE_STORE_H

#include "buffer.h"
#include "grace.h"
#include "model.h"
#include "radix.h"
#include "recycle.h"

/* CUDA ordinals a stage can keep columns on. */
#define OVS_STORE_GPUS 16

struct ovs_store {
	uint32_t retention;             /* sealed versions retained per column */
	size_t chunk_bytes;             /* copy-on-write chunk of fixed-size columns (OVSTAGE_CHUNK_KB) */

	/* --- columns --- */
	pthread_mutex_t cols_lock;      /* guards creating columns */
	_Atomic(ovs_column **) cols;    /* published array of columns (grows; old arrays kept) */
	_Atomic size_t ncols;           /* entries valid in cols */
	size_t cols_cap;                /* capacity of the current array (under cols_lock) */
	size_t cols_reserved;           /* prepared, unpublished columns the array keeps room for
	                                 * (ovs_column_prepare; under cols_lock) */
	void **old_arrays;              /* superseded column arrays, freed at destroy */
	size_t n_old_arrays;            /* entries in old_arrays */
	ovs_radix col_index;            /* token -> 1 + the column's index in cols (0: none), for tokens
	                                 * below 2^32; set under cols_lock after the column's publication */
	_Atomic bool col_index_ok;      /* every published column below 2^32 has its index slot (false
	                                 * after a slot could not be allocated: lookups scan the array) */
	_Atomic uint64_t all_floor;     /* the stage floor new columns start from (sealed) */

	/* --- prim existence (latest state): path id -> 0 unknown, 1 exists, 2 deleted --- */
	ovs_radix prims;
	_Atomic uint64_t prim_deletes;  /* whole-prim deletes executed, and failed ops that left rows of
	                                 * prims that do not exist (writes re-assert existence if any) */
	_Atomic uint32_t device_columns; /* columns whose storage is on a CUDA device (counted when the
	                                 * schema is installed): a seal of a stage with none makes no
	                                 * CUDA call (floor.c) */
	_Atomic uint64_t prim_creations; /* prims that came to exist (a state set to 1 from another):
	                                 * with the deletes, what a kept transform forest depends on */

	/* --- column memory (buffer.h) --- */
	ovs_pool pool;                  /* free, already-faulted buffers by size class */
	ovs_mem_counters mem;           /* live buffers of this store */
	_Atomic int64_t unsealed_bytes; /* bytes held by deltas not yet sealed */
	int64_t max_unsealed_bytes;     /* back-pressure limit (0 = none), from OVSTAGE_MAX_UNSEALED_MB */
	_Atomic int64_t history_bytes;  /* change sets (their row lists) and the fold tables of range
	                                 * reads' change membership (lastchange.h; a statistic) */
	/* --- the fold job (lastchange.h): one at a time per store --- */
	_Atomic bool lc_job_busy;       /* submitted and not finished */
	_Atomic bool lc_fold_due;       /* the next job folds (else it only copies pooled sets' rows) */
	jobs_id lc_job;                 /* its receipt (seal-owned; released by the next submission or
	                                 * at destroy), 0 = none */

	/* --- snapshot publication (grace.h, seal.h) --- */
	ovs_grace grace;                /* the latest snapshot and its grace period (own cache lines) */
	ovs_limbo limbo;                /* the previous publication's retirees (seal-owned) */
	ovs_recycle recycle;            /* version, change-set and chunk structs the seals let go of
	                                 * (recycle.h; seal-owned) */

	/* --- floor-advance notification (ovstage_ext_wait_write_floor) --- */
	_Atomic uint32_t floor_seq;     /* bumped after every publication's floors moved (futex word) */
	_Atomic uint32_t floor_waiters; /* threads in ovstage_ext_wait_write_floor (no wake when 0) */

	/* --- device columns (device.h) --- */
	jobs_sched *sched;              /* where device work's completions resolve receipts */
	struct ovs_gpu *_Atomic gpu[OVS_STORE_GPUS]; /* the stage's context per CUDA ordinal (first use) */
};

/* Initialises an empty store (retention, chunk and back-pressure settings given). */
void ovs_store_init(ovs_store *s, uint32_t retention, size_t chunk_bytes, int64_t max_unsealed_bytes);

#endif /* OVSTAGE_ENGINE_STORE_H */
