"""The progress view of a supervised job: `Display` draws a block of status lines, either redrawn in place on a
terminal ("live") or printed every N seconds ("lines", for logs and pipes), with one-off messages above it.
Plus the number formatting status lines use and the reader of the JSON status files children rewrite.

Usage::

    display = Display("auto", every_s=10.0)          # live on a terminal, lines otherwise
    display.message("job: learner on tcp://127.0.0.1:5555")
    while running:
        st = read_json(out / "status.json")            # {} while missing or half-written
        display.show([f"steps {fmt_count(st.get('env_step'))} | {fmt_duration(elapsed_s)}"])
    display.show(final_lines, force=True)
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from robot_rl.errors import ConfigError

DISPLAY_MODES = ("auto", "live", "lines", "none")


def fmt_count(n: Any) -> str:
    """12345 -> '12.3k', 950 -> '950'; '-' for anything not a number."""
    if not isinstance(n, int | float):
        return "-"
    return f"{n / 1000:.1f}k" if abs(n) >= 10_000 else f"{int(n)}"


def fmt_rate(x: Any) -> str:
    """A fraction / rate with two decimals; '-' for anything not a number (e.g. None before the first episode)."""
    return "-" if not isinstance(x, int | float) else f"{x:.2f}"


def fmt_duration(seconds: float) -> str:
    """185 -> '3m05s', 3725 -> '1h02m'."""
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object file a child rewrites atomically; {} while it is missing, unreadable or not an object."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class Display:
    """Live (in-place redraw of the last block on a terminal) or line-by-line progress; "none" draws nothing
    (messages still go out)."""

    def __init__(self, mode: str, every_s: float, stream: IO[str] = sys.stdout) -> None:
        if mode not in DISPLAY_MODES:
            raise ConfigError(f"display mode {mode!r}: expected one of {DISPLAY_MODES}")
        if mode == "auto":
            mode = "live" if stream.isatty() else "lines"
        self.mode, self.every_s, self.stream = mode, every_s, stream
        self._drawn = 0
        self._last = -1e9

    def show(self, lines: Sequence[str], force: bool = False) -> None:
        """Draw the status block: live mode replaces the previous block; lines mode prints it when `every_s`
        passed since the last print (or `force`)."""
        if self.mode == "none":
            return
        if self.mode == "live":
            out = "".join("\x1b[1A\x1b[2K" for _ in range(self._drawn))
            self.stream.write(out + "\n".join(lines) + "\n")
            self.stream.flush()
            self._drawn = len(lines)
            return
        now = time.monotonic()
        if force or now - self._last >= self.every_s:
            self._last = now
            self.stream.write("\n".join(lines) + "\n")
            self.stream.flush()

    def message(self, text: str) -> None:
        """A line above the live block (which is then redrawn below it)."""
        if self.mode == "live":
            self.stream.write("".join("\x1b[1A\x1b[2K" for _ in range(self._drawn)))
            self._drawn = 0
        self.stream.write(text + "\n")
        self.stream.flush()
