"""The robot server's guard on FrankyRobot, per state, against franky-sim with a table (tests/franky_sim_table.py
reports the table's push as the external wrench estimate, through the libfranka protocol): the arm is commanded 1 cm
into the table and nothing calls the guard afterwards (no state(), wait() or tick(): no polling). The guard trips at
the first state whose force exceeds its limit, records it, and the arm holds:

- with franky's force-limit reaction (the guard hands its limit to FrankyRobot.set_force_limit): franky holds the
  pose inside libfranka's loop and reports the state that fired;
- without it (a backend offering add_state_listener only): the guard checks every state of the tracker's loop and
  re-targets the measured pose from franky's callback thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from franky_faults import FrankySim, require_franky

from robot_rl.errors import RobotError

pytestmark = [pytest.mark.slow]

TABLE_TOP_Z_M = 0.40
LIMIT_N = 30.0


@pytest.fixture(scope="module")
def sim() -> Iterator[FrankySim]:
    require_franky()
    s = FrankySim.start(table_top_z=TABLE_TOP_Z_M)
    try:
        yield s
    finally:
        s.close()


class _ListenerOnly:
    """A FrankyRobot seen without set_force_limit: the guard's per-state checks alone."""

    def __init__(self, robot: Any) -> None:
        self._robot = robot

    def __getattr__(self, name: str) -> Any:
        if name == "set_force_limit":
            raise AttributeError(name)
        return getattr(self._robot, name)


def _robot_time(robot: Any) -> float:
    return float(robot.franky_robot.state.time.to_sec())


def _sleep_robot_time(robot: Any, duration_s: float, until: Callable[[], bool] = lambda: False) -> None:
    """Sleep (touching nothing but franky's state) until `duration_s` of the robot's clock has passed or `until()`;
    franky-sim's clock falls behind the wall clock on a loaded machine, the wall clock caps at 120 s."""
    t_end, wall_end = _robot_time(robot) + duration_s, time.monotonic() + 120.0
    while _robot_time(robot) < t_end and time.monotonic() < wall_end and not until():
        time.sleep(0.01)


def _push(sim: FrankySim, reaction: bool) -> tuple[Any, Any, list[tuple[float, float]]]:
    from envs.hardware.franky_robot import FrankyRobot, FrankyRobotConfig
    from envs.robot_server.safety import SafetyGuard, ServerSafetyConfig

    robot = FrankyRobot(FrankyRobotConfig(robot_ip=sim.ip, gripper=False))
    seen: list[tuple[float, float]] = []  # (robot time, |F|) of every state of the tracker's loop
    robot.add_state_listener(lambda s: seen.append((s.time_s, float(np.linalg.norm(s.force_ee_n)))))
    guard = SafetyGuard(robot if reaction else _ListenerOnly(robot), ServerSafetyConfig(max_force_n=LIMIT_N))
    s = guard.state()
    guard.command(np.array([s.pos_base_ee[0], s.pos_base_ee[1], TABLE_TOP_Z_M - 0.01]), s.quat_base_ee, 0.0)
    _sleep_robot_time(robot, 4.0, until=lambda: guard.trip_time_s is not None)
    _sleep_robot_time(robot, 0.05)  # the states up to the trip have reached the recorder
    return robot, guard, seen


def _assert_tripped_at_the_first_state_above_the_limit(guard: Any, seen: list[tuple[float, float]]) -> None:
    assert guard.trip_time_s is not None, f"no trip; largest force seen {max(f for _, f in seen):.1f} N"
    assert guard.stats()["trips"] == 1 and guard.stats()["tripped"].startswith("external force")
    before = [f for t, f in seen if t < guard.trip_time_s - 1e-9]
    assert before and max(before) <= LIMIT_N  # no earlier state was above the limit (every state was checked)
    assert guard.checked_samples >= len(before)


def _assert_holds(robot: Any, guard: Any) -> np.ndarray:
    z0 = float(robot.franky_robot.state.O_T_EE.translation[2])
    _sleep_robot_time(robot, 1.0)
    s = guard.state()
    assert abs(s.pos_base_ee[2] - z0) < 0.002  # held (the target was 1 cm into the table)
    assert np.linalg.norm(s.force_ee_n) < LIMIT_N  # the push relaxed under the held pose
    assert "safety stop: external force" in s.error
    with pytest.raises(RobotError, match="safety stop"):
        guard.command(s.pos_base_ee, s.quat_base_ee, 0.0)
    return s.pos_base_ee


def _resume(robot: Any, guard: Any) -> None:
    guard.clear_errors()
    assert robot.tracking and guard.state().error == ""
    s = guard.state()
    up = s.pos_base_ee + np.array([0.0, 0.0, 0.05])
    guard.command(up, s.quat_base_ee, 0.0)
    _sleep_robot_time(robot, 2.0)
    assert abs(guard.state().pos_base_ee[2] - up[2]) < 0.005  # moves again


def test_frankys_reaction_holds_at_the_first_state_above_the_force_limit(sim: FrankySim) -> None:
    robot, guard, seen = _push(sim, reaction=True)
    try:
        _assert_tripped_at_the_first_state_above_the_limit(guard, seen)
        assert "force-limit reaction" in robot._held and not robot.tracking  # held by franky, not by a command
        _assert_holds(robot, guard)
        _resume(robot, guard)
    finally:
        guard.stop()


def test_the_per_state_listener_trips_and_holds_without_a_reaction(sim: FrankySim) -> None:
    robot, guard, seen = _push(sim, reaction=False)
    try:
        _assert_tripped_at_the_first_state_above_the_limit(guard, seen)
        assert robot._held == "" and robot.tracking  # held by the guard's re-target
        _assert_holds(robot, guard)
        _resume(robot, guard)
    finally:
        guard.stop()
