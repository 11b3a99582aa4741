"""One supervised child process: `ChildSpec` says what to run and how to treat it, `Child` runs it.

A child runs in its own process group (a Ctrl-C at the terminal reaches only the supervisor, which then stops its
children in order), with stdin closed and stdout + stderr copied line by line into its log file and into a queue
that `wait_for_line` reads (e.g. for the address a server prints when it is ready). On Linux a child also gets
SIGTERM when the thread that started it dies (PR_SET_PDEATHSIG), so even a SIGKILLed supervisor leaves no
orphans: start children from one long-lived thread (the main thread).

Usage::

    spec = ChildSpec("server", (sys.executable, "-m", "robot_rl.cli", "robot-server", ...), Path("logs/server.log"),
                     restart="on-failure", max_restarts=3, stop_order=2, grace_s=10.0)
    child = Child(spec)
    child.start(env=dict(os.environ))
    address = child.wait_for_line(re.compile(r"serving .* on (tcp://\\S+)"), 60.0, stop_event).group(1)
    child.stop()                     # SIGTERM to its group, SIGKILL after spec.grace_s; returns the exit code
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

from robot_rl.config import Config, require
from robot_rl.errors import RobotRLError

RESTART_POLICIES = ("never", "on-failure", "always")
"""never: an exit is reported; on-failure: restart after a non-zero exit code; always: restart after any exit."""
_PR_SET_PDEATHSIG = 1


class ChildError(RobotRLError):
    """A child process failed in a way its supervisor cannot recover from (names it and its log)."""


@dataclasses.dataclass(frozen=True)
class ChildSpec(Config):
    """What to run as one child and how to supervise it."""

    name: str
    """Unique name among the supervisor's children (log lines and messages use it)."""
    argv: tuple[str, ...]
    """The command line (no shell)."""
    log_path: Path
    """File that receives the child's stdout and stderr (appended to; a header line per start)."""
    restart: str = "never"
    """One of RESTART_POLICIES: what `Supervisor.poll` does when the child exits while no stop was requested."""
    max_restarts: int = 0
    """Restarts allowed over the supervisor's lifetime (restart != "never")."""
    stop_order: int = 0
    """`Supervisor.stop` stops children in increasing stop_order (equal orders together)."""
    grace_s: float = 30.0
    """Seconds the child gets to exit after SIGTERM before its process group is SIGKILLed."""

    def validate(self) -> None:
        require(bool(self.name) and not any(c.isspace() for c in self.name), "name", self.name,
                "must be non-empty without whitespace")
        require(len(self.argv) > 0, "argv", self.argv, "must name a program")
        require(self.restart in RESTART_POLICIES, "restart", self.restart, f"must be one of {RESTART_POLICIES}")
        require(self.max_restarts >= 0, "max_restarts", self.max_restarts, "must be >= 0")
        require(self.grace_s >= 0, "grace_s", self.grace_s, "must be >= 0")


def pdeathsig_preexec() -> Callable[[], None] | None:
    """A preexec function making a child get SIGTERM when its parent thread dies (Linux), or None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)

    return preexec


def tail(path: Path, n: int = 15) -> str:
    """The last `n` lines of a log file ("" if unreadable)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


class Child:
    """One run of a `ChildSpec`: a process in its own process group, its output copied to the log file."""

    def __init__(self, spec: ChildSpec, restarts: int = 0) -> None:
        self.spec = spec
        self.restarts = int(restarts)
        """How many times this child's name was restarted before this run."""
        self.proc: subprocess.Popen[bytes] | None = None
        self.lines: queue.Queue[str] = queue.Queue()
        self.stopped = False
        self._terminated = False
        self._log: IO[bytes] | None = None
        self._reader: threading.Thread | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def log_path(self) -> Path:
        return self.spec.log_path

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self, env: Mapping[str, str] | None = None) -> None:
        """Spawn the process (new session = new process group; PDEATHSIG on Linux) and its log copier."""
        self.spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.spec.log_path, "ab")
        self._log.write(f"\n=== {time.strftime('%H:%M:%S')} {shlex.join(self.spec.argv)}\n".encode())
        self._log.flush()
        self.proc = subprocess.Popen(list(self.spec.argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=None if env is None else dict(env),
                                     start_new_session=True, preexec_fn=pdeathsig_preexec())
        self.lines = queue.Queue()
        self._reader = threading.Thread(target=self._copy, name=f"log-{self.name}", daemon=True)
        self._reader.start()

    def _copy(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None and self._log is not None
        for raw in self.proc.stdout:
            with contextlib.suppress(ValueError, OSError):
                self._log.write(raw)
                self._log.flush()
            self.lines.put(raw.decode(errors="replace"))

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def returncode(self) -> int | None:
        """The exit code, or None while it runs (or before it started)."""
        return self.proc.poll() if self.proc is not None else None

    def wait_for_line(self, pattern: re.Pattern[str], timeout_s: float, stop: threading.Event) -> re.Match[str]:
        """The first output line matching `pattern`. ChildError if the child exits or `timeout_s` passes first;
        KeyboardInterrupt if `stop` is set meanwhile."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not stop.is_set():
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if not self.alive():
                    break
                continue
            m = pattern.search(line)
            if m:
                return m
        if stop.is_set():
            raise KeyboardInterrupt
        raise ChildError(f"{self.name} did not start (exit code {self.returncode()}); see {self.log_path}:\n"
                         f"{tail(self.log_path)}")

    def signal(self, sig: int) -> None:
        """Send `sig` to the child's process group (SIGTERM only once: a second one may cut its cleanup short)."""
        if sig == signal.SIGTERM:
            if self._terminated:
                return
            self._terminated = True
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)

    def stop(self, grace_s: float | None = None) -> int | None:
        """SIGTERM the child's process group, SIGKILL it after `grace_s` (default: the spec's); reap it, kill
        whatever is left in its group, close its log. Idempotent; returns the exit code (None if never started)."""
        if self.proc is None:
            return None
        if self.stopped:
            return self.proc.returncode
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=self.spec.grace_s if grace_s is None else grace_s)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                self.proc.wait(timeout=10.0)
        # anything left in its group (grandchildren) goes too; only now, right after reaping its leader, while
        # the group id cannot belong to anyone else
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.stopped = True
        self.close()
        with contextlib.suppress(OSError), open(self.log_path, "ab") as f:
            f.write(f"=== {time.strftime('%H:%M:%S')} exit code {self.proc.returncode}\n".encode())
        return self.proc.returncode

    def close(self) -> None:
        """Finish copying its output and close the log file (the process itself is not touched)."""
        if self._reader is not None:
            self._reader.join(timeout=2.0)
        if self._log is not None:
            self._log.close()
            self._log = None
