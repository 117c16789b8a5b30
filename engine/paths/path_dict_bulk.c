/*
 * path_dict_bulk.c — interning many paths in one call (create_paths_from_strings,
 * create_path_list_from_strings and create_paths_from_tokens of PD_BULK_MIN paths or more),
 * split over the job system's workers.
 *
 * One path at a time (path_dictionary.c) costs two shard locks, a probe of three hash tables and a
 * table doubling now and then per new path — about 1 µs each, on one thread. The bulk path
 * reorganises the same work so that each shard lock is taken once per call and the tables grow
 * once, and runs every phase in parallel:
 *
 *  A. (parallel) check the syntax of every string, hash it and look it up in the string index (a
 *     lock-free read). Hits are done; no interning happens before every string is known valid.
 *  B. (parallel) for each miss: its parent's prefix and its last component's token (looked up,
 *     interned if new). The parents' prefixes — consecutive duplicates dropped — are interned by a
 *     recursive call, so every parent exists, and is published, before its children are made:
 *     a child's id is always larger than its parent's, as with single interning.
 *  C. (parallel) the misses are partitioned by the shard of their (parent, name) key, then each
 *     shard is filled by one task: under the shard's lock it looks every key up (another thread
 *     may have made it meanwhile), drops duplicates within the call, grows the table once, takes
 *     one contiguous block of ids with a single fetch_add (so ids stay dense), writes the records
 *     and their text (from the shard's string arena) and publishes each record, then its entry,
 *     with release stores — the same publication protocol as single interning.
 *  D. (parallel) the new paths' strings are entered into the string index, partitioned by its
 *     shards the same way. Until then a string lookup of a new path misses and falls back to the
 *     component walk through the pair index (ovs_pd_find_path, path_intern_valid), exactly as for
 *     a path whose single insertion is between its two index entries.
 *
 * Lookups stay lock-free and wait-free throughout: the bulk path only adds entries the way single
 * interning does. The pair index remains the authority for identity, so a path interned
 * concurrently by single and bulk calls, or by several bulk calls, gets one id.
 *
 * Parallelism: fork-join frames (jobs_task.h) on the dictionary's scheduler (ovs_pd_set_sched).
 * A caller that is one of its workers forks directly; any other thread submits one job and waits
 * for it. Without a scheduler, with a 0-worker pool, or when the submission is refused, every
 * phase runs on the calling thread (the same code, one range).
 */
#include "path_dict_internal.h"

#include <stdlib.h>
#include <string.h>

#include "jobs.h"
#include "jobs_task.h"

/* ---- a parallel for over the dictionary's scheduler ----------------------------------------------- */

typedef void (*pd_range_fn)(void *ctx, size_t lo, size_t hi);

typedef struct pd_pfor {
	pd_range_fn fn; /* the body, called on disjoint ranges covering [0, n) */
	void *ctx;      /* its argument */
	size_t grain;   /* ranges are split down to this length */
} pd_pfor;

JOBS_VOID_TASK_3(pd_pfor_task, const pd_pfor *, p, size_t, lo, size_t, hi)
{
	if (hi - lo > p->grain) {
		size_t mid = lo + (hi - lo) / 2;
		JOBS_SPAWN(pd_pfor_task, p, mid, hi); /* stealable */
		JOBS_CALL(pd_pfor_task, p, lo, mid);
		JOBS_SYNC(pd_pfor_task); /* the join orders the thief's plain stores before us */
		return;
	}
	p->fn(p->ctx, lo, hi);
}

typedef struct pd_pfor_job {
	const pd_pfor *p;
	size_t n;
} pd_pfor_job;

static void pd_pfor_job_fn(jobs_worker *w, void *arg, jobs_run *run)
{
	(void)run;
	pd_pfor_job *j = arg;
	if (w)
		JOBS_TASK_RUN(w, pd_pfor_task, j->p, 0, j->n);
	else
		j->p->fn(j->p->ctx, 0, j->n);
}

static void par_for(ovs_pd *pd, size_t n, size_t grain, pd_range_fn fn, void *ctx)
{
	if (n == 0)
		return;
	/* acquire: pairs with ovs_pd_set_sched's release. */
	jobs_sched *s = atomic_load_explicit(&pd->sched, memory_order_acquire);
	if (!s || n <= grain || jobs_sched_workers(s) == 0) {
		fn(ctx, 0, n);
		return;
	}
	pd_pfor p = { fn, ctx, grain ? grain : 1 };
	jobs_worker *w = jobs_current_worker(s);
	if (w) {
		JOBS_TASK_RUN(w, pd_pfor_task, &p, 0, n);
		return;
	}
	pd_pfor_job j = { &p, n };
	jobs_job_desc d = { .fn = pd_pfor_job_fn, .arg = &j };
	jobs_id id = JOBS_INVALID_ID;
	if (jobs_submit(s, &d, &id) != JOBS_OK) {
		fn(ctx, 0, n); /* queue or receipt table full: do it here */
		return;
	}
	/* The job's completion happens-before the wait's return: every range's stores are visible. */
	(void)jobs_wait(s, id, JOBS_TIMEOUT_INFINITE);
	(void)jobs_release(s, id);
}

/* ---- shared helpers ------------------------------------------------------------------------------- */

#define BLK 2048u          /* items per block of the block-wise phases */
#define SKIP 0xffu         /* partition key of an item that takes no part */
#define NO_SLOT UINT32_MAX /* a miss whose parent is the root */

static inline size_t nblocks(size_t n)
{
	return (n + BLK - 1) / BLK;
}

static inline void flag_oom(atomic_bool *oom)
{
	/* relaxed: read after the par_for's join, which orders it. */
	atomic_store_explicit(oom, true, memory_order_relaxed);
}

/* Counting sort of items [0, m) by key[k] (a shard, or SKIP): order[] lists the items of shard 0,
 * then shard 1, ...; start[s]..start[s+1] are shard s's. Stable within a shard. */
typedef struct part {
	const uint8_t *key;
	size_t m;
	uint32_t *cnt;  /* [block][PD_SHARDS] counts, then offsets */
	uint32_t *order;
} part;

static void part_count(void *ctx, size_t lo, size_t hi)
{
	part *p = ctx;
	for (size_t b = lo; b < hi; b++) {
		uint32_t *c = p->cnt + b * PD_SHARDS;
		memset(c, 0, PD_SHARDS * sizeof *c);
		size_t end = (b + 1) * BLK < p->m ? (b + 1) * BLK : p->m;
		for (size_t k = b * BLK; k < end; k++)
			if (p->key[k] != SKIP)
				c[p->key[k]]++;
	}
}

static void part_scatter(void *ctx, size_t lo, size_t hi)
{
	part *p = ctx;
	for (size_t b = lo; b < hi; b++) {
		uint32_t *c = p->cnt + b * PD_SHARDS;
		size_t end = (b + 1) * BLK < p->m ? (b + 1) * BLK : p->m;
		for (size_t k = b * BLK; k < end; k++)
			if (p->key[k] != SKIP)
				p->order[c[p->key[k]]++] = (uint32_t)k;
	}
}

/* Fills order[] and start[0..PD_SHARDS]; false when out of memory. */
static bool partition(ovs_pd *pd, const uint8_t *key, size_t m, uint32_t *order, size_t start[PD_SHARDS + 1])
{
	size_t nb = nblocks(m);
	part p = { key, m, malloc(nb * PD_SHARDS * sizeof(uint32_t)), order };
	if (!p.cnt)
		return false;
	par_for(pd, nb, 1, part_count, &p);
	size_t pos = 0;
	for (size_t s = 0; s < PD_SHARDS; s++) {
		start[s] = pos;
		for (size_t b = 0; b < nb; b++) {
			uint32_t c = p.cnt[b * PD_SHARDS + s];
			p.cnt[b * PD_SHARDS + s] = (uint32_t)pos;
			pos += c;
		}
	}
	start[PD_SHARDS] = pos;
	par_for(pd, nb, 1, part_scatter, &p);
	free(p.cnt);
	return true;
}

/* ---- C and D: making the missing children of existing parents ------------------------------------- */

enum { ST_HIT = 0, ST_NEW = 1, ST_DUP = 2 };

/* One level of new children: item k is (parent[k], name[k]); its text is src[k] with hash src_h[k]
 * when src is given (the caller's string), else built from the parent's text and the token's. */
typedef struct level {
	ovs_pd *pd;
	size_t m;
	const uint32_t *parent, *name;
	const ovx_string_t *src; /* per item, or NULL */
	const uint64_t *src_h;   /* per item, with src */
	uint32_t *res;           /* out: the path id of item k (0 when out of memory) */
	uint8_t *state;          /* ST_* per item */
	uint8_t *key;            /* partition keys */
	uint64_t *shash;         /* string hash of each new item */
	uint32_t *order;
	size_t start[PD_SHARDS + 1];
	atomic_bool oom;
} level;

static void level_keys_pair(void *ctx, size_t lo, size_t hi)
{
	level *L = ctx;
	for (size_t k = lo; k < hi; k++)
		L->key[k] = (uint8_t)(pd_hash_pair(L->parent[k], L->name[k]) & (PD_SHARDS - 1));
}

static void level_keys_string(void *ctx, size_t lo, size_t hi)
{
	level *L = ctx;
	for (size_t k = lo; k < hi; k++)
		L->key[k] = L->state[k] == ST_NEW && L->res[k] ? (uint8_t)(L->shash[k] & (PD_SHARDS - 1)) : SKIP;
}

/* Phase C for one shard of the pair index. */
static void level_make_shard(level *L, size_t s)
{
	ovs_pd *pd = L->pd;
	size_t lo = L->start[s], hi = L->start[s + 1], c = hi - lo;
	if (c == 0)
		return;
	pd_shard *sh = &pd->pair_index.shards[s];
	/* A set of this call's new keys, to drop duplicates within the call: item indices + 1. */
	size_t cap = 4;
	while (cap < 2 * c)
		cap *= 2;
	uint32_t *set = calloc(cap, sizeof *set);
	if (!set) {
		flag_oom(&L->oom);
		for (size_t j = lo; j < hi; j++)
			L->res[L->order[j]] = 0;
		return;
	}
	pd_shard_lock(sh);
	size_t fresh = 0, bytes = 0;
	for (size_t j = lo; j < hi; j++) {
		uint32_t k = L->order[j];
		pd_pair_key key = { L->parent[k], L->name[k] };
		uint64_t h = pd_hash_pair(key.parent, key.name);
		uint32_t id = pd_shard_find_locked(&pd->pair_index, pd, sh, h, &key);
		if (id) {
			L->res[k] = id;
			L->state[k] = ST_HIT;
			continue;
		}
		size_t i = (size_t)(h >> PD_SHARD_BITS) & (cap - 1);
		for (;;) {
			uint32_t e = set[i];
			if (e == 0) {
				set[i] = k + 1;
				L->state[k] = ST_NEW;
				fresh++;
				if (L->src) {
					bytes += L->src[k].length + 1;
				} else {
					const pd_path_rec *pr = pd_path_get(pd, key.parent);
					const pd_token_rec *nr = pd_token_get(pd, key.name);
					bytes += (key.parent == OVS_PD_ROOT ? 0 : pr->len) + 1 + nr->len + 1;
				}
				break;
			}
			if (L->parent[e - 1] == key.parent && L->name[e - 1] == key.name) {
				L->state[k] = ST_DUP;
				L->res[k] = e - 1; /* the first occurrence; resolved below */
				break;
			}
			i = (i + 1) & (cap - 1);
		}
	}
	free(set);
	bool ok = fresh == 0 || pd_shard_reserve(&pd->pair_index, pd, sh, fresh);
	char *text = ok && fresh ? pd_arena_alloc(&sh->arena, bytes) : NULL;
	uint64_t base = 0;
	if (ok && fresh) {
		/* relaxed: distinct ids only; each record is published by its release store below. One
		 * block per shard keeps the ids dense without a shared counter per path. */
		base = atomic_fetch_add_explicit(&pd->path_next, fresh, memory_order_relaxed);
		ok = text && base + fresh - 1 <= PD_MAX_ID;
	}
	uint64_t made = 0;
	for (size_t j = lo; j < hi; j++) {
		uint32_t k = L->order[j];
		if (L->state[k] != ST_NEW)
			continue;
		pd_path_rec *r = ok ? pd_seg_ensure(&pd->paths, base + made) : NULL;
		if (!r) {
			ok = false;
			L->res[k] = 0;
			continue;
		}
		uint32_t id = (uint32_t)(base + made);
		made++;
		const pd_path_rec *pr = pd_path_get(pd, L->parent[k]);
		size_t len;
		uint64_t shash;
		if (L->src) {
			len = L->src[k].length;
			memcpy(text, L->src[k].ptr, len);
			shash = L->src_h[k];
		} else {
			const pd_token_rec *nr = pd_token_get(pd, L->name[k]);
			size_t plen = L->parent[k] == OVS_PD_ROOT ? 0 : pr->len;
			/* relaxed: pd_path_get / pd_token_get acquired the records' publication. */
			memcpy(text, atomic_load_explicit(&pr->str, memory_order_relaxed), plen);
			text[plen] = '/';
			memcpy(text + plen + 1, atomic_load_explicit(&nr->str, memory_order_relaxed), nr->len);
			len = plen + 1 + nr->len;
			shash = pd_hash_bytes(text, len);
		}
		text[len] = '\0';
		r->len = len;
		r->str_hash = shash;
		r->pair_hash = pd_hash_pair(L->parent[k], L->name[k]);
		r->parent = L->parent[k];
		r->name = L->name[k];
		r->depth = pr->depth + 1;
		/* release: publishes the record (and its text) to pd_path_get's acquire, as path_make. */
		atomic_store_explicit(&r->str, text, memory_order_release);
		pd_shard_insert_locked(sh, r->pair_hash, id); /* release store of the entry */
		L->res[k] = id;
		L->shash[k] = shash;
		text += len + 1;
	}
	for (size_t j = lo; j < hi; j++) {
		uint32_t k = L->order[j];
		if (L->state[k] == ST_DUP)
			L->res[k] = L->res[L->res[k]]; /* the first occurrence is in this shard: made above */
	}
	pd_shard_unlock(sh);
	/* relaxed: a statistics counter. */
	atomic_fetch_add_explicit(&pd->path_count, made, memory_order_relaxed);
	if (!ok)
		flag_oom(&L->oom);
}

static void level_make(void *ctx, size_t lo, size_t hi)
{
	for (size_t s = lo; s < hi; s++)
		level_make_shard(ctx, s);
}

/* Phase D for string-index shards [lo, hi). */
static void level_strings(void *ctx, size_t lo, size_t hi)
{
	level *L = ctx;
	ovs_pd *pd = L->pd;
	for (size_t s = lo; s < hi; s++) {
		size_t a = L->start[s], b = L->start[s + 1];
		if (a == b)
			continue;
		pd_shard *sh = &pd->string_index.shards[s];
		pd_shard_lock(sh);
		/* Out of memory only costs these paths the string lookup's fast path (as in path_make). */
		if (pd_shard_reserve(&pd->string_index, pd, sh, b - a))
			for (size_t j = a; j < b; j++) {
				uint32_t k = L->order[j];
				pd_shard_insert_locked(sh, L->shash[k], L->res[k]);
			}
		pd_shard_unlock(sh);
	}
}

/* Makes (or finds) the children (parent[k], name[k]) into res[k]; parents exist. */
static int make_level(ovs_pd *pd, size_t m, const uint32_t *parent, const uint32_t *name, const ovx_string_t *src,
		      const uint64_t *src_h, uint32_t *res)
{
	if (m == 0)
		return PD_BULK_OK;
	level L = { .pd = pd, .m = m, .parent = parent, .name = name, .src = src, .src_h = src_h, .res = res };
	atomic_init(&L.oom, false);
	L.state = malloc(m);
	L.key = malloc(m);
	L.shash = malloc(m * sizeof *L.shash);
	L.order = malloc(m * sizeof *L.order);
	int rc = PD_BULK_OOM;
	if (!L.state || !L.key || !L.shash || !L.order)
		goto out;
	par_for(pd, m, BLK, level_keys_pair, &L);
	if (!partition(pd, L.key, m, L.order, L.start))
		goto out;
	par_for(pd, PD_SHARDS, 1, level_make, &L);
	par_for(pd, m, BLK, level_keys_string, &L);
	if (partition(pd, L.key, m, L.order, L.start))
		par_for(pd, PD_SHARDS, 1, level_strings, &L);
	/* relaxed: after the joins above. */
	rc = atomic_load_explicit(&L.oom, memory_order_relaxed) ? PD_BULK_OOM : PD_BULK_OK;
out:
	free(L.state);
	free(L.key);
	free(L.shash);
	free(L.order);
	return rc;
}

/* ---- path strings ---------------------------------------------------------------------------------- */

typedef struct sbulk {
	ovs_pd *pd;
	const ovx_string_t *s;
	size_t n;
	bool validate;
	ovx_primpath_t *out;
	uint64_t *h;        /* hash of every string */
	size_t nb;          /* blocks of inputs */
	size_t *bad;        /* per block: first bad index or SIZE_MAX */
	size_t *cnt;        /* per block: misses, then their offsets */
	uint32_t *miss;     /* input index of every miss */
	size_t m;           /* misses */
	size_t mb;          /* blocks of misses */
	size_t *pcnt;       /* per miss block: distinct parent prefixes, then offsets */
	ovx_string_t *par;  /* the parent prefixes to intern */
	uint32_t *pslot;    /* per miss: index into par, or NO_SLOT (the root) */
	uint32_t *name;     /* per miss: token of the last component */
	ovx_string_t *msrc; /* per miss: its string */
	uint64_t *mh;       /* per miss: its hash */
	atomic_bool oom;
} sbulk;

static void sb_lookup(void *ctx, size_t lo, size_t hi)
{
	sbulk *B = ctx;
	ovs_pd *pd = B->pd;
	for (size_t b = lo; b < hi; b++) {
		size_t end = (b + 1) * BLK < B->n ? (b + 1) * BLK : B->n, misses = 0, bad = SIZE_MAX;
		for (size_t i = b * BLK; i < end; i++) {
			const ovx_string_t *s = &B->s[i];
			size_t off;
			if (B->validate && pd_path_syntax(s->ptr, s->length, &off) != PD_SYNTAX_OK) {
				if (bad == SIZE_MAX)
					bad = i;
				B->out[i] = 0;
				continue;
			}
			if (s->length == 1) {
				B->out[i] = OVS_PD_ROOT;
				continue;
			}
			uint64_t h = pd_hash_bytes(s->ptr, s->length);
			pd_bytes_key k = { s->ptr, s->length };
			B->h[i] = h;
			B->out[i] = pd_index_find(&pd->string_index, pd, h, &k);
			misses += B->out[i] == 0;
		}
		B->bad[b] = bad;
		B->cnt[b] = misses;
	}
}

static void sb_collect(void *ctx, size_t lo, size_t hi)
{
	sbulk *B = ctx;
	for (size_t b = lo; b < hi; b++) {
		size_t end = (b + 1) * BLK < B->n ? (b + 1) * BLK : B->n, pos = B->cnt[b];
		for (size_t i = b * BLK; i < end; i++)
			if (B->out[i] == 0)
				B->miss[pos++] = (uint32_t)i;
	}
}

/* Length of the parent prefix of a valid non-root path ("/a/b" -> 2; "/a" -> 0: the root). */
static inline size_t parent_len(const ovx_string_t *s)
{
	size_t i = s->length - 1;
	while (s->ptr[i] != '/')
		i--;
	return i;
}

/* Whether miss k's parent prefix is a new entry of the parent list (the first of its block, or
 * different from the previous miss's). */
static inline bool new_parent(const sbulk *B, size_t k, size_t first)
{
	const ovx_string_t *s = &B->s[B->miss[k]];
	size_t pl = parent_len(s);
	if (pl == 0)
		return false;
	if (k == first)
		return true;
	const ovx_string_t *q = &B->s[B->miss[k - 1]];
	size_t ql = parent_len(q);
	return ql != pl || memcmp(q->ptr, s->ptr, pl) != 0;
}

static void sb_parents_count(void *ctx, size_t lo, size_t hi)
{
	sbulk *B = ctx;
	for (size_t b = lo; b < hi; b++) {
		size_t end = (b + 1) * BLK < B->m ? (b + 1) * BLK : B->m, c = 0;
		for (size_t k = b * BLK; k < end; k++)
			c += new_parent(B, k, b * BLK);
		B->pcnt[b] = c;
	}
}

static void sb_parents_fill(void *ctx, size_t lo, size_t hi)
{
	sbulk *B = ctx;
	ovs_pd *pd = B->pd;
	for (size_t b = lo; b < hi; b++) {
		size_t end = (b + 1) * BLK < B->m ? (b + 1) * BLK : B->m, pos = B->pcnt[b];
		uint32_t slot = NO_SLOT;
		for (size_t k = b * BLK; k < end; k++) {
			const ovx_string_t *s = &B->s[B->miss[k]];
			size_t pl = parent_len(s);
			if (pl == 0) {
				B->pslot[k] = NO_SLOT;
			} else {
				if (new_parent(B, k, b * BLK)) {
					B->par[pos] = (ovx_string_t){ s->ptr, pl };
					slot = (uint32_t)pos++;
				}
				B->pslot[k] = slot;
			}
			const char *nm = s->ptr + pl + 1;
			size_t nl = s->length - pl - 1;
			pd_bytes_key tk = { nm, nl };
			uint32_t t = pd_index_find(&pd->token_index, pd, pd_hash_bytes(nm, nl), &tk);
			if (!t)
				t = pd_token_intern_valid(pd, nm, nl);
			if (!t)
				flag_oom(&B->oom);
			B->name[k] = t;
			B->msrc[k] = *s;
			B->mh[k] = B->h[B->miss[k]];
		}
	}
}

static int sbulk_run(ovs_pd *pd, const ovx_string_t *strs, size_t n, bool validate, ovx_primpath_t *out, size_t *bad);

static int sbulk_make(sbulk *B)
{
	ovs_pd *pd = B->pd;
	B->mb = nblocks(B->m);
	B->pcnt = malloc(B->mb * sizeof *B->pcnt);
	B->pslot = malloc(B->m * sizeof *B->pslot);
	B->name = malloc(B->m * sizeof *B->name);
	B->msrc = malloc(B->m * sizeof *B->msrc);
	B->mh = malloc(B->m * sizeof *B->mh);
	if (!B->pcnt || !B->pslot || !B->name || !B->msrc || !B->mh)
		return PD_BULK_OOM;
	par_for(pd, B->mb, 1, sb_parents_count, B);
	size_t np = 0;
	for (size_t b = 0; b < B->mb; b++) {
		size_t c = B->pcnt[b];
		B->pcnt[b] = np;
		np += c;
	}
	B->par = malloc((np ? np : 1) * sizeof *B->par);
	if (!B->par)
		return PD_BULK_OOM;
	par_for(pd, B->mb, 1, sb_parents_fill, B);
	/* relaxed: after the join. */
	if (atomic_load_explicit(&B->oom, memory_order_relaxed))
		return PD_BULK_OOM;
	/* Every parent first (recursively, so grandparents before parents), then the children. */
	uint32_t *parent = malloc(B->m * sizeof *parent);
	ovx_primpath_t *pid = np ? malloc(np * sizeof *pid) : NULL;
	int rc = PD_BULK_OOM;
	if (parent && (pid || !np)) {
		size_t unused;
		rc = np ? sbulk_run(pd, B->par, np, false, pid, &unused) : PD_BULK_OK;
	}
	if (rc == PD_BULK_OK) {
		for (size_t k = 0; k < B->m; k++)
			parent[k] = B->pslot[k] == NO_SLOT ? (uint32_t)OVS_PD_ROOT : (uint32_t)pid[B->pslot[k]];
		uint32_t *res = B->pslot; /* pslot is no longer needed: reuse it for the ids */
		rc = make_level(pd, B->m, parent, B->name, B->msrc, B->mh, res);
		for (size_t k = 0; k < B->m; k++)
			B->out[B->miss[k]] = res[k];
	}
	free(parent);
	free(pid);
	return rc;
}

static int sbulk_run(ovs_pd *pd, const ovx_string_t *strs, size_t n, bool validate, ovx_primpath_t *out, size_t *bad)
{
	sbulk B = { .pd = pd, .s = strs, .n = n, .validate = validate, .out = out };
	atomic_init(&B.oom, false);
	B.nb = nblocks(n);
	B.h = malloc(n * sizeof *B.h);
	B.bad = malloc(B.nb * sizeof *B.bad);
	B.cnt = malloc(B.nb * sizeof *B.cnt);
	int rc = PD_BULK_OOM;
	if (!B.h || !B.bad || !B.cnt)
		goto out;
	par_for(pd, B.nb, 1, sb_lookup, &B);
	size_t m = 0;
	for (size_t b = 0; b < B.nb; b++) {
		if (B.bad[b] != SIZE_MAX) {
			*bad = B.bad[b];
			rc = PD_BULK_BAD;
			goto out;
		}
		size_t c = B.cnt[b];
		B.cnt[b] = m;
		m += c;
	}
	rc = PD_BULK_OK;
	if (m == 0)
		goto out;
	B.m = m;
	B.miss = malloc(m * sizeof *B.miss);
	if (!B.miss) {
		rc = PD_BULK_OOM;
		goto out;
	}
	par_for(pd, B.nb, 1, sb_collect, &B);
	rc = sbulk_make(&B);
out:
	free(B.h);
	free(B.bad);
	free(B.cnt);
	free(B.miss);
	free(B.pcnt);
	free(B.par);
	free(B.pslot);
	free(B.name);
	free(B.msrc);
	free(B.mh);
	return rc;
}

int pd_intern_paths_bulk(ovs_pd *pd, const ovx_string_t *strs, size_t n, ovx_primpath_t *out, size_t *bad)
{
	*bad = SIZE_MAX;
	if (n == 0)
		return PD_BULK_OK;
	if (n >= UINT32_MAX) { /* item indices are 32-bit: one at a time */
		for (size_t i = 0; i < n; i++) {
			size_t off;
			if (pd_path_syntax(strs[i].ptr, strs[i].length, &off) != PD_SYNTAX_OK) {
				*bad = i;
				return PD_BULK_BAD;
			}
		}
		for (size_t i = 0; i < n; i++)
			if (!(out[i] = ovs_pd_intern_path(pd, strs[i].ptr, strs[i].length)))
				return PD_BULK_OOM;
		return PD_BULK_OK;
	}
	return sbulk_run(pd, strs, n, true, out, bad);
}

/* ---- paths from tokens ----------------------------------------------------------------------------- */

typedef struct tbulk {
	ovs_pd *pd;
	const ovx_token_t *tok;
	const size_t *counts;
	size_t n;
	size_t *first;    /* per path: index of its first token */
	uint32_t *cur;    /* per path: the path made of its first c components */
	uint32_t *item;   /* per path: its item at this level */
	size_t nb;
	size_t *bcnt;     /* per block: items, then offsets */
	uint32_t *parent, *name, *res; /* per item */
	size_t c;         /* the level: component index */
} tbulk;

/* Whether path p has a component c whose (parent, name) starts a new item (the first in its block
 * or different from the previous path's at this level). */
static inline bool tb_new_item(const tbulk *T, size_t p, size_t blockfirst, size_t *prev)
{
	if (T->counts[p] <= T->c)
		return false;
	bool fresh = *prev == SIZE_MAX || T->cur[*prev] != T->cur[p] ||
		     T->tok[T->first[*prev] + T->c] != T->tok[T->first[p] + T->c];
	(void)blockfirst;
	*prev = p;
	return fresh;
}

static void tb_count(void *ctx, size_t lo, size_t hi)
{
	tbulk *T = ctx;
	for (size_t b = lo; b < hi; b++) {
		size_t end = (b + 1) * BLK < T->n ? (b + 1) * BLK : T->n, c = 0, prev = SIZE_MAX;
		for (size_t p = b * BLK; p < end; p++)
			c += tb_new_item(T, p, b * BLK, &prev);
		T->bcnt[b] = c;
	}
}

static void tb_fill(void *ctx, size_t lo, size_t hi)
{
	tbulk *T = ctx;
	for (size_t b = lo; b < hi; b++) {
		size_t end = (b + 1) * BLK < T->n ? (b + 1) * BLK : T->n, pos = T->bcnt[b], prev = SIZE_MAX;
		for (size_t p = b * BLK; p < end; p++) {
			if (T->counts[p] <= T->c)
				continue;
			if (tb_new_item(T, p, b * BLK, &prev)) {
				T->parent[pos] = T->cur[p];
				T->name[pos] = (uint32_t)T->tok[T->first[p] + T->c];
				pos++;
			}
			T->item[p] = (uint32_t)(pos - 1);
		}
	}
}

static void tb_advance(void *ctx, size_t lo, size_t hi)
{
	tbulk *T = ctx;
	for (size_t p = lo; p < hi; p++)
		if (T->counts[p] > T->c)
			T->cur[p] = T->res[T->item[p]];
}

int pd_intern_token_paths_bulk(ovs_pd *pd, const ovx_token_t *tokens, const size_t *counts, size_t n,
			       ovx_primpath_t *out)
{
	if (n == 0)
		return PD_BULK_OK;
	tbulk T = { .pd = pd, .tok = tokens, .counts = counts, .n = n };
	T.nb = nblocks(n);
	T.first = malloc(n * sizeof *T.first);
	T.cur = malloc(n * sizeof *T.cur);
	T.item = malloc(n * sizeof *T.item);
	T.bcnt = malloc(T.nb * sizeof *T.bcnt);
	int rc = PD_BULK_OOM;
	if (n >= UINT32_MAX || !T.first || !T.cur || !T.item || !T.bcnt)
		goto out;
	size_t depth = 0, pos = 0;
	for (size_t p = 0; p < n; p++) {
		T.first[p] = pos;
		pos += counts[p];
		T.cur[p] = (uint32_t)OVS_PD_ROOT;
		if (counts[p] > depth)
			depth = counts[p];
	}
	rc = PD_BULK_OK;
	for (T.c = 0; T.c < depth && rc == PD_BULK_OK; T.c++) {
		par_for(pd, T.nb, 1, tb_count, &T);
		size_t m = 0;
		for (size_t b = 0; b < T.nb; b++) {
			size_t c = T.bcnt[b];
			T.bcnt[b] = m;
			m += c;
		}
		T.parent = malloc(m * sizeof *T.parent);
		T.name = malloc(m * sizeof *T.name);
		T.res = malloc(m * sizeof *T.res);
		if (!T.parent || !T.name || !T.res) {
			rc = PD_BULK_OOM;
		} else {
			par_for(pd, T.nb, 1, tb_fill, &T);
			rc = make_level(pd, m, T.parent, T.name, NULL, NULL, T.res);
			if (rc == PD_BULK_OK)
				par_for(pd, n, BLK, tb_advance, &T);
		}
		free(T.parent);
		free(T.name);
		free(T.res);
		T.parent = T.name = T.res = NULL;
	}
	if (rc == PD_BULK_OK)
		for (size_t p = 0; p < n; p++)
			out[p] = T.cur[p];
out:
	free(T.first);
	free(T.cur);
	free(T.item);
	free(T.bcnt);
	return rc;
}

/* ---- token validation ------------------------------------------------------------------------------ */

typedef struct tcheck {
	ovs_pd *pd;
	const ovx_token_t *tok;
	size_t n;
	size_t *bad; /* per block: first bad index or SIZE_MAX */
} tcheck;

static void tc_run(void *ctx, size_t lo, size_t hi)
{
	tcheck *C = ctx;
	for (size_t b = lo; b < hi; b++) {
		size_t end = (b + 1) * BLK < C->n ? (b + 1) * BLK : C->n, bad = SIZE_MAX;
		for (size_t i = b * BLK; i < end && bad == SIZE_MAX; i++) {
			const pd_token_rec *r = pd_token_get(C->pd, C->tok[i]);
			/* relaxed: pd_token_get acquired the record's publication. */
			if (!r || memchr(atomic_load_explicit(&r->str, memory_order_relaxed), '/', r->len))
				bad = i;
		}
		C->bad[b] = bad;
	}
}

size_t pd_tokens_first_bad(ovs_pd *pd, const ovx_token_t *tokens, size_t n)
{
	tcheck C = { pd, tokens, n, malloc(nblocks(n) * sizeof(size_t)) };
	size_t bad = SIZE_MAX;
	if (!C.bad) { /* out of memory for the scratch: check here */
		for (size_t i = 0; i < n; i++) {
			const pd_token_rec *r = pd_token_get(pd, tokens[i]);
			if (!r || memchr(atomic_load_explicit(&r->str, memory_order_relaxed), '/', r->len))
				return i;
		}
		return SIZE_MAX;
	}
	par_for(pd, nblocks(n), 1, tc_run, &C);
	for (size_t b = 0; b < nblocks(n) && bad == SIZE_MAX; b++)
		bad = C.bad[b];
	free(C.bad);
	return bad;
}
