/*
 * read.c — read_attributes / fetch_read_next / release_group / release_read.
 *
 * A read takes no part in write ordering: its op pins, for each attribute, the sealed version that
 * answers the range (a reference count), and builds groups that are zero-copy views of that
 * version's buffer. Later writes and seals proceed; the pinned version stays valid until the last
 * group holding it is released.
 *
 * Semantics (this implementation keeps history; docs/api.md):
 *  - latest read, end N: values as of N (the newest version with ordinal <= N). N above the column's
 *    floor is accepted only if nothing was written above the floor (then "as of N" = "as of the
 *    floor"); otherwise WRITE_FLOOR_VIOLATION. If the version as of N has left retention:
 *    OUT_OF_RANGE.
 *  - range read [a, b]: the keys whose last change (a write or a delete) as of b is at an ordinal in
 *    [a, b], from the retained versions' changed rows and the column's fold of those that left
 *    retention (lastchange.h; whatever a is), with their values as of b; deleted keys come as
 *    is_delete groups. When b's version left retention: as 0.2.1, OUT_OF_RANGE for a selected key
 *    that changed after b (range_groups).
 *  - a column that does not exist, or has no data at N: zero groups.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "errors.h"
#include "gpu.h"
#include "layout.h"
#include "ops.h"
#include "query.h"
#include "fold.h"

/* Reads of resolved queries over at most this many (prim, attribute) elements run in the call. */
#define READ_INLINE_MAX_ELEMS ((size_t)1 << 18)
/* The most columns read_identity_at_call checks at the call (see there). */
#define READ_INLINE_MAX_ATTRS 256
/* A read of at most this many attributes keeps them in the read object; likewise its groups. A
 * latest read of one column written in full has one group. */
#define READ_SMALL_ATTRS 4
#define READ_SMALL_GROUPS 2

typedef struct ovs_group {
	ovs_hobj h;                 /* kind OVS_H_GROUP once fetched */
	ovstage_read_group_t g;     /* what fetch_read_next hands out (points into this object) */
	ovs_version *v;             /* pinned version (NULL for tombstone groups) */
	ovx_primpath_list_t list;   /* the query's list, valid while the group lives */
	ovs_query *q;               /* the query (one reference): it holds the list's reference. A
	                             * reference of the group's own on the list cost a slot lookup and
	                             * a CAS each way, ~100 instructions a group */
	DLTensor tensor;            /* the canonical 1-D tensor */
	int64_t shape;              /* tensor.shape[0] */
	int64_t stride;             /* tensor.strides[0] = 1 */
	DLTensor *row_tensors;      /* array columns: one tensor per row (per-row transport), or NULL */
	uint64_t *synth;            /* derived columns: the synthesized values the tensors point into */
	int64_t *synth_shapes;      /* derived array rows: their lengths */
	uint32_t *prim_index;       /* prims.index_map (query positions), or NULL */
	uint32_t *data_index;       /* data.index_map (buffer rows), or NULL */
} ovs_group;

typedef struct ovs_read {
	ovs_hobj h;                  /* kind OVS_H_READ */
	ovs_stage *st;               /* stage */
	ovs_query *q;                /* target prims (reference held) */
	ovx_token_t *attrs;          /* attributes (NULL = every column) */
	size_t nattrs;               /* entries */
	ovstage_ordinal_range_t range; /* requested range */
	jobs_id op;                  /* producing op */
	ovs_opstate state;           /* the op's outcome, kept past the op id's release */
	ovs_group **groups;          /* produced groups (published by the op's completion): groups_small
	                              * or malloc'd */
	size_t ngroups;              /* entries */
	size_t capgroups;            /* capacity */
	_Atomic size_t cursor;       /* next group to hand out */
	ovs_version *gift;           /* while the op builds a latest read's groups: the version whose pin
	                              * (one reference) the first group viewing it takes over, instead of
	                              * a reference of its own and the pin's release (NULL: none) */
	ovs_op_wrap wrap;            /* the op's wrap (ovs_op_submit), embedded: no allocation per read */
	ovs_column **cols;           /* attrs' columns as found at the call (NULL: none then; the op looks
	                              * again), in attrs' block; NULL when attrs is */
	ovx_token_t attrs_small[READ_SMALL_ATTRS]; /* attrs when there are this few (no allocation) */
	ovs_column *cols_small[READ_SMALL_ATTRS];  /* cols likewise */
	ovs_group *groups_small[READ_SMALL_GROUPS]; /* groups while there are this few (no allocation) */
} ovs_read;

/* Group structs are recycled through a list per thread (at most GROUP_CACHE_MAX): a consumer that
 * reads 100 columns a step and releases their groups allocated and freed 100 structs a step, ~430
 * instructions a group in calloc and free (bench/stage --only columns). Thread-private: no
 * synchronisation (a struct freed on one thread and taken on another is plain memory). What a
 * thread holds is freed when it exits (the key's destructor). */
#define GROUP_CACHE_MAX 256
typedef struct group_cache {
	ovs_group *head;   /* linked through h.next */
	unsigned n;        /* entries */
	bool keyed;        /* the exit destructor is registered */
} group_cache;
static _Thread_local group_cache tls_groups;
static pthread_key_t group_cache_key;
static pthread_once_t group_cache_once = PTHREAD_ONCE_INIT;
static bool group_cache_ok;

static void group_cache_drain(void *arg)
{
	group_cache *gc = arg;
	while (gc->head) {
		ovs_group *g = gc->head;
		gc->head = (ovs_group *)(void *)g->h.next;
		free(g);
	}
	gc->n = 0;
	gc->keyed = false; /* a destructor that recycles again registers again */
}

static void group_cache_init(void)
{
	group_cache_ok = pthread_key_create(&group_cache_key, group_cache_drain) == 0;
}

/* A zeroed group struct: the thread's cached one, or a fresh one (NULL when out of memory). */
static ovs_group *group_alloc(void)
{
	group_cache *gc = &tls_groups;
	ovs_group *g = gc->head;
	if (!g)
		return calloc(1, sizeof *g);
	gc->head = (ovs_group *)(void *)g->h.next;
	gc->n--;
	memset(g, 0, sizeof *g);
	return g;
}

static void group_free(ovs_group *g)
{
	group_cache *gc = &tls_groups;
	if (gc->n < GROUP_CACHE_MAX) {
		if (!gc->keyed) {
			pthread_once(&group_cache_once, group_cache_init);
			gc->keyed = group_cache_ok && pthread_setspecific(group_cache_key, gc) == 0;
		}
		if (gc->keyed) {
			g->h.next = (ovs_hobj *)(void *)gc->head;
			gc->head = g;
			gc->n++;
			return;
		}
	}
	free(g);
}

static void group_destroy(ovs_hobj *h)
{
	ovs_group *g = (ovs_group *)h;
	if (g->v)
		ovs_version_unref(g->v);
	ovs_query_put(g->q);
	/* usually none of them (a view of a run): no five calls of free(NULL) per group */
	if (g->prim_index || g->data_index || g->row_tensors || g->synth || g->synth_shapes) {
		free(g->prim_index);
		free(g->data_index);
		free(g->row_tensors);
		free(g->synth);
		free(g->synth_shapes);
	}
	group_free(g);
}

static void read_destroy(ovs_hobj *h)
{
	ovs_read *r = (ovs_read *)h;
	for (size_t i = 0; i < r->ngroups; i++)
		if (r->groups[i])
			group_destroy(&r->groups[i]->h); /* never fetched */
	if (r->groups != r->groups_small)
		free(r->groups);
	if (r->attrs != r->attrs_small)
		free(r->attrs);
	ovs_query_put(r->q);
	free(r);
}

static bool add_group(ovs_read *r, ovs_group *g)
{
	if (!r->groups) { /* the first: the read's own room */
		r->groups = r->groups_small;
		r->capgroups = READ_SMALL_GROUPS;
	}
	if (r->ngroups == r->capgroups) {
		/* A read of named columns has about one group per column: room for all of them at once (a
		 * 100-column read grew its array six times, 5 % of a many-column step). */
		size_t cap = r->capgroups * 2 > r->nattrs ? r->capgroups * 2 : r->nattrs;
		bool small = r->groups == r->groups_small;
		ovs_group **ng = realloc(small ? NULL : r->groups, cap * sizeof *ng);
		if (!ng)
			return false;
		if (small)
			memcpy(ng, r->groups_small, r->ngroups * sizeof *ng);
		r->groups = ng;
		r->capgroups = cap;
	}
	r->groups[r->ngroups++] = g;
	return true;
}

/* The sync a reader applies before touching the data of a group viewing v (the group's cuda_sync):
 * v's readiness. On the CPU every version is ready once sealed (ready is NULL): {0, 0}. The CUDA
 * backend fills it from the event it records in v->ready (wait_event = its cudaEvent_t). */
static ovstage_cuda_sync_t group_sync_of(const ovs_version *v)
{
	ovstage_cuda_sync_t sync = { 0, 0 };
	if (v && v->ready)
		sync.wait_event = ovs_gpu_event_handle(v->ready);
	return sync;
}

static ovs_group *new_group(ovs_read *r, ovs_column *c, ovs_version *v, bool is_delete)
{
	ovs_group *g = group_alloc();
	if (!g)
		return NULL;
	ovs_hobj_init(&g->h, OVS_H_GROUP, group_destroy);
	g->q = r->q;
	ovs_hobj_ref(&r->q->h); /* prims.list stays valid as long as the group (the query holds it) */
	g->list = r->q->list;
	g->g.attribute = c->name;
	g->g.ordinal = v ? v->ordinal : 0;
	g->g.is_delete = is_delete;
	g->g.is_array = c->schema.is_array;
	g->g.semantic = c->schema.semantic;
	g->g.prims.list = r->q->list;
	g->g.meta.attribute_write_floor_ordinal = atomic_load_explicit(&c->floor, memory_order_acquire);
	g->g.meta.layout_generation = v ? v->generation : 0;
	g->g.data.cuda_sync = group_sync_of(is_delete ? NULL : v); /* a tombstone group has no data */
	if (v && !is_delete) { /* a value group holds its version (a tombstone group has no data) */
		if (r->gift == v)
			r->gift = NULL; /* the pin's reference is the group's now */
		else
			ovs_version_ref(v);
		g->v = v;
	}
	return g;
}

/* A new group, added to the read (which owns it from then on); NULL when out of memory. */
static ovs_group *add_new_group(ovs_read *r, ovs_column *c, ovs_version *v, bool is_delete)
{
	ovs_group *g = new_group(r, c, v, is_delete);
	if (g && !add_group(r, g)) {
		group_destroy(&g->h);
		return NULL;
	}
	return g;
}

/* Whether a[0..k) is one ascending block a[0], a[0] + 1, ... (NULL: the identity, a block from 0). */
static bool is_block(const uint32_t *a, uint32_t k)
{
	for (uint32_t i = 1; a && i < k; i++)
		if (a[i] != a[0] + i)
			return false;
	return true;
}

/* Fills a value group over elements E (query positions) with rows R (relative to the run's first
 * row), viewing the run of v that holds them. When the rows form one ascending block (the common
 * case of a query selecting consecutive rows: one prim of many, a slice of a column) the tensor is a
 * sub-view starting at the block's first row, shape = the block, and no data index map (what
 * programs written for 0.2.1 expect); only the general case carries data.index_map. The sub-view is
 * pointer arithmetic on the run's address: never a dereference, also for a column on a device.
 * Likewise prims: an ascending block of query positions is an offset, anything else an index map. */
static void fill_values(ovs_group *g, ovs_column *c, ovs_version *v, const ovs_run *run, uint32_t *E, uint32_t *R,
			uint32_t k, size_t qn)
{
	(void)qn;
	(void)v; /* held by the group since new_group */
	bool rows_block = is_block(R, k), elems_block = is_block(E, k);
	uint32_t row0 = R && k ? R[0] : 0;
	void *data = rows_block ? (char *)run->data + (size_t)row0 * c->row_bytes : run->data;
	/* on the device where the column's storage lives */
	ovs_tensor_1d(&g->tensor, data, c->schema.device, c->schema.dtype, &g->shape, &g->stride);
	g->stride = 1;
	g->g.data.tensors = &g->tensor;
	g->g.data.tensor_count = 1;
	g->g.data.mask = NULL; /* cuda_sync: set by new_group */
	g->g.prims.count = k;
	if (elems_block) {
		g->g.prims.offset = E && k ? E[0] : 0;
		g->g.prims.index_map = NULL;
		free(E);
	} else {
		g->g.prims.offset = 0;
		g->prim_index = E;
		g->g.prims.index_map = E;
	}
	if (rows_block) {
		g->shape = k;
		g->g.data.count = 0;
		g->g.data.index_map = NULL;
		free(R);
	} else {
		g->shape = run->nrows;
		g->data_index = R;
		g->g.data.count = k;
		g->g.data.index_map = R;
	}
}

/* Identity query over rows [row0, row0 + n) of one run: prims list[row0 ..), no maps. */
static void fill_run_slice(ovs_group *g, ovs_column *c, ovs_version *v, const ovs_run *run, uint32_t n)
{
	fill_values(g, c, v, run, NULL, NULL, n, n);
	g->g.prims.offset = run->row0;
}

/* Value groups for elements E with rows R (k of them, absolute rows of v): one group per run of v
 * that holds any (a version written in full has one run). Takes E and R. */
static bool add_value_groups(ovs_read *r, ovs_column *c, ovs_version *v, uint32_t *E, uint32_t *R, uint32_t k,
			     size_t qn)
{
	if (v->nruns == 1) {
		ovs_group *g = add_new_group(r, c, v, false);
		if (!g) {
			free(E);
			free(R);
			return false;
		}
		fill_values(g, c, v, &v->runs[0], E, R, k, qn);
		return true;
	}
	/* Several runs: each element's run (a cursor: consecutive elements mostly stay in one run, so
	 * the binary search runs only where they cross to another), then one pass scatters them into
	 * per-run lists in query order (a pass per run made a read of 262,144 elements over nine runs
	 * 2.4 M compares: a fifth of a 4-producer step loop's CPU). */
	uint32_t nr = v->nruns, *cnt = calloc(nr, sizeof *cnt), *at = malloc(k * sizeof *at), cur = 0;
	uint32_t **e = calloc(nr, sizeof *e), **d = calloc(nr, sizeof *d);
	bool ok = cnt && at && e && d;
	for (uint32_t i = 0; ok && i < k; i++) {
		const ovs_run *ru = &v->runs[cur];
		if (R[i] < ru->row0 || R[i] - ru->row0 >= ru->nrows)
			cur = ovs_version_run_of(v, R[i]);
		at[i] = cur;
		cnt[cur]++;
	}
	for (uint32_t ri = 0; ok && ri < nr; ri++)
		if (cnt[ri] && (!(e[ri] = malloc(cnt[ri] * sizeof **e)) || !(d[ri] = malloc(cnt[ri] * sizeof **d))))
			ok = false;
	if (ok) {
		memset(cnt, 0, nr * sizeof *cnt); /* now: entries filled per run */
		for (uint32_t i = 0; i < k; i++) {
			uint32_t ri = at[i], j = cnt[ri]++;
			e[ri][j] = E[i];
			d[ri][j] = R[i] - v->runs[ri].row0;
		}
	}
	for (uint32_t ri = 0; ok && ri < nr; ri++) {
		if (!cnt[ri])
			continue;
		ovs_group *g = add_new_group(r, c, v, false);
		if (!g) {
			ok = false;
			break;
		}
		fill_values(g, c, v, &v->runs[ri], e[ri], d[ri], cnt[ri], qn); /* takes them */
		e[ri] = d[ri] = NULL;
	}
	for (uint32_t ri = 0; e && d && ri < nr; ri++) { /* what no group took (failure) */
		free(e[ri]);
		free(d[ri]);
	}
	free(e);
	free(d);
	free(cnt);
	free(at);
	free(E);
	free(R);
	return ok;
}

/* Fills an array group: tensor i is element i's row (a view of its blob, 1-D, shape = length): host
 * memory for a CPU column, the row's place in its write's device buffer for a device column (the
 * tensors and shapes themselves are host metadata, as for every group). */
static bool fill_arrays(ovs_group *g, ovs_column *c, ovs_version *v, uint32_t *E, uint32_t *R, uint32_t k, size_t qn)
{
	g->row_tensors = calloc(k, sizeof *g->row_tensors);
	if (!g->row_tensors)
		return false;
	(void)qn;
	bool block = is_block(E, k); /* the query positions are one ascending block: an offset */
	/* v: held by the group since new_group */
	g->stride = 1;
	for (uint32_t i = 0; i < k; i++) {
		ovs_blob *b = v->blobs[R[i]];
		/* g->shape is 0: the shape of an empty row */
		ovs_tensor_1d(&g->row_tensors[i], b && b->len ? ovs_blob_bytes(b) : NULL, c->schema.device, c->schema.dtype,
			      b ? &b->shape : &g->shape, &g->stride);
	}
	g->shape = 0;
	g->g.data.tensors = g->row_tensors;
	g->g.data.tensor_count = k;
	g->g.data.count = 0;
	g->g.data.index_map = NULL; /* per-row transport: tensor i is logical element i */
	g->g.data.mask = NULL;
	g->g.prims.offset = block && k ? E[0] : 0;
	g->g.prims.count = k;
	if (block) {
		g->g.prims.index_map = NULL;
		free(E);
	} else {
		g->prim_index = E;
		g->g.prims.index_map = E;
	}
	free(R);
	return true;
}

/* The checks of a read of column c decided by its floor (loaded by the caller, before any
 * snapshot it pins) alone: WRITE_FLOOR_VIOLATION for an end above the floor with writes admitted
 * above it. *dropped = the retention frontier. Used at the call (ready queries) and in the op. */
static ovstage_api_status_t check_bounds(ovs_stage *st, ovs_column *c, const ovstage_ordinal_range_t *rg,
					 uint64_t floor, uint64_t *dropped, char *err, size_t errlen)
{
	uint64_t end = rg->end_ordinal;
	/* relaxed: a hint of admitted writes; the floor's acquire (caller) orders what it covers. */
	if (end > floor && atomic_load_explicit(&c->max_written, memory_order_relaxed) > floor) {
		ovs_err_format(err, errlen, "\"%s\": end_ordinal %llu is above the write floor %llu and the column has "
			       "unsealed writes", ovs_attr_name(st, c->name), (unsigned long long)end,
			       (unsigned long long)floor);
		return OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION;
	}
	/* acquire: pairs with the sealer's release when a version leaves retention. */
	*dropped = atomic_load_explicit(&c->dropped_through, memory_order_acquire);
	/* A range start below the retention frontier is not refused: range reads are answered from the
	 * rows' last-change ordinals (range_groups), and fail only for a selected row whose change
	 * membership or payload as of the end is no longer known. */
	return OVSTAGE_OK;
}

/* The versions a read of one column holds while it builds its groups (ovs_pin_history): the one as
 * of the end first, then older ones back to a range read's start. Not to be copied (v may point
 * into small). */
typedef struct read_pins {
	ovs_version *small[16];  /* room for a short history without an allocation */
	ovs_version **v;         /* the pinned versions, newest first: small, or malloc'd */
	size_t n;                /* entries in v */
	bool had_any;            /* the column had sealed data at all */
} read_pins;

/* Inside the grace section: finds the version as of the range's end and, for a range read, the
 * versions back to its start, and pins them all (the sealer may cut the chain meanwhile; what we
 * reach stays alive until we leave). */
static ovstage_api_status_t pin_versions(ovs_stage *st, ovs_column *c, const ovstage_ordinal_range_t *rg,
					 read_pins *p, char *err, size_t errlen)
{
	/* Room for every retained version (the retention depth bounds the walk), plus one. */
	size_t cap = (size_t)st->store.retention + 2;
	p->v = cap <= sizeof p->small / sizeof *p->small ? p->small : malloc(cap * sizeof *p->v);
	p->n = 0;
	p->had_any = false;
	if (!p->v) {
		ovs_err_format(err, errlen, "out of memory pinning versions");
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	p->n = ovs_pin_history(&st->store.grace, c, rg->end_ordinal, rg->has_start_ordinal, rg->start_ordinal, p->v,
			       cap, &p->had_any);
	return OVSTAGE_OK;
}

/* Drops what pin_versions pinned (the groups hold their own references), but for one pin of
 * `given` (NULL: none), which a group took over (ovs_read.gift). */
static void unpin_versions(read_pins *p, const ovs_version *given)
{
	for (size_t i = 0; i < p->n; i++) {
		if (given && p->v[i] == given) {
			given = NULL;
			continue;
		}
		ovs_version_unref(p->v[i]);
	}
	if (p->v != p->small)
		free(p->v);
}

/* The checks of a read against the state it pinned: the bounds (check_bounds); for a column with
 * sealed data but none as of the end, when that state left retention, the newest version (pinned
 * into p). *v = the version to read, or NULL: zero groups. */
static ovstage_api_status_t check_pinned(ovs_stage *st, ovs_column *c, const ovstage_ordinal_range_t *rg,
					 uint64_t floor, read_pins *p, ovs_version **v, char *err, size_t errlen)
{
	*v = NULL;
	uint64_t dropped = 0;
	ovstage_api_status_t s = check_bounds(st, c, rg, floor, &dropped, err, errlen);
	if (s != OVSTAGE_OK || !p->had_any)
		return s; /* refused, or no sealed data: zero groups */
	if (p->n) {
		*v = p->v[0];
		return OVSTAGE_OK;
	}
	/* (Range reads go through read_range.) The state as of the end left retention: the newest
	 * sealed version, as 0.2.1 answers every latest read (its latest reads never fail OUT_OF_RANGE,
	 * and the standard consumer — poll the floor, read latest at it — must not fail when seals
	 * overtake it between the poll and the read). */
	if (dropped) {
		ovs_version *latest = NULL;
		ovs_pin_latest(&st->store.grace, &c, 1, &latest);
		if (latest) {
			p->v[p->n++] = latest; /* room: pin_versions sized v for retention + 2 */
			*v = latest;
		}
	}
	return OVSTAGE_OK; /* the column had no data at the end, or *v is the newest */
}

/* The query's cached rows in column c, built on first use once every prim has a row (NULL until). */
static const ovs_rowmap *read_rowmap(ovs_read *r, ovs_column *c)
{
	size_t qn = r->q->count;
	const ovs_rowmap *map = ovs_query_rowmap(r->q, c);
	if (map || !qn)
		return map;
	ovs_rowmap *m = ovs_rowmap_alloc(c, (uint32_t)qn);
	bool complete = m != NULL;
	for (size_t i = 0; complete && i < qn; i++) {
		m->rows[i] = ovs_column_row(c, r->q->paths[i]);
		complete = m->rows[i] != UINT32_MAX;
	}
	if (complete)
		return ovs_query_rowmap_install(r->q, m);
	free(m);
	return NULL;
}

/* The row of query element i in c (UINT32_MAX: none), from the cached map when there is one. */
static uint32_t read_row_of(const ovs_read *r, ovs_column *c, const ovs_rowmap *map, size_t i)
{
	return map ? map->rows[i] : ovs_column_row(c, r->q->paths[i]);
}

/* The elements a read of one column answers, in query order. */
typedef struct read_elems {
	uint32_t *E;   /* query positions of the elements with values */
	uint32_t *R;   /* their rows in the version read */
	uint32_t k;    /* entries in E and R */
	uint32_t *DE;  /* range reads: query positions of the elements deleted in the range; else NULL */
	uint32_t kd;   /* entries in DE */
} read_elems;

/* Room for qn elements (and as many deleted ones when deletes). False when out of memory (then
 * nothing is held). */
static bool elems_alloc(read_elems *el, size_t qn, bool deletes)
{
	size_t cap = qn ? qn : 1;
	*el = (read_elems){ .E = malloc(cap * sizeof *el->E), .R = malloc(cap * sizeof *el->R),
			    .DE = deletes ? malloc(cap * sizeof *el->DE) : NULL };
	if (el->E && el->R && (!deletes || el->DE))
		return true;
	free(el->E);
	free(el->R);
	free(el->DE);
	return false;
}

/* The groups of the listed elements: value groups (one per run of v, or one array group), then one
 * is_delete group for the deleted ones. Takes the lists (freed, or owned by the groups). */
static bool emit_groups(ovs_read *r, ovs_column *c, ovs_version *v, read_elems *el, size_t qn)
{
	bool ok = true;
	if (el->k && !c->schema.is_array) {
		ok = add_value_groups(r, c, v, el->E, el->R, el->k, qn); /* takes E and R */
	} else if (el->k) {
		ovs_group *g = add_new_group(r, c, v, false);
		ok = g && fill_arrays(g, c, v, el->E, el->R, el->k, qn);
		if (!ok) { /* g took nothing: E and R are freed here; the failed read drops g */
			free(el->E);
			free(el->R);
		}
	} else {
		free(el->E);
		free(el->R);
	}
	if (ok && el->kd) {
		ovs_group *g = add_new_group(r, c, v, true);
		ok = g != NULL;
		if (g) {
			g->prim_index = el->DE;
			g->g.prims.offset = 0;
			g->g.prims.count = el->kd;
			g->g.prims.index_map = el->DE;
			el->DE = NULL;
		}
	}
	free(el->DE);
	*el = (read_elems){ 0 };
	return ok;
}

/* An array column whose first rows are the query, in order: element i is row i. */
static bool identity_arrays(ovs_group *g, ovs_column *c, ovs_version *v, size_t qn)
{
	uint32_t *E = malloc(qn * sizeof *E), *R = malloc(qn * sizeof *R);
	for (uint32_t i = 0; E && R && i < qn; i++)
		E[i] = R[i] = i;
	if (!E || !R || !fill_arrays(g, c, v, E, R, (uint32_t)qn, qn)) {
		free(E);
		free(R);
		return false;
	}
	return true;
}

/* The query is rows 0..qn-1 of the column and all hold values: views, O(1) per run. */
static bool identity_groups(ovs_read *r, ovs_column *c, ovs_version *v, size_t qn)
{
	ovs_group *g = add_new_group(r, c, v, false);
	if (!g)
		return false;
	if (c->schema.is_array)
		return identity_arrays(g, c, v, qn);
	/* One group per run the query's rows reach (one for a column written in full). */
	static const ovs_run empty = { 0, 0, NULL };
	const ovs_run *r0 = v->nruns ? &v->runs[0] : &empty;
	fill_run_slice(g, c, v, r0, r0->nrows < qn ? r0->nrows : (uint32_t)qn);
	for (uint32_t ri = 1; ri < v->nruns && v->runs[ri].row0 < qn; ri++) {
		ovs_group *g2 = add_new_group(r, c, v, false);
		if (!g2)
			return false;
		uint32_t rend = v->runs[ri].row0 + v->runs[ri].nrows;
		fill_run_slice(g2, c, v, &v->runs[ri], (rend < qn ? rend : (uint32_t)qn) - v->runs[ri].row0);
	}
	return true;
}

/* The query's rows are a few blocks (map->pieces) that all hold values in v: one view per block and
 * run of v it crosses, prims.offset its first query position, no index maps, no per-prim work. */
static bool piece_groups(ovs_read *r, ovs_column *c, ovs_version *v, const ovs_rowmap *map)
{
	for (uint32_t p = 0; p < map->npieces; p++) {
		uint32_t e0 = map->pieces[p].elem, r0 = map->pieces[p].row;
		uint32_t len = (p + 1 < map->npieces ? map->pieces[p + 1].elem : map->n) - e0;
		for (uint32_t a = r0, ri = ovs_version_run_of(v, r0); a < r0 + len; ri++) {
			const ovs_run *ru = &v->runs[ri];
			uint32_t end = ru->row0 + ru->nrows < r0 + len ? ru->row0 + ru->nrows : r0 + len;
			ovs_group *g = add_new_group(r, c, v, false);
			if (!g)
				return false;
			ovs_run slice = { a, end - a, (char *)ru->data + (size_t)(a - ru->row0) * c->row_bytes };
			fill_values(g, c, v, &slice, NULL, NULL, end - a, end - a);
			g->g.prims.offset = e0 + (a - r0);
			a = end;
		}
	}
	return true;
}

/* A latest read of v: the query's elements whose rows hold values in v (a view of v's runs when the
 * query is the column's first rows in order, or a few blocks of them). */
static bool latest_groups(ovs_read *r, ovs_column *c, ovs_version *v)
{
	size_t qn = r->q->count;
	const ovs_rowmap *map = read_rowmap(r, c);
	if (map && map->identity && !v->present && qn <= v->rows)
		return identity_groups(r, c, v, qn);
	if (map && map->npieces && map->n / map->npieces >= 64 && !v->present && map->max_row < v->rows &&
	    !c->schema.is_array && v->nruns)
		return piece_groups(r, c, v, map);
	read_elems el;
	if (!elems_alloc(&el, qn, false))
		return false;
	for (size_t i = 0; i < qn; i++) {
		uint32_t row = read_row_of(r, c, map, i);
		if (row < v->rows && ovs_version_present(v, row)) {
			el.E[el.k] = (uint32_t)i;
			el.R[el.k++] = row;
		}
	}
	return emit_groups(r, c, v, &el, qn);
}

/* What a range read pinned (ovs_pin_range): its versions, newest first (v[0] is the version as of
 * the end when asof, else the newest version), then the unfolded change sets below them. Not to be
 * copied (the arrays may point into small and small_sets). */
typedef struct range_pins {
	ovs_range_pins pin;
	ovs_version *small[16];
	ovs_chset *small_sets[16];
} range_pins;

/* Which pinned change sets changed a row, and the fold for the rest (lastchange.h). Set j is
 * version j's for j < n, else unfolded set j - n. */
typedef struct range_hist {
	const ovs_range_pins *p;
	size_t nsets;        /* n + p->nsets */
	uint64_t *bits[16];  /* per pinned set (the first 16): a bitmap of its listed rows, or NULL (a
	                      * run, every row, no rows, or looked up in the list itself) */
	ovs_lcview fold;     /* values at or above the oldest pinned ordinal are stale */
	bool stale;          /* a fold value read was stale: pin again */
} range_hist;

static const ovs_chset *hist_set(const range_hist *h, size_t j)
{
	return j < h->p->n ? h->p->v[j]->cs : h->p->sets[j - h->p->n];
}

/* Whether pinned set j changed row r. */
static bool hist_changed(const range_hist *h, size_t j, uint32_t r)
{
	const ovs_chset *u = hist_set(h, j);
	if (j < 16 && h->bits[j])
		return r < u->rows && ((h->bits[j][r / 64] >> (r % 64)) & 1);
	return ovs_chset_has(u, r);
}

/* The ordinal at which row r last changed (a value written or deleted) as of pinned set i: that
 * of the newest pinned set at or below it that changed r, else the fold's; 0: never. */
static uint64_t hist_last_change(range_hist *h, size_t i, uint32_t r)
{
	for (size_t j = i; j < h->nsets; j++)
		if (hist_changed(h, j, r))
			return hist_set(h, j)->ordinal;
	return ovs_lc_fold_get(&h->fold, r, &h->stale);
}

/* Bitmaps for the pinned sets whose rows a query of qn elements looks up often enough that one
 * pass over them beats a binary search per element. False when out of memory. */
static bool hist_init(range_hist *h, ovs_column *c, const ovs_range_pins *p, size_t qn)
{
	memset(h, 0, sizeof *h);
	h->p = p;
	h->nsets = p->n + p->nsets;
	/* after ovs_pin_range's acquire load of `folded` (lastchange.h) */
	ovs_lc_view(&c->lcfold, hist_set(h, h->nsets - 1)->ordinal, &h->fold);
	for (size_t j = 0; j < h->nsets && j < 16; j++) {
		const ovs_chset *u = hist_set(h, j);
		size_t words = ((size_t)u->rows + 63) / 64;
		if (u->all_changed || u->run || !u->n || (uint64_t)qn * 16 < words + u->n)
			continue;
		if (!(h->bits[j] = calloc(words, sizeof *h->bits[j])))
			return false;
		const uint32_t *list = ovs_chset_list(u);
		for (uint32_t k = 0; k < u->n; k++)
			h->bits[j][list[k] / 64] |= (uint64_t)1 << (list[k] % 64);
	}
	return true;
}

static void hist_fini(range_hist *h)
{
	for (size_t j = 0; j < 16; j++)
		free(h->bits[j]);
}

/* The OUT_OF_RANGE of a range read with b older than every pinned version, for query element i
 * (row changed after b at lc): its payload as of b is gone (known), or whether it changed in [a, b]
 * is (not known). */
static ovstage_api_status_t range_gone(ovs_read *r, ovs_column *c, size_t i, uint64_t lc, const ovs_version *old,
				       bool known, char *err, size_t errlen)
{
	uint64_t a = r->range.start_ordinal, b = r->range.end_ordinal;
	ovx_string_t path = ovs_pd_path_string(r->st->pd, r->q->paths[i]);
	if (known)
		ovs_err_format(err, errlen, "\"%s\": %.*s (query element %zu) changed in [%llu, %llu] and again at "
			       "ordinal %llu, after the range end: its payload as of %llu is no longer retained "
			       "(oldest preserved is %llu)",
			       ovs_attr_name(r->st, c->name), (int)path.length, path.ptr ? path.ptr : "", i,
			       (unsigned long long)a, (unsigned long long)b, (unsigned long long)lc,
			       (unsigned long long)b, (unsigned long long)old->ordinal);
	else
		ovs_err_format(err, errlen, "\"%s\": %.*s (query element %zu) changed at ordinal %llu, after the range "
			       "end %llu, and whether it also changed in [%llu, %llu] is no longer retained "
			       "(history through ordinal %llu was reclaimed; oldest preserved is %llu)",
			       ovs_attr_name(r->st, c->name), (int)path.length, path.ptr ? path.ptr : "", i,
			       (unsigned long long)lc, (unsigned long long)b, (unsigned long long)a,
			       (unsigned long long)b, (unsigned long long)old->base_ordinal,
			       (unsigned long long)old->ordinal);
	return OVSTAGE_ERROR_OUT_OF_RANGE;
}

/* Status of range_groups when the fold moved past the pinned chain while it read (pin again). */
#define RANGE_STALE ((ovstage_api_status_t)-1000)

/* A range read [a, b] answered from the rows' last changes (hist_last_change: the pinned versions'
 * changed rows, then the column's fold of those that left retention): a row is selected when it
 * last changed (a value written or deleted) at an ordinal in [a, b] as of b.
 *  - While the version as of b is pinned (p->asof), that is exact for every a: values as of b, the
 *    deleted rows in an is_delete group.
 *  - Otherwise (b is older than every retained version) as 0.2.1 answers: payloads of the newest
 *    version; a row that did not change after b is decided exactly by its last change in the
 *    newest version; a selected row that changed again after b fails OUT_OF_RANGE (its payload as
 *    of b is gone). For a row that changed after b, whether it also changed in [a, b] comes from the
 *    oldest version pinned, u (built on the version at D = u's base ordinal; nothing in the column
 *    changed in (D, u)): its last change there if that is <= b; not selected if it last changed at
 *    u itself and a > D (or u is the column's first version); else unknown, and the read fails
 *    OUT_OF_RANGE naming the prim rather than guess. */
static ovstage_api_status_t range_groups(ovs_read *r, ovs_column *c, const ovs_range_pins *p, char *err, size_t errlen)
{
	size_t qn = r->q->count;
	uint64_t a = r->range.start_ordinal, b = r->range.end_ordinal;
	ovs_version *v = p->v[0], *old = p->v[p->n - 1]; /* v: the version whose payloads the groups view */
	const ovs_rowmap *map = read_rowmap(r, c);
	range_hist h;
	read_elems el;
	bool ok = hist_init(&h, c, p, qn);
	if (!ok || !elems_alloc(&el, qn, true)) {
		hist_fini(&h);
		ovs_err_format(err, errlen, "out of memory building read groups");
		return OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	ovstage_api_status_t s = OVSTAGE_OK;
	for (size_t i = 0; s == OVSTAGE_OK && i < qn; i++) {
		uint32_t row = read_row_of(r, c, map, i);
		if (row >= v->rows)
			continue; /* no row in the version: created after it (or never) */
		uint64_t lc = hist_last_change(&h, 0, row);
		if (!lc)
			continue; /* never changed */
		if (!p->asof && lc > b) {
			/* changed after b: did it also change in [a, b]? */
			bool selected, known = true;
			uint64_t lo = row < old->rows ? hist_last_change(&h, p->n - 1, row) : 0;
			uint64_t D = old->base_ordinal;
			if (row >= old->rows || !lo)
				selected = false; /* created after old, which is newer than b */
			else if (lo <= b)
				selected = lo >= a;
			else if (lo == old->ordinal && (!D || a > D))
				selected = false; /* its previous change is at or below D < a */
			else
				selected = known = false;
			if (!known || selected)
				s = h.stale ? RANGE_STALE : range_gone(r, c, i, lc, old, known, err, errlen);
			continue;
		}
		if (lc < a)
			continue; /* last changed before the range */
		if (ovs_version_present(v, row)) {
			el.E[el.k] = (uint32_t)i;
			el.R[el.k++] = row;
		} else {
			el.DE[el.kd++] = (uint32_t)i;
		}
	}
	if (s == OVSTAGE_OK && h.stale)
		s = RANGE_STALE;
	hist_fini(&h);
	if (s != OVSTAGE_OK) {
		free(el.E);
		free(el.R);
		free(el.DE);
		return s;
	}
	if (emit_groups(r, c, v, &el, qn))
		return OVSTAGE_OK;
	ovs_err_format(err, errlen, "out of memory building read groups");
	return OVSTAGE_ERROR_OUT_OF_MEMORY;
}

/* acquire/release: the hook and whatever the test prepared for it are published together. */
static _Atomic(ovs_read_range_hook_fn) g_range_hook;

void ovs_read_set_range_hook(ovs_read_range_hook_fn fn)
{
	atomic_store_explicit(&g_range_hook, fn, memory_order_release);
}

/* Unpins what ovs_pin_range pinned (the sets only when it pinned them). */
static void range_unpin(ovs_range_pins *p)
{
	for (size_t i = 0; i < p->n && p->n <= p->cap; i++)
		ovs_unpin(p->v[i]);
	for (size_t i = 0; i < p->nsets && p->nsets <= p->setcap; i++)
		ovs_chset_unref(p->sets[i]);
}

/* Room for what the last ovs_pin_range counted (and a little more). False when out of memory. */
static bool range_room(range_pins *rp)
{
	ovs_range_pins *p = &rp->pin;
	if (p->n > p->cap) {
		if (p->v != rp->small)
			free(p->v);
		p->cap = p->n + 4;
		if (!(p->v = malloc(p->cap * sizeof *p->v)))
			return false;
	}
	if (p->nsets > p->setcap) {
		if (p->sets != rp->small_sets)
			free(p->sets);
		p->setcap = p->nsets + 4;
		if (!(p->sets = malloc(p->setcap * sizeof *p->sets)))
			return false;
	}
	return true;
}

/* A range read of one column: the bounds, then the change sets below retention folded when it
 * gets the fold flag (else the holder folds them and this read pins them), then the versions and
 * sets it needs (ovs_pin_range), pinned again when the fold moved past them meanwhile (a reader
 * slower than a retention's worth of seals: rare, and each retry pins a newer chain). */
static ovstage_api_status_t read_range(ovs_read *r, ovs_column *c, uint64_t floor, char *err, size_t errlen)
{
	uint64_t dropped;
	ovstage_api_status_t s = check_bounds(r->st, c, &r->range, floor, &dropped, err, errlen);
	if (s != OVSTAGE_OK)
		return s;
	ovs_lc_fold_column(&r->st->store, c);
	range_pins rp;
	ovs_range_pins *p = &rp.pin;
	memset(p, 0, sizeof *p);
	p->v = rp.small;
	p->cap = sizeof rp.small / sizeof *rp.small;
	p->sets = rp.small_sets;
	p->setcap = sizeof rp.small_sets / sizeof *rp.small_sets;
	for (unsigned tries = 0;; tries++) {
		ovs_pin_range(&r->st->store.grace, c, r->range.end_ordinal, p);
		if (p->n > p->cap || p->nsets > p->setcap) { /* more than the room: make room, again */
			range_unpin(p);
			if (range_room(&rp))
				continue;
			ovs_err_format(err, errlen, "out of memory pinning versions");
			s = OVSTAGE_ERROR_OUT_OF_MEMORY;
			p->n = p->nsets = 0;
			break;
		}
		ovs_read_range_hook_fn hook = atomic_load_explicit(&g_range_hook, memory_order_acquire);
		if (hook)
			hook();
		s = p->n ? range_groups(r, c, p, err, errlen) : OVSTAGE_OK;
		range_unpin(p);
		if (s != RANGE_STALE)
			break;
		if (tries == 1000) {
			ovs_err_format(err, errlen, "\"%s\": the column's history moved past the read %u times "
				       "while it ran", ovs_attr_name(r->st, c->name), tries);
			s = OVSTAGE_ERROR_OUT_OF_RANGE;
			break;
		}
	}
	if (p->v != rp.small)
		free(p->v);
	if (p->sets != rp.small_sets)
		free(p->sets);
	return s;
}

static ovstage_api_status_t read_latest_pinned(ovs_read *r, ovs_column *c, uint64_t floor, read_pins *p, char *err,
					       size_t errlen);

/* Reads one column into groups: pins its history, checks the bounds against what it pinned, then
 * builds the groups of a latest or a range read. */
static ovstage_api_status_t read_column(ovs_read *r, ovs_column *c, char *err, size_t errlen)
{
	/* Floor first (acquire), then the snapshot: the seal publishes the snapshot before the floor. */
	uint64_t floor = atomic_load_explicit(&c->floor, memory_order_acquire);
	if (r->range.has_start_ordinal)
		return read_range(r, c, floor, err, errlen);
	read_pins p;
	ovstage_api_status_t s = pin_versions(r->st, c, &r->range, &p, err, errlen);
	if (s != OVSTAGE_OK)
		return s;
	return read_latest_pinned(r, c, floor, &p, err, errlen);
}

/* A latest read of one column from what was pinned for it (p: its version as of the end, if any;
 * dropped here): the checks against the floor loaded before the pin, then the groups. */
static ovstage_api_status_t read_latest_pinned(ovs_read *r, ovs_column *c, uint64_t floor, read_pins *p, char *err,
					       size_t errlen)
{
	ovs_version *v;
	ovstage_api_status_t s = check_pinned(r->st, c, &r->range, floor, p, &v, err, errlen);
	r->gift = v; /* pinned once in p: the first group viewing it takes that reference */
	if (s == OVSTAGE_OK && v && !latest_groups(r, c, v)) {
		ovs_err_format(err, errlen, "out of memory building read groups");
		s = OVSTAGE_ERROR_OUT_OF_MEMORY;
	}
	const ovs_version *given = v && !r->gift ? v : NULL;
	r->gift = NULL;
	unpin_versions(p, given);
	return s;
}

/* ---- derived built-ins: usd-path, usd-parent (path ids), usd-children (arrays of path ids) ---- */

typedef enum derived_kind { D_PATH, D_PARENT, D_CHILDREN } derived_kind;

static bool derived_kind_of(ovs_stage *st, ovx_token_t t, derived_kind *k)
{
	/* The stage interned the three names at creation (st->derived, in D_* order) and a token names
	 * one string, so comparing tokens decides without looking the name up; by name only if one of
	 * them could not be interned (0). */
	if (st->derived[0] && st->derived[1] && st->derived[2]) {
		for (int i = 0; i < 3; i++)
			if (t == st->derived[i]) {
				*k = (derived_kind)i;
				return true;
			}
		return false;
	}
	const char *n = ovs_attr_name(st, t);
	if (!strcmp(n, "usd-path"))
		*k = D_PATH;
	else if (!strcmp(n, "usd-parent"))
		*k = D_PARENT;
	else if (!strcmp(n, "usd-children"))
		*k = D_CHILDREN;
	else
		return false;
	return true;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : (x > y);
}

/* Synthesizes one group from current structure (latest reads only: no change history, not gated by
 * the floor): the query's existing prims in order. */
static ovstage_api_status_t read_derived(ovs_read *r, ovx_token_t t, derived_kind kind, char *err, size_t errlen)
{
	ovs_stage *st = r->st;
	ovs_pd *pd = st->pd;
	size_t qn = r->q->count;
	if (r->range.has_start_ordinal)
		return OVSTAGE_OK; /* derived names carry no change history: zero groups */
	uint32_t *E = malloc((qn ? qn : 1) * sizeof *E);
	uint64_t *vals = NULL;
	int64_t *shapes = NULL;
	uint32_t k = 0;
	if (!E)
		goto oom;
	for (size_t i = 0; i < qn; i++)
		if (ovs_prim_exists(&st->store, r->q->paths[i]) && (kind != D_PARENT || ovs_pd_path_parent(pd, r->q->paths[i])))
			E[k++] = (uint32_t)i;
	if (!k) {
		free(E);
		return OVSTAGE_OK;
	}
	ovs_group *g = group_alloc();
	if (!g)
		goto oom;
	ovs_hobj_init(&g->h, OVS_H_GROUP, group_destroy);
	g->q = r->q;
	ovs_hobj_ref(&r->q->h); /* the query holds the list (see ovs_group.q) */
	g->list = r->q->list;
	g->g.attribute = t;
	g->g.ordinal = r->range.end_ordinal;
	g->g.is_array = kind == D_CHILDREN;
	g->g.semantic = kind == D_CHILDREN ? OVSTAGE_SEMANTIC_RELATIONSHIP_PATH_ID : OVSTAGE_SEMANTIC_NONE;
	g->g.prims.list = r->q->list;
	g->g.prims.count = k;
	g->stride = 1;
	DLDataType u64 = { kDLUInt, 64, 1 };
	DLDevice cpu = { kDLCPU, 0 }; /* synthesized values live in host memory */
	if (!add_group(r, g)) {
		group_destroy(&g->h);
		goto oom;
	}
	bool identity = k == qn;
	if (identity)
		free(E);
	else {
		g->prim_index = E;
		g->g.prims.index_map = E;
	}
	E = NULL;
	if (kind != D_CHILDREN) {
		vals = malloc(k * sizeof *vals);
		if (!vals)
			goto oom;
		for (uint32_t i = 0; i < k; i++) {
			ovx_primpath_t p = r->q->paths[g->prim_index ? g->prim_index[i] : i];
			vals[i] = kind == D_PATH ? p : ovs_pd_path_parent(pd, p);
		}
		g->synth = vals;
		g->shape = k;
		ovs_tensor_1d(&g->tensor, vals, cpu, u64, &g->shape, &g->stride);
		g->g.data.tensors = &g->tensor;
		g->g.data.tensor_count = 1;
		return OVSTAGE_OK;
	}
	/* usd-children: the existing prims whose parent is each query prim, by path id. */
	size_t npaths = ovs_pd_path_count(pd);
	uint64_t *kids = malloc((npaths + 1) * sizeof *kids);
	size_t nk = 0;
	if (!kids)
		goto oom;
	for (ovx_primpath_t p = 1; p <= npaths; p++)
		if (ovs_prim_exists(&st->store, p))
			kids[nk++] = ((uint64_t)ovs_pd_path_parent(pd, p) << 32) | (uint32_t)p; /* (parent, child) */
	qsort(kids, nk, sizeof *kids, cmp_u64);
	vals = malloc((nk + 1) * sizeof *vals);
	shapes = malloc(k * sizeof *shapes);
	g->row_tensors = calloc(k, sizeof *g->row_tensors);
	if (!vals || !shapes || !g->row_tensors) {
		free(kids);
		goto oom;
	}
	g->synth = vals;
	g->synth_shapes = shapes;
	size_t at = 0;
	for (uint32_t i = 0; i < k; i++) {
		uint64_t parent = r->q->paths[g->prim_index ? g->prim_index[i] : i];
		/* binary search the first (parent, *) pair */
		size_t lo = 0, hi = nk;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if ((kids[mid] >> 32) < parent)
				lo = mid + 1;
			else
				hi = mid;
		}
		size_t start = at;
		for (size_t j = lo; j < nk && (kids[j] >> 32) == parent; j++)
			vals[at++] = (uint32_t)kids[j];
		shapes[i] = (int64_t)(at - start);
		ovs_tensor_1d(&g->row_tensors[i], shapes[i] ? &vals[start] : NULL, cpu, u64, &shapes[i], &g->stride);
	}
	free(kids);
	g->g.data.tensors = g->row_tensors;
	g->g.data.tensor_count = k;
	return OVSTAGE_OK;
oom:
	free(E);
	ovs_err_format(err, errlen, "out of memory synthesizing \"%s\"", ovs_attr_name(st, t));
	return OVSTAGE_ERROR_OUT_OF_MEMORY;
}

/* A latest read of named columns, READ_PIN_BATCH at a time: the columns' floors (each before the
 * snapshot its pin loads, as read_column), one grace section that pins them all
 * (ovs_pin_history_many), then each name's groups in the caller's order. As read_column per name
 * would, less two locked RMWs and a section per column. */
#define READ_PIN_BATCH 32
static ovstage_api_status_t read_named_latest(ovs_read *r, char *err, size_t errlen)
{
	ovs_stage *st = r->st;
	for (size_t b0 = 0; b0 < r->nattrs; b0 += READ_PIN_BATCH) {
		size_t nb = r->nattrs - b0 < READ_PIN_BATCH ? r->nattrs - b0 : READ_PIN_BATCH;
		ovs_column *cs[READ_PIN_BATCH];
		uint64_t fl[READ_PIN_BATCH];
		ovs_version *pv[READ_PIN_BATCH];
		bool had[READ_PIN_BATCH];
		int dk[READ_PIN_BATCH]; /* a derived name's kind, or -1 */
		for (size_t j = 0; j < nb; j++) {
			size_t i = b0 + j;
			derived_kind k;
			cs[j] = NULL;
			dk[j] = derived_kind_of(st, r->attrs[i], &k) ? (int)k : -1;
			if (dk[j] >= 0)
				continue;
			ovs_column *c = r->cols[i] ? r->cols[i] : ovs_column_find(&st->store, r->attrs[i]);
			if (!c || !atomic_load_explicit(&c->has_schema, memory_order_acquire))
				continue; /* missing attribute: zero groups, not an error */
			cs[j] = c;
			/* Floor first (acquire), then the snapshot: the seal publishes the snapshot before
			 * the floor. */
			fl[j] = atomic_load_explicit(&c->floor, memory_order_acquire);
		}
		ovs_pin_history_many(&st->store.grace, cs, nb, r->range.end_ordinal, pv, had);
		ovstage_api_status_t s = OVSTAGE_OK;
		for (size_t j = 0; j < nb; j++) {
			if (s != OVSTAGE_OK) { /* failed: drop the pins left */
				ovs_unpin(pv[j]);
				continue;
			}
			if (dk[j] >= 0) {
				s = read_derived(r, r->attrs[b0 + j], (derived_kind)dk[j], err, errlen);
			} else if (cs[j]) {
				read_pins p;
				p.v = p.small;
				p.n = pv[j] != NULL;
				p.small[0] = pv[j];
				p.had_any = had[j];
				s = read_latest_pinned(r, cs[j], fl[j], &p, err, errlen);
			}
		}
		if (s != OVSTAGE_OK)
			return s;
	}
	return OVSTAGE_OK;
}

static void read_job(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)w;
	ovs_read *r = arg;
	ovs_stage *st = r->st;
	char err[512];
	if (r->attrs && !r->range.has_start_ordinal) {
		ovstage_api_status_t s = read_named_latest(r, err, sizeof err);
		if (s != OVSTAGE_OK) {
			ovs_op_fail(run, s, "read_attributes: %s", err);
			ovs_opstate_finish(&r->state, s);
			return;
		}
	} else if (r->attrs) {
		for (size_t i = 0; i < r->nattrs; i++) {
			derived_kind dk;
			if (derived_kind_of(st, r->attrs[i], &dk)) {
				ovstage_api_status_t s = read_derived(r, r->attrs[i], dk, err, sizeof err);
				if (s != OVSTAGE_OK) {
					ovs_op_fail(run, s, "read_attributes: %s", err);
					ovs_opstate_finish(&r->state, s);
					return;
				}
				continue;
			}
			ovs_column *c = r->cols[i] ? r->cols[i] : ovs_column_find(&st->store, r->attrs[i]);
			if (!c || !atomic_load_explicit(&c->has_schema, memory_order_acquire))
				continue; /* missing attribute: zero groups, not an error */
			ovstage_api_status_t s = read_column(r, c, err, sizeof err);
			if (s != OVSTAGE_OK) {
				ovs_op_fail(run, s, "read_attributes: %s", err);
				ovs_opstate_finish(&r->state, s);
				return;
			}
		}
	} else {
		size_t nc = atomic_load_explicit(&st->store.ncols, memory_order_acquire);
		ovs_column **cols = atomic_load_explicit(&st->store.cols, memory_order_acquire);
		for (size_t i = 0; i < nc; i++) {
			if (!atomic_load_explicit(&cols[i]->has_schema, memory_order_acquire))
				continue;
			ovstage_api_status_t s = read_column(r, cols[i], err, sizeof err);
			if (s != OVSTAGE_OK) {
				ovs_op_fail(run, s, "read_attributes: %s", err);
				ovs_opstate_finish(&r->state, s);
				return;
			}
		}
	}
	ovs_opstate_finish(&r->state, OVSTAGE_OK);
}

/* A ready query's read is validated at the call (spec 2.11): the bounds of every column it reads
 * (every column with a schema when attrs is NULL; derived names are not floor-gated). The op checks
 * again against the state it pins. Sets the last error. */
static ovstage_api_status_t check_bounds_at_call(ovs_stage *st, ovs_column *const *found, size_t nattrs,
						 const ovstage_ordinal_range_t *rg)
{
	size_t nc = atomic_load_explicit(&st->store.ncols, memory_order_acquire);
	ovs_column **cols = atomic_load_explicit(&st->store.cols, memory_order_acquire);
	size_t n = found ? nattrs : nc;
	char err[512];
	for (size_t i = 0; i < n; i++) {
		ovs_column *c = found ? found[i] : cols[i];
		if (!c || !atomic_load_explicit(&c->has_schema, memory_order_acquire))
			continue; /* missing or derived: zero groups or synthesized, never refused */
		uint64_t dropped;
		uint64_t floor = atomic_load_explicit(&c->floor, memory_order_acquire);
		ovstage_api_status_t s = check_bounds(st, c, rg, floor, &dropped, err, sizeof err);
		if (s != OVSTAGE_OK)
			return ovs_err_set(s, "read_attributes: %s", err);
	}
	return OVSTAGE_OK;
}

/* True when a latest read of attrs through q (a resolved query) will take the identity fast path,
 * as far as the call can tell: each is a fixed-size column (its schema installed; on the CPU or a
 * device alike: a read issues no device work, its groups view the sealed chunks where they live)
 * whose row map for q is cached and is the identity, and there are at most READ_INLINE_MAX_ATTRS of
 * them (the check costs two radix loads and a row-map lookup per column; 100 columns' worth is a few
 * microseconds, where the hand-off of bench/gpu's 100-column step read cost ~100 us of wake-up
 * and contention). Such a read costs O(runs) per column whatever the query's
 * size, so it runs in the call like a small one: handing a 16 M-prim read to a worker made its
 * latency that of waking the worker (~1 us when one was spinning, ~10 us when all slept: latest
 * reads of 64 / 256 MiB columns were bimodal, 1.0-1.7 or 11-12 us, on 2 cores). A column whose
 * latest version has holes (deleted prims) still takes the O(prims) path, which only the job
 * finds out; it then runs serially in the call, as it would have on the worker. */
static bool read_identity_at_call(ovs_query *q, ovs_column *const *found, size_t nattrs,
				  const ovstage_ordinal_range_t *rg)
{
	if (rg->has_start_ordinal || !found || !nattrs || nattrs > READ_INLINE_MAX_ATTRS)
		return false;
	for (size_t i = 0; i < nattrs; i++) {
		ovs_column *c = found[i];
		/* acquire: the schema fields below were published with has_schema */
		if (!c || !atomic_load_explicit(&c->has_schema, memory_order_acquire) || c->schema.is_array)
			return false;
		const ovs_rowmap *m = ovs_query_rowmap(q, c);
		if (!m || !m->identity)
			return false;
	}
	return true;
}

/* Frees a read that was never submitted (its attrs block and the struct; nothing else is held yet). */
static void read_free_unsubmitted(ovs_read *r)
{
	if (r->attrs != r->attrs_small)
		free(r->attrs);
	free(r);
}

static void read_put(void *arg, bool ran)
{
	ovs_read *r = arg;
	if (!ran) /* cancelled, or a dependency failed */
		ovs_opstate_finish(&r->state, OVSTAGE_ERROR_OP_FAILED);
	ovs_hobj_unref(&r->h);
}

ovstage_enqueue_result_t ovs_read_attributes(ovstage_context_t *ctx, ovstage_query_handle_t handle,
					     const ovx_token_t *attrs, size_t attr_count, ovstage_ordinal_range_t range,
					     ovstage_read_handle_t *out_read_handle)
{
	ovs_err_clear();
	ovs_stage *st = ovs_stage_of(ctx);
	if (out_read_handle)
		*out_read_handle = OVSTAGE_INVALID_READ_HANDLE;
	if (!st || !out_read_handle)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s is NULL",
						!st ? "instance" : "out_read_handle"));
	if (attr_count && !attrs)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "attrs is NULL with attr_count = %zu",
						attr_count));
	if (range.has_start_ordinal && range.start_ordinal > range.end_ordinal)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
						"range.start_ordinal %llu > range.end_ordinal %llu",
						(unsigned long long)range.start_ordinal,
						(unsigned long long)range.end_ordinal));
	for (size_t i = 0; i < attr_count; i++) {
		if (!ovs_pd_token_is_valid(st->pd, attrs[i]))
			return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
							"attrs[%zu] = %llu is not a valid token", i,
							(unsigned long long)attrs[i]));
	}
	ovs_query *q = ovs_query_get(st, handle);
	if (!q)
		return ovs_rejected(OVSTAGE_ERROR_INVALID_HANDLE);
	ovs_read *r = calloc(1, sizeof *r);
	if (r && attr_count) {
		if (attr_count <= READ_SMALL_ATTRS) {
			r->attrs = r->attrs_small;
			r->cols = r->cols_small;
		} else if ((r->attrs = malloc(attr_count * (sizeof *r->attrs + sizeof *r->cols)))) {
			r->cols = (ovs_column **)(void *)(r->attrs + attr_count); /* the same block */
		}
	}
	if (!r || (attr_count && !r->attrs)) {
		free(r);
		ovs_query_put(q);
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory"));
	}
	/* Each column looked up once, here: the checks below and the op use what was found (a column,
	 * once published, is that token's for the stage's life; one not found yet is looked up again by
	 * the op). Three lookups per column were ~18,000 instructions of a 100-column read. */
	for (size_t i = 0; i < attr_count; i++)
		r->cols[i] = ovs_column_find(&st->store, attrs[i]);
	if (ovs_query_ready(q)) {
		ovstage_api_status_t s = check_bounds_at_call(st, attr_count ? r->cols : NULL, attr_count, &range);
		if (s != OVSTAGE_OK) {
			read_free_unsubmitted(r);
			ovs_query_put(q);
			return ovs_rejected(s);
		}
	}
	ovs_hobj_init(&r->h, OVS_H_READ, read_destroy);
	r->st = st;
	r->q = q;
	if (attr_count)
		memcpy(r->attrs, attrs, attr_count * sizeof *attrs);
	r->nattrs = attr_count;
	r->range = range;
	atomic_init(&r->cursor, 0);
	ovs_opstate_init(&r->state);
	ovs_hobj_ref(&r->h); /* the op's reference */
	jobs_id after = q->op;
	/* A read of a resolved query costs O(1) per column on the identity fast path and O(prims)
	 * otherwise: small ones and identity ones run in the call (no hand-off to a worker and back,
	 * which costs more than the read); big ones go to the workers. q->count is stable once the
	 * query resolved. */
	bool small = !after && ((attr_count ? attr_count : 8) * q->count <= READ_INLINE_MAX_ELEMS ||
				read_identity_at_call(q, attr_count ? r->cols : NULL, attr_count, &range));
	ovs_op_desc d = { .fn = read_job, .arg = r, .cleanup = read_put, .after = after ? &after : NULL,
			   .after_count = after ? 1 : 0, .run_inline = small, .wrap = &r->wrap };
	ovstage_enqueue_result_t res = ovs_op_submit(st, &d);
	if (res.status != OVSTAGE_OK) {
		ovs_hobj_unref(&r->h);
		return res;
	}
	r->op = res.op_index; /* read by fetch only after the handle is returned */
	uint64_t id = ovs_handle_insert(&st->handles, &r->h);
	ovs_hobj_unref(&r->h);
	if (!id) {
		ovs_release_op(ctx, res.op_index);
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory"));
	}
	*out_read_handle = id;
	return res;
}

static ovstage_api_status_t fetch_next(ovs_stage *st, ovstage_read_handle_t read_handle, ovstage_timeout_ns_t timeout,
				       ovstage_read_group_t *out_group);

ovstage_api_status_t ovs_fetch_read_next(ovstage_context_t *ctx, ovstage_read_handle_t read_handle,
					 ovstage_timeout_ns_t timeout, ovstage_read_group_t *out_group)
{
	ovs_err_clear();
	ovs_stage *st = ovs_stage_of(ctx);
	if (!st || !out_group)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s is NULL", !st ? "instance" : "out_group");
	ovstage_api_status_t s = fetch_next(st, read_handle, timeout, out_group);
	if (s != OVSTAGE_OK) /* a fetched group is copied out whole: zeroed only when there is none */
		memset(out_group, 0, sizeof *out_group);
	return s;
}

static ovstage_api_status_t fetch_next(ovs_stage *st, ovstage_read_handle_t read_handle, ovstage_timeout_ns_t timeout,
				       ovstage_read_group_t *out_group)
{
	ovs_hobj *h = ovs_handle_get(&st->handles, read_handle, OVS_H_READ);
	if (!h)
		return ovs_handle_invalid(&st->handles, read_handle, "read handle");
	ovs_read *r = (ovs_read *)h;
	ovstage_api_status_t s = ovs_opstate_wait(st, &r->state, r->op, timeout);
	if (s != OVSTAGE_OK) {
		ovs_hobj_unref(h);
		if (s == OVSTAGE_ERROR_TIMEOUT)
			return s;
		return ovs_err_set(s, "the read failed (%s); see wait_op / get_last_op_error", ovs_status_name(s));
	}
	/* relaxed: each fetch claims a distinct index; the groups were published by the op's completion,
	 * which our wait acquired. */
	size_t i = atomic_fetch_add_explicit(&r->cursor, 1, memory_order_relaxed);
	if (i >= r->ngroups) {
		ovs_hobj_unref(h);
		return OVSTAGE_ERROR_END_OF_ITERATION;
	}
	ovs_group *g = r->groups[i];
	r->groups[i] = NULL; /* owned by the handle table from now on */
	/* the read's reference on the group becomes the table's (no add and drop of one more) */
	uint64_t id = ovs_handle_insert_take(&st->handles, &g->h);
	ovs_hobj_unref(h);
	if (!id) {
		ovs_hobj_unref(&g->h); /* still ours: nobody can reach it */
		return ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory registering a read group");
	}
	g->g.read_group_id = id;
	*out_group = g->g;
	return OVSTAGE_OK;
}

ovstage_api_status_t ovs_release_group(ovstage_context_t *ctx, const ovstage_read_group_t *group)
{
	ovs_err_clear();
	ovs_stage *st = ovs_stage_of(ctx);
	if (!st || !group)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s is NULL", !st ? "instance" : "group");
	ovs_hobj *h = ovs_handle_remove(&st->handles, group->read_group_id, OVS_H_GROUP);
	if (!h)
		return ovs_handle_invalid(&st->handles, group->read_group_id, "read group");
	ovs_hobj_unref(h);
	return OVSTAGE_OK;
}

ovstage_enqueue_result_t ovs_release_read(ovstage_context_t *ctx, ovstage_read_handle_t read_handle)
{
	ovs_err_clear();
	ovs_stage *st = ovs_stage_of(ctx);
	if (!st)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "instance is NULL"));
	/* Unfetched groups go with the read; fetched ones live until release_group. */
	return ovs_release_handle_op(st, read_handle, OVS_H_READ, "read handle");
}
