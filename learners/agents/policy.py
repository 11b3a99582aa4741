"""The actor-side policy: observation encoder + tanh-Gaussian actor (+ the discrete gripper head), nothing else.

Actors import only this module (it imports learners.agents.config/obs/nets/encoders/residual, never the critic, the
agent or the replay code), build the policy from the EnvSpec and the AgentConfig, and load the weights the learner
sends:

    policy = build_policy(spec, cfg, device="cpu")    # loads the frozen backbone from cfg.encoder_weights itself
    policy.load_trainable_state(arrays)               # {name: np.ndarray} from the learner; ShapeError on mismatch
    action = policy.act(obs, deterministic=False)     # np.float32 (A,), in [-1, 1]

`trainable_state()` holds only the trainable weights the policy needs: actor MLP, the encoders' trainable parts
(spatial-embedding heads, from-scratch conv nets, proprio branch) and the gripper head; frozen backbone weights
are never in it (each side loads them from the same local file).

Gripper head (cfg.gripper_head): the last action dim is a discrete gripper command with values {-1, 0, +1}
(index 0, 1, 2; which value closes/opens is the env's convention), chosen by argmax of a Q network over
{-1, 0, +1} (HIL-SERL's double-DQN gripper critic); the Gaussian actor outputs only the other (arm) dims.

Residual RL (cfg.residual_base): `build_policy` loads the frozen base with `load_base_policy`; a base that is one
of our own policies (a run or a policy file) is rebuilt here by `load_run_policy` (learners.agents.residual holds
the base interface and the other sources, and imports nothing of this module).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from learners.agents.config import AgentConfig
from learners.agents.encoders import ObservationEncoder
from learners.agents.nets import MLP, xavier_linear
from learners.agents.obs import ObsLayout
from learners.agents.residual import (
    LEROBOT_PREFIX,
    POLICY_FILE_SUFFIX,
    PY_PREFIX,
    FrozenBase,
    external_base,
    read_policy_file,
)
from robot_rl.errors import ConfigError, ShapeError
from robot_rl.specs import EnvSpec

GRIPPER_VALUES = (-1.0, 0.0, 1.0)
_LOG_2PI = math.log(2.0 * math.pi)


def resolve_device(name: str) -> torch.device:
    """'auto' -> cuda when available, else cpu; anything else as given."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


class TanhGaussianActor(nn.Module):
    """MLP -> mean and a bounded log-std; actions a = tanh(mean + std * eps), log-probs with the tanh correction.

    log std = log(std_min) + (log(std_max) - log(std_min)) * (tanh(raw) + 1) / 2 keeps std in [std_min, std_max]
    smoothly (a hard clip would zero the gradient at the bounds); the raw bias starts so that std starts at 1.
    """

    def __init__(self, in_dim: int, action_dim: int, cfg: AgentConfig) -> None:
        super().__init__()
        self.trunk = MLP(in_dim, cfg.hidden_dims, None, cfg.layer_norm, cfg.activation)
        self.mean = xavier_linear(nn.Linear(self.trunk.out_dim, action_dim))
        self.log_std = xavier_linear(nn.Linear(self.trunk.out_dim, action_dim))
        self.action_dim = action_dim
        self.log_std_min = math.log(cfg.std_min)
        self.log_std_max = math.log(cfg.std_max)
        # std = 1 at init (raw = 0 would put std at the geometric middle of the bounds, ~7e-3 for [1e-5, 5])
        frac = (0.0 - self.log_std_min) / (self.log_std_max - self.log_std_min)
        with torch.no_grad():
            self.log_std.bias.fill_(math.atanh(min(max(2.0 * frac - 1.0, -0.999), 0.999)))

    def forward(self, feats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(feats)
        raw = self.log_std(h)
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (torch.tanh(raw) + 1.0)
        return self.mean(h), log_std

    def sample(self, feats: torch.Tensor, noise: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """(action, log_prob) for given standard-normal `noise` (B, A); noise None = the deterministic mode."""
        mean, log_std = self(feats)
        return tanh_gaussian(mean, log_std, noise)


def tanh_gaussian(mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor | None,
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Reparameterised tanh-Gaussian sample and its log-probability (summed over the last axis); float32 whatever
    the inputs' precision (bf16 under mixed precision)."""
    mean, log_std = mean.float(), log_std.float()
    eps = torch.zeros_like(mean) if noise is None else noise
    u = mean + log_std.exp() * eps
    log_prob = (-0.5 * eps.pow(2) - log_std - 0.5 * _LOG_2PI).sum(-1)
    # log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)), numerically stable
    log_prob = log_prob - (2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))).sum(-1)
    return torch.tanh(u), log_prob


class GripperQNetwork(nn.Module):
    """Q values of the three gripper commands {-1, 0, +1} from the encoder features (HIL-SERL grasp critic)."""

    def __init__(self, in_dim: int, cfg: AgentConfig) -> None:
        super().__init__()
        self.net = MLP(in_dim, cfg.gripper_hidden_dims, len(GRIPPER_VALUES), True, cfg.activation)

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        return self.net(feats)


def gripper_index(values: torch.Tensor) -> torch.Tensor:
    """Continuous gripper action values -> discrete index 0, 1, 2 (round to -1, 0, +1, then shift)."""
    return (torch.round(values.clamp(-1.0, 1.0)) + 1.0).long()


class Policy(nn.Module):
    """Encoder + tanh-Gaussian actor (+ gripper Q head): everything an actor needs to act (the acting half of the
    Agent seam, learners.agents.agent.SupportsAct)."""

    def __init__(self, spec: EnvSpec, cfg: AgentConfig) -> None:
        super().__init__()
        act = spec.action
        if len(act.shape) != 1 or act.shape[0] < 1:
            raise ShapeError(f"action must be a 1-D Box with at least one dim, got shape {act.shape}")
        if cfg.gripper_head and act.shape[0] < 2:
            raise ConfigError(f"gripper_head=True needs an action with >= 2 dims (arm + gripper), got {act.shape}")
        self.spec = spec
        self.cfg = cfg
        self.layout = ObsLayout.from_spec(spec, cfg.state_select, cfg.state_scale)
        self.action_dim = int(act.shape[0])
        self.arm_dim = self.action_dim - (1 if cfg.gripper_head else 0)
        self.encoder = ObservationEncoder(self.layout, cfg)
        # residual RL: the actor sees the features and the base action and outputs a bounded correction, zero at
        # the start (the policy starts as the base policy plus exploration noise)
        residual = cfg.residual_base is not None
        self.actor = TanhGaussianActor(self.encoder.out_dim + (self.arm_dim if residual else 0), self.arm_dim, cfg)
        if residual:
            with torch.no_grad():
                self.actor.mean.weight.zero_()
                self.actor.mean.bias.zero_()
        self.gripper: GripperQNetwork | None = GripperQNetwork(self.encoder.out_dim, cfg) if cfg.gripper_head \
            else None
        self._generator: torch.Generator | None = None
        self.base: FrozenBase | None = None  # set by build_policy (cfg.residual_base); not a submodule: frozen

    @property
    def device(self) -> torch.device:
        return next(self.actor.parameters()).device

    def generator(self) -> torch.Generator:
        """The policy's own random stream (exploration noise), seeded from cfg.seed, on the policy's device."""
        if self._generator is None or self._generator.device != self.device:
            self._generator = torch.Generator(device=self.device)
            self._generator.manual_seed(self.cfg.seed + 1)
        return self._generator

    def features(self, images: Mapping[str, torch.Tensor], state: torch.Tensor | None) -> torch.Tensor:
        return self.encoder(images, state)

    def actor_input(self, feats: torch.Tensor, base_actions: torch.Tensor | None) -> torch.Tensor:
        """What the actor network sees: the features, and with a residual base the base's arm action too."""
        return feats if base_actions is None else torch.cat([feats, base_actions[:, : self.arm_dim]], -1)

    def combine(self, base_actions: torch.Tensor | None, actor_actions: torch.Tensor) -> torch.Tensor:
        """The executed arm action: the actor's own, or base + residual_scale x correction, clipped to [-1, 1]."""
        if base_actions is None:
            return actor_actions
        return (base_actions[:, : self.arm_dim] + self.cfg.residual_scale * actor_actions).clamp(-1.0, 1.0)

    def sample_actions(self, feats: torch.Tensor, base_actions: torch.Tensor | None, noise: torch.Tensor | None,
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """(executed arm actions, log-prob of the actor's sample) for standard-normal `noise` (None: the mode)."""
        out, logp = self.actor.sample(self.actor_input(feats, base_actions), noise)
        return self.combine(base_actions, out), logp

    def base_actions(self, obs: Any, batched: bool = True) -> torch.Tensor | None:
        """The frozen base policy's actions (B, A) for raw observations (None without a residual base)."""
        if self.cfg.residual_base is None:
            return None
        if self.base is None:
            raise ConfigError(f"residual_base {self.cfg.residual_base}: the base policy is not loaded (build the "
                              "policy with learners.agents.policy.build_policy)")
        if not batched:
            obs = {k: np.asarray(v)[None] for k, v in self.layout.flat(obs, batched=False).items()}
        return self.base(obs)

    def action_from_features(self, feats: torch.Tensor, deterministic: bool,
                             base_actions: torch.Tensor | None = None) -> torch.Tensor:
        """Full actions (B, A) in [-1, 1] from encoder features (arm from the actor, plus the base's action with a
        residual base; gripper from its head)."""
        gen = self.generator()
        noise = None if deterministic else torch.randn(feats.shape[0], self.arm_dim, generator=gen,
                                                       device=feats.device)
        arm, _ = self.sample_actions(feats, base_actions, noise)
        if self.gripper is None:
            return arm
        idx = self.gripper(feats).argmax(-1)
        eps = self.cfg.gripper_epsilon
        if not deterministic and eps > 0:
            rand = torch.randint(0, len(GRIPPER_VALUES), idx.shape, generator=gen, device=feats.device)
            explore = torch.rand(idx.shape, generator=gen, device=feats.device) < eps
            idx = torch.where(explore, rand, idx)
        grip = idx.to(arm.dtype).unsqueeze(-1) - 1.0
        return torch.cat([arm, grip], dim=-1)

    @torch.no_grad()
    def act(self, obs: Any, deterministic: bool = False, batched: bool = False) -> np.ndarray:
        """Action for one observation (float32 (A,)) or a batch (batched=True: (B, A)), in [-1, 1]."""
        was = self.training
        self.eval()
        try:
            images, state = self.layout.to_torch(obs, self.device, batched=batched)
            out = self.action_from_features(self.features(images, state), deterministic,
                                            self.base_actions(obs, batched))
        finally:
            self.train(was)
        arr = out.float().cpu().numpy()
        return arr if batched else arr[0]

    # --- weights for the wire
    def trainable_names(self) -> list[str]:
        frozen = {f"encoder.{n}" for n in self.encoder.frozen_names()}
        return [n for n in self.state_dict() if n not in frozen]

    def trainable_state(self) -> dict[str, np.ndarray]:
        """{name: float32 array} of every trainable weight the policy needs (no frozen backbone weights)."""
        sd = self.state_dict()
        return {n: sd[n].detach().cpu().numpy().copy() for n in self.trainable_names()}

    def load_trainable_state(self, arrays: Mapping[str, Any]) -> None:
        """Load `trainable_state()` arrays; ShapeError (nothing loaded) on missing/unexpected names or shapes."""
        names = self.trainable_names()
        missing = sorted(set(names) - set(arrays))
        unexpected = sorted(set(arrays) - set(names))
        if missing or unexpected:
            raise ShapeError(f"policy weights do not match this policy: missing {missing[:5]}"
                             f"{'...' if len(missing) > 5 else ''}, unexpected {unexpected[:5]}"
                             f"{'...' if len(unexpected) > 5 else ''}")
        sd = self.state_dict()
        bad = [f"{n}: got {tuple(np.shape(arrays[n]))}, want {tuple(sd[n].shape)}" for n in names
               if tuple(np.shape(arrays[n])) != tuple(sd[n].shape)]
        if bad:
            raise ShapeError(f"policy weights have wrong shapes: {bad[:5]}")
        nonfinite = [n for n in names if not np.all(np.isfinite(np.asarray(arrays[n])))]
        if nonfinite:
            raise ShapeError(f"policy weights contain NaN/inf: {nonfinite[:5]}")
        with torch.no_grad():
            for n in names:
                sd[n].copy_(torch.as_tensor(np.asarray(arrays[n])).to(sd[n].dtype))


def build_policy(spec: EnvSpec, cfg: AgentConfig | None = None, device: str | torch.device | None = None,
                 ) -> Policy:
    """The actor-side policy for `spec` on `device` (default: cfg.device); initial weights from cfg.seed."""
    cfg = cfg or AgentConfig()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        policy = Policy(spec, cfg)
    dev = resolve_device(cfg.device) if device is None else torch.device(device)
    policy = policy.to(dev)
    if cfg.residual_base is not None:
        policy.base = load_base_policy(cfg.residual_base, spec, dev)
    return policy


# ---------------------------------------------------------------------- our own policies as residual bases
class _PolicyFn:
    """Our own policy as a base (learners.agents.residual): its deterministic action (the mode), weights frozen."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        policy.eval()
        policy.requires_grad_(False)

    def __call__(self, obs: Any) -> torch.Tensor:
        images, state = self.policy.layout.to_torch(obs, self.policy.device, batched=True)
        return self.policy.action_from_features(self.policy.features(images, state), deterministic=True)


def load_run_policy(path: str | Path, spec: EnvSpec, device: torch.device | str = "cpu") -> Policy:
    """The policy of a `robot-rl train-bc` or `robot-rl train` run (a run directory, its checkpoints/, one
    ckpt_*, or a policy .safetensors file with its .json), rebuilt from its saved AgentConfig for `spec`;
    ConfigError / CheckpointError / ShapeError otherwise."""
    from robot_rl.checkpoint import find_checkpoint, load_checkpoint

    p = Path(path)
    if p.is_file() and p.suffix == POLICY_FILE_SUFFIX:
        arrays, meta = read_policy_file(p)
        where = str(p)
    else:
        ckpt = find_checkpoint(p)
        groups, meta = load_checkpoint(ckpt)
        where = str(ckpt)
        if "policy" in groups:  # robot-rl train-bc
            arrays = groups["policy"]
        elif "agent" in groups:  # robot-rl train / learner: the agent's policy/ entries
            arrays = {k[len("policy/"):]: v for k, v in groups["agent"].items() if k.startswith("policy/")}
        else:
            raise ConfigError(f"base policy {path}: {ckpt} holds neither a 'policy' nor an 'agent' group")
    if not isinstance(meta.get("agent_config"), dict):
        raise ConfigError(f"base policy {path}: {where} has no agent_config")
    cfg = AgentConfig.from_dict(meta["agent_config"])
    if cfg.residual_base is not None:
        raise ConfigError(f"base policy {path}: it is itself a residual policy; use a BC or RL policy as the base")
    if isinstance(meta.get("spec"), dict):
        EnvSpec.from_dict(meta["spec"]).require_equal(spec, what=f"the base policy in {path}")
    policy = build_policy(spec, cfg.replace(device=str(device)), device=device)
    names = set(policy.trainable_names())
    policy.load_trainable_state({k: np.array(v) for k, v in arrays.items() if k in names})
    return policy


def load_base_policy(source: str, spec: EnvSpec, device: torch.device | str = "cpu") -> FrozenBase:
    """The frozen base policy named by `source` (a run, a policy file, py:MODULE:FACTORY or lerobot:DIR: see
    learners.agents.residual) for `spec`."""
    action_dim = int(spec.action.shape[0])
    if source.startswith((PY_PREFIX, LEROBOT_PREFIX)):
        return FrozenBase(external_base(source, spec, device), action_dim, device, source)
    if not Path(source).exists():
        raise ConfigError(f"residual_base {source}: no such run directory, checkpoint or policy file (or use "
                          "py:MODULE:FACTORY or lerobot:DIR)")
    return FrozenBase(_PolicyFn(load_run_policy(source, spec, device)), action_dim, device, source)
