/*
 * floor_wait.h — waiting for a write floor (ovstage_ext_wait_write_floor, ovstage_ext.h).
 *
 * Contract: returns OVSTAGE_OK once the floor of `attribute` (empty: the global floor) is at least
 * `ordinal`, OVSTAGE_ERROR_TIMEOUT (with a message) when the timeout passes first; blocking, no
 * polling: the thread sleeps on the store's floor_seq futex word between publications. Thread-safe;
 * any number of waiters. Must not be called from a job body (it would hold a worker).
 */
#ifndef OVSTAGE_ENGINE_FLOOR_WAIT_H
#define OVSTAGE_ENGINE_FLOOR_WAIT_H

#include "stage.h"

ovstage_api_status_t ovs_wait_write_floor(ovs_stage *st, ovx_string_or_token_t attribute, ovstage_ordinal_t ordinal,
					  ovstage_timeout_ns_t timeout);

#endif /* OVSTAGE_ENGINE_FLOOR_WAIT_H */
