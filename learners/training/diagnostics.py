"""Learning diagnostics of a training run (`robot-rl train --diagnostics`): what the critic, the encoder and the
actor look like at each evaluation, as extra `diag_*` columns of the run's metrics row.

At each evaluation `RunDiagnostics.measure` reads the run's agent and buffers (it changes neither: no update, no
env step, no sample drawn from the buffers' own RNGs) and reports:

- Q against Monte-Carlo returns: on demo rows and on the most recent online rows whose episode has ended, the
  critic's Q(s, a) (ensemble mean, the stored action) beside the discounted return G that followed
  (`monte_carlo_returns`, at the agent's discount): `diag_{demo,policy}_q`, `_mc`, `_bias` (mean Q - G) and
  `_corr` (Pearson correlation of Q and G over the rows; None when either is constant). A time-limit truncation
  leaves the return after it unknown: such rows count the rewards up to the cut (a lower bound of the return the
  critic bootstraps toward); `diag_policy_truncated_share` says how many rows that is.
- The encoder's features on a fixed probe batch (demo rows plus the online rows present at the first
  measurement, the same observations every time, no augmentation): the entropy effective rank
  (`effective_rank`, Roy & Vetterli 2007) of the camera features (of the whole feature vector without cameras),
  `diag_encoder_rank` against its maximum `diag_encoder_dim`, the srank (`srank`, Kumar et al. 2021: singular
  values covering 99 % of their sum), per camera `diag_rank_<camera>`, and `diag_encoder_drift`: the relative
  change of the probe features since the previous measurement (`feature_drift`; None at the first).
- The behaviour-cloning term's share of the actor loss over the training updates since the previous evaluation:
  `diag_bc_share` = w * BC / (|policy term| + w * BC) from the update metrics (actor loss = policy term + w * BC),
  `diag_bc_kept` (share of the human rows the Q filter kept, with bc_q_filter).
- The demo share: `diag_demo_batch_share` (rows of each update batch drawn from the demo buffer) and
  `diag_demo_data_share` (demo transitions among all stored ones).
- The policy's std: mean over arm dims of the actor's exp(log std) on the demo and the recent policy rows
  (`diag_demo_std`, `diag_policy_std`), and per arm dim on the policy rows (`diag_policy_std_dims`).

Usage::

    diag = RunDiagnostics(seed=0)
    row.update(diag.measure(agent, online, demo, window, demo_ratio=0.5))   # window: the training episodes'
                                                                           # metrics since the last evaluation
    effective_rank(np.eye(2, 8))        # 2.0
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from learners.replay.buffer import MixedSampler, ReplayBuffer, concat_batches
from robot_rl.errors import ConfigError

PREFIX = "diag_"
"""Every diagnostics column of a metrics row starts with this."""


def effective_rank(features: np.ndarray) -> float:
    """exp(entropy) of the normalised singular values of `features` (N, D): 1.0 for a rank-1 matrix, k for k
    equal non-zero singular values; 0.0 for an all-zero matrix (Roy & Vetterli 2007)."""
    s = np.linalg.svd(np.asarray(features, np.float64), compute_uv=False)
    total = s.sum()
    if total <= 0.0:
        return 0.0
    p = s[s > 0] / total
    return float(np.exp(-(p * np.log(p)).sum()))


def srank(features: np.ndarray, delta: float = 0.01) -> int:
    """The fewest singular values of `features` (N, D) whose sum reaches (1 - delta) of the total (Kumar et al.
    2021's srank; 0 for an all-zero matrix)."""
    s = np.linalg.svd(np.asarray(features, np.float64), compute_uv=False)
    total = s.sum()
    if total <= 0.0:
        return 0
    return int(np.searchsorted(np.cumsum(s) / total, 1.0 - delta - 1e-12) + 1)


def feature_drift(before: np.ndarray, after: np.ndarray) -> float:
    """||after - before|| / ||before|| (Frobenius) for the same rows' features at two times; inf when `before` is
    all zero and `after` is not, 0.0 when both are."""
    num = float(np.linalg.norm(np.asarray(after, np.float64) - np.asarray(before, np.float64)))
    den = float(np.linalg.norm(np.asarray(before, np.float64)))
    if den == 0.0:
        return 0.0 if num == 0.0 else float("inf")
    return num / den


def monte_carlo_returns(rewards: np.ndarray, terminated: np.ndarray, truncated: np.ndarray, valid: np.ndarray,
                        discount: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per slot of a replay ring (ReplayBuffer.fields order): (G, known, cut). G: the discounted sum of the
    rewards from the slot to the end of its stored episode; known: the slot's episode has ended (terminated or
    truncated) inside the stored data; cut: that end was a truncation (G then stops at the cut). A transition
    continues into the next slot unless it ended its episode (the buffer's continuation rule, walked backwards
    from each episode end)."""
    n = len(rewards)
    g = np.zeros(n, np.float64)
    known = np.zeros(n, bool)
    cut = np.zeros(n, bool)
    ended = np.asarray(terminated, bool) | np.asarray(truncated, bool)
    valid = np.asarray(valid, bool)
    for end in np.flatnonzero(ended & valid):
        acc, s = 0.0, int(end)
        for _ in range(n):
            acc = float(rewards[s]) + discount * acc
            g[s], known[s], cut[s] = acc, True, bool(truncated[end])
            prev = (s - 1) % n
            if prev == end or not valid[prev] or ended[prev]:
                break
            s = prev
    return g, known, cut


def _corr(a: np.ndarray, b: np.ndarray) -> float | None:
    if a.size < 2 or np.std(a) == 0.0 or np.std(b) == 0.0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def q_against_returns(q: np.ndarray, g: np.ndarray, name: str) -> dict[str, Any]:
    """`diag_<name>_q`, `_mc`, `_bias` (mean Q - G), `_corr` (None when Q or G is constant), `_rows`."""
    q, g = np.asarray(q, np.float64), np.asarray(g, np.float64)
    if q.size == 0:
        return {f"{PREFIX}{name}_rows": 0}
    return {f"{PREFIX}{name}_q": float(q.mean()), f"{PREFIX}{name}_mc": float(g.mean()),
            f"{PREFIX}{name}_bias": float((q - g).mean()), f"{PREFIX}{name}_corr": _corr(q, g),
            f"{PREFIX}{name}_rows": int(q.size)}


def bc_share(window: Sequence[Mapping[str, Any]], bc_weight: float) -> dict[str, Any]:
    """The BC term's share of the actor loss over the training episodes' update metrics in `window`:
    w * BC / (|actor_loss - w * BC| + w * BC) (None without a BC term or without updates), and `bc_kept`."""
    out: dict[str, Any] = {f"{PREFIX}bc_share": None}
    bc = [m["bc_loss"] for m in window if "bc_loss" in m and "actor_loss" in m]
    if bc_weight > 0 and bc:
        term = bc_weight * float(np.mean(bc))
        policy = float(np.mean([m["actor_loss"] for m in window if "bc_loss" in m and "actor_loss" in m])) - term
        out[f"{PREFIX}bc_share"] = term / (abs(policy) + term) if abs(policy) + term > 0 else 0.0
        out[f"{PREFIX}bc_term"] = term
        out[f"{PREFIX}policy_term"] = policy
    kept = [m["bc_kept"] for m in window if "bc_kept" in m]
    if kept:
        out[f"{PREFIX}bc_kept"] = float(np.mean(kept))
    return out


class RunDiagnostics:
    """The diagnostics of one run (see the module docstring); keeps the probe batch and the previous features.

    `rows`: rows per Q-vs-return set and per probe half; `recent`: the online slots (newest first) the policy
    rows are taken from; `seed`: the probe's own RNG (the buffers' RNGs are never drawn from)."""

    def __init__(self, rows: int = 256, recent: int = 2000, seed: int = 0) -> None:
        if rows < 2 or recent < 1:
            raise ConfigError(f"diagnostics: rows must be >= 2 and recent >= 1, got {rows} and {recent}")
        self.rows, self.recent = rows, recent
        self.rng = np.random.default_rng(seed + 4242)
        self.probe: dict[str, Any] | None = None
        self.prev_feats: np.ndarray | None = None

    def measure(self, agent: Any, online: ReplayBuffer, demo: ReplayBuffer | None,
                window: Sequence[Mapping[str, Any]], demo_ratio: float) -> dict[str, Any]:
        """The `diag_*` columns for the agent and buffers as they are now (see the module docstring)."""
        for attr in ("encoder", "actor", "q_values", "policy"):
            if not hasattr(agent, attr):
                raise ConfigError("--diagnostics reads the torch agent's encoder, actor and critics; this run's "
                                  f"agent ({type(agent).__name__}) has no '{attr}': use --backend torch")
        modules = [agent.encoder, agent.actor, agent.critic]
        was = [m.training for m in modules]
        for m in modules:
            m.eval()
        try:
            with torch.no_grad():
                out = self._measure(agent, online, demo, window, demo_ratio)
        finally:
            for m, w in zip(modules, was, strict=True):
                m.train(w)
        return out

    # ------------------------------------------------------------------ pieces
    def _measure(self, agent: Any, online: ReplayBuffer, demo: ReplayBuffer | None,
                 window: Sequence[Mapping[str, Any]], demo_ratio: float) -> dict[str, Any]:
        gamma = float(agent.cfg.discount)
        out: dict[str, Any] = {}
        stds: dict[str, np.ndarray] = {}
        for name, buf, newest in (("demo", demo, False), ("policy", online, True)):
            idx, g, cut = self._return_rows(buf, gamma, newest) if buf is not None else (np.zeros(0, int),) * 3
            if idx.size == 0:
                out[f"{PREFIX}{name}_rows"] = 0
                continue
            assert buf is not None
            batch = buf.gather(idx)
            feats = self._features(agent, batch["obs"])
            arm = torch.as_tensor(batch["actions"][:, : agent.arm_dim], dtype=torch.float32, device=agent.device)
            q = agent.q_values(torch.cat([feats, arm], -1)).mean(0).cpu().numpy()
            out.update(q_against_returns(q, g, name))
            if name == "policy":
                out[f"{PREFIX}policy_truncated_share"] = float(np.mean(cut))
            std = self._policy_std(agent, feats)
            if std is not None:
                stds[name] = std
                out[f"{PREFIX}{name}_std"] = float(std.mean())
        if "policy" in stds:
            out[f"{PREFIX}policy_std_dims"] = [round(float(v), 4) for v in stds["policy"].mean(0)]
        out.update(self._encoder(agent, online, demo))
        out.update(bc_share(window, float(agent.cfg.bc_weight)))
        _, n_demo = MixedSampler(online, demo, demo_ratio).counts(1000)
        out[f"{PREFIX}demo_batch_share"] = n_demo / 1000.0
        n_d = len(demo) if demo is not None else 0
        out[f"{PREFIX}demo_data_share"] = n_d / max(n_d + len(online), 1)
        return out

    def _return_rows(self, buf: ReplayBuffer, gamma: float, newest: bool,
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(slots, G, cut) of up to `rows` rows with a known return: spread over the newest `recent` slots of an
        online buffer, drawn from the whole buffer otherwise."""
        with buf.lock:
            f = buf.fields
            g, known, cut = monte_carlo_returns(f["rewards"], f["terminated"], f["truncated"], buf.valid, gamma)
            ok = known & buf.valid
            if newest:
                last = buf._last_added  # the newest transition's slot (read under the buffer's lock)
                if last < 0:
                    return np.zeros(0, int), np.zeros(0), np.zeros(0, bool)
                order = (last - np.arange(min(self.recent, buf.capacity))) % buf.capacity
                cand = order[ok[order]]
            else:
                cand = np.flatnonzero(ok)
        if cand.size > self.rows:
            cand = np.sort(self.rng.choice(cand, self.rows, replace=False))
        return cand, g[cand], cut[cand]

    @staticmethod
    def _features(agent: Any, obs: Any) -> torch.Tensor:
        images, state = agent.policy.layout.to_torch(obs, agent.device, batched=True)
        return agent.encoder(images, state).float()

    @staticmethod
    def _policy_std(agent: Any, feats: torch.Tensor) -> np.ndarray | None:
        if getattr(agent.cfg, "residual_base", None) is not None:
            return None  # the actor also reads the base's action; not measured here
        _, log_std = agent.actor(feats)
        return log_std.float().exp().cpu().numpy()

    def _encoder(self, agent: Any, online: ReplayBuffer, demo: ReplayBuffer | None) -> dict[str, Any]:
        """Rank, srank and drift of the probe batch's features (camera features when there are cameras)."""
        if self.probe is None:
            parts = []
            for buf in (demo, online):
                if buf is not None and len(buf) > 0:
                    valid = np.flatnonzero(buf.valid)
                    take = self.rng.choice(valid, min(self.rows, valid.size), replace=False)
                    parts.append({"obs": buf.gather(np.sort(take))["obs"]})
            if not parts:
                return {}
            self.probe = concat_batches(parts)["obs"]
        images, state = agent.policy.layout.to_torch(self.probe, agent.device, batched=True)
        out: dict[str, Any] = {}
        cams = agent.encoder.camera_encoders() if images else {}
        if cams:
            per_cam = {name: enc(images[name]).float().cpu().numpy() for name, enc in cams.items()}
            for name, f in per_cam.items():
                out[f"{PREFIX}rank_{name.replace('/', '_')}"] = effective_rank(f)
            feats = np.concatenate(list(per_cam.values()), axis=1)
        else:
            feats = agent.encoder(images, state).float().cpu().numpy()
        out[f"{PREFIX}encoder_rank"] = effective_rank(feats)
        out[f"{PREFIX}encoder_srank"] = srank(feats)
        out[f"{PREFIX}encoder_dim"] = int(feats.shape[1])
        out[f"{PREFIX}encoder_drift"] = (feature_drift(self.prev_feats, feats)
                                         if self.prev_feats is not None else None)
        self.prev_feats = feats
        return out
