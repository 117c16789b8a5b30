// spin.cu — the benchmark's producer kernel: spins for `cycles` GPU clocks (0: an empty kernel).
#include <cuda_runtime.h>

namespace {
__global__ void spin(long long cycles)
{
	long long t0 = clock64();
	while (clock64() - t0 < cycles) {
	}
}
} // namespace

extern "C" int bench_spin(void *stream, long long cycles)
{
	spin<<<1, 1, 0, (cudaStream_t)stream>>>(cycles);
	return (int)cudaGetLastError();
}
