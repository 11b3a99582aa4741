"""`robot-rl audit-labels`: a real RewardAudit (a saved classifier through ClassifierReward) -> verdicts (a file, or
the twin's true success) -> label episodes that load_labels reads back pixel for pixel, and train-classifier
retrains on old labels + audit labels; every refusal is one line on stderr; the dependency-free PNG reader."""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from learners.rewards.audit import ACTION_DIM
from learners.rewards.audit_log import AUDIT_PNG_PAD, RewardAudit, RewardDecision
from learners.rewards.classifier import CARD_FILE, load_classifier
from learners.rewards.labels import load_labels
from learners.rewards.reward_model import ClassifierReward, default_predicate
from learners.rewards.training import gate_table
from robot_rl.cli import main as cli
from robot_rl.episodes import load_episode
from robot_rl.errors import ShapeError
from robot_rl.images import decode_png, encode_png
from tests.test_reward_classifier import constant_classifier, write_labels

SIZE = 16
CARD_CAMS = ("images/front", "images/wrist")
EPISODES = 5
STEPS = 4  # positive frames per episode; the gate (k=2 + predicate state[0]>=0.5) rewards the last one


def _make_audit(directory: Path, cls_dir: Path, seed: int, extra_camera: bool = True) -> dict[tuple[int, int], Any]:
    """Run the real ClassifierReward (always positive) with a RewardAudit over EPISODES episodes of STEPS steps;
    returns {(episode, step): {"frames": {camera: uint8 frame}, "true": true success, "rewarded": bool}}."""
    rng = np.random.default_rng(seed)
    audit = RewardAudit(directory)
    model = ClassifierReward(load_classifier(cls_dir), audit=audit)
    logged = {}
    for ep in range(EPISODES):
        model.reset()
        for t in range(1, STEPS + 1):
            cams = {"front": rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8),
                    "wrist": rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8)}
            if extra_camera:  # a camera the card does not use: in the PNG, not in the labels
                cams["side"] = rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8)
            state = np.zeros(19, np.float32)
            state[0] = 1.0 if t == STEPS else 0.0
            true = t == STEPS and ep % 2 == 0  # odd episodes: the classifier's reward is a false positive
            d = model.step({"images": cams, "state": state}, {"success": true}, episode=ep, t=t)
            assert d.positive
            logged[(ep, t)] = {"frames": {f"images/{k}": v for k, v in cams.items()}, "true": true,
                               "rewarded": d.success}
    audit.close()
    return logged


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("audit")
    cls_dir = constant_classifier(root / "cls", prob=0.9, size=SIZE, k=2, predicate=("state[0]>=0.5",),
                                  cameras=CARD_CAMS)
    logged = _make_audit(root / "audit", cls_dir, seed=0)
    return {"root": root, "cls": cls_dir, "audit": root / "audit", "logged": logged}


def _rows(audit: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (audit / "positives.jsonl").read_text().splitlines()]


def _run(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    rc = cli(["audit-labels", *map(str, argv)])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _check_frames(out: Path, logged: dict[tuple[int, int], Any], expected: dict[tuple[int, int], bool]) -> None:
    """load_labels(out) gives exactly the logged frames of `expected` (per camera, in episode and step order) with
    the expected labels."""
    data = load_labels([out], require_both_classes=False)
    keys = sorted(expected)
    assert data.cameras == list(CARD_CAMS) and len(data) == len(keys)
    assert data.state is None  # the audit keeps pixels only
    for i, key in enumerate(keys):
        for cam in CARD_CAMS:
            assert np.array_equal(data.images[cam][i], logged[key]["frames"][cam]), (key, cam)
    assert data.labels.tolist() == [expected[k] for k in keys]
    assert {e.label_source for e in data.episodes} == {"audit"}


def test_audit_rows_name_the_cameras_of_their_png(setup: dict[str, Any]) -> None:
    rows = _rows(setup["audit"])
    assert len(rows) == EPISODES * STEPS
    assert all(r["cameras"] == ["images/front", "images/side", "images/wrist"] for r in rows)
    assert [r["rewarded"] for r in rows[:STEPS]] == [False] * (STEPS - 1) + [True]


def _frames(value: int) -> dict[str, Any]:
    return {"images": {c: np.full((SIZE, SIZE, 3), value, np.uint8) for c in ("front", "wrist")}}


def test_the_audit_logs_the_lead_frames_before_each_positive(tmp_path: Path) -> None:
    """Negative frames are kept in memory and written only before a positive of the same episode: the last
    `lead_frames` of them since the previous positive, each with its own pixels and truth."""
    audit = RewardAudit(tmp_path / "a", lead_frames=2)
    neg, pos = RewardDecision(0.0, False, 0.2), RewardDecision(0.0, False, 0.9, positive=True, run=1)
    # episode 0: negatives at 1..4, positive 5, negative 6, positive 7; episode 1: a negative; episode 2: a positive
    script = [(0, 1, neg), (0, 2, neg), (0, 3, neg), (0, 4, neg), (0, 5, pos), (0, 6, neg), (0, 7, pos),
              (1, 1, neg), (2, 1, pos)]
    for ep, t, d in script:
        (audit.log if d.positive else audit.remember)(ep, t, d, _frames(10 * ep + t), {"success": t >= 4})
    audit.close()
    rows = _rows(tmp_path / "a")
    assert [(r["episode"], r["step"], r["positive"]) for r in rows] == [
        (0, 3, False), (0, 4, False), (0, 5, True), (0, 6, False), (0, 7, True), (2, 1, True)]
    assert [r["true_success"] for r in rows] == [False, True, True, True, True, False]
    png = decode_png((tmp_path / "a" / rows[1]["image"]).read_bytes())
    assert png[AUDIT_PNG_PAD, AUDIT_PNG_PAD].tolist() == [4, 4, 4]  # the lead frame's own pixels, copied
    off = RewardAudit(tmp_path / "b", lead_frames=0)
    for ep, t, d in script:
        (off.log if d.positive else off.remember)(ep, t, d, _frames(t), {})
    off.close()
    assert [r["positive"] for r in _rows(tmp_path / "b")] == [True, True, True]


def test_lead_frames_that_show_success_become_hard_positives(setup: dict[str, Any], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    # a classifier that fires at step 3 while the truth holds from step 2: the step-2 lead frame is a missed success
    audit = RewardAudit(tmp_path / "audit")
    model = ClassifierReward(load_classifier(setup["cls"]), audit=audit, threshold=0.5)
    rng = np.random.default_rng(7)
    logged = {}
    for t in range(1, 5):
        cams = {c: rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8) for c in ("front", "wrist")}
        logged[(0, t)] = {"frames": {f"images/{k}": v for k, v in cams.items()}}
        model.threshold = 0.5 if t >= 3 else 0.95  # the constant classifier's 0.9: negative, then positive
        model.step({"images": cams, "state": np.ones(19, np.float32)}, {"success": t >= 2}, episode=0, t=t)
    audit.close()
    rc, stdout, err = _run(capsys, "--audit", tmp_path / "audit", "--classifier", setup["cls"], "--out",
                           tmp_path / "o", "--true-success")
    assert rc == 0, err
    assert "success 3, failure 1" in stdout and "called 2 negative (lead frames before a positive)" in stdout
    _check_frames(tmp_path / "o", logged, {(0, 1): False, (0, 2): True, (0, 3): True, (0, 4): True})
    assert load_episode(tmp_path / "o" / "episode_000000.npz").info["positive"] == [False, False, True, True]


def test_verdicts_file_round_trips_the_logged_frames(setup: dict[str, Any], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    logged = setup["logged"]
    # a person's verdicts for some frames: comments, blank lines, comma or whitespace separated, a repeat
    chosen = {(0, 4): True, (1, 4): False, (1, 2): False, (3, 1): True, (3, 4): False, (4, 3): False}
    lines = ["# my verdicts", ""]
    for (ep, t), ok in chosen.items():
        sep = ", " if ep % 2 else "\t"
        lines.append(f"frames/ep{ep:06d}_t{t:04d}.png{sep}{'success' if ok else 'failure'}  # looked at it")
    lines.append("frames/ep000001_t0004.png failure")
    (tmp_path / "v.txt").write_text("\n".join(lines) + "\n")
    out = tmp_path / "labels"
    rc, stdout, err = _run(capsys, "--audit", setup["audit"], "--classifier", setup["cls"], "--out", out,
                           "--verdicts", tmp_path / "v.txt")
    assert rc == 0, err
    assert "wrote 6 frames in 4 episode(s)" in stdout and "success 2, failure 4" in stdout
    assert "the classifier had rewarded 3 of them" in stdout
    _check_frames(out, logged, chosen)
    ep = load_episode(out / "episode_000001.npz")  # audit episode 1: steps 2 and 4
    assert ep.info["steps"] == [2, 4] and ep.info["audit_episode"] == 1 and ep.info["source"] == str(setup["audit"])
    assert ep.info["labels"] == "audit" and ep.info["privileged"] is False and ep.task == "twin-pick-cube"
    assert "images/side" not in ep.observations and "state" not in ep.observations
    assert np.array_equal(ep.observations["images/front"][0], ep.observations["images/front"][1])  # row 0: a copy
    assert ep.actions.shape == (2, ACTION_DIM) and not ep.actions.any() and ep.rewards.tolist() == [0.0, 0.0]


def test_true_success_and_only_rewarded(setup: dict[str, Any], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    logged = setup["logged"]
    rc, stdout, err = _run(capsys, "--audit", setup["audit"], "--classifier", setup["cls"], "--out",
                           tmp_path / "all", "--true-success")
    assert rc == 0, err
    assert "privileged" in stdout and f"wrote {EPISODES * STEPS} frames in {EPISODES} episode(s)" in stdout
    _check_frames(tmp_path / "all", logged, {k: v["true"] for k, v in logged.items()})
    assert load_episode(tmp_path / "all" / "episode_000000.npz").info["privileged"] is True

    rc, stdout, err = _run(capsys, "--audit", setup["audit"], "--classifier", setup["cls"], "--out",
                           tmp_path / "rewarded", "--true-success", "--only-rewarded")
    assert rc == 0, err
    rewarded = {k: v["true"] for k, v in logged.items() if v["rewarded"]}
    assert len(rewarded) == EPISODES and sorted(rewarded) == [(e, STEPS) for e in range(EPISODES)]
    assert "success 3, failure 2; the classifier had rewarded 5 of them" in stdout
    _check_frames(tmp_path / "rewarded", logged, rewarded)


def test_all_cameras_writes_every_camera_of_the_png(setup: dict[str, Any], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    logged = setup["logged"]
    rc, _, err = _run(capsys, "--audit", setup["audit"], "--classifier", setup["cls"], "--out", tmp_path / "all",
                      "--true-success", "--all-cameras")
    assert rc == 0, err
    # the side camera the card does not use is written too, each camera exactly the logged frame
    data = load_labels([tmp_path / "all"], require_both_classes=False)
    assert data.cameras == ["images/front", "images/side", "images/wrist"]
    keys = sorted(logged)
    for i, key in enumerate(keys):
        for cam in data.cameras:
            assert np.array_equal(data.images[cam][i], logged[key]["frames"][cam]), (key, cam)
    assert data.labels.tolist() == [logged[k]["true"] for k in keys]


def test_old_rows_without_cameras_fall_back_to_the_card(setup: dict[str, Any], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # an audit whose PNGs hold exactly the card's cameras, its rows stripped of "cameras": the card decides
    logged = _make_audit(tmp_path / "old", setup["cls"], seed=1, extra_camera=False)
    path = tmp_path / "old" / "positives.jsonl"
    rows = _rows(tmp_path / "old")
    path.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "cameras"}) + "\n" for r in rows))
    rc, _, err = _run(capsys, "--audit", tmp_path / "old", "--classifier", setup["cls"], "--out", tmp_path / "o1",
                      "--true-success")
    assert rc == 0, err
    _check_frames(tmp_path / "o1", logged, {k: v["true"] for k, v in logged.items()})
    # three cameras in the PNG, no names: which is which cannot be told
    shutil.copytree(setup["audit"], tmp_path / "three")
    rows = _rows(tmp_path / "three")
    (tmp_path / "three" / "positives.jsonl").write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k != "cameras"}) + "\n" for r in rows))
    rc, _, err = _run(capsys, "--audit", tmp_path / "three", "--classifier", setup["cls"], "--out",
                      tmp_path / "o2", "--true-success")
    assert rc == 1 and "has no 'cameras' field" in err and "line 1" in err and "Traceback" not in err


def test_two_audit_dirs_and_a_rewritten_png(setup: dict[str, Any], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    # forward/backward: two audit directories with the same PNG names; a bare name must say which directory
    fwd, bwd = tmp_path / "reward_audit" / "forward", tmp_path / "reward_audit" / "backward"
    shutil.copytree(setup["audit"], fwd)
    logged_b = _make_audit(bwd, setup["cls"], seed=2)
    v = tmp_path / "v.txt"
    v.write_text("frames/ep000000_t0001.png success\n")
    rc, _, err = _run(capsys, "--audit", fwd, bwd, "--classifier", setup["cls"], "--out", tmp_path / "o",
                      "--verdicts", v)
    assert rc == 1 and f"{v}: line 1: frames/ep000000_t0001.png is in several audit directories" in err
    v.write_text(f"{fwd}/frames/ep000000_t0001.png success\n{bwd}/frames/ep000000_t0001.png failure\n")
    rc, stdout, err = _run(capsys, "--audit", fwd, bwd, "--classifier", setup["cls"], "--out", tmp_path / "o",
                           "--verdicts", v)
    assert rc == 0, err
    assert "wrote 2 frames in 2 episode(s)" in stdout
    data = load_labels([tmp_path / "o"], require_both_classes=False)
    assert data.labels.tolist() == [True, False]
    assert np.array_equal(data.images["images/wrist"][0], setup["logged"][(0, 1)]["frames"]["images/wrist"])
    assert np.array_equal(data.images["images/wrist"][1], logged_b[(0, 1)]["frames"]["images/wrist"])
    # a run that restarted its episode counter into the same directory rewrote the PNGs: the later rows count
    logged_again = _make_audit(bwd, setup["cls"], seed=3)
    rc, stdout, err = _run(capsys, "--audit", bwd, "--classifier", setup["cls"], "--out", tmp_path / "again",
                           "--true-success")
    assert rc == 0, err
    assert f"{2 * EPISODES * STEPS} audit rows ({EPISODES * STEPS} whose PNG a later row overwrote skipped)" in stdout
    _check_frames(tmp_path / "again", logged_again, {k: x["true"] for k, x in logged_again.items()})


def test_a_sim_run_s_audit_directory_reads_every_actor_s(setup: dict[str, Any], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    # robot-rl sim writes RUN/reward_audit/actor-0, actor-1, ...: naming RUN/reward_audit reads them all, as naming
    # each one does (a directory named twice, as itself and through its parent, is read once)
    audit = tmp_path / "run" / "reward_audit"
    shutil.copytree(setup["audit"], audit / "actor-0")
    _make_audit(audit / "actor-1", setup["cls"], seed=4)
    outs = {}
    for name, dirs in {"parent": [audit], "each": [audit / "actor-0", audit / "actor-1"],
                       "twice": [audit, audit / "actor-1"]}.items():
        rc, stdout, err = _run(capsys, "--audit", *dirs, "--classifier", setup["cls"], "--out", tmp_path / name,
                               "--true-success")
        assert rc == 0, err
        assert f"wrote {2 * EPISODES * STEPS} frames in {2 * EPISODES} episode(s)" in stdout
        outs[name] = load_labels([tmp_path / name], require_both_classes=False)
    for name in ("each", "twice"):
        assert outs[name].labels.tolist() == outs["parent"].labels.tolist()
        assert np.array_equal(outs[name].images["images/front"], outs["parent"].images["images/front"])
    (tmp_path / "empty").mkdir()
    assert "no positives.jsonl" in _refusal(capsys, tmp_path / "o", "--audit", tmp_path / "empty", "--classifier",
                                            setup["cls"], "--out", tmp_path / "o", "--true-success")


def _refusal(capsys: pytest.CaptureFixture[str], out: Path, *argv: Any) -> str:
    rc, _, err = _run(capsys, *argv)
    assert rc == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("robot-rl audit-labels: error: ") and "Traceback" not in err
    assert not out.is_dir() or not list(out.glob("episode_*.npz")), "a refusal wrote episode files"
    return lines[0]


def test_refusals_are_one_line(setup: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    audit, cls_dir = setup["audit"], setup["cls"]
    out = tmp_path / "out"

    def refuse(*argv: Any, audit_dir: Path = audit, classifier: Path = cls_dir, target: Path = out) -> str:
        return _refusal(capsys, target, "--audit", audit_dir, "--classifier", classifier, "--out", target, *argv)

    (tmp_path / "empty").mkdir()
    assert "no positives.jsonl" in refuse("--true-success", audit_dir=tmp_path / "empty")
    (tmp_path / "nocard").mkdir()
    assert "no card.json" in refuse("--true-success", classifier=tmp_path / "nocard")

    def verdicts(text: str) -> Path:
        p = tmp_path / "v.txt"
        p.write_text(text)
        return p

    v = verdicts("# nothing judged yet\n\n")
    assert f"no frames selected: {EPISODES * STEPS} rows, 0 with verdicts" in refuse("--verdicts", v)
    v = verdicts("frames/ep000001_t0001.png success\n")
    assert "no frames selected: 20 rows, 1 with verdicts" in refuse("--verdicts", v, "--only-rewarded")
    v = verdicts("frames/ep000000_t0004.png success\nframes/ep000009_t0001.png failure\n")
    assert f"{v}: line 2: unknown image 'frames/ep000009_t0001.png'" in refuse("--verdicts", v)
    v = verdicts("frames/ep000000_t0004.png yes\n")
    assert f"{v}: line 1: expected '<image> success|failure'" in refuse("--verdicts", v)
    v = verdicts("frames/ep000000_t0004.png success\n\nframes/ep000000_t0004.png failure\n")
    assert f"{v}: line 3: frames/ep000000_t0004.png is failure here but success on line 1" in refuse("--verdicts", v)

    # a hardware audit: no true_success in the rows
    hw = tmp_path / "hw"
    shutil.copytree(audit, hw)
    rows = _rows(hw)
    (hw / "positives.jsonl").write_text("".join(json.dumps({k: x for k, x in r.items() if k != "true_success"})
                                                + "\n" for r in rows))
    assert "hardware audits have no true_success; write a verdicts file" in refuse("--true-success", audit_dir=hw)

    # a missing PNG, a PNG of another size: named with the row, nothing written
    broken = tmp_path / "broken"
    shutil.copytree(audit, broken)
    (broken / "frames" / "ep000002_t0003.png").unlink()
    msg = refuse("--true-success", audit_dir=broken)
    assert "positives.jsonl: line 11: its PNG" in msg and "ep000002_t0003.png is missing" in msg
    (broken / "frames" / "ep000002_t0003.png").write_bytes(encode_png(np.zeros((20, 56, 3), np.uint8)))
    msg = refuse("--true-success", audit_dir=broken)  # the right size, but frames not where the padding says
    assert "line 11: frames/ep000002_t0003.png: image does not have white 2 px padding between 16x16 frames" in msg
    (broken / "frames" / "ep000002_t0003.png").write_bytes(encode_png(np.full((24, 56, 3), 255, np.uint8)))
    msg = refuse("--true-success", audit_dir=broken)
    assert ("line 11: frames/ep000002_t0003.png: image is 24x56x3, expected 20x56x3 for 1x3 frames of 16x16 + 2 px "
            "padding (camera(s)") in msg
    assert "frames of 16x16" in msg and not out.exists()  # frames 1-10 read fine: nothing of them stays

    # --out already holds episode files
    write_labels(tmp_path / "full", 1, size=SIZE)
    rc, _, err = _run(capsys, "--audit", audit, "--classifier", cls_dir, "--out", tmp_path / "full", "--true-success")
    assert rc == 1 and err.startswith("robot-rl audit-labels: error: --out ") and "Traceback" not in err
    assert "already holds 1 episode file(s)" in err and len(list((tmp_path / "full").iterdir())) == 1


def test_train_classifier_on_record_labels_plus_audit_labels(setup: dict[str, Any], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    # OLD: record-labels-format episodes with a proprio state; NEW: audit labels (no state)
    old, new = tmp_path / "old", tmp_path / "new"
    write_labels(old, 8, size=SIZE)
    rc, _, err = _run(capsys, "--audit", setup["audit"], "--classifier", setup["cls"], "--out", new,
                      "--true-success")
    assert rc == 0, err
    data = load_labels([old, new])
    n_old = 8 * 12
    assert data.state is not None and data.state.shape == (n_old + EPISODES * STEPS, 19)
    assert np.isfinite(data.state[:n_old]).all() and np.isnan(data.state[n_old:]).all()
    # the k-gate replay holds frames with a state to the predicate and lets the audit frames (no state) through
    pred = default_predicate("twin-pick-cube")
    always = np.ones(len(data))
    audit_rows = gate_table(data, np.arange(n_old, len(data)), always[n_old:], 0.5, pred, ks=(1,))[0]
    assert audit_rows["episodes"] == EPISODES and audit_rows["fired"] == EPISODES
    old_rows = gate_table(data, np.arange(n_old), always[:n_old], 0.5, pred, ks=(1,))[0]
    # write_labels: fingers at 0.04 (predicate open) from observation 7 on, success labels on 7-10 of even episodes:
    # held back to frame 7, the gate fires right on the success there and falsely only in the 4 odd episodes
    assert old_rows["fired"] == 8 and old_rows["false_fires"] == 4 and old_rows["delay_frames_mean"] == 0.0
    rc = cli(["train-classifier", "--labels", str(old), str(new), "--out", str(tmp_path / "cls2"),
              "--conv-channels", "8,16", "--latent", "16", "--max-steps", "20", "--eval-every", "10",
              "--batch-size", "16", "--threads", "1", "--precision-confidence", "0"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err[-2000:]
    card = json.loads((tmp_path / "cls2" / CARD_FILE).read_text())
    sources = {Path(s["directory"]).name: s for s in card["label_sources"]}
    assert sources["new"]["label_sources"] == ["audit"] and sources["new"]["frames"] == EPISODES * STEPS
    assert sources["old"]["episodes"] == 8
    # the gate replay ran with the task's predicate (twin-pick-cube) on the mix
    assert card["gate"]["predicate"] and [r["k"] for r in card["metrics"]["gate_by_k_validation"]] == [1, 2, 3, 4, 5]


def test_hardware_env_success_is_flagged_and_the_audit_logs_no_true_success(tmp_path: Path) -> None:
    """The env's "success" is a placeholder False without object state (hardware): flagged, so the audit row has no
    true_success and --true-success is refused instead of labelling every frame a failure."""
    from tests.test_env_core import FakeRobot, make

    class HardwareRobot(FakeRobot):
        def state(self) -> Any:
            return dataclasses.replace(super().state(), objects={})

    twin_env, _ = make("pixels", image_size=SIZE)
    hw_env, _ = make("pixels", image_size=SIZE)
    hw_env.robot = HardwareRobot()
    audit = RewardAudit(tmp_path / "audit")
    for env in (twin_env, hw_env):
        obs, info = env.reset(seed=0)
        obs, _, _, _, info = env.step(np.zeros(7, np.float32))
        assert ("success_unknown" in info) == (env is hw_env) and "success" in info
        audit.log(0 if env is twin_env else 1, 1, RewardDecision(0.0, False, 0.9, True, 1), obs, info)
    audit.close()
    rows = _rows(tmp_path / "audit")
    assert rows[0]["true_success"] is False and "true_success" not in rows[1]
    assert rows[1]["cameras"] == ["images/front", "images/wrist"]


# ------------------------------------------------------------------------------------------ the PNG reader


def test_decode_png_reads_every_row_filter() -> None:
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (9, 11, 3), dtype=np.uint8)
    assert np.array_equal(decode_png(encode_png(img)), img)  # filter 0 (ours)
    # filter 3 (Average) by hand: 1x2 pixels, prev row zero: byte = raw + floor(left / 2)
    raw = bytes([3, 10, 20, 30, 6, 8, 10])
    header = (2).to_bytes(4, "big") + (1).to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])

    def chunk(kind: bytes, data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + kind + data + (zlib.crc32(kind + data) & 0xFFFFFFFF).to_bytes(4, "big")

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    assert decode_png(png).tolist() == [[[10, 20, 30], [11, 18, 25]]]
    with pytest.raises(ShapeError, match=r"x\.png: not a PNG file"):
        decode_png(b"GIF89a", where="x.png")
    # another writer's PNG (Sub, Up and Paeth rows): PIL, when installed
    image_mod = pytest.importorskip("PIL.Image")
    yy, xx = np.mgrid[0:30, 0:40]
    smooth = np.stack([xx * 5 % 256, yy * 7 % 256, (xx + yy) % 256], -1).astype(np.uint8)
    smooth[4:8, 3:30] = rng.integers(0, 256, (4, 27, 3), dtype=np.uint8)
    buf = io.BytesIO()
    image_mod.fromarray(smooth).save(buf, format="PNG")
    assert np.array_equal(decode_png(buf.getvalue()), smooth)
