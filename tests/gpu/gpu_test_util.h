/*
 * gpu_test_util.h — helpers shared by the GPU suites (check_gpu.c, check_gpu2.c): a query over n
 * generated paths, and setting the active-GPU list through ovstage_initialize.
 */
#ifndef OVSTAGE_TESTS_GPU_TEST_UTIL_H
#define OVSTAGE_TESTS_GPU_TEST_UTIL_H

#include "../engine/stage_test_util.h"

/* A query over the n paths "<prefix><i>" (prefix shorter than 12 characters). */
static inline ovstage_query_handle_t gtu_query_n(ovstage_instance_t *st, path_dictionary_instance_t *pd, uint32_t n,
						 const char *prefix)
{
	char **paths = malloc((n ? n : 1) * sizeof *paths);
	for (uint32_t i = 0; i < n; i++) {
		paths[i] = malloc(24);
		snprintf(paths[i], 24, "%s%u", prefix, i);
	}
	ovstage_query_handle_t q = tst_query_of(st, pd, (const char *const *)paths, n, NULL);
	for (uint32_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	return q;
}

/* Sets the active-GPU list ("" clears it). Each call is an ovstage_initialize: one
 * ovstage_shutdown is owed per call. */
static inline void gtu_config_cuda_devices(const char *list)
{
	ovstage_config_entry_t e;
	memset(&e, 0, sizeof e);
	e.key_type = OVSTAGE_CONFIG_KEY_TYPE_STRING;
	e.key.string_key = OVSTAGE_CONFIG_EXT_CUDA_DEVICES;
	e.value.string_value.ptr = list;
	e.value.string_value.length = strlen(list);
	ovstage_config_t cfg = { &e, 1 };
	ck_assert_int_eq(ovstage_initialize(&cfg), OVSTAGE_OK);
}

#endif /* OVSTAGE_TESTS_GPU_TEST_UTIL_H */
