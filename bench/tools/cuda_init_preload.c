/*
 * cuda_init_preload.c — initialises CUDA in a process before its main(), for telling whether a
 * CPU-only workload slows down because CUDA is initialised in the process (the driver's presence)
 * or because of what a CUDA-enabled build of the engine does (bench/tools/cpu_in_cuda_build.sh).
 *
 * Build: cc -O2 -shared -fPIC cuda_init_preload.c -I$CUDA/include -L$CUDA/lib64 -lcudart
 * Use:   CUDA_INIT_PRELOAD=count|ctx LD_PRELOAD=./libcuda_init_preload.so PROGRAM ...
 *        count: cudaGetDeviceCount only (the driver initialised); ctx: also a primary context.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

__attribute__((constructor)) static void cuda_init_preload(void)
{
	const char *m = getenv("CUDA_INIT_PRELOAD");
	int n = 0;
	if (!m)
		return;
	(void)cudaGetDeviceCount(&n);
	if (!strcmp(m, "ctx"))
		(void)cudaFree(0);
	fprintf(stderr, "cuda_init_preload: %s, %d devices\n", m, n);
}
