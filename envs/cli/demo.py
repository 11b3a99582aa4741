"""`robot-rl demo`: run the scripted expert on the MuJoCo twin (pixels mode) and write a picture of it.

Prints one line per episode and the success rate; writes OUT/strip.png (one row per episode, columns =
`--frames` moments of the episode, each showing every camera side by side) and OUT/summary.json.

The run lives in envs.twin.demo (DemoConfig, run_demo), imported after parsing (it needs the `sim` extra).

Usage::

    robot-rl demo                                           # twin-pick-cube, 3 episodes, runs/demo
    robot-rl demo --task twin-reach --episodes 5 --out runs/reach --image-size 96
"""

from __future__ import annotations

import argparse
from pathlib import Path

from envs.presets import PRESETS


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="robot-rl demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="twin-pick-cube",
                        help=f"task preset ({', '.join(sorted(PRESETS))}) or a task file extending one (.toml)")
    parser.add_argument("--episodes", type=int, default=3, help="number of episodes")
    parser.add_argument("--out", default="runs/demo", help="output directory")
    parser.add_argument("--image-size", type=int, default=128, help="camera image height and width")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first episode (then +1 each)")
    parser.add_argument("--frames", type=int, default=6, help="moments per episode in the strip")
    parser.add_argument("--noise", type=float, default=0.0, help="expert action noise std")
    args = parser.parse_args(argv)
    if args.episodes < 1 or args.frames < 1:
        parser.error("--episodes and --frames must be >= 1")
    from envs.twin.demo import DemoConfig, run_demo

    run_demo(DemoConfig(task=args.task, episodes=args.episodes, out=Path(args.out), image_size=args.image_size,
                        seed=args.seed, frames=args.frames, noise=args.noise))
    return 0
