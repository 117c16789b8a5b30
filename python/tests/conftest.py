"""Shared fixtures of the ovstage Python suite.

Run from a build tree: PYTHONPATH=build/release/python python -m pytest python/tests (ctest does it);
or after `pip install .`: python -m pytest python/tests.
"""

import gc

import numpy as np
import pytest

import ovstage


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device and torch or cupy (python/tests/run_gpu.sh)")


@pytest.fixture
def stage():
    st = ovstage.Stage("pytest")
    yield st
    gc.collect()
    st.destroy()
    assert st.closed


class Prims:
    """A query over n prims /P0.. /Pn-1 plus the dictionary that named them."""

    def __init__(self, stage, n, root="/P"):
        self.stage = stage
        self.pd = stage.get_path_dictionary()
        self.paths = [f"{root}{i}" for i in range(n)]
        self.plist = self.pd.create_path_list_from_strings(self.paths)
        self.query = stage.query_from_path_list(self.plist)


@pytest.fixture
def prims(stage):
    def make(n=3, root="/P"):
        return Prims(stage, n, root)

    return make


def read_column(stage, query, attr, ordinal, range_start=None):
    """Every value group of a read as (group facts, numpy copy of tensor 0)."""
    rng = ovstage.OrdinalRange(ordinal, range_start)
    out = []
    with stage.read_attributes(query, [attr], rng) as read:
        read.wait()
        for g in read.groups():
            if g.is_delete:
                out.append(("delete", g.prim_count, None))
            else:
                out.append(("value", g.prim_count, g.array(0).copy()))
    return out


def f32(*v):
    return np.array(v, np.float32)
