"""The Stage surface: writes (index_map, mask, count, batches, per-row arrays), deletes and range
reads, clone, maps, floors and ordinal queries, filter queries, path dictionary, enums."""

import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import ovstage
from ovstage import (AttributeSemantic, ErrorCode, Filter, FilterOp, OrdinalRange, OvstageError, Predicate,
                     PrimMode, Scope, WriteDesc)

from conftest import f32, read_column


def values_by_prim(stage, p, attr, ordinal):
    """{prim path: value} of a latest read, resolving prims and rows through the groups' maps."""
    out = {}
    with stage.read_attributes(p.query, [attr], ordinal) as read:
        for g in read.groups():
            if g.is_delete:
                continue
            paths = p.pd.get_path_strings(g.prim_list)
            a = g.array(0)
            for i in range(g.prim_count):
                out[paths[g.prim_index(i)]] = a[g.data_row_index(i)].item()
    return out


def test_index_map_gathers_and_broadcasts(stage, prims):
    p = prims(4)
    stage.write_attribute(p.query, "v", 1, f32(10, 20), is_array=False, index_map=[1, 0, 0, 1]).wait()
    stage.advance_write_floor(1).wait()
    assert values_by_prim(stage, p, "v", 1) == {"/P0": 20, "/P1": 10, "/P2": 10, "/P3": 20}


def test_index_map_with_count_prefix(stage, prims):
    p = prims(4)
    stage.write_attribute(p.query, "v", 1, f32(1, 2, 3, 4), is_array=False).wait()
    stage.write_attribute(p.query, "v", 2, f32(7, 8), is_array=False, index_map=np.array([1, 0, 5, 5]), count=2).wait()
    stage.advance_write_floor(2).wait()
    assert values_by_prim(stage, p, "v", 2) == {"/P0": 8, "/P1": 7, "/P2": 3, "/P3": 4}


def test_mask_words_and_bool_mask(stage, prims):
    p = prims(4)
    stage.write_attribute(p.query, "v", 1, f32(1, 2, 3, 4), is_array=False).wait()
    stage.write_attribute(p.query, "v", 2, f32(9, 9, 9, 9), is_array=False, mask=[0b0101], count=4).wait()
    stage.write_attribute(p.query, "v", 3, f32(5, 5, 5, 5), is_array=False,
                          mask=np.array([False, False, False, True]), count=4).wait()
    stage.advance_write_floor(3).wait()
    assert values_by_prim(stage, p, "v", 3) == {"/P0": 9, "/P1": 2, "/P2": 9, "/P3": 5}


def test_write_attributes_batch(stage, prims):
    p = prims(2)
    op = stage.write_attributes(p.query, [
        WriteDesc("heat", f32(7, 8), is_array=False),
        WriteDesc("tint", np.array([[.1, .2, .3], [.4, .5, .6]], np.float32), is_array=False,
                  semantic=AttributeSemantic.COLOR),
    ], 1)
    assert op.ok and op.op_id > 0
    op.wait()
    assert op.done
    stage.advance_write_floor(1).wait()
    assert values_by_prim(stage, p, "heat", 1) == {"/P0": 7, "/P1": 8}
    [(_, _, tint)] = read_column(stage, p.query, "tint", 1)
    np.testing.assert_allclose(tint, [.1, .2, .3, .4, .5, .6], rtol=1e-6)


def test_per_row_array_column(stage, prims):
    p = prims(3)
    rows = [np.array([1, 2], np.int32), np.array([], np.int32), np.array([3, 4, 5], np.int32)]
    stage.write_attribute(p.query, "ids", 1, rows, is_array=True).wait()
    stage.advance_write_floor(1).wait()
    with stage.read_attributes(p.query, ["ids"], 1) as read:
        got = []
        for g in read.groups():
            assert g.is_array and g.tensor_count == 3
            got = [g.array(g.data_row_index(i)).tolist() for i in range(g.prim_count)]
    assert got == [[1, 2], [], [3, 4, 5]]


def test_delete_and_range_read_tombstones(stage, prims):
    p = prims(2)
    stage.write_attribute(p.query, "v", 1, f32(1, 2), is_array=False).wait()
    stage.advance_write_floor(1).wait()
    single = stage.query_from_path_list(p.pd.create_path_list_from_strings(["/P1"]))
    stage.delete_attributes(single, ["v"], 2).wait()
    stage.advance_write_floor(2).wait()
    kinds = sorted((k, n) for k, n, _ in read_column(stage, p.query, "v", 2, range_start=2))
    assert kinds == [("delete", 1)]
    assert values_by_prim(stage, p, "v", 2) == {"/P0": 1}
    # Whole-prim delete: an empty list.
    stage.delete_attributes(p.query, [], 3).wait()
    stage.advance_write_floor(3).wait()
    assert values_by_prim(stage, p, "v", 3) == {}


def test_clone_and_clone_async(stage, prims):
    p = prims(1, root="/World/Proto/Rig")
    stage.write_attribute(p.query, "mass", 1, f32(5), is_array=False).wait()
    stage.advance_write_floor(1).wait()
    stage.clone("/World/Proto/Rig0", ["/World/Env0/Rig0", "/World/Env1/Rig0"], 2)
    op = stage.clone_async("/World/Proto/Rig0", ["/World/Env2/Rig0"], 3)
    op.wait()
    stage.advance_write_floor(3).wait()
    q = stage.query_from_path_list(p.pd.create_path_list_from_strings(
        ["/World/Env0/Rig0", "/World/Env1/Rig0", "/World/Env2/Rig0"]))
    with stage.read_attributes(q, ["mass"], 3) as read:
        vals = [g.array(0)[g.data_row_index(i)] for g in read.groups() for i in range(g.prim_count)]
    assert vals == [5, 5, 5]
    with pytest.raises(OvstageError) as e:
        stage.clone("/World/Proto/Rig0", ["/World/Env0/Rig0"], 4)
    assert "already exists" in e.value.message


def test_map_fills_a_new_column(stage, prims):
    p = prims(3)
    with stage.map_attribute(p.query, "m", 1, dtype=ovstage.DLDataType(2, 32, 3),
                             semantic=AttributeSemantic.VECTOR) as m:
        m.wait()
        for g in m.groups():
            a = g.array(0)
            assert a.flags.writeable and a.shape == (9,)
            a[:] = np.arange(9)
            d = np.from_dlpack(g.dlpack(0))
            assert d.shape == (3, 3)
            d[2, 2] = 100
            del a, d
    stage.advance_write_floor(1).wait()
    [(_, _, got)] = read_column(stage, p.query, "m", 1)
    np.testing.assert_array_equal(got, [0, 1, 2, 3, 4, 5, 6, 7, 100])


def test_map_unmap_group_and_views_must_be_gone(stage, prims):
    p = prims(2)
    m = stage.map_attribute(p.query, "m", 1, dtype=np.float64)
    g = m.fetch_next()
    view = g.array(0)
    view[:] = [3.5, 4.5]
    with pytest.raises(OvstageError) as e:
        m.unmap_group(g)
    assert e.value.code == ErrorCode.INVALID_ARGUMENT and "alive" in e.value.message
    with pytest.raises(OvstageError):
        m.unmap()
    del view
    m.unmap_group(g).wait()
    with pytest.raises(OvstageError) as e:
        g.array(0)
    assert e.value.code == ErrorCode.INVALID_HANDLE
    assert m.fetch_next() is None
    m.unmap().wait()
    with pytest.raises(OvstageError):
        m.unmap()
    stage.advance_write_floor(1).wait()
    [(_, _, got)] = read_column(stage, p.query, "m", 1)
    np.testing.assert_array_equal(got, [3.5, 4.5])


def test_floor_scopes_and_ordinal_queries(stage, prims):
    p = prims(1)
    stage.write_attribute(p.query, "a", 1, f32(1), is_array=False).wait()
    stage.write_attribute(p.query, "b", 1, f32(1), is_array=False).wait()
    stage.advance_write_floor(4, Scope.INCLUDE, ["a"]).wait()
    with stage.get_attribute_write_floor("a") as oq:
        assert oq.wait().fetch() == 4
    oq = stage.get_attribute_write_floor(p.pd.intern_token("b"))
    assert stage.fetch_ordinal(oq) == 0
    stage.release_ordinal_query(oq).wait()
    with pytest.raises(OvstageError) as e:
        oq.fetch()
    assert e.value.code == ErrorCode.INVALID_HANDLE
    stage.advance_write_floor(6, Scope.EXCLUDE, ["a"]).wait()
    with stage.get_attribute_write_floor() as g:  # global = min over attributes
        assert g.fetch() == 4
    with stage.get_oldest_preserved_ordinal() as o:
        assert isinstance(o.fetch(), int)
    # The floor never regresses.
    stage.advance_write_floor(2).wait()
    with stage.get_attribute_write_floor("b") as oq:
        assert oq.fetch() == 6


def test_filter_query_and_result(stage, prims):
    p = prims(3)
    q1 = stage.query_from_path_list(p.pd.create_path_list_from_strings(["/P0", "/P2"]))
    stage.write_attribute(q1, "has_me", 1, f32(1, 1), is_array=False).wait()
    stage.write_attribute(p.query, "all", 1, f32(1, 1, 1), is_array=False).wait()
    stage.advance_write_floor(1).wait()
    with stage.query(Filter([Predicate("has_me", FilterOp.HAS)])) as fq:
        fq.wait()
        r = fq.result()
        assert r.total_prim_count == 2 and r.all_handle == fq.handle == int(fq)
        assert p.pd.intern_token("has_me") in r.attributes
        r2 = stage.fetch_query_result(fq)
        assert r2 == r
    with stage.query(None, ["all"]) as everything:
        assert stage.fetch_query_result(everything).total_prim_count == 3
    with stage.query(Filter([Predicate("usd-path", FilterOp.PREFIX, ["/P"])])) as pq:
        assert pq.result().total_prim_count == 3
    # value comparisons on an attribute's own scalar column are an extension of this engine
    with stage.query(Filter([Predicate("all", FilterOp.LT, ["3"])])) as lq:
        assert lq.result().total_prim_count == 3
    with stage.query(Filter([Predicate("all", FilterOp.GT, ["1"])])) as gq:
        assert gq.result().total_prim_count == 0
    # ordering comparisons on a derived built-in stay NOT_SUPPORTED
    rejected = stage.query(Filter([Predicate("usd-path", FilterOp.LT, ["3"])]))
    assert not rejected.op.ok and rejected.op.status == ErrorCode.NOT_SUPPORTED
    for call in (rejected.wait, rejected.result, rejected.release):
        with pytest.raises(OvstageError) as e:
            call()
        assert e.value.code == ErrorCode.NOT_SUPPORTED


def test_insert_mode_and_prim_mode_enum(stage, prims):
    p = prims(2)
    stage.write_attribute(p.query, "v", 1, f32(1, 2), is_array=False, prim_mode=PrimMode.INSERT).wait()
    with pytest.raises(OvstageError, match="already exists"):
        stage.write_attribute(p.query, "v", 2, f32(1, 2), is_array=False, prim_mode=PrimMode.INSERT).wait()


def test_wait_op_and_release_op_raw(stage, prims):
    p = prims(1)
    op = stage.write_attribute(p.query, "v", 1, f32(1), is_array=False)
    code, errors, lowest = stage.wait_op(op.op_id)
    assert (code, errors) == (ErrorCode.OK, ())
    assert stage.release_op(op.op_id) == ErrorCode.OK
    assert op.done  # the Operation saw its op released
    assert stage.release_op(op.op_id) == ErrorCode.INVALID_HANDLE
    code, errors, _ = stage.wait_op_raw(op.op_id, 0)
    assert code == ErrorCode.INVALID_HANDLE


def test_read_handle_api(stage, prims):
    p = prims(2)
    stage.write_attribute(p.query, "v", 1, f32(1, 2), is_array=False).wait()
    stage.advance_write_floor(1).wait()
    read = stage.read_attributes(p.query, ["v"], OrdinalRange.latest(1))
    assert isinstance(read.op, ovstage.Operation) and read.handle == int(read) and not read.released
    g = stage.fetch_read_next(read)
    assert isinstance(g, ovstage.ReadGroup) and g.attribute == p.pd.intern_token("v") and not g.is_delete
    assert g.meta.attribute_write_floor_ordinal == 1 and g.prim_count == 2 and g.tensor_count == 1
    assert g.cuda_sync == (0, 0) and g.ordinal == 1
    with g:
        pass
    assert g.released
    assert stage.fetch_read_next(read) is None
    stage.release_read(read).wait()
    assert read.released
    with pytest.raises(OvstageError) as e:
        read.fetch_next()
    assert e.value.code == ErrorCode.INVALID_HANDLE


def test_path_dictionary(stage):
    pd = ovstage.PathDictionary(stage)
    t = pd.intern_token("foo")
    assert pd.intern_token("foo") == t and pd.token_to_string(t) == "foo"
    pth = pd.intern_path("/World/X")
    assert pd.path_to_string(pth) == "/World/X"
    assert pd.path_to_string(pd.intern_path("/")) == "/"
    with pd.create_path_list([pth, pd.intern_path("/World/Y")]) as pl:
        assert isinstance(pl, ovstage.PathList) and isinstance(pl, int)
        assert pd.path_list_count(pl) == 2
        assert pd.get_path_strings(pl) == ["/World/X", "/World/Y"]
        pd.add_path_list_reference(pl)
        pd.destroy_path_list(int(pl))  # drops the added reference
        assert pd.get_paths(pl) == [pth, pd.intern_path("/World/Y")]
    with pytest.raises(ovstage.OvstageError):
        pl.release()
    with pytest.raises(ovstage.OvxError):
        pd.path_list_count(pl)
    with pytest.raises(TypeError):
        pd.intern_token(b"bytes")
    with pytest.raises(ovstage.OvxError):
        pd.intern_token("")
    with ovstage.PathDictionary() as private:
        assert private.path_to_string(private.intern_path("/A/B")) == "/A/B"
    assert private.stage.closed


def test_module_surface():
    assert ovstage.__version__ == "0.2.1" and ovstage.library_version() == (0, 2, 1)
    assert ovstage.Stage.get_version() == (0, 2, 1)
    assert ovstage.TIMEOUT_INFINITE == ovstage.OVSTAGE_TIMEOUT_INFINITE == 2**64 - 1
    assert ovstage.LogSeverity.VERBOSE == -2 and ovstage.ErrorCode.OUT_OF_RANGE == 13
    assert ovstage.population.available() is False and ovstage.instancing.available() is False
    with pytest.raises(OvstageError) as e:
        ovstage.population.open_usd(None, "x.usda")
    assert e.value.code == ErrorCode.NOT_SUPPORTED
    r = OrdinalRange.between(2, 5)
    assert (r.start_ordinal, r.end_ordinal) == (2, 5)
    with pytest.raises(ValueError):
        OrdinalRange.between(5, 2)
    with pytest.raises(TypeError):
        OrdinalRange.latest(1.5)
    with pytest.raises(ValueError):
        OrdinalRange.latest(-1)
    for name in ovstage.__all__:
        assert hasattr(ovstage, name), name


def test_stage_config_and_memory_stats():
    with ovstage.Stage("cfg", ovstage.StageConfig(ovstage.HierarchyComputationModel.CPU_INCREMENTAL)) as st:
        m = st.memory_stats()
        assert set(m) == {"unsealed_bytes", "unsealed_limit", "buffer_bytes", "pooled_bytes", "buffers"}
    with pytest.raises(TypeError):
        ovstage.Stage(5)
    with pytest.raises(ValueError, match="retention"):
        ovstage.Stage("bad", ovstage.StageConfig(retention=-1))
    # Range reads come from the rows' last changes: [2, 4] is served with either retention; [1, 2]
    # needs the payload as of 2, kept with retention=4 and gone with the default 2 (OUT_OF_RANGE,
    # as 0.2.1: the key changed again after 2).
    for retention, served in ((4, True), (None, False)):
        with ovstage.Stage("ret", ovstage.StageConfig(retention=retention)) as st:
            pd = st.get_path_dictionary()
            q = st.query_from_path_list(pd.create_path_list_from_strings(["/A"]))
            for o in range(1, 5):
                st.write_attribute(q, "v", o, np.array([o], np.float32), is_array=False).wait()
                st.advance_write_floor(o).wait()
            with st.read_attributes(q, ["v"], OrdinalRange.between(2, 4)) as r:
                assert [g.array(0).tolist() for g in r.groups()] == [[4.0]]
            r = st.read_attributes(q, ["v"], OrdinalRange.between(1, 2))
            ok = r.op.ok
            if ok:
                try:
                    with r:
                        vals = [g.array(0).tolist() for g in r.groups()]
                    assert vals == [[2.0]]
                except OvstageError as e:
                    assert e.code == ovstage.ErrorCode.OUT_OF_RANGE, e
                    ok = False
            assert ok is served, retention


def test_path_dictionary_shared_by_stages_docstring_example():
    # 0.2.1's package docstring example, call for call: a PathDictionary() (its own backing stage)
    # and a separate Stage; the query is left to the stage's exit.
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        with ovstage.PathDictionary() as paths, ovstage.Stage("demo") as stage:
            plist = paths.create_path_list_from_strings(["/World/Cube"])
            attr = paths.intern_token("density")
            query = stage.query_from_path_list(plist)
            stage.write_attribute(query, attr, ordinal=2, tensors=np.array([1.5], np.float32), is_array=False).wait()
            stage.advance_write_floor(ordinal=2).wait()
            read = stage.read_attributes(query, [attr], OrdinalRange.latest(2))
            read.wait()
            group = read.fetch_next()
            assert group.array(0).tolist() == [1.5]
            stage.release_group(group)
            read.release().wait()
            # same meaning through the other stage's view of the dictionary
            other = stage.get_path_dictionary()
            assert other.token_to_string(attr) == "density" and other.get_path_strings(plist) == ["/World/Cube"]
            assert other.intern_path("/World/Cube") == paths.intern_path("/World/Cube")
            assert stage._pd_epoch == paths.stage._pd_epoch
            paths.destroy_path_list(plist)
        assert stage.destroyed and paths.stage.destroyed


def test_path_dictionary_outlives_its_own_stage_while_another_lives():
    # In a fresh interpreter: the last part needs every stage of the process gone.
    code = textwrap.dedent("""
        import ovstage
        from ovstage import ErrorCode, OvstageError
        with ovstage.Stage("keeper") as keeper:
            pd = ovstage.PathDictionary()
            plist = pd.create_path_list_from_strings(["/K/A", "/K/B"])
            tok = pd.intern_token("kept")
            pd.close()
            assert pd.stage.closed
            # the dictionary lives on with keeper: the PathDictionary goes through it
            assert pd.get_path_strings(plist) == ["/K/A", "/K/B"]
            assert keeper.get_path_dictionary().token_to_string(tok) == "kept"
            q = keeper.query_from_path_list(plist)
            assert q.result().total_prim_count == 2
            q.release().wait()
            plist.release()
            try:
                pd.path_list_count(int(plist))
                raise AssertionError("a released list was counted")
            except ovstage.OvxError:
                pass
        # the last stage is gone: a new one starts a new dictionary, the old handles are void
        with ovstage.Stage("later") as later:
            assert later._pd_epoch == keeper._pd_epoch + 1, (later._pd_epoch, keeper._pd_epoch)
            try:
                pd.token_to_string(tok)
                raise AssertionError("a token of a destroyed dictionary was resolved")
            except OvstageError as e:
                assert e.code == ErrorCode.INVALID_HANDLE, e
        print("shared-dictionary-ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "shared-dictionary-ok", out.stdout + out.stderr
