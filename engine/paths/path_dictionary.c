/*
 * path_dictionary.c — interning of tokens and prim paths, path lists, and the engine accessors of
 * path_dictionary.h. The vtable slots are in path_dict_vtable.c, the index in path_dict_index.c.
 *
 * Publication protocol (all record kinds): a record is written with plain stores, then its `str`
 * pointer is stored with release; an index entry naming it is stored (release) only after that.
 * Readers acquire either the index entry or `str` before reading any other field.
 */
#include "path_dict_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- record access ------------------------------------------------------------------------------- */

const pd_token_rec *pd_token_get(const ovs_pd *pd, uint64_t id)
{
	const pd_token_rec *r = pd_seg_get(&pd->tokens, id);
	/* acquire: pairs with the release store of `str` in token_make; the other fields were written
	 * before it, so they are visible once we see a non-NULL `str`. */
	if (!r || !atomic_load_explicit(&r->str, memory_order_acquire))
		return NULL;
	return r;
}

const pd_path_rec *pd_path_get(const ovs_pd *pd, uint64_t id)
{
	const pd_path_rec *r = pd_seg_get(&pd->paths, id);
	/* acquire: pairs with the release store of `str` in path_publish (same argument as tokens). */
	if (!r || !atomic_load_explicit(&r->str, memory_order_acquire))
		return NULL;
	return r;
}

/* `str` of a record already known to be published: relaxed suffices because the caller's acquire
 * (of an index entry or of `str` itself in pd_*_get) already ordered the publication before us. */
static inline const char *rec_str_token(const pd_token_rec *r)
{
	return atomic_load_explicit(&r->str, memory_order_relaxed);
}

static inline const char *rec_str_path(const pd_path_rec *r)
{
	return atomic_load_explicit(&r->str, memory_order_relaxed);
}

/* ---- index callbacks ----------------------------------------------------------------------------- */

static bool token_matches(const ovs_pd *pd, uint32_t id, const void *key)
{
	const pd_bytes_key *k = key;
	const pd_token_rec *r = pd_seg_get(&pd->tokens, id);
	return r->len == k->len && memcmp(rec_str_token(r), k->ptr, k->len) == 0;
}

static uint64_t token_hash_of(const ovs_pd *pd, uint32_t id)
{
	return ((const pd_token_rec *)pd_seg_get(&pd->tokens, id))->hash;
}

static bool pair_matches(const ovs_pd *pd, uint32_t id, const void *key)
{
	const pd_pair_key *k = key;
	const pd_path_rec *r = pd_seg_get(&pd->paths, id);
	return r->parent == k->parent && r->name == k->name;
}

static uint64_t pair_hash_of(const ovs_pd *pd, uint32_t id)
{
	return ((const pd_path_rec *)pd_seg_get(&pd->paths, id))->pair_hash;
}

static bool string_matches(const ovs_pd *pd, uint32_t id, const void *key)
{
	const pd_bytes_key *k = key;
	const pd_path_rec *r = pd_seg_get(&pd->paths, id);
	return r->len == k->len && memcmp(rec_str_path(r), k->ptr, k->len) == 0;
}

static uint64_t string_hash_of(const ovs_pd *pd, uint32_t id)
{
	return ((const pd_path_rec *)pd_seg_get(&pd->paths, id))->str_hash;
}

static const pd_index_ops token_ops = { token_matches, token_hash_of };
static const pd_index_ops pair_ops = { pair_matches, pair_hash_of };
static const pd_index_ops string_ops = { string_matches, string_hash_of };

/* ---- tokens -------------------------------------------------------------------------------------- */

/* Creates the token record (called under the token index shard mutex, key known absent). */
static uint32_t token_make(ovs_pd *pd, const void *key, uint64_t hash, void *arg)
{
	(void)arg;
	const pd_bytes_key *k = key;
	/* relaxed: the counter only has to hand out distinct ids; the record is published separately. */
	uint64_t id = atomic_fetch_add_explicit(&pd->token_next, 1, memory_order_relaxed);
	pd_token_rec *r = pd_seg_ensure(&pd->tokens, id);
	if (!r)
		return 0;
	char *s = malloc(k->len + 1);
	if (!s)
		return 0;
	memcpy(s, k->ptr, k->len);
	s[k->len] = '\0';
	r->len = k->len;
	r->hash = hash;
	/* release: publishes len/hash and the string bytes to pd_token_get's acquire. */
	atomic_store_explicit(&r->str, s, memory_order_release);
	/* relaxed: a statistics counter. */
	atomic_fetch_add_explicit(&pd->token_count, 1, memory_order_relaxed);
	return (uint32_t)id;
}

uint32_t pd_token_intern_valid(ovs_pd *pd, const char *ptr, size_t len)
{
	pd_bytes_key k = { ptr, len };
	uint64_t h = pd_hash_bytes(ptr, len);
	uint32_t id = pd_index_find(&pd->token_index, pd, h, &k);
	if (id)
		return id;
	return pd_index_find_or_insert(&pd->token_index, pd, h, &k, token_make, NULL);
}

ovx_token_t ovs_pd_intern_token(ovs_pd *pd, const char *ptr, size_t len)
{
	if (!ptr || len == 0 || memchr(ptr, '\0', len))
		return OVX_INVALID_TOKEN;
	return pd_token_intern_valid(pd, ptr, len);
}

ovx_token_t ovs_pd_find_token(const ovs_pd *pd, const char *ptr, size_t len)
{
	if (!ptr || len == 0)
		return OVX_INVALID_TOKEN;
	pd_bytes_key k = { ptr, len };
	/* A string with a NUL was never interned, so no NUL check is needed to answer 0 for it. */
	return pd_index_find(&pd->token_index, pd, pd_hash_bytes(ptr, len), &k);
}

bool ovs_pd_token_is_valid(const ovs_pd *pd, ovx_token_t token)
{
	return pd_token_get(pd, token) != NULL;
}

ovx_string_t ovs_pd_token_string(const ovs_pd *pd, ovx_token_t token)
{
	const pd_token_rec *r = pd_token_get(pd, token);
	if (!r)
		return (ovx_string_t){ NULL, 0 };
	return (ovx_string_t){ rec_str_token(r), r->len };
}

/* ---- paths --------------------------------------------------------------------------------------- */

int pd_path_syntax(const char *ptr, size_t len, size_t *bad_offset)
{
	*bad_offset = 0;
	if (!ptr || len == 0)
		return PD_SYNTAX_EMPTY;
	const char *nul = memchr(ptr, '\0', len);
	if (nul) {
		*bad_offset = (size_t)(nul - ptr);
		return PD_SYNTAX_NUL;
	}
	if (ptr[0] != '/')
		return PD_SYNTAX_RELATIVE;
	if (len == 1)
		return PD_SYNTAX_OK;
	if (ptr[len - 1] == '/') {
		*bad_offset = len - 1;
		return PD_SYNTAX_TRAILING_SLASH;
	}
	for (size_t i = 1; i < len; i++) {
		if (ptr[i] == '/' && ptr[i - 1] == '/') {
			*bad_offset = i;
			return PD_SYNTAX_EMPTY_COMPONENT;
		}
	}
	return PD_SYNTAX_OK;
}

/* Inserts a path id into the string index (key = its full string); arg points at the id. */
static uint32_t string_make(ovs_pd *pd, const void *key, uint64_t hash, void *arg)
{
	(void)pd;
	(void)key;
	(void)hash;
	return *(const uint32_t *)arg; /* the record is already published */
}

/* Creates the record of child (parent, name) (called under the pair index shard mutex, key known
 * absent; parent and name are valid and name has no '/'). */
static uint32_t path_make(ovs_pd *pd, const void *key, uint64_t hash, void *arg)
{
	(void)arg;
	const pd_pair_key *k = key;
	const pd_path_rec *pr = pd_path_get(pd, k->parent);
	const pd_token_rec *nr = pd_token_get(pd, k->name);
	/* relaxed: distinct ids only; the record is published by the release store of `str`. */
	uint64_t id = atomic_fetch_add_explicit(&pd->path_next, 1, memory_order_relaxed);
	pd_path_rec *r = pd_seg_ensure(&pd->paths, id);
	if (!r)
		return 0;
	size_t plen = k->parent == OVS_PD_ROOT ? 0 : pr->len; /* the root contributes only the '/' */
	size_t len = plen + 1 + nr->len;
	/* The text lives in the arena of this pair-index shard, whose lock we hold (freed at destroy). */
	char *s = pd_arena_alloc(&pd->pair_index.shards[hash & (PD_SHARDS - 1)].arena, len + 1);
	if (!s)
		return 0;
	memcpy(s, rec_str_path(pr), plen);
	s[plen] = '/';
	memcpy(s + plen + 1, rec_str_token(nr), nr->len);
	s[len] = '\0';
	r->len = len;
	r->str_hash = pd_hash_bytes(s, len);
	r->pair_hash = hash;
	r->parent = k->parent;
	r->name = k->name;
	r->depth = pr->depth + 1;
	/* release: publishes every field above to pd_path_get's acquire (and, transitively, to readers
	 * acquiring an index entry stored after this). */
	atomic_store_explicit(&r->str, s, memory_order_release);
	/* relaxed: a statistics counter. */
	atomic_fetch_add_explicit(&pd->path_count, 1, memory_order_relaxed);
	/* Nested shard lock (pair -> string, never the reverse, so no deadlock). The string is new (its
	 * path did not exist), so this inserts; failure (out of memory) only costs string lookups their
	 * fast path. */
	uint32_t id32 = (uint32_t)id;
	pd_bytes_key sk = { s, len };
	(void)pd_index_find_or_insert(&pd->string_index, pd, r->str_hash, &sk, string_make, &id32);
	return id32;
}

/* Child of a valid parent by a valid, '/'-free token. */
static uint32_t path_child_valid(ovs_pd *pd, uint32_t parent, uint32_t name)
{
	pd_pair_key k = { parent, name };
	uint64_t h = pd_hash_pair(parent, name);
	uint32_t id = pd_index_find(&pd->pair_index, pd, h, &k);
	if (id)
		return id;
	return pd_index_find_or_insert(&pd->pair_index, pd, h, &k, path_make, NULL);
}

/* Interns a syntactically valid path string. */
static uint32_t path_intern_valid(ovs_pd *pd, const char *ptr, size_t len)
{
	if (len == 1)
		return (uint32_t)OVS_PD_ROOT;
	pd_bytes_key k = { ptr, len };
	uint32_t id = pd_index_find(&pd->string_index, pd, pd_hash_bytes(ptr, len), &k);
	if (id)
		return id;
	uint32_t cur = (uint32_t)OVS_PD_ROOT;
	size_t pos = 1;
	while (pos < len) {
		const char *slash = memchr(ptr + pos, '/', len - pos);
		size_t end = slash ? (size_t)(slash - ptr) : len;
		uint32_t tok = pd_token_intern_valid(pd, ptr + pos, end - pos);
		if (!tok)
			return 0;
		cur = path_child_valid(pd, cur, tok);
		if (!cur)
			return 0;
		pos = end + 1;
	}
	return cur;
}

ovx_primpath_t ovs_pd_intern_path(ovs_pd *pd, const char *ptr, size_t len)
{
	size_t off;
	if (pd_path_syntax(ptr, len, &off) != PD_SYNTAX_OK)
		return OVX_INVALID_PRIMPATH;
	return path_intern_valid(pd, ptr, len);
}

ovx_primpath_t ovs_pd_find_path(const ovs_pd *pd, const char *ptr, size_t len)
{
	size_t off;
	if (pd_path_syntax(ptr, len, &off) != PD_SYNTAX_OK)
		return OVX_INVALID_PRIMPATH;
	if (len == 1)
		return OVS_PD_ROOT;
	pd_bytes_key k = { ptr, len };
	uint32_t id = pd_index_find(&pd->string_index, pd, pd_hash_bytes(ptr, len), &k);
	if (id)
		return id;
	/* Fallback: the path may exist while its string-index entry is still being inserted (or could
	 * not be, for lack of memory). Walk the components through the token and pair indexes. */
	uint32_t cur = (uint32_t)OVS_PD_ROOT;
	size_t pos = 1;
	while (pos < len) {
		const char *slash = memchr(ptr + pos, '/', len - pos);
		size_t end = slash ? (size_t)(slash - ptr) : len;
		pd_bytes_key tk = { ptr + pos, end - pos };
		uint32_t tok = pd_index_find(&pd->token_index, pd, pd_hash_bytes(tk.ptr, tk.len), &tk);
		if (!tok)
			return 0;
		pd_pair_key pk = { cur, tok };
		cur = pd_index_find(&pd->pair_index, pd, pd_hash_pair(cur, tok), &pk);
		if (!cur)
			return 0;
		pos = end + 1;
	}
	return cur;
}

ovx_primpath_t ovs_pd_intern_child(ovs_pd *pd, ovx_primpath_t parent, ovx_token_t name)
{
	const pd_token_rec *nr = pd_token_get(pd, name);
	if (!pd_path_get(pd, parent) || !nr || memchr(rec_str_token(nr), '/', nr->len))
		return OVX_INVALID_PRIMPATH;
	return path_child_valid(pd, (uint32_t)parent, (uint32_t)name);
}

bool ovs_pd_path_is_valid(const ovs_pd *pd, ovx_primpath_t path)
{
	return pd_path_get(pd, path) != NULL;
}

ovx_primpath_t ovs_pd_path_parent(const ovs_pd *pd, ovx_primpath_t path)
{
	const pd_path_rec *r = pd_path_get(pd, path);
	return r ? r->parent : OVX_INVALID_PRIMPATH;
}

ovx_token_t ovs_pd_path_name(const ovs_pd *pd, ovx_primpath_t path)
{
	const pd_path_rec *r = pd_path_get(pd, path);
	return r ? r->name : OVX_INVALID_TOKEN;
}

size_t ovs_pd_path_depth(const ovs_pd *pd, ovx_primpath_t path)
{
	const pd_path_rec *r = pd_path_get(pd, path);
	return r ? r->depth : SIZE_MAX;
}

ovx_string_t ovs_pd_path_string(const ovs_pd *pd, ovx_primpath_t path)
{
	const pd_path_rec *r = pd_path_get(pd, path);
	if (!r)
		return (ovx_string_t){ NULL, 0 };
	return (ovx_string_t){ rec_str_path(r), r->len };
}

bool ovs_pd_path_is_prefix(const ovs_pd *pd, ovx_primpath_t ancestor, ovx_primpath_t path)
{
	const pd_path_rec *a = pd_path_get(pd, ancestor);
	const pd_path_rec *r = pd_path_get(pd, path);
	if (!a || !r)
		return false;
	uint64_t id = path;
	while (r->depth > a->depth) {
		id = r->parent;
		r = pd_seg_get(&pd->paths, id); /* ancestors of a published path are published before it */
	}
	return id == ancestor;
}

size_t ovs_pd_path_tokens(const ovs_pd *pd, ovx_primpath_t path, ovx_token_t *out, size_t cap)
{
	const pd_path_rec *r = pd_path_get(pd, path);
	if (!r)
		return SIZE_MAX;
	size_t depth = r->depth;
	if (depth > cap)
		return depth;
	for (size_t i = depth; i > 0; i--) {
		out[i - 1] = r->name;
		r = pd_seg_get(&pd->paths, r->parent);
	}
	return depth;
}

/* ---- path lists ---------------------------------------------------------------------------------- */

#define LIST_GEN(state) ((uint32_t)((state) >> 32))
#define LIST_RC(state) ((uint32_t)(state))
#define LIST_HANDLE(gen, slot) ((uint64_t)(gen) << 32 | (uint64_t)(slot))

static inline uint32_t next_gen(uint32_t gen)
{
	return gen == UINT32_MAX ? 1u : gen + 1u; /* generation 0 is never used by a live list */
}

/* Slot of a handle, or NULL when the slot was never created. */
static pd_list_slot *list_slot(const ovs_pd *pd, ovx_primpath_list_t list)
{
	uint32_t idx = (uint32_t)list;
	if (idx == 0 || LIST_GEN(list) == 0)
		return NULL;
	return pd_seg_get(&pd->lists, idx);
}

static void free_stack_push(ovs_pd *pd, uint32_t idx, pd_list_slot *slot)
{
	/* relaxed: we read the head only to build the CAS's expected value; the CAS validates it. */
	uint64_t head = atomic_load_explicit(&pd->list_free, memory_order_relaxed);
	for (;;) {
		/* relaxed: the release CAS below publishes this store to the popper's acquire. */
		atomic_store_explicit(&slot->next_free, (uint32_t)head, memory_order_relaxed);
		uint64_t tag = (head >> 32) + 1;
		uint64_t nhead = tag << 32 | idx;
		/* release on success: the popper (acquire) sees next_free and everything this thread did to
		 * the slot (payload freed, generation advanced) before handing it out again.
		 * relaxed on failure: we only retry with the fresh head. */
		if (atomic_compare_exchange_weak_explicit(&pd->list_free, &head, nhead, memory_order_release,
							  memory_order_relaxed))
			return;
	}
}

static uint32_t free_stack_pop(ovs_pd *pd, pd_list_slot **out)
{
	/* acquire: pairs with the pusher's release CAS, so next_free of the top slot is visible. */
	uint64_t head = atomic_load_explicit(&pd->list_free, memory_order_acquire);
	for (;;) {
		uint32_t idx = (uint32_t)head;
		if (idx == 0)
			return 0;
		pd_list_slot *slot = pd_seg_get(&pd->lists, idx);
		/* relaxed: may be stale if the slot was popped and pushed meanwhile, but then the tag in the
		 * head changed and the CAS fails. The acquire on `head` ordered the push that wrote it. */
		uint32_t next = atomic_load_explicit(&slot->next_free, memory_order_relaxed);
		uint64_t nhead = ((head >> 32) + 1) << 32 | next;
		/* acquire on success and failure: the slot we take (or the new top we retry with) was pushed
		 * with release; we must see the pusher's writes. */
		if (atomic_compare_exchange_weak_explicit(&pd->list_free, &head, nhead, memory_order_acquire,
							  memory_order_acquire)) {
			*out = slot;
			return idx;
		}
	}
}

ovx_primpath_list_t ovs_pd_list_create(ovs_pd *pd, const ovx_primpath_t *paths, size_t count)
{
	if (count > 0 && !paths)
		return OVX_INVALID_PRIMPATH_LIST;
	for (size_t i = 0; i < count; i++)
		if (!pd_path_get(pd, paths[i]))
			return OVX_INVALID_PRIMPATH_LIST;
	return pd_list_create_trusted(pd, paths, count);
}

ovx_primpath_list_t pd_list_create_trusted(ovs_pd *pd, const ovx_primpath_t *paths, size_t count)
{
	if (count > 0 && !paths)
		return OVX_INVALID_PRIMPATH_LIST;
	if (count > (SIZE_MAX - sizeof(pd_list_payload)) / sizeof(ovx_primpath_t))
		return OVX_INVALID_PRIMPATH_LIST;
	pd_list_payload *p = malloc(sizeof(pd_list_payload) + count * sizeof(ovx_primpath_t));
	if (!p)
		return OVX_INVALID_PRIMPATH_LIST;
	p->count = count;
	if (count)
		memcpy(p->paths, paths, count * sizeof(ovx_primpath_t));

	pd_list_slot *slot = NULL;
	uint32_t idx = free_stack_pop(pd, &slot);
	if (idx == 0) {
		/* relaxed: distinct slot ids only; the slot is published by the release store of state. */
		uint64_t id = atomic_fetch_add_explicit(&pd->list_next, 1, memory_order_relaxed);
		slot = pd_seg_ensure(&pd->lists, id);
		if (!slot) {
			free(p);
			return OVX_INVALID_PRIMPATH_LIST;
		}
		idx = (uint32_t)id;
	}
	/* relaxed: the slot is ours (free, count 0) and nobody else writes its state until it is live;
	 * the pop's acquire (or the zeroed fresh chunk) makes its current generation visible. */
	uint32_t gen = LIST_GEN(atomic_load_explicit(&slot->state, memory_order_relaxed));
	if (gen == 0)
		gen = 1;
	/* relaxed: published by the release store of state just below. */
	atomic_store_explicit(&slot->payload, p, memory_order_relaxed);
	/* release: a thread that acquires this state (or any later RMW of it) sees the payload. */
	atomic_store_explicit(&slot->state, LIST_HANDLE(gen, 1), memory_order_release);
	/* relaxed: a statistics counter. */
	atomic_fetch_add_explicit(&pd->list_live, 1, memory_order_relaxed);
	return LIST_HANDLE(gen, idx);
}

/* Takes one reference on a live list; `success` is the CAS's order on success (see the callers). */
static bool list_ref(ovs_pd *pd, ovx_primpath_list_t list, memory_order success)
{
	pd_list_slot *slot = list_slot(pd, list);
	if (!slot)
		return false;
	/* relaxed: only the CAS below decides; it re-validates the value. */
	uint64_t s = atomic_load_explicit(&slot->state, memory_order_relaxed);
	for (;;) {
		if (LIST_GEN(s) != LIST_GEN(list) || LIST_RC(s) == 0 || LIST_RC(s) == UINT32_MAX)
			return false;
		if (atomic_compare_exchange_weak_explicit(&slot->state, &s, s + 1, success, memory_order_relaxed))
			return true;
	}
}

bool ovs_pd_list_add_ref(ovs_pd *pd, ovx_primpath_list_t list)
{
	/* relaxed on success: adding a reference needs no ordering — the caller already holds one,
	 * which keeps the payload alive; the RMW still continues the creator's release sequence. */
	return list_ref(pd, list, memory_order_relaxed);
}

bool pd_list_acquire(ovs_pd *pd, ovx_primpath_list_t list)
{
	/* acquire on success: the caller reads the payload next; this RMW reads from the creator's
	 * release-store's release sequence, so the payload written before it is visible. */
	return list_ref(pd, list, memory_order_acquire);
}

bool ovs_pd_list_release(ovs_pd *pd, ovx_primpath_list_t list)
{
	pd_list_slot *slot = list_slot(pd, list);
	if (!slot)
		return false;
	/* relaxed: the CAS below re-validates. */
	uint64_t s = atomic_load_explicit(&slot->state, memory_order_relaxed);
	for (;;) {
		if (LIST_GEN(s) != LIST_GEN(list) || LIST_RC(s) == 0)
			return false;
		uint64_t ns = LIST_RC(s) == 1 ? LIST_HANDLE(next_gen(LIST_GEN(s)), 0) : s - 1;
		/* acq_rel on success: release orders this thread's reads of the payload before the final
		 * decrement; acquire lets the final decrementer see every other holder's reads finished
		 * (their decrements are releases) before it frees. relaxed on failure: we just retry. */
		if (atomic_compare_exchange_weak_explicit(&slot->state, &s, ns, memory_order_acq_rel,
							  memory_order_relaxed))
			break;
	}
	if (LIST_RC(s) == 1) {
		/* relaxed: our acq_rel CAS synchronised with the creator and every other holder. */
		pd_list_payload *p = atomic_load_explicit(&slot->payload, memory_order_relaxed);
		atomic_store_explicit(&slot->payload, NULL, memory_order_relaxed);
		free(p);
		/* relaxed: a statistics counter. */
		atomic_fetch_sub_explicit(&pd->list_live, 1, memory_order_relaxed);
		free_stack_push(pd, (uint32_t)list, slot);
	}
	return true;
}

bool ovs_pd_list_is_valid(const ovs_pd *pd, ovx_primpath_list_t list)
{
	pd_list_slot *slot = list_slot(pd, list);
	if (!slot)
		return false;
	/* acquire: so that a following view of the payload is ordered after the creator's writes. */
	uint64_t s = atomic_load_explicit(&slot->state, memory_order_acquire);
	return LIST_GEN(s) == LIST_GEN(list) && LIST_RC(s) != 0;
}

bool ovs_pd_list_view(const ovs_pd *pd, ovx_primpath_list_t list, const ovx_primpath_t **paths, size_t *count)
{
	pd_list_slot *slot = list_slot(pd, list);
	if (!slot)
		return false;
	/* acquire: reads from the creator's release sequence, making the payload visible. The caller's
	 * reference keeps the state live and the payload allocated while the view is used. */
	uint64_t s = atomic_load_explicit(&slot->state, memory_order_acquire);
	if (LIST_GEN(s) != LIST_GEN(list) || LIST_RC(s) == 0)
		return false;
	/* relaxed: ordered by the acquire above. */
	const pd_list_payload *p = atomic_load_explicit(&slot->payload, memory_order_relaxed);
	if (!p)
		return false; /* only when the caller's reference was dropped underneath it (misuse) */
	*paths = p->count ? p->paths : NULL;
	*count = p->count;
	return true;
}

/* ---- statistics ---------------------------------------------------------------------------------- */

/* relaxed (all three): racy snapshots by contract. */
size_t ovs_pd_token_count(const ovs_pd *pd)
{
	return (size_t)atomic_load_explicit(&pd->token_count, memory_order_relaxed);
}

size_t ovs_pd_path_count(const ovs_pd *pd)
{
	return (size_t)atomic_load_explicit(&pd->path_count, memory_order_relaxed);
}

size_t ovs_pd_live_list_count(const ovs_pd *pd)
{
	return (size_t)atomic_load_explicit(&pd->list_live, memory_order_relaxed);
}

/* ---- lifecycle ----------------------------------------------------------------------------------- */

ovs_pd *ovs_pd_create(void)
{
	size_t size = (sizeof(ovs_pd) + PD_CACHE_LINE - 1) / PD_CACHE_LINE * PD_CACHE_LINE;
	ovs_pd *pd = aligned_alloc(PD_CACHE_LINE, size); /* pd_shard is cache-line aligned */
	if (!pd)
		return NULL;
	memset(pd, 0, size);
	pd_vtable_fill(&pd->vtable);
	pd->instance.vtable = &pd->vtable;
	pd->instance.context = (path_dictionary_context_t *)(void *)pd;
	pd_seg_init(&pd->tokens, sizeof(pd_token_rec));
	pd_seg_init(&pd->paths, sizeof(pd_path_rec));
	pd_seg_init(&pd->lists, sizeof(pd_list_slot));
	atomic_init(&pd->token_next, 1);
	atomic_init(&pd->path_next, OVS_PD_ROOT + 1);
	atomic_init(&pd->token_count, 0);
	atomic_init(&pd->path_count, 1);
	atomic_init(&pd->sched, NULL);
	atomic_init(&pd->blobs, NULL);
	atomic_init(&pd->list_next, 1);
	atomic_init(&pd->list_free, 0);
	atomic_init(&pd->list_live, 0);
	if (!pd_index_init(&pd->token_index, &token_ops))
		goto fail_tokens;
	if (!pd_index_init(&pd->pair_index, &pair_ops))
		goto fail_pairs;
	if (!pd_index_init(&pd->string_index, &string_ops))
		goto fail_strings;

	/* The root: id 1, "/", no parent, no name, depth 0; not in the pair index (it has no key). */
	pd_path_rec *root = pd_seg_ensure(&pd->paths, OVS_PD_ROOT);
	/* No lock needed: nothing else can reach the dictionary yet. */
	char *rs = root ? pd_arena_alloc(&pd->pair_index.shards[0].arena, 2) : NULL;
	if (!root || !rs)
		goto fail_root;
	rs[0] = '/';
	rs[1] = '\0';
	root->len = 1;
	root->str_hash = pd_hash_bytes(rs, 1);
	root->pair_hash = 0;
	root->parent = 0;
	root->name = 0;
	root->depth = 0;
	/* release: as for every path; in practice the dictionary is published to other threads by the
	 * caller's own synchronisation after create returns. */
	atomic_store_explicit(&root->str, rs, memory_order_release);
	return pd;

fail_root:
	pd_seg_fini(&pd->paths);
	pd_index_fini(&pd->string_index);
fail_strings:
	pd_index_fini(&pd->pair_index);
fail_pairs:
	pd_index_fini(&pd->token_index);
fail_tokens:
	free(pd);
	return NULL;
}

void ovs_pd_destroy(ovs_pd *pd)
{
	if (!pd)
		return;
	/* relaxed everywhere below: destroy never races with another call on `pd`. */
	uint64_t n = atomic_load_explicit(&pd->token_next, memory_order_relaxed);
	for (uint64_t id = 1; id < n && id <= PD_MAX_ID; id++) {
		pd_token_rec *r = pd_seg_get(&pd->tokens, id);
		if (r)
			free((void *)atomic_load_explicit(&r->str, memory_order_relaxed));
	}
	/* Path texts live in the pair index's arenas (freed by pd_index_fini) and in bulk blobs. */
	for (pd_blob *b = atomic_load_explicit(&pd->blobs, memory_order_relaxed); b;) {
		pd_blob *next = b->next;
		free(b);
		b = next;
	}
	n = atomic_load_explicit(&pd->list_next, memory_order_relaxed);
	for (uint64_t id = 1; id < n && id <= PD_MAX_ID; id++) {
		pd_list_slot *s = pd_seg_get(&pd->lists, id);
		if (s)
			free(atomic_load_explicit(&s->payload, memory_order_relaxed));
	}
	pd_index_fini(&pd->token_index);
	pd_index_fini(&pd->pair_index);
	pd_index_fini(&pd->string_index);
	pd_seg_fini(&pd->tokens);
	pd_seg_fini(&pd->paths);
	pd_seg_fini(&pd->lists);
	free(pd);
}

path_dictionary_instance_t *ovs_pd_instance(ovs_pd *pd)
{
	return &pd->instance;
}

ovs_pd *ovs_pd_from_instance(const path_dictionary_instance_t *instance)
{
	if (!instance || !instance->context)
		return NULL;
	ovs_pd *pd = (ovs_pd *)(void *)instance->context;
	return instance->vtable == &pd->vtable ? pd : NULL;
}

void ovs_pd_set_sched(ovs_pd *pd, struct jobs_sched *sched)
{
	/* release: pairs with the bulk calls' acquire, so a thread that sees the pointer also sees
	 * whatever this thread knew about the scheduler (its creation, at the latest). */
	atomic_store_explicit(&pd->sched, sched, memory_order_release);
}
