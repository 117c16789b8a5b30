/*
 * ovstage/ovstage_config.h — builders for ovstage_config_entry_t, and the static loader's
 * executable-directory query.
 *
 * Contract: each builder returns a fully initialized entry (every byte of both unions is written)
 * whose key_type matches the key. ovstage_executable_dir exists only in the static loader, not in
 * the shared library.
 */
#ifndef OVSTAGE_CONFIG_H
#define OVSTAGE_CONFIG_H

#include "ovstage_types.h"
#include <ovx/config_tokens.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A STRING entry. */
static inline ovstage_config_entry_t ovstage_config_entry_string(ovstage_config_string_t key, ovx_string_t value)
{
    ovstage_config_entry_t entry;
    entry.key_type = OVSTAGE_CONFIG_KEY_TYPE_STRING;
    entry.key.string_key = key;
    entry.value.string_value = value;
    return entry;
}

/** A UINT64 entry. */
static inline ovstage_config_entry_t ovstage_config_entry_uint64(ovstage_config_uint64_t key, uint64_t value)
{
    ovstage_config_entry_t entry;
    entry.key_type = OVSTAGE_CONFIG_KEY_TYPE_UINT64;
    entry.key.uint64_key = key;
    entry.value.blob_value.data = NULL; /* clear the whole value union first */
    entry.value.blob_value.size = 0;
    entry.value.uint_value = value;
    return entry;
}

/** The process default hierarchy computation model (OVSTAGE_CONFIG_RUNTIME_DEFAULT_HIERARCHY_COMPUTATION_MODEL). */
static inline ovstage_config_entry_t ovstage_config_entry_runtime_default_hierarchy_computation_model(
    ovstage_hierarchy_computation_model_id_t model)
{
    const uint64_t value = model; /* implicit: the enum values are small and non-negative */
    return ovstage_config_entry_uint64(OVSTAGE_CONFIG_RUNTIME_DEFAULT_HIERARCHY_COMPUTATION_MODEL, value);
}

/** The binary package root of the static loader (OVSTAGE_CONFIG_BINARY_PACKAGE_ROOT_PATH). */
static inline ovstage_config_entry_t ovstage_config_entry_binary_package_root_path(ovx_string_t path)
{
    return ovstage_config_entry_string(OVSTAGE_CONFIG_BINARY_PACKAGE_ROOT_PATH, path);
}

/**
 * Directory of the running executable, in a thread-local buffer; {NULL, 0} if unknown. Only the
 * static loader (ovstage-static) provides it.
 */
OVSTAGE_API ovx_string_t ovstage_executable_dir(void);

#ifdef __cplusplus
}
#endif

#endif /* OVSTAGE_CONFIG_H */
