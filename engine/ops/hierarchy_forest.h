/*
 * hierarchy_forest.h — the prims of a stage as a forest in preorder, for the transform hierarchy.
 *
 * Nodes are the existing prims; a node's parent is its nearest existing ancestor by path (none for
 * a top-level prim). Nodes are numbered in preorder, so a parent comes before its descendants and
 * the subtree of node i is the interval [i, i + size[i]). Each node carries its row in the three
 * columns of the transform contract (UINT32_MAX: none), and each column's row maps back to its node.
 *
 * Built by the compute op (its parts spread over the op's workers with ovs_parallel_for: the
 * existence, parent and row lookups are lock-free reads), read-only afterwards.
 */
#ifndef OVSTAGE_ENGINE_HIERARCHY_FOREST_H
#define OVSTAGE_ENGINE_HIERARCHY_FOREST_H

#include "stage.h"

#define OVS_HF_NONE UINT32_MAX

enum { OVS_HF_XFORM = 0, OVS_HF_RESET = 1, OVS_HF_WORLD = 2, OVS_HF_COLS = 3 };

typedef struct ovs_hforest {
	uint32_t n;                    /* nodes */
	ovx_primpath_t *path;          /* path of each node */
	uint32_t *parent;              /* parent node, or OVS_HF_NONE */
	uint32_t *size;                /* subtree size (the node included) */
	uint32_t *row[OVS_HF_COLS];    /* node -> row in xform / reset / world column (OVS_HF_NONE: none) */
	uint32_t *node_of[OVS_HF_COLS];/* row -> node (OVS_HF_NONE: the row's prim is not a node) */
	uint32_t nrows[OVS_HF_COLS];   /* entries of node_of */
	uint32_t *xslot;               /* node -> its index among the nodes without a world row (their
	                                * worlds are kept apart: hierarchy_compute.c), or OVS_HF_NONE;
	                                * NULL when every node has one (nx == 0) */
	uint32_t nx;                   /* nodes without a world row */
} ovs_hforest;

/* Builds the forest of the store's existing prims; cols[k] may be NULL (no such column). x: where
 * the parallel parts run (its worker's pool; serial without one). false when out of memory (f is
 * then empty). */
bool ovs_hforest_build(ovs_hforest *f, ovs_stage *st, const ovs_exec *x, ovs_column *const cols[OVS_HF_COLS]);
void ovs_hforest_free(ovs_hforest *f);

#endif /* OVSTAGE_ENGINE_HIERARCHY_FOREST_H */
