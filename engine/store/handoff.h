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
 * What is kept: a FULL delta whose buffer is a pooled host buffer (not adopted, not on a device)
 * that nothing else holds (its count is 1, the delta's: the version's chunks went first). The delta
 * is zeroed but for `full`. A writer that cannot use the buffer (another size class) releases it to
 * the pool as before.
 */
#ifndef OVSTAGE_ENGINE_HANDOFF_H
#define OVSTAGE_ENGINE_HANDOFF_H

#include <stdatomic.h>
#include <stdbool.h>

#include "model.h"

/* Whether d (being freed by the sealer) can be handed to the next write of its column. */
bool ovs_handoff_keeps(const ovs_delta *d);
/* Puts d (ovs_handoff_keeps) into the slot: zeroed but for its buffer. The delta it displaces, if
 * any, is freed (its buffer back to the pool). Sealer. */
void ovs_handoff_put(_Atomic(ovs_delta *) *slot, ovs_delta *d);
/* As ovs_handoff_put, but returns the displaced delta (NULL: none), which the caller now holds. */
ovs_delta *ovs_handoff_swap(_Atomic(ovs_delta *) *slot, ovs_delta *d);
/* The slot's delta (zeroed but for `full`, which may be NULL), or NULL. Any thread. */
ovs_delta *ovs_handoff_take(_Atomic(ovs_delta *) *slot);
/* Frees the slot's delta (column teardown: no other thread is left). */
void ovs_handoff_fini(_Atomic(ovs_delta *) *slot);

#endif /* OVSTAGE_ENGINE_HANDOFF_H */
