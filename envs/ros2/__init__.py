"""The ROS 2 bridge: `Ros2Robot` (the Robot seam over a ros2_control Cartesian impedance controller, CRISP's
interface by default, FZI's cartesian_compliance_controller as a second profile), `Ros2Cameras` (cameras from
sensor_msgs/Image topics) and `TwinNode` (the MuJoCo twin as a ROS 2 node speaking the same interface,
`robot-rl ros2-twin`, whose command module is envs.cli.ros2_twin).

Layout (only the modules marked rclpy import it, lazily, through envs.ros2.runtime; the rest is pure and tested
without ROS):
```
config.py     Ros2RobotConfig (profiles crisp / fzi, every topic and parameter name), Ros2CamerasConfig
logic.py      message fields <-> RobotState, target interpolation, QoS choices, staleness, gain parameters,
              image / object encodings
adapters.py   gripper and error-recovery paths (franka_msgs when importable, else standard messages)   [rclpy]
runtime.py    RosRuntime: one node in its own context, spun by a thread; QoS profiles                  [rclpy]
robot.py      Ros2Robot                                                                               [rclpy]
cameras.py    Ros2Cameras                                                                             [rclpy]
twin_node.py  TwinNode                                                                                [rclpy]
twin_run.py   the `robot-rl ros2-twin` process: Ros2TwinRunConfig, parse_ros2_twin_args, run_ros2_twin
backend.py    the robot server's `ros2` backend (make_ros2_backend, --ros-* options)
```
rclpy and the message packages come from the `ros` extra (pip wheels of ROS 2 Kilted: ros-rclpy[fastrtps],
ros-std-msgs, ros-geometry-msgs, ros-sensor-msgs, ros-std-srvs, ros-rcl-interfaces; never mix them with
ros-jazzy-* wheels) and work only from the interpreter of the venv they are installed in.

Usage::

    from envs.ros2.robot import Ros2Robot
    from envs.ros2.config import Ros2RobotConfig
    robot = Ros2Robot(Ros2RobotConfig.for_profile("crisp"))
"""

from envs.ros2.config import PROFILES, Ros2CamerasConfig, Ros2RobotConfig

__all__ = ["PROFILES", "Ros2CamerasConfig", "Ros2RobotConfig"]
