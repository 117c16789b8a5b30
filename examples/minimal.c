/*
 * minimal.c — the seed example: write "temperature" = [1, 2, 3] for /World/A, /World/B, /World/C at
 * ordinal 1, seal it by advancing the write floor to 1, and read the column back.
 * Expected output:
 *   attribute token <N> = 'temperature'
 *   read back ordinal 1: 1.0 2.0 3.0
 */
#include <string.h>

#include "example_utils.h"

int main(void)
{
	ovstage_instance_desc_t desc = { "example.minimal" };
	ovstage_instance_t *stage = NULL;
	check(ovstage_create_instance(&desc, &stage), "create_instance");
	path_dictionary_instance_t *pd = ovstage_get_path_dictionary(stage);

	ovx_string_t name = literal_to_ovx_string("temperature");
	ovx_token_t attr;
	check_ovx(pd, path_dictionary_create_tokens_from_strings(pd, &name, 1, &attr), "create_tokens");
	ovx_string_t back;
	check_ovx(pd, path_dictionary_get_strings_from_tokens(pd, &attr, 1, &back), "get_strings");
	printf("attribute token %llu = '%.*s'\n", (unsigned long long)attr, (int)back.length, back.ptr);

	ovx_string_t paths[3] = { literal_to_ovx_string("/World/A"), literal_to_ovx_string("/World/B"),
				  literal_to_ovx_string("/World/C") };
	ovx_primpath_list_t list;
	check_ovx(pd, path_dictionary_create_path_list_from_strings(pd, paths, 3, &list), "create_path_list");
	ovstage_query_handle_t query;
	check(ovstage_query_from_path_list(stage, list, &query), "query_from_path_list");

	/* Write one float per prim (UPSERT creates the prims on first write). */
	float values[] = { 1.0f, 2.0f, 3.0f };
	int64_t shape[] = { 3 };
	int64_t strides[] = { 1 };
	DLTensor tensor;
	memset(&tensor, 0, sizeof tensor);
	tensor.data = values;
	tensor.device.device_type = kDLCPU;
	tensor.ndim = 1;
	tensor.dtype.code = kDLFloat;
	tensor.dtype.bits = 32;
	tensor.dtype.lanes = 1;
	tensor.shape = shape;
	tensor.strides = strides;
	ovstage_write_data_t write;
	memset(&write, 0, sizeof write);
	write.tensors = &tensor;
	write.tensor_count = 1;
	write.is_array = false;
	ovx_string_or_token_t attr_arg = { attr, { NULL, 0 } };
	wait_op(stage, ovstage_write_attribute(stage, query, attr_arg, 1, write, OVSTAGE_PRIM_MODE_UPSERT),
		"write_attribute");

	ovstage_write_floor_desc_t floor = { 1, OVSTAGE_SCOPE_ALL, NULL, 0 };
	wait_op(stage, ovstage_advance_write_floor(stage, &floor), "advance_write_floor");

	ovstage_ordinal_range_t range = { 0, 1, false };
	ovstage_read_handle_t read = OVSTAGE_INVALID_READ_HANDLE;
	wait_op(stage, ovstage_read_attributes(stage, query, &attr, 1, range, &read), "read_attributes");
	ovstage_read_group_t group;
	check(ovstage_fetch_read_next(stage, read, OVSTAGE_TIMEOUT_INFINITE, &group), "fetch_read_next");
	if (group.data.tensor_count != 1 || !group.data.tensors[0].data) {
		fprintf(stderr, "unexpected read layout\n");
		return EXIT_FAILURE;
	}
	const float *out = group.data.tensors[0].data;
	printf("read back ordinal %llu: %.1f %.1f %.1f\n", (unsigned long long)group.ordinal, out[0], out[1], out[2]);
	check(ovstage_release_group(stage, &group), "release_group");
	wait_op(stage, ovstage_release_read(stage, read), "release_read");
	wait_op(stage, ovstage_release_query(stage, query), "release_query");
	check_ovx(pd, path_dictionary_release_path_list_reference(pd, list), "release_path_list");
	check(ovstage_destroy_instance(stage), "destroy_instance");
	return EXIT_SUCCESS;
}
