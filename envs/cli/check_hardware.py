"""`robot-rl check-hardware`: connect to the arm (and cameras), read, print a table, move nothing.

The robot is opened read-only (FrankyRobotConfig(control=False): no controller is started, no command is sent):
TCP pose, joints and their distance to the limits, the external wrench estimate, the gripper width, the robot's
errors. Each camera (`--camera KIND:ID=NAME`, as for the robot server) is read for `--seconds`: frames per second,
frame age, exposure and the device's serial. Exit status 0 when everything answered and no error is reported, 1
otherwise (the problems are listed last).

The checks live in envs.hardware.check (CheckHardwareConfig, check_hardware).

Usage::

    robot-rl check-hardware --robot-ip 172.16.0.2 --camera realsense:123456789012=front \
        --camera opencv:/dev/video0=wrist
    robot-rl check-hardware --camera realsense:123456789012=front          # cameras only
    robot-rl check-hardware --robot-ip 172.16.0.2 --camera realsense:123456789012=front --report hw.json
                                                   # ... and a JSON report for `robot-rl task init --check-hardware`
"""

from __future__ import annotations

import argparse

from envs.hardware.check import CheckHardwareConfig, check_hardware


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="robot-rl check-hardware", description=__doc__.split("\n\n")[0])
    parser.add_argument("--robot-ip", default=None, help="the robot's FCI address (omit: cameras only)")
    parser.add_argument("--no-gripper", action="store_true", help="the arm has no Franka Hand")
    parser.add_argument("--camera", action="append", default=[], metavar="SPEC",
                        help="KIND:ID=NAME (realsense:SERIAL=front, opencv:/dev/video0=wrist); repeat for several")
    parser.add_argument("--image-size", type=int, default=128, help="camera output size")
    parser.add_argument("--exposure", type=float, default=None, help="fixed camera exposure in us (default: auto)")
    parser.add_argument("--seconds", type=float, default=1.0, help="how long to read each camera")
    parser.add_argument("--report", default=None, metavar="FILE",
                        help="also write what was read as JSON (for robot-rl task init --check-hardware FILE)")
    args = parser.parse_args(argv)
    if not args.robot_ip and not args.camera:
        parser.error("give --robot-ip and/or --camera")
    problems = check_hardware(CheckHardwareConfig(robot_ip=args.robot_ip, gripper=not args.no_gripper,
                                                  cameras=tuple(args.camera), image_size=args.image_size,
                                                  exposure_us=args.exposure, seconds=args.seconds,
                                                  report=args.report))
    return 1 if problems else 0
