/*
 * copy.h — bulk copies for column data. Large copies are split across workers with fork-join and
 * use non-temporal stores (the destination is a fresh version buffer that the writer will not read
 * back, so filling the cache with it would only evict the reader's data). Small copies are a plain
 * memcpy. Called from jobs (w = the running worker); w may be NULL (then serial).
 */
#ifndef OVSTAGE_ENGINE_COPY_H
#define OVSTAGE_ENGINE_COPY_H

#include <stddef.h>

#include "exec.h"
#include "jobs.h"

/* Copies n bytes; may run in parallel on w's pool. dst and src must not overlap. */
void ovs_copy(jobs_worker *w, void *dst, const void *src, size_t n);

/* Deferred copies: an op that fills several buffers appends their copies to its list b and runs
 * them with one ovs_copy_flush, spread over w's pool by bytes when they add up to a parallel copy's
 * size (the (a) row's 8 columns of 1 MiB each were copied one after the other on one worker). A full
 * list is flushed before the next append. The list's owner flushes before anything reads a pending
 * destination or frees it (docs/store.md, "Deferred host copies"). Thread-private: one op's list. */
void ovs_copy_defer(jobs_worker *w, ovs_copy_batch *b, void *dst, const void *src, size_t n);

/* Runs every pending copy of b (in parallel on w's pool when they are large enough) and empties b. */
void ovs_copy_flush(jobs_worker *w, ovs_copy_batch *b);

/* Copies n bytes on this thread with non-temporal stores where it pays (n large, dst 16-aligned
 * after a short head); otherwise memcpy. */
void ovs_copy_stream(void *dst, const void *src, size_t n);

#endif /* OVSTAGE_ENGINE_COPY_H */
