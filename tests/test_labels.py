"""`robot-rl record-labels`: success/failure labelled frames from the scripted device (labels from the task's
success condition) and from device events (the success key toggles), on the twin in state mode / 64x64."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from demos.devices.teleop import ScriptedTeleop
from demos.formats.episode_io import EXIT_OK
from demos.formats.episode_tools import replay_episodes
from demos.recording.labels import (
    BackOutAfterSuccess,
    EventLabeler,
    InfoLabeler,
    LiveCounts,
    SegmentLimits,
    make_continuing_env,
    make_labeler,
    parse_record_labels_args,
    record_labels,
    record_segment,
)
from envs.devices import HumanCommand
from robot_rl.episodes import episode_paths, load_dir
from robot_rl.errors import ConfigError, UnknownTaskError

TOTALS = re.compile(r"done: (\d+) segment\(s\), (\d+) frames in .*: success (\d+), failure (\d+)")

def labels_main(argv: list[str]) -> int:
    """`robot-rl record-labels ARGV` through its library (errors raise, typed)."""
    return record_labels(parse_record_labels_args(argv))


def record(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, int, int, int]:
    assert labels_main(argv) == 0
    m = TOTALS.search(capsys.readouterr().out)
    assert m is not None
    segments, frames, pos, neg = (int(g) for g in m.groups())
    return segments, frames, pos, neg


def test_scripted_labels_have_both_classes_and_match_the_files(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "labels"
    segments, frames, pos, neg = record(["--task", "twin-reach", "--out", str(out), "--frames", "60",
                                         "--obs-mode", "state", "--after-success", "4"], capsys)
    assert frames == 60 and pos > 0 and neg > 0 and pos + neg == frames
    eps, errors = load_dir(out)
    assert not errors and len(eps) == segments >= 2
    assert sum(int(e.success.sum()) for e in eps) == pos
    assert sum(e.length for e in eps) == frames
    for ep in eps:
        assert ep.task == "twin-reach" and ep.info["labels"] == "info" and ep.info["teleop"] == "scripted"
        assert ep.spec is not None and ep.spec["task"] == "twin-reach"
        assert ep.info["positives"] == int(ep.success.sum())
        assert ep.info["negatives"] == ep.length - int(ep.success.sum())
        np.testing.assert_array_equal(ep.rewards, ep.success.astype(np.float32))
    # the first segment stopped 4 frames after its positives ended: near-miss negatives after success
    first = eps[0]
    last_pos = int(np.flatnonzero(first.success)[-1])
    assert first.length == last_pos + 1 + 4 and not first.success[last_pos + 1 :].any()
    # the labels are the task's success condition: every positive frame is within the reach tolerance
    goal = first.observations["object"]            # goal position relative to the reset pose
    tcp = first.observations["state"][:, :3]
    dist = np.linalg.norm(goal - tcp, axis=1)[1:]  # label t belongs to observation t + 1
    assert np.all(dist[first.success] <= 0.02 + 1e-6) and np.all(dist[~first.success] > 0.02 - 1e-6)


def test_scripted_pick_cube_with_images_records_past_success(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pick"
    segments, _frames, pos, neg = record(["--task", "twin-pick-cube", "--out", str(out), "--frames", "200",
                                         "--positives", "3", "--image-size", "64", "--hold-steps", "3"], capsys)
    assert segments == 1 and pos >= 3 and neg > 0
    (ep,) = load_dir(out)[0]
    assert ep.observations["images/front"].shape == (ep.length + 1, 64, 64, 3)
    first = int(np.flatnonzero(ep.success)[0])
    assert first < ep.length - 1 and not ep.terminated.any()       # the env did not end the episode on success
    assert not ep.success[-1] and ep.success[first:].sum() >= 3     # backed out: near-miss negatives at the end
    # and a recording made past success replays exactly on the twin
    rc = replay_episodes(out, tolerance=1e-6, out=io.StringIO(), err=io.StringIO())
    assert rc == EXIT_OK


def test_cameras_records_the_side_camera_beside_the_policys(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """--cameras front,wrist,side: the label episodes hold the twin's side camera too (a classifier may read it beside
    a pixel policy's cameras), and the front and wrist frames are the ones a default recording holds."""
    eps = {}
    for name, extra in (("default", []), ("side", ["--cameras", "front,wrist,side"])):
        record(["--task", "twin-pick-cube", "--out", str(tmp_path / name), "--frames", "30", "--image-size", "32",
                "--seed", "5", *extra], capsys)
        eps[name] = load_dir(tmp_path / name)[0][0]
    default, side = eps["default"], eps["side"]
    assert sorted(k for k in side.observations if k.startswith("images/")) == [
        "images/front", "images/side", "images/wrist"]
    assert "images/side" not in default.observations
    assert side.observations["images/side"].shape == (side.length + 1, 32, 32, 3)
    assert side.observations["images/side"].std() > 0
    for cam in ("images/front", "images/wrist"):
        np.testing.assert_array_equal(side.observations[cam], default.observations[cam])
    np.testing.assert_array_equal(side.success, default.success)
    for bad in ("front,,front", " , "):
        with pytest.raises(ConfigError, match="--cameras"):
            labels_main(["--task", "twin-pick-cube", "--out", str(tmp_path / "x"), "--cameras", bad])
    with pytest.raises(ConfigError, match="--cameras"):
        labels_main(["--task", "twin-pick-cube", "--out", str(tmp_path / "x"), "--obs-mode", "state",
                     "--cameras", "front"])
    with pytest.raises(ConfigError, match="'top'"):
        labels_main(["--task", "twin-pick-cube", "--out", str(tmp_path / "x"), "--cameras", "front,top"])
    assert not (tmp_path / "x").exists()


def test_labels_cli_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--frames"):
        labels_main(["--task", "twin-reach", "--out", str(tmp_path), "--frames", "0"])
    with pytest.raises(UnknownTaskError, match="twin-reach"):
        labels_main(["--task", "twin-rech", "--out", str(tmp_path)])
    with pytest.raises(ConfigError):
        make_labeler("auto")
    with pytest.raises(ConfigError):
        BackOutAfterSuccess(-1)
    with pytest.raises(ConfigError, match="--back-out-slowdown=0"):
        BackOutAfterSuccess(3, slowdown=0)
    with pytest.raises(ConfigError, match="--back-out-slowdown=0"):
        labels_main(["--task", "twin-reach", "--out", str(tmp_path), "--back-out-slowdown", "0"])
    with pytest.raises(ConfigError, match="only the scripted device backs out"):
        labels_main(["--task", "twin-reach", "--out", str(tmp_path), "--teleop", "keyboard",
                     "--back-out-slowdown", "2"])


# ------------------------------------------------------------------------------------------- pure parts
def test_event_labeler_toggles_on_success_and_off_on_failure() -> None:
    lab = EventLabeler()
    seq = [frozenset(), frozenset({"success"}), frozenset(), frozenset({"success"}), frozenset(),
           frozenset({"success"}), frozenset(), frozenset({"failure"}), frozenset(), frozenset({"failure"})]
    assert [lab.update(e, task_success=True) for e in seq] == [False, True, True, False, False, True, True, False,
                                                               False, False]
    lab.update(frozenset({"success"}), False)
    lab.reset()
    assert lab.update(frozenset(), True) is False
    info = InfoLabeler()
    assert [info.update(frozenset({"success"}), s) for s in (False, True, False)] == [False, True, False]


def test_back_out_reverses_the_path_after_holding() -> None:
    drv = BackOutAfterSuccess(hold_steps=2)
    a = [np.full(7, v, np.float32) for v in (0.1, 0.2, 0.3, 0.4)]
    for act, label in zip(a, (False, True, False, True), strict=True):
        assert drv.action(act) is act
        drv.observe(act, label)
    assert not drv.backing_out                         # the success run was broken
    drv.action(a[0])
    drv.observe(np.full(7, 0.5, np.float32), True)     # second success in a row: back out
    assert drv.backing_out
    outs = [drv.action(np.ones(7, np.float32)) for _ in range(7)]
    np.testing.assert_allclose([o[0] for o in outs], [-0.5, -0.4, -0.3, -0.2, -0.1, 0.0, 0.0])
    assert all(o[6] == 0.0 for o in outs)               # gripper: keep
    drv.reset()
    assert not drv.backing_out and drv.history == []


def test_back_out_slowdown_splits_each_step_of_the_way_back() -> None:
    drv = BackOutAfterSuccess(hold_steps=2, slowdown=3)
    for v in (0.3, 0.6):
        act = np.full(7, v, np.float32)
        drv.observe(drv.action(act), True)
    assert drv.backing_out
    outs = np.array([drv.action(np.ones(7, np.float32)) for _ in range(8)])
    np.testing.assert_allclose(outs[:, 0], [-0.2, -0.2, -0.2, -0.1, -0.1, -0.1, 0.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(outs[:, :6].sum(axis=0), np.full(6, -0.9), atol=1e-6)  # the whole way back
    assert np.all(outs[:, 6] == 0.0)


def test_slow_back_out_records_more_frames_across_the_success_boundary(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The same pick-cube segment (same seed) backed out 3x slower: the same lift, about 3x as many frames on the
    way back down through the success condition (positives after the hold, and the segment longer)."""
    back: dict[int, tuple[int, int]] = {}
    for slowdown in (1, 3):
        out = tmp_path / f"s{slowdown}"
        record(["--task", "twin-pick-cube", "--obs-mode", "state", "--out", str(out), "--frames", "400",
                "--positives", "1", "--hold-steps", "3", "--near-misses", "0", "--back-out-slowdown", str(slowdown)],
               capsys)
        (ep,) = load_dir(out)[0]
        first = int(np.flatnonzero(ep.success)[0])
        back[slowdown] = (int(ep.success[first + 3:].sum()), ep.length)  # positives after the 3 held ones
    assert back[1][0] >= 1, back
    assert back[3][0] >= 2 * back[1][0] and back[3][1] > back[1][1], back


def test_lift_cm_records_positives_at_the_heights_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--lift-cm 25 30: the scripted pick-cube expert lifts the cube 25-30 cm above its grasp, so the held positives
    reach far higher than the default 12 cm lift's (TCP height, state[2], relative to the reset pose)."""
    top: dict[str, float] = {}
    for name, extra in (("default", []), ("high", ["--lift-cm", "25", "30"])):
        out = tmp_path / name
        record(["--task", "twin-pick-cube", "--obs-mode", "state", "--out", str(out), "--frames", "400",
                "--positives", "1", "--hold-steps", "30", "--near-misses", "0", *extra], capsys)
        (ep,) = load_dir(out)[0]
        z = ep.observations["state"][1:, 2][ep.success]  # success[t] labels observation t+1
        top[name] = float(z.max())
    assert top["high"] - top["default"] > 0.10, top  # the grasp is at the same place: 25-30 cm against 12 cm


def test_lift_cm_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="0 < LO <= HI <= 40"):
        labels_main(["--task", "twin-pick-cube", "--out", str(tmp_path), "--lift-cm", "30", "12"])
    with pytest.raises(ConfigError, match="only the scripted device lifts"):
        labels_main(["--task", "twin-pick-cube", "--out", str(tmp_path), "--teleop", "keyboard", "--lift-cm", "12",
                     "20"])
    with pytest.raises(ConfigError, match="only the scripted pick-cube expert"):
        labels_main(["--task", "twin-reach", "--out", str(tmp_path), "--lift-cm", "12", "20"])
    with pytest.raises(ValueError, match="lift_m"):
        ScriptedTeleop("twin-pick-cube", lift_m=(0.2, 0.1))
    assert not list(tmp_path.iterdir())  # nothing recorded


# ------------------------------------------------------------------------------------------- event devices
class KeyScript:
    """The scripted expert driving, plus scripted key presses: events[i] is reported on poll i."""

    name = "keyscript"

    def __init__(self, events: dict[int, str]) -> None:
        self.inner = ScriptedTeleop("twin-reach")
        self.events = events
        self.polls = 0

    def reset(self) -> None:
        self.inner.reset()
        self.polls = 0

    def poll(self, state: Any) -> HumanCommand:
        cmd = self.inner.poll(state)
        ev = self.events.get(self.polls)
        self.polls += 1
        return HumanCommand(cmd.delta_ee, cmd.gripper, active=True, events=frozenset({ev} if ev else ()))

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def reach_env() -> Any:
    env, task_success = make_continuing_env("twin-reach", obs_mode="state")
    yield env, task_success
    env.close()


def test_event_labels_follow_the_key_not_the_task(reach_env: Any) -> None:
    env, task_success = reach_env
    dev = KeyScript({3: "success", 7: "success", 9: "quit"})
    seg = record_segment(env, dev, EventLabeler(), task_success, seed=0, limits=SegmentLimits(after_success=50),
                         task="twin-reach", info={"labels": "events"})
    assert seg.reason == "quit" and seg.episode is not None
    assert seg.episode.length == 9                      # "quit" on poll 9 ends before stepping
    np.testing.assert_array_equal(np.flatnonzero(seg.episode.success), [3, 4, 5, 6])
    assert (seg.positives, seg.negatives) == (4, 5)


def test_event_segment_ends_after_success_and_rerecord_discards(reach_env: Any) -> None:
    env, task_success = reach_env
    seg = record_segment(env, KeyScript({2: "success", 4: "failure"}), EventLabeler(), task_success, seed=1,
                         limits=SegmentLimits(after_success=3))
    assert seg.reason == "after-success" and seg.episode is not None
    np.testing.assert_array_equal(seg.episode.success, [0, 0, 1, 1, 0, 0, 0])
    seg = record_segment(env, KeyScript({5: "rerecord"}), EventLabeler(), task_success, seed=1,
                         limits=SegmentLimits())
    assert seg.reason == "rerecord" and seg.episode is None
    seg = record_segment(env, KeyScript({}), EventLabeler(), task_success, seed=1,
                         limits=SegmentLimits(max_frames=6))
    assert seg.reason == "frames" and seg.episode is not None and seg.episode.length == 6


def test_continuing_env_does_not_end_on_success(reach_env: Any) -> None:
    env, task_success = reach_env
    dev = ScriptedTeleop("twin-reach")
    env.reset(seed=2)
    dev.reset()
    successes = []
    for _ in range(30):
        _, reward, terminated, _truncated, info = env.step(dev.poll(env.unwrapped.last_state).action())
        assert not terminated                           # success does not end the episode
        assert reward == (1.0 if info["success"] else 0.0)
        successes.append(task_success(env.unwrapped.last_state, info))
    assert sum(successes) >= 5                          # the expert got there and stayed; the env kept going


def test_label_episodes_in_the_output_dir_append(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "l"
    record(["--task", "twin-reach", "--out", str(out), "--frames", "10", "--obs-mode", "state"], capsys)
    n = len(episode_paths(out))
    record(["--task", "twin-reach", "--out", str(out), "--frames", "10", "--obs-mode", "state", "--seed", "5"],
           capsys)
    assert len(episode_paths(out)) > n


def test_live_counts_rewrite_one_line_on_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    live = LiveCounts(stream)
    live.step(1, 2)
    live.step(2, 2)
    assert stream.getvalue().count("\r") == 2 and "success 2  failure 2" in stream.getvalue()
    assert "\n" not in stream.getvalue()
