"""A virtual SpaceMouse behind a stand-in `hidraw` module, for device tests of whole processes: put this directory
first on the PYTHONPATH of a `robot-rl` child process and it opens this instead of hidapi's hidraw backend.

The environment variable VIRTUAL_SPACEMOUSE_SCRIPT names a JSON file: {"cycle": N, "polls": {"K": [HEX, ...]}}.
Poll K (counted from 0; a poll ends when a read finds nothing pending) first delivers the HID reports HEX listed
under str(K % N) (e.g. "010000a2fe0000": report 1, translation (0, -350, 0)). Without the variable the device is
not plugged in (only a keyboard is listed).
"""

from __future__ import annotations

import json
import os
from typing import Any

_SCRIPT = os.environ.get("VIRTUAL_SPACEMOUSE_SCRIPT")
_KEYBOARD = {"vendor_id": 0x046D, "product_id": 0xC31C, "path": b"/dev/hidraw0", "product_string": "USB Keyboard",
             "usage_page": 1, "usage": 6}
_MOUSE = {"vendor_id": 0x256F, "product_id": 0xC635, "path": b"/dev/hidraw-virtual",
          "product_string": "SpaceMouse Compact (virtual)", "usage_page": 1, "usage": 8}


def enumerate(*args: Any) -> list[dict[str, Any]]:
    return [_KEYBOARD, _MOUSE] if _SCRIPT else [_KEYBOARD]


class device:
    def __init__(self) -> None:
        script = json.loads(open(_SCRIPT).read()) if _SCRIPT else {"cycle": 1, "polls": {}}
        self.cycle = int(script["cycle"])
        self.polls = {int(k): [bytes.fromhex(h) for h in v] for k, v in script["polls"].items()}
        self.poll = 0
        self.pending = list(self.polls.get(0, []))

    def open_path(self, path: bytes) -> None:
        pass

    def set_nonblocking(self, v: int) -> None:
        pass

    def read(self, n: int) -> list[int]:
        if self.pending:
            return list(self.pending.pop(0))[:n]
        self.poll += 1
        self.pending = list(self.polls.get(self.poll % self.cycle, []))
        return []

    def close(self) -> None:
        pass
