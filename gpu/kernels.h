/*
 * kernels.h — the row kernels of device columns (kernels.cu), callable from C. Each launches on
 * `stream` and returns the launch's cudaError_t as an int (0 = cudaSuccess); the work itself runs in
 * stream order. Row lists and chunk tables are device pointers (the caller uploads them).
 *
 * Rows are `rb` bytes; the kernels move 8-, 4- or 1-byte words, the widest that rb and every base
 * pointer allow.
 */
#ifndef OVSTAGE_GPU_KERNELS_H
#define OVSTAGE_GPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dst row i = src row rows[i], i < n. */
int ovs_cuda_gather_rows(void *stream, void *dst, const void *src, const uint32_t *rows, uint32_t n, size_t rb);
/* dst row rows[i] = src row i, i < n. */
int ovs_cuda_scatter_rows(void *stream, void *dst, const uint32_t *rows, uint32_t n, const void *src, size_t rb);
/* Row rows[i] of a chunked column = src row i: its address is bases[rows[i] >> shift] +
 * (rows[i] & (2^shift - 1)) * rb; rows whose chunk base is NULL are skipped. */
int ovs_cuda_scatter_chunked(void *stream, void *const *bases, uint32_t shift, const uint32_t *rows, uint32_t n,
			     const void *src, size_t rb, unsigned align);

/* dst row i = row rows[i] of a chunked column (addressed as for ovs_cuda_scatter_chunked), i < n;
 * rows equal to UINT32_MAX, and rows whose chunk base is NULL, are skipped (dst keeps its bytes). */
int ovs_cuda_gather_chunked(void *stream, void *dst, void *const *bases, uint32_t shift, const uint32_t *rows,
			    uint32_t n, size_t rb, unsigned align);

/* dst bytes [off[i], off[i + 1]) = the bytes at src[i], i < n (one warp per segment: ragged array
 * rows, often a few dozen bytes each, packed into one buffer; 8-, 4- or 1-byte words per segment as
 * its ends and length allow). src and off are device arrays. */
int ovs_cuda_copy_segments(void *stream, void *dst, const void *const *src, const uint64_t *off, uint32_t n);

/* ---- batched small copies ------------------------------------------------------------------------
 * Up to OVS_CUDA_BATCH_MAX device-to-device copies in one launch, their descriptors passed by value
 * as the kernel's parameter (no upload, no allocation: 8 + 128 x 24 = 3080 bytes, within the 4 KiB
 * every CUDA version accepts). Each copy is cut into tiles of OVS_CUDA_BATCH_TILE bytes, one block
 * per tile; copy i owns tiles [tile0[i], tile0[i + 1]) (the last copy up to `tiles`). A block moves
 * 16-, 8- or 4-byte words, the widest its tile's two addresses allow, and its tail in bytes. The
 * copies run concurrently: no dst may overlap another copy's src or dst. */
#define OVS_CUDA_BATCH_MAX 128
#define OVS_CUDA_BATCH_TILE 16384u /* bytes per block (a multiple of 16: tiles keep the base's alignment) */

typedef struct ovs_cuda_seg {
	void *dst;       /* device memory of the launching device */
	const void *src; /* memory that device can read */
	uint32_t bytes;  /* > 0 */
	uint32_t tile0;  /* the copy's first tile: the tiles of copies 0..i-1 come before it */
} ovs_cuda_seg;

typedef struct ovs_cuda_batch {
	uint32_t n;                           /* copies in seg (1..OVS_CUDA_BATCH_MAX) */
	uint32_t tiles;                       /* tiles of all copies: the grid */
	ovs_cuda_seg seg[OVS_CUDA_BATCH_MAX]; /* tile0 increasing */
} ovs_cuda_batch;

/* Launches b's copies (taken by value: b may be reused when this returns). */
int ovs_cuda_copy_batch(void *stream, const ovs_cuda_batch *b);

/* One depth level of the transform hierarchy (engine/ops/hierarchy_gpu.c): for j < n, node i =
 * node[j] gets world[i] = local_j when reset[j] != 0 or par[j] == UINT32_MAX, else local_j x
 * world[par[j]] (row-major 4x4 float64, USD row-vector convention), where local_j = local[j] when
 * hasx[j] != 0, else the identity. Parents' worlds must be final (an earlier level, earlier in stream
 * order). The products and sums are __dmul_rn / __dadd_rn in the CPU model's order, never contracted
 * into FMAs: the result is bitwise the CPU model's (engine/ops/xform.h, compiled with -std=c11, which
 * makes gcc's -ffp-contract=off). */
int ovs_cuda_hier_level(void *stream, double *world, const uint32_t *node, const uint32_t *par,
			const unsigned char *hasx, const unsigned char *reset, const double *local, uint32_t n);

#ifdef __cplusplus
}
#endif

#endif /* OVSTAGE_GPU_KERNELS_H */
