"""Scripted pick-cube and cube-relocate near misses (envs.twin.near_miss) and their use by `robot-rl record-labels
--teleop scripted`."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
pytest.importorskip("mujoco")

from demos.recording import labels as labels_lib
from envs.env import make_twin_env
from envs.tasks import CUBE_HALF_SIZE_M, TASKS, CubeRelocateTask, in_zone
from envs.twin.near_miss import NEAR_MISS_KINDS, RELOCATE_NEAR_MISS_KINDS, NearMissOperator, near_miss_kinds
from robot_rl.episodes import load_dir
from robot_rl.errors import ConfigError


def labels_main(argv: list[str]) -> int:
    """`robot-rl record-labels ARGV` through its library (errors raise, typed)."""
    return labels_lib.record_labels(labels_lib.parse_record_labels_args(argv))


def _run(kind: str, seed: int) -> dict[str, float]:
    env = make_twin_env("pick_cube", obs_mode="state", terminate_on_success=False)
    try:
        op = NearMissOperator(kind, seed=seed)
        env.reset(seed=500 + seed)
        op.reset()
        assert env.last_state is not None
        cube0 = np.array(env.last_state.objects["cube_pos"])
        out = {"steps": 0, "success": 0, "cube_zmax": 0.0, "tcp_zmax_late": 0.0}
        while not op.done:
            _, _, _, truncated, info = env.step(op.poll(env.last_state).action())
            out["steps"] += 1
            out["success"] += int(info["success"])
            out["cube_zmax"] = max(out["cube_zmax"], float(env.last_state.objects["cube_pos"][2]))
            if op.expert.phase in ("hold", "end"):
                out["tcp_zmax_late"] = max(out["tcp_zmax_late"], float(env.last_state.pos_base_ee[2]))
            assert not truncated, f"{kind} seed {seed} did not finish within the episode"
        cube1 = np.array(env.last_state.objects["cube_pos"])
        out.update(moved=float(np.linalg.norm((cube1 - cube0)[:2])), cube_z_end=float(cube1[2]),
                   width_end=float(env.last_state.gripper_width_m))
        return out
    finally:
        env.close()


@pytest.mark.parametrize("seed", [0, 1])
def test_near_misses_look_like_their_description_and_never_succeed(seed: int) -> None:
    lift = _run("lift-drop", seed)
    assert lift["success"] == 0 and 0.01 <= lift["cube_zmax"] - CUBE_HALF_SIZE_M <= 0.03
    assert abs(lift["cube_z_end"] - CUBE_HALF_SIZE_M) < 0.005            # dropped back onto the table
    beside = _run("grip-beside", seed)
    assert beside["success"] == 0 and beside["width_end"] < 0.005          # closed on nothing
    assert beside["tcp_zmax_late"] > 0.10 and beside["moved"] < 0.005      # lifted empty; the cube untouched
    push = _run("push", seed)
    assert push["success"] == 0 and push["moved"] > 0.03 and push["cube_zmax"] < CUBE_HALF_SIZE_M + 0.01


def test_record_labels_alternates_expert_and_near_miss_segments(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "labels"
    assert labels_main(["--task", "twin-pick-cube", "--out", str(out), "--frames", "280", "--obs-mode",
                        "state"]) == 0
    eps, errors = load_dir(out)
    assert not errors and len(eps) >= 6
    kinds = [ep.info["segment"] for ep in eps]
    assert kinds[:6] == ["expert", "near-miss:lift-drop", "expert", "near-miss:grip-beside", "expert",
                         "near-miss:push"]
    for ep in eps:
        if ep.info["segment"] == "expert" and ep.length > 40:
            assert ep.success.any()
        elif ep.info["segment"] != "expert":
            assert not ep.success.any() and ep.info["teleop"] == ep.info["segment"]
    assert "device-done" in capsys.readouterr().out
    # off on request, refused where no routine exists
    assert labels_lib.near_miss_count(0, "scripted", "twin-pick-cube") == 0
    assert labels_lib.near_miss_count(None, "scripted", "twin-reach") == 0
    with pytest.raises(ConfigError, match="only for pick-cube"):
        labels_lib.near_miss_count(1, "scripted", "twin-reach")


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ConfigError, match="near-miss kind"):
        NearMissOperator("wobble")
    assert set(NEAR_MISS_KINDS) == {"lift-drop", "grip-beside", "push"}
    with pytest.raises(ConfigError, match="near-miss kind 'push' for task 'cube_relocate'"):
        NearMissOperator("push", task="cube_relocate")
    with pytest.raises(ConfigError, match="near-miss kind 'hold-over' for task 'pick_cube'"):
        NearMissOperator("hold-over")
    with pytest.raises(ConfigError, match="no scripted near misses for task 'reach'"):
        NearMissOperator("push", task="reach")
    assert near_miss_kinds("twin-cube-relocate-back") == RELOCATE_NEAR_MISS_KINDS == (
        "place-outside", "empty-visit", "hold-over")
    assert near_miss_kinds("twin-pick-cube") == NEAR_MISS_KINDS and near_miss_kinds("peg_insert") == ()


# ----------------------------------------------------------------------------------------------------------
# cube-relocate


def _distance_outside_m(xy: np.ndarray, zone: tuple[tuple[float, float], tuple[float, float]]) -> float:
    """How far `xy` lies beyond the zone's nearest edge (m; negative inside)."""
    (x0, y0), (x1, y1) = zone
    return float(max(x0 - xy[0], xy[0] - x1, y0 - xy[1], xy[1] - y1))


@pytest.mark.parametrize("task", ["cube_relocate", "cube_relocate_back"])
def test_relocate_near_misses_do_what_they_say_and_never_succeed(task: str) -> None:
    spec = TASKS[task]
    assert isinstance(spec, CubeRelocateTask)
    env = make_twin_env(task, obs_mode="state", terminate_on_success=False)
    try:
        for kind in RELOCATE_NEAR_MISS_KINDS:
            for seed in range(3):
                op = NearMissOperator(kind, seed=seed, task=task)
                env.reset(seed=700 + seed)
                op.reset()
                zone = op.expert.zone
                state = env.last_state
                assert state is not None
                cube0 = np.array(state.objects["cube_pos"])
                assert not in_zone(cube0[:2], zone)
                steps, cube_zmax, tcp_low_over_zone, opened_low_over_zone = 0, 0.0, 1.0, False
                while not op.done:
                    _, _, _, truncated, info = env.step(op.poll(state).action())
                    state = env.last_state
                    steps += 1
                    assert not info["success"] and not spec.success(state), f"{kind} seed {seed} succeeded"
                    assert not truncated, f"{kind} seed {seed} did not finish within the episode"
                    cube_zmax = max(cube_zmax, float(state.objects["cube_pos"][2]))
                    if in_zone(state.pos_base_ee[:2], zone):
                        tcp_low_over_zone = min(tcp_low_over_zone, float(state.pos_base_ee[2]))
                        opened_low_over_zone |= state.pos_base_ee[2] < 0.04 and state.gripper_width_m > 0.07
                assert steps < op.expert.max_steps, f"{kind} seed {seed} ended by the max_steps guard"
                cube = np.array(state.objects["cube_pos"])
                out_m = _distance_outside_m(cube[:2], zone)
                if kind == "place-outside":  # carried, put down just outside the zone, let go
                    assert cube_zmax > CUBE_HALF_SIZE_M + 0.04
                    assert 0.01 < out_m < 0.06 and cube[2] <= spec.rest_max_z_m
                    assert state.gripper_width_m >= spec.released_width_m
                elif kind == "empty-visit":  # the hand down at a release over the zone, opened; the cube untouched
                    assert tcp_low_over_zone < 0.03 and opened_low_over_zone
                    assert np.linalg.norm(cube - cube0) < 0.005 and out_m > 0.05
                else:  # hold-over: the cube over the zone, lifted, still in the closed hand
                    assert out_m < 0 and cube[2] - CUBE_HALF_SIZE_M > 0.015
                    assert state.gripper_width_m < spec.released_width_m
                    assert np.linalg.norm(cube - state.pos_base_ee) < 0.04
    finally:
        env.close()


def test_record_labels_on_relocate_writes_all_negative_near_miss_segments(tmp_path: Path) -> None:
    out = tmp_path / "labels"
    assert labels_lib.near_miss_count(None, "scripted", "twin-cube-relocate") == 1
    assert labels_lib.near_miss_count(None, "keyboard", "twin-cube-relocate") == 0
    assert labels_main(["--task", "twin-cube-relocate-back", "--out", str(out), "--frames", "230",
                        "--obs-mode", "state", "--near-misses", "3"]) == 0
    eps, errors = load_dir(out)
    assert not errors and len(eps) >= 4
    kinds = [ep.info["segment"] for ep in eps]
    assert kinds[:4] == ["expert", "near-miss:place-outside", "near-miss:empty-visit", "near-miss:hold-over"]
    assert eps[0].success.any()
    for ep in eps[1:4]:
        assert ep.length > 20 and not ep.success.any() and ep.info["teleop"] == ep.info["segment"]
        assert ep.info["positives"] == 0 and ep.info["negatives"] == ep.length
