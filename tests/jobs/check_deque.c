/*
 * check_deque.c — fork-join on the split deque (jobs_forkjoin.h): LIFO joins on one worker, every
 * leaf of a parallel tree runs exactly once under stealing, fib against the serial value for 0..4
 * workers, deep recursion just below deque_capacity, and the overflow boundary (in a child process).
 */
#include <check.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jobs.h"
#include "jobs_forkjoin.h"
#include "jobs_test_fib.h"
#include "jobs_test_util.h"

extern char **environ;

/* Runs fn(arg) as a job submitted from this (external) thread and waits for it. */
static void run_job(jobs_sched *s, jobs_job_fn fn, void *arg)
{
	jobs_job_desc d = {.fn = fn, .arg = arg};
	jobs_id id = 0;
	jt_assert_status(jobs_submit(s, &d, &id), JOBS_OK, "submit");
	jt_assert_status(jobs_wait(s, id, JOBS_TIMEOUT_INFINITE), JOBS_OK, "wait");
	jt_assert_status(jobs_release(s, id), JOBS_OK, "release");
}

/* ---------------------------------------------------------------------------------------------
 * (a) LIFO order on a single worker
 */
#define LIFO_N 300

struct lifo_ctx {
	jobs_sched *s;
	int run_order[LIFO_N];  /* run_order[k]: index of the k-th frame that ran */
	int sync_index[LIFO_N]; /* sync_index[k]: index of the frame the k-th sync returned */
	int sync_ran_at[LIFO_N];
	int ran;                 /* frames run so far (only the owner runs them: no thieves) */
	bool worker_matches;
};

struct lifo_frame {
	struct lifo_ctx *ctx;
	int index;
	int ran_at; /* result: position in the run order */
};
JOBS_PAYLOAD_FITS(struct lifo_frame);

static void lifo_frame_fn(jobs_worker *w, void *p)
{
	struct lifo_frame *f = p;
	int k = f->ctx->ran++;
	if (k < LIFO_N)
		f->ctx->run_order[k] = f->index;
	f->ran_at = k;
}

static void lifo_job(jobs_worker *w, void *arg, jobs_run *run)
{
	struct lifo_ctx *c = arg;
	c->worker_matches = (w != NULL && jobs_current_worker(c->s) == w);
	for (int i = 0; i < LIFO_N; i++) {
		struct lifo_frame *f = jobs_spawn_args(w);
		f->ctx = c;
		f->index = i;
		f->ran_at = -1;
		jobs_spawn(w, lifo_frame_fn);
	}
	for (int k = 0; k < LIFO_N; k++) {
		struct lifo_frame out;
		jobs_sync(w, &out, sizeof out);
		c->sync_index[k] = out.index;
		c->sync_ran_at[k] = out.ran_at;
	}
}

static void check_lifo(int workers)
{
	jobs_sched *s = jt_sched(workers);
	struct lifo_ctx *c = calloc(1, sizeof *c);
	c->s = s;
	run_job(s, lifo_job, c);
	ck_assert_msg(c->worker_matches, "workers=%d: the job's worker is not jobs_current_worker()",
		      workers);
	ck_assert_int_eq(c->ran, LIFO_N);
	for (int k = 0; k < LIFO_N; k++) {
		ck_assert_msg(c->run_order[k] == LIFO_N - 1 - k,
			      "workers=%d: the %d-th frame to run was %d, expected %d (LIFO)", workers, k,
			      c->run_order[k], LIFO_N - 1 - k);
		ck_assert_msg(c->sync_index[k] == LIFO_N - 1 - k,
			      "workers=%d: sync #%d returned frame %d, expected %d", workers, k,
			      c->sync_index[k], LIFO_N - 1 - k);
		ck_assert_msg(c->sync_ran_at[k] == k, "workers=%d: sync #%d: frame ran at %d, expected %d",
			      workers, k, c->sync_ran_at[k], k);
	}
	free(c);
	jobs_sched_destroy(s);
}

START_TEST(test_lifo_one_worker)
{
	check_lifo(1);
}
END_TEST

START_TEST(test_lifo_zero_workers)
{
	check_lifo(0);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * (b) a parallel tree over N leaves: every leaf runs exactly once, the sum is the serial sum
 */
struct tree_ctx {
	_Atomic uint32_t *count; /* per leaf: times it ran */
	const uint64_t *val;     /* per leaf: its value */
	uint32_t fanout;         /* children per inner node (2: binary) */
	_Atomic uint32_t bad_sync;
};

struct tree_frame {
	struct tree_ctx *ctx;
	uint32_t lo, hi; /* leaves [lo, hi) */
	uint64_t sum;    /* result */
};
JOBS_PAYLOAD_FITS(struct tree_frame);

static void tree_fn(jobs_worker *w, void *p)
{
	struct tree_frame *a = p;
	struct tree_ctx *c = a->ctx;
	uint32_t n = a->hi - a->lo;
	if (n == 1) {
		atomic_fetch_add_explicit(&c->count[a->lo], 1, memory_order_relaxed);
		a->sum = c->val[a->lo];
		return;
	}
	uint32_t k = c->fanout < n ? c->fanout : n;
	uint32_t step = n / k;
	/* children 1..k-1 spawned, child 0 run inline */
	for (uint32_t i = k - 1; i >= 1; i--) {
		struct tree_frame *ch = jobs_spawn_args(w);
		ch->ctx = c;
		ch->lo = a->lo + i * step;
		ch->hi = i == k - 1 ? a->hi : a->lo + (i + 1) * step;
		ch->sum = 0;
		jobs_spawn(w, tree_fn);
	}
	struct tree_frame mine = {c, a->lo, a->lo + step, 0};
	tree_fn(w, &mine);
	uint64_t sum = mine.sum;
	for (uint32_t i = 1; i < k; i++) {
		struct tree_frame done;
		jobs_sync(w, &done, sizeof done);
		/* LIFO: the i-th sync joins child i (spawned last-to-first, so child 1 was spawned last) */
		uint32_t lo = a->lo + i * step;
		if (done.lo != lo || done.ctx != c)
			atomic_fetch_add(&c->bad_sync, 1);
		sum += done.sum;
	}
	a->sum = sum;
}

struct tree_job {
	struct tree_ctx *ctx;
	uint32_t n;
	uint64_t sum;
};

static void tree_job_fn(jobs_worker *w, void *arg, jobs_run *run)
{
	struct tree_job *j = arg;
	struct tree_frame root = {j->ctx, 0, j->n, 0};
	tree_fn(w, &root);
	j->sum = root.sum;
}

static void check_tree(int workers, uint32_t fanout, uint32_t n, int rounds)
{
	jobs_sched *s = jt_sched(workers);
	_Atomic uint32_t *count = calloc(n, sizeof *count);
	uint64_t *val = malloc(n * sizeof *val);
	uint64_t rng = 0x5eed0000u + (uint64_t)workers * 31 + fanout;
	uint64_t serial = 0;
	for (uint32_t i = 0; i < n; i++) {
		val[i] = jt_rand(&rng) >> 20;
		serial += val[i];
	}
	struct tree_ctx ctx = {.count = count, .val = val, .fanout = fanout};
	atomic_init(&ctx.bad_sync, 0);
	for (int r = 0; r < rounds; r++) {
		for (uint32_t i = 0; i < n; i++)
			atomic_store_explicit(&count[i], 0, memory_order_relaxed);
		struct tree_job j = {&ctx, n, 0};
		run_job(s, tree_job_fn, &j);
		for (uint32_t i = 0; i < n; i++) {
			uint32_t c = atomic_load_explicit(&count[i], memory_order_relaxed);
			ck_assert_msg(c == 1, "workers=%d fanout=%u round %d: leaf %u ran %u times", workers,
				      fanout, r, i, c);
		}
		ck_assert_msg(j.sum == serial,
			      "workers=%d fanout=%u round %d: sum %llu, serial sum %llu", workers, fanout, r,
			      (unsigned long long)j.sum, (unsigned long long)serial);
		ck_assert_msg(atomic_load(&ctx.bad_sync) == 0,
			      "workers=%d fanout=%u round %d: %u syncs returned the wrong frame", workers,
			      fanout, r, atomic_load(&ctx.bad_sync));
	}
	free(count);
	free(val);
	jobs_sched_destroy(s);
}

static int tree_rounds(void)
{
	return (int)jt_scaled(12, 2);
}

START_TEST(test_tree_2_workers)
{
	check_tree(2, 2, 1u << 16, tree_rounds());
}
END_TEST

START_TEST(test_tree_4_workers)
{
	check_tree(4, 2, 1u << 16, tree_rounds());
}
END_TEST

START_TEST(test_tree_wide_fanout)
{
	/* 32 siblings per node: many frames public at once, thieves asking the owner for more */
	check_tree(2, 32, 1u << 15, tree_rounds());
	check_tree(4, 32, 1u << 15, tree_rounds() / 2 + 1);
}
END_TEST

START_TEST(test_tree_0_workers)
{
	check_tree(0, 2, 1u << 14, 2);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * (c) fib
 */
START_TEST(test_fib)
{
	static const int workers[] = {0, 1, 2, 4};
	int nmax = jt_tsan() ? 20 : 26;
	int ns[] = {0, 1, 2, 10, 17, nmax};
	int w = workers[_i];
	jobs_sched *s = jt_sched(w);
	for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
		for (int rep = 0; rep < 2; rep++) {
			struct fib f = {ns[k], -1};
			run_job(s, fib_job, &f);
			ck_assert_msg(f.r == fib_serial(ns[k]), "workers=%d: fib(%d) = %ld, expected %ld", w,
				      ns[k], f.r, fib_serial(ns[k]));
		}
	}
	jobs_sched_destroy(s);
}
END_TEST

/* Several fib jobs at once, submitted from outside: frames of different jobs interleave. */
START_TEST(test_fib_concurrent_jobs)
{
	jobs_sched *s = jt_sched(4);
	enum { K = 8 };
	struct fib f[K];
	jobs_id ids[K];
	int n = jt_tsan() ? 16 : 22;
	for (int i = 0; i < K; i++) {
		f[i] = (struct fib){n - (i % 3), -1};
		jobs_job_desc d = {.fn = fib_job, .arg = &f[i]};
		jt_assert_status(jobs_submit(s, &d, &ids[i]), JOBS_OK, "submit fib");
	}
	for (int i = 0; i < K; i++) {
		jt_assert_status(jobs_wait(s, ids[i], JOBS_TIMEOUT_INFINITE), JOBS_OK, "wait fib");
		ck_assert_msg(f[i].r == fib_serial(f[i].n), "job %d: fib(%d) = %ld, expected %ld", i,
			      f[i].n, f[i].r, fib_serial(f[i].n));
		jt_assert_status(jobs_release(s, ids[i]), JOBS_OK, "release");
	}
	jobs_sched_destroy(s);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * (d) deep recursion: a chain of `depth` unjoined frames, just below deque_capacity
 */
struct deep_ctx {
	_Atomic uint32_t *count;
};

struct deep_frame {
	struct deep_ctx *ctx;
	uint32_t level; /* remaining depth */
	uint64_t sum;   /* result: sum of leaf values below */
};
JOBS_PAYLOAD_FITS(struct deep_frame);

static void deep_leaf(jobs_worker *w, void *p)
{
	struct deep_frame *a = p;
	atomic_fetch_add_explicit(&a->ctx->count[a->level], 1, memory_order_relaxed);
	a->sum = (uint64_t)a->level * 3 + 1;
}

static void deep_chain(jobs_worker *w, void *p)
{
	struct deep_frame *a = p;
	if (a->level == 0) {
		a->sum = 0;
		return;
	}
	struct deep_frame *leaf = jobs_spawn_args(w);
	leaf->ctx = a->ctx;
	leaf->level = a->level;
	leaf->sum = 0;
	jobs_spawn(w, deep_leaf);
	struct deep_frame rest = {a->ctx, a->level - 1, 0};
	deep_chain(w, &rest);
	struct deep_frame done;
	jobs_sync(w, &done, sizeof done);
	a->sum = rest.sum + done.sum;
}

struct deep_job {
	struct deep_ctx *ctx;
	uint32_t depth;
	uint64_t sum;
};

static void deep_job_fn(jobs_worker *w, void *arg, jobs_run *run)
{
	struct deep_job *j = arg;
	struct deep_frame f = {j->ctx, j->depth, 0};
	deep_chain(w, &f);
	j->sum = f.sum;
}

START_TEST(test_deep_recursion)
{
	static const int workers[] = {0, 1, 2};
	const uint32_t cap = 1024, depth = cap - 24;
	jobs_config cfg;
	jobs_config_default(&cfg);
	cfg.workers = workers[_i];
	cfg.deque_capacity = cap;
	cfg.spin_us = 50;
	jobs_sched *s = jt_sched_cfg(&cfg);
	_Atomic uint32_t *count = calloc(depth + 1, sizeof *count);
	struct deep_ctx ctx = {count};
	uint64_t expect = 0;
	for (uint32_t l = 1; l <= depth; l++)
		expect += (uint64_t)l * 3 + 1;
	int rounds = (int)jt_scaled(20, 2);
	for (int r = 0; r < rounds; r++) {
		for (uint32_t l = 0; l <= depth; l++)
			atomic_store(&count[l], 0);
		struct deep_job j = {&ctx, depth, 0};
		run_job(s, deep_job_fn, &j);
		ck_assert_msg(j.sum == expect, "workers=%d round %d: sum %llu, expected %llu", cfg.workers,
			      r, (unsigned long long)j.sum, (unsigned long long)expect);
		for (uint32_t l = 1; l <= depth; l++)
			ck_assert_msg(atomic_load(&count[l]) == 1, "workers=%d round %d: leaf %u ran %u times",
				      cfg.workers, r, l, atomic_load(&count[l]));
	}
	free(count);
	jobs_sched_destroy(s);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * The overflow boundary, in a child process (an overflow aborts by contract).
 * jobs_forkjoin.h: "The deque holds `deque_capacity` frames; exceeding it ... aborts".
 */
static void noop_frame(jobs_worker *w, void *p)
{
	(void)p;
}

struct flat_job {
	uint32_t frames;
};

static void flat_job_fn(jobs_worker *w, void *arg, jobs_run *run)
{
	struct flat_job *j = arg;
	for (uint32_t i = 0; i < j->frames; i++) {
		(void)jobs_spawn_args(w);
		jobs_spawn(w, noop_frame);
	}
	for (uint32_t i = 0; i < j->frames; i++) {
		jobs_payload out;
		jobs_sync(w, &out, sizeof out);
	}
}

/* Child: a 1-worker pool with deque_capacity 256; one job (taken from the injection queue, so it
 * occupies no frame itself) spawns `frames` unjoined frames. Exits 0 if that worked. */
static int overflow_child(uint32_t frames)
{
	jobs_config cfg;
	jobs_config_default(&cfg);
	cfg.workers = 1;
	cfg.deque_capacity = 256;
	jobs_sched *s = jobs_sched_create(&cfg, NULL);
	if (!s)
		return 3;
	struct flat_job j = {frames};
	jobs_job_desc d = {.fn = flat_job_fn, .arg = &j};
	jobs_id id;
	if (jobs_submit(s, &d, &id) != JOBS_OK)
		return 4;
	if (jobs_wait(s, id, JOBS_TIMEOUT_INFINITE) != JOBS_OK)
		return 5;
	jobs_sched_destroy(s);
	return 0;
}

/* Runs this executable as the overflow child; returns the wait status and the child's stderr. */
static int run_child(uint32_t frames, char *err, size_t errsize)
{
	char path[4096];
	ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
	ck_assert_msg(n > 0, "readlink /proc/self/exe failed");
	path[n] = '\0';
	char arg[32];
	snprintf(arg, sizeof arg, "%u", frames);
	char errpath[] = "/tmp/ovstage_deque_child_XXXXXX";
	int fd = mkstemp(errpath);
	ck_assert_msg(fd >= 0, "mkstemp failed");
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd, 2);
	char *argv[] = {path, (char *)"--overflow-child", arg, NULL};
	pid_t pid;
	int rc = posix_spawn(&pid, path, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	ck_assert_msg(rc == 0, "posix_spawn failed: %d", rc);
	int status = 0;
	ck_assert_msg(waitpid(pid, &status, 0) == pid, "waitpid failed");
	ssize_t got = pread(fd, err, errsize - 1, 0);
	err[got > 0 ? got : 0] = '\0';
	close(fd);
	unlink(errpath);
	return status;
}

START_TEST(test_capacity_minus_one_frames_fit)
{
	char err[4096];
	int st = run_child(255, err, sizeof err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "255 frames on a 256-frame deque: child status 0x%x, stderr: %s", st, err);
}
END_TEST

START_TEST(test_capacity_frames_fit)
{
	/* Per the contract the deque holds deque_capacity frames: exactly 256 must not abort. */
	char err[4096];
	int st = run_child(256, err, sizeof err);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "256 frames on a deque of deque_capacity = 256 aborted (status 0x%x); stderr: %s",
		      st, err);
}
END_TEST

START_TEST(test_overflow_aborts_with_message)
{
	char err[4096];
	int st = run_child(300, err, sizeof err);
	ck_assert_msg(!(WIFEXITED(st) && WEXITSTATUS(st) == 0),
		      "300 frames on a 256-frame deque did not abort");
	ck_assert_msg(strstr(err, "deque_capacity") != NULL && strstr(err, "256") != NULL,
		      "overflow message does not name deque_capacity = 256: %s", err);
}
END_TEST

static Suite *deque_suite(void)
{
	Suite *su = suite_create("jobs_deque");
	TCase *tc = tcase_create("lifo");
	tcase_add_test(tc, test_lifo_one_worker);
	tcase_add_test(tc, test_lifo_zero_workers);
	suite_add_tcase(su, tc);

	tc = tcase_create("tree");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_tree_2_workers);
	tcase_add_test(tc, test_tree_4_workers);
	tcase_add_test(tc, test_tree_wide_fanout);
	tcase_add_test(tc, test_tree_0_workers);
	suite_add_tcase(su, tc);

	tc = tcase_create("fib");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_fib, 0, 4);
	tcase_add_test(tc, test_fib_concurrent_jobs);
	suite_add_tcase(su, tc);

	tc = tcase_create("deep");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_deep_recursion, 0, 3);
	tcase_add_test(tc, test_capacity_minus_one_frames_fit);
	tcase_add_test(tc, test_capacity_frames_fit);
	tcase_add_test(tc, test_overflow_aborts_with_message);
	suite_add_tcase(su, tc);
	return su;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--overflow-child") == 0)
		return overflow_child((uint32_t)strtoul(argv[2], NULL, 10));
	SRunner *sr = srunner_create(deque_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
