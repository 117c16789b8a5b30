"""USD population (``ovstage_population_*``): not available in this build.

This implementation has no OpenUSD, so ``available()`` is False and code written for the
established binding takes its own fallback path. The other functions of the established module
raise OvstageError(NOT_SUPPORTED) instead of pretending to populate anything.
"""

from __future__ import annotations


def available() -> bool:
    """False: this build has no OpenUSD."""
    return False


def last_error() -> str:
    return "USD population needs OpenUSD, which this build of ovstage does not have"


def _unsupported(name):
    def fn(*args, **kwargs):
        from . import ErrorCode, OvstageError

        raise OvstageError(ErrorCode.NOT_SUPPORTED, f"population.{name}: {last_error()}")

    fn.__name__ = name
    fn.__doc__ = f"Raises OvstageError(NOT_SUPPORTED): {last_error()}."
    return fn


for _n in ("open_usd", "open_usd_async", "open_usd_from_string", "open_usd_from_string_async", "open_usd_with_desc",
           "open_usd_from_string_with_desc", "add_usd_reference", "add_usd_reference_async",
           "add_usd_reference_from_string", "add_usd_reference_from_string_async", "remove_usd", "remove_usd_async",
           "reset_usd", "reset_usd_async", "update_from_usd_time", "update_from_usd_time_async", "apply_usd_changes",
           "apply_usd_changes_async", "register_usd_schemas", "export_to_usd_file",
           "export_typed_hierarchy_to_usd_file"):
    globals()[_n] = _unsupported(_n)
del _n
