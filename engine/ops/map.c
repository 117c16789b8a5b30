/*
 * map.c — map/unmap write sessions: the producer fills stage-owned storage in place.
 *
 *   map_attribute  -> op M: creates the column if needed (desc.dtype required then), maps the query's
 *                     prims to rows (UPSERT creates them), allocates the session buffer and one group.
 *                     It also submits the commit op C, fenced until unmap_attribute; C is registered
 *                     with the sequencer at the session ordinal, so a floor advance through that
 *                     ordinal waits for the commit.
 *   fetch_map_next -> the group (lane-canonical 1-D tensor over the buffer); END_OF_ITERATION after.
 *   unmap_group    -> marks the group filled (the commit happens with unmap_attribute).
 *   unmap_attribute-> resolves C's fence: C hands the column a delta and the handle is retired. The
 *                     delta is ordered among same-ordinal writes by unmap_attribute's op id (the
 *                     unmap's submission), not by C's (the map's).
 *
 * Zero copy: when the query's prims are exactly the column's rows in order (a new column, or a
 * producer that maps the whole column each step), the session buffer IS the buffer of the version
 * being written: the FULL delta adopts it and the seal publishes it without a copy. Otherwise the
 * buffer is a staging area of the query's rows and becomes the values of a SPARSE delta (no copy
 * either: the seal applies them).
 * Buffers are not pre-filled with the current values (as in ovstage 0.2.1), unless the session is
 * read-modify-write (ovstage_ext_map_attribute with OVSTAGE_EXT_MAP_READ_CURRENT): then the call pins
 * the column's sealed state as of its write floor, in one step with C's admission (map_rmw_admit) —
 * refused with WRITE_FLOOR_VIOLATION while the column has writes admitted above the floor, as a
 * latest read above the floor is, so racing read-current sessions lose no update — and M copies
 * the mapped rows' values out of it into the session buffer (zero for rows without a value) before
 * the group is handed out. A copy, not a view: the pinned version is readable (and the chunk of its
 * latest version is exactly what a latest read returns), so writing into it would change sealed
 * history under readers; docs/api.md, *Read-modify-write maps*. Array columns are not supported
 * yet (NOT_SUPPORTED).
 *
 * Devices: the session buffer lives on the column's device — a column that exists keeps its
 * device; a map that creates one creates it on the instance's CUDA device (the active-GPU list),
 * else on the CPU. A device buffer is allocated in stream order on the stage's engine stream, so the
 * group carries data.cuda_sync.wait_event (an event after the allocation — and after the fill of a
 * read-modify-write session, a gather kernel on the same stream: a producer on another stream waits
 * on it; the legacy default stream is ordered after it already). write_done_sync of
 * unmap_group and unmap_attribute is captured at the call (gpu.h fences); the commit makes the
 * engine stream wait on it (a CPU column's commit waits on its worker), and its receipt completes
 * when that work has finished (deferred completion), so nothing reads the buffer early.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "device.h"
#include "errors.h"
#include "gather.h"
#include "gpu.h"
#include "grace.h"
#include "layout.h"
#include "ops.h"
#include "query.h"
#include "sequencer.h"

typedef struct ovs_map {
	ovs_hobj h;                    /* kind OVS_H_MAP */
	ovs_stage *st;                 /* stage */
	ovs_query *q;                  /* prims (reference held) */
	ovs_column *col;               /* target column */
	ovstage_ordinal_t ordinal;     /* session ordinal */
	ovstage_prim_mode_t mode;      /* UPSERT / INSERT */
	DLDataType dtype;              /* column dtype (lanes = tuple width) */
	ovstage_attribute_semantic_t semantic; /* role */
	bool rmw;                      /* OVSTAGE_EXT_MAP_READ_CURRENT: the buffer starts as the sealed values */
	ovs_version *src;              /* rmw: the version pinned at the call (NULL: none, zero-filled); M
	                                * unpins it once the fill is issued, else the destroy does */
	jobs_id map_op;                /* M (fenced until C is admitted or refused) */
	_Atomic bool refused;          /* map_attribute refused the session after submitting M: M must
	                                * leave no trace (no prims, no schema) */
	jobs_id commit_op;             /* C (internal; fenced until unmap_attribute, or until M fails) */
	_Atomic bool commit_unfenced;  /* C's fence was resolved (unfence_commit: exactly once) */
	ovs_opstate state;             /* M's outcome */
	ovs_inflight *inflight;        /* C's sequencer record */
	uint64_t commit_seq;           /* C's place among same-ordinal writes: the id of unmap_attribute's
	                                * op (set before C's fence is resolved, which orders it for C) */
	/* set by C when its commit fails (C itself completes without failing, so that wait_op's root
	 * cause is the caller's unmap op, which reports this: C's own id is internal and released);
	 * plain fields, written before C completes and read by the unmap's op, which runs after C
	 * (the scheduler's dependency edge orders them) */
	ovstage_api_status_t commit_status;
	char commit_err[160];
	char map_err[200];             /* M's failure, for the unmap's op (written by M, read after it) */
	/* set by M: */
	uint32_t n;                    /* prims */
	uint32_t *rows;                /* their rows */
	bool full;                     /* rows are 0..n-1 == every row: zero-copy FULL commit */
	ovs_buffer *buf;               /* session buffer (n * row_bytes), on `device` */
	DLDevice device;               /* where the column lives (set by M: its schema, or the instance's) */
	void *ready_ev;                /* device buffer: an event after its allocation (the group's
	                                * cuda_sync.wait_event), released with the session; else NULL */
	void *_Atomic group_fence;     /* unmap_group's write_done_sync (gpu.h fence), or NULL; taken by C */
	void *unmap_fence;             /* unmap_attribute's, or NULL: written before C's fence is resolved
	                                * (which orders it for C), taken by C */
	_Atomic uint32_t fetched;      /* groups handed out (0 or 1) */
	_Atomic bool unmapped;         /* unmap_attribute accepted */
	ovstage_map_group_t group;     /* the one group */
	DLTensor tensor;               /* its tensor */
	int64_t shape;                 /* tensor.shape[0] */
	int64_t stride;                /* tensor.strides[0] */
} ovs_map;

static void map_destroy(ovs_hobj *h)
{
	ovs_map *m = (ovs_map *)h;
	ovs_column_discard(&m->st->store, m->col); /* a refused session's new column */
	/* relaxed: the last reference is dropped after every job of the session finished */
	ovs_gpu_fence_release(atomic_load_explicit(&m->group_fence, memory_order_relaxed));
	ovs_gpu_fence_release(m->unmap_fence);
	ovs_gpu_event_release(m->ready_ev);
	ovs_unpin(m->src); /* a session whose M did not fill (refused, failed before the fill) */
	free(m->rows);
	ovs_buffer_unref(m->buf);
	ovs_query_put(m->q);
	free(m);
}


/* The session's dtype and role checked against the column's schema, if it has one (a new column
 * needs desc.dtype). Nothing is installed: a refused map leaves no trace. */
static ovstage_api_status_t map_check_schema(ovs_map *m, char *err, size_t errlen)
{
	ovs_column *c = m->col;
	/* acquire: pairs with the release that published the schema; its fields are then stable. */
	if (!atomic_load_explicit(&c->has_schema, memory_order_acquire)) {
		/* a new column: on the instance's CUDA device when it has one */
		m->device = m->st->cuda_device >= 0 ? (DLDevice){ kDLCUDA, m->st->cuda_device } : (DLDevice){ kDLCPU, 0 };
		if (m->dtype.bits)
			return OVSTAGE_OK;
		ovs_err_format(err, errlen, "\"%s\" does not exist yet: desc.dtype is required to create it",
			       ovs_attr_name(m->st, c->name));
		return OVSTAGE_ERROR_INVALID_ARGUMENT;
	}
	m->device = c->schema.device;
	if (m->dtype.bits == 0) {
		m->dtype = c->schema.dtype;
		m->semantic = c->schema.semantic;
	}
	return ovs_layout_check_schema_of(false, m->dtype, m->semantic, c->schema.is_array, c->schema.dtype,
					  c->schema.semantic, ovs_attr_name(m->st, c->name), err, errlen);
}

/* Installs the column's schema from the session on first use (a concurrent first write may have
 * installed another: then it is checked against that). */
static ovstage_api_status_t map_settle_schema(ovs_map *m, char *err, size_t errlen)
{
	DLDevice bufdev = m->device;
	if (ovs_column_install_schema(m->col, false, m->dtype, m->semantic, ovs_dtype_bytes(m->dtype), bufdev)) {
		ovs_store_count_device_column(&m->st->store, bufdev);
		return OVSTAGE_OK;
	}
	ovstage_api_status_t s = map_check_schema(m, err, errlen);
	if (s == OVSTAGE_OK && (m->device.device_type != bufdev.device_type || m->device.device_id != bufdev.device_id)) {
		ovs_err_format(err, errlen, "\"%s\" was created on another device (%s %d) by a concurrent write while the "
			       "session buffer was made (map it again)", ovs_attr_name(m->st, m->col->name),
			       m->device.device_type == kDLCUDA ? "CUDA device" : "CPU", (int)m->device.device_id);
		return OVSTAGE_ERROR_OP_FAILED;
	}
	return s;
}

/* A read-modify-write session's fill, issued on x: the mapped rows' values as of the version pinned
 * at the call (zero where it has none). The pin goes once the copy is issued (on a device, stream
 * order keeps the version's buffers until the copy ran: gather.h). */
static ovstage_api_status_t map_fill(ovs_exec *x, ovs_map *m, uint32_t n, size_t rb, char *err, size_t errlen)
{
	bool ok = ovs_version_gather(x, m->buf->ops, m->src, rb, m->rows, n, m->buf->data, err, errlen);
	ovs_unpin(m->src);
	m->src = NULL;
	if (!ok)
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	if (x->err) {
		ovs_err_format(err, errlen, "filling the session buffer with the sealed values on CUDA device %d failed (%s)",
			       (int)m->device.device_id, ovs_gpu_error_name(x->err));
		return OVSTAGE_ERROR_OP_FAILED;
	}
	return OVSTAGE_OK;
}

/* The session buffer of n rows of rb bytes on m->device (filled from the pinned state for a
 * read-modify-write session); on a device, also the event the group hands out (the allocation and
 * the fill are stream-ordered). The calling thread's CUDA device is put back. */
static ovstage_api_status_t map_alloc(jobs_worker *w, ovs_map *m, uint32_t n, size_t rb, char *err, size_t errlen)
{
	bool dev = m->device.device_type == kDLCUDA;
	int tdev = dev ? ovs_gpu_thread_device() : -1;
	ovs_exec x;
	ovstage_api_status_t s = OVSTAGE_OK;
	if (!ovs_store_exec(&m->st->store, m->device, w, &x, err, errlen)) {
		s = OVSTAGE_ERROR_INVALID_ARGUMENT;
	} else if (!(m->buf = ovs_buffer_new_in(&m->st->store, &x, (size_t)n * rb))) {
		s = OVSTAGE_ERROR_OUT_OF_MEMORY;
		ovs_err_format(err, errlen, "out of %smemory allocating %zu bytes", dev ? "device " : "", (size_t)n * rb);
	} else if (m->rmw && (s = map_fill(&x, m, n, rb, err, errlen)) != OVSTAGE_OK) {
		/* the message is map_fill's */
	} else if (dev && !(m->ready_ev = ovs_gpu_record(&x))) {
		s = OVSTAGE_ERROR_OP_FAILED;
		ovs_err_format(err, errlen, "recording the session buffer's allocation on CUDA device %d failed",
			       (int)m->device.device_id);
	}
	ovs_gpu_thread_restore(tdev);
	return s;
}

/* Resolves C's fence, once: by unmap_attribute, or by M when the map failed. */
static void unfence_commit(ovs_map *m)
{
	/* acq_rel: exactly one of M and unmap_attribute sees false and resolves the fence; both have
	 * read commit_op, which was stored before M's fence was resolved (so before either runs). */
	if (!atomic_exchange_explicit(&m->commit_unfenced, true, memory_order_acq_rel))
		jobs_fence_resolve(m->st->sched, m->commit_op);
}

/* M failed: the session will commit nothing (fetch_map_next gives OP_FAILED; its commit can only
 * fail after M). As in 0.2.1, where a floor advance never waits for a session, a failed session
 * does not hold the floor: its in-flight record is done now, before M completes (a caller that
 * waited for M then finds the column's written-through ordinal and the advances free of it), and C
 * runs (failing after M) without waiting for unmap_attribute. The handle stays the caller's until
 * unmap_attribute, whose op reports the failure (root cause: M). */
static void session_failed(ovs_map *m)
{
	ovs_inflight *f = m->inflight;
	/* plain: C's cleanup, the only other reader, runs after C, which runs after M completes */
	m->inflight = NULL;
	if (f)
		ovs_inflight_done(m->st, f);
	unfence_commit(m);
}

static void map_put(void *arg, bool ran)
{
	ovs_map *m = arg;
	if (!ran) {
		ovs_opstate_finish(&m->state, OVSTAGE_ERROR_OP_FAILED);
		/* M did not run (the op of the query it waited for failed): a failed session too. Not
		 * when its own submission failed (no C then: commit_op is 0). */
		if (m->commit_op)
			session_failed(m);
	}
	ovs_hobj_unref(&m->h);
}

/* M: checks, rows, buffer, then what the map makes visible (schema, prims), then the group. */
static void map_job(jobs_worker *w, void *arg, jobs_run *run)
{
	ovs_map *m = arg;
	ovs_stage *st = m->st;
	ovs_column *c = m->col;
	char err[512] = "";
	/* relaxed: stored before M's fence was resolved; the resolve (release) and this job's start
	 * (acquire, through its pending count) order it before this load. */
	if (atomic_load_explicit(&m->refused, memory_order_relaxed)) {
		ovs_op_fail(run, OVSTAGE_ERROR_OP_FAILED, "map_attribute: the session was refused at the call");
		ovs_opstate_finish(&m->state, OVSTAGE_ERROR_OP_FAILED);
		return;
	}
	ovstage_api_status_t s = map_check_schema(m, err, sizeof err);
	if (s == OVSTAGE_OK && m->mode == OVSTAGE_PRIM_MODE_INSERT)
		for (uint32_t i = 0; i < m->q->count; i++)
			if (ovs_prim_exists(&st->store, m->q->paths[i])) {
				s = OVSTAGE_ERROR_PRIM_NOT_FOUND;
				ovs_err_format(err, sizeof err, "INSERT: prim %s (query element %u) already exists",
					       ovs_pd_path_string(st->pd, m->q->paths[i]).ptr, i);
				break;
			}
	uint32_t n = (uint32_t)m->q->count;
	if (s == OVSTAGE_OK) {
		m->rows = malloc((n ? n : 1) * sizeof *m->rows);
		if (!m->rows) {
			s = OVSTAGE_ERROR_OUT_OF_MEMORY;
			ovs_err_format(err, sizeof err, "out of memory mapping %u prims", n);
		}
	}
	bool identity = true, created_rows = false;
	if (s == OVSTAGE_OK && !ovs_column_rows_create(c, m->q->paths, n, m->rows, &created_rows)) {
		s = OVSTAGE_ERROR_OUT_OF_MEMORY;
		ovs_err_format(err, sizeof err, "out of memory giving %u prims rows", n);
	}
	for (uint32_t i = 0; s == OVSTAGE_OK && i < n && identity; i++)
		identity = m->rows[i] == i;
	if (s == OVSTAGE_OK) /* the column's row bytes once settled */
		s = map_alloc(w, m, n, ovs_dtype_bytes(m->dtype), err, sizeof err);
	if (s == OVSTAGE_OK)
		s = map_settle_schema(m, err, sizeof err);
	if (s == OVSTAGE_OK) {
		for (uint32_t i = 0; i < n; i++)
			ovs_prim_set(&st->store, m->q->paths[i], 1);
		m->n = n;
		m->full = identity && n > 0 && n == atomic_load_explicit(&c->nrows, memory_order_acquire);
		m->shape = n;
		m->stride = 1;
		/* on the storage's device, as recorded */
		ovs_tensor_1d(&m->tensor, m->buf->data, m->device, m->dtype, &m->shape, &m->stride);
		m->group.prims.list = m->q->list;
		m->group.prims.offset = 0;
		m->group.prims.count = n;
		m->group.prims.index_map = NULL;
		m->group.data.tensors = &m->tensor;
		m->group.data.tensor_count = 1;
		m->group.data.count = 0;
		m->group.data.index_map = NULL;
		m->group.data.mask = NULL;
		m->group.data.cuda_sync.stream = 0;
		m->group.data.cuda_sync.wait_event = ovs_gpu_event_handle(m->ready_ev);
		m->group.meta.attribute_write_floor_ordinal = atomic_load_explicit(&c->floor, memory_order_acquire);
		m->group.meta.layout_generation = atomic_load_explicit(&c->generation, memory_order_relaxed);
	}
	if (s != OVSTAGE_OK) {
		if (created_rows)
			ovs_prims_need_reassert(&st->store); /* its rows stay, as holes (never present) */
		ovs_op_fail(run, s, "map_attribute: %s", err);
		snprintf(m->map_err, sizeof m->map_err, "%s", err);
		session_failed(m);
	}
	ovs_opstate_finish(&m->state, s); /* release: the group is visible to fetch_map_next */
}

/* C's failure, for the unmap's op to report (see commit_status). */
static void commit_failed(ovs_map *m, ovstage_api_status_t s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m->commit_err, sizeof m->commit_err, fmt, ap);
	va_end(ap);
	m->commit_status = s;
}

/* The producer's work named by write_done_sync (unmap_group's and unmap_attribute's fences): a
 * device column's engine stream waits on it (*x is then that context), a CPU column's commit waits
 * for it here. False with a message on a CUDA error. */
static bool commit_wait_producer(jobs_worker *w, ovs_map *m, ovs_exec *x, char *err, size_t errlen)
{
	/* acquire: pairs with unmap_group's release, for the fence's contents */
	void *fences[2] = { atomic_exchange_explicit(&m->group_fence, NULL, memory_order_acquire), m->unmap_fence };
	m->unmap_fence = NULL;
	bool ok = true;
	*x = ovs_exec_cpu(w);
	if (m->device.device_type == kDLCUDA)
		ok = ovs_store_exec(&m->st->store, m->device, w, x, err, errlen);
	for (int i = 0; i < 2; i++) {
		if (ok && fences[i])
			ok = x->gpu ? ovs_gpu_fence_wait(x, fences[i], err, errlen) : ovs_gpu_fence_sync(fences[i], err, errlen);
		ovs_gpu_fence_release(fences[i]); /* safe while a wait on it is pending */
	}
	return ok;
}

/* C's delta: the session buffer itself — the version's buffer when the rows are the column's
 * (FULL), else the values of the query's rows (SPARSE). No copy either way. */
static ovs_delta *commit_delta(ovs_map *m)
{
	ovs_delta *d = calloc(1, sizeof *d);
	if (!d)
		return NULL;
	d->ordinal = m->ordinal;
	d->seq = m->commit_seq; /* the unmap's submission, not the map's (docs/api.md) */
	d->nrows = m->n;
	if (m->full) {
		d->kind = OVS_DELTA_FULL;
		d->full = m->buf;
	} else {
		d->kind = OVS_DELTA_SPARSE;
		d->rows = m->rows;
		m->rows = NULL;
		d->values = m->buf->data;
		d->values_buf = m->buf;
	}
	m->buf = NULL;
	return d;
}

/* C: the commit, after unmap_attribute resolved its fence. */
static void commit_job(jobs_worker *w, void *arg, jobs_run *run)
{
	ovs_map *m = arg;
	ovs_column *c = m->col;
	char err[200];
	int tdev = m->device.device_type == kDLCUDA ? ovs_gpu_thread_device() : -1;
	ovs_exec x;
	if (!commit_wait_producer(w, m, &x, err, sizeof err)) {
		commit_failed(m, OVSTAGE_ERROR_OP_FAILED, "waiting for write_done_sync failed: %s", err);
	} else if (!m->n) {
		ovs_sequencer_applied(c, m->ordinal); /* an empty session: committed, nothing to write */
	} else {
		/* failures are reported by the unmap's op (commit_status) */
		ovs_delta *d = commit_delta(m);
		if (!d) {
			commit_failed(m, OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory committing the session");
		} else {
			ovs_sequencer_applied(c, m->ordinal);
			ovs_column_push_delta(&m->st->store, c, d);
		}
	}
	/* On a device C completes when the producer's work has (the seal that covers it is ordered on the
	 * same stream; the unmap's receipt then means the caller's work is done). */
	if (x.gpu && !ovs_gpu_complete_after(x.gpu, &x, m->st->sched, run, err, sizeof err)) {
		ovs_gpu_sync(&x);
		if (m->commit_status == OVSTAGE_OK)
			commit_failed(m, OVSTAGE_ERROR_OP_FAILED, "%s", err);
	}
	ovs_gpu_thread_restore(tdev);
}

static void commit_free(void *arg, bool ran)
{
	(void)ran;
	ovs_map *m = arg;
	if (m->inflight)
		ovs_inflight_done(m->st, m->inflight);
	ovs_hobj_unref(&m->h);
}

/* The checks of map_attribute that need no column: the arguments, the attribute's name and
 * desc.dtype. Sets the last error when refusing. */
static ovstage_api_status_t map_check_args(ovs_stage *st, const ovstage_map_desc_t *desc, const size_t *element_sizes,
					   size_t element_count, ovstage_ext_map_flags_t flags, ovx_token_t *t)
{
	if (element_sizes || element_count)
		return ovs_err_set(OVSTAGE_ERROR_NOT_SUPPORTED, "element_sizes given: mapping array columns is not "
				   "supported (write them with write_attribute)");
	if (flags & ~OVSTAGE_EXT_MAP_READ_CURRENT)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "flags = %#x has bits this build does not know "
				   "(OVSTAGE_EXT_MAP_READ_CURRENT = %#x)", (unsigned)flags,
				   (unsigned)OVSTAGE_EXT_MAP_READ_CURRENT);
	if (desc->prim_mode != OVSTAGE_PRIM_MODE_UPSERT && desc->prim_mode != OVSTAGE_PRIM_MODE_INSERT)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "desc.prim_mode = %d is not UPSERT or INSERT",
				   (int)desc->prim_mode);
	ovstage_api_status_t s = ovs_resolve_attr(st, desc->attribute, false, t, "desc.attribute");
	if (s != OVSTAGE_OK)
		return s;
	if (ovs_attr_is_derived(st, *t))
		return ovs_err_set(OVSTAGE_ERROR_NOT_SUPPORTED, "\"%s\" is derived and cannot be mapped",
				   ovs_attr_name(st, *t));
	char err[512];
	if (desc->dtype.bits || desc->dtype.lanes || desc->dtype.code) {
		if (!ovs_dtype_supported(desc->dtype) || desc->dtype.lanes == 0 || desc->dtype.lanes > 255)
			return ovs_err_set(OVSTAGE_ERROR_NOT_SUPPORTED, "desc.dtype %s cannot be stored",
					   ovs_dtype_format(desc->dtype, err, sizeof err));
		s = ovs_layout_check_reserved(false, desc->dtype, desc->semantic, ovs_attr_name(st, *t), err, sizeof err);
		if (s != OVSTAGE_OK)
			return ovs_err_set(s, "%s", err);
	}
	return OVSTAGE_OK;
}

/* OVSTAGE_EXT_MAP_READ_CURRENT, at the call: what the column's schema decides. Refused, with the
 * last error set, when the column has no schema and desc gives no dtype (INVALID_ARGUMENT: the
 * session would fail in M), or is an array column (NOT_SUPPORTED). */
static ovstage_api_status_t map_rmw_check(ovs_stage *st, ovs_column *c, DLDataType dtype)
{
	const char *name = ovs_attr_name(st, c->name);
	/* acquire: pairs with the release that published the schema; its fields are then stable. */
	bool schema = atomic_load_explicit(&c->has_schema, memory_order_acquire);
	if (!schema && !dtype.bits)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "\"%s\" does not exist yet: desc.dtype is required to "
				   "create it (a read-current map of a new column starts zero-filled)", name);
	if (schema && c->schema.is_array)
		return ovs_err_set(OVSTAGE_ERROR_NOT_SUPPORTED, "\"%s\" is an array column: mapping array columns is not "
				   "supported", name);
	return OVSTAGE_OK;
}

/* OVSTAGE_EXT_MAP_READ_CURRENT, under the admission lock (ovs_admit_fn, arg: the session): pins the
 * sealed state the session buffer will hold — the column's version as of its write floor (m->src;
 * NULL when it has no value as of the floor: the buffer is then zero-filled). Refused with
 * WRITE_FLOOR_VIOLATION while the column has writes (or map sessions) admitted above its floor that
 * did not fail: their values are not sealed, so the buffer could not hold them, and the commit
 * would silently overwrite them (the rule of a latest read above the floor, read.c). Under the lock
 * the check and the admission are one step: of two read-current maps of one column racing, one is
 * admitted and the other refused, so no update is lost. */
static ovstage_api_status_t map_rmw_admit(void *arg)
{
	ovs_map *m = arg;
	ovs_stage *st = m->st;
	/* the published column of that name: a concurrent first write may have published one since our
	 * ovs_column_prepare (the sequencer then hands us that one after submission) */
	ovs_column *c = ovs_column_find(&st->store, m->col->name);
	if (!c)
		return OVSTAGE_OK; /* no column yet: no writes, nothing sealed, zeros */
	const char *name = ovs_attr_name(st, c->name);
	for (unsigned tries = 0;; tries++) {
		/* acquire: pairs with the sealer's release of the floor, which follows the publication of
		 * the snapshot holding it (store.md, *A seal*): the pin below finds the state as of it. */
		uint64_t floor = atomic_load_explicit(&c->floor, memory_order_acquire);
		/* relaxed: max_written is stored under seq_lock only, which we hold: exact here */
		uint64_t mw = atomic_load_explicit(&c->max_written, memory_order_relaxed);
		if (mw > floor)
			return ovs_err_set(OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION, "\"%s\" has unsealed writes (admitted "
					   "through ordinal %llu, write floor %llu): a read-current map fills its buffer "
					   "from sealed values only; advance the floor first", name,
					   (unsigned long long)mw, (unsigned long long)floor);
		bool had_any = false;
		if (ovs_pin_history(&st->store.grace, c, floor, false, 0, &m->src, 1, &had_any) || !had_any)
			return OVSTAGE_OK; /* the state as of the floor, or never sealed: zeros */
		/* acquire: pairs with the sealer's release when a version leaves retention */
		if (!atomic_load_explicit(&c->dropped_through, memory_order_acquire))
			return OVSTAGE_OK; /* nothing reclaimed: no value as of the floor, zeros */
		/* The state as of `floor` left retention, so newer versions were sealed since our loads: not
		 * while nothing is admitted above the floor (then no seal makes a version of the column),
		 * kept as a guard. Take the newer floor. */
		if (tries == 8)
			return ovs_err_set(OVSTAGE_ERROR_OUT_OF_RANGE, "\"%s\": the sealed state kept moving past the "
					   "retention depth while the map pinned it (retry)", name);
	}
}

/* Submits a checked session: M, held by a fence until C's admission is decided, then C through the
 * sequencer; the handle when both are in. Takes over m (one reference), cols and hprep. */
static ovstage_enqueue_result_t map_submit(ovstage_context_t *ctx, ovs_map *m, ovx_token_t *cols, void *hprep,
					   ovstage_map_handle_t *out_map_handle)
{
	ovs_stage *st = m->st;
	ovs_query *q = m->q;
	/* M first (so that C can depend on it), then C through the sequencer (admission + in-flight).
	 * M is held by a fence until C's admission is decided: a session refused at the call (write
	 * floor, out of memory) must not create prims or a schema through M (fuzz_api finding). */
	ovs_hobj_ref(&m->h); /* M's reference */
	/* A query still resolving: map after its op (the job reads its prims). */
	bool pending = !ovs_query_ready(q);
	ovs_op_desc md = { .fn = map_job, .arg = m, .cleanup = map_put, .after = pending ? &q->op : NULL,
			   .after_count = pending ? 1 : 0, .fences = 1 };
	ovstage_enqueue_result_t r = ovs_op_submit(st, &md);
	if (r.status != OVSTAGE_OK) {
		ovs_handle_unprepare(hprep);
		free(cols);
		ovs_hobj_unref(&m->h);
		return r;
	}
	m->map_op = r.op_index;
	cols[0] = m->col->name;
	ovs_hobj_ref(&m->h); /* C's reference */
	ovs_op_desc cd = { .fn = commit_job, .arg = m, .cleanup = commit_free, .after = &m->map_op, .after_count = 1,
			   .fences = 1 };
	ovs_column **slot = &m->col; /* M reads it after its fence, resolved below */
	/* a read-current session pins its state in the same step as its admission (map_rmw_admit) */
	ovstage_enqueue_result_t rc = ovs_sequencer_submit_mutation_if(st, m->ordinal, cols, 1, &slot, &cd, &m->inflight,
								       m->rmw ? map_rmw_admit : NULL, m);
	if (rc.status != OVSTAGE_OK) {
		/* C's cleanup dropped its reference. M runs regardless; its outcome is unobservable. */
		char keep[OVS_ERR_MAX];
		ovx_string_t le = ovstage_get_last_error();
		snprintf(keep, sizeof keep, "%.*s", (int)le.length, le.ptr ? le.ptr : "");
		/* relaxed: the fence resolve below orders it for M (see map_job). */
		atomic_store_explicit(&m->refused, true, memory_order_relaxed);
		jobs_fence_resolve(st->sched, m->map_op);
		/* M is done (and has dropped what it holds) before the refusal returns; the wait also runs
		 * it where nothing else would (OVSTAGE_WORKERS=0: waiters run jobs) */
		(void)jobs_wait(st->sched, m->map_op, OVSTAGE_TIMEOUT_INFINITE);
		ovs_handle_unprepare(hprep);
		ovs_release_op(ctx, r.op_index);
		ovs_hobj_unref(&m->h);
		return ovs_rejected(ovs_err_set(rc.status, "%s", keep));
	}
	m->commit_op = rc.op_index;
	/* C's id is internal: its outcome reaches the caller through unmap_attribute's op. */
	atomic_fetch_sub_explicit(&st->live_ops, 1, memory_order_relaxed);
	uint64_t id = ovs_handle_insert_prepared(&st->handles, hprep, &m->h); /* cannot fail */
	ovs_hobj_unref(&m->h);
	jobs_fence_resolve(st->sched, m->map_op); /* admitted: M may run */
	*out_map_handle = id;
	return r;
}

/* map_attribute and ovstage_ext_map_attribute: checks, then M and C (see the top of the file). */
static ovstage_enqueue_result_t map_start(ovstage_context_t *ctx, ovstage_query_handle_t handle,
					  const ovstage_map_desc_t *desc, ovstage_ordinal_t ordinal,
					  const size_t *element_sizes, size_t element_count,
					  ovstage_ext_map_flags_t flags, ovstage_map_handle_t *out_map_handle)
{
	ovs_err_clear();
	ovs_stage *st = ovs_stage_of(ctx);
	if (out_map_handle)
		*out_map_handle = OVSTAGE_INVALID_MAP_HANDLE;
	if (!st || !desc || !out_map_handle)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s is NULL",
						!st ? "instance" : !desc ? "desc" : "out_map_handle"));
	ovx_token_t t;
	ovstage_api_status_t s = map_check_args(st, desc, element_sizes, element_count, flags, &t);
	if (s == OVSTAGE_OK)
		s = ovs_check_unsealed(&st->store, ordinal, &t, 1);
	if (s != OVSTAGE_OK)
		return ovs_rejected(s);
	ovs_query *q = ovs_query_get(st, handle);
	if (!q)
		return ovs_rejected(OVSTAGE_ERROR_INVALID_HANDLE);
	ovs_map *m = calloc(1, sizeof *m);
	ovx_token_t *cols = malloc(sizeof *cols);
	/* a new column is prepared only: the sequencer publishes it when C is admitted */
	ovs_column *c = ovs_column_prepare(&st->store, t);
	/* the handle too: once C is admitted nothing may fail (the session is then committed to) */
	void *hprep = ovs_handle_prepare(&st->handles);
	if (!m || !cols || !c || !hprep) {
		s = ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory starting a map session");
	} else if (atomic_load_explicit(&c->has_schema, memory_order_acquire) && desc->dtype.bits) {
		/* A column that already has a schema: check dtype and role now (provable at the call). */
		char err[512];
		s = ovs_layout_check_schema_of(false, desc->dtype, desc->semantic, c->schema.is_array, c->schema.dtype,
					       c->schema.semantic, ovs_attr_name(st, t), err, sizeof err);
		if (s != OVSTAGE_OK)
			s = ovs_err_set(s, "%s", err);
	}
	if (s == OVSTAGE_OK && (flags & OVSTAGE_EXT_MAP_READ_CURRENT))
		s = map_rmw_check(st, c, desc->dtype);
	if (s != OVSTAGE_OK) { /* refused: no trace (a prepared column is dropped, a published one kept) */
		ovs_column_discard(&st->store, c);
		ovs_handle_unprepare(hprep);
		free(m);
		free(cols);
		ovs_query_put(q);
		return ovs_rejected(s);
	}
	ovs_hobj_init(&m->h, OVS_H_MAP, map_destroy);
	m->st = st;
	m->q = q;
	m->col = c;
	m->ordinal = ordinal;
	m->mode = desc->prim_mode;
	m->dtype = desc->dtype;
	m->semantic = desc->semantic;
	m->rmw = (flags & OVSTAGE_EXT_MAP_READ_CURRENT) != 0;
	ovs_opstate_init(&m->state);
	atomic_init(&m->fetched, 0);
	atomic_init(&m->unmapped, false);
	atomic_init(&m->refused, false);
	atomic_init(&m->commit_unfenced, false);
	atomic_init(&m->group_fence, NULL);
	return map_submit(ctx, m, cols, hprep, out_map_handle);
}

ovstage_enqueue_result_t ovs_map_attribute(ovstage_context_t *ctx, ovstage_query_handle_t handle,
					   const ovstage_map_desc_t *desc, ovstage_ordinal_t ordinal,
					   const size_t *element_sizes, size_t element_count,
					   ovstage_map_handle_t *out_map_handle)
{
	return map_start(ctx, handle, desc, ordinal, element_sizes, element_count, 0, out_map_handle);
}

ovstage_enqueue_result_t ovs_map_attribute_ext(ovstage_context_t *ctx, ovstage_query_handle_t handle,
					       const ovstage_map_desc_t *desc, ovstage_ordinal_t ordinal,
					       const size_t *element_sizes, size_t element_count,
					       ovstage_ext_map_flags_t flags, ovstage_map_handle_t *out_map_handle)
{
	return map_start(ctx, handle, desc, ordinal, element_sizes, element_count, flags, out_map_handle);
}

ovstage_api_status_t ovs_fetch_map_next(ovstage_context_t *ctx, ovstage_map_handle_t map_handle,
					ovstage_timeout_ns_t timeout, ovstage_map_group_t *out_group)
{
	ovs_err_clear();
	ovs_stage *st = ovs_stage_of(ctx);
	if (!st || !out_group)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s is NULL", !st ? "instance" : "out_group");
	memset(out_group, 0, sizeof *out_group);
	ovs_hobj *h = ovs_handle_get(&st->handles, map_handle, OVS_H_MAP);
	if (!h)
		return ovs_handle_invalid(&st->handles, map_handle, "map handle");
	ovs_map *m = (ovs_map *)h;
	ovstage_api_status_t s = ovs_opstate_wait(st, &m->state, m->map_op, timeout);
	if (s == OVSTAGE_OK) {
		if (atomic_fetch_add_explicit(&m->fetched, 1, memory_order_relaxed) == 0 && m->n)
			*out_group = m->group;
		else
			s = OVSTAGE_ERROR_END_OF_ITERATION;
	} else if (s != OVSTAGE_ERROR_TIMEOUT) {
		s = ovs_err_set(s, "the map failed (%s); see wait_op / get_last_op_error", ovs_status_name(s));
	}
	ovs_hobj_unref(h);
	return s;
}

/* The caller's op of unmap_attribute: runs after M and C (a failed M fails it as a dependency,
 * naming M); reports a failed commit with C's message. */
static void unmap_job(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	ovs_map *m = arg;
	/* plain reads: M and C wrote them before they completed, and this job runs after both */
	/* relaxed: M finished it before it completed; the dependency edge orders that before us */
	ovstage_api_status_t ms = (ovstage_api_status_t)atomic_load_explicit(&m->state.status, memory_order_relaxed);
	if (jobs_run_failed_dependency(run) && ms == OVSTAGE_OK) {
		/* C's receipt failed: the GPU work it waited for (write_done_sync) or issued failed */
		ovs_op_fail(run, OVSTAGE_ERROR_OP_FAILED, "unmap_attribute: the session's GPU work failed");
	} else if (jobs_run_failed_dependency(run)) {
		/* the map failed (C then failed after it): said here too, for a caller that released the
		 * map op (wait_op then lists this op alone); otherwise the map op is listed first */
		ovs_op_fail(run, ms != OVSTAGE_OK ? ms : OVSTAGE_ERROR_OP_FAILED, "unmap_attribute: the map failed: %s",
			    m->map_err[0] ? m->map_err : "the session was not started");
	} else if (m->commit_status != OVSTAGE_OK) {
		ovs_op_fail(run, m->commit_status, "unmap_attribute: %s", m->commit_err);
	}
}

static void unmap_put(void *arg, bool ran)
{
	(void)ran;
	ovs_map *m = arg;
	ovs_hobj_unref(&m->h);
}

/* write_done_sync, snapshotted at the call (handles 1 and 2 mean the caller's streams): *fence, or
 * NULL for {0, 0}. Refused with the backend's message (CPU-only mode, an invalid stream or event). */
static ovstage_api_status_t capture_sync(ovstage_cuda_sync_t sync, void **fence)
{
	char err[300];
	*fence = NULL;
	ovstage_api_status_t s = ovs_gpu_fence_capture(sync, fence, err, sizeof err);
	if (s != OVSTAGE_OK)
		return ovs_err_set(s, "write_done_sync: %s", err);
	return OVSTAGE_OK;
}

ovstage_enqueue_result_t ovs_unmap_group(ovstage_context_t *ctx, ovstage_map_handle_t map_handle,
					 const ovstage_map_group_t *group, ovstage_cuda_sync_t write_done_sync)
{
	ovs_err_clear();
	ovs_stage *st = ovs_stage_of(ctx);
	if (!st || !group)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s is NULL", !st ? "instance" : "group"));
	void *fence;
	ovstage_api_status_t s = capture_sync(write_done_sync, &fence);
	if (s != OVSTAGE_OK)
		return ovs_rejected(s);
	ovs_hobj *h = ovs_handle_get(&st->handles, map_handle, OVS_H_MAP);
	if (!h) {
		ovs_gpu_fence_release(fence);
		return ovs_rejected(ovs_handle_invalid(&st->handles, map_handle, "map handle"));
	}
	ovs_map *m = (ovs_map *)h;
	if (group->data.tensors != &m->tensor)
		s = ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "group was not fetched from map handle %llu",
				(unsigned long long)map_handle);
	void *none = NULL;
	/* release: C's acquire exchange then sees the fence's contents. One fence per group: a second
	 * unmap_group naming CUDA work is refused rather than silently replacing the first. */
	if (s == OVSTAGE_OK && fence &&
	    !atomic_compare_exchange_strong_explicit(&m->group_fence, &none, fence, memory_order_release,
						     memory_order_relaxed))
		s = ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "the group of map handle %llu was already unmapped "
				"with a write_done_sync", (unsigned long long)map_handle);
	ovstage_enqueue_result_t r = ovs_rejected(s);
	if (s == OVSTAGE_OK) {
		/* One group per session: its bytes are committed with the session by unmap_attribute. */
		ovs_op_desc d = { .fn = ovs_op_noop, .run_after_failure = true };
		r = ovs_op_submit(st, &d);
		void *mine = fence;
		/* refused: take the fence back unless C already took it (then C honours it) */
		if (r.status != OVSTAGE_OK && fence &&
		    atomic_compare_exchange_strong_explicit(&m->group_fence, &mine, NULL, memory_order_relaxed,
							    memory_order_relaxed))
			ovs_gpu_fence_release(fence);
	} else {
		ovs_gpu_fence_release(fence);
	}
	ovs_hobj_unref(h);
	return r;
}

ovstage_enqueue_result_t ovs_unmap_attribute(ovstage_context_t *ctx, ovstage_map_handle_t map_handle,
					     ovstage_cuda_sync_t write_done_sync)
{
	ovs_err_clear();
	ovs_stage *st = ovs_stage_of(ctx);
	if (!st)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "instance is NULL"));
	void *fence;
	ovstage_api_status_t s = capture_sync(write_done_sync, &fence);
	if (s != OVSTAGE_OK)
		return ovs_rejected(s);
	/* The caller's op first, the handle after: an unmap refused for want of memory (or a full
	 * queue) commits nothing and leaves the session open and the handle the caller's. */
	ovs_hobj *h = ovs_handle_get(&st->handles, map_handle, OVS_H_MAP);
	if (!h) {
		ovs_gpu_fence_release(fence);
		return ovs_rejected(ovs_handle_invalid(&st->handles, map_handle, "map handle"));
	}
	ovs_map *m = (ovs_map *)h;
	/* The caller's op runs after the commit and reports its failure (commit_status). It names the
	 * map op first: when the map failed, wait_op's root cause is then the map op (whose message the
	 * caller can read) rather than the internal commit op, released below. */
	jobs_id commit = m->commit_op;
	jobs_id after[2] = { m->map_op, commit };
	ovs_hobj_ref(&m->h); /* the unmap op's reference (its cleanup drops it) */
	ovs_op_desc d = { .fn = unmap_job, .arg = m, .cleanup = unmap_put, .after = after, .after_count = 2,
			  .run_after_failure = true };
	ovstage_enqueue_result_t r = ovs_op_submit(st, &d);
	if (r.status != OVSTAGE_OK) {
		ovs_gpu_fence_release(fence);
		ovs_hobj_unref(h);
		return r; /* refused: nothing committed, the session is still open */
	}
	ovs_hobj *hr = ovs_handle_remove(&st->handles, map_handle, OVS_H_MAP);
	if (!hr) {
		/* another thread's unmap_attribute took the session between our lookup and here: this call
		 * commits nothing; its op (not yet runnable: C is fenced until that unmap resolves it) is
		 * released unobserved */
		ovs_release_op(ctx, r.op_index);
		ovs_gpu_fence_release(fence);
		ovs_hobj_unref(h);
		return ovs_rejected(ovs_handle_invalid(&st->handles, map_handle, "map handle"));
	}
	ovs_hobj_unref(hr);
	/* The commit takes its place among same-ordinal writes here, at the unmap's submission (as in
	 * 0.2.1, whose one lane applies a write at once and writes the mapped buffer back at the unmap):
	 * ids are issued in submission order, so a write submitted before this call (between map and
	 * unmap, on any thread) seals before the mapped values and one submitted after seals over them. */
	m->commit_seq = r.op_index;
	m->unmap_fence = fence; /* for C: the fence resolve below orders it */
	/* Commit: unmap always commits (there is no cancel); a failed session's C was let go by M. */
	unfence_commit(m);
	jobs_release(st->sched, commit);
	ovs_hobj_unref(h);
	return r;
}
