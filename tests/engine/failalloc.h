/*
 * failalloc.h — allocation-failure injection for the engine's tests, at link level: a test linked
 * with -Wl,--wrap=malloc,--wrap=calloc,... (tests/engine/CMakeLists.txt, check_alloc_fail) sends
 * every allocation the engine and job objects make (they are linked in from the static library)
 * through failalloc.c, which passes it to the real allocator unless it is the armed one. The engine
 * sources are not touched. Only allocations made while armed are counted.
 */
#ifndef OVSTAGE_TESTS_FAILALLOC_H
#define OVSTAGE_TESTS_FAILALLOC_H

#include <stdbool.h>
#include <stdint.h>

/* From now on, the n-th allocation (1-based: malloc, calloc, realloc, aligned_alloc,
 * posix_memalign, strdup, mmap) fails; the ones after it succeed again. */
void failalloc_arm(uint64_t n);
/* Stops counting; returns whether the armed allocation was reached (and failed). */
bool failalloc_disarm(void);
/* Allocations counted since the last arm. */
uint64_t failalloc_count(void);

#endif /* OVSTAGE_TESTS_FAILALLOC_H */
