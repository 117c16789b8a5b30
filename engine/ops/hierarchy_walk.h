/*
 * hierarchy_walk.h — the CPU model's walk of the transform hierarchy: the world matrices of whole
 * subtrees of a forest (hierarchy_forest.h) computed on the op's workers, each straight into the
 * output delta (hierarchy_compute.c makes the delta and publishes it).
 *
 * Contract
 *  - For every node of the subtrees rooted at items[0..nitems) (disjoint, each taken whole, in
 *    ascending node order), world(i) = local(i) x world(parent(i)), or local(i) when the node resets
 *    or has no parent, multiplied as xform.h's ovs_xform_mul (the reference's terms and order, so the
 *    results are bitwise those of a serial loop). A subtree root's parent world is either computed in
 *    this walk before it (a node of `pre`, computed first, serially, in the given ascending order) or
 *    read from prev, the world column's version that the last compute published.
 *  - Where a world goes: world row r of the output at out + r x 128 bytes (slot NULL: a FULL delta by
 *    row), or at out + slot[i] x 128 (a sparse delta, slot[i] its index in the sorted rows); a node
 *    without a world row in extra[f->xslot[i]].
 *  - The subtrees are cut into batches of about HW_BATCH_NODES nodes (whole subtrees), which the
 *    workers take in turn; within a batch the rows of the nodes HW_AHEAD ahead are prefetched across
 *    subtree boundaries (the dirty subtrees of an incremental compute hold ~8 nodes each, so a
 *    prefetch that stopped at a subtree's end missed on the first rows of every one).
 *
 * Thread safety: the walk writes disjoint rows (each node's own) and reads the forest, the inputs,
 * prev and the worlds of ancestors computed earlier in the same batch or before the parallel part
 * (pre); ovs_parallel_for's join orders every write before it returns.
 */
#ifndef OVSTAGE_ENGINE_HIERARCHY_WALK_H
#define OVSTAGE_ENGINE_HIERARCHY_WALK_H

#include "exec.h"
#include "hierarchy_forest.h"
#include "model.h"

/* What the walk reads and where it writes (see the contract). */
typedef struct ovs_hwalk {
	const ovs_hforest *f;       /* the forest */
	unsigned char *out;         /* the output delta's values (by world row, or by slot) */
	const uint32_t *slot;       /* node -> index in out (OVS_HF_NONE: not recomputed); NULL: by row */
	const ovs_version *prev;    /* the world column's version of the last compute (NULL: none) */
	double (*extra)[16];        /* the worlds of nodes without a world row (f->xslot) */
	const ovs_version *vx, *vr; /* inputs as of the input ordinal (NULL: column absent) */
} ovs_hwalk;

/* Computes pre[0..npre) serially (single nodes, ascending), then the subtrees of items[0..nitems) on
 * x's workers. false when out of memory (nothing is half-published: the caller drops the delta). */
bool ovs_hwalk_run(const ovs_exec *x, const ovs_hwalk *w, const uint32_t *items, size_t nitems,
		   const uint32_t *pre, size_t npre);

#endif /* OVSTAGE_ENGINE_HIERARCHY_WALK_H */
