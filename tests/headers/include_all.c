/*
 * Every public header in one C11 translation unit (in an order unlike the natural one), plus
 * compile-time checks of facts that C can state with _Static_assert.
 */
#include <ovstage/ovalign.h>
#include <ovstage/ovstage_population_export.h>
#include <ovstage/ovstage_population.h>
#include <ovstage/ovstage_population_predicate.h>
#include <ovstage/ovstage_instancing.h>
#include <ovstage/ovstage.h>
#include <ovstage/ovstage_config.h>
#include <ovstage/ovstage_types.h>
#include <ovstage/ovstage_api/ovstage_api_utils.h>
#include <ovstage/ovstage_api/ovstage_api.h>
#include <ovstage/ovstage_api/ovstage_api_types.h>
#include <ovx/path_dictionary/path_dictionary.h>
#include <ovx/path_dictionary/path_dictionary_utils.h>
#include <ovx/path_dictionary/path_dictionary_vtable.h>
#include <ovx/path_dictionary/path_dictionary_types.h>
#include <ovx/dlpack_compat.h>
#include <ovx/config_tokens.h>
#include <ovx/types.h>
#include <ovx/string_types.h>

_Static_assert(OVSTAGE_VERSION_MAJOR == 0 && OVSTAGE_VERSION_MINOR == 2 && OVSTAGE_VERSION_PATCH == 1, "version 0.2.1");
_Static_assert(OVSTAGE_ERROR_INTERNAL == 99, "INTERNAL is 99");
_Static_assert(sizeof(ovstage_vtable_t) == 28 * sizeof(void*), "28 vtable slots");
_Static_assert(sizeof(path_dictionary_vtable_t) == 12 * sizeof(void*), "12 path dictionary slots");
_Static_assert(DLPACK_MAJOR_VERSION == 1, "DLPack 1.x types available");
_Static_assert(kDLBool == 6 && kDLFloat4_e2m1fn == 17 && kDLTrn == 18, "DLPack 1.x codes available");

/* The literal macro builds a usable constant view at block scope. */
static size_t literal_length(void)
{
    const ovx_string_t s = literal_to_ovx_string("temperature");
    return s.length;
}

/* Defined in predeclared.c: the *_DECLARED guards accept a prior typedef. */
int ovstage_test_predeclared(void);

int main(void)
{
    const ovx_string_t root = literal_to_ovx_string(OVX_CONFIG_EXECUTABLE_DIR_TOKEN "/lib");
    if (literal_length() != 11 || root.length != 21 || is_ovx_string_empty(&root))
        return 1;
    return ovstage_test_predeclared();
}
