/*
 * bitmap.h — presence bitmaps (bit r = row r holds a value). Plain, non-atomic operations: a bitmap
 * is built by the sealer alone before the version that holds it is published, and read-only after.
 * Prefix operations go a word at a time.
 */
#ifndef OVSTAGE_ENGINE_BITMAP_H
#define OVSTAGE_ENGINE_BITMAP_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static inline void bit_set(uint64_t *bm, uint32_t r)
{
	bm[r / 64] |= (uint64_t)1 << (r % 64);
}

static inline void bit_clear(uint64_t *bm, uint32_t r)
{
	bm[r / 64] &= ~((uint64_t)1 << (r % 64));
}

/* Sets bits [0, n) (whole words at once). */
static inline void bits_set_prefix(uint64_t *bm, uint32_t n)
{
	memset(bm, 0xff, (size_t)(n / 64) * sizeof *bm);
	if (n % 64)
		bm[n / 64] |= ((uint64_t)1 << (n % 64)) - 1;
}

/* Whether bits [0, n) are all set. */
static inline bool bits_all_prefix(const uint64_t *bm, uint32_t n)
{
	for (uint32_t w = 0; w < n / 64; w++)
		if (bm[w] != ~(uint64_t)0)
			return false;
	return !(n % 64) || (bm[n / 64] | ~(((uint64_t)1 << (n % 64)) - 1)) == ~(uint64_t)0;
}

#endif /* OVSTAGE_ENGINE_BITMAP_H */
