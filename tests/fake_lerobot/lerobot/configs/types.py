"""lerobot.configs.types stand-in: FeatureType, PolicyFeature (as in lerobot 0.4)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class FeatureType(str, Enum):  # noqa: UP042 - as lerobot defines it
    STATE = "STATE"
    VISUAL = "VISUAL"
    ENV = "ENV"
    ACTION = "ACTION"


@dataclass
class PolicyFeature:
    type: FeatureType
    shape: tuple[int, ...]
