/*
 * check_trace.c — the trace facility (jobs/trace.h): with OVSTAGE_TRACE set before the runtime
 * starts, a stage's writes, seals and reads and the jobs that run them are recorded, and the file
 * written when the last instance is destroyed is one well-formed JSON object (checked by a small
 * parser here) holding the expected events: op spans write/seal/read with their op ids, a "run"
 * span for each of those ids, spawn/flow events with matching flow ids, and thread names.
 * Never times anything.
 */
#include <check.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ovstage/ovstage.h>
#include <ovstage/ovstage_ext.h>
#include <ovx/path_dictionary/path_dictionary.h>

#include "stage_test_util.h"
#include "trace.h"

#ifdef OVSTAGE_TEST_CUDA
#include <cuda_runtime_api.h>
#endif

static char g_path[256];

/* ---- a minimal JSON reader: validates the grammar and collects the events' fields ---- */

typedef struct jp {
	const char *p, *end;
	bool ok;
} jp;

static void ws(jp *j)
{
	while (j->p < j->end && isspace((unsigned char)*j->p))
		j->p++;
}

static bool lit(jp *j, const char *s)
{
	size_t n = strlen(s);
	if ((size_t)(j->end - j->p) >= n && !memcmp(j->p, s, n)) {
		j->p += n;
		return true;
	}
	return false;
}

static bool value(jp *j, char *str, size_t cap, double *num);

static bool string(jp *j, char *out, size_t cap)
{
	if (j->p >= j->end || *j->p != '"')
		return false;
	j->p++;
	size_t o = 0;
	while (j->p < j->end && *j->p != '"') {
		char c = *j->p++;
		if ((unsigned char)c < 0x20)
			return false;
		if (c == '\\') {
			if (j->p >= j->end || !strchr("\"\\/bfnrtu", *j->p))
				return false;
			c = *j->p++;
			if (c == 'u') {
				for (int i = 0; i < 4; i++)
					if (j->p >= j->end || !isxdigit((unsigned char)*j->p++))
						return false;
				c = '?';
			}
		}
		if (out && o + 1 < cap)
			out[o++] = c;
	}
	if (out && cap)
		out[o] = 0;
	if (j->p >= j->end)
		return false;
	j->p++;
	return true;
}

static bool number(jp *j, double *out)
{
	char *e;
	double d = strtod(j->p, &e);
	if (e == j->p || e > j->end)
		return false;
	j->p = e;
	if (out)
		*out = d;
	return true;
}

/* One event's fields of interest. */
typedef struct ev {
	char name[32], ph[4], cat[16];
	double id, args_id;
	bool has_id, has_args_id, has_ts, has_dur;
} ev;

static bool object(jp *j, ev *e, int depth);

static bool array(jp *j, int depth, void (*each)(const ev *))
{
	if (!lit(j, "["))
		return false;
	ws(j);
	if (lit(j, "]"))
		return true;
	for (;;) {
		ws(j);
		if (each && j->p < j->end && *j->p == '{') {
			ev e;
			memset(&e, 0, sizeof e);
			if (!object(j, &e, depth + 1))
				return false;
			each(&e);
		} else if (!value(j, NULL, 0, NULL)) {
			return false;
		}
		ws(j);
		if (lit(j, "]"))
			return true;
		if (!lit(j, ","))
			return false;
	}
}

static void (*g_each)(const ev *);

static bool object(jp *j, ev *e, int depth)
{
	if (depth > 16 || !lit(j, "{"))
		return false;
	ws(j);
	if (lit(j, "}"))
		return true;
	for (;;) {
		char key[64];
		ws(j);
		if (!string(j, key, sizeof key))
			return false;
		ws(j);
		if (!lit(j, ":"))
			return false;
		ws(j);
		char sv[64] = "";
		double nv = 0;
		if (!strcmp(key, "traceEvents")) {
			if (!array(j, depth, g_each))
				return false;
		} else if (!strcmp(key, "args") && e && *j->p == '{') {
			ev a;
			memset(&a, 0, sizeof a);
			if (!object(j, &a, depth + 1))
				return false;
			if (a.has_id) {
				e->has_args_id = true;
				e->args_id = a.id;
			}
		} else if (*j->p == '{') {
			if (!object(j, NULL, depth + 1))
				return false;
		} else if (*j->p == '[') {
			if (!array(j, depth, NULL))
				return false;
		} else if (!value(j, sv, sizeof sv, &nv)) {
			return false;
		}
		if (e) {
			if (!strcmp(key, "name"))
				snprintf(e->name, sizeof e->name, "%s", sv);
			else if (!strcmp(key, "ph"))
				snprintf(e->ph, sizeof e->ph, "%s", sv);
			else if (!strcmp(key, "cat"))
				snprintf(e->cat, sizeof e->cat, "%s", sv);
			else if (!strcmp(key, "id"))
				e->id = nv, e->has_id = true;
			else if (!strcmp(key, "ts"))
				e->has_ts = true;
			else if (!strcmp(key, "dur"))
				e->has_dur = true;
		}
		ws(j);
		if (lit(j, "}"))
			return true;
		if (!lit(j, ","))
			return false;
	}
}

static bool value(jp *j, char *str, size_t cap, double *num)
{
	ws(j);
	if (j->p >= j->end)
		return false;
	char c = *j->p;
	if (c == '"')
		return string(j, str, cap);
	if (c == '{')
		return object(j, NULL, 1);
	if (c == '[')
		return array(j, 1, NULL);
	if (lit(j, "true") || lit(j, "false") || lit(j, "null"))
		return true;
	return number(j, num);
}

/* ---- what the trace must hold ---- */

enum { MAX_IDS = 64 };
static double g_op_ids[MAX_IDS];
static int g_nops, g_writes, g_seals, g_reads, g_names, g_spawns, g_park, g_steal;
static double g_run_ids[4096], g_flow_s[4096], g_flow_f[4096];
static int g_nruns, g_nfs, g_nff, g_bad;
static int g_gpu_copy, g_gpu_record, g_gpu_resolved; /* the CUDA backend's spans (cat "gpu") */

static void on_event(const ev *e)
{
	if (!e->has_ts && strcmp(e->ph, "M"))
		g_bad++;
	if (!strcmp(e->ph, "M") && !strcmp(e->name, "thread_name"))
		g_names++;
	if (!strcmp(e->cat, "op")) {
		if (strcmp(e->ph, "X") || !e->has_dur || !e->has_args_id)
			g_bad++;
		if (!strcmp(e->name, "write"))
			g_writes++;
		else if (!strcmp(e->name, "seal"))
			g_seals++;
		else if (!strcmp(e->name, "read"))
			g_reads++;
		if (g_nops < MAX_IDS)
			g_op_ids[g_nops++] = e->args_id;
	}
	if (!strcmp(e->cat, "jobs")) {
		if (!strcmp(e->name, "run")) {
			if (strcmp(e->ph, "X") || !e->has_dur)
				g_bad++;
			if (g_nruns < 4096)
				g_run_ids[g_nruns++] = e->args_id;
		} else if (!strcmp(e->name, "spawn")) {
			g_spawns++;
		} else if (!strcmp(e->name, "park")) {
			g_park++;
		} else if (!strcmp(e->name, "steal")) {
			g_steal++;
		}
	}
	if (!strcmp(e->cat, "gpu")) {
		if (strcmp(e->ph, "X") || !e->has_dur)
			g_bad++;
		g_gpu_copy += !strcmp(e->name, "copy batch") || !strcmp(e->name, "memcpy");
		g_gpu_record += !strcmp(e->name, "event record");
		g_gpu_resolved += !strcmp(e->name, "poll (resolved)");
	}
	if (!strcmp(e->cat, "flow")) {
		if (!e->has_id)
			g_bad++;
		if (!strcmp(e->ph, "s") && g_nfs < 4096)
			g_flow_s[g_nfs++] = e->id;
		if (!strcmp(e->ph, "f") && g_nff < 4096)
			g_flow_f[g_nff++] = e->id;
	}
}

static bool contains(const double *a, int n, double v)
{
	for (int i = 0; i < n; i++)
		if (a[i] == v)
			return true;
	return false;
}

/* Where a CUDA device is usable (a CUDA build on a GPU machine): one write of a device tensor into
 * a device column, sealed, so that the backend's spans appear. False (and nothing written) elsewhere. */
static bool write_device_column(ovstage_instance_t *st, ovstage_query_handle_t q, path_dictionary_instance_t *pd)
{
#ifdef OVSTAGE_TEST_CUDA
	int n = 0;
	const char *why = "";
	ovstage_ext_get_gpu_status(&n, &why);
	if (n == 0) {
		printf("check_trace: no usable CUDA device (%s): the gpu spans are not checked\n", why);
		return false;
	}
	void *d = NULL;
	ck_assert_int_eq(cudaMalloc(&d, 4 * sizeof(float)), cudaSuccess);
	ck_assert_int_eq(cudaMemset(d, 0, 4 * sizeof(float)), cudaSuccess);
	tst_tensor tt;
	ovstage_write_data_t w = tst_wdata(&tt, d, 4, kDLFloat, 32, 1);
	tt.t.device = (DLDevice){ kDLCUDA, 0 };
	tst_wait_ok(st, ovstage_write_attribute(st, q, tst_attr(tst_tok(pd, "g")), 4, w, OVSTAGE_PRIM_MODE_UPSERT));
	ovstage_write_floor_desc_t fd = { 4, OVSTAGE_SCOPE_ALL, NULL, 0 };
	tst_wait_ok(st, ovstage_advance_write_floor(st, &fd));
	ck_assert_int_eq(cudaFree(d), cudaSuccess); /* the write's receipt came after its copy */
	return true;
#else
	(void)st, (void)q, (void)pd;
	printf("check_trace: built without CUDA: the gpu spans are not checked\n");
	return false;
#endif
}

START_TEST(test_trace_file)
{
	ovstage_instance_t *st = NULL;
	ovstage_instance_desc_t d = { "trace" };
	ck_assert_int_eq(ovstage_create_instance(&d, &st), OVSTAGE_OK);
	ck_assert(jobs_trace_on()); /* switched on when the runtime's scheduler started */
	path_dictionary_instance_t *pd = ovstage_get_path_dictionary(st);
	const char *paths[] = { "/a", "/b", "/c", "/d" };
	ovstage_query_handle_t q = tst_query_of(st, pd, paths, 4, NULL);
	ovx_token_t attr = tst_tok(pd, "x");
	float v[4] = { 1, 2, 3, 4 };
	for (uint64_t n = 1; n <= 3; n++) {
		tst_tensor tt;
		tst_wait_ok(st, ovstage_write_attribute(st, q, tst_attr(attr), n, tst_wdata(&tt, v, 4, kDLFloat, 32, 1),
							OVSTAGE_PRIM_MODE_UPSERT));
		ovstage_write_floor_desc_t fd = { n, OVSTAGE_SCOPE_ALL, NULL, 0 };
		tst_wait_ok(st, ovstage_advance_write_floor(st, &fd));
		ovstage_ordinal_range_t r = { 0, n, false };
		ovstage_read_handle_t rh;
		ovstage_enqueue_result_t e = ovstage_read_attributes(st, q, &attr, 1, r, &rh);
		ck_assert_int_eq(e.status, OVSTAGE_OK);
		ovstage_read_group_t g;
		while (ovstage_fetch_read_next(st, rh, OVSTAGE_TIMEOUT_INFINITE, &g) == OVSTAGE_OK)
			ck_assert_int_eq(ovstage_release_group(st, &g), OVSTAGE_OK);
		tst_wait_ok(st, ovstage_release_read(st, rh));
		tst_wait_ok(st, e);
	}
	bool gpu = write_device_column(st, q, pd);
	tst_wait_ok(st, ovstage_release_query(st, q));
	ck_assert_int_eq(ovstage_destroy_instance(st), OVSTAGE_OK); /* the last instance: flushes */

	FILE *f = fopen(g_path, "r");
	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fseek(f, 0, SEEK_SET);
	ck_assert_int_gt(size, 0);
	char *text = malloc((size_t)size);
	ck_assert_uint_eq(fread(text, 1, (size_t)size, f), (size_t)size);
	fclose(f);
	jp j = { text, text + size, true };
	g_each = on_event;
	ws(&j);
	ck_assert_msg(object(&j, NULL, 0), "trace is not a JSON object (at byte %ld)", (long)(j.p - text));
	ws(&j);
	ck_assert_msg(j.p == j.end, "trailing bytes after the JSON object");
	free(text);

	ck_assert_int_eq(g_bad, 0);
	ck_assert_int_ge(g_writes, 3);
	ck_assert_int_ge(g_seals, 3);
	ck_assert_int_ge(g_reads, 3);
	ck_assert_int_ge(g_names, 1);
	ck_assert_int_ge(g_spawns, 9);
	/* every op span names an op whose body ran ("run" of the same id) and whose flow has both ends */
	for (int i = 0; i < g_nops; i++) {
		ck_assert_msg(contains(g_run_ids, g_nruns, g_op_ids[i]), "op %.0f has no run", g_op_ids[i]);
		ck_assert_msg(contains(g_flow_s, g_nfs, g_op_ids[i]), "op %.0f has no flow start", g_op_ids[i]);
		ck_assert_msg(contains(g_flow_f, g_nff, g_op_ids[i]), "op %.0f has no flow end", g_op_ids[i]);
	}
	for (int i = 0; i < g_nff; i++) /* a flow ends only where it started */
		ck_assert(contains(g_flow_s, g_nfs, g_flow_f[i]));
	ck_assert_int_ge(g_nruns, g_nops);
	if (gpu) { /* the device write's copy, its completion's record, and the poll that resolved it */
		ck_assert_int_ge(g_gpu_copy, 1);
		ck_assert_int_ge(g_gpu_record, 1);
		ck_assert_int_ge(g_gpu_resolved, 1);
	} else {
		ck_assert_int_eq(g_gpu_copy + g_gpu_record + g_gpu_resolved, 0);
	}
}
END_TEST

static void remove_trace(void)
{
	remove(g_path);
}

int main(void)
{
	/* Before anything starts a scheduler: the trace is switched on once per process. */
	snprintf(g_path, sizeof g_path, "ovstage_trace_test_%d.json", (int)getpid());
	setenv("OVSTAGE_TRACE", g_path, 1);
	atexit(remove_trace); /* registered first, so it runs after the trace's own flush at exit */
	Suite *s = suite_create("trace");
	TCase *tc = tcase_create("trace");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_trace_file);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK); /* the environment and the trace state stay in this process */
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
