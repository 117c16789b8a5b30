/* handoff.c — a column's recycled full delta, a one-object slot (see handoff.h). */
#include <string.h>

#include "delta.h"
#include "gpu.h"
#include "handoff.h"

bool ovs_handoff_keeps(const ovs_delta *d)
{
	const ovs_buffer *b = d->full;
	/* acquire: pairs with the release decrements of the chunks and read groups that held the
	 * buffer, so their reads of its bytes happen before the next writer overwrites them (as
	 * pool_give after the last unref). */
	return d->kind == OVS_DELTA_FULL && b && !b->managed && (b->gpu || b->size_class != UINT32_MAX) && !d->rows &&
	       !d->values && !d->blobs && !d->rows_buf && !d->values_buf && !d->rows_map && !d->rows_dev &&
	       atomic_load_explicit(&b->refs, memory_order_acquire) == 1;
}

ovs_delta *ovs_handoff_swap(_Atomic(ovs_delta *) *slot, ovs_delta *d)
{
	ovs_buffer *b = d->full;
	memset(d, 0, sizeof *d);
	d->full = b;
	/* acq_rel: release publishes the zeroed delta (and what the acquire in ovs_handoff_keeps saw)
	 * to the writer that takes it; acquire makes the displaced delta's state, put by an earlier
	 * seal, visible to us, its new holder. */
	return atomic_exchange_explicit(slot, d, memory_order_acq_rel);
}

/* Frees a delta that leaves the slot unused: a device buffer's bytes stop counting as retained. */
static void slot_free(ovs_delta *d)
{
	if (d && d->full && d->full->gpu)
		ovs_gpu_unretain(d->full->gpu, d->full->capacity, false);
	ovs_delta_free(d);
}

void ovs_handoff_put(_Atomic(ovs_delta *) *slot, ovs_delta *d)
{
	ovs_delta *old = ovs_handoff_swap(slot, d);
	if (old) /* usually the column's next write took the slot's last one */
		slot_free(old);
}

bool ovs_handoff_offer(_Atomic(ovs_delta *) *slot, ovs_delta *d)
{
	if (!ovs_handoff_keeps(d))
		return false;
	/* a device buffer is retained memory of its device: only within the pool's bound (gpu.h) */
	if (d->full->gpu && !ovs_gpu_retain(d->full->gpu, d->full->capacity))
		return false;
	ovs_handoff_put(slot, d);
	return true;
}

ovs_delta *ovs_handoff_take(_Atomic(ovs_delta *) *slot)
{
	/* relaxed first: most writes of a column that is not recycled find the slot empty, and a plain
	 * load does not take the line exclusive. */
	if (!atomic_load_explicit(slot, memory_order_relaxed))
		return NULL;
	/* acquire: pairs with ovs_handoff_put's release exchange (the delta's and buffer's state). */
	return atomic_exchange_explicit(slot, NULL, memory_order_acquire);
}

void ovs_handoff_fini(_Atomic(ovs_delta *) *slot)
{
	/* relaxed: teardown, every other thread is gone */
	slot_free(atomic_exchange_explicit(slot, NULL, memory_order_relaxed));
}
