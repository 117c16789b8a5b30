/*
 * runtime.h — process-wide state: the reference count that ovstage_initialize/shutdown and live
 * stages hold, the configuration, and the one job scheduler that serves every stage.
 * Thread-safe: a mutex guards bootstrap and teardown (both rare); ovs_runtime_sched() is a plain
 * read valid while the caller holds a reference.
 */
#ifndef OVSTAGE_ENGINE_RUNTIME_H
#define OVSTAGE_ENGINE_RUNTIME_H

#include <stdbool.h>
#include <stdint.h>

#include <ovstage/ovstage.h>

#include "jobs.h"

enum { OVS_CUDA_DEVICE_LIST_MAX = 64 }; /* ordinals in an active-GPU list */

typedef struct ovs_settings {
	int workers;              /* worker threads (-1 = one per core) */
	bool pin;                 /* bind workers to cores */
	uint32_t queue_capacity;  /* injection queue slots */
	uint32_t retention;       /* sealed ordinals retained per column (>= 1) */
	uint64_t max_unsealed_mb; /* back-pressure: unsealed written data per stage (0 = unlimited) */
	uint32_t chunk_kb;        /* copy-on-write chunk of fixed-size columns, KiB */
	uint64_t default_hierarchy_model; /* RUNTIME_DEFAULT_HIERARCHY_COMPUTATION_MODEL */
	bool disable_gpu;         /* CPU-only mode (process-wide; the environment wins) */
	uint64_t gpu_pool_mb;     /* device memory retained per GPU pool */
	uint32_t cuda_device_count; /* entries in cuda_devices (0: instances have no CUDA device) */
	int16_t cuda_devices[OVS_CUDA_DEVICE_LIST_MAX]; /* the active-GPU list: instances created while it is
	                          * set take its ordinals round-robin (a per-stage setting) */
} ovs_settings;

/* Takes one reference; bootstraps on 0 -> 1 with `config` (NULL = defaults). INVALID_ARGUMENT (with a
 * message) for malformed, duplicate or unknown entries, or a setting that conflicts with the active
 * runtime. */
ovstage_api_status_t ovs_runtime_acquire(const ovstage_config_t *config);
/* Drops one reference; tears down at 0. INVALID_ARGUMENT if there is none to drop. */
ovstage_api_status_t ovs_runtime_release(void);
/* The engine's workers now (*workers; 0 when no scheduler runs), and how many are placed near the
 * PCI device `pci_bus_id` (jobs.h, near_pci). Any thread, with or without a reference (locks). */
int ovs_runtime_near_workers(const char *pci_bus_id, int *workers);
/* The scheduler and settings (valid while a reference is held). */
jobs_sched *ovs_runtime_sched(void);
const ovs_settings *ovs_runtime_settings(void);
/* The injection queue capacity in force (for messages). */
uint32_t ovs_runtime_queue_capacity(void);
/* The CUDA device of the next instance: the active-GPU list's next ordinal, round-robin over the
 * instances created while the list is in force (deterministic: the n-th such instance takes entry
 * n mod count); -1 when no list is set. */
int ovs_runtime_next_cuda_device(void);
/* Whether anything holds the runtime (initialize or a live stage). */
bool ovs_runtime_active(void);

#endif /* OVSTAGE_ENGINE_RUNTIME_H */
