"""lerobot.configs.policies stand-in: PreTrainedConfig.from_pretrained reads DIR/config.json."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lerobot.configs.types import FeatureType, PolicyFeature


@dataclass
class PreTrainedConfig:
    type: str = ""
    input_features: dict[str, PolicyFeature] = field(default_factory=dict)
    output_features: dict[str, PolicyFeature] = field(default_factory=dict)
    device: str | None = None
    chunk_size: int = 1

    @classmethod
    def from_pretrained(cls, pretrained_name_or_path: str | Path, *, local_files_only: bool = False,
                        **policy_kwargs: Any) -> PreTrainedConfig:
        path = Path(pretrained_name_or_path) / "config.json"
        if not path.is_file():
            raise FileNotFoundError(f"config.json not found in {pretrained_name_or_path}")
        raw = json.loads(path.read_text())

        def feats(d: dict[str, Any]) -> dict[str, PolicyFeature]:
            return {k: PolicyFeature(FeatureType(v["type"]), tuple(v["shape"])) for k, v in d.items()}

        return cls(type=raw["type"], input_features=feats(raw["input_features"]),
                   output_features=feats(raw["output_features"]), device=raw.get("device"),
                   chunk_size=int(raw.get("chunk_size", 1)))
