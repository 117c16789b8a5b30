"""ovstage — Python bindings of the ovstage tensor stage (a CPython C extension).

The stage is a columnar store: producers write attribute columns of prims at application
ordinals, seal them with ``advance_write_floor``, and consumers read zero-copy views. Tensors
cross as DLPack both ways: any object with ``__dlpack__`` (numpy, torch, cupy, warp, jax) goes
in without a copy, and read groups come out as numpy views (``ReadGroup.array(i)``) or DLPack
exports (``ReadGroup.dlpack(i)``).

Example (seed 000)::

    import numpy as np
    import ovstage
    from ovstage import OrdinalRange

    with ovstage.Stage("demo") as stage:
        paths = stage.get_path_dictionary()
        plist = paths.create_path_list_from_strings(["/World/A", "/World/B", "/World/C"])
        attr = paths.intern_token("temperature")
        query = stage.query_from_path_list(plist)
        stage.write_attribute(
            query, attr, ordinal=1, tensors=np.array([1.0, 2.0, 3.0], np.float32), is_array=False
        ).wait()
        stage.advance_write_floor(ordinal=1).wait()
        with stage.read_attributes(query, [attr], OrdinalRange.latest(1)) as read:
            read.wait()
            group = read.fetch_next()
            try:
                print("read back ordinal", group.ordinal, group.array(0))  # -> [1. 2. 3.]
            finally:
                stage.release_group(group)

Differences from the ctypes binding of ovstage 0.2.1 are listed in docs/python.md.
"""

from __future__ import annotations

import atexit as _atexit
import enum as _enum
import numbers as _numbers
import threading as _threading
import weakref as _weakref
from typing import NamedTuple as _NamedTuple, Optional as _Optional, Sequence as _Sequence

import numpy as _np

from . import _native
from ._native import (  # noqa: F401  (re-exported)
    DLTensor,
    Hierarchy,
    ManagedDLTensor,
    Map,
    MapGroup,
    Operation,
    OrdinalQuery,
    Query,
    Read,
    ReadGroup,
    make_dltensor,
)

__version__ = "0.2.1"

TIMEOUT_INFINITE = _native.TIMEOUT_INFINITE
OVSTAGE_TIMEOUT_INFINITE = TIMEOUT_INFINITE
OVX_API_SUCCESS = 0
OVX_API_ERROR = 1


# ---- Enums (values are the C API's) -----------------------------------------------------------


class ErrorCode(_enum.IntEnum):
    """ovstage_api_status_t."""

    OK = 0
    INVALID_ARGUMENT = 1
    INVALID_HANDLE = 2
    NOT_FOUND = 3
    PRIM_NOT_FOUND = 4
    WRITE_FLOOR_VIOLATION = 5
    NOT_SUPPORTED = 6
    QUEUE_FULL = 7
    END_OF_ITERATION = 8
    OUT_OF_MEMORY = 9
    LAYOUT_CHANGED = 10
    TIMEOUT = 11
    OP_FAILED = 12
    OUT_OF_RANGE = 13
    INTERNAL = 99


class FilterOp(_enum.IntEnum):
    """ovstage_filter_op_t, and this implementation's extensions (ovstage_ext.h).

    IN / LT / LE / GT / GE on an attribute's own scalar number or bool column compare its latest
    sealed value with the predicate's values (an extension: 0.2.1 answers NOT_SUPPORTED).
    EXT_OR (OVSTAGE_FILTER_OP_EXT_OR, an extension) separates AND groups: ``[A, B, OR, C]`` matches
    ``(A and B) or C``; its attribute and values are not looked at.
    """

    HAS = 0
    IN = 1
    CONTAINS = 2
    PREFIX = 3
    LT = 4
    LE = 5
    GT = 6
    GE = 7
    EXT_OR = 0x4F56


class PrimMode(_enum.IntEnum):
    """ovstage_prim_mode_t."""

    UPSERT = 0
    INSERT = 1


class Scope(_enum.IntEnum):
    """ovstage_scope_t."""

    ALL = 0
    INCLUDE = 1
    EXCLUDE = 2


class AttributeSemantic(_enum.IntEnum):
    """ovstage_attribute_semantic_t."""

    NONE = 0
    ASSET_PATH_ID = 1
    TOKEN_ID = 2
    PATH_EXPRESSION_STRING = 3
    RELATIONSHIP_PATH_ID = 4
    POINT = 5
    VECTOR = 6
    NORMAL = 7
    COLOR = 8
    QUATERNION = 9
    MATRIX = 10
    TEXTURE_COORDINATE = 11
    CONNECTION_PATH_ID = 12
    STRING = 13
    TIME_CODE = 14
    FRAME = 15


class LogSeverity(_enum.IntEnum):
    """ovstage_log_severity_t (NONE is a threshold only)."""

    VERBOSE = -2
    INFO = -1
    WARNING = 0
    ERROR = 1
    NONE = 3


class HierarchyRelation(_enum.IntEnum):
    PARENT = 0
    CHILDREN = 1
    SIBLINGS = 2


class HierarchyComputationModel(_enum.IntEnum):
    INVALID = 0
    CPU_INCREMENTAL = 1
    GPU_INCREMENTAL = 2
    GPU_GLOBAL = 3
    RUNTIME_DEFAULT = 4
    DEFAULT_CPU = 1
    DEFAULT_GPU = 3


class PopulationDomain(_enum.IntFlag):
    NONE = 0
    RENDERING = 1
    PHYSICS = 2
    ALL = 3


class DLDeviceType(_enum.IntEnum):
    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16
    kDLMAIA = 17
    kDLTrn = 18
    # Short aliases.
    CPU = 1
    CUDA = 2
    CUDA_HOST = 3
    CUDA_MANAGED = 13


class DLDataTypeCode(_enum.IntEnum):
    kDLInt = 0
    kDLUInt = 1
    kDLFloat = 2
    kDLOpaqueHandle = 3
    kDLBfloat = 4
    kDLComplex = 5
    kDLBool = 6


# ---- Errors -----------------------------------------------------------------------------------


class OvstageError(RuntimeError):
    """A failed stage call: ``.code`` (ErrorCode) and ``.message``; ``str()`` is "NAME: message"."""

    def __init__(self, code: int, message: str = ""):
        try:
            code = ErrorCode(code)
        except ValueError:
            pass
        self.code = code
        self.message = message
        name = code.name if isinstance(code, ErrorCode) else str(code)
        super().__init__(f"{name}: {message}")

    def __reduce__(self):
        return (type(self), (int(self.code), self.message))


class OvxError(RuntimeError):
    """A failed path dictionary call: ``.code`` (OVX_API_ERROR) and ``.message``."""

    def __init__(self, code: int, message: str = ""):
        self.code = code
        self.message = message
        super().__init__(f"OVX_API_ERROR: {message}")


# ---- Value types ------------------------------------------------------------------------------


class DLDataType(_NamedTuple):
    """A DLPack element type: (code, bits, lanes); lanes is the tuple width (3 for point3f)."""

    code: int
    bits: int
    lanes: int = 1


class DLDevice(_NamedTuple):
    device_type: int
    device_id: int = 0


class AttributeMeta(_NamedTuple):
    attribute_write_floor_ordinal: int
    layout_generation: int


class QueryResult(_NamedTuple):
    """Resolved query: the attribute tokens found, the matched prim count, the query's own handle."""

    attributes: tuple
    total_prim_count: int
    all_handle: int


class HierarchyItem(_NamedTuple):
    """The lookup result of one input prim: ``status`` (ErrorCode: OK, or NOT_FOUND for a prim that
    does not exist) and its related ``paths`` (path strings; CHILDREN / SIBLINGS in path-id order)."""

    status: int
    paths: tuple

    @property
    def ok(self) -> bool:
        return self.status == ErrorCode.OK


class HierarchyResult(_NamedTuple):
    """A get_hierarchy result: the ``ordinal`` it was asked at and one HierarchyItem per input prim,
    in input order."""

    ordinal: int
    items: list

    @property
    def input_count(self) -> int:
        return len(self.items)

    def item_paths(self, i: int) -> tuple:
        return self.items[i].paths


class GpuStatus(_NamedTuple):
    """gpu_status(): the CUDA devices this process may keep columns on, and why there are none."""

    device_count: int
    reason: str


class HierarchyComputationModelDesc(_NamedTuple):
    """One hierarchy computation model: id (HierarchyComputationModel), short name, description."""

    model_id: int
    name: str
    description: str


class OrdinalRange:
    """Which ordinals a read selects: latest at ``end_ordinal``, or the change range
    [start_ordinal, end_ordinal] when ``start_ordinal`` is given."""

    __slots__ = ("end_ordinal", "start_ordinal")

    def __init__(self, end_ordinal: int, start_ordinal: _Optional[int] = None):
        self.end_ordinal = _check_u64(end_ordinal, "end_ordinal")
        self.start_ordinal = None if start_ordinal is None else _check_u64(start_ordinal, "start_ordinal")
        if self.start_ordinal is not None and self.start_ordinal > self.end_ordinal:
            raise ValueError(f"start_ordinal {self.start_ordinal} > end_ordinal {self.end_ordinal}")

    @classmethod
    def latest(cls, end_ordinal: int) -> "OrdinalRange":
        return cls(end_ordinal)

    @classmethod
    def between(cls, start_ordinal: int, end_ordinal: int) -> "OrdinalRange":
        return cls(end_ordinal, start_ordinal)

    def __repr__(self) -> str:
        if self.start_ordinal is None:
            return f"OrdinalRange.latest({self.end_ordinal})"
        return f"OrdinalRange.between({self.start_ordinal}, {self.end_ordinal})"

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, OrdinalRange)
            and other.end_ordinal == self.end_ordinal
            and other.start_ordinal == self.start_ordinal
        )


def _operand(v):
    """A predicate value as the engine reads it: str as is, bool as true/false, numbers as repr."""
    if isinstance(v, str):
        return v
    if isinstance(v, (bool, _np.bool_)):
        return "true" if v else "false"
    if isinstance(v, _numbers.Real):
        return repr(v.item() if isinstance(v, _np.generic) else v)
    raise TypeError(f"Predicate values must be str, bool or real numbers, got {type(v).__name__}")


class Predicate:
    """One filter condition: ``attribute`` (str or token) ``op`` (FilterOp) ``values``.

    Values are strings; bools and real numbers (value comparisons, FilterOp.IN / LT / LE / GT / GE)
    are turned into the strings the engine reads ("true", "1.5"). ``Predicate.OR`` is the EXT_OR
    separator between AND groups.
    """

    __slots__ = ("attribute", "op", "values")

    def __init__(self, attribute, op: int, values: _Sequence[str] = ()):
        if isinstance(values, str):
            raise TypeError("values must be a sequence of str, not one str")
        self.attribute = attribute
        self.op = FilterOp(op)
        self.values = tuple(_operand(v) for v in values)

    def __repr__(self) -> str:
        return f"Predicate({self.attribute!r}, {self.op.name}, {self.values!r})"


Predicate.OR = Predicate("", FilterOp.EXT_OR)


class Filter:
    """The AND of its predicates; ``Predicate.OR`` entries separate AND groups (an extension)."""

    __slots__ = ("predicates",)

    def __init__(self, predicates: _Sequence[Predicate] = ()):
        self.predicates = tuple(predicates)
        for p in self.predicates:
            if not isinstance(p, Predicate):
                raise TypeError(f"Filter takes Predicate objects, got {type(p).__name__}")

    def __repr__(self) -> str:
        return f"Filter({list(self.predicates)!r})"


class WriteDesc:
    """One entry of ``Stage.write_attributes``: the arguments of ``write_attribute`` for one attribute."""

    __slots__ = ("attribute", "tensors", "is_array", "index_map", "mask", "count", "cuda_event", "cuda_stream",
                 "semantic")

    def __init__(self, attribute, tensors, is_array: bool, index_map=None, mask=None, count=None,
                 cuda_event=None, cuda_stream=None, semantic: int = AttributeSemantic.NONE):
        if not isinstance(is_array, bool):
            raise TypeError(f"is_array must be True or False, got {type(is_array).__name__}")
        self.attribute = attribute
        self.tensors = tensors
        self.is_array = is_array
        self.index_map = index_map
        self.mask = mask
        self.count = count
        self.cuda_event = cuda_event
        self.cuda_stream = cuda_stream
        self.semantic = semantic

    def __repr__(self) -> str:
        return f"WriteDesc({self.attribute!r}, is_array={self.is_array})"


class StageConfig:
    """Process configuration applied by ``ovstage_initialize`` when a Stage is created with it (the
    Stage then holds one process reference until it is destroyed). Besides the standard key, the
    extension keys of this implementation (ovstage_ext.h; their environment variables win):
    ``retention`` (sealed versions kept per column), ``workers``, ``queue_capacity``,
    ``max_unsealed_mb``, ``chunk_kb``, ``gpu_pool_mb`` (device memory each GPU's pool keeps),
    ``pin_workers`` and ``disable_gpu`` (bools), ``cuda_devices`` (the active-GPU list, a str such
    as ``"0,1"``: instances created while it is set take its ordinals round-robin,
    ``Stage.cuda_device``). Workers, pinning and queue capacity are fixed by the first
    configuration that bootstraps the process runtime, CPU-only mode by the first instance; the
    others apply to stages created after. ``None`` leaves a setting as it is."""

    __slots__ = ("runtime_default_hierarchy_computation_model", "retention", "workers", "queue_capacity",
                 "max_unsealed_mb", "chunk_kb", "gpu_pool_mb", "pin_workers", "disable_gpu", "cuda_devices")

    def __init__(self, runtime_default_hierarchy_computation_model: _Optional[int] = None, *,
                 retention: _Optional[int] = None, workers: _Optional[int] = None,
                 queue_capacity: _Optional[int] = None, max_unsealed_mb: _Optional[int] = None,
                 chunk_kb: _Optional[int] = None, gpu_pool_mb: _Optional[int] = None,
                 pin_workers: _Optional[bool] = None, disable_gpu: _Optional[bool] = None,
                 cuda_devices: _Optional[str] = None):
        self.runtime_default_hierarchy_computation_model = runtime_default_hierarchy_computation_model
        self.retention = retention
        self.workers = workers
        self.queue_capacity = queue_capacity
        self.max_unsealed_mb = max_unsealed_mb
        self.chunk_kb = chunk_kb
        self.gpu_pool_mb = gpu_pool_mb
        self.pin_workers = pin_workers
        self.disable_gpu = disable_gpu
        self.cuda_devices = cuda_devices


def _check_u64(v, what: str) -> int:
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"{what} must be an int, got {type(v).__name__} {v!r}")
    v = v.__index__()
    if not 0 <= v < 2**64:
        raise ValueError(f"{what} must be in [0, 2**64 - 1], got {v}")
    return v


for _name, _obj in (("OvstageError", OvstageError), ("OvxError", OvxError), ("QueryResult", QueryResult),
                    ("AttributeMeta", AttributeMeta), ("DLDataType", DLDataType),
                    ("HierarchyItem", HierarchyItem), ("HierarchyResult", HierarchyResult),
                    ("HierarchyComputationModelDesc", HierarchyComputationModelDesc)):
    _native._register(_name, _obj)


# ---- Stage ------------------------------------------------------------------------------------


# Every Stage of this process (weakly): a PathDictionary whose own stage is destroyed keeps working
# through another live stage of the same dictionary epoch (the dictionary is shared).
_stages = _weakref.WeakSet()


class Stage(_native.StageBase):
    """A stage instance. ``Stage(name=None, config=None)``; a context manager that destroys the
    stage on exit (and on collection). Every method is documented on the method itself."""

    def __init__(self, name: _Optional[str] = None, config: _Optional[StageConfig] = None):
        super().__init__(name, config)
        _stages.add(self)

    def compute_hierarchy(self, input_ordinal: int, output_ordinal: int,
                          model: int = HierarchyComputationModel.DEFAULT_CPU) -> None:
        """Recomputes the world matrices (the omni:fabric:worldMatrix rows that exist; the column is
        never created) from omni:xform / omni:resetXformStack at ``input_ordinal`` and publishes them
        at ``output_ordinal``, which must be sealed already (write N, seal N, compute(N, N), read).
        Blocking; raises OvstageError when the compute fails (GPU models: NOT_SUPPORTED here)."""
        self.compute_hierarchy_async(input_ordinal, output_ordinal, model).wait()

    def get_hierarchy(self, path_list: int, ordinal: int, relation: int) -> HierarchyResult:
        """PARENT / CHILDREN / SIBLINGS (HierarchyRelation) of each prim of ``path_list`` (blocking:
        the lookup, its result and the handle's release). A prim that does not exist gives an item
        with status NOT_FOUND."""
        with self.get_hierarchy_async(path_list, ordinal, relation) as h:
            return h.result()

    def get_path_dictionary(self) -> "PathDictionary":
        """The stage's path dictionary (tokens, prim paths, path lists)."""
        return PathDictionary(self)

    def __repr__(self) -> str:
        state = "destroyed" if self.closed else "live"
        return f"<ovstage.Stage {self.name!r} {state}>"


# ---- Path dictionary --------------------------------------------------------------------------


class PathList(int):
    """A path list handle (an int) owning one reference; ``release()`` (or the with-block exit)
    drops it. A PathList collected unreleased drops its reference."""

    # (int subclasses cannot have __slots__: the attributes live in __dict__)

    def __new__(cls, value: int, pd: "PathDictionary"):
        self = super().__new__(cls, value)
        self._pd = pd
        self._released = False
        return self

    def release(self) -> None:
        if self._released:
            raise OvstageError(ErrorCode.INVALID_HANDLE, f"path list {int(self)} was already released")
        self._released = True
        self._pd._release_list(int(self))

    def __enter__(self) -> "PathList":
        return self

    def __exit__(self, *exc) -> bool:
        if not self._released:
            self.release()
        return False

    def __del__(self):
        try:
            if not self._released and not self._pd._backing().closed:
                self._released = True
                self._pd._release_list(int(self))
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"PathList({int(self)})"


class PathDictionary:
    """Interns strings into tokens, prim paths into path handles, and ordered path sets into path
    lists. There is one dictionary, shared by every live stage of the process (made with the first,
    destroyed with the last), so its tokens, paths and lists mean the same in every stage.
    ``PathDictionary(stage)`` reaches it through that stage; ``PathDictionary()`` owns a private
    backing Stage (closed with the dictionary) that keeps the dictionary alive meanwhile::

        with ovstage.PathDictionary() as pd, ovstage.Stage("sim") as stage:
            plist = pd.create_path_list_from_strings(["/World/A"])
            q = stage.query_from_path_list(plist)

    When its stage is destroyed, the dictionary is used through another live stage that has
    shared it since (OvstageError(INVALID_HANDLE) when there is none: the handles are void)."""

    def __init__(self, stage: _Optional[Stage] = None):
        if stage is None:
            self._stage = Stage("ovstage.PathDictionary")
            self._owns = True
        elif isinstance(stage, _native.StageBase):
            self._stage = stage
            self._owns = False
        else:
            raise TypeError(f"stage must be an ovstage.Stage or None, got {type(stage).__name__}")

    @property
    def stage(self) -> Stage:
        return self._stage

    def _backing(self):
        st = self._stage
        if not st.closed:
            return st
        epoch = st._pd_epoch
        for other in list(_stages):
            if not other.closed and other._pd_epoch == epoch:
                return other
        return st  # destroyed: its calls raise OvstageError(INVALID_HANDLE)

    def close(self) -> None:
        if self._owns:
            self._stage.destroy()

    def __enter__(self) -> "PathDictionary":
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    @staticmethod
    def _str(s, what: str) -> str:
        if not isinstance(s, str):
            raise TypeError(f"{what} must be a str, got {type(s).__name__} {s!r}")
        return s

    def intern_token(self, s: str) -> int:
        return self._backing()._pd_intern_tokens([self._str(s, "token string")])[0]

    def intern_tokens(self, strings: _Sequence[str]) -> list:
        return self._backing()._pd_intern_tokens(strings)

    def token_to_string(self, token: int) -> str:
        return self._backing()._pd_token_strings([token])[0]

    def intern_path(self, s: str) -> int:
        return self._backing()._pd_intern_paths([self._str(s, "path string")])[0]

    def path_to_string(self, path: int) -> str:
        return self._backing()._pd_path_strings([path])[0]

    def create_path_list(self, paths: _Sequence[int]) -> PathList:
        return PathList(self._backing()._pd_create_path_list(paths), self)

    def create_path_list_from_strings(self, strings: _Sequence[str]) -> PathList:
        return PathList(self._backing()._pd_create_path_list_from_strings(strings), self)

    def add_path_list_reference(self, path_list: int) -> None:
        self._backing()._pd_add_path_list_reference(path_list)

    def destroy_path_list(self, path_list: int) -> None:
        """Drops one reference of a path list."""
        if isinstance(path_list, PathList):
            path_list.release()
        else:
            self._release_list(path_list)

    def _release_list(self, path_list: int) -> None:
        self._backing()._pd_release_path_list(path_list)

    def path_list_count(self, path_list: int) -> int:
        return self._backing()._pd_path_list_count(path_list)

    def get_paths(self, path_list: int) -> list:
        return self._backing()._pd_get_paths(path_list)

    def get_path_strings(self, path_list: int) -> list:
        return self._backing()._pd_path_strings(self._backing()._pd_get_paths(path_list))


# ---- DLPack helpers ---------------------------------------------------------------------------


def dltensor_to_numpy(t):
    """A zero-copy numpy view of a CPU DLTensor (or of any DLPack producer), flat in base elements."""
    if not isinstance(t, DLTensor):
        t = DLTensor.from_dlpack(t)
    return t.numpy()


_NUMPY_KINDS = {DLDataTypeCode.kDLFloat: "f", DLDataTypeCode.kDLInt: "i", DLDataTypeCode.kDLUInt: "u",
                DLDataTypeCode.kDLComplex: "c", DLDataTypeCode.kDLBool: "b"}


def numpy_dtype(d: DLDataType):
    """The numpy dtype of a (lanes-1) DLDataType."""
    import numpy as np

    kind = _NUMPY_KINDS.get(d.code)
    if kind is None or d.bits % 8:
        raise TypeError(f"DLDataType{tuple(d)} has no numpy dtype")
    return np.dtype(f"{kind}{d.bits // 8}") if kind != "b" else np.dtype(bool)


def numpy_to_dldatatype(np_dtype, lanes: int = 1) -> DLDataType:
    """DLDataType of a numpy dtype, with ``lanes`` in [1, 255]."""
    import numpy as np

    if isinstance(lanes, bool) or not isinstance(lanes, int):
        raise TypeError(f"lanes must be an int, got {type(lanes).__name__}")
    if not 1 <= lanes <= 255:
        raise ValueError(f"lanes must be in [1, 255], got {lanes}")
    d = np.dtype(np_dtype)
    codes = {"f": DLDataTypeCode.kDLFloat, "i": DLDataTypeCode.kDLInt, "u": DLDataTypeCode.kDLUInt,
             "c": DLDataTypeCode.kDLComplex, "b": DLDataTypeCode.kDLBool}
    if d.kind not in codes:
        raise TypeError(f"numpy dtype {d} has no DLPack equivalent")
    return DLDataType(int(codes[d.kind]), d.itemsize * 8, lanes)


# ---- Logging ----------------------------------------------------------------------------------

_log_lock = _threading.Lock()
_log_process_ref = False


def set_log_callback(callback, severity: int = LogSeverity.WARNING, channel_filter: _Optional[str] = None) -> None:
    """Installs ``callback(severity: LogSeverity, timestamp: float, message: str)`` for the process
    (None flushes, then disables). It runs on the engine's log thread with the GIL held; an
    exception it raises is reported as unraisable. ``channel_filter`` is the engine's filter syntax
    (e.g. "ops=info,*=error")."""
    global _log_process_ref
    with _log_lock:
        if callback is None:
            _native.set_log_callback(None)
            if _log_process_ref:
                _native._process_ref(False)
                _log_process_ref = False
            return
        if not callable(callback):
            raise TypeError(f"callback must be callable or None, got {type(callback).__name__}")

        def _trampoline(sev, ts, msg, _cb=callback):
            try:
                sev = LogSeverity(sev)
            except ValueError:
                pass
            _cb(sev, ts, msg)

        if not _log_process_ref:  # the log runtime lives with the process state
            _native._process_ref(True)
            _log_process_ref = True
        _native.set_log_callback(_trampoline, int(severity), channel_filter)


def flush_log(timeout: int = TIMEOUT_INFINITE) -> None:
    """Waits (GIL released) until every message emitted before the call was delivered."""
    _native.flush_log(timeout)


def gpu_status() -> GpuStatus:
    """ovstage_ext_get_gpu_status (an extension): ``GpuStatus(device_count, reason)``.

    ``device_count`` is 0 in CPU-only mode (OVSTAGE_DISABLE_GPU), without a driver or device, or in
    a build without the CUDA backend; ``reason`` then says which ("" when devices exist). The first
    call (or the first Stage) decides CPU-only mode for the process.
    """
    return GpuStatus(*_native.gpu_status())


def gpu_pool_stats(device: int = 0) -> dict:
    """ovstage_ext_get_gpu_pool_stats (an extension): the device buffer pool of CUDA device ``device``.

    A dict of ``bound_bytes`` (OVSTAGE_GPU_POOL_MB; 0 when the pool is off), ``retained_bytes`` (free
    device memory kept for reuse now, every stage together), cumulative ``hits``, ``misses`` and
    ``releases``, and ``cuda_reserved_bytes`` / ``cuda_used_bytes`` of CUDA's pool below it. Raises
    OvstageError (INVALID_ARGUMENT, naming the ordinal or why no device can be used) for an ordinal
    the process cannot use.
    """
    return _native.gpu_pool_stats(device)


def gpu_device_info(device: int = 0) -> dict:
    """ovstage_ext_get_gpu_device_info (an extension): where CUDA device ``device`` is served from.

    A dict of ``pci_bus_id`` (as CUDA writes it), ``near_workers`` (engine workers hwloc placed near
    the device: on the cores of its package or NUMA node; 0 unless the device was in the active-GPU
    list when the workers started), ``worker_count`` (all of them), and the cumulative
    ``completions`` its own event poller resolved and the ``pending`` ones it still holds. Raises
    OvstageError (INVALID_ARGUMENT, naming the ordinal or why no device can be used) for an ordinal
    the process cannot use.
    """
    return _native.gpu_device_info(device)


def library_version() -> tuple:
    """(major, minor, patch) of the C library: (0, 2, 1)."""
    return _native.library_version()


@_atexit.register
def _shutdown_log() -> None:
    # The log thread must not call into a finalizing interpreter.
    try:
        if _log_process_ref:
            set_log_callback(None)
    except Exception:
        pass


from . import instancing, population  # noqa: E402,F401

__all__ = [
    "Stage", "StageConfig", "Query", "Read", "Map", "OrdinalQuery", "Hierarchy", "HierarchyItem",
    "HierarchyResult", "HierarchyComputationModelDesc", "PathDictionary", "PathList", "OvxError",
    "OvstageError", "ErrorCode", "FilterOp", "PrimMode", "AttributeSemantic", "HierarchyRelation",
    "HierarchyComputationModel", "Scope", "PopulationDomain", "OrdinalRange", "Predicate", "Filter", "Operation",
    "WriteDesc", "ReadGroup", "MapGroup", "AttributeMeta", "QueryResult", "DLTensor", "ManagedDLTensor",
    "DLDataType", "DLDevice", "DLDeviceType", "DLDataTypeCode", "make_dltensor", "dltensor_to_numpy",
    "numpy_to_dldatatype", "numpy_dtype", "instancing", "population", "library_version", "set_log_callback",
    "flush_log", "gpu_device_info", "gpu_pool_stats", "gpu_status", "GpuStatus", "LogSeverity", "TIMEOUT_INFINITE", "OVSTAGE_TIMEOUT_INFINITE", "OVX_API_SUCCESS",
    "OVX_API_ERROR", "__version__",
]
