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
/* As ovs_column_push_delta, but d's bytes are added to *unsealed, for the caller to count with one
 * ovs_unsealed_add for all the deltas of its op, before the op completes (a seal subtracts them only
 * after that). One locked add on the store's line per op instead of one per column. */
void ovs_column_push_delta_acc(ovs_store *st, ovs_column *c, ovs_delta *d, int64_t *unsealed);
/* Adds bytes (negative: subtracts) to the store's unsealed count. */
void ovs_unsealed_add(ovs_store *st, int64_t bytes);
void ovs_delta_free(ovs_delta *d);
/* The delta's rows in memory of x's device (x a device context: the column's), uploaded at the
 * first call and kept in d->rows_dev for the applies and replays that follow; NULL when it has no
 * rows or the upload could not be made (callers then pass NULL and the backend uploads per call).
 * Called by the delta's one holder: the writer before the push, the sealer after the take. */
const uint32_t *ovs_delta_rows_dev(ovs_store *st, ovs_exec *x, ovs_delta *d);

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
