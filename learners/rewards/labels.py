"""Labelled frames for a reward classifier, read from `robot-rl record-labels` episode files, and the split by
episode.

In a label episode (robot_rl.episodes format) `success[t]` labels observation t+1 (the frame after step t; the
reset frame has no label). Every labelled frame becomes one sample: its camera images, its proprio `state` row
(for the run-time predicate), its label, its episode and its index in the episode.

The `state` is never a classifier input. train-classifier uses it for two things only: to check that the proprio
predicate indexes inside the state vector, and to apply the predicate per frame in the k-gate replay (the
card's "gate_by_k_validation", eval-classifier's gate table). Label directories may mix files with a state
(record-labels) and without one (audit-labels: the audit log keeps pixels only): frames of a file without a
state get a NaN row, and the gate replay treats the predicate as unknown (not applied) there. `state` is None
only when no file has one; files whose states differ in length are refused.

Frames of one episode are near-duplicates, so train and validation are split by EPISODE, never by frame, and
the split is stratified: episodes with success labels and episodes without are divided separately, so both
sides get success episodes and near misses.

Bad input is a one-line `ConfigError` naming the file and the field: a missing directory or no episode files,
an unreadable file or one with a NaN (robot_rl.episodes), a camera missing from a file or of another size than
in the first file, labels of a single class, too few episodes for a split.

Usage::

    data = load_labels(["labels/pick"], cameras=None)        # every camera of the first file
    train_eps, val_eps = split_by_episode(data, val_fraction=0.25, min_episodes=2, seed=0)
    idx = data.frames_of(val_eps)                            # frame indices of those episodes
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.episodes import Episode, episode_paths, load_episode
from robot_rl.errors import ConfigError, EpisodeFileError

IMAGE_PREFIX = "images/"


@dataclasses.dataclass(frozen=True)
class EpisodeInfo:
    """Where an episode's frames came from."""

    path: str
    task: str
    frames: int
    positives: int
    label_source: str
    """The recording's `info["labels"]` ("info": the task's success condition, "events": a human's key)."""
    segment: str
    """`info["segment"]`: "expert", "near-miss:<kind>", or "" when the recording does not say."""


@dataclasses.dataclass
class LabelledFrames:
    """All labelled frames of some label directories (N frames in all)."""

    images: dict[str, np.ndarray]
    """Observation path ("images/front") -> uint8 (N, H, W, 3)."""
    state: np.ndarray | None
    """The proprio `state` leaf (N, D) float32; NaN rows for frames of files without one (audit-labels); None when
    no file has one."""
    labels: np.ndarray
    """(N,) bool: success."""
    episode: np.ndarray
    """(N,) int: index into `episodes`."""
    step: np.ndarray
    """(N,) int: the frame's observation index in its episode (1..T)."""
    episodes: list[EpisodeInfo]
    directories: list[str]

    @property
    def cameras(self) -> list[str]:
        return list(self.images)

    @property
    def image_size(self) -> tuple[int, int]:
        first = next(iter(self.images.values()))
        return int(first.shape[1]), int(first.shape[2])

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def frames_of(self, episodes: Sequence[int]) -> np.ndarray:
        """Frame indices (in order) of the given episode indices."""
        return np.flatnonzero(np.isin(self.episode, np.asarray(list(episodes), np.int64)))

    def subset_images(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        return {cam: arr[idx] for cam, arr in self.images.items()}

    def sources(self) -> list[dict[str, Any]]:
        """Per directory: episodes, frames, positives, tasks, label sources and segment kinds (for the card)."""
        out = []
        for d in self.directories:
            eps = [e for e in self.episodes if Path(e.path).parent == Path(d)]
            out.append({"directory": str(d), "episodes": len(eps), "frames": sum(e.frames for e in eps),
                        "positives": sum(e.positives for e in eps),
                        "tasks": sorted({e.task for e in eps}),
                        "label_sources": sorted({e.label_source for e in eps}),
                        "segments": {k: sum(e.segment == k for e in eps) for k in sorted({e.segment for e in eps})}})
        return out


def image_shapes(ep: Episode) -> dict[str, tuple[int, ...]]:
    """{observation path: (H, W, C)} of an episode's camera leaves (uint8, 3-D per frame)."""
    return {k: tuple(int(v) for v in a.shape[1:]) for k, a in ep.observations.items()
            if a.dtype == np.uint8 and a.ndim == 4}


def load_labels(directories: Sequence[str | os.PathLike[str]], cameras: Sequence[str] | None = None,
                require_both_classes: bool = True) -> LabelledFrames:
    """Read every episode file of `directories` into labelled frames (see the module docstring).

    cameras: the observation paths to keep (None: every camera of the first file). require_both_classes:
    ConfigError when all frames carry one label (training needs both; evaluation can do without).
    """
    if not directories:
        raise ConfigError("--labels: give at least one label directory")
    paths: list[Path] = []
    for d in directories:
        try:
            found = episode_paths(d)
        except EpisodeFileError as err:
            raise ConfigError(f"--labels {d}: {err}") from err
        if not found:
            raise ConfigError(f"--labels {d}: no episode files (episode_*.npz; record them with robot-rl "
                              f"record-labels)")
        paths.extend(found)
    images: dict[str, list[np.ndarray]] = {}
    states: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    episode_idx: list[np.ndarray] = []
    steps: list[np.ndarray] = []
    infos: list[EpisodeInfo] = []
    want: dict[str, tuple[int, ...]] | None = None
    first: Path | None = None
    state_dim: int | None = None
    state_file: Path | None = None
    for path in paths:
        try:
            ep = load_episode(path)
        except EpisodeFileError as err:
            raise ConfigError(str(err)) from err
        shapes = image_shapes(ep)
        if want is None:
            first = path
            names = list(cameras) if cameras else [k for k in shapes]
            if not names:
                raise ConfigError(f"{path}: no camera images (obs/images/...): a reward classifier learns from "
                                  f"pixels; record labels with --obs-mode pixels")
            want = {}
            for cam in names:
                if cam not in shapes:
                    raise ConfigError(f"{path}: no camera {cam!r} (field obs/{cam}); cameras in this file: "
                                      f"{sorted(shapes)}")
                want[cam] = shapes[cam]
        for cam, shape in want.items():
            if cam not in shapes:
                raise ConfigError(f"{path}: no camera {cam!r} (field obs/{cam}); {first} has it. Cameras in this "
                                  f"file: {sorted(shapes)}")
            if shapes[cam] != shape:
                raise ConfigError(f"{path}: field obs/{cam} is {'x'.join(map(str, shapes[cam]))}, {first} has "
                                  f"{'x'.join(map(str, shape))}: every label file must have the same image size")
        t = ep.length
        if t == 0:
            continue
        for cam in want:
            images.setdefault(cam, []).append(ep.observations[cam][1:])
        st = ep.observations.get("state")
        if st is not None:
            rows = np.asarray(st[1:], np.float32).reshape(t, -1)
            if state_dim is None:
                state_dim, state_file = rows.shape[1], path
            elif rows.shape[1] != state_dim:
                raise ConfigError(f"{path}: field obs/state has {rows.shape[1]} values per frame, {state_file} has "
                                  f"{state_dim}: label files with a state must agree on its length")
            states.append(rows)
        else:
            states.append(np.empty((t, 0), np.float32))  # filled with NaN rows below, once the length is known
        labels.append(ep.success.astype(bool))
        episode_idx.append(np.full(t, len(infos), np.int64))
        steps.append(np.arange(1, t + 1, dtype=np.int64))
        infos.append(EpisodeInfo(str(path), ep.task, t, int(ep.success.sum()), str(ep.info.get("labels", "")),
                                 str(ep.info.get("segment", ""))))
    if not infos:
        raise ConfigError(f"--labels {' '.join(map(str, directories))}: every episode is empty")
    y = np.concatenate(labels)
    where = " ".join(str(d) for d in directories)
    if require_both_classes and (y.all() or not y.any()):
        which = "success" if y.all() else "failure"
        raise ConfigError(f"--labels {where}: all {len(y)} frames in {len(infos)} episode(s) are labelled {which} "
                          f"(field 'success'): a classifier needs both classes; record near misses or successes")
    state = None
    if state_dim is not None:
        state = np.concatenate([s if s.shape[1] else np.full((len(s), state_dim), np.nan, np.float32)
                                for s in states])
    return LabelledFrames({cam: np.concatenate(v) for cam, v in images.items()}, state, y,
                          np.concatenate(episode_idx), np.concatenate(steps), infos, [str(d) for d in directories])


def split_by_episode(data: LabelledFrames, val_fraction: float, min_episodes: int, seed: int,
                     ) -> tuple[list[int], list[int]]:
    """(train episodes, validation episodes): a seeded, stratified split by episode (see the module docstring).

    Each side gets at least `min_episodes` episodes and at least one episode with success labels; ConfigError
    naming the label directories when there are not enough episodes for that."""
    if not 0.0 < val_fraction < 1.0:
        raise ConfigError(f"val_fraction={val_fraction} must be in (0, 1)")
    where = " ".join(data.directories)
    n = len(data.episodes)
    pos = [i for i, e in enumerate(data.episodes) if e.positives > 0]
    neg = [i for i, e in enumerate(data.episodes) if e.positives == 0]
    if n < 2 * min_episodes:
        raise ConfigError(f"--labels {where}: {n} episode(s); the split by episode needs at least {min_episodes} "
                          f"for training and {min_episodes} for validation ({2 * min_episodes} in all)")
    if len(pos) < 2:
        raise ConfigError(f"--labels {where}: only {len(pos)} episode(s) with success labels; training and "
                          f"validation each need one (the split is by episode)")
    rng = np.random.default_rng(seed)
    pos_perm = [pos[i] for i in rng.permutation(len(pos))]
    neg_perm = [neg[i] for i in rng.permutation(len(neg))]
    n_val_pos = min(len(pos) - 1, max(1, round(val_fraction * len(pos))))
    n_val_neg = min(len(neg), round(val_fraction * len(neg)))
    val = pos_perm[:n_val_pos] + neg_perm[:n_val_neg]
    train = pos_perm[n_val_pos:] + neg_perm[n_val_neg:]
    # top up either side to min_episodes (the totals allow it: n >= 2 * min_episodes)
    while len(val) < min_episodes:
        val.append(train.pop(next(i for i in range(len(train) - 1, -1, -1)
                                  if data.episodes[train[i]].positives == 0 or
                                  sum(data.episodes[j].positives > 0 for j in train) > 1)))
    while len(train) < min_episodes:
        train.append(val.pop(next(i for i in range(len(val) - 1, -1, -1)
                                  if data.episodes[val[i]].positives == 0 or
                                  sum(data.episodes[j].positives > 0 for j in val) > 1)))
    return sorted(train), sorted(val)
