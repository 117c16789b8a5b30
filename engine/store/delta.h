/*
 * delta.h — deltas: the effect of one op on one column at one ordinal, on their way from the writer
 * to a seal. Writers push onto the column's inbox (a Treiber stack: lock-free, any thread); the seal
 * takes the whole inbox (acquire) and merges it into its sorted pending list (seal-owned).
 * Back-pressure bounds the bytes waiting in inboxes and pending lists.
 */
#ifndef OVSTAGE_ENGINE_DELTA_H
#define OVSTAGE_ENGINE_DELTA_H

#include "store.h"

/* Hands a delta to its column's inbox (lock-free) and counts its bytes as unsealed. */
void ovs_column_push_delta(ovs_store *st, ovs_column *c, ovs_delta *d);
void ovs_delta_free(ovs_delta *d);

/* Seal side: drains the inbox into c->pending, sorted by (ordinal, op id). false when out of memory
 * (nothing is lost: the deltas stay pending for the next seal). */
bool ovs_column_take_inbox(ovs_column *c);

/* Back-pressure, checked by writes and maps at the call: OVSTAGE_ERROR_QUEUE_FULL (with a message)
 * when the stage holds more unsealed written data than its limit, unless the write fills a gap in
 * every column it names (cols NULL: every column of the store) — its ordinal is at most the column's
 * floor + 1 or at most the lowest ordinal of the column's unsealed data. Refusing such a write could
 * leave the seal that frees the budget waiting forever for it (a lagging producer behind a fast one
 * that filled the budget); admitting it adds at most the gap's writes. OVSTAGE_OK otherwise. */
ovstage_api_status_t ovs_check_unsealed(ovs_store *st, ovstage_ordinal_t ordinal, const ovx_token_t *cols,
					size_t ncols);
/* Seal side: recomputes c->min_unsealed from the pending list after a seal. */
void ovs_column_min_unsealed_reset(ovs_column *c);

#endif /* OVSTAGE_ENGINE_DELTA_H */
