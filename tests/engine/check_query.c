/*
 * check_query.c — filter queries (ovstage_query): every supported predicate kind on the prims of
 * spec example 3, AND, NULL filter, committed-only value tests, result order, reads against a
 * query handle submitted before the query resolved (held back by the engine's test hook),
 * fetch_query_result (attributes, scoping, total_prim_count, all_handle), failure propagation,
 * every rejection with its status and message, release_query with a read in flight, and a
 * concurrent stress of queries against writes and seals.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ovstage/ovstage.h>
#include <ovstage/ovstage_ext.h>
#include <ovx/path_dictionary/path_dictionary.h>

#include "stage_test_util.h"

#include "filter.h"
#include "filter_gate.h"
#include "path_dictionary.h"
#include "query.h"

/* ---- helpers -------------------------------------------------------------------------------- */

typedef struct fixture {
	ovstage_instance_t *st;
	path_dictionary_instance_t *pd;
	ovx_primpath_list_t list;  /* the scene's prims */
	ovstage_query_handle_t q;  /* path-list query over them */
	ovx_token_t t_type;        /* usd-prim-type */
	ovx_token_t t_count;       /* example:count */
} fixture;

static const char *last_error(void)
{
	return tst_last_error();
}

static ovx_token_t tok(fixture *f, const char *s)
{
	return tst_tok(f->pd, s);
}

static ovstage_query_handle_t query_of(fixture *f, const char *const *paths, size_t n, ovx_primpath_list_t *out_list)
{
	return tst_query_of(f->st, f->pd, paths, n, out_list);
}

static size_t wait_op(fixture *f, ovstage_enqueue_result_t e, char *msg, size_t msglen)
{
	return tst_wait_op(f->st, e, msg, msglen);
}

static void wait_ok(fixture *f, ovstage_enqueue_result_t e)
{
	tst_wait_ok(f->st, e);
}

static ovx_string_or_token_t A(ovx_token_t t)
{
	return tst_attr(t);
}


static ovx_string_or_token_t AS(const char *s)
{
	ovx_string_or_token_t a = { 0, { s, strlen(s) } };
	return a;
}

typedef tst_tensor tensor1;

static ovstage_write_data_t tdata(tensor1 *tt, void *vals, int64_t rows, uint8_t code, uint8_t bits)
{
	return tst_wdata(tt, vals, rows, code, bits, 1);
}

static void write_i32(fixture *f, ovstage_query_handle_t q, ovx_token_t attr, uint64_t ord, int32_t *vals, int64_t n)
{
	tensor1 tt;
	ovstage_write_data_t w = tdata(&tt, vals, n, kDLInt, 32);
	wait_ok(f, ovstage_write_attribute(f->st, q, A(attr), ord, w, OVSTAGE_PRIM_MODE_UPSERT));
}

static void write_types(fixture *f, ovstage_query_handle_t q, uint64_t ord, const char *const *types, size_t n)
{
	uint64_t *v = calloc(n, sizeof *v);
	for (size_t i = 0; i < n; i++)
		v[i] = tok(f, types[i]);
	tensor1 tt;
	ovstage_write_data_t w = tdata(&tt, v, (int64_t)n, kDLUInt, 64);
	w.semantic = OVSTAGE_SEMANTIC_TOKEN_ID;
	wait_ok(f, ovstage_write_attribute(f->st, q, A(f->t_type), ord, w, OVSTAGE_PRIM_MODE_UPSERT));
	free(v);
}

static void seal(fixture *f, uint64_t n)
{
	ovstage_write_floor_desc_t d = { n, OVSTAGE_SCOPE_ALL, NULL, 0 };
	wait_ok(f, ovstage_advance_write_floor(f->st, &d));
}

/* The scene of spec example 3 plus /Worldwide (for PREFIX). */
static const char *const scene_paths[] = { "/World",	       "/World/Anchor",	   "/World/Group",
					   "/World/Group/Left",	  "/World/Group/Right", "/World/InstanceA",
					   "/World/InstanceB",	   "/World/Prototype",	"/World/Prototype/Box",
					   "/Worldwide" };
static const char *const scene_types[] = { "Xform", "Cube",	     "Xform",	      "Mesh",  "Mesh",
					   "XformInstance", "XformInstance", "Xform", "Cube", "Xform" };
#define NSCENE (sizeof scene_paths / sizeof scene_paths[0])

static void setup_bare(fixture *f)
{
	memset(f, 0, sizeof *f);
	ovstage_instance_desc_t d = { "check_query" };
	ck_assert_int_eq(ovstage_create_instance(&d, &f->st), OVSTAGE_OK);
	f->pd = ovstage_get_path_dictionary(f->st);
	ck_assert_ptr_nonnull(f->pd);
	f->t_type = tok(f, "usd-prim-type");
	f->t_count = tok(f, "example:count");
}

/* Prims + types at 1, example:count [5, 3] on Anchor and Group/Left at 2, sealed through 2. */
static void setup(fixture *f)
{
	setup_bare(f);
	f->q = query_of(f, scene_paths, NSCENE, &f->list);
	write_types(f, f->q, 1, scene_types, NSCENE);
	static const char *const cp[] = { "/World/Anchor", "/World/Group/Left" };
	ovstage_query_handle_t qc = query_of(f, cp, 2, NULL);
	int32_t cv[] = { 5, 3 };
	write_i32(f, qc, f->t_count, 2, cv, 2);
	wait_ok(f, ovstage_release_query(f->st, qc));
	seal(f, 2);
}

static void teardown(fixture *f)
{
	ovs_filter_set_test_hook(NULL);
	if (f->q)
		wait_ok(f, ovstage_release_query(f->st, f->q));
	if (f->list)
		path_dictionary_release_path_list_reference(f->pd, f->list);
	ck_assert_int_eq(ovstage_destroy_instance(f->st), OVSTAGE_OK);
}

static ovs_stage *stage_of(fixture *f)
{
	return (ovs_stage *)(void *)f->st->context;
}

/* The resolved query's prims as "p1 p2 ..." (call after fetch_query_result / wait). */
static void query_paths(fixture *f, ovstage_query_handle_t h, char *out, size_t outlen)
{
	ovs_stage *st = stage_of(f);
	ovs_query *q = ovs_query_get(st, h);
	ck_assert_ptr_nonnull(q);
	ck_assert(ovs_query_ready(q));
	out[0] = 0;
	size_t used = 0;
	for (size_t i = 0; i < q->count; i++) {
		ovx_string_t s = ovs_pd_path_string(st->pd, q->paths[i]);
		int k = snprintf(out + used, outlen - used, "%s%s", i ? " " : "", s.ptr);
		ck_assert(k > 0 && (size_t)k < outlen - used);
		used += (size_t)k;
	}
	ovs_query_put(q);
}

/* Runs a filter query to completion; returns the handle, matched paths in out. */
static ovstage_query_handle_t run_query(fixture *f, const ovstage_filter_t *filter, const ovx_token_t *attrs,
					size_t nattrs, char *out, size_t outlen)
{
	ovstage_query_handle_t h = 0;
	ovstage_enqueue_result_t e = ovstage_query(f->st, filter, attrs, nattrs, &h);
	ck_assert_msg(e.status == OVSTAGE_OK, "query rejected: %d: %s", e.status, last_error());
	ck_assert_uint_ne(h, 0);
	ck_assert_uint_ne(e.op_index, 0);
	wait_ok(f, e);
	ovstage_query_result_t r;
	ck_assert_int_eq(ovstage_fetch_query_result(f->st, h, OVSTAGE_TIMEOUT_INFINITE, &r), OVSTAGE_OK);
	ck_assert_uint_eq(r.all_handle, h);
	query_paths(f, h, out, outlen);
	ck_assert_int_eq(ovstage_release_query_result(f->st, &r), OVSTAGE_OK);
	return h;
}

static void release_q(fixture *f, ovstage_query_handle_t h)
{
	wait_ok(f, ovstage_release_query(f->st, h));
}

/* One predicate, query, compare, release. */
static void expect1(fixture *f, ovx_string_or_token_t attr, ovstage_filter_op_t op, const char *const *vals, size_t nv,
		    const char *expected)
{
	ovx_string_t sv[16];
	ck_assert_uint_le(nv, 16);
	for (size_t i = 0; i < nv; i++) {
		sv[i].ptr = vals[i];
		sv[i].length = strlen(vals[i]);
	}
	ovstage_predicate_t p = { attr, op, nv ? sv : NULL, nv };
	ovstage_filter_t flt = { &p, 1 };
	char got[2048];
	ovstage_query_handle_t h = run_query(f, &flt, NULL, 0, got, sizeof got);
	ck_assert_str_eq(got, expected);
	release_q(f, h);
}

#define ALL_SCENE                                                                                                   \
	"/World /World/Anchor /World/Group /World/Group/Left /World/Group/Right /World/InstanceA /World/InstanceB " \
	"/World/Prototype /World/Prototype/Box /Worldwide"

/* ---- predicate kinds ------------------------------------------------------------------------- */

START_TEST(test_prim_type_in)
{
	fixture f;
	setup(&f);
	static const char *const mesh[] = { "Mesh" };
	expect1(&f, AS("usd-prim-type"), OVSTAGE_FILTER_OP_IN, mesh, 1, "/World/Group/Left /World/Group/Right");
	static const char *const two[] = { "Cube", "XformInstance", "Cube", "NoSuchType", "" };
	expect1(&f, A(f.t_type), OVSTAGE_FILTER_OP_IN, two, 5,
		"/World/Anchor /World/InstanceA /World/InstanceB /World/Prototype/Box");
	expect1(&f, A(f.t_type), OVSTAGE_FILTER_OP_IN, NULL, 0, "");
	teardown(&f);
}
END_TEST


/* usd-schemas CONTAINS: the array column "usd-schemas" holds token-id rows; a prim matches when its
 * row contains any of the values. */
START_TEST(test_schemas_contains)
{
	fixture f;
	setup(&f);
	ovx_token_t t_schemas = tok(&f, "usd-schemas");
	const char *const paths[3] = { "/World/Group/Right", "/World/Group/Left", "/World/Anchor" };
	ovstage_query_handle_t q = query_of(&f, paths, 3, NULL);
	uint64_t right[2] = { tok(&f, "ShadowAPI"), tok(&f, "PhysicsRigidBodyAPI") };
	uint64_t left[1] = { tok(&f, "PhysicsRigidBodyAPI") };
	uint64_t none[1] = { 0 };
	uint64_t *rows[3] = { right, left, none };
	int64_t lens[3] = { 2, 1, 0 };
	DLTensor ts[3];
	memset(ts, 0, sizeof ts);
	for (int i = 0; i < 3; i++) {
		ts[i].data = rows[i];
		ts[i].device.device_type = kDLCPU;
		ts[i].ndim = 1;
		ts[i].dtype.code = kDLUInt;
		ts[i].dtype.bits = 64;
		ts[i].dtype.lanes = 1;
		ts[i].shape = &lens[i];
	}
	ovstage_write_data_t w;
	memset(&w, 0, sizeof w);
	w.tensors = ts;
	w.tensor_count = 3;
	w.is_array = true;
	w.semantic = OVSTAGE_SEMANTIC_TOKEN_ID;
	wait_ok(&f, ovstage_write_attribute(f.st, q, A(t_schemas), 10, w, OVSTAGE_PRIM_MODE_UPSERT));
	seal(&f, 10);
	static const char *const shadow[] = { "ShadowAPI" };
	expect1(&f, AS("usd-schemas"), OVSTAGE_FILTER_OP_CONTAINS, shadow, 1, "/World/Group/Right");
	static const char *const rigid[] = { "PhysicsRigidBodyAPI" };
	expect1(&f, AS("usd-schemas"), OVSTAGE_FILTER_OP_CONTAINS, rigid, 1, "/World/Group/Left /World/Group/Right");
	static const char *const nope[] = { "NoSuchAPI" };
	expect1(&f, AS("usd-schemas"), OVSTAGE_FILTER_OP_CONTAINS, nope, 1, "");
	release_q(&f, q);
	teardown(&f);
}
END_TEST

START_TEST(test_path_prefix)
{
	fixture f;
	setup(&f);
	static const char *const g[] = { "/World/Group" };
	expect1(&f, AS("usd-path"), OVSTAGE_FILTER_OP_PREFIX, g, 1, "/World/Group /World/Group/Left /World/Group/Right");
	static const char *const w[] = { "/World" };
	expect1(&f, AS("usd-path"), OVSTAGE_FILTER_OP_PREFIX, w, 1, ALL_SCENE); /* byte prefix: /Worldwide too */
	static const char *const ws[] = { "/World/" };
	expect1(&f, AS("usd-path"), OVSTAGE_FILTER_OP_PREFIX, ws, 1,
		"/World/Anchor /World/Group /World/Group/Left /World/Group/Right /World/InstanceA /World/InstanceB "
		"/World/Prototype /World/Prototype/Box");
	static const char *const multi[] = { "/World/Inst", "/Worldw", "/Nope" };
	expect1(&f, AS("usd-path"), OVSTAGE_FILTER_OP_PREFIX, multi, 3, "/World/InstanceA /World/InstanceB /Worldwide");
	static const char *const empty[] = { "" };
	expect1(&f, AS("usd-path"), OVSTAGE_FILTER_OP_PREFIX, empty, 1, ALL_SCENE);
	static const char *const longer[] = { "/World/Group/Left/Deeper" };
	expect1(&f, AS("usd-path"), OVSTAGE_FILTER_OP_PREFIX, longer, 1, "");
	teardown(&f);
}
END_TEST

START_TEST(test_path_in)
{
	fixture f;
	setup(&f);
	static const char *const v[] = { "/World/Group", "/World/Nope", "/World/Anchor", "/World/Group" };
	expect1(&f, AS("usd-path"), OVSTAGE_FILTER_OP_IN, v, 4, "/World/Anchor /World/Group");
	static const char *const root[] = { "/" };
	expect1(&f, AS("usd-path"), OVSTAGE_FILTER_OP_IN, root, 1, ""); /* "/" is not a prim here */
	teardown(&f);
}
END_TEST

START_TEST(test_parent_in)
{
	fixture f;
	setup(&f);
	static const char *const g[] = { "/World/Group" };
	expect1(&f, AS("usd-parent"), OVSTAGE_FILTER_OP_IN, g, 1, "/World/Group/Left /World/Group/Right");
	static const char *const root[] = { "/" };
	expect1(&f, AS("usd-parent"), OVSTAGE_FILTER_OP_IN, root, 1, "/World /Worldwide");
	static const char *const two[] = { "/World/Prototype", "/World/Group", "/Unknown/Parent" };
	expect1(&f, AS("usd-parent"), OVSTAGE_FILTER_OP_IN, two, 3,
		"/World/Group/Left /World/Group/Right /World/Prototype/Box");
	teardown(&f);
}
END_TEST

START_TEST(test_children_contains)
{
	fixture f;
	setup(&f);
	static const char *const l[] = { "/World/Group/Left" };
	expect1(&f, AS("usd-children"), OVSTAGE_FILTER_OP_CONTAINS, l, 1, "/World/Group");
	static const char *const two[] = { "/World/Prototype/Box", "/World/Group/Right", "/World/Group/Left" };
	expect1(&f, AS("usd-children"), OVSTAGE_FILTER_OP_CONTAINS, two, 3, "/World/Group /World/Prototype");
	/* The value must exist as a prim: an interned but absent child matches nothing. */
	static const char *const absent[] = { "/World/Group/Middle" };
	expect1(&f, AS("usd-children"), OVSTAGE_FILTER_OP_CONTAINS, absent, 1, "");
	teardown(&f);
}
END_TEST

START_TEST(test_has)
{
	fixture f;
	setup(&f);
	expect1(&f, A(f.t_count), OVSTAGE_FILTER_OP_HAS, NULL, 0, "/World/Anchor /World/Group/Left");
	expect1(&f, AS("example:count"), OVSTAGE_FILTER_OP_HAS, NULL, 0, "/World/Anchor /World/Group/Left");
	expect1(&f, AS("usd-prim-type"), OVSTAGE_FILTER_OP_HAS, NULL, 0, ALL_SCENE);
	expect1(&f, AS("no:such:attribute"), OVSTAGE_FILTER_OP_HAS, NULL, 0, "");
	expect1(&f, AS("usd-path"), OVSTAGE_FILTER_OP_HAS, NULL, 0, ALL_SCENE);
	expect1(&f, AS("usd-parent"), OVSTAGE_FILTER_OP_HAS, NULL, 0, ALL_SCENE);
	expect1(&f, AS("usd-children"), OVSTAGE_FILTER_OP_HAS, NULL, 0, "/World /World/Group /World/Prototype");
	/* HAS ignores values. */
	static const char *const junk[] = { "whatever" };
	expect1(&f, A(f.t_count), OVSTAGE_FILTER_OP_HAS, junk, 1, "/World/Anchor /World/Group/Left");
	teardown(&f);
}
END_TEST

START_TEST(test_and)
{
	fixture f;
	setup(&f);
	ovx_string_t g = { "/World/Group", 12 }, mesh = { "Mesh", 4 };
	ovstage_predicate_t p[3] = {
		{ AS("usd-path"), OVSTAGE_FILTER_OP_PREFIX, &g, 1 },
		{ AS("usd-prim-type"), OVSTAGE_FILTER_OP_IN, &mesh, 1 },
		{ A(f.t_count), OVSTAGE_FILTER_OP_HAS, NULL, 0 },
	};
	char got[1024];
	ovstage_filter_t two = { p, 2 };
	ovstage_query_handle_t h = run_query(&f, &two, NULL, 0, got, sizeof got);
	ck_assert_str_eq(got, "/World/Group/Left /World/Group/Right");
	release_q(&f, h);
	ovstage_filter_t three = { p, 3 };
	h = run_query(&f, &three, NULL, 0, got, sizeof got);
	ck_assert_str_eq(got, "/World/Group/Left");
	release_q(&f, h);
	teardown(&f);
}
END_TEST

START_TEST(test_null_filter)
{
	fixture f;
	setup(&f);
	char got[2048];
	ovstage_query_handle_t h = run_query(&f, NULL, NULL, 0, got, sizeof got);
	ck_assert_str_eq(got, ALL_SCENE);
	release_q(&f, h);
	ovstage_filter_t empty = { NULL, 0 };
	h = run_query(&f, &empty, NULL, 0, got, sizeof got);
	ck_assert_str_eq(got, ALL_SCENE);
	release_q(&f, h);
	teardown(&f);
}
END_TEST

/* Result order: hierarchical (a parent right before its subtree), independent of interning order. */
START_TEST(test_order)
{
	fixture f;
	setup_bare(&f);
	static const char *const p[] = { "/A-x", "/A/B/C", "/B", "/A", "/A/B", "/A0", "/A/B-2" };
	f.q = query_of(&f, p, 7, &f.list);
	int32_t v[7] = { 0 };
	write_i32(&f, f.q, f.t_count, 1, v, 7);
	seal(&f, 1);
	char got[1024];
	ovstage_query_handle_t h = run_query(&f, NULL, NULL, 0, got, sizeof got);
	ck_assert_str_eq(got, "/A /A/B /A/B/C /A/B-2 /A-x /A0 /B");
	release_q(&f, h);
	teardown(&f);
}
END_TEST

/* Value tests see committed (sealed) state only; existence is structural. */
START_TEST(test_committed_only)
{
	fixture f;
	setup(&f);
	/* An unsealed example:count on Right. */
	static const char *const r[] = { "/World/Group/Right" };
	ovstage_query_handle_t qr = query_of(&f, r, 1, NULL);
	int32_t seven = 7;
	write_i32(&f, qr, f.t_count, 3, &seven, 1);
	expect1(&f, A(f.t_count), OVSTAGE_FILTER_OP_HAS, NULL, 0, "/World/Anchor /World/Group/Left");
	seal(&f, 3);
	expect1(&f, A(f.t_count), OVSTAGE_FILTER_OP_HAS, NULL, 0,
		"/World/Anchor /World/Group/Left /World/Group/Right");
	/* An unsealed attribute tombstone does not hide the committed value. */
	wait_ok(&f, ovstage_delete_attributes(f.st, qr, (ovx_string_or_token_t[]){ A(f.t_count) }, 1, 4));
	expect1(&f, A(f.t_count), OVSTAGE_FILTER_OP_HAS, NULL, 0,
		"/World/Anchor /World/Group/Left /World/Group/Right");
	seal(&f, 4);
	expect1(&f, A(f.t_count), OVSTAGE_FILTER_OP_HAS, NULL, 0, "/World/Anchor /World/Group/Left");
	/* An unsealed type change is invisible to usd-prim-type IN. */
	static const char *const cube[] = { "Cube" };
	write_types(&f, qr, 5, cube, 1);
	static const char *const mesh[] = { "Mesh" };
	expect1(&f, AS("usd-prim-type"), OVSTAGE_FILTER_OP_IN, mesh, 1, "/World/Group/Left /World/Group/Right");
	seal(&f, 5);
	expect1(&f, AS("usd-prim-type"), OVSTAGE_FILTER_OP_IN, mesh, 1, "/World/Group/Left");
	/* A prim created by an unsealed write is a candidate (structure), without committed values. */
	static const char *const nw[] = { "/World/New" };
	ovstage_query_handle_t qn = query_of(&f, nw, 1, NULL);
	int32_t one = 1;
	write_i32(&f, qn, f.t_count, 6, &one, 1);
	static const char *const newp[] = { "/World/New" };
	expect1(&f, AS("usd-path"), OVSTAGE_FILTER_OP_IN, newp, 1, "/World/New");
	expect1(&f, A(f.t_count), OVSTAGE_FILTER_OP_HAS, NULL, 0, "/World/Anchor /World/Group/Left");
	/* A whole-prim delete removes it from the candidates once executed. */
	wait_ok(&f, ovstage_delete_attributes(f.st, qn, NULL, 0, 7));
	expect1(&f, AS("usd-path"), OVSTAGE_FILTER_OP_IN, newp, 1, "");
	release_q(&f, qn);
	release_q(&f, qr);
	teardown(&f);
}
END_TEST

/* ---- fetch_query_result ---------------------------------------------------------------------- */

static void attrs_string(fixture *f, const ovstage_query_result_t *r, char *out, size_t outlen)
{
	out[0] = 0;
	size_t used = 0;
	for (size_t i = 0; i < r->attribute_count; i++) {
		ovx_string_t s = ovs_pd_token_string(stage_of(f)->pd, r->attributes[i]);
		used += (size_t)snprintf(out + used, outlen - used, "%s%s", i ? " " : "", s.ptr);
	}
}

static void fetch_attrs(fixture *f, ovstage_query_handle_t h, size_t *total, char *out, size_t outlen)
{
	ovstage_query_result_t r;
	ck_assert_int_eq(ovstage_fetch_query_result(f->st, h, OVSTAGE_TIMEOUT_INFINITE, &r), OVSTAGE_OK);
	ck_assert_uint_eq(r.all_handle, h);
	ck_assert_uint_ne(r.query_result_id, 0);
	*total = r.total_prim_count;
	attrs_string(f, &r, out, outlen);
	ck_assert_int_eq(ovstage_release_query_result(f->st, &r), OVSTAGE_OK);
}

/* Reads int32 `attr` latest through `h`; returns "path=value ..." in out. */
static void read_i32(fixture *f, ovstage_query_handle_t h, ovx_token_t attr, uint64_t end, char *out, size_t outlen)
{
	ovstage_read_handle_t rh;
	ovstage_ordinal_range_t range = { 0, end, false };
	ovstage_enqueue_result_t e = ovstage_read_attributes(f->st, h, &attr, 1, range, &rh);
	ck_assert_msg(e.status == OVSTAGE_OK, "read rejected: %s", last_error());
	wait_ok(f, e);
	out[0] = 0;
	size_t used = 0;
	ovstage_read_group_t g;
	ovstage_api_status_t s;
	ovs_stage *st = stage_of(f);
	while ((s = ovstage_fetch_read_next(f->st, rh, OVSTAGE_TIMEOUT_INFINITE, &g)) == OVSTAGE_OK) {
		ck_assert(!g.is_delete);
		const ovx_primpath_t *paths;
		size_t n;
		ck_assert(ovs_pd_list_view(st->pd, g.prims.list, &paths, &n));
		const int32_t *d = g.data.tensors[0].data;
		for (uint32_t i = 0; i < g.prims.count; i++) {
			uint32_t el = g.prims.index_map ? g.prims.index_map[i] : g.prims.offset + i;
			uint32_t row = g.data.index_map ? g.data.index_map[i] : i;
			ck_assert_uint_lt(el, n);
			used += (size_t)snprintf(out + used, outlen - used, "%s%s=%d", used ? " " : "",
						 ovs_pd_path_string(st->pd, paths[el]).ptr, d[row]);
		}
		ck_assert_int_eq(ovstage_release_group(f->st, &g), OVSTAGE_OK);
	}
	ck_assert_int_eq(s, OVSTAGE_ERROR_END_OF_ITERATION);
	wait_ok(f, ovstage_release_read(f->st, rh));
}

START_TEST(test_fetch_result)
{
	fixture f;
	setup(&f);
	ovx_token_t other = tok(&f, "other:attr");
	/* other:attr only on /World (not matched below). */
	static const char *const w[] = { "/World" };
	ovstage_query_handle_t qw = query_of(&f, w, 1, NULL);
	int32_t nine = 9;
	write_i32(&f, qw, other, 3, &nine, 1);
	seal(&f, 3);
	release_q(&f, qw);

	ovstage_predicate_t p = { A(f.t_count), OVSTAGE_FILTER_OP_HAS, NULL, 0 };
	ovstage_filter_t flt = { &p, 1 };
	/* Scoped (spec example 3), with a duplicate and an attribute absent on the matched prims. */
	ovx_token_t scope[] = { f.t_count, f.t_type, other, f.t_count };
	ovstage_query_handle_t h;
	ovstage_enqueue_result_t e = ovstage_query(f.st, &flt, scope, 4, &h);
	ck_assert_int_eq(e.status, OVSTAGE_OK);
	wait_ok(&f, e); /* the op id is released: fetch must still work */
	size_t total;
	char attrs[512];
	fetch_attrs(&f, h, &total, attrs, sizeof attrs);
	ck_assert_uint_eq(total, 2);
	ck_assert_str_eq(attrs, "example:count usd-prim-type");
	/* Two results may be outstanding; the handle survives release_query_result. */
	ovstage_query_result_t r1, r2;
	ck_assert_int_eq(ovstage_fetch_query_result(f.st, h, 0, &r1), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_fetch_query_result(f.st, h, 0, &r2), OVSTAGE_OK);
	ck_assert_uint_ne(r1.query_result_id, r2.query_result_id);
	ck_assert_int_eq(ovstage_release_query_result(f.st, &r1), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_release_query_result(f.st, &r1), OVSTAGE_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(ovstage_release_query_result(f.st, &r2), OVSTAGE_OK);
	/* Reads through all_handle. */
	char vals[512];
	read_i32(&f, h, f.t_count, 3, vals, sizeof vals);
	ck_assert_str_eq(vals, "/World/Anchor=5 /World/Group/Left=3");
	release_q(&f, h);

	/* Unscoped: every column with a present row among the matched prims, in creation order. */
	e = ovstage_query(f.st, &flt, NULL, 0, &h);
	wait_ok(&f, e);
	fetch_attrs(&f, h, &total, attrs, sizeof attrs);
	ck_assert_uint_eq(total, 2);
	ck_assert_str_eq(attrs, "usd-prim-type example:count");
	release_q(&f, h);
	ovx_string_t right = { "/World/Group/Right", 18 };
	ovstage_predicate_t pr = { AS("usd-path"), OVSTAGE_FILTER_OP_IN, &right, 1 };
	ovstage_filter_t fr = { &pr, 1 };
	e = ovstage_query(f.st, &fr, NULL, 0, &h);
	wait_ok(&f, e);
	fetch_attrs(&f, h, &total, attrs, sizeof attrs);
	ck_assert_uint_eq(total, 1);
	ck_assert_str_eq(attrs, "usd-prim-type");
	release_q(&f, h);
	e = ovstage_query(f.st, NULL, NULL, 0, &h);
	wait_ok(&f, e);
	fetch_attrs(&f, h, &total, attrs, sizeof attrs);
	ck_assert_uint_eq(total, NSCENE);
	ck_assert_str_eq(attrs, "usd-prim-type example:count other:attr");
	release_q(&f, h);
	/* Nothing matched. */
	ovx_string_t none = { "/Nowhere", 8 };
	ovstage_predicate_t pn = { AS("usd-path"), OVSTAGE_FILTER_OP_PREFIX, &none, 1 };
	ovstage_filter_t fn = { &pn, 1 };
	e = ovstage_query(f.st, &fn, NULL, 0, &h);
	wait_ok(&f, e);
	fetch_attrs(&f, h, &total, attrs, sizeof attrs);
	ck_assert_uint_eq(total, 0);
	ck_assert_str_eq(attrs, "");
	read_i32(&f, h, f.t_count, 3, vals, sizeof vals);
	ck_assert_str_eq(vals, "");
	release_q(&f, h);
	/* A released handle. */
	ovstage_query_result_t r;
	ck_assert_int_eq(ovstage_fetch_query_result(f.st, h, 0, &r), OVSTAGE_ERROR_INVALID_HANDLE);
	teardown(&f);
}
END_TEST

/* ---- deferred consumers (the test hook holds the query op) ----------------------------------- */


static ovstage_query_handle_t held_query(fixture *f, const ovstage_filter_t *flt, ovstage_enqueue_result_t *e)
{
	gate_close();
	ovstage_query_handle_t h = 0;
	*e = ovstage_query(f->st, flt, NULL, 0, &h);
	ck_assert_int_eq(e->status, OVSTAGE_OK);
	ck_assert_uint_ne(h, 0);
	gate_wait_entered();
	return h;
}

START_TEST(test_deferred_read)
{
	fixture f;
	setup(&f);
	ovx_string_t g = { "/World/", 7 };
	ovstage_predicate_t p = { AS("usd-path"), OVSTAGE_FILTER_OP_PREFIX, &g, 1 };
	ovstage_filter_t flt = { &p, 1 };
	ovstage_enqueue_result_t qe;
	ovstage_query_handle_t h = held_query(&f, &flt, &qe);
	/* Not resolved: polls time out. */
	ovstage_op_wait_result_t w;
	ck_assert_int_eq(ovstage_wait_op(f.st, qe.op_index, 0, &w), OVSTAGE_ERROR_TIMEOUT);
	ovstage_query_result_t r;
	ck_assert_int_eq(ovstage_fetch_query_result(f.st, h, 0, &r), OVSTAGE_ERROR_TIMEOUT);
	/* A read enqueued now is deferred until the query resolves. */
	ovstage_read_handle_t rh;
	ovstage_ordinal_range_t range = { 0, 2, false };
	ovstage_enqueue_result_t re = ovstage_read_attributes(f.st, h, &f.t_count, 1, range, &rh);
	ck_assert_int_eq(re.status, OVSTAGE_OK);
	ovstage_read_group_t grp;
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh, 0, &grp), OVSTAGE_ERROR_TIMEOUT);
	ck_assert_int_eq(ovstage_wait_op(f.st, re.op_index, 0, &w), OVSTAGE_ERROR_TIMEOUT);
	/* Let the query resolve: the read runs after it. */
	gate_open();
	wait_ok(&f, qe);
	wait_ok(&f, re);
	/* The read saw the query's prims: Anchor and Left (not /World, outside the prefix). */
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh, OVSTAGE_TIMEOUT_INFINITE, &grp), OVSTAGE_OK);
	ck_assert_uint_eq(grp.prims.count, 2);
	ovs_stage *st = stage_of(&f);
	const ovx_primpath_t *paths;
	size_t n;
	ck_assert(ovs_pd_list_view(st->pd, grp.prims.list, &paths, &n));
	ck_assert_uint_eq(n, 8);
	const int32_t *d = grp.data.tensors[0].data;
	char got[256];
	size_t used = 0;
	for (uint32_t i = 0; i < grp.prims.count; i++) {
		uint32_t el = grp.prims.index_map ? grp.prims.index_map[i] : grp.prims.offset + i;
		uint32_t row = grp.data.index_map ? grp.data.index_map[i] : i;
		used += (size_t)snprintf(got + used, sizeof got - used, "%s%s=%d", i ? " " : "",
					 ovs_pd_path_string(st->pd, paths[el]).ptr, d[row]);
	}
	ck_assert_str_eq(got, "/World/Anchor=5 /World/Group/Left=3");
	ck_assert_int_eq(ovstage_release_group(f.st, &grp), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh, 0, &grp), OVSTAGE_ERROR_END_OF_ITERATION);
	wait_ok(&f, ovstage_release_read(f.st, rh));
	ck_assert_int_eq(ovstage_fetch_query_result(f.st, h, 0, &r), OVSTAGE_OK);
	ck_assert_uint_eq(r.total_prim_count, 8);
	ck_assert_int_eq(ovstage_release_query_result(f.st, &r), OVSTAGE_OK);
	release_q(&f, h);
	teardown(&f);
}
END_TEST

/* A write against a query that has not resolved yet runs after it, with the count-dependent layout
 * checks done then. */
START_TEST(test_deferred_write)
{
	fixture f;
	setup(&f);
	ovx_string_t mesh = { "Mesh", 4 };
	ovstage_predicate_t p = { AS("usd-prim-type"), OVSTAGE_FILTER_OP_IN, &mesh, 1 };
	ovstage_filter_t flt = { &p, 1 };
	ovstage_enqueue_result_t qe;
	ovstage_query_handle_t h = held_query(&f, &flt, &qe);
	ovx_token_t t = tok(&f, "example:weight");
	int32_t v[2] = { 11, 12 };
	tensor1 tt;
	ovstage_write_data_t wd = tdata(&tt, v, 2, kDLInt, 32);
	ovstage_enqueue_result_t we = ovstage_write_attribute(f.st, h, A(t), 3, wd, OVSTAGE_PRIM_MODE_UPSERT);
	ck_assert_msg(we.status == OVSTAGE_OK, "write rejected: %s", last_error());
	ovstage_op_wait_result_t w;
	ck_assert_int_eq(ovstage_wait_op(f.st, we.op_index, 0, &w), OVSTAGE_ERROR_TIMEOUT);
	gate_open();
	wait_ok(&f, qe);
	wait_ok(&f, we);
	seal(&f, 3);
	char vals[256];
	read_i32(&f, h, t, 3, vals, sizeof vals);
	ck_assert_str_eq(vals, "/World/Group/Left=11 /World/Group/Right=12");
	release_q(&f, h);
	teardown(&f);
}
END_TEST

START_TEST(test_release_with_read_in_flight)
{
	fixture f;
	setup(&f);
	ovstage_predicate_t p = { A(f.t_count), OVSTAGE_FILTER_OP_HAS, NULL, 0 };
	ovstage_filter_t flt = { &p, 1 };
	ovstage_enqueue_result_t qe;
	ovstage_query_handle_t h = held_query(&f, &flt, &qe);
	ovstage_read_handle_t rh;
	ovstage_ordinal_range_t range = { 0, 2, false };
	ovstage_enqueue_result_t re = ovstage_read_attributes(f.st, h, &f.t_count, 1, range, &rh);
	ck_assert_int_eq(re.status, OVSTAGE_OK);
	/* Release the query while it and the read against it are in flight. */
	ovstage_enqueue_result_t rel = ovstage_release_query(f.st, h);
	ck_assert_int_eq(rel.status, OVSTAGE_OK);
	ovstage_query_result_t r;
	ck_assert_int_eq(ovstage_fetch_query_result(f.st, h, 0, &r), OVSTAGE_ERROR_INVALID_HANDLE);
	ovstage_read_handle_t rh2 = 77;
	ck_assert_int_eq(ovstage_read_attributes(f.st, h, &f.t_count, 1, range, &rh2).status,
			 OVSTAGE_ERROR_INVALID_HANDLE);
	ck_assert_uint_eq(rh2, OVSTAGE_INVALID_READ_HANDLE);
	gate_open();
	wait_ok(&f, rel);
	wait_ok(&f, qe);
	wait_ok(&f, re);
	ovstage_read_group_t grp;
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh, OVSTAGE_TIMEOUT_INFINITE, &grp), OVSTAGE_OK);
	ck_assert_uint_eq(grp.prims.count, 2);
	const int32_t *d = grp.data.tensors[0].data;
	uint32_t r0 = grp.data.index_map ? grp.data.index_map[0] : 0;
	uint32_t r1 = grp.data.index_map ? grp.data.index_map[1] : 1;
	ck_assert_int_eq(d[r0], 5);
	ck_assert_int_eq(d[r1], 3);
	/* The group keeps the query's list alive after the query is gone. */
	ck_assert(ovs_pd_list_is_valid(stage_of(&f)->pd, grp.prims.list));
	ck_assert_int_eq(ovstage_release_group(f.st, &grp), OVSTAGE_OK);
	wait_ok(&f, ovstage_release_read(f.st, rh));
	teardown(&f);
}
END_TEST

/* A query whose op fails: fetch_query_result and dependent reads report OP_FAILED. */
START_TEST(test_failed_query)
{
	fixture f;
	setup_bare(&f);
	static const char *const p1[] = { "/X" };
	f.q = query_of(&f, p1, 1, &f.list);
	/* usd-prim-type written as int32 (no reserved semantic): not a token column. */
	int32_t v = 1;
	write_i32(&f, f.q, f.t_type, 1, &v, 1);
	seal(&f, 1);
	ovx_string_t mesh = { "Mesh", 4 };
	ovstage_predicate_t p = { A(f.t_type), OVSTAGE_FILTER_OP_IN, &mesh, 1 };
	ovstage_filter_t flt = { &p, 1 };
	ovstage_enqueue_result_t qe;
	ovstage_query_handle_t h = held_query(&f, &flt, &qe);
	ovstage_read_handle_t rh;
	ovstage_ordinal_range_t range = { 0, 1, false };
	ovstage_enqueue_result_t re = ovstage_read_attributes(f.st, h, &f.t_type, 1, range, &rh);
	ck_assert_int_eq(re.status, OVSTAGE_OK);
	gate_open();
	char msg[600];
	ck_assert_uint_eq(wait_op(&f, qe, msg, sizeof msg), 1);
	ck_assert_msg(strstr(msg, "usd-prim-type") && strstr(msg, "token"), "message: %s", msg);
	ck_assert_uint_ge(wait_op(&f, re, msg, sizeof msg), 1);
	ovstage_query_result_t r;
	ck_assert_int_eq(ovstage_fetch_query_result(f.st, h, OVSTAGE_TIMEOUT_INFINITE, &r), OVSTAGE_ERROR_OP_FAILED);
	ovstage_read_group_t grp;
	ck_assert_int_eq(ovstage_fetch_read_next(f.st, rh, OVSTAGE_TIMEOUT_INFINITE, &grp), OVSTAGE_ERROR_OP_FAILED);
	wait_ok(&f, ovstage_release_read(f.st, rh));
	release_q(&f, h);
	teardown(&f);
}
END_TEST

/* ---- value predicates (an extension) ----------------------------------------------------------- */

static void expect_filter(fixture *f, const ovstage_predicate_t *p, size_t n, const char *expected)
{
	ovstage_filter_t flt = { p, n };
	char got[2048];
	ovstage_query_handle_t h = run_query(f, &flt, NULL, 0, got, sizeof got);
	ck_assert_str_eq(got, expected);
	release_q(f, h);
}

#define SV(s) ((ovx_string_t){ (s), sizeof(s) - 1 })

/* IN / LT / LE / GT / GE on the sealed value of an int32 column ([5, 3] on Anchor and Group/Left),
 * AND within a group, OR between groups; unsealed values and prims without a value never match. */
START_TEST(test_value_predicates)
{
	fixture f;
	setup(&f);
	ovx_string_t v3 = SV("3"), v4 = SV("4"), v5 = SV("5"), vin[3] = { SV("5"), SV("0x3"), SV("-7") };
	ovstage_predicate_t p[4];
	p[0] = (ovstage_predicate_t){ A(f.t_count), OVSTAGE_FILTER_OP_GT, &v3, 1 };
	expect_filter(&f, p, 1, "/World/Anchor");
	p[0].op = OVSTAGE_FILTER_OP_GE;
	expect_filter(&f, p, 1, "/World/Anchor /World/Group/Left");
	p[0] = (ovstage_predicate_t){ A(f.t_count), OVSTAGE_FILTER_OP_LT, &v4, 1 };
	expect_filter(&f, p, 1, "/World/Group/Left");
	p[0] = (ovstage_predicate_t){ A(f.t_count), OVSTAGE_FILTER_OP_LE, &v5, 1 };
	expect_filter(&f, p, 1, "/World/Anchor /World/Group/Left");
	p[0] = (ovstage_predicate_t){ A(f.t_count), OVSTAGE_FILTER_OP_IN, vin, 3 };
	expect_filter(&f, p, 1, "/World/Anchor /World/Group/Left");
	p[0].value_count = 0; /* an empty set matches nothing */
	expect_filter(&f, p, 1, "");
	/* (count >= 4 AND usd-prim-type IN Cube) OR usd-path IN /Worldwide */
	ovx_string_t cube = SV("Cube"), ww = SV("/Worldwide");
	p[0] = (ovstage_predicate_t){ A(f.t_count), OVSTAGE_FILTER_OP_GE, &v4, 1 };
	p[1] = (ovstage_predicate_t){ A(f.t_type), OVSTAGE_FILTER_OP_IN, &cube, 1 };
	p[2] = (ovstage_predicate_t){ AS("ignored"), OVSTAGE_FILTER_OP_EXT_OR, NULL, 0 };
	p[3] = (ovstage_predicate_t){ AS("usd-path"), OVSTAGE_FILTER_OP_IN, &ww, 1 };
	expect_filter(&f, p, 4, "/World/Anchor /Worldwide");
	/* an unsealed value does not count: Group/Right gets 9 at 3, not sealed */
	static const char *const rp[] = { "/World/Group/Right" };
	ovstage_query_handle_t qr = query_of(&f, rp, 1, NULL);
	int32_t nine = 9;
	write_i32(&f, qr, f.t_count, 3, &nine, 1);
	p[0] = (ovstage_predicate_t){ A(f.t_count), OVSTAGE_FILTER_OP_GT, &v4, 1 };
	expect_filter(&f, p, 1, "/World/Anchor");
	seal(&f, 3);
	expect_filter(&f, p, 1, "/World/Anchor /World/Group/Right");
	wait_ok(&f, ovstage_release_query(f.st, qr));
	teardown(&f);
}
END_TEST

/* Floats compare exactly, and 64-bit integers too (no rounding through double); a column that is not
 * one scalar per row fails the query's op with NOT_SUPPORTED naming the dtype. */
START_TEST(test_value_predicates_dtypes)
{
	fixture f;
	setup_bare(&f);
	static const char *const pp[] = { "/A", "/B", "/C" };
	f.q = query_of(&f, pp, 3, &f.list);
	ovx_token_t tf = tok(&f, "x:f"), tu = tok(&f, "x:u"), tv = tok(&f, "x:v");
	float fv[3] = { -1.5f, 0.25f, 2.0f };
	uint64_t uv[3] = { 9007199254740993ull, 9007199254740992ull, 1 }; /* 2^53 + 1, 2^53, 1 */
	float vec[9] = { 0 };
	tensor1 t1, t2, t3;
	wait_ok(&f, ovstage_write_attribute(f.st, f.q, A(tf), 1, tdata(&t1, fv, 3, kDLFloat, 32), OVSTAGE_PRIM_MODE_UPSERT));
	wait_ok(&f, ovstage_write_attribute(f.st, f.q, A(tu), 1, tdata(&t2, uv, 3, kDLUInt, 64), OVSTAGE_PRIM_MODE_UPSERT));
	ovstage_write_data_t wv = tdata(&t3, vec, 3, kDLFloat, 32);
	t3.t.dtype.lanes = 3; /* float3 rows: not a scalar */
	wait_ok(&f, ovstage_write_attribute(f.st, f.q, A(tv), 1, wv, OVSTAGE_PRIM_MODE_UPSERT));
	seal(&f, 1);
	ovx_string_t zero = SV("0"), quarter = SV("0.25"), big = SV("9007199254740993");
	ovstage_predicate_t p = { A(tf), OVSTAGE_FILTER_OP_LT, &zero, 1 };
	expect_filter(&f, &p, 1, "/A");
	p = (ovstage_predicate_t){ A(tf), OVSTAGE_FILTER_OP_IN, &quarter, 1 };
	expect_filter(&f, &p, 1, "/B");
	p = (ovstage_predicate_t){ A(tu), OVSTAGE_FILTER_OP_IN, &big, 1 };
	expect_filter(&f, &p, 1, "/A");
	p = (ovstage_predicate_t){ A(tu), OVSTAGE_FILTER_OP_LT, &big, 1 };
	expect_filter(&f, &p, 1, "/B /C");
	p = (ovstage_predicate_t){ A(tv), OVSTAGE_FILTER_OP_GT, &zero, 1 };
	ovstage_filter_t flt = { &p, 1 };
	ovstage_query_handle_t h = 0;
	ovstage_enqueue_result_t e = ovstage_query(f.st, &flt, NULL, 0, &h);
	ck_assert_int_eq(e.status, OVSTAGE_OK);
	char msg[600];
	ck_assert_uint_eq(wait_op(&f, e, msg, sizeof msg), 1);
	ck_assert_msg(strstr(msg, "x:v") && strstr(msg, "lanes 3"), "message: %s", msg);
	release_q(&f, h);
	teardown(&f);
}
END_TEST

/* ---- rejections ------------------------------------------------------------------------------ */

static void expect_reject(fixture *f, const ovstage_filter_t *flt, const ovx_token_t *attrs, size_t na,
			  ovstage_api_status_t status, const char *const *needles)
{
	ovstage_query_handle_t h = 12345;
	ovstage_enqueue_result_t e = ovstage_query(f->st, flt, attrs, na, &h);
	const char *m = last_error();
	ck_assert_msg(e.status == status, "status %d (want %d): %s", e.status, status, m);
	ck_assert_uint_eq(e.op_index, OVSTAGE_INVALID_OP_ID);
	ck_assert_uint_eq(h, OVSTAGE_INVALID_QUERY_HANDLE);
	for (size_t i = 0; needles && needles[i]; i++)
		ck_assert_msg(strstr(m, needles[i]), "message \"%s\" lacks \"%s\"", m, needles[i]);
}

static void reject1(fixture *f, ovx_string_or_token_t attr, ovstage_filter_op_t op, const ovx_string_t *vals,
		    size_t nv, ovstage_api_status_t status, const char *const *needles)
{
	/* As the second predicate, after a valid one: messages name index 1. */
	ovstage_predicate_t p[2] = { { AS("usd-path"), OVSTAGE_FILTER_OP_HAS, NULL, 0 }, { attr, op, vals, nv } };
	ovstage_filter_t flt = { p, 2 };
	expect_reject(f, &flt, NULL, 0, status, needles);
}

#define NEED(...) ((const char *const[]){ __VA_ARGS__, NULL })

START_TEST(test_rejections)
{
	fixture f;
	setup(&f);
	ovstage_query_handle_t h;
	/* Arguments. */
	ck_assert_int_eq(ovstage_query(f.st, NULL, NULL, 0, NULL).status, OVSTAGE_ERROR_INVALID_ARGUMENT);
	ovstage_filter_t nullpred = { NULL, 2 };
	expect_reject(&f, &nullpred, NULL, 0, OVSTAGE_ERROR_INVALID_ARGUMENT, NEED("predicates is NULL", "count = 2"));
	expect_reject(&f, NULL, NULL, 3, OVSTAGE_ERROR_INVALID_ARGUMENT, NEED("attrs is NULL", "attr_count = 3"));
	ovx_token_t bad_tok[] = { f.t_count, 999999 };
	expect_reject(&f, NULL, bad_tok, 2, OVSTAGE_ERROR_INVALID_ARGUMENT, NEED("attrs[1]", "999999"));
	ovx_string_or_token_t empty = { 0, { NULL, 0 } };
	reject1(&f, empty, OVSTAGE_FILTER_OP_HAS, NULL, 0, OVSTAGE_ERROR_INVALID_ARGUMENT,
		NEED("predicates[1].attribute", "empty"));
	reject1(&f, A(888888), OVSTAGE_FILTER_OP_HAS, NULL, 0, OVSTAGE_ERROR_INVALID_ARGUMENT,
		NEED("predicates[1].attribute", "888888"));
	reject1(&f, AS("usd-path"), (ovstage_filter_op_t)42, NULL, 0, OVSTAGE_ERROR_INVALID_ARGUMENT,
		NEED("predicates[1].op = 42"));
	reject1(&f, AS("usd-path"), OVSTAGE_FILTER_OP_IN, NULL, 2, OVSTAGE_ERROR_INVALID_ARGUMENT,
		NEED("predicates[1].values is NULL", "value_count = 2"));
	ovx_string_t nullval[2] = { { "/World", 6 }, { NULL, 3 } };
	reject1(&f, AS("usd-path"), OVSTAGE_FILTER_OP_IN, nullval, 2, OVSTAGE_ERROR_INVALID_ARGUMENT,
		NEED("predicates[1].values[1]", "NULL ptr"));
	/* Outside the support matrix. */
	ovx_string_t one = { "1", 1 };
	reject1(&f, AS("usd-active"), OVSTAGE_FILTER_OP_HAS, NULL, 0, OVSTAGE_ERROR_NOT_SUPPORTED,
		NEED("predicates[1]", "usd-active", "HAS"));
	reject1(&f, AS("usd-active"), OVSTAGE_FILTER_OP_IN, &one, 1, OVSTAGE_ERROR_NOT_SUPPORTED,
		NEED("predicates[1]", "usd-active", "IN"));
	static const ovstage_filter_op_t cmp[] = { OVSTAGE_FILTER_OP_LT, OVSTAGE_FILTER_OP_LE, OVSTAGE_FILTER_OP_GT,
						   OVSTAGE_FILTER_OP_GE };
	static const char *const cmpn[] = { "LT on", "LE on", "GT on", "GE on" };
	ovx_string_t twov[2] = { { "1", 1 }, { "2", 1 } }, bad = { "1.5x", 4 };
	for (int i = 0; i < 4; i++) {
		/* value comparisons (an extension): one operand, a number */
		reject1(&f, A(f.t_count), cmp[i], twov, 2, OVSTAGE_ERROR_INVALID_ARGUMENT,
			NEED("predicates[1]", "exactly one value", "example:count"));
		reject1(&f, A(f.t_count), cmp[i], &bad, 1, OVSTAGE_ERROR_INVALID_ARGUMENT,
			NEED("predicates[1].values[0] = \"1.5x\"", "not a number"));
		reject1(&f, AS("usd-path"), cmp[i], &one, 1, OVSTAGE_ERROR_NOT_SUPPORTED,
			NEED("predicates[1]", cmpn[i], "usd-path"));
	}
	reject1(&f, A(f.t_count), OVSTAGE_FILTER_OP_IN, &bad, 1, OVSTAGE_ERROR_INVALID_ARGUMENT,
		NEED("predicates[1].values[0]", "not a number"));
	/* OR needs a predicate on each side */
	reject1(&f, A(f.t_count), OVSTAGE_FILTER_OP_EXT_OR, NULL, 0, OVSTAGE_ERROR_INVALID_ARGUMENT,
		NEED("predicates[1]", "OR", "empty group"));
	reject1(&f, A(f.t_count), OVSTAGE_FILTER_OP_CONTAINS, &one, 1, OVSTAGE_ERROR_NOT_SUPPORTED,
		NEED("predicates[1]", "CONTAINS on \"example:count\""));
	reject1(&f, A(f.t_count), OVSTAGE_FILTER_OP_PREFIX, &one, 1, OVSTAGE_ERROR_NOT_SUPPORTED,
		NEED("predicates[1]", "PREFIX on \"example:count\""));
	ovx_string_t w = { "/World", 6 };
	reject1(&f, AS("usd-path"), OVSTAGE_FILTER_OP_CONTAINS, &w, 1, OVSTAGE_ERROR_NOT_SUPPORTED,
		NEED("predicates[1]", "CONTAINS on \"usd-path\""));
	reject1(&f, AS("usd-parent"), OVSTAGE_FILTER_OP_PREFIX, &w, 1, OVSTAGE_ERROR_NOT_SUPPORTED,
		NEED("predicates[1]", "PREFIX on \"usd-parent\""));
	reject1(&f, AS("usd-parent"), OVSTAGE_FILTER_OP_CONTAINS, &w, 1, OVSTAGE_ERROR_NOT_SUPPORTED,
		NEED("CONTAINS on \"usd-parent\""));
	reject1(&f, AS("usd-children"), OVSTAGE_FILTER_OP_IN, &w, 1, OVSTAGE_ERROR_NOT_SUPPORTED,
		NEED("IN on \"usd-children\""));
	reject1(&f, AS("usd-prim-type"), OVSTAGE_FILTER_OP_PREFIX, &one, 1, OVSTAGE_ERROR_NOT_SUPPORTED,
		NEED("PREFIX on \"usd-prim-type\""));
	reject1(&f, AS("usd-prim-type"), OVSTAGE_FILTER_OP_CONTAINS, &one, 1, OVSTAGE_ERROR_NOT_SUPPORTED,
		NEED("CONTAINS on \"usd-prim-type\""));
	ovx_string_t shadow = { "ShadowAPI", 9 };
	reject1(&f, AS("usd-schemas"), OVSTAGE_FILTER_OP_IN, &shadow, 1, OVSTAGE_ERROR_NOT_SUPPORTED,
		NEED("IN on \"usd-schemas\""));
	/* Path values. */
	static const char *const badp[] = { "World", "/World/", "/a//b", "", "//" };
	for (size_t i = 0; i < sizeof badp / sizeof badp[0]; i++) {
		ovx_string_t v[2] = { { "/World", 6 }, { badp[i], strlen(badp[i]) } };
		reject1(&f, AS("usd-path"), OVSTAGE_FILTER_OP_IN, v, 2, OVSTAGE_ERROR_INVALID_ARGUMENT,
			NEED("predicates[1].values[1]", "not a valid absolute prim path"));
		reject1(&f, AS("usd-parent"), OVSTAGE_FILTER_OP_IN, v, 2, OVSTAGE_ERROR_INVALID_ARGUMENT,
			NEED("predicates[1].values[1]", "usd-parent"));
		reject1(&f, AS("usd-children"), OVSTAGE_FILTER_OP_CONTAINS, v, 2, OVSTAGE_ERROR_INVALID_ARGUMENT,
			NEED("predicates[1].values[1]", "usd-children"));
	}
	ovx_string_t nul = { "/Wor\0ld", 7 };
	reject1(&f, AS("usd-path"), OVSTAGE_FILTER_OP_IN, &nul, 1, OVSTAGE_ERROR_INVALID_ARGUMENT,
		NEED("predicates[1].values[0]"));
	ovx_string_t tnul = { "Me\0sh", 5 };
	reject1(&f, AS("usd-prim-type"), OVSTAGE_FILTER_OP_IN, &tnul, 1, OVSTAGE_ERROR_INVALID_ARGUMENT,
		NEED("predicates[1].values[0]", "NUL"));
	/* The first offending predicate is reported. */
	ovstage_predicate_t two[2] = { { AS("usd-active"), OVSTAGE_FILTER_OP_HAS, NULL, 0 },
				       { A(f.t_count), OVSTAGE_FILTER_OP_LT, &one, 1 } };
	ovstage_filter_t ft = { two, 2 };
	expect_reject(&f, &ft, NULL, 0, OVSTAGE_ERROR_NOT_SUPPORTED, NEED("predicates[0]", "usd-active"));
	/* Nothing leaked into the handle table: a valid query still works afterwards. */
	ovstage_enqueue_result_t e = ovstage_query(f.st, NULL, NULL, 0, &h);
	wait_ok(&f, e);
	release_q(&f, h);
	teardown(&f);
}
END_TEST

/* ---- concurrency ----------------------------------------------------------------------------- */

#define STRESS_PRIMS 64
#define STRESS_ROUNDS 40

typedef struct stress {
	fixture *f;
	ovstage_query_handle_t one[STRESS_PRIMS]; /* single-prim path-list queries */
	_Atomic uint64_t sealed;                  /* rounds sealed so far (release by the writer) */
	_Atomic int failures;
} stress;

/* Writer: round k writes example:count on prim k, then seals k. */
static void *stress_writer(void *arg)
{
	stress *s = arg;
	fixture *f = s->f;
	for (uint64_t k = 1; k <= STRESS_ROUNDS; k++) {
		int32_t v = (int32_t)k;
		tensor1 tt;
		ovstage_write_data_t w = tdata(&tt, &v, 1, kDLInt, 32);
		ovstage_enqueue_result_t e =
			ovstage_write_attribute(f->st, s->one[k - 1], A(f->t_count), k, w, OVSTAGE_PRIM_MODE_UPSERT);
		ovstage_op_wait_result_t wr;
		if (e.status != OVSTAGE_OK || ovstage_wait_op(f->st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr) ||
		    wr.error_op_id_count)
			atomic_fetch_add_explicit(&s->failures, 1, memory_order_relaxed);
		if (e.status == OVSTAGE_OK)
			ovstage_release_op(f->st, e.op_index);
		ovstage_write_floor_desc_t d = { k, OVSTAGE_SCOPE_ALL, NULL, 0 };
		e = ovstage_advance_write_floor(f->st, &d);
		if (e.status != OVSTAGE_OK || ovstage_wait_op(f->st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr) ||
		    wr.error_op_id_count)
			atomic_fetch_add_explicit(&s->failures, 1, memory_order_relaxed);
		if (e.status == OVSTAGE_OK)
			ovstage_release_op(f->st, e.op_index);
		/* release: a querier that reads k afterwards must see at least k matches. */
		atomic_store_explicit(&s->sealed, k, memory_order_release);
	}
	return NULL;
}

/* Querier: HAS example:count; the match count never drops below what was sealed before the query
 * was enqueued, and every match really has a value (checked by a read through the query). */
static void *stress_querier(void *arg)
{
	stress *s = arg;
	fixture *f = s->f;
	ovstage_predicate_t p = { A(f->t_count), OVSTAGE_FILTER_OP_HAS, NULL, 0 };
	ovstage_filter_t flt = { &p, 1 };
	for (;;) {
		/* acquire: pairs with the writer's release. */
		uint64_t before = atomic_load_explicit(&s->sealed, memory_order_acquire);
		ovstage_query_handle_t h;
		ovstage_enqueue_result_t e = ovstage_query(f->st, &flt, NULL, 0, &h);
		if (e.status != OVSTAGE_OK) {
			atomic_fetch_add_explicit(&s->failures, 1, memory_order_relaxed);
			break;
		}
		/* A read submitted right away: ordered after the query, sees its prims. */
		ovstage_read_handle_t rh;
		ovstage_ordinal_range_t range = { 0, STRESS_ROUNDS, false };
		ovstage_enqueue_result_t re = ovstage_read_attributes(f->st, h, &f->t_count, 1, range, &rh);
		ovstage_query_result_t r;
		if (ovstage_fetch_query_result(f->st, h, OVSTAGE_TIMEOUT_INFINITE, &r) != OVSTAGE_OK) {
			atomic_fetch_add_explicit(&s->failures, 1, memory_order_relaxed);
		} else {
			if (r.total_prim_count < before || r.total_prim_count > STRESS_ROUNDS)
				atomic_fetch_add_explicit(&s->failures, 1, memory_order_relaxed);
			ovstage_release_query_result(f->st, &r);
		}
		ovstage_op_wait_result_t wr;
		ovstage_wait_op(f->st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr);
		ovstage_release_op(f->st, e.op_index);
		if (re.status == OVSTAGE_OK) {
			ovstage_wait_op(f->st, re.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr);
			ovstage_release_op(f->st, re.op_index);
			ovstage_read_group_t g;
			/* The read may legitimately fail only if the floor check trips; here every write is
			 * sealed before the next, but a later unsealed write can exist: accept failure. */
			while (ovstage_fetch_read_next(f->st, rh, OVSTAGE_TIMEOUT_INFINITE, &g) == OVSTAGE_OK) {
				const int32_t *d = g.data.tensors[0].data;
				for (uint32_t i = 0; i < g.prims.count; i++) {
					uint32_t row = g.data.index_map ? g.data.index_map[i] : i;
					if (d[row] < 1 || d[row] > STRESS_ROUNDS)
						atomic_fetch_add_explicit(&s->failures, 1, memory_order_relaxed);
				}
				ovstage_release_group(f->st, &g);
			}
			ovstage_enqueue_result_t rr = ovstage_release_read(f->st, rh);
			ovstage_wait_op(f->st, rr.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr);
			ovstage_release_op(f->st, rr.op_index);
		} else if (re.status != OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION) {
			/* The floor check may trip at the call too: when the query's op finished before this
			 * read was submitted, the read is known at the call to reach above the floor while a
			 * later write is unsealed (defect 5: reported at the call, not at wait_op). */
			atomic_fetch_add_explicit(&s->failures, 1, memory_order_relaxed);
		}
		ovstage_enqueue_result_t rq = ovstage_release_query(f->st, h);
		ovstage_wait_op(f->st, rq.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr);
		ovstage_release_op(f->st, rq.op_index);
		if (before == STRESS_ROUNDS)
			break;
	}
	return NULL;
}

START_TEST(test_concurrent_queries)
{
	fixture f;
	setup_bare(&f);
	stress s;
	memset(&s, 0, sizeof s);
	s.f = &f;
	atomic_init(&s.sealed, 0);
	atomic_init(&s.failures, 0);
	for (int i = 0; i < STRESS_PRIMS; i++) {
		char name[32];
		snprintf(name, sizeof name, "/S/P%02d", i);
		const char *pp[] = { name };
		s.one[i] = query_of(&f, pp, 1, NULL);
	}
	pthread_t wt, qt[3];
	ck_assert_int_eq(pthread_create(&wt, NULL, stress_writer, &s), 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(pthread_create(&qt[i], NULL, stress_querier, &s), 0);
	pthread_join(wt, NULL);
	for (int i = 0; i < 3; i++)
		pthread_join(qt[i], NULL);
	ck_assert_int_eq(atomic_load(&s.failures), 0);
	char got[4096];
	ovstage_predicate_t p = { A(f.t_count), OVSTAGE_FILTER_OP_HAS, NULL, 0 };
	ovstage_filter_t flt = { &p, 1 };
	ovstage_query_handle_t h = run_query(&f, &flt, NULL, 0, got, sizeof got);
	ck_assert_str_eq(got, "/S/P00 /S/P01 /S/P02 /S/P03 /S/P04 /S/P05 /S/P06 /S/P07 /S/P08 /S/P09 /S/P10 /S/P11 "
			      "/S/P12 /S/P13 /S/P14 /S/P15 /S/P16 /S/P17 /S/P18 /S/P19 /S/P20 /S/P21 /S/P22 /S/P23 "
			      "/S/P24 /S/P25 /S/P26 /S/P27 /S/P28 /S/P29 /S/P30 /S/P31 /S/P32 /S/P33 /S/P34 /S/P35 "
			      "/S/P36 /S/P37 /S/P38 /S/P39");
	release_q(&f, h);
	for (int i = 0; i < STRESS_PRIMS; i++)
		release_q(&f, s.one[i]);
	teardown(&f);
}
END_TEST

/* ---- runner ---------------------------------------------------------------------------------- */

static Suite *query_suite(void)
{
	Suite *s = suite_create("query");
	TCase *tc = tcase_create("filter");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_prim_type_in);
	tcase_add_test(tc, test_path_prefix);
	tcase_add_test(tc, test_path_in);
	tcase_add_test(tc, test_parent_in);
	tcase_add_test(tc, test_children_contains);
	tcase_add_test(tc, test_has);
	tcase_add_test(tc, test_and);
	tcase_add_test(tc, test_null_filter);
	tcase_add_test(tc, test_order);
	tcase_add_test(tc, test_committed_only);
	tcase_add_test(tc, test_schemas_contains);
	tcase_add_test(tc, test_fetch_result);
	tcase_add_test(tc, test_deferred_read);
	tcase_add_test(tc, test_deferred_write);
	tcase_add_test(tc, test_release_with_read_in_flight);
	tcase_add_test(tc, test_failed_query);
	tcase_add_test(tc, test_rejections);
	tcase_add_test(tc, test_value_predicates);
	tcase_add_test(tc, test_value_predicates_dtypes);
	tcase_add_test(tc, test_concurrent_queries);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(query_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
