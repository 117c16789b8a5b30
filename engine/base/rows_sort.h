/*
 * rows_sort.h — sorting and merging row numbers (uint32), for the seal's change sets: a radix sort
 * of an arbitrary list, and a merge of runs that are each sorted already (producers whose rows
 * interleave). Pure functions over caller-owned arrays; thread-safe.
 */
#ifndef OVSTAGE_ENGINE_ROWS_SORT_H
#define OVSTAGE_ENGINE_ROWS_SORT_H

#include <stddef.h>
#include <stdint.h>

/* Sorts v[0, n) ascending (duplicates kept). tmp: n entries of scratch, or NULL (in place, slower). */
void ovs_rows_sort(uint32_t *v, uint32_t *tmp, size_t n);

/* Merges the sorted runs v[b[i], b[i + 1]) for i < nb (b[0] = 0, b[nb] = the total) into one sorted
 * run in v, duplicates kept and adjacent: pairwise, ceil(log2 nb) sequential passes through tmp
 * (b[nb] entries). b is overwritten. nb = 0 or 1: nothing to do. */
void ovs_rows_merge_runs(uint32_t *v, uint32_t *tmp, size_t *b, size_t nb);

/* Sorts v[0, n) ascending and drops duplicates, every value below `limit`: each value sets its bit
 * in `words` ((limit + 63) / 64 words, zero on entry; zero again on return), then the set bits are
 * read back in order. O(n + limit / 64), no comparisons: for the change set of an ordinal that
 * several producers wrote, whose rows cover much of the column. Returns the unique count, or
 * SIZE_MAX (v unchanged, words not zeroed) if a value is not below limit. */
size_t ovs_rows_unique_dense(uint32_t *v, size_t n, uint32_t limit, uint64_t *words);

#endif /* OVSTAGE_ENGINE_ROWS_SORT_H */
