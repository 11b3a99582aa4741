"""`cube_start="tray"` (TwinRobotConfig, make_twin_env, `robot-rl record-demos --cube-start tray`): cube-relocate
scenes whose cube starts anywhere on the tray floor outside the target zone, as a reset-free run leaves them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from demos.recording.demos import parse_record_demos_args, record_demos
from envs.env import make_twin_env
from envs.tasks import RELOCATE_ZONE_A_M, RELOCATE_ZONE_B_M, in_zone
from envs.twin.model import RELOCATE_START_XY, RELOCATE_TRAY_XY
from robot_rl.episodes import load_dir
from robot_rl.errors import ConfigError

pytest.importorskip("mujoco")


@pytest.mark.parametrize(("task", "target", "start"), [("cube_relocate", RELOCATE_ZONE_B_M, "a"),
                                                       ("cube_relocate_back", RELOCATE_ZONE_A_M, "b")])
def test_tray_starts_cover_the_tray_but_never_the_target_zone(task: str, target: object, start: str) -> None:
    from envs.twin import TwinRobot, TwinRobotConfig

    def starts(cube_start: str, n: int) -> np.ndarray:
        robot = TwinRobot(TwinRobotConfig(task=task, render=False, cube_start=cube_start))
        out = []
        for seed in range(n):
            robot.reset_scene(seed=seed)
            cube = np.asarray(robot.state().objects["cube_pos"])
            assert abs(cube[2] - 0.02) < 2e-3  # resting on the table
            out.append(cube[:2])
        robot.stop()
        return np.asarray(out)

    low, high = RELOCATE_START_XY[task]
    xys = starts("tray", 60)
    assert not any(in_zone(xy, target) for xy in xys)  # type: ignore[arg-type]
    assert np.all(xys >= RELOCATE_TRAY_XY[0] - 1e-3) and np.all(xys <= RELOCATE_TRAY_XY[1] + 1e-3)
    assert (~np.all((xys >= low) & (xys <= high), axis=1)).sum() >= 40  # most lie outside the usual start zone
    assert xys[:, 1].min() < -0.1 and xys[:, 1].max() > 0.1 and np.ptp(xys[:, 0]) > 0.1  # the whole tray
    default = starts("zone", 10)  # the default is unchanged: every start in the start zone
    assert np.all(default >= low - 1e-3) and np.all(default <= high + 1e-3)


def test_tray_is_only_for_relocate_scenes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match="cube_start"):
        make_twin_env("pick_cube", obs_mode="state", cube_start="tray")
    with pytest.raises(ConfigError, match="cube_start"):
        make_twin_env("cube_relocate", obs_mode="state", cube_start="anywhere")
    with pytest.raises(ConfigError, match="only for the in-process twin's cube-relocate tasks"):
        record_demos(parse_record_demos_args(["--task", "twin-pick-cube", "--cube-start", "tray", "--episodes", "1",
                                              "--out", str(tmp_path / "d"), "--obs-mode", "state"]))
    assert not (tmp_path / "d").exists()


def test_record_demos_from_tray_starts(tmp_path: Path) -> None:
    out = tmp_path / "fwd"
    assert record_demos(parse_record_demos_args(["--task", "twin-cube-relocate", "--obs-mode", "state", "--cube-start",
                                                 "tray", "--episodes", "3", "--out", str(out)])) == 0
    eps, _ = load_dir(out)
    assert len(eps) == 3 and all(bool(e.rewards[-1] > 0) for e in eps)  # the expert succeeds from those starts
    assert all(e.info["env_kwargs"]["cube_start"] == "tray" for e in eps)
