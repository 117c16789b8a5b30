/* inject.c — bounded MPMC queue; the ordering argument is in docs/jobs.md ("Injection queue"). */
#include "inject.h"

#include <stdlib.h>

bool jobs_inject_init(jobs_inject *q, uint32_t capacity)
{
	uint64_t cap = 2;
	while (cap < capacity)
		cap <<= 1;
	q->cells = calloc(cap, sizeof *q->cells);
	if (!q->cells)
		return false;
	q->mask = cap - 1;
	for (uint64_t i = 0; i < cap; i++)
		atomic_init(&q->cells[i].seq, i);
	atomic_init(&q->enq, 0);
	atomic_init(&q->deq, 0);
	return true;
}

void jobs_inject_fini(jobs_inject *q)
{
	free(q->cells);
	q->cells = NULL;
}

bool jobs_inject_push_mpmc(jobs_inject *q, void *item)
{
	/* relaxed: positions are only claims; the cell's seq carries the data ordering. */
	uint64_t pos = atomic_load_explicit(&q->enq, memory_order_relaxed);
	jobs_inject_cell *c;
	for (;;) {
		c = &q->cells[pos & q->mask];
		/* acquire: if the cell is free, the consumer that freed it has finished reading item. */
		uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
		int64_t diff = (int64_t)(seq - pos);
		if (diff == 0) {
			/* relaxed CAS: claiming a position orders nothing by itself. */
			if (atomic_compare_exchange_weak_explicit(&q->enq, &pos, pos + 1,
								  memory_order_relaxed, memory_order_relaxed))
				break;
		} else if (diff < 0) {
			return false; /* the cell still holds an item from a lap ago: full */
		} else {
			pos = atomic_load_explicit(&q->enq, memory_order_relaxed);
		}
	}
	c->item = item;
	/* release: the item (and everything the producer wrote before pushing) is visible to the
	 * consumer whose acquire load sees pos + 1. */
	atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
	return true;
}

bool jobs_inject_pop_mpmc(jobs_inject *q, void **item)
{
	uint64_t pos = atomic_load_explicit(&q->deq, memory_order_relaxed);
	jobs_inject_cell *c;
	for (;;) {
		c = &q->cells[pos & q->mask];
		/* acquire: pairs with the producer's release store of seq = pos + 1. */
		uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
		int64_t diff = (int64_t)(seq - (pos + 1));
		if (diff == 0) {
			if (atomic_compare_exchange_weak_explicit(&q->deq, &pos, pos + 1,
								  memory_order_relaxed, memory_order_relaxed))
				break;
		} else if (diff < 0) {
			return false; /* empty (or the producer of this cell has not finished) */
		} else {
			pos = atomic_load_explicit(&q->deq, memory_order_relaxed);
		}
	}
	*item = c->item;
	/* release: our read of item happens-before the producer that reuses the cell a lap later. */
	atomic_store_explicit(&c->seq, pos + q->mask + 1, memory_order_release);
	return true;
}

bool jobs_inject_maybe_nonempty(jobs_inject *q)
{
	/* relaxed: callers order this load themselves (an acquiring RMW on `idle` in the sleep
	 * protocol). */
	return atomic_load_explicit(&q->enq, memory_order_relaxed) !=
	       atomic_load_explicit(&q->deq, memory_order_relaxed);
}
