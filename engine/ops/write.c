/*
 * write.c — write_attribute(s): everything provable is validated at the call (entries, layouts,
 * schemas, prim mode, ordinal admission); the op then maps prims to rows and hands each column a
 * delta keyed (ordinal, op id). Writes at different ordinals never wait for each other; writes at
 * one ordinal take effect in submission order because sealing applies deltas in op-id order.
 *
 * Cost: a write that covers every row of a column in row order is FULL: its payload is copied into
 * a fresh pre-faulted buffer in parallel (or, from a managed tensor, adopted without a copy). Any
 * other write is SPARSE: it copies just the rows it touches.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "copy.h"
#include "errors.h"
#include "layout.h"
#include "ops.h"
#include "jobs_forkjoin.h"
#include "query.h"
#include "sequencer.h"

/* Writes that copy at most this many bytes in total run on the calling thread when nothing they
 * depend on is pending (see ovs_op_desc.run_inline): handing them to a worker and waking it costs
 * more than the copy. Larger ones go to the pool, so the caller is not held up by big copies. */
#define WRITE_INLINE_MAX_BYTES ((size_t)1 << 20)

typedef struct write_entry {
	ovs_column *col;                     /* target column (exists from submission on) */
	ovstage_write_data_t data;           /* the caller's descriptor (managed array replaced by ours) */
	DLManagedTensorVersioned **managed;  /* tensors we own (deleter pending), or NULL */
	uint32_t nmanaged;                   /* entries in managed */
	ovstage_attribute_semantic_t semantic; /* effective semantic (NONE inherits the column's) */
	bool created_rows;                   /* the op gave prims rows in the column (a failure after it
	                                      * leaves rows of prims that do not exist) */
	ovs_layout layout;                   /* validated layout (borrows data / managed); last: op_alloc
	                                      * zeroes the fields before it only */
} write_entry;

typedef struct write_op {
	ovs_stage *st;               /* stage */
	ovs_query *q;                /* target prims (reference held) */
	ovstage_ordinal_t ordinal;   /* ordinal of every entry */
	ovstage_prim_mode_t mode;    /* UPSERT / INSERT */
	size_t n;                    /* entries */
	size_t cap;                  /* entries the block has room for */
	write_entry *e;              /* entries (in the same block, after the op) */
	ovs_inflight *inflight;      /* marks the op done for floor advances */
	bool deferred;               /* the query was not resolved at the call: validate layouts in the op */
} write_op;

/* Op blocks (the op and its entries, ~800 bytes per entry) are recycled through a one-block cache
 * per thread: a producer that writes ordinal after ordinal, whose small writes run on its own
 * thread, allocates nothing here in the steady state. Thread-private: no synchronisation. The
 * cached block is freed when its thread exits (the key's destructor). */
#define OP_CACHE_MAX_ENTRIES 64
static pthread_key_t op_cache_key;
static pthread_once_t op_cache_once = PTHREAD_ONCE_INIT;
static bool op_cache_ok;

static void op_cache_init(void)
{
	op_cache_ok = pthread_key_create(&op_cache_key, free) == 0;
}

/* A zeroed op with room for n entries (the entries' layouts are not zeroed: they are filled by
 * ovs_layout_from_write before use), or NULL. */
static write_op *op_alloc(size_t n)
{
	size_t need = n ? n : 1;
	pthread_once(&op_cache_once, op_cache_init);
	write_op *op = op_cache_ok ? pthread_getspecific(op_cache_key) : NULL;
	if (op && op->cap >= need) {
		pthread_setspecific(op_cache_key, NULL);
	} else {
		op = malloc(sizeof *op + need * sizeof(write_entry));
		if (!op)
			return NULL;
		op->cap = need;
	}
	size_t cap = op->cap;
	memset(op, 0, sizeof *op);
	op->cap = cap;
	op->e = (write_entry *)(void *)(op + 1);
	for (size_t i = 0; i < need; i++)
		memset(&op->e[i], 0, offsetof(write_entry, layout));
	return op;
}

static void op_release(write_op *op)
{
	if (!op)
		return;
	if (op_cache_ok && op->cap <= OP_CACHE_MAX_ENTRIES) {
		write_op *old = pthread_getspecific(op_cache_key);
		if (!old || old->cap < op->cap) {
			if (pthread_setspecific(op_cache_key, op) == 0) {
				free(old);
				return;
			}
		}
	}
	free(op);
}

static void release_managed(write_entry *e)
{
	for (uint32_t i = 0; i < e->nmanaged; i++)
		if (e->managed[i] && e->managed[i]->deleter)
			e->managed[i]->deleter(e->managed[i]);
	free(e->managed);
	e->managed = NULL;
	e->nmanaged = 0;
}

static void write_op_free(void *arg, bool ran)
{
	(void)ran;
	write_op *op = arg;
	for (size_t i = 0; i < op->n; i++)
		release_managed(&op->e[i]); /* exactly once: adopted tensors were taken out of the list */
	ovs_query_put(op->q);
	if (op->inflight)
		ovs_inflight_done(op->st, op->inflight);
	op_release(op);
}

/* Checks the entry against the column's schema, if it has one (installing waits for publish). */
static ovstage_api_status_t check_schema(ovs_stage *st, const write_entry *e, char *err, size_t errlen)
{
	ovs_column *c = e->col;
	/* acquire: pairs with settle_schema's release; the schema fields are then stable. */
	if (!atomic_load_explicit(&c->has_schema, memory_order_acquire))
		return OVSTAGE_OK;
	ovstage_attribute_semantic_t sem = e->semantic == OVSTAGE_SEMANTIC_NONE ? c->schema.semantic : e->semantic;
	return ovs_layout_check_schema(&e->layout, sem, c->schema.is_array, c->schema.dtype, c->schema.semantic,
				       ovs_attr_name(st, c->name), err, errlen);
}

/* Installs the column's schema on first use, or checks the entry against it. */
static ovstage_api_status_t settle_schema(ovs_stage *st, write_entry *e, char *err, size_t errlen)
{
	const ovs_layout *l = &e->layout;
	if (ovs_column_install_schema(e->col, l->is_array, l->dtype, e->semantic, l->elem_bytes))
		return OVSTAGE_OK;
	return check_schema(st, e, err, errlen);
}

/* Bits set in mask[0 .. n) (the selected elements). The build targets baseline x86-64, where
 * __builtin_popcountll is a library call per word; a clone for CPUs with POPCNT is picked at load
 * time. Zero words (a block's unselected part) cost a test each. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
/* (not under ThreadSanitizer: the clone's resolver runs at relocation, before TSan's runtime) */
__attribute__((target_clones("popcnt", "default")))
#endif
static uint32_t mask_count_words(const uint64_t *mask, uint32_t n, uint32_t w0, uint32_t w1)
{
	uint32_t c = 0, full = n / 64 < w1 ? n / 64 : w1, wd = w0;
	for (; wd + 4 <= full; wd += 4) /* unrolled, branch-free: a popcnt per word */
		c += (uint32_t)(__builtin_popcountll(mask[wd]) + __builtin_popcountll(mask[wd + 1]) +
				__builtin_popcountll(mask[wd + 2]) + __builtin_popcountll(mask[wd + 3]));
	for (; wd < full; wd++)
		c += (uint32_t)__builtin_popcountll(mask[wd]);
	if (n % 64 && n / 64 >= w0 && n / 64 < w1)
		c += (uint32_t)__builtin_popcountll(mask[n / 64] & (((uint64_t)1 << (n % 64)) - 1));
	return c;
}

static uint32_t mask_count(const uint64_t *mask, uint32_t n)
{
	return mask_count_words(mask, n, 0, (n + 63) / 64);
}

/* The next run [*i, *end) of selected elements at or after *i (mask NULL: everything up to n);
 * false when there is none. Whole words at a time: zero words are skipped, full words extend. */
static bool next_run(const uint64_t *mask, uint32_t n, uint32_t *i, uint32_t *end)
{
	uint32_t a = *i, nw = (n + 63) / 64;
	if (!mask) {
		*end = n;
		return a < n;
	}
	if (a >= n)
		return false;
	/* the first set bit at or after a: the rest of a's word, then whole zero words in a tight loop */
	uint32_t wd = a / 64;
	uint64_t w = mask[wd] >> (a % 64);
	if (!w) {
		wd++;
		while (wd < nw && !mask[wd])
			wd++;
		if (wd >= nw)
			return false;
		w = mask[wd];
		a = wd * 64;
	}
	a += (uint32_t)__builtin_ctzll(w);
	if (a >= n)
		return false;
	/* the first clear bit after it: likewise over whole full words */
	uint32_t b = a;
	wd = b / 64;
	w = ~mask[wd] >> (b % 64);
	if (!w) {
		wd++;
		while (wd < nw && mask[wd] == ~(uint64_t)0)
			wd++;
		b = wd * 64;
		if (wd < nw)
			b += (uint32_t)__builtin_ctzll(~mask[wd]);
	} else {
		b += (uint32_t)__builtin_ctzll(w);
	}
	*i = a;
	*end = b < n ? b : n;
	return true;
}

/* Copies one row of rb bytes (the common sizes without a library call). */
static inline void copy_row(unsigned char *dst, const unsigned char *src, size_t rb)
{
	switch (rb) {
	case 4: memcpy(dst, src, 4); break;
	case 8: memcpy(dst, src, 8); break;
	case 12: memcpy(dst, src, 12); break;
	case 16: memcpy(dst, src, 16); break;
	default: memcpy(dst, src, rb); break;
	}
}

/* What a gather of a masked contiguous payload reads and writes (shared by its parallel parts). */
typedef struct gather_ctx {
	const uint64_t *mask;      /* the write's mask */
	uint32_t n;                /* logical elements */
	const uint32_t *map;       /* element -> row, or NULL for the identity */
	const uint32_t *prefix;    /* selected elements before each GATHER_GRAIN-word block, or NULL */
	const unsigned char *src;  /* the payload (element i at src + i * rb) */
	size_t rb;                 /* row bytes */
	uint32_t *rows;            /* out: rows of the selected elements, in element order */
	unsigned char *values;     /* out: their bytes */
} gather_ctx;

/* Mask words [w0, w1), whose first selected element is output k. Full words go as blocks, zero words
 * cost a test; the source lines of words a few ahead are prefetched (a scattered mask misses the
 * cache on every selected element otherwise). */
static void gather_words(const gather_ctx *cx, uint32_t w0, uint32_t w1, uint32_t k)
{
	enum { AHEAD = 8 };
	const uint32_t last = (cx->n - 1) / 64;
	const size_t rb = cx->rb;
	for (uint32_t wd = w0; wd < w1; wd++) {
		/* the unselected part of a block mask: eight zero words per test */
		while (wd + 8 <= w1 && !(cx->mask[wd] | cx->mask[wd + 1] | cx->mask[wd + 2] | cx->mask[wd + 3] |
					 cx->mask[wd + 4] | cx->mask[wd + 5] | cx->mask[wd + 6] | cx->mask[wd + 7]))
			wd += 8;
		if (wd >= w1)
			break;
		if (wd + AHEAD < w1) {
			uint64_t f = cx->mask[wd + AHEAD];
			if (f != ~(uint64_t)0)
				for (; f; f &= f - 1)
					__builtin_prefetch(cx->src + ((size_t)(wd + AHEAD) * 64 + (size_t)__builtin_ctzll(f)) * rb);
		}
		uint64_t bits = cx->mask[wd];
		if (!bits)
			continue;
		uint32_t i0 = wd * 64;
		if (wd == last && cx->n % 64)
			bits &= ((uint64_t)1 << (cx->n % 64)) - 1;
		if (bits == ~(uint64_t)0) {
			for (uint32_t b = 0; b < 64; b++)
				cx->rows[k + b] = cx->map ? cx->map[i0 + b] : i0 + b;
			memcpy(cx->values + (size_t)k * rb, cx->src + (size_t)i0 * rb, 64 * rb);
			k += 64;
			continue;
		}
		for (; bits; bits &= bits - 1) {
			uint32_t i = i0 + (uint32_t)__builtin_ctzll(bits);
			cx->rows[k] = cx->map ? cx->map[i] : i;
			copy_row(cx->values + (size_t)k * rb, cx->src + (size_t)i * rb, rb);
			k++;
		}
	}
}

/* A part of a parallel gather (fork-join frame payload). */
typedef struct gather_args {
	const gather_ctx *cx;  /* shared description */
	uint32_t w0, w1;       /* mask words of this part */
	uint32_t k;            /* its first output */
} gather_args;
JOBS_PAYLOAD_FITS(gather_args);

/* Halves the word range down to GATHER_GRAIN words; the second half starts at output k + (bits set
 * in the first half). The parts write disjoint outputs; the join orders them before the delta is
 * pushed. */
enum { GATHER_GRAIN = 1u << 12 };
static void gather_frame(jobs_worker *w, void *p)
{
	gather_args *a = p;
	if (a->w1 - a->w0 > GATHER_GRAIN) {
		/* split at a block boundary: its first output is known from the prefix counts */
		uint32_t mid = (a->w0 / GATHER_GRAIN + (a->w1 - a->w0) / GATHER_GRAIN / 2) * GATHER_GRAIN;
		if (mid <= a->w0)
			mid = a->w0 + GATHER_GRAIN;
		gather_args *child = jobs_spawn_args(w);
		child->cx = a->cx;
		child->w0 = mid;
		child->w1 = a->w1;
		child->k = a->cx->prefix[mid / GATHER_GRAIN];
		jobs_spawn(w, gather_frame);
		a->w1 = mid;
		gather_frame(w, a);
		gather_args done;
		jobs_sync(w, &done, sizeof done);
		return;
	}
	gather_words(a->cx, a->w0, a->w1, a->k);
}

/* The selected elements of a contiguous payload (element i = source row i): rows[k] = their rows
 * (map, or the identity when map is NULL), values[k] = their bytes; nsel of them. Split across the
 * workers when there are many (each selected element of a sparse mask is a cache miss). */
static void gather_masked(jobs_worker *w, gather_ctx *cx)
{
	gather_args a = { cx, 0, (cx->n + 63) / 64, 0 };
	if (w && cx->prefix)
		gather_frame(w, &a);
	else
		gather_words(cx, a.w0, a.w1, 0);
}

/* Counts the selected elements of a mask; for a mask of several GATHER_GRAIN-word blocks, also
 * the prefix counts a parallel gather splits by (*prefix, malloc'd; NULL if not worth it or out of
 * memory) — in the same pass. */
static uint32_t mask_count_prefix(const uint64_t *mask, uint32_t n, uint32_t **prefix)
{
	uint32_t nw = (n + 63) / 64, nb = (nw + GATHER_GRAIN - 1) / GATHER_GRAIN;
	*prefix = nb > 1 ? malloc((nb + 1) * sizeof **prefix) : NULL;
	if (!*prefix)
		return mask_count(mask, n);
	uint32_t *p = *prefix;
	p[0] = 0;
	for (uint32_t b = 0; b < nb; b++)
		p[b + 1] = p[b] + mask_count_words(mask, n, b * GATHER_GRAIN,
						   (b + 1) * GATHER_GRAIN < nw ? (b + 1) * GATHER_GRAIN : nw);
	uint32_t total = p[nb];
	if (total < 4 * GATHER_GRAIN) { /* few selected: one thread gathers them */
		free(p);
		*prefix = NULL;
	}
	return total;
}

/* Releases a row list that no delta took (a borrowed one belongs to the query's row map). */
static void release_rows(uint32_t *rows, ovs_buffer *buf, bool borrowed)
{
	if (!borrowed)
		ovs_delta_array_free(rows, buf);
}

/* Makes a checked entry visible, in one place so that an entry failing before it leaves no trace:
 * the column's schema (installed here, not when it was checked; a concurrent write may have
 * installed another, which refuses this one), the existence of the selected prims, the query's new
 * row map, the column's "written" mark, and the delta d (NULL for an empty write). */
static ovstage_api_status_t publish_entry(write_op *op, write_entry *e, ovs_delta *d, bool set_prims,
					  ovs_rowmap *new_map, char *err, size_t errlen)
{
	ovs_stage *st = op->st;
	ovstage_api_status_t s = settle_schema(st, e, err, errlen);
	if (s != OVSTAGE_OK) {
		free(new_map);
		if (d)
			ovs_delta_free(d);
		return s;
	}
	const ovs_layout *l = &e->layout;
	for (uint32_t i = 0; set_prims && d && i < l->count; i++)
		if (ovs_layout_selected(l, i))
			ovs_prim_set(&st->store, op->q->paths[i], 1);
	if (new_map)
		ovs_query_rowmap_install(op->q, new_map);
	ovs_sequencer_applied(e->col, op->ordinal);
	if (d)
		ovs_column_push_delta(&st->store, e->col, d);
	return OVSTAGE_OK;
}

/* Applies one entry: rows, then a FULL or SPARSE delta for the column. */
static ovstage_api_status_t apply_entry(jobs_worker *w, write_op *op, write_entry *e, uint64_t seq, char *err,
					size_t errlen)
{
	ovs_stage *st = op->st;
	ovs_column *c = e->col;
	if (op->deferred) {
		/* The query resolved after the call: the layout rules that depend on its prim count are
		 * checked now (the query's paths and count were published by its op, which we ran after). */
		char lerr[400];
		ovstage_api_status_t ls = ovs_layout_from_write(&e->data, (uint32_t)op->q->count, &e->layout, lerr,
							       sizeof lerr);
		if (ls != OVSTAGE_OK) {
			ovs_err_format(err, errlen, "\"%s\": %s", ovs_attr_name(st, c->name), lerr);
			return ls;
		}
		e->semantic = e->data.semantic;
		ls = ovs_layout_check_reserved(e->layout.is_array, e->layout.dtype, e->semantic,
					       ovs_attr_name(st, c->name), lerr, sizeof lerr);
		if (ls != OVSTAGE_OK) {
			ovs_err_format(err, errlen, "%s", lerr);
			return ls;
		}
	}
	/* Every check that can refuse the entry runs before anything changes (the schema is installed
	 * by publish_entry, after the delta exists): a refused entry leaves no trace. */
	ovstage_api_status_t s = check_schema(st, e, err, errlen);
	if (s != OVSTAGE_OK)
		return s;
	const ovs_layout *l = &e->layout;
	if (l->kind == OVS_LAYOUT_EMPTY)
		return publish_entry(op, e, NULL, false, NULL, err, errlen);
	if (!l->host_accessible) {
		ovs_err_format(err, errlen, "attribute \"%s\": device-resident (CUDA) tensors need the GPU backend, "
			       "which is not built in", ovs_attr_name(st, c->name));
		return OVSTAGE_ERROR_NOT_SUPPORTED;
	}
	/* acquire: sealed floor (a seal of this ordinal cannot have been accepted after us; re-check). */
	uint64_t floor = atomic_load_explicit(&c->floor, memory_order_acquire);
	if (op->ordinal <= floor) {
		ovs_err_format(err, errlen, "ordinal %llu is not above the write floor %llu of \"%s\"",
			       (unsigned long long)op->ordinal, (unsigned long long)floor, ovs_attr_name(st, c->name));
		return OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION;
	}
	uint32_t n = l->count;
	const ovx_primpath_t *paths = op->q->paths;
	if (op->mode == OVSTAGE_PRIM_MODE_INSERT) {
		for (uint32_t i = 0; i < n; i++)
			if (ovs_layout_selected(l, i) && ovs_prim_exists(&st->store, paths[i])) {
				ovs_err_format(err, errlen, "INSERT: prim %s (query element %u) already exists",
					       ovs_pd_path_string(st->pd, paths[i]).ptr, i);
				return OVSTAGE_ERROR_PRIM_NOT_FOUND;
			}
	}
	/* Map the selected elements to rows (creating rows for new prims). A query that has written
	 * this column before has its rows cached: no per-prim lookups then. */
	uint32_t k = 0;
	bool identity = !l->mask && n == op->q->count;
	const ovs_rowmap *map = ovs_query_rowmap(op->q, c);
	/* The row list is needed unless the write covers every row in row order (FULL below, the
	 * common steady state of a cached identity map): then it is not even allocated. */
	bool full_rows = map && identity && map->identity && !l->is_array &&
			 n == atomic_load_explicit(&c->nrows, memory_order_acquire);
	/* Sized by the selected elements: a 1 % mask over 16 M prims needs 160 K entries, not 16 M
	 * (a list the size of the query would be fresh memory, faulted in on every write). */
	uint32_t *prefix = NULL; /* per-block counts of a large mask (parallel gather), freed below */
	uint32_t nsel = l->mask ? mask_count_prefix(l->mask, n, &prefix) : n;
	ovs_buffer *rows_buf = NULL, *pre_values_buf = NULL;
	unsigned char *pre_values = NULL; /* values gathered with the rows (masked contiguous payload) */
	bool identity_rows = false;       /* rows are the selected elements' own indices (ascending) */
	const ovs_rowmap *rows_shape = NULL; /* rows are this map's rows (its shape is known) */
	/* A write of the whole query without a mask borrows the query's row map as its row list (a
	 * reference on the map; the map never changes once installed): no copy of it per write. */
	bool borrowed = map && !full_rows && !l->mask && !l->is_array;
	uint32_t *rows = full_rows ? NULL
			 : borrowed ? (uint32_t *)(uintptr_t)map->rows
				    : ovs_delta_array(&st->store, (size_t)nsel * sizeof *rows, &rows_buf);
	if (!full_rows && !rows) {
		free(prefix);
		ovs_err_format(err, errlen, "out of memory mapping %u prims to rows", n);
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	/* acquire: a whole-prim delete since the prims were created means their existence must be
	 * re-asserted; without any, every prim with a row exists. */
	bool reassert = atomic_load_explicit(&st->store.prim_deletes, memory_order_acquire) != 0;
	bool set_prims = reassert || !map; /* publish_entry marks the selected prims existing */
	ovs_rowmap *new_map = NULL;        /* a complete row map publish_entry caches for the query */
	if (map) {
		identity = identity && map->identity;
		if (full_rows) {
			k = n; /* rows 0..n-1 are every row: the FULL delta below needs no row list */
		} else if (!l->mask) {
			if (!borrowed)
				memcpy(rows, map->rows, (size_t)n * sizeof *rows);
			k = n;
			rows_shape = map;
		} else if (!l->is_array && !l->index_map && ovs_layout_contiguous_base(l)) {
			/* A contiguous payload under a mask: rows and values in one pass over the mask. */
			pre_values = ovs_delta_array(&st->store, (size_t)nsel * l->elem_bytes, &pre_values_buf);
			if (!pre_values) {
				free(prefix);
				release_rows(rows, rows_buf, borrowed);
				ovs_err_format(err, errlen, "out of memory copying %u rows", nsel);
				return OVSTAGE_ERROR_OUT_OF_MEMORY;
			}
			gather_ctx cx = { l->mask, n, map->identity ? NULL : map->rows, prefix,
					  ovs_layout_contiguous_base(l), l->elem_bytes, rows, pre_values };
			gather_masked(w, &cx);
			k = nsel;
			identity_rows = map->identity;
		} else {
			/* runs of selected elements, a word at a time: zero words cost one test each */
			uint32_t i = 0, end;
			while (next_run(l->mask, n, &i, &end)) {
				if (map->identity)
					for (; i < end; i++)
						rows[k++] = i;
				else
					for (; i < end; i++)
						rows[k++] = map->rows[i];
			}
		}
	} else {
		for (uint32_t i = 0; i < n; i++) {
			if (!ovs_layout_selected(l, i))
				continue;
			bool created;
			uint32_t r = ovs_column_row_create(c, paths[i], &created);
			if (r == UINT32_MAX) {
				free(prefix);
				release_rows(rows, rows_buf, borrowed);
				ovs_err_format(err, errlen, "cannot map prim %llu to a row (out of memory or path id too "
					       "large)", (unsigned long long)paths[i]);
				return OVSTAGE_ERROR_OUT_OF_MEMORY;
			}
			if (r != i)
				identity = false;
			e->created_rows = e->created_rows || created;
			rows[k++] = r;
		}
		if (!l->mask && n == op->q->count && n) {
			/* every prim of the query has a row now: cache the map (when the entry succeeds) */
			new_map = ovs_rowmap_alloc(c, n);
			if (new_map)
				memcpy(new_map->rows, rows, (size_t)n * sizeof *rows);
		}
	}
	free(prefix); /* only the gather above uses it */
	size_t rb = l->elem_bytes; /* = the column's row_bytes, which publish_entry may install */
	ovs_delta *d = calloc(1, sizeof *d);
	if (!d) {
		free(new_map);
		ovs_delta_array_free(pre_values, pre_values_buf);
		release_rows(rows, rows_buf, borrowed);
		ovs_err_format(err, errlen, "out of memory creating a delta");
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	if (l->is_array) {
		/* Array rows: one blob per written row (ragged), shared by later versions by reference. */
		d->kind = OVS_DELTA_SPARSE;
		d->ordinal = op->ordinal;
		d->seq = seq;
		d->rows = rows;
		d->rows_buf = rows_buf;
		d->blobs = calloc(k ? k : 1, sizeof *d->blobs);
		if (!d->blobs) {
			ovs_delta_free(d);
			ovs_err_format(err, errlen, "out of memory copying %u array rows", k);
			free(new_map);
			return OVSTAGE_ERROR_OUT_OF_MEMORY;
		}
		d->nrows = k;
		uint32_t j = 0;
		for (uint32_t i = 0; i < n; i++) {
			if (!ovs_layout_selected(l, i))
				continue;
			uint32_t src = ovs_layout_source_row(l, i);
			uint64_t len = ovs_layout_array_len(l, src);
			ovs_blob *b = ovs_blob_new(len, l->elem_bytes);
			if (!b) {
				ovs_delta_free(d);
				ovs_err_format(err, errlen, "out of memory copying array row %u (%llu elements)", src,
					       (unsigned long long)len);
				free(new_map);
				return OVSTAGE_ERROR_OUT_OF_MEMORY;
			}
			if (len)
				ovs_layout_copy_array_row(l, src, b->data);
			d->blobs[j++] = b;
		}
		return publish_entry(op, e, d, set_prims, new_map, err, errlen);
	}
	d->ordinal = op->ordinal;
	d->seq = seq; /* the op id: same-ordinal deltas seal in submission order */
	const void *base = ovs_layout_contiguous_base(l);
	/* acquire: row count including rows other writes created concurrently. */
	if (identity && k == atomic_load_explicit(&c->nrows, memory_order_acquire) && k > 0) {
		d->kind = OVS_DELTA_FULL;
		d->nrows = k;
		release_rows(rows, rows_buf, borrowed);
		if (base && !l->index_map && e->nmanaged == 1) {
			/* Zero copy: the version adopts the producer's buffer; its deleter runs when the last
			 * version or read group holding it is reclaimed. */
			d->full = ovs_buffer_adopt(&st->store, e->managed[0], (void *)(uintptr_t)base, (size_t)k * rb);
			if (d->full) {
				e->managed[0] = NULL; /* ownership moved to the buffer */
			}
		}
		if (!d->full) {
			d->full = ovs_buffer_new(&st->store, (size_t)k * rb);
			if (!d->full) {
				free(d);
				ovs_err_format(err, errlen, "out of memory allocating %zu bytes", (size_t)k * rb);
				free(new_map);
				return OVSTAGE_ERROR_OUT_OF_MEMORY;
			}
			if (base && !l->index_map)
				ovs_copy(w, d->full->data, base, (size_t)k * rb);
			else
				for (uint32_t i = 0; i < k; i++)
					ovs_layout_copy_row(l, ovs_layout_source_row(l, i), (char *)d->full->data + (size_t)i * rb);
		}
	} else {
		if (!rows) {
			/* Rows were added since full_rows was decided (another query's write): the identity
			 * map still says element i is row i, so list them. */
			rows = malloc(((size_t)k ? (size_t)k : 1) * sizeof *rows);
			if (!rows) {
				free(d);
				ovs_err_format(err, errlen, "out of memory mapping %u prims to rows", k);
				free(new_map);
				return OVSTAGE_ERROR_OUT_OF_MEMORY;
			}
			for (uint32_t i = 0; i < k; i++)
				rows[i] = i;
		}
		d->kind = OVS_DELTA_SPARSE;
		d->nrows = k;
		d->rows = rows;
		d->rows_buf = rows_buf;
		if (borrowed) {
			ovs_rowmap_ref(map);
			d->rows_map = map;
		}
		if (rows_shape) {
			d->shape_known = true;
			d->sorted = rows_shape->sorted;
			d->contig = rows_shape->contig;
		}
		if (pre_values) { /* already gathered */
			d->values = pre_values;
			d->values_buf = pre_values_buf;
			if (identity_rows) {
				/* element order is row order: sorted; one block iff they span exactly k rows */
				d->shape_known = true;
				d->sorted = true;
				d->contig = k == 0 || rows[k - 1] - rows[0] == k - 1;
			}
			return publish_entry(op, e, d, set_prims, new_map, err, errlen);
		}
		d->values = ovs_delta_array(&st->store, (size_t)k * rb, &d->values_buf);
		if (!d->values) {
			ovs_delta_free(d);
			ovs_err_format(err, errlen, "out of memory copying %u rows", k);
			free(new_map);
			return OVSTAGE_ERROR_OUT_OF_MEMORY;
		}
		uint32_t j = 0;
		if (base && !l->index_map) {
			/* Contiguous source, element i = source row i: copy runs of selected rows at once (the
			 * whole payload without a mask; each run of set mask bits with one). */
			uint32_t i = 0, run;
			while (next_run(l->mask, n, &i, &run)) {
				memcpy(d->values + (size_t)j * rb, (const char *)base + (size_t)i * rb, (size_t)(run - i) * rb);
				j += run - i;
				i = run;
			}
			return publish_entry(op, e, d, set_prims, new_map, err, errlen);
		}
		/* Visit the selected elements only: with a mask, its set bits (ctz over words), so the cost
		 * follows the rows written, not the query's size. */
		for (uint32_t wd = 0; wd < (n + 63) / 64; wd++) {
			uint64_t bits = l->mask ? l->mask[wd] : ~(uint64_t)0;
			if (wd == (n - 1) / 64 && n % 64)
				bits &= ((uint64_t)1 << (n % 64)) - 1;
			while (bits) {
				uint32_t i = wd * 64 + (uint32_t)__builtin_ctzll(bits);
				bits &= bits - 1;
				uint32_t src = ovs_layout_source_row(l, i);
				if (base)
					memcpy(d->values + (size_t)j * rb, (const char *)base + (size_t)src * rb, rb);
				else
					ovs_layout_copy_row(l, src, d->values + (size_t)j * rb);
				j++;
			}
		}
	}
	return publish_entry(op, e, d, set_prims, new_map, err, errlen);
}

static void write_job(jobs_worker *w, void *arg, jobs_run *run)
{
	write_op *op = arg;
	char err[512];
	for (size_t i = 0; i < op->n; i++) {
		ovstage_api_status_t s = apply_entry(w, op, &op->e[i], jobs_run_id(run), err, sizeof err);
		if (s != OVSTAGE_OK) {
			if (op->e[i].created_rows)
				ovs_prims_need_reassert(&op->st->store); /* its rows stay, as holes (never present) */
			/* Not a transaction (as in the anchor): earlier entries stay applied. */
			ovs_op_fail(run, s, "write_attributes entry %zu: %s", i, err);
			return;
		}
	}
}

/* Takes ownership of every managed tensor of the batch (their deleters run exactly once, also on
 * rejection). */
static void adopt_all_managed(write_entry *es, const ovstage_attribute_write_t *writes, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const ovstage_write_data_t *wd = &writes[i].data;
		if (!wd->managed_tensors || !wd->tensor_count)
			continue;
		es[i].managed = calloc(wd->tensor_count, sizeof *es[i].managed);
		if (!es[i].managed)
			continue; /* reported by the caller's OOM path */
		es[i].nmanaged = wd->tensor_count;
		for (uint32_t t = 0; t < wd->tensor_count; t++)
			es[i].managed[t] = (DLManagedTensorVersioned *)(uintptr_t)wd->managed_tensors[t];
	}
}

/* Whether writes[i].data.managed_tensors[t] appeared earlier in the batch (writes before i, or
 * before t in writes[i]); *at_j, *at_u = where (either may be NULL). */
static bool managed_seen_before(const ovstage_attribute_write_t *writes, size_t i, uint32_t t, size_t *at_j,
				uint32_t *at_u)
{
	const DLManagedTensorVersioned *m = writes[i].data.managed_tensors[t];
	for (size_t j = 0; j <= i; j++) {
		const ovstage_write_data_t *wj = &writes[j].data;
		if (!wj->managed_tensors)
			continue;
		uint32_t lim = j == i ? t : wj->tensor_count;
		for (uint32_t u = 0; u < lim; u++)
			if (wj->managed_tensors[u] == m) {
				if (at_j)
					*at_j = j;
				if (at_u)
					*at_u = u;
				return true;
			}
	}
	return false;
}

static void release_all_managed(const ovstage_attribute_write_t *writes, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const ovstage_write_data_t *wd = &writes[i].data;
		if (!wd->managed_tensors)
			continue;
		for (uint32_t t = 0; t < wd->tensor_count; t++) {
			DLManagedTensorVersioned *m = (DLManagedTensorVersioned *)(uintptr_t)wd->managed_tensors[t];
			if (m && m->deleter && !managed_seen_before(writes, i, t, NULL, NULL))
				m->deleter(m);
		}
	}
}

ovstage_enqueue_result_t ovs_write_attributes(ovstage_context_t *ctx, ovstage_query_handle_t handle,
					      const ovstage_attribute_write_t *writes, size_t write_count,
					      ovstage_ordinal_t ordinal, ovstage_prim_mode_t prim_mode)
{
	ovs_err_clear();
	ovs_stage *st = ovs_stage_of(ctx);
	ovstage_api_status_t s = OVSTAGE_OK;
	write_op *op = NULL;
	ovs_query *q = NULL;
	if (!st) {
		if (writes)
			release_all_managed(writes, write_count);
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "instance is NULL"));
	}
	if (write_count && !writes)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "writes is NULL with write_count = %zu",
						write_count));
	if (prim_mode != OVSTAGE_PRIM_MODE_UPSERT && prim_mode != OVSTAGE_PRIM_MODE_INSERT) {
		s = ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "prim_mode = %d is not UPSERT (0) or INSERT (1)",
				(int)prim_mode);
		goto reject_all;
	}
	s = ovs_check_unsealed(&st->store, ordinal, NULL, 0); /* back-pressure: too much written data waits for a seal */
	if (s != OVSTAGE_OK)
		goto reject_all;
	/* Managed tensors: non-NULL and unique across the batch. */
	for (size_t i = 0; i < write_count; i++) {
		const ovstage_write_data_t *wd = &writes[i].data;
		if (!wd->managed_tensors)
			continue;
		for (uint32_t t = 0; t < wd->tensor_count; t++) {
			if (!wd->managed_tensors[t]) {
				s = ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "writes[%zu].data.managed_tensors[%u] is NULL",
						i, t);
				goto reject_all;
			}
			size_t j;
			uint32_t u;
			if (managed_seen_before(writes, i, t, &j, &u)) {
				s = ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "writes[%zu].data.managed_tensors[%u] is the same "
						"tensor as writes[%zu].data.managed_tensors[%u]", i, t, j, u);
				goto reject_all;
			}
		}
	}
	q = ovs_query_get(st, handle);
	if (!q) {
		s = OVSTAGE_ERROR_INVALID_HANDLE;
		goto reject_all;
	}
	op = op_alloc(write_count);
	if (!op) {
		s = ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory preparing a write");
		goto reject_all;
	}
	op->st = st;
	op->q = q;
	op->ordinal = ordinal;
	op->mode = prim_mode;
	op->n = write_count;
	op->deferred = !ovs_query_ready(q);
	adopt_all_managed(op->e, writes, write_count);
	/* From here on, rejections release what op->e owns (exactly once). */
	for (size_t i = 0; i < write_count; i++) {
		write_entry *e = &op->e[i];
		ovx_token_t t = writes[i].attribute.token;
		if (!t || !ovs_pd_token_is_valid(st->pd, t)) { /* strings, and errors: the slower path */
			char what[64];
			snprintf(what, sizeof what, "writes[%zu].attribute", i);
			s = ovs_resolve_attr(st, writes[i].attribute, false, &t, what);
			if (s != OVSTAGE_OK)
				goto reject_op;
		}
		if (ovs_attr_is_derived(st, t)) {
			s = ovs_err_set(OVSTAGE_ERROR_NOT_SUPPORTED, "writes[%zu]: \"%s\" is derived from path structure "
					"and cannot be written", i, ovs_attr_name(st, t));
			goto reject_op;
		}
		for (size_t j = 0; j < i; j++)
			if (op->e[j].col->name == t) {
				s = ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "writes[%zu] and writes[%zu] both write \"%s\"",
						j, i, ovs_attr_name(st, t));
				goto reject_op;
			}
		e->data = writes[i].data;
		if (e->managed)
			e->data.managed_tensors = (const DLManagedTensorVersioned *const *)e->managed;
		else if (writes[i].data.managed_tensors && writes[i].data.tensor_count) {
			s = ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory taking managed tensors");
			goto reject_op;
		}
		char err[512];
		e->col = ovs_column_get_or_create(&st->store, t);
		if (!e->col) {
			s = ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory creating column \"%s\"",
					ovs_attr_name(st, t));
			goto reject_op;
		}
		e->semantic = e->data.semantic;
		s = ovs_layout_check_host(&e->data, err, sizeof err); /* known without the query's prims */
		if (s != OVSTAGE_OK) {
			ovs_err_set(s, "writes[%zu] (\"%s\"): %s", i, ovs_attr_name(st, t), err);
			goto reject_op;
		}
		if (op->deferred)
			continue; /* layout and schema need the query's count: checked in the op */
		s = ovs_layout_from_write(&e->data, (uint32_t)(q->count > UINT32_MAX ? UINT32_MAX : q->count), &e->layout,
					  err, sizeof err);
		if (s != OVSTAGE_OK) {
			ovs_err_set(s, "writes[%zu] (\"%s\"): %s", i, ovs_attr_name(st, t), err);
			goto reject_op;
		}
		/* Schema checks that are provable now (the column may get its schema later). */
		if (atomic_load_explicit(&e->col->has_schema, memory_order_acquire)) {
			ovs_column *c = e->col;
			ovstage_attribute_semantic_t sem = e->semantic == OVSTAGE_SEMANTIC_NONE ? c->schema.semantic
												 : e->semantic;
			if (e->semantic == OVSTAGE_SEMANTIC_NONE)
				e->semantic = c->schema.semantic;
			s = ovs_layout_check_schema(&e->layout, sem, c->schema.is_array, c->schema.dtype, c->schema.semantic,
						    ovs_attr_name(st, t), err, sizeof err);
		} else {
			s = ovs_layout_check_reserved(e->layout.is_array, e->layout.dtype, e->semantic, ovs_attr_name(st, t),
						      err, sizeof err);
		}
		if (s != OVSTAGE_OK) {
			ovs_err_set(s, "writes[%zu]: %s", i, err);
			goto reject_op;
		}
	}
	/* Ordinal admission and registration with the sequencer, atomically w.r.t. floor advances. */
	{
		ovx_token_t *cols = malloc((write_count ? write_count : 1) * sizeof *cols);
		if (!cols) {
			s = ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory preparing a write");
			goto reject_op;
		}
		/* What the op will copy: fixed rows, except a managed tensor adopted whole (no copy). */
		size_t copy_bytes = 0;
		bool inline_ok = !op->deferred;
		for (size_t i = 0; i < write_count; i++) {
			const write_entry *e = &op->e[i];
			cols[i] = e->col->name;
			if (op->deferred)
				continue; /* no layout yet (and not inline: it runs after the query's op) */
			if (e->layout.is_array)
				inline_ok = false; /* per-row blobs: cost not known from the layout */
			else if (!(e->nmanaged == 1 && e->layout.contiguous && !e->layout.index_map))
				copy_bytes += (size_t)e->layout.count * e->layout.elem_bytes;
		}
		inline_ok = inline_ok && copy_bytes <= WRITE_INLINE_MAX_BYTES;
		/* A query still resolving: run after its op (reads of q->paths/count are then ordered). */
		ovs_op_desc d = { .fn = write_job, .arg = op, .cleanup = write_op_free, .after = op->deferred ? &q->op : NULL,
				  .after_count = op->deferred ? 1 : 0, .run_inline = inline_ok };
		return ovs_sequencer_submit_mutation(st, ordinal, cols, write_count, &d, &op->inflight);
	}
reject_op:
	write_op_free(op, false); /* releases the managed tensors op->e owns, and the query */
	return ovs_rejected(s);
reject_all:
	if (writes)
		release_all_managed(writes, write_count);
	ovs_query_put(q);
	op_release(op);
	return ovs_rejected(s);
}

ovstage_enqueue_result_t ovs_write_attribute(ovstage_context_t *ctx, ovstage_query_handle_t handle,
					     ovx_string_or_token_t attribute, ovstage_ordinal_t ordinal,
					     ovstage_write_data_t data, ovstage_prim_mode_t prim_mode)
{
	ovstage_attribute_write_t w;
	w.attribute = attribute;
	w.data = data;
	return ovs_write_attributes(ctx, handle, &w, 1, ordinal, prim_mode);
}
