/*
 * filter.c — filter queries: the call validates and compiles the filter and reserves the handle;
 * one op resolves it against the latest committed state when it runs. Semantics and decisions:
 * filter.h.
 *
 * Concurrency
 *  - The call builds an ovs_query with no prims, submits the resolving op (which holds a reference
 *    to the query), stores the op id in q->op and only then inserts the query into the handle
 *    table, so every consumer that can look the handle up sees q->op (the table's shard mutex
 *    publishes it) and orders itself after the op (reads: `after = q->op`; fetch_query_result:
 *    ovs_opstate_wait on q->state).
 *  - The op writes q->list / q->paths / q->count once and then finishes q->state (release). Jobs
 *    that depend on the op acquire its completion (the jobs dependency edge is acq_rel), and
 *    fetch_query_result acquires q->state.done; see the comment on ovs_query in query.h.
 *  - The op reads the prim table and path dictionary lock-free, and pins the latest sealed version
 *    of every column it tests from one snapshot (ovs_pin_latest, grace.h), so a
 *    concurrent seal can neither free nor recycle what it reads. All tested columns are pinned from
 *    the same snapshot: the value tests see one consistent sealed state.
 */
#include "filter.h"

#include <ovstage/ovstage_ext.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "exec.h"
#include "filter_value.h"
#include "ops.h"

/* ---- compiled predicates ----------------------------------------------------------------------- */

typedef enum fkind {
	F_HAS_COL,           /* sealed presence in a column */
	F_HAS_ALL,           /* HAS usd-path: every prim */
	F_HAS_PARENT,        /* HAS usd-parent: every prim but the root */
	F_HAS_CHILDREN,      /* HAS usd-children: prims with an existing child */
	F_PATH_IN,           /* usd-path IN */
	F_PATH_PREFIX,       /* usd-path PREFIX */
	F_PARENT_IN,         /* usd-parent IN */
	F_CHILDREN_CONTAINS, /* usd-children CONTAINS */
	F_TYPE_IN,           /* usd-prim-type IN */
	F_SCHEMAS_CONTAINS,  /* usd-schemas CONTAINS (any of the values) */
	F_VALUE,             /* a value comparison on a scalar column (filter_value.h; an extension) */
	F_OR                 /* OVSTAGE_FILTER_OP_EXT_OR: separates AND groups (an extension) */
} fkind;

typedef struct fpred {
	fkind kind;          /* what it tests */
	ovx_token_t attr;    /* the attribute (F_HAS_COL, F_TYPE_IN: the column's name) */
	uint64_t *ids;       /* sorted distinct path ids (IN / CONTAINS) or type tokens (F_TYPE_IN) */
	size_t nids;         /* entries in ids */
	char **pfx;          /* F_PATH_PREFIX: copies of the prefixes */
	size_t *pfxlen;      /* their lengths */
	size_t npfx;         /* entries */
	ovs_fvalue val;      /* F_VALUE: the comparison */
	/* execution state */
	ovs_column *col;     /* F_HAS_COL / F_TYPE_IN / F_VALUE: the column, NULL if it does not exist */
	ovs_version *v;      /* its latest sealed version (pinned), NULL = no sealed data */
	uint64_t *parents;   /* F_CHILDREN_CONTAINS: parents of the value paths that exist, sorted */
	size_t nparents;     /* entries */
} fpred;

typedef struct fop {
	ovs_stage *st;       /* the stage */
	ovs_query *q;        /* the query it resolves (reference held) */
	fpred *p;            /* predicates (AND) */
	size_t np;           /* entries */
} fop;

typedef enum builtin {
	B_NONE,
	B_PATH,
	B_PARENT,
	B_CHILDREN,
	B_PRIM_TYPE,
	B_SCHEMAS,
	B_ACTIVE
} builtin;

static builtin classify(const char *name)
{
	static const struct {
		const char *s;
		builtin b;
	} names[] = { { "usd-path", B_PATH },	       { "usd-parent", B_PARENT },   { "usd-children", B_CHILDREN },
		      { "usd-prim-type", B_PRIM_TYPE }, { "usd-schemas", B_SCHEMAS }, { "usd-active", B_ACTIVE } };
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (!strcmp(name, names[i].s))
			return names[i].b;
	return B_NONE;
}

static const char *op_name(ovstage_filter_op_t op)
{
	static const char *const n[] = { "HAS", "IN", "CONTAINS", "PREFIX", "LT", "LE", "GT", "GE" };
	if (op == OVSTAGE_FILTER_OP_EXT_OR)
		return "OR";
	return (unsigned)op < sizeof n / sizeof n[0] ? n[op] : "?";
}

static void fpred_fini(fpred *p)
{
	free(p->ids);
	for (size_t i = 0; i < p->npfx; i++)
		free(p->pfx[i]);
	free(p->pfx);
	free(p->pfxlen);
	free(p->parents);
	ovs_fvalue_fini(&p->val);
	if (p->v)
		ovs_version_unref(p->v);
	memset(p, 0, sizeof *p);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Sorts and drops duplicates; returns the new count. */
static size_t sort_unique(uint64_t *v, size_t n)
{
	if (n < 2)
		return n;
	qsort(v, n, sizeof *v, cmp_u64);
	size_t k = 1;
	for (size_t i = 1; i < n; i++)
		if (v[i] != v[k - 1])
			v[k++] = v[i];
	return k;
}

static bool in_set(const uint64_t *v, size_t n, uint64_t x)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid] < x)
			lo = mid + 1;
		else if (v[mid] > x)
			hi = mid;
		else
			return true;
	}
	return false;
}

/* Absolute path syntax of path_dictionary.h: "/" or "/a/b" (no trailing '/', no "//", no NUL). */
static bool path_syntax_ok(const char *s, size_t n)
{
	if (n == 0 || s[0] != '/')
		return false;
	if (n == 1)
		return true;
	if (s[n - 1] == '/')
		return false;
	for (size_t i = 1; i < n; i++)
		if (s[i] == '\0' || (s[i] == '/' && s[i - 1] == '/'))
			return false;
	return true;
}

#define SUPPORTED_MATRIX                                                                                     \
	"supported: HAS on any attribute; usd-path IN / PREFIX; usd-parent IN; usd-children CONTAINS; "       \
	"usd-prim-type IN; IN / LT / LE / GT / GE on an attribute's scalar column; OR between groups"

/* Validates predicate i and compiles it into *p (zeroed by the caller). Sets the last error. */
static ovstage_api_status_t compile(ovs_stage *st, const ovstage_predicate_t *pr, size_t i, fpred *p)
{
	char what[64];
	snprintf(what, sizeof what, "filter.predicates[%zu].attribute", i);
	if (pr->op == OVSTAGE_FILTER_OP_EXT_OR) { /* a group separator: its attribute is not looked at */
		p->kind = F_OR;
		return OVSTAGE_OK;
	}
	ovx_token_t t;
	ovstage_api_status_t s = ovs_resolve_attr(st, pr->attribute, false, &t, what);
	if (s != OVSTAGE_OK)
		return s;
	p->attr = t;
	const char *name = ovs_attr_name(st, t);
	if ((unsigned)pr->op > (unsigned)OVSTAGE_FILTER_OP_GE && pr->op != OVSTAGE_FILTER_OP_EXT_OR)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
				   "filter.predicates[%zu].op = %d is not an ovstage_filter_op_t value", i, (int)pr->op);
	if (pr->value_count && !pr->values)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
				   "filter.predicates[%zu].values is NULL with value_count = %zu", i, pr->value_count);
	for (size_t j = 0; j < pr->value_count; j++)
		if (pr->values[j].length && !pr->values[j].ptr)
			return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
					   "filter.predicates[%zu].values[%zu] has NULL ptr and length %zu", i, j,
					   pr->values[j].length);
	builtin b = classify(name);
	const char *opn = op_name(pr->op);
	if (b == B_ACTIVE)
		return ovs_err_set(OVSTAGE_ERROR_NOT_SUPPORTED,
				   "filter.predicates[%zu]: attribute \"usd-active\" (op %s) is not supported (it is "
				   "slated for removal)", i, opn);
	if (b == B_NONE && (pr->op == OVSTAGE_FILTER_OP_IN || pr->op >= OVSTAGE_FILTER_OP_LT)) {
		p->kind = F_VALUE; /* a value comparison on an attribute's own column (an extension) */
		return ovs_fvalue_compile(pr, i, name, &p->val);
	}
	if (pr->op >= OVSTAGE_FILTER_OP_LT)
		return ovs_err_set(OVSTAGE_ERROR_NOT_SUPPORTED,
				   "filter.predicates[%zu]: %s on \"%s\" is not supported: ordering comparisons apply "
				   "to attributes' own scalar columns, not to derived built-ins (" SUPPORTED_MATRIX ")",
				   i, opn, name);
	bool path_values = false, type_values = false;
	switch (pr->op) {
	case OVSTAGE_FILTER_OP_HAS:
		p->kind = b == B_PATH ? F_HAS_ALL : b == B_PARENT ? F_HAS_PARENT : b == B_CHILDREN ? F_HAS_CHILDREN
												   : F_HAS_COL;
		return OVSTAGE_OK; /* values are ignored */
	case OVSTAGE_FILTER_OP_IN:
		if (b == B_PATH)
			p->kind = F_PATH_IN, path_values = true;
		else if (b == B_PARENT)
			p->kind = F_PARENT_IN, path_values = true;
		else if (b == B_PRIM_TYPE)
			p->kind = F_TYPE_IN, type_values = true;
		else
			goto unsupported;
		break;
	case OVSTAGE_FILTER_OP_CONTAINS:
		if (b == B_CHILDREN) {
			p->kind = F_CHILDREN_CONTAINS, path_values = true;
		} else if (b == B_SCHEMAS) {
			p->kind = F_SCHEMAS_CONTAINS, type_values = true;
		} else {
			goto unsupported;
		}
		break;
	case OVSTAGE_FILTER_OP_PREFIX:
		if (b != B_PATH)
			goto unsupported;
		p->kind = F_PATH_PREFIX;
		break;
	default:
		goto unsupported;
	}
	size_t n = pr->value_count;
	if (p->kind == F_PATH_PREFIX) {
		p->pfx = calloc(n ? n : 1, sizeof *p->pfx);
		p->pfxlen = calloc(n ? n : 1, sizeof *p->pfxlen);
		if (!p->pfx || !p->pfxlen)
			goto oom;
		for (size_t j = 0; j < n; j++) {
			size_t len = pr->values[j].length;
			p->pfx[j] = malloc(len ? len : 1);
			if (!p->pfx[j])
				goto oom;
			p->npfx = j + 1;
			if (len)
				memcpy(p->pfx[j], pr->values[j].ptr, len);
			p->pfxlen[j] = len;
		}
		return OVSTAGE_OK;
	}
	p->ids = malloc((n ? n : 1) * sizeof *p->ids);
	if (!p->ids)
		goto oom;
	for (size_t j = 0; j < n; j++) {
		const char *v = pr->values[j].ptr;
		size_t len = pr->values[j].length;
		int shown = len > 200 ? 200 : (int)len;
		if (path_values) {
			if (!path_syntax_ok(v, len))
				return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
						   "filter.predicates[%zu].values[%zu] = \"%.*s\" is not a valid absolute "
						   "prim path (%s on \"%s\")", i, j, shown, v ? v : "", opn, name);
			ovx_primpath_t id = ovs_pd_intern_path(st->pd, v, len);
			if (!id)
				goto oom;
			p->ids[p->nids++] = id;
		} else if (type_values) {
			if (len == 0)
				continue; /* an empty type name matches nothing */
			if (memchr(v, '\0', len))
				return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
						   "filter.predicates[%zu].values[%zu] contains a NUL byte (a type name is a "
						   "token)", i, j);
			ovx_token_t tk = ovs_pd_intern_token(st->pd, v, len);
			if (!tk)
				goto oom;
			p->ids[p->nids++] = tk;
		}
	}
	p->nids = sort_unique(p->ids, p->nids);
	return OVSTAGE_OK;
unsupported:
	return ovs_err_set(OVSTAGE_ERROR_NOT_SUPPORTED, "filter.predicates[%zu]: %s on \"%s\" is not supported (" SUPPORTED_MATRIX ")",
			   i, opn, name);
oom:
	return ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory compiling filter.predicates[%zu]", i);
}

/* ---- execution --------------------------------------------------------------------------------- */

/* acquire/release: the hook and whatever the test prepared for it are published together. */
static _Atomic(ovs_filter_hook_fn) g_hook;

void ovs_filter_set_test_hook(ovs_filter_hook_fn fn)
{
	/* release: pairs with the acquire load in filter_job. */
	atomic_store_explicit(&g_hook, fn, memory_order_release);
}

static inline bool bit_get(const uint64_t *bm, uint32_t r)
{
	return (bm[r / 64] >> (r % 64)) & 1;
}

/* The row of `path` in a pinned version if it holds a value there, else UINT32_MAX. */
static uint32_t sealed_row(ovs_column *c, ovs_version *v, ovx_primpath_t path)
{
	if (!c || !v)
		return UINT32_MAX;
	uint32_t row = ovs_column_row(c, path);
	if (row >= v->rows || !ovs_version_present(v, row))
		return UINT32_MAX;
	return row;
}

/* Path order: bytewise with '/' below every other byte, shorter first on a common prefix. */
typedef struct fent {
	const char *s;       /* path string */
	size_t len;          /* its length */
	ovx_primpath_t id;   /* path id */
} fent;

static int hier_cmp(const void *a, const void *b)
{
	const fent *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	for (size_t i = 0; i < n; i++) {
		unsigned char cx = (unsigned char)x->s[i], cy = (unsigned char)y->s[i];
		if (cx == cy)
			continue;
		int kx = cx == '/' ? 0 : (int)cx + 1, ky = cy == '/' ? 0 : (int)cy + 1;
		return kx - ky;
	}
	return x->len < y->len ? -1 : x->len > y->len;
}

typedef struct fctx {
	ovs_stage *st;
	const uint64_t *has_child; /* bitmap over path ids 0..n: prim has an existing child (or NULL) */
} fctx;

static bool eval(const fctx *cx, const fpred *p, ovx_primpath_t id, ovx_string_t *str)
{
	ovs_pd *pd = cx->st->pd;
	switch (p->kind) {
	case F_HAS_COL:
		return sealed_row(p->col, p->v, id) != UINT32_MAX;
	case F_HAS_ALL:
		return true;
	case F_HAS_PARENT:
		return id != OVS_PD_ROOT;
	case F_HAS_CHILDREN:
		return bit_get(cx->has_child, (uint32_t)id);
	case F_PATH_IN:
		return in_set(p->ids, p->nids, id);
	case F_PARENT_IN:
		return in_set(p->ids, p->nids, ovs_pd_path_parent(pd, id));
	case F_CHILDREN_CONTAINS:
		return in_set(p->parents, p->nparents, id);
	case F_PATH_PREFIX:
		if (!str->ptr)
			*str = ovs_pd_path_string(pd, id);
		for (size_t j = 0; j < p->npfx; j++)
			if (p->pfxlen[j] <= str->length && !memcmp(str->ptr, p->pfx[j], p->pfxlen[j]))
				return true;
		return false;
	case F_TYPE_IN: {
		uint32_t row = sealed_row(p->col, p->v, id);
		if (row == UINT32_MAX)
			return false;
		uint64_t tk;
		memcpy(&tk, ovs_version_row_ptr(p->v, p->col->row_bytes, row), sizeof tk);
		return in_set(p->ids, p->nids, tk);
	}
	case F_VALUE: {
		uint32_t row = sealed_row(p->col, p->v, id);
		return row != UINT32_MAX &&
		       ovs_fvalue_test(&p->val, &p->col->schema, ovs_version_row_ptr(p->v, p->col->row_bytes, row));
	}
	case F_OR:
		return false; /* not evaluated: matches() splits the groups at it */
	case F_SCHEMAS_CONTAINS: {
		uint32_t row = sealed_row(p->col, p->v, id);
		if (row == UINT32_MAX || !p->v->blobs || !p->v->blobs[row])
			return false;
		const ovs_blob *b = p->v->blobs[row];
		for (uint64_t k = 0; k < b->len; k++) {
			uint64_t tk;
			memcpy(&tk, b->data + k * sizeof tk, sizeof tk);
			if (in_set(p->ids, p->nids, tk))
				return true;
		}
		return false;
	}
	}
	return false;
}

/* Whether prim id matches: the OR of the AND groups that F_OR predicates separate (one group when
 * there is none). A group stops at its first false predicate. */
static bool matches(const fctx *cx, const fop *o, ovx_primpath_t id, ovx_string_t *str)
{
	bool group = true;
	for (size_t i = 0; i < o->np; i++) {
		if (o->p[i].kind == F_OR) {
			if (group)
				return true;
			group = true;
		} else if (group) {
			group = eval(cx, &o->p[i], id, str);
		}
	}
	return group;
}

/* ---- the scan: every existing prim against the filter, in blocks of path ids on the workers ---- */

#define SCAN_BLOCK 65536u /* path ids per block (a block's matches are one array) */

typedef struct scan_ctx {
	const fctx *cx;          /* predicates' shared state */
	const fop *o;            /* the filter */
	size_t n;                /* path ids 1..n are candidates */
	fent **blk;              /* per block: its matches (malloc'd), in id order */
	size_t *cnt;             /* per block: entries */
	_Atomic bool oom;        /* a block ran out of memory */
} scan_ctx;

static void scan_block(scan_ctx *sc, size_t b)
{
	size_t lo = b * SCAN_BLOCK + 1, hi = lo + SCAN_BLOCK - 1 < sc->n ? lo + SCAN_BLOCK - 1 : sc->n;
	size_t k = 0, cap = 0;
	fent *ents = NULL;
	ovs_stage *st = sc->cx->st;
	for (ovx_primpath_t id = lo; id <= hi; id++) {
		if (!ovs_prim_exists(&st->store, id))
			continue;
		ovx_string_t str = { NULL, 0 };
		if (!matches(sc->cx, sc->o, id, &str))
			continue;
		if (k == cap) {
			size_t nc = cap ? cap * 2 : 64;
			fent *ne = realloc(ents, nc * sizeof *ne);
			if (!ne) {
				/* relaxed: read after the parallel for's join */
				atomic_store_explicit(&sc->oom, true, memory_order_relaxed);
				break;
			}
			ents = ne;
			cap = nc;
		}
		if (!str.ptr)
			str = ovs_pd_path_string(st->pd, id);
		ents[k++] = (fent){ str.ptr, str.length, id };
	}
	sc->blk[b] = ents;
	sc->cnt[b] = k;
}

static void scan_range(void *p, size_t lo, size_t hi)
{
	for (size_t b = lo / SCAN_BLOCK; b * SCAN_BLOCK < hi; b++)
		scan_block(p, b);
}

/* The matched prims in *out (malloc'd) and their count, or false when out of memory. Blocks run on
 * the workers (predicates only read pinned versions and lock-free tables); the join orders their
 * stores before the merge. */
static bool scan(jobs_worker *w, const fctx *cx, const fop *o, size_t n, fent **out, size_t *nout)
{
	size_t nb = n / SCAN_BLOCK + 1;
	scan_ctx sc = { cx, o, n, calloc(nb, sizeof(fent *)), calloc(nb, sizeof(size_t)), false };
	bool ok = sc.blk && sc.cnt;
	if (ok) {
		ovs_exec x = ovs_exec_cpu(w);
		ovs_parallel_for(&x, nb * SCAN_BLOCK, SCAN_BLOCK, SCAN_BLOCK, scan_range, &sc);
		ok = !atomic_load_explicit(&sc.oom, memory_order_relaxed);
	}
	size_t total = 0;
	for (size_t b = 0; ok && b < nb; b++)
		total += sc.cnt[b];
	fent *all = ok ? malloc((total ? total : 1) * sizeof *all) : NULL;
	size_t k = 0;
	for (size_t b = 0; sc.blk && b < nb; b++) {
		if (all && sc.cnt[b])
			memcpy(all + k, sc.blk[b], sc.cnt[b] * sizeof *all);
		k += sc.cnt ? sc.cnt[b] : 0;
		free(sc.blk[b]);
	}
	free(sc.blk);
	free(sc.cnt);
	*out = all;
	*nout = all ? total : 0;
	return all != NULL;
}

/* Pins the latest sealed version of every predicate's column, all from one snapshot. */
static bool pin_predicates(ovs_stage *st, fop *o)
{
	ovs_column *small_c[16], **cols = o->np <= 16 ? small_c : malloc(o->np * sizeof *cols);
	ovs_version *small_v[16], **vers = o->np <= 16 ? small_v : malloc(o->np * sizeof *vers);
	bool ok = cols && vers;
	if (ok) {
		for (size_t i = 0; i < o->np; i++)
			cols[i] = o->p[i].col;
		ovs_pin_latest(&st->store.grace, cols, o->np, vers);
		for (size_t i = 0; i < o->np; i++)
			o->p[i].v = vers[i];
	}
	if (cols != small_c)
		free(cols);
	if (vers != small_v)
		free(vers);
	return ok;
}

static void filter_job(jobs_worker *w, void *arg, jobs_run *run)
{
	fop *o = arg;
	ovs_stage *st = o->st;
	ovs_query *q = o->q;
	/* acquire: pairs with ovs_filter_set_test_hook. */
	ovs_filter_hook_fn hook = atomic_load_explicit(&g_hook, memory_order_acquire);
	if (hook)
		hook();
	ovstage_api_status_t s = OVSTAGE_OK;
	char err[512] = "";
	uint64_t *has_child = NULL;
	fent *ents = NULL;
	ovx_primpath_t *ids = NULL;
	size_t n = ovs_pd_path_count(st->pd); /* path ids are 1..n (a racy snapshot: later paths are
					       * not candidates, as if interned after the op ran) */
	bool need_children = false;

	/* Columns, then their latest sealed versions, all from one snapshot. */
	for (size_t i = 0; i < o->np; i++) {
		fpred *p = &o->p[i];
		if (p->kind == F_HAS_COL || p->kind == F_TYPE_IN || p->kind == F_SCHEMAS_CONTAINS || p->kind == F_VALUE)
			p->col = ovs_column_find(&st->store, p->attr);
		need_children |= p->kind == F_HAS_CHILDREN;
	}
	if (!pin_predicates(st, o)) {
		ovs_err_format(err, sizeof err, "out of memory pinning the predicates' columns");
		s = OVSTAGE_ERROR_OUT_OF_MEMORY;
		goto done;
	}
	for (size_t i = 0; i < o->np; i++) {
		fpred *p = &o->p[i];
		if ((p->kind != F_TYPE_IN && p->kind != F_SCHEMAS_CONTAINS && p->kind != F_VALUE) || !p->v)
			continue;
		/* acquire: the schema was published (release) before any version of the column. */
		if (!atomic_load_explicit(&p->col->has_schema, memory_order_acquire))
			continue;
		const ovs_schema *sc = &p->col->schema;
		if (sc->device.device_type == kDLCUDA) { /* values filters read on the host (docs/api.md) */
			ovs_err_format(err, sizeof err, "a filter that reads values cannot use a column on CUDA "
				       "device %d in this version", (int)sc->device.device_id);
			s = OVSTAGE_ERROR_NOT_SUPPORTED;
			goto done;
		}
		if (p->kind == F_VALUE) {
			if (!ovs_fvalue_schema_ok(sc, ovs_attr_name(st, p->attr), err, sizeof err)) {
				s = OVSTAGE_ERROR_NOT_SUPPORTED;
				goto done;
			}
			continue;
		}
		if (p->kind == F_SCHEMAS_CONTAINS) {
			/* usd-schemas: token-id arrays (ragged uint64 rows) */
			if (!sc->is_array || sc->dtype.bits != 64 || sc->dtype.lanes != 1 ||
			    (sc->dtype.code != kDLUInt && sc->dtype.code != kDLInt)) {
				ovs_err_format(err, sizeof err, "\"usd-schemas\" CONTAINS: the column is not an array of "
					       "64-bit tokens (code %u, bits %u, lanes %u%s)", (unsigned)sc->dtype.code,
					       (unsigned)sc->dtype.bits, (unsigned)sc->dtype.lanes,
					       sc->is_array ? "" : ", fixed");
				s = OVSTAGE_ERROR_NOT_SUPPORTED;
				goto done;
			}
			continue;
		}
		if (sc->is_array || sc->dtype.bits != 64 || sc->dtype.lanes != 1 ||
		    (sc->dtype.code != kDLUInt && sc->dtype.code != kDLInt)) {
			ovs_err_format(err, sizeof err, "\"usd-prim-type\" IN: the column is not a fixed 64-bit token "
				       "column (code %u, bits %u, lanes %u%s)", (unsigned)sc->dtype.code,
				       (unsigned)sc->dtype.bits, (unsigned)sc->dtype.lanes, sc->is_array ? ", array" : "");
			s = OVSTAGE_ERROR_NOT_SUPPORTED;
			goto done;
		}
	}

	/* Structure-derived sets (prim table at execution). */
	for (size_t i = 0; i < o->np; i++) {
		fpred *p = &o->p[i];
		if (p->kind != F_CHILDREN_CONTAINS)
			continue;
		p->parents = malloc((p->nids ? p->nids : 1) * sizeof *p->parents);
		if (!p->parents)
			goto oom;
		for (size_t j = 0; j < p->nids; j++)
			if (ovs_prim_exists(&st->store, p->ids[j]))
				p->parents[p->nparents++] = ovs_pd_path_parent(st->pd, p->ids[j]);
		p->nparents = sort_unique(p->parents, p->nparents);
	}
	if (need_children) {
		has_child = calloc(n / 64 + 1, sizeof *has_child);
		if (!has_child)
			goto oom;
		for (ovx_primpath_t id = 2; id <= n; id++) {
			if (!ovs_prim_exists(&st->store, id))
				continue;
			ovx_primpath_t par = ovs_pd_path_parent(st->pd, id);
			if (par && par <= n)
				has_child[par / 64] |= (uint64_t)1 << (par % 64);
		}
	}

	/* Candidates: every existing prim; the OR of AND groups of the predicates. */
	fctx cx = { st, has_child };
	size_t k = 0;
	if (!scan(w, &cx, o, n, &ents, &k))
		goto oom;
	if (k > UINT32_MAX) {
		ovs_err_format(err, sizeof err, "the filter matched %zu prims (at most 2^32-1)", k);
		s = OVSTAGE_ERROR_NOT_SUPPORTED;
		goto done;
	}
	if (k > 1)
		qsort(ents, k, sizeof *ents, hier_cmp);
	ids = malloc((k ? k : 1) * sizeof *ids);
	if (!ids)
		goto oom;
	for (size_t i = 0; i < k; i++)
		ids[i] = ents[i].id;
	ovx_primpath_list_t list = ovs_pd_list_create(st->pd, ids, k);
	if (!list)
		goto oom;
	/* Publication: plain stores, released by ovs_opstate_finish below and by the job's completion
	 * (see query.h). Nobody reads these fields before one of those. */
	q->list = list;
	ovs_pd_list_view(st->pd, list, &q->paths, &q->count);
	goto done;
oom:
	ovs_err_format(err, sizeof err, "out of memory evaluating the filter");
	s = OVSTAGE_ERROR_OUT_OF_MEMORY;
done:
	for (size_t i = 0; i < o->np; i++)
		if (o->p[i].v) {
			ovs_version_unref(o->p[i].v);
			o->p[i].v = NULL;
		}
	free(has_child);
	free(ents);
	free(ids);
	if (s != OVSTAGE_OK)
		ovs_op_fail(run, s, "query: %s", err);
	ovs_opstate_finish(&q->state, s);
}

static void fop_free(void *arg, bool ran)
{
	fop *o = arg;
	if (!ran) /* cancelled before it ran: consumers see a failed query */
		ovs_opstate_finish(&o->q->state, OVSTAGE_ERROR_OP_FAILED);
	for (size_t i = 0; i < o->np; i++)
		fpred_fini(&o->p[i]);
	free(o->p);
	ovs_query_put(o->q);
	free(o);
}

ovstage_enqueue_result_t ovs_filter_submit(ovs_stage *st, const ovstage_filter_t *filter, const ovx_token_t *attrs,
					   size_t attr_count, ovstage_query_handle_t *out)
{
	if (attr_count && !attrs)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "attrs is NULL with attr_count = %zu",
						attr_count));
	for (size_t i = 0; i < attr_count; i++)
		if (!ovs_pd_token_is_valid(st->pd, attrs[i]))
			return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
							"attrs[%zu] = %llu is not a token of this instance's path "
							"dictionary", i, (unsigned long long)attrs[i]));
	size_t np = filter ? filter->count : 0;
	if (np && !filter->predicates)
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
						"filter->predicates is NULL with filter->count = %zu", np));
	fop *o = calloc(1, sizeof *o);
	if (o)
		o->p = calloc(np ? np : 1, sizeof *o->p);
	if (!o || !o->p) {
		free(o);
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory preparing a query"));
	}
	o->st = st;
	ovstage_api_status_t s = OVSTAGE_OK;
	for (size_t i = 0; i < np && s == OVSTAGE_OK; i++) {
		s = compile(st, &filter->predicates[i], i, &o->p[i]);
		o->np = i + 1;
		/* an OR separator needs a predicate on each side */
		if (s == OVSTAGE_OK && o->p[i].kind == F_OR && (i == 0 || i + 1 == np || o->p[i - 1].kind == F_OR))
			s = ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
					"filter.predicates[%zu]: OR (OVSTAGE_FILTER_OP_EXT_OR) needs a predicate before and "
					"after it (an empty group)", i);
	}
	ovs_query *q = s == OVSTAGE_OK ? ovs_query_new(st) : NULL;
	if (s == OVSTAGE_OK && q && attr_count) {
		q->scope = malloc(attr_count * sizeof *q->scope);
		if (q->scope)
			for (size_t i = 0; i < attr_count; i++) {
				size_t j = 0;
				while (j < q->nscope && q->scope[j] != attrs[i])
					j++;
				if (j == q->nscope)
					q->scope[q->nscope++] = attrs[i];
			}
	}
	if (s == OVSTAGE_OK && (!q || (attr_count && !q->scope)))
		s = ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory preparing a query");
	if (s != OVSTAGE_OK) {
		for (size_t i = 0; i < o->np; i++)
			fpred_fini(&o->p[i]);
		free(o->p);
		free(o);
		ovs_query_put(q);
		return ovs_rejected(s);
	}
	q->filtered = true;
	o->q = q;
	ovs_hobj_ref(&q->h); /* the op's reference, dropped by fop_free */
	ovs_op_desc d = { .fn = filter_job, .arg = o, .cleanup = fop_free };
	ovstage_enqueue_result_t r = ovs_op_submit(st, &d);
	if (r.status != OVSTAGE_OK) {
		ovs_query_put(q);
		return r;
	}
	/* Set before the handle exists: every consumer that looks the handle up sees it. The op body
	 * never reads q->op. */
	q->op = r.op_index;
	uint64_t id = ovs_handle_insert(&st->handles, &q->h);
	ovs_query_put(q); /* the table holds it now (or nobody but the op) */
	if (!id) {
		ovs_release_op((ovstage_context_t *)(void *)st, r.op_index);
		return ovs_rejected(ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory registering a query"));
	}
	*out = id;
	return r;
}

/* ---- query results ----------------------------------------------------------------------------- */

bool ovs_filter_result_attrs(ovs_stage *st, ovs_query *q, ovx_token_t **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	ovs_column **cols = NULL;
	ovs_version **vers = NULL;
	size_t nc = 0;
	bool ok = true;
	/* Pin the latest sealed version of each candidate column (one snapshot); test the matched prims
	 * afterwards. A snapshot holds at most the columns that exist now. */
	size_t cap = q->scope ? q->nscope : atomic_load_explicit(&st->store.ncols, memory_order_acquire);
	cols = malloc((cap ? cap : 1) * sizeof *cols);
	vers = malloc((cap ? cap : 1) * sizeof *vers);
	if (!cols || !vers)
		ok = false;
	else
		nc = ovs_pin_all_latest(&st->store.grace, q->scope, q->scope ? q->nscope : 0, cols, vers, cap);
	ovx_token_t *res = ok ? malloc((nc ? nc : 1) * sizeof *res) : NULL;
	if (!res)
		ok = false;
	for (size_t c = 0; c < nc; c++) {
		if (ok)
			for (size_t i = 0; i < q->count; i++)
				if (sealed_row(cols[c], vers[c], q->paths[i]) != UINT32_MAX) {
					res[(*n)++] = cols[c]->name;
					break;
				}
		ovs_version_unref(vers[c]);
	}
	free(cols);
	free(vers);
	if (!ok) {
		free(res);
		*n = 0;
		return false;
	}
	*out = res;
	return true;
}
