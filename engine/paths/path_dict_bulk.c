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

/* ---- C and D: making the missing children of existing parents ------------------------------------- */

enum { ST_HIT = 0, ST_NEW = 1, ST_DUP = 2 };

/* One child to make (or find): everything a shard task needs, packed, so that the task reads its
 * items in order instead of reaching into a dozen arrays at random (that cost ~7 cache misses per
 * path). */
typedef struct pd_item {
	uint32_t parent, name; /* the key */
	uint32_t k;            /* the caller's index (where the result goes) */
	uint32_t id;           /* out: the path */
	const char *text;      /* dictionary-owned text of the path (a blob); NULL: built from parent + name */
	size_t len;            /* its length (with text) */
	uint64_t shash;        /* its string hash (with text; computed when built) */
	uint32_t first;        /* ST_DUP: index (in the shard's order) of the first occurrence */
	uint8_t key;           /* partition key: a shard, or SKIP */
	uint8_t state;         /* ST_* */
} pd_item;

/* Counting sort of in[0, m) by in[k].key into out (stable; SKIP items dropped): shard s's items
 * are out[start[s] .. start[s+1]). Each block of the input writes 64 sequential streams. */
typedef struct part {
	const pd_item *in;
	pd_item *out;
	size_t m;
	uint32_t *cnt; /* [block][PD_SHARDS] counts, then offsets */
} part;

static void part_count(void *ctx, size_t lo, size_t hi)
{
	part *p = ctx;
	for (size_t b = lo; b < hi; b++) {
		uint32_t *c = p->cnt + b * PD_SHARDS;
		memset(c, 0, PD_SHARDS * sizeof *c);
		size_t end = (b + 1) * BLK < p->m ? (b + 1) * BLK : p->m;
		for (size_t k = b * BLK; k < end; k++)
			if (p->in[k].key != SKIP)
				c[p->in[k].key]++;
	}
}

static void part_scatter(void *ctx, size_t lo, size_t hi)
{
	part *p = ctx;
	for (size_t b = lo; b < hi; b++) {
		uint32_t *c = p->cnt + b * PD_SHARDS;
		size_t end = (b + 1) * BLK < p->m ? (b + 1) * BLK : p->m;
		for (size_t k = b * BLK; k < end; k++)
			if (p->in[k].key != SKIP)
				p->out[c[p->in[k].key]++] = p->in[k];
	}
}

/* False when out of memory. */
static bool partition(ovs_pd *pd, const pd_item *in, size_t m, pd_item *out, size_t start[PD_SHARDS + 1])
{
	size_t nb = nblocks(m);
	part p = { in, out, m, malloc(nb * PD_SHARDS * sizeof(uint32_t)) };
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

typedef struct level {
	ovs_pd *pd;
	size_t m;
	pd_item *items;   /* the caller's order, then (after the second partition) string shards' */
	pd_item *sorted;  /* pair shards' order */
	uint32_t *res;    /* out: res[item.k] = its path (0 when out of memory) */
	size_t start[PD_SHARDS + 1];
	atomic_bool oom;
} level;

static void level_keys_pair(void *ctx, size_t lo, size_t hi)
{
	level *L = ctx;
	for (size_t k = lo; k < hi; k++)
		L->items[k].key = (uint8_t)(pd_hash_pair(L->items[k].parent, L->items[k].name) & (PD_SHARDS - 1));
}

/* After phase C: results to the caller, and the keys of the string index's shards. */
static void level_results(void *ctx, size_t lo, size_t hi)
{
	level *L = ctx;
	for (size_t j = lo; j < hi; j++) {
		pd_item *it = &L->sorted[j];
		L->res[it->k] = it->id;
		it->key = it->state == ST_NEW && it->id ? (uint8_t)(it->shash & (PD_SHARDS - 1)) : SKIP;
	}
}

/* Phase C for one shard of the pair index: its items are sorted[start[s] .. start[s+1]). */
static void level_make_shard(level *L, size_t s)
{
	ovs_pd *pd = L->pd;
	size_t lo = L->start[s], hi = L->start[s + 1], c = hi - lo;
	if (c == 0)
		return;
	pd_item *items = L->sorted + lo;
	pd_shard *sh = &pd->pair_index.shards[s];
	/* A set of this call's new keys, to drop duplicates within the call: item indices + 1. */
	size_t cap = 4;
	while (cap < 2 * c)
		cap *= 2;
	uint32_t *set = calloc(cap, sizeof *set);
	if (!set) {
		flag_oom(&L->oom);
		for (size_t j = 0; j < c; j++)
			items[j].id = 0, items[j].state = ST_HIT;
		return;
	}
	pd_shard_lock(sh);
	size_t fresh = 0, bytes = 0;
	enum { AHEAD = 8 }; /* items whose first table entry is prefetched ahead of the probe */
	for (size_t j = 0; j < c && j < AHEAD; j++)
		pd_index_prefetch(&pd->pair_index, pd_hash_pair(items[j].parent, items[j].name));
	for (size_t j = 0; j < c; j++) {
		pd_item *it = &items[j];
		if (j + AHEAD < c)
			pd_index_prefetch(&pd->pair_index, pd_hash_pair(items[j + AHEAD].parent, items[j + AHEAD].name));
		pd_pair_key key = { it->parent, it->name };
		uint64_t h = pd_hash_pair(key.parent, key.name);
		uint32_t id = pd_shard_find_locked(&pd->pair_index, pd, sh, h, &key);
		if (id) {
			it->id = id;
			it->state = ST_HIT;
			continue;
		}
		size_t i = (size_t)(h >> PD_SHARD_BITS) & (cap - 1);
		for (;;) {
			uint32_t e = set[i];
			if (e == 0) {
				set[i] = (uint32_t)j + 1;
				it->state = ST_NEW;
				fresh++;
				if (!it->text) {
					const pd_path_rec *pr = pd_path_get(pd, key.parent);
					const pd_token_rec *nr = pd_token_get(pd, key.name);
					bytes += (key.parent == OVS_PD_ROOT ? 0 : pr->len) + 1 + nr->len + 1;
				}
				break;
			}
			if (items[e - 1].parent == key.parent && items[e - 1].name == key.name) {
				it->state = ST_DUP;
				it->first = e - 1;
				break;
			}
			i = (i + 1) & (cap - 1);
		}
	}
	free(set);
	bool ok = fresh == 0 || pd_shard_reserve(&pd->pair_index, pd, sh, fresh);
	/* Texts built here live in the shard's arena (we hold its lock); callers' texts are blobs. */
	char *text = ok && bytes ? pd_arena_alloc(&sh->arena, bytes) : NULL;
	uint64_t base = 0;
	if (ok && fresh) {
		/* relaxed: distinct ids only; each record is published by its release store below. One
		 * block per shard keeps the ids dense without a shared counter per path. */
		base = atomic_fetch_add_explicit(&pd->path_next, fresh, memory_order_relaxed);
		ok = (text || !bytes) && base + fresh - 1 <= PD_MAX_ID;
	}
	uint64_t made = 0;
	for (size_t j = 0; j < c; j++) {
		pd_item *it = &items[j];
		if (it->state != ST_NEW)
			continue;
		pd_path_rec *r = ok ? pd_seg_ensure(&pd->paths, base + made) : NULL;
		if (!r) {
			ok = false;
			it->id = 0;
			continue;
		}
		uint32_t id = (uint32_t)(base + made);
		made++;
		const pd_path_rec *pr = pd_path_get(pd, it->parent);
		const char *str = it->text;
		if (!str) {
			const pd_token_rec *nr = pd_token_get(pd, it->name);
			size_t plen = it->parent == OVS_PD_ROOT ? 0 : pr->len;
			/* relaxed: pd_path_get / pd_token_get acquired the records' publication. */
			memcpy(text, atomic_load_explicit(&pr->str, memory_order_relaxed), plen);
			text[plen] = '/';
			memcpy(text + plen + 1, atomic_load_explicit(&nr->str, memory_order_relaxed), nr->len);
			it->len = plen + 1 + nr->len;
			text[it->len] = '\0';
			it->shash = pd_hash_bytes(text, it->len);
			str = text;
			text += it->len + 1;
		}
		r->len = it->len;
		r->str_hash = it->shash;
		r->pair_hash = pd_hash_pair(it->parent, it->name);
		r->parent = it->parent;
		r->name = it->name;
		r->depth = pr->depth + 1;
		/* release: publishes the record (and its text) to pd_path_get's acquire, as path_make. */
		atomic_store_explicit(&r->str, str, memory_order_release);
		pd_shard_insert_locked(sh, r->pair_hash, id); /* release store of the entry */
		it->id = id;
	}
	for (size_t j = 0; j < c; j++)
		if (items[j].state == ST_DUP)
			items[j].id = items[items[j].first].id; /* the first occurrence: made above */
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

/* Phase D for string-index shards [lo, hi): their items are items[start[s] .. start[s+1]). */
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
				if (j + 8 < b) /* overlap the inserts' cache misses */
					pd_index_prefetch(&pd->string_index, L->items[j + 8].shash);
				pd_shard_insert_locked(sh, L->items[j].shash, L->items[j].id);
			}
		pd_shard_unlock(sh);
	}
}

/* Makes (or finds) the children items[k] = (parent, name) into res[items[k].k]; every parent
 * exists. `items` (m of them, in the caller's order) is used as scratch. */
static int make_level(ovs_pd *pd, size_t m, pd_item *items, uint32_t *res)
{
	if (m == 0)
		return PD_BULK_OK;
	level L = { .pd = pd, .m = m, .items = items, .res = res };
	atomic_init(&L.oom, false);
	L.sorted = malloc(m * sizeof *L.sorted);
	int rc = PD_BULK_OOM;
	if (!L.sorted)
		goto out;
	par_for(pd, m, BLK, level_keys_pair, &L);
	if (!partition(pd, L.items, m, L.sorted, L.start))
		goto out;
	par_for(pd, PD_SHARDS, 1, level_make, &L);
	par_for(pd, m, BLK, level_results, &L);
	if (partition(pd, L.sorted, m, L.items, L.start))
		par_for(pd, PD_SHARDS, 1, level_strings, &L);
	/* relaxed: after the joins above. */
	rc = atomic_load_explicit(&L.oom, memory_order_relaxed) ? PD_BULK_OOM : PD_BULK_OK;
out:
	free(L.sorted);
	return rc;
}

/* A block of path texts that a bulk call copied (records point into it); freed at destroy. */
static char *blob_new(ovs_pd *pd, size_t bytes)
{
	if (bytes > SIZE_MAX - sizeof(pd_blob))
		return NULL;
	pd_blob *b = malloc(sizeof(pd_blob) + bytes);
	if (!b)
		return NULL;
	/* relaxed: the CAS re-validates. */
	pd_blob *head = atomic_load_explicit(&pd->blobs, memory_order_relaxed);
	do
		b->next = head;
	/* relaxed (both): the list is only walked by destroy, which never races with a call. */
	while (!atomic_compare_exchange_weak_explicit(&pd->blobs, &head, b, memory_order_relaxed, memory_order_relaxed));
	return b->data;
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
	size_t *pbytes;     /* per miss block: bytes of its texts, then offsets */
	char *blob;         /* the misses' texts, copied in order */
	ovx_string_t *par;  /* the parent prefixes to intern */
	uint32_t *pslot;    /* per miss: index into par, or NO_SLOT (the root) */
	pd_item *items;     /* per miss */
	ovx_primpath_t *pid; /* per parent prefix: its path */
	atomic_bool oom;
} sbulk;

static void sb_lookup(void *ctx, size_t lo, size_t hi)
{
	sbulk *B = ctx;
	ovs_pd *pd = B->pd;
	for (size_t b = lo; b < hi; b++) {
		size_t end = (b + 1) * BLK < B->n ? (b + 1) * BLK : B->n, misses = 0, bad = SIZE_MAX;
		/* First check and hash the block, prefetching each string's first table entry, then probe:
		 * the probes' cache misses overlap instead of coming one after another. */
		for (size_t i = b * BLK; i < end; i++) {
			const ovx_string_t *s = &B->s[i];
			size_t off;
			if (B->validate && pd_path_syntax(s->ptr, s->length, &off) != PD_SYNTAX_OK) {
				if (bad == SIZE_MAX)
					bad = i;
				B->out[i] = 0;
				B->h[i] = 0;
				continue;
			}
			B->h[i] = s->length == 1 ? 0 : pd_hash_bytes(s->ptr, s->length);
			if (s->length > 1)
				pd_index_prefetch(&pd->string_index, B->h[i]);
		}
		for (size_t i = b * BLK; i < end; i++) {
			const ovx_string_t *s = &B->s[i];
			if (s->length <= 1 || (bad != SIZE_MAX && i >= bad)) {
				if (s->length == 1 && bad == SIZE_MAX)
					B->out[i] = OVS_PD_ROOT;
				continue;
			}
			pd_bytes_key k = { s->ptr, s->length };
			B->out[i] = pd_index_find(&pd->string_index, pd, B->h[i], &k);
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
		size_t end = (b + 1) * BLK < B->m ? (b + 1) * BLK : B->m, c = 0, bytes = 0;
		for (size_t k = b * BLK; k < end; k++) {
			c += new_parent(B, k, b * BLK);
			bytes += B->s[B->miss[k]].length + 1;
		}
		B->pcnt[b] = c;
		B->pbytes[b] = bytes;
	}
}

static void sb_parents_fill(void *ctx, size_t lo, size_t hi)
{
	sbulk *B = ctx;
	ovs_pd *pd = B->pd;
	for (size_t b = lo; b < hi; b++) {
		size_t end = (b + 1) * BLK < B->m ? (b + 1) * BLK : B->m, pos = B->pcnt[b];
		char *text = B->blob + B->pbytes[b];
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
			memcpy(text, s->ptr, s->length);
			text[s->length] = '\0';
			B->items[k] = (pd_item){ .parent = 0, .name = t, .k = (uint32_t)k, .text = text, .len = s->length,
						 .shash = B->h[B->miss[k]] };
			text += s->length + 1;
		}
	}
}

static void sb_set_parents(void *ctx, size_t lo, size_t hi)
{
	sbulk *B = ctx;
	for (size_t k = lo; k < hi; k++)
		B->items[k].parent = B->pslot[k] == NO_SLOT ? (uint32_t)OVS_PD_ROOT : (uint32_t)B->pid[B->pslot[k]];
}

static void sb_outputs(void *ctx, size_t lo, size_t hi)
{
	sbulk *B = ctx;
	for (size_t k = lo; k < hi; k++)
		B->out[B->miss[k]] = B->pslot[k]; /* pslot holds the results now */
}

static int sbulk_run(ovs_pd *pd, const ovx_string_t *strs, size_t n, bool validate, ovx_primpath_t *out, size_t *bad);

static int sbulk_make(sbulk *B)
{
	ovs_pd *pd = B->pd;
	B->mb = nblocks(B->m);
	B->pcnt = malloc(B->mb * sizeof *B->pcnt);
	B->pbytes = malloc(B->mb * sizeof *B->pbytes);
	B->pslot = malloc(B->m * sizeof *B->pslot);
	B->items = malloc(B->m * sizeof *B->items);
	if (!B->pcnt || !B->pbytes || !B->pslot || !B->items)
		return PD_BULK_OOM;
	par_for(pd, B->mb, 1, sb_parents_count, B);
	size_t np = 0, bytes = 0;
	for (size_t b = 0; b < B->mb; b++) {
		size_t c = B->pcnt[b], y = B->pbytes[b];
		B->pcnt[b] = np;
		B->pbytes[b] = bytes;
		np += c;
		bytes += y;
	}
	B->par = malloc((np ? np : 1) * sizeof *B->par);
	B->pid = malloc((np ? np : 1) * sizeof *B->pid);
	B->blob = blob_new(pd, bytes);
	if (!B->par || !B->pid || !B->blob)
		return PD_BULK_OOM;
	par_for(pd, B->mb, 1, sb_parents_fill, B);
	/* relaxed: after the join. */
	if (atomic_load_explicit(&B->oom, memory_order_relaxed))
		return PD_BULK_OOM;
	/* Every parent first (recursively, so grandparents before parents), then the children. */
	size_t unused;
	int rc = np ? sbulk_run(pd, B->par, np, false, B->pid, &unused) : PD_BULK_OK;
	if (rc != PD_BULK_OK)
		return rc;
	par_for(pd, B->m, BLK, sb_set_parents, B);
	rc = make_level(pd, B->m, B->items, B->pslot); /* results into pslot, no longer needed */
	par_for(pd, B->m, BLK, sb_outputs, B);
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
	free(B.pbytes);
	free(B.par);
	free(B.pid);
	free(B.pslot);
	free(B.items);
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
	pd_item *items;   /* per item */
	uint32_t *res;    /* per item: its path */
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
				T->items[pos] = (pd_item){ .parent = T->cur[p], .name = (uint32_t)T->tok[T->first[p] + T->c],
							   .k = (uint32_t)pos };
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
		T.items = malloc((m ? m : 1) * sizeof *T.items);
		T.res = malloc((m ? m : 1) * sizeof *T.res);
		if (!T.items || !T.res) {
			rc = PD_BULK_OOM;
		} else {
			par_for(pd, T.nb, 1, tb_fill, &T);
			rc = make_level(pd, m, T.items, T.res);
			if (rc == PD_BULK_OK)
				par_for(pd, n, BLK, tb_advance, &T);
		}
		free(T.items);
		free(T.res);
		T.items = NULL;
		T.res = NULL;
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
