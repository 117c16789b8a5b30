/*
 * check_mask_bits.c — counting and listing a write mask's set bits (engine/base/mask_bits.h)
 * against a bit-by-bit reference: random masks of every density from empty to full, lengths that
 * end inside a word and on a word boundary, bits set beyond n (ignored), every kind of word range,
 * through a map and without one; the lists of adjacent ranges, written side by side, equal the list
 * of the whole; nothing is written at or beyond out[cap].
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mask_bits.h"

#define GUARD 0xA5A5A5A5u

static uint64_t next(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 11;
}

/* A mask of n elements (and its whole last word, bits beyond n set at random too): density in
 * 1/1024ths, or runs of `run` selected elements when run > 0. */
static uint64_t *make_mask(uint64_t *s, uint32_t n, uint32_t density, uint32_t run)
{
	uint32_t nw = (n + 63) / 64;
	uint64_t *m = calloc(nw ? nw : 1, sizeof *m);
	for (uint32_t i = 0; i < nw * 64; i++) {
		bool on = run ? (i / run) % 3 == 0 : next(s) % 1024 < density;
		if (on)
			m[i / 64] |= (uint64_t)1 << (i % 64);
	}
	return m;
}

/* The reference: bit by bit, elements [w0 * 64, min(w1 * 64, n)). */
static uint32_t ref_list(const uint64_t *m, uint32_t n, uint32_t w0, uint32_t w1, const uint32_t *map, uint32_t *out)
{
	uint32_t k = 0;
	for (uint64_t i = (uint64_t)w0 * 64; i < (uint64_t)w1 * 64 && i < n; i++)
		if ((m[i / 64] >> (i % 64)) & 1) {
			if (out)
				out[k] = map ? map[i] : (uint32_t)i;
			k++;
		}
	return k;
}

/* Lists words [w0, w1) into a buffer with guard entries after cap; checks the entries and the guards. */
static void check_range(const uint64_t *m, uint32_t n, uint32_t w0, uint32_t w1, const uint32_t *map)
{
	uint32_t want = ref_list(m, n, w0, w1, map, NULL);
	ck_assert_uint_eq(ovs_mask_count(m, n, w0, w1), want);
	uint32_t *ref = malloc(((size_t)want + 1) * sizeof *ref), *got = malloc(((size_t)want + 4) * sizeof *got);
	ref_list(m, n, w0, w1, map, ref);
	for (uint32_t j = 0; j < want + 4; j++)
		got[j] = GUARD;
	ck_assert_uint_eq(ovs_mask_list(m, n, w0, w1, map, got, want), want);
	ck_assert_msg(!memcmp(got, ref, (size_t)want * sizeof *got), "list differs: n %u words [%u, %u) map %d", n,
		      w0, w1, map != NULL);
	for (uint32_t j = want; j < want + 4; j++)
		ck_assert_msg(got[j] == GUARD, "entry %u written beyond cap %u (n %u, words [%u, %u))", j, want, n, w0, w1);
	free(ref);
	free(got);
}

START_TEST(test_random_masks)
{
	static const uint32_t dens[] = { 0, 1, 10, 100, 300, 512, 900, 1023, 1024 };
	uint64_t seed = 11;
	for (int t = 0; t < 400; t++) {
		uint32_t n = t < 130 ? (uint32_t)t : (uint32_t)(next(&seed) % 40000);
		uint32_t run = t % 7 == 3 ? 1 + (uint32_t)(next(&seed) % 200) : 0;
		uint64_t *m = make_mask(&seed, n, dens[t % 9], run);
		uint32_t nw = (n + 63) / 64, *map = malloc(((size_t)nw * 64 + 1) * sizeof *map);
		for (uint32_t i = 0; i < nw * 64; i++)
			map[i] = (uint32_t)next(&seed);
		check_range(m, n, 0, nw, NULL);
		check_range(m, n, 0, nw, map);
		check_range(m, n, 0, nw + 5, NULL); /* w1 past the mask: clipped */
		uint32_t a = nw ? (uint32_t)(next(&seed) % nw) : 0, b = a + (nw ? (uint32_t)(next(&seed) % (nw - a + 1)) : 0);
		check_range(m, n, a, b, NULL);
		check_range(m, n, a, b, map);
		check_range(m, n, b, a, NULL); /* empty or reversed: nothing */
		free(map);
		free(m);
	}
}
END_TEST

/* Parts listed side by side into one buffer (as write.c's parallel listing does, each at its prefix)
 * give the whole list: no part writes into its neighbour's entries. */
START_TEST(test_parts_side_by_side)
{
	uint64_t seed = 5;
	for (int t = 0; t < 60; t++) {
		uint32_t n = 1000 + (uint32_t)(next(&seed) % 200000), nw = (n + 63) / 64, grain = 1 + (uint32_t)(next(&seed) % 97);
		uint64_t *m = make_mask(&seed, n, (uint32_t)(next(&seed) % 40), 0);
		uint32_t total = ovs_mask_count(m, n, 0, nw), *whole = malloc(((size_t)total + 1) * sizeof *whole);
		uint32_t *parts = malloc(((size_t)total + 1) * sizeof *parts), at = 0;
		ovs_mask_list(m, n, 0, nw, NULL, whole, total);
		parts[total] = GUARD;
		/* in reverse order, so that a part writing past its end would overwrite a finished neighbour */
		uint32_t nparts = (nw + grain - 1) / grain;
		for (uint32_t p = nparts; p-- > 0;) {
			uint32_t w0 = p * grain, w1 = w0 + grain < nw ? w0 + grain : nw;
			at = ovs_mask_count(m, n, 0, w0);
			uint32_t c = ovs_mask_count(m, n, w0, w1);
			ck_assert_uint_eq(ovs_mask_list(m, n, w0, w1, NULL, parts + at, c), c);
		}
		ck_assert(!memcmp(parts, whole, (size_t)total * sizeof *parts));
		ck_assert_uint_eq(parts[total], GUARD);
		free(parts);
		free(whole);
		free(m);
	}
}
END_TEST

/* The sizes the AVX-512 count takes (64 words and up) and its tail, on a full and a one-bit mask. */
START_TEST(test_count_wide)
{
	for (uint32_t nw = 60; nw < 140; nw++) {
		uint32_t n = nw * 64 - (nw % 3) * 7;
		uint64_t *m = malloc(nw * sizeof *m);
		memset(m, 0xff, nw * sizeof *m);
		ck_assert_uint_eq(ovs_mask_count(m, n, 0, nw), n);
		memset(m, 0, nw * sizeof *m);
		m[nw - 1] = (uint64_t)1 << 63; /* beyond n unless n is a whole number of words */
		ck_assert_uint_eq(ovs_mask_count(m, n, 0, nw), n % 64 ? 0u : 1u);
		m[nw / 2] = 5;
		ck_assert_uint_eq(ovs_mask_count(m, n, 0, nw), n % 64 ? 2u : 3u);
		free(m);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("mask_bits");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_random_masks);
	tcase_add_test(tc, test_parts_side_by_side);
	tcase_add_test(tc, test_count_wide);
	suite_add_tcase(s, tc);
	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
