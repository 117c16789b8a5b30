/*
 * check_log.c — Check suite of the process-global log callback (engine/log.h, spec 2.5):
 * channel_filter parsing (valid forms, every error with its message, failed calls keep the
 * installed callback), per-channel thresholds and the gate, message format and truncation,
 * delivery order from one emitter, the flush barrier and its timeout, replacement (waits for the
 * previous callback's running call) and disable (flushes first), drop counting when the bounded
 * queue overflows (the note lands where the loss happened), many emitter threads (one dispatcher
 * thread, serialized calls, per-emitter FIFO), calls from inside the callback, the
 * runtime-not-bootstrapped rejection, and shutdown/restart cycles.
 *
 * The runtime is faked: ovs_runtime_active() below returns a test-controlled flag. Nothing here
 * measures time except to prove that a call has not returned yet.
 */
#include <check.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "errors.h"
#include "log.h"
#include "runtime.h"

/* ---- fake runtime -------------------------------------------------------------------------------- */

static atomic_bool g_runtime_active = true;

bool ovs_runtime_active(void)
{
	return atomic_load(&g_runtime_active);
}

/* ---- collector callback -------------------------------------------------------------------------- */

typedef struct rec {
	int sev;
	double ts;
	size_t len;
	char *text;
} rec;

typedef struct coll {
	pthread_mutex_t mu;
	rec *r;
	size_t n, cap;
	atomic_int block;   /* the next `block` calls post `entered` and wait on `release` first */
	sem_t entered, release;
	atomic_int in_cb;   /* calls currently running */
	atomic_bool overlap; /* two calls ran at once */
	atomic_bool thread_changed;
	pthread_t thread;
	atomic_bool thread_set;
	int sleep_us;        /* per call */
	/* behaviours from inside the callback */
	atomic_bool disable_on_stop;     /* a message "stop" calls set_log_callback(NULL) */
	atomic_int inner_status;         /* status of that call */
	atomic_int inner_flush_status;   /* status of ovstage_flush_log from inside */
	atomic_bool inner_done;
} coll;

static void coll_init(coll *c)
{
	memset(c, 0, sizeof *c);
	pthread_mutex_init(&c->mu, NULL);
	sem_init(&c->entered, 0, 0);
	sem_init(&c->release, 0, 0);
	atomic_init(&c->inner_status, -1);
	atomic_init(&c->inner_flush_status, -1);
}

static void coll_fini(coll *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->r[i].text);
	free(c->r);
	sem_destroy(&c->entered);
	sem_destroy(&c->release);
	pthread_mutex_destroy(&c->mu);
}

static size_t coll_n(coll *c)
{
	pthread_mutex_lock(&c->mu);
	size_t n = c->n;
	pthread_mutex_unlock(&c->mu);
	return n;
}

static void collect(ovstage_log_severity_t sev, double ts, ovx_string_t msg, void *ud)
{
	coll *c = ud;
	if (atomic_fetch_add(&c->in_cb, 1) != 0)
		atomic_store(&c->overlap, true);
	if (!atomic_load(&c->thread_set)) {
		c->thread = pthread_self();
		atomic_store(&c->thread_set, true);
	} else if (!pthread_equal(c->thread, pthread_self())) {
		atomic_store(&c->thread_changed, true);
	}
	if (atomic_load(&c->block) > 0) {
		atomic_fetch_sub(&c->block, 1);
		sem_post(&c->entered);
		sem_wait(&c->release);
	}
	if (c->sleep_us)
		usleep((useconds_t)c->sleep_us);
	pthread_mutex_lock(&c->mu);
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 256;
		c->r = realloc(c->r, c->cap * sizeof *c->r);
	}
	rec *r = &c->r[c->n++];
	r->sev = (int)sev;
	r->ts = ts;
	r->len = msg.length;
	r->text = malloc(msg.length + 1);
	memcpy(r->text, msg.ptr, msg.length);
	r->text[msg.length] = '\0';
	pthread_mutex_unlock(&c->mu);
	if (atomic_load(&c->disable_on_stop) && msg.length == 4 && memcmp(msg.ptr, "stop", 4) == 0) {
		atomic_store(&c->inner_flush_status, (int)ovstage_flush_log(0));
		atomic_store(&c->inner_status, (int)ovstage_set_log_callback(OVSTAGE_LOG_INFO, NULL, NULL, NULL));
		atomic_store(&c->inner_done, true);
	}
	atomic_fetch_sub(&c->in_cb, 1);
}

/* ---- helpers ------------------------------------------------------------------------------------- */

static ovx_string_t S(const char *s)
{
	ovx_string_t r = { s, strlen(s) };
	return r;
}

static double wall(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The last error contains `needle`. */
static void ck_err_has(const char *needle)
{
	ovx_string_t e = ovstage_get_last_error();
	ck_assert_ptr_nonnull(e.ptr);
	char buf[OVS_ERR_MAX + 1];
	size_t n = e.length < OVS_ERR_MAX ? e.length : OVS_ERR_MAX;
	memcpy(buf, e.ptr, n);
	buf[n] = '\0';
	ck_assert_msg(strstr(buf, needle) != NULL, "last error \"%s\" lacks \"%s\"", buf, needle);
}

static void install(coll *c, ovstage_log_severity_t sev, const char *filter)
{
	ovx_string_t f = filter ? S(filter) : (ovx_string_t){ NULL, 0 };
	ovstage_api_status_t st = ovstage_set_log_callback(sev, filter ? &f : NULL, collect, c);
	ck_assert_int_eq(st, OVSTAGE_OK);
}

static void flush_ok(void)
{
	ck_assert_int_eq(ovstage_flush_log(OVSTAGE_TIMEOUT_INFINITE), OVSTAGE_OK);
}

static void setup(void)
{
	atomic_store(&g_runtime_active, true);
}

static void teardown(void)
{
	ovs_log_shutdown();
	atomic_store(&g_runtime_active, true);
}

/* ---- filter parsing ------------------------------------------------------------------------------ */

START_TEST(test_filter_valid)
{
	static const char *ok[] = {
		"render=info",
		" a = warn , b.c=ERROR,*=none ",
		"x=debug,x=fatal",
		"jobs.worker=Verbose,engine:io=warning,p/q-r_s=none",
		"",
		"   ",
		"*=info",
	};
	coll c;
	coll_init(&c);
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		ovx_string_t f = S(ok[i]);
		ck_assert_msg(ovstage_set_log_callback(OVSTAGE_LOG_WARNING, &f, collect, &c) == OVSTAGE_OK,
			      "filter \"%s\" rejected", ok[i]);
		ck_assert_ptr_null(ovstage_get_last_error().ptr);
	}
	ovx_string_t none = { NULL, 0 };
	ck_assert_int_eq(ovstage_set_log_callback(OVSTAGE_LOG_WARNING, &none, collect, &c), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_set_log_callback(OVSTAGE_LOG_NONE, NULL, collect, &c), OVSTAGE_OK);
	ovs_log_shutdown();
	coll_fini(&c);
}
END_TEST

START_TEST(test_filter_errors)
{
	static const struct {
		const char *filter;
		const char *needle[3];
	} bad[] = {
		{ "render", { "\"render\"", "is not channel=level", NULL } },
		{ "=info", { "\"=info\"", "empty channel", NULL } },
		{ "a=loud", { "\"a=loud\"", "unknown level \"loud\"", "verbose" } },
		{ "a=info,,b=warn", { "empty entry", "byte 7", NULL } },
		{ "a=info,", { "empty entry", NULL, NULL } },
		{ "a b=info", { "\"a b=info\"", "channel \"a b\"", "invalid character (0x20" } },
		{ "a=", { "\"a=\"", "empty level", NULL } },
		{ "a=info,b=warn,c=dbg", { "\"c=dbg\"", "unknown level \"dbg\"", NULL } },
		{ "a*=info", { "channel \"a*\"", "invalid character", NULL } },
		{ "a=in fo", { "unknown level \"in fo\"", NULL, NULL } },
	};
	coll c;
	coll_init(&c);
	install(&c, OVSTAGE_LOG_INFO, NULL);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ovx_string_t f = S(bad[i].filter);
		ck_assert_msg(ovstage_set_log_callback(OVSTAGE_LOG_INFO, &f, collect, NULL) ==
				      OVSTAGE_ERROR_INVALID_ARGUMENT,
			      "filter \"%s\" accepted", bad[i].filter);
		ck_err_has("ovstage_set_log_callback");
		for (int k = 0; k < 3 && bad[i].needle[k]; k++)
			ck_err_has(bad[i].needle[k]);
	}
	ovx_string_t nullptr_len = { NULL, 5 };
	ck_assert_int_eq(ovstage_set_log_callback(OVSTAGE_LOG_INFO, &nullptr_len, collect, NULL),
			 OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_err_has("NULL ptr and length 5");
	ck_assert_int_eq(ovstage_set_log_callback((ovstage_log_severity_t)2, NULL, collect, NULL),
			 OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_err_has("severity 2");
	ck_assert_int_eq(ovstage_set_log_callback((ovstage_log_severity_t)-3, NULL, collect, NULL),
			 OVSTAGE_ERROR_INVALID_ARGUMENT);
	/* With a NULL callback, severity and filter are ignored. */
	/* (not exercised here: it would disable the callback installed above) */

	/* The rejected calls left the first callback in place. */
	ovs_log(OVSTAGE_LOG_INFO, "x", "still here");
	flush_ok();
	ck_assert_uint_eq(coll_n(&c), 1);
	ck_assert_str_eq(c.r[0].text, "[x] still here");
	ovs_log_shutdown();
	coll_fini(&c);
}
END_TEST

/* ---- thresholds ---------------------------------------------------------------------------------- */

START_TEST(test_thresholds_per_channel)
{
	coll c;
	coll_init(&c);
	install(&c, OVSTAGE_LOG_WARNING, "jobs=error, engine=verbose, engine.quiet=none, dup=none, dup=info");
	ck_assert(ovs_log_on(OVSTAGE_LOG_VERBOSE)); /* engine=verbose opens the gate */
	ovs_log(OVSTAGE_LOG_INFO, "jobs", "1 drop");
	ovs_log(OVSTAGE_LOG_ERROR, "jobs", "2 keep");
	ovs_log(OVSTAGE_LOG_WARNING, "jobs.worker", "3 drop (sub-channel of jobs)");
	ovs_log(OVSTAGE_LOG_ERROR, "jobs.worker", "4 keep");
	ovs_log(OVSTAGE_LOG_VERBOSE, "engine", "5 keep");
	ovs_log(OVSTAGE_LOG_ERROR, "engine.quiet", "6 drop");
	ovs_log(OVSTAGE_LOG_VERBOSE, "engine.quietly", "7 keep (engine)");
	ovs_log(OVSTAGE_LOG_ERROR, "engine.quiet.deep", "8 drop");
	ovs_log(OVSTAGE_LOG_INFO, "other", "9 drop");
	ovs_log(OVSTAGE_LOG_WARNING, "other", "10 keep");
	ovs_log(OVSTAGE_LOG_WARNING, "jobsx", "11 keep (not under jobs)");
	ovs_log(OVSTAGE_LOG_ERROR, NULL, "12 keep");
	ovs_log(OVSTAGE_LOG_INFO, "", "13 drop");
	ovs_log(OVSTAGE_LOG_INFO, "dup", "14 keep (last duplicate wins)");
	ovs_log(OVSTAGE_LOG_NONE, "engine", "15 never");
	ovs_log((ovstage_log_severity_t)2, "engine", "16 never");
	flush_ok();
	static const struct {
		int sev;
		const char *text;
	} want[] = {
		{ OVSTAGE_LOG_ERROR, "[jobs] 2 keep" },
		{ OVSTAGE_LOG_ERROR, "[jobs.worker] 4 keep" },
		{ OVSTAGE_LOG_VERBOSE, "[engine] 5 keep" },
		{ OVSTAGE_LOG_VERBOSE, "[engine.quietly] 7 keep (engine)" },
		{ OVSTAGE_LOG_WARNING, "[other] 10 keep" },
		{ OVSTAGE_LOG_WARNING, "[jobsx] 11 keep (not under jobs)" },
		{ OVSTAGE_LOG_ERROR, "12 keep" },
		{ OVSTAGE_LOG_INFO, "[dup] 14 keep (last duplicate wins)" },
	};
	ck_assert_uint_eq(coll_n(&c), sizeof want / sizeof want[0]);
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		ck_assert_int_eq(c.r[i].sev, want[i].sev);
		ck_assert_str_eq(c.r[i].text, want[i].text);
	}

	/* `*` sets the default; uniform thresholds without a filter; the gate follows. */
	install(&c, OVSTAGE_LOG_VERBOSE, "*=error,render=info");
	ck_assert(!ovs_log_on(OVSTAGE_LOG_VERBOSE));
	ck_assert(ovs_log_on(OVSTAGE_LOG_INFO));
	ovs_log(OVSTAGE_LOG_WARNING, "misc", "a drop");
	ovs_log(OVSTAGE_LOG_INFO, "render", "b keep");
	install(&c, OVSTAGE_LOG_INFO, NULL);
	ck_assert(!ovs_log_on(OVSTAGE_LOG_VERBOSE));
	ovs_log(OVSTAGE_LOG_VERBOSE, "misc", "c drop");
	ovs_log(OVSTAGE_LOG_INFO, "misc", "d keep");
	install(&c, OVSTAGE_LOG_NONE, "a=none");
	ck_assert(!ovs_log_on(OVSTAGE_LOG_ERROR));
	ovs_log(OVSTAGE_LOG_ERROR, "a", "e drop");
	install(&c, OVSTAGE_LOG_ERROR, "a=fatal,b=debug");
	ovs_log(OVSTAGE_LOG_WARNING, "a", "f drop");
	ovs_log(OVSTAGE_LOG_ERROR, "a", "g keep");
	ovs_log(OVSTAGE_LOG_VERBOSE, "b", "h keep");
	flush_ok();
	ck_assert_uint_eq(coll_n(&c), 12);
	ck_assert_str_eq(c.r[8].text, "[render] b keep");
	ck_assert_str_eq(c.r[9].text, "[misc] d keep");
	ck_assert_str_eq(c.r[10].text, "[a] g keep");
	ck_assert_str_eq(c.r[11].text, "[b] h keep");

	ovs_log_shutdown();
	ck_assert(!ovs_log_on(OVSTAGE_LOG_ERROR));
	coll_fini(&c);
}
END_TEST

/* ---- format -------------------------------------------------------------------------------------- */

START_TEST(test_format_and_timestamp)
{
	coll c;
	coll_init(&c);
	install(&c, OVSTAGE_LOG_VERBOSE, NULL);
	char big[3000];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	double t0 = wall();
	ovs_log(OVSTAGE_LOG_INFO, "fmt", "%d-%s-%.1f", 7, "seven", 7.5);
	ovs_log(OVSTAGE_LOG_WARNING, "long", "%s", big);
	ovs_log(OVSTAGE_LOG_ERROR, NULL, "%s", big);
	double t1 = wall();
	flush_ok();
	ck_assert_uint_eq(coll_n(&c), 3);
	ck_assert_str_eq(c.r[0].text, "[fmt] 7-seven-7.5");
	ck_assert_int_eq(c.r[0].sev, OVSTAGE_LOG_INFO);
	for (int i = 1; i < 3; i++) {
		ck_assert_uint_eq(c.r[i].len, OVS_LOG_MSG_MAX - 1);
		ck_assert_uint_eq(strlen(c.r[i].text), OVS_LOG_MSG_MAX - 1);
		ck_assert_str_eq(c.r[i].text + OVS_LOG_MSG_MAX - 4, "...");
	}
	ck_assert(strncmp(c.r[1].text, "[long] xxx", 10) == 0);
	ck_assert(strncmp(c.r[2].text, "xxx", 3) == 0);
	for (int i = 0; i < 3; i++) {
		ck_assert(c.r[i].ts >= t0 - 0.001);
		ck_assert(c.r[i].ts <= t1 + 0.001);
	}
	ovs_log_shutdown();
	coll_fini(&c);
}
END_TEST

/* ---- order, flush -------------------------------------------------------------------------------- */

START_TEST(test_order_one_emitter)
{
	coll c;
	coll_init(&c);
	install(&c, OVSTAGE_LOG_VERBOSE, NULL);
	size_t expect = 0;
	for (int round = 0; round < 5; round++) {
		for (int i = 0; i < 1000; i++) /* under the queue capacity: nothing can be dropped */
			ovs_log((ovstage_log_severity_t)(OVSTAGE_LOG_VERBOSE + i % 4), "o", "%d", round * 1000 + i);
		flush_ok();
		expect += 1000;
		ck_assert_uint_eq(coll_n(&c), expect);
	}
	for (size_t i = 0; i < expect; i++) {
		char want[32];
		snprintf(want, sizeof want, "[o] %zu", i);
		ck_assert_str_eq(c.r[i].text, want);
		ck_assert_int_eq(c.r[i].sev, OVSTAGE_LOG_VERBOSE + (int)(i % 1000) % 4);
		if (i)
			ck_assert(c.r[i].ts >= c.r[i - 1].ts);
	}
	ck_assert(!atomic_load(&c.overlap));
	ck_assert(!atomic_load(&c.thread_changed));
	ck_assert(!pthread_equal(c.thread, pthread_self()));
	ovs_log_shutdown();
	coll_fini(&c);
}
END_TEST

START_TEST(test_flush_barrier)
{
	/* no callback: OK at once */
	ck_assert_int_eq(ovstage_flush_log(0), OVSTAGE_OK);
	ck_assert_int_eq(ovstage_flush_log(OVSTAGE_TIMEOUT_INFINITE), OVSTAGE_OK);

	coll c;
	coll_init(&c);
	c.sleep_us = 200; /* a slow callback: the flush really has to wait */
	install(&c, OVSTAGE_LOG_VERBOSE, NULL);
	for (int round = 1; round <= 3; round++) {
		for (int i = 0; i < 100; i++)
			ovs_log(OVSTAGE_LOG_INFO, NULL, "m%d", i);
		flush_ok();
		ck_assert_uint_eq(coll_n(&c), (size_t)(100 * round));
	}
	/* a finite timeout that is long enough */
	ovs_log(OVSTAGE_LOG_INFO, NULL, "one more");
	ck_assert_int_eq(ovstage_flush_log(10ull * 1000 * 1000 * 1000), OVSTAGE_OK);
	ck_assert_uint_eq(coll_n(&c), 301);

	/* timeout: the callback is held */
	c.sleep_us = 0;
	atomic_store(&c.block, 1);
	ovs_log(OVSTAGE_LOG_INFO, NULL, "held");
	sem_wait(&c.entered);
	ovs_log(OVSTAGE_LOG_INFO, NULL, "behind");
	ck_assert_int_eq(ovstage_flush_log(0), OVSTAGE_ERROR_TIMEOUT);
	ck_err_has("ovstage_flush_log");
	ck_err_has("2 messages not delivered");
	ck_assert_int_eq(ovstage_flush_log(20 * 1000 * 1000), OVSTAGE_ERROR_TIMEOUT);
	sem_post(&c.release);
	flush_ok();
	ck_assert_ptr_null(ovstage_get_last_error().ptr);
	ck_assert_uint_eq(coll_n(&c), 303);
	ck_assert_str_eq(c.r[302].text, "behind");
	ovs_log_shutdown();
	coll_fini(&c);
}
END_TEST

/* ---- replacement, disable ------------------------------------------------------------------------ */

typedef struct setter_arg {
	coll *c;
	atomic_bool returned;
	ovstage_api_status_t st;
} setter_arg;

static void *setter_main(void *p)
{
	setter_arg *a = p;
	a->st = ovstage_set_log_callback(OVSTAGE_LOG_VERBOSE, NULL, collect, a->c);
	atomic_store(&a->returned, true);
	return NULL;
}

START_TEST(test_replace_and_disable)
{
	coll a, b;
	coll_init(&a);
	coll_init(&b);
	install(&a, OVSTAGE_LOG_VERBOSE, NULL);
	ovs_log(OVSTAGE_LOG_INFO, NULL, "a1");
	ovs_log(OVSTAGE_LOG_INFO, NULL, "a2");
	flush_ok();
	install(&b, OVSTAGE_LOG_INFO, NULL); /* INFO: the gate shows when `a` (VERBOSE) is back */
	ovs_log(OVSTAGE_LOG_INFO, NULL, "b1");
	flush_ok();
	ck_assert_uint_eq(coll_n(&a), 2);
	ck_assert_uint_eq(coll_n(&b), 1);
	ck_assert(pthread_equal(a.thread, b.thread)); /* one dispatcher, kept across replacement */

	/* Replacement waits for the previous callback's running call. */
	atomic_store(&b.block, 1);
	ovs_log(OVSTAGE_LOG_INFO, NULL, "b2 (held)");
	sem_wait(&b.entered);
	ovs_log(OVSTAGE_LOG_INFO, NULL, "queued: goes to a");
	setter_arg sa = { .c = &a };
	atomic_init(&sa.returned, false);
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, setter_main, &sa), 0);
	while (!ovs_log_on(OVSTAGE_LOG_VERBOSE)) /* the setter has swapped in `a` */
		usleep(1000);
	usleep(50 * 1000);
	ck_assert_msg(!atomic_load(&sa.returned), "replacement returned while the previous callback ran");
	sem_post(&b.release);
	pthread_join(t, NULL);
	ck_assert_int_eq(sa.st, OVSTAGE_OK);
	ck_assert_uint_eq(coll_n(&b), 2); /* its running call completed before the setter returned */
	flush_ok();
	ck_assert_uint_eq(coll_n(&b), 2);
	ck_assert_uint_eq(coll_n(&a), 3);
	ck_assert_str_eq(a.r[2].text, "queued: goes to a");

	/* NULL callback: flushes (a slow callback gets everything emitted before), then disables. */
	a.sleep_us = 500;
	for (int i = 0; i < 50; i++)
		ovs_log(OVSTAGE_LOG_INFO, NULL, "late %d", i);
	ck_assert_int_eq(ovstage_set_log_callback(OVSTAGE_LOG_INFO, NULL, NULL, NULL), OVSTAGE_OK);
	ck_assert_uint_eq(coll_n(&a), 53);
	ck_assert_str_eq(a.r[52].text, "late 49");
	ck_assert(!ovs_log_on(OVSTAGE_LOG_ERROR));
	ovs_log(OVSTAGE_LOG_ERROR, NULL, "nobody listens");
	ck_assert_int_eq(ovstage_flush_log(0), OVSTAGE_OK);
	ck_assert_uint_eq(coll_n(&a), 53);
	/* disabling again is harmless; NULL callback ignores severity and filter */
	ovx_string_t junk = S("this is not a filter");
	ck_assert_int_eq(ovstage_set_log_callback((ovstage_log_severity_t)42, &junk, NULL, NULL), OVSTAGE_OK);

	/* a new install starts a new dispatcher */
	install(&b, OVSTAGE_LOG_VERBOSE, NULL);
	ovs_log(OVSTAGE_LOG_INFO, NULL, "b3");
	flush_ok();
	ck_assert_uint_eq(coll_n(&b), 3);
	ovs_log_shutdown();
	coll_fini(&a);
	coll_fini(&b);
}
END_TEST

/* ---- drops --------------------------------------------------------------------------------------- */

START_TEST(test_drops_counted)
{
	coll c;
	coll_init(&c);
	install(&c, OVSTAGE_LOG_VERBOSE, NULL);

	/* Hold the dispatcher in the call of "first", fill the queue, lose 5, then let it pop one
	 * message and hold it again so that "after" finds room: the note goes between the lost ones'
	 * neighbours. */
	atomic_store(&c.block, 2);
	ovs_log(OVSTAGE_LOG_INFO, NULL, "first");
	sem_wait(&c.entered);
	for (unsigned i = 0; i < OVS_LOG_QUEUE_CAP + 5; i++) /* never blocks although nothing drains */
		ovs_log(OVSTAGE_LOG_INFO, NULL, "m%u", i);
	sem_post(&c.release);
	sem_wait(&c.entered); /* now inside the call of m0: one slot is free */
	ovs_log(OVSTAGE_LOG_INFO, NULL, "after");
	ovs_log(OVSTAGE_LOG_INFO, NULL, "lost"); /* the queue is full again */
	sem_post(&c.release);
	flush_ok();

	const size_t n = 1 + OVS_LOG_QUEUE_CAP + 1 + 1 + 1; /* first, m0..m1023, note, after, note */
	ck_assert_uint_eq(coll_n(&c), n);
	ck_assert_str_eq(c.r[0].text, "first");
	for (unsigned i = 0; i < OVS_LOG_QUEUE_CAP; i++) {
		char want[32];
		snprintf(want, sizeof want, "m%u", i);
		ck_assert_str_eq(c.r[1 + i].text, want);
	}
	ck_assert_str_eq(c.r[1 + OVS_LOG_QUEUE_CAP].text, "ovstage log: 5 messages dropped (queue full)");
	ck_assert_int_eq(c.r[1 + OVS_LOG_QUEUE_CAP].sev, OVSTAGE_LOG_WARNING);
	ck_assert_str_eq(c.r[2 + OVS_LOG_QUEUE_CAP].text, "after");
	ck_assert_str_eq(c.r[3 + OVS_LOG_QUEUE_CAP].text, "ovstage log: 1 message dropped (queue full)");

	/* Trailing drops with nothing after them are reported too, and a flush waits for the note. */
	atomic_store(&c.block, 1);
	ovs_log(OVSTAGE_LOG_INFO, NULL, "first");
	sem_wait(&c.entered);
	for (unsigned i = 0; i < OVS_LOG_QUEUE_CAP + 37; i++)
		ovs_log(OVSTAGE_LOG_INFO, NULL, "k%u", i);
	sem_post(&c.release);
	flush_ok();
	ck_assert_uint_eq(coll_n(&c), n + 1 + OVS_LOG_QUEUE_CAP + 1);
	ck_assert_str_eq(c.r[n + OVS_LOG_QUEUE_CAP].text, "k1023");
	ck_assert_str_eq(c.r[n + OVS_LOG_QUEUE_CAP + 1].text, "ovstage log: 37 messages dropped (queue full)");
	ovs_log_shutdown();
	coll_fini(&c);
}
END_TEST

/* ---- many emitters ------------------------------------------------------------------------------- */

#define EMITTERS 8
#define PER_EMITTER 2000

static void *emitter_main(void *p)
{
	int id = (int)(intptr_t)p;
	for (int i = 0; i < PER_EMITTER; i++)
		ovs_log(OVSTAGE_LOG_INFO, "t", "%d %d", id, i);
	return NULL;
}

START_TEST(test_many_emitters)
{
	coll c;
	coll_init(&c);
	install(&c, OVSTAGE_LOG_VERBOSE, NULL);
	pthread_t t[EMITTERS];
	for (int i = 0; i < EMITTERS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, emitter_main, (void *)(intptr_t)i), 0);
	for (int i = 0; i < EMITTERS; i++)
		pthread_join(t[i], NULL);
	flush_ok();
	ck_assert(!atomic_load(&c.overlap));
	ck_assert(!atomic_load(&c.thread_changed));
	int last[EMITTERS];
	for (int i = 0; i < EMITTERS; i++)
		last[i] = -1;
	unsigned long long delivered = 0, dropped = 0;
	size_t n = coll_n(&c);
	for (size_t k = 0; k < n; k++) {
		int id, seq;
		unsigned long long d;
		if (sscanf(c.r[k].text, "[t] %d %d", &id, &seq) == 2) {
			ck_assert(id >= 0 && id < EMITTERS);
			ck_assert_msg(seq > last[id], "emitter %d: %d after %d", id, seq, last[id]);
			last[id] = seq;
			delivered++;
		} else {
			ck_assert_msg(sscanf(c.r[k].text, "ovstage log: %llu message", &d) == 1, "odd message \"%s\"",
				      c.r[k].text);
			dropped += d;
		}
	}
	ck_assert_uint_eq(delivered + dropped, (unsigned long long)EMITTERS * PER_EMITTER);
	ovs_log_shutdown();
	coll_fini(&c);
}
END_TEST

/* ---- calls from inside the callback -------------------------------------------------------------- */

START_TEST(test_disable_from_callback)
{
	coll c, d;
	coll_init(&c);
	coll_init(&d);
	atomic_store(&c.disable_on_stop, true);
	install(&c, OVSTAGE_LOG_VERBOSE, NULL);
	ovs_log(OVSTAGE_LOG_INFO, NULL, "before");
	ovs_log(OVSTAGE_LOG_INFO, NULL, "stop");
	while (!atomic_load(&c.inner_done))
		usleep(1000);
	ck_assert_int_eq(atomic_load(&c.inner_flush_status), OVSTAGE_ERROR_TIMEOUT);
	ck_assert_int_eq(atomic_load(&c.inner_status), OVSTAGE_OK);
	ck_assert(!ovs_log_on(OVSTAGE_LOG_ERROR));
	ck_assert_int_eq(ovstage_flush_log(0), OVSTAGE_OK);
	/* re-install from outside while the retired dispatcher may still be finishing */
	install(&d, OVSTAGE_LOG_VERBOSE, NULL);
	ovs_log(OVSTAGE_LOG_INFO, NULL, "again");
	flush_ok();
	ck_assert_uint_eq(coll_n(&c), 2);
	ck_assert_uint_eq(coll_n(&d), 1);
	ck_assert_str_eq(d.r[0].text, "again");
	ovs_log_shutdown();
	while (atomic_load(&c.in_cb))
		usleep(1000);
	coll_fini(&c);
	coll_fini(&d);
}
END_TEST

/* ---- runtime ------------------------------------------------------------------------------------- */

START_TEST(test_runtime_not_bootstrapped)
{
	coll c;
	coll_init(&c);
	atomic_store(&g_runtime_active, false);
	ck_assert_int_eq(ovstage_set_log_callback(OVSTAGE_LOG_INFO, NULL, collect, &c), OVSTAGE_ERROR_OP_FAILED);
	ck_err_has("ovstage_set_log_callback: runtime not bootstrapped: call ovstage_initialize or create an "
		   "instance first");
	ck_assert_int_eq(ovstage_set_log_callback(OVSTAGE_LOG_INFO, NULL, NULL, NULL), OVSTAGE_ERROR_OP_FAILED);
	/* argument errors come first */
	ovx_string_t f = S("x=nope");
	ck_assert_int_eq(ovstage_set_log_callback(OVSTAGE_LOG_INFO, &f, collect, &c),
			 OVSTAGE_ERROR_INVALID_ARGUMENT);
	ck_assert(!ovs_log_on(OVSTAGE_LOG_ERROR));
	ovs_log(OVSTAGE_LOG_ERROR, NULL, "nobody");
	ck_assert_int_eq(ovstage_flush_log(0), OVSTAGE_OK);
	atomic_store(&g_runtime_active, true);
	install(&c, OVSTAGE_LOG_INFO, NULL);
	ovs_log(OVSTAGE_LOG_ERROR, NULL, "somebody");
	flush_ok();
	ck_assert_uint_eq(coll_n(&c), 1);
	ovs_log_shutdown();
	coll_fini(&c);
}
END_TEST

START_TEST(test_shutdown_restart_cycles)
{
	coll c;
	coll_init(&c);
	for (int i = 0; i < 50; i++) {
		install(&c, OVSTAGE_LOG_VERBOSE, i % 2 ? "a=info" : NULL);
		for (int k = 0; k < 10; k++)
			ovs_log(OVSTAGE_LOG_INFO, "a", "%d.%d", i, k);
		ovs_log_shutdown(); /* delivers what is queued, then joins */
		ck_assert_uint_eq(coll_n(&c), (size_t)(10 * (i + 1)));
		ck_assert(!ovs_log_on(OVSTAGE_LOG_ERROR));
	}
	ovs_log_shutdown(); /* idempotent */
	coll_fini(&c);
}
END_TEST

/* ---- suite --------------------------------------------------------------------------------------- */

static Suite *log_suite(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("log");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_filter_valid);
	tcase_add_test(tc, test_filter_errors);
	tcase_add_test(tc, test_thresholds_per_channel);
	tcase_add_test(tc, test_format_and_timestamp);
	tcase_add_test(tc, test_order_one_emitter);
	tcase_add_test(tc, test_flush_barrier);
	tcase_add_test(tc, test_replace_and_disable);
	tcase_add_test(tc, test_drops_counted);
	tcase_add_test(tc, test_many_emitters);
	tcase_add_test(tc, test_disable_from_callback);
	tcase_add_test(tc, test_runtime_not_bootstrapped);
	tcase_add_test(tc, test_shutdown_restart_cycles);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(log_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
