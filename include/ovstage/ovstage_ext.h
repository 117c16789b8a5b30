/*
 * ovstage_ext.h — configuration keys of this implementation beyond ovstage 0.2.1.
 *
 * They extend the uint64 and bool key spaces of ovstage_config_entry_t with values far above the
 * standard keys, so a program written against 0.2.1 never meets them by accident. Each has an
 * environment variable; when both are given, the environment wins (operators tune a deployed
 * binary without rebuilding it). Values apply to stages created after ovstage_initialize.
 *
 *   key                                    env variable             default
 *   OVSTAGE_CONFIG_EXT_WORKER_COUNT        OVSTAGE_WORKERS          one worker per core (hwloc)
 *   OVSTAGE_CONFIG_EXT_QUEUE_CAPACITY      OVSTAGE_QUEUE_CAPACITY   4096 (submissions in flight from
 *                                                                   threads that are not workers)
 *   OVSTAGE_CONFIG_EXT_RETENTION           OVSTAGE_RETENTION        2 (sealed ordinals kept per column,
 *                                                                   readable by latest and range reads)
 *   OVSTAGE_CONFIG_EXT_MAX_UNSEALED_MB     OVSTAGE_MAX_UNSEALED_MB  4096 (written data a stage holds
 *                                                                   before advance_write_floor seals it;
 *                                                                   beyond it writes and maps return
 *                                                                   OVSTAGE_ERROR_QUEUE_FULL; 0 = none)
 *   OVSTAGE_CONFIG_EXT_CHUNK_KB            OVSTAGE_CHUNK_KB         256 (copy-on-write granule of fixed-size
 *                                                                   columns, KiB in [1, 1048576]: a sparse
 *                                                                   write copies the chunks it touches,
 *                                                                   the others are shared between versions)
 *   OVSTAGE_CONFIG_EXT_PIN_WORKERS (bool)  OVSTAGE_PIN_WORKERS      false (bind workers to cores)
 *   OVSTAGE_CONFIG_EXT_DISABLE_GPU (bool)  OVSTAGE_DISABLE_GPU      false (CPU-only mode: CUDA tensors and
 *                                                                   cuda_sync are refused with a message
 *                                                                   naming the mode; "0" in the environment
 *                                                                   re-enables; decided once per process,
 *                                                                   at the first instance)
 *   OVSTAGE_CONFIG_EXT_GPU_POOL_MB         OVSTAGE_GPU_POOL_MB      256 (device memory each GPU's pool keeps
 *                                                                   for reuse after frees; <= 0 = none; it
 *                                                                   bounds what is retained, not what a
 *                                                                   large write or read may use at once;
 *                                                                   ovstage_ext_get_gpu_pool_stats)
 *   OVSTAGE_CONFIG_EXT_CUDA_DEVICES (string) OVSTAGE_CUDA_DEVICES  none (the active-GPU list: one CUDA
 *                                                                   ordinal or a comma-separated list, e.g.
 *                                                                   "0,1"; instances created while it is
 *                                                                   set take its ordinals round-robin, in
 *                                                                   creation order; an instance's device
 *                                                                   is where the columns its maps create
 *                                                                   live; "" clears it. An ordinal the
 *                                                                   process cannot see fails
 *                                                                   ovstage_create_instance naming it; in
 *                                                                   CPU-only mode the list is ignored with
 *                                                                   a warning)
 *
 * The worker count, pinning and queue capacity are process-wide (one scheduler serves every stage)
 * and are taken from the configuration that first bootstraps the runtime.
 */
#ifndef OVSTAGE_EXT_H
#define OVSTAGE_EXT_H

#include "ovstage_api/ovstage_api.h"
#include "ovstage_types.h"

#define OVSTAGE_CONFIG_EXT_WORKER_COUNT ((ovstage_config_uint64_t)0x4f560001)
#define OVSTAGE_CONFIG_EXT_QUEUE_CAPACITY ((ovstage_config_uint64_t)0x4f560002)
#define OVSTAGE_CONFIG_EXT_RETENTION ((ovstage_config_uint64_t)0x4f560003)
#define OVSTAGE_CONFIG_EXT_PIN_WORKERS ((ovstage_config_bool_t)0x4f560004)
#define OVSTAGE_CONFIG_EXT_MAX_UNSEALED_MB ((ovstage_config_uint64_t)0x4f560005)
#define OVSTAGE_CONFIG_EXT_CHUNK_KB ((ovstage_config_uint64_t)0x4f560006)
#define OVSTAGE_CONFIG_EXT_DISABLE_GPU ((ovstage_config_bool_t)0x4f560007)
#define OVSTAGE_CONFIG_EXT_GPU_POOL_MB ((ovstage_config_uint64_t)0x4f560008)
#define OVSTAGE_CONFIG_EXT_CUDA_DEVICES ((ovstage_config_string_t)0x4f560009)

/*
 * Memory a stage holds, in bytes (an extension: ovstage 0.2.1 has no such call). A racy snapshot of
 * counters kept with relaxed atomics: exact when the stage is quiescent.
 *   unsealed_bytes  written data waiting for advance_write_floor: what OVSTAGE_MAX_UNSEALED_MB bounds
 *   unsealed_limit  that bound (0 = none)
 *   buffer_bytes    every column buffer the stage holds: retained versions, unsealed deltas' buffers,
 *                   versions retired by a seal and not yet freed, read and map groups still held by
 *                   the caller, and free buffers kept for reuse (pooled_bytes); not counted: row lists,
 *                   presence bitmaps and deltas below 64 KiB, which live in the C allocator
 *   pooled_bytes    of buffer_bytes, free buffers kept for reuse (at most 1 GiB per stage)
 *   buffers         buffers live (pooled ones included)
 */
typedef struct ovstage_ext_memory_stats_t {
	uint64_t unsealed_bytes;
	uint64_t unsealed_limit;
	uint64_t buffer_bytes;
	uint64_t pooled_bytes;
	uint64_t buffers;
} ovstage_ext_memory_stats_t;

/* OVSTAGE_OK, or OVSTAGE_ERROR_INVALID_ARGUMENT for a NULL or foreign instance or a NULL out. */
OVSTAGE_API ovstage_api_status_t ovstage_ext_get_memory_stats(ovstage_instance_t *instance,
							      ovstage_ext_memory_stats_t *out);

/*
 * Floor-advance notification (an extension): blocks until the write floor of `attribute` reaches
 * `ordinal` (the value get_attribute_write_floor would then report), or — with an empty attribute
 * (token 0 and no string) — until the global floor (the minimum over the stage's columns) does.
 * Woken by the seal that publishes the floor: no polling. `timeout` as for fetch calls (0 polls,
 * OVSTAGE_TIMEOUT_INFINITE waits). OVSTAGE_OK when reached, OVSTAGE_ERROR_TIMEOUT when not (yet),
 * INVALID_ARGUMENT for a NULL or foreign instance or a bad attribute name. A column that does not
 * exist yet follows the stage floor, as get_attribute_write_floor does.
 */
OVSTAGE_API ovstage_api_status_t ovstage_ext_wait_write_floor(ovstage_instance_t *instance,
							      ovx_string_or_token_t attribute,
							      ovstage_ordinal_t ordinal, ovstage_timeout_ns_t timeout);

/*
 * Query filters (extensions; ovstage 0.2.1 answers NOT_SUPPORTED for these):
 *  - IN, LT, LE, GT, GE on an attribute's own column compare its latest sealed value with the
 *    predicate's values, given as strings ("3", "-1.5", "0x10", "true"): the column must be a scalar
 *    number or bool column (one value per row); IN takes any number of values, the others one.
 *  - A predicate whose op is OVSTAGE_FILTER_OP_EXT_OR separates AND groups: the filter matches a prim
 *    when every predicate of at least one group holds ({A, B, OR, C} = (A and B) or C). Its
 *    attribute and values are not looked at; it needs a predicate on each side.
 */
#define OVSTAGE_FILTER_OP_EXT_OR ((ovstage_filter_op_t)0x4f56)

/*
 * Whether this process can keep columns on CUDA devices: *device_count = the CUDA devices it may use
 * (0 in CPU-only mode, without a driver or device, or in a build without the CUDA backend), and
 * *reason (if not NULL) a static string saying why not ("" when devices exist). Decides CPU-only
 * mode if no instance has yet. Always OVSTAGE_OK (INVALID_ARGUMENT for a NULL device_count).
 */
OVSTAGE_API ovstage_api_status_t ovstage_ext_get_gpu_status(int *device_count, const char **reason);

/*
 * The device buffer pool of CUDA device `cuda_device` (process-wide: the free device memory every
 * stage keeps for reuse on that device, bounded by OVSTAGE_CONFIG_EXT_GPU_POOL_MB). Counters are
 * cumulative since the process started; byte figures are as of the call (exact when no op runs).
 * Zeros (bound_bytes set) before the device's first use. OVSTAGE_OK; INVALID_ARGUMENT for a NULL
 * out, or an ordinal this process cannot use (the message names it and why).
 */
typedef struct ovstage_ext_gpu_pool_stats_t {
	uint64_t bound_bytes;         /**< the most the pool retains (0: the pool is off) */
	uint64_t retained_bytes;      /**< free device memory the pool keeps now (<= bound_bytes) */
	uint64_t hits;                /**< allocations served from the pool */
	uint64_t misses;              /**< allocations it could not serve (made by CUDA's allocator) */
	uint64_t releases;            /**< blocks handed back to CUDA (over the bound, or the pool off) */
	uint64_t cuda_reserved_bytes; /**< memory CUDA's stream-ordered pool below holds now: in use,
	                               *   plus what it returns to the system at the next synchronisation */
	uint64_t cuda_used_bytes;     /**< of which in use (by the stages' buffers and the pool's blocks) */
} ovstage_ext_gpu_pool_stats_t;

OVSTAGE_API ovstage_api_status_t ovstage_ext_get_gpu_pool_stats(int cuda_device, ovstage_ext_gpu_pool_stats_t *out);

/*
 * Where CUDA device `cuda_device` is served from: its PCI bus ID, how many of the engine's workers
 * hwloc placed near it (on the cores of its package or NUMA node; only for devices of the active-GPU
 * list set when the engine's workers started, else 0), and the completions its own event poller has
 * resolved (op receipts and deferred releases of GPU work on that device) and still holds. Counters
 * are cumulative since the process started, as of the call. OVSTAGE_OK; INVALID_ARGUMENT for a NULL
 * out, or an ordinal this process cannot use (the message names it and why).
 */
typedef struct ovstage_ext_gpu_device_info_t {
	char pci_bus_id[32];   /**< as CUDA writes it ("0000:3B:00.0"), NUL-terminated */
	int near_workers;      /**< workers placed near the device (0: not in the list at startup, or
	                        *   the topology does not say where the device is) */
	int worker_count;      /**< all the engine's workers, for comparison (0 before the first instance) */
	uint64_t completions;  /**< completions of GPU work on the device that its poller resolved */
	uint64_t pending;      /**< completions pushed to its poller and not yet resolved */
} ovstage_ext_gpu_device_info_t;

OVSTAGE_API ovstage_api_status_t ovstage_ext_get_gpu_device_info(int cuda_device, ovstage_ext_gpu_device_info_t *out);

/*
 * The CUDA device of an instance (*cuda_device): the ordinal it took from the active-GPU list
 * (OVSTAGE_CONFIG_EXT_CUDA_DEVICES / OVSTAGE_CUDA_DEVICES) when it was created, or -1 when it has
 * none (no list was set, or CPU-only mode). A map that creates a column creates it there; writes
 * still create columns where their tensors live. OVSTAGE_OK, or INVALID_ARGUMENT for a NULL or
 * foreign instance or a NULL out.
 */
OVSTAGE_API ovstage_api_status_t ovstage_ext_get_instance_cuda_device(ovstage_instance_t *instance,
								      int *cuda_device);

/*
 * Read-modify-write maps (an extension; ovstage 0.2.1's map buffers are write-only staging):
 * ovstage_ext_map_attribute takes the arguments of ovstage_map_attribute plus a flag word; with
 * flags 0 it is ovstage_map_attribute. The session it opens is used as any map session
 * (fetch_map_next, unmap_group, unmap_attribute) and commits as one (docs/api.md: the commit takes
 * its place among same-ordinal writes at unmap_attribute).
 *
 * OVSTAGE_EXT_MAP_READ_CURRENT: the buffer fetch_map_next hands out already holds, for each mapped
 * prim, the column's latest sealed value as of the call — the state as of the column's write floor
 * at the call, which is what a latest read at the map's ordinal returns then — so the producer can
 * modify it in place and unmap. Prims without a sealed value (new to the column, or deleted) read
 * as zero bytes; a column that does not exist yet needs desc.dtype and starts all zero. Refused at
 * the call, with a message and no trace:
 *   WRITE_FLOOR_VIOLATION  the column has writes (or other map sessions) admitted above its floor
 *                          that did not fail: their values are not sealed, so the buffer could not
 *                          hold them and the commit would silently overwrite them (advance the
 *                          floor first); as for a latest read above the floor
 *   INVALID_ARGUMENT       the column does not exist yet and desc.dtype is zero; a desc.dtype
 *                          given, or its desc.semantic, differs from the column's; unknown flag
 *                          bits
 *   NOT_SUPPORTED          an array column (maps of array columns are not supported)
 * and otherwise as ovstage_map_attribute. The buffer is a copy (one gather of the mapped rows): the
 * sealed chunks stay readable by latest reads and held groups, so they are never handed out for
 * writing. A device column's buffer is filled on the device, on the stage's engine stream; the
 * group's data.cuda_sync.wait_event fires after the fill.
 */
typedef uint32_t ovstage_ext_map_flags_t;
#define OVSTAGE_EXT_MAP_READ_CURRENT ((ovstage_ext_map_flags_t)1u)

OVSTAGE_API ovstage_enqueue_result_t ovstage_ext_map_attribute(ovstage_instance_t *instance,
							       ovstage_query_handle_t handle,
							       const ovstage_map_desc_t *desc, ovstage_ordinal_t ordinal,
							       const size_t *element_sizes, size_t element_count,
							       ovstage_ext_map_flags_t flags,
							       ovstage_map_handle_t *out_map_handle);

#endif /* OVSTAGE_EXT_H */
