/*
 * fuzz/fuzz_api.c — libFuzzer target: decodes bytes into a sequence of API calls on three virtual
 * threads' worth of handles (queries, reads and their groups, map sessions, ordinal queries) over a
 * fresh instance per input, and checks every status and every value read against a small reference
 * model of the stage (fuzz/README.md, "fuzz_api").
 *
 * The model: 8 prims (two subtrees that clones copy between), 3 fixed-size columns whose dtype is
 * fixed by their first successful write or map. Every mutation (write, attribute or whole-prim
 * delete, clone, map commit) is recorded as pending at (ordinal, submission order); a floor advance
 * applies the pending mutations at ordinals <= N of the columns in scope, ordinal by ordinal, each
 * ordinal one version; the column keeps the newest `retention` versions (the frontier is the
 * ordinal of the newest version dropped). Reads are checked against it: latest reads (values as of
 * N; the newest version's when the state as of N left retention, as 0.2.1), range reads (keys whose last change as of b is in [a, b], values as of b, deletes as
 * is_delete groups, whatever a while b's version is retained; as 0.2.1 beyond that: m_range),
 * WRITE_FLOOR_VIOLATION above a floor with pending writes, OUT_OF_RANGE from the op (a range read
 * that cannot be answered), the statuses wait_op returns for
 * failed ops (0.2.1's documented ones), and held groups keep their values while later seals
 * proceed. Read-current maps (ovstage_ext_map_attribute, OVSTAGE_EXT_MAP_READ_CURRENT) are checked
 * too: refused at the call while the column has pending writes or open sessions, or when a new
 * column gets no dtype; their buffer holds the sealed state as of the call (zero for prims without
 * a value) when it is fetched, whatever ran since, and half of it is committed as read (modified in
 * place).
 *
 * Every op is waited right after it is submitted (each outcome is then deterministic, and a finding
 * replays from its input alone); handles, groups and map sessions live across commands. The one
 * wait that cannot come at once — a floor advance through an open map's ordinal — is avoided by
 * committing such maps first, as a producer would (a session whose map op failed does not hold the
 * advance: it is left open, and unmapped later).
 */
#include "fuzz_common.h"

#include <sanitizer/lsan_interface.h>

#include <ovstage/ovstage_ext.h>

#define NP 8        /* prims of the universe */
#define NA 3        /* model columns */
#define NV 3        /* virtual threads */
#define NQS 2       /* query slots per virtual thread */
#define NG 6        /* held groups per virtual thread */
#define NL 6        /* path lists */
#define MAXPEND 256 /* pending mutations per column */
#define MAXVER 96   /* versions per column (history kept whole by the model) */
#define MAXSTALE 16 /* stale handles remembered */
#define RETENTION 2 /* the default (OVSTAGE_RETENTION) */

static const char *const P[NP] = { "/W/A", "/W/B", "/W/A/C", "/X", "/W/D", "/W/D/C", "/Y", "/Y/C" };
/* path lists (prim indices), in query order */
static const int LISTS[NL][NP + 1] = {
	{ 4, 0, 1, 2, 3 },             /* the first four */
	{ 2, 1, 3 },                   /* a subset */
	{ 0 },                         /* empty */
	{ 3, 3, 2, 0 },                /* reordered */
	{ 4, 4, 5, 6, 7 },             /* the clone targets */
	{ 8, 0, 1, 2, 3, 4, 5, 6, 7 }, /* everything */
};
static const char *const ANAMES[NA] = { "a", "b", "c" };
/* the dtypes a column may take */
#define ND 3
static const DLDataType DT[ND] = { { kDLFloat, 32, 1 }, { kDLInt, 32, 1 }, { kDLInt, 32, 2 } };
static inline unsigned dt_bytes(int d) { return d == 2 ? 8u : 4u; }

/* ---- the model ------------------------------------------------------------------------------- */

typedef struct {
	bool present[NP];
	uint64_t val[NP];
} mstate;

typedef struct {
	uint64_t ord, seq;
	int prim;
	bool tomb;
	uint64_t val;
} mmut;

typedef struct {
	uint64_t ord;
	mstate s;
	bool changed[NP];
} mver;

typedef struct {
	bool created;        /* the engine has a record of the column (its floor is then its own) */
	int dtype;           /* -1: no schema */
	uint64_t floor;
	mmut pend[MAXPEND];
	int npend;
	uint64_t max_written; /* highest ordinal of a succeeded op naming the column (writes, attribute
	                       * deletes, maps: from the map op on); above the floor, reads above it fail */
	mver ver[MAXVER];    /* every version, oldest first */
	int nver;
	uint64_t dropped;    /* ordinal of the newest version that left retention (0: none) */
	mstate head;         /* the sealed state (newest version) */
	bool has_row[NP];    /* the prim has a row in the column (a tombstone then counts as a change) */
} mcol;

typedef struct {
	mcol col[NA];
	bool exists[NP];
	uint64_t all_floor;
	uint64_t seq;
	bool overflow;       /* the model ran out of room: stop checking values for this input */
} model;

/* ---- the harness state ----------------------------------------------------------------------- */

typedef struct {
	ovstage_read_group_t g;
	int attr;            /* model column, -1 for other (derived) columns */
	int list;            /* the query's list */
	int nexp;            /* expected (position, value) entries, checked again at release */
	int pos[NP];
	uint64_t val[NP];
	bool used;
} held_group;

typedef struct {
	ovstage_query_handle_t q[NQS];
	int qlist[NQS];
	held_group g[NG];
	/* an open map session */
	ovstage_map_handle_t mh;
	ovstage_op_id_t mop;  /* its op, waited (kept until the session ends) */
	bool m_ok;            /* the map op succeeded */
	ovstage_api_status_t m_fail; /* else its status (fetch_map_next returns it) */
	int m_attr, m_list, m_dtype;
	uint64_t m_ord;
	bool m_rmw;           /* a read-current session (OVSTAGE_EXT_MAP_READ_CURRENT) */
	uint64_t m_exp[NP];   /* its buffer's expected values, by query position (the sealed state at the
	                       * call; zero for prims without a value) */
} vthread;

static struct {
	ovstage_instance_t *st, *other;
	path_dictionary_instance_t *pd;
	ovx_primpath_list_t lists[NL];
	ovx_token_t tok[NA];
	ovstage_query_handle_t other_q;
	vthread vt[NV];
	uint64_t stale[MAXSTALE];
	int nstale;
	model m;
	uint64_t gen;
} H;

static uint64_t iterations, executed_calls;
static int fz_debug; /* FZ_DEBUG set: a trace of the commands on stderr */

/* ---- small helpers --------------------------------------------------------------------------- */

static int list_len(int l) { return LISTS[l][0]; }
static int list_prim(int l, int i) { return LISTS[l][1 + i]; }

static void expect_message(const char *what)
{
	ovx_string_t e = ovstage_get_last_error();
	FZ_CHECK(e.length > 0 && e.ptr != NULL, "%s: rejected without a message", what);
}

/* The statuses wait_op returns for a done op beside OK: 0.2.1's documented status of an op that
 * itself failed with one of them (docs/errors.md). */
static bool wait_status_documented(ovstage_api_status_t s)
{
	return s == OVSTAGE_ERROR_PRIM_NOT_FOUND || s == OVSTAGE_ERROR_NOT_FOUND ||
	       s == OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION || s == OVSTAGE_ERROR_OUT_OF_RANGE;
}

/* The outcome of an accepted op as wait_op reports it: OK (nothing failed); the waited op's own
 * documented status (wait_status_documented: it failed with it, the failure listed); or OP_FAILED
 * for any other failure (wait_op OK with the failed ids listed: another status, or a failure of an
 * op it depended on). Callers compare it with the model's exact expectation. */
static ovstage_api_status_t wait_outcome(ovstage_op_id_t op, char *msg, size_t msglen)
{
	ovstage_op_wait_result_t w;
	memset(&w, 0, sizeof w);
	ovstage_api_status_t s = ovstage_wait_op(H.st, op, OVSTAGE_TIMEOUT_INFINITE, &w);
	FZ_CHECK(s == OVSTAGE_OK || (w.error_op_id_count > 0 && wait_status_documented(s)),
		 "wait_op(%" PRIu64 ") = %d with %zu failures", op, (int)s, w.error_op_id_count);
	ovstage_api_status_t out = OVSTAGE_OK;
	if (msg && msglen)
		msg[0] = 0;
	for (size_t i = 0; i < w.error_op_id_count; i++) {
		ovx_string_t e = ovstage_get_last_op_error(H.st, w.error_op_ids[i]);
		/* the root cause (first) has the message; a dependent op's own is empty */
		if (fz_debug)
			fprintf(stderr, "wait %" PRIu64 " = %d: failed[%zu] = %" PRIu64 " '%.*s'\n", op, (int)s, i,
				w.error_op_ids[i], (int)e.length, e.ptr ? e.ptr : "");
		FZ_CHECK(i > 0 || e.length > 0, "failed op %" PRIu64 " without a message", w.error_op_ids[i]);
		if (msg && msglen && !msg[0])
			snprintf(msg, msglen, "%.*s", (int)e.length, e.ptr);
		out = s != OVSTAGE_OK ? s : OVSTAGE_ERROR_OP_FAILED;
	}
	FZ_CHECK(ovstage_release_op(H.st, op) == OVSTAGE_OK, "release_op");
	FZ_CHECK(ovstage_release_op(H.st, op) == OVSTAGE_ERROR_INVALID_HANDLE, "second release_op of %" PRIu64
		 " not INVALID_HANDLE", op);
	return out;
}

static void remember_stale(uint64_t h)
{
	if (h)
		H.stale[H.nstale++ % MAXSTALE] = h;
}

static uint64_t pick_stale(fz_in *in)
{
	int n = H.nstale < MAXSTALE ? H.nstale : MAXSTALE;
	if (!n)
		return 987654321u;
	return H.stale[fz_u8(in) % n];
}

static uint64_t next_val(int prim)
{
	/* distinct per element written; the low 32 bits alone stay distinct for 2^24 writes */
	return (++H.gen << 3 | (uint64_t)prim) & 0x7fffffffu;
}

static uint64_t lanes_val(uint64_t v, int dtype)
{
	return dtype == 2 ? (v | (uint64_t)(v ^ 0x5a5a5a5au) << 32) : v;
}

/* The ordinal a command targets: mostly just above the floor, sometimes at or below it, huge. */
static uint64_t pick_ord(fz_in *in, uint64_t floor)
{
	uint8_t b = fz_u8(in);
	switch (b >> 5) {
	case 0: case 1: case 2: case 3: return floor + 1 + (b & 3);
	case 4: return floor + 1 + (b & 15);
	case 5: return floor > (b & 1) ? floor - (b & 1) : 0; /* at or below */
	case 6: return 0;
	default: return UINT64_MAX - (b & 1);
	}
}

/* ---- model operations ------------------------------------------------------------------------ */

static void m_push(int a, uint64_t ord, uint64_t seq, int prim, bool tomb, uint64_t val)
{
	mcol *c = &H.m.col[a];
	if (c->npend == MAXPEND) {
		H.m.overflow = true;
		return;
	}
	c->pend[c->npend++] = (mmut){ ord, seq, prim, tomb, val };
}

static void m_create_col(int a)
{
	mcol *c = &H.m.col[a];
	if (!c->created) {
		c->created = true;
		c->floor = H.m.all_floor;
	}
}

static int mut_cmp(const void *x, const void *y)
{
	const mmut *a = x, *b = y;
	if (a->ord != b->ord)
		return a->ord < b->ord ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Seals column a through n: one version per pending ordinal <= n, in (ordinal, submission) order. */
static void m_seal_col(int a, uint64_t n)
{
	mcol *c = &H.m.col[a];
	if (n <= c->floor)
		return;
	qsort(c->pend, (size_t)c->npend, sizeof c->pend[0], mut_cmp);
	int i = 0;
	while (i < c->npend && c->pend[i].ord <= n) {
		uint64_t o = c->pend[i].ord;
		if (c->nver == MAXVER) {
			H.m.overflow = true;
			return;
		}
		mver *v = &c->ver[c->nver];
		v->ord = o;
		v->s = c->head;
		memset(v->changed, 0, sizeof v->changed);
		for (; i < c->npend && c->pend[i].ord == o; i++) {
			const mmut *u = &c->pend[i];
			if (u->prim < 0)
				continue; /* a write that selected nothing: a version all the same */
			v->changed[u->prim] = true;
			v->s.present[u->prim] = !u->tomb;
			v->s.val[u->prim] = u->tomb ? 0 : u->val;
		}
		c->head = v->s;
		c->nver++;
		if (c->nver > RETENTION) /* the newest version beyond the retention depth */
			c->dropped = c->ver[c->nver - RETENTION - 1].ord;
	}
	memmove(c->pend, c->pend + i, (size_t)(c->npend - i) * sizeof c->pend[0]);
	c->npend -= i;
	c->floor = n;
}

static void m_written(int a, uint64_t ord)
{
	if (ord > H.m.col[a].max_written)
		H.m.col[a].max_written = ord;
}

/* ---- group decoding -------------------------------------------------------------------------- */

/* Element bytes of row r of a 1-D tensor of the given dtype. */
static uint64_t tensor_row(const DLTensor *t, uint32_t r, int dtype)
{
	FZ_CHECK(t->ndim == 1 && t->shape && (uint64_t)r < (uint64_t)t->shape[0], "row %u outside the tensor", r);
	FZ_CHECK(t->dtype.code == DT[dtype].code && t->dtype.bits == DT[dtype].bits &&
			 t->dtype.lanes == DT[dtype].lanes,
		 "group dtype (%u, %u, %u), column dtype %d", t->dtype.code, t->dtype.bits, t->dtype.lanes, dtype);
	FZ_CHECK(t->strides == NULL || t->strides[0] == 1 || t->shape[0] <= 1, "non-compact group tensor");
	const uint8_t *p = (const uint8_t *)t->data + t->byte_offset + (size_t)r * dt_bytes(dtype);
	uint64_t v = 0;
	memcpy(&v, p, dt_bytes(dtype));
	return v;
}

/* Query positions covered by a group and, for value groups, their values. Returns the count. */
static int decode_group(const ovstage_read_group_t *g, int list, int dtype, int *pos, uint64_t *val)
{
	int nq = list_len(list);
	const ovstage_prim_group_t *pg = &g->prims;
	FZ_CHECK(pg->count <= (uint32_t)nq, "group covers %u prims of a %d-prim query", pg->count, nq);
	const ovstage_data_t *d = &g->data;
	if (g->is_delete)
		FZ_CHECK(d->tensor_count == 0, "tombstone group with tensors");
	else
		FZ_CHECK(d->tensor_count == 1 && d->tensors, "fixed-size group with %u tensors", d->tensor_count);
	FZ_CHECK(!(d->index_map && d->mask), "index_map and mask together");
	FZ_CHECK((d->count != 0) == (d->index_map != NULL || d->mask != NULL), "data.count %u with maps %p %p",
		 d->count, (const void *)d->index_map, (const void *)d->mask);
	FZ_CHECK(d->count == 0 || d->count == pg->count, "data.count %u for %u prims", d->count, pg->count);
	int k = 0;
	for (uint32_t j = 0; j < pg->count; j++) {
		uint32_t p = pg->index_map ? pg->index_map[j] : pg->offset + j;
		FZ_CHECK(p < (uint32_t)nq, "group prim position %u outside the %d-prim query", p, nq);
		if (d->mask && !((d->mask[j / 64] >> (j % 64)) & 1))
			continue;
		pos[k] = (int)p;
		if (!g->is_delete)
			val[k] = tensor_row(&d->tensors[0], d->index_map ? d->index_map[j] : j, dtype);
		k++;
	}
	return k;
}

static int attr_of_token(ovx_token_t t)
{
	for (int a = 0; a < NA; a++)
		if (H.tok[a] == t)
			return a;
	return -1;
}

/* ---- commands -------------------------------------------------------------------------------- */

/* A query handle for a command: a live slot's (with its list), or a stale, foreign or bogus one
 * (list -1: the call must give INVALID_HANDLE). */
static ovstage_query_handle_t pick_query(fz_in *in, vthread *t, int *list)
{
	uint8_t b = fz_u8(in);
	*list = -1;
	switch (b >> 5) {
	case 6:
		return pick_stale(in);
	case 7:
		if (b & 1) {
			if (H.other_q)
				return H.other_q;
		}
		return (b & 2) ? OVSTAGE_INVALID_QUERY_HANDLE : 0x1234567ull;
	default: {
		int s = b & 1;
		if (!t->q[s]) { /* create it on first use */
			int l = (b >> 1) % NL;
			ovstage_query_handle_t q = 0;
			FZ_CHECK(ovstage_query_from_path_list(H.st, H.lists[l], &q) == OVSTAGE_OK, "query_from_path_list");
			FZ_CHECK(q != OVSTAGE_INVALID_QUERY_HANDLE, "query without a handle");
			t->q[s] = q;
			t->qlist[s] = l;
		}
		*list = t->qlist[s];
		return t->q[s];
	}
	}
}

static void release_query_slot(vthread *t, int s)
{
	if (!t->q[s])
		return;
	ovstage_enqueue_result_t e = ovstage_release_query(H.st, t->q[s]);
	fz_check_enqueue(e, "release_query");
	FZ_CHECK(e.status == OVSTAGE_OK, "release_query of a live query = %d", (int)e.status);
	FZ_CHECK(wait_outcome(e.op_index, NULL, 0) == OVSTAGE_OK, "release_query failed");
	remember_stale(t->q[s]);
	t->q[s] = 0;
}

/* write_attribute / write_attributes of one column over a query, full, masked or index-mapped. */
static void cmd_write(fz_in *in, vthread *t)
{
	int list;
	ovstage_query_handle_t q = pick_query(in, t, &list);
	uint8_t b = fz_u8(in);
	int a = b % NA;
	int dt = (b >> 2) % ND;
	mcol *c = &H.m.col[a];
	if ((b & 0x40) && c->dtype >= 0)
		dt = c->dtype; /* mostly the column's own dtype, once it has one */
	int sparse = (b >> 4) & 3; /* 0, 3: all elements; 1: mask; 2: index map */
	ovstage_prim_mode_t mode = (b & 0x80) ? OVSTAGE_PRIM_MODE_INSERT : OVSTAGE_PRIM_MODE_UPSERT;
	uint64_t ord = pick_ord(in, c->created ? c->floor : H.m.all_floor);
	uint8_t mb = fz_u8(in);
	int nq = list >= 0 ? list_len(list) : 4;
	uint8_t buf[NP * 8];
	uint32_t imap[NP];
	uint64_t mask = 0;
	bool sel[NP];
	uint64_t vals[NP]; /* per query element */
	for (int i = 0; i < nq; i++) {
		sel[i] = sparse != 1 || ((mb >> i) & 1);
		if (sel[i])
			mask |= (uint64_t)1 << i;
		imap[i] = (uint32_t)((i + mb) % (nq ? nq : 1)); /* a rotation */
		if (sparse == 2 && nq > 1 && (mb & 0x80))
			imap[i] = (uint32_t)(nq - 1 - i); /* or a reversal */
		vals[i] = lanes_val(next_val(list >= 0 ? list_prim(list, i) : i), dt);
	}
	/* tensor row r holds the value of the element whose index map names r */
	for (int i = 0; i < nq; i++) {
		uint32_t r = sparse == 2 ? imap[i] : (uint32_t)i;
		memcpy(buf + (size_t)r * dt_bytes(dt), &vals[i], dt_bytes(dt));
	}
	int64_t shape[1] = { nq };
	DLTensor tt;
	memset(&tt, 0, sizeof tt);
	tt.data = nq ? buf : NULL;
	tt.device.device_type = kDLCPU;
	tt.ndim = 1;
	tt.dtype = DT[dt];
	tt.shape = shape;
	ovstage_write_data_t w;
	memset(&w, 0, sizeof w);
	w.tensors = &tt;
	w.tensor_count = 1;
	if (sparse == 1 && nq) {
		w.count = (uint32_t)nq;
		w.mask = &mask;
	} else if (sparse == 2 && nq) {
		w.count = (uint32_t)nq;
		w.index_map = imap;
	}
	ovx_string_or_token_t attr = { H.tok[a], { NULL, 0 } };
	if (mb & 0x40) { /* by name */
		attr.token = 0;
		attr.string.ptr = ANAMES[a];
		attr.string.length = strlen(ANAMES[a]);
	}
	ovstage_enqueue_result_t e;
	if (b & 8) {
		ovstage_attribute_write_t aw = { attr, w };
		e = ovstage_write_attributes(H.st, q, &aw, 1, ord, mode);
	} else {
		e = ovstage_write_attribute(H.st, q, attr, ord, w, mode);
	}
	executed_calls++;
	fz_check_enqueue(e, "write");
	if (fz_debug)
		fprintf(stderr, "  write %s list %d dtype %d sparse %d mode %d ord %" PRIu64 " = %d\n", ANAMES[a], list, dt,
			sparse, (int)mode, ord, (int)e.status);
	/* expected status at the call */
	ovstage_api_status_t want = OVSTAGE_OK;
	if (list < 0)
		want = OVSTAGE_ERROR_INVALID_HANDLE;
	else if (c->dtype >= 0 && dt != c->dtype && nq)
		want = OVSTAGE_ERROR_INVALID_ARGUMENT;
	else if (ord <= (c->created ? c->floor : H.m.all_floor))
		want = OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION;
	if (e.status == OVSTAGE_OK)
		m_create_col(a); /* the column's record exists from the admission on (a refused call: none) */
	if (e.status != OVSTAGE_OK) {
		FZ_CHECK(e.status == want, "write(%s, list %d, dtype %d (column %d), ord %" PRIu64 " floor %" PRIu64
			 ") = %d, model %d", ANAMES[a], list, dt, c->dtype, ord, c->floor, (int)e.status, (int)want);
		expect_message("write");
		return;
	}
	FZ_CHECK(want == OVSTAGE_OK, "write(%s, list %d, dtype %d (column %d), ord %" PRIu64 " floor %" PRIu64
		 ") accepted, model %d", ANAMES[a], list, dt, c->dtype, ord, c->floor, (int)want);
	bool insert_fail = false;
	for (int i = 0; i < nq && mode == OVSTAGE_PRIM_MODE_INSERT; i++)
		if (sel[i] && H.m.exists[list_prim(list, i)])
			insert_fail = true;
	uint64_t seq = ++H.m.seq;
	char msg[300];
	ovstage_api_status_t s = wait_outcome(e.op_index, msg, sizeof msg);
	/* INSERT onto an existing prim: PRIM_NOT_FOUND, as 0.2.1 documents it */
	FZ_CHECK(s == (insert_fail ? OVSTAGE_ERROR_PRIM_NOT_FOUND : OVSTAGE_OK), "write(%s, list %d, INSERT %d) op = %d, "
		 "model %s (%s)", ANAMES[a], list, mode == OVSTAGE_PRIM_MODE_INSERT, (int)s,
		 insert_fail ? "PRIM_NOT_FOUND" : "OK", msg);
	if (s != OVSTAGE_OK)
		return;
	m_written(a, ord); /* even an empty write: reads above the floor then wait for its seal */
	if (!nq)
		return;
	if (c->dtype < 0)
		c->dtype = dt;
	m_push(a, ord, seq, -1, false, 0); /* the write's delta, even when its mask selects nothing */
	for (int i = 0; i < nq; i++) {
		if (!sel[i])
			continue;
		int p = list_prim(list, i);
		m_push(a, ord, seq, p, false, vals[i]);
		c->has_row[p] = true;
		H.m.exists[p] = true;
	}
}

/* delete_attributes: listed columns, or whole prims (no list). */
static void cmd_delete(fz_in *in, vthread *t)
{
	int list;
	ovstage_query_handle_t q = pick_query(in, t, &list);
	uint8_t b = fz_u8(in);
	bool whole = (b & 7) == 7;
	int na = whole ? 0 : 1 + ((b >> 3) & 1);
	int as[2] = { b % NA, (b / 3 + 1) % NA };
	if (na == 2 && as[0] == as[1])
		na = 1;
	ovx_string_or_token_t attrs[2];
	uint64_t fl = whole ? H.m.all_floor : UINT64_MAX;
	for (int i = 0; i < na; i++) {
		attrs[i] = (ovx_string_or_token_t){ H.tok[as[i]], { NULL, 0 } };
		mcol *c = &H.m.col[as[i]];
		uint64_t f = c->created ? c->floor : H.m.all_floor;
		fl = f < fl ? f : fl;
	}
	uint64_t ord = pick_ord(in, fl);
	ovstage_enqueue_result_t e = ovstage_delete_attributes(H.st, q, na ? attrs : NULL, (size_t)na, ord);
	executed_calls++;
	fz_check_enqueue(e, "delete");
	if (fz_debug)
		fprintf(stderr, "  delete list %d whole %d na %d (%s) ord %" PRIu64 " = %d\n", list, whole, na, ANAMES[as[0]],
			ord, (int)e.status);
	/* admission: above the floor of every named column (whole prims: of every column) */
	ovstage_api_status_t want = OVSTAGE_OK;
	if (list < 0)
		want = OVSTAGE_ERROR_INVALID_HANDLE;
	else if (whole) {
		for (int a = 0; a < NA; a++)
			if (H.m.col[a].created && ord <= H.m.col[a].floor)
				want = OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION;
		if (ord <= H.m.all_floor)
			want = OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION;
	} else {
		for (int i = 0; i < na; i++) {
			mcol *c = &H.m.col[as[i]];
			if (ord <= (c->created ? c->floor : H.m.all_floor))
				want = OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION;
		}
	}
	for (int i = 0; i < na && e.status == OVSTAGE_OK; i++)
		m_create_col(as[i]); /* an admitted delete creates the columns' records (a refused one: none) */
	if (e.status != OVSTAGE_OK) {
		FZ_CHECK(e.status == want, "delete(list %d, whole %d, ord %" PRIu64 ") = %d, model %d", list, whole, ord,
			 (int)e.status, (int)want);
		expect_message("delete");
		return;
	}
	FZ_CHECK(want == OVSTAGE_OK, "delete(list %d, whole %d, ord %" PRIu64 ") accepted, model %d", list, whole,
		 ord, (int)want);
	uint64_t seq = ++H.m.seq;
	FZ_CHECK(wait_outcome(e.op_index, NULL, 0) == OVSTAGE_OK, "delete op failed");
	int nq = list_len(list);
	for (int k = 0; k < (whole ? NA : na); k++) {
		int a = whole ? k : as[k];
		mcol *c = &H.m.col[a];
		if (whole && !c->created)
			continue;
		if (!whole)
			m_written(a, ord);
		for (int i = 0; i < nq; i++) {
			int p = list_prim(list, i);
			if (c->has_row[p])
				m_push(a, ord, seq, p, true, 0);
		}
	}
	if (whole)
		for (int i = 0; i < nq; i++)
			H.m.exists[list_prim(list, i)] = false;
}

/* advance_write_floor, ALL / INCLUDE / EXCLUDE. Open maps at ordinals <= N are committed first. */
static void map_commit(vthread *t, bool fill);
static void cmd_seal(fz_in *in)
{
	uint8_t b = fz_u8(in);
	ovstage_scope_t scope = (b & 3) == 3 ? OVSTAGE_SCOPE_ALL : (ovstage_scope_t)(b & 3);
	int a0 = (b >> 2) % NA;
	uint64_t base = H.m.col[a0].created ? H.m.col[a0].floor : H.m.all_floor;
	if (scope == OVSTAGE_SCOPE_ALL)
		base = H.m.all_floor;
	uint64_t n = (b & 0x80) ? base + ((b >> 4) & 7) : base + 1 + ((b >> 4) & 1);
	if ((b & 0x70) == 0x70)
		n = base > 0 ? base - 1 : 0; /* below: the floor never regresses */
	bool in_scope[NA];
	for (int a = 0; a < NA; a++)
		in_scope[a] = scope == OVSTAGE_SCOPE_ALL || ((a == a0) == (scope == OVSTAGE_SCOPE_INCLUDE));
	for (int v = 0; v < NV; v++) /* a failed session does not hold the advance: it stays open */
		if (H.vt[v].mh && H.vt[v].m_ok && H.vt[v].m_ord <= n && in_scope[H.vt[v].m_attr])
			map_commit(&H.vt[v], true);
	if (fz_debug)
		fprintf(stderr, "  seal %" PRIu64 " scope %d attr %s; floors %d:%" PRIu64 " %d:%" PRIu64 " %d:%" PRIu64 "\n", n,
			(int)scope, ANAMES[a0], H.m.col[0].created, H.m.col[0].floor, H.m.col[1].created, H.m.col[1].floor,
			H.m.col[2].created, H.m.col[2].floor);
	ovx_token_t tk = H.tok[a0];
	ovstage_write_floor_desc_t d = { n, scope, scope == OVSTAGE_SCOPE_ALL ? NULL : &tk,
					 scope == OVSTAGE_SCOPE_ALL ? 0 : 1 };
	ovstage_enqueue_result_t e = ovstage_advance_write_floor(H.st, &d);
	executed_calls++;
	fz_check_enqueue(e, "advance_write_floor");
	FZ_CHECK(e.status == OVSTAGE_OK, "advance_write_floor(%" PRIu64 ", scope %d) = %d", n, (int)scope,
		 (int)e.status);
	FZ_CHECK(wait_outcome(e.op_index, NULL, 0) == OVSTAGE_OK, "advance_write_floor op failed");
	if (scope == OVSTAGE_SCOPE_INCLUDE)
		m_create_col(a0);
	for (int a = 0; a < NA; a++) {
		mcol *c = &H.m.col[a];
		if (!c->created || !in_scope[a])
			continue;
		m_seal_col(a, n);
	}
	if (scope == OVSTAGE_SCOPE_ALL && n > H.m.all_floor)
		H.m.all_floor = n;
	if (fz_debug) {
		ovstage_ordinal_query_handle_t h = 0;
		ovstage_enqueue_result_t oe = ovstage_get_oldest_preserved_ordinal(H.st, &h);
		(void)wait_outcome(oe.op_index, NULL, 0);
		ovstage_ordinal_t o = 0;
		ovstage_fetch_ordinal(H.st, h, OVSTAGE_TIMEOUT_INFINITE, &o);
		oe = ovstage_release_ordinal_query(H.st, h);
		(void)wait_outcome(oe.op_index, NULL, 0);
		fprintf(stderr, "  after the seal: oldest preserved %" PRIu64 "; model versions", o);
		for (int a = 0; a < NA; a++)
			fprintf(stderr, " %s:%d dropped %" PRIu64, ANAMES[a], H.m.col[a].nver, H.m.col[a].dropped);
		fprintf(stderr, "\n");
	}
}

/* The highest ordinal column a is written at: succeeded ops, and open map sessions whose map op
 * succeeded (their commit is in flight until unmap_attribute; a failed session commits nothing and
 * holds nothing: docs/errors.md). */
static uint64_t m_written_through(int a)
{
	uint64_t m = H.m.col[a].max_written;
	for (int v = 0; v < NV; v++)
		if (H.vt[v].mh && H.vt[v].m_ok && H.vt[v].m_attr == a && H.vt[v].m_ord > m)
			m = H.vt[v].m_ord;
	return m;
}

/* The state of column a as of ordinal e (latest read): status and, when OK, the state (NULL for
 * zero groups). */
static ovstage_api_status_t m_latest(int a, uint64_t e, const mstate **out)
{
	mcol *c = &H.m.col[a];
	*out = NULL;
	if (!c->created || c->dtype < 0) /* a column without a schema reads as absent */
		return OVSTAGE_OK;
	if (e > c->floor && m_written_through(a) > c->floor)
		return OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION;
	if (!c->nver)
		return OVSTAGE_OK;
	int idx = -1;
	for (int i = c->nver - 1; i >= 0; i--)
		if (c->ver[i].ord <= e) {
			idx = i;
			break;
		}
	if (idx >= 0 && idx >= c->nver - RETENTION) {
		*out = &c->ver[idx].s;
		return OVSTAGE_OK;
	}
	if (c->dropped && c->nver) /* the state as of e left retention: the newest version (0.2.1) */
		*out = &c->ver[c->nver - 1].s;
	return OVSTAGE_OK;
}

/* The ordinal at which prim p last changed (a value written or deleted) as of version i of column
 * c; 0: never. */
static uint64_t m_last_change(const mcol *c, int i, int p)
{
	for (; i >= 0; i--)
		if (c->ver[i].changed[p])
			return c->ver[i].ord;
	return 0;
}

/* A range read of column a over [s, e] through `list`, as the engine answers it from change
 * membership (docs/store.md, "Range reads"): the status (WRITE_FLOOR_VIOLATION at the call,
 * OUT_OF_RANGE from the op); changed[] and the state whose payloads the groups carry. */
static ovstage_api_status_t m_range(int a, int list, uint64_t s, uint64_t e, bool *changed, const mstate **asof)
{
	mcol *c = &H.m.col[a];
	memset(changed, 0, NP * sizeof *changed);
	*asof = NULL;
	if (!c->created || c->dtype < 0) /* a column without a schema reads as absent */
		return OVSTAGE_OK;
	if (e > c->floor && m_written_through(a) > c->floor)
		return OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION;
	if (!c->nver)
		return OVSTAGE_OK;
	int u = c->nver > RETENTION ? c->nver - RETENTION : 0; /* the oldest retained version */
	for (int i = c->nver - 1; i >= u; i--)
		if (c->ver[i].ord <= e) {
			/* the version as of e is retained: a prim is selected when its last change as of e is
			 * at or after s, whatever s */
			for (int p = 0; p < NP; p++) {
				uint64_t lc = m_last_change(c, i, p);
				changed[p] = lc && lc >= s;
			}
			*asof = &c->ver[i].s;
			return OVSTAGE_OK;
		}
	/* e is older than every retained version (0.2.1's answer): payloads of the newest, l; a prim that
	 * changed after e is decided by its last change as of the oldest retained one, u (built on the
	 * version at D, nothing changed in between) */
	int l = c->nver - 1;
	uint64_t D = u ? c->ver[u - 1].ord : 0, uo = c->ver[u].ord;
	*asof = &c->ver[l].s;
	for (int j = 0; j < list_len(list); j++) {
		int p = list_prim(list, j);
		uint64_t lc = m_last_change(c, l, p);
		if (!lc)
			continue;
		if (lc <= e) {
			changed[p] = lc >= s;
			continue;
		}
		uint64_t lo = m_last_change(c, u, p);
		if (!lo)
			continue; /* no change through u, which is newer than e */
		if (lo <= e) {
			if (lo >= s)
				return OVSTAGE_ERROR_OUT_OF_RANGE; /* selected, and its payload as of e is gone */
			continue;
		}
		if (lo == uo && (!D || s > D))
			continue; /* its change before u is at or below D < s */
		return OVSTAGE_ERROR_OUT_OF_RANGE; /* whether it changed in [s, e] is no longer known */
	}
	return OVSTAGE_OK;
}

static void release_held(held_group *h, bool recheck)
{
	if (!h->used)
		return;
	if (recheck && h->attr >= 0 && !h->g.is_delete && !H.m.overflow) {
		/* a held group keeps the values it had when fetched, whatever was sealed since */
		int pos[NP];
		uint64_t val[NP];
		int k = decode_group(&h->g, h->list, H.m.col[h->attr].dtype, pos, val);
		FZ_CHECK(k == h->nexp, "held group now covers %d elements, had %d", k, h->nexp);
		for (int i = 0; i < k; i++)
			FZ_CHECK(pos[i] == h->pos[i] && val[i] == h->val[i], "held group of %s changed at element %d",
				 ANAMES[h->attr], i);
	}
	ovstage_api_status_t s = ovstage_release_group(H.st, &h->g);
	executed_calls++;
	FZ_CHECK(s == OVSTAGE_OK, "release_group = %d", (int)s);
	s = ovstage_release_group(H.st, &h->g);
	FZ_CHECK(s == OVSTAGE_ERROR_INVALID_HANDLE, "second release_group = %d", (int)s);
	remember_stale(h->g.read_group_id);
	h->used = false;
}

/* ---- read_attributes: the request, the model's answer, one helper per kind of group ---------- */

typedef struct {
	int list;                  /* the query's list (-1: a bad handle) */
	ovstage_query_handle_t q;
	ovx_token_t attrs[NA];
	int ia[NA];                /* the model columns read */
	size_t na;                 /* attributes named (0: every column) */
	int nread;                 /* columns read */
	ovstage_ordinal_range_t rg;
} read_req;

typedef struct {
	ovstage_api_status_t call; /* at the call */
	ovstage_api_status_t op;   /* of the op (wait_outcome) */
	const mstate *st_of[NA];   /* per column: the state the values come from */
	bool changed[NA][NP];      /* per column (range reads): the prims selected */
} read_want;

/* What the groups gave, per column and query position: 0 nothing, 1 value, 2 delete. */
typedef struct {
	uint8_t got[NA][NP];
	uint64_t val[NA][NP];
} read_got;

static void read_decode(fz_in *in, vthread *t, read_req *r)
{
	memset(r, 0, sizeof *r);
	r->q = pick_query(in, t, &r->list);
	uint8_t b = fz_u8(in);
	if (!(b & 0x80)) { /* a list of 1..3 distinct columns; else every column (count 0) */
		for (int a = 0; a < NA; a++)
			if ((b >> a) & 1) {
				r->ia[r->na] = a;
				r->attrs[r->na++] = H.tok[a];
			}
		if (!r->na) {
			r->ia[0] = (b >> 3) % NA;
			r->attrs[r->na++] = H.tok[r->ia[0]];
		}
	} else {
		for (int a = 0; a < NA; a++)
			r->ia[a] = a;
	}
	r->nread = r->na ? (int)r->na : NA;
	uint64_t fl = H.m.all_floor;
	for (int i = 0; i < r->nread; i++)
		if (H.m.col[r->ia[i]].created)
			fl = H.m.col[r->ia[i]].floor;
	r->rg.has_start_ordinal = (b & 0x40) != 0;
	uint8_t ob = fz_u8(in);
	switch (ob & 7) {
	case 0: r->rg.end_ordinal = fl; break;
	case 1: r->rg.end_ordinal = fl + 1 + (ob >> 6); break;
	case 2: r->rg.end_ordinal = UINT64_MAX; break;
	default: r->rg.end_ordinal = fl > (uint64_t)(ob >> 3 & 7) ? fl - (ob >> 3 & 7) : 0; break;
	}
	r->rg.start_ordinal = r->rg.end_ordinal > (uint64_t)(ob >> 5) ? r->rg.end_ordinal - (ob >> 5) : 0;
	if ((ob & 0x18) == 0x18)
		r->rg.start_ordinal = 0;
}

/* The model's answer: WRITE_FLOOR_VIOLATION (any column) is known at the call; OUT_OF_RANGE (a
 * range read that cannot be answered) comes from the op,
 * and wait_op returns it (0.2.1's documented status). */
static void read_model(const read_req *r, read_want *w)
{
	memset(w, 0, sizeof *w);
	w->call = r->list < 0 ? OVSTAGE_ERROR_INVALID_HANDLE : OVSTAGE_OK;
	const ovstage_ordinal_range_t *rg = &r->rg;
	for (int i = 0; i < r->nread && r->list >= 0; i++) {
		int a = r->ia[i];
		ovstage_api_status_t s = rg->has_start_ordinal
						 ? m_range(a, r->list, rg->start_ordinal, rg->end_ordinal, w->changed[a], &w->st_of[a])
						 : m_latest(a, rg->end_ordinal, &w->st_of[a]);
		if (fz_debug)
			fprintf(stderr, "  read model %s [%" PRIu64 ", %" PRIu64 "] range %d: %d\n", ANAMES[a],
				rg->start_ordinal, rg->end_ordinal, rg->has_start_ordinal, (int)s);
		if (s == OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION)
			w->call = s;
		else if (s == OVSTAGE_ERROR_OUT_OF_RANGE)
			w->op = s;
	}
}

/* The call's status against the model; true when accepted (then with a handle). */
static bool read_check_call(const read_req *r, const read_want *w, ovstage_enqueue_result_t e,
			    ovstage_read_handle_t rh)
{
	const ovstage_ordinal_range_t *rg = &r->rg;
	if (e.status != OVSTAGE_OK) {
		FZ_CHECK(rh == OVSTAGE_INVALID_READ_HANDLE, "rejected read left a handle");
		FZ_CHECK(!H.m.overflow || r->list < 0 || e.status == OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION, "read = %d",
			 (int)e.status);
		FZ_CHECK(H.m.overflow || e.status == w->call, "read(list %d, %zu attrs, range %d [%" PRIu64 ", %" PRIu64
			 "]) = %d, model %d", r->list, r->na, rg->has_start_ordinal, rg->start_ordinal, rg->end_ordinal,
			 (int)e.status, (int)w->call);
		expect_message("read_attributes");
		return false;
	}
	FZ_CHECK(H.m.overflow || w->call == OVSTAGE_OK, "read(list %d, %zu attrs (first %s), range %d [%" PRIu64
		 ", %" PRIu64 "]) accepted, model %d", r->list, r->na, ANAMES[r->ia[0]], rg->has_start_ordinal,
		 rg->start_ordinal, rg->end_ordinal, (int)w->call);
	FZ_CHECK(rh != OVSTAGE_INVALID_READ_HANDLE, "accepted read without a handle");
	return true;
}

/* A read whose op failed: the message, the fetch gives the op's status, the handle is released. */
static void read_failed(ovstage_read_handle_t rh, ovstage_api_status_t os, const char *msg)
{
	FZ_CHECK(strstr(msg, "no longer retained") != NULL, "read op failed: %s", msg);
	ovstage_read_group_t g;
	ovstage_api_status_t fs = ovstage_fetch_read_next(H.st, rh, OVSTAGE_TIMEOUT_INFINITE, &g);
	FZ_CHECK(fs == os, "fetch of a failed read = %d, its op's status %d", (int)fs, (int)os);
	ovstage_enqueue_result_t r = ovstage_release_read(H.st, rh);
	FZ_CHECK(r.status == OVSTAGE_OK, "release_read of a failed read = %d", (int)r.status);
	FZ_CHECK(wait_outcome(r.op_index, NULL, 0) == OVSTAGE_OK, "release_read of a failed read: its op failed");
	remember_stale(rh);
}

/* A value group of model column a: the column was read and has a schema; its elements recorded
 * (each query position once) and kept in h for the check at release. */
static void take_value_group(const read_req *r, const ovstage_read_group_t *g, int a, read_got *got, held_group *h)
{
	FZ_CHECK(!g->is_array, "fixed-size column read as an array");
	FZ_CHECK(H.m.col[a].dtype >= 0, "value group of %s, which has no schema", ANAMES[a]);
	int pos[NP];
	uint64_t val[NP];
	int k = decode_group(g, r->list, H.m.col[a].dtype, pos, val);
	for (int i = 0; i < k; i++) {
		FZ_CHECK(!got->got[a][pos[i]], "%s: query position %d in two groups", ANAMES[a], pos[i]);
		got->got[a][pos[i]] = 1;
		got->val[a][pos[i]] = val[i];
	}
	h->nexp = k;
	memcpy(h->pos, pos, sizeof pos);
	memcpy(h->val, val, sizeof val);
}

/* An is_delete group of model column a: only range reads have them. */
static void take_delete_group(const read_req *r, const ovstage_read_group_t *g, int a, read_got *got)
{
	FZ_CHECK(r->rg.has_start_ordinal, "tombstone group in a latest read");
	FZ_CHECK(!g->is_array, "fixed-size column's tombstones as an array");
	int pos[NP];
	uint64_t val[NP];
	int k = decode_group(g, r->list, H.m.col[a].dtype >= 0 ? H.m.col[a].dtype : 0, pos, val);
	for (int i = 0; i < k; i++) {
		FZ_CHECK(!got->got[a][pos[i]], "%s: query position %d in two groups", ANAMES[a], pos[i]);
		got->got[a][pos[i]] = 2;
		got->val[a][pos[i]] = 0;
	}
}

/* A group of a column the model does not know (a read of every column): not when columns are named. */
static void take_other_group(const read_req *r, const ovstage_read_group_t *g)
{
	(void)g;
	FZ_CHECK(!r->na, "group of an attribute not read");
}

/* Every group until END_OF_ITERATION, each taken by its kind, then held (across commands) or
 * released. */
static void read_groups(fz_in *in, vthread *t, const read_req *r, ovstage_read_handle_t rh, read_got *got)
{
	memset(got, 0, sizeof *got);
	uint8_t hb = fz_u8(in);
	for (int iter = 0;; iter++) {
		FZ_CHECK(iter < 64, "more than 64 groups");
		ovstage_read_group_t g;
		ovstage_api_status_t s = ovstage_fetch_read_next(H.st, rh, OVSTAGE_TIMEOUT_INFINITE, &g);
		executed_calls++;
		if (s == OVSTAGE_ERROR_END_OF_ITERATION)
			break;
		FZ_CHECK(s == OVSTAGE_OK, "fetch_read_next = %d", (int)s);
		FZ_CHECK(g.read_group_id != OVSTAGE_INVALID_READ_GROUP_ID, "group without an id");
		int a = attr_of_token(g.attribute);
		held_group h;
		memset(&h, 0, sizeof h);
		h.g = g;
		h.attr = a;
		h.list = r->list;
		h.used = true;
		bool asked = false;
		for (int i = 0; i < r->nread; i++)
			asked = asked || r->ia[i] == a;
		FZ_CHECK(a < 0 || asked, "group of %s, not read", ANAMES[a]);
		if (a < 0)
			take_other_group(r, &g);
		else if (g.is_delete)
			take_delete_group(r, &g, a, got);
		else
			take_value_group(r, &g, a, got, &h);
		int slot = -1;
		if (hb & 1)
			for (int i = 0; i < NG && slot < 0; i++)
				if (!t->g[i].used)
					slot = i;
		hb = (uint8_t)(hb >> 1 | hb << 7);
		if (slot >= 0)
			t->g[slot] = h;
		else
			release_held(&h, false);
	}
}

/* What the groups gave against the model, per column and query position. */
static void read_compare(const read_req *r, const read_want *w, const read_got *got)
{
	const ovstage_ordinal_range_t *rg = &r->rg;
	int nq = list_len(r->list);
	for (int i = 0; i < r->nread && !H.m.overflow; i++) {
		int a = r->ia[i];
		for (int j = 0; j < nq; j++) {
			int p = list_prim(r->list, j);
			const mstate *ms = w->st_of[a];
			uint8_t want = 0;
			uint64_t wv = 0;
			if (!rg->has_start_ordinal) {
				if (ms && ms->present[p]) {
					want = 1;
					wv = ms->val[p];
				}
			} else if (w->changed[a][p]) {
				want = ms && ms->present[p] ? 1 : 2;
				wv = want == 1 ? ms->val[p] : 0;
			}
			FZ_CHECK(got->got[a][j] == want, "read %s of %s (list %d position %d), range %d [%" PRIu64 ", %" PRIu64
				 "], floor %" PRIu64 ": got %s, model %s", ANAMES[a], P[p], r->list, j, rg->has_start_ordinal,
				 rg->start_ordinal, rg->end_ordinal, H.m.col[a].floor,
				 got->got[a][j] == 0 ? "nothing" : got->got[a][j] == 1 ? "a value" : "a delete",
				 want == 0 ? "nothing" : want == 1 ? "a value" : "a delete");
			if (want == 1) {
				uint64_t mask = dt_bytes(H.m.col[a].dtype) == 8 ? UINT64_MAX : 0xffffffffu;
				FZ_CHECK((got->val[a][j] & mask) == (wv & mask), "read %s of %s: %#" PRIx64 ", model %#" PRIx64,
					 ANAMES[a], P[p], got->val[a][j], wv);
			}
		}
	}
}

/* The end of a read: nothing after the last group, release_read, then the handle is gone. */
static void read_release(ovstage_read_handle_t rh)
{
	ovstage_read_group_t g;
	FZ_CHECK(ovstage_fetch_read_next(H.st, rh, 0, &g) == OVSTAGE_ERROR_END_OF_ITERATION, "fetch after the end");
	ovstage_enqueue_result_t r = ovstage_release_read(H.st, rh);
	fz_check_enqueue(r, "release_read");
	FZ_CHECK(r.status == OVSTAGE_OK, "release_read = %d", (int)r.status);
	FZ_CHECK(wait_outcome(r.op_index, NULL, 0) == OVSTAGE_OK, "release_read op failed");
	FZ_CHECK(ovstage_fetch_read_next(H.st, rh, 0, &g) == OVSTAGE_ERROR_INVALID_HANDLE, "fetch on a released read");
	r = ovstage_release_read(H.st, rh);
	FZ_CHECK(r.status == OVSTAGE_ERROR_INVALID_HANDLE, "second release_read = %d", (int)r.status);
	remember_stale(rh);
}

/* read_attributes (latest or range) + fetch_read_next until END_OF_ITERATION, checked against the
 * model; some groups are held across commands. */
static void cmd_read(fz_in *in, vthread *t)
{
	read_req r;
	read_decode(in, t, &r);
	ovstage_read_handle_t rh = 4242;
	ovstage_enqueue_result_t e = ovstage_read_attributes(H.st, r.q, r.na ? r.attrs : NULL, r.na, r.rg, &rh);
	executed_calls++;
	fz_check_enqueue(e, "read_attributes");
	read_want w;
	read_model(&r, &w);
	if (!read_check_call(&r, &w, e, rh))
		return;
	char msg[300];
	ovstage_api_status_t os = wait_outcome(e.op_index, msg, sizeof msg);
	FZ_CHECK(H.m.overflow || os == w.op, "read(list %d, range %d [%" PRIu64 ", %" PRIu64 "]) op = %d, model %d (%s)",
		 r.list, r.rg.has_start_ordinal, r.rg.start_ordinal, r.rg.end_ordinal, (int)os, (int)w.op, msg);
	if (os != OVSTAGE_OK) {
		read_failed(rh, os, msg);
		return;
	}
	read_got got;
	read_groups(in, t, &r, rh, &got);
	read_compare(&r, &w, &got);
	read_release(rh);
}

/* Fetches, fills and commits (unmap_attribute) the thread's open map session. */
static void map_commit(vthread *t, bool fill)
{
	if (!t->mh)
		return;
	int nq = list_len(t->m_list);
	uint64_t vals[NP];
	ovstage_map_group_t g;
	ovstage_api_status_t s = ovstage_fetch_map_next(H.st, t->mh, OVSTAGE_TIMEOUT_INFINITE, &g);
	executed_calls++;
	bool filled = false;
	if (t->m_ok) {
		FZ_CHECK(s == OVSTAGE_OK || (s == OVSTAGE_ERROR_END_OF_ITERATION && nq == 0), "fetch_map_next = %d",
			 (int)s);
		if (s == OVSTAGE_OK) {
			FZ_CHECK(g.prims.count == (uint32_t)nq && g.prims.index_map == NULL && g.prims.offset == 0,
				 "map group covers %u prims from %u of %d", g.prims.count, g.prims.offset, nq);
			FZ_CHECK(g.data.tensor_count == 1 && g.data.index_map == NULL && g.data.mask == NULL,
				 "map group data");
			const DLTensor *tt = &g.data.tensors[0];
			FZ_CHECK(tt->ndim == 1 && tt->shape[0] == nq, "map tensor shape");
			FZ_CHECK(tt->dtype.code == DT[t->m_dtype].code && tt->dtype.bits == DT[t->m_dtype].bits &&
					 tt->dtype.lanes == DT[t->m_dtype].lanes, "map tensor dtype");
			for (int i = 0; i < nq; i++) {
				uint8_t *row = (uint8_t *)tt->data + tt->byte_offset + (size_t)i * dt_bytes(t->m_dtype);
				if (t->m_rmw && !H.m.overflow) {
					/* the sealed values as of the call, untouched by what ran since */
					uint64_t got = 0, mask = dt_bytes(t->m_dtype) == 8 ? UINT64_MAX : 0xffffffffu;
					memcpy(&got, row, dt_bytes(t->m_dtype));
					FZ_CHECK((got & mask) == (t->m_exp[i] & mask), "read-current map of %s at %" PRIu64
						 ": element %d (%s) = %#" PRIx64 ", model %#" PRIx64, ANAMES[t->m_attr], t->m_ord,
						 i, P[list_prim(t->m_list, i)], got, t->m_exp[i]);
				}
				if (t->m_rmw && (i & 1)) { /* modified in place: the odd elements keep their values */
					vals[i] = 0;
					memcpy(&vals[i], row, dt_bytes(t->m_dtype));
					continue;
				}
				vals[i] = lanes_val(next_val(list_prim(t->m_list, i)), t->m_dtype);
				memcpy(row, &vals[i], dt_bytes(t->m_dtype));
			}
			filled = true;
			s = ovstage_fetch_map_next(H.st, t->mh, 0, &g);
			FZ_CHECK(s == OVSTAGE_ERROR_END_OF_ITERATION, "second fetch_map_next = %d", (int)s);
		}
	} else {
		FZ_CHECK(s == t->m_fail, "fetch_map_next of a failed map = %d, its op's status %d", (int)s,
			 (int)t->m_fail);
	}
	(void)fill;
	ovstage_cuda_sync_t none = { 0, 0 };
	ovstage_enqueue_result_t e = ovstage_unmap_attribute(H.st, t->mh, none);
	executed_calls++;
	fz_check_enqueue(e, "unmap_attribute");
	uint64_t seq = ++H.m.seq;
	if (fz_debug)
		fprintf(stderr, "  unmap %s ord %" PRIu64 " ok %d filled %d = %d\n", ANAMES[t->m_attr], t->m_ord, t->m_ok,
			filled, (int)e.status);
	if (e.status == OVSTAGE_OK) {
		/* a failed map fails the unmap's op as its dependency: wait_op OK, both listed */
		ovstage_api_status_t os = wait_outcome(e.op_index, NULL, 0);
		FZ_CHECK(os == (t->m_ok ? OVSTAGE_OK : OVSTAGE_ERROR_OP_FAILED), "unmap_attribute op = %d (map ok %d)",
			 (int)os, t->m_ok);
	} else {
		FZ_CHECK(!t->m_ok, "unmap_attribute of a good map = %d", (int)e.status);
	}
	if (t->m_ok && filled) {
		mcol *c = &H.m.col[t->m_attr];
		for (int i = 0; i < nq; i++) {
			int p = list_prim(t->m_list, i);
			m_push(t->m_attr, t->m_ord, seq, p, false, vals[i]);
			c->has_row[p] = true;
		}
	}
	ovstage_api_status_t ms = wait_outcome(t->mop, NULL, 0); /* waited again: the same outcome */
	FZ_CHECK(ms == (t->m_ok ? OVSTAGE_OK : t->m_fail == OVSTAGE_ERROR_PRIM_NOT_FOUND ? t->m_fail : OVSTAGE_ERROR_OP_FAILED),
		 "map op waited again = %d (its status %d)", (int)ms, (int)t->m_fail);
	e = ovstage_unmap_attribute(H.st, t->mh, none);
	FZ_CHECK(e.status == OVSTAGE_ERROR_INVALID_HANDLE, "second unmap_attribute = %d", (int)e.status);
	remember_stale(t->mh);
	t->mh = 0;
}

static void cmd_map(fz_in *in, vthread *t)
{
	uint8_t b = fz_u8(in);
	if (t->mh) {
		map_commit(t, true);
		return;
	}
	int list;
	ovstage_query_handle_t q = pick_query(in, t, &list);
	int a = b % NA;
	mcol *c = &H.m.col[a];
	ovstage_map_desc_t desc;
	memset(&desc, 0, sizeof desc);
	desc.attribute = (ovx_string_or_token_t){ H.tok[a], { NULL, 0 } };
	int dt = (b >> 2) % ND;
	bool zero_dtype = (b & 0x10) != 0;
	if (!zero_dtype)
		desc.dtype = DT[dt];
	else
		dt = c->dtype;
	desc.prim_mode = (b & 0x20) ? OVSTAGE_PRIM_MODE_INSERT : OVSTAGE_PRIM_MODE_UPSERT;
	bool rmw = (b & 0x80) != 0; /* a read-current session: the buffer starts as the sealed values */
	uint64_t ord = pick_ord(in, c->created ? c->floor : H.m.all_floor);
	ovstage_map_handle_t mh = 99;
	ovstage_enqueue_result_t e = rmw ? ovstage_ext_map_attribute(H.st, q, &desc, ord, NULL, 0,
								     OVSTAGE_EXT_MAP_READ_CURRENT, &mh)
					 : ovstage_map_attribute(H.st, q, &desc, ord, NULL, 0, &mh);
	executed_calls++;
	fz_check_enqueue(e, "map_attribute");
	if (fz_debug)
		fprintf(stderr, "  map %s list %d dtype %d zero %d mode %d rmw %d ord %" PRIu64 " = %d\n", ANAMES[a], list,
			dt, zero_dtype, (int)desc.prim_mode, rmw, ord, (int)e.status);
	ovstage_api_status_t want = OVSTAGE_OK;
	if (list < 0)
		want = OVSTAGE_ERROR_INVALID_HANDLE;
	else if (c->dtype >= 0 && !zero_dtype && dt != c->dtype) /* provable at the call */
		want = OVSTAGE_ERROR_INVALID_ARGUMENT;
	else if (rmw && c->dtype < 0 && zero_dtype) /* read-current: a new column needs a dtype, at the call */
		want = OVSTAGE_ERROR_INVALID_ARGUMENT;
	else if (ord <= (c->created ? c->floor : H.m.all_floor))
		want = OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION;
	else if (rmw && c->created && m_written_through(a) > c->floor) /* unsealed writes of the column */
		want = OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION;
	if (e.status != OVSTAGE_OK) {
		FZ_CHECK(mh == OVSTAGE_INVALID_MAP_HANDLE, "rejected map left a handle");
		FZ_CHECK(e.status == want, "map(%s, list %d, dtype %d zero %d (column %d), ord %" PRIu64 ") = %d, model %d",
			 ANAMES[a], list, dt, zero_dtype, c->dtype, ord, (int)e.status, (int)want);
		expect_message("map_attribute");
		return; /* a refused map creates no column record */
	}
	FZ_CHECK(want == OVSTAGE_OK, "map(%s, list %d, ord %" PRIu64 ") accepted, model %d", ANAMES[a], list, ord,
		 (int)want);
	FZ_CHECK(mh != OVSTAGE_INVALID_MAP_HANDLE, "accepted map without a handle");
	m_create_col(a);
	int nq = list_len(list);
	for (int i = 0; i < nq; i++) { /* a read-current buffer: the sealed state as of the call */
		int p = list_prim(list, i);
		t->m_exp[i] = c->head.present[p] ? c->head.val[p] : 0;
	}
	t->m_rmw = rmw;
	/* the map op's status: a new column needs a dtype (INVALID_ARGUMENT, checked first), INSERT onto
	 * an existing prim is PRIM_NOT_FOUND; wait_op returns the latter (0.2.1's documented status) and
	 * OK with the failure listed for the former */
	ovstage_api_status_t fails = c->dtype < 0 && zero_dtype ? OVSTAGE_ERROR_INVALID_ARGUMENT : OVSTAGE_OK;
	for (int i = 0; i < nq && desc.prim_mode == OVSTAGE_PRIM_MODE_INSERT && fails == OVSTAGE_OK; i++)
		if (H.m.exists[list_prim(list, i)])
			fails = OVSTAGE_ERROR_PRIM_NOT_FOUND;
	/* wait for the map op (it does not wait for the unmap) */
	ovstage_op_wait_result_t w;
	memset(&w, 0, sizeof w);
	ovstage_api_status_t ws = ovstage_wait_op(H.st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &w);
	bool failed = w.error_op_id_count > 0;
	FZ_CHECK(failed == (fails != OVSTAGE_OK) && ws == (fails == OVSTAGE_ERROR_PRIM_NOT_FOUND ? fails : OVSTAGE_OK),
		 "map(%s, list %d, dtype %d zero %d (column %d), INSERT %d) op %s, wait %d, model %d", ANAMES[a], list,
		 dt, zero_dtype, c->dtype, desc.prim_mode == OVSTAGE_PRIM_MODE_INSERT, failed ? "failed" : "succeeded",
		 (int)ws, (int)fails);
	t->m_fail = fails;
	t->mh = mh;
	t->mop = e.op_index;
	t->m_ok = !failed;
	t->m_attr = a;
	t->m_list = list;
	t->m_ord = ord;
	t->m_dtype = dt >= 0 ? dt : 0;
	if (!failed) {
		if (c->dtype < 0)
			c->dtype = dt;
		t->m_dtype = c->dtype;
		m_written(a, ord);
		for (int i = 0; i < nq; i++) { /* the map op gives the prims rows (a delete then tombstones them) */
			H.m.exists[list_prim(list, i)] = true;
			c->has_row[list_prim(list, i)] = true;
		}
	}
	if (b & 0x40)
		map_commit(t, true);
}

/* ovstage_clone of /W/A, /X or /W/D to /W/D and/or /Y. */
static void cmd_clone(fz_in *in)
{
	uint8_t b = fz_u8(in);
	static const int srcs[3] = { 0, 3, 4 };   /* /W/A, /X, /W/D */
	static const int kids[3] = { 2, -1, 5 };  /* their child in the universe */
	int si = b % 3;
	int src = srcs[si];
	int tg[2], nt = 0;
	if ((b & 4) && src != 4)
		tg[nt++] = 4; /* /W/D */
	if ((b & 8) || !nt)
		tg[nt++] = 6; /* /Y */
	uint64_t ord = pick_ord(in, H.m.all_floor);
	bool bad_path = (b & 0xf0) == 0xf0;
	ovx_string_t tp[2];
	for (int i = 0; i < nt; i++)
		tp[i] = (ovx_string_t){ P[tg[i]], strlen(P[tg[i]]) };
	if (bad_path)
		tp[0] = (ovx_string_t){ "no/t a path", 11 };
	ovx_string_t sp = { P[src], strlen(P[src]) };
	ovstage_enqueue_result_t e = ovstage_clone(H.st, sp, tp, (size_t)nt, ord);
	executed_calls++;
	fz_check_enqueue(e, "clone");
	ovstage_api_status_t want = OVSTAGE_OK;
	if (bad_path)
		want = OVSTAGE_ERROR_INVALID_ARGUMENT;
	else {
		if (ord <= H.m.all_floor)
			want = OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION;
		for (int a = 0; a < NA; a++)
			if (H.m.col[a].created && ord <= H.m.col[a].floor)
				want = OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION;
	}
	if (e.status != OVSTAGE_OK) {
		FZ_CHECK(e.status == want, "clone(%s, ord %" PRIu64 ") = %d, model %d", P[src], ord, (int)e.status,
			 (int)want);
		expect_message("clone");
		return;
	}
	FZ_CHECK(want == OVSTAGE_OK, "clone(%s, ord %" PRIu64 ") accepted, model %d", P[src], ord, (int)want);
	uint64_t seq = ++H.m.seq;
	/* the subtree: the source and its child when they exist, mapped onto each target */
	int sub[2] = { src, kids[si] };
	int nsub = kids[si] >= 0 && H.m.exists[kids[si]] ? 2 : 1;
	static const int tkid[NP] = { 2, -1, -1, -1, 5, -1, 7, -1 };
	/* a missing source: NOT_FOUND (checked first); an existing target prim: PRIM_NOT_FOUND */
	ovstage_api_status_t fails = H.m.exists[src] ? OVSTAGE_OK : OVSTAGE_ERROR_NOT_FOUND;
	for (int i = 0; i < nt && fails == OVSTAGE_OK; i++) {
		if (H.m.exists[tg[i]])
			fails = OVSTAGE_ERROR_PRIM_NOT_FOUND;
		if (nsub == 2 && H.m.exists[tkid[tg[i]]])
			fails = OVSTAGE_ERROR_PRIM_NOT_FOUND;
	}
	char msg[300];
	ovstage_api_status_t s = wait_outcome(e.op_index, msg, sizeof msg);
	FZ_CHECK(s == fails, "clone(%s -> %d targets) op = %d, model %d (%s)", P[src], nt, (int)s, (int)fails, msg);
	if (s != OVSTAGE_OK)
		return;
	for (int i = 0; i < nt; i++) {
		int dst[2] = { tg[i], tkid[tg[i]] };
		for (int k = 0; k < nsub; k++) {
			H.m.exists[dst[k]] = true;
			for (int a = 0; a < NA; a++) {
				mcol *c = &H.m.col[a];
				if (c->created && c->head.present[sub[k]]) {
					m_push(a, ord, seq, dst[k], false, c->head.val[sub[k]]);
					c->has_row[dst[k]] = true;
				}
			}
		}
	}
}

/* Query handles: create, release, use after release, a foreign instance's. */
static void cmd_query(fz_in *in, vthread *t)
{
	uint8_t b = fz_u8(in);
	int s = b & 1;
	switch ((b >> 1) & 3) {
	case 0:
		release_query_slot(t, s);
		break;
	case 1: { /* fetch_query_result of a live query */
		int list;
		ovstage_query_handle_t q = pick_query(in, t, &list);
		ovstage_query_result_t r;
		memset(&r, 0, sizeof r);
		ovstage_api_status_t st = ovstage_fetch_query_result(H.st, q, OVSTAGE_TIMEOUT_INFINITE, &r);
		executed_calls++;
		if (list < 0) {
			FZ_CHECK(st == OVSTAGE_ERROR_INVALID_HANDLE, "fetch_query_result(bad) = %d", (int)st);
			expect_message("fetch_query_result");
			break;
		}
		FZ_CHECK(st == OVSTAGE_OK, "fetch_query_result = %d", (int)st);
		FZ_CHECK(r.all_handle == q && r.total_prim_count == (size_t)list_len(list), "query result %zu prims",
			 r.total_prim_count);
		FZ_CHECK(ovstage_release_query_result(H.st, &r) == OVSTAGE_OK, "release_query_result");
		FZ_CHECK(ovstage_release_query_result(H.st, &r) == OVSTAGE_ERROR_INVALID_HANDLE,
			 "second release_query_result");
		remember_stale(r.query_result_id);
		break;
	}
	case 2: { /* a stale or foreign handle on every call that takes one */
		uint64_t h = (b & 8) ? pick_stale(in) : H.other_q;
		if (!h)
			h = 0x77777;
		ovstage_ordinal_range_t rg = { 0, H.m.all_floor, false };
		ovstage_read_handle_t rh = 5;
		ovstage_enqueue_result_t e = ovstage_read_attributes(H.st, h, NULL, 0, rg, &rh);
		FZ_CHECK(e.status == OVSTAGE_ERROR_INVALID_HANDLE && rh == 0, "read through handle %" PRIu64 " = %d", h,
			 (int)e.status);
		expect_message("read_attributes(stale)");
		ovstage_read_group_t g;
		FZ_CHECK(ovstage_fetch_read_next(H.st, h, 0, &g) == OVSTAGE_ERROR_INVALID_HANDLE, "fetch stale");
		memset(&g, 0, sizeof g);
		g.read_group_id = h;
		FZ_CHECK(ovstage_release_group(H.st, &g) == OVSTAGE_ERROR_INVALID_HANDLE, "release_group stale");
		ovstage_map_group_t mg;
		FZ_CHECK(ovstage_fetch_map_next(H.st, h, 0, &mg) == OVSTAGE_ERROR_INVALID_HANDLE, "fetch_map stale");
		ovstage_cuda_sync_t none = { 0, 0 };
		FZ_CHECK(ovstage_unmap_attribute(H.st, h, none).status == OVSTAGE_ERROR_INVALID_HANDLE, "unmap stale");
		FZ_CHECK(ovstage_release_read(H.st, h).status == OVSTAGE_ERROR_INVALID_HANDLE, "release_read stale");
		FZ_CHECK(ovstage_release_query(H.st, h).status == OVSTAGE_ERROR_INVALID_HANDLE, "release_query stale");
		ovstage_ordinal_t o;
		FZ_CHECK(ovstage_fetch_ordinal(H.st, h, 0, &o) == OVSTAGE_ERROR_INVALID_HANDLE, "fetch_ordinal stale");
		ovstage_query_result_t qr;
		FZ_CHECK(ovstage_fetch_query_result(H.st, h, 0, &qr) == OVSTAGE_ERROR_INVALID_HANDLE, "fetch qr stale");
		FZ_CHECK(ovstage_release_op(H.st, h) == OVSTAGE_ERROR_INVALID_HANDLE, "release_op stale");
		executed_calls += 11;
		break;
	}
	default: /* release held groups (in input order) */
		for (int i = 0; i < NG; i++)
			if ((b >> (i % 4 + 3)) & 1)
				release_held(&t->g[i], true);
		break;
	}
}

/* get_attribute_write_floor / get_oldest_preserved_ordinal + fetch_ordinal. */
static void cmd_ordinal(fz_in *in)
{
	uint8_t b = fz_u8(in);
	ovstage_ordinal_query_handle_t h = 0;
	ovstage_enqueue_result_t e;
	uint64_t want;
	bool exact = true;
	if (b & 1) {
		int a = (b >> 1) % NA;
		ovx_string_or_token_t attr = { H.tok[a], { NULL, 0 } };
		e = ovstage_get_attribute_write_floor(H.st, attr, &h);
		want = H.m.col[a].created ? H.m.col[a].floor : H.m.all_floor;
	} else {
		e = ovstage_get_oldest_preserved_ordinal(H.st, &h);
		want = 0;
		bool any = false;
		for (int a = 0; a < NA; a++)
			if (H.m.col[a].created) {
				any = true;
				if (H.m.col[a].dropped + 1 > want)
					want = H.m.col[a].dropped + 1;
			}
		exact = any;
	}
	executed_calls++;
	fz_check_enqueue(e, "ordinal query");
	if (fz_debug)
		fprintf(stderr, "  ordinal query %d (%s)\n", b & 1, ANAMES[(b >> 1) % NA]);
	FZ_CHECK(e.status == OVSTAGE_OK && h != 0, "ordinal query = %d", (int)e.status);
	FZ_CHECK(wait_outcome(e.op_index, NULL, 0) == OVSTAGE_OK, "ordinal query op failed");
	ovstage_ordinal_t o = 12345;
	ovstage_api_status_t s = ovstage_fetch_ordinal(H.st, h, OVSTAGE_TIMEOUT_INFINITE, &o);
	FZ_CHECK(s == OVSTAGE_OK, "fetch_ordinal = %d", (int)s);
	if (exact && !H.m.overflow)
		FZ_CHECK(o == want, "%s = %" PRIu64 ", model %" PRIu64, (b & 1) ? "attribute write floor" : "oldest preserved",
			 o, want);
	e = ovstage_release_ordinal_query(H.st, h);
	FZ_CHECK(e.status == OVSTAGE_OK, "release_ordinal_query = %d", (int)e.status);
	FZ_CHECK(wait_outcome(e.op_index, NULL, 0) == OVSTAGE_OK, "release_ordinal_query op failed");
	FZ_CHECK(ovstage_fetch_ordinal(H.st, h, 0, &o) == OVSTAGE_ERROR_INVALID_HANDLE, "fetch released ordinal");
	remember_stale(h);
}

/* A write refused at the call (a CUDA tensor on this CPU build, or an invalid prim mode): it must
 * leave no trace (a later write of another dtype to a fresh column still defines it). */
static void cmd_bad_write(fz_in *in, vthread *t)
{
	int list;
	ovstage_query_handle_t q = pick_query(in, t, &list);
	uint8_t b = fz_u8(in);
	int a = b % NA;
	int nq = list >= 0 ? list_len(list) : 0;
	uint8_t buf[NP * 8] = { 0 };
	int64_t shape[1] = { nq };
	DLTensor tt;
	memset(&tt, 0, sizeof tt);
	tt.data = buf;
	tt.device.device_type = (b & 4) ? kDLCUDA : kDLCPU;
	tt.ndim = 1;
	tt.dtype = DT[(b >> 3) % ND];
	tt.shape = shape;
	ovstage_write_data_t w;
	memset(&w, 0, sizeof w);
	w.tensors = &tt;
	w.tensor_count = 1;
	ovstage_prim_mode_t mode = (b & 4) ? OVSTAGE_PRIM_MODE_UPSERT : (ovstage_prim_mode_t)5;
	ovx_string_or_token_t attr = { H.tok[a], { NULL, 0 } };
	mcol *c = &H.m.col[a];
	ovstage_enqueue_result_t e = ovstage_write_attribute(H.st, q, attr, (c->created ? c->floor : H.m.all_floor) + 1,
							     w, mode);
	executed_calls++;
	fz_check_enqueue(e, "bad write");
	if (fz_debug)
		fprintf(stderr, "  bad write %s list %d cuda %d = %d\n", ANAMES[a], list, (b & 4) != 0, (int)e.status);
	if (list < 0) {
		FZ_CHECK(e.status == OVSTAGE_ERROR_INVALID_HANDLE || e.status == OVSTAGE_ERROR_INVALID_ARGUMENT,
			 "bad write through a bad handle = %d", (int)e.status);
		return;
	}
	if (e.status == OVSTAGE_OK)
		m_create_col(a); /* only an admitted write creates the column's record */
	if (nq == 0 && (b & 4)) { /* an empty write is nothing to refuse */
		if (e.status == OVSTAGE_OK)
			(void)wait_outcome(e.op_index, NULL, 0);
		return;
	}
	FZ_CHECK(e.status == ((b & 4) ? OVSTAGE_ERROR_NOT_SUPPORTED : OVSTAGE_ERROR_INVALID_ARGUMENT) ||
			 (c->dtype >= 0 && (int)((b >> 3) % ND) != c->dtype && e.status == OVSTAGE_ERROR_INVALID_ARGUMENT),
		 "bad write (device %d, mode %d) = %d", (int)tt.device.device_type, (int)mode, (int)e.status);
	expect_message("bad write");
}

/* ---- per input ------------------------------------------------------------------------------- */

static void begin_input(void)
{
	memset(&H, 0, sizeof H);
	for (int a = 0; a < NA; a++)
		H.m.col[a].dtype = -1;
	ovstage_instance_desc_t d = { "fuzz_api" };
	FZ_CHECK(ovstage_create_instance(&d, &H.st) == OVSTAGE_OK, "create_instance");
	H.pd = ovstage_get_path_dictionary(H.st);
	for (int l = 0; l < NL; l++) {
		ovx_string_t s[NP];
		for (int i = 0; i < list_len(l); i++)
			s[i] = (ovx_string_t){ P[list_prim(l, i)], strlen(P[list_prim(l, i)]) };
		ovx_api_result_t r = path_dictionary_create_path_list_from_strings(H.pd, list_len(l) ? s : NULL,
										     (size_t)list_len(l), &H.lists[l]);
		FZ_CHECK(r.status == OVX_API_SUCCESS, "path list");
	}
	for (int a = 0; a < NA; a++) {
		ovx_string_t s = { ANAMES[a], strlen(ANAMES[a]) };
		ovx_api_result_t r = path_dictionary_create_tokens_from_strings(H.pd, &s, 1, &H.tok[a]);
		FZ_CHECK(r.status == OVX_API_SUCCESS, "token");
	}
}

static void other_instance(void)
{
	if (H.other)
		return;
	ovstage_instance_desc_t d = { "fuzz_api_other" };
	FZ_CHECK(ovstage_create_instance(&d, &H.other) == OVSTAGE_OK, "create other instance");
	path_dictionary_instance_t *pd = ovstage_get_path_dictionary(H.other);
	ovx_string_t s = { P[0], strlen(P[0]) };
	ovx_primpath_list_t l = 0;
	FZ_CHECK(path_dictionary_create_path_list_from_strings(pd, &s, 1, &l).status == OVX_API_SUCCESS, "list");
	FZ_CHECK(ovstage_query_from_path_list(H.other, l, &H.other_q) == OVSTAGE_OK, "other query");
	path_dictionary_release_path_list_reference(pd, l);
}

static void end_input(void)
{
	for (int v = 0; v < NV; v++) {
		vthread *t = &H.vt[v];
		map_commit(t, true);
		for (int i = 0; i < NG; i++)
			release_held(&t->g[i], true);
		for (int s = 0; s < NQS; s++)
			release_query_slot(t, s);
	}
	for (int l = 0; l < NL; l++)
		path_dictionary_release_path_list_reference(H.pd, H.lists[l]);
	ovstage_api_status_t s = ovstage_destroy_instance(H.st);
	FZ_CHECK(s == OVSTAGE_OK, "destroy_instance = %d (something was left held)", (int)s);
	if (H.other) {
		ovstage_enqueue_result_t e = ovstage_release_query(H.other, H.other_q);
		FZ_CHECK(e.status == OVSTAGE_OK, "release other query");
		FZ_CHECK(ovstage_wait_op(H.other, e.op_index, OVSTAGE_TIMEOUT_INFINITE, NULL) == OVSTAGE_OK ||
				 1, "wait");
		ovstage_release_op(H.other, e.op_index);
		FZ_CHECK(ovstage_destroy_instance(H.other) == OVSTAGE_OK, "destroy other instance");
	}
}

static void at_exit(void)
{
	ovstage_shutdown();
	FZ_CHECK(__lsan_do_recoverable_leak_check() == 0, "leak at exit");
	fprintf(stderr, "fuzz: clean exit after %" PRIu64 " iterations (%" PRIu64 " API calls checked)\n", iterations,
		executed_calls);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	FZ_CHECK(ovstage_initialize(NULL) == OVSTAGE_OK, "initialize");
	fz_debug = getenv("FZ_DEBUG") != NULL;
	atexit(at_exit);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	iterations++;
	begin_input();
	fz_in in = { data, size };
	for (int cmd = 0; cmd < 48 && in.n; cmd++) {
		uint8_t c = fz_u8(&in);
		vthread *t = &H.vt[(c >> 5) % NV];
		if (fz_debug)
			fprintf(stderr, "cmd %d: %d (thread %d) floor %" PRIu64 " exists %d%d%d%d%d%d%d%d\n", cmd, c % 12,
				(c >> 5) % NV, H.m.all_floor, H.m.exists[0], H.m.exists[1], H.m.exists[2], H.m.exists[3],
				H.m.exists[4], H.m.exists[5], H.m.exists[6], H.m.exists[7]);
		switch (c % 12) {
		case 0: case 1: case 2: cmd_write(&in, t); break;
		case 3: cmd_delete(&in, t); break;
		case 4: case 5: cmd_seal(&in); break;
		case 6: case 7: cmd_read(&in, t); break;
		case 8: cmd_map(&in, t); break;
		case 9: cmd_clone(&in); break;
		case 10:
			if ((c >> 5) == 7)
				other_instance();
			cmd_query(&in, t);
			break;
		default:
			if (c & 0x10)
				cmd_bad_write(&in, t);
			else
				cmd_ordinal(&in);
			break;
		}
	}
	end_input();
	return 0;
}
