"""`robot-rl safety-box record`: record the workspace box by guiding the arm by hand, save it as a task config.

Put the arm in guiding mode (the pilot's guiding button; the robot is opened read-only, nothing is commanded),
start the command, and move the hand through the extremes of where the policy may go: the corners of the
workspace, the lowest safe height above the table, the largest tilts and turns. It samples the TCP pose at
`--rate` for `--seconds` (Ctrl-C ends early and keeps what was sampled) and writes the box that holds every
sample, grown by `--margin-m` / `--margin-rad`, as a task config (envs.hardware.safety_box; a task file extending
the task's preset, its box marked as the lab's): pass it as `--task FILE` to `robot-rl robot-server` (the server
enforces it) and `robot-rl actor` (the env clips to it), or make a TOML task file of it with `robot-rl task init
--from-box FILE`.

The recording lives in envs.hardware.safety_box (SafetyBoxRecordConfig, record_safety_box).

Usage::

    robot-rl safety-box record --robot-ip 172.16.0.2 --task pick_cube --seconds 60 --out configs/pick_box.json
"""

from __future__ import annotations

import argparse

from envs.hardware.safety_box import SafetyBoxRecordConfig, record_safety_box


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="robot-rl safety-box", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="sample the TCP while the arm is guided by hand; write a task config")
    rec.add_argument("--robot-ip", required=True, help="the robot's FCI address")
    rec.add_argument("--task", required=True,
                     help="the task whose box this is: a preset (twin-pick-cube), a twin task (pick_cube) or a task "
                          "file")
    rec.add_argument("--out", required=True, help="task config file to write (JSON)")
    rec.add_argument("--seconds", type=float, default=30.0, help="how long to sample (Ctrl-C ends early)")
    rec.add_argument("--rate", type=float, default=20.0, help="samples per second")
    rec.add_argument("--margin-m", type=float, default=0.0, help="grow the position box by this much (m)")
    rec.add_argument("--margin-rad", type=float, default=0.0, help="grow the orientation bounds by this much (rad)")
    args = parser.parse_args(argv)
    record_safety_box(SafetyBoxRecordConfig(robot_ip=args.robot_ip, task=args.task, out=args.out,
                                            seconds=args.seconds, rate=args.rate, margin_m=args.margin_m,
                                            margin_rad=args.margin_rad))
    return 0
