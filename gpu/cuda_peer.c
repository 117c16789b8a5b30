/*
 * cuda_peer.c — peer access between two devices of the process (gpu.h: ovs_gpu_peer_enable), decided
 * once per ordered pair: the first write into a column on `dst` from memory of `src` asks CUDA
 * whether dst can reach src and, if so, enables it (cudaDeviceEnablePeerAccess with dst current).
 * Every later write of the pair reads the answer with one acquire load.
 *
 * Progress: the answer is a lock-free read; the first decision of a pair runs under one mutex (a
 * few driver calls, once per pair per process), so two threads never enable the same pair twice.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "cuda_internal.h"

enum { PEER_UNKNOWN = 0, PEER_ON = 1, PEER_OFF = 2 };

static _Atomic uint8_t g_peer[OVS_GPU_MAX_DEVICES][OVS_GPU_MAX_DEVICES]; /* [dst][src]: PEER_* */
static pthread_mutex_t g_peer_lock = PTHREAD_MUTEX_INITIALIZER;

/* Asks CUDA (g_peer_lock held): whether dst can reach src, and enables it if so. Another library or
 * the application may have enabled the pair already: that counts as on. The caller's current device
 * is put back. */
static uint8_t peer_decide(int dst, int src)
{
	int can = 0;
	if (cudaDeviceCanAccessPeer(&can, dst, src) != cudaSuccess || !can) {
		(void)cudaGetLastError();
		return PEER_OFF;
	}
	int prev;
	if (!ovs_gpu_thread_enter(dst, &prev))
		return PEER_OFF;
	cudaError_t r = cudaDeviceEnablePeerAccess(src, 0);
	if (r != cudaSuccess)
		(void)cudaGetLastError(); /* AlreadyEnabled is not sticky; any other failure means off */
	ovs_gpu_thread_restore(prev);
	return r == cudaSuccess || r == cudaErrorPeerAccessAlreadyEnabled ? PEER_ON : PEER_OFF;
}

bool ovs_gpu_peer_enable(int dst, int src)
{
	if (dst == src)
		return true;
	if (dst < 0 || src < 0 || dst >= OVS_GPU_MAX_DEVICES || src >= OVS_GPU_MAX_DEVICES)
		return false;
	/* acquire: pairs with the release store below; a thread that reads PEER_ON issues its copies
	 * after the enable call returned (the driver's own state is then in place for this process). */
	uint8_t v = atomic_load_explicit(&g_peer[dst][src], memory_order_acquire);
	if (v != PEER_UNKNOWN)
		return v == PEER_ON;
	pthread_mutex_lock(&g_peer_lock);
	v = atomic_load_explicit(&g_peer[dst][src], memory_order_relaxed); /* relaxed: under the lock */
	if (v == PEER_UNKNOWN) {
		v = peer_decide(dst, src);
		atomic_store_explicit(&g_peer[dst][src], v, memory_order_release);
	}
	pthread_mutex_unlock(&g_peer_lock);
	return v == PEER_ON;
}
