/* stage_util.c — a stage with N prims, float tensors, waits, seals and latest reads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static bool ovx_ok(stg *s, ovx_api_result_t r, const char *what)
{
	if (r.status == OVX_API_SUCCESS)
		return true;
	fprintf(stderr, "ovstage_bench_stage: %s failed: %.*s\n", what, (int)r.error.length,
		r.error.ptr ? r.error.ptr : "");
	path_dictionary_release_error(s->pd, r.error);
	return false;
}

static void last_error(const char *what, ovstage_api_status_t st)
{
	ovx_string_t e = ovstage_get_last_error();
	fprintf(stderr, "ovstage_bench_stage: %s: status %d: %.*s\n", what, (int)st, (int)e.length,
		e.ptr ? e.ptr : "");
}

bool stg_open(stg *s, const char *name)
{
	memset(s, 0, sizeof *s);
	ovstage_instance_desc_t d = { name };
	ovstage_api_status_t r = ovstage_create_instance(&d, &s->st);
	if (r != OVSTAGE_OK) {
		last_error("create_instance", r);
		return false;
	}
	s->pd = ovstage_get_path_dictionary(s->st);
	return true;
}

void stg_close(stg *s)
{
	if (!s->st)
		return;
	ovstage_api_status_t r = ovstage_destroy_instance(s->st);
	if (r != OVSTAGE_OK)
		last_error("destroy_instance", r);
	s->st = NULL;
}

ovx_token_t stg_token(stg *s, const char *name)
{
	ovx_string_t str = { name, strlen(name) };
	ovx_token_t t = 0;
	if (!ovx_ok(s, path_dictionary_create_tokens_from_strings(s->pd, &str, 1, &t), "create_tokens"))
		return 0;
	return t;
}

enum { FANOUT = 4096 };

/* Builds the paths of positions [first, first + n) into out. */
static bool make_paths(stg *s, const char *prefix, size_t first, size_t n, ovx_primpath_t *out)
{
	if (!n)
		return true;
	size_t hi0 = first / FANOUT, hi1 = (first + n - 1) / FANOUT;
	size_t nhi = hi1 - hi0 + 1;
	ovx_string_t *str = malloc((nhi + FANOUT) * sizeof *str);
	char *names = malloc((nhi + FANOUT) * 48);
	ovx_token_t *tk = malloc((nhi + FANOUT) * sizeof *tk);
	bool ok = str && names && tk;
	for (size_t i = 0; ok && i < nhi; i++) {
		char *nm = names + i * 48;
		int len = snprintf(nm, 48, "%s_%zu", prefix, hi0 + i);
		str[i].ptr = nm;
		str[i].length = (size_t)len;
	}
	for (size_t i = 0; ok && i < FANOUT; i++) {
		char *nm = names + (nhi + i) * 48;
		int len = snprintf(nm, 48, "p%zu", i);
		str[nhi + i].ptr = nm;
		str[nhi + i].length = (size_t)len;
	}
	if (ok)
		ok = ovx_ok(s, path_dictionary_create_tokens_from_strings(s->pd, str, nhi + FANOUT, tk), "create_tokens");
	enum { CHUNK = 1 << 20 };
	ovx_token_t *pt = ok ? malloc(2 * (size_t)CHUNK * sizeof *pt) : NULL;
	size_t *np = ok ? malloc((size_t)CHUNK * sizeof *np) : NULL;
	ok = ok && pt && np;
	for (size_t c = 0; ok && c < n; c += CHUNK) {
		size_t m = n - c < CHUNK ? n - c : CHUNK;
		for (size_t i = 0; i < m; i++) {
			size_t pos = first + c + i;
			pt[2 * i] = tk[pos / FANOUT - hi0];
			pt[2 * i + 1] = tk[nhi + pos % FANOUT];
			np[i] = 2;
		}
		ok = ovx_ok(s, path_dictionary_create_paths_from_tokens(s->pd, pt, np, m, out + c), "create_paths");
	}
	free(pt);
	free(np);
	free(str);
	free(names);
	free(tk);
	return ok;
}

ovstage_query_handle_t stg_query_range(stg *s, const char *prefix, size_t first, size_t n,
				       ovx_primpath_list_t *out_list)
{
	ovx_primpath_t *paths = malloc((n ? n : 1) * sizeof *paths);
	ovstage_query_handle_t q = OVSTAGE_INVALID_QUERY_HANDLE;
	if (!paths || !make_paths(s, prefix, first, n, paths)) {
		free(paths);
		return q;
	}
	ovx_primpath_list_t list;
	if (ovx_ok(s, path_dictionary_create_path_list_from_paths(s->pd, paths, n, &list), "create_path_list")) {
		ovstage_api_status_t r = ovstage_query_from_path_list(s->st, list, &q);
		if (r != OVSTAGE_OK) {
			last_error("query_from_path_list", r);
			path_dictionary_release_path_list_reference(s->pd, list);
			q = OVSTAGE_INVALID_QUERY_HANDLE;
		} else {
			*out_list = list;
		}
	}
	free(paths);
	return q;
}

ovstage_query_handle_t stg_query(stg *s, const char *prefix, size_t n, ovx_primpath_list_t *out_list,
				 uint64_t *setup_ns)
{
	uint64_t t0 = now_ns();
	ovstage_query_handle_t q = stg_query_range(s, prefix, 0, n, out_list);
	if (setup_ns)
		*setup_ns = now_ns() - t0;
	return q;
}

bool stg_wait(stg *s, ovstage_enqueue_result_t e, const char *what)
{
	if (e.status != OVSTAGE_OK) {
		last_error(what, e.status);
		return false;
	}
	ovstage_op_wait_result_t wr;
	ovstage_api_status_t r = ovstage_wait_op(s->st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr);
	bool ok = r == OVSTAGE_OK;
	if (!ok)
		last_error("wait_op", r);
	for (size_t i = 0; i < wr.error_op_id_count && r == OVSTAGE_OK; i++) {
		ovx_string_t m = ovstage_get_last_op_error(s->st, wr.error_op_ids[i]);
		fprintf(stderr, "ovstage_bench_stage: %s: op %llu failed: %.*s\n", what,
			(unsigned long long)wr.error_op_ids[i], (int)m.length, m.ptr ? m.ptr : "");
		ok = false;
	}
	ovstage_release_op(s->st, e.op_index);
	return ok;
}

bool stg_seal(stg *s, uint64_t n)
{
	ovstage_write_floor_desc_t d = { n, OVSTAGE_SCOPE_ALL, NULL, 0 };
	return stg_wait(s, ovstage_advance_write_floor(s->st, &d), "advance_write_floor");
}

void stg_release_query(stg *s, ovstage_query_handle_t q, ovx_primpath_list_t list)
{
	if (q != OVSTAGE_INVALID_QUERY_HANDLE)
		stg_wait(s, ovstage_release_query(s->st, q), "release_query");
	path_dictionary_release_path_list_reference(s->pd, list);
}

ovstage_write_data_t stg_fdata(ftensor *ft, void *data, int64_t rows, int lanes)
{
	memset(ft, 0, sizeof *ft);
	ft->t.data = data;
	ft->t.device.device_type = kDLCPU;
	ft->t.ndim = 1;
	ft->t.dtype.code = kDLFloat;
	ft->t.dtype.bits = 32;
	ft->t.dtype.lanes = (uint16_t)lanes;
	ft->shape[0] = rows;
	ft->t.shape = ft->shape;
	ovstage_write_data_t w;
	memset(&w, 0, sizeof w);
	w.tensors = &ft->t;
	w.tensor_count = 1;
	return w;
}

int stg_read_latest(stg *s, ovstage_query_handle_t q, const ovx_token_t *attrs, size_t nattrs, uint64_t n,
		    uint64_t *sum)
{
	ovstage_read_handle_t rh = OVSTAGE_INVALID_READ_HANDLE;
	ovstage_ordinal_range_t range = { 0, n, false };
	ovstage_enqueue_result_t e = ovstage_read_attributes(s->st, q, attrs, nattrs, range, &rh);
	if (e.status != OVSTAGE_OK) {
		last_error("read_attributes", e.status);
		return -1;
	}
	ovstage_op_wait_result_t wr;
	ovstage_wait_op(s->st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr);
	size_t failed = wr.error_op_id_count;
	if (failed) {
		ovx_string_t m = ovstage_get_last_op_error(s->st, wr.error_op_ids[0]);
		fprintf(stderr, "ovstage_bench_stage: read_attributes: %.*s\n", (int)m.length, m.ptr ? m.ptr : "");
	}
	ovstage_release_op(s->st, e.op_index);
	int groups = 0;
	ovstage_read_group_t g;
	while (!failed && ovstage_fetch_read_next(s->st, rh, OVSTAGE_TIMEOUT_INFINITE, &g) == OVSTAGE_OK) {
		if (g.data.tensor_count && g.data.tensors[0].data)
			*sum += *(const unsigned char *)g.data.tensors[0].data;
		ovstage_release_group(s->st, &g);
		groups++;
	}
	ovstage_enqueue_result_t rr = ovstage_release_read(s->st, rh);
	if (rr.status == OVSTAGE_OK) {
		ovstage_wait_op(s->st, rr.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr);
		ovstage_release_op(s->st, rr.op_index);
	}
	return failed ? -1 : groups;
}
