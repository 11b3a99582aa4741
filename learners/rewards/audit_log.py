"""The reward model's per-step decision and its audit log: what a run writes for `robot-rl audit-labels`.

`RewardDecision` is one step's output of a reward model (learners.rewards.reward_model). `RewardAudit` logs the
frames a classifier called positive, and the few frames before each run of positives (its near misses at the
success line), as JSON rows plus one PNG per frame; `true_success` reads the twin's truth of the scene a frame shows
and `camera_frames` every camera frame a reward model can read. A lower layer than the reward models: they import
from here, and learners.rewards.audit reads what this writes.

Usage::

    audit = RewardAudit("runs/x/reward_audit")          # lead_frames=3: the frames before each first positive too
    audit.remember(episode=3, t=40, decision=d0, obs=obs0, info=info0)   # a negative frame: kept in memory
    audit.log(episode=3, t=41, decision=d1, obs=obs1, info=info1)        # a positive: writes t=40 (lead) and t=41
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.reward_source import REWARD_IMAGES_INFO_KEY, SUCCESS_UNKNOWN_INFO_KEY, reward_image_path
from robot_rl.specs import flatten_value


@dataclasses.dataclass(frozen=True)
class RewardDecision:
    """One step's reward-model output."""

    reward: float
    success: bool
    """The gated success: ends the episode."""
    prob: float | None = None
    """The classifier's success probability for the frame (None for other sources)."""
    positive: bool = False
    """The frame alone was positive (prob >= threshold, or the human's key)."""
    run: int = 0
    """Consecutive positive frames up to this one."""
    predicate_ok: bool = True


def camera_frames(obs: Any, info: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
    """{observation path: uint8 (H, W, 3)} of every camera frame a reward model can read: the observation's images
    and, for paths the observation lacks, the env's reward cameras in `info["reward_images"]` (state mode)."""
    frames = {k: v for k, v in flatten_value(obs).items()
              if isinstance(v, np.ndarray) and v.dtype == np.uint8 and v.ndim == 3}
    extra = info.get(REWARD_IMAGES_INFO_KEY) if isinstance(info, Mapping) else None
    if isinstance(extra, Mapping):
        for name, img in extra.items():
            frames.setdefault(reward_image_path(str(name)), np.asarray(img))
    return frames


FRAME_TRUE_SUCCESS_KEY = "frame_true_success"  # set by reward_model.RewardModelWrapper each step (see true_success)


def true_success(info: Mapping[str, Any], frame: bool = False) -> bool | None:
    """The env's true success in `info` ("success"), or None when it reports none or flags it unknown (hardware:
    `SUCCESS_UNKNOWN_INFO_KEY`). `frame`: the truth of the scene the frame shows where RewardModelWrapper put it
    (`FRAME_TRUE_SUCCESS_KEY`; a camera latency makes it `frame_lag_steps` older)."""
    if frame and FRAME_TRUE_SUCCESS_KEY in info:
        return info[FRAME_TRUE_SUCCESS_KEY]
    if "success" not in info or info.get(SUCCESS_UNKNOWN_INFO_KEY):
        return None
    return bool(info["success"])


AUDIT_PNG_PAD = 2
"""White padding (pixels) around and between the cameras of an audit PNG (robot_rl.images.grid_frames)."""

DEFAULT_AUDIT_LEAD_FRAMES = 3
"""Negative frames logged before each positive (`RewardAudit.lead_frames`): the gate's k, so the frames a classifier
that fires late at the success line missed are there for a verdict (hard positives), beside its false positives
(hard negatives)."""


class RewardAudit:
    """Audit log of a classifier's positive frames and of the `lead_frames` negative frames before each positive:
    `DIR/positives.jsonl` (one JSON object per frame, in step order) and a PNG per frame
    (`DIR/frames/ep<episode>_t<step>.png`, cameras side by side), at most `max_images` PNGs.

    A row: "episode", "step", "prob", "run", "predicate_ok", "rewarded" (the gated success that ended the
    episode), "positive" (false for a lead frame; rows written before lead frames existed lack it and are all
    positive), "true_success" (the twin's: of the scene the late frame shows, `true_success(info, frame=True)`),
    and, when a PNG was written, "image" (its path relative to DIR) and "cameras" (the observation paths in the
    PNG, left to right: sorted, every camera `camera_frames` found, each the frame's exact uint8 pixels,
    `AUDIT_PNG_PAD` px of white around and between them; older rows lack it: learners.rewards.audit then uses the
    card's cameras). `robot-rl audit-labels` turns the frames plus verdicts into label episodes.

    Lead frames: `remember` keeps a copy of each negative frame's cameras (the last `lead_frames` of the episode,
    since its last positive); the next positive of the same episode writes them before itself. A classifier that
    fires a step or two after the scene shows success leaves exactly those frames unrewarded: a person's verdict
    "success" on them is the hard positive a retrained classifier needs to fire on time. 0 turns them off.
    """

    def __init__(self, directory: str | os.PathLike[str], max_images: int = 5000,
                 lead_frames: int = DEFAULT_AUDIT_LEAD_FRAMES) -> None:
        self.directory = Path(directory)
        self.max_images = int(max_images)
        self.lead_frames = max(0, int(lead_frames))
        self.images = 0
        self.rows = 0
        self._file: Any = None  # opened at the first positive: nothing is written before there is something
        self._lead: collections.deque[tuple[int, int, RewardDecision, dict[str, np.ndarray], bool | None]] = \
            collections.deque(maxlen=self.lead_frames)

    def remember(self, episode: int, t: int, decision: RewardDecision, obs: Any, info: Mapping[str, Any]) -> None:
        """A negative frame: kept (a copy of its cameras) in case a positive follows within `lead_frames` steps."""
        if self.lead_frames == 0:
            return
        if self._lead and self._lead[-1][0] != episode:
            self._lead.clear()
        frames = {k: np.array(v, dtype=np.uint8, copy=True) for k, v in camera_frames(obs, info).items()}
        self._lead.append((episode, t, decision, frames, true_success(info, frame=True)))

    def log(self, episode: int, t: int, decision: RewardDecision, obs: Any, info: Mapping[str, Any]) -> None:
        """A positive frame: the remembered lead frames of this episode first, then the frame itself."""
        for ep, lead_t, lead_d, frames, true in self._lead:
            if ep == episode and lead_t < t:
                self._write(ep, lead_t, lead_d, frames, true, positive=False)
        self._lead.clear()
        self._write(episode, t, decision, camera_frames(obs, info), true_success(info, frame=True), positive=True)

    def _write(self, episode: int, t: int, decision: RewardDecision, frames: Mapping[str, np.ndarray],
               true: bool | None, positive: bool) -> None:
        from robot_rl.images import grid_frames, write_png

        if self._file is None or self._file.closed:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._file = open(self.directory / "positives.jsonl", "a", buffering=1)  # closed in close()
        row: dict[str, Any] = {"episode": episode, "step": t, "prob": decision.prob, "run": decision.run,
                               "predicate_ok": decision.predicate_ok, "rewarded": decision.success,
                               "positive": positive}
        if true is not None:
            row["true_success"] = true
        cams = sorted(frames.items())
        if cams and self.images < self.max_images:
            name = f"frames/ep{episode:06d}_t{t:04d}.png"
            write_png(self.directory / name, grid_frames([[v for _, v in cams]], pad=AUDIT_PNG_PAD))
            row["image"] = name
            row["cameras"] = [k for k, _ in cams]
            self.images += 1
        self._file.write(json.dumps(row) + "\n")
        self.rows += 1

    def close(self) -> None:
        if self._file is not None and not self._file.closed:
            self._file.close()
