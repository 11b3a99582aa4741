"""Dependency-free PNG writing for uint8 RGB frames (camera strips, previews).

Usage::

    write_png("strip.png", hstack_frames([front_hw3, wrist_hw3]))
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from robot_rl.errors import ShapeError


def encode_png(rgb_hw3: np.ndarray) -> bytes:
    """Encode a uint8 array of shape (H, W, 3) as PNG bytes."""
    img = np.asarray(rgb_hw3)
    if img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3:
        raise ShapeError(f"PNG needs uint8 (H, W, 3), got {img.dtype} {img.shape}")
    h, w, _ = img.shape
    raw = np.concatenate([np.zeros((h, 1), np.uint8), img.reshape(h, w * 3)], axis=1).tobytes()

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")


def write_png(path: str | os.PathLike[str], rgb_hw3: np.ndarray) -> Path:
    """Write atomically (temp file + rename); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_bytes(encode_png(rgb_hw3))
    tmp.replace(out)
    return out


def grid_frames(rows: Sequence[Sequence[np.ndarray]], pad: int = 2) -> np.ndarray:
    """Tile frames (each uint8 (H, W, 3), all the same size) into one image, rows x columns, white padding."""
    if not rows or not rows[0]:
        raise ShapeError("grid_frames needs at least one frame")
    h, w, _ = np.asarray(rows[0][0]).shape
    ncol = max(len(r) for r in rows)
    out = np.full((len(rows) * (h + pad) + pad, ncol * (w + pad) + pad, 3), 255, np.uint8)
    for i, row in enumerate(rows):
        for j, frame in enumerate(row):
            f = np.asarray(frame)
            if f.shape != (h, w, 3):
                raise ShapeError(f"frame ({i},{j}) has shape {f.shape}, expected {(h, w, 3)}")
            y, x = pad + i * (h + pad), pad + j * (w + pad)
            out[y : y + h, x : x + w] = f
    return out
