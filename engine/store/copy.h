/*
 * copy.h — bulk copies for column data. Large copies are split across workers with fork-join and
 * use non-temporal stores (the destination is a fresh version buffer that the writer will not read
 * back, so filling the cache with it would only evict the reader's data). Small copies are a plain
 * memcpy. Called from jobs (w = the running worker); w may be NULL (then serial).
 */
#ifndef OVSTAGE_ENGINE_COPY_H
#define OVSTAGE_ENGINE_COPY_H

#include <stddef.h>

#include "jobs.h"

/* Copies n bytes; may run in parallel on w's pool. dst and src must not overlap. */
void ovs_copy(jobs_worker *w, void *dst, const void *src, size_t n);

/* Copies n bytes on this thread with non-temporal stores where it pays (n large, dst 16-aligned
 * after a short head); otherwise memcpy. */
void ovs_copy_stream(void *dst, const void *src, size_t n);

#endif /* OVSTAGE_ENGINE_COPY_H */
