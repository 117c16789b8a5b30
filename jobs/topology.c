/* topology.c — hwloc placement and nearest-first steal order. */
#include "topology.h"

#include <hwloc.h>
#include <stdlib.h>

static hwloc_obj_t core_of(const jobs_topology *t, int index)
{
	hwloc_topology_t topo = t->topo;
	hwloc_obj_type_t type =
		hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
	return hwloc_get_obj_by_type(topo, type, (unsigned)(index % t->n_cores));
}

bool jobs_topology_init(jobs_topology *t, const char *synthetic, const char **err)
{
	hwloc_topology_t topo;
	t->topo = NULL;
	t->synthetic = synthetic != NULL;
	if (hwloc_topology_init(&topo) != 0) {
		*err = "hwloc_topology_init failed";
		return false;
	}
	if (synthetic && hwloc_topology_set_synthetic(topo, synthetic) != 0) {
		hwloc_topology_destroy(topo);
		*err = "invalid synthetic hwloc topology description";
		return false;
	}
	if (hwloc_topology_load(topo) != 0) {
		hwloc_topology_destroy(topo);
		*err = "hwloc_topology_load failed";
		return false;
	}
	int cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
	if (cores <= 0)
		cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
	t->topo = topo;
	t->n_cores = cores > 0 ? cores : 1;
	return true;
}

void jobs_topology_fini(jobs_topology *t)
{
	if (t->topo)
		hwloc_topology_destroy((hwloc_topology_t)t->topo);
	t->topo = NULL;
}

int jobs_topology_distance(const jobs_topology *t, int a, int b)
{
	hwloc_obj_t ca = core_of(t, a), cb = core_of(t, b);
	if (!ca || !cb)
		return 0;
	if (ca == cb)
		return 0; /* same core (more workers than cores) */
	hwloc_obj_t common = hwloc_get_common_ancestor_obj((hwloc_topology_t)t->topo, ca, cb);
	int maxdepth = hwloc_topology_get_depth((hwloc_topology_t)t->topo);
	return common ? maxdepth - (int)common->depth : maxdepth;
}

void jobs_topology_steal_order(const jobs_topology *t, int self, int n, int *order)
{
	int k = 0;
	for (int i = 0; i < n; i++)
		if (i != self)
			order[k++] = i;
	/* Insertion sort (n is the worker count): by distance, ties rotated so that equidistant
	 * thieves start at different victims. */
	for (int i = 1; i < k; i++) {
		int v = order[i], j = i;
		while (j > 0) {
			int a = order[j - 1];
			int da = jobs_topology_distance(t, self, a), dv = jobs_topology_distance(t, self, v);
			int ra = (a - self + n) % n, rv = (v - self + n) % n;
			if (da < dv || (da == dv && ra < rv))
				break;
			order[j] = a;
			j--;
		}
		order[j] = v;
	}
}

bool jobs_topology_pin(const jobs_topology *t, int index)
{
	if (t->synthetic || !t->topo)
		return false;
	hwloc_obj_t core = core_of(t, index);
	if (!core || !core->cpuset)
		return false;
	hwloc_bitmap_t set = hwloc_bitmap_dup(core->cpuset);
	hwloc_bitmap_singlify(set); /* one PU of the core: no migration between hyperthreads */
	int rc = hwloc_set_cpubind((hwloc_topology_t)t->topo, set, HWLOC_CPUBIND_THREAD);
	hwloc_bitmap_free(set);
	return rc == 0;
}
