/*
 * ovx/types.h — prim path handles, sentinels and the status/result pair of the OVX libraries.
 *
 * Contract:
 *  - ovx_primpath_t is an interned prim path and ovx_primpath_list_t a reference-counted, ordered
 *    list of prim paths; both are owned by a path dictionary and 0 is never a valid handle.
 *  - ovx_api_result_t carries a status and, on OVX_API_ERROR, an error text owned by the dictionary
 *    that produced it; release that text with path_dictionary_release_error().
 *  - literal_to_ovx_string(str) accepts string literals only (the "" concatenation rejects any
 *    other expression at compile time).
 *
 * No extern "C" block: the only function is static inline. C11 and C++ clean.
 */
#ifndef OVX_TYPES_H
#define OVX_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <ovx/string_types.h>

/** Builds an ovx_string_t view of a string literal (length excludes the terminating NUL). */
#ifdef __cplusplus
#define literal_to_ovx_string(str) ovx_string_t{ (str), sizeof("" str) - 1 }
#else
#define literal_to_ovx_string(str) ((ovx_string_t){ (str), sizeof("" str) - 1 })
#endif

/** True for a NULL view pointer, a NULL `ptr`, or a zero `length`. */
static inline bool is_ovx_string_empty(const ovx_string_t* str)
{
    return str == NULL || str->ptr == NULL || str->length == 0;
}

/** Interned prim path handle; 0 is invalid. */
typedef uint64_t ovx_primpath_t;

/** Reference-counted ordered list of prim paths; 0 is invalid. */
typedef uint64_t ovx_primpath_list_t;

#define OVX_INVALID_TOKEN ((ovx_token_t)0)
#define OVX_INVALID_PRIMPATH ((ovx_primpath_t)0)
#define OVX_INVALID_PRIMPATH_LIST ((ovx_primpath_list_t)0)

/** Outcome of an OVX call. */
typedef enum
{
    OVX_API_SUCCESS = 0,
    OVX_API_ERROR = 1,
} ovx_api_status_t;

/** Status plus optional error text of an OVX call. */
typedef struct
{
    ovx_api_status_t status; /**< OVX_API_SUCCESS or OVX_API_ERROR */
    ovx_string_t error;      /**< error text on failure ({NULL,0} on success); release with path_dictionary_release_error */
} ovx_api_result_t;

/** Either an interned prim path or a path string (declared for the OVX family; unused by ovstage). */
typedef struct ovx_string_or_prim_path_t
{
    ovx_primpath_t path; /**< interned path; when non-zero it is used and `string` is ignored */
    ovx_string_t string; /**< path string to intern when `path` is 0 */
} ovx_string_or_prim_path_t;

#endif /* OVX_TYPES_H */
