/*
 * ovx/path_dictionary/path_dictionary_vtable.h — the path dictionary function table.
 *
 * Contract: the slot order below is ABI and never changes; new slots are only appended. Every slot
 * takes the dictionary context first. All slots are thread-safe. Tokens and prim paths live as long
 * as the dictionary (no per-handle release); path lists are reference counted. Every slot except
 * release_error returns an ovx_api_result_t whose error text must be given back with release_error.
 * Call the slots through the static inline wrappers of path_dictionary_utils.h.
 */
#ifndef PATH_DICTIONARY_VTABLE_H
#define PATH_DICTIONARY_VTABLE_H

#include "path_dictionary_types.h"

#ifdef __cplusplus
extern "C" {
#endif

struct path_dictionary_vtable_t
{
    /** Interns `num_strings` strings; equal strings give equal tokens; empty or NUL-containing strings fail. */
    ovx_api_result_t (*create_tokens_from_strings)(path_dictionary_context_t* instance, const ovx_string_t* strings,
                                                   size_t num_strings, ovx_token_t* out_tokens);

    /** Builds `num_paths` paths from component tokens concatenated across paths. */
    ovx_api_result_t (*create_paths_from_tokens)(path_dictionary_context_t* instance, const ovx_token_t* tokens_per_path,
                                                 const size_t* num_tokens_per_path, size_t num_paths,
                                                 ovx_primpath_t* out_prim_paths);

    /** Interns `num_paths` path strings; equivalent paths give equal handles. */
    ovx_api_result_t (*create_paths_from_strings)(path_dictionary_context_t* instance, const ovx_string_t* path_strings,
                                                  size_t num_paths, ovx_primpath_t* out_prim_paths);

    /** Mints a new path list (reference count 1, owned by the caller); `num_paths` may be 0. */
    ovx_api_result_t (*create_path_list_from_paths)(path_dictionary_context_t* instance, const ovx_primpath_t* paths,
                                                    size_t num_paths, ovx_primpath_list_t* out_path_list);

    /** Interns path strings, then mints a new path list as create_path_list_from_paths does. */
    ovx_api_result_t (*create_path_list_from_strings)(path_dictionary_context_t* instance,
                                                      const ovx_string_t* path_strings, size_t num_paths,
                                                      ovx_primpath_list_t* out_path_list);

    /** Adds one reference to a path list; the invalid handle is a successful no-op. */
    ovx_api_result_t (*add_path_list_reference)(path_dictionary_context_t* instance, ovx_primpath_list_t path_list);

    /** Drops one reference to a path list, erasing it at zero; the invalid handle is a successful no-op. */
    ovx_api_result_t (*release_path_list_reference)(path_dictionary_context_t* instance, ovx_primpath_list_t path_list);

    /** Resolves tokens to dictionary-owned views valid for the dictionary's lifetime. */
    ovx_api_result_t (*get_strings_from_tokens)(path_dictionary_context_t* instance, const ovx_token_t* tokens,
                                                size_t num_tokens, ovx_string_t* out_strings);

    /** Decomposes paths into component tokens in a caller buffer, stopping before a path that does not fit. */
    ovx_api_result_t (*get_tokens_from_paths)(path_dictionary_context_t* instance, const ovx_primpath_t* prim_paths,
                                              size_t num_paths, ovx_token_t* token_buffer, size_t token_buffer_size,
                                              ovx_token_t** out_tokens_per_path, size_t* out_num_tokens_per_path,
                                              size_t* out_num_paths_processed);

    /** Number of paths in a path list the caller holds a reference to. */
    ovx_api_result_t (*get_num_paths_from_path_list)(path_dictionary_context_t* instance, ovx_primpath_list_t path_list,
                                                     size_t* out_num_paths);

    /** Copies up to `max_paths` paths of a list, starting at `start_offset`. */
    ovx_api_result_t (*get_paths_from_path_list)(path_dictionary_context_t* instance, ovx_primpath_list_t path_list,
                                                 size_t start_offset, size_t max_paths, ovx_primpath_t* out_paths,
                                                 size_t* out_num_paths);

    /** Releases the error text of an ovx_api_result_t produced by this dictionary. */
    void (*release_error)(path_dictionary_context_t* context, ovx_string_t error);
};

#ifdef __cplusplus
}
#endif

#endif /* PATH_DICTIONARY_VTABLE_H */
