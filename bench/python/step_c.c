/*
 * bench/python/step_c.c — the C peer of step_loop.py: the same step loop written against the C API
 * (write 8 float32 columns of P prims, seal, read the 8 columns back and touch every view), timed
 * per step. Prints one line: "c <steps> <seconds> <api calls per step>".
 * Built and run by bench/python/run.sh.
 */
#include <ovstage/ovstage.h>
#include <ovx/path_dictionary/path_dictionary.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define COLS 8

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void wait_release(ovstage_instance_t *st, ovstage_enqueue_result_t e, long *calls)
{
	ovstage_op_wait_result_t wr;
	if (e.status != OVSTAGE_OK || ovstage_wait_op(st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr) != OVSTAGE_OK ||
	    wr.error_op_id_count) {
		fprintf(stderr, "op failed\n");
		exit(1);
	}
	ovstage_release_op(st, e.op_index);
	*calls += 2;
}

int main(int argc, char **argv)
{
	int prims = argc > 1 ? atoi(argv[1]) : 64, steps = argc > 2 ? atoi(argv[2]) : 20000;
	ovstage_instance_t *st;
	ovstage_instance_desc_t d = { "bench.c" };
	if (ovstage_create_instance(&d, &st) != OVSTAGE_OK)
		return 1;
	path_dictionary_instance_t *pd = ovstage_get_path_dictionary(st);
	ovx_string_t *paths = calloc((size_t)prims, sizeof *paths);
	char (*buf)[32] = calloc((size_t)prims, 32);
	for (int i = 0; i < prims; i++) {
		paths[i].length = (size_t)snprintf(buf[i], 32, "/World/P%d", i);
		paths[i].ptr = buf[i];
	}
	ovx_primpath_list_t list;
	path_dictionary_create_path_list_from_strings(pd, paths, (size_t)prims, &list);
	ovstage_query_handle_t q;
	ovstage_query_from_path_list(st, list, &q);
	ovx_string_t names[COLS];
	char nb[COLS][16];
	ovx_token_t toks[COLS];
	for (int c = 0; c < COLS; c++) {
		names[c].length = (size_t)snprintf(nb[c], 16, "col%d", c);
		names[c].ptr = nb[c];
	}
	path_dictionary_create_tokens_from_strings(pd, names, COLS, toks);
	float *vals = calloc((size_t)prims, sizeof *vals);
	int64_t shape[1] = { prims }, strides[1] = { 1 };
	DLTensor t = { vals, { kDLCPU, 0 }, 1, { kDLFloat, 32, 1 }, shape, strides, 0 };
	double sink = 0, t0 = 0;
	long calls = 0;
	int warm = steps / 10;
	for (int s = 1; s <= steps + warm; s++) {
		if (s == warm + 1) {
			t0 = now();
			calls = 0;
		}
		for (int i = 0; i < prims; i++)
			vals[i] = (float)s;
		for (int c = 0; c < COLS; c++) {
			ovstage_write_data_t w;
			memset(&w, 0, sizeof w);
			w.tensors = &t;
			w.tensor_count = 1;
			ovx_string_or_token_t a = { toks[c], { NULL, 0 } };
			calls++;
			wait_release(st, ovstage_write_attribute(st, q, a, (ovstage_ordinal_t)s, w, OVSTAGE_PRIM_MODE_UPSERT),
				     &calls);
		}
		ovstage_write_floor_desc_t f = { (ovstage_ordinal_t)s, OVSTAGE_SCOPE_ALL, NULL, 0 };
		calls++;
		wait_release(st, ovstage_advance_write_floor(st, &f), &calls);
		ovstage_ordinal_range_t r = { 0, (ovstage_ordinal_t)s, false };
		ovstage_read_handle_t rh;
		ovstage_enqueue_result_t e = ovstage_read_attributes(st, q, toks, COLS, r, &rh);
		calls++;
		wait_release(st, e, &calls);
		ovstage_read_group_t g;
		for (;;) {
			int rc = ovstage_fetch_read_next(st, rh, OVSTAGE_TIMEOUT_INFINITE, &g);
			calls++;
			if (rc != OVSTAGE_OK)
				break;
			sink += ((const float *)g.data.tensors[0].data)[0]; /* the "numpy view" of C */
			ovstage_release_group(st, &g);
			calls++;
		}
		calls++;
		wait_release(st, ovstage_release_read(st, rh), &calls);
	}
	double dt = now() - t0;
	printf("c %d %.6f %ld\n", steps, dt, calls / steps);
	if (sink < 0)
		printf("%f\n", sink);
	wait_release(st, ovstage_release_query(st, q), &calls);
	ovstage_destroy_instance(st);
	return 0;
}
