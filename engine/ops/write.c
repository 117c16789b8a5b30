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
#include "mask_bits.h"
#include "ops.h"
#include "device.h"
#include "exec.h"
#include "gpu.h"
#include "handoff.h"
#include "query.h"
#include "sequencer.h"

/* Writes that copy at most this many bytes in total run on the calling thread when nothing they
 * depend on is pending (see ovs_op_desc.run_inline): handing them to a worker and waking it costs
 * more than it saves. 4 MiB = copy.c's OVS_PARALLEL_MIN: a worker would copy that much serially too
 * (the entries one after the other, none big enough to split), so running inline loses no
 * parallelism, and the caller, which waits for its op anyway, does not wait for a wake-up as well.
 * It also lets a floor advance over the write run inline (its dependency is complete). Measured on
 * the demo at 65,536 prims, 3.4 MB a step (docs/performance.md, "where a demo step's time goes"):
 * floor advance p50 ~0.5 ms -> ~10 us, 1 producer +14-28 % steps/s. Larger writes go to the pool,
 * so the caller is not held up by big copies. */
#define WRITE_INLINE_MAX_BYTES ((size_t)4 << 20)

typedef struct write_entry {
	ovs_column *col;                     /* target column: prepared at the call (not yet visible when
	                                      * new), published by the sequencer at admission */
	ovstage_write_data_t data;           /* the caller's descriptor (managed array replaced by ours) */
	DLManagedTensorVersioned **managed;  /* tensors we own (deleter pending), or NULL */
	uint32_t nmanaged;                   /* entries in managed */
	ovstage_attribute_semantic_t semantic; /* effective semantic (NONE inherits the column's) */
	bool created_rows;                   /* the op gave prims rows in the column (a failure after it
	                                      * leaves rows of prims that do not exist) */
	bool schema_ok;                      /* checked at the call against the column's installed schema
	                                      * (immutable once installed, and the layout with it): the op
	                                      * need not check it again */
	void *fence;                         /* the producer's work named by cuda_sync (gpu.h), or NULL */
	void *staging;                       /* host copy of a CUDA source written into a CPU column (per-row
	                                      * array tensors: the host tensors, their shapes, then the bytes) */
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
	ovs_exec gx;                 /* the device context the op issued GPU work on last (gx.gpu NULL: none);
	                              * the op completes when that work has finished */
	ovs_exec_last devx;          /* the device context made last by the run (device.h): every entry's
	                              * device context comes through it */
	bool touches_gpu;            /* an entry may issue CUDA work (inline: the caller's device is kept) */
	int64_t unsealed;            /* bytes of the deltas the op published, added to the store's unsealed
	                              * count once when its body ends (write_job) */
	bool applied_all;            /* every entry was applied (published): its columns' max_applied
	                              * reached the ordinal (ovs_inflight_done_applied) */
	ovs_gpu_ptr_cache ptrs;      /* the allocation of the last CUDA tensor checked at the call: the
	                              * entries of a step whose tensors are slices of one buffer cost one
	                              * pointer query between them (zeroed: nothing cached) */
	/* The two copy lists come last: op_alloc zeroes the op up to them and only their counts. */
	ovs_copy_batch batch;        /* gx's small device copies not yet launched (gx.batch points here):
	                              * the values of the op's device sources, one launch per step */
	ovs_copy_batch hcopy;        /* the host copies of its full deltas not yet run (copy.h): a write
	                              * of several columns copies them in parallel, spread by bytes */
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
	memset(op, 0, offsetof(write_op, batch));
	op->batch.n = 0;
	op->hcopy.n = 0;
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

/* The managed tensors an entry still owns: their deleters run now, or — when GPU work of the op may
 * still read them (g) — once that work has finished. */
static void release_managed(write_entry *e, ovs_gpu *g)
{
	for (uint32_t i = 0; i < e->nmanaged; i++)
		if (e->managed[i] && g)
			ovs_gpu_after_stream(g, ovs_managed_delete, e->managed[i]);
		else if (e->managed[i])
			ovs_managed_delete(e->managed[i]);
	free(e->managed);
	e->managed = NULL;
	e->nmanaged = 0;
}

static void write_op_free(void *arg, bool ran)
{
	(void)ran;
	write_op *op = arg;
	for (size_t i = 0; i < op->n; i++) {
		write_entry *e = &op->e[i];
		/* usually nothing but the column: a host tensor of a column that existed (no calls) */
		if (e->managed)
			release_managed(e, op->gx.gpu); /* exactly once: adopted tensors left the list */
		if (e->fence)
			ovs_gpu_fence_release(e->fence); /* safe while a wait on it is pending */
		if (e->staging)
			free(e->staging);
		if (e->col && e->col->prepared)
			ovs_column_discard(&op->st->store, e->col); /* a refused write's new column */
	}
	ovs_query_put(op->q);
	if (op->inflight)
		ovs_inflight_done_applied(op->st, op->inflight, op->applied_all);
	op_release(op);
}

/* ovs_layout_check_schema against column c's schema with the column's name resolved only for a
 * failure's message: the check is a pure function of its arguments, so it runs once more with the
 * name when it fails. A token's string is a path-dictionary lookup, and every entry of every write
 * passed this check twice (at the call and in the op): ~650 instructions of an 8-column commit. */
static ovstage_api_status_t schema_matches(ovs_stage *st, const ovs_column *c, const ovs_layout *l,
					   ovstage_attribute_semantic_t sem, ovx_token_t name, char *err, size_t errlen)
{
	ovstage_api_status_t s = ovs_layout_check_schema(l, sem, c->schema.is_array, c->schema.dtype, c->schema.semantic,
							 "", err, errlen);
	if (s != OVSTAGE_OK)
		s = ovs_layout_check_schema(l, sem, c->schema.is_array, c->schema.dtype, c->schema.semantic,
					    ovs_attr_name(st, name), err, errlen);
	return s;
}

/* Checks the entry against the column's schema, if it has one (installing waits for publish). */
static ovstage_api_status_t check_schema(ovs_stage *st, const write_entry *e, char *err, size_t errlen)
{
	ovs_column *c = e->col;
	/* The call checked this layout against this schema already: a schema never changes once installed,
	 * and the check is a pure function of the two (apply_entry and publish_entry each checked it again:
	 * ~200 instructions per column of every write). */
	if (e->schema_ok)
		return OVSTAGE_OK;
	/* acquire: pairs with settle_schema's release; the schema fields are then stable. */
	if (!atomic_load_explicit(&c->has_schema, memory_order_acquire))
		return OVSTAGE_OK;
	ovstage_attribute_semantic_t sem = e->semantic == OVSTAGE_SEMANTIC_NONE ? c->schema.semantic : e->semantic;
	return schema_matches(st, c, &e->layout, sem, c->name, err, errlen);
}

/* Installs the column's schema on first use, or checks the entry against it. */
static ovstage_api_status_t settle_schema(ovs_stage *st, write_entry *e, DLDevice dev, char *err, size_t errlen)
{
	const ovs_layout *l = &e->layout;
	if (ovs_column_install_schema(e->col, l->is_array, l->dtype, e->semantic, l->elem_bytes, dev)) {
		ovs_store_count_device_column(&st->store, dev);
		return OVSTAGE_OK;
	}
	ovs_column *c = e->col;
	if (c->schema.device.device_type != dev.device_type || c->schema.device.device_id != dev.device_id) {
		/* a concurrent first write created the column on another device after this entry chose */
		ovs_err_format(err, errlen, "attribute \"%s\" was created on %s:%d by a concurrent write while this "
			       "one prepared its data for %s:%d; retry the write", ovs_attr_name(st, c->name),
			       c->schema.device.device_type == kDLCUDA ? "cuda" : "cpu", (int)c->schema.device.device_id,
			       dev.device_type == kDLCUDA ? "cuda" : "cpu", (int)dev.device_id);
		return OVSTAGE_ERROR_OP_FAILED;
	}
	return check_schema(st, e, err, errlen);
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

/* A parallel gather over blocks of GATHER_GRAIN mask words (ovs_parallel_for): blocks [lo, hi)
 * start at output prefix[lo], known from the prefix counts, so the parts write disjoint outputs;
 * the join orders them before the delta is pushed. A block is 512 words (32 Ki elements, 4 KiB of
 * mask): a contiguous 1 % block of a 16 M-element mask (2,500 words) then spans five blocks that
 * five workers gather, where 4096-word blocks gave it all to one. */
enum {
	GATHER_GRAIN = 1u << 9,      /* mask words per block */
	GATHER_MIN_SEL = 1u << 14,   /* fewer selected elements: one thread gathers them */
	COUNT_GRAIN = 4              /* blocks per part of the parallel count (16 KiB of mask) */
};
static void gather_blocks(void *p, size_t lo, size_t hi)
{
	const gather_ctx *cx = p;
	uint32_t words = (cx->n + 63) / 64, w1 = (uint32_t)hi * GATHER_GRAIN;
	gather_words(cx, (uint32_t)lo * GATHER_GRAIN, w1 < words ? w1 : words, cx->prefix[lo]);
}

/* The selected elements of a contiguous payload (element i = source row i): rows[k] = their rows
 * (map, or the identity when map is NULL), values[k] = their bytes; nsel of them. Split across the
 * workers when there are many (each selected element of a sparse mask is a cache miss). */
static void gather_masked(jobs_worker *w, gather_ctx *cx)
{
	uint32_t words = (cx->n + 63) / 64;
	if (!w || !cx->prefix) {
		gather_words(cx, 0, words, 0);
		return;
	}
	ovs_exec x = ovs_exec_cpu(w);
	ovs_parallel_for(&x, (words + GATHER_GRAIN - 1) / GATHER_GRAIN, 1, 1, gather_blocks, cx);
}

/* Positions (or their rows) of a large mask split across the workers like gather_masked: blocks
 * [lo, hi) start at output prefix[lo], so the parts write disjoint outputs. */
typedef struct positions_ctx {
	const uint64_t *mask;   /* the write's mask */
	uint32_t n;             /* logical elements */
	const uint32_t *map;    /* element -> row (NULL: the position itself) */
	const uint32_t *prefix; /* selected elements before each GATHER_GRAIN-word block */
	uint32_t *out;          /* out: one entry per selected element, in element order */
} positions_ctx;

static void positions_blocks(void *p, size_t lo, size_t hi)
{
	const positions_ctx *pc = p;
	uint32_t words = (pc->n + 63) / 64, w1 = (uint32_t)hi * GATHER_GRAIN;
	ovs_mask_list(pc->mask, pc->n, (uint32_t)lo * GATHER_GRAIN, w1 < words ? w1 : words, pc->map,
		      pc->out + pc->prefix[lo], pc->prefix[hi] - pc->prefix[lo]);
}

/* The selected elements' rows (map NULL: their positions) into out; returns how many. In parallel
 * when prefix is set (mask_count_prefix kept it: a large mask with many selected). */
static uint32_t mask_rows(jobs_worker *w, const uint64_t *mask, uint32_t n, const uint32_t *map,
			  const uint32_t *prefix, uint32_t nsel, uint32_t *out)
{
	uint32_t words = (n + 63) / 64;
	if (!w || !prefix)
		return ovs_mask_list(mask, n, 0, words, map, out, nsel);
	positions_ctx pc = { mask, n, map, prefix, out };
	ovs_exec x = ovs_exec_cpu(w);
	ovs_parallel_for(&x, (words + GATHER_GRAIN - 1) / GATHER_GRAIN, 1, 1, positions_blocks, &pc);
	return nsel; /* the join orders every part's writes before this returns */
}

/* The per-block counts of a parallel count: counts[b + 1] = bits set in block b. */
typedef struct count_ctx {
	const uint64_t *mask; /* the write's mask */
	uint32_t n;           /* logical elements */
	uint32_t *counts;     /* out: counts[b + 1] for each block b */
} count_ctx;

static void count_blocks(void *p, size_t lo, size_t hi)
{
	const count_ctx *cc = p;
	uint32_t nw = (cc->n + 63) / 64;
	for (size_t b = lo; b < hi; b++) {
		uint32_t w1 = (uint32_t)(b + 1) * GATHER_GRAIN;
		cc->counts[b + 1] = ovs_mask_count(cc->mask, cc->n, (uint32_t)b * GATHER_GRAIN, w1 < nw ? w1 : nw);
	}
}

/* Counts the selected elements of a mask; for a mask of several GATHER_GRAIN-word blocks, also
 * the prefix counts a parallel gather splits by (*prefix, malloc'd; NULL if not worth it or out of
 * memory). The blocks are counted in parallel on a worker (the count reads the whole mask: 2 MiB
 * for 16 M elements, ~100 µs on one core), then summed in order. */
static uint32_t mask_count_prefix(jobs_worker *w, const uint64_t *mask, uint32_t n, uint32_t **prefix)
{
	uint32_t nw = (n + 63) / 64, nb = (nw + GATHER_GRAIN - 1) / GATHER_GRAIN;
	*prefix = nb > 1 ? malloc((nb + 1) * sizeof **prefix) : NULL;
	if (!*prefix)
		return ovs_mask_count(mask, n, 0, nw);
	uint32_t *p = *prefix;
	count_ctx cc = { mask, n, p };
	ovs_exec x = ovs_exec_cpu(w);
	ovs_parallel_for(&x, nb, COUNT_GRAIN, 1, count_blocks, &cc); /* the join orders the counts */
	p[0] = 0;
	for (uint32_t b = 0; b < nb; b++)
		p[b + 1] += p[b];
	uint32_t total = p[nb];
	if (total < GATHER_MIN_SEL) { /* few selected: one thread gathers them */
		free(p);
		*prefix = NULL;
	}
	return total;
}

/* Who owns an entry's row list: what releases it when no delta takes it. */
typedef enum rows_owner {
	ROWS_UNLISTED, /* no list (rows NULL): the write covers rows 0..k-1 in row order */
	ROWS_OWNED,    /* ours, from ovs_delta_array: malloc'd, or in a pooled buffer (row_list.buf) */
	ROWS_BORROWED  /* the query's row map's own rows (row_list.map): a delta takes a reference on it */
} rows_owner;

/* The rows an entry writes, as mapping the selected elements on the host produced them (phase 1 of
 * apply_entry): the list, who owns it, what is known of its shape, and what the same pass made. */
typedef struct row_list {
	uint32_t *rows;          /* row of selected element j, in element order; NULL when ROWS_UNLISTED */
	uint32_t k;              /* selected elements (entries in rows, or rows covered when unlisted) */
	rows_owner owner;        /* what releases rows */
	ovs_buffer *buf;         /* ROWS_OWNED: the pooled buffer rows lives in; NULL: malloc'd */
	const ovs_rowmap *map;   /* ROWS_BORROWED: the query's row map rows belongs to */
	bool identity;           /* element i is row i for every element of the query (no mask): a FULL
	                          * delta when that is every row of the column */
	bool shape_known;        /* sorted and contig were set here (else the push scans the rows) */
	bool sorted;             /* rows strictly increasing (when shape_known) */
	bool contig;             /* rows[j] == rows[0] + j: one block of the column (when shape_known) */
	bool positions;          /* rows[j] is also selected element j's position (a mask over an
	                          * identity row map): the device gather's source list */
	unsigned char *values;   /* the selected elements' bytes, gathered with the rows (a masked
	                          * contiguous payload); NULL: the delta copies them itself */
	ovs_buffer *values_buf;  /* the pooled buffer values lives in; NULL: malloc'd */
	ovs_rowmap *new_map;     /* a complete row map made in the same pass (rows created for the whole
	                          * query), for publish_entry to cache; NULL if none */
} row_list;

/* Records what is known of the rows' shape (the push then does not scan them). */
static void row_list_set_shape(row_list *rl, bool sorted, bool contig)
{
	rl->shape_known = true;
	rl->sorted = sorted;
	rl->contig = contig;
}

/* Frees the rows when they are ours and no delta took them (borrowed ones belong to the row map). */
static void row_list_drop_rows(row_list *rl)
{
	if (rl->owner == ROWS_OWNED)
		ovs_delta_array_free(rl->rows, rl->buf);
	rl->owner = ROWS_UNLISTED;
	rl->rows = NULL;
	rl->buf = NULL;
}

/* Releases everything a row list holds when no delta was made from it. */
static void row_list_release(row_list *rl)
{
	row_list_drop_rows(rl);
	ovs_delta_array_free(rl->values, rl->values_buf);
	rl->values = NULL;
	rl->values_buf = NULL;
	free(rl->new_map);
	rl->new_map = NULL;
}

/* Launches the op's deferred device copies (op->batch) on op->gx's stream. A failure lands in
 * op->gx.err. */
static void gx_flush(write_op *op)
{
	if (op->gx.gpu)
		ovs_gpu_memops()->flush(&op->gx);
}

/* Frees a delta the op made but does not publish. Its values may be the destination of a deferred
 * copy: the batch is launched first. The device pool hands a returned block out again at once, on
 * the rule that its earlier users issued their work on the engine stream before giving it back
 * (cuda_context.c, ovs_gpu_alloc); freed before the launch, the memory could go to the next
 * allocation of this op or another while the copy still writes it. */
static void delta_discard(write_op *op, ovs_delta *d)
{
	gx_flush(op);
	ovs_copy_flush(NULL, &op->hcopy); /* the same for a host copy (rare: serial is fine) */
	ovs_delta_free(d);
}

/* Makes a checked entry visible, in one place so that an entry failing before it leaves no trace:
 * the column's schema (installed here, not when it was checked; a concurrent write may have
 * installed another, which refuses this one), the existence of the selected prims, the query's new
 * row map, the column's "written" mark, and the delta d (NULL for an empty write). */
static ovstage_api_status_t publish_entry(write_op *op, write_entry *e, DLDevice dev, ovs_delta *d, bool set_prims,
					  ovs_rowmap *new_map, char *err, size_t errlen)
{
	ovs_stage *st = op->st;
	/* An empty entry (an empty query) has no layout: its dtype is zero, so it neither installs nor
	 * checks a schema (it installed a zero "int0x0" schema: fuzz_api finding). */
	ovstage_api_status_t s = e->layout.kind == OVS_LAYOUT_EMPTY ? OVSTAGE_OK : settle_schema(st, e, dev, err, errlen);
	if (s != OVSTAGE_OK) {
		free(new_map);
		if (d)
			delta_discard(op, d);
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
		ovs_column_push_delta_acc(&st->store, e->col, d, &op->unsealed); /* counted by write_job */
	return OVSTAGE_OK;
}

/* The layout rules that depend on the query's prim count, for a query that resolved after the call
 * (its paths and count were published by its op, which this one ran after). */
static ovstage_api_status_t check_deferred(write_op *op, write_entry *e, char *err, size_t errlen)
{
	ovs_stage *st = op->st;
	ovs_column *c = e->col;
	char lerr[400];
	ovstage_api_status_t ls = ovs_layout_from_write(&e->data, (uint32_t)op->q->count, &e->layout, lerr,
						       sizeof lerr);
	if (ls != OVSTAGE_OK) {
		ovs_err_format(err, errlen, "\"%s\": %s", ovs_attr_name(st, c->name), lerr);
		return ls;
	}
	e->semantic = e->data.semantic;
	ls = ovs_layout_check_reserved(e->layout.is_array, e->layout.dtype, e->semantic, ovs_attr_name(st, c->name),
				       lerr, sizeof lerr);
	if (ls != OVSTAGE_OK)
		ovs_err_format(err, errlen, "%s", lerr);
	return ls;
}

/* The checks of a non-empty entry against the stage as it is now: a host-accessible payload, an
 * ordinal above the column's write floor, and for INSERT no selected prim existing yet. */
static ovstage_api_status_t check_admission(write_op *op, const write_entry *e, char *err, size_t errlen)
{
	ovs_stage *st = op->st;
	ovs_column *c = e->col;
	const ovs_layout *l = &e->layout;
	if (!l->host_accessible && !ovs_gpu_available()) {
		ovs_err_format(err, errlen, "attribute \"%s\": device-resident (CUDA) tensors cannot be used: %s",
			       ovs_attr_name(st, c->name), ovs_gpu_reason());
		return OVSTAGE_ERROR_NOT_SUPPORTED;
	}
	/* acquire: sealed floor (a seal of this ordinal cannot have been accepted after us; re-check). */
	uint64_t floor = atomic_load_explicit(&c->floor, memory_order_acquire);
	if (op->ordinal <= floor) {
		ovs_err_format(err, errlen, "ordinal %llu is not above the write floor %llu of \"%s\"",
			       (unsigned long long)op->ordinal, (unsigned long long)floor, ovs_attr_name(st, c->name));
		return OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION;
	}
	if (op->mode != OVSTAGE_PRIM_MODE_INSERT)
		return OVSTAGE_OK;
	for (uint32_t i = 0; i < l->count; i++)
		if (ovs_layout_selected(l, i) && ovs_prim_exists(&st->store, op->q->paths[i])) {
			ovs_err_format(err, errlen, "INSERT: prim %s (query element %u) already exists",
				       ovs_pd_path_string(st->pd, op->q->paths[i]).ptr, i);
			return OVSTAGE_ERROR_PRIM_NOT_FOUND;
		}
	return OVSTAGE_OK;
}

/* Gives the list its rows: none when unlisted; the query's row map's own when the write covers the
 * whole query without a mask (the map never changes once installed: no copy of it per write); else
 * a fresh list sized by the selected elements (a 1 % mask over 16 M prims needs 160 K entries, not
 * 16 M: a list the size of the query would be fresh memory, faulted in on every write). False when
 * out of memory. */
static bool row_list_alloc(ovs_store *store, const ovs_layout *l, const ovs_rowmap *map, bool unlisted,
			   uint32_t nsel, row_list *rl)
{
	if (unlisted) {
		rl->owner = ROWS_UNLISTED;
		return true;
	}
	if (map && !l->mask && !l->is_array) {
		rl->owner = ROWS_BORROWED;
		rl->map = map;
		rl->rows = (uint32_t *)(uintptr_t)map->rows;
		return true;
	}
	rl->owner = ROWS_OWNED;
	rl->rows = ovs_delta_array(store, (size_t)nsel * sizeof *rl->rows, &rl->buf);
	return rl->rows != NULL;
}

/* A contiguous payload under a mask: its rows and values in one pass over the mask (split across
 * the workers when prefix is set). */
static ovstage_api_status_t rows_gather(jobs_worker *w, ovs_store *store, const ovs_layout *l, const ovs_rowmap *map,
					const uint32_t *prefix, uint32_t nsel, row_list *rl, char *err, size_t errlen)
{
	rl->values = ovs_delta_array(store, (size_t)nsel * l->elem_bytes, &rl->values_buf);
	if (!rl->values) {
		ovs_err_format(err, errlen, "out of memory copying %u rows", nsel);
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	gather_ctx cx = { l->mask, l->count, map->identity ? NULL : map->rows, prefix, ovs_layout_contiguous_base(l),
			  l->elem_bytes, rl->rows, rl->values };
	gather_masked(w, &cx);
	rl->k = nsel;
	if (map->identity) /* element order is row order: sorted; one block iff they span exactly k rows */
		row_list_set_shape(rl, true, nsel == 0 || rl->rows[nsel - 1] - rl->rows[0] == nsel - 1);
	return OVSTAGE_OK;
}

/* The rows of the selected elements from the query's cached row map: no per-prim lookups. */
static ovstage_api_status_t rows_from_map(jobs_worker *w, ovs_store *store, const ovs_layout *l,
					  const ovs_rowmap *map, const uint32_t *prefix, uint32_t nsel, bool host_values,
					  row_list *rl, char *err, size_t errlen)
{
	uint32_t n = l->count;
	rl->identity = rl->identity && map->identity;
	if (rl->owner == ROWS_UNLISTED) {
		rl->k = n; /* rows 0..n-1 are every row: the FULL delta needs no row list */
		return OVSTAGE_OK;
	}
	if (!l->mask) {
		if (rl->owner == ROWS_OWNED) /* an array write: a list of its own */
			memcpy(rl->rows, map->rows, (size_t)n * sizeof *rl->rows);
		rl->k = n;
		row_list_set_shape(rl, map->sorted, map->contig);
		return OVSTAGE_OK;
	}
	if (host_values && !l->is_array && !l->index_map && ovs_layout_contiguous_base(l))
		return rows_gather(w, store, l, map, prefix, nsel, rl, err, errlen);
	/* the selected elements' rows (the positions themselves when the map is the identity) */
	rl->k = mask_rows(w, l->mask, n, map->identity ? NULL : map->rows, prefix, nsel, rl->rows);
	rl->positions = map->identity;
	/* A mask's positions increase, and a block map (rows[i] = rows[0] + i) keeps their gaps: the
	 * shape is known without the push's scan of the rows (13 us of a 4 Mi-element 1 % write on the
	 * H200, docs/performance.md). */
	if (map->identity || map->contig)
		row_list_set_shape(rl, true, !rl->k || rl->rows[rl->k - 1] - rl->rows[0] == rl->k - 1);
	return OVSTAGE_OK;
}

/* The rows of the selected elements by lookup, creating rows for new prims (one block for those
 * of this write: ovs_column_rows_create); for a write of the whole query, also the complete row map
 * publish_entry caches (when the entry succeeds). */
static ovstage_api_status_t rows_create(write_op *op, write_entry *e, row_list *rl, char *err, size_t errlen)
{
	const ovs_layout *l = &e->layout;
	uint32_t n = l->count;
	const ovx_primpath_t *paths = op->q->paths;
	ovx_primpath_t *sel = NULL; /* the selected elements' paths, when a mask leaves some out */
	if (l->mask) {
		sel = malloc(((size_t)n ? (size_t)n : 1) * sizeof *sel);
		if (!sel) {
			ovs_err_format(err, errlen, "out of memory mapping %u prims to rows", n);
			return OVSTAGE_ERROR_OUT_OF_MEMORY;
		}
		uint32_t k = 0;
		for (uint32_t i = 0; i < n; i++)
			if (ovs_layout_selected(l, i))
				sel[k++] = paths[i];
		n = k;
		paths = sel;
	}
	bool created;
	bool ok = ovs_column_rows_create(e->col, paths, n, rl->rows, &created);
	free(sel);
	if (!ok) {
		ovs_err_format(err, errlen, "cannot map %u prims to rows (out of memory or a path id too large)", n);
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	e->created_rows = e->created_rows || created;
	rl->k = n;
	for (uint32_t j = 0; j < n && rl->identity; j++)
		rl->identity = rl->rows[j] == j;
	if (!l->mask && n == op->q->count && n) {
		/* every prim of the query has a row now: cache the map (when the entry succeeds) */
		rl->new_map = ovs_rowmap_alloc(e->col, n);
		if (rl->new_map)
			memcpy(rl->new_map->rows, rl->rows, (size_t)n * sizeof *rl->rows);
	}
	return OVSTAGE_OK;
}

/* Phase 1: maps the selected elements to rows on the host (creating rows for new prims). A query
 * that has written this column before has its rows cached: no per-prim lookups then. *set_prims:
 * publish_entry is to mark the selected prims existing. On failure *rl holds nothing. */
static ovstage_api_status_t map_rows(jobs_worker *w, write_op *op, write_entry *e, bool host_values, row_list *rl,
				     bool *set_prims, char *err, size_t errlen)
{
	ovs_stage *st = op->st;
	ovs_column *c = e->col;
	const ovs_layout *l = &e->layout;
	uint32_t n = l->count;
	*rl = (row_list){ .identity = !l->mask && n == op->q->count };
	const ovs_rowmap *map = ovs_query_rowmap(op->q, c);
	/* The row list is needed unless the write covers every row in row order (FULL, the common
	 * steady state of a cached identity map): then it is not even allocated.
	 * acquire: row count including rows other writes created concurrently. */
	bool unlisted = map && rl->identity && map->identity && !l->is_array &&
			n == atomic_load_explicit(&c->nrows, memory_order_acquire);
	uint32_t *prefix = NULL; /* per-block counts of a large mask (parallel gather), freed below */
	uint32_t nsel = l->mask ? mask_count_prefix(w, l->mask, n, &prefix) : n;
	if (!row_list_alloc(&st->store, l, map, unlisted, nsel, rl)) {
		free(prefix);
		ovs_err_format(err, errlen, "out of memory mapping %u prims to rows", n);
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	/* acquire: a whole-prim delete since the prims were created means their existence must be
	 * re-asserted; without any, every prim with a row exists. */
	bool reassert = atomic_load_explicit(&st->store.prim_deletes, memory_order_acquire) != 0;
	*set_prims = reassert || !map;
	ovstage_api_status_t s = map ? rows_from_map(w, &st->store, l, map, prefix, nsel, host_values, rl, err, errlen)
				     : rows_create(op, e, rl, err, errlen);
	free(prefix); /* only the gather and mask_rows use it */
	if (s != OVSTAGE_OK)
		row_list_release(rl);
	return s;
}

/* What delta an entry makes (a write never makes a TOMBSTONE: delete.c does). */
typedef enum entry_delta {
	ENTRY_ARRAY,  /* SPARSE, one blob per written row (an array column) */
	ENTRY_FULL,   /* FULL: the rows are every row of the column, in row order */
	ENTRY_SPARSE  /* SPARSE: the listed rows and their bytes */
} entry_delta;

/* Phase 2: the delta's kind, from the row list and the column's row count. */
static entry_delta choose_delta(ovs_column *c, const ovs_layout *l, const row_list *rl)
{
	if (l->is_array)
		return ENTRY_ARRAY;
	/* acquire: row count including rows other writes created concurrently. */
	if (rl->identity && rl->k == atomic_load_explicit(&c->nrows, memory_order_acquire) && rl->k > 0)
		return ENTRY_FULL;
	return ENTRY_SPARSE;
}

/* An array delta's rows and its (empty) table of one blob per written row: the delta takes the row
 * list. */
static ovstage_api_status_t array_delta_begin(row_list *rl, ovs_delta *d, char *err, size_t errlen)
{
	d->kind = OVS_DELTA_SPARSE;
	d->rows = rl->rows;
	d->rows_buf = rl->buf;
	d->blobs = calloc(rl->k ? rl->k : 1, sizeof *d->blobs);
	if (!d->blobs) {
		ovs_err_format(err, errlen, "out of memory copying %u array rows", rl->k);
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	d->nrows = rl->k;
	return OVSTAGE_OK;
}

/* Array rows: one blob per written row (ragged), shared by later versions by reference. The delta
 * takes the row list. */
static ovstage_api_status_t fill_array_delta(const ovs_layout *l, row_list *rl, ovs_delta *d, char *err,
					     size_t errlen)
{
	ovstage_api_status_t s = array_delta_begin(rl, d, err, errlen);
	if (s != OVSTAGE_OK)
		return s;
	uint32_t j = 0;
	for (uint32_t i = 0; i < l->count; i++) {
		if (!ovs_layout_selected(l, i))
			continue;
		uint32_t src = ovs_layout_source_row(l, i);
		uint64_t len = ovs_layout_array_len(l, src);
		ovs_blob *b = ovs_blob_new(len, l->elem_bytes);
		if (!b) {
			ovs_err_format(err, errlen, "out of memory copying array row %u (%llu elements)", src,
				       (unsigned long long)len);
			return OVSTAGE_ERROR_OUT_OF_MEMORY;
		}
		if (len)
			ovs_layout_copy_array_row(l, src, b->data);
		d->blobs[j++] = b;
	}
	return OVSTAGE_OK;
}

/* The payload as rows 0..k-1: adopted from the producer's managed tensor without a copy, or copied
 * into a fresh buffer. The row list is not needed (it is dropped). */
static ovstage_api_status_t fill_full_delta(jobs_worker *w, ovs_store *store, ovs_copy_batch *hcopy, write_entry *e,
					    row_list *rl, ovs_delta *d, ovs_buffer **spare, char *err, size_t errlen)
{
	const ovs_layout *l = &e->layout;
	size_t rb = l->elem_bytes; /* = the column's row_bytes, which publish_entry may install */
	size_t bytes = (size_t)rl->k * rb;
	const void *base = ovs_layout_contiguous_base(l);
	d->kind = OVS_DELTA_FULL;
	d->nrows = rl->k;
	row_list_drop_rows(rl);
	if (base && !l->index_map && e->nmanaged == 1) {
		/* Zero copy: the version adopts the producer's buffer; its deleter runs when the last
		 * version or read group holding it is reclaimed. */
		d->full = ovs_buffer_adopt(store, NULL, e->managed[0], (void *)(uintptr_t)base, bytes);
		if (d->full) {
			e->managed[0] = NULL; /* ownership moved to the buffer */
			return OVSTAGE_OK;
		}
	}
	if (*spare && (*spare)->size_class == ovs_size_class(bytes)) { /* the column's last full write's */
		d->full = *spare;
		*spare = NULL;
	} else {
		d->full = ovs_buffer_new(store, bytes);
	}
	if (!d->full) {
		ovs_err_format(err, errlen, "out of memory allocating %zu bytes", bytes);
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	if (base && !l->index_map)
		ovs_copy_defer(w, hcopy, d->full->data, base, bytes); /* run at the op's flush points */
	else
		for (uint32_t i = 0; i < d->nrows; i++)
			ovs_layout_copy_row(l, ovs_layout_source_row(l, i), (char *)d->full->data + (size_t)i * rb);
	return OVSTAGE_OK;
}

/* Rows 0..k-1 as a malloc'd list, or NULL when out of memory. */
static uint32_t *identity_rows(uint32_t k)
{
	uint32_t *rows = malloc(((size_t)k ? (size_t)k : 1) * sizeof *rows);
	for (uint32_t i = 0; rows && i < k; i++)
		rows[i] = i;
	return rows;
}

/* Copies the selected elements' bytes to dst, in element order. */
static void copy_selected(const ovs_layout *l, unsigned char *dst)
{
	uint32_t n = l->count, j = 0;
	size_t rb = l->elem_bytes;
	const void *base = ovs_layout_contiguous_base(l);
	if (base && !l->index_map) {
		/* Contiguous source, element i = source row i: copy runs of selected rows at once (the
		 * whole payload without a mask; each run of set mask bits with one). */
		uint32_t i = 0, run;
		while (next_run(l->mask, n, &i, &run)) {
			memcpy(dst + (size_t)j * rb, (const char *)base + (size_t)i * rb, (size_t)(run - i) * rb);
			j += run - i;
			i = run;
		}
		return;
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
				memcpy(dst + (size_t)j * rb, (const char *)base + (size_t)src * rb, rb);
			else
				ovs_layout_copy_row(l, src, dst + (size_t)j * rb);
			j++;
		}
	}
}

/* The listed rows of a SPARSE delta (and values gathered with them, if any). The delta takes the row
 * list and the gathered values. */
static ovstage_api_status_t fill_sparse_rows(row_list *rl, ovs_delta *d, char *err, size_t errlen)
{
	d->kind = OVS_DELTA_SPARSE;
	d->nrows = rl->k;
	d->values = rl->values;
	d->values_buf = rl->values_buf;
	d->shape_known = rl->shape_known;
	d->sorted = rl->sorted;
	d->contig = rl->contig;
	if (rl->owner == ROWS_BORROWED) {
		ovs_rowmap_ref(rl->map);
		d->rows_map = rl->map;
	}
	/* Unlisted: rows were added since that was decided (another query's write); the identity map
	 * still says element i is row i, so list them. */
	d->rows = rl->owner == ROWS_UNLISTED ? identity_rows(rl->k) : rl->rows;
	d->rows_buf = rl->buf;
	if (!d->rows) {
		ovs_err_format(err, errlen, "out of memory mapping %u prims to rows", rl->k);
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	return OVSTAGE_OK;
}

/* The listed rows and their bytes (gathered with the rows, or copied here). */
static ovstage_api_status_t fill_sparse_delta(ovs_store *store, const ovs_layout *l, row_list *rl, ovs_delta *d,
					      char *err, size_t errlen)
{
	ovstage_api_status_t s = fill_sparse_rows(rl, d, err, errlen);
	if (s != OVSTAGE_OK || d->values) /* failed, or already gathered */
		return s;
	d->values = ovs_delta_array(store, (size_t)rl->k * l->elem_bytes, &d->values_buf);
	if (!d->values) {
		ovs_err_format(err, errlen, "out of memory copying %u rows", rl->k);
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	copy_selected(l, d->values);
	return OVSTAGE_OK;
}

/* ---- device columns ------------------------------------------------------------------------------
 * The delta's values go to device memory on the column's engine stream (x): from a host source as
 * one upload (gathered on the host first when masked, mapped or strided), from a CUDA source as one
 * device copy or one gather kernel. Row lists stay host metadata. */

/* The source rows of the selected elements, in element order (k of them), or NULL (out of memory).
 * A mask is visited a word at a time (set bits only), so the cost follows the rows written. */
static uint32_t *selected_sources(const ovs_layout *l, uint32_t k)
{
	uint32_t *src = malloc(((size_t)k ? (size_t)k : 1) * sizeof *src), j = 0, n = l->count;
	if (!src)
		return NULL;
	if (l->mask && !l->index_map) {
		ovs_mask_list(l->mask, n, 0, (n + 63) / 64, NULL, src, k);
		return src;
	}
	for (uint32_t wd = 0; wd < (n + 63) / 64 && j < k; wd++) {
		uint64_t bits = l->mask ? l->mask[wd] : ~(uint64_t)0;
		if (wd == (n - 1) / 64 && n % 64)
			bits &= ((uint64_t)1 << (n % 64)) - 1;
		while (bits && j < k) {
			uint32_t i = wd * 64 + (uint32_t)__builtin_ctzll(bits);
			bits &= bits - 1;
			src[j++] = l->index_map ? l->index_map[i] : i;
		}
	}
	return src;
}

/* Whether x's device (the column's) can read l's CUDA memory directly: its own, or a peer's with peer
 * access on (enabled at the first such write: gpu.h). False for host memory. */
static bool device_reads_source(const ovs_exec *x, const ovs_layout *l)
{
	return !l->host_accessible && l->device.device_type == kDLCUDA &&
	       ovs_gpu_peer_enable(ovs_gpu_device(x->gpu), (int)l->device.device_id);
}

/* The source's rows 0..row_count-1 copied onto x's device (one cudaMemcpyAsync from the peer, which
 * the driver stages through the host where the devices cannot reach each other), then gathered there:
 * a masked or index-mapped write from a device the column's cannot read. The staging block goes back
 * to the context's cache after the gather is issued (reused in stream order). */
static ovstage_api_status_t gather_from_peer_staged(ovs_exec *x, const ovs_layout *l, const void *base,
						    const uint32_t *rows, const uint32_t *drows, uint32_t k, void *dst,
						    char *err, size_t errlen)
{
	const ovs_memops *ops = ovs_gpu_memops();
	size_t bytes = (size_t)l->row_count * l->elem_bytes; /* the layout's span fits size_t (layout.h) */
	void *tmp = ovs_gpu_alloc(x->gpu, bytes ? bytes : 1);
	if (!tmp) {
		ovs_err_format(err, errlen, "out of device memory staging %zu bytes from CUDA device %d on CUDA device %d",
			       bytes, (int)l->device.device_id, ovs_gpu_device(x->gpu));
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	ops->copy(x, tmp, base, bytes);
	ops->gather_rows(x, dst, tmp, rows, drows, k, l->elem_bytes);
	ovs_gpu_free(x->gpu, tmp, bytes ? bytes : 1);
	return OVSTAGE_OK;
}

/* The k selected elements' bytes, in element order, into device memory dst. positions: their source
 * rows when the caller has them listed (dpositions: the same on x's device, or NULL), else NULL. */
static ovstage_api_status_t device_values(ovs_exec *x, const ovs_layout *l, uint32_t k, const uint32_t *positions,
					  const uint32_t *dpositions, void *dst, char *err, size_t errlen)
{
	size_t rb = l->elem_bytes;
	const void *base = ovs_layout_contiguous_base(l);
	const ovs_memops *ops = ovs_gpu_memops();
	if (base && !l->mask && !l->index_map) { /* rows 0..k-1 of the source, adjacent: one copy */
		/* Device memory of the column's device: a kernel can read it, so a small copy may wait for
		 * the op's batch (dst is a fresh buffer nothing reads before the flush). Host memory
		 * (pageable, pinned, managed) and a peer device's keep cudaMemcpyAsync. */
		bool local = !l->host_accessible && l->device.device_type == kDLCUDA &&
			     l->device.device_id == ovs_gpu_device(x->gpu);
		if (!local)
			(void)device_reads_source(x, l); /* a peer's: with peer access on, the copy is direct */
		(local ? ops->copy_device : ops->copy)(x, dst, base, (size_t)k * rb);
		return OVSTAGE_OK;
	}
	if (l->host_accessible) {
		unsigned char *h = malloc(((size_t)k ? (size_t)k : 1) * rb);
		if (!h) {
			ovs_err_format(err, errlen, "out of memory staging %u rows", k);
			return OVSTAGE_ERROR_OUT_OF_MEMORY;
		}
		copy_selected(l, h);
		ops->copy(x, dst, h, (size_t)k * rb); /* pageable: staged by the driver before it returns */
		free(h);
		return OVSTAGE_OK;
	}
	if (!base) {
		ovs_err_format(err, errlen, "a strided CUDA source tensor cannot be gathered on the device (pass a "
			       "compact tensor)");
		return OVSTAGE_ERROR_NOT_SUPPORTED;
	}
	/* the source rows: the selected positions (the row list's own when it holds them) */
	uint32_t *src = positions ? NULL : selected_sources(l, k);
	if (!positions && !src) {
		ovs_err_format(err, errlen, "out of memory listing %u source rows", k);
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	const uint32_t *rows = positions ? positions : src, *drows = positions ? dpositions : NULL;
	ovstage_api_status_t s = OVSTAGE_OK;
	if (device_reads_source(x, l)) /* the column's device, or a peer it reaches: gather in place */
		ops->gather_rows(x, dst, base, rows, drows, k, rb); /* uploaded before it returns */
	else
		s = gather_from_peer_staged(x, l, base, rows, drows, k, dst, err, errlen);
	free(src);
	return s;
}

/* ---- array rows on a device ------------------------------------------------------------------------
 * An array write's rows packed into one payload, in element order: where each row's bytes go, from
 * the descriptors alone (host metadata). A device column's delta is one device buffer of the packed
 * rows plus a host blob per row pointing into it; a CUDA source written into a CPU column is packed
 * on its device and downloaded once. */
typedef struct array_plan {
	uint32_t k;    /* rows */
	uint32_t *src; /* their source rows, in element order (malloc'd) */
	uint64_t *off; /* k + 1 byte offsets: row j is [off[j], off[j + 1]) of the payload (malloc'd) */
} array_plan;

static void array_plan_free(array_plan *p)
{
	free(p->src);
	free(p->off);
	*p = (array_plan){ 0 };
}

/* The plan of the k rows src (taken: freed with the plan, also on failure). */
static ovstage_api_status_t array_plan_of(const ovs_layout *l, uint32_t *src, uint32_t k, array_plan *p, char *err,
					  size_t errlen)
{
	*p = (array_plan){ k, src, malloc(((size_t)k + 1) * sizeof *p->off) };
	if (!p->src || !p->off) {
		array_plan_free(p);
		ovs_err_format(err, errlen, "out of memory listing %u array rows", k);
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	p->off[0] = 0;
	for (uint32_t j = 0; j < k; j++) {
		uint64_t len = ovs_layout_array_len(l, src[j]), bytes;
		if (__builtin_mul_overflow(len, (uint64_t)l->elem_bytes, &bytes) ||
		    __builtin_add_overflow(p->off[j], bytes, &p->off[j + 1]) || p->off[j + 1] > (uint64_t)SIZE_MAX / 2) {
			array_plan_free(p);
			ovs_err_format(err, errlen, "%u array rows: their bytes overflow the address space", k);
			return OVSTAGE_ERROR_OUT_OF_MEMORY;
		}
	}
	return OVSTAGE_OK;
}

/* The planned rows, packed into device memory dst on x's device: a host source staged on the host
 * and uploaded once; a CUDA source as one copy when the rows are its own packed bytes in order (also
 * from another device: a peer copy), else by one segment-copy kernel on the column's device. */
static ovstage_api_status_t array_rows_to_device(ovs_exec *x, const ovs_layout *l, const array_plan *p, void *dst,
						 char *err, size_t errlen)
{
	const ovs_memops *ops = ovs_gpu_memops();
	size_t total = (size_t)p->off[p->k];
	const void *base = ovs_layout_contiguous_base(l);
	if (base && !l->mask && !l->index_map) { /* packed rows 0..k-1 of the source: one copy */
		ops->copy(x, dst, base, total);
		return OVSTAGE_OK;
	}
	if (l->host_accessible) {
		unsigned char *h = malloc(total ? total : 1);
		if (!h) {
			ovs_err_format(err, errlen, "out of memory staging %u array rows (%zu bytes)", p->k, total);
			return OVSTAGE_ERROR_OUT_OF_MEMORY;
		}
		for (uint32_t j = 0; j < p->k; j++)
			ovs_layout_copy_array_row(l, p->src[j], h + p->off[j]);
		ops->copy(x, dst, h, total); /* pageable: staged by the driver before it returns */
		free(h);
		return OVSTAGE_OK;
	}
	bool direct = device_reads_source(x, l); /* false: a peer the column's device cannot read */
	const void **at = malloc(((size_t)p->k ? (size_t)p->k : 1) * sizeof *at);
	if (!at) {
		ovs_err_format(err, errlen, "out of memory listing %u array rows", p->k);
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	for (uint32_t j = 0; j < p->k; j++) {
		bool empty = p->off[j + 1] == p->off[j];
		at[j] = empty ? dst : ovs_layout_array_row_base(l, p->src[j]); /* an empty row copies nothing */
		if (!at[j]) {
			free(at);
			ovs_err_format(err, errlen, "array row %u is a strided CUDA tensor, which cannot be gathered on the "
				       "device (pass compact tensors)", p->src[j]);
			return OVSTAGE_ERROR_NOT_SUPPORTED;
		}
	}
	if (direct)
		ops->copy_segments(x, dst, at, p->off, p->k); /* the table is uploaded before it returns */
	else /* one copy per row, staged by the driver: slower, and only without peer access */
		for (uint32_t j = 0; j < p->k; j++)
			ops->copy(x, (unsigned char *)dst + p->off[j], at[j], (size_t)(p->off[j + 1] - p->off[j]));
	free(at);
	return OVSTAGE_OK;
}

/* Array rows on a device: the selected rows packed into one device buffer (array_rows_to_device),
 * one host blob per row at its offset there. The delta takes the row list. */
static ovstage_api_status_t fill_array_delta_dev(ovs_exec *x, ovs_store *store, const ovs_layout *l, row_list *rl,
						 ovs_delta *d, char *err, size_t errlen)
{
	ovstage_api_status_t s = array_delta_begin(rl, d, err, errlen);
	array_plan p = { 0 };
	if (s == OVSTAGE_OK)
		s = array_plan_of(l, selected_sources(l, rl->k), rl->k, &p, err, errlen);
	if (s != OVSTAGE_OK)
		return s;
	size_t total = (size_t)p.off[p.k];
	ovs_buffer *buf = ovs_buffer_new_in(store, x, total ? total : 1);
	if (!buf) {
		ovs_err_format(err, errlen, "out of device memory allocating %zu bytes of array rows on CUDA device %d",
			       total, ovs_gpu_device(x->gpu));
		array_plan_free(&p);
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	s = array_rows_to_device(x, l, &p, buf->data, err, errlen);
	for (uint32_t j = 0; s == OVSTAGE_OK && j < p.k; j++) {
		d->blobs[j] = ovs_blob_new_on((p.off[j + 1] - p.off[j]) / l->elem_bytes, buf, (size_t)p.off[j]);
		if (!d->blobs[j]) {
			ovs_err_format(err, errlen, "out of memory recording array row %u", j);
			s = OVSTAGE_ERROR_OUT_OF_MEMORY;
		}
	}
	ovs_buffer_unref(buf); /* the blobs hold it (a failed delta frees them, and with them the buffer) */
	array_plan_free(&p);
	return s;
}

/* FULL on a device: the producer's managed tensor adopted when it lives on the column's device, else
 * a device buffer filled by device_values. */
static ovstage_api_status_t fill_full_delta_dev(ovs_exec *x, ovs_store *store, write_entry *e, row_list *rl,
						ovs_delta *d, ovs_buffer **spare, char *err, size_t errlen)
{
	const ovs_layout *l = &e->layout;
	size_t bytes = (size_t)rl->k * l->elem_bytes;
	const void *base = ovs_layout_contiguous_base(l);
	d->kind = OVS_DELTA_FULL;
	d->nrows = rl->k;
	row_list_drop_rows(rl);
	if (base && !l->index_map && e->nmanaged == 1 && !e->staging && l->device.device_type == kDLCUDA &&
	    l->device.device_id == ovs_gpu_device(x->gpu)) {
		d->full = ovs_buffer_adopt(store, x, e->managed[0], (void *)(uintptr_t)base, bytes);
		if (d->full) {
			e->managed[0] = NULL; /* ownership moved to the buffer (deleter after the GPU work) */
			return OVSTAGE_OK;
		}
	}
	/* The column's last full buffer that left retention (handoff.h), on this context and of this size:
	 * reused as a pool hit is, the copy below issued on the same engine stream as its earlier users. */
	if (*spare && (*spare)->gpu == x->gpu && (*spare)->capacity == bytes) {
		d->full = *spare;
		*spare = NULL;
	} else {
		d->full = ovs_buffer_new_in(store, x, bytes);
	}
	if (!d->full) {
		ovs_err_format(err, errlen, "out of device memory allocating %zu bytes on CUDA device %d", bytes,
			       ovs_gpu_device(x->gpu));
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	return device_values(x, l, rl->k, NULL, NULL, d->full->data, err, errlen);
}

/* SPARSE on a device: the host row list as on the CPU, the values in device memory. */
static ovstage_api_status_t fill_sparse_delta_dev(ovs_exec *x, ovs_store *store, const ovs_layout *l, row_list *rl,
						  ovs_delta *d, char *err, size_t errlen)
{
	/* rl holds no values: map_rows never gathers on the host for a device column */
	ovstage_api_status_t s = fill_sparse_rows(rl, d, err, errlen);
	if (s != OVSTAGE_OK)
		return s;
	d->values = ovs_delta_array_in(store, x, ((size_t)rl->k ? (size_t)rl->k : 1) * l->elem_bytes, &d->values_buf);
	if (!d->values) {
		ovs_err_format(err, errlen, "out of device memory copying %u rows", rl->k);
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	/* Where the rows are the source positions (a mask through the identity map), the gather reads
	 * them from the device copy the delta keeps for its seal: one upload serves the write, the
	 * seal's apply and its replays (docs/gpu.md). */
	const uint32_t *pos = rl->positions && !l->index_map ? d->rows : NULL;
	const uint32_t *dpos = pos && !l->host_accessible ? ovs_delta_rows_dev(store, x, d) : NULL;
	return device_values(x, l, rl->k, pos, dpos, d->values, err, errlen);
}

/* Phases 2 and 3: the delta of the kind the row list calls for, filled (it takes the list). On
 * failure nothing is left: the list's contents are released with the delta. */
static ovstage_api_status_t make_delta(jobs_worker *w, ovs_exec *x, write_op *op, write_entry *e, uint64_t seq,
				       row_list *rl, ovs_delta **out, char *err, size_t errlen)
{
	/* The column's recycled full delta first (handoff.h): its struct, and its buffer for a full
	 * write of the same size class; else a fresh delta. */
	ovs_delta *d = ovs_handoff_take(&e->col->handoff);
	ovs_buffer *spare = NULL, *taken = NULL; /* taken: the slot's buffer, spare until it is used */
	if (d) {
		spare = taken = d->full;
		d->full = NULL;
	} else if ((d = malloc(sizeof *d))) { /* not calloc: glibc's calloc skips the thread cache */
		memset(d, 0, sizeof *d);
	} else {
		row_list_release(rl);
		ovs_err_format(err, errlen, "out of memory creating a delta");
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	d->ordinal = op->ordinal;
	d->seq = seq; /* the op id: same-ordinal deltas seal in submission order */
	ovstage_api_status_t s;
	switch (choose_delta(e->col, &e->layout, rl)) {
	case ENTRY_ARRAY:
		s = x->gpu ? fill_array_delta_dev(x, &op->st->store, &e->layout, rl, d, err, errlen)
			   : fill_array_delta(&e->layout, rl, d, err, errlen);
		break;
	case ENTRY_FULL:
		s = x->gpu ? fill_full_delta_dev(x, &op->st->store, e, rl, d, &spare, err, errlen)
			   : fill_full_delta(w, &op->st->store, &op->hcopy, e, rl, d, &spare, err, errlen);
		break;
	default:
		s = x->gpu ? fill_sparse_delta_dev(x, &op->st->store, &e->layout, rl, d, err, errlen)
			   : fill_sparse_delta(&op->st->store, &e->layout, rl, d, err, errlen);
		break;
	}
	/* a device buffer from the slot, reused (spare is NULL: d holds it) or not, stops counting as kept */
	if (taken && taken->gpu)
		ovs_gpu_unretain(taken->gpu, taken->capacity, !spare);
	ovs_buffer_unref(spare); /* not used: back to the pool */
	if (s != OVSTAGE_OK) {
		delta_discard(op, d); /* with the rows and values it took (none is a pending copy's dst
		                       * today: device_values defers its copy last; flushed anyway) */
		free(rl->new_map);
		return s;
	}
	*out = d;
	return OVSTAGE_OK;
}

/* The device the entry's column lives on: its schema's, or for a new column its tensors' when they
 * are CUDA tensors (pinned, managed and host tensors make a CPU column). */
static DLDevice entry_device(const write_entry *e)
{
	/* acquire: has_schema publishes the schema's device. */
	if (atomic_load_explicit(&e->col->has_schema, memory_order_acquire))
		return e->col->schema.device;
	if (e->layout.device.device_type == kDLCUDA)
		return e->layout.device;
	return (DLDevice){ kDLCPU, 0 };
}

/* Per-row array tensors on a CUDA device written into a CPU column: every source row (so that the
 * mask or index map still selects among them) packed into scratch memory of their device by one
 * segment copy and downloaded once, after the producer's fence; the layout then reads host tensors
 * over the copy (e->staging holds the tensors, their shapes and the bytes). */
static ovstage_api_status_t stage_rows_to_host(ovs_exec *sx, write_entry *e, char *err, size_t errlen)
{
	ovs_layout *l = &e->layout;
	uint32_t n = l->tensor_count;
	array_plan p;
	ovstage_api_status_t s = array_plan_of(l, identity_rows(n), n, &p, err, errlen);
	if (s != OVSTAGE_OK)
		return s;
	size_t total = (size_t)p.off[n], meta = (size_t)n * (sizeof(DLTensor) + sizeof(int64_t));
	void *scratch = ovs_gpu_alloc(sx->gpu, total ? total : 1);
	e->staging = malloc(meta + (total ? total : 1));
	if (!scratch || !e->staging) {
		ovs_gpu_free(sx->gpu, scratch, total ? total : 1);
		array_plan_free(&p);
		ovs_err_format(err, errlen, "out of memory staging %zu bytes of array rows from CUDA device %d", total,
			       (int)l->device.device_id);
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	DLTensor *ht = e->staging;
	int64_t *shapes = (int64_t *)(void *)(ht + n);
	unsigned char *bytes = (unsigned char *)(shapes + n);
	if (!ovs_gpu_fence_wait(sx, e->fence, err, errlen)) {
		s = OVSTAGE_ERROR_OP_FAILED;
	} else {
		s = array_rows_to_device(sx, l, &p, scratch, err, errlen);
		if (s == OVSTAGE_OK && !ovs_gpu_copy_to_host(sx, bytes, scratch, total, err, errlen))
			s = OVSTAGE_ERROR_OP_FAILED;
		if (s == OVSTAGE_OK && sx->err) {
			ovs_err_format(err, errlen, "packing array rows on CUDA device %d failed (%s)",
				       (int)l->device.device_id, ovs_gpu_error_name(sx->err));
			s = OVSTAGE_ERROR_OP_FAILED;
		}
	}
	ovs_gpu_free(sx->gpu, scratch, total ? total : 1); /* stream-ordered: after the download */
	for (uint32_t r = 0; s == OVSTAGE_OK && r < n; r++) {
		shapes[r] = (int64_t)((p.off[r + 1] - p.off[r]) / l->elem_bytes);
		ovs_tensor_1d(&ht[r], bytes + p.off[r], (DLDevice){ kDLCPU, 0 }, l->dtype, &shapes[r], NULL);
	}
	array_plan_free(&p);
	if (s != OVSTAGE_OK)
		return s;
	l->tensors = ht;
	l->managed_tensors = NULL; /* the entry still owns them (released with the op) */
	l->host_accessible = true;
	return OVSTAGE_OK;
}

/* A CUDA source written into a CPU column: its rows copied to host memory (after the producer's
 * fence), and the layout pointed at the copy. The worker waits for the copy (documented). */
static ovstage_api_status_t stage_to_host(jobs_worker *w, write_op *op, write_entry *e, char *err, size_t errlen)
{
	ovs_layout *l = &e->layout;
	const void *base = ovs_layout_contiguous_base(l);
	if (!base && l->kind != OVS_LAYOUT_ARRAY_PER_ROW) {
		ovs_err_format(err, errlen, "a strided CUDA tensor cannot be written into a CPU column (pass a compact "
			       "tensor)");
		return OVSTAGE_ERROR_NOT_SUPPORTED;
	}
	ovs_exec sx;
	if (!ovs_store_exec_reuse(&op->st->store, &op->devx, l->device, w, &sx, err, errlen))
		return OVSTAGE_ERROR_INVALID_ARGUMENT;
	if (l->kind == OVS_LAYOUT_ARRAY_PER_ROW)
		return stage_rows_to_host(&sx, e, err, errlen);
	/* fixed or packed rows: the whole tensor (row_count rows of row_bytes) in one download */
	size_t bytes = (size_t)l->row_count * l->row_bytes;
	e->staging = malloc(bytes ? bytes : 1);
	if (!e->staging) {
		ovs_err_format(err, errlen, "out of memory staging %zu bytes from CUDA device %d", bytes,
			       (int)l->device.device_id);
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	if (!ovs_gpu_fence_wait(&sx, e->fence, err, errlen) ||
	    !ovs_gpu_copy_to_host(&sx, e->staging, base, bytes, err, errlen))
		return OVSTAGE_ERROR_OP_FAILED;
	l->view.base = e->staging;
	if (l->kind == OVS_LAYOUT_FIXED)
		l->row_base = e->staging;
	l->host_accessible = true;
	return OVSTAGE_OK;
}

/* The context the entry's values are made in (*x), with the producer's fence honoured: a device
 * column's engine stream waits on it; host code that reads the source (a pinned or managed source)
 * waits for it on this worker. Device work of the op is chained onto one stream (op->gx). */
static ovstage_api_status_t entry_exec(jobs_worker *w, write_op *op, write_entry *e, DLDevice dev, ovs_exec **x,
				       char *err, size_t errlen)
{
	static _Thread_local ovs_exec cpu;
	ovs_layout *l = &e->layout;
	ovs_exec ex;
	if (!ovs_store_exec_reuse(&op->st->store, &op->devx, dev, w, &ex, err, errlen))
		return OVSTAGE_ERROR_INVALID_ARGUMENT;
	if (!ex.gpu) {
		cpu = ex;
		*x = &cpu;
		if (!l->host_accessible)
			return stage_to_host(w, op, e, err, errlen);
		return ovs_gpu_fence_sync(e->fence, err, errlen) ? OVSTAGE_OK : OVSTAGE_ERROR_OP_FAILED;
	}
	if (op->gx.gpu && op->gx.gpu != ex.gpu) { /* the op's earlier device work, on another device */
		gx_flush(op); /* the batch belongs to the old stream: launch it there before the switch */
		void *ev = ovs_gpu_record(&op->gx);
		bool ok = ev && ovs_gpu_fence_wait(&ex, ev, err, errlen);
		ovs_gpu_event_release(ev);
		if (!ok)
			return OVSTAGE_ERROR_OP_FAILED;
	}
	if (op->gx.gpu)
		ex.err = op->gx.err; /* an earlier entry's or flush's error stays the op's */
	op->gx = ex;
	op->gx.batch = &op->batch; /* still empty when the device changed (flushed above) */
	*x = &op->gx;
	bool fenced = l->host_accessible ? ovs_gpu_fence_sync(e->fence, err, errlen)
					 : ovs_gpu_fence_wait(&op->gx, e->fence, err, errlen);
	return fenced ? OVSTAGE_OK : OVSTAGE_ERROR_OP_FAILED;
}

/* Applies one entry: checks, then rows (phase 1), then a FULL or SPARSE delta for the column
 * (phases 2 and 3), then publication. */
static ovstage_api_status_t apply_entry(jobs_worker *w, write_op *op, write_entry *e, uint64_t seq, char *err,
					size_t errlen)
{
	ovstage_api_status_t s = op->deferred ? check_deferred(op, e, err, errlen) : OVSTAGE_OK;
	if (s != OVSTAGE_OK)
		return s;
	/* Every check that can refuse the entry runs before anything changes (the schema is installed
	 * by publish_entry, after the delta exists): a refused entry leaves no trace. */
	DLDevice dev = entry_device(e);
	if (e->layout.kind == OVS_LAYOUT_EMPTY)
		return publish_entry(op, e, dev, NULL, false, NULL, err, errlen);
	s = check_schema(op->st, e, err, errlen);
	if (s != OVSTAGE_OK)
		return s;
	s = check_admission(op, e, err, errlen);
	if (s != OVSTAGE_OK)
		return s;
	ovs_exec *x;
	s = entry_exec(w, op, e, dev, &x, err, errlen);
	if (s != OVSTAGE_OK)
		return s;
	row_list rl;
	bool set_prims;
	s = map_rows(w, op, e, !x->gpu, &rl, &set_prims, err, errlen);
	if (s != OVSTAGE_OK)
		return s;
	ovs_delta *d = NULL;
	s = make_delta(w, x, op, e, seq, &rl, &d, err, errlen);
	if (s == OVSTAGE_OK && x->err) {
		delta_discard(op, d);
		free(rl.new_map);
		ovs_err_format(err, errlen, "copying the values on CUDA device %d failed (%s)", ovs_gpu_device(x->gpu),
			       ovs_gpu_error_name(x->err));
		s = OVSTAGE_ERROR_OP_FAILED;
	}
	if (s != OVSTAGE_OK)
		return s;
	return publish_entry(op, e, dev, d, set_prims, rl.new_map, err, errlen);
}

static void write_job_entries(jobs_worker *w, write_op *op, jobs_run *run);

static void write_job(jobs_worker *w, void *arg, jobs_run *run)
{
	write_op *op = arg;
	/* CUDA work sets the thread's device: put it back (inline, this is the caller's thread; in a
	 * 0-worker pool, a waiting thread's). Two cudaGetDevice calls when nothing changed. */
	int dev = op->touches_gpu ? ovs_gpu_thread_device() : -1;
	write_job_entries(w, op, run);
	/* the published deltas' bytes, once for the op (before it completes: ovs_column_push_delta_acc) */
	ovs_unsealed_add(&op->st->store, op->unsealed);
	ovs_gpu_thread_restore(dev);
}

static void write_job_entries(jobs_worker *w, write_op *op, jobs_run *run)
{
	char err[512];
	for (size_t i = 0; i < op->n; i++) {
		ovstage_api_status_t s = apply_entry(w, op, &op->e[i], jobs_run_id(run), err, sizeof err);
		if (s != OVSTAGE_OK) {
			if (op->e[i].created_rows)
				ovs_prims_need_reassert(&op->st->store); /* its rows stay, as holes (never present) */
			/* Not a transaction (as in the anchor): earlier entries stay applied, so their
			 * deferred copies are launched (they are published); then GPU work already issued
			 * may still read the caller's tensors: finish it first. */
			ovs_copy_flush(w, &op->hcopy);
			if (op->gx.gpu) {
				gx_flush(op);
				ovs_gpu_sync(&op->gx);
			}
			ovs_op_fail(run, s, "write_attributes entry %zu: %s", i, err);
			return;
		}
	}
	op->applied_all = true; /* each entry's publish_entry ran ovs_sequencer_applied */
	/* The deferred copies of every entry, in one launch (or one per OVS_COPY_BATCH_MAX); before the
	 * completion is recorded, which is what a seal reading these deltas waits for (docs/gpu.md). A
	 * launch that fails is retried copy by copy, so an error here is a fault of the device: the op
	 * fails as it would for an asynchronous fault of its copies. The host copies of the entries'
	 * full deltas run here too, all at once: before the body returns, which is what a seal reading
	 * these deltas waits for (the same argument as the device's, docs/store.md). */
	ovs_copy_flush(w, &op->hcopy);
	gx_flush(op);
	if (op->gx.gpu && op->gx.err) {
		ovs_gpu_sync(&op->gx);
		ovs_op_fail(run, OVSTAGE_ERROR_OP_FAILED, "write_attributes: copying the values on CUDA device %d "
			    "failed (%s)", ovs_gpu_device(op->gx.gpu), ovs_gpu_error_name(op->gx.err));
		return;
	}
	/* Device work: the receipt completes when it has finished (the caller's tensors are then free). */
	if (op->gx.gpu && !ovs_gpu_complete_after(op->gx.gpu, &op->gx, op->st->sched, run, err, sizeof err)) {
		ovs_gpu_sync(&op->gx);
		ovs_op_fail(run, OVSTAGE_ERROR_OP_FAILED, "write_attributes: %s", err);
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

/* Managed tensors: non-NULL and unique across the batch. Sets the last error on failure. */
static ovstage_api_status_t check_managed_batch(const ovstage_attribute_write_t *writes, size_t write_count)
{
	ovstage_api_status_t s;
	for (size_t i = 0; i < write_count; i++) {
		const ovstage_write_data_t *wd = &writes[i].data;
		if (!wd->managed_tensors)
			continue;
		for (uint32_t t = 0; t < wd->tensor_count; t++) {
			if (!wd->managed_tensors[t]) {
				s = ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "writes[%zu].data.managed_tensors[%u] is NULL",
						i, t);
				return s;
			}
			size_t j;
			uint32_t u;
			if (managed_seen_before(writes, i, t, &j, &u)) {
				s = ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "writes[%zu].data.managed_tensors[%u] is the same "
						"tensor as writes[%zu].data.managed_tensors[%u]", i, t, j, u);
				return s;
			}
		}
	}
	return OVSTAGE_OK;
}

/* CUDA tensors' data must be memory of the device they name (checked at the call: a wrong pointer
 * would otherwise fault a kernel and poison the device context for everyone). One driver query per
 * allocation met (cache: the op's), not per tensor: a step's columns or an array write's rows are
 * usually slices of one buffer. */
static ovstage_api_status_t check_device_tensors(const ovstage_write_data_t *wd, ovs_gpu_ptr_cache *cache,
						 char *err, size_t errlen)
{
	for (uint32_t i = 0; i < wd->tensor_count; i++) {
		const DLTensor *t = wd->managed_tensors ? (wd->managed_tensors[i] ? &wd->managed_tensors[i]->dl_tensor : NULL)
						       : wd->tensors ? &wd->tensors[i] : NULL; /* NULL: the layout refuses it */
		if (!t || t->device.device_type != kDLCUDA || !t->data)
			continue;
		char what[48];
		snprintf(what, sizeof what, "tensors[%u].data", i);
		ovstage_api_status_t s = ovs_gpu_check_pointer(t->data, (int)t->device.device_id, cache, what, err, errlen);
		if (s != OVSTAGE_OK)
			return s;
	}
	return OVSTAGE_OK;
}

/* The entries prepared so far by token, for the duplicate check: a scan of them for a few entries,
 * an open-addressing table (slot = 1 + entry index, 0 = empty) beyond. A 100-column write scanned
 * 4,950 pairs: ~50,000 instructions, a quarter of the write's own cost (bench/stage --only columns). */
#define DUP_SCAN_MAX 8
#define DUP_SMALL_SLOTS 512
typedef struct dup_set {
	uint32_t *slot;       /* NULL: scan */
	size_t mask;          /* slots - 1 (a power of 2 at least twice the entries) */
	uint32_t small[DUP_SMALL_SLOTS];
} dup_set;

static void dup_init(dup_set *d, size_t n)
{
	d->slot = NULL;
	if (n <= DUP_SCAN_MAX)
		return;
	size_t slots = 16;
	while (slots < 2 * n)
		slots *= 2;
	d->slot = slots <= DUP_SMALL_SLOTS ? d->small : malloc(slots * sizeof *d->slot); /* NULL: scan */
	d->mask = slots - 1;
	if (d->slot)
		memset(d->slot, 0, slots * sizeof *d->slot);
}

static void dup_fini(dup_set *d)
{
	if (d->slot != d->small)
		free(d->slot);
}

/* The earlier entry (of 0..i-1, all prepared) that writes t, or i if none; records entry i as t's. */
static size_t dup_find_add(dup_set *d, const write_op *op, ovx_token_t t, size_t i)
{
	if (!d->slot) {
		for (size_t j = 0; j < i; j++)
			if (op->e[j].col->name == t)
				return j;
		return i;
	}
	size_t h = (size_t)((t * 0x9E3779B97F4A7C15ull) >> 32) & d->mask;
	for (;; h = (h + 1) & d->mask) {
		uint32_t v = d->slot[h];
		if (!v) {
			d->slot[h] = (uint32_t)i + 1;
			return i;
		}
		if (op->e[v - 1].col->name == t)
			return v - 1;
	}
}

/* Resolves and checks entry i of a write at the call (name, duplicates, managed tensors, column,
 * host layout and, for a ready query, layout and schema). Sets the last error on failure. */
static ovstage_api_status_t prepare_entry(ovs_stage *st, write_op *op, const ovstage_attribute_write_t *writes,
					  size_t i, dup_set *dups)
{
	ovstage_api_status_t s;
	ovs_query *q = op->q;
	write_entry *e = &op->e[i];
	ovx_token_t t = writes[i].attribute.token;
	if (!t || !ovs_pd_token_is_valid(st->pd, t)) { /* strings, and errors: the slower path */
		char what[64];
		snprintf(what, sizeof what, "writes[%zu].attribute", i);
		s = ovs_resolve_attr(st, writes[i].attribute, false, &t, what);
		if (s != OVSTAGE_OK)
			return s;
	}
	if (ovs_attr_is_derived(st, t)) {
		s = ovs_err_set(OVSTAGE_ERROR_NOT_SUPPORTED, "writes[%zu]: \"%s\" is derived from path structure "
				"and cannot be written", i, ovs_attr_name(st, t));
		return s;
	}
	size_t j = dup_find_add(dups, op, t, i);
	if (j != i) {
		s = ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "writes[%zu] and writes[%zu] both write \"%s\"", j, i,
				ovs_attr_name(st, t));
		return s;
	}
	e->data = writes[i].data;
	if (e->managed)
		e->data.managed_tensors = (const DLManagedTensorVersioned *const *)e->managed;
	else if (writes[i].data.managed_tensors && writes[i].data.tensor_count) {
		s = ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory taking managed tensors");
		return s;
	}
	char err[512];
	/* A new column is only prepared: the sequencer publishes it if the write is admitted. */
	e->col = ovs_column_prepare(&st->store, t);
	if (!e->col) {
		s = ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory creating column \"%s\"",
				ovs_attr_name(st, t));
		return s;
	}
	e->semantic = e->data.semantic;
	s = ovs_layout_check_host(&e->data, err, sizeof err); /* known without the query's prims */
	if (s == OVSTAGE_OK)
		s = check_device_tensors(&e->data, &op->ptrs, err, sizeof err);
	/* The producer's work, snapshotted here: handles 1 and 2 mean the caller's streams. */
	if (s == OVSTAGE_OK)
		s = ovs_gpu_fence_capture(e->data.cuda_sync, &e->fence, err, sizeof err);
	if (s != OVSTAGE_OK) {
		ovs_err_set(s, "writes[%zu] (\"%s\"): %s", i, ovs_attr_name(st, t), err);
		return s;
	}
	if (op->deferred)
		return OVSTAGE_OK; /* layout and schema need the query's count: checked in the op */
	s = ovs_layout_from_write(&e->data, (uint32_t)(q->count > UINT32_MAX ? UINT32_MAX : q->count), &e->layout,
				  err, sizeof err);
	if (s != OVSTAGE_OK) {
		ovs_err_set(s, "writes[%zu] (\"%s\"): %s", i, ovs_attr_name(st, t), err);
		return s;
	}
	/* Schema checks that are provable now (the column may get its schema later). An empty entry
	 * has no dtype to check (see publish_entry). */
	if (e->layout.kind == OVS_LAYOUT_EMPTY) {
		s = OVSTAGE_OK;
	} else if (atomic_load_explicit(&e->col->has_schema, memory_order_acquire)) {
		ovs_column *c = e->col;
		ovstage_attribute_semantic_t sem = e->semantic == OVSTAGE_SEMANTIC_NONE ? c->schema.semantic
											 : e->semantic;
		if (e->semantic == OVSTAGE_SEMANTIC_NONE)
			e->semantic = c->schema.semantic;
		s = schema_matches(st, c, &e->layout, sem, t, err, sizeof err);
		e->schema_ok = s == OVSTAGE_OK;
	} else {
		s = ovs_layout_check_reserved(e->layout.is_array, e->layout.dtype, e->semantic, ovs_attr_name(st, t),
					      err, sizeof err);
	}
	if (s != OVSTAGE_OK) {
		ovs_err_set(s, "writes[%zu]: %s", i, err);
		return s;
	}
	return OVSTAGE_OK;
}

/* Ordinal admission and registration with the sequencer, atomically w.r.t. floor advances. A
 * rejection before the sequencer sets *rejected (the caller still owns op); otherwise the sequencer
 * owns op from here on, accepted or not. */
static ovstage_enqueue_result_t submit_write(ovs_stage *st, write_op *op, size_t write_count,
					     ovstage_ordinal_t ordinal, ovstage_api_status_t *rejected)
{
	ovs_query *q = op->q;
	*rejected = OVSTAGE_OK;
	ovx_token_t *cols = malloc((write_count ? write_count : 1) * sizeof *cols);
	if (!cols) {
		*rejected = ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory preparing a write");
		return ovs_rejected(*rejected);
	}
	/* What the op will copy: fixed rows, except a managed tensor adopted whole (no copy). */
	size_t copy_bytes = 0;
	bool inline_ok = !op->deferred;
	for (size_t i = 0; i < write_count; i++) {
		const write_entry *e = &op->e[i];
		cols[i] = e->col->name;
		if (op->deferred) { /* no layout yet (and not inline: it runs after the query's op) */
			op->touches_gpu |= e->fence || ovs_gpu_available();
			continue;
		}
		bool dev_col = atomic_load_explicit(&e->col->has_schema, memory_order_acquire) &&
			       e->col->schema.device.device_type == kDLCUDA;
		op->touches_gpu |= dev_col || e->layout.device.device_type == kDLCUDA || e->fence;
		if (e->layout.is_array)
			inline_ok = false; /* per-row blobs: cost not known from the layout */
		else if (dev_col && e->layout.device.device_type == kDLCUDA)
			/* device to device: the call only enqueues the copy (the hand-off would cost more)
			 * unless the producer is still running: then the receipt cannot complete before it
			 * does anyway, and a worker has that long to enqueue while the caller goes on (the
			 * enqueue behind a pending event costs the caller several microseconds) */
			inline_ok = inline_ok && !ovs_gpu_fence_pending(e->fence);
		else if (e->layout.device.device_type == kDLCUDA)
			inline_ok = false; /* staged to the host: the worker waits for the copy */
		else if (!(e->nmanaged == 1 && e->layout.contiguous && !e->layout.index_map))
			copy_bytes += (size_t)e->layout.count * e->layout.elem_bytes;
	}
	inline_ok = inline_ok && copy_bytes <= WRITE_INLINE_MAX_BYTES;
	/* Back-pressure, with the columns known: a write that fills a gap of each is admitted. */
	*rejected = ovs_check_unsealed(&st->store, ordinal, cols, write_count);
	if (*rejected != OVSTAGE_OK) {
		free(cols);
		return ovs_rejected(*rejected);
	}
	ovs_column **slots_small[4];
	ovs_column ***slots = write_count <= 4 ? slots_small : malloc(write_count * sizeof *slots);
	if (!slots) {
		free(cols);
		*rejected = ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory preparing a write");
		return ovs_rejected(*rejected);
	}
	for (size_t i = 0; i < write_count; i++)
		slots[i] = &op->e[i].col;
	/* A query still resolving: run after its op (reads of q->paths/count are then ordered). */
	ovs_op_desc d = { .fn = write_job, .arg = op, .cleanup = write_op_free, .after = op->deferred ? &q->op : NULL,
			  .after_count = op->deferred ? 1 : 0, .run_inline = inline_ok };
	ovstage_enqueue_result_t r = ovs_sequencer_submit_mutation(st, ordinal, cols, write_count, slots, &d,
								   &op->inflight);
	if (slots != slots_small)
		free(slots);
	return r;
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
	s = check_managed_batch(writes, write_count);
	if (s != OVSTAGE_OK)
		goto reject_all;
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
	dup_set dups;
	dup_init(&dups, write_count);
	for (size_t i = 0; i < write_count; i++) {
		s = prepare_entry(st, op, writes, i, &dups);
		if (s != OVSTAGE_OK) {
			dup_fini(&dups);
			goto reject_op;
		}
	}
	dup_fini(&dups);
	ovstage_enqueue_result_t r = submit_write(st, op, write_count, ordinal, &s);
	if (s == OVSTAGE_OK)
		return r;
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
