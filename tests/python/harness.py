# SPDX-License-Identifier: MIT
"""Real parts for the Python client's tests: the daemon (READY=1 awaited), the suite's pressure generator
(pressure-gen --hold) and client processes placed in its group. Everything is removed at exit, also when
a test fails."""

from __future__ import annotations

import atexit
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Optional

BUILD = os.environ.get("PRESSURED_BUILD_ROOT", os.getcwd())
PRESSURED = os.environ.get("PRESSURED_BIN", os.path.join(BUILD, "pressured"))
PRESSURECTL = os.environ.get("PRESSURECTL_BIN", os.path.join(BUILD, "pressurectl"))
PRESSURE_GEN = os.environ.get("PRESSURE_GEN_BIN", os.path.join(BUILD, "tests", "pressure-gen"))
HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "child.py")

_procs: list[subprocess.Popen] = []


def _cleanup() -> None:
    for p in reversed(_procs):
        if p.poll() is None:
            try:
                p.send_signal(signal.SIGCONT)
                p.terminate()
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            except OSError:
                pass


atexit.register(_cleanup)


def track(p: subprocess.Popen) -> subprocess.Popen:
    _procs.append(p)
    return p


def stop(p: Optional[subprocess.Popen], timeout: float = 10.0) -> None:
    if p is None or p.poll() is not None:
        return
    p.send_signal(signal.SIGCONT)
    p.terminate()
    try:
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def skip_reason() -> Optional[str]:
    if not os.access("/proc/pressure/memory", os.R_OK):
        return "no PSI on this kernel"
    if os.geteuid() != 0:
        return "not root"
    return None


class Daemon:
    """pressured on a socket of its own, with a configuration of the test's."""

    def __init__(self, config: str = "") -> None:
        self.dir = tempfile.mkdtemp(prefix="pressured-pytest-")
        os.chmod(self.dir, 0o755)
        self.socket = os.path.join(self.dir, "io.pressured")
        self.conf = os.path.join(self.dir, "pressured.conf")
        self.log = os.path.join(self.dir, "daemon.log")
        self.proc: Optional[subprocess.Popen] = None
        with open(self.conf, "w") as f:
            f.write(config)
        self.start()

    def start(self) -> None:
        notify = os.path.join(self.dir, "notify")
        if os.path.exists(notify):
            os.unlink(notify)
        ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        ns.bind(notify)
        env = dict(os.environ, NOTIFY_SOCKET=notify)
        with open(self.log, "a") as log:
            self.proc = track(subprocess.Popen([PRESSURED, "--socket", self.socket, "--config", self.conf],
                                               stderr=log, stdout=subprocess.DEVNULL, env=env))
        # READY=1: an event, not a guess at start-up time (30 s: ASan on a busy host).
        deadline = time.monotonic() + 30
        try:
            while time.monotonic() < deadline:
                r, _, _ = select.select([ns], [], [], deadline - time.monotonic())
                if r and b"READY=1" in ns.recv(4096):
                    return
                if self.proc.poll() is not None:
                    break
            raise RuntimeError(f"pressured did not get ready:\n{self.log_text()}")
        finally:
            ns.close()

    def stop(self) -> None:
        stop(self.proc)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def log_text(self) -> str:
        try:
            with open(self.log) as f:
                return f.read()
        except OSError:
            return ""

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def ctl(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([PRESSURECTL, "--socket", self.socket, *args], capture_output=True, text=True,
                              timeout=60)


class Generator:
    """The suite's pressure generator: a group with a memory limit and a writer in it (started later)."""

    def __init__(self, limit_mib: int = 16) -> None:
        self.proc = track(subprocess.Popen([PRESSURE_GEN, os.getcwd(), str(limit_mib), "--hold"],
                                           stdout=subprocess.PIPE, text=True))
        line = self.proc.stdout.readline().split()
        if len(line) != 3:
            stop(self.proc)
            raise RuntimeError("pressure-gen could not make its group")
        self.cgroup, self.v2_dir = line[0], line[1]
        self.mem_dir = None if line[2] == "-" else line[2]

    def join(self, pid: int) -> None:
        """Move a process into the group (the v2 group and, on hybrid systems, the v1 memory group)."""
        for d in (self.v2_dir, self.mem_dir):
            if d:
                with open(os.path.join(d, "cgroup.procs"), "w") as f:
                    f.write(str(pid))

    def start(self) -> None:
        self.proc.send_signal(signal.SIGUSR1)

    def stop_writer(self) -> None:
        self.proc.send_signal(signal.SIGUSR2)

    def close(self) -> None:
        stop(self.proc, 30)


class Child:
    """tests/python/child.py in a process of its own (in a generator's group if given), read line by line."""

    def __init__(self, daemon: Daemon, *args: str, group: Optional[Generator] = None, user: Optional[str] = None,
                 env: Optional[dict[str, str]] = None) -> None:
        argv = [sys.executable, CHILD, "--socket", daemon.socket, *args]
        if user:
            argv = ["setpriv", f"--reuid={user}", f"--regid={'nogroup' if user == 'nobody' else user}",
                    "--clear-groups", *argv]

        def place() -> None:
            if group:
                group.join(os.getpid())

        self.proc = track(subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                           bufsize=1, preexec_fn=place, env=dict(os.environ, **(env or {}))))
        self.lines: list[str] = []
        self._buf = b""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_line(self, prefix: str, timeout: float = 30.0) -> str:
        """The next line that starts with prefix (lines before it are kept in self.lines). Reads the pipe
        itself: a buffered reader would hold a second line where select() cannot see it."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while True:
            while b"\n" in self._buf:
                raw, self._buf = self._buf.split(b"\n", 1)
                line = raw.decode(errors="replace")
                self.lines.append(line)
                if line.startswith(prefix):
                    return line
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no line {prefix!r} from the child in {timeout:g} s; it said {self.lines[-10:]}")
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                continue
            data = os.read(fd, 65536)
            if not data:
                raise AssertionError(f"the child ended ({self.proc.wait()}) before {prefix!r}; it said {self.lines[-10:]}")
            self._buf += data

    def ask(self, command: str, answer: str, timeout: float = 30.0) -> dict[str, str]:
        """Send a command; its answer line ("answer k=v ...") as a dict."""
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return fields(self.wait_line(answer + " ", timeout))

    def close(self) -> None:
        stop(self.proc)


def fields(line: str) -> dict[str, str]:
    return dict(w.split("=", 1) for w in line.split()[1:] if "=" in w)


def rss(pid: int) -> int:
    """Resident bytes of a process."""
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
