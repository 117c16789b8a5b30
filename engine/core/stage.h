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

typedef struct ovs_stage ovs_stage;

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
	ovs_pd *pd;                     /* the path dictionary shared by all live instances (path_dict_shared.h) */
	int cuda_device;                /* the instance's CUDA device (active-GPU list), -1: none */

	ovs_store store;                /* columns, versions, snapshots, column memory (store.h) */

	/* --- op sequencing (short critical sections at submission; execution is lock-free) --- */
	pthread_mutex_t seq_lock;       /* guards the fields below */
	ovs_inflight *inflight;         /* mutations not yet known to be done */
	jobs_id last_seal;              /* the previous floor advance (seals run in order) */
	uint64_t all_floor_requested;   /* highest ALL-scope floor accepted */

	/* --- handles --- */
	ovs_handles handles;            /* queries, reads, ordinal queries, maps */
	ovx_token_t derived[3];         /* usd-path, usd-parent, usd-children (interned at creation) */
	_Atomic int64_t live_ops;       /* op ids issued and not yet released */
	struct ovs_hier *hier;          /* transform hierarchy state (ops/hierarchy.h) */
	jobs_id op_id_floor;            /* every op id of this stage is above it (destroy's scan, teardown.h) */
	_Atomic int64_t jobs_in_flight; /* op jobs submitted and not yet finished (destroy waits) */
};

static inline ovs_stage *ovs_stage_of(ovstage_context_t *ctx)
{
	return (ovs_stage *)(void *)ctx;
}


#endif /* OVSTAGE_ENGINE_STAGE_H */
