/* receipt.c — the receipt table (see receipt.h for the state machine, docs/jobs.md for ordering). */
#include "receipt.h"

#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "park.h"

bool jobs_receipts_init(jobs_receipts *r, uint32_t capacity)
{
	uint64_t cap = 64;
	while (cap < capacity)
		cap <<= 1;
	/* Anonymous mapping: zero-filled (every slot free: state 0, id 0) and faulted lazily. */
	void *p = mmap(NULL, cap * sizeof(jobs_slot), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return false;
	r->slots = p;
	r->mask = cap - 1;
	atomic_init(&r->next_id, 1);
	atomic_init(&r->live, 0);
	return true;
}

void jobs_receipts_fini(jobs_receipts *r)
{
	for (uint64_t i = 0; i <= r->mask; i++) {
		jobs_slot *sl = &r->slots[i];
		/* relaxed: destroy runs after every worker was joined (join synchronises). */
		if (atomic_load_explicit(&sl->state, memory_order_relaxed) & JOBS_ST_LIVE)
			free(sl->message);
	}
	munmap(r->slots, (r->mask + 1) * sizeof(jobs_slot));
	r->slots = NULL;
}

/* Clears a slot in state RECYCLING and frees it for allocation. */
static void slot_recycle(jobs_receipts *r, jobs_slot *sl)
{
	free(sl->message);
	sl->message = NULL;
	sl->fn = NULL;
	sl->arg = NULL;
	sl->cleanup = NULL;
	/* release: a submitter that reads 0 here for a gone dependency (acquire, jobs_slot_pin_or_gone)
	 * then sees the DONE that our RECYCLING CAS acquired. Allocators read the id only after the
	 * release store of state below. */
	atomic_store_explicit(&sl->id, 0, memory_order_release);
	atomic_fetch_sub_explicit(&r->live, 1, memory_order_relaxed);
	/* release: the clearing above happens-before the acquiring CAS of the next allocation. */
	atomic_store_explicit(&sl->state, 0, memory_order_release);
}

/* Applies `next` computed from the current state by `step` with a CAS loop; if the result would be
 * RELEASED|DONE without pins, writes RECYCLING instead and recycles. Returns the old state. */
#define SLOT_TRANSITION(r, sl, old, next_expr, order)                                             \
	do {                                                                                       \
		(old) = atomic_load_explicit(&(sl)->state, memory_order_relaxed);                  \
		for (;;) {                                                                         \
			uint32_t nx_ = (next_expr);                                                \
			bool rec_ = (nx_ & (JOBS_ST_RELEASED | JOBS_ST_DONE)) ==                   \
					    (JOBS_ST_RELEASED | JOBS_ST_DONE) &&                   \
				    JOBS_ST_PINS(nx_) == 0;                                        \
			if (rec_)                                                                  \
				nx_ = JOBS_ST_RECYCLING;                                           \
			if (atomic_compare_exchange_weak_explicit(&(sl)->state, &(old), nx_, order, \
								  memory_order_relaxed)) {         \
				if (rec_)                                                          \
					slot_recycle((r), (sl));                                   \
				break;                                                             \
			}                                                                          \
		}                                                                                  \
	} while (0)

jobs_slot *jobs_slot_alloc(jobs_receipts *r, jobs_id *out_id)
{
	uint64_t tries = r->mask + 1 < 4096 ? r->mask + 1 : 4096;
	for (uint64_t i = 0; i < tries; i++) {
		/* relaxed: uniqueness of ids needs only the atomicity of the increment. */
		jobs_id id = atomic_fetch_add_explicit(&r->next_id, 1, memory_order_relaxed);
		jobs_slot *sl = &r->slots[id & r->mask];
		uint32_t free_state = 0;
		/* acquire: pairs with slot_recycle's release, so the cleared fields are seen as cleared. */
		if (!atomic_compare_exchange_strong_explicit(&sl->state, &free_state, JOBS_ST_LIVE,
							     memory_order_acquire, memory_order_relaxed))
			continue; /* occupied by an older receipt: skip this id */
		atomic_store_explicit(&sl->pending, 1, memory_order_relaxed);
		atomic_store_explicit(&sl->fences_left, 0, memory_order_relaxed);
		atomic_store_explicit(&sl->defer, 0, memory_order_relaxed);
		atomic_store_explicit(&sl->failed_dep, 0, memory_order_relaxed);
		atomic_store_explicit(&sl->succ, NULL, memory_order_relaxed);
		atomic_store_explicit(&sl->next, NULL, memory_order_relaxed);
		sl->code = 0;
		sl->message = NULL;
		atomic_fetch_add_explicit(&r->live, 1, memory_order_relaxed);
		/* The id is published only when the submission is accepted (jobs_slot_publish): until then
		 * no call can reach the slot by its id. */
		*out_id = id;
		return sl;
	}
	return NULL;
}

void jobs_slot_publish(jobs_slot *sl, jobs_id id)
{
	/* release: a thread that reads this id (acquire) and then pins sees the initialised slot. */
	atomic_store_explicit(&sl->id, id, memory_order_release);
}

void jobs_slot_abandon(jobs_receipts *r, jobs_slot *sl)
{
	/* The id was never published, so no edge points here; but a stale pinner (holding an id of a
	 * previous occupant) may hold a transient pin, so go through the pin-aware transition: the slot
	 * is recycled now, or by that pinner's unpin. */
	uint32_t old;
	SLOT_TRANSITION(r, sl, old, old | JOBS_ST_RELEASED | JOBS_ST_DONE, memory_order_acq_rel);
	(void)old;
}

jobs_slot *jobs_slot_pin(jobs_receipts *r, jobs_id id, bool allow_released)
{
	if (id == JOBS_INVALID_ID)
		return NULL;
	jobs_slot *sl = &r->slots[id & r->mask];
	/* relaxed: a cheap pre-check; the CAS and the id check below decide. */
	if (atomic_load_explicit(&sl->id, memory_order_relaxed) != id)
		return NULL;
	uint32_t st = atomic_load_explicit(&sl->state, memory_order_relaxed);
	for (;;) {
		if (!(st & JOBS_ST_LIVE) || (!allow_released && (st & JOBS_ST_RELEASED)))
			return NULL;
		if (JOBS_ST_PINS(st) >= (1u << 23)) { /* absurdly many concurrent pins: let them drain */
			sched_yield();
			st = atomic_load_explicit(&sl->state, memory_order_relaxed);
			continue;
		}
		/* acquire: once pinned we read fields written before DONE (released) or at allocation. */
		if (atomic_compare_exchange_weak_explicit(&sl->state, &st, st + JOBS_ST_PIN_ONE,
							  memory_order_acquire, memory_order_relaxed))
			break;
	}
	/* acquire: the slot may have been recycled and re-allocated between the pre-check and the pin;
	 * then it holds another id and we back off. While we hold the pin the id cannot change. */
	if (atomic_load_explicit(&sl->id, memory_order_acquire) != id) {
		jobs_slot_unpin(r, sl);
		return NULL;
	}
	return sl;
}

jobs_slot *jobs_slot_pin_or_gone(jobs_receipts *r, jobs_id id, bool *gone)
{
	*gone = false;
	jobs_slot *sl = &r->slots[id & r->mask];
	for (;;) {
		jobs_slot *p = jobs_slot_pin(r, id, true);
		if (p)
			return p;
		/* relaxed: an id below next_id was handed out at some time; the caller vouches for it. */
		if (id == JOBS_INVALID_ID || id >= atomic_load_explicit(&r->next_id, memory_order_relaxed))
			return NULL;
		/* acquire, acquire: the argument is in receipt.h ("Gone receipts"). */
		uint32_t st = atomic_load_explicit(&sl->state, memory_order_acquire);
		if (!(st & JOBS_ST_LIVE) || atomic_load_explicit(&sl->id, memory_order_acquire) != id) {
			*gone = true;
			return NULL;
		}
		/* LIVE with our id: the pin lost a race with a transient state; try again. */
	}
}

void jobs_slot_unpin(jobs_receipts *r, jobs_slot *sl)
{
	uint32_t old;
	/* acq_rel: release orders our reads of the slot before a recycle by another thread; acquire
	 * (when we are the one that recycles) orders the recycle after everyone's reads. */
	SLOT_TRANSITION(r, sl, old, old - JOBS_ST_PIN_ONE, memory_order_acq_rel);
}

bool jobs_slot_add_edge(jobs_slot *sl, jobs_slot *dependent, jobs_edge *edge, bool *failed)
{
	/* Progress: blocking in one case — a completion that closed the list but has not set DONE
	 * yet is waited out with sched_yield (a few instructions, unless that thread is preempted). */
	edge->dependent = dependent;
	/* acquire on failure path: if we see CLOSED we read the final state below. */
	jobs_edge *head = atomic_load_explicit(&sl->succ, memory_order_acquire);
	for (;;) {
		if (head == JOBS_EDGES_CLOSED) {
			/* acquire: completion set DONE/FAILED after closing; wait for the flags. */
			uint32_t st;
			while (!((st = atomic_load_explicit(&sl->state, memory_order_acquire)) & JOBS_ST_DONE))
				sched_yield();
			*failed = (st & JOBS_ST_FAILED) != 0;
			return false;
		}
		edge->next = head;
		/* release: the edge's fields are visible to the completing thread's acquiring exchange. */
		if (atomic_compare_exchange_weak_explicit(&sl->succ, &head, edge, memory_order_release,
							  memory_order_acquire))
			return true;
	}
}

jobs_edge *jobs_slot_complete(jobs_receipts *r, jobs_slot *sl, uint32_t result, int code, char *message)
{
	/* acq_rel: the acquire half reads the edges pushed with release. The release half orders
	 * nothing that is needed: an add_edge that sees CLOSED waits for DONE (acquire) and takes the
	 * result from the state word, which the DONE transition below publishes. */
	jobs_edge *edges = atomic_exchange_explicit(&sl->succ, JOBS_EDGES_CLOSED, memory_order_acq_rel);
	sl->code = code;
	sl->message = message;
	uint32_t old;
	/* acq_rel: release publishes code/message and everything the job did to whoever observes DONE
	 * (poll, wait, dependents through the edges); acquire in case we recycle. */
	SLOT_TRANSITION(r, sl, old, old | JOBS_ST_DONE | result, memory_order_acq_rel);
	/* Waiters park on the state word and announce it with SLEEPER (receipt.h, "Parking"): no
	 * system call unless one does. */
	jobs_futex_wake_flagged(&sl->state, old, JOBS_ST_SLEEPER);
	return edges;
}

jobs_status jobs_slot_release_pinned(jobs_receipts *r, jobs_slot *sl)
{
	uint32_t old = atomic_load_explicit(&sl->state, memory_order_relaxed);
	for (;;) {
		if (old & JOBS_ST_RELEASED) { /* another thread released it first */
			jobs_slot_unpin(r, sl);
			return JOBS_INVALID;
		}
		/* Set RELEASED and drop our pin at once; recycle when that leaves RELEASED|DONE unpinned. */
		uint32_t nx = (old | JOBS_ST_RELEASED) - JOBS_ST_PIN_ONE;
		bool rec = (nx & JOBS_ST_DONE) && JOBS_ST_PINS(nx) == 0;
		if (rec)
			nx = JOBS_ST_RECYCLING;
		/* acq_rel: as jobs_slot_unpin (this is our unpin): release orders our reads of the slot
		 * before a recycle by another thread, acquire orders our recycle after everyone's. */
		if (atomic_compare_exchange_weak_explicit(&sl->state, &old, nx, memory_order_acq_rel,
							  memory_order_relaxed)) {
			if (rec)
				slot_recycle(r, sl);
			return JOBS_OK;
		}
	}
}

jobs_status jobs_slot_release(jobs_receipts *r, jobs_id id)
{
	jobs_slot *sl = jobs_slot_pin(r, id, false);
	if (!sl)
		return JOBS_INVALID;
	return jobs_slot_release_pinned(r, sl);
}
