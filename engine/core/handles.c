/* handles.c — sharded handle tables with reference-counted objects. */
#include "handles.h"

#include "errors.h"

#include <stdbool.h>
#include <sched.h>
#include <stdlib.h>

/* The process-wide handle sequence (see handles.h): every table draws from it, so no two handles
 * of the process share a sequence number, whichever instances issued them. */
static _Atomic uint64_t g_handle_seq = 1;

/* Did this table's space issue `id`? (0 and values of other spaces: no.) */
static inline bool in_space(const ovs_handles *h, uint64_t id)
{
	return (id >> OVS_HANDLE_SPACE_SHIFT) == h->space;
}

static inline ovs_handle_shard *shard_of(ovs_handles *h, uint64_t id)
{
	return &h->shards[id % OVS_HANDLE_SHARDS];
}

static inline unsigned bucket_of(uint64_t id)
{
	return (unsigned)((id / OVS_HANDLE_SHARDS) % OVS_HANDLE_BUCKETS);
}

/* One spin-wait hint to the CPU (x86 pause, arm64 yield). */
static inline void spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* The shard's lock. Every section under it is a few instructions (a chain walk or link), so a
 * spin lock: one RMW to take it and a plain release store to drop it, where a mutex made a latest
 * read pay six more RMWs. A holder preempted mid-section (2 cores, busy workers) would keep
 * spinners spinning for a time slice, so after a short spin they yield. */
static void shard_lock(ovs_handle_shard *s)
{
	for (unsigned spins = 0;; spins++) {
		/* acquire: pairs with shard_unlock's release; the chains as the last holder left them. */
		if (!atomic_exchange_explicit(&s->lock, 1, memory_order_acquire))
			return;
		/* relaxed: only a hint of when to try again; the exchange above decides. */
		while (atomic_load_explicit(&s->lock, memory_order_relaxed)) {
			if (++spins < 64)
				spin_pause();
			else
				sched_yield();
		}
	}
}

static void shard_unlock(ovs_handle_shard *s)
{
	/* release: what we did to the chains happens-before the next holder's acquiring exchange. */
	atomic_store_explicit(&s->lock, 0, memory_order_release);
}

void ovs_handles_init(ovs_handles *h, uint64_t serial)
{
	h->space = 1 + (serial - 1) % OVS_HANDLE_SPACES; /* 1..65535: a handle is never 0 */
	for (int i = 0; i < OVS_HANDLE_SHARDS; i++) {
		atomic_init(&h->shards[i].lock, 0);
		for (int k = 0; k < 9; k++)
			atomic_init(&h->shards[i].live[k], 0);
		for (int b = 0; b < OVS_HANDLE_BUCKETS; b++)
			h->shards[i].buckets[b] = NULL;
	}
}

void ovs_handles_fini(ovs_handles *h)
{
	for (int i = 0; i < OVS_HANDLE_SHARDS; i++) {
		for (int b = 0; b < OVS_HANDLE_BUCKETS; b++) {
			ovs_hobj *o = h->shards[i].buckets[b];
			while (o) {
				ovs_hobj *next = o->next; /* before the unref, which may free o */
				ovs_hobj_unref(o);
				o = next;
			}
			h->shards[i].buckets[b] = NULL;
		}
	}
}

void ovs_hobj_init(ovs_hobj *o, ovs_handle_kind kind, void (*destroy)(ovs_hobj *))
{
	atomic_init(&o->refs, 1);
	o->kind = kind;
	o->id = 0;
	o->destroy = destroy;
	o->next = NULL;
}

void ovs_hobj_ref(ovs_hobj *o)
{
	/* relaxed: taking a reference while already holding one orders nothing. */
	atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
}

void ovs_hobj_unref(ovs_hobj *o)
{
	/* acq_rel: the last holder must see every other holder's writes before destroying. */
	if (atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) == 1)
		o->destroy(o);
}

/* A handle drawn ahead of its insertion (ovs_handle_prepare). */
typedef struct prepared_id {
	uint64_t id; /* the handle it will be */
} prepared_id;

/* The next handle of table h, 0 once the process-wide sequence is exhausted. */
static uint64_t next_id(const ovs_handles *h)
{
	/* relaxed: uniqueness needs only atomicity. */
	uint64_t seq = atomic_fetch_add_explicit(&g_handle_seq, 1, memory_order_relaxed);
	if (seq > OVS_HANDLE_SEQ_MAX)
		return 0; /* exhausted: never wrap (that would reissue live or stale handles) */
	return h->space << OVS_HANDLE_SPACE_SHIFT | seq;
}

/* Moves a shard's live count of `kind` by d. Caller holds the shard's lock, so a plain load and
 * store suffice (relaxed: ovs_handles_live reads the counts unlocked, as a statistic; the lock's
 * release and acquire order the stores of successive holders). */
static void live_add_locked(ovs_handle_shard *s, ovs_handle_kind kind, int64_t d)
{
	atomic_store_explicit(&s->live[kind], atomic_load_explicit(&s->live[kind], memory_order_relaxed) + d,
			      memory_order_relaxed);
}

/* Links o under id (the table takes its reference: a new one unless `take`, then the caller's).
 * Cannot fail. */
static uint64_t link_object(ovs_handles *h, uint64_t id, ovs_hobj *o, bool take)
{
	o->id = id;
	if (!take)
		ovs_hobj_ref(o);
	ovs_handle_shard *s = shard_of(h, id);
	shard_lock(s);
	o->next = s->buckets[bucket_of(id)];
	s->buckets[bucket_of(id)] = o;
	live_add_locked(s, o->kind, 1);
	shard_unlock(s);
	return id;
}

void *ovs_handle_prepare(ovs_handles *h)
{
	uint64_t id = next_id(h);
	prepared_id *p = id ? malloc(sizeof *p) : NULL;
	if (p)
		p->id = id;
	return p;
}

void ovs_handle_unprepare(void *prepared)
{
	free(prepared); /* its id is never issued */
}

uint64_t ovs_handle_insert(ovs_handles *h, ovs_hobj *o)
{
	uint64_t id = next_id(h);
	return id ? link_object(h, id, o, false) : 0;
}

uint64_t ovs_handle_insert_take(ovs_handles *h, ovs_hobj *o)
{
	uint64_t id = next_id(h);
	return id ? link_object(h, id, o, true) : 0;
}

uint64_t ovs_handle_insert_prepared(ovs_handles *h, void *prepared, ovs_hobj *o)
{
	uint64_t id = ((prepared_id *)prepared)->id;
	free(prepared);
	return link_object(h, id, o, false);
}

ovs_hobj *ovs_handle_get(ovs_handles *h, uint64_t id, ovs_handle_kind kind)
{
	if (!in_space(h, id)) /* 0, another instance's, forged: not in this table */
		return NULL;
	ovs_handle_shard *s = shard_of(h, id);
	ovs_hobj *found = NULL;
	shard_lock(s);
	for (ovs_hobj *o = s->buckets[bucket_of(id)]; o; o = o->next)
		if (o->id == id) {
			if (o->kind == kind) {
				found = o;
				ovs_hobj_ref(found);
			}
			break;
		}
	shard_unlock(s);
	return found;
}

ovs_hobj *ovs_handle_remove(ovs_handles *h, uint64_t id, ovs_handle_kind kind)
{
	if (!in_space(h, id)) /* 0, another instance's, forged: not in this table */
		return NULL;
	ovs_handle_shard *s = shard_of(h, id);
	ovs_hobj *found = NULL;
	shard_lock(s);
	ovs_hobj **pp = &s->buckets[bucket_of(id)];
	for (; *pp; pp = &(*pp)->next)
		if ((*pp)->id == id) {
			ovs_hobj *o = *pp;
			if (o->kind == kind) {
				found = o;
				*pp = o->next;
				o->next = NULL;
				live_add_locked(s, kind, -1);
			}
			break;
		}
	shard_unlock(s);
	return found;
}

int64_t ovs_handles_live(ovs_handles *h, ovs_handle_kind kind)
{
	int64_t n = 0;
	for (int i = 0; i < OVS_HANDLE_SHARDS; i++) /* relaxed: a statistic (see live_add_locked) */
		n += atomic_load_explicit(&h->shards[i].live[kind], memory_order_relaxed);
	return n;
}

/* The kind of this table's live entry `id`, or 0 if it has none (a diagnostic: may be stale at once). */
static ovs_handle_kind kind_of(ovs_handles *h, uint64_t id)
{
	ovs_handle_shard *s = shard_of(h, id);
	ovs_handle_kind kind = 0;
	shard_lock(s);
	for (ovs_hobj *o = s->buckets[bucket_of(id)]; o; o = o->next)
		if (o->id == id) {
			kind = o->kind;
			break;
		}
	shard_unlock(s);
	return kind;
}

static const char *kind_name(ovs_handle_kind kind)
{
	switch (kind) {
	case OVS_H_QUERY: return "query handle";
	case OVS_H_READ: return "read handle";
	case OVS_H_ORDQ: return "ordinal query handle";
	case OVS_H_MAP: return "map handle";
	case OVS_H_GROUP: return "read group";
	case OVS_H_QRESULT: return "query result";
	case OVS_H_HIER: return "hierarchy handle";
	case OVS_H_HRESULT: return "hierarchy result";
	}
	return "handle";
}

ovstage_api_status_t ovs_handle_invalid(ovs_handles *h, uint64_t id, const char *what)
{
	unsigned long long v = (unsigned long long)id;
	if (id == 0)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_HANDLE, "%s 0 is the invalid handle", what);
	if (!in_space(h, id))
		return ovs_err_set(OVSTAGE_ERROR_INVALID_HANDLE, "%s %llu was not issued by this instance (a "
				   "handle of another instance, or not a handle)", what, v);
	ovs_handle_kind kind = kind_of(h, id);
	if (kind)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_HANDLE, "%s %llu is a %s of this instance, not a %s", what, v,
				   kind_name(kind), what);
	return ovs_err_set(OVSTAGE_ERROR_INVALID_HANDLE, "%s %llu is not live on this instance (already released?)",
			   what, v);
}
