/* rows_sort.c — sorting and merging row numbers (see rows_sort.h). */
#include "rows_sort.h"

#include <stdint.h>
#include <string.h>

/* Sorts v[0, n) ascending: an insertion sort for a few rows, else an LSD radix sort, four 8-bit
 * passes through tmp (n entries; counts on the stack). O(n): the change set of an ordinal written by
 * several producers is merged on the seal's path, where a comparison sort of 64 K rows took ~5 ms.
 * Without tmp, a shell sort in place (slower, never wrong). */
void ovs_rows_sort(uint32_t *v, uint32_t *tmp, size_t n)
{
	if (n < 64 || !tmp) {
		for (size_t gap = n < 64 ? 1 : n / 2; gap; gap /= 2)
			for (size_t i = gap; i < n; i++)
				for (size_t j = i; j >= gap && v[j - gap] > v[j]; j -= gap) {
					uint32_t t = v[j];
					v[j] = v[j - gap];
					v[j - gap] = t;
				}
		return;
	}
	uint32_t *src = v, *dst = tmp;
	for (int shift = 0; shift < 32; shift += 8) {
		size_t cnt[256] = { 0 };
		for (size_t i = 0; i < n; i++)
			cnt[(src[i] >> shift) & 255]++;
		size_t sum = 0;
		for (int d = 0; d < 256; d++) {
			size_t c = cnt[d];
			cnt[d] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			dst[cnt[(src[i] >> shift) & 255]++] = src[i];
		uint32_t *t = src;
		src = dst;
		dst = t;
	}
	/* four passes: the result is back in v */
}

void ovs_rows_merge_runs(uint32_t *v, uint32_t *tmp, size_t *b, size_t nb)
{
	uint32_t *src = v, *dst = tmp;
	while (nb > 1) {
		size_t m = 0;
		for (size_t i = 0; i < nb; i += 2) {
			size_t lo = b[i], mid = b[i + 1], hi = i + 2 <= nb ? b[i + 2] : mid, x = lo, y = mid, o = lo;
			while (x < mid && y < hi)
				dst[o++] = src[y] < src[x] ? src[y++] : src[x++];
			while (x < mid)
				dst[o++] = src[x++];
			while (y < hi)
				dst[o++] = src[y++];
			b[m++] = lo;
		}
		b[m] = b[nb];
		nb = m;
		uint32_t *t = src;
		src = dst;
		dst = t;
	}
	if (src != v && nb == 1)
		memcpy(v, src, b[1] * sizeof *v);
}

size_t ovs_rows_unique_dense(uint32_t *v, size_t n, uint32_t limit, uint64_t *words)
{
	for (size_t i = 0; i < n; i++) {
		if (v[i] >= limit)
			return SIZE_MAX; /* not the caller's promise: it sorts another way */
		words[v[i] >> 6] |= (uint64_t)1 << (v[i] & 63);
	}
	size_t u = 0, nw = ((size_t)limit + 63) / 64;
	for (size_t k = 0; k < nw; k++) {
		uint64_t w = words[k];
		words[k] = 0;
		while (w) {
			v[u++] = (uint32_t)(k * 64 + (size_t)__builtin_ctzll(w));
			w &= w - 1;
		}
	}
	return u;
}
