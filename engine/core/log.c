/*
 * log.c — the process-global log callback: filter parsing, the bounded message queue, the one
 * dispatcher thread, ovstage_set_log_callback, ovstage_flush_log, ovs_log and ovs_log_shutdown.
 *
 * Design:
 *  - One mutex (g_mu) guards every piece of state below (callback, filter, queue, counters, the
 *    dispatcher's identity). Logging is not a hot path once a callback is installed and a message
 *    passes the filter: a pthread mutex + condition variables keep the queue, the flush barrier
 *    and the thread lifecycle simple and obviously correct. The only lock-free piece is the gate
 *    (ovs_log_gate_, see log.h), which makes the common case — no callback, or a filtered-out
 *    severity — one relaxed load.
 *  - The queue is a ring of OVS_LOG_QUEUE_CAP fixed-size slots in static storage (never
 *    allocated, so nothing to leak or to fail). An emitter formats straight into its slot under the
 *    lock; when the ring is full it only counts the drop. The count of drops since the previous
 *    queued message travels with the next queued message (drops_before), so the dispatcher reports
 *    "N messages dropped" exactly where the loss happened; drops not yet followed by a message are
 *    reported once the ring is empty.
 *  - The dispatcher copies a message out of its slot, releases the lock and calls the callback, so
 *    emitters never wait for a callback. Calls are serialized by g_busy (there can briefly be two
 *    dispatcher threads: see "disable from inside the callback" below).
 *  - Flush barrier: g_enq_seq counts queued messages and g_done_seq the retired ones (delivered,
 *    or discarded by a disable); g_drops_total / g_drops_retired do the same for dropped messages
 *    and their notes. Messages are retired in queue order, so "every message emitted before the
 *    flush is delivered" is g_done_seq >= (g_enq_seq at the call) && g_drops_retired >= (g_drops_total
 *    at the call).
 *  - Thread lifecycle: the dispatcher starts on the first ovstage_set_log_callback that installs a
 *    callback and is joined when the callback is disabled (NULL callback, or ovs_log_shutdown at
 *    the runtime's last release). Each dispatcher carries the generation it was started with and
 *    leaves as soon as g_gen moves on. A dispatcher left running at process exit (callback never
 *    disabled) is harmless: no atexit join, which could hang on a blocking callback or when exit()
 *    is called from inside the callback.
 *
 * Semantics chosen (the spec leaves them open):
 *  - channel_filter: comma-separated `channel=level` entries; spaces and tabs around channels,
 *    levels and entries are ignored; an empty or blank filter means "no entries". Levels are
 *    case-insensitive and map onto ovstage_log_severity_t thresholds as: verbose, debug -> VERBOSE;
 *    info -> INFO; warn, warning -> WARNING; error, fatal -> ERROR (fatal messages are reported as
 *    ERROR, so a fatal threshold is an error threshold); none -> NONE (nothing delivered).
 *    Channels are made of [A-Za-z0-9_.:/-]; an entry applies to that channel and to its dotted
 *    sub-channels ("jobs" covers "jobs.worker"); the longest matching entry wins, and a later
 *    duplicate overrides an earlier one. The channel `*` sets the threshold of every channel no entry
 *    matches, which is otherwise `severity`. A message passes when its severity >= its threshold.
 *  - With a NULL callback, `severity` and `channel_filter` are ignored (not validated).
 *  - Argument errors (INVALID_ARGUMENT) are reported before the runtime check (OP_FAILED), which
 *    applies to installing and to disabling.
 *  - Replacement: messages queued but not yet delivered go to the new callback (they were filtered
 *    by the filter in force when they were emitted). When ovstage_set_log_callback returns, the
 *    previous callback is not running and is never called again — except when the call is made
 *    from inside the callback itself, which cannot wait for itself.
 *  - Disable (NULL callback or ovs_log_shutdown) first delivers every message emitted before the
 *    call (waiting as long as the callback takes), then joins the dispatcher. From inside the
 *    callback it cannot wait: the queued messages are discarded, and the dispatcher thread is
 *    detached and ends when the callback returns.
 *  - ovstage_flush_log from inside the callback cannot wait for itself: OK if nothing else is
 *    pending, else OVSTAGE_ERROR_TIMEOUT at once (with a message).
 *  - Messages are "[channel] text" ("text" with a NULL or empty channel), at most
 *    OVS_LOG_MSG_MAX - 1 bytes (a cut message ends with "..."); the timestamp is the wall-clock
 *    time of the ovs_log call; drop notes are WARNINGs "ovstage log: N message(s) dropped (queue
 *    full)" stamped when delivered.
 */
#include "log.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "errors.h"
#include "runtime.h"

/* The gate (see log.h). Stores happen under g_mu; loads anywhere. OVSTAGE_LOG_NONE is above every
 * deliverable severity, so it closes the gate. */
atomic_int ovs_log_gate_ = OVSTAGE_LOG_NONE;

/* ---- state (all guarded by g_mu) ----------------------------------------------------------------- */

typedef struct log_slot {
	int sev;
	uint32_t len;
	uint64_t drops_before; /* messages dropped between the previous queued message and this one */
	double ts;
	char text[OVS_LOG_MSG_MAX];
} log_slot;

typedef struct filt_entry {
	const char *name; /* into log_filter.text, not NUL-terminated */
	size_t len;
	int thr;
} filt_entry;

typedef struct log_filter {
	size_t n;
	filt_entry *e; /* n entries, in filter order */
	char *text;    /* copy of the filter text */
} log_filter;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_work_cv = PTHREAD_COND_INITIALIZER; /* dispatcher: something to deliver, or leave */
static pthread_cond_t g_done_cv; /* a call finished / state retired; CLOCK_MONOTONIC (init_once) */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static ovstage_log_callback_t g_cb;
static void *g_ud;
static log_filter *g_filt; /* NULL = uniform threshold g_def */
static int g_def = OVSTAGE_LOG_NONE;

static log_slot g_ring[OVS_LOG_QUEUE_CAP];
static uint32_t g_head, g_count;
static uint64_t g_enq_seq, g_done_seq;
static uint64_t g_pending_drops, g_drops_total, g_drops_retired, g_note_inflight;

static bool g_busy; /* a dispatcher is inside the callback */
static uint64_t g_call_started, g_call_finished;

static uint64_t g_gen; /* generation of the current dispatcher; bumped to stop it */
static bool g_thread_live;
static pthread_t g_thread;

static _Thread_local bool tls_dispatcher; /* this thread is (or was) a dispatcher */

static void init_once(void)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&g_done_cv, &a);
	pthread_condattr_destroy(&a);
}

static double wall_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool deliverable(int sev)
{
	return sev == OVSTAGE_LOG_VERBOSE || sev == OVSTAGE_LOG_INFO || sev == OVSTAGE_LOG_WARNING ||
	       sev == OVSTAGE_LOG_ERROR;
}

/* Publishes the lowest threshold in force. Called under g_mu.
 * relaxed suffices: the gate is only a hint that lets ovs_log skip the lock; the authoritative
 * callback and filter are read under g_mu. Any emitter whose ovs_log call happens after this store
 * (same thread, or synchronized with the setter) reads this value or a later one (read-write
 * coherence holds for relaxed operations), so it never misses an installed callback; an emitter
 * racing with the store may see either value, which is fine for a call concurrent with the change. */
static void publish_gate(void)
{
	int gate = g_cb ? g_def : OVSTAGE_LOG_NONE;
	if (g_cb && g_filt)
		for (size_t i = 0; i < g_filt->n; i++)
			if (g_filt->e[i].thr < gate)
				gate = g_filt->e[i].thr;
	atomic_store_explicit(&ovs_log_gate_, gate, memory_order_relaxed);
}

/* Threshold of `channel` under the filter in force. Called under g_mu. */
static int threshold_of(const char *channel)
{
	int thr = g_def;
	if (!g_filt || !channel)
		return thr;
	size_t clen = strlen(channel), best = 0;
	for (size_t i = 0; i < g_filt->n; i++) {
		const filt_entry *e = &g_filt->e[i];
		if (e->len <= clen && e->len >= best && memcmp(e->name, channel, e->len) == 0 &&
		    (e->len == clen || channel[e->len] == '.')) {
			best = e->len;
			thr = e->thr;
		}
	}
	return thr;
}

/* ---- filter parsing ------------------------------------------------------------------------------ */

static const char FN_SET[] = "ovstage_set_log_callback";
#define TOK_MAX 128 /* longest token quoted in a message */

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void trim(const char **b, const char **e)
{
	while (*b < *e && is_blank(**b))
		(*b)++;
	while (*e > *b && is_blank((*e)[-1]))
		(*e)--;
}

static bool chan_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
	       c == '-' || c == '.' || c == ':' || c == '/';
}

static bool ieq(const char *s, size_t n, const char *lit)
{
	size_t m = strlen(lit);
	if (n != m)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c != lit[i])
			return false;
	}
	return true;
}

/* The threshold a level name stands for, or INT_MIN if it is no level. */
static int level_of(const char *s, size_t n)
{
	static const struct {
		const char *name;
		int thr;
	} levels[] = {
		{ "verbose", OVSTAGE_LOG_VERBOSE }, { "debug", OVSTAGE_LOG_VERBOSE }, { "info", OVSTAGE_LOG_INFO },
		{ "warn", OVSTAGE_LOG_WARNING },    { "warning", OVSTAGE_LOG_WARNING }, { "error", OVSTAGE_LOG_ERROR },
		{ "fatal", OVSTAGE_LOG_ERROR },     { "none", OVSTAGE_LOG_NONE },
	};
	for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
		if (ieq(s, n, levels[i].name))
			return levels[i].thr;
	return INT_MIN;
}

static int tok_len(size_t n)
{
	return n > TOK_MAX ? TOK_MAX : (int)n;
}

/* Parses `f` into a new filter (*out; NULL when it has no entries); *def gets the default threshold
 * (`severity` unless a `*` entry overrides it). */
static ovstage_api_status_t parse_filter(const ovx_string_t *f, int severity, log_filter **out, int *def)
{
	*out = NULL;
	*def = severity;
	if (!f->ptr && f->length)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
				   "%s: channel_filter has a NULL ptr and length %zu", FN_SET, f->length);
	const char *all_b = f->ptr, *all_e = f->ptr + f->length;
	trim(&all_b, &all_e);
	if (all_b == all_e)
		return OVSTAGE_OK; /* NULL ptr with 0 length, empty or blank: no entries */

	size_t n = 1;
	for (size_t i = 0; i < f->length; i++)
		n += f->ptr[i] == ',';
	log_filter *flt = malloc(sizeof *flt + n * sizeof(filt_entry) + f->length + 1);
	if (!flt)
		return ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "%s: out of memory parsing channel_filter", FN_SET);
	flt->n = 0;
	flt->e = (filt_entry *)(void *)(flt + 1);
	flt->text = (char *)(flt->e + n);
	memcpy(flt->text, f->ptr, f->length);
	flt->text[f->length] = '\0';

	const char *p = flt->text, *end = flt->text + f->length;
	ovstage_api_status_t st = OVSTAGE_OK;
	while (st == OVSTAGE_OK) {
		const char *q = p;
		while (q < end && *q != ',')
			q++;
		const char *eb = p, *ee = q;
		trim(&eb, &ee);
		const int el = tok_len((size_t)(ee - eb));
		const char *eq = memchr(eb, '=', (size_t)(ee - eb));
		if (eb == ee) {
			st = ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
					 "%s: channel_filter has an empty entry at byte %zu (expected channel=level)",
					 FN_SET, (size_t)(p - flt->text));
			break;
		}
		if (!eq) {
			st = ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
					 "%s: channel_filter entry \"%.*s\" is not channel=level", FN_SET, el, eb);
			break;
		}
		const char *cb = eb, *ce = eq, *lb = eq + 1, *le = ee;
		trim(&cb, &ce);
		trim(&lb, &le);
		if (cb == ce) {
			st = ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
					 "%s: channel_filter entry \"%.*s\" has an empty channel", FN_SET, el, eb);
			break;
		}
		const bool star = ce - cb == 1 && *cb == '*';
		for (const char *c = cb; !star && c < ce; c++) {
			if (!chan_char(*c)) {
				st = ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
						 "%s: channel_filter entry \"%.*s\": channel \"%.*s\" has an invalid "
						 "character (0x%02x; allowed: letters, digits, _ - . : /, or a lone *)",
						 FN_SET, el, eb, tok_len((size_t)(ce - cb)), cb, (unsigned)(unsigned char)*c);
				break;
			}
		}
		if (st != OVSTAGE_OK)
			break;
		if (lb == le) {
			st = ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
					 "%s: channel_filter entry \"%.*s\" has an empty level", FN_SET, el, eb);
			break;
		}
		int thr = level_of(lb, (size_t)(le - lb));
		if (thr == INT_MIN) {
			st = ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
					 "%s: channel_filter entry \"%.*s\": unknown level \"%.*s\" (expected verbose, "
					 "debug, info, warn, warning, error, fatal or none)",
					 FN_SET, el, eb, tok_len((size_t)(le - lb)), lb);
			break;
		}
		if (star) {
			*def = thr;
		} else {
			filt_entry *e = &flt->e[flt->n++];
			e->name = cb;
			e->len = (size_t)(ce - cb);
			e->thr = thr;
		}
		if (q == end)
			break;
		p = q + 1;
	}
	if (st != OVSTAGE_OK || flt->n == 0) {
		free(flt);
		return st;
	}
	*out = flt;
	return OVSTAGE_OK;
}

/* ---- emitter ------------------------------------------------------------------------------------- */

void ovs_logv(ovstage_log_severity_t sev, const char *channel, const char *fmt, va_list ap)
{
	if (!ovs_log_on(sev) || !deliverable((int)sev))
		return;
	const double ts = wall_now();
	pthread_mutex_lock(&g_mu);
	if (!g_cb || (int)sev < threshold_of(channel))
		goto out;
	if (g_count == OVS_LOG_QUEUE_CAP) {
		g_pending_drops++;
		g_drops_total++;
		goto out;
	}
	log_slot *s = &g_ring[(g_head + g_count) % OVS_LOG_QUEUE_CAP];
	size_t off = 0, len;
	if (channel && *channel) {
		int k = snprintf(s->text, sizeof s->text, "[%s] ", channel);
		off = k < 0 ? 0 : ((size_t)k < sizeof s->text ? (size_t)k : sizeof s->text - 1);
	}
	len = off;
	if (off < sizeof s->text - 1) {
		int k = vsnprintf(s->text + off, sizeof s->text - off, fmt, ap);
		if (k > 0)
			len = off + (size_t)k;
	}
	if (len >= sizeof s->text) {
		len = sizeof s->text - 1;
		memcpy(s->text + len - 3, "...", 4);
	}
	s->len = (uint32_t)len;
	s->sev = (int)sev;
	s->ts = ts;
	s->drops_before = g_pending_drops;
	g_pending_drops = 0;
	g_count++;
	g_enq_seq++;
	/* Only dispatchers wait on g_work_cv, and only the current one waits there (a stale one leaves on
	 * the broadcast that retired it), so one wake-up is enough. */
	pthread_cond_signal(&g_work_cv);
out:
	pthread_mutex_unlock(&g_mu);
}

void ovs_log(ovstage_log_severity_t sev, const char *channel, const char *fmt, ...)
{
	if (!ovs_log_on(sev)) /* fast path before touching the va_list */
		return;
	va_list ap;
	va_start(ap, fmt);
	ovs_logv(sev, channel, fmt, ap);
	va_end(ap);
}

/* ---- dispatcher ---------------------------------------------------------------------------------- */

static void *dispatcher_main(void *arg)
{
	const uint64_t gen = (uint64_t)(uintptr_t)arg;
	char buf[OVS_LOG_MSG_MAX];
	tls_dispatcher = true;
	pthread_mutex_lock(&g_mu);
	for (;;) {
		if (g_gen != gen)
			break;
		if (g_busy) { /* a retired dispatcher is still inside the callback: keep calls serialized */
			pthread_cond_wait(&g_done_cv, &g_mu);
			continue;
		}
		uint64_t note = 0;
		int sev = OVSTAGE_LOG_WARNING;
		double ts = 0;
		size_t len = 0;
		if (g_count) {
			log_slot *s = &g_ring[g_head];
			if (s->drops_before) {
				note = s->drops_before;
				s->drops_before = 0;
			} else {
				sev = s->sev;
				ts = s->ts;
				len = s->len;
				memcpy(buf, s->text, len);
				buf[len] = '\0';
				g_head = (g_head + 1) % OVS_LOG_QUEUE_CAP;
				g_count--;
			}
		} else if (g_pending_drops) {
			note = g_pending_drops;
			g_pending_drops = 0;
		} else {
			pthread_cond_wait(&g_work_cv, &g_mu);
			continue;
		}
		if (note) {
			sev = OVSTAGE_LOG_WARNING;
			ts = wall_now();
			int k = snprintf(buf, sizeof buf, "ovstage log: %llu message%s dropped (queue full)",
					 (unsigned long long)note, note == 1 ? "" : "s");
			len = k < 0 ? 0 : (size_t)k;
		}
		ovstage_log_callback_t cb = g_cb;
		void *ud = g_ud;
		const uint64_t id = ++g_call_started;
		g_busy = true;
		g_note_inflight = note;
		pthread_mutex_unlock(&g_mu);

		if (cb) {
			ovx_string_t msg = { buf, len };
			cb((ovstage_log_severity_t)sev, ts, msg, ud);
		}

		pthread_mutex_lock(&g_mu);
		g_busy = false;
		g_call_finished = id;
		if (note)
			g_drops_retired += note;
		else
			g_done_seq++;
		g_note_inflight = 0;
		pthread_cond_broadcast(&g_done_cv); /* flush / replace / disable waiters, a waiting dispatcher */
	}
	pthread_mutex_unlock(&g_mu);
	return NULL;
}

/* Waits (under g_mu) until everything emitted or dropped before now is retired. deadline NULL =
 * no limit. */
static ovstage_api_status_t wait_drained(const struct timespec *deadline)
{
	const uint64_t seq = g_enq_seq, drops = g_drops_total;
	while (g_done_seq < seq || g_drops_retired < drops) {
		if (!deadline) {
			pthread_cond_wait(&g_done_cv, &g_mu);
		} else if (pthread_cond_timedwait(&g_done_cv, &g_mu, deadline) == ETIMEDOUT) {
			if (g_done_seq < seq || g_drops_retired < drops)
				return OVSTAGE_ERROR_TIMEOUT;
		}
	}
	return OVSTAGE_OK;
}

/* Disables the callback: flush (unless on a dispatcher), discard the rest, stop and join the
 * dispatcher (detach it when that is the calling thread). */
static void disable(void)
{
	pthread_once(&g_once, init_once);
	pthread_mutex_lock(&g_mu);
	if (g_cb && !tls_dispatcher)
		(void)wait_drained(NULL);
	log_filter *old = g_filt;
	g_cb = NULL;
	g_ud = NULL;
	g_filt = NULL;
	g_def = OVSTAGE_LOG_NONE;
	publish_gate();
	/* retire what is left (only messages emitted during this call, or all of them from inside the
	 * callback) */
	g_done_seq += g_count;
	g_head = 0;
	g_count = 0;
	g_pending_drops = 0;
	g_drops_retired = g_drops_total - g_note_inflight;
	bool join = false;
	pthread_t t = pthread_self();
	if (g_thread_live) {
		g_thread_live = false;
		g_gen++;
		t = g_thread;
		if (pthread_equal(t, pthread_self()))
			pthread_detach(t); /* inside the callback: it leaves when the callback returns */
		else
			join = true;
		pthread_cond_broadcast(&g_work_cv);
	}
	pthread_cond_broadcast(&g_done_cv);
	pthread_mutex_unlock(&g_mu);
	if (join)
		pthread_join(t, NULL);
	free(old);
}

void ovs_log_shutdown(void)
{
	disable();
}

/* ---- API ----------------------------------------------------------------------------------------- */

OVSTAGE_API ovstage_api_status_t ovstage_set_log_callback(ovstage_log_severity_t severity,
							  const ovx_string_t *channel_filter,
							  ovstage_log_callback_t callback, void *user_data)
{
	ovs_err_clear();
	pthread_once(&g_once, init_once);
	log_filter *nf = NULL;
	int def = (int)severity;
	if (callback) {
		if (!deliverable((int)severity) && severity != OVSTAGE_LOG_NONE)
			return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT,
					   "%s: severity %d is not an ovstage_log_severity_t (VERBOSE -2, INFO -1, "
					   "WARNING 0, ERROR 1, NONE 3)",
					   FN_SET, (int)severity);
		if (channel_filter) {
			ovstage_api_status_t st = parse_filter(channel_filter, (int)severity, &nf, &def);
			if (st != OVSTAGE_OK)
				return st;
		}
	}
	if (!ovs_runtime_active()) {
		free(nf);
		return ovs_err_set(OVSTAGE_ERROR_OP_FAILED,
				   "%s: runtime not bootstrapped: call ovstage_initialize or create an instance first",
				   FN_SET);
	}
	if (!callback) {
		disable();
		return OVSTAGE_OK;
	}

	pthread_mutex_lock(&g_mu);
	if (!g_thread_live) {
		const uint64_t gen = ++g_gen; /* never reused, even if the start fails */
		int e = pthread_create(&g_thread, NULL, dispatcher_main, (void *)(uintptr_t)gen);
		if (e) {
			pthread_mutex_unlock(&g_mu);
			free(nf);
			return ovs_err_set(e == EAGAIN ? OVSTAGE_ERROR_OUT_OF_MEMORY : OVSTAGE_ERROR_INTERNAL,
					   "%s: cannot start the log dispatcher thread: %s", FN_SET, strerror(e));
		}
		g_thread_live = true;
	}
	log_filter *old = g_filt;
	const bool had = g_cb != NULL;
	g_cb = callback;
	g_ud = user_data;
	g_filt = nf;
	g_def = def;
	publish_gate();
	/* The previous callback may be running: wait for that call (not for later ones, which use the new
	 * callback), unless this is that call. */
	if (had && g_busy && !tls_dispatcher) {
		const uint64_t id = g_call_started;
		while (g_call_finished < id)
			pthread_cond_wait(&g_done_cv, &g_mu);
	}
	pthread_mutex_unlock(&g_mu);
	free(old);
	return OVSTAGE_OK;
}

OVSTAGE_API ovstage_api_status_t ovstage_flush_log(ovstage_timeout_ns_t timeout)
{
	static const char fn[] = "ovstage_flush_log";
	ovs_err_clear();
	pthread_once(&g_once, init_once);
	struct timespec dl, *deadline = NULL;
	/* anything above ~68 years is as good as infinite (and keeps tv_sec arithmetic in range) */
	if (timeout != OVSTAGE_TIMEOUT_INFINITE && timeout < ((uint64_t)1 << 61)) {
		clock_gettime(CLOCK_MONOTONIC, &dl);
		uint64_t ns = (uint64_t)dl.tv_nsec + timeout % 1000000000u;
		dl.tv_sec += (time_t)(timeout / 1000000000u + ns / 1000000000u);
		dl.tv_nsec = (long)(ns % 1000000000u);
		deadline = &dl;
	}
	pthread_mutex_lock(&g_mu);
	if (!g_cb) {
		pthread_mutex_unlock(&g_mu);
		return OVSTAGE_OK;
	}
	ovstage_api_status_t st;
	if (tls_dispatcher) {
		/* the current message (and what follows it) cannot be delivered while this call blocks the
		 * dispatcher */
		st = (g_done_seq >= g_enq_seq && g_drops_retired >= g_drops_total) ? OVSTAGE_OK : OVSTAGE_ERROR_TIMEOUT;
		pthread_mutex_unlock(&g_mu);
		if (st != OVSTAGE_OK)
			return ovs_err_set(st, "%s: called from inside the log callback, which cannot wait for its "
					   "own delivery", fn);
		return st;
	}
	st = wait_drained(deadline);
	const uint64_t left = g_enq_seq - g_done_seq;
	pthread_mutex_unlock(&g_mu);
	if (st != OVSTAGE_OK)
		return ovs_err_set(st, "%s: %llu messages not delivered within %llu ns", fn, (unsigned long long)left,
				   (unsigned long long)timeout);
	return OVSTAGE_OK;
}
