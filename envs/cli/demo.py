"""`robot-rl demo`: run the scripted expert on the MuJoCo twin (pixels mode) and write a picture of it.

Prints one line per episode and the success rate; writes OUT/strip.png (one row per episode, columns =
`--frames` moments of the episode, each showing every camera side by side) and OUT/summary.json.

Usage::

    robot-rl demo                                           # twin-pick-cube, 3 episodes, runs/demo
    robot-rl demo --task twin-reach --episodes 5 --out runs/reach --image-size 96
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from envs.presets import PRESETS, get_preset, twin_task
from robot_rl.images import grid_frames, write_png


def _pick_frames(frames: list[dict[str, np.ndarray]], n: int) -> list[dict[str, np.ndarray]]:
    idx = np.unique(np.linspace(0, len(frames) - 1, num=min(n, len(frames))).round().astype(int))
    picked = [frames[i] for i in idx]
    while len(picked) < n:  # short episode: repeat the last frame so every row has the same width
        picked.append(picked[-1])
    return picked


def _collect_images(frames: list[dict[str, np.ndarray]]) -> Callable[[dict[str, Any]], None]:
    return lambda obs: frames.append(obs["images"])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="robot-rl demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="twin-pick-cube", choices=sorted(PRESETS), help="task preset")
    parser.add_argument("--episodes", type=int, default=3, help="number of episodes")
    parser.add_argument("--out", default="runs/demo", help="output directory")
    parser.add_argument("--image-size", type=int, default=128, help="camera image height and width")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first episode (then +1 each)")
    parser.add_argument("--frames", type=int, default=6, help="moments per episode in the strip")
    parser.add_argument("--noise", type=float, default=0.0, help="expert action noise std")
    args = parser.parse_args(argv)
    if args.episodes < 1 or args.frames < 1:
        parser.error("--episodes and --frames must be >= 1")

    from envs.presets import make_env
    from envs.twin.experts import ScriptedExpert, run_episode

    preset = get_preset(args.task)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"demo: {preset.name} ({preset.env_id}), {args.episodes} episode(s), images {args.image_size}px -> {out}")
    t_start = time.perf_counter()
    env = make_env(preset.name, obs_mode="pixels", image_size=args.image_size)
    expert = ScriptedExpert(twin_task(preset.name), noise_std=args.noise, seed=args.seed)
    cams = list(env.unwrapped.config.camera_names)
    rows: list[list[np.ndarray]] = []
    episodes: list[dict[str, Any]] = []
    steps_total = 0
    try:
        for ep in range(args.episodes):
            frames: list[dict[str, np.ndarray]] = []
            t_ep = time.perf_counter()
            result = run_episode(env, expert, seed=args.seed + ep, on_obs=_collect_images(frames))
            wall = time.perf_counter() - t_ep
            steps_total += result["steps"]
            episodes.append({"episode": ep, **result, "wall_s": round(wall, 3)})
            rows.append([f[c] for f in _pick_frames(frames, args.frames) for c in cams])
            done = sum(e["success"] for e in episodes)
            print(f"  episode {ep + 1}/{args.episodes}: seed {result['seed']}, {result['steps']} steps, "
                  f"{'success' if result['success'] else 'failure'} ({wall:.1f} s); "
                  f"success rate {done}/{ep + 1}", flush=True)
        timing = env.unwrapped.timing_stats()
    finally:
        env.close()

    strip = write_png(out / "strip.png", grid_frames(rows))
    n_success = sum(e["success"] for e in episodes)
    summary = {
        "task": preset.name,
        "env_id": preset.env_id,
        "episodes": args.episodes,
        "successes": n_success,
        "success_rate": n_success / args.episodes,
        "image_size": args.image_size,
        "cameras": cams,
        "strip": str(strip),
        "strip_layout": f"rows = episodes; columns = {args.frames} moments x cameras {cams}",
        "env_steps": steps_total,
        "env_steps_per_s": timing["steps_per_s"],
        "reset_ms_mean": timing["reset_ms_mean"],
        "wall_s": round(time.perf_counter() - t_start, 3),
        "per_episode": episodes,
    }
    tmp = out / "summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2) + "\n")
    os.replace(tmp, out / "summary.json")
    print(f"success rate {n_success}/{args.episodes} = {summary['success_rate']:.0%}; "
          f"{summary['env_steps_per_s']:.0f} env steps/s; wrote {strip} and {out / 'summary.json'}")
    return 0
