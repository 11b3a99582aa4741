"""The episode tools behind `robot-rl episodes` (PATH: an episode directory or one episode file): `inspect_episodes`
(a table and a totals line), `export_episodes` (PNG strips or mp4 per episode; a rosbag2 / MCAP bag per episode or
one LeRobot dataset), `import_episodes` (a LeRobot dataset's episodes appended as episode files) and
`replay_episodes` (the actions replayed on the twin from the recorded seed, with the TCP drift). Each writes its
report to `out` / `err` (default stdout / stderr) and returns the command's exit code (demos.formats.episode_io:
EXIT_OK, EXIT_ERROR, EXIT_SOME_SKIPPED, EXIT_DRIFT); the command line is documented in `robot-rl episodes --help`.

Usage::

    inspect_episodes("demos/pick")                                       # 0; the table on stdout
    export_episodes("demos/pick", frames=8)                              # demos/pick/export/episode_000000.png ...
    export_episodes("demos/pick", lerobot=Path("runs/lerobot/pick"))
    replay_episodes("demos/pick", tolerance=0.001)                       # 4 when some episode drifted more
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from demos.formats.episode_io import (
    EXIT_DRIFT,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_SOME_SKIPPED,
    EpisodeToolError,
    camera_names,
    load_episodes,
)
from demos.formats.video import camera_strip, find_ffmpeg, video_frames, write_mp4
from robot_rl.episodes import Episode
from robot_rl.errors import RobotRLError
from robot_rl.images import write_png

Path_ = str | os.PathLike[str]


# ----------------------------------------------------------------------------------------------------------
# inspect


@dataclasses.dataclass(frozen=True)
class EpisodeSummary:
    """One row of `episodes inspect`."""

    file: str
    steps: int
    success: bool
    success_steps: int
    interventions: int
    cameras: tuple[tuple[str, int, int], ...]
    """(name, height, width) per camera."""
    episode_return: float

    @property
    def intervention_rate(self) -> float:
        return self.interventions / self.steps if self.steps else 0.0


def summarize(file: str | os.PathLike[str], ep: Episode) -> EpisodeSummary:
    cams = tuple((n, int(ep.observations[f"images/{n}"].shape[1]), int(ep.observations[f"images/{n}"].shape[2]))
                 for n in camera_names(ep))
    return EpisodeSummary(file=Path(file).name, steps=ep.length, success=ep.is_success,
                          success_steps=int(ep.success.sum()), interventions=int(ep.intervention.sum()),
                          cameras=cams, episode_return=float(ep.rewards.astype(np.float64).sum()))


def format_table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> list[str]:
    """Left-aligned text columns separated by two spaces."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]]


def inspect_lines(summaries: Sequence[EpisodeSummary]) -> list[str]:
    """The table and the totals line of `episodes inspect`."""
    header = ("file", "steps", "success", "success_steps", "interventions", "interv_rate", "cameras", "return")
    rows = [
        (s.file, str(s.steps), "yes" if s.success else "no", str(s.success_steps), str(s.interventions),
         f"{s.intervention_rate:.0%}", " ".join(f"{n}:{h}x{w}" for n, h, w in s.cameras) or "-",
         f"{s.episode_return:.2f}")
        for s in summaries
    ]
    lines = format_table(rows, header)
    n = len(summaries)
    steps = sum(s.steps for s in summaries)
    succ = sum(s.success for s in summaries)
    interv = sum(s.interventions for s in summaries)
    ret = sum(s.episode_return for s in summaries)
    lines.append(
        f"total: {n} episodes, {steps} steps, {succ}/{n} successful ({succ / n if n else 0:.0%}), "
        f"{sum(s.success_steps for s in summaries)} success steps, {interv} interventions "
        f"({interv / steps if steps else 0:.0%} of steps), return {ret:.2f} (mean {ret / n if n else 0:.2f})"
    )
    return lines


def inspect_episodes(path: Path_, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """`episodes inspect PATH`: the table of the readable episodes, an error line per unreadable file."""
    out, err = out or sys.stdout, err or sys.stderr
    loaded, errors = load_episodes(path)
    for line in inspect_lines([summarize(f, ep) for f, ep in loaded]):
        print(line, file=out)
    for error in errors:
        print(f"error: {error}", file=err)
    return EXIT_SOME_SKIPPED if errors else EXIT_OK


# ----------------------------------------------------------------------------------------------------------
# export / import


def export_episodes(path: Path_, out_dir: Path_ | None = None, video: bool = False, frames: int = 8,
                    fps: float = 10.0, mcap: Path_ | None = None, lerobot: Path_ | None = None,
                    out: TextIO | None = None, err: TextIO | None = None) -> int:
    """`episodes export PATH`: per episode a PNG strip of `frames` moments (or with `video` an mp4 at `fps` when an
    ffmpeg binary is found, else PNG strips with a warning) into `out_dir` (default PATH/export); with `mcap` one
    rosbag2 bag per episode under it, with `lerobot` one LeRobot dataset there."""
    out, err = out or sys.stdout, err or sys.stderr
    if fps <= 0:
        raise EpisodeToolError(f"--fps={fps} must be > 0")
    if mcap is not None or lerobot is not None:
        return _export_data(path, fps, mcap, lerobot, out, err)
    if frames < 1:
        raise EpisodeToolError(f"--frames={frames} must be >= 1")
    loaded, errors = load_episodes(path)
    source = Path(path)
    target = Path(out_dir) if out_dir is not None else (source if source.is_dir() else source.parent) / "export"
    ffmpeg = find_ffmpeg() if video else None
    if video and ffmpeg is None:
        from robot_rl.extras import install_hint

        print(f"warning: no ffmpeg binary on PATH (or {install_hint('video')}); writing PNG strips instead of "
              "mp4", file=err)
    problems: list[RobotRLError] = list(errors)
    written = 0
    for f, ep in loaded:
        try:
            if ffmpeg is not None:
                written_to = write_mp4(target / f"{f.stem}.mp4", video_frames(ep, str(f)), fps, ffmpeg)
                what = f"{ep.length + 1} frames"
            else:
                img, idx = camera_strip(ep, frames, str(f))
                written_to = write_png(target / f"{f.stem}.png", img)
                what = f"{len(camera_names(ep))} camera(s) x {len(idx)} frames, {img.shape[1]}x{img.shape[0]}"
        except EpisodeToolError as e:
            problems.append(e)
            continue
        written += 1
        print(f"{f.name} -> {written_to} ({what})", file=out)
    for problem in problems:
        print(f"error: {problem}", file=err)
    if written == 0:
        if not problems:
            print(f"error: no episodes in {source}", file=err)
        return EXIT_ERROR
    return EXIT_SOME_SKIPPED if problems else EXIT_OK


def _export_data(path: Path_, fps: float, mcap: Path_ | None, lerobot: Path_ | None, out: TextIO,
                 err: TextIO) -> int:
    """`export --mcap DIR` (one rosbag2/MCAP bag per episode) or `export --lerobot DIR` (one LeRobot dataset)."""
    loaded, errors = load_episodes(path)
    for error in errors:
        print(f"error: {error}", file=err)
    if not loaded:
        print(f"error: no readable episodes in {path}", file=err)
        return EXIT_ERROR
    if mcap is not None:
        from demos.formats.rosbag import export_mcap

        for f, bag in export_mcap(loaded, mcap, fps=fps):
            print(f"{f.name} -> {bag} (rosbag2, MCAP storage)", file=out)
    else:
        from demos.formats.lerobot import export_lerobot

        assert lerobot is not None
        dataset = export_lerobot(loaded, lerobot, fps=fps)
        n_frames = sum(ep.length for _, ep in loaded)
        print(f"{len(loaded)} episodes, {n_frames} frames -> {dataset} (LeRobotDataset v3.0)", file=out)
    return EXIT_SOME_SKIPPED if errors else EXIT_OK


def import_episodes(path: Path_, lerobot: Path_, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """`episodes import PATH --lerobot DIR`: every episode of a LeRobot dataset, appended to the episode directory
    PATH."""
    from demos.formats.lerobot import import_lerobot
    from robot_rl.episodes import save_episode

    out, err = out or sys.stdout, err or sys.stderr
    episodes = import_lerobot(lerobot)
    if not episodes:
        print(f"error: {lerobot}: the dataset has no episodes", file=err)
        return EXIT_ERROR
    for ep in episodes:
        saved = save_episode(ep, path)
        print(f"episode {ep.info['lerobot']['episode_index']} ({ep.length} steps) -> {saved}", file=out)
    return EXIT_OK


# ----------------------------------------------------------------------------------------------------------
# replay


@dataclasses.dataclass(frozen=True)
class ReplayResult:
    """Drift of one replayed episode (distances in metres, over observations 0..steps)."""

    file: str
    steps: int
    replayed_steps: int
    max_drift_m: float
    final_drift_m: float
    success_recorded: bool
    success_replayed: bool
    note: str = ""

    @property
    def success_reproduced(self) -> bool:
        return self.success_recorded == self.success_replayed


def tcp_positions(ep: Episode) -> np.ndarray:
    """(T+1, 3) recorded TCP positions relative to the task's nominal reset pose (`obs/state[:, :3]`)."""
    if "state" not in ep.observations:
        raise EpisodeToolError("the episode has no 'state' observation (proprio) to compare")
    return ep.observations["state"][:, :3].astype(np.float64)


def replay_episode(env: Any, task_success: Any, ep: Episode, file: str = "episode") -> ReplayResult:
    """Replay `ep.actions` on `env` (made by `demos.recording.labels.make_continuing_env`, so success does not
    stop it) from `reset(seed=ep.info["seed"])` and measure the TCP drift against the recording."""
    seed = ep.info.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise EpisodeToolError(f"{file}: no integer info['seed'] recorded (info={ep.info}); cannot replay")
    try:
        recorded = tcp_positions(ep)
    except EpisodeToolError as e:
        raise EpisodeToolError(f"{file}: {e}") from None
    obs, _ = env.reset(seed=seed)
    replayed = [np.asarray(obs["state"][:3], np.float64)]
    success, note = False, ""
    for t in range(ep.length):
        obs, _, terminated, truncated, info = env.step(ep.actions[t])
        replayed.append(np.asarray(obs["state"][:3], np.float64))
        success = success or task_success(getattr(env.unwrapped, "last_state", None), info)
        if (terminated or truncated) and t < ep.length - 1:
            note = f"env ended the replay after {t + 1} of {ep.length} steps"
            break
    rep = np.stack(replayed)
    drift = np.linalg.norm(rep - recorded[: len(rep)], axis=1)
    return ReplayResult(file=Path(file).name, steps=ep.length, replayed_steps=len(rep) - 1,
                        max_drift_m=float(drift.max()), final_drift_m=float(drift[-1]),
                        success_recorded=ep.is_success, success_replayed=bool(success), note=note)


def replay_lines(results: Sequence[ReplayResult]) -> list[str]:
    header = ("file", "steps", "replayed", "max_drift_mm", "final_drift_mm", "success rec/replay", "reproduced")
    rows = [
        (r.file, str(r.steps), str(r.replayed_steps), f"{1e3 * r.max_drift_m:.3f}", f"{1e3 * r.final_drift_m:.3f}",
         f"{'yes' if r.success_recorded else 'no'}/{'yes' if r.success_replayed else 'no'}",
         ("yes" if r.success_reproduced else "NO") + (f" ({r.note})" if r.note else ""))
        for r in results
    ]
    lines = format_table(rows, header)
    if results:
        worst = max(r.max_drift_m for r in results)
        same = sum(r.success_reproduced for r in results)
        lines.append(f"total: {len(results)} episodes replayed, worst drift {1e3 * worst:.3f} mm, success "
                     f"reproduced in {same}/{len(results)}")
    return lines


def replay_episodes(path: Path_, task: str | None = None, tolerance: float | None = None,
                    out: TextIO | None = None, err: TextIO | None = None) -> int:
    """`episodes replay PATH`: each episode's actions on the twin of its task (or `task`), state observations,
    success not ending it (demos.recording.labels.make_continuing_env), and the drift table; EXIT_DRIFT when an
    episode drifted more than `tolerance` metres."""
    from demos.recording.labels import make_continuing_env

    out, err = out or sys.stdout, err or sys.stderr
    loaded, errors = load_episodes(path)
    problems: list[RobotRLError] = list(errors)
    envs: dict[tuple[str, str], tuple[Any, Any]] = {}
    results: list[ReplayResult] = []
    try:
        for f, ep in loaded:
            ep_task = task or ep.task
            if not ep_task:
                problems.append(EpisodeToolError(f"{f}: no task recorded in the episode; pass --task"))
                continue
            kwargs = {k: v for k, v in dict(ep.info.get("env_kwargs") or {}).items()
                      if k not in ("obs_mode", "image_size", "camera_names", "render_mode")}
            key = (ep_task, repr(sorted(kwargs.items())))
            if key not in envs:
                envs[key] = make_continuing_env(ep_task, obs_mode="state", **kwargs)
            env, task_success = envs[key]
            try:
                results.append(replay_episode(env, task_success, ep, str(f)))
            except EpisodeToolError as e:
                problems.append(e)
    finally:
        for env, _ in envs.values():
            env.close()
    for line in replay_lines(results):
        print(line, file=out)
    for problem in problems:
        print(f"error: {problem}", file=err)
    if not results and not problems:
        print(f"error: no episodes in {path}", file=err)
        return EXIT_ERROR
    if tolerance is not None and any(r.max_drift_m > tolerance for r in results):
        print(f"drift above the tolerance of {tolerance} m", file=err)
        return EXIT_DRIFT
    return EXIT_SOME_SKIPPED if problems else EXIT_OK
