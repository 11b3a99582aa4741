"""rclpy plumbing shared by the bridge's nodes: lazy imports naming the `ros` extra, QoS profiles from
`logic.QosSpec`, and `RosRuntime`, one node in its own rclpy context spun by a background thread.

rclpy comes from the `ros` extra (unofficial Kilted wheels: ros-rclpy[fastrtps], ros-std-msgs, ...). It only works
from the interpreter of the venv it is installed in (a .pth file sets its library path at start-up). Nothing here
is imported unless a ROS backend, the ROS cameras or `robot-rl ros2-twin` is used.

Each node has its own `rclpy.Context`, so a robot bridge and a camera node can live in one process and be shut
down independently. DDS settings come from the environment: ROS_DOMAIN_ID, ROS_AUTOMATIC_DISCOVERY_RANGE
(LOCALHOST keeps traffic on this machine), ROS_LOG_DIR.

Usage::

    rt = RosRuntime("robot_rl_bridge")                  # context + node + executor thread
    msgs = ros_messages("geometry_msgs.msg")           # the module, or MissingExtraError naming 'ros'
    sub = rt.node.create_subscription(msgs.PoseStamped, "/current_pose", cb, qos_profile(STATE_QOS))
    result = rt.call(client, request, timeout_s=2.0)    # a service call, waited for on this thread
    rt.shutdown()
"""

from __future__ import annotations

import threading
import time
from types import ModuleType
from typing import Any

from envs.ros2.logic import QosSpec
from robot_rl.errors import MissingExtraError, RobotTimeoutError
from robot_rl.extras import optional_import

DISTRO_PYTHON = {"humble": "3.10", "iron": "3.10", "jazzy": "3.12", "kilted": "3.12", "rolling": "3.12"}
"""The Python each ROS 2 distro's Debian / Ubuntu packages are built for (Humble: Ubuntu 22.04, Jazzy / Kilted:
24.04)."""


def ros_setup_notes(rclpy_file: str | None, ros_distro: str | None, venv_prefix: str, python: str) -> list[str]:
    """What a lab should know about the rclpy in use (pure: tests pass the facts in). `rclpy_file`: where rclpy was
    (or would be) imported from, None if not found; `ros_distro`: $ROS_DISTRO (set by sourcing a distro's
    setup.bash); `venv_prefix`: sys.prefix; `python`: 'MAJOR.MINOR'. Empty when the venv's own wheels are used
    and no distro is sourced."""
    notes: list[str] = []
    distro = (ros_distro or "").strip().lower()
    from_venv = rclpy_file is not None and rclpy_file.startswith(venv_prefix.rstrip("/") + "/")
    if rclpy_file is not None and not from_venv:
        where = f"the sourced ROS 2 {distro or 'installation'}" if "/opt/ros/" in rclpy_file or distro else "outside"
        want = DISTRO_PYTHON.get(distro)
        notes.append(
            f"rclpy comes from {where} ({rclpy_file}), ahead of this venv's own wheels (the `ros` extra: ROS 2 Kilted "
            f"pip wheels); a distro's rclpy is built for its own Python ({want or 'see the distro'}; this is "
            f"{python}) and must not be mixed with the venv's. Either run robot-rl from a shell where ROS is not "
            f"sourced (the venv's wheels talk DDS to the lab's {distro or 'ROS'} nodes), or make the venv with that "
            f"distro's Python and --system-site-packages and install robot-rl there without the `ros` extra")
    elif distro and from_venv:
        notes.append(
            f"ROS 2 {distro} is sourced (ROS_DISTRO) but rclpy is this venv's Kilted wheel: robot-rl's nodes talk "
            f"to the lab's {distro} nodes over DDS (the standard message types it uses match); keep "
            f"both on the same RMW (Fast DDS) and ROS_DOMAIN_ID")
    return notes


def rclpy_module() -> Any:
    """rclpy, or MissingExtraError naming the `ros` extra (and, when a sourced distro's rclpy is in the way, what
    to do); a sourced distro beside the venv's rclpy is reported on stderr once."""
    import importlib.util
    import os
    import sys

    try:
        spec = importlib.util.find_spec("rclpy")
    except (ImportError, ValueError):
        spec = None
    origin = spec.origin if spec is not None else None
    notes = ros_setup_notes(origin, os.environ.get("ROS_DISTRO"), sys.prefix, f"{sys.version_info[0]}."
                            f"{sys.version_info[1]}")
    try:
        rclpy = optional_import("rclpy", extra="ros", purpose="the ROS 2 bridge")
    except MissingExtraError as err:
        if notes:
            raise MissingExtraError(f"{err}; {notes[0]}") from err
        raise
    global _NOTED
    if notes and not _NOTED:
        _NOTED = True
        print(f"robot-rl: {notes[0]}", file=sys.stderr, flush=True)
    return rclpy


_NOTED = False


def ros_messages(module: str) -> ModuleType:
    """A ROS interface module ('geometry_msgs.msg', 'rcl_interfaces.srv', ...), or MissingExtraError."""
    return optional_import(module, extra="ros", purpose="the ROS 2 bridge")


def qos_profile(spec: QosSpec) -> Any:
    """rclpy QoSProfile of a `QosSpec`."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST, depth=int(spec.depth),
        reliability=ReliabilityPolicy.RELIABLE if spec.reliability == "reliable" else ReliabilityPolicy.BEST_EFFORT,
        durability=(DurabilityPolicy.TRANSIENT_LOCAL if spec.durability == "transient_local"
                    else DurabilityPolicy.VOLATILE))


class RosRuntime:
    """One rclpy node in its own context, spun by a daemon thread (or by the caller: `spin_in_thread=False`)."""

    def __init__(self, node_name: str, namespace: str = "", spin_in_thread: bool = True,
                 parameter_overrides: list[Any] | None = None) -> None:
        rclpy_module()  # MissingExtraError naming the extra
        import rclpy
        import rclpy.context
        import rclpy.node
        from rclpy.executors import SingleThreadedExecutor

        self.rclpy = rclpy
        self.context = rclpy.context.Context()
        rclpy.init(context=self.context)
        try:
            kwargs: dict[str, Any] = {"context": self.context}
            if namespace.strip("/"):
                kwargs["namespace"] = "/" + namespace.strip("/")
            if parameter_overrides:
                kwargs["parameter_overrides"] = parameter_overrides
            self.node = rclpy.node.Node(node_name, **kwargs)
            self.executor = SingleThreadedExecutor(context=self.context)
            self.executor.add_node(self.node)
        except BaseException:
            self.context.try_shutdown()
            raise
        self._thread: threading.Thread | None = None
        self._closed = False
        if spin_in_thread:
            self._thread = threading.Thread(target=self._spin, name=f"rclpy-{node_name}", daemon=True)
            self._thread.start()

    def _spin(self) -> None:
        try:
            while self.context.ok() and not self._closed:
                self.executor.spin_once(timeout_sec=0.05)
        except Exception:  # context shut down under us (ExternalShutdownException, InvalidHandle)
            if not self._closed:
                raise

    def spin(self, stop: threading.Event, max_seconds: float | None = None) -> None:
        """Spin on the calling thread until `stop` is set, the context ends or `max_seconds` pass."""
        t_end = None if max_seconds is None else time.monotonic() + max_seconds
        while self.context.ok() and not stop.is_set() and (t_end is None or time.monotonic() < t_end):
            self.executor.spin_once(timeout_sec=0.05)

    def call(self, client: Any, request: Any, timeout_s: float, what: str) -> Any:
        """Call a service (the executor thread completes the future); RobotTimeoutError when the service is not
        there or does not answer within `timeout_s`."""
        t_end = time.monotonic() + timeout_s
        if not client.wait_for_service(timeout_sec=timeout_s):
            raise RobotTimeoutError(f"{what}: service {client.srv_name} is not available (waited {timeout_s:g} s)")
        future = client.call_async(request)
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(max(0.0, t_end - time.monotonic())):
            future.cancel()
            raise RobotTimeoutError(f"{what}: service {client.srv_name} did not answer within {timeout_s:g} s")
        return future.result()

    def now_msg(self) -> Any:
        """The node clock's now() as a builtin_interfaces/Time."""
        return self.node.get_clock().now().to_msg()

    def shutdown(self) -> None:
        """Stop spinning, destroy the node and shut the context down (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        try:
            self.executor.remove_node(self.node)
            self.executor.shutdown(timeout_sec=1.0)
            self.node.destroy_node()
        finally:
            self.context.try_shutdown()
