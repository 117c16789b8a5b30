/*
 * ovx/path_dictionary/path_dictionary_types.h — handle types of the path dictionary interface.
 *
 * Contract: a path dictionary interns strings into ovx_token_t, prim paths into ovx_primpath_t and
 * ordered path sets into reference-counted ovx_primpath_list_t. It is reached through a
 * path_dictionary_instance_t, a {vtable, context} pair populated by its owner (for ovstage, the
 * stage instance); callers never create or free one. path_dictionary_context_t is opaque and never
 * defined publicly; the vtable body is in path_dictionary_vtable.h.
 */
#ifndef PATH_DICTIONARY_TYPES_H
#define PATH_DICTIONARY_TYPES_H

#include <stdint.h>
#include "../types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque implementation state of a path dictionary. */
typedef struct path_dictionary_context_t path_dictionary_context_t;

/** Function table of a path dictionary (body in path_dictionary_vtable.h). */
typedef struct path_dictionary_vtable_t path_dictionary_vtable_t;

/** A path dictionary as handed out by its owner. */
typedef struct path_dictionary_instance_t
{
    path_dictionary_vtable_t* vtable;   /**< function table; every call goes through it */
    path_dictionary_context_t* context; /**< implementation state passed as the first argument of every slot */
} path_dictionary_instance_t;

#ifdef __cplusplus
}
#endif

#endif /* PATH_DICTIONARY_TYPES_H */
