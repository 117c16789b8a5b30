/*
 * column.h — columns (one per attribute name): creation and lookup, the row of each prim, prim
 * existence, and the teardown of everything the store holds.
 *
 * Lookups and row creation are lock-free; creating a column takes the stage's cols_lock (once per
 * attribute name). The column array is published with release stores and never freed before destroy.
 */
#ifndef OVSTAGE_ENGINE_COLUMN_H
#define OVSTAGE_ENGINE_COLUMN_H

#include "store.h"

ovs_column *ovs_column_find(ovs_store *st, ovx_token_t name);
ovs_column *ovs_column_get_or_create(ovs_store *st, ovx_token_t name);
/* A call that may still be refused names a column that may not exist: ovs_column_prepare gives
 * the existing column, or a new record that nobody else sees yet (c->prepared; room in the column
 * array is reserved for it, so publishing cannot fail); NULL when out of memory. Once the call is
 * admitted, ovs_column_publish makes it visible (or, when another call created that column
 * meanwhile, frees it and gives that one); a refused call discards it (both no-ops for a
 * published column). A refused call then leaves no column record behind. A new column starts at
 * `floor` (UINT64_MAX: the stage floor as of now). */
ovs_column *ovs_column_prepare(ovs_store *st, ovx_token_t name);
ovs_column *ovs_column_publish(ovs_store *st, ovs_column *c, uint64_t floor);
void ovs_column_discard(ovs_store *st, ovs_column *c);
/* Row of a path in a column, or UINT32_MAX if it has none. Lock-free. */
uint32_t ovs_column_row(ovs_column *c, ovx_primpath_t path);
/* Row of a path, creating it: lock-free when it exists, else under the column's rows_lock, so rows
 * are numbered densely in first-write order. UINT32_MAX on OOM. */
uint32_t ovs_column_row_create(ovs_column *c, ovx_primpath_t path, bool *created);
/* Rows of n paths (rows[j] for paths[j]), creating those that have none under one hold of the
 * column's rows_lock, numbered consecutively in j order: a write's new prims get one block of rows
 * even while other writers create theirs (per-prim creation interleaved concurrent producers' first
 * writes row by row, so no producer's later writes were ever one block). A path repeated in paths
 * gets one row. *created: some row was made. False (nothing created) when out of memory. */
bool ovs_column_rows_create(ovs_column *c, const ovx_primpath_t *paths, uint32_t n, uint32_t *rows, bool *created);

/* Prim existence (latest state). Setting a prim's state to 1 (exists) from another counts it in
 * st->prim_creations. */
bool ovs_prim_exists(ovs_store *st, ovx_primpath_t path);
bool ovs_prim_set(ovs_store *st, ovx_primpath_t path, uint32_t state);

/* Some column may now hold rows of prims that do not exist (a whole-prim delete, or an op that
 * created rows and then failed): from now on writes through a cached row map re-assert the
 * existence of their prims instead of inferring it from the rows. */
static inline void ovs_prims_need_reassert(ovs_store *st)
{
	/* release: a write that sees the count also sees the prim states set before it. */
	atomic_fetch_add_explicit(&st->prim_deletes, 1, memory_order_release);
}

/* The oldest ordinal whose change history every column still has. */
ovstage_ordinal_t ovs_store_oldest_preserved(ovs_store *st);

/* Frees all store state (destroy: no other thread is inside the stage). */
void ovs_store_fini(ovs_store *st);

#endif /* OVSTAGE_ENGINE_COLUMN_H */
