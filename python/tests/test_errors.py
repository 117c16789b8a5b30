"""Bad input raises (OvstageError, TypeError, ValueError) with a message naming the value; it
never crashes. Errors of the stage come back as OvstageError with .code and .message."""

import numpy as np
import pytest

import ovstage
from ovstage import ErrorCode, OvstageError, WriteDesc

from conftest import f32


def test_error_type_and_str():
    e = OvstageError(ErrorCode.WRITE_FLOOR_VIOLATION, "too low")
    assert isinstance(e, RuntimeError) and e.code is ErrorCode.WRITE_FLOOR_VIOLATION and e.message == "too low"
    assert str(e) == "WRITE_FLOOR_VIOLATION: too low"
    assert str(OvstageError(1234, "x")) == "1234: x"


def test_write_floor_violation_at_the_call(stage, prims):
    p = prims(2)
    stage.write_attribute(p.query, "v", 1, f32(1, 2), is_array=False).wait()
    stage.advance_write_floor(3).wait()
    op = stage.write_attribute(p.query, "v", 2, f32(1, 2), is_array=False)
    assert not op.ok and op.status == ErrorCode.WRITE_FLOOR_VIOLATION and op.op_id == 0
    assert "write floor 3" in op.error_message()
    with pytest.raises(OvstageError) as e:
        op.wait()
    assert e.value.code == ErrorCode.WRITE_FLOOR_VIOLATION and "not above the write floor" in e.value.message
    with pytest.raises(OvstageError) as e:
        op.wait()
    assert e.value.code == ErrorCode.INVALID_HANDLE


def test_failure_in_the_op_and_double_wait(stage, prims):
    p = prims(2)
    stage.write_attribute(p.query, "v", 1, f32(1, 2), is_array=False).wait()
    op = stage.clone_async("/P0", ["/P1"], 2)  # the target exists: fails when the op runs
    assert op.ok
    with pytest.raises(OvstageError) as e:
        op.wait()
    assert e.value.code == ErrorCode.PRIM_NOT_FOUND and "already exists" in e.value.message  # wait_op returns it, as 0.2.1
    with pytest.raises(OvstageError) as e:
        op.wait()
    assert e.value.code == ErrorCode.INVALID_HANDLE


@pytest.mark.parametrize("ordinal,exc,match", [
    (None, TypeError, "ordinal must be an int, got None"),
    (1.5, TypeError, "ordinal must be an int, got float 1.5"),
    ("3", TypeError, "ordinal must be an int"),
    (-1, ValueError, "ordinal must be in"),
    (2**64, ValueError, "ordinal must be in"),
])
def test_bad_ordinals(stage, prims, ordinal, exc, match):
    p = prims(1)
    with pytest.raises(exc, match=match):
        stage.write_attribute(p.query, "v", ordinal, f32(1), is_array=False)


def test_bad_write_arguments(stage, prims):
    p = prims(2)
    w = stage.write_attribute
    with pytest.raises(TypeError, match="is_array=True or False is required"):
        w(p.query, "v", 1, f32(1, 2))
    with pytest.raises(TypeError, match="is_array must be True or False, got int"):
        w(p.query, "v", 1, f32(1, 2), is_array=1)
    with pytest.raises(TypeError, match="not a tensor"):
        w(p.query, "v", 1, [1.0, 2.0], is_array=True)
    with pytest.raises(TypeError, match="tensors is required"):
        w(p.query, "v", 1, None, is_array=False)
    with pytest.raises(TypeError, match="attribute must be a str or an int token, got NoneType"):
        w(p.query, None, 1, f32(1, 2), is_array=False)
    with pytest.raises(ValueError, match="attribute must not be empty"):
        w(p.query, "", 1, f32(1, 2), is_array=False)
    with pytest.raises(TypeError, match="query must be an ovstage.Query"):
        w("q", "v", 1, f32(1, 2), is_array=False)
    with pytest.raises(TypeError, match="query must be an ovstage.Query"):
        w(None, "v", 1, f32(1, 2), is_array=False)
    with pytest.raises(ValueError, match="mutually exclusive"):
        w(p.query, "v", 1, f32(1, 2), is_array=False, index_map=[0, 1], mask=[3], count=2)
    with pytest.raises(ValueError, match="count=0 is not allowed"):
        w(p.query, "v", 1, f32(1, 2), is_array=False, count=0)
    with pytest.raises(ValueError, match="count must be in"):
        w(p.query, "v", 1, f32(1, 2), is_array=False, count=-1)
    with pytest.raises(ValueError, match="exceeds the 1 index_map"):
        w(p.query, "v", 1, f32(1, 2), is_array=False, index_map=[0], count=2)
    with pytest.raises(ValueError, match="index_map must have 1"):
        w(p.query, "v", 1, f32(1, 2), is_array=False, index_map=[])
    with pytest.raises(ValueError, match=r"index_map\[1\] = -1"):
        w(p.query, "v", 1, f32(1, 2), is_array=False, index_map=[0, -1])
    with pytest.raises(TypeError, match="index_map must be a 1-D sequence"):
        w(p.query, "v", 1, f32(1, 2), is_array=False, index_map=[0.5, 1.0])
    with pytest.raises(ValueError, match="a mask needs an explicit count"):
        w(p.query, "v", 1, f32(1, 2), is_array=False, mask=[3])
    with pytest.raises(ValueError, match="needs 2 mask words"):
        w(p.query, "v", 1, np.zeros(70, np.float32), is_array=False, mask=[1], count=70)
    with pytest.raises(TypeError, match="prim_mode must be an int enum value, got bool"):
        w(p.query, "v", 1, f32(1, 2), is_array=False, prim_mode=True)
    with pytest.raises(ValueError, match="prim_mode must be in"):
        w(p.query, "v", 1, f32(1, 2), is_array=False, prim_mode=7)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        w(p.query, "v", 1, f32(1, 2), is_array=False, bogus=1)
    with pytest.raises(TypeError, match="cuda_stream must be None"):
        w(p.query, "v", 1, f32(1, 2), is_array=False, cuda_stream="s")
    with pytest.raises(TypeError, match=r"writes\[0\] must be an ovstage.WriteDesc"):
        stage.write_attributes(p.query, [object()], 1)
    with pytest.raises(TypeError, match="is_array must be True or False"):
        WriteDesc("v", f32(1, 2), is_array=None)
    # The engine's own validation comes back at the call: a payload of the wrong length.
    op = w(p.query, "v", 1, f32(1, 2, 3), is_array=False)
    assert op.status == ErrorCode.INVALID_ARGUMENT and op.error_message()
    with pytest.raises(OvstageError):
        op.wait()


def test_bad_handles_and_released_handles(stage, prims):
    p = prims(1)
    with pytest.raises(TypeError, match="read must be an ovstage.Read"):
        stage.fetch_read_next(p.query)
    with pytest.raises(OvstageError) as e:
        stage.fetch_read_next(12345)  # a raw handle the engine never issued
    assert e.value.code == ErrorCode.INVALID_HANDLE
    with pytest.raises(OvstageError):
        stage.fetch_ordinal(999)
    with pytest.raises(TypeError, match="group must be an ovstage.ReadGroup"):
        stage.release_group(None)
    with pytest.raises(TypeError, match="map must be an ovstage.Map"):
        stage.fetch_map_next(None)
    q = stage.query_from_path_list(p.pd.create_path_list_from_strings(["/Q"]))
    q.release().wait()
    for call in (lambda: stage.read_attributes(q, ["v"], 1), lambda: q.release(), lambda: q.result(),
                 lambda: stage.write_attribute(q, "v", 1, f32(1), is_array=False)):
        with pytest.raises(OvstageError) as e:
            call()
        assert e.value.code == ErrorCode.INVALID_HANDLE and "was released" in e.value.message
    with pytest.raises(OvstageError):
        stage.query_from_path_list(0)
    with pytest.raises(ValueError):
        stage.query_from_path_list(-3)
    with pytest.raises(TypeError):
        stage.read_attributes(p.query, ["v"], "latest")
    with pytest.raises(TypeError, match=r"timeout \(nanoseconds\) must be an int"):
        stage.wait_op(1, 0.5)
    with pytest.raises(ValueError):
        stage.wait_op(1, -1)


def test_other_stage_handles_are_refused(stage, prims):
    p = prims(1)
    with ovstage.Stage("other") as other:
        with pytest.raises(ValueError, match="belongs to another stage"):
            other.read_attributes(p.query, ["v"], 1)


def test_destroyed_stage_refuses_everything(stage, prims):
    st = ovstage.Stage("gone")
    pd = st.get_path_dictionary()
    q = st.query_from_path_list(pd.create_path_list_from_strings(["/A"]))
    st.write_attribute(q, "v", 1, f32(1), is_array=False)  # left unwaited on purpose
    st.destroy()
    st.destroy()  # idempotent
    assert st.closed and st.destroyed
    for call in (lambda: st.write_attribute(q, "v", 2, f32(1), is_array=False), lambda: st.advance_write_floor(1),
                 lambda: q.release(), lambda: st.query()):
        with pytest.raises(OvstageError) as e:
            call()
        assert e.value.code == ErrorCode.INVALID_HANDLE
    # the path dictionary is shared: its view through the destroyed stage goes through the live one
    assert pd.intern_token("x") == stage.get_path_dictionary().intern_token("x")
    with pytest.raises(OvstageError):
        with st:
            pass


def test_wait_timeout(stage, prims):
    p = prims(1)
    m = stage.map_attribute(p.query, "m", 2, dtype=np.float32)
    floor = stage.advance_write_floor(2)  # waits for the map's unmap
    with pytest.raises(OvstageError) as e:
        floor.wait(timeout=20_000_000)
    assert e.value.code == ErrorCode.TIMEOUT and "still pending" in e.value.message
    code, _, lowest = stage.wait_op(floor.op_id, 0)
    assert code == ErrorCode.TIMEOUT and lowest == floor.op_id
    m.unmap().wait()
    floor.wait()


def test_argument_parsing_rules(stage, prims):
    """The one table-driven parser every fastcall method goes through (_native.c parse_call)."""
    p = prims(1)
    w = stage.write_attribute
    with pytest.raises(TypeError, match=r"write_attribute\(\) takes at most 4 positional arguments \(5 given\)"):
        w(p.query, "v", 1, f32(1), False)
    with pytest.raises(TypeError, match=r"write_attribute\(\) missing required argument 'tensors'"):
        w(p.query, "v", 1, is_array=False)
    with pytest.raises(TypeError, match=r"is_array=True or False is required"):
        w(p.query, "v", 1, f32(1))
    with pytest.raises(TypeError, match=r"got multiple values for argument 'ordinal'"):
        w(p.query, "v", 1, f32(1), ordinal=2, is_array=False)
    with pytest.raises(TypeError, match=r"fetch_ordinal\(\) missing required argument 'ordinal_query'"):
        stage.fetch_ordinal(timeout=0)
    # keywords need not be interned strings: a name built at run time is matched by value
    key = "".join(["is_", "array"])
    assert w(p.query, "v", 1, f32(1), **{key: False}).wait() is None
    # an optional parameter given as None takes its default; a required one is refused
    w(p.query, "v", 2, f32(1), is_array=False, prim_mode=None, semantic=None).wait()
    with pytest.raises(TypeError, match="ordinal must be an int, got None"):
        w(p.query, "v", None, f32(1), is_array=False)
    with pytest.raises(TypeError, match="relation must be an int"):
        stage.get_hierarchy_async(p.plist, 1, None)
    with pytest.raises(TypeError, match=r"query must be an ovstage.Query \(or a raw int handle\)"):
        w("q", "v", 1, f32(1), is_array=False)
    # timeouts: None is infinite, negatives and floats are refused, on handles and on the stage
    with stage.get_attribute_write_floor("v") as oq:
        assert oq.fetch(None) == oq.fetch(timeout=0) == stage.fetch_ordinal(oq, None)
        with pytest.raises(ValueError, match="timeout"):
            oq.fetch(-1)
        with pytest.raises(TypeError, match="timeout"):
            oq.fetch(timeout=0.5)
        with pytest.raises(TypeError, match=r"fetch\(\) got an unexpected keyword argument 'time'"):
            oq.fetch(time=0)
    with stage.query(None) as q:
        with pytest.raises(TypeError, match=r"result\(\) takes at most 1 positional arguments"):
            q.result(1, 2)
    # the stage is checked before the arguments
    stage.destroy()
    with pytest.raises(OvstageError) as e:
        w(1, 2)
    assert e.value.code == ErrorCode.INVALID_HANDLE
