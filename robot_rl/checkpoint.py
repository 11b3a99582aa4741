"""Atomic, resumable checkpoints made of plain numpy arrays and JSON (no pickle anywhere).

Layout of a run directory::

    OUT/checkpoints/ckpt_00012000/   one directory per checkpoint (env step in the name)
        <group>.npz                  one file per array group (agent, optimizers, replay_online, ...)
        meta.json                    counters, RNG states, config: anything JSON
    OUT/checkpoints/LATEST           name of the newest complete checkpoint (written last, atomically)

A checkpoint is written into a temporary directory, fsynced, then renamed into place, then LATEST is
replaced: a crash at any point leaves the previous checkpoint intact and never a half-written one.

Usage::

    save_checkpoint(out / "checkpoints", step=12000, groups={"agent": agent_arrays}, meta={"env_step": 12000})
    ckpt = latest_checkpoint(out / "checkpoints")      # Path or None
    groups, meta = load_checkpoint(ckpt)
    ckpt = find_checkpoint(user_path)    # a run dir, its checkpoints/ or one ckpt_*; else says what the path is
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.errors import RobotRLError


class CheckpointError(RobotRLError):
    """A checkpoint is missing, incomplete or corrupt (names the path)."""


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(
    directory: str | os.PathLike[str],
    step: int,
    groups: Mapping[str, Mapping[str, np.ndarray]],
    meta: Mapping[str, Any],
    keep: int = 2,
) -> Path:
    """Write checkpoint `ckpt_<step>` atomically; keep the newest `keep` checkpoints; returns its path."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"ckpt_{step:08d}"
    tmp = root / f".tmp_ckpt_{step:08d}_{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    for name, arrays in groups.items():
        if not name.replace("_", "").isalnum():
            raise CheckpointError(f"invalid checkpoint group name {name!r}")
        with open(tmp / f"{name}.npz", "wb") as f:
            plain: dict[str, Any] = {k: np.asarray(v) for k, v in arrays.items()}
            np.savez(f, **plain)
            f.flush()
            os.fsync(f.fileno())
    with open(tmp / "meta.json", "w") as f:
        json.dump({"step": int(step), "groups": sorted(groups), **dict(meta)}, f)
        f.flush()
        os.fsync(f.fileno())
    _fsync_dir(tmp)
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    latest_tmp = root / ".LATEST.tmp"
    latest_tmp.write_text(final.name)
    latest_tmp.replace(root / "LATEST")
    _fsync_dir(root)
    for old in sorted(p for p in root.glob("ckpt_*") if p.is_dir())[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(directory: str | os.PathLike[str]) -> Path | None:
    """The newest complete checkpoint in `directory`, or None if there is none."""
    root = Path(directory)
    pointer = root / "LATEST"
    if pointer.is_file():
        cand = root / pointer.read_text().strip()
        if (cand / "meta.json").is_file():
            return cand
    complete = sorted(p for p in root.glob("ckpt_*") if (p / "meta.json").is_file())
    return complete[-1] if complete else None


WHAT_TO_PASS = ("pass a run directory (the --out of robot-rl train, learner or sim), its checkpoints/ directory "
                "or one checkpoints/ckpt_* directory")


def find_checkpoint(path: str | os.PathLike[str]) -> Path:
    """The checkpoint a user means by `path`: `path` itself (a ckpt_* directory with meta.json), the newest one
    of a checkpoints/ directory, or of a run directory's checkpoints/. Anything else raises CheckpointError
    saying what `path` is (missing, a file, recorded episodes, a run without a checkpoint yet, ...) and what to
    pass instead."""
    p = Path(path)
    if (p / "meta.json").is_file():
        return p
    for root in (p, p / "checkpoints"):
        found = latest_checkpoint(root) if root.is_dir() else None
        if found is not None:
            return found
    raise CheckpointError(f"{p}: {_what_it_is(p)}; {WHAT_TO_PASS}")


def _what_it_is(p: Path) -> str:
    """A short description of a path that holds no checkpoint (for error messages)."""
    if not p.exists():
        return "no such file or directory"
    if not p.is_dir():
        kind = "an episode file" if p.suffix == ".npz" else "a file"
        return f"{kind}, not a run directory"
    names = {q.name for q in p.iterdir()}
    hint = ""
    for up in (p.parent, p.parent.parent):
        if up != p and latest_checkpoint(up / "checkpoints") is not None:
            hint = f" (the run directory {up} above it has one)"
            break
    if p.name.startswith(".tmp_ckpt_") or p.name.startswith("ckpt_"):
        return f"an incomplete checkpoint (no meta.json){hint}"
    if any(n.startswith("episode_") and n.endswith(".npz") for n in names):
        return f"a directory of recorded episodes (demos or labels), not a training run{hint}"
    if names & {"checkpoints", "metrics.jsonl", "status.json", "config.json", "inbox"}:
        return "a run directory without a complete checkpoint yet"
    if "LATEST" in names or any(n.startswith(".tmp_ckpt_") for n in names):
        return "a checkpoints/ directory without a complete checkpoint"
    return f"not a run directory: no checkpoints/, no meta.json{hint}"


def load_checkpoint(path: str | os.PathLike[str], only: Collection[str] | None = None,
                    ) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, Any]]:
    """Read a checkpoint directory: ({group: {name: array}}, meta). Raises CheckpointError naming the file.
    `only`: read just these groups (those the checkpoint has), e.g. the agent without its replay buffers."""
    p = Path(path)
    try:
        meta = json.loads((p / "meta.json").read_text())
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{p}: unreadable checkpoint meta.json ({err})") from err
    if not isinstance(meta, dict):
        raise CheckpointError(f"{p}: unreadable checkpoint meta.json (not a JSON object)")
    groups: dict[str, dict[str, np.ndarray]] = {}
    for name in meta.get("groups", []):
        if only is not None and name not in only:
            continue
        f = p / f"{name}.npz"
        try:
            with np.load(f, allow_pickle=False) as z:
                groups[name] = {k: z[k] for k in z.files}
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
            raise CheckpointError(f"{f}: unreadable checkpoint group ({err})") from err
    return groups, meta
