/*
 * cuda_memops.c — the memory operations of CUDA device memory (buffer.h's ovs_memops), issued on the
 * engine stream of the execution context. Host-side row lists and chunk tables are uploaded to a
 * stream-ordered scratch allocation per call (row lists stay host metadata; only the kernels' copy
 * of them lives on the device, and only until the kernel has run).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "buffer.h"
#include "cuda_internal.h"
#include "kernels.h"

/* A failure inside an operation: the stream is left as it is and the error stays for the op's
 * completion event to report (a sticky fault fails every later op on the device, which is the
 * truth). Non-sticky launch errors are cleared so that they do not leak into the application. */
static void note(ovs_exec *x, cudaError_t r)
{
	if (r == cudaSuccess)
		return;
	(void)cudaGetLastError();
	if (!x->err)
		x->err = (int)r;
}

static void *cuda_alloc(void *ctx, size_t bytes)
{
	return ovs_gpu_alloc(ctx, bytes);
}

static void cuda_free(void *ctx, void *p, size_t bytes)
{
	ovs_gpu_free(ctx, p, bytes);
}

static void cuda_copy(ovs_exec *x, void *dst, const void *src, size_t bytes)
{
	if (!bytes)
		return;
	uint64_t t = ovs_gpu_span_begin();
	note(x, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)x->stream));
	ovs_gpu_span_end("memcpy", t);
}

/* ---- batched small copies -------------------------------------------------------------------------
 * A copy below BATCH_BYTES_MAX from device memory waits in x->batch; a flush launches the pending
 * ones as one kernel (kernels.h: ovs_cuda_copy_batch), whose host cost is one launch instead of one
 * cudaMemcpyAsync (~3-5 us of host time) per copy. Larger copies keep cudaMemcpyAsync: the copy
 * engines are at ~0.93x of a bare copy at 256 MiB, and one of them amortises its call. */
#define BATCH_BYTES_MAX ((size_t)1 << 20)

_Static_assert(OVS_COPY_BATCH_MAX == OVS_CUDA_BATCH_MAX, "one pending list is one launch");
_Static_assert(BATCH_BYTES_MAX <= UINT32_MAX, "a batched copy's size fits its 32-bit descriptor");

/* The pending copies as one launch's descriptors (tiles numbered in order). */
static void batch_table(const ovs_copy_batch *b, ovs_cuda_batch *t)
{
	uint32_t tiles = 0;
	for (uint32_t i = 0; i < b->n; i++) {
		const ovs_copy_seg *g = &b->seg[i];
		t->seg[i] = (ovs_cuda_seg){ g->dst, g->src, (uint32_t)g->bytes, tiles };
		tiles += (uint32_t)((g->bytes + OVS_CUDA_BATCH_TILE - 1) / OVS_CUDA_BATCH_TILE);
	}
	t->n = b->n;
	t->tiles = tiles;
}

/* The pending copies one by one (a launch that failed without a sticky fault, e.g. no kernel
 * image for this device): slower, still correct, and still in stream order. */
static void batch_fallback(ovs_exec *x, const ovs_copy_batch *b)
{
	for (uint32_t i = 0; i < b->n; i++)
		note(x, cudaMemcpyAsync(b->seg[i].dst, b->seg[i].src, b->seg[i].bytes, cudaMemcpyDeviceToDevice,
					(cudaStream_t)x->stream));
}

void ovs_cuda_batch_flush(ovs_exec *x)
{
	ovs_copy_batch *b = x->batch;
	if (!b || !b->n)
		return;
	uint64_t t0 = ovs_gpu_span_begin();
	ovs_cuda_batch t;
	batch_table(b, &t);
	/* A kernel goes to the current device's streams only: a flush before the op moves to another
	 * device (entry_exec) may run with that device current already. */
	int prev;
	(void)ovs_gpu_thread_enter(x->gpu->dev, &prev); /* if not: the launch fails, the fallback copies */
	cudaError_t r = (cudaError_t)ovs_cuda_copy_batch(x->stream, &t);
	if (r != cudaSuccess) {
		(void)cudaGetLastError(); /* not sticky if the copies below succeed */
		batch_fallback(x, b);
	}
	ovs_gpu_thread_restore(prev);
	b->n = 0;
	ovs_gpu_span_end("copy batch", t0);
}

static void cuda_copy_device(ovs_exec *x, void *dst, const void *src, size_t bytes)
{
	ovs_copy_batch *b = x->batch;
	if (!bytes)
		return;
	if (!b || bytes >= BATCH_BYTES_MAX) {
		cuda_copy(x, dst, src, bytes);
		return;
	}
	if (b->n == OVS_COPY_BATCH_MAX)
		ovs_cuda_batch_flush(x); /* full: this launch goes now, the copy starts the next one */
	b->seg[b->n++] = (ovs_copy_seg){ dst, src, bytes };
}

static void cuda_fill(ovs_exec *x, void *dst, int byte, size_t bytes)
{
	if (bytes)
		note(x, cudaMemsetAsync(dst, byte, bytes, (cudaStream_t)x->stream));
}

/* The host bytes [p, p + n) on the device, valid for work issued on x after this call; released with
 * scratch_free after that work is issued (stream order keeps it alive until it ran). A copy from
 * pageable memory is staged by the driver before cudaMemcpyAsync returns, so the host bytes may
 * change afterwards. */
static void *scratch_up(ovs_exec *x, const void *p, size_t n)
{
	uint64_t t = ovs_gpu_span_begin();
	void *d = ovs_gpu_alloc(x->gpu, n);
	cudaError_t r = d ? cudaMemcpyAsync(d, p, n, cudaMemcpyHostToDevice, (cudaStream_t)x->stream)
			  : cudaErrorMemoryAllocation;
	ovs_gpu_span_end("upload", t);
	if (r != cudaSuccess) {
		note(x, r);
		ovs_gpu_free(x->gpu, d, n);
		return NULL;
	}
	return d;
}

static void scratch_free(ovs_exec *x, void *d, size_t n)
{
	ovs_gpu_free(x->gpu, d, n);
}

static void cuda_scatter_rows(ovs_exec *x, void *dst, const uint32_t *rows, uint32_t n, const void *src, size_t rb)
{
	if (!n)
		return;
	uint64_t t = ovs_gpu_span_begin();
	uint32_t *drows = scratch_up(x, rows, (size_t)n * sizeof *rows);
	if (drows)
		note(x, (cudaError_t)ovs_cuda_scatter_rows(x->stream, dst, drows, n, src, rb));
	scratch_free(x, drows, (size_t)n * sizeof *rows);
	ovs_gpu_span_end("scatter rows", t);
}

static void cuda_gather_rows(ovs_exec *x, void *dst, const void *src, const uint32_t *rows, const uint32_t *drows,
			     uint32_t n, size_t rb)
{
	if (!n)
		return;
	uint64_t t = ovs_gpu_span_begin();
	uint32_t *up = drows ? NULL : scratch_up(x, rows, (size_t)n * sizeof *rows);
	if (drows || up)
		note(x, (cudaError_t)ovs_cuda_gather_rows(x->stream, dst, src, drows ? drows : up, n, rb));
	if (up)
		scratch_free(x, up, (size_t)n * sizeof *rows);
	ovs_gpu_span_end("gather rows", t);
}

/* The bytes of chunked_up's upload: the table, and the rows unless they are on the device already. */
static size_t chunked_bytes(uint32_t nbases, uint32_t n, bool rows_up)
{
	return (size_t)nbases * sizeof(void *) + (rows_up ? (size_t)n * sizeof(uint32_t) : 0);
}

/* A chunk table, and the row list unless drows holds it already, in one upload of chunked_bytes
 * (the table first, then the rows); *rows_out: the rows on the device (drows or the uploaded ones);
 * *align: the narrowest alignment of the bases (it decides the kernels' word). NULL on failure
 * (noted). */
static unsigned char *chunked_up(ovs_exec *x, void *const *bases, uint32_t nbases, const uint32_t *rows,
				 const uint32_t *drows, uint32_t n, const uint32_t **rows_out, unsigned *align)
{
	size_t tb = (size_t)nbases * sizeof(void *), bytes = chunked_bytes(nbases, n, !drows);
	uintptr_t any = 0;
	for (uint32_t j = 0; j < nbases; j++)
		any |= (uintptr_t)bases[j];
	*align = (any & 7) == 0 ? 8 : (any & 3) == 0 ? 4 : 1;
	unsigned char *d;
	if (drows) { /* the table alone: straight from the caller's array (staged before it returns) */
		d = scratch_up(x, bases, tb);
	} else {
		unsigned char *h = malloc(bytes);
		if (!h) {
			note(x, cudaErrorMemoryAllocation);
			return NULL;
		}
		memcpy(h, bases, tb);
		memcpy(h + tb, rows, (size_t)n * sizeof *rows);
		d = scratch_up(x, h, bytes);
		free(h);
	}
	*rows_out = !d ? NULL : drows ? drows : (const uint32_t *)(d + tb);
	return d;
}

static void cuda_scatter_chunked(ovs_exec *x, void *const *bases, uint32_t nbases, uint32_t shift,
				 const uint32_t *rows, const uint32_t *drows, uint32_t n, const void *src, size_t rb)
{
	if (!n)
		return;
	uint64_t t = ovs_gpu_span_begin();
	const uint32_t *dr;
	unsigned align;
	unsigned char *d = chunked_up(x, bases, nbases, rows, drows, n, &dr, &align);
	if (d)
		note(x, (cudaError_t)ovs_cuda_scatter_chunked(x->stream, (void *const *)d, shift, dr, n, src, rb, align));
	scratch_free(x, d, chunked_bytes(nbases, n, !drows));
	ovs_gpu_span_end("scatter chunked", t);
}

static void cuda_gather_chunked(ovs_exec *x, void *dst, void *const *bases, uint32_t nbases, uint32_t shift,
				const uint32_t *rows, uint32_t n, size_t rb)
{
	if (!n)
		return;
	uint64_t t = ovs_gpu_span_begin();
	const uint32_t *dr;
	unsigned align;
	unsigned char *d = chunked_up(x, bases, nbases, rows, NULL, n, &dr, &align);
	if (d)
		note(x, (cudaError_t)ovs_cuda_gather_chunked(x->stream, dst, (void *const *)d, shift, dr, n, rb, align));
	scratch_free(x, d, chunked_bytes(nbases, n, true));
	ovs_gpu_span_end("gather chunked", t);
}

/* The segments' source pointers and offsets in one upload (the pointers first, then the n + 1
 * offsets, which stay 8-byte aligned after them). */
static void cuda_copy_segments(ovs_exec *x, void *dst, const void *const *src, const uint64_t *off, uint32_t n)
{
	if (!n)
		return;
	uint64_t t = ovs_gpu_span_begin();
	size_t pb = (size_t)n * sizeof *src, bytes = pb + ((size_t)n + 1) * sizeof *off;
	unsigned char *h = malloc(bytes);
	if (!h) {
		note(x, cudaErrorMemoryAllocation);
		return;
	}
	memcpy(h, src, pb);
	memcpy(h + pb, off, bytes - pb);
	unsigned char *d = scratch_up(x, h, bytes);
	free(h);
	if (d)
		note(x, (cudaError_t)ovs_cuda_copy_segments(x->stream, dst, (const void *const *)d,
							    (const uint64_t *)(d + pb), n));
	scratch_free(x, d, bytes);
	ovs_gpu_span_end("copy segments", t);
}

void ovs_gpu_hier_level(ovs_exec *x, double *world, const uint32_t *node, const uint32_t *par,
			const unsigned char *hasx, const unsigned char *reset, const double *local, uint32_t n)
{
	note(x, (cudaError_t)ovs_cuda_hier_level(x->stream, world, node, par, hasx, reset, local, n));
}

static bool cuda_record(ovs_exec *x, void **out)
{
	*out = ovs_gpu_record(x);
	return *out != NULL;
}

static const ovs_memops g_cuda_memops = {
	.name = "cuda",
	.alloc = cuda_alloc,
	.free = cuda_free,
	.copy = cuda_copy,
	.copy_device = cuda_copy_device,
	.flush = ovs_cuda_batch_flush,
	.fill = cuda_fill,
	.scatter_rows = cuda_scatter_rows,
	.gather_rows = cuda_gather_rows,
	.scatter_chunked = cuda_scatter_chunked,
	.gather_chunked = cuda_gather_chunked,
	.copy_segments = cuda_copy_segments,
	.record = cuda_record,
};

const ovs_memops *ovs_gpu_memops(void)
{
	return &g_cuda_memops;
}
