"""Virtual teleop devices for tests: stand-ins for the device libraries (hidapi's `hid` / `hidraw`, pynput's
`pynput.keyboard`), installed into `sys.modules` so the real adapters (demos.devices) open and read them through
their ordinary code path. The gamepad needs no stand-in: tests/test_teleop_gamepad.py's `VirtualPad` is a real SDL
virtual joystick.

Usage::

    mouse = VirtualSpaceMouse()
    mouse.install(monkeypatch)                # `import hidraw` / `import hid` now give the virtual SpaceMouse
    mouse.move(y=-350)                        # the cap pushed away from the user: +x in the base frame
    mouse.tap(1)                              # right button pressed and released before the next poll
    keys = VirtualKeyboard(); keys.install(monkeypatch)
    keys.press("w"); keys.release("w"); keys.tap("enter")
"""

from __future__ import annotations

import struct
import sys
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

SPACEMOUSE_INFO = {"vendor_id": 0x256F, "product_id": 0xC635, "path": b"/dev/hidraw-virtual",
                   "product_string": "SpaceMouse Compact (virtual)", "usage_page": 1, "usage": 8}


class _VirtualHidDevice:
    """What `hid.device()` returns: reads drain the queued reports, then return [] (nothing pending)."""

    def __init__(self, owner: VirtualSpaceMouse) -> None:
        self.owner = owner

    def open_path(self, path: bytes) -> None:
        self.owner.opened = path

    def open(self, vid: int, pid: int) -> None:
        self.owner.opened = (vid, pid)

    def set_nonblocking(self, v: int) -> None:
        pass

    def read(self, n: int) -> list[int]:
        if self.owner.unplugged:
            raise OSError("device disconnected")
        return list(self.owner.reports.pop(0))[:n] if self.owner.reports else []

    def close(self) -> None:
        self.owner.closed = True


class VirtualSpaceMouse:
    """A SpaceMouse behind a stand-in hidapi module. `plugged=False`: hidapi lists no SpaceMouse (only a keyboard)."""

    def __init__(self, plugged: bool = True) -> None:
        self.reports: list[bytes] = []
        self.opened: Any = None
        self.closed = False
        self.unplugged = False
        infos = [{"vendor_id": 0x046D, "product_id": 0xC31C, "path": b"/dev/hidraw0", "product_string": "USB Keyboard",
                  "usage_page": 1, "usage": 6}]
        self.module = ModuleType("hid")
        self.module.enumerate = lambda *a: infos + ([SPACEMOUSE_INFO] if plugged else [])  # type: ignore[attr-defined]
        self.module.device = lambda: _VirtualHidDevice(self)  # type: ignore[attr-defined]

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setitem(sys.modules, "hidraw", self.module)
        monkeypatch.setitem(sys.modules, "hid", self.module)

    def move(self, x: int = 0, y: int = 0, z: int = 0, rx: int = 0, ry: int = 0, rz: int = 0) -> None:
        """The cap's deflection in raw counts (device frame; 350 = full scale), held until the next move."""
        self.reports.append(struct.pack("<B3h", 1, x, y, z))
        self.reports.append(struct.pack("<B3h", 2, rx, ry, rz))

    def tap(self, bit: int) -> None:
        """Press and release button `bit` (0 = left, 1 = right) before the next poll."""
        self.reports.append(bytes([3, 1 << bit]))
        self.reports.append(bytes([3, 0]))


class VirtualKeyboard:
    """pynput's keyboard listener stand-in: `press` / `release` call the listener's callbacks as pynput would."""

    def __init__(self) -> None:
        self.listeners: list[Any] = []
        outer = self

        class Listener:
            def __init__(self, on_press: Any, on_release: Any) -> None:
                self.on_press, self.on_release = on_press, on_release
                self.daemon = False
                self.running = False

            def start(self) -> None:
                self.running = True
                outer.listeners.append(self)

            def stop(self) -> None:
                self.running = False

        self.module = ModuleType("pynput.keyboard")
        self.module.Listener = Listener  # type: ignore[attr-defined]
        self.package = ModuleType("pynput")
        self.package.keyboard = self.module  # type: ignore[attr-defined]

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setitem(sys.modules, "pynput", self.package)
        monkeypatch.setitem(sys.modules, "pynput.keyboard", self.module)

    @staticmethod
    def _key(name: str) -> Any:
        return SimpleNamespace(char=name) if len(name) == 1 else SimpleNamespace(char=None, name=name)

    def press(self, name: str) -> None:
        for lst in self.listeners:
            if lst.running:
                lst.on_press(self._key(name))

    def release(self, name: str) -> None:
        for lst in self.listeners:
            if lst.running:
                lst.on_release(self._key(name))

    def tap(self, name: str) -> None:
        self.press(name)
        self.release(name)
