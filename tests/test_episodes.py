"""Episode files: round trip, numpy-only readability, atomic append, corrupt files named and skipped."""

from __future__ import annotations

import json

import numpy as np
import pytest

from robot_rl.episodes import Episode, load_dir, load_episode, save_episode
from robot_rl.errors import EpisodeFileError, ShapeError


def _episode(t: int = 5, seed: int = 0) -> Episode:
    rng = np.random.default_rng(seed)
    obs = [{"state": rng.standard_normal(19).astype(np.float32),
            "images": {"front": rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)}} for _ in range(t + 1)]
    last = [False] * (t - 1) + [True]
    return Episode.from_steps(obs, rng.uniform(-1, 1, (t, 7)), np.arange(t, dtype=float), last, [False] * t,
                              intervention=[i % 2 == 0 for i in range(t)], success=last, task="twin-reach",
                              info={"seed": seed})


def test_round_trip_preserves_everything(tmp_path) -> None:
    ep = _episode()
    path = save_episode(ep, tmp_path)
    back = load_episode(path)
    assert back.task == "twin-reach" and back.info == {"seed": 0} and back.length == 5 and back.is_success
    for k, v in ep.observations.items():
        np.testing.assert_array_equal(back.observations[k], v)
        assert back.observations[k].dtype == v.dtype
    assert back.observations["images/front"].dtype == np.uint8
    np.testing.assert_array_equal(back.actions, ep.actions)
    np.testing.assert_array_equal(back.intervention, [True, False, True, False, True])
    np.testing.assert_array_equal(back.observation(5)["images"]["front"], ep.observations["images/front"][5])


def test_readable_with_numpy_alone(tmp_path) -> None:
    path = save_episode(_episode(), tmp_path)
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta_json"]))
        assert meta["format"] == "robot-rl-episode" and meta["version"] == 1
        assert z["obs/images/front"].shape == (6, 8, 8, 3) and z["actions"].shape == (5, 7)


def test_append_numbers_files_and_leaves_no_temp(tmp_path) -> None:
    paths = [save_episode(_episode(seed=i), tmp_path) for i in range(3)]
    assert [p.name for p in paths] == ["episode_000000.npz", "episode_000001.npz", "episode_000002.npz"]
    assert not list(tmp_path.glob(".*tmp"))


def test_corrupt_and_truncated_files_are_named_and_others_load(tmp_path) -> None:
    for i in range(3):
        save_episode(_episode(seed=i), tmp_path)
    good = (tmp_path / "episode_000001.npz").read_bytes()
    (tmp_path / "episode_000001.npz").write_bytes(good[: len(good) // 2])   # truncated
    (tmp_path / "episode_000002.npz").write_bytes(b"garbage")                # corrupt
    eps, errors = load_dir(tmp_path)
    assert len(eps) == 1 and eps[0].info["seed"] == 0
    assert sorted(str(e).split(":")[0].rsplit("/", 1)[-1] for e in errors) == ["episode_000001.npz",
                                                                               "episode_000002.npz"]
    with pytest.raises(EpisodeFileError, match=r"episode_000002\.npz"):
        load_episode(tmp_path / "episode_000002.npz")


def test_wrong_version_and_inconsistent_shapes(tmp_path) -> None:
    from robot_rl.episodes import episode_to_arrays

    arrays = episode_to_arrays(_episode())
    arrays["meta_json"] = np.array(json.dumps({"format": "robot-rl-episode", "version": 99}))
    np.savez(tmp_path / "episode_000000.npz", **arrays)
    with pytest.raises(EpisodeFileError, match="version 99"):
        load_episode(tmp_path / "episode_000000.npz")
    with pytest.raises(ShapeError):
        Episode.from_steps([{"s": np.zeros(2)}] * 3, np.zeros((3, 7)), [0] * 3, [0] * 3, [0] * 3)


@pytest.mark.parametrize("field,row", [("actions", 3), ("rewards", 0), ("obs/state", 5)])
def test_non_finite_values_are_refused_naming_file_field_and_row(tmp_path, field: str, row: int) -> None:
    """A NaN anywhere in a float array (a demo's action, a reward, an observation) makes the file unreadable,
    with the file, the field and the first bad row in the message; load_dir skips it and loads the rest."""
    from robot_rl.episodes import episode_to_arrays

    save_episode(_episode(seed=0), tmp_path)
    arrays = episode_to_arrays(_episode(seed=1))
    bad = arrays[field].copy()
    bad[(row,) + (0,) * (bad.ndim - 1)] = np.nan if field != "rewards" else np.inf
    arrays[field] = bad
    np.savez(tmp_path / "episode_000001.npz", **arrays)
    with pytest.raises(EpisodeFileError, match=rf"episode_000001\.npz: field '{field}' .*non-finite.* row {row}$"):
        load_episode(tmp_path / "episode_000001.npz")
    eps, errors = load_dir(tmp_path)
    assert [e.info["seed"] for e in eps] == [0] and len(errors) == 1 and f"'{field}'" in str(errors[0])


def test_train_refuses_demos_whose_only_episode_has_nan_actions(tmp_path, capsys) -> None:
    """`robot-rl train --demos` used to load NaN demo actions without complaint: now the file is skipped with a
    warning naming it and the field, and a demo directory with no usable episode is a one-line error."""
    from learners.training.config import TrainConfig
    from learners.training.train import build_run
    from robot_rl.episodes import episode_to_arrays
    from robot_rl.errors import ConfigError

    arrays = episode_to_arrays(_episode())
    arrays["actions"] = arrays["actions"].copy()
    arrays["actions"][2, 0] = np.nan
    demos = tmp_path / "demos"
    demos.mkdir()
    np.savez(demos / "episode_000000.npz", **arrays)
    cfg = TrainConfig(task="twin-reach", obs_mode="state", demos=str(demos), device="cpu")
    with pytest.raises(ConfigError, match="no readable episodes"):
        build_run(cfg)
    err = capsys.readouterr().err
    assert "episode_000000.npz: field 'actions'" in err and "row 2" in err
