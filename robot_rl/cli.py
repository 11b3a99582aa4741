"""The `robot-rl` command: the house's front door. Each subcommand lives in its own package and is
imported lazily, only when it runs, so `robot-rl --help` needs nothing beyond numpy. Errors robot-rl raises on
purpose (`RobotRLError`) and missing optional packages (named with the extra that provides them, see
robot_rl.extras) end the command with one line on stderr and exit code 1, never a traceback.

Usage::

    robot-rl --help
    robot-rl tasks                      # list the named task presets
    robot-rl demo --task twin-pick-cube --out runs/demo
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

# name -> (module with `main(argv: list[str]) -> int`, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "tasks": ("envs.cli.tasks", "list the named task presets (for --task)"),
    "task": ("envs.cli.task", "task init: write a lab's task file (box, cameras, home joints) for --task FILE"),
    "demo": ("envs.cli.demo", "run the scripted expert on the MuJoCo twin and write a PNG strip of camera frames"),
    "train": ("learners.cli.train", "train an agent in one process (twin preset or any gymnasium env)"),
    "eval": ("learners.cli.eval", "evaluate a checkpoint: success rate and mean return as one JSON line"),
    "train-bc": ("learners.cli.train_bc", "behaviour cloning on demo episodes, evaluated in the env (also a "
                 "residual base)"),
    "keys": ("robot_rl.keys_cli", "generate CURVE keys for learner/actor links beyond loopback"),
    "record-demos": ("demos.cli.record_demos", "record teleop (or scripted) demonstration episodes to a directory"),
    "episodes": ("demos.cli.episodes", "inspect, export (PNG strip / mp4) or replay recorded episode files"),
    "record-labels": ("demos.cli.record_labels", "record success/failure labelled frames for a reward classifier"),
    "convert-encoder": ("learners.cli.convert_encoder", "SERL's resnet10_params.pkl or torchvision's ResNet-18 "
                        ".pth -> a safetensors backbone file for --encoder-weights"),
    "pretrain-encoder": ("learners.cli.pretrain_encoder", "pretrain a camera backbone on recorded episodes (TCP now "
                         "and at the next gripper event) -> a safetensors file for --encoder-weights"),
    "train-classifier": ("learners.cli.train_classifier", "train a reward classifier on record-labels episodes "
                         "(by episode split, threshold for a target precision)"),
    "eval-classifier": ("learners.cli.eval_classifier", "evaluate a reward classifier on new labels: metrics table "
                        "and a PNG of the worst false positives / negatives"),
    "audit-labels": ("learners.cli.audit_labels", "a classifier's audit frames + verdicts -> label episodes (hard "
                     "negatives) for train-classifier --labels OLD NEW"),
    "robot-server": ("envs.cli.robot_server", "serve a robot (MuJoCo twin, franky, ROS 2) over ZeroMQ for RemoteRobot"),
    "ros2-twin": ("envs.cli.ros2_twin", "the MuJoCo twin as a ROS 2 node with a Cartesian impedance controller's API"),
    "learner": ("learners.cli.learner", "the distributed learner: transitions in from actors, weights out"),
    "actor": ("actors.actor_cli", "an actor: step the env (twin or robot server) with the learner's latest policy"),
    "sim": ("supervisor.sim_cli", "train in simulation: twin robot servers + learner + N actors, one progress view"),
    "estop": ("envs.cli.estop", "stop a robot server's robot now (any client; latches until the server restarts)"),
    "check-hardware": ("envs.cli.check_hardware", "read the arm and cameras, print a table, move nothing"),
    "safety-box": ("envs.cli.safety_box", "record the workspace box by hand-guiding; save a task config"),
    "cameras": ("envs.cli.cameras", "real cameras: list them, a framing PNG strip, a short recording"),
}


def _usage() -> str:
    width = max(len(n) for n in SUBCOMMANDS)
    lines = ["usage: robot-rl <command> [options]", "", "commands:"]
    lines += [f"  {name.ljust(width)}  {help_}" for name, (_, help_) in SUBCOMMANDS.items()]
    lines += ["", "Run 'robot-rl <command> --help' for a command's options."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    if args[0] == "--version":
        from robot_rl import __version__

        print(__version__)
        return 0
    # Headless-safe defaults before any subcommand imports mujoco or torch: MuJoCo picks its GL backend at
    # import time (EGL renders offscreen without a display), and OpenMP must not spin-wait on shared cores.
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    name, rest = args[0], args[1:]
    if name not in SUBCOMMANDS:
        print(f"robot-rl: unknown command '{name}'\n\n{_usage()}", file=sys.stderr)
        return 2
    from robot_rl.errors import RobotRLError
    from robot_rl.extras import missing_extra

    try:
        module = importlib.import_module(SUBCOMMANDS[name][0])
        return int(module.main(rest) or 0)
    except RobotRLError as err:
        print(f"robot-rl {name}: error: {err}", file=sys.stderr)
        return 1
    except ImportError as err:  # an optional package missing, at import time or later: name its extra
        missing = missing_extra(err)
        if missing is None:
            raise
        print(f"robot-rl {name}: error: {missing}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"robot-rl {name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
