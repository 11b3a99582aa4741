"""Robot server, the backends: `make_backend(name, task)` builds the (robot, cameras, info) a server serves, for
backend 'twin' (the MuJoCo twin), 'ros2' (envs.ros2: a ROS 2 Cartesian impedance controller) or 'franky',
imported lazily: without their extra the error names it.

Usage::

    robot, cameras, info = make_backend("twin", "twin-pick-cube", image_size=64)
    handle = serve_in_thread(lambda: make_backend("twin", "pick_cube"))     # built on the serving thread
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from envs.robot import Cameras, Robot
from envs.robot_server.safety import SafetyGuard, ServerSafetyConfig, task_safety_box
from envs.tasks import Task
from robot_rl.errors import ConfigError
from robot_rl.reward_source import POLICY_CAMERAS

BACKENDS = ("twin", "franky", "ros2")
"""Backend names for `make_backend` / `robot-rl robot-server --backend`."""

BackendFactory = Callable[[], tuple[Robot, Cameras | None, dict[str, Any]]]
"""Builds (robot, cameras or None, info for `open`) on the serving thread."""


def make_backend(name: str, task: str | Task, image_size: int = 128, camera_names: Sequence[str] = POLICY_CAMERAS,
                 cameras: bool = True, physics_hz: float | None = None, ros2: Any = None, robot_ip: str | None = None,
                 camera_specs: Sequence[str] = (), franky_options: dict[str, Any] | None = None,
                 safety: ServerSafetyConfig | None = None, camera_options: dict[str, Any] | None = None,
                 ) -> tuple[Robot, Cameras | None, dict[str, Any]]:
    """(robot, cameras, info) for backend `name` ('twin', 'franky', 'ros2') and a task: a Task, a task name, a
    preset's name or a task file's path (envs.task_file.resolve_task).

    Hardware backends are imported lazily: without their extra this raises `MissingExtraError` naming it
    (`real` for franky, `ros` for ros2). The twin is built exactly as `envs.env.make_twin_env` builds it, so
    an env over a RemoteRobot of this backend runs the same episodes as an in-process twin env. `ros2` is an
    `envs.ros2.backend.Ros2BackendOptions` (controller profile, namespace, topics; default: CRISP's interface).

    franky: `robot_ip` is required; `camera_specs` ("realsense:SERIAL=name", "opencv:/dev/video0=name", see
    envs.hardware.cameras.make_cameras) attach real cameras at `image_size` (none: a state-only server;
    `camera_options`: further CameraConfig fields, e.g. exposure_us);
    `franky_options` are further FrankyRobotConfig fields.

    Every backend is served behind the server-side `SafetyGuard` (envs.robot_server.safety: the task's box grown
    by a margin, the wrench limit, joint margins, the e-stop) configured by `safety` (default limits; pass
    ServerSafetyConfig(enabled=False) for the raw backend).
    """
    from envs.task_file import resolve_task
    from robot_rl.extras import optional_import

    if name == "twin":
        optional_import("mujoco", extra="sim", purpose="the MuJoCo twin backend")
        from envs.twin import TwinRobot, TwinRobotConfig

        the_task = resolve_task(task)
        if not the_task.twin_task:
            raise ConfigError(f"task={task!r} has no MuJoCo twin scene")
        options: dict[str, Any] = {} if physics_hz is None else {"physics_hz": float(physics_hz)}
        robot = TwinRobot(TwinRobotConfig(task=the_task.twin_task, image_height=int(image_size),
                                          image_width=int(image_size), camera_names=tuple(camera_names),
                                          render=bool(cameras), **options))
        return (_guarded(robot, the_task, safety), (robot.cameras() if cameras else None),
                {"backend": "twin", "task": the_task.name})
    if name == "franky":
        the_task = resolve_task(task)
        if not robot_ip:
            raise ConfigError("backend 'franky' needs the robot's address (--robot-ip, e.g. 172.16.0.2)")
        from envs.hardware.franky_robot import FrankyRobot, FrankyRobotConfig

        hw_cameras: Cameras | None = None
        if cameras and camera_specs:
            from envs.hardware.cameras import make_cameras

            hw_cameras = make_cameras(camera_specs, image_size=int(image_size), options=camera_options)
        try:
            robot_hw = FrankyRobot(FrankyRobotConfig(robot_ip=str(robot_ip), **(franky_options or {})))
        except BaseException:
            if hw_cameras is not None:
                hw_cameras.close()  # type: ignore[attr-defined]
            raise
        return _guarded(robot_hw, the_task, safety), hw_cameras, {"backend": "franky", "task": the_task.name}
    if name == "ros2":
        optional_import("rclpy", extra="ros", purpose="the ROS 2 backend (--backend ros2)")
        from envs.ros2.backend import make_ros2_backend

        ros_task = resolve_task(task)
        ros_robot, ros_cameras, ros_info = make_ros2_backend(ros_task.name, int(image_size), tuple(camera_names),
                                                             bool(cameras), ros2)
        return _guarded(ros_robot, ros_task, safety), ros_cameras, ros_info
    raise ConfigError(f"backend={name!r} is unknown; known: {list(BACKENDS)}")


def _guarded(robot: Robot, task: Any, safety: ServerSafetyConfig | None) -> Robot:
    cfg = safety or ServerSafetyConfig()
    if not cfg.enabled:
        return robot
    from controllers.kinematics import PANDA_HOME_Q, panda_fk

    home_pos, _ = panda_fk(PANDA_HOME_Q)
    return SafetyGuard(robot, cfg, task_safety_box(task, cfg.box_margin_m, cfg.box_margin_rad, [home_pos.tolist()]))
