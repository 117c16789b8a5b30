/* names.c — attribute names: resolving a token or string, the derived names, names for messages. */
#include "names.h"

#include <string.h>

#include "errors.h"

const char *ovs_attr_name(ovs_stage *st, ovx_token_t t)
{
	ovx_string_t s = ovs_pd_token_string(st->pd, t);
	return s.ptr ? s.ptr : "?";
}

bool ovs_attr_is_derived(ovs_stage *st, ovx_token_t t)
{
	return t && (t == st->derived[0] || t == st->derived[1] || t == st->derived[2]);
}

ovstage_api_status_t ovs_resolve_attr(ovs_stage *st, ovx_string_or_token_t a, bool allow_empty, ovx_token_t *out,
				      const char *what)
{
	*out = 0;
	if (a.token) {
		if (!ovs_pd_token_is_valid(st->pd, a.token))
			return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s.token = %llu is not a token of this "
					   "instance's path dictionary", what, (unsigned long long)a.token);
		*out = a.token;
		return OVSTAGE_OK;
	}
	if (a.string.length == 0) {
		if (allow_empty)
			return OVSTAGE_OK;
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s is empty (no token and no string)", what);
	}
	if (!a.string.ptr)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s.string has NULL ptr and length %zu", what,
				   a.string.length);
	if (memchr(a.string.ptr, '\0', a.string.length))
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s.string contains a NUL byte", what);
	ovx_token_t t = ovs_pd_intern_token(st->pd, a.string.ptr, a.string.length);
	if (!t)
		return ovs_err_set(OVSTAGE_ERROR_OUT_OF_MEMORY, "out of memory interning %s", what);
	*out = t;
	return OVSTAGE_OK;
}
