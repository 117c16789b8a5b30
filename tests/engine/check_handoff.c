/*
 * check_handoff.c — the column's handoff slot (engine/store/handoff.h): one sealer thread puts
 * deltas (ovs_handoff_swap, getting back the one it displaced) while many more taker threads than
 * cores take them (ovs_handoff_take) and hand them back through a return list.
 *
 * Invariants checked: nothing is lost and nothing is held twice. Every object has a holder count
 * that whoever receives it increments (it must have been 0) and decrements before it lets go (it
 * must have been 1); each holder writes the object's fields with plain stores, so two holders at
 * once are also a data race for ThreadSanitizer. A taken delta is zeroed (the put clears what the
 * last taker wrote). At the end the sealer's objects, the returned ones and the slot's hold every
 * object exactly once.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "handoff.h"

/* The sealer puts PUTS times, and goes on until the takers have taken MIN_TAKES times: with 32
 * takers on 2 busy cores a fixed count could end before any of them ran. */
enum { OBJECTS = 48, TAKERS = 32, PUTS = 60000, MIN_TAKES = 1000 };

typedef struct obj {
	ovs_delta d;            /* first: the slot's object */
	uint32_t id;            /* index in the test's table */
	_Atomic int holders;    /* threads holding it now (0 or 1) */
} obj;

static obj g_obj[OBJECTS];
static _Atomic(ovs_delta *) g_slot;
static _Atomic bool g_done;
static _Atomic long g_taken;
static pthread_mutex_t g_ret_lock = PTHREAD_MUTEX_INITIALIZER;
static obj *g_ret[OBJECTS];     /* handed back by takers (under g_ret_lock) */
static size_t g_nret;

static void hold(obj *o)
{
	/* acq_rel: as a lock's acquire, the holder sees the previous holder's stores */
	ck_assert_int_eq(atomic_fetch_add_explicit(&o->holders, 1, memory_order_acq_rel), 0);
}

static void let_go(obj *o)
{
	/* acq_rel: as a lock's release, for the next holder */
	ck_assert_int_eq(atomic_fetch_sub_explicit(&o->holders, 1, memory_order_acq_rel), 1);
}

static void *taker(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&g_done, memory_order_acquire)) {
		ovs_delta *d = ovs_handoff_take(&g_slot);
		if (!d) {
			sched_yield();
			continue;
		}
		obj *o = (obj *)(void *)d;
		hold(o);
		/* put zeroed it: fields the previous taker dirtied are clear */
		ck_assert_uint_eq(d->nrows, 0);
		ck_assert_uint_eq(d->ordinal, 0);
		ck_assert_ptr_null(d->full);
		d->nrows = 7; /* plain stores: a second holder would race with them */
		d->ordinal = o->id + 1;
		atomic_fetch_add_explicit(&g_taken, 1, memory_order_relaxed); /* relaxed: a count */
		let_go(o);
		pthread_mutex_lock(&g_ret_lock);
		g_ret[g_nret++] = o;
		pthread_mutex_unlock(&g_ret_lock);
	}
	return NULL;
}

START_TEST(test_handoff_nothing_lost_nothing_twice)
{
	memset(g_obj, 0, sizeof g_obj);
	atomic_init(&g_slot, NULL);
	atomic_init(&g_done, false);
	atomic_init(&g_taken, 0);
	g_nret = 0;
	obj *own[OBJECTS];
	size_t nown = 0;
	for (uint32_t i = 0; i < OBJECTS; i++) {
		g_obj[i].id = i;
		atomic_init(&g_obj[i].holders, 0);
		hold(&g_obj[i]);
		own[nown++] = &g_obj[i];
	}
	pthread_t th[TAKERS];
	for (int t = 0; t < TAKERS; t++)
		ck_assert_int_eq(pthread_create(&th[t], NULL, taker, NULL), 0);
	/* relaxed: a count; the loop only needs to see it grow eventually */
	for (long p = 0; p < PUTS || atomic_load_explicit(&g_taken, memory_order_relaxed) < MIN_TAKES;) {
		if (!nown) { /* everything is out: collect what the takers handed back */
			pthread_mutex_lock(&g_ret_lock);
			while (g_nret) {
				own[nown] = g_ret[--g_nret];
				hold(own[nown++]);
			}
			pthread_mutex_unlock(&g_ret_lock);
			if (!nown)
				sched_yield();
			continue;
		}
		obj *o = own[--nown];
		o->d.nrows = 9; /* dirtied by the sealer too: the put clears it */
		let_go(o);
		ovs_delta *old = ovs_handoff_swap(&g_slot, &o->d);
		if (old) {
			obj *b = (obj *)(void *)old;
			hold(b);
			own[nown++] = b;
		}
		p++;
	}
	atomic_store_explicit(&g_done, true, memory_order_release); /* release: pairs with the takers' loads */
	for (int t = 0; t < TAKERS; t++)
		pthread_join(th[t], NULL);
	/* every object exactly once: the sealer's, the returned ones, the slot's */
	int seen[OBJECTS] = { 0 };
	for (size_t i = 0; i < nown; i++)
		seen[own[i]->id]++;
	for (size_t i = 0; i < g_nret; i++)
		seen[g_ret[i]->id]++;
	ovs_delta *last = ovs_handoff_take(&g_slot);
	if (last)
		seen[((obj *)(void *)last)->id]++;
	for (uint32_t i = 0; i < OBJECTS; i++)
		ck_assert_msg(seen[i] == 1, "object %u is held %d times at the end", i, seen[i]);
	/* relaxed: the joins above ordered every taker's count before this load */
	ck_assert_int_ge(atomic_load_explicit(&g_taken, memory_order_relaxed), MIN_TAKES); /* taken during the puts */
	ck_assert_ptr_null(ovs_handoff_take(&g_slot));
}
END_TEST

/* A put displaces the slot's delta: ovs_handoff_put frees it (ASan: no leak, no double free). */
START_TEST(test_handoff_put_frees_displaced)
{
	_Atomic(ovs_delta *) slot;
	atomic_init(&slot, NULL);
	for (int i = 0; i < 3; i++) {
		ovs_delta *d = malloc(sizeof *d);
		ck_assert_ptr_nonnull(d);
		memset(d, 0xff, sizeof *d);
		d->full = NULL;
		ovs_handoff_put(&slot, d);
	}
	ovs_delta *d = ovs_handoff_take(&slot);
	ck_assert_ptr_nonnull(d);
	ck_assert_uint_eq(d->nrows, 0);
	ck_assert_ptr_null(d->next);
	ck_assert_ptr_null(ovs_handoff_take(&slot));
	ovs_handoff_put(&slot, d);
	ovs_handoff_fini(&slot);
	ck_assert_ptr_null(ovs_handoff_take(&slot));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("handoff");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_handoff_nothing_lost_nothing_twice);
	tcase_add_test(tc, test_handoff_put_frees_displaced);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
