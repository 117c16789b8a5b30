/*
 * main.c — ovstage_bench_ck: each of our concurrency primitives beside the Concurrency Kit (libck)
 * primitive that would replace it, measured in the same run and printed as one markdown table.
 *
 *   ovstage_bench_ck [--reps R] [--ms D]
 *
 * Rows (README.md says more):
 *  1. grace-period read side (engine/store/grace.c itself: ovs_grace_enter/leave, sharded counters)
 *     vs ck_epoch_begin/ck_epoch_end, with a writer replacing the pointer every 100 µs and
 *     reclaiming (our flip + wait for readers[old] == 0, vs ck_epoch_synchronize);
 *  2. the injection queue (jobs/inject.c) vs ck_ring MPMC of the same capacity;
 *  3. futex parking (jobs/park.h: always waking, as the receipts did, and the waiter flag they use
 *     now) vs ck_ec32 with futex-based ck_ec_ops;
 *  4. the presence bitmap operations (engine/store/version.c, reproduced here) vs ck_bitmap.
 *
 * Concurrent rows run at 1, 2 and nproc threads (deduplicated). Each figure is the best of R
 * repetitions (default 3), ours and ck interleaved within a repetition; timed phases last D ms
 * (default 250). Never asserts on figures; exits 0. A violated correctness check (a reader that saw
 * a reclaimed object, a queue that lost, duplicated or reordered an item, a wrong bitmap) aborts
 * with a message.
 *
 * ThreadSanitizer cannot see ck's inline assembly; this file is built only in the release build
 * (see CMakeLists.txt).
 */
#include <ck_bitmap.h>
#include <ck_ec.h>
#include <ck_epoch.h>
#include <ck_pr.h>
#include <ck_ring.h>

#include <assert.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>

#include "bitmap.h"
#include "grace.h"
#include <unistd.h>

#include "inject.h"
#include "park.h"
#include "report.h"

#ifndef OVSTAGE_CK_VERSION
#define OVSTAGE_CK_VERSION "unknown"
#endif

/* ---- common ---- */

static int g_reps = 3;
static uint64_t g_phase_ns = 250000000u; /* one timed phase */
static int g_nproc;

static inline uint64_t now_ns(void)
{
	return jobs_now_ns();
}

static inline void cpu_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static void die(const char *f, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	fputs("ovstage_bench_ck: CORRECTNESS CHECK FAILED: ", stderr);
	vfprintf(stderr, f, ap);
	fputc('\n', stderr);
	va_end(ap);
	fflush(stdout);
	abort();
}

static void *xaligned(size_t align, size_t size)
{
	void *p = aligned_alloc(align, (size + align - 1) / align * align);
	if (!p) {
		fprintf(stderr, "ovstage_bench_ck: out of memory (%zu bytes)\n", size);
		exit(1);
	}
	memset(p, 0, size);
	return p;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* p-th percentile (0..100) of n samples (sorts them). */
static uint64_t pct(uint64_t *v, size_t n, double p)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof *v, cmp_u64);
	size_t i = (size_t)(p / 100.0 * (double)n);
	return v[i < n ? i : n - 1];
}

/* 1, 2, nproc — sorted, without duplicates. */
static int thread_counts(int *out)
{
	int n = 0;
	out[n++] = 1;
	if (g_nproc >= 2)
		out[n++] = 2;
	if (g_nproc > 2)
		out[n++] = g_nproc;
	return n;
}

static const char *thr(int t)
{
	return fmt("%d thread%s", t, t > 1 ? "s" : "");
}

static const char *ratio_hi(double ours, double ck) /* higher is better */
{
	if (ours <= 0 || ck <= 0)
		return "n/a";
	return ours >= ck ? fmt("ours %.2f× ck", ours / ck) : fmt("ck %.2f× ours", ck / ours);
}

static const char *ratio_lo(double ours, double ck) /* lower is better */
{
	if (ours <= 0 || ck <= 0)
		return "n/a";
	return ours <= ck ? fmt("ours %.2f× faster", ck / ours) : fmt("ck %.2f× faster", ours / ck);
}

static const char *winner_hi(double ours, double ck)
{
	return ours <= 0 || ck <= 0 ? "n/a" : ours >= ck ? "ours" : "ck";
}

static const char *winner_lo(double ours, double ck)
{
	return ours <= 0 || ck <= 0 ? "n/a" : ours <= ck ? "ours" : "ck";
}

static const char *ns_str(double ns)
{
	return ns >= 10000 ? fmt("%.1f µs", ns / 1e3) : ns >= 100 ? fmt("%.0f ns", ns) : fmt("%.2f ns", ns);
}

/* =====================================================================================
 * 1. Snapshot reclamation: our grace period vs ck_epoch
 * ===================================================================================== */

/* The object a snapshot pointer designates: a live marker and a 'freed' flag, poisoned on reclaim. */
#define OBJ_LIVE 0x600DF00Du
#define OBJ_POISON 0xDEADDEADu
typedef struct bobj {
	_Alignas(64) _Atomic uint64_t value; /* OBJ_LIVE while reachable; OBJ_POISON once reclaimed */
	_Atomic uint32_t freed;              /* 1 once reclaimed */
} bobj;

/* Ours is the engine's own grace period (engine/store/grace.{h,c}), called through its raw section;
 * the snapshot pointer carries a bobj here. */
typedef ovs_grace bgrace;

static void bg_init(bgrace *g)
{
	ovs_grace_init(g);
}

static bobj *bg_publish(bgrace *g, bobj *snap)
{
	return (bobj *)(void *)ovs_grace_publish(g, (ovs_snapshot *)(void *)snap);
}

/* ck side: the shared pointer on its own line, one epoch, one record per thread, registered once. */
static struct {
	_Alignas(64) _Atomic(bobj *) ptr;
} ck_shared;
static ck_epoch_t g_epoch;
static ck_epoch_record_t *g_records; /* [nproc] readers, then [nproc] the writer */

typedef struct ep_run {
	int impl; /* 0 ours; 1 ck, writer ck_epoch_synchronize; 2 ck, writer ck_epoch_synchronize_wait (yields) */
	int readers;
	bgrace *g;
	bobj *pool;
	size_t pool_n;
	uint64_t *lat; /* writer's reclamation latencies */
	size_t n_lat;
	size_t replaced;
	_Atomic int stop;
	pthread_barrier_t start;
	uint64_t sections[256];
} ep_run;

typedef struct ep_arg {
	ep_run *r;
	int idx;
} ep_arg;

static inline void check_obj(bobj *o, const char *who)
{
	uint64_t v = atomic_load_explicit(&o->value, memory_order_relaxed);
	uint32_t f = atomic_load_explicit(&o->freed, memory_order_relaxed);
	if (v != OBJ_LIVE || f)
		die("%s reader saw a reclaimed object (value %#llx, freed %u)", who, (unsigned long long)v, f);
}

static void *ep_reader(void *a)
{
	ep_arg *arg = a;
	ep_run *r = arg->r;
	uint64_t n = 0;
	pthread_barrier_wait(&r->start);
	if (r->impl == 0) {
		bgrace *g = r->g;
		while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
			for (int k = 0; k < 64; k++) {
				unsigned p = ovs_grace_enter(g);
				bobj *o = (bobj *)(void *)ovs_grace_snapshot_acq(g);
				check_obj(o, "grace");
				ovs_grace_leave(g, p);
			}
			n += 64;
		}
	} else {
		ck_epoch_record_t *rec = &g_records[arg->idx];
		while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
			for (int k = 0; k < 64; k++) {
				ck_epoch_begin(rec, NULL);
				bobj *o = atomic_load_explicit(&ck_shared.ptr, memory_order_acquire);
				check_obj(o, "ck_epoch");
				ck_epoch_end(rec, NULL);
			}
			n += 64;
		}
	}
	r->sections[arg->idx] = n;
	return NULL;
}

static void poison(bobj *o)
{
	atomic_store_explicit(&o->freed, 1, memory_order_relaxed);
	atomic_store_explicit(&o->value, OBJ_POISON, memory_order_relaxed);
}

/* ck_epoch_synchronize_wait's callback, called while a reader blocks the grace period: the same
 * policy as ovs_grace_wait (spin 64 rounds, then yield). Plain ck_epoch_synchronize only spins. */
static void ep_wait_cb(ck_epoch_t *e, ck_epoch_record_t *cr, void *ct)
{
	(void)e;
	(void)cr;
	unsigned *spins = ct;
	if (++*spins > 64)
		sched_yield();
}

static void *ep_writer(void *a)
{
	ep_run *r = a;
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* 100 µs ticks, not 100 µs + the default 50 µs slack */
	ck_epoch_record_t *wrec = &g_records[g_nproc];
	pthread_barrier_wait(&r->start);
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	size_t i = 1; /* pool[0] is the initial object */
	while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
		next.tv_nsec += 100000;
		if (next.tv_nsec >= 1000000000) {
			next.tv_nsec -= 1000000000;
			next.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
		struct timespec nw;
		clock_gettime(CLOCK_MONOTONIC, &nw);
		if (nw.tv_sec > next.tv_sec || (nw.tv_sec == next.tv_sec && nw.tv_nsec > next.tv_nsec))
			next = nw; /* late: the next tick is 100 µs from now */
		if (i >= r->pool_n)
			continue;
		bobj *nobj = &r->pool[i++], *old;
		uint64_t t0, t1;
		if (r->impl == 0) {
			old = bg_publish(r->g, nobj);
			t0 = now_ns();
			unsigned p = ovs_grace_flip(r->g);
			ovs_grace_wait(r->g, p);
			t1 = now_ns();
		} else {
			old = atomic_load_explicit(&ck_shared.ptr, memory_order_relaxed);
			atomic_store_explicit(&ck_shared.ptr, nobj, memory_order_release);
			t0 = now_ns();
			if (r->impl == 1) {
				ck_epoch_synchronize(wrec);
			} else {
				unsigned spins = 0;
				ck_epoch_synchronize_wait(&g_epoch, ep_wait_cb, &spins);
			}
			t1 = now_ns();
		}
		poison(old);
		r->lat[r->n_lat++] = t1 - t0;
	}
	r->replaced = i - 1;
	return NULL;
}

typedef struct ep_result {
	double per_thread; /* sections / s / thread */
	size_t replaced;
} ep_result;

/* One timed phase; appends the writer's reclamation latencies to lat (*n_lat of them so far). */
static ep_result ep_once(int impl, int readers, uint64_t *lat, size_t *n_lat)
{
	ep_run *r = xaligned(64, sizeof *r);
	r->impl = impl;
	r->readers = readers;
	r->g = xaligned(64, sizeof *r->g);
	bg_init(r->g);
	r->pool_n = (size_t)(g_phase_ns / 100000u) + 64;
	r->pool = xaligned(64, r->pool_n * sizeof *r->pool);
	for (size_t i = 0; i < r->pool_n; i++) {
		atomic_init(&r->pool[i].value, OBJ_LIVE);
		atomic_init(&r->pool[i].freed, 0);
	}
	r->lat = calloc(r->pool_n, sizeof *r->lat);
	atomic_init(&r->stop, 0);
	if (impl == 0)
		bg_publish(r->g, &r->pool[0]);
	else
		atomic_store(&ck_shared.ptr, &r->pool[0]);
	pthread_barrier_init(&r->start, NULL, (unsigned)readers + 2);
	pthread_t th[256], wt;
	ep_arg args[256];
	for (int i = 0; i < readers; i++) {
		args[i] = (ep_arg){ r, i };
		pthread_create(&th[i], NULL, ep_reader, &args[i]);
	}
	pthread_create(&wt, NULL, ep_writer, r);
	pthread_barrier_wait(&r->start);
	uint64_t t0 = now_ns();
	struct timespec d = { (time_t)(g_phase_ns / 1000000000u), (long)(g_phase_ns % 1000000000u) };
	nanosleep(&d, NULL);
	atomic_store(&r->stop, 1);
	for (int i = 0; i < readers; i++)
		pthread_join(th[i], NULL);
	uint64_t el = now_ns() - t0;
	pthread_join(wt, NULL);
	uint64_t total = 0;
	for (int i = 0; i < readers; i++)
		total += r->sections[i];
	ep_result res = { (double)total / ((double)el / 1e9) / readers, r->replaced };
	memcpy(lat + *n_lat, r->lat, r->n_lat * sizeof *lat);
	*n_lat += r->n_lat;
	pthread_barrier_destroy(&r->start);
	free(r->lat);
	free(r->pool);
	free(r->g);
	free(r);
	return res;
}

static void rows_epoch(void)
{
	ck_epoch_init(&g_epoch);
	g_records = xaligned(64, (size_t)(g_nproc + 1) * sizeof *g_records);
	for (int i = 0; i <= g_nproc; i++)
		ck_epoch_register(&g_epoch, &g_records[i], NULL);
	int tc[3], nt = thread_counts(tc);
	for (int k = 0; k < nt; k++) {
		ep_result best[3] = { { 0, 0 }, { 0, 0 }, { 0, 0 } };
		size_t cap = (size_t)g_reps * ((size_t)(g_phase_ns / 100000u) + 64), nl[3] = { 0, 0, 0 };
		uint64_t *lat[3], p50[3], p99[3];
		for (int impl = 0; impl < 3; impl++)
			lat[impl] = calloc(cap, sizeof(uint64_t));
		for (int rep = 0; rep < g_reps; rep++)
			for (int impl = 0; impl < 3; impl++) {
				ep_result x = ep_once(impl, tc[k], lat[impl], &nl[impl]);
				if (x.per_thread > best[impl].per_thread)
					best[impl] = x;
			}
		for (int impl = 0; impl < 3; impl++) {
			p50[impl] = pct(lat[impl], nl[impl], 50);
			p99[impl] = pct(lat[impl], nl[impl], 99);
			free(lat[impl]);
		}
		table_row(fmt("1. read section (pin/unpin + load ptr + read word), %s, writer every 100 µs", thr(tc[k])),
			  fmt("%.1f M/s/thread", best[0].per_thread / 1e6),
			  fmt("ck_epoch_begin/end, %s", thr(tc[k])), fmt("%.1f M/s/thread", best[1].per_thread / 1e6),
			  ratio_hi(best[0].per_thread, best[1].per_thread), "— (comparison)",
			  winner_hi(best[0].per_thread, best[1].per_thread));
		table_row(fmt("1. writer reclamation p50 / p99 (flip + wait readers[old]=0), %s", thr(tc[k])),
			  fmt("%s / %s (n=%zu)", ns_str((double)p50[0]), ns_str((double)p99[0]), nl[0]),
			  "ck_epoch_synchronize", fmt("%s / %s (n=%zu)", ns_str((double)p50[1]), ns_str((double)p99[1]), nl[1]),
			  fmt("p50: %s", ratio_lo((double)p50[0], (double)p50[1])), "— (comparison)",
			  winner_lo((double)p50[0], (double)p50[1]));
		table_row(fmt("1. writer reclamation p50 / p99 (flip + wait readers[old]=0), %s", thr(tc[k])),
			  fmt("%s / %s (n=%zu)", ns_str((double)p50[0]), ns_str((double)p99[0]), nl[0]),
			  fmt("ck_epoch_synchronize_wait, yield cb (readers %.1f M/s/thread)", best[2].per_thread / 1e6),
			  fmt("%s / %s (n=%zu)", ns_str((double)p50[2]), ns_str((double)p99[2]), nl[2]),
			  fmt("p50: %s", ratio_lo((double)p50[0], (double)p50[2])), "— (comparison)",
			  winner_lo((double)p50[0], (double)p50[2]));
		if (k == 0)
			note("Row 1: %zu (ours) / %zu (ck_epoch_synchronize) / %zu (synchronize_wait) pointer replacements in "
			     "the best %.0f ms repetition at 1 thread (a tick is 100 µs plus the reclamation); latency "
			     "percentiles pool every repetition (n = samples), timed from the pointer store to the end of the wait.",
			     best[0].replaced, best[1].replaced, best[2].replaced, (double)g_phase_ns / 1e6);
		if (k == 0)
			note("Row 1: every reader checks that the object it reached is not poisoned (aborts otherwise). "
			     "ck_epoch_synchronize spins without yielding; synchronize_wait is given ovs_grace_wait's policy "
			     "(64 spins, then sched_yield) through its callback.");
	}
}

/* =====================================================================================
 * 2. Bounded MPMC queue: jobs_inject vs ck_ring
 * ===================================================================================== */

enum { Q_CAP = 4096 }; /* the scheduler's default queue_capacity */

typedef struct q_run {
	int impl;
	int nprod, ncons;
	jobs_inject q;
	_Alignas(64) ck_ring_t ring;
	ck_ring_buffer_t *buf;
	_Alignas(64) _Atomic int stop;
	pthread_barrier_t start;
	uint64_t prod_count[128];
	uint64_t *cons_count; /* [ncons][nprod] */
	uint64_t *cons_sum;   /* [ncons][nprod] */
} q_run;

typedef struct q_arg {
	q_run *r;
	int idx;
} q_arg;

static inline bool q_push(q_run *r, int impl, void *item)
{
	return impl == 0 ? jobs_inject_push_mpmc(&r->q, item) : ck_ring_enqueue_mpmc(&r->ring, r->buf, item);
}

static inline bool q_pop(q_run *r, int impl, void **item)
{
	return impl == 0 ? jobs_inject_pop_mpmc(&r->q, item) : ck_ring_dequeue_mpmc(&r->ring, r->buf, item);
}

/* Items are ((producer + 1) << 32 | seq), seq from 1; the pill (0) stops one consumer. */
static inline void producer_body(q_arg *a, int impl)
{
	q_run *r = a->r;
	uint64_t pid = (uint64_t)a->idx + 1, seq = 0;
	pthread_barrier_wait(&r->start);
	for (;;) {
		if ((seq & 255) == 0 && atomic_load_explicit(&r->stop, memory_order_relaxed))
			break;
		seq++;
		void *item = (void *)(uintptr_t)(pid << 32 | seq);
		while (!q_push(r, impl, item))
			cpu_pause();
	}
	r->prod_count[a->idx] = seq;
}

static inline void consumer_body(q_arg *a, int impl)
{
	q_run *r = a->r;
	int np = r->nprod;
	uint64_t *cnt = &r->cons_count[(size_t)a->idx * (size_t)np], *sum = &r->cons_sum[(size_t)a->idx * (size_t)np];
	uint64_t last[128] = { 0 };
	pthread_barrier_wait(&r->start);
	for (;;) {
		void *item;
		if (!q_pop(r, impl, &item)) {
			cpu_pause();
			continue;
		}
		uint64_t v = (uint64_t)(uintptr_t)item;
		if (!v)
			break;
		uint64_t pid = (v >> 32) - 1, seq = v & 0xffffffffu;
		if (pid >= (uint64_t)np)
			die("queue %s: consumer got an item of unknown producer (%#llx)", impl ? "ck_ring" : "jobs_inject",
			    (unsigned long long)v);
		if (seq <= last[pid])
			die("queue %s: consumer saw producer %llu's item %llu after %llu (duplicate or reordered)",
			    impl ? "ck_ring" : "jobs_inject", (unsigned long long)pid, (unsigned long long)seq,
			    (unsigned long long)last[pid]);
		last[pid] = seq;
		cnt[pid]++;
		sum[pid] += seq;
	}
}

static void *prod_ours(void *a)
{
	producer_body(a, 0);
	return NULL;
}
static void *prod_ck(void *a)
{
	producer_body(a, 1);
	return NULL;
}
static void *cons_ours(void *a)
{
	consumer_body(a, 0);
	return NULL;
}
static void *cons_ck(void *a)
{
	consumer_body(a, 1);
	return NULL;
}

/* One thread: push one, pop one (the uncontended cost of a round through the queue). */
static inline uint64_t q_single(q_run *r, int impl, uint64_t *el)
{
	uint64_t n = 0, t0 = now_ns(), t = t0;
	for (;;) {
		for (int k = 0; k < 1024; k++) {
			void *in = (void *)(uintptr_t)(n + 1 + (uint64_t)k), *out = NULL;
			if (!q_push(r, impl, in) || !q_pop(r, impl, &out) || out != in)
				die("queue %s: single-thread push/pop returned %p for %p", impl ? "ck_ring" : "jobs_inject", out,
				    in);
		}
		n += 1024;
		t = now_ns();
		if (t - t0 >= g_phase_ns)
			break;
	}
	*el = t - t0;
	return n;
}

static double q_once(int impl, int threads)
{
	q_run *r = xaligned(64, sizeof *r);
	r->impl = impl;
	if (!jobs_inject_init(&r->q, Q_CAP)) {
		fprintf(stderr, "ovstage_bench_ck: jobs_inject_init failed\n");
		exit(1);
	}
	r->buf = xaligned(64, Q_CAP * sizeof *r->buf);
	ck_ring_init(&r->ring, Q_CAP);
	double rate;
	if (threads == 1) {
		uint64_t el;
		uint64_t n = impl == 0 ? q_single(r, 0, &el) : q_single(r, 1, &el);
		rate = (double)n / ((double)el / 1e9);
	} else {
		r->nprod = threads / 2;
		r->ncons = threads - r->nprod;
		r->cons_count = calloc((size_t)r->nprod * (size_t)r->ncons, sizeof(uint64_t));
		r->cons_sum = calloc((size_t)r->nprod * (size_t)r->ncons, sizeof(uint64_t));
		atomic_init(&r->stop, 0);
		pthread_barrier_init(&r->start, NULL, (unsigned)threads + 1);
		pthread_t th[256];
		q_arg args[256];
		for (int i = 0; i < threads; i++) {
			bool prod = i < r->nprod;
			args[i] = (q_arg){ r, prod ? i : i - r->nprod };
			pthread_create(&th[i], NULL, prod ? (impl ? prod_ck : prod_ours) : (impl ? cons_ck : cons_ours), &args[i]);
		}
		pthread_barrier_wait(&r->start);
		uint64_t t0 = now_ns();
		struct timespec d = { (time_t)(g_phase_ns / 1000000000u), (long)(g_phase_ns % 1000000000u) };
		nanosleep(&d, NULL);
		atomic_store(&r->stop, 1);
		for (int i = 0; i < r->nprod; i++)
			pthread_join(th[i], NULL);
		for (int i = 0; i < r->ncons; i++)
			while (!q_push(r, impl, NULL))
				cpu_pause();
		for (int i = r->nprod; i < threads; i++)
			pthread_join(th[i], NULL);
		uint64_t el = now_ns() - t0;
		uint64_t total = 0;
		for (int p = 0; p < r->nprod; p++) {
			uint64_t c = 0, s = 0, n = r->prod_count[p];
			for (int k = 0; k < r->ncons; k++) {
				c += r->cons_count[(size_t)k * (size_t)r->nprod + (size_t)p];
				s += r->cons_sum[(size_t)k * (size_t)r->nprod + (size_t)p];
			}
			if (c != n || s != n * (n + 1) / 2)
				die("queue %s: producer %d pushed %llu items, consumers got %llu (sum %llu, expected %llu)",
				    impl ? "ck_ring" : "jobs_inject", p, (unsigned long long)n, (unsigned long long)c,
				    (unsigned long long)s, (unsigned long long)(n * (n + 1) / 2));
			total += n;
		}
		void *left;
		if (q_pop(r, impl, &left))
			die("queue %s: an item was left after the pills", impl ? "ck_ring" : "jobs_inject");
		rate = (double)total / ((double)el / 1e9);
		pthread_barrier_destroy(&r->start);
		free(r->cons_count);
		free(r->cons_sum);
	}
	jobs_inject_fini(&r->q);
	free(r->buf);
	free(r);
	return rate;
}

static void rows_queue(void)
{
	int tc[3], nt = thread_counts(tc);
	for (int k = 0; k < nt; k++) {
		double best[2] = { 0, 0 };
		for (int rep = 0; rep < g_reps; rep++)
			for (int impl = 0; impl < 2; impl++) {
				double x = q_once(impl, tc[k]);
				if (x > best[impl])
					best[impl] = x;
			}
		const char *shape = tc[k] == 1 ? "1 thread (push 1, pop 1)"
					       : fmt("%d producer%s + %d consumer%s", tc[k] / 2, tc[k] / 2 > 1 ? "s" : "",
						     tc[k] - tc[k] / 2, tc[k] - tc[k] / 2 > 1 ? "s" : "");
		table_row(fmt("2. MPMC queue, capacity %d, %s", Q_CAP, shape), fmt("%.1f M items/s", best[0] / 1e6),
			  fmt("ck_ring_enqueue/dequeue_mpmc, %s", thr(tc[k])), fmt("%.1f M items/s", best[1] / 1e6),
			  ratio_hi(best[0], best[1]), "— (comparison)", winner_hi(best[0], best[1]));
	}
	note("Row 2: ck_ring of size %d holds %d items (one slot stays empty), jobs_inject of capacity %d holds %d. "
	     "Every run checks each producer's items arrived exactly once (count and sum) and in order per consumer.",
	     Q_CAP, Q_CAP - 1, Q_CAP, Q_CAP);
}

/* =====================================================================================
 * 3. Parking: futex wait/wake vs ck_ec32
 * ===================================================================================== */

/* A minimal Linux futex-based ck_ec_ops. ck passes absolute CLOCK_MONOTONIC deadlines (from
 * gettime below), hence FUTEX_WAIT_BITSET, whose timeout is absolute on CLOCK_MONOTONIC. */
static int ec_gettime(const struct ck_ec_ops *ops, struct timespec *out)
{
	(void)ops;
	return clock_gettime(CLOCK_MONOTONIC, out);
}

static void ec_wait32(const struct ck_ec_wait_state *st, const uint32_t *addr, uint32_t expected,
		      const struct timespec *deadline)
{
	(void)st;
	syscall(SYS_futex, addr, FUTEX_WAIT_BITSET_PRIVATE, expected, deadline, NULL, FUTEX_BITSET_MATCH_ANY);
}

/* 64-bit counters: wait on the low half (x86-64 is little endian), as ck_ec.h allows. */
static void ec_wait64(const struct ck_ec_wait_state *st, const uint64_t *addr, uint64_t expected,
		      const struct timespec *deadline)
{
	(void)st;
	syscall(SYS_futex, (const uint32_t *)addr, FUTEX_WAIT_BITSET_PRIVATE, (uint32_t)expected, deadline, NULL,
		FUTEX_BITSET_MATCH_ANY);
}

static void ec_wake32(const struct ck_ec_ops *ops, const uint32_t *addr)
{
	(void)ops;
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static void ec_wake64(const struct ck_ec_ops *ops, const uint64_t *addr)
{
	(void)ops;
	syscall(SYS_futex, (const uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static const struct ck_ec_ops ec_ops = {
	.gettime = ec_gettime,
	.wait32 = ec_wait32,
	.wait64 = ec_wait64,
	.wake32 = ec_wake32,
	.wake64 = ec_wake64,
	/* 0: ck's defaults (100 spins, 2 ms first partial deadline, 8× backoff) */
};
/* Multiple producers: the engine's futex words (wake_seq) are bumped by many threads. */
static const struct ck_ec_mode ec_mode = { .ops = &ec_ops, .single_producer = false };

enum { PP_SPIN = 100 }; /* our waiters' spin before the futex: ck's default busy_loop_iter */

/* The implementations of row 3. */
enum {
	PARK_ALWAYS, /* ours before jobs3: fetch_add release + FUTEX_WAKE on every signal */
	PARK_FLAG,   /* ours now: park.h's waiter flag, as the receipts use it */
	PARK_CK,     /* ck_ec32_inc / ck_ec32_wait */
	PARK_N
};
static const char *const park_name[PARK_N] = { "futex, wake always", "waiter flag", "ck_ec32" };

/* PARK_ALWAYS: a bare counter; the signaller always enters the kernel. */
static inline void always_signal(_Atomic uint32_t *w)
{
	atomic_fetch_add_explicit(w, 1, memory_order_release);
	jobs_futex_wake(w, 1);
}

static inline void always_wait_change(_Atomic uint32_t *w, uint32_t old)
{
	for (int i = 0; i < PP_SPIN; i++) {
		if (atomic_load_explicit(w, memory_order_acquire) != old)
			return;
		cpu_pause();
	}
	while (atomic_load_explicit(w, memory_order_acquire) == old)
		jobs_futex_wait(w, old, ~(uint64_t)0);
}

/* PARK_FLAG: the word holds count << 1 | FLAG. The signal is what a receipt's completion does — a
 * CAS loop that computes the new word from the old one (here: count + 1, flag cleared, since the
 * count goes on where a receipt's DONE is final) and then jobs_futex_wake_flagged on the value it
 * replaced; the waiter spins, then jobs_futex_wait_flagged, as jobs_wait does (receipts: the flag
 * is JOBS_ST_SLEEPER in the state word). */
enum { PP_FLAG = 1u };

static inline uint32_t flag_bump(_Atomic uint32_t *w)
{
	uint32_t old = atomic_load_explicit(w, memory_order_relaxed);
	/* release: the waiter's acquire load of the new count sees what we did before signalling. */
	while (!atomic_compare_exchange_weak_explicit(w, &old, (old + 2u) & ~(uint32_t)PP_FLAG,
						      memory_order_release, memory_order_relaxed))
		;
	return old;
}

static inline void flag_signal(_Atomic uint32_t *w)
{
	jobs_futex_wake_flagged(w, flag_bump(w), PP_FLAG);
}

static inline void flag_wait_change(_Atomic uint32_t *w, uint32_t old_count)
{
	for (int i = 0; i < PP_SPIN; i++) {
		if ((atomic_load_explicit(w, memory_order_acquire) >> 1) != old_count)
			return;
		cpu_pause();
	}
	for (;;) {
		uint32_t v = atomic_load_explicit(w, memory_order_acquire);
		if ((v >> 1) != old_count)
			return;
		(void)jobs_futex_wait_flagged(w, v, PP_FLAG, ~(uint64_t)0);
	}
}

typedef struct pp_run {
	int impl;
	long iters;
	_Alignas(64) _Atomic uint32_t w_ab;
	_Alignas(64) _Atomic uint32_t w_ba;
	_Alignas(64) ck_ec32_t e_ab;
	_Alignas(64) ck_ec32_t e_ba;
} pp_run;

static inline void pp_signal(pp_run *r, bool ab)
{
	if (r->impl == PARK_ALWAYS)
		always_signal(ab ? &r->w_ab : &r->w_ba);
	else if (r->impl == PARK_FLAG)
		flag_signal(ab ? &r->w_ab : &r->w_ba);
	else
		ck_ec32_inc(ab ? &r->e_ab : &r->e_ba, &ec_mode);
}

/* Waits until the counter (ab: A→B) moves past `count`. */
static inline void pp_wait(pp_run *r, bool ab, uint32_t count)
{
	if (r->impl == PARK_ALWAYS)
		always_wait_change(ab ? &r->w_ab : &r->w_ba, count);
	else if (r->impl == PARK_FLAG)
		flag_wait_change(ab ? &r->w_ab : &r->w_ba, count);
	else
		ck_ec32_wait(ab ? &r->e_ab : &r->e_ba, &ec_mode, count, NULL);
}

static uint32_t pp_count(pp_run *r, bool ab)
{
	if (r->impl == PARK_CK)
		return ck_ec32_value(ab ? &r->e_ab : &r->e_ba);
	uint32_t v = atomic_load(ab ? &r->w_ab : &r->w_ba);
	return r->impl == PARK_FLAG ? v >> 1 : v;
}

static void *pp_echo(void *a)
{
	pp_run *r = a;
	for (long i = 0; i < r->iters; i++) {
		pp_wait(r, true, (uint32_t)i);
		pp_signal(r, false);
	}
	return NULL;
}

static void pp_once(int impl, long iters, uint64_t *p50, uint64_t *p99)
{
	pp_run *r = xaligned(64, sizeof *r);
	r->impl = impl;
	r->iters = iters;
	atomic_init(&r->w_ab, 0);
	atomic_init(&r->w_ba, 0);
	ck_ec32_init(&r->e_ab, 0);
	ck_ec32_init(&r->e_ba, 0);
	uint64_t *lat = calloc((size_t)iters, sizeof *lat);
	pthread_t t;
	pthread_create(&t, NULL, pp_echo, r);
	for (long i = 0; i < iters; i++) {
		uint64_t t0 = now_ns();
		pp_signal(r, true);
		pp_wait(r, false, (uint32_t)i);
		lat[i] = now_ns() - t0;
	}
	pthread_join(t, NULL);
	uint32_t got = pp_count(r, false);
	if (got != (uint32_t)iters)
		die("ping-pong %s: %u round trips completed, expected %ld", park_name[impl], got, iters);
	*p50 = pct(lat, (size_t)iters, 50);
	*p99 = pct(lat, (size_t)iters, 99);
	free(lat);
	free(r);
}

/* Signalling a word nobody waits on, per signal. PARK_ALWAYS enters the kernel every time;
 * PARK_FLAG and PARK_CK only when a waiter flagged the word. `receipt_ck` measures what the
 * receipts would pay with ck: their state word's CAS (which they need anyway) plus ck_ec32_inc on
 * a per-slot event count. */
static double signal_nowaiter(int impl, bool receipt_ck, long n)
{
	_Alignas(64) static _Atomic uint32_t w;
	_Alignas(64) static ck_ec32_t e;
	atomic_init(&w, 0);
	ck_ec32_init(&e, 0);
	uint64_t t0 = now_ns();
	for (long i = 0; i < n; i++) {
		if (impl == PARK_ALWAYS)
			always_signal(&w);
		else if (impl == PARK_FLAG)
			flag_signal(&w);
		else {
			if (receipt_ck)
				(void)flag_bump(&w);
			ck_ec32_inc(&e, &ec_mode);
		}
	}
	uint64_t el = now_ns() - t0;
	uint32_t got = impl == PARK_CK ? ck_ec32_value(&e) : impl == PARK_FLAG ? atomic_load(&w) >> 1 : atomic_load(&w);
	if (got != (uint32_t)n)
		die("signal %s: counter %u after %ld signals", park_name[impl], got, n);
	return (double)el / (double)n;
}

static void rows_park(void)
{
	long iters = 20000;
	uint64_t b50[PARK_N], b99[PARK_N];
	for (int i = 0; i < PARK_N; i++) {
		b50[i] = UINT64_MAX;
		b99[i] = 0;
	}
	for (int rep = 0; rep < g_reps; rep++)
		for (int impl = 0; impl < PARK_N; impl++) {
			uint64_t p50, p99;
			pp_once(impl, iters, &p50, &p99);
			if (p50 < b50[impl]) {
				b50[impl] = p50;
				b99[impl] = p99;
			}
		}
	const char *ck_pp = fmt("%s (%s)", ns_str((double)b50[PARK_CK]), ns_str((double)b99[PARK_CK]));
	table_row("3. ping-pong round trip between 2 threads, p50 (p99): futex, wake always (receipts before)",
		  fmt("%s (%s)", ns_str((double)b50[PARK_ALWAYS]), ns_str((double)b99[PARK_ALWAYS])),
		  "ck_ec32_inc / ck_ec32_wait (MP mode)", ck_pp,
		  fmt("p50: %s", ratio_lo((double)b50[PARK_ALWAYS], (double)b50[PARK_CK])), "— (comparison)",
		  winner_lo((double)b50[PARK_ALWAYS], (double)b50[PARK_CK]));
	table_row("3. ping-pong round trip between 2 threads, p50 (p99): waiter flag (park.h, receipts now)",
		  fmt("%s (%s)", ns_str((double)b50[PARK_FLAG]), ns_str((double)b99[PARK_FLAG])),
		  "ck_ec32_inc / ck_ec32_wait (MP mode)", ck_pp,
		  fmt("p50: %s", ratio_lo((double)b50[PARK_FLAG], (double)b50[PARK_CK])), "— (comparison)",
		  winner_lo((double)b50[PARK_FLAG], (double)b50[PARK_CK]));
	double w[PARK_N + 1];
	for (int i = 0; i <= PARK_N; i++)
		w[i] = 1e18;
	for (int rep = 0; rep < g_reps; rep++)
		for (int k = 0; k <= PARK_N; k++) { /* k == PARK_N: the receipts' CAS + ck_ec32_inc */
			int impl = k == PARK_N ? PARK_CK : k;
			double x = signal_nowaiter(impl, k == PARK_N, impl == PARK_ALWAYS ? 200000 : 2000000);
			if (x < w[k])
				w[k] = x;
		}
	table_row("3. signal with no waiter: fetch_add + futex wake (receipts before), per signal", ns_str(w[PARK_ALWAYS]),
		  "ck_ec32_inc (no waiter flagged: no syscall)", ns_str(w[PARK_CK]), ratio_lo(w[PARK_ALWAYS], w[PARK_CK]),
		  "— (comparison)", winner_lo(w[PARK_ALWAYS], w[PARK_CK]));
	table_row("3. signal with no waiter: CAS + waiter-flag test (park.h, receipts now), per signal", ns_str(w[PARK_FLAG]),
		  "ck_ec32_inc (no waiter flagged: no syscall)", ns_str(w[PARK_CK]), ratio_lo(w[PARK_FLAG], w[PARK_CK]),
		  "— (comparison)", winner_lo(w[PARK_FLAG], w[PARK_CK]));
	table_row("3. complete a receipt nobody sleeps on: state CAS + waiter-flag test, per completion", ns_str(w[PARK_FLAG]),
		  "state CAS + ck_ec32_inc on a per-slot ck_ec32", ns_str(w[PARK_N]), ratio_lo(w[PARK_FLAG], w[PARK_N]),
		  "— (comparison)", winner_lo(w[PARK_FLAG], w[PARK_N]));
	note("Row 3: %ld round trips per repetition; every waiter spins %d times before sleeping (ck spins up to "
	     "2 × 100 with its flag set in between), then futex-waits. 'futex, wake always': the signaller always calls "
	     "FUTEX_WAKE (the receipts' completion before jobs3 did, whenever a pin was held, which every waiter holds). "
	     "'waiter flag': park.h's jobs_futex_wait_flagged / jobs_futex_wake_flagged with a CAS-loop signal, the "
	     "receipts' code path. ck_ec_ops here: CLOCK_MONOTONIC, FUTEX_WAIT_BITSET (absolute deadlines), FUTEX_WAKE "
	     "all. The last row is what adopting ck_ec32 in the receipts would cost per completion: the state word's "
	     "CAS stays (pins, flags, result), and the event count is a second word and a second locked RMW.",
	     iters, PP_SPIN);
}

/* =====================================================================================
 * 4. Bitmaps: the presence bitmap (engine/store/bitmap.h) vs ck_bitmap
 * ===================================================================================== */

/* The engine's presence-bitmap operations come from engine/store/bitmap.h. */

enum { BM_BITS = 16u << 20, BM_PREFIX = BM_BITS - 5, BM_SPARSE = 1u << 20 };

/* Keep the compiler from dropping work whose result is only a bitmap in memory. */
static void clobber(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

static void rows_bitmap(void)
{
	size_t words = (BM_BITS + 63) / 64;
	uint64_t *ours = xaligned(64, words * sizeof *ours);
	ck_bitmap_t *ck = xaligned(64, ck_bitmap_size(BM_BITS));
	ck_bitmap_init(ck, BM_BITS, false);
	uint32_t *rows = malloc(BM_SPARSE * sizeof *rows);
	uint64_t x = 0x9E3779B97F4A7C15u;
	for (uint32_t i = 0; i < BM_SPARSE; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		rows[i] = (uint32_t)(x % BM_BITS);
	}
	double best[4][2];
	for (int i = 0; i < 4; i++)
		best[i][0] = best[i][1] = 1e18;
	for (int rep = 0; rep < g_reps; rep++) {
		/* (a) set a prefix: word-wise (ours) vs bit by bit (ck_bitmap_set). */
		memset(ours, 0, words * sizeof *ours);
		clobber(ours);
		uint64_t t0 = now_ns();
		bits_set_prefix(ours, BM_PREFIX);
		clobber(ours);
		double a0 = (double)(now_ns() - t0) / BM_PREFIX;
		ck_bitmap_clear(ck);
		t0 = now_ns();
		for (uint32_t i = 0; i < BM_PREFIX; i++)
			ck_bitmap_set(ck, i);
		double a1 = (double)(now_ns() - t0) / BM_PREFIX;
		if (ck_bitmap_count(ck, BM_BITS) != BM_PREFIX || ck_bitmap_test(ck, BM_PREFIX))
			die("ck_bitmap: %u bits set after setting a prefix of %u", ck_bitmap_count(ck, BM_BITS), BM_PREFIX);

		/* (b) test the prefix all set: ours word-wise vs ck_bitmap_test bit by bit; (c) vs ck_bitmap_full. */
		t0 = now_ns();
		bool ok0 = bits_all_prefix(ours, BM_PREFIX);
		double b0 = (double)(now_ns() - t0) / BM_PREFIX;
		t0 = now_ns();
		bool ok1 = true;
		for (uint32_t i = 0; i < BM_PREFIX; i++)
			ok1 &= ck_bitmap_test(ck, i);
		double b1 = (double)(now_ns() - t0) / BM_PREFIX;
		t0 = now_ns();
		bool ok2 = ck_bitmap_full(ck, BM_PREFIX);
		double c1 = (double)(now_ns() - t0) / BM_PREFIX;
		if (!ok0 || !ok1 || !ok2 || bits_all_prefix(ours, BM_PREFIX + 1) || ck_bitmap_full(ck, BM_PREFIX + 1))
			die("bitmap: all-set tests disagree (ours %d, ck test %d, ck full %d)", ok0, ok1, ok2);
		for (uint32_t i = 0; i < BM_BITS; i += 4093)
			if (((ours[i / 64] >> (i % 64)) & 1) != ck_bitmap_test(ck, i))
				die("bitmap: ours and ck_bitmap disagree at bit %u", i);

		/* (d) scattered rows (a sparse delta): plain |= (ours) vs ck_bitmap_set (atomic or). */
		memset(ours, 0, words * sizeof *ours);
		ck_bitmap_clear(ck);
		clobber(ours);
		t0 = now_ns();
		for (uint32_t i = 0; i < BM_SPARSE; i++)
			bit_set(ours, rows[i]);
		clobber(ours);
		double d0 = (double)(now_ns() - t0) / BM_SPARSE;
		t0 = now_ns();
		for (uint32_t i = 0; i < BM_SPARSE; i++)
			ck_bitmap_set(ck, rows[i]);
		double d1 = (double)(now_ns() - t0) / BM_SPARSE;
		for (uint32_t i = 0; i < BM_SPARSE; i += 97)
			if (!((ours[rows[i] / 64] >> (rows[i] % 64)) & 1) || !ck_bitmap_test(ck, rows[i]))
				die("bitmap: scattered bit %u not set", rows[i]);
		for (uint32_t w = 0; w < words; w += 1021)
			if ((uint32_t)ours[w] != ((unsigned int *)ck_bitmap_buffer(ck))[2 * w])
				die("bitmap: ours and ck_bitmap disagree at word %u after scattered sets", w);

		double v[4][2] = { { a0, a1 }, { b0, b1 }, { b0, c1 }, { d0, d1 } };
		for (int i = 0; i < 4; i++)
			for (int j = 0; j < 2; j++)
				if (v[i][j] < best[i][j])
					best[i][j] = v[i][j];
	}
	const char *lab[4][2] = {
		{ "4. set a prefix of 16 Mi−5 bits: bits_set_prefix (memset + tail)", "ck_bitmap_set bit by bit" },
		{ "4. test a prefix all set: bits_all_prefix (word-wise)", "ck_bitmap_test bit by bit" },
		{ "4. test a prefix all set: bits_all_prefix (word-wise)", "ck_bitmap_full (word-wise)" },
		{ "4. set 1 Mi scattered bits of 16 Mi: bit_set (plain |=)", "ck_bitmap_set (lock or)" },
	};
	for (int i = 0; i < 4; i++)
		table_row(lab[i][0], fmt("%.3f ns/bit", best[i][0]), lab[i][1], fmt("%.3f ns/bit", best[i][1]),
			  ratio_lo(best[i][0], best[i][1]), "— (comparison)", winner_lo(best[i][0], best[i][1]));
	note("Row 4: ck_bitmap's words are unsigned int (32 bits) and its set is an atomic read-modify-write; the "
	     "engine builds a presence bitmap in one thread before publishing it, so it needs neither.");
	free(rows);
	free(ck);
	free(ours);
}

/* ===================================================================================== */

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--reps") && i + 1 < argc && atoi(argv[i + 1]) > 0)
			g_reps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--ms") && i + 1 < argc && atoi(argv[i + 1]) > 0)
			g_phase_ns = (uint64_t)atoi(argv[++i]) * 1000000u;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: %s [--reps R] [--ms D]\n", argv[0]);
			return 0;
		} else
			fprintf(stderr, "ovstage_bench_ck: ignoring unknown option '%s'\n", argv[i]);
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	long np = sysconf(_SC_NPROCESSORS_ONLN);
	g_nproc = np < 1 ? 1 : np > 126 ? 126 : (int)np;

	char model[256];
	cpu_model(model, sizeof model);
	char date[64];
	time_t now = time(NULL);
	strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S %Z", localtime(&now));
	printf("# ovstage_bench_ck — our primitives vs Concurrency Kit's, same run\n\n");
	printf("- date: %s\n", date);
	printf("- machine: %s; online cpus: %d\n", model, g_nproc);
	printf("- compiler: gcc %s; libck %s\n", __VERSION__, OVSTAGE_CK_VERSION);
	printf("- settings: best of %d repetitions (ours and ck interleaved), %.0f ms timed phases\n\n", g_reps,
	       (double)g_phase_ns / 1e6);
	table_set_peer_header("ck peer (same run)");

	uint64_t t0 = now_ns();
	rows_epoch();
	rows_queue();
	rows_park();
	rows_bitmap();
	table_print(true);
	notes_print();
	printf("- total benchmark time: %.1f s\n", (double)(now_ns() - t0) / 1e9);
	return 0;
}
