/*
 * failalloc.c — the --wrap targets of failalloc.h. Each __wrap_X counts the allocation while armed
 * and fails the armed one (NULL with errno ENOMEM; MAP_FAILED for mmap); otherwise it calls
 * __real_X (the C library's, or the sanitizer's interceptor). Counting is one atomic counter, so
 * allocations on any thread count; check_alloc_fail runs the stage without workers
 * (OVSTAGE_WORKERS=0) so that the count, and which allocation fails, is the same on every run.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "failalloc.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
int __real_posix_memalign(void **out, size_t align, size_t n);
char *__real_strdup(const char *s);
void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);
int __wrap_posix_memalign(void **out, size_t align, size_t n);
char *__wrap_strdup(const char *s);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);

static _Atomic bool armed;
static _Atomic uint64_t target, counted;
static _Atomic bool hit;

void failalloc_arm(uint64_t n)
{
	/* relaxed: the test arms and disarms on its own thread between API calls; the counters are
	 * read back on that thread too (workers, when there are any, race benignly on the count). */
	atomic_store_explicit(&counted, 0, memory_order_relaxed);
	atomic_store_explicit(&target, n, memory_order_relaxed);
	atomic_store_explicit(&hit, false, memory_order_relaxed);
	atomic_store_explicit(&armed, true, memory_order_relaxed);
}

bool failalloc_disarm(void)
{
	atomic_store_explicit(&armed, false, memory_order_relaxed); /* relaxed: see failalloc_arm */
	return atomic_load_explicit(&hit, memory_order_relaxed);
}

uint64_t failalloc_count(void)
{
	return atomic_load_explicit(&counted, memory_order_relaxed); /* relaxed: see failalloc_arm */
}

/* Whether this allocation is the one to fail. */
static bool fail_now(void)
{
	/* relaxed: a counter; which allocation is "the n-th" needs no ordering with anything else */
	if (!atomic_load_explicit(&armed, memory_order_relaxed))
		return false;
	uint64_t k = atomic_fetch_add_explicit(&counted, 1, memory_order_relaxed) + 1;
	if (k != atomic_load_explicit(&target, memory_order_relaxed))
		return false;
	atomic_store_explicit(&hit, true, memory_order_relaxed);
	errno = ENOMEM;
	return true;
}

void *__wrap_malloc(size_t n)
{
	return fail_now() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
	return fail_now() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
	return fail_now() ? NULL : __real_realloc(p, n);
}

void *__wrap_aligned_alloc(size_t align, size_t n)
{
	return fail_now() ? NULL : __real_aligned_alloc(align, n);
}

int __wrap_posix_memalign(void **out, size_t align, size_t n)
{
	return fail_now() ? ENOMEM : __real_posix_memalign(out, align, n);
}

char *__wrap_strdup(const char *s)
{
	return fail_now() ? NULL : __real_strdup(s);
}

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return fail_now() ? MAP_FAILED : __real_mmap(addr, len, prot, flags, fd, off);
}
