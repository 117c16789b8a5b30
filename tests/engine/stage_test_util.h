/*
 * stage_test_util.h — helpers shared by the engine suites that drive a stage through the public API
 * (check_stage.c, check_query.c, check_chunks.c): the thread's last error as a C string, interning a
 * token, a path-list query from strings, a one-tensor write payload, and waiting for an op (returning
 * the failed-op count and the first message), a reproducible random stream. Each suite keeps its own
 * fixture and thin wrappers.
 */
#ifndef OVSTAGE_TESTS_STAGE_TEST_UTIL_H
#define OVSTAGE_TESTS_STAGE_TEST_UTIL_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ovstage/ovstage.h>
#include <ovx/path_dictionary/path_dictionary.h>

/* xorshift64 over *state (tests' reproducible random streams), and a double in [-1, 1). */
static inline uint64_t tst_rnd(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *state = x;
}

static inline double tst_unit(uint64_t *state)
{
	return (double)(tst_rnd(state) >> 11) / 9007199254740992.0 * 2 - 1;
}

static inline const char *tst_last_error(void)
{
	static _Thread_local char buf[1100];
	ovx_string_t e = ovstage_get_last_error();
	snprintf(buf, sizeof buf, "%.*s", (int)e.length, e.ptr ? e.ptr : "");
	return buf;
}

static inline ovx_token_t tst_tok(path_dictionary_instance_t *pd, const char *s)
{
	ovx_string_t str = { s, strlen(s) };
	ovx_token_t t = 0;
	ovx_api_result_t r = path_dictionary_create_tokens_from_strings(pd, &str, 1, &t);
	ck_assert_int_eq(r.status, OVX_API_SUCCESS);
	return t;
}

/* A path-list query over `paths`; the list is handed back in *out_list or released. */
static inline ovstage_query_handle_t tst_query_of(ovstage_instance_t *st, path_dictionary_instance_t *pd,
						  const char *const *paths, size_t n, ovx_primpath_list_t *out_list)
{
	ovx_string_t *s = calloc(n ? n : 1, sizeof *s);
	for (size_t i = 0; i < n; i++) {
		s[i].ptr = paths[i];
		s[i].length = strlen(paths[i]);
	}
	ovx_primpath_list_t list;
	ovx_api_result_t r = path_dictionary_create_path_list_from_strings(pd, s, n, &list);
	ck_assert_int_eq(r.status, OVX_API_SUCCESS);
	free(s);
	ovstage_query_handle_t q;
	ck_assert_int_eq(ovstage_query_from_path_list(st, list, &q), OVSTAGE_OK);
	if (out_list)
		*out_list = list;
	else
		path_dictionary_release_path_list_reference(pd, list);
	return q;
}

/* Waits for an accepted op and releases it; returns how many ops were reported failed, and the
 * first one's message in msg. */
static inline size_t tst_wait_op(ovstage_instance_t *st, ovstage_enqueue_result_t e, char *msg, size_t msglen)
{
	ck_assert_msg(e.status == OVSTAGE_OK, "enqueue rejected: %d: %s", e.status, tst_last_error());
	ovstage_op_wait_result_t w;
	ovstage_api_status_t ws = ovstage_wait_op(st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &w);
	size_t n = w.error_op_id_count;
	/* OK, or (with the failure listed) the status 0.2.1 documents for it */
	ck_assert_msg(ws == OVSTAGE_OK ||
			      (n && (ws == OVSTAGE_ERROR_PRIM_NOT_FOUND || ws == OVSTAGE_ERROR_NOT_FOUND ||
				     ws == OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION || ws == OVSTAGE_ERROR_OUT_OF_RANGE)),
		      "wait_op returned %d with %zu failures", (int)ws, n);
	if (msg && msglen) {
		msg[0] = 0;
		if (n) {
			ovx_string_t m = ovstage_get_last_op_error(st, w.error_op_ids[0]);
			snprintf(msg, msglen, "%.*s", (int)m.length, m.ptr ? m.ptr : "");
		}
	}
	ck_assert_int_eq(ovstage_release_op(st, e.op_index), OVSTAGE_OK);
	return n;
}

static inline void tst_wait_ok(ovstage_instance_t *st, ovstage_enqueue_result_t e)
{
	char msg[600];
	size_t n = tst_wait_op(st, e, msg, sizeof msg);
	ck_assert_msg(n == 0, "op failed: %s", msg);
}

/* The write floor of attribute a (the stage's floor while a does not exist yet). */
static inline uint64_t tst_floor_of(ovstage_instance_t *st, ovx_token_t a)
{
	ovstage_ordinal_query_handle_t h;
	ovx_string_or_token_t at = { a, { NULL, 0 } };
	tst_wait_ok(st, ovstage_get_attribute_write_floor(st, at, &h));
	ovstage_ordinal_t o = 0;
	ck_assert_int_eq(ovstage_fetch_ordinal(st, h, OVSTAGE_TIMEOUT_INFINITE, &o), OVSTAGE_OK);
	tst_wait_ok(st, ovstage_release_ordinal_query(st, h));
	return o;
}

/* A 1-D tensor descriptor with room for its shape (the API borrows both until the op completes). */
typedef struct tst_tensor {
	DLTensor t;
	int64_t shape[3];
} tst_tensor;

/* Write data of `rows` rows over vals: one host tensor of dtype (code, bits) x lanes. */
static inline ovstage_write_data_t tst_wdata(tst_tensor *tt, void *vals, int64_t rows, uint8_t code, uint8_t bits,
					     uint16_t lanes)
{
	memset(tt, 0, sizeof *tt);
	tt->t.data = vals;
	tt->t.device.device_type = kDLCPU;
	tt->t.ndim = 1;
	tt->t.dtype.code = code;
	tt->t.dtype.bits = bits;
	tt->t.dtype.lanes = lanes;
	tt->shape[0] = rows;
	tt->t.shape = tt->shape;
	ovstage_write_data_t w;
	memset(&w, 0, sizeof w);
	w.tensors = &tt->t;
	w.tensor_count = 1;
	return w;
}

static inline ovx_string_or_token_t tst_attr(ovx_token_t t)
{
	ovx_string_or_token_t a = { t, { NULL, 0 } };
	return a;
}

#endif /* OVSTAGE_TESTS_STAGE_TEST_UTIL_H */
