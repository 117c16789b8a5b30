/*
 * log.h — the process-global log callback (ovstage_set_log_callback / ovstage_flush_log) and the
 * engine's emitter.
 *
 * Contract:
 *  - ovs_log() is callable from any thread at any time (also before any callback is installed and
 *    after ovs_log_shutdown). It never blocks on the callback: messages go through a bounded queue
 *    (OVS_LOG_QUEUE_CAP messages); when it is full the message is dropped and counted, and the
 *    dispatcher later delivers a WARNING "ovstage log: N messages dropped (queue full)" at the
 *    position of the loss.
 *  - Fast path: with no callback installed, or a severity below every threshold of the installed
 *    filter, ovs_log() costs one relaxed atomic load and returns (ovs_log_on() is that test alone,
 *    for callers that want to skip building expensive arguments).
 *  - Messages are delivered on one dispatcher thread, serialized, as "[channel] text" (just "text"
 *    for a NULL or empty channel), truncated to OVS_LOG_MSG_MAX - 1 bytes ("..." marks a cut), with
 *    the wall-clock time of the ovs_log() call.
 *  - ovs_log_shutdown() is called by the runtime at its last release: it delivers what is queued,
 *    disables the callback and joins the dispatcher thread (nothing leaks). A later
 *    ovstage_set_log_callback (once the runtime is bootstrapped again) starts over.
 */
#ifndef OVSTAGE_ENGINE_LOG_H
#define OVSTAGE_ENGINE_LOG_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <ovstage/ovstage.h>

#define OVS_LOG_QUEUE_CAP 1024u /* messages queued before drops start */
#define OVS_LOG_MSG_MAX 1024u   /* bytes per message, NUL included */

/* Lowest severity any installed threshold lets through; OVSTAGE_LOG_NONE when there is no callback.
 * Written only by log.c. */
extern atomic_int ovs_log_gate_;

/* Whether a message of `sev` might be delivered (false: ovs_log would drop it at once). */
static inline bool ovs_log_on(ovstage_log_severity_t sev)
{
	/* relaxed: a hint only; ovs_log re-checks under the dispatcher lock (see log.c) */
	return (int)sev >= atomic_load_explicit(&ovs_log_gate_, memory_order_relaxed);
}

/* Emits one message on `channel` (NULL = none). OVSTAGE_LOG_NONE and unknown severities are ignored. */
void ovs_log(ovstage_log_severity_t sev, const char *channel, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void ovs_logv(ovstage_log_severity_t sev, const char *channel, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

/* Delivers what is queued, disables the callback and joins the dispatcher (runtime teardown). */
void ovs_log_shutdown(void);

#endif /* OVSTAGE_ENGINE_LOG_H */
