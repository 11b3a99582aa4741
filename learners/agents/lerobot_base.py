"""A LeRobot policy checkpoint as the frozen base of residual RL (`--set residual_base=lerobot:DIR`), loaded with
LeRobot's own API when the `lerobot` package is installed (optional, never required: it is not one of our extras,
because it pins its own torch version).

DIR is a LeRobot `pretrained_model` directory (config.json, model.safetensors, policy_preprocessor.json,
policy_postprocessor.json: what `lerobot-train` writes under outputs/train/RUN/checkpoints/STEP/), read from local
files only. Loading follows LeRobot 0.4's inference path (its async policy server's): `PreTrainedConfig.
from_pretrained(DIR)`, `get_policy_class(cfg.type).from_pretrained(DIR, config=cfg)`, `make_pre_post_processors(cfg,
pretrained_path=DIR)` with the device overridden, then per call: observation batch -> preprocessor -> `predict_action_
chunk` -> the chunk's first action -> postprocessor (unnormalised, per action as LeRobot does it) -> (B, A).
`predict_action_chunk` has no action queue (`select_action` has one, which a base evaluated on replay batches must
not have), so the base stays a pure function of the observation, as learners.agents.residual requires.

Observations map to LeRobot features as `robot-rl episodes export --lerobot` names them (robot_rl.lerobot_keys):
`state` -> `observation.state`, `images/NAME` -> `observation.images.NAME` (uint8 (B, H, W, 3) -> float32 (B, 3, H,
W) in [0, 1], as LeRobot's env preprocessing does), `object` -> `observation.environment_state`; a Box observation
(B, D) is `observation.state`. So the intended path is: record demos, `robot-rl episodes export demos/pick --lerobot
DS`, train a LeRobot policy on DS (its actions are then ours, in [-1, 1]), use its checkpoint as the base. At load
every input feature the policy declares must be an observation of this env with the same shape (images compared as
(3, H, W)) and its action feature must have the env's action size; ConfigError naming the first mismatch otherwise.
Not supported: language-conditioned policies (they get no task string) and policies that need an observation
history (the base sees one observation).

Tested against a stand-in package with LeRobot 0.4's signatures (tests/fake_lerobot) in CI, and against the real
lerobot 0.4.4 in a venv of its own (it requires torch < 2.11 and torchvision, which do not install beside this
project's torch): tests/test_lerobot_base.py's real-package test, skipped where lerobot is not installed (README).

Usage::

    fn = load_lerobot_base("outputs/train/act_pick/checkpoints/last/pretrained_model", spec, device="cpu")
    actions = fn({"state": state_b, "images/front": front_b})      # torch float32 (B, A), unclipped
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np
import torch

from robot_rl.errors import ConfigError
from robot_rl.lerobot_keys import obs_key
from robot_rl.specs import EnvSpec, flatten_value

_VISUAL, _ACTION = "VISUAL", "action"


def _kind(feature: Any) -> str:
    """A LeRobot PolicyFeature's type as a string ('STATE', 'VISUAL', 'ENV', ...)."""
    t = getattr(feature, "type", None)
    return str(getattr(t, "value", t))


def _import_lerobot() -> tuple[Any, Any, Any]:
    """(PreTrainedConfig, get_policy_class, make_pre_post_processors) from lerobot, or a ConfigError saying how
    to get them."""
    try:
        policies_cfg = importlib.import_module("lerobot.configs.policies")
        factory = importlib.import_module("lerobot.policies.factory")
    except ImportError as err:
        raise ConfigError(f"residual_base lerobot:...: the lerobot package is not importable ({err}); install it in "
                          "this environment (pip install lerobot; it pins its own torch) or wrap the policy in a "
                          "py:MODULE:FACTORY base (learners.agents.residual)") from None
    return policies_cfg.PreTrainedConfig, factory.get_policy_class, factory.make_pre_post_processors


class LeRobotBase:
    """A loaded LeRobot policy as a base policy function: raw observation batch -> first actions (B, A)."""

    def __init__(self, directory: Path, spec: EnvSpec, device: torch.device | str = "cpu") -> None:
        pretrained_config, get_policy_class, make_pre_post_processors = _import_lerobot()
        self.directory, self.device = directory, torch.device(device)
        where = f"residual_base lerobot:{directory}"
        try:
            cfg = pretrained_config.from_pretrained(str(directory), local_files_only=True)
            cfg.device = str(self.device)
            policy = get_policy_class(cfg.type).from_pretrained(str(directory), config=cfg, local_files_only=True)
            override = {"device_processor": {"device": str(self.device)}}
            pre, post = make_pre_post_processors(cfg, pretrained_path=str(directory), preprocessor_overrides=override,
                                                 postprocessor_overrides=override)
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as err:
            raise ConfigError(f"{where}: LeRobot could not load it ({type(err).__name__}: {err})") from None
        self.inputs = self._check_features(cfg, spec, where)
        self.policy, self.pre, self.post = policy.to(self.device), pre, post
        self.policy.eval()
        self.policy.requires_grad_(False)

    @staticmethod
    def _check_features(cfg: Any, spec: EnvSpec, where: str) -> dict[str, tuple[str, bool]]:
        """{LeRobot feature: (our observation key, is an image)} for the policy's inputs; ConfigError on a feature
        this env does not have, a shape mismatch, or an action size that is not the env's."""
        ours = {a.name: tuple(a.shape) for a in spec.observation}
        action = (cfg.output_features or {}).get(_ACTION)
        if action is None or tuple(action.shape) != tuple(spec.action.shape):
            got = None if action is None else tuple(action.shape)
            raise ConfigError(f"{where}: the policy's action feature is {got}, this env's actions are "
                              f"{tuple(spec.action.shape)}")
        inputs: dict[str, tuple[str, bool]] = {}
        for feature, ft in (cfg.input_features or {}).items():
            key = obs_key(feature)
            if feature == "observation.state" and key not in ours and len(ours) == 1:
                key = next(iter(ours))  # a Box observation env: its one array is the state
            if key is None or key not in ours:
                raise ConfigError(f"{where}: the policy reads {feature!r}, which this env does not observe (its "
                                  f"observations: {sorted(ours)}; mapping: robot_rl.lerobot_keys)")
            image = _kind(ft) == _VISUAL
            want = tuple(ft.shape)
            have = ours[key]
            have_as = (have[2], have[0], have[1]) if image and len(have) == 3 else have
            if want != have_as:
                raise ConfigError(f"{where}: the policy's {feature!r} has shape {want}, this env's {key!r} is {have}"
                                  + (" (as (C, H, W))" if image else ""))
            inputs[feature] = (key, image)
        if not inputs:
            raise ConfigError(f"{where}: the policy declares no input features")
        return inputs

    @torch.no_grad()
    def __call__(self, obs: Any) -> torch.Tensor:
        flat = flatten_value(obs)  # {slash/path: (B, ...)}; a Box observation batch is {"obs": (B, D)}
        batch: dict[str, torch.Tensor] = {}
        for feature, (key, image) in self.inputs.items():
            x = torch.as_tensor(np.asarray(flat[key]))
            if image:  # uint8 (B, H, W, 3) -> float32 (B, 3, H, W) in [0, 1]
                x = x.permute(0, 3, 1, 2).to(torch.float32) / 255.0
            batch[feature] = x.to(self.device, torch.float32)
        chunk = self.policy.predict_action_chunk(self.pre(batch))
        first = chunk[:, 0] if chunk.dim() == 3 else chunk  # (B, A): the step's action, re-planned every step
        out = self.post(first)
        return torch.as_tensor(out).to(self.device, torch.float32)


def load_lerobot_base(directory: str | Path, spec: EnvSpec, device: torch.device | str = "cpu") -> LeRobotBase:
    """The LeRobot policy in `directory` (a pretrained_model directory) as a base policy function for `spec`."""
    d = Path(directory).expanduser()
    if not (d / "config.json").is_file():
        raise ConfigError(f"residual_base lerobot:{directory}: no config.json there (expected a LeRobot "
                          "pretrained_model directory: config.json, model.safetensors, policy_*processor.json)")
    return LeRobotBase(d, spec, device)
