"""The `robot-rl ros2-twin` process: its options (`Ros2TwinRunConfig`, one field per command-line flag, parsed by
`parse_ros2_twin_args`: launch files build these command lines, and tests parse them the same way) and
`run_ros2_twin`: the MuJoCo twin as a ROS 2 node (envs.ros2.twin_node.TwinNode) until Ctrl-C / SIGTERM or
`max_seconds`. The `sim` and `ros` extras are checked before anything is built; rclpy is imported only then.

Usage::

    cfg = parse_ros2_twin_args(["--task", "twin-reach", "--no-cameras", "--max-seconds", "5"])
    run_ros2_twin(cfg)        # 0; prints the node's line, then "ros2-twin: stopped after publishing N states"
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import threading
from collections.abc import Sequence
from types import FrameType
from typing import Any

from envs.ros2.config import PROFILES
from robot_rl.config import Config


@dataclasses.dataclass(frozen=True)
class Ros2TwinRunConfig(Config):
    """The options of `robot-rl ros2-twin` (the field names are the flags' dests; see the parser for help)."""

    task: str = "twin-pick-cube"
    profile: str = "crisp"
    namespace: str = ""
    image_size: int = 128
    cameras: str | None = None
    no_cameras: bool = False
    camera_hz: float = 15.0
    state_hz: float = 100.0
    physics_hz: float = 500.0
    max_seconds: float | None = None

    def node_config(self) -> Any:
        """The envs.ros2.twin_node.TwinNodeConfig of these options."""
        from envs.ros2.twin_node import TwinNodeConfig

        names = tuple(n.strip() for n in (self.cameras or "front,wrist").split(",") if n.strip())
        topics: tuple[str, ...] = ()
        frame_wh = None
        if self.cameras is None:  # a task file's cameras: the topics the robot server will read
            from envs.ros2.backend import file_cameras
            from envs.task_file import task_file_of

            tf = task_file_of(self.task)
            in_file = file_cameras(tf) if tf is not None else ()
            if in_file:
                names = tuple(c.name for c in in_file)
                topics = tuple(c.topic or f"camera/{c.name}/image_raw" for c in in_file)
                sizes = {c.frame_wh for c in in_file}
                only = next(iter(sizes))
                if len(sizes) == 1 and only is not None and min(only) > 0:
                    frame_wh = only  # the lab's frame size: the server crops and resizes them as it will there
        if self.no_cameras:
            names, topics = (), ()
        return TwinNodeConfig(task=self.task, profile=self.profile, namespace=self.namespace,
                              physics_hz=self.physics_hz, state_hz=self.state_hz,
                              camera_hz=0.0 if self.no_cameras else self.camera_hz, image_size=self.image_size,
                              camera_names=names, camera_topics=topics, frame_wh=frame_wh)


def ros2_twin_arg_parser() -> argparse.ArgumentParser:
    """The `robot-rl ros2-twin` command line (one flag per `Ros2TwinRunConfig` field)."""
    parser = argparse.ArgumentParser(prog="robot-rl ros2-twin", description="`robot-rl ros2-twin`: the MuJoCo twin as "
                                     "a ROS 2 node speaking a Cartesian impedance controller's interface "
                                     "(envs.ros2.twin_node), so a ROS 2 setup (the `ros2` robot-server backend, ROS "
                                     "tools, launch files) can be checked without a robot. Prints one line naming "
                                     "its node and topics, then runs until Ctrl-C / SIGTERM (or --max-seconds).")
    parser.add_argument("--task", default="twin-pick-cube", help="task or twin preset (e.g. twin-reach)")
    parser.add_argument("--profile", default="crisp", choices=PROFILES, help="controller interface to speak")
    parser.add_argument("--namespace", default="", help="ROS namespace of the node and its topics")
    parser.add_argument("--image-size", type=int, default=128, help="rendered image height and width")
    parser.add_argument("--cameras", default=None,
                        help="comma-separated cameras to publish on camera/NAME/image_raw (default: the task file's "
                             "[cameras.NAME] on their topics, else front,wrist)")
    parser.add_argument("--no-cameras", action="store_true", help="publish no images (no renderer)")
    parser.add_argument("--camera-hz", type=float, default=15.0, help="image publishing rate")
    parser.add_argument("--state-hz", type=float, default=100.0, help="state publishing and physics pacing rate")
    parser.add_argument("--physics-hz", type=float, default=500.0, help="twin physics rate")
    parser.add_argument("--max-seconds", type=float, default=None, help="exit after this long (default: never)")
    return parser


def parse_ros2_twin_args(argv: Sequence[str]) -> Ros2TwinRunConfig:
    """`robot-rl ros2-twin`'s arguments as a config (argparse's usage error and exit on bad flags)."""
    return Ros2TwinRunConfig(**vars(ros2_twin_arg_parser().parse_args(list(argv))))


def run_ros2_twin(cfg: Ros2TwinRunConfig) -> int:
    """Run the twin node until Ctrl-C / SIGTERM or `max_seconds`; returns the exit code."""
    from robot_rl.extras import require_extras

    require_extras(("sim", "ros"), "robot-rl ros2-twin")  # before the twin is built: fail fast
    from envs.ros2.twin_node import TwinNode

    node = TwinNode(cfg.node_config(), log=lambda line: print(line, flush=True))
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, _on_signal)
    try:
        node.spin(stop, max_seconds=cfg.max_seconds)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        node.close()
        print(f"ros2-twin: stopped after publishing {node.published_states} states", flush=True)
    return 0
