/*
 * query.h — query objects: a set of prims in a fixed order. A path-list query is ready at once; a
 * filter query is resolved by an op (reads and writes against it run after that op).
 * The object is reference-counted (ovs_hobj): ops take a reference at submission, so releasing
 * the handle never pulls the prims from under an op in flight.
 */
#ifndef OVSTAGE_ENGINE_QUERY_H
#define OVSTAGE_ENGINE_QUERY_H

#include "stage.h"

typedef struct ovs_query {
	ovs_hobj h;                   /* handle object (kind OVS_H_QUERY) */
	ovs_stage *st;                /* owning stage */
	ovx_primpath_list_t list;     /* the query's own path list (one reference held) */
	const ovx_primpath_t *paths;  /* its paths, valid while the reference is held */
	size_t count;                 /* number of prims */
	jobs_id op;                   /* resolving op, or 0 when ready at creation */
} ovs_query;

/* Takes a reference to the query behind `handle`, or sets the last error and returns NULL. */
ovs_query *ovs_query_get(ovs_stage *st, ovstage_query_handle_t handle);
void ovs_query_put(ovs_query *q);

/* Resolves an attribute name: a token (validated) or a string (interned). Empty -> *out = 0 and
 * OK only if allow_empty. Sets the last error on failure; `what` names the argument. */
ovstage_api_status_t ovs_resolve_attr(ovs_stage *st, ovx_string_or_token_t a, bool allow_empty, ovx_token_t *out,
				      const char *what);

/* The derived, read-only names (usd-path, usd-parent, usd-children): writes and deletes of them are
 * NOT_SUPPORTED. */
bool ovs_attr_is_derived(ovs_stage *st, ovx_token_t t);

/* The attribute's name for messages. */
const char *ovs_attr_name(ovs_stage *st, ovx_token_t t);

#endif /* OVSTAGE_ENGINE_QUERY_H */
