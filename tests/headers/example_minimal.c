/*
 * A C11 program in the shape of the reference "minimal" example (spec section 7, scenario 1):
 * intern a name, build a path list, query it, write float32 [1,2,3] at ordinal 1, seal, read it
 * back, clone /World/A twice at ordinal 2. Compiled only (it needs the library to link); it
 * proves the C API is usable from plain C11 as the reference examples use it.
 */
#include <ovstage/ovstage.h>
#include <ovx/path_dictionary/path_dictionary.h>

#include <stdio.h>
#include <stdlib.h>

int ovstage_example_minimal(void);

static void wait_or_exit(ovstage_instance_t* stage, ovstage_enqueue_result_t enq, const char* what)
{
    ovstage_op_wait_result_t wait = { NULL, 0, OVSTAGE_INVALID_OP_ID };
    if (enq.status != OVSTAGE_OK ||
        ovstage_wait_op(stage, enq.op_index, OVSTAGE_TIMEOUT_INFINITE, &wait) != OVSTAGE_OK ||
        wait.error_op_id_count != 0)
    {
        const ovx_string_t detail = ovstage_get_last_error();
        fprintf(stderr, "%s failed: %.*s\n", what, (int)detail.length, detail.ptr ? detail.ptr : "");
        exit(EXIT_FAILURE);
    }
    ovstage_release_op(stage, enq.op_index);
}

int ovstage_example_minimal(void)
{
    ovstage_instance_desc_t desc = { "example.minimal" };
    ovstage_instance_t* stage = NULL;
    if (ovstage_create_instance(&desc, &stage) != OVSTAGE_OK)
        return EXIT_FAILURE;

    path_dictionary_instance_t* dict = ovstage_get_path_dictionary(stage);
    const ovx_string_t name = literal_to_ovx_string("temperature");
    ovx_token_t attr = OVX_INVALID_TOKEN;
    if (path_dictionary_create_tokens_from_strings(dict, &name, 1, &attr).status != OVX_API_SUCCESS)
        return EXIT_FAILURE;

    const ovx_string_t paths[] = { literal_to_ovx_string("/World/A"), literal_to_ovx_string("/World/B"),
                                   literal_to_ovx_string("/World/C") };
    ovx_primpath_list_t list = OVX_INVALID_PRIMPATH_LIST;
    ovx_api_result_t r = path_dictionary_create_path_list_from_strings(dict, paths, 3, &list);
    if (r.status != OVX_API_SUCCESS)
    {
        path_dictionary_release_error(dict, r.error);
        return EXIT_FAILURE;
    }
    ovstage_query_handle_t query = OVSTAGE_INVALID_QUERY_HANDLE;
    if (ovstage_query_from_path_list(stage, list, &query) != OVSTAGE_OK)
        return EXIT_FAILURE;

    float values[] = { 1.0f, 2.0f, 3.0f };
    int64_t shape[] = { 3 };
    int64_t strides[] = { 1 };
    DLTensor tensor = { values, { kDLCPU, 0 }, 1, { kDLFloat, 32, 1 }, shape, strides, 0 };
    ovstage_write_data_t data = { 0 };
    data.tensors = &tensor;
    data.tensor_count = 1;
    const ovx_string_or_token_t attr_arg = { attr, { NULL, 0 } };
    wait_or_exit(stage, ovstage_write_attribute(stage, query, attr_arg, 1, data, OVSTAGE_PRIM_MODE_UPSERT), "write");

    const ovstage_write_floor_desc_t floor1 = { 1, OVSTAGE_SCOPE_ALL, NULL, 0 };
    wait_or_exit(stage, ovstage_advance_write_floor(stage, &floor1), "advance_write_floor");

    const ovstage_ordinal_range_t latest = { 0, 1, false };
    ovstage_read_handle_t read = OVSTAGE_INVALID_READ_HANDLE;
    wait_or_exit(stage, ovstage_read_attributes(stage, query, &attr, 1, latest, &read), "read_attributes");
    ovstage_read_group_t group;
    if (ovstage_fetch_read_next(stage, read, OVSTAGE_TIMEOUT_INFINITE, &group) == OVSTAGE_OK)
    {
        const float* out = (const float*)group.data.tensors[0].data;
        printf("read back ordinal %llu: %.1f %.1f %.1f\n", (unsigned long long)group.ordinal, (double)out[0],
               (double)out[1], (double)out[2]);
        ovstage_release_group(stage, &group);
    }
    wait_or_exit(stage, ovstage_release_read(stage, read), "release_read");

    const ovx_string_t targets[] = { literal_to_ovx_string("/World/A_env0"), literal_to_ovx_string("/World/A_env1") };
    wait_or_exit(stage, ovstage_clone(stage, literal_to_ovx_string("/World/A"), targets, 2, 2), "clone");
    const ovstage_write_floor_desc_t floor2 = { 2, OVSTAGE_SCOPE_ALL, NULL, 0 };
    wait_or_exit(stage, ovstage_advance_write_floor(stage, &floor2), "advance_write_floor");
    printf("cloned /World/A -> A_env0, A_env1\n");

    wait_or_exit(stage, ovstage_release_query(stage, query), "release_query");
    path_dictionary_release_path_list_reference(dict, list);
    return ovstage_destroy_instance(stage) == OVSTAGE_OK ? EXIT_SUCCESS : EXIT_FAILURE;
}
