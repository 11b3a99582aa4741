"""Dependency-free PNG writing (and reading) for uint8 RGB frames (camera strips, previews, audit frames).

Usage::

    write_png("strip.png", grid_frames([[front_hw3, wrist_hw3]]))
    img = read_png("strip.png")          # uint8 (H, W, 3), exactly the pixels written
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


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def decode_png(data: bytes, where: str = "PNG") -> np.ndarray:
    """Decode PNG bytes of an 8-bit RGB, non-interlaced image (what `encode_png` writes; any of the five row
    filters, so other writers' files of that kind read too) into uint8 (H, W, 3). ShapeError naming `where` for
    anything else (not a PNG, truncated, another colour type or bit depth, interlaced)."""
    if data[:8] != _PNG_SIGNATURE:
        raise ShapeError(f"{where}: not a PNG file")
    pos, header, idat = 8, None, []
    while pos + 8 <= len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if len(body) != length:
            raise ShapeError(f"{where}: truncated PNG (chunk {kind!r})")
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + length
    if header is None or not idat:
        raise ShapeError(f"{where}: PNG without IHDR or IDAT")
    w, h, depth, color, _, _, interlace = header
    if depth != 8 or color != 2 or interlace != 0:
        raise ShapeError(f"{where}: PNG is bit depth {depth}, colour type {color}, interlace {interlace}; this "
                         f"reader takes 8-bit RGB (colour type 2), non-interlaced")
    try:
        raw = zlib.decompress(b"".join(idat))
    except zlib.error as err:
        raise ShapeError(f"{where}: corrupt PNG data ({err})") from err
    stride = w * 3
    if len(raw) != h * (stride + 1):
        raise ShapeError(f"{where}: PNG data is {len(raw)} bytes, expected {h * (stride + 1)} for {w}x{h} RGB")
    rows = np.frombuffer(raw, np.uint8).reshape(h, stride + 1)
    out = np.zeros((h, stride), np.uint8)
    prev = np.zeros(stride, np.int32)
    for y in range(h):
        ftype, line = int(rows[y, 0]), rows[y, 1:].astype(np.int32)
        if ftype == 0:
            cur = line
        elif ftype == 1:  # Sub: each byte plus the byte one pixel (3 bytes) to the left
            cur = np.cumsum(line.reshape(w, 3), axis=0).reshape(stride) & 0xFF
        elif ftype == 2:  # Up
            cur = (line + prev) & 0xFF
        elif ftype in (3, 4):  # Average / Paeth: sequential along the row
            cur = np.zeros(stride, np.int32)
            for x in range(stride):
                a = int(cur[x - 3]) if x >= 3 else 0
                b = int(prev[x])
                c = int(prev[x - 3]) if x >= 3 else 0
                if ftype == 3:
                    pred = (a + b) // 2
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[x] = (int(line[x]) + pred) & 0xFF
        else:
            raise ShapeError(f"{where}: PNG row {y} has unknown filter type {ftype}")
        out[y] = cur
        prev = cur
    return out.reshape(h, w, 3)


def read_png(path: str | os.PathLike[str]) -> np.ndarray:
    """Read an 8-bit RGB PNG file (`decode_png`) into uint8 (H, W, 3); ShapeError naming the file."""
    return decode_png(Path(path).read_bytes(), where=str(path))


def write_png(path: str | os.PathLike[str], rgb_hw3: np.ndarray) -> Path:
    """Write atomically (temp file + rename); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_bytes(encode_png(rgb_hw3))
    tmp.replace(out)
    return out


def grid_size(nrows: int, ncols: int, frame_hw: tuple[int, int], pad: int = 2) -> tuple[int, int]:
    """(height, width) in pixels of a `grid_frames` image of nrows x ncols frames of frame_hw = (H, W)."""
    h, w = frame_hw
    return nrows * (h + pad) + pad, ncols * (w + pad) + pad


def _cell_origin(i: int, j: int, frame_hw: tuple[int, int], pad: int) -> tuple[int, int]:
    """(y, x) of the top-left pixel of cell (row i, column j) in a `grid_frames` image: the one layout definition
    the writer (grid_frames) and the reader (ungrid_frames) share."""
    return pad + i * (frame_hw[0] + pad), pad + j * (frame_hw[1] + pad)


def grid_frames(rows: Sequence[Sequence[np.ndarray]], pad: int = 2) -> np.ndarray:
    """Tile frames (each uint8 (H, W, 3), all the same size) into one image, rows x columns, white padding
    (`ungrid_frames` cuts them out again)."""
    if not rows or not rows[0]:
        raise ShapeError("grid_frames needs at least one frame")
    h, w, _ = np.asarray(rows[0][0]).shape
    ncol = max(len(r) for r in rows)
    out = np.full((*grid_size(len(rows), ncol, (h, w), pad), 3), 255, np.uint8)
    for i, row in enumerate(rows):
        for j, frame in enumerate(row):
            f = np.asarray(frame)
            if f.shape != (h, w, 3):
                raise ShapeError(f"frame ({i},{j}) has shape {f.shape}, expected {(h, w, 3)}")
            y, x = _cell_origin(i, j, (h, w), pad)
            out[y : y + h, x : x + w] = f
    return out


def ungrid_frames(img: np.ndarray, nrows: int, ncols: int, frame_hw: tuple[int, int],
                  pad: int = 2) -> list[list[np.ndarray]]:
    """The inverse of `grid_frames`: the nrows x ncols frames (uint8 (H, W, 3) copies) of a grid image `img`
    (uint8 (rows, cols, 3)). ShapeError when the image is not that grid's size or its padding is not white (not a
    grid of frames of this size)."""
    h, w = frame_hw
    want = grid_size(nrows, ncols, frame_hw, pad)
    if img.ndim != 3 or img.shape[:2] != want or img.shape[2] != 3:
        raise ShapeError(f"image is {'x'.join(map(str, img.shape))}, expected {want[0]}x{want[1]}x3 for "
                         f"{nrows}x{ncols} frames of {h}x{w} + {pad} px padding")
    mask = np.ones(want, bool)  # True on padding: every cell cleared as it is cut out
    out = []
    for i in range(nrows):
        row = []
        for j in range(ncols):
            y, x = _cell_origin(i, j, frame_hw, pad)
            mask[y : y + h, x : x + w] = False
            row.append(np.ascontiguousarray(img[y : y + h, x : x + w]))
        out.append(row)
    if not (img[mask] == 255).all():
        raise ShapeError(f"image does not have white {pad} px padding between {h}x{w} frames")
    return out
