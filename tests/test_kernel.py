"""robot_rl kernel: config base, specs, PNG writer, CLI front door, lazy extras."""

from __future__ import annotations

import dataclasses
import struct
import zlib

import numpy as np
import pytest

from robot_rl.cli import SUBCOMMANDS, main
from robot_rl.config import Config, require
from robot_rl.errors import ConfigError, MissingExtraError, ShapeError, SpecMismatchError
from robot_rl.extras import optional_import
from robot_rl.images import encode_png, grid_frames, grid_size, ungrid_frames, write_png
from robot_rl.specs import ArraySpec, EnvSpec


@dataclasses.dataclass(frozen=True)
class _Cfg(Config):
    rate_hz: float = 10.0
    names: tuple[str, ...] = ("a", "b")

    def validate(self) -> None:
        require(self.rate_hz > 0, "rate_hz", self.rate_hz, "must be > 0")


def test_config_validates_and_round_trips() -> None:
    cfg = _Cfg(rate_hz=20.0)
    assert _Cfg.from_dict(cfg.to_dict()) == cfg
    assert cfg.replace(rate_hz=5.0).rate_hz == 5.0
    with pytest.raises(ConfigError, match="rate_hz"):
        _Cfg(rate_hz=-1.0)
    with pytest.raises(ConfigError, match="rate_hz"):
        cfg.replace(rate_hz=0.0)
    with pytest.raises(ConfigError, match="unknown field"):
        _Cfg.from_dict({"rate_hz": 1.0, "typo": 3})


class _Box:
    def __init__(self, shape: tuple[int, ...], dtype: str, low: float, high: float) -> None:
        self.shape, self.dtype = shape, np.dtype(dtype)
        self.low, self.high = np.full(shape, low), np.full(shape, high)


class _Dict:
    def __init__(self, spaces: dict) -> None:
        self.spaces = spaces


def _spec(task: str = "t", h: int = 64) -> EnvSpec:
    cam = _Box((h, h, 3), "uint8", 0, 255)
    obs = _Dict({"state": _Box((19,), "float32", -np.inf, np.inf), "images": _Dict({"wrist": cam, "front": cam})})
    return EnvSpec.from_spaces(task, obs, _Box((7,), "float32", -1, 1), control_hz=10.0)


def test_spec_flattens_nested_dicts_and_finds_cameras() -> None:
    spec = _spec()
    assert [s.name for s in spec.observation] == ["images/front", "images/wrist", "state"]
    assert [c.name for c in spec.cameras] == ["images/front", "images/wrist"]
    assert spec.action == ArraySpec("action", (7,), "float32", -1.0, 1.0)
    assert EnvSpec.from_dict(spec.to_dict()) == spec


def test_spec_diff_names_the_differing_fields() -> None:
    a, b = _spec("t", 64), _spec("u", 128)
    assert a.diff(a) == []
    assert a.diff(b) == ["task", "observation/images/front", "observation/images/wrist"]
    with pytest.raises(SpecMismatchError) as err:
        a.require_equal(b)
    assert "task" in err.value.fields and "observation/images/front" in str(err.value)
    with pytest.raises(SpecMismatchError):
        EnvSpec.from_dict({"task": "x"})


def test_spec_checks_observations() -> None:
    spec = _spec()
    img = np.zeros((64, 64, 3), np.uint8)
    good = {"state": np.zeros(19, np.float32), "images": {"front": img, "wrist": img}}
    spec.check_observation(good)
    with pytest.raises(ShapeError, match="images/wrist"):
        spec.check_observation({**good, "images": {"front": img, "wrist": img.astype(np.float32)}})
    with pytest.raises(ShapeError, match="keys"):
        spec.check_observation({"state": np.zeros(19, np.float32)})


def _decode_png(data: bytes) -> np.ndarray:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, size = 8, b"", (0, 0)
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n : pos + 12 + n])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h = size
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + 3 * w)
    assert np.all(raw[:, 0] == 0)
    return raw[:, 1:].reshape(h, w, 3)


def test_png_round_trip_and_grid(tmp_path) -> None:
    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 256, (8, 6, 3), dtype=np.uint8) for _ in range(3)]
    grid = grid_frames([frames[:2], frames[2:]], pad=1)
    assert grid.shape == (2 * 9 + 1, 2 * 7 + 1, 3)
    np.testing.assert_array_equal(grid[1:9, 1:7], frames[0])
    np.testing.assert_array_equal(grid[10:18, 1:7], frames[2])
    path = write_png(tmp_path / "x" / "g.png", grid)
    np.testing.assert_array_equal(_decode_png(path.read_bytes()), grid)
    with pytest.raises(ShapeError):
        encode_png(np.zeros((4, 4), np.float32))
    # the inverse: the frames back, a short row's missing cell white; the wrong size or padding refused
    back = ungrid_frames(grid, 2, 2, (8, 6), pad=1)
    np.testing.assert_array_equal(np.stack([back[0][0], back[0][1], back[1][0]]), np.stack(frames))
    assert (back[1][1] == 255).all() and grid_size(2, 2, (8, 6), pad=1) == grid.shape[:2]
    with pytest.raises(ShapeError, match="expected 19x15x3 for 2x2 frames of 8x6"):
        ungrid_frames(grid[:-1], 2, 2, (8, 6), pad=1)
    with pytest.raises(ShapeError, match="white 2 px padding"):
        ungrid_frames(np.roll(grid_frames([frames[:2]], pad=2), 1, axis=1), 1, 2, (8, 6), pad=2)


def test_cli_help_and_unknown_command(capsys) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in SUBCOMMANDS:
        assert name in out
    assert main(["no-such-command"]) == 2
    assert "unknown command" in capsys.readouterr().err


def test_optional_import_names_the_extra() -> None:
    with pytest.raises(MissingExtraError, match=r"\[real\]'"):
        optional_import("definitely_not_installed_pkg_xyz", extra="real", purpose="the franky backend")
    assert optional_import("json", extra="none").dumps([1]) == "[1]"
