/*
 * store.c — columns, row maps, versions, sealing and snapshot publication (see store.h for the
 * model, docs/store.md for the memory-ordering argument).
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "chunk.h"
#include "copy.h"
#include "errors.h"
#include "query.h"
#include "stage.h"

/* ---------------------------------------------------------------------------------------------
 * Live-object counters (process-wide; for the soak test and diagnostics). relaxed: statistics.
 */
static _Atomic int64_t g_live_versions, g_live_buffers, g_live_buffer_bytes;

void ovs_store_counters(int64_t *versions, int64_t *buffers, int64_t *buffer_bytes)
{
	*versions = atomic_load_explicit(&g_live_versions, memory_order_relaxed);
	*buffers = atomic_load_explicit(&g_live_buffers, memory_order_relaxed);
	*buffer_bytes = atomic_load_explicit(&g_live_buffer_bytes, memory_order_relaxed);
}

static void count_buffer(size_t bytes, int sign)
{
	atomic_fetch_add_explicit(&g_live_buffers, sign, memory_order_relaxed);
	atomic_fetch_add_explicit(&g_live_buffer_bytes, sign * (int64_t)bytes, memory_order_relaxed);
}

/* ---------------------------------------------------------------------------------------------
 * Buffers
 */

#define OVS_MMAP_THRESHOLD (1u << 20)

/* Takes a free pooled buffer of exactly `cap` bytes, or NULL. */
static ovs_buffer *pool_take(ovs_stage *st, size_t cap)
{
	ovs_buffer *b = NULL;
	pthread_mutex_lock(&st->pool_lock);
	for (size_t i = 0; i < st->npool; i++)
		if (st->pool[i]->capacity == cap) {
			b = st->pool[i];
			st->pool[i] = st->pool[--st->npool];
			st->pool_bytes -= cap;
			break;
		}
	pthread_mutex_unlock(&st->pool_lock);
	if (b)
		atomic_store_explicit(&b->refs, 1, memory_order_relaxed); /* ours alone: published by the caller */
	return b;
}

/* Returns a released buffer to the pool if there is room; false if the caller must free it. */
static bool pool_give(ovs_stage *st, ovs_buffer *b)
{
	bool kept = false;
	pthread_mutex_lock(&st->pool_lock);
	if (st->npool < sizeof st->pool / sizeof st->pool[0] && st->pool_bytes + b->capacity <= OVS_POOL_MAX_BYTES) {
		st->pool[st->npool++] = b;
		st->pool_bytes += b->capacity;
		kept = true;
	}
	pthread_mutex_unlock(&st->pool_lock);
	return kept;
}

void ovs_buffer_pool_fini(ovs_stage *st)
{
	for (size_t i = 0; i < st->npool; i++) {
		count_buffer(st->pool[i]->capacity, -1);
		if (st->pool[i]->capacity >= OVS_MMAP_THRESHOLD)
			munmap(st->pool[i]->data, st->pool[i]->capacity);
		else
			free(st->pool[i]->data);
		free(st->pool[i]);
	}
	st->npool = 0;
	st->pool_bytes = 0;
}

/* One reference (the caller's), counted live. */
static ovs_buffer *buffer_init(ovs_buffer *b, ovs_stage *st, void *data, size_t cap, DLManagedTensorVersioned *mt)
{
	atomic_init(&b->refs, 1);
	b->capacity = cap;
	b->data = data;
	b->managed = mt;
	b->stage = st;
	count_buffer(cap, 1);
	return b;
}

ovs_buffer *ovs_buffer_new(ovs_stage *st, size_t bytes)
{
	size_t cap = bytes ? bytes : 64;
	cap = cap >= OVS_MMAP_THRESHOLD ? (cap + 4095) & ~(size_t)4095 : (cap + 63) & ~(size_t)63;
	/* A free buffer of the same size first: steady-state writes of a column reuse the buffers of
	 * the versions that left retention (no allocator call, no page faults). */
	ovs_buffer *pooled = pool_take(st, cap);
	if (pooled)
		return pooled; /* already counted live, already faulted */
	ovs_buffer *b = malloc(sizeof *b);
	if (!b)
		return NULL;
	void *p;
	if (cap >= OVS_MMAP_THRESHOLD) {
		/* Large buffers come pre-faulted: copying into memory that is not yet faulted runs several
		 * times slower than into resident memory, and the fault cost would land on the writer. */
		p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (p == MAP_FAILED)
			p = NULL;
	} else {
		cap = (cap + 63) & ~(size_t)63;
		p = aligned_alloc(64, cap);
	}
	if (!p) {
		free(b);
		return NULL;
	}
	return buffer_init(b, st, p, cap, NULL);
}

void *ovs_delta_array(ovs_stage *st, size_t bytes, ovs_buffer **buf)
{
	*buf = NULL;
	if (bytes < OVS_DELTA_POOLED_MIN)
		return malloc(bytes ? bytes : 1);
	/* Rounded so that writes of slightly different row counts share pooled buffers. */
	*buf = ovs_buffer_new(st, (bytes + OVS_DELTA_POOLED_MIN - 1) & ~(size_t)(OVS_DELTA_POOLED_MIN - 1));
	return *buf ? (*buf)->data : NULL;
}

void ovs_delta_array_free(void *p, ovs_buffer *buf)
{
	if (buf)
		ovs_buffer_unref(buf);
	else
		free(p);
}

ovs_buffer *ovs_buffer_adopt(ovs_stage *st, DLManagedTensorVersioned *mt, void *data, size_t bytes)
{
	ovs_buffer *b = malloc(sizeof *b);
	return b ? buffer_init(b, st, data, bytes, mt) : NULL;
}

void ovs_buffer_unref(ovs_buffer *b)
{
	if (!b)
		return;
	/* acq_rel: the last holder sees all readers' accesses before the memory is released. */
	if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1)
		return;
	if (b->managed) {
		count_buffer(b->capacity, -1);
		if (b->managed->deleter)
			b->managed->deleter(b->managed); /* exactly once: only the last reference gets here */
	} else if (pool_give(b->stage, b)) {
		return; /* still counted live: pooled memory is retained memory */
	} else if (b->capacity >= OVS_MMAP_THRESHOLD) {
		count_buffer(b->capacity, -1);
		munmap(b->data, b->capacity);
	} else {
		count_buffer(b->capacity, -1);
		free(b->data);
	}
	free(b);
}

/* ---------------------------------------------------------------------------------------------
 * Blobs (rows of array columns): shared by the versions that hold them, freed with the last one.
 */

ovs_blob *ovs_blob_new(uint64_t len, size_t elem_bytes)
{
	if (elem_bytes && len > (SIZE_MAX - sizeof(ovs_blob)) / elem_bytes)
		return NULL;
	ovs_blob *b = malloc(sizeof *b + (size_t)len * elem_bytes);
	if (!b)
		return NULL;
	atomic_init(&b->refs, 1);
	b->len = len;
	b->shape = (int64_t)len;
	return b;
}

void ovs_blob_ref(ovs_blob *b)
{
	if (b)
		atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
}

void ovs_blob_unref(ovs_blob *b)
{
	/* acq_rel: the last holder sees every reader's accesses before the free. */
	if (b && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
		free(b);
}

/* ---------------------------------------------------------------------------------------------
 * Columns and row maps
 */

ovs_column *ovs_column_find(ovs_stage *st, ovx_token_t name)
{
	/* acquire: pairs with the release publication of the array and of its count, so the column
	 * structs and their initialised fields are visible. */
	size_t n = atomic_load_explicit(&st->ncols, memory_order_acquire);
	ovs_column **cols = atomic_load_explicit(&st->cols, memory_order_acquire);
	for (size_t i = 0; i < n; i++)
		if (cols[i]->name == name)
			return cols[i];
	return NULL;
}

ovs_column *ovs_column_get_or_create(ovs_stage *st, ovx_token_t name)
{
	ovs_column *c = ovs_column_find(st, name);
	if (c)
		return c;
	pthread_mutex_lock(&st->cols_lock);
	c = ovs_column_find(st, name);
	if (c) {
		pthread_mutex_unlock(&st->cols_lock);
		return c;
	}
	c = calloc(1, sizeof *c);
	if (!c) {
		pthread_mutex_unlock(&st->cols_lock);
		return NULL;
	}
	c->name = name;
	pthread_mutex_init(&c->schema_lock, NULL);
	ovs_radix_init(&c->rows);
	uint64_t f = atomic_load_explicit(&st->all_floor, memory_order_acquire);
	atomic_init(&c->floor, f);
	atomic_init(&c->floor_requested, f);
	atomic_init(&c->max_written, 0);
	atomic_init(&c->dropped_through, 0);
	atomic_init(&c->nrows, 0);
	atomic_init(&c->generation, 1);
	atomic_init(&c->has_schema, false);
	atomic_init(&c->inbox, NULL);
	size_t n = atomic_load_explicit(&st->ncols, memory_order_relaxed);
	ovs_column **cols = atomic_load_explicit(&st->cols, memory_order_relaxed);
	if (n == st->cols_cap) {
		size_t cap = st->cols_cap ? st->cols_cap * 2 : 16;
		ovs_column **nc = malloc(cap * sizeof *nc);
		void **old = realloc(st->old_arrays, (st->n_old_arrays + 1) * sizeof *old);
		if (!nc || !old) {
			free(nc);
			if (old)
				st->old_arrays = old;
			pthread_mutex_destroy(&c->schema_lock);
			free(c);
			pthread_mutex_unlock(&st->cols_lock);
			return NULL;
		}
		if (n)
			memcpy(nc, cols, n * sizeof *nc);
		st->old_arrays = old;
		if (cols)
			st->old_arrays[st->n_old_arrays++] = cols; /* readers may still scan it: free at destroy */
		st->cols_cap = cap;
		cols = nc;
		/* release: the copied entries are visible before the array pointer. */
		atomic_store_explicit(&st->cols, nc, memory_order_release);
	}
	cols[n] = c;
	/* release: the new column and its slot are visible before the count that exposes them. A reader
	 * that loads the count (acquire) and then the array pointer gets an array holding entry n. */
	atomic_store_explicit(&st->ncols, n + 1, memory_order_release);
	pthread_mutex_unlock(&st->cols_lock);
	return c;
}

uint32_t ovs_column_row(ovs_column *c, ovx_primpath_t path)
{
	_Atomic uint32_t *slot = ovs_radix_slot(&c->rows, path, false);
	if (!slot)
		return UINT32_MAX;
	/* acquire: pairs with the CAS that assigned the row (the row number is all we read). */
	uint32_t v = atomic_load_explicit(slot, memory_order_acquire);
	return v ? v - 1 : UINT32_MAX;
}

uint32_t ovs_column_row_create(ovs_column *c, ovx_primpath_t path, bool *created)
{
	*created = false;
	_Atomic uint32_t *slot = ovs_radix_slot(&c->rows, path, true);
	if (!slot)
		return UINT32_MAX;
	uint32_t v = atomic_load_explicit(slot, memory_order_acquire);
	if (v)
		return v - 1;
	/* relaxed: a row number only needs to be unique. */
	uint32_t row = atomic_fetch_add_explicit(&c->nrows, 1, memory_order_relaxed);
	uint32_t expected = 0;
	/* acq_rel: whoever wins, every thread agrees on the row of this path from now on. A loser's
	 * row number stays unused (a hole that is never present). */
	if (atomic_compare_exchange_strong_explicit(slot, &expected, row + 1, memory_order_acq_rel,
						    memory_order_acquire)) {
		*created = true;
		atomic_fetch_add_explicit(&c->generation, 1, memory_order_relaxed);
		return row;
	}
	return expected - 1;
}

bool ovs_prim_exists(ovs_stage *st, ovx_primpath_t path)
{
	_Atomic uint32_t *slot = ovs_radix_slot(&st->prims, path, false);
	/* acquire: pairs with ovs_prim_set's release. */
	return slot && atomic_load_explicit(slot, memory_order_acquire) == 1;
}

bool ovs_prim_set(ovs_stage *st, ovx_primpath_t path, uint32_t state)
{
	_Atomic uint32_t *slot = ovs_radix_slot(&st->prims, path, true);
	if (!slot)
		return false;
	/* release: a reader that sees the state sees the writes that created the prim. */
	atomic_store_explicit(slot, state, memory_order_release);
	return true;
}

ovstage_api_status_t ovs_check_unsealed(ovs_stage *st)
{
	/* relaxed: a heuristic bound; a few writes may slip past a concurrent check. */
	int64_t u = atomic_load_explicit(&st->unsealed_bytes, memory_order_relaxed);
	if (st->max_unsealed_bytes && u >= st->max_unsealed_bytes)
		return ovs_err_set(OVSTAGE_ERROR_QUEUE_FULL,
				   "%lld MiB of written data is waiting for advance_write_floor (limit %lld MiB, "
				   "OVSTAGE_MAX_UNSEALED_MB): seal, then retry",
				   (long long)(u >> 20), (long long)(st->max_unsealed_bytes >> 20));
	return OVSTAGE_OK;
}

static size_t delta_bytes(const ovs_column *c, const ovs_delta *d)
{
	size_t rb = c->row_bytes, b = sizeof *d + (size_t)d->nrows * sizeof(uint32_t);
	if (d->kind == OVS_DELTA_FULL)
		b += (size_t)d->nrows * rb;
	else if (d->values)
		b += (size_t)d->nrows * rb;
	if (d->blobs)
		for (uint32_t i = 0; i < d->nrows; i++)
			b += sizeof(ovs_blob) + (d->blobs[i] ? (size_t)d->blobs[i]->len * rb : 0);
	return b;
}

void ovs_column_push_delta(ovs_stage *st, ovs_column *c, ovs_delta *d)
{
	d->bytes = delta_bytes(c, d);
	/* The shape of the row list, found here on the writer's thread (writes run in parallel) so that
	 * the sealer (one per stage) can copy a block with one memcpy and skip sorting. */
	if (!d->shape_known)
		d->sorted = d->contig = d->kind != OVS_DELTA_FULL;
	for (uint32_t i = 1; !d->shape_known && d->kind != OVS_DELTA_FULL && i < d->nrows && d->sorted; i++) {
		d->contig = d->contig && d->rows[i] == d->rows[i - 1] + 1;
		d->sorted = d->rows[i] > d->rows[i - 1];
	}
	/* relaxed: statistics for back-pressure. */
	atomic_fetch_add_explicit(&st->unsealed_bytes, (int64_t)d->bytes, memory_order_relaxed);
	/* What sealing it may copy, at most (chunk.c): a full write's rows; a block's rows and the two
	 * chunks at its ends; a scattered write a chunk per row; each with the replays of the retained
	 * deltas; never more than the column (compaction aside). relaxed: an estimate for choosing
	 * where the seal runs, read by floor.c under no ordering. */
	uint64_t nr = atomic_load_explicit(&c->nrows, memory_order_relaxed), col = nr * c->row_bytes;
	uint64_t rows = (uint64_t)d->nrows * c->row_bytes * (1 + st->retention);
	uint64_t chunks = d->contig ? 2 * (uint64_t)st->chunk_bytes : (uint64_t)d->nrows * st->chunk_bytes;
	d->cost = d->kind == OVS_DELTA_FULL	 ? (uint64_t)d->nrows * c->row_bytes
		  : d->kind == OVS_DELTA_TOMBSTONE ? nr / 8 /* a presence bitmap */
						   : (rows + chunks < col ? rows + chunks : col);
	atomic_fetch_add_explicit(&c->seal_cost, d->cost, memory_order_relaxed);
	ovs_delta *head = atomic_load_explicit(&c->inbox, memory_order_relaxed);
	do {
		d->next = head;
		/* release: the delta's contents are visible to the seal that takes the inbox (acquire). */
	} while (!atomic_compare_exchange_weak_explicit(&c->inbox, &head, d, memory_order_release,
							memory_order_relaxed));
}

void ovs_delta_free(ovs_delta *d)
{
	if (!d)
		return;
	if (d->blobs)
		for (uint32_t i = 0; i < d->nrows; i++)
			ovs_blob_unref(d->blobs[i]);
	free(d->blobs);
	if (d->rows_map)
		ovs_rowmap_unref(d->rows_map);
	else if (d->rows_buf)
		ovs_buffer_unref(d->rows_buf);
	else
		free(d->rows);
	if (d->values_buf)
		ovs_buffer_unref(d->values_buf);
	else
		free(d->values);
	ovs_buffer_unref(d->full);
	free(d);
}

ovs_version *ovs_snapshot_version(const ovs_snapshot *snap, const ovs_column *c)
{
	if (!snap)
		return NULL;
	for (size_t i = 0; i < snap->ncols; i++)
		if (snap->cols[i] == c)
			return snap->versions[i];
	return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Versions
 */

void ovs_version_ref(ovs_version *v)
{
	atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
}

static void version_free(ovs_version *v)
{
	while (v) {
		/* acq_rel: the last holder sees every reader's accesses before freeing. */
		if (atomic_fetch_sub_explicit(&v->refs, 1, memory_order_acq_rel) != 1)
			return;
		ovs_version *older = atomic_load_explicit(&v->older, memory_order_relaxed);
		atomic_fetch_sub_explicit(&g_live_versions, 1, memory_order_relaxed);
		if (v->blobs)
			for (uint32_t r = 0; r < v->rows; r++)
				ovs_blob_unref(v->blobs[r]);
		free(v->blobs);
		ovs_version_chunks_free(v);
		free(v->present);
		if (v->changed_owned)
			free(v->changed);
		ovs_delta *d = v->deltas;
		while (d) {
			ovs_delta *n = d->next;
			ovs_delta_free(d);
			d = n;
		}
		free(v);
		v = older; /* drop the reference this version held on the older one */
	}
}

void ovs_version_unref(ovs_version *v)
{
	version_free(v);
}

static int cmp_delta(const void *a, const void *b)
{
	const ovs_delta *x = *(ovs_delta *const *)a, *y = *(ovs_delta *const *)b;
	if (x->ordinal != y->ordinal)
		return x->ordinal < y->ordinal ? -1 : 1;
	return x->seq < y->seq ? -1 : (x->seq > y->seq);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : (x > y);
}

/* Drains the inbox into the sorted pending list. Seal-owned state. */
static bool take_inbox(ovs_column *c)
{
	/* acquire: pairs with the writers' release pushes. */
	ovs_delta *in = atomic_exchange_explicit(&c->inbox, NULL, memory_order_acquire);
	if (!in)
		return true;
	if (!in->next && !c->pending) {
		c->pending = in; /* one write since the last seal (the per-step case): nothing to sort */
		return true;
	}
	size_t n = 0;
	for (ovs_delta *d = in; d; d = d->next)
		n++;
	for (ovs_delta *d = c->pending; d; d = d->next)
		n++;
	ovs_delta **arr = malloc(n * sizeof *arr);
	if (!arr) {
		/* put them back; the next seal retries */
		ovs_delta *last = in;
		while (last->next)
			last = last->next;
		last->next = c->pending;
		c->pending = in;
		return false;
	}
	size_t k = 0;
	for (ovs_delta *d = in; d; d = d->next)
		arr[k++] = d;
	for (ovs_delta *d = c->pending; d; d = d->next)
		arr[k++] = d;
	qsort(arr, n, sizeof *arr, cmp_delta);
	for (size_t i = 0; i + 1 < n; i++)
		arr[i]->next = arr[i + 1];
	arr[n - 1]->next = NULL;
	c->pending = arr[0];
	free(arr);
	return true;
}

static inline void bit_set(uint64_t *bm, uint32_t r)
{
	bm[r / 64] |= (uint64_t)1 << (r % 64);
}

static inline void bit_clear(uint64_t *bm, uint32_t r)
{
	bm[r / 64] &= ~((uint64_t)1 << (r % 64));
}

/* Sets bits [0, n) (whole words at once). */
static void bits_set_prefix(uint64_t *bm, uint32_t n)
{
	memset(bm, 0xff, (size_t)(n / 64) * sizeof *bm);
	if (n % 64)
		bm[n / 64] |= ((uint64_t)1 << (n % 64)) - 1;
}

/* Whether bits [0, n) are all set. */
static bool bits_all_prefix(const uint64_t *bm, uint32_t n)
{
	for (uint32_t w = 0; w < n / 64; w++)
		if (bm[w] != ~(uint64_t)0)
			return false;
	return !(n % 64) || (bm[n / 64] | ~(((uint64_t)1 << (n % 64)) - 1)) == ~(uint64_t)0;
}

/* The presence bitmap of a version being built (NULL when every row holds a value): a column whose
 * rows were all present stays so under value updates without touching a bitmap. */
static bool build_presence(ovs_version *v, const ovs_version *prev, const ovs_delta *ds, const ovs_delta *last_full,
			   bool has_tomb)
{
	uint32_t rows = v->rows;
	if (!has_tomb && ((last_full && last_full->nrows == rows) || (prev && !prev->present && prev->rows == rows))) {
		v->present = NULL; /* every row present */
		return true;
	}
	size_t words = ((size_t)rows + 63) / 64;
	uint64_t *present = calloc(words ? words : 1, sizeof *present);
	if (!present)
		return false;
	if (prev && prev->present)
		memcpy(present, prev->present, ((size_t)prev->rows + 63) / 64 * sizeof *present);
	else if (prev)
		bits_set_prefix(present, prev->rows);
	for (const ovs_delta *d = ds; d; d = d->next) {
		if (d->kind == OVS_DELTA_FULL)
			bits_set_prefix(present, d->nrows);
		else if (d->kind == OVS_DELTA_SPARSE)
			for (uint32_t i = 0; i < d->nrows; i++)
				bit_set(present, d->rows[i]);
		else
			for (uint32_t i = 0; i < d->nrows; i++)
				bit_clear(present, d->rows[i]);
	}
	if (bits_all_prefix(present, rows)) {
		free(present);
		present = NULL;
	}
	v->present = present;
	return true;
}

/* The rows changed at this ordinal (sorted, unique) for range reads; all_changed when a full write
 * covered every row. One delta whose rows are already sorted lends its array. */
static bool build_changed(ovs_version *v, ovs_delta *ds, const ovs_delta *last_full)
{
	if (last_full && last_full->nrows == v->rows) {
		v->all_changed = true;
		return true;
	}
	size_t n = 0, ndeltas = 0;
	ovs_delta *only = NULL;
	for (ovs_delta *d = ds; d; d = d->next) {
		n += d->nrows;
		ndeltas++;
		only = d;
	}
	if (!n)
		return true;
	if (ndeltas == 1 && only->kind != OVS_DELTA_FULL && only->sorted) {
		v->changed = only->rows;
		v->nchanged = only->nrows;
		v->changed_owned = false;
		return true;
	}
	uint32_t *chg = malloc(n * sizeof *chg);
	if (!chg)
		return false;
	size_t k = 0;
	for (ovs_delta *d = ds; d; d = d->next) {
		if (d->kind == OVS_DELTA_FULL)
			for (uint32_t r = 0; r < d->nrows; r++)
				chg[k++] = r;
		else
			memcpy(chg + k, d->rows, (size_t)d->nrows * sizeof *chg), k += d->nrows;
	}
	qsort(chg, k, sizeof *chg, cmp_u32);
	size_t u = 0;
	for (size_t i = 0; i < k; i++)
		if (u == 0 || chg[u - 1] != chg[i])
			chg[u++] = chg[i];
	v->changed = chg;
	v->nchanged = (uint32_t)u;
	v->changed_owned = true;
	return true;
}

/* Whether two versions split reads into the same runs. */
static bool same_runs(const ovs_version *a, const ovs_version *b)
{
	if (a->nruns != b->nruns)
		return false;
	for (uint32_t i = 0; i < a->nruns; i++)
		if (a->runs[i].row0 != b->runs[i].row0 || a->runs[i].nrows != b->runs[i].nrows)
			return false;
	return true;
}

/* Builds the version sealing the deltas `ds` (same ordinal, sorted by seq) on top of `prev`. */
static ovs_version *build_version(ovs_stage *st, jobs_worker *w, ovs_column *c, ovs_version *prev, ovs_delta *ds,
				  char *err, size_t errlen)
{
	uint32_t rows = prev ? prev->rows : 0;
	ovs_delta *last_full = NULL;
	bool has_tomb = false;
	for (ovs_delta *d = ds; d; d = d->next) {
		if (d->kind == OVS_DELTA_FULL) {
			last_full = d;
			if (d->nrows > rows)
				rows = d->nrows;
		} else {
			has_tomb |= d->kind == OVS_DELTA_TOMBSTONE;
			if (d->sorted && d->nrows) /* the last row is the highest */
				rows = d->rows[d->nrows - 1] + 1 > rows ? d->rows[d->nrows - 1] + 1 : rows;
			else
				for (uint32_t i = 0; i < d->nrows; i++)
					if (d->rows[i] + 1 > rows)
						rows = d->rows[i] + 1;
		}
	}
	ovs_version *v = calloc(1, sizeof *v);
	if (!v) {
		ovs_err_format(err, errlen, "out of memory sealing column");
		return NULL;
	}
	atomic_init(&v->refs, 1);
	atomic_fetch_add_explicit(&g_live_versions, 1, memory_order_relaxed);
	v->rows = rows;
	v->ordinal = ds->ordinal;
	v->base_ordinal = prev ? prev->ordinal : 0;
	if (!build_presence(v, prev, ds, last_full, has_tomb) || !build_changed(v, ds, last_full)) {
		ovs_version_unref(v);
		ovs_err_format(err, errlen, "out of memory recording presence and changed rows");
		return NULL;
	}
	if (c->schema.is_array) {
		/* Array columns: a table of blob pointers. Shared blobs are referenced, not copied: the
		 * version costs one pointer per row plus the rows the deltas bring. */
		v->blobs = calloc(rows ? rows : 1, sizeof *v->blobs);
		if (!v->blobs) {
			ovs_version_unref(v);
			ovs_err_format(err, errlen, "out of memory sealing an array column");
			return NULL;
		}
		if (prev)
			for (uint32_t r = 0; r < prev->rows; r++) {
				v->blobs[r] = prev->blobs[r];
				ovs_blob_ref(v->blobs[r]);
			}
		for (ovs_delta *d = ds; d; d = d->next)
			for (uint32_t i = 0; i < d->nrows; i++) {
				uint32_t r = d->rows[i];
				ovs_blob_unref(v->blobs[r]);
				v->blobs[r] = NULL;
				if (d->kind == OVS_DELTA_SPARSE) {
					v->blobs[r] = d->blobs[i];
					ovs_blob_ref(v->blobs[r]);
				}
			}
	} else if (!ovs_chunks_build(st, w, c, v, prev, ds, err, errlen)) {
		ovs_version_unref(v);
		return NULL;
	} else if (prev && !prev->blobs && !same_runs(v, prev)) {
		c->run_changes++; /* reads split differently: a layout change for consumers */
	}
	v->generation = atomic_load_explicit(&c->generation, memory_order_relaxed) + c->run_changes;
	v->deltas = ds;
	return v;
}

/* Cuts the versions beyond the retention depth from the chain starting at `head` and returns them
 * (the caller drops them after the grace period: a reader may be walking into them). */
static ovs_version *trim_retention(ovs_column *c, ovs_version *head, uint32_t keep)
{
	ovs_version *v = head;
	for (uint32_t i = 1; v && i < keep; i++)
		v = atomic_load_explicit(&v->older, memory_order_relaxed); /* seal-owned chain */
	if (!v)
		return NULL;
	ovs_version *drop = atomic_load_explicit(&v->older, memory_order_relaxed);
	if (!drop)
		return NULL;
	/* release: pairs with readers' acquire loads of `older` (they see either the old link, and
	 * the version stays alive until the grace period ends, or NULL). */
	atomic_store_explicit(&v->older, NULL, memory_order_release);
	uint64_t dropped = drop->ordinal;
	uint64_t cur = atomic_load_explicit(&c->dropped_through, memory_order_relaxed);
	if (dropped > cur)
		/* release: a reader that sees the frontier moved also sees the cut chain. */
		atomic_store_explicit(&c->dropped_through, dropped, memory_order_release);
	return drop;
}

static void bury(ovs_limbo *g, ovs_column *c, ovs_version *v)
{
	if (!v)
		return;
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 8;
		ovs_version **nv = realloc(g->v, cap * sizeof *nv);
		ovs_column **nc = nv ? realloc(g->c, cap * sizeof *nc) : NULL;
		if (nv)
			g->v = nv;
		if (!nc)
			return; /* leak rather than free under a reader: bounded by allocation failure */
		g->c = nc;
		g->cap = cap;
	}
	g->v[g->n] = v;
	g->c[g->n++] = c;
}

static void free_snapshot(ovs_snapshot *snap)
{
	if (!snap)
		return;
	for (size_t i = 0; i < snap->ncols; i++)
		ovs_version_unref(snap->versions[i]);
	free(snap->cols);
	free(snap->versions);
	free(snap);
}

/* Frees what the limbo holds (its readers have left), harvesting spare buffers if asked. */
static void empty_limbo(ovs_limbo *g, bool harvest)
{
	for (size_t i = 0; i < g->n; i++) {
		if (harvest)
			ovs_chunks_harvest(g->c[i], g->v[i]);
		ovs_version_unref(g->v[i]);
	}
	g->n = 0;
	free_snapshot(g->snap);
	g->snap = NULL;
	g->used = false;
}

/* Waits until the readers that could reach the limbo's contents have left, then frees them. */
static void reclaim_limbo(ovs_stage *st)
{
	ovs_limbo *g = &st->limbo;
	if (!g->used)
		return;
	ovs_grace_wait(&st->grace, g->parity);
	empty_limbo(g, true);
}

/* Seals one column through n: builds a version per ordinal, chains it, trims retention. */
static ovstage_api_status_t seal_column(ovs_stage *st, jobs_worker *w, ovs_column *c, ovstage_ordinal_t n,
					ovs_limbo *gy, char *err, size_t errlen)
{
	if (!take_inbox(c)) {
		ovs_err_format(err, errlen, "out of memory sorting pending writes of a column");
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	while (c->pending && c->pending->ordinal <= n) {
		/* cut the run of deltas at this ordinal */
		ovs_delta *ds = c->pending, *last = ds;
		int64_t sealed_bytes = (int64_t)ds->bytes;
		while (last->next && last->next->ordinal == ds->ordinal) {
			last = last->next;
			sealed_bytes += (int64_t)last->bytes;
		}
		c->pending = last->next;
		last->next = NULL;
		uint64_t sealed_cost = 0;
		for (ovs_delta *d = ds; d; d = d->next)
			sealed_cost += d->cost;
		ovs_version *v = build_version(st, w, c, c->latest, ds, err, errlen);
		if (!v) {
			/* keep the deltas for a later seal */
			last->next = c->pending;
			c->pending = ds;
			return OVSTAGE_ERROR_OUT_OF_MEMORY;
		}
		atomic_fetch_sub_explicit(&st->unsealed_bytes, sealed_bytes, memory_order_relaxed);
		atomic_fetch_sub_explicit(&c->seal_cost, sealed_cost, memory_order_relaxed); /* an estimate */
		/* relaxed: published to readers by the snapshot's release store. The chain's reference
		 * moves to the new version. */
		atomic_store_explicit(&v->older, c->latest, memory_order_relaxed);
		c->latest = v;
		bury(gy, c, trim_retention(c, v, st->retention));
	}
	return OVSTAGE_OK;
}

ovstage_api_status_t ovs_store_seal(ovs_stage *st, jobs_worker *w, ovs_column **cols, size_t ncols,
				    ovstage_ordinal_t n, bool advance_stage_floor, char *err, size_t errlen)
{
	/* The previous seal's retirees first (their spare buffers serve this seal's sparse versions). */
	reclaim_limbo(st);
	ovs_limbo *gy = &st->limbo;
	for (size_t i = 0; i < ncols; i++) {
		ovstage_api_status_t s = seal_column(st, w, cols[i], n, gy, err, errlen);
		if (s != OVSTAGE_OK) {
			/* Versions built so far stay chained (the next seal publishes them); the ones cut from
			 * retention are dropped after a grace period (rare path: wait for it here). */
			ovs_grace_wait(&st->grace, ovs_grace_flip(&st->grace));
			empty_limbo(gy, false);
			return s;
		}
	}
	/* Build the new snapshot: every column known now, with its latest version. */
	size_t total = atomic_load_explicit(&st->ncols, memory_order_acquire);
	ovs_column **all = atomic_load_explicit(&st->cols, memory_order_acquire);
	ovs_snapshot *snap = calloc(1, sizeof *snap);
	ovs_column **sc = malloc((total ? total : 1) * sizeof *sc);
	ovs_version **sv = malloc((total ? total : 1) * sizeof *sv);
	if (!snap || !sc || !sv) {
		free(snap);
		free(sc);
		free(sv);
		ovs_err_format(err, errlen, "out of memory publishing a snapshot");
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	size_t k = 0;
	for (size_t i = 0; i < total; i++) {
		if (!all[i]->latest)
			continue;
		sc[k] = all[i];
		sv[k] = all[i]->latest;
		ovs_version_ref(sv[k]);
		k++;
	}
	snap->cols = sc;
	snap->versions = sv;
	snap->ncols = k;
	ovs_snapshot *prev = ovs_grace_snapshot_owner(&st->grace);
	snap->seq = prev ? prev->seq + 1 : 1;
	/* The versions (and everything sealed into them) become visible to readers all at once. */
	ovs_snapshot *old = ovs_grace_publish(&st->grace, snap);
	/* Floors move after the snapshot: a reader that sees floor >= N then reads a snapshot that
	 * holds ordinal N. release: orders the snapshot store before the floor. */
	for (size_t i = 0; i < ncols; i++) {
		uint64_t f = atomic_load_explicit(&cols[i]->floor, memory_order_relaxed);
		if (n > f)
			atomic_store_explicit(&cols[i]->floor, n, memory_order_release);
	}
	if (advance_stage_floor && n > atomic_load_explicit(&st->all_floor, memory_order_relaxed))
		atomic_store_explicit(&st->all_floor, n, memory_order_release);
	/* Retire the old snapshot and the cut versions: new readers use the other counter from the
	 * flip on and cannot reach them; the readers of this parity are waited for by the next seal. */
	gy->snap = old;
	gy->parity = ovs_grace_flip(&st->grace);
	gy->used = true;
	/* Usually nobody is inside: free now; otherwise the next seal does (it waits for them then, by
	 * which time they have left). */
	if (ovs_grace_quiet(&st->grace, gy->parity))
		empty_limbo(gy, true);
	return OVSTAGE_OK;
}

ovstage_ordinal_t ovs_store_oldest_preserved(ovs_stage *st)
{
	size_t n = atomic_load_explicit(&st->ncols, memory_order_acquire);
	ovs_column **cols = atomic_load_explicit(&st->cols, memory_order_acquire);
	uint64_t oldest = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t d = atomic_load_explicit(&cols[i]->dropped_through, memory_order_acquire);
		if (d + 1 > oldest)
			oldest = d + 1; /* history below d + 1 is gone in at least this column */
	}
	return oldest;
}

void ovs_store_fini(ovs_stage *st)
{
	empty_limbo(&st->limbo, false); /* no readers are left at destroy */
	free(st->limbo.v);
	free(st->limbo.c);
	free_snapshot(ovs_grace_snapshot_owner(&st->grace));
	size_t n = atomic_load_explicit(&st->ncols, memory_order_relaxed);
	ovs_column **cols = atomic_load_explicit(&st->cols, memory_order_relaxed);
	for (size_t i = 0; i < n; i++) {
		ovs_column *c = cols[i];
		ovs_delta *d = atomic_load_explicit(&c->inbox, memory_order_relaxed);
		while (d) {
			ovs_delta *nx = d->next;
			ovs_delta_free(d);
			d = nx;
		}
		d = c->pending;
		while (d) {
			ovs_delta *nx = d->next;
			ovs_delta_free(d);
			d = nx;
		}
		ovs_version_unref(c->latest);
		ovs_chunks_drop_spares(c);
		ovs_radix_fini(&c->rows);
		pthread_mutex_destroy(&c->schema_lock);
		free(c);
	}
	free(cols);
	for (size_t i = 0; i < st->n_old_arrays; i++)
		free(st->old_arrays[i]);
	free(st->old_arrays);
	ovs_radix_fini(&st->prims);
}
