"""One `SACAgent.update()` batch on the agent's device: checked, with the critic targets' reward terms, split into
the update's minibatches.

`to_update_batch` turns a replay batch (learners.replay.buffer.ReplayBuffer.sample / MixedSampler.sample: a dict of
numpy arrays or tensors, see learners.agents.sac) into an `UpdateBatch` of B rows, or raises a one-line
ShapeError naming the first column that does not fit: obs / next_obs -> camera images and the state vector
(learners.agents.obs.ObsLayout; with a feature cache's `obs_features` no images: they may be left out), actions
(B, A), and per row (B,): the discounted reward sum up to the bootstrap
(`returns`, and `grasp_penalty_returns` for the gripper head), the bootstrap's weight gamma^k (1 - terminated)
(`bootstrap`; k = 1, or the row's n_steps for multi-step rows), the lower bound of the critic target
(`target_floor`: the Monte-Carlo return with cfg.mc_lower_bound, else -inf) and the human-row mask
(`intervention`). The agent adds what needs its networks (DrQ shifts, frozen-backbone features, the residual
base's actions) with `dataclasses.replace`.

Minibatches: one update takes cfg.critic_updates_per_actor_update = k equal minibatches; minibatch i is rows
i, i+k, i+2k, ... (`rows(i)`), because samplers concatenate their sources (MixedSampler: online rows, then demo
rows) and contiguous chunks would give some critic updates, and the actor, one source only. Without cameras
`in_minibatch_order()` puts the rows in minibatch order once, so that each minibatch is a contiguous block.

Usage::

    b = to_update_batch(batch, policy.layout, policy.action_dim, cfg, device)
    for i in range(b.k):
        sl = b.rows(i)                     # a slice: b.actions[sl], b.returns[sl], ...
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from learners.agents.config import AgentConfig
from learners.agents.encoders import ObservationEncoder
from learners.agents.obs import ObsLayout
from learners.replay.buffer import mc_floor
from robot_rl.errors import ShapeError

_ROW_COLUMNS = ("rewards", "terminated", "grasp_penalty", "intervention")
"""(B,) columns of a replay batch; a missing one is zeros."""


@dataclasses.dataclass(frozen=True)
class UpdateBatch:
    """One update's rows on the device (B = k x minibatch rows; see the module docstring)."""

    images: dict[str, torch.Tensor]
    """Camera images of obs, {camera: (B, ...)} (empty without cameras)."""
    next_images: dict[str, torch.Tensor]
    state: torch.Tensor | None
    """The state vector of obs (B, D), or None without one."""
    next_state: torch.Tensor | None
    actions: torch.Tensor
    """(B, A) in [-1, 1]; with a gripper head the last dim is the gripper command."""
    returns: torch.Tensor
    """(B,) discounted reward sum up to the bootstrap."""
    grasp_penalty_returns: torch.Tensor
    """(B,) discounted grasp-penalty sum up to the bootstrap (the gripper head's extra reward)."""
    bootstrap: torch.Tensor
    """(B,) weight of the bootstrapped value: gamma^k (1 - terminated)."""
    target_floor: torch.Tensor
    """(B,) lower bound of the critic target (-inf = none)."""
    intervention: torch.Tensor
    """(B,) 1.0 on human rows (the rows the behaviour-cloning term imitates)."""
    k: int = 1
    """Minibatches (critic updates) in this batch."""
    strided: bool = True
    """Minibatch i is rows i::k (True) or the contiguous block i (after `in_minibatch_order`)."""
    backbone: dict[str, torch.Tensor] | None = None
    """Frozen backbones' features of `images`, computed once per update (None: the encoder runs on images)."""
    next_backbone: dict[str, torch.Tensor] | None = None
    predictions: dict[str, torch.Tensor] | None = None
    """The frozen target heads' predictions {camera: (B, P)} on `backbone`, computed once per update or read from a
    feature cache (None: the heads run where the features are needed, or there is no target head)."""
    next_predictions: dict[str, torch.Tensor] | None = None
    base: torch.Tensor | None = None
    """The residual base policy's actions (B, A) on obs (None without a residual base)."""
    next_base: torch.Tensor | None = None
    bc_filter_on: torch.Tensor | None = None
    """0-d: 1.0 once the BC term's Q filters apply, 0.0 in their warm-up (AgentConfig.bc_q_filter_start); None
    without a filter or a warm-up (the filters then always apply: no tensor made and copied per update)."""

    @property
    def minibatch(self) -> int:
        """Rows per minibatch."""
        return self.actions.shape[0] // self.k

    def rows(self, i: int) -> slice:
        """The rows of minibatch i."""
        if self.strided:
            return slice(i, None, self.k)
        return slice(i * self.minibatch, (i + 1) * self.minibatch)

    def in_minibatch_order(self) -> UpdateBatch:
        """The same rows reordered so that minibatch i is the contiguous block i (a batch without cameras)."""
        if self.images or not self.strided:
            raise ValueError("in_minibatch_order: only for a strided batch without cameras")
        order = torch.arange(self.actions.shape[0], device=self.actions.device).view(self.minibatch, self.k)
        order = order.t().reshape(-1)
        moved = {f.name: getattr(self, f.name).index_select(0, order) for f in dataclasses.fields(self)
                 if isinstance(getattr(self, f.name), torch.Tensor) and getattr(self, f.name).dim() > 0}
        return dataclasses.replace(self, strided=False, **moved)


def to_update_batch(batch: Mapping[str, Any], layout: ObsLayout, action_dim: int, cfg: AgentConfig,
                    device: torch.device) -> UpdateBatch:
    """The checked UpdateBatch of a replay batch, its rows strided into cfg.critic_updates_per_actor_update
    minibatches; ShapeError naming the first column that does not fit."""
    for key in ("obs", "next_obs", "actions", "rewards", "terminated"):
        if key not in batch:
            raise ShapeError(f"batch is missing '{key}' (has {sorted(batch)})")
    if "obs_features" in batch:  # a feature cache's rows: the update reads the cached features, not the images
        layout = dataclasses.replace(layout, cameras=())
    images, state = layout.to_torch(batch["obs"], device, batched=True)
    next_images, next_state = layout.to_torch(batch["next_obs"], device, batched=True)
    actions = torch.as_tensor(batch["actions"]).to(device, torch.float32)
    n = actions.shape[0]
    if actions.shape != (n, action_dim):
        raise ShapeError(f"batch actions: expected (B, {action_dim}), got {tuple(actions.shape)}")
    cols = _row_columns(batch, n, device)
    returns, gp_returns, bootstrap = _reward_terms(batch, cols, n, cfg.discount, device)
    floor = torch.as_tensor(mc_floor(batch, n, cfg.mc_lower_bound)).to(device)
    for name, t in list(images.items()) + list(next_images.items()):
        if t.shape[0] != n:
            raise ShapeError(f"batch camera '{name}' has {t.shape[0]} rows, actions have {n}")
    for st in (state, next_state):
        if st is not None and st.shape[0] != n:
            raise ShapeError(f"batch state has {st.shape[0]} rows, actions have {n}")
    k = cfg.critic_updates_per_actor_update
    if n % k != 0 or n < k:
        raise ShapeError(f"batch of {n} rows does not split into critic_updates_per_actor_update={k} "
                         f"equal minibatches (use cfg.samples_per_update = {cfg.samples_per_update})")
    return UpdateBatch(images=images, next_images=next_images, state=state, next_state=next_state, actions=actions,
                       returns=returns, grasp_penalty_returns=gp_returns, bootstrap=bootstrap, target_floor=floor,
                       intervention=cols["intervention"], k=k)


def _per_camera(column: str, value: Any, shapes: Mapping[str, tuple[int, ...]], n: int, device: torch.device,
                ) -> dict[str, torch.Tensor]:
    """{camera: float32 tensor (n, *shapes[camera])} on `device` from a batch column of per-camera arrays;
    ShapeError naming `column` when a camera is missing or extra or a shape does not fit."""
    if not isinstance(value, Mapping) or set(value) != set(shapes):
        raise ShapeError(f"batch {column}: expected cameras {sorted(shapes)}, got "
                         f"{sorted(value) if isinstance(value, Mapping) else type(value).__name__}")
    out = {}
    for name, shape in shapes.items():
        t = torch.as_tensor(value[name]).to(device, torch.float32)
        if tuple(t.shape) != (n, *shape):
            raise ShapeError(f"batch {column} '{name}': expected {(n, *shape)}, got {tuple(t.shape)}")
        out[name] = t
    return out


def cached_backbone(features: Any, encoder: ObservationEncoder, n: int, device: torch.device,
                    ) -> dict[str, torch.Tensor]:
    """A batch's cached backbone outputs ({camera: (B, C, h, w)}, learners.replay.feature_cache) as float32 tensors
    on `device`, checked against the encoder's heads; ShapeError when the encoder's backbones are not all frozen
    (cached outputs would not follow a training backbone), a camera is missing or a shape does not fit."""
    if not encoder.all_backbones_frozen:
        raise ShapeError("the batch carries cached backbone features (obs_features) but a camera backbone of this "
                         "agent trains: detach the feature cache (feature_cache=off)")
    shapes = {name: enc.feature_shape for name, enc in encoder.camera_encoders().items()}
    return _per_camera("obs_features", features, shapes, n, device)


def cached_predictions(predictions: Any, encoder: ObservationEncoder, n: int, device: torch.device,
                       ) -> dict[str, torch.Tensor]:
    """A batch's cached target-head predictions ({camera: (B, P)}, learners.replay.feature_cache) as float32
    tensors on `device`; ShapeError when the cameras or a shape do not fit the encoder's target heads."""
    shapes = {name: (dim,) for name, dim in encoder.prediction_dims().items()}
    return _per_camera("obs_predictions", predictions, shapes, n, device)


def with_target_predictions(b: UpdateBatch, batch: Mapping[str, Any], encoder: ObservationEncoder,
                            device: torch.device) -> UpdateBatch:
    """b with the frozen target heads' predictions on its backbone features: a feature cache's
    (`obs_predictions` / `next_obs_predictions`, computed once per cached crop) or computed here once for the update
    (the online and target encoders share the heads, and each minibatch reads them); b unchanged without target
    heads or precomputed backbone features."""
    if b.backbone is None or b.next_backbone is None or not encoder.prediction_dims():
        return b
    n = b.actions.shape[0]
    if "obs_predictions" in batch and "next_obs_predictions" in batch:
        return dataclasses.replace(b, predictions=cached_predictions(batch["obs_predictions"], encoder, n, device),
                                   next_predictions=cached_predictions(batch["next_obs_predictions"], encoder, n,
                                                                       device))
    return dataclasses.replace(b, predictions=encoder.target_predictions(b.backbone),
                               next_predictions=encoder.target_predictions(b.next_backbone))


def _row_columns(batch: Mapping[str, Any], n: int, device: torch.device) -> dict[str, torch.Tensor]:
    """The (B,) float32 columns rewards, terminated, grasp_penalty, intervention (zeros where missing)."""
    out: dict[str, torch.Tensor] = {}
    for key in _ROW_COLUMNS:
        if key not in batch:
            out[key] = torch.zeros(n, device=device)
            continue
        t = torch.as_tensor(batch[key]).to(device, torch.float32).reshape(-1)
        if t.shape != (n,):
            raise ShapeError(f"batch '{key}': expected ({n},), got {tuple(np.shape(batch[key]))}")
        out[key] = t
    return out


def _reward_terms(batch: Mapping[str, Any], cols: Mapping[str, torch.Tensor], n: int, gamma: float,
                  device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(returns, grasp-penalty returns, bootstrap weights), each (B,): one step, or multi-step rows
    (learners.replay.buffer.ReplayBuffer.gather(n_step=...): n_rewards / n_grasp_penalty (B, n), n_steps (B,))."""
    if "n_steps" not in batch:
        return cols["rewards"], cols["grasp_penalty"], gamma * (1.0 - cols["terminated"])
    steps = torch.as_tensor(batch["n_steps"]).to(device, torch.float32).reshape(-1)
    seqs = {}
    for key in ("n_rewards", "n_grasp_penalty"):
        if key not in batch:
            raise ShapeError(f"batch has 'n_steps' but no '{key}'")
        seqs[key] = torch.as_tensor(batch[key]).to(device, torch.float32)
        if seqs[key].dim() != 2 or seqs[key].shape[0] != n:
            raise ShapeError(f"batch '{key}': expected ({n}, n_step), got {tuple(seqs[key].shape)}")
    if steps.shape != (n,) or bool((steps < 1).any()) or bool((steps > seqs["n_rewards"].shape[1]).any()):
        raise ShapeError(f"batch 'n_steps': expected ({n},) values in [1, n_step]")
    powers = gamma ** torch.arange(seqs["n_rewards"].shape[1], device=device, dtype=torch.float32)
    return (seqs["n_rewards"] @ powers, seqs["n_grasp_penalty"] @ powers,
            gamma ** steps * (1.0 - cols["terminated"]))


__all__ = ["UpdateBatch", "cached_backbone", "cached_predictions", "to_update_batch", "with_target_predictions"]
