"""Formatting and reading helpers shared by the table modules: numbers as the docs print them (half-up rounding,
percentages, '2.0k' env steps), pipe tables, the results directory, and lookups on evaluation curves.

Usage::

    res = Results(Path("benchmarks/results"))
    d = res("twin_speed.json")                        # parsed once, cached
    table(["env", "steps/s"], [["twin reach", rnd(1039.13)]])
    at(run["curve"], 2000, spacing=1000)              # the evaluation nearest 2k env steps (None if none is near)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

Row = Sequence[object]


def rnd(x: float, digits: int = 0) -> str:
    """`x` rounded half-up to `digits` decimals (Python's round() rounds half to even)."""
    q = Decimal(1).scaleb(-digits)
    return str(Decimal(repr(float(x))).quantize(q, rounding=ROUND_HALF_UP))


def pct(x: float | None) -> str:
    """A success rate in [0, 1] as a whole percentage, '-' for none."""
    return "-" if x is None else f"{rnd(100 * x)} %"


def pcts(xs: Sequence[float | None]) -> str:
    """'80 / 40 / 35 %': several rates with one unit."""
    return " / ".join(pct(x).removesuffix(" %") for x in xs) + " %"


def ksteps(step: float | None) -> str:
    """An env-step count as '2.0k', 'never' for none."""
    return "never" if step is None else f"{rnd(step / 1000, 1)}k"


def grouped(x: float) -> str:
    """A whole number with thousands separators: '3,009'."""
    return f"{int(rnd(x)):,}"


def minutes(seconds: float) -> str:
    """Seconds as minutes with one decimal."""
    return rnd(seconds / 60, 1)


def table(header: Row, rows: Sequence[Row]) -> str:
    """A pipe table; cells are str()-ed."""
    lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    return "\n".join(lines)


def source(*names: str, note: str = "") -> str:
    """'Source: `benchmarks/results/A`, ...': the line under a table naming its results files."""
    return "Source: " + ", ".join(f"`benchmarks/results/{n}`" for n in names) + (f" ({note})" if note else "") + "."


def signed(x: float, digits: int) -> str:
    """`x` rounded, with its sign always written: '+0.37', '-0.54'."""
    text = rnd(x, digits)
    return text if text.startswith("-") else "+" + text


def arrows(values: Sequence[float | None]) -> str:
    """A curve of rates as '80 → 40 → 10 %'."""
    return " → ".join(pct(v).removesuffix(" %") for v in values) + " %"


# ---- reading results -------------------------------------------------------------------------------------------

class Results:
    """The results directory, each file parsed once."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._cache: dict[str, Any] = {}

    def __call__(self, name: str) -> Any:
        if name not in self._cache:
            self._cache[name] = json.loads((self.directory / name).read_text())
        return self._cache[name]


def at(curve: Sequence[dict[str, Any]], step: int, spacing: int, key: str = "success_rate") -> float | None:
    """The value of the evaluation nearest to `step` (within half the evaluation spacing), None if there is none."""
    best = min(curve, key=lambda p: abs(p["env_step"] - step))
    return best[key] if abs(best["env_step"] - step) <= spacing / 2 else None


def mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def mean_at(runs: Sequence[dict[str, Any]], step: int, spacing: int) -> float | None:
    """The mean over runs of their evaluation nearest `step`; None if a run has none there."""
    values = [at(r["curve"], step, spacing) for r in runs]
    return None if any(v is None for v in values) else mean([v for v in values if v is not None])


def first_at(curve: Sequence[dict[str, Any]], bar: float, key: str = "success_rate") -> int | None:
    """The env step of the first evaluation at or above `bar`, None if none reached it."""
    return next((p["env_step"] for p in curve if p[key] is not None and p[key] >= bar - 1e-9), None)
