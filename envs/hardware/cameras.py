"""Real cameras behind the `Cameras` seam (envs.robot): a daemon reader thread per device that keeps only the newest
frame, crop + resize to the policy's image size, the frame's age, a stall -> `CameraError` within a deadline and
reconnect attempts in the background (never a prompt on stdin: actors run headless).

A camera is a `FrameSource` (open / grab / close / describe, envs.hardware.camera_source, with `CameraConfig` and
`CameraError`) run by a `ThreadedCamera`; `MultiCameras` holds several (one process, several devices) and implements
`Cameras`. Sources: `envs.hardware.realsense` (pyrealsense2: a device by serial, or a .db3 recording) and
`envs.hardware.opencv_camera` (OpenCV / V4L2), imported lazily by `open_camera`.

Spec strings (the command line's `--camera`): `KIND:ID=NAME`, e.g. `realsense:123456789012=front`,
`realsense:/data/bench.db3=front` (a recording, played in a loop), `opencv:/dev/video0=wrist`, `opencv:0=wrist`.

Usage::

    cams = make_cameras(["realsense:123456789012=front", "opencv:/dev/video0=wrist"], image_size=128)
    frames = cams.read()            # {"front": uint8 (128, 128, 3), ...}; CameraError if one stalled
    cams.frame_ages_s()             # {"front": 0.012, ...}: how old each returned frame was
    cams.close()
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from envs.hardware.camera_source import CameraConfig, CameraError, FrameSource
from robot_rl.errors import ConfigError

log = logging.getLogger("robot_rl.cameras")

__all__ = ["CameraConfig", "CameraError", "FrameSource", "MultiCameras", "ThreadedCamera", "crop_resize",
           "make_cameras", "open_camera", "parse_camera_spec"]

def crop_resize(frame: np.ndarray, size: int, crop_xywh: tuple[int, int, int, int] | None = None) -> np.ndarray:
    """Crop (default: the centred square) and resize to (size, size, 3) uint8 by area averaging (bilinear when
    enlarging). Pure numpy."""
    h, w = frame.shape[:2]
    if crop_xywh is None:
        s = min(h, w)
        x, y, cw, ch = (w - s) // 2, (h - s) // 2, s, s
    else:
        x, y, cw, ch = crop_xywh
    img = np.asarray(frame[y:y + ch, x:x + cw], np.float32)
    if img.shape[0] != size:
        img = _resize_axis(img, size, 0)
    if img.shape[1] != size:
        img = _resize_axis(img, size, 1)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def _resize_axis(img: np.ndarray, n_out: int, axis: int) -> np.ndarray:
    """Resample one axis to n_out samples: each output pixel averages the input interval it covers (area), or
    interpolates linearly when enlarging."""
    n_in = img.shape[axis]
    if n_out < n_in:  # area: weight matrix (n_out, n_in) of interval overlaps
        edges = np.linspace(0.0, n_in, n_out + 1)
        lo, hi = edges[:-1, None], edges[1:, None]
        pix = np.arange(n_in)[None, :]
        wts = np.clip(np.minimum(hi, pix + 1) - np.maximum(lo, pix), 0.0, None)
        wts /= wts.sum(axis=1, keepdims=True)
    else:
        pos = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
        i0 = np.floor(pos).astype(int)
        i1 = np.minimum(i0 + 1, n_in - 1)
        t = pos - i0
        wts = np.zeros((n_out, n_in))
        wts[np.arange(n_out), i0] += 1 - t
        wts[np.arange(n_out), i1] += t
    return np.moveaxis(np.tensordot(wts.astype(np.float32), np.moveaxis(img, axis, 0), axes=(1, 0)), 0, axis)


class ThreadedCamera:
    """A FrameSource read by a daemon thread that keeps only the newest (processed) frame.

    read() returns the newest frame if it is younger than `stall_timeout_s`, else waits up to that long for one,
    else raises CameraError. The thread re-opens the device after an error or a stall (every
    `reconnect_every_s`), counting `reconnects`; it never blocks on anything but the device.
    """

    def __init__(self, config: CameraConfig, source: FrameSource) -> None:
        self.config = config
        self.source = source
        self._cond = threading.Condition()
        self._frame: np.ndarray | None = None
        self._frame_t = -math.inf
        self._frames = 0
        self._error = ""
        self.reconnects = 0
        self.last_age_s = math.nan
        self._stop = threading.Event()
        self._opened = False
        self._thread = threading.Thread(target=self._run, name=f"camera-{config.name}", daemon=True)
        self._thread.start()

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def frames(self) -> int:
        """Frames received so far."""
        return self._frames

    def read(self) -> np.ndarray:
        """The newest frame (uint8 (size, size, 3)); CameraError within `stall_timeout_s` when none is fresh."""
        cfg = self.config
        deadline = time.monotonic() + cfg.stall_timeout_s
        with self._cond:
            while True:
                now = time.monotonic()
                if self._frame is not None and now - self._frame_t <= cfg.stall_timeout_s:
                    self.last_age_s = now - self._frame_t
                    return self._frame
                if now >= deadline or self._stop.is_set():
                    break
                self._cond.wait(deadline - now)
            age = now - self._frame_t
        why = f"; last error: {self._error}" if self._error else ""
        raise CameraError(f"camera '{cfg.name}' ({cfg.kind}:{cfg.device}) delivered no frame for "
                          f"{'ever' if not math.isfinite(age) else f'{age:.2f} s'} (stall timeout "
                          f"{cfg.stall_timeout_s} s; reconnecting in the background, {self.reconnects} attempts so "
                          f"far){why}")

    def describe(self) -> dict[str, Any]:
        d = {"name": self.config.name, "kind": self.config.kind, "frames": self._frames,
             "reconnects": self.reconnects, "error": self._error}
        try:
            d.update(self.source.describe())
        except Exception as err:
            d["describe_error"] = str(err)
        return d

    def close(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(self.config.stall_timeout_s + 2.0)
        self._close_source()

    def _close_source(self) -> None:
        if self._opened:
            self._opened = False
            try:
                self.source.close()
            except Exception as err:
                log.info("camera %s: close: %s", self.config.name, err)

    def _run(self) -> None:
        cfg = self.config
        last_ok = time.monotonic()
        while not self._stop.is_set():
            if not self._opened:
                try:
                    self.source.open()
                    self._opened = True
                    last_ok = time.monotonic()
                except Exception as err:
                    self._error = f"open failed: {type(err).__name__}: {err}"
                    log.warning("camera %s: %s", cfg.name, self._error)
                    self._stop.wait(cfg.reconnect_every_s)
                    self.reconnects += 1
                    continue
            try:
                raw = self.source.grab(min(cfg.stall_timeout_s, 0.25))
            except Exception as err:
                raw = None
                self._error = f"grab failed: {type(err).__name__}: {err}"
            now = time.monotonic()
            if raw is None:
                if now - last_ok > max(cfg.stall_timeout_s, cfg.reconnect_every_s):  # stalled / unplugged: re-open
                    log.warning("camera %s: no frame for %.2f s, reconnecting", cfg.name, now - last_ok)
                    self._close_source()
                    self.reconnects += 1
                    last_ok = now
                continue
            img = crop_resize(raw, cfg.image_size, cfg.crop_xywh)
            last_ok = now
            with self._cond:
                self._frame, self._frame_t = img, now
                self._frames += 1
                self._error = ""
                self._cond.notify_all()


class MultiCameras:
    """Several real cameras in one process (implements envs.robot.Cameras)."""

    def __init__(self, cameras: Sequence[ThreadedCamera]) -> None:
        names = [c.name for c in cameras]
        if len(set(names)) != len(names) or not names:
            raise ConfigError(f"camera names must be distinct and at least one: {names}")
        sizes = {c.config.image_size for c in cameras}
        if len(sizes) != 1:
            raise ConfigError(f"all cameras must deliver one image size, got {sorted(sizes)}")
        self._cams = list(cameras)
        self._size = sizes.pop()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self._cams)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return (self._size, self._size, 3)

    @property
    def cameras(self) -> list[ThreadedCamera]:
        return list(self._cams)

    def read(self) -> dict[str, np.ndarray]:
        return {c.name: c.read() for c in self._cams}

    def frame_ages_s(self) -> dict[str, float]:
        """How old each frame returned by the last read() was (s)."""
        return {c.name: c.last_age_s for c in self._cams}

    def describe(self) -> list[dict[str, Any]]:
        return [c.describe() for c in self._cams]

    def close(self) -> None:
        for c in self._cams:
            c.close()

    def __enter__(self) -> MultiCameras:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def parse_camera_spec(spec: str, image_size: int = 128, **options: Any) -> CameraConfig:
    """`KIND:ID=NAME` (see the module docstring) -> CameraConfig; ConfigError naming the problem."""
    kind, sep, rest = spec.partition(":")
    device, sep2, name = rest.rpartition("=")
    if not sep or not sep2 or not device or not name:
        raise ConfigError(f"camera spec {spec!r} must look like KIND:ID=NAME (e.g. realsense:123456789012=front, "
                          "opencv:/dev/video0=wrist)")
    if device.upper() in ("SERIAL", "...", "ID"):  # the docs' and launch files' placeholder, left as it was
        raise ConfigError(f"camera spec {spec!r}: {device!r} is a placeholder; put the camera's serial there "
                          f"(`robot-rl cameras list` prints them), e.g. {kind}:123456789012={name}")
    return CameraConfig(kind=kind, device=device, name=name, image_size=int(image_size), **options)


def open_camera(config: CameraConfig) -> ThreadedCamera:
    """A ThreadedCamera over the source for `config.kind` (the library is imported lazily)."""
    source: FrameSource
    if config.kind == "realsense":
        from envs.hardware.realsense import RealSenseSource

        source = RealSenseSource(config)
    else:
        from envs.hardware.opencv_camera import OpenCVSource

        source = OpenCVSource(config)
    return ThreadedCamera(config, source)


def make_cameras(specs: Sequence[str | CameraConfig], image_size: int = 128,
                 options: Mapping[str, Any] | None = None) -> MultiCameras:
    """MultiCameras from spec strings or configs (all at `image_size`)."""
    configs = [s if isinstance(s, CameraConfig) else parse_camera_spec(s, image_size, **dict(options or {}))
               for s in specs]
    cams: list[ThreadedCamera] = []
    try:
        for c in configs:
            cams.append(open_camera(c))
        return MultiCameras(cams)
    except BaseException:
        for cam in cams:
            cam.close()
        raise
