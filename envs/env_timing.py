"""The env's control-loop timing (`envs.env.RobotEnv` owns the 10 Hz loop): one period per step, either simulated
by the robot (the twin: `robot.wait(period)`) or in real time (hardware: the robot lets the rest of the period pass,
then a sleep to the deadline, measuring how late each deadline was: jitter), and the step / wait / reset time
statistics `RobotEnv.timing_stats()` reports; and `SimulatedTiming`, the twin's simulated hardware timing (camera
latency and action delay, `RobotEnvConfig.camera_latency_ms` / `action_delay_ms`).

Usage::

    clock = ControlClock(robot, cfg)        # cfg: envs.env_config.RobotEnvConfig (control_hz, realtime, ...)
    clock.start()                           # after a reset: the first deadline is one period from now
    jitter_s = clock.wait_period()          # 0.0 unless realtime
    clock.record_step(step_s, wait_s); clock.record_reset(reset_s)
    clock.stats()["step_ms_p50"]

    timing = SimulatedTiming(cfg)           # cfg.camera_latency_ms / action_delay_ms > 0 (the twin only)
    timing.reset(cameras.read)              # after a reset: pending commands dropped, history = the reset frame
    err = timing.period(robot, (pos, quat, gripper), cameras.read)  # one control period; RobotError or None
    timing.frames()                         # the frames rendered camera_latency_ms before now

How: a delay D = n periods + r (0 <= r < period). The action delay queues each step's target and sends the one from
n steps ago r into the period; the camera latency renders once per period, r before its end, and returns the frame
from n periods ago. Each period still renders once and simulates exactly one period (`robot.wait` in pieces).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from envs.env_config import RobotEnvConfig
from envs.robot import Robot
from robot_rl.errors import RobotError

Command = tuple[np.ndarray, np.ndarray, float]
"""One robot target: position (3,), quaternion wxyz (4,), gripper command."""
Frames = dict[str, np.ndarray]


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


def split_delay(delay_ms: float, period_s: float) -> tuple[int, float]:
    """(whole control periods, remainder in s) of a delay: delay = n * period + r with 0 <= r < period (a remainder
    within a microsecond of 0 or of a period is rounded away, so 100 ms at 10 Hz is exactly one period)."""
    n, r_ms = divmod(float(delay_ms), 1e3 * period_s)
    if r_ms < 1e-3:
        r_ms = 0.0
    elif 1e3 * period_s - r_ms < 1e-3:
        n, r_ms = n + 1, 0.0
    return int(n), r_ms / 1e3


class SimulatedTiming:
    """The twin's simulated camera latency and action delay (see the module docstring). Not for hardware: real
    cameras and arms bring their own (RobotEnvConfig refuses both with `realtime`)."""

    def __init__(self, config: RobotEnvConfig) -> None:
        self.period_s = config.period_s
        self.frame_lag_steps, cam_rem_s = split_delay(config.camera_latency_ms, self.period_s)
        self.command_lag_steps, self.command_at_s = split_delay(config.action_delay_ms, self.period_s)
        self.capture_at_s = self.period_s - cam_rem_s
        """Offset into each period at which the camera frame is rendered (the period's end without a remainder)."""
        self._frames: collections.deque[Frames] = collections.deque(maxlen=self.frame_lag_steps + 1)
        self._commands: collections.deque[Command] = collections.deque()

    def reset(self, read: Callable[[], Frames] | None) -> None:
        """After an env reset: drop the commands still queued (the reset moved the arm; it holds the reset target)
        and fill the frame history with a frame rendered now (the arm has settled, so older frames would show the
        same; `read` None: no cameras)."""
        self._commands.clear()
        self._frames.clear()
        if read is not None:
            frame = read()
            self._frames.extend([frame] * (self.frame_lag_steps + 1))

    def period(self, robot: Robot, command: Command, read: Callable[[], Frames] | None) -> RobotError | None:
        """One control period: queue `command`, send the one due (`command_lag_steps` old) `command_at_s` into the
        period, render with `read` at `capture_at_s`, simulate the rest. A RobotError from `robot.command` (a reflex
        since the last step) is returned at once, the rest of the period not simulated (as the undelayed env)."""
        self._commands.append(command)
        events = sorted([(self.command_at_s, 0), (self.capture_at_s, 1)])
        t = 0.0
        for at, what in events:
            if at > t:
                robot.wait(at - t)
                t = at
            if what == 0:
                if len(self._commands) > self.command_lag_steps:
                    pos, quat, gripper = self._commands.popleft()
                    try:
                        robot.command(pos, quat, gripper)
                    except RobotError as err:
                        return err
            elif read is not None:
                self._frames.append(read())
        if self.period_s > t:
            robot.wait(self.period_s - t)
        return None

    def frames(self) -> Frames:
        """The frames rendered `camera_latency_ms` before the end of the latest period (or the reset's): copies, so
        no two observations share an array (the history may hand out one frame several times)."""
        if not self._frames:
            raise RobotError("SimulatedTiming.frames(): no frame yet (reset with cameras first)")
        return {name: img.copy() for name, img in self._frames[0].items()}

    @property
    def pending_commands(self) -> int:
        """Commands queued and not yet sent to the robot."""
        return len(self._commands)
