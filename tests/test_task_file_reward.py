"""A task file's `[reward]` (source, classifier directory, gate_k) is the default of every command that decides a
reward: `robot-rl train`, `robot-rl actor` and `robot-rl sim` (which passes it to its actors); an explicit `--reward`
or `--reward-gate-k` wins, and the file's gate_k replaces the classifier card's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mujoco")
pytest.importorskip("torch")

from tests.test_reward_classifier import constant_classifier

pytestmark = pytest.mark.filterwarnings("ignore:.*Box observation space m.*:UserWarning")

SIZE = 16


def lab_file(tmp_path: Path, reward: str) -> Path:
    """A lab task file extending twin-pick-cube, a classifier that always fires (card gate k = 1) beside it."""
    constant_classifier(tmp_path / "cls", 0.999, size=SIZE, k=1, cameras=("images/front",))
    path = tmp_path / "lab.toml"
    path.write_text(f'[task]\nname = "lab-pick"\nbase = "twin-pick-cube"\n\n[reward]\n{reward}\n')
    return path


def test_train_takes_the_files_classifier_and_gate(tmp_path: Path) -> None:
    from learners.rewards.reward_model import ClassifierReward, RewardModelWrapper
    from learners.training.flags import build_train_parser, train_config
    from learners.training.train import build_run

    task = lab_file(tmp_path, 'source = "classifier"\nclassifier = "cls"\ngate_k = 3')
    base = ["--task", str(task), "--out", str(tmp_path / "run"), "--obs-mode", "state", "--faithful"]
    cfg = train_config(build_train_parser().parse_args(base))
    assert cfg.reward == f"classifier:{tmp_path / 'cls'}" and cfg.reward_gate_k == 3  # relative to the file
    # explicit flags win
    assert train_config(build_train_parser().parse_args([*base, "--reward", "human", "--intervene",
                                                          "scripted"])).reward == "human"
    assert train_config(build_train_parser().parse_args([*base, "--reward-gate-k", "2"])).reward_gate_k == 2
    # a preset without [reward] gate: the env's reward, the card's gate
    plain = train_config(build_train_parser().parse_args(["--task", "twin-reach", "--out", str(tmp_path / "r")]))
    assert plain.reward == "env" and plain.reward_gate_k is None

    run = build_run(cfg.replace(device="cpu", hidden=16, batch_size=8, ensemble=2, agent_set=("compile=false",)),
                    reward_audit=tmp_path / "audit")
    try:
        assert isinstance(run.env, RewardModelWrapper) and isinstance(run.env.model, ClassifierReward)
        assert run.env.model.k == 3  # the file's gate, not the card's k = 1
        run.env.reset(seed=0)
        ends = [run.env.step(np.zeros(run.env.action_space.shape, np.float32))[2] for _ in range(3)]
        assert ends == [False, False, True]  # a classifier that always fires: success on the 3rd frame
    finally:
        run.env.close()
        run.eval_env.close()


def test_actor_takes_the_files_classifier_and_gate(tmp_path: Path) -> None:
    from actors.actor_env import make_actor_env
    from actors.run import parse_actor_args, with_task_reward

    task = lab_file(tmp_path, 'source = "classifier"\nclassifier = "cls"\ngate_k = 2')
    cfg = with_task_reward(parse_actor_args(["--task", str(task)]))
    assert cfg.reward == f"classifier:{tmp_path / 'cls'}" and cfg.reward_gate_k == 2
    explicit = with_task_reward(parse_actor_args(["--task", str(task), "--reward", "env", "--reward-gate-k", "4"]))
    assert explicit.reward == "env" and explicit.reward_gate_k == 4
    assert with_task_reward(parse_actor_args(["--task", "twin-reach"])).reward == "env"
    env = make_actor_env(str(task), "pixels", SIZE, None, reward=cfg.reward, reward_gate_k=cfg.reward_gate_k,
                         reward_audit=tmp_path / "audit")
    try:
        assert env.model.k == 2
    finally:
        env.close()


def test_sim_passes_the_files_reward_to_its_actors(tmp_path: Path) -> None:
    from actors.run import ActorRunConfig, parse_actor_args, with_task_reward
    from supervisor.sim import Sim
    from supervisor.sim_config import build_sim_parser, sim_config

    task = lab_file(tmp_path, 'source = "classifier"\nclassifier = "cls"\ngate_k = 2')
    args = ["--task", str(task), "--out", str(tmp_path / "run"), "--obs-mode", "pixels", "--image-size", str(SIZE)]

    def actor_of(*extra: str) -> tuple[list[str], ActorRunConfig]:
        argv = Sim(sim_config(build_sim_parser().parse_args([*args, *extra]))).actor_argv(0, "tcp://127.0.0.1:1",
                                                                                           "tcp://127.0.0.1:2")
        return argv, with_task_reward(parse_actor_args(argv[argv.index("actor") + 1:]))

    assert sim_config(build_sim_parser().parse_args(args)).reward == f"classifier:{tmp_path / 'cls'}"
    argv, actor = actor_of()
    assert actor.reward == f"classifier:{tmp_path / 'cls'}" and actor.reward_gate_k == 2
    assert "--reward-audit" in argv
    # an explicit --reward env reaches the actors too (their own default would be the file's classifier)
    argv, actor = actor_of("--reward", "env")
    assert actor.reward == "env" and "--reward-audit" not in argv


def test_a_bad_gate_is_a_clear_error(tmp_path: Path) -> None:
    from robot_rl.errors import ConfigError
    from robot_rl.presets import task_reward

    task = lab_file(tmp_path, 'source = "classifier"\nclassifier = "cls"\ngate_k = 0')
    with pytest.raises(ConfigError, match=r"lab.toml: reward.gate_k must be an integer >= 1, got 0"):
        task_reward(str(task))


def test_sim_reward_gate_k_wins_over_the_file_for_the_actors_and_the_evaluation(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from actors.run import ActorRunConfig, parse_actor_args, with_task_reward
    from robot_rl.cli import main
    from supervisor.sim import Sim
    from supervisor.sim_config import build_sim_parser, sim_config

    task = lab_file(tmp_path, 'source = "classifier"\nclassifier = "cls"\ngate_k = 2')
    args = ["--task", str(task), "--out", str(tmp_path / "run"), "--obs-mode", "pixels", "--image-size", str(SIZE)]

    def children(*extra: str) -> tuple[ActorRunConfig, ActorRunConfig]:
        sim = Sim(sim_config(build_sim_parser().parse_args([*args, *extra])))
        actor = sim.actor_argv(0, "tcp://127.0.0.1:1", "tcp://127.0.0.1:2")
        evaluate = sim.evaluate_argv(tmp_path / "eval.json")
        return (with_task_reward(parse_actor_args(actor[actor.index("actor") + 1:])),
                with_task_reward(parse_actor_args(evaluate[evaluate.index("actor") + 1:])))

    actor, evaluate = children()  # the file's gate, read by each child itself
    assert actor.reward_gate_k == 2 and evaluate.reward_gate_k == 2
    assert evaluate.evaluation().reward == f"classifier:{tmp_path / 'cls'}"
    actor, evaluate = children("--reward-gate-k", "4")
    assert actor.reward_gate_k == 4 and evaluate.evaluation().reward_gate_k == 4
    assert sim_config(build_sim_parser().parse_args([*args, "--reward-gate-k", "4"])).reward_gate_k == 4
    # --reward env reaches the evaluation too: it then counts the twin's true success
    actor, evaluate = children("--reward", "env")
    assert actor.reward == "env" and evaluate.evaluation().reward == "env"
    assert main(["sim", *args, "--reward-gate-k", "0"]) == 1
    err = capsys.readouterr().err
    assert "--reward-gate-k=0 must be an integer >= 1" in err and err.count("\n") == 1


def test_train_takes_the_files_observation_mode_and_the_flag_wins(tmp_path: Path) -> None:
    """`robot-rl train --task FILE` runs the file's `[observation] mode` (a lab's file says pixels) unless
    `--obs-mode` is given; a preset without one keeps the env's own default (None: state)."""
    from learners.training.flags import build_train_parser, train_config

    task = tmp_path / "lab.toml"
    task.write_text('[task]\nname = "lab-reach"\nbase = "twin-reach"\n\n[observation]\nmode = "pixels"\n')
    base = ["--task", str(task), "--out", str(tmp_path / "run")]
    assert train_config(build_train_parser().parse_args(base)).obs_mode == "pixels"
    assert train_config(build_train_parser().parse_args([*base, "--obs-mode", "state"])).obs_mode == "state"
    plain = ["--task", "twin-reach", "--out", str(tmp_path / "r")]
    assert train_config(build_train_parser().parse_args(plain)).obs_mode is None
