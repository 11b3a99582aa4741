"""benchmarks/third_party_expert.py: the scripted expert of gym-hil's PandaPickCubeBase-v0.

The expert's logic is tested on synthetic observations (no gym-hil: CI does not install the `bench` extra):
each phase's action, its transitions, and a closed loop on a point-mass stand-in of the env (the TCP follows the
position action, a closed gripper near the cube carries it). With gym-hil installed, the expert must succeed on
the real env and its demos must load as `robot-rl train --env-id ... --demos DIR` loads them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
if str(BENCHMARKS) not in sys.path:  # the benchmark scripts import their _prelude from there
    sys.path.insert(0, str(BENCHMARKS))

import third_party_expert as tpe  # noqa: E402

CUBE = np.array([0.5, 0.0, 0.02])
CFG = tpe.ExpertConfig()


def obs(tcp: Any, cube: Any = CUBE, gripper: float = 0.0) -> dict[str, np.ndarray]:
    """A PandaPickCubeBase-v0 state observation with this TCP (m), cube centre (m), gripper command (0..1)."""
    agent = np.zeros(18, np.float32)
    agent[tpe.TCP_SLICE] = tcp
    agent[tpe.GRIPPER_INDEX] = gripper * tpe.GRIPPER_FULL
    return {"agent_pos": agent, "environment_state": np.asarray(cube, np.float32)}


def test_observation_parts_reads_the_documented_indices() -> None:
    tcp, cube, grip = tpe.observation_parts(obs([0.4, 0.1, 0.2], [0.45, -0.05, 0.02], gripper=1.0))
    np.testing.assert_allclose(tcp, [0.4, 0.1, 0.2], atol=1e-6)
    np.testing.assert_allclose(cube, [0.45, -0.05, 0.02], atol=1e-6)
    assert grip == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [{"agent_pos": np.zeros(18)}, {"agent_pos": np.zeros(17),
                                                                 "environment_state": np.zeros(3)}, np.zeros(21)])
def test_other_observations_are_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match="agent_pos"):
        tpe.expert_action(bad, tpe.ExpertState())


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="max_step_m"):
        tpe.ExpertConfig(max_step_m=0.0)
    with pytest.raises(ValueError, match="close_steps"):
        tpe.ExpertConfig(close_steps=0)


def test_far_from_the_cube_it_reaches_above_it_with_the_gripper_open() -> None:
    action, state = tpe.expert_action(obs([0.3, 0.1, 0.2]), tpe.ExpertState())
    assert state.phase == "reach" and action.shape == (7,)
    assert action[0] == pytest.approx(CFG.max_step_m) and action[1] == pytest.approx(-CFG.max_step_m)  # clipped
    assert action[2] == pytest.approx(-CFG.max_step_m)  # towards the hover height, 5 cm above the cube
    assert np.all(action[3:6] == 0) and action[6] == -1.0


def test_above_the_cube_it_descends() -> None:
    action, state = tpe.expert_action(obs(CUBE + np.array([0.002, 0.0, CFG.hover_m])), tpe.ExpertState())
    assert state.phase == "descend"
    assert action[2] == pytest.approx(-CFG.max_step_m) and abs(action[0]) < 0.003 and action[6] == -1.0


def test_at_the_cube_it_closes_holds_then_lifts() -> None:
    action, state = tpe.expert_action(obs(CUBE + np.array([0.0, 0.0, 0.003])), tpe.ExpertState("descend", 3))
    assert state.phase == "close" and state.grasp_z_m == pytest.approx(CUBE[2])
    assert action[6] == 1.0 and np.all(action[:3] == 0)
    for _ in range(CFG.close_steps - 1):  # still closing: the fingers take a few steps
        action, state = tpe.expert_action(obs(CUBE, gripper=1.0), state)
        assert state.phase == "close" and np.all(action[:3] == 0) and action[6] == 1.0
    action, state = tpe.expert_action(obs(CUBE, gripper=1.0), state)
    assert state.phase == "lift"
    assert action[2] == pytest.approx(CFG.max_step_m) and np.all(action[:2] == 0) and action[6] == 1.0


def test_a_dropped_cube_is_released_and_reached_again() -> None:
    state = tpe.ExpertState("lift", 5, grasp_z_m=0.02)
    action, state = tpe.expert_action(obs(CUBE + np.array([0.0, 0.0, 0.1]), gripper=1.0), state)  # cube left below
    assert state.phase == "reach" and action[6] == -1.0


def test_a_descent_that_drifts_off_the_cube_goes_back_to_reach() -> None:
    action, state = tpe.expert_action(obs(CUBE + np.array([0.03, 0.0, 0.02])), tpe.ExpertState("descend", 2))
    assert state.phase == "reach" and action[0] < 0


def test_noise_is_seeded_and_spares_the_grasp() -> None:
    cfg = tpe.ExpertConfig(noise=0.5)
    a1, _ = tpe.expert_action(obs([0.45, 0.0, 0.1]), tpe.ExpertState(), cfg, np.random.default_rng(3))
    a2, _ = tpe.expert_action(obs([0.45, 0.0, 0.1]), tpe.ExpertState(), cfg, np.random.default_rng(3))
    a0, _ = tpe.expert_action(obs([0.45, 0.0, 0.1]), tpe.ExpertState())
    np.testing.assert_array_equal(a1, a2)
    assert not np.allclose(a1, a0)
    closing, _ = tpe.expert_action(obs(CUBE, gripper=1.0), tpe.ExpertState("close", 0), cfg,
                                   np.random.default_rng(3))
    assert np.all(closing[:3] == 0)


def _point_mass_episode(start_tcp: np.ndarray, cube: np.ndarray, steps: int = 60) -> int | None:
    """A stand-in of the env: the TCP moves by the position action, the gripper command integrates the delta,
    a gripper closed for 2 steps within 1 cm of the cube carries it. The step at which the cube is 0.1 m above
    its start (gym-hil's success), or None."""
    tcp, cube, grip, closed_for = start_tcp.astype(float), cube.astype(float), 0.0, 0
    z0, state = cube[2], tpe.ExpertState()
    for t in range(steps):
        action, state = tpe.expert_action(obs(tcp, cube, grip), state)
        holding = closed_for >= 2 and np.linalg.norm(cube - tcp) < 0.01
        tcp = tcp + action[:3]
        if holding:
            cube = tcp.copy()
        grip = float(np.clip(grip + action[6], 0.0, 1.0))
        closed_for = closed_for + 1 if grip >= 1.0 else 0
        if cube[2] - z0 > 0.1:
            return t + 1
    return None


@pytest.mark.parametrize("start,cube", [([0.49, 0.0, 0.078], [0.5, 0.0, 0.02]), ([0.3, -0.2, 0.3],
                                                                                   [0.45, 0.12, 0.02])])
def test_the_routine_lifts_the_cube_on_a_point_mass_stand_in(start: list[float], cube: list[float]) -> None:
    done = _point_mass_episode(np.array(start), np.array(cube))
    assert done is not None and done < 40


# ------------------------------------------------------------------------------------------------ the real env


def test_the_expert_succeeds_on_gym_hil_and_its_demos_load_like_train_loads_them(tmp_path: Path) -> None:
    pytest.importorskip("gym_hil")
    pytest.importorskip("torch")
    from learners.training.demos import load_demo_buffer
    from robot_rl.episodes import load_dir
    from robot_rl.gym_env import env_spec_of

    for noise in (0.0, 0.3):
        result = tpe.measure(3, tpe.ExpertConfig(noise=noise))
        assert result["success_rate"] == 1.0, result
    rec = tpe.record_demos(tmp_path / "demos", 2, tpe.ExpertConfig(noise=0.3), first_seed=5, log=lambda *a: None)
    assert rec == {"kept": 2, "attempts": 2, "success_rate": 1.0}
    episodes, errors = load_dir(tmp_path / "demos")
    assert not errors and len(episodes) == 2
    for ep in episodes:
        assert ep.success[-1] and ep.terminated[-1] and ep.intervention.all()
        assert sorted(ep.observations) == ["agent_pos", "environment_state"]
        assert float(ep.observations["environment_state"][-1, 2] - ep.observations["environment_state"][0, 2]) > 0.1
    assert [ep.info["seed"] for ep in episodes] == [5, 6]
    env = tpe.make_env()
    try:
        spec = env_spec_of(env, tpe.ENV_ID)
    finally:
        env.close()
    buf = load_demo_buffer(str(tmp_path / "demos"), spec, seed=0)  # the spec check `robot-rl train` makes
    assert len(buf) == sum(ep.length for ep in episodes)


def test_the_benchmark_env_draws_the_cube_from_its_seed() -> None:
    """robot_rl_bench/PandaPickCubeRandom-v0: a seed gives one cube position, another seed another; numpy's global
    RNG (which gym-hil draws from) is left as it was."""
    pytest.importorskip("gym_hil")
    env = tpe.make_env()
    try:
        np.random.seed(123)  # noqa: NPY002 (gym-hil draws from the legacy global RNG)
        before = np.random.get_state()[1].copy()  # noqa: NPY002 (gym-hil draws from the legacy global RNG)
        first = [env.reset(seed=s)[0]["environment_state"].copy() for s in (0, 1, 0)]
        assert np.array_equal(np.random.get_state()[1], before)  # noqa: NPY002 (gym-hil draws from the legacy global RNG)
    finally:
        env.close()
    assert np.allclose(first[0], first[2]) and not np.allclose(first[0], first[1])
    for cube in first:  # inside gym-hil's sampling area (x 0.3..0.5, y -0.15..0.15 m)
        assert 0.3 <= cube[0] <= 0.5 and -0.15 <= cube[1] <= 0.15
