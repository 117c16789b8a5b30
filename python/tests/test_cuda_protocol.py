"""The binding's side of the DLPack stream protocol for CUDA producers, checked without a GPU: a fake
producer reports kDLCUDA and hands out a ctypes-built capsule of a CUDA tensor (its data pointer is
never dereferenced: the binding only reads the descriptor, and the engine refuses or validates the
pointer at the call). What the stage then does with real CUDA memory is test_gpu.py's part."""

import ctypes

import numpy as np
import pytest

import ovstage
from ovstage import OvstageError


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


_alive = []  # the fake capsules have no deleter: their descriptors must outlive every DLTensor of them


class FakeCudaProducer:
    """kDLCUDA float32 (n,) at a made-up device address; records the stream each __dlpack__ got."""

    def __init__(self, n=3, device_id=0):
        self.shape = (ctypes.c_int64 * 1)(n)
        self.m = _DLManagedTensor()
        self.m.dl_tensor.data = 0x7F0000000000
        self.m.dl_tensor.device = _DLDevice(2, device_id)
        self.m.dl_tensor.ndim = 1
        self.m.dl_tensor.dtype = _DLDataType(2, 32, 1)
        self.m.dl_tensor.shape = self.shape
        self.device_id = device_id
        self.streams = []
        self.answer = None

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        self.streams.append(stream)
        _alive.append(self)
        if self.answer is not None:
            return self.answer
        return _capsule_new(ctypes.addressof(self.m), b"dltensor", None)

    def __dlpack_device__(self):
        return (2, self.device_id)


class TorchLikeStream:
    def __init__(self, handle):
        self.cuda_stream = handle


class CupyLikeStream:
    def __init__(self, handle):
        self.ptr = handle


def _refused_by_engine(op):
    """The write reached the engine, which refuses this fake pointer (no GPU backend / CPU-only mode /
    not device memory): any of its refusals is an OvstageError with a message."""
    with pytest.raises(OvstageError) as e:
        op.wait()
    assert e.value.message


def test_producer_gets_the_write_stream(stage, prims):
    p = prims(3)
    # Valid stream handles everywhere (1, 2): the write reaches the engine, which refuses the fake pointer.
    for given, told in ((None, 1), (0, 1), (1, 1), (2, 2)):
        prod = FakeCudaProducer()
        _refused_by_engine(stage.write_attribute(p.query, "g", 1, prod, is_array=False, cuda_stream=given))
        assert prod.streams == [told], (given, prod.streams)
    # Made-up handles and stream objects: the producer answers with a non-capsule after recording
    # what it was told, so nothing reaches CUDA (on a GPU machine a bogus handle would).
    for given, told in ((0xABC0, 0xABC0), (TorchLikeStream(0xBEE0), 0xBEE0), (CupyLikeStream(0xCAF0), 0xCAF0)):
        prod = FakeCudaProducer()
        prod.answer = "not a capsule"
        with pytest.raises(TypeError, match="returned str, not a DLPack capsule"):
            stage.write_attribute(p.query, "g", 1, prod, is_array=False, cuda_stream=given)
        assert prod.streams == [told], (given, prod.streams)
    # CPU producers are never handed a stream, even when the write names one
    cpu = []

    class CpuProducer:
        def __dlpack__(self, stream=None, max_version=None):
            cpu.append(stream)
            return np.zeros(3, np.float32).__dlpack__()

        def __dlpack_device__(self):
            return (1, 0)

    stage.write_attribute(p.query, "c", 1, CpuProducer(), is_array=False).wait()
    assert cpu == [None]


def test_bad_streams_are_refused_naming_them(stage, prims):
    p = prims(3)
    prod = FakeCudaProducer()
    with pytest.raises(ValueError, match="stream must be a CUDA stream handle .*got -1"):
        ovstage.DLTensor.from_dlpack(prod, stream=-1)
    with pytest.raises(TypeError, match="stream must be None, an int handle or a stream/event object, got str"):
        ovstage.DLTensor.from_dlpack(prod, stream="s")
    with pytest.raises(ValueError, match=r"cuda_stream must be in \[0, 2\*\*64 - 1\], got -3"):
        stage.write_attribute(p.query, "g", 1, prod, is_array=False, cuda_stream=-3)
    assert prod.streams == []  # refused before the producer was asked


def test_one_write_one_stream(stage, prims):
    p = prims(2)
    s7 = TorchLikeStream(7)
    t7 = ovstage.DLTensor.from_dlpack(FakeCudaProducer(1), stream=s7)
    assert t7.device == (2, 0)
    del s7  # the DLTensor keeps the stream object it names
    t8 = ovstage.DLTensor.from_dlpack(FakeCudaProducer(1), stream=8)
    with pytest.raises(ValueError, match="taken on stream 7 but the write is ordered on stream 9 \\(cuda_stream=\\)"):
        stage.write_attribute(p.query, "g", 1, t7, is_array=False, cuda_stream=9)
    with pytest.raises(ValueError, match="taken on stream 8 but the write is ordered on stream 7 \\(the first"):
        stage.write_attribute(p.query, "arr", 1, [t7, t8], is_array=True)
    # the same stream throughout is accepted by the binding (the engine then judges the pointer)
    t1 = ovstage.DLTensor.from_dlpack(FakeCudaProducer(1), stream=1)
    _refused_by_engine(stage.write_attribute(p.query, "g", 1, [t1, t1], is_array=True, cuda_stream=1))
    # make_dltensor takes a CUDA producer on the stream it is given (an extension of 0.2.1's call)
    prod = FakeCudaProducer(3)
    f = ovstage.make_dltensor(prod, dtype=ovstage.DLDataType(2, 32, 3), stream=CupyLikeStream(0x50))
    assert prod.streams == [0x50] and f.shape == (1,) and f.dtype == ovstage.DLDataType(2, 32, 3)
    with pytest.raises(ValueError, match="taken on stream 80 but the write is ordered on stream 1"):
        stage.write_attribute(p.query, "g", 1, f, is_array=False, cuda_stream=1)
    with pytest.raises(ValueError, match="make_dltensor: the DLTensor was taken on stream 7, not stream=9"):
        ovstage.make_dltensor(t7, stream=9)
    with pytest.raises(ValueError, match="from_dlpack: the DLTensor was taken on stream 7, not stream=8"):
        ovstage.DLTensor.from_dlpack(t7, stream=8)
    assert ovstage.DLTensor.from_dlpack(t7, stream=7) is t7
    cpu = ovstage.DLTensor.from_dlpack(np.zeros(2, np.float32))
    assert ovstage.DLTensor.from_dlpack(cpu, stream=9) is cpu  # a CPU tensor has no stream


def test_cuda_dltensor_has_no_numpy_view():
    t = ovstage.DLTensor.from_dlpack(FakeCudaProducer(3), stream=5)
    assert t.device == (2, 0) and t.shape == (3,)
    with pytest.raises(OvstageError, match=r"is on device \(2, 0\): numpy views are CPU only"):
        ovstage.dltensor_to_numpy(t)
