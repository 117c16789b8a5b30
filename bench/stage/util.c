/* util.c — clocks, percentiles, pre-faulted memory and the memcpy peers (the table: ../common/report.c). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "bench.h"

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

double pct_us(uint64_t *ns, size_t n, double p)
{
	if (!n)
		return -1;
	qsort(ns, n, sizeof *ns, cmp_u64);
	size_t i = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);
	return (double)ns[i < n ? i : n - 1] / 1000.0;
}

void *alloc_prefaulted(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	memset(p, 0, bytes); /* resident and written: no fault, no zero-page sharing */
	return p;
}

void free_prefaulted(void *p, size_t bytes)
{
	if (p)
		munmap(p, bytes);
}

void fill_pattern(void *p, size_t bytes, uint32_t seed)
{
	float *f = p;
	size_t n = bytes / sizeof *f;
	for (size_t i = 0; i < n; i++)
		f[i] = (float)((i * 2654435761u + seed) & 0xffffff);
}

uint64_t memcpy_ns(void *dst, const void *src, size_t n)
{
	uint64_t t0 = now_ns();
	memcpy(dst, src, n);
	__asm__ __volatile__("" ::"r"(dst) : "memory");
	return now_ns() - t0;
}

/* Our own streaming copy for the "better" peer: 64-byte blocks of non-temporal 16-byte stores. */
static void copy_nt(unsigned char *d, const unsigned char *s, size_t n)
{
#if defined(__x86_64__)
	size_t head = (16 - ((uintptr_t)d & 15)) & 15;
	if (head > n)
		head = n;
	memcpy(d, s, head);
	d += head, s += head, n -= head;
	size_t blocks = n / 64;
	for (size_t i = 0; i < blocks; i++, d += 64, s += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)(const void *)s);
		__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
		__m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));
		_mm_stream_si128((__m128i *)(void *)d, a);
		_mm_stream_si128((__m128i *)(void *)(d + 16), b);
		_mm_stream_si128((__m128i *)(void *)(d + 32), c);
		_mm_stream_si128((__m128i *)(void *)(d + 48), e);
	}
	memcpy(d, s, n - blocks * 64);
	_mm_sfence();
#else
	memcpy(d, s, n);
#endif
}

typedef struct nt_part {
	unsigned char *d;
	const unsigned char *s;
	size_t n;
} nt_part;

static void *nt_thread(void *arg)
{
	nt_part *p = arg;
	copy_nt(p->d, p->s, p->n);
	return NULL;
}

/* Threads are started before the clock and released together; the caller's thread copies one part.
 * Thread start-up is included (the engine's workers exist already, so this favours the peer only by
 * not counting a wake-up; it counts a clone instead). */
uint64_t memcpy_nt_threads_ns(void *dst, const void *src, size_t n, int threads)
{
	if (threads < 1)
		threads = 1;
	if (threads > 16)
		threads = 16;
	nt_part parts[16];
	pthread_t th[16];
	size_t chunk = (n / (size_t)threads + 63) & ~(size_t)63;
	for (int i = 0; i < threads; i++) {
		size_t off = chunk * (size_t)i;
		parts[i].d = (unsigned char *)dst + off;
		parts[i].s = (const unsigned char *)src + off;
		parts[i].n = off >= n ? 0 : (n - off < chunk ? n - off : chunk);
	}
	uint64_t t0 = now_ns();
	for (int i = 1; i < threads; i++)
		if (pthread_create(&th[i], NULL, nt_thread, &parts[i]) != 0)
			return 0;
	nt_thread(&parts[0]);
	for (int i = 1; i < threads; i++)
		pthread_join(th[i], NULL);
	return now_ns() - t0;
}

void progress(const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	fputs("  ", stderr);
	vfprintf(stderr, f, ap);
	fputc('\n', stderr);
	va_end(ap);
}
