/*
 * instance.c — create/destroy a stage, the vtable, and the small synchronous slots (version, error
 * strings, path dictionary, extensions).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ovstage/ovstage_ext.h>

#include "api.h"
#include "errors.h"
#include "floor_wait.h"
#include "gpu.h"
#include "log.h"
#include "hierarchy.h"
#include "ops.h"
#include "path_dict_shared.h"
#include "runtime.h"
#include "teardown.h"
#include "trace.h"
#include "stage.h"

static _Atomic uint64_t g_stage_serial = 1;

static void get_version(ovstage_context_t *ctx, uint32_t *major, uint32_t *minor, uint32_t *patch)
{
	(void)ctx;
	if (major)
		*major = OVSTAGE_VERSION_MAJOR;
	if (minor)
		*minor = OVSTAGE_VERSION_MINOR;
	if (patch)
		*patch = OVSTAGE_VERSION_PATCH;
}

static const char *get_error_string(ovstage_context_t *ctx, ovstage_api_status_t error)
{
	(void)ctx;
	switch (error) {
	case OVSTAGE_OK: return "success";
	case OVSTAGE_ERROR_INVALID_ARGUMENT: return "invalid argument";
	case OVSTAGE_ERROR_INVALID_HANDLE: return "invalid or stale handle";
	case OVSTAGE_ERROR_NOT_FOUND: return "not found";
	case OVSTAGE_ERROR_PRIM_NOT_FOUND: return "prim already exists (INSERT or clone target)";
	case OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION: return "write floor violation";
	case OVSTAGE_ERROR_NOT_SUPPORTED: return "not supported";
	case OVSTAGE_ERROR_QUEUE_FULL: return "submission queue full";
	case OVSTAGE_ERROR_END_OF_ITERATION: return "end of iteration";
	case OVSTAGE_ERROR_OUT_OF_MEMORY: return "out of memory";
	case OVSTAGE_ERROR_LAYOUT_CHANGED: return "layout changed";
	case OVSTAGE_ERROR_TIMEOUT: return "timeout (not ready yet)";
	case OVSTAGE_ERROR_OP_FAILED: return "operation failed";
	case OVSTAGE_ERROR_OUT_OF_RANGE: return "ordinal range outside the retained history";
	case OVSTAGE_ERROR_INTERNAL: return "internal error";
	}
	return "unknown status";
}

static path_dictionary_instance_t *get_path_dictionary(ovstage_context_t *ctx)
{
	ovs_err_clear();
	ovs_stage *st = ovs_stage_of(ctx);
	return st ? ovs_pd_instance(st->pd) : NULL;
}

static ovstage_api_status_t query_extension(ovstage_context_t *ctx, const char *name, const void **out)
{
	ovs_err_clear();
	if (!ctx || !name || !out)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s is NULL",
				   !ctx ? "instance" : !name ? "name" : "out_extension");
	*out = NULL;
	return ovs_err_set(OVSTAGE_ERROR_NOT_FOUND, "no extension named \"%s\"", name);
}

/* Stage ops in the trace (jobs/trace.h): the API call as a span on the caller's thread, whose id is
 * the op's receipt (the job's "run" span of the same id is its body). Off: one relaxed load. */
static ovstage_enqueue_result_t traced_write_attribute(ovstage_context_t *ctx, ovstage_query_handle_t handle,
						       ovx_string_or_token_t attribute, ovstage_ordinal_t ordinal,
						       ovstage_write_data_t data, ovstage_prim_mode_t prim_mode)
{
	if (!jobs_trace_on())
		return ovs_write_attribute(ctx, handle, attribute, ordinal, data, prim_mode);
	uint64_t t0 = jobs_trace_now();
	ovstage_enqueue_result_t r = ovs_write_attribute(ctx, handle, attribute, ordinal, data, prim_mode);
	jobs_trace_span("op", "write", t0, jobs_trace_now(), r.op_index);
	return r;
}

static ovstage_enqueue_result_t traced_write_attributes(ovstage_context_t *ctx, ovstage_query_handle_t handle,
							const ovstage_attribute_write_t *writes, size_t write_count,
							ovstage_ordinal_t ordinal, ovstage_prim_mode_t prim_mode)
{
	if (!jobs_trace_on())
		return ovs_write_attributes(ctx, handle, writes, write_count, ordinal, prim_mode);
	uint64_t t0 = jobs_trace_now();
	ovstage_enqueue_result_t r = ovs_write_attributes(ctx, handle, writes, write_count, ordinal, prim_mode);
	jobs_trace_span("op", "write", t0, jobs_trace_now(), r.op_index);
	return r;
}

static ovstage_enqueue_result_t traced_advance_write_floor(ovstage_context_t *ctx,
							   const ovstage_write_floor_desc_t *desc)
{
	if (!jobs_trace_on())
		return ovs_advance_write_floor(ctx, desc);
	uint64_t t0 = jobs_trace_now();
	ovstage_enqueue_result_t r = ovs_advance_write_floor(ctx, desc);
	jobs_trace_span("op", "seal", t0, jobs_trace_now(), r.op_index);
	return r;
}

static ovstage_enqueue_result_t traced_read_attributes(ovstage_context_t *ctx, ovstage_query_handle_t handle,
						       const ovx_token_t *attrs, size_t attr_count,
						       ovstage_ordinal_range_t range, ovstage_read_handle_t *out)
{
	if (!jobs_trace_on())
		return ovs_read_attributes(ctx, handle, attrs, attr_count, range, out);
	uint64_t t0 = jobs_trace_now();
	ovstage_enqueue_result_t r = ovs_read_attributes(ctx, handle, attrs, attr_count, range, out);
	jobs_trace_span("op", "read", t0, jobs_trace_now(), r.op_index);
	return r;
}

static const ovstage_vtable_t g_vtable = {
	.wait_op = ovs_wait_op,
	.release_op = ovs_release_op,
	.advance_write_floor = traced_advance_write_floor,
	.get_oldest_preserved_ordinal = ovs_get_oldest_preserved_ordinal,
	.get_attribute_write_floor = ovs_get_attribute_write_floor,
	.fetch_ordinal = ovs_fetch_ordinal,
	.release_ordinal_query = ovs_release_ordinal_query,
	.query = ovs_query_filter,
	.query_from_path_list = ovs_query_from_path_list,
	.fetch_query_result = ovs_fetch_query_result,
	.release_query_result = ovs_release_query_result,
	.release_query = ovs_release_query,
	.read_attributes = traced_read_attributes,
	.fetch_read_next = ovs_fetch_read_next,
	.release_group = ovs_release_group,
	.release_read = ovs_release_read,
	.write_attribute = traced_write_attribute,
	.map_attribute = ovs_map_attribute,
	.fetch_map_next = ovs_fetch_map_next,
	.unmap_group = ovs_unmap_group,
	.unmap_attribute = ovs_unmap_attribute,
	.delete_attributes = ovs_delete_attributes,
	.get_version = get_version,
	.get_error_string = get_error_string,
	.get_last_op_error = ovs_get_last_op_error,
	.get_path_dictionary = get_path_dictionary,
	.write_attributes = traced_write_attributes,
	.query_extension = query_extension,
};

/* The new instance's CUDA device from the active-GPU list (-1: none). An ordinal the process cannot
 * see is refused, naming it; in CPU-only mode the list is ignored (a warning says so): a program that
 * names its GPUs still runs where the GPU is switched off. */
static ovstage_api_status_t instance_cuda_device(int *out)
{
	int d = ovs_runtime_next_cuda_device();
	*out = -1;
	if (d < 0)
		return OVSTAGE_OK;
	if (!ovs_gpu_available()) {
		ovs_log(OVSTAGE_LOG_WARNING, "instance", "the active-GPU list names CUDA device %d, but this process "
			"cannot use CUDA (%s): the instance has no CUDA device", d, ovs_gpu_reason());
		return OVSTAGE_OK;
	}
	if (d >= ovs_gpu_device_count() || d >= OVS_STORE_GPUS)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "CUDA device %d of the active-GPU list "
				   "(OVSTAGE_CUDA_DEVICES / OVSTAGE_CONFIG_EXT_CUDA_DEVICES) is not visible: this process "
				   "sees %d CUDA device(s)%s", d, ovs_gpu_device_count(),
				   d >= OVS_STORE_GPUS ? " and a stage uses at most 16" : "");
	*out = d;
	return OVSTAGE_OK;
}

OVSTAGE_API ovstage_api_status_t ovstage_create_instance(const ovstage_instance_desc_t *desc,
							 ovstage_instance_t **out_instance)
{
	ovs_err_clear();
	if (!out_instance)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "out_instance is NULL");
	*out_instance = NULL;
	ovstage_api_status_t s = ovs_runtime_acquire(NULL);
	if (s != OVSTAGE_OK)
		return s;
	int cuda_device;
	s = instance_cuda_device(&cuda_device);
	if (s != OVSTAGE_OK) {
		ovs_runtime_release();
		return s;
	}
	/* Cache-line aligned: the grace period's fields sit on lines of their own (grace.h). */
	ovs_stage *st = aligned_alloc(_Alignof(ovs_stage), sizeof *st);
	if (st)
		memset(st, 0, sizeof *st);
	ovs_pd *pd = ovs_pd_shared_acquire(); /* one dictionary for all live instances */
	if (pd) /* bulk interning forks on the runtime's scheduler, which outlives every instance */
		ovs_pd_set_sched(pd, ovs_runtime_sched());
	char *name = (desc && desc->name) ? strdup(desc->name) : NULL;
	ovs_hier *hier = ovs_hier_create(ovs_runtime_settings()->default_hierarchy_model);
	if (!st || !pd || !hier || (desc && desc->name && !name)) {
		free(st);
		ovs_hier_destroy(hier);
		ovs_pd_shared_release(pd);
		free(name);
		ovs_runtime_release();
		return ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory creating an instance");
	}
	st->pub.vtable = &g_vtable;
	st->pub.context = (ovstage_context_t *)(void *)st;
	st->serial = atomic_fetch_add_explicit(&g_stage_serial, 1, memory_order_relaxed);
	st->name = name;
	st->cuda_device = cuda_device;
	st->sched = ovs_runtime_sched();
	st->pd = pd;
	st->hier = hier;
	ovs_store_init(&st->store, ovs_runtime_settings()->retention, (size_t)ovs_runtime_settings()->chunk_kb << 10,
		       (int64_t)(ovs_runtime_settings()->max_unsealed_mb << 20));
	st->store.sched = st->sched; /* device work's completions resolve receipts there */
	pthread_mutex_init(&st->seq_lock, NULL);
	ovs_handles_init(&st->handles, st->serial);
	atomic_init(&st->live_ops, 0);
	st->derived[0] = ovs_pd_intern_token(pd, "usd-path", 8);
	st->derived[1] = ovs_pd_intern_token(pd, "usd-parent", 10);
	st->derived[2] = ovs_pd_intern_token(pd, "usd-children", 12);
	atomic_init(&st->jobs_in_flight, 0);
	ovs_teardown_mark(st);
	*out_instance = &st->pub;
	return OVSTAGE_OK;
}

OVSTAGE_API ovstage_api_status_t ovstage_destroy_instance(ovstage_instance_t *instance)
{
	ovs_err_clear();
	if (!instance)
		return OVSTAGE_OK;
	ovs_stage *st = ovs_stage_of(instance->context);
	if (!st || instance->vtable != &g_vtable)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "instance was not created by ovstage_create_instance");
	ovstage_api_status_t s = ovs_teardown_check(st); /* groups, maps, results: refused, nothing changed */
	if (s != OVSTAGE_OK)
		return s;
	ovs_teardown_release(st); /* completes what is in flight; releases op ids; warns once */
	ovs_handles_fini(&st->handles);
	ovs_inflight *f = st->inflight;
	while (f) {
		ovs_inflight *n = f->next;
		free(f->cols);
		free(f);
		f = n;
	}
	ovs_hier_destroy(st->hier); /* before the store: it holds a reference on a version */
	ovs_store_fini(&st->store);
	ovs_pd_shared_release(st->pd); /* destroyed with the last instance */
	if (jobs_trace_on() && ovs_pd_shared_refs() == 0)
		jobs_trace_flush(); /* the last instance: the trace file is complete up to here */
	pthread_mutex_destroy(&st->seq_lock);
	free(st->name);
	free(st);
	ovs_runtime_release();
	return OVSTAGE_OK;
}

OVSTAGE_API ovstage_api_status_t ovstage_ext_get_memory_stats(ovstage_instance_t *instance,
							      ovstage_ext_memory_stats_t *out)
{
	ovs_err_clear();
	if (!instance || !out)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s is NULL", !instance ? "instance" : "out");
	ovs_stage *st = ovs_stage_of(instance->context);
	if (!st || instance->vtable != &g_vtable)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "instance was not created by ovstage_create_instance");
	int64_t u = atomic_load_explicit(&st->store.unsealed_bytes, memory_order_relaxed); /* relaxed: statistics */
	int64_t b = atomic_load_explicit(&st->store.mem.buffer_bytes, memory_order_relaxed);
	int64_t n = atomic_load_explicit(&st->store.mem.buffers, memory_order_relaxed);
	out->unsealed_bytes = u > 0 ? (uint64_t)u : 0;
	out->unsealed_limit = st->store.max_unsealed_bytes > 0 ? (uint64_t)st->store.max_unsealed_bytes : 0;
	out->buffer_bytes = b > 0 ? (uint64_t)b : 0;
	out->pooled_bytes = ovs_pool_bytes(&st->store.pool);
	out->buffers = n > 0 ? (uint64_t)n : 0;
	return OVSTAGE_OK;
}

OVSTAGE_API ovstage_api_status_t ovstage_ext_get_instance_cuda_device(ovstage_instance_t *instance, int *cuda_device)
{
	ovs_err_clear();
	if (!instance || !cuda_device)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s is NULL", !instance ? "instance" : "cuda_device");
	ovs_stage *st = ovs_stage_of(instance->context);
	if (!st || instance->vtable != &g_vtable)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "instance was not created by ovstage_create_instance");
	*cuda_device = st->cuda_device;
	return OVSTAGE_OK;
}

OVSTAGE_API ovstage_api_status_t ovstage_ext_wait_write_floor(ovstage_instance_t *instance,
							      ovx_string_or_token_t attribute,
							      ovstage_ordinal_t ordinal, ovstage_timeout_ns_t timeout)
{
	ovs_err_clear();
	if (!instance)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "instance is NULL");
	ovs_stage *st = ovs_stage_of(instance->context);
	if (!st || instance->vtable != &g_vtable)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "instance was not created by ovstage_create_instance");
	return ovs_wait_write_floor(st, attribute, ordinal, timeout);
}

OVSTAGE_API ovstage_enqueue_result_t ovstage_ext_map_attribute(ovstage_instance_t *instance,
							       ovstage_query_handle_t handle,
							       const ovstage_map_desc_t *desc, ovstage_ordinal_t ordinal,
							       const size_t *element_sizes, size_t element_count,
							       ovstage_ext_map_flags_t flags,
							       ovstage_map_handle_t *out_map_handle)
{
	ovs_err_clear();
	if (out_map_handle)
		*out_map_handle = OVSTAGE_INVALID_MAP_HANDLE;
	if (!instance)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "instance is NULL"));
	if (!ovs_stage_of(instance->context) || instance->vtable != &g_vtable)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
						"instance was not created by ovstage_create_instance"));
	return ovs_map_attribute_ext(instance->context, handle, desc, ordinal, element_sizes, element_count, flags,
				     out_map_handle);
}

OVSTAGE_API ovstage_api_status_t ovstage_get_usd_stage_id(ovstage_instance_t *instance, uint64_t *out_usd_stage_id)
{
	ovs_err_clear();
	if (!instance || !out_usd_stage_id)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s is NULL",
				   !instance ? "instance" : "out_usd_stage_id");
	*out_usd_stage_id = 0;
	return ovs_err_set(OVSTAGE_ERROR_NOT_SUPPORTED, "no USD stage is associated (USD population is not "
			   "supported by this implementation)");
}
