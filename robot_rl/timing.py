"""The twin's simulated hardware timing as the commands give it: the faithful defaults (`FAITHFUL_TIMING`) and
`timing_overrides`, which turns a command's `--camera-latency-ms` / `--action-delay-ms` into envs.env_config's
RobotEnvConfig fields. Here, not in envs, so every command's library (learners, supervisor, actors) can check and
pass the flags without importing the env package.

Usage::

    timing_overrides(True)                    # {"camera_latency_ms": 100.0, "action_delay_ms": 20.0}
    timing_overrides(False, 50.0)             # {"camera_latency_ms": 50.0, "action_delay_ms": 0.0}
"""

from __future__ import annotations

import argparse
import math

from robot_rl.config import require

MAX_SIMULATED_DELAY_MS = 2000.0
"""Upper bound of camera_latency_ms and action_delay_ms (the frame history grows with the latency)."""

FAITHFUL_TIMING: dict[str, float] = {"camera_latency_ms": 100.0, "action_delay_ms": 20.0}
"""The simulated hardware timing the hardware-faithful twin adds by default (any explicit value wins; 0 turns it
off). Camera 100 ms: a RealSense colour frame is reported 60-140 ms old when the policy gets it (Intel's own
figure, 100-140 ms on Windows and less on Linux: github.com/IntelRealSense/librealsense/issues/1242; 85-133 ms for a
D415 at 30 fps: .../librealsense/issues/4955; about 66 ms for D435/D455 colour through the ROS 2 wrapper:
github.com/IntelRealSense/realsense-ros/issues/2686); 100 ms is the middle of that range, one control period at
10 Hz. Action 20 ms: an estimate, not a measurement: policy inference on a CPU, the actor -> robot server hop and the
backend's own motion-generator hand-over before the impedance target moves. Not part of `faithful` (which is about
privileged information): timing is a separate knob (docs/twin.md, "Simulated timing")."""


def latency_steps(latency_ms: float, control_hz: float) -> int:
    """A camera latency in control periods, rounded: how many steps old a frame is (0 without a latency)."""
    return round(latency_ms / 1e3 * float(control_hz)) if latency_ms > 0 else 0


def timing_overrides(faithful: bool, camera_latency_ms: float | None = None,
                     action_delay_ms: float | None = None) -> dict[str, float]:
    """The RobotEnvConfig timing fields of a command's `--camera-latency-ms` / `--action-delay-ms` (None: the
    faithful default, FAITHFUL_TIMING, with `--faithful`, else 0); {} when both end up 0 outside the faithful mode
    (today's env, untouched). With `faithful` the fields are always given, zeros included: a faithful env fills the
    fields it is not given with FAITHFUL_TIMING (envs.env.make_twin_env), so `--camera-latency-ms 0` must reach it.
    ConfigError for a negative or non-finite value.

        timing_overrides(True)                    # {"camera_latency_ms": 100.0, "action_delay_ms": 20.0}
        timing_overrides(False, 50.0)             # {"camera_latency_ms": 50.0, "action_delay_ms": 0.0}
        timing_overrides(True, 0.0, 0.0)          # {"camera_latency_ms": 0.0, "action_delay_ms": 0.0}: timing off
    """
    out = {}
    for name, value in (("camera_latency_ms", camera_latency_ms), ("action_delay_ms", action_delay_ms)):
        v = float(FAITHFUL_TIMING[name] if faithful else 0.0) if value is None else float(value)
        flag = "--" + name.replace("_", "-")
        require(math.isfinite(v) and 0 <= v <= MAX_SIMULATED_DELAY_MS, flag, v,
                f"must be finite and in [0, {MAX_SIMULATED_DELAY_MS:g}] ms")
        out[name] = v
    return out if faithful or any(out.values()) else {}


def add_timing_flags(p: argparse.ArgumentParser) -> None:
    """`--camera-latency-ms` and `--action-delay-ms` (the twin's simulated hardware timing; None: the faithful
    default with --faithful, else 0; timing_overrides resolves them)."""
    p.add_argument("--camera-latency-ms", type=float, default=None, metavar="MS",
                   help="twin only: the camera frames the policy sees were rendered this long ago (default: 100 with "
                        "--faithful, else 0; hardware refuses it: real cameras have their own latency)")
    p.add_argument("--action-delay-ms", type=float, default=None, metavar="MS",
                   help="twin only: the arm's target changes this long after the action (default: 20 with "
                        "--faithful, else 0)")
