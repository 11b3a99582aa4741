"""The actor loss's behaviour-cloning term on human rows, with its optional Q filters (a pure torch function).

Usage (inside an actor loss; `q` maps (B, feat + act) inputs to the ensemble-mean Q, shape (B,)):

    bc, kept = bc_term(q, feats, mode, human_actions, human_mask, q_filter=True, gripper_filter=True)
    loss = policy_loss + cfg.bc_weight * bc

`mode` (B, A) is the policy's deterministic action (tanh of the mean, with a residual base added), `human_actions`
(B, A) the stored actions, `human_mask` (B,) 1.0 on human rows (demos, interventions). The term is the squared
distance of the mode to the stored action, summed over action dims and averaged over all human rows, so it fades as
the filter drops rows instead of renormalising.

Filters (no gradient flows through them):
- q_filter (Nair et al. 2018): a human row counts only while the critic rates its action above the mode,
  Q(s, a_human) > Q(s, mode).
- gripper_filter (with q_filter; the last action dim is the gripper): the gripper dim is filtered on its own, by
  whether the critic prefers the human's gripper command given the policy's own arm motion,
  Q(s, [mode_arm, a_human_gripper]) > Q(s, mode); the arm dims keep the joint filter. The joint filter decides for
  the whole action by its arm dims, where the critic's Q hardly moves along the gripper dim (the values of closing
  now and a few steps later, which a stochastic policy does anyway, differ by a discount or two), so the gripper's
  clone is dropped wherever the policy's arm motion is rated best, and the deterministic mode is left in the
  gripper's dead band at the object.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def bc_term(q: Callable[[torch.Tensor], torch.Tensor], feats: torch.Tensor, mode: torch.Tensor,
            human_actions: torch.Tensor, human_mask: torch.Tensor, q_filter: bool,
            gripper_filter: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(the BC term, a scalar; the share of human rows kept by the filter on the arm dims, a scalar)."""
    sq = (mode - human_actions).pow(2)  # (B, A)
    n_human = human_mask.sum().clamp_min(1.0)
    if not q_filter:
        return (sq.sum(-1) * human_mask).sum() / n_human, human_mask.sum() / n_human
    with torch.no_grad():
        q_mode = q(torch.cat([feats, mode.detach()], -1))
        keep = human_mask * (q(torch.cat([feats, human_actions], -1)) > q_mode).to(human_mask.dtype)
        if gripper_filter:
            mixed = torch.cat([mode.detach()[:, :-1], human_actions[:, -1:]], -1)
            keep_gripper = human_mask * (q(torch.cat([feats, mixed], -1)) > q_mode).to(human_mask.dtype)
    if not gripper_filter:
        return (sq.sum(-1) * keep).sum() / n_human, keep.sum() / n_human
    per_row = sq[:, :-1].sum(-1) * keep + sq[:, -1] * keep_gripper
    return per_row.sum() / n_human, keep.sum() / n_human
