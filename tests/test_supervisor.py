"""The generic process supervisor (supervisor.process, supervisor.supervisor) with tiny real child processes:
ready lines and logs, restart policies, ordered terminate-then-kill stops (process groups included), running a
child to its end, SIGTERM / SIGINT to the supervisor, and no orphans when the supervisor is SIGKILLed
(PR_SET_PDEATHSIG, Linux)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from robot_rl.errors import ConfigError
from supervisor.process import Child, ChildError, ChildSpec
from supervisor.supervisor import ChildExit, Supervisor

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
SLEEP = (PY, "-c", "import time; time.sleep(30)")


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan reaped late by init still counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_until(pred: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def _script(body: str) -> tuple[str, ...]:
    return (PY, "-c", textwrap.dedent(body))


# a child that notes "<name> term" in a file when it gets SIGTERM, then exits 0; prints "up" when ready
NOTE_ON_TERM = """
import signal, sys, time
def on_term(*_):
    with open({path!r}, "a") as f:
        f.write("{name} term\\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
print("up", flush=True)
time.sleep(60)
"""


def test_child_copies_its_output_to_the_log_and_reports_a_ready_line(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "srv.log"
    child = Child(ChildSpec("srv", _script("print('booting'); print('serving on tcp://127.0.0.1:7777', "
                                           "flush=True); import time; time.sleep(30)"), log))
    child.start()
    try:
        m = child.wait_for_line(re.compile(r"serving on (tcp://\S+)"), 20.0, threading.Event())
        assert m.group(1) == "tcp://127.0.0.1:7777"
        assert child.alive()
    finally:
        rc = child.stop(grace_s=5.0)
    assert rc == -signal.SIGTERM and not child.alive()
    text = log.read_text()
    assert "booting" in text and "serving on tcp://127.0.0.1:7777" in text and "exit code -15" in text


def test_a_child_that_exits_before_its_ready_line_is_a_child_error(tmp_path: Path) -> None:
    child = Child(ChildSpec("bad", _script("import sys; print('no such robot'); sys.exit(3)"), tmp_path / "b.log"))
    child.start()
    with pytest.raises(ChildError, match=r"bad did not start \(exit code 3\)[\s\S]*no such robot"):
        child.wait_for_line(re.compile("ready"), 20.0, threading.Event())
    child.stop()


def test_child_spec_is_validated(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="restart"):
        ChildSpec("a", SLEEP, tmp_path / "a.log", restart="sometimes")
    with pytest.raises(ConfigError, match="argv"):
        ChildSpec("a", (), tmp_path / "a.log")
    with pytest.raises(ConfigError, match="name"):
        ChildSpec("two words", SLEEP, tmp_path / "a.log")


def _poll_until_reported(sup: Supervisor, *names: str, timeout_s: float = 30.0) -> list[ChildExit]:
    """poll() until every one of `names` exited without a restart; every ChildExit seen on the way."""
    seen: list[ChildExit] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        seen += sup.poll()
        if all(any(e.name == n and not e.restarted for e in seen) for n in names):
            return seen
        time.sleep(0.05)
    raise AssertionError(f"{names} still running or restarting after {timeout_s} s: {seen}")


def test_a_failing_child_is_restarted_up_to_max_restarts_then_reported(tmp_path: Path) -> None:
    sup = Supervisor()
    log = tmp_path / "crash.log"
    sup.start(ChildSpec("crash", _script("import sys; print('crashing'); sys.exit(1)"), log, restart="on-failure",
                        max_restarts=2))
    try:
        seen = _poll_until_reported(sup, "crash")
    finally:
        sup.stop()
    assert [(e.returncode, e.restarted, e.restarts) for e in seen] == [(1, True, 1), (1, True, 2), (1, False, 2)]
    assert log.read_text().splitlines().count("crashing") == 3  # three runs, one log
    assert sup.child("crash").restarts == 2


def test_restart_policies_never_and_on_failure_after_a_clean_exit(tmp_path: Path) -> None:
    sup = Supervisor()
    sup.start(ChildSpec("once", _script("pass"), tmp_path / "once.log", restart="on-failure", max_restarts=5))
    sup.start(ChildSpec("never", _script("import sys; sys.exit(2)"), tmp_path / "never.log", max_restarts=5))
    sup.start(ChildSpec("always", _script("pass"), tmp_path / "always.log", restart="always", max_restarts=1))
    try:
        seen = _poll_until_reported(sup, "once", "never", "always")
    finally:
        sup.stop()
    by_name: dict[str, list[tuple[int | None, bool]]] = {}
    for e in seen:
        by_name.setdefault(e.name, []).append((e.returncode, e.restarted))
    assert by_name == {"once": [(0, False)], "never": [(2, False)], "always": [(0, True), (0, False)]}


def test_no_restart_after_a_stop_request(tmp_path: Path) -> None:
    sup = Supervisor()
    child = sup.start(ChildSpec("c", _script("import sys; sys.exit(1)"), tmp_path / "c.log", restart="always",
                                max_restarts=3))
    assert _wait_until(lambda: not child.alive(), 20.0)
    sup.request_stop()
    assert [(e.restarted, e.restarts) for e in sup.poll()] == [(False, 0)]
    assert sup.poll() == []  # reported once
    sup.stop()


def test_stop_goes_in_stop_order_and_kills_what_ignores_sigterm(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    grand_pid = tmp_path / "grandchild.pid"
    sup = Supervisor()
    first = sup.start(ChildSpec("first", _script(NOTE_ON_TERM.format(path=str(notes), name="first")),
                                tmp_path / "first.log", stop_order=0, grace_s=10.0))
    stubborn = sup.start(ChildSpec("stubborn", _script(
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); "
        "time.sleep(60)"), tmp_path / "stubborn.log", stop_order=0, grace_s=0.5))
    # a child with a grandchild in its process group: the group goes too
    spawn_grandchild = ("import subprocess, sys\n"
                        "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                        f"open({str(grand_pid)!r}, 'w').write(str(g.pid))\n")
    parent = sup.start(ChildSpec("parent", (PY, "-c", spawn_grandchild + NOTE_ON_TERM.format(path=str(notes),
                                                                                           name="parent")),
                                 tmp_path / "parent.log", stop_order=5, grace_s=10.0))
    stop = threading.Event()
    for c in (first, stubborn, parent):
        c.wait_for_line(re.compile("^up"), 30.0, stop)
    grandchild = int(grand_pid.read_text())
    assert _alive(grandchild)
    t0 = time.monotonic()
    codes = sup.stop()
    assert time.monotonic() - t0 < 8.0
    assert codes == {"first": 0, "stubborn": -signal.SIGKILL, "parent": 0}
    assert notes.read_text().splitlines() == ["first term", "parent term"]  # stop_order 0 before 5
    pids = [c.pid for c in (first, stubborn, parent)]
    assert _wait_until(lambda: not any(_alive(p) for p in [*pids, grandchild] if p is not None), 5.0)
    assert sup.stop() == codes  # idempotent


def test_wait_runs_a_child_to_its_end_and_a_stop_request_interrupts_it(tmp_path: Path) -> None:
    sup = Supervisor()
    job = ChildSpec("job", _script("import sys; sys.exit(4)"), tmp_path / "j.log", restart="always", max_restarts=1)
    assert sup.wait(sup.start(job)) == 4
    assert sup.poll() == []  # its end went to wait(): neither reported again nor restarted
    long = sup.start(ChildSpec("long", SLEEP, tmp_path / "l.log", grace_s=5.0))
    threading.Timer(0.3, sup.request_stop).start()
    with pytest.raises(KeyboardInterrupt):
        sup.wait(long)
    assert not long.alive() and long.returncode() == -signal.SIGTERM
    sup.start(ChildSpec("job2", SLEEP, tmp_path / "x.log"))
    with pytest.raises(ConfigError, match="already running"):
        sup.start(ChildSpec("job2", SLEEP, tmp_path / "x.log"))
    sup.stop()


# A supervisor process: two sleeping children (their pids on stdout), stops them in order on SIGINT / SIGTERM.
SUPERVISOR_SCRIPT = """
import sys
from pathlib import Path
from supervisor.process import ChildSpec
from supervisor.supervisor import Supervisor
out = Path(sys.argv[1])
sup = Supervisor()
with sup.handle_signals():
    try:
        kids = [sup.start(ChildSpec(f"k{i}", (sys.executable, "-c", "import time; time.sleep(60)"),
                                    out / f"k{i}.log", stop_order=i, grace_s=5.0)) for i in range(2)]
        print(" ".join(str(k.pid) for k in kids), flush=True)
        while not sup.stop_requested.wait(0.1):
            pass
    finally:
        codes = sup.stop()
print("stopped", sorted(codes.items()), flush=True)
"""


def _start_supervisor(tmp_path: Path) -> tuple[subprocess.Popen[str], list[int]]:
    proc = subprocess.Popen([PY, "-c", SUPERVISOR_SCRIPT, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == 2 and all(_alive(p) for p in pids)
    return proc, pids


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_supervisor_stops_every_child(tmp_path: Path, sig: int) -> None:
    proc, pids = _start_supervisor(tmp_path)
    try:
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0
    assert "stopped [('k0', -15), ('k1', -15)]" in out
    assert not any(_alive(p) for p in pids)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")
def test_no_orphans_when_the_supervisor_is_killed(tmp_path: Path) -> None:
    proc, pids = _start_supervisor(tmp_path)
    try:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        proc.kill()
    assert _wait_until(lambda: not any(_alive(p) for p in pids), 10.0), [p for p in pids if _alive(p)]
