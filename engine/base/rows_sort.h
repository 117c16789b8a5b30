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

#endif /* OVSTAGE_ENGINE_ROWS_SORT_H */
