/*
 * read_latest.c — ovstage_bench_read_latest: the latency of a latest read of a sealed column, step
 * by step.
 *
 * One stage, one float32 x lanes column over P prims (default 256 Ki, x1: 1 MiB), written in full
 * and sealed once; then `reads` latest reads (the sequence of stg_read_latest: read_attributes,
 * wait_op, release_op, fetch_read_next until END_OF_ITERATION, release_group, release_read and its
 * wait_op / release_op). Each step is timed on its own and the whole read too. Prints one line:
 *   read_latest P=<P> lanes=<l> MiB=<m> reads=<n> p50_us=<a> p99_us=<b> | <step> p50 ...
 *
 * Public API only, so bench/tools/read_ab.sh compiles this same file against another revision's
 * library and runs both alternately (the figure of a branch beside main's, on one machine).
 * Usage: ovstage_bench_read_latest [P [lanes [reads]]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* The timed steps of one read, in order. */
enum { S_READ, S_WAIT, S_FETCH, S_RELG, S_END, S_RELR, S_TOTAL, NSTEPS };
static const char *const step_name[NSTEPS] = { "read_attributes", "wait+release_op", "fetch", "release_group",
					       "fetch_end", "release_read+wait", "total" };

/* One latest read as of n, each step's time into t[step]; false on any failure (a message). */
static bool timed_read(stg *s, ovstage_query_handle_t q, ovx_token_t attr, uint64_t n, uint64_t *t, uint64_t *sum)
{
	ovstage_read_handle_t rh = OVSTAGE_INVALID_READ_HANDLE;
	ovstage_ordinal_range_t range = { 0, n, false };
	ovstage_op_wait_result_t wr;
	ovstage_read_group_t g;
	uint64_t t0 = now_ns();
	ovstage_enqueue_result_t e = ovstage_read_attributes(s->st, q, &attr, 1, range, &rh);
	uint64_t t1 = now_ns();
	if (e.status != OVSTAGE_OK) {
		fprintf(stderr, "read_latest: read_attributes: status %d\n", (int)e.status);
		return false;
	}
	ovstage_wait_op(s->st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr);
	size_t failed = wr.error_op_id_count;
	ovstage_release_op(s->st, e.op_index);
	uint64_t t2 = now_ns();
	ovstage_api_status_t f = ovstage_fetch_read_next(s->st, rh, OVSTAGE_TIMEOUT_INFINITE, &g);
	uint64_t t3 = now_ns();
	if (failed || f != OVSTAGE_OK) {
		fprintf(stderr, "read_latest: the read failed (%zu failed ops, fetch status %d)\n", failed, (int)f);
		return false;
	}
	if (g.data.tensor_count && g.data.tensors[0].data)
		*sum += *(const unsigned char *)g.data.tensors[0].data;
	ovstage_release_group(s->st, &g);
	uint64_t t4 = now_ns();
	f = ovstage_fetch_read_next(s->st, rh, OVSTAGE_TIMEOUT_INFINITE, &g);
	uint64_t t5 = now_ns();
	if (f != OVSTAGE_ERROR_END_OF_ITERATION) {
		fprintf(stderr, "read_latest: a second group (status %d): expected one\n", (int)f);
		return false;
	}
	ovstage_enqueue_result_t rr = ovstage_release_read(s->st, rh);
	if (rr.status == OVSTAGE_OK) {
		ovstage_wait_op(s->st, rr.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr);
		ovstage_release_op(s->st, rr.op_index);
	}
	uint64_t t6 = now_ns();
	t[S_READ] = t1 - t0;
	t[S_WAIT] = t2 - t1;
	t[S_FETCH] = t3 - t2;
	t[S_RELG] = t4 - t3;
	t[S_END] = t5 - t4;
	t[S_RELR] = t6 - t5;
	t[S_TOTAL] = t6 - t0;
	return rr.status == OVSTAGE_OK;
}

int main(int argc, char **argv)
{
	size_t P = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)1 << 18;
	int lanes = argc > 2 ? atoi(argv[2]) : 1;
	size_t reads = argc > 3 ? strtoull(argv[3], NULL, 10) : 20000;
	if (!P || lanes < 1 || lanes > 4 || !reads) {
		fprintf(stderr, "usage: %s [P [lanes [reads]]] (P > 0, 1 <= lanes <= 4, reads > 0)\n", argv[0]);
		return 2;
	}
	enum { WARMUP = 1000 };
	size_t bytes = P * (size_t)lanes * sizeof(float);
	float *src = malloc(bytes);
	uint64_t *t[NSTEPS];
	bool ok = src != NULL;
	for (int k = 0; k < NSTEPS; k++)
		ok = (t[k] = malloc(reads * sizeof *t[k])) != NULL && ok;
	stg s;
	if (!ok || !stg_open(&s, "read_latest"))
		return 1;
	fill_pattern(src, bytes, 7);
	ovx_primpath_list_t list;
	ovstage_query_handle_t q = stg_query(&s, "big", P, &list, NULL);
	ovx_token_t attr = stg_token(&s, "read_f32");
	ok = q != OVSTAGE_INVALID_QUERY_HANDLE && attr;
	if (ok) {
		ftensor ft;
		ovstage_write_data_t w = stg_fdata(&ft, src, (int64_t)P, lanes);
		ovx_string_or_token_t a = { attr, { NULL, 0 } };
		ok = stg_wait(&s, ovstage_write_attribute(s.st, q, a, 1, w, OVSTAGE_PRIM_MODE_UPSERT), "write") &&
		     stg_seal(&s, 1);
	}
	uint64_t sum = 0, one[NSTEPS];
	for (size_t i = 0; ok && i < WARMUP + reads; i++) {
		ok = timed_read(&s, q, attr, 1, one, &sum);
		for (int k = 0; ok && i >= WARMUP && k < NSTEPS; k++)
			t[k][i - WARMUP] = one[k];
	}
	if (ok) {
		printf("read_latest P=%zu lanes=%d MiB=%.0f reads=%zu p50_us=%.3f p99_us=%.3f |", P, lanes,
		       (double)bytes / (double)MIB, reads, pct_us(t[S_TOTAL], reads, 50), pct_us(t[S_TOTAL], reads, 99));
		for (int k = 0; k < S_TOTAL; k++)
			printf(" %s %.3f", step_name[k], pct_us(t[k], reads, 50));
		printf(" (sum %llu)\n", (unsigned long long)(sum & 1));
	}
	stg_release_query(&s, q, list);
	stg_close(&s);
	free(src);
	for (int k = 0; k < NSTEPS; k++)
		free(t[k]);
	return ok ? 0 : 1;
}
