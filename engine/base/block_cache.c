/* block_cache.c — free blocks by size class under a shared byte budget (see block_cache.h). */
#include "block_cache.h"

#include <stdlib.h>

struct ovs_block_node {
	ovs_block_node *cnext, *cprev; /* class list (newest first); cnext also links the spare list */
	ovs_block_node *anext, *aprev; /* age list (newest first) */
	void *p;                       /* the block */
	uint32_t cls;                  /* its class */
};

void ovs_block_budget_init(ovs_block_budget *b, int64_t bound)
{
	b->bound = bound;
	atomic_init(&b->retained, 0);
	atomic_init(&b->hits, 0);
	atomic_init(&b->misses, 0);
	atomic_init(&b->releases, 0);
}

void ovs_block_cache_init(ovs_block_cache *c, ovs_block_budget *budget,
			  void (*release)(void *ctx, void *p, size_t capacity), void *ctx)
{
	pthread_mutex_init(&c->lock, NULL);
	for (size_t i = 0; i < OVS_SIZE_CLASSES; i++)
		c->classes[i] = NULL;
	c->newest = c->oldest = c->spare = NULL;
	c->bytes = 0;
	c->budget = budget;
	c->release = release;
	c->ctx = ctx;
}

/* Whether blocks of class capacity `cap` are ever cached under b. */
static bool cacheable(const ovs_block_budget *b, size_t cap)
{
	return b->bound > 0 && cap <= (uint64_t)b->bound;
}

size_t ovs_block_cache_capacity(const ovs_block_budget *b, size_t bytes)
{
	size_t cap = ovs_size_class_bytes(ovs_size_class(bytes));
	return cacheable(b, cap) ? cap : (bytes ? bytes : 1);
}

/* The statistics are relaxed: counts nobody synchronises through. */
static void count(_Atomic uint64_t *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* Adds cap to the budget's retained bytes unless that passes the bound. Relaxed: the counter only
 * has to stay a consistent sum (the blocks themselves are published under the cache's mutex). */
static bool reserve(ovs_block_budget *b, size_t cap)
{
	int64_t cur = atomic_load_explicit(&b->retained, memory_order_relaxed);
	do
		if (cur + (int64_t)cap > b->bound)
			return false;
	while (!atomic_compare_exchange_weak_explicit(&b->retained, &cur, cur + (int64_t)cap, memory_order_relaxed,
						      memory_order_relaxed));
	return true;
}

static void unreserve(ovs_block_budget *b, size_t cap)
{
	atomic_fetch_sub_explicit(&b->retained, (int64_t)cap, memory_order_relaxed); /* relaxed: as reserve */
}

bool ovs_block_budget_reserve(ovs_block_budget *b, size_t bytes)
{
	size_t cap = ovs_size_class_bytes(ovs_size_class(bytes));
	return cacheable(b, cap) && reserve(b, cap);
}

void ovs_block_budget_unreserve(ovs_block_budget *b, size_t bytes, bool hit)
{
	unreserve(b, ovs_size_class_bytes(ovs_size_class(bytes)));
	if (hit)
		count(&b->hits);
}

/* ---- the lists (c->lock held) --------------------------------------------------------------------- */

static void unlink_locked(ovs_block_cache *c, ovs_block_node *n)
{
	if (n->cprev)
		n->cprev->cnext = n->cnext;
	else
		c->classes[n->cls] = n->cnext;
	if (n->cnext)
		n->cnext->cprev = n->cprev;
	if (n->aprev)
		n->aprev->anext = n->anext;
	else
		c->newest = n->anext;
	if (n->anext)
		n->anext->aprev = n->aprev;
	else
		c->oldest = n->aprev;
	c->bytes -= (int64_t)ovs_size_class_bytes(n->cls);
}

static void push_locked(ovs_block_cache *c, ovs_block_node *n)
{
	n->cprev = NULL;
	n->cnext = c->classes[n->cls];
	if (n->cnext)
		n->cnext->cprev = n;
	c->classes[n->cls] = n;
	n->aprev = NULL;
	n->anext = c->newest;
	if (n->anext)
		n->anext->aprev = n;
	else
		c->oldest = n;
	c->newest = n;
	c->bytes += (int64_t)ovs_size_class_bytes(n->cls);
}

static ovs_block_node *node_locked(ovs_block_cache *c)
{
	ovs_block_node *n = c->spare;
	if (n)
		c->spare = n->cnext;
	else
		n = malloc(sizeof *n);
	return n;
}

/* ---- take and give -------------------------------------------------------------------------------- */

void *ovs_block_cache_take(ovs_block_cache *c, size_t bytes)
{
	uint32_t cls = ovs_size_class(bytes);
	size_t cap = ovs_size_class_bytes(cls);
	void *p = NULL;
	if (cacheable(c->budget, cap)) {
		pthread_mutex_lock(&c->lock);
		ovs_block_node *n = c->classes[cls];
		if (n) {
			unlink_locked(c, n);
			p = n->p;
			n->cnext = c->spare;
			c->spare = n;
		}
		pthread_mutex_unlock(&c->lock);
	}
	if (p)
		unreserve(c->budget, cap); /* after the unlink: retained never under-counts the lists */
	count(p ? &c->budget->hits : &c->budget->misses);
	return p;
}

/* Releases a list of evicted nodes (linked by cnext) and frees them. */
static void release_evicted(ovs_block_cache *c, ovs_block_node *e)
{
	while (e) {
		ovs_block_node *next = e->cnext;
		c->release(c->ctx, e->p, ovs_size_class_bytes(e->cls));
		count(&c->budget->releases);
		free(e);
		e = next;
	}
}

bool ovs_block_cache_give(ovs_block_cache *c, void *p, size_t bytes)
{
	ovs_block_budget *b = c->budget;
	uint32_t cls = ovs_size_class(bytes);
	size_t cap = ovs_size_class_bytes(cls);
	if (!cacheable(b, cap)) {
		count(&b->releases);
		return false;
	}
	ovs_block_node *evicted = NULL;
	bool kept = false;
	pthread_mutex_lock(&c->lock);
	/* Room that evicting all of this cache could make (relaxed: a hint; reserve decides). */
	int64_t room = b->bound - atomic_load_explicit(&b->retained, memory_order_relaxed) + c->bytes;
	ovs_block_node *n = room >= (int64_t)cap ? node_locked(c) : NULL;
	if (n) {
		/* The oldest blocks go first: a cache that only refused newcomers would fill up with
		 * sizes nobody asks for again. */
		while (!(kept = reserve(b, cap)) && c->oldest) {
			ovs_block_node *o = c->oldest;
			unlink_locked(c, o);
			unreserve(b, ovs_size_class_bytes(o->cls));
			o->cnext = evicted;
			evicted = o;
		}
		if (kept) {
			n->p = p;
			n->cls = cls;
			push_locked(c, n);
		} else {
			n->cnext = c->spare;
			c->spare = n;
		}
	}
	pthread_mutex_unlock(&c->lock);
	release_evicted(c, evicted);
	if (!kept)
		count(&b->releases);
	return kept;
}

void ovs_block_cache_drain(ovs_block_cache *c)
{
	ovs_block_node *all = NULL;
	pthread_mutex_lock(&c->lock);
	while (c->oldest) {
		ovs_block_node *o = c->oldest;
		unlink_locked(c, o);
		unreserve(c->budget, ovs_size_class_bytes(o->cls));
		o->cnext = all;
		all = o;
	}
	ovs_block_node *s = c->spare;
	c->spare = NULL;
	pthread_mutex_unlock(&c->lock);
	release_evicted(c, all);
	while (s) {
		ovs_block_node *next = s->cnext;
		free(s);
		s = next;
	}
	pthread_mutex_destroy(&c->lock);
}
