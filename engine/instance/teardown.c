/* teardown.c — destroy with leftovers: refuse while caller-visible data is held, else complete,
 * release and warn once (teardown.h). */
#include "teardown.h"

#include <stdio.h>
#include <string.h>

#include "errors.h"
#include "log.h"
#include "ops.h"

/* A receipt id issued now: every later id is larger (receipt ids are monotonic). 0 when the
 * receipt table is full (the caller then falls back to a wider scan). */
static jobs_id probe_id(ovs_stage *st)
{
	jobs_job_desc jd = { 0 };
	jd.fn = ovs_op_noop;
	jd.flags = JOBS_RUN_INLINE;
	jd.tag = 0; /* no stage's serial: never taken for an op of any stage */
	jobs_id id = 0;
	if (jobs_submit(st->sched, &jd, &id) != JOBS_OK)
		return 0;
	jobs_wait(st->sched, id, UINT64_MAX);
	jobs_release(st->sched, id);
	return id;
}

void ovs_teardown_mark(ovs_stage *st)
{
	st->op_id_floor = probe_id(st);
}

/* Appends ", N thing(s)" to buf when n > 0. */
static void add_count(char *buf, size_t cap, int64_t n, const char *one, const char *many)
{
	if (n <= 0)
		return;
	size_t len = strlen(buf);
	snprintf(buf + len, cap - len, "%s%lld %s", len ? ", " : "", (long long)n, n == 1 ? one : many);
}

static int64_t live(ovs_stage *st, ovs_handle_kind k)
{
	return ovs_handles_live(&st->handles, k);
}

ovstage_api_status_t ovs_teardown_check(ovs_stage *st)
{
	char held[256] = "";
	add_count(held, sizeof held, live(st, OVS_H_GROUP), "read group", "read groups");
	add_count(held, sizeof held, live(st, OVS_H_MAP), "map", "maps");
	add_count(held, sizeof held, live(st, OVS_H_QRESULT), "query result", "query results");
	add_count(held, sizeof held, live(st, OVS_H_HRESULT), "hierarchy result", "hierarchy results");
	if (!held[0])
		return OVSTAGE_OK;
	return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
			   "instance still holds %s (memory the caller may be using): release them, then destroy "
			   "again (nothing was destroyed)", held);
}

/* Releases the stage's live op ids above the creation bound; returns how many were released. */
static int64_t release_op_ids(ovs_stage *st)
{
	/* acquire: after quiesce, pairs with nothing racing; the count is exact (no other call runs). */
	int64_t want = atomic_load_explicit(&st->live_ops, memory_order_acquire);
	if (want <= 0)
		return 0;
	jobs_id hi = probe_id(st);
	int64_t found = 0;
	/* Without an upper bound (receipt table full) the scan stops at the count alone: every one of
	 * the `want` ids exists above the floor, so it terminates. */
	for (jobs_id id = st->op_id_floor + 1; found < want && (hi == 0 || id < hi); id++) {
		uint64_t tag = 0;
		if (jobs_receipt_tag(st->sched, id, &tag) != JOBS_OK || tag != st->serial)
			continue;
		if (jobs_release(st->sched, id) == JOBS_OK)
			found++;
	}
	/* relaxed: destroy is alone on the stage. */
	atomic_fetch_sub_explicit(&st->live_ops, found, memory_order_relaxed);
	return found;
}

void ovs_teardown_release(ovs_stage *st)
{
	ovs_ops_quiesce(st); /* what is in flight completes: inputs it borrows are no longer read */
	char left[256] = "";
	add_count(left, sizeof left, release_op_ids(st), "op id", "op ids");
	add_count(left, sizeof left, live(st, OVS_H_QUERY), "query", "queries");
	add_count(left, sizeof left, live(st, OVS_H_READ), "read", "reads");
	add_count(left, sizeof left, live(st, OVS_H_ORDQ), "ordinal query", "ordinal queries");
	add_count(left, sizeof left, live(st, OVS_H_HIER), "hierarchy handle", "hierarchy handles");
	if (left[0])
		ovs_log(OVSTAGE_LOG_WARNING, "instance",
			"destroy_instance(\"%s\"): released what the caller left: %s (release them before destroying)",
			st->name ? st->name : "", left);
}
