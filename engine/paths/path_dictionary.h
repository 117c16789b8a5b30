/*
 * path_dictionary.h — the engine's path dictionary: interned tokens, prim paths and reference-counted
 * path lists, exposed publicly through the ovx path_dictionary_vtable_t (ovs_pd_instance) and to
 * the engine through the fast ovs_pd_* accessors below.
 *
 * Contract
 *  - Tokens (ovx_token_t) and prim paths (ovx_primpath_t) are dense ids, 1-based, 0 = invalid. They
 *    live as long as the dictionary: never released, never reused, never moved. Every string a
 *    dictionary hands out (token text, full path text) is NUL-terminated, dictionary-owned and
 *    valid until ovs_pd_destroy.
 *  - Token syntax: any non-empty byte string without an embedded NUL. Equal bytes ⇒ equal token.
 *  - Path syntax (a decision of ours; the spec only says "absolute"): the root is exactly "/".
 *    Any other path is '/' followed by one or more '/'-separated components; a component is a
 *    non-empty run of bytes other than '/' and NUL. So: no trailing '/', no "//", no embedded NUL;
 *    "." and ".." and every other byte (spaces, '.', ':', '{', UTF-8, ...) are ordinary component
 *    bytes — nothing is normalised. Two paths are equivalent exactly when their strings are equal,
 *    and equivalent paths get equal handles. A token containing '/' is a valid token but cannot be
 *    a path component (create_paths_from_tokens rejects it).
 *  - A path is interned as (parent path, last component token); the root OVS_PD_ROOT (= 1) has no
 *    parent, no name and depth 0. Hierarchy derives purely from this structure.
 *  - Path lists (ovx_primpath_list_t) are immutable ordered arrays of path handles (duplicates
 *    allowed, may be empty) with an atomic reference count. A handle is (generation << 32 | slot),
 *    slot 1-based; the slot's generation advances when the count reaches zero, so a released
 *    handle is detected as invalid afterwards (until the 32-bit generation of that one slot wraps,
 *    i.e. after 2^32 reuses of the same slot). Slots are recycled; list payloads are freed by the
 *    thread that drops the last reference.
 *  - Limits: at most 2^32 - 2 tokens, paths and list slots; running out is reported as an error
 *    (vtable) or a 0 handle (accessors).
 *
 * Thread-safety (liburcu style)
 *  - Every function is thread-safe and may be called concurrently from any number of threads, except
 *    ovs_pd_create/ovs_pd_destroy: destroy must not race with any other call on the same dictionary.
 *  - Lookups (any id → record accessor, interning a token/path that already exists, list views)
 *    take no lock and never block: they are wait-free (a fixed number of atomic loads, plus a
 *    linear probe that ends at an empty entry; tables stay at most half full, so the probe is
 *    bounded by the table size and O(1) expected).
 *  - Interning a NEW token/path takes the lock of one of 64 shards of the relevant index for the
 *    insertion only (blocking, but a lookup never waits on it); lists are created, referenced and
 *    released lock-free (CAS loops on a per-slot word and a free-slot stack whose head carries a
 *    32-bit ABA tag). A list handle is checked against its slot's generation on every call.
 *  - Memory ordering: records are written completely before their id is published with a release
 *    store; every reader acquires before reading a record, so a handle obtained from any thread
 *    (even racily) either reads as invalid or sees its complete record.
 *
 * Memory reclamation
 *  - Token/path records, their strings and the segmented arrays' chunks are freed only at destroy.
 *  - Hash index tables grow by building a table twice the size and publishing it; the superseded
 *    table stays readable (a reader may still be probing it) and is freed at destroy. Old tables
 *    sum to less than the current one, so this costs at most 2x the index memory.
 *  - List payloads are freed at refcount zero; list slots are recycled (never freed before destroy).
 */
#ifndef OVSTAGE_ENGINE_PATH_DICTIONARY_H
#define OVSTAGE_ENGINE_PATH_DICTIONARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ovx/path_dictionary/path_dictionary_types.h>

/** The root path "/": always valid, interned by ovs_pd_create. */
#define OVS_PD_ROOT ((ovx_primpath_t)1)

/** A path dictionary (opaque; layout in path_dict_internal.h). */
typedef struct ovs_pd ovs_pd;

/* ---- lifecycle -------------------------------------------------------------------------------- */

/** New empty dictionary (only the root path interned); NULL when out of memory. */
ovs_pd *ovs_pd_create(void);

/** Frees everything: tokens, paths, strings, live lists, index tables. Must not race with any other
 *  call on `pd`; every string and view handed out becomes invalid. NULL is a no-op. */
void ovs_pd_destroy(ovs_pd *pd);

struct jobs_sched;
/** The job scheduler on which bulk calls (create_paths_from_strings, create_path_list_from_strings,
 *  create_paths_from_tokens of many paths) split their work; NULL (the default) runs them on the
 *  calling thread. The scheduler must outlive `pd` (the shared dictionary is set to the runtime's,
 *  which outlives every instance). Thread-safe; calls already running keep the old one. */
void ovs_pd_set_sched(ovs_pd *pd, struct jobs_sched *sched);

/** The {vtable, context} pair implementing all 12 path_dictionary_vtable_t slots. The pointer is
 *  owned by `pd` and stable until ovs_pd_destroy; thread-safe (it is immutable). */
path_dictionary_instance_t *ovs_pd_instance(ovs_pd *pd);

/** The dictionary behind an instance returned by ovs_pd_instance (NULL for any other instance's
 *  vtable). Thread-safe, wait-free. */
ovs_pd *ovs_pd_from_instance(const path_dictionary_instance_t *instance);

/* ---- tokens (thread-safe; wait-free when the token exists, else one shard lock) ----------------- */

/** Interns bytes [ptr, ptr+len) as a token; 0 when len == 0, ptr == NULL, the bytes contain a NUL,
 *  or out of memory / ids. */
ovx_token_t ovs_pd_intern_token(ovs_pd *pd, const char *ptr, size_t len);

/** The token of bytes [ptr, ptr+len) when already interned, else 0. Never inserts. Wait-free. */
ovx_token_t ovs_pd_find_token(const ovs_pd *pd, const char *ptr, size_t len);

/** True when `token` is a live token of `pd`. Wait-free. */
bool ovs_pd_token_is_valid(const ovs_pd *pd, ovx_token_t token);

/** The token's text: NUL-terminated, dictionary-owned, valid until destroy; {NULL, 0} for an
 *  invalid token. Wait-free. */
ovx_string_t ovs_pd_token_string(const ovs_pd *pd, ovx_token_t token);

/* ---- prim paths (thread-safe; wait-free when the path exists, else shard locks) ----------------- */

/** Interns the path string [ptr, ptr+len) (syntax in the contract above); 0 when the syntax is
 *  wrong or out of memory / ids. */
ovx_primpath_t ovs_pd_intern_path(ovs_pd *pd, const char *ptr, size_t len);

/** The path of string [ptr, ptr+len) when already interned, else 0 (also for bad syntax). Never
 *  inserts. Wait-free apart from a rare fallback walk over components (still lock-free). */
ovx_primpath_t ovs_pd_find_path(const ovs_pd *pd, const char *ptr, size_t len);

/** Interns the child `name` of `parent`; 0 when either handle is invalid, `name` contains '/',
 *  or out of memory / ids. */
ovx_primpath_t ovs_pd_intern_child(ovs_pd *pd, ovx_primpath_t parent, ovx_token_t name);

/** True when `path` is a live path of `pd` (the root included). Wait-free. */
bool ovs_pd_path_is_valid(const ovs_pd *pd, ovx_primpath_t path);

/** Parent of `path`; 0 for the root and for an invalid handle. Wait-free. */
ovx_primpath_t ovs_pd_path_parent(const ovs_pd *pd, ovx_primpath_t path);

/** Last component of `path`; 0 for the root and for an invalid handle. Wait-free. */
ovx_token_t ovs_pd_path_name(const ovs_pd *pd, ovx_primpath_t path);

/** Number of components of `path` (0 for the root); SIZE_MAX for an invalid handle. Wait-free. */
size_t ovs_pd_path_depth(const ovs_pd *pd, ovx_primpath_t path);

/** The full path text ("/" for the root): NUL-terminated, dictionary-owned, cached per path, valid
 *  until destroy; {NULL, 0} for an invalid handle. Wait-free. */
ovx_string_t ovs_pd_path_string(const ovs_pd *pd, ovx_primpath_t path);

/** True when `ancestor` is `path` or one of its ancestors (by structure; the root is an ancestor of
 *  every path). False when either handle is invalid. Wait-free, O(depth difference). */
bool ovs_pd_path_is_prefix(const ovs_pd *pd, ovx_primpath_t ancestor, ovx_primpath_t path);

/** Writes the component tokens of `path`, root first, into out[0..depth-1] when depth <= cap and
 *  returns the depth; returns the depth without writing when it exceeds cap; SIZE_MAX for an invalid
 *  handle. Wait-free. */
size_t ovs_pd_path_tokens(const ovs_pd *pd, ovx_primpath_t path, ovx_token_t *out, size_t cap);

/* ---- path lists (thread-safe, lock-free) -------------------------------------------------------- */

/** Mints a new list of `count` paths (copied; `paths` may be NULL when count == 0) with reference
 *  count 1 owned by the caller; 0 when a path is invalid or out of memory / slots. */
ovx_primpath_list_t ovs_pd_list_create(ovs_pd *pd, const ovx_primpath_t *paths, size_t count);

/** Adds a reference; false (nothing changed) when `list` is not live. Lock-free. */
bool ovs_pd_list_add_ref(ovs_pd *pd, ovx_primpath_list_t list);

/** Drops a reference, freeing the list at zero; false (nothing changed) when `list` is not live.
 *  Lock-free. */
bool ovs_pd_list_release(ovs_pd *pd, ovx_primpath_list_t list);

/** True when `list` is live (refcount > 0, generation matches). A snapshot: only meaningful while
 *  the caller holds a reference. Wait-free. */
bool ovs_pd_list_is_valid(const ovs_pd *pd, ovx_primpath_list_t list);

/** Borrowed view of a live list's paths: *paths (NULL allowed when *count == 0) and *count. The
 *  view stays valid while the caller holds a reference; false (outputs untouched) when `list` is
 *  not live. Wait-free; does not touch the reference count. */
bool ovs_pd_list_view(const ovs_pd *pd, ovx_primpath_list_t list, const ovx_primpath_t **paths,
		      size_t *count);

/* ---- statistics (thread-safe; racy snapshots, exact when quiescent) ----------------------------- */

/** Number of tokens interned so far. */
size_t ovs_pd_token_count(const ovs_pd *pd);

/** Number of prim paths interned so far (the root included). */
size_t ovs_pd_path_count(const ovs_pd *pd);

/** Number of live path lists. */
size_t ovs_pd_live_list_count(const ovs_pd *pd);

#endif /* OVSTAGE_ENGINE_PATH_DICTIONARY_H */
