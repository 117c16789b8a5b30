/* recycle.c — the sealer's object cache (see recycle.h). Seal-owned: no synchronisation. */
#include <stdlib.h>

#include "recycle.h"

void *ovs_recycle_get(ovs_recycle_list *l, size_t size)
{
	if (!l || !l->head)
		return malloc(size); /* not calloc: glibc's calloc skips the thread cache */
	void *p = l->head;
	l->head = *(void **)p;
	l->n--;
	return p;
}

void ovs_recycle_put(ovs_recycle_list *l, void *p)
{
	if (!p)
		return;
	if (!l || l->n >= OVS_RECYCLE_MAX) {
		free(p);
		return;
	}
	*(void **)p = l->head;
	l->head = p;
	l->n++;
}

static void list_fini(ovs_recycle_list *l)
{
	while (l->head) {
		void *p = l->head;
		l->head = *(void **)p;
		free(p);
	}
	l->n = 0;
}

void ovs_recycle_fini(ovs_recycle *rc)
{
	list_fini(&rc->versions);
	list_fini(&rc->chsets);
	list_fini(&rc->chunks);
}
