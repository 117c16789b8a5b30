/*
 * handoff.h — a column's recycled full delta: the sealer hands the delta struct and the buffer of a
 * full write that left retention to the column's next full write, through a one-object slot.
 *
 * Why: a stream of full writes (bench/stage row (b): 8 columns x 4 KiB per ordinal) allocated a delta
 * and took a buffer from the stage's pool (its mutex) per column per write, and the seal freed the
 * delta and gave the buffer back (the mutex again) when the version left retention. The slot moves
 * both from the seal that frees them to the next write of the column with one atomic exchange each.
 *
 * Ownership: whoever holds an object holds it alone. The sealer puts a delta with an atomic exchange
 * (and frees the one it displaces); a writer takes with an exchange of NULL. An exchange, unlike a
 * compare-and-swap on a list head, has no ABA: each object passes from one holder to the next in
 * one indivisible step, so none is lost and none is taken twice (tests/engine/check_handoff.c).
 *
 * What is kept: a FULL delta whose buffer is a pooled host buffer or a device buffer (not adopted)
 * that nothing else holds (its count is 1, the delta's: the version's chunks went first). The delta
 * is zeroed but for `full`. A writer that cannot use the buffer (another size class, another size
 * on a device) releases it to the pool as before.
 *
 * A device buffer in the slot is retained memory of its device: ovs_handoff_offer keeps it only
 * within the device pool's bound (ovs_gpu_retain), and it stops counting when it leaves the slot
 * (displaced, at teardown, or taken: the writer that takes one calls ovs_gpu_unretain, counting a
 * pool hit if it reuses it). Its reuse is ordered as a pool hit is: the writer issues its copy on the
 * same engine stream (the buffer's `gpu`) as every earlier user of the bytes (session 20: the
 * block cache's mutex and two mallocs per column were ~19 % of a 100-column device step's write
 * and seal on the H200).
 */
#ifndef OVSTAGE_ENGINE_HANDOFF_H
#define OVSTAGE_ENGINE_HANDOFF_H

#include <stdatomic.h>
#include <stdbool.h>

#include "model.h"

/* Whether d (being freed by the sealer) can be handed to the next write of its column. */
bool ovs_handoff_keeps(const ovs_delta *d);
/* Puts d (ovs_handoff_keeps, a host buffer: a device one goes through ovs_handoff_offer) into the
 * slot: zeroed but for its buffer. The delta it displaces, if any, is freed (its buffer back to the
 * pool). Sealer. */
void ovs_handoff_put(_Atomic(ovs_delta *) *slot, ovs_delta *d);
/* Puts d into the slot if it can be kept there (ovs_handoff_keeps, and a device buffer's bytes
 * within its device's retained bound); false: not kept, the caller frees it. Sealer. */
bool ovs_handoff_offer(_Atomic(ovs_delta *) *slot, ovs_delta *d);
/* As ovs_handoff_put, but returns the displaced delta (NULL: none), which the caller now holds. */
ovs_delta *ovs_handoff_swap(_Atomic(ovs_delta *) *slot, ovs_delta *d);
/* The slot's delta (zeroed but for `full`, which may be NULL), or NULL. Any thread. The taker of a
 * device buffer uncounts it (ovs_gpu_unretain) whether it reuses it or not. */
ovs_delta *ovs_handoff_take(_Atomic(ovs_delta *) *slot);
/* Frees the slot's delta (column teardown: no other thread is left). */
void ovs_handoff_fini(_Atomic(ovs_delta *) *slot);

#endif /* OVSTAGE_ENGINE_HANDOFF_H */
