"""Threads: the GIL is released while the engine waits, producers and a consumer run in Python
threads, Ctrl-C interrupts a wait and leaves the stage usable."""

import _thread
import threading
import time

import numpy as np
import pytest

import ovstage
from ovstage import ErrorCode, OvstageError, OrdinalRange, Scope

from conftest import f32


def test_wait_releases_the_gil(stage, prims):
    """A thread blocked in wait() (a seal waiting for a map session) lets this thread run Python."""
    p = prims(2)
    m = stage.map_attribute(p.query, "m", 3, dtype=np.float32)
    m.wait()
    floor = stage.advance_write_floor(3)
    done = threading.Event()
    errors = []

    def waiter():
        try:
            floor.wait()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
        done.set()

    t = threading.Thread(target=waiter)
    t.start()
    # Pure-Python work while the other thread sits in the engine: impossible if it held the GIL.
    n = 0
    deadline = time.monotonic() + 0.2
    while time.monotonic() < deadline:
        n += 1
    assert n > 1000 and not done.is_set()
    for g in m.groups():
        g.array(0)[:] = 7
    m.unmap().wait()
    assert done.wait(10) and not errors
    t.join()


def test_ctrl_c_interrupts_a_wait_and_the_stage_stays_usable(stage, prims):
    p = prims(1)
    m = stage.map_attribute(p.query, "m", 2, dtype=np.float32)
    floor = stage.advance_write_floor(2)
    timer = threading.Timer(0.1, _thread.interrupt_main)
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        floor.wait()  # infinite: only the signal ends it
    assert time.monotonic() - t0 < 5
    timer.join()
    assert not floor.done
    m.unmap().wait()
    floor.wait()  # the op survived the interrupt
    with stage.get_attribute_write_floor("m") as oq:
        assert oq.fetch() == 2


def test_producers_and_a_consumer_in_threads(stage, prims):
    """Two producer threads write their own columns at every tick and seal them (INCLUDE scope);
    a consumer thread follows the global floor with range reads and checks every value."""
    n_prims, ticks = 64, 60
    p = prims(n_prims)
    errors = []

    def producer(name, scale):
        try:
            for t in range(1, ticks + 1):
                vals = np.full(n_prims, t * scale, np.float32)
                stage.write_attribute(p.query, name, t, vals, is_array=False).wait()
                stage.advance_write_floor(t, Scope.INCLUDE, [name]).wait()
        except Exception as e:
            errors.append(e)

    checked = []
    rebased = []

    def read_checked(rng, floor):
        """Checks every value of a read; False when the read fell out of the retention window."""
        r = stage.read_attributes(p.query, ["a", "b"], rng)
        if not r.op.ok:
            assert r.op.status == ErrorCode.OUT_OF_RANGE, r.op.error_message()
            return False
        try:
            with r:
                for g in r.groups():
                    name = p.pd.token_to_string(g.attribute)
                    a = g.array(0)
                    # a latest read whose floor left retention before it ran reads the newest
                    # version (as 0.2.1): its group's ordinal says which tick that is
                    tick = max(floor, g.ordinal) if rng.start_ordinal is None else floor
                    want = tick * (1 if name == "a" else 1000)
                    rows = [a[g.data_row_index(i)] for i in range(g.prim_count)]
                    assert rows == [want] * g.prim_count, (name, floor, rows[:3])
                    checked.append(g.prim_count)
        except OvstageError as e:  # found when the read ran
            assert e.code == ErrorCode.OUT_OF_RANGE and "retain" in e.message, e
            return False
        return True

    def consumer():
        try:
            last, behind = 0, False
            deadline = time.monotonic() + 30
            while last < ticks and time.monotonic() < deadline:
                with stage.get_attribute_write_floor() as oq:
                    floor = oq.fetch()
                if floor <= last:
                    time.sleep(0.001)
                    continue
                # A consumer that fell behind the retention window rebases on a latest read.
                rng = OrdinalRange.latest(floor) if behind else OrdinalRange.between(last + 1, floor)
                if read_checked(rng, floor):
                    last, behind = floor, False
                else:
                    rebased.append(floor)
                    behind = True
            assert last == ticks
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=producer, args=("a", 1)), threading.Thread(target=producer, args=("b", 1000)),
               threading.Thread(target=consumer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert sum(checked) >= 2 * n_prims


def test_concurrent_destroy_waits_for_calls_in_flight(prims):
    st = ovstage.Stage("race")
    pd = st.get_path_dictionary()
    q = st.query_from_path_list(pd.create_path_list_from_strings(["/A"]))
    m = st.map_attribute(q, "m", 2, dtype=np.float32)
    floor = st.advance_write_floor(2)
    res = []

    def waiter():
        try:
            floor.wait()
            res.append("ok")
        except OvstageError as e:
            res.append(e.code)

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.05)
    # destroy() unmaps the session (committing it), which lets the seal finish, then destroys.
    st.destroy()
    t.join(10)
    assert st.destroyed and res in (["ok"], [ErrorCode.INVALID_HANDLE])
