"""bench/python/step_loop.py — the step loop of issue 10 through three bindings:

  ext     the ovstage C extension (import ovstage)
  ctypes  a ctypes binding of the same C calls, written for this benchmark only (below)

Each step writes 8 float32 columns of P prims at ordinal = step, seals the step, reads the 8
columns back (latest) and takes a numpy view of every group. The C peer is step_c.c (run.sh runs
all three and prints each figure beside its peer with the ratio). Prints lines
"<name> <steps> <seconds> <api calls per step>".
"""

import ctypes as C
import os
import sys
import time

import numpy as np

COLS = 8


def run_ext(prims, steps):
    import ovstage

    st = ovstage.Stage("bench.ext")
    pd = st.get_path_dictionary()
    q = st.query_from_path_list(pd.create_path_list_from_strings([f"/World/P{i}" for i in range(prims)]))
    toks = [pd.intern_token(f"col{c}") for c in range(COLS)]
    vals = np.zeros(prims, np.float32)
    sink = 0.0
    warm = steps // 10
    write, floor, read_attributes = st.write_attribute, st.advance_write_floor, st.read_attributes
    for s in range(1, steps + warm + 1):
        if s == warm + 1:
            t0 = time.perf_counter()
        vals[:] = s
        for t in toks:
            write(q, t, s, vals, is_array=False).wait()
        floor(s).wait()
        r = read_attributes(q, toks, s)
        r.wait()
        while True:
            g = r.fetch_next()
            if g is None:
                break
            sink += g.array(0)[0]
            g.release()
        r.release().wait()
    dt = time.perf_counter() - t0
    q.release().wait()
    st.destroy()
    return dt


# ---- a ctypes binding of the calls the loop makes (benchmark only) ------------------------------

class DLDevice(C.Structure):
    _fields_ = [("device_type", C.c_int), ("device_id", C.c_int)]


class DLDataType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class DLTensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("device", DLDevice), ("ndim", C.c_int32), ("dtype", DLDataType),
                ("shape", C.POINTER(C.c_int64)), ("strides", C.POINTER(C.c_int64)), ("byte_offset", C.c_uint64)]


class OvxString(C.Structure):
    _fields_ = [("ptr", C.c_char_p), ("length", C.c_size_t)]


class StringOrToken(C.Structure):
    _fields_ = [("token", C.c_uint64), ("string", OvxString)]


class Enq(C.Structure):
    _fields_ = [("status", C.c_int), ("op_index", C.c_uint64)]


class WaitResult(C.Structure):
    _fields_ = [("error_op_ids", C.POINTER(C.c_uint64)), ("error_op_id_count", C.c_size_t),
                ("lowest_pending_op_id", C.c_uint64)]


class CudaSync(C.Structure):
    _fields_ = [("stream", C.c_size_t), ("wait_event", C.c_size_t)]


class WriteData(C.Structure):
    _fields_ = [("tensors", C.POINTER(DLTensor)), ("managed_tensors", C.c_void_p), ("tensor_count", C.c_uint32),
                ("count", C.c_uint32), ("index_map", C.c_void_p), ("mask", C.c_void_p), ("cuda_sync", CudaSync),
                ("semantic", C.c_int), ("is_array", C.c_bool)]


class Data(C.Structure):
    _fields_ = [("tensors", C.POINTER(DLTensor)), ("tensor_count", C.c_uint32), ("count", C.c_uint32),
                ("index_map", C.c_void_p), ("mask", C.c_void_p), ("cuda_sync", CudaSync)]


class PrimGroup(C.Structure):
    _fields_ = [("list", C.c_uint64), ("offset", C.c_uint32), ("count", C.c_uint32), ("index_map", C.c_void_p)]


class Meta(C.Structure):
    _fields_ = [("floor", C.c_uint64), ("layout_generation", C.c_uint64)]


class ReadGroup(C.Structure):
    _fields_ = [("read_group_id", C.c_uint64), ("attribute", C.c_uint64), ("ordinal", C.c_uint64),
                ("is_delete", C.c_bool), ("is_array", C.c_bool), ("semantic", C.c_int), ("prims", PrimGroup),
                ("data", Data), ("meta", Meta)]


class Range(C.Structure):
    _fields_ = [("start_ordinal", C.c_uint64), ("end_ordinal", C.c_uint64), ("has_start_ordinal", C.c_bool)]


class FloorDesc(C.Structure):
    _fields_ = [("ordinal", C.c_uint64), ("scope", C.c_int), ("attributes", C.c_void_p), ("attribute_count", C.c_size_t)]


CTX = C.c_void_p
_slots = [
    ("wait_op", C.CFUNCTYPE(C.c_int, CTX, C.c_uint64, C.c_uint64, C.POINTER(WaitResult))),
    ("release_op", C.CFUNCTYPE(C.c_int, CTX, C.c_uint64)),
    ("advance_write_floor", C.CFUNCTYPE(Enq, CTX, C.POINTER(FloorDesc))),
    ("get_oldest_preserved_ordinal", C.c_void_p),
    ("get_attribute_write_floor", C.c_void_p),
    ("fetch_ordinal", C.c_void_p),
    ("release_ordinal_query", C.c_void_p),
    ("query", C.c_void_p),
    ("query_from_path_list", C.CFUNCTYPE(C.c_int, CTX, C.c_uint64, C.POINTER(C.c_uint64))),
    ("fetch_query_result", C.c_void_p),
    ("release_query_result", C.c_void_p),
    ("release_query", C.CFUNCTYPE(Enq, CTX, C.c_uint64)),
    ("read_attributes", C.CFUNCTYPE(Enq, CTX, C.c_uint64, C.POINTER(C.c_uint64), C.c_size_t, Range,
                                    C.POINTER(C.c_uint64))),
    ("fetch_read_next", C.CFUNCTYPE(C.c_int, CTX, C.c_uint64, C.c_uint64, C.POINTER(ReadGroup))),
    ("release_group", C.CFUNCTYPE(C.c_int, CTX, C.POINTER(ReadGroup))),
    ("release_read", C.CFUNCTYPE(Enq, CTX, C.c_uint64)),
    ("write_attribute", C.CFUNCTYPE(Enq, CTX, C.c_uint64, StringOrToken, C.c_uint64, WriteData, C.c_int)),
    ("map_attribute", C.c_void_p), ("fetch_map_next", C.c_void_p), ("unmap_group", C.c_void_p),
    ("unmap_attribute", C.c_void_p), ("delete_attributes", C.c_void_p), ("get_version", C.c_void_p),
    ("get_error_string", C.c_void_p), ("get_last_op_error", C.c_void_p),
    ("get_path_dictionary", C.CFUNCTYPE(C.c_void_p, CTX)),
]


class VTable(C.Structure):
    _fields_ = _slots


class Instance(C.Structure):
    _fields_ = [("vtable", C.POINTER(VTable)), ("context", C.c_void_p)]


class ApiResult(C.Structure):
    _fields_ = [("status", C.c_int), ("error", OvxString)]


class PdVTable(C.Structure):
    _fields_ = [("create_tokens_from_strings", C.CFUNCTYPE(ApiResult, C.c_void_p, C.POINTER(OvxString), C.c_size_t,
                                                           C.POINTER(C.c_uint64))),
                ("create_paths_from_tokens", C.c_void_p), ("create_paths_from_strings", C.c_void_p),
                ("create_path_list_from_paths", C.c_void_p),
                ("create_path_list_from_strings", C.CFUNCTYPE(ApiResult, C.c_void_p, C.POINTER(OvxString),
                                                              C.c_size_t, C.POINTER(C.c_uint64)))]


class PdInstance(C.Structure):
    _fields_ = [("vtable", C.POINTER(PdVTable)), ("context", C.c_void_p)]


INF = 2**64 - 1


def run_ctypes(prims, steps, libpath):
    lib = C.CDLL(libpath)
    lib.ovstage_create_instance.argtypes = [C.POINTER(C.c_char_p), C.POINTER(C.POINTER(Instance))]
    lib.ovstage_destroy_instance.argtypes = [C.POINTER(Instance)]
    inst = C.POINTER(Instance)()
    name = C.c_char_p(b"bench.ctypes")
    assert lib.ovstage_create_instance(C.byref(name), C.byref(inst)) == 0
    vt, ctx = inst.contents.vtable.contents, inst.contents.context
    pd = C.cast(vt.get_path_dictionary(ctx), C.POINTER(PdInstance)).contents
    strs = [f"/World/P{i}".encode() for i in range(prims)]
    arr = (OvxString * prims)(*[OvxString(s, len(s)) for s in strs])
    plist = C.c_uint64()
    pd.vtable.contents.create_path_list_from_strings(pd.context, arr, prims, C.byref(plist))
    q = C.c_uint64()
    vt.query_from_path_list(ctx, plist.value, C.byref(q))
    names = [f"col{c}".encode() for c in range(COLS)]
    toks = (C.c_uint64 * COLS)()
    pd.vtable.contents.create_tokens_from_strings(pd.context, (OvxString * COLS)(*[OvxString(n, len(n)) for n in names]),
                                                  COLS, toks)
    wr = WaitResult()

    def wait(e):
        if e.status != 0 or vt.wait_op(ctx, e.op_index, INF, C.byref(wr)) != 0 or wr.error_op_id_count:
            raise RuntimeError("op failed")
        vt.release_op(ctx, e.op_index)

    vals = np.zeros(prims, np.float32)
    sink = 0.0
    warm = steps // 10
    group = ReadGroup()
    rh = C.c_uint64()
    for s in range(1, steps + warm + 1):
        if s == warm + 1:
            t0 = time.perf_counter()
        vals[:] = s
        # What a ctypes binding does per write: a DLTensor over the array, the write data, the call.
        for c in range(COLS):
            shape = (C.c_int64 * 1)(prims)
            strides = (C.c_int64 * 1)(1)
            t = DLTensor(vals.ctypes.data, DLDevice(1, 0), 1, DLDataType(2, 32, 1), shape, strides, 0)
            w = WriteData(C.pointer(t), None, 1, 0, None, None, CudaSync(0, 0), 0, False)
            wait(vt.write_attribute(ctx, q.value, StringOrToken(toks[c], OvxString(None, 0)), s, w, 0))
        wait(vt.advance_write_floor(ctx, C.byref(FloorDesc(s, 0, None, 0))))
        wait(vt.read_attributes(ctx, q.value, toks, COLS, Range(0, s, False), C.byref(rh)))
        while vt.fetch_read_next(ctx, rh.value, INF, C.byref(group)) == 0:
            t = group.data.tensors[0]
            a = np.ctypeslib.as_array(C.cast(t.data, C.POINTER(C.c_float)), shape=(t.shape[0] * t.dtype.lanes,))
            sink += a[0]
            vt.release_group(ctx, C.byref(group))
        wait(vt.release_read(ctx, rh.value))
    dt = time.perf_counter() - t0
    wait(vt.release_query(ctx, q.value))
    lib.ovstage_destroy_instance(inst)
    return dt


if __name__ == "__main__":
    which, prims, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    calls = 3 * COLS + 3 + 3 + (COLS + 1) + COLS + 3  # the C API calls of one step (as step_c.c counts)
    if which == "ext":
        dt = run_ext(prims, steps)
    else:
        dt = run_ctypes(prims, steps, sys.argv[4])
    print(f"{which} {steps} {dt:.6f} {calls}")
