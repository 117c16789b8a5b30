/* copy.c — parallel, non-temporal bulk copies (see copy.h). */
#include "copy.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "exec.h"

#define OVS_STREAM_MIN (256u * 1024u)      /* below this, memcpy (the data stays hot anyway) */
#define OVS_PARALLEL_MIN (4u * 1024u * 1024u) /* below this, one thread */

void ovs_copy_stream(void *dst, const void *src, size_t n)
{
#if defined(__x86_64__)
	if (n >= OVS_STREAM_MIN) {
		unsigned char *d = dst;
		const unsigned char *s = src;
		size_t head = (16 - ((uintptr_t)d & 15)) & 15;
		memcpy(d, s, head);
		d += head;
		s += head;
		n -= head;
		size_t blocks = n / 64;
		for (size_t i = 0; i < blocks; i++) {
			__m128i a = _mm_loadu_si128((const __m128i *)(const void *)(s + 0));
			__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
			__m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
			__m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));
			_mm_stream_si128((__m128i *)(void *)(d + 0), a);
			_mm_stream_si128((__m128i *)(void *)(d + 16), b);
			_mm_stream_si128((__m128i *)(void *)(d + 32), c);
			_mm_stream_si128((__m128i *)(void *)(d + 48), e);
			d += 64;
			s += 64;
		}
		memcpy(d, s, n - blocks * 64);
		/* Non-temporal stores are weakly ordered: fence them before anyone is told the copy is
		 * done (the job's completion is a release, but release does not order NT stores). */
		_mm_sfence();
		return;
	}
#endif
	memcpy(dst, src, n);
}

typedef struct copy_ctx {
	unsigned char *dst;       /* destination */
	const unsigned char *src; /* source */
} copy_ctx;

static void copy_range(void *p, size_t lo, size_t hi)
{
	copy_ctx *c = p;
	ovs_copy_stream(c->dst + lo, c->src + lo, hi - lo);
}

/* A list's copies laid end to end, each padded to a cache line: split points in this space fall at
 * multiples of 64 bytes from every copy's start, so with line-aligned destinations (the store's
 * buffers are) no destination line is written by two workers. */
typedef struct copy_list_ctx {
	const ovs_copy_batch *b;               /* the copies */
	size_t off[OVS_COPY_BATCH_MAX + 1];   /* off[i]: copy i's start in the padded space; off[n]: end */
} copy_list_ctx;

#define LINE_UP(n) (((n) + 63u) & ~(size_t)63u)

static void copy_list_range(void *p, size_t lo, size_t hi)
{
	copy_list_ctx *c = p;
	uint32_t a = 0, z = c->b->n; /* the copy holding lo: the last i with off[i] <= lo */
	while (z - a > 1) {
		uint32_t m = a + (z - a) / 2;
		if (c->off[m] <= lo)
			a = m;
		else
			z = m;
	}
	for (uint32_t i = a; i < c->b->n && c->off[i] < hi; i++) {
		const ovs_copy_seg *g = &c->b->seg[i];
		size_t from = lo > c->off[i] ? lo - c->off[i] : 0, to = hi - c->off[i];
		if (to > g->bytes)
			to = g->bytes; /* the padding is not copied */
		if (from < to)
			ovs_copy_stream((unsigned char *)g->dst + from, (const unsigned char *)g->src + from, to - from);
	}
}

void ovs_copy_flush(jobs_worker *w, ovs_copy_batch *b)
{
	copy_list_ctx c;
	c.b = b;
	c.off[0] = 0;
	for (uint32_t i = 0; i < b->n; i++)
		c.off[i + 1] = c.off[i] + LINE_UP(b->seg[i].bytes);
	if (b->n == 1 || !w || c.off[b->n] < OVS_PARALLEL_MIN) {
		for (uint32_t i = 0; i < b->n; i++)
			ovs_copy(w, b->seg[i].dst, b->seg[i].src, b->seg[i].bytes);
	} else {
		ovs_exec x = ovs_exec_cpu(w);
		/* pieces of at least 512 KiB: 16 of them for eight 1 MiB columns */
		ovs_parallel_for(&x, c.off[b->n], OVS_PARALLEL_MIN / 8, 64, copy_list_range, &c);
	}
	b->n = 0;
}

void ovs_copy_defer(jobs_worker *w, ovs_copy_batch *b, void *dst, const void *src, size_t n)
{
	if (!n)
		return;
	if (b->n == OVS_COPY_BATCH_MAX)
		ovs_copy_flush(w, b);
	b->seg[b->n++] = (ovs_copy_seg){ dst, src, n };
}

void ovs_copy(jobs_worker *w, void *dst, const void *src, size_t n)
{
	if (!w || n < OVS_PARALLEL_MIN) {
		ovs_copy_stream(dst, src, n);
		return;
	}
	/* Halves down to OVS_PARALLEL_MIN / 2, split on cache lines (no line is written by two). */
	copy_ctx c = { dst, src };
	ovs_exec x = ovs_exec_cpu(w);
	ovs_parallel_for(&x, n, OVS_PARALLEL_MIN / 2, 64, copy_range, &c);
}
