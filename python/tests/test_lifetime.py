"""Lifetime: views stay valid until the last one goes, released groups refuse access instead of
crashing, collected handles are released with a ResourceWarning, the stage outlives its views."""

import gc
import warnings

import numpy as np
import pytest

import ovstage
from ovstage import ErrorCode, OvstageError

from conftest import f32


def sealed(stage, p, values, ordinal=1, attr="v"):
    stage.write_attribute(p.query, attr, ordinal, values, is_array=False).wait()
    stage.advance_write_floor(ordinal).wait()


def test_array_outlives_release_and_group_refuses(stage, prims):
    p = prims(3)
    sealed(stage, p, f32(1, 2, 3))
    read = stage.read_attributes(p.query, ["v"], 1)
    g = read.fetch_next()
    a = g.array(0)
    d = np.from_dlpack(g.dlpack(0))
    stage.release_group(g)
    assert g.released and stage.live_objects >= 1  # the group is pinned by its views
    # Later writes, seals and reads do not disturb the pinned version.
    for o in range(2, 6):
        sealed(stage, p, f32(10 * o, 10 * o, 10 * o), o)
    np.testing.assert_array_equal(a, [1, 2, 3])
    np.testing.assert_array_equal(d, [1, 2, 3])
    for call in (lambda: g.array(0), lambda: g.dlpack(0), lambda: g.tensor(0), lambda: g.prim_index(0),
                 lambda: g.data_row_index(0)):
        with pytest.raises(OvstageError) as e:
            call()
        assert e.value.code == ErrorCode.INVALID_HANDLE
    with pytest.raises(OvstageError):
        stage.release_group(g)  # guarded against double release
    assert g.ordinal == 1  # plain facts stay readable
    before = stage.live_objects
    del a
    assert stage.live_objects == before  # d still pins it
    del d
    assert stage.live_objects == before - 1  # the last view gave the group back
    read.release().wait()


def test_stage_destroy_waits_for_the_last_view():
    st = ovstage.Stage("views")
    pd = st.get_path_dictionary()
    q = st.query_from_path_list(pd.create_path_list_from_strings(["/A", "/B"]))
    st.write_attribute(q, "v", 1, f32(5, 6), is_array=False).wait()
    st.advance_write_floor(1).wait()
    r = st.read_attributes(q, ["v"], 1)
    g = r.fetch_next()
    a = g.array(0)
    st.destroy()
    assert st.closed and not st.destroyed  # the instance waits for `a`
    np.testing.assert_array_equal(a, [5, 6])
    with pytest.raises(OvstageError):
        g.array(0)
    del a
    assert st.destroyed


def test_collected_unreleased_handles_warn_and_release(stage, prims):
    p = prims(1)
    sealed(stage, p, f32(1))
    base = stage.live_objects
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = stage.read_attributes(p.query, ["v"], 1)
        g = r.fetch_next()
        del g, r
        gc.collect()
    msgs = [str(x.message) for x in w if issubclass(x.category, ResourceWarning)]
    assert any("unreleased ovstage ReadGroup" in m for m in msgs), msgs
    assert any("unreleased ovstage Read" in m for m in msgs), msgs
    assert stage.live_objects == base


def test_unwaited_operation_keeps_inputs_and_waits_on_collection(stage, prims):
    p = prims(1000)
    big = np.arange(1000, dtype=np.float64)
    op = stage.write_attribute(p.query, "big", 1, big, is_array=False)
    del big  # the Operation holds the producer's capsule
    del op  # collected: waits for its op, then lets the inputs go
    stage.advance_write_floor(1).wait()
    with stage.read_attributes(p.query, ["big"], 1) as r:
        vals = np.concatenate([g.array(0)[[g.data_row_index(i) for i in range(g.prim_count)]] for g in r.groups()])
    np.testing.assert_array_equal(vals, np.arange(1000))


def test_map_group_refuses_after_unmap(stage, prims):
    p = prims(2)
    m = stage.map_attribute(p.query, "m", 1, dtype=np.int32)
    g = m.fetch_next()
    g.array(0)[:] = [1, 2]
    m.unmap().wait()
    with pytest.raises(OvstageError) as e:
        g.array(0)
    assert e.value.code == ErrorCode.INVALID_HANDLE and "unmapped" in e.value.message
    with pytest.raises(OvstageError):
        m.fetch_next()


def test_context_managers_release_on_exception(stage, prims):
    p = prims(1)
    sealed(stage, p, f32(1))
    with pytest.raises(RuntimeError, match="boom"):
        with stage.read_attributes(p.query, ["v"], 1) as read:
            with read.fetch_next() as g:
                raise RuntimeError("boom")
    assert read.released and g.released
    with pytest.raises(RuntimeError, match="boom"):
        with stage.map_attribute(p.query, "mm", 2, dtype=np.float32) as m:
            raise RuntimeError("boom")
    assert m.released
    with ovstage.Stage("cm") as s2:
        pass
    assert s2.closed and s2.destroyed


def test_groups_iterator_releases_as_it_goes(stage, prims):
    p = prims(2)
    sealed(stage, p, f32(1, 2), attr="a")
    sealed(stage, p, f32(3, 4), ordinal=2, attr="b")
    with stage.read_attributes(p.query, ["a", "b"], 2) as read:
        seen = []
        views = []
        for g in read.groups():
            seen.append(g)
            views.append(g.array(0))
        assert len(seen) == 2 and all(g.released for g in seen)
        assert sorted(v.tolist() for v in views) == [[1, 2], [3, 4]]


def test_unreleased_handle_with_warnings_as_errors_reports_without_the_dying_object(stage, prims):
    # With ResourceWarning as an error, the finalizer's warning goes to sys.unraisablehook. The hook
    # must not be handed the handle itself (it is being freed): a hook that keeps its object (as
    # pytest's does) would hold freed memory.
    import sys

    p = prims(1)
    kept = []
    old = sys.unraisablehook
    sys.unraisablehook = lambda u: kept.append((u.exc_type, u.object))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", ResourceWarning)
            q = stage.query_from_path_list(p.plist)
            del q
            gc.collect()
    finally:
        sys.unraisablehook = old
    assert len(kept) == 1
    exc_type, obj = kept[0]
    assert exc_type is ResourceWarning
    assert isinstance(obj, str) and obj.startswith("the finalizer of an unreleased ovstage Query "), obj
    assert stage.live_objects == 1  # released all the same (only the fixture's query is left)
