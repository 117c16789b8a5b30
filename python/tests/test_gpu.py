"""CUDA tensors in (and, once the GPU backend exists, out): torch and cupy producers, the consumer
stream protocol, a kernel still running on its stream when the write is submitted.

These run on a machine with a CUDA device and torch and/or cupy (python/tests/run_gpu.sh); they
skip here with the reason. This build's C library refuses CUDA tensors at the call ("need the GPU
backend"); the tests accept that refusal only when the library says so, and check the values
otherwise."""

import numpy as np
import pytest

import ovstage
from ovstage import ErrorCode, OvstageError

pytestmark = pytest.mark.gpu


def _torch():
    torch = pytest.importorskip("torch", reason="torch is not installed (GPU tests run on the device machine)")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device visible to torch")
    return torch


def _cupy():
    cp = pytest.importorskip("cupy", reason="cupy is not installed (GPU tests run on the device machine)")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device visible to cupy")
    except Exception as e:  # no driver
        pytest.skip(f"cupy sees no CUDA driver: {e}")
    return cp


def _write_or_backend_missing(op):
    """True when the write went through; False when this build's library has no GPU backend."""
    try:
        op.wait()
        return True
    except OvstageError as e:
        if e.code in (ErrorCode.INVALID_ARGUMENT, ErrorCode.NOT_SUPPORTED) and "GPU backend" in e.message:
            return False
        raise


def _read_values(stage, q, attr, ordinal):
    out = []
    with stage.read_attributes(q, [attr], ordinal) as read:
        for g in read.groups():
            t = g.tensor(0)
            if t.device[0] == ovstage.DLDeviceType.kDLCPU:
                a = g.array(0)
                out.extend(a[g.data_row_index(i)] for i in range(g.prim_count))
            else:
                torch = _torch()
                a = torch.from_dlpack(g.dlpack(0)).cpu().numpy()
                out.extend(a[g.data_row_index(i)] for i in range(g.prim_count))
                del a
    return out


class StreamSpy:
    """Wraps a producer and records what the binding hands to its __dlpack__."""

    def __init__(self, inner):
        self.inner = inner
        self.calls = []

    def __dlpack__(self, stream=None, max_version=None, **kw):
        self.calls.append({"stream": stream, "max_version": max_version})
        if max_version is None:
            return self.inner.__dlpack__(stream=stream)
        return self.inner.__dlpack__(stream=stream, max_version=max_version)

    def __dlpack_device__(self):
        return self.inner.__dlpack_device__()


def test_torch_cuda_write_stream_protocol(stage, prims):
    torch = _torch()
    p = prims(3)
    spy = StreamSpy(torch.tensor([1.0, 2.0, 3.0], device="cuda"))
    op = stage.write_attribute(p.query, "g", 1, spy, is_array=False)
    # The consumer side of the protocol: a CUDA producer gets a stream (1 = legacy default, never
    # None or 0) and the versioned capsule is asked for first.
    assert spy.calls[0] == {"stream": 1, "max_version": (1, 0)}
    if not _write_or_backend_missing(op):
        pytest.skip("this build's C library has no GPU backend: CUDA tensors are refused at the call")
    stage.advance_write_floor(1).wait()
    assert _read_values(stage, p.query, "g", 1) == [1.0, 2.0, 3.0]


def test_torch_cuda_user_stream(stage, prims):
    torch = _torch()
    p = prims(4)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x = torch.arange(4, dtype=torch.float32, device="cuda") * 2
    spy = StreamSpy(x)
    op = stage.write_attribute(p.query, "g", 1, spy, is_array=False, cuda_stream=s)
    assert spy.calls[0]["stream"] == s.cuda_stream
    if not _write_or_backend_missing(op):
        pytest.skip("this build's C library has no GPU backend")
    stage.advance_write_floor(1).wait()
    assert _read_values(stage, p.query, "g", 1) == [0.0, 2.0, 4.0, 6.0]


def test_cupy_kernel_still_running_when_the_write_is_submitted(stage, prims):
    cp = _cupy()
    n = 1 << 22
    p = prims(1)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cp.zeros(n, dtype=cp.float32)
        # A long kernel chain on `s`: still running when the write is submitted.
        for _ in range(50):
            x += 1.0
    spy = StreamSpy(x.reshape(1, n))
    op = stage.write_attribute(p.query, "big", 1, [spy], is_array=True, cuda_stream=s)
    assert spy.calls[0]["stream"] == s.ptr
    if not _write_or_backend_missing(op):
        pytest.skip("this build's C library has no GPU backend")
    stage.advance_write_floor(1).wait()
    with stage.read_attributes(p.query, ["big"], 1) as read:
        g = read.fetch_next()
        out = cp.from_dlpack(g.dlpack(g.data_row_index(0)))
        assert float(out.min()) == 50.0 and float(out.max()) == 50.0
        del out
        g.release()


def test_cupy_default_stream_and_legacy_capsule(stage, prims):
    cp = _cupy()
    p = prims(3)

    class Legacy:
        def __init__(self, a):
            self.a, self.calls = a, []

        def __dlpack__(self, stream=None):
            self.calls.append(stream)
            return self.a.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    prod = Legacy(cp.asarray([5.0, 6.0, 7.0], dtype=cp.float32))
    op = stage.write_attribute(p.query, "gpu-samples", 1, prod, is_array=False)
    assert prod.calls == [1]
    if not _write_or_backend_missing(op):
        pytest.skip("this build's C library has no GPU backend")
    stage.advance_write_floor(1).wait()
    assert _read_values(stage, p.query, "gpu-samples", 1) == [5.0, 6.0, 7.0]


def test_cuda_dltensor_from_dlpack_records_the_stream():
    torch = _torch()
    s = torch.cuda.Stream()
    t = ovstage.DLTensor.from_dlpack(torch.ones(3, device="cuda"), stream=s.cuda_stream)
    assert t.device[0] == ovstage.DLDeviceType.kDLCUDA and t.shape == (3,)
    with pytest.raises(OvstageError):
        ovstage.dltensor_to_numpy(t)  # numpy views are CPU only
