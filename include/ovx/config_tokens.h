/*
 * ovx/config_tokens.h — placeholder tokens that configuration strings may contain.
 *
 * Contract: each token is a string literal, meant to be concatenated with other literals at
 * compile time. The static loader replaces OVX_CONFIG_EXECUTABLE_DIR_TOKEN with the directory of
 * the running executable when it reads a path-valued configuration entry.
 */
#ifndef OVX_CONFIG_TOKENS_H
#define OVX_CONFIG_TOKENS_H

#define OVX_CONFIG_EXECUTABLE_DIR_TOKEN "${executable_dir}"

#endif /* OVX_CONFIG_TOKENS_H */
