/*
 * hierarchy_gpu.h — the device half of the GPU hierarchy models (GPU_GLOBAL, GPU_INCREMENTAL):
 * world matrices of whole subtrees of a forest computed by kernels, one launch per depth level.
 *
 * Contract
 *  - world is device memory of x's device holding f->n matrices (16 float64 each, node order). For
 *    every node of the subtrees rooted at items[0..nitems) (disjoint, each taken whole), world[i]
 *    becomes local(i) x world[parent(i)], or local(i) when the node resets or has no parent, exactly
 *    as the CPU model's node_world computes it (bitwise: kernels.h). Nodes outside those subtrees
 *    keep their bytes: a subtree root's parent world must already be there (the previous compute).
 *  - Inputs: vx / vr, the xform / reset versions as of the input ordinal (NULL: none), each on the
 *    host (gathered there and uploaded once) or, when x_dev / r_dev, in device memory of x's device
 *    (gathered there by the chunked gather kernel; the versions were sealed on the same engine
 *    stream, so stream order makes them ready). Presence and chunk tables are host metadata.
 *  - Asynchronous on x's stream; host memory it uploads from may change once it returns. Failures:
 *    false with a message (host memory), or a launch error in x->err.
 *
 * Thread safety: the compute op's (hierarchy_compute.c); f and the versions are read only.
 */
#ifndef OVSTAGE_ENGINE_HIERARCHY_GPU_H
#define OVSTAGE_ENGINE_HIERARCHY_GPU_H

#include "exec.h"
#include "hierarchy_forest.h"
#include "model.h"

bool ovs_hier_gpu_run(ovs_exec *x, const ovs_hforest *f, const ovs_version *vx, bool x_dev, const ovs_version *vr,
		      bool r_dev, const uint32_t *items, size_t nitems, double *world, char *err, size_t errlen);

#endif /* OVSTAGE_ENGINE_HIERARCHY_GPU_H */
