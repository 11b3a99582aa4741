"""`robot-rl sim` (supervisor.sim) without running it: the command lines it builds (--set reaches the learner),
its refusals, the progress display. The real multi-process run is in test_runtime_faults.py."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from robot_rl.checkpoint import save_checkpoint
from robot_rl.cli import main
from supervisor.display import Display, fmt_count, fmt_duration, fmt_rate, read_json
from supervisor.sim import STOP_ACTORS, STOP_LEARNER, STOP_SERVERS, Sim, guard_stops, milestones, render_status
from supervisor.sim_config import build_sim_parser, sim_config


def sim(tmp_path: Path, *extra: str) -> Sim:
    return Sim(sim_config(build_sim_parser().parse_args(["--task", "twin-reach", "--out", str(tmp_path / "run"),
                                                         *extra])))


def test_sim_forwards_set_to_the_learner_command_line(tmp_path: Path) -> None:
    from learners.distributed.flags import agent_config
    from learners.distributed.flags import build_learner_parser as learner_parser

    s = sim(tmp_path, "--set", "discount=0.9", "--set", "hidden_dims=[64, 64]", "--learner-args", "--batch 32")
    argv = s.learner_argv(tmp_path / "demos")
    assert argv[:4] == [sys.executable, "-m", "robot_rl.cli", "learner"]
    i = argv.index("--set")
    assert argv[i:i + 4] == ["--set", "discount=0.9", "--set", "hidden_dims=[64, 64]"]
    # the learner reads them as AgentConfig fields, beside the other forwarded options
    cfg = agent_config(learner_parser().parse_args(argv[4:]))
    assert cfg.discount == 0.9 and cfg.hidden_dims == (64, 64) and cfg.batch_size == 32
    assert "--set" not in sim(tmp_path).learner_argv(None)
    assert "--set" not in s.actor_argv(0, "tcp://127.0.0.1:1", None)


def test_sim_children_stop_in_order(tmp_path: Path) -> None:
    s = sim(tmp_path)
    assert STOP_ACTORS < STOP_LEARNER < STOP_SERVERS  # actors flush to the learner, which checkpoints last
    spec = s.spec("learner", s.learner_argv(None), STOP_LEARNER)
    assert spec.log_path == tmp_path / "run" / "logs" / "learner.log" and spec.grace_s == 30.0


def test_sim_refusals_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    save_checkpoint(run / "checkpoints", 10, {"agent": {"w": np.zeros(2)}}, {})
    assert main(["sim", "--task", "twin-reach", "--out", str(run)]) == 1
    err = capsys.readouterr().err
    assert "already holds a run" in err and "--resume" in err and err.count("\n") == 1
    assert main(["sim", "--task", "twin-nope", "--out", str(tmp_path / "x")]) == 1
    assert "unknown task" in capsys.readouterr().err
    assert main(["sim", "--task", "twin-reach", "--out", str(tmp_path / "y"), "--set", "discount"]) == 1
    err = capsys.readouterr().err
    assert "--set 'discount': expected FIELD=VALUE" in err and "Traceback" not in err


def test_sim_display_renders_status() -> None:
    st = {"env_step": 12345, "episodes": 40, "success_rate": 0.45, "updates": 6000, "updates_per_s": 18.25,
          "weights_version": 600, "online_size": 12345, "demo_size": 512,
          "actors": {"actor-0": {"alive": True, "weights_version": 599, "transitions": 6200, "episodes": 20,
                                 "success_rate": 0.5, "intervention_rate": 0.0, "env_steps_per_s": 31.0,
                                 "operator_scene_resets": 4},
                     "actor-1": {"alive": False, "weights_version": 580, "transitions": 6145, "episodes": 20,
                                 "success_rate": 0.4, "intervention_rate": None, "paused": True}}}
    lines = render_status(st, 185.0, "twin-pick-cube", 20000)
    assert len(lines) == 3
    assert "12.3k/20.0k env steps" in lines[0] and "3m05s" in lines[0] and "success 0.45" in lines[0]
    assert "18.2/s" in lines[0] and "weights v600" in lines[0] and "demo 512" in lines[0]
    assert "actor-0" in lines[1] and "alive" in lines[1] and "v599" in lines[1] and "0.50" in lines[1]
    assert "away" in lines[2] and "paused" in lines[2]
    assert lines[1].endswith("scene resets 4") and "scene resets" not in lines[2]  # only an actor that asks
    assert render_status({}, 3.0, "t", 10)[0].endswith("waiting for the learner ...")
    compiling = render_status({**st, "updates": 0, "compiling": True}, 40.0, "twin-pick-cube", 20000)[0]
    assert "updates 0 (first update: compiling the learner's losses, ~20-70 s) | weights v600" in compiling
    rows = [{"env_step": 100, "wall_s": 10.0, "success_rate": 0.1}, {"env_step": 200, "wall_s": 20.0,
                                                                     "success_rate": 0.6}]
    assert milestones(rows) == {"0.25": {"env_step": 200, "wall_s": 20.0}, "0.5": {"env_step": 200, "wall_s": 20.0},
                                "0.8": None, "0.9": None}


def test_guard_stops_counts_the_robot_servers_stop_lines(tmp_path: Path) -> None:
    assert guard_stops(tmp_path) is None  # no robot servers (--in-process-twin)
    (tmp_path / "robot-server-0.log").write_text(
        "robot server: no command from client c for 1.02 s: holding the last target\n"
        "safety: STOP: external force 60.6 N > 60.0 N; holding the pose\n"
        "safety: trip cleared (external force 60.6 N > 60.0 N)\n")
    (tmp_path / "robot-server-1.log").write_text("safety: STOP: joint 1 within 0.02 rad of its limit\n" * 2)
    assert guard_stops(tmp_path) == 3


def test_display_live_redraws_in_place_and_lines_mode_throttles(tmp_path: Path) -> None:
    live = io.StringIO()
    d = Display("live", 10.0, live)
    d.show(["a", "b"])
    d.show(["c", "d"])
    d.message("note")
    d.show(["e"])
    up = "\x1b[1A\x1b[2K"
    assert live.getvalue() == "a\nb\n" + 2 * up + "c\nd\n" + 2 * up + "note\ne\n"
    lines = io.StringIO()
    d = Display("lines", 3600.0, lines)
    d.show(["first"])
    d.show(["too soon"])
    d.show(["forced"], force=True)
    assert lines.getvalue() == "first\nforced\n"
    assert Display("auto", 1.0, io.StringIO()).mode == "lines"  # not a terminal
    assert (fmt_count(12345), fmt_count(950), fmt_count(None)) == ("12.3k", "950", "-")
    assert (fmt_rate(0.456), fmt_rate(None), fmt_duration(3725)) == ("0.46", "-", "1h02m")
    (tmp_path / "torn.json").write_text('{"env_step": 1')
    assert read_json(tmp_path / "torn.json") == {} and read_json(tmp_path / "missing.json") == {}


def test_backend_reaches_the_learner_from_every_entry_point(tmp_path: Path) -> None:
    """`--backend jax` on sim (forwarded), learner and train, and `--set backend=jax`, all set AgentConfig.backend;
    torch stays the default."""
    from learners.distributed.flags import agent_config
    from learners.distributed.flags import build_learner_parser as learner_parser
    from learners.training.config import TrainConfig

    argv = sim(tmp_path, "--backend", "jax").learner_argv(None)
    assert argv[argv.index("--backend") + 1] == "jax"
    assert agent_config(learner_parser().parse_args(argv[4:])).backend == "jax"
    assert "--backend" not in sim(tmp_path).learner_argv(None)
    assert agent_config(learner_parser().parse_args(["--task", "twin-reach", "--out", "x"])).backend == "torch"
    assert agent_config(learner_parser().parse_args(["--task", "twin-reach", "--out", "x", "--set",
                                                     "backend=jax"])).backend == "jax"
    assert TrainConfig(task="twin-reach", backend="jax").agent_config(False).backend == "jax"
    assert TrainConfig(task="twin-reach", agent_set=("backend=jax",)).agent_config(False).backend == "jax"
    assert TrainConfig(task="twin-reach").agent_config(False).backend == "torch"


def test_sim_stops_when_every_actor_is_gone_for_good(tmp_path: Path) -> None:
    """Actors that keep dying (e.g. a robot server refusing every call) use up their restarts; then nothing feeds
    the learner any more, and `watch()` ends the run with a ChildError naming the last actor and its log, instead
    of showing a frozen progress line forever. While one actor still runs, an exhausted one does not end it."""
    from supervisor.process import ChildError

    s = sim(tmp_path, "--actor-restarts", "1")
    s.logs.mkdir(parents=True, exist_ok=True)
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    dies = [sys.executable, "-c", "import sys; print('robot server refused'); sys.exit(3)"]
    try:
        s.sup.start(s.spec("learner", sleeper, STOP_LEARNER, grace_s=2.0))
        s.sup.start(s.spec("actor-0", dies, STOP_ACTORS, restart="on-failure", max_restarts=1, grace_s=2.0))
        s.sup.start(s.spec("actor-1", sleeper, STOP_ACTORS, grace_s=2.0))
        # actor-0 dies twice (one restart) while actor-1 lives: the run goes on; stop actor-1, then it must end
        import threading

        def stop_actor_1_later() -> None:
            import time

            time.sleep(4.0)
            s.sup.child("actor-1").stop(grace_s=2.0)

        threading.Thread(target=stop_actor_1_later, daemon=True).start()
        with pytest.raises(ChildError, match="every actor exited") as info:
            s.watch()
        assert "actor-" in str(info.value) and "log" in str(info.value)
        assert s.sup.child("learner").alive()  # the run was ended by the actors, not by the learner
    finally:
        s.sup.stop()


def test_sim_state_policy_with_a_classifier_serves_cameras_at_the_cards_size(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--obs-mode state --reward classifier:DIR: the robot servers serve cameras (for the actors' reward model only)
    at the card's image size instead of --no-cameras; a plain state run still serves none; a card without a size,
    a non-square one or a conflicting --image-size are one-line errors before any child starts."""
    import json

    from envs.robot_server.run import parse_robot_server_args

    cls = tmp_path / "cls"
    cls.mkdir()
    (cls / "card.json").write_text(json.dumps({"image_size": [48, 48], "cameras": ["images/front"]}))
    s = sim(tmp_path, "--obs-mode", "state", "--reward", f"classifier:{cls}")
    argv = s.server_argv()
    assert "--no-cameras" not in argv and argv[argv.index("--image-size") + 1] == "48"
    server_args = parse_robot_server_args(argv[4:])
    assert server_args.image_size == 48 and not server_args.no_cameras
    actor = s.actor_argv(0, "tcp://127.0.0.1:1", "tcp://127.0.0.1:2")
    assert actor[actor.index("--reward") + 1] == f"classifier:{cls}" and "--obs-mode" in actor
    assert "--no-cameras" in sim(tmp_path, "--obs-mode", "state").server_argv()
    out = str(tmp_path / "z")
    for card, extra, want in [({"image_size": [48, 48]}, ["--image-size", "64"], "reads 48x48 frames"),
                              ({"image_size": [48, 32]}, [], "not square"),
                              ({"cameras": []}, [], "gives no image_size")]:
        (cls / "card.json").write_text(json.dumps(card))
        assert main(["sim", "--task", "twin-reach", "--out", out, "--obs-mode", "state", "--reward",
                     f"classifier:{cls}", *extra]) == 1
        err = capsys.readouterr().err
        assert want in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_sim_serves_the_side_camera_a_classifier_reads_beside_the_policys(tmp_path: Path) -> None:
    """A card naming the twin's side camera (record-labels --cameras front,wrist,side): the robot servers serve
    front, wrist and side (pixels: the policy observes front and wrist, the actors read side for the classifier;
    state: all three for the classifier); a card on the policy's cameras keeps the servers' default."""
    import json

    from envs.robot_server.run import parse_robot_server_args

    cls = tmp_path / "cls"
    cls.mkdir()
    card = {"image_size": [64, 64], "cameras": ["images/front", "images/wrist", "images/side"]}
    (cls / "card.json").write_text(json.dumps(card))
    for mode in ("pixels", "state"):
        argv = sim(tmp_path, "--obs-mode", mode, "--reward", f"classifier:{cls}").server_argv()
        assert parse_robot_server_args(argv[4:]).camera_names == ("front", "wrist", "side"), (mode, argv)
    (cls / "card.json").write_text(json.dumps({**card, "cameras": ["images/front", "images/wrist"]}))
    argv = sim(tmp_path, "--obs-mode", "pixels", "--reward", f"classifier:{cls}").server_argv()
    assert "--cameras" not in argv and parse_robot_server_args(argv[4:]).camera_names == ("front", "wrist")


def test_sim_takes_the_task_files_observation_mode_and_the_flag_wins(tmp_path: Path) -> None:
    task = tmp_path / "lab.toml"
    task.write_text('[task]\nname = "lab-reach"\nbase = "twin-reach"\n\n[observation]\nmode = "pixels"\n')

    def modes(*extra: str) -> tuple[str, list[str], list[str]]:
        s = Sim(sim_config(build_sim_parser().parse_args(["--task", str(task), "--out", str(tmp_path / "run"),
                                                          *extra])))
        learner, actor = s.learner_argv(None), s.actor_argv(0, "tcp://127.0.0.1:1", None)
        return (s.cfg.obs_mode, learner[learner.index("--obs-mode") + 1:][:1],
                actor[actor.index("--obs-mode") + 1:][:1])

    assert modes() == ("pixels", ["pixels"], ["pixels"])  # as `robot-rl actor` / `learner` read the file
    assert modes("--obs-mode", "state") == ("state", ["state"], ["state"])
    assert sim(tmp_path).cfg.obs_mode == "state"  # a preset without [observation] mode


def test_sim_prepares_a_pixel_learner_with_demos_in_a_step_of_its_own(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """From cameras with demos the learner's encoder may be pretrained on them first: sim runs `learner ...
    --prepare-only` (waited for, no start timeout) before the learner; a state run or one without demos does not,
    and a failing step is an error naming its log."""
    import queue
    import types

    from supervisor.process import ChildError

    def child(spec: Any) -> Any:  # exited, its output still queued
        started.append(list(spec.argv))
        lines: queue.Queue[str] = queue.Queue()
        for line in ("learner: encoder: pretraining step 100/1000: loss 0.5, ETA 20 s\n", "learner: other\n"):
            lines.put(line)
        return types.SimpleNamespace(alive=lambda: False, lines=lines, log_path=spec.log_path)

    started: list[list[str]] = []
    for extra, demos, runs in ((("--obs-mode", "pixels"), tmp_path / "demos", True),
                               (("--obs-mode", "pixels"), None, False), ((), tmp_path / "demos", False)):
        s = sim(tmp_path, *extra)
        shown: list[str] = []
        monkeypatch.setattr(s.sup, "start", child)
        monkeypatch.setattr(s.sup, "wait", lambda c: 0)
        monkeypatch.setattr(s.display, "message", shown.append)
        started.clear()
        s.prepare_learner(demos)
        assert bool(started) == runs
        if runs:
            assert started[0] == [*s.learner_argv(demos), "--prepare-only"]
            assert shown[1:] == ["sim: encoder: pretraining step 100/1000: loss 0.5, ETA 20 s"]  # relayed
    s = sim(tmp_path, "--obs-mode", "pixels")
    monkeypatch.setattr(s.sup, "start", child)
    monkeypatch.setattr(s.sup, "wait", lambda c: 3)
    with pytest.raises(ChildError, match=r"preparing the learner failed .exit code 3.*learner-prepare.log"):
        s.prepare_learner(tmp_path / "demos")
