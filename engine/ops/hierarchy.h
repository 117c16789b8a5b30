/*
 * hierarchy.h — the transform hierarchy of a stage (spec 2.13, "Transform contract"): world
 * matrices computed from local transforms along the path hierarchy, and parent / children /
 * sibling lookups. The exported functions (ovstage_compute_hierarchy, ovstage_get_hierarchy, ...)
 * are defined in hierarchy_compute.c and hierarchy_lookup.c; this header is their shared state.
 *
 * Transform contract
 *  - Inputs: omni:xform (fixed, float64 x16, row-major 4x4, USD row-vector convention: translation
 *    in elements 12..14) and omni:resetXformStack (fixed, 1 byte; non-zero = the prim's world is
 *    its local: the parent's world is ignored). A prim without an omni:xform value is the
 *    identity; without a reset value, it inherits.
 *  - world(p) = local(p) x world(parent(p)) (row vectors: a point's world position is
 *    p_local * local * parent world), parent(p) = nearest existing ancestor prim by path; a
 *    top-level prim's parent world is the identity.
 *  - Output: omni:fabric:worldMatrix (fixed, float64 x16). Only prims that already have a row in
 *    it are updated; the column is never created (without it a compute succeeds and writes
 *    nothing). The computed rows become a new sealed version at output_ordinal, so
 *    output_ordinal must be sealed already for that column (the freshness boundary: write at N,
 *    seal N, compute(N, N), read) and not below its latest sealed ordinal.
 *  - CPU_INCREMENTAL keeps, per stage, the forest (rebuilt only when the contract columns' rows or
 *    the prim deletes changed since it was built) and a reference to the world-column version its
 *    last compute published, which holds the world matrices (those of prims without a world row are
 *    kept beside it); a later compute recomputes only the subtrees under prims whose inputs changed
 *    in (last input ordinal, input ordinal] (read from the retained versions' change lists), and
 *    every world — with the forest kept — when the retained history does not say what changed,
 *    someone else wrote the world column since, or (forests of 4096 nodes or more) those subtrees
 *    hold more than a quarter of the nodes, where the full path is the cheaper one (the results are
 *    bitwise the same either way).
 *  - GPU_INCREMENTAL is the same planning with the world matrices cached in device memory and the
 *    recomputed subtrees run as kernels (hierarchy_gpu.h), GPU_GLOBAL recomputes everything as
 *    kernels on each compute; both give bitwise the CPU model's results, and are refused at the call
 *    (NOT_SUPPORTED, with ovs_gpu_reason()) where no GPU is usable. A cache made by the other kind of
 *    model is never reused.
 *
 * Thread-safety: a compute runs as an op in the stage's seal chain (after the previous floor
 * advance, before the next), so it owns the seal-owned store state and the cache below while it
 * runs. Lookups read prim existence (lock-free) and the dictionary (lock-free).
 */
#ifndef OVSTAGE_ENGINE_HIERARCHY_H
#define OVSTAGE_ENGINE_HIERARCHY_H

#include "stage.h"

/* Per-stage state of the hierarchy (created with the stage, freed at destroy). */
typedef struct ovs_hier ovs_hier;

/* At creation: the stage's hierarchy state, capturing the process default model (the config entry
 * RUNTIME_DEFAULT_HIERARCHY_COMPUTATION_MODEL). NULL when out of memory. */
ovs_hier *ovs_hier_create(uint64_t default_model);
/* At destroy (no op of the stage runs any more). NULL is a no-op. */
void ovs_hier_destroy(ovs_hier *h);

/* The process default model captured at the stage's creation. */
uint64_t ovs_hier_default_model(const ovs_hier *h);

/* Nodes the last compute recomputed (statistics for tests; read when no compute runs). */
uint64_t ovs_hier_last_recomputed(const ovs_hier *h);
/* Forests built so far (statistics for tests: a kept forest is not rebuilt; read likewise). */
uint64_t ovs_hier_forest_builds(const ovs_hier *h);
/* Whether the last CPU_INCREMENTAL compute recomputed every world (the full path: no usable cache,
 * or its dirty subtrees were too large a share of the nodes to be cheaper); read likewise. */
bool ovs_hier_last_full(const ovs_hier *h);
/* Sets the share of the nodes, in 1/1024, that the dirty subtrees of a CPU_INCREMENTAL compute may
 * hold before it takes the full path instead (default: the measured crossover, hierarchy_compute.c;
 * 0: always full; 1024 or more: never for that reason). For tests; call when no compute runs. */
void ovs_hier_set_full_share(ovs_hier *h, uint32_t per1024);

#endif /* OVSTAGE_ENGINE_HIERARCHY_H */
