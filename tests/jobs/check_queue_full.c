/*
 * check_queue_full.c — JOBS_FULL: the injection queue (workers = 0, queue_capacity = 8) and the
 * receipt table (receipt_capacity = 64). A refused submission leaves *out_id = 0, does not call the
 * cleanup, runs nothing, and capacity comes back once jobs ran and receipts were released.
 */
#include <check.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "jobs.h"
#include "jobs_test_util.h"

struct cnt {
	_Atomic int body;
	_Atomic int cleanup;
};

static void cnt_body(jobs_worker *w, void *arg, jobs_run *run)
{
	atomic_fetch_add(&((struct cnt *)arg)->body, 1);
}

static void cnt_cleanup(void *arg, bool ran)
{
	atomic_fetch_add(&((struct cnt *)arg)->cleanup, 1);
}

static jobs_sched *small_pool(int workers, uint32_t queue, uint32_t receipts)
{
	jobs_config cfg;
	jobs_config_default(&cfg);
	cfg.workers = workers;
	cfg.queue_capacity = queue;
	cfg.receipt_capacity = receipts;
	cfg.spin_us = 50;
	return jt_sched_cfg(&cfg);
}

START_TEST(test_injection_queue_full)
{
	jobs_sched *s = small_pool(0, 8, 0);
	struct cnt c[8] = {0}, refused = {0}, fenced = {0}, later[8] = {0};
	jobs_id ids[8];
	for (int i = 0; i < 8; i++) {
		jobs_job_desc d = {.fn = cnt_body, .arg = &c[i], .cleanup = cnt_cleanup};
		char what[32];
		snprintf(what, sizeof what, "submission %d of 8", i + 1);
		jt_assert_status(jobs_submit(s, &d, &ids[i]), JOBS_OK, what);
	}
	jobs_job_desc d9 = {.fn = cnt_body, .arg = &refused, .cleanup = cnt_cleanup};
	jobs_id out = 77;
	jt_assert_status(jobs_submit(s, &d9, &out), JOBS_FULL, "9th submission into 8 slots");
	ck_assert_msg(out == 0, "refused submission: *out_id = %llu", (unsigned long long)out);
	ck_assert_msg(atomic_load(&refused.cleanup) == 0, "refused submission's cleanup ran");

	/* A job that is not runnable at once does not need the queue. */
	jobs_job_desc df = {.fn = cnt_body, .arg = &fenced, .cleanup = cnt_cleanup, .fences = 1};
	jobs_id idf;
	jt_assert_status(jobs_submit(s, &df, &idf), JOBS_OK, "fenced submission into a full queue");
	jobs_job_desc da = {.fn = cnt_body, .arg = &later[0], .cleanup = cnt_cleanup, .after = &idf,
			    .after_count = 1};
	jobs_id ida;
	jt_assert_status(jobs_submit(s, &da, &ida), JOBS_OK, "dependent submission into a full queue");

	for (int i = 0; i < 8; i++)
		ck_assert_msg(atomic_load(&c[i].body) == 0, "0 workers: job %d ran before anyone waited", i);
	/* waiting runs them in this thread */
	for (int i = 0; i < 8; i++) {
		jt_assert_status(jobs_wait(s, ids[i], JT_WAIT_NS), JOBS_OK, "wait");
		jt_assert_status(jobs_release(s, ids[i]), JOBS_OK, "release");
	}
	for (int i = 0; i < 8; i++)
		ck_assert_msg(atomic_load(&c[i].body) == 1 && atomic_load(&c[i].cleanup) == 1,
			      "job %d: body %d, cleanup %d", i, atomic_load(&c[i].body),
			      atomic_load(&c[i].cleanup));
	ck_assert_msg(atomic_load(&refused.body) == 0 && atomic_load(&refused.cleanup) == 0,
		      "refused job: body %d, cleanup %d", atomic_load(&refused.body),
		      atomic_load(&refused.cleanup));

	/* room again: the refused job can be resubmitted, and 7 more */
	jt_assert_status(jobs_submit(s, &d9, &out), JOBS_OK, "resubmission after draining");
	jobs_id more[7];
	for (int i = 0; i < 7; i++) {
		jobs_job_desc d = {.fn = cnt_body, .arg = &later[1 + i], .cleanup = cnt_cleanup};
		jt_assert_status(jobs_submit(s, &d, &more[i]), JOBS_OK, "refill");
	}
	jt_assert_status(jobs_fence_resolve(s, idf), JOBS_OK, "resolve (ready stack, not the queue)");
	jt_assert_status(jobs_wait(s, ida, JT_WAIT_NS), JOBS_OK, "wait dependent");
	jt_assert_status(jobs_wait(s, out, JT_WAIT_NS), JOBS_OK, "wait resubmitted");
	for (int i = 0; i < 7; i++)
		jt_assert_status(jobs_wait(s, more[i], JT_WAIT_NS), JOBS_OK, "wait refill");
	ck_assert_int_eq(atomic_load(&refused.body), 1);
	ck_assert_int_eq(atomic_load(&refused.cleanup), 1);
	ck_assert_int_eq(atomic_load(&fenced.body), 1);
	for (int i = 0; i < 8; i++)
		ck_assert_msg(atomic_load(&later[i].body) == 1, "later job %d ran %d times", i,
			      atomic_load(&later[i].body));
	jobs_sched_destroy(s);
}
END_TEST

/* Repeated fill / refuse / drain cycles, counting every job. */
START_TEST(test_injection_queue_cycles)
{
	jobs_sched *s = small_pool(0, 8, 0);
	int cycles = (int)jt_scaled(300, 30);
	struct cnt c = {0};
	int accepted = 0, refused = 0;
	for (int k = 0; k < cycles; k++) {
		jobs_id ids[16];
		int n = 0;
		for (int i = 0; i < 12; i++) {
			jobs_job_desc d = {.fn = cnt_body, .arg = &c, .cleanup = cnt_cleanup};
			jobs_id id = 5;
			jobs_status st = jobs_submit(s, &d, &id);
			if (st == JOBS_OK) {
				ids[n++] = id;
				accepted++;
			} else {
				jt_assert_status(st, JOBS_FULL, "submit into a small queue");
				ck_assert_msg(id == 0, "refused: *out_id = %llu", (unsigned long long)id);
				refused++;
			}
		}
		ck_assert_msg(n == 8, "cycle %d: %d accepted, expected 8", k, n);
		for (int i = n - 1; i >= 0; i--) { /* waiting on the last may run all of them */
			jt_assert_status(jobs_wait(s, ids[i], JT_WAIT_NS), JOBS_OK, "wait");
			jt_assert_status(jobs_release(s, ids[i]), JOBS_OK, "release");
		}
	}
	ck_assert_msg(atomic_load(&c.body) == accepted && atomic_load(&c.cleanup) == accepted,
		      "%d accepted, %d bodies, %d cleanups (%d refused)", accepted, atomic_load(&c.body),
		      atomic_load(&c.cleanup), refused);
	jobs_sched_destroy(s);
}
END_TEST

/* Jobs submitted by a job (a worker, here the waiting thread's helper context) do not go through
 * the injection queue: more than its capacity is accepted. */
struct spawner {
	jobs_sched *s;
	struct cnt c;
	jobs_id ids[32];
	int accepted;
};

static void spawner_body(jobs_worker *w, void *arg, jobs_run *run)
{
	struct spawner *sp = arg;
	for (int i = 0; i < 32; i++) {
		jobs_job_desc d = {.fn = cnt_body, .arg = &sp->c, .cleanup = cnt_cleanup};
		if (jobs_submit(sp->s, &d, &sp->ids[i]) == JOBS_OK)
			sp->accepted++;
	}
	for (int i = 0; i < sp->accepted; i++)
		(void)jobs_wait(sp->s, sp->ids[i], JOBS_TIMEOUT_INFINITE);
}

START_TEST(test_worker_side_bypasses_queue)
{
	jobs_sched *s = small_pool(_i, 8, 0);
	struct spawner sp = {.s = s};
	jobs_job_desc d = {.fn = spawner_body, .arg = &sp};
	jobs_id id;
	jt_assert_status(jobs_submit(s, &d, &id), JOBS_OK, "submit spawner");
	jt_assert_status(jobs_wait(s, id, JT_WAIT_NS), JOBS_OK, "wait spawner");
	ck_assert_msg(sp.accepted == 32, "workers=%d: %d of 32 worker-side submissions accepted", _i,
		      sp.accepted);
	ck_assert_int_eq(atomic_load(&sp.c.body), 32);
	ck_assert_int_eq(atomic_load(&sp.c.cleanup), 32);
	jobs_sched_destroy(s);
}
END_TEST

START_TEST(test_receipt_table_full)
{
	int workers = _i;
	jobs_sched *s = small_pool(workers, 0, 64);
	struct cnt c[64] = {0}, refused = {0};
	jobs_id ids[64];
	for (int i = 0; i < 64; i++) {
		jobs_job_desc d = {.fn = cnt_body, .arg = &c[i], .cleanup = cnt_cleanup, .fences = 1};
		jt_assert_status(jobs_submit(s, &d, &ids[i]), JOBS_OK, "held submission");
	}
	jobs_stats st;
	jobs_sched_stats(s, &st);
	ck_assert_msg(st.receipts_live == 64, "receipts_live %llu, expected 64",
		      (unsigned long long)st.receipts_live);
	jobs_job_desc dr = {.fn = cnt_body, .arg = &refused, .cleanup = cnt_cleanup};
	jobs_id out = 3;
	jt_assert_status(jobs_submit(s, &dr, &out), JOBS_FULL, "runnable submission, table full");
	ck_assert_msg(out == 0, "refused: *out_id = %llu", (unsigned long long)out);
	jobs_job_desc drf = {.fn = cnt_body, .arg = &refused, .cleanup = cnt_cleanup, .fences = 1};
	out = 3;
	jt_assert_status(jobs_submit(s, &drf, &out), JOBS_FULL, "held submission, table full");
	ck_assert_msg(out == 0, "refused: *out_id = %llu", (unsigned long long)out);

	/* a completed but unreleased receipt still takes its slot */
	jt_assert_status(jobs_fence_resolve(s, ids[0]), JOBS_OK, "resolve 0");
	jt_assert_status(jobs_wait(s, ids[0], JT_WAIT_NS), JOBS_OK, "wait 0");
	out = 3;
	jt_assert_status(jobs_submit(s, &dr, &out), JOBS_FULL, "table full of unreleased receipts");
	ck_assert_msg(out == 0, "refused: *out_id = %llu", (unsigned long long)out);
	/* releasing frees it */
	jt_assert_status(jobs_release(s, ids[0]), JOBS_OK, "release 0");
	jt_assert_status(jobs_submit(s, &dr, &out), JOBS_OK, "submission after a release");
	jt_assert_status(jobs_wait(s, out, JT_WAIT_NS), JOBS_OK, "wait resubmitted");
	jt_assert_status(jobs_release(s, out), JOBS_OK, "release resubmitted");
	for (int i = 1; i < 64; i++)
		jt_assert_status(jobs_fence_resolve(s, ids[i]), JOBS_OK, "resolve");
	for (int i = 1; i < 64; i++) {
		jt_assert_status(jobs_wait(s, ids[i], JT_WAIT_NS), JOBS_OK, "wait");
		jt_assert_status(jobs_release(s, ids[i]), JOBS_OK, "release");
	}
	for (int i = 0; i < 64; i++)
		ck_assert_msg(atomic_load(&c[i].body) == 1 && atomic_load(&c[i].cleanup) == 1,
			      "job %d: body %d cleanup %d", i, atomic_load(&c[i].body),
			      atomic_load(&c[i].cleanup));
	ck_assert_msg(atomic_load(&refused.body) == 1 && atomic_load(&refused.cleanup) == 1,
		      "refused-then-accepted job: body %d cleanup %d", atomic_load(&refused.body),
		      atomic_load(&refused.cleanup));
	jobs_sched_stats(s, &st);
	ck_assert_msg(st.receipts_live == 0, "receipts_live %llu after releasing all",
		      (unsigned long long)st.receipts_live);
	/* and the whole table is usable again */
	for (int i = 0; i < 64; i++) {
		jobs_job_desc d = {.fn = cnt_body, .arg = &c[i], .cleanup = cnt_cleanup};
		jt_assert_status(jobs_submit(s, &d, &ids[i]), JOBS_OK, "refill the table");
	}
	for (int i = 0; i < 64; i++)
		jt_assert_status(jobs_wait(s, ids[i], JT_WAIT_NS), JOBS_OK, "wait refill");
	jobs_sched_destroy(s);
}
END_TEST

static Suite *queue_full_suite(void)
{
	Suite *su = suite_create("jobs_queue_full");
	TCase *tc = tcase_create("queue");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_injection_queue_full);
	tcase_add_test(tc, test_injection_queue_cycles);
	tcase_add_loop_test(tc, test_worker_side_bypasses_queue, 0, 2);
	suite_add_tcase(su, tc);
	tc = tcase_create("receipts");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_receipt_table_full, 0, 3);
	suite_add_tcase(su, tc);
	return su;
}

JT_MAIN(queue_full_suite)
