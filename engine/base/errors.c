/* errors.c — thread-local last error, status names. */
#include "errors.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char tls_msg[OVS_ERR_MAX];
static _Thread_local size_t tls_len;

void ovs_err_clear(void)
{
	tls_len = 0;
	tls_msg[0] = '\0';
}

static void vformat(char *buf, size_t size, const char *fmt, va_list ap)
{
	int n = vsnprintf(buf, size, fmt, ap);
	if (n >= (int)size && size > 4)
		memcpy(buf + size - 4, "...", 4);
}

ovstage_api_status_t ovs_err_set(ovstage_api_status_t status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vformat(tls_msg, sizeof tls_msg, fmt, ap);
	va_end(ap);
	tls_len = strlen(tls_msg);
	return status;
}

void ovs_err_format(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vformat(buf, size, fmt, ap);
	va_end(ap);
}

OVSTAGE_API ovx_string_t ovstage_get_last_error(void)
{
	ovx_string_t s;
	s.ptr = tls_len ? tls_msg : NULL;
	s.length = tls_len;
	return s;
}

const char *ovs_status_name(ovstage_api_status_t st)
{
	switch (st) {
	case OVSTAGE_OK: return "OVSTAGE_OK";
	case OVSTAGE_ERROR_INVALID_ARGUMENT: return "OVSTAGE_ERROR_INVALID_ARGUMENT";
	case OVSTAGE_ERROR_INVALID_HANDLE: return "OVSTAGE_ERROR_INVALID_HANDLE";
	case OVSTAGE_ERROR_NOT_FOUND: return "OVSTAGE_ERROR_NOT_FOUND";
	case OVSTAGE_ERROR_PRIM_NOT_FOUND: return "OVSTAGE_ERROR_PRIM_NOT_FOUND";
	case OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION: return "OVSTAGE_ERROR_WRITE_FLOOR_VIOLATION";
	case OVSTAGE_ERROR_NOT_SUPPORTED: return "OVSTAGE_ERROR_NOT_SUPPORTED";
	case OVSTAGE_ERROR_QUEUE_FULL: return "OVSTAGE_ERROR_QUEUE_FULL";
	case OVSTAGE_ERROR_END_OF_ITERATION: return "OVSTAGE_ERROR_END_OF_ITERATION";
	case OVSTAGE_ERROR_OUT_OF_MEMORY: return "OVSTAGE_ERROR_OUT_OF_MEMORY";
	case OVSTAGE_ERROR_LAYOUT_CHANGED: return "OVSTAGE_ERROR_LAYOUT_CHANGED";
	case OVSTAGE_ERROR_TIMEOUT: return "OVSTAGE_ERROR_TIMEOUT";
	case OVSTAGE_ERROR_OP_FAILED: return "OVSTAGE_ERROR_OP_FAILED";
	case OVSTAGE_ERROR_OUT_OF_RANGE: return "OVSTAGE_ERROR_OUT_OF_RANGE";
	case OVSTAGE_ERROR_INTERNAL: return "OVSTAGE_ERROR_INTERNAL";
	}
	return "OVSTAGE_ERROR_UNKNOWN";
}
