"""USD instancing queries (``ovstage_instancing_*``): not available in this build.

They need USD population; ``available()`` is False and the queries raise
OvstageError(NOT_SUPPORTED).
"""

from __future__ import annotations


def available() -> bool:
    """False: instancing data come from USD population, which this build does not have."""
    return False


def _unsupported(name):
    def fn(*args, **kwargs):
        from . import ErrorCode, OvstageError

        raise OvstageError(ErrorCode.NOT_SUPPORTED, f"instancing.{name} needs USD population (OpenUSD), which this "
                           "build of ovstage does not have")

    fn.__name__ = name
    return fn


get_prototype_roots = _unsupported("get_prototype_roots")
get_prototype_root = _unsupported("get_prototype_root")
get_instance_roots = _unsupported("get_instance_roots")
