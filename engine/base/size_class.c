/* size_class.c — the pools' size classes (see size_class.h). */
#include "size_class.h"

_Static_assert(sizeof(size_t) == 8, "the class arithmetic assumes 64-bit sizes");

uint32_t ovs_size_class(size_t bytes)
{
	if (bytes <= 4096)
		return bytes ? (uint32_t)((bytes + 63) / 64) : 1;
	size_t v = bytes - 1;
	unsigned o = 63u - (unsigned)__builtin_clzll((unsigned long long)v); /* v in [2^o, 2^(o+1)) */
	unsigned sub = (unsigned)(v >> (o - 2)) & 3u;
	return 65u + (o - 12u) * 4u + sub;
}

size_t ovs_size_class_bytes(uint32_t cls)
{
	if (cls <= 64)
		return (size_t)cls * 64;
	unsigned k = cls - 65u, o = 12u + k / 4u, sub = k % 4u;
	if (o == 63u && sub == 3u)
		return SIZE_MAX; /* 2^64 itself: saturated (such a request cannot be met anyway) */
	return (size_t)(5u + sub) << (o - 2u);
}
