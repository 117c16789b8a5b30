"""The log callback: messages of failed ops reach a Python callback with the GIL held, flush_log
does not deadlock a thread that holds the GIL, and uninstalling stops delivery."""

import threading

import numpy as np
import pytest

import ovstage
from ovstage import LogSeverity, OvstageError

from conftest import f32


def test_log_callback_gets_op_failures(stage, prims):
    p = prims(2)
    stage.write_attribute(p.query, "v", 1, f32(1, 2), is_array=False).wait()
    got = []
    threads = set()

    def cb(sev, ts, msg):
        got.append((sev, ts, msg))
        threads.add(threading.get_ident())

    ovstage.set_log_callback(cb, LogSeverity.INFO)
    try:
        with pytest.raises(OvstageError):
            stage.clone_async("/P0", ["/P1"], 2).wait()
        ovstage.flush_log()
    finally:
        ovstage.set_log_callback(None)
    fails = [g for g in got if "already exists" in g[2]]
    assert fails, got
    sev, ts, msg = fails[0]
    assert sev is LogSeverity.WARNING and ts > 1.6e9 and msg.startswith("[ops] op ")
    assert threading.get_ident() not in threads  # delivered on the engine's log thread
    n = len(got)
    with pytest.raises(OvstageError):
        stage.clone_async("/P0", ["/P1"], 3).wait()
    ovstage.flush_log()
    assert len(got) == n  # uninstalled


def test_callback_exceptions_are_unraisable_not_fatal(stage, prims):
    p = prims(2)
    stage.write_attribute(p.query, "v", 1, f32(1, 2), is_array=False).wait()
    seen = []

    def hook(u):
        seen.append(u.exc_value)

    def bad(sev, ts, msg):
        raise ValueError("callback bug")

    import sys

    old = sys.unraisablehook
    sys.unraisablehook = hook
    try:
        ovstage.set_log_callback(bad)
        with pytest.raises(OvstageError):
            stage.clone_async("/P0", ["/P1"], 2).wait()
        ovstage.flush_log()
    finally:
        ovstage.set_log_callback(None)
        sys.unraisablehook = old
    assert any(isinstance(e, ValueError) for e in seen)


def test_set_log_callback_validates():
    with pytest.raises(TypeError):
        ovstage.set_log_callback(5)
    with pytest.raises(ValueError):
        ovstage._native.set_log_callback(print, 2)
    with pytest.raises(TypeError):
        ovstage._native.set_log_callback(print, 0, 7)
