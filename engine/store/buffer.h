/*
 * buffer.h — column memory: reference-counted buffers on a device, the memory operations each device
 * provides, the per-stage pool of free buffers, and reference-counted row lists.
 *
 * Contract
 *  - A buffer is `capacity` bytes of memory on one device (`device`, operated on through `ops`),
 *    shared by the versions, chunks, deltas and read groups that hold a reference. The last
 *    reference returns it to its stage's pool or frees it (an adopted producer tensor: its deleter
 *    runs, exactly once).
 *  - Everything *about* the rows stays host metadata whatever the device: row lists, presence
 *    bitmaps, chunk tables and runs. Only the bytes of the values live in buffers.
 *  - The pool is keyed by (device, size class). A request is rounded up to its class (at most 19 %
 *    more: four classes per doubling), so writes of slightly different sizes share free buffers. The
 *    pool holds at most OVS_POOL_MAX_BYTES; when a returned buffer would exceed it, the buffers
 *    returned longest ago are freed first (a pool that only refused newcomers filled up with sizes
 *    nobody asked for again, and every later request then mapped and faulted fresh memory).
 *
 * Thread safety: every function may be called from any thread. Reference counts are atomic; the
 * pool is guarded by one mutex per stage held for O(1) list operations (the free itself, an munmap,
 * runs outside it).
 */
#ifndef OVSTAGE_ENGINE_BUFFER_H
#define OVSTAGE_ENGINE_BUFFER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ovstage/ovstage.h>

#include "exec.h"
#include "size_class.h"

typedef struct ovs_store ovs_store;
typedef struct ovs_buffer ovs_buffer;

/* What a device must provide for column memory. All sizes in bytes; pointers are device pointers.
 * Copies and fills may be asynchronous on a device with streams: `record` then returns a fence in
 * *out (the CPU's operations complete in the call and record nothing). */
typedef struct ovs_memops {
	const char *name;                                          /* "cpu", "cuda" */
	void *(*alloc)(void *ctx, size_t bytes);                   /* fresh memory, or NULL (ctx: the
	                                                            * device context, NULL on the CPU) */
	void (*free)(void *ctx, void *p, size_t bytes);            /* memory from alloc */
	void (*copy)(ovs_exec *x, void *dst, const void *src, size_t bytes); /* within the device */
	/* As copy, for a src that is device memory of x's device (kernel-readable) and a dst that nothing
	 * reads before x's next flush: a small copy may wait in x->batch for that flush (one launch for
	 * many). NULL on the CPU. */
	void (*copy_device)(ovs_exec *x, void *dst, const void *src, size_t bytes);
	/* Issues x->batch's pending copies (one kernel launch per OVS_COPY_BATCH_MAX); nothing when x has
	 * no batch or it is empty. A failure lands in x->err. NULL on the CPU. */
	void (*flush)(ovs_exec *x);
	void (*fill)(ovs_exec *x, void *dst, int byte, size_t bytes);
	/* dst row rows[i] = src row i, for i < n, rows of rb bytes */
	void (*scatter_rows)(ovs_exec *x, void *dst, const uint32_t *rows, uint32_t n, const void *src, size_t rb);
	/* dst row i = src row rows[i], for i < n. drows: the same list in memory of x's device, or NULL
	 * (a device backend then uploads rows for the call; the CPU ignores it). */
	void (*gather_rows)(ovs_exec *x, void *dst, const void *src, const uint32_t *rows, const uint32_t *drows,
			    uint32_t n, size_t rb);
	/* Row rows[i] of a chunked column = src row i, where row r lives at bases[r >> shift] +
	 * (r & (2^shift - 1)) * rb; rows of a chunk whose base is NULL are skipped. drows as for
	 * gather_rows (a delta's rows kept on the device: ovs_delta_rows_dev). Device backends only (the
	 * CPU's seal applies rows with its own loops); NULL on the CPU. */
	void (*scatter_chunked)(ovs_exec *x, void *const *bases, uint32_t nbases, uint32_t shift, const uint32_t *rows,
				const uint32_t *drows, uint32_t n, const void *src, size_t rb);
	/* dst row i = row rows[i] of a chunked column (addressed as for scatter_chunked), for i < n; rows
	 * equal to UINT32_MAX, and rows of a chunk whose base is NULL, are skipped (dst keeps its bytes).
	 * Device backends only (gather.c copies host rows itself); NULL on the CPU. */
	void (*gather_chunked)(ovs_exec *x, void *dst, void *const *bases, uint32_t nbases, uint32_t shift,
			       const uint32_t *rows, uint32_t n, size_t rb);
	/* dst bytes [off[i], off[i + 1]) = the bytes at src[i], for i < n (ragged rows packed into one
	 * buffer: an array write's rows; every src[i] device memory x's device can read). Device backends
	 * only (the CPU's array rows are copied by the writer); NULL on the CPU. */
	void (*copy_segments)(ovs_exec *x, void *dst, const void *const *src, const uint64_t *off, uint32_t n);
	/* NULL on synchronous devices; else records the completion of the work issued so far on x. */
	bool (*record)(ovs_exec *x, void **out_fence);
} ovs_memops;

/* The host's operations (copies split across workers above copy.c's threshold). */
extern const ovs_memops ovs_memops_cpu;

/* The operations for a device, or NULL if this build has none for it. */
const ovs_memops *ovs_memops_for(DLDevice dev);

struct ovs_buffer {
	_Atomic uint32_t refs;             /* holders; at zero, back to the pool or freed */
	uint32_t size_class;               /* pool class (UINT32_MAX: adopted, never pooled) */
	size_t capacity;                   /* bytes available at data */
	void *data;                        /* the memory (a device pointer for non-CPU devices) */
	DLManagedTensorVersioned *managed; /* adopted producer tensor (deleter runs at free), or NULL */
	ovs_store *store;                  /* whose pool and counters it belongs to */
	DLDevice device;                   /* where data lives */
	const ovs_memops *ops;             /* how to operate on it */
	struct ovs_gpu *gpu;               /* device buffers: the stage's context on the device (its
	                                    * engine stream orders the free); NULL on the host */
	ovs_buffer *pool_next, *pool_prev; /* pooled: links in its class list (newest first) */
	ovs_buffer *age_next, *age_prev;   /* pooled: links in the pool's age list (newest first) */
};

/* Free buffers a stage keeps for reuse. Classes are indexed by ovs_size_class (size_class.h). */
#define OVS_POOL_CLASSES OVS_SIZE_CLASSES
#define OVS_POOL_MAX_BYTES ((size_t)1 << 30)

typedef struct ovs_pool {
	pthread_mutex_t lock;                       /* guards everything below */
	ovs_buffer *classes[OVS_POOL_CLASSES];      /* free buffers per class, newest first (CPU) */
	ovs_buffer *newest, *oldest;                /* the age list of all pooled buffers */
	size_t bytes;                               /* their capacity in total (<= OVS_POOL_MAX_BYTES) */
	size_t count;                               /* entries */
} ovs_pool;

/* Per-stage memory counters (relaxed: statistics, exact when quiescent). */
typedef struct ovs_mem_counters {
	_Atomic int64_t buffer_bytes;  /* live buffers' capacity, pooled ones included */
	_Atomic int64_t buffers;       /* live buffers, pooled ones included */
} ovs_mem_counters;

void ovs_pool_init(ovs_pool *p);
/* Bytes of free buffers pooled now. */
size_t ovs_pool_bytes(ovs_pool *p);
/* Frees every pooled buffer (destroy). */
void ovs_pool_fini(ovs_store *st);

/* A buffer of at least `bytes` on the host, one reference: from the pool when its class has one
 * (no allocator call, no page faults), else fresh (>= 1 MiB: mapped and pre-faulted, because copying
 * into memory that is not yet faulted runs several times slower, and the faults would land on the
 * writer). NULL when out of memory. */
ovs_buffer *ovs_buffer_new(ovs_store *st, size_t bytes);
/* A buffer of at least `bytes` where x issues its work: device memory of x's device (stream-ordered
 * on its engine stream; not pooled here — the device's memory pool is the pool), or the host's as
 * ovs_buffer_new when x is a CPU context. NULL when out of memory. */
ovs_buffer *ovs_buffer_new_in(ovs_store *st, const ovs_exec *x, size_t bytes);
/* As ovs_buffer_new_in, but a fresh host buffer of 16 MiB or more is faulted in by x's workers in
 * parallel (its pages touched across them) rather than by MAP_POPULATE on one thread: for the large
 * buffers that an op or a seal fills at once. NULL when out of memory. */
ovs_buffer *ovs_buffer_new_par(ovs_store *st, const ovs_exec *x, size_t bytes);
/* A buffer viewing a producer's tensor (zero-copy); its deleter runs when the last holder lets go —
 * for a device tensor (x a device context), after the GPU work issued on x's stream until then. */
ovs_buffer *ovs_buffer_adopt(ovs_store *st, const ovs_exec *x, DLManagedTensorVersioned *mt, void *data,
			     size_t bytes);
/* Runs a managed tensor's deleter, if it has one (a void * argument: usable as ovs_gpu_after_stream's
 * action). The caller owns the tensor and calls this once. */
void ovs_managed_delete(void *mt);
void ovs_buffer_ref(ovs_buffer *b);
void ovs_buffer_unref(ovs_buffer *b);

/* Memory for a delta's rows or values: malloc'd when small, else a pooled buffer (*buf set; large
 * per-step deltas then reuse already-faulted memory). Release with ovs_delta_array_free, or keep buf
 * in the delta's rows_buf / values_buf. */
#define OVS_DELTA_POOLED_MIN ((size_t)64 << 10)
void *ovs_delta_array(ovs_store *st, size_t bytes, ovs_buffer **buf);
/* The same where x issues its work: on a device, always a device buffer (*buf set). */
void *ovs_delta_array_in(ovs_store *st, const ovs_exec *x, size_t bytes, ovs_buffer **buf);
void ovs_delta_array_free(void *p, ovs_buffer *buf);

/* Process-wide counts of live versions, buffers and buffer bytes (soak tests, diagnostics). */
void ovs_store_counters(int64_t *versions, int64_t *buffers, int64_t *buffer_bytes);
/* Versions are counted by version.c through this. */
void ovs_count_version(int sign);

/* ---- row lists ---------------------------------------------------------------------------------
 * A query's row map for one column: the row of each of its prims. Immutable once built, reference-
 * counted: the query holds one reference, and every delta that borrows its rows as its row list holds
 * another, so the rows outlive a query released before the seal. */
/* A span of a row map that is one block of rows: prims [elem, next piece's elem) are rows
 * [row, row + their count). */
typedef struct ovs_rowmap_piece {
	uint32_t elem;                /* first prim (query position) of the span */
	uint32_t row;                 /* its row */
} ovs_rowmap_piece;

/* A row map of at most this many blocks lists them (ovs_rowmap.pieces): a read then hands out one
 * view per block and run, with no index maps and no per-prim work (producers' slices of one query). */
#define OVS_ROWMAP_PIECES 32

typedef struct ovs_rowmap {
	_Atomic uint32_t refs;        /* the query's, plus deltas that borrow rows (ovs_rowmap_ref) */
	const struct ovs_column *col; /* the column it maps into */
	uint32_t n;                   /* prims (= query count) */
	bool identity;                /* rows[i] == i for all i: the query is the column's row order */
	bool sorted;                  /* rows strictly increasing (set by ovs_query_rowmap_install) */
	bool contig;                  /* rows[i] == rows[0] + i: one block of the column (likewise) */
	uint32_t npieces;             /* entries in pieces; 0: more blocks than OVS_ROWMAP_PIECES (likewise) */
	uint32_t max_row;             /* the highest row in rows (likewise; 0 when n is 0) */
	ovs_rowmap_piece pieces[OVS_ROWMAP_PIECES]; /* its blocks, in prim order (likewise) */
	uint32_t rows[];              /* row of prim i */
} ovs_rowmap;

void ovs_rowmap_ref(const ovs_rowmap *m);
void ovs_rowmap_unref(const ovs_rowmap *m);

#endif /* OVSTAGE_ENGINE_BUFFER_H */
