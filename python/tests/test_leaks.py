"""Reference and memory leaks: 10**5 write/seal/read/view cycles leave the live Python objects and
tracemalloc's traced memory flat (no sys.gettotalrefcount needed)."""

import gc
import sys
import tracemalloc

import numpy as np

import ovstage
from ovstage import OrdinalRange, WriteDesc

from conftest import f32

CALLS = 10**5


def cycle(stage, p, ordinal, vals):
    stage.write_attribute(p.query, "v", ordinal, vals, is_array=False, index_map=[0, 1, 0, 1]).wait()
    stage.write_attributes(p.query, [WriteDesc("w", vals, is_array=False)], ordinal).wait()
    stage.advance_write_floor(ordinal).wait()
    with stage.read_attributes(p.query, ["v", "w"], OrdinalRange.latest(ordinal)) as read:
        for g in read.groups():
            a = g.array(0)
            d = np.from_dlpack(g.dlpack(0))
            assert a[g.data_row_index(0)] == d[g.data_row_index(0)]
    try:
        stage.write_attribute(p.query, "v", ordinal, vals, is_array=False)  .wait()  # below the floor
    except ovstage.OvstageError:
        pass


def test_no_leaks_over_many_calls(stage, prims):
    p = prims(4)
    vals = f32(1, 2, 3, 4)
    for o in range(1, 200):  # warm up caches, pools, interned strings
        cycle(stage, p, o, vals)
    gc.collect()
    objects_before = len(gc.get_objects())
    tracemalloc.start()
    snap_before = tracemalloc.take_snapshot()
    ordinal = 200
    calls = 0
    while calls < CALLS:
        cycle(stage, p, ordinal, vals)
        ordinal += 1
        calls += 8  # Python-level calls into the binding per cycle (and more under the hood)
    gc.collect()
    snap_after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    growth = sum(s.size_diff for s in snap_after.compare_to(snap_before, "filename"))
    objects_after = len(gc.get_objects())
    assert objects_after - objects_before < 50, objects_after - objects_before
    assert growth < 64 * 1024, growth
    assert stage.live_objects == 1  # only the fixture's query


def test_refcounts_of_inputs_come_back(stage, prims):
    p = prims(4)
    vals = f32(1, 2, 3, 4)
    im = [0, 1, 2, 3]
    before = (sys.getrefcount(vals), sys.getrefcount(im))
    for o in range(1, 1001):
        stage.write_attribute(p.query, "v", o, vals, is_array=False, index_map=im, count=4).wait()
    assert (sys.getrefcount(vals), sys.getrefcount(im)) == before
