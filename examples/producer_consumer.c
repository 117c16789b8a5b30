/*
 * producer_consumer.c — spec example 2: a producer writes sensor readings at ordinal = tick and seals
 * each tick by advancing the global write floor; a consumer polls that floor and reads only what
 * changed since it last looked (a range read [last_seen + 1, floor]), tombstones included.
 *
 * Four sensor prims /World/Sensors/S0..S3 get one single-prim query each (the producer writes a
 * sensor through its own query) and one query over all four (the consumer reads through it). The
 * attribute "reading" is float32, value 10 * tick + sensor:
 *
 *   tick 1: S0, S1    tick 2: S1, S2    tick 3: S2, S0
 *   tick 4: S3, S0    tick 5: delete S2 (the whole prim)    tick 6: S1, S3
 *
 * Default mode is deterministic: the consumer reads after tick 3 and after tick 6. Expected output:
 *   producer tick 1: wrote S0 = 10.0, S1 = 11.0 (floor -> 1)
 *   producer tick 2: wrote S1 = 21.0, S2 = 22.0 (floor -> 2)
 *   producer tick 3: wrote S2 = 32.0, S0 = 30.0 (floor -> 3)
 *   consumer: floor 3, last_seen 0 -> reading delta [1, 3]
 *     value group (ordinal 3): S0 = 30.0, S1 = 21.0, S2 = 32.0
 *     delta batch: 3 prim changes
 *   consumer: last_seen -> 3
 *   producer tick 4: wrote S3 = 43.0, S0 = 40.0 (floor -> 4)
 *   producer tick 5: deleted S2 entirely (floor -> 5)
 *   producer tick 6: wrote S1 = 61.0, S3 = 63.0 (floor -> 6)
 *   consumer: floor 6, last_seen 3 -> reading delta [4, 6]
 *     value group (ordinal 6): S0 = 40.0, S1 = 61.0, S3 = 63.0
 *     tombstone group (ordinal 6): S2 deleted
 *     delta batch: 4 prim changes
 *   consumer: last_seen -> 6
 *
 * --threads runs the producer and the consumer on two threads: the consumer polls the floor until
 * it reaches 6, so how the ticks batch into deltas varies from run to run. A rejected read
 * (OP_FAILED, OUT_OF_RANGE, WRITE_FLOOR_VIOLATION) is reported and recovered from: the consumer
 * re-polls, and on OUT_OF_RANGE rebases with a latest read. It keeps a mirror of the sensors built
 * only from what it read and checks it against the producer's final state (exit 1 on a mismatch or
 * on any producer failure).
 *
 * A delta of three ticks needs the column's history of those ticks; this implementation keeps the
 * last 2 sealed versions per column by default, so the example raises that to 8 with the
 * OVSTAGE_CONFIG_EXT_RETENTION configuration entry (ovstage_ext.h).
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep, clock_gettime */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include <ovstage/ovstage_ext.h>

#include "example_utils.h"

#define SENSORS 4
#define TICKS 6

typedef struct example {
	ovstage_instance_t *st;
	path_dictionary_instance_t *pd;
	ovx_token_t attr;                       /* "reading" */
	ovx_primpath_t paths[SENSORS];          /* /World/Sensors/S<i>, to name the prims of a group */
	ovx_primpath_list_t one_list[SENSORS];  /* one single-prim list per sensor */
	ovstage_query_handle_t one[SENSORS];    /* the producer writes through these */
	ovx_primpath_list_t all_list;           /* all four */
	ovstage_query_handle_t all;             /* the consumer reads through this */
	bool threaded;
	uint64_t last_seen;                     /* consumer: everything <= last_seen was consumed */
	float mirror[SENSORS];                  /* consumer: the sensors as read */
	bool mirror_present[SENSORS];
	_Atomic int producer_failures;
	int consumer_rejections;
} example;

/* ---- output: lines of one consumer batch are printed together (the producer may print meanwhile) */

typedef struct text {
	char buf[2048];
	size_t len;
} text;

static void add(text *t, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(t->buf + t->len, sizeof t->buf - t->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		t->len += (size_t)n < sizeof t->buf - t->len ? (size_t)n : sizeof t->buf - t->len - 1;
}

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static void emit(text *t)
{
	pthread_mutex_lock(&out_lock);
	fputs(t->buf, stdout);
	fflush(stdout);
	pthread_mutex_unlock(&out_lock);
	t->len = 0;
	t->buf[0] = 0;
}

/* ---- ops ---------------------------------------------------------------------------------------- */

/* Waits for an op and releases it. Returns true if it succeeded; otherwise copies the first failed
 * op's message (the root cause) into msg. A rejected enqueue is reported the same way. */
static bool finish_op(example *ex, ovstage_enqueue_result_t e, char *msg, size_t msglen)
{
	if (e.status != OVSTAGE_OK) {
		ovx_string_t m = ovstage_get_last_error();
		snprintf(msg, msglen, "rejected at enqueue (%s): %.*s", ovstage_get_error_string(ex->st, e.status),
			 (int)m.length, m.ptr ? m.ptr : "");
		return false;
	}
	ovstage_op_wait_result_t wr;
	check(ovstage_wait_op(ex->st, e.op_index, OVSTAGE_TIMEOUT_INFINITE, &wr), "wait_op");
	bool ok = wr.error_op_id_count == 0;
	if (!ok) {
		ovx_string_t m = ovstage_get_last_op_error(ex->st, wr.error_op_ids[0]);
		snprintf(msg, msglen, "%.*s", (int)m.length, m.ptr ? m.ptr : "");
	}
	check(ovstage_release_op(ex->st, e.op_index), "release_op");
	return ok;
}

static const char *sensor_name(example *ex, ovx_primpath_list_t list, uint32_t index, int *out_sensor)
{
	static const char *names[SENSORS] = { "S0", "S1", "S2", "S3" };
	ovx_primpath_t p = 0;
	size_t got = 0;
	check_ovx(ex->pd, path_dictionary_get_paths_from_path_list(ex->pd, list, index, 1, &p, &got),
		  "get_paths_from_path_list");
	for (int s = 0; s < SENSORS; s++)
		if (got == 1 && p == ex->paths[s]) {
			*out_sensor = s;
			return names[s];
		}
	*out_sensor = -1;
	return "?";
}

/* ---- producer ------------------------------------------------------------------------------------ */

/* Writes one float to one sensor at `ordinal` and waits for it (the value must live until then). */
static bool write_sensor(example *ex, int sensor, uint64_t ordinal, float value, char *msg, size_t msglen)
{
	int64_t shape[1] = { 1 };
	DLTensor t;
	memset(&t, 0, sizeof t);
	t.data = &value;
	t.device.device_type = kDLCPU;
	t.ndim = 1;
	t.dtype.code = kDLFloat;
	t.dtype.bits = 32;
	t.dtype.lanes = 1;
	t.shape = shape;
	ovstage_write_data_t w;
	memset(&w, 0, sizeof w);
	w.tensors = &t;
	w.tensor_count = 1;
	ovx_string_or_token_t a = { ex->attr, { NULL, 0 } };
	return finish_op(ex, ovstage_write_attribute(ex->st, ex->one[sensor], a, ordinal, w, OVSTAGE_PRIM_MODE_UPSERT),
			 msg, msglen);
}

static bool seal(example *ex, uint64_t ordinal, char *msg, size_t msglen)
{
	ovstage_write_floor_desc_t d = { ordinal, OVSTAGE_SCOPE_ALL, NULL, 0 };
	return finish_op(ex, ovstage_advance_write_floor(ex->st, &d), msg, msglen);
}

/* Which two sensors each tick writes (tick 5 deletes S2 instead). */
static const int schedule[TICKS + 1][2] = { { -1, -1 }, { 0, 1 }, { 1, 2 }, { 2, 0 }, { 3, 0 }, { -1, -1 }, { 1, 3 } };
#define DELETE_TICK 5
#define DELETED_SENSOR 2

static void producer_tick(example *ex, uint64_t tick)
{
	char msg[600];
	text t = { .len = 0 };
	bool ok = true;
	if (tick == DELETE_TICK) {
		/* attribute_count 0: delete the whole prim (every attribute; the prim stops existing) */
		ok = finish_op(ex, ovstage_delete_attributes(ex->st, ex->one[DELETED_SENSOR], NULL, 0, tick), msg,
			       sizeof msg);
		if (ok)
			ok = seal(ex, tick, msg, sizeof msg);
		if (ok)
			add(&t, "producer tick %llu: deleted S%d entirely (floor -> %llu)\n", (unsigned long long)tick,
			    DELETED_SENSOR, (unsigned long long)tick);
	} else {
		int a = schedule[tick][0], b = schedule[tick][1];
		float va = (float)(10 * tick + (uint64_t)a), vb = (float)(10 * tick + (uint64_t)b);
		ok = write_sensor(ex, a, tick, va, msg, sizeof msg) && write_sensor(ex, b, tick, vb, msg, sizeof msg) &&
		     seal(ex, tick, msg, sizeof msg);
		if (ok)
			add(&t, "producer tick %llu: wrote S%d = %.1f, S%d = %.1f (floor -> %llu)\n",
			    (unsigned long long)tick, a, va, b, vb, (unsigned long long)tick);
	}
	if (!ok) {
		atomic_fetch_add(&ex->producer_failures, 1);
		add(&t, "producer tick %llu: FAILED: %s\n", (unsigned long long)tick, msg);
	}
	emit(&t);
}

/* ---- consumer ------------------------------------------------------------------------------------ */

/* The global write floor: the floor of the empty attribute is the minimum over all columns. */
static bool poll_floor(example *ex, uint64_t *out_floor, char *msg, size_t msglen)
{
	ovstage_ordinal_query_handle_t h = OVSTAGE_INVALID_ORDINAL_QUERY_HANDLE;
	ovx_string_or_token_t global = { 0, { NULL, 0 } };
	if (!finish_op(ex, ovstage_get_attribute_write_floor(ex->st, global, &h), msg, msglen)) {
		if (h != OVSTAGE_INVALID_ORDINAL_QUERY_HANDLE)
			finish_op(ex, ovstage_release_ordinal_query(ex->st, h), msg, msglen);
		return false;
	}
	ovstage_api_status_t s = ovstage_fetch_ordinal(ex->st, h, OVSTAGE_TIMEOUT_INFINITE, out_floor);
	if (s != OVSTAGE_OK)
		snprintf(msg, msglen, "fetch_ordinal: %s", ovstage_get_error_string(ex->st, s));
	char rel[600];
	if (!finish_op(ex, ovstage_release_ordinal_query(ex->st, h), rel, sizeof rel)) {
		fprintf(stderr, "release_ordinal_query failed: %s\n", rel);
		exit(EXIT_FAILURE);
	}
	return s == OVSTAGE_OK;
}

/* Reads `range` through the all-sensor query, prints its groups and applies them to the mirror.
 * Returns the read's status (the specific one, e.g. OUT_OF_RANGE, when the read was rejected). */
static ovstage_api_status_t consume(example *ex, ovstage_ordinal_range_t range, text *t, char *msg, size_t msglen)
{
	ovstage_read_handle_t rh = OVSTAGE_INVALID_READ_HANDLE;
	ovstage_enqueue_result_t e = ovstage_read_attributes(ex->st, ex->all, &ex->attr, 1, range, &rh);
	if (e.status != OVSTAGE_OK) {
		finish_op(ex, e, msg, msglen);
		return e.status;
	}
	bool ok = finish_op(ex, e, msg, msglen);
	if (!range.has_start_ordinal) /* a latest read is the whole state: start the mirror afresh */
		for (int s = 0; s < SENSORS; s++)
			ex->mirror_present[s] = false;
	ovstage_read_group_t g;
	ovstage_api_status_t s;
	uint32_t changes = 0;
	while ((s = ovstage_fetch_read_next(ex->st, rh, OVSTAGE_TIMEOUT_INFINITE, &g)) == OVSTAGE_OK) {
		if (g.is_delete) {
			add(t, "  tombstone group (ordinal %llu):", (unsigned long long)g.ordinal);
		} else {
			if (g.data.tensor_count != 1 || g.data.tensors[0].dtype.code != kDLFloat ||
			    g.data.tensors[0].dtype.bits != 32 || g.data.tensors[0].dtype.lanes != 1) {
				fprintf(stderr, "unexpected read layout\n");
				exit(EXIT_FAILURE);
			}
			add(t, "  value group (ordinal %llu):", (unsigned long long)g.ordinal);
		}
		for (uint32_t i = 0; i < g.prims.count; i++) {
			uint32_t idx = g.prims.index_map ? g.prims.index_map[i] : g.prims.offset + i;
			int sensor;
			const char *name = sensor_name(ex, g.prims.list, idx, &sensor);
			if (g.is_delete) {
				add(t, "%s %s deleted", i ? "," : "", name);
				if (sensor >= 0)
					ex->mirror_present[sensor] = false;
			} else {
				uint32_t row = g.data.index_map ? g.data.index_map[i] : i;
				float v = ((const float *)g.data.tensors[0].data)[row];
				add(t, "%s %s = %.1f", i ? "," : "", name, v);
				if (sensor >= 0) {
					ex->mirror[sensor] = v;
					ex->mirror_present[sensor] = true;
				}
			}
			changes++;
		}
		add(t, "\n");
		check(ovstage_release_group(ex->st, &g), "release_group");
	}
	if (s != OVSTAGE_ERROR_END_OF_ITERATION) {
		if (ok) /* the op reported nothing, yet the fetch failed */
			snprintf(msg, msglen, "fetch_read_next: %s", ovstage_get_error_string(ex->st, s));
		ok = false;
	}
	char rel[600];
	if (!finish_op(ex, ovstage_release_read(ex->st, rh), rel, sizeof rel)) {
		fprintf(stderr, "release_read failed: %s\n", rel);
		exit(EXIT_FAILURE);
	}
	if (!ok)
		return s != OVSTAGE_ERROR_END_OF_ITERATION && s != OVSTAGE_OK ? s : OVSTAGE_ERROR_OP_FAILED;
	add(t, "  delta batch: %u prim changes\n", changes);
	return OVSTAGE_OK;
}

/* One consumer step: poll the floor; if it moved, read the delta since last_seen. Returns true if
 * it consumed something. */
static bool consumer_step(example *ex)
{
	char msg[600];
	text t = { .len = 0 };
	uint64_t floor = 0;
	if (!poll_floor(ex, &floor, msg, sizeof msg)) {
		add(&t, "consumer: polling the floor failed: %s (will retry)\n", msg);
		ex->consumer_rejections++;
		emit(&t);
		return false;
	}
	if (floor <= ex->last_seen)
		return false;
	add(&t, "consumer: floor %llu, last_seen %llu -> reading delta [%llu, %llu]\n", (unsigned long long)floor,
	    (unsigned long long)ex->last_seen, (unsigned long long)ex->last_seen + 1, (unsigned long long)floor);
	ovstage_ordinal_range_t delta = { ex->last_seen + 1, floor, true };
	size_t mark = t.len;
	ovstage_api_status_t s = consume(ex, delta, &t, msg, sizeof msg);
	if (s == OVSTAGE_ERROR_OUT_OF_RANGE) {
		/* The history of [last_seen + 1, floor] is no longer retained: rebase on the whole state. */
		t.len = mark;
		t.buf[mark] = 0;
		ex->consumer_rejections++;
		add(&t, "  delta rejected (OUT_OF_RANGE): %s\n  rebasing with a latest read at %llu\n", msg,
		    (unsigned long long)floor);
		ovstage_ordinal_range_t latest = { 0, floor, false };
		s = consume(ex, latest, &t, msg, sizeof msg);
	}
	if (s != OVSTAGE_OK) {
		/* OP_FAILED / WRITE_FLOOR_VIOLATION: nothing consumed; poll again. */
		ex->consumer_rejections++;
		add(&t, "  read rejected (%s): %s (will re-poll)\n", ovstage_get_error_string(ex->st, s), msg);
		emit(&t);
		return false;
	}
	ex->last_seen = floor;
	add(&t, "consumer: last_seen -> %llu\n", (unsigned long long)floor);
	emit(&t);
	return true;
}

/* ---- threads ------------------------------------------------------------------------------------- */

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
	nanosleep(&ts, NULL);
}

static void *producer_thread(void *arg)
{
	example *ex = arg;
	for (uint64_t tick = 1; tick <= TICKS; tick++) {
		producer_tick(ex, tick);
		sleep_us((long)((tick * 7919) % 1500)); /* uneven pacing: deltas batch differently */
	}
	return NULL;
}

static void *consumer_thread(void *arg)
{
	example *ex = arg;
	while (ex->last_seen < TICKS) {
		if (atomic_load(&ex->producer_failures)) {
			/* The floor may never reach the last tick; stop once nothing more can be sealed. */
			uint64_t f = 0;
			char msg[600];
			if (poll_floor(ex, &f, msg, sizeof msg) && f <= ex->last_seen)
				break;
		}
		if (!consumer_step(ex))
			sleep_us(700);
	}
	return NULL;
}

/* ---- setup --------------------------------------------------------------------------------------- */

static void setup(example *ex)
{
	ovstage_instance_desc_t desc = { "example.producer_consumer" };
	check(ovstage_create_instance(&desc, &ex->st), "create_instance");
	ex->pd = ovstage_get_path_dictionary(ex->st);
	ovx_string_t name = literal_to_ovx_string("reading");
	check_ovx(ex->pd, path_dictionary_create_tokens_from_strings(ex->pd, &name, 1, &ex->attr), "create_tokens");
	ovx_string_t strs[SENSORS] = { literal_to_ovx_string("/World/Sensors/S0"),
				       literal_to_ovx_string("/World/Sensors/S1"),
				       literal_to_ovx_string("/World/Sensors/S2"),
				       literal_to_ovx_string("/World/Sensors/S3") };
	check_ovx(ex->pd, path_dictionary_create_paths_from_strings(ex->pd, strs, SENSORS, ex->paths), "create_paths");
	for (int s = 0; s < SENSORS; s++) {
		check_ovx(ex->pd, path_dictionary_create_path_list_from_strings(ex->pd, &strs[s], 1, &ex->one_list[s]),
			  "create_path_list");
		check(ovstage_query_from_path_list(ex->st, ex->one_list[s], &ex->one[s]), "query_from_path_list");
	}
	check_ovx(ex->pd, path_dictionary_create_path_list_from_strings(ex->pd, strs, SENSORS, &ex->all_list),
		  "create_path_list");
	check(ovstage_query_from_path_list(ex->st, ex->all_list, &ex->all), "query_from_path_list");
}

static void teardown(example *ex)
{
	for (int s = 0; s < SENSORS; s++) {
		wait_op(ex->st, ovstage_release_query(ex->st, ex->one[s]), "release_query");
		check_ovx(ex->pd, path_dictionary_release_path_list_reference(ex->pd, ex->one_list[s]),
			  "release_path_list");
	}
	wait_op(ex->st, ovstage_release_query(ex->st, ex->all), "release_query");
	check_ovx(ex->pd, path_dictionary_release_path_list_reference(ex->pd, ex->all_list), "release_path_list");
	check(ovstage_destroy_instance(ex->st), "destroy_instance");
}

int main(int argc, char **argv)
{
	example ex;
	memset(&ex, 0, sizeof ex);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--threads")) {
			ex.threaded = true;
		} else {
			fprintf(stderr, "usage: %s [--threads]\n", argv[0]);
			return 2;
		}
	}
	/* Keep 8 sealed versions per column so a consumer can read a delta spanning several ticks. */
	ovstage_config_entry_t entry = ovstage_config_entry_uint64(OVSTAGE_CONFIG_EXT_RETENTION, 8);
	ovstage_config_t config = { &entry, 1 };
	check(ovstage_initialize(&config), "initialize");
	setup(&ex);

	int rc = EXIT_SUCCESS;
	if (!ex.threaded) {
		for (uint64_t tick = 1; tick <= TICKS; tick++) {
			producer_tick(&ex, tick);
			if (tick % 3 == 0 && !consumer_step(&ex))
				rc = EXIT_FAILURE;
		}
		if (atomic_load(&ex.producer_failures))
			rc = EXIT_FAILURE;
	} else {
		pthread_t p, c;
		if (pthread_create(&p, NULL, producer_thread, &ex) || pthread_create(&c, NULL, consumer_thread, &ex)) {
			fprintf(stderr, "pthread_create failed\n");
			return EXIT_FAILURE;
		}
		pthread_join(p, NULL);
		pthread_join(c, NULL);
		/* What the consumer saw must be the producer's final state: S0 = 40, S1 = 61, S3 = 63, S2 gone. */
		static const float want[SENSORS] = { 40.f, 61.f, 0.f, 63.f };
		bool match = true;
		text t = { .len = 0 };
		add(&t, "consumer mirror after last_seen %llu:", (unsigned long long)ex.last_seen);
		for (int s = 0; s < SENSORS; s++) {
			bool want_present = s != DELETED_SENSOR;
			if (ex.mirror_present[s])
				add(&t, " S%d = %.1f", s, ex.mirror[s]);
			else
				add(&t, " S%d deleted", s);
			if (ex.mirror_present[s] != want_present || (want_present && ex.mirror[s] != want[s]))
				match = false;
		}
		add(&t, " (%s; %d rejected polls/reads reported)\n", match ? "matches the producer" : "MISMATCH",
		    ex.consumer_rejections);
		emit(&t);
		int pf = atomic_load(&ex.producer_failures);
		if (pf)
			fprintf(stderr, "%d producer tick(s) failed\n", pf);
		if (!match || pf || ex.last_seen != TICKS)
			rc = EXIT_FAILURE;
	}
	teardown(&ex);
	check(ovstage_shutdown(), "shutdown");
	return rc;
}
