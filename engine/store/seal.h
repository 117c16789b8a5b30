/*
 * seal.h — one floor advance: seal the deltas at or below the new floor into versions, trim each
 * column's retention, publish one snapshot for all of them, and retire what left retention through
 * the grace period (grace.h).
 *
 * Seals of one stage run one after another (each seal op depends on the previous one); everything
 * else may run concurrently with them.
 */
#ifndef OVSTAGE_ENGINE_SEAL_H
#define OVSTAGE_ENGINE_SEAL_H

#include "exec.h"
#include "store.h"

/* Most ordinals one publication of a seal covers (also at most half the retention). */
#define OVS_SEAL_BATCH 32u

/* Seals `cols` (ncols columns) through ordinal n and publishes one snapshot. Runs as a job; w is
 * the execution context (on the CPU: the worker, for parallel work). Returns OVSTAGE_OK or a status with a message in err. */
ovstage_api_status_t ovs_store_seal(ovs_store *st, ovs_exec *x, ovs_column **cols, size_t ncols,
				    ovstage_ordinal_t n, bool advance_stage_floor, char *err, size_t errlen);

/* The latest version of a column in a snapshot, or NULL. */
ovs_version *ovs_snapshot_version(const ovs_snapshot *snap, const ovs_column *c);

/* Test hook: when set, a seal calls it after each version it builds (on the sealing thread), so a
 * test can observe what a seal in progress holds. */
typedef void (*ovs_seal_hook_fn)(void);
void ovs_seal_set_test_hook(ovs_seal_hook_fn fn);

/* Frees the limbo and the current snapshot (destroy). */
void ovs_seal_fini(ovs_store *st);

/* Wakes threads waiting for a floor (ovstage_ext_wait_write_floor) after a publication moved floors:
 * bumps the store's floor_seq, and makes the futex call only when someone waits. */
void ovs_floor_notify(ovs_store *st);

#endif /* OVSTAGE_ENGINE_SEAL_H */
