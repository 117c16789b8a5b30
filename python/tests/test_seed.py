"""Seed 000's Python example, verbatim inside a stage set up as its prose says."""

import numpy as np

import ovstage
from ovstage import OrdinalRange


def test_seed_000_python_example(capsys):
    with ovstage.Stage("example.minimal") as stage:
        paths = stage.get_path_dictionary()
        query = stage.query_from_path_list(paths.create_path_list_from_strings(["/World/A", "/World/B", "/World/C"]))
        attr = paths.intern_token("temperature")
        # ---- verbatim from seed 000 ----
        # Write one float per prim into the "temperature" column at ordinal 1,
        # seal it by advancing the write floor to 1, then read it back. Tensor
        # data crosses as a numpy array (CPU) via DLPack; async ops return an
        # Operation whose .wait() raises OvstageError on failure. The read is
        # a context manager -- block exit releases its handle even when an
        # error interrupts -- and the fetched group is released in a finally.
        stage.write_attribute(
            query, attr, ordinal=1, tensors=np.array([1.0, 2.0, 3.0], np.float32), is_array=False
        ).wait()
        stage.advance_write_floor(ordinal=1).wait()

        with stage.read_attributes(query, [attr], OrdinalRange.latest(1)) as read:
            read.wait()
            group = read.fetch_next()
            if group is None:
                raise SystemExit("read returned no group at ordinal 1")
            try:
                # group.array(i) is a zero-copy numpy view of tensor i (CPU).
                print("read back ordinal", group.ordinal, group.array(0))  # -> [1. 2. 3.]
            finally:
                stage.release_group(group)
        # ---- end of the seed's code ----
        query.release().wait()
    assert capsys.readouterr().out == "read back ordinal 1 [1. 2. 3.]\n"


def test_minimal_python_scenario():
    """Spec example 1 (Python): string attribute, clone, DLTensor.from_dlpack, np.from_dlpack read."""
    with ovstage.Stage("example.minimal") as stage:
        pd = stage.get_path_dictionary()
        tok = pd.intern_token("temperature")
        assert pd.token_to_string(tok) == "temperature"
        plist = pd.create_path_list_from_strings(["/World/A", "/World/B", "/World/C"])
        q = stage.query_from_path_list(plist)
        stage.write_attribute(q, tok, 1, np.array([1, 2, 3], np.float32), is_array=False).wait()
        stage.write_attribute(q, "temperature", 2, np.array([4, 5, 6], np.float32), is_array=False).wait()
        stage.advance_write_floor(2).wait()
        stage.clone("/World/A", ["/World/A_env0", "/World/A_env1"], 3)
        stage.advance_write_floor(3).wait()
        t = ovstage.DLTensor.from_dlpack(np.array([7, 8, 9], np.float32))
        stage.write_attribute(q, tok, 4, t, is_array=False).wait()
        stage.advance_write_floor(4).wait()
        with stage.read_attributes(q, [tok], OrdinalRange.latest(4)) as read:
            read.wait()
            g = read.fetch_next()
            with g:
                vals = np.from_dlpack(g.dlpack(0))
                rows = [vals[g.data_row_index(i)] for i in range(g.prim_count)]
                assert rows == [7.0, 8.0, 9.0]
            assert read.fetch_next() is None
        # The clones carry /World/A's value as of the clone (4.0).
        cq = stage.query_from_path_list(pd.create_path_list_from_strings(["/World/A_env0", "/World/A_env1"]))
        with stage.read_attributes(cq, [tok], 4) as read:
            got = [g.array(0)[g.data_row_index(i)] for g in read.groups() for i in range(g.prim_count)]
        assert got == [4.0, 4.0]
