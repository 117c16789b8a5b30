"""DLPack in and out: numpy round trips, legacy and versioned capsules, capsule ownership, the lane
fold of make_dltensor, and the export shapes of ReadGroup.dlpack (seed 000's table)."""

import sys
import weakref

import numpy as np
import pytest

import ovstage
from ovstage import DLDataType, DLDataTypeCode, OvstageError

from conftest import f32, read_column

NUMPY2 = int(np.__version__.split(".")[0]) >= 2


class LegacyProducer:
    """A pre-1.0 producer: __dlpack__ without max_version (a TypeError when it is passed)."""

    def __init__(self, arr):
        self.arr = arr
        self.calls = []

    def __dlpack__(self, stream=None):
        self.calls.append(("legacy", stream))
        return self.arr.__dlpack__()

    def __dlpack_device__(self):
        return (1, 0)


class VersionedProducer:
    def __init__(self, arr):
        self.arr = arr
        self.calls = []

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append(("versioned", stream, max_version))
        return self.arr.__dlpack__(max_version=max_version)

    def __dlpack_device__(self):
        return (1, 0)


def test_numpy_round_trip_dtypes(stage, prims):
    p = prims(4)
    for i, dt in enumerate([np.float32, np.float64, np.int32, np.int64, np.uint8, np.uint16, np.int8]):
        vals = (np.arange(4) * 3 + i).astype(dt)
        stage.write_attribute(p.query, f"col{i}", 1, vals, is_array=False).wait()
    stage.advance_write_floor(1).wait()
    for i, dt in enumerate([np.float32, np.float64, np.int32, np.int64, np.uint8, np.uint16, np.int8]):
        [(kind, n, got)] = read_column(stage, p.query, f"col{i}", 1)
        assert kind == "value" and n == 4
        assert got.dtype == np.dtype(dt)
        np.testing.assert_array_equal(got, (np.arange(4) * 3 + i).astype(dt))


def test_legacy_capsule_producer(stage, prims):
    p = prims(3)
    prod = LegacyProducer(f32(1, 2, 3))
    stage.write_attribute(p.query, "t", 1, prod, is_array=False).wait()
    # The binding asked for a versioned capsule first, got a TypeError, then took the legacy one.
    assert prod.calls == [("legacy", None)]
    stage.advance_write_floor(1).wait()
    [(_, _, got)] = read_column(stage, p.query, "t", 1)
    np.testing.assert_array_equal(got, [1, 2, 3])


@pytest.mark.skipif(not NUMPY2, reason="numpy < 2 exports legacy capsules only")
def test_versioned_capsule_producer(stage, prims):
    p = prims(3)
    prod = VersionedProducer(f32(4, 5, 6))
    stage.write_attribute(p.query, "t", 1, prod, is_array=False).wait()
    assert prod.calls == [("versioned", None, (1, 0))]
    t = ovstage.DLTensor.from_dlpack(VersionedProducer(f32(1, 1, 1)))
    assert t.shape == (3,) and t.dtype == DLDataType(2, 32, 1)
    stage.advance_write_floor(1).wait()
    [(_, _, got)] = read_column(stage, p.query, "t", 1)
    np.testing.assert_array_equal(got, [4, 5, 6])


@pytest.mark.skipif(not NUMPY2, reason="numpy < 2 has no versioned capsules")
def test_readonly_numpy_array_goes_in_versioned(stage, prims):
    # numpy exports a read-only array only as a versioned capsule (BufferError on the legacy path).
    p = prims(2)
    a = f32(9, 8)
    a.flags.writeable = False
    t = ovstage.DLTensor.from_dlpack(a)
    assert t.readonly
    stage.write_attribute(p.query, "ro", 1, a, is_array=False).wait()
    stage.advance_write_floor(1).wait()
    [(_, _, got)] = read_column(stage, p.query, "ro", 1)
    np.testing.assert_array_equal(got, [9, 8])


def test_capsule_renamed_and_deleter_kept_until_op_done(stage, prims):
    p = prims(3)
    arr = f32(1, 2, 3)
    cap = arr.__dlpack__()
    seen = {}

    class CapsuleProducer:
        def __dlpack__(self, stream=None, max_version=None):
            seen["cap"] = cap
            return cap

    gone = weakref.ref(arr)
    op = stage.write_attribute(p.query, "c", 1, CapsuleProducer(), is_array=False)
    assert "used_dltensor" in repr(seen["cap"])  # consumed: renamed
    del arr, cap, seen
    # The capsule's manager keeps the array alive while the op may read it.
    assert gone() is not None
    op.wait()
    assert gone() is None  # the producer's deleter ran once the op was done


def test_consumed_capsule_is_refused(stage, prims):
    p = prims(3)
    cap = f32(1, 2, 3).__dlpack__()
    ovstage.DLTensor.from_dlpack(type("P", (), {"__dlpack__": lambda self, **k: cap})())
    with pytest.raises(BufferError, match="used_dltensor"):
        stage.write_attribute(p.query, "c", 1, type("P", (), {"__dlpack__": lambda self, **k: cap})(),
                              is_array=False)


def test_fixed_convenience_shape_and_dlpack_export_lane_axis(stage, prims):
    # (N, 3) lanes 1 folds into point3f rows; reads are canonical (N,) lanes 3; dlpack gives (N, 3).
    p = prims(2)
    pts = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    stage.write_attribute(p.query, "pos", 1, pts, is_array=False, semantic=ovstage.AttributeSemantic.POINT).wait()
    mats = np.arange(32, dtype=np.float64).reshape(2, 4, 4)
    stage.write_attribute(p.query, "xf", 1, mats, is_array=False, semantic=ovstage.AttributeSemantic.MATRIX).wait()
    stage.advance_write_floor(1).wait()
    with stage.read_attributes(p.query, ["pos", "xf"], 1) as read:
        got = {}
        for g in read.groups():
            name = p.pd.token_to_string(g.attribute)
            t = g.tensor(0)
            got[name] = (t.shape, t.dtype, g.array(0).shape, g.dlpack(0).shape, np.from_dlpack(g.dlpack(0)).copy(),
                         g.semantic)
    assert got["pos"][:4] == ((2,), DLDataType(2, 32, 3), (6,), (2, 3))
    np.testing.assert_array_equal(got["pos"][4], pts)
    assert got["pos"][5] == ovstage.AttributeSemantic.POINT
    assert got["xf"][:4] == ((2,), DLDataType(2, 64, 16), (32,), (2, 16))
    np.testing.assert_array_equal(got["xf"][4], mats.reshape(2, 16))


@pytest.mark.skipif(not NUMPY2, reason="numpy < 2 ignores the DLPack read-only flag")
def test_read_exports_are_read_only(stage, prims):
    p = prims(2)
    stage.write_attribute(p.query, "v", 1, f32(1, 2), is_array=False).wait()
    stage.advance_write_floor(1).wait()
    with stage.read_attributes(p.query, ["v"], 1) as read:
        for g in read.groups():
            a = g.array(0)
            with pytest.raises(ValueError):
                a[0] = 5
            d = np.from_dlpack(g.dlpack(0))
            assert not d.flags.writeable
            with pytest.raises(ValueError, match="read-only"):
                g.dlpack(0, readonly=False)
            del a, d


def test_legacy_export_capsule(stage, prims):
    p = prims(2)
    stage.write_attribute(p.query, "v", 1, f32(3, 4), is_array=False).wait()
    stage.advance_write_floor(1).wait()
    with stage.read_attributes(p.query, ["v"], 1) as read:
        g = read.fetch_next()
        m = g.dlpack(0)
        assert m.__dlpack_device__() == (1, 0)
        cap = m.__dlpack__()
        assert "dltensor" in repr(cap) and "versioned" not in repr(cap)
        vcap = m.__dlpack__(max_version=(1, 0))
        assert "dltensor_versioned" in repr(vcap)
        with pytest.raises(BufferError):
            m.__dlpack__(stream=5)
        with pytest.raises(BufferError):
            m.__dlpack__(dl_device=(2, 0))
        # An unconsumed capsule frees its tensor (and its pin) when collected.
        del cap, vcap
        np.testing.assert_array_equal(m.numpy(), [3, 4])
        g.release()
        del m


def test_make_dltensor_lane_fold_into_point3f_array(stage, prims):
    """The issue's Warp pattern with numpy standing in: (N, 3) float32 -> (N,) lanes 3 for point3f[]."""
    p = prims(2)
    float3 = DLDataType(code=DLDataTypeCode.kDLFloat, bits=32, lanes=3)
    rows = [np.arange(6, dtype=np.float32).reshape(2, 3), np.arange(9, dtype=np.float32).reshape(3, 3) + 10]
    ts = [ovstage.make_dltensor(r, dtype=float3) for r in rows]
    assert [t.shape for t in ts] == [(2,), (3,)]
    assert ts[0].dtype == float3
    stage.write_attribute(p.query, "pts", 1, ts, is_array=True, semantic=ovstage.AttributeSemantic.POINT).wait()
    stage.advance_write_floor(1).wait()
    with stage.read_attributes(p.query, ["pts"], 1) as read:
        got = []
        for g in read.groups():
            assert g.is_array
            for i in range(g.prim_count):
                row = g.data_row_index(i)
                got.append((g.tensor(row).dtype, np.from_dlpack(g.dlpack(row)).copy()))
    assert [d for d, _ in got] == [float3, float3]
    np.testing.assert_array_equal(got[0][1], rows[0])
    np.testing.assert_array_equal(got[1][1], rows[1])


def test_make_dltensor_full_fold_and_validation():
    float3 = DLDataType(2, 32, 3)
    t = ovstage.make_dltensor(np.array([1, 2, 3], np.float32), dtype=float3)
    assert t.shape == (1,) and t.strides == (1,)
    with pytest.raises(ValueError, match="base type"):
        ovstage.make_dltensor(np.zeros((2, 3), np.float64), dtype=float3)
    with pytest.raises(ValueError, match="do not fold"):
        ovstage.make_dltensor(np.zeros((2, 4), np.float32), dtype=float3)
    with pytest.raises(ValueError, match="compact"):
        ovstage.make_dltensor(np.zeros((2, 6), np.float32)[:, ::2], dtype=float3)
    with pytest.raises(ValueError, match="spans"):
        ovstage.make_dltensor(np.zeros(4, np.float32), shape=[5])
    with pytest.raises(ValueError, match="does not match the source device"):
        ovstage.make_dltensor(np.zeros(4, np.float32), device_type=ovstage.DLDeviceType.kDLCUDA)
    with pytest.raises(ValueError, match="ndim"):
        ovstage.make_dltensor(np.zeros(4, np.float32), shape=[2, 2], ndim=1)
    v = ovstage.make_dltensor(np.arange(6, dtype=np.float32), shape=[2, 3])
    assert v.shape == (2, 3) and v.strides == (3, 1)
    np.testing.assert_array_equal(v.numpy(), np.arange(6))
    with pytest.raises(TypeError, match="dtype"):
        ovstage.make_dltensor(np.zeros(3), dtype="nonsense-dtype")


def test_make_dltensor_dtype_with_shape_reinterprets_the_bytes(stage, prims):
    """0.2.1's form: a flat array of 3N float32 (16N float64) with dtype lanes 3 (16) and shape [N]."""
    float3, mat = DLDataType(2, 32, 3), DLDataType(2, 64, 16)
    t = ovstage.make_dltensor(np.arange(6, dtype=np.float32), dtype=float3, shape=[2])
    assert t.shape == (2,) and t.strides == (1,) and t.dtype == float3
    # the C field names, as 0.2.1's ctypes DLTensor has them
    assert t.shape_tuple == (2,) and t.ndim == 1 and t.byte_offset == 0 and t.data == t.data_ptr != 0
    m = ovstage.make_dltensor(np.tile(np.eye(4).ravel(), 3), dtype=mat, shape=[3])
    assert m.shape == (3,) and m.dtype == mat
    # the same as the fold where both apply
    assert ovstage.make_dltensor(np.zeros((4, 3), np.float32), dtype=float3, shape=[4]).shape == (4,)
    with pytest.raises(ValueError, match="spans 36 bytes, the source only 24"):
        ovstage.make_dltensor(np.arange(6, dtype=np.float32), dtype=float3, shape=[3])
    with pytest.raises(ValueError, match="base type"):
        ovstage.make_dltensor(np.arange(6, dtype=np.float32), dtype=mat, shape=[1])
    p = prims(2)
    stage.write_attribute(p.query, "tint", 1, t, is_array=False, semantic=ovstage.AttributeSemantic.COLOR).wait()
    stage.advance_write_floor(1).wait()
    with stage.read_attributes(p.query, ["tint"], 1) as read:
        g = read.fetch_next()
        assert g.tensor(0).dtype == float3
        np.testing.assert_array_equal(g.array(0), np.arange(6, dtype=np.float32))
        g.release()


def test_dltensor_to_numpy_and_numpy_to_dldatatype():
    a = np.arange(5, dtype=np.int16)
    v = ovstage.dltensor_to_numpy(a)
    np.testing.assert_array_equal(v, a)
    a[0] = 42
    assert v[0] == 42  # zero copy
    assert ovstage.numpy_to_dldatatype(np.float32, 3) == DLDataType(2, 32, 3)
    with pytest.raises(ValueError):
        ovstage.numpy_to_dldatatype(np.float32, 0)
    with pytest.raises(TypeError):
        ovstage.numpy_to_dldatatype(np.float32, 1.0)


def test_warp_cpu_vec3_lane_fold(stage, prims):
    wp = pytest.importorskip("warp", reason="warp is not installed here (pip install warp-lang to run this)")
    wp.init()
    p = prims(1)
    pts = wp.array([[1, 2, 3], [4, 5, 6]], dtype=wp.vec3f, device="cpu")
    t = ovstage.make_dltensor(pts, dtype=DLDataType(2, 32, 3))
    assert t.shape == (2,)
    stage.write_attribute(p.query, "pts", 1, [t], is_array=True, semantic=ovstage.AttributeSemantic.POINT).wait()
    stage.advance_write_floor(1).wait()
    with stage.read_attributes(p.query, ["pts"], 1) as read:
        g = read.fetch_next()
        out = wp.from_dlpack(g.dlpack(0))
        np.testing.assert_array_equal(out.numpy(), [[1, 2, 3], [4, 5, 6]])
        del out
        g.release()


def test_torch_cpu_round_trip(stage, prims):
    torch = pytest.importorskip("torch", reason="torch is not installed here")
    p = prims(3)
    stage.write_attribute(p.query, "t", 1, torch.tensor([1.0, 2.0, 3.0]), is_array=False).wait()
    stage.advance_write_floor(1).wait()
    with stage.read_attributes(p.query, ["t"], 1) as read:
        g = read.fetch_next()
        out = torch.from_dlpack(g.dlpack(0))
        assert out.tolist() == [1.0, 2.0, 3.0]
        del out
        g.release()



class Bfloat16Producer:
    """A CPU producer of kDLBfloat16 (n,) over a numpy uint16 buffer (numpy itself cannot make one)."""

    def __init__(self, bits):
        import ctypes

        class Tensor(ctypes.Structure):
            _fields_ = [("data", ctypes.c_void_p), ("device", ctypes.c_int32 * 2), ("ndim", ctypes.c_int32),
                        ("dtype", ctypes.c_uint8 * 4), ("shape", ctypes.POINTER(ctypes.c_int64)),
                        ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]

        class Managed(ctypes.Structure):
            _fields_ = [("dl_tensor", Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]

        self.bits = bits
        self.shape = (ctypes.c_int64 * 1)(len(bits))
        self.m = Managed()
        self.m.dl_tensor.data = bits.ctypes.data
        self.m.dl_tensor.device = (ctypes.c_int32 * 2)(1, 0)
        self.m.dl_tensor.ndim = 1
        self.m.dl_tensor.dtype = (ctypes.c_uint8 * 4)(int(DLDataTypeCode.kDLBfloat), 16, 1, 0)
        self.m.dl_tensor.shape = self.shape
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        self._new = lambda: new(ctypes.addressof(self.m), b"dltensor", None)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return self._new()  # no deleter: self (kept alive by the caller) owns the descriptor

    def __dlpack_device__(self):
        return (1, 0)


def test_consumer_refusal_keeps_its_exception(stage, prims):
    # numpy refuses a bfloat16 capsule and drops it; the capsule's destructor then runs with numpy's
    # exception pending and must leave it there (it cleared it: "SystemError: error return without
    # exception set" instead of numpy's error; seen with a CUDA group on the GPU machine)
    p = prims(3)
    src = Bfloat16Producer(np.array([0x3F80, 0x4000, 0x4040], np.uint16))  # 1, 2, 3
    stage.write_attribute(p.query, "bf", 1, src, is_array=False).wait()
    stage.advance_write_floor(1).wait()
    with stage.read_attributes(p.query, ["bf"], ovstage.OrdinalRange.latest(1)) as read:
        for g in read.groups():
            assert g.dlpack(0).__dlpack_device__() == (1, 0)
            with pytest.raises(Exception) as info:
                np.from_dlpack(g.dlpack(0))
            assert not isinstance(info.value, SystemError), repr(info.value)
