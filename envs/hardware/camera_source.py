"""What a real camera is: its config (`CameraConfig`), the device interface a backend implements (`FrameSource`:
open / grab / close / describe) and the error a camera raises (`CameraError`). The backends
(envs.hardware.realsense, envs.hardware.opencv_camera) and the reader thread around them (envs.hardware.cameras)
import this module; it imports none of them.

Usage::

    config = CameraConfig(kind="realsense", device="123456789012", name="front", image_size=128)
    source: FrameSource = RealSenseSource(config)      # envs.hardware.realsense
    source.open(); frame = source.grab(timeout_s=0.5)  # RGB uint8 (H, W, 3) or None
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Protocol

import numpy as np

from robot_rl.config import Config, require
from robot_rl.errors import RobotError

CAMERA_KINDS = ("realsense", "opencv")


class CameraError(RobotError):
    """A camera stalled, was unplugged or cannot be opened."""


@dataclasses.dataclass(frozen=True)
class CameraConfig(Config):
    """One real camera."""

    kind: str = "realsense"
    """'realsense' (pyrealsense2) or 'opencv' (OpenCV / V4L2)."""
    device: str = ""
    """realsense: the serial number, or a .db3 recording to play; opencv: /dev/videoN, an index, or a video file."""
    name: str = "front"
    """The camera's name in observations."""
    width: int = 640
    """Capture width (pixels)."""
    height: int = 480
    """Capture height (pixels)."""
    fps: int = 30
    """Capture rate."""
    exposure_us: float | None = None
    """Fixed exposure (microseconds; RealSense units): auto-exposure is turned off first. None: auto."""
    crop_xywh: tuple[int, int, int, int] | None = None
    """Crop of the captured frame (x, y, width, height in pixels) before the resize; None: centre square."""
    image_size: int = 128
    """Output images are image_size x image_size x 3 uint8 (the policy's size)."""
    stall_timeout_s: float = 0.5
    """read() raises CameraError when no frame newer than this has arrived (and waits at most this long)."""
    reconnect_every_s: float = 1.0
    """After a stall or an error, the reader thread re-opens the device this often (in the background)."""

    def validate(self) -> None:
        require(self.kind in CAMERA_KINDS, "kind", self.kind, f"must be one of {list(CAMERA_KINDS)}")
        require(isinstance(self.name, str) and len(self.name) > 0, "name", self.name, "must be non-empty")
        for f in ("width", "height", "fps", "image_size"):
            v = getattr(self, f)
            require(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 8192, f, v,
                    "must be an int in [1, 8192]")
        for f in ("stall_timeout_s", "reconnect_every_s"):
            v = getattr(self, f)
            require(isinstance(v, int | float) and math.isfinite(v) and v > 0, f, v, "must be finite and > 0")
        if self.exposure_us is not None:
            require(math.isfinite(self.exposure_us) and self.exposure_us > 0, "exposure_us", self.exposure_us,
                    "must be > 0 (or None for auto)")
        if self.crop_xywh is not None:
            x, y, w, h = self.crop_xywh
            require(x >= 0 and y >= 0 and w > 0 and h > 0 and x + w <= self.width and y + h <= self.height,
                    "crop_xywh", self.crop_xywh, f"must lie inside the {self.width}x{self.height} frame")


class FrameSource(Protocol):
    """One device: `grab` blocks at most `timeout_s` and returns an RGB uint8 (H, W, 3) frame or None."""

    def open(self) -> None: ...

    def grab(self, timeout_s: float) -> np.ndarray | None: ...

    def close(self) -> None: ...

    def describe(self) -> dict[str, Any]:
        """What the device reports (serial, resolution, fps, exposure, ...), for `check-hardware`."""
        ...
