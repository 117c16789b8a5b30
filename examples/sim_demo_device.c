/* sim_demo_device.c — the demo's CUDA side (see sim_demo_device.h). */
#include "sim_demo_device.h"

#include <stdio.h>

#include <ovstage/ovstage_ext.h>

#ifdef OVSTAGE_DEMO_CUDA
#include <cuda_runtime_api.h>

bool demo_cuda_usable(char *why, size_t len)
{
	int n = 0;
	const char *reason = "";
	if (ovstage_ext_get_gpu_status(&n, &reason) != OVSTAGE_OK || n == 0) {
		snprintf(why, len, "%s", reason && *reason ? reason : "no CUDA device");
		return false;
	}
	return true;
}

void *demo_cuda_alloc(size_t bytes)
{
	void *p = NULL;
	return cudaMalloc(&p, bytes ? bytes : 1) == cudaSuccess ? p : NULL;
}

void demo_cuda_free(void *p)
{
	cudaFree(p);
}

void *demo_cuda_stream(void)
{
	cudaStream_t s = NULL;
	return cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess ? (void *)s : NULL;
}

void demo_cuda_stream_destroy(void *s)
{
	if (s)
		cudaStreamDestroy((cudaStream_t)s);
}

bool demo_cuda_upload(void *dst, const void *src, size_t bytes, void *s)
{
	return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)s) == cudaSuccess;
}

bool demo_cuda_download(void *dst, const void *src, size_t bytes, uintptr_t ready_event, void *s)
{
	cudaStream_t st = (cudaStream_t)s;
	if (ready_event && cudaStreamWaitEvent(st, (cudaEvent_t)ready_event, 0) != cudaSuccess)
		return false;
	return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, st) == cudaSuccess &&
	       cudaStreamSynchronize(st) == cudaSuccess;
}

#else /* the library was built without its CUDA backend */

bool demo_cuda_usable(char *why, size_t len)
{
	snprintf(why, len, "this build has no CUDA backend (nvcc was not found when it was configured)");
	return false;
}

void *demo_cuda_alloc(size_t bytes)
{
	(void)bytes;
	return NULL;
}

void demo_cuda_free(void *p)
{
	(void)p;
}

void *demo_cuda_stream(void)
{
	return NULL;
}

void demo_cuda_stream_destroy(void *s)
{
	(void)s;
}

bool demo_cuda_upload(void *dst, const void *src, size_t bytes, void *s)
{
	(void)dst, (void)src, (void)bytes, (void)s;
	return false;
}

bool demo_cuda_download(void *dst, const void *src, size_t bytes, uintptr_t ready_event, void *s)
{
	(void)dst, (void)src, (void)bytes, (void)ready_event, (void)s;
	return false;
}

#endif
