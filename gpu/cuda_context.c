/*
 * cuda_context.c — a stage's context on a device (its engine stream), stream-ordered column memory,
 * and completions: events queried by a poll hook that resolves deferred receipts and runs deferred
 * actions (see gpu.h).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cuda_internal.h"
#include "errors.h"
#include "exec.h"

/* ---- contexts ----------------------------------------------------------------------------------- */

/* Frees a block the cache does not keep: stream-ordered, back to CUDA's pool (which returns it to
 * the system at the next synchronisation). */
static void cuda_release(void *ctx, void *p, size_t capacity)
{
	(void)capacity;
	ovs_gpu *g = ctx;
	if (cudaFreeAsync(p, g->stream) != cudaSuccess)
		(void)cudaGetLastError();
}

static pthread_mutex_t g_ctx_lock = PTHREAD_MUTEX_INITIALIZER;

ovs_gpu *ovs_gpu_get(ovs_gpu *_Atomic *slot, jobs_sched *sched, int dev, char *err, size_t errlen)
{
	/* acquire: pairs with the release store below; the context's fields are then initialised. */
	ovs_gpu *g = atomic_load_explicit(slot, memory_order_acquire);
	if (g)
		return g;
	gpu_device_state ds = ovs_gpu_device_state(dev, err, errlen);
	if (!ds.pool)
		return NULL;
	pthread_mutex_lock(&g_ctx_lock);
	g = atomic_load_explicit(slot, memory_order_relaxed);
	if (!g) {
		g = calloc(1, sizeof *g);
		int prev = 0;
		(void)cudaGetDevice(&prev);
		cudaError_t r = g ? cudaSetDevice(dev) : cudaErrorMemoryAllocation;
		/* Blocking (cudaStreamDefault): a consumer on the legacy stream is ordered after it. */
		if (r == cudaSuccess)
			r = cudaStreamCreateWithFlags(&g->stream, cudaStreamDefault);
		(void)cudaSetDevice(prev);
		if (r != cudaSuccess) {
			ovs_err_format(err, errlen, "CUDA device %d: cannot create the engine stream (%s)", dev,
				       cudaGetErrorName(r));
			(void)cudaGetLastError();
			free(g);
			g = NULL;
		} else {
			g->dev = dev;
			g->pool = ds.pool;
			ovs_block_cache_init(&g->cache, ds.budget, cuda_release, g);
			g->sched = sched;
			atomic_init(&g->pending, 0);
			/* release: a thread that sees the pointer sees the fields. */
			atomic_store_explicit(slot, g, memory_order_release);
		}
	}
	pthread_mutex_unlock(&g_ctx_lock);
	return g;
}

int ovs_gpu_device(const ovs_gpu *g)
{
	return g->dev;
}

void ovs_gpu_exec(ovs_gpu *g, ovs_exec *x, jobs_worker *w)
{
	/* Workers own their thread state: the device is set per use (cheap when unchanged). */
	uint64_t t = ovs_gpu_span_begin();
	int cur = -1;
	if (cudaGetDevice(&cur) != cudaSuccess || cur != g->dev)
		(void)cudaSetDevice(g->dev);
	ovs_gpu_span_end("set device", t);
	x->w = w;
	x->stream = g->stream;
	x->event = NULL;
	x->gpu = g;
	x->err = 0;
	x->batch = NULL; /* the op that owns a batch installs it (write.c) */
}

/* A cache hit is reusable at once: every earlier user of the block issued its work on g's engine
 * stream before giving it back (the last reference is dropped after the work that reads it was
 * enqueued), so work issued now runs after it. That is the order cudaFreeAsync relies on too. */
void *ovs_gpu_alloc(ovs_gpu *g, size_t bytes)
{
	void *p = ovs_block_cache_take(&g->cache, bytes);
	if (p)
		return p;
	size_t cap = ovs_block_cache_capacity(g->cache.budget, bytes);
	uint64_t t = ovs_gpu_span_begin();
	cudaError_t r = cudaMallocFromPoolAsync(&p, cap, g->pool, g->stream);
	ovs_gpu_span_end("malloc (cache miss)", t);
	if (r != cudaSuccess) {
		(void)cudaGetLastError();
		return NULL;
	}
	return p;
}

void ovs_gpu_free(ovs_gpu *g, void *p, size_t bytes)
{
	if (p && !ovs_block_cache_give(&g->cache, p, bytes))
		cuda_release(g, p, bytes);
}

bool ovs_gpu_retain(ovs_gpu *g, size_t bytes)
{
	return ovs_block_budget_reserve(g->cache.budget, bytes);
}

void ovs_gpu_unretain(ovs_gpu *g, size_t bytes, bool reused)
{
	ovs_block_budget_unreserve(g->cache.budget, bytes, reused);
}

/* ---- completions ----------------------------------------------------------------------------------
 * Each device has its own poller: items (an event of that device and what to do when it fires) are
 * pushed onto the device's lock-free stack by any thread and drained by one thread at a time (a
 * trylock: other idle workers go on to the next device), which keeps them in arrival order and
 * queries each event; done ones resolve. Devices never share a lock or a list, so two GPUs'
 * completions are polled in parallel and one device's backlog never delays another's. */

typedef struct gpu_item {
	struct gpu_item *next;     /* stack link, then the poller's list */
	ovs_gpu_event *ev;         /* completes the item (pooled) */
	ovs_gpu *g;                /* whose pending count it is (and whose device's poller) */
	jobs_sched *sched;         /* receipt: its scheduler ... */
	jobs_id id;                /* ... and id (JOBS_INVALID_ID: none) */
	void (*fn)(void *);        /* action: run when done (NULL: none) */
	void *arg;                 /* its argument */
} gpu_item;

/* One device's poller. Pushers touch the first line, the poller the second. */
typedef struct gpu_poller {
	_Alignas(64) gpu_item *_Atomic inbox; /* pushed items, newest first */
	_Atomic uint64_t pushed;              /* items ever pushed (statistics; pending = pushed - resolved) */
	_Alignas(64) pthread_mutex_t lock;    /* held by the one thread polling this device */
	gpu_item *list, **tail;               /* the poller's items, oldest first (lock) */
	_Atomic uint64_t resolved;            /* items ever resolved (statistics; written under lock) */
} gpu_poller;

static gpu_poller g_pollers[OVS_GPU_MAX_DEVICES];
static pthread_once_t g_pollers_once = PTHREAD_ONCE_INIT;
static _Atomic uint64_t g_poll_mask;   /* bit d: device d's poller has had items (never cleared) */
static _Atomic unsigned g_outstanding; /* items pushed and not yet resolved, all devices (the hook's report) */

static void pollers_init(void)
{
	for (int d = 0; d < OVS_GPU_MAX_DEVICES; d++) {
		pthread_mutex_init(&g_pollers[d].lock, NULL);
		g_pollers[d].tail = &g_pollers[d].list;
	}
}

static gpu_poller *poller_of(int dev)
{
	pthread_once(&g_pollers_once, pollers_init);
	return &g_pollers[dev];
}

static void push_item(gpu_item *it)
{
	int dev = it->g->dev;
	gpu_poller *p = poller_of(dev);
	atomic_fetch_add_explicit(&it->g->pending, 1, memory_order_relaxed); /* relaxed: a count; destroy
	                                                                        * syncs through the poller's lock */
	atomic_fetch_add_explicit(&g_outstanding, 1, memory_order_relaxed);  /* relaxed: a hint for sleepers */
	atomic_fetch_add_explicit(&p->pushed, 1, memory_order_relaxed);      /* relaxed: statistics */
	/* relaxed: the bit only says where to look; the item itself is published by the CAS below, and a
	 * poller that misses the bit now sees it at its next pass (it is never cleared). */
	if (!(atomic_load_explicit(&g_poll_mask, memory_order_relaxed) & (1ull << dev)))
		atomic_fetch_or_explicit(&g_poll_mask, 1ull << dev, memory_order_relaxed);
	jobs_sched *sched = it->sched; /* read before the push: a poller may resolve and free it at once */
	gpu_item *head = atomic_load_explicit(&p->inbox, memory_order_relaxed);
	do
		it->next = head;
	/* release: the poller that takes the stack sees the item's fields. */
	while (!atomic_compare_exchange_weak_explicit(&p->inbox, &head, it, memory_order_release, memory_order_relaxed));
	if (sched) {
		uint64_t t = ovs_gpu_span_begin();
		jobs_kick(sched); /* sleeping workers poll soon */
		ovs_gpu_span_end("kick", t);
	}
}

static void resolve(gpu_poller *p, gpu_item *it, cudaError_t r)
{
	if (it->id != JOBS_INVALID_ID) {
		char msg[200];
		if (r == cudaSuccess)
			jobs_complete(it->sched, it->id, 0, NULL);
		else {
			ovs_err_format(msg, sizeof msg, "GPU work of the op failed: %s (%s)", cudaGetErrorName(r),
				       cudaGetErrorString(r));
			jobs_complete(it->sched, it->id, OVSTAGE_ERROR_OP_FAILED, msg);
		}
	}
	if (it->fn)
		it->fn(it->arg); /* deleters run even after a GPU fault: the memory is no longer read */
	ovs_gpu_event_give(it->ev);
	atomic_fetch_sub_explicit(&it->g->pending, 1, memory_order_relaxed);
	/* Only the holder of p->lock writes it: a plain increment (relaxed load and store; the lock orders
	 * successive holders, and ovs_gpu_poll_stats reads it unlocked as a statistic). */
	atomic_store_explicit(&p->resolved, atomic_load_explicit(&p->resolved, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	atomic_fetch_sub_explicit(&g_outstanding, 1, memory_order_relaxed);
	free(it);
}

/* One pass over device p's items (p->lock held). */
static void poll_locked(gpu_poller *p)
{
	/* acquire: pairs with the pushers' release CAS; their items' fields are visible. */
	gpu_item *s = atomic_exchange_explicit(&p->inbox, NULL, memory_order_acquire), *rev = NULL;
	while (s) { /* newest first -> oldest first */
		gpu_item *n = s->next;
		s->next = rev;
		rev = s;
		s = n;
	}
	if (rev) {
		*p->tail = rev;
		while (rev->next)
			rev = rev->next;
		p->tail = &rev->next;
	}
	uint64_t t = ovs_gpu_span_begin();
	unsigned done = 0;
	gpu_item **pp = &p->list;
	while (*pp) {
		gpu_item *it = *pp;
		cudaError_t r = cudaEventQuery(it->ev->ev);
		if (r == cudaErrorNotReady) {
			pp = &it->next;
			continue;
		}
		if (r != cudaSuccess)
			(void)cudaGetLastError();
		*pp = it->next;
		if (!*pp)
			p->tail = pp;
		resolve(p, it, r);
		done++;
	}
	if (done) /* passes that resolved nothing are not traced: idle workers make one every 4 us */
		ovs_gpu_span_end("poll (resolved)", t);
}

/* Polls every device that has had items: blocking (lock) or skipping a device another thread
 * is polling (trylock). */
static void poll_devices(bool wait)
{
	/* relaxed: see push_item; a bit set after this load belongs to an item the next pass finds. */
	uint64_t mask = atomic_load_explicit(&g_poll_mask, memory_order_relaxed);
	while (mask) {
		gpu_poller *p = poller_of(__builtin_ctzll(mask));
		mask &= mask - 1;
		if (wait)
			pthread_mutex_lock(&p->lock);
		else if (pthread_mutex_trylock(&p->lock) != 0)
			continue;
		poll_locked(p);
		pthread_mutex_unlock(&p->lock);
	}
}

unsigned ovs_gpu_poll(void)
{
	poll_devices(true);
	return atomic_load_explicit(&g_outstanding, memory_order_relaxed);
}

void ovs_gpu_poll_stats(int dev, uint64_t *resolved, uint64_t *pending)
{
	gpu_poller *p = poller_of(dev);
	/* relaxed: statistics, exact when no op runs; read apart, so pending is clamped at 0. */
	uint64_t done = atomic_load_explicit(&p->resolved, memory_order_relaxed);
	uint64_t pushed = atomic_load_explicit(&p->pushed, memory_order_relaxed);
	*resolved = done;
	*pending = pushed > done ? pushed - done : 0;
}

/* The job system's idle-time hook: each device polled by one thread at a time; the others skip it. */
static unsigned poll_hook(void *ctx)
{
	(void)ctx;
	/* relaxed: a hint; a late push kicks the workers itself. */
	if (!atomic_load_explicit(&g_outstanding, memory_order_relaxed))
		return 0;
	poll_devices(false);
	return atomic_load_explicit(&g_outstanding, memory_order_relaxed);
}

/* Rate-limited: one caller at a time, calls at least this far apart. Every CUDA call takes the
 * driver's context lock; idle workers querying events back to back would contend with the threads
 * issuing work. */
#define POLL_INTERVAL_NS 4000u

void ovs_gpu_sched_attach(jobs_sched *sched)
{
	(void)jobs_add_poll_hook_rate(sched, poll_hook, NULL, POLL_INTERVAL_NS, NULL);
}

/* The event is of x's device, whatever device the calling thread has current (an op that moved on
 * to another device records its earlier device's work this way). */
void *ovs_gpu_record(ovs_exec *x)
{
	ovs_cuda_batch_flush(x); /* "the work issued so far" includes the deferred copies */
	return ovs_gpu_event_record(x->gpu->dev, (cudaStream_t)x->stream);
}

bool ovs_gpu_fence_wait(ovs_exec *x, void *fence, char *err, size_t errlen)
{
	if (!fence)
		return true;
	uint64_t t = ovs_gpu_span_begin();
	cudaError_t r = cudaStreamWaitEvent((cudaStream_t)x->stream, ((ovs_gpu_event *)fence)->ev, 0);
	ovs_gpu_span_end("stream wait event", t);
	if (r == cudaSuccess)
		return true;
	(void)cudaGetLastError();
	ovs_err_format(err, errlen, "cannot wait for the producer's CUDA work (%s)", cudaGetErrorName(r));
	return false;
}

bool ovs_gpu_complete_after(ovs_gpu *g, ovs_exec *x, jobs_sched *sched, jobs_run *run, char *err, size_t errlen)
{
	ovs_cuda_batch_flush(x); /* the completion must follow the deferred copies too */
	gpu_item *it = calloc(1, sizeof *it);
	uint64_t t = ovs_gpu_span_begin();
	ovs_gpu_event *ev = it ? ovs_gpu_event_record(g->dev, (cudaStream_t)x->stream) : NULL;
	ovs_gpu_span_end("event record", t);
	if (!ev) {
		free(it);
		ovs_err_format(err, errlen, "cannot record the completion of the op's GPU work");
		return false;
	}
	jobs_id id = jobs_job_defer(run);
	if (id == JOBS_INVALID_ID) { /* the body already failed: nothing to defer */
		ovs_gpu_event_give(ev);
		free(it);
		return true;
	}
	*it = (gpu_item){ .ev = ev, .g = g, .sched = sched, .id = id };
	push_item(it);
	return true;
}

void ovs_gpu_after_stream(ovs_gpu *g, void (*fn)(void *), void *arg)
{
	gpu_item *it = calloc(1, sizeof *it);
	ovs_gpu_event *ev = it ? ovs_gpu_event_record(g->dev, g->stream) : NULL;
	if (!ev) {
		free(it);
		(void)cudaStreamSynchronize(g->stream); /* last resort: correct, only slower */
		(void)cudaGetLastError();
		fn(arg);
		return;
	}
	*it = (gpu_item){ .ev = ev, .g = g, .sched = g->sched, .id = JOBS_INVALID_ID, .fn = fn, .arg = arg };
	push_item(it);
}

void ovs_gpu_destroy(ovs_gpu *g)
{
	if (!g)
		return;
	(void)cudaStreamSynchronize(g->stream);
	(void)cudaGetLastError();
	/* Every event of g is complete now: one locked pass of its device's poller resolves them (more
	 * may come from other stages' items, which stay). relaxed: the poller's mutex orders the
	 * count's updates. */
	gpu_poller *p = poller_of(g->dev);
	while (atomic_load_explicit(&g->pending, memory_order_relaxed) > 0) {
		pthread_mutex_lock(&p->lock);
		poll_locked(p);
		pthread_mutex_unlock(&p->lock);
	}
	ovs_block_cache_drain(&g->cache); /* stream-ordered frees, done before the stream goes */
	(void)cudaStreamSynchronize(g->stream);
	(void)cudaGetLastError();
	(void)cudaStreamDestroy(g->stream);
	free(g);
}

bool ovs_gpu_fence_pending(void *fence)
{
	if (!fence)
		return false;
	cudaError_t r = cudaEventQuery(((ovs_gpu_event *)fence)->ev);
	if (r != cudaSuccess && r != cudaErrorNotReady)
		(void)cudaGetLastError();
	return r == cudaErrorNotReady;
}

bool ovs_gpu_fence_sync(void *fence, char *err, size_t errlen)
{
	if (!fence)
		return true;
	uint64_t t = ovs_gpu_span_begin();
	cudaError_t r = cudaEventSynchronize(((ovs_gpu_event *)fence)->ev);
	ovs_gpu_span_end("event synchronize", t);
	if (r == cudaSuccess)
		return true;
	(void)cudaGetLastError();
	ovs_err_format(err, errlen, "waiting for the producer's CUDA work failed (%s)", cudaGetErrorName(r));
	return false;
}

/* The driver's cuMemGetAddressRange (the runtime has no equivalent), through the runtime's entry
 * point query so that libcuda is never linked; NULL where it cannot be had (then nothing is cached). */
typedef int (*address_range_fn)(unsigned long long *base, size_t *size, unsigned long long ptr);
static address_range_fn g_address_range;
static pthread_once_t g_address_range_once = PTHREAD_ONCE_INIT;

static void address_range_init(void)
{
	void *fn = NULL;
	enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
	if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
	    q == cudaDriverEntryPointSuccess)
		memcpy(&g_address_range, &fn, sizeof fn); /* POSIX: object and function pointers convert */
	else
		(void)cudaGetLastError();
}

/* Remembers the allocation of p, memory device dev can read, in c (if it can be found). */
static void cache_allocation(ovs_gpu_ptr_cache *c, const void *p, int dev)
{
	pthread_once(&g_address_range_once, address_range_init);
	unsigned long long base = 0;
	size_t size = 0;
	if (!c || !g_address_range || g_address_range(&base, &size, (unsigned long long)(uintptr_t)p) != 0 || !size)
		return;
	*c = (ovs_gpu_ptr_cache){ (uintptr_t)base, (uintptr_t)base + size, dev };
}

ovstage_api_status_t ovs_gpu_check_pointer(const void *p, int dev, ovs_gpu_ptr_cache *cache, const char *what,
					   char *err, size_t errlen)
{
	uintptr_t u = (uintptr_t)p;
	if (cache && cache->end && cache->dev == dev && u >= cache->base && u < cache->end)
		return OVSTAGE_OK; /* inside an allocation already accepted for dev: the same answer */
	struct cudaPointerAttributes a;
	uint64_t t = ovs_gpu_span_begin();
	cudaError_t r = cudaPointerGetAttributes(&a, p);
	ovs_gpu_span_end("pointer attributes", t);
	if (r != cudaSuccess) {
		(void)cudaGetLastError();
		ovs_err_format(err, errlen, "%s = %p is not CUDA memory (%s)", what, p, cudaGetErrorName(r));
		return OVSTAGE_ERROR_INVALID_ARGUMENT;
	}
	if (a.type == cudaMemoryTypeManaged) {
		cache_allocation(cache, p, dev);
		return OVSTAGE_OK;
	}
	if (a.type != cudaMemoryTypeDevice) {
		ovs_err_format(err, errlen, "%s = %p is %s memory, not memory of CUDA device %d", what, p,
			       a.type == cudaMemoryTypeHost ? "pinned host" : "unregistered host", dev);
		return OVSTAGE_ERROR_INVALID_ARGUMENT;
	}
	if (a.device != dev) {
		ovs_err_format(err, errlen, "%s = %p is memory of CUDA device %d, but the tensor says device %d", what,
			       p, a.device, dev);
		return OVSTAGE_ERROR_INVALID_ARGUMENT;
	}
	cache_allocation(cache, p, dev);
	return OVSTAGE_OK;
}

bool ovs_gpu_copy_to_host(ovs_exec *x, void *dst, const void *src, size_t n, char *err, size_t errlen)
{
	ovs_cuda_batch_flush(x); /* src may be a pending copy's dst */
	cudaStream_t s = (cudaStream_t)x->stream;
	uint64_t t = ovs_gpu_span_begin();
	cudaError_t r = n ? cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, s) : cudaSuccess;
	if (r == cudaSuccess)
		r = cudaStreamSynchronize(s);
	ovs_gpu_span_end("copy to host (synchronous)", t);
	if (r == cudaSuccess)
		return true;
	(void)cudaGetLastError();
	ovs_err_format(err, errlen, "copying %zu bytes from CUDA device %d to the host failed (%s)", n,
		       x->gpu ? x->gpu->dev : -1, cudaGetErrorName(r));
	return false;
}

const char *ovs_gpu_error_name(int code)
{
	return cudaGetErrorName((cudaError_t)code);
}

void ovs_gpu_sync(ovs_exec *x)
{
	ovs_cuda_batch_flush(x); /* a failed op's published entries keep their copies */
	uint64_t t = ovs_gpu_span_begin();
	cudaError_t r = cudaStreamSynchronize((cudaStream_t)x->stream);
	ovs_gpu_span_end("stream synchronize", t);
	if (r != cudaSuccess)
		(void)cudaGetLastError();
}

int ovs_gpu_thread_device(void)
{
	int d = -1;
	if (cudaGetDevice(&d) != cudaSuccess) {
		(void)cudaGetLastError();
		return -1;
	}
	return d;
}

void ovs_gpu_thread_restore(int dev)
{
	int cur = -1;
	if (dev >= 0 && (cudaGetDevice(&cur) != cudaSuccess || cur != dev) && cudaSetDevice(dev) != cudaSuccess)
		(void)cudaGetLastError();
}

bool ovs_gpu_thread_enter(int dev, int *prev)
{
	*prev = ovs_gpu_thread_device();
	if (*prev == dev)
		return true;
	if (cudaSetDevice(dev) == cudaSuccess)
		return true;
	(void)cudaGetLastError();
	return false;
}
