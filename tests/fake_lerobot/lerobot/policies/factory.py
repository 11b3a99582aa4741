"""lerobot.policies.factory stand-in: get_policy_class, make_pre_post_processors (pretrained_path branch).

The one policy type, "linear_chunk", maps the concatenated (flattened, sorted by feature name) normalised inputs
linearly to a (B, chunk_size, A) chunk of normalised actions. The pre-processor standardises each input feature by
the mean / std in DIR/policy_preprocessor.json (scalars per feature) and checks LeRobot's conventions (images float32
(B, 3, H, W) in [0, 1], every tensor on the overridden device); the post-processor un-standardises actions (B, A)
by DIR/policy_postprocessor.json. `CALLS` records what the adapter passed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from lerobot.configs.policies import PreTrainedConfig

CALLS: dict[str, Any] = {}


class LinearChunkPolicy(torch.nn.Module):
    name = "linear_chunk"
    config_class = PreTrainedConfig

    def __init__(self, config: PreTrainedConfig) -> None:
        super().__init__()
        self.config = config
        d_in = sum(int(torch.tensor(f.shape).prod()) for f in config.input_features.values())
        a = config.output_features["action"].shape[0]
        self.linear = torch.nn.Linear(d_in, config.chunk_size * a)
        self._queue: list[torch.Tensor] = []

    @classmethod
    def from_pretrained(cls, pretrained_name_or_path: str | Path, *, config: PreTrainedConfig | None = None,
                        local_files_only: bool = False, **kwargs: Any) -> LinearChunkPolicy:
        CALLS["from_pretrained"] = {"local_files_only": local_files_only, "device": getattr(config, "device", None)}
        config = config or PreTrainedConfig.from_pretrained(pretrained_name_or_path)
        policy = cls(config)
        policy.load_state_dict(load_file(str(Path(pretrained_name_or_path) / "model.safetensors")))
        policy.eval()
        return policy

    def predict_action_chunk(self, batch: dict[str, torch.Tensor], **kwargs: Any) -> torch.Tensor:
        x = torch.cat([batch[k].flatten(1) for k in sorted(self.config.input_features)], dim=1)
        a = self.config.output_features["action"].shape[0]
        return self.linear(x).view(x.shape[0], self.config.chunk_size, a)

    def select_action(self, batch: dict[str, torch.Tensor], **kwargs: Any) -> torch.Tensor:
        raise AssertionError("a base evaluated on replay batches must not use the action queue of select_action")


def get_policy_class(name: str) -> type[LinearChunkPolicy]:
    if name == LinearChunkPolicy.name:
        return LinearChunkPolicy
    raise ValueError(f"Policy type '{name}' is not available.")


def make_pre_post_processors(policy_cfg: PreTrainedConfig, pretrained_path: str | None = None,
                             **kwargs: Any) -> tuple[Any, Any]:
    CALLS["processors"] = {"pretrained_path": pretrained_path, **kwargs}
    root = Path(str(pretrained_path))
    pre_stats = json.loads((root / "policy_preprocessor.json").read_text())
    post_stats = json.loads((root / "policy_postprocessor.json").read_text())
    device = torch.device(kwargs.get("preprocessor_overrides", {}).get("device_processor", {}).get("device", "cpu"))

    def pre(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        out = {}
        for k, v in batch.items():
            assert v.dtype == torch.float32 and v.device == device, (k, v.dtype, v.device)
            if policy_cfg.input_features[k].type.value == "VISUAL":
                assert v.dim() == 4 and v.shape[1] == 3 and float(v.min()) >= 0.0 and float(v.max()) <= 1.0, k
            out[k] = (v - pre_stats[k]["mean"]) / pre_stats[k]["std"]
        return out

    def post(action: torch.Tensor) -> torch.Tensor:
        assert action.dim() == 2, "LeRobot's post-processor takes one action per row, (B, A)"
        return action * post_stats["action"]["std"] + post_stats["action"]["mean"]

    return pre, post
