"""Demo scenes spread over the workspace (`record-demos --scenes spread`): the farthest-point order's properties, and
the recording it drives on the twin (its demos cover pick-cube's start area; a robot server is refused)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from demos.recording import demos as record_lib
from demos.recording.scenes import spread_order
from robot_rl.episodes import load_dir
from robot_rl.errors import ConfigError
from robot_rl.gym_env import make_task_env


def min_pairwise(points: np.ndarray) -> float:
    d = np.linalg.norm(points[:, None] - points[None], axis=-1)
    return float(d[~np.eye(len(points), dtype=bool)].min())


@settings(max_examples=50, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 40), st.integers(1, 3)),
              elements=st.floats(-1.0, 1.0, allow_nan=False)))
def test_the_order_is_a_permutation_starting_at_the_first_point(points) -> None:
    order = spread_order(points)
    assert order[0] == 0 and sorted(order) == list(range(len(points)))


@settings(max_examples=50, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(3, 40), st.just(2)), elements=st.floats(0.0, 1.0, allow_nan=False)),
       st.integers(2, 10))
def test_each_next_point_is_the_farthest_from_those_chosen(points, k) -> None:
    order = spread_order(points)
    k = min(k, len(points) - 1)
    chosen, rest = points[order[:k]], [i for i in range(len(points)) if i not in order[:k]]
    gap = lambda i: float(np.linalg.norm(chosen - points[i], axis=1).min())  # noqa: E731
    assert gap(order[k]) == pytest.approx(max(gap(i) for i in rest))


def test_a_grid_pool_gives_its_corners_first_and_twenty_points_a_cover() -> None:
    xs, ys = np.meshgrid(np.linspace(0.4, 0.6, 21), np.linspace(-0.15, 0.15, 31))
    grid = np.stack([xs.ravel(), ys.ravel()], 1)
    grid = np.roll(grid, -int(np.argmin(np.linalg.norm(grid - [0.5, 0.0], axis=1))), axis=0)  # start at the centre
    first = grid[spread_order(grid)[:20]]
    corners = {(x, y) for x in (0.4, 0.6) for y in (-0.15, 0.15)}
    assert corners <= {(round(x, 6), round(y, 6)) for x, y in first[:5]}
    # every grid point within 5.5 cm of one of the 20 (the seeded first 20 of a random pool leave far larger holes)
    assert np.linalg.norm(grid[:, None] - first[None], axis=-1).min(axis=1).max() < 0.055
    assert min_pairwise(first) > 0.04


def test_bad_points_are_refused() -> None:
    with pytest.raises(ValueError, match="shape"):
        spread_order(np.zeros((0, 2)))
    with pytest.raises(ValueError, match="shape"):
        spread_order(np.zeros(5))


def cube_xy(seeds: list[int]) -> np.ndarray:
    env = make_task_env("twin-pick-cube", obs_mode="state")
    try:
        out = []
        for s in seeds:
            env.reset(seed=s)
            out.append(env.unwrapped.robot.state().objects["cube_pos"][:2])
        return np.array(out)
    finally:
        env.close()


def test_spread_demos_cover_the_pick_cube_start_area_better_than_seeds_in_a_row(tmp_path) -> None:
    out = tmp_path / "demos"
    args = ["--task", "twin-pick-cube", "--episodes", "8", "--out", str(out), "--obs-mode", "state"]
    assert record_lib.record_demos(record_lib.parse_record_demos_args([*args, "--scenes", "spread"])) == 0
    eps, errors = load_dir(out)
    assert errors == [] and len(eps) == 8 and all(ep.is_success for ep in eps)
    seeds = [int(ep.info["seed"]) for ep in eps]
    assert seeds[0] == 0 and len(set(seeds)) == 8 and max(seeds) < 80  # from the pool of 10 per episode
    spread, in_a_row = cube_xy(seeds), cube_xy(list(range(8)))
    assert min_pairwise(spread) > 1.5 * min_pairwise(in_a_row)
    # the spread demos reach out to the start area's edges in both axes
    assert np.ptp(spread[:, 0]) > 0.17 and np.ptp(spread[:, 1]) > 0.26
    assert json.loads(json.dumps(eps[0].info))["seed"] == 0


def test_spread_scenes_are_refused_on_a_robot_server_and_named_wrong(tmp_path) -> None:
    with pytest.raises(ConfigError, match="in-process twin"):
        record_lib.record_demos(record_lib.parse_record_demos_args(
            ["--task", "twin-pick-cube", "--out", str(tmp_path), "--scenes", "spread", "--robot",
             "tcp://127.0.0.1:1"]))
    with pytest.raises(ConfigError, match="scenes"):
        record_lib.RecordDemosConfig(task="twin-pick-cube", scenes="grid")


def test_sim_records_its_pixel_runs_demos_spread_and_its_state_runs_seeded(tmp_path) -> None:
    from supervisor.sim import Sim
    from supervisor.sim_config import build_sim_parser, sim_config

    def scenes(*flags: str) -> str:
        sim = Sim(sim_config(build_sim_parser().parse_args(["--task", "twin-pick-cube", "--out", str(tmp_path / "s"),
                                                             *flags])))
        argv = sim.demos_argv(tmp_path / "demos", 20)
        return record_lib.parse_record_demos_args(argv[argv.index("record-demos") + 1:]).scenes

    assert scenes("--obs-mode", "pixels") == "spread"
    assert scenes() == "seeded"  # the state main command's default
