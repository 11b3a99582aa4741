"""Episodes <-> the LeRobotDataset layout (`robot-rl episodes export PATH --lerobot DIR`, `robot-rl episodes import
PATH --lerobot DIR`), written and read with pyarrow + an ffmpeg binary (the `export` extra); the `lerobot` package
itself is not needed.

Export writes LeRobot's codebase v3.0 layout:
```
DIR/meta/info.json                              codebase_version v3.0, fps, features, totals, path templates
DIR/meta/stats.json                             per feature: min, max, mean, std, count, q01 q10 q50 q90 q99
DIR/meta/tasks.parquet                          task string (the pandas index) -> task_index
DIR/meta/episodes/chunk-000/file-000.parquet    per episode: length, tasks, data/video file indices and ranges, stats
DIR/meta/robot_rl.json                          our own: per episode task name, EnvSpec and info (restored on import)
DIR/data/chunk-000/file-000.parquet             one row per frame (all episodes)
DIR/videos/observation.images.NAME/chunk-000/file-000.mp4   all episodes of a camera, one after the other
```
Frames: frame t of an episode = observation t, the action taken from it, and the step's outcome (`next.reward`,
`next.done`, `next.success`, `next.truncated`, `complementary_info.is_intervention`), as LeRobot records them:
T frames for T steps, so the final observation (after the last step) is not in the dataset. Observation keys map
`state` -> `observation.state`, `object` -> `observation.environment_state`, `images/NAME` ->
`observation.images.NAME` (h264 mp4, crf 10, yuv420p, a keyframe every 2 frames: lossy, ~3 grey levels on average
on small frames), any other KEY -> `observation.KEY`.

Import reads v3.0 and v2.x datasets (v2: data/chunk-XXX/episode_XXXXXX.parquet, meta/episodes.jsonl, one video per
episode), decodes the videos with ffmpeg (h264, AV1, ... whatever the binary decodes) and inverts the mapping.
Each episode's final observation repeats its last frame (a LeRobot dataset has none); `next.done` without our
`next.truncated` column reads as `terminated`; without `next.success`, success = reward > 0; without
`next.reward`, rewards are 0. Task, EnvSpec and info come back from meta/robot_rl.json when it is there.

Usage::

    export_lerobot(episodes, "runs/lerobot/pick", fps=10.0)      # episodes: [(file, Episode)]
    eps = import_lerobot("runs/lerobot/pick")                    # [Episode], each with T+1 observations
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from demos.formats.rosbag import ExportError
from demos.formats.video import find_ffmpeg
from robot_rl.episodes import Episode
from robot_rl.extras import optional_import
from robot_rl.lerobot_keys import feature_key, obs_key

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000
DATA_FILE = "data/chunk-000/file-000.parquet"
EPISODES_FILE = "meta/episodes/chunk-000/file-000.parquet"
VIDEO_FILE = "videos/{key}/chunk-000/file-000.mp4"
ACTION_NAMES_7 = ["delta_x", "delta_y", "delta_z", "delta_rx", "delta_ry", "delta_rz", "gripper"]
QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)


def _pa() -> Any:
    return optional_import("pyarrow", extra="export", purpose="LeRobot dataset export / import")


def _pq() -> Any:
    return optional_import("pyarrow.parquet", extra="export", purpose="LeRobot dataset export / import")


def _ffmpeg() -> str:
    exe = find_ffmpeg()
    if exe is None:
        from robot_rl.extras import install_hint

        raise ExportError(f"LeRobot videos need an ffmpeg binary: put one on PATH or {install_hint('export')}")
    return exe


def feature_stats(values: np.ndarray, image: bool = False) -> dict[str, list[Any]]:
    """LeRobot's per-feature statistics: vectors (N, n) per dimension; images (N, H, W, 3) per channel, in [0, 1],
    shaped (3, 1, 1)."""
    if image:
        x = values.reshape(-1, 3).astype(np.float64) / 255.0
        reshape: tuple[int, ...] = (3, 1, 1)
    else:
        x = values.reshape(values.shape[0], -1).astype(np.float64)
        reshape = (x.shape[1],)
    out: dict[str, list[Any]] = {
        "min": x.min(axis=0).reshape(reshape).tolist(), "max": x.max(axis=0).reshape(reshape).tolist(),
        "mean": x.mean(axis=0).reshape(reshape).tolist(), "std": x.std(axis=0).reshape(reshape).tolist(),
        "count": [int(values.shape[0])],
    }
    for q in QUANTILES:
        out[f"q{round(q * 100):02d}"] = np.quantile(x, q, axis=0).reshape(reshape).tolist()
    return out


def _frame_columns(ep: Episode) -> dict[str, np.ndarray]:
    """Per-frame arrays (T rows) of one episode, LeRobot names, without the bookkeeping columns."""
    T = ep.length
    cols: dict[str, np.ndarray] = {}
    for key, arr in ep.observations.items():
        if not key.startswith("images/"):
            cols[feature_key(key)] = np.asarray(arr[:T], np.float32).reshape(T, -1)
    cols["action"] = np.asarray(ep.actions, np.float32)
    cols["next.reward"] = np.asarray(ep.rewards, np.float32)
    cols["next.done"] = np.asarray(ep.terminated | ep.truncated, bool)
    cols["next.success"] = np.asarray(ep.success, bool)
    cols["next.truncated"] = np.asarray(ep.truncated, bool)
    cols["complementary_info.is_intervention"] = np.asarray(ep.intervention, bool)
    return cols


def _arrow_column(values: np.ndarray) -> Any:
    pa = _pa()
    if values.ndim == 1:
        return pa.array(values)
    n = int(values.shape[1])
    flat = pa.array(values.reshape(-1))
    return pa.FixedSizeListArray.from_arrays(flat, n)


def _write_video(path: Path, frames: np.ndarray, fps: float) -> None:
    """uint8 (N, H, W, 3) frames -> h264 mp4 (yuv420p, keyframe every 2 frames, like LeRobot's g=2)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _n, h, w, _ = frames.shape
    if h % 2 or w % 2:
        raise ExportError(f"{path}: yuv420p video needs even image sizes, got {h}x{w}")
    cmd = [_ffmpeg(), "-hide_banner", "-loglevel", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24",
           "-s", f"{w}x{h}", "-r", f"{fps:g}", "-i", "-", "-an", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "2",
           "-crf", "10", str(path)]
    proc = subprocess.run(cmd, input=np.ascontiguousarray(frames, np.uint8).tobytes(), stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, check=False)
    if proc.returncode != 0:
        raise ExportError(f"{path}: ffmpeg failed: {proc.stderr.decode(errors='replace').strip()[-500:]}")


def read_video(path: str | os.PathLike[str], height: int, width: int) -> np.ndarray:
    """Every frame of a video as uint8 (N, height, width, 3) RGB, decoded by ffmpeg."""
    cmd = [_ffmpeg(), "-hide_banner", "-loglevel", "error", "-i", str(path), "-f", "rawvideo", "-pix_fmt", "rgb24",
           "-s", f"{width}x{height}", "-"]
    proc = subprocess.run(cmd, capture_output=True, check=False)
    if proc.returncode != 0:
        raise ExportError(f"{path}: ffmpeg could not decode it: {proc.stderr.decode(errors='replace').strip()[-500:]}")
    return np.frombuffer(proc.stdout, np.uint8).reshape(-1, height, width, 3)


def _tasks_table(tasks: list[str]) -> Any:
    """meta/tasks.parquet as pandas writes it: the task string is the (named) index, task_index the column."""
    pa = _pa()
    table = pa.table({"task_index": pa.array(range(len(tasks)), pa.int64()), "task": pa.array(tasks, pa.string())})
    pandas_meta = {
        "index_columns": ["task"], "column_indexes": [],
        "columns": [{"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64",
                     "metadata": None},
                    {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object",
                     "metadata": None}],
        "creator": {"library": "robot-rl", "version": "1"}, "pandas_version": "2.2.0",
    }
    return table.replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})


def export_lerobot(episodes: Sequence[tuple[Path, Episode]], out_dir: str | os.PathLike[str], fps: float = 10.0,
                   robot_type: str = "robot-rl") -> Path:
    """Write `episodes` as one LeRobot v3.0 dataset in `out_dir` (which must not exist or be empty)."""
    _pa(), _pq()  # the `export` extra first: MissingExtraError before anything else
    out = Path(out_dir)
    _check_exportable(episodes, out)
    eps = [ep for _, ep in episodes]
    image_keys = [k for k in eps[0].observations if k.startswith("images/")]
    tasks = sorted({ep.task or "robot-rl" for ep in eps})
    data, ep_rows = _frame_table(eps, {t: i for i, t in enumerate(tasks)}, fps)
    out.mkdir(parents=True, exist_ok=True)
    try:
        stats = _write_frames_and_videos(out, eps, data, ep_rows, image_keys, fps)
        _write_meta(out, episodes, ep_rows, tasks, stats, _features(data, eps[0], image_keys, fps), image_keys,
                    fps, robot_type)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return out


_BOOKKEEPING = ("timestamp", "frame_index", "episode_index", "index", "task_index")
"""The per-frame columns LeRobot adds to the features (int64, float32 timestamps)."""


def _check_exportable(episodes: Sequence[tuple[Path, Episode]], out: Path) -> None:
    """ExportError unless `out` is new or empty and the episodes share one set of features."""
    if out.exists() and any(out.iterdir()):
        raise ExportError(f"{out}: exists and is not empty (a LeRobot dataset is written whole; pick a new DIR)")
    if not episodes:
        raise ExportError("no episodes to export")
    first = episodes[0][1]
    obs_keys = list(first.observations)
    for (f, ep) in episodes:
        if list(ep.observations) != obs_keys or ep.actions.shape[1] != first.actions.shape[1]:
            raise ExportError(f"{f}: observation keys or action size differ from the first episode's; a LeRobot "
                              "dataset has one set of features")


def _frame_table(eps: Sequence[Episode], task_index: dict[str, int], fps: float
                 ) -> tuple[dict[str, np.ndarray], list[dict[str, Any]]]:
    """Every episode's frame columns (images aside) plus the bookkeeping columns, concatenated in episode order,
    and one episodes-table row per episode (length, tasks, index ranges)."""
    columns: dict[str, list[np.ndarray]] = {}
    bookkeeping: dict[str, list[np.ndarray]] = {k: [] for k in _BOOKKEEPING}
    start = 0
    ep_rows: list[dict[str, Any]] = []
    for e, ep in enumerate(eps):
        T = ep.length
        for k, v in _frame_columns(ep).items():
            columns.setdefault(k, []).append(v)
        bookkeeping["timestamp"].append((np.arange(T) / fps).astype(np.float32))
        bookkeeping["frame_index"].append(np.arange(T, dtype=np.int64))
        bookkeeping["episode_index"].append(np.full(T, e, np.int64))
        bookkeeping["index"].append(np.arange(start, start + T, dtype=np.int64))
        bookkeeping["task_index"].append(np.full(T, task_index[ep.task or "robot-rl"], np.int64))
        ep_rows.append({"episode_index": e, "tasks": [ep.task or "robot-rl"], "length": T,
                        "data/chunk_index": 0, "data/file_index": 0, "dataset_from_index": start,
                        "dataset_to_index": start + T, "meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0})
        start += T
    data = {k: np.concatenate(v) for k, v in columns.items()}
    data.update({k: np.concatenate(v) for k, v in bookkeeping.items()})
    return data, ep_rows


def _features(data: dict[str, np.ndarray], first: Episode, image_keys: Sequence[str], fps: float
              ) -> dict[str, dict[str, Any]]:
    """meta/info.json's features: the frame columns, the videos (h264, yuv420p) and the bookkeeping columns."""
    features: dict[str, dict[str, Any]] = {}
    for k, v in data.items():
        if k in _BOOKKEEPING:
            continue
        shape = [1] if v.ndim == 1 else [int(v.shape[1])]
        names = ACTION_NAMES_7 if k == "action" and shape == [7] else None
        features[k] = {"dtype": "bool" if v.dtype == bool else "float32", "shape": shape, "names": names}
    for key in image_keys:
        h, w = (int(x) for x in first.observations[key].shape[1:3])
        features[feature_key(key)] = {
            "dtype": "video", "shape": [h, w, 3], "names": ["height", "width", "channels"],
            "info": {"video.height": h, "video.width": w, "video.codec": "h264", "video.pix_fmt": "yuv420p",
                     "video.is_depth_map": False, "video.fps": fps, "video.channels": 3, "has_audio": False}}
    features.update({"timestamp": {"dtype": "float32", "shape": [1], "names": None},
                     "frame_index": {"dtype": "int64", "shape": [1], "names": None},
                     "episode_index": {"dtype": "int64", "shape": [1], "names": None},
                     "index": {"dtype": "int64", "shape": [1], "names": None},
                     "task_index": {"dtype": "int64", "shape": [1], "names": None}})
    return features


def _write_frames_and_videos(out: Path, eps: Sequence[Episode], data: dict[str, np.ndarray],
                             ep_rows: list[dict[str, Any]], image_keys: Sequence[str], fps: float
                             ) -> dict[str, dict[str, list[Any]]]:
    """The data parquet and one mp4 per camera (all episodes one after the other); fills the episodes-table rows
    with their video ranges and per-episode stats; returns the dataset's stats."""
    pa, pq = _pa(), _pq()
    (out / DATA_FILE).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({k: _arrow_column(v) for k, v in data.items()}), out / DATA_FILE)
    stats: dict[str, dict[str, list[Any]]] = {k: feature_stats(v) for k, v in data.items()
                                              if k not in ("episode_index", "index", "task_index")}
    for key in image_keys:
        fk = feature_key(key)
        frames = np.concatenate([ep.observations[key][:ep.length] for ep in eps])
        _write_video(out / VIDEO_FILE.format(key=fk), frames, fps)
        stats[fk] = feature_stats(frames, image=True)
        t = 0.0
        for row, ep in zip(ep_rows, eps, strict=True):
            row[f"videos/{fk}/chunk_index"] = 0
            row[f"videos/{fk}/file_index"] = 0
            row[f"videos/{fk}/from_timestamp"] = t
            t += ep.length / fps
            row[f"videos/{fk}/to_timestamp"] = t
    for row, ep in zip(ep_rows, eps, strict=True):
        for k, v in _frame_columns(ep).items():
            for stat, value in feature_stats(v).items():
                row[f"stats/{k}/{stat}"] = np.asarray(value, np.float64).reshape(-1).tolist()
    return stats


def _write_meta(out: Path, episodes: Sequence[tuple[Path, Episode]], ep_rows: list[dict[str, Any]],
                tasks: list[str], stats: dict[str, dict[str, list[Any]]], features: dict[str, dict[str, Any]],
                image_keys: Sequence[str], fps: float, robot_type: str) -> None:
    """meta/: the episodes table, tasks.parquet, info.json, stats.json and our own robot_rl.json."""
    pa, pq = _pa(), _pq()
    (out / EPISODES_FILE).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(ep_rows), out / EPISODES_FILE)
    pq.write_table(_tasks_table(tasks), out / "meta" / "tasks.parquet")
    n_eps = len(episodes)
    info = {"codebase_version": CODEBASE_VERSION, "robot_type": robot_type, "total_episodes": n_eps,
            "total_frames": int(sum(ep.length for _, ep in episodes)), "total_tasks": len(tasks),
            "chunks_size": CHUNKS_SIZE, "data_files_size_in_mb": 100, "video_files_size_in_mb": 200, "fps": round(fps),
            "splits": {"train": f"0:{n_eps}"},
            "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
            "video_path": ("videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4" if image_keys
                           else None),
            "features": features}
    (out / "meta" / "info.json").write_text(json.dumps(info, indent=2))
    (out / "meta" / "stats.json").write_text(json.dumps(stats, indent=2))
    ours = [{"source": str(f), "task": ep.task, "spec": ep.spec, "info": ep.info} for f, ep in episodes]
    (out / "meta" / "robot_rl.json").write_text(json.dumps({"format": "robot-rl-lerobot-export", "version": 1,
                                                             "episodes": ours}, indent=2, default=str))


# ----------------------------------------------------------------------------------------------------------
# import


def _column(table: Any, name: str) -> np.ndarray:
    col = table.column(name).combine_chunks()
    pa = _pa()
    if pa.types.is_fixed_size_list(col.type) or pa.types.is_list(col.type):
        return np.asarray(col.to_pylist(), np.float64)
    return col.to_numpy(zero_copy_only=False)


def _read_tables(files: list[Path]) -> Any:
    pa, pq = _pa(), _pq()
    if not files:
        raise ExportError("no parquet files found")
    return pa.concat_tables([pq.read_table(f) for f in files], promote_options="default")


def _episode_meta(root: Path, version: str) -> dict[int, dict[str, Any]]:
    """episode_index -> its metadata row (v3: meta/episodes/*.parquet; v2: meta/episodes.jsonl)."""
    if version.startswith("v2"):
        rows = [json.loads(line) for line in (root / "meta" / "episodes.jsonl").read_text().splitlines() if line]
        return {int(r["episode_index"]): r for r in rows}
    table = _read_tables(sorted((root / "meta" / "episodes").rglob("*.parquet")))
    keep = [n for n in table.column_names if not n.startswith("stats/")]
    return {int(r["episode_index"]): r for r in table.select(keep).to_pylist()}


def _decode_png(data: bytes) -> np.ndarray:
    image = optional_import("PIL.Image", extra="export", purpose="image features of a LeRobot dataset")
    import io

    return np.asarray(image.open(io.BytesIO(data)).convert("RGB"), np.uint8)


def import_lerobot(src: str | os.PathLike[str]) -> list[Episode]:
    """The episodes of a LeRobot dataset (v3.0 or v2.x) at `src` (see the module docstring)."""
    root = Path(src)
    info_path = root / "meta" / "info.json"
    if not info_path.is_file():
        raise ExportError(f"{root}: not a LeRobot dataset (no meta/info.json)")
    info = json.loads(info_path.read_text())
    version = str(info.get("codebase_version", ""))
    if not (version.startswith("v2") or version.startswith("v3")):
        raise ExportError(f"{info_path}: codebase_version {version!r} is not supported (v2.x or v3.x)")
    fps = float(info["fps"])
    features: dict[str, dict[str, Any]] = info["features"]
    table = _read_tables(sorted((root / "data").rglob("*.parquet")))
    episode_index = _column(table, "episode_index").astype(np.int64)
    frame_index = _column(table, "frame_index").astype(np.int64)
    meta = _episode_meta(root, version)
    ours_path = root / "meta" / "robot_rl.json"
    ours = json.loads(ours_path.read_text())["episodes"] if ours_path.is_file() else None
    tasks_by_index: dict[int, str] = {}
    if (root / "meta" / "tasks.parquet").is_file():
        t = _pq().read_table(root / "meta" / "tasks.parquet")
        names = t.column("task").to_pylist() if "task" in t.column_names else t.column(t.column_names[-1]).to_pylist()
        tasks_by_index = dict(zip(t.column("task_index").to_pylist(), names, strict=True))
    elif (root / "meta" / "tasks.jsonl").is_file():
        for line in (root / "meta" / "tasks.jsonl").read_text().splitlines():
            if line:
                r = json.loads(line)
                tasks_by_index[int(r["task_index"])] = str(r["task"])

    numeric = {k: _column(table, k) for k, ft in features.items()
               if ft["dtype"] not in ("video", "image", "string") and k in table.column_names}
    videos: dict[tuple[str, str], np.ndarray] = {}
    episodes: list[Episode] = []
    for e in sorted(set(episode_index.tolist())):
        rows = np.flatnonzero(episode_index == e)
        rows = rows[np.argsort(frame_index[rows], kind="stable")]
        T = len(rows)
        if T < 1:
            continue
        obs: dict[str, np.ndarray] = {}
        for k, ft in features.items():
            key = obs_key(k)
            if key is None:
                continue
            if ft["dtype"] == "video":
                h, w = int(ft["shape"][0]), int(ft["shape"][1])
                m = meta.get(e, {})
                if version.startswith("v2"):
                    chunk = e // int(info.get("chunks_size", CHUNKS_SIZE))
                    rel = info["video_path"].format(episode_chunk=chunk, video_key=k, episode_index=e)
                    from_ts = 0.0
                else:
                    rel = info["video_path"].format(video_key=k, chunk_index=int(m[f"videos/{k}/chunk_index"]),
                                                    file_index=int(m[f"videos/{k}/file_index"]))
                    from_ts = float(m[f"videos/{k}/from_timestamp"])
                if (k, rel) not in videos:
                    videos[(k, rel)] = read_video(root / rel, h, w)
                allf = videos[(k, rel)]
                first = round(from_ts * fps)
                frames = allf[first:first + T]
                if len(frames) < T:
                    raise ExportError(f"{root / rel}: {len(frames)} frames for episode {e} ({T} expected)")
                obs[key] = np.concatenate([frames, frames[-1:]])
            elif ft["dtype"] == "image":
                imgs = [_decode_png(table.column(k)[int(r)].as_py()["bytes"]) for r in rows]
                obs[key] = np.stack([*imgs, imgs[-1]])
            elif k in numeric:
                v = numeric[k][rows].reshape(T, -1).astype(np.float32)
                obs[key] = np.concatenate([v, v[-1:]])
        if "action" not in numeric:
            raise ExportError(f"{root}: the dataset has no 'action' feature")
        actions = numeric["action"][rows].reshape(T, -1).astype(np.float32)

        def flag(name: str, default: np.ndarray, rows: np.ndarray = rows, T: int = T) -> np.ndarray:
            return numeric[name][rows].reshape(T).astype(bool) if name in numeric else default

        rewards = (numeric["next.reward"][rows].reshape(T).astype(np.float32) if "next.reward" in numeric
                   else np.zeros(T, np.float32))
        done = flag("next.done", np.zeros(T, bool))
        truncated = flag("next.truncated", np.zeros(T, bool))
        terminated = done & ~truncated
        success = flag("next.success", rewards > 0)
        intervention = flag("complementary_info.is_intervention", np.zeros(T, bool))
        task_idx = int(_column(table, "task_index")[rows[0]]) if "task_index" in table.column_names else -1
        task = tasks_by_index.get(task_idx, "")
        spec: dict[str, Any] | None = None
        ep_info: dict[str, Any] = {"lerobot": {"dataset": str(root), "episode_index": int(e), "codebase_version":
                                               version, "final_observation": "repeats the last frame"}}
        if ours is not None and e < len(ours):
            task, spec = ours[e]["task"], ours[e]["spec"]
            ep_info = {**ours[e]["info"], **ep_info}
        episodes.append(Episode(observations=obs, actions=actions, rewards=rewards, terminated=terminated,
                                truncated=truncated, intervention=intervention, success=success, task=task,
                                spec=spec, info=ep_info))
    return episodes
