"""`robot-rl check-hardware`: connect to the arm (and cameras), read, print a table, move nothing.

The robot is opened read-only (FrankyRobotConfig(control=False): no controller is started, no command is sent):
TCP pose, joints and their distance to the limits, the external wrench estimate, the gripper width, the robot's
errors. Each camera (`--camera KIND:ID=NAME`, as for the robot server) is read for `--seconds`: frames per second,
frame age, exposure and the device's serial. Exit status 0 when everything answered and no error is reported, 1
otherwise (the problems are listed last).

Usage::

    robot-rl check-hardware --robot-ip 172.16.0.2 --camera realsense:123456789012=front \
        --camera opencv:/dev/video0=wrist
    robot-rl check-hardware --camera realsense:123456789012=front          # cameras only
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from controllers.kinematics import PANDA_Q_MAX, PANDA_Q_MIN
from robot_rl.errors import RobotRLError


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="robot-rl check-hardware", description=__doc__.split("\n\n")[0])
    parser.add_argument("--robot-ip", default=None, help="the robot's FCI address (omit: cameras only)")
    parser.add_argument("--no-gripper", action="store_true", help="the arm has no Franka Hand")
    parser.add_argument("--camera", action="append", default=[], metavar="SPEC",
                        help="KIND:ID=NAME (realsense:SERIAL=front, opencv:/dev/video0=wrist); repeat for several")
    parser.add_argument("--image-size", type=int, default=128, help="camera output size")
    parser.add_argument("--exposure", type=float, default=None, help="fixed camera exposure in us (default: auto)")
    parser.add_argument("--seconds", type=float, default=1.0, help="how long to read each camera")
    args = parser.parse_args(argv)
    if not args.robot_ip and not args.camera:
        parser.error("give --robot-ip and/or --camera")
    problems: list[str] = []
    if args.robot_ip:
        from robot_rl.extras import optional_import

        optional_import("franky", extra="real", purpose="check-hardware --robot-ip (libfranka through franky)")
        problems += _check_robot(args.robot_ip, gripper=not args.no_gripper)
    if args.camera:
        problems += _check_cameras(args.camera, args.image_size, args.exposure, args.seconds)
    if problems:
        print("PROBLEMS:\n" + "\n".join(f"  - {p}" for p in problems), flush=True)
        return 1
    print("all good", flush=True)
    return 0


def _row(name: str, values: Any) -> None:
    if isinstance(values, np.ndarray | list | tuple):
        values = "  ".join(f"{float(v):+.4f}" for v in values)
    print(f"  {name:<26} {values}", flush=True)


def _check_robot(ip: str, gripper: bool) -> list[str]:
    from envs.hardware.franky_robot import FrankyRobot, FrankyRobotConfig

    try:
        robot = FrankyRobot(FrankyRobotConfig(robot_ip=ip, gripper=gripper, control=False))
    except RobotRLError as err:
        return [f"robot {ip}: {err}"]
    try:
        s = robot.state()
    finally:
        robot.stop()
    q = np.asarray(s.q_rad)
    to_limit = np.minimum(q - np.asarray(PANDA_Q_MIN), np.asarray(PANDA_Q_MAX) - q)
    j = int(np.argmin(to_limit))
    print(f"robot {ip} (franky, read-only: nothing was moved)", flush=True)
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
    problems = []
    if s.error:
        problems.append(f"robot {ip} reports errors: {s.error} (robot-server clears them with recover_from_errors)")
    if to_limit[j] < 0.05:
        problems.append(f"joint {j + 1} is {to_limit[j]:.3f} rad from its limit: guide the arm away first")
    return problems


def _check_cameras(specs: list[str], size: int, exposure: float | None, seconds: float) -> list[str]:
    from envs.hardware.cameras import CameraError, make_cameras

    cams = make_cameras(specs, image_size=size, options={"exposure_us": exposure})
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
            if not counts[n]:
                problems.append(f"camera {n}: no frame ({d.get('error') or 'check the cable / serial'})")
    finally:
        cams.close()
    return problems
