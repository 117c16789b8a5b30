/*
 * check_block_cache.c — the device pool's block cache (engine/base/block_cache.h), on the host with
 * fake blocks: classes and rounding, the shared bound and oldest-first eviction, the pool switched
 * off, and a stress of many caches and many more threads than cores on one budget checking that no
 * block is lost, none is handed to two holders at once, none is released twice, every block comes
 * back in the class it was asked for, and the retained bytes never pass the bound.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "block_cache.h"

/* A fake block: what the test knows about it. */
typedef struct fake {
	uint32_t cls;          /* the class it was allocated for */
	size_t cap;            /* its capacity */
	_Atomic int holders;   /* 1 while a thread holds it, 0 while cached */
	_Atomic int released;  /* set once by release */
} fake;

static _Atomic long g_released;

static void release_fake(void *ctx, void *p, size_t cap)
{
	(void)ctx;
	fake *f = p;
	ck_assert_uint_eq(cap, f->cap);
	ck_assert_int_eq(atomic_exchange(&f->released, 1), 0);    /* never twice */
	ck_assert_int_eq(atomic_load(&f->holders), 0);             /* never while held */
	atomic_fetch_add(&g_released, 1);
}

static fake *fresh(const ovs_block_budget *b, size_t bytes)
{
	fake *f = calloc(1, sizeof *f);
	ck_assert_ptr_nonnull(f);
	f->cls = ovs_size_class(bytes);
	f->cap = ovs_block_cache_capacity(b, bytes);
	return f;
}

START_TEST(test_classes_round_and_map_back)
{
	for (uint32_t c = 1; c < 272; c++)
		ck_assert_uint_eq(ovs_size_class(ovs_size_class_bytes(c)), c);
	ck_assert_uint_eq(ovs_size_class_bytes(272), SIZE_MAX); /* 2^64 saturates */
	ck_assert_uint_eq(ovs_size_class(0), 1);
	ck_assert_uint_eq(ovs_size_class_bytes(ovs_size_class(100)), 128);
	ck_assert_uint_lt(ovs_size_class(SIZE_MAX), OVS_SIZE_CLASSES);
	for (size_t b = 4097; b < ((size_t)1 << 40); b = b * 3 / 2 + 7) {
		size_t cap = ovs_size_class_bytes(ovs_size_class(b));
		ck_assert_uint_ge(cap, b);
		ck_assert_uint_le(cap, b + b / 4); /* at most 25 % more */
	}
}
END_TEST

START_TEST(test_hit_in_class_miss_across)
{
	ovs_block_budget b;
	ovs_block_budget_init(&b, 1 << 20);
	ovs_block_cache c;
	ovs_block_cache_init(&c, &b, release_fake, NULL);
	ck_assert_ptr_null(ovs_block_cache_take(&c, 100)); /* empty: a miss */
	fake *f = fresh(&b, 100);
	ck_assert_uint_eq(f->cap, 128);
	ck_assert(ovs_block_cache_give(&c, f, 100));
	ck_assert_int_eq(atomic_load(&b.retained), 128);
	ck_assert_ptr_null(ovs_block_cache_take(&c, 200)); /* another class */
	ck_assert_ptr_eq(ovs_block_cache_take(&c, 120), f); /* same class: the block */
	ck_assert_int_eq(atomic_load(&b.retained), 0);
	ck_assert(ovs_block_cache_give(&c, f, f->cap)); /* given back by its capacity */
	ck_assert_uint_eq(atomic_load(&b.hits), 1);
	ck_assert_uint_eq(atomic_load(&b.misses), 2);
	atomic_store(&g_released, 0);
	ovs_block_cache_drain(&c);
	ck_assert_int_eq(atomic_load(&g_released), 1);
	ck_assert_int_eq(atomic_load(&b.retained), 0);
	free(f);
}
END_TEST

START_TEST(test_bound_evicts_oldest_first)
{
	ovs_block_budget b;
	ovs_block_budget_init(&b, 1 << 20); /* room for two 512 KiB blocks */
	ovs_block_cache c;
	ovs_block_cache_init(&c, &b, release_fake, NULL);
	fake *x = fresh(&b, 512 << 10), *y = fresh(&b, 512 << 10), *z = fresh(&b, 256 << 10);
	ck_assert(ovs_block_cache_give(&c, x, 512 << 10));
	ck_assert(ovs_block_cache_give(&c, y, 512 << 10));
	ck_assert_int_eq(atomic_load(&b.retained), 1 << 20);
	atomic_store(&g_released, 0);
	ck_assert(ovs_block_cache_give(&c, z, 256 << 10)); /* x, the oldest, makes room */
	ck_assert_int_eq(atomic_load(&x->released), 1);
	ck_assert_int_eq(atomic_load(&y->released), 0);
	ck_assert_int_eq(atomic_load(&b.retained), (512 + 256) << 10);
	ck_assert_ptr_eq(ovs_block_cache_take(&c, 512 << 10), y);
	/* A block larger than the bound is never kept, nor rounded up. */
	ck_assert_uint_eq(ovs_block_cache_capacity(&b, (2 << 20) + 1), (2 << 20) + 1);
	fake *big = fresh(&b, (2 << 20) + 1);
	ck_assert(!ovs_block_cache_give(&c, big, (2 << 20) + 1));
	ck_assert_int_eq(atomic_load(&z->released), 0); /* nothing evicted for it */
	ovs_block_cache_drain(&c);
	ck_assert_int_eq(atomic_load(&z->released), 1);
	ck_assert_int_eq(atomic_load(&y->released), 0); /* held by the test, not cached */
	free(x);
	free(y);
	free(z);
	free(big);
}
END_TEST

START_TEST(test_bound_shared_by_caches)
{
	ovs_block_budget b;
	ovs_block_budget_init(&b, 1 << 20);
	ovs_block_cache c1, c2;
	ovs_block_cache_init(&c1, &b, release_fake, NULL);
	ovs_block_cache_init(&c2, &b, release_fake, NULL);
	fake *x = fresh(&b, 1 << 20), *y = fresh(&b, 1 << 20);
	ck_assert(ovs_block_cache_give(&c1, x, 1 << 20));
	ck_assert(!ovs_block_cache_give(&c2, y, 1 << 20)); /* c1 holds the budget; c2 cannot evict it */
	ck_assert_int_eq(atomic_load(&x->released), 0);
	ck_assert_int_eq(atomic_load(&b.retained), 1 << 20);
	ovs_block_cache_drain(&c1);
	ovs_block_cache_drain(&c2);
	ck_assert_int_eq(atomic_load(&b.retained), 0);
	free(x);
	free(y);
}
END_TEST

START_TEST(test_off_keeps_nothing)
{
	for (int64_t bound = -1; bound <= 0; bound++) {
		ovs_block_budget b;
		ovs_block_budget_init(&b, bound);
		ovs_block_cache c;
		ovs_block_cache_init(&c, &b, release_fake, NULL);
		ck_assert_uint_eq(ovs_block_cache_capacity(&b, 100), 100); /* no rounding when off */
		ck_assert_uint_eq(ovs_block_cache_capacity(&b, 0), 1);
		fake *f = fresh(&b, 100);
		ck_assert(!ovs_block_cache_give(&c, f, 100));
		ck_assert_ptr_null(ovs_block_cache_take(&c, 100));
		ck_assert_int_eq(atomic_load(&b.retained), 0);
		ck_assert_uint_eq(atomic_load(&b.hits), 0);
		ovs_block_cache_drain(&c);
		free(f);
	}
}
END_TEST

/* ---- stress ------------------------------------------------------------------------------------ */

enum { CACHES = 3, ROUNDS = 4000, HELD = 6 };

typedef struct stress {
	ovs_block_budget budget;
	ovs_block_cache caches[CACHES];
	_Atomic long made;            /* fresh blocks */
	_Atomic int stop;             /* the sampler's end */
	_Atomic int64_t max_retained; /* the most the sampler saw */
	fake *_Atomic *all;           /* every fresh block, for the final account */
	_Atomic long nall;
} stress;

static size_t pick(unsigned *seed)
{
	static const size_t sizes[] = { 1, 64, 100, 4096, 5000, 65536, 100000, 1 << 18, (1 << 18) + 1, 3 << 20 };
	return sizes[(unsigned)rand_r(seed) % (sizeof sizes / sizeof *sizes)];
}

static void *stress_thread(void *arg)
{
	stress *s = arg;
	unsigned seed = (unsigned)(uintptr_t)pthread_self();
	ovs_block_cache *c = &s->caches[seed % CACHES];
	fake *held[HELD] = { 0 };
	size_t asked[HELD] = { 0 };
	for (int r = 0; r < ROUNDS; r++) {
		int k = rand_r(&seed) % HELD;
		if (held[k]) { /* give one back */
			ck_assert_int_eq(atomic_exchange(&held[k]->holders, 0), 1);
			if (!ovs_block_cache_give(c, held[k], asked[k]))
				release_fake(NULL, held[k], held[k]->cap);
			held[k] = NULL;
			continue;
		}
		size_t bytes = pick(&seed);
		fake *f = ovs_block_cache_take(c, bytes);
		if (!f) {
			f = fresh(&s->budget, bytes);
			long i = atomic_fetch_add(&s->nall, 1);
			atomic_store(&s->all[i], f);
			atomic_fetch_add(&s->made, 1);
		}
		ck_assert_uint_eq(f->cls, ovs_size_class(bytes));            /* its class */
		ck_assert_int_eq(atomic_exchange(&f->holders, 1), 0);         /* one holder */
		ck_assert_int_eq(atomic_load(&f->released), 0);               /* never after release */
		held[k] = f;
		asked[k] = bytes;
	}
	for (int k = 0; k < HELD; k++)
		if (held[k]) {
			atomic_store(&held[k]->holders, 0);
			if (!ovs_block_cache_give(c, held[k], asked[k]))
				release_fake(NULL, held[k], held[k]->cap);
		}
	return NULL;
}

static void *sampler(void *arg)
{
	stress *s = arg;
	while (!atomic_load(&s->stop)) {
		int64_t r = atomic_load(&s->budget.retained);
		if (r > atomic_load(&s->max_retained))
			atomic_store(&s->max_retained, r);
	}
	return NULL;
}

static void run_stress(int threads, int64_t bound)
{
	stress *s = calloc(1, sizeof *s);
	ck_assert_ptr_nonnull(s);
	ovs_block_budget_init(&s->budget, bound);
	for (int i = 0; i < CACHES; i++)
		ovs_block_cache_init(&s->caches[i], &s->budget, release_fake, NULL);
	s->all = calloc((size_t)threads * ROUNDS, sizeof *s->all);
	atomic_store(&g_released, 0);
	pthread_t smp, *t = calloc((size_t)threads, sizeof *t);
	pthread_create(&smp, NULL, sampler, s);
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, stress_thread, s);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	atomic_store(&s->stop, 1);
	pthread_join(smp, NULL);
	ck_assert_int_le(atomic_load(&s->max_retained), bound > 0 ? bound : 0);
	ck_assert_int_le(atomic_load(&s->budget.retained), bound > 0 ? bound : 0);
	for (int i = 0; i < CACHES; i++)
		ovs_block_cache_drain(&s->caches[i]);
	ck_assert_int_eq(atomic_load(&s->budget.retained), 0);
	/* Nothing lost: every fresh block was released exactly once (release_fake counts and checks). */
	long n = atomic_load(&s->nall);
	ck_assert_int_eq(atomic_load(&g_released), n);
	for (long i = 0; i < n; i++) {
		ck_assert_int_eq(atomic_load(&s->all[i]->released), 1);
		free(s->all[i]);
	}
	if (bound > 0) /* the cache served something: fewer fresh blocks than takes */
		ck_assert_uint_gt(atomic_load(&s->budget.hits), 0);
	free(s->all);
	free(t);
	free(s);
}

START_TEST(test_stress_few_threads)
{
	run_stress(4, 4 << 20);
}
END_TEST

START_TEST(test_stress_many_more_threads_than_cores)
{
	run_stress(64, 2 << 20);
}
END_TEST

START_TEST(test_stress_tight_bound_and_off)
{
	run_stress(16, 300 << 10); /* most gives evict */
	run_stress(8, 0);
}
END_TEST

static Suite *block_cache_suite(void)
{
	Suite *s = suite_create("block_cache");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_classes_round_and_map_back);
	tcase_add_test(tc, test_hit_in_class_miss_across);
	tcase_add_test(tc, test_bound_evicts_oldest_first);
	tcase_add_test(tc, test_bound_shared_by_caches);
	tcase_add_test(tc, test_off_keeps_nothing);
	tcase_add_test(tc, test_stress_few_threads);
	tcase_add_test(tc, test_stress_many_more_threads_than_cores);
	tcase_add_test(tc, test_stress_tight_bound_and_off);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(block_cache_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
