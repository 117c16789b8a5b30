/*
 * check_soak.c — a soak: OVSTAGE_SOAK_ORDINALS ordinals (default 2000; the long test, ctest -C soak,
 * runs 1000000) of write + seal + read of one 4096-prim float column, with a read group held across
 * the next ordinal, on the default retention. After each ordinal the stage's memory statistics are
 * taken (ovstage_ext_get_memory_stats, quiescent: exact) and:
 *  - the live buffers (buffers held, less the pooled ones) stay within a bound that does not grow
 *    with the ordinal count: retention versions + the held group's version + the one being built;
 *  - the live bytes stay within that many column sizes;
 *  - every value read is the one written at that ordinal.
 * The curve (ordinal, unsealed, buffer, pooled bytes, buffers) is written every 1/1000th of the run
 * to OVSTAGE_SOAK_CURVE (default soak_curve.tsv in the working directory).
 */
#include <check.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ovstage/ovstage.h>
#include <ovstage/ovstage_ext.h>
#include <ovx/path_dictionary/path_dictionary.h>

#include "stage_test_util.h"

#define NPRIMS 4096

static uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);
	return v && *v ? strtoull(v, NULL, 10) : dflt;
}

START_TEST(test_soak_live_buffers_bounded)
{
	uint64_t nord = env_u64("OVSTAGE_SOAK_ORDINALS", 2000);
	const char *curve_path = getenv("OVSTAGE_SOAK_CURVE");
	FILE *curve = fopen(curve_path && *curve_path ? curve_path : "soak_curve.tsv", "w");
	ck_assert_msg(curve != NULL, "cannot write the memory curve");
	fprintf(curve, "ordinal\tunsealed_bytes\tbuffer_bytes\tpooled_bytes\tbuffers\tlive_buffers\n");

	ovstage_instance_t *st;
	ck_assert_int_eq(ovstage_create_instance(NULL, &st), OVSTAGE_OK);
	path_dictionary_instance_t *pd = ovstage_get_path_dictionary(st);
	char (*names)[24] = malloc(NPRIMS * sizeof *names);
	const char **paths = malloc(NPRIMS * sizeof *paths);
	for (int i = 0; i < NPRIMS; i++) {
		snprintf(names[i], sizeof names[i], "/P%d", i);
		paths[i] = names[i];
	}
	ovstage_query_handle_t q = tst_query_of(st, pd, paths, NPRIMS, NULL);
	ovx_token_t a = tst_tok(pd, "v");
	float *vals = malloc(NPRIMS * sizeof *vals);
	const uint64_t col_bytes = NPRIMS * sizeof(float);
	/* retention (default 2) + the held group's version + the version a seal builds */
	const uint64_t live_bound = 2 + 1 + 1;
	ovstage_read_group_t held;
	bool have_held = false;
	uint64_t max_live = 0, step = nord / 1000 ? nord / 1000 : 1;
	for (uint64_t o = 1; o <= nord; o++) {
		for (int i = 0; i < NPRIMS; i++)
			vals[i] = (float)((o * 7 + (uint64_t)i) % 1000003);
		tst_tensor t;
		tst_wait_ok(st, ovstage_write_attribute(st, q, tst_attr(a), o, tst_wdata(&t, vals, NPRIMS, kDLFloat, 32, 1),
							OVSTAGE_PRIM_MODE_UPSERT));
		ovstage_write_floor_desc_t d = { o, OVSTAGE_SCOPE_ALL, NULL, 0 };
		tst_wait_ok(st, ovstage_advance_write_floor(st, &d));
		ovstage_read_handle_t rh;
		ovstage_ordinal_range_t rg = { 0, o, false };
		tst_wait_ok(st, ovstage_read_attributes(st, q, &a, 1, rg, &rh));
		ovstage_read_group_t g;
		int ngroups = 0;
		while (ovstage_fetch_read_next(st, rh, OVSTAGE_TIMEOUT_INFINITE, &g) == OVSTAGE_OK) {
			ck_assert_msg(!g.data.index_map && !g.data.mask && g.prims.index_map == NULL, "unexpected maps");
			const float *p = (const float *)((const uint8_t *)g.data.tensors[0].data + g.data.tensors[0].byte_offset);
			for (uint32_t j = 0; j < g.prims.count; j++)
				ck_assert_msg(p[j] == vals[g.prims.offset + j], "ordinal %" PRIu64 ": prim %u reads %f", o,
					      g.prims.offset + j, (double)p[j]);
			/* release the group held since the previous ordinal; hold the first one of this one */
			if (ngroups++ == 0) {
				if (have_held)
					ck_assert_int_eq(ovstage_release_group(st, &held), OVSTAGE_OK);
				held = g;
				have_held = true;
			} else {
				ck_assert_int_eq(ovstage_release_group(st, &g), OVSTAGE_OK);
			}
		}
		ck_assert_int_ge(ngroups, 1);
		tst_wait_ok(st, ovstage_release_read(st, rh));
		ovstage_ext_memory_stats_t ms;
		ck_assert_int_eq(ovstage_ext_get_memory_stats(st, &ms), OVSTAGE_OK);
		uint64_t live_bytes = ms.buffer_bytes - ms.pooled_bytes;
		/* live buffers: the pool's are counted in buffers too; their bytes tell them apart */
		uint64_t live = (live_bytes + col_bytes - 1) / col_bytes;
		if (live > max_live)
			max_live = live;
		ck_assert_msg(live_bytes <= live_bound * col_bytes,
			      "ordinal %" PRIu64 ": %" PRIu64 " live bytes, bound %" PRIu64 " (%" PRIu64 " columns)", o,
			      live_bytes, live_bound * col_bytes, live_bound);
		ck_assert_msg(ms.unsealed_bytes == 0, "ordinal %" PRIu64 ": %" PRIu64 " unsealed bytes after the seal", o,
			      ms.unsealed_bytes);
		if (o % step == 0 || o == nord)
			fprintf(curve, "%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\n", o,
				ms.unsealed_bytes, ms.buffer_bytes, ms.pooled_bytes, ms.buffers, live);
	}
	if (have_held)
		ck_assert_int_eq(ovstage_release_group(st, &held), OVSTAGE_OK);
	fclose(curve);
	fprintf(stderr, "check_soak: %" PRIu64 " ordinals, at most %" PRIu64 " live column buffers (bound %" PRIu64 ")\n",
		nord, max_live, live_bound);
	tst_wait_ok(st, ovstage_release_query(st, q));
	ck_assert_int_eq(ovstage_destroy_instance(st), OVSTAGE_OK);
	free(vals);
	free(paths);
	free(names);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("soak");
	TCase *tc = tcase_create("soak");
	tcase_set_timeout(tc, 0); /* the long run's length is the caller's choice (no timing here) */
	tcase_add_test(tc, test_soak_live_buffers_bounded);
	suite_add_tcase(su, tc);
	SRunner *sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
