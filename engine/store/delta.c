/* delta.c — deltas: back-pressure, the column inbox, the seal's sorted pending list (see delta.h). */
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "store.h"
#include "column.h"
#include "delta.h"
#include "version.h"

/* Whether a write at `ordinal` fills a gap of column c: it is at most the column's lowest writable
 * ordinal (floor + 1) or at most the lowest ordinal of its unsealed data. relaxed: both are hints
 * (see delta.h: a stale value over-admits, never refuses what a seal needs). */
static bool fills_gap(const ovs_column *c, ovstage_ordinal_t ordinal)
{
	uint64_t f = atomic_load_explicit(&c->floor, memory_order_relaxed);
	uint64_t m = atomic_load_explicit(&c->min_unsealed, memory_order_relaxed);
	return ordinal <= f + 1 || ordinal <= m;
}

/* Whether every column in cols (every column of the stage when cols is NULL) admits the gap filler. */
static bool all_fill_gaps(ovs_store *st, ovstage_ordinal_t ordinal, const ovx_token_t *cols, size_t ncols)
{
	if (cols) {
		for (size_t i = 0; i < ncols; i++) {
			const ovs_column *c = ovs_column_find(st, cols[i]);
			if (c && !fills_gap(c, ordinal))
				return false;
		}
		return true;
	}
	size_t n = atomic_load_explicit(&st->ncols, memory_order_acquire);
	ovs_column **all = atomic_load_explicit(&st->cols, memory_order_acquire);
	for (size_t i = 0; i < n; i++)
		if (!fills_gap(all[i], ordinal))
			return false;
	return true;
}

ovstage_api_status_t ovs_check_unsealed(ovs_store *st, ovstage_ordinal_t ordinal, const ovx_token_t *cols,
					size_t ncols)
{
	/* relaxed: a heuristic bound; a few writes may slip past a concurrent check. */
	int64_t u = atomic_load_explicit(&st->unsealed_bytes, memory_order_relaxed);
	if (!st->max_unsealed_bytes || u < st->max_unsealed_bytes || all_fill_gaps(st, ordinal, cols, ncols))
		return OVSTAGE_OK;
	return ovs_err_set(OVSTAGE_ERROR_QUEUE_FULL,
			   "%lld MiB of written data is waiting for advance_write_floor (limit %lld MiB, "
			   "OVSTAGE_MAX_UNSEALED_MB) and ordinal %llu is above the lowest unsealed ordinal: seal, "
			   "then retry", (long long)(u >> 20), (long long)(st->max_unsealed_bytes >> 20),
			   (unsigned long long)ordinal);
}

/* Lowers c->min_unsealed to o. relaxed: a hint for back-pressure only (delta.h). */
static void min_unsealed_lower(ovs_column *c, ovstage_ordinal_t o)
{
	uint64_t m = atomic_load_explicit(&c->min_unsealed, memory_order_relaxed);
	while (o < m && !atomic_compare_exchange_weak_explicit(&c->min_unsealed, &m, o, memory_order_relaxed,
							       memory_order_relaxed))
		;
}

void ovs_column_min_unsealed_reset(ovs_column *c)
{
	/* relaxed: a hint. A push racing this store may be forgotten (the next push lowers it again): the
	 * value can only be too high, which admits a write more, never too low, which could refuse the
	 * write a seal needs. */
	atomic_store_explicit(&c->min_unsealed, c->pending ? c->pending->ordinal : UINT64_MAX, memory_order_relaxed);
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

void ovs_unsealed_add(ovs_store *st, int64_t bytes)
{
	if (bytes)
		/* relaxed: statistics for back-pressure. */
		atomic_fetch_add_explicit(&st->unsealed_bytes, bytes, memory_order_relaxed);
}

void ovs_column_push_delta(ovs_store *st, ovs_column *c, ovs_delta *d)
{
	int64_t u = 0;
	ovs_column_push_delta_acc(st, c, d, &u);
	ovs_unsealed_add(st, u);
}

void ovs_column_push_delta_acc(ovs_store *st, ovs_column *c, ovs_delta *d, int64_t *unsealed)
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
	*unsealed += (int64_t)d->bytes;
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
	min_unsealed_lower(c, d->ordinal);
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
	if (d->rows_lent)
		; /* a change set owns the rows now (build_changed) */
	else if (d->rows_map)
		ovs_rowmap_unref(d->rows_map);
	else if (d->rows_buf)
		ovs_buffer_unref(d->rows_buf);
	else
		free(d->rows);
	if (d->values_buf)
		ovs_buffer_unref(d->values_buf);
	else
		free(d->values);
	ovs_buffer_unref(d->rows_dev);
	ovs_buffer_unref(d->full);
	free(d);
}

const uint32_t *ovs_delta_rows_dev(ovs_store *st, ovs_exec *x, ovs_delta *d)
{
	if (d->rows_dev)
		return d->rows_dev->data;
	if (!d->nrows || !d->rows || !x->gpu)
		return NULL;
	size_t bytes = (size_t)d->nrows * sizeof *d->rows;
	d->rows_dev = ovs_buffer_new_in(st, x, bytes);
	if (!d->rows_dev)
		return NULL;
	/* host to device from pageable memory: staged by the driver before it returns, ordered before
	 * every later use on x's engine stream (the only stream that uses it) */
	d->rows_dev->ops->copy(x, d->rows_dev->data, d->rows, bytes);
	return d->rows_dev->data;
}

static int cmp_delta(const void *a, const void *b)
{
	const ovs_delta *x = *(ovs_delta *const *)a, *y = *(ovs_delta *const *)b;
	if (x->ordinal != y->ordinal)
		return x->ordinal < y->ordinal ? -1 : 1;
	return x->seq < y->seq ? -1 : (x->seq > y->seq);
}

/* Drains the inbox into the sorted pending list. Seal-owned state. */
bool ovs_column_take_inbox(ovs_column *c)
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

