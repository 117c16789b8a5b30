/*
 * ops.h — op ids. Every enqueue-style call submits one job; its receipt is the op id, tagged with
 * the stage so that ids of other stages are rejected. Failures carry an ovstage status as the
 * receipt code and a message naming what was wrong.
 */
#ifndef OVSTAGE_ENGINE_OPS_H
#define OVSTAGE_ENGINE_OPS_H

#include "stage.h"

/* What ovs_op_submit keeps with a submitted op until its cleanup has run (the stage's count of jobs
 * in flight, the body and cleanup it wraps). Malloc'd per op, unless the op's object embeds one
 * and names it in ovs_op_desc.wrap: then it must stay valid until `cleanup` is called, and it is
 * not touched once `cleanup` has been called (the cleanup may free the object holding it). */
typedef struct ovs_op_wrap {
	struct ovs_stage *st;    /* the stage */
	jobs_job_fn fn;          /* the op body */
	void *arg;               /* its argument */
	jobs_cleanup_fn cleanup; /* its cleanup */
	bool owned;              /* malloc'd by ovs_op_submit (freed after the cleanup), not embedded */
} ovs_op_wrap;

/* What an op body needs: submit it with ovs_op_submit. `cleanup` runs exactly once. A body may
 * receive w == NULL (run inline on a thread outside the pool: ovs_copy then copies serially). */
typedef struct ovs_op_desc {
	jobs_job_fn fn;           /* body: report failures with ovs_op_fail */
	void *arg;                /* its argument */
	jobs_cleanup_fn cleanup;  /* frees arg (ran or not); may be NULL */
	const jobs_id *after;     /* ops that must complete first */
	size_t after_count;       /* entries in after */
	bool run_after_failure;   /* run even if a dependency failed */
	uint32_t fences;          /* extra dependencies resolved with jobs_fence_resolve (0 = none) */
	bool run_inline;          /* short body: the thread that makes it runnable at submission (all
	                           * dependencies already complete) runs it before returning, with
	                           * w == NULL off the pool (JOBS_RUN_INLINE) */
	ovs_op_wrap *wrap;        /* storage for the op's wrap inside its object (see ovs_op_wrap), or
	                           * NULL: malloc'd */
} ovs_op_desc;

/* Submits; on rejection the cleanup runs (with ran = false), the last error is set and the result
 * carries QUEUE_FULL / OUT_OF_MEMORY / INVALID_HANDLE. */
ovstage_enqueue_result_t ovs_op_submit(ovs_stage *st, const ovs_op_desc *d);

/* Inside a body: fail the op with a status and message. */
#define ovs_op_fail(run, status, ...) jobs_job_fail((run), (int)(status), __VA_ARGS__)

/* An op id that is complete when the call returns, with no body (an enqueue whose effect happened
 * at the call): a receipt and nothing to run. On rejection (QUEUE_FULL) the last error is set. */
ovstage_enqueue_result_t ovs_op_done(ovs_stage *st);

/* A body that does nothing (ops whose effect happened at the call, such as releases). */
void ovs_op_noop(jobs_worker *w, void *arg, jobs_run *run);

/* Retires a handle of `kind` (named `what` in messages) and returns an op that completes at once:
 * the release enqueue of the API (in-flight ops hold their own references). */
ovstage_enqueue_result_t ovs_release_handle_op(ovs_stage *st, uint64_t handle, ovs_handle_kind kind,
					       const char *what);

/* Waits until the stage has no job running (destroy). */
void ovs_ops_quiesce(ovs_stage *st);

ovstage_api_status_t ovs_wait_op(ovstage_context_t *ctx, ovstage_op_id_t op_id, ovstage_timeout_ns_t timeout,
				 ovstage_op_wait_result_t *out);
ovstage_api_status_t ovs_release_op(ovstage_context_t *ctx, ovstage_op_id_t op_id);
ovx_string_t ovs_get_last_op_error(ovstage_context_t *ctx, ovstage_op_id_t op_id);

/* Completion state kept by objects that outlive their op id (reads, ordinal queries): the body
 * (or its cleanup, which runs exactly once) finishes it; fetches wait on it even after the caller
 * released the op id. */
typedef struct ovs_opstate {
	_Atomic uint32_t done; /* 1 once the op finished (or was cancelled) */
	_Atomic int status;    /* its ovstage status, valid once done */
} ovs_opstate;
void ovs_opstate_init(ovs_opstate *o);
void ovs_opstate_finish(ovs_opstate *o, ovstage_api_status_t status);
/* OK/failure status once done; TIMEOUT if not done within timeout. */
ovstage_api_status_t ovs_opstate_wait(ovs_stage *st, ovs_opstate *o, jobs_id op, ovstage_timeout_ns_t timeout);

/* Waits for an op (used by fetch_*): OK done, TIMEOUT, or the op's failure status. */
ovstage_api_status_t ovs_op_wait_status(ovs_stage *st, jobs_id op, ovstage_timeout_ns_t timeout);

#endif /* OVSTAGE_ENGINE_OPS_H */
