"""SAC / RLPD / DrQ agent with a batched critic ensemble and an optional HIL-SERL gripper head.

One class covers the family; the config picks the recipe (learners.agents.config presets):
- SAC: tanh-Gaussian actor, N independent critics (batched weights), target = min over a random subset of M
  target critics (REDQ/RLPD) or over all, learned temperature toward a target entropy, optional backup entropy,
  soft target updates (tau), optional gradient clipping.
- UTD: one `update(batch)` call takes `critic_updates_per_actor_update` x `batch_size` rows, splits them into
  that many minibatches, runs a critic (+ target) update on each, then one actor + temperature update on the
  last minibatch (SERL's `update_high_utd`). Minibatch i is rows i, i+k, i+2k, ... (k = the ratio), so a batch
  that is the concatenation of sources (MixedSampler: online rows, then demo rows) gives every minibatch the
  same mix.
- RLPD: SAC + symmetric sampling (learners.replay.buffer.MixedSampler) + LayerNorm critics + ensemble 10 / subset 2.
- DrQ (cameras in the observation): random-shift augmentation of obs and next_obs independently, one encoder per
  camera shared by actor and critic (trained by the critic loss; the actor sees detached features), a frozen
  backbone runs once per update for the whole batch (obs and next_obs), shared by the online and target encoders.
- Classification critic (cfg.critic_loss='hl_gauss', Farebrother et al. 2024): each member outputs logits over
  fixed value bins (learners.agents.nets.HLGauss) and is trained by cross-entropy toward the target's Gaussian over the
  bins; every reader of Q (target min, actor loss, BC Q filter, Monte-Carlo floor) takes the expected value
  (`q_values`). The gripper head stays MSE.
- Gripper head (cfg.gripper_head): double DQN over {-1, 0, +1} on detached encoder features, reward + the batch's
  `grasp_penalty` (the flip penalty, set by envs.wrappers.GripperPenaltyWrapper); the continuous critic sees
  only the arm dims.

The update reads like rlpd's: `update(batch)` = `_prepare` (the checked batch with its reward terms and
minibatches, learners.agents.sac_batch, plus DrQ shifts, frozen-backbone features and residual base actions), then
k x `_critic_phase` (critic + encoder step, the gripper head's `_gripper_phase`, soft target updates), then
`_actor_phase` on the last minibatch and `_temperature_phase`. Each phase's loss is a pure function of tensors
(`_critic_loss_eager`, `_actor_loss_eager`; compiled with cfg.compile) followed by one optimizer step.

Mixed precision (cfg.mixed_precision='bf16'): the update's forward passes run under torch.autocast(bfloat16); the
networks' outputs are cast back to float32 before any loss, target, log-probability or minimum, and backward + the
optimizer steps run outside autocast on float32 weights (no loss scaling: bf16 has float32's exponent range).

The update is pure torch: no I/O, no clocks (with cfg.compile the first update is timed, `compile_s`, and a
compiled loss that fails on its first forward or backward falls back to eager for good with a RuntimeWarning,
`compile_status`). Batches (learners.replay.buffer.ReplayBuffer.sample; checked by
learners.agents.sac_batch.to_update_batch) are dicts of numpy arrays or tensors: obs / next_obs (flat
{slash/path: (B, ...)} or nested dicts, or a (B, ...) array for a Box observation), actions (B, A) in [-1, 1],
rewards (B,), terminated (B,), optional grasp_penalty (B,) and intervention (B,) (human rows: the rows the optional
behaviour-cloning term, cfg.bc_weight, imitates), and for multi-step targets (cfg.n_step > 1,
learners.replay.buffer.ReplayBuffer.gather) n_rewards / n_grasp_penalty (B, n) and n_steps (B,): the critic target
is then sum_j gamma^j r_j + gamma^k (1 - terminated) min Q'(s_k, a'), with next_obs = s_k, the frame after the
row's last step.

Usage::

    agent = SACAgent(spec, rlpd_state_config())
    metrics = agent.update(sampler.sample(agent.cfg.samples_per_update))   # {"critic_loss": ..., ...}
    action = agent.act(obs, deterministic=False)
    wire = agent.trainable_state()                   # -> actors: policy.load_trainable_state(wire)
    arrays = agent.state_dict(); agent.load_state_dict(arrays)   # full state (nets, targets, optimizers, RNG)
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from learners.agents.bc import bc_term
from learners.agents.config import AgentConfig
from learners.agents.encoders import random_shift
from learners.agents.graphs import GraphedUpdate, graphs_mode
from learners.agents.nets import EnsembleMLP, HLGauss, soft_update
from learners.agents.policy import GRIPPER_VALUES, Policy, build_policy, gripper_index, resolve_device, tanh_gaussian
from learners.agents.precision import check_bf16, matmul_precision
from learners.agents.sac_batch import UpdateBatch, cached_backbone, to_update_batch, with_target_predictions
from robot_rl.errors import ConfigError, ShapeError
from robot_rl.specs import EnvSpec

_OPT_FIELDS = ("step", "exp_avg", "exp_avg_sq")


@dataclasses.dataclass(frozen=True)
class _NextActions:
    """a' ~ pi(s') for a minibatch's next observations (no gradient): the target critics' input [target features of
    s', a'] (B, F + A), log pi(a'|s') (B,) and the online / target features of s' (B, F) for the gripper head."""

    target_in: torch.Tensor
    logp: torch.Tensor
    feats: torch.Tensor | None = None
    target_feats: torch.Tensor | None = None

    def select(self, rows: slice) -> _NextActions:
        """The rows of one minibatch (the gripper head computes its s' features itself)."""
        return _NextActions(self.target_in[rows], self.logp[rows])


class SACAgent:
    """SAC-family learner (see the module docstring); built from an EnvSpec and an AgentConfig."""

    def __init__(self, spec: EnvSpec, cfg: AgentConfig | None = None) -> None:
        self.cfg = cfg = cfg or AgentConfig()
        self.spec = spec
        self.device = resolve_device(cfg.device)
        check_bf16(cfg, self.device)
        self.policy: Policy = build_policy(spec, cfg, device=self.device)
        self.encoder = self.policy.encoder
        self.actor = self.policy.actor
        self.gripper = self.policy.gripper
        self.arm_dim = self.policy.arm_dim
        # classification critic (cfg.critic_loss='hl_gauss'): `bins` logits per member over a fixed value support
        self.hl_gauss: HLGauss | None = None
        if cfg.critic_loss == "hl_gauss":
            self.hl_gauss = HLGauss(*cfg.hl_gauss_support, cfg.hl_gauss_bins, cfg.hl_gauss_sigma_ratio, self.device)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed + 7919)
            self.critic = EnsembleMLP(cfg.ensemble_size, self.encoder.out_dim + self.arm_dim, cfg.hidden_dims,
                                      self.hl_gauss.bins if self.hl_gauss is not None else 1,
                                      cfg.layer_norm, cfg.activation).to(self.device)
        if self.hl_gauss is not None:  # start near Q = 0 like an MSE critic, not at the support's midpoint
            with torch.no_grad():
                self.critic.out.bias.copy_(self.hl_gauss.initial_bias(0.0).expand_as(self.critic.out.bias))
        self.target_encoder = self.encoder.clone_for_target()
        self.target_encoder.eval()  # deterministic targets (no dropout)
        self.target_critic = _frozen_copy(self.critic)
        self.target_gripper = _frozen_copy(self.gripper) if self.gripper is not None else None
        self.log_alpha = nn.Parameter(torch.tensor(math.log(cfg.temperature_init), device=self.device))
        self.target_entropy = (cfg.target_entropy if cfg.target_entropy is not None
                               else cfg.target_entropy_per_dim * self.arm_dim)

        self._enc_params = self.encoder.trainable_parameters()
        self._critic_params = list(self.critic.parameters()) + self._enc_params
        self._actor_params = list(self.actor.parameters())
        self.actor_opt = _adam(self._actor_params, cfg.actor_lr)
        self.critic_opt = _adam(self._critic_params, cfg.critic_lr)
        self.temp_opt = _adam([self.log_alpha], cfg.temperature_lr)
        self.gripper_opt = _adam(list(self.gripper.parameters()), cfg.actor_lr) if self.gripper is not None else None
        self._targets: list[tuple[Sequence[torch.Tensor], Sequence[torch.Tensor]]] = [
            (list(self.target_critic.parameters()), list(self.critic.parameters())),
            (self.target_encoder.trainable_parameters(), self._enc_params),
        ]
        if self.target_gripper is not None and self.gripper is not None:
            self._targets.append((list(self.target_gripper.parameters()), list(self.gripper.parameters())))
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(cfg.seed + 2)
        self.num_updates = 0
        self._critic_loss: Callable[..., tuple[torch.Tensor, dict[str, torch.Tensor]]] = self._critic_loss_eager
        self._actor_loss: Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]] = \
            self._actor_loss_eager
        # torch.compile (cfg.compile): the compiled losses must prove themselves on their first forward + backward;
        # one that fails there (no C++ compiler, an inductor error) falls back to eager for good, with a warning
        self._unproven: set[str] = set()
        self.compile_status = "off"
        """'off', 'compiled' or 'eager (torch.compile failed: ...)'."""
        self.compile_s: float | None = None
        """With compile: seconds of the first update (tracing + inductor compilation + the update)."""
        if cfg.compile:
            self._critic_loss = torch.compile(self._critic_loss_eager)
            self._actor_loss = torch.compile(self._actor_loss_eager)
            self._unproven = {"critic", "actor"}
            self.compile_status = "compiled"
        graphs, why = graphs_mode(cfg, self.device)  # CUDA graphs (learners.agents.graphs)
        self._graphs = GraphedUpdate(self._update_tensors, self.generator, list(self._optimizers().values()),
                                     self.state_dict, self.load_state_dict) if graphs else None
        self._graphs_off = f"eager ({why})" if why else "off"
        if why:
            warnings.warn(why, RuntimeWarning, stacklevel=2)
        self._metric_names: list[str] = []

    @property
    def graphs_status(self) -> str:
        """'off', 'pending ...', 'captured' or 'eager (why)': how the update runs (AgentConfig.cuda_graphs)."""
        return self._graphs.status if self._graphs is not None else self._graphs_off

    # ------------------------------------------------------------------ acting / weights
    @property
    def temperature(self) -> float:
        return float(self.log_alpha.detach().exp())

    def act(self, obs: Any, deterministic: bool = False) -> np.ndarray:
        """Action in [-1, 1] (float32 (A,)) for one observation."""
        return self.policy.act(obs, deterministic)

    def trainable_state(self) -> dict[str, np.ndarray]:
        """The policy's trainable weights (what actors load); frozen encoder weights are never included."""
        return self.policy.trainable_state()

    def load_trainable_state(self, arrays: Mapping[str, Any]) -> None:
        self.policy.load_trainable_state(arrays)

    def set_state_normalization(self, observations: Any) -> tuple[np.ndarray, np.ndarray]:
        """cfg.obs_norm: per-element mean and std of the state vector the networks see (after state_select and
        state_scale) over a batch of observations ({path: (N, ...)} or (N, D)), used by the policy (and so sent to
        actors) and the target encoder from now on; returns (mean, std). ConfigError without cfg.obs_norm."""
        norms = [enc.state_norm for enc in (self.encoder, self.target_encoder)]
        if not self.cfg.obs_norm or any(n is None for n in norms):
            raise ConfigError("set_state_normalization needs AgentConfig.obs_norm=True and a state observation")
        _, state = self.policy.layout.to_torch(observations, self.device, batched=True)
        if state is None or state.shape[0] < 2:
            raise ShapeError("state normalization needs at least 2 observations with a state vector")
        mean, std = state.mean(0), state.std(0)
        for norm in norms:
            assert norm is not None
            norm.set(mean, std)
        return mean.cpu().numpy(), std.cpu().numpy()

    def q_values(self, x: torch.Tensor, members: torch.Tensor | None = None, target: bool = False) -> torch.Tensor:
        """Q of every (or the `members`) critic, (K, B), for x = [features, arm action] (B, F + A): the scalar
        output of an MSE critic, the expected value over the bins of an hl_gauss one. target=True: the target
        critics."""
        net = self.target_critic if target else self.critic
        out = net(x, members).float()  # float32 also under bf16 mixed precision
        return self.hl_gauss.expected(out) if self.hl_gauss is not None else out.squeeze(-1)

    # ----------------------------------------------------- update: the critic, actor and temperature phases
    def update(self, batch: Mapping[str, Any]) -> dict[str, float]:
        """critic_updates_per_actor_update critic (+ target) updates on equal minibatches of `batch` (strided rows:
        minibatch i = rows i::k), then one actor + temperature update on the last; returns float metrics (critic
        metrics averaged)."""
        t0 = time.perf_counter()
        with self._autocast(), matmul_precision(self.cfg, self.device):  # learners.agents.precision
            out = self._update(batch)
        if self.compile_s is None and self.cfg.compile:  # the first compiled update: timed (tracing + inductor)
            self.compile_s = time.perf_counter() - t0
        return out

    def _update(self, batch: Mapping[str, Any]) -> dict[str, float]:
        """prepare -> k x critic phase -> actor phase -> temperature phase (see the module docstring)."""
        self.encoder.train()
        self.actor.train()
        b = self._prepare(batch)
        metrics = self._graphs(b) if self._graphs is not None else self._update_tensors(b)
        self.num_updates += 1
        return dict(zip(self._metric_names, metrics.cpu().tolist(), strict=True))  # one device sync

    def _update_tensors(self, b: UpdateBatch) -> torch.Tensor:
        """The update on a prepared batch, without host syncs (what learners.agents.graphs captures); the metrics
        as one (M,) float32 tensor, named by self._metric_names."""
        cfg = self.cfg
        # the target subsets of all k critic updates at once: each row a uniformly random M-subset of the members
        members = torch.rand(b.k, cfg.ensemble_size, generator=self.generator, device=self.device).argsort(1)
        members = members[:, : cfg.ensemble_subsample or cfg.ensemble_size]
        # no cameras and no trainable encoder: the next actions of all k minibatches from one actor pass (the actor
        # does not change during the critic updates)
        shared_next = self._next_actions(b, slice(None)) if not b.images and not self._enc_params else None
        alpha = self.log_alpha.detach().exp()
        infos: list[dict[str, torch.Tensor]] = []
        feats = None
        for i in range(b.k):
            feats, info = self._critic_phase(b, b.rows(i), members[i], alpha, shared_next)
            infos.append(info)
        assert feats is not None
        actor_info, logp = self._actor_phase(b, feats, alpha)  # on the last minibatch
        temperature_info = self._temperature_phase(logp)
        out = {key: torch.stack([m[key] for m in infos]).mean() for key in infos[0]}
        out.update(actor_info)
        out.update(temperature_info)
        self._metric_names = list(out)
        return torch.stack([v.float() for v in out.values()])

    def _prepare(self, batch: Mapping[str, Any]) -> UpdateBatch:
        """The batch checked and on the device (learners.agents.sac_batch) with what needs the networks: DrQ's random
        shifts (obs and next_obs apart, per camera), the frozen backbones' features and target-head predictions (once
        per batch, or a feature cache's), the residual base's actions (raw observations); else in minibatch order."""
        cfg = self.cfg
        b = to_update_batch(batch, self.policy.layout, self.policy.action_dim, cfg, self.device)
        if self.policy.layout.cameras and "obs_features" in batch:  # a feature cache's crops (no images in b)
            n = b.actions.shape[0]
            b = dataclasses.replace(
                b, backbone=cached_backbone(batch["obs_features"], self.encoder, n, self.device),
                next_backbone=cached_backbone(batch.get("next_obs_features"), self.encoder, n, self.device))
        elif b.images and cfg.augment_pad > 0:
            pad, gen = cfg.augment_pad, self.generator
            b = dataclasses.replace(b, images={name: random_shift(t, pad, gen) for name, t in b.images.items()},
                                    next_images={name: random_shift(t, pad, gen) for name, t in b.next_images.items()})
        if b.images and b.backbone is None and self.encoder.all_backbones_frozen:
            b = dataclasses.replace(b, backbone=self.encoder.backbone_features(b.images),
                                    next_backbone=self.encoder.backbone_features(b.next_images))
        b = with_target_predictions(b, batch, self.encoder, self.device)
        b = dataclasses.replace(b, base=self.policy.base_actions(batch["obs"]),
                                next_base=self.policy.base_actions(batch["next_obs"]))
        b = b if self.policy.layout.cameras else b.in_minibatch_order()
        if cfg.bc_filters[2] and cfg.bc_q_filter_start > 0:  # a tensor, not a flag: one graph across the warm-up
            on = float(self.num_updates >= cfg.bc_q_filter_start)
            b = dataclasses.replace(b, bc_filter_on=torch.tensor(on, dtype=torch.float32, device=self.device))
        return b

    def _critic_phase(self, b: UpdateBatch, rows: slice, members: torch.Tensor, alpha: torch.Tensor,
                      shared_next: _NextActions | None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """One critic update (with the encoder) on minibatch `rows`, the gripper head's update, then the soft
        target updates; returns the minibatch's encoder features (detached: the actor's input) and its metrics.
        `members`: the target critics whose minimum is the target; `shared_next`: the next actions of the whole
        batch when computed once (else drawn here)."""
        feats = self._features(b, rows)
        nxt = shared_next.select(rows) if shared_next is not None else self._next_actions(b, rows)
        (_, info), norm = self._loss_step(
            "critic", (feats, b.actions[rows, : self.arm_dim], nxt.target_in, nxt.logp, b.returns[rows],
                       b.bootstrap[rows], members, alpha, b.target_floor[rows]), self.critic_opt, self._critic_params)
        if norm is not None:
            info["critic_grad_norm"] = norm.detach()
        if self.gripper is not None:
            info.update(self._gripper_phase(b, rows, feats.detach(), nxt))
        for tgt, src in self._targets:
            soft_update(tgt, src, self.cfg.tau)
        return feats.detach(), info

    def _gripper_phase(self, b: UpdateBatch, rows: slice, feats: torch.Tensor, nxt: _NextActions,
                       ) -> dict[str, torch.Tensor]:
        """One double-DQN update of the gripper head on minibatch `rows` (detached encoder features `feats`):
        online argmax on s', target value, reward + grasp penalty."""
        assert self.gripper is not None and self.target_gripper is not None and self.gripper_opt is not None
        with torch.no_grad():
            next_feats, target_feats = nxt.feats, nxt.target_feats
            if next_feats is None or target_feats is None:
                next_feats = self._features(b, rows, next_obs=True)
                target_feats = self._features(b, rows, next_obs=True, target=True)
            best = self.gripper(next_feats).argmax(-1, keepdim=True)
            next_q = self.target_gripper(target_feats).float().gather(-1, best).squeeze(-1)
            target = b.returns[rows] + b.grasp_penalty_returns[rows] + b.bootstrap[rows] * next_q
        idx = gripper_index(b.actions[rows, -1])
        q = self.gripper(feats).float().gather(-1, idx.unsqueeze(-1)).squeeze(-1)
        loss = (q - target).pow(2).mean()
        self._step(self.gripper_opt, list(self.gripper.parameters()), loss)
        return {"gripper_loss": loss.detach(), "gripper_q_mean": q.detach().mean()}

    def _actor_phase(self, b: UpdateBatch, feats: torch.Tensor, alpha: torch.Tensor,
                     ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """One actor update on the last minibatch (its detached encoder features `feats`), the critic frozen;
        returns the metrics and log pi(a|s) (B,) of the sampled actions (the temperature's input)."""
        last = b.rows(b.k - 1)
        self.critic.requires_grad_(False)
        try:
            noise = torch.randn(b.minibatch, self.arm_dim, generator=self.generator, device=self.device)
            (actor_loss, logp, bc_loss, bc_share), _ = self._loss_step(
                "actor", (feats, noise, alpha, b.actions[last, : self.arm_dim], b.intervention[last],
                          b.base[last] if b.base is not None else None, b.bc_filter_on), self.actor_opt,
                self._actor_params)
        finally:
            self.critic.requires_grad_(True)
        info: dict[str, torch.Tensor] = {}
        if self.cfg.bc_weight > 0:
            info["bc_loss"] = bc_loss.detach()
            if self.cfg.bc_filters[2]:
                info["bc_kept"] = bc_share.detach()  # share of the human rows the Q filter kept
        info["actor_loss"] = actor_loss.detach()
        return info, logp

    def _temperature_phase(self, logp: torch.Tensor) -> dict[str, torch.Tensor]:
        """One temperature update toward the target entropy (with cfg.learn_temperature); its metrics."""
        entropy = -logp.detach().mean()
        loss = self.log_alpha.exp() * (entropy - self.target_entropy)
        if self.cfg.learn_temperature:
            self._step(self.temp_opt, [self.log_alpha], loss)
        return {"entropy": entropy, "temperature": self.log_alpha.detach().exp(), "temperature_loss": loss.detach()}

    def _features(self, b: UpdateBatch, rows: slice, next_obs: bool = False, target: bool = False) -> torch.Tensor:
        """Encoder features (B, F) of obs (or next_obs) on `rows`, by the online (or target) encoder."""
        enc = self.target_encoder if target else self.encoder
        state, backbone, preds = ((b.next_state, b.next_backbone, b.next_predictions) if next_obs else
                                  (b.state, b.backbone, b.predictions))
        st = state[rows] if state is not None else None
        if backbone is not None:  # frozen backbones: features (and predictions) precomputed once for the batch
            feats, at_rows = ({k: v[rows] for k, v in d.items()} for d in (backbone, preds or {}))
            return enc.head(feats, st, at_rows)
        return enc({k: v[rows] for k, v in (b.next_images if next_obs else b.images).items()}, st)

    @torch.no_grad()
    def _next_actions(self, b: UpdateBatch, rows: slice) -> _NextActions:
        """a' ~ pi(s') on `rows` (the executed action: base + correction with a residual base) and what the
        targets need of it (see _NextActions)."""
        next_feats = self._features(b, rows, next_obs=True)
        target_feats = self._features(b, rows, next_obs=True, target=True)
        noise = torch.randn(next_feats.shape[0], self.arm_dim, generator=self.generator, device=self.device)
        next_a, next_logp = self.policy.sample_actions(
            next_feats, b.next_base[rows] if b.next_base is not None else None, noise)
        return _NextActions(torch.cat([target_feats, next_a], -1), next_logp, next_feats, target_feats)

    # ------------------------------------------------------------------ losses (pure functions of tensors)
    def _critic_loss_eager(self, feats: torch.Tensor, arm: torch.Tensor, target_in: torch.Tensor,
                           next_logp: torch.Tensor, returns: torch.Tensor, bootstrap: torch.Tensor,
                           members: torch.Tensor, alpha: torch.Tensor, floor: torch.Tensor,
                           ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """target_in: [target features of s', a' ~ pi(s')] (B, F + A); next_logp: log pi(a'|s') (B,); returns:
        discounted reward sum up to the bootstrap; bootstrap: gamma^k (1 - terminated); floor: lower bound of the
        target (-inf = none), all (B,)."""
        with torch.no_grad():
            tq = self.q_values(target_in, members, target=True).min(0).values
            if self.cfg.backup_entropy:
                tq = tq - alpha * next_logp
            td = returns + bootstrap * tq
            target = torch.maximum(td, floor)
        out = self.critic(torch.cat([feats, arm], -1)).float()  # (N, B, 1) or (N, B, bins)
        hl = self.hl_gauss
        if hl is not None:  # cross-entropy toward the target's Gaussian over the bins, mean over members and rows
            q = hl.expected(out)
            loss = hl.cross_entropy(out, target).mean()
        else:
            q = out.squeeze(-1)  # (N, B)
            loss = (q - target.unsqueeze(0)).pow(2).mean()
        info = {"critic_loss": loss.detach(), "q_mean": q.detach().mean(),
                "q_ensemble_std": q.detach().std(0).mean() if q.shape[0] > 1 else q.new_zeros(()),
                "target_q_mean": target.mean()}
        if hl is not None:  # share of the targets outside the value support (clipped into it)
            info["hl_gauss_clipped_share"] = ((target < hl.v_min) | (target > hl.v_max)).float().mean()
        if self.cfg.mc_lower_bound:  # share of the rows whose Monte-Carlo return lifted the target
            info["mc_bound_share"] = (floor > td).float().mean()
        return loss, info

    def _actor_loss_eager(self, feats: torch.Tensor, noise: torch.Tensor, alpha: torch.Tensor,
                          bc_actions: torch.Tensor, bc_mask: torch.Tensor, base_actions: torch.Tensor | None = None,
                          filter_on: torch.Tensor | None = None,
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """base_actions: the frozen base policy's actions with a residual base (cfg.residual_base), else None; the
        critic, the BC term and its Q filter all see the executed action (base + bounded correction). filter_on:
        UpdateBatch.bc_filter_on."""
        mean, log_std = self.actor(self.policy.actor_input(feats, base_actions))
        mean = mean.float()
        out, logp = tanh_gaussian(mean, log_std, noise)
        a = self.policy.combine(base_actions, out)
        q = self.q_values(torch.cat([feats, a], -1)).mean(0)  # mean over the ensemble (SERL, REDQ)
        # behaviour cloning on human rows (cfg.bc_weight; 0 leaves plain SAC): the mode toward the stored action
        mode = self.policy.combine(base_actions, torch.tanh(mean))
        arm_filter, gripper_filter, _ = self.cfg.bc_filters
        bc, kept = bc_term(lambda x: self.q_values(x).mean(0), feats, mode, bc_actions, bc_mask, arm_filter,
                           gripper_filter, filter_on, self.cfg.bc_q_filter_floor)
        return (alpha * logp - q).mean() + self.cfg.bc_weight * bc, logp, bc, kept

    # ------------------------------------------------------ optimizer steps, compile fallback, autocast
    def _loss_step(self, which: str, args: tuple[Any, ...], opt: torch.optim.Optimizer,
                   params: Sequence[torch.Tensor]) -> tuple[tuple[Any, ...], torch.Tensor | None]:
        """`which` ('critic' or 'actor') loss on `args`, then its optimizer step; returns (the loss function's
        outputs, the gradient norm or None). A compiled loss that raises on its first forward or backward (before
        any optimizer step) is dropped for the eager one, which then runs this step: a real error raises again."""
        fn = self._critic_loss if which == "critic" else self._actor_loss
        try:
            out = fn(*args)
            norm = self._step(opt, params, out[0])
        except Exception as err:
            if which not in self._unproven:
                raise
            self._fall_back_to_eager(err)
            fn = self._critic_loss if which == "critic" else self._actor_loss
            out = fn(*args)
            norm = self._step(opt, params, out[0])
        self._unproven.discard(which)
        return out, norm

    def _fall_back_to_eager(self, err: BaseException) -> None:
        """Eager losses from now on (a compiled one failed before it ever ran), with one warning."""
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        self._critic_loss, self._actor_loss = self._critic_loss_eager, self._actor_loss_eager
        self._unproven = set()
        self.compile_status = f"eager (torch.compile failed: {type(err).__name__}: {reason})"
        warnings.warn(f"torch.compile of the agent's losses failed, training continues eager (--set compile=false "
                      f"skips compiling): {type(err).__name__}: {reason}", RuntimeWarning, stacklevel=3)

    def _step(self, opt: torch.optim.Optimizer, params: Sequence[torch.Tensor], loss: torch.Tensor,
              ) -> torch.Tensor | None:
        opt.zero_grad(set_to_none=True)
        with self._no_autocast():  # backward and the optimizer outside autocast (its ops follow the forward's)
            loss.backward()
            norm = None
            if self.cfg.grad_clip_norm is not None:
                norm = torch.nn.utils.clip_grad_norm_(params, self.cfg.grad_clip_norm)
            opt.step()
        return norm

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        """bf16 autocast for the forward passes with cfg.mixed_precision='bf16', else nothing."""
        if self.cfg.mixed_precision == "bf16":
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _no_autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.cfg.mixed_precision == "bf16":
            return torch.autocast(device_type=self.device.type, enabled=False)
        return contextlib.nullcontext()

    # ------------------------------------------------------------------ full state (checkpoints)
    def _modules(self) -> dict[str, nn.Module]:
        mods: dict[str, nn.Module] = {"policy": self.policy, "critic": self.critic,
                                      "target_encoder": self.target_encoder, "target_critic": self.target_critic}
        if self.target_gripper is not None:
            mods["target_gripper"] = self.target_gripper
        return mods

    def _optimizers(self) -> dict[str, torch.optim.Optimizer]:
        opts: dict[str, torch.optim.Optimizer] = {"actor": self.actor_opt, "critic": self.critic_opt,
                                                  "temperature": self.temp_opt}
        if self.gripper_opt is not None:
            opts["gripper"] = self.gripper_opt
        return opts

    def _frozen_names(self) -> dict[str, set[str]]:
        frozen = self.encoder.frozen_names()
        return {"policy": {f"encoder.{n}" for n in frozen}, "target_encoder": set(frozen)}

    def state_dict(self) -> dict[str, np.ndarray]:
        """Everything needed to resume: networks, targets, temperature, Adam states, counters, RNG states, as
        {name: np.ndarray} (save with np.savez / robot_rl.checkpoint; no pickle). Frozen backbone weights are
        left out (they come from cfg.encoder_weights)."""
        out: dict[str, np.ndarray] = {}
        frozen = self._frozen_names()
        for prefix, mod in self._modules().items():
            skip = frozen.get(prefix, set())
            for name, t in mod.state_dict().items():
                if name not in skip:
                    out[f"{prefix}/{name}"] = t.detach().cpu().numpy().copy()
        out["log_alpha"] = self.log_alpha.detach().cpu().numpy().copy()
        for oname, opt in self._optimizers().items():
            params = [p for g in opt.param_groups for p in g["params"]]
            for i, p in enumerate(params):
                st = opt.state.get(p, {})
                for field in _OPT_FIELDS:
                    if field in st:
                        out[f"optim/{oname}/{i}/{field}"] = torch.as_tensor(st[field]).detach().cpu().numpy().copy()
        out["num_updates"] = np.array(self.num_updates, dtype=np.int64)
        out["rng/agent"] = self.generator.get_state().numpy().copy()
        out["rng/policy"] = self.policy.generator().get_state().numpy().copy()
        return out

    def load_state_dict(self, arrays: Mapping[str, Any]) -> None:
        """Restore `state_dict()` output; ShapeError (before anything changes) on unknown/missing names or shapes."""
        own = self.state_dict()
        plain = {k for k in own if not k.startswith("optim/")}
        given = {k for k in arrays if not k.startswith("optim/")}
        missing, unexpected = sorted(plain - given), sorted(given - plain)
        if missing or unexpected:
            raise ShapeError(f"agent state does not match: missing {missing[:5]}, unexpected {unexpected[:5]}")
        bad = [k for k in plain if k.startswith(("policy/", "critic/", "target_", "log_alpha"))
               and tuple(np.shape(arrays[k])) != own[k].shape]
        if bad:
            raise ShapeError(f"agent state has wrong shapes: {bad[:5]}")
        opt_entries = self._check_optim_entries(arrays)
        frozen = self._frozen_names()
        with torch.no_grad():
            for prefix, mod in self._modules().items():
                sd = mod.state_dict()
                skip = frozen.get(prefix, set())
                for name, t in sd.items():
                    if name not in skip:
                        t.copy_(torch.as_tensor(np.asarray(arrays[f"{prefix}/{name}"])).to(t.dtype))
            self.log_alpha.copy_(torch.as_tensor(np.asarray(arrays["log_alpha"])).to(self.log_alpha.dtype))
        for oname, opt in self._optimizers().items():
            params = [p for g in opt.param_groups for p in g["params"]]
            state: dict[int, dict[str, torch.Tensor]] = {}
            for (o, i, field), arr in opt_entries.items():
                if o == oname:
                    t = torch.as_tensor(np.asarray(arr))
                    state.setdefault(i, {})[field] = t if field == "step" else t.to(params[i].device)
            sd = opt.state_dict()
            sd["state"] = state
            opt.load_state_dict(sd)
        self.num_updates = int(np.asarray(arrays["num_updates"]))
        if self._graphs is not None:  # the Adam state tensors were replaced: capture again
            self._graphs.reset()
        self.generator.set_state(torch.as_tensor(np.asarray(arrays["rng/agent"]), dtype=torch.uint8))
        self.policy.generator().set_state(torch.as_tensor(np.asarray(arrays["rng/policy"]), dtype=torch.uint8))

    def _check_optim_entries(self, arrays: Mapping[str, Any]) -> dict[tuple[str, int, str], Any]:
        opts = self._optimizers()
        entries: dict[tuple[str, int, str], Any] = {}
        for key, arr in arrays.items():
            if not key.startswith("optim/"):
                continue
            parts = key.split("/")
            if len(parts) != 4 or parts[1] not in opts or not parts[2].isdigit() or parts[3] not in _OPT_FIELDS:
                raise ShapeError(f"agent state: unknown optimizer entry '{key}'")
            params = [p for g in opts[parts[1]].param_groups for p in g["params"]]
            i = int(parts[2])
            if i >= len(params):
                raise ShapeError(f"agent state: '{key}' refers to parameter {i} of {len(params)}")
            want = () if parts[3] == "step" else tuple(params[i].shape)
            if tuple(np.shape(arr)) != want:
                raise ShapeError(f"agent state: '{key}' has shape {tuple(np.shape(arr))}, want {want}")
            entries[(parts[1], i, parts[3])] = arr
        return entries


def _adam(params: Sequence[torch.Tensor], lr: float) -> torch.optim.Optimizer:
    """Adam; the fused implementation (one kernel for all parameters) where torch has it for their device."""
    devices = {p.device.type for p in params}
    if len(devices) == 1 and devices <= {"cpu", "cuda"} and all(p.dtype == torch.float32 for p in params):
        try:
            return torch.optim.Adam(params, lr=lr, fused=True)
        except (RuntimeError, ValueError):  # an older torch without fused Adam for this device
            pass
    return torch.optim.Adam(params, lr=lr)


def _frozen_copy(module: nn.Module) -> nn.Module:
    clone = copy.deepcopy(module)
    clone.requires_grad_(False)
    return clone


__all__ = ["GRIPPER_VALUES", "SACAgent"]
