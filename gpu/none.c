/*
 * none.c — the backend of a build without the CUDA toolkit: CPU-only, with the reason errors quote.
 * Only the availability queries and configuration are reachable (gpu.h: nothing else may be called
 * when ovs_gpu_available() is false); the rest fail safely if called anyway.
 */
#include <string.h>

#include "errors.h"
#include "exec.h"
#include "gpu.h"

void ovs_gpu_configure(bool disable, int64_t pool_mb)
{
	(void)disable;
	(void)pool_mb;
}

bool ovs_gpu_available(void)
{
	return false;
}

const char *ovs_gpu_reason(void)
{
	return "the CUDA backend is not built in (no CUDA toolkit at build time)";
}

int ovs_gpu_device_count(void)
{
	return 0;
}

const struct ovs_memops *ovs_gpu_memops(void)
{
	return NULL;
}

ovs_gpu *ovs_gpu_get(ovs_gpu *_Atomic *slot, jobs_sched *sched, int dev, char *err, size_t errlen)
{
	(void)slot;
	(void)sched;
	ovs_err_format(err, errlen, "CUDA device %d cannot be used: %s", dev, ovs_gpu_reason());
	return NULL;
}

void ovs_gpu_destroy(ovs_gpu *g)
{
	(void)g;
}

void ovs_gpu_exec(ovs_gpu *g, struct ovs_exec *x, jobs_worker *w)
{
	(void)g;
	(void)x;
	(void)w;
}

int ovs_gpu_device(const ovs_gpu *g)
{
	(void)g;
	return -1;
}

void *ovs_gpu_alloc(ovs_gpu *g, size_t bytes)
{
	(void)g;
	(void)bytes;
	return NULL;
}

void ovs_gpu_free(ovs_gpu *g, void *p, size_t bytes)
{
	(void)g;
	(void)p;
	(void)bytes;
}

bool ovs_gpu_retain(ovs_gpu *g, size_t bytes)
{
	(void)g;
	(void)bytes;
	return false;
}

void ovs_gpu_unretain(ovs_gpu *g, size_t bytes, bool reused)
{
	(void)g;
	(void)bytes;
	(void)reused;
}

ovstage_api_status_t ovs_gpu_pool_stats(int dev, ovstage_ext_gpu_pool_stats_t *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof *out);
	ovs_err_format(err, errlen, "CUDA device %d cannot be used: %s", dev, ovs_gpu_reason());
	return OVSTAGE_ERROR_INVALID_ARGUMENT;
}

ovstage_api_status_t ovs_gpu_fence_capture(ovstage_cuda_sync_t sync, void **out, char *err, size_t errlen)
{
	*out = NULL;
	if (!sync.stream && !sync.wait_event)
		return OVSTAGE_OK;
	ovs_err_format(err, errlen, "cuda_sync = {stream 0x%llx, wait_event 0x%llx} names CUDA work, but %s",
		       (unsigned long long)sync.stream, (unsigned long long)sync.wait_event, ovs_gpu_reason());
	return OVSTAGE_ERROR_NOT_SUPPORTED;
}

bool ovs_gpu_fence_wait(struct ovs_exec *x, void *fence, char *err, size_t errlen)
{
	(void)x;
	(void)err;
	(void)errlen;
	return fence == NULL;
}

void ovs_gpu_fence_release(void *fence)
{
	(void)fence;
}

bool ovs_gpu_fence_pending(void *fence)
{
	(void)fence;
	return false;
}

bool ovs_gpu_complete_after(ovs_gpu *g, struct ovs_exec *x, jobs_sched *sched, jobs_run *run, char *err,
			    size_t errlen)
{
	(void)g;
	(void)x;
	(void)sched;
	(void)run;
	ovs_err_format(err, errlen, "%s", ovs_gpu_reason());
	return false;
}

void *ovs_gpu_record(struct ovs_exec *x)
{
	(void)x;
	return NULL;
}

void ovs_gpu_event_release(void *ev)
{
	(void)ev;
}

void *ovs_gpu_event_ref(void *ev)
{
	return ev;
}

bool ovs_gpu_thread_enter(int dev, int *prev)
{
	(void)dev;
	*prev = -1;
	return false;
}

uintptr_t ovs_gpu_event_handle(const void *ev)
{
	(void)ev;
	return 0;
}

void ovs_gpu_after_stream(ovs_gpu *g, void (*fn)(void *), void *arg)
{
	(void)g;
	fn(arg);
}

void ovs_gpu_sched_attach(jobs_sched *sched)
{
	(void)sched;
}

unsigned ovs_gpu_poll(void)
{
	return 0;
}

void ovs_gpu_poll_stats(int dev, uint64_t *resolved, uint64_t *pending)
{
	(void)dev;
	*resolved = *pending = 0;
}

bool ovs_gpu_pci_bus_id(int dev, char *buf, size_t n)
{
	(void)dev;
	if (n)
		buf[0] = 0;
	return false;
}

bool ovs_gpu_fence_sync(void *fence, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	return fence == NULL;
}

ovstage_api_status_t ovs_gpu_check_pointer(const void *p, int dev, ovs_gpu_ptr_cache *cache, const char *what,
					   char *err, size_t errlen)
{
	(void)cache;
	(void)p;
	ovs_err_format(err, errlen, "%s: CUDA device %d cannot be used: %s", what, dev, ovs_gpu_reason());
	return OVSTAGE_ERROR_NOT_SUPPORTED;
}

bool ovs_gpu_copy_to_host(struct ovs_exec *x, void *dst, const void *src, size_t n, char *err, size_t errlen)
{
	(void)x;
	(void)dst;
	(void)src;
	(void)n;
	ovs_err_format(err, errlen, "%s", ovs_gpu_reason());
	return false;
}

const char *ovs_gpu_error_name(int code)
{
	(void)code;
	return "cudaErrorUnknown";
}

void ovs_gpu_sync(struct ovs_exec *x)
{
	(void)x;
}

int ovs_gpu_thread_device(void)
{
	return -1;
}

void ovs_gpu_thread_restore(int dev)
{
	(void)dev;
}

void ovs_gpu_hier_level(struct ovs_exec *x, double *world, const uint32_t *node, const uint32_t *par,
			const unsigned char *hasx, const unsigned char *reset, const double *local, uint32_t n)
{
	(void)world;
	(void)node;
	(void)par;
	(void)hasx;
	(void)reset;
	(void)local;
	(void)n;
	if (!x->err)
		x->err = 999; /* cudaErrorUnknown: never reached (nothing runs on a GPU without the backend) */
}

bool ovs_gpu_peer_enable(int dst, int src)
{
	return dst == src;
}
