/*
 * teardown.h — what ovstage_destroy_instance does with what the caller left behind (issue 11,
 * item 5; seed 003: "instance destruction ends every native session lifetime").
 *
 * Contract
 *  - Refused (INVALID_ARGUMENT, nothing changed, the instance stays usable) while the caller holds
 *    memory it may still be touching: read groups, maps (their buffers), query results and
 *    hierarchy results. The message names the count of each.
 *  - Otherwise destroy waits for every job of the stage in flight (so borrowed inputs are no longer
 *    read), then releases what holds no caller-visible data: op ids (waited or not), queries,
 *    reads, ordinal queries and hierarchy handles — logging ONE warning (channel "instance") that
 *    names what was left — and frees the stage. A clean destroy logs nothing.
 *  - Op ids are receipts of the process scheduler: a leftover one would hold its receipt slot for
 *    the life of the process. They are found by scanning the receipt ids issued between the
 *    stage's creation and its destruction (ovs_teardown_mark records the first bound) for those
 *    tagged with the stage's serial, stopping when the stage's live count is reached: O(ids
 *    issued process-wide meanwhile), paid only when op ids were left.
 *
 * Thread-safety: as destroy itself — must not race with any other call on the same instance
 * (other instances may run concurrently: their receipts carry other tags and are never touched).
 */
#ifndef OVSTAGE_ENGINE_TEARDOWN_H
#define OVSTAGE_ENGINE_TEARDOWN_H

#include "stage.h"

/* At creation: records the bound above which every op id of the stage will lie. */
void ovs_teardown_mark(ovs_stage *st);

/* OVSTAGE_OK when destroy may proceed; else INVALID_ARGUMENT with the thread's last error naming
 * each kind of caller-visible data still held. Changes nothing. */
ovstage_api_status_t ovs_teardown_check(ovs_stage *st);

/* Waits for the stage's jobs, releases leftover op ids (handles are released by the caller's
 * ovs_handles_fini) and logs the one warning when anything was left. */
void ovs_teardown_release(ovs_stage *st);

#endif /* OVSTAGE_ENGINE_TEARDOWN_H */
