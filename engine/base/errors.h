/*
 * errors.h — the thread-local "last error" channel of the C API and status helpers.
 *
 * ovstage_get_last_error() returns the detail of the latest synchronous failure on the calling
 * thread; every API entry point clears it first (ovs_err_clear) and sets it when it rejects
 * (ovs_err_set). Thread-safe by construction (thread-local), never allocates after the first use
 * on a thread (fixed buffer).
 */
#ifndef OVSTAGE_ENGINE_ERRORS_H
#define OVSTAGE_ENGINE_ERRORS_H

#include <stdarg.h>

#include <ovstage/ovstage.h>

#define OVS_ERR_MAX 1024 /* longest message kept (longer ones are truncated with "...") */

/* Clears the calling thread's last error (start of every API call). */
void ovs_err_clear(void);

/* Sets the calling thread's last error and returns `status` (for `return ovs_err_set(...)`). */
ovstage_api_status_t ovs_err_set(ovstage_api_status_t status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Formats into a caller buffer (used by jobs to build op failure messages). */
void ovs_err_format(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The enqueue result of a synchronous rejection: {status, OVSTAGE_INVALID_OP_ID}. */
static inline ovstage_enqueue_result_t ovs_rejected(ovstage_api_status_t st)
{
	ovstage_enqueue_result_t r;
	r.status = st;
	r.op_index = OVSTAGE_INVALID_OP_ID;
	return r;
}

/* Static name of a status ("OVSTAGE_ERROR_INVALID_HANDLE"), never NULL. */
const char *ovs_status_name(ovstage_api_status_t st);

#endif /* OVSTAGE_ENGINE_ERRORS_H */
