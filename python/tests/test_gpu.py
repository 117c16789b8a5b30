"""CUDA tensors in and out: torch and cupy producers and consumers, the consumer stream protocol
both ways (writes hand the producer our stream and drain it; exports of device read groups order
the consumer's stream after the group's CUDA event), a kernel still running on its stream when the
write is submitted.

These run on a machine with a CUDA device and torch and/or cupy (python/tests/run_gpu.sh); they
skip here with the reason. A library built without the CUDA backend (or in CPU-only mode) refuses
CUDA tensors at the call ("CUDA tensors cannot be used: <why>"): the tests skip then, quoting it,
and check the values otherwise."""

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
    """True when the write went through; False when this library cannot use CUDA (no backend built
    in, CPU-only mode, no driver): then the caller skips with the engine's reason."""
    try:
        op.wait()
        return True
    except OvstageError as e:
        if e.code == ErrorCode.NOT_SUPPORTED and "CUDA tensors cannot be used" in e.message:
            global _no_backend_reason
            _no_backend_reason = e.message
            return False
        raise


_no_backend_reason = ""


def _skip_no_backend():
    pytest.skip(f"this library cannot use CUDA tensors: {_no_backend_reason}")


def _read_values(stage, q, attr, ordinal):
    out = []
    with stage.read_attributes(q, [attr], ordinal) as read:
        for g in read.groups():
            t = g.tensor(0)
            if t.device[0] == ovstage.DLDeviceType.kDLCPU:
                a = g.array(0)
                out.extend(a[g.data_row_index(i)] for i in range(g.prim_count))
            else:  # a device group: copied to the host by whichever CUDA library is here
                a = _to_host(g, 0)
                out.extend(a[g.data_row_index(i)] for i in range(g.prim_count))
                del a
    return out


def _to_host(g, i):
    """Tensor i of a device group as a NumPy array, copied by whichever CUDA library is here."""
    try:
        import torch

        return torch.from_dlpack(g.dlpack(i)).cpu().numpy()
    except ImportError:
        import cupy

        return cupy.asnumpy(cupy.from_dlpack(g.dlpack(i)))


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
        _skip_no_backend()
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
        _skip_no_backend()
    stage.advance_write_floor(1).wait()
    assert _read_values(stage, p.query, "g", 1) == [0.0, 2.0, 4.0, 6.0]


# Device columns are fixed-size (array columns stay on the CPU, docs/gpu.md) with at most 255 lanes a
# row: a "big" column is BIG_PRIMS rows of 255 float32 (about 4.2 M values).
BIG_PRIMS, BIG_LANES = 16384, 255


def test_cupy_kernel_still_running_when_the_write_is_submitted(stage, prims):
    cp = _cupy()
    p = prims(BIG_PRIMS)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cp.zeros((BIG_PRIMS, BIG_LANES), dtype=cp.float32)
        # A long kernel chain on `s`: still running when the write is submitted.
        for _ in range(50):
            x += 1.0
    spy = StreamSpy(x)
    op = stage.write_attribute(p.query, "big", 1, spy, is_array=False, cuda_stream=s)
    assert spy.calls[0]["stream"] == s.ptr
    if not _write_or_backend_missing(op):
        _skip_no_backend()
    stage.advance_write_floor(1).wait()
    rows = 0
    with stage.read_attributes(p.query, ["big"], 1) as read:
        for g in read.groups():
            out = cp.from_dlpack(g.dlpack(0))
            assert out.shape[1] == BIG_LANES
            assert float(out.min()) == 50.0 and float(out.max()) == 50.0
            rows += g.prim_count
            del out
            cp.cuda.get_current_stream().synchronize()
    assert rows == BIG_PRIMS


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
        _skip_no_backend()
    stage.advance_write_floor(1).wait()
    assert _read_values(stage, p.query, "gpu-samples", 1) == [5.0, 6.0, 7.0]


def test_cuda_dltensor_from_dlpack_records_the_stream():
    torch = _torch()
    s = torch.cuda.Stream()
    t = ovstage.DLTensor.from_dlpack(torch.ones(3, device="cuda"), stream=s.cuda_stream)
    assert t.device[0] == ovstage.DLDeviceType.kDLCUDA and t.shape == (3,)
    with pytest.raises(OvstageError):
        ovstage.dltensor_to_numpy(t)  # numpy views are CPU only


def _device_column(stage, p, attr, x, ordinal=1):
    """Writes CUDA tensor x (one value per prim) and seals; skips when CUDA cannot be used."""
    op = stage.write_attribute(p.query, attr, ordinal, x, is_array=False)
    if not _write_or_backend_missing(op):
        _skip_no_backend()
    stage.advance_write_floor(ordinal).wait()


class ConsumerSpy:
    """Wraps a ManagedDLTensor and records the stream a consumer's from_dlpack hands it."""

    def __init__(self, m):
        self.m, self.streams = m, []

    def __dlpack__(self, stream=None, **kw):
        self.streams.append(stream)
        return self.m.__dlpack__(stream=stream, **kw)

    def __dlpack_device__(self):
        return self.m.__dlpack_device__()


def test_device_group_export_orders_a_nonblocking_cupy_stream(stage, prims):
    # The seal's kernels run on the stage's engine stream; a consumer on a non-blocking stream is
    # not ordered after them by CUDA: the export must make it wait on the group's event.
    cp = _cupy()
    p = prims(BIG_PRIMS)
    with cp.cuda.Stream(non_blocking=True) as ps:
        x = cp.zeros((BIG_PRIMS, BIG_LANES), dtype=cp.float32)
        for _ in range(20):
            x += 1.0
    op = stage.write_attribute(p.query, "big", 1, x, is_array=False, cuda_stream=ps)
    if not _write_or_backend_missing(op):
        _skip_no_backend()
    stage.advance_write_floor(1).wait()
    cs = cp.cuda.Stream(non_blocking=True)
    total, rows = 0.0, 0
    with stage.read_attributes(p.query, ["big"], 1) as read:
        for g in read.groups():
            assert g.cuda_sync[1] != 0, "a device group carries its ready event in cuda_sync.wait_event"
            spy = ConsumerSpy(g.dlpack(0))
            with cs:
                y = cp.from_dlpack(spy)
                part = y.sum(dtype=cp.float64)  # runs on cs, after the event (float64: an exact total)
            cs.synchronize()  # the consumer's GPU work is done before the group goes back
            assert spy.streams and spy.streams[0] == cs.ptr, spy.streams
            total += float(part)
            rows += g.prim_count
            del y
    assert rows == BIG_PRIMS and total == 20.0 * BIG_PRIMS * BIG_LANES


def test_device_group_export_torch_side_stream_and_protocol_errors(stage, prims):
    torch = _torch()
    p = prims(3)
    _device_column(stage, p, "t", torch.tensor([1.0, 2.0, 3.0], device="cuda"))
    s = torch.cuda.Stream()
    with stage.read_attributes(p.query, ["t"], 1) as read:
        g = read.fetch_next()
        m = g.dlpack(0)
        assert m.__dlpack_device__()[0] == ovstage.DLDeviceType.kDLCUDA
        with torch.cuda.stream(s):
            y = torch.from_dlpack(m)  # torch passes stream=s.cuda_stream
            got = (y * 2).cpu().tolist()
        assert sorted(got) == [2.0, 4.0, 6.0]
        for bad in (0, -2):
            with pytest.raises(ValueError, match=f"stream={bad} is not a consumer stream"):
                m.__dlpack__(stream=bad)
        with pytest.raises(TypeError, match="stream must be an int or None, got str"):
            m.__dlpack__(stream="s")
        for ok in (None, 1, 2, -1, s.cuda_stream):  # -1: the consumer synchronises itself
            del_cap = m.__dlpack__(stream=ok, max_version=(1, 0))
            del del_cap
        torch.cuda.synchronize()
        del y, m
        g.release()


def test_device_group_export_from_a_thread_without_cuda_state(stage, prims):
    # The export makes the device's primary context current for its calls: a fresh Python thread
    # (no CUDA call made on it yet) can order the per-thread default stream.
    import threading

    torch = _torch()
    p = prims(2)
    _device_column(stage, p, "t", torch.tensor([4.0, 5.0], device="cuda"))
    errors = []
    with stage.read_attributes(p.query, ["t"], 1) as read:
        g = read.fetch_next()
        m = g.dlpack(0)

        def consume():
            try:
                cap = m.__dlpack__(stream=2)
                del cap
            except Exception as e:  # reported to the main thread
                errors.append(e)

        th = threading.Thread(target=consume)
        th.start()
        th.join()
        del m
        g.release()
    assert errors == []


def test_device_read_group_tensor_written_back_waits_on_its_event(stage, prims):
    # g.tensor(i) of a device group carries the group's ready event; a write of it on a
    # non-blocking stream waits on that event (cuda_sync.wait_event) and drains that stream.
    cp = _cupy()
    p = prims(3)
    _device_column(stage, p, "src", cp.asarray([7.0, 8.0, 9.0], dtype=cp.float32))
    s = cp.cuda.Stream(non_blocking=True)
    with stage.read_attributes(p.query, ["src"], 1) as read:
        g = read.fetch_next()
        t = g.tensor(0)
        assert t.device[0] == ovstage.DLDeviceType.kDLCUDA
        stage.write_attribute(p.query, "copy", 2, t, is_array=False, cuda_stream=s).wait()
        with pytest.raises(ValueError, match="ready after its group's CUDA event"):
            ev = cp.cuda.Event()
            ev.record(s)
            stage.write_attribute(p.query, "copy", 3, t, is_array=False, cuda_event=ev)
        del t
        g.release()
    stage.advance_write_floor(2).wait()
    assert sorted(_read_values(stage, p.query, "copy", 2)) == [7.0, 8.0, 9.0]


def test_stream_conflicts_are_refused_with_real_streams(stage, prims):
    torch = _torch()
    p = prims(3)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    t = ovstage.DLTensor.from_dlpack(torch.ones(3, device="cuda"), stream=s1)
    with pytest.raises(ValueError, match=f"taken on stream {s1.cuda_stream} but the write is ordered on stream "
                                         f"{s2.cuda_stream}"):
        stage.write_attribute(p.query, "g", 1, t, is_array=False, cuda_stream=s2)
    op = stage.write_attribute(p.query, "g", 1, t, is_array=False, cuda_stream=s1)
    if not _write_or_backend_missing(op):
        _skip_no_backend()
    stage.advance_write_floor(1).wait()
    assert _read_values(stage, p.query, "g", 1) == [1.0, 1.0, 1.0]


def _cuda(values, dtype=np.float32):
    """A CUDA tensor of `values` from torch, or from cupy where torch has no CUDA (skips without either)."""
    try:
        import torch

        if torch.cuda.is_available():
            return torch.from_numpy(np.ascontiguousarray(values, dtype)).to("cuda")
    except ImportError:
        pass
    cp = _cupy()
    return cp.asarray(np.ascontiguousarray(values, dtype))


def _refused_as_not_supported(op, text):
    """What a device column refuses (docs/gpu.md) is NOT_SUPPORTED: refused at the call, the
    Operation's status is NOT_SUPPORTED and wait() raises it; found when the op runs, wait() raises
    OP_FAILED, the code the binding gives every failure of a running op (the C API hands back its
    message, not its status: docs/python.md), with the engine's NOT_SUPPORTED message."""
    with pytest.raises(OvstageError) as e:
        op.wait()
    if op.status != ErrorCode.OK:
        assert op.status == e.value.code == ErrorCode.NOT_SUPPORTED, e.value
    else:
        assert e.value.code == ErrorCode.OP_FAILED, e.value
    assert text in e.value.message, e.value.message


def test_array_column_on_device(stage, prims):
    """Per-row CUDA tensors make an array column on the device: its read groups hand out one device
    tensor per prim (docs/gpu.md), holding the rows written."""
    p = prims(3)
    rows = [_cuda([1.0]), _cuda([2.0, 3.0]), _cuda([4.0])]
    op = stage.write_attribute(p.query, "ragged", 1, rows, is_array=True)
    if not _write_or_backend_missing(op):
        _skip_no_backend()
    stage.advance_write_floor(1).wait()
    got = {}
    with stage.read_attributes(p.query, ["ragged"], 1) as read:
        for g in read.groups():
            assert g.is_array and g.tensor_count == g.prim_count
            for i in range(g.prim_count):
                assert g.tensor(i).device[0] == ovstage.DLDeviceType.kDLCUDA
                got[g.prim_index(i)] = _to_host(g, i).reshape(-1).tolist()
    assert got == {0: [1.0], 1: [2.0, 3.0], 2: [4.0]}


def test_device_columns_refuse_clone_value_filters_and_hierarchy(stage, prims):
    from ovstage import AttributeSemantic, Filter, FilterOp, Predicate

    p = prims(3)
    M = AttributeSemantic.MATRIX
    op = stage.write_attribute(p.query, "d", 1, _cuda([1.0, 2.0, 3.0]), is_array=False)
    if not _write_or_backend_missing(op):
        _skip_no_backend()
    # transform columns for compute_hierarchy: the local matrices on the device, the world rows on the CPU
    stage.write_attribute(p.query, "omni:xform", 1, _cuda(np.tile(np.eye(4), (3, 1, 1)), np.float64),
                          is_array=False, semantic=M).wait()
    stage.write_attribute(p.query, "omni:fabric:worldMatrix", 1, np.zeros((3, 4, 4)), is_array=False,
                          semantic=M).wait()
    stage.advance_write_floor(1).wait()
    with stage.read_attributes(p.query, ["d"], 1) as read:
        assert [g.tensor(0).device[0] for g in read.groups()] == [ovstage.DLDeviceType.kDLCUDA]

    _refused_as_not_supported(stage.clone_async("/P0", ["/Copy"], 2),
                              "clone of stages with device columns is not supported")
    q = stage.query(Filter([Predicate("d", FilterOp.GT, [0])]))
    _refused_as_not_supported(q.op, "a filter that reads values cannot use a column on CUDA device")
    _refused_as_not_supported(stage.compute_hierarchy_async(1, 1),
                              "compute_hierarchy: column omni:xform lives on CUDA device")
    # nothing changed: the column keeps its values and its device
    stage.advance_write_floor(2).wait()
    assert _read_values(stage, p.query, "d", 2) == [1.0, 2.0, 3.0]


def test_residency_follows_the_first_write(stage, prims):
    """A column lives where its first write was (docs/gpu.md): a CUDA write makes a device column, and
    a host write into it is copied to the device; a host write makes a CPU column, and a CUDA write
    into it is staged to the host."""
    p = prims(2)
    cuda, cpu = ovstage.DLDeviceType.kDLCUDA, ovstage.DLDeviceType.kDLCPU
    op = stage.write_attribute(p.query, "dev", 1, _cuda([1.0, 2.0]), is_array=False)
    if not _write_or_backend_missing(op):
        _skip_no_backend()
    stage.write_attribute(p.query, "host", 1, np.array([5.0, 6.0], np.float32), is_array=False).wait()
    stage.advance_write_floor(1).wait()
    stage.write_attribute(p.query, "dev", 2, np.array([3.0, 4.0], np.float32), is_array=False).wait()
    stage.write_attribute(p.query, "host", 2, _cuda([7.0, 8.0]), is_array=False).wait()
    stage.advance_write_floor(2).wait()
    for attr, device, want in (("dev", cuda, [3.0, 4.0]), ("host", cpu, [7.0, 8.0])):
        with stage.read_attributes(p.query, [attr], 2) as read:
            for g in read.groups():
                assert g.tensor(0).device[0] == device, attr
                assert (g.cuda_sync[1] != 0) == (device == cuda), (attr, g.cuda_sync)
        assert _read_values(stage, p.query, attr, 2) == want


def test_map_of_a_device_column_filled_on_a_nonblocking_stream(stage, prims):
    # A map of a device column hands out a device buffer (allocated in stream order: the export
    # orders the consumer stream after the group's event); unmap(cuda_stream=) names the fill, and
    # the seal waits for it (a whole-column map: its buffer becomes the version's).
    cp = _cupy()
    n = 4096
    p = prims(n)
    _device_column(stage, p, "dm", cp.zeros(n, dtype=cp.float32))
    cs = cp.cuda.Stream(non_blocking=True)
    m = stage.map_attribute(p.query, "dm", 2)
    g = m.fetch_next()
    assert g.tensor(0).device[0] == ovstage.DLDeviceType.kDLCUDA
    assert g.cuda_sync[1] != 0, "a device map group carries its buffer's event"
    with cs:
        y = cp.from_dlpack(g.dlpack(0))
        y[:] = cp.arange(n, dtype=cp.float32) + 7.0
    del y
    m.unmap_group(g).wait()
    m.unmap(cuda_stream=cs).wait()
    stage.advance_write_floor(2).wait()
    assert _read_values(stage, p.query, "dm", 2) == [float(i) + 7.0 for i in range(n)]
