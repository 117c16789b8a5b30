// Seed 000 (DLPack tensor exchange page): its C++ copy-in write / copy-out read snippet, compiled
// unchanged as C++17 against the public headers, inside a function that is linked but never
// called (there is no library implementation to run it against; the wrappers it uses are static
// inline, so it links without one). The lines between the BEGIN / END markers are the seed's text,
// byte for byte; only the surrounding stubs are ours.
#include <ovstage/ovstage.h>

#include <cstdio>
#include <cstdlib>

namespace
{

// Stub of the example helper: check the enqueue status, wait for the op, release it.
void waitOp(ovstage_instance_t* stage, ovstage_enqueue_result_t enq, const char* what)
{
    if (enq.status != OVSTAGE_OK)
    {
        std::fprintf(stderr, "%s rejected: %d\n", what, static_cast<int>(enq.status));
        std::exit(EXIT_FAILURE);
    }
    ovstage_op_wait_result_t wait{};
    if (ovstage_wait_op(stage, enq.op_index, OVSTAGE_TIMEOUT_INFINITE, &wait) != OVSTAGE_OK ||
        wait.error_op_id_count != 0)
    {
        std::fprintf(stderr, "%s failed\n", what);
        std::exit(EXIT_FAILURE);
    }
    ovstage_release_op(stage, enq.op_index);
}

// Stub of the example helper: exit on a non-OK status.
void check(ovstage_instance_t* stage, ovstage_api_status_t status, const char* what)
{
    if (status != OVSTAGE_OK)
    {
        std::fprintf(stderr, "%s: %s\n", what, ovstage_get_error_string(stage, status));
        std::exit(EXIT_FAILURE);
    }
}

} // namespace

// `stage`, `query`, `attr` / `attrArg` are what the seed's surrounding example has in scope.
int seed000_write_then_read(ovstage_instance_t* stage, ovstage_query_handle_t query, ovx_token_t attr,
                            ovx_string_or_token_t attrArg);

int seed000_write_then_read(ovstage_instance_t* stage, ovstage_query_handle_t query, ovx_token_t attr,
                            ovx_string_or_token_t attrArg)
{
    ovstage_api_status_t status = OVSTAGE_OK;

// ---- BEGIN seed 000 snippet (unchanged) ----
// Write one float per prim into the "temperature" column (UPSERT creates
// the prims on first write), seal it by advancing the write floor to
// ordinal 1, then read the column back.
float values[] = { 1.0f, 2.0f, 3.0f };
int64_t shape[] = { 3 };
int64_t strides[] = { 1 };
DLTensor tensor{};
tensor.data = values;
tensor.device = { kDLCPU, 0 };
tensor.ndim = 1;
tensor.dtype = { kDLFloat, 32, 1 }; // {code, bits, lanes}
tensor.shape = shape;
tensor.strides = strides;

ovstage_write_data_t write{};
write.tensors = &tensor;
write.tensor_count = 1;
write.is_array = false;

ovstage_enqueue_result_t enq =
    ovstage_write_attribute(stage, query, attrArg, /*ordinal*/ 1, write, OVSTAGE_PRIM_MODE_UPSERT);
waitOp(stage, enq, "write_attribute");

ovstage_write_floor_desc_t writeFloor{};
writeFloor.ordinal = 1;
writeFloor.scope = OVSTAGE_SCOPE_ALL;
enq = ovstage_advance_write_floor(stage, &writeFloor);
waitOp(stage, enq, "advance_write_floor");

ovstage_ordinal_range_t range{};
range.end_ordinal = 1;
range.has_start_ordinal = false;
ovstage_read_handle_t read = OVSTAGE_INVALID_READ_HANDLE;
enq = ovstage_read_attributes(stage, query, &attr, 1, range, &read);
waitOp(stage, enq, "read_attributes");

ovstage_read_group_t group{};
status = ovstage_fetch_read_next(stage, read, OVSTAGE_TIMEOUT_INFINITE, &group);
check(stage, status, "fetch_read_next");
if (group.data.tensor_count != 1 || !group.data.tensors[0].data)
{
    std::fprintf(stderr, "unexpected read layout\n");
    return EXIT_FAILURE;
}
const float* out = static_cast<const float*>(group.data.tensors[0].data);
std::printf("read back ordinal %llu: %.1f %.1f %.1f\n", (unsigned long long)group.ordinal, out[0], out[1], out[2]);
ovstage_release_group(stage, &group); // the tensor data is only valid until the group is released
// ---- END seed 000 snippet ----

    return status == OVSTAGE_OK ? EXIT_SUCCESS : EXIT_FAILURE;
}

int main()
{
    // Linked, never called: keep the function's address so the linker must resolve everything it uses.
    int (*volatile keep)(ovstage_instance_t*, ovstage_query_handle_t, ovx_token_t, ovx_string_or_token_t) =
        &seed000_write_then_read;
    return keep != nullptr ? EXIT_SUCCESS : EXIT_FAILURE;
}
