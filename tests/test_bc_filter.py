"""The BC term's Q filters (learners.agents.bc): the joint filter, the gripper's own filter, and the gripper's alone."""

from __future__ import annotations

import pytest
import torch

from learners.agents.bc import bc_term
from learners.agents.config import AgentConfig

FEAT = 2


def linear_q(weights: list[float]):
    """A critic whose Q is the action's dot product with `weights` (features ignored)."""
    w = torch.tensor(weights)
    return lambda x: x[:, FEAT:] @ w


def rows(mode: list[list[float]], human: list[list[float]], mask: list[float]):
    return (torch.zeros(len(mode), FEAT), torch.tensor(mode, requires_grad=True), torch.tensor(human),
            torch.tensor(mask))


def test_unfiltered_term_is_the_squared_distance_over_human_rows() -> None:
    feats, mode, human, mask = rows([[0.0, 0.0], [1.0, 1.0]], [[1.0, -1.0], [0.0, 0.0]], [1.0, 0.0])
    bc, kept = bc_term(linear_q([1.0, 1.0]), feats, mode, human, mask, arm_filter="off")
    assert bc.item() == pytest.approx(2.0)  # only the human row: 1 + 1, over 1 human row
    assert kept.item() == pytest.approx(1.0)


def test_joint_filter_drops_rows_whose_human_action_the_critic_rates_lower() -> None:
    # Q = a0 + a1; row 0: human 2 > mode 0 (kept); row 1: human -2 < mode 0 (dropped)
    feats, mode, human, mask = rows([[0.0, 0.0], [0.0, 0.0]], [[1.0, 1.0], [-1.0, -1.0]], [1.0, 1.0])
    bc, kept = bc_term(linear_q([1.0, 1.0]), feats, mode, human, mask, arm_filter="joint")
    assert kept.item() == pytest.approx(0.5)
    assert bc.item() == pytest.approx(2.0 / 2)  # row 0's distance 2, over both human rows


def test_gripper_filter_keeps_the_gripper_clone_where_the_arm_is_dropped() -> None:
    # Q = 10 * arm + 0.1 * gripper: the human's arm (-1) is rated far below the mode's (0), so the joint filter
    # drops the row; its gripper command (+1) is still rated above the mode's (-0.5) with the mode's own arm
    feats, mode, human, mask = rows([[0.0, -0.5]], [[-1.0, 1.0]], [1.0])
    q = linear_q([10.0, 0.1])
    joint, kept_joint = bc_term(q, feats, mode, human, mask, arm_filter="joint")
    assert joint.item() == 0.0 and kept_joint.item() == 0.0
    own, kept_own = bc_term(q, feats, mode, human, mask, arm_filter="joint", gripper_filter=True)
    assert own.item() == pytest.approx(1.5 ** 2)  # only the gripper dim's distance
    assert kept_own.item() == 0.0  # the share reports the arm's (joint) filter
    own.backward()
    assert mode.grad is not None
    assert mode.grad[0, 0].item() == 0.0  # no pull on the arm
    assert mode.grad[0, 1].item() == pytest.approx(2 * (-0.5 - 1.0))  # the gripper pulled toward +1


def test_gripper_filter_drops_a_gripper_command_the_critic_rates_lower() -> None:
    # the human opens (-1) where closing (+1, the mode) is rated higher; the human's arm is rated higher
    feats, mode, human, mask = rows([[0.0, 1.0]], [[1.0, -1.0]], [1.0])
    bc, kept = bc_term(linear_q([10.0, 0.1]), feats, mode, human, mask, arm_filter="joint", gripper_filter=True)
    assert kept.item() == 1.0
    assert bc.item() == pytest.approx(1.0)  # the arm dim's distance only


def test_own_arm_filter_judges_the_arm_with_the_policys_gripper() -> None:
    # Q = 1 * arm + 10 * gripper (a critic that rates the gripper dim strongly, as it may where the env ignores it):
    # the human's arm (+1) beats the mode's (0), but its gripper (0) loses to the mode's (+1): the joint filter
    # drops the row for the gripper's sake, the arm's own filter keeps the arm's clone
    feats, mode, human, mask = rows([[0.0, 1.0]], [[1.0, 0.0]], [1.0])
    q = linear_q([1.0, 10.0])
    joint, kept_joint = bc_term(q, feats, mode, human, mask, arm_filter="joint")
    assert joint.item() == 0.0 and kept_joint.item() == 0.0
    own, kept_own = bc_term(q, feats, mode, human, mask, arm_filter="own")
    assert kept_own.item() == 1.0 and own.item() == pytest.approx(2.0)  # both dims (the gripper follows the arm's)
    both, _ = bc_term(q, feats, mode, human, mask, arm_filter="own", gripper_filter=True)
    assert both.item() == pytest.approx(1.0)  # the gripper's own filter drops the human's 0 (rated below +1)


def test_bad_arm_filter_is_refused_by_name() -> None:
    from robot_rl.errors import ConfigError

    with pytest.raises(ConfigError, match="bc_q_filter_arm"):
        AgentConfig(bc_q_filter_arm="both")


def test_floor_weights_a_dropped_row() -> None:
    # row 0 kept (distance 2), row 1 dropped (distance 2): at floor 0.25 the dropped row counts a quarter
    feats, mode, human, mask = rows([[0.0, 0.0], [0.0, 0.0]], [[1.0, 1.0], [-1.0, -1.0]], [1.0, 1.0])
    bc, kept = bc_term(linear_q([1.0, 1.0]), feats, mode, human, mask, arm_filter="joint", floor=0.25)
    assert bc.item() == pytest.approx((2.0 + 0.25 * 2.0) / 2)
    assert kept.item() == pytest.approx(0.5)


def test_floor_weights_both_parts_and_the_warm_up_lifts_it() -> None:
    # Q = 10 * arm + 0.1 * gripper; the human's arm (-1) and gripper (-1) both rated below the mode's (0, +1)
    feats, mode, human, mask = rows([[0.0, 1.0]], [[-1.0, -1.0]], [1.0])
    q = linear_q([10.0, 0.1])
    own, _ = bc_term(q, feats, mode, human, mask, arm_filter="joint", gripper_filter=True, floor=0.5)
    assert own.item() == pytest.approx(0.5 * (1.0 + 4.0))  # both dims dropped, both at half weight
    warm, _ = bc_term(q, feats, mode, human, mask, arm_filter="joint", gripper_filter=True, floor=0.5,
                      filter_on=torch.tensor(0.0))
    assert warm.item() == pytest.approx(1.0 + 4.0)  # in the warm-up every part counts fully


def test_gripper_only_filter_clones_every_arm_row_and_filters_the_gripper() -> None:
    # row 0: the human's arm (-1) rated far below the mode's (the joint filter would drop it), its gripper (+1) above
    # the mode's (-0.5): both dims cloned. Row 1: the human opens (-1) where the mode closes (+1, rated higher):
    # the arm cloned, the gripper not
    feats, mode, human, mask = rows([[0.0, -0.5], [0.0, 1.0]], [[-1.0, 1.0], [1.0, -1.0]], [1.0, 1.0])
    bc, kept = bc_term(linear_q([10.0, 0.1]), feats, mode, human, mask, arm_filter="off", gripper_filter=True)
    assert bc.item() == pytest.approx((1.0 + 1.5 ** 2 + 1.0) / 2)
    assert kept.item() == pytest.approx(0.5)  # the share reports the gripper's filter (the arm has none)
    bc.backward()
    assert mode.grad is not None
    assert mode.grad[1, 1].item() == 0.0  # row 1's gripper not pulled
    assert mode.grad[0, 0].item() != 0.0 and mode.grad[1, 0].item() != 0.0  # every arm row pulled


def test_warm_up_keeps_every_human_row_then_the_filter_applies() -> None:
    feats, mode, human, mask = rows([[0.0, 0.0], [0.0, 0.0]], [[1.0, 1.0], [-1.0, -1.0]], [1.0, 1.0])
    q = linear_q([1.0, 1.0])
    warm, kept_warm = bc_term(q, feats, mode, human, mask, arm_filter="joint", filter_on=torch.tensor(0.0))
    plain, _ = bc_term(q, feats, mode, human, mask, arm_filter="off")
    assert warm.item() == pytest.approx(plain.item())
    assert kept_warm.item() == pytest.approx(0.5)  # the share reports what the filter would keep
    on, kept_on = bc_term(q, feats, mode, human, mask, arm_filter="joint", gripper_filter=True,
                          filter_on=torch.tensor(1.0))
    assert kept_on.item() == pytest.approx(0.5)
    # row 1 (human -1, -1): the arm dropped by the joint filter, the gripper (-1 with the mode's arm 0: Q -1 < 0) too
    assert on.item() == pytest.approx(2.0 / 2)


@pytest.mark.parametrize(("q_filter", "gripper", "arm", "head", "want"), [
    (False, True, "joint", False, ("off", False, False)),  # no filter without bc_q_filter
    (True, False, "joint", False, ("joint", False, True)),  # the joint filter
    (True, True, "joint", False, ("joint", True, True)),  # arm joint + the gripper's own
    (True, True, "own", False, ("own", True, True)),  # each part by its own filter
    (True, True, "off", False, ("off", True, True)),  # the gripper's alone
    (True, False, "off", False, ("joint", False, True)),  # 'off' without the gripper's filter: the joint one
    (True, True, "own", True, ("joint", False, True)),  # the head: no gripper dim in the term, the arm's joint filter
])
def test_bc_filters_resolve_the_options(q_filter: bool, gripper: bool, arm: str, head: bool,
                                        want: tuple[str, bool, bool]) -> None:
    cfg = AgentConfig(bc_weight=1.0, bc_q_filter=q_filter, bc_q_filter_gripper=gripper, bc_q_filter_arm=arm,
                      gripper_head=head)
    assert cfg.bc_filters == want


def test_no_filter_leaves_gradients_out_of_the_critic() -> None:
    w = torch.tensor([1.0, 1.0], requires_grad=True)
    feats, mode, human, mask = rows([[0.0, 0.0]], [[1.0, 1.0]], [1.0])
    bc, _ = bc_term(lambda x: x[:, FEAT:] @ w, feats, mode, human, mask, arm_filter="joint", gripper_filter=True)
    bc.backward()
    assert w.grad is None


def _agent_batch(n: int):
    import numpy as np

    from robot_rl.specs import ArraySpec, EnvSpec

    spec = EnvSpec("t", (ArraySpec("state", (5,), "float32"),), ArraySpec("action", (4,), "float32", -1.0, 1.0), 10.0)
    rng = np.random.default_rng(0)
    batch = {"obs": {"state": rng.standard_normal((n, 5)).astype(np.float32)},
             "next_obs": {"state": rng.standard_normal((n, 5)).astype(np.float32)},
             "actions": np.concatenate([rng.uniform(-1, 1, (n, 3)), rng.choice([-1.0, 1.0], (n, 1))], 1)
             .astype(np.float32),
             "rewards": rng.standard_normal(n).astype(np.float32), "terminated": rng.random(n) < 0.1,
             "intervention": np.ones(n, bool)}
    return spec, batch


def _actor_after(spec, batch, updates: int, **options):
    from learners.agents.sac import SACAgent

    n = len(batch["rewards"])
    cfg = AgentConfig(bc_weight=5.0, compile=False, batch_size=n, hidden_dims=(16, 16), ensemble_size=2,
                      ensemble_subsample=2, critic_updates_per_actor_update=1, device="cpu", **options)
    agent = SACAgent(spec, cfg)
    for _ in range(updates):
        agent.update(batch)
    return {k: v for k, v in agent.state_dict().items() if k.startswith("policy/actor")}


def _same(a, b) -> bool:
    import numpy as np

    assert a and a.keys() == b.keys()
    return all(np.array_equal(a[k], b[k]) for k in a)


def test_filter_warm_up_updates_as_unfiltered_until_its_start() -> None:
    torch.set_num_threads(1)
    spec, batch = _agent_batch(16)
    filtered = {"bc_q_filter": True, "bc_q_filter_gripper": True}
    assert _same(_actor_after(spec, batch, 3, **filtered, bc_q_filter_start=3), _actor_after(spec, batch, 3))
    assert not _same(_actor_after(spec, batch, 6, **filtered, bc_q_filter_start=3), _actor_after(spec, batch, 6))
    assert not _same(_actor_after(spec, batch, 6, **filtered, bc_q_filter_start=3),
                     _actor_after(spec, batch, 6, **filtered))


def test_gripper_filter_is_inert_with_the_gripper_head() -> None:
    """With HIL-SERL's discrete gripper head the Gaussian actor has no gripper dim: the option changes nothing (and
    without the head it does change the update)."""
    torch.set_num_threads(1)
    spec, batch = _agent_batch(16)

    def weights_after(head: bool, gripper_filter: bool):
        return _actor_after(spec, batch, 5, gripper_head=head, bc_q_filter=True, bc_q_filter_gripper=gripper_filter)

    assert _same(weights_after(True, False), weights_after(True, True))
    assert not _same(weights_after(False, False), weights_after(False, True))
