"""Typed configuration base: one frozen dataclass per component, validated on construction.

Usage::

    @dataclass(frozen=True)
    class MyConfig(Config):
        rate_hz: float = 10.0
        \"\"\"Control rate in Hz.\"\"\"

        def validate(self) -> None:
            require(self.rate_hz > 0, "rate_hz", self.rate_hz, "must be > 0")

    cfg = MyConfig(rate_hz=20.0)
    cfg2 = cfg.replace(rate_hz=5.0)
    MyConfig.from_dict(cfg.to_dict()) == cfg   # True; unknown keys raise ConfigError
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Self

import numpy as np

from robot_rl.errors import ConfigError


def require(ok: bool, field: str, value: Any, why: str, error: type[ConfigError] = ConfigError) -> None:
    """Raise `error` naming `field`, its `value` and `why` unless `ok`."""
    if not ok:
        raise error(f"{field}={value!r} {why}")


def require_finite(field: str, value: Any, error: type[ConfigError] = ConfigError) -> None:
    """Raise unless every element of `value` is a finite number."""
    arr = np.asarray(value, dtype=float)
    require(bool(np.all(np.isfinite(arr))), field, value, "must be finite", error)


@dataclasses.dataclass(frozen=True)
class Config:
    """Base for component configs: frozen, validated in `__post_init__`, dict round-trip."""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Override to check field values; raise `ConfigError` naming the field."""

    def replace(self, **changes: Any) -> Self:
        """A copy with `changes` applied (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data dict (tuples become lists, nested configs become dicts)."""

        def plain(v: Any) -> Any:
            if isinstance(v, Config):
                return v.to_dict()
            if isinstance(v, tuple | list):
                return [plain(x) for x in v]
            if isinstance(v, np.ndarray):
                return v.tolist()
            if isinstance(v, float) and not math.isfinite(v):
                return repr(v)
            return v

        return {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Build from a dict; unknown keys raise `ConfigError`; lists become tuples."""
        names = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise ConfigError(f"{cls.__name__}: unknown field(s) {unknown}; known: {sorted(names)}")
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            kwargs[key] = _tuplify(value)
        return cls(**kwargs)


def _tuplify(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuplify(v) for v in value)
    return value
