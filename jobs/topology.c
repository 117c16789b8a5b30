/* topology.c — hwloc placement and nearest-first steal order. */
#include "topology.h"

#include <hwloc.h>
#include <stdlib.h>
#include <string.h>

static hwloc_obj_type_t core_type(hwloc_topology_t topo)
{
	return hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
}

static hwloc_obj_t core_of(const jobs_topology *t, int index)
{
	hwloc_topology_t topo = t->topo;
	int k = index % t->n_cores;
	return hwloc_get_obj_by_type(topo, core_type(topo), (unsigned)(t->order ? t->order[k] : k));
}

/* Adds to `set` the cpuset of the nearest non-I/O ancestor of each device in the comma-separated
 * list `pci` that the topology knows. */
static void near_devices(hwloc_topology_t topo, const char *pci, hwloc_bitmap_t set)
{
	while (*pci) {
		size_t n = strcspn(pci, ",");
		char id[32];
		size_t skip = strspn(pci, " ");
		if (n > skip && n - skip < sizeof id) {
			memcpy(id, pci + skip, n - skip);
			id[n - skip] = 0;
			hwloc_obj_t dev = hwloc_get_pcidev_by_busidstring(topo, id);
			hwloc_obj_t anc = dev ? hwloc_get_non_io_ancestor_obj(topo, dev) : NULL;
			if (anc && anc->cpuset)
				hwloc_bitmap_or(set, set, anc->cpuset);
		}
		pci += n + (pci[n] == ',');
	}
}

/* t->order: the cores that intersect `near` first, each group in core order. */
static bool place(jobs_topology *t, hwloc_bitmap_t near)
{
	hwloc_topology_t topo = t->topo;
	t->order = malloc((size_t)t->n_cores * sizeof *t->order);
	if (!t->order)
		return false;
	int k = 0;
	for (int pass = 0; pass < 2; pass++) {
		for (int c = 0; c < t->n_cores; c++) {
			hwloc_obj_t o = hwloc_get_obj_by_type(topo, core_type(topo), (unsigned)c);
			bool is_near = near && o && o->cpuset && hwloc_bitmap_intersects(o->cpuset, near);
			if (is_near == (pass == 0))
				t->order[k++] = c;
		}
		if (pass == 0)
			t->near_cores = k; /* the first pass placed exactly the near cores */
	}
	return true;
}

bool jobs_topology_init(jobs_topology *t, const char *desc, const char *near_pci, const char **err)
{
	hwloc_topology_t topo;
	*t = (jobs_topology){ 0 };
	t->synthetic = desc != NULL;
	if (hwloc_topology_init(&topo) != 0) {
		*err = "hwloc_topology_init failed";
		return false;
	}
	bool xml = desc && desc[0] == '<';
	if (desc && (xml ? hwloc_topology_set_xmlbuffer(topo, desc, (int)strlen(desc) + 1)
			 : hwloc_topology_set_synthetic(topo, desc)) != 0) {
		hwloc_topology_destroy(topo);
		*err = xml ? "invalid hwloc XML topology" : "invalid synthetic hwloc topology description";
		return false;
	}
	bool devices = near_pci && *near_pci;
	/* I/O discovery only when asked: it reads the PCI tree (sysfs), which costs milliseconds. */
	if (devices)
		(void)hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
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
	hwloc_bitmap_t near = devices ? hwloc_bitmap_alloc() : NULL;
	if (near)
		near_devices(topo, near_pci, near);
	if (near && hwloc_bitmap_iszero(near)) {
		hwloc_bitmap_free(near);
		near = NULL;
	}
	if (!place(t, near)) {
		hwloc_bitmap_free(near);
		jobs_topology_fini(t);
		*err = "out of memory (worker placement)";
		return false;
	}
	t->near_set = near;
	return true;
}

void jobs_topology_fini(jobs_topology *t)
{
	if (t->topo)
		hwloc_topology_destroy((hwloc_topology_t)t->topo);
	if (t->near_set)
		hwloc_bitmap_free((hwloc_bitmap_t)t->near_set);
	free(t->order);
	t->topo = NULL;
	t->near_set = NULL;
	t->order = NULL;
	t->near_cores = 0;
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

bool jobs_topology_is_near(const jobs_topology *t, int index)
{
	return index >= 0 && index < t->near_cores;
}

bool jobs_topology_bind_near(const jobs_topology *t)
{
	if (t->synthetic || !t->topo || !t->near_set)
		return false;
	return hwloc_set_cpubind((hwloc_topology_t)t->topo, (hwloc_const_bitmap_t)t->near_set, HWLOC_CPUBIND_THREAD) == 0;
}

int jobs_topology_pu(const jobs_topology *t, int index)
{
	hwloc_obj_t core = t->topo ? core_of(t, index) : NULL;
	return core && core->cpuset ? hwloc_bitmap_first(core->cpuset) : -1;
}

int jobs_topology_count_near(const jobs_topology *t, int n_workers, const char *pci)
{
	if (!t->topo || !t->near_set || !pci)
		return 0; /* no I/O discovery was done (no device was given at creation) */
	hwloc_bitmap_t set = hwloc_bitmap_alloc();
	if (!set)
		return 0;
	near_devices((hwloc_topology_t)t->topo, pci, set);
	int n = 0;
	for (int i = 0; i < n_workers && !hwloc_bitmap_iszero(set); i++) {
		hwloc_obj_t core = core_of(t, i);
		n += core && core->cpuset && hwloc_bitmap_intersects(core->cpuset, set);
	}
	hwloc_bitmap_free(set);
	return n;
}
