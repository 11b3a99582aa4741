"""The env's control-loop timing (`envs.env.RobotEnv` owns the 10 Hz loop): one period per step, either simulated
by the robot (the twin: `robot.wait(period)`) or in real time (hardware: the robot lets the rest of the period pass,
then a sleep to the deadline, measuring how late each deadline was: jitter), and the step / wait / reset time
statistics `RobotEnv.timing_stats()` reports.

Usage::

    clock = ControlClock(robot, cfg)        # cfg: envs.env_config.RobotEnvConfig (control_hz, realtime, ...)
    clock.start()                           # after a reset: the first deadline is one period from now
    jitter_s = clock.wait_period()          # 0.0 unless realtime
    clock.record_step(step_s, wait_s); clock.record_reset(reset_s)
    clock.stats()["step_ms_p50"]
"""

from __future__ import annotations

import collections
import time
from typing import Any

import numpy as np

from envs.env_config import RobotEnvConfig
from envs.robot import Robot


class ControlClock:
    """Deadlines, jitter and timing statistics of one env's control loop (see the module docstring)."""

    def __init__(self, robot: Robot, config: RobotEnvConfig) -> None:
        self.robot, self.config = robot, config
        self._deadline = 0.0
        self._step_s: collections.deque[float] = collections.deque(maxlen=config.timing_window)
        self._wait_s: collections.deque[float] = collections.deque(maxlen=config.timing_window)
        self._jitter_s: collections.deque[float] = collections.deque(maxlen=config.timing_window)
        self._overruns = 0
        self._reset_s: collections.deque[float] = collections.deque(maxlen=1000)

    def start(self) -> None:
        """The first step's deadline: one period from now (called at the end of a reset)."""
        self._deadline = time.perf_counter() + self.config.period_s

    def wait_period(self) -> float:
        """Let one control period pass; returns how late the deadline was met (realtime), else 0."""
        cfg = self.config
        if not cfg.realtime:
            self.robot.wait(cfg.period_s)
            return 0.0
        remaining = self._deadline - time.perf_counter()
        if remaining > 0:
            self.robot.wait(remaining)
        sleep_until(self._deadline)
        now = time.perf_counter()
        late = now - self._deadline
        self._jitter_s.append(late)
        if late > cfg.period_s:  # missed a whole period: resynchronise instead of bursting to catch up
            self._overruns += 1
            self._deadline = now + cfg.period_s
        else:
            self._deadline += cfg.period_s
        return late

    def record_step(self, step_s: float, wait_s: float) -> None:
        """One step's wall time and the part of it spent waiting for the period (s)."""
        self._step_s.append(step_s)
        self._wait_s.append(wait_s)

    def record_reset(self, reset_s: float) -> None:
        """One reset's wall time (s)."""
        self._reset_s.append(reset_s)

    def stats(self) -> dict[str, Any]:
        """Wall time per step (ms; mean/p50/p99 over the last `timing_window` steps), the share spent
        waiting for the period (`robot.wait` + sleep), jitter p50/p99/max (realtime only), overruns, and
        reset time."""
        step_ms = 1e3 * np.asarray(self._step_s) if self._step_s else np.zeros(1)
        wait_ms = 1e3 * np.asarray(self._wait_s) if self._wait_s else np.zeros(1)
        out: dict[str, Any] = {
            "steps": len(self._step_s),
            "realtime": self.config.realtime,
            "period_ms": 1e3 * self.config.period_s,
            "step_ms_mean": float(step_ms.mean()),
            "step_ms_p50": float(np.percentile(step_ms, 50)),
            "step_ms_p99": float(np.percentile(step_ms, 99)),
            "wait_ms_mean": float(wait_ms.mean()),
            "steps_per_s": float(1e3 / step_ms.mean()) if step_ms.mean() > 0 else 0.0,
            "reset_ms_mean": float(1e3 * np.mean(self._reset_s)) if self._reset_s else 0.0,
        }
        if self.config.realtime:
            jit = 1e3 * np.asarray(self._jitter_s) if self._jitter_s else np.zeros(1)
            out.update(jitter_ms_p50=float(np.percentile(jit, 50)), jitter_ms_p99=float(np.percentile(jit, 99)),
                       jitter_ms_max=float(jit.max()), overruns=self._overruns)
        return out


def sleep_until(deadline: float) -> None:
    """Sleep to `deadline` (perf_counter seconds): coarse sleep, then a short spin for the last ~1 ms."""
    while True:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return
        if remaining > 0.002:
            time.sleep(remaining - 0.001)
        else:
            time.sleep(0)
