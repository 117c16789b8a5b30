/*
 * inject.h — the bounded multi-producer multi-consumer injection queue through which threads that
 * are not workers hand jobs to the pool.
 *
 * A ring of cells, each with a sequence number (the classic bounded MPMC design of a turn counter
 * per cell). Producers claim a position with a CAS on `enq`, consumers on `deq`; the cell's
 * sequence tells each side whether the cell is ready for it. Full is reported, never waited out:
 * jobs_inject_push_mpmc returns false and the caller reports JOBS_FULL.
 *
 * Progress: push and pop are lock-free in the absence of a stalled peer holding a claimed cell
 * between its CAS and its sequence store (a few instructions); then the next pop of that cell sees
 * "empty" until the store lands. Never blocks, never allocates.
 */
#ifndef OVSTAGE_JOBS_INJECT_H
#define OVSTAGE_JOBS_INJECT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "worker.h"

typedef struct jobs_inject_cell {
	_Atomic uint64_t seq; /* == position: free for that producer; == position+1: full for that consumer */
	void *item;           /* the payload, published by the release store of seq */
} jobs_inject_cell;

typedef struct jobs_inject {
	jobs_inject_cell *cells; /* capacity cells */
	uint64_t mask;           /* capacity - 1 (capacity is a power of two) */
	_Alignas(JOBS_CACHE_LINE) _Atomic uint64_t enq; /* next position producers claim */
	_Alignas(JOBS_CACHE_LINE) _Atomic uint64_t deq; /* next position consumers claim */
} jobs_inject;

bool jobs_inject_init(jobs_inject *q, uint32_t capacity);
void jobs_inject_fini(jobs_inject *q);
bool jobs_inject_push_mpmc(jobs_inject *q, void *item);
bool jobs_inject_pop_mpmc(jobs_inject *q, void **item);
/* A racy emptiness check for the sleep protocol; exact only when no push is in flight. */
bool jobs_inject_maybe_nonempty(jobs_inject *q);

#endif /* OVSTAGE_JOBS_INJECT_H */
