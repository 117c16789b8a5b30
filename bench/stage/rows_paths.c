/*
 * rows_paths.c — bulk path interning (the performance issue's "16,777,216 prim paths for one query
 * took 16.4 s"): N fresh prim paths /<prefix>_<i / 4096>/p<i % 4096> interned in one call, beside
 * the same slots called in batches of PEER_BATCH paths — below the dictionary's bulk threshold
 * (PD_BULK_MIN = 2048), so the peer runs the one-path-at-a-time code that every call ran before —
 * measured in the same run on a fresh dictionary each repetition.
 *
 *  - strings: create_path_list_from_strings + query_from_path_list (ours) against
 *    create_paths_from_strings in batches + create_path_list_from_paths + query_from_path_list;
 *  - tokens: create_paths_from_tokens of the same paths in one call against the same in batches
 *    (the layout bench/stage's own queries use).
 * Building the input strings and token arrays is not timed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

enum { FANOUT = 4096, PEER_BATCH = 2047 };

typedef struct pinput {
	size_t n;
	char *text;          /* every string, NUL-separated */
	ovx_string_t *strs;  /* n strings */
	ovx_token_t *toks;   /* 2 per path (filled per dictionary) */
	size_t *counts;      /* 2 per path */
	ovx_primpath_t *out; /* n */
} pinput;

static bool input_make(pinput *in, size_t n, const char *prefix)
{
	memset(in, 0, sizeof *in);
	in->n = n;
	in->text = malloc(n * 32);
	in->strs = malloc(n * sizeof *in->strs);
	in->toks = malloc(2 * n * sizeof *in->toks);
	in->counts = malloc(n * sizeof *in->counts);
	in->out = malloc(n * sizeof *in->out);
	if (!in->text || !in->strs || !in->toks || !in->counts || !in->out)
		return false;
	for (size_t i = 0; i < n; i++) {
		char *p = in->text + i * 32;
		int len = snprintf(p, 32, "/%s_%zu/p%zu", prefix, i / FANOUT, i % FANOUT);
		in->strs[i] = (ovx_string_t){ p, (size_t)len };
		in->counts[i] = 2;
	}
	return true;
}

static void input_free(pinput *in)
{
	free(in->text);
	free(in->strs);
	free(in->toks);
	free(in->counts);
	free(in->out);
}

static bool ok(stg *s, ovx_api_result_t r, const char *what)
{
	if (r.status == OVX_API_SUCCESS)
		return true;
	fprintf(stderr, "ovstage_bench_stage: %s failed: %.*s\n", what, (int)r.error.length, r.error.ptr ? r.error.ptr : "");
	path_dictionary_release_error(s->pd, r.error);
	return false;
}

/* Tokens of the paths' two components, in this dictionary. */
static bool input_tokens(stg *s, pinput *in, const char *prefix)
{
	size_t nhi = (in->n + FANOUT - 1) / FANOUT;
	ovx_string_t *str = malloc((nhi + FANOUT) * sizeof *str);
	char *names = malloc((nhi + FANOUT) * 40);
	ovx_token_t *tk = malloc((nhi + FANOUT) * sizeof *tk);
	bool good = str && names && tk;
	for (size_t i = 0; good && i < nhi + FANOUT; i++) {
		char *nm = names + i * 40;
		int len = i < nhi ? snprintf(nm, 40, "%s_%zu", prefix, i) : snprintf(nm, 40, "p%zu", i - nhi);
		str[i] = (ovx_string_t){ nm, (size_t)len };
	}
	good = good && ok(s, path_dictionary_create_tokens_from_strings(s->pd, str, nhi + FANOUT, tk), "create_tokens");
	for (size_t i = 0; good && i < in->n; i++) {
		in->toks[2 * i] = tk[i / FANOUT];
		in->toks[2 * i + 1] = tk[nhi + i % FANOUT];
	}
	free(str);
	free(names);
	free(tk);
	return good;
}

/* One repetition; returns the seconds taken, or -1. */
static double rep_strings(size_t n, bool bulk, int rep)
{
	char prefix[32];
	snprintf(prefix, sizeof prefix, "%s%d", bulk ? "sb" : "ss", rep);
	pinput in;
	stg s;
	double secs = -1;
	if (!input_make(&in, n, prefix) || !stg_open(&s, "bench-paths")) {
		input_free(&in);
		return -1;
	}
	ovx_primpath_list_t list = 0;
	ovstage_query_handle_t q = OVSTAGE_INVALID_QUERY_HANDLE;
	uint64_t t0 = now_ns();
	bool good;
	if (bulk) {
		good = ok(&s, path_dictionary_create_path_list_from_strings(s.pd, in.strs, n, &list), "create_path_list");
	} else {
		good = true;
		for (size_t c = 0; good && c < n; c += PEER_BATCH) {
			size_t m = n - c < PEER_BATCH ? n - c : PEER_BATCH;
			good = ok(&s, path_dictionary_create_paths_from_strings(s.pd, in.strs + c, m, in.out + c), "create_paths");
		}
		good = good && ok(&s, path_dictionary_create_path_list_from_paths(s.pd, in.out, n, &list), "create_path_list");
	}
	if (good && ovstage_query_from_path_list(s.st, list, &q) == OVSTAGE_OK)
		secs = (double)(now_ns() - t0) / 1e9;
	if (q != OVSTAGE_INVALID_QUERY_HANDLE)
		ovstage_release_query(s.st, q);
	if (list)
		path_dictionary_release_path_list_reference(s.pd, list);
	stg_close(&s);
	input_free(&in);
	return secs;
}

static double rep_tokens(size_t n, bool bulk, int rep)
{
	char prefix[32];
	snprintf(prefix, sizeof prefix, "%s%d", bulk ? "tb" : "ts", rep);
	pinput in;
	stg s;
	double secs = -1;
	if (!input_make(&in, n, prefix) || !stg_open(&s, "bench-paths")) {
		input_free(&in);
		return -1;
	}
	if (input_tokens(&s, &in, prefix)) {
		uint64_t t0 = now_ns();
		bool good = true;
		size_t step = bulk ? n : PEER_BATCH;
		for (size_t c = 0; good && c < n; c += step) {
			size_t m = n - c < step ? n - c : step;
			good = ok(&s, path_dictionary_create_paths_from_tokens(s.pd, in.toks + 2 * c, in.counts + c, m, in.out + c),
				  "create_paths_from_tokens");
		}
		if (good)
			secs = (double)(now_ns() - t0) / 1e9;
	}
	stg_close(&s);
	input_free(&in);
	return secs;
}

void rows_paths(const bench_opts *o)
{
	size_t n = o->quick ? (size_t)1 << 20 : (size_t)1 << 22;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	for (int kind = 0; kind < 2; kind++) {
		double best = -1, peer = -1;
		for (int r = 0; r < o->reps; r++) {
			/* interleaved: ours and the peer alternate, so drift hits both */
			progress("paths: %s rep %d/%d (%zu paths)", kind ? "tokens" : "strings", r + 1, o->reps, n);
			double a = kind ? rep_tokens(n, true, r) : rep_strings(n, true, r);
			double b = kind ? rep_tokens(n, false, r) : rep_strings(n, false, r);
			if (a > 0 && (best < 0 || a < best))
				best = a;
			if (b > 0 && (peer < 0 || b < peer))
				peer = b;
		}
		double ours_rate = best > 0 ? (double)n / best / 1e6 : 0, peer_rate = peer > 0 ? (double)n / peer / 1e6 : 0;
		const char *what = kind ? fmt("bulk path interning from tokens, %zu prim paths (2 components), one create_paths_from_tokens", n)
					: fmt("bulk path interning, %zu prim path strings: create_path_list_from_strings + query_from_path_list", n);
		const char *peer_what = kind ? fmt("the same in calls of %d paths (one path at a time inside)", PEER_BATCH)
					     : fmt("create_paths_from_strings in calls of %d (one path at a time inside) + list + query", PEER_BATCH);
		table_row(what, best > 0 ? fmt("%.2f M/s", ours_rate) : "n/a", peer_what,
			  peer > 0 ? fmt("%.2f M/s", peer_rate) : "n/a",
			  best > 0 && peer > 0 ? fmt("%.2f× peer", ours_rate / peer_rate) : "n/a",
			  fmt("≥ 10 M/s (16 cores; %ld here)", cpus), met(best > 0, ours_rate >= 10.0));
	}
	note("bulk path interning: a fresh dictionary per repetition (the bench's only instance), ours and the peer interleaved; "
	     "the peer's calls stay below the bulk threshold (2048 paths), i.e. the code every call ran before; "
	     "building the input strings is not timed; the engine's workers do the bulk work");
}
