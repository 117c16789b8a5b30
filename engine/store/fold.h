/*
 * fold.h — who folds the change sets that left retention into a column's table, and when
 * (lastchange.h, docs/store.md): a range read before it pins, and the store's fold job, which a seal
 * submits after its publication when a column's unfolded sets pass a bound. Neither waits for the
 * other: the fold flag is a try-lock, and a reader that does not get it pins the unfolded sets.
 */
#ifndef OVSTAGE_ENGINE_FOLD_H
#define OVSTAGE_ENGINE_FOLD_H

#include <stdbool.h>

#include "store.h"

/* Whether c has change sets that left retention and are not folded yet (a hint). */
bool ovs_lc_unfolded(ovs_column *c);
/* Folds c's unfolded change sets, oldest first, if it gets c's fold flag (else returns at once:
 * the holder folds them). Any thread. */
void ovs_lc_fold_column(ovs_store *st, ovs_column *c);
/* The sealer, after a publication: submits the store's fold job unless one is in flight. It copies
 * the rows of the retained versions' pooled change sets (lastchange.h), and folds when `fold`. */
void ovs_lc_job_kick(ovs_store *st, bool fold);
/* Destroy: waits for the last fold job and releases its receipt. */
void ovs_lc_job_fini(ovs_store *st);

#endif /* OVSTAGE_ENGINE_FOLD_H */
