"""`Ros2Cameras`: cameras from sensor_msgs/Image topics (e.g. realsense2_camera's `color/image_raw`, or the
images `robot-rl ros2-twin` publishes), implementing envs.robot.Cameras.

Newest frame only: each topic is subscribed best effort with a history of one, and a frame is converted (rgb8,
bgr8, rgba8, bgra8, mono8 -> RGB) and centre-cropped + resized to `image_size` only when read. `frame_ages_s()`
reports how old each newest frame is (by arrival); `read()` raises RobotTimeoutError naming the camera when its
newest frame is older than `max_frame_age_s` (a stalled camera is an error within a deadline, never a silent
repeat of an old frame). Start-up waits `connect_timeout_s` for a first frame from every camera and reads it once:
a frame the camera's crop or expected size does not fit is a ConfigError there, naming the camera, its topic and
where its settings come from.

Usage::

    cams = Ros2Cameras(Ros2CamerasConfig.from_specs(["front=/cam_front/color/image_raw", "wrist"], image_size=128))
    frames = cams.read()            # {"front": uint8 (128, 128, 3), "wrist": ...}
    cams.frame_ages_s()             # {"front": 0.012, "wrist": 0.030}
    cams.close()
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import numpy as np

from envs.ros2.config import Ros2CamerasConfig
from envs.ros2.logic import IMAGE_QOS, image_from_fields, policy_frame
from envs.ros2.runtime import RosRuntime, qos_profile, ros_messages
from robot_rl.errors import RobotError, RobotTimeoutError


class Ros2Cameras:
    """Named cameras from ROS 2 image topics (implements envs.robot.Cameras)."""

    def __init__(self, config: Ros2CamerasConfig | None = None) -> None:
        config = Ros2CamerasConfig() if config is None else config
        config.validate()
        self._config = config
        sensor = ros_messages("sensor_msgs.msg")
        self._lock = threading.Lock()
        self._latest: dict[str, tuple[Any, float]] = {}
        self._closed = False
        self._rt = RosRuntime(config.node_name)
        try:
            self._subs = [
                self._rt.node.create_subscription(sensor.Image, config.topic(i), self._callback(name),
                                                  qos_profile(IMAGE_QOS))
                for i, name in enumerate(config.names)
            ]
            self._wait_for_frames()
            self.read()  # the first frames fit the crops and sizes, or the error says which does not
        except BaseException:
            self._rt.shutdown()
            raise

    def _callback(self, name: str) -> Any:
        def on_image(msg: Any) -> None:
            with self._lock:
                self._latest[name] = (msg, time.monotonic())
        return on_image

    def _wait_for_frames(self) -> None:
        cfg = self._config
        t_end = time.monotonic() + cfg.connect_timeout_s
        while time.monotonic() < t_end:
            with self._lock:
                if all(n in self._latest for n in cfg.names):
                    return
            time.sleep(0.02)
        with self._lock:
            missing = [f"{n} ({cfg.topic(i)})" for i, n in enumerate(cfg.names) if n not in self._latest]
        raise RobotTimeoutError(f"no image from camera(s) {', '.join(missing)} after {cfg.connect_timeout_s:g} s "
                                f"(ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0 (unset)')})")

    @property
    def names(self) -> tuple[str, ...]:
        return self._config.names

    @property
    def image_shape(self) -> tuple[int, int, int] | None:
        """(size, size, 3) when resizing; else the shape of the first camera's newest frame (its crop's)."""
        if self._config.image_size:
            return (self._config.image_size, self._config.image_size, 3)
        crop = self._config.crop(0)
        if crop is not None:
            return (crop[3], crop[2], 3)
        with self._lock:
            entry = self._latest.get(self._config.names[0])
        return None if entry is None else (int(entry[0].height), int(entry[0].width), 3)

    def frame_ages_s(self) -> dict[str, float]:
        """Seconds since each camera's newest frame arrived (inf: none yet)."""
        now = time.monotonic()
        with self._lock:
            return {n: (now - self._latest[n][1]) if n in self._latest else float("inf") for n in self._config.names}

    def read(self) -> dict[str, np.ndarray]:
        """The newest frame of every camera as uint8 (H, W, 3); RobotTimeoutError for a stalled camera."""
        if self._closed:
            raise RobotError("Ros2Cameras are closed")
        cfg = self._config
        with self._lock:
            latest = dict(self._latest)
        now = time.monotonic()
        out = {}
        for i, name in enumerate(cfg.names):
            if name not in latest:
                raise RobotTimeoutError(f"camera {cfg.describe(i)}: no frame received")
            msg, t = latest[name]
            if now - t > cfg.max_frame_age_s:
                raise RobotTimeoutError(f"camera {cfg.describe(i)} stalled: newest frame {now - t:.2f} s old "
                                        f"(max {cfg.max_frame_age_s:g} s)")
            img = image_from_fields(msg.encoding, msg.height, msg.width, msg.step, msg.data)
            out[name] = policy_frame(img, cfg.image_size, cfg.crop(i), cfg.frame_size(i), cfg.describe(i))
        return out

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._rt.shutdown()
