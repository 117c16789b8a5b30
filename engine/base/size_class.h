/*
 * size_class.h — the size classes that the memory pools round requests to: up to 4 KiB multiples of
 * 64 bytes (classes 1..64), above that four classes per doubling, each the top of its quarter-octave,
 * so a class allocates at most 25 % more than its smallest request. A class's capacity maps back to
 * the class (ovs_size_class(ovs_size_class_bytes(c)) == c, below the top class), so a block can be
 * returned by the size it was asked for or by its capacity.
 *
 * Pure functions; thread-safe.
 */
#ifndef OVSTAGE_ENGINE_SIZE_CLASS_H
#define OVSTAGE_ENGINE_SIZE_CLASS_H

#include <stddef.h>
#include <stdint.h>

/* Classes are below this (the largest size_t request lands in class 272). */
#define OVS_SIZE_CLASSES 320

/* The class of a request of `bytes` (0 counts as 1 byte). */
uint32_t ovs_size_class(size_t bytes);
/* The capacity class `cls` allocates (SIZE_MAX for the top class, whose 2^64 does not fit). */
size_t ovs_size_class_bytes(uint32_t cls);

#endif /* OVSTAGE_ENGINE_SIZE_CLASS_H */
