/*
 * check_floor_wait.c — ovstage_ext_wait_write_floor: waits end when the seal that publishes the floor
 * runs (attribute floors, the global floor, a column that does not exist yet), time out otherwise,
 * refuse bad arguments; a stress with many more waiters than cores, each waiting for its own ordinal
 * while a sealer advances, checks that every waiter returns only once its floor is reached.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>

#include <ovstage/ovstage_ext.h>

#include "stage_test_util.h"

typedef struct fixture {
	ovstage_instance_t *st;
	path_dictionary_instance_t *pd;
	ovstage_query_handle_t q;
	ovx_token_t a, b;
} fixture;

static void setup(fixture *f)
{
	ck_assert_int_eq(ovstage_create_instance(NULL, &f->st), OVSTAGE_OK);
	f->pd = ovstage_get_path_dictionary(f->st);
	static const char *const paths[] = { "/p0", "/p1" };
	f->q = tst_query_of(f->st, f->pd, paths, 2, NULL);
	f->a = tst_tok(f->pd, "fw:a");
	f->b = tst_tok(f->pd, "fw:b");
}

static void teardown(fixture *f)
{
	tst_wait_ok(f->st, ovstage_release_query(f->st, f->q));
	ck_assert_int_eq(ovstage_destroy_instance(f->st), OVSTAGE_OK);
}

static void write_at(fixture *f, ovx_token_t t, ovstage_ordinal_t o)
{
	float v[2] = { (float)o, (float)o };
	tst_tensor tt;
	tst_wait_ok(f->st, ovstage_write_attribute(f->st, f->q, tst_attr(t), o, tst_wdata(&tt, v, 2, kDLFloat, 32, 1),
						   OVSTAGE_PRIM_MODE_UPSERT));
}

static void seal_attr(fixture *f, ovx_token_t t, ovstage_ordinal_t o)
{
	ovstage_write_floor_desc_t d = { o, t ? OVSTAGE_SCOPE_INCLUDE : OVSTAGE_SCOPE_ALL, t ? &t : NULL, t ? 1 : 0 };
	tst_wait_ok(f->st, ovstage_advance_write_floor(f->st, &d));
}

static uint64_t floor_of(fixture *f, ovx_token_t t)
{
	ovstage_ordinal_query_handle_t h;
	ovx_string_or_token_t at = tst_attr(t);
	tst_wait_ok(f->st, ovstage_get_attribute_write_floor(f->st, at, &h));
	ovstage_ordinal_t v = 0;
	ck_assert_int_eq(ovstage_fetch_ordinal(f->st, h, OVSTAGE_TIMEOUT_INFINITE, &v), OVSTAGE_OK);
	tst_wait_ok(f->st, ovstage_release_ordinal_query(f->st, h));
	return v;
}

typedef struct waiter {
	fixture *f;
	ovx_token_t t;
	ovstage_ordinal_t target;
	ovstage_api_status_t status;
	uint64_t seen;  /* the floor right after the wait returned */
} waiter;

static void *wait_thread(void *p)
{
	waiter *w = p;
	w->status = ovstage_ext_wait_write_floor(w->f->st, tst_attr(w->t), w->target, OVSTAGE_TIMEOUT_INFINITE);
	w->seen = floor_of(w->f, w->t);
	return NULL;
}

START_TEST(test_wait_ends_at_the_seal)
{
	fixture f;
	setup(&f);
	ck_assert_int_eq(ovstage_ext_wait_write_floor(f.st, tst_attr(f.a), 1, 0), OVSTAGE_ERROR_TIMEOUT);
	ck_assert_msg(strstr(tst_last_error(), "fw:a") && strstr(tst_last_error(), "below 1"), "%s", tst_last_error());
	ck_assert_int_eq(ovstage_ext_wait_write_floor(f.st, tst_attr(f.a), 1, 2000000), OVSTAGE_ERROR_TIMEOUT);
	waiter w = { &f, f.a, 3, -1, 0 };
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, wait_thread, &w), 0);
	for (ovstage_ordinal_t o = 1; o <= 3; o++) {
		write_at(&f, f.a, o);
		seal_attr(&f, f.a, o);
	}
	pthread_join(th, NULL);
	ck_assert_int_eq(w.status, OVSTAGE_OK);
	ck_assert_uint_ge(w.seen, 3);
	ck_assert_int_eq(ovstage_ext_wait_write_floor(f.st, tst_attr(f.a), 3, 0), OVSTAGE_OK);
	/* b has no column yet: it follows the stage floor, which only an ALL-scope seal moves */
	ck_assert_int_eq(ovstage_ext_wait_write_floor(f.st, tst_attr(f.b), 1, 0), OVSTAGE_ERROR_TIMEOUT);
	seal_attr(&f, 0, 4);
	ck_assert_int_eq(ovstage_ext_wait_write_floor(f.st, tst_attr(f.b), 4, 0), OVSTAGE_OK);
	/* the global floor: the minimum over columns */
	ovx_string_or_token_t none = { 0, { NULL, 0 } };
	ck_assert_int_eq(ovstage_ext_wait_write_floor(f.st, none, 4, 0), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_ext_wait_write_floor(f.st, none, 5, 0), OVSTAGE_ERROR_TIMEOUT);
	teardown(&f);
}
END_TEST

START_TEST(test_bad_arguments)
{
	fixture f;
	setup(&f);
	ck_assert_int_eq(ovstage_ext_wait_write_floor(NULL, tst_attr(f.a), 1, 0), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ovx_string_or_token_t bogus = { 987654321, { NULL, 0 } };
	ck_assert_int_eq(ovstage_ext_wait_write_floor(f.st, bogus, 1, 0), OVSTAGE_ERROR_INVALID_ARGUMENT);
	ovstage_instance_t fake = { NULL, f.st->context };
	ck_assert_int_eq(ovstage_ext_wait_write_floor(&fake, tst_attr(f.a), 1, 0), OVSTAGE_ERROR_INVALID_ARGUMENT);
	/* a huge finite timeout is not an overflowed, expired deadline */
	write_at(&f, f.a, 1);
	seal_attr(&f, f.a, 1);
	ck_assert_int_eq(ovstage_ext_wait_write_floor(f.st, tst_attr(f.a), 1, UINT64_MAX - 1), OVSTAGE_OK);
	teardown(&f);
}
END_TEST

enum { STRESS_WAITERS = 48, STRESS_ORDINALS = 200 };

/* Many more waiters than cores, each for its own ordinal, while one thread writes and seals 1..200:
 * every waiter returns OK, and only once the floor is at least its target. */
START_TEST(test_many_waiters)
{
	fixture f;
	setup(&f);
	waiter w[STRESS_WAITERS];
	pthread_t th[STRESS_WAITERS];
	for (int i = 0; i < STRESS_WAITERS; i++) {
		w[i] = (waiter){ &f, i % 2 ? f.a : 0, (ovstage_ordinal_t)(1 + (i * 37) % STRESS_ORDINALS), -1, 0 };
		ck_assert_int_eq(pthread_create(&th[i], NULL, wait_thread, &w[i]), 0);
	}
	for (ovstage_ordinal_t o = 1; o <= STRESS_ORDINALS; o++) {
		write_at(&f, f.a, o);
		seal_attr(&f, 0, o);
	}
	for (int i = 0; i < STRESS_WAITERS; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(w[i].status, OVSTAGE_OK);
		ck_assert_uint_ge(w[i].seen, w[i].target);
	}
	teardown(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("floor_wait");
	TCase *tc = tcase_create("floor_wait");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_wait_ends_at_the_seal);
	tcase_add_test(tc, test_bad_arguments);
	tcase_add_test(tc, test_many_waiters);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
