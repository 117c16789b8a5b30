/*
 * mask_bits.h — the set bits of a write's mask: counting them and listing their positions.
 *
 * A mask selects logical elements 0..n-1: element i is selected when bit i % 64 of word i / 64 is
 * set; bits at or beyond n are ignored. Both functions work on a range of words [w0, w1) so that a
 * large mask can be split across workers by blocks of words (write.c: a prefix count per block
 * tells each part where its entries start).
 *
 * Cost (docs/performance.md, session 18): a 1 % mask over 4 Mi elements is 65,536 words; counting
 * them takes a popcount per word (an AVX-512 VPOPCNTDQ loop where the CPU has it, 8 words per
 * instruction); listing takes one pass with a branch only for words holding more than one set bit,
 * so that a random mask (half its words empty, half not, in no pattern a predictor learns) does
 * not mispredict on every word.
 *
 * Thread safety: pure functions of their arguments; any thread.
 */
#ifndef OVSTAGE_ENGINE_MASK_BITS_H
#define OVSTAGE_ENGINE_MASK_BITS_H

#include <stdint.h>

/* Bits set in words [w0, w1) of mask[0 .. n) (w1 is clipped to the mask's (n + 63) / 64 words). */
uint32_t ovs_mask_count(const uint64_t *mask, uint32_t n, uint32_t w0, uint32_t w1);

/* The positions of the set bits of words [w0, w1) of mask[0 .. n), in increasing order, into
 * out[0 .. cap), each through map when map is set (out[j] = map[position]); cap is exactly the
 * number of those bits (ovs_mask_count of the same words). Nothing is written at or beyond
 * out[cap], so parts of one list may be filled concurrently. Returns the number written (= cap). */
uint32_t ovs_mask_list(const uint64_t *mask, uint32_t n, uint32_t w0, uint32_t w1, const uint32_t *map,
		       uint32_t *out, uint32_t cap);

#endif /* OVSTAGE_ENGINE_MASK_BITS_H */
