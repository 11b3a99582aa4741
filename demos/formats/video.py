"""Episode frames as pictures: a PNG strip of the cameras sampled over time, and mp4 video through an `ffmpeg` binary
(the one on PATH, else the one bundled by the `video` extra's imageio-ffmpeg). Used by `robot-rl episodes export`
and the LeRobot dataset export (demos.formats.lerobot).

Usage::

    img, idx = camera_strip(ep, n_frames=8)                 # rows = cameras, columns = frames over time
    ffmpeg = find_ffmpeg()                                   # None: no binary (PNG strips instead)
    write_mp4("out/episode_000000.mp4", video_frames(ep), fps=10.0, ffmpeg=ffmpeg)
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from demos.formats.episode_io import EpisodeToolError, camera_names
from robot_rl.episodes import Episode
from robot_rl.images import grid_frames


def sample_indices(n_frames: int, n: int) -> np.ndarray:
    """`n` frame indices spread evenly over 0..n_frames-1 (first and last included; all if n >= n_frames)."""
    if n_frames < 1 or n < 1:
        raise ValueError(f"need n_frames >= 1 and n >= 1, got {n_frames}, {n}")
    if n >= n_frames:
        return np.arange(n_frames)
    if n == 1:
        return np.zeros(1, np.int64)
    return np.floor(np.linspace(0, n_frames - 1, n) + 0.5).astype(np.int64)


def _require_images(file: str | os.PathLike[str], ep: Episode) -> list[str]:
    cams = camera_names(ep)
    if not cams:
        raise EpisodeToolError(f"{file}: the episode has no camera images (recorded in state mode?); "
                               f"observation keys: {', '.join(ep.observations)}")
    return cams


def camera_strip(ep: Episode, n_frames: int, file: str = "episode", pad: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """(image uint8 (H', W', 3), frame indices): rows = cameras, columns = `n_frames` frames sampled over time,
    tiled by `robot_rl.images.grid_frames` with `pad` pixels of white between them."""
    cams = _require_images(file, ep)
    idx = sample_indices(ep.length + 1, n_frames)
    rows = [[ep.observations[f"images/{c}"][i] for i in idx] for c in cams]
    return grid_frames(rows, pad=pad), idx


def video_frames(ep: Episode, file: str = "episode", pad: int = 2) -> list[np.ndarray]:
    """One image per observation: the cameras side by side, padded to even height and width (yuv420p)."""
    cams = _require_images(file, ep)
    frames = []
    for i in range(ep.length + 1):
        img = grid_frames([[ep.observations[f"images/{c}"][i] for c in cams]], pad=pad)
        h, w, _ = img.shape
        if h % 2 or w % 2:
            img = np.pad(img, ((0, h % 2), (0, w % 2), (0, 0)), constant_values=255)
        frames.append(img)
    return frames


def bundled_ffmpeg() -> str | None:
    """The ffmpeg binary shipped in the imageio-ffmpeg wheel (the `video` extra), or None."""
    try:
        import imageio_ffmpeg

        exe = str(imageio_ffmpeg.get_ffmpeg_exe())
    except Exception:  # not installed, or no binary for this platform
        return None
    return exe if os.access(exe, os.X_OK) else None


def find_ffmpeg() -> str | None:
    """The `ffmpeg` binary on PATH, else the bundled one (see `bundled_ffmpeg`), else None."""
    return shutil.which("ffmpeg") or bundled_ffmpeg()


def write_mp4(path: str | os.PathLike[str], frames: Sequence[np.ndarray], fps: float, ffmpeg: str) -> Path:
    """Pipe raw RGB frames (all the same (H, W, 3) uint8, H and W even) into `ffmpeg` (its default mp4 codec,
    yuv420p); written atomically."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    h, w, _ = frames[0].shape
    tmp = out.with_name(f".{out.stem}.tmp{out.suffix}")
    cmd = [ffmpeg, "-hide_banner", "-loglevel", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24",
           "-s", f"{w}x{h}", "-r", f"{fps:g}", "-i", "-", "-an", "-pix_fmt", "yuv420p", str(tmp)]
    data = b"".join(np.ascontiguousarray(f, np.uint8).tobytes() for f in frames)
    try:
        proc = subprocess.run(cmd, input=data, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    except OSError as e:
        raise EpisodeToolError(f"{out}: cannot run {ffmpeg}: {e}") from e
    rc, stderr = proc.returncode, proc.stderr.decode(errors="replace")
    if rc != 0 or not tmp.exists():
        tmp.unlink(missing_ok=True)
        raise EpisodeToolError(f"{out}: ffmpeg failed (exit {rc}): {stderr.strip()[-500:]}")
    tmp.replace(out)
    return out
