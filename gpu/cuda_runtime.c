/*
 * cuda_runtime.c — whether this process can use CUDA (decided once), the per-device process state
 * (memory pool, fence stream), and fences captured from a caller's cuda_sync (see gpu.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cuda_internal.h"
#include "errors.h"

/* ---- the decision ------------------------------------------------------------------------------ */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_cfg_lock = PTHREAD_MUTEX_INITIALIZER;
static bool g_cfg_disable;          /* from the config entry (under g_cfg_lock until decided) */
static int64_t g_cfg_pool_mb = 256; /* likewise */
static bool g_decided;              /* under g_cfg_lock: configure calls after this are ignored */
static bool g_avail;                /* written once in decide(), read after pthread_once */
static int g_ndev;                  /* likewise */
static int64_t g_pool_mb;           /* likewise */
static char g_reason[200];          /* likewise */

void ovs_gpu_configure(bool disable, int64_t pool_mb)
{
	pthread_mutex_lock(&g_cfg_lock);
	if (!g_decided) {
		g_cfg_disable = disable;
		g_cfg_pool_mb = pool_mb;
	}
	pthread_mutex_unlock(&g_cfg_lock);
}

/* OVSTAGE_DISABLE_GPU: unset or empty = the config's choice; "0" = enabled; anything else = CPU-only. */
static bool env_disable(bool dflt)
{
	const char *v = getenv("OVSTAGE_DISABLE_GPU");
	if (!v || !*v)
		return dflt;
	return strcmp(v, "0") != 0;
}

static int64_t env_pool_mb(int64_t dflt)
{
	const char *v = getenv("OVSTAGE_GPU_POOL_MB");
	if (!v || !*v)
		return dflt;
	char *end;
	errno = 0;
	long long x = strtoll(v, &end, 10);
	return errno || *end ? dflt : x;
}

static void decide(void)
{
	pthread_mutex_lock(&g_cfg_lock);
	g_decided = true;
	bool disable = env_disable(g_cfg_disable);
	g_pool_mb = env_pool_mb(g_cfg_pool_mb);
	pthread_mutex_unlock(&g_cfg_lock);
	if (disable) {
		snprintf(g_reason, sizeof g_reason, "CPU-only mode is set (OVSTAGE_DISABLE_GPU or "
			 "OVSTAGE_CONFIG_EXT_DISABLE_GPU)");
		return;
	}
	int n = 0;
	cudaError_t r = cudaGetDeviceCount(&n);
	if (r != cudaSuccess || n <= 0) {
		int drv = 0;
		(void)cudaDriverGetVersion(&drv);
		(void)cudaGetLastError(); /* the probe must not leave a sticky error for the application */
		if (r == cudaErrorNoDevice || (r == cudaSuccess && n <= 0))
			snprintf(g_reason, sizeof g_reason, "no CUDA device is visible to this process");
		else if (drv == 0)
			snprintf(g_reason, sizeof g_reason, "no CUDA driver is installed (%s)", cudaGetErrorName(r));
		else
			snprintf(g_reason, sizeof g_reason, "the CUDA driver cannot be used (%s: %s)", cudaGetErrorName(r),
				 cudaGetErrorString(r));
		return;
	}
	g_ndev = n > OVS_GPU_MAX_DEVICES ? OVS_GPU_MAX_DEVICES : n;
	g_avail = true;
}

bool ovs_gpu_available(void)
{
	pthread_once(&g_once, decide);
	return g_avail;
}

const char *ovs_gpu_reason(void)
{
	pthread_once(&g_once, decide);
	return g_avail ? "" : g_reason;
}

int ovs_gpu_device_count(void)
{
	pthread_once(&g_once, decide);
	return g_ndev;
}

int64_t ovs_gpu_pool_mb(void)
{
	pthread_once(&g_once, decide);
	return g_pool_mb;
}

/* ---- per-device process state: the memory pool and the fence stream ---------------------------- */

typedef struct gpu_device {
	_Atomic bool ready;       /* fields below valid (release-published) */
	cudaMemPool_t pool;       /* column memory of this device */
	cudaStream_t fence;       /* where fences on user events are snapshotted (non-blocking) */
	ovs_block_budget budget;  /* what the caches of the device's stage contexts may retain */
} gpu_device;

static gpu_device g_dev[OVS_GPU_MAX_DEVICES];

/* OVSTAGE_GPU_POOL_MB in bytes (0: the cache is off; saturated, never overflowing). */
static int64_t pool_bound(void)
{
	int64_t mb = ovs_gpu_pool_mb();
	return mb <= 0 ? 0 : mb > (INT64_MAX >> 20) ? INT64_MAX : mb << 20;
}

/* Whether ordinal d can be used by this process; else a message naming it and why. */
static bool usable(int d, char *err, size_t errlen)
{
	if (!ovs_gpu_available()) {
		ovs_err_format(err, errlen, "CUDA device %d cannot be used: %s", d, g_reason);
		return false;
	}
	if (d < 0 || d >= g_ndev) {
		ovs_err_format(err, errlen, "CUDA device ordinal %d is out of range (%d device%s visible)", d, g_ndev,
			       g_ndev == 1 ? " is" : "s are");
		return false;
	}
	return true;
}
static pthread_mutex_t g_dev_lock = PTHREAD_MUTEX_INITIALIZER;

static bool device_init_locked(int d, gpu_device *gd, char *err, size_t errlen)
{
	int prev = 0;
	(void)cudaGetDevice(&prev);
	cudaError_t r = cudaSetDevice(d);
	struct cudaMemPoolProps props;
	memset(&props, 0, sizeof props);
	props.allocType = cudaMemAllocationTypePinned;
	props.location.type = cudaMemLocationTypeDevice;
	props.location.id = d;
	if (r == cudaSuccess)
		r = cudaMemPoolCreate(&gd->pool, &props);
	if (r == cudaSuccess) {
		/* CUDA's pool keeps nothing past a synchronisation: what is retained is the caches' (the
		 * budget), so the bound holds for the device as a whole (docs/gpu.md, "The device pool"). */
		uint64_t keep = 0;
		r = cudaMemPoolSetAttribute(gd->pool, cudaMemPoolAttrReleaseThreshold, &keep);
	}
	if (r == cudaSuccess)
		r = cudaStreamCreateWithFlags(&gd->fence, cudaStreamNonBlocking);
	(void)cudaSetDevice(prev);
	ovs_block_budget_init(&gd->budget, pool_bound());
	if (r != cudaSuccess) {
		ovs_err_format(err, errlen, "CUDA device %d: cannot set up its memory pool and streams (%s: %s)", d,
			       cudaGetErrorName(r), cudaGetErrorString(r));
		(void)cudaGetLastError();
		return false;
	}
	return true;
}

gpu_device_state ovs_gpu_device_state(int d, char *err, size_t errlen)
{
	gpu_device_state out = { NULL, NULL, NULL };
	if (!usable(d, err, errlen))
		return out;
	gpu_device *gd = &g_dev[d];
	/* acquire: pairs with the release below; the pool and stream are then initialised. */
	if (!atomic_load_explicit(&gd->ready, memory_order_acquire)) {
		pthread_mutex_lock(&g_dev_lock);
		bool ok = atomic_load_explicit(&gd->ready, memory_order_relaxed) || device_init_locked(d, gd, err, errlen);
		if (ok)
			atomic_store_explicit(&gd->ready, true, memory_order_release);
		pthread_mutex_unlock(&g_dev_lock);
		if (!ok)
			return out;
	}
	out.pool = gd->pool;
	out.fence = gd->fence;
	out.budget = &gd->budget;
	return out;
}

/* ---- fences --------------------------------------------------------------------------------------- */

static cudaStream_t user_stream(uintptr_t s)
{
	return s == 1 ? cudaStreamLegacy : s == 2 ? cudaStreamPerThread : (cudaStream_t)s;
}

static ovstage_api_status_t cuda_fail(cudaError_t r, char *err, size_t errlen, const char *what, uintptr_t v)
{
	(void)cudaGetLastError();
	ovs_err_format(err, errlen, "%s = 0x%llx: %s (%s)", what, (unsigned long long)v, cudaGetErrorName(r),
		       cudaGetErrorString(r));
	return OVSTAGE_ERROR_INVALID_ARGUMENT;
}

ovstage_api_status_t ovs_gpu_fence_capture(ovstage_cuda_sync_t sync, void **out, char *err, size_t errlen)
{
	*out = NULL;
	if (!sync.stream && !sync.wait_event)
		return OVSTAGE_OK;
	if (!ovs_gpu_available()) {
		ovs_err_format(err, errlen, "cuda_sync = {stream 0x%llx, wait_event 0x%llx} names CUDA work, but %s",
			       (unsigned long long)sync.stream, (unsigned long long)sync.wait_event, g_reason);
		return OVSTAGE_ERROR_NOT_SUPPORTED;
	}
	/* The device: the stream's (handles 1 and 2: the caller's current one), else the caller's. */
	int prev = 0, dev = 0;
	cudaError_t r = cudaGetDevice(&prev);
	if (r != cudaSuccess)
		return cuda_fail(r, err, errlen, "cuda_sync.stream", sync.stream);
	dev = prev;
	if (sync.stream && (r = cudaStreamGetDevice(user_stream(sync.stream), &dev)) != cudaSuccess)
		return cuda_fail(r, err, errlen, "cuda_sync.stream", sync.stream);
	gpu_device_state ds = ovs_gpu_device_state(dev, err, errlen);
	if (!ds.pool)
		return OVSTAGE_ERROR_INVALID_ARGUMENT;
	if (dev != prev && (r = cudaSetDevice(dev)) != cudaSuccess)
		return cuda_fail(r, err, errlen, "cuda_sync.stream", sync.stream);
	ovstage_api_status_t st = OVSTAGE_OK;
	ovs_gpu_event *f = ovs_gpu_event_take(dev);
	if (!f) {
		st = cuda_fail(cudaErrorMemoryAllocation, err, errlen, "cuda_sync (creating a fence event)", 0);
		goto out;
	}
	if (!sync.wait_event) {
		/* "Drain what is queued now": the fence is recorded on the producer's stream itself. */
		r = cudaEventRecord(f->ev, user_stream(sync.stream));
		if (r != cudaSuccess)
			st = cuda_fail(r, err, errlen, "cuda_sync.stream", sync.stream);
		goto out;
	}
	/* A snapshot of the event as of now: a later re-record by the producer changes nothing. */
	if (sync.stream) {
		ovs_gpu_event *s = ovs_gpu_event_take(dev);
		r = s ? cudaEventRecord(s->ev, user_stream(sync.stream)) : cudaErrorMemoryAllocation;
		if (r == cudaSuccess)
			r = cudaStreamWaitEvent(ds.fence, s->ev, 0);
		ovs_gpu_event_give(s); /* reusable at once: the wait captured this record */
		if (r != cudaSuccess) {
			st = cuda_fail(r, err, errlen, "cuda_sync.stream", sync.stream);
			goto out;
		}
	}
	r = cudaStreamWaitEvent(ds.fence, (cudaEvent_t)sync.wait_event, 0);
	if (r != cudaSuccess) {
		st = cuda_fail(r, err, errlen, "cuda_sync.wait_event", sync.wait_event);
		goto out;
	}
	r = cudaEventRecord(f->ev, ds.fence);
	if (r != cudaSuccess)
		st = cuda_fail(r, err, errlen, "cuda_sync (recording the fence)", 0);
out:
	if (st != OVSTAGE_OK) {
		ovs_gpu_event_give(f);
		f = NULL;
	}
	if (dev != prev)
		(void)cudaSetDevice(prev); /* the caller's device as it was */
	*out = f;
	return st;
}

void ovs_gpu_fence_release(void *fence)
{
	ovs_gpu_event_release(fence); /* safe while a wait on it is pending */
}

/* ---- the device pool's figures ------------------------------------------------------------------ */

static uint64_t pool_attr(cudaMemPool_t pool, enum cudaMemPoolAttr a)
{
	uint64_t v = 0;
	if (cudaMemPoolGetAttribute(pool, a, &v) != cudaSuccess) {
		(void)cudaGetLastError();
		return 0;
	}
	return v;
}

bool ovs_gpu_pci_bus_id(int dev, char *buf, size_t n)
{
	if (n)
		buf[0] = 0;
	if (!ovs_gpu_available() || dev < 0 || dev >= g_ndev || n < 2 || n > INT32_MAX)
		return false;
	if (cudaDeviceGetPCIBusId(buf, (int)n, dev) == cudaSuccess)
		return true;
	(void)cudaGetLastError();
	buf[0] = 0;
	return false;
}

ovstage_api_status_t ovs_gpu_pool_stats(int d, ovstage_ext_gpu_pool_stats_t *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof *out);
	if (!usable(d, err, errlen))
		return OVSTAGE_ERROR_INVALID_ARGUMENT;
	out->bound_bytes = (uint64_t)pool_bound();
	gpu_device *gd = &g_dev[d];
	/* acquire: pairs with the release that published the device's state (ovs_gpu_device_state). */
	if (!atomic_load_explicit(&gd->ready, memory_order_acquire))
		return OVSTAGE_OK;
	ovs_block_budget *b = &gd->budget;
	/* relaxed: statistics (exact when no op runs). */
	int64_t kept = atomic_load_explicit(&b->retained, memory_order_relaxed);
	out->retained_bytes = kept > 0 ? (uint64_t)kept : 0;
	out->hits = atomic_load_explicit(&b->hits, memory_order_relaxed);
	out->misses = atomic_load_explicit(&b->misses, memory_order_relaxed);
	out->releases = atomic_load_explicit(&b->releases, memory_order_relaxed);
	out->cuda_reserved_bytes = pool_attr(gd->pool, cudaMemPoolAttrReservedMemCurrent);
	out->cuda_used_bytes = pool_attr(gd->pool, cudaMemPoolAttrUsedMemCurrent);
	return OVSTAGE_OK;
}
