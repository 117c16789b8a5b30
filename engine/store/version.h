/*
 * version.h — sealed versions of a column and the blobs of array columns (rows of a device column:
 * host blobs pointing into a device buffer).
 *
 * A version is immutable once published; it is freed when its last reference goes (the column's
 * chain, snapshots, pinned read groups), from any thread. Building one is the sealer's alone.
 */
#ifndef OVSTAGE_ENGINE_VERSION_H
#define OVSTAGE_ENGINE_VERSION_H

#include "device.h"
#include "exec.h"
#include "store.h"

void ovs_version_ref(ovs_version *v);
void ovs_version_unref(ovs_version *v);
/* The sealer's unref of a version of column c: what the last reference frees goes to the store's
 * cache (recycle.h) — the version, change-set and chunk structs — and a full delta with its buffer
 * to the column's handoff slot (handoff.h); the rest is freed as by ovs_version_unref. Sealer only. */
void ovs_version_release(ovs_store *st, ovs_column *c, ovs_version *v);
/* Frees the store's cached structs (destroy). */
void ovs_version_recycle_fini(ovs_store *st);

/* Builds the version sealing the deltas `ds` (one ordinal, sorted by op id) on top of `prev` (the
 * column's latest, or NULL). Sealer only; a device column's context comes through devx (device.h:
 * the seal's, shared by its columns). NULL with a message in err when out of memory (the deltas
 * are not consumed). */
ovs_version *ovs_version_build(ovs_store *st, ovs_exec *x, ovs_exec_last *devx, ovs_column *c, ovs_version *prev,
			       ovs_delta *ds, char *err, size_t errlen);
/* Gives every version the seal built on a device since the last call (ready_due, at the head of
 * each column's chain) that device's ready event, recorded now: after all their work. Sealer only,
 * before the versions are published (also when the seal stops on an error: built versions stay
 * chained and the next seal publishes them). */
void ovs_version_ready_assign(ovs_store *st, ovs_exec *x, ovs_exec_last *devx, ovs_column **cols, size_t ncols);

/* Blobs: rows of array columns (len elements of elem_bytes), one reference on return. */
ovs_blob *ovs_blob_new(uint64_t len, size_t elem_bytes);
/* A row of a device column: len elements at byte offset off of device buffer buf (the blob takes a
 * reference on buf; the last blob of a buffer releases it). NULL when out of memory. */
ovs_blob *ovs_blob_new_on(uint64_t len, ovs_buffer *buf, size_t off);
void ovs_blob_ref(ovs_blob *b);
void ovs_blob_unref(ovs_blob *b);

#endif /* OVSTAGE_ENGINE_VERSION_H */
