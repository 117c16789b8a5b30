/*
 * check_shared_dictionary.c — one path dictionary shared by every live instance (as in ovstage
 * 0.2.1): created with the first instance, destroyed with the last. Tokens, paths and path lists
 * made through one instance's dictionary are valid in every other live instance and mean the same
 * thing there; NVIDIA's package docstring example (a PathDictionary backed by its own stage, used
 * with a separate Stage) works. The stress tests create and destroy instances from many more
 * threads than cores while others intern and look up, and check that equal strings give equal
 * tokens everywhere and that the dictionary's reference count equals the live instances.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ovstage/ovstage.h>
#include <ovx/path_dictionary/path_dictionary.h>

#include "path_dict_shared.h"
#include "stage_test_util.h"

static ovstage_instance_t *make(const char *name)
{
	ovstage_instance_desc_t d = { name };
	ovstage_instance_t *st = NULL;
	ck_assert_msg(ovstage_create_instance(&d, &st) == OVSTAGE_OK, "create: %s", tst_last_error());
	return st;
}

static void destroy(ovstage_instance_t *st)
{
	ck_assert_msg(ovstage_destroy_instance(st) == OVSTAGE_OK, "destroy: %s", tst_last_error());
}

/* The docstring example: a dictionary borrowed from one stage (the Python PathDictionary() owns a
 * private backing stage), a path list made through it, and a separate stage that writes 1.5 through
 * a query of that list and reads [1.5] back. */
START_TEST(test_docstring_example)
{
	ovstage_instance_t *backing = make("path-dictionary backing stage");
	path_dictionary_instance_t *pd = ovstage_get_path_dictionary(backing);
	ovx_string_t s = { "/World/Cube", 11 };
	ovx_primpath_list_t list = 0;
	ck_assert_int_eq(path_dictionary_create_path_list_from_strings(pd, &s, 1, &list).status, OVX_API_SUCCESS);
	ovstage_instance_t *stage = make("stage");
	ovstage_query_handle_t q = 0;
	ck_assert_msg(ovstage_query_from_path_list(stage, list, &q) == OVSTAGE_OK, "query_from_path_list: %s",
		      tst_last_error());
	float v = 1.5f;
	tst_tensor tt;
	ovstage_write_data_t w = tst_wdata(&tt, &v, 1, kDLFloat, 32, 1);
	ovx_string_or_token_t attr = { 0, { "size", 4 } };
	tst_wait_ok(stage, ovstage_write_attribute(stage, q, attr, 1, w, OVSTAGE_PRIM_MODE_UPSERT));
	ovstage_write_floor_desc_t f = { 1, OVSTAGE_SCOPE_ALL, NULL, 0 };
	tst_wait_ok(stage, ovstage_advance_write_floor(stage, &f));
	/* the attribute token, interned by the write through the stage, is the backing stage's too */
	ovx_token_t tok = tst_tok(pd, "size");
	ovstage_read_handle_t r = 0;
	ovstage_ordinal_range_t latest = { 0, 1, false };
	ovstage_enqueue_result_t e = ovstage_read_attributes(stage, q, &tok, 1, latest, &r);
	ck_assert_msg(e.status == OVSTAGE_OK, "read: %s", tst_last_error());
	ovstage_read_group_t g;
	ck_assert_int_eq(ovstage_fetch_read_next(stage, r, OVSTAGE_TIMEOUT_INFINITE, &g), OVSTAGE_OK);
	ck_assert_uint_eq(g.attribute, tok);
	ck_assert_int_eq(g.data.tensors[0].shape[0], 1);
	ck_assert(((const float *)g.data.tensors[0].data)[0] == 1.5f);
	ck_assert_int_eq(ovstage_release_group(stage, &g), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_fetch_read_next(stage, r, OVSTAGE_TIMEOUT_INFINITE, &g), OVSTAGE_ERROR_END_OF_ITERATION);
	tst_wait_ok(stage, ovstage_release_read(stage, r));
	tst_wait_ok(stage, e);
	tst_wait_ok(stage, ovstage_release_query(stage, q));
	ck_assert_int_eq(path_dictionary_release_path_list_reference(pd, list).status, OVX_API_SUCCESS);
	destroy(stage);
	destroy(backing);
}
END_TEST

/* Both instances hand out the same dictionary; tokens, paths and lists mean the same in each. */
START_TEST(test_same_meaning_in_every_instance)
{
	ovstage_instance_t *a = make("A"), *b = make("B");
	path_dictionary_instance_t *pa = ovstage_get_path_dictionary(a), *pb = ovstage_get_path_dictionary(b);
	ck_assert_ptr_eq(pa, pb);
	ovx_token_t ta = tst_tok(pa, "mass"), tb = tst_tok(pb, "mass");
	ck_assert_uint_eq(ta, tb);
	ovx_string_t back;
	ck_assert_int_eq(path_dictionary_get_strings_from_tokens(pb, &ta, 1, &back).status, OVX_API_SUCCESS);
	ck_assert_int_eq((int)back.length, 4);
	ck_assert(memcmp(back.ptr, "mass", 4) == 0);
	ovx_string_t ps = { "/W/X", 4 };
	ovx_primpath_t p1, p2;
	ck_assert_int_eq(path_dictionary_create_paths_from_strings(pa, &ps, 1, &p1).status, OVX_API_SUCCESS);
	ck_assert_int_eq(path_dictionary_create_paths_from_strings(pb, &ps, 1, &p2).status, OVX_API_SUCCESS);
	ck_assert_uint_eq(p1, p2);
	/* a list of A: B references, queries and releases it */
	ovx_primpath_list_t l = 0;
	ck_assert_int_eq(path_dictionary_create_path_list_from_paths(pa, &p1, 1, &l).status, OVX_API_SUCCESS);
	ck_assert_int_eq(path_dictionary_add_path_list_reference(pb, l).status, OVX_API_SUCCESS);
	ovstage_query_handle_t qa, qb;
	ck_assert_int_eq(ovstage_query_from_path_list(a, l, &qa), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_query_from_path_list(b, l, &qb), OVSTAGE_OK);
	/* a write through B by A's token lands on B's column of that name */
	float v = 7.f;
	tst_tensor tt;
	ovstage_write_data_t w = tst_wdata(&tt, &v, 1, kDLFloat, 32, 1);
	tst_wait_ok(b, ovstage_write_attribute(b, qb, tst_attr(ta), 1, w, OVSTAGE_PRIM_MODE_UPSERT));
	tst_wait_ok(b, ovstage_release_query(b, qb));
	tst_wait_ok(a, ovstage_release_query(a, qa));
	ck_assert_int_eq(path_dictionary_release_path_list_reference(pa, l).status, OVX_API_SUCCESS);
	ck_assert_int_eq(path_dictionary_release_path_list_reference(pb, l).status, OVX_API_SUCCESS);
	/* released through either: gone for both */
	ovx_api_result_t dead = path_dictionary_add_path_list_reference(pa, l);
	ck_assert_int_eq(dead.status, OVX_API_ERROR);
	path_dictionary_release_error(pa, dead.error);
	/* the dictionary outlives A while B lives */
	destroy(a);
	ck_assert_int_eq(path_dictionary_get_strings_from_tokens(pb, &ta, 1, &back).status, OVX_API_SUCCESS);
	ck_assert(memcmp(back.ptr, "mass", 4) == 0);
	destroy(b);
}
END_TEST

/* Created with the first instance, destroyed with the last: the reference count follows the live
 * instances, and a new first instance gets a fresh dictionary. */
START_TEST(test_lifetime_follows_instances)
{
	ck_assert_uint_eq(ovs_pd_shared_refs(), 0);
	ovstage_instance_t *a = make("A");
	ck_assert_uint_eq(ovs_pd_shared_refs(), 1);
	ovstage_instance_t *b = make("B");
	ck_assert_uint_eq(ovs_pd_shared_refs(), 2);
	path_dictionary_instance_t *pd = ovstage_get_path_dictionary(a);
	tst_tok(pd, "only-in-the-first-dictionary");
	destroy(a);
	ck_assert_uint_eq(ovs_pd_shared_refs(), 1);
	destroy(b);
	ck_assert_uint_eq(ovs_pd_shared_refs(), 0);
	ovstage_instance_t *c = make("C");
	/* fresh: only what a new instance interns itself (the derived column names) */
	ck_assert_uint_eq(ovs_pd_shared_refs(), 1);
	ck_assert_uint_lt(ovs_pd_token_count(ovs_pd_from_instance(ovstage_get_path_dictionary(c))), 8);
	destroy(c);
}
END_TEST

/* ---- stress --------------------------------------------------------------------------------------- */

#define STRESS_THREADS 24 /* many more than the cores of a CI machine */
#define STRESS_ROUNDS 40
#define STRESS_NAMES 64

/* Equal strings must give equal tokens in every instance while the dictionary lives: the first
 * thread to intern name i records its token here; every later one compares. */
static _Atomic uint64_t g_token_of[STRESS_NAMES];
static ovstage_instance_t *g_holder; /* keeps the dictionary alive in the pinned stress */

static void *churn(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	for (int round = 0; round < STRESS_ROUNDS; round++) {
		ovstage_instance_t *st = NULL;
		ovstage_instance_desc_t d = { "churn" };
		if (ovstage_create_instance(&d, &st) != OVSTAGE_OK)
			return "create failed";
		path_dictionary_instance_t *pd = ovstage_get_path_dictionary(st);
		for (int k = 0; k < 8; k++) {
			seed = seed * 1103515245u + 12345u;
			int i = (int)((seed >> 8) % STRESS_NAMES);
			char name[32];
			int len = snprintf(name, sizeof name, "name-%d", i);
			ovx_string_t s = { name, (size_t)len };
			ovx_token_t t = 0;
			if (path_dictionary_create_tokens_from_strings(pd, &s, 1, &t).status != OVX_API_SUCCESS || !t)
				return "intern failed";
			ovx_string_t back;
			if (path_dictionary_get_strings_from_tokens(pd, &t, 1, &back).status != OVX_API_SUCCESS ||
			    back.length != (size_t)len || memcmp(back.ptr, name, (size_t)len) != 0)
				return "token text differs";
			if (g_holder) {
				uint64_t expect = 0;
				/* relaxed: the CAS only decides which token is recorded; the comparison reads
				 * the recorded value, no other data is published through it. */
				if (!atomic_compare_exchange_strong_explicit(&g_token_of[i], &expect, t,
									     memory_order_relaxed, memory_order_relaxed) &&
				    expect != t)
					return "equal strings gave different tokens";
			}
		}
		/* the count includes this thread's instance at least */
		if (ovs_pd_shared_refs() < 1)
			return "reference count below the live instances";
		if (ovstage_destroy_instance(st) != OVSTAGE_OK)
			return "destroy failed";
	}
	return NULL;
}

static void run_churn(void)
{
	pthread_t th[STRESS_THREADS];
	for (uintptr_t i = 0; i < STRESS_THREADS; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, churn, (void *)(i + 1)), 0);
	for (int i = 0; i < STRESS_THREADS; i++) {
		void *r = NULL;
		pthread_join(th[i], &r);
		ck_assert_msg(r == NULL, "thread %d: %s", i, (const char *)r);
	}
}

/* With a holder instance the dictionary lives throughout: tokens agree across all threads. */
START_TEST(test_stress_pinned_dictionary)
{
	for (int i = 0; i < STRESS_NAMES; i++)
		atomic_store_explicit(&g_token_of[i], 0, memory_order_relaxed); /* relaxed: before the threads */
	g_holder = make("holder");
	run_churn();
	ck_assert_uint_eq(ovs_pd_shared_refs(), 1);
	destroy(g_holder);
	g_holder = NULL;
	ck_assert_uint_eq(ovs_pd_shared_refs(), 0);
}
END_TEST

/* Without one, the dictionary is created and destroyed many times while other threads hold it:
 * no holder ever sees it freed (the sanitizers check), and nothing leaks at the end. */
START_TEST(test_stress_dictionary_churn)
{
	g_holder = NULL;
	run_churn();
	ck_assert_uint_eq(ovs_pd_shared_refs(), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("shared_dictionary");
	TCase *tc = tcase_create("shared");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_docstring_example);
	tcase_add_test(tc, test_same_meaning_in_every_instance);
	tcase_add_test(tc, test_lifetime_follows_instances);
	tcase_add_test(tc, test_stress_pinned_dictionary);
	tcase_add_test(tc, test_stress_dictionary_churn);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
