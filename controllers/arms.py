"""Which Franka arm: joint position and velocity limits of the Panda (Franka Emika Robot, FER) and the Franka
Research 3, and how a backend tells which one it is connected to.

The figures are Franka's published limits ("Robot and interface specifications": Panda q_min / q_max / dq_max;
FR3 likewise); the FR3's joints 1, 4, 6 and 7 have narrower or shifted position ranges and faster wrist joints.
"any" is the intersection of both (position ranges and velocities the tighter of the two): the safe choice when a
backend cannot tell which arm it drives.

Which arm a libfranka connects to: a Panda runs libfranka < 0.10, an FR3 needs >= 0.10 (Franka's compatibility
matrix); franky-control's PyPI wheels bundle libfranka 0.21.2, so a connection made with them is an FR3.

Usage::

    limits = arm_limits("fr3")                  # ArmLimits(name='fr3', q_min_rad=(...), ...)
    arm_for_libfranka("0.9.2")                  # 'panda'
    arm_for_joint_names(["fr3_joint1", ...])    # 'fr3' (franka_ros2's names), None when the names say nothing
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from typing import Any

from controllers.kinematics import PANDA_DQ_MAX, PANDA_Q_MAX, PANDA_Q_MIN
from robot_rl.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class ArmLimits:
    """One arm model's joint limits, each shape (7,)."""

    name: str
    q_min_rad: tuple[float, ...]
    q_max_rad: tuple[float, ...]
    dq_max_rad_per_s: tuple[float, ...]


PANDA = ArmLimits("panda", PANDA_Q_MIN, PANDA_Q_MAX, PANDA_DQ_MAX)
FR3 = ArmLimits("fr3",
                q_min_rad=(-2.7437, -1.7837, -2.9007, -3.0421, -2.8065, 0.5445, -3.0159),
                q_max_rad=(2.7437, 1.7837, 2.9007, -0.1518, 2.8065, 4.5169, 3.0159),
                dq_max_rad_per_s=(2.62, 2.62, 2.62, 2.62, 5.26, 4.18, 5.26))
ANY = ArmLimits("any",
                q_min_rad=tuple(max(a, b) for a, b in zip(PANDA.q_min_rad, FR3.q_min_rad, strict=True)),
                q_max_rad=tuple(min(a, b) for a, b in zip(PANDA.q_max_rad, FR3.q_max_rad, strict=True)),
                dq_max_rad_per_s=tuple(min(a, b) for a, b in zip(PANDA.dq_max_rad_per_s, FR3.dq_max_rad_per_s,
                                                                  strict=True)))
ARMS: dict[str, ArmLimits] = {a.name: a for a in (PANDA, FR3, ANY)}
"""The arm names a flag or a config takes."""


def arm_limits(name: str) -> ArmLimits:
    """The limits of arm `name` ('panda', 'fr3' or 'any'); ConfigError naming the choices otherwise."""
    if name not in ARMS:
        raise ConfigError(f"arm={name!r} is unknown; known: {sorted(ARMS)} ('any': the tighter limits of both)")
    return ARMS[name]


def arm_for_libfranka(version: str) -> str:
    """The arm a libfranka of `version` ('0.21.2') can connect to: 'panda' below 0.10, 'fr3' from 0.10, 'any'
    for a version that cannot be read."""
    m = re.match(r"^(\d+)\.(\d+)", version.strip())
    if m is None:
        return "any"
    return "panda" if (int(m.group(1)), int(m.group(2))) < (0, 10) else "fr3"


def arm_for_joint_names(names: Sequence[str]) -> str | None:
    """'fr3' or 'panda' when every joint name starts with that prefix (franka_ros2 names FR3 joints fr3_joint1..7,
    a Panda's panda_joint1..7); None when the names do not say."""
    for arm in ("fr3", "panda"):
        if names and all(str(n).startswith(f"{arm}_") for n in names):
            return arm
    return None


COLLISION_THRESHOLD_COUNTS: dict[str, int] = {"collision_torque_nm": 7, "collision_force_n": 6}
"""libfranka's collision thresholds, as a config names them: 7 joint torques (Nm); fx fy fz (N), tx ty tz (Nm)."""


def collision_values_ok(values: Any, n: int) -> bool:
    """Whether `values` is a tuple or list of `n` finite numbers > 0 (one set of collision thresholds)."""
    return (isinstance(values, tuple | list) and len(values) == n
            and all(isinstance(x, int | float) and 0 < x < math.inf for x in values))
