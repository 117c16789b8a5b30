/*
 * trace.c — the trace's per-thread buffers and the JSON writer (trace.h).
 *
 * Each thread appends to its own buffer: a list of chunks of TR_CHUNK events. The owner fills an
 * event with plain stores, then publishes it by a release store of the chunk's count; a new chunk
 * is linked with a release store of `next`. The flusher (under a mutex: flushes are serialised)
 * walks the global list of buffers and each buffer's chunks with acquire loads, so it reads only
 * complete events, while the owners keep appending. Buffers are pushed onto the global list with a
 * CAS and never freed (a thread's events outlive it: workers exit before the last flush).
 */
#include "trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TR_CHUNK 4096u          /* events per chunk */
#define TR_MAX_CHUNKS 1024u     /* per thread (4 Mi events); later events are counted, not kept */

_Atomic int jobs_trace_flag;

typedef struct tr_event {
	uint64_t ts, dur, id; /* ns, ns (X only), args.id (0: none) */
	const char *cat, *name;
	char ph;              /* 'X', 'i', 's', 'f' */
} tr_event;

typedef struct tr_chunk {
	_Atomic(struct tr_chunk *) next; /* published with release when the owner links a new chunk */
	_Atomic uint32_t n;              /* events published in ev (release by the owner) */
	tr_event ev[TR_CHUNK];
} tr_chunk;

typedef struct tr_buf {
	struct tr_buf *next;  /* older buffer of the global list (written before the push) */
	uint32_t tid;         /* the trace's thread id */
	tr_chunk *head;       /* first chunk (written before the push) */
	tr_chunk *cur;        /* owner only */
	uint32_t chunks;      /* owner only */
	_Atomic uint64_t dropped; /* events over the limit (relaxed: statistics) */
	char name[32];        /* thread name: written by the owner before the name flag's release */
	_Atomic int named;    /* 1 once name holds the thread's name */
} tr_buf;

static _Atomic(tr_buf *) g_bufs;     /* every buffer, newest first */
static _Atomic uint32_t g_next_tid;  /* trace thread ids */
static _Thread_local tr_buf *t_buf;  /* this thread's buffer */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_flush_lock = PTHREAD_MUTEX_INITIALIZER;
static char *g_path;                 /* the trace file (written in init, before the flag) */

uint64_t jobs_trace_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void trace_at_exit(void)
{
	jobs_trace_flush();
}

static void init_once(void)
{
	const char *p = getenv("OVSTAGE_TRACE");
	if (!p || !*p)
		return;
	g_path = strdup(p);
	if (!g_path)
		return;
	atexit(trace_at_exit);
	/* release: pairs with jobs_trace_flush's acquire (it reads g_path); the hooks' relaxed loads
	 * read nothing through the flag. */
	atomic_store_explicit(&jobs_trace_flag, 1, memory_order_release);
}

void jobs_trace_init(void)
{
	pthread_once(&g_once, init_once);
}

static tr_buf *buf_get(void)
{
	tr_buf *b = t_buf;
	if (b)
		return b;
	b = calloc(1, sizeof *b);
	tr_chunk *c = calloc(1, sizeof *c);
	if (!b || !c) {
		free(b);
		free(c);
		return NULL;
	}
	/* relaxed: distinct ids only. */
	b->tid = atomic_fetch_add_explicit(&g_next_tid, 1, memory_order_relaxed) + 1;
	b->head = b->cur = c;
	b->chunks = 1;
	/* relaxed: the CAS below re-validates. */
	tr_buf *h = atomic_load_explicit(&g_bufs, memory_order_relaxed);
	do
		b->next = h;
	/* release on success: the flusher's acquire load of the list head sees tid, head and next;
	 * relaxed on failure: we retry with the new head. */
	while (!atomic_compare_exchange_weak_explicit(&g_bufs, &h, b, memory_order_release, memory_order_relaxed));
	t_buf = b;
	return b;
}

static void append(char ph, const char *cat, const char *name, uint64_t ts, uint64_t dur, uint64_t id)
{
	tr_buf *b = buf_get();
	if (!b)
		return;
	tr_chunk *c = b->cur;
	/* relaxed: only this thread writes n. */
	uint32_t n = atomic_load_explicit(&c->n, memory_order_relaxed);
	if (n == TR_CHUNK) {
		tr_chunk *nc = b->chunks < TR_MAX_CHUNKS ? calloc(1, sizeof *nc) : NULL;
		if (!nc) {
			atomic_fetch_add_explicit(&b->dropped, 1, memory_order_relaxed); /* relaxed: statistics */
			return;
		}
		/* release: the flusher that acquires `next` sees the zeroed chunk. */
		atomic_store_explicit(&c->next, nc, memory_order_release);
		b->cur = c = nc;
		b->chunks++;
		n = 0;
	}
	c->ev[n] = (tr_event){ ts, dur, id, cat, name, ph };
	/* release: publishes the event's fields to the flusher's acquire load of n. */
	atomic_store_explicit(&c->n, n + 1, memory_order_release);
}

void jobs_trace_span(const char *cat, const char *name, uint64_t t0, uint64_t t1, uint64_t id)
{
	if (jobs_trace_on())
		append('X', cat, name, t0, t1 > t0 ? t1 - t0 : 0, id);
}

void jobs_trace_instant(const char *cat, const char *name, uint64_t id)
{
	if (jobs_trace_on())
		append('i', cat, name, jobs_trace_now(), 0, id);
}

void jobs_trace_flow(char ph, const char *name, uint64_t id)
{
	if (jobs_trace_on())
		append(ph, "flow", name, jobs_trace_now(), 0, id);
}

void jobs_trace_thread_name(const char *name)
{
	if (!jobs_trace_on())
		return;
	tr_buf *b = buf_get();
	if (!b)
		return;
	/* relaxed: only this thread writes `named`; a renamed thread keeps its first name (the
	 * flusher may be reading it). */
	if (atomic_load_explicit(&b->named, memory_order_relaxed))
		return;
	snprintf(b->name, sizeof b->name, "%s", name);
	/* release: the flusher's acquire of `named` sees the name. */
	atomic_store_explicit(&b->named, 1, memory_order_release);
}

void jobs_trace_flush(void)
{
	/* acquire: pairs with init_once's release store, so g_path is visible to a thread that never
	 * called jobs_trace_init (the one destroying the last instance, an atexit handler). */
	if (!atomic_load_explicit(&jobs_trace_flag, memory_order_acquire))
		return;
	pthread_mutex_lock(&g_flush_lock);
	FILE *f = g_path ? fopen(g_path, "w") : NULL;
	if (!f) {
		pthread_mutex_unlock(&g_flush_lock);
		return;
	}
	int pid = (int)getpid();
	fputs("{\"traceEvents\":[\n", f);
	bool first = true;
	uint64_t dropped = 0;
	/* acquire: pairs with the pushes' release CAS (each buffer's tid, head and next). */
	for (tr_buf *b = atomic_load_explicit(&g_bufs, memory_order_acquire); b; b = b->next) {
		/* acquire: pairs with the owner's release store of `named`. */
		const char *tname = atomic_load_explicit(&b->named, memory_order_acquire) ? b->name : "thread";
		fprintf(f, "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"args\":{\"name\":\"%s %u\"}}",
			first ? "" : ",\n", pid, b->tid, tname, b->tid);
		first = false;
		for (tr_chunk *c = b->head; c; c = atomic_load_explicit(&c->next, memory_order_acquire)) {
			/* acquire: pairs with the owner's release store of n (the events below it are complete);
			 * `next` is acquired in the loop header, after the events of this chunk. */
			uint32_t n = atomic_load_explicit(&c->n, memory_order_acquire);
			for (uint32_t i = 0; i < n; i++) {
				const tr_event *e = &c->ev[i];
				fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"%c\",\"ts\":%.3f,\"pid\":%d,\"tid\":%u",
					e->name, e->cat, e->ph, (double)e->ts / 1e3, pid, b->tid);
				if (e->ph == 'X')
					fprintf(f, ",\"dur\":%.3f", (double)e->dur / 1e3);
				if (e->ph == 'i')
					fputs(",\"s\":\"t\"", f);
				if (e->ph == 's' || e->ph == 'f')
					fprintf(f, ",\"id\":%llu%s", (unsigned long long)e->id, e->ph == 'f' ? ",\"bp\":\"e\"" : "");
				if (e->id && e->ph != 's' && e->ph != 'f')
					fprintf(f, ",\"args\":{\"id\":%llu}", (unsigned long long)e->id);
				fputc('}', f);
			}
		}
		dropped += atomic_load_explicit(&b->dropped, memory_order_relaxed); /* relaxed: statistics */
	}
	fprintf(f, "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"ovstage\",\"dropped_events\":%llu}}\n",
		(unsigned long long)dropped);
	fclose(f);
	pthread_mutex_unlock(&g_flush_lock);
}
