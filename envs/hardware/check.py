"""Checking the hardware before a run (`robot-rl check-hardware`): the arm opened read-only
(FrankyRobotConfig(control=False): no controller is started, no command is sent) and read once (TCP pose, joints
and their distance to the limits, external wrench, gripper width, errors), and each camera read for a while (frames
per second, frame age, exposure, the device's serial). Prints a table; returns the problems found.

Usage::

    problems = check_hardware(CheckHardwareConfig(robot_ip="172.16.0.2", cameras=("realsense:123456789012=front",)))
    # [] when everything answered and no error is reported
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

import numpy as np

from robot_rl.config import Config, require
from robot_rl.errors import RobotRLError

REPORT_FORMAT = "robot-rl-hardware-report"
"""The `format` of the JSON `check_hardware` writes with `report` (version 1)."""


@dataclasses.dataclass(frozen=True)
class CheckHardwareConfig(Config):
    """What `check_hardware` reads."""

    robot_ip: str | None = None
    """The robot's FCI address (None: cameras only)."""
    gripper: bool = True
    """The arm has a Franka Hand."""
    cameras: tuple[str, ...] = ()
    """Camera specs KIND:ID=NAME (envs.hardware.cameras)."""
    image_size: int = 128
    """Camera output size."""
    exposure_us: float | None = None
    """Fixed camera exposure in us (None: auto)."""
    seconds: float = 1.0
    """How long to read each camera."""
    report: str | None = None
    """Also write what was read as JSON here (the arm's joints and TCP, each camera's serial, size, fps,
    exposure): `robot-rl task init --check-hardware FILE` makes a task file's cameras and home joints of it."""

    def validate(self) -> None:
        require(bool(self.robot_ip) or bool(self.cameras), "robot_ip", self.robot_ip,
                "or cameras must be given (nothing to check)")


def check_hardware(cfg: CheckHardwareConfig) -> list[str]:
    """Read the arm (when `robot_ip`) and the cameras, print what they report and return the problems (with a
    PROBLEMS list or "all good" printed last)."""
    problems: list[str] = []
    report: dict[str, Any] = {"format": REPORT_FORMAT, "version": 1, "image_size": cfg.image_size, "cameras": []}
    if cfg.robot_ip:
        from robot_rl.extras import optional_import

        optional_import("franky", extra="real", purpose="check-hardware --robot-ip (libfranka through franky)")
        problems += _check_robot(cfg.robot_ip, gripper=cfg.gripper, report=report)
    if cfg.cameras:
        problems += _check_cameras(list(cfg.cameras), cfg.image_size, cfg.exposure_us, cfg.seconds, report)
    if cfg.report:
        import json
        from pathlib import Path

        out = Path(cfg.report)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({**report, "problems": problems}, indent=1) + "\n")
        print(f"check-hardware: wrote {out} (robot-rl task init --check-hardware {out})", flush=True)
    if problems:
        print("PROBLEMS:\n" + "\n".join(f"  - {p}" for p in problems), flush=True)
    else:
        print("all good", flush=True)
    return problems


def _row(name: str, values: Any) -> None:
    if isinstance(values, np.ndarray | list | tuple):
        values = "  ".join(f"{float(v):+.4f}" for v in values)
    print(f"  {name:<26} {values}", flush=True)


def _check_robot(ip: str, gripper: bool, report: dict[str, Any]) -> list[str]:
    from envs.hardware.franky_robot import FrankyRobot, FrankyRobotConfig

    try:
        robot = FrankyRobot(FrankyRobotConfig(robot_ip=ip, gripper=gripper, control=False))
    except RobotRLError as err:
        return [f"robot {ip}: {err}"]
    try:
        s = robot.state()
    finally:
        robot.stop()
    from controllers.arms import arm_limits
    from envs.hardware.franky_robot import loaded_libfranka_version

    limits = arm_limits(str(getattr(robot, "arm", "any")))
    q = np.asarray(s.q_rad)
    to_limit = np.minimum(q - np.asarray(limits.q_min_rad), np.asarray(limits.q_max_rad) - q)
    j = int(np.argmin(to_limit))
    print(f"robot {ip} (franky, read-only: nothing was moved)", flush=True)
    _row("arm (joint limits)", f"{limits.name} (libfranka {loaded_libfranka_version() or 'unknown'}: < 0.10 "
                               f"drives a Panda, >= 0.10 an FR3)")
    _row("TCP position (m)", s.pos_base_ee)
    _row("TCP orientation (wxyz)", s.quat_base_ee)
    _row("joints (rad)", q)
    _row("closest joint limit (rad)", f"{to_limit[j]:.3f} (joint {j + 1})")
    _row("joint speeds (rad/s)", s.dq_rad_per_s)
    _row("external force (N, TCP)", f"{'  '.join(f'{v:+.2f}' for v in s.force_ee_n)}   |F| "
                                    f"{np.linalg.norm(s.force_ee_n):.2f}")
    _row("external torque (Nm, TCP)", f"{'  '.join(f'{v:+.2f}' for v in s.torque_ee_nm)}   |T| "
                                      f"{np.linalg.norm(s.torque_ee_nm):.2f}")
    _row("gripper width (m)", f"{s.gripper_width_m:.4f}" if gripper else "no gripper")
    _row("errors", s.error or "none")
    report["robot"] = {"robot_ip": ip, "arm": limits.name, "q_rad": [round(float(v), 4) for v in q],
                       "tcp_pos_m": [round(float(v), 4) for v in s.pos_base_ee],
                       "tcp_quat_wxyz": [round(float(v), 4) for v in s.quat_base_ee], "gripper": gripper}
    problems = []
    if s.error:
        problems.append(f"robot {ip} reports errors: {s.error} (robot-server clears them with recover_from_errors)")
    if to_limit[j] < 0.05:
        problems.append(f"joint {j + 1} is {to_limit[j]:.3f} rad from its limit: guide the arm away first")
    return problems


def _check_cameras(specs: list[str], size: int, exposure: float | None, seconds: float,
                   report: dict[str, Any]) -> list[str]:
    from envs.hardware.cameras import make_cameras

    notes = _CameraNotes()  # the reader threads' warnings, printed as lines of the table (not interleaved)
    cam_log = logging.getLogger("robot_rl.cameras")
    cam_log.addHandler(notes)
    propagate, cam_log.propagate = cam_log.propagate, False
    try:
        cams = make_cameras(specs, image_size=size, options={"exposure_us": exposure})
        problems = _read_cameras(cams, seconds, report)
    finally:
        cam_log.removeHandler(notes)
        cam_log.propagate = propagate
    for line in dict.fromkeys(notes.lines):  # each once, in order
        print(f"  note: {line}", flush=True)
    return problems


class _CameraNotes(logging.Handler):
    """Collects the camera readers' warnings during the check (they come from the readers' threads, on stderr,
    and landed in the middle of the table's lines: e.g. glued to "all good")."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _read_cameras(cams: Any, seconds: float, report: dict[str, Any]) -> list[str]:
    from envs.hardware.cameras import CameraError

    problems = []
    try:
        counts = {n: 0 for n in cams.names}
        ages: dict[str, list[float]] = {n: [] for n in cams.names}
        t0 = time.monotonic()
        deadline = t0 + seconds + 5.0  # devices take a moment to start
        started: float | None = None
        while time.monotonic() < deadline and (started is None or time.monotonic() - started < seconds):
            for cam in cams.cameras:
                try:
                    cam.read()
                except CameraError:
                    continue
                started = started if started is not None else time.monotonic()
                counts[cam.name] += 1
                ages[cam.name].append(cam.last_age_s)
            time.sleep(0.01)
        for d in cams.describe():
            n = d["name"]
            fps = d["frames"] / max(1e-9, time.monotonic() - t0)
            age = f"{1e3 * float(np.median(ages[n])):.0f} ms" if ages[n] else "-"
            exp = d.get("exposure_us", d.get("exposure", "-"))
            print(f"camera {n} ({d['kind']} {d.get('serial') or d.get('device', '')}): {d['frames']} frames "
                  f"(~{fps:.1f}/s incl. start-up), frame age {age}, exposure {exp}, auto-exposure "
                  f"{d.get('auto_exposure', '-')}, {d.get('width', '?')}x{d.get('height', '?')}", flush=True)
            report["cameras"].append({k: d[k] for k in ("name", "kind", "serial", "device", "width", "height", "fps",
                                                        "exposure_us", "auto_exposure") if d.get(k) not in (None, "")})
            if not counts[n]:
                problems.append(f"camera {n}: no frame ({d.get('error') or 'check the cable / serial'})")
    finally:
        cams.close()
    return problems
