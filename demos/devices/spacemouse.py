"""3Dconnexion SpaceMouse as a teleop device: raw HID reports decoded here, read through `hidapi`.

Pure core: `decode_spacemouse_report(bytes) -> SpaceMouseReport`, `SpaceMouseState.apply(report)` (the
device's latest 6 axes and buttons), `spacemouse_to_input(state, cfg) -> DeviceInput`, and
`find_spacemouse(hid.enumerate(), cfg)`. The adapter `SpaceMouseTeleop` opens the device with `hid.device()`
(non-blocking) and drains all pending reports on every poll.

HID reports (3Dconnexion): report id 1 = translation x, y, z as 3 x int16 little-endian (7 bytes); report
id 2 = rotation rx, ry, rz likewise; report id 3 = buttons as a little-endian bitmask (bit 0 = left button).
Newer devices (SpaceMouse Compact/Wireless/Pro Wireless) send all 6 axes in report 1 (13 bytes). Other ids
(battery level, ...) are ignored. Full scale is about +-350 counts. Device frame: x right, y towards the user,
z down (pushing the cap down is +z); rotations about those axes.

Default mapping (`SpaceMouseConfig`), for an operator facing the robot along its +x axis: pushing the cap
away from you moves the gripper away (+x), left -> +y, lifting the cap -> +z, and rotations the same way
(tilting the cap away = rotation about the base y axis). Flip `axis_sign` entries to change a direction.

Usage::

    dev = SpaceMouseTeleop(SpaceMouseConfig(deadzone=0.1, scale=(1, 1, 1, 0.5, 0.5, 0.5)))
    dev.open()                      # DeviceNotFoundError / MissingExtraError naming the 'teleop' extra
    cmd = dev.poll(state)           # left button: gripper toggle, right button: intervention toggle
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from demos.devices.core import (
    ACTIONS,
    CommandLatch,
    DeviceInput,
    apply_deadzone_and_scale,
    map_axes,
    require_axis_map,
    require_axis_shaping,
    require_bindings,
)
from demos.devices.errors import DeviceDisconnectedError, DeviceNotFoundError, DeviceReportError
from envs.devices import HumanCommand
from robot_rl.config import Config, require
from robot_rl.errors import MissingExtraError
from robot_rl.extras import install_hint, optional_import

VENDOR_3DCONNEXION = 0x256F
"""3Dconnexion's own USB vendor id: every product id is a SpaceMouse (or its wireless receiver)."""

VENDOR_LOGITECH = 0x046D
"""Older 3Dconnexion devices carry Logitech's vendor id; only the product ids in `LOGITECH_SPACEMICE` match."""

LOGITECH_SPACEMICE = {
    0xC603: "SpaceMouse Plus XT", 0xC605: "CADMan", 0xC606: "SpaceMouse Classic", 0xC621: "SpaceBall 5000",
    0xC623: "SpaceTraveler", 0xC625: "SpacePilot", 0xC626: "SpaceNavigator", 0xC627: "SpaceExplorer",
    0xC628: "SpaceNavigator for Notebooks", 0xC629: "SpacePilot Pro", 0xC62B: "SpaceMouse Pro",
}

_MULTI_AXIS_USAGE = (0x01, 0x08)  # HID usage page Generic Desktop, usage Multi-axis Controller


@dataclasses.dataclass(frozen=True)
class SpaceMouseConfig(Config):
    """A SpaceMouse: which device, how its axes map to the base frame, and what its buttons do."""

    deadzone: float = 0.1
    """Dead zone on each normalised axis (fraction of full scale, in [0, 1)); beyond it the output is rescaled."""
    scale: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0, 1.0, 1.0)
    """Per-output-axis gain (x, y, z, rx, ry, rz) applied after the dead zone; the result is clipped to [-1, 1]."""
    axis_map: tuple[int, ...] = (1, 0, 2, 4, 3, 5)
    """For each output axis (x, y, z, rx, ry, rz), the device axis (0..5 = x, y, z, rx, ry, rz) driving it."""
    axis_sign: tuple[float, ...] = (-1.0, -1.0, -1.0, -1.0, -1.0, -1.0)
    """Sign (+1 / -1) of each output axis."""
    full_scale: float = 350.0
    """Raw counts that map to a deflection of 1.0 (larger readings are clipped)."""
    buttons: tuple[tuple[int, str], ...] = ((0, "gripper_toggle"), (1, "intervene_toggle"))
    """(button bit, action) pairs; bit 0 = left button, 1 = right button. Actions: see demos.devices.ACTIONS."""
    vendor_id: int | None = None
    """USB vendor id to open; None: any known SpaceMouse (3Dconnexion's id, or Logitech's with a known product)."""
    product_id: int | None = None
    """USB product id to open; None: any."""
    path: str | None = None
    """hidapi device path to open (overrides vendor/product ids); see `hid.enumerate()`."""
    hid_backend: str = "auto"
    """'hid' (hidapi's default module), 'hidraw' (Linux hidraw backend) or 'auto' (hidraw on Linux, else hid)."""
    max_reports_per_poll: int = 256
    """Upper bound on reports drained in one poll (the device sends ~60-120 per second)."""
    gripper_open_width_m: float = 0.07
    """The first gripper toggle of an episode opens the gripper if the robot's width is below this, else closes."""

    def validate(self) -> None:
        require_axis_shaping(self)
        require_axis_map(self)
        require(self.full_scale > 0, "full_scale", self.full_scale, "must be > 0")
        require_bindings("buttons", self.buttons, "index", ACTIONS)
        for name in ("vendor_id", "product_id"):
            value = getattr(self, name)
            require(value is None or (isinstance(value, int) and 0 <= value <= 0xFFFF), name, value,
                    "must be None or a 16-bit USB id")
        require(self.hid_backend in ("auto", "hid", "hidraw"), "hid_backend", self.hid_backend,
                "must be 'auto', 'hid' or 'hidraw'")
        require(self.max_reports_per_poll >= 1, "max_reports_per_poll", self.max_reports_per_poll, "must be >= 1")
        require(self.gripper_open_width_m >= 0, "gripper_open_width_m", self.gripper_open_width_m, "must be >= 0")


# ------------------------------------------------------------------------------------------------- decoding
@dataclasses.dataclass(frozen=True)
class SpaceMouseReport:
    """One decoded HID report; fields the report does not carry are None.

    translation / rotation: raw counts (x, y, z) / (rx, ry, rz) in the device frame (int16 each).
    buttons: bitmask of pressed buttons (bit 0 = left).
    """

    report_id: int
    translation: tuple[int, int, int] | None = None
    rotation: tuple[int, int, int] | None = None
    buttons: int | None = None


def _int16_triplet(data: bytes, start: int) -> tuple[int, int, int]:
    vals = np.frombuffer(data, dtype="<i2", count=3, offset=start)
    return int(vals[0]), int(vals[1]), int(vals[2])


def decode_spacemouse_report(data: bytes | bytearray | Sequence[int]) -> SpaceMouseReport:
    """Decode one raw HID report (report id first, as `hid.device().read()` returns it).

    Report 1: 7 bytes (translation) or >= 13 bytes (translation then rotation); report 2: rotation (>= 7 bytes);
    report 3: buttons (>= 2 bytes, little-endian bitmask of all following bytes); other ids: nothing decoded.
    Raises `DeviceReportError` for an empty or too-short report, or values that are not bytes.
    """
    try:
        raw = bytes(data)
    except (TypeError, ValueError) as err:
        raise DeviceReportError(f"SpaceMouse report is not a byte sequence: {err}") from err
    if not raw:
        raise DeviceReportError("empty SpaceMouse report")
    rid = raw[0]
    if rid in (1, 2):
        if len(raw) < 7:
            raise DeviceReportError(f"SpaceMouse report {rid} has {len(raw)} bytes, needs 7 (id + 3 x int16)")
        first = _int16_triplet(raw, 1)
        if rid == 2:
            return SpaceMouseReport(rid, rotation=first)
        if len(raw) >= 13:
            return SpaceMouseReport(rid, translation=first, rotation=_int16_triplet(raw, 7))
        return SpaceMouseReport(rid, translation=first)
    if rid == 3:
        if len(raw) < 2:
            raise DeviceReportError("SpaceMouse button report 3 has no button bytes")
        return SpaceMouseReport(rid, buttons=int.from_bytes(raw[1:], "little"))
    return SpaceMouseReport(rid)


@dataclasses.dataclass
class SpaceMouseState:
    """The device's latest readings, updated report by report.

    counts (6,) int: x, y, z, rx, ry, rz in raw counts (device frame). buttons: bitmask held now.
    buttons_seen: OR of every button mask since the last `take_buttons()` (so a press and release between two
    polls still counts as a press).
    """

    counts: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(6, dtype=np.int64))
    buttons: int = 0
    buttons_seen: int = 0

    def apply(self, report: SpaceMouseReport) -> SpaceMouseState:
        """Update from one report (only the parts it carries); returns self."""
        if report.translation is not None:
            self.counts[:3] = report.translation
        if report.rotation is not None:
            self.counts[3:] = report.rotation
        if report.buttons is not None:
            self.buttons = report.buttons
            self.buttons_seen |= report.buttons
        return self

    def take_buttons(self) -> int:
        """Buttons held now or pressed since the last call (bitmask); clears the 'pressed since' memory."""
        mask = self.buttons | self.buttons_seen
        self.buttons_seen = 0
        return mask

    def normalized(self, full_scale: float) -> np.ndarray:
        """(6,) axes in [-1, 1]: counts / full_scale, clipped."""
        return np.clip(self.counts.astype(np.float64) / float(full_scale), -1.0, 1.0)


def spacemouse_to_input(state: SpaceMouseState, cfg: SpaceMouseConfig, buttons: int | None = None) -> DeviceInput:
    """The device input for `state`: axes normalised, mapped to the base frame, dead-zoned and scaled; bound
    buttons of `buttons` (default `state.buttons`) as held actions."""
    mask = state.buttons if buttons is None else int(buttons)
    raw = map_axes(state.normalized(cfg.full_scale), cfg.axis_map, cfg.axis_sign)
    delta = apply_deadzone_and_scale(raw, cfg)
    held = frozenset(action for bit, action in cfg.buttons if mask >> bit & 1)
    return DeviceInput(delta_ee=delta, held=held, buttons_held=mask != 0)


# ------------------------------------------------------------------------------------------------ discovery
def _describe(info: dict[str, Any]) -> str:
    name = info.get("product_string") or "?"
    return f"{name} ({int(info.get('vendor_id', 0)):04x}:{int(info.get('product_id', 0)):04x})"


def find_spacemouse(infos: Sequence[dict[str, Any]], cfg: SpaceMouseConfig) -> dict[str, Any]:
    """Pick the SpaceMouse to open among `hid.enumerate()` entries (dicts with vendor_id, product_id, path,
    usage_page, usage, product_string). Prefers the multi-axis-controller interface of a device.

    Raises `DeviceNotFoundError` naming what was looked for and what was found.
    """

    def matches(info: dict[str, Any]) -> bool:
        vid, pid = int(info.get("vendor_id", -1)), int(info.get("product_id", -1))
        if cfg.path is not None:
            path = info.get("path")
            path_str = path.decode(errors="replace") if isinstance(path, bytes) else str(path)
            return path_str == cfg.path
        if cfg.vendor_id is not None or cfg.product_id is not None:
            return (cfg.vendor_id is None or vid == cfg.vendor_id) and (cfg.product_id is None or pid == cfg.product_id)
        return vid == VENDOR_3DCONNEXION or (vid == VENDOR_LOGITECH and pid in LOGITECH_SPACEMICE)

    found = [info for info in infos if matches(info)]
    if not found:
        if cfg.path is not None:
            wanted = f"path {cfg.path!r}"
        elif cfg.vendor_id is not None or cfg.product_id is not None:
            vid = "any" if cfg.vendor_id is None else f"{cfg.vendor_id:04x}"
            pid = "any" if cfg.product_id is None else f"{cfg.product_id:04x}"
            wanted = f"USB id {vid}:{pid}"
        else:
            wanted = f"3Dconnexion vendor id {VENDOR_3DCONNEXION:04x} or a known {VENDOR_LOGITECH:04x} SpaceMouse"
        seen = ", ".join(sorted({_describe(i) for i in infos})) or "no HID devices at all"
        raise DeviceNotFoundError(
            f"no SpaceMouse found ({wanted}); HID devices seen: {seen}. Plug it in; on Linux give your user "
            f"access to /dev/hidraw* (a udev rule); hidapi comes with the 'teleop' extra: {install_hint('teleop')}"
        )
    preferred = [i for i in found if (i.get("usage_page"), i.get("usage")) == _MULTI_AXIS_USAGE]
    return (preferred or found)[0]


# -------------------------------------------------------------------------------------------------- adapter
class SpaceMouseTeleop:
    """The SpaceMouse teleop device (an `envs.devices.HumanDevice`). `hid_module` replaces the hidapi module (tests)."""

    name = "spacemouse"

    def __init__(self, config: SpaceMouseConfig | None = None, hid_module: Any = None) -> None:
        self.config = config or SpaceMouseConfig()
        self._hid = hid_module
        self._dev: Any = None
        self.state = SpaceMouseState()
        self.latch = CommandLatch(open_width_m=self.config.gripper_open_width_m)
        self.bad_reports = 0
        """Malformed reports skipped so far."""
        self.device_info: dict[str, Any] = {}

    def _hid_lib(self) -> Any:
        if self._hid is not None:
            return self._hid
        backend = self.config.hid_backend
        if backend == "auto":
            backend = "hidraw" if sys.platform.startswith("linux") else "hid"
        if backend == "hidraw":
            try:
                return optional_import("hidraw", extra="teleop", purpose="the SpaceMouse teleop device (hidapi)")
            except ImportError:
                if self.config.hid_backend == "hidraw":
                    raise
        lib = optional_import("hid", extra="teleop", purpose="the SpaceMouse teleop device (hidapi)")
        if not (hasattr(lib, "device") and hasattr(lib, "enumerate")):
            raise MissingExtraError(
                f"the module 'hid' at {getattr(lib, '__file__', '?')} is not the hidapi package's (another package "
                f"named 'hid'?); install hidapi with: {install_hint('teleop')}"
            )
        return lib

    def open(self) -> None:
        """Find and open the device (non-blocking reads). Idempotent."""
        if self._dev is not None:
            return
        hid = self._hid_lib()
        info = find_spacemouse(list(hid.enumerate()), self.config)
        dev = hid.device()
        try:
            path = info.get("path")
            if path is not None:
                dev.open_path(path if isinstance(path, bytes) else str(path).encode())
            else:
                dev.open(int(info["vendor_id"]), int(info["product_id"]))
            dev.set_nonblocking(1)
        except (OSError, ValueError) as err:
            raise DeviceNotFoundError(
                f"found SpaceMouse {_describe(info)} but could not open it ({err}); on Linux give your user "
                "access to /dev/hidraw* (a udev rule) or run with the right permissions"
            ) from err
        self._dev = dev
        self.device_info = dict(info)

    def reset(self) -> None:
        self.open()
        self.latch.reset()
        self.state.take_buttons()

    def read_reports(self) -> int:
        """Drain pending reports into `state`; returns how many were applied. Malformed ones are counted in
        `bad_reports` and skipped; a read error raises `DeviceDisconnectedError`."""
        self.open()
        applied = 0
        for _ in range(self.config.max_reports_per_poll):
            try:
                data = self._dev.read(64)
            except (OSError, ValueError) as err:
                raise DeviceDisconnectedError(f"SpaceMouse {_describe(self.device_info)} read failed: {err}") from err
            if not data:
                break
            try:
                report = decode_spacemouse_report(data)
            except DeviceReportError:
                self.bad_reports += 1
                continue
            self.state.apply(report)
            applied += 1
        return applied

    def poll(self, state: Any = None) -> HumanCommand:
        self.read_reports()
        inp = spacemouse_to_input(self.state, self.config, buttons=self.state.take_buttons())
        return self.latch.step(inp, state)

    def close(self) -> None:
        if self._dev is not None:
            try:
                self._dev.close()
            finally:
                self._dev = None

    def __enter__(self) -> SpaceMouseTeleop:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
