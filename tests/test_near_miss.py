"""Scripted pick-cube near misses (envs.near_miss) and their use by `robot-rl record-labels --teleop scripted`."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
pytest.importorskip("mujoco")

from demos import labels_cli
from envs.env import make_twin_env
from envs.near_miss import NEAR_MISS_KINDS, NearMissOperator
from envs.tasks import CUBE_HALF_SIZE_M
from robot_rl.episodes import load_dir
from robot_rl.errors import ConfigError


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
    assert labels_cli.main(["--task", "twin-pick-cube", "--out", str(out), "--frames", "280", "--obs-mode",
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
    assert labels_cli.near_miss_count(0, "scripted", "twin-pick-cube") == 0
    assert labels_cli.near_miss_count(None, "scripted", "twin-reach") == 0
    with pytest.raises(ConfigError, match="only for pick-cube"):
        labels_cli.near_miss_count(1, "scripted", "twin-reach")


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ConfigError, match="near-miss kind"):
        NearMissOperator("wobble")
    assert set(NEAR_MISS_KINDS) == {"lift-drop", "grip-beside", "push"}
