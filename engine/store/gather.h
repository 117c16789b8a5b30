/*
 * gather.h — copying rows of a sealed version of a fixed-size column out into a dense buffer: the
 * fill of a read-modify-write map session (ops/map.c, OVSTAGE_EXT_MAP_READ_CURRENT).
 *
 * Contract
 *  - dst row i = row rows[i] of v as sealed, for i < n; zero bytes where v holds no value for that
 *    row (a row v does not have — a prim new to the column —, a row absent in v — deleted —, or no
 *    version at all: v == NULL). Rows are rb bytes (the column's row_bytes).
 *  - v must be pinned by the caller for as long as the copy may read it: on the CPU, until the
 *    call returns; on a device, until the work is issued on x's stream (a pinned version released
 *    after that frees its buffers in stream order on the same engine stream, after the copy).
 *  - dst lives on the device whose operations `ops` are (the column's device; v's chunks live
 *    there too). On a device the copy is asynchronous on x's stream (errors land in x->err); the
 *    version was sealed on the same engine stream, so stream order makes it ready for the copy.
 *  - Large host copies are split across the workers when x has one (ovs_parallel_for).
 *
 * Thread safety: any thread; v is immutable (published), dst is the caller's.
 */
#ifndef OVSTAGE_ENGINE_GATHER_H
#define OVSTAGE_ENGINE_GATHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "exec.h"
#include "model.h"

/* False (with a message in err) when host memory for a device copy's tables ran out; dst is then
 * partly written. */
bool ovs_version_gather(ovs_exec *x, const ovs_memops *ops, const ovs_version *v, size_t rb, const uint32_t *rows,
			uint32_t n, void *dst, char *err, size_t errlen);

#endif /* OVSTAGE_ENGINE_GATHER_H */
