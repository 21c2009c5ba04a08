# SPDX-License-Identifier: MIT
"""One Varlink connection: JSON objects, each followed by a NUL byte, on a unix stream socket.

Non-blocking: send() queues and writes what the socket takes; receive() reads what is there and returns
the whole messages. A message larger than MESSAGE_MAX, or one that is not a JSON object, is a
ProtocolError (the daemon sends neither).
"""

from __future__ import annotations

import errno
import json
import os
import socket
import time
from typing import Any, Optional

from .errors import ProtocolError, Timeout, Unreachable

MESSAGE_MAX = 16 << 20  # the daemon's replies stay far below this (ListShrinkers of 64 Ki shrinkers)
READ_MAX = 1 << 20  # one read call reads at most this much: a flood cannot keep dispatch from returning


def default_socket_path() -> str:
    """$PRESSURED_SOCKET, else a user's own daemon in $XDG_RUNTIME_DIR where one listens, else the system's
    (as libpressure chooses)."""
    env = os.environ.get("PRESSURED_SOCKET", "")
    if env.startswith("/"):
        return env
    rt = os.environ.get("XDG_RUNTIME_DIR", "")
    if os.geteuid() != 0 and rt.startswith("/"):
        p = os.path.join(rt, "pressured", "io.pressured")
        if os.path.exists(p):
            return p
    return "/run/pressured/io.pressured"


class Connection:
    def __init__(self, path: str) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            self.sock.connect(path)
        except OSError as e:
            self.sock.close()
            raise Unreachable(f"cannot reach pressured at {path}: {e.strerror}") from e
        self.sock.setblocking(False)
        self._in = bytearray()
        self._out = bytearray()
        self.closed = False
        self.eof = False

    def fileno(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.sock.close()

    # ---- sending ----

    def send(self, method: str, parameters: Optional[dict[str, Any]] = None, *, more: bool = False,
             oneway: bool = False) -> None:
        msg: dict[str, Any] = {"method": method}
        if parameters:
            msg["parameters"] = parameters
        if more:
            msg["more"] = True
        if oneway:
            msg["oneway"] = True
        self._out += json.dumps(msg, separators=(",", ":")).encode() + b"\0"
        self.flush()

    @property
    def pending_output(self) -> bool:
        return bool(self._out)

    def flush(self) -> None:
        """Write what the socket takes now."""
        while self._out and not self.closed:
            try:
                n = self.sock.send(self._out)
            except BlockingIOError:
                return
            except OSError as e:
                self.close()
                raise Unreachable(f"pressured at {self.path} went away: {e.strerror}") from e
            del self._out[:n]

    # ---- receiving ----

    def receive(self) -> list[dict[str, Any]]:
        """The whole messages that have come. When the daemon closed the connection, eof is set: the caller
        handles the messages that came before the end, then the end."""
        eof = False
        try:
            data = self.sock.recv(READ_MAX)
            eof = not data
            self._in += data
        except BlockingIOError:
            pass
        except OSError as e:
            if e.errno != errno.EINTR:
                eof = True
        msgs = []
        while (msg := self.take()) is not None:
            msgs.append(msg)
        if len(self._in) > MESSAGE_MAX:
            raise ProtocolError("pressured sent a message larger than this client reads")
        if eof:
            self.eof = True
        return msgs

    def take(self) -> Optional[dict[str, Any]]:
        """The first whole message read, or None."""
        end = self._in.find(b"\0")
        if end < 0:
            return None
        raw = bytes(self._in[:end])
        del self._in[: end + 1]
        try:
            msg = json.loads(raw)
        except ValueError as e:
            raise ProtocolError(f"pressured sent a message that is not JSON: {e}") from None
        if not isinstance(msg, dict):
            raise ProtocolError("pressured sent a message that is not an object")
        return msg

    def wait_message(self, timeout: float) -> dict[str, Any]:
        """Block until one message has come (the others stay queued)."""
        deadline = time.monotonic() + timeout
        while True:
            msg = self.take()
            if msg is not None:
                return msg
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout(f"pressured at {self.path} did not answer within {timeout:g} s")
            self.sock.settimeout(left)
            try:
                self.flush_blocking()
                data = self.sock.recv(READ_MAX)
            except socket.timeout:
                continue
            except OSError as e:
                self.close()
                raise Unreachable(f"pressured at {self.path} went away: {e.strerror}") from e
            finally:
                if not self.closed:
                    self.sock.setblocking(False)
            if not data:
                self.close()
                raise Unreachable(f"pressured at {self.path} closed the connection")
            self._in += data
            if len(self._in) > MESSAGE_MAX:
                raise ProtocolError("pressured sent a message larger than this client reads")

    def flush_blocking(self) -> None:
        if self._out:
            self.sock.sendall(self._out)
            self._out.clear()
