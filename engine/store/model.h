/*
 * model.h — the data model of the snapshot store: columns, their sealed versions, pending deltas, and the
 * atomic publication of everything one floor advance seals.
 *
 * Model
 *  - A column is one attribute name. It owns a row space: each prim that ever had a value in the
 *    column gets a row (rows are never reused; a deleted prim's row becomes absent).
 *  - A write produces a *delta* keyed by (ordinal, op id): either FULL (a complete new buffer for
 *    rows 0..n-1, copied in parallel or adopted zero-copy from a managed tensor) or SPARSE (the
 *    touched rows and their bytes; cost in proportion to the rows touched), or TOMBSTONES (rows made
 *    absent). Writes at different ordinals never wait for each other: their deltas wait in the
 *    column's inbox until a floor advance seals them, in (ordinal, op id) order.
 *  - Sealing ordinal o of a column produces a *version*: the rows as of o, the set of rows that
 *    changed at o, and a presence bitmap (NULL when every row holds a value). A fixed-size column's
 *    rows live in *chunks* of 2^k rows (about OVSTAGE_CHUNK_KB bytes) that versions share: a version
 *    is a table of chunk pointers, and a sparse ordinal replaces only the chunks it touches
 *    (copy-on-write). A replaced chunk comes from the chunk that fell out of retention (if no reader
 *    pins it), caught up by replaying the retained deltas (cost: rows touched x retention), or else
 *    is a copy of the previous version's chunk (cost: chunk size). A full write's buffer becomes the
 *    version's chunks without a copy. Chunks adjacent in memory form *runs*; a read hands out one
 *    zero-copy group per run (one for a column written in full).
 *    The last `retention` versions stay readable.
 *  - A *snapshot* is the immutable map column -> latest sealed version (and floors) that readers use.
 *    One floor advance builds every new version first and then publishes one new snapshot with a
 *    single release store: a reader sees all of ordinal N or none of it.
 *  - Readers pin versions (reference counts); a pinned version stays valid, zero-copy, while later
 *    seals publish newer ones. Snapshot structs are reclaimed with a two-counter grace period
 *    (ovs_snapshot_enter/leave; see docs/store.md).
 *
 * Thread safety: seals of one stage are serialised by the op ordering (each seal runs after the
 * previous one); everything else may run concurrently with them.
 */
#ifndef OVSTAGE_ENGINE_MODEL_H
#define OVSTAGE_ENGINE_MODEL_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ovstage/ovstage.h>

#include "buffer.h"
#include "lastchange.h"
#include "radix.h"

typedef struct ovs_store ovs_store;

/* A column's schema: kind, element type (lanes = tuple width for fixed columns) and role. */
typedef struct ovs_schema {
	bool is_array;                         /* ragged rows (arrays) vs fixed rows */
	DLDataType dtype;                      /* element dtype; fixed: lanes = full tuple width */
	ovstage_attribute_semantic_t semantic; /* the recorded role, immutable */
	DLDevice device;                       /* where the column's storage lives (kDLCPU in this build;
	                                        * the CUDA backend adds device columns) */
} ovs_schema;

/* One ragged row of an array column: a reference-counted blob shared between versions. A row of a
 * CPU column holds its bytes (data); a row of a device column is host metadata only: its bytes are
 * at an offset of a device buffer that the rows of one write share (an ovs_blob_dev in data), so a
 * write uploads or gathers its rows once and a read hands out device pointers with no copy. */
typedef struct ovs_blob {
	_Atomic uint32_t refs;  /* versions holding it */
	uint32_t on_device;     /* 1: data holds an ovs_blob_dev (the bytes are device memory); 0: the bytes */
	uint64_t len;           /* elements */
	int64_t shape;          /* = len, addressable as a DLTensor shape */
	unsigned char data[];   /* len * element bytes, or an ovs_blob_dev */
} ovs_blob;

/* Where the bytes of a device column's row are (the trailer of an on_device blob). */
typedef struct ovs_blob_dev {
	ovs_buffer *buf;        /* the write's device buffer (one reference per row that lives in it) */
	size_t off;             /* byte offset of the row in buf */
} ovs_blob_dev;

/* The address of a blob's bytes: host memory (CPU column) or device memory (device column). */
static inline void *ovs_blob_bytes(const ovs_blob *b)
{
	if (!b->on_device)
		return (void *)(uintptr_t)b->data;
	const ovs_blob_dev *d = (const ovs_blob_dev *)(const void *)b->data;
	return (char *)d->buf->data + d->off;
}

typedef enum ovs_delta_kind {
	OVS_DELTA_SPARSE = 0,   /* rows[] + values */
	OVS_DELTA_FULL = 1,     /* a whole buffer for rows [0, nrows) */
	OVS_DELTA_TOMBSTONE = 2 /* rows[] become absent */
} ovs_delta_kind;

/* The effect of one op on one column at one ordinal. */
typedef struct ovs_delta {
	struct ovs_delta *next;     /* link: column inbox, then per-ordinal lists */
	ovstage_ordinal_t ordinal;  /* the write's ordinal */
	uint64_t seq;               /* the op id: same-ordinal deltas apply in submission order */
	ovs_delta_kind kind;        /* see above */
	uint32_t nrows;             /* SPARSE/TOMBSTONE: entries in rows; FULL: rows covered */
	uint32_t *rows;             /* SPARSE/TOMBSTONE: target rows (malloc'd) */
	unsigned char *values;      /* SPARSE fixed: nrows * row_bytes (malloc'd) */
	ovs_blob **blobs;           /* SPARSE array: nrows blobs (references owned) */
	ovs_buffer *full;           /* FULL fixed: the new buffer (reference owned) */
	ovs_buffer *rows_buf;       /* rows lives in this pooled buffer (large deltas), else malloc'd */
	const ovs_rowmap *rows_map; /* or rows are this query row map's (a reference held) */
	ovs_buffer *values_buf;     /* values likewise */
	ovs_buffer *rows_dev;       /* a device column's SPARSE delta: rows uploaded to the column's device
	                             * (one reference), made by the write's gather or the first apply and
	                             * reused by every later apply and replay; NULL until then */
	size_t bytes;               /* what it holds, counted in the stage's unsealed total until sealed */
	bool sorted;                /* rows strictly increasing (set at push, by the writer's thread) */
	bool contig;                /* rows[i] = rows[0] + i: one block (set at push) */
	bool shape_known;           /* the writer set sorted and contig itself (push does not scan) */
	bool rows_lent;             /* the rows' storage moved to the version's change set (which
	                             * outlives the delta): ovs_delta_free leaves it */
	uint64_t cost;              /* its share of the column's seal_cost */
} ovs_delta;

/* A chunk of a fixed-size column: 2^k consecutive rows in a buffer, shared by every version in
 * which those rows are equal. Its memory is rewritten only by the sealer, and only after it became
 * unreachable (see ovs_chunks_harvest). */
typedef struct ovs_chunk {
	_Atomic uint32_t refs;      /* versions whose tables hold it */
	uint32_t cap_rows;          /* rows it has room for (2^k, less at the end of a full write's buffer) */
	ovs_buffer *buf;            /* the memory (one reference held by the chunk) */
	size_t off;                 /* byte offset of the chunk's first row in buf */
} ovs_chunk;

/* Consecutive rows of a version that are contiguous in memory: what one read group views. */
typedef struct ovs_run {
	uint32_t row0;              /* first row */
	uint32_t nrows;             /* rows */
	void *data;                 /* address of row0 */
} ovs_run;

/* One sealed state of a column. */
typedef struct ovs_version {
	_Atomic uint32_t refs;      /* the column's chain + pinned read groups */
	uint32_t rows;              /* rows 0..rows-1 exist in this version */
	ovstage_ordinal_t ordinal;  /* the ordinal this version seals */
	ovstage_ordinal_t base_ordinal; /* ordinal of the version it was built on (0 = none) */
	uint64_t generation;        /* layout generation (bumps when rows are added or removed, or when
	                             * the runs a read is split into change) */
	uint32_t chunk_shift;       /* fixed columns: log2 of rows per chunk */
	uint32_t nchunks;           /* fixed columns: entries in chunks */
	ovs_chunk **chunks;         /* fixed columns: chunk j holds rows [j << shift, (j + 1) << shift) */
	ovs_run *runs;              /* fixed columns: rows 0..rows-1 as runs, in row order */
	uint32_t nruns;             /* entries in runs */
	ovs_chunk *chunk1;          /* the chunk table of a one-chunk version (chunks == &chunk1) */
	ovs_run run1;               /* the runs of a one-run version (runs == &run1) */
	ovs_blob **blobs;           /* array columns: one blob per row (NULL = absent/empty) */
	uint64_t *present;          /* presence bitmap (bit r = row r holds a value); NULL = all present */
	ovs_chset *cs;              /* the rows changed at this ordinal (one reference; lastchange.h) */
	bool all_changed;           /* every row changed (FULL delta); = cs->all_changed */
	ovs_delta *deltas;          /* the deltas that produced it (kept for catch-up replays) */
	void *ready;                /* completion a reader must wait on before touching the data (a device
	                             * event, one reference; the versions of one seal on one device share
	                             * it); NULL: ready (always on the CPU). Set before the version is
	                             * published, constant after: read without ordering of its own */
	bool ready_due;             /* a device version whose ready event its seal has yet to record
	                             * (ovs_version_ready_assign); sealer-owned */
	struct ovs_version *_Atomic older; /* the previous retained version (owned reference); cut by the
	                                     * sealer when it leaves retention, so readers follow it only
	                                     * inside the snapshot grace section */
} ovs_version;

/* An entry of a column's ring of change sets that left retention: what the seal asks of a set there
 * (its ordinal, rows it lists, whether a fold of it is cheap) is copied in, so that a seal touches no
 * set but the one whose link it cuts (the sets are cold by then: one miss each, per column and seal). */
typedef struct ovs_lcq_entry {
	ovs_chset *set;   /* the set (the chain holds it) */
	uint64_t ordinal; /* set->ordinal */
	uint64_t listed;  /* rows it lists (0 for a run or every row) */
	bool cheap;       /* the seal folds it itself (cheap_fold, seal.c) */
} ovs_lcq_entry;

/* A column: one attribute name. Three groups of fields on separate cache lines: what every op reads
 * (name, schema, floors, the row map), what every writer updates (the inbox and its hints: a push
 * invalidates only this line), and what only the sealer touches. */
#define OVS_COLUMN_LINE 64
typedef struct ovs_column {
	/* --- read by every op; written at column creation, the first schema, row creation, seals --- */
	ovx_token_t name;                 /* attribute token */
	uint32_t index;                   /* position in the store's column array (dense, from 0) */
	bool prepared;                    /* not yet published (ovs_column_prepare): owned by the call that
	                                   * prepared it; false before it is published, constant after */
	pthread_mutex_t schema_lock;      /* guards the first schema assignment */
	pthread_mutex_t rows_lock;        /* serialises row creation (once per prim: rows without holes) */
	_Atomic bool has_schema;          /* schema valid (release-published) */
	ovs_schema schema;                /* immutable once has_schema */
	size_t row_bytes;                 /* fixed: bytes per row */
	_Atomic uint32_t nrows;           /* rows allocated so far (monotone) */
	_Atomic uint64_t generation;      /* layout generation counter */
	ovs_radix rows;                   /* prim (path id) -> row + 1 (0 = no row) */
	_Alignas(OVS_COLUMN_LINE) ovs_lcfold lcfold; /* last changes of the change sets that left retention (written
	                                   * by the fold flag's holder, read by range reads: lastchange.h) */

	/* --- moved by every commit (admission, completion, seal) and read by reads: a line of their
	 * own, so that these stores do not take the read-mostly fields above from the readers' caches
	 * (a reader thread beside a writer made ovs_sequencer_applied 4x dearer: perf, session 12) --- */
	_Alignas(OVS_COLUMN_LINE) _Atomic uint64_t floor; /* sealed through this ordinal */
	_Atomic uint64_t floor_requested; /* highest floor any accepted advance asked for */
	_Atomic uint64_t max_written;     /* highest ordinal any accepted write targets, less those that
	                                   * failed (see ovs_inflight_done) */
	_Atomic uint64_t dropped_through; /* highest ordinal whose version left retention (0 = none) */

	/* --- written by every write (a push, its completion), taken by the seal --- */
	_Alignas(OVS_COLUMN_LINE) _Atomic(ovs_delta *) inbox; /* deltas waiting for a seal (Treiber push,
	                                   * take-all) */
	_Atomic uint64_t min_unsealed;    /* lowest ordinal of unsealed deltas (UINT64_MAX: none); a hint
	                                   * for back-pressure that may be too high, never too low */
	_Atomic uint64_t seal_cost;       /* bytes the deltas pushed so far may make a seal copy (an
	                                   * estimate, added at push; less seal_cost_sealed: what the
	                                   * unsealed ones may copy, by which floor.c runs small seals in
	                                   * the call) */
	_Atomic uint64_t max_applied;     /* highest ordinal a write completed at (zero from calloc); read
	                                   * only by the sequencer, never by reads */
	_Atomic(ovs_delta *) handoff;     /* a full delta that left retention, with its buffer, for the
	                                   * column's next full write (handoff.h; NULL: none) */

	/* --- the sealer's alone (seals of a stage are chained) --- */
	_Alignas(OVS_COLUMN_LINE) ovs_delta *pending; /* deltas above the floor, sorted */
	ovs_version *latest;              /* newest version (seal-owned reference) */
	ovs_version *oldest;              /* the chain's last version (NULL iff latest is): the seal's cut
	                                   * of folded sets starts there without walking the chain */
	_Atomic uint64_t seal_cost_sealed; /* the part of seal_cost sealed so far: stored by the sealer
	                                    * alone, so a seal's update is no locked RMW on the writers'
	                                    * line (relaxed: an estimate) */
	ovs_chunk **spares;               /* chunks of the version that last left retention that nobody
	                                   * else holds, by chunk index (NULL = none); each holds its rows
	                                   * as of that version */
	uint32_t nspares;                 /* entries in spares */
	ovstage_ordinal_t spare_ordinal;  /* the ordinal of the version the spares came from */
	uint64_t run_changes;             /* how often the run layout changed (generation) */
	ovs_lcq_entry *lcq;               /* change sets that left retention and are still chained, oldest
	                                   * first (a ring: lcq_head, lcq_n, capacity lcq_cap, a power of 2;
	                                   * no references: the chain holds them) */
	uint32_t lcq_head, lcq_n, lcq_cap;
	uint64_t lcq_rows;                /* listed rows (not runs) of the sets in lcq */
} ovs_column;

static_assert(offsetof(ovs_column, inbox) % OVS_COLUMN_LINE == 0, "the writers' fields start a line");
static_assert(offsetof(ovs_column, pending) - offsetof(ovs_column, inbox) >= OVS_COLUMN_LINE,
	      "the writers' fields fit their line");
static_assert(offsetof(ovs_column, pending) % OVS_COLUMN_LINE == 0, "the sealer's fields start a line");
static_assert(offsetof(ovs_column, inbox) - offsetof(ovs_column, floor) >= OVS_COLUMN_LINE,
	      "the commit's fields fit their line");

/* Immutable map of columns to their latest sealed versions, replaced by each seal. */
typedef struct ovs_snapshot {
	uint64_t seq;                /* publication counter */
	size_t ncols;                /* entries: the columns published when it was (entry i = index i) */
	ovs_column **cols;           /* columns known when published, by index */
	ovs_version **versions;      /* their latest versions (no references: each stays alive in its
	                              * chain or in the limbo that retires the snapshot, seal.c); NULL
	                              * for a column with none yet */
} ovs_snapshot;

/* What a seal retired (the previous snapshot, the versions cut from retention), freed at the start
 * of the next seal once every reader of `parity` has left — by then they almost always have, so the
 * sealer does not wait on a reader that was preempted inside its short section. Seal-owned. */
typedef struct ovs_limbo {
	bool used;                   /* holds a retirement */
	unsigned parity;             /* the reader counter that protects it */
	ovs_snapshot *snap;          /* the retired snapshot (NULL if none) */
	ovs_version **v;             /* cut version chains */
	struct ovs_column **c;       /* their columns (for harvesting spare buffers) */
	size_t n, cap;               /* entries, capacity */
	ovs_chset **cs;              /* cut change-set chains (one reference each) */
	size_t ncs, cscap;           /* entries, capacity */
} ovs_limbo;

/* Whether row r of version v holds a value (r < v->rows). */
static inline bool ovs_version_present(const ovs_version *v, uint32_t r)
{
	return !v->present || ((v->present[r / 64] >> (r % 64)) & 1);
}

/* Address of row r of a fixed-size column's version v (r < v->rows); rb = the column's row bytes. */
static inline void *ovs_version_row_ptr(const ovs_version *v, size_t rb, uint32_t r)
{
	const ovs_chunk *k = v->chunks[r >> v->chunk_shift];
	return (char *)k->buf->data + k->off + (size_t)(r & ((1u << v->chunk_shift) - 1)) * rb;
}

/* The run holding row r of version v (r < v->rows). */
static inline uint32_t ovs_version_run_of(const ovs_version *v, uint32_t r)
{
	uint32_t lo = 0, hi = v->nruns;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (v->runs[mid].row0 <= r)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

#endif /* OVSTAGE_ENGINE_MODEL_H */
