/*
 * unsupported.c — the exported functions this build declares but does not implement: instancing, the alignment helper, USD population and USD export (these
 * need OpenUSD, which this build does not include), and the static loader's ovstage_executable_dir.
 * ovstage_clone is defined here too, forwarding to clone.c.
 *
 * Every entry point clears the calling thread's last error, rejects obviously bad arguments with
 * OVSTAGE_ERROR_INVALID_ARGUMENT (out-handles and out-ids are set to their invalid values first, so
 * a caller never reads garbage), and otherwise answers OVSTAGE_ERROR_NOT_SUPPORTED with a message
 * that names the function and says why. Enqueue-style functions return that status in their
 * enqueue result with the invalid op id.
 *
 * Population and export keep their own thread-local error channel
 * (ovstage_population_get_last_error), defined here; their stubs record the same message there and
 * in ovstage_get_last_error, so either getter explains the failure.
 *
 * Decisions:
 *  - ovstage_population_export_desc_init / _desc_init_snapshot are pure struct initializers that
 *    need no OpenUSD: they are implemented (defaults of the reference) and return OVSTAGE_OK, so
 *    descriptors can be built; every export itself reports NOT_SUPPORTED.
 *  - ovalign_align returns a non-zero int on failure: the ovstage status value
 *    ((int)OVSTAGE_ERROR_NOT_SUPPORTED, or (int)OVSTAGE_ERROR_INVALID_ARGUMENT for NULL arguments),
 *    with the detail in ovstage_get_last_error; *out_result is zeroed.
 *  - ovstage_executable_dir returns {NULL, 0}: only the static loader (ovstage-static) knows the
 *    executable's directory; the library itself does not.
 *  - ovstage_population_wait_op and ovstage_population_export_wait_op report NOT_SUPPORTED (no
 *    population op can exist in this build); ovstage_population_get_last_op_error always returns
 *    {NULL, 0} because no population op ever fails.
 */
#include <stdio.h>
#include <string.h>

#include <ovstage/ovalign.h>
#include <ovstage/ovstage.h>
#include <ovstage/ovstage_config.h>
#include <ovstage/ovstage_instancing.h>
#include <ovstage/ovstage_population.h>
#include <ovstage/ovstage_population_export.h>

#include "api.h"
#include "errors.h"

#define WHY_USD "USD population needs OpenUSD, which this build does not include"
#define WHY_EXPORT "USD export needs OpenUSD, which this build does not include"
#define WHY_INSTANCING "instancing queries need USD population (OpenUSD), which this build does not include"

/* ---- helpers ------------------------------------------------------------------------------------- */

static ovstage_api_status_t unsupported(const char *fn, const char *why)
{
	return ovs_err_set(OVSTAGE_ERROR_NOT_SUPPORTED, "%s: %s", fn, why);
}

static ovstage_api_status_t null_arg(const char *fn, const char *arg)
{
	return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, arg);
}

/* ---- population error channel -------------------------------------------------------------------- */

static _Thread_local char pop_msg[OVS_ERR_MAX];
static _Thread_local size_t pop_len;

/* Start of every population / export entry point: clears both channels. */
static void pop_clear(void)
{
	ovs_err_clear();
	pop_len = 0;
	pop_msg[0] = '\0';
}

/* Records a failure in the population channel and in ovstage_get_last_error; returns `status`. */
static ovstage_api_status_t pop_set(ovstage_api_status_t status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static ovstage_api_status_t pop_set(ovstage_api_status_t status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(pop_msg, sizeof pop_msg, fmt, ap);
	va_end(ap);
	if (n < 0) {
		pop_msg[0] = '\0';
	} else if ((size_t)n >= sizeof pop_msg) {
		memcpy(pop_msg + sizeof pop_msg - 4, "...", 4);
	}
	pop_len = strlen(pop_msg);
	return ovs_err_set(status, "%s", pop_msg);
}

static ovstage_api_status_t pop_unsupported(const char *fn, const char *why)
{
	return pop_set(OVSTAGE_ERROR_NOT_SUPPORTED, "%s: %s", fn, why);
}

static ovstage_api_status_t pop_null(const char *fn, const char *arg)
{
	return pop_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, arg);
}

static ovstage_population_enqueue_result_t pop_rejected(ovstage_api_status_t st)
{
	ovstage_population_enqueue_result_t r;
	r.status = st;
	r.op_index = OVSTAGE_POPULATION_INVALID_OP_ID;
	return r;
}

OVSTAGE_API ovx_string_t ovstage_population_get_last_error(void)
{
	ovx_string_t s;
	s.ptr = pop_len ? pop_msg : NULL;
	s.length = pop_len;
	return s;
}

OVSTAGE_API ovx_string_t ovstage_population_get_last_op_error(ovstage_population_op_id_t op_id)
{
	(void)op_id; /* no population op ever runs, so none ever failed */
	ovx_string_t s = { NULL, 0 };
	return s;
}

/* ---- clone: implemented in clone.c ------------------------------------------------------------ */

OVSTAGE_API ovstage_enqueue_result_t ovstage_clone(ovstage_instance_t *instance, ovx_string_t source_path,
						   const ovx_string_t *target_paths, size_t num_target_paths,
						   ovstage_ordinal_t ordinal)
{
	return ovs_clone(instance, source_path, target_paths, num_target_paths, ordinal);
}

/* ---- instancing ---------------------------------------------------------------------------------- */

OVSTAGE_API ovstage_api_status_t ovstage_instancing_get_instance_roots(ovstage_instance_t *instance,
								       ovx_primpath_t prototype_root,
								       ovx_primpath_list_t *out_instance_roots)
{
	static const char fn[] = "ovstage_instancing_get_instance_roots";
	ovs_err_clear();
	(void)prototype_root;
	if (out_instance_roots)
		*out_instance_roots = OVX_INVALID_PRIMPATH_LIST;
	if (!instance)
		return null_arg(fn, "instance");
	if (!out_instance_roots)
		return null_arg(fn, "out_instance_roots");
	return unsupported(fn, WHY_INSTANCING);
}

OVSTAGE_API ovstage_api_status_t ovstage_instancing_get_prototype_root(ovstage_instance_t *instance,
								       ovx_primpath_t instance_root,
								       ovx_primpath_t *out_prototype_root)
{
	static const char fn[] = "ovstage_instancing_get_prototype_root";
	ovs_err_clear();
	(void)instance_root;
	if (out_prototype_root)
		*out_prototype_root = OVX_INVALID_PRIMPATH;
	if (!instance)
		return null_arg(fn, "instance");
	if (!out_prototype_root)
		return null_arg(fn, "out_prototype_root");
	return unsupported(fn, WHY_INSTANCING);
}

OVSTAGE_API ovstage_api_status_t ovstage_instancing_get_prototype_roots(ovstage_instance_t *instance,
									ovx_primpath_list_t *out_prototype_roots)
{
	static const char fn[] = "ovstage_instancing_get_prototype_roots";
	ovs_err_clear();
	if (out_prototype_roots)
		*out_prototype_roots = OVX_INVALID_PRIMPATH_LIST;
	if (!instance)
		return null_arg(fn, "instance");
	if (!out_prototype_roots)
		return null_arg(fn, "out_prototype_roots");
	return unsupported(fn, WHY_INSTANCING);
}

/* ---- alignment helper ---------------------------------------------------------------------------- */

OVSTAGE_API int ovalign_align(const ovalign_request_t *request, ovalign_result_t *out_result)
{
	static const char fn[] = "ovalign_align";
	ovs_err_clear();
	if (out_result)
		memset(out_result, 0, sizeof *out_result);
	if (!request)
		return (int)null_arg(fn, "request");
	if (!out_result)
		return (int)null_arg(fn, "out_result");
	return (int)unsupported(fn, "group alignment is not implemented in this build");
}

OVSTAGE_API void ovalign_release(ovalign_result_t *result)
{
	ovs_err_clear();
	(void)result; /* ovalign_align never allocates in this build: nothing to free */
}

/* ---- static loader ------------------------------------------------------------------------------- */

OVSTAGE_API ovx_string_t ovstage_executable_dir(void)
{
	ovs_err_clear();
	/* Only the static loader (ovstage-static) knows the running executable's directory. */
	ovx_string_t s = { NULL, 0 };
	return s;
}

/* ---- USD population ------------------------------------------------------------------------------ */

OVSTAGE_API ovstage_api_status_t ovstage_population_register_usd_schemas(const ovx_string_t *paths, size_t path_count)
{
	static const char fn[] = "ovstage_population_register_usd_schemas";
	pop_clear();
	if (!paths && path_count)
		return pop_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s: paths is NULL with path_count %zu", fn,
			       path_count);
	for (size_t i = 0; i < path_count; i++)
		if (!paths[i].ptr || !paths[i].length)
			return pop_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s: paths[%zu] is empty", fn, i);
	return pop_unsupported(fn, WHY_USD);
}

/* The common checks of the open_usd_* family. */
static ovstage_population_enqueue_result_t open_usd(const char *fn, ovstage_instance_t *stage,
						    const ovstage_population_desc_t *descs, size_t desc_count)
{
	if (!stage)
		return pop_rejected(pop_null(fn, "stage"));
	if (!descs && desc_count)
		return pop_rejected(pop_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s: descs is NULL with desc_count %zu",
					    fn, desc_count));
	return pop_rejected(pop_unsupported(fn, WHY_USD));
}

OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_open_usd_from_file(ovstage_instance_t *stage,
										      ovx_string_t path,
										      ovstage_ordinal_t ordinal,
										      double time, uint32_t domains)
{
	pop_clear();
	(void)path;
	(void)ordinal;
	(void)time;
	(void)domains;
	return open_usd("ovstage_population_open_usd_from_file", stage, NULL, 0);
}

OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_open_usd_from_string(ovstage_instance_t *stage,
											ovx_string_t usda,
											ovstage_ordinal_t ordinal,
											double time, uint32_t domains)
{
	pop_clear();
	(void)usda;
	(void)ordinal;
	(void)time;
	(void)domains;
	return open_usd("ovstage_population_open_usd_from_string", stage, NULL, 0);
}

OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_open_usd_from_file_with_desc(
	ovstage_instance_t *stage, ovx_string_t path, ovstage_ordinal_t ordinal, double time,
	const ovstage_population_desc_t *descs, size_t desc_count)
{
	pop_clear();
	(void)path;
	(void)ordinal;
	(void)time;
	return open_usd("ovstage_population_open_usd_from_file_with_desc", stage, descs, desc_count);
}

OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_open_usd_from_string_with_desc(
	ovstage_instance_t *stage, ovx_string_t usda, ovstage_ordinal_t ordinal, double time,
	const ovstage_population_desc_t *descs, size_t desc_count)
{
	pop_clear();
	(void)usda;
	(void)ordinal;
	(void)time;
	return open_usd("ovstage_population_open_usd_from_string_with_desc", stage, descs, desc_count);
}

static ovstage_population_enqueue_result_t add_reference(const char *fn, ovstage_instance_t *stage,
							 ovstage_population_usd_reference_handle_t *out_handle)
{
	if (out_handle) /* optional out */
		*out_handle = OVSTAGE_POPULATION_INVALID_USD_REFERENCE_HANDLE;
	if (!stage)
		return pop_rejected(pop_null(fn, "stage"));
	return pop_rejected(pop_unsupported(fn, WHY_USD));
}

OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_add_usd_reference_from_file(
	ovstage_instance_t *stage, ovx_string_t ref_file_path, ovx_string_t target_path,
	ovstage_population_usd_reference_handle_t *out_handle)
{
	pop_clear();
	(void)ref_file_path;
	(void)target_path;
	return add_reference("ovstage_population_add_usd_reference_from_file", stage, out_handle);
}

OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_add_usd_reference_from_string(
	ovstage_instance_t *stage, ovx_string_t ref_str, ovx_string_t target_path,
	ovstage_population_usd_reference_handle_t *out_handle)
{
	pop_clear();
	(void)ref_str;
	(void)target_path;
	return add_reference("ovstage_population_add_usd_reference_from_string", stage, out_handle);
}

/* The checks of population ops that take only the stage (and scalars). */
static ovstage_population_enqueue_result_t stage_op(const char *fn, ovstage_instance_t *stage)
{
	if (!stage)
		return pop_rejected(pop_null(fn, "stage"));
	return pop_rejected(pop_unsupported(fn, WHY_USD));
}

OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_remove_usd_reference(
	ovstage_instance_t *stage, ovstage_population_usd_reference_handle_t handle)
{
	pop_clear();
	(void)handle;
	return stage_op("ovstage_population_remove_usd_reference", stage);
}

OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_reset_usd(ovstage_instance_t *stage)
{
	pop_clear();
	return stage_op("ovstage_population_reset_usd", stage);
}

OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_apply_usd_time(ovstage_instance_t *stage,
										  ovstage_ordinal_t ordinal,
										  double time)
{
	pop_clear();
	(void)ordinal;
	(void)time;
	return stage_op("ovstage_population_apply_usd_time", stage);
}

OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_apply_usd_changes(ovstage_instance_t *stage,
										     ovstage_ordinal_t ordinal)
{
	pop_clear();
	(void)ordinal;
	return stage_op("ovstage_population_apply_usd_changes", stage);
}

OVSTAGE_API ovstage_api_status_t ovstage_population_wait_op(ovstage_instance_t *stage,
							    ovstage_population_op_id_t op_id,
							    ovstage_timeout_ns_t timeout_ns,
							    ovstage_population_op_wait_result_t *out_wait_result)
{
	static const char fn[] = "ovstage_population_wait_op";
	pop_clear();
	(void)op_id;
	(void)timeout_ns;
	if (out_wait_result) { /* optional out */
		out_wait_result->error_op_ids = NULL;
		out_wait_result->error_op_id_count = 0;
		out_wait_result->lowest_pending_op_id = OVSTAGE_POPULATION_INVALID_OP_ID;
	}
	if (!stage)
		return pop_null(fn, "stage");
	return pop_unsupported(fn, WHY_USD);
}

/* ---- USD export ---------------------------------------------------------------------------------- */

OVSTAGE_API ovstage_api_status_t ovstage_population_export_desc_init(ovstage_population_export_desc_t *desc)
{
	pop_clear();
	if (!desc)
		return pop_null("ovstage_population_export_desc_init", "desc");
	memset(desc, 0, sizeof *desc); /* rule arrays NULL / 0, ordinal and since_ordinal 0 */
	desc->struct_size = (uint32_t)sizeof *desc;
	desc->source_api_schema_policy = OVSTAGE_POPULATION_EXPORT_SOURCE_API_SCHEMAS_EXPLICIT_ONLY;
	desc->projection = OVSTAGE_POPULATION_EXPORT_PROJECTION_EXPLICIT_RULES;
	desc->selection = OVSTAGE_POPULATION_EXPORT_SELECTION_EXPLICIT_PREDICATE;
	desc->layer_mode = OVSTAGE_POPULATION_EXPORT_LAYER_MODE_OVER;
	desc->transform_policy = OVSTAGE_POPULATION_EXPORT_TRANSFORM_USD_XFORM_OP;
	desc->unknown_metadata_policy = OVSTAGE_POPULATION_EXPORT_UNKNOWN_METADATA_DROP;
	desc->prim_predicate = ovstage_population_prim_predicate_all();
	desc->property_predicate = ovstage_population_property_predicate_all();
	return OVSTAGE_OK;
}

OVSTAGE_API ovstage_api_status_t ovstage_population_export_desc_init_snapshot(ovstage_population_export_desc_t *desc,
									      ovstage_ordinal_t ordinal)
{
	pop_clear();
	if (!desc)
		return pop_null("ovstage_population_export_desc_init_snapshot", "desc");
	ovstage_api_status_t st = ovstage_population_export_desc_init(desc);
	if (st == OVSTAGE_OK)
		desc->ordinal = ordinal;
	return st;
}

static void zero_report(ovstage_population_export_report_t *report)
{
	if (report)
		memset(report, 0, sizeof *report);
}

/* Common checks of the create family. */
static ovstage_api_status_t dest_create(const char *fn, ovstage_instance_t *stage,
					ovstage_population_export_destination_handle_t *out_destination)
{
	if (out_destination)
		*out_destination = OVSTAGE_POPULATION_EXPORT_INVALID_DESTINATION_HANDLE;
	if (!stage)
		return pop_null(fn, "stage");
	if (!out_destination)
		return pop_null(fn, "out_destination");
	return pop_unsupported(fn, WHY_EXPORT);
}

OVSTAGE_API ovstage_api_status_t ovstage_population_export_destination_create(
	ovstage_instance_t *stage, ovx_string_t usd_identifier, ovstage_population_export_destination_mode_t mode,
	ovstage_population_export_destination_handle_t *out_destination)
{
	pop_clear();
	(void)usd_identifier;
	(void)mode;
	return dest_create("ovstage_population_export_destination_create", stage, out_destination);
}

OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_export_destination_enqueue_create(
	ovstage_instance_t *stage, ovx_string_t usd_identifier, ovstage_population_export_destination_mode_t mode,
	ovstage_population_export_destination_handle_t *out_destination)
{
	pop_clear();
	(void)usd_identifier;
	(void)mode;
	return pop_rejected(dest_create("ovstage_population_export_destination_enqueue_create", stage,
					out_destination));
}

/* Common checks of the export family (report is optional). */
static ovstage_api_status_t export_checks(const char *fn, ovstage_instance_t *stage,
					  const ovstage_population_export_desc_t *desc,
					  ovstage_population_export_report_t *report)
{
	zero_report(report);
	if (!stage)
		return pop_null(fn, "stage");
	if (!desc)
		return pop_null(fn, "desc");
	return pop_unsupported(fn, WHY_EXPORT);
}

OVSTAGE_API ovstage_api_status_t ovstage_population_export_to_destination(
	ovstage_instance_t *stage, ovstage_population_export_destination_handle_t destination,
	const ovstage_population_export_desc_t *desc, ovstage_population_export_report_t *report)
{
	pop_clear();
	(void)destination;
	return export_checks("ovstage_population_export_to_destination", stage, desc, report);
}

OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_export_enqueue_to_destination(
	ovstage_instance_t *stage, ovstage_population_export_destination_handle_t destination,
	const ovstage_population_export_desc_t *desc)
{
	pop_clear();
	(void)destination;
	return pop_rejected(export_checks("ovstage_population_export_enqueue_to_destination", stage, desc, NULL));
}

/* Common checks of save / destroy. */
static ovstage_api_status_t dest_op(const char *fn, ovstage_instance_t *stage)
{
	if (!stage)
		return pop_null(fn, "stage");
	return pop_unsupported(fn, WHY_EXPORT);
}

OVSTAGE_API ovstage_api_status_t ovstage_population_export_destination_save(
	ovstage_instance_t *stage, ovstage_population_export_destination_handle_t destination)
{
	pop_clear();
	(void)destination;
	return dest_op("ovstage_population_export_destination_save", stage);
}

OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_export_destination_enqueue_save(
	ovstage_instance_t *stage, ovstage_population_export_destination_handle_t destination)
{
	pop_clear();
	(void)destination;
	return pop_rejected(dest_op("ovstage_population_export_destination_enqueue_save", stage));
}

OVSTAGE_API ovstage_api_status_t ovstage_population_export_destination_destroy(
	ovstage_instance_t *stage, ovstage_population_export_destination_handle_t destination)
{
	pop_clear();
	(void)destination;
	return dest_op("ovstage_population_export_destination_destroy", stage);
}

OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_export_destination_enqueue_destroy(
	ovstage_instance_t *stage, ovstage_population_export_destination_handle_t destination)
{
	pop_clear();
	(void)destination;
	return pop_rejected(dest_op("ovstage_population_export_destination_enqueue_destroy", stage));
}

OVSTAGE_API ovstage_api_status_t ovstage_population_export_to_usd_file(ovstage_instance_t *stage,
								       ovx_string_t usd_identifier,
								       const ovstage_population_export_desc_t *desc,
								       ovstage_population_export_report_t *report)
{
	pop_clear();
	(void)usd_identifier;
	return export_checks("ovstage_population_export_to_usd_file", stage, desc, report);
}

OVSTAGE_API ovstage_population_enqueue_result_t ovstage_population_export_enqueue_to_usd_file(
	ovstage_instance_t *stage, ovx_string_t usd_identifier, const ovstage_population_export_desc_t *desc)
{
	pop_clear();
	(void)usd_identifier;
	return pop_rejected(export_checks("ovstage_population_export_enqueue_to_usd_file", stage, desc, NULL));
}

OVSTAGE_API ovstage_api_status_t ovstage_population_export_wait_op(ovstage_instance_t *stage,
								   ovstage_population_op_id_t op_id,
								   ovstage_timeout_ns_t timeout_ns,
								   ovstage_population_export_report_t *report)
{
	static const char fn[] = "ovstage_population_export_wait_op";
	pop_clear();
	(void)op_id;
	(void)timeout_ns;
	zero_report(report);
	if (!stage)
		return pop_null(fn, "stage");
	return pop_unsupported(fn, WHY_EXPORT);
}
