/*
 * check_receipts.c — the receipt contract of jobs.h: ids, poll/wait/release, results and failure
 * messages, dependency-failure propagation, fences, invalid ids, many waiters, and cleanup exactly
 * once per accepted job.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs.h"
#include "jobs_test_util.h"

#define CODE_DEPENDENCY_FAILED (-1) /* JOBS_CODE_DEPENDENCY_FAILED (receipt.h) */

/* What one job did. */
struct rec {
	_Atomic int body;        /* times the body ran */
	_Atomic int cleanup;     /* times the cleanup ran */
	_Atomic int cleanup_ran; /* times the cleanup ran with ran == true */
	jobs_id seen_id;         /* jobs_run_id() in the body */
	jobs_id seen_failed_dep; /* jobs_run_failed_dependency() in the body */
	int fail_code;           /* if non-zero, the body fails with it */
	const char *fail_msg;    /* its message */
};

static void rec_body(jobs_worker *w, void *arg, jobs_run *run)
{
	struct rec *r = arg;
	r->seen_id = jobs_run_id(run);
	r->seen_failed_dep = jobs_run_failed_dependency(run);
	if (r->fail_code)
		jobs_job_fail(run, r->fail_code, "%s", r->fail_msg ? r->fail_msg : "failed");
	atomic_fetch_add(&r->body, 1);
}

static void rec_cleanup(void *arg, bool ran)
{
	struct rec *r = arg;
	atomic_fetch_add(&r->cleanup, 1);
	if (ran)
		atomic_fetch_add(&r->cleanup_ran, 1);
}

static jobs_id submit_rec(jobs_sched *s, struct rec *r, const jobs_id *after, size_t n_after,
			  uint32_t fences, uint32_t flags)
{
	jobs_job_desc d = {.fn = rec_body, .arg = r, .cleanup = rec_cleanup, .after = after,
			   .after_count = n_after, .fences = fences, .flags = flags};
	jobs_id id = 0;
	jt_assert_status(jobs_submit(s, &d, &id), JOBS_OK, "submit");
	ck_assert_msg(id != JOBS_INVALID_ID, "accepted submission with id 0");
	return id;
}

static void wait_ok(jobs_sched *s, jobs_id id, jobs_status want)
{
	jobs_status st = jobs_wait(s, id, JT_WAIT_NS);
	ck_assert_msg(st == want, "wait(%llu): got %s, expected %s", (unsigned long long)id,
		      jt_status_name(st), jt_status_name(want));
}

static const int worker_counts[] = {0, 1, 2};

/* ---------------------------------------------------------------------------------------------
 * Ids
 */
START_TEST(test_ids_monotonic)
{
	jobs_sched *s = jt_sched(worker_counts[_i]);
	enum { N = 500 };
	struct rec *r = calloc(N, sizeof *r);
	jobs_id *ids = calloc(N, sizeof *ids);
	for (int i = 0; i < N; i++) {
		ids[i] = submit_rec(s, &r[i], NULL, 0, (uint32_t)(i % 3 == 0), 0);
		if (i > 0)
			ck_assert_msg(ids[i] > ids[i - 1], "id %d = %llu not above id %d = %llu", i,
				      (unsigned long long)ids[i], i - 1, (unsigned long long)ids[i - 1]);
		if (i % 7 == 0 && i % 3 != 0) { /* release some early: ids must not be reused */
			wait_ok(s, ids[i], JOBS_OK);
			jt_assert_status(jobs_release(s, ids[i]), JOBS_OK, "early release");
		}
	}
	for (int i = 0; i < N; i++) {
		if (i % 3 == 0)
			jt_assert_status(jobs_fence_resolve(s, ids[i]), JOBS_OK, "resolve");
	}
	for (int i = 0; i < N; i++) {
		if (i % 7 == 0 && i % 3 != 0) {
			jt_assert_status(jobs_poll(s, ids[i]), JOBS_INVALID, "poll released");
			continue;
		}
		wait_ok(s, ids[i], JOBS_OK);
		ck_assert_msg(r[i].seen_id == ids[i], "job %d saw run id %llu, receipt %llu", i,
			      (unsigned long long)r[i].seen_id, (unsigned long long)ids[i]);
		jt_assert_status(jobs_release(s, ids[i]), JOBS_OK, "release");
	}
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(atomic_load(&r[i].body), 1);
		ck_assert_int_eq(atomic_load(&r[i].cleanup), 1);
	}
	jobs_sched_destroy(s);
	free(r);
	free(ids);
}
END_TEST

/* Ids handed to concurrent submitters are distinct and each thread's are increasing. */
struct idthread {
	jobs_sched *s;
	int n;
	jobs_id *ids;
	struct rec *recs;
};

static void *id_thread_main(void *arg)
{
	struct idthread *t = arg;
	for (int i = 0; i < t->n; i++) {
		jobs_job_desc d = {.fn = rec_body, .arg = &t->recs[i], .cleanup = rec_cleanup};
		jobs_status st;
		while ((st = jobs_submit(t->s, &d, &t->ids[i])) == JOBS_FULL)
			sched_yield();
		jt_check(st == JOBS_OK, "concurrent submit: %s", jt_status_name(st));
		jt_check(i == 0 || t->ids[i] > t->ids[i - 1], "thread ids not increasing: %llu after %llu",
			 (unsigned long long)t->ids[i], (unsigned long long)t->ids[i - 1]);
	}
	return NULL;
}

static int cmp_id(const void *a, const void *b)
{
	jobs_id x = *(const jobs_id *)a, y = *(const jobs_id *)b;
	return x < y ? -1 : x > y;
}

START_TEST(test_ids_unique_concurrent)
{
	jobs_sched *s = jt_sched(2);
	enum { T = 4 };
	int n = (int)jt_scaled(2000, 100);
	struct idthread t[T];
	pthread_t th[T];
	for (int k = 0; k < T; k++) {
		t[k] = (struct idthread){s, n, calloc((size_t)n, sizeof(jobs_id)),
					 calloc((size_t)n, sizeof(struct rec))};
		ck_assert(pthread_create(&th[k], NULL, id_thread_main, &t[k]) == 0);
	}
	for (int k = 0; k < T; k++)
		pthread_join(th[k], NULL);
	jt_assert_no_thread_failures();
	jobs_id *all = calloc((size_t)(T * n), sizeof *all);
	for (int k = 0; k < T; k++)
		for (int i = 0; i < n; i++) {
			all[k * n + i] = t[k].ids[i];
			wait_ok(s, t[k].ids[i], JOBS_OK);
			jt_assert_status(jobs_release(s, t[k].ids[i]), JOBS_OK, "release");
			ck_assert_int_eq(atomic_load(&t[k].recs[i].body), 1);
			ck_assert_int_eq(atomic_load(&t[k].recs[i].cleanup), 1);
		}
	qsort(all, (size_t)(T * n), sizeof *all, cmp_id);
	ck_assert_msg(all[0] != 0, "id 0 handed out");
	for (int i = 1; i < T * n; i++)
		ck_assert_msg(all[i] != all[i - 1], "id %llu handed out twice", (unsigned long long)all[i]);
	for (int k = 0; k < T; k++) {
		free(t[k].ids);
		free(t[k].recs);
	}
	free(all);
	jobs_sched_destroy(s);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Poll, wait, release
 */
START_TEST(test_poll_wait_fenced)
{
	int workers = worker_counts[_i];
	jobs_sched *s = jt_sched(workers);
	struct rec r = {0};
	jobs_id id = submit_rec(s, &r, NULL, 0, 1, 0);
	jt_assert_status(jobs_poll(s, id), JOBS_PENDING, "poll before the fence");
	jt_assert_status(jobs_wait(s, id, 0), JOBS_PENDING, "wait(0) before the fence");
	jt_assert_status(jobs_wait(s, id, 2000000), JOBS_PENDING, "wait(2 ms) before the fence");
	int code = 123;
	char buf[64] = "junk";
	jt_assert_status(jobs_receipt_result(s, id, &code, buf, sizeof buf), JOBS_PENDING,
			 "receipt_result before the fence");
	ck_assert_msg(code == 0 && buf[0] == '\0', "pending result: code %d, message '%s'", code, buf);
	ck_assert_msg(atomic_load(&r.body) == 0, "workers=%d: body ran before its fence", workers);
	/* still pending after the timeouts: not terminal */
	jt_assert_status(jobs_poll(s, id), JOBS_PENDING, "poll after timed-out waits");

	jt_assert_status(jobs_fence_resolve(s, id), JOBS_OK, "resolve");
	wait_ok(s, id, JOBS_OK);
	jt_assert_status(jobs_poll(s, id), JOBS_OK, "poll after wait");
	jt_assert_status(jobs_wait(s, id, 0), JOBS_OK, "wait(0) after completion");
	jt_assert_status(jobs_receipt_result(s, id, &code, buf, sizeof buf), JOBS_OK, "result");
	ck_assert_msg(code == 0 && buf[0] == '\0', "ok result: code %d, message '%s'", code, buf);
	ck_assert_int_eq(atomic_load(&r.body), 1);
	ck_assert_int_eq(atomic_load(&r.cleanup), 1);
	ck_assert_int_eq(atomic_load(&r.cleanup_ran), 1);

	jt_assert_status(jobs_release(s, id), JOBS_OK, "first release");
	jt_assert_status(jobs_release(s, id), JOBS_INVALID, "second release");
	jt_assert_status(jobs_poll(s, id), JOBS_INVALID, "poll after release");
	jt_assert_status(jobs_wait(s, id, 0), JOBS_INVALID, "wait(0) after release");
	jt_assert_status(jobs_wait(s, id, JOBS_TIMEOUT_INFINITE), JOBS_INVALID,
			 "wait(inf) after release");
	jt_assert_status(jobs_receipt_result(s, id, &code, buf, sizeof buf), JOBS_INVALID,
			 "result after release");
	jt_assert_status(jobs_fence_resolve(s, id), JOBS_INVALID, "resolve after release");
	jobs_sched_destroy(s);
}
END_TEST

/* Release before the job ran: the job still runs (its fence resolved), cleanup once, id invalid. */
START_TEST(test_release_before_run)
{
	jobs_sched *s = jt_sched(worker_counts[_i]);
	struct rec r = {0}, after_r = {0};
	jobs_id id = submit_rec(s, &r, NULL, 0, 0, 0);
	jobs_id dep = submit_rec(s, &after_r, &id, 1, 1, 0); /* depends on id, held by a fence */
	jt_assert_status(jobs_release(s, id), JOBS_OK, "release before the job ran");
	jt_assert_status(jobs_poll(s, id), JOBS_INVALID, "poll on released");
	jt_assert_status(jobs_fence_resolve(s, dep), JOBS_OK, "resolve");
	wait_ok(s, dep, JOBS_OK); /* covers id (a dependency) */
	ck_assert_int_eq(atomic_load(&r.body), 1);
	ck_assert_int_eq(atomic_load(&r.cleanup), 1);
	ck_assert_int_eq(atomic_load(&after_r.body), 1);
	jt_assert_status(jobs_release(s, dep), JOBS_OK, "release dep");
	jobs_stats st;
	jobs_sched_stats(s, &st);
	ck_assert_msg(st.receipts_live == 0, "receipts_live = %llu after releasing everything",
		      (unsigned long long)st.receipts_live);
	jobs_sched_destroy(s);
}
END_TEST

START_TEST(test_invalid_ids)
{
	jobs_sched *s = jt_sched(worker_counts[_i]);
	struct rec r = {0};
	jobs_id id = submit_rec(s, &r, NULL, 0, 0, 0);
	wait_ok(s, id, JOBS_OK);
	const jobs_id bad[] = {0, id + 1, id + 1000, (jobs_id)1 << 40, UINT64_MAX, UINT64_MAX - 1};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		jobs_id b = bad[i];
		char what[64];
		int code = 7;
		char buf[16] = "junk";
		snprintf(what, sizeof what, "poll(%llu)", (unsigned long long)b);
		jt_assert_status(jobs_poll(s, b), JOBS_INVALID, what);
		snprintf(what, sizeof what, "wait(%llu, 0)", (unsigned long long)b);
		jt_assert_status(jobs_wait(s, b, 0), JOBS_INVALID, what);
		snprintf(what, sizeof what, "wait(%llu, inf)", (unsigned long long)b);
		jt_assert_status(jobs_wait(s, b, JOBS_TIMEOUT_INFINITE), JOBS_INVALID, what);
		snprintf(what, sizeof what, "receipt_result(%llu)", (unsigned long long)b);
		jt_assert_status(jobs_receipt_result(s, b, &code, buf, sizeof buf), JOBS_INVALID, what);
		ck_assert_msg(code == 0 && buf[0] == '\0', "%s: code %d, message '%s'", what, code, buf);
		jobs_id fd;
		uint64_t tag;
		snprintf(what, sizeof what, "receipt_failed_dependency(%llu)", (unsigned long long)b);
		jt_assert_status(jobs_receipt_failed_dependency(s, b, &fd), JOBS_INVALID, what);
		snprintf(what, sizeof what, "receipt_tag(%llu)", (unsigned long long)b);
		jt_assert_status(jobs_receipt_tag(s, b, &tag), JOBS_INVALID, what);
		snprintf(what, sizeof what, "release(%llu)", (unsigned long long)b);
		jt_assert_status(jobs_release(s, b), JOBS_INVALID, what);
		snprintf(what, sizeof what, "fence_resolve(%llu)", (unsigned long long)b);
		jt_assert_status(jobs_fence_resolve(s, b), JOBS_INVALID, what);
	}
	/* bad arguments */
	jobs_id out = 99;
	jobs_job_desc nofn = {.fn = NULL};
	jt_assert_status(jobs_submit(s, &nofn, &out), JOBS_INVALID, "submit with NULL fn");
	ck_assert_msg(out == 0, "failed submit left *out_id = %llu", (unsigned long long)out);
	out = 99;
	jt_assert_status(jobs_submit(s, NULL, &out), JOBS_INVALID, "submit NULL desc");
	ck_assert_msg(out == 0, "failed submit left *out_id = %llu", (unsigned long long)out);
	out = 99;
	jobs_job_desc noafter = {.fn = rec_body, .arg = &r, .after = NULL, .after_count = 2};
	jt_assert_status(jobs_submit(s, &noafter, &out), JOBS_INVALID, "after_count 2, after NULL");
	ck_assert_msg(out == 0, "failed submit left *out_id = %llu", (unsigned long long)out);
	jt_assert_status(jobs_add_poll_hook(s, NULL, NULL), JOBS_INVALID, "NULL poll hook");
	jt_assert_status(jobs_release(s, id), JOBS_OK, "release");
	ck_assert_int_eq(atomic_load(&r.body), 1);
	jobs_sched_destroy(s);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Results and failure
 */
START_TEST(test_job_fail_result)
{
	jobs_sched *s = jt_sched(worker_counts[_i]);
	struct rec r = {.fail_code = 42, .fail_msg = "disk on fire at sector 7"};
	jobs_id id = submit_rec(s, &r, NULL, 0, 0, 0);
	wait_ok(s, id, JOBS_FAILED);
	jt_assert_status(jobs_poll(s, id), JOBS_FAILED, "poll failed job");
	int code = 0;
	char buf[128];
	jt_assert_status(jobs_receipt_result(s, id, &code, buf, sizeof buf), JOBS_FAILED, "result");
	ck_assert_msg(code == 42, "code %d, expected 42", code);
	ck_assert_msg(strcmp(buf, "disk on fire at sector 7") == 0, "message '%s'", buf);
	/* truncation: always NUL-terminated */
	char small[5];
	memset(small, 'x', sizeof small);
	jt_assert_status(jobs_receipt_result(s, id, &code, small, sizeof small), JOBS_FAILED,
			 "result into 5 bytes");
	ck_assert_msg(memcmp(small, "disk", 5) == 0, "truncated message '%.5s'", small);
	/* NULL code / buffer, size 0 */
	jt_assert_status(jobs_receipt_result(s, id, NULL, NULL, 0), JOBS_FAILED, "result, no outputs");
	char one = 'x';
	jt_assert_status(jobs_receipt_result(s, id, NULL, &one, 0), JOBS_FAILED, "result size 0");
	ck_assert_msg(one == 'x', "size 0 buffer was written");
	ck_assert_int_eq(atomic_load(&r.body), 1);
	ck_assert_int_eq(atomic_load(&r.cleanup_ran), 1);
	jt_assert_status(jobs_release(s, id), JOBS_OK, "release");
	jobs_sched_destroy(s);
}
END_TEST

/* The tag travels with the receipt until it is released. */
START_TEST(test_receipt_tag)
{
	jobs_sched *s = jt_sched(worker_counts[_i]);
	struct rec r1 = {0}, r2 = {0};
	jobs_job_desc d1 = {.fn = rec_body, .arg = &r1, .tag = 0xfeedface12345678ull, .fences = 1};
	jobs_job_desc d2 = {.fn = rec_body, .arg = &r2};
	jobs_id id1, id2;
	jt_assert_status(jobs_submit(s, &d1, &id1), JOBS_OK, "submit tagged");
	jt_assert_status(jobs_submit(s, &d2, &id2), JOBS_OK, "submit untagged");
	uint64_t tag = 1;
	jt_assert_status(jobs_receipt_tag(s, id1, &tag), JOBS_OK, "tag of a pending job");
	ck_assert_msg(tag == 0xfeedface12345678ull, "tag %#llx", (unsigned long long)tag);
	jt_assert_status(jobs_fence_resolve(s, id1), JOBS_OK, "resolve");
	wait_ok(s, id1, JOBS_OK);
	wait_ok(s, id2, JOBS_OK);
	jt_assert_status(jobs_receipt_tag(s, id1, &tag), JOBS_OK, "tag of a done job");
	ck_assert_msg(tag == 0xfeedface12345678ull, "tag after completion %#llx", (unsigned long long)tag);
	jt_assert_status(jobs_receipt_tag(s, id2, &tag), JOBS_OK, "tag of an untagged job");
	ck_assert_msg(tag == 0, "untagged job's tag %#llx", (unsigned long long)tag);
	jt_assert_status(jobs_release(s, id1), JOBS_OK, "release");
	jt_assert_status(jobs_receipt_tag(s, id1, &tag), JOBS_INVALID, "tag of a released id");
	jobs_sched_destroy(s);
}
END_TEST

/* Tagged wait and release act only on a receipt of that tag, and pin it once: a wrong tag leaves
 * the receipt as it was. */
START_TEST(test_wait_release_tagged)
{
	jobs_sched *s = jt_sched(worker_counts[_i]);
	struct rec r = {0};
	jobs_job_desc d = {.fn = rec_body, .arg = &r, .tag = 42, .fences = 1};
	jobs_id id;
	jt_assert_status(jobs_submit(s, &d, &id), JOBS_OK, "submit tagged 42");
	jt_assert_status(jobs_wait_tagged(s, id, 42, 0), JOBS_PENDING, "tagged poll of a fenced job");
	jt_assert_status(jobs_wait_tagged(s, id, 41, 0), JOBS_INVALID, "wait with tag 41");
	jt_assert_status(jobs_release_tagged(s, id, 41), JOBS_INVALID, "release with tag 41");
	jt_assert_status(jobs_fence_resolve(s, id), JOBS_OK, "resolve");
	jt_assert_status(jobs_wait_tagged(s, id, 42, JT_WAIT_NS), JOBS_OK, "tagged wait");
	ck_assert_int_eq(atomic_load(&r.body), 1);
	jt_assert_status(jobs_release_tagged(s, id, 42), JOBS_OK, "tagged release");
	jt_assert_status(jobs_release_tagged(s, id, 42), JOBS_INVALID, "second tagged release");
	jt_assert_status(jobs_wait_tagged(s, id, 42, 0), JOBS_INVALID, "tagged wait after release");
	jt_assert_status(jobs_release(s, id), JOBS_INVALID, "plain release after the tagged one");
	jobs_sched_destroy(s);
}
END_TEST

/* A receipt complete at submission: done, tagged, a dependency that holds nothing back, released once. */
START_TEST(test_submit_done)
{
	jobs_sched *s = jt_sched(worker_counts[_i]);
	for (int k = 0; k < 10000; k++) { /* laps of the receipt table: every slot recycled many times */
		jobs_id id = 0;
		jt_assert_status(jobs_submit_done(s, 7, &id), JOBS_OK, "submit_done");
		ck_assert_msg(id != JOBS_INVALID_ID, "submit_done gave id 0");
		jt_assert_status(jobs_poll(s, id), JOBS_OK, "poll of a done receipt");
		uint64_t tag = 0;
		jt_assert_status(jobs_receipt_tag(s, id, &tag), JOBS_OK, "tag");
		ck_assert_msg(tag == 7, "tag %llu, expected 7", (unsigned long long)tag);
		if (k % 1000 == 0) { /* a dependent of it runs */
			struct rec r = {0};
			jobs_id dep = submit_rec(s, &r, &id, 1, 0, 0);
			wait_ok(s, dep, JOBS_OK);
			ck_assert_int_eq(atomic_load(&r.body), 1);
			jt_assert_status(jobs_release(s, dep), JOBS_OK, "release the dependent");
		}
		jt_assert_status(jobs_release_tagged(s, id, 7), JOBS_OK, "release");
		jt_assert_status(jobs_poll(s, id), JOBS_INVALID, "poll after release");
	}
	jt_assert_status(jobs_submit_done(s, 7, NULL), JOBS_INVALID, "submit_done without out_id");
	jobs_sched_destroy(s);
}
END_TEST

/* The first jobs_job_fail wins. */
static void fail_twice(jobs_worker *w, void *arg, jobs_run *run)
{
	jobs_job_fail(run, 5, "first %d", 1);
	jobs_job_fail(run, 6, "second %d", 2);
}

START_TEST(test_job_fail_first_wins)
{
	jobs_sched *s = jt_sched(1);
	jobs_job_desc d = {.fn = fail_twice};
	jobs_id id;
	jt_assert_status(jobs_submit(s, &d, &id), JOBS_OK, "submit");
	wait_ok(s, id, JOBS_FAILED);
	int code;
	char buf[64];
	jt_assert_status(jobs_receipt_result(s, id, &code, buf, sizeof buf), JOBS_FAILED, "result");
	ck_assert_msg(code == 5 && strcmp(buf, "first 1") == 0, "code %d message '%s'", code, buf);
	jobs_sched_destroy(s); /* unreleased receipt: freed by destroy */
}
END_TEST

static bool names_id(const char *msg, jobs_id id)
{
	char num[32];
	snprintf(num, sizeof num, "%llu", (unsigned long long)id);
	const char *p = msg;
	size_t n = strlen(num);
	while ((p = strstr(p, num)) != NULL) {
		bool left = p == msg || p[-1] < '0' || p[-1] > '9';
		bool right = p[n] < '0' || p[n] > '9';
		if (left && right)
			return true;
		p++;
	}
	return false;
}

/* held: the failing job is held back by a fence so the dependents attach edges before it fails;
 * otherwise it has failed before they are submitted. */
static void check_dependency_failure(int workers, bool held)
{
	jobs_sched *s = jt_sched(workers);
	struct rec a = {.fail_code = 42, .fail_msg = "a failed"};
	struct rec ok = {0}, b = {0}, c = {0}, d = {0}, e = {0};
	jobs_id ida = submit_rec(s, &a, NULL, 0, held ? 1 : 0, 0);
	if (!held)
		wait_ok(s, ida, JOBS_FAILED);
	jobs_id idok = submit_rec(s, &ok, NULL, 0, 0, 0);
	jobs_id idb = submit_rec(s, &b, &ida, 1, 0, 0);
	jobs_id idc = submit_rec(s, &c, &idb, 1, 0, 0);
	jobs_id idd = submit_rec(s, &d, &ida, 1, 0, JOBS_RUN_AFTER_FAILED_DEPENDENCY);
	jobs_id two[2] = {idok, ida};
	jobs_id ide = submit_rec(s, &e, two, 2, 0, JOBS_RUN_AFTER_FAILED_DEPENDENCY);
	if (held)
		jt_assert_status(jobs_fence_resolve(s, ida), JOBS_OK, "resolve a");

	wait_ok(s, idc, JOBS_FAILED);
	wait_ok(s, idb, JOBS_FAILED);
	wait_ok(s, idd, JOBS_OK);
	wait_ok(s, ide, JOBS_OK);
	int code;
	char buf[128];
	jt_assert_status(jobs_receipt_result(s, idb, &code, buf, sizeof buf), JOBS_FAILED, "result b");
	ck_assert_msg(code == CODE_DEPENDENCY_FAILED, "workers=%d held=%d: b's code %d, expected %d",
		      workers, held, code, CODE_DEPENDENCY_FAILED);
	ck_assert_msg(names_id(buf, ida), "workers=%d held=%d: b's message '%s' does not name op %llu",
		      workers, held, buf, (unsigned long long)ida);
	jt_assert_status(jobs_receipt_result(s, idc, &code, buf, sizeof buf), JOBS_FAILED, "result c");
	ck_assert_msg(code == CODE_DEPENDENCY_FAILED, "c's code %d", code);
	ck_assert_msg(names_id(buf, idb), "c's message '%s' does not name its failed dependency %llu",
		      buf, (unsigned long long)idb);
	ck_assert_msg(atomic_load(&b.body) == 0 && atomic_load(&c.body) == 0,
		      "bodies of failed dependents ran (b %d, c %d)", atomic_load(&b.body),
		      atomic_load(&c.body));
	ck_assert_msg(atomic_load(&b.cleanup) == 1 && atomic_load(&b.cleanup_ran) == 0,
		      "b's cleanup: %d calls, %d with ran", atomic_load(&b.cleanup),
		      atomic_load(&b.cleanup_ran));
	ck_assert_msg(atomic_load(&c.cleanup) == 1 && atomic_load(&c.cleanup_ran) == 0,
		      "c's cleanup: %d calls, %d with ran", atomic_load(&c.cleanup),
		      atomic_load(&c.cleanup_ran));
	ck_assert_msg(atomic_load(&d.body) == 1 && d.seen_failed_dep == ida,
		      "d (run after failed dependency): body %d, failed dependency %llu, expected %llu",
		      atomic_load(&d.body), (unsigned long long)d.seen_failed_dep,
		      (unsigned long long)ida);
	ck_assert_msg(atomic_load(&e.body) == 1 && e.seen_failed_dep == ida,
		      "e: body %d, failed dependency %llu, expected %llu", atomic_load(&e.body),
		      (unsigned long long)e.seen_failed_dep, (unsigned long long)ida);
	ck_assert_msg(ok.seen_failed_dep == 0, "ok job saw failed dependency %llu",
		      (unsigned long long)ok.seen_failed_dep);
	jt_assert_status(jobs_receipt_result(s, idd, &code, buf, sizeof buf), JOBS_OK, "result d");
	ck_assert_msg(code == 0, "d's code %d", code);
	/* the failed dependency, as a number */
	jobs_id fd = 99;
	jt_assert_status(jobs_receipt_failed_dependency(s, idb, &fd), JOBS_OK, "failed_dependency b");
	ck_assert_msg(fd == ida, "b's failed dependency %llu, expected %llu", (unsigned long long)fd,
		      (unsigned long long)ida);
	jt_assert_status(jobs_receipt_failed_dependency(s, idc, &fd), JOBS_OK, "failed_dependency c");
	ck_assert_msg(fd == idb, "c's failed dependency %llu, expected %llu", (unsigned long long)fd,
		      (unsigned long long)idb);
	fd = 99;
	jt_assert_status(jobs_receipt_failed_dependency(s, ida, &fd), JOBS_OK, "failed_dependency a");
	ck_assert_msg(fd == 0, "a failed by itself, yet reports failed dependency %llu",
		      (unsigned long long)fd);
	fd = 99;
	jt_assert_status(jobs_receipt_failed_dependency(s, idok, &fd), JOBS_OK, "failed_dependency ok");
	ck_assert_msg(fd == 0, "ok job reports failed dependency %llu", (unsigned long long)fd);
	jobs_id all[] = {ida, idok, idb, idc, idd, ide};
	for (size_t i = 0; i < 6; i++)
		jt_assert_status(jobs_release(s, all[i]), JOBS_OK, "release");
	jt_assert_status(jobs_receipt_failed_dependency(s, idb, &fd), JOBS_INVALID,
			 "failed_dependency on a released id");
	jobs_sched_destroy(s);
}

START_TEST(test_dependency_failure_held)
{
	check_dependency_failure(worker_counts[_i], true);
}
END_TEST

START_TEST(test_dependency_failure_done)
{
	check_dependency_failure(worker_counts[_i], false);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Fences and bad `after`
 */
START_TEST(test_over_resolve)
{
	jobs_sched *s = jt_sched(worker_counts[_i]);
	struct rec r = {0}, z = {0};
	jobs_id id = submit_rec(s, &r, NULL, 0, 2, 0);
	jt_assert_status(jobs_fence_resolve(s, id), JOBS_OK, "resolve 1 of 2");
	jt_assert_status(jobs_poll(s, id), JOBS_PENDING, "poll after 1 of 2");
	jt_assert_status(jobs_fence_resolve(s, id), JOBS_OK, "resolve 2 of 2");
	jt_assert_status(jobs_fence_resolve(s, id), JOBS_INVALID, "resolve 3 of 2");
	wait_ok(s, id, JOBS_OK);
	jt_assert_status(jobs_fence_resolve(s, id), JOBS_INVALID, "resolve after completion");
	jobs_id idz = submit_rec(s, &z, NULL, 0, 0, 0);
	jt_assert_status(jobs_fence_resolve(s, idz), JOBS_INVALID, "resolve a job without fences");
	wait_ok(s, idz, JOBS_OK);
	ck_assert_int_eq(atomic_load(&r.body), 1);
	ck_assert_int_eq(atomic_load(&z.body), 1);
	jobs_sched_destroy(s);
}
END_TEST

START_TEST(test_after_invalid)
{
	jobs_sched *s = jt_sched(worker_counts[_i]);
	struct rec done = {0}, held = {0}, never = {0};
	jobs_id iddone = submit_rec(s, &done, NULL, 0, 0, 0);
	wait_ok(s, iddone, JOBS_OK);
	jt_assert_status(jobs_release(s, iddone), JOBS_OK, "release");
	jobs_id idheld = submit_rec(s, &held, NULL, 0, 1, 0);

	const jobs_id lists[][3] = {
		{iddone, 0, 0},               /* released */
		{idheld + 500, 0, 0},         /* never issued */
		{0, 0, 0},                    /* the invalid id */
		{idheld, iddone, 0},          /* valid then released */
		{idheld, idheld, UINT64_MAX}, /* valid, valid, unknown */
	};
	const size_t counts[] = {1, 1, 1, 2, 3};
	for (size_t i = 0; i < 5; i++) {
		jobs_job_desc d = {.fn = rec_body, .arg = &never, .cleanup = rec_cleanup,
				   .after = lists[i], .after_count = counts[i]};
		jobs_id out = 1234;
		char what[64];
		snprintf(what, sizeof what, "submit after bad list #%zu", i);
		jt_assert_status(jobs_submit(s, &d, &out), JOBS_INVALID, what);
		ck_assert_msg(out == 0, "%s: *out_id = %llu", what, (unsigned long long)out);
	}
	/* the valid dependency is unaffected by the rejected submissions */
	jt_assert_status(jobs_fence_resolve(s, idheld), JOBS_OK, "resolve held");
	wait_ok(s, idheld, JOBS_OK);
	jt_assert_status(jobs_release(s, idheld), JOBS_OK, "release held");
	jobs_sched_destroy(s);
	ck_assert_msg(atomic_load(&never.body) == 0 && atomic_load(&never.cleanup) == 0,
		      "rejected submissions: body ran %d times, cleanup %d times", atomic_load(&never.body),
		      atomic_load(&never.cleanup));
	ck_assert_int_eq(atomic_load(&held.body), 1);
	ck_assert_int_eq(atomic_load(&held.cleanup), 1);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Many external waiters
 */
struct waiter {
	jobs_sched *s;
	jobs_id id;
	bool polling; /* wait in short slices instead of forever */
	jobs_status got;
	_Atomic int *started;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	atomic_fetch_add(w->started, 1);
	if (w->polling) {
		uint64_t start = jt_now_ns();
		do
			w->got = jobs_wait(w->s, w->id, 500000);
		while (w->got == JOBS_PENDING && jt_now_ns() - start < JT_SAFETY_NS);
	} else {
		w->got = jobs_wait(w->s, w->id, JOBS_TIMEOUT_INFINITE);
	}
	return NULL;
}

START_TEST(test_many_waiters)
{
	int workers = worker_counts[_i];
	jobs_sched *s = jt_sched(workers);
	enum { T = 8 };
	_Atomic int started = 0;
	struct rec shared = {0}, own[T];
	memset(own, 0, sizeof own);
	struct waiter w[2 * T];
	pthread_t th[2 * T];
	jobs_id idshared = submit_rec(s, &shared, NULL, 0, 1, 0);
	jobs_id ids[T];
	for (int i = 0; i < T; i++)
		ids[i] = submit_rec(s, &own[i], NULL, 0, 1, 0);
	for (int i = 0; i < 2 * T; i++) {
		w[i] = (struct waiter){s, i < T ? idshared : ids[i - T], (i % 3) == 1, JOBS_INVALID,
				       &started};
		ck_assert(pthread_create(&th[i], NULL, waiter_main, &w[i]) == 0);
	}
	while (atomic_load(&started) < 2 * T)
		sched_yield();
	jt_sleep_us(2000); /* let them park (not required for correctness) */
	jt_assert_status(jobs_fence_resolve(s, idshared), JOBS_OK, "resolve shared");
	for (int i = T - 1; i >= 0; i--)
		jt_assert_status(jobs_fence_resolve(s, ids[i]), JOBS_OK, "resolve own");
	for (int i = 0; i < 2 * T; i++) {
		pthread_join(th[i], NULL);
		ck_assert_msg(w[i].got == JOBS_OK, "workers=%d: waiter %d got %s", workers, i,
			      jt_status_name(w[i].got));
	}
	ck_assert_int_eq(atomic_load(&shared.body), 1);
	for (int i = 0; i < T; i++)
		ck_assert_int_eq(atomic_load(&own[i].body), 1);
	jobs_sched_destroy(s);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Cleanup exactly once, over a mix of outcomes
 */
START_TEST(test_cleanup_once_mix)
{
	int workers = worker_counts[_i];
	jobs_sched *s = jt_sched(workers);
	int n = (int)jt_scaled(2000, 200);
	struct rec *r = calloc((size_t)n, sizeof *r);
	jobs_id *ids = calloc((size_t)n, sizeof *ids);
	bool *fails = calloc((size_t)n, sizeof *fails); /* expected FAILED */
	uint64_t rng = 77;
	for (int i = 0; i < n; i++) {
		int kind = (int)jt_below(&rng, 5);
		if (kind == 1) {
			r[i].fail_code = 9;
			r[i].fail_msg = "nine";
			fails[i] = true;
		}
		jobs_id dep[2];
		int depi[2];
		size_t nd = 0;
		uint32_t flags = 0;
		if (i > 0 && kind >= 2) {
			depi[nd] = (int)jt_below(&rng, (uint64_t)i);
			dep[nd] = ids[depi[nd]];
			nd++;
			if (kind == 4) {
				depi[nd] = (int)jt_below(&rng, (uint64_t)i);
				dep[nd] = ids[depi[nd]];
				nd++;
			}
			if (jt_below(&rng, 4) == 0)
				flags = JOBS_RUN_AFTER_FAILED_DEPENDENCY;
		}
		ids[i] = submit_rec(s, &r[i], dep, nd, 0, flags);
		if (!(flags & JOBS_RUN_AFTER_FAILED_DEPENDENCY))
			for (size_t k = 0; k < nd; k++)
				if (fails[depi[k]])
					fails[i] = true;
		if (i % 64 == 63)
			(void)jobs_wait(s, ids[i], JT_WAIT_NS); /* 0 workers: drain as we go */
	}
	for (int i = n - 1; i >= 0; i--) {
		jobs_status st = jobs_wait(s, ids[i], JT_WAIT_NS);
		ck_assert_msg(st == (fails[i] ? JOBS_FAILED : JOBS_OK), "job %d: %s, expected %s", i,
			      jt_status_name(st), fails[i] ? "FAILED" : "OK");
	}
	for (int i = 0; i < n; i++) {
		ck_assert_msg(atomic_load(&r[i].cleanup) == 1, "job %d: cleanup ran %d times", i,
			      atomic_load(&r[i].cleanup));
		ck_assert_msg(atomic_load(&r[i].cleanup_ran) == atomic_load(&r[i].body),
			      "job %d: body ran %d times, cleanup says ran %d", i, atomic_load(&r[i].body),
			      atomic_load(&r[i].cleanup_ran));
		ck_assert_msg(atomic_load(&r[i].body) <= 1, "job %d ran %d times", i,
			      atomic_load(&r[i].body));
		jt_assert_status(jobs_release(s, ids[i]), JOBS_OK, "release");
	}
	jobs_sched_destroy(s);
	free(r);
	free(ids);
	free(fails);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Never-issued ids looked at while submissions that allocate (and give back) those very slots
 * fail. Contract: any call on an unknown id returns JOBS_INVALID, and calls may be concurrent.
 */
struct prober {
	jobs_sched *s;
	_Atomic jobs_id guess; /* an id the submitter is about to allocate and abandon */
	_Atomic int stop;
	_Atomic uint64_t not_invalid;
	_Atomic uint64_t probes;
};

static void *prober_main(void *arg)
{
	struct prober *p = arg;
	while (!atomic_load_explicit(&p->stop, memory_order_acquire)) {
		jobs_id g = atomic_load_explicit(&p->guess, memory_order_relaxed);
		if (!g) {
			sched_yield();
			continue;
		}
		int code;
		char buf[8];
		uint64_t tag;
		jobs_status st = (atomic_load_explicit(&p->probes, memory_order_relaxed) & 1)
					 ? jobs_receipt_tag(p->s, g, &tag)
					 : jobs_receipt_result(p->s, g, &code, buf, sizeof buf);
		if (st != JOBS_INVALID)
			atomic_fetch_add(&p->not_invalid, 1);
		atomic_fetch_add_explicit(&p->probes, 1, memory_order_relaxed);
	}
	return NULL;
}

START_TEST(test_never_issued_ids_vs_failed_submissions)
{
	jobs_config cfg;
	jobs_config_default(&cfg);
	cfg.workers = 1;
	cfg.receipt_capacity = 64;
	jobs_sched *s = jt_sched_cfg(&cfg);
	struct prober p = {.s = s};
	pthread_t th;
	ck_assert(pthread_create(&th, NULL, prober_main, &p) == 0);
	enum { DEPS = 200 };
	jobs_id *after = calloc(DEPS + 1, sizeof *after);
	int rounds = (int)jt_scaled(3000, 300);
	struct rec r = {0};
	int rejected = 0;
	for (int i = 0; i < rounds; i++) {
		jobs_id y = submit_rec(s, &r, NULL, 0, 1, 0);
		/* the next submission allocates y + 1 (only y is live), pins DEPS valid dependencies,
		 * then fails on an unknown one and gives the slot back */
		atomic_store_explicit(&p.guess, y + 1, memory_order_relaxed);
		for (int k = 0; k < DEPS; k++)
			after[k] = y;
		after[DEPS] = UINT64_MAX;
		jobs_job_desc d = {.fn = rec_body, .arg = &r, .after = after, .after_count = DEPS + 1};
		jobs_id out;
		if (jobs_submit(s, &d, &out) == JOBS_INVALID)
			rejected++;
		jt_assert_status(jobs_fence_resolve(s, y), JOBS_OK, "resolve");
		wait_ok(s, y, JOBS_OK);
		jt_assert_status(jobs_release(s, y), JOBS_OK, "release");
	}
	atomic_store_explicit(&p.stop, 1, memory_order_release);
	pthread_join(th, NULL);
	free(after);
	ck_assert_msg(rejected == rounds, "%d of %d bad submissions rejected", rejected, rounds);
	/* every one of the 64 slots must be usable again */
	jobs_id held[64];
	struct rec h[64];
	memset(h, 0, sizeof h);
	int accepted = 0;
	for (int i = 0; i < 64; i++) {
		jobs_job_desc d = {.fn = rec_body, .arg = &h[i], .fences = 1};
		jobs_status st = jobs_submit(s, &d, &held[i]);
		if (st != JOBS_OK)
			break;
		accepted++;
	}
	jobs_stats stats;
	jobs_sched_stats(s, &stats);
	for (int i = 0; i < accepted; i++)
		(void)jobs_fence_resolve(s, held[i]);
	for (int i = 0; i < accepted; i++)
		(void)jobs_wait(s, held[i], JT_WAIT_NS);
	ck_assert_msg(accepted == 64,
		      "receipt table of 64 slots, all released: only %d held submissions accepted "
		      "(receipts_live %llu) — slots were lost",
		      accepted, (unsigned long long)stats.receipts_live);
	ck_assert_msg(atomic_load(&p.not_invalid) == 0,
		      "%llu of %llu calls on never-issued ids did not return JOBS_INVALID",
		      (unsigned long long)atomic_load(&p.not_invalid),
		      (unsigned long long)atomic_load(&p.probes));
	jobs_sched_destroy(s);
}
END_TEST

static Suite *receipts_suite(void)
{
	Suite *su = suite_create("jobs_receipts");
	TCase *tc = tcase_create("ids");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_ids_monotonic, 0, 3);
	tcase_add_test(tc, test_ids_unique_concurrent);
	suite_add_tcase(su, tc);

	tc = tcase_create("poll_wait_release");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_poll_wait_fenced, 0, 3);
	tcase_add_loop_test(tc, test_release_before_run, 0, 3);
	tcase_add_loop_test(tc, test_invalid_ids, 0, 3);
	suite_add_tcase(su, tc);

	tc = tcase_create("results");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_job_fail_result, 0, 3);
	tcase_add_test(tc, test_job_fail_first_wins);
	tcase_add_loop_test(tc, test_receipt_tag, 0, 3);
	tcase_add_loop_test(tc, test_wait_release_tagged, 0, 3);
	tcase_add_loop_test(tc, test_submit_done, 0, 3);
	tcase_add_loop_test(tc, test_dependency_failure_held, 0, 3);
	tcase_add_loop_test(tc, test_dependency_failure_done, 0, 3);
	suite_add_tcase(su, tc);

	tc = tcase_create("fences");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_over_resolve, 0, 3);
	tcase_add_loop_test(tc, test_after_invalid, 0, 3);
	suite_add_tcase(su, tc);

	tc = tcase_create("concurrency");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_many_waiters, 0, 3);
	tcase_add_loop_test(tc, test_cleanup_once_mix, 0, 3);
	tcase_add_test(tc, test_never_issued_ids_vs_failed_submissions);
	suite_add_tcase(su, tc);
	return su;
}

JT_MAIN(receipts_suite)
