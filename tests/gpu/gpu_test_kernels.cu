// gpu_test_kernels.cu — producer kernels for the GPU suite: a fill that first spins for a while, so
// that the write is submitted while the producer's kernel is still running.
#include <cuda_runtime.h>

namespace {

__global__ void spin_fill(float *dst, unsigned n, float base, long long spin_cycles)
{
	long long t0 = clock64();
	while (clock64() - t0 < spin_cycles) {
	}
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		dst[i] = base + (float)i;
}

__global__ void spin_bytes(unsigned char *dst, unsigned n, unsigned seed, long long spin_cycles)
{
	long long t0 = clock64();
	while (clock64() - t0 < spin_cycles) {
	}
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		dst[i] = (unsigned char)(((i * 2654435761u) >> 13) + seed); // check_gpu.c: batch_byte
}

__global__ void add_kernel(float *dst, unsigned n, float delta)
{
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		dst[i] += delta;
}

} // namespace

// dst[i] = base + i on `stream` after spinning ~spin_cycles GPU clocks; returns the launch error.
extern "C" int tst_gpu_spin_fill(void *stream, float *dst, unsigned n, float base, long long spin_cycles)
{
	spin_fill<<<(n + 255) / 256 > 0 ? (n + 255) / 256 : 1, 256, 0, (cudaStream_t)stream>>>(dst, n, base, spin_cycles);
	return (int)cudaGetLastError();
}

// dst[i] = byte i of a seeded pattern (check_gpu.c's batch_byte) on `stream` after spinning ~spin_cycles
// GPU clocks; returns the launch error.
extern "C" int tst_gpu_spin_bytes(void *stream, unsigned char *dst, unsigned n, unsigned seed, long long spin_cycles)
{
	unsigned blocks = (n + 255) / 256 > 1024 ? 1024 : (n + 255) / 256 > 0 ? (n + 255) / 256 : 1;
	spin_bytes<<<blocks, 256, 0, (cudaStream_t)stream>>>(dst, n, seed, spin_cycles);
	return (int)cudaGetLastError();
}

// dst[i] += delta on `stream` (a producer modifying a read-current map's buffer in place).
extern "C" int tst_gpu_add(void *stream, float *dst, unsigned n, float delta)
{
	add_kernel<<<(n + 255) / 256 > 0 ? (n + 255) / 256 : 1, 256, 0, (cudaStream_t)stream>>>(dst, n, delta);
	return (int)cudaGetLastError();
}
