# SPDX-License-Identifier: MIT
"""asyncio: a client dispatched by the running loop, events as an async iterator, calls that await.

    client = pressure.Client()
    pressure.aio.attach(client)
    sub = client.subscribe(["system"])
    async for event in pressure.aio.events(sub):
        ...

attach() reads the client's fd with loop.add_reader() and calls dispatch() at its timeout() too; the
callbacks (shrinkers' included) then run in the loop. status() and configuration() use a connection of
their own through asyncio's streams, so they never block the loop.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator, Optional, Union

from . import protocol
from ._wire import MESSAGE_MAX, default_socket_path
from .client import Client, Subscription
from .errors import ProtocolError, Unreachable, from_reply
from .protocol import LevelChange, MemoryEvent


class Attachment:
    """A client on a loop: detach() takes it off."""

    def __init__(self, client: Client, loop: asyncio.AbstractEventLoop) -> None:
        self.client = client
        self.loop = loop
        self._timer: Optional[asyncio.TimerHandle] = None
        loop.add_reader(client.fileno(), self._dispatch)
        self._arm()

    def _dispatch(self) -> None:
        self.client.dispatch()
        self._arm()

    def _arm(self) -> None:
        if self._timer:
            self._timer.cancel()
            self._timer = None
        t = self.client.timeout()
        if t is not None:
            self._timer = self.loop.call_later(t, self._dispatch)

    def detach(self) -> None:
        if self._timer:
            self._timer.cancel()
        if not self.client.closed:
            self.loop.remove_reader(self.client.fileno())


def attach(client: Client, loop: Optional[asyncio.AbstractEventLoop] = None) -> Attachment:
    """Dispatch the client in the loop (the running one by default)."""
    return Attachment(client, loop or asyncio.get_running_loop())


async def events(sub: Subscription) -> AsyncIterator[Union[LevelChange, MemoryEvent]]:
    """The subscription's events as they come (its client attached to the loop); ends by raising what
    ended the subscription."""
    ready = asyncio.Event()
    wake = ready.set
    sub._waiters.append(wake)
    try:
        while True:
            while sub.events:
                yield sub.events.popleft()
            if sub.ended:
                raise sub.ended
            ready.clear()
            await ready.wait()
    finally:
        sub._waiters.remove(wake)


async def call(method: str, parameters: Optional[dict[str, Any]] = None, *, socket_path: Optional[str] = None,
               timeout: float = 5.0) -> dict[str, Any]:
    """One call of io.pressured on a connection of its own; the reply's parameters, or the error raised."""
    path = socket_path or default_socket_path()
    try:
        reader, writer = await asyncio.open_unix_connection(path, limit=MESSAGE_MAX)
    except OSError as e:
        raise Unreachable(f"cannot reach pressured at {path}: {e.strerror}") from e
    try:
        msg: dict[str, Any] = {"method": "io.pressured." + method}
        if parameters:
            msg["parameters"] = parameters
        writer.write(json.dumps(msg, separators=(",", ":")).encode() + b"\0")
        await writer.drain()
        try:
            raw = await asyncio.wait_for(reader.readuntil(b"\0"), timeout)
        except asyncio.IncompleteReadError:
            raise Unreachable(f"pressured at {path} closed the connection") from None
    finally:
        writer.close()
    try:
        reply = json.loads(raw[:-1])
    except ValueError as e:
        raise ProtocolError(f"pressured sent a message that is not JSON: {e}") from None
    if not isinstance(reply, dict):
        raise ProtocolError("pressured sent a message that is not an object")
    if "error" in reply:
        raise from_reply(str(reply["error"]), reply.get("parameters"))
    return reply.get("parameters") or {}


async def status(socket_path: Optional[str] = None) -> protocol.Status:
    return protocol.decode(protocol.Status, await call("GetStatus", socket_path=socket_path), "GetStatus")


async def configuration(socket_path: Optional[str] = None) -> protocol.Configuration:
    reply = await call("GetConfiguration", socket_path=socket_path)
    return protocol.decode(protocol.Configuration, reply, "GetConfiguration")
