/*
 * check_topology.c — hwloc placement (topology.h): steal order nearest-first on synthetic
 * topologies, distance symmetric and zero on the diagonal, schedulers on a synthetic topology and
 * with pinning on the real machine run fork-join work correctly.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "jobs.h"
#include "jobs_forkjoin.h"
#include "jobs_test_fib.h"
#include "jobs_test_util.h"
#include "topology.h"

static void load(jobs_topology *t, const char *synthetic)
{
	const char *err = NULL;
	ck_assert_msg(jobs_topology_init(t, synthetic, &err), "jobs_topology_init(%s) failed: %s",
		      synthetic ? synthetic : "machine", err ? err : "?");
}

/* order must be a permutation of the workers other than self, with non-decreasing distance. */
static void check_order_shape(const jobs_topology *t, int self, int n, const int *order)
{
	bool *seen = calloc((size_t)n, sizeof *seen);
	for (int k = 0; k < n - 1; k++) {
		int v = order[k];
		ck_assert_msg(v >= 0 && v < n && v != self && !seen[v],
			      "steal order of %d (n=%d): entry %d is %d (self, out of range or repeated)",
			      self, n, k, v);
		seen[v] = true;
		if (k > 0) {
			int dp = jobs_topology_distance(t, self, order[k - 1]);
			int dv = jobs_topology_distance(t, self, v);
			ck_assert_msg(dp <= dv,
				      "steal order of %d: %d (distance %d) listed before %d (distance %d)",
				      self, order[k - 1], dp, v, dv);
		}
	}
	free(seen);
}

static void check_distance_axioms(const jobs_topology *t, int n)
{
	for (int a = 0; a < n; a++) {
		ck_assert_msg(jobs_topology_distance(t, a, a) == 0, "distance(%d, %d) = %d, expected 0", a,
			      a, jobs_topology_distance(t, a, a));
		for (int b = 0; b < n; b++) {
			int ab = jobs_topology_distance(t, a, b), ba = jobs_topology_distance(t, b, a);
			ck_assert_msg(ab == ba, "distance(%d, %d) = %d but distance(%d, %d) = %d", a, b, ab,
				      b, a, ba);
			ck_assert_msg(ab >= 0, "distance(%d, %d) = %d < 0", a, b, ab);
		}
	}
}

START_TEST(test_two_packages)
{
	jobs_topology t;
	load(&t, "package:2 core:2 pu:1");
	ck_assert_msg(t.n_cores == 4, "n_cores %d, expected 4", t.n_cores);
	ck_assert(t.synthetic);
	check_distance_axioms(&t, 4);
	/* same package nearer than the other package */
	ck_assert_msg(jobs_topology_distance(&t, 0, 1) < jobs_topology_distance(&t, 0, 2),
		      "distance(0,1) = %d not below distance(0,2) = %d", jobs_topology_distance(&t, 0, 1),
		      jobs_topology_distance(&t, 0, 2));
	ck_assert_int_eq(jobs_topology_distance(&t, 0, 2), jobs_topology_distance(&t, 0, 3));
	ck_assert_int_eq(jobs_topology_distance(&t, 0, 1), jobs_topology_distance(&t, 2, 3));
	static const int partner[4] = {1, 0, 3, 2};
	for (int self = 0; self < 4; self++) {
		int order[3];
		jobs_topology_steal_order(&t, self, 4, order);
		check_order_shape(&t, self, 4, order);
		ck_assert_msg(order[0] == partner[self],
			      "worker %d steals first from %d, expected %d (same package); order %d %d %d",
			      self, order[0], partner[self], order[0], order[1], order[2]);
	}
	int order0[3];
	jobs_topology_steal_order(&t, 0, 4, order0);
	ck_assert_msg(order0[0] == 1 && ((order0[1] == 2 && order0[2] == 3) || (order0[1] == 3 && order0[2] == 2)),
		      "worker 0 order %d %d %d, expected 1 then {2, 3}", order0[0], order0[1], order0[2]);
	/* binding on a synthetic topology is refused harmlessly */
	ck_assert_msg(!jobs_topology_pin(&t, 0), "pin on a synthetic topology reported success");
	jobs_topology_fini(&t);
}
END_TEST

START_TEST(test_flat)
{
	jobs_topology t;
	load(&t, "core:4 pu:1");
	ck_assert_msg(t.n_cores == 4, "n_cores %d, expected 4", t.n_cores);
	check_distance_axioms(&t, 4);
	for (int a = 0; a < 4; a++)
		for (int b = 0; b < 4; b++)
			if (a != b)
				ck_assert_msg(jobs_topology_distance(&t, a, b) == jobs_topology_distance(&t, 0, 1),
					      "flat: distance(%d,%d) = %d differs from distance(0,1) = %d", a, b,
					      jobs_topology_distance(&t, a, b), jobs_topology_distance(&t, 0, 1));
	/* equidistant: ties rotate, so thieves start at different victims */
	int first[4];
	for (int self = 0; self < 4; self++) {
		int order[3];
		jobs_topology_steal_order(&t, self, 4, order);
		check_order_shape(&t, self, 4, order);
		first[self] = order[0];
	}
	for (int a = 0; a < 4; a++)
		for (int b = a + 1; b < 4; b++)
			ck_assert_msg(first[a] != first[b], "workers %d and %d both steal first from %d", a,
				      b, first[a]);
	jobs_topology_fini(&t);
}
END_TEST

START_TEST(test_more_workers_than_cores)
{
	jobs_topology t;
	load(&t, "package:2 core:2 pu:1");
	int n = 8; /* workers 4..7 share cores 0..3 */
	check_distance_axioms(&t, n);
	ck_assert_msg(jobs_topology_distance(&t, 0, 4) == 0, "workers 0 and 4 share a core: distance %d",
		      jobs_topology_distance(&t, 0, 4));
	for (int self = 0; self < n; self++) {
		int order[7];
		jobs_topology_steal_order(&t, self, n, order);
		check_order_shape(&t, self, n, order);
	}
	int order[7];
	jobs_topology_steal_order(&t, 0, n, order);
	ck_assert_msg(order[0] == 4, "worker 0 steals first from %d, expected 4 (same core)", order[0]);
	jobs_topology_fini(&t);
}
END_TEST

START_TEST(test_machine)
{
	jobs_topology t;
	load(&t, NULL);
	ck_assert_msg(t.n_cores >= 1, "n_cores %d", t.n_cores);
	ck_assert(!t.synthetic);
	int n = t.n_cores < 8 ? t.n_cores + 1 : 8;
	check_distance_axioms(&t, n);
	for (int self = 0; self < n; self++) {
		int order[8];
		jobs_topology_steal_order(&t, self, n, order);
		check_order_shape(&t, self, n, order);
	}
	jobs_topology_fini(&t);
}
END_TEST

START_TEST(test_invalid_synthetic)
{
	jobs_topology t;
	const char *err = NULL;
	ck_assert_msg(!jobs_topology_init(&t, "bogus:xyz", &err), "bogus synthetic topology accepted");
	ck_assert_msg(err && *err, "no error message");
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Schedulers
 */
static void run_fibs(jobs_sched *s, const char *what)
{
	int n = jt_tsan() ? 18 : 24;
	for (int rep = 0; rep < 4; rep++) {
		struct fib f = {n - rep, -1};
		jobs_job_desc d = {.fn = fib_job, .arg = &f};
		jobs_id id;
		jt_assert_status(jobs_submit(s, &d, &id), JOBS_OK, "submit fib");
		jt_assert_status(jobs_wait(s, id, JT_WAIT_NS), JOBS_OK, "wait fib");
		jt_assert_status(jobs_release(s, id), JOBS_OK, "release fib");
		ck_assert_msg(f.r == fib_serial(f.n), "%s: fib(%d) = %ld, expected %ld", what, f.n, f.r,
			      fib_serial(f.n));
	}
}

START_TEST(test_sched_synthetic)
{
	jobs_config cfg;
	jobs_config_default(&cfg);
	cfg.workers = 4;
	cfg.topology = "package:2 core:2 pu:1";
	cfg.pin = true; /* refused harmlessly on a synthetic topology */
	jobs_sched *s = jt_sched_cfg(&cfg);
	ck_assert_int_eq(jobs_sched_workers(s), 4);
	run_fibs(s, "synthetic package:2 core:2, 4 workers");
	jobs_sched_destroy(s);
}
END_TEST

START_TEST(test_sched_pinned_machine)
{
	jobs_config cfg;
	jobs_config_default(&cfg);
	cfg.workers = -1;
	cfg.pin = true;
	jobs_sched *s = jt_sched_cfg(&cfg);
	ck_assert_msg(jobs_sched_workers(s) >= 1, "%d workers", jobs_sched_workers(s));
	run_fibs(s, "pinned, one worker per core");
	jobs_sched_destroy(s);

	cfg.workers = 3; /* more workers than some machines have cores: pinned modulo */
	s = jt_sched_cfg(&cfg);
	run_fibs(s, "pinned, 3 workers");
	jobs_sched_destroy(s);
}
END_TEST

static Suite *topology_suite(void)
{
	Suite *su = suite_create("jobs_topology");
	TCase *tc = tcase_create("order");
	tcase_add_test(tc, test_two_packages);
	tcase_add_test(tc, test_flat);
	tcase_add_test(tc, test_more_workers_than_cores);
	tcase_add_test(tc, test_machine);
	tcase_add_test(tc, test_invalid_synthetic);
	suite_add_tcase(su, tc);
	tc = tcase_create("sched");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_sched_synthetic);
	tcase_add_test(tc, test_sched_pinned_machine);
	suite_add_tcase(su, tc);
	return su;
}

JT_MAIN(topology_suite)
