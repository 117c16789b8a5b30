/*
 * radix.h — a lock-free map from a 32-bit key (a path id) to a 32-bit atomic slot, as a fixed
 * three-level radix tree: 1024 x 1024 chunks of 4096 slots (keys below 2^32). Interior levels and
 * chunks are installed on first use by CAS and never move or shrink until ovs_radix_fini, so
 * lookups are two acquire loads and an index, with no lock and no reclamation problem.
 * Memory: 8 KiB up front, then 8 KiB per 4 M-key region and 16 KiB per 4096-key chunk touched.
 */
#ifndef OVSTAGE_ENGINE_RADIX_H
#define OVSTAGE_ENGINE_RADIX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define OVS_RADIX_L1 1024u
#define OVS_RADIX_L2 1024u
#define OVS_RADIX_CHUNK 4096u

typedef _Atomic uint32_t ovs_radix_chunk;             /* OVS_RADIX_CHUNK slots */
typedef _Atomic(ovs_radix_chunk *) ovs_radix_l2;      /* OVS_RADIX_L2 chunk pointers */

typedef struct ovs_radix {
	_Atomic(ovs_radix_l2 *) l1[OVS_RADIX_L1]; /* second-level arrays, installed on demand */
} ovs_radix;

void ovs_radix_init(ovs_radix *r);
void ovs_radix_fini(ovs_radix *r);
/* The slot of `key`, creating the path to it if `create`; NULL if absent (or key >= 2^32, or OOM). */
_Atomic uint32_t *ovs_radix_slot(ovs_radix *r, uint64_t key, bool create);

#endif /* OVSTAGE_ENGINE_RADIX_H */
