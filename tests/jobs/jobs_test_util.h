/*
 * jobs_test_util.h — small helpers shared by the jobs Check suites: iteration scaling for slow
 * (sanitizer) builds, a seeded PRNG, sleeping, safety-net deadlines and a standard main().
 *
 * Nothing here measures time for pass/fail: deadlines only keep a broken build from hanging.
 */
#ifndef OVSTAGE_TEST_JOBS_UTIL_H
#define OVSTAGE_TEST_JOBS_UTIL_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "jobs.h"

/* Multiplier for iteration counts: OVSTAGE_TEST_SCALE (default 1.0), times 0.1 under TSan. */
static inline double jt_scale(void)
{
	static double cached = -1.0;
	if (cached < 0.0) {
		double s = 1.0;
		const char *e = getenv("OVSTAGE_TEST_SCALE");
		if (e && *e) {
			double v = strtod(e, NULL);
			if (v > 0.0)
				s = v;
		}
#ifdef OVSTAGE_TSAN
		s *= 0.1;
#endif
		cached = s;
	}
	return cached;
}

/* n scaled, at least `min`. */
static inline long jt_scaled(long n, long min)
{
	double v = (double)n * jt_scale();
	long r = (long)v;
	return r < min ? min : r;
}

static inline bool jt_tsan(void)
{
#ifdef OVSTAGE_TSAN
	return true;
#else
	return false;
#endif
}

/* splitmix64: a seeded, reproducible generator (per thread: keep the state local). */
static inline uint64_t jt_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static inline uint64_t jt_below(uint64_t *state, uint64_t n)
{
	return n ? jt_rand(state) % n : 0;
}

static inline uint64_t jt_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void jt_sleep_us(unsigned us)
{
	struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000L};
	while (nanosleep(&ts, &ts) != 0)
		;
}

/* Safety net for "eventually" conditions: generous, never a performance criterion. */
#define JT_SAFETY_NS (60ull * 1000000000ull)

/* A wait timeout that is only a safety net (the job is expected to finish long before). */
#define JT_WAIT_NS (30ull * 1000000000ull)

static inline const char *jt_status_name(jobs_status st)
{
	switch (st) {
	case JOBS_OK: return "OK";
	case JOBS_PENDING: return "PENDING";
	case JOBS_FAILED: return "FAILED";
	case JOBS_CANCELLED: return "CANCELLED";
	case JOBS_INVALID: return "INVALID";
	case JOBS_FULL: return "FULL";
	case JOBS_NOMEM: return "NOMEM";
	}
	return "?";
}

/* Asserts a status with both names in the message. */
#define jt_assert_status(got, want, what)                                                          \
	do {                                                                                       \
		jobs_status g_ = (got), w_ = (want);                                               \
		ck_assert_msg(g_ == w_, "%s: got %s (%d), expected %s (%d)", (what),               \
			      jt_status_name(g_), (int)g_, jt_status_name(w_), (int)w_);           \
	} while (0)

/* A scheduler with the given worker count and otherwise default settings (small spin). */
static inline jobs_sched *jt_sched(int workers)
{
	jobs_config cfg;
	jobs_config_default(&cfg);
	cfg.workers = workers;
	cfg.spin_us = 50;
	const char *err = NULL;
	jobs_sched *s = jobs_sched_create(&cfg, &err);
	ck_assert_msg(s != NULL, "jobs_sched_create(workers=%d) failed: %s", workers, err ? err : "?");
	return s;
}

static inline jobs_sched *jt_sched_cfg(const jobs_config *cfg)
{
	const char *err = NULL;
	jobs_sched *s = jobs_sched_create(cfg, &err);
	ck_assert_msg(s != NULL, "jobs_sched_create(workers=%d) failed: %s", cfg->workers,
		      err ? err : "?");
	return s;
}

/* Submits, retrying while the queue or the receipt table is full (helping by waiting on `help`,
 * if non-zero, so that 0-worker pools make progress). */
static inline jobs_id jt_submit(jobs_sched *s, const jobs_job_desc *d, jobs_id help)
{
	jobs_id id = 0;
	uint64_t start = jt_now_ns();
	for (;;) {
		jobs_status st = jobs_submit(s, d, &id);
		if (st == JOBS_OK) {
			ck_assert_msg(id != JOBS_INVALID_ID, "jobs_submit returned OK with id 0");
			return id;
		}
		ck_assert_msg(st == JOBS_FULL, "jobs_submit: got %s (%d), expected OK or FULL",
			      jt_status_name(st), (int)st);
		ck_assert_msg(id == JOBS_INVALID_ID, "jobs_submit failed but *out_id = %llu",
			      (unsigned long long)id);
		ck_assert_msg(jt_now_ns() - start < JT_SAFETY_NS, "jobs_submit stayed FULL for 60 s");
		if (help)
			(void)jobs_wait(s, help, 1000000);
		else
			jt_sleep_us(100);
	}
}

/* Failures seen on threads other than the test's own (workers, helper threads): Check's assertions
 * may only be used on the test thread (CK_FORK=no longjmps), so other threads record here and the
 * test thread asserts jt_no_thread_failures() at the end. */
#include <stdarg.h>
#include <stdatomic.h>
static _Atomic int jt_failures;
static char jt_first_failure[512];

static inline void jt_fail_at(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static inline void jt_fail_at(const char *file, int line, const char *fmt, ...)
{
	if (atomic_fetch_add(&jt_failures, 1) == 0) {
		int n = snprintf(jt_first_failure, sizeof jt_first_failure, "%s:%d: ", file, line);
		va_list ap;
		va_start(ap, fmt);
		if (n > 0 && (size_t)n < sizeof jt_first_failure)
			vsnprintf(jt_first_failure + n, sizeof jt_first_failure - (size_t)n, fmt, ap);
		va_end(ap);
	}
}

/* Thread-safe check: records a failure instead of aborting the thread. */
#define jt_check(cond, ...)                                                                        \
	do {                                                                                       \
		if (!(cond))                                                                       \
			jt_fail_at(__FILE__, __LINE__, __VA_ARGS__);                               \
	} while (0)

/* On the test thread: fail if any other thread recorded a failure (and reset for the next test). */
#define jt_assert_no_thread_failures()                                                             \
	do {                                                                                       \
		int n_ = atomic_exchange(&jt_failures, 0);                                         \
		ck_assert_msg(n_ == 0, "%d failure(s) on other threads; first: %s", n_,            \
			      jt_first_failure);                                                   \
	} while (0)

/* Standard main: run the suite with CK_NORMAL output, exit non-zero on failure. */
#define JT_MAIN(suite_fn)                                                                          \
	int main(void)                                                                             \
	{                                                                                          \
		SRunner *sr = srunner_create(suite_fn());                                          \
		srunner_run_all(sr, CK_NORMAL);                                                    \
		int failed = srunner_ntests_failed(sr);                                            \
		srunner_free(sr);                                                                  \
		return failed ? EXIT_FAILURE : EXIT_SUCCESS;                                       \
	}

#endif /* OVSTAGE_TEST_JOBS_UTIL_H */
