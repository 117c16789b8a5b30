/* column.c — columns: creation and lookup, rows of prims, prim existence, teardown (see column.h). */
#include <stdlib.h>
#include <string.h>

#include "chunk.h"
#include "store.h"
#include "column.h"
#include "fold.h"
#include "device.h"
#include "delta.h"
#include "handoff.h"
#include "seal.h"
#include "version.h"


void ovs_store_init(ovs_store *s, uint32_t retention, size_t chunk_bytes, int64_t max_unsealed_bytes)
{
	memset(s, 0, sizeof *s);
	s->retention = retention;
	s->chunk_bytes = chunk_bytes;
	s->max_unsealed_bytes = max_unsealed_bytes;
	pthread_mutex_init(&s->cols_lock, NULL);
	atomic_init(&s->cols, NULL);
	atomic_init(&s->ncols, 0);
	atomic_init(&s->all_floor, 0);
	ovs_radix_init(&s->prims);
	ovs_radix_init(&s->col_index);
	atomic_init(&s->col_index_ok, true);
	atomic_init(&s->prim_deletes, 0);
	atomic_init(&s->prim_creations, 0);
	ovs_pool_init(&s->pool);
	atomic_init(&s->mem.buffer_bytes, 0);
	atomic_init(&s->mem.buffers, 0);
	atomic_init(&s->unsealed_bytes, 0);
	atomic_init(&s->history_bytes, 0);
	atomic_init(&s->lc_job_busy, false);
	atomic_init(&s->lc_fold_due, false);
	ovs_grace_init(&s->grace);
	for (int d = 0; d < OVS_STORE_GPUS; d++)
		atomic_init(&s->gpu[d], NULL);
	atomic_init(&s->floor_seq, 0);
	atomic_init(&s->floor_waiters, 0);
}

/* Every op looks up each of its columns, so a scan of the array made a step over many columns
 * quadratic (ovs_column_find was 7 % of a 100-column write + seal + read step): tokens are dense
 * ids, so a radix slot per token answers in two loads. Tokens at or above 2^32 (a foreign
 * dictionary's), or a store whose index missed a slot, scan the array. */
ovs_column *ovs_column_find(ovs_store *st, ovx_token_t name)
{
	/* acquire (slot, flag): pairs with the release stores in ovs_column_publish, which follow the
	 * column's publication in the array, so the array read below holds it. */
	bool indexed = name < UINT32_MAX && atomic_load_explicit(&st->col_index_ok, memory_order_acquire);
	if (indexed) {
		_Atomic uint32_t *slot = ovs_radix_slot(&st->col_index, name, false);
		uint32_t v = slot ? atomic_load_explicit(slot, memory_order_acquire) : 0;
		if (!v)
			return NULL;
		return atomic_load_explicit(&st->cols, memory_order_acquire)[v - 1];
	}
	/* acquire: pairs with the release publication of the array and of its count, so the column
	 * structs and their initialised fields are visible. */
	size_t n = atomic_load_explicit(&st->ncols, memory_order_acquire);
	ovs_column **cols = atomic_load_explicit(&st->cols, memory_order_acquire);
	for (size_t i = 0; i < n; i++)
		if (cols[i]->name == name)
			return cols[i];
	return NULL;
}

/* The index slot of a column just published (cols_lock held). */
static void index_locked(ovs_store *st, const ovs_column *c)
{
	if (c->name >= UINT32_MAX)
		return; /* scanned for (ovs_column_find) */
	_Atomic uint32_t *slot = ovs_radix_slot(&st->col_index, c->name, true);
	if (slot)
		atomic_store_explicit(slot, c->index + 1, memory_order_release); /* release: see find */
	else
		atomic_store_explicit(&st->col_index_ok, false, memory_order_release); /* scans from now on */
}

/* Room in the column array for one more column than are published or reserved. Caller holds
 * cols_lock. False when out of memory (nothing changed). */
static bool reserve_locked(ovs_store *st)
{
	size_t n = atomic_load_explicit(&st->ncols, memory_order_relaxed); /* under cols_lock */
	if (n + st->cols_reserved < st->cols_cap)
		return true;
	ovs_column **cols = atomic_load_explicit(&st->cols, memory_order_relaxed);
	size_t cap = st->cols_cap ? st->cols_cap * 2 : 16;
	ovs_column **nc = malloc(cap * sizeof *nc);
	void **old = realloc(st->old_arrays, (st->n_old_arrays + 1) * sizeof *old);
	if (!nc || !old) {
		free(nc);
		if (old)
			st->old_arrays = old;
		return false;
	}
	if (n)
		memcpy(nc, cols, n * sizeof *nc);
	st->old_arrays = old;
	if (cols)
		st->old_arrays[st->n_old_arrays++] = cols; /* readers may still scan it: free at destroy */
	st->cols_cap = cap;
	/* release: the copied entries are visible before the array pointer. */
	atomic_store_explicit(&st->cols, nc, memory_order_release);
	return true;
}

static void column_free_unpublished(ovs_column *c)
{
	pthread_mutex_destroy(&c->schema_lock);
	pthread_mutex_destroy(&c->rows_lock);
	free(c);
}

ovs_column *ovs_column_prepare(ovs_store *st, ovx_token_t name)
{
	ovs_column *c = ovs_column_find(st, name);
	if (c)
		return c;
	c = aligned_alloc(_Alignof(ovs_column), sizeof *c); /* the line groups must be real lines */
	if (!c)
		return NULL;
	memset(c, 0, sizeof *c);
	c->name = name;
	c->prepared = true;
	pthread_mutex_init(&c->schema_lock, NULL);
	pthread_mutex_init(&c->rows_lock, NULL);
	ovs_radix_init(&c->rows);
	atomic_init(&c->max_written, 0);
	atomic_init(&c->dropped_through, 0);
	atomic_init(&c->handoff, NULL);
	atomic_init(&c->nrows, 0);
	atomic_init(&c->generation, 1);
	atomic_init(&c->has_schema, false);
	atomic_init(&c->inbox, NULL);
	atomic_init(&c->min_unsealed, UINT64_MAX);
	atomic_init(&c->lcfold.folded, 0);
	atomic_init(&c->lcfold.left, 0);
	atomic_init(&c->lcfold.busy, false);
	c->lcfold.counter = &st->history_bytes;
	pthread_mutex_lock(&st->cols_lock);
	bool ok = reserve_locked(st);
	if (ok)
		st->cols_reserved++; /* publishing it then needs no allocation */
	pthread_mutex_unlock(&st->cols_lock);
	if (!ok) {
		column_free_unpublished(c);
		return NULL;
	}
	return c;
}

ovs_column *ovs_column_publish(ovs_store *st, ovs_column *c, uint64_t floor)
{
	if (!c || !c->prepared)
		return c;
	pthread_mutex_lock(&st->cols_lock);
	st->cols_reserved--;
	ovs_column *existing = ovs_column_find(st, c->name);
	if (existing) { /* created meanwhile by another call: that one is the column */
		pthread_mutex_unlock(&st->cols_lock);
		column_free_unpublished(c);
		return existing;
	}
	size_t n = atomic_load_explicit(&st->ncols, memory_order_relaxed); /* under cols_lock */
	ovs_column **cols = atomic_load_explicit(&st->cols, memory_order_relaxed);
	c->index = (uint32_t)n;
	c->prepared = false;
	/* the floor new columns start from (the column is visible from here on); acquire: pairs with
	 * the seal's release store of the stage floor */
	uint64_t f = floor != UINT64_MAX ? floor : atomic_load_explicit(&st->all_floor, memory_order_acquire);
	atomic_init(&c->floor, f);
	atomic_init(&c->floor_requested, f);
	cols[n] = c; /* reserve_locked left room: n < cols_cap */
	/* release: the new column and its slot are visible before the count that exposes them. A reader
	 * that loads the count (acquire) and then the array pointer gets an array holding entry n. */
	atomic_store_explicit(&st->ncols, n + 1, memory_order_release);
	index_locked(st, c);
	pthread_mutex_unlock(&st->cols_lock);
	return c;
}

void ovs_column_discard(ovs_store *st, ovs_column *c)
{
	if (!c || !c->prepared)
		return;
	pthread_mutex_lock(&st->cols_lock);
	st->cols_reserved--;
	pthread_mutex_unlock(&st->cols_lock);
	column_free_unpublished(c);
}

ovs_column *ovs_column_get_or_create(ovs_store *st, ovx_token_t name)
{
	return ovs_column_publish(st, ovs_column_prepare(st, name), UINT64_MAX);
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
	/* Creating a row is serialised per column (a prim gets its row once, at its first write, so the
	 * lock is taken once per row): rows are numbered in the order prims are first written, without
	 * holes. Lock-free creation let two writers racing over the same prims (two producers' first
	 * writes) both take a number, the loser's becoming a hole; the column then had more rows than
	 * any query, so no later write could replace it whole and every dense write became a sparse one
	 * that the seal copied chunk by chunk. */
	pthread_mutex_lock(&c->rows_lock);
	v = atomic_load_explicit(slot, memory_order_relaxed); /* relaxed: rows are assigned under the lock */
	if (!v) {
		uint32_t row = atomic_load_explicit(&c->nrows, memory_order_relaxed);
		/* release: a thread that reads the row number (acquire) sees the radix slot's path. */
		atomic_store_explicit(slot, row + 1, memory_order_release);
		/* release: a writer that sees the count (acquire) sees every row below it assigned. */
		atomic_store_explicit(&c->nrows, row + 1, memory_order_release);
		atomic_fetch_add_explicit(&c->generation, 1, memory_order_relaxed);
		*created = true;
		v = row + 1;
	}
	pthread_mutex_unlock(&c->rows_lock);
	return v - 1;
}

bool ovs_column_rows_create(ovs_column *c, const ovx_primpath_t *paths, uint32_t n, uint32_t *rows, bool *created)
{
	*created = false;
	uint32_t nmiss = 0;
	for (uint32_t j = 0; j < n; j++) { /* lock-free: the rows that exist */
		rows[j] = ovs_column_row(c, paths[j]);
		nmiss += rows[j] == UINT32_MAX;
	}
	if (!nmiss)
		return true;
	/* the missing ones' radix slots first (allocating nodes, lock-free), then one locked pass */
	_Atomic uint32_t **slot = malloc((size_t)nmiss * sizeof *slot);
	if (!slot)
		return false;
	for (uint32_t j = 0, m = 0; j < n; j++)
		if (rows[j] == UINT32_MAX && !(slot[m++] = ovs_radix_slot(&c->rows, paths[j], true))) {
			free(slot);
			return false;
		}
	pthread_mutex_lock(&c->rows_lock);
	/* relaxed: rows are assigned under the lock (as in ovs_column_row_create) */
	uint32_t first = atomic_load_explicit(&c->nrows, memory_order_relaxed), next = first;
	for (uint32_t j = 0, m = 0; j < n; j++) {
		if (rows[j] != UINT32_MAX)
			continue;
		_Atomic uint32_t *sl = slot[m++];
		uint32_t v = atomic_load_explicit(sl, memory_order_relaxed); /* another writer's, or ours (a repeat) */
		if (!v) {
			v = ++next;
			/* release: a thread that reads the row number (acquire) sees the radix slot's path. */
			atomic_store_explicit(sl, v, memory_order_release);
		}
		rows[j] = v - 1;
	}
	if (next != first) {
		/* release: a writer that sees the count (acquire) sees every row below it assigned. */
		atomic_store_explicit(&c->nrows, next, memory_order_release);
		atomic_fetch_add_explicit(&c->generation, 1, memory_order_relaxed);
		*created = true;
	}
	pthread_mutex_unlock(&c->rows_lock);
	free(slot);
	return true;
}

bool ovs_prim_exists(ovs_store *st, ovx_primpath_t path)
{
	_Atomic uint32_t *slot = ovs_radix_slot(&st->prims, path, false);
	/* acquire: pairs with ovs_prim_set's release. */
	return slot && atomic_load_explicit(slot, memory_order_acquire) == 1;
}

bool ovs_prim_set(ovs_store *st, ovx_primpath_t path, uint32_t state)
{
	_Atomic uint32_t *slot = ovs_radix_slot(&st->prims, path, true);
	if (!slot)
		return false;
	/* relaxed: an existing prim stays as it is (the store that made it exist published it) */
	if (state == 1 && atomic_load_explicit(slot, memory_order_relaxed) == 1)
		return true;
	/* release: a reader that sees the state sees the writes that created the prim. */
	uint32_t was = atomic_exchange_explicit(slot, state, memory_order_release);
	if (state == 1 && was != 1)
		/* release: whoever sees the count (the hierarchy's forest key) sees the prim exist */
		atomic_fetch_add_explicit(&st->prim_creations, 1, memory_order_release);
	return true;
}

ovstage_ordinal_t ovs_store_oldest_preserved(ovs_store *st)
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


void ovs_store_fini(ovs_store *st)
{
	ovs_lc_job_fini(st); /* the fold job reads the columns: it finishes first */
	ovs_seal_fini(st);
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
		ovs_handoff_fini(&c->handoff); /* its buffer back to the pool, before the pool goes */
		ovs_lc_fold_fini(&c->lcfold);
		free(c->lcq);
		ovs_chunks_drop_spares(c);
		ovs_radix_fini(&c->rows);
		pthread_mutex_destroy(&c->schema_lock);
		pthread_mutex_destroy(&c->rows_lock);
		free(c);
	}
	free(cols);
	for (size_t i = 0; i < st->n_old_arrays; i++)
		free(st->old_arrays[i]);
	free(st->old_arrays);
	ovs_radix_fini(&st->prims);
	ovs_radix_fini(&st->col_index);
	pthread_mutex_destroy(&st->cols_lock);
	ovs_version_recycle_fini(st); /* the structs the seals cached, after every version went */
	ovs_store_devices_fini(st); /* after the versions: their device buffers were freed in stream order */
	ovs_pool_fini(st); /* last: freed versions returned their buffers to the pool */
}
