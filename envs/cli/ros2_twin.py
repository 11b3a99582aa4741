"""`robot-rl ros2-twin`: the MuJoCo twin as a ROS 2 node speaking a Cartesian impedance controller's interface
(envs.ros2.twin_node), so a ROS 2 setup (the `ros2` robot-server backend, ROS tools, launch files) can be checked
without a robot. Prints one line naming its node and topics, then runs until Ctrl-C / SIGTERM (or --max-seconds).

The options and the run live in envs.ros2.twin_run (Ros2TwinRunConfig, parse_ros2_twin_args, run_ros2_twin).

Usage::

    robot-rl ros2-twin --task twin-pick-cube                       # CRISP topics in the root namespace
    robot-rl robot-server --backend ros2 --ros-twin --task twin-pick-cube     # in another shell: the bridge
    robot-rl ros2-twin --task twin-reach --profile fzi --namespace /arm --no-cameras
"""

from __future__ import annotations

from envs.ros2.twin_run import parse_ros2_twin_args, run_ros2_twin


def main(argv: list[str]) -> int:
    return run_ros2_twin(parse_ros2_twin_args(argv))
