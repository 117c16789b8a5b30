/*
 * topology.h — where workers run and whom they steal from first, from the hwloc topology.
 *
 * Worker i is placed on core order[i] (modulo the core count). Without devices to serve, order is
 * the cores' own order. Given the PCI bus IDs of devices the workers serve (GPUs), the cores near
 * them come first: those in the cpuset of each device's nearest non-I/O ancestor (its package or
 * NUMA node, as hwloc's I/O discovery reports it), in core order, then the others. Worker 0 — the
 * preferred one to wake (docs/jobs.md, "Sleeping and waking") — is then a near one. A bus ID hwloc
 * does not know adds nothing; none known means no preference (near_cores 0).
 * The steal order lists the other workers sorted by the depth of the deepest topology object their
 * cores share (same L2 before same L3 before same package before the machine), ties broken by
 * rotation so that thieves spread out.
 * Works on flat, synthetic and XML topologies too (tests use "package:2 core:2 pu:1", or an hwloc
 * XML document with a PCI device under one package).
 * Not thread-safe: called once at scheduler creation, and by each worker to bind itself.
 */
#ifndef OVSTAGE_JOBS_TOPOLOGY_H
#define OVSTAGE_JOBS_TOPOLOGY_H

#include <stdbool.h>

typedef struct jobs_topology {
	void *topo;      /* hwloc_topology_t (kept opaque so that only topology.c includes hwloc) */
	int n_cores;     /* cores (or PUs, if the topology has no core level) */
	bool synthetic;  /* a synthetic or XML topology: describes no real machine, never bind */
	int *order;      /* order[i]: the core of worker i (mod n_cores); near cores first */
	int near_cores;  /* how many cores are near the devices (a prefix of order; 0: no device known) */
	void *near_set;  /* hwloc_bitmap_t: the PUs of those cores (NULL when near_cores is 0) */
} jobs_topology;

/* Loads the machine's topology, or a described one: `desc` is an hwloc synthetic description, an
 * hwloc XML document (it starts with '<'), or NULL for the machine. `near_pci` (NULL or "": none) is
 * a comma-separated list of PCI bus IDs ("0000:3b:00.0") of the devices the workers serve. */
bool jobs_topology_init(jobs_topology *t, const char *desc, const char *near_pci, const char **err);
void jobs_topology_fini(jobs_topology *t);

/* Fills order[0..n-2] with the workers other than `self`, nearest first. */
void jobs_topology_steal_order(const jobs_topology *t, int self, int n, int *order);

/* Binds the calling thread to the core of worker `index`. Returns false (harmlessly) if the
 * topology is synthetic or binding is not permitted. */
bool jobs_topology_pin(const jobs_topology *t, int index);

/* Whether worker `index` is placed on a core near the devices (index < near_cores). */
bool jobs_topology_is_near(const jobs_topology *t, int index);

/* Binds the calling thread to the cores near the devices (all of them, letting the OS balance
 * among them): what an unpinned near worker does. False (harmlessly) when no device is known, the
 * topology is described, or binding is not permitted. */
bool jobs_topology_bind_near(const jobs_topology *t);

/* How many of workers 0..n_workers-1 sit on cores near the devices in `pci` (the same list syntax);
 * 0 unless devices were given at init (only then does the topology hold the PCI tree). */
int jobs_topology_count_near(const jobs_topology *t, int n_workers, const char *pci);

/* The hwloc os_index of the first PU of worker `index`'s core (for tests and reports). */
int jobs_topology_pu(const jobs_topology *t, int index);

/* Distance rank between the cores of workers a and b: lower is nearer (for tests). */
int jobs_topology_distance(const jobs_topology *t, int a, int b);

#endif /* OVSTAGE_JOBS_TOPOLOGY_H */
