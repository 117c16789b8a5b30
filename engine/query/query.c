/* query.c — path-list queries, query results, name resolution. */
#include "query.h"

#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "errors.h"
#include "filter.h"
#include "ops.h"

static void query_destroy(ovs_hobj *h)
{
	ovs_query *q = (ovs_query *)h;
	if (q->list) /* a filter query whose op never published prims has none */
		ovs_pd_list_release(q->st->pd, q->list);
	free(q->scope);
	/* relaxed: the last reference is gone; no lookup or install runs. The newest table holds every
	 * installed map (growth copies them; installs happen under the lock into the newest). */
	ovs_rowmap_table *t = atomic_load_explicit(&q->rowmaps, memory_order_relaxed);
	for (size_t i = 0; t && i < t->cap; i++)
		ovs_rowmap_unref(atomic_load_explicit(&t->slot[i], memory_order_relaxed));
	while (t) {
		ovs_rowmap_table *o = t->older;
		free(t);
		t = o;
	}
	pthread_mutex_destroy(&q->rowmap_lock);
	free(q);
}

const ovs_rowmap *ovs_query_rowmap(ovs_query *q, struct ovs_column *c)
{
	/* acquire: pairs with the release that published the table (its slots' initial values). */
	ovs_rowmap_table *t = atomic_load_explicit(&q->rowmaps, memory_order_acquire);
	if (!t || c->index >= t->cap)
		return NULL;
	/* acquire: pairs with the installing release store (the map's contents are visible). */
	ovs_rowmap *m = atomic_load_explicit(&t->slot[c->index], memory_order_acquire);
	return m && m->col == c ? m : NULL;
}

/* A table with room for column index idx, copied from t (rowmap_lock held); NULL if out of memory. */
static ovs_rowmap_table *rowmap_table_grow(ovs_rowmap_table *t, uint32_t idx)
{
	size_t cap = t ? t->cap : 8;
	while (cap <= idx)
		cap *= 2;
	ovs_rowmap_table *n = malloc(sizeof *n + cap * sizeof n->slot[0]);
	if (!n)
		return NULL;
	n->older = t;
	n->cap = cap;
	for (size_t i = 0; i < cap; i++)
		/* relaxed: under the lock, which every install holds */
		atomic_init(&n->slot[i], t && i < t->cap ? atomic_load_explicit(&t->slot[i], memory_order_relaxed) : NULL);
	return n;
}

ovs_rowmap *ovs_rowmap_alloc(const struct ovs_column *c, uint32_t n)
{
	ovs_rowmap *m = malloc(sizeof *m + (size_t)n * sizeof m->rows[0]);
	if (m) {
		m->col = c;
		m->n = n;
		m->npieces = 0; /* no blocks listed until ovs_query_rowmap_install computes them */
		m->max_row = 0;
	}
	return m;
}

const ovs_rowmap *ovs_query_rowmap_install(ovs_query *q, ovs_rowmap *m)
{
	atomic_init(&m->refs, 1); /* the query's */
	/* Its shape, once: writes through the query then tell the sealer without scanning. */
	m->identity = true;
	for (uint32_t i = 0; i < m->n && m->identity; i++)
		m->identity = m->rows[i] == i;
	m->sorted = m->contig = true;
	for (uint32_t i = 1; i < m->n && m->sorted; i++) {
		m->contig = m->contig && m->rows[i] == m->rows[i - 1] + 1;
		m->sorted = m->rows[i] > m->rows[i - 1];
	}
	/* its blocks (up to OVS_ROWMAP_PIECES) and highest row, for reads (read.c: piece_groups) */
	m->npieces = 0;
	m->max_row = 0;
	for (uint32_t i = 0; i < m->n; i++) {
		m->max_row = m->rows[i] > m->max_row ? m->rows[i] : m->max_row;
		if (i && m->rows[i] == m->rows[i - 1] + 1)
			continue;
		if (m->npieces == UINT32_MAX)
			continue; /* too many: only the highest row is still wanted */
		if (m->npieces == OVS_ROWMAP_PIECES) {
			m->npieces = UINT32_MAX;
			continue;
		}
		m->pieces[m->npieces++] = (ovs_rowmap_piece){ i, m->rows[i] };
	}
	if (m->npieces == UINT32_MAX)
		m->npieces = 0;
	const struct ovs_column *c = m->col;
	pthread_mutex_lock(&q->rowmap_lock);
	/* relaxed: installs and growth are serialised by the lock */
	ovs_rowmap_table *t = atomic_load_explicit(&q->rowmaps, memory_order_relaxed);
	if (!t || c->index >= t->cap) {
		ovs_rowmap_table *n = rowmap_table_grow(t, c->index);
		if (!n) {
			pthread_mutex_unlock(&q->rowmap_lock);
			free(m);
			return NULL;
		}
		/* release: a reader that sees the new table sees its copied slots */
		atomic_store_explicit(&q->rowmaps, n, memory_order_release);
		t = n;
	}
	ovs_rowmap *old = atomic_load_explicit(&t->slot[c->index], memory_order_relaxed);
	if (old && old->col == c) {
		pthread_mutex_unlock(&q->rowmap_lock);
		free(m);
		return old;
	}
	/* release: publishes the map's contents to lookups (acquire). A slot is written once. */
	atomic_store_explicit(&t->slot[c->index], m, memory_order_release);
	pthread_mutex_unlock(&q->rowmap_lock);
	return m;
}

ovs_query *ovs_query_new(ovs_stage *st)
{
	ovs_query *q = calloc(1, sizeof *q);
	if (!q)
		return NULL;
	ovs_hobj_init(&q->h, OVS_H_QUERY, query_destroy);
	q->st = st;
	atomic_init(&q->rowmaps, NULL);
	pthread_mutex_init(&q->rowmap_lock, NULL);
	ovs_opstate_init(&q->state);
	return q;
}

ovs_query *ovs_query_get(ovs_stage *st, ovstage_query_handle_t handle)
{
	ovs_hobj *h = ovs_handle_get(&st->handles, handle, OVS_H_QUERY);
	if (!h) {
		ovs_handle_invalid(&st->handles, handle, "query handle");
		return NULL;
	}
	return (ovs_query *)h;
}

void ovs_query_put(ovs_query *q)
{
	if (q)
		ovs_hobj_unref(&q->h);
}

ovstage_api_status_t ovs_query_from_path_list(ovstage_context_t *ctx, ovx_primpath_list_t path_list,
					      ovstage_query_handle_t *out_handle)
{
	ovs_err_clear();
	ovs_stage *st = ovs_stage_of(ctx);
	if (out_handle)
		*out_handle = OVSTAGE_INVALID_QUERY_HANDLE;
	if (!st || !out_handle)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s is NULL", !st ? "instance" : "out_handle");
	const ovx_primpath_t *paths;
	size_t count;
	/* The caller holds a reference to its list while we copy it. */
	if (!ovs_pd_list_add_ref(st->pd, path_list))
		return ovs_err_set(OVSTAGE_ERROR_INVALID_HANDLE, "path_list %llu is not a live path list",
				   (unsigned long long)path_list);
	if (!ovs_pd_list_view(st->pd, path_list, &paths, &count)) {
		ovs_pd_list_release(st->pd, path_list);
		return ovs_err_set(OVSTAGE_ERROR_INVALID_HANDLE, "path_list %llu is not a live path list",
				   (unsigned long long)path_list);
	}
	if (count > UINT32_MAX) {
		ovs_pd_list_release(st->pd, path_list);
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "path_list holds %zu paths (at most 2^32-1)", count);
	}
	/* Lists are immutable: the query keeps the reference taken above instead of a copy (which cost
	 * a look at every path's record and a copy of the array: seconds at 16 M paths), so the caller
	 * may still release its own reference right away. */
	ovx_primpath_list_t own = path_list;
	ovs_query *q = calloc(1, sizeof *q);
	if (!own || !q) {
		if (own)
			ovs_pd_list_release(st->pd, own);
		free(q);
		return ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory creating a query");
	}
	ovs_hobj_init(&q->h, OVS_H_QUERY, query_destroy);
	q->st = st;
	atomic_init(&q->rowmaps, NULL);
	pthread_mutex_init(&q->rowmap_lock, NULL);
	q->list = own;
	ovs_pd_list_view(st->pd, own, &q->paths, &q->count);
	ovs_opstate_init(&q->state);
	ovs_opstate_finish(&q->state, OVSTAGE_OK); /* ready at creation */
	uint64_t id = ovs_handle_insert(&st->handles, &q->h);
	ovs_hobj_unref(&q->h); /* the table holds it now */
	if (!id)
		return ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory registering a query");
	*out_handle = id;
	return OVSTAGE_OK;
}

ovstage_enqueue_result_t ovs_query_filter(ovstage_context_t *ctx, const ovstage_filter_t *filter, const ovx_token_t *attrs,
				   size_t attr_count, ovstage_query_handle_t *out_query_handle)
{
	ovs_err_clear();
	ovs_stage *st = ovs_stage_of(ctx);
	if (out_query_handle)
		*out_query_handle = OVSTAGE_INVALID_QUERY_HANDLE;
	if (!st || !out_query_handle)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s is NULL",
						!st ? "instance" : "out_query_handle"));
	/* Validation, compilation and the resolving op: filter.c. */
	return ovs_filter_submit(st, filter, attrs, attr_count, out_query_handle);
}

/* ---- query results ---- */

typedef struct ovs_qresult {
	ovs_hobj h;            /* kind OVS_H_QRESULT */
	ovx_token_t *attrs;    /* attributes found on the query's prims */
	size_t nattrs;         /* entries */
} ovs_qresult;

static void qresult_destroy(ovs_hobj *h)
{
	ovs_qresult *r = (ovs_qresult *)h;
	free(r->attrs);
	free(r);
}

ovstage_api_status_t ovs_fetch_query_result(ovstage_context_t *ctx, ovstage_query_handle_t query_handle,
					    ovstage_timeout_ns_t timeout, ovstage_query_result_t *out)
{
	ovs_err_clear();
	ovs_stage *st = ovs_stage_of(ctx);
	if (!st || !out)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s is NULL", !st ? "instance" : "out_result");
	memset(out, 0, sizeof *out);
	ovs_query *q = ovs_query_get(st, query_handle);
	if (!q)
		return OVSTAGE_ERROR_INVALID_HANDLE;
	if (q->op) {
		/* Through the query's own opstate: works after the caller released the op id. Its acquire
		 * (pairing with the resolving op's release) publishes q->paths / q->count to us. */
		ovstage_api_status_t s = ovs_opstate_wait(st, &q->state, q->op, timeout);
		if (s != OVSTAGE_OK) {
			ovs_query_put(q);
			return s == OVSTAGE_ERROR_TIMEOUT ? s
							  : ovs_err_set(OVSTAGE_ERROR_OP_FAILED, "the query's op failed (%s); "
									"see wait_op / get_last_op_error",
									ovs_status_name(s));
		}
	}
	ovs_qresult *r = calloc(1, sizeof *r);
	if (!r) {
		ovs_query_put(q);
		return ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory building a query result");
	}
	ovs_hobj_init(&r->h, OVS_H_QRESULT, qresult_destroy);
	if (q->filtered) {
		/* Filter queries: attributes with a present row among the matched prims in the latest
		 * sealed versions, scoped by the query's attrs (filter.c). */
		if (!ovs_filter_result_attrs(st, q, &r->attrs, &r->nattrs)) {
			ovs_hobj_unref(&r->h);
			ovs_query_put(q);
			return ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory building a query result");
		}
	} else {
		size_t ncols = atomic_load_explicit(&st->store.ncols, memory_order_acquire);
		ovs_column **cols = atomic_load_explicit(&st->store.cols, memory_order_acquire);
		r->attrs = malloc((ncols ? ncols : 1) * sizeof *r->attrs);
		if (!r->attrs) {
			ovs_hobj_unref(&r->h);
			ovs_query_put(q);
			return ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory building a query result");
		}
		/* Attributes with a row for any of the query's prims (latest state). */
		for (size_t c = 0; c < ncols; c++)
			for (size_t i = 0; i < q->count; i++)
				if (ovs_column_row(cols[c], q->paths[i]) != UINT32_MAX) {
					r->attrs[r->nattrs++] = cols[c]->name;
					break;
				}
	}
	uint64_t id = ovs_handle_insert(&st->handles, &r->h);
	ovs_hobj_unref(&r->h);
	if (!id) {
		ovs_query_put(q);
		return ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory registering a query result");
	}
	out->query_result_id = id;
	out->attributes = r->attrs;
	out->attribute_count = r->nattrs;
	out->all_handle = query_handle;
	out->total_prim_count = q->count;
	ovs_query_put(q);
	return OVSTAGE_OK;
}

ovstage_api_status_t ovs_release_query_result(ovstage_context_t *ctx, const ovstage_query_result_t *result)
{
	ovs_err_clear();
	ovs_stage *st = ovs_stage_of(ctx);
	if (!st || !result)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s is NULL", !st ? "instance" : "result");
	ovs_hobj *h = ovs_handle_remove(&st->handles, result->query_result_id, OVS_H_QRESULT);
	if (!h)
		return ovs_handle_invalid(&st->handles, result->query_result_id, "query result");
	ovs_hobj_unref(h);
	return OVSTAGE_OK;
}

ovstage_enqueue_result_t ovs_release_query(ovstage_context_t *ctx, ovstage_query_handle_t handle)
{
	ovs_err_clear();
	ovs_stage *st = ovs_stage_of(ctx);
	if (!st)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "instance is NULL"));
	/* Ops in flight hold their own references; the object goes when the last one finishes. */
	return ovs_release_handle_op(st, handle, OVS_H_QUERY, "query handle");
}
