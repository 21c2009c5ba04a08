# SPDX-License-Identifier: MIT
"""The io.pressured wire format, as io.pressured.varlink declares it: its types as dataclasses, decoded
strictly from the daemon's replies and encoded for its calls.

Each dataclass is named after its IDL type and has the IDL's fields, with Optional for the IDL's "?"
(the interface test holds TYPES, CALLS and REPLIES to io.pressured.varlink). A reply that lacks a
mandatory field, or has one of the wrong type, raises ProtocolError; fields this client does not know
are skipped, for a later daemon's sake.
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from dataclasses import dataclass
from typing import Any, Optional, Union

from .errors import ProtocolError


class Level(enum.IntEnum):
    """How tight memory is in a scope (docs/levels.md)."""

    OK = 0
    LOW = 1
    MEDIUM = 2
    CRITICAL = 3

    def __str__(self) -> str:
        return self.name.lower()


class ScopeType(enum.Enum):
    SYSTEM = "system"
    NODE = "node"
    CGROUP = "cgroup"


class LevelSource(enum.Enum):
    PRESSURE = "pressure"
    HEADROOM = "headroom"
    WATERMARK = "watermark"


class ShrinkOp(enum.Enum):
    COUNT = "count"
    SCAN = "scan"


class MemoryEventKind(enum.Enum):
    MAX = "max"
    OOM_KILL = "oom_kill"


@dataclass(frozen=True)
class ScopeRef:
    type: ScopeType
    node: Optional[int] = None
    cgroup: Optional[str] = None

    def __str__(self) -> str:
        if self.type is ScopeType.NODE:
            return f"node:{self.node}"
        if self.type is ScopeType.CGROUP:
            return str(self.cgroup)
        return "system"

    @classmethod
    def parse(cls, name: Union[str, "ScopeRef"]) -> "ScopeRef":
        """A scope by name, as pressurectl takes it: "system", "node:N" or a cgroup v2 path."""
        if isinstance(name, ScopeRef):
            return name
        if name == "system":
            return cls(ScopeType.SYSTEM)
        if name.startswith("node:") and name[5:].isdigit():
            return cls(ScopeType.NODE, node=int(name[5:]))
        if name.startswith("/"):
            return cls(ScopeType.CGROUP, cgroup=name)
        raise ValueError(f"{name!r} is not a scope (use system, node:N or /cgroup/path)")


@dataclass(frozen=True)
class Stall:
    avg10: float
    avg60: float
    avg300: float
    total: int


@dataclass(frozen=True)
class Pressure:
    some: Stall
    full: Optional[Stall] = None


@dataclass(frozen=True)
class NodeMemory:
    total: int
    free: int
    watermark_min: int
    watermark_low: int
    watermark_high: int
    numa_foreign: int
    refault_anon: int
    refault_file: int


@dataclass(frozen=True)
class CgroupMemory:
    usage: int
    limit: Optional[int] = None


@dataclass(frozen=True)
class Headroom:
    limit: int
    unreclaimable: int
    room: Optional[int] = None
    cgroup: Optional[str] = None


@dataclass(frozen=True)
class Regulation:
    budget: int
    stall: int
    state: str
    steps: int
    asked: int
    cgroup: Optional[str] = None
    limit: Optional[int] = None
    edge: Optional[int] = None
    edge_found: Optional[int] = None
    return_usec: Optional[int] = None
    rising: Optional[int] = None


@dataclass(frozen=True)
class ScopeState:
    scope: ScopeRef
    level: Level
    reclaim_target: int
    since: int
    pressure: Optional[Pressure] = None
    memory: Optional[NodeMemory] = None
    cgroup_memory: Optional[CgroupMemory] = None
    source: Optional[LevelSource] = None
    headroom: Optional[Headroom] = None
    reason: Optional[str] = None
    regulation: Optional[Regulation] = None


@dataclass(frozen=True)
class LevelChange:
    scope: ScopeRef
    previous: Level
    level: Level
    reclaim_target: int
    timestamp: int
    pressure: Optional[Pressure] = None
    memory: Optional[NodeMemory] = None
    cgroup_memory: Optional[CgroupMemory] = None
    source: Optional[LevelSource] = None
    headroom: Optional[Headroom] = None
    reason: Optional[str] = None
    coalesced: Optional[int] = None
    removed: Optional[bool] = None


@dataclass(frozen=True)
class MemoryEvent:
    scope: ScopeRef
    kind: MemoryEventKind
    count: int
    timestamp: int


@dataclass(frozen=True)
class PsiThreshold:
    kind: str
    stall_usec: int
    window_usec: int


@dataclass(frozen=True)
class LevelThresholds:
    level: Level
    pressure: PsiThreshold
    node_factor: float
    headroom_percent: Optional[float] = None
    headroom_bytes: Optional[int] = None


@dataclass(frozen=True)
class RegulatedCgroup:
    pattern: str
    budget_usec: int


@dataclass(frozen=True)
class RegisteredShrinker:
    id: int
    name: str


@dataclass(frozen=True)
class Registration:
    token: str
    shrinkers: list[RegisteredShrinker]


@dataclass(frozen=True)
class Request:
    id: int
    shrinker: int
    op: ShrinkOp
    node: int
    cgroup: str
    priority: int
    deadline: int
    nr_to_scan: Optional[int] = None
    scope: Optional[ScopeType] = None
    level: Optional[Level] = None


@dataclass(frozen=True)
class ShrinkerLimit:
    shrinker: int
    bytes: int


@dataclass(frozen=True)
class ShrinkerSpec:
    name: str
    numa_aware: Optional[bool] = None
    memcg_aware: Optional[bool] = None
    seeks: Optional[int] = None
    batch: Optional[int] = None


@dataclass(frozen=True)
class ShrinkAnswer:
    request: int
    count: Optional[int] = None
    bytes: Optional[int] = None
    empty: Optional[bool] = None
    freed: Optional[int] = None
    scanned: Optional[int] = None
    stop: Optional[bool] = None
    value: Optional[float] = None


@dataclass(frozen=True)
class ShrinkerNode:
    node: int
    objects: int
    bytes: int
    deferred: int
    value: Optional[float] = None


@dataclass(frozen=True)
class ShrinkResult:
    shrinker: int
    name: str
    node: int
    cgroup: str
    scanned: int
    freed: int
    bytes_freed: int
    stopped: Optional[bool] = None
    timed_out: Optional[bool] = None
    empty: Optional[bool] = None
    quarantined: Optional[bool] = None
    rejected: Optional[bool] = None
    released_bytes: Optional[int] = None
    count: Optional[int] = None


# ---- replies of whole methods ----


@dataclass(frozen=True)
class Status:
    """GetStatus: the system, every NUMA node with memory and every watched cgroup."""

    system: ScopeState
    nodes: list[ScopeState]
    cgroups: list[ScopeState]


@dataclass(frozen=True)
class Configuration:
    """GetConfiguration: the thresholds and intervals in effect."""

    levels: list[LevelThresholds]
    hold_usec: int
    sample_interval_usec: int
    round_interval_usec: int
    request_timeout_usec: int
    cgroups: list[str]
    memory_pressure_level: Level
    low_memory_monitor: bool
    log_level: str
    regulate_budget_usec: Optional[int] = None
    regulate_interval_usec: Optional[int] = None
    regulate_step_max_percent: Optional[float] = None
    regulate_cgroups: Optional[list[RegulatedCgroup]] = None
    reclaim_cgroups: Optional[list[str]] = None
    value_cgroups: Optional[list[str]] = None


@dataclass(frozen=True)
class SubscribeReply:
    state: Optional[list[ScopeState]] = None
    event: Optional[LevelChange] = None
    memory_event: Optional[MemoryEvent] = None


@dataclass(frozen=True)
class ServeReply:
    registered: Optional[Registration] = None
    request: Optional[Request] = None
    requests: Optional[list[Request]] = None
    limits: Optional[list[ShrinkerLimit]] = None


@dataclass(frozen=True)
class AddShrinkerReply:
    shrinker: RegisteredShrinker


@dataclass(frozen=True)
class ShrinkReply:
    results: list[ShrinkResult]


#: The IDL's types this client reads or writes, by their IDL names.
TYPES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        ScopeRef, Stall, Pressure, NodeMemory, CgroupMemory, Headroom, Regulation, ScopeState, LevelChange,
        MemoryEvent, PsiThreshold, LevelThresholds, RegulatedCgroup, RegisteredShrinker, Registration, Request,
        ShrinkerLimit, ShrinkerSpec, ShrinkAnswer, ShrinkerNode, ShrinkResult,
    )
}

#: Each method's reply as this client reads it.
REPLIES: dict[str, type] = {
    "GetStatus": Status,
    "GetConfiguration": Configuration,
    "Subscribe": SubscribeReply,
    "Serve": ServeReply,
    "AddShrinker": AddShrinkerReply,
    "Shrink": ShrinkReply,
}

#: Each method's parameters as this client writes them (name: IDL type text), for the interface test.
CALLS: dict[str, dict[str, str]] = {
    "GetStatus": {},
    "GetConfiguration": {},
    "Subscribe": {"scopes": "?[]ScopeRef", "min_level": "?Level"},
    "Serve": {"shrinkers": "[]ShrinkerSpec", "batched": "?bool", "for_pid": "?int", "limits": "?bool"},
    "AddShrinker": {"token": "string", "shrinker": "ShrinkerSpec"},
    "RemoveShrinker": {"token": "string", "shrinker": "int"},
    "Answer": {"token": "string", "answers": "?[]ShrinkAnswer"},
    "Shrink": {"nr_to_scan": "?int", "shrinker": "?int", "dry_run": "?bool"},
}

_ENUMS = (Level, ScopeType, LevelSource, ShrinkOp, MemoryEventKind)


# ---- decoding ----

_hints_cache: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    h = _hints_cache.get(cls)
    if h is None:
        h = _hints_cache[cls] = typing.get_type_hints(cls)
    return h


def _optional(tp: Any) -> tuple[bool, Any]:
    """(True, X) for Optional[X]."""
    if typing.get_origin(tp) is Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return True, args[0]
    return False, tp


def _decode_value(tp: Any, v: Any, where: str) -> Any:
    if tp is bool:
        if not isinstance(v, bool):
            raise ProtocolError(f"{where}: not a boolean")
        return v
    if tp is int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise ProtocolError(f"{where}: not an integer")
        return v
    if tp is float:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ProtocolError(f"{where}: not a number")
        return float(v)
    if tp is str:
        if not isinstance(v, str):
            raise ProtocolError(f"{where}: not a string")
        return v
    if tp is Level:
        if not isinstance(v, str) or v.upper() not in Level.__members__:
            raise ProtocolError(f"{where}: not a level")
        return Level[v.upper()]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(v)
        except ValueError:
            raise ProtocolError(f"{where}: not one of {', '.join(m.value for m in tp)}") from None
    if typing.get_origin(tp) is list:
        if not isinstance(v, list):
            raise ProtocolError(f"{where}: not an array")
        (item,) = typing.get_args(tp)
        return [_decode_value(item, x, f"{where}[{i}]") for i, x in enumerate(v)]
    if dataclasses.is_dataclass(tp):
        return decode(tp, v, where)
    raise TypeError(f"cannot decode {tp}")


def decode(cls: type, obj: Any, where: str = "") -> Any:
    """An instance of dataclass cls from a JSON object, strictly (ProtocolError)."""
    where = where or cls.__name__
    if not isinstance(obj, dict):
        raise ProtocolError(f"{where}: not an object")
    kwargs = {}
    for f in dataclasses.fields(cls):
        optional, tp = _optional(_hints(cls)[f.name])
        v = obj.get(f.name)
        if v is None:  # absent or null
            if not optional:
                raise ProtocolError(f"{where}: {f.name} is missing")
            continue
        kwargs[f.name] = _decode_value(tp, v, f"{where}.{f.name}")
    return cls(**kwargs)


# ---- encoding ----


def encode(value: Any) -> Any:
    """JSON for a dataclass (fields that are None left out), enum, list or plain value."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)
                if getattr(value, f.name) is not None}
    if isinstance(value, Level):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    return value


# ---- the schema, for the interface test ----


def _idl_type(tp: Any) -> str:
    optional, tp = _optional(tp)
    prefix = "?" if optional else ""
    if typing.get_origin(tp) is list:
        return prefix + "[]" + _idl_type(typing.get_args(tp)[0])
    names = {bool: "bool", int: "int", float: "float", str: "string"}
    if tp in names:
        return prefix + names[tp]
    return prefix + tp.__name__


def schema() -> dict[str, Any]:
    """What this client reads and writes, in the IDL's terms: {"types": {name: {field: type}}, "replies":
    {method: {field: type}}, "calls": {method: {param: type}}, "enums": {name: [values]}}."""

    def fields(cls: type) -> dict[str, str]:
        return {f.name: _idl_type(_hints(cls)[f.name]) for f in dataclasses.fields(cls)}

    return {
        "types": {name: fields(cls) for name, cls in TYPES.items()},
        "replies": {name: fields(cls) for name, cls in REPLIES.items()},
        "calls": CALLS,
        "enums": {e.__name__: [str(m) if e is Level else m.value for m in e] for e in _ENUMS},
    }


if __name__ == "__main__":  # python3 -m pressure.protocol: the schema, as JSON
    import json

    print(json.dumps(schema(), sort_keys=True))
