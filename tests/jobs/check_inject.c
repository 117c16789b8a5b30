/*
 * check_inject.c — the bounded MPMC injection queue (inject.h) on its own: capacity rounding, full
 * and empty reports, FIFO order across laps, and P producers x C consumers where every item is
 * taken exactly once, nothing is lost, and every consumer sees each producer's items in push order.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "inject.h"
#include "jobs_test_util.h"

/* Items are non-NULL pointers encoding (producer, sequence). */
#define SEQ_BITS 24
static void *item_of(uint32_t producer, uint32_t seq)
{
	return (void *)(uintptr_t)((((uint64_t)producer << SEQ_BITS) | seq) + 1);
}
static uint32_t item_producer(void *item)
{
	return (uint32_t)(((uintptr_t)item - 1) >> SEQ_BITS);
}
static uint32_t item_seq(void *item)
{
	return (uint32_t)(((uintptr_t)item - 1) & ((1u << SEQ_BITS) - 1));
}

/* ---------------------------------------------------------------------------------------------
 * Single-threaded: capacity, full, empty, order
 */
static void check_fill_drain(uint32_t requested, uint32_t expect_cap, int laps)
{
	jobs_inject q;
	ck_assert_msg(jobs_inject_init(&q, requested), "jobs_inject_init(%u) failed", requested);
	uint32_t seq = 0;
	for (int lap = 0; lap < laps; lap++) {
		void *item;
		ck_assert_msg(!jobs_inject_pop_mpmc(&q, &item), "cap %u lap %d: pop on empty succeeded",
			      requested, lap);
		ck_assert_msg(!jobs_inject_maybe_nonempty(&q), "cap %u lap %d: empty queue looks non-empty",
			      requested, lap);
		uint32_t first = seq;
		for (uint32_t i = 0; i < expect_cap; i++)
			ck_assert_msg(jobs_inject_push_mpmc(&q, item_of(0, seq++)),
				      "cap %u (rounded %u) lap %d: push #%u failed before full", requested,
				      expect_cap, lap, i);
		ck_assert_msg(!jobs_inject_push_mpmc(&q, item_of(1, 0)),
			      "cap %u (rounded %u) lap %d: push into a full queue succeeded", requested,
			      expect_cap, lap);
		ck_assert_msg(jobs_inject_maybe_nonempty(&q), "cap %u lap %d: full queue looks empty",
			      requested, lap);
		/* pop half, push half again: the ring wraps within a lap */
		uint32_t half = expect_cap / 2;
		uint32_t next = first;
		for (uint32_t i = 0; i < half; i++) {
			ck_assert_msg(jobs_inject_pop_mpmc(&q, &item), "cap %u lap %d: pop #%u failed",
				      requested, lap, i);
			ck_assert_msg(item == item_of(0, next), "cap %u lap %d: popped seq %u, expected %u",
				      requested, lap, item_seq(item), next);
			next++;
		}
		for (uint32_t i = 0; i < half; i++)
			ck_assert_msg(jobs_inject_push_mpmc(&q, item_of(0, seq++)),
				      "cap %u lap %d: refill push #%u failed", requested, lap, i);
		ck_assert_msg(!jobs_inject_push_mpmc(&q, item_of(1, 1)),
			      "cap %u lap %d: push into a refilled full queue succeeded", requested, lap);
		while (next != seq) {
			ck_assert_msg(jobs_inject_pop_mpmc(&q, &item), "cap %u lap %d: drain lost seq %u",
				      requested, lap, next);
			ck_assert_msg(item == item_of(0, next),
				      "cap %u lap %d: drained seq %u (producer %u), expected seq %u", requested,
				      lap, item_seq(item), item_producer(item), next);
			next++;
		}
		ck_assert_msg(!jobs_inject_pop_mpmc(&q, &item), "cap %u lap %d: pop after drain succeeded",
			      requested, lap);
	}
	jobs_inject_fini(&q);
}

START_TEST(test_full_and_drain)
{
	check_fill_drain(8, 8, 50);
	check_fill_drain(5, 8, 20);
	check_fill_drain(1, 2, 20);
	check_fill_drain(2, 2, 20);
	check_fill_drain(1000, 1024, 3);
	check_fill_drain(4096, 4096, 2);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * P producers x C consumers
 */
struct mpmc {
	jobs_inject q;
	int producers, consumers;
	uint32_t per_producer;
	_Atomic uint8_t *taken;       /* [producer * per_producer + seq]: times popped */
	_Atomic uint64_t popped;      /* total items popped */
	_Atomic uint32_t order_errors;/* a consumer saw a producer's items out of order */
	_Atomic uint32_t bad_items;   /* an item outside the pushed set */
	_Atomic int start;            /* released once every thread exists */
};

struct mpmc_thread {
	struct mpmc *m;
	uint32_t index;
};

static void wait_start(struct mpmc *m)
{
	while (!atomic_load_explicit(&m->start, memory_order_acquire))
		sched_yield();
}

static void *producer_main(void *arg)
{
	struct mpmc_thread *t = arg;
	struct mpmc *m = t->m;
	wait_start(m);
	for (uint32_t i = 0; i < m->per_producer; i++) {
		unsigned spins = 0;
		while (!jobs_inject_push_mpmc(&m->q, item_of(t->index, i))) {
			if (++spins > 16)
				sched_yield(); /* full: consumers need the CPU (2 cores, many threads) */
		}
	}
	return NULL;
}

static void *consumer_main(void *arg)
{
	struct mpmc_thread *t = arg;
	struct mpmc *m = t->m;
	uint64_t total = (uint64_t)m->producers * m->per_producer;
	int64_t *last = malloc((size_t)m->producers * sizeof *last);
	for (int p = 0; p < m->producers; p++)
		last[p] = -1;
	wait_start(m);
	unsigned spins = 0;
	while (atomic_load_explicit(&m->popped, memory_order_relaxed) < total) {
		void *item;
		if (!jobs_inject_pop_mpmc(&m->q, &item)) {
			if (++spins > 16)
				sched_yield();
			continue;
		}
		spins = 0;
		uint32_t p = item_producer(item), seq = item_seq(item);
		if (item == NULL || p >= (uint32_t)m->producers || seq >= m->per_producer) {
			atomic_fetch_add(&m->bad_items, 1);
		} else {
			atomic_fetch_add_explicit(&m->taken[(size_t)p * m->per_producer + seq], 1,
						  memory_order_relaxed);
			/* A consumer claims increasing positions, a producer pushes into increasing
			 * positions: each consumer sees each producer's items in push order. */
			if ((int64_t)seq <= last[p])
				atomic_fetch_add(&m->order_errors, 1);
			last[p] = seq;
		}
		atomic_fetch_add_explicit(&m->popped, 1, memory_order_relaxed);
	}
	free(last);
	return NULL;
}

static void check_mpmc(int producers, int consumers, uint32_t capacity, uint32_t per_producer)
{
	struct mpmc *m = calloc(1, sizeof *m);
	ck_assert(jobs_inject_init(&m->q, capacity));
	m->producers = producers;
	m->consumers = consumers;
	m->per_producer = per_producer;
	size_t n = (size_t)producers * per_producer;
	m->taken = calloc(n, sizeof *m->taken);
	pthread_t *th = calloc((size_t)(producers + consumers), sizeof *th);
	struct mpmc_thread *ta = calloc((size_t)(producers + consumers), sizeof *ta);
	for (int i = 0; i < producers + consumers; i++) {
		ta[i].m = m;
		ta[i].index = (uint32_t)(i < producers ? i : i - producers);
		ck_assert(pthread_create(&th[i], NULL, i < producers ? producer_main : consumer_main,
					 &ta[i]) == 0);
	}
	atomic_store_explicit(&m->start, 1, memory_order_release);
	for (int i = 0; i < producers + consumers; i++)
		pthread_join(th[i], NULL);

	ck_assert_msg(atomic_load(&m->bad_items) == 0, "P=%d C=%d cap=%u: %u foreign items popped",
		      producers, consumers, capacity, atomic_load(&m->bad_items));
	ck_assert_msg(atomic_load(&m->popped) == n, "P=%d C=%d cap=%u: popped %llu of %zu items",
		      producers, consumers, capacity, (unsigned long long)atomic_load(&m->popped), n);
	for (size_t i = 0; i < n; i++) {
		unsigned c = atomic_load_explicit(&m->taken[i], memory_order_relaxed);
		ck_assert_msg(c == 1, "P=%d C=%d cap=%u: item (producer %zu, seq %zu) popped %u times",
			      producers, consumers, capacity, i / per_producer, i % per_producer, c);
	}
	ck_assert_msg(atomic_load(&m->order_errors) == 0,
		      "P=%d C=%d cap=%u: %u items seen out of their producer's order", producers, consumers,
		      capacity, atomic_load(&m->order_errors));
	void *item;
	ck_assert_msg(!jobs_inject_pop_mpmc(&m->q, &item), "P=%d C=%d: queue not empty at the end",
		      producers, consumers);
	jobs_inject_fini(&m->q);
	free(m->taken);
	free(th);
	free(ta);
	free(m);
}

static uint32_t per_producer(uint32_t n)
{
	return (uint32_t)jt_scaled(n, 500);
}

START_TEST(test_spsc)
{
	check_mpmc(1, 1, 2, per_producer(200000));
	check_mpmc(1, 1, 64, per_producer(200000));
}
END_TEST

START_TEST(test_mpsc_order)
{
	/* C = 1: the consumer sees every producer's items in FIFO order */
	check_mpmc(4, 1, 16, per_producer(50000));
	check_mpmc(3, 1, 1024, per_producer(50000));
}
END_TEST

START_TEST(test_spmc)
{
	check_mpmc(1, 4, 8, per_producer(100000));
}
END_TEST

START_TEST(test_mpmc)
{
	check_mpmc(2, 2, 4, per_producer(100000));
	check_mpmc(4, 4, 64, per_producer(40000));
	check_mpmc(3, 5, 2, per_producer(20000));
}
END_TEST

static Suite *inject_suite(void)
{
	Suite *su = suite_create("jobs_inject");
	TCase *tc = tcase_create("single");
	tcase_add_test(tc, test_full_and_drain);
	suite_add_tcase(su, tc);
	tc = tcase_create("threads");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_spsc);
	tcase_add_test(tc, test_mpsc_order);
	tcase_add_test(tc, test_spmc);
	tcase_add_test(tc, test_mpmc);
	suite_add_tcase(su, tc);
	return su;
}

JT_MAIN(inject_suite)
