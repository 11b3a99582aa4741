"""Run directories: whether `--out DIR` already holds a run (refuse it, or resume it) and where a run's files go.

Every command that trains writes one run directory (`robot-rl train`, `train-bc`, `learner`, and `sim`, whose
directory is its learner's)::

    OUT/checkpoints/     robot_rl.checkpoint (ckpt_* directories, LATEST)       CHECKPOINTS_DIR
    OUT/metrics.jsonl    robot_rl.metrics rows                                  METRICS_FILE
    OUT/tensorboard/     TensorBoard scalars (train and learner alike)          TENSORBOARD_DIR, tensorboard_dir()
    OUT/config.json, OUT/agent_config.json, OUT/learning_curve.png, ...         (the commands' own files)

A directory holds a run once it has a checkpoint, a metrics row (where the command counts them: `metrics=True`)
or data the run took in and has not checkpointed yet (the distributed learner's inbox chunks: `pending`). Anything
less, e.g. the config.json of a start that failed before training, is reused. `check_run_dir` is the one check:

- a fresh start (`resume=False`) refuses a directory that holds a run with a one-line `RunExistsError` that says
  what is there and what to do: "pass --resume to continue it, or choose another --out" (a command that cannot
  resume: "choose another --out"; a run with metrics but no checkpoint: nothing to resume, "delete it or choose
  another --out");
- `resume=True` returns the newest checkpoint to resume from (None when there is none and the command resumes
  without one, as the learner does from its inbox); `needs_checkpoint=True` refuses that instead.

No torch, no learning: the kernel's file layout only.

Usage::

    ckpt = check_run_dir(out, resume=args.resume)        # None: a fresh run; else the checkpoint to resume from
    check_run_dir(out, resume=False, resumable=False, what="a train-bc run")
    writer = SummaryWriter(str(tensorboard_dir(out)))    # OUT/tensorboard
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from robot_rl.checkpoint import latest_checkpoint
from robot_rl.errors import ConfigError

CHECKPOINTS_DIR = "checkpoints"
"""The run's checkpoints (robot_rl.checkpoint), in its run directory."""
METRICS_FILE = "metrics.jsonl"
"""The run's metrics rows (robot_rl.metrics), in its run directory."""
TENSORBOARD_DIR = "tensorboard"
"""The run's TensorBoard scalars, in its run directory (`robot-rl train` and `robot-rl learner` alike)."""


class RunExistsError(ConfigError):
    """`--out` already holds a run and the command was not asked to resume it (or cannot)."""


def tensorboard_dir(out: str | os.PathLike[str]) -> Path:
    """Where a run writes its TensorBoard scalars: OUT/tensorboard."""
    return Path(out) / TENSORBOARD_DIR


def latest_run_checkpoint(out: str | os.PathLike[str], checkpoints: str = CHECKPOINTS_DIR) -> Path | None:
    """The newest complete checkpoint in OUT/`checkpoints`, or None (no such directory, or none in it)."""
    directory = Path(out) / checkpoints
    return latest_checkpoint(directory) if directory.is_dir() else None


def run_evidence(out: str | os.PathLike[str], *, checkpoint_dirs: Sequence[str] = (CHECKPOINTS_DIR,),
                 metrics: bool = True, pending: Sequence[str] = ()) -> list[str]:
    """What makes `out` a run, in words ("checkpoint ckpt_00001000", "metrics.jsonl", `pending` items); [] for a
    directory that holds no run (or does not exist)."""
    found: list[str] = []
    for i, name in enumerate(checkpoint_dirs):
        ckpt = latest_run_checkpoint(out, name)
        if ckpt is not None:
            found.append(f"checkpoint {ckpt.name}" if i == 0 else f"checkpoint {name}/{ckpt.name}")
    if metrics and (Path(out) / METRICS_FILE).is_file():
        found.append(METRICS_FILE)
    found.extend(pending)
    return found


def check_run_dir(out: str | os.PathLike[str], resume: bool, *, resumable: bool = True,
                  needs_checkpoint: bool = True, checkpoint_dirs: Sequence[str] = (CHECKPOINTS_DIR,),
                  metrics: bool = True, pending: Sequence[str] = (), what: str = "a run", flag: str = "--out",
                  ) -> Path | None:
    """Check run directory `out` before a command writes into it (the module docstring's rules); returns the
    newest checkpoint of OUT/`checkpoint_dirs[0]` to resume from, or None for a fresh start.

    `resumable`: the command can continue a run (a `--resume` flag); `needs_checkpoint`: its resume needs a
    checkpoint (else it starts over from what `pending` names); `metrics`: a metrics row marks a run; `pending`:
    more evidence the caller found (e.g. "3 inbox chunk(s)"), which a resume picks up; `what`: the run's name in
    the message ("a run", "a train-bc run"); `flag`: the option that named `out`."""
    ckpt = latest_run_checkpoint(out, checkpoint_dirs[0]) if checkpoint_dirs else None
    if resume:
        if not resumable:
            raise ConfigError(f"--resume: {what} cannot be resumed; start a new one ({flag} DIR)")
        if ckpt is None and needs_checkpoint:
            raise ConfigError(f"--resume: {out} has no checkpoint to resume from")
        return ckpt
    evidence = run_evidence(out, checkpoint_dirs=checkpoint_dirs, metrics=metrics, pending=pending)
    if not evidence:
        return None
    if not resumable:
        raise RunExistsError(f"{flag} {out} already holds {what} ({', '.join(evidence)}); choose another {flag}")
    if evidence == [METRICS_FILE]:
        raise RunExistsError(f"{flag} {out} holds the metrics of a run that stopped before its first checkpoint "
                             f"(nothing to resume); delete it or choose another {flag}")
    raise RunExistsError(f"{flag} {out} already holds {what} ({', '.join(evidence)}); pass --resume to continue it, "
                         f"or choose another {flag}")
