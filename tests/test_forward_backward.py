"""Reset-free forward/backward training on twin-cube-relocate (learners.training.forward_backward).

A few hundred env steps with real SAC agents learning from their own buffers, while the scripted expert of each
direction picks the actions (so the cube really goes A -> B -> A ... within the test's budget): both directions
run, they switch, the scene is never teleported after the first reset, and a false positive of the reward model
is caught by the hand-over guard. Each direction's reward is a learners.rewards.reward_model.RewardModel (the env's true
goal, a predicate, a classifier).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("mujoco")
pytest.importorskip("torch")

from envs.env import make_twin_env
from envs.tasks import RELOCATE_ZONE_A_M, RELOCATE_ZONE_B_M, in_zone
from envs.twin.experts import ScriptedExpert
from learners.agents.config import rlpd_state_config
from learners.agents.sac import SACAgent
from learners.replay.buffer import ReplayBuffer
from learners.rewards.reward_model import ClassifierReward, GoalReward, HumanReward, PredicateReward
from learners.training.forward_backward import (
    Direction,
    FBCounters,
    ForwardBackwardConfig,
    direction_reward,
    fires,
    forward_backward,
)
from robot_rl.errors import ConfigError
from robot_rl.specs import EnvSpec

pytestmark = pytest.mark.filterwarnings("ignore:.*Box observation space m.*:UserWarning")

AGENT = rlpd_state_config(hidden_dims=(16, 16), ensemble_size=2, batch_size=8, critic_updates_per_actor_update=1,
                          device="cpu", state_select=("object", "state[0:3]"))


class ExpertDriven:
    """An agent whose actions come from a scripted expert (restarted at every episode start) and whose updates go
    to a real SACAgent: the loop's plumbing runs for real, the cube moves within a short test."""

    def __init__(self, env: Any, task: str, spec: EnvSpec, seed: int) -> None:
        self.env, self.expert = env, ScriptedExpert(task, seed=seed)
        self.sac = SACAgent(spec, AGENT.replace(seed=seed))
        self.cfg = self.sac.cfg
        self.updates = 0

    def act(self, obs: Any, deterministic: bool = False) -> np.ndarray:
        base = self.env.unwrapped
        if base.episode_steps == 0:
            self.expert.reset()
        return self.expert.act(base.last_state)

    def update(self, batch: Any) -> dict[str, float]:
        self.updates += 1
        return self.sac.update(batch)


def make_run(forward_source: Any = None, backward_source: Any = None,
             **env_kw: Any) -> tuple[Any, tuple[Direction, Direction], list[Any]]:
    env = make_twin_env("cube_relocate", obs_mode="state", scene_resets="first", task_reward=False, **env_kw)
    teleports: list[Any] = []
    real = env.robot.reset_scene
    env.robot.reset_scene = lambda seed=None: (teleports.append(seed), real(seed))  # type: ignore[method-assign]
    spec = EnvSpec.from_spaces("twin-cube-relocate", env.observation_space, env.action_space, control_hz=10.0)
    dirs = []
    for name, task, goal, seed in (("forward", "cube_relocate", "in_zone_b", 0),
                                   ("backward", "cube_relocate_back", "in_zone_a", 1)):
        agent = ExpertDriven(env, task, spec, seed)
        given = forward_source if name == "forward" else backward_source
        source = given if given is not None else GoalReward(goal)
        dirs.append(Direction(name, agent, ReplayBuffer(spec, 1000, seed=seed), None, source, goal=goal))
    return env, (dirs[0], dirs[1]), teleports


def test_both_directions_run_switch_and_never_teleport() -> None:
    env, (fwd, bwd), teleports = make_run()
    counters = FBCounters()
    cfg = ForwardBackwardConfig(total_steps=300, learning_starts=20, updates_per_step=1, seed=0)
    episodes = list(forward_backward(env, (fwd, bwd), cfg, counters))
    order = [m["direction"] for m in episodes]
    assert order[:4] == ["forward", "backward", "forward", "backward"], order
    assert fwd.episodes >= 2 and bwd.episodes >= 2 and counters.handovers == len(order) >= 4
    assert all(m["ended_by_reward"] and m["true_success"] and m["switched"] for m in episodes)
    assert fwd.true_successes == fwd.reward_successes == fwd.episodes
    assert len(teleports) == 1 == env.scene_teleports and episodes[-1]["scene_teleports"] == 1
    assert counters.false_positive_handovers == 0 == counters.handovers_without_true_success
    # each agent learned from its own steps only, and only while it acted
    assert len(fwd.online) == fwd.steps and len(bwd.online) == bwd.steps and fwd.steps + bwd.steps == 300
    assert fwd.agent.updates == fwd.updates > 0 and bwd.agent.updates == bwd.updates > 0
    # where the cube is now: wherever the last finished direction put it (plus the unfinished episode's doing)
    cube = env.last_state.objects["cube_pos"]
    assert in_zone(cube[:2], RELOCATE_ZONE_A_M) or in_zone(cube[:2], RELOCATE_ZONE_B_M) or cube[2] > 0.025
    env.close()


def test_a_false_positive_is_not_handed_over() -> None:
    calls = {"n": 0}

    def fires_once_early(obs: Any, info: Any) -> bool:  # a "classifier" that fires on frame 3, then is right
        calls["n"] += 1
        return calls["n"] == 3 or bool(info["goals"]["in_zone_b"])

    env, (fwd, bwd), teleports = make_run(PredicateReward(fires_once_early))
    counters = FBCounters()
    cfg = ForwardBackwardConfig(total_steps=120, learning_starts=1000, seed=0)
    episodes = list(forward_backward(env, (fwd, bwd), cfg, counters))
    first, second = episodes[0], episodes[1]
    assert first["direction"] == "forward" and first["episode_length"] == 3 and first["ended_by_reward"]
    assert first["true_success"] is False and not first["switched"] and first["false_positive_handover"]
    assert second["direction"] == "forward" and second["true_success"] and second["switched"]  # forward went on
    assert counters.false_positive_handovers == 1 and len(teleports) == 1
    # the unconfirmed reward was withdrawn: stored as 0, still terminal (the episode ended there with nothing, so
    # the critic does not bootstrap the shortcut's value); the confirmed one kept its reward
    f, valid = fwd.online.fields, fwd.online.valid
    assert counters.withdrawn_rewards == 1 and first["episode_return"] == 0.0 and second["episode_return"] == 1.0
    ends = np.flatnonzero(valid & f["terminated"])
    assert not (valid & f["truncated"]).any()
    assert ends[0] == first["episode_length"] - 1 and f["rewards"][ends[0]] == 0.0  # episode 1's last step
    assert len(ends) == 2 and f["rewards"][ends[1]] == 1.0 and f["rewards"][valid].sum() == 1.0
    assert len(fwd.online) == fwd.steps  # nothing lost while the last transition waited for the verdict
    env.close()


def test_each_direction_sees_its_own_goal_as_the_true_success() -> None:
    # the env's task is the forward one, so its info["success"] is "cube in zone B" whichever direction acts; the
    # backward reward model (and so its audit's true_success) must see "cube in zone A" instead
    seen: list[tuple[bool, bool, bool]] = []

    def backward_goal(obs: Any, info: Any) -> bool:
        seen.append((bool(info["success"]), bool(info["goals"]["in_zone_a"]), bool(info["goals"]["in_zone_b"])))
        return bool(info["goals"]["in_zone_a"])

    env, (fwd, bwd), _ = make_run(backward_source=PredicateReward(backward_goal))
    episodes = list(forward_backward(env, (fwd, bwd), ForwardBackwardConfig(total_steps=300, learning_starts=1000,
                                                                            seed=0), FBCounters()))
    assert any(e["direction"] == "backward" and e["true_success"] for e in episodes)
    assert seen and all(success == in_a for success, in_a, _ in seen)
    assert any(success and not in_b for success, _, in_b in seen)  # a success the env's own task did not report
    env.close()


def test_withdrawing_can_be_turned_off() -> None:
    calls = {"n": 0}

    def fires_on_frame_3(obs: Any, info: Any) -> bool:
        calls["n"] += 1
        return calls["n"] == 3

    env, (fwd, bwd), _ = make_run(PredicateReward(fires_on_frame_3))
    counters = FBCounters()
    cfg = ForwardBackwardConfig(total_steps=10, learning_starts=1000, seed=0, withdraw_unconfirmed=False)
    episodes = list(forward_backward(env, (fwd, bwd), cfg, counters))
    assert episodes[0]["false_positive_handover"] and counters.withdrawn_rewards == 0
    f = fwd.online.fields
    assert (f["rewards"][2], bool(f["terminated"][2]), bool(f["truncated"][2])) == (1.0, True, False)
    env.close()


class Idle:
    """A policy that holds still."""

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg

    def act(self, obs: Any, deterministic: bool = False) -> np.ndarray:
        return np.zeros(7, np.float32)

    def update(self, batch: Any) -> dict[str, float]:
        return {}


def test_a_stuck_direction_hands_over_after_its_timeouts() -> None:
    env, (fwd, bwd), teleports = make_run(max_episode_steps=10)
    fwd.agent, bwd.agent = Idle(AGENT), Idle(AGENT)
    counters = FBCounters()
    cfg = ForwardBackwardConfig(total_steps=31, learning_starts=1000, handover_after_timeouts=3, seed=0)
    episodes = list(forward_backward(env, (fwd, bwd), cfg, counters))
    # forward never moves the cube out of zone A: three timeouts, then backward, whose goal (zone A) holds at once
    assert [(m["direction"], m["episode_length"], m["timeout_handover"]) for m in episodes] == [
        ("forward", 10, False), ("forward", 10, False), ("forward", 10, True), ("backward", 1, False)]
    assert episodes[-1]["ended_by_reward"] and episodes[-1]["true_success"] and episodes[-1]["switched"]
    assert counters.timeout_handovers == 1 and counters.handovers == 2 and counters.active == 0
    assert counters.false_positive_handovers == 0 and len(teleports) == 1
    env.close()


def test_direction_rewards_are_the_reward_models_of_the_rest_of_the_project(tmp_path: Path) -> None:
    from tests.test_reward_classifier import constant_classifier

    assert isinstance(direction_reward("env", "in_zone_b"), GoalReward)
    assert isinstance(direction_reward("human", "in_zone_b"), HumanReward)
    with pytest.raises(ConfigError, match="expected env, human or classifier:DIR"):
        direction_reward("oracle", "in_zone_b")
    with pytest.raises(ConfigError, match=r"info\['goals'\].*reports none"):
        GoalReward("in_zone_b").step({}, {"success": True}, 0, 1)
    # a classifier: gated over k frames for the reward, but the hand-over guard asks about one frame (and the
    # predicate), and a camera the card does not know is refused up front, naming the flag
    cls = constant_classifier(tmp_path / "c", 0.9, size=8, k=2, predicate=("state[12]>=0.01",))
    model = direction_reward(f"classifier:{cls}", "in_zone_b", {"images/front": (8, 8, 3)},
                             audit_dir=tmp_path / "audit")
    assert isinstance(model, ClassifierReward) and model.k == 2
    frame = {"images": {"front": np.zeros((8, 8, 3), np.uint8)}, "state": np.zeros(19, np.float32)}
    held = {**frame, "state": np.full(19, 0.03, np.float32)}
    assert [model.step(held, {}, 0, t).success for t in (1, 2)] == [False, True]
    assert fires(model, held, {}, 1) and not fires(model, frame, {}, 1)  # one frame; predicate: gripper closed
    assert model.run == 0  # the guard leaves the model reset
    with pytest.raises(ConfigError, match=r"--backward-reward classifier:.*images/front"):
        direction_reward(f"classifier:{cls}", "in_zone_a", {"images/front": (16, 16, 3)},
                         flag="--backward-reward")


def test_train_refuses_what_it_cannot_run_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from robot_rl.cli import main

    out = tmp_path / "run"
    for argv, msg in (
            (["--task", "twin-pick-cube", "--forward-backward"], "task twin-pick-cube has no backward direction; "
                                                                 "tasks with one: ['twin-cube-relocate']"),
            (["--task", "twin-pick-cube", "--faithful"], "--faithful: the env gives no reward"),
            (["--task", "twin-cube-relocate", "--forward-backward", "--faithful", "--reward", "classifier:x"],
             "pass --backward-reward classifier:DIR"),
            (["--env-id", "Pendulum-v1", "--faithful", "--reward", "human"], "needs a twin --task"),
            (["--task", "twin-cube-relocate", "--backward-demos", "x"], "only with --forward-backward"),
            (["--task", "twin-cube-relocate", "--backward-reward", "human"], "only with --forward-backward"),
            (["--task", "twin-cube-relocate", "--forward-backward", "--reward", "oracle"],
             "--reward 'oracle': expected env, human or classifier:DIR"),
            (["--task", "twin-cube-relocate", "--forward-backward", "--backward-reward", "human"],
             "--backward-reward human needs a teleop device's success key")):
        assert main(["train", *argv, "--out", str(out)]) == 1
        err = capsys.readouterr().err
        assert msg in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert not out.exists()


def test_train_forward_backward_writes_a_run_both_policies_can_be_evaluated_from(tmp_path: Path) -> None:
    from learners.training.flags import build_train_parser, train_config
    from learners.training.train import train
    from robot_rl.cli import main as cli_main
    from robot_rl.metrics import read_metrics

    out = tmp_path / "fb"
    assert cli_main(["train", "--task", "twin-cube-relocate", "--obs-mode", "state", "--forward-backward",
                     "--max-env-steps", "40", "--learning-starts", "20", "--eval-every", "1000",
                     "--eval-episodes", "1", "--hidden", "16", "--batch-size", "8", "--ensemble", "2",
                     "--out", str(out)]) == 0
    [row] = read_metrics(out / "metrics.jsonl")
    assert row["env_step"] == 40 and row["scene_teleports"] == 1 and row["forward_steps"] == 40  # no success yet
    assert row["backward_steps"] == 0 and row["handovers"] == 0 and row["forward_updates"] > 0
    assert {"forward_success_rate", "backward_success_rate", "false_positive_handovers"} <= set(row)
    assert json.loads((out / "agent_config_backward.json").read_text())["hidden_dims"] == [16, 16]
    for where in (out, out / "checkpoints_backward"):
        assert cli_main(["eval", "--checkpoint", str(where), "--episodes", "1"]) == 0
    args = build_train_parser().parse_args(["--task", "twin-cube-relocate", "--forward-backward", "--out", str(out)])
    with pytest.raises(ConfigError, match="already holds a run"):
        train(train_config(args), args.out)
