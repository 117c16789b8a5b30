/*
 * path_dict_shared.h — the one path dictionary shared by every live instance, as in ovstage 0.2.1:
 * created when the first instance acquires it, destroyed when the last one releases it. Tokens,
 * prim paths and path lists are therefore valid in every live instance and mean the same thing in
 * each; they all die together with the last instance (overlap instance lifetimes to keep them).
 *
 * Thread-safety
 *  - acquire/release may be called from any thread, concurrently with each other and with any use
 *    of the dictionary by holders. They take one process-wide mutex: creating and destroying the
 *    dictionary must be serialised with the count anyway (a release that drops the count to zero
 *    must not free a dictionary that a concurrent acquire is about to hand out), and both happen
 *    once per instance lifetime, never on a data path.
 *  - Lookups never touch that mutex: a holder uses the pointer it got from acquire, and every
 *    dictionary lookup is lock-free (path_dictionary.h).
 *  - The mutex's release/acquire pairs order the dictionary's creation before every holder's use,
 *    and every holder's last use (before its release) before the destruction.
 */
#ifndef OVSTAGE_ENGINE_PATH_DICT_SHARED_H
#define OVSTAGE_ENGINE_PATH_DICT_SHARED_H

#include <stdint.h>

#include "path_dictionary.h"

/** Takes one reference on the shared dictionary, creating it on 0 -> 1; NULL when out of memory
 *  (nothing changed). */
ovs_pd *ovs_pd_shared_acquire(void);

/** Drops one reference on `pd` (the pointer ovs_pd_shared_acquire returned), destroying the
 *  dictionary at zero. Every string, view and handle of it is then invalid. NULL is a no-op. */
void ovs_pd_shared_release(ovs_pd *pd);

/** References held now (live instances); a snapshot, for tests and diagnostics. */
uint64_t ovs_pd_shared_refs(void);

#endif /* OVSTAGE_ENGINE_PATH_DICT_SHARED_H */
