"""`robot-rl task init`: write a lab's task file (TOML) from the box `robot-rl safety-box record` recorded and
the cameras and home joints `robot-rl check-hardware --report` read, with commented lines for the rest.

The file extends a preset (`--base`, default: the task the box was recorded for) and is checked before it is
written (it loads back); pass it as `--task FILE` to robot-server, actor, learner, record-demos, ... The format and
its fields: robot_rl.task_file; the writing: envs.task_init (TaskInitConfig, init_task_file).

Usage::

    robot-rl safety-box record --robot-ip 172.16.0.2 --task twin-pick-cube --out configs/box.json
    robot-rl check-hardware --robot-ip 172.16.0.2 --camera realsense:123456789012=front --report configs/hw.json
    robot-rl task init --out configs/lab.toml --from-box configs/box.json --check-hardware configs/hw.json
    robot-rl task init --out configs/lab.toml --base twin-peg-insert --camera opencv:/dev/video0=wrist   # no box yet
"""

from __future__ import annotations

import argparse

from envs.task_init import TaskInitConfig, init_task_file


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="robot-rl task", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    init = sub.add_parser("init", help="write a lab's task file from safety-box record and check-hardware output")
    init.add_argument("--out", required=True, help="the task file to write (.toml)")
    init.add_argument("--from-box", default=None, metavar="BOX.json", help="robot-rl safety-box record's file")
    init.add_argument("--check-hardware", default=None, metavar="REPORT.json",
                      help="robot-rl check-hardware --report's file (cameras, home joints)")
    init.add_argument("--camera", action="append", default=[], metavar="SPEC",
                      help="a camera KIND:ID=NAME (realsense:SERIAL=front, opencv:/dev/video0=wrist); repeatable")
    init.add_argument("--base", default=None, help="the preset the task extends (default: the box's task)")
    init.add_argument("--name", default=None, help="the task's name (default: the file's stem)")
    init.add_argument("--image-size", type=int, default=None, help="the observation's image size")
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    args = parser.parse_args(argv)
    init_task_file(TaskInitConfig(out=args.out, base=args.base, name=args.name, from_box=args.from_box,
                                  check_hardware=args.check_hardware, cameras=tuple(args.camera),
                                  image_size=args.image_size, force=args.force))
    return 0
