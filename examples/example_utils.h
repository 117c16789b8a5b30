/*
 * example_utils.h — helpers shared by the example programs: check a status, wait for an op (printing
 * every failed op's message), and build a CPU tensor.
 */
#ifndef OVSTAGE_EXAMPLE_UTILS_H
#define OVSTAGE_EXAMPLE_UTILS_H

#include <stdio.h>
#include <stdlib.h>

#include <ovstage/ovstage.h>
#include <ovx/path_dictionary/path_dictionary.h>

static inline void check(ovstage_api_status_t st, const char *what)
{
	if (st != OVSTAGE_OK) {
		ovx_string_t e = ovstage_get_last_error();
		fprintf(stderr, "%s failed: status %d: %.*s\n", what, (int)st, (int)e.length, e.ptr ? e.ptr : "");
		exit(EXIT_FAILURE);
	}
}

static inline void check_ovx(path_dictionary_instance_t *pd, ovx_api_result_t r, const char *what)
{
	if (r.status != OVX_API_SUCCESS) {
		fprintf(stderr, "%s failed: %.*s\n", what, (int)r.error.length, r.error.ptr ? r.error.ptr : "");
		path_dictionary_release_error(pd, r.error);
		exit(EXIT_FAILURE);
	}
}

/* Waits for an enqueued op, reports every failed op id with its message, releases the op. */
static inline void wait_op(ovstage_instance_t *stage, ovstage_enqueue_result_t enq, const char *what)
{
	check(enq.status, what);
	ovstage_op_wait_result_t wr;
	check(ovstage_wait_op(stage, enq.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr), "wait_op");
	int failed = 0;
	for (size_t i = 0; i < wr.error_op_id_count; i++) {
		ovx_string_t m = ovstage_get_last_op_error(stage, wr.error_op_ids[i]);
		fprintf(stderr, "%s: op %llu failed: %.*s\n", what, (unsigned long long)wr.error_op_ids[i],
			(int)m.length, m.ptr ? m.ptr : "");
		failed = 1;
	}
	check(ovstage_release_op(stage, enq.op_index), "release_op");
	if (failed)
		exit(EXIT_FAILURE);
}

#endif /* OVSTAGE_EXAMPLE_UTILS_H */
