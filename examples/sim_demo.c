/*
 * sim_demo.c — a simulation feeding a training loop through the stage, with every value checked.
 *
 * E environments x B bodies are E*B prims /World/env_<e>/body_<b>. Each simulation step s (1..S)
 * writes two columns at ordinal s in one write_attributes batch:
 *   pose      float32 x 7 (position + quaternion), a 1-D tensor with lanes 7
 *   velocity  float32 x 6 (linear + angular), written in the (N, 6) lanes-1 convenience form
 * Every K-th step (--sparse-every) is sparse: only the environments that "reset" at that step
 * (chosen by a hash of (env, step)) are written, through a mask; the other prims keep their values.
 *
 * Threads:
 *   P producers  producer p simulates steps p+1, p+1+P, ...: writes at different ordinals run
 *                concurrently; each waits for its write op (its buffers must live until then).
 *   sealer       advances the global write floor over the longest prefix of steps whose writes
 *                were all submitted (a floor advance is ordered after the writes submitted below it;
 *                a write submitted after the floor passed its ordinal would be rejected).
 *   consumer     a training loop: polls the global floor F; latest read of both columns at F; every
 *                Nth poll (--range-every) a change-range read [last range end + 1, F]. It checks
 *                every value it gets against the value function, and that exactly the expected prims
 *                are present (latest) or changed (range).
 *
 * Every value is value(column, prim, lane, step), an exact float; for a prim as of ordinal F the
 * expected step is the last step <= F that wrote it (dense, or sparse with its environment reset).
 * This implementation answers a latest read at F and a range read ending at F with the values as of
 * F (it keeps the last --retention sealed versions per column; a latest read whose version has left
 * retention reads the newest version, as 0.2.1, and is checked as of its groups' ordinal; a range
 * read whose history has left it fails with OUT_OF_RANGE and the consumer rebases the range).
 *
 * --device cuda keeps both columns on CUDA device 0: the producers upload their values to device
 * buffers on their own non-blocking streams and write them with cuda_sync naming that stream (the
 * call returns while the upload runs; sparse steps gather on the GPU), and the consumer copies each
 * device group to the host after its ready event and checks it there. Without a GPU (or without
 * the CUDA backend) it says why and exits 0.
 *
 * Output: a progress line on stderr (at most 4 updates a second; --quiet turns it off) and a summary
 * table on stdout. Exit status 0 only if every op succeeded and no value mismatched.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ovstage/ovstage_ext.h>

#include "example_utils.h"
#include "sim_demo_device.h"

#define POSE_LANES 7
#define VEL_LANES 6
#define COL_POSE 0
#define COL_VEL 1

/* ---- options --------------------------------------------------------------------------------- */

typedef struct options {
	uint32_t envs, bodies;
	uint64_t steps;
	uint32_t producers;
	uint32_t sparse_every; /* 0 = never sparse */
	uint32_t range_every;  /* a range read every Nth consumer poll that saw a new floor */
	uint64_t retention;    /* sealed versions kept per column */
	bool quiet;
	bool cuda;             /* --device cuda: the columns live on CUDA device 0 */
} options;

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [--envs E] [--bodies B] [--steps S] [--producers P] [--sparse-every K]\n"
		"          [--range-every N] [--retention R] [--device cpu|cuda] [--quiet]\n"
		"  defaults: --envs 256 --bodies 16 --steps 2000 --producers 2 --sparse-every 10\n"
		"            --range-every 4 --retention 64 (--sparse-every 0: no sparse steps)\n",
		argv0);
}

static bool parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

static bool parse_options(int argc, char **argv, options *o)
{
	*o = (options){ 256, 16, 2000, 2, 10, 4, 64, false, false };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		uint64_t v;
		if (!strcmp(a, "--quiet")) {
			o->quiet = true;
			continue;
		}
		if (!strcmp(a, "--help") || !strcmp(a, "-h") || i + 1 >= argc)
			return false;
		const char *val = argv[++i];
		if (!strcmp(a, "--envs") && parse_u64(val, 1, 1u << 20, &v))
			o->envs = (uint32_t)v;
		else if (!strcmp(a, "--bodies") && parse_u64(val, 1, 1u << 12, &v))
			o->bodies = (uint32_t)v;
		else if (!strcmp(a, "--steps") && parse_u64(val, 1, 100000000, &v))
			o->steps = v;
		else if (!strcmp(a, "--producers") && parse_u64(val, 1, 64, &v))
			o->producers = (uint32_t)v;
		else if (!strcmp(a, "--sparse-every") && parse_u64(val, 0, 1u << 30, &v))
			o->sparse_every = (uint32_t)v;
		else if (!strcmp(a, "--range-every") && parse_u64(val, 1, 1u << 30, &v))
			o->range_every = (uint32_t)v;
		else if (!strcmp(a, "--retention") && parse_u64(val, 2, 1u << 20, &v))
			o->retention = v;
		else if (!strcmp(a, "--device") && (!strcmp(val, "cpu") || !strcmp(val, "cuda")))
			o->cuda = !strcmp(val, "cuda");
		else
			return false;
	}
	if ((uint64_t)o->envs * o->bodies > (1u << 24)) {
		fprintf(stderr, "envs x bodies must be at most %u prims\n", 1u << 24);
		return false;
	}
	return true;
}

/* ---- the deterministic simulation ------------------------------------------------------------- */

static inline uint32_t mix(uint32_t h)
{
	h ^= h >> 16;
	h *= 0x7feb352dU;
	h ^= h >> 15;
	h *= 0x846ca68bU;
	h ^= h >> 16;
	return h;
}

/* Lane `lane` of column `col` of prim `prim` written at step `step`: a 24-bit integer scaled by
 * 2^-12, exact in float32, so values compare with ==. The integer is the top 24 bits of a sum of odd
 * multiples of the four coordinates modulo 2^32. A value of another step (fewer than 2^22 apart),
 * prim (fewer than 2^21 apart), lane or column differs from the expected one: for those differences
 * d, d times its multiplier is at least 256 away from 0 modulo 2^32 (checked exhaustively). It is
 * linear, not a hash, on purpose: the compiler vectorises the fill, which at 65,536 prims costs a
 * quarter of what two hashes per value did (1.3 ms of each producer's step here: the demo measured its
 * own arithmetic, not the stage; docs/performance.md, session 13). */
static inline float value_of(int col, uint32_t prim, uint32_t lane, uint64_t step)
{
	uint32_t h = prim * 0x9e3779b1U + lane * 0x85ebca77U + (uint32_t)col * 0xc2b2ae3dU + (uint32_t)step * 0x27d4eb2fU;
	return (float)(h >> 8) * (1.0f / 4096.0f);
}

static inline bool is_sparse(const options *o, uint64_t step)
{
	return o->sparse_every && step % o->sparse_every == 0;
}

/* Does environment e reset (get written) at sparse step `step`? About one in four do. */
static inline bool resets(uint32_t e, uint64_t step)
{
	return (mix(e * 0x85ebca6bU ^ mix((uint32_t)step ^ (uint32_t)(step >> 32))) & 3u) == 0;
}

static inline bool writes_env(const options *o, uint32_t e, uint64_t step)
{
	return !is_sparse(o, step) || resets(e, step);
}

/* The last step <= n that wrote environment e's prims (0 = never written). */
static uint64_t expected_step(const options *o, uint32_t e, uint64_t n)
{
	for (uint64_t m = n; m >= 1; m--)
		if (writes_env(o, e, m))
			return m;
	return 0;
}

/* Did any step in [a, b] write environment e? */
static bool changed_in(const options *o, uint32_t e, uint64_t a, uint64_t b)
{
	for (uint64_t m = a; m <= b; m++)
		if (writes_env(o, e, m))
			return true;
	return false;
}

/* ---- clocks, latencies, memory ---------------------------------------------------------------- */

static inline double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
	nanosleep(&ts, NULL);
}

typedef struct samples {
	double *v;
	size_t n, cap;
} samples;

static void sample_add(samples *s, double x)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		double *nv = realloc(s->v, cap * sizeof *nv);
		if (!nv) {
			fprintf(stderr, "out of memory\n");
			exit(EXIT_FAILURE);
		}
		s->v = nv;
		s->cap = cap;
	}
	s->v[s->n++] = x;
}

static void sample_merge(samples *into, const samples *from)
{
	for (size_t i = 0; i < from->n; i++)
		sample_add(into, from->v[i]);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Nearest-rank percentile (q in [0, 1]) after sorting; NAN when empty. */
static double percentile(samples *s, double q)
{
	if (!s->n)
		return 0.0 / 0.0;
	qsort(s->v, s->n, sizeof *s->v, cmp_double);
	size_t k = (size_t)(q * (double)s->n + 0.999999);
	if (k < 1)
		k = 1;
	if (k > s->n)
		k = s->n;
	return s->v[k - 1];
}

/* A field of /proc/self/status in kB (VmRSS, VmHWM), or -1. */
static long proc_status_kb(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return -1;
	char line[256];
	long kb = -1;
	size_t fl = strlen(field);
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, field, fl) && line[fl] == ':') {
			kb = strtol(line + fl + 1, NULL, 10);
			break;
		}
	fclose(f);
	return kb;
}

/* ---- shared state ----------------------------------------------------------------------------- */

typedef struct demo {
	options o;
	uint32_t n;                      /* prims = envs * bodies */
	ovstage_instance_t *st;
	path_dictionary_instance_t *pd;
	ovx_primpath_list_t list;        /* all prims, prim index = position */
	ovstage_query_handle_t q;
	ovx_token_t cols[2];             /* pose, velocity */

	/* sealer hand-off: submitted[s] once every write at step s was accepted */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint8_t *submitted;

	/* failure: the first message wins; everyone stops */
	_Atomic bool abort;
	_Atomic bool error_set;
	char error[1024];

	/* progress */
	_Atomic uint64_t sealed;         /* the sealer's floor */
	_Atomic uint64_t consumer_floor; /* the last floor the consumer read at */
	_Atomic uint64_t values_checked;
	_Atomic uint64_t mismatches;
	_Atomic uint64_t latest_reads, range_reads;
	_Atomic bool done;               /* consumer finished */

	/* results */
	double t_start, t_sealed;        /* producers start; last step sealed */
	samples write_lat, seal_lat, read_lat, range_lat;
	_Atomic uint64_t bytes_written, dense_steps, sparse_steps;
	uint64_t polls, stale_retries, ranges_rebased;
	char first_mismatch[256];
} demo;

static void fail(demo *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(demo *d, const char *fmt, ...)
{
	bool expected = false;
	if (atomic_compare_exchange_strong(&d->error_set, &expected, true)) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(d->error, sizeof d->error, fmt, ap);
		va_end(ap);
	}
	atomic_store(&d->abort, true);
	pthread_mutex_lock(&d->lock);
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

/* Waits for an op and releases it. On failure writes the root cause (first failed id) to msg. */
static bool finish_op(demo *d, ovstage_op_id_t op, char *msg, size_t msglen)
{
	ovstage_op_wait_result_t wr;
	ovstage_api_status_t s = ovstage_wait_op(d->st, op, OVSTAGE_TIMEOUT_INFINITE, &wr);
	bool ok = s == OVSTAGE_OK && wr.error_op_id_count == 0;
	if (!ok) {
		ovx_string_t m = { NULL, 0 };
		if (wr.error_op_id_count)
			m = ovstage_get_last_op_error(d->st, wr.error_op_ids[0]);
		snprintf(msg, msglen, "status %s: %.*s", ovstage_get_error_string(d->st, s), (int)m.length,
			 m.ptr ? m.ptr : "");
	}
	ovstage_release_op(d->st, op);
	return ok;
}

static void enqueue_error(demo *d, const char *what, ovstage_api_status_t s)
{
	ovx_string_t m = ovstage_get_last_error();
	fail(d, "%s rejected (%s): %.*s", what, ovstage_get_error_string(d->st, s), (int)m.length, m.ptr ? m.ptr : "");
}

/* ---- producers -------------------------------------------------------------------------------- */

typedef struct producer {
	demo *d;
	uint32_t index;
	samples lat;
} producer;

static void *producer_main(void *arg)
{
	producer *p = arg;
	demo *d = p->d;
	const options *o = &d->o;
	uint32_t n = d->n;
	size_t mask_words = ((size_t)n + 63) / 64;
	float *pose = malloc((size_t)n * POSE_LANES * sizeof *pose);
	float *vel = malloc((size_t)n * VEL_LANES * sizeof *vel);
	uint64_t *mask = malloc(mask_words * sizeof *mask);
	size_t pose_bytes = (size_t)n * POSE_LANES * sizeof *pose, vel_bytes = (size_t)n * VEL_LANES * sizeof *vel;
	/* --device cuda: the tensors are device copies, uploaded on this producer's stream */
	void *dpose = NULL, *dvel = NULL, *stream = NULL;
	if (o->cuda && (!(dpose = demo_cuda_alloc(pose_bytes)) || !(dvel = demo_cuda_alloc(vel_bytes)) ||
			!(stream = demo_cuda_stream()))) {
		fail(d, "producer: cannot allocate device buffers or a stream");
		goto out;
	}
	if (!pose || !vel || !mask) {
		fail(d, "producer: out of memory");
		goto out;
	}
	int64_t pose_shape[1] = { n };
	int64_t vel_shape[2] = { n, VEL_LANES };
	DLTensor t[2];
	memset(t, 0, sizeof t);
	t[0].data = pose; /* canonical form: 1-D, one row per prim, lanes = tuple width */
	t[0].device.device_type = kDLCPU;
	t[0].ndim = 1;
	t[0].dtype = (DLDataType){ kDLFloat, 32, POSE_LANES };
	t[0].shape = pose_shape;
	t[1].data = vel; /* convenience form: (N, 6) with lanes 1, stored as lanes 6 */
	t[1].device.device_type = kDLCPU;
	t[1].ndim = 2;
	t[1].dtype = (DLDataType){ kDLFloat, 32, 1 };
	t[1].shape = vel_shape;
	if (o->cuda) {
		t[0].data = dpose;
		t[1].data = dvel;
		t[0].device.device_type = t[1].device.device_type = kDLCUDA;
	}

	for (uint64_t s = p->index + 1; s <= o->steps && !atomic_load(&d->abort); s += o->producers) {
		bool sparse = is_sparse(o, s);
		uint64_t rows = 0;
		if (sparse)
			memset(mask, 0, mask_words * sizeof *mask);
		for (uint32_t e = 0; e < o->envs; e++) {
			if (!writes_env(o, e, s))
				continue; /* masked out: its rows in the tensors are ignored */
			for (uint32_t b = 0; b < o->bodies; b++) {
				uint32_t prim = e * o->bodies + b;
				for (uint32_t l = 0; l < POSE_LANES; l++)
					pose[(size_t)prim * POSE_LANES + l] = value_of(COL_POSE, prim, l, s);
				for (uint32_t l = 0; l < VEL_LANES; l++)
					vel[(size_t)prim * VEL_LANES + l] = value_of(COL_VEL, prim, l, s);
				if (sparse)
					mask[prim / 64] |= (uint64_t)1 << (prim % 64);
				rows++;
			}
		}
		/* pageable sources: the copies are staged before the calls return (the host arrays are free) */
		if (o->cuda && (!demo_cuda_upload(dpose, pose, pose_bytes, stream) ||
				!demo_cuda_upload(dvel, vel, vel_bytes, stream))) {
			fail(d, "producer: upload at step %" PRIu64 " failed", s);
			break;
		}
		ovstage_attribute_write_t w[2];
		memset(w, 0, sizeof w);
		for (int c = 0; c < 2; c++) {
			w[c].attribute.token = d->cols[c];
			w[c].data.tensors = &t[c];
			w[c].data.tensor_count = 1;
			w[c].data.cuda_sync.stream = (uintptr_t)stream; /* 0 (nothing outstanding) on the CPU */
			if (sparse) {
				w[c].data.mask = mask;
				w[c].data.count = n;
			}
		}
		double t0 = now_s();
		ovstage_enqueue_result_t e;
		for (;;) {
			e = ovstage_write_attributes(d->st, d->q, w, 2, s, OVSTAGE_PRIM_MODE_UPSERT);
			if (e.status != OVSTAGE_ERROR_QUEUE_FULL)
				break;
			sleep_us(50); /* back-pressure: let the queue drain */
		}
		if (e.status != OVSTAGE_OK) {
			enqueue_error(d, "write_attributes", e.status);
			break;
		}
		/* The sealer may seal s from now on: the floor advance is ordered after this write. */
		pthread_mutex_lock(&d->lock);
		d->submitted[s] = 1;
		pthread_cond_broadcast(&d->cond);
		pthread_mutex_unlock(&d->lock);
		char msg[700];
		/* The tensors must stay valid until the op completes: wait before refilling them. */
		if (!finish_op(d, e.op_index, msg, sizeof msg)) {
			fail(d, "write at step %" PRIu64 " failed: %s", s, msg);
			break;
		}
		sample_add(&p->lat, now_s() - t0);
		atomic_fetch_add(&d->bytes_written, rows * (POSE_LANES + VEL_LANES) * sizeof(float));
		atomic_fetch_add(sparse ? &d->sparse_steps : &d->dense_steps, 1);
	}
out:
	free(pose);
	free(vel);
	free(mask);
	demo_cuda_free(dpose);
	demo_cuda_free(dvel);
	demo_cuda_stream_destroy(stream);
	return NULL;
}

/* ---- sealer ----------------------------------------------------------------------------------- */

static void *sealer_main(void *arg)
{
	demo *d = arg;
	uint64_t sealed = 0;
	while (sealed < d->o.steps) {
		pthread_mutex_lock(&d->lock);
		while (!d->submitted[sealed + 1] && !atomic_load(&d->abort))
			pthread_cond_wait(&d->cond, &d->lock);
		uint64_t target = sealed;
		while (target < d->o.steps && d->submitted[target + 1])
			target++;
		pthread_mutex_unlock(&d->lock);
		if (atomic_load(&d->abort))
			break;
		ovstage_write_floor_desc_t desc = { target, OVSTAGE_SCOPE_ALL, NULL, 0 };
		double t0 = now_s();
		ovstage_enqueue_result_t e = ovstage_advance_write_floor(d->st, &desc);
		if (e.status != OVSTAGE_OK) {
			enqueue_error(d, "advance_write_floor", e.status);
			break;
		}
		char msg[700];
		if (!finish_op(d, e.op_index, msg, sizeof msg)) {
			fail(d, "advance_write_floor(%" PRIu64 ") failed: %s", target, msg);
			break;
		}
		sample_add(&d->seal_lat, now_s() - t0);
		sealed = target;
		atomic_store(&d->sealed, sealed);
	}
	d->t_sealed = now_s();
	return NULL;
}

/* ---- consumer --------------------------------------------------------------------------------- */

typedef struct consumer {
	demo *d;
	uint64_t *env_step;   /* latest: expected step per environment */
	uint8_t *env_changed; /* range: did the environment change in the range */
	uint8_t *seen;        /* per prim: covered by a group of the current column */
	uint64_t mismatches, checked;
	void *stream;         /* --device cuda: where device groups are copied to the host */
	float *host;          /* that copy */
	size_t host_cap;      /* its capacity in bytes */
} consumer;

static void mismatch(consumer *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mismatch(consumer *c, const char *fmt, ...)
{
	if (!c->mismatches++ && !c->d->first_mismatch[0]) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(c->d->first_mismatch, sizeof c->d->first_mismatch, fmt, ap);
		va_end(ap);
	}
}

static uint64_t poll_floor(demo *d, bool *ok)
{
	ovstage_ordinal_query_handle_t h = OVSTAGE_INVALID_ORDINAL_QUERY_HANDLE;
	ovx_string_or_token_t global = { 0, { NULL, 0 } };
	ovstage_enqueue_result_t e = ovstage_get_attribute_write_floor(d->st, global, &h);
	*ok = false;
	if (e.status != OVSTAGE_OK) {
		enqueue_error(d, "get_attribute_write_floor", e.status);
		return 0;
	}
	uint64_t floor = 0;
	ovstage_api_status_t s = ovstage_fetch_ordinal(d->st, h, OVSTAGE_TIMEOUT_INFINITE, &floor);
	char msg[700];
	bool op_ok = finish_op(d, e.op_index, msg, sizeof msg);
	ovstage_enqueue_result_t r = ovstage_release_ordinal_query(d->st, h);
	if (r.status != OVSTAGE_OK) {
		enqueue_error(d, "release_ordinal_query", r.status);
		return 0;
	}
	char msg2[700];
	if (!finish_op(d, r.op_index, msg2, sizeof msg2)) {
		fail(d, "release_ordinal_query failed: %s", msg2);
		return 0;
	}
	if (s != OVSTAGE_OK || !op_ok) {
		fail(d, "polling the global floor failed (%s): %s", ovstage_get_error_string(d->st, s), msg);
		return 0;
	}
	*ok = true;
	return floor;
}

/* Checks one value group of column col against the state as of `at`. */
/* The group's values where the host can read them: its tensor, or a device group copied to the
 * host after its ready event. NULL (a mismatch recorded) on failure. */
static const float *group_values(consumer *c, const ovstage_read_group_t *g, const DLTensor *t, uint32_t lanes)
{
	const void *p = (const char *)t->data + t->byte_offset;
	if (t->device.device_type != kDLCUDA)
		return p;
	size_t bytes = (size_t)t->shape[0] * lanes * sizeof(float);
	if (bytes > c->host_cap) {
		float *h = realloc(c->host, bytes);
		if (!h) {
			mismatch(c, "out of memory copying a device group");
			return NULL;
		}
		c->host = h;
		c->host_cap = bytes;
	}
	if (!c->stream || !demo_cuda_download(c->host, p, bytes, g->data.cuda_sync.wait_event, c->stream)) {
		mismatch(c, "copying a device group to the host failed");
		return NULL;
	}
	return c->host;
}

static void check_group(consumer *c, const ovstage_read_group_t *g, int col, uint64_t at, bool range)
{
	demo *d = c->d;
	const options *o = &d->o;
	uint32_t lanes = col == COL_POSE ? POSE_LANES : VEL_LANES;
	const DLTensor *t = g->data.tensor_count == 1 ? &g->data.tensors[0] : NULL;
	if (!t || t->ndim != 1 || t->dtype.code != kDLFloat || t->dtype.bits != 32 || t->dtype.lanes != lanes ||
	    (t->strides && t->strides[0] != 1)) {
		mismatch(c, "column %d: unexpected group layout", col);
		return;
	}
	if (g->ordinal > at)
		mismatch(c, "column %d: group ordinal %" PRIu64 " above the read's end %" PRIu64, col, g->ordinal, at);
	const float *base = group_values(c, g, t, lanes);
	if (!base)
		return;
	for (uint32_t i = 0; i < g->prims.count; i++) {
		/* prims.list is the query's pinned copy of our list: positions are prim indices. */
		uint32_t prim = g->prims.index_map ? g->prims.index_map[i] : g->prims.offset + i;
		uint32_t row = g->data.index_map ? g->data.index_map[i] : i;
		if (prim >= d->n || (int64_t)row >= t->shape[0]) {
			mismatch(c, "column %d: entry %u out of bounds (prim %u, row %u)", col, i, prim, row);
			continue;
		}
		if (c->seen[prim]++) {
			mismatch(c, "column %d: prim %u reported twice", col, prim);
			continue;
		}
		uint32_t e = prim / o->bodies;
		uint64_t step = c->env_step[e];
		if (!step || (range && !c->env_changed[e])) {
			mismatch(c, "column %d: prim %u reported at %" PRIu64 " but %s", col, prim, at,
				 step ? "did not change in the range" : "was never written");
			continue;
		}
		const float *v = base + (size_t)row * lanes;
		for (uint32_t l = 0; l < lanes; l++) {
			float want = value_of(col, prim, l, step);
			if (v[l] != want)
				mismatch(c, "column %d prim %u lane %u as of %" PRIu64 ": got %g, want %g (step %" PRIu64
					 ")", col, prim, l, at, (double)v[l], (double)want, step);
		}
		c->checked += lanes;
	}
}

/* Reads both columns: latest at `at` (range = false) or the changes in [a, at]. Returns the read's
 * status; OUT_OF_RANGE now and then for a range read (its history left retention); a latest read
 * never fails for that (the newest version answers, and its groups say which). */
static ovstage_api_status_t read_and_check(consumer *c, bool range, uint64_t a, uint64_t at, double *latency)
{
	demo *d = c->d;
	const options *o = &d->o;
	for (uint32_t e = 0; e < o->envs; e++) {
		c->env_step[e] = expected_step(o, e, at);
		if (range)
			c->env_changed[e] = changed_in(o, e, a, at);
	}
	ovstage_ordinal_range_t rg = { range ? a : 0, at, range };
	ovstage_read_handle_t rh = OVSTAGE_INVALID_READ_HANDLE;
	double t0 = now_s();
	ovstage_enqueue_result_t e = ovstage_read_attributes(d->st, d->q, d->cols, 2, rg, &rh);
	if (e.status == OVSTAGE_ERROR_OUT_OF_RANGE)
		return e.status; /* refused at the call: a read through a ready query is validated there */
	if (e.status != OVSTAGE_OK) {
		enqueue_error(d, "read_attributes", e.status);
		return e.status;
	}
	char msg[700];
	bool ok = finish_op(d, e.op_index, msg, sizeof msg);
	*latency = now_s() - t0;
	ovstage_read_group_t groups[8];
	size_t ng = 0;
	ovstage_api_status_t s;
	/* Hold every group while checking (zero-copy views of sealed versions), then release. */
	while (ng < 8 && (s = ovstage_fetch_read_next(d->st, rh, OVSTAGE_TIMEOUT_INFINITE, &groups[ng])) == OVSTAGE_OK)
		ng++;
	if (ng == 8) {
		fail(d, "read at %" PRIu64 " returned more than 8 groups", at);
		s = OVSTAGE_ERROR_INTERNAL;
	}
	if (ok && s == OVSTAGE_ERROR_END_OF_ITERATION) {
		uint64_t steps_at = at; /* the ordinal c->env_step was computed for */
		for (int col = 0; col < 2; col++) {
			memset(c->seen, 0, d->n);
			/* A latest read whose state as of `at` left retention before it ran answers with the
			 * newest version (as 0.2.1): check that column against its group's ordinal. */
			uint64_t as_of = at;
			for (size_t k = 0; !range && k < ng; k++)
				if (groups[k].attribute == d->cols[col] && !groups[k].is_delete && groups[k].ordinal > as_of)
					as_of = groups[k].ordinal;
			if (as_of != steps_at) {
				for (uint32_t e = 0; e < o->envs; e++)
					c->env_step[e] = expected_step(o, e, as_of);
				steps_at = as_of;
			}
			for (size_t k = 0; k < ng; k++) {
				if (groups[k].attribute != d->cols[col])
					continue;
				if (groups[k].is_delete)
					mismatch(c, "column %d: unexpected tombstone group", col);
				else
					check_group(c, &groups[k], col, as_of, range);
			}
			/* every prim that should be there must have been reported */
			for (uint32_t prim = 0; prim < d->n; prim++) {
				uint32_t env = prim / o->bodies;
				bool want = c->env_step[env] && (!range || c->env_changed[env]);
				if (want && !c->seen[prim])
					mismatch(c, "column %d: prim %u missing from the %s read at %" PRIu64, col, prim,
						 range ? "range" : "latest", as_of);
			}
		}
		s = OVSTAGE_OK;
	} else if (s == OVSTAGE_OK || s == OVSTAGE_ERROR_END_OF_ITERATION) {
		s = OVSTAGE_ERROR_OP_FAILED; /* the op reported a failure the fetch did not */
	}
	for (size_t k = 0; k < ng; k++)
		check(ovstage_release_group(d->st, &groups[k]), "release_group");
	ovstage_enqueue_result_t r = ovstage_release_read(d->st, rh);
	char msg2[700];
	if (r.status != OVSTAGE_OK)
		enqueue_error(d, "release_read", r.status);
	else if (!finish_op(d, r.op_index, msg2, sizeof msg2))
		fail(d, "release_read failed: %s", msg2);
	if (s != OVSTAGE_OK && s != OVSTAGE_ERROR_OUT_OF_RANGE)
		fail(d, "%s read at %" PRIu64 " failed (%s): %s", range ? "range" : "latest", at,
		     ovstage_get_error_string(d->st, s), msg);
	atomic_fetch_add(&d->values_checked, c->checked);
	atomic_fetch_add(&d->mismatches, c->mismatches);
	c->checked = 0;
	c->mismatches = 0;
	return s;
}

static void *consumer_main(void *arg)
{
	demo *d = arg;
	const options *o = &d->o;
	consumer c = { d, calloc(o->envs, sizeof(uint64_t)), calloc(o->envs, 1), calloc(d->n, 1), 0, 0,
		       o->cuda ? demo_cuda_stream() : NULL, NULL, 0 };
	if (!c.env_step || !c.env_changed || !c.seen || (o->cuda && !c.stream)) {
		fail(d, "consumer: out of memory");
		goto out;
	}
	uint64_t last = 0, range_last = 0, new_floors = 0;
	while (!atomic_load(&d->abort)) {
		bool ok;
		uint64_t floor = poll_floor(d, &ok);
		if (!ok)
			break;
		d->polls++;
		if (floor == last) {
			if (floor >= o->steps)
				break;
			sleep_us(100); /* nothing new sealed yet */
			continue;
		}
		double lat;
		ovstage_api_status_t s = read_and_check(&c, false, 0, floor, &lat);
		if (s == OVSTAGE_ERROR_OUT_OF_RANGE) {
			d->stale_retries++; /* sealed past retention before the read ran: re-poll */
			continue;
		}
		if (s != OVSTAGE_OK)
			break;
		sample_add(&d->read_lat, lat);
		atomic_fetch_add(&d->latest_reads, 1);
		last = floor;
		atomic_store(&d->consumer_floor, floor);
		/* every Nth new floor, and at the end: what changed since the last range read */
		if (++new_floors % o->range_every == 0 || floor >= o->steps) {
			s = read_and_check(&c, true, range_last + 1, floor, &lat);
			if (s == OVSTAGE_ERROR_OUT_OF_RANGE) {
				d->ranges_rebased++; /* history reclaimed: the latest read above is our new base */
			} else if (s != OVSTAGE_OK) {
				break;
			} else {
				sample_add(&d->range_lat, lat);
				atomic_fetch_add(&d->range_reads, 1);
			}
			range_last = floor;
		}
	}
out:
	free(c.env_step);
	free(c.env_changed);
	free(c.seen);
	free(c.host);
	demo_cuda_stream_destroy(c.stream);
	atomic_store(&d->done, true);
	return NULL;
}

/* ---- setup, progress, summary ----------------------------------------------------------------- */

static void setup(demo *d)
{
	ovstage_instance_desc_t desc = { "demo.sim" };
	check(ovstage_create_instance(&desc, &d->st), "create_instance");
	d->pd = ovstage_get_path_dictionary(d->st);
	ovx_string_t names[2] = { literal_to_ovx_string("pose"), literal_to_ovx_string("velocity") };
	check_ovx(d->pd, path_dictionary_create_tokens_from_strings(d->pd, names, 2, d->cols), "create_tokens");
	ovx_string_t *paths = malloc((size_t)d->n * sizeof *paths);
	char *text = malloc((size_t)d->n * 40);
	if (!paths || !text) {
		fprintf(stderr, "out of memory\n");
		exit(EXIT_FAILURE);
	}
	for (uint32_t e = 0, k = 0; e < d->o.envs; e++)
		for (uint32_t b = 0; b < d->o.bodies; b++, k++) {
			char *p = text + (size_t)k * 40;
			int len = snprintf(p, 40, "/World/env_%u/body_%u", e, b);
			paths[k].ptr = p;
			paths[k].length = (size_t)len;
		}
	check_ovx(d->pd, path_dictionary_create_path_list_from_strings(d->pd, paths, d->n, &d->list),
		  "create_path_list");
	free(paths);
	free(text);
	check(ovstage_query_from_path_list(d->st, d->list, &d->q), "query_from_path_list");
}

static void teardown(demo *d)
{
	wait_op(d->st, ovstage_release_query(d->st, d->q), "release_query");
	check_ovx(d->pd, path_dictionary_release_path_list_reference(d->pd, d->list), "release_path_list");
	check(ovstage_destroy_instance(d->st), "destroy_instance");
}

static void progress(demo *d, bool tty, bool final)
{
	double el = now_s() - d->t_start;
	uint64_t sealed = atomic_load(&d->sealed);
	fprintf(stderr, "%s  sealed %" PRIu64 "/%" PRIu64 " steps  %.0f steps/s  consumer at %" PRIu64
		"  reads %" PRIu64 "+%" PRIu64 "  checked %.1fM values  mismatches %" PRIu64 "%s",
		tty ? "\r" : "", sealed, d->o.steps, el > 0 ? (double)sealed / el : 0.0,
		atomic_load(&d->consumer_floor), atomic_load(&d->latest_reads), atomic_load(&d->range_reads),
		(double)atomic_load(&d->values_checked) * 1e-6, atomic_load(&d->mismatches),
		tty ? (final ? "\n" : "\033[K") : "\n");
	fflush(stderr);
}

static void row(const char *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void row(const char *k, const char *fmt, ...)
{
	char v[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v, sizeof v, fmt, ap);
	va_end(ap);
	printf("  %-30s %s\n", k, v);
}

static void lat_row(const char *k, samples *s)
{
	if (!s->n) {
		row(k, "-");
		return;
	}
	double p50 = percentile(s, 0.50) * 1e6, p99 = percentile(s, 0.99) * 1e6;
	row(k, "%9.1f / %9.1f us   (%zu ops)", p50, p99, s->n);
}

int main(int argc, char **argv)
{
	demo *d = calloc(1, sizeof *d);
	if (!d)
		return EXIT_FAILURE;
	if (!parse_options(argc, argv, &d->o)) {
		usage(argv[0]);
		free(d);
		return 2;
	}
	const options *o = &d->o;
	d->n = o->envs * o->bodies;
	char why[256];
	if (o->cuda && !demo_cuda_usable(why, sizeof why)) {
		printf("sim demo --device cuda: skipped: %s\n", why);
		free(d);
		return EXIT_SUCCESS;
	}
	long rss_start = proc_status_kb("VmRSS");

	/* Keep enough sealed versions per column for the consumer's reads to find the state they ask for. */
	ovstage_config_entry_t entry = ovstage_config_entry_uint64(OVSTAGE_CONFIG_EXT_RETENTION, o->retention);
	ovstage_config_t config = { &entry, 1 };
	check(ovstage_initialize(&config), "initialize");
	setup(d);
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	d->submitted = calloc(o->steps + 2, 1);
	producer *prods = calloc(o->producers, sizeof *prods);
	pthread_t *pt = calloc(o->producers, sizeof *pt);
	if (!d->submitted || !prods || !pt) {
		fprintf(stderr, "out of memory\n");
		return EXIT_FAILURE;
	}

	bool show = !o->quiet;
	bool tty = isatty(STDERR_FILENO);
	if (show)
		fprintf(stderr, "sim demo: %u envs x %u bodies = %u prims, %" PRIu64 " steps, %u producers, columns on %s\n",
			o->envs, o->bodies, d->n, o->steps, o->producers, o->cuda ? "CUDA device 0" : "the CPU");
	d->t_start = now_s();
	pthread_t sealer, cons;
	bool started = !pthread_create(&sealer, NULL, sealer_main, d) && !pthread_create(&cons, NULL, consumer_main, d);
	for (uint32_t i = 0; started && i < o->producers; i++) {
		prods[i].d = d;
		prods[i].index = i;
		started = !pthread_create(&pt[i], NULL, producer_main, &prods[i]);
	}
	if (!started) {
		fprintf(stderr, "pthread_create failed\n");
		return EXIT_FAILURE;
	}
	/* progress: 4 updates a second on a terminal, one a second otherwise */
	double period = tty ? 0.25 : 1.0, next = now_s() + period;
	ovstage_ext_memory_stats_t mem, mem_peak = { 0 };
	while (!atomic_load(&d->done)) {
		sleep_us(10000);
		if (ovstage_ext_get_memory_stats(d->st, &mem) == OVSTAGE_OK) {
			if (mem.buffer_bytes > mem_peak.buffer_bytes)
				mem_peak.buffer_bytes = mem.buffer_bytes;
			if (mem.unsealed_bytes > mem_peak.unsealed_bytes)
				mem_peak.unsealed_bytes = mem.unsealed_bytes;
		}
		if (show && now_s() >= next) {
			progress(d, tty, false);
			next += period;
		}
	}
	for (uint32_t i = 0; i < o->producers; i++) {
		pthread_join(pt[i], NULL);
		sample_merge(&d->write_lat, &prods[i].lat);
		free(prods[i].lat.v);
	}
	pthread_join(sealer, NULL);
	pthread_join(cons, NULL);
	double t_end = now_s();
	if (show)
		progress(d, tty, true);
	long rss_end = proc_status_kb("VmRSS"), hwm = proc_status_kb("VmHWM");
	if (ovstage_ext_get_memory_stats(d->st, &mem) != OVSTAGE_OK)
		memset(&mem, 0, sizeof mem);

	double wall = (d->t_sealed > d->t_start ? d->t_sealed : t_end) - d->t_start;
	uint64_t bytes = atomic_load(&d->bytes_written);
	uint64_t mism = atomic_load(&d->mismatches);
	bool failed = atomic_load(&d->error_set);
	printf("ovstage sim demo: %u envs x %u bodies = %u prims, columns pose (float32 x %d) + velocity "
	       "(float32 x %d)\n", o->envs, o->bodies, d->n, POSE_LANES, VEL_LANES);
	printf("  %" PRIu64 " steps, %u producer threads + sealer + consumer, every %u%s step sparse, retention %" PRIu64
	       "\n\n", o->steps, o->producers, o->sparse_every, o->sparse_every == 1 ? "st" : "th", o->retention);
	printf("  %-30s %s\n", "metric", "value");
	printf("  %-30s %s\n", "------------------------------", "--------------------------------------");
	row("columns on", "%s", o->cuda ? "CUDA device 0 (values checked after a D2H copy)" : "the CPU");
	row("steps sealed", "%" PRIu64 " of %" PRIu64 " (%" PRIu64 " dense, %" PRIu64 " sparse)", atomic_load(&d->sealed),
	    o->steps, atomic_load(&d->dense_steps), atomic_load(&d->sparse_steps));
	row("time to seal all steps", "%.3f s", wall);
	row("steps/s", "%.0f", (double)atomic_load(&d->sealed) / wall);
	row("payload written", "%.1f MB", (double)bytes * 1e-6);
	row("write throughput", "%.3f GB/s", (double)bytes * 1e-9 / wall);
	printf("  %-30s %s\n", "latency (enqueue -> wait)", "      p50 /       p99");
	lat_row("  write op (2 columns)", &d->write_lat);
	lat_row("  floor advance", &d->seal_lat);
	lat_row("  latest read (2 columns)", &d->read_lat);
	lat_row("  range read (2 columns)", &d->range_lat);
	row("floor polls", "%" PRIu64, d->polls);
	row("reads checked (latest/range)", "%" PRIu64 " / %" PRIu64, atomic_load(&d->latest_reads),
	    atomic_load(&d->range_reads));
	row("stale reads re-polled", "%" PRIu64 " (a latest read refused OUT_OF_RANGE: never expected)", d->stale_retries);
	row("range reads rebased", "%" PRIu64, d->ranges_rebased);
	row("values checked", "%" PRIu64, atomic_load(&d->values_checked));
	row("mismatches", "%" PRIu64, mism);
	row("engine memory (end / peak)", "%.1f / %.1f MB in buffers (%.1f MB pooled at the end)",
	    (double)mem.buffer_bytes * 1e-6, (double)mem_peak.buffer_bytes * 1e-6, (double)mem.pooled_bytes * 1e-6);
	row("unsealed (peak / limit)", "%.1f / %.1f MB", (double)mem_peak.unsealed_bytes * 1e-6,
	    (double)mem.unsealed_limit * 1e-6);
	row("process RSS (start/end/peak)", "%.1f / %.1f / %.1f MB", (double)rss_start / 1024.0, (double)rss_end / 1024.0,
	    (double)hwm / 1024.0);
	if (failed)
		printf("\nERROR: %s\n", d->error);
	if (mism)
		printf("\nFIRST MISMATCH: %s\n", d->first_mismatch);
	bool complete = atomic_load(&d->sealed) == o->steps && atomic_load(&d->consumer_floor) == o->steps;
	if (!failed && !complete)
		printf("\nERROR: the run did not complete\n");
	printf("\nresult: %s\n", !failed && !mism && complete ? "OK" : "FAILED");

	teardown(d);
	check(ovstage_shutdown(), "shutdown");
	free(d->submitted);
	free(d->write_lat.v);
	free(d->seal_lat.v);
	free(d->read_lat.v);
	free(d->range_lat.v);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->cond);
	free(prods);
	free(pt);
	int rc = !failed && !mism && complete ? EXIT_SUCCESS : EXIT_FAILURE;
	free(d);
	return rc;
}
