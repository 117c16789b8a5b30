"""This implementation's C extensions (include/ovstage/ovstage_ext.h) as the package binds them:
Stage.wait_write_floor, the value-predicate filter ops and FilterOp.EXT_OR, Stage.memory_stats and
ovstage.gpu_status()."""

import _thread
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import ovstage
from ovstage import ErrorCode, Filter, FilterOp, OvstageError, Predicate, Scope

from conftest import f32

MS = 1_000_000  # nanoseconds


# ---- wait_write_floor ---------------------------------------------------------------------------


def test_wait_write_floor_reached_polled_and_timed_out(stage, prims):
    p = prims(2)
    stage.write_attribute(p.query, "a", 3, f32(1, 2), is_array=False).wait()
    assert stage.wait_write_floor(3, timeout=0) is False  # a poll: not sealed yet
    t0 = time.monotonic()
    assert stage.wait_write_floor(3, "a", timeout=120 * MS) is False  # sliced wait to its deadline
    assert time.monotonic() - t0 >= 0.1
    stage.advance_write_floor(3).wait()
    assert stage.wait_write_floor(3) is True  # infinite, but reached already
    assert stage.wait_write_floor(2, "a", 0) is True
    assert stage.wait_write_floor(ordinal=3, attribute=p.pd.intern_token("a"), timeout=0) is True
    assert stage.wait_write_floor(4, timeout=0) is False


def test_wait_write_floor_per_attribute_and_global(stage, prims):
    p = prims(1)
    for name in ("a", "b"):
        stage.write_attribute(p.query, name, 1, f32(1), is_array=False).wait()
    stage.advance_write_floor(5, Scope.INCLUDE, ["a"]).wait()
    assert stage.wait_write_floor(5, "a", 0)
    assert not stage.wait_write_floor(5, "b", 0)
    assert not stage.wait_write_floor(5, None, 0)  # the global floor is the minimum over columns
    # a column that does not exist yet follows the stage floor, as get_attribute_write_floor does
    with stage.get_attribute_write_floor("not_yet") as oq:
        stage_floor = oq.fetch()
    assert stage.wait_write_floor(stage_floor, "not_yet", 0)
    assert not stage.wait_write_floor(stage_floor + 1, "not_yet", 0)


def test_wait_write_floor_wakes_on_the_seal_of_another_thread(stage, prims):
    p = prims(4)
    results = []

    def consumer():
        results.append(stage.wait_write_floor(7, "v"))  # infinite: the seal below wakes it

    t = threading.Thread(target=consumer)
    t.start()
    time.sleep(0.15)  # the consumer is parked with the GIL released (this thread runs)
    assert t.is_alive() and not results
    stage.write_attribute(p.query, "v", 7, f32(1, 2, 3, 4), is_array=False).wait()
    stage.advance_write_floor(7).wait()
    t.join(10)
    assert not t.is_alive() and results == [True]


def test_wait_write_floor_ctrl_c_and_the_stage_stays_usable(stage, prims):
    p = prims(1)
    timer = threading.Timer(0.1, _thread.interrupt_main)
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        stage.wait_write_floor(9)  # infinite: only the signal ends it
    assert time.monotonic() - t0 < 5
    timer.join()
    stage.write_attribute(p.query, "v", 9, f32(1), is_array=False).wait()
    stage.advance_write_floor(9).wait()
    assert stage.wait_write_floor(9)


def test_wait_write_floor_ends_when_another_thread_destroys_the_stage():
    st = ovstage.Stage("wwf-destroy")
    errors = []

    def waiter():
        try:
            st.wait_write_floor(1)
        except OvstageError as e:
            errors.append(e)

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.1)
    st.destroy()  # waits for the waiter's slice to return, then the waiter sees the stage closed
    t.join(10)
    assert not t.is_alive()
    assert len(errors) == 1 and errors[0].code == ErrorCode.INVALID_HANDLE
    # "... was destroyed while waiting"; on a loaded machine the waiter may start after the
    # destroy and be refused at the call ("... is destroyed"): the same code either way
    assert "destroyed" in errors[0].message


def test_wait_write_floor_bad_input(stage):
    with pytest.raises(TypeError, match="missing required argument 'ordinal'"):
        stage.wait_write_floor()
    with pytest.raises(TypeError, match="ordinal must be an int"):
        stage.wait_write_floor(1.0)
    with pytest.raises(ValueError, match="ordinal"):
        stage.wait_write_floor(-1)
    with pytest.raises(ValueError, match="timeout"):
        stage.wait_write_floor(1, None, -5)
    with pytest.raises(TypeError, match="attribute must be a str or an int token"):
        stage.wait_write_floor(1, 2.5)
    with pytest.raises(ValueError, match="must not be empty"):
        stage.wait_write_floor(1, "")
    with pytest.raises(TypeError, match="unexpected keyword argument 'attr'"):
        stage.wait_write_floor(1, attr="a")
    # a token that this dictionary never interned: the engine's INVALID_ARGUMENT
    with pytest.raises(OvstageError) as e:
        stage.wait_write_floor(1, 0x7FFF_FFFF_FFFF, 0)
    assert e.value.code == ErrorCode.INVALID_ARGUMENT and e.value.message.startswith("wait_write_floor: ")
    stage.destroy()
    with pytest.raises(OvstageError) as e:
        stage.wait_write_floor(1, timeout=0)
    assert e.value.code == ErrorCode.INVALID_HANDLE


# ---- value-predicate filters and EXT_OR ---------------------------------------------------------


def _matched(stage, predicates):
    """The prim paths a filter query matches (its result's all_handle resolves them)."""
    with stage.query(Filter(predicates)) as q:
        return q.result().total_prim_count


@pytest.fixture
def valued(stage, prims):
    """Five prims /P0../P4 with sealed columns i32 = 0..4, f64 = 0.5..4.5, flag = even, vec (float x 3)."""
    p = prims(5)
    stage.write_attribute(p.query, "i32", 1, np.arange(5, dtype=np.int32), is_array=False).wait()
    stage.write_attribute(p.query, "f64", 1, np.arange(5) + 0.5, is_array=False).wait()
    stage.write_attribute(p.query, "flag", 1, np.arange(5) % 2 == 0, is_array=False).wait()
    stage.write_attribute(p.query, "u64", 1, np.array([0, 1, 2**63, 2**64 - 2, 2**64 - 1], np.uint64),
                          is_array=False).wait()
    stage.write_attribute(p.query, "vec", 1, np.zeros((5, 3), np.float32), is_array=False).wait()
    stage.advance_write_floor(1).wait()
    return p


def test_value_predicates_compare_sealed_scalars(stage, valued):
    cases = [
        (Predicate("i32", FilterOp.IN, ["1", "3", "9"]), 2),
        (Predicate("i32", FilterOp.LT, ["2"]), 2),
        (Predicate("i32", FilterOp.LE, ["2"]), 3),
        (Predicate("i32", FilterOp.GT, ["0x2"]), 2),  # hexadecimal operands as strtold reads them
        (Predicate("i32", FilterOp.GE, ["-1"]), 5),
        (Predicate("f64", FilterOp.GT, ["2.5"]), 2),
        (Predicate("f64", FilterOp.IN, ["0.5", "4.5"]), 2),
        (Predicate("flag", FilterOp.IN, ["true"]), 3),
        (Predicate("flag", FilterOp.IN, ["false"]), 2),
        (Predicate("u64", FilterOp.GE, [str(2**63)]), 3),  # exact for 64-bit integers
        (Predicate("u64", FilterOp.IN, [str(2**64 - 1)]), 1),
        (Predicate("i32", FilterOp.IN, []), 0),  # an empty value set matches nothing
        (Predicate("never_written", FilterOp.GT, ["0"]), 0),  # no sealed value: never matches
    ]
    for pred, n in cases:
        assert _matched(stage, [pred]) == n, pred


def test_value_predicates_take_python_numbers_and_bools(stage, valued):
    assert Predicate("f64", FilterOp.LT, [1.5]).values == ("1.5",)
    assert Predicate("flag", FilterOp.IN, [True, np.bool_(False)]).values == ("true", "false")
    assert Predicate("i32", FilterOp.IN, [np.int64(3), 4]).values == ("3", "4")
    assert _matched(stage, [Predicate("f64", FilterOp.LT, [1.5])]) == 1
    assert _matched(stage, [Predicate("i32", FilterOp.IN, [np.int64(3), 4])]) == 2
    assert _matched(stage, [Predicate("flag", FilterOp.IN, [True])]) == 3
    with pytest.raises(TypeError, match="str, bool or real numbers"):
        Predicate("i32", FilterOp.IN, [b"1"])
    with pytest.raises(TypeError, match="not one str"):
        Predicate("i32", FilterOp.IN, "1")


def test_ext_or_separates_and_groups(stage, valued):
    lt1 = Predicate("i32", FilterOp.LT, [1])
    gt3 = Predicate("i32", FilterOp.GT, [3])
    even = Predicate("flag", FilterOp.IN, [True])
    assert FilterOp.EXT_OR == 0x4F56 and Predicate.OR.op is FilterOp.EXT_OR
    assert _matched(stage, [lt1, Predicate.OR, gt3]) == 2  # /P0 or /P4
    assert _matched(stage, [even, gt3, Predicate.OR, lt1]) == 2  # (even and >3) or <1: /P4, /P0
    # the separator's attribute and values are not looked at
    assert _matched(stage, [lt1, Predicate("whatever", FilterOp.EXT_OR, ["x"]), gt3]) == 2
    assert _matched(stage, [lt1, Predicate.OR, lt1]) == 1


@pytest.mark.parametrize("preds", [
    lambda a: [Predicate.OR, a],
    lambda a: [a, Predicate.OR],
    lambda a: [a, Predicate.OR, Predicate.OR, a],
    lambda a: [Predicate.OR],
])
def test_ext_or_needs_a_predicate_on_each_side(stage, valued, preds):
    q = stage.query(Filter(preds(Predicate("i32", FilterOp.LT, [1]))))
    assert not q.op.ok and q.op.status == ErrorCode.INVALID_ARGUMENT
    with pytest.raises(OvstageError) as e:
        q.wait()
    assert e.value.code == ErrorCode.INVALID_ARGUMENT and "OR" in e.value.message


@pytest.mark.parametrize("pred, code, text", [
    (Predicate("i32", FilterOp.LT, ["abc"]), ErrorCode.INVALID_ARGUMENT, "abc"),  # malformed operand
    (Predicate("i32", FilterOp.LT, ["nan"]), ErrorCode.INVALID_ARGUMENT, "nan"),
    (Predicate("i32", FilterOp.LT, ["1", "2"]), ErrorCode.INVALID_ARGUMENT, "one"),  # LT..GE take one
    (Predicate("i32", FilterOp.GE, []), ErrorCode.INVALID_ARGUMENT, "one"),
    (Predicate("usd-path", FilterOp.GT, ["1"]), ErrorCode.NOT_SUPPORTED, "built-ins"),
    (Predicate("i32", FilterOp.CONTAINS, ["1"]), ErrorCode.NOT_SUPPORTED, "CONTAINS"),
])
def test_value_predicates_rejected_at_the_call(stage, valued, pred, code, text):
    q = stage.query(Filter([pred]))
    assert not q.op.ok and q.op.status == code
    with pytest.raises(OvstageError) as e:
        q.result()
    assert e.value.code == code and text in e.value.message


def test_value_predicate_on_a_non_scalar_column_fails_when_it_runs(stage, valued):
    """The column's dtype is known only when the query's op runs: the op fails naming the column
    (an async failure is OP_FAILED with the engine's message, docs/python.md)."""
    q = stage.query(Filter([Predicate("vec", FilterOp.GT, ["0"])]))
    assert q.op.ok
    with pytest.raises(OvstageError) as e:
        q.wait()
    assert e.value.code == ErrorCode.OP_FAILED
    assert '"vec" needs a scalar number or bool column' in e.value.message


def test_filter_op_values_outside_the_enum(stage, valued):
    with pytest.raises(ValueError):
        Predicate("i32", 8)  # FilterOp(8)

    class Raw:  # a duck-typed predicate: the engine validates the op
        attribute, op, values = "i32", 9, ()

    class RawFilter:
        predicates = [Raw()]

    q = stage.query(RawFilter())
    assert q.op.status == ErrorCode.INVALID_ARGUMENT
    with pytest.raises(OvstageError, match="not an ovstage_filter_op_t value"):
        q.wait()
    Raw.op = -1
    with pytest.raises(ValueError, match="Predicate.op"):
        stage.query(RawFilter())


# ---- memory_stats and gpu_status ------------------------------------------------------------------


def test_memory_stats_values(stage, prims):
    p = prims(1000)
    m0 = stage.memory_stats()
    assert m0["unsealed_bytes"] == 0 and m0["unsealed_limit"] == 4096 << 20
    stage.write_attribute(p.query, "big", 1, np.ones((1000, 64), np.float32), is_array=False).wait()
    m1 = stage.memory_stats()
    assert m1["unsealed_bytes"] >= 1000 * 64 * 4
    assert m1["buffer_bytes"] >= m1["unsealed_bytes"] and m1["buffers"] >= 1
    stage.advance_write_floor(1).wait()
    m2 = stage.memory_stats()
    assert m2["unsealed_bytes"] == 0 and m2["buffer_bytes"] >= 1000 * 64 * 4
    assert m2["pooled_bytes"] <= m2["buffer_bytes"]
    assert all(isinstance(v, int) and v >= 0 for v in m2.values())
    stage.destroy()
    with pytest.raises(OvstageError) as e:
        stage.memory_stats()
    assert e.value.code == ErrorCode.INVALID_HANDLE


def test_memory_stats_unsealed_limit_follows_the_config():
    with ovstage.Stage("limit", ovstage.StageConfig(max_unsealed_mb=3)) as st:
        assert st.memory_stats()["unsealed_limit"] == 3 << 20
    with ovstage.Stage("nolimit", ovstage.StageConfig(max_unsealed_mb=0)) as st:
        assert st.memory_stats()["unsealed_limit"] == 0


def test_gpu_status():
    s = ovstage.gpu_status()
    assert isinstance(s, ovstage.GpuStatus) and s == (s.device_count, s.reason)
    assert isinstance(s.device_count, int) and s.device_count >= 0 and isinstance(s.reason, str)
    assert (s.device_count == 0) == (s.reason != "")  # a reason exactly when there is no device
    assert ovstage.gpu_status() == s  # decided once per process


def test_gpu_pool_stats():
    s = ovstage.gpu_status()
    if s.device_count == 0:  # no device: every ordinal is refused, saying why
        with pytest.raises(OvstageError, match="CUDA device 0") as e:
            ovstage.gpu_pool_stats(0)
        assert e.value.code == ErrorCode.INVALID_ARGUMENT
        return
    p = ovstage.gpu_pool_stats(0)
    assert set(p) == {"bound_bytes", "retained_bytes", "hits", "misses", "releases", "cuda_reserved_bytes",
                      "cuda_used_bytes"}
    assert p["retained_bytes"] <= p["bound_bytes"]
    with pytest.raises(OvstageError, match="ordinal -1"):
        ovstage.gpu_pool_stats(-1)


def test_gpu_device_info():
    s = ovstage.gpu_status()
    if s.device_count == 0:
        with pytest.raises(OvstageError, match="CUDA device 0") as e:
            ovstage.gpu_device_info(0)
        assert e.value.code == ErrorCode.INVALID_ARGUMENT
        return
    i = ovstage.gpu_device_info(0)
    assert set(i) == {"pci_bus_id", "near_workers", "worker_count", "completions", "pending"}
    assert i["pci_bus_id"] and 0 <= i["near_workers"] <= max(i["worker_count"], 0)
    with pytest.raises(OvstageError, match="ordinal -1"):
        ovstage.gpu_device_info(-1)


def test_gpu_status_in_cpu_only_mode():
    """OVSTAGE_DISABLE_GPU=1 (decided at the first instance or gpu_status call): no devices, a reason."""
    code = "import ovstage; s = ovstage.gpu_status(); print(s.device_count); print(s.reason)"
    env = dict(os.environ, OVSTAGE_DISABLE_GPU="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    count, reason = out.stdout.splitlines()[:2]
    assert count == "0" and reason


def test_config_extension_keys_and_cuda_device():
    """gpu_pool_mb, pin_workers, disable_gpu and cuda_devices reach ovstage_initialize; in a process
    without usable GPUs an instance has no CUDA device (-1), and the active-GPU list is ignored with a
    warning in CPU-only mode (docs/gpu.md)."""
    code = """if True:
        import ovstage
        cfg = ovstage.StageConfig(gpu_pool_mb=64, pin_workers=False, disable_gpu=True, cuda_devices="0")
        with ovstage.Stage("cfg", cfg) as st:
            print(st.cuda_device, ovstage.gpu_status().device_count)
        with ovstage.Stage("plain") as st:
            print(st.cuda_device)
        for bad in (dict(pin_workers=1), dict(cuda_devices=0), dict(gpu_pool_mb=-1), dict(gpu_pool_mb=1.5)):
            try:
                ovstage.Stage("bad", ovstage.StageConfig(**bad))
            except (TypeError, ValueError) as e:
                print(type(e).__name__)
        try:
            ovstage.Stage("bad", ovstage.StageConfig(cuda_devices="zero"))
        except ovstage.OvstageError as e:
            print(e.code.name, "cuda" in e.message.lower() or "device" in e.message.lower())
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("OVSTAGE_")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:7] == ["-1 0", "-1", "TypeError", "TypeError", "ValueError", "TypeError",
                                           "INVALID_ARGUMENT True"], out.stdout
    with ovstage.Stage("here") as st:
        assert st.cuda_device == -1 or st.cuda_device >= 0
    st.destroy()
    with pytest.raises(OvstageError) as e:
        st.cuda_device
    assert e.value.code == ErrorCode.INVALID_HANDLE


# ---- read-current maps (Stage.map_attribute(..., read_current=True)) --------------------------


def test_read_current_map_modifies_sealed_values_in_place(stage, prims):
    p = prims(4)
    stage.write_attribute(p.query, "v", 1, f32(1, 2, 3, 4), is_array=False).wait()
    stage.advance_write_floor(1).wait()
    with stage.map_attribute(p.query, "v", 2, read_current=True) as m:
        m.wait()
        [g] = list(m.groups())
        a = g.array(0)
        np.testing.assert_array_equal(a, [1, 2, 3, 4])  # the latest sealed values
        a *= 10
        del a
    stage.advance_write_floor(2).wait()
    with stage.read_attributes(p.query, ["v"], ovstage.OrdinalRange(2)) as r:
        r.wait()
        [got] = [g.array(0).copy() for g in r.groups()]
    np.testing.assert_array_equal(got, [10, 20, 30, 40])


def test_read_current_map_of_a_subset_and_a_new_prim(stage, prims):
    p = prims(3)
    stage.write_attribute(p.query, "v", 1, f32(5, 6, 7), is_array=False).wait()
    stage.advance_write_floor(1).wait()
    plist = p.pd.create_path_list_from_strings(["/P2", "/New", "/P0"])
    q = stage.query_from_path_list(plist)
    with stage.map_attribute(q, "v", 2, read_current=True) as m:
        m.wait()
        [g] = list(m.groups())
        np.testing.assert_array_equal(g.array(0), [7, 0, 5])  # query order; no value: zero


def test_read_current_map_refusals(stage, prims):
    """Refused at the call: the Map's op carries the status and message (raised by wait())."""
    p = prims(2)
    with pytest.raises(OvstageError) as e:
        stage.map_attribute(p.query, "fresh", 1, read_current=True).wait()  # no column, no dtype
    assert e.value.code == ErrorCode.INVALID_ARGUMENT and "desc.dtype is required" in e.value.message
    stage.write_attribute(p.query, "v", 1, f32(1, 2), is_array=False).wait()
    with pytest.raises(OvstageError) as e:
        stage.map_attribute(p.query, "v", 2, read_current=True).wait()  # 1 is not sealed yet
    assert e.value.code == ErrorCode.WRITE_FLOOR_VIOLATION and "unsealed writes" in e.value.message
    with pytest.raises(OvstageError) as e:
        stage.map_attribute(p.query, "v", 2, dtype=np.int32, read_current=True).wait()
    assert e.value.code == ErrorCode.INVALID_ARGUMENT
    with pytest.raises(TypeError):
        stage.map_attribute(p.query, "v", 2, read_current=1)
    stage.advance_write_floor(1).wait()  # nothing held the floor
    m = stage.map_attribute(p.query, "v", 2, read_current=False)  # 0.2.1's map
    m.wait()
    m.unmap().wait()
