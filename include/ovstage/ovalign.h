/*
 * ovstage/ovalign.h — cross-attribute group alignment of read results. Needs no stage instance.
 *
 * Contract: ovalign_align re-cuts the read groups of several attributes so that every attribute
 * has the same number of groups and, at each group index, identical prims offset / count /
 * index_map (the data stays per attribute). Input that is already aligned is returned zero-copy
 * (skipped = true, pointers into the input). A non-NULL prim_order reorders the prims. Every
 * successful ovalign_align must be paired with ovalign_release (NULL-safe, no-op when skipped).
 */
#ifndef OVALIGN_H
#define OVALIGN_H

#include <stddef.h>
#include <stdbool.h>
#include "ovstage.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Where the alignment runs. */
typedef enum
{
    OVALIGN_DEVICE_CPU = 0,
    OVALIGN_DEVICE_CUDA = 1,
} ovalign_device_t;

/** Which groups to align, for which attributes. */
typedef struct
{
    const ovstage_read_group_t* groups; /**< input groups of all attributes, mixed */
    size_t group_count;                 /**< number of input groups */
    const ovx_token_t* attributes;      /**< attributes to align */
    size_t attr_count;                  /**< number of attributes */
    ovx_primpath_list_t prim_list;      /**< the query's prim list the groups index into */
    const uint32_t* prim_order;         /**< NULL = natural order, else the prim order wanted */
    size_t prim_order_count;            /**< length of prim_order */
    ovalign_device_t device;            /**< where to run */
} ovalign_request_t;

/** Aligned groups of one attribute. */
typedef struct
{
    const ovstage_read_group_t* groups; /**< group_count aligned groups */
    size_t group_count;                 /**< same for every attribute of a result */
} ovalign_attr_result_t;

/** Result of ovalign_align. */
typedef struct
{
    const ovalign_attr_result_t* attrs; /**< one entry per requested attribute */
    size_t attr_count;                  /**< number of attributes */
    size_t group_count;                 /**< common group count */
    bool skipped;                       /**< true: input was already aligned, pointers alias the input */
} ovalign_result_t;

/** Aligns; 0 on success, non-zero on error. */
OVSTAGE_API int ovalign_align(const ovalign_request_t* request, ovalign_result_t* out_result);

/** Frees what ovalign_align allocated; NULL-safe, no-op when skipped. */
OVSTAGE_API void ovalign_release(ovalign_result_t* result);

#ifdef __cplusplus
}
#endif

#endif /* OVALIGN_H */
