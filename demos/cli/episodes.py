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

The bodies live in demos.formats.episode_tools (inspect_episodes, export_episodes, import_episodes,
replay_episodes).

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
import sys
from pathlib import Path

from demos.formats.episode_tools import export_episodes, import_episodes, inspect_episodes, replay_episodes


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


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    out, err = sys.stdout, sys.stderr
    if args.command == "inspect":
        return inspect_episodes(args.path, out, err)
    if args.command == "export":
        return export_episodes(args.path, args.out, video=args.video, frames=args.frames, fps=args.fps,
                               mcap=args.mcap, lerobot=args.lerobot, out=out, err=err)
    if args.command == "import":
        return import_episodes(args.path, args.lerobot, out, err)
    return replay_episodes(args.path, task=args.task, tolerance=args.tolerance, out=out, err=err)
