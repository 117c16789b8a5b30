/*
 * check_path_dictionary.c — Check suite of the engine path dictionary (engine/path_dictionary.h):
 * every vtable slot through the public path_dictionary_* wrappers (interning, errors and their
 * messages, root handling, decomposition, buffer limits, list refcounts and offsets), the engine
 * accessors, and a multi-thread stress that checks that every thread gets the same handle for the
 * same string and that strings round-trip exactly. Nothing here measures time.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ovx/path_dictionary/path_dictionary.h>

#include "jobs.h"
#include "path_dictionary.h"

/* ---- helpers ------------------------------------------------------------------------------------- */

static ovs_pd *g_pd;
static path_dictionary_instance_t *g_inst;

static void setup(void)
{
	g_pd = ovs_pd_create();
	ck_assert_ptr_nonnull(g_pd);
	g_inst = ovs_pd_instance(g_pd);
	ck_assert_ptr_nonnull(g_inst);
}

static void teardown(void)
{
	ovs_pd_destroy(g_pd);
	g_pd = NULL;
	g_inst = NULL;
}

static ovx_string_t S(const char *s)
{
	return (ovx_string_t){ s, strlen(s) };
}

#define ck_ok(expr)                                                                                            \
	do {                                                                                                   \
		ovx_api_result_t r_ = (expr);                                                                  \
		if (r_.status != OVX_API_SUCCESS) {                                                            \
			char m_[512];                                                                          \
			snprintf(m_, sizeof m_, "%.*s", (int)r_.error.length, r_.error.ptr ? r_.error.ptr : ""); \
			path_dictionary_release_error(g_inst, r_.error);                                       \
			ck_abort_msg("%s failed: %s", #expr, m_);                                              \
		}                                                                                              \
		ck_assert_ptr_null(r_.error.ptr);                                                              \
		ck_assert_uint_eq(r_.error.length, 0);                                                         \
	} while (0)

/* Asserts an error whose text contains every given fragment (NULL-terminated list), then frees it. */
static void expect_error(ovx_api_result_t r, const char *const *fragments)
{
	ck_assert_int_eq(r.status, OVX_API_ERROR);
	ck_assert_ptr_nonnull(r.error.ptr);
	ck_assert_uint_gt(r.error.length, 0);
	ck_assert_uint_eq(strlen(r.error.ptr), r.error.length); /* NUL-terminated */
	for (size_t i = 0; fragments[i]; i++)
		ck_assert_msg(strstr(r.error.ptr, fragments[i]) != NULL, "error \"%s\" lacks \"%s\"", r.error.ptr,
			      fragments[i]);
	path_dictionary_release_error(g_inst, r.error);
}
#define ck_err(expr, ...) expect_error((expr), (const char *const[]){ __VA_ARGS__, NULL })

static ovx_primpath_t P(const char *s)
{
	ovx_string_t v = S(s);
	ovx_primpath_t p = 0;
	ck_ok(path_dictionary_create_paths_from_strings(g_inst, &v, 1, &p));
	ck_assert_uint_ne(p, 0);
	return p;
}

static ovx_token_t T(const char *s)
{
	ovx_string_t v = S(s);
	ovx_token_t t = 0;
	ck_ok(path_dictionary_create_tokens_from_strings(g_inst, &v, 1, &t));
	ck_assert_uint_ne(t, 0);
	return t;
}

/* Rebuilds a path's string from get_tokens_from_paths + get_strings_from_tokens. Uses no ck_assert
 * (it also runs on stress threads, where Check's non-fork mode cannot abort); false on any failure. */
static bool path_to_string(path_dictionary_instance_t *inst, ovx_primpath_t p, char *out, size_t cap)
{
	ovx_token_t buf[64];
	ovx_token_t *tp = NULL;
	size_t nt = 0, done = 0;
	ovx_api_result_t r = path_dictionary_get_tokens_from_paths(inst, &p, 1, buf, 64, &tp, &nt, &done);
	if (r.status != OVX_API_SUCCESS || done != 1) {
		path_dictionary_release_error(inst, r.error);
		return false;
	}
	size_t o = 0;
	if (nt == 0)
		out[o++] = '/';
	for (size_t i = 0; i < nt; i++) {
		ovx_string_t s;
		r = path_dictionary_get_strings_from_tokens(inst, &tp[i], 1, &s);
		if (r.status != OVX_API_SUCCESS || o + 1 + s.length >= cap) {
			path_dictionary_release_error(inst, r.error);
			return false;
		}
		out[o++] = '/';
		memcpy(out + o, s.ptr, s.length);
		o += s.length;
	}
	out[o] = '\0';
	return true;
}

/* ---- tokens -------------------------------------------------------------------------------------- */

START_TEST(test_tokens_interning)
{
	ovx_string_t in[5] = { S("temperature"), S("pressure"), S("temperature"), { "temperature-x", 11 },
			       S("\xc3\xa9t\xc3\xa9 / x") };
	ovx_token_t t[5] = { 0 };
	ck_ok(path_dictionary_create_tokens_from_strings(g_inst, in, 5, t));
	for (int i = 0; i < 5; i++)
		ck_assert_uint_ne(t[i], 0);
	ck_assert_uint_eq(t[0], t[2]);
	ck_assert_uint_eq(t[0], t[3]); /* substring view, not NUL-terminated at length */
	ck_assert_uint_ne(t[0], t[1]);
	ck_assert_uint_ne(t[1], t[4]);

	ovx_string_t out[5];
	ck_ok(path_dictionary_get_strings_from_tokens(g_inst, t, 5, out));
	for (int i = 0; i < 5; i++) {
		ck_assert_uint_eq(out[i].length, in[i].length);
		ck_assert(memcmp(out[i].ptr, in[i].ptr, in[i].length) == 0);
		ck_assert_int_eq(out[i].ptr[out[i].length], '\0');
	}
	ck_assert_ptr_eq(out[0].ptr, out[2].ptr); /* one dictionary-owned copy */

	/* Zero counts: success, outputs untouched, NULL arrays allowed. */
	ck_ok(path_dictionary_create_tokens_from_strings(g_inst, NULL, 0, NULL));
	ck_ok(path_dictionary_get_strings_from_tokens(g_inst, NULL, 0, NULL));

	/* Engine accessors agree. */
	ck_assert_uint_eq(ovs_pd_intern_token(g_pd, "pressure", 8), t[1]);
	ck_assert_uint_eq(ovs_pd_find_token(g_pd, "pressure", 8), t[1]);
	ck_assert_uint_eq(ovs_pd_find_token(g_pd, "never-seen", 10), 0);
	ck_assert(ovs_pd_token_is_valid(g_pd, t[4]));
	ck_assert(!ovs_pd_token_is_valid(g_pd, 0));
	ck_assert(!ovs_pd_token_is_valid(g_pd, 999999));
	ck_assert_str_eq(ovs_pd_token_string(g_pd, t[1]).ptr, "pressure");
	ck_assert_ptr_null(ovs_pd_token_string(g_pd, 12345).ptr);
	ck_assert_uint_eq(ovs_pd_intern_token(g_pd, "a\0b", 3), 0);
	ck_assert_uint_eq(ovs_pd_intern_token(g_pd, "", 0), 0);
	ck_assert_uint_eq(ovs_pd_token_count(g_pd), 3);
}
END_TEST

START_TEST(test_tokens_errors)
{
	ovx_token_t t[3] = { 7, 7, 7 };
	ovx_string_t empty[2] = { S("ok"), { "", 0 } };
	ck_err(path_dictionary_create_tokens_from_strings(g_inst, empty, 2, t), "create_tokens_from_strings",
	       "strings[1] is an empty string");
	ck_assert_uint_eq(t[0], 7); /* validated before interning: outputs untouched */
	ck_assert_uint_eq(ovs_pd_find_token(g_pd, "ok", 2), 0);

	ovx_string_t nullptr_[1] = { { NULL, 0 } };
	ck_err(path_dictionary_create_tokens_from_strings(g_inst, nullptr_, 1, t), "strings[0] is an empty string");
	ovx_string_t badnull[1] = { { NULL, 3 } };
	ck_err(path_dictionary_create_tokens_from_strings(g_inst, badnull, 1, t), "strings[0] has a NULL ptr",
	       "length 3");
	ovx_string_t nul[3] = { S("a"), S("b"), { "ab\0cd", 5 } };
	ck_err(path_dictionary_create_tokens_from_strings(g_inst, nul, 3, t), "strings[2] = \"ab\\0cd\"",
	       "embedded NUL byte at offset 2");
	ck_err(path_dictionary_create_tokens_from_strings(g_inst, NULL, 2, t), "strings is NULL", "num_strings = 2");
	ck_err(path_dictionary_create_tokens_from_strings(g_inst, nul, 2, NULL), "out_tokens is NULL");

	/* Long values are shown truncated, with their length. */
	char longs[200];
	memset(longs, 'x', sizeof longs);
	longs[150] = '\0';
	ovx_string_t lv[1] = { { longs, 200 } };
	ck_err(path_dictionary_create_tokens_from_strings(g_inst, lv, 1, t), "(200 bytes)", "offset 150");

	ovx_token_t good = T("good");
	ovx_token_t q[3] = { good, 0, good };
	ovx_string_t out[3];
	ck_err(path_dictionary_get_strings_from_tokens(g_inst, q, 3, out), "get_strings_from_tokens",
	       "tokens[1] = 0 is not a token of this dictionary");
	q[1] = 424242;
	ck_err(path_dictionary_get_strings_from_tokens(g_inst, q, 3, out), "tokens[1] = 424242");
	ck_err(path_dictionary_get_strings_from_tokens(g_inst, NULL, 1, out), "tokens is NULL");
	ck_err(path_dictionary_get_strings_from_tokens(g_inst, q, 1, NULL), "out_strings is NULL");

	/* release_error tolerates the empty view. */
	path_dictionary_release_error(g_inst, (ovx_string_t){ NULL, 0 });
}
END_TEST

/* ---- paths --------------------------------------------------------------------------------------- */

START_TEST(test_paths_interning)
{
	ovx_string_t in[6] = { S("/World/A"), S("/World"), S("/"), S("/World/A"), { "/World/A/B/extra", 10 },
			       S("/a b/.././{x}:y") };
	ovx_primpath_t p[6] = { 0 };
	ck_ok(path_dictionary_create_paths_from_strings(g_inst, in, 6, p));
	ck_assert_uint_eq(p[0], p[3]);
	ck_assert_uint_eq(p[2], OVS_PD_ROOT);
	ck_assert_uint_ne(p[0], p[1]);
	ck_assert_uint_eq(p[4], P("/World/A/B"));

	/* Structure. */
	ck_assert_uint_eq(ovs_pd_path_parent(g_pd, p[0]), p[1]);
	ck_assert_uint_eq(ovs_pd_path_parent(g_pd, p[1]), OVS_PD_ROOT);
	ck_assert_uint_eq(ovs_pd_path_parent(g_pd, OVS_PD_ROOT), 0);
	ck_assert_uint_eq(ovs_pd_path_name(g_pd, OVS_PD_ROOT), 0);
	ck_assert_uint_eq(ovs_pd_path_name(g_pd, p[0]), T("A"));
	ck_assert_uint_eq(ovs_pd_path_depth(g_pd, OVS_PD_ROOT), 0);
	ck_assert_uint_eq(ovs_pd_path_depth(g_pd, p[4]), 3);
	ck_assert_uint_eq(ovs_pd_path_depth(g_pd, 0), SIZE_MAX);
	ck_assert_str_eq(ovs_pd_path_string(g_pd, p[4]).ptr, "/World/A/B");
	ck_assert_uint_eq(ovs_pd_path_string(g_pd, p[4]).length, 10);
	ck_assert_str_eq(ovs_pd_path_string(g_pd, OVS_PD_ROOT).ptr, "/");
	ck_assert_str_eq(ovs_pd_path_string(g_pd, p[5]).ptr, "/a b/.././{x}:y");
	ck_assert_uint_eq(ovs_pd_path_depth(g_pd, p[5]), 4);
	ck_assert_ptr_null(ovs_pd_path_string(g_pd, 77777).ptr);

	/* Prefix by structure, not by bytes. */
	ck_assert(ovs_pd_path_is_prefix(g_pd, p[1], p[4]));
	ck_assert(ovs_pd_path_is_prefix(g_pd, OVS_PD_ROOT, p[4]));
	ck_assert(ovs_pd_path_is_prefix(g_pd, p[4], p[4]));
	ck_assert(!ovs_pd_path_is_prefix(g_pd, p[4], p[1]));
	ck_assert(!ovs_pd_path_is_prefix(g_pd, P("/Wor"), p[1]));
	ck_assert(!ovs_pd_path_is_prefix(g_pd, P("/World/AB"), P("/World/AB2")));
	ck_assert(!ovs_pd_path_is_prefix(g_pd, 0, p[1]));

	/* Engine accessors agree with the vtable. */
	ck_assert_uint_eq(ovs_pd_intern_path(g_pd, "/World/A", 8), p[0]);
	ck_assert_uint_eq(ovs_pd_find_path(g_pd, "/World/A/B", 10), p[4]);
	ck_assert_uint_eq(ovs_pd_find_path(g_pd, "/", 1), OVS_PD_ROOT);
	ck_assert_uint_eq(ovs_pd_find_path(g_pd, "/Nope", 5), 0);
	ck_assert_uint_eq(ovs_pd_intern_path(g_pd, "World", 5), 0);
	ck_assert_uint_eq(ovs_pd_intern_path(g_pd, "/x/", 3), 0);
	ck_assert_uint_eq(ovs_pd_intern_child(g_pd, p[1], T("A")), p[0]);
	ck_assert_uint_eq(ovs_pd_intern_child(g_pd, p[1], T("c/d")), 0);
	ck_assert_uint_eq(ovs_pd_intern_child(g_pd, 0, T("A")), 0);
	ovx_primpath_t c = ovs_pd_intern_child(g_pd, p[4], T("C"));
	ck_assert_str_eq(ovs_pd_path_string(g_pd, c).ptr, "/World/A/B/C");
	ck_assert_uint_eq(P("/World/A/B/C"), c);
	ovx_token_t toks[8];
	ck_assert_uint_eq(ovs_pd_path_tokens(g_pd, c, toks, 8), 4);
	ck_assert_uint_eq(toks[0], T("World"));
	ck_assert_uint_eq(toks[3], T("C"));
	ck_assert_uint_eq(ovs_pd_path_tokens(g_pd, c, toks, 2), 4);
	ck_assert_uint_eq(ovs_pd_path_tokens(g_pd, 0, toks, 8), SIZE_MAX);
	ck_assert(ovs_pd_path_is_valid(g_pd, OVS_PD_ROOT));
	ck_assert(!ovs_pd_path_is_valid(g_pd, 0));
	ck_assert(!ovs_pd_path_is_valid(g_pd, (ovx_primpath_t)1 << 40));
	ck_assert_ptr_eq(ovs_pd_from_instance(g_inst), g_pd);
}
END_TEST

START_TEST(test_paths_errors)
{
	ovx_primpath_t p[4] = { 5, 5, 5, 5 };
	ovx_string_t rel[3] = { S("/ok"), S("/ok2"), S("a/b") };
	ck_err(path_dictionary_create_paths_from_strings(g_inst, rel, 3, p), "create_paths_from_strings",
	       "path_strings[2] = \"a/b\" is not an absolute path");
	ck_assert_uint_eq(p[0], 5);
	ck_assert_uint_eq(ovs_pd_find_path(g_pd, "/ok", 3), 0); /* nothing interned */

	ovx_string_t e[2] = { S("/ok"), { "", 0 } };
	ck_err(path_dictionary_create_paths_from_strings(g_inst, e, 2, p), "path_strings[1] is an empty string");
	ovx_string_t dbl[1] = { S("/a//b") };
	ck_err(path_dictionary_create_paths_from_strings(g_inst, dbl, 1, p), "path_strings[0] = \"/a//b\"",
	       "empty component", "offset 3");
	ovx_string_t trail[1] = { S("/a/b/") };
	ck_err(path_dictionary_create_paths_from_strings(g_inst, trail, 1, p), "path_strings[0] = \"/a/b/\"",
	       "ends with '/'");
	ovx_string_t nul[2] = { S("/x"), { "/a\0b", 4 } };
	ck_err(path_dictionary_create_paths_from_strings(g_inst, nul, 2, p), "path_strings[1] = \"/a\\0b\"",
	       "embedded NUL byte at offset 2");
	ovx_string_t ctl[1] = { S("rel\n\"q\"") };
	ck_err(path_dictionary_create_paths_from_strings(g_inst, ctl, 1, p), "\"rel\\x0a\\\"q\\\"\"");
	ovx_string_t dbl2[1] = { S("//") };
	ck_err(path_dictionary_create_paths_from_strings(g_inst, dbl2, 1, p), "ends with '/'");
	ck_err(path_dictionary_create_paths_from_strings(g_inst, NULL, 1, p), "path_strings is NULL");
	ck_err(path_dictionary_create_paths_from_strings(g_inst, rel, 1, NULL), "out_prim_paths is NULL");
	ck_ok(path_dictionary_create_paths_from_strings(g_inst, NULL, 0, NULL));

	/* create_paths_from_tokens */
	ovx_token_t a = T("a"), b = T("b"), slash = T("x/y");
	ovx_token_t toks[4] = { a, b, 999, a };
	size_t counts[3] = { 2, 0, 2 };
	ck_err(path_dictionary_create_paths_from_tokens(g_inst, toks, counts, 3, p), "create_paths_from_tokens",
	       "tokens_per_path[2] = 999 (path 2, component 0) is not a token of this dictionary");
	toks[2] = 0;
	ck_err(path_dictionary_create_paths_from_tokens(g_inst, toks, counts, 3, p), "tokens_per_path[2] = 0");
	toks[2] = slash;
	ck_err(path_dictionary_create_paths_from_tokens(g_inst, toks, counts, 3, p), "tokens_per_path[2]",
	       "\"x/y\"", "contains '/'");
	ck_err(path_dictionary_create_paths_from_tokens(g_inst, NULL, counts, 3, p), "tokens_per_path is NULL",
	       "sums to 4");
	ck_err(path_dictionary_create_paths_from_tokens(g_inst, toks, NULL, 3, p), "num_tokens_per_path is NULL");
	ck_err(path_dictionary_create_paths_from_tokens(g_inst, toks, counts, 3, NULL), "out_prim_paths is NULL");
	size_t huge[2] = { SIZE_MAX, 2 };
	ck_err(path_dictionary_create_paths_from_tokens(g_inst, toks, huge, 2, p), "num_tokens_per_path[1]",
	       "overflow");
	/* all-root paths need no tokens array */
	size_t zeros[2] = { 0, 0 };
	ck_ok(path_dictionary_create_paths_from_tokens(g_inst, NULL, zeros, 2, p));
	ck_assert_uint_eq(p[0], OVS_PD_ROOT);
	ck_assert_uint_eq(p[1], OVS_PD_ROOT);

	/* get_tokens_from_paths */
	ovx_primpath_t good = P("/a/b");
	ovx_primpath_t bad[3] = { good, 31337, good };
	ovx_token_t buf[8];
	ovx_token_t *per[3];
	size_t nper[3], done = 99;
	ck_err(path_dictionary_get_tokens_from_paths(g_inst, bad, 3, buf, 8, per, nper, &done),
	       "get_tokens_from_paths", "prim_paths[1] = 31337 is not a prim path of this dictionary");
	ck_assert_uint_eq(done, 1);
	bad[1] = 0;
	ck_err(path_dictionary_get_tokens_from_paths(g_inst, bad, 3, buf, 8, per, nper, &done), "prim_paths[1] = 0");
	ck_err(path_dictionary_get_tokens_from_paths(g_inst, bad, 3, buf, 8, per, nper, NULL),
	       "out_num_paths_processed is NULL");
	ck_err(path_dictionary_get_tokens_from_paths(g_inst, NULL, 3, buf, 8, per, nper, &done), "prim_paths is NULL");
	ck_err(path_dictionary_get_tokens_from_paths(g_inst, bad, 3, NULL, 8, per, nper, &done), "token_buffer is NULL");
	ck_err(path_dictionary_get_tokens_from_paths(g_inst, bad, 3, buf, 8, NULL, nper, &done),
	       "out_tokens_per_path is NULL");
	ck_err(path_dictionary_get_tokens_from_paths(g_inst, bad, 3, buf, 8, per, NULL, &done),
	       "out_num_tokens_per_path is NULL");
}
END_TEST

START_TEST(test_paths_from_tokens_roundtrip)
{
	const char *strs[] = { "/World/env_0/robot/link_1", "/World", "/", "/World/env_0/robot", "/x y/\xe2\x82\xac" };
	enum { N = 5 };
	ovx_primpath_t p[N];
	for (int i = 0; i < N; i++)
		p[i] = P(strs[i]);

	/* decompose all at once */
	ovx_token_t buf[16];
	ovx_token_t *per[N];
	size_t nper[N], done = 0;
	ck_ok(path_dictionary_get_tokens_from_paths(g_inst, p, N, buf, 16, per, nper, &done));
	ck_assert_uint_eq(done, N);
	ck_assert_uint_eq(nper[0], 4);
	ck_assert_uint_eq(nper[1], 1);
	ck_assert_uint_eq(nper[2], 0); /* root: zero tokens */
	ck_assert_uint_eq(nper[3], 3);
	ck_assert_ptr_eq(per[0], buf);
	ck_assert_ptr_eq(per[1], buf + 4);
	ck_assert_ptr_eq(per[3], buf + 5);
	ck_assert_ptr_eq(per[4], buf + 8);

	/* rebuild from tokens: same handles */
	ovx_token_t flat[16];
	size_t k = 0;
	for (int i = 0; i < N; i++)
		for (size_t c = 0; c < nper[i]; c++)
			flat[k++] = per[i][c];
	ovx_primpath_t q[N];
	ck_ok(path_dictionary_create_paths_from_tokens(g_inst, flat, nper, N, q));
	for (int i = 0; i < N; i++)
		ck_assert_uint_eq(q[i], p[i]);

	/* and strings round trip exactly */
	for (int i = 0; i < N; i++) {
		char s[256];
		ck_assert(path_to_string(g_inst, p[i], s, sizeof s));
		ck_assert_str_eq(s, strs[i]);
	}

	/* a new path from tokens exists afterwards as a string */
	ovx_token_t nt[3] = { T("new"), T("from"), T("tokens") };
	size_t nn = 3;
	ovx_primpath_t np;
	ck_ok(path_dictionary_create_paths_from_tokens(g_inst, nt, &nn, 1, &np));
	ck_assert_uint_eq(P("/new/from/tokens"), np);
	ck_assert_uint_eq(ovs_pd_find_path(g_pd, "/new/from", 9), ovs_pd_path_parent(g_pd, np));
}
END_TEST

START_TEST(test_tokens_from_paths_buffer)
{
	ovx_primpath_t p[4] = { P("/a/b"), P("/c"), P("/"), P("/d/e/f") };
	ovx_token_t buf[6];
	ovx_token_t *per[4] = { NULL, NULL, NULL, NULL };
	size_t nper[4] = { 0 }, done = 99;

	/* room for the first two (3 tokens), not the 4th (needs 3 more of the remaining 1); the root in
	 * between fits with zero tokens. */
	ck_ok(path_dictionary_get_tokens_from_paths(g_inst, p, 4, buf, 4, per, nper, &done));
	ck_assert_uint_eq(done, 3);
	ck_assert_uint_eq(nper[0], 2);
	ck_assert_uint_eq(nper[1], 1);
	ck_assert_uint_eq(nper[2], 0);
	ck_assert_ptr_eq(per[2], buf + 3);

	/* the first path does not fit: zero processed, success */
	done = 99;
	ck_ok(path_dictionary_get_tokens_from_paths(g_inst, p, 4, buf, 1, per, nper, &done));
	ck_assert_uint_eq(done, 0);

	/* a zero-size, NULL buffer still decomposes leading roots */
	ovx_primpath_t roots[2] = { OVS_PD_ROOT, P("/z") };
	ck_ok(path_dictionary_get_tokens_from_paths(g_inst, roots, 2, NULL, 0, per, nper, &done));
	ck_assert_uint_eq(done, 1);
	ck_assert_uint_eq(nper[0], 0);

	/* retry with a larger buffer from where it stopped */
	ck_ok(path_dictionary_get_tokens_from_paths(g_inst, p, 4, buf, 4, per, nper, &done));
	ck_assert_uint_eq(done, 3);
	ck_ok(path_dictionary_get_tokens_from_paths(g_inst, p + done, 4 - done, buf, 6, per, nper, &done));
	ck_assert_uint_eq(done, 1);
	ck_assert_uint_eq(nper[0], 3);
	ovx_string_t s[3];
	ck_ok(path_dictionary_get_strings_from_tokens(g_inst, per[0], 3, s));
	ck_assert_str_eq(s[0].ptr, "d");
	ck_assert_str_eq(s[2].ptr, "f");

	/* zero paths */
	done = 99;
	ck_ok(path_dictionary_get_tokens_from_paths(g_inst, NULL, 0, NULL, 0, NULL, NULL, &done));
	ck_assert_uint_eq(done, 0);
}
END_TEST

/* ---- lists --------------------------------------------------------------------------------------- */

START_TEST(test_lists_basic)
{
	ovx_primpath_t p[5] = { P("/A"), P("/B"), P("/C"), P("/A"), OVS_PD_ROOT };
	ovx_primpath_list_t l1 = 0, l2 = 0, l3 = 0;
	ck_ok(path_dictionary_create_path_list_from_paths(g_inst, p, 5, &l1));
	ck_ok(path_dictionary_create_path_list_from_paths(g_inst, p, 5, &l2));
	ck_assert_uint_ne(l1, 0);
	ck_assert_uint_ne(l1, l2); /* always a new list */
	ovx_string_t s[3] = { S("/A"), S("/B"), S("/C") };
	ck_ok(path_dictionary_create_path_list_from_strings(g_inst, s, 3, &l3));

	size_t n = 0;
	ck_ok(path_dictionary_get_num_paths_from_path_list(g_inst, l1, &n));
	ck_assert_uint_eq(n, 5); /* duplicates kept */
	ck_ok(path_dictionary_get_num_paths_from_path_list(g_inst, l3, &n));
	ck_assert_uint_eq(n, 3);

	ovx_primpath_t out[8];
	ck_ok(path_dictionary_get_paths_from_path_list(g_inst, l1, 0, 8, out, &n));
	ck_assert_uint_eq(n, 5);
	for (int i = 0; i < 5; i++)
		ck_assert_uint_eq(out[i], p[i]);
	ck_ok(path_dictionary_get_paths_from_path_list(g_inst, l1, 1, 2, out, &n));
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(out[0], p[1]);
	ck_assert_uint_eq(out[1], p[2]);
	ck_ok(path_dictionary_get_paths_from_path_list(g_inst, l1, 3, 100, out, &n));
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(out[0], p[3]);
	ck_ok(path_dictionary_get_paths_from_path_list(g_inst, l1, 5, 4, out, &n));
	ck_assert_uint_eq(n, 0);
	ck_ok(path_dictionary_get_paths_from_path_list(g_inst, l1, 2, 0, NULL, &n));
	ck_assert_uint_eq(n, 0);
	ck_err(path_dictionary_get_paths_from_path_list(g_inst, l1, 6, 4, out, &n), "get_paths_from_path_list",
	       "start_offset 6 is past the end", "(5 paths)");
	ck_ok(path_dictionary_get_paths_from_path_list(g_inst, l3, 0, 3, out, &n));
	ck_assert_uint_eq(out[0], p[0]);
	ck_assert_uint_eq(out[2], p[2]);

	/* engine view */
	const ovx_primpath_t *view = NULL;
	size_t vc = 0;
	ck_assert(ovs_pd_list_view(g_pd, l1, &view, &vc));
	ck_assert_uint_eq(vc, 5);
	ck_assert_uint_eq(view[4], OVS_PD_ROOT);
	ck_assert(ovs_pd_list_is_valid(g_pd, l1));
	ck_assert_uint_eq(ovs_pd_live_list_count(g_pd), 3);

	/* empty lists */
	ovx_primpath_list_t e1 = 0, e2 = 0;
	ck_ok(path_dictionary_create_path_list_from_paths(g_inst, NULL, 0, &e1));
	ck_ok(path_dictionary_create_path_list_from_strings(g_inst, NULL, 0, &e2));
	ck_assert_uint_ne(e1, 0);
	ck_assert_uint_ne(e1, e2);
	ck_ok(path_dictionary_get_num_paths_from_path_list(g_inst, e1, &n));
	ck_assert_uint_eq(n, 0);
	ck_ok(path_dictionary_get_paths_from_path_list(g_inst, e1, 0, 8, out, &n));
	ck_assert_uint_eq(n, 0);
	ck_assert(ovs_pd_list_view(g_pd, e2, &view, &vc));
	ck_assert_uint_eq(vc, 0);

	ck_ok(path_dictionary_release_path_list_reference(g_inst, l1));
	ck_ok(path_dictionary_release_path_list_reference(g_inst, l2));
	ck_ok(path_dictionary_release_path_list_reference(g_inst, l3));
	ck_ok(path_dictionary_release_path_list_reference(g_inst, e1));
	ck_ok(path_dictionary_release_path_list_reference(g_inst, e2));
	ck_assert_uint_eq(ovs_pd_live_list_count(g_pd), 0);
}
END_TEST

START_TEST(test_lists_refcount)
{
	ovx_primpath_t p[2] = { P("/A"), P("/B") };
	ovx_primpath_list_t l = 0;
	ck_ok(path_dictionary_create_path_list_from_paths(g_inst, p, 2, &l));
	ck_ok(path_dictionary_add_path_list_reference(g_inst, l));
	ck_ok(path_dictionary_add_path_list_reference(g_inst, l));
	ck_ok(path_dictionary_release_path_list_reference(g_inst, l));
	ck_ok(path_dictionary_release_path_list_reference(g_inst, l));
	size_t n = 0;
	ck_ok(path_dictionary_get_num_paths_from_path_list(g_inst, l, &n)); /* one reference left */
	ck_assert_uint_eq(n, 2);
	ck_ok(path_dictionary_release_path_list_reference(g_inst, l)); /* -> 0: erased */

	char hs[32];
	snprintf(hs, sizeof hs, "path_list %llu ", (unsigned long long)l);
	ovx_primpath_t out[2];
	ck_err(path_dictionary_get_num_paths_from_path_list(g_inst, l, &n), "get_num_paths_from_path_list", hs,
	       "not a live path list");
	ck_err(path_dictionary_get_paths_from_path_list(g_inst, l, 0, 2, out, &n), "get_paths_from_path_list", hs);
	ck_err(path_dictionary_add_path_list_reference(g_inst, l), "add_path_list_reference", hs, "already released");
	ck_err(path_dictionary_release_path_list_reference(g_inst, l), "release_path_list_reference", hs);
	const ovx_primpath_t *view;
	ck_assert(!ovs_pd_list_view(g_pd, l, &view, &n));
	ck_assert(!ovs_pd_list_is_valid(g_pd, l));

	/* the slot is recycled, the stale handle stays dead */
	ovx_primpath_list_t l2 = 0;
	ck_ok(path_dictionary_create_path_list_from_paths(g_inst, p, 1, &l2));
	ck_assert_uint_ne(l2, l);
	ck_assert_uint_eq((uint32_t)l2, (uint32_t)l); /* same slot, new generation */
	ck_err(path_dictionary_get_num_paths_from_path_list(g_inst, l, &n), "not a live path list");
	ck_ok(path_dictionary_get_num_paths_from_path_list(g_inst, l2, &n));
	ck_assert_uint_eq(n, 1);

	/* invalid handle 0: add/release are successful no-ops; the readers reject it */
	ck_ok(path_dictionary_add_path_list_reference(g_inst, OVX_INVALID_PRIMPATH_LIST));
	ck_ok(path_dictionary_release_path_list_reference(g_inst, OVX_INVALID_PRIMPATH_LIST));
	ck_err(path_dictionary_get_num_paths_from_path_list(g_inst, 0, &n), "path_list 0 ");
	/* never-minted handles */
	ck_err(path_dictionary_add_path_list_reference(g_inst, ((uint64_t)5 << 32) | 9999), "not a live path list");
	ck_err(path_dictionary_release_path_list_reference(g_inst, 123), "path_list 123 ");
	ck_err(path_dictionary_get_paths_from_path_list(g_inst, (uint64_t)1 << 40, 0, 1, out, &n), "not a live");

	ck_ok(path_dictionary_release_path_list_reference(g_inst, l2));
}
END_TEST

START_TEST(test_lists_errors)
{
	ovx_primpath_t p[3] = { P("/A"), 4242, P("/B") };
	ovx_primpath_list_t l = 77;
	ck_err(path_dictionary_create_path_list_from_paths(g_inst, p, 3, &l), "create_path_list_from_paths",
	       "paths[1] = 4242 is not a prim path of this dictionary");
	ck_assert_uint_eq(l, 77);
	p[1] = 0;
	ck_err(path_dictionary_create_path_list_from_paths(g_inst, p, 3, &l), "paths[1] = 0");
	ck_err(path_dictionary_create_path_list_from_paths(g_inst, NULL, 3, &l), "paths is NULL");
	ck_err(path_dictionary_create_path_list_from_paths(g_inst, p, 1, NULL), "out_path_list is NULL");
	ck_assert_uint_eq(ovs_pd_list_create(g_pd, p, 3), 0);

	ovx_string_t s[3] = { S("/ok"), S("/fine"), S("not/abs") };
	ck_err(path_dictionary_create_path_list_from_strings(g_inst, s, 3, &l), "create_path_list_from_strings",
	       "path_strings[2] = \"not/abs\" is not an absolute path");
	ck_assert_uint_eq(l, 77);
	ck_assert_uint_eq(ovs_pd_live_list_count(g_pd), 0);
	ck_err(path_dictionary_create_path_list_from_strings(g_inst, NULL, 3, &l), "path_strings is NULL");
	ck_err(path_dictionary_create_path_list_from_strings(g_inst, s, 2, NULL), "out_path_list is NULL");

	ovx_primpath_list_t ok = 0;
	ck_ok(path_dictionary_create_path_list_from_strings(g_inst, s, 2, &ok));
	size_t n;
	ck_err(path_dictionary_get_num_paths_from_path_list(g_inst, ok, NULL), "out_num_paths is NULL");
	ck_err(path_dictionary_get_paths_from_path_list(g_inst, ok, 0, 1, p, NULL), "out_num_paths is NULL");
	ck_err(path_dictionary_get_paths_from_path_list(g_inst, ok, 0, 1, NULL, &n), "out_paths is NULL",
	       "max_paths = 1");

	/* a large list from strings (heap path of the implementation) */
	enum { BIG = 300 };
	static char names[BIG][16];
	ovx_string_t big[BIG];
	for (int i = 0; i < BIG; i++) {
		snprintf(names[i], sizeof names[i], "/big/%d", i);
		big[i] = S(names[i]);
	}
	ovx_primpath_list_t bl = 0;
	ck_ok(path_dictionary_create_path_list_from_strings(g_inst, big, BIG, &bl));
	ovx_primpath_t outp[BIG];
	ck_ok(path_dictionary_get_paths_from_path_list(g_inst, bl, 0, BIG, outp, &n));
	ck_assert_uint_eq(n, BIG);
	for (int i = 0; i < BIG; i++)
		ck_assert_str_eq(ovs_pd_path_string(g_pd, outp[i]).ptr, names[i]);
	ck_ok(path_dictionary_release_path_list_reference(g_inst, bl));
	ck_ok(path_dictionary_release_path_list_reference(g_inst, ok));
}
END_TEST

START_TEST(test_growth)
{
	/* Enough entries to grow every shard's table several times. */
	enum { N = 20000 };
	static ovx_primpath_t ids[N];
	char buf[64];
	for (int i = 0; i < N; i++) {
		int n = snprintf(buf, sizeof buf, "/g%d/h%d/leaf%d", i % 17, i % 101, i);
		ids[i] = ovs_pd_intern_path(g_pd, buf, (size_t)n);
		ck_assert_uint_ne(ids[i], 0);
	}
	for (int i = 0; i < N; i++) {
		int n = snprintf(buf, sizeof buf, "/g%d/h%d/leaf%d", i % 17, i % 101, i);
		ck_assert_uint_eq(ovs_pd_find_path(g_pd, buf, (size_t)n), ids[i]);
		ck_assert_str_eq(ovs_pd_path_string(g_pd, ids[i]).ptr, buf);
	}
	/* 1 root + 17 + (17*101 distinct (g,h) pairs reachable: i%17,i%101 are coprime moduli) + N */
	ck_assert_uint_eq(ovs_pd_path_count(g_pd), 1 + 17 + 17 * 101 + N);
}
END_TEST

/* ---- multi-thread stress ------------------------------------------------------------------------- */

#ifdef OVSTAGE_TSAN
enum { ST_THREADS = 4, ST_STRINGS = 400, ST_LIST_ROUNDS = 300, ST_SHARED_LISTS = 8 };
#else
enum { ST_THREADS = 8, ST_STRINGS = 4000, ST_LIST_ROUNDS = 4000, ST_SHARED_LISTS = 16 };
#endif

static char st_path[ST_STRINGS][96];  /* path strings, shared read-only input */
static char st_tok[ST_STRINGS][24];   /* token strings */
static ovx_primpath_t st_paths[ST_THREADS][ST_STRINGS];
static ovx_token_t st_toks[ST_THREADS][ST_STRINGS];
static _Atomic ovx_primpath_list_t st_shared[ST_SHARED_LISTS];
static atomic_int st_failures;

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

#define ST_CHECK(cond)                                                                                      \
	do {                                                                                                \
		if (!(cond)) {                                                                              \
			fprintf(stderr, "stress check failed at line %d: %s\n", __LINE__, #cond);           \
			atomic_fetch_add_explicit(&st_failures, 1, memory_order_relaxed);                  \
		}                                                                                           \
	} while (0)

static void st_release_error(ovx_api_result_t r)
{
	path_dictionary_release_error(g_inst, r.error);
}

static void *st_thread(void *arg)
{
	int t = (int)(intptr_t)arg;
	uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(t + 1);
	/* 1. intern in a thread-specific order (some via the vtable in batches, some via accessors) */
	int *order = malloc(sizeof(int) * ST_STRINGS);
	for (int i = 0; i < ST_STRINGS; i++)
		order[i] = i;
	for (int i = ST_STRINGS - 1; i > 0; i--) {
		int j = (int)(xorshift(&rng) % (uint64_t)(i + 1));
		int tmp = order[i];
		order[i] = order[j];
		order[j] = tmp;
	}
	for (int k = 0; k < ST_STRINGS; k++) {
		int i = order[k];
		if ((k + t) % 3 == 0) {
			ovx_string_t s[2] = { { st_path[i], strlen(st_path[i]) }, { st_tok[i], strlen(st_tok[i]) } };
			ovx_primpath_t p;
			ovx_token_t tk;
			ovx_api_result_t r = path_dictionary_create_paths_from_strings(g_inst, s, 1, &p);
			ST_CHECK(r.status == OVX_API_SUCCESS);
			st_release_error(r);
			r = path_dictionary_create_tokens_from_strings(g_inst, s + 1, 1, &tk);
			ST_CHECK(r.status == OVX_API_SUCCESS);
			st_release_error(r);
			st_paths[t][i] = p;
			st_toks[t][i] = tk;
		} else {
			st_paths[t][i] = ovs_pd_intern_path(g_pd, st_path[i], strlen(st_path[i]));
			st_toks[t][i] = ovs_pd_intern_token(g_pd, st_tok[i], strlen(st_tok[i]));
		}
		/* exact round trip of what we just got, while others keep inserting */
		ovx_string_t ps = ovs_pd_path_string(g_pd, st_paths[t][i]);
		ST_CHECK(ps.ptr && strcmp(ps.ptr, st_path[i]) == 0);
		ovx_string_t ts = ovs_pd_token_string(g_pd, st_toks[t][i]);
		ST_CHECK(ts.ptr && strcmp(ts.ptr, st_tok[i]) == 0);
		if (k % 8 == 0) {
			char rebuilt[128];
			ST_CHECK(path_to_string(g_inst, st_paths[t][i], rebuilt, sizeof rebuilt) &&
				 strcmp(rebuilt, st_path[i]) == 0);
			ovx_primpath_t parent = ovs_pd_path_parent(g_pd, st_paths[t][i]);
			ST_CHECK(ovs_pd_path_is_prefix(g_pd, parent, st_paths[t][i]));
		}
	}
	free(order);

	/* 2. list churn: swap fresh lists into shared slots, release the old ones, and read whatever
	 * handle is found there (it may be released concurrently: then an error, never garbage). Each
	 * list holds `len` copies of one path, with len derived from that path, so a successful read
	 * can be checked for consistency. */
	ovx_primpath_list_t remembered[ST_SHARED_LISTS] = { 0 };
	for (int round = 0; round < ST_LIST_ROUNDS; round++) {
		int which = (int)(xorshift(&rng) % ST_SHARED_LISTS);
		int i = (int)(xorshift(&rng) % ST_STRINGS);
		ovx_primpath_t p = st_paths[t][i];
		size_t len = (size_t)(p % 7);
		ovx_primpath_t content[7];
		for (size_t c = 0; c < len; c++)
			content[c] = p;
		if (round % 2 == 0) {
			ovx_primpath_list_t l = ovs_pd_list_create(g_pd, content, len);
			ST_CHECK(l != 0);
			if (round % 4 == 0) { /* exercise add_ref/release pairs too */
				ST_CHECK(ovs_pd_list_add_ref(g_pd, l));
				ST_CHECK(ovs_pd_list_release(g_pd, l));
			}
			/* memory_order_acq_rel: the swapped-out handle is released by us (we own its reference) */
			ovx_primpath_list_t old = atomic_exchange_explicit(&st_shared[which], l, memory_order_acq_rel);
			if (old) {
				ovx_api_result_t r = path_dictionary_release_path_list_reference(g_inst, old);
				ST_CHECK(r.status == OVX_API_SUCCESS);
				st_release_error(r);
			}
		} else {
			/* racy read: we hold no reference, another thread may release it at any time. Half of
			 * the reads use a handle remembered from an earlier round, which is usually stale by now
			 * (released, its slot possibly recycled under a new generation). */
			ovx_primpath_list_t l = atomic_load_explicit(&st_shared[which], memory_order_acquire);
			if (round % 4 == 3) {
				ovx_primpath_list_t cur = l;
				l = remembered[which];
				remembered[which] = cur;
			}
			if (!l)
				continue;
			ovx_primpath_t out[8];
			size_t n = 99;
			ovx_api_result_t r = path_dictionary_get_paths_from_path_list(g_inst, l, 0, 8, out, &n);
			if (r.status == OVX_API_SUCCESS) {
				ST_CHECK(n < 7);
				for (size_t c = 0; c < n; c++)
					ST_CHECK(out[c] == out[0] && (size_t)(out[0] % 7) == n);
			} else {
				ST_CHECK(r.error.ptr && strstr(r.error.ptr, "not a live path list"));
			}
			st_release_error(r);
			size_t cnt = 0;
			r = path_dictionary_get_num_paths_from_path_list(g_inst, l, &cnt);
			ST_CHECK(r.status == OVX_API_ERROR || cnt < 7);
			st_release_error(r);
		}
	}
	return NULL;
}

START_TEST(test_stress_threads)
{
	/* Overlapping paths: a small component vocabulary, so threads race on the same prefixes. */
	uint64_t rng = 12345;
	for (int i = 0; i < ST_STRINGS; i++) {
		int depth = 1 + (int)(xorshift(&rng) % 5);
		size_t o = 0;
		for (int d = 0; d < depth; d++)
			o += (size_t)snprintf(st_path[i] + o, sizeof st_path[i] - o, "/c%u",
					      (unsigned)(xorshift(&rng) % (d == 0 ? 4 : 40)));
		snprintf(st_tok[i], sizeof st_tok[i], "tok%u", (unsigned)(xorshift(&rng) % (ST_STRINGS / 2)));
	}
	for (int w = 0; w < ST_SHARED_LISTS; w++)
		atomic_init(&st_shared[w], 0);
	atomic_init(&st_failures, 0);

	pthread_t th[ST_THREADS];
	for (int t = 0; t < ST_THREADS; t++)
		ck_assert_int_eq(pthread_create(&th[t], NULL, st_thread, (void *)(intptr_t)t), 0);
	for (int t = 0; t < ST_THREADS; t++)
		ck_assert_int_eq(pthread_join(th[t], NULL), 0);
	ck_assert_int_eq(atomic_load(&st_failures), 0);

	/* Same handle for the same string in every thread; different strings, different handles. */
	for (int i = 0; i < ST_STRINGS; i++) {
		for (int t = 1; t < ST_THREADS; t++) {
			ck_assert_uint_eq(st_paths[t][i], st_paths[0][i]);
			ck_assert_uint_eq(st_toks[t][i], st_toks[0][i]);
		}
		ck_assert_uint_eq(ovs_pd_find_path(g_pd, st_path[i], strlen(st_path[i])), st_paths[0][i]);
	}
	for (int i = 0; i < ST_STRINGS; i++) {
		for (int j = i + 1; j < ST_STRINGS && j < i + 50; j++) {
			ck_assert_int_eq(st_paths[0][i] == st_paths[0][j], strcmp(st_path[i], st_path[j]) == 0);
			ck_assert_int_eq(st_toks[0][i] == st_toks[0][j], strcmp(st_tok[i], st_tok[j]) == 0);
		}
	}
	/* Ids are dense: every id up to the count is valid. */
	size_t np = ovs_pd_path_count(g_pd);
	for (size_t id = 1; id <= np; id++)
		ck_assert(ovs_pd_path_is_valid(g_pd, id));
	ck_assert(!ovs_pd_path_is_valid(g_pd, np + 1));

	/* Release what is left; nothing leaks (ASan checks at exit), nothing stays live. */
	for (int w = 0; w < ST_SHARED_LISTS; w++) {
		ovx_primpath_list_t l = atomic_load(&st_shared[w]);
		if (l)
			ck_ok(path_dictionary_release_path_list_reference(g_inst, l));
	}
	ck_assert_uint_eq(ovs_pd_live_list_count(g_pd), 0);
}
END_TEST

/* Concurrent first-time interning of the same few strings: every thread must get the same ids. */
enum { RACE_THREADS = 6, RACE_N = 256 };
static ovx_primpath_t race_out[RACE_THREADS][RACE_N];
static atomic_int race_go;

static void *race_thread(void *arg)
{
	int t = (int)(intptr_t)arg;
	/* acquire spin: just a start line so that threads overlap; pairs with the release store below */
	while (!atomic_load_explicit(&race_go, memory_order_acquire))
		;
	char buf[64];
	for (int i = 0; i < RACE_N; i++) {
		int k = (t % 2) ? RACE_N - 1 - i : i;
		int n = snprintf(buf, sizeof buf, "/race/n%d/m%d", k % 16, k);
		race_out[t][k] = ovs_pd_intern_path(g_pd, buf, (size_t)n);
	}
	return NULL;
}

START_TEST(test_stress_first_insert_race)
{
	int rounds = 1;
#ifndef OVSTAGE_TSAN
	rounds = 20;
#endif
	for (int round = 0; round < rounds; round++) {
		ovs_pd_destroy(g_pd);
		g_pd = ovs_pd_create();
		g_inst = ovs_pd_instance(g_pd);
		atomic_store(&race_go, 0);
		pthread_t th[RACE_THREADS];
		for (int t = 0; t < RACE_THREADS; t++)
			ck_assert_int_eq(pthread_create(&th[t], NULL, race_thread, (void *)(intptr_t)t), 0);
		atomic_store_explicit(&race_go, 1, memory_order_release);
		for (int t = 0; t < RACE_THREADS; t++)
			pthread_join(th[t], NULL);
		for (int k = 0; k < RACE_N; k++)
			for (int t = 1; t < RACE_THREADS; t++)
				ck_assert_uint_eq(race_out[t][k], race_out[0][k]);
		/* root + /race + 16 + RACE_N */
		ck_assert_uint_eq(ovs_pd_path_count(g_pd), 1 + 1 + 16 + RACE_N);
	}
}
END_TEST

/* ---- bulk interning (path_dict_bulk.c) ----------------------------------------------------------- */

/* The universe of the bulk tests: /s<a>/e<b>/p<c>, every prefix a path too. */
#ifdef OVSTAGE_TSAN
enum { BU_A = 4, BU_B = 16, BU_C = 64, BU_THREADS = 8, BU_ROUNDS = 2 };
#else
enum { BU_A = 8, BU_B = 32, BU_C = 64, BU_THREADS = 24, BU_ROUNDS = 3 };
#endif
enum { BU_LEAVES = BU_A * BU_B * BU_C, BU_PATHS = 1 + BU_A + BU_A * BU_B + BU_LEAVES };
static atomic_int bu_failures;

#define BU_CHECK(cond)                                                                                      \
	do {                                                                                                \
		if (!(cond)) {                                                                              \
			fprintf(stderr, "bulk stress check failed at line %d: %s\n", __LINE__, #cond);      \
			atomic_fetch_add_explicit(&bu_failures, 1, memory_order_relaxed);                  \
		}                                                                                           \
	} while (0)

/* ck_assert records every passing check (a write per check without fork): loops check with
 * BU_CHECK and assert the count once. */
#define BU_DONE() ck_assert_int_eq(atomic_exchange(&bu_failures, 0), 0)

static char bu_str[BU_LEAVES][32];
static char bu_tok[BU_A + BU_B + BU_C][8]; /* s<a>, e<b>, p<c> */

static void bu_make_strings(void)
{
	for (int a = 0; a < BU_A; a++)
		snprintf(bu_tok[a], sizeof bu_tok[a], "s%d", a);
	for (int b = 0; b < BU_B; b++)
		snprintf(bu_tok[BU_A + b], sizeof bu_tok[0], "e%d", b);
	for (int c = 0; c < BU_C; c++)
		snprintf(bu_tok[BU_A + BU_B + c], sizeof bu_tok[0], "p%d", c);
	for (int u = 0; u < BU_LEAVES; u++)
		snprintf(bu_str[u], sizeof bu_str[u], "/s%d/e%d/p%d", u / (BU_B * BU_C), u / BU_C % BU_B, u % BU_C);
}

/* Every invariant of the dictionary after bulk interning of the whole universe (some of it
 * possibly by several threads): one id per path, dense ids, parents before children, strings
 * round-trip, lookups agree. */
static void bu_check_dictionary(void)
{
	BU_CHECK((ovs_pd_path_count(g_pd)) == (BU_PATHS));
	static unsigned char seen[BU_PATHS + 1];
	memset(seen, 0, sizeof seen);
	for (ovx_primpath_t id = 1; id <= BU_PATHS; id++) { /* dense: ids 1..count are all valid */
		BU_CHECK(ovs_pd_path_is_valid(g_pd, id));
		ovx_string_t s = ovs_pd_path_string(g_pd, id);
		BU_CHECK(s.ptr != NULL);
		BU_CHECK((strlen(s.ptr)) == (s.length));
		BU_CHECK(ovs_pd_find_path(g_pd, s.ptr, s.length) == id); /* one id per string */
		ovx_primpath_t parent = ovs_pd_path_parent(g_pd, id);
		if (id != OVS_PD_ROOT)
			BU_CHECK((parent) < (id)); /* parents before children */
	}
	ck_assert(!ovs_pd_path_is_valid(g_pd, BU_PATHS + 1));
	for (int u = 0; u < BU_LEAVES; u++) {
		ovx_primpath_t id = ovs_pd_find_path(g_pd, bu_str[u], strlen(bu_str[u]));
		BU_CHECK((id) != (0));
		BU_CHECK((id) <= (BU_PATHS));
		BU_CHECK(seen[id] == 0); /* distinct strings, distinct ids */
		seen[id] = 1;
		BU_CHECK(strcmp(ovs_pd_path_string(g_pd, id).ptr, bu_str[u]) == 0);
		BU_CHECK(ovs_pd_path_depth(g_pd, id) == 3);
	}
	BU_DONE();
}

static jobs_sched *bu_sched(int workers)
{
	jobs_config c;
	jobs_config_default(&c);
	c.workers = workers;
	const char *err = NULL;
	jobs_sched *s = jobs_sched_create(&c, &err);
	ck_assert_msg(s != NULL, "jobs_sched_create: %s", err ? err : "?");
	return s;
}

/* One bulk call of each kind over the whole universe (with duplicates and some paths interned
 * before), with and without a scheduler: the same ids as single interning would give. */
START_TEST(test_bulk_matches_single)
{
	bu_make_strings();
	jobs_sched *sched = _i ? bu_sched(3) : NULL;
	ovs_pd_set_sched(g_pd, sched);
	enum { N = BU_LEAVES + BU_LEAVES / 4 };
	ovx_string_t *in = malloc(N * sizeof *in);
	ovx_primpath_t *out = malloc(N * sizeof *out);
	ck_assert(in && out);
	for (int i = 0; i < N; i++) {
		int u = i < BU_LEAVES ? (int)(((uint64_t)i * 7919u) % BU_LEAVES) : (i * 13) % BU_LEAVES; /* a permutation, then repeats */
		in[i] = S(bu_str[u]);
	}
	/* a few paths exist already, interned one at a time */
	for (int u = 0; u < BU_LEAVES; u += 97)
		BU_CHECK(ovs_pd_intern_path(g_pd, bu_str[u], strlen(bu_str[u])) != 0);
	size_t before = ovs_pd_path_count(g_pd);
	/* a bad string far in: an error naming it, and nothing interned */
	ovx_string_t keep = in[N - 3];
	in[N - 3] = S("/s1//x");
	ck_err(path_dictionary_create_paths_from_strings(g_inst, in, N, out), "path_strings[", "empty component");
	in[N - 3] = S("relative");
	ovx_primpath_list_t bad_list = 0;
	ck_err(path_dictionary_create_path_list_from_strings(g_inst, in, N, &bad_list), "not an absolute path");
	BU_CHECK((ovs_pd_path_count(g_pd)) == (before));
	in[N - 3] = keep;

	ovx_primpath_list_t list = 0;
	ck_ok(path_dictionary_create_path_list_from_strings(g_inst, in, N, &list));
	const ovx_primpath_t *view;
	size_t count;
	ck_assert(ovs_pd_list_view(g_pd, list, &view, &count));
	BU_CHECK((count) == (N));
	for (int i = 0; i < N; i++) {
		BU_CHECK((view[i]) == (ovs_pd_find_path(g_pd, in[i].ptr, in[i].length)));
		BU_CHECK(strcmp(ovs_pd_path_string(g_pd, view[i]).ptr, in[i].ptr) == 0);
	}
	bu_check_dictionary();
	/* the same again: all hits */
	ck_ok(path_dictionary_create_paths_from_strings(g_inst, in, N, out));
	for (int i = 0; i < N; i++)
		BU_CHECK((out[i]) == (view[i]));
	/* from tokens, in a fresh dictionary: the same structure */
	ovx_token_t tk[BU_A + BU_B + BU_C];
	ovs_pd_destroy(g_pd);
	g_pd = ovs_pd_create();
	g_inst = ovs_pd_instance(g_pd);
	ovs_pd_set_sched(g_pd, sched);
	for (int t = 0; t < BU_A + BU_B + BU_C; t++)
		tk[t] = T(bu_tok[t]);
	ovx_token_t *pt = malloc(3 * N * sizeof *pt);
	size_t *np = malloc(N * sizeof *np);
	ovx_primpath_t *tout = malloc(N * sizeof *tout);
	ck_assert(pt && np && tout);
	for (int i = 0; i < N; i++) {
		int a, b, c;
		BU_CHECK(sscanf(in[i].ptr, "/s%d/e%d/p%d", &a, &b, &c) == 3);
		pt[3 * i] = tk[a];
		pt[3 * i + 1] = tk[BU_A + b];
		pt[3 * i + 2] = tk[BU_A + BU_B + c];
		np[i] = 3;
	}
	ovx_token_t keep_tok = pt[3 * (N - 5) + 1];
	pt[3 * (N - 5) + 1] = T("a/b"); /* a token with '/': rejected, nothing interned */
	ck_err(path_dictionary_create_paths_from_tokens(g_inst, pt, np, N, tout), "contains '/'");
	BU_CHECK((ovs_pd_path_count(g_pd)) == (1));
	pt[3 * (N - 5) + 1] = keep_tok;
	ck_ok(path_dictionary_create_paths_from_tokens(g_inst, pt, np, N, tout));
	for (int i = 0; i < N; i++)
		BU_CHECK(strcmp(ovs_pd_path_string(g_pd, tout[i]).ptr, in[i].ptr) == 0);
	bu_check_dictionary();
	free(pt);
	free(np);
	free(tout);
	free(in);
	free(out);
	/* the list belonged to the destroyed dictionary */
	ovs_pd_set_sched(g_pd, NULL);
	if (sched)
		jobs_sched_destroy(sched);
	BU_DONE();
}
END_TEST

/* Many threads (more than cores) intern overlapping random subsets of the universe concurrently,
 * through the three bulk slots and single interning, all sharing one scheduler (or none): every
 * path must get exactly one id, and every invariant must hold afterwards. */
static ovx_primpath_t bu_out[BU_THREADS][BU_LEAVES];
static atomic_int bu_go;
static void *bu_thread(void *arg)
{
	int t = (int)(intptr_t)arg;
	uint64_t rng = 0x2545f4914f6cdd1dull * (uint64_t)(t + 7);
	/* a random three quarters of the leaves, shuffled, and a few repeats */
	int *pick = malloc(sizeof(int) * (BU_LEAVES + 64));
	int n = 0;
	for (int u = 0; u < BU_LEAVES; u++)
		if (xorshift(&rng) % 4 != 0)
			pick[n++] = u;
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(xorshift(&rng) % (uint64_t)(i + 1));
		int x = pick[i];
		pick[i] = pick[j];
		pick[j] = x;
	}
	for (int i = 0; i < 64; i++) {
		int j = (int)(xorshift(&rng) % (uint64_t)(n - i));
		pick[n++] = pick[j];
	}
	ovx_string_t *in = malloc(sizeof *in * (size_t)n);
	ovx_primpath_t *out = malloc(sizeof *out * (size_t)n);
	for (int i = 0; i < n; i++)
		in[i] = S(bu_str[pick[i]]);
	/* acquire spin: a start line so that the threads overlap (pairs with the release below) */
	while (!atomic_load_explicit(&bu_go, memory_order_acquire))
		;
	ovx_api_result_t r;
	switch (t % 4) {
	case 0: {
		ovx_primpath_list_t l = 0;
		r = path_dictionary_create_path_list_from_strings(g_inst, in, (size_t)n, &l);
		BU_CHECK(r.status == OVX_API_SUCCESS);
		const ovx_primpath_t *v = NULL;
		size_t c = 0;
		BU_CHECK(ovs_pd_list_view(g_pd, l, &v, &c) && c == (size_t)n);
		for (size_t i = 0; v && i < c; i++)
			out[i] = v[i];
		BU_CHECK(ovs_pd_list_release(g_pd, l));
		break;
	}
	case 1:
		r = path_dictionary_create_paths_from_strings(g_inst, in, (size_t)n, out);
		BU_CHECK(r.status == OVX_API_SUCCESS);
		break;
	case 2: {
		ovx_string_t ts[BU_A + BU_B + BU_C];
		ovx_token_t tk[BU_A + BU_B + BU_C];
		for (int i = 0; i < BU_A + BU_B + BU_C; i++)
			ts[i] = S(bu_tok[i]);
		r = path_dictionary_create_tokens_from_strings(g_inst, ts, BU_A + BU_B + BU_C, tk);
		BU_CHECK(r.status == OVX_API_SUCCESS);
		ovx_token_t *pt = malloc(sizeof *pt * 3 * (size_t)n);
		size_t *np = malloc(sizeof *np * (size_t)n);
		for (int i = 0; i < n; i++) {
			int u = pick[i];
			pt[3 * i] = tk[u / (BU_B * BU_C)];
			pt[3 * i + 1] = tk[BU_A + u / BU_C % BU_B];
			pt[3 * i + 2] = tk[BU_A + BU_B + u % BU_C];
			np[i] = 3;
		}
		r = path_dictionary_create_paths_from_tokens(g_inst, pt, np, (size_t)n, out);
		BU_CHECK(r.status == OVX_API_SUCCESS);
		free(pt);
		free(np);
		break;
	}
	default:
		r = (ovx_api_result_t){ OVX_API_SUCCESS, { NULL, 0 } };
		for (int i = 0; i < n; i++)
			out[i] = ovs_pd_intern_path(g_pd, in[i].ptr, in[i].length);
		break;
	}
	path_dictionary_release_error(g_inst, r.error);
	for (int i = 0; i < n; i++) {
		BU_CHECK(out[i] != 0);
		ovx_string_t s = ovs_pd_path_string(g_pd, out[i]); /* round trip while others insert */
		BU_CHECK(s.ptr && strcmp(s.ptr, in[i].ptr) == 0);
		BU_CHECK(ovs_pd_path_parent(g_pd, out[i]) < out[i]);
		if (bu_out[t][pick[i]]) /* a repeat got the same id */
			BU_CHECK(bu_out[t][pick[i]] == out[i]);
		bu_out[t][pick[i]] = out[i];
	}
	free(pick);
	free(in);
	free(out);
	return NULL;
}

START_TEST(test_bulk_stress)
{
	bu_make_strings();
	/* _i = 0: no scheduler (each thread runs its phases itself); 1: one shared scheduler with more
	 * workers than this machine has cores, on top of the BU_THREADS callers */
	jobs_sched *sched = _i ? bu_sched(4) : NULL;
	for (int round = 0; round < BU_ROUNDS; round++) {
		ovs_pd_destroy(g_pd);
		g_pd = ovs_pd_create();
		g_inst = ovs_pd_instance(g_pd);
		ovs_pd_set_sched(g_pd, sched);
		memset(bu_out, 0, sizeof bu_out);
		atomic_store(&bu_go, 0);
		atomic_store(&bu_failures, 0);
		pthread_t th[BU_THREADS];
		for (int t = 0; t < BU_THREADS; t++)
			ck_assert_int_eq(pthread_create(&th[t], NULL, bu_thread, (void *)(intptr_t)t), 0);
		atomic_store_explicit(&bu_go, 1, memory_order_release);
		for (int t = 0; t < BU_THREADS; t++)
			pthread_join(th[t], NULL);
		ck_assert_int_eq(atomic_load(&bu_failures), 0);
		/* exactly one id per path, whichever thread and slot interned it */
		for (int u = 0; u < BU_LEAVES; u++) {
			ovx_primpath_t id = ovs_pd_find_path(g_pd, bu_str[u], strlen(bu_str[u]));
			for (int t = 0; t < BU_THREADS; t++)
				if (bu_out[t][u])
					BU_CHECK((bu_out[t][u]) == (id));
		}
		/* the union of the subsets is (almost surely) every leaf; intern the rest singly */
		for (int u = 0; u < BU_LEAVES; u++)
			BU_CHECK(ovs_pd_intern_path(g_pd, bu_str[u], strlen(bu_str[u])) != 0);
		bu_check_dictionary();
	}
	ovs_pd_set_sched(g_pd, NULL);
	if (sched)
		jobs_sched_destroy(sched);
	BU_DONE();
}
END_TEST

/* ---- runner -------------------------------------------------------------------------------------- */

static Suite *path_dictionary_suite(void)
{
	Suite *s = suite_create("path_dictionary");
	TCase *tc = tcase_create("api");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_tokens_interning);
	tcase_add_test(tc, test_tokens_errors);
	tcase_add_test(tc, test_paths_interning);
	tcase_add_test(tc, test_paths_errors);
	tcase_add_test(tc, test_paths_from_tokens_roundtrip);
	tcase_add_test(tc, test_tokens_from_paths_buffer);
	tcase_add_test(tc, test_lists_basic);
	tcase_add_test(tc, test_lists_refcount);
	tcase_add_test(tc, test_lists_errors);
	tcase_add_test(tc, test_growth);
	suite_add_tcase(s, tc);

	TCase *st = tcase_create("stress");
	tcase_add_checked_fixture(st, setup, teardown);
	tcase_set_timeout(st, 600);
	tcase_add_test(st, test_stress_threads);
	tcase_add_test(st, test_stress_first_insert_race);
	tcase_add_loop_test(st, test_bulk_matches_single, 0, 2);
	tcase_add_loop_test(st, test_bulk_stress, 0, 2);
	suite_add_tcase(s, st);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(path_dictionary_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
