"""Plain USB cameras through OpenCV (V4L2 on Linux); cv2 is imported lazily (the `real` extra's
opencv-python-headless).

`OpenCVSource` (an envs.hardware.camera_source.FrameSource): `cv2.VideoCapture` on /dev/videoN (V4L2 backend), an index,
or a video file (the tests use one); resolution and fps requested from the driver; with `exposure_us` set, manual
exposure (V4L2: CAP_PROP_AUTO_EXPOSURE = 1, then CAP_PROP_EXPOSURE in the driver's units, 100 us on most UVC
cameras). Frames come as BGR and are returned as RGB.

Usage::

    cam = ThreadedCamera(cfg, OpenCVSource(cfg))          # or make_cameras(["opencv:/dev/video0=wrist"])
    list_opencv()      # [{"device": "/dev/video0", "opens": True, "width": 640, "height": 480, "fps": 30.0}]
"""

from __future__ import annotations

import glob
from typing import Any

import numpy as np

from envs.hardware.camera_source import CameraConfig, CameraError


def _cv2() -> Any:
    from robot_rl.extras import optional_import

    return optional_import("cv2", extra="real", purpose="OpenCV / V4L2 cameras")


class OpenCVSource:
    """One camera through cv2.VideoCapture (see the module docstring)."""

    def __init__(self, config: CameraConfig) -> None:
        self.config = config
        self._cv2 = _cv2()
        self._cap: Any = None
        self._info: dict[str, Any] = {}

    def open(self) -> None:
        cv2, cfg = self._cv2, self.config
        dev: str | int = int(cfg.device) if cfg.device.isdigit() else cfg.device
        cap = (cv2.VideoCapture(dev, cv2.CAP_V4L2) if isinstance(dev, str) and dev.startswith("/dev/video")
               else cv2.VideoCapture(dev))
        if not cap.isOpened():
            cap.release()
            raise CameraError(f"OpenCV cannot open camera {cfg.device!r} (list them with 'robot-rl cameras list')")
        is_file = isinstance(dev, str) and not dev.startswith("/dev/")
        if not is_file:
            cap.set(cv2.CAP_PROP_FRAME_WIDTH, cfg.width)
            cap.set(cv2.CAP_PROP_FRAME_HEIGHT, cfg.height)
            cap.set(cv2.CAP_PROP_FPS, cfg.fps)
            cap.set(cv2.CAP_PROP_BUFFERSIZE, 1)  # newest frame, not a queue
            if cfg.exposure_us is not None:
                cap.set(cv2.CAP_PROP_AUTO_EXPOSURE, 1)  # V4L2: 1 = manual, 3 = aperture priority (auto)
                cap.set(cv2.CAP_PROP_EXPOSURE, float(cfg.exposure_us) / 100.0)
        self._cap = cap
        self._info = {"device": cfg.device, "width": int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)),
                      "height": int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT)), "fps": float(cap.get(cv2.CAP_PROP_FPS)),
                      "exposure": float(cap.get(cv2.CAP_PROP_EXPOSURE)), "backend": cap.getBackendName()}

    def grab(self, timeout_s: float) -> np.ndarray | None:
        if self._cap is None:
            return None
        ok, frame = self._cap.read()  # blocks for one frame (the driver's own timeout, ~1 s on V4L2)
        if not ok or frame is None:
            return None
        if frame.ndim == 2:
            frame = np.repeat(frame[..., None], 3, axis=2)
        return np.ascontiguousarray(frame[..., 2::-1])  # BGR -> RGB

    def close(self) -> None:
        if self._cap is not None:
            self._cap.release()
            self._cap = None

    def describe(self) -> dict[str, Any]:
        return dict(self._info)


def list_opencv(max_devices: int = 16) -> list[dict[str, Any]]:
    """The /dev/video* nodes, whether OpenCV opens each, and the size / fps it reports."""
    cv2 = _cv2()
    out = []
    for path in sorted(glob.glob("/dev/video*"))[:max_devices]:
        cap = cv2.VideoCapture(path, cv2.CAP_V4L2)
        entry: dict[str, Any] = {"device": path, "opens": bool(cap.isOpened())}
        if cap.isOpened():
            entry.update(width=int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), height=int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT)),
                         fps=float(cap.get(cv2.CAP_PROP_FPS)))
        cap.release()
        out.append(entry)
    return out
