/*
 * gather.c — rows of a sealed version out into a dense buffer (gather.h).
 *
 * Host: one pass over the row list; consecutive rows that lie in one chunk and all hold a value are
 * copied with one memcpy (a map of the whole column in row order is then one memcpy per chunk),
 * rows without a value are zeroed. Device: the buffer is zeroed first when some row has no value,
 * then one kernel reads every row with a value through the version's chunk table
 * (memops.gather_chunked).
 */
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "gather.h"

/* Rows per part of a parallel host gather: about 256 KiB of values. */
#define GATHER_PART_BYTES ((size_t)256 << 10)

/* Whether row r of v holds a value that can be copied (v != NULL). */
static inline bool gather_has(const ovs_version *v, uint32_t r)
{
	return r < v->rows && v->chunks[r >> v->chunk_shift] && ovs_version_present(v, r);
}

typedef struct gather_host {
	const ovs_version *v;
	size_t rb;
	const uint32_t *rows;
	unsigned char *dst;
} gather_host;

static void gather_host_range(void *arg, size_t lo, size_t hi)
{
	const gather_host *g = arg;
	const ovs_version *v = g->v;
	size_t rb = g->rb;
	for (size_t i = lo; i < hi;) {
		uint32_t r = g->rows[i];
		if (!v || !gather_has(v, r)) {
			memset(g->dst + i * rb, 0, rb);
			i++;
			continue;
		}
		/* extend over rows r+1, r+2, ... in r's chunk that hold values */
		size_t j = i + 1;
		while (j < hi && (uint64_t)g->rows[j] == (uint64_t)r + (j - i) &&
		       (g->rows[j] >> v->chunk_shift) == (r >> v->chunk_shift) && gather_has(v, g->rows[j]))
			j++;
		memcpy(g->dst + i * rb, ovs_version_row_ptr(v, rb, r), (j - i) * rb);
		i = j;
	}
}

/* The device path: zero where needed, then one chunked gather kernel. */
static bool gather_device(ovs_exec *x, const ovs_memops *ops, const ovs_version *v, size_t rb, const uint32_t *rows,
			  uint32_t n, void *dst, char *err, size_t errlen)
{
	if (!v || !v->nchunks) {
		ops->fill(x, dst, 0, (size_t)n * rb);
		return true;
	}
	uint32_t *src = malloc((size_t)n * sizeof *src);
	void **bases = malloc((size_t)v->nchunks * sizeof *bases);
	if (!src || !bases) {
		free(src);
		free(bases);
		ovs_err_format(err, errlen, "out of host memory gathering %u rows", n);
		return false;
	}
	uint32_t missing = 0;
	for (uint32_t i = 0; i < n; i++) {
		bool has = gather_has(v, rows[i]);
		src[i] = has ? rows[i] : UINT32_MAX; /* the kernel skips UINT32_MAX */
		missing += !has;
	}
	for (uint32_t j = 0; j < v->nchunks; j++) {
		const ovs_chunk *k = v->chunks[j];
		bases[j] = k ? (char *)k->buf->data + k->off : NULL;
	}
	if (missing)
		ops->fill(x, dst, 0, (size_t)n * rb);
	/* the tables are uploaded before it returns (cuda_memops.c: scratch_up), so they may go now */
	ops->gather_chunked(x, dst, (void *const *)bases, v->nchunks, v->chunk_shift, src, n, rb);
	free(src);
	free(bases);
	return true;
}

bool ovs_version_gather(ovs_exec *x, const ovs_memops *ops, const ovs_version *v, size_t rb, const uint32_t *rows,
			uint32_t n, void *dst, char *err, size_t errlen)
{
	if (!n || !rb)
		return true;
	if (ops->gather_chunked)
		return gather_device(x, ops, v, rb, rows, n, dst, err, errlen);
	gather_host g = { v, rb, rows, dst };
	size_t grain = GATHER_PART_BYTES / rb ? GATHER_PART_BYTES / rb : 1;
	/* the join orders every part's stores before the call returns (exec.h) */
	ovs_parallel_for(x, n, grain, 1, gather_host_range, &g);
	return true;
}
