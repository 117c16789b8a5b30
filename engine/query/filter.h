/*
 * filter.h — filter queries (ovstage_query): validation of a filter at the call, and the op that
 * resolves the query against the latest committed state when it executes.
 *
 * Semantics (spec 2.9; decisions of ours are marked *):
 *  - The filter is the AND of its predicates; a NULL filter (or zero predicates) matches every prim.
 *    *Extension: a predicate with op OVSTAGE_FILTER_OP_EXT_OR separates AND groups (the filter is then
 *    the OR of the groups; a separator needs a predicate on each side, else INVALID_ARGUMENT).
 *  - Candidates: every prim that exists when the op runs (the stage's prim table: created by a
 *    write's execution, removed by a whole-prim delete's execution). *Existence is structural and is
 *    not floor-gated: a prim created by a write that is not sealed yet is a candidate, like the
 *    derived built-ins (usd-path/-parent/-children), which spec 4 says are not floor-gated either.
 *  - Value tests look only at committed (sealed) data: HAS attr = the prim has a present row in the
 *    column's latest sealed version. *Unsealed writes and unsealed tombstones do not count* ("latest
 *    committed"); the same holds for usd-prim-type IN.
 *  - Support matrix (anything else: NOT_SUPPORTED at the call, naming the predicate, attribute, op):
 *      HAS on any attribute (usd-path: every prim; usd-parent: every prim but the root; usd-children:
 *        prims with an existing child; other names: sealed presence as above). *HAS ignores values.
 *      usd-path IN {paths}       exact path match
 *      usd-path PREFIX {strings} byte prefix of the path string ("/World" matches "/Worldwide")
 *      usd-parent IN {paths}     the prim's parent path is one of them
 *      usd-children CONTAINS {paths}  the value path exists and is a child of the prim
 *      usd-prim-type IN {names}  the fixed uint64 column "usd-prim-type" holds the type's token id
 *      usd-schemas CONTAINS {names}  the array column "usd-schemas" (token-id rows) contains any of them
 *      *IN / LT / LE / GT / GE on any other attribute: its latest sealed scalar value compared with
 *        the values (numbers or true/false; filter_value.h). An extension: 0.2.1 answers NOT_SUPPORTED.
 *    usd-active anywhere, LT/LE/GT/GE on built-ins, CONTAINS / PREFIX on other attributes:
 *    NOT_SUPPORTED. An empty value set matches nothing.
 *  - *The scan over candidate prims runs in blocks of 65,536 path ids on the workers (fork-join); the
 *    result order does not depend on it (below).
 *  - Path values (IN on usd-path/usd-parent, CONTAINS on usd-children) must be valid absolute paths
 *    (path_dictionary.h syntax); they are interned at the call. Type names are interned as tokens at
 *    the call (*an empty type name matches nothing). PREFIX values are arbitrary bytes.
 *  - *Result order: hierarchical pre-order by path string — paths compare bytewise with '/' ranking
 *    below every other byte, so a parent comes right before its subtree and siblings are in byte
 *    order. Deterministic: independent of interning order and of the execution schedule.
 *  - fetch_query_result on a filter query reports the attributes (among `attrs` if attr_count > 0,
 *    in the caller's order, duplicates dropped; else every column, in creation order) with a present
 *    row for at least one matched prim in the latest sealed version at fetch time. Derived built-ins
 *    are not columns and are not reported.
 */
#ifndef OVSTAGE_ENGINE_FILTER_H
#define OVSTAGE_ENGINE_FILTER_H

#include "query.h"

/* Validates the filter and attrs, reserves the query handle (inserted with q->op = the resolving
 * op, so consumers wait for it) and submits the op. st and out are non-NULL; *out is already
 * OVSTAGE_INVALID_QUERY_HANDLE. Rejections set the last error. */
ovstage_enqueue_result_t ovs_filter_submit(ovs_stage *st, const ovstage_filter_t *filter, const ovx_token_t *attrs,
					   size_t attr_count, ovstage_query_handle_t *out);

/* For fetch_query_result on a resolved filter query: the attributes to report (malloc'd array in
 * *out, entries in *n). False when out of memory. */
bool ovs_filter_result_attrs(ovs_stage *st, ovs_query *q, ovx_token_t **out, size_t *n);

/* Test hook: when set, every filter op calls it first (on the worker) before evaluating. Tests use
 * it to hold a query unresolved while they enqueue dependents. Not for production use. */
typedef void (*ovs_filter_hook_fn)(void);
void ovs_filter_set_test_hook(ovs_filter_hook_fn fn);

#endif /* OVSTAGE_ENGINE_FILTER_H */
