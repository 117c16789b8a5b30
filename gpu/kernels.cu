// kernels.cu — the row kernels of device columns (see kernels.h). Kernels only: no engine headers
// (Concurrency Kit's headers are not C++-clean), no host logic beyond choosing a launch shape.
#include "kernels.h"

#include <cuda_runtime.h>

namespace {

constexpr unsigned kBlock = 256;

// A grid covering `total` work items with at most 2^16 blocks (grid-stride loops cover the rest).
inline unsigned grid_for(unsigned long long total)
{
	unsigned long long g = (total + kBlock - 1) / kBlock;
	return g == 0 ? 1u : g > 65536ull ? 65536u : (unsigned)g;
}

// The widest word (8, 4 or 1 bytes) dividing rb and every address alignment the caller reports.
inline unsigned word_for(size_t rb, unsigned align)
{
	if (rb % 8 == 0 && align % 8 == 0)
		return 8;
	if (rb % 4 == 0 && align % 4 == 0)
		return 4;
	return 1;
}

inline unsigned ptr_align(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)a | (uintptr_t)b;
	return (x & 7) == 0 ? 8 : (x & 3) == 0 ? 4 : 1;
}

template <typename W>
__global__ void gather_kernel(W *dst, const W *src, const uint32_t *rows, uint32_t n, size_t wpr)
{
	unsigned long long total = (unsigned long long)n * wpr;
	for (unsigned long long t = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; t < total;
	     t += (unsigned long long)gridDim.x * blockDim.x) {
		unsigned long long i = t / wpr, w = t % wpr;
		dst[i * wpr + w] = src[(unsigned long long)rows[i] * wpr + w];
	}
}

template <typename W>
__global__ void scatter_kernel(W *dst, const uint32_t *rows, uint32_t n, const W *src, size_t wpr)
{
	unsigned long long total = (unsigned long long)n * wpr;
	for (unsigned long long t = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; t < total;
	     t += (unsigned long long)gridDim.x * blockDim.x) {
		unsigned long long i = t / wpr, w = t % wpr;
		dst[(unsigned long long)rows[i] * wpr + w] = src[i * wpr + w];
	}
}

template <typename W>
__global__ void scatter_chunked_kernel(void *const *bases, uint32_t shift, const uint32_t *rows, uint32_t n,
				       const W *src, size_t wpr)
{
	unsigned long long total = (unsigned long long)n * wpr;
	uint32_t mask = (1u << shift) - 1u;
	for (unsigned long long t = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; t < total;
	     t += (unsigned long long)gridDim.x * blockDim.x) {
		unsigned long long i = t / wpr, w = t % wpr;
		uint32_t r = rows[i];
		W *base = (W *)bases[r >> shift];
		if (base)
			base[(unsigned long long)(r & mask) * wpr + w] = src[i * wpr + w];
	}
}

template <typename W>
__global__ void gather_chunked_kernel(W *dst, void *const *bases, uint32_t shift, const uint32_t *rows, uint32_t n,
				      size_t wpr)
{
	unsigned long long total = (unsigned long long)n * wpr;
	uint32_t mask = (1u << shift) - 1u;
	for (unsigned long long t = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; t < total;
	     t += (unsigned long long)gridDim.x * blockDim.x) {
		unsigned long long i = t / wpr, w = t % wpr;
		uint32_t r = rows[i];
		if (r == 0xffffffffu)
			continue;
		const W *base = (const W *)bases[r >> shift];
		if (base)
			dst[i * wpr + w] = base[(unsigned long long)(r & mask) * wpr + w];
	}
}

template <typename W>
int launch_gather(cudaStream_t s, void *dst, const void *src, const uint32_t *rows, uint32_t n, size_t rb)
{
	size_t wpr = rb / sizeof(W);
	gather_kernel<W><<<grid_for((unsigned long long)n * wpr), kBlock, 0, s>>>((W *)dst, (const W *)src, rows, n, wpr);
	return (int)cudaGetLastError();
}

template <typename W>
int launch_scatter(cudaStream_t s, void *dst, const uint32_t *rows, uint32_t n, const void *src, size_t rb)
{
	size_t wpr = rb / sizeof(W);
	scatter_kernel<W><<<grid_for((unsigned long long)n * wpr), kBlock, 0, s>>>((W *)dst, rows, n, (const W *)src, wpr);
	return (int)cudaGetLastError();
}

template <typename W>
int launch_chunked(cudaStream_t s, void *const *bases, uint32_t shift, const uint32_t *rows, uint32_t n,
		   const void *src, size_t rb)
{
	size_t wpr = rb / sizeof(W);
	scatter_chunked_kernel<W><<<grid_for((unsigned long long)n * wpr), kBlock, 0, s>>>(bases, shift, rows, n,
										     (const W *)src, wpr);
	return (int)cudaGetLastError();
}

template <typename W>
int launch_gather_chunked(cudaStream_t s, void *dst, void *const *bases, uint32_t shift, const uint32_t *rows,
			  uint32_t n, size_t rb)
{
	size_t wpr = rb / sizeof(W);
	gather_chunked_kernel<W><<<grid_for((unsigned long long)n * wpr), kBlock, 0, s>>>((W *)dst, bases, shift, rows,
										    n, wpr);
	return (int)cudaGetLastError();
}

constexpr unsigned kWarp = 32;

// One warp per segment (grid-stride over segments); 8- or 4-byte words when both ends and the
// length allow (rows of float3 are 12 bytes), else bytes.
__global__ void segments_kernel(unsigned char *dst, const void *const *src, const uint64_t *off, uint32_t n)
{
	unsigned long long warps = (unsigned long long)gridDim.x * blockDim.x / kWarp;
	unsigned lane = threadIdx.x % kWarp;
	for (unsigned long long s = (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x) / kWarp; s < n;
	     s += warps) {
		const unsigned char *a = (const unsigned char *)src[s];
		unsigned char *d = dst + off[s];
		unsigned long long bytes = off[s + 1] - off[s];
		unsigned long long any = (uintptr_t)a | (uintptr_t)d | bytes;
		if ((any & 7) == 0) {
			const unsigned long long *a8 = (const unsigned long long *)a;
			unsigned long long *d8 = (unsigned long long *)d;
			for (unsigned long long w = lane; w < bytes / 8; w += kWarp)
				d8[w] = a8[w];
		} else if ((any & 3) == 0) {
			const unsigned *a4 = (const unsigned *)a;
			unsigned *d4 = (unsigned *)d;
			for (unsigned long long w = lane; w < bytes / 4; w += kWarp)
				d4[w] = a4[w];
		} else {
			for (unsigned long long b = lane; b < bytes; b += kWarp)
				d[b] = a[b];
		}
	}
}

static_assert(sizeof(ovs_cuda_seg) == 24, "a batch descriptor is 24 bytes");
static_assert(sizeof(ovs_cuda_batch) <= 4096, "a batch must fit the classic 4 KiB kernel-parameter limit");
static_assert(OVS_CUDA_BATCH_TILE % 16 == 0, "tiles keep their copy's base alignment");

// Words [0, len / sizeof(W)) of one tile, then its tail bytes.
template <typename W>
__device__ void copy_tile(unsigned char *d, const unsigned char *s, uint32_t len)
{
	W *dw = (W *)d;
	const W *sw = (const W *)s;
	uint32_t words = len / (uint32_t)sizeof(W);
	for (uint32_t w = threadIdx.x; w < words; w += blockDim.x)
		dw[w] = sw[w];
	for (uint32_t b = words * (uint32_t)sizeof(W) + threadIdx.x; b < len; b += blockDim.x)
		d[b] = s[b];
}

// One block per tile: the copy whose tiles hold blockIdx.x is found by binary search over tile0
// (read from the parameter space in place: __grid_constant__, no per-thread copy of the table).
__global__ void batch_kernel(const __grid_constant__ ovs_cuda_batch b)
{
	uint32_t t = blockIdx.x, lo = 0, hi = b.n; // seg[lo].tile0 <= t < seg[hi].tile0 (hi = n: end)
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (b.seg[mid].tile0 <= t)
			lo = mid;
		else
			hi = mid;
	}
	const ovs_cuda_seg &g = b.seg[lo];
	uint32_t off = (t - g.tile0) * OVS_CUDA_BATCH_TILE;
	if (off >= g.bytes)
		return; // not reached for a well-formed batch
	uint32_t len = g.bytes - off < OVS_CUDA_BATCH_TILE ? g.bytes - off : OVS_CUDA_BATCH_TILE;
	unsigned char *d = (unsigned char *)g.dst + off;
	const unsigned char *s = (const unsigned char *)g.src + off;
	uintptr_t any = (uintptr_t)d | (uintptr_t)s;
	if ((any & 15) == 0)
		copy_tile<uint4>(d, s, len);
	else if ((any & 7) == 0)
		copy_tile<unsigned long long>(d, s, len);
	else if ((any & 3) == 0)
		copy_tile<unsigned int>(d, s, len);
	else
		copy_tile<unsigned char>(d, s, len);
}

__global__ void hier_level_kernel(double *world, const uint32_t *node, const uint32_t *par, const unsigned char *hasx,
				  const unsigned char *reset, const double *local, uint32_t n)
{
	for (unsigned long long j = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; j < n;
	     j += (unsigned long long)gridDim.x * blockDim.x) {
		double a[16];
		for (int k = 0; k < 16; k++)
			a[k] = hasx[j] ? local[j * 16 + k] : (k % 5 == 0 ? 1.0 : 0.0);
		double *out = world + (unsigned long long)node[j] * 16;
		uint32_t p = par[j];
		if (reset[j] || p == 0xffffffffu) {
			for (int k = 0; k < 16; k++)
				out[k] = a[k];
			continue;
		}
		const double *b = world + (unsigned long long)p * 16;
		// ((a0 b0 + a1 b1) + a2 b2) + a3 b3, rounded after every operation (no FMA): xform.h's order
		for (int r = 0; r < 4; r++)
			for (int c = 0; c < 4; c++) {
				double s = __dadd_rn(__dmul_rn(a[r * 4 + 0], b[0 * 4 + c]), __dmul_rn(a[r * 4 + 1], b[1 * 4 + c]));
				s = __dadd_rn(s, __dmul_rn(a[r * 4 + 2], b[2 * 4 + c]));
				out[r * 4 + c] = __dadd_rn(s, __dmul_rn(a[r * 4 + 3], b[3 * 4 + c]));
			}
	}
}

} // namespace

extern "C" int ovs_cuda_gather_rows(void *stream, void *dst, const void *src, const uint32_t *rows, uint32_t n,
				    size_t rb)
{
	if (!n || !rb)
		return 0;
	cudaStream_t s = (cudaStream_t)stream;
	switch (word_for(rb, ptr_align(dst, src))) {
	case 8: return launch_gather<unsigned long long>(s, dst, src, rows, n, rb);
	case 4: return launch_gather<unsigned int>(s, dst, src, rows, n, rb);
	default: return launch_gather<unsigned char>(s, dst, src, rows, n, rb);
	}
}

extern "C" int ovs_cuda_scatter_rows(void *stream, void *dst, const uint32_t *rows, uint32_t n, const void *src,
				     size_t rb)
{
	if (!n || !rb)
		return 0;
	cudaStream_t s = (cudaStream_t)stream;
	switch (word_for(rb, ptr_align(dst, src))) {
	case 8: return launch_scatter<unsigned long long>(s, dst, rows, n, src, rb);
	case 4: return launch_scatter<unsigned int>(s, dst, rows, n, src, rb);
	default: return launch_scatter<unsigned char>(s, dst, rows, n, src, rb);
	}
}

extern "C" int ovs_cuda_scatter_chunked(void *stream, void *const *bases, uint32_t shift, const uint32_t *rows,
					uint32_t n, const void *src, size_t rb, unsigned align)
{
	if (!n || !rb)
		return 0;
	cudaStream_t s = (cudaStream_t)stream;
	unsigned a = align < ptr_align(src, src) ? align : ptr_align(src, src);
	switch (word_for(rb, a)) {
	case 8: return launch_chunked<unsigned long long>(s, bases, shift, rows, n, src, rb);
	case 4: return launch_chunked<unsigned int>(s, bases, shift, rows, n, src, rb);
	default: return launch_chunked<unsigned char>(s, bases, shift, rows, n, src, rb);
	}
}

extern "C" int ovs_cuda_gather_chunked(void *stream, void *dst, void *const *bases, uint32_t shift,
				       const uint32_t *rows, uint32_t n, size_t rb, unsigned align)
{
	if (!n || !rb)
		return 0;
	cudaStream_t s = (cudaStream_t)stream;
	unsigned a = align < ptr_align(dst, dst) ? align : ptr_align(dst, dst);
	switch (word_for(rb, a)) {
	case 8: return launch_gather_chunked<unsigned long long>(s, dst, bases, shift, rows, n, rb);
	case 4: return launch_gather_chunked<unsigned int>(s, dst, bases, shift, rows, n, rb);
	default: return launch_gather_chunked<unsigned char>(s, dst, bases, shift, rows, n, rb);
	}
}

extern "C" int ovs_cuda_copy_segments(void *stream, void *dst, const void *const *src, const uint64_t *off,
				      uint32_t n)
{
	if (!n)
		return 0;
	segments_kernel<<<grid_for((unsigned long long)n * kWarp), kBlock, 0, (cudaStream_t)stream>>>(
		(unsigned char *)dst, src, off, n);
	return (int)cudaGetLastError();
}

extern "C" int ovs_cuda_copy_batch(void *stream, const ovs_cuda_batch *b)
{
	if (!b->n || !b->tiles)
		return 0;
	batch_kernel<<<b->tiles, kBlock, 0, (cudaStream_t)stream>>>(*b);
	return (int)cudaGetLastError();
}

extern "C" int ovs_cuda_hier_level(void *stream, double *world, const uint32_t *node, const uint32_t *par,
				   const unsigned char *hasx, const unsigned char *reset, const double *local, uint32_t n)
{
	if (!n)
		return 0;
	hier_level_kernel<<<grid_for(n), kBlock, 0, (cudaStream_t)stream>>>(world, node, par, hasx, reset, local, n);
	return (int)cudaGetLastError();
}
