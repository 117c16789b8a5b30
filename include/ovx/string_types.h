/*
 * ovx/string_types.h — string views and interned tokens shared by the OVX libraries.
 *
 * Contract:
 *  - ovx_string_t is a non-owning UTF-8 view: `length` counts bytes. Inputs are NOT assumed to be
 *    NUL-terminated (a substring view is a legal input). Non-empty views returned by a library ARE
 *    NUL-terminated. {NULL, 0} means "no value"; a NULL `ptr` with a non-zero `length` is invalid.
 *    Two views are equal when their lengths are equal and their bytes compare equal.
 *  - ovx_token_t is an interned string handle owned by a path dictionary; 0 is never a valid token.
 *  - ovx_string_or_token_t passes either form: a non-zero `token` wins, otherwise `string` is
 *    interned at call time. Both empty means "none" (or "global", where an API says so).
 *
 * Plain C declarations only; no functions, so no extern "C" block is needed. C11 and C++ clean.
 */
#ifndef OVX_STRING_TYPES_H
#define OVX_STRING_TYPES_H

#include <stdint.h>
#include <stddef.h>

/** Non-owning view of UTF-8 bytes. */
typedef struct ovx_string_t
{
    const char* ptr; /**< first byte of the view; NULL only together with length 0 */
    size_t length;   /**< number of bytes in the view, not counting any terminating NUL */
} ovx_string_t;

/** Interned string handle; 0 (OVX_INVALID_TOKEN in ovx/types.h) is never valid. */
typedef uint64_t ovx_token_t;

/** Either an already interned token or a string to intern at call time. */
typedef struct ovx_string_or_token_t
{
    ovx_token_t token;   /**< interned token; when non-zero it is used and `string` is ignored */
    ovx_string_t string; /**< string to intern when `token` is 0 */
} ovx_string_or_token_t;

#endif /* OVX_STRING_TYPES_H */
