/*
 * check_chunks.c — copy-on-write chunked storage of fixed-size columns, through the public API.
 *
 * The suite runs with 1 KiB chunks (OVSTAGE_CHUNK_KB=1), so columns of a few thousand rows span
 * many chunks. It checks, against a model of every ordinal, that values read back are exact after
 * random mixes of full, block, scattered, reordered, same-ordinal and deleting writes with growth
 * of the row count (latest reads, retained older reads, range reads, groups held across seals);
 * that a sparse write allocates only the chunks it touches (live buffer bytes, not time); that each
 * storage path (share, copy, catch-up of a spare, compaction) is taken; that a pinned group is never
 * rewritten; and that fragmentation stays bounded.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ovstage/ovstage.h>
#include <ovx/path_dictionary/path_dictionary.h>

#include "chunk.h"
#include "stage_test_util.h"

void ovs_store_counters(int64_t *versions, int64_t *buffers, int64_t *buffer_bytes);

typedef struct fixture {
	ovstage_instance_t *st;
	path_dictionary_instance_t *pd;
	ovstage_query_handle_t q;  /* all prims, in row order once written in order */
	size_t n;
} fixture;

static ovstage_query_handle_t query_range(fixture *f, size_t first, size_t n, const size_t *order)
{
	char **names = calloc(n ? n : 1, sizeof *names);
	for (size_t i = 0; i < n; i++) {
		names[i] = malloc(32);
		snprintf(names[i], 32, "/C/P%zu", order ? order[i] : first + i);
	}
	ovstage_query_handle_t q = tst_query_of(f->st, f->pd, (const char *const *)names, n, NULL);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return q;
}

static void setup(fixture *f, size_t n)
{
	memset(f, 0, sizeof *f);
	ovstage_instance_desc_t d = { "check_chunks" };
	ck_assert_int_eq(ovstage_create_instance(&d, &f->st), OVSTAGE_OK);
	f->pd = ovstage_get_path_dictionary(f->st);
	f->n = n;
	f->q = query_range(f, 0, n, NULL);
}

static void release_query(fixture *f, ovstage_query_handle_t q)
{
	tst_wait_ok(f->st, ovstage_release_query(f->st, q));
}

static void teardown(fixture *f)
{
	release_query(f, f->q);
	ck_assert_int_eq(ovstage_destroy_instance(f->st), OVSTAGE_OK);
}

static void seal(fixture *f, uint64_t n)
{
	ovstage_write_floor_desc_t d = { n, OVSTAGE_SCOPE_ALL, NULL, 0 };
	tst_wait_ok(f->st, ovstage_advance_write_floor(f->st, &d));
}

typedef tst_tensor tens;

/* rows x lanes float32 write data over vals (optionally masked over `rows` elements). */
static ovstage_write_data_t fdata(tens *tt, float *vals, int64_t rows, int lanes, const uint64_t *mask)
{
	ovstage_write_data_t w = tst_wdata(tt, vals, rows, kDLFloat, 32, (uint16_t)lanes);
	if (mask) {
		w.mask = mask;
		w.count = (uint32_t)rows;
	}
	return w;
}

/* What a read returned, per prim of the main query (n prims x lanes). */
typedef struct got {
	float *v;          /* values */
	bool *present;     /* a value group covered the prim */
	bool *deleted;     /* a tombstone group covered it */
	int value_groups;  /* groups seen */
	uint64_t generation; /* layout generation of the last value group */
} got;

static void got_init(got *g, size_t n, int lanes)
{
	g->v = calloc(n * (size_t)lanes, sizeof *g->v);
	g->present = calloc(n, sizeof *g->present);
	g->deleted = calloc(n, sizeof *g->deleted);
	g->value_groups = 0;
}

static void got_free(got *g)
{
	free(g->v);
	free(g->present);
	free(g->deleted);
}

/* Copies one value group into g (element e of the group is query element prims[e]). */
static void take_group(got *g, const ovstage_read_group_t *rg, int lanes, size_t n)
{
	ck_assert_uint_eq(rg->data.tensor_count, 1);
	const DLTensor *t = &rg->data.tensors[0];
	ck_assert_int_eq(t->ndim, 1);
	ck_assert_int_eq(t->dtype.lanes, lanes);
	const float *d = t->data;
	for (uint32_t i = 0; i < rg->prims.count; i++) {
		uint32_t e = rg->prims.index_map ? rg->prims.index_map[i] : rg->prims.offset + i;
		uint32_t row = rg->data.index_map ? rg->data.index_map[i] : i;
		/* (plain tests, ck_abort only on failure: a Check assertion costs a system call) */
		if (e >= n || (int64_t)row >= t->shape[0] || g->present[e])
			ck_abort_msg("group element %u: prim %u (of %zu), row %u (of %lld), already seen %d", i, e, n, row,
				     (long long)t->shape[0], e < n && g->present[e]);
		memcpy(&g->v[(size_t)e * lanes], &d[(size_t)row * lanes], sizeof(float) * (size_t)lanes);
		g->present[e] = true;
	}
	g->generation = rg->meta.layout_generation;
	g->value_groups++;
}

static void read_all(fixture *f, ovx_token_t attr, ovstage_ordinal_range_t r, int lanes, got *g)
{
	memset(g->present, 0, f->n * sizeof *g->present);
	memset(g->deleted, 0, f->n * sizeof *g->deleted);
	g->value_groups = 0;
	ovstage_read_handle_t rh;
	tst_wait_ok(f->st, ovstage_read_attributes(f->st, f->q, &attr, 1, r, &rh));
	ovstage_read_group_t rg;
	ovstage_api_status_t s;
	while ((s = ovstage_fetch_read_next(f->st, rh, OVSTAGE_TIMEOUT_INFINITE, &rg)) == OVSTAGE_OK) {
		if (rg.is_delete) {
			for (uint32_t i = 0; i < rg.prims.count; i++)
				g->deleted[rg.prims.index_map ? rg.prims.index_map[i] : rg.prims.offset + i] = true;
		} else {
			take_group(g, &rg, lanes, f->n);
		}
		ck_assert_int_eq(ovstage_release_group(f->st, &rg), OVSTAGE_OK);
	}
	ck_assert_int_eq(s, OVSTAGE_ERROR_END_OF_ITERATION);
	tst_wait_ok(f->st, ovstage_release_read(f->st, rh));
}

static ovstage_ordinal_range_t latest(uint64_t n)
{
	ovstage_ordinal_range_t r = { 0, n, false };
	return r;
}

static ovstage_ordinal_range_t span(uint64_t a, uint64_t b)
{
	ovstage_ordinal_range_t r = { a, b, true };
	return r;
}

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* ---- the model test --------------------------------------------------------------------------- */

enum { STEPS = 90, N = 3000, N0 = 2000 };

/* model[s]: the column as of ordinal s (values and presence); chg[s]: changed at s. */
typedef struct model {
	float *v[STEPS + 1];
	bool *present[STEPS + 1];
	bool *chg[STEPS + 1];
} model;

static void check_latest(fixture *f, ovx_token_t t, int lanes, model *m, int s, got *g)
{
	read_all(f, t, latest((uint64_t)s), lanes, g);
	ck_assert_msg(g->value_groups <= 65, "%d groups: fragmentation is not bounded", g->value_groups);
	for (size_t i = 0; i < N; i++) {
		if (g->present[i] != m->present[s][i])
			ck_abort_msg("as of %d prim %zu: present %d, model %d", s, i, g->present[i], m->present[s][i]);
		if (g->present[i])
			for (int l = 0; l < lanes; l++)
				if (g->v[i * lanes + l] != m->v[s][i * lanes + l])
					ck_abort_msg("as of %d prim %zu lane %d: %g != model %g", s, i, l,
						     g->v[i * lanes + l], m->v[s][i * lanes + l]);
	}
}

static void check_range(fixture *f, ovx_token_t t, int lanes, model *m, int a, int b, got *g)
{
	read_all(f, t, span((uint64_t)a, (uint64_t)b), lanes, g);
	for (size_t i = 0; i < N; i++) {
		bool changed = false;
		for (int s = a; s <= b; s++)
			changed |= m->chg[s][i];
		bool want_val = changed && m->present[b][i], want_del = changed && !m->present[b][i];
		if (g->present[i] != want_val || g->deleted[i] != want_del)
			ck_abort_msg("range [%d, %d] prim %zu: value %d deleted %d, model changed %d present %d", a, b, i,
				     g->present[i], g->deleted[i], changed, m->present[b][i]);
		if (want_val)
			for (int l = 0; l < lanes; l++)
				if (g->v[i * lanes + l] != m->v[b][i * lanes + l])
					ck_abort_msg("range [%d, %d] prim %zu lane %d: %g != model %g", a, b, i, l,
						     g->v[i * lanes + l], m->v[b][i * lanes + l]);
	}
}

static void run_model(int lanes, uint64_t seed)
{
	fixture f;
	setup(&f, N);
	ovx_token_t t = tst_tok(f.pd, lanes == 1 ? "m1" : "m3");
	ovstage_query_handle_t q0 = query_range(&f, 0, N0, NULL); /* the first rows, before growth */
	/* a reordered narrower query: a window of prims in reverse order */
	size_t worder[300];
	for (size_t i = 0; i < 300; i++)
		worder[i] = 1200 + 299 - i;
	ovstage_query_handle_t qw = query_range(&f, 0, 300, worder);
	model m;
	size_t nv = (size_t)N * lanes;
	for (int s = 0; s <= STEPS; s++) {
		m.v[s] = calloc(nv, sizeof(float));
		m.present[s] = calloc(N, sizeof(bool));
		m.chg[s] = calloc(N, sizeof(bool));
	}
	float *src = malloc(nv * sizeof *src);
	uint64_t *masks = malloc(2 * ((N + 63) / 64) * sizeof *masks);
	got g, held_copy;
	got_init(&g, N, lanes);
	got_init(&held_copy, N, lanes);
	ovstage_read_group_t held;
	bool holding = false;
	uint64_t rs = seed;
	for (int s = 1; s <= STEPS; s++) {
		memcpy(m.v[s], m.v[s - 1], nv * sizeof(float));
		memcpy(m.present[s], m.present[s - 1], N * sizeof(bool));
		size_t n = s < 20 ? N0 : N; /* rows grow at step 20 */
		ovstage_query_handle_t q = s < 20 ? q0 : f.q;
		int nw = (rng_next(&rs) % 8 == 0) ? 2 : 1; /* sometimes two writes at one ordinal */
		ovstage_enqueue_result_t e[3];
		int ne = 0;
		tens tt[2];
		float *srcs[2] = { src, malloc(nv * sizeof(float)) };
		for (int k = 0; k < nw; k++) {
			float *sv = srcs[k];
			for (size_t i = 0; i < nv; i++)
				sv[i] = (float)(s * 100000 + k * 50000) + (float)i;
			unsigned kind = s == 1 ? 0 : (unsigned)(rng_next(&rs) % 10);
			ovstage_write_data_t w;
			ovstage_query_handle_t wq = q;
			uint64_t *mask = masks + k * ((N + 63) / 64); /* borrowed by the op until it completes */
			memset(mask, 0, (N + 63) / 64 * sizeof *mask);
			if (kind == 0) { /* full */
				w = fdata(&tt[k], sv, (int64_t)n, lanes, NULL);
				for (size_t i = 0; i < n; i++)
					m.chg[s][i] = m.present[s][i] = true;
				memcpy(m.v[s], sv, n * lanes * sizeof(float));
			} else if (kind <= 3 || kind == 9) { /* block (sometimes across chunk edges) */
				size_t len = 1 + rng_next(&rs) % 700, a = rng_next(&rs) % n;
				if (a + len > n)
					len = n - a;
				for (size_t i = a; i < a + len; i++) {
					mask[i / 64] |= (uint64_t)1 << (i % 64);
					m.chg[s][i] = m.present[s][i] = true;
					memcpy(&m.v[s][i * lanes], &sv[i * lanes], lanes * sizeof(float));
				}
				w = fdata(&tt[k], sv, (int64_t)n, lanes, mask);
			} else if (kind <= 6) { /* scattered */
				for (size_t i = 0; i < n; i++)
					if (rng_next(&rs) % 32 == 0) {
						mask[i / 64] |= (uint64_t)1 << (i % 64);
						m.chg[s][i] = m.present[s][i] = true;
						memcpy(&m.v[s][i * lanes], &sv[i * lanes], lanes * sizeof(float));
					}
				w = fdata(&tt[k], sv, (int64_t)n, lanes, mask);
			} else if (kind == 7) { /* the reversed window query */
				wq = qw;
				w = fdata(&tt[k], sv, 300, lanes, NULL);
				for (size_t i = 0; i < 300; i++) {
					size_t p = worder[i];
					m.chg[s][p] = m.present[s][p] = true;
					memcpy(&m.v[s][p * lanes], &sv[i * lanes], lanes * sizeof(float));
				}
			} else { /* delete the attribute on the window's prims */
				ovx_string_or_token_t ta = tst_attr(t);
				e[ne++] = ovstage_delete_attributes(f.st, qw, &ta, 1, (uint64_t)s);
				for (size_t i = 0; i < 300; i++) {
					size_t p = worder[i];
					m.chg[s][p] = true;
					m.present[s][p] = false;
				}
				continue;
			}
			e[ne++] = ovstage_write_attribute(f.st, wq, tst_attr(t), (uint64_t)s, w, OVSTAGE_PRIM_MODE_UPSERT);
		}
		for (int k = 0; k < ne; k++)
			tst_wait_ok(f.st, e[k]);
		free(srcs[1]);
		seal(&f, (uint64_t)s);
		check_latest(&f, t, lanes, &m, s, &g);
		if (s >= 2) {
			check_latest(&f, t, lanes, &m, s - 1, &g); /* retained (K = 2) */
			check_range(&f, t, lanes, &m, s - 1, s, &g);
		}
		/* hold the first group of a read for a few seals; its bytes must not change */
		if (!holding && s % 9 == 3) {
			ovstage_read_handle_t rh;
			tst_wait_ok(f.st, ovstage_read_attributes(f.st, f.q, &t, 1, latest((uint64_t)s), &rh));
			holding = ovstage_fetch_read_next(f.st, rh, 0, &held) == OVSTAGE_OK;
			tst_wait_ok(f.st, ovstage_release_read(f.st, rh));
			if (holding) {
				memset(held_copy.present, 0, N * sizeof(bool));
				memset(held_copy.v, 0, nv * sizeof(float));
				take_group(&held_copy, &held, lanes, N);
			}
		} else if (holding && s % 9 == 7) {
			got now;
			got_init(&now, N, lanes);
			take_group(&now, &held, lanes, N);
			ck_assert_int_eq(memcmp(now.v, held_copy.v, nv * sizeof(float)), 0);
			got_free(&now);
			ck_assert_int_eq(ovstage_release_group(f.st, &held), OVSTAGE_OK);
			holding = false;
		}
	}
	if (holding)
		ck_assert_int_eq(ovstage_release_group(f.st, &held), OVSTAGE_OK);
	got_free(&g);
	got_free(&held_copy);
	for (int s = 0; s <= STEPS; s++) {
		free(m.v[s]);
		free(m.present[s]);
		free(m.chg[s]);
	}
	free(src);
	free(masks);
	release_query(&f, q0);
	release_query(&f, qw);
	teardown(&f);
}

START_TEST(test_chunked_matches_model)
{
	ovs_chunk_stats_t a, b;
	ovs_chunk_stats(&a);
	run_model(1, 0x9e3779b97f4a7c15ull + (uint64_t)_i);
	run_model(3, 0xd1b54a32d192ed03ull + (uint64_t)_i);
	ovs_chunk_stats(&b);
	/* every storage path was exercised */
	ck_assert_uint_gt(b.shared, a.shared);
	ck_assert_uint_gt(b.copied, a.copied);
	ck_assert_uint_gt(b.replayed, a.replayed);
	ck_assert_uint_gt(b.adopted, a.adopted); /* blocks over whole chunks became them */
}
END_TEST

/* ---- producers' blocks: one block of rows each, adopted chunks, reads by piece ---------------- */

/* Counts a read's value groups with index maps (take_group checks the values). */
static int read_maps(fixture *f, ovx_token_t attr, uint64_t n, got *g)
{
	read_all(f, attr, latest(n), 1, g);
	int maps = 0;
	ovstage_read_handle_t rh;
	tst_wait_ok(f->st, ovstage_read_attributes(f->st, f->q, &attr, 1, latest(n), &rh));
	ovstage_read_group_t rg;
	while (ovstage_fetch_read_next(f->st, rh, OVSTAGE_TIMEOUT_INFINITE, &rg) == OVSTAGE_OK) {
		maps += rg.data.index_map != NULL || rg.prims.index_map != NULL;
		ck_assert_int_eq(ovstage_release_group(f->st, &rg), OVSTAGE_OK);
	}
	tst_wait_ok(f->st, ovstage_release_read(f->st, rh));
	return maps;
}

/* One producer's block write (enqueue and wait). */
typedef struct block_writer {
	fixture *f;
	ovstage_query_handle_t q;
	ovx_token_t t;
	uint64_t ordinal;
	pthread_barrier_t *bar;  /* the threads start together */
	float vals[300];
	ovstage_api_status_t status;
} block_writer;

static void write_block_now(block_writer *bw)
{
	tens tt;
	ovstage_enqueue_result_t e = ovstage_write_attribute(bw->f->st, bw->q, tst_attr(bw->t), bw->ordinal,
							     fdata(&tt, bw->vals, 300, 1, NULL), OVSTAGE_PRIM_MODE_UPSERT);
	ovstage_op_wait_result_t wr;
	bw->status = e.status != OVSTAGE_OK ? e.status : ovstage_wait_op(bw->f->st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr);
	if (e.status == OVSTAGE_OK && ovstage_release_op(bw->f->st, e.op_index) != OVSTAGE_OK)
		bw->status = OVSTAGE_ERROR_INVALID_HANDLE;
}

static void *write_block(void *arg)
{
	block_writer *bw = arg;
	pthread_barrier_wait(bw->bar);
	write_block_now(bw);
	return NULL;
}

START_TEST(test_producer_blocks)
{
	/* Four producers, 300 prims each (1 KiB chunks: 256 rows), write their blocks at each ordinal
	 * (the first ordinal's from four threads at once, later ones in the order 2, 0, 3, 1): each first
	 * write takes one block of rows (ovs_column_rows_create), the seal adopts the chunks a block covers whole, and a
	 * read of all prims in path order (four pieces of rows) is views with no index maps. Then a
	 * masked write over all prims at the same ordinal as the blocks (it touches adopted chunks: they
	 * must be copied instead), a held group across seals, a delete (a presence bitmap: the per-prim
	 * path), and every retained version read back exact. */
	enum { K = 4, B = 300, P = K * B, S = 8 };
	fixture f;
	setup(&f, P);
	ovx_token_t t = tst_tok(f.pd, "blocks");
	ovstage_query_handle_t qb[K];
	for (int b = 0; b < K; b++)
		qb[b] = query_range(&f, (size_t)b * B, B, NULL);
	static const int order[K] = { 2, 0, 3, 1 };
	float *want = calloc((size_t)(S + 1) * P, sizeof *want), *src = malloc(P * sizeof *src);
	uint64_t *mask = calloc(P / 64 + 1, sizeof *mask);
	got g, hc;
	got_init(&g, P, 1);
	got_init(&hc, P, 1);
	ovs_chunk_stats_t a, z;
	ovs_chunk_stats(&a);
	ovstage_read_group_t held;
	bool holding = false;
	for (int s = 1; s <= S; s++) {
		float *w = want + (size_t)s * P;
		memcpy(w, want + (size_t)(s - 1) * P, P * sizeof *w);
		block_writer bw[K];
		pthread_t th[K];
		pthread_barrier_t bar;
		pthread_barrier_init(&bar, NULL, K);
		for (int j = 0; j < K; j++) {
			int b = order[j];
			bw[j] = (block_writer){ &f, qb[b], t, (uint64_t)s, &bar, { 0 }, OVSTAGE_OK };
			for (int i = 0; i < B; i++)
				w[b * B + i] = bw[j].vals[i] = (float)(s * 10000 + b * B + i);
		}
		/* the first ordinal's from K threads at once (their new prims' rows are created
		 * concurrently), later ones in turn */
		for (int j = 0; j < K; j++)
			if (s == 1)
				ck_assert_int_eq(pthread_create(&th[j], NULL, write_block, &bw[j]), 0);
			else
				write_block_now(&bw[j]);
		for (int j = 0; s == 1 && j < K; j++)
			pthread_join(th[j], NULL);
		pthread_barrier_destroy(&bar);
		for (int j = 0; j < K; j++)
			ck_assert_int_eq(bw[j].status, OVSTAGE_OK);
		if (s % 3 == 0) { /* after the blocks, at the same ordinal: every 7th prim */
			memset(mask, 0, (P / 64 + 1) * sizeof *mask);
			for (int i = 0; i < P; i++) {
				src[i] = -(float)(s * 10000 + i);
				if (i % 7 == 0) {
					mask[i / 64] |= (uint64_t)1 << (i % 64);
					w[i] = src[i];
				}
			}
			tens tt;
			tst_wait_ok(f.st, ovstage_write_attribute(f.st, f.q, tst_attr(t), (uint64_t)s, fdata(&tt, src, P, 1, mask),
								  OVSTAGE_PRIM_MODE_UPSERT));
		}
		seal(&f, (uint64_t)s);
		int maps = read_maps(&f, t, (uint64_t)s, &g);
		for (int i = 0; i < P; i++)
			if (!g.present[i] || g.v[i] != w[i])
				ck_abort_msg("as of %d prim %d: %g (present %d) != %g", s, i, g.v[i], g.present[i], w[i]);
		ck_assert_msg(maps == 0, "as of %d: %d groups with index maps (the query is four blocks of rows)", s, maps);
		if (s > 1) { /* the previous version, retained, is intact */
			read_all(&f, t, latest((uint64_t)(s - 1)), 1, &g);
			for (int i = 0; i < P; i++)
				if (g.v[i] != want[(size_t)(s - 1) * P + i])
					ck_abort_msg("as of %d, read at %d, prim %d: %g != %g", s - 1, s, i, g.v[i],
						     want[(size_t)(s - 1) * P + i]);
		}
		if (s == 2) { /* hold the first group of version 2 across the later seals */
			ovstage_read_handle_t rh;
			tst_wait_ok(f.st, ovstage_read_attributes(f.st, f.q, &t, 1, latest(2), &rh));
			ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh, OVSTAGE_TIMEOUT_INFINITE, &held), OVSTAGE_OK);
			tst_wait_ok(f.st, ovstage_release_read(f.st, rh));
			memset(hc.present, 0, P * sizeof *hc.present);
			take_group(&hc, &held, 1, P);
			holding = true;
		}
	}
	if (holding) { /* rewritten by nothing since */
		got now;
		got_init(&now, P, 1);
		take_group(&now, &held, 1, P);
		for (int i = 0; i < P; i++)
			ck_assert(now.present[i] == hc.present[i] && (!now.present[i] || now.v[i] == hc.v[i]));
		got_free(&now);
		ck_assert_int_eq(ovstage_release_group(f.st, &held), OVSTAGE_OK);
	}
	ovs_chunk_stats(&z);
	ck_assert_uint_gt(z.adopted, a.adopted);
	/* a delete of some prims: the version has a presence bitmap, reads take the per-prim path */
	ovstage_query_handle_t qd = query_range(&f, 10, 50, NULL);
	ovx_string_or_token_t ta = tst_attr(t);
	tst_wait_ok(f.st, ovstage_delete_attributes(f.st, qd, &ta, 1, S + 1));
	seal(&f, S + 1);
	read_all(&f, t, latest(S + 1), 1, &g);
	for (int i = 0; i < P; i++) {
		bool gone = i >= 10 && i < 60;
		ck_assert_msg(g.present[i] == !gone, "after the delete, prim %d present %d", i, g.present[i]);
		if (!gone && g.v[i] != want[(size_t)S * P + i])
			ck_abort_msg("after the delete, prim %d: %g != %g", i, g.v[i], want[(size_t)S * P + i]);
	}
	release_query(&f, qd);
	for (int b = 0; b < K; b++)
		release_query(&f, qb[b]);
	got_free(&g);
	got_free(&hc);
	free(want);
	free(src);
	free(mask);
	teardown(&f);
}
END_TEST

/* ---- a sparse write allocates the chunks it touches, not the column -------------------------- */

START_TEST(test_sparse_write_allocates_touched_chunks)
{
	enum { P = 64 * 256 }; /* 64 chunks of 256 float32 rows (1 KiB) */
	fixture f;
	setup(&f, P);
	ovx_token_t t = tst_tok(f.pd, "x");
	float *src = malloc(P * sizeof *src);
	uint64_t *mask = calloc(P / 64, sizeof *mask);
	for (int i = 0; i < P; i++)
		src[i] = (float)i;
	tens tt;
	tst_wait_ok(f.st, ovstage_write_attribute(f.st, f.q, tst_attr(t), 1, fdata(&tt, src, P, 1, NULL),
						  OVSTAGE_PRIM_MODE_UPSERT));
	seal(&f, 1);
	got g;
	got_init(&g, P, 1);
	read_all(&f, t, latest(1), 1, &g);
	ck_assert_int_eq(g.value_groups, 1); /* written in full: one run, one group */
	uint64_t gen1 = g.generation;
	int64_t v0, b0, by0, v1, b1, by1;
	ovs_store_counters(&v0, &b0, &by0);
	/* 100 rows inside chunk 10 */
	for (int i = 10 * 256 + 50; i < 10 * 256 + 150; i++) {
		mask[i / 64] |= (uint64_t)1 << (i % 64);
		src[i] = -1.f;
	}
	tst_wait_ok(f.st, ovstage_write_attribute(f.st, f.q, tst_attr(t), 2, fdata(&tt, src, P, 1, mask),
						  OVSTAGE_PRIM_MODE_UPSERT));
	seal(&f, 2);
	ovs_store_counters(&v1, &b1, &by1);
	/* one new chunk (1 KiB) for version 2; the 64 KiB column is shared with version 1 */
	ck_assert_msg(by1 - by0 <= 2 * 1024, "a 100-row write added %lld buffer bytes", (long long)(by1 - by0));
	read_all(&f, t, latest(2), 1, &g);
	ck_assert_int_eq(g.value_groups, 3); /* chunks 0-9, 10 (the copy), 11-63 */
	ck_assert_uint_ne(g.generation, gen1); /* the split is a layout change */
	for (int i = 0; i < P; i++)
		if (!g.present[i] || g.v[i] != src[i])
			ck_abort_msg("as of 2, prim %d: %g != %g", i, g.v[i], src[i]);
	read_all(&f, t, latest(1), 1, &g); /* version 1 is intact */
	for (int i = 0; i < P; i++)
		if (g.v[i] != (float)i)
			ck_abort_msg("as of 1, prim %d: %g != %d", i, g.v[i], i);
	/* a full write joins the column again */
	tst_wait_ok(f.st, ovstage_write_attribute(f.st, f.q, tst_attr(t), 3, fdata(&tt, src, P, 1, NULL),
						  OVSTAGE_PRIM_MODE_UPSERT));
	seal(&f, 3);
	read_all(&f, t, latest(3), 1, &g);
	ck_assert_int_eq(g.value_groups, 1);
	got_free(&g);
	free(src);
	free(mask);
	teardown(&f);
}
END_TEST

/* ---- fragmentation is bounded by compaction -------------------------------------------------- */

START_TEST(test_fragmentation_compacts)
{
	enum { P = 200 * 256 };
	fixture f;
	setup(&f, P);
	ovx_token_t t = tst_tok(f.pd, "frag");
	float *src = malloc(P * sizeof *src), *want = malloc(P * sizeof *want);
	uint64_t *mask = calloc(P / 64, sizeof *mask);
	for (int i = 0; i < P; i++)
		src[i] = want[i] = (float)i;
	tens tt;
	tst_wait_ok(f.st, ovstage_write_attribute(f.st, f.q, tst_attr(t), 1, fdata(&tt, src, P, 1, NULL),
						  OVSTAGE_PRIM_MODE_UPSERT));
	seal(&f, 1);
	ovs_chunk_stats_t a, b;
	ovs_chunk_stats(&a);
	got g;
	got_init(&g, P, 1);
	int max_groups = 0;
	for (int s = 2; s < 2 + 80; s++) { /* one row in every other chunk, one chunk per ordinal */
		int row = ((s - 2) * 2 % 200) * 256 + 7;
		memset(mask, 0, P / 64 * sizeof *mask);
		mask[row / 64] |= (uint64_t)1 << (row % 64);
		src[row] = want[row] = (float)-s;
		tst_wait_ok(f.st, ovstage_write_attribute(f.st, f.q, tst_attr(t), (uint64_t)s,
							  fdata(&tt, src, P, 1, mask), OVSTAGE_PRIM_MODE_UPSERT));
		seal(&f, (uint64_t)s);
		read_all(&f, t, latest((uint64_t)s), 1, &g);
		max_groups = g.value_groups > max_groups ? g.value_groups : max_groups;
		for (int i = 0; i < P; i++)
			if (!g.present[i] || g.v[i] != want[i])
				ck_abort_msg("as of %d, prim %d: %g != %g", s, i, g.v[i], want[i]);
	}
	ovs_chunk_stats(&b);
	ck_assert_uint_gt(b.compactions, a.compactions);
	ck_assert_int_le(max_groups, 65);
	got_free(&g);
	free(src);
	free(want);
	free(mask);
	teardown(&f);
}
END_TEST

/* ---- a stream writing the same rows every ordinal --------------------------------------------- */

START_TEST(test_same_rows_stream)
{
	/* Every ordinal rewrites the same scattered rows (and, in a second column, the same block):
	 * the seal need not replay the retained deltas onto the recycled chunks (all their rows are
	 * rewritten), and every value stays exact, also as of the retained previous ordinal. */
	enum { P = 40 * 256, NSTEP = 30 };
	fixture f;
	setup(&f, P);
	ovx_token_t ts = tst_tok(f.pd, "scat"), tb = tst_tok(f.pd, "blk");
	float *src = malloc(P * sizeof *src);
	float (*want)[P] = calloc(NSTEP + 1, sizeof *want);
	uint64_t *ms = calloc(P / 64, sizeof *ms), *mb = calloc(P / 64, sizeof *mb);
	for (int i = 0; i < P; i += 37)
		ms[i / 64] |= (uint64_t)1 << (i % 64);
	for (int i = 3000; i < 3900; i++)
		mb[i / 64] |= (uint64_t)1 << (i % 64);
	ovs_chunk_stats_t a, b;
	ovs_chunk_stats(&a);
	got g;
	got_init(&g, P, 1);
	for (int s = 1; s <= NSTEP; s++) {
		for (int i = 0; i < P; i++)
			src[i] = (float)(s * 100000 + i);
		for (int i = 0; i < P; i++)
			want[s][i] = s == 1 || ((ms[i / 64] >> (i % 64)) & 1) ? src[i] : want[s - 1][i];
		tens t1, t2;
		ovstage_write_data_t w1 = fdata(&t1, src, P, 1, s == 1 ? NULL : ms);
		ovstage_write_data_t w2 = fdata(&t2, src, P, 1, s == 1 ? NULL : mb);
		tst_wait_ok(f.st, ovstage_write_attribute(f.st, f.q, tst_attr(ts), (uint64_t)s, w1, OVSTAGE_PRIM_MODE_UPSERT));
		tst_wait_ok(f.st, ovstage_write_attribute(f.st, f.q, tst_attr(tb), (uint64_t)s, w2, OVSTAGE_PRIM_MODE_UPSERT));
		seal(&f, (uint64_t)s);
		for (int back = 0; back < 2 && back < s; back++) {
			read_all(&f, ts, latest((uint64_t)(s - back)), 1, &g);
			for (int i = 0; i < P; i++)
				if (!g.present[i] || g.v[i] != want[s - back][i])
					ck_abort_msg("scattered, step %d as of %d, prim %d: %g != %g", s, s - back, i, g.v[i],
						     want[s - back][i]);
			read_all(&f, tb, latest((uint64_t)(s - back)), 1, &g);
			for (int i = 0; i < P; i++) {
				float wb = s - back == 1 || (i >= 3000 && i < 3900) ? (float)((s - back) * 100000 + i)
										    : (float)(100000 + i);
				if (!g.present[i] || g.v[i] != wb)
					ck_abort_msg("block, step %d as of %d, prim %d: %g != %g", s, s - back, i, g.v[i], wb);
			}
		}
	}
	ovs_chunk_stats(&b);
	ck_assert_uint_gt(b.replays_skipped, a.replays_skipped);
	ck_assert_uint_gt(b.replayed, a.replayed);
	got_free(&g);
	free(src);
	free(want);
	free(ms);
	free(mb);
	teardown(&f);
}
END_TEST

/* ---- a write's row list outlives its query ------------------------------------------------------- */

START_TEST(test_rows_outlive_query)
{
	/* A write through a query borrows the query's row map as its row list; releasing the query
	 * before the seal (and before a later seal replays the delta) must not free it under them. */
	enum { P = 2048 };
	fixture f;
	setup(&f, P);
	ovx_token_t t = tst_tok(f.pd, "borrow");
	float *src = malloc(P * sizeof *src);
	for (int i = 0; i < P; i++)
		src[i] = (float)i;
	tens tt;
	tst_wait_ok(f.st, ovstage_write_attribute(f.st, f.q, tst_attr(t), 1, fdata(&tt, src, P, 1, NULL),
						  OVSTAGE_PRIM_MODE_UPSERT));
	seal(&f, 1);
	float blk[300];
	for (int s = 2; s <= 6; s++) {
		ovstage_query_handle_t qb = query_range(&f, 1000, 300, NULL);
		for (int i = 0; i < 300; i++)
			blk[i] = (float)(s * 10000 + i);
		/* twice through the same query: the first caches the map, the second borrows it */
		tst_wait_ok(f.st, ovstage_write_attribute(f.st, qb, tst_attr(t), (uint64_t)s, fdata(&tt, blk, 300, 1, NULL),
							  OVSTAGE_PRIM_MODE_UPSERT));
		tst_wait_ok(f.st, ovstage_write_attribute(f.st, qb, tst_attr(t), (uint64_t)s, fdata(&tt, blk, 300, 1, NULL),
							  OVSTAGE_PRIM_MODE_UPSERT));
		release_query(&f, qb); /* before the seal */
		seal(&f, (uint64_t)s);
		got g;
		got_init(&g, P, 1);
		read_all(&f, t, latest((uint64_t)s), 1, &g);
		for (int i = 0; i < P; i++) {
			float w = i >= 1000 && i < 1300 ? (float)(s * 10000 + i - 1000) : (float)i;
			if (!g.present[i] || g.v[i] != w)
				ck_abort_msg("as of %d, prim %d: %g != %g", s, i, g.v[i], w);
		}
		read_all(&f, t, span((uint64_t)s, (uint64_t)s), 1, &g); /* the changed list */
		for (int i = 0; i < P; i++)
			if (g.present[i] != (i >= 1000 && i < 1300))
				ck_abort_msg("range [%d, %d], prim %d: present %d", s, s, i, g.present[i]);
		got_free(&g);
	}
	free(src);
	teardown(&f);
}
END_TEST

/* ---- large seals run split across the workers ------------------------------------------------- */

/* Ordinal s's value of element i. */
static float par_value(int s, size_t i)
{
	return (float)s * 1e6f + (float)(i % 1000000);
}

/* 300 000 prims (sealed by a worker, not inline), float32x4 (rows of 16 bytes: the scattered-row
 * loop, split across the workers above 32768 rows) or float32x7 (28 bytes: the run loop); ordinal 1
 * a full write, even ordinals every 2nd row from two writes (even rows, then odd rows: two sorted
 * deltas that interleave, as from two producers), odd ordinals a contiguous block of 200 000 rows
 * through a narrower query. Values exact as of every ordinal. */
START_TEST(test_parallel_apply)
{
	enum { P = 300000, NS = 5, B0 = 50000, BN = 200000 };
	const int L = _i == 0 ? 4 : 7;
	fixture f;
	setup(&f, P);
	ovx_token_t t = tst_tok(f.pd, "par");
	ovstage_query_handle_t qb = query_range(&f, B0, BN, NULL);
	float *src = malloc((size_t)(P + 1) * L * sizeof *src), *want = malloc((size_t)P * L * sizeof *want);
	uint64_t *even = calloc((P + 63) / 64, sizeof *even), *odd = calloc((P + 63) / 64, sizeof *odd);
	for (int i = 0; i < P; i++)
		(i % 2 ? odd : even)[i / 64] |= (uint64_t)1 << (i % 64);
	got g;
	got_init(&g, P, L);
	for (int s = 1; s <= NS; s++) {
		for (size_t i = 0; i < (size_t)(P + 1) * L; i++)
			src[i] = par_value(s, i);
		tens tt;
		if (s == 1 || s % 2 == 0) {
			for (int k = 0; k < (s == 1 ? 1 : 2); k++) /* the odd rows: src shifted by one row */
				tst_wait_ok(f.st, ovstage_write_attribute(f.st, f.q, tst_attr(t), (uint64_t)s,
									  fdata(&tt, k ? src + L : src, P, L,
										s == 1 ? NULL : k ? odd : even),
									  OVSTAGE_PRIM_MODE_UPSERT));
			for (int i = 0; i < P; i++)
				memcpy(&want[(size_t)i * L], &src[(size_t)i * L + (s > 1 && i % 2 ? L : 0)], L * sizeof(float));
		} else {
			tst_wait_ok(f.st, ovstage_write_attribute(f.st, qb, tst_attr(t), (uint64_t)s,
								  fdata(&tt, src, BN, L, NULL), OVSTAGE_PRIM_MODE_UPSERT));
			memcpy(&want[(size_t)B0 * L], src, (size_t)BN * L * sizeof(float));
		}
		seal(&f, (uint64_t)s);
		read_all(&f, t, latest((uint64_t)s), L, &g);
		for (int i = 0; i < P; i++)
			if (!g.present[i] || memcmp(&g.v[(size_t)i * L], &want[(size_t)i * L], L * sizeof(float)))
				ck_abort_msg("lanes %d, as of %d, prim %d: %g != %g", L, s, i, g.v[(size_t)i * L],
					     want[(size_t)i * L]);
	}
	got_free(&g);
	free(src);
	free(want);
	free(even);
	free(odd);
	release_query(&f, qb);
	teardown(&f);
}
END_TEST

int main(void)
{
	/* 1 KiB chunks: every column of more than 256 float32 rows spans several chunks. */
	if (!getenv("OVSTAGE_CHUNK_KB"))
		setenv("OVSTAGE_CHUNK_KB", "1", 1);
	Suite *s = suite_create("chunks");
	TCase *tc = tcase_create("cow");
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, test_chunked_matches_model, 0, 4);
	tcase_add_test(tc, test_sparse_write_allocates_touched_chunks);
	tcase_add_test(tc, test_fragmentation_compacts);
	tcase_add_test(tc, test_same_rows_stream);
	tcase_add_loop_test(tc, test_parallel_apply, 0, 2);
	tcase_add_test(tc, test_rows_outlive_query);
	tcase_add_test(tc, test_producer_blocks);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
