"""The one episode format on disk, shared by demos, intervention logs, replay dumps and classifier labels.

Format (version 1): one `.npz` file per episode (a zip of `.npy` arrays, readable with numpy alone:
``np.load(path, allow_pickle=False)``), with T steps and T+1 observations (each frame stored once: the
observation after step t is `obs/...[t + 1]`):

| key | shape / dtype | meaning |
|---|---|---|
| `meta_json` | () unicode | JSON: `format`, `version` (1), `task`, `spec` (EnvSpec dict or null), `info` |
| `obs/<path>` | (T+1, ...) | one per observation leaf (`obs/state`, `obs/images/front`); images uint8 HxWx3 |
| `actions` | (T, A) float32 | the executed action (the human's during an intervention) |
| `rewards` | (T,) float32 | |
| `terminated`, `truncated` | (T,) bool | gymnasium's flags per step |
| `intervention` | (T,) bool | the step's action came from a human (teleop) rather than the policy |
| `success` | (T,) bool | per-step success (or success label while the operator holds the key) |

Files are written atomically (temporary file + rename). A corrupt, truncated or unknown-version file raises
`EpisodeFileError` naming the file; so does a file with a NaN or infinite value in any float array (an
observation leaf, `actions`, `rewards`), naming the field and the first bad row: demos, label sets and replay
dumps never feed a NaN into training. `load_dir` skips such files and reports them, loading the others.

Usage::

    ep = Episode.from_steps(observations, actions, rewards, terminated, truncated, task="twin-reach")
    path = save_episode(ep, "demos/reach")          # demos/reach/episode_000000.npz
    eps, errors = load_dir("demos/reach")
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.errors import EpisodeFileError, ShapeError
from robot_rl.specs import flatten_value

FORMAT_NAME = "robot-rl-episode"
FORMAT_VERSION = 1
_FILE_RE = re.compile(r"^episode_(\d{6,})\.npz$")


@dataclasses.dataclass
class Episode:
    """One episode in memory: flat observation arrays (T+1, ...) keyed by slash path, and per-step arrays (T,)."""

    observations: dict[str, np.ndarray]
    actions: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    intervention: np.ndarray
    success: np.ndarray
    task: str = ""
    spec: dict[str, Any] | None = None
    info: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    @property
    def length(self) -> int:
        """Number of steps T."""
        return int(self.actions.shape[0])

    @property
    def is_success(self) -> bool:
        return bool(self.success.any())

    def validate(self) -> None:
        """Raise ShapeError unless all per-step arrays have T rows and observations T+1."""
        if self.actions.ndim != 2:
            raise ShapeError(f"actions must be (T, A), got {self.actions.shape}")
        t = self.actions.shape[0]
        for name in ("rewards", "terminated", "truncated", "intervention", "success"):
            arr = getattr(self, name)
            if arr.shape != (t,):
                raise ShapeError(f"{name} must have shape ({t},), got {arr.shape}")
        if not self.observations:
            raise ShapeError("an episode needs at least one observation key")
        for key, arr in self.observations.items():
            if arr.shape[:1] != (t + 1,):
                raise ShapeError(f"obs '{key}' must have {t + 1} rows (T+1), got {arr.shape}")

    def observation(self, i: int) -> dict[str, Any]:
        """Observation i (0..T) as a nested dict, like the env returned it."""
        out: dict[str, Any] = {}
        for key, arr in self.observations.items():
            node = out
            parts = key.split("/")
            for p in parts[:-1]:
                node = node.setdefault(p, {})
            node[parts[-1]] = arr[i]
        return out

    @classmethod
    def from_steps(
        cls,
        observations: Sequence[Any],
        actions: Sequence[Any],
        rewards: Sequence[float],
        terminated: Sequence[bool],
        truncated: Sequence[bool],
        *,
        intervention: Sequence[bool] | None = None,
        success: Sequence[bool] | None = None,
        task: str = "",
        spec: Mapping[str, Any] | None = None,
        info: Mapping[str, Any] | None = None,
    ) -> Episode:
        """Build from T+1 (nested dict or array) observations and T per-step values."""
        t = len(actions)
        if len(observations) != t + 1:
            raise ShapeError(f"need T+1={t + 1} observations for T={t} actions, got {len(observations)}")
        flats = [flatten_value(o) for o in observations]
        keys = list(flats[0])
        obs = {k: np.stack([np.asarray(f[k]) for f in flats]) for k in keys}
        def col(v: Sequence[Any] | None, dtype: Any) -> np.ndarray:
            return np.zeros(t, dtype) if v is None else np.asarray(v, dtype).reshape(t)
        return cls(
            observations=obs,
            actions=np.asarray(actions, np.float32).reshape(t, -1),
            rewards=col(rewards, np.float32),
            terminated=col(terminated, bool),
            truncated=col(truncated, bool),
            intervention=col(intervention, bool),
            success=col(success, bool),
            task=task,
            spec=dict(spec) if spec is not None else None,
            info=dict(info or {}),
        )


def episode_to_arrays(ep: Episode) -> dict[str, np.ndarray]:
    """The exact arrays written to the file (keys as in the module docstring)."""
    meta = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "task": ep.task, "spec": ep.spec, "info": ep.info}
    arrays: dict[str, np.ndarray] = {"meta_json": np.array(json.dumps(meta))}
    arrays.update({f"obs/{k}": v for k, v in ep.observations.items()})
    arrays.update(actions=ep.actions, rewards=ep.rewards, terminated=ep.terminated, truncated=ep.truncated,
                  intervention=ep.intervention, success=ep.success)
    return arrays


def next_episode_path(directory: str | os.PathLike[str]) -> Path:
    """The first unused `episode_NNNNNN.npz` after the highest existing index (appends to a directory)."""
    d = Path(directory)
    idx = [int(m.group(1)) for p in d.glob("episode_*.npz") if (m := _FILE_RE.match(p.name))]
    return d / f"episode_{(max(idx) + 1) if idx else 0:06d}.npz"


def save_episode(ep: Episode, directory: str | os.PathLike[str], compress: bool = False) -> Path:
    """Write `ep` atomically as the next episode file in `directory` (created if needed); returns its path."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    path = next_episode_path(d)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        arrays: dict[str, Any] = episode_to_arrays(ep)
        (np.savez_compressed if compress else np.savez)(f, **arrays)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
    return path


def first_non_finite_row(arr: np.ndarray) -> int | None:
    """The first row (index along axis 0) of a float array holding a NaN or inf; None if all finite or the array
    is not floating point (uint8 images, bools)."""
    a = np.asarray(arr)
    if not np.issubdtype(a.dtype, np.floating) or a.size == 0:
        return None
    finite = np.isfinite(a)
    if finite.all():
        return None
    if a.ndim == 0:
        return 0
    return int(np.flatnonzero(~finite.reshape(a.shape[0], -1).all(axis=1))[0])


def load_episode(path: str | os.PathLike[str]) -> Episode:
    """Read one episode file; raises EpisodeFileError naming the file if it is corrupt or of another version."""
    p = Path(path)
    try:
        with np.load(p, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError) as err:
        raise EpisodeFileError(f"{p}: unreadable episode file ({type(err).__name__}: {err})") from err
    try:
        meta = json.loads(str(arrays.pop("meta_json")))
    except (KeyError, ValueError) as err:
        raise EpisodeFileError(f"{p}: missing or malformed meta_json") from err
    if meta.get("format") != FORMAT_NAME:
        raise EpisodeFileError(f"{p}: not a robot-rl episode (format={meta.get('format')!r})")
    if meta.get("version") != FORMAT_VERSION:
        raise EpisodeFileError(f"{p}: episode format version {meta.get('version')!r}, this reader supports "
                               f"{FORMAT_VERSION}")
    for key, arr in arrays.items():
        bad = first_non_finite_row(arr)
        if bad is not None:
            raise EpisodeFileError(f"{p}: field '{key}' has a non-finite value (NaN or inf) in row {bad}")
    try:
        obs = {k[len("obs/"):]: v for k, v in arrays.items() if k.startswith("obs/")}
        return Episode(
            observations=obs, actions=arrays["actions"], rewards=arrays["rewards"],
            terminated=arrays["terminated"], truncated=arrays["truncated"],
            intervention=arrays["intervention"], success=arrays["success"],
            task=str(meta.get("task", "")), spec=meta.get("spec"), info=dict(meta.get("info") or {}),
        )
    except (KeyError, ShapeError) as err:
        raise EpisodeFileError(f"{p}: inconsistent episode arrays ({err})") from err


def episode_paths(directory: str | os.PathLike[str]) -> list[Path]:
    """Episode files in `directory`, in index order."""
    d = Path(directory)
    if not d.is_dir():
        raise EpisodeFileError(f"{d}: episode directory does not exist")
    return sorted(p for p in d.glob("episode_*.npz") if _FILE_RE.match(p.name))


def load_dir(directory: str | os.PathLike[str]) -> tuple[list[Episode], list[EpisodeFileError]]:
    """Load every episode in `directory`; corrupt files are returned as errors, the others still load."""
    episodes: list[Episode] = []
    errors: list[EpisodeFileError] = []
    for p in episode_paths(directory):
        try:
            episodes.append(load_episode(p))
        except EpisodeFileError as err:
            errors.append(err)
    return episodes, errors
