/* handles.c — sharded handle tables with reference-counted objects. */
#include "handles.h"

#include "errors.h"

#include <stdbool.h>
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

void ovs_handles_init(ovs_handles *h, uint64_t serial)
{
	h->space = 1 + (serial - 1) % OVS_HANDLE_SPACES; /* 1..65535: a handle is never 0 */
	for (int k = 0; k < 9; k++)
		atomic_init(&h->live[k], 0);
	for (int i = 0; i < OVS_HANDLE_SHARDS; i++) {
		pthread_mutex_init(&h->shards[i].lock, NULL);
		for (int b = 0; b < OVS_HANDLE_BUCKETS; b++)
			h->shards[i].buckets[b] = NULL;
	}
}

void ovs_handles_fini(ovs_handles *h)
{
	for (int i = 0; i < OVS_HANDLE_SHARDS; i++) {
		for (int b = 0; b < OVS_HANDLE_BUCKETS; b++) {
			ovs_handle_node *n = h->shards[i].buckets[b];
			while (n) {
				ovs_handle_node *next = n->next;
				ovs_hobj_unref(n->obj);
				free(n);
				n = next;
			}
			h->shards[i].buckets[b] = NULL;
		}
		pthread_mutex_destroy(&h->shards[i].lock);
	}
}

void ovs_hobj_init(ovs_hobj *o, ovs_handle_kind kind, void (*destroy)(ovs_hobj *))
{
	atomic_init(&o->refs, 1);
	o->kind = kind;
	o->id = 0;
	o->destroy = destroy;
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

void *ovs_handle_prepare(ovs_handles *h)
{
	/* relaxed: uniqueness needs only atomicity. */
	uint64_t seq = atomic_fetch_add_explicit(&g_handle_seq, 1, memory_order_relaxed);
	if (seq > OVS_HANDLE_SEQ_MAX)
		return NULL; /* exhausted: never wrap (that would reissue live or stale handles) */
	ovs_handle_node *n = malloc(sizeof *n);
	if (!n)
		return NULL;
	n->id = h->space << OVS_HANDLE_SPACE_SHIFT | seq;
	return n;
}

void ovs_handle_unprepare(void *prepared)
{
	free(prepared); /* its id is never issued */
}

uint64_t ovs_handle_insert(ovs_handles *h, ovs_hobj *o)
{
	void *n = ovs_handle_prepare(h);
	return n ? ovs_handle_insert_prepared(h, n, o) : 0;
}

uint64_t ovs_handle_insert_prepared(ovs_handles *h, void *prepared, ovs_hobj *o)
{
	ovs_handle_node *n = prepared;
	uint64_t id = n->id;
	o->id = id;
	ovs_hobj_ref(o);
	n->obj = o;
	ovs_handle_shard *s = shard_of(h, id);
	pthread_mutex_lock(&s->lock);
	n->next = s->buckets[bucket_of(id)];
	s->buckets[bucket_of(id)] = n;
	pthread_mutex_unlock(&s->lock);
	atomic_fetch_add_explicit(&h->live[o->kind], 1, memory_order_relaxed);
	return id;
}

ovs_hobj *ovs_handle_get(ovs_handles *h, uint64_t id, ovs_handle_kind kind)
{
	if (!in_space(h, id)) /* 0, another instance's, forged: not in this table */
		return NULL;
	ovs_handle_shard *s = shard_of(h, id);
	ovs_hobj *found = NULL;
	pthread_mutex_lock(&s->lock);
	for (ovs_handle_node *n = s->buckets[bucket_of(id)]; n; n = n->next)
		if (n->id == id) {
			if (n->obj->kind == kind) {
				found = n->obj;
				ovs_hobj_ref(found);
			}
			break;
		}
	pthread_mutex_unlock(&s->lock);
	return found;
}

ovs_hobj *ovs_handle_remove(ovs_handles *h, uint64_t id, ovs_handle_kind kind)
{
	if (!in_space(h, id)) /* 0, another instance's, forged: not in this table */
		return NULL;
	ovs_handle_shard *s = shard_of(h, id);
	ovs_hobj *found = NULL;
	pthread_mutex_lock(&s->lock);
	ovs_handle_node **pp = &s->buckets[bucket_of(id)];
	for (; *pp; pp = &(*pp)->next)
		if ((*pp)->id == id) {
			ovs_handle_node *n = *pp;
			if (n->obj->kind == kind) {
				found = n->obj;
				*pp = n->next;
				free(n);
			}
			break;
		}
	pthread_mutex_unlock(&s->lock);
	if (found)
		atomic_fetch_sub_explicit(&h->live[kind], 1, memory_order_relaxed);
	return found;
}

int64_t ovs_handles_live(ovs_handles *h, ovs_handle_kind kind)
{
	return atomic_load_explicit(&h->live[kind], memory_order_relaxed);
}

/* The kind of this table's live entry `id`, or 0 if it has none (a diagnostic: may be stale at once). */
static ovs_handle_kind kind_of(ovs_handles *h, uint64_t id)
{
	ovs_handle_shard *s = shard_of(h, id);
	ovs_handle_kind kind = 0;
	pthread_mutex_lock(&s->lock);
	for (ovs_handle_node *n = s->buckets[bucket_of(id)]; n; n = n->next)
		if (n->id == id) {
			kind = n->obj->kind;
			break;
		}
	pthread_mutex_unlock(&s->lock);
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
