/* buffer.c — buffers, the host's memory operations, the size-class pool, row lists (see buffer.h). */
#include "buffer.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "copy.h"
#include "gpu.h"
#include "store.h"

/* ---- live counters (process-wide and per stage; relaxed: statistics only) ---------------------- */

static _Atomic int64_t g_live_versions, g_live_buffers, g_live_buffer_bytes;

void ovs_store_counters(int64_t *versions, int64_t *buffers, int64_t *buffer_bytes)
{
	*versions = atomic_load_explicit(&g_live_versions, memory_order_relaxed);
	*buffers = atomic_load_explicit(&g_live_buffers, memory_order_relaxed);
	*buffer_bytes = atomic_load_explicit(&g_live_buffer_bytes, memory_order_relaxed);
}

void ovs_count_version(int sign)
{
	atomic_fetch_add_explicit(&g_live_versions, sign, memory_order_relaxed);
}

static void count_buffer(ovs_store *st, size_t bytes, int sign)
{
	atomic_fetch_add_explicit(&g_live_buffers, sign, memory_order_relaxed);
	atomic_fetch_add_explicit(&g_live_buffer_bytes, sign * (int64_t)bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&st->mem.buffers, sign, memory_order_relaxed);
	atomic_fetch_add_explicit(&st->mem.buffer_bytes, sign * (int64_t)bytes, memory_order_relaxed);
}

/* ---- the host's memory operations --------------------------------------------------------------- */

#define OVS_MMAP_THRESHOLD ((size_t)1 << 20)

static void *cpu_alloc(void *ctx, size_t bytes)
{
	(void)ctx;
	if (bytes < OVS_MMAP_THRESHOLD)
		return aligned_alloc(64, (bytes + 63) & ~(size_t)63);
	/* Pre-faulted (see ovs_buffer_new). */
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void cpu_free(void *ctx, void *p, size_t bytes)
{
	(void)ctx;
	if (bytes < OVS_MMAP_THRESHOLD)
		free(p);
	else
		munmap(p, bytes);
}

static void cpu_copy(ovs_exec *x, void *dst, const void *src, size_t bytes)
{
	ovs_copy(x ? x->w : NULL, dst, src, bytes);
}

static void cpu_fill(ovs_exec *x, void *dst, int byte, size_t bytes)
{
	(void)x;
	memset(dst, byte, bytes);
}

static void cpu_scatter_rows(ovs_exec *x, void *dst, const uint32_t *rows, uint32_t n, const void *src, size_t rb)
{
	(void)x;
	for (uint32_t i = 0; i < n; i++)
		memcpy((char *)dst + (size_t)rows[i] * rb, (const char *)src + (size_t)i * rb, rb);
}

static void cpu_gather_rows(ovs_exec *x, void *dst, const void *src, const uint32_t *rows, const uint32_t *drows,
			    uint32_t n, size_t rb)
{
	(void)x;
	(void)drows; /* host rows are the rows */
	for (uint32_t i = 0; i < n; i++)
		memcpy((char *)dst + (size_t)i * rb, (const char *)src + (size_t)rows[i] * rb, rb);
}

const ovs_memops ovs_memops_cpu = {
	.name = "cpu",
	.alloc = cpu_alloc,
	.free = cpu_free,
	.copy = cpu_copy,
	.fill = cpu_fill,
	.scatter_rows = cpu_scatter_rows,
	.gather_rows = cpu_gather_rows,
	.scatter_chunked = NULL, /* chunk.c applies host rows itself */
	.gather_chunked = NULL,  /* gather.c copies host rows itself */
	.copy_segments = NULL,   /* write.c copies host array rows itself */
	.copy_device = NULL,     /* device backends only (write.c's device sources) */
	.flush = NULL,           /* nothing is deferred on the CPU */
	.record = NULL, /* synchronous: every operation is complete when it returns */
};

const ovs_memops *ovs_memops_for(DLDevice dev)
{
	if (dev.device_type == kDLCPU)
		return &ovs_memops_cpu;
	return dev.device_type == kDLCUDA && ovs_gpu_available() ? ovs_gpu_memops() : NULL;
}

/* ---- the pool ------------------------------------------------------------------------------------ */

void ovs_pool_init(ovs_pool *p)
{
	memset(p, 0, sizeof *p);
	pthread_mutex_init(&p->lock, NULL);
}

size_t ovs_pool_bytes(ovs_pool *p)
{
	pthread_mutex_lock(&p->lock);
	size_t b = p->bytes;
	pthread_mutex_unlock(&p->lock);
	return b;
}

/* Unlinks b from its class list and the age list. Caller holds the lock. */
static void pool_unlink_locked(ovs_pool *p, ovs_buffer *b)
{
	if (b->pool_prev)
		b->pool_prev->pool_next = b->pool_next;
	else
		p->classes[b->size_class] = b->pool_next;
	if (b->pool_next)
		b->pool_next->pool_prev = b->pool_prev;
	if (b->age_prev)
		b->age_prev->age_next = b->age_next;
	else
		p->newest = b->age_next;
	if (b->age_next)
		b->age_next->age_prev = b->age_prev;
	else
		p->oldest = b->age_prev;
	p->bytes -= b->capacity;
	p->count--;
}

/* Pushes b at the front of its class list and of the age list. Caller holds the lock. */
static void pool_push_locked(ovs_pool *p, ovs_buffer *b)
{
	b->pool_prev = NULL;
	b->pool_next = p->classes[b->size_class];
	if (b->pool_next)
		b->pool_next->pool_prev = b;
	p->classes[b->size_class] = b;
	b->age_prev = NULL;
	b->age_next = p->newest;
	if (p->newest)
		p->newest->age_prev = b;
	else
		p->oldest = b;
	p->newest = b;
	p->bytes += b->capacity;
	p->count++;
}

static void buffer_destroy(ovs_buffer *b)
{
	count_buffer(b->store, b->capacity, -1);
	b->ops->free(b->gpu, b->data, b->capacity);
	free(b);
}

/* A free buffer of class cls, or NULL. */
static ovs_buffer *pool_take(ovs_store *st, uint32_t cls)
{
	ovs_pool *p = &st->pool;
	pthread_mutex_lock(&p->lock);
	ovs_buffer *b = p->classes[cls];
	if (b)
		pool_unlink_locked(p, b);
	pthread_mutex_unlock(&p->lock);
	if (b)
		atomic_store_explicit(&b->refs, 1, memory_order_relaxed); /* ours alone: published by the caller */
	return b;
}

/* Keeps b for reuse, freeing the buffers returned longest ago when the pool would exceed its bound. */
static void pool_give(ovs_store *st, ovs_buffer *b)
{
	ovs_pool *p = &st->pool;
	if (b->capacity > OVS_POOL_MAX_BYTES) {
		buffer_destroy(b);
		return;
	}
	ovs_buffer *evicted = NULL;
	pthread_mutex_lock(&p->lock);
	while (p->bytes + b->capacity > OVS_POOL_MAX_BYTES) {
		ovs_buffer *old = p->oldest;
		pool_unlink_locked(p, old);
		old->pool_next = evicted;
		evicted = old;
	}
	pool_push_locked(p, b);
	pthread_mutex_unlock(&p->lock);
	while (evicted) { /* freed outside the lock: an munmap can take a while */
		ovs_buffer *n = evicted->pool_next;
		buffer_destroy(evicted);
		evicted = n;
	}
}

void ovs_pool_fini(ovs_store *st)
{
	ovs_pool *p = &st->pool;
	while (p->oldest) {
		ovs_buffer *b = p->oldest;
		pool_unlink_locked(p, b);
		buffer_destroy(b);
	}
	pthread_mutex_destroy(&p->lock);
}

/* ---- buffers ------------------------------------------------------------------------------------ */

/* One reference (the caller's), counted live. */
static ovs_buffer *buffer_init(ovs_buffer *b, ovs_store *st, void *data, size_t cap, uint32_t cls,
			       DLManagedTensorVersioned *mt, DLDevice dev, const ovs_memops *ops)
{
	memset(b, 0, sizeof *b);
	atomic_init(&b->refs, 1);
	b->size_class = cls;
	b->capacity = cap;
	b->data = data;
	b->managed = mt;
	b->store = st;
	b->device = dev;
	b->ops = ops;
	count_buffer(st, cap, 1);
	return b;
}

/* Fresh buffers at least this large are faulted by x's workers (ovs_buffer_new_par). */
#define OVS_PAR_FAULT_MIN ((size_t)16 << 20)
#define OVS_PAGE ((size_t)4096)

/* Pages [lo, hi) of a fresh mapping: one store each faults it in (zero-filled by the kernel). */
static void fault_pages(void *ctx, size_t lo, size_t hi)
{
	char *p = ctx;
	for (size_t k = lo; k < hi; k++)
		p[k * OVS_PAGE] = 0;
}

/* A fresh mapping of cap bytes (>= OVS_MMAP_THRESHOLD: cpu_free unmaps it) whose pages x's workers
 * fault in, 256 pages (1 MiB) per range, instead of one thread's MAP_POPULATE; the join orders the
 * faults before the buffer is used. NULL when out of memory. */
static void *map_faulted_par(const ovs_exec *x, size_t cap)
{
	void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	ovs_parallel_for(x, (cap + OVS_PAGE - 1) / OVS_PAGE, 256, 1, fault_pages, p);
	return p;
}

/* A host buffer of at least `bytes`: a free one of the same class first (steady-state writes of a
 * column reuse the buffers of the versions that left retention: no allocator call, no page faults),
 * else a fresh one, faulted by par's workers when par is given, else by cpu_alloc. */
static ovs_buffer *host_buffer_new(ovs_store *st, size_t bytes, const ovs_exec *par)
{
	uint32_t cls = ovs_size_class(bytes);
	ovs_buffer *pooled = pool_take(st, cls);
	if (pooled)
		return pooled; /* already counted live, already faulted */
	size_t cap = ovs_size_class_bytes(cls);
	ovs_buffer *b = malloc(sizeof *b);
	void *p = !b ? NULL : par ? map_faulted_par(par, cap) : ovs_memops_cpu.alloc(NULL, cap);
	if (!p) {
		free(b);
		return NULL;
	}
	return buffer_init(b, st, p, cap, cls, NULL, (DLDevice){ kDLCPU, 0 }, &ovs_memops_cpu);
}

ovs_buffer *ovs_buffer_new(ovs_store *st, size_t bytes)
{
	return host_buffer_new(st, bytes, NULL);
}

ovs_buffer *ovs_buffer_new_par(ovs_store *st, const ovs_exec *x, size_t bytes)
{
	if (!x || !x->w || x->gpu || bytes < OVS_PAR_FAULT_MIN)
		return ovs_buffer_new_in(st, x, bytes);
	return host_buffer_new(st, bytes, x);
}

ovs_buffer *ovs_buffer_new_in(ovs_store *st, const ovs_exec *x, size_t bytes)
{
	if (!x || !x->gpu)
		return ovs_buffer_new(st, bytes);
	ovs_buffer *b = malloc(sizeof *b);
	void *p = b ? ovs_gpu_alloc(x->gpu, bytes) : NULL;
	if (!p) {
		free(b);
		return NULL;
	}
	buffer_init(b, st, p, bytes, UINT32_MAX, NULL, (DLDevice){ kDLCUDA, ovs_gpu_device(x->gpu) }, ovs_gpu_memops());
	b->gpu = x->gpu;
	return b;
}

ovs_buffer *ovs_buffer_adopt(ovs_store *st, const ovs_exec *x, DLManagedTensorVersioned *mt, void *data, size_t bytes)
{
	ovs_buffer *b = malloc(sizeof *b);
	bool dev = x && x->gpu;
	if (b) {
		buffer_init(b, st, data, bytes, UINT32_MAX, mt, mt->dl_tensor.device, dev ? ovs_gpu_memops() : &ovs_memops_cpu);
		b->gpu = dev ? x->gpu : NULL;
	}
	return b;
}

void ovs_managed_delete(void *mt)
{
	DLManagedTensorVersioned *t = mt;
	if (t->deleter)
		t->deleter(t);
}

void ovs_buffer_ref(ovs_buffer *b)
{
	/* relaxed: the caller already holds a reference, so the buffer cannot go away meanwhile. */
	atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
}

void ovs_buffer_unref(ovs_buffer *b)
{
	if (!b)
		return;
	/* acq_rel: the last holder sees all readers' accesses before the memory is reused or released. */
	if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1)
		return;
	if (b->managed) {
		count_buffer(b->store, b->capacity, -1);
		/* exactly once: only the last reference gets here; a device tensor's after the GPU work
		 * issued on the engine stream so far (the last that can read it) */
		if (b->gpu)
			ovs_gpu_after_stream(b->gpu, ovs_managed_delete, b->managed);
		else
			ovs_managed_delete(b->managed);
		free(b);
		return;
	}
	if (b->gpu) { /* the device pool is the pool: a stream-ordered free */
		buffer_destroy(b);
		return;
	}
	pool_give(b->store, b); /* still counted live: pooled memory is retained memory */
}

/* ---- delta arrays ------------------------------------------------------------------------------- */

void *ovs_delta_array(ovs_store *st, size_t bytes, ovs_buffer **buf)
{
	*buf = NULL;
	/* in a buffer also from one chunk up: a block delta's values can then be the chunks (chunk.c) */
	if (bytes < OVS_DELTA_POOLED_MIN && bytes < st->chunk_bytes)
		return malloc(bytes ? bytes : 1);
	*buf = ovs_buffer_new(st, bytes);
	return *buf ? (*buf)->data : NULL;
}

void *ovs_delta_array_in(ovs_store *st, const ovs_exec *x, size_t bytes, ovs_buffer **buf)
{
	if (!x || !x->gpu)
		return ovs_delta_array(st, bytes, buf);
	*buf = ovs_buffer_new_in(st, x, bytes);
	return *buf ? (*buf)->data : NULL;
}

void ovs_delta_array_free(void *p, ovs_buffer *buf)
{
	if (buf)
		ovs_buffer_unref(buf);
	else
		free(p);
}

/* ---- row lists ---------------------------------------------------------------------------------- */

void ovs_rowmap_ref(const ovs_rowmap *m)
{
	ovs_rowmap *w = (ovs_rowmap *)(uintptr_t)m; /* the count is the only mutable field */
	/* relaxed: the caller holds a reference (the query's, or a delta's). */
	atomic_fetch_add_explicit(&w->refs, 1, memory_order_relaxed);
}

void ovs_rowmap_unref(const ovs_rowmap *m)
{
	ovs_rowmap *w = (ovs_rowmap *)(uintptr_t)m;
	/* acq_rel: the last holder sees every reader's accesses before the free. */
	if (w && atomic_fetch_sub_explicit(&w->refs, 1, memory_order_acq_rel) == 1)
		free(w);
}
