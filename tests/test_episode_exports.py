"""`robot-rl episodes export --mcap / --lerobot` and `episodes import --lerobot`: the files are read back (the bag
with rosbags' reader, the dataset with our importer, with pyarrow directly and, when installed, with lerobot)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from demos.formats.episode_tools import export_episodes
from demos.formats.rosbag import ExportError
from robot_rl import cli
from robot_rl.episodes import Episode, load_dir, save_episode

pytest.importorskip("rosbags", reason="the `export` extra is not installed (pip install 'robot-rl[export]')")
pytest.importorskip("pyarrow", reason="the `export` extra is not installed (pip install 'robot-rl[export]')")


def _episode(seed: int, T: int, end: str) -> Episode:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:32, 0:32]
    frames = []
    for t in range(T + 1):  # smooth images (what a camera sees), moving over time
        r = (128 + 100 * np.sin(xx / 6.0 + t / 3.0 + seed)).astype(np.uint8)
        g = (128 + 100 * np.cos(yy / 7.0 - t / 4.0)).astype(np.uint8)
        b = np.full((32, 32), 60 + 10 * t, np.uint8)
        frames.append(np.stack([r, g, b], axis=2))
    obs = {"state": rng.normal(size=(T + 1, 19)).astype(np.float32) * 0.1,
           "images/front": np.stack(frames)}
    rewards = np.zeros(T, np.float32)
    terminated, truncated = np.zeros(T, bool), np.zeros(T, bool)
    success = np.zeros(T, bool)
    if end == "success":
        rewards[-1], terminated[-1], success[-1] = 1.0, True, True
    else:
        truncated[-1] = True
    intervention = np.zeros(T, bool)
    intervention[1:3] = True
    return Episode(observations=obs, actions=rng.uniform(-1, 1, (T, 7)).astype(np.float32), rewards=rewards,
                   terminated=terminated, truncated=truncated, intervention=intervention, success=success,
                   task="twin-reach", spec={"task": "twin-reach", "obs": "x"},
                   info={"seed": seed, "teleop": "scripted"})


@pytest.fixture
def episodes_dir(tmp_path: Path) -> Path:
    d = tmp_path / "eps"
    save_episode(_episode(0, 6, "success"), d)
    save_episode(_episode(1, 9, "timeout"), d)
    return d


def run(*argv: str) -> tuple[int, str, str]:
    """`robot-rl episodes ARGV`: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(["episodes", *argv])
    return rc, out.getvalue(), err.getvalue()


def test_mcap_export_reads_back(episodes_dir: Path, tmp_path: Path) -> None:
    from controllers.transforms import euler_xyz_to_quat
    from demos.formats.rosbag import read_bag

    rc, _out, err = run("export", str(episodes_dir), "--mcap", str(tmp_path / "bags"), "--fps", "10")
    assert rc == 0, err
    eps, _ = load_dir(episodes_dir)
    for i, ep in enumerate(eps):
        bag = tmp_path / "bags" / f"episode_{i:06d}"
        assert (bag / "metadata.yaml").is_file()
        mcaps = list(bag.glob("*.mcap"))
        assert len(mcaps) == 1 and mcaps[0].read_bytes()[:8] == b"\x89MCAP0\r\n"
        msgs = read_bag(bag)
        images = msgs["/robot_rl/images/front"]
        assert len(images) == ep.length + 1
        for t, (_, m) in enumerate(images):
            assert m.encoding == "rgb8" and (m.height, m.width, m.step) == (32, 32, 96)
            assert np.array_equal(np.asarray(m.data).reshape(32, 32, 3), ep.observations["images/front"][t])
        actions = msgs["/robot_rl/action"]
        assert np.allclose(np.stack([np.asarray(m.data) for _, m in actions]), ep.actions)
        assert [m.data for _, m in msgs["/robot_rl/reward"]] == pytest.approx(ep.rewards.tolist())
        assert [m.data for _, m in msgs["/robot_rl/intervention"]] == ep.intervention.tolist()
        assert [m.data for _, m in msgs["/robot_rl/terminated"]] == ep.terminated.tolist()
        assert [m.data for _, m in msgs["/robot_rl/truncated"]] == ep.truncated.tolist()
        assert [m.data for _, m in msgs["/robot_rl/success"]] == ep.success.tolist()
        states = np.stack([np.asarray(m.data) for _, m in msgs["/robot_rl/observation/state"]])
        assert np.array_equal(states, ep.observations["state"])
        pose = msgs["/robot_rl/tcp_pose"][2][1].pose
        s = ep.observations["state"][2].astype(np.float64)
        assert [pose.position.x, pose.position.y, pose.position.z] == pytest.approx(s[:3].tolist())
        q = euler_xyz_to_quat(s[3:6])
        assert [pose.orientation.w, pose.orientation.x, pose.orientation.y, pose.orientation.z] == pytest.approx(q)
        # timing: observation i at t0 + i/fps; the action of step i with it; its reward one period later
        t_img = [t for t, _ in images]
        assert np.allclose(np.diff(t_img), 1e8)
        assert [t for t, _ in actions] == t_img[:-1]
        assert [t for t, _ in msgs["/robot_rl/reward"]] == t_img[1:]
    # a second export to the same place is refused (a bag is never overwritten)
    with pytest.raises(ExportError, match="already exists"):
        export_episodes(episodes_dir, mcap=tmp_path / "bags")
    rc, _out, err = run("export", str(episodes_dir), "--mcap", str(tmp_path / "bags"))  # the command: one line
    assert rc == 1 and "already exists" in err and err.count("\n") == 1


def test_lerobot_export_layout(episodes_dir: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    out = tmp_path / "lr"
    rc, stdout, err = run("export", str(episodes_dir), "--lerobot", str(out))
    assert rc == 0, err
    assert "2 episodes, 15 frames" in stdout
    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["fps"] == 10 and info["total_frames"] == 15
    assert info["total_episodes"] == 2 and info["total_tasks"] == 1 and info["splits"] == {"train": "0:2"}
    feats = info["features"]
    assert feats["observation.state"] == {"dtype": "float32", "shape": [19], "names": None}
    assert feats["action"]["shape"] == [7] and feats["observation.images.front"]["dtype"] == "video"
    assert feats["observation.images.front"]["shape"] == [32, 32, 3]
    for k in ("timestamp", "frame_index", "episode_index", "index", "task_index", "next.reward", "next.done"):
        assert k in feats
    data = pq.read_table(out / "data" / "chunk-000" / "file-000.parquet")
    assert data.num_rows == 15
    assert data.column("episode_index").to_pylist() == [0] * 6 + [1] * 9
    assert data.column("index").to_pylist() == list(range(15))
    assert data.column("timestamp").to_pylist()[6:8] == pytest.approx([0.0, 0.1])
    assert data.column("next.done").to_pylist()[5] is True and data.column("next.done").to_pylist()[4] is False
    episodes = pq.read_table(out / "meta" / "episodes" / "chunk-000" / "file-000.parquet").to_pylist()
    assert [(e["dataset_from_index"], e["dataset_to_index"], e["length"]) for e in episodes] == [(0, 6, 6),
                                                                                              (6, 15, 9)]
    assert episodes[1]["videos/observation.images.front/from_timestamp"] == pytest.approx(0.6)
    assert episodes[0]["tasks"] == ["twin-reach"]
    tasks = pq.read_table(out / "meta" / "tasks.parquet")
    assert tasks.column("task").to_pylist() == ["twin-reach"] and tasks.column("task_index").to_pylist() == [0]
    assert json.loads(tasks.schema.metadata[b"pandas"])["index_columns"] == ["task"]  # pandas reads it as the index
    stats = json.loads((out / "meta" / "stats.json").read_text())
    assert np.array(stats["observation.images.front"]["mean"]).shape == (3, 1, 1)
    assert stats["action"]["count"] == [15] and len(stats["action"]["q50"]) == 7
    assert (out / "videos" / "observation.images.front" / "chunk-000" / "file-000.mp4").stat().st_size > 0
    # a second export into the now non-empty directory is refused, in one line from the command
    from robot_rl.cli import main

    assert main(["episodes", "export", str(episodes_dir), "--lerobot", str(out)]) == 1


def test_lerobot_round_trip(episodes_dir: Path, tmp_path: Path) -> None:
    out, back = tmp_path / "lr", tmp_path / "back"
    assert run("export", str(episodes_dir), "--lerobot", str(out))[0] == 0
    rc, stdout, err = run("import", str(back), "--lerobot", str(out))
    assert rc == 0, err
    assert stdout.count("->") == 2
    original, _ = load_dir(episodes_dir)
    imported, errors = load_dir(back)
    assert not errors and len(imported) == 2
    for a, b in zip(original, imported, strict=True):
        T = a.length
        assert b.length == T
        assert np.array_equal(a.actions, b.actions) and np.array_equal(a.rewards, b.rewards)
        for f in ("terminated", "truncated", "intervention", "success"):
            assert np.array_equal(getattr(a, f), getattr(b, f)), f
        assert np.array_equal(a.observations["state"][:T], b.observations["state"][:T])
        assert np.array_equal(b.observations["state"][T], b.observations["state"][T - 1])  # not in the dataset
        img_a = a.observations["images/front"][:T].astype(np.int16)
        img_b = b.observations["images/front"][:T].astype(np.int16)
        assert img_b.shape == img_a.shape
        # h264 yuv420p is lossy (chroma at half resolution): ~3 grey levels on average on these 32x32 frames
        assert np.abs(img_a - img_b).mean() < 5.0
        assert np.corrcoef(img_a.reshape(-1), img_b.reshape(-1))[0, 1] > 0.99
        assert a.task == b.task and a.spec == b.spec
        assert b.info["seed"] == a.info["seed"] and b.info["lerobot"]["codebase_version"] == "v3.0"


def test_lerobot_v2_dataset_import(tmp_path: Path) -> None:
    """A v2.1 dataset as LeRobot wrote them before v3.0 (per-episode parquet and mp4, jsonl metadata), built here
    by hand after that layout; no video, so the numeric path is what is checked."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "v21"
    (root / "data" / "chunk-000").mkdir(parents=True)
    (root / "meta").mkdir()
    for e, T in enumerate((3, 4)):
        pq.write_table(pa.table({
            "observation.state": pa.FixedSizeListArray.from_arrays(pa.array(np.arange(T * 2, dtype=np.float32)), 2),
            "action": pa.FixedSizeListArray.from_arrays(pa.array(np.full(T * 3, e, np.float32)), 3),
            "next.reward": pa.array(np.r_[np.zeros(T - 1), 1.0].astype(np.float32)),
            "next.done": pa.array([False] * (T - 1) + [True]),
            "timestamp": pa.array(np.arange(T, dtype=np.float32) / 30), "frame_index": pa.array(np.arange(T)),
            "episode_index": pa.array(np.full(T, e)), "index": pa.array(np.arange(T) + 3 * e),
            "task_index": pa.array(np.zeros(T, np.int64))}), root / "data" / "chunk-000" / f"episode_{e:06d}.parquet")
    (root / "meta" / "episodes.jsonl").write_text('{"episode_index": 0, "tasks": ["pick"], "length": 3}\n'
                                                 '{"episode_index": 1, "tasks": ["pick"], "length": 4}\n')
    (root / "meta" / "tasks.jsonl").write_text('{"task_index": 0, "task": "pick the cube"}\n')
    feats = {"observation.state": {"dtype": "float32", "shape": [2], "names": None},
             "action": {"dtype": "float32", "shape": [3], "names": None},
             "next.reward": {"dtype": "float32", "shape": [1], "names": None},
             "next.done": {"dtype": "bool", "shape": [1], "names": None}}
    (root / "meta" / "info.json").write_text(json.dumps({
        "codebase_version": "v2.1", "fps": 30, "features": feats, "chunks_size": 1000,
        "data_path": "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
        "video_path": "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"}))
    from demos.formats.lerobot import import_lerobot

    eps = import_lerobot(root)
    assert [e.length for e in eps] == [3, 4]
    assert eps[1].actions.shape == (4, 3) and (eps[1].actions == 1).all()
    assert eps[0].observations["state"].shape == (4, 2)  # T + 1 (the last frame repeated)
    assert eps[0].terminated.tolist() == [False, False, True] and eps[0].success.tolist() == [False, False, True]
    assert eps[0].task == "pick the cube" and eps[0].info["lerobot"]["codebase_version"] == "v2.1"


def test_import_refuses_what_is_not_a_dataset(tmp_path: Path) -> None:
    from robot_rl.cli import main

    rc = main(["episodes", "import", str(tmp_path / "x"), "--lerobot", str(tmp_path)])
    assert rc == 1


def test_against_the_lerobot_package(episodes_dir: Path, tmp_path: Path) -> None:
    """lerobot reads our export, and a dataset lerobot writes imports here (needs the lerobot package)."""
    lerobot_dataset = pytest.importorskip("lerobot.datasets.lerobot_dataset",
                                          reason="the lerobot package is not installed (it stays optional)")
    out = tmp_path / "lr"
    assert run("export", str(episodes_dir), "--lerobot", str(out))[0] == 0
    ds = lerobot_dataset.LeRobotDataset("local/robot_rl_export", root=out)
    assert ds.num_episodes == 2 and ds.num_frames == 15
    item = ds[7]
    assert tuple(item["observation.images.front"].shape) == (3, 32, 32) and tuple(item["action"].shape) == (7,)
    original, _ = load_dir(episodes_dir)
    assert np.allclose(item["action"].numpy(), original[1].actions[1])

    written = tmp_path / "written_by_lerobot"
    features = {"observation.state": {"dtype": "float32", "shape": (19,), "names": None},
                "observation.images.front": {"dtype": "video", "shape": (32, 32, 3),
                                             "names": ["height", "width", "channels"]},
                "action": {"dtype": "float32", "shape": (7,), "names": None}}
    new = lerobot_dataset.LeRobotDataset.create("local/written", fps=10, features=features, root=written)
    ep = original[0]
    for t in range(ep.length):
        new.add_frame({"observation.state": ep.observations["state"][t], "action": ep.actions[t],
                       "observation.images.front": ep.observations["images/front"][t], "task": "reach"})
    new.save_episode()
    new.finalize()
    from demos.formats.lerobot import import_lerobot

    [back] = import_lerobot(written)
    assert back.length == ep.length and np.allclose(back.actions, ep.actions)
    assert np.array_equal(back.observations["state"][:ep.length], ep.observations["state"][:ep.length])
    assert np.abs(back.observations["images/front"][:ep.length].astype(np.int16)
                  - ep.observations["images/front"][:ep.length].astype(np.int16)).mean() < 12
