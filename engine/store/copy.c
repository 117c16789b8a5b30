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
