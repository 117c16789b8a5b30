/*
 * seal_scatter.c — ovstage_bench_seal_scatter: the cost of a seal of scattered writes.
 *
 * One stage, one float32 column over P prims (default 1 M, written in full first), then `steps`
 * steps of: a masked write of K rows picked at random (default 1,000; a fixed seed, so every build
 * writes the same rows), then a seal of its ordinal (advance_write_floor ALL + wait), which alone
 * is timed. Prints the median, p10 and p90 per-seal time in µs, one line:
 *   seal_scatter P=<P> K=<K> steps=<n> median_us=<m> p10_us=<a> p90_us=<b>
 *
 * Public API only, so bench/tools/seal_ab.sh compiles this same file against another revision's
 * library and runs both alternately in one run (the figure of a branch beside main's).
 * Usage: ovstage_bench_seal_scatter [P [K [steps]]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : (x > y);
}

/* xorshift64*: the same rows on every build */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

static bool write_masked(stg *s, ovstage_query_handle_t q, ovx_token_t attr, float *src, size_t P,
			 const uint64_t *mask, uint64_t ord)
{
	ftensor ft;
	ovstage_write_data_t w = stg_fdata(&ft, src, (int64_t)P, 1);
	if (mask) {
		w.mask = mask;
		w.count = (uint32_t)P;
	}
	ovx_string_or_token_t a = { attr, { NULL, 0 } };
	return stg_wait(s, ovstage_write_attribute(s->st, q, a, ord, w, OVSTAGE_PRIM_MODE_UPSERT), "write");
}

int main(int argc, char **argv)
{
	size_t P = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)1 << 20;
	size_t K = argc > 2 ? strtoull(argv[2], NULL, 10) : 1000;
	size_t steps = argc > 3 ? strtoull(argv[3], NULL, 10) : 200;
	if (!P || !K || K > P || !steps) {
		fprintf(stderr, "usage: %s [P [K [steps]]] (0 < K <= P, steps > 0)\n", argv[0]);
		return 2;
	}
	enum { WARMUP = 20 };
	size_t words = (P + 63) / 64;
	float *src = malloc(P * sizeof *src);
	uint64_t *mask = malloc(words * sizeof *mask);
	uint64_t *t = malloc(steps * sizeof *t);
	stg s;
	if (!src || !mask || !t || !stg_open(&s, "seal_scatter"))
		return 1;
	for (size_t i = 0; i < P; i++)
		src[i] = (float)i;
	ovx_primpath_list_t list;
	ovstage_query_handle_t q = stg_query(&s, "big", P, &list, NULL);
	ovx_token_t attr = stg_token(&s, "scatter_f32");
	uint64_t ord = 1, seed = 0x9e3779b97f4a7c15ull;
	bool ok = q != OVSTAGE_INVALID_QUERY_HANDLE && attr && write_masked(&s, q, attr, src, P, NULL, ord) &&
		  stg_seal(&s, ord);
	for (size_t k = 0; ok && k < WARMUP + steps; k++) {
		ord++;
		memset(mask, 0, words * sizeof *mask);
		for (size_t n = 0; n < K;) {
			size_t r = (size_t)(rnd(&seed) % P);
			if (!(mask[r / 64] >> (r % 64) & 1)) {
				mask[r / 64] |= (uint64_t)1 << (r % 64);
				n++;
			}
		}
		ok = write_masked(&s, q, attr, src, P, mask, ord);
		uint64_t t0 = now_ns();
		ok = ok && stg_seal(&s, ord);
		if (k >= WARMUP)
			t[k - WARMUP] = now_ns() - t0;
	}
	if (ok) {
		qsort(t, steps, sizeof *t, cmp_u64);
		printf("seal_scatter P=%zu K=%zu steps=%zu median_us=%.1f p10_us=%.1f p90_us=%.1f\n", P, K, steps,
		       (double)t[steps / 2] / 1e3, (double)t[steps / 10] / 1e3, (double)t[steps * 9 / 10] / 1e3);
	}
	stg_release_query(&s, q, list);
	stg_close(&s);
	free(src);
	free(mask);
	free(t);
	return ok ? 0 : 1;
}
