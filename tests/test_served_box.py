"""Every command that acts over a robot server checks the task's box on a server that drives a real arm, before
anything moves (envs.task_file.check_served_box): record-demos, record-labels and a checkpoint evaluation, as the
actor does; `--allow-twin-box` is the explicit exception on each."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import envs.remote
from robot_rl.errors import ConfigError

LAB = ('[task]\nname = "lab"\nbase = "twin-pick-cube"\n'
       '[box]\npos_min_m = [0.3, -0.2, 0.02]\npos_max_m = [0.6, 0.2, 0.3]\n')


class Served:
    """What envs.remote.make_remote_env returns, as far as the checks read it: the server's info, the observation
    space, close()."""

    def __init__(self, backend: str, twin: bool = False) -> None:
        import gymnasium

        self.robot = SimpleNamespace(info={"backend": backend, "twin": twin})
        self.observation_space = gymnasium.spaces.Dict({"state": gymnasium.spaces.Box(-1, 1, (3,))})
        self.closed = False

    def close(self) -> None:
        self.closed = True


def serve(monkeypatch: pytest.MonkeyPatch, backend: str, twin: bool = False) -> list[Served]:
    made: list[Served] = []

    def fake(*args: Any, **kwargs: Any) -> Served:
        made.append(Served(backend, twin))
        return made[-1]

    monkeypatch.setattr(envs.remote, "make_remote_env", fake)
    return made


def test_record_demos_checks_the_box_on_a_hardware_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from demos.recording.demos import make_recording_env, parse_record_demos_args

    made = serve(monkeypatch, "franky")
    with pytest.raises(ConfigError, match=r"--task twin-pick-cube: the franky backend .* workspace box is the twin's"):
        make_recording_env("twin-pick-cube", "tcp://127.0.0.1:1", None, obs_mode="state")
    assert made[-1].closed  # refused before anything moved, the connection closed
    assert make_recording_env("twin-pick-cube", "tcp://127.0.0.1:1", None, True, obs_mode="state") is made[-1]
    lab = tmp_path / "lab.toml"
    lab.write_text(LAB)
    assert not make_recording_env(str(lab), "tcp://127.0.0.1:1", None, obs_mode="state").closed
    serve(monkeypatch, "ros2", twin=True)  # ros2 driving the twin: its box is the right one
    make_recording_env("twin-pick-cube", "tcp://127.0.0.1:1", None, obs_mode="state")
    args = ["--task", "twin-pick-cube", "--out", str(tmp_path), "--robot", "tcp://127.0.0.1:1"]
    assert not parse_record_demos_args(args).allow_twin_box
    assert parse_record_demos_args([*args, "--allow-twin-box"]).allow_twin_box


def test_record_labels_checks_the_box_on_a_hardware_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from demos.recording.labels import RecordLabelsConfig, _labelling_env, record_labels_arg_parser

    serve(monkeypatch, "franky")
    argv = ["--task", "twin-pick-cube", "--out", str(tmp_path), "--robot", "tcp://127.0.0.1:1"]
    cfg = RecordLabelsConfig(**vars(record_labels_arg_parser().parse_args(argv)))
    with pytest.raises(ConfigError, match=r"workspace box is the twin's.*--allow-twin-box"):
        _labelling_env(cfg, {"obs_mode": "pixels"})
    cfg = RecordLabelsConfig(**vars(record_labels_arg_parser().parse_args([*argv, "--allow-twin-box"])))
    env, _ = _labelling_env(cfg, {"obs_mode": "pixels"})
    assert not env.closed


def test_checkpoint_evaluation_checks_the_box_and_takes_allow_twin_box(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    import actors.evaluation as evaluation
    from actors.actor_env import make_actor_env
    from actors.run import parse_actor_args

    made = serve(monkeypatch, "franky")
    with pytest.raises(ConfigError, match=r"workspace box is the twin's"):
        make_actor_env("twin-pick-cube", "state", None, "tcp://127.0.0.1:1", evaluation=True)
    assert made[-1].closed
    argv = ["--task", "twin-pick-cube", "--robot", "tcp://127.0.0.1:1", "--evaluate", "runs/x"]
    assert not parse_actor_args(argv).evaluation().allow_twin_box
    cfg = parse_actor_args([*argv, "--allow-twin-box"]).evaluation()
    assert cfg.allow_twin_box
    seen: dict[str, Any] = {}

    def capture(*args: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        raise ConfigError("stop here")

    monkeypatch.setattr(evaluation, "load_learner_checkpoint", lambda path: None)
    monkeypatch.setattr(evaluation, "make_actor_env", capture)
    with pytest.raises(ConfigError, match="stop here"):
        evaluation.evaluate_checkpoint(cfg)
    assert seen["allow_twin_box"] is True and seen["evaluation"] is True
