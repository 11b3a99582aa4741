"""The robot server guard's per-state hooks on `FrankyRobot` (envs.hardware.franky_robot): franky-control 2.0 offers
two of them on the motion a `CartesianImpedanceTracker` runs (`tracker.motion`), and `StateTap` uses both.

- Every state: `motion.register_callback(cb)`. franky calls it for every control step of the motion (1 kHz), in
  order, on a callback thread of its own: libfranka's real-time thread only queues the call (lock-free), so Python
  never runs inside the 1 kHz loop. Each state becomes an envs.robot.StateSample (the wrench rotated into the TCP
  frame) for the listeners (`FrankyRobot.add_state_listener`; the guard checks force, torque, joint margins and
  speeds on it and holds by re-targeting the measured pose, from that thread).
- The force limit inside the loop: a `franky.TorqueReaction` on the motion with the condition
  FORCE_X^2 + FORCE_Y^2 + FORCE_Z^2 > limit^2 (`FrankyRobot.set_force_limit`; franky's Measure.FORCE_* are the
  external force estimate O_F_ext_hat_K, evaluated by franky in C++ in every control step). When it holds, franky
  replaces the tracker's motion in that same step by the hold: a `CartesianImpedanceTrackingMotion` with the gain
  profile's stiffness, damping and error clips and no target of its own, which holds the pose at the switch (franky
  seeds its target with the commanded pose then). The reaction's callback (franky's callback thread, afterwards)
  reports the state that fired it: to the backend, which from then on refuses commands until clear_errors() starts
  a new tracker at the held pose, and to the listeners, so the guard records the trip (reason, robot time).

Checked on franky-control 2.0.0 against franky-sim: a motion callback gets every state in order (1001 in 1 s of the
robot's clock); a callback that sleeps 5 ms per state falls behind (0.6 s of states in 3 s of wall time) while the
robot's clock runs on unaffected, so the loop does not wait for Python, and a slow listener delays every later state
(franky queues them). franky's bounded input queue drops calls when its relay thread gets no CPU (it prints 'callback
input queue overflowed'): the reaction then still holds inside the loop, but its report to the backend and the guard
may be lost (the guard's polled checks still see a force that stays above the limit).

franky's Measure offers the force and the time only: the torque, joint-margin and speed limits are checked per state
in Python (the first path), not inside the loop. libfranka's own collision reflexes stay the fastest layer.
Only the tracker's motions are hooked (not reset_joints' JointWaypointMotion, which the guard checks after the move).

Usage (FrankyRobot holds one)::

    tap = StateTap(franky, on_hold=lambda generation, why: ...)
    tap.add_listener(guard_callback)
    tap.max_force_n = 60.0
    tap.attach(tracker, hold_kwargs, damping)        # after every tracker start, and after a change above
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from envs.robot import StateSample

log = logging.getLogger("robot_rl.franky")


def state_sample(state: Any) -> StateSample:
    """A franky RobotState as the guard's StateSample: robot clock (s), q / dq (7,), the external wrench estimate
    O_F_ext_hat_K (base frame, on the stiffness frame K = the TCP) rotated into the TCP frame."""
    R = np.asarray(state.O_T_EE.matrix, np.float64)[:3, :3]
    wrench = np.asarray(state.O_F_ext_hat_K, np.float64).reshape(6)
    return StateSample(float(state.time.to_sec()), np.asarray(state.q, np.float64).copy(),
                       np.asarray(state.dq, np.float64).copy(), R.T @ wrench[:3], R.T @ wrench[3:])


class StateTap:
    """Hooks franky tracker motions for the guard (see the module docstring). `on_hold(generation, why)` is called
    (on franky's callback thread) when the force-limit reaction of the motion attached as `generation` fired."""

    def __init__(self, franky: Any, on_hold: Callable[[int, str], None]) -> None:
        self._fr = franky
        self._on_hold = on_hold
        self._listeners: tuple[Callable[[StateSample], None], ...] = ()  # replaced whole: read without a lock
        self.max_force_n: float | None = None
        """The force limit (N) of the reaction attached to the next motion (None: no reaction)."""
        self.generation = 0
        """Counts the motions attached; a reaction reports the generation of its motion."""
        self._tracker: Callable[[], Any] = lambda: None  # a weak reference (franky's C++ holds our callbacks)
        self._stepping = False
        self._reacting = False

    def add_listener(self, callback: Callable[[StateSample], None]) -> None:
        self._listeners = (*self._listeners, callback)

    def attach(self, tracker: Any, hold_kwargs: dict[str, Any], damping: np.ndarray) -> None:
        """Hook the motion of `tracker` (a running franky.CartesianImpedanceTracker): the per-state callback when
        there are listeners, the force-limit reaction when a limit is set; what this motion already has is not added
        twice. `hold_kwargs`: the CartesianImpedanceTrackingMotion keywords of the hold (the tracker's stiffness,
        clips, ...); `damping` (6,): its Cartesian damping."""
        if tracker is not self._tracker():
            self._tracker, self._stepping, self._reacting = weakref.ref(tracker), False, False
            self.generation += 1
        motion = tracker.motion
        if self._listeners and not self._stepping:
            motion.register_callback(self._on_step)
            self._stepping = True
        if self.max_force_n is not None and not self._reacting:
            fr = self._fr
            hold = fr.CartesianImpedanceTrackingMotion(**hold_kwargs)
            gains = hold.get_gains()
            gains.damping = np.diag(np.asarray(damping, np.float64))
            hold.set_gains(gains)
            f = fr.Measure
            limit = float(self.max_force_n)
            reaction = fr.TorqueReaction(f.FORCE_X ** 2 + f.FORCE_Y ** 2 + f.FORCE_Z ** 2 > limit ** 2, hold)
            generation = self.generation
            reaction.register_callback(lambda s, rel, abs_: self._on_reaction(generation, limit, s))
            motion.add_reaction(reaction)
            self._reacting = True

    def _on_step(self, state: Any, time_step: Any, rel_time: Any, abs_time: Any, torques: Any) -> None:
        listeners = self._listeners
        if listeners:
            sample = state_sample(state)
            for cb in listeners:
                cb(sample)

    def _on_reaction(self, generation: int, limit: float, state: Any) -> None:
        sample = state_sample(state)
        why = (f"franky's force-limit reaction holds the pose (external force {np.linalg.norm(sample.force_ee_n):.1f}"
               f" N > {limit:.1f} N at t = {sample.time_s:.3f} s)")
        log.warning("franky: %s", why)
        self._on_hold(generation, why)
        for cb in self._listeners:
            cb(sample)
