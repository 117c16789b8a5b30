/* ops.c — submitting ops, wait_op / release_op / get_last_op_error. */
#include "ops.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "errors.h"
#include "log.h"

/* Wraps the caller's op so that the stage counts jobs in flight (destroy waits for zero): an
 * ovs_op_wrap (ops.h). */
typedef ovs_op_wrap op_wrap;

static void wrap_fn(jobs_worker *w, void *arg, jobs_run *run)
{
	op_wrap *o = arg;
	o->fn(w, o->arg, run);
	/* Failures also go to the log callback (channel "ops"); one relaxed load when nobody listens. */
	if (jobs_run_failed(run) && ovs_log_on(OVSTAGE_LOG_WARNING)) {
		const char *m = jobs_run_message(run);
		ovs_log(OVSTAGE_LOG_WARNING, "ops", "op %llu failed: %s", (unsigned long long)jobs_run_id(run),
			m ? m : "(no message)");
	}
}

static void wrap_cleanup(void *arg, bool ran)
{
	op_wrap *o = arg;
	/* Read before the cleanup: an embedded wrap may go with the object the cleanup frees. */
	ovs_stage *st = o->st;
	bool owned = o->owned;
	if (o->cleanup)
		o->cleanup(o->arg, ran);
	if (owned)
		free(o);
	/* release: everything the op did happens-before destroy's acquire that sees zero. */
	atomic_fetch_sub_explicit(&st->jobs_in_flight, 1, memory_order_release);
}

ovstage_enqueue_result_t ovs_op_submit(ovs_stage *st, const ovs_op_desc *d)
{
	op_wrap *o = d->wrap ? d->wrap : malloc(sizeof *o);
	if (!o) {
		if (d->cleanup)
			d->cleanup(d->arg, false);
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory submitting an op"));
	}
	o->st = st;
	o->fn = d->fn;
	o->arg = d->arg;
	o->cleanup = d->cleanup;
	o->owned = !d->wrap;
	jobs_job_desc jd = { 0 };
	jd.fn = wrap_fn;
	jd.arg = o;
	jd.cleanup = wrap_cleanup;
	jd.after = d->after;
	jd.after_count = d->after_count;
	jd.fences = d->fences;
	/* Dependencies are op ids the engine issued itself; the caller may have released them. */
	jd.flags = JOBS_AFTER_MAY_BE_RELEASED | (d->run_after_failure ? JOBS_RUN_AFTER_FAILED_DEPENDENCY : 0u) |
		   (d->run_inline ? JOBS_RUN_INLINE : 0u);
	jd.tag = st->serial;
	atomic_fetch_add_explicit(&st->jobs_in_flight, 1, memory_order_relaxed);
	jobs_id id;
	jobs_status s = jobs_submit(st->sched, &jd, &id);
	if (s != JOBS_OK) {
		atomic_fetch_sub_explicit(&st->jobs_in_flight, 1, memory_order_relaxed);
		if (d->cleanup)
			d->cleanup(d->arg, false); /* o is not touched after this: it may have gone with arg */
		if (!d->wrap)
			free(o);
		if (s == JOBS_FULL)
			return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_QUEUE_FULL,
						       "the submission queue is full (%u slots): retry after ops complete",
						       ovs_runtime_queue_capacity()));
		if (s == JOBS_INVALID)
			return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_HANDLE,
						       "an op this one depends on was already released"));
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory submitting an op"));
	}
	atomic_fetch_add_explicit(&st->live_ops, 1, memory_order_relaxed);
	ovstage_enqueue_result_t r = { OVSTAGE_OK, id };
	return r;
}

ovstage_enqueue_result_t ovs_op_done(ovs_stage *st)
{
	jobs_id id;
	if (jobs_submit_done(st->sched, st->serial, &id) != JOBS_OK)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_QUEUE_FULL,
					       "the submission queue is full (%u slots): retry after ops complete",
					       ovs_runtime_queue_capacity()));
	/* relaxed: a counter, as in ovs_op_submit (no job runs: jobs_in_flight is not involved) */
	atomic_fetch_add_explicit(&st->live_ops, 1, memory_order_relaxed);
	ovstage_enqueue_result_t r = { OVSTAGE_OK, id };
	return r;
}

void ovs_op_noop(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	(void)arg;
	(void)run;
}

ovstage_enqueue_result_t ovs_release_handle_op(ovs_stage *st, uint64_t handle, ovs_handle_kind kind,
					       const char *what)
{
	/* The op first, the handle after: a release refused for want of a receipt leaves the handle
	 * live (a failed call changes nothing; the caller retries). The op has nothing to run: a
	 * receipt complete at once (no body, no allocation). */
	ovstage_enqueue_result_t r = ovs_op_done(st);
	if (r.status != OVSTAGE_OK) {
		/* A bad handle still gets its INVALID_HANDLE (as before the receipt existed). */
		ovs_hobj *h = ovs_handle_get(&st->handles, handle, kind);
		if (!h)
			return ovs_rejected(ovs_handle_invalid(&st->handles, handle, what));
		ovs_hobj_unref(h);
		return r; /* the handle stays the caller's */
	}
	ovs_hobj *h = ovs_handle_remove(&st->handles, handle, kind);
	if (!h) {
		/* a bad handle, or another thread released it first: this call released nothing */
		ovstage_api_status_t s = ovs_handle_invalid(&st->handles, handle, what);
		if (jobs_release(st->sched, r.op_index) == JOBS_OK)
			/* relaxed: a counter, as in ovs_release_op */
			atomic_fetch_sub_explicit(&st->live_ops, 1, memory_order_relaxed);
		return ovs_rejected(s);
	}
	ovs_hobj_unref(h);
	return r;
}

void ovs_ops_quiesce(ovs_stage *st)
{
	struct timespec ts = { 0, 100000 };
	/* acquire: pairs with wrap_cleanup's release. */
	while (atomic_load_explicit(&st->jobs_in_flight, memory_order_acquire) != 0)
		nanosleep(&ts, NULL);
}

/* Thread-local result of the last wait_op: failed op ids and their messages. */
#define OVS_WAIT_ERRORS 8
static _Thread_local ovstage_op_id_t tls_err_ids[OVS_WAIT_ERRORS];
static _Thread_local char tls_err_msgs[OVS_WAIT_ERRORS][512];
static _Thread_local size_t tls_err_count;

/* Records a failed op and its message; false (nothing recorded) when its receipt is gone (an op
 * the caller, or the engine for an internal one, already released). */
static bool record_failure(ovs_stage *st, ovstage_op_id_t id)
{
	if (tls_err_count >= OVS_WAIT_ERRORS)
		return false;
	int code = 0;
	if (jobs_receipt_result(st->sched, id, &code, tls_err_msgs[tls_err_count], sizeof tls_err_msgs[0]) ==
	    JOBS_INVALID)
		return false;
	tls_err_ids[tls_err_count++] = id;
	return true;
}

void ovs_opstate_init(ovs_opstate *o)
{
	atomic_init(&o->done, 0);
	atomic_init(&o->status, OVSTAGE_OK);
}

void ovs_opstate_finish(ovs_opstate *o, ovstage_api_status_t status)
{
	/* relaxed + release: a waiter that acquires `done` reads the status. */
	atomic_store_explicit(&o->status, (int)status, memory_order_relaxed);
	atomic_store_explicit(&o->done, 1, memory_order_release);
}

ovstage_api_status_t ovs_opstate_wait(ovs_stage *st, ovs_opstate *o, jobs_id op, ovstage_timeout_ns_t timeout)
{
	uint64_t start = 0;
	for (;;) {
		/* acquire: pairs with ovs_opstate_finish. */
		if (atomic_load_explicit(&o->done, memory_order_acquire))
			return (ovstage_api_status_t)atomic_load_explicit(&o->status, memory_order_relaxed);
		jobs_status s = jobs_wait(st->sched, op, timeout);
		if (s == JOBS_PENDING)
			return OVSTAGE_ERROR_TIMEOUT;
		if (s != JOBS_INVALID)
			continue; /* done: the finish happened before the receipt completed */
		/* The op id was released by the caller: poll our own completion word. */
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		uint64_t t = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
		if (!start)
			start = t;
		if (timeout != OVSTAGE_TIMEOUT_INFINITE && t - start >= timeout)
			return atomic_load_explicit(&o->done, memory_order_acquire)
				       ? (ovstage_api_status_t)atomic_load_explicit(&o->status, memory_order_relaxed)
				       : OVSTAGE_ERROR_TIMEOUT;
		struct timespec ts = { 0, 20000 };
		nanosleep(&ts, NULL);
	}
}

ovstage_api_status_t ovs_op_wait_status(ovs_stage *st, jobs_id op, ovstage_timeout_ns_t timeout)
{
	jobs_status s = jobs_wait(st->sched, op, timeout);
	if (s == JOBS_PENDING)
		return OVSTAGE_ERROR_TIMEOUT;
	if (s == JOBS_INVALID)
		return OVSTAGE_ERROR_INVALID_HANDLE;
	if (s == JOBS_OK)
		return OVSTAGE_OK;
	int code = 0;
	jobs_receipt_result(st->sched, op, &code, NULL, 0);
	return code > 0 ? (ovstage_api_status_t)code : OVSTAGE_ERROR_OP_FAILED;
}

ovstage_api_status_t ovs_wait_op(ovstage_context_t *ctx, ovstage_op_id_t op_id, ovstage_timeout_ns_t timeout,
				 ovstage_op_wait_result_t *out)
{
	ovs_err_clear();
	ovs_stage *st = ovs_stage_of(ctx);
	tls_err_count = 0;
	if (out) {
		out->error_op_ids = tls_err_ids;
		out->error_op_id_count = 0;
		out->lowest_pending_op_id = OVSTAGE_INVALID_OP_ID;
	}
	if (!st)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "instance is NULL");
	if (!out)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "out_wait_result is NULL");
	/* One pin checks that the id is a live op of ours (its tag) and waits. */
	jobs_status s = jobs_wait_tagged(st->sched, op_id, st->serial, timeout);
	if (s == JOBS_INVALID)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_HANDLE, "op id %llu is not a live op of this instance",
				   (unsigned long long)op_id);
	if (s == JOBS_PENDING) {
		out->lowest_pending_op_id = op_id;
		return OVSTAGE_ERROR_TIMEOUT;
	}
	if (s != JOBS_OK) {
		/* Root cause first: a failed producer this op depended on, then the op itself. */
		/* A released producer is not listed (its message is gone): the op's own message, which
		 * then names the failure, is the root cause. */
		jobs_id dep = 0;
		jobs_receipt_failed_dependency(st->sched, op_id, &dep);
		bool listed = dep && record_failure(st, dep);
		if (record_failure(st, op_id) && listed)
			tls_err_msgs[tls_err_count - 1][0] = '\0'; /* the waited op's own message is empty */
		out->error_op_id_count = tls_err_count;
		/* The statuses 0.2.1 documents for these execution-time failures are returned as well (an
		 * INSERT onto an existing prim or a clone target that exists: PRIM_NOT_FOUND; a clone
		 * source that does not exist: NOT_FOUND; an ordinal at or below the floor, an unsealed
		 * read: WRITE_FLOOR_VIOLATION; a range whose payload or membership is gone: OUT_OF_RANGE),
		 * when the waited op itself failed with one. A failure of an op it depended on (its own
		 * message is empty) and every other failure keep OK with the ids listed, as in 0.2.1. */
		int code = 0;
		if (!dep && jobs_receipt_result(st->sched, op_id, &code, NULL, 0) == JOBS_FAILED &&
		    (code == OVSTAGE_ERROR_PRIM_NOT_FOUND || code == OVSTAGE_ERROR_NOT_FOUND ||
		     code == OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION || code == OVSTAGE_ERROR_OUT_OF_RANGE))
			return (ovstage_api_status_t)code;
	}
	return OVSTAGE_OK;
}

ovstage_api_status_t ovs_release_op(ovstage_context_t *ctx, ovstage_op_id_t op_id)
{
	ovs_err_clear();
	ovs_stage *st = ovs_stage_of(ctx);
	if (!st)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "instance is NULL");
	if (jobs_release_tagged(st->sched, op_id, st->serial) != JOBS_OK)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_HANDLE, "op id %llu is not a live op of this instance "
				   "(never issued, or already released)", (unsigned long long)op_id);
	atomic_fetch_sub_explicit(&st->live_ops, 1, memory_order_relaxed);
	return OVSTAGE_OK;
}

ovx_string_t ovs_get_last_op_error(ovstage_context_t *ctx, ovstage_op_id_t op_id)
{
	(void)ctx;
	ovx_string_t s = { NULL, 0 };
	for (size_t i = 0; i < tls_err_count; i++)
		if (tls_err_ids[i] == op_id && tls_err_msgs[i][0]) {
			s.ptr = tls_err_msgs[i];
			s.length = strlen(tls_err_msgs[i]);
			break;
		}
	return s;
}
