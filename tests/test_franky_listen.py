"""The guard's per-state hooks on FrankyRobot (envs.hardware.franky_listen.StateTap) and the guard's side of them
(SafetyGuard with a backend offering add_state_listener and set_force_limit), without franky: a stand-in franky
module records what the tap attaches and evaluates the reaction's condition as franky would (tests/test_franky_guard.py
runs the real thing against franky-sim).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from envs.hardware.franky_listen import StateTap, state_sample
from envs.robot import StateSample
from robot_rl.errors import RobotError


class _Measure:
    """franky.Measure's arithmetic, as a function of the force (3,) it will be evaluated on."""

    def __init__(self, fn: Callable[[np.ndarray], float]) -> None:
        self.fn = fn

    def __pow__(self, p: float) -> _Measure:
        return _Measure(lambda f: self.fn(f) ** p)

    def __add__(self, other: _Measure) -> _Measure:
        return _Measure(lambda f: self.fn(f) + other.fn(f))

    def __gt__(self, v: float) -> Callable[[np.ndarray], bool]:  # a franky.Condition
        return lambda f: self.fn(f) > v


class _FakeFranky:
    class Measure:
        FORCE_X = _Measure(lambda f: float(f[0]))
        FORCE_Y = _Measure(lambda f: float(f[1]))
        FORCE_Z = _Measure(lambda f: float(f[2]))

    class CartesianImpedanceTrackingMotion:
        def __init__(self, **kwargs: Any) -> None:
            self.kwargs, self.gains = kwargs, type("Gains", (), {"damping": None})()

        def get_gains(self) -> Any:
            return self.gains

        def set_gains(self, gains: Any) -> None:
            self.gains = gains

    class TorqueReaction:
        def __init__(self, condition: Callable[[np.ndarray], bool], motion: Any) -> None:
            self.condition, self.motion, self.callbacks = condition, motion, []

        def register_callback(self, cb: Callable[..., None]) -> None:
            self.callbacks.append(cb)


class _Motion:
    def __init__(self) -> None:
        self.step_callbacks: list[Callable[..., None]] = []
        self.reactions: list[Any] = []

    def register_callback(self, cb: Callable[..., None]) -> None:
        self.step_callbacks.append(cb)

    def add_reaction(self, reaction: Any) -> None:
        self.reactions.append(reaction)


class _Tracker:
    def __init__(self) -> None:
        self.motion = _Motion()


class _Affine:
    def __init__(self, R: np.ndarray) -> None:
        self.matrix = np.eye(4)
        self.matrix[:3, :3] = R


class _Time:
    def __init__(self, s: float) -> None:
        self.s = s

    def to_sec(self) -> float:
        return self.s


def _franky_state(t: float, force_base: tuple[float, float, float], R: np.ndarray | None = None) -> Any:
    R = np.eye(3) if R is None else R
    return type("State", (), {"time": _Time(t), "q": np.zeros(7), "dq": np.zeros(7), "O_T_EE": _Affine(R),
                              "O_F_ext_hat_K": np.array([*force_base, 0.0, 0.0, 1.0])})()


def test_state_sample_rotates_the_wrench_into_the_tcp_frame() -> None:
    R = np.array([[1.0, 0, 0], [0, -1, 0], [0, 0, -1]])  # gripper down: TCP z = base -z
    s = state_sample(_franky_state(1.25, (3.0, 4.0, 12.0), R))
    assert s.time_s == 1.25
    np.testing.assert_allclose(s.force_ee_n, [3.0, -4.0, -12.0])
    np.testing.assert_allclose(s.torque_ee_nm, [0.0, 0.0, -1.0])


def test_the_reaction_holds_above_the_force_norm_and_reports_the_state_once_per_motion() -> None:
    holds: list[tuple[int, str]] = []
    samples: list[StateSample] = []
    tap = StateTap(_FakeFranky, on_hold=lambda g, why: holds.append((g, why)))
    tracker = _Tracker()
    tap.attach(tracker, {"translational_stiffness": 2000.0}, np.arange(6.0))
    assert tracker.motion.step_callbacks == [] and tracker.motion.reactions == []  # nothing asked for yet
    tap.add_listener(samples.append)
    tap.max_force_n = 13.0
    tap.attach(tracker, {"translational_stiffness": 2000.0}, np.arange(6.0))
    tap.attach(tracker, {"translational_stiffness": 2000.0}, np.arange(6.0))  # again: nothing added twice
    assert len(tracker.motion.step_callbacks) == 1 and len(tracker.motion.reactions) == 1
    reaction = tracker.motion.reactions[0]
    assert reaction.motion.kwargs == {"translational_stiffness": 2000.0}  # the hold: the tracker's gains
    np.testing.assert_allclose(np.diag(reaction.motion.gains.damping), np.arange(6.0))
    assert not reaction.condition(np.array([3.0, 4.0, 12.0]))  # |F| = 13 N: not above
    assert reaction.condition(np.array([3.0, 4.0, 12.01]))
    assert reaction.condition(np.array([0.0, -13.5, 0.0]))  # the norm, whatever the sign or axis

    tracker.motion.step_callbacks[0](_franky_state(0.5, (1.0, 0.0, 0.0)), None, None, None, None)
    reaction.callbacks[0](_franky_state(0.6, (0.0, 0.0, 20.0)), None, None)
    assert [s.time_s for s in samples] == [0.5, 0.6]  # every state, then the one that fired the reaction
    assert holds == [(tap.generation, holds[0][1])] and "20.0 N > 13.0 N" in holds[0][1]

    newer = _Tracker()
    tap.attach(newer, {}, np.zeros(6))  # a new tracker: a new generation, hooked again
    assert tap.generation == 2 and len(newer.motion.reactions) == 1 and len(newer.motion.step_callbacks) == 1
    reaction.callbacks[0](_franky_state(0.7, (0.0, 0.0, 20.0)), None, None)  # the old motion's, late
    assert holds[-1][0] == 1 != tap.generation  # reported with its own generation: FrankyRobot ignores it


class _Backend:
    """A Robot offering both hooks; its command is refused while 'held' (as FrankyRobot after the reaction)."""

    arm = "fr3"

    def __init__(self) -> None:
        self.listeners: list[Callable[[StateSample], None]] = []
        self.force_limit: float | None = None
        self.held = False
        self.commands = 0

    def add_state_listener(self, cb: Callable[[StateSample], None]) -> None:
        self.listeners.append(cb)

    def set_force_limit(self, max_force_n: float) -> None:
        self.force_limit = max_force_n

    def state(self) -> Any:
        from envs.robot import RobotState

        z3, z7 = np.zeros(3), np.zeros(7)
        return RobotState(0.0, z7, z7, np.array([0.5, 0, 0.4]), np.array([0.0, 1, 0, 0]), np.zeros(6), 0.08, z3, z3,
                          z7)

    def command(self, pos: Any, quat: Any, g: float) -> None:
        if self.held:
            raise RobotError("held by the force-limit reaction")
        self.commands += 1


def _sample(t: float, fz: float) -> StateSample:
    q = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
    return StateSample(t, q, np.zeros(7), np.array([0.0, 0.0, fz]), np.zeros(3))


def test_the_guard_hands_its_force_limit_to_the_backend_and_trips_once_from_its_states() -> None:
    from envs.robot_server.safety import SafetyGuard, ServerSafetyConfig

    backend = _Backend()
    guard = SafetyGuard(backend, ServerSafetyConfig(max_force_n=25.0))  # type: ignore[arg-type]
    assert backend.force_limit == 25.0 and len(backend.listeners) == 1
    (listener,) = backend.listeners
    listener(_sample(0.100, 24.0))
    assert guard.stats()["trips"] == 0
    backend.held = True  # the reaction fired and holds; its state reaches the guard
    listener(_sample(0.101, 31.0))
    listener(_sample(0.101, 31.0))  # a per-state copy of the same state: no second trip
    assert guard.stats()["trips"] == 1 and guard.stats()["tripped"] == "external force 31.0 N > 25.0 N"
    assert guard.trip_time_s == pytest.approx(0.101) and backend.commands == 0  # the refused hold is no error
    assert guard.checked_samples == 3


def test_a_disabled_guard_sets_no_force_limit() -> None:
    from envs.robot_server.safety import SafetyGuard, ServerSafetyConfig

    backend = _Backend()
    SafetyGuard(backend, ServerSafetyConfig(enabled=False))  # type: ignore[arg-type]
    assert backend.force_limit is None and backend.listeners == []
