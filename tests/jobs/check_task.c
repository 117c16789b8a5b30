/*
 * check_task.c — typed fork-join tasks (jobs_task.h): fib against the serial value on 0..4 workers
 * and on many more workers than cores, a void task whose every leaf must run exactly once under
 * stealing (arities 1..4 exercised), typed frames interleaved with generic frames on one deque,
 * and detached jobs pushed above a typed frame by a submission from inside the task body.
 */
#include <check.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "jobs.h"
#include "jobs_forkjoin.h"
#include "jobs_task.h"
#include "jobs_test_util.h"

static void run_job(jobs_sched *s, jobs_job_fn fn, void *arg)
{
	jobs_job_desc d = {.fn = fn, .arg = arg};
	jobs_id id = 0;
	jt_assert_status(jobs_submit(s, &d, &id), JOBS_OK, "submit");
	jt_assert_status(jobs_wait(s, id, JOBS_TIMEOUT_INFINITE), JOBS_OK, "wait");
	jt_assert_status(jobs_release(s, id), JOBS_OK, "release");
}

static long fib_serial(int n)
{
	long a = 0, b = 1;
	for (int i = 0; i < n; i++) {
		long t = a + b;
		a = b;
		b = t;
	}
	return a;
}

/* ---- (a) fib ---- */

JOBS_TASK_1(long, tfib, int, n)
{
	if (n < 2)
		return n;
	JOBS_SPAWN(tfib, n - 1);
	long b = JOBS_CALL(tfib, n - 2);
	long a = JOBS_SYNC(tfib);
	return a + b;
}

struct fib_job {
	int n;
	long r;
};

static void fib_job_fn(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)run;
	struct fib_job *j = arg;
	j->r = JOBS_TASK_RUN(w, tfib, j->n);
}

static void check_fib(int workers, int n, int rounds)
{
	jobs_sched *s = jt_sched(workers);
	for (int r = 0; r < rounds; r++) {
		struct fib_job j = {n, -1};
		run_job(s, fib_job_fn, &j);
		ck_assert_msg(j.r == fib_serial(n), "workers=%d round %d: fib(%d) = %ld, expected %ld", workers,
			      r, n, j.r, fib_serial(n));
	}
	jobs_sched_destroy(s);
}

static int fib_n(void)
{
	return jt_tsan() ? 18 : 24;
}

START_TEST(test_fib_0_to_4_workers)
{
	for (int w = 0; w <= 4; w++)
		check_fib(w, fib_n(), (int)jt_scaled(10, 2));
}
END_TEST

START_TEST(test_fib_many_workers)
{
	/* far more workers than cores: thieves preempted mid-steal, owners preempted mid-publication */
	check_fib(16, fib_n(), (int)jt_scaled(10, 2));
	check_fib(32, fib_n() - 2, (int)jt_scaled(4, 1));
}
END_TEST

/* ---- (b) every leaf exactly once: a void task of arity 4 over a range, arity 2 and 3 helpers ---- */

struct leaves {
	_Atomic uint32_t *count;
	uint64_t *val;
	_Atomic uint64_t sum;
};

JOBS_VOID_TASK_1(touch, uint32_t *, dst)
{
	(void)JOBS_WORKER;
	++*dst;
}

JOBS_TASK_3(uint64_t, leaf, struct leaves *, L, uint32_t, i, uint32_t, salt)
{
	atomic_fetch_add_explicit(&L->count[i], 1, memory_order_relaxed);
	uint32_t local = salt;
	JOBS_SPAWN(touch, &local); /* a tiny frame of a different task type, joined at once */
	JOBS_SYNC(touch);
	return L->val[i] + (local - salt - 1u); /* local - salt - 1 == 0 iff touch ran once */
}

JOBS_TASK_2(uint64_t, span, struct leaves *, L, uint64_t, lohi)
{
	uint32_t lo = (uint32_t)(lohi >> 32), hi = (uint32_t)lohi;
	if (hi - lo == 1)
		return JOBS_CALL(leaf, L, lo, lo * 7u);
	uint32_t mid = lo + (hi - lo) / 2;
	JOBS_SPAWN(span, L, (uint64_t)mid << 32 | hi);
	uint64_t a = JOBS_CALL(span, L, (uint64_t)lo << 32 | mid);
	return a + JOBS_SYNC(span);
}

JOBS_VOID_TASK_4(sum_range, struct leaves *, L, uint32_t, lo, uint32_t, hi, int, fanout)
{
	/* fanout-way split: several frames public at once, synced innermost first */
	uint32_t n = hi - lo;
	if (n <= (uint32_t)fanout) {
		atomic_fetch_add_explicit(&L->sum, JOBS_CALL(span, L, (uint64_t)lo << 32 | hi),
					  memory_order_relaxed);
		return;
	}
	uint32_t step = n / (uint32_t)fanout;
	for (int k = fanout - 1; k >= 1; k--) {
		uint32_t a = lo + (uint32_t)k * step, b = k == fanout - 1 ? hi : a + step;
		JOBS_SPAWN(sum_range, L, a, b, fanout);
	}
	JOBS_CALL(sum_range, L, lo, lo + step, fanout);
	for (int k = 1; k < fanout; k++)
		JOBS_SYNC(sum_range);
}

struct leaves_job {
	struct leaves *L;
	uint32_t n;
	int fanout;
};

static void leaves_job_fn(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)run;
	struct leaves_job *j = arg;
	JOBS_TASK_RUN(w, sum_range, j->L, 0, j->n, j->fanout);
}

static void check_leaves(int workers, uint32_t n, int fanout, int rounds)
{
	jobs_sched *s = jt_sched(workers);
	struct leaves L;
	L.count = calloc(n, sizeof *L.count);
	L.val = malloc(n * sizeof *L.val);
	uint64_t rng = 0x7a5c0000u + (uint64_t)workers, serial = 0;
	for (uint32_t i = 0; i < n; i++) {
		L.val[i] = jt_rand(&rng) >> 24;
		serial += L.val[i];
	}
	for (int r = 0; r < rounds; r++) {
		for (uint32_t i = 0; i < n; i++)
			atomic_store_explicit(&L.count[i], 0, memory_order_relaxed);
		atomic_store(&L.sum, 0);
		struct leaves_job j = {&L, n, fanout};
		run_job(s, leaves_job_fn, &j);
		for (uint32_t i = 0; i < n; i++) {
			uint32_t c = atomic_load_explicit(&L.count[i], memory_order_relaxed);
			ck_assert_msg(c == 1, "workers=%d fanout=%d round %d: leaf %u ran %u times", workers,
				      fanout, r, i, c);
		}
		ck_assert_msg(atomic_load(&L.sum) == serial, "workers=%d fanout=%d round %d: sum %llu, expected %llu",
			      workers, fanout, r, (unsigned long long)atomic_load(&L.sum),
			      (unsigned long long)serial);
	}
	free(L.count);
	free(L.val);
	jobs_sched_destroy(s);
}

START_TEST(test_leaves_once)
{
	uint32_t n = jt_tsan() ? 1u << 12 : 1u << 16;
	int rounds = (int)jt_scaled(8, 2);
	check_leaves(1, n, 2, rounds);
	check_leaves(2, n, 2, rounds);
	check_leaves(4, n, 16, rounds);
	check_leaves(12, n, 8, rounds);
}
END_TEST

/* ---- (c) typed and generic frames on one deque ---- */

struct gen_frame {
	int n;
	long r;
};
JOBS_PAYLOAD_FITS(struct gen_frame);

JOBS_TASK_DECL_1(long, mixed, int, n)

/* A generic frame whose body spawns typed tasks; the typed task spawns generic frames. */
static void gen_fn(jobs_worker *w, void *p)
{
	struct gen_frame *a = p;
	if (a->n < 2) {
		a->r = a->n;
		return;
	}
	struct gen_frame *child = jobs_spawn_args(w);
	*child = (struct gen_frame){a->n - 1, -1};
	jobs_spawn(w, gen_fn);
	long b = JOBS_TASK_RUN(w, mixed, a->n - 2);
	struct gen_frame done;
	jobs_sync(w, &done, sizeof done);
	a->r = done.r + b;
}

JOBS_TASK_IMPL_1(long, mixed, int, n)
{
	if (n < 2)
		return n;
	JOBS_SPAWN(mixed, n - 1);
	struct gen_frame g = {n - 2, -1};
	gen_fn(JOBS_WORKER, &g);
	return JOBS_SYNC(mixed) + g.r;
}

struct mixed_job {
	int n;
	long generic_root, typed_root;
};

static void mixed_job_fn(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)run;
	struct mixed_job *j = arg;
	struct gen_frame g = {j->n, -1};
	gen_fn(w, &g);
	j->generic_root = g.r;
	j->typed_root = JOBS_TASK_RUN(w, mixed, j->n);
}

START_TEST(test_mixed_generic_and_typed)
{
	for (int w = 0; w <= 4; w++) {
		jobs_sched *s = jt_sched(w);
		for (int r = 0; r < (int)jt_scaled(6, 2); r++) {
			struct mixed_job j = {fib_n(), -1, -1};
			run_job(s, mixed_job_fn, &j);
			ck_assert_msg(j.generic_root == fib_serial(j.n) && j.typed_root == fib_serial(j.n),
				      "workers=%d round %d: fib(%d) = %ld (generic root), %ld (typed root), expected %ld",
				      w, r, j.n, j.generic_root, j.typed_root, fib_serial(j.n));
		}
		jobs_sched_destroy(s);
	}
}
END_TEST

/* ---- (d) detached jobs above a typed frame ---- */

struct side {
	jobs_sched *s;
	_Atomic long ran;
	_Atomic long submitted;
};

static void side_job(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	(void)run;
	struct side *sd = arg;
	atomic_fetch_add_explicit(&sd->ran, 1, memory_order_relaxed);
}

/* fib that, every few nodes, submits a job from inside the body between its spawn and its sync:
 * on a worker the submission pushes a detached frame above the typed frame, which the typed sync
 * must run (or leave to a thief) before it joins its own frame. */
JOBS_TASK_2(long, sfib, struct side *, sd, int, n)
{
	if (n < 2)
		return n;
	JOBS_SPAWN(sfib, sd, n - 1);
	if (n % 5 == 0) {
		jobs_job_desc d = {.fn = side_job, .arg = sd};
		jobs_id id = 0;
		if (jobs_submit(sd->s, &d, &id) == JOBS_OK) {
			atomic_fetch_add_explicit(&sd->submitted, 1, memory_order_relaxed);
			(void)jobs_release(sd->s, id);
		}
	}
	long b = JOBS_CALL(sfib, sd, n - 2);
	return JOBS_SYNC(sfib) + b;
}

struct sfib_job {
	struct side *sd;
	int n;
	long r;
};

static void sfib_job_fn(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)run;
	struct sfib_job *j = arg;
	j->r = JOBS_TASK_RUN(w, sfib, j->sd, j->n);
}

START_TEST(test_detached_above_typed)
{
	for (int w = 1; w <= 4; w++) {
		struct side sd;
		sd.s = jt_sched(w);
		atomic_init(&sd.ran, 0);
		atomic_init(&sd.submitted, 0);
		int n = jt_tsan() ? 14 : 18;
		for (int r = 0; r < (int)jt_scaled(6, 2); r++) {
			struct sfib_job j = {&sd, n, -1};
			run_job(sd.s, sfib_job_fn, &j);
			ck_assert_msg(j.r == fib_serial(n), "workers=%d round %d: fib(%d) = %ld", w, r, n, j.r);
		}
		jobs_sched_destroy(sd.s); /* runs whatever thieves have not finished yet */
		ck_assert_msg(atomic_load(&sd.ran) == atomic_load(&sd.submitted) && atomic_load(&sd.ran) > 0,
			      "workers=%d: %ld side jobs ran, %ld submitted", w, atomic_load(&sd.ran),
			      atomic_load(&sd.submitted));
	}
}
END_TEST

/* ---- (e) stale copies of top at several levels ---- */

/* Typed tasks hold the deque's top in a register. A submission inside a body pushes a detached
 * frame behind the back of every typed task that is active, and the callee that made it may go
 * on spawning and joining its own typed frames above it (its first spawn re-reads top) and
 * return with the detached frame still there, leaving its caller's copy stale; the caller's next
 * sync must not pop by that copy. Every node must run exactly once and every side job must run. */
struct stale {
	jobs_sched *s;
	_Atomic long nodes; /* stale_fib calls */
	_Atomic long ran, submitted;
};

static void stale_side(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	(void)run;
	struct stale *st = arg;
	atomic_fetch_add_explicit(&st->ran, 1, memory_order_relaxed);
}

static void stale_submit(struct stale *st)
{
	jobs_job_desc d = {.fn = stale_side, .arg = st};
	jobs_id id = 0;
	if (jobs_submit(st->s, &d, &id) == JOBS_OK) {
		atomic_fetch_add_explicit(&st->submitted, 1, memory_order_relaxed);
		(void)jobs_release(st->s, id);
	}
}

JOBS_TASK_DECL_2(long, stale_fib, struct stale *, st, int, n)

/* Pushes a detached frame, forks its own subtree above it, may push another, returns without
 * joining either. */
JOBS_TASK_2(long, stale_mid, struct stale *, st, int, n)
{
	if (n % 3 == 0)
		stale_submit(st);
	long r = JOBS_CALL(stale_fib, st, n);
	if (n % 4 == 1)
		stale_submit(st);
	return r;
}

JOBS_TASK_IMPL_2(long, stale_fib, struct stale *, st, int, n)
{
	atomic_fetch_add_explicit(&st->nodes, 1, memory_order_relaxed);
	if (n < 2)
		return n;
	JOBS_SPAWN(stale_fib, st, n - 1);
	long b = JOBS_CALL(stale_mid, st, n - 2); /* may leave detached frames above our frame */
	if (n % 7 == 0) {
		/* a second frame of ours above them, joined at once */
		JOBS_SPAWN(stale_fib, st, n - 3 > 0 ? n - 3 : 0);
		b += JOBS_SYNC(stale_fib) - (n - 3 > 0 ? fib_serial(n - 3) : 0);
	}
	return JOBS_SYNC(stale_fib) + b;
}

static long stale_nodes(int n)
{
	if (n < 2)
		return 1;
	long k = 1 + stale_nodes(n - 1) + stale_nodes(n - 2);
	if (n % 7 == 0)
		k += stale_nodes(n - 3 > 0 ? n - 3 : 0);
	return k;
}

struct stale_job {
	struct stale *st;
	int n;
	long r;
};

static void stale_job_fn(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)run;
	struct stale_job *j = arg;
	j->r = JOBS_TASK_RUN(w, stale_fib, j->st, j->n);
}

START_TEST(test_stale_top_copies)
{
	/* more workers than cores: owners preempted between a push and the syncs below it */
	static const int workers[] = {0, 1, 2, 5, 16};
	for (size_t k = 0; k < sizeof workers / sizeof workers[0]; k++) {
		int w = workers[k];
		struct stale st;
		st.s = jt_sched(w);
		atomic_init(&st.nodes, 0);
		atomic_init(&st.ran, 0);
		atomic_init(&st.submitted, 0);
		int n = jt_tsan() ? 13 : 17;
		int rounds = (int)jt_scaled(6, 2);
		for (int r = 0; r < rounds; r++) {
			struct stale_job j = {&st, n, -1};
			run_job(st.s, stale_job_fn, &j);
			ck_assert_msg(j.r == fib_serial(n), "workers=%d round %d: fib(%d) = %ld", w, r, n, j.r);
		}
		jobs_sched_destroy(st.s); /* runs whatever side jobs are left */
		ck_assert_msg(atomic_load(&st.nodes) == (long)rounds * stale_nodes(n),
			      "workers=%d: %ld nodes ran, expected %ld", w, atomic_load(&st.nodes),
			      (long)rounds * stale_nodes(n));
		ck_assert_msg(atomic_load(&st.ran) == atomic_load(&st.submitted) && atomic_load(&st.ran) > 0,
			      "workers=%d: %ld side jobs ran, %ld submitted", w, atomic_load(&st.ran),
			      atomic_load(&st.submitted));
	}
}
END_TEST

static Suite *task_suite(void)
{
	Suite *su = suite_create("jobs_task");
	TCase *tc = tcase_create("typed");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_fib_0_to_4_workers);
	tcase_add_test(tc, test_fib_many_workers);
	tcase_add_test(tc, test_leaves_once);
	tcase_add_test(tc, test_mixed_generic_and_typed);
	tcase_add_test(tc, test_detached_above_typed);
	tcase_add_test(tc, test_stale_top_copies);
	suite_add_tcase(su, tc);
	return su;
}

JT_MAIN(task_suite)
