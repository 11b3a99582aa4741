"""A ROS 2 lab's first week, rehearsed: every `robot-rl` command line of docs/ros2.md run as written, in the page's
order, against the ROS 2 twin (`robot-rl ros2-twin`, a real ROS 2 node over DDS) in place of the arm and its
controller. The franky half is tests/test_first_week.py; this module takes its page reader, its `Step` and
`Rehearsal` (the run's values, processes, the virtual SpaceMouse) and its substitution rules, with a table of its own.

The rehearsal (`test_a_ros2_labs_first_week_against_the_ros2_twin`, slow): the page's plain-command block in its
order: the twin with the lab's task file, `robot-server --backend ros2` with that file (no `--ros-twin`, no
`--allow-twin-box`: the server bridges the twin as it would a lab's controller, and it refuses the twin's box first),
record-demos with a person at a virtual SpaceMouse, the learner (from the demos), the actor with the person
intervening, estop, the robot server restarted (resume) and the actor again.

Choices (what stands in for the lab):
- The box: the person measured it (`safety-box record` needs franky's FCI, which franka_ros2 holds): this test
  writes the box file `safety-box record` writes, with pick_cube's twin box as the measured values, and the lab's
  task file is `robot-rl task init --from-box` of it (the line tests/test_first_week.py runs against franky-sim).
- Each test has its own ROS_DOMAIN_ID, ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST and a ROS_LOG_DIR under tmp_path (as
  tests/test_ros2_dds.py). The twin, the robot server and the learner run as `python -m robot_rl.cli` processes;
  record-demos, the actors and estop through robot_rl.cli.main in this process (the virtual SpaceMouse is a
  sys.modules stand-in).
- The `ros2 launch` lines are dry-run by tests/test_launch_files.py (EXEMPT here, with that reason).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.test_first_week import (
    ACTOR_EXTRA,
    ACTOR_WHY,
    LET_GO,
    PUSH,
    Rehearsal,
    Step,
    _person,
    assert_estopped,
    check_mentions_and_extras,
    documented_lines,
    record_one_demo,
    runnable,
    wait_for_interventions,
)
from tests.test_first_week import (
    PAGE as HARDWARE_PAGE,
)

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "ros2.md"
_DOMAINS = itertools.count()
LAUNCH_REASON = "a `ros2 launch` line: tests/test_launch_files.py parses it and dry-runs every command it runs"

REHEARSAL: dict[str, Step] = {
    "robot-rl ros2-twin --task configs/lab.toml": Step(),
    "robot-rl robot-server --backend ros2 --task configs/lab.toml":
        Step(("--bind", "tcp://127.0.0.1:0", "--stats-every", "0", "--ros-set", "connect_timeout_s=60"),
             "a free port (tests run in parallel); no periodic counters; a loaded CI machine may take longer than "
             "the default to discover the twin"),
    "robot-rl record-demos --task configs/lab.toml --robot ADDR --teleop spacemouse --device-config spacemouse.json "
    "--episodes 20 --out demos/pick": Step(),
    "robot-rl learner --task configs/lab.toml --demos demos/pick --out runs/pick":
        Step(("--bind", "{learner}", "--hidden", "32,32", "--ensemble", "2", "--batch", "8", "--critic-updates", "1",
              "--learning-starts", "100000", "--log-every", "1", "--no-tensorboard", "--quiet", "--threads", "1",
              "--set", "encoder_pretrain_steps=2"),
             "a free port; tiny networks, 2 steps of the encoder's pretraining on the demos, no updates (CPU CI: the "
             "hand-over to the actor, not the learning)"),
    "robot-rl actor --task configs/lab.toml --robot ADDR --learner ADDR --intervene spacemouse "
    "--device-config spacemouse.json": Step(("--max-steps", "8", *ACTOR_EXTRA), ACTOR_WHY),
    "robot-rl estop ADDR": Step(),
}
"""The page's lines the rehearsal runs, in the page's order (placeholders substituted, `extra` appended)."""

COVERED_BY: dict[str, str] = {
    "robot-rl robot-server --backend ros2": "robot-rl robot-server --backend ros2 --task configs/lab.toml",
    "robot-rl ros2-twin --task T": "robot-rl ros2-twin --task configs/lab.toml",
    "robot-rl ros2-twin": "robot-rl ros2-twin --task configs/lab.toml",
}
"""Short mentions of a rehearsed line (its words, in order, are in what the rehearsal runs)."""

EXEMPT: dict[str, str] = {
    "robot-rl cameras list": "lists RealSense serials for the launch files' camera arguments; the twin has no "
                             "RealSense (tests/test_first_week.py runs it)",
}
"""Page lines the rehearsal does not run, and why (every `ros2 launch` line: LAUNCH_REASON)."""

SUBSTITUTIONS: list[tuple[str, str, str]] = [
    ("record-demos", "--episodes 20", "--episodes 1"),
    ("*", "--robot ADDR", "--robot {server}"),
    ("*", "--learner ADDR", "--learner {learner}"),
    ("estop", "estop ADDR", "estop {server}"),
    ("ros2-twin", "--task T", "--task configs/lab.toml"),
]
"""The page's placeholders -> the rehearsal's values ({name}: filled in at run time)."""


def launch_lines(text: str) -> list[str]:
    return [" ".join(ln.split()) for ln in text.splitlines() if ln.strip().startswith("ros2 launch ")]


def _runnable(line: str) -> str:
    return runnable(line, SUBSTITUTIONS, {})


# ------------------------------------------------------------------------------------------ fast checks
def test_every_ros2_page_line_is_rehearsed_or_exempt() -> None:
    """docs/ros2.md and this rehearsal cannot drift apart: every `robot-rl` line is run (or a mention of one that
    is) or exempt with a reason, every `ros2 launch` line is one tests/test_launch_files.py dry-runs, no entry names
    a line the page no longer has, no placeholder is left, extras never repeat a flag of the line."""
    from tests.test_launch_files import _docs_launch_lines

    text = PAGE.read_text()
    lines = documented_lines(text)
    unknown = [ln for ln in lines if ln not in REHEARSAL and ln not in COVERED_BY and ln not in EXEMPT]
    assert not unknown, f"docs/ros2.md lines neither rehearsed nor exempt (add them to {Path(__file__).name}): " \
                        f"{unknown}"
    stale = [ln for ln in [*REHEARSAL, *COVERED_BY, *EXEMPT] if ln not in lines]
    assert not stale, f"entries for lines docs/ros2.md no longer has: {stale}"
    order = [ln for ln in lines if ln in REHEARSAL]
    assert order == list(REHEARSAL), "REHEARSAL is not in the page's order"
    launched = launch_lines(text)
    dry_run = {" ".join(ln.split()) for page, ln in _docs_launch_lines() if page == PAGE.name}
    assert launched and set(launched) <= dry_run, f"ros2 launch lines tests/test_launch_files.py does not dry-run: " \
                                                  f"{set(launched) - dry_run}"  # EXEMPT: {LAUNCH_REASON}
    check_mentions_and_extras(REHEARSAL, COVERED_BY, _runnable, mention_cut=" ...")


# ------------------------------------------------------------------------------------------ the rehearsal
@pytest.mark.slow
@pytest.mark.usefixtures("close_remote_robots")
def test_a_ros2_labs_first_week_against_the_ros2_twin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("rclpy", reason="rclpy is not installed (pip install 'robot-rl[ros]'; Python 3.10-3.13)")
    from envs.hardware.safety_box import write_task_config
    from envs.remote import RemoteRobot, RemoteRobotConfig
    from envs.tasks import get_task
    from robot_rl import cli
    from robot_rl.task_file import load_task_file
    from tests.test_runtime_faults import free_port

    # a DDS domain of this test's own (apart from tests/test_ros2_dds.py's), discovery on this machine only
    for k, v in {"ROS_DOMAIN_ID": str(10 + (os.getpid() * 7 + 45 + next(_DOMAINS)) % 90),
                 "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "ROS_LOG_DIR": str(tmp_path / "roslog")}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(tmp_path)
    r = Rehearsal(tmp_path, {"learner": f"tcp://127.0.0.1:{free_port()}"}, monkeypatch, steps=REHEARSAL,
                  substitutions=SUBSTITUTIONS, fixes={})
    quoted = re.search(r"a\s+`spacemouse\.json` holding `(\{.*?\})`", HARDWARE_PAGE.read_text(), re.S)
    assert quoted is not None, "docs/hardware.md no longer quotes spacemouse.json (docs/ros2.md points there)"
    (tmp_path / "spacemouse.json").write_text(quoted.group(1))
    t0 = time.monotonic()
    took: dict[str, float] = {}

    def line(start: str) -> str:
        found = [ln for ln in REHEARSAL if ln.startswith(start)]
        assert len(found) == 1, (start, found)
        return found[0]

    def lap(name: str) -> None:
        took[name] = round(time.monotonic() - t0 - sum(took.values()), 1)

    def main(cli: Any, argv: list[str]) -> tuple[int, str]:
        capsys.readouterr()
        code = cli.main(argv)
        got = capsys.readouterr()
        return code, got.out + got.err

    def log(name: str) -> str:
        return (tmp_path / f"{name}.log").read_text()[-3000:]

    try:
        # 0. the lab's task file from the measured box (the line tests/test_first_week.py runs on franky-sim)
        twin_task = get_task("pick_cube")
        write_task_config(tmp_path / "configs" / "box.json", "pick_cube",
                          {k: list(getattr(twin_task, k)) for k in ("pos_min_m", "pos_max_m", "rot_min_rad",
                                                                    "rot_max_rad")}, {"by": "measured"})
        code, out = main(cli, ["task", "init", "--out", "configs/lab.toml", "--from-box", "configs/box.json"])
        assert code == 0 and "the lab's box" in out, out
        lab = load_task_file(tmp_path / "configs" / "lab.toml")
        assert (lab.box_source, lab.obs_mode) == ("lab", "pixels"), lab.sections
        # 1. the twin in place of the arm and its controller, with the lab's file
        twin_line = line("robot-rl ros2-twin")
        r.ran.append(twin_line)
        twin = r.start("twin", r.argv(twin_line))
        assert twin.stdout is not None
        said = twin.stdout.readline()
        assert said.startswith("ros2-twin: task pick_cube"), said + log("twin")
        lap("ros2-twin")
        # 2. the robot server: the twin's box is refused (the twin is bridged as a lab's controller), the lab's not
        server_line = line("robot-rl robot-server")
        code, out = main(cli, ["robot-server", "--backend", "ros2", "--task", "twin-pick-cube", "--bind",
                               "tcp://127.0.0.1:0"])
        assert code != 0 and "box is the twin's" in out, out
        server, r.values["server"] = r.serve(server_line)
        with RemoteRobot(RemoteRobotConfig(address=r.values["server"])) as probe:
            assert probe.info["backend"] == "ros2" and not probe.info.get("twin"), probe.info
            assert probe.info["task"] == "pick_cube" and sorted(probe.info["cameras"]) == ["front", "wrist"]
        lap("robot-server")
        # 3. demonstrations: the cap pushed away for two polls, then the success button: one kept episode
        demos = record_one_demo(r, line("robot-rl record-demos"), tmp_path, capsys)
        assert demos[0].observations["images/front"].shape[1:] == (128, 128, 3)
        front = demos[0].observations["images/front"]
        assert np.ptp(front.astype(np.float32)) > 0  # rendered frames over the ROS image topics, not blanks
        lap("record-demos")
        # 4. the learner from the demos, the actor with the person intervening: the cap pushed on polls 2-4 of 10
        learner_line = line("robot-rl learner")
        r.ran.append(learner_line)
        learner = r.start("learner", r.argv(learner_line))
        r.person(_person(tmp_path / "intervene-person.json", 10, {2: [PUSH], 5: [LET_GO]}))
        actor_line = line("robot-rl actor")
        r.steps = {**REHEARSAL, actor_line: Step((*REHEARSAL[actor_line].extra, "--stats-out", "actor-1.json"))}
        code, out = r.run(actor_line, capsys)
        assert code == 0, out + log("learner")
        stats = json.loads((tmp_path / "actor-1.json").read_text())
        assert stats["env_steps"] == 8 and stats["flushed"], stats
        wait_for_interventions(tmp_path / "runs" / "pick")
        lap("learner + actor (intervene)")
        # 5. e-stop: the server refuses everything until it restarts
        code, out = r.run(line("robot-rl estop"), capsys)
        assert code == 0, out
        assert_estopped(r.values["server"])
        assert r.stop(server) == 0, log("robot-server")
        lap("estop")
        # 6. resume: the same server line, the actor again (the learner kept running)
        server, r.values["server"] = r.serve(server_line)
        r.steps = {**REHEARSAL, actor_line: Step((*REHEARSAL[actor_line].extra, "--stats-out", "actor-2.json"))}
        code, out = r.run(actor_line, capsys)
        assert code == 0, out + log("robot-server")
        stats = json.loads((tmp_path / "actor-2.json").read_text())
        assert stats["env_steps"] == 8 and stats["flushed"], stats
        lap("restart + actor")
        assert r.stop(learner) == 0, log("learner")
        assert r.stop(server) == 0, log("robot-server")
        assert r.stop(twin) == 0, log("twin")
    finally:
        r.close()
    print(f"ros2 first week: {took} s")
    assert sorted(set(r.ran)) == sorted(REHEARSAL), set(REHEARSAL) - set(r.ran)
