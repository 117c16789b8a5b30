/*
 * check_topology.c — hwloc placement (topology.h): steal order nearest-first on synthetic
 * topologies, distance symmetric and zero on the diagonal, schedulers on a synthetic topology and
 * with pinning on the real machine run fork-join work correctly; workers placed near a PCI device
 * (an XML topology with a GPU under the second package, and a device of the real machine).
 */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
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
	ck_assert_msg(jobs_topology_init(t, synthetic, NULL, &err), "jobs_topology_init(%s) failed: %s",
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
	ck_assert_msg(!jobs_topology_init(&t, "bogus:xyz", NULL, &err), "bogus synthetic topology accepted");
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

/* ---------------------------------------------------------------------------------------------
 * Placement near devices
 */

/* Two packages of two cores; a GPU (0000:3b:00.0) below the second package. */
#define XML_OBJ(type, idx, set, node)                                                              \
	"<object type=\"" type "\" os_index=\"" #idx "\" cpuset=\"" set "\" complete_cpuset=\"" set \
	"\" nodeset=\"" node "\" complete_nodeset=\"" node "\""
#define XML_CORE(idx, set, node) XML_OBJ("Core", idx, set, node) ">" XML_OBJ("PU", idx, set, node) "/></object>"
static const char gpu_on_package_1[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
	"<topology version=\"2.0\">"
	XML_OBJ("Machine", 0, "0x0000000f", "0x00000003") " allowed_cpuset=\"0x0000000f\" allowed_nodeset=\"0x00000003\">"
	XML_OBJ("Package", 0, "0x00000003", "0x00000001") ">"
	XML_OBJ("NUMANode", 0, "0x00000003", "0x00000001") " local_memory=\"1073741824\"/>"
	XML_CORE(0, "0x00000001", "0x00000001") XML_CORE(1, "0x00000002", "0x00000001")
	"</object>"
	XML_OBJ("Package", 1, "0x0000000c", "0x00000002") ">"
	XML_OBJ("NUMANode", 1, "0x0000000c", "0x00000002") " local_memory=\"1073741824\"/>"
	XML_CORE(2, "0x00000004", "0x00000002") XML_CORE(3, "0x00000008", "0x00000002")
	"<object type=\"Bridge\" bridge_type=\"0-1\" depth=\"0\" bridge_pci=\"0000:[3b-3b]\">"
	"<object type=\"PCIDev\" pci_busid=\"0000:3b:00.0\" pci_type=\"0302 [10de:2335] [10de:18be] a1\"/>"
	"</object></object></object></topology>";

static void load_near(jobs_topology *t, const char *desc, const char *near)
{
	const char *err = NULL;
	ck_assert_msg(jobs_topology_init(t, desc, near, &err), "jobs_topology_init(near %s) failed: %s",
		      near ? near : "NULL", err ? err : "?");
}

/* Workers 0..n-1 sit on the PUs `pus` (in that order); exactly `near` of them are near. */
static void expect_placement(const jobs_topology *t, const char *what, int near, const int *pus, int n)
{
	ck_assert_msg(t->near_cores == near, "%s: %d near cores, expected %d", what, t->near_cores, near);
	for (int i = 0; i < n; i++) {
		ck_assert_msg(jobs_topology_pu(t, i) == pus[i], "%s: worker %d on PU %d, expected %d", what, i,
			      jobs_topology_pu(t, i), pus[i]);
		ck_assert_msg(jobs_topology_is_near(t, i) == (i < near), "%s: worker %d near = %d", what, i,
			      jobs_topology_is_near(t, i));
	}
}

START_TEST(test_near_xml)
{
	static const int natural[4] = { 0, 1, 2, 3 }, gpu_first[4] = { 2, 3, 0, 1 };
	jobs_topology t;
	load_near(&t, gpu_on_package_1, NULL);
	expect_placement(&t, "no device", 0, natural, 4);
	ck_assert_int_eq(jobs_topology_count_near(&t, 4, "0000:3b:00.0"), 0); /* no PCI tree loaded */
	jobs_topology_fini(&t);
	load_near(&t, gpu_on_package_1, "0000:3b:00.0");
	expect_placement(&t, "the GPU", 2, gpu_first, 4);
	ck_assert_msg(!jobs_topology_bind_near(&t), "an XML topology must never bind");
	ck_assert_int_eq(jobs_topology_count_near(&t, 4, "0000:3b:00.0"), 2);
	ck_assert_int_eq(jobs_topology_count_near(&t, 1, "0000:3b:00.0"), 1);
	ck_assert_int_eq(jobs_topology_count_near(&t, 4, "0000:99:00.0"), 0);
	int order[3];
	jobs_topology_steal_order(&t, 0, 4, order);
	ck_assert_msg(order[0] == 1, "worker 0 (core 2) steals first from %d, expected 1 (core 3)", order[0]);
	check_order_shape(&t, 0, 4, order);
	jobs_topology_fini(&t);
	/* upper-case hex as cudaDeviceGetPCIBusId writes it; unknown IDs, blanks and empty items add nothing */
	load_near(&t, gpu_on_package_1, "0000:99:00.0, 0000:3B:00.0,,");
	expect_placement(&t, "a list", 2, gpu_first, 4);
	jobs_topology_fini(&t);
	static const char *const none[] = { "0000:99:00.0", "", "garbage", ",", "0000:3b:00.0000000000000000000000000" };
	for (size_t i = 0; i < sizeof none / sizeof *none; i++) {
		load_near(&t, gpu_on_package_1, none[i]);
		expect_placement(&t, none[i], 0, natural, 4);
		jobs_topology_fini(&t);
	}
}
END_TEST

START_TEST(test_sched_near_xml)
{
	jobs_config cfg;
	jobs_config_default(&cfg);
	cfg.topology = gpu_on_package_1;
	cfg.near_pci = "0000:3b:00.0";
	for (int w = 1; w <= 5; w += 2) {
		cfg.workers = w;
		jobs_sched *s = jt_sched_cfg(&cfg);
		int expect = w < 2 ? w : 2;
		ck_assert_msg(jobs_sched_near_workers(s) == expect, "%d workers: %d near, expected %d", w,
			      jobs_sched_near_workers(s), expect);
		ck_assert_int_eq(jobs_sched_near_workers_of(s, "0000:3B:00.0"), expect);
		run_fibs(s, "XML topology, workers near the GPU");
		jobs_sched_destroy(s);
	}
	cfg.near_pci = NULL;
	cfg.workers = 4;
	jobs_sched *s = jt_sched_cfg(&cfg);
	ck_assert_int_eq(jobs_sched_near_workers(s), 0);
	jobs_sched_destroy(s);
}
END_TEST

/* The CPUs sysfs lists as local to PCI device `id` contain PU `pu`. */
static bool sysfs_local(const char *id, int pu)
{
	char path[300], list[512];
	snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/local_cpulist", id);
	FILE *f = fopen(path, "r");
	if (!f)
		return true; /* nothing to compare with */
	bool ok = fgets(list, sizeof list, f) != NULL, in = false;
	fclose(f);
	for (char *p = list; ok && *p && *p != '\n';) {
		int lo = (int)strtol(p, &p, 10), hi = lo;
		if (*p == '-')
			hi = (int)strtol(p + 1, &p, 10);
		in |= pu >= lo && pu <= hi;
		if (*p == ',')
			p++;
		else
			break;
	}
	return !ok || in;
}

/* A real PCI device of this machine that hwloc keeps (a disk, a NIC, a GPU): its near workers are
 * on CPUs sysfs calls local to it, and a scheduler placed near it (unpinned: bound to those CPUs)
 * runs work correctly. Machines without one (or without sysfs) test nothing here, and say so. */
START_TEST(test_near_machine)
{
	DIR *d = opendir("/sys/bus/pci/devices");
	struct dirent *e;
	char id[64] = "";
	jobs_topology t = { 0 };
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof id)
			continue;
		load_near(&t, NULL, e->d_name);
		if (t.near_cores > 0) {
			snprintf(id, sizeof id, "%s", e->d_name);
			break;
		}
		jobs_topology_fini(&t);
	}
	if (d)
		closedir(d);
	if (!*id) {
		fprintf(stderr, "test_near_machine: no PCI device hwloc keeps here; nothing to place near\n");
		return;
	}
	for (int i = 0; i < t.near_cores; i++)
		ck_assert_msg(sysfs_local(id, jobs_topology_pu(&t, i)), "near worker %d on PU %d, not local to %s", i,
			      jobs_topology_pu(&t, i), id);
	jobs_topology_fini(&t);
	jobs_config cfg;
	jobs_config_default(&cfg);
	cfg.workers = 3;
	cfg.near_pci = id;
	jobs_sched *s = jt_sched_cfg(&cfg);
	ck_assert_msg(jobs_sched_near_workers(s) >= 1, "no worker near %s", id);
	run_fibs(s, "workers near a PCI device of this machine");
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
	tcase_add_test(tc, test_near_xml);
	suite_add_tcase(su, tc);
	tc = tcase_create("sched");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_sched_synthetic);
	tcase_add_test(tc, test_sched_pinned_machine);
	tcase_add_test(tc, test_sched_near_xml);
	tcase_add_test(tc, test_near_machine);
	suite_add_tcase(su, tc);
	return su;
}

JT_MAIN(topology_suite)
