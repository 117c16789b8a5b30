/*
 * path_dict_vtable.c — the 12 slots of path_dictionary_vtable_t over an ovs_pd.
 *
 * Conventions of every slot (decisions where the spec is silent):
 *  - Failure returns OVX_API_ERROR and a malloc'd, NUL-terminated message "slot: what was wrong"
 *    naming the argument, its index and its value (strings quoted and escaped, at most 64 bytes
 *    shown). release_error frees it; releasing {NULL, 0} is a no-op. When even the message cannot be
 *    allocated a static "out of memory" text is returned, which release_error recognises.
 *  - A NULL array with a non-zero count, or a NULL output pointer, is an error. Zero counts succeed
 *    without touching outputs.
 *  - create_* slots validate every input before interning anything, so a rejected call has no
 *    effect and leaves outputs untouched (short of running out of memory midway). get_* slots fill
 *    outputs in order and stop at the first bad input; outputs past it are unspecified.
 *  - get_num_paths_from_path_list / get_paths_from_path_list take a temporary reference while
 *    reading, so a concurrent release by a misbehaving caller yields an error, never a dangling read.
 *    The invalid list handle 0 is an error there (only add/release treat 0 as a no-op).
 *  - get_paths_from_path_list: start_offset == count succeeds with 0 paths; start_offset > count is
 *    an error; the number copied is min(max_paths, count - start_offset).
 *  - get_tokens_from_paths: an invalid path handle is an error; *out_num_paths_processed is then the
 *    index of that path (paths before it were decomposed). Stopping for lack of buffer room is a
 *    success with *out_num_paths_processed < num_paths. The root yields zero tokens and a pointer
 *    to the current buffer position.
 */
#include "path_dict_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CTX(c) ((ovs_pd *)(void *)(c))

static const char pd_oom_text[] = "path dictionary: out of memory";

static const ovx_api_result_t pd_ok = { OVX_API_SUCCESS, { NULL, 0 } };

__attribute__((format(printf, 1, 2))) static ovx_api_result_t pd_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
	if (!s)
		return (ovx_api_result_t){ OVX_API_ERROR, { pd_oom_text, sizeof(pd_oom_text) - 1 } };
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return (ovx_api_result_t){ OVX_API_ERROR, { s, (size_t)n } };
}

static ovx_api_result_t pd_oom(const char *slot)
{
	return pd_error("%s: out of memory (or the dictionary's 2^32 ids are exhausted)", slot);
}

/* Quoted, escaped rendering of at most 64 bytes of a string into buf (>= 300 bytes). */
#define QUOTE_CAP 300
static const char *quote(char *buf, const char *p, size_t n)
{
	size_t o = 0;
	buf[o++] = '"';
	size_t shown = n > 64 ? 64 : n;
	for (size_t i = 0; i < shown; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c == '"' || c == '\\') {
			buf[o++] = '\\';
			buf[o++] = (char)c;
		} else if (c == '\0') {
			buf[o++] = '\\';
			buf[o++] = '0';
		} else if (c < 0x20 || c == 0x7f) {
			o += (size_t)snprintf(buf + o, QUOTE_CAP - o, "\\x%02x", c);
		} else {
			buf[o++] = (char)c;
		}
	}
	buf[o++] = '"';
	if (shown < n)
		o += (size_t)snprintf(buf + o, QUOTE_CAP - o, "... (%zu bytes)", n);
	buf[o] = '\0';
	return buf;
}

/* Error for a string argument that is not a valid token; NULL result status means valid. */
static bool token_string_bad(const char *slot, const char *arg, size_t i, const ovx_string_t *s,
			     ovx_api_result_t *res)
{
	char q[QUOTE_CAP];
	if (s->ptr == NULL && s->length != 0) {
		*res = pd_error("%s: %s[%zu] has a NULL ptr with length %zu", slot, arg, i, s->length);
		return true;
	}
	if (s->length == 0) {
		*res = pd_error("%s: %s[%zu] is an empty string", slot, arg, i);
		return true;
	}
	const char *nul = memchr(s->ptr, '\0', s->length);
	if (nul) {
		*res = pd_error("%s: %s[%zu] = %s contains an embedded NUL byte at offset %zu", slot, arg, i,
				quote(q, s->ptr, s->length), (size_t)(nul - s->ptr));
		return true;
	}
	return false;
}

/* Error for a string argument that is not a valid path. */
static bool path_string_bad(const char *slot, const char *arg, size_t i, const ovx_string_t *s,
			    ovx_api_result_t *res)
{
	char q[QUOTE_CAP];
	if (s->ptr == NULL && s->length != 0) {
		*res = pd_error("%s: %s[%zu] has a NULL ptr with length %zu", slot, arg, i, s->length);
		return true;
	}
	size_t off;
	switch (pd_path_syntax(s->ptr, s->length, &off)) {
	case PD_SYNTAX_OK:
		return false;
	case PD_SYNTAX_EMPTY:
		*res = pd_error("%s: %s[%zu] is an empty string, not a path", slot, arg, i);
		return true;
	case PD_SYNTAX_NUL:
		*res = pd_error("%s: %s[%zu] = %s contains an embedded NUL byte at offset %zu", slot, arg, i,
				quote(q, s->ptr, s->length), off);
		return true;
	case PD_SYNTAX_RELATIVE:
		*res = pd_error("%s: %s[%zu] = %s is not an absolute path (it must start with '/')", slot, arg, i,
				quote(q, s->ptr, s->length));
		return true;
	case PD_SYNTAX_EMPTY_COMPONENT:
		*res = pd_error("%s: %s[%zu] = %s has an empty component (\"//\") at offset %zu", slot, arg, i,
				quote(q, s->ptr, s->length), off);
		return true;
	default: /* PD_SYNTAX_TRAILING_SLASH */
		*res = pd_error("%s: %s[%zu] = %s ends with '/' (only the root path \"/\" may)", slot, arg, i,
				quote(q, s->ptr, s->length));
		return true;
	}
}

/* ---- slots --------------------------------------------------------------------------------------- */

static ovx_api_result_t pd_create_tokens_from_strings(path_dictionary_context_t *instance,
						      const ovx_string_t *strings, size_t num_strings,
						      ovx_token_t *out_tokens)
{
	static const char slot[] = "create_tokens_from_strings";
	ovs_pd *pd = CTX(instance);
	if (num_strings == 0)
		return pd_ok;
	if (!strings)
		return pd_error("%s: strings is NULL but num_strings = %zu", slot, num_strings);
	if (!out_tokens)
		return pd_error("%s: out_tokens is NULL but num_strings = %zu", slot, num_strings);
	ovx_api_result_t res;
	for (size_t i = 0; i < num_strings; i++)
		if (token_string_bad(slot, "strings", i, &strings[i], &res))
			return res;
	for (size_t i = 0; i < num_strings; i++) {
		ovx_token_t t = ovs_pd_intern_token(pd, strings[i].ptr, strings[i].length);
		if (!t)
			return pd_oom(slot);
		out_tokens[i] = t;
	}
	return pd_ok;
}

static ovx_api_result_t pd_create_paths_from_tokens(path_dictionary_context_t *instance,
						    const ovx_token_t *tokens_per_path,
						    const size_t *num_tokens_per_path, size_t num_paths,
						    ovx_primpath_t *out_prim_paths)
{
	static const char slot[] = "create_paths_from_tokens";
	ovs_pd *pd = CTX(instance);
	if (num_paths == 0)
		return pd_ok;
	if (!num_tokens_per_path)
		return pd_error("%s: num_tokens_per_path is NULL but num_paths = %zu", slot, num_paths);
	if (!out_prim_paths)
		return pd_error("%s: out_prim_paths is NULL but num_paths = %zu", slot, num_paths);
	size_t total = 0;
	for (size_t p = 0; p < num_paths; p++) {
		if (num_tokens_per_path[p] > SIZE_MAX - total)
			return pd_error("%s: num_tokens_per_path[%zu] = %zu makes the token total overflow", slot, p,
					num_tokens_per_path[p]);
		total += num_tokens_per_path[p];
	}
	if (total > 0 && !tokens_per_path)
		return pd_error("%s: tokens_per_path is NULL but num_tokens_per_path sums to %zu", slot, total);
	if (num_paths >= PD_BULK_MIN && pd_tokens_first_bad(pd, tokens_per_path, total) == SIZE_MAX) {
		/* Every token valid (checked in parallel): intern level by level over the workers. */
		if (pd_intern_token_paths_bulk(pd, tokens_per_path, num_tokens_per_path, num_paths, out_prim_paths) !=
		    PD_BULK_OK)
			return pd_oom(slot);
		return pd_ok;
	}
	/* Few paths, or a bad token: the serial check below finds the first one for the message. */
	size_t k = 0;
	char q[QUOTE_CAP];
	for (size_t p = 0; p < num_paths; p++) {
		for (size_t c = 0; c < num_tokens_per_path[p]; c++, k++) {
			ovx_string_t s = ovs_pd_token_string(pd, tokens_per_path[k]);
			if (!s.ptr)
				return pd_error("%s: tokens_per_path[%zu] = %" PRIu64
						" (path %zu, component %zu) is not a token of this dictionary",
						slot, k, (uint64_t)tokens_per_path[k], p, c);
			if (memchr(s.ptr, '/', s.length))
				return pd_error("%s: tokens_per_path[%zu] = %" PRIu64
						" (path %zu, component %zu) is %s, which contains '/' and cannot be a "
						"path component",
						slot, k, (uint64_t)tokens_per_path[k], p, c, quote(q, s.ptr, s.length));
		}
	}
	k = 0;
	for (size_t p = 0; p < num_paths; p++) {
		ovx_primpath_t cur = OVS_PD_ROOT;
		for (size_t c = 0; c < num_tokens_per_path[p]; c++, k++) {
			cur = ovs_pd_intern_child(pd, cur, tokens_per_path[k]);
			if (!cur)
				return pd_oom(slot);
		}
		out_prim_paths[p] = cur;
	}
	return pd_ok;
}

/* Validates then interns path strings (shared by create_paths_from_strings and
 * create_path_list_from_strings). */
static ovx_api_result_t intern_path_strings(ovs_pd *pd, const char *slot, const ovx_string_t *path_strings,
					    size_t num_paths, ovx_primpath_t *out)
{
	ovx_api_result_t res;
	if (num_paths >= PD_BULK_MIN) {
		/* Many paths: validated, then interned in batches over the workers (path_dict_bulk.c). */
		size_t bad;
		int rc = pd_intern_paths_bulk(pd, path_strings, num_paths, out, &bad);
		if (rc == PD_BULK_OK)
			return pd_ok;
		if (rc == PD_BULK_OOM)
			return pd_oom(slot);
		if (path_string_bad(slot, "path_strings", bad, &path_strings[bad], &res))
			return res;
		return pd_error("%s: path_strings[%zu] is not a valid path", slot, bad); /* not reached */
	}
	for (size_t i = 0; i < num_paths; i++)
		if (path_string_bad(slot, "path_strings", i, &path_strings[i], &res))
			return res;
	for (size_t i = 0; i < num_paths; i++) {
		out[i] = ovs_pd_intern_path(pd, path_strings[i].ptr, path_strings[i].length);
		if (!out[i])
			return pd_oom(slot);
	}
	return pd_ok;
}

static ovx_api_result_t pd_create_paths_from_strings(path_dictionary_context_t *instance,
						     const ovx_string_t *path_strings, size_t num_paths,
						     ovx_primpath_t *out_prim_paths)
{
	static const char slot[] = "create_paths_from_strings";
	if (num_paths == 0)
		return pd_ok;
	if (!path_strings)
		return pd_error("%s: path_strings is NULL but num_paths = %zu", slot, num_paths);
	if (!out_prim_paths)
		return pd_error("%s: out_prim_paths is NULL but num_paths = %zu", slot, num_paths);
	return intern_path_strings(CTX(instance), slot, path_strings, num_paths, out_prim_paths);
}

static ovx_api_result_t pd_create_path_list_from_paths(path_dictionary_context_t *instance,
						       const ovx_primpath_t *paths, size_t num_paths,
						       ovx_primpath_list_t *out_path_list)
{
	static const char slot[] = "create_path_list_from_paths";
	ovs_pd *pd = CTX(instance);
	if (!out_path_list)
		return pd_error("%s: out_path_list is NULL", slot);
	if (num_paths > 0 && !paths)
		return pd_error("%s: paths is NULL but num_paths = %zu", slot, num_paths);
	for (size_t i = 0; i < num_paths; i++)
		if (!ovs_pd_path_is_valid(pd, paths[i]))
			return pd_error("%s: paths[%zu] = %" PRIu64 " is not a prim path of this dictionary", slot,
					i, (uint64_t)paths[i]);
	ovx_primpath_list_t l = ovs_pd_list_create(pd, paths, num_paths);
	if (!l)
		return pd_oom(slot);
	*out_path_list = l;
	return pd_ok;
}

static ovx_api_result_t pd_create_path_list_from_strings(path_dictionary_context_t *instance,
							 const ovx_string_t *path_strings, size_t num_paths,
							 ovx_primpath_list_t *out_path_list)
{
	static const char slot[] = "create_path_list_from_strings";
	ovs_pd *pd = CTX(instance);
	if (!out_path_list)
		return pd_error("%s: out_path_list is NULL", slot);
	if (num_paths > 0 && !path_strings)
		return pd_error("%s: path_strings is NULL but num_paths = %zu", slot, num_paths);
	ovx_primpath_t stackbuf[64];
	ovx_primpath_t *paths = stackbuf;
	if (num_paths > 64) {
		if (num_paths > SIZE_MAX / sizeof(ovx_primpath_t) || !(paths = malloc(num_paths * sizeof(*paths))))
			return pd_oom(slot);
	}
	ovx_api_result_t res = intern_path_strings(pd, slot, path_strings, num_paths, paths);
	if (res.status == OVX_API_SUCCESS) {
		/* The paths were just interned: no second look at every record. */
		ovx_primpath_list_t l = pd_list_create_trusted(pd, paths, num_paths);
		if (l)
			*out_path_list = l;
		else
			res = pd_oom(slot);
	}
	if (paths != stackbuf)
		free(paths);
	return res;
}

static ovx_api_result_t dead_list(const char *slot, ovx_primpath_list_t l)
{
	return pd_error("%s: path_list %" PRIu64 " is not a live path list of this dictionary (unknown or already "
			"released)",
			slot, (uint64_t)l);
}

static ovx_api_result_t pd_add_path_list_reference(path_dictionary_context_t *instance, ovx_primpath_list_t path_list)
{
	if (path_list == OVX_INVALID_PRIMPATH_LIST)
		return pd_ok;
	if (!ovs_pd_list_add_ref(CTX(instance), path_list))
		return dead_list("add_path_list_reference", path_list);
	return pd_ok;
}

static ovx_api_result_t pd_release_path_list_reference(path_dictionary_context_t *instance,
						       ovx_primpath_list_t path_list)
{
	if (path_list == OVX_INVALID_PRIMPATH_LIST)
		return pd_ok;
	if (!ovs_pd_list_release(CTX(instance), path_list))
		return dead_list("release_path_list_reference", path_list);
	return pd_ok;
}

static ovx_api_result_t pd_get_strings_from_tokens(path_dictionary_context_t *instance, const ovx_token_t *tokens,
						   size_t num_tokens, ovx_string_t *out_strings)
{
	static const char slot[] = "get_strings_from_tokens";
	ovs_pd *pd = CTX(instance);
	if (num_tokens == 0)
		return pd_ok;
	if (!tokens)
		return pd_error("%s: tokens is NULL but num_tokens = %zu", slot, num_tokens);
	if (!out_strings)
		return pd_error("%s: out_strings is NULL but num_tokens = %zu", slot, num_tokens);
	for (size_t i = 0; i < num_tokens; i++) {
		ovx_string_t s = ovs_pd_token_string(pd, tokens[i]);
		if (!s.ptr)
			return pd_error("%s: tokens[%zu] = %" PRIu64 " is not a token of this dictionary", slot, i,
					(uint64_t)tokens[i]);
		out_strings[i] = s;
	}
	return pd_ok;
}

static ovx_api_result_t pd_get_tokens_from_paths(path_dictionary_context_t *instance, const ovx_primpath_t *prim_paths,
						 size_t num_paths, ovx_token_t *token_buffer, size_t token_buffer_size,
						 ovx_token_t **out_tokens_per_path, size_t *out_num_tokens_per_path,
						 size_t *out_num_paths_processed)
{
	static const char slot[] = "get_tokens_from_paths";
	ovs_pd *pd = CTX(instance);
	if (!out_num_paths_processed)
		return pd_error("%s: out_num_paths_processed is NULL", slot);
	*out_num_paths_processed = 0;
	if (num_paths == 0)
		return pd_ok;
	if (!prim_paths)
		return pd_error("%s: prim_paths is NULL but num_paths = %zu", slot, num_paths);
	if (!out_tokens_per_path)
		return pd_error("%s: out_tokens_per_path is NULL but num_paths = %zu", slot, num_paths);
	if (!out_num_tokens_per_path)
		return pd_error("%s: out_num_tokens_per_path is NULL but num_paths = %zu", slot, num_paths);
	if (!token_buffer && token_buffer_size > 0)
		return pd_error("%s: token_buffer is NULL but token_buffer_size = %zu", slot, token_buffer_size);
	size_t used = 0;
	for (size_t i = 0; i < num_paths; i++) {
		size_t depth = ovs_pd_path_depth(pd, prim_paths[i]);
		if (depth == SIZE_MAX) {
			*out_num_paths_processed = i;
			return pd_error("%s: prim_paths[%zu] = %" PRIu64 " is not a prim path of this dictionary", slot,
					i, (uint64_t)prim_paths[i]);
		}
		if (depth > token_buffer_size - used)
			break; /* stop before the path that does not fit */
		ovx_token_t *dst = token_buffer ? token_buffer + used : NULL;
		ovs_pd_path_tokens(pd, prim_paths[i], dst, depth);
		out_tokens_per_path[i] = dst;
		out_num_tokens_per_path[i] = depth;
		used += depth;
		*out_num_paths_processed = i + 1;
	}
	return pd_ok;
}

static ovx_api_result_t pd_get_num_paths_from_path_list(path_dictionary_context_t *instance,
							ovx_primpath_list_t path_list, size_t *out_num_paths)
{
	static const char slot[] = "get_num_paths_from_path_list";
	ovs_pd *pd = CTX(instance);
	if (!out_num_paths)
		return pd_error("%s: out_num_paths is NULL", slot);
	if (!pd_list_acquire(pd, path_list))
		return dead_list(slot, path_list);
	const ovx_primpath_t *paths;
	size_t count = 0;
	(void)ovs_pd_list_view(pd, path_list, &paths, &count); /* cannot fail: we hold a reference */
	ovs_pd_list_release(pd, path_list);
	*out_num_paths = count;
	return pd_ok;
}

static ovx_api_result_t pd_get_paths_from_path_list(path_dictionary_context_t *instance, ovx_primpath_list_t path_list,
						    size_t start_offset, size_t max_paths, ovx_primpath_t *out_paths,
						    size_t *out_num_paths)
{
	static const char slot[] = "get_paths_from_path_list";
	ovs_pd *pd = CTX(instance);
	if (!out_num_paths)
		return pd_error("%s: out_num_paths is NULL", slot);
	if (!out_paths && max_paths > 0)
		return pd_error("%s: out_paths is NULL but max_paths = %zu", slot, max_paths);
	if (!pd_list_acquire(pd, path_list))
		return dead_list(slot, path_list);
	const ovx_primpath_t *paths = NULL;
	size_t count = 0;
	(void)ovs_pd_list_view(pd, path_list, &paths, &count); /* cannot fail: we hold a reference */
	ovx_api_result_t res = pd_ok;
	if (start_offset > count) {
		res = pd_error("%s: start_offset %zu is past the end of path_list %" PRIu64 " (%zu paths)", slot,
			       start_offset, (uint64_t)path_list, count);
	} else {
		size_t n = count - start_offset;
		if (n > max_paths)
			n = max_paths;
		if (n)
			memcpy(out_paths, paths + start_offset, n * sizeof(*paths));
		*out_num_paths = n;
	}
	ovs_pd_list_release(pd, path_list);
	return res;
}

static void pd_release_error(path_dictionary_context_t *context, ovx_string_t error)
{
	(void)context;
	if (error.ptr && error.ptr != pd_oom_text)
		free((void *)error.ptr);
}

void pd_vtable_fill(path_dictionary_vtable_t *vt)
{
	vt->create_tokens_from_strings = pd_create_tokens_from_strings;
	vt->create_paths_from_tokens = pd_create_paths_from_tokens;
	vt->create_paths_from_strings = pd_create_paths_from_strings;
	vt->create_path_list_from_paths = pd_create_path_list_from_paths;
	vt->create_path_list_from_strings = pd_create_path_list_from_strings;
	vt->add_path_list_reference = pd_add_path_list_reference;
	vt->release_path_list_reference = pd_release_path_list_reference;
	vt->get_strings_from_tokens = pd_get_strings_from_tokens;
	vt->get_tokens_from_paths = pd_get_tokens_from_paths;
	vt->get_num_paths_from_path_list = pd_get_num_paths_from_path_list;
	vt->get_paths_from_path_list = pd_get_paths_from_path_list;
	vt->release_error = pd_release_error;
}
