/*
 * receipt.h — the receipt table: one slot per submitted job, holding the job until it runs and its
 * result until the receipt is released.
 *
 * Ids are monotonic (a 64-bit counter, never reused); slot = id & mask. A submission whose slot is
 * still occupied by an older, unreleased receipt skips that id and takes the next, so ids stay
 * monotonic but may have gaps. Slots are never freed while the scheduler lives — only recycled —
 * so a stale id can always be checked against the slot's current id without touching freed memory.
 *
 * Slot state word (32 bits): flags in the low byte, a pin count above. A pin keeps the slot from
 * being recycled while a thread reads it (wait, result, release, adding a dependency edge,
 * resolving a fence). The thread whose state transition leaves RELEASED|DONE with no pins recycles
 * the slot: it first moves the state to RECYCLING (no LIVE bit, so no new pin succeeds and no
 * allocation claims it), clears it, and finally stores 0 (free).
 *
 * Parking (park.h's waiter flag): a waiter about to FUTEX_WAIT on the state word first sets
 * SLEEPER with an RMW (it holds a pin); the completion's DONE transition wakes only if the value it
 * replaced had SLEEPER, so completing a receipt that nobody sleeps on makes no system call. Every
 * transition that can happen while a waiter holds its pin computes the new state from the old
 * one (pins, RELEASED, DONE) and so keeps the bit; the ones that drop it (RECYCLING, the store of
 * 0, allocation) need zero pins. Hence, in the word's modification order, either SLEEPER comes
 * before DONE and DONE's RMW sees it and wakes, or DONE comes first and the waiter's RMW reads
 * DONE and does not sleep.
 *
 * Every modification of the state word is a read-modify-write except slot_recycle's final store
 * of 0, which is a release store made after an acquiring RMW (the transition to RECYCLING). Every
 * store to the id word (publish, recycle's clearing, submit's unpublishing) is a release store.
 *
 * Gone receipts (JOBS_AFTER_MAY_BE_RELEASED). A submitter that issued id d (so d's publication
 * happens-before it) may find d's slot recycled. jobs_slot_pin_or_gone then reports d gone only
 * after an acquire load that makes d's completion happen-before the caller:
 *  - state read with acquire and not LIVE: the value lies after d's allocation in the state's
 *    modification order (coherence: the allocation happens-before us), and the occupancy of d only
 *    leaves LIVE through RECYCLING, which needs DONE. So the value is d's RECYCLING or a later one.
 *    Everything between d's DONE (a release RMW) and its recycle's store of 0 is an RMW, so a value
 *    up to that store lies in DONE's release sequence; a later value lies in the release sequence
 *    of some recycle's store of 0, and each such store happens-after the previous one (its
 *    RECYCLING CAS acquires from that release sequence), the first one after d's DONE. Either way
 *    the acquire load synchronises with a release that happens-after d's DONE.
 *  - id read with acquire and != d: every id store after d's publication is a release store made
 *    by a thread that happens-after d's DONE (d's recycle clears it after its RECYCLING CAS; a later
 *    occupant publishes or unpublishes it after an allocation CAS that acquired a store of 0 that
 *    happens-after d's DONE, as above), so the load synchronises with it.
 *  - otherwise (LIVE and id == d) d still occupies the slot: pin again.
 * Since the body of d is sequenced before its DONE, the body's writes happen-before the caller,
 * and through the submission's acq_rel decrement of `pending`, before the dependent's body.
 */
#ifndef OVSTAGE_JOBS_RECEIPT_H
#define OVSTAGE_JOBS_RECEIPT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "jobs.h"
#include "worker.h"

enum {
	JOBS_ST_LIVE = 1u << 0,      /* holds a receipt (id valid) */
	JOBS_ST_RELEASED = 1u << 1,  /* the receipt was released; the id is invalid for callers */
	JOBS_ST_DONE = 1u << 2,      /* the job finished (ran, failed or was cancelled) */
	JOBS_ST_FAILED = 1u << 3,    /* with DONE: failed (body or dependency) */
	JOBS_ST_CANCELLED = 1u << 4, /* with DONE: cancelled at shutdown */
	JOBS_ST_RECYCLING = 1u << 5, /* being cleared by the thread that recycles it */
	JOBS_ST_SLEEPER = 1u << 6,   /* a waiter sleeps (or is about to) on this word: DONE wakes */
	JOBS_ST_PIN_SHIFT = 8,
};
#define JOBS_ST_PIN_ONE (1u << JOBS_ST_PIN_SHIFT)
#define JOBS_ST_PINS(st) ((st) >> JOBS_ST_PIN_SHIFT)

/* Bits of jobs_slot.defer: the handshake between a body that deferred its completion and the one
 * jobs_complete call that completes it. Whichever of the body's return (RETURNED) and the
 * completer's result (GIVEN) comes second in the word's modification order completes the receipt;
 * both are acq_rel RMWs, so the second one has acquired the first one's effects. */
enum {
	JOBS_DEFER_ARMED = 1u << 0,    /* the body called jobs_job_defer */
	JOBS_DEFER_CLAIMED = 1u << 1,  /* a completer (or the body's own failure) owns the result */
	JOBS_DEFER_GIVEN = 1u << 2,    /* the completer stored code and message in the slot */
	JOBS_DEFER_RETURNED = 1u << 3, /* the body returned and its cleanup ran */
};

/* Codes the jobs layer itself puts into a receipt (application codes are positive). */
#define JOBS_CODE_DEPENDENCY_FAILED (-1)
#define JOBS_CODE_CANCELLED (-2)

typedef struct jobs_edge jobs_edge;
typedef struct jobs_slot jobs_slot;

/* A slot's alignment: two cache lines, its size rounded up (jobs_slot below). */
#define JOBS_SLOT_ALIGN 128

/* A dependency edge: when the slot holding it completes, `dependent` loses one pending count. */
struct jobs_edge {
	jobs_slot *dependent; /* the job waiting for us; cannot be recycled before it is DONE */
	jobs_edge *next;      /* next edge of the same slot */
};

/* Sentinel for jobs_slot.succ once the slot completed: later edges must not be added. */
#define JOBS_EDGES_CLOSED ((jobs_edge *)(uintptr_t)1)

/* Line-aligned (104 bytes would straddle lines): consecutive ids go to consecutive slots, so two
 * threads submitting in turn (a producer and a reader, say) would share the lines between their
 * slots and take them from each other on every submit, poll and release (session 12). */
struct jobs_slot {
	_Alignas(JOBS_SLOT_ALIGN) _Atomic uint64_t id; /* the receipt held here; 0 while free or recycling */
	_Atomic uint32_t state;       /* JOBS_ST_* flags | pins << 8 */
	_Atomic int32_t pending;      /* unresolved dependencies + fences (+1 while being submitted) */
	_Atomic uint32_t fences_left; /* fences not yet resolved (guards over-resolution) */
	_Atomic uint32_t defer;       /* JOBS_DEFER_* bits; 0 unless the body deferred completion */
	uint32_t flags;               /* jobs_job_desc.flags */
	uint64_t tag;                 /* jobs_job_desc.tag */
	_Atomic uint64_t failed_dep;  /* first failed dependency's id, 0 if none */
	_Atomic(jobs_edge *) succ;    /* dependents; JOBS_EDGES_CLOSED once DONE */
	jobs_slot *_Atomic next;      /* link in the scheduler's ready stack */
	jobs_job_fn fn;               /* the body */
	void *arg;                    /* its argument */
	jobs_cleanup_fn cleanup;      /* optional; runs once */
	int code;                     /* result code, published by the DONE release (deferred: by GIVEN) */
	char *message;                /* failure message (malloc'd) or NULL, published by DONE (or GIVEN) */
};

/* What a running body sees (jobs_run is opaque in jobs.h). */
struct jobs_run {
	jobs_id id;          /* this job's receipt */
	jobs_id failed_dep;  /* first failed dependency, if the job runs despite it */
	int code;            /* set by jobs_job_fail */
	char *message;       /* set by jobs_job_fail */
	bool failed;         /* jobs_job_fail was called */
	bool deferred;       /* jobs_job_defer was called */
	jobs_slot *slot;     /* the slot being run (jobs_job_defer arms its defer word) */
};

typedef struct jobs_receipts {
	jobs_slot *slots;       /* capacity slots */
	uint64_t mask;          /* capacity - 1 */
	_Alignas(JOBS_CACHE_LINE) _Atomic uint64_t next_id; /* next id to try; starts at 1 */
	_Alignas(JOBS_CACHE_LINE) _Atomic int64_t live;     /* slots in use (statistics) */
} jobs_receipts;

bool jobs_receipts_init(jobs_receipts *r, uint32_t capacity);
void jobs_receipts_fini(jobs_receipts *r);

/* Claims a free slot; NULL when the table is full. The slot is LIVE; its id is not yet published. */
jobs_slot *jobs_slot_alloc(jobs_receipts *r, jobs_id *out_id);
/* Publishes the id of a claimed slot (the submission was accepted). */
void jobs_slot_publish(jobs_slot *sl, jobs_id id);
/* Returns a claimed slot whose id was never published (submission failed). */
void jobs_slot_abandon(jobs_receipts *r, jobs_slot *sl);

/* Pins the slot holding `id`; NULL if the id is not live (or released, unless allow_released). */
jobs_slot *jobs_slot_pin(jobs_receipts *r, jobs_id id, bool allow_released);
/* Pins `id` (released or not) for a caller that knows it was issued. NULL with *gone = true if the
 * receipt was recycled: then its completion happens-before the return (see "Gone receipts" above).
 * NULL with *gone = false if the id was never issued (0 or not yet handed out). */
jobs_slot *jobs_slot_pin_or_gone(jobs_receipts *r, jobs_id id, bool *gone);
void jobs_slot_unpin(jobs_receipts *r, jobs_slot *sl);

/* Adds an edge "dependent waits for sl". Returns false if sl is already done (then *failed tells
 * whether it failed). Not lock-free: if sl's completion closed its edge list but has not set DONE
 * yet, it yields until it does. */
bool jobs_slot_add_edge(jobs_slot *sl, jobs_slot *dependent, jobs_edge *edge, bool *failed);

/* Marks sl done with result flags (0, FAILED, FAILED|CANCELLED), code and message (ownership
 * taken), wakes waiters and returns the edge list for the caller to propagate. */
jobs_edge *jobs_slot_complete(jobs_receipts *r, jobs_slot *sl, uint32_t result, int code, char *message);

/* Marks the receipt released. JOBS_INVALID if unknown or already released. */
jobs_status jobs_slot_release(jobs_receipts *r, jobs_id id);
/* Marks the receipt of a slot the caller pinned released and drops that pin, in one transition
 * (it may recycle). JOBS_INVALID (the pin dropped all the same) if it was already released. */
jobs_status jobs_slot_release_pinned(jobs_receipts *r, jobs_slot *sl);

/* Status of a DONE state word. */
static inline jobs_status jobs_status_of(uint32_t st)
{
	if (!(st & JOBS_ST_DONE))
		return JOBS_PENDING;
	if (st & JOBS_ST_CANCELLED)
		return JOBS_CANCELLED;
	return (st & JOBS_ST_FAILED) ? JOBS_FAILED : JOBS_OK;
}

#endif /* OVSTAGE_JOBS_RECEIPT_H */
