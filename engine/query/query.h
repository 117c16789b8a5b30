/*
 * query.h — query objects: a set of prims in a fixed order. A path-list query is ready at once; a
 * filter query is resolved by an op (reads and writes against it run after that op).
 * The object is reference-counted (ovs_hobj): ops take a reference at submission, so releasing
 * the handle never pulls the prims from under an op in flight.
 */
#ifndef OVSTAGE_ENGINE_QUERY_H
#define OVSTAGE_ENGINE_QUERY_H

#include "names.h"
#include "ops.h"
#include "stage.h"

/*
 * Publication of a filter query's prims. `list`, `paths` and `count` of a filter query are written
 * by its resolving op (filter.c) exactly once, before it finishes `state` (ovs_opstate_finish: a
 * release store) and before its job completes (the jobs completion is an acq_rel step that every
 * dependent job acquires). So a consumer may read them only after one of:
 *  - its own op was submitted with `after = q->op` and is running (the dependency edge orders the
 *    resolving op's writes before the dependent job's body), or
 *  - ovs_opstate_wait(&q->state, ...) / ovs_query_ready(q) reported done (acquire load of
 *    state.done, pairing with the finish's release).
 * Reading them at enqueue time without either is a data race for a filter query that has not
 * resolved yet. Path-list queries are ready at creation (op = 0, state finished), and the handle
 * table's insertion publishes their fields.
 */
/* The rows of a query's prims in one column, once every prim has a row. Rows are never reassigned,
 * so a complete map is immutable and valid for the life of the query: no invalidation. */
/* A query's row maps, indexed by column index; grown (copied) under the query's lock, old tables
 * kept until the query goes (a lock-free reader may still hold one). */
typedef struct ovs_rowmap_table {
	struct ovs_rowmap_table *older; /* the table this one replaced (freed at query destroy) */
	size_t cap;                     /* slots */
	_Atomic(ovs_rowmap *) slot[];   /* the map of column i, or NULL */
} ovs_rowmap_table;

typedef struct ovs_query {
	ovs_hobj h;                   /* handle object (kind OVS_H_QUERY) */
	ovs_stage *st;                /* owning stage */
	ovx_primpath_list_t list;     /* the query's own path list (one reference held) */
	const ovx_primpath_t *paths;  /* its paths, valid while the reference is held */
	size_t count;                 /* number of prims */
	jobs_id op;                   /* resolving op, or 0 when ready at creation */
	ovs_opstate state;            /* the resolving op's outcome, kept past the op id's release
	                               * (finished OK at creation for path-list queries) */
	bool filtered;                /* a filter query: result attributes use sealed presence */
	ovx_token_t *scope;           /* filter queries: attrs scoping fetch_query_result (distinct, in
	                               * the caller's order); NULL = every column */
	size_t nscope;                /* entries in scope */
	_Atomic(ovs_rowmap_table *) rowmaps; /* complete row maps by column index (NULL: none yet);
	                              * lock-free lookups, installs under rowmap_lock */
	pthread_mutex_t rowmap_lock;  /* serialises installs and growth */
} ovs_query;

/* The query's complete row map for a column, or NULL (not cached, or some prim has no row yet). */
const ovs_rowmap *ovs_query_rowmap(ovs_query *q, struct ovs_column *c);
/* A row map for column c with room for n rows (the caller fills rows[]), or NULL. */
ovs_rowmap *ovs_rowmap_alloc(const struct ovs_column *c, uint32_t n);
/* Caches a complete row map built by the caller (rows of all q->count prims); takes ownership (frees
 * it if memory is short or another thread installed one first). Sets its shape (identity, sorted,
 * contig). Returns the installed map, or NULL (then callers fall back to per-prim lookups). Every
 * column of a query can be cached (a step that writes 100 columns through one query used to miss
 * on all but 8 and looked up every prim of the rest on every write). */
const ovs_rowmap *ovs_query_rowmap_install(ovs_query *q, ovs_rowmap *m);
/* Row maps are reference-counted (ovs_rowmap_ref/unref, buffer.h): a delta that borrows an installed
 * map's rows as its own row list holds a reference (rows never change once installed). */

/* A new query object with one reference (the caller's), no prims, state not finished. */
ovs_query *ovs_query_new(ovs_stage *st);

/* True once the query's prims are published (path-list queries: always). Acquire: after true, the
 * caller may read list/paths/count. A filter query whose op failed is "ready" with no prims; check
 * q->state.status for the outcome. */
static inline bool ovs_query_ready(ovs_query *q)
{
	/* acquire: pairs with ovs_opstate_finish's release in the resolving op. */
	return atomic_load_explicit(&q->state.done, memory_order_acquire) != 0;
}

/* Takes a reference to the query behind `handle`, or sets the last error and returns NULL. */
ovs_query *ovs_query_get(ovs_stage *st, ovstage_query_handle_t handle);
void ovs_query_put(ovs_query *q);

#endif /* OVSTAGE_ENGINE_QUERY_H */
