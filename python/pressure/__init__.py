# SPDX-License-Identifier: MIT
"""pressure: a client of pressured, the memory-pressure service, in pure Python.

    import pressure

    with pressure.Client() as client:
        print(client.status().system.level)
        sub = client.subscribe(["system", "/system.slice"], min_level=pressure.Level.MEDIUM)
        while True:
            print(sub.wait())

    @pressure.lru_cache()
    def thumbnail(path): ...      # entries the daemon may ask back when memory is tight

docs/python.md has the whole story; the wire format is docs/protocol.md.
"""

from .adopt import Adopted, adopt
from .cache import LRU, default_client, lru_cache
from .client import EMPTY, STOP, Client, ShrinkControl, Shrinker, Subscription
from .errors import (
    CgroupNotWatchable,
    InvalidAnswer,
    InvalidParameter,
    MethodNotFound,
    NoSuchCgroup,
    NoSuchNode,
    NoSuchShrinker,
    PermissionDenied,
    PressureError,
    ProtocolError,
    ProtocolViolation,
    ScopeRemoved,
    ShuttingDown,
    Timeout,
    UnknownRequest,
    Unreachable,
)
from .protocol import (
    Configuration,
    Level,
    LevelChange,
    LevelSource,
    MemoryEvent,
    MemoryEventKind,
    ScopeRef,
    ScopeState,
    ScopeType,
    ShrinkOp,
    Status,
)

__version__ = "1.3.0"

__all__ = [
    "Adopted", "adopt", "LRU", "default_client", "lru_cache", "EMPTY", "STOP", "Client", "ShrinkControl",
    "Shrinker", "Subscription", "CgroupNotWatchable", "InvalidAnswer", "InvalidParameter", "MethodNotFound",
    "NoSuchCgroup", "NoSuchNode", "NoSuchShrinker", "PermissionDenied", "PressureError", "ProtocolError",
    "ProtocolViolation", "ScopeRemoved", "ShuttingDown", "Timeout", "UnknownRequest", "Unreachable",
    "Configuration", "Level", "LevelChange", "LevelSource", "MemoryEvent", "MemoryEventKind", "ScopeRef",
    "ScopeState", "ScopeType", "ShrinkOp", "Status",
]
