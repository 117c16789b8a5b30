/*
 * topology.h — where workers run and whom they steal from first, from the hwloc topology.
 *
 * Worker i is placed on core i (modulo the core count); its steal order lists the other workers
 * sorted by the depth of the deepest topology object their cores share (same L2 before same L3
 * before same package before the machine), ties broken by rotation so that thieves spread out.
 * Works on flat and synthetic topologies too (tests use "package:2 core:2 pu:1").
 * Not thread-safe: called once at scheduler creation, and by each worker to pin itself.
 */
#ifndef OVSTAGE_JOBS_TOPOLOGY_H
#define OVSTAGE_JOBS_TOPOLOGY_H

#include <stdbool.h>

typedef struct jobs_topology {
	void *topo;     /* hwloc_topology_t (kept opaque so that only topology.c includes hwloc) */
	int n_cores;    /* cores (or PUs, if the topology has no core level) */
	bool synthetic; /* a synthetic topology: describes no real machine, never bind */
} jobs_topology;

/* Loads the machine's topology, or a synthetic one if `synthetic` is non-NULL. */
bool jobs_topology_init(jobs_topology *t, const char *synthetic, const char **err);
void jobs_topology_fini(jobs_topology *t);

/* Fills order[0..n-2] with the workers other than `self`, nearest first. */
void jobs_topology_steal_order(const jobs_topology *t, int self, int n, int *order);

/* Binds the calling thread to the core of worker `index`. Returns false (harmlessly) if the
 * topology is synthetic or binding is not permitted. */
bool jobs_topology_pin(const jobs_topology *t, int index);

/* Distance rank between the cores of workers a and b: lower is nearer (for tests). */
int jobs_topology_distance(const jobs_topology *t, int a, int b);

#endif /* OVSTAGE_JOBS_TOPOLOGY_H */
