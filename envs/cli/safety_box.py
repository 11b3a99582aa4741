"""`robot-rl safety-box record`: record the workspace box by guiding the arm by hand, save it as a task config.

Put the arm in guiding mode (the pilot's guiding button; the robot is opened read-only, nothing is commanded),
start the command, and move the hand through the extremes of where the policy may go: the corners of the
workspace, the lowest safe height above the table, the largest tilts and turns. It samples the TCP pose at
`--rate` for `--seconds` (Ctrl-C ends early and keeps what was sampled) and writes the box that holds every
sample, grown by `--margin-m` / `--margin-rad`, as a task config (envs.hardware.safety_box): use it with
`robot-rl robot-server --task-config FILE` (the server enforces it) and `robot-rl actor --task-config FILE` (the
env clips to it).

Usage::

    robot-rl safety-box record --robot-ip 172.16.0.2 --task pick_cube --seconds 60 --out configs/pick_box.json
"""

from __future__ import annotations

import argparse
import time

from envs.hardware.safety_box import box_from_poses, write_task_config
from envs.tasks import get_task


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="robot-rl safety-box", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="sample the TCP while the arm is guided by hand; write a task config")
    rec.add_argument("--robot-ip", required=True, help="the robot's FCI address")
    rec.add_argument("--task", required=True, help="the task whose box this is (e.g. pick_cube)")
    rec.add_argument("--out", required=True, help="task config file to write (JSON)")
    rec.add_argument("--seconds", type=float, default=30.0, help="how long to sample (Ctrl-C ends early)")
    rec.add_argument("--rate", type=float, default=20.0, help="samples per second")
    rec.add_argument("--margin-m", type=float, default=0.0, help="grow the position box by this much (m)")
    rec.add_argument("--margin-rad", type=float, default=0.0, help="grow the orientation bounds by this much (rad)")
    args = parser.parse_args(argv)
    task = get_task(args.task)
    from envs.hardware.franky_robot import FrankyRobot, FrankyRobotConfig

    robot = FrankyRobot(FrankyRobotConfig(robot_ip=args.robot_ip, gripper=False, control=False))
    positions, quats = [], []
    t0 = time.monotonic()
    print(f"safety-box: sampling the TCP for {args.seconds:g} s: guide the arm through the workspace's extremes "
          "(Ctrl-C ends early)", flush=True)
    try:
        while time.monotonic() - t0 < args.seconds:
            s = robot.state()
            positions.append(s.pos_base_ee)
            quats.append(s.quat_base_ee)
            time.sleep(max(0.0, 1.0 / args.rate - (time.monotonic() - t0) % (1.0 / args.rate)))
    except KeyboardInterrupt:
        print("safety-box: stopped early", flush=True)
    finally:
        robot.stop()
    nominal = task.reset_quat_wxyz if task.reset_quat_wxyz is not None else (0.0, 1.0, 0.0, 0.0)
    box = box_from_poses(positions, quats, nominal, args.margin_m, args.margin_rad)
    out = write_task_config(args.out, task.name, box, {
        "samples": len(positions), "seconds": round(time.monotonic() - t0, 2), "margin_m": args.margin_m,
        "margin_rad": args.margin_rad, "robot_ip": args.robot_ip, "nominal_quat_wxyz": list(nominal)})
    print(f"safety-box: {len(positions)} samples -> position box {box['pos_min_m']} .. {box['pos_max_m']} m, "
          f"euler {box['rot_min_rad']} .. {box['rot_max_rad']} rad; wrote {out}", flush=True)
    return 0
