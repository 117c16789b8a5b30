/*
 * cuda_events.c — pooled CUDA events, per device (see cuda_internal.h). Every event of the backend
 * (fences, completions, versions' ready events, map buffers' events) comes from here: creating and
 * destroying one per use costs a driver round trip each time and, on some driver/device
 * combinations, serialises badly across threads (../shared/design/gpu.md 1.2).
 *
 * Reuse is safe once the owner gives an event back: a wait already enqueued on it
 * (cudaStreamWaitEvent) captured the record as of its call, so a later re-record changes nothing
 * for it; the owner gives an event back only when nothing of ours will query or synchronise on it
 * again (a version's ready event when the version is freed: its readers let go of their groups
 * first, which is the read contract).
 *
 * Progress: a mutex per device held for a list push or pop. Not lock-free, deliberately: a take is
 * followed by cudaEventRecord, which takes the driver's own lock, and a lock-free stack would need
 * ABA protection that the mutex makes unnecessary.
 */
#include <pthread.h>
#include <stdlib.h>

#include "cuda_internal.h"

/* Events a device keeps for reuse; beyond this, given-back events are destroyed. */
#define EVENT_POOL_MAX 4096

typedef struct event_pool {
	pthread_mutex_t lock;   /* guards the list and its count */
	ovs_gpu_event *free;    /* events given back, newest first */
	unsigned count;         /* how many */
} event_pool;

static event_pool g_pools[OVS_GPU_MAX_DEVICES];
static pthread_once_t g_pools_once = PTHREAD_ONCE_INIT;

static void pools_init(void)
{
	for (int d = 0; d < OVS_GPU_MAX_DEVICES; d++)
		pthread_mutex_init(&g_pools[d].lock, NULL);
}

/* A new event of device dev (made with dev current; the caller's device is put back). */
static ovs_gpu_event *event_create(int dev)
{
	ovs_gpu_event *e = malloc(sizeof *e);
	if (!e)
		return NULL;
	uint64_t t = ovs_gpu_span_begin();
	int prev;
	cudaError_t r = ovs_gpu_thread_enter(dev, &prev) ? cudaEventCreateWithFlags(&e->ev, cudaEventDisableTiming)
							 : cudaErrorInvalidDevice;
	ovs_gpu_thread_restore(prev);
	ovs_gpu_span_end("event create", t);
	if (r != cudaSuccess) {
		(void)cudaGetLastError();
		free(e);
		return NULL;
	}
	e->dev = dev;
	e->next = NULL;
	return e;
}

ovs_gpu_event *ovs_gpu_event_take(int dev)
{
	if (dev < 0 || dev >= OVS_GPU_MAX_DEVICES)
		return NULL;
	pthread_once(&g_pools_once, pools_init);
	event_pool *p = &g_pools[dev];
	pthread_mutex_lock(&p->lock);
	ovs_gpu_event *e = p->free;
	if (e) {
		p->free = e->next;
		p->count--;
	}
	pthread_mutex_unlock(&p->lock);
	if (!e)
		e = event_create(dev);
	if (e)
		atomic_init(&e->refs, 1); /* the taker's; not yet shared with anyone */
	return e;
}

void ovs_gpu_event_give(ovs_gpu_event *e)
{
	if (!e)
		return;
	pthread_once(&g_pools_once, pools_init);
	event_pool *p = &g_pools[e->dev];
	pthread_mutex_lock(&p->lock);
	bool keep = p->count < EVENT_POOL_MAX;
	if (keep) {
		e->next = p->free;
		p->free = e;
		p->count++;
	}
	pthread_mutex_unlock(&p->lock);
	if (!keep) {
		(void)cudaEventDestroy(e->ev); /* safe while pending: the resources go when it completes */
		free(e);
	}
}

ovs_gpu_event *ovs_gpu_event_record(int dev, cudaStream_t s)
{
	ovs_gpu_event *e = ovs_gpu_event_take(dev);
	if (e && cudaEventRecord(e->ev, s) != cudaSuccess) {
		(void)cudaGetLastError();
		ovs_gpu_event_give(e);
		return NULL;
	}
	return e;
}

void *ovs_gpu_event_ref(void *ev)
{
	/* relaxed: the caller holds a reference, so the event cannot return to the pool meanwhile; the
	 * new holder gets it through whatever publishes it (a version's publication). */
	if (ev)
		atomic_fetch_add_explicit(&((ovs_gpu_event *)ev)->refs, 1, memory_order_relaxed);
	return ev;
}

void ovs_gpu_event_release(void *ev)
{
	/* acq_rel: the last holder's give-back (and the next taker's re-record) comes after every
	 * holder's use of it. */
	ovs_gpu_event *e = ev;
	if (e && atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) == 1)
		ovs_gpu_event_give(e);
}

uintptr_t ovs_gpu_event_handle(const void *ev)
{
	return ev ? (uintptr_t)((const ovs_gpu_event *)ev)->ev : 0;
}
