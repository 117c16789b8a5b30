/*
 * check_abi.c — run-time assertions (Check) of the ABI facts of the public headers: status codes,
 * enum values, vtable slot order, struct field order (and exact offsets on 64-bit targets),
 * version macros, the DLPack 1.x compatibility layer, and that the static inline wrappers and
 * builders forward to the right slot / set the right fields. No library is linked.
 */
#include <ovstage/ovstage.h>
#include <ovstage/ovstage_population_export.h>
#include <ovstage/ovalign.h>
#include <ovx/path_dictionary/path_dictionary.h>
#include <ovx/dlpack_compat.h>

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PTR ((size_t)sizeof(void*))
#define LEN(a) (sizeof(a) / sizeof((a)[0]))
#define IS_LP64 (UINTPTR_MAX == UINT64_MAX)

/* Fields listed in spec order must have strictly increasing offsets, all inside the struct. */
static void assert_increasing(const char* type, const size_t* offsets, size_t n, size_t size)
{
    for (size_t i = 1; i < n; ++i)
        ck_assert_msg(offsets[i - 1] < offsets[i], "%s: field %zu (offset %zu) not after field %zu (offset %zu)", type,
                      i, offsets[i], i - 1, offsets[i - 1]);
    ck_assert_msg(n == 0 || offsets[n - 1] < size, "%s: last field outside the struct", type);
    ck_assert_msg(n == 0 || offsets[0] == 0, "%s: first field not at offset 0", type);
}
#define ORDER(T, ...)                                                                                                  \
    do                                                                                                                 \
    {                                                                                                                  \
        const size_t order_[] = { __VA_ARGS__ };                                                                       \
        assert_increasing(#T, order_, LEN(order_), sizeof(T));                                                         \
    } while (0)
#define OFF(T, f) offsetof(T, f)

/* Exact 64-bit layout: pairs of (offset, expected). */
#define AT(T, f, expected) ck_assert_msg(offsetof(T, f) == (size_t)(expected), #T "." #f " at %zu, expected %d", offsetof(T, f), (int)(expected))
#define SIZE(T, expected) ck_assert_msg(sizeof(T) == (size_t)(expected), "sizeof(" #T ") = %zu, expected %d", sizeof(T), (int)(expected))

/* ================================ version and status codes ================================== */

START_TEST(test_version_macros)
{
    ck_assert_int_eq(OVSTAGE_VERSION_MAJOR, 0);
    ck_assert_int_eq(OVSTAGE_VERSION_MINOR, 2);
    ck_assert_int_eq(OVSTAGE_VERSION_PATCH, 1);
}
END_TEST

START_TEST(test_status_codes)
{
    ck_assert_int_eq(OVSTAGE_OK, 0);
    ck_assert_int_eq(OVSTAGE_ERROR_INVALID_ARGUMENT, 1);
    ck_assert_int_eq(OVSTAGE_ERROR_INVALID_HANDLE, 2);
    ck_assert_int_eq(OVSTAGE_ERROR_NOT_FOUND, 3);
    ck_assert_int_eq(OVSTAGE_ERROR_PRIM_NOT_FOUND, 4);
    ck_assert_int_eq(OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION, 5);
    ck_assert_int_eq(OVSTAGE_ERROR_NOT_SUPPORTED, 6);
    ck_assert_int_eq(OVSTAGE_ERROR_QUEUE_FULL, 7);
    ck_assert_int_eq(OVSTAGE_ERROR_END_OF_ITERATION, 8);
    ck_assert_int_eq(OVSTAGE_ERROR_OUT_OF_MEMORY, 9);
    ck_assert_int_eq(OVSTAGE_ERROR_LAYOUT_CHANGED, 10);
    ck_assert_int_eq(OVSTAGE_ERROR_TIMEOUT, 11);
    ck_assert_int_eq(OVSTAGE_ERROR_OP_FAILED, 12);
    ck_assert_int_eq(OVSTAGE_ERROR_OUT_OF_RANGE, 13);
    ck_assert_int_eq(OVSTAGE_ERROR_INTERNAL, 99);
    ck_assert_int_eq(OVX_API_SUCCESS, 0);
    ck_assert_int_eq(OVX_API_ERROR, 1);
}
END_TEST

START_TEST(test_sentinels)
{
    ck_assert_uint_eq(OVX_INVALID_TOKEN, 0);
    ck_assert_uint_eq(OVX_INVALID_PRIMPATH, 0);
    ck_assert_uint_eq(OVX_INVALID_PRIMPATH_LIST, 0);
    ck_assert_uint_eq(OVSTAGE_INVALID_OP_ID, 0);
    ck_assert_uint_eq(OVSTAGE_INVALID_QUERY_HANDLE, 0);
    ck_assert_uint_eq(OVSTAGE_INVALID_READ_HANDLE, 0);
    ck_assert_uint_eq(OVSTAGE_INVALID_MAP_HANDLE, 0);
    ck_assert_uint_eq(OVSTAGE_INVALID_ORDINAL_QUERY_HANDLE, 0);
    ck_assert_uint_eq(OVSTAGE_INVALID_READ_GROUP_ID, 0);
    ck_assert_uint_eq(OVSTAGE_INVALID_QUERY_RESULT_ID, 0);
    ck_assert_uint_eq(OVSTAGE_INVALID_HIERARCHY_HANDLE, 0);
    ck_assert_uint_eq(OVSTAGE_INVALID_HIERARCHY_RESULT_ID, 0);
    ck_assert_int_eq(OVSTAGE_INVALID_HIERARCHY_COMPUTATION_MODEL_ID, 0);
    ck_assert_uint_eq(OVSTAGE_POPULATION_INVALID_OP_ID, 0);
    ck_assert_uint_eq(OVSTAGE_POPULATION_INVALID_USD_REFERENCE_HANDLE, 0);
    ck_assert_uint_eq(OVSTAGE_POPULATION_EXPORT_INVALID_DESTINATION_HANDLE, 0);
    ck_assert_uint_eq(OVSTAGE_TIMEOUT_INFINITE, UINT64_MAX);
    ck_assert_str_eq(OVX_CONFIG_EXECUTABLE_DIR_TOKEN, "${executable_dir}");
    ck_assert_str_eq(OVSTAGE_POPULATION_EXPORT_UNKNOWN_APPLIED_API_SCHEMAS_CUSTOM_DATA_KEY,
                     "ovpopulation:unknownAppliedAPISchemas");
    ck_assert_uint_eq(sizeof(ovstage_ordinal_t), 8);
    ck_assert_uint_eq(sizeof(ovstage_op_id_t), 8);
    ck_assert_uint_eq(sizeof(ovx_token_t), 8);
    ck_assert_uint_eq(sizeof(ovx_primpath_t), 8);
    ck_assert_uint_eq(sizeof(ovx_primpath_list_t), 8);
}
END_TEST

/* ====================================== enum values ========================================= */

START_TEST(test_core_enums)
{
    ck_assert_int_eq(OVSTAGE_FILTER_OP_HAS, 0);
    ck_assert_int_eq(OVSTAGE_FILTER_OP_IN, 1);
    ck_assert_int_eq(OVSTAGE_FILTER_OP_CONTAINS, 2);
    ck_assert_int_eq(OVSTAGE_FILTER_OP_PREFIX, 3);
    ck_assert_int_eq(OVSTAGE_FILTER_OP_LT, 4);
    ck_assert_int_eq(OVSTAGE_FILTER_OP_LE, 5);
    ck_assert_int_eq(OVSTAGE_FILTER_OP_GT, 6);
    ck_assert_int_eq(OVSTAGE_FILTER_OP_GE, 7);

    ck_assert_int_eq(OVSTAGE_PRIM_MODE_UPSERT, 0);
    ck_assert_int_eq(OVSTAGE_PRIM_MODE_INSERT, 1);

    ck_assert_int_eq(OVSTAGE_SCOPE_ALL, 0);
    ck_assert_int_eq(OVSTAGE_SCOPE_INCLUDE, 1);
    ck_assert_int_eq(OVSTAGE_SCOPE_EXCLUDE, 2);

    ck_assert_int_eq(OVSTAGE_SEMANTIC_NONE, 0);
    ck_assert_int_eq(OVSTAGE_SEMANTIC_ASSET_PATH_ID, 1);
    ck_assert_int_eq(OVSTAGE_SEMANTIC_TOKEN_ID, 2);
    ck_assert_int_eq(OVSTAGE_SEMANTIC_PATH_EXPRESSION_STRING, 3);
    ck_assert_int_eq(OVSTAGE_SEMANTIC_RELATIONSHIP_PATH_ID, 4);
    ck_assert_int_eq(OVSTAGE_SEMANTIC_POINT, 5);
    ck_assert_int_eq(OVSTAGE_SEMANTIC_VECTOR, 6);
    ck_assert_int_eq(OVSTAGE_SEMANTIC_NORMAL, 7);
    ck_assert_int_eq(OVSTAGE_SEMANTIC_COLOR, 8);
    ck_assert_int_eq(OVSTAGE_SEMANTIC_QUATERNION, 9);
    ck_assert_int_eq(OVSTAGE_SEMANTIC_MATRIX, 10);
    ck_assert_int_eq(OVSTAGE_SEMANTIC_TEXTURE_COORDINATE, 11);
    ck_assert_int_eq(OVSTAGE_SEMANTIC_CONNECTION_PATH_ID, 12);
    ck_assert_int_eq(OVSTAGE_SEMANTIC_STRING, 13);
    ck_assert_int_eq(OVSTAGE_SEMANTIC_TIME_CODE, 14);
    ck_assert_int_eq(OVSTAGE_SEMANTIC_FRAME, 15);
}
END_TEST

START_TEST(test_config_log_hierarchy_enums)
{
    ck_assert_int_eq(OVSTAGE_CONFIG_KEY_TYPE_BOOL, 0);
    ck_assert_int_eq(OVSTAGE_CONFIG_KEY_TYPE_INT64, 1);
    ck_assert_int_eq(OVSTAGE_CONFIG_KEY_TYPE_UINT64, 2);
    ck_assert_int_eq(OVSTAGE_CONFIG_KEY_TYPE_DOUBLE, 3);
    ck_assert_int_eq(OVSTAGE_CONFIG_KEY_TYPE_STRING, 4);
    ck_assert_int_eq(OVSTAGE_CONFIG_KEY_TYPE_BLOB, 5);
    ck_assert_int_eq(OVSTAGE_CONFIG_KEY_TYPE_COUNT, 6);
    ck_assert_int_eq(OVSTAGE_CONFIG_BOOL_COUNT, 0);
    ck_assert_int_eq(OVSTAGE_CONFIG_INT64_COUNT, 0);
    ck_assert_int_eq(OVSTAGE_CONFIG_RUNTIME_DEFAULT_HIERARCHY_COMPUTATION_MODEL, 0);
    ck_assert_int_eq(OVSTAGE_CONFIG_UINT64_COUNT, 1);
    ck_assert_int_eq(OVSTAGE_CONFIG_DOUBLE_COUNT, 0);
    ck_assert_int_eq(OVSTAGE_CONFIG_BINARY_PACKAGE_ROOT_PATH, 0);
    ck_assert_int_eq(OVSTAGE_CONFIG_STRING_COUNT, 1);
    ck_assert_int_eq(OVSTAGE_CONFIG_BLOB_COUNT, 0);

    ck_assert_int_eq(OVSTAGE_LOG_VERBOSE, -2);
    ck_assert_int_eq(OVSTAGE_LOG_INFO, -1);
    ck_assert_int_eq(OVSTAGE_LOG_WARNING, 0);
    ck_assert_int_eq(OVSTAGE_LOG_ERROR, 1);
    ck_assert_int_eq(OVSTAGE_LOG_NONE, 3);

    ck_assert_int_eq(OVSTAGE_HIERARCHY_COMPUTATION_MODEL_INVALID, 0);
    ck_assert_int_eq(OVSTAGE_HIERARCHY_COMPUTATION_MODEL_CPU_INCREMENTAL, 1);
    ck_assert_int_eq(OVSTAGE_HIERARCHY_COMPUTATION_MODEL_GPU_INCREMENTAL, 2);
    ck_assert_int_eq(OVSTAGE_HIERARCHY_COMPUTATION_MODEL_GPU_GLOBAL, 3);
    ck_assert_int_eq(OVSTAGE_HIERARCHY_COMPUTATION_MODEL_RUNTIME_DEFAULT, 4);
    ck_assert_int_eq(OVSTAGE_HIERARCHY_COMPUTATION_MODEL_DEFAULT_CPU, 1);
    ck_assert_int_eq(OVSTAGE_HIERARCHY_COMPUTATION_MODEL_DEFAULT_GPU, 3);

    ck_assert_int_eq(OVSTAGE_HIERARCHY_PARENT, 0);
    ck_assert_int_eq(OVSTAGE_HIERARCHY_CHILDREN, 1);
    ck_assert_int_eq(OVSTAGE_HIERARCHY_SIBLINGS, 2);

    ck_assert_int_eq(OVALIGN_DEVICE_CPU, 0);
    ck_assert_int_eq(OVALIGN_DEVICE_CUDA, 1);
}
END_TEST

START_TEST(test_population_enums)
{
    ck_assert_int_eq(OVSTAGE_POPULATION_DOMAIN_NONE, 0);
    ck_assert_int_eq(OVSTAGE_POPULATION_DOMAIN_RENDERING, 1);
    ck_assert_int_eq(OVSTAGE_POPULATION_DOMAIN_PHYSICS, 2);
    ck_assert_int_eq(OVSTAGE_POPULATION_DOMAIN_ALL, 3);

    const int prim_kinds[] = {
        OVSTAGE_POPULATION_PRIM_PREDICATE_NONE, OVSTAGE_POPULATION_PRIM_PREDICATE_ALL,
        OVSTAGE_POPULATION_PRIM_PREDICATE_AND, OVSTAGE_POPULATION_PRIM_PREDICATE_OR,
        OVSTAGE_POPULATION_PRIM_PREDICATE_NOT, OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_PARENT,
        OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_ANCESTOR, OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_PROPERTY,
        OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_TYPE, OVSTAGE_POPULATION_PRIM_PREDICATE_IS_A_TYPE,
        OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_SCHEMA, OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_APPLIED_SCHEMA,
        OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_APPLIED_SCHEMA_IN_NAMESPACE, OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_PATH,
        OVSTAGE_POPULATION_PRIM_PREDICATE_IS_UNDER_PATH, OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_KIND,
        OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_PURPOSE, OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_METADATA,
    };
    ck_assert_uint_eq(LEN(prim_kinds), 18);
    for (size_t i = 0; i < LEN(prim_kinds); ++i)
        ck_assert_int_eq(prim_kinds[i], (int)i);

    const int property_kinds[] = {
        OVSTAGE_POPULATION_PROPERTY_PREDICATE_NONE, OVSTAGE_POPULATION_PROPERTY_PREDICATE_ALL,
        OVSTAGE_POPULATION_PROPERTY_PREDICATE_AND, OVSTAGE_POPULATION_PROPERTY_PREDICATE_OR,
        OVSTAGE_POPULATION_PROPERTY_PREDICATE_NOT, OVSTAGE_POPULATION_PROPERTY_PREDICATE_DECLARED_BY_SCHEMA,
        OVSTAGE_POPULATION_PROPERTY_PREDICATE_HAS_NAME, OVSTAGE_POPULATION_PROPERTY_PREDICATE_IN_NAMESPACE,
        OVSTAGE_POPULATION_PROPERTY_PREDICATE_HAS_METADATA, OVSTAGE_POPULATION_PROPERTY_PREDICATE_IS_ATTRIBUTE,
        OVSTAGE_POPULATION_PROPERTY_PREDICATE_IS_RELATIONSHIP, OVSTAGE_POPULATION_PROPERTY_PREDICATE_IS_CUSTOM,
        OVSTAGE_POPULATION_PROPERTY_PREDICATE_IS_AUTHORED,
    };
    ck_assert_uint_eq(LEN(property_kinds), 13);
    for (size_t i = 0; i < LEN(property_kinds); ++i)
        ck_assert_int_eq(property_kinds[i], (int)i);
}
END_TEST

START_TEST(test_export_enums)
{
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_SELECTION_EXPLICIT_PREDICATE, 0);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_SELECTION_CHANGED_PROPERTIES_SINCE_ORDINAL, 1);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_LAYER_MODE_OVER, 0);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_LAYER_MODE_DEF, 1);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_PATH_MATCH_EXACT, 0);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_PATH_MATCH_PREFIX, 1);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_NAME_MATCH_EXACT, 0);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_NAME_MATCH_GLOB, 1);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_TRANSFORM_USD_XFORM_OP, 0);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_TRANSFORM_NONE, 1);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_TRANSFORM_USD_MATRIX_OP, 2);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_UNKNOWN_METADATA_DROP, 0);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_UNKNOWN_METADATA_PRESERVE, 1);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_UNKNOWN_METADATA_FAIL, 2);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_SOURCE_API_SCHEMAS_EXPLICIT_ONLY, 0);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_SOURCE_API_SCHEMAS_APPLY_RECORDED, 1);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_PROJECTION_EXPLICIT_RULES, 0);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_PROJECTION_SCHEMA_DECLARED, 1);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_RULE_NONE, 0);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_RULE_EXPORT_DEFAULT_VALUE, 1);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_RULE_DERIVED_ALLOWED, 2);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_RULE_INFER_CUSTOM_TYPE, 8);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_RULE_REQUIRED, 16);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_PROPERTY_INVALID, 0);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_PROPERTY_RELATIONSHIP, 1);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_PROPERTY_CONNECTION, 2);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_PROPERTY_MATERIAL_BINDING, 3);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_METADATA_PRIM, 0);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_METADATA_LAYER_CUSTOM_DATA, 1);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_METADATA_REFERENCES, 2);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_METADATA_LAYER_STANDARD, 3);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_DESTINATION_EMPTY, 0);
    ck_assert_int_eq(OVSTAGE_POPULATION_EXPORT_DESTINATION_OPEN_EXISTING, 1);
}
END_TEST

/* ===================================== vtable slot order ==================================== */

START_TEST(test_ovstage_vtable_slots)
{
    const size_t slots[] = {
        OFF(ovstage_vtable_t, wait_op),
        OFF(ovstage_vtable_t, release_op),
        OFF(ovstage_vtable_t, advance_write_floor),
        OFF(ovstage_vtable_t, get_oldest_preserved_ordinal),
        OFF(ovstage_vtable_t, get_attribute_write_floor),
        OFF(ovstage_vtable_t, fetch_ordinal),
        OFF(ovstage_vtable_t, release_ordinal_query),
        OFF(ovstage_vtable_t, query),
        OFF(ovstage_vtable_t, query_from_path_list),
        OFF(ovstage_vtable_t, fetch_query_result),
        OFF(ovstage_vtable_t, release_query_result),
        OFF(ovstage_vtable_t, release_query),
        OFF(ovstage_vtable_t, read_attributes),
        OFF(ovstage_vtable_t, fetch_read_next),
        OFF(ovstage_vtable_t, release_group),
        OFF(ovstage_vtable_t, release_read),
        OFF(ovstage_vtable_t, write_attribute),
        OFF(ovstage_vtable_t, map_attribute),
        OFF(ovstage_vtable_t, fetch_map_next),
        OFF(ovstage_vtable_t, unmap_group),
        OFF(ovstage_vtable_t, unmap_attribute),
        OFF(ovstage_vtable_t, delete_attributes),
        OFF(ovstage_vtable_t, get_version),
        OFF(ovstage_vtable_t, get_error_string),
        OFF(ovstage_vtable_t, get_last_op_error),
        OFF(ovstage_vtable_t, get_path_dictionary),
        OFF(ovstage_vtable_t, write_attributes),
        OFF(ovstage_vtable_t, query_extension),
    };
    ck_assert_uint_eq(LEN(slots), 28);
    for (size_t i = 0; i < LEN(slots); ++i)
        ck_assert_msg(slots[i] == i * PTR, "ovstage_vtable_t slot %zu at offset %zu, expected %zu", i + 1, slots[i],
                      i * PTR);
    ck_assert_uint_eq(sizeof(ovstage_vtable_t), 28 * PTR);
}
END_TEST

START_TEST(test_path_dictionary_vtable_slots)
{
    const size_t slots[] = {
        OFF(path_dictionary_vtable_t, create_tokens_from_strings),
        OFF(path_dictionary_vtable_t, create_paths_from_tokens),
        OFF(path_dictionary_vtable_t, create_paths_from_strings),
        OFF(path_dictionary_vtable_t, create_path_list_from_paths),
        OFF(path_dictionary_vtable_t, create_path_list_from_strings),
        OFF(path_dictionary_vtable_t, add_path_list_reference),
        OFF(path_dictionary_vtable_t, release_path_list_reference),
        OFF(path_dictionary_vtable_t, get_strings_from_tokens),
        OFF(path_dictionary_vtable_t, get_tokens_from_paths),
        OFF(path_dictionary_vtable_t, get_num_paths_from_path_list),
        OFF(path_dictionary_vtable_t, get_paths_from_path_list),
        OFF(path_dictionary_vtable_t, release_error),
    };
    ck_assert_uint_eq(LEN(slots), 12);
    for (size_t i = 0; i < LEN(slots); ++i)
        ck_assert_msg(slots[i] == i * PTR, "path_dictionary_vtable_t slot %zu at offset %zu, expected %zu", i + 1,
                      slots[i], i * PTR);
    ck_assert_uint_eq(sizeof(path_dictionary_vtable_t), 12 * PTR);
}
END_TEST

/* ================================ struct field order: ovx / core ============================ */

START_TEST(test_ovx_struct_order)
{
    ORDER(ovx_string_t, OFF(ovx_string_t, ptr), OFF(ovx_string_t, length));
    ORDER(ovx_string_or_token_t, OFF(ovx_string_or_token_t, token), OFF(ovx_string_or_token_t, string));
    ORDER(ovx_string_or_prim_path_t, OFF(ovx_string_or_prim_path_t, path), OFF(ovx_string_or_prim_path_t, string));
    ORDER(ovx_api_result_t, OFF(ovx_api_result_t, status), OFF(ovx_api_result_t, error));
    ORDER(path_dictionary_instance_t, OFF(path_dictionary_instance_t, vtable),
          OFF(path_dictionary_instance_t, context));
    if (IS_LP64)
    {
        SIZE(ovx_string_t, 16);
        AT(ovx_string_or_token_t, string, 8);
        SIZE(ovx_string_or_token_t, 24);
        AT(ovx_api_result_t, error, 8);
        SIZE(path_dictionary_instance_t, 16);
    }
}
END_TEST

START_TEST(test_core_struct_order)
{
    ORDER(ovstage_cuda_sync_t, OFF(ovstage_cuda_sync_t, stream), OFF(ovstage_cuda_sync_t, wait_event));
    ORDER(ovstage_enqueue_result_t, OFF(ovstage_enqueue_result_t, status), OFF(ovstage_enqueue_result_t, op_index));
    ORDER(ovstage_op_wait_result_t, OFF(ovstage_op_wait_result_t, error_op_ids),
          OFF(ovstage_op_wait_result_t, error_op_id_count), OFF(ovstage_op_wait_result_t, lowest_pending_op_id));
    ORDER(ovstage_data_t, OFF(ovstage_data_t, tensors), OFF(ovstage_data_t, tensor_count), OFF(ovstage_data_t, count),
          OFF(ovstage_data_t, index_map), OFF(ovstage_data_t, mask), OFF(ovstage_data_t, cuda_sync));
    ORDER(ovstage_prim_group_t, OFF(ovstage_prim_group_t, list), OFF(ovstage_prim_group_t, offset),
          OFF(ovstage_prim_group_t, count), OFF(ovstage_prim_group_t, index_map));
    ORDER(ovstage_attribute_meta_t, OFF(ovstage_attribute_meta_t, attribute_write_floor_ordinal),
          OFF(ovstage_attribute_meta_t, layout_generation));
    ORDER(ovstage_ordinal_range_t, OFF(ovstage_ordinal_range_t, start_ordinal),
          OFF(ovstage_ordinal_range_t, end_ordinal), OFF(ovstage_ordinal_range_t, has_start_ordinal));
    ORDER(ovstage_read_group_t, OFF(ovstage_read_group_t, read_group_id), OFF(ovstage_read_group_t, attribute),
          OFF(ovstage_read_group_t, ordinal), OFF(ovstage_read_group_t, is_delete), OFF(ovstage_read_group_t, is_array),
          OFF(ovstage_read_group_t, semantic), OFF(ovstage_read_group_t, prims), OFF(ovstage_read_group_t, data),
          OFF(ovstage_read_group_t, meta));
    ORDER(ovstage_map_group_t, OFF(ovstage_map_group_t, prims), OFF(ovstage_map_group_t, data),
          OFF(ovstage_map_group_t, meta));
    ORDER(ovstage_map_desc_t, OFF(ovstage_map_desc_t, attribute), OFF(ovstage_map_desc_t, dtype),
          OFF(ovstage_map_desc_t, semantic), OFF(ovstage_map_desc_t, prim_mode));
    ORDER(ovstage_predicate_t, OFF(ovstage_predicate_t, attribute), OFF(ovstage_predicate_t, op),
          OFF(ovstage_predicate_t, values), OFF(ovstage_predicate_t, value_count));
    ORDER(ovstage_filter_t, OFF(ovstage_filter_t, predicates), OFF(ovstage_filter_t, count));
    ORDER(ovstage_query_result_t, OFF(ovstage_query_result_t, query_result_id), OFF(ovstage_query_result_t, attributes),
          OFF(ovstage_query_result_t, attribute_count), OFF(ovstage_query_result_t, all_handle),
          OFF(ovstage_query_result_t, total_prim_count));
    ORDER(ovstage_write_floor_desc_t, OFF(ovstage_write_floor_desc_t, ordinal), OFF(ovstage_write_floor_desc_t, scope),
          OFF(ovstage_write_floor_desc_t, attributes), OFF(ovstage_write_floor_desc_t, attribute_count));
    ORDER(ovstage_write_data_t, OFF(ovstage_write_data_t, tensors), OFF(ovstage_write_data_t, managed_tensors),
          OFF(ovstage_write_data_t, tensor_count), OFF(ovstage_write_data_t, count),
          OFF(ovstage_write_data_t, index_map), OFF(ovstage_write_data_t, mask), OFF(ovstage_write_data_t, cuda_sync),
          OFF(ovstage_write_data_t, semantic), OFF(ovstage_write_data_t, is_array));
    ORDER(ovstage_attribute_write_t, OFF(ovstage_attribute_write_t, attribute), OFF(ovstage_attribute_write_t, data));
    ORDER(ovstage_instance_t, OFF(ovstage_instance_t, vtable), OFF(ovstage_instance_t, context));
}
END_TEST

/* Exact offsets on 64-bit targets: what other libraries compiled against the reference headers see. */
START_TEST(test_core_struct_layout_lp64)
{
    if (!IS_LP64)
        return;
    SIZE(ovstage_cuda_sync_t, 16);
    AT(ovstage_enqueue_result_t, op_index, 8);
    SIZE(ovstage_enqueue_result_t, 16);
    SIZE(ovstage_op_wait_result_t, 24);

    AT(ovstage_data_t, tensor_count, 8);
    AT(ovstage_data_t, count, 12);
    AT(ovstage_data_t, index_map, 16);
    AT(ovstage_data_t, mask, 24);
    AT(ovstage_data_t, cuda_sync, 32);
    SIZE(ovstage_data_t, 48);

    AT(ovstage_prim_group_t, offset, 8);
    AT(ovstage_prim_group_t, count, 12);
    AT(ovstage_prim_group_t, index_map, 16);
    SIZE(ovstage_prim_group_t, 24);

    SIZE(ovstage_attribute_meta_t, 16);
    AT(ovstage_ordinal_range_t, has_start_ordinal, 16);
    SIZE(ovstage_ordinal_range_t, 24);

    AT(ovstage_read_group_t, attribute, 8);
    AT(ovstage_read_group_t, ordinal, 16);
    AT(ovstage_read_group_t, is_delete, 24);
    AT(ovstage_read_group_t, is_array, 25);
    AT(ovstage_read_group_t, semantic, 28);
    AT(ovstage_read_group_t, prims, 32);
    AT(ovstage_read_group_t, data, 56);
    AT(ovstage_read_group_t, meta, 104);
    SIZE(ovstage_read_group_t, 120);

    AT(ovstage_map_group_t, data, 24);
    AT(ovstage_map_group_t, meta, 72);
    SIZE(ovstage_map_group_t, 88);

    AT(ovstage_map_desc_t, dtype, 24);
    AT(ovstage_map_desc_t, semantic, 28);
    AT(ovstage_map_desc_t, prim_mode, 32);
    SIZE(ovstage_map_desc_t, 40);

    AT(ovstage_predicate_t, op, 24);
    AT(ovstage_predicate_t, values, 32);
    AT(ovstage_predicate_t, value_count, 40);
    SIZE(ovstage_predicate_t, 48);
    SIZE(ovstage_filter_t, 16);
    SIZE(ovstage_query_result_t, 40);
    AT(ovstage_write_floor_desc_t, scope, 8);
    AT(ovstage_write_floor_desc_t, attributes, 16);
    SIZE(ovstage_write_floor_desc_t, 32);

    AT(ovstage_write_data_t, managed_tensors, 8);
    AT(ovstage_write_data_t, tensor_count, 16);
    AT(ovstage_write_data_t, count, 20);
    AT(ovstage_write_data_t, index_map, 24);
    AT(ovstage_write_data_t, mask, 32);
    AT(ovstage_write_data_t, cuda_sync, 40);
    AT(ovstage_write_data_t, semantic, 56);
    AT(ovstage_write_data_t, is_array, 60); /* in the tail padding after semantic */
    SIZE(ovstage_write_data_t, 64);

    AT(ovstage_attribute_write_t, data, 24);
    SIZE(ovstage_attribute_write_t, 88);
    SIZE(ovstage_instance_t, 16);

    AT(ovstage_config_entry_t, key, 4);
    AT(ovstage_config_entry_t, value, 8);
    SIZE(ovstage_config_entry_t, 24);
}
END_TEST

/* ============================ struct field order: types / extras ============================ */

START_TEST(test_types_struct_order)
{
    ORDER(ovstage_instance_desc_t, OFF(ovstage_instance_desc_t, name));
    ORDER(ovstage_config_entry_t, OFF(ovstage_config_entry_t, key_type), OFF(ovstage_config_entry_t, key),
          OFF(ovstage_config_entry_t, value));
    ORDER(ovstage_config_t, OFF(ovstage_config_t, entries), OFF(ovstage_config_t, entry_count));
    ORDER(ovstage_hierarchy_item_t, OFF(ovstage_hierarchy_item_t, status), OFF(ovstage_hierarchy_item_t, path_offset),
          OFF(ovstage_hierarchy_item_t, path_count));
    ORDER(ovstage_hierarchy_result_t, OFF(ovstage_hierarchy_result_t, hierarchy_result_id),
          OFF(ovstage_hierarchy_result_t, ordinal), OFF(ovstage_hierarchy_result_t, items),
          OFF(ovstage_hierarchy_result_t, input_count), OFF(ovstage_hierarchy_result_t, paths),
          OFF(ovstage_hierarchy_result_t, path_count));
    ORDER(ovstage_hierarchy_computation_model_desc_t, OFF(ovstage_hierarchy_computation_model_desc_t, model_id),
          OFF(ovstage_hierarchy_computation_model_desc_t, name),
          OFF(ovstage_hierarchy_computation_model_desc_t, description));

    ORDER(ovalign_request_t, OFF(ovalign_request_t, groups), OFF(ovalign_request_t, group_count),
          OFF(ovalign_request_t, attributes), OFF(ovalign_request_t, attr_count), OFF(ovalign_request_t, prim_list),
          OFF(ovalign_request_t, prim_order), OFF(ovalign_request_t, prim_order_count), OFF(ovalign_request_t, device));
    ORDER(ovalign_attr_result_t, OFF(ovalign_attr_result_t, groups), OFF(ovalign_attr_result_t, group_count));
    ORDER(ovalign_result_t, OFF(ovalign_result_t, attrs), OFF(ovalign_result_t, attr_count),
          OFF(ovalign_result_t, group_count), OFF(ovalign_result_t, skipped));
}
END_TEST

START_TEST(test_population_struct_order)
{
    ORDER(ovstage_population_prim_predicate_t, OFF(ovstage_population_prim_predicate_t, kind),
          OFF(ovstage_population_prim_predicate_t, values), OFF(ovstage_population_prim_predicate_t, value_count));
    ORDER(ovstage_population_property_predicate_t, OFF(ovstage_population_property_predicate_t, kind),
          OFF(ovstage_population_property_predicate_t, values),
          OFF(ovstage_population_property_predicate_t, value_count));
    ORDER(ovstage_population_selector_t, OFF(ovstage_population_selector_t, prim_predicate),
          OFF(ovstage_population_selector_t, property_predicate),
          OFF(ovstage_population_selector_t, prim_metadata_paths),
          OFF(ovstage_population_selector_t, prim_metadata_path_count),
          OFF(ovstage_population_selector_t, property_metadata_paths),
          OFF(ovstage_population_selector_t, property_metadata_path_count));
    ORDER(ovstage_population_desc_t, OFF(ovstage_population_desc_t, domains), OFF(ovstage_population_desc_t, selectors),
          OFF(ovstage_population_desc_t, selector_count), OFF(ovstage_population_desc_t, stage_metadata_paths),
          OFF(ovstage_population_desc_t, stage_metadata_path_count));
    ORDER(ovstage_population_enqueue_result_t, OFF(ovstage_population_enqueue_result_t, status),
          OFF(ovstage_population_enqueue_result_t, op_index));
    ORDER(ovstage_population_op_wait_result_t, OFF(ovstage_population_op_wait_result_t, error_op_ids),
          OFF(ovstage_population_op_wait_result_t, error_op_id_count),
          OFF(ovstage_population_op_wait_result_t, lowest_pending_op_id));
    if (IS_LP64)
    {
        SIZE(ovstage_population_prim_predicate_t, 24);
        SIZE(ovstage_population_selector_t, 80);
        SIZE(ovstage_population_desc_t, 40);
    }
}
END_TEST

START_TEST(test_export_struct_order)
{
    typedef ovstage_population_export_attribute_rule_t AR;
    ORDER(AR, OFF(AR, path), OFF(AR, path_match), OFF(AR, source_attribute_name), OFF(AR, source_attribute_name_match),
          OFF(AR, destination_attribute_name), OFF(AR, usd_type_name), OFF(AR, required_schema_name), OFF(AR, flags));
    typedef ovstage_population_export_prim_rule_t PR;
    ORDER(PR, OFF(PR, path), OFF(PR, path_match), OFF(PR, usd_type_name), OFF(PR, unknown_type_metadata_key));
    typedef ovstage_population_export_api_schema_rule_t SR;
    ORDER(SR, OFF(SR, path), OFF(SR, path_match), OFF(SR, schema_name), OFF(SR, instance_name), OFF(SR, flags));
    typedef ovstage_population_export_property_edge_rule_t ER;
    ORDER(ER, OFF(ER, path), OFF(ER, path_match), OFF(ER, source_property_name), OFF(ER, destination_property_name),
          OFF(ER, usd_type_name), OFF(ER, property_kind), OFF(ER, flags));
    typedef ovstage_population_export_metadata_rule_t MR;
    ORDER(MR, OFF(MR, path), OFF(MR, path_match), OFF(MR, source_metadata_name), OFF(MR, destination_metadata_name),
          OFF(MR, metadata_kind), OFF(MR, flags));
    typedef ovstage_population_export_desc_t D;
    ORDER(D, OFF(D, struct_size), OFF(D, source_api_schema_policy), OFF(D, projection), OFF(D, ordinal),
          OFF(D, since_ordinal), OFF(D, selection), OFF(D, layer_mode), OFF(D, transform_policy),
          OFF(D, unknown_metadata_policy), OFF(D, prim_predicate), OFF(D, property_predicate), OFF(D, prim_rules),
          OFF(D, prim_rule_count), OFF(D, api_schema_rules), OFF(D, api_schema_rule_count), OFF(D, attribute_rules),
          OFF(D, attribute_rule_count), OFF(D, property_rules), OFF(D, property_rule_count), OFF(D, metadata_rules),
          OFF(D, metadata_rule_count));
    typedef ovstage_population_export_report_t R;
    ORDER(R, OFF(R, prims_examined), OFF(R, prims_exported), OFF(R, prims_skipped), OFF(R, attributes_examined),
          OFF(R, attributes_exported), OFF(R, attributes_skipped), OFF(R, attributes_unsupported),
          OFF(R, api_schemas_examined), OFF(R, api_schemas_applied), OFF(R, api_schemas_skipped),
          OFF(R, custom_attributes_inferred), OFF(R, unknown_metadata_preserved), OFF(R, transforms_examined),
          OFF(R, transforms_exported), OFF(R, property_edges_examined), OFF(R, property_edges_exported),
          OFF(R, property_edges_skipped), OFF(R, property_edges_unsupported), OFF(R, metadata_examined),
          OFF(R, metadata_exported), OFF(R, metadata_skipped), OFF(R, metadata_unsupported),
          OFF(R, source_states_unavailable));
    ck_assert_uint_eq(sizeof(R), 23 * sizeof(size_t));
}
END_TEST

/* ===================================== DLPack compat ======================================== */

START_TEST(test_dlpack_compat)
{
    ck_assert_int_eq(DLPACK_MAJOR_VERSION, 1);
    ck_assert_int_ge(DLPACK_MINOR_VERSION, 1);
    ck_assert_uint_eq(DLPACK_FLAG_BITMASK_READ_ONLY, 1);
    ck_assert_uint_eq(DLPACK_FLAG_BITMASK_IS_COPIED, 2);
    ck_assert_uint_eq(DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, 4);

    ck_assert_int_eq(kDLInt, 0);
    ck_assert_int_eq(kDLUInt, 1);
    ck_assert_int_eq(kDLFloat, 2);
    ck_assert_int_eq(kDLOpaqueHandle, 3);
    ck_assert_int_eq(kDLBfloat, 4);
    ck_assert_int_eq(kDLComplex, 5);
    ck_assert_int_eq(kDLBool, 6);
    const int fp_codes[] = { kDLFloat8_e3m4,     kDLFloat8_e4m3,   kDLFloat8_e4m3b11fnuz, kDLFloat8_e4m3fn,
                             kDLFloat8_e4m3fnuz, kDLFloat8_e5m2,   kDLFloat8_e5m2fnuz,    kDLFloat8_e8m0fnu,
                             kDLFloat6_e2m3fn,   kDLFloat6_e3m2fn, kDLFloat4_e2m1fn };
    for (size_t i = 0; i < LEN(fp_codes); ++i)
        ck_assert_int_eq(fp_codes[i], (int)(7 + i));

    ck_assert_int_eq(kDLCPU, 1);
    ck_assert_int_eq(kDLCUDA, 2);
    ck_assert_int_eq(kDLCUDAHost, 3);
    ck_assert_int_eq(kDLOpenCL, 4);
    ck_assert_int_eq(kDLVulkan, 7);
    ck_assert_int_eq(kDLMetal, 8);
    ck_assert_int_eq(kDLVPI, 9);
    ck_assert_int_eq(kDLROCM, 10);
    ck_assert_int_eq(kDLROCMHost, 11);
    ck_assert_int_eq(kDLExtDev, 12);
    ck_assert_int_eq(kDLCUDAManaged, 13);
    ck_assert_int_eq(kDLOneAPI, 14);
    ck_assert_int_eq(kDLWebGPU, 15);
    ck_assert_int_eq(kDLHexagon, 16);
    ck_assert_int_eq(kDLMAIA, 17);
    ck_assert_int_eq(kDLTrn, 18);

    ORDER(DLDataType, OFF(DLDataType, code), OFF(DLDataType, bits), OFF(DLDataType, lanes));
    ORDER(DLDevice, OFF(DLDevice, device_type), OFF(DLDevice, device_id));
    ORDER(DLTensor, OFF(DLTensor, data), OFF(DLTensor, device), OFF(DLTensor, ndim), OFF(DLTensor, dtype),
          OFF(DLTensor, shape), OFF(DLTensor, strides), OFF(DLTensor, byte_offset));
    ORDER(DLPackVersion, OFF(DLPackVersion, major), OFF(DLPackVersion, minor));
    ORDER(DLManagedTensorVersioned, OFF(DLManagedTensorVersioned, version), OFF(DLManagedTensorVersioned, manager_ctx),
          OFF(DLManagedTensorVersioned, deleter), OFF(DLManagedTensorVersioned, flags),
          OFF(DLManagedTensorVersioned, dl_tensor));
    ck_assert_uint_eq(sizeof(((DLTensor*)0)->ndim), 4);
    ck_assert_uint_eq(sizeof(((DLDevice*)0)->device_id), 4);
    ck_assert_uint_eq(sizeof(((DLDataType*)0)->lanes), 2);
    if (IS_LP64)
    {
        SIZE(DLDataType, 4);
        SIZE(DLDevice, 8);
        AT(DLTensor, device, 8);
        AT(DLTensor, ndim, 16);
        AT(DLTensor, dtype, 20);
        AT(DLTensor, shape, 24);
        AT(DLTensor, strides, 32);
        AT(DLTensor, byte_offset, 40);
        SIZE(DLTensor, 48);
        AT(DLPackVersion, minor, 4);
        SIZE(DLPackVersion, 8);
        AT(DLManagedTensorVersioned, manager_ctx, 8);
        AT(DLManagedTensorVersioned, deleter, 16);
        AT(DLManagedTensorVersioned, flags, 24);
        AT(DLManagedTensorVersioned, dl_tensor, 32);
        SIZE(DLManagedTensorVersioned, 80);
    }
}
END_TEST

/* A managed tensor built with the compat types hands itself to its deleter. */
static int g_deleted;
static void count_delete(DLManagedTensorVersioned* self)
{
    g_deleted += (self != NULL && self->manager_ctx == &g_deleted) ? 1 : 100;
}

START_TEST(test_dlpack_managed_deleter)
{
    float v[2] = { 1.0f, 2.0f };
    int64_t shape[1] = { 2 };
    DLManagedTensorVersioned mt;
    memset(&mt, 0, sizeof mt);
    mt.version.major = DLPACK_MAJOR_VERSION;
    mt.version.minor = DLPACK_MINOR_VERSION;
    mt.manager_ctx = &g_deleted;
    mt.deleter = count_delete;
    mt.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
    mt.dl_tensor.data = v;
    mt.dl_tensor.device.device_type = kDLCPU;
    mt.dl_tensor.ndim = 1;
    mt.dl_tensor.dtype.code = kDLFloat;
    mt.dl_tensor.dtype.bits = 32;
    mt.dl_tensor.dtype.lanes = 1;
    mt.dl_tensor.shape = shape;
    g_deleted = 0;
    mt.deleter(&mt);
    ck_assert_int_eq(g_deleted, 1);
}
END_TEST

/* ================================ inline helpers and builders =============================== */

START_TEST(test_ovx_string_helpers)
{
    const ovx_string_t s = literal_to_ovx_string("temperature");
    ck_assert_uint_eq(s.length, 11);
    ck_assert_int_eq(memcmp(s.ptr, "temperature", 11), 0);
    const ovx_string_t empty_literal = literal_to_ovx_string("");
    const ovx_string_t null_view = { NULL, 0 };
    const ovx_string_t bad_view = { NULL, 3 };
    ck_assert(is_ovx_string_empty(NULL));
    ck_assert(is_ovx_string_empty(&empty_literal));
    ck_assert(is_ovx_string_empty(&null_view));
    ck_assert(is_ovx_string_empty(&bad_view));
    ck_assert(!is_ovx_string_empty(&s));
}
END_TEST

START_TEST(test_config_builders)
{
    const ovx_string_t root = literal_to_ovx_string(OVX_CONFIG_EXECUTABLE_DIR_TOKEN "/..");
    ovstage_config_entry_t e = ovstage_config_entry_binary_package_root_path(root);
    ck_assert_int_eq(e.key_type, OVSTAGE_CONFIG_KEY_TYPE_STRING);
    ck_assert_int_eq(e.key.string_key, OVSTAGE_CONFIG_BINARY_PACKAGE_ROOT_PATH);
    ck_assert_ptr_eq(e.value.string_value.ptr, root.ptr);
    ck_assert_uint_eq(e.value.string_value.length, root.length);

    e = ovstage_config_entry_runtime_default_hierarchy_computation_model(
        OVSTAGE_HIERARCHY_COMPUTATION_MODEL_GPU_INCREMENTAL);
    ck_assert_int_eq(e.key_type, OVSTAGE_CONFIG_KEY_TYPE_UINT64);
    ck_assert_int_eq(e.key.uint64_key, OVSTAGE_CONFIG_RUNTIME_DEFAULT_HIERARCHY_COMPUTATION_MODEL);
    ck_assert_uint_eq(e.value.uint_value, 2);
    ck_assert_uint_eq(e.value.blob_value.size, 0); /* the rest of the union is cleared */

    e = ovstage_config_entry_uint64(OVSTAGE_CONFIG_RUNTIME_DEFAULT_HIERARCHY_COMPUTATION_MODEL, UINT64_MAX);
    ck_assert_uint_eq(e.value.uint_value, UINT64_MAX);
    e = ovstage_config_entry_string(OVSTAGE_CONFIG_BINARY_PACKAGE_ROOT_PATH, root);
    ck_assert_int_eq(e.key_type, OVSTAGE_CONFIG_KEY_TYPE_STRING);
}
END_TEST

START_TEST(test_predicate_constructors)
{
    const ovx_string_t names[2] = { literal_to_ovx_string("Mesh"), literal_to_ovx_string("Cube") };
    ovstage_population_prim_predicate_t sub[2];
    sub[0] = ovstage_population_prim_predicate_has_type(names, 2);
    sub[1] = ovstage_population_prim_predicate_all();
    const ovstage_population_property_predicate_t any = ovstage_population_property_predicate_is_attribute();

    struct
    {
        ovstage_population_prim_predicate_t p;
        int kind;
        size_t count;
        const void* values;
    } prim[] = {
        { ovstage_population_prim_predicate_none(), OVSTAGE_POPULATION_PRIM_PREDICATE_NONE, 0, NULL },
        { ovstage_population_prim_predicate_all(), OVSTAGE_POPULATION_PRIM_PREDICATE_ALL, 0, NULL },
        { ovstage_population_prim_predicate_and(sub, 2), OVSTAGE_POPULATION_PRIM_PREDICATE_AND, 2, sub },
        { ovstage_population_prim_predicate_or(sub, 2), OVSTAGE_POPULATION_PRIM_PREDICATE_OR, 2, sub },
        { ovstage_population_prim_predicate_not(sub), OVSTAGE_POPULATION_PRIM_PREDICATE_NOT, 1, sub },
        { ovstage_population_prim_predicate_has_parent(sub), OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_PARENT, 1, sub },
        { ovstage_population_prim_predicate_has_ancestor(sub), OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_ANCESTOR, 1, sub },
        { ovstage_population_prim_predicate_has_property(&any), OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_PROPERTY, 1, &any },
        { ovstage_population_prim_predicate_has_type(names, 2), OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_TYPE, 2, names },
        { ovstage_population_prim_predicate_is_a_type(names, 1), OVSTAGE_POPULATION_PRIM_PREDICATE_IS_A_TYPE, 1, names },
        { ovstage_population_prim_predicate_has_schema(names, 2), OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_SCHEMA, 2, names },
        { ovstage_population_prim_predicate_has_applied_schema(names, 2),
          OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_APPLIED_SCHEMA, 2, names },
        { ovstage_population_prim_predicate_has_applied_schema_in_namespace(names, 2),
          OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_APPLIED_SCHEMA_IN_NAMESPACE, 2, names },
        { ovstage_population_prim_predicate_has_path(names, 2), OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_PATH, 2, names },
        { ovstage_population_prim_predicate_is_under_path(names, 2), OVSTAGE_POPULATION_PRIM_PREDICATE_IS_UNDER_PATH, 2,
          names },
        { ovstage_population_prim_predicate_has_kind(names, 2), OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_KIND, 2, names },
        { ovstage_population_prim_predicate_has_purpose(names, 2), OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_PURPOSE, 2,
          names },
        { ovstage_population_prim_predicate_has_metadata(names, 2), OVSTAGE_POPULATION_PRIM_PREDICATE_HAS_METADATA, 2,
          names },
    };
    ck_assert_uint_eq(LEN(prim), 18);
    for (size_t i = 0; i < LEN(prim); ++i)
    {
        ck_assert_int_eq(prim[i].p.kind, prim[i].kind);
        ck_assert_uint_eq(prim[i].p.value_count, prim[i].count);
        ck_assert_ptr_eq((const void*)prim[i].p.values.strings, prim[i].values);
    }
    ck_assert_ptr_eq(prim[7].p.values.property_predicate, &any);

    const ovstage_population_property_predicate_t psub[1] = { ovstage_population_property_predicate_all() };
    struct
    {
        ovstage_population_property_predicate_t p;
        int kind;
        size_t count;
        const void* values;
    } prop[] = {
        { ovstage_population_property_predicate_none(), OVSTAGE_POPULATION_PROPERTY_PREDICATE_NONE, 0, NULL },
        { ovstage_population_property_predicate_all(), OVSTAGE_POPULATION_PROPERTY_PREDICATE_ALL, 0, NULL },
        { ovstage_population_property_predicate_and(psub, 1), OVSTAGE_POPULATION_PROPERTY_PREDICATE_AND, 1, psub },
        { ovstage_population_property_predicate_or(psub, 1), OVSTAGE_POPULATION_PROPERTY_PREDICATE_OR, 1, psub },
        { ovstage_population_property_predicate_not(psub), OVSTAGE_POPULATION_PROPERTY_PREDICATE_NOT, 1, psub },
        { ovstage_population_property_predicate_declared_by_schema(names, 2),
          OVSTAGE_POPULATION_PROPERTY_PREDICATE_DECLARED_BY_SCHEMA, 2, names },
        { ovstage_population_property_predicate_has_name(names, 2), OVSTAGE_POPULATION_PROPERTY_PREDICATE_HAS_NAME, 2,
          names },
        { ovstage_population_property_predicate_in_namespace(names, 2),
          OVSTAGE_POPULATION_PROPERTY_PREDICATE_IN_NAMESPACE, 2, names },
        { ovstage_population_property_predicate_has_metadata(names, 2),
          OVSTAGE_POPULATION_PROPERTY_PREDICATE_HAS_METADATA, 2, names },
        { ovstage_population_property_predicate_is_attribute(), OVSTAGE_POPULATION_PROPERTY_PREDICATE_IS_ATTRIBUTE, 0,
          NULL },
        { ovstage_population_property_predicate_is_relationship(),
          OVSTAGE_POPULATION_PROPERTY_PREDICATE_IS_RELATIONSHIP, 0, NULL },
        { ovstage_population_property_predicate_is_custom(), OVSTAGE_POPULATION_PROPERTY_PREDICATE_IS_CUSTOM, 0, NULL },
        { ovstage_population_property_predicate_is_authored(), OVSTAGE_POPULATION_PROPERTY_PREDICATE_IS_AUTHORED, 0,
          NULL },
    };
    ck_assert_uint_eq(LEN(prop), 13);
    for (size_t i = 0; i < LEN(prop); ++i)
    {
        ck_assert_int_eq(prop[i].p.kind, prop[i].kind);
        ck_assert_uint_eq(prop[i].p.value_count, prop[i].count);
        ck_assert_ptr_eq((const void*)prop[i].p.values.strings, prop[i].values);
    }

    const ovx_string_t untyped = ovstage_population_untyped_type_name();
    ck_assert_uint_eq(untyped.length, strlen("__ovstage_population_untyped__"));
    ck_assert_str_eq(untyped.ptr, "__ovstage_population_untyped__");
}
END_TEST

/* ============================ wrappers forward to the right slot ============================ */

static int g_slot;               /* 1-based slot last entered */
static const void* g_ctx;        /* context it received */
static uint64_t g_arg;           /* its first integer argument, when it has one */
static char g_ctx_storage;       /* the fake context object */
#define FAKE_CTX ((ovstage_context_t*)(void*)&g_ctx_storage)
#define HIT(n, ctx, a) (g_slot = (n), g_ctx = (const void*)(ctx), g_arg = (uint64_t)(a))

static const ovstage_enqueue_result_t k_enq = { OVSTAGE_OK, 7 };

static ovstage_api_status_t s_wait_op(ovstage_context_t* c, ovstage_op_id_t id, ovstage_timeout_ns_t t, ovstage_op_wait_result_t* r) { (void)t; (void)r; HIT(1, c, id); return OVSTAGE_OK; }
static ovstage_api_status_t s_release_op(ovstage_context_t* c, ovstage_op_id_t id) { HIT(2, c, id); return OVSTAGE_OK; }
static ovstage_enqueue_result_t s_advance_write_floor(ovstage_context_t* c, const ovstage_write_floor_desc_t* d) { HIT(3, c, d->ordinal); return k_enq; }
static ovstage_enqueue_result_t s_get_oldest_preserved_ordinal(ovstage_context_t* c, ovstage_ordinal_query_handle_t* h) { (void)h; HIT(4, c, 0); return k_enq; }
static ovstage_enqueue_result_t s_get_attribute_write_floor(ovstage_context_t* c, ovx_string_or_token_t a, ovstage_ordinal_query_handle_t* h) { (void)h; HIT(5, c, a.token); return k_enq; }
static ovstage_api_status_t s_fetch_ordinal(ovstage_context_t* c, ovstage_ordinal_query_handle_t h, ovstage_timeout_ns_t t, ovstage_ordinal_t* o) { (void)t; (void)o; HIT(6, c, h); return OVSTAGE_OK; }
static ovstage_enqueue_result_t s_release_ordinal_query(ovstage_context_t* c, ovstage_ordinal_query_handle_t h) { HIT(7, c, h); return k_enq; }
static ovstage_enqueue_result_t s_query(ovstage_context_t* c, const ovstage_filter_t* f, const ovx_token_t* a, size_t n, ovstage_query_handle_t* h) { (void)f; (void)a; (void)h; HIT(8, c, n); return k_enq; }
static ovstage_api_status_t s_query_from_path_list(ovstage_context_t* c, ovx_primpath_list_t l, ovstage_query_handle_t* h) { (void)h; HIT(9, c, l); return OVSTAGE_OK; }
static ovstage_api_status_t s_fetch_query_result(ovstage_context_t* c, ovstage_query_handle_t h, ovstage_timeout_ns_t t, ovstage_query_result_t* r) { (void)t; (void)r; HIT(10, c, h); return OVSTAGE_OK; }
static ovstage_api_status_t s_release_query_result(ovstage_context_t* c, const ovstage_query_result_t* r) { HIT(11, c, r->query_result_id); return OVSTAGE_OK; }
static ovstage_enqueue_result_t s_release_query(ovstage_context_t* c, ovstage_query_handle_t h) { HIT(12, c, h); return k_enq; }
static ovstage_enqueue_result_t s_read_attributes(ovstage_context_t* c, ovstage_query_handle_t h, const ovx_token_t* a, size_t n, ovstage_ordinal_range_t r, ovstage_read_handle_t* o) { (void)a; (void)n; (void)r; (void)o; HIT(13, c, h); return k_enq; }
static ovstage_api_status_t s_fetch_read_next(ovstage_context_t* c, ovstage_read_handle_t h, ovstage_timeout_ns_t t, ovstage_read_group_t* g) { (void)t; (void)g; HIT(14, c, h); return OVSTAGE_OK; }
static ovstage_api_status_t s_release_group(ovstage_context_t* c, const ovstage_read_group_t* g) { HIT(15, c, g->read_group_id); return OVSTAGE_OK; }
static ovstage_enqueue_result_t s_release_read(ovstage_context_t* c, ovstage_read_handle_t h) { HIT(16, c, h); return k_enq; }
static ovstage_enqueue_result_t s_write_attribute(ovstage_context_t* c, ovstage_query_handle_t h, ovx_string_or_token_t a, ovstage_ordinal_t o, ovstage_write_data_t d, ovstage_prim_mode_t m) { (void)a; (void)d; (void)m; HIT(17, c, h + o); return k_enq; }
static ovstage_enqueue_result_t s_map_attribute(ovstage_context_t* c, ovstage_query_handle_t h, const ovstage_map_desc_t* d, ovstage_ordinal_t o, const size_t* e, size_t n, ovstage_map_handle_t* out) { (void)d; (void)o; (void)e; (void)n; (void)out; HIT(18, c, h); return k_enq; }
static ovstage_api_status_t s_fetch_map_next(ovstage_context_t* c, ovstage_map_handle_t h, ovstage_timeout_ns_t t, ovstage_map_group_t* g) { (void)t; (void)g; HIT(19, c, h); return OVSTAGE_OK; }
static ovstage_enqueue_result_t s_unmap_group(ovstage_context_t* c, ovstage_map_handle_t h, const ovstage_map_group_t* g, ovstage_cuda_sync_t s) { (void)g; (void)s; HIT(20, c, h); return k_enq; }
static ovstage_enqueue_result_t s_unmap_attribute(ovstage_context_t* c, ovstage_map_handle_t h, ovstage_cuda_sync_t s) { (void)s; HIT(21, c, h); return k_enq; }
static ovstage_enqueue_result_t s_delete_attributes(ovstage_context_t* c, ovstage_query_handle_t h, const ovx_string_or_token_t* a, size_t n, ovstage_ordinal_t o) { (void)a; (void)n; (void)o; HIT(22, c, h); return k_enq; }
static void s_get_version(ovstage_context_t* c, uint32_t* ma, uint32_t* mi, uint32_t* pa) { *ma = OVSTAGE_VERSION_MAJOR; *mi = OVSTAGE_VERSION_MINOR; *pa = OVSTAGE_VERSION_PATCH; HIT(23, c, 0); }
static const char* s_get_error_string(ovstage_context_t* c, ovstage_api_status_t e) { HIT(24, c, e); return "x"; }
static ovx_string_t s_get_last_op_error(ovstage_context_t* c, ovstage_op_id_t id) { ovx_string_t s = { NULL, 0 }; HIT(25, c, id); return s; }
static path_dictionary_instance_t* s_get_path_dictionary(ovstage_context_t* c) { HIT(26, c, 0); return NULL; }
static ovstage_enqueue_result_t s_write_attributes(ovstage_context_t* c, ovstage_query_handle_t h, const ovstage_attribute_write_t* w, size_t n, ovstage_ordinal_t o, ovstage_prim_mode_t m) { (void)w; (void)n; (void)o; (void)m; HIT(27, c, h); return k_enq; }
static ovstage_api_status_t s_query_extension(ovstage_context_t* c, const char* name, const void** out) { (void)name; (void)out; HIT(28, c, 0); return OVSTAGE_ERROR_NOT_FOUND; }

static const ovstage_vtable_t k_vtable = {
    s_wait_op, s_release_op, s_advance_write_floor, s_get_oldest_preserved_ordinal, s_get_attribute_write_floor,
    s_fetch_ordinal, s_release_ordinal_query, s_query, s_query_from_path_list, s_fetch_query_result,
    s_release_query_result, s_release_query, s_read_attributes, s_fetch_read_next, s_release_group, s_release_read,
    s_write_attribute, s_map_attribute, s_fetch_map_next, s_unmap_group, s_unmap_attribute, s_delete_attributes,
    s_get_version, s_get_error_string, s_get_last_op_error, s_get_path_dictionary, s_write_attributes,
    s_query_extension,
};

static void expect_hit(int slot, uint64_t arg)
{
    ck_assert_int_eq(g_slot, slot);
    ck_assert_ptr_eq(g_ctx, (const void*)FAKE_CTX);
    ck_assert_uint_eq(g_arg, arg);
    g_slot = 0;
    g_ctx = NULL;
    g_arg = 0;
}

START_TEST(test_ovstage_wrappers_forward)
{
    ovstage_instance_t inst = { &k_vtable, FAKE_CTX };
    ovstage_instance_t* st = &inst;
    ovstage_op_wait_result_t wr;
    ovstage_ordinal_query_handle_t oq;
    ovstage_ordinal_t ord;
    ovstage_query_handle_t qh;
    ovstage_query_result_t qr = { 41, NULL, 0, 0, 0 };
    ovstage_read_handle_t rh;
    ovstage_read_group_t rg;
    ovstage_map_handle_t mh;
    ovstage_map_group_t mg;
    ovstage_write_data_t wd;
    ovstage_map_desc_t md;
    const ovstage_write_floor_desc_t fd = { 33, OVSTAGE_SCOPE_ALL, NULL, 0 };
    const ovstage_ordinal_range_t range = { 0, 1, false };
    const ovstage_cuda_sync_t nosync = { 0, 0 };
    const ovx_string_or_token_t attr = { 55, { NULL, 0 } };
    uint32_t ma = 9, mi = 9, pa = 9;
    const void* ext = NULL;
    memset(&rg, 0, sizeof rg);
    memset(&mg, 0, sizeof mg);
    memset(&wd, 0, sizeof wd);
    memset(&md, 0, sizeof md);
    rg.read_group_id = 42;

    ck_assert_int_eq(ovstage_wait_op(st, 101, 0, &wr), OVSTAGE_OK);           expect_hit(1, 101);
    ck_assert_int_eq(ovstage_release_op(st, 102), OVSTAGE_OK);                expect_hit(2, 102);
    ck_assert_uint_eq(ovstage_advance_write_floor(st, &fd).op_index, 7);      expect_hit(3, 33);
    ovstage_get_oldest_preserved_ordinal(st, &oq);                            expect_hit(4, 0);
    ovstage_get_attribute_write_floor(st, attr, &oq);                         expect_hit(5, 55);
    ovstage_fetch_ordinal(st, 106, 0, &ord);                                  expect_hit(6, 106);
    ovstage_release_ordinal_query(st, 107);                                   expect_hit(7, 107);
    ovstage_query(st, NULL, NULL, 3, &qh);                                    expect_hit(8, 3);
    ovstage_query_from_path_list(st, 109, &qh);                               expect_hit(9, 109);
    ovstage_fetch_query_result(st, 110, 0, &qr);                              expect_hit(10, 110);
    ovstage_release_query_result(st, &qr);                                    expect_hit(11, 41);
    ovstage_release_query(st, 112);                                           expect_hit(12, 112);
    ovstage_read_attributes(st, 113, NULL, 0, range, &rh);                    expect_hit(13, 113);
    ovstage_fetch_read_next(st, 114, 0, &rg);                                 expect_hit(14, 114);
    ovstage_release_group(st, &rg);                                           expect_hit(15, 42);
    ovstage_release_read(st, 116);                                            expect_hit(16, 116);
    ovstage_write_attribute(st, 100, attr, 17, wd, OVSTAGE_PRIM_MODE_UPSERT); expect_hit(17, 117);
    ovstage_map_attribute(st, 118, &md, 1, NULL, 0, &mh);                     expect_hit(18, 118);
    ovstage_fetch_map_next(st, 119, 0, &mg);                                  expect_hit(19, 119);
    ovstage_unmap_group(st, 120, &mg, nosync);                                expect_hit(20, 120);
    ovstage_unmap_attribute(st, 121, nosync);                                 expect_hit(21, 121);
    ovstage_delete_attributes(st, 122, NULL, 0, 1);                           expect_hit(22, 122);
    ovstage_get_version(st, &ma, &mi, &pa);                                   expect_hit(23, 0);
    ck_assert_uint_eq(ma, 0);
    ck_assert_uint_eq(mi, 2);
    ck_assert_uint_eq(pa, 1);
    ck_assert_str_eq(ovstage_get_error_string(st, OVSTAGE_ERROR_TIMEOUT), "x"); expect_hit(24, 11);
    ovstage_get_last_op_error(st, 125);                                       expect_hit(25, 125);
    ck_assert_ptr_null(ovstage_get_path_dictionary(st));                      expect_hit(26, 0);
    ovstage_write_attributes(st, 127, NULL, 0, 1, OVSTAGE_PRIM_MODE_INSERT);  expect_hit(27, 127);
    ck_assert_int_eq(ovstage_query_extension(st, "x", &ext), OVSTAGE_ERROR_NOT_FOUND); expect_hit(28, 0);

    /* The one wrapper with a NULL check. */
    ck_assert_ptr_null(ovstage_get_path_dictionary(NULL));
    ck_assert_int_eq(g_slot, 0);
}
END_TEST

static path_dictionary_context_t* const k_dict_ctx = (path_dictionary_context_t*)(void*)&g_ctx_storage;
static const ovx_api_result_t k_ok = { OVX_API_SUCCESS, { NULL, 0 } };

static ovx_api_result_t d1(path_dictionary_context_t* c, const ovx_string_t* s, size_t n, ovx_token_t* o) { (void)s; (void)o; HIT(1, c, n); return k_ok; }
static ovx_api_result_t d2(path_dictionary_context_t* c, const ovx_token_t* t, const size_t* nt, size_t n, ovx_primpath_t* o) { (void)t; (void)nt; (void)o; HIT(2, c, n); return k_ok; }
static ovx_api_result_t d3(path_dictionary_context_t* c, const ovx_string_t* s, size_t n, ovx_primpath_t* o) { (void)s; (void)o; HIT(3, c, n); return k_ok; }
static ovx_api_result_t d4(path_dictionary_context_t* c, const ovx_primpath_t* p, size_t n, ovx_primpath_list_t* o) { (void)p; (void)o; HIT(4, c, n); return k_ok; }
static ovx_api_result_t d5(path_dictionary_context_t* c, const ovx_string_t* s, size_t n, ovx_primpath_list_t* o) { (void)s; (void)o; HIT(5, c, n); return k_ok; }
static ovx_api_result_t d6(path_dictionary_context_t* c, ovx_primpath_list_t l) { HIT(6, c, l); return k_ok; }
static ovx_api_result_t d7(path_dictionary_context_t* c, ovx_primpath_list_t l) { HIT(7, c, l); return k_ok; }
static ovx_api_result_t d8(path_dictionary_context_t* c, const ovx_token_t* t, size_t n, ovx_string_t* o) { (void)t; (void)o; HIT(8, c, n); return k_ok; }
static ovx_api_result_t d9(path_dictionary_context_t* c, const ovx_primpath_t* p, size_t n, ovx_token_t* b, size_t bn, ovx_token_t** tp, size_t* ntp, size_t* np) { (void)p; (void)b; (void)tp; (void)ntp; (void)np; HIT(9, c, n * 1000 + bn); return k_ok; }
static ovx_api_result_t d10(path_dictionary_context_t* c, ovx_primpath_list_t l, size_t* n) { (void)n; HIT(10, c, l); return k_ok; }
static ovx_api_result_t d11(path_dictionary_context_t* c, ovx_primpath_list_t l, size_t s, size_t m, ovx_primpath_t* o, size_t* n) { (void)o; (void)n; HIT(11, c, l + s + m); return k_ok; }
static void d12(path_dictionary_context_t* c, ovx_string_t e) { HIT(12, c, e.length); }

START_TEST(test_path_dictionary_wrappers_forward)
{
    path_dictionary_vtable_t vt = { d1, d2, d3, d4, d5, d6, d7, d8, d9, d10, d11, d12 };
    path_dictionary_instance_t dict = { &vt, k_dict_ctx };
    ovx_token_t tok[2] = { 1, 2 };
    ovx_primpath_t pp[2] = { 3, 4 };
    ovx_primpath_list_t pl = OVX_INVALID_PRIMPATH_LIST;
    ovx_string_t strs[2] = { { "a", 1 }, { "b", 1 } };
    ovx_token_t* per_path[2] = { NULL, NULL };
    size_t counts[2] = { 1, 1 };
    size_t n = 0;
    const ovx_string_t err = { "boom", 4 };

    path_dictionary_create_tokens_from_strings(&dict, strs, 201, tok);            expect_hit(1, 201);
    path_dictionary_create_paths_from_tokens(&dict, tok, counts, 202, pp);       expect_hit(2, 202);
    path_dictionary_create_paths_from_strings(&dict, strs, 203, pp);             expect_hit(3, 203);
    path_dictionary_create_path_list_from_paths(&dict, pp, 204, &pl);            expect_hit(4, 204);
    path_dictionary_create_path_list_from_strings(&dict, strs, 205, &pl);        expect_hit(5, 205);
    path_dictionary_add_path_list_reference(&dict, 206);                         expect_hit(6, 206);
    path_dictionary_release_path_list_reference(&dict, 207);                     expect_hit(7, 207);
    path_dictionary_get_strings_from_tokens(&dict, tok, 208, strs);              expect_hit(8, 208);
    path_dictionary_get_tokens_from_paths(&dict, pp, 2, tok, 9, per_path, counts, &n); expect_hit(9, 2009);
    path_dictionary_get_num_paths_from_path_list(&dict, 210, &n);                expect_hit(10, 210);
    path_dictionary_get_paths_from_path_list(&dict, 200, 10, 1, pp, &n);         expect_hit(11, 211);
    path_dictionary_release_error(&dict, err);                                   expect_hit(12, 4);
}
END_TEST

/* ========================================= runner =========================================== */

static Suite* abi_suite(void)
{
    Suite* s = suite_create("ovstage_headers_abi");

    TCase* values = tcase_create("values");
    tcase_add_test(values, test_version_macros);
    tcase_add_test(values, test_status_codes);
    tcase_add_test(values, test_sentinels);
    tcase_add_test(values, test_core_enums);
    tcase_add_test(values, test_config_log_hierarchy_enums);
    tcase_add_test(values, test_population_enums);
    tcase_add_test(values, test_export_enums);
    suite_add_tcase(s, values);

    TCase* layout = tcase_create("layout");
    tcase_add_test(layout, test_ovstage_vtable_slots);
    tcase_add_test(layout, test_path_dictionary_vtable_slots);
    tcase_add_test(layout, test_ovx_struct_order);
    tcase_add_test(layout, test_core_struct_order);
    tcase_add_test(layout, test_core_struct_layout_lp64);
    tcase_add_test(layout, test_types_struct_order);
    tcase_add_test(layout, test_population_struct_order);
    tcase_add_test(layout, test_export_struct_order);
    suite_add_tcase(s, layout);

    TCase* dlpack = tcase_create("dlpack");
    tcase_add_test(dlpack, test_dlpack_compat);
    tcase_add_test(dlpack, test_dlpack_managed_deleter);
    suite_add_tcase(s, dlpack);

    TCase* inline_fns = tcase_create("inline");
    tcase_add_test(inline_fns, test_ovx_string_helpers);
    tcase_add_test(inline_fns, test_config_builders);
    tcase_add_test(inline_fns, test_predicate_constructors);
    tcase_add_test(inline_fns, test_ovstage_wrappers_forward);
    tcase_add_test(inline_fns, test_path_dictionary_wrappers_forward);
    suite_add_tcase(s, inline_fns);

    return s;
}

int main(void)
{
    SRunner* sr = srunner_create(abi_suite());
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
