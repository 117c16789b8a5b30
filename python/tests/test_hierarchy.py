"""Transform hierarchy: get_hierarchy_computation_models, compute_hierarchy(_async) and the
PARENT / CHILDREN / SIBLINGS lookups with their Hierarchy handle (spec 2.13, section 6 names)."""

import gc
import warnings

import numpy as np
import pytest

import ovstage
from ovstage import ErrorCode, HierarchyComputationModel as Model, HierarchyRelation as Rel, OvstageError

TREE = ["/World", "/World/Proto", "/World/Proto/Arm", "/World/Proto/Body", "/World/Proto/Body/Tip"]
LOCAL = [(0, 100, 0), (10, 0, 0), (0, 0, 3), (0, 0, 5), (0, 0, 2)]


def translations(ts):
    m = np.tile(np.eye(4), (len(ts), 1, 1))
    for i, (x, y, z) in enumerate(ts):
        m[i, 3, :3] = (x, y, z)  # USD row-vector convention: translation in elements 12..14
    return m


def world_translations(stage, query, ordinal, n):
    out = np.full((n, 3), np.nan)
    with stage.read_attributes(query, ["omni:fabric:worldMatrix"], ordinal) as read:
        for g in read.groups():
            a = g.array(0).reshape(-1, 16)
            for k in range(g.prim_count):
                out[g.prim_index(k)] = a[g.data_row_index(k), 12:15]
    return out


@pytest.fixture
def tree(stage):
    pd = stage.get_path_dictionary()
    plist = pd.create_path_list_from_strings(TREE)
    q = stage.query_from_path_list(plist)
    M = ovstage.AttributeSemantic.MATRIX
    stage.write_attribute(q, "omni:xform", 1, translations(LOCAL), is_array=False, semantic=M).wait()
    stage.write_attribute(q, "omni:fabric:worldMatrix", 1, np.zeros((5, 4, 4)), is_array=False, semantic=M).wait()
    stage.advance_write_floor(1).wait()
    return pd, plist, q


def test_models(stage):
    models = stage.get_hierarchy_computation_models()
    # RUNTIME_DEFAULT is accepted by compute_hierarchy but is not a listed model (docs/api.md)
    assert [m.model_id for m in models] == [Model.CPU_INCREMENTAL, Model.GPU_INCREMENTAL, Model.GPU_GLOBAL]
    assert models[0].name == "cpu-incremental" and models[0].description
    assert isinstance(models[0], ovstage.HierarchyComputationModelDesc)
    assert Model.DEFAULT_CPU == Model.CPU_INCREMENTAL and Model.DEFAULT_GPU == Model.GPU_GLOBAL


def test_compute_world_matrices_and_reset_xform_stack(stage, tree):
    pd, plist, q = tree
    assert stage.compute_hierarchy(1, 1) is None  # default model: DEFAULT_CPU
    np.testing.assert_array_equal(world_translations(stage, q, 1, 5),
                                  [(0, 100, 0), (10, 100, 0), (10, 100, 3), (10, 100, 5), (10, 100, 7)])
    # resetXformStack on /World/Proto: its world is its local; the subtree follows.
    pq = stage.query_from_path_list(pd.create_path_list_from_strings(["/World/Proto"]))
    stage.write_attribute(pq, "omni:resetXformStack", 2, np.array([True]), is_array=False).wait()
    stage.advance_write_floor(2).wait()
    op = stage.compute_hierarchy_async(2, 2, model=Model.RUNTIME_DEFAULT)
    assert isinstance(op, ovstage.Operation) and op.ok
    op.wait()
    np.testing.assert_array_equal(world_translations(stage, q, 2, 5),
                                  [(0, 100, 0), (10, 0, 0), (10, 0, 3), (10, 0, 5), (10, 0, 7)])
    # ordinal 1 keeps the first compute's result
    np.testing.assert_array_equal(world_translations(stage, q, 1, 5)[1], (10, 100, 0))


def test_compute_errors(stage, tree):
    if ovstage.gpu_status().device_count == 0:  # CPU-only: the GPU models are refused, saying why
        with pytest.raises(OvstageError) as e:
            stage.compute_hierarchy(1, 1, Model.GPU_GLOBAL)
        assert e.value.code == ErrorCode.NOT_SUPPORTED and "gpu-global" in e.value.message
        assert "cannot use" in e.value.message
    op = stage.compute_hierarchy_async(1, 1, Model.INVALID)
    assert not op.ok and op.status == ErrorCode.INVALID_ARGUMENT
    with pytest.raises(OvstageError, match="computation_model_id 0"):
        op.wait()
    with pytest.raises(OvstageError, match="input_ordinal 5"):  # above the write floor
        stage.compute_hierarchy(5, 5)
    with pytest.raises(ValueError, match="model must be in \\[0, 4\\], got 77"):
        stage.compute_hierarchy(1, 1, 77)
    with pytest.raises(TypeError, match="input_ordinal must be an int, got float 1.5"):
        stage.compute_hierarchy(1.5, 1)
    with pytest.raises(ValueError, match="output_ordinal must be in"):
        stage.compute_hierarchy(1, -1)
    with pytest.raises(TypeError, match="model must be an int enum value, got bool"):
        stage.compute_hierarchy(1, 1, True)


def test_get_hierarchy_relations(stage, tree):
    pd, _, _ = tree
    with pd.create_path_list_from_strings(["/World/Proto/Body", "/World", "/Nope"]) as l:
        r = stage.get_hierarchy(l, 1, Rel.PARENT)
        assert isinstance(r, ovstage.HierarchyResult) and r.ordinal == 1 and r.input_count == 3
        assert [(it.status, it.paths) for it in r.items] == [
            (ErrorCode.OK, ("/World/Proto",)), (ErrorCode.OK, ()), (ErrorCode.NOT_FOUND, ())]
        assert r.items[0].ok and not r.items[2].ok
        assert r.item_paths(0) == ("/World/Proto",)
        r = stage.get_hierarchy(l, 1, Rel.CHILDREN)
        assert r.item_paths(0) == ("/World/Proto/Body/Tip",) and r.item_paths(1) == ("/World/Proto",)
        r = stage.get_hierarchy(l, 1, Rel.SIBLINGS)
        assert r.item_paths(0) == ("/World/Proto/Arm",) and r.item_paths(1) == ()
    assert stage.live_objects == 1  # only the fixture's query: every handle and op was released


def test_hierarchy_handle(stage, tree):
    pd, plist, _ = tree
    h = stage.get_hierarchy_async(plist, 1, Rel.CHILDREN)
    assert isinstance(h, ovstage.Hierarchy) and int(h) == h.handle != 0
    assert h.wait() is h
    got = stage.fetch_hierarchy_result(h)
    assert got == h.result() == stage.fetch_hierarchy_result(int(h))
    assert set(got.item_paths(1)) == {"/World/Proto/Arm", "/World/Proto/Body"}
    stage.release_hierarchy(h).wait()
    with pytest.raises(OvstageError) as e:
        h.result()
    assert e.value.code == ErrorCode.INVALID_HANDLE
    with pytest.raises(OvstageError) as e:
        stage.release_hierarchy(h)
    assert e.value.code == ErrorCode.INVALID_HANDLE
    # result() without an explicit wait waits for the lookup; the with-block releases
    with stage.get_hierarchy_async(plist, 1, Rel.PARENT) as h2:
        assert h2.result().item_paths(4) == ("/World/Proto/Body",)
    assert h2.released
    # a collected unreleased handle is released with a ResourceWarning
    h3 = stage.get_hierarchy_async(plist, 1, Rel.PARENT)
    n = stage.live_objects
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        del h3
        gc.collect()
    assert any(issubclass(x.category, ResourceWarning) and "Hierarchy" in str(x.message) for x in w)
    assert stage.live_objects < n
    # an unreleased one is released by destroy (the fixture's destroy would otherwise leak it)
    stage.get_hierarchy_async(plist, 1, Rel.PARENT).wait()


def test_get_hierarchy_errors(stage, tree):
    pd, plist, _ = tree
    h = stage.get_hierarchy_async(12345, 1, Rel.PARENT)
    assert h.op.status == ErrorCode.INVALID_HANDLE and h.handle == 0
    with pytest.raises(OvstageError, match="12345"):
        h.result()
    with pytest.raises(OvstageError, match="12345"):
        stage.get_hierarchy(12345, 1, Rel.PARENT)
    with pytest.raises(ValueError, match="relation must be in \\[0, 2\\], got 7"):
        stage.get_hierarchy(plist, 1, 7)
    with pytest.raises(TypeError, match="path_list must be an int, got str '/World'"):
        stage.get_hierarchy("/World", 1, Rel.PARENT)
    with pytest.raises(TypeError, match="hierarchy must be an ovstage.Hierarchy"):
        stage.fetch_hierarchy_result("h")
    with pytest.raises(OvstageError) as e:
        stage.fetch_hierarchy_result(99)
    assert e.value.code == ErrorCode.INVALID_HANDLE
    with ovstage.Stage("other") as other:
        with other.get_hierarchy_async(plist, 1, Rel.PARENT) as h:  # the dictionary is shared
            with pytest.raises(ValueError, match="belongs to another stage"):
                stage.fetch_hierarchy_result(h)
            assert h.result().items[0].status == ErrorCode.NOT_FOUND  # no prims in that stage
    stage.destroy()
    with pytest.raises(OvstageError) as e:
        stage.get_hierarchy_computation_models()
    assert e.value.code == ErrorCode.INVALID_HANDLE


def test_hierarchy_calls_do_not_leak(stage, tree):
    import tracemalloc

    pd, plist, _ = tree

    def cycle():
        stage.get_hierarchy(plist, 1, Rel.SIBLINGS)
        with stage.get_hierarchy_async(plist, 1, Rel.CHILDREN) as h:
            h.result()
        stage.get_hierarchy_computation_models()
        try:
            stage.compute_hierarchy(1, 1, Model.GPU_GLOBAL)
        except OvstageError:
            pass

    for _ in range(200):
        cycle()
    gc.collect()
    objects_before = len(gc.get_objects())
    tracemalloc.start()
    snap = tracemalloc.take_snapshot()
    for _ in range(20000):
        cycle()
    gc.collect()
    growth = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(snap, "filename"))
    tracemalloc.stop()
    assert len(gc.get_objects()) - objects_before < 50
    assert growth < 64 * 1024, growth
    assert stage.live_objects == 1


def test_runtime_default_model_follows_the_stage_config():
    # In a fresh interpreter: the configured default applies to stages created while it is set.
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import numpy as np
        import ovstage
        from ovstage import ErrorCode, HierarchyComputationModel as Model, OvstageError
        cfg = ovstage.StageConfig(runtime_default_hierarchy_computation_model=Model.GPU_GLOBAL)
        with ovstage.Stage("gpu-default", cfg) as st:
            q = st.query_from_path_list(st.get_path_dictionary().create_path_list_from_strings(["/A"]))
            st.write_attribute(q, "omni:xform", 1, np.eye(4)[None], is_array=False, semantic=10).wait()
            st.advance_write_floor(1).wait()
            if ovstage.gpu_status().device_count == 0:
                try:
                    st.compute_hierarchy(1, 1, Model.RUNTIME_DEFAULT)
                    raise AssertionError("RUNTIME_DEFAULT did not resolve to the configured gpu-global")
                except OvstageError as e:
                    assert e.code == ErrorCode.NOT_SUPPORTED and "gpu-global" in e.message, e
            st.compute_hierarchy(1, 1, Model.CPU_INCREMENTAL)  # an explicit model is unaffected
            q.release().wait()
        print("runtime-default-ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "runtime-default-ok", out.stdout + out.stderr
