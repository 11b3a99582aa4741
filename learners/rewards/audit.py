"""Label episodes from a reward classifier's audit log: the audit -> relabel -> retrain loop.

`--audit DIR` takes an audit directory, or one above several (a `robot-rl sim` run's RUN/reward_audit, one per actor):
each directory below it that holds a positives.jsonl is read (`audit_dirs_under`).

A run with `--reward classifier:DIR` logs every frame the classifier called positive, and the few negative frames before
each positive (learners.rewards.audit_log `RewardAudit`: `AUDIT_DIR/positives.jsonl` + one PNG per frame, the cameras
side by side). The classifier's false positives there are exactly the negatives its training labels lacked (hard
negatives); a lead frame that shows success is a positive it fired too late on (a hard positive). A person looks at the
frames and writes verdicts; `robot-rl audit-labels` turns the frames + verdicts into label episodes in the format
`robot-rl record-labels` writes, and `robot-rl train-classifier --labels OLD NEW` retrains on both.

Verdicts (`--verdicts FILE`): one frame per line, `<image> success|failure`, whitespace or comma separated, `#`
starts a comment, blank lines are ignored. `<image>` is the row's "image" as in positives.jsonl
("frames/ep000003_t0041.png"); with several audit directories a name that more than one holds must be given with
its directory in front ("runs/x/reward_audit/forward/frames/ep000003_t0041.png"). Only frames with a verdict are
written. On the twin, `--true-success` takes each row's logged "true_success" as the verdict instead: the twin's
privileged stand-in for the person (a rehearsal of the hardware loop; hardware audits have no true success).

Output: one episode file (robot_rl.episodes format) per audited episode of each audit directory, its frames in step
order. Per frame: the card's cameras (with `--all-cameras` every camera the PNG holds: the audit log writes every
camera frame the reward model can read, so a classifier can be retrained on another set of them) split back out of
the PNG (uint8 HxWx3 at the card's image size, exactly the pixels
the classifier saw), `success` = the verdict, `rewards` = 1.0 on success frames (as record-labels writes them),
`actions` zeros (T, `ACTION_DIM`), `terminated` / `truncated` / `intervention` False. Observation row 0 (the "reset
frame", which label files never label) is a copy of the first frame. Consecutive frames of a file are the episode's
logged frames only (positives and their lead frames), so steps may have gaps (`info["steps"]` has the audit's step of
each frame). There is no `state` (the audit keeps pixels only): load_labels fills NaN rows for it, and
train-classifier's k-gate replay applies no proprio predicate to these frames. `info`: "labels" = "audit", "source" (the
audit directory), "verdicts" (the file, or "true_success"), "privileged" (true for --true-success), "segment" = "audit",
"classifier", "audit_episode", and per frame "steps", "images", "probs", "rewarded", "positive" (false: a lead frame).
`task` is the classifier card's.

Rows without a PNG (past `RewardAudit.max_images`) cannot be labelled and are skipped; when a run wrote the same
PNG name twice (its episode counter restarted, e.g. a resumed run) the PNG holds the later frame, so the later
row is used.

Usage::

    result = write_audit_labels(["runs/x/reward_audit"], "runs/cls", "labels/audit1", verdicts="verdicts.txt")
    result.success, result.failure, result.episodes, result.rewarded
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from learners.rewards.audit_log import AUDIT_PNG_PAD
from learners.rewards.classifier import ClassifierCard, read_card
from robot_rl.episodes import Episode, episode_paths, save_episode
from robot_rl.errors import ConfigError, EpisodeFileError, ShapeError
from robot_rl.images import grid_size, read_png, ungrid_frames

POSITIVES_FILE = "positives.jsonl"
ACTION_DIM = 7
"""Columns of the (all-zero) `actions` of an audit label episode: the arm's action (6-D pose delta + gripper), as
in record-labels' files; the audit logs no actions and labels never use them."""
VERDICT_WORDS = {"success": True, "failure": False}
TRUE_SUCCESS_FIELD = "true_success"
_STAGING = ".audit-labels.tmp"


@dataclasses.dataclass(frozen=True)
class AuditRow:
    """One line of an audit directory's positives.jsonl."""

    directory: Path
    """The audit directory (as given)."""
    line: int
    """1-based line number in positives.jsonl."""
    episode: int
    step: int
    prob: float | None
    rewarded: bool
    """The gated success: this frame ended the episode with reward 1."""
    true_success: bool | None
    """The env's true success (the twin only; None on hardware)."""
    image: str | None
    """The PNG's path relative to `directory`; None when none was written (past max_images)."""
    cameras: tuple[str, ...] | None
    """Observation paths in the PNG, left to right; None in rows written before audits named them."""
    positive: bool = True
    """False for a lead frame (a negative frame logged before a positive: RewardAudit.lead_frames)."""

    @property
    def where(self) -> str:
        return f"{self.directory / POSITIVES_FILE}: line {self.line}"


def read_audit(directory: str | os.PathLike[str]) -> list[AuditRow]:
    """Every row of `directory/positives.jsonl`; ConfigError naming the file (and line) when it is missing or a
    line is not an audit row."""
    d = Path(directory)
    path = d / POSITIVES_FILE
    if not path.is_file():
        raise ConfigError(f"--audit {d}: no {POSITIVES_FILE} (a run with --reward classifier:DIR writes it into "
                          f"RUN/reward_audit, or RUN/reward_audit/forward and .../backward, at the first positive "
                          f"frame)")
    rows = []
    for n, text in enumerate(path.read_text().splitlines(), start=1):
        if not text.strip():
            continue
        try:
            r = json.loads(text)
        except ValueError as err:
            raise ConfigError(f"{path}: line {n}: not JSON ({err})") from err
        if not isinstance(r, dict) or not isinstance(r.get("episode"), int) or not isinstance(r.get("step"), int):
            raise ConfigError(f"{path}: line {n}: not an audit row (needs integer 'episode' and 'step')")
        cams = r.get("cameras")
        if cams is not None and (not isinstance(cams, list) or not all(isinstance(c, str) for c in cams)):
            raise ConfigError(f"{path}: line {n}: field 'cameras' must be a list of observation paths, got {cams!r}")
        image = r.get("image")
        if image is not None and not isinstance(image, str):
            raise ConfigError(f"{path}: line {n}: field 'image' must be a path, got {image!r}")
        prob = r.get("prob")
        ts = r.get(TRUE_SUCCESS_FIELD)
        rows.append(AuditRow(d, n, int(r["episode"]), int(r["step"]),
                             float(prob) if isinstance(prob, int | float) else None, bool(r.get("rewarded", False)),
                             bool(ts) if ts is not None else None, image,
                             tuple(cams) if cams is not None else None, r.get("positive") is not False))
    return rows


def audit_dirs_under(directory: str | os.PathLike[str]) -> list[Path]:
    """The audit directories `--audit DIR` names: DIR itself when it holds positives.jsonl, else every directory
    below it that does, sorted (a `robot-rl sim` run's RUN/reward_audit holds one per actor, actor-0, actor-1, ...;
    a forward/backward run's one per direction). ConfigError (read_audit's) when there is none."""
    d = Path(directory)
    if (d / POSITIVES_FILE).is_file() or not d.is_dir():
        return [d]
    found = sorted(p.parent for p in d.rglob(POSITIVES_FILE) if p.is_file())
    return found or [d]


def latest_per_image(rows: Sequence[AuditRow]) -> tuple[list[AuditRow], int]:
    """(rows with a PNG, the last row per PNG name of each directory, in file order; how many earlier rows named
    a PNG that a later row overwrote)."""
    last: dict[tuple[Path, str], AuditRow] = {}
    with_image = [r for r in rows if r.image is not None]
    for r in with_image:
        assert r.image is not None
        last[(r.directory, r.image)] = r
    kept = [r for r in with_image if last[(r.directory, r.image or "")] is r]
    return kept, len(with_image) - len(kept)


def parse_verdicts(path: str | os.PathLike[str], rows: Sequence[AuditRow]) -> dict[tuple[Path, str], bool]:
    """{(audit directory, image): success} from a verdicts file (see the module docstring). ConfigError naming
    the file and line for: an unreadable file, a line that is not `<image> success|failure`, an image no audit row
    names, a bare image name several audit directories hold, the same frame with conflicting verdicts."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as err:
        raise ConfigError(f"--verdicts {p}: unreadable ({type(err).__name__}: {err})") from err
    bare: dict[str, list[Path]] = {}
    full: dict[str, tuple[Path, str]] = {}
    for r in rows:
        if r.image is None:
            continue
        dirs = bare.setdefault(r.image, [])
        if r.directory not in dirs:
            dirs.append(r.directory)
        key = (r.directory, r.image)
        full[os.path.normpath(str(r.directory / r.image))] = key
        full[str((r.directory / r.image).resolve())] = key
    out: dict[tuple[Path, str], bool] = {}
    seen_at: dict[tuple[Path, str], int] = {}
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = [t for t in re.split(r"[,\s]+", line) if t]
        if len(parts) != 2 or parts[1].lower() not in VERDICT_WORDS:
            raise ConfigError(f"{p}: line {n}: expected '<image> success|failure', got {line!r}")
        name, verdict = parts[0], VERDICT_WORDS[parts[1].lower()]
        if name in bare:
            if len(bare[name]) > 1:
                raise ConfigError(f"{p}: line {n}: {name} is in several audit directories "
                                  f"({', '.join(map(str, bare[name]))}); put its directory in front")
            key = (bare[name][0], name)
        else:
            found = full.get(os.path.normpath(name)) or full.get(str(Path(name).resolve()))
            if found is None:
                raise ConfigError(f"{p}: line {n}: unknown image {name!r}: no row of the audit's {POSITIVES_FILE} "
                                  f"names it")
            key = found
        if key in out and out[key] != verdict:
            raise ConfigError(f"{p}: line {n}: {name} is {parts[1].lower()} here but "
                              f"{'success' if out[key] else 'failure'} on line {seen_at[key]}")
        out[key] = verdict
        seen_at.setdefault(key, n)
    return out


def png_cameras(row: AuditRow, card: ClassifierCard, width: int) -> tuple[str, ...]:
    """The observation paths in `row`'s PNG, left to right: the row's "cameras", or (rows written before audits
    named them) the card's cameras in sorted order (RewardAudit's) when a PNG of that many cameras at the card's
    size is `width` pixels wide; ConfigError otherwise."""
    if row.cameras is not None:
        return row.cameras
    w = card.image_size[1]
    n = len(card.cameras)
    if width == grid_size(1, n, card.image_size, AUDIT_PNG_PAD)[1]:
        return tuple(sorted(card.cameras))
    raise ConfigError(f"{row.where}: the row has no 'cameras' field (written before audit rows named their "
                      f"cameras) and its PNG ({width} px wide) does not fit the card's {n} camera(s) at width {w} "
                      f"+ {AUDIT_PNG_PAD} px padding: which camera is where cannot be told")


def split_frame(img: np.ndarray, row: AuditRow, card: ClassifierCard,
                all_cameras: bool = False) -> dict[str, np.ndarray]:
    """{card camera: uint8 (H, W, 3)} cut out of an audit PNG (`img`, decoded), or with `all_cameras` every camera
    the PNG holds (the card's among them); ConfigError naming the row when the PNG's size or padding does not match
    its cameras at the card's image size, or a card camera is not in it."""
    h, w = card.image_size
    pad = AUDIT_PNG_PAD
    cams = png_cameras(row, card, img.shape[1])
    try:
        frames = ungrid_frames(img, 1, len(cams), (h, w), pad)[0]
    except ShapeError as err:
        raise ConfigError(f"{row.where}: {row.image}: {err} (camera(s) {list(cams)} at the card's image size): not "
                          "an audit PNG of this classifier") from err
    missing = [c for c in card.cameras if c not in cams]
    if missing:
        raise ConfigError(f"{row.where}: {row.image} holds cameras {list(cams)}, not the card's {missing[0]!r}")
    return {cam: frames[cams.index(cam)] for cam in (cams if all_cameras else card.cameras)}


def read_frame(row: AuditRow, card: ClassifierCard, all_cameras: bool = False) -> dict[str, np.ndarray]:
    """The card's cameras of `row`'s PNG, or every camera it holds (`split_frame`); ConfigError naming the row for a
    missing or unreadable PNG."""
    assert row.image is not None
    path = row.directory / row.image
    if not path.is_file():
        raise ConfigError(f"{row.where}: its PNG {path} is missing")
    try:
        img = read_png(path)
    except (OSError, ShapeError) as err:
        raise ConfigError(f"{row.where}: unreadable PNG ({err})") from err
    return split_frame(img, row, card, all_cameras)


@dataclasses.dataclass
class AuditLabelsResult:
    """What `write_audit_labels` wrote."""

    paths: list[Path]
    success: int
    """Frames written with verdict success."""
    failure: int
    rewarded: int
    """Written frames the classifier had rewarded (they ended an episode)."""
    lead: int
    """Written frames the classifier had called negative (lead frames before a positive)."""
    rows: int
    """Rows in the audit logs."""
    without_png: int
    """Rows skipped: no PNG was written for them (RewardAudit.max_images)."""
    superseded: int
    """Rows skipped: a later row of the same directory wrote the same PNG name."""

    @property
    def episodes(self) -> int:
        return len(self.paths)

    @property
    def frames(self) -> int:
        return self.success + self.failure


def check_out_dir(out: Path) -> None:
    """ConfigError unless `out` is a directory without episode files (or does not exist yet)."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a directory")
    try:
        existing = episode_paths(out) if out.is_dir() else []
    except EpisodeFileError as err:  # pragma: no cover - is_dir checked above
        raise ConfigError(f"--out {out}: {err}") from err
    if existing:
        raise ConfigError(f"--out {out}: already holds {len(existing)} episode file(s); write audit labels into a "
                          f"new directory (train-classifier takes several: --labels OLD NEW)")


def _episode(frames: list[dict[str, np.ndarray]], rows: list[AuditRow], verdicts: list[bool], card: ClassifierCard,
             info: dict[str, Any]) -> Episode:
    t = len(frames)
    obs = {cam: np.stack([frames[0][cam]] + [f[cam] for f in frames]) for cam in frames[0]}
    success = np.asarray(verdicts, bool)
    info = {**info, "audit_episode": rows[0].episode, "steps": [r.step for r in rows],
            "images": [r.image for r in rows], "probs": [r.prob for r in rows], "rewarded": [r.rewarded for r in rows],
            "positive": [r.positive for r in rows]}
    return Episode(observations=obs, actions=np.zeros((t, ACTION_DIM), np.float32),
                   rewards=success.astype(np.float32), terminated=np.zeros(t, bool), truncated=np.zeros(t, bool),
                   intervention=np.zeros(t, bool), success=success, task=card.task, spec=None, info=info)


def write_audit_labels(audit_dirs: Sequence[str | os.PathLike[str]], classifier: str | os.PathLike[str],
                       out: str | os.PathLike[str], verdicts: str | os.PathLike[str] | None = None,
                       true_success: bool = False, only_rewarded: bool = False,
                       all_cameras: bool = False) -> AuditLabelsResult:
    """Read the audit logs, take the verdicts (a file, or the twin's true success), write one label episode per
    audited episode into `out` (see the module docstring); `all_cameras`: every camera the PNGs hold, not only the
    card's. Nothing is written unless every selected frame reads
    (episodes go to a staging directory inside `out` first). ConfigError, one line, for: no audit directory, a
    missing positives.jsonl, a classifier directory without its card, both or neither verdict source,
    --true-success on rows without a true success, a bad verdicts file, a missing or mis-sized PNG, an empty
    selection, an `out` that already holds episode files."""
    if not audit_dirs:
        raise ConfigError("--audit: give at least one audit directory")
    if (verdicts is None) == (not true_success):
        raise ConfigError("give exactly one verdict source: --verdicts FILE (a person's verdicts) or --true-success "
                          "(the twin's logged true success)")
    out_dir = Path(out)
    check_out_dir(out_dir)
    card = read_card(classifier)
    all_rows: list[AuditRow] = []
    for d in dict.fromkeys(sub for named in audit_dirs for sub in audit_dirs_under(named)):
        all_rows.extend(read_audit(d))
    rows, superseded = latest_per_image(all_rows)
    without_png = sum(r.image is None for r in all_rows)
    if true_success:
        lacking = next((r for r in rows if r.true_success is None), None)
        if lacking is not None:
            raise ConfigError(f"--true-success: {lacking.where} has no {TRUE_SUCCESS_FIELD}: hardware audits have no "
                              f"true_success; write a verdicts file (--verdicts FILE)")
        verdict_of = {(r.directory, r.image or ""): bool(r.true_success) for r in rows}
        source = TRUE_SUCCESS_FIELD
    else:
        assert verdicts is not None
        verdict_of = parse_verdicts(verdicts, all_rows)
        source = str(verdicts)
    judged = [r for r in rows if (r.directory, r.image or "") in verdict_of]
    selected = [r for r in judged if r.rewarded or not only_rewarded]
    if not selected:
        extra = f", {sum(r.rewarded for r in judged)} of those rewarded (--only-rewarded)" if only_rewarded else ""
        raise ConfigError(f"no frames selected: {len(all_rows)} rows, {len(judged)} with verdicts{extra}")
    groups: dict[tuple[Path, int], list[AuditRow]] = {}
    for r in selected:
        groups.setdefault((r.directory, r.episode), []).append(r)
    base_info = {"labels": "audit", "verdicts": source, "privileged": bool(true_success), "segment": "audit",
                 "classifier": str(classifier)}
    stage = out_dir / _STAGING
    if stage.exists():
        shutil.rmtree(stage)
    created = not out_dir.exists()
    paths: list[Path] = []
    n_success = n_rewarded = n_lead = 0
    try:
        staged = []
        for (directory, _), ep_rows in groups.items():
            ep_rows = sorted(ep_rows, key=lambda r: r.step)
            frames = [read_frame(r, card, all_cameras) for r in ep_rows]
            vs = [verdict_of[(r.directory, r.image or "")] for r in ep_rows]
            ep = _episode(frames, ep_rows, vs, card, {**base_info, "source": str(directory)})
            staged.append(save_episode(ep, stage, compress=True))
            n_success += sum(vs)
            n_rewarded += sum(r.rewarded for r in ep_rows)
            n_lead += sum(not r.positive for r in ep_rows)
        out_dir.mkdir(parents=True, exist_ok=True)
        for i, p in enumerate(staged):
            dest = out_dir / f"episode_{i:06d}.npz"
            p.replace(dest)
            paths.append(dest)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        if created and out_dir.is_dir() and not any(out_dir.iterdir()):
            out_dir.rmdir()  # a refusal leaves no empty --out behind
        raise
    shutil.rmtree(stage, ignore_errors=True)
    return AuditLabelsResult(paths, n_success, len(selected) - n_success, n_rewarded, n_lead, len(all_rows),
                             without_png, superseded)
