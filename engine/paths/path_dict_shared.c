/* path_dict_shared.c — the refcounted process-wide path dictionary (path_dict_shared.h). */
#include "path_dict_shared.h"

#include <assert.h>
#include <pthread.h>

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* guards g_pd and g_refs */
static ovs_pd *g_pd;                                        /* the dictionary while g_refs > 0 */
static uint64_t g_refs;                                     /* references held (live instances) */

ovs_pd *ovs_pd_shared_acquire(void)
{
	pthread_mutex_lock(&g_lock);
	if (g_refs == 0) {
		assert(!g_pd);
		g_pd = ovs_pd_create();
	}
	ovs_pd *pd = g_pd;
	if (pd)
		g_refs++;
	pthread_mutex_unlock(&g_lock);
	return pd;
}

void ovs_pd_shared_release(ovs_pd *pd)
{
	if (!pd)
		return;
	ovs_pd *dead = NULL;
	pthread_mutex_lock(&g_lock);
	assert(pd == g_pd && g_refs > 0);
	if (--g_refs == 0) {
		dead = g_pd;
		g_pd = NULL;
	}
	pthread_mutex_unlock(&g_lock);
	/* Outside the lock: nothing can reach it any more (the count is zero, and a new acquire makes a
	 * new dictionary), and a destroy of a large dictionary should not stall other instances' creation. */
	ovs_pd_destroy(dead);
}

uint64_t ovs_pd_shared_refs(void)
{
	pthread_mutex_lock(&g_lock);
	uint64_t n = g_refs;
	pthread_mutex_unlock(&g_lock);
	return n;
}
