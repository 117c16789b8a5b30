/*
 * ovx/dlpack_compat.h — the DLPack 1.x types the ovstage API needs, on top of whatever DLPack
 * header the system provides.
 *
 * Contract:
 *  - Include it after (or instead of) <dlpack/dlpack.h>; it includes that header itself.
 *  - With a system header older than 1.0 (no DLPACK_MAJOR_VERSION; Debian's libdlpack-dev 0.6 is
 *    one) it declares DLPackVersion, DLManagedTensorVersioned and the DLPACK_FLAG_BITMASK_* flags
 *    with the DLPack 1.x layout, and then defines DLPACK_MAJOR_VERSION 1 / DLPACK_MINOR_VERSION 1
 *    so that producers can stamp DLManagedTensorVersioned.version as usual. OVX_DLPACK_COMPAT_V1 is
 *    then 1 (0 when the system header already was 1.x).
 *  - DLDataTypeCode / DLDeviceType values that the system enum lacks are supplied as macros whose
 *    value is cast to the enum type (`kDLBool` is `((DLDataTypeCode)6)`), so they work in
 *    initializers, case labels and assignments to the enum type in both C and C++.
 *  - On 64-bit targets the layouts of DLDevice, DLDataType, DLTensor, DLPackVersion and
 *    DLManagedTensorVersioned are checked at compile time against the DLPack 1.x ABI.
 *
 * The older system header spells DLTensor.ndim and DLDevice.device_id as `int` where 1.x says
 * `int32_t`; the static assertions below prove the layouts are the same.
 */
#ifndef OVX_DLPACK_COMPAT_H
#define OVX_DLPACK_COMPAT_H

#include <stddef.h>
#include <stdint.h>
#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Versioned managed tensor (DLPack 1.0) -------------------------------------------------- */
#ifndef DLPACK_MAJOR_VERSION

#define OVX_DLPACK_COMPAT_V1 1

/** ABI version of a DLManagedTensorVersioned. */
typedef struct
{
    uint32_t major; /**< major version; a consumer rejects a tensor whose major it does not know */
    uint32_t minor; /**< minor version; only adds enum values, never changes layout */
} DLPackVersion;

/** A DLTensor with an owner, a version stamp and flags; the deleter releases it exactly once. */
typedef struct DLManagedTensorVersioned
{
    DLPackVersion version; /**< DLPack ABI version the producer filled this struct for */
    void* manager_ctx;     /**< producer's context, opaque to the consumer (may be NULL) */
    void (*deleter)(struct DLManagedTensorVersioned* self); /**< frees `self` and its data; may be NULL */
    uint64_t flags;        /**< OR of DLPACK_FLAG_BITMASK_* */
    DLTensor dl_tensor;    /**< the tensor being managed */
} DLManagedTensorVersioned;

/** The data must not be written through this tensor. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
/** The producer copied the data for this exchange; the consumer owns the only reference. */
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)

/* Device types added after 0.6 (DLPACK_VERSION 60). */
#if !defined(DLPACK_VERSION) || DLPACK_VERSION < 70
#define kDLOneAPI ((DLDeviceType)14)
#endif
#if !defined(DLPACK_VERSION) || DLPACK_VERSION < 80
#define kDLWebGPU ((DLDeviceType)15)
#define kDLHexagon ((DLDeviceType)16)
/* Boolean element type, one byte per element. */
#define kDLBool ((DLDataTypeCode)6)
#endif
#define kDLMAIA ((DLDeviceType)17)

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 0

#else /* the system header is DLPack 1.x */

#define OVX_DLPACK_COMPAT_V1 0

#endif /* DLPACK_MAJOR_VERSION */

/* ---- DLPack 1.1 additions: sub-byte padding flag, FP8/FP6/FP4 codes ------------------------- */
#if DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION < 1

/** Sub-byte elements (bits < 8) are each padded to a whole byte. */
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

#define kDLFloat8_e3m4 ((DLDataTypeCode)7)
#define kDLFloat8_e4m3 ((DLDataTypeCode)8)
#define kDLFloat8_e4m3b11fnuz ((DLDataTypeCode)9)
#define kDLFloat8_e4m3fn ((DLDataTypeCode)10)
#define kDLFloat8_e4m3fnuz ((DLDataTypeCode)11)
#define kDLFloat8_e5m2 ((DLDataTypeCode)12)
#define kDLFloat8_e5m2fnuz ((DLDataTypeCode)13)
#define kDLFloat8_e8m0fnu ((DLDataTypeCode)14)
#define kDLFloat6_e2m3fn ((DLDataTypeCode)15)
#define kDLFloat6_e3m2fn ((DLDataTypeCode)16)
#define kDLFloat4_e2m1fn ((DLDataTypeCode)17)

#if OVX_DLPACK_COMPAT_V1
/* Everything up to 1.1 is now declared: say so. */
#undef DLPACK_MINOR_VERSION
#define DLPACK_MINOR_VERSION 1
#endif

#endif /* 1.1 additions */

/* AWS Trainium device type (newest 1.x); harmless if the enum already names it. */
#if DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION < 2
#define kDLTrn ((DLDeviceType)18)
#endif

/* ---- Layout checks (DLPack 1.x ABI on 64-bit targets) --------------------------------------- */
#ifdef __cplusplus
#define OVX_DLPACK_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define OVX_DLPACK_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

#if UINTPTR_MAX == UINT64_MAX
OVX_DLPACK_STATIC_ASSERT(sizeof(DLDataType) == 4, "DLDataType is 4 bytes");
OVX_DLPACK_STATIC_ASSERT(offsetof(DLDataType, code) == 0, "DLDataType.code at 0");
OVX_DLPACK_STATIC_ASSERT(offsetof(DLDataType, bits) == 1, "DLDataType.bits at 1");
OVX_DLPACK_STATIC_ASSERT(offsetof(DLDataType, lanes) == 2, "DLDataType.lanes at 2");

OVX_DLPACK_STATIC_ASSERT(sizeof(DLDevice) == 8, "DLDevice is 8 bytes");
OVX_DLPACK_STATIC_ASSERT(offsetof(DLDevice, device_type) == 0, "DLDevice.device_type at 0");
OVX_DLPACK_STATIC_ASSERT(offsetof(DLDevice, device_id) == 4, "DLDevice.device_id at 4");

OVX_DLPACK_STATIC_ASSERT(sizeof(DLTensor) == 48, "DLTensor is 48 bytes");
OVX_DLPACK_STATIC_ASSERT(offsetof(DLTensor, data) == 0, "DLTensor.data at 0");
OVX_DLPACK_STATIC_ASSERT(offsetof(DLTensor, device) == 8, "DLTensor.device at 8");
OVX_DLPACK_STATIC_ASSERT(offsetof(DLTensor, ndim) == 16, "DLTensor.ndim at 16");
OVX_DLPACK_STATIC_ASSERT(offsetof(DLTensor, dtype) == 20, "DLTensor.dtype at 20");
OVX_DLPACK_STATIC_ASSERT(offsetof(DLTensor, shape) == 24, "DLTensor.shape at 24");
OVX_DLPACK_STATIC_ASSERT(offsetof(DLTensor, strides) == 32, "DLTensor.strides at 32");
OVX_DLPACK_STATIC_ASSERT(offsetof(DLTensor, byte_offset) == 40, "DLTensor.byte_offset at 40");

OVX_DLPACK_STATIC_ASSERT(sizeof(DLPackVersion) == 8, "DLPackVersion is 8 bytes");
OVX_DLPACK_STATIC_ASSERT(offsetof(DLPackVersion, major) == 0, "DLPackVersion.major at 0");
OVX_DLPACK_STATIC_ASSERT(offsetof(DLPackVersion, minor) == 4, "DLPackVersion.minor at 4");

OVX_DLPACK_STATIC_ASSERT(sizeof(DLManagedTensorVersioned) == 80, "DLManagedTensorVersioned is 80 bytes");
OVX_DLPACK_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, version) == 0, "DLManagedTensorVersioned.version at 0");
OVX_DLPACK_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, manager_ctx) == 8,
                         "DLManagedTensorVersioned.manager_ctx at 8");
OVX_DLPACK_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, deleter) == 16, "DLManagedTensorVersioned.deleter at 16");
OVX_DLPACK_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, flags) == 24, "DLManagedTensorVersioned.flags at 24");
OVX_DLPACK_STATIC_ASSERT(offsetof(DLManagedTensorVersioned, dl_tensor) == 32,
                         "DLManagedTensorVersioned.dl_tensor at 32");
#endif /* 64-bit */

#ifdef __cplusplus
}
#endif

#endif /* OVX_DLPACK_COMPAT_H */
