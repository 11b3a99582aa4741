"""Teleop devices without hardware: the shared core, SpaceMouse HID decoding + adapter, keyboard mapping, and
`make_device`. The gamepad (through pygame's SDL) is in test_teleop_gamepad.py. pynput is never imported here
(it needs a display)."""

from __future__ import annotations

import struct
import sys
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from demos.devices import (
    ACTIONS,
    AXES,
    CommandLatch,
    DeviceInput,
    GamepadConfig,
    KeyboardConfig,
    KeyboardTeleop,
    KeyState,
    SpaceMouseConfig,
    SpaceMouseReport,
    SpaceMouseState,
    SpaceMouseTeleop,
    apply_deadzone_and_scale,
    build_hardware_device,
    decode_spacemouse_report,
    find_spacemouse,
    keys_to_command,
    map_axes,
    pynput_key_name,
    spacemouse_to_input,
)
from demos.devices.errors import DeviceDisconnectedError, DeviceNotFoundError, DeviceReportError
from demos.devices.teleop import DEVICES, make_device
from envs.devices import EVENTS, HumanDevice
from robot_rl.errors import ConfigError, MissingExtraError, ShapeError

ZERO = np.zeros(6)


def unit(axis: str, sign: float = 1.0) -> np.ndarray:
    v = np.zeros(6)
    v[AXES.index(axis)] = sign
    return v


# ------------------------------------------------------------------------------------------------ core
def test_deadzone_rescales_continuously_and_scales_per_axis() -> None:
    cfg = SimpleNamespace(deadzone=0.1, scale=(1.0, 1.0, 0.5, 1.0, 1.0, 2.0))
    out = apply_deadzone_and_scale([0.05, -0.55, 1.0, -1.0, 0.1, 0.3], cfg)
    np.testing.assert_allclose(out, [0.0, -0.5, 0.5, -1.0, 0.0, 2 * (0.2 / 0.9)], atol=1e-12)
    # beyond [-1, 1] inputs are clipped, non-finite ones count as 0 (hold still)
    out = apply_deadzone_and_scale([3.0, -7.0, np.nan, np.inf, 0, 0], SimpleNamespace(deadzone=0.0, scale=(1,) * 6))
    np.testing.assert_allclose(out, [1.0, -1.0, 0.0, 0.0, 0.0, 0.0])
    with pytest.raises(ShapeError):
        apply_deadzone_and_scale([0.0] * 5, cfg)


@settings(max_examples=200, deadline=None)
@given(st.floats(-1, 1), st.floats(-1, 1), st.floats(0, 0.9))
def test_deadzone_is_monotonic_odd_and_bounded(a: float, b: float, dz: float) -> None:
    cfg = SimpleNamespace(deadzone=dz, scale=(1.0,) * 6)
    fa = apply_deadzone_and_scale([a, -a, 0, 0, 0, 0], cfg)
    fb = apply_deadzone_and_scale([b, 0, 0, 0, 0, 0], cfg)
    assert fa[0] == pytest.approx(-fa[1])                      # odd
    assert abs(fa[0]) <= 1.0
    if a <= b:
        assert fa[0] <= fb[0] + 1e-12                           # monotonic
    if abs(a) <= dz:
        assert fa[0] == 0.0


def test_map_axes_permutes_and_flips() -> None:
    raw = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    np.testing.assert_array_equal(map_axes(raw, (1, 0, 2, 4, 3, 5), (-1, 1, -1, 1, 1, -1)), [-2, 1, -3, 5, 4, -6])


def inp(delta: np.ndarray = ZERO, held: tuple[str, ...] = (), buttons: bool = False) -> DeviceInput:
    return DeviceInput(delta_ee=np.asarray(delta, float), held=frozenset(held), buttons_held=buttons or bool(held))


def test_latch_fires_edge_events_once_per_press() -> None:
    latch = CommandLatch()
    events = [latch.step(inp(held=("success",))).events for _ in range(3)]
    assert events == [frozenset({"success"}), frozenset(), frozenset()]
    assert latch.step(inp()).events == frozenset()
    assert latch.step(inp(held=("success", "quit"))).events == frozenset({"success", "quit"})
    assert set(ACTIONS) >= {"success", "failure", "rerecord", "quit"} and set(EVENTS) >= {"intervene"}


def test_latch_gripper_toggle_close_open_and_reset() -> None:
    open_state = SimpleNamespace(gripper_width_m=0.08)
    closed_state = SimpleNamespace(gripper_width_m=0.02)
    latch = CommandLatch(open_width_m=0.07)
    assert latch.step(inp(), open_state).gripper == 0.0             # keep until the operator asks
    assert latch.step(inp(held=("gripper_toggle",)), open_state).gripper == 1.0   # open -> close
    assert latch.step(inp(held=("gripper_toggle",)), open_state).gripper == 1.0   # still held: no new edge
    assert latch.step(inp(), open_state).gripper == 1.0             # latched
    assert latch.step(inp(held=("gripper_toggle",))).gripper == -1.0
    assert latch.step(inp(held=("gripper_close",))).gripper == 1.0
    assert latch.step(inp(held=("gripper_open",))).gripper == -1.0
    latch.reset()
    assert latch.step(inp()).gripper == 0.0
    assert latch.step(inp(held=("gripper_toggle",)), closed_state).gripper == -1.0  # closed robot: toggle opens
    latch.reset()
    assert latch.step(inp(held=("gripper_toggle",)), None).gripper == 1.0           # no state: assume open


def test_latch_intervention_toggle_is_a_level_and_makes_active() -> None:
    latch = CommandLatch()
    assert not latch.step(inp()).active
    cmd = latch.step(inp(held=("intervene_toggle",)))
    assert cmd.active and "intervene" in cmd.events
    cmd = latch.step(inp())                                         # released, still intervening, zero delta
    assert cmd.active and cmd.events == frozenset({"intervene"}) and np.all(cmd.delta_ee == 0)
    latch.step(inp(held=("intervene_toggle",)))
    cmd = latch.step(inp())
    assert not cmd.active and cmd.events == frozenset()
    assert latch.step(inp(unit("z", 0.3))).active
    assert latch.step(inp(buttons=True)).active                     # an unbound button held


# ---------------------------------------------------------------------------------------------- configs
@pytest.mark.parametrize("cls,bad", [
    (SpaceMouseConfig, {"deadzone": 1.0}),
    (SpaceMouseConfig, {"deadzone": -0.1}),
    (SpaceMouseConfig, {"scale": (1.0,) * 5}),
    (SpaceMouseConfig, {"scale": (1.0, 1.0, 1.0, 1.0, 1.0, float("nan"))}),
    (SpaceMouseConfig, {"axis_map": (0, 1, 2, 3, 4, 6)}),
    (SpaceMouseConfig, {"axis_sign": (1, 1, 1, 1, 1, 0.5)}),
    (SpaceMouseConfig, {"full_scale": 0.0}),
    (SpaceMouseConfig, {"buttons": ((0, "jump"),)}),
    (SpaceMouseConfig, {"buttons": ((-1, "quit"),)}),
    (SpaceMouseConfig, {"buttons": ((0, "+x"),)}),
    (SpaceMouseConfig, {"vendor_id": 0x10000}),
    (SpaceMouseConfig, {"hid_backend": "usb"}),
    (GamepadConfig, {"axes": ((0, "gripper_toggle"),)}),
    (GamepadConfig, {"buttons": ((0, "fly"),)}),
    (GamepadConfig, {"trigger_axes": (-1,)}),
    (GamepadConfig, {"index": -1}),
    (KeyboardConfig, {"keys": (("W", "+x"),)}),
    (KeyboardConfig, {"keys": (("w", "+q"),)}),
    (KeyboardConfig, {"keys": (("w",),)}),
])
def test_configs_reject_bad_values_naming_the_field(cls: type, bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=next(iter(bad))):
        cls(**bad)


@pytest.mark.parametrize("cfg", [SpaceMouseConfig(), GamepadConfig.for_layout("sdl"), KeyboardConfig()])
def test_configs_round_trip_through_dicts(cfg: Any) -> None:
    assert type(cfg).from_dict(cfg.to_dict()) == cfg


# ------------------------------------------------------------------------------------- SpaceMouse decoding
def report(rid: int, *vals: int) -> bytes:
    return struct.pack("<B" + "h" * len(vals), rid, *vals)


def test_decode_translation_rotation_and_six_axis_reports() -> None:
    assert decode_spacemouse_report(report(1, 100, -200, 350)) == SpaceMouseReport(1, translation=(100, -200, 350))
    assert decode_spacemouse_report(report(2, -1, 32767, -32768)) == SpaceMouseReport(2, rotation=(-1, 32767, -32768))
    six = decode_spacemouse_report(list(report(1, 1, 2, 3, 4, 5, 6)))     # hid.read returns a list of ints
    assert six == SpaceMouseReport(1, translation=(1, 2, 3), rotation=(4, 5, 6))


def test_decode_buttons_and_other_reports() -> None:
    assert decode_spacemouse_report(bytes([3, 0b10, 0])).buttons == 2
    assert decode_spacemouse_report(bytes([3, 0, 1, 0, 0])).buttons == 256   # bit 8: a SpaceMouse Pro key
    assert decode_spacemouse_report(bytes([0x17, 80])) == SpaceMouseReport(0x17)   # battery level: ignored


@pytest.mark.parametrize("data", [b"", bytes([1, 0, 0, 0]), bytes([2, 1]), bytes([3]), [1, 300, 0, 0, 0, 0, 0],
                                  [1, -1, 0, 0, 0, 0, 0], "abc"])
def test_decode_rejects_malformed_reports(data: Any) -> None:
    with pytest.raises(DeviceReportError):
        decode_spacemouse_report(data)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-32768, 32767), min_size=6, max_size=6), st.booleans())
def test_decode_round_trips_any_int16(values: list[int], six_axis: bool) -> None:
    state = SpaceMouseState()
    if six_axis:
        state.apply(decode_spacemouse_report(report(1, *values)))
    else:
        state.apply(decode_spacemouse_report(report(1, *values[:3])))
        state.apply(decode_spacemouse_report(report(2, *values[3:])))
    assert state.counts.tolist() == values


def test_state_keeps_the_part_a_report_does_not_carry_and_remembers_taps() -> None:
    state = SpaceMouseState()
    state.apply(decode_spacemouse_report(report(2, 10, 20, 30)))
    state.apply(decode_spacemouse_report(report(1, 1, 2, 3)))
    assert state.counts.tolist() == [1, 2, 3, 10, 20, 30]
    state.apply(decode_spacemouse_report(bytes([3, 1])))
    state.apply(decode_spacemouse_report(bytes([3, 0])))
    assert state.buttons == 0 and state.take_buttons() == 1 and state.take_buttons() == 0


# device axis (x, y, z, rx, ry, rz = 0..5) pushed positive -> expected base-frame output with the defaults
@pytest.mark.parametrize("device_axis,expected", [
    (1, unit("x", -1)),    # +y: pull the cap towards you -> -x
    (0, unit("y", -1)),    # +x: push right -> -y
    (2, unit("z", -1)),    # +z: push down -> -z
    (4, unit("rx", -1)),
    (3, unit("ry", -1)),
    (5, unit("rz", -1)),
])
def test_default_spacemouse_mapping(device_axis: int, expected: np.ndarray) -> None:
    state = SpaceMouseState()
    state.counts[device_axis] = 350
    got = spacemouse_to_input(state, SpaceMouseConfig())
    np.testing.assert_allclose(got.delta_ee, expected)
    state.counts[device_axis] = 20                       # 20/350 = 0.057 < deadzone 0.1
    assert np.all(spacemouse_to_input(state, SpaceMouseConfig()).delta_ee == 0)


def test_spacemouse_scale_full_scale_and_buttons() -> None:
    cfg = SpaceMouseConfig(deadzone=0.0, scale=(1, 1, 1, 0.5, 0.5, 0.5), full_scale=400.0)
    state = SpaceMouseState(counts=np.array([0, -200, 0, 0, 0, 800]), buttons=0b11)
    got = spacemouse_to_input(state, cfg)
    np.testing.assert_allclose(got.delta_ee, [0.5, 0, 0, 0, 0, -0.5])
    assert got.held == frozenset({"gripper_toggle", "intervene_toggle"}) and got.buttons_held


# -------------------------------------------------------------------------------------- SpaceMouse adapter
class FakeHidDevice:
    def __init__(self, reports: list[Any]) -> None:
        self.reports = list(reports)
        self.opened: Any = None
        self.nonblocking = 0
        self.closed = False

    def open_path(self, path: bytes) -> None:
        self.opened = path

    def open(self, vid: int, pid: int) -> None:
        self.opened = (vid, pid)

    def set_nonblocking(self, v: int) -> None:
        self.nonblocking = v

    def read(self, n: int) -> list[int]:
        if not self.reports:
            return []
        item = self.reports.pop(0)
        if isinstance(item, Exception):
            raise item
        return list(item)[:n]

    def close(self) -> None:
        self.closed = True


class FakeHid:
    """Stands in for the `hid` module: enumerate() and device()."""

    def __init__(self, infos: list[dict[str, Any]], dev: FakeHidDevice) -> None:
        self.infos, self.dev = infos, dev

    def enumerate(self) -> list[dict[str, Any]]:
        return self.infos

    def device(self) -> FakeHidDevice:
        return self.dev


INFOS = [
    {"vendor_id": 0x046D, "product_id": 0xC31C, "path": b"/dev/hidraw0", "product_string": "USB Keyboard",
     "usage_page": 1, "usage": 6},
    {"vendor_id": 0x256F, "product_id": 0xC652, "path": b"/dev/hidraw3", "product_string": "Universal Receiver",
     "usage_page": 0xFF00, "usage": 1},
    {"vendor_id": 0x256F, "product_id": 0xC652, "path": b"/dev/hidraw4", "product_string": "Universal Receiver",
     "usage_page": 1, "usage": 8},
]


def test_find_spacemouse_prefers_the_multi_axis_interface_and_skips_other_logitech_devices() -> None:
    assert find_spacemouse(INFOS, SpaceMouseConfig())["path"] == b"/dev/hidraw4"
    old = {"vendor_id": 0x046D, "product_id": 0xC626, "path": b"/dev/hidraw9", "product_string": "SpaceNavigator"}
    assert find_spacemouse([INFOS[0], old], SpaceMouseConfig())["path"] == b"/dev/hidraw9"
    assert find_spacemouse(INFOS, SpaceMouseConfig(path="/dev/hidraw3"))["path"] == b"/dev/hidraw3"
    with pytest.raises(DeviceNotFoundError, match=r"no SpaceMouse.*USB Keyboard \(046d:c31c\).*teleop"):
        find_spacemouse(INFOS[:1], SpaceMouseConfig())
    with pytest.raises(DeviceNotFoundError, match="no HID devices at all"):
        find_spacemouse([], SpaceMouseConfig(vendor_id=0x256F))


def test_spacemouse_adapter_drains_reports_counts_taps_and_skips_bad_reports() -> None:
    dev = FakeHidDevice([report(1, 0, -350, 0), bytes([3, 1]), bytes([3, 0]), bytes([1, 2]), report(2, 0, 0, 0)])
    teleop = SpaceMouseTeleop(SpaceMouseConfig(), hid_module=FakeHid(INFOS, dev))
    assert isinstance(teleop, HumanDevice)
    teleop.reset()                                   # opens; the queued reports are still pending
    assert dev.opened == b"/dev/hidraw4" and dev.nonblocking == 1
    cmd = teleop.poll(SimpleNamespace(gripper_width_m=0.08))
    np.testing.assert_allclose(cmd.delta_ee, unit("x"))  # cap pushed away from the user
    assert cmd.gripper == 1.0 and cmd.active             # left button tapped between polls: close
    assert teleop.bad_reports == 1                        # the 2-byte report 1 was skipped
    dev.reports = [report(1, 0, 0, 0)]
    cmd = teleop.poll(None)
    assert not cmd.active and cmd.gripper == 1.0 and np.all(cmd.delta_ee == 0)
    dev.reports = [OSError("read error")]
    with pytest.raises(DeviceDisconnectedError, match="SpaceMouse"):
        teleop.poll(None)
    teleop.close()
    assert dev.closed


def test_spacemouse_open_failure_names_permissions() -> None:
    class Refusing(FakeHidDevice):
        def open_path(self, path: bytes) -> None:
            raise OSError("open failed")

    teleop = SpaceMouseTeleop(hid_module=FakeHid(INFOS, Refusing([])))
    with pytest.raises(DeviceNotFoundError, match="hidraw"):
        teleop.open()


@pytest.mark.parametrize("backend", ["hid", "hidraw"])
def test_spacemouse_through_real_hidapi_reports_a_missing_device(backend: str) -> None:
    pytest.importorskip(backend)
    teleop = SpaceMouseTeleop(SpaceMouseConfig(vendor_id=0xFFFF, product_id=0xFFFE, hid_backend=backend))
    with pytest.raises(DeviceNotFoundError, match=r"no SpaceMouse found \(USB id ffff:fffe\).*\[teleop\]'"):
        teleop.poll(None)


def test_missing_hidapi_names_the_teleop_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "hid", None)
    monkeypatch.setitem(sys.modules, "hidraw", None)
    with pytest.raises(MissingExtraError, match=r"\[teleop\]'"):
        SpaceMouseTeleop().open()
    monkeypatch.setitem(sys.modules, "hid", SimpleNamespace(__file__="/elsewhere/hid.py", Device=object))
    with pytest.raises(MissingExtraError, match="not the hidapi package"):
        SpaceMouseTeleop(SpaceMouseConfig(hid_backend="hid")).open()


# ------------------------------------------------------------------------------------------------ keyboard
def test_keys_to_command_maps_axes_actions_and_cancels_opposites() -> None:
    cfg = KeyboardConfig()
    got = keys_to_command({"w"}, cfg)
    np.testing.assert_allclose(got.delta_ee, 0.5 * unit("x"))
    assert got.buttons_held and got.held == frozenset()
    got = keys_to_command({"w", "s"}, cfg)
    assert np.all(got.delta_ee == 0) and got.buttons_held                # held, so still active
    got = keys_to_command({"a", "left", "q", "u", "space", "enter"}, cfg)  # two keys for +y do not add up
    np.testing.assert_allclose(got.delta_ee, [0, 0.5, -0.5, 0, 0, 0.5])
    assert got.held == frozenset({"gripper_toggle", "success"})
    unbound = keys_to_command({"z", "f5"}, cfg)
    assert not unbound.buttons_held and np.all(unbound.delta_ee == 0)
    fast = keys_to_command({"d"}, KeyboardConfig(scale=(1, 1, 1, 1, 1, 1)))
    np.testing.assert_allclose(fast.delta_ee, unit("y", -1))


@pytest.mark.parametrize("key,name", [
    (SimpleNamespace(char="W"), "w"),
    (SimpleNamespace(char=" "), "space"),
    (SimpleNamespace(name="enter"), "enter"),
    (SimpleNamespace(char=None, name="page_up"), "page_up"),
    (SimpleNamespace(char=None, vk=65437), "<65437>"),
    (SimpleNamespace(char="\x17", vk=87), "<87>"),          # ctrl+w: a control character
    (SimpleNamespace(), None),
])
def test_pynput_key_names(key: Any, name: str | None) -> None:
    assert pynput_key_name(key) == name


def test_key_state_counts_a_tap_between_polls_once() -> None:
    keys = KeyState()
    keys.press("enter")
    keys.release("enter")
    keys.press("w")
    assert keys.take() == frozenset({"enter", "w"})
    assert keys.take() == frozenset({"w"})
    keys.press(None)
    keys.release("w")
    assert keys.take() == frozenset()


def test_keyboard_device_without_listener_maps_keys_to_commands() -> None:
    dev = KeyboardTeleop(listen=False)
    assert isinstance(dev, HumanDevice) and dev.name == "keyboard"
    dev.reset()
    dev.keys.press("enter")
    dev.keys.release("enter")
    dev.keys.press("space")
    cmd = dev.poll(SimpleNamespace(gripper_width_m=0.08))
    assert cmd.events == frozenset({"success"}) and cmd.gripper == 1.0 and cmd.active
    dev.keys.release("space")
    dev.keys.press("e")
    cmd = dev.poll(None)
    assert cmd.events == frozenset() and cmd.gripper == 1.0
    np.testing.assert_allclose(cmd.action(), [0, 0, 0.5, 0, 0, 0, 1.0])
    dev.keys.release("e")
    dev.keys.press("esc")
    assert "quit" in dev.poll(None).events
    dev.close()
    assert not dev.poll(None).active


def test_missing_pynput_names_the_teleop_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynput", None)
    monkeypatch.setitem(sys.modules, "pynput.keyboard", None)
    with pytest.raises(MissingExtraError, match=r"keyboard.*\[teleop\]'"):
        KeyboardTeleop().open()


# -------------------------------------------------------------------------------------------- make_device
def test_devices_and_make_device_errors() -> None:
    assert DEVICES == ("scripted", "spacemouse", "gamepad", "keyboard")
    with pytest.raises(ConfigError, match="known: scripted, spacemouse, gamepad, keyboard"):
        make_device("joystick9000")
    with pytest.raises(ConfigError, match="needs a task"):
        make_device("scripted")
    with pytest.raises(ConfigError, match="noise_std"):
        make_device("keyboard", noise_std=0.1)
    with pytest.raises(ConfigError, match="unknown field"):
        make_device("spacemouse", deadzon=0.1)
    with pytest.raises(ConfigError, match="must be a SpaceMouseConfig"):
        make_device("spacemouse", config=KeyboardConfig())
    with pytest.raises(ConfigError, match="not both"):
        make_device("spacemouse", config=SpaceMouseConfig(), deadzone=0.2)
    with pytest.raises(ConfigError, match="unknown gamepad layout"):
        make_device("gamepad", layout="n64")


def test_build_hardware_device_from_fields_lists_and_layouts() -> None:
    kb = build_hardware_device("keyboard", scale=[1, 1, 1, 0.2, 0.2, 0.2], keys=[["x", "+z"]])
    assert isinstance(kb, KeyboardTeleop) and kb.config.keys == (("x", "+z"),)
    pad = build_hardware_device("gamepad", layout="sdl", deadzone=0.3)
    assert pad.config == GamepadConfig.for_layout("sdl", deadzone=0.3)


def test_make_spacemouse_through_real_hidapi_fails_clearly_without_a_device() -> None:
    pytest.importorskip("hid")
    with pytest.raises(DeviceNotFoundError, match="SpaceMouse"):
        make_device("spacemouse", task="twin-reach", vendor_id=0xFFFF, product_id=0xFFFE)
