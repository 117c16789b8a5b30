/*
 * rows_hierarchy.c — the transform hierarchy (issue 11): world matrices of P prims in T trees
 * (P = 10^6, T = 1000; --quick: 10^5 / 100) computed by ovstage_compute_hierarchy (cpu-incremental),
 * in full and after changing 1 % of the locals, beside a serial C loop over the same locals,
 * measured in the same run.
 *
 *  - The forest: tree k holds nodes [k P / T, (k + 1) P / T); node 0 of a tree is its root
 *    /t<k>, every other node j gets a random parent among the earlier nodes of its tree (depth ~ log)
 *    and the path <parent's path>/n<j>; every CHAIN_EVERY-th tree starts with a chain of CHAIN
 *    nodes (depth 64) under which the random nodes hang, so deep paths are exercised. Paths are
 *    interned in one create_paths_from_tokens call; one query holds every prim.
 *  - Inputs: a random rigid transform (unit quaternion rotation + translation, float64 x16,
 *    row-vector convention: translation in elements 12..14) per prim, ~1 % of the prims with
 *    omni:resetXformStack = true, and a zero omni:fabric:worldMatrix row per prim, written at
 *    ordinal 1 and sealed. Then the full compute(1, 1) is timed. Then new locals for 1 % of the
 *    prims (random ones: a masked write of the whole local array) at ordinal 2, sealed, and the
 *    incremental compute(2, 2) is timed (the first round: the row with the target). Rounds 2..ROUNDS
 *    (ordinals 3..5) write the same prims' old and new locals alternately; their best is an
 *    information row (the first round's seal copies the world column into memory never touched
 *    before; later ones reuse its spare chunks). Each compute is timed from the call to the return
 *    of ovstage_wait_op on its op (its receipt complete); the seals before it are not timed.
 *  - Each repetition builds a fresh stage (a fresh instance), so every full compute is the first
 *    compute of its stage: it includes building the engine's forest from the paths (which every
 *    full compute of cpu-incremental does, hierarchy_compute.c) and first touches of its memory.
 *    The first repetition also carries the process's first-use costs; the best one is printed, the
 *    first one is in the notes.
 *  - The serial peer: one thread, world[i] = reset[i] || root ? local[i] : local[i] x world[parent[i]]
 *    over the nodes in index order (parents come first by construction, so the order is not computed:
 *    the parent array is the input), the product written exactly as engine/ops/xform.h's
 *    ovs_xform_mul (same terms, same order, no contraction under -std=c11), so the engine's results
 *    are compared for exact equality. Every compute's rows are read back (latest reads) and compared;
 *    a row is met only when nothing mismatches. The peer writes into warm memory; its run into
 *    memory never touched before is in the notes.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

enum { CHAIN = 64, CHAIN_EVERY = 100, ROUNDS = 4, RECOMPUTES = 3 };

#define NONE UINT32_MAX
#define MAT_BYTES (16 * sizeof(double))

/* The generated forest and its inputs (node index = position in the query). */
typedef struct forest {
	size_t n;               /* prims */
	size_t trees;           /* trees */
	uint32_t *parent;       /* parent node (an earlier index), NONE for a tree's root */
	uint32_t *tree;         /* tree of each node */
	uint32_t *name;         /* each node's name number within its tree (n<name>; 0 for the root) */
	uint16_t *depth;        /* 1 for a root */
	double (*local0)[16];   /* locals written at ordinal 1 */
	double (*local1)[16];   /* local0 with the changed prims' new locals (written at ordinal 2) */
	unsigned char *reset;   /* omni:resetXformStack per node */
	uint64_t *mask;         /* which nodes change at ordinal 2 (bit per node) */
	size_t nchanged;        /* bits set in mask */
	size_t dirty;           /* nodes under a changed node, itself included (what must be recomputed) */
	int max_depth;          /* deepest node */
} forest;

/* xorshift64* (seeded: the same forest every run). */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

/* Uniform in [-1, 1). */
static double unit(uint64_t *s)
{
	return (double)(rnd(s) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/* A random rigid transform: rotation of a random unit quaternion, translation in [-10, 10)^3. */
static void rigid(uint64_t *s, double m[16])
{
	double q[4], len2;
	do {
		for (int k = 0; k < 4; k++)
			q[k] = unit(s);
		len2 = q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3];
	} while (len2 < 1e-6 || len2 > 1.0);
	double l = sqrt(len2), w = q[0] / l, x = q[1] / l, y = q[2] / l, z = q[3] / l;
	/* rows are the images of the basis vectors (row-vector convention: p' = p * M) */
	double r[16] = { 1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y), 0,
			 2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x), 0,
			 2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y), 0,
			 10 * unit(s), 10 * unit(s), 10 * unit(s), 1 };
	memcpy(m, r, sizeof r);
}

/* out = a x b, term for term as engine/ops/xform.h's ovs_xform_mul (bitwise the same results). */
static void mat_mul(const double a[16], const double b[16], double out[16])
{
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++)
			out[i * 4 + j] = a[i * 4 + 0] * b[0 * 4 + j] + a[i * 4 + 1] * b[1 * 4 + j] +
					 a[i * 4 + 2] * b[2 * 4 + j] + a[i * 4 + 3] * b[3 * 4 + j];
}

static void forest_free(forest *f)
{
	free(f->parent);
	free(f->tree);
	free(f->name);
	free(f->depth);
	free(f->local0);
	free(f->local1);
	free(f->reset);
	free(f->mask);
	memset(f, 0, sizeof *f);
}

/* The parents and depths of tree k's nodes [lo, hi). */
static void make_tree(forest *f, uint64_t *s, uint32_t k, size_t lo, size_t hi)
{
	size_t chain = k % CHAIN_EVERY == 0 ? CHAIN : 0;
	for (size_t i = lo; i < hi; i++) {
		size_t j = i - lo;
		uint32_t p = j == 0 ? NONE : j < chain ? (uint32_t)(i - 1) : (uint32_t)(lo + rnd(s) % j);
		f->parent[i] = p;
		f->tree[i] = k;
		f->name[i] = (uint32_t)j;
		f->depth[i] = (uint16_t)(p == NONE ? 1 : f->depth[p] + 1);
		if (f->depth[i] > f->max_depth)
			f->max_depth = f->depth[i];
	}
}

/* 1 % of the nodes (random) change at ordinal 2; counts what that dirties. */
static void make_changes(forest *f, uint64_t *s)
{
	unsigned char *dirty = calloc(f->n, 1);
	memcpy(f->local1, f->local0, f->n * MAT_BYTES);
	for (size_t i = 0; i < f->n; i++) {
		bool ch = rnd(s) % 100 == 0;
		if (ch) {
			f->mask[i / 64] |= 1ull << (i % 64);
			f->nchanged++;
			rigid(s, f->local1[i]);
		}
		if (dirty) {
			dirty[i] = ch || (f->parent[i] != NONE && dirty[f->parent[i]]);
			f->dirty += dirty[i];
		}
	}
	free(dirty);
}

/* The forest, its inputs and its changes, from a fixed seed. */
static bool forest_make(forest *f, size_t n, size_t trees)
{
	memset(f, 0, sizeof *f);
	f->n = n;
	f->trees = trees;
	f->parent = malloc(n * sizeof *f->parent);
	f->tree = malloc(n * sizeof *f->tree);
	f->name = malloc(n * sizeof *f->name);
	f->depth = malloc(n * sizeof *f->depth);
	f->local0 = malloc(n * MAT_BYTES);
	f->local1 = malloc(n * MAT_BYTES);
	f->reset = malloc(n);
	f->mask = calloc((n + 63) / 64, sizeof *f->mask);
	if (!f->parent || !f->tree || !f->name || !f->depth || !f->local0 || !f->local1 || !f->reset || !f->mask) {
		forest_free(f);
		return false;
	}
	uint64_t s = 0x9e3779b97f4a7c15ull;
	for (size_t k = 0; k < trees; k++)
		make_tree(f, &s, (uint32_t)k, k * n / trees, (k + 1) * n / trees);
	for (size_t i = 0; i < n; i++) {
		rigid(&s, f->local0[i]);
		f->reset[i] = rnd(&s) % 100 == 0;
	}
	make_changes(f, &s);
	return true;
}

/* The serial peer: every world matrix from the locals, parents first (index order). */
static uint64_t serial_world(const forest *f, const double (*local)[16], double (*world)[16])
{
	uint64_t t0 = now_ns();
	for (size_t i = 0; i < f->n; i++) {
		uint32_t p = f->parent[i];
		if (f->reset[i] || p == NONE)
			memcpy(world[i], local[i], MAT_BYTES);
		else
			mat_mul(local[i], world[p], world[i]);
	}
	return now_ns() - t0;
}

/* ---- the stage ---- */

/* A stage holding the forest's prims, and the contract's column tokens. */
typedef struct hstage {
	stg s;                       /* the instance and its dictionary */
	ovx_primpath_list_t list;    /* every prim, in node order */
	ovstage_query_handle_t q;    /* the query over list */
	ovx_token_t xform, reset, world; /* omni:xform, omni:resetXformStack, omni:fabric:worldMatrix */
} hstage;

/* true on success; else the error on stderr, released. */
static bool pd_ok(stg *s, ovx_api_result_t r, const char *what)
{
	if (r.status == OVX_API_SUCCESS)
		return true;
	fprintf(stderr, "ovstage_bench_stage: %s failed: %.*s\n", what, (int)r.error.length, r.error.ptr ? r.error.ptr : "");
	path_dictionary_release_error(s->pd, r.error);
	return false;
}

/* Name tokens: t0 .. t<trees - 1> at [0, trees), n0 .. n<width - 1> at [trees, trees + width). */
static ovx_token_t *name_tokens(stg *s, size_t trees, size_t width)
{
	size_t m = trees + width;
	ovx_string_t *str = malloc(m * sizeof *str);
	char *text = malloc(m * 24);
	ovx_token_t *tk = malloc(m * sizeof *tk);
	bool good = str && text && tk;
	for (size_t i = 0; good && i < m; i++) {
		char *p = text + i * 24;
		int len = i < trees ? snprintf(p, 24, "t%zu", i) : snprintf(p, 24, "n%zu", i - trees);
		str[i] = (ovx_string_t){ p, (size_t)len };
	}
	good = good && pd_ok(s, path_dictionary_create_tokens_from_strings(s->pd, str, m, tk), "create_tokens");
	free(str);
	free(text);
	if (!good) {
		free(tk);
		return NULL;
	}
	return tk;
}

/* Every node's path, interned in one create_paths_from_tokens call (a node's tokens are its
 * parent's followed by its own name). */
static bool make_paths(stg *s, const forest *f, ovx_primpath_t *out)
{
	size_t width = (f->n + f->trees - 1) / f->trees + 1, total = 0;
	for (size_t i = 0; i < f->n; i++)
		total += f->depth[i];
	ovx_token_t *names = name_tokens(s, f->trees, width);
	ovx_token_t *tok = malloc(total * sizeof *tok);
	size_t *cnt = malloc(f->n * sizeof *cnt), *off = malloc(f->n * sizeof *off);
	bool good = names && tok && cnt && off;
	for (size_t i = 0, at = 0; good && i < f->n; i++) {
		uint32_t p = f->parent[i];
		off[i] = at;
		cnt[i] = f->depth[i];
		if (p != NONE)
			memcpy(tok + at, tok + off[p], cnt[p] * sizeof *tok);
		tok[at + cnt[i] - 1] = p == NONE ? names[f->tree[i]] : names[f->trees + f->name[i]];
		at += cnt[i];
	}
	good = good && pd_ok(s, path_dictionary_create_paths_from_tokens(s->pd, tok, cnt, f->n, out), "create_paths");
	free(names);
	free(tok);
	free(cnt);
	free(off);
	return good;
}

/* Releases the query and the list, destroys the instance. */
static void hstage_close(hstage *h)
{
	if (h->q != OVSTAGE_INVALID_QUERY_HANDLE || h->list)
		stg_release_query(&h->s, h->q, h->list);
	stg_close(&h->s);
	memset(h, 0, sizeof *h);
}

/* A fresh instance with the forest's paths and one query over them. */
static bool hstage_open(hstage *h, const forest *f)
{
	memset(h, 0, sizeof *h);
	h->q = OVSTAGE_INVALID_QUERY_HANDLE;
	if (!stg_open(&h->s, "bench-hierarchy"))
		return false;
	h->xform = stg_token(&h->s, "omni:xform");
	h->reset = stg_token(&h->s, "omni:resetXformStack");
	h->world = stg_token(&h->s, "omni:fabric:worldMatrix");
	ovx_primpath_t *paths = malloc(f->n * sizeof *paths);
	bool good = h->xform && h->reset && h->world && paths && make_paths(&h->s, f, paths) &&
		    pd_ok(&h->s, path_dictionary_create_path_list_from_paths(h->s.pd, paths, f->n, &h->list),
			  "create_path_list");
	free(paths);
	if (good && ovstage_query_from_path_list(h->s.st, h->list, &h->q) != OVSTAGE_OK) {
		fprintf(stderr, "ovstage_bench_stage: query_from_path_list failed\n");
		h->q = OVSTAGE_INVALID_QUERY_HANDLE;
		good = false;
	}
	if (!good)
		hstage_close(h);
	return good;
}

/* A fixed-row CPU tensor of `rows` rows of dtype (code, bits, lanes) over data. */
typedef struct htensor {
	DLTensor t;        /* the tensor */
	int64_t shape[1];  /* its one dimension: rows */
} htensor;

/* Writes rows of attr through the query at ordinal o (mask: which of them; NULL = all); waits. */
static bool write_col(hstage *h, ovx_token_t attr, void *data, size_t rows, bool matrix, const uint64_t *mask,
		      uint64_t o)
{
	htensor ht;
	memset(&ht, 0, sizeof ht);
	ht.t.data = data;
	ht.t.device.device_type = kDLCPU;
	ht.t.ndim = 1;
	ht.t.dtype = matrix ? (DLDataType){ kDLFloat, 64, 16 } : (DLDataType){ kDLBool, 8, 1 };
	ht.shape[0] = (int64_t)rows;
	ht.t.shape = ht.shape;
	ovstage_write_data_t w;
	memset(&w, 0, sizeof w);
	w.tensors = &ht.t;
	w.tensor_count = 1;
	w.semantic = matrix ? OVSTAGE_SEMANTIC_MATRIX : OVSTAGE_SEMANTIC_NONE;
	if (mask) {
		w.mask = mask;
		w.count = (uint32_t)rows;
	}
	ovx_string_or_token_t a = { attr, { NULL, 0 } };
	return stg_wait(&h->s, ovstage_write_attribute(h->s.st, h->q, a, o, w, OVSTAGE_PRIM_MODE_UPSERT), "write");
}

/* compute_hierarchy(CPU_INCREMENTAL, o, o), from the call to wait_op's return; 0 on failure. */
static uint64_t timed_compute(hstage *h, uint64_t o)
{
	uint64_t t0 = now_ns();
	bool good = stg_wait(&h->s, ovstage_compute_hierarchy(h->s.st, OVSTAGE_HIERARCHY_COMPUTATION_MODEL_CPU_INCREMENTAL,
							      o, o), "compute_hierarchy");
	uint64_t t = now_ns() - t0;
	return good ? (t ? t : 1) : 0;
}

/* Copies one read group's world rows into out[node * 16]; false when its shape is not the contract's. */
static bool take_group(const ovstage_read_group_t *g, size_t n, double (*out)[16])
{
	if (g->is_delete || g->data.tensor_count != 1 || g->data.tensors[0].dtype.bits != 64 ||
	    g->data.tensors[0].dtype.lanes != 16)
		return false;
	const double *v = g->data.tensors[0].data;
	for (uint32_t k = 0; k < g->prims.count; k++) {
		size_t e = g->prims.index_map ? g->prims.index_map[k] : (size_t)g->prims.offset + k;
		size_t row = g->data.index_map ? g->data.index_map[k] : k;
		if (e >= n)
			return false;
		memcpy(out[e], v + row * 16, MAT_BYTES);
	}
	return true;
}

/* The world matrices as of o (a latest read) into out[node] (NaN where a prim has none). */
static bool read_world(hstage *h, size_t n, uint64_t o, double (*out)[16])
{
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < 16; k++)
			out[i][k] = NAN;
	ovstage_read_handle_t rh = OVSTAGE_INVALID_READ_HANDLE;
	ovstage_ordinal_range_t range = { 0, o, false };
	if (!stg_wait(&h->s, ovstage_read_attributes(h->s.st, h->q, &h->world, 1, range, &rh), "read_attributes"))
		return false;
	bool good = true;
	ovstage_read_group_t g;
	ovstage_api_status_t s;
	while ((s = ovstage_fetch_read_next(h->s.st, rh, OVSTAGE_TIMEOUT_INFINITE, &g)) == OVSTAGE_OK) {
		good = take_group(&g, n, out) && good;
		ovstage_release_group(h->s.st, &g);
	}
	good = good && s == OVSTAGE_ERROR_END_OF_ITERATION;
	return stg_wait(&h->s, ovstage_release_read(h->s.st, rh), "release_read") && good;
}

/* Rows of got that differ from ref in any element (exact comparison; NaN counts as different). */
static size_t mismatches(const double (*got)[16], const double (*ref)[16], size_t n)
{
	size_t bad = 0;
	for (size_t i = 0; i < n; i++) {
		bool same = true;
		for (int k = 0; k < 16; k++)
			same = same && got[i][k] == ref[i][k];
		bad += !same;
	}
	return bad;
}

/* What one repetition measured. */
typedef struct hrep {
	uint64_t setup_ns;         /* paths, query, writes of ordinal 1 and its seal (not in a figure) */
	uint64_t full_ns;          /* compute(1, 1); 0: failed */
	uint64_t inc_ns[ROUNDS];   /* compute(2 + k, 2 + k) of incremental round k; 0: failed */
	uint64_t re_ns[RECOMPUTES];/* full recomputes after every local was written (forest kept); 0: failed */
	uint64_t fresh_ns;         /* the serial loop writing into memory not touched before */
	size_t bad_full;           /* world rows differing from the serial reference after the full compute */
	size_t bad_inc;            /* the most of any incremental round */
	size_t bad_re;             /* the most of any full recompute */
	bool ok;                   /* every op and read-back worked */
} hrep;

/* Incremental round k at ordinal 2 + k: the changed prims get local1 (even k) or local0 back (odd
 * k), through the mask; then the compute, timed, and the read-back against ref1 / ref0. */
static bool inc_round(hstage *h, const forest *f, int k, const double (*ref0)[16], const double (*ref1)[16],
		      double (*got)[16], hrep *r)
{
	uint64_t o = 2 + (uint64_t)k;
	double (*in)[16] = k % 2 ? f->local0 : f->local1;
	const double (*ref)[16] = k % 2 ? ref0 : ref1;
	bool good = write_col(h, h->xform, in, f->n, true, f->mask, o) && stg_seal(&h->s, o);
	r->inc_ns[k] = good ? timed_compute(h, o) : 0;
	good = r->inc_ns[k] && read_world(h, f->n, o, got);
	size_t bad = good ? mismatches((const double (*)[16])got, ref, f->n) : f->n;
	r->bad_inc = bad > r->bad_inc ? bad : r->bad_inc;
	return good;
}

/* Full recompute k at ordinal 2 + ROUNDS + k: every local written (local0 for even k, local1 for odd
 * k; no mask: a write of the whole column, whose change set says "every row"), sealed, then the
 * compute, timed: the forest stays (no prim or row changed), every world is recomputed. */
static bool re_round(hstage *h, const forest *f, int k, const double (*ref0)[16], const double (*ref1)[16],
		     double (*got)[16], hrep *r)
{
	uint64_t o = 2 + ROUNDS + (uint64_t)k;
	double (*in)[16] = k % 2 ? f->local1 : f->local0;
	const double (*ref)[16] = k % 2 ? ref1 : ref0;
	bool good = write_col(h, h->xform, in, f->n, true, NULL, o) && stg_seal(&h->s, o);
	r->re_ns[k] = good ? timed_compute(h, o) : 0;
	good = r->re_ns[k] && read_world(h, f->n, o, got);
	size_t bad = good ? mismatches((const double (*)[16])got, ref, f->n) : f->n;
	r->bad_re = bad > r->bad_re ? bad : r->bad_re;
	return good;
}

/* One repetition on a fresh stage; ref0 / ref1: the serial results for local0 / local1. */
static bool hier_rep(const forest *f, const double (*ref0)[16], const double (*ref1)[16], double (*got)[16], hrep *r)
{
	memset(r, 0, sizeof *r);
	hstage h;
	uint64_t t0 = now_ns();
	if (!hstage_open(&h, f))
		return false;
	double (*zero)[16] = calloc(f->n, MAT_BYTES);
	bool good = zero && write_col(&h, h.xform, f->local0, f->n, true, NULL, 1) &&
		    write_col(&h, h.reset, f->reset, f->n, false, NULL, 1) && write_col(&h, h.world, zero, f->n, true, NULL, 1) &&
		    stg_seal(&h.s, 1);
	free(zero);
	r->setup_ns = now_ns() - t0;
	r->full_ns = good ? timed_compute(&h, 1) : 0;
	good = r->full_ns && read_world(&h, f->n, 1, got);
	r->bad_full = good ? mismatches((const double (*)[16])got, ref0, f->n) : f->n;
	for (int k = 0; good && k < ROUNDS; k++)
		good = inc_round(&h, f, k, ref0, ref1, got, r);
	for (int k = 0; good && k < RECOMPUTES; k++)
		good = re_round(&h, f, k, ref0, ref1, got, r);
	hstage_close(&h);
	double (*fresh)[16] = malloc(f->n * MAT_BYTES);
	r->fresh_ns = fresh ? serial_world(f, (const double (*)[16])f->local0, fresh) : 0;
	free(fresh);
	r->ok = good;
	return good;
}

/* The best of the steady rounds (after the first). */
static uint64_t steady_ns(const hrep *r)
{
	uint64_t b = 0;
	for (int k = 1; k < ROUNDS; k++)
		b = r->inc_ns[k] && (!b || r->inc_ns[k] < b) ? r->inc_ns[k] : b;
	return b;
}

/* The best full recompute (forest kept). */
static uint64_t recompute_ns(const hrep *r)
{
	uint64_t b = 0;
	for (int k = 0; k < RECOMPUTES; k++)
		b = r->re_ns[k] && (!b || r->re_ns[k] < b) ? r->re_ns[k] : b;
	return b;
}

/* The engine's worker count as the bench sees it: OVSTAGE_WORKERS, else the online cpus. */
static int engine_workers(void)
{
	const char *w = getenv("OVSTAGE_WORKERS");
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int n = w && *w ? atoi(w) : (int)cpus;
	return n > 0 ? n : 1;
}

/* A figure in ms ("n/a" when not measured). */
static const char *ms(uint64_t ns)
{
	return ns ? fmt("%.1f ms", (double)ns / 1e6) : "n/a";
}

/* What the repetitions measured: the best of each figure, the first repetition, the worst mismatches. */
typedef struct hsum {
	hrep best;            /* per field, the best repetition's (setup: the best full compute's) */
	hrep first;           /* the first repetition */
	uint64_t serial_ns;   /* the serial loop over local0, best */
	uint64_t serial1_ns;  /* the serial loop over local1, best */
	uint64_t steady_ns;   /* the best incremental round after the first */
	uint64_t re_ns;       /* the best full recompute with the forest kept */
	uint64_t forest_ns;   /* generating the forest (once) */
	uint64_t floor_ns;    /* the memory floor: the locals copied by one thread per engine worker, best */
} hsum;

/* Keeps the smaller non-zero figure (0: not measured). */
static void keep_min(uint64_t *best, uint64_t v)
{
	if (v && (!*best || v < *best))
		*best = v;
}

/* The memory floor of any compute over these prims: `threads` threads each copy their slice of the
 * locals into a warm array of the same size (every world is at least one local read and one world
 * written). serial / floor is then the most any parallel compute can gain over the serial loop on
 * this machine; if it is below the full rows' target (0.8 × cores), memory, not the engine, sets
 * the limit. Best of three passes after a warm-up pass. */
typedef struct floor_part {
	const unsigned char *src; /* this thread's slice of the locals */
	unsigned char *dst;       /* and of the destination */
	size_t bytes;             /* its length */
} floor_part;

static void *floor_copy(void *p)
{
	floor_part *fp = p;
	memcpy(fp->dst, fp->src, fp->bytes);
	return NULL;
}

static uint64_t memory_floor_ns(const forest *f, double (*dst)[16], int threads)
{
	enum { MAX_THREADS = 256 };
	threads = threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
	pthread_t th[MAX_THREADS];
	floor_part part[MAX_THREADS];
	size_t total = f->n * MAT_BYTES, per = (total / (size_t)threads + 4095) & ~(size_t)4095;
	uint64_t best = 0;
	for (int pass = 0; pass < 4; pass++) { /* pass 0 warms the destination */
		uint64_t t0 = now_ns();
		int started = 0;
		for (int k = 0; k < threads; k++) {
			size_t lo = (size_t)k * per, hi = lo + per < total ? lo + per : total;
			if (lo >= hi)
				break;
			part[k] = (floor_part){ (const unsigned char *)f->local0 + lo, (unsigned char *)dst + lo, hi - lo };
			if (pthread_create(&th[k], NULL, floor_copy, &part[k]) != 0) {
				floor_copy(&part[k]); /* no thread: copy it here */
				continue;
			}
			started = k + 1;
		}
		for (int k = 0; k < started; k++)
			if (part[k].bytes)
				pthread_join(th[k], NULL);
		uint64_t dt = now_ns() - t0;
		if (pass > 0)
			keep_min(&best, dt);
	}
	return best;
}

/* The rows: full against the serial loop, the first incremental round and the later ones against full. */
static void hier_rows(const forest *f, const hsum *m)
{
	int cores = engine_workers();
	const hrep *b = &m->best;
	bool kf = b->full_ns && m->serial_ns, ki = b->inc_ns[0] && b->full_ns, ks = m->steady_ns && b->full_ns;
	double speedup = kf ? (double)m->serial_ns / (double)b->full_ns : 0;
	double pct = ki ? 100.0 * (double)b->inc_ns[0] / (double)b->full_ns : 0;
	double spct = ks ? 100.0 * (double)m->steady_ns / (double)b->full_ns : 0;
	table_row(fmt("hierarchy full compute (cpu-incremental, a fresh stage's first compute), %zu prims / %zu trees",
		      f->n, f->trees),
		  ms(b->full_ns), "serial C loop, 1 thread, parent order given", ms(m->serial_ns),
		  kf ? fmt("%.2f× serial", speedup) : "n/a", fmt("≥ 0.8 × cores = %.1f× (%d worker%s)", 0.8 * cores, cores, cores == 1 ? "" : "s"),
		  met(kf, !b->bad_full && speedup >= 0.8 * cores));
	bool kr = m->re_ns && m->serial_ns, kri = b->inc_ns[0] && m->re_ns;
	double rsp = kr ? (double)m->serial_ns / (double)m->re_ns : 0;
	double ripct = kri ? 100.0 * (double)b->inc_ns[0] / (double)m->re_ns : 0;
	table_row(fmt("hierarchy full recompute, every local rewritten (forest kept from the first compute), best of %d",
		      RECOMPUTES),
		  ms(m->re_ns), "serial C loop, 1 thread, parent order given", ms(m->serial_ns),
		  kr ? fmt("%.2f× serial", rsp) : "n/a", fmt("≥ 0.8 × cores = %.1f×", 0.8 * cores),
		  met(kr, !b->bad_re && rsp >= 0.8 * cores));
	table_row(fmt("hierarchy incremental, 1 %% of locals changed (%zu prims; %zu nodes under them), first round",
		      f->nchanged, f->dirty),
		  ms(b->inc_ns[0]), "our full compute, same run", ms(b->full_ns), ki ? fmt("%.1f %% of full", pct) : "n/a",
		  "≤ 5 % of full", met(ki, !b->bad_inc && pct <= 5.0));
	table_row("hierarchy incremental, first round (as above), against the full recompute with the forest kept",
		  ms(b->inc_ns[0]), "our full recompute, same run", ms(m->re_ns), kri ? fmt("%.1f %% of it", ripct) : "n/a",
		  "≤ 5 % of full", met(kri, !b->bad_inc && ripct <= 5.0));
	table_row(fmt("hierarchy incremental, the same 1 %% changed again, rounds 2–%d (best)", ROUNDS), ms(m->steady_ns),
		  "our full compute, same run", ms(b->full_ns), ks ? fmt("%.1f %% of full", spct) : "n/a", "— (info)", "—");
	bool kfl = m->floor_ns && m->serial_ns;
	table_row(fmt("memory floor: the locals (%zu MB) copied into a warm array by %d thread%s, best of 3", f->n * MAT_BYTES >> 20,
		      cores, cores == 1 ? "" : "s"),
		  ms(m->floor_ns), "serial C loop, 1 thread, parent order given", ms(m->serial_ns),
		  kfl ? fmt("serial / floor = %.2f× (the most a parallel compute can gain here)",
			    (double)m->serial_ns / (double)m->floor_ns) : "n/a",
		  "— (info: ≥ 0.8 × cores needs it above that)", "—");
}

/* What the rows need to be read: the forest, the repetitions, the comparison, the dirty set. */
static void hier_notes(const forest *f, const hsum *m)
{
	const hrep *b = &m->best;
	note("hierarchy: %zu prims in %zu trees (random parents among earlier nodes of the tree; every %d-th tree "
	     "starts with a chain of %d), max depth %d, ~1 %% resets; engine workers: %d (OVSTAGE_WORKERS, else online "
	     "cpus)", f->n, f->trees, CHAIN_EVERY, CHAIN, f->max_depth, engine_workers());
	note("hierarchy: each repetition is a fresh stage, whose first compute is the full one (it builds the engine's "
	     "forest from the paths); best repetition shown; the first one (with the process's first-use costs): "
	     "full %s, incremental %s", ms(m->first.full_ns), ms(m->first.inc_ns[0]));
	note("hierarchy: incremental rounds at ordinals 2–%d write the same 1 %% of the locals (new values, then the "
	     "old ones back, alternating) through a mask; the first round's row carries the target", 1 + ROUNDS);
	note("hierarchy: exact comparison with the serial reference (the multiplication order of engine/ops/xform.h): "
	     "%zu mismatching world rows after the full compute, %zu after an incremental one, %zu after a full "
	     "recompute (worst repetition / round)", b->bad_full, b->bad_inc, b->bad_re);
	note("hierarchy: full recomputes at ordinals %d–%d write every local (no mask: local0, local1, local0), so the "
	     "forest is kept and every world recomputed; the first compute of a fresh stage (the row above them) also "
	     "builds the forest from the paths and writes into memory the stage never used", 2 + ROUNDS,
	     1 + ROUNDS + RECOMPUTES);
	note("hierarchy: the incremental must recompute %zu nodes (%.1f %% of the prims: the subtrees under the %zu "
	     "changed prims); the serial loop with the changed locals %s; the serial loop into memory not touched "
	     "before %s (the peer row's writes into warm memory)", f->dirty, 100.0 * (double)f->dirty / (double)f->n,
	     f->nchanged, ms(m->serial1_ns), ms(b->fresh_ns));
	note("hierarchy: not timed: generating the forest %s; stage setup (paths, query, writes + seal of ordinal 1) %s",
	     ms(m->forest_ns), ms(b->setup_ns));
}

/* Folds repetition r into the summary (mismatches: the worst; figures: the best). */
static void hier_fold(hsum *m, const hrep *r, int k)
{
	if (k == 0)
		m->first = *r;
	m->best.bad_full = r->bad_full > m->best.bad_full ? r->bad_full : m->best.bad_full;
	m->best.bad_inc = r->bad_inc > m->best.bad_inc ? r->bad_inc : m->best.bad_inc;
	m->best.bad_re = r->bad_re > m->best.bad_re ? r->bad_re : m->best.bad_re;
	keep_min(&m->best.fresh_ns, r->fresh_ns);
	if (!r->ok)
		return;
	if (!m->best.full_ns || r->full_ns < m->best.full_ns) {
		m->best.full_ns = r->full_ns;
		m->best.setup_ns = r->setup_ns;
	}
	keep_min(&m->best.inc_ns[0], r->inc_ns[0]);
	keep_min(&m->steady_ns, steady_ns(r));
	keep_min(&m->re_ns, recompute_ns(r));
	m->best.bad_re = r->bad_re > m->best.bad_re ? r->bad_re : m->best.bad_re;
}

void rows_hierarchy(const bench_opts *o)
{
	size_t n = o->quick ? 100000 : 1000000, trees = o->quick ? 100 : 1000;
	forest f;
	hsum m;
	memset(&m, 0, sizeof m);
	uint64_t t0 = now_ns();
	progress("hierarchy: generating %zu prims in %zu trees", n, trees);
	double (*ref0)[16] = malloc(n * MAT_BYTES), (*ref1)[16] = malloc(n * MAT_BYTES), (*got)[16] = malloc(n * MAT_BYTES);
	if (!ref0 || !ref1 || !got || !forest_make(&f, n, trees)) {
		fprintf(stderr, "ovstage_bench_stage: hierarchy: out of memory\n");
		free(ref0);
		free(ref1);
		free(got);
		return;
	}
	m.forest_ns = now_ns() - t0;
	m.floor_ns = memory_floor_ns(&f, got, engine_workers());
	for (int k = 0; k < o->reps; k++) {
		/* interleaved: the serial loop, then ours on a fresh stage */
		uint64_t s0 = serial_world(&f, (const double (*)[16])f.local0, ref0);
		keep_min(&m.serial_ns, s0);
		keep_min(&m.serial1_ns, serial_world(&f, (const double (*)[16])f.local1, ref1));
		hrep r;
		bool good = hier_rep(&f, (const double (*)[16])ref0, (const double (*)[16])ref1, got, &r);
		progress("hierarchy rep %d/%d: full %.1f ms, incremental %.2f / %.2f ms (first / steady), recompute %.1f ms, "
			 "serial %.1f ms, mismatches %zu / %zu / %zu%s", k + 1, o->reps, (double)r.full_ns / 1e6,
			 (double)r.inc_ns[0] / 1e6, (double)steady_ns(&r) / 1e6, (double)recompute_ns(&r) / 1e6,
			 (double)s0 / 1e6, r.bad_full, r.bad_inc, r.bad_re, good ? "" : " (failed)");
		hier_fold(&m, &r, k);
	}
	hier_rows(&f, &m);
	hier_notes(&f, &m);
	forest_free(&f);
	free(ref0);
	free(ref1);
	free(got);
}
