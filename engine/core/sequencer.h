/*
 * sequencer.h — ordering of mutations and floor advances at submission time.
 *
 * A mutation (write, delete, map commit) is admitted only if its ordinal is above the floor every
 * accepted advance has asked for on its columns, and is then registered as in flight; a floor
 * advance to N depends on every registered mutation at an ordinal <= N in its scope, and on the
 * previous advance (seals of one stage run in submission order). Admission, registration and the
 * advance's snapshot of the in-flight set happen under one short mutex (a few hundred
 * nanoseconds: no allocation of data, no waiting), so no mutation can slip between an advance's
 * check and its dependency list. Execution itself takes no lock.
 */
#ifndef OVSTAGE_ENGINE_SEQUENCER_H
#define OVSTAGE_ENGINE_SEQUENCER_H

#include "ops.h"

/* Admits and submits a mutation touching `cols` (ncols tokens; cols == NULL = every column, e.g. a
 * whole-prim delete) at `ordinal`. Takes ownership of `cols` (malloc'd). On success *out_inflight is
 * the record the op must mark done (ovs_inflight_done) when it finishes. On rejection the op's
 * cleanup runs and the last error is set (WRITE_FLOOR_VIOLATION names the column and floor).
 * `slots` (NULL, or ncols entries): where the op keeps the column of each of cols, which may be a
 * prepared, unpublished one (ovs_column_prepare); once the op is admitted and submitted they are
 * published here, under the admission lock, before the op can run (an op that has no fence of its
 * own is held by one until then), and the slots updated. A refused op publishes nothing: its
 * cleanup discards what it prepared. */
ovstage_enqueue_result_t ovs_sequencer_submit_mutation(ovs_stage *st, ovstage_ordinal_t ordinal, ovx_token_t *cols,
						       size_t ncols, ovs_column **const *slots, const ovs_op_desc *op,
						       ovs_inflight **out_inflight);

/* A check made under the admission lock, after the floor check and before the op is submitted:
 * atomic with respect to every other admission and advance submission of the stage (a map that
 * must see no unsealed write of its column: ops/map.c). Returns OVSTAGE_OK, or a status with the
 * last error set: the op is then refused as for a floor violation. It must not block. */
typedef ovstage_api_status_t (*ovs_admit_fn)(void *arg);

/* ovs_sequencer_submit_mutation with an admission check (admit NULL: none). */
ovstage_enqueue_result_t ovs_sequencer_submit_mutation_if(ovs_stage *st, ovstage_ordinal_t ordinal, ovx_token_t *cols,
							  size_t ncols, ovs_column **const *slots,
							  const ovs_op_desc *op, ovs_inflight **out_inflight,
							  ovs_admit_fn admit, void *admit_arg);

/* Submits a floor advance to n over cols (ncols columns; all = ALL scope, the stage floor moves
 * too): raises their requested floors (so admission refuses mutations at or below n from now on),
 * and makes the op depend on the previous advance and on every mutation in flight at an ordinal
 * <= n touching one of them, atomically w.r.t. admissions. op->after is set here; an op with
 * run_inline runs on this thread (outside the lock) if its dependencies are complete. On
 * rejection the op's cleanup runs and the last error is set. */
ovstage_enqueue_result_t ovs_sequencer_submit_advance(ovs_stage *st, ovstage_ordinal_t n, ovs_column *const *cols,
						      size_t ncols, bool all, const ovs_op_desc *op);

/* Records that a mutation at `ordinal` completed its part on column c (a write entry, a map
 * commit, a tombstone): the column then has a write at that ordinal whatever its op's outcome. */
void ovs_sequencer_applied(ovs_column *c, ovstage_ordinal_t ordinal);

/* Marks a mutation finished (called from its cleanup). A mutation that did not complete on one of
 * its columns leaves no mark there: that column's max_written falls back to what completed or is
 * still in flight, so latest reads above the floor are not refused for a write that failed. */
void ovs_inflight_done(ovs_stage *st, ovs_inflight *f);
/* The same for an op that knows it applied every column it touches at its ordinal (each one's
 * ovs_sequencer_applied ran): nothing to look up or recompute (a lookup per column of the op
 * otherwise). all_applied false: ovs_inflight_done. */
void ovs_inflight_done_applied(ovs_stage *st, ovs_inflight *f, bool all_applied);

#endif /* OVSTAGE_ENGINE_SEQUENCER_H */
