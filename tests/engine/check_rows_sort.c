/*
 * check_rows_sort.c — the seal's row sorting (engine/base/rows_sort.h): the radix sort (with and
 * without scratch) and the merge of sorted runs, against qsort of the same numbers, over random
 * inputs: run counts 0..9 (the change sets of that many producers), empty runs, duplicates within
 * and across runs, values near 2^32; the bitmap sort-and-dedup of values below a limit against
 * qsort + dedup (its scratch left zero, a value at the limit refused with v untouched).
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rows_sort.h"

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static uint32_t next(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(*s >> 32);
}

/* A random value: small (many duplicates), anywhere, or near the top. */
static uint32_t value(uint64_t *s)
{
	uint32_t k = next(s) % 3;
	return k == 0 ? next(s) % 64 : k == 1 ? next(s) : UINT32_MAX - next(s) % 64;
}

START_TEST(test_sort_matches_qsort)
{
	uint64_t seed = 7;
	for (int t = 0; t < 300; t++) {
		size_t n = t < 100 ? (size_t)t : next(&seed) % 20000;
		uint32_t *v = malloc((n + 1) * sizeof *v), *w = malloc((n + 1) * sizeof *w), *tmp = malloc((n + 1) * sizeof *tmp);
		for (size_t i = 0; i < n; i++)
			v[i] = w[i] = value(&seed);
		ovs_rows_sort(v, t % 2 ? tmp : NULL, n);
		qsort(w, n, sizeof *w, cmp_u32);
		ck_assert_msg(!n || !memcmp(v, w, n * sizeof *v), "sort of %zu (scratch %d) differs", n, t % 2);
		free(v);
		free(w);
		free(tmp);
	}
}
END_TEST

START_TEST(test_merge_runs_matches_qsort)
{
	uint64_t seed = 11;
	for (int t = 0; t < 2000; t++) {
		size_t nb = next(&seed) % 10, b[11], n = 0;
		size_t len[10];
		for (size_t i = 0; i < nb; i++) {
			len[i] = next(&seed) % 5 == 0 ? 0 : next(&seed) % (t < 1000 ? 40 : 3000);
			n += len[i];
		}
		uint32_t *v = malloc((n + 1) * sizeof *v), *w = malloc((n + 1) * sizeof *w), *tmp = malloc((n + 1) * sizeof *tmp);
		b[0] = 0;
		for (size_t i = 0, k = 0; i < nb; i++) {
			for (size_t j = 0; j < len[i]; j++)
				v[k + j] = value(&seed);
			qsort(v + k, len[i], sizeof *v, cmp_u32); /* each run sorted */
			k += len[i];
			b[i + 1] = k;
		}
		memcpy(w, v, n * sizeof *v);
		ovs_rows_merge_runs(v, tmp, b, nb);
		qsort(w, n, sizeof *w, cmp_u32);
		ck_assert_msg(!n || !memcmp(v, w, n * sizeof *v), "merge of %zu runs, %zu rows, differs", nb, n);
		free(v);
		free(w);
		free(tmp);
	}
}
END_TEST

START_TEST(test_unique_dense_matches_qsort)
{
	uint64_t seed = 13;
	for (int t = 0; t < 600; t++) {
		uint32_t limit = t < 200 ? (uint32_t)t + 1 : next(&seed) % 200000 + 1;
		size_t n = next(&seed) % (t % 3 == 0 ? 64 : 3 * (size_t)limit + 1);
		size_t nw = ((size_t)limit + 63) / 64;
		uint32_t *v = malloc((n + 1) * sizeof *v), *w = malloc((n + 1) * sizeof *w);
		uint64_t *words = calloc(nw, sizeof *words);
		for (size_t i = 0; i < n; i++)
			v[i] = w[i] = t % 2 ? next(&seed) % limit : limit - 1 - next(&seed) % (limit < 8 ? limit : 8);
		size_t u = ovs_rows_unique_dense(v, n, limit, words);
		qsort(w, n, sizeof *w, cmp_u32);
		size_t m = 0;
		for (size_t i = 0; i < n; i++)
			if (m == 0 || w[m - 1] != w[i])
				w[m++] = w[i];
		ck_assert_msg(u == m, "limit %u, %zu values: %zu unique, expected %zu", limit, n, u, m);
		ck_assert_msg(!m || !memcmp(v, w, m * sizeof *v), "limit %u, %zu values: rows differ", limit, n);
		for (size_t k = 0; k < nw; k++)
			ck_assert_msg(words[k] == 0, "limit %u: scratch word %zu left %llx", limit, k, (unsigned long long)words[k]);
		if (n) { /* a value at the limit: refused, v as it was */
			v[n / 2] = limit;
			memcpy(w, v, n * sizeof *v);
			ck_assert(ovs_rows_unique_dense(v, n, limit, words) == SIZE_MAX);
			ck_assert_msg(!memcmp(v, w, n * sizeof *v), "a refused call changed v");
			memset(words, 0, nw * sizeof *words);
		}
		free(v);
		free(w);
		free(words);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rows_sort");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_sort_matches_qsort);
	tcase_add_test(tc, test_merge_runs_matches_qsort);
	tcase_add_test(tc, test_unique_dense_matches_qsort);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
