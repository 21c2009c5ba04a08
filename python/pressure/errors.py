# SPDX-License-Identifier: MIT
"""Exceptions: one per error the daemon answers with, named after it.

Every error of io.pressured and of org.varlink.service that a client can meet has a class here; the
interface test holds ERRORS to io.pressured.varlink both ways. A failure that is no answer of the
daemon's (it is not there, or went away) is Unreachable.
"""

from __future__ import annotations

from typing import Any


class PressureError(Exception):
    """Anything pressured refused, or could not be asked."""

    #: The Varlink error name, for errors the daemon answered with.
    varlink_name: str = ""

    def __init__(self, message: str = "", parameters: dict[str, Any] | None = None) -> None:
        super().__init__(message or self.varlink_name or self.__class__.__name__)
        #: The error's parameters as the daemon sent them (e.g. {"cgroup": "/x"}).
        self.parameters: dict[str, Any] = dict(parameters or {})


class Unreachable(PressureError, ConnectionError):
    """The daemon is not there, or went away during the call."""


class Timeout(PressureError, TimeoutError):
    """The daemon did not answer within the call's timeout."""


class ProtocolError(PressureError):
    """The daemon sent something this client cannot read (a reply that breaks the interface)."""


def _error(name: str, doc: str) -> type[PressureError]:
    short = name.rsplit(".", 1)[1]
    return type(short, (PressureError,), {"__doc__": doc, "varlink_name": name})


NoSuchCgroup = _error("io.pressured.NoSuchCgroup", "No cgroup with that v2 path, or it has no memory.pressure.")
NoSuchNode = _error("io.pressured.NoSuchNode", "No NUMA node with memory has that number.")
NoSuchShrinker = _error("io.pressured.NoSuchShrinker", "No shrinker with that id (of this client).")
CgroupNotWatchable = _error(
    "io.pressured.CgroupNotWatchable",
    "The cgroup exists but cannot be watched for this caller (errno in parameters: 13 not yours, 122 quota).",
)
UnknownRequest = _error("io.pressured.UnknownRequest", "An answer to a request unknown, answered or past its deadline.")
InvalidAnswer = _error("io.pressured.InvalidAnswer", "An answer with impossible values.")
ScopeRemoved = _error("io.pressured.ScopeRemoved", "Every scope of a subscription went away.")
ShuttingDown = _error("io.pressured.ShuttingDown", "The daemon is shutting down.")
ProtocolViolation = _error("io.pressured.ProtocolViolation", "The daemon closed the connection: a message broke the protocol.")
PermissionDenied = _error("org.varlink.service.PermissionDenied", "Not for this caller.")
InvalidParameter = _error("org.varlink.service.InvalidParameter", "A parameter the daemon refused (named in parameters).")
MethodNotFound = _error("org.varlink.service.MethodNotFound", "The daemon does not know the method (older than this client?).")
InterfaceNotFound = _error("org.varlink.service.InterfaceNotFound", "The daemon does not serve the interface.")
MethodNotImplemented = _error("org.varlink.service.MethodNotImplemented", "The method does not do what was asked.")
ExpectedMore = _error("org.varlink.service.ExpectedMore", "A streaming method was called without more.")

#: Every error class by its Varlink name.
ERRORS: dict[str, type[PressureError]] = {
    cls.varlink_name: cls
    for cls in (
        NoSuchCgroup,
        NoSuchNode,
        NoSuchShrinker,
        CgroupNotWatchable,
        UnknownRequest,
        InvalidAnswer,
        ScopeRemoved,
        ShuttingDown,
        ProtocolViolation,
        PermissionDenied,
        InvalidParameter,
        MethodNotFound,
        InterfaceNotFound,
        MethodNotImplemented,
        ExpectedMore,
    )
}


def from_reply(name: str, parameters: dict[str, Any] | None) -> PressureError:
    """The exception for an error reply; an error this client does not know is a plain PressureError."""
    cls = ERRORS.get(name)
    if cls is None:
        err = PressureError(name, parameters)
        err.varlink_name = name
        return err
    detail = ", ".join(f"{k} {v}" for k, v in (parameters or {}).items())
    return cls(f"{name}: {detail}" if detail else name, parameters)
