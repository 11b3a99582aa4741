"""Checking real cameras before a run (`robot-rl cameras list|show|record`): what is connected, a framing PNG strip
with each camera's measured fps / frame age / exposure, and a short recording.

- `list_cameras()`: every RealSense (serial, model, colour profiles) and every /dev/video* node OpenCV opens.
- `capture_cameras(cfg)` (show): a PNG strip (rows = cameras, columns = frames over `seconds`) at the policy's image
  size (crop + resize as the robot server does), plus the per-camera numbers; with `record_dir` (record) also
  DIR/cameras.npz (`images/<name>` uint8 (T, H, W, 3), `t_s/<name>` float64 (T,) capture times) and DIR/strip.png.

Usage::

    list_cameras()                                                     # prints; returns 0
    capture_cameras(CameraCaptureConfig(specs=("realsense:123456789012=front",), out=Path("framing.png")))
    capture_cameras(CameraCaptureConfig(specs=("opencv:/dev/video0=wrist",), seconds=5.0, record_dir=Path("cams")))
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from envs.hardware.cameras import CameraError, MultiCameras, make_cameras
from robot_rl.config import Config, require
from robot_rl.errors import MissingExtraError


@dataclasses.dataclass(frozen=True)
class CameraCaptureConfig(Config):
    """Options of `capture_cameras` (`robot-rl cameras show` / `record`)."""

    specs: tuple[str, ...] = ()
    """Camera specs KIND:ID=NAME (envs.hardware.cameras)."""
    image_size: int = 128
    """Output size (the policy's)."""
    width: int = 640
    """Capture width."""
    height: int = 480
    """Capture height."""
    fps: int = 30
    """Capture rate."""
    exposure_us: float | None = None
    """Fixed exposure in us (None: auto)."""
    seconds: float = 2.0
    """How long to capture."""
    rate: float = 10.0
    """Frames read per second (the policy's rate)."""
    out: Path = Path("cameras.png")
    """show: the PNG strip's path."""
    record_dir: Path | None = None
    """record: the output directory (cameras.npz and strip.png); None: show."""

    def validate(self) -> None:
        require(len(self.specs) > 0, "specs", self.specs, "must name at least one camera")
        require(self.rate > 0, "rate", self.rate, "must be > 0")


def capture_cameras(cfg: CameraCaptureConfig) -> int:
    """Read every camera at `cfg.rate` for `cfg.seconds`; write the strip (and with `record_dir` the recording);
    print one line per camera and what was written. Returns 0."""
    from robot_rl.images import grid_frames, write_png

    options = {"width": cfg.width, "height": cfg.height, "fps": cfg.fps, "exposure_us": cfg.exposure_us}
    cams = make_cameras(list(cfg.specs), image_size=cfg.image_size, options=options)
    try:
        frames, times = _capture(cams, cfg.seconds, cfg.rate)
    finally:
        cams.close()
    names = cams.names
    n_cols = min(8, min(len(frames[n]) for n in names))
    picks = {n: np.linspace(0, len(frames[n]) - 1, n_cols).round().astype(int) for n in names}
    strip = grid_frames([[frames[n][i] for i in picks[n]] for n in names])
    png = write_png(cfg.out if cfg.record_dir is None else cfg.record_dir / "strip.png", strip)
    for d in cams.describe():
        n = d["name"]
        t = np.asarray(times[n])
        fps = (len(t) - 1) / (t[-1] - t[0]) if len(t) > 1 and t[-1] > t[0] else 0.0
        rest = {k: v for k, v in d.items() if k not in ("name", "frames")}
        print(f"{n}: {len(t)} frames read at {fps:.1f}/s, device frames {d['frames']}, {json.dumps(rest)}")
    if cfg.record_dir is not None:
        cfg.record_dir.mkdir(parents=True, exist_ok=True)
        arrays: dict[str, Any] = {}
        for n in names:
            arrays[f"images/{n}"] = np.stack(frames[n])
            arrays[f"t_s/{n}"] = np.asarray(times[n], np.float64)
        np.savez_compressed(cfg.record_dir / "cameras.npz", **arrays)
        print(f"wrote {cfg.record_dir / 'cameras.npz'} and {png}")
    else:
        print(f"wrote {png} (rows = cameras {', '.join(names)}; columns = {n_cols} moments)")
    return 0


def _capture(cams: MultiCameras, seconds: float, rate: float) -> tuple[dict[str, list[np.ndarray]],
                                                                       dict[str, list[float]]]:
    """Read every camera at `rate` for `seconds` (the first read waits for the devices to start)."""
    frames: dict[str, list[np.ndarray]] = {n: [] for n in cams.names}
    times: dict[str, list[float]] = {n: [] for n in cams.names}
    t_start = time.monotonic()
    deadline = t_start + max(seconds, 0.0) + 5.0  # devices take a moment to start
    while True:
        try:
            got = cams.read()
        except CameraError:
            if time.monotonic() > deadline or any(frames.values()):
                raise
            continue
        now = time.monotonic()
        for n, img in got.items():
            frames[n].append(np.array(img))
            times[n].append(now)
        if now - min(times[n][0] for n in cams.names) >= seconds:
            return frames, times
        time.sleep(max(0.0, 1.0 / rate - (time.monotonic() - now)))


def list_cameras() -> int:
    """Print every RealSense and /dev/video* node (or why a library is missing); returns 0."""
    found = 0
    try:
        from envs.hardware.realsense import list_realsense

        devices = list_realsense()
        for d in devices:
            profiles = ", ".join(d["color_profiles"]) or d.get("error", "-")
            print(f"realsense {d['serial']}  {d['name']}  colour: {profiles}")
        found += len(devices)
        if not devices:
            print("realsense: no device connected")
    except MissingExtraError as err:
        print(f"realsense: {err}")
    try:
        from envs.hardware.opencv_camera import list_opencv

        nodes = list_opencv()
        for n in nodes:
            detail = f"{n['width']}x{n['height']}@{n['fps']:.0f}" if n["opens"] else "does not open"
            print(f"opencv {n['device']}  {detail}")
        found += sum(1 for n in nodes if n["opens"])
        if not nodes:
            print("opencv: no /dev/video* node")
    except MissingExtraError as err:
        print(f"opencv: {err}")
    print(f"{found} camera(s)")
    return 0
