"""Test helpers for the libfranka backend: start `franky-sim` (its own virtualenv, scripts/dev.sh) as a subprocess,
and a fault-injecting wrapper around the franky robot object (franky-sim never raises robot errors and reports a
zero external wrench).

Usage::

    with FrankySim.start() as sim:                       # skips (fails under CI=true) without franky-sim
        faulty = {}
        robot = FrankyRobot(FrankyRobotConfig(robot_ip=sim.ip),
                            robot_factory=lambda ip, rt: faulty.setdefault("r", FaultyFrankyRobot(ip, rt)))
        faulty["r"].inject_reflex()                      # the running motion is preempted, errors reported
        faulty["r"].fail_recovery = True                 # recover_from_errors() returns False
        faulty["r"].wrench = np.array([0, 0, 40.0, 0, 0, 0])   # O_F_ext_hat_K as the robot would report it
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def franky_sim_executable() -> str | None:
    """franky-sim from $ROBOT_RL_FRANKY_SIM, the repo's .venv-franky-sim, or PATH."""
    env = os.environ.get("ROBOT_RL_FRANKY_SIM")
    if env:
        return env
    local = ROOT / ".venv-franky-sim" / "bin" / "franky-sim"
    if local.exists():
        return str(local)
    return shutil.which("franky-sim")


def require_franky() -> Any:
    """franky (franky-control, in the dev extra) or skip; under CI=true a missing package fails."""
    try:
        import franky
    except ImportError as err:
        if os.environ.get("CI"):
            pytest.fail(f"franky-control is not installed in CI ({err}); scripts/dev.sh installs the dev extra")
        pytest.skip(f"franky-control is not installed ({err})")
    return franky


def _die_with_parent() -> None:
    """In the child: get SIGTERM when the test process dies (even by a crash), so no simulator outlives it."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except OSError:
        pass


class FrankySim:
    """A `franky-sim -s mujoco` subprocess; `ip` is the loopback address it serves (it picks a free one)."""

    def __init__(self, proc: subprocess.Popen[bytes], ip: str, startup_s: float, log_path: str) -> None:
        self.proc, self.ip, self.startup_s, self.log_path = proc, ip, startup_s, log_path

    @classmethod
    def start(cls, timeout_s: float = 90.0, table_top_z: float | None = None) -> FrankySim:
        """`table_top_z` (m): franky-sim with a table whose push the robot reports (tests/franky_sim_table.py, run
        by the Python beside franky-sim) instead of the plain `franky-sim -s mujoco`."""
        exe = franky_sim_executable()
        if exe is None:
            if os.environ.get("CI"):
                pytest.fail("franky-sim not found: scripts/dev.sh setup creates .venv-franky-sim")
            pytest.skip("franky-sim not installed (bash scripts/dev.sh setup creates .venv-franky-sim)")
        argv = [exe, "-s", "mujoco"]
        if table_top_z is not None:
            python = Path(exe).with_name("python")
            if not python.exists():
                pytest.skip(f"no Python beside {exe} to run tests/franky_sim_table.py")
            argv = [str(python), str(ROOT / "tests" / "franky_sim_table.py"), "--table-top-z", str(table_top_z)]
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env["MUJOCO_GL"] = "egl"
        # its output goes to a file (no pipe to drain: no extra Python thread in the test process)
        log = tempfile.NamedTemporaryFile("w+", prefix="franky-sim-", suffix=".log", delete=False)
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, preexec_fn=_die_with_parent)
        text = ""
        while time.monotonic() - t0 < timeout_s and proc.poll() is None:
            text = Path(log.name).read_text()
            m = re.search(r"using '([0-9.]+)' as the robot IP", text)
            if m:
                return cls(proc, m.group(1), time.monotonic() - t0, log.name)
            time.sleep(0.05)
        proc.kill()
        proc.wait(5)
        raise RuntimeError("franky-sim did not start:\n" + Path(log.name).read_text()[-3000:])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        Path(self.log_path).unlink(missing_ok=True)

    def __enter__(self) -> FrankySim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _State:
    """A franky RobotState with some fields replaced (everything else read from the real one)."""

    def __init__(self, real: Any, overrides: dict[str, Any]) -> None:
        self._real, self._overrides = real, overrides

    def __getattr__(self, name: str) -> Any:
        if name in self._overrides:
            return self._overrides[name]
        return getattr(self._real, name)


class FaultyFrankyRobot:
    """Wraps franky.Robot: everything is the real robot's, except the faults injected.

    - `inject_reflex(name)`: the robot stops the running motion (the real `stop()`, which preempts it, as a reflex
      does) and reports `name` in `current_errors` until `recover_from_errors()` succeeds.
    - `fail_recovery`: `recover_from_errors()` returns False (and the error stays).
    - `wrench`: the external wrench estimate O_F_ext_hat_K (6,) the robot reports (None: the real one).
    """

    def __init__(self, ip: str, realtime_config: Any) -> None:
        import franky

        self._real = franky.Robot(ip, realtime_config=realtime_config)
        self.errors = ""
        self.fail_recovery = False
        self.wrench: np.ndarray | None = None
        self.recoveries = 0

    def release(self) -> None:
        """Drop the real robot (its connection closes once nothing else holds it). franky-sim serves one client at
        a time, and a failed test's traceback keeps this wrapper alive: without this, the next connection waits
        in franky-sim's backlog forever."""
        object.__setattr__(self, "_real", None)

    def inject_reflex(self, name: str = "cartesian_reflex") -> None:
        self.errors = f"[{name}]"
        try:
            self._real.stop()
        except Exception:
            pass

    def recover_from_errors(self) -> bool:
        self.recoveries += 1
        if self.fail_recovery:
            return False
        self.errors = ""
        return bool(self._real.recover_from_errors())

    @property
    def state(self) -> Any:
        overrides: dict[str, Any] = {}
        if self.errors:
            overrides["current_errors"] = self.errors
        if self.wrench is not None:
            overrides["O_F_ext_hat_K"] = np.asarray(self.wrench, np.float64)
        real = self._real.state
        return _State(real, overrides) if overrides else real

    @property
    def is_in_control(self) -> bool:
        return bool(self._real.is_in_control)

    def move(self, motion: Any, *args: Any, **kwargs: Any) -> Any:
        if self.errors:
            import franky

            raise franky.ControlException(f"the robot is in a reflex ({self.errors})")
        return self._real.move(motion, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_") or name in ("errors", "fail_recovery", "wrench", "recoveries"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._real, name, value)
