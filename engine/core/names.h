/*
 * names.h — attribute names of a stage: a token (validated against the stage's path dictionary) or a
 * string (interned), the derived read-only names, and names for error messages. Thread-safe (the
 * path dictionary is lock-free for lookups).
 */
#ifndef OVSTAGE_ENGINE_NAMES_H
#define OVSTAGE_ENGINE_NAMES_H

#include "stage.h"

/* Resolves an attribute name: a token (validated) or a string (interned). Empty -> *out = 0 and
 * OK only if allow_empty. Sets the last error on failure; `what` names the argument. */
ovstage_api_status_t ovs_resolve_attr(ovs_stage *st, ovx_string_or_token_t a, bool allow_empty, ovx_token_t *out,
				      const char *what);

/* The derived, read-only names (usd-path, usd-parent, usd-children): writes and deletes of them are
 * NOT_SUPPORTED. */
bool ovs_attr_is_derived(ovs_stage *st, ovx_token_t t);

/* The attribute's name for messages. */
const char *ovs_attr_name(ovs_stage *st, ovx_token_t t);

#endif /* OVSTAGE_ENGINE_NAMES_H */
