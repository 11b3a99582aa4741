"""The gamepad device through the real pygame/SDL: a virtual SDL joystick (SDL_JoystickAttachVirtual, called with
ctypes on the SDL library pygame loaded) stands in for the hardware; SDL's dummy video driver, no display.
The pure mapping `gamepad_to_command` is tested on plain lists first."""

from __future__ import annotations

import ctypes
import glob
import os
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from demos.devices import GamepadConfig, GamepadTeleop, gamepad_to_command
from demos.devices.errors import DeviceDisconnectedError, DeviceNotFoundError
from demos.devices.teleop import make_device
from envs.devices import HumanDevice
from robot_rl.errors import ConfigError

XBOX_REST = [0.0, 0.0, -1.0, 0.0, 0.0, -1.0]  # LX, LY, LT, RX, RY, RT


def xbox(**set_axes: float) -> list[float]:
    names = ["lx", "ly", "lt", "rx", "ry", "rt"]
    axes = list(XBOX_REST)
    for k, v in set_axes.items():
        axes[names.index(k)] = v
    return axes


NO_BUTTONS = [False] * 11


# ------------------------------------------------------------------------------------------- pure mapping
def test_xbox_layout_sticks_and_triggers() -> None:
    cfg = GamepadConfig(deadzone=0.1)
    np.testing.assert_allclose(gamepad_to_command(xbox(ly=-1.0), NO_BUTTONS, cfg).delta_ee, [1, 0, 0, 0, 0, 0])
    np.testing.assert_allclose(gamepad_to_command(xbox(lx=-0.55), NO_BUTTONS, cfg).delta_ee, [0, 0.5, 0, 0, 0, 0])
    np.testing.assert_allclose(gamepad_to_command(xbox(rt=1.0), NO_BUTTONS, cfg).delta_ee, [0, 0, 1, 0, 0, 0])
    np.testing.assert_allclose(gamepad_to_command(xbox(lt=1.0), NO_BUTTONS, cfg).delta_ee, [0, 0, -1, 0, 0, 0])
    np.testing.assert_allclose(gamepad_to_command(xbox(lt=1.0, rt=1.0), NO_BUTTONS, cfg).delta_ee, np.zeros(6))
    np.testing.assert_allclose(gamepad_to_command(xbox(rx=-1.0, ry=-1.0), NO_BUTTONS, cfg).delta_ee,
                               [0, 0, 0, 0, 1, 1])
    rest = gamepad_to_command(xbox(lx=0.08, ry=-0.05), NO_BUTTONS, cfg)   # stick drift inside the dead zone
    assert np.all(rest.delta_ee == 0) and not rest.buttons_held


def test_buttons_drive_axes_and_actions() -> None:
    cfg = GamepadConfig(scale=(1, 1, 1, 0.5, 0.5, 0.5))
    buttons = list(NO_BUTTONS)
    buttons[4] = buttons[0] = buttons[7] = True            # LB (+rx), A (close), Start (success)
    got = gamepad_to_command(XBOX_REST, buttons, cfg)
    np.testing.assert_allclose(got.delta_ee, [0, 0, 0, 0.5, 0, 0])
    assert got.held == frozenset({"gripper_close", "success"}) and got.buttons_held
    unbound = list(NO_BUTTONS)
    unbound[9] = True                                        # right stick click: not bound, still "held"
    assert gamepad_to_command(XBOX_REST, unbound, cfg).buttons_held


def test_bindings_beyond_the_device_raise_config_error() -> None:
    with pytest.raises(ConfigError, match="axis 5 but the gamepad has 4 axes"):
        gamepad_to_command([0.0] * 4, NO_BUTTONS, GamepadConfig())
    with pytest.raises(ConfigError, match="button 10 but the gamepad has 8 buttons"):
        gamepad_to_command(XBOX_REST, [False] * 8, GamepadConfig())


# ----------------------------------------------------------------------------------- real pygame / SDL
pygame = pytest.importorskip("pygame")

SDL_JOYSTICK_TYPE_GAMECONTROLLER = 1
N_AXES, N_BUTTONS = 6, 15


def _loaded_sdl() -> Any:
    """The SDL2 shared library pygame itself loaded (so virtual joysticks show up in pygame)."""
    paths: list[str] = []
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if "libSDL2-2" in line or "libSDL2.so" in line})
    except OSError:
        pass
    pkg = os.path.dirname(pygame.__file__)
    paths += glob.glob(os.path.join(pkg, "..", "pygame.libs", "libSDL2-2*")) + glob.glob(os.path.join(pkg, ".dylibs",
                                                                                                   "libSDL2*"))
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
            lib.SDL_JoystickAttachVirtual  # noqa: B018  (SDL >= 2.0.14)
            return lib
        except (OSError, AttributeError):
            continue
    return None


class VirtualPad:
    """An SDL virtual game controller: set axes (-1..1) and buttons; pygame sees it as a joystick."""

    def __init__(self, sdl: Any) -> None:
        self.sdl = sdl
        sdl.SDL_JoystickAttachVirtual.argtypes = [ctypes.c_int] * 4
        sdl.SDL_JoystickAttachVirtual.restype = ctypes.c_int
        sdl.SDL_JoystickFromInstanceID.argtypes = [ctypes.c_int32]
        sdl.SDL_JoystickFromInstanceID.restype = ctypes.c_void_p
        sdl.SDL_JoystickSetVirtualAxis.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int16]
        sdl.SDL_JoystickSetVirtualButton.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint8]
        sdl.SDL_JoystickDetachVirtual.argtypes = [ctypes.c_int]
        self.index = sdl.SDL_JoystickAttachVirtual(SDL_JOYSTICK_TYPE_GAMECONTROLLER, N_AXES, N_BUTTONS, 0)
        if self.index < 0:
            raise RuntimeError("SDL_JoystickAttachVirtual failed")
        self.handle: int | None = None
        self.attached = True

    def bind(self, instance_id: int) -> None:
        """Get SDL's handle of the joystick pygame opened (needed to set virtual values)."""
        self.handle = self.sdl.SDL_JoystickFromInstanceID(instance_id)
        assert self.handle, "pygame has not opened the virtual joystick"

    def axis(self, i: int, value: float) -> None:
        raw = int(np.clip(round(value * 32767), -32768, 32767)) if value > -1 else -32768
        assert self.sdl.SDL_JoystickSetVirtualAxis(self.handle, i, raw) == 0

    def button(self, i: int, down: bool) -> None:
        assert self.sdl.SDL_JoystickSetVirtualButton(self.handle, i, int(down)) == 0

    def detach(self) -> None:
        if self.attached:
            self.sdl.SDL_JoystickDetachVirtual(self.index)
            self.attached = False


@pytest.fixture(scope="module")
def sdl() -> Iterator[Any]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SDL_VIDEODRIVER", "dummy")
        mp.setenv("SDL_AUDIODRIVER", "dummy")
        pygame.display.init()
        pygame.joystick.init()
        lib = _loaded_sdl()
        if lib is None:
            pygame.quit()
            pytest.skip("could not reach the SDL library that pygame loaded (virtual joystick API)")
        yield lib
        pygame.quit()


@pytest.fixture()
def pad(sdl: Any) -> Iterator[tuple[VirtualPad, GamepadTeleop]]:
    vpad = VirtualPad(sdl)
    pygame.event.pump()
    dev = GamepadTeleop(GamepadConfig.for_layout("sdl", index=vpad.index, deadzone=0.1))
    dev.open()
    vpad.bind(pygame.joystick.Joystick(vpad.index).get_instance_id())
    dev.reset()
    yield vpad, dev
    dev.close()
    vpad.detach()
    pygame.event.get()


def test_virtual_pad_axes_reach_the_command(pad: tuple[VirtualPad, GamepadTeleop]) -> None:
    vpad, dev = pad
    assert isinstance(dev, HumanDevice) and dev.joystick_name
    cmd = dev.poll(None)
    assert not cmd.active and np.all(cmd.delta_ee == 0)      # triggers rest at -1: no z motion
    vpad.axis(1, -1.0)                                         # left stick fully up
    vpad.axis(5, 1.0)                                          # right trigger fully pressed
    vpad.axis(2, -0.55)                                        # right stick half left
    cmd = dev.poll(None)
    np.testing.assert_allclose(cmd.delta_ee, [1, 0, 1, 0, 0, 0.5], atol=1e-3)
    assert cmd.active
    vpad.axis(1, 0.05)
    vpad.axis(5, -1.0)
    vpad.axis(2, 0.0)
    cmd = dev.poll(None)
    assert np.all(cmd.delta_ee == 0) and not cmd.active


def test_virtual_pad_buttons_become_events_and_gripper(pad: tuple[VirtualPad, GamepadTeleop]) -> None:
    vpad, dev = pad
    vpad.button(6, True)                                       # Start: success
    vpad.button(0, True)                                       # A: close
    cmd = dev.poll(SimpleNamespace(gripper_width_m=0.08))
    assert cmd.events == frozenset({"success"}) and cmd.gripper == 1.0 and cmd.active
    cmd = dev.poll(None)                                        # still held: no second event
    assert cmd.events == frozenset() and cmd.active
    vpad.button(6, False)
    vpad.button(0, False)
    vpad.button(2, True)                                       # X: intervention toggle on
    assert "intervene" in dev.poll(None).events
    vpad.button(2, False)
    cmd = dev.poll(None)
    assert cmd.events == frozenset({"intervene"}) and cmd.active and cmd.gripper == 1.0
    vpad.button(9, True)                                       # LB: +rx at full speed
    np.testing.assert_allclose(dev.poll(None).delta_ee, [0, 0, 0, 1, 0, 0])


def test_a_press_shorter_than_a_poll_still_counts(pad: tuple[VirtualPad, GamepadTeleop]) -> None:
    vpad, dev = pad
    instance_id = pygame.joystick.Joystick(vpad.index).get_instance_id()
    # the button went down and up between two polls: only the JOYBUTTONDOWN event is left to tell
    pygame.event.post(pygame.event.Event(pygame.JOYBUTTONDOWN, joy=vpad.index, instance_id=instance_id, button=3))
    pygame.event.post(pygame.event.Event(pygame.JOYBUTTONUP, joy=vpad.index, instance_id=instance_id, button=3))
    assert dev.poll(None).events == frozenset({"rerecord"})
    assert dev.poll(None).events == frozenset()
    # another joystick's events are not ours
    pygame.event.post(pygame.event.Event(pygame.JOYBUTTONDOWN, joy=99, instance_id=instance_id + 99, button=3))
    assert dev.poll(None).events == frozenset()


def test_unplugging_the_pad_raises_disconnected(pad: tuple[VirtualPad, GamepadTeleop]) -> None:
    vpad, dev = pad
    vpad.detach()
    with pytest.raises(DeviceDisconnectedError, match="disconnected"):
        dev.poll(None)


def test_no_joystick_at_the_index_is_a_clear_error(sdl: Any) -> None:
    count = pygame.joystick.get_count()
    with pytest.raises(DeviceNotFoundError, match=rf"index {count}.*sees {count} joystick.*\[teleop\]'"):
        make_device("gamepad", layout="sdl", index=count)


def test_layout_that_does_not_fit_the_pad_is_refused_at_open(sdl: Any) -> None:
    vpad = VirtualPad(sdl)
    try:
        pygame.event.pump()
        with pytest.raises(ConfigError, match=f"binds button 20 but the gamepad has {N_BUTTONS} buttons"):
            GamepadTeleop(GamepadConfig(index=vpad.index, buttons=((20, "quit"),))).open()
    finally:
        vpad.detach()
        pygame.event.get()


def test_a_trigger_that_never_moved_counts_as_released(sdl: Any) -> None:
    """Some drivers report an untouched trigger as 0 (half-pressed on the [-1, 1] scale) until it first moves."""
    vpad = VirtualPad(sdl)
    dev = GamepadTeleop(GamepadConfig.for_layout("sdl", index=vpad.index))
    try:
        pygame.event.pump()
        js = pygame.joystick.Joystick(vpad.index)
        js.init()
        vpad.bind(js.get_instance_id())
        vpad.axis(5, 0.0)
        pygame.event.pump()
        pygame.event.get()                                   # no axis-motion event left for the device to see
        assert js.get_axis(5) == pytest.approx(0.0, abs=1e-3)
        dev.open()
        assert np.all(dev.poll(None).delta_ee == 0)          # not +0.5 z
        vpad.axis(5, 1.0)
        np.testing.assert_allclose(dev.poll(None).delta_ee, [0, 0, 1, 0, 0, 0], atol=1e-3)
    finally:
        dev.close()
        vpad.detach()
        pygame.event.get()
