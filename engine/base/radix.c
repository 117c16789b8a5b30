/* radix.c — fixed three-level lock-free radix map (see radix.h). */
#include "radix.h"

#include <stdlib.h>

void ovs_radix_init(ovs_radix *r)
{
	for (unsigned i = 0; i < OVS_RADIX_L1; i++)
		atomic_init(&r->l1[i], NULL);
}

void ovs_radix_fini(ovs_radix *r)
{
	for (unsigned i = 0; i < OVS_RADIX_L1; i++) {
		ovs_radix_l2 *l2 = atomic_load_explicit(&r->l1[i], memory_order_relaxed);
		if (!l2)
			continue;
		for (unsigned j = 0; j < OVS_RADIX_L2; j++)
			free((void *)atomic_load_explicit(&l2[j], memory_order_relaxed));
		free((void *)l2);
	}
}

/* Installs zeroed blocks on first use: CAS from NULL; a loser frees its block and uses the winner's.
 * acq_rel: release publishes the zeroed block; on failure, acquire reads the winner's block. */
static ovs_radix_l2 *install_l2(_Atomic(ovs_radix_l2 *) *pp)
{
	ovs_radix_l2 *fresh = calloc(OVS_RADIX_L2, sizeof *fresh);
	if (!fresh)
		return NULL;
	ovs_radix_l2 *expected = NULL;
	if (atomic_compare_exchange_strong_explicit(pp, &expected, fresh, memory_order_acq_rel, memory_order_acquire))
		return fresh;
	free((void *)fresh);
	return expected;
}

static ovs_radix_chunk *install_chunk(ovs_radix_l2 *pp)
{
	ovs_radix_chunk *fresh = calloc(OVS_RADIX_CHUNK, sizeof *fresh);
	if (!fresh)
		return NULL;
	ovs_radix_chunk *expected = NULL;
	if (atomic_compare_exchange_strong_explicit(pp, &expected, fresh, memory_order_acq_rel, memory_order_acquire))
		return fresh;
	free((void *)fresh);
	return expected;
}

_Atomic uint32_t *ovs_radix_slot(ovs_radix *r, uint64_t key, bool create)
{
	if (key >> 32)
		return NULL;
	uint32_t k = (uint32_t)key;
	unsigned i1 = k >> 22, i2 = (k >> 12) & (OVS_RADIX_L2 - 1), i3 = k & (OVS_RADIX_CHUNK - 1);
	/* acquire: pairs with install's release (the block's zeroes are visible). */
	ovs_radix_l2 *l2 = atomic_load_explicit(&r->l1[i1], memory_order_acquire);
	if (!l2) {
		if (!create)
			return NULL;
		l2 = install_l2(&r->l1[i1]);
		if (!l2)
			return NULL;
	}
	ovs_radix_chunk *c = atomic_load_explicit(&l2[i2], memory_order_acquire);
	if (!c) {
		if (!create)
			return NULL;
		c = install_chunk(&l2[i2]);
		if (!c)
			return NULL;
	}
	return &c[i3];
}
