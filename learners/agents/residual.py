"""Frozen base policies for residual RL (AgentConfig.residual_base): an observation in, an action (or an action
chunk) out, behind one small interface.

A base policy maps a batch of raw observations (what the env returns, batched: {slash/path: (B, ...)} or a (B, D)
array) to actions in the agent's [-1, 1] units, (B, A), or to action chunks (B, H, A); for a chunk the residual
agent uses its first action at every step (it re-plans every step). The base is called on replay batches as well
as on the live observation, so it must be a pure function of the observation (no internal action queue or
recurrent state). The residual policy adds a bounded correction on top (learners.agents.policy); the critic scores the
combined action (learners.agents.sac).

Where a base comes from (`residual_base`; local only, nothing is downloaded):
- a `robot-rl train-bc` run (learners.cli.train_bc) or a `robot-rl train` run: its directory, its checkpoints/ or one
  ckpt_*; the policy is rebuilt from the AgentConfig and EnvSpec saved with it;
- a policy file written by `save_policy_file` (`robot-rl train-bc` writes OUT/policy.safetensors): safetensors
  weights with a JSON sidecar (policy.json: agent_config, spec) beside it;
- `py:MODULE:FACTORY`: FACTORY(spec) from an importable module returns any callable with this interface (e.g. a
  wrapper around a policy trained elsewhere);
- `lerobot:DIR`: a LeRobot policy checkpoint (pretrained_model directory), loaded with LeRobot's own API when the
  lerobot package is installed (learners.agents.lerobot_base; optional, never required).

This module holds the interface (`FrozenBase`), the policy file format (`save_policy_file`, `read_policy_file`),
the bases that are not our own policy (`external_base`: py: and lerobot:) and `absolute_source`; it imports no
policy code. Our own policies are rebuilt where policies are built, in learners.agents.policy: `load_run_policy`
(a run or a policy file) and `load_base_policy` (any source above, as a FrozenBase), which `build_policy` calls.

Usage::

    from learners.agents.policy import load_base_policy
    base = load_base_policy("runs/bc_pick", spec, device="cpu")
    actions = base(batch_obs)             # torch float32 (B, A) in [-1, 1], no gradient
    save_policy_file(policy, {"agent_config": cfg.to_dict(), "spec": spec.to_dict()}, "runs/bc_pick/policy.safetensors")
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from robot_rl.errors import ConfigError
from robot_rl.specs import EnvSpec

BaseFn = Callable[[Any], Any]
"""A base policy: a batch of raw observations -> actions (B, A) or chunks (B, H, A) in [-1, 1] (numpy or torch)."""

PY_PREFIX = "py:"
LEROBOT_PREFIX = "lerobot:"
POLICY_FILE_SUFFIX = ".safetensors"


class FrozenBase:
    """Wraps a base policy function: torch float32 (B, A) out, on `device`, first action of a chunk, clipped to
    [-1, 1], never a gradient. Not an nn.Module: its weights are frozen, never trained, sent or checkpointed."""

    def __init__(self, fn: BaseFn, action_dim: int, device: torch.device | str, source: str) -> None:
        self.fn, self.action_dim, self.device, self.source = fn, action_dim, torch.device(device), source

    @torch.no_grad()
    def __call__(self, obs: Any) -> torch.Tensor:
        out = self.fn(obs)
        t = out.detach() if isinstance(out, torch.Tensor) else torch.as_tensor(np.asarray(out))
        t = t.to(self.device, torch.float32)
        if t.dim() == 3:  # an action chunk (B, H, A): the step's action is its first
            t = t[:, 0]
        if t.dim() != 2 or t.shape[1] != self.action_dim:
            raise ConfigError(f"base policy {self.source}: expected actions (B, {self.action_dim}) or chunks "
                              f"(B, H, {self.action_dim}), got {tuple(t.shape)}")
        if not bool(torch.isfinite(t).all()):
            raise ConfigError(f"base policy {self.source}: returned NaN/inf actions")
        return t.clamp(-1.0, 1.0)


def absolute_source(source: str) -> str:
    """`source` with a local path made absolute (a run saved with it can be evaluated or resumed from any working
    directory, and actors on the same machine find it); `py:` sources unchanged."""
    if source.startswith(PY_PREFIX):
        return source
    if source.startswith(LEROBOT_PREFIX):
        return LEROBOT_PREFIX + str(Path(source[len(LEROBOT_PREFIX):]).expanduser().resolve())
    return str(Path(source).expanduser().resolve())


def save_policy_file(policy: Any, meta: Mapping[str, Any], path: str | Path) -> Path:
    """Write the policy's trainable weights as safetensors to `path` and `meta` (must hold agent_config and spec)
    as JSON beside it (same name, .json); returns the weights' path. No pickle."""
    from safetensors.torch import save_file

    path = Path(path)
    if path.suffix != POLICY_FILE_SUFFIX:
        raise ConfigError(f"{path}: a policy file must end in {POLICY_FILE_SUFFIX}")
    missing = [k for k in ("agent_config", "spec") if not isinstance(meta.get(k), dict)]
    if missing:
        raise ConfigError(f"save_policy_file: meta needs {missing}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: torch.as_tensor(v).contiguous() for k, v in policy.trainable_state().items()}
    tmp = path.with_name(f".{path.name}.tmp")
    save_file(tensors, str(tmp))
    tmp.replace(path)
    side = path.with_suffix(".json")
    side_tmp = side.with_name(f".{side.name}.tmp")
    side_tmp.write_text(json.dumps(dict(meta), indent=1) + "\n")
    side_tmp.replace(side)
    return path


def read_policy_file(path: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """(weights, meta) of a policy file written by `save_policy_file`; ConfigError when unreadable."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    side = path.with_suffix(".json")
    if not side.is_file():
        raise ConfigError(f"base policy {path}: no {side.name} beside it (agent_config and spec)")
    try:
        arrays = load_file(str(path))
        meta = json.loads(side.read_text())
    except (SafetensorError, OSError, ValueError) as err:
        raise ConfigError(f"base policy {path}: unreadable ({err})") from None
    if not isinstance(meta, dict):
        raise ConfigError(f"base policy {path}: {side.name} is not a JSON object")
    return arrays, meta


def external_base(source: str, spec: EnvSpec, device: torch.device | str = "cpu") -> BaseFn:
    """The base policy function of a `py:MODULE:FACTORY` or `lerobot:DIR` source (see the module docstring);
    ConfigError for any other source (runs and policy files: learners.agents.policy.load_base_policy)."""
    if source.startswith(PY_PREFIX):
        module, _, attr = source[len(PY_PREFIX):].rpartition(":")
        if not module or not attr:
            raise ConfigError(f"residual_base {source}: expected py:MODULE:FACTORY")
        try:
            factory = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as err:
            raise ConfigError(f"residual_base {source}: cannot import {attr!r} from {module!r} ({err})") from None
        fn: BaseFn = factory(spec)
        return fn
    if source.startswith(LEROBOT_PREFIX):
        from learners.agents.lerobot_base import load_lerobot_base

        return load_lerobot_base(source[len(LEROBOT_PREFIX):], spec, device)
    raise ConfigError(f"residual_base {source}: not a py:MODULE:FACTORY or lerobot:DIR source")
