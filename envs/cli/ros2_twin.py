"""`robot-rl ros2-twin`: the MuJoCo twin as a ROS 2 node speaking a Cartesian impedance controller's interface
(envs.ros2.twin_node), so a ROS 2 setup (the `ros2` robot-server backend, ROS tools, launch files) can be checked
without a robot. Prints one line naming its node and topics, then runs until Ctrl-C / SIGTERM (or --max-seconds).

Usage::

    robot-rl ros2-twin --task twin-pick-cube                       # CRISP topics in the root namespace
    robot-rl robot-server --backend ros2 --ros-twin --task twin-pick-cube     # in another shell: the bridge
    robot-rl ros2-twin --task twin-reach --profile fzi --namespace /arm --no-cameras
"""

from __future__ import annotations

import argparse
import signal
import threading
from types import FrameType

from envs.ros2.config import PROFILES


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="robot-rl ros2-twin", description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="twin-pick-cube", help="task or twin preset (e.g. twin-reach)")
    parser.add_argument("--profile", default="crisp", choices=PROFILES, help="controller interface to speak")
    parser.add_argument("--namespace", default="", help="ROS namespace of the node and its topics")
    parser.add_argument("--image-size", type=int, default=128, help="rendered image height and width")
    parser.add_argument("--cameras", default="front,wrist", help="comma-separated cameras to publish")
    parser.add_argument("--no-cameras", action="store_true", help="publish no images (no renderer)")
    parser.add_argument("--camera-hz", type=float, default=15.0, help="image publishing rate")
    parser.add_argument("--state-hz", type=float, default=100.0, help="state publishing and physics pacing rate")
    parser.add_argument("--physics-hz", type=float, default=500.0, help="twin physics rate")
    parser.add_argument("--max-seconds", type=float, default=None, help="exit after this long (default: never)")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from robot_rl.extras import require_extras

    require_extras(("sim", "ros"), "robot-rl ros2-twin")  # before the twin is built: fail fast
    from envs.ros2.twin_node import TwinNode, TwinNodeConfig

    names = () if args.no_cameras else tuple(n.strip() for n in args.cameras.split(",") if n.strip())
    config = TwinNodeConfig(task=args.task, profile=args.profile, namespace=args.namespace,
                            physics_hz=args.physics_hz, state_hz=args.state_hz,
                            camera_hz=0.0 if args.no_cameras else args.camera_hz, image_size=args.image_size,
                            camera_names=names)
    node = TwinNode(config, log=lambda line: print(line, flush=True))
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, _on_signal)
    try:
        node.spin(stop, max_seconds=args.max_seconds)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        node.close()
        print(f"ros2-twin: stopped after publishing {node.published_states} states", flush=True)
    return 0
