/*
 * chunk.h — copy-on-write storage of fixed-size columns (see store.h for the model and
 * docs/store.md for the argument).
 *
 * A version of a fixed-size column is a table of chunks, each 2^k consecutive rows. A seal builds
 * the next version by sharing the previous version's chunks and replacing only the chunks its deltas
 * touch, so a sparse write costs the rows (and chunks) it touches, never the column. Everything here
 * is called by the sealer of the column (seal-owned state) except ovs_chunk_unref and
 * ovs_version_chunks_free, which run wherever the last reference to a version is dropped.
 */
#ifndef OVSTAGE_ENGINE_CHUNK_H
#define OVSTAGE_ENGINE_CHUNK_H

#include <stdbool.h>
#include <stddef.h>

#include "jobs.h"
#include "store.h"

/* A chunk over buf at byte offset off with room for cap_rows rows; takes its own reference on buf.
 * Its struct comes from the store's cache (recycle.h). Seal-owned. */
ovs_chunk *ovs_chunk_new(ovs_store *st, ovs_buffer *buf, size_t off, uint32_t cap_rows);
/* Drops a reference; the last one releases the buffer reference. Any thread. */
void ovs_chunk_unref(ovs_chunk *k);
/* As ovs_chunk_unref; the last reference's struct goes to rc (the sealer's cache, recycle.h), or is
 * freed when rc is NULL. rc non-NULL: the sealer only. */
void ovs_chunk_release(ovs_chunk *k, ovs_recycle *rc);

/* log2 of the rows per chunk for rows of rb bytes and a chunk of about chunk_bytes. */
uint32_t ovs_chunk_shift(size_t chunk_bytes, size_t rb);

/* Builds the rows of the fixed-size version v (v->rows set) on top of prev (NULL for the first)
 * from the deltas ds of one ordinal in op-id order: its chunk table and runs. Seal-owned. Returns
 * false with a message in err when out of memory (v then holds no chunks). */
bool ovs_chunks_build(ovs_store *st, ovs_exec *x, ovs_column *c, ovs_version *v, ovs_version *prev,
		      ovs_delta *ds, char *err, size_t errlen);

/* After the grace period of the seal that cut v from retention: if only the caller holds v, keeps
 * every chunk of v that no other version holds as the column's spare for its index (replacing the
 * spares of older versions, which can no longer be caught up). Seal-owned. */
void ovs_chunks_harvest(ovs_column *c, ovs_version *v);

/* Releases the column's spares. Seal-owned (or destroy). */
void ovs_chunks_drop_spares(ovs_column *c);

/* Process-wide counts of chunks shared with the previous version, copied from it, caught up from
 * a spare, of compactions, and of retained deltas not replayed because this ordinal rewrites all
 * their rows, since the process started (tests and diagnostics). */
typedef struct ovs_chunk_stats_t {
	uint64_t shared, copied, replayed, compactions, replays_skipped;
	uint64_t adopted; /* chunks that are a block delta's own values (no copy, no apply) */
} ovs_chunk_stats_t;
void ovs_chunk_stats(ovs_chunk_stats_t *out);

/* Releases v's chunk table and runs (the last reference to v is being dropped). Any thread. */
void ovs_version_chunks_free(ovs_version *v);
/* As ovs_version_chunks_free, the chunks released with ovs_chunk_release(k, rc). */
void ovs_version_chunks_release(ovs_version *v, ovs_recycle *rc);

#endif /* OVSTAGE_ENGINE_CHUNK_H */
