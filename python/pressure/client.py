# SPDX-License-Identifier: MIT
"""The client: status, subscriptions and shrinkers on one object, driven by dispatch().

Connections, as libpressure keeps them: one for calls (GetStatus, AddShrinker, Answer...), one per
subscription (a Subscribe stream holds its connection), and one serving connection for all shrinkers
(Serve, batched). dispatch() never blocks: it reads what came, runs the callbacks and answers the
requests in one Answer call. Callbacks run in the thread that dispatches.

Event loops: fileno() is readable when dispatch() has work, timeout() says when it must be called anyway
(the retry after the daemon went away); process() waits for either, run_in_thread() does it on a thread
of its own, and pressure.aio attaches a client to asyncio.

When the daemon goes away (a restart, an upgrade), every subscription and shrinker asks again, first
after 0.1 s, doubling up to 2 s; on_connection handlers hear False when it went and True when everything
is back, and the log says so once per absence.
"""

from __future__ import annotations

import collections
import ctypes
import logging
import select
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Union

from . import protocol
from ._wire import Connection, default_socket_path
from .errors import PressureError, ProtocolError, Timeout, Unreachable, from_reply
from .protocol import Level, LevelChange, MemoryEvent, Request, ScopeRef, ScopeState, ScopeType, ShrinkOp

log = logging.getLogger("pressure")

RETRY_FIRST = 0.1  # seconds: the first retry after the daemon went away, doubling up to RETRY_MAX
RETRY_MAX = 2.0
ANSWERS_MAX = 4096  # answers in one Answer call (the daemon's PROTOCOL_ANSWERS_MAX)
RELEASE_INTERVAL = 0.1  # seconds between heap trims after scans, as libpressure's
EVENTS_KEPT = 1024  # events a subscription keeps for wait() before the oldest go
INTERFACE = "io.pressured."


class _Sentinel:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"pressure.{self.name}"


#: count: nothing here (the daemon skips this shrinker's scans this round).
EMPTY = _Sentinel("EMPTY")
#: scan: cannot make progress now (lock contention, reentrancy): not asked again this round.
STOP = _Sentinel("STOP")


def _malloc_trim() -> Callable[[int], int]:
    """glibc's malloc_trim(), or a no-op where the C library has none. The interpreter's own symbols hold
    the C library's: ctypes.util.find_library() would run ldconfig in a child process at import."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return lambda pad: 0


_trim = _malloc_trim()


def now_usec() -> int:
    """CLOCK_MONOTONIC in microseconds, the clock of a request's deadline."""
    return time.monotonic_ns() // 1000


@dataclass
class ShrinkControl:
    """One request, as a count or scan callback receives it; the callback may set nr_bytes, nr_scanned
    and (count) value."""

    op: ShrinkOp
    node: int
    cgroup: str
    priority: int
    level: Level  # the scope's level; OK for an explicit Shrink
    scope_type: ScopeType  # the type of the scope whose pressure made the request
    deadline: int  # CLOCK_MONOTONIC µs: an answer after it does not count
    nr_to_scan: int = 0
    nr_bytes: int = 0  # set: the bytes those objects hold (count) or that were freed (scan)
    nr_scanned: Optional[int] = None  # scan, set: objects looked at, when not nr_to_scan
    value: float = 0.0  # count, set: what one more MiB would save (docs/shrinkers.md, "Value")

    def time_left(self) -> float:
        """Seconds until the deadline."""
        return max(0.0, (self.deadline - now_usec()) / 1e6)


CountFn = Callable[[ShrinkControl], Union[int, _Sentinel]]
ScanFn = Callable[[ShrinkControl], Union[int, _Sentinel]]
LimitFn = Callable[["Shrinker", Optional[int]], None]


class Shrinker:
    """A cache the daemon may ask to count and to free its objects (docs/shrinkers.md)."""

    def __init__(self, client: "Client", spec: protocol.ShrinkerSpec, count: CountFn, scan: ScanFn,
                 on_limit: Optional[LimitFn]) -> None:
        self.client = client
        self.spec = spec
        self.count_fn = count
        self.scan_fn = scan
        self.on_limit = on_limit
        #: The daemon's id, None until it has registered this shrinker (ids change when it restarts).
        self.id: Optional[int] = None
        #: The growth limit last told, in bytes; None: none.
        self.limit: Optional[int] = None
        self.removed = False

    @property
    def name(self) -> str:
        return self.spec.name

    def remove(self) -> None:
        """Unregister: no request reaches the callbacks once this returns (in the dispatching thread)."""
        self.client._remove_shrinker(self)

    def __repr__(self) -> str:
        return f"<pressure.Shrinker {self.name!r} id={self.id}>"


class Subscription:
    """Level changes and memory events of some scopes (docs/protocol.md, Subscribe).

    Events go to on_event (LevelChange) and on_memory_event (MemoryEvent) as they come, and are kept for
    wait() and pressure.aio (at most EVENTS_KEPT; the oldest go first). states has each scope's latest
    state. on_end hears the exception that ended it (ScopeRemoved when its cgroups went away)."""

    def __init__(self, client: "Client", scopes: list[ScopeRef], min_level: Level,
                 on_event: Optional[Callable[["Subscription", LevelChange], None]],
                 on_memory_event: Optional[Callable[["Subscription", MemoryEvent], None]],
                 on_end: Optional[Callable[["Subscription", PressureError], None]]) -> None:
        self.client = client
        self.scopes = scopes
        self.min_level = min_level
        self.on_event = on_event
        self.on_memory_event = on_memory_event
        self.on_end = on_end
        self.states: dict[ScopeRef, Union[ScopeState, LevelChange]] = {}
        self.events: collections.deque[Union[LevelChange, MemoryEvent]] = collections.deque(maxlen=EVENTS_KEPT)
        self.ended: Optional[PressureError] = None
        self._conn: Optional[Connection] = None
        self._started = False  # its first state came on the current connection
        self._waiters: list[Callable[[], None]] = []  # pressure.aio's wake-ups
        self._cond = threading.Condition()  # wait()'s, while another thread dispatches

    def level(self, scope: Union[str, ScopeRef] = "system") -> Level:
        return self.states[ScopeRef.parse(scope)].level

    def wait(self, timeout: Optional[float] = None) -> Union[LevelChange, MemoryEvent, None]:
        """The next event, dispatching the client meanwhile; None after timeout seconds. Raises what ended
        the subscription once its events are read."""
        thread = self.client._thread
        if thread is not None and thread is not threading.current_thread():
            # Another thread dispatches: it says when an event came (polling here would race it for them).
            with self._cond:
                if not self._cond.wait_for(lambda: self.events or self.ended, timeout):
                    return None
                if self.events:
                    return self.events.popleft()
                raise self.ended  # type: ignore[misc]
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.events:
            if self.ended:
                raise self.ended
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            self.client.process(left)
        return self.events.popleft()

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()
        for wake in self._waiters:
            wake()

    def close(self) -> None:
        """End it: the daemon stops watching its cgroups if nobody else does."""
        self.client._end_subscription(self, None)

    def _deliver(self, event: Union[LevelChange, MemoryEvent]) -> None:
        with self._cond:
            self.events.append(event)
        self._wake()
        if isinstance(event, LevelChange):
            self.states[event.scope] = event
            if self.on_event:
                self.on_event(self, event)
        elif self.on_memory_event:
            self.on_memory_event(self, event)

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Client:
    """A connection to pressured: status, subscriptions and shrinkers (see the module's text)."""

    def __init__(self, socket_path: Optional[str] = None, *, timeout: float = 5.0) -> None:
        self.socket_path = socket_path or default_socket_path()
        #: Seconds a blocking call waits for its reply.
        self.call_timeout = timeout
        self._lock = threading.RLock()
        self._epoll = select.epoll()
        self._ctl: Optional[Connection] = None  # the caller's calls, under _ctl_lock
        self._ctl_lock = threading.Lock()
        self._ans: Optional[Connection] = None  # the dispatcher's calls, under _lock
        self._serve: Optional[Connection] = None
        self._token: Optional[str] = None
        self._registering: list[Shrinker] = []  # sent with Serve, not registered yet
        self._shrinkers: list[Shrinker] = []
        self._by_id: dict[int, Shrinker] = {}
        self._subs: list[Subscription] = []
        self._by_fd: dict[int, Any] = {}
        self._away = False
        self._away_reason = ""
        self._retry_at: Optional[float] = None
        self._retry_delay = 0.0
        self._told: Optional[bool] = None
        self._on_connection: list[Callable[[bool], None]] = []
        self._release_at: Optional[float] = None  # a heap trim is due then (scans freed objects)
        self._released = 0.0
        self._thread: Optional[threading.Thread] = None
        self._stop = False
        self.closed = False

    # ---- plain calls ----

    def call(self, method: str, parameters: Optional[dict[str, Any]] = None, *, oneway: bool = False,
             timeout: Optional[float] = None) -> dict[str, Any]:
        """A call of io.pressured (method without the interface's name), blocking for its reply: the reply's
        parameters, or the daemon's error raised. It does not hold up dispatch() meanwhile (a Shrink of this
        process's own shrinkers is answered by the dispatching thread)."""
        with self._ctl_lock:
            return self._call("_ctl", method, parameters, oneway, timeout)

    def _call(self, which: str, method: str, parameters: Optional[dict[str, Any]], oneway: bool,
              timeout: Optional[float]) -> dict[str, Any]:
        """A call on one of the two call connections: _ctl for the caller's calls, _ans for the
        dispatcher's (Answer, AddShrinker, RemoveShrinker), so that neither waits for the other."""
        for attempt in (0, 1):
            conn = getattr(self, which)
            try:
                if conn is None or conn.closed:
                    conn = Connection(self.socket_path)
                    setattr(self, which, conn)
                conn.send(INTERFACE + method, parameters, oneway=oneway)
                if oneway:
                    return {}
                reply = conn.wait_message(self.call_timeout if timeout is None else timeout)
                break
            except Unreachable:
                # The daemon closes a connection that held no call for a while: once more, afresh.
                if conn:
                    conn.close()
                setattr(self, which, None)
                if attempt == 1:
                    raise
            except (Timeout, ProtocolError):
                if conn:
                    conn.close()
                setattr(self, which, None)
                raise
        if "error" in reply:
            raise from_reply(str(reply["error"]), reply.get("parameters"))
        params = reply.get("parameters") or {}
        if not isinstance(params, dict):
            raise ProtocolError(f"{method}: parameters that are not an object")
        return params

    def status(self) -> protocol.Status:
        """The state of the system, of every NUMA node with memory and of every watched cgroup."""
        return protocol.decode(protocol.Status, self.call("GetStatus"), "GetStatus")

    def configuration(self) -> protocol.Configuration:
        """The thresholds and intervals in effect."""
        return protocol.decode(protocol.Configuration, self.call("GetConfiguration"), "GetConfiguration")

    def shrink(self, nr_to_scan: Optional[int] = None, *, shrinker: Optional[int] = None,
               dry_run: bool = False) -> list[protocol.ShrinkResult]:
        """Ask shrinkers to free objects now (root, or a shrinker of one's own named by id)."""
        params: dict[str, Any] = {}
        if nr_to_scan is not None:
            params["nr_to_scan"] = nr_to_scan
        if shrinker is not None:
            params["shrinker"] = shrinker
        if dry_run:
            params["dry_run"] = True
        reply = self.call("Shrink", params, timeout=max(self.call_timeout, 30.0))
        return protocol.decode(protocol.ShrinkReply, reply, "Shrink").results

    # ---- subscriptions ----

    def subscribe(self, scopes: Iterable[Union[str, ScopeRef]] = ("system",), min_level: Level = Level.LOW, *,
                  on_event: Optional[Callable[[Subscription, LevelChange], None]] = None,
                  on_memory_event: Optional[Callable[[Subscription, MemoryEvent], None]] = None,
                  on_end: Optional[Callable[[Subscription, PressureError], None]] = None) -> Subscription:
        """Watch scopes ("system", "node:N", "/cgroup/path"). Blocks for their first state, so that a scope
        the daemon refuses raises here (NoSuchCgroup, NoSuchNode, CgroupNotWatchable)."""
        refs = [ScopeRef.parse(s) for s in scopes]
        level = Level[min_level.upper()] if isinstance(min_level, str) else Level(min_level)
        sub = Subscription(self, refs, level, on_event, on_memory_event, on_end)
        with self._lock:
            conn = self._subscribe_send(sub)
            try:
                msg = conn.wait_message(self.call_timeout)
            except PressureError:
                conn.close()
                raise
            if "error" in msg:
                conn.close()
                raise from_reply(str(msg["error"]), msg.get("parameters"))
            self._subs.append(sub)
            self._watch(conn, sub)
            sub._conn = conn
            self._subscription_message(sub, msg)
            # Events that came in the same read as the first state are in the buffer, where the fd cannot
            # say so: handled now.
            while sub._conn is not None and (msg := conn.take()) is not None:
                self._subscription_message(sub, msg)
        return sub

    def _subscribe_send(self, sub: Subscription) -> Connection:
        conn = Connection(self.socket_path)
        params: dict[str, Any] = {"scopes": protocol.encode(sub.scopes)}
        if sub.min_level != Level.LOW:
            params["min_level"] = str(sub.min_level)
        conn.send(INTERFACE + "Subscribe", params, more=True)
        return conn

    def _subscription_message(self, sub: Subscription, msg: dict[str, Any]) -> None:
        if "error" in msg:
            self._end_subscription(sub, from_reply(str(msg["error"]), msg.get("parameters")))
            return
        reply = protocol.decode(protocol.SubscribeReply, msg.get("parameters"), "Subscribe")
        if reply.state is not None:
            for st in reply.state:
                sub.states[st.scope] = st
            sub._started = True
            self._check_ready()
        if reply.event is not None:
            sub._deliver(reply.event)
        if reply.memory_event is not None:
            sub._deliver(reply.memory_event)

    def _end_subscription(self, sub: Subscription, error: Optional[PressureError]) -> None:
        with self._lock:
            if sub in self._subs:
                self._subs.remove(sub)
            if sub._conn:
                self._unwatch(sub._conn)
                sub._conn.close()
                sub._conn = None
            if sub.ended is None:
                sub.ended = error or PressureError("the subscription was closed")
            sub._wake()
        if error is not None and sub.on_end:
            sub.on_end(sub, error)

    # ---- shrinkers ----

    def add_shrinker(self, name: str, count: CountFn, scan: ScanFn, *, numa_aware: bool = False,
                     memcg_aware: bool = False, seeks: Optional[int] = None, batch: Optional[int] = None,
                     on_limit: Optional[LimitFn] = None) -> Shrinker:
        """Register a shrinker: count(sc) says how many objects could be freed (an int, or EMPTY), and
        scan(sc) frees up to sc.nr_to_scan of them (the number freed, or STOP). Both may set sc.nr_bytes.
        on_limit(shrinker, bytes) hears the growth limit its objects should keep within (None: none). A
        request whose deadline has passed is not run. Registration completes in dispatch(): shrinker.id is
        set then (wait_registered() waits for it)."""
        spec = protocol.ShrinkerSpec(name=name, numa_aware=numa_aware or None, memcg_aware=memcg_aware or None,
                                     seeks=seeks, batch=batch)
        s = Shrinker(self, spec, count, scan, on_limit)
        with self._lock:
            self._shrinkers.append(s)
            if self._away:
                return s  # registered with the others when the daemon is back
            if self._serve is None:
                try:
                    self._start_serving()
                except Unreachable as e:
                    self._go_away(str(e))  # a cache works without the daemon: registered when it comes
            elif self._token is not None:
                self._add_one(s)
            # else: a Serve is on its way; s is added once it has its token
        return s

    def wait_registered(self, timeout: Optional[float] = None) -> bool:
        """Dispatch until every shrinker has its id (False after timeout seconds)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while any(s.id is None for s in self._shrinkers):
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            if self._thread is not None:
                time.sleep(0.01 if left is None else min(0.01, left))
            else:
                self.process(left if left is not None else 1.0)
        return True

    def _start_serving(self) -> None:
        specs = [s for s in self._shrinkers if not s.removed]
        if not specs:
            return
        self._serve = Connection(self.socket_path)
        self._token = None
        self._registering = specs
        params: dict[str, Any] = {"shrinkers": protocol.encode([s.spec for s in specs]), "batched": True}
        if any(s.on_limit for s in specs):
            params["limits"] = True
        self._serve.send(INTERFACE + "Serve", params, more=True)
        self._watch(self._serve, "serve")

    def _add_one(self, s: Shrinker) -> None:
        """AddShrinker; a refusal (InvalidParameter past 64 shrinkers or the user's limit) drops the shrinker
        and is raised."""
        try:
            reply = self._call("_ans", "AddShrinker", {"token": self._token, "shrinker": protocol.encode(s.spec)},
                               False, None)
        except Unreachable as e:
            self._go_away(str(e))
            return
        except PressureError:
            s.removed = True
            if s in self._shrinkers:
                self._shrinkers.remove(s)
            raise
        added = protocol.decode(protocol.AddShrinkerReply, reply, "AddShrinker").shrinker
        self._registered(s, added.id)

    def _registered(self, s: Shrinker, id: int) -> None:
        s.id = id
        self._by_id[id] = s
        if s.removed:
            self._send_remove(s)

    def _remove_shrinker(self, s: Shrinker) -> None:
        with self._lock:
            if s.removed:
                return
            s.removed = True
            if s in self._shrinkers:
                self._shrinkers.remove(s)
            if s.id is not None:
                self._send_remove(s)

    def _send_remove(self, s: Shrinker) -> None:
        self._by_id.pop(s.id, None)
        if self._token is not None and not self._away:
            try:
                self._call("_ans", "RemoveShrinker", {"token": self._token, "shrinker": s.id}, True, None)
            except PressureError:
                pass  # the daemon went: it forgets the shrinker with the connection
        s.id = None

    def _serve_message(self, msg: dict[str, Any], answers: list[dict[str, Any]]) -> None:
        if "error" in msg:
            err = from_reply(str(msg["error"]), msg.get("parameters"))
            log.warning("pressured did not take this client's shrinkers (%s); trying again", err)
            self._go_away(str(err))
            return
        reply = protocol.decode(protocol.ServeReply, msg.get("parameters"), "Serve")
        if reply.registered is not None:
            regs = reply.registered.shrinkers
            if len(regs) != len(self._registering):
                raise ProtocolError("Serve registered another number of shrinkers than it was given")
            self._token = reply.registered.token
            for s, r in zip(self._registering, regs):
                self._registered(s, r.id)
            self._registering = []
            for s in [s for s in self._shrinkers if s.id is None and not s.removed]:
                try:
                    self._add_one(s)  # added while the Serve was on its way
                except PressureError as e:
                    log.warning("pressured did not take shrinker %r (%s): it is not asked", s.name, e)
            self._check_ready()
        for q in ([reply.request] if reply.request else []) + (reply.requests or []):
            a = self._run_request(q)
            if a is not None:
                answers.append(a)
        for lim in reply.limits or []:
            s = self._by_id.get(lim.shrinker)
            if s is None:
                continue
            s.limit = lim.bytes or None
            if s.on_limit:
                s.on_limit(s, s.limit)

    def _run_request(self, q: Request) -> Optional[dict[str, Any]]:
        s = self._by_id.get(q.shrinker)
        if s is None or now_usec() > q.deadline:
            return None  # gone, or past its deadline (we were busy): the daemon has given up on it
        sc = ShrinkControl(op=q.op, node=q.node, cgroup=q.cgroup, priority=q.priority,
                           level=q.level if q.level is not None else Level.OK,
                           scope_type=q.scope if q.scope is not None else ScopeType.SYSTEM,
                           deadline=q.deadline, nr_to_scan=q.nr_to_scan or 0)
        scan = q.op is ShrinkOp.SCAN
        try:
            n = s.scan_fn(sc) if scan else s.count_fn(sc)
        except Exception:
            log.exception("shrinker %r raised in %s; answered as unable", s.name, q.op.value)
            n = STOP if scan else 0
        if scan and isinstance(n, int) and n > 0 and self._release_at is None:
            self._release_at = max(time.monotonic(), self._released + RELEASE_INTERVAL)
        if now_usec() > q.deadline:
            return None  # the daemon counted a timeout already and would refuse the answer
        return _answer(q.id, scan, n, sc)

    def _send_answers(self, answers: list[dict[str, Any]]) -> None:
        for i in range(0, len(answers), ANSWERS_MAX):
            try:
                self._call("_ans", "Answer", {"token": self._token, "answers": answers[i: i + ANSWERS_MAX]}, True,
                           None)
            except PressureError as e:
                log.debug("answers not sent (%s): they run into their deadlines", e)
                return

    # ---- connection state ----

    def on_connection(self, handler: Callable[[bool], None]) -> None:
        """handler(True) once everything asked of the daemon is in place, handler(False) when it went."""
        self._on_connection.append(handler)

    @property
    def is_connected(self) -> bool:
        return bool(self._told) and not self._away

    def _tell(self, connected: bool) -> None:
        if self._told == connected:
            return
        self._told = connected
        for h in list(self._on_connection):
            h(connected)

    def _check_ready(self) -> None:
        if self._away or self._token is None and any(not s.removed for s in self._shrinkers):
            return
        if any(not sub._started for sub in self._subs):
            return
        if not self._subs and not self._shrinkers:
            return
        if self._told is False:
            log.info("pressured at %s is there again", self.socket_path)
        self._retry_delay = 0.0
        self._tell(True)

    def _go_away(self, reason: str) -> None:
        if self._away:
            return
        self._away = True
        self._away_reason = reason
        if self._told is not False:  # once per absence
            log.warning("pressured at %s is not there (%s); trying again", self.socket_path, reason)
        for sub in self._subs:
            if sub._conn:
                self._unwatch(sub._conn)
                sub._conn.close()
                sub._conn = None
            sub._started = False
        if self._serve:
            self._unwatch(self._serve)
            self._serve.close()
            self._serve = None
        if self._ans:
            self._ans.close()
            self._ans = None
        self._token = None
        self._registering = []
        for s in self._shrinkers:
            s.id = None
            if s.limit is not None and s.on_limit:
                s.limit = None
                s.on_limit(s, None)  # no daemon, no limit
        self._by_id.clear()
        self._retry_delay = min(self._retry_delay * 2, RETRY_MAX) if self._retry_delay else RETRY_FIRST
        self._retry_at = time.monotonic() + self._retry_delay
        self._tell(False)

    def _reach(self) -> None:
        """Ask everything anew of a daemon that was away."""
        self._away = False
        self._retry_at = None
        try:
            for sub in self._subs:
                sub._conn = self._subscribe_send(sub)
                self._watch(sub._conn, sub)
            self._start_serving()
        except Unreachable as e:
            self._go_away(str(e))
            return
        self._check_ready()

    # ---- dispatch ----

    def fileno(self) -> int:
        """Readable when dispatch() has work."""
        return self._epoll.fileno()

    def timeout(self) -> Optional[float]:
        """Seconds until dispatch() must be called even if fileno() stays quiet (None: no such time)."""
        due = [t for t in (self._retry_at, self._release_at) if t is not None]
        if not due:
            return None
        return max(0.0, min(due) - time.monotonic())

    def _release(self) -> None:
        """What scans freed goes back to the system, as libpressure's release does: the daemon measures a
        client's resident memory to see that its claims are true (docs/shrinkers.md, trust)."""
        if self._release_at is not None and time.monotonic() >= self._release_at:
            self._release_at = None
            self._released = time.monotonic()
            _trim(0)

    def _watch(self, conn: Connection, owner: Any) -> None:
        self._by_fd[conn.fileno()] = (conn, owner)
        self._epoll.register(conn.fileno(), select.EPOLLIN)

    def _unwatch(self, conn: Connection) -> None:
        if not conn.closed and self._by_fd.pop(conn.fileno(), None) is not None:
            try:
                self._epoll.unregister(conn.fileno())
            except OSError:
                pass

    def dispatch(self) -> None:
        """Handle what has come, without blocking: events to their subscriptions, requests to their
        shrinkers (their answers in one call), limits, the retry when the daemon was away."""
        with self._lock:
            if self.closed:
                return
            if self._away and self._retry_at is not None and time.monotonic() >= self._retry_at:
                self._reach()
            answers: list[dict[str, Any]] = []
            for fd, _ in self._epoll.poll(0):
                entry = self._by_fd.get(fd)
                if entry is None:
                    continue
                conn, owner = entry
                try:
                    msgs = conn.receive()
                    for msg in msgs:
                        if owner == "serve":
                            self._serve_message(msg, answers)
                        else:
                            self._subscription_message(owner, msg)
                        if conn.closed:
                            break
                    if conn.eof and not conn.closed:
                        raise Unreachable("it closed the connection")
                except (Unreachable, ProtocolError) as e:
                    if isinstance(e, ProtocolError):
                        log.error("pressured sent what breaks the interface (%s): reconnecting", e)
                    if owner != "serve" and owner.ended is not None:
                        continue
                    self._go_away(str(e))
                    break
            if answers and self._token is not None:
                self._send_answers(answers)
            self._release()

    def process(self, timeout: Optional[float] = None) -> None:
        """Wait until there is something to dispatch (at most timeout seconds), then dispatch it."""
        t = self.timeout()
        if timeout is not None:
            t = timeout if t is None else min(t, timeout)
        self._epoll.poll(-1 if t is None else t)
        self.dispatch()

    def run_in_thread(self) -> threading.Thread:
        """Dispatch on a daemon thread of its own until close(): callbacks run there."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="pressure", daemon=True)
                self._thread.start()
            return self._thread

    def _run(self) -> None:
        while not self._stop:
            try:
                self.process(0.5)
            except Exception:
                log.exception("pressure: dispatch failed")
                time.sleep(0.1)

    def close(self) -> None:
        """Unregister everything and close the connections."""
        self._stop = True
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(2.0)
        with self._lock:
            if self.closed:
                return
            self.closed = True
            for sub in list(self._subs):
                if sub._conn:
                    sub._conn.close()
            for conn in (self._serve, self._ctl, self._ans):
                if conn:
                    conn.close()
            self._epoll.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _answer(request: int, scan: bool, n: Union[int, _Sentinel], sc: ShrinkControl) -> dict[str, Any]:
    """An Answer's item for what a callback returned, saturated to what the daemon takes."""
    a: dict[str, Any] = {"request": request}
    if not scan and n is EMPTY:
        a["empty"] = True
        return a
    if scan and n is STOP:
        a["stop"] = True
        return a
    count = n if isinstance(n, int) and not isinstance(n, bool) else 0
    count = min(max(count, 0), 2**63 - 1)
    a["freed" if scan else "count"] = count
    if scan and sc.nr_scanned is not None and sc.nr_scanned != sc.nr_to_scan:
        a["scanned"] = min(max(int(sc.nr_scanned), 0), 2**63 - 1)
    if sc.nr_bytes > 0:
        a["bytes"] = min(int(sc.nr_bytes), 2**63 - 1)
    if not scan and sc.value > 0 and sc.value == sc.value:  # finite, positive: what the daemon takes
        a["value"] = min(float(sc.value), 1e9)
    return a
