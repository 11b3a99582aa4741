"""`robot-rl episodes`: look at, export and replay recorded episodes (robot_rl.episodes files).

Subcommands (PATH is an episode directory or one episode file):

- `inspect PATH`: a table of the episodes (file, steps, success, success frames, interventions count/rate,
  cameras with HxW, return) and a totals line. A corrupt or truncated file gets an error line naming it;
  the other episodes are still listed.
- `export PATH [--video] [--frames N] [--out OUT] [--fps F]`: per episode, a PNG strip of its cameras (rows =
  cameras, columns = N frames sampled evenly over time, first and last included), or with `--video` an mp4
  (the cameras side by side, every frame) through `ffmpeg` (the one on PATH, else the binary bundled by the
  `video` extra's imageio-ffmpeg), else the PNG strip with a warning. Files go to OUT (default PATH/export)
  named after the episode. An episode without camera images (recorded in state mode) gets an error line.
- `export PATH --mcap DIR`: one rosbag2 bag in MCAP storage per episode (images, TCP poses, actions, rewards,
  interventions; demos.formats.rosbag) for Foxglove or `ros2 bag play`; `export PATH --lerobot DIR`: the episodes
  as one LeRobotDataset v3.0 (demos.formats.lerobot). Both need the `export` extra (rosbags, pyarrow, ffmpeg).
- `import PATH --lerobot DIR`: the episodes of a LeRobot dataset (v3.0 or v2.x) appended to PATH as episode files.
- `replay PATH [--task T] [--tolerance M]`: replays each episode's actions on the twin from the same seed
  (`info["seed"]`; state observations, success does not end the replay early) and reports the drift: the
  max and final distance (m) between the recorded and replayed TCP positions (`obs/state[:, :3]`, the TCP
  relative to the task's nominal reset pose) and whether success reproduced. The twin is deterministic, so
  an unmodified recording replays with ~0 drift.

Exit codes: 0 all episodes processed; 1 error (bad arguments, no such directory, nothing to export);
3 some episodes were skipped (unreadable file, no images to export, no seed to replay) and the others
processed; 4 (`replay --tolerance M`) some episode drifted more than M metres.

Usage::

    robot-rl episodes inspect demos/pick
    robot-rl episodes export demos/pick --frames 8             # demos/pick/export/episode_000000.png ...
    robot-rl episodes export demos/pick --video --out /tmp/vid
    robot-rl episodes replay demos/pick --tolerance 0.001
    robot-rl episodes export demos/pick --mcap runs/bags                    # runs/bags/episode_000000/
    robot-rl episodes export demos/pick --lerobot runs/lerobot/pick
    robot-rl episodes import demos/from_lerobot --lerobot ~/datasets/some_teleop_dataset
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from robot_rl.episodes import Episode, episode_paths, load_episode
from robot_rl.errors import EpisodeFileError, RobotRLError
from robot_rl.images import grid_frames, write_png

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_SOME_SKIPPED = 3
EXIT_DRIFT = 4


class EpisodeToolError(RobotRLError):
    """An episode cannot be used for what was asked (no images to export, no seed to replay); names the file."""


# ----------------------------------------------------------------------------------------------------------
# loading


def load_episodes(path: str | os.PathLike[str]) -> tuple[list[tuple[Path, Episode]], list[EpisodeFileError]]:
    """(file, episode) for every readable episode under `path` (a directory or one file), and the errors of
    the unreadable ones (each names its file). A missing path raises EpisodeFileError."""
    p = Path(path)
    if p.is_file():
        files = [p]
    elif p.is_dir():
        files = episode_paths(p)
    else:
        raise EpisodeFileError(f"{p}: no such episode file or directory")
    loaded: list[tuple[Path, Episode]] = []
    errors: list[EpisodeFileError] = []
    for f in files:
        try:
            loaded.append((f, load_episode(f)))
        except EpisodeFileError as err:
            errors.append(err)
    return loaded, errors


def camera_names(ep: Episode) -> list[str]:
    """Camera names of the episode's image observations (`obs/images/<name>`), in file order."""
    return [k[len("images/"):] for k in ep.observations if k.startswith("images/")]


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


def cmd_inspect(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    loaded, errors = load_episodes(args.path)
    for line in inspect_lines([summarize(f, ep) for f, ep in loaded]):
        print(line, file=out)
    for error in errors:
        print(f"error: {error}", file=err)
    return EXIT_SOME_SKIPPED if errors else EXIT_OK


# ----------------------------------------------------------------------------------------------------------
# export


def sample_indices(n_frames: int, n: int) -> np.ndarray:
    """`n` frame indices spread evenly over 0..n_frames-1 (first and last included; all if n >= n_frames)."""
    if n_frames < 1 or n < 1:
        raise ValueError(f"need n_frames >= 1 and n >= 1, got {n_frames}, {n}")
    if n >= n_frames:
        return np.arange(n_frames)
    if n == 1:
        return np.zeros(1, np.int64)
    return np.floor(np.linspace(0, n_frames - 1, n) + 0.5).astype(np.int64)


def _require_images(file: str | os.PathLike[str], ep: Episode) -> list[str]:
    cams = camera_names(ep)
    if not cams:
        raise EpisodeToolError(f"{file}: the episode has no camera images (recorded in state mode?); "
                               f"observation keys: {', '.join(ep.observations)}")
    return cams


def camera_strip(ep: Episode, n_frames: int, file: str = "episode", pad: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """(image uint8 (H', W', 3), frame indices): rows = cameras, columns = `n_frames` frames sampled over time,
    tiled by `robot_rl.images.grid_frames` with `pad` pixels of white between them."""
    cams = _require_images(file, ep)
    idx = sample_indices(ep.length + 1, n_frames)
    rows = [[ep.observations[f"images/{c}"][i] for i in idx] for c in cams]
    return grid_frames(rows, pad=pad), idx


def video_frames(ep: Episode, file: str = "episode", pad: int = 2) -> list[np.ndarray]:
    """One image per observation: the cameras side by side, padded to even height and width (yuv420p)."""
    cams = _require_images(file, ep)
    frames = []
    for i in range(ep.length + 1):
        img = grid_frames([[ep.observations[f"images/{c}"][i] for c in cams]], pad=pad)
        h, w, _ = img.shape
        if h % 2 or w % 2:
            img = np.pad(img, ((0, h % 2), (0, w % 2), (0, 0)), constant_values=255)
        frames.append(img)
    return frames


def bundled_ffmpeg() -> str | None:
    """The ffmpeg binary shipped in the imageio-ffmpeg wheel (`pip install robot-rl[video]`), or None."""
    try:
        import imageio_ffmpeg

        exe = str(imageio_ffmpeg.get_ffmpeg_exe())
    except Exception:  # not installed, or no binary for this platform
        return None
    return exe if os.access(exe, os.X_OK) else None


def find_ffmpeg() -> str | None:
    """The `ffmpeg` binary on PATH, else the bundled one (see `bundled_ffmpeg`), else None."""
    return shutil.which("ffmpeg") or bundled_ffmpeg()


def write_mp4(path: str | os.PathLike[str], frames: Sequence[np.ndarray], fps: float, ffmpeg: str) -> Path:
    """Pipe raw RGB frames (all the same (H, W, 3) uint8, H and W even) into `ffmpeg` (its default mp4 codec,
    yuv420p); written atomically."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    h, w, _ = frames[0].shape
    tmp = out.with_name(f".{out.stem}.tmp{out.suffix}")
    cmd = [ffmpeg, "-hide_banner", "-loglevel", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24",
           "-s", f"{w}x{h}", "-r", f"{fps:g}", "-i", "-", "-an", "-pix_fmt", "yuv420p", str(tmp)]
    data = b"".join(np.ascontiguousarray(f, np.uint8).tobytes() for f in frames)
    try:
        proc = subprocess.run(cmd, input=data, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    except OSError as e:
        raise EpisodeToolError(f"{out}: cannot run {ffmpeg}: {e}") from e
    rc, stderr = proc.returncode, proc.stderr.decode(errors="replace")
    if rc != 0 or not tmp.exists():
        tmp.unlink(missing_ok=True)
        raise EpisodeToolError(f"{out}: ffmpeg failed (exit {rc}): {stderr.strip()[-500:]}")
    tmp.replace(out)
    return out


def cmd_export_data(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`export --mcap DIR` (one rosbag2/MCAP bag per episode) or `export --lerobot DIR` (one LeRobot dataset)."""
    loaded, errors = load_episodes(args.path)
    for error in errors:
        print(f"error: {error}", file=err)
    if not loaded:
        print(f"error: no readable episodes in {args.path}", file=err)
        return EXIT_ERROR
    if args.mcap is not None:
        from demos.formats.rosbag import export_mcap

        for f, bag in export_mcap(loaded, args.mcap, fps=args.fps):
            print(f"{f.name} -> {bag} (rosbag2, MCAP storage)", file=out)
    else:
        from demos.formats.lerobot import export_lerobot

        path = export_lerobot(loaded, args.lerobot, fps=args.fps)
        frames = sum(ep.length for _, ep in loaded)
        print(f"{len(loaded)} episodes, {frames} frames -> {path} (LeRobotDataset v3.0)", file=out)
    return EXIT_SOME_SKIPPED if errors else EXIT_OK


def cmd_import(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`import PATH --lerobot DIR`: every episode of a LeRobot dataset, appended to the episode directory PATH."""
    from demos.formats.lerobot import import_lerobot
    from robot_rl.episodes import save_episode

    episodes = import_lerobot(args.lerobot)
    if not episodes:
        print(f"error: {args.lerobot}: the dataset has no episodes", file=err)
        return EXIT_ERROR
    for ep in episodes:
        path = save_episode(ep, args.path)
        print(f"episode {ep.info['lerobot']['episode_index']} ({ep.length} steps) -> {path}", file=out)
    return EXIT_OK


def cmd_export(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.fps <= 0:
        raise EpisodeToolError(f"--fps={args.fps} must be > 0")
    if args.mcap is not None or args.lerobot is not None:
        return cmd_export_data(args, out, err)
    if args.frames < 1:
        raise EpisodeToolError(f"--frames={args.frames} must be >= 1")
    if args.fps <= 0:
        raise EpisodeToolError(f"--fps={args.fps} must be > 0")
    loaded, errors = load_episodes(args.path)
    source = Path(args.path)
    out_dir = Path(args.out) if args.out is not None else (source if source.is_dir() else source.parent) / "export"
    ffmpeg = find_ffmpeg() if args.video else None
    if args.video and ffmpeg is None:
        print("warning: no ffmpeg binary on PATH (or `pip install robot-rl[video]`); writing PNG strips instead of "
              "mp4", file=err)
    problems: list[RobotRLError] = list(errors)
    written = 0
    for f, ep in loaded:
        try:
            if ffmpeg is not None:
                path = write_mp4(out_dir / f"{f.stem}.mp4", video_frames(ep, str(f)), args.fps, ffmpeg)
                what = f"{ep.length + 1} frames"
            else:
                img, idx = camera_strip(ep, args.frames, str(f))
                path = write_png(out_dir / f"{f.stem}.png", img)
                what = f"{len(camera_names(ep))} camera(s) x {len(idx)} frames, {img.shape[1]}x{img.shape[0]}"
        except EpisodeToolError as e:
            problems.append(e)
            continue
        written += 1
        print(f"{f.name} -> {path} ({what})", file=out)
    for problem in problems:
        print(f"error: {problem}", file=err)
    if written == 0:
        if not problems:
            print(f"error: no episodes in {source}", file=err)
        return EXIT_ERROR
    return EXIT_SOME_SKIPPED if problems else EXIT_OK


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
    """Replay `ep.actions` on `env` (made by `demos.cli.record_labels.make_continuing_env`, so success does not stop
    it) from `reset(seed=ep.info["seed"])` and measure the TCP drift against the recording."""
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


def cmd_replay(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from demos.cli.record_labels import make_continuing_env

    loaded, errors = load_episodes(args.path)
    problems: list[RobotRLError] = list(errors)
    envs: dict[tuple[str, str], tuple[Any, Any]] = {}
    results: list[ReplayResult] = []
    try:
        for f, ep in loaded:
            task = args.task or ep.task
            if not task:
                problems.append(EpisodeToolError(f"{f}: no task recorded in the episode; pass --task"))
                continue
            kwargs = {k: v for k, v in dict(ep.info.get("env_kwargs") or {}).items()
                      if k not in ("obs_mode", "image_size", "camera_names", "render_mode")}
            key = (task, repr(sorted(kwargs.items())))
            if key not in envs:
                envs[key] = make_continuing_env(task, obs_mode="state", **kwargs)
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
        print(f"error: no episodes in {args.path}", file=err)
        return EXIT_ERROR
    if args.tolerance is not None and any(r.max_drift_m > args.tolerance for r in results):
        print(f"drift above the tolerance of {args.tolerance} m", file=err)
        return EXIT_DRIFT
    return EXIT_SOME_SKIPPED if problems else EXIT_OK


# ----------------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="robot-rl episodes", description=__doc__.split("\n\n")[0],
                                epilog="exit codes: 0 ok; 1 error; 3 some episodes skipped (bad file, no images, "
                                       "no seed), the others processed; 4 replay drift above --tolerance")
    sub = p.add_subparsers(dest="command", required=True)
    pi = sub.add_parser("inspect", help="table of episodes: steps, success, interventions, cameras, return")
    pi.add_argument("path", type=Path, help="episode directory or file")
    pe = sub.add_parser("export", help="PNG strip of the cameras per episode (or mp4 with --video and ffmpeg)")
    pe.add_argument("path", type=Path, help="episode directory or file")
    pe.add_argument("--video", action="store_true", help="write mp4 if ffmpeg is on PATH (else PNG strips)")
    pe.add_argument("--frames", type=int, default=8, help="PNG strip: frames sampled over the episode")
    pe.add_argument("--fps", type=float, default=10.0, help="mp4 frame rate")
    pe.add_argument("--out", type=Path, default=None, help="output directory (default PATH/export)")
    fmt = pe.add_mutually_exclusive_group()
    fmt.add_argument("--mcap", type=Path, default=None, metavar="DIR",
                     help="write one rosbag2 bag (MCAP storage) per episode under DIR (Foxglove, ros2 bag play)")
    fmt.add_argument("--lerobot", type=Path, default=None, metavar="DIR",
                     help="write the episodes as one LeRobotDataset (v3.0: parquet + mp4 + meta) in DIR")
    pm = sub.add_parser("import", help="append the episodes of a LeRobot dataset (v2.x / v3.0) to PATH")
    pm.add_argument("path", type=Path, help="episode directory to append to")
    pm.add_argument("--lerobot", type=Path, required=True, metavar="DIR", help="the LeRobot dataset's root")
    pr = sub.add_parser("replay", help="replay the actions on the twin and report the TCP drift")
    pr.add_argument("path", type=Path, help="episode directory or file")
    pr.add_argument("--task", default=None, help="task preset (default: the one recorded in each episode)")
    pr.add_argument("--tolerance", type=float, default=None, help="exit 4 if any max drift exceeds this (m)")
    return p


def main(argv: list[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler = {"inspect": cmd_inspect, "export": cmd_export, "replay": cmd_replay, "import": cmd_import}[args.command]
    return handler(args, out or sys.stdout, err or sys.stderr)
