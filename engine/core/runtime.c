/* runtime.c — process refcount, configuration (entries + OVSTAGE_* environment), the scheduler. */
#include "runtime.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ovstage/ovstage_ext.h>

#include "errors.h"
#include "log.h"
#include "gpu.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_refs;               /* guarded by g_lock */
static jobs_sched *g_sched;      /* set while g_refs > 0 */
static ovs_settings g_settings;  /* set while g_refs > 0 */
static uint64_t g_rr;            /* instances given a device from the current active-GPU list (g_lock) */

static void settings_default(ovs_settings *s)
{
	s->workers = -1;
	s->pin = false;
	s->queue_capacity = 4096;
	s->retention = 2;
	s->max_unsealed_mb = 4096;
	s->chunk_kb = 256;
	s->default_hierarchy_model = OVSTAGE_HIERARCHY_COMPUTATION_MODEL_CPU_INCREMENTAL;
	s->disable_gpu = false;
	s->gpu_pool_mb = 256;
	s->cuda_device_count = 0;
}

/* Parses an active-GPU list ("1" or "0,1,3": ordinals in [0, 1023], no empty items, at most
 * OVS_CUDA_DEVICE_LIST_MAX; "" clears it) into s. False with a message naming `what`. */
static bool parse_cuda_devices(const char *v, size_t len, const char *what, ovs_settings *s)
{
	uint32_t n = 0;
	size_t i = 0;
	while (i < len) {
		size_t j = i;
		unsigned long x = 0;
		while (j < len && v[j] >= '0' && v[j] <= '9' && j - i < 5)
			x = x * 10 + (unsigned long)(v[j++] - '0');
		if (j == i || x > 1023 || (j < len && v[j] != ',') || n == OVS_CUDA_DEVICE_LIST_MAX ||
		    (j < len && j + 1 == len)) {
			ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s = \"%.*s\" is not a CUDA device ordinal or a "
				    "comma-separated list of at most %d ordinals in [0, 1023] (at byte %zu)", what,
				    (int)(len > 200 ? 200 : len), v, OVS_CUDA_DEVICE_LIST_MAX, j);
			return false;
		}
		s->cuda_devices[n++] = (int16_t)x;
		i = j < len ? j + 1 : j;
	}
	s->cuda_device_count = n;
	return true;
}

/* Reads an unsigned environment variable; false (and a message) if set but malformed. */
static bool env_u64(const char *name, uint64_t min, uint64_t max, uint64_t *out, bool *present)
{
	const char *v = getenv(name);
	*present = false;
	if (!v || !*v)
		return true;
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 10);
	if (errno || *end || x < min || x > max) {
		ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "environment %s = \"%s\" is not an integer in [%llu, %llu]",
			    name, v, (unsigned long long)min, (unsigned long long)max);
		return false;
	}
	*out = x;
	*present = true;
	return true;
}

static ovstage_api_status_t parse_config(const ovstage_config_t *cfg, ovs_settings *s)
{
	settings_default(s);
	if (!cfg || !cfg->entry_count)
		goto env;
	if (!cfg->entries)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "config.entries is NULL with entry_count = %zu",
				   cfg->entry_count);
	for (size_t i = 0; i < cfg->entry_count; i++) {
		const ovstage_config_entry_t *e = &cfg->entries[i];
		for (size_t j = 0; j < i; j++)
			if (cfg->entries[j].key_type == e->key_type &&
			    cfg->entries[j].key.uint64_key == e->key.uint64_key)
				return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
						   "config.entries[%zu] duplicates entries[%zu]", i, j);
		switch (e->key_type) {
		case OVSTAGE_CONFIG_KEY_TYPE_UINT64:
			if (e->key.uint64_key == OVSTAGE_CONFIG_RUNTIME_DEFAULT_HIERARCHY_COMPUTATION_MODEL) {
				uint64_t m = e->value.uint_value;
				if (m == OVSTAGE_HIERARCHY_COMPUTATION_MODEL_INVALID || m > 4)
					return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
							   "config.entries[%zu]: hierarchy computation model %llu is not valid",
							   i, (unsigned long long)m);
				if (m != OVSTAGE_HIERARCHY_COMPUTATION_MODEL_RUNTIME_DEFAULT)
					s->default_hierarchy_model = m;
			} else if (e->key.uint64_key == OVSTAGE_CONFIG_EXT_WORKER_COUNT) {
				if (e->value.uint_value > 4096)
					return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
							   "config.entries[%zu]: worker count %llu > 4096", i,
							   (unsigned long long)e->value.uint_value);
				s->workers = (int)e->value.uint_value;
			} else if (e->key.uint64_key == OVSTAGE_CONFIG_EXT_QUEUE_CAPACITY) {
				if (e->value.uint_value < 2 || e->value.uint_value > (1u << 24))
					return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
							   "config.entries[%zu]: queue capacity %llu not in [2, 2^24]", i,
							   (unsigned long long)e->value.uint_value);
				s->queue_capacity = (uint32_t)e->value.uint_value;
			} else if (e->key.uint64_key == OVSTAGE_CONFIG_EXT_MAX_UNSEALED_MB) {
				s->max_unsealed_mb = e->value.uint_value;
			} else if (e->key.uint64_key == OVSTAGE_CONFIG_EXT_CHUNK_KB) {
				if (e->value.uint_value < 1 || e->value.uint_value > (1u << 20))
					return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
							   "config.entries[%zu]: chunk size %llu KiB not in [1, 1048576]", i,
							   (unsigned long long)e->value.uint_value);
				s->chunk_kb = (uint32_t)e->value.uint_value;
			} else if (e->key.uint64_key == OVSTAGE_CONFIG_EXT_RETENTION) {
				if (e->value.uint_value < 1 || e->value.uint_value > 1024)
					return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
							   "config.entries[%zu]: retention %llu not in [1, 1024]", i,
							   (unsigned long long)e->value.uint_value);
				s->retention = (uint32_t)e->value.uint_value;
			} else if (e->key.uint64_key == OVSTAGE_CONFIG_EXT_GPU_POOL_MB) {
				if (e->value.uint_value > (UINT64_MAX >> 20))
					return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
							   "config.entries[%zu]: GPU pool %llu MiB is too large", i,
							   (unsigned long long)e->value.uint_value);
				s->gpu_pool_mb = e->value.uint_value;
			} else {
				return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
						   "config.entries[%zu]: unknown uint64 key %u", i,
						   (unsigned)e->key.uint64_key);
			}
			break;
		case OVSTAGE_CONFIG_KEY_TYPE_BOOL:
			if (e->key.bool_key == OVSTAGE_CONFIG_EXT_PIN_WORKERS) {
				s->pin = e->value.bool_value;
				break;
			}
			if (e->key.bool_key == OVSTAGE_CONFIG_EXT_DISABLE_GPU) {
				s->disable_gpu = e->value.bool_value;
				break;
			}
			return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "config.entries[%zu]: unknown bool key %u",
					   i, (unsigned)e->key.bool_key);
		case OVSTAGE_CONFIG_KEY_TYPE_STRING:
			if (e->key.string_key == OVSTAGE_CONFIG_BINARY_PACKAGE_ROOT_PATH) {
				/* Consumed only by the anchor's static loader; accepted and ignored here. */
				if (e->value.string_value.length && !e->value.string_value.ptr)
					return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
							   "config.entries[%zu]: string value has NULL ptr and length %zu",
							   i, e->value.string_value.length);
				break;
			}
			if (e->key.string_key == OVSTAGE_CONFIG_EXT_CUDA_DEVICES) {
				char what[64];
				snprintf(what, sizeof what, "config.entries[%zu] (active CUDA devices)", i);
				if (e->value.string_value.length && !e->value.string_value.ptr)
					return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
							   "%s: string value has NULL ptr and length %zu", what,
							   e->value.string_value.length);
				if (!parse_cuda_devices(e->value.string_value.ptr, e->value.string_value.length, what, s))
					return OVSTAGE_ERROR_INVALID_ARGUMENT;
				break;
			}
			return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
					   "config.entries[%zu]: unknown string key %u", i,
					   (unsigned)e->key.string_key);
		default:
			return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
					   "config.entries[%zu]: key_type %d has no keys", i, (int)e->key_type);
		}
	}
env:;
	uint64_t v;
	bool present;
	if (!env_u64("OVSTAGE_WORKERS", 0, 4096, &v, &present))
		return OVSTAGE_ERROR_INVALID_ARGUMENT;
	if (present)
		s->workers = (int)v;
	if (!env_u64("OVSTAGE_QUEUE_CAPACITY", 2, 1u << 24, &v, &present))
		return OVSTAGE_ERROR_INVALID_ARGUMENT;
	if (present)
		s->queue_capacity = (uint32_t)v;
	if (!env_u64("OVSTAGE_RETENTION", 1, 1024, &v, &present))
		return OVSTAGE_ERROR_INVALID_ARGUMENT;
	if (present)
		s->retention = (uint32_t)v;
	if (!env_u64("OVSTAGE_MAX_UNSEALED_MB", 0, UINT64_MAX >> 20, &v, &present))
		return OVSTAGE_ERROR_INVALID_ARGUMENT;
	if (present)
		s->max_unsealed_mb = v;
	if (!env_u64("OVSTAGE_CHUNK_KB", 1, 1u << 20, &v, &present))
		return OVSTAGE_ERROR_INVALID_ARGUMENT;
	if (present)
		s->chunk_kb = (uint32_t)v;
	if (!env_u64("OVSTAGE_PIN_WORKERS", 0, 1, &v, &present))
		return OVSTAGE_ERROR_INVALID_ARGUMENT;
	if (present)
		s->pin = v != 0;
	const char *cd = getenv("OVSTAGE_CUDA_DEVICES");
	if (cd && *cd && !parse_cuda_devices(cd, strlen(cd), "environment OVSTAGE_CUDA_DEVICES", s))
		return OVSTAGE_ERROR_INVALID_ARGUMENT;
	return OVSTAGE_OK;
}

/* The PCI bus IDs of the active-GPU list, comma-separated, for the workers' placement (jobs.h,
 * near_pci), or NULL when there is no list or no usable GPU. A list names GPUs the process means to
 * use, so asking CUDA here (which initialises it) costs nothing that the first instance would not;
 * without a list nothing touches CUDA at startup. */
static const char *near_devices(const ovs_settings *s, char *buf, size_t n)
{
	if (!s->cuda_device_count || !ovs_gpu_available())
		return NULL;
	size_t used = 0;
	for (uint32_t i = 0; i < s->cuda_device_count; i++) {
		char id[20];
		if (!ovs_gpu_pci_bus_id(s->cuda_devices[i], id, sizeof id))
			continue; /* an ordinal out of range is refused when an instance takes it */
		int w = snprintf(buf + used, n - used, "%s%s", used ? "," : "", id);
		if (w < 0 || (size_t)w >= n - used)
			break;
		used += (size_t)w;
	}
	return used ? buf : NULL;
}

ovstage_api_status_t ovs_runtime_acquire(const ovstage_config_t *config)
{
	ovs_settings s;
	ovstage_api_status_t st = parse_config(config, &s);
	if (st != OVSTAGE_OK)
		return st;
	pthread_mutex_lock(&g_lock);
	if (g_refs > 0) {
		/* Active: a config that asks for a different runtime setting conflicts. */
		if (config && config->entry_count &&
		    (s.workers != g_settings.workers || s.pin != g_settings.pin ||
		     s.queue_capacity != g_settings.queue_capacity ||
		     s.default_hierarchy_model != g_settings.default_hierarchy_model)) {
			pthread_mutex_unlock(&g_lock);
			return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
					   "config conflicts with the active runtime (workers, pinning, queue capacity "
					   "and hierarchy model are fixed while any reference is held)");
		}
		if (config && config->entry_count) { /* per-stage settings: apply to later stages */
			g_settings.retention = s.retention;
			g_settings.max_unsealed_mb = s.max_unsealed_mb;
			g_settings.chunk_kb = s.chunk_kb;
			if (s.cuda_device_count != g_settings.cuda_device_count ||
			    memcmp(s.cuda_devices, g_settings.cuda_devices, s.cuda_device_count * sizeof *s.cuda_devices))
				g_rr = 0; /* a new list: its round-robin starts at its first entry */
			g_settings.cuda_device_count = s.cuda_device_count;
			memcpy(g_settings.cuda_devices, s.cuda_devices, sizeof s.cuda_devices);
		}
		g_refs++;
		pthread_mutex_unlock(&g_lock);
		return OVSTAGE_OK;
	}
	/* GPU settings are process-wide and decided once, at the first use after this (env wins). */
	ovs_gpu_configure(s.disable_gpu, (int64_t)s.gpu_pool_mb);
	jobs_config jc;
	jobs_config_default(&jc);
	jc.workers = s.workers;
	jc.pin = s.pin;
	jc.queue_capacity = s.queue_capacity;
	char near[OVS_CUDA_DEVICE_LIST_MAX * 20];
	jc.near_pci = near_devices(&s, near, sizeof near);
	const char *err = NULL;
	g_sched = jobs_sched_create(&jc, &err);
	if (!g_sched) {
		pthread_mutex_unlock(&g_lock);
		return ovs_err_set(OVSTAGE_ERROR_INTERNAL, "cannot start the job scheduler: %s", err ? err : "?");
	}
	ovs_gpu_sched_attach(g_sched); /* idle workers poll device completions */
	g_settings = s;
	g_rr = 0;
	g_refs = 1;
	pthread_mutex_unlock(&g_lock);
	return OVSTAGE_OK;
}

int ovs_runtime_near_workers(const char *pci_bus_id, int *workers)
{
	pthread_mutex_lock(&g_lock);
	*workers = g_sched ? jobs_sched_workers(g_sched) : 0;
	int near = g_sched && pci_bus_id && *pci_bus_id ? jobs_sched_near_workers_of(g_sched, pci_bus_id) : 0;
	pthread_mutex_unlock(&g_lock);
	return near;
}

ovstage_api_status_t ovs_runtime_release(void)
{
	pthread_mutex_lock(&g_lock);
	if (g_refs == 0) {
		pthread_mutex_unlock(&g_lock);
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "ovstage_shutdown without a matching reference");
	}
	bool last = --g_refs == 0;
	if (last) {
		jobs_sched_destroy(g_sched);
		g_sched = NULL;
	}
	pthread_mutex_unlock(&g_lock);
	/* Outside the lock: draining the log may call a callback that calls back into the API. */
	if (last)
		ovs_log_shutdown();
	return OVSTAGE_OK;
}

jobs_sched *ovs_runtime_sched(void)
{
	return g_sched;
}

const ovs_settings *ovs_runtime_settings(void)
{
	return &g_settings;
}

uint32_t ovs_runtime_queue_capacity(void)
{
	return g_settings.queue_capacity;
}

int ovs_runtime_next_cuda_device(void)
{
	pthread_mutex_lock(&g_lock);
	int d = -1;
	if (g_settings.cuda_device_count)
		d = g_settings.cuda_devices[g_rr++ % g_settings.cuda_device_count];
	pthread_mutex_unlock(&g_lock);
	return d;
}

bool ovs_runtime_active(void)
{
	pthread_mutex_lock(&g_lock);
	bool a = g_refs > 0;
	pthread_mutex_unlock(&g_lock);
	return a;
}

OVSTAGE_API ovstage_api_status_t ovstage_initialize(const ovstage_config_t *config)
{
	ovs_err_clear();
	return ovs_runtime_acquire(config);
}

OVSTAGE_API ovstage_api_status_t ovstage_shutdown(void)
{
	ovs_err_clear();
	return ovs_runtime_release();
}
