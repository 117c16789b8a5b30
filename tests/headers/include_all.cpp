// Every public header in one C++17 translation unit, plus compile-time checks that only C++ can
// state: C linkage of the exported functions, standard layout of the ABI structs, constexpr-ness
// of the sentinels.
#include <ovx/string_types.h>
#include <ovx/types.h>
#include <ovx/config_tokens.h>
#include <ovx/dlpack_compat.h>
#include <ovx/path_dictionary/path_dictionary_types.h>
#include <ovx/path_dictionary/path_dictionary_vtable.h>
#include <ovx/path_dictionary/path_dictionary_utils.h>
#include <ovx/path_dictionary/path_dictionary.h>
#include <ovstage/ovstage_api/ovstage_api_types.h>
#include <ovstage/ovstage_api/ovstage_api.h>
#include <ovstage/ovstage_api/ovstage_api_utils.h>
#include <ovstage/ovstage_types.h>
#include <ovstage/ovstage_config.h>
#include <ovstage/ovstage_instancing.h>
#include <ovstage/ovstage_population_predicate.h>
#include <ovstage/ovstage_population.h>
#include <ovstage/ovstage_population_export.h>
#include <ovstage/ovstage.h>
#include <ovstage/ovalign.h>

#include <type_traits>

static_assert(OVSTAGE_VERSION_MAJOR == 0 && OVSTAGE_VERSION_MINOR == 2 && OVSTAGE_VERSION_PATCH == 1, "version 0.2.1");
static_assert(std::is_standard_layout<ovstage_instance_t>::value, "instance is standard layout");
static_assert(std::is_standard_layout<ovstage_read_group_t>::value, "read group is standard layout");
static_assert(std::is_standard_layout<ovstage_write_data_t>::value, "write data is standard layout");
static_assert(std::is_standard_layout<ovstage_config_entry_t>::value, "config entry is standard layout");
static_assert(std::is_standard_layout<ovstage_population_prim_predicate_t>::value, "predicate is standard layout");
static_assert(std::is_standard_layout<ovstage_population_export_desc_t>::value, "export desc is standard layout");
static_assert(std::is_trivially_copyable<ovstage_write_data_t>::value, "write data is trivially copyable");
static_assert(std::is_same<decltype(&ovstage_get_last_error), ovx_string_t (*)()>::value, "get_last_error type");
static_assert(std::is_same<decltype(&ovstage_create_instance),
                           ovstage_api_status_t (*)(const ovstage_instance_desc_t*, ovstage_instance_t**)>::value,
              "create_instance type");
static_assert(std::is_same<decltype(&ovalign_align), int (*)(const ovalign_request_t*, ovalign_result_t*)>::value,
              "ovalign_align type");
static_assert(sizeof(ovstage_vtable_t) == 28 * sizeof(void*), "28 vtable slots");
static_assert(OVSTAGE_TIMEOUT_INFINITE == UINT64_MAX, "infinite timeout is all ones");
static_assert(OVSTAGE_HIERARCHY_COMPUTATION_MODEL_DEFAULT_GPU == OVSTAGE_HIERARCHY_COMPUTATION_MODEL_GPU_GLOBAL, "alias");

// The DLPack 1.x supplements behave as values of the enum types.
static_assert(std::is_same<decltype(kDLBool), DLDataTypeCode>::value || std::is_enum<decltype(kDLBool)>::value,
              "kDLBool is a DLDataTypeCode");
constexpr DLDataType kBool8 = { kDLBool, 8, 1 };
static_assert(kBool8.code == 6, "bool code");
constexpr DLDevice kManaged = { kDLCUDAManaged, 0 };
static_assert(kManaged.device_type == 13, "managed device");

int main()
{
    const ovx_string_t s = literal_to_ovx_string("temperature");
    ovstage_instance_t* none = nullptr;
    if (s.length != 11 || ovstage_get_path_dictionary(none) != nullptr)
        return 1;
    return 0;
}
