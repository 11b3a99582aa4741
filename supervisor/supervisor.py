"""`Supervisor`: owns a set of named child processes (supervisor.process) from start to a clean stop.

- `start(spec)` spawns a child by name; `poll()` reports children that exited since the last call and restarts
  them per their spec (restart policy, max_restarts) unless a stop was requested;
- `wait(child)` runs a child to its end (a stop request stops it and raises KeyboardInterrupt);
- `stop()` stops every child in increasing `stop_order`: each group gets SIGTERM together, then every member is
  waited for (its `grace_s`) and SIGKILLed if still there; every process group is killed at the end;
- `handle_signals()` turns SIGINT / SIGTERM into `stop_requested` (the job's loop then calls `stop()`, which is
  how the signal reaches the children, in order); a second signal raises KeyboardInterrupt.

Call it from one thread (the main thread: signal handlers and PR_SET_PDEATHSIG are tied to it).

Usage::

    sup = Supervisor(env={**os.environ, "PYTHONUNBUFFERED": "1"})
    with sup.handle_signals():
        try:
            server = sup.start(ChildSpec("server", argv, logs / "server.log", stop_order=1))
            sup.start(ChildSpec("worker", argv2, logs / "worker.log", restart="always", max_restarts=3))
            while not sup.stop_requested.is_set():
                for ex in sup.poll():
                    print(f"{ex.name} exited with code {ex.returncode}" + (" (restarted)" if ex.restarted else ""))
                sup.stop_requested.wait(1.0)
        finally:
            sup.stop()
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import signal
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import FrameType

from robot_rl.errors import ConfigError
from supervisor.process import Child, ChildSpec


@dataclasses.dataclass(frozen=True)
class ChildExit:
    """A child that exited on its own (reported once by `Supervisor.poll`)."""

    name: str
    returncode: int | None
    restarted: bool
    """A fresh process of the same spec was started in its place."""
    restarts: int
    """Restarts of this name so far (after a restart: including it)."""
    log_path: Path


class Supervisor:
    """Named children, their restarts and their ordered stop. `env`: the children's environment (None: ours)."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.env: dict[str, str] = dict(os.environ if env is None else env)
        self.stop_requested = threading.Event()
        """Set by SIGINT / SIGTERM (under handle_signals) or by request_stop()."""
        self.signals = 0
        """SIGINT / SIGTERM received under handle_signals."""
        self._children: dict[str, Child] = {}
        self._reported: set[int] = set()  # id() of children whose exit poll() has reported
        self._all: list[Child] = []       # every child ever started, replaced ones included

    # ---------------------------------------------------------------- children
    def start(self, spec: ChildSpec) -> Child:
        """Spawn `spec` (a name still running is refused; an exited one is replaced)."""
        old = self._children.get(spec.name)
        if old is not None and old.alive():
            raise ConfigError(f"a child named {spec.name!r} is already running (pid {old.pid})")
        return self._spawn(spec, restarts=old.restarts if old is not None else 0)

    def _spawn(self, spec: ChildSpec, restarts: int) -> Child:
        child = Child(spec, restarts=restarts)
        child.start(self.env)
        self._children[spec.name] = child
        self._all.append(child)
        return child

    def child(self, name: str) -> Child:
        """The current process of child `name` (KeyError if none was started)."""
        return self._children[name]

    @property
    def children(self) -> dict[str, Child]:
        """name -> current process (a restarted child's newest run)."""
        return dict(self._children)

    def poll(self) -> list[ChildExit]:
        """Children that exited since the last call, in start order. A child whose policy allows it (and no stop
        was requested) is started again, and reported with restarted=True."""
        out: list[ChildExit] = []
        for name, child in list(self._children.items()):
            if child.alive() or child.proc is None or child.stopped or id(child) in self._reported:
                continue
            self._reported.add(id(child))
            rc = child.returncode()
            spec = child.spec
            wanted = spec.restart == "always" or (spec.restart == "on-failure" and rc != 0)
            if wanted and child.restarts < spec.max_restarts and not self.stop_requested.is_set():
                child.close()
                fresh = self._spawn(spec, restarts=child.restarts + 1)
                out.append(ChildExit(name, rc, True, fresh.restarts, spec.log_path))
            else:
                out.append(ChildExit(name, rc, False, child.restarts, spec.log_path))
        return out

    def wait(self, child: Child, poll_s: float = 0.1) -> int | None:
        """Block until `child` exits; returns its exit code (its exit is not reported by poll() again, nor is it
        restarted). If a stop is requested meanwhile, the child is stopped (its grace_s) and KeyboardInterrupt
        raised."""
        self._reported.add(id(child))
        while child.alive():
            if self.stop_requested.wait(poll_s):
                child.stop()
                raise KeyboardInterrupt
        child.close()
        return child.returncode()

    def stop(self, names: Iterable[str] | None = None) -> dict[str, int | None]:
        """Stop children (default: all) in increasing stop_order: SIGTERM a whole group at once, then wait for
        each member (its grace_s) and SIGKILL its process group if it is still there. Idempotent. Returns
        name -> exit code of the current processes."""
        wanted = None if names is None else set(names)
        current = [c for n, c in self._children.items() if wanted is None or n in wanted]
        replaced = [c for c in self._all if wanted is None and c not in current]
        order = sorted(current, key=lambda c: c.spec.stop_order)
        for _, group_iter in itertools.groupby(order, key=lambda c: c.spec.stop_order):
            group = list(group_iter)
            for child in group:
                if child.alive():
                    child.signal(signal.SIGTERM)
            for child in group:
                child.stop()
        for child in replaced:  # earlier runs of restarted children: reap, kill their groups, close logs
            child.stop()
        return {c.name: c.returncode() for c in current}

    def request_stop(self) -> None:
        self.stop_requested.set()

    # ---------------------------------------------------------------- signals
    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signals += 1
        self.stop_requested.set()
        if self.signals >= 2:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def handle_signals(self) -> Iterator[None]:
        """While inside: SIGINT / SIGTERM set stop_requested (the first) or raise KeyboardInterrupt (later ones).
        The previous handlers come back on exit."""
        prev_term = signal.signal(signal.SIGTERM, self._on_signal)
        prev_int = signal.signal(signal.SIGINT, self._on_signal)
        try:
            yield
        finally:
            signal.signal(signal.SIGTERM, prev_term)
            signal.signal(signal.SIGINT, prev_int)
