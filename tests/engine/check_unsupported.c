/*
 * check_unsupported.c — Check suite of engine/unsupported.c: every exported function this build
 * declares but does not implement (hierarchy, instancing, ovalign, USD population and export,
 * ovstage_executable_dir; clone only for its NULL checks, it is implemented) is called with valid-looking arguments and must answer
 * OVSTAGE_ERROR_NOT_SUPPORTED (or its enqueue form with the invalid op id), leave out-handles and
 * out-ids invalid, and name itself in ovstage_get_last_error — and, for population and export, in
 * ovstage_population_get_last_error too. Also: NULL-argument rejections, the static list of
 * hierarchy computation models, the export descriptor initializers, and the two error channels'
 * clearing rules. Linked with the static library; the runtime is never bootstrapped here.
 */
#include <check.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ovstage/ovalign.h>
#include <ovstage/ovstage.h>
#include <ovstage/ovstage_config.h>
#include <ovstage/ovstage_instancing.h>
#include <ovstage/ovstage_population.h>
#include <ovstage/ovstage_population_export.h>

#include "errors.h"
#include "runtime.h"

/* The real runtime is linked (clone pulls in the engine); it is not bootstrapped in this test, so
 * ovs_runtime_active() is false, as the log entry point test below expects. */

/* ---- helpers ------------------------------------------------------------------------------------- */

static ovstage_instance_t g_dummy; /* never dereferenced by the stubs */
#define INST (&g_dummy)
#define GARBAGE 0xA5A5A5A5A5A5A5A5ull

static ovx_string_t S(const char *s)
{
	ovx_string_t r = { s, strlen(s) };
	return r;
}

static void copy_str(char *buf, size_t size, ovx_string_t s)
{
	size_t n = s.length < size - 1 ? s.length : size - 1;
	if (s.ptr)
		memcpy(buf, s.ptr, n);
	else
		n = 0;
	buf[n] = '\0';
}

/* The main channel holds a message that starts with "<fn>: " and contains `why`. */
static void ck_main_err(const char *fn, const char *why)
{
	char buf[OVS_ERR_MAX + 1], want[256];
	ovx_string_t e = ovstage_get_last_error();
	ck_assert_msg(e.ptr != NULL && e.length > 0, "%s: no last error", fn);
	copy_str(buf, sizeof buf, e);
	snprintf(want, sizeof want, "%s: ", fn);
	ck_assert_msg(strncmp(buf, want, strlen(want)) == 0, "last error \"%s\" does not name %s", buf, fn);
	ck_assert_msg(strstr(buf, why) != NULL, "last error \"%s\" lacks \"%s\"", buf, why);
}

/* Both channels hold it (population and export). */
static void ck_pop_err(const char *fn, const char *why)
{
	ck_main_err(fn, why);
	char buf[OVS_ERR_MAX + 1], want[256];
	ovx_string_t e = ovstage_population_get_last_error();
	ck_assert_msg(e.ptr != NULL && e.length > 0, "%s: no population last error", fn);
	copy_str(buf, sizeof buf, e);
	snprintf(want, sizeof want, "%s: ", fn);
	ck_assert_msg(strncmp(buf, want, strlen(want)) == 0, "population error \"%s\" does not name %s", buf, fn);
	ck_assert_msg(strstr(buf, why) != NULL, "population error \"%s\" lacks \"%s\"", buf, why);
}

#define USD "needs OpenUSD, which this build does not include"
#define CK_REJ(res, st)                                                                                        \
	do {                                                                                                   \
		ovstage_enqueue_result_t r_ = (res);                                                           \
		ck_assert_int_eq(r_.status, (st));                                                             \
		ck_assert_uint_eq(r_.op_index, OVSTAGE_INVALID_OP_ID);                                         \
	} while (0)
#define CK_POP_REJ(res, st)                                                                                    \
	do {                                                                                                   \
		ovstage_population_enqueue_result_t r_ = (res);                                                \
		ck_assert_int_eq(r_.status, (st));                                                             \
		ck_assert_uint_eq(r_.op_index, OVSTAGE_POPULATION_INVALID_OP_ID);                              \
	} while (0)

/* ---- clone, hierarchy ---------------------------------------------------------------------------- */

START_TEST(test_clone)
{
	/* clone is implemented (check_stage.c tests it); here only its synchronous NULL checks */
	ovx_string_t targets[2] = { S("/b"), S("/c") };
	CK_REJ(ovstage_clone(NULL, S("/a"), targets, 2, 5), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ovx_string_t e = ovstage_get_last_error();
	ck_assert_msg(e.ptr && strstr(e.ptr, "instance is NULL"), "last error: %s", e.ptr ? e.ptr : "(none)");
}
END_TEST

/* Hierarchy lookup and computation are implemented: check_hierarchy.c. */

START_TEST(test_hierarchy_models)
{
	const ovstage_hierarchy_computation_model_desc_t *m = (const void *)1;
	size_t n = 99;
	ovs_err_set(OVSTAGE_ERROR_INTERNAL, "stale");
	ck_assert_int_eq(ovstage_get_hierarchy_computation_models(INST, &m, &n), OVSTAGE_OK);
	ck_assert_ptr_null(ovstage_get_last_error().ptr); /* cleared on entry */
	/* the three of NVIDIA's authoring-hierarchy README; RUNTIME_DEFAULT is an id, not a listed model */
	ck_assert_uint_eq(n, 3);
	static const char *names[] = { "cpu-incremental", "gpu-incremental", "gpu-global" };
	for (size_t i = 0; i < 3; i++) {
		ck_assert_int_eq(m[i].model_id, (int)i + 1);
		ck_assert_uint_eq(m[i].name.length, strlen(names[i]));
		ck_assert(memcmp(m[i].name.ptr, names[i], m[i].name.length) == 0);
		ck_assert(m[i].description.length > 0);
		ck_assert_uint_eq(strlen(m[i].description.ptr), m[i].description.length);
		bool gpu = m[i].model_id == OVSTAGE_HIERARCHY_COMPUTATION_MODEL_GPU_INCREMENTAL ||
			   m[i].model_id == OVSTAGE_HIERARCHY_COMPUTATION_MODEL_GPU_GLOBAL;
		ck_assert(gpu == (strstr(m[i].description.ptr, "NOT_SUPPORTED where no GPU is usable") != NULL));
	}
	ck_assert_int_eq(ovstage_get_hierarchy_computation_models(INST, NULL, &n), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_uint_eq(n, 0);
	ck_main_err("ovstage_get_hierarchy_computation_models", "out_models is NULL");
	m = (const void *)1;
	ck_assert_int_eq(ovstage_get_hierarchy_computation_models(INST, &m, NULL), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_ptr_null(m);
	ck_assert_int_eq(ovstage_get_hierarchy_computation_models(NULL, &m, &n), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_main_err("ovstage_get_hierarchy_computation_models", "instance is NULL");
}
END_TEST

/* ---- instancing, ovalign, executable dir --------------------------------------------------------- */

START_TEST(test_instancing)
{
	ovstage_population_export_desc_t d;
	ck_assert_int_eq(ovstage_population_export_desc_init(&d), OVSTAGE_OK); /* clears the population channel */
	ovx_primpath_list_t l = GARBAGE;
	ck_assert_int_eq(ovstage_instancing_get_instance_roots(INST, (ovx_primpath_t)3, &l),
			 OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_assert_uint_eq(l, OVX_INVALID_PRIMPATH_LIST);
	ck_main_err("ovstage_instancing_get_instance_roots", "OpenUSD");

	ovx_primpath_t p = GARBAGE;
	ck_assert_int_eq(ovstage_instancing_get_prototype_root(INST, (ovx_primpath_t)3, &p),
			 OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_assert_uint_eq(p, OVX_INVALID_PRIMPATH);
	ck_main_err("ovstage_instancing_get_prototype_root", "OpenUSD");

	l = GARBAGE;
	ck_assert_int_eq(ovstage_instancing_get_prototype_roots(INST, &l), OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_assert_uint_eq(l, OVX_INVALID_PRIMPATH_LIST);
	ck_main_err("ovstage_instancing_get_prototype_roots", "OpenUSD");

	ck_assert_int_eq(ovstage_instancing_get_instance_roots(INST, 3, NULL), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_main_err("ovstage_instancing_get_instance_roots", "out_instance_roots is NULL");
	ck_assert_int_eq(ovstage_instancing_get_prototype_root(INST, 3, NULL), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ovstage_instancing_get_prototype_roots(NULL, &l), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_main_err("ovstage_instancing_get_prototype_roots", "instance is NULL");
	/* instancing is not population: its channel is untouched */
	ck_assert_ptr_null(ovstage_population_get_last_error().ptr);
}
END_TEST

START_TEST(test_ovalign)
{
	ovx_token_t attrs[1] = { (ovx_token_t)1 };
	ovalign_request_t req;
	memset(&req, 0, sizeof req);
	req.attributes = attrs;
	req.attr_count = 1;
	req.device = OVALIGN_DEVICE_CPU;
	ovalign_result_t res;
	memset(&res, 0xA5, sizeof res);
	int rc = ovalign_align(&req, &res);
	ck_assert_int_ne(rc, 0);
	ck_assert_int_eq(rc, (int)OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_assert_ptr_null(res.attrs);
	ck_assert_uint_eq(res.attr_count, 0);
	ck_assert_uint_eq(res.group_count, 0);
	ck_assert(!res.skipped);
	ck_main_err("ovalign_align", "not implemented");
	ovalign_release(&res);
	ovalign_release(NULL);
	ck_assert_int_eq(ovalign_align(NULL, &res), (int)OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_main_err("ovalign_align", "request is NULL");
	ck_assert_int_eq(ovalign_align(&req, NULL), (int)OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_main_err("ovalign_align", "out_result is NULL");
}
END_TEST

START_TEST(test_executable_dir)
{
	ovx_string_t d = ovstage_executable_dir();
	ck_assert_ptr_null(d.ptr);
	ck_assert_uint_eq(d.length, 0);
}
END_TEST

/* ---- population ---------------------------------------------------------------------------------- */

START_TEST(test_population)
{
	ovx_string_t schemas[1] = { S("/plug/plugInfo.json") };
	ck_assert_int_eq(ovstage_population_register_usd_schemas(schemas, 1), OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_pop_err("ovstage_population_register_usd_schemas", "USD population " USD);
	ck_assert_int_eq(ovstage_population_register_usd_schemas(NULL, 0), OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_assert_int_eq(ovstage_population_register_usd_schemas(NULL, 2), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_pop_err("ovstage_population_register_usd_schemas", "paths is NULL");
	ovx_string_t empty[2] = { S("/a"), S("") };
	ck_assert_int_eq(ovstage_population_register_usd_schemas(empty, 2), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_pop_err("ovstage_population_register_usd_schemas", "paths[1] is empty");

	ovstage_population_desc_t desc;
	memset(&desc, 0, sizeof desc);
	desc.domains = OVSTAGE_POPULATION_DOMAIN_ALL;

	CK_POP_REJ(ovstage_population_open_usd_from_file(INST, S("scene.usda"), 1, 0.0, OVSTAGE_POPULATION_DOMAIN_ALL),
		   OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_pop_err("ovstage_population_open_usd_from_file", USD);
	CK_POP_REJ(ovstage_population_open_usd_from_string(INST, S("#usda 1.0\n"), 1, NAN,
							  OVSTAGE_POPULATION_DOMAIN_RENDERING),
		   OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_pop_err("ovstage_population_open_usd_from_string", USD);
	CK_POP_REJ(ovstage_population_open_usd_from_file_with_desc(INST, S("scene.usda"), 1, 0.0, &desc, 1),
		   OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_pop_err("ovstage_population_open_usd_from_file_with_desc", USD);
	CK_POP_REJ(ovstage_population_open_usd_from_string_with_desc(INST, S("#usda 1.0\n"), 1, 0.0, &desc, 1),
		   OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_pop_err("ovstage_population_open_usd_from_string_with_desc", USD);
	CK_POP_REJ(ovstage_population_open_usd_from_string_with_desc(INST, S("#usda 1.0\n"), 1, 0.0, NULL, 1),
		   OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_pop_err("ovstage_population_open_usd_from_string_with_desc", "descs is NULL with desc_count 1");
	CK_POP_REJ(ovstage_population_open_usd_from_file(NULL, S("scene.usda"), 1, 0.0, 1),
		   OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_pop_err("ovstage_population_open_usd_from_file", "stage is NULL");

	ovstage_population_usd_reference_handle_t h = GARBAGE;
	CK_POP_REJ(ovstage_population_add_usd_reference_from_file(INST, S("ref.usda"), S("/"), &h),
		   OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_assert_uint_eq(h, OVSTAGE_POPULATION_INVALID_USD_REFERENCE_HANDLE);
	ck_pop_err("ovstage_population_add_usd_reference_from_file", USD);
	h = GARBAGE;
	CK_POP_REJ(ovstage_population_add_usd_reference_from_string(INST, S("#usda 1.0\n"), S("/x"), &h),
		   OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_assert_uint_eq(h, OVSTAGE_POPULATION_INVALID_USD_REFERENCE_HANDLE);
	ck_pop_err("ovstage_population_add_usd_reference_from_string", USD);
	CK_POP_REJ(ovstage_population_add_usd_reference_from_string(INST, S("#usda 1.0\n"), S("/x"), NULL),
		   OVSTAGE_ERROR_NOT_SUPPORTED); /* out_handle is optional */

	CK_POP_REJ(ovstage_population_remove_usd_reference(INST, 1), OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_pop_err("ovstage_population_remove_usd_reference", USD);
	CK_POP_REJ(ovstage_population_reset_usd(INST), OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_pop_err("ovstage_population_reset_usd", USD);
	CK_POP_REJ(ovstage_population_apply_usd_time(INST, 2, 1.5), OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_pop_err("ovstage_population_apply_usd_time", USD);
	CK_POP_REJ(ovstage_population_apply_usd_changes(INST, 3), OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_pop_err("ovstage_population_apply_usd_changes", USD);
	CK_POP_REJ(ovstage_population_reset_usd(NULL), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_pop_err("ovstage_population_reset_usd", "stage is NULL");

	ovstage_population_op_wait_result_t wr;
	memset(&wr, 0xA5, sizeof wr);
	ck_assert_int_eq(ovstage_population_wait_op(INST, 1, OVSTAGE_TIMEOUT_INFINITE, &wr),
			 OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_assert_ptr_null(wr.error_op_ids);
	ck_assert_uint_eq(wr.error_op_id_count, 0);
	ck_assert_uint_eq(wr.lowest_pending_op_id, OVSTAGE_POPULATION_INVALID_OP_ID);
	ck_pop_err("ovstage_population_wait_op", USD);
	ck_assert_int_eq(ovstage_population_wait_op(INST, 1, 0, NULL), OVSTAGE_ERROR_NOT_SUPPORTED);

	ovx_string_t oe = ovstage_population_get_last_op_error(1);
	ck_assert_ptr_null(oe.ptr);
	ck_assert_uint_eq(oe.length, 0);
}
END_TEST

/* ---- export -------------------------------------------------------------------------------------- */

START_TEST(test_export_desc_init)
{
	ovstage_population_export_desc_t d;
	memset(&d, 0xA5, sizeof d);
	ck_assert_int_eq(ovstage_population_export_desc_init(&d), OVSTAGE_OK);
	ck_assert_uint_eq(d.struct_size, sizeof d);
	ck_assert_int_eq(d.selection, OVSTAGE_POPULATION_EXPORT_SELECTION_EXPLICIT_PREDICATE);
	ck_assert_int_eq(d.layer_mode, OVSTAGE_POPULATION_EXPORT_LAYER_MODE_OVER);
	ck_assert_int_eq(d.transform_policy, OVSTAGE_POPULATION_EXPORT_TRANSFORM_USD_XFORM_OP);
	ck_assert_int_eq(d.unknown_metadata_policy, OVSTAGE_POPULATION_EXPORT_UNKNOWN_METADATA_DROP);
	ck_assert_int_eq(d.source_api_schema_policy, OVSTAGE_POPULATION_EXPORT_SOURCE_API_SCHEMAS_EXPLICIT_ONLY);
	ck_assert_int_eq(d.projection, OVSTAGE_POPULATION_EXPORT_PROJECTION_EXPLICIT_RULES);
	ck_assert_int_eq(d.prim_predicate.kind, OVSTAGE_POPULATION_PRIM_PREDICATE_ALL);
	ck_assert_int_eq(d.property_predicate.kind, OVSTAGE_POPULATION_PROPERTY_PREDICATE_ALL);
	ck_assert_uint_eq(d.ordinal, 0);
	ck_assert_uint_eq(d.since_ordinal, 0);
	ck_assert_ptr_null(d.prim_rules);
	ck_assert_uint_eq(d.prim_rule_count, 0);
	ck_assert_ptr_null(d.metadata_rules);
	ck_assert_uint_eq(d.metadata_rule_count, 0);
	ck_assert_ptr_null(ovstage_population_get_last_error().ptr);

	ck_assert_int_eq(ovstage_population_export_desc_init_snapshot(&d, 42), OVSTAGE_OK);
	ck_assert_uint_eq(d.ordinal, 42);
	ovx_string_t root = S("/World");
	ck_assert_int_eq(ovstage_population_export_desc_init_typed_hierarchy(&d, 7, &root), OVSTAGE_OK);
	ck_assert_uint_eq(d.ordinal, 7);
	ck_assert_int_eq(d.layer_mode, OVSTAGE_POPULATION_EXPORT_LAYER_MODE_DEF);
	ck_assert_int_eq(d.prim_predicate.kind, OVSTAGE_POPULATION_PRIM_PREDICATE_IS_UNDER_PATH);

	ck_assert_int_eq(ovstage_population_export_desc_init(NULL), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_pop_err("ovstage_population_export_desc_init", "desc is NULL");
	ck_assert_int_eq(ovstage_population_export_desc_init_snapshot(NULL, 1), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_pop_err("ovstage_population_export_desc_init_snapshot", "desc is NULL");
}
END_TEST

static void ck_report_zero(const ovstage_population_export_report_t *r)
{
	static const ovstage_population_export_report_t zero;
	ck_assert(memcmp(r, &zero, sizeof zero) == 0);
}

START_TEST(test_export)
{
	ovstage_population_export_desc_t d;
	ck_assert_int_eq(ovstage_population_export_desc_init_snapshot(&d, 3), OVSTAGE_OK);
	ovstage_population_export_report_t rep;
	const char *WHY = "USD export " USD;

	ovstage_population_export_destination_handle_t h = GARBAGE;
	ck_assert_int_eq(ovstage_population_export_destination_create(INST, S("out.usda"),
								      OVSTAGE_POPULATION_EXPORT_DESTINATION_EMPTY, &h),
			 OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_assert_uint_eq(h, OVSTAGE_POPULATION_EXPORT_INVALID_DESTINATION_HANDLE);
	ck_pop_err("ovstage_population_export_destination_create", WHY);
	ck_assert_int_eq(ovstage_population_export_destination_create(
				 INST, S("out.usda"), OVSTAGE_POPULATION_EXPORT_DESTINATION_EMPTY, NULL),
			 OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_pop_err("ovstage_population_export_destination_create", "out_destination is NULL");

	h = GARBAGE;
	CK_POP_REJ(ovstage_population_export_destination_enqueue_create(
			   INST, S("out.usda"), OVSTAGE_POPULATION_EXPORT_DESTINATION_OPEN_EXISTING, &h),
		   OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_assert_uint_eq(h, OVSTAGE_POPULATION_EXPORT_INVALID_DESTINATION_HANDLE);
	ck_pop_err("ovstage_population_export_destination_enqueue_create", WHY);

	memset(&rep, 0xA5, sizeof rep);
	ck_assert_int_eq(ovstage_population_export_to_destination(INST, 1, &d, &rep), OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_report_zero(&rep);
	ck_pop_err("ovstage_population_export_to_destination", WHY);
	ck_assert_int_eq(ovstage_population_export_to_destination(INST, 1, &d, NULL), OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_assert_int_eq(ovstage_population_export_to_destination(INST, 1, NULL, NULL),
			 OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_pop_err("ovstage_population_export_to_destination", "desc is NULL");

	CK_POP_REJ(ovstage_population_export_enqueue_to_destination(INST, 1, &d), OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_pop_err("ovstage_population_export_enqueue_to_destination", WHY);

	ck_assert_int_eq(ovstage_population_export_destination_save(INST, 1), OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_pop_err("ovstage_population_export_destination_save", WHY);
	CK_POP_REJ(ovstage_population_export_destination_enqueue_save(INST, 1), OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_pop_err("ovstage_population_export_destination_enqueue_save", WHY);
	ck_assert_int_eq(ovstage_population_export_destination_destroy(INST, 1), OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_pop_err("ovstage_population_export_destination_destroy", WHY);
	CK_POP_REJ(ovstage_population_export_destination_enqueue_destroy(INST, 1), OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_pop_err("ovstage_population_export_destination_enqueue_destroy", WHY);

	memset(&rep, 0xA5, sizeof rep);
	ck_assert_int_eq(ovstage_population_export_to_usd_file(INST, S("snap.usda"), &d, &rep),
			 OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_report_zero(&rep);
	ck_pop_err("ovstage_population_export_to_usd_file", WHY);
	CK_POP_REJ(ovstage_population_export_enqueue_to_usd_file(INST, S("snap.usda"), &d),
		   OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_pop_err("ovstage_population_export_enqueue_to_usd_file", WHY);

	memset(&rep, 0xA5, sizeof rep);
	ck_assert_int_eq(ovstage_population_export_wait_op(INST, 1, OVSTAGE_TIMEOUT_INFINITE, &rep),
			 OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_report_zero(&rep);
	ck_pop_err("ovstage_population_export_wait_op", WHY);
	ck_assert_int_eq(ovstage_population_export_wait_op(NULL, 1, 0, NULL), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_pop_err("ovstage_population_export_wait_op", "stage is NULL");
}
END_TEST

/* ---- error channels ------------------------------------------------------------------------------ */

START_TEST(test_error_channels)
{
	/* A population failure fills both channels; a later population call clears both. */
	CK_POP_REJ(ovstage_population_reset_usd(INST), OVSTAGE_ERROR_NOT_SUPPORTED);
	ck_assert_ptr_nonnull(ovstage_population_get_last_error().ptr);
	ovstage_population_export_desc_t d;
	ck_assert_int_eq(ovstage_population_export_desc_init(&d), OVSTAGE_OK);
	ck_assert_ptr_null(ovstage_population_get_last_error().ptr);
	ck_assert_uint_eq(ovstage_population_get_last_error().length, 0);
	ck_assert_ptr_null(ovstage_get_last_error().ptr);

	/* A non-population call clears only the main channel. */
	CK_POP_REJ(ovstage_population_reset_usd(INST), OVSTAGE_ERROR_NOT_SUPPORTED);
	ovx_string_t dir = ovstage_executable_dir();
	ck_assert_ptr_null(dir.ptr);
	ck_assert_ptr_null(ovstage_get_last_error().ptr);
	{
		char buf[OVS_ERR_MAX + 1];
		copy_str(buf, sizeof buf, ovstage_population_get_last_error());
		ck_assert(strncmp(buf, "ovstage_population_reset_usd: ", 30) == 0);
	}
}
END_TEST

/* The log entry points link from log.c; with the fake runtime down they reject as the spec says. */
START_TEST(test_log_links)
{
	ck_assert_int_eq(ovstage_set_log_callback(OVSTAGE_LOG_INFO, NULL, NULL, NULL), OVSTAGE_ERROR_OP_FAILED);
	ck_main_err("ovstage_set_log_callback", "runtime not bootstrapped");
	ck_assert_int_eq(ovstage_flush_log(0), OVSTAGE_OK);
}
END_TEST

/* ---- suite --------------------------------------------------------------------------------------- */

static Suite *unsupported_suite(void)
{
	Suite *s = suite_create("unsupported");
	TCase *tc = tcase_create("stubs");
	tcase_add_test(tc, test_clone);
	tcase_add_test(tc, test_hierarchy_models);
	tcase_add_test(tc, test_instancing);
	tcase_add_test(tc, test_ovalign);
	tcase_add_test(tc, test_executable_dir);
	tcase_add_test(tc, test_population);
	tcase_add_test(tc, test_export_desc_init);
	tcase_add_test(tc, test_export);
	tcase_add_test(tc, test_error_channels);
	tcase_add_test(tc, test_log_links);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(unsupported_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
