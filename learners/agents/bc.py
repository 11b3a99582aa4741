"""The actor loss's behaviour-cloning term on human rows, with its optional Q filters (a pure torch function).

Usage (inside an actor loss; `q` maps (B, feat + act) inputs to the ensemble-mean Q, shape (B,)):

    bc, kept = bc_term(q, feats, mode, human_actions, human_mask, arm_filter="joint", gripper_filter=True)
    loss = policy_loss + cfg.bc_weight * bc

`mode` (B, A) is the policy's deterministic action (tanh of the mean, with a residual base added), `human_actions`
(B, A) the stored actions, `human_mask` (B,) 1.0 on human rows (demos, interventions). The term is the squared
distance of the mode to the stored action, summed over action dims and averaged over all human rows, so it fades as
the filter drops rows instead of renormalising.

Filters (no gradient flows through them):
- the joint filter (`arm_filter="joint"`; Nair et al. 2018): a human row counts only while the critic rates its
  action above the mode, Q(s, a_human) > Q(s, mode).
- gripper_filter (the last action dim is the gripper): the gripper dim is filtered on its own, by
  whether the critic prefers the human's gripper command given the policy's own arm motion,
  Q(s, [mode_arm, a_human_gripper]) > Q(s, mode); the arm dims keep theirs. The joint filter decides for
  the whole action by its arm dims, where the critic's Q hardly moves along the gripper dim (the values of closing
  now and a few steps later, which a stochastic policy does anyway, differ by a discount or two), so the gripper's
  clone is dropped wherever the policy's arm motion is rated best, and the deterministic mode is left in the
  gripper's dead band at the object.
- the arm dims by their own filter (`arm_filter="own"`; AgentConfig.bc_q_filter_arm): the human's arm motion with
  the policy's own gripper command against the mode, Q(s, [a_human_arm, mode_gripper]) > Q(s, mode), so a gripper
  dim the critic rates arbitrarily (a task that locks the gripper ignores it) cannot drop the arm's clone.
- the arm dims unfiltered with the gripper filtered (`arm_filter="off", gripper_filter=True`): every human row's
  arm motion is cloned, the gripper's only while the critic prefers it.
- a warm-up (`filter_on` 0.0; AgentConfig.bc_q_filter_start): every row counts until the critic has trained.
- a floor (`floor`; AgentConfig.bc_q_filter_floor): a dropped row (arm and gripper parts alike) still counts at this
  weight. The floor on the gripper dim costs a little at the object (it pulls the mode toward the demos' "open" of
  the steps before they closed: a probe's deterministic policy ended 5 of 50 episodes at an unmoved cube); without
  it (the arm floored, the gripper's own filter hard) the policy of a pick run was less steady late in the run
  (docs/training.md "Without a recipe").
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def bc_term(q: Callable[[torch.Tensor], torch.Tensor], feats: torch.Tensor, mode: torch.Tensor,
            human_actions: torch.Tensor, human_mask: torch.Tensor, arm_filter: str = "off",
            gripper_filter: bool = False, filter_on: torch.Tensor | None = None,
            floor: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(the BC term, a scalar; the share of human rows kept by the filter, a scalar: the arm dims' filter, or the
    gripper's when the arm is unfiltered). `arm_filter` 'off' / 'joint' / 'own' filters the arm dims (the whole
    action without `gripper_filter`); AgentConfig.bc_filters gives both. `filter_on` (0-d, 1.0 or 0.0; None = 1.0):
    0.0 keeps every human row (the filters' warm-up, AgentConfig.bc_q_filter_start). `floor`: the weight of a
    dropped row (AgentConfig.bc_q_filter_floor)."""
    sq = (mode - human_actions).pow(2)  # (B, A)
    n_human = human_mask.sum().clamp_min(1.0)
    if arm_filter == "off" and not gripper_filter:
        return (sq.sum(-1) * human_mask).sum() / n_human, human_mask.sum() / n_human
    keep = keep_gripper = human_mask
    with torch.no_grad():
        own = mode.detach()
        q_mode = q(torch.cat([feats, own], -1))

        def kept(action: torch.Tensor) -> torch.Tensor:
            return human_mask * (q(torch.cat([feats, action], -1)) > q_mode).to(human_mask.dtype)

        if arm_filter != "off":
            arm = human_actions if arm_filter == "joint" else torch.cat([human_actions[:, :-1], own[:, -1:]], -1)
            keep = keep_gripper = kept(arm)
        if gripper_filter:
            keep_gripper = kept(torch.cat([own[:, :-1], human_actions[:, -1:]], -1))
        shown = keep if arm_filter != "off" else keep_gripper
        least = human_mask * (floor if filter_on is None else torch.clamp(1.0 - filter_on, min=floor))
        keep, keep_gripper = torch.maximum(keep, least), torch.maximum(keep_gripper, least)
    per_row = sq[:, :-1].sum(-1) * keep + sq[:, -1] * keep_gripper
    return per_row.sum() / n_human, shown.sum() / n_human
