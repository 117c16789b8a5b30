/* version.c — sealed versions: blobs, reference counts, and building one ordinal's version (see version.h). */
#include <stdlib.h>
#include <string.h>

#include "chunk.h"
#include "errors.h"
#include "bitmap.h"
#include "store.h"
#include "version.h"
#include "rows_sort.h"
#include "device.h"
#include "gpu.h"
#include "delta.h"
#include "handoff.h"


/* A blob header of len elements and `extra` bytes after it (the bytes, or a device location), one
 * reference; NULL when out of memory. */
static ovs_blob *blob_alloc(uint64_t len, size_t extra, uint32_t on_device)
{
	ovs_blob *b = malloc(sizeof *b + extra);
	if (!b)
		return NULL;
	atomic_init(&b->refs, 1);
	b->on_device = on_device;
	b->len = len;
	b->shape = (int64_t)len;
	return b;
}

ovs_blob *ovs_blob_new(uint64_t len, size_t elem_bytes)
{
	if (elem_bytes && len > (SIZE_MAX - sizeof(ovs_blob)) / elem_bytes)
		return NULL;
	return blob_alloc(len, (size_t)len * elem_bytes, 0);
}

ovs_blob *ovs_blob_new_on(uint64_t len, ovs_buffer *buf, size_t off)
{
	ovs_blob *b = blob_alloc(len, sizeof(ovs_blob_dev), 1);
	if (!b)
		return NULL;
	ovs_blob_dev *d = (ovs_blob_dev *)(void *)b->data;
	d->buf = buf;
	d->off = off;
	ovs_buffer_ref(buf);
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
	if (!b || atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1)
		return;
	if (b->on_device) /* the buffer goes with the last row of its write (a stream-ordered free) */
		ovs_buffer_unref(((ovs_blob_dev *)(void *)b->data)->buf);
	free(b);
}


void ovs_version_ref(ovs_version *v)
{
	atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
}

/* The struct of a version whose last reference went: cached for the next build (rc non-NULL: the
 * sealer's; still counted live, so the cache costs no process-wide count either way) or freed. */
static void version_struct_drop(ovs_version *v, ovs_recycle *rc)
{
	if (rc && rc->versions.n < OVS_RECYCLE_MAX) {
		ovs_recycle_put(&rc->versions, v);
		return;
	}
	ovs_count_version(-1);
	free(v);
}

/* A delta of a version being freed: handed to the column's next full write when it can be (the
 * sealer's release, c non-NULL), else freed. */
static void delta_drop(ovs_delta *d, ovs_column *c)
{
	if (!c || !ovs_handoff_offer(&c->handoff, d))
		ovs_delta_free(d);
}

/* Drops a reference to v and, for each version whose last reference goes, to the older one. rc and c
 * are the sealer's (recycling, see ovs_version_release), or NULL (any thread: everything freed). */
static void version_free(ovs_version *v, ovs_recycle *rc, ovs_column *c)
{
	while (v) {
		/* acq_rel: the last holder sees every reader's accesses before freeing. */
		if (atomic_fetch_sub_explicit(&v->refs, 1, memory_order_acq_rel) != 1)
			return;
		ovs_version *older = atomic_load_explicit(&v->older, memory_order_relaxed);
		if (v->blobs) {
			for (uint32_t r = 0; r < v->rows; r++)
				ovs_blob_unref(v->blobs[r]);
			free(v->blobs);
		}
		ovs_version_chunks_release(v, rc); /* before the deltas: then a full delta's buffer is theirs */
		if (v->present) /* usually none (every row present): no call of free(NULL) */
			free(v->present);
		ovs_gpu_event_release(v->ready); /* safe while readers' waits on it are pending */
		ovs_delta *d = v->deltas;
		while (d) {
			ovs_delta *n = d->next;
			delta_drop(d, c);
			d = n;
		}
		ovs_chset_release(v->cs, rc); /* after the deltas: one may have lent it its rows */
		version_struct_drop(v, rc);
		v = older; /* drop the reference this version held on the older one */
	}
}

void ovs_version_unref(ovs_version *v)
{
	version_free(v, NULL, NULL);
}

void ovs_version_release(ovs_store *st, ovs_column *c, ovs_version *v)
{
	version_free(v, &st->recycle, c);
}

void ovs_version_recycle_fini(ovs_store *st)
{
	while (st->recycle.versions.n) { /* cached versions were still counted live */
		free(ovs_recycle_get(&st->recycle.versions, 0));
		ovs_count_version(-1);
	}
	ovs_recycle_fini(&st->recycle);
}

/* The first row a delta changes (rows are sorted when this is asked). */
static uint32_t delta_first_row(const ovs_delta *d)
{
	return d->kind == OVS_DELTA_FULL ? 0 : d->rows[0];
}

static int cmp_delta_first(const void *a, const void *b)
{
	uint32_t x = delta_first_row(*(ovs_delta *const *)a), y = delta_first_row(*(ovs_delta *const *)b);
	return x < y ? -1 : (x > y);
}

/* Whether every delta's rows are sorted and, ordered by their first rows, the deltas do not
 * overlap: then their rows, concatenated in that order (ord[0, nd)), are sorted and unique. */
static bool deltas_disjoint_sorted(ovs_delta *ds, ovs_delta **ord, size_t nd)
{
	size_t i = 0;
	for (ovs_delta *d = ds; d; d = d->next) {
		if (!d->nrows)
			continue;
		if (d->kind != OVS_DELTA_FULL && !d->sorted)
			return false;
		ord[i++] = d;
	}
	qsort(ord, i, sizeof *ord, cmp_delta_first);
	for (size_t j = 1; j < i; j++) {
		const ovs_delta *a = ord[j - 1];
		uint32_t last = a->kind == OVS_DELTA_FULL ? a->nrows - 1 : a->rows[a->nrows - 1];
		if (last >= delta_first_row(ord[j]))
			return false;
	}
	for (; i < nd; i++)
		ord[i] = NULL;
	return true;
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

/* A sorted, unique row list that is one run becomes the run (its storage is not kept). */
static void chset_runs(ovs_chset *cs)
{
	if (cs->n && cs->list[cs->n - 1] - cs->list[0] == cs->n - 1) {
		cs->run = true;
		cs->row0 = cs->list[0];
		cs->list = NULL;
	}
}

/* The one delta's sorted rows become the set's: malloc'd storage or a query's row map moves from
 * the delta to the set, which outlives it (the delta keeps using the rows while its version is
 * retained); rows in a buffer of the pool stay the delta's, and the set is `pooled` (lastchange.h:
 * it gets a copy before the version leaves retention, and the buffer goes back to the pool on
 * time for the writes that take it). */
static void chset_borrow(ovs_chset *cs, ovs_delta *d)
{
	cs->n = d->nrows;
	cs->list = d->rows;
	if (d->contig) {
		chset_runs(cs);
		return; /* a run: the delta keeps its storage */
	}
	if (!d->rows_map && d->rows_buf) {
		cs->pooled = true;
		return;
	}
	cs->map = d->rows_map;
	cs->own = d->rows_map ? NULL : d->rows;
	cs->bytes = (size_t)d->nrows * sizeof *d->rows;
	d->rows_lent = true;
}

/* Whether every delta's rows are sorted (a FULL delta's are 0..n-1). */
static bool deltas_sorted(const ovs_delta *ds)
{
	for (const ovs_delta *d = ds; d; d = d->next)
		if (d->nrows && d->kind != OVS_DELTA_FULL && !d->sorted)
			return false;
	return true;
}

/* Appends a delta's rows to chg at k; returns the new k. */
static size_t append_rows(uint32_t *chg, size_t k, const ovs_delta *d)
{
	if (d->kind == OVS_DELTA_FULL)
		for (uint32_t r = 0; r < d->nrows; r++)
			chg[k++] = r;
	else
		memcpy(chg + k, d->rows, (size_t)d->nrows * sizeof *chg), k += d->nrows;
	return k;
}

/* Disjoint deltas in first-row order (ord, NULL-terminated when shorter than nd) that are blocks
 * (FULL, or SPARSE one block each), each starting where the one before ends, change one run of
 * rows: cs becomes that run with no list. Four producers writing their own quarters of a column
 * are such blocks; concatenating their rows was 75 % of a 262,144-prim seal (a 1 MiB list per
 * column, copied from the deltas and then found to be one run). */
static bool blocks_one_run(ovs_delta *const *ord, size_t nd, ovs_chset *cs)
{
	uint64_t row0 = 0, end = 0;
	for (size_t i = 0; i < nd && ord[i]; i++) {
		const ovs_delta *d = ord[i];
		if (d->kind != OVS_DELTA_FULL && !d->contig)
			return false;
		uint64_t first = delta_first_row(d);
		if (i == 0)
			row0 = end = first;
		else if (first != end)
			return false;
		end = first + d->nrows;
	}
	if (end == row0 || end - row0 > UINT32_MAX)
		return false;
	cs->run = true;
	cs->row0 = (uint32_t)row0;
	cs->n = (uint32_t)(end - row0);
	return true;
}

/* The rows of several deltas (nd of them, n rows in all), sorted and unique, in storage of the
 * set's own. Sorted, disjoint deltas (producers each writing their own block of the column) are
 * concatenated in order; sorted, interleaved ones merged; anything else is radix-sorted. */
static bool chset_merge(ovs_chset *cs, ovs_delta *ds, size_t nd, size_t n)
{
	ovs_delta **ord = malloc(nd * sizeof *ord);
	if (!ord)
		return false;
	bool disjoint = deltas_disjoint_sorted(ds, ord, nd);
	if (disjoint && blocks_one_run(ord, nd, cs)) {
		free(ord);
		return true;
	}
	uint32_t *chg = malloc(n * sizeof *chg);
	if (!chg) {
		free(ord);
		return false;
	}
	size_t k = 0, u = SIZE_MAX;
	size_t words = ((size_t)cs->rows + 63) / 64;
	uint64_t *dense = NULL;
	if (disjoint) {
		for (size_t i = 0; i < nd && ord[i]; i++)
			k = append_rows(chg, k, ord[i]);
		u = k; /* disjoint and each strictly increasing: nothing to drop (the dedup pass cost 1-2 ns
		        * a row: 0.5 ms of a 4-producer 262,144-prim seal) */
	} else if (words <= n && (dense = calloc(words, sizeof *dense))) {
		/* Rows covering much of the column (producers whose prims got rows in the order of their
		 * first writes, which raced, so their sorted lists interleave): a bitmap of the column's
		 * rows sorts and dedups them in O(n + rows / 64). Merging four producers' 262,144 rows
		 * run by run took 3.4-7.4 ms per column here (a mispredicted branch per row), the bitmap
		 * ~0.5 ms. */
		for (ovs_delta *d = ds; d; d = d->next)
			k = append_rows(chg, k, d);
		u = ovs_rows_unique_dense(chg, k, cs->rows, dense);
		free(dense);
		if (u == SIZE_MAX) /* a row beyond the version's count: not expected; sorted below */
			ovs_rows_sort(chg, NULL, k);
	} else if (deltas_sorted(ds)) {
		/* Sorted but interleaved, sparse in the column: merged run by run (ceil(log2 nd) passes). */
		size_t *b = malloc((nd + 1) * sizeof *b), nb = 0;
		uint32_t *tmp = malloc(n * sizeof *tmp);
		for (ovs_delta *d = ds; d; d = d->next)
			if (d->nrows) {
				k = append_rows(chg, k, d);
				if (b)
					b[++nb] = k;
			}
		if (b && tmp) {
			b[0] = 0;
			ovs_rows_merge_runs(chg, tmp, b, nb);
		} else {
			ovs_rows_sort(chg, NULL, k); /* out of memory for the merge: in place, slower */
		}
		free(tmp);
		free(b);
	} else {
		for (ovs_delta *d = ds; d; d = d->next)
			k = append_rows(chg, k, d);
		uint32_t *tmp = malloc(k * sizeof *tmp); /* the sort's scratch */
		ovs_rows_sort(chg, tmp, k);
		free(tmp);
	}
	free(ord);
	if (u == SIZE_MAX) { /* sorted with duplicates adjacent: drop them */
		u = 0;
		for (size_t i = 0; i < k; i++)
			if (u == 0 || chg[u - 1] != chg[i])
				chg[u++] = chg[i];
	}
	cs->list = cs->own = chg;
	cs->n = (uint32_t)u;
	chset_runs(cs);
	if (cs->run) {
		free(chg);
		cs->own = NULL;
	}
	cs->bytes = cs->own ? u * sizeof *chg : 0;
	return true;
}

/* The rows changed at this ordinal for range reads (v->cs, lastchange.h): every row when a full
 * write covered every row, else one run or a sorted, unique list. One delta whose rows are already
 * sorted lends its storage. Chained onto the previous version's set. */
static bool build_changed(ovs_store *st, ovs_version *v, const ovs_version *prev, ovs_delta *ds,
			  const ovs_delta *last_full)
{
	ovs_chset *cs = ovs_recycle_get(&st->recycle.chsets, sizeof *cs);
	if (!cs)
		return false;
	memset(cs, 0, sizeof *cs);
	atomic_init(&cs->refs, 1);
	cs->rows = v->rows;
	cs->ordinal = v->ordinal;
	size_t n = 0, ndeltas = 0;
	ovs_delta *only = NULL;
	for (ovs_delta *d = ds; d; d = d->next) {
		n += d->nrows;
		ndeltas++;
		only = d;
	}
	if (last_full && last_full->nrows == v->rows)
		cs->all_changed = v->all_changed = true;
	else if (n && ndeltas == 1 && only->kind != OVS_DELTA_FULL && only->sorted)
		chset_borrow(cs, only);
	else if (n && !chset_merge(cs, ds, ndeltas, n)) {
		ovs_recycle_put(&st->recycle.chsets, cs);
		return false;
	}
	if (cs->run && cs->row0 == 0 && cs->n == v->rows) /* blocks that rewrote every row: as a full write */
		cs->all_changed = v->all_changed = true;
	cs->counter = &st->history_bytes;
	if (cs->bytes) /* its row list (a run or every row lists none: no locked add on the store's line) */
		/* relaxed: a statistic */
		atomic_fetch_add_explicit(cs->counter, (int64_t)cs->bytes, memory_order_relaxed);
	if (prev) {
		ovs_chset_ref(prev->cs);
		/* relaxed: published to readers with the version, by the snapshot's release store */
		atomic_store_explicit(&cs->older, prev->cs, memory_order_relaxed);
	}
	v->cs = cs;
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

/* The row table of an array column's version: the previous version's blob pointers (a reference
 * each, no row data), then the deltas' rows swapped in (tombstones clear them). Host metadata for a
 * device column too: its rows' bytes stay in the buffers of the writes that made them. */
static bool build_arrays(ovs_version *v, const ovs_version *prev, const ovs_delta *ds, char *err, size_t errlen)
{
	v->blobs = calloc(v->rows ? v->rows : 1, sizeof *v->blobs);
	if (!v->blobs) {
		ovs_err_format(err, errlen, "out of memory sealing an array column");
		return false;
	}
	if (prev)
		for (uint32_t r = 0; r < prev->rows; r++) {
			v->blobs[r] = prev->blobs[r];
			ovs_blob_ref(v->blobs[r]);
		}
	for (const ovs_delta *d = ds; d; d = d->next)
		for (uint32_t i = 0; i < d->nrows; i++) {
			uint32_t r = d->rows[i];
			ovs_blob_unref(v->blobs[r]);
			v->blobs[r] = NULL;
			if (d->kind == OVS_DELTA_SPARSE) {
				v->blobs[r] = d->blobs[i];
				ovs_blob_ref(v->blobs[r]);
			}
		}
	return true;
}

/* The payload of the version (chunks, or an array column's row table), built where the column lives:
 * on a CUDA device on the stage's engine stream, with v->ready_due set: the seal records one event
 * per device after all its columns' work and gives it to each of its versions before they are
 * published (ovs_version_ready_assign; an array column's seal issues no device work, but its rows'
 * uploads were issued on that stream, so its readers get an event like every device group). Failure
 * leaves v to be freed by the caller. */
static bool build_payload(ovs_store *st, ovs_exec *x, ovs_exec_last *devx, ovs_column *c, ovs_version *v,
			  ovs_version *prev, ovs_delta *ds, char *err, size_t errlen)
{
	bool arr = c->schema.is_array;
	if (c->schema.device.device_type != kDLCUDA)
		return arr ? build_arrays(v, prev, ds, err, errlen) : ovs_chunks_build(st, x, c, v, prev, ds, err, errlen);
	ovs_exec dx;
	if (!ovs_store_exec_reuse(st, devx, c->schema.device, x->w, &dx, err, errlen))
		return false;
	if (!(arr ? build_arrays(v, prev, ds, err, errlen) : ovs_chunks_build(st, &dx, c, v, prev, ds, err, errlen)))
		return false;
	if (dx.err) {
		ovs_err_format(err, errlen, "sealing on CUDA device %d failed (%s)", (int)c->schema.device.device_id,
			       ovs_gpu_error_name(dx.err));
		ovs_version_chunks_free(v);
		return false;
	}
	v->ready_due = true;
	return true;
}

ovs_version *ovs_version_build(ovs_store *st, ovs_exec *x, ovs_exec_last *devx, ovs_column *c, ovs_version *prev,
			       ovs_delta *ds, char *err, size_t errlen)
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
	bool cached = st->recycle.versions.n > 0; /* a cached struct is still counted live */
	ovs_version *v = ovs_recycle_get(&st->recycle.versions, sizeof *v);
	if (!v) {
		ovs_err_format(err, errlen, "out of memory sealing column");
		return NULL;
	}
	memset(v, 0, sizeof *v);
	atomic_init(&v->refs, 1);
	if (!cached)
		ovs_count_version(1);
	v->rows = rows;
	v->ordinal = ds->ordinal;
	v->base_ordinal = prev ? prev->ordinal : 0;
	if (!build_presence(v, prev, ds, last_full, has_tomb) || !build_changed(st, v, prev, ds, last_full)) {
		ovs_version_unref(v);
		ovs_err_format(err, errlen, "out of memory recording presence and changed rows");
		return NULL;
	}
	if (!build_payload(st, x, devx, c, v, prev, ds, err, errlen)) {
		ovs_version_unref(v);
		return NULL;
	}
	if (!c->schema.is_array && prev && !prev->blobs && !same_runs(v, prev)) {
		c->run_changes++; /* reads split differently: a layout change for consumers */
	}
	v->generation = atomic_load_explicit(&c->generation, memory_order_relaxed) + c->run_changes;
	v->deltas = ds;
	return v;
}

/* One event per device for every version a seal built there: recorded after all of their work (the
 * columns are built one after another on the device's engine stream), so one event covers them all.
 * If it cannot be recorded, the stream is drained instead and the versions are ready as they are. */
void ovs_version_ready_assign(ovs_store *st, ovs_exec *x, ovs_exec_last *devx, ovs_column **cols, size_t ncols)
{
	void *ev[OVS_STORE_GPUS] = { 0 };
	bool done[OVS_STORE_GPUS] = { false };
	for (size_t i = 0; i < ncols; i++) {
		ovs_column *c = cols[i];
		/* the newest versions first: the ones this seal built are at the head of the chain (relaxed:
		 * the chain is the sealer's own) */
		for (ovs_version *v = c->latest; v && v->ready_due; v = atomic_load_explicit(&v->older, memory_order_relaxed)) {
			/* Read only for a version built here: its deltas were pushed after the schema was
			 * installed (the seal's take acquires that). A column of the scope with nothing to
			 * seal may be getting its schema from a concurrent first write right now (ThreadSanitizer
			 * found the read of it, test_new_columns_created_concurrently). */
			DLDevice dev = c->schema.device;
			int d = (int)dev.device_id; /* a device column: build_payload's exec accepted the ordinal */
			if (!done[d]) {
				done[d] = true;
				char err[160];
				ovs_exec dx;
				if (ovs_store_exec_reuse(st, devx, dev, x->w, &dx, err, sizeof err) &&
				    !(ev[d] = ovs_gpu_record(&dx)))
					ovs_gpu_sync(&dx);
			}
			v->ready = ev[d] ? ovs_gpu_event_ref(ev[d]) : NULL; /* published with the version */
			v->ready_due = false;
		}
	}
	for (int d = 0; d < OVS_STORE_GPUS; d++)
		ovs_gpu_event_release(ev[d]); /* the versions hold theirs */
}
