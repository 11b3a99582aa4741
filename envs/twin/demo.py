"""The twin demo (`robot-rl demo`): the scripted expert runs a task preset on the MuJoCo twin in pixels mode; one
line per episode, then OUT/strip.png (one row per episode, columns = `frames` moments of the episode, each showing
every camera side by side) and OUT/summary.json (success rate, env steps per second, per-episode results).

Usage::

    summary = run_demo(DemoConfig(task="twin-reach", episodes=5, out=Path("runs/reach"), image_size=96))
    summary["success_rate"], summary["strip"]
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from envs.presets import get_preset, make_env, twin_task
from envs.twin.experts import ScriptedExpert, run_episode
from robot_rl.config import Config, require
from robot_rl.images import grid_frames, write_png


@dataclasses.dataclass(frozen=True)
class DemoConfig(Config):
    """Options of `run_demo`."""

    task: str = "twin-pick-cube"
    """Task preset (a twin task with a scripted expert)."""
    episodes: int = 3
    """Number of episodes."""
    out: Path = Path("runs/demo")
    """Output directory (strip.png, summary.json)."""
    image_size: int = 128
    """Camera image height and width."""
    seed: int = 0
    """Seed of the first episode (then +1 each)."""
    frames: int = 6
    """Moments per episode in the strip."""
    noise: float = 0.0
    """Expert action noise std."""

    def validate(self) -> None:
        require(self.episodes >= 1, "episodes", self.episodes, "must be >= 1")
        require(self.frames >= 1, "frames", self.frames, "must be >= 1")


def _pick_frames(frames: list[dict[str, np.ndarray]], n: int) -> list[dict[str, np.ndarray]]:
    idx = np.unique(np.linspace(0, len(frames) - 1, num=min(n, len(frames))).round().astype(int))
    picked = [frames[i] for i in idx]
    while len(picked) < n:  # short episode: repeat the last frame so every row has the same width
        picked.append(picked[-1])
    return picked


def _collect_images(frames: list[dict[str, np.ndarray]]) -> Callable[[dict[str, Any]], None]:
    return lambda obs: frames.append(obs["images"])


def run_demo(cfg: DemoConfig) -> dict[str, Any]:
    """Run the episodes (printing a line each), write the strip and the summary; returns the summary."""
    preset = get_preset(cfg.task)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"demo: {preset.name} ({preset.env_id}), {cfg.episodes} episode(s), images {cfg.image_size}px -> {out}")
    t_start = time.perf_counter()
    env = make_env(preset.name, obs_mode="pixels", image_size=cfg.image_size)
    expert = ScriptedExpert(twin_task(preset.name), noise_std=cfg.noise, seed=cfg.seed)
    cams = list(env.unwrapped.config.camera_names)
    rows: list[list[np.ndarray]] = []
    episodes: list[dict[str, Any]] = []
    steps_total = 0
    try:
        for ep in range(cfg.episodes):
            frames: list[dict[str, np.ndarray]] = []
            t_ep = time.perf_counter()
            result = run_episode(env, expert, seed=cfg.seed + ep, on_obs=_collect_images(frames))
            wall = time.perf_counter() - t_ep
            steps_total += result["steps"]
            episodes.append({"episode": ep, **result, "wall_s": round(wall, 3)})
            rows.append([f[c] for f in _pick_frames(frames, cfg.frames) for c in cams])
            done = sum(e["success"] for e in episodes)
            print(f"  episode {ep + 1}/{cfg.episodes}: seed {result['seed']}, {result['steps']} steps, "
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
        "episodes": cfg.episodes,
        "successes": n_success,
        "success_rate": n_success / cfg.episodes,
        "image_size": cfg.image_size,
        "cameras": cams,
        "strip": str(strip),
        "strip_layout": f"rows = episodes; columns = {cfg.frames} moments x cameras {cams}",
        "env_steps": steps_total,
        "env_steps_per_s": timing["steps_per_s"],
        "reset_ms_mean": timing["reset_ms_mean"],
        "wall_s": round(time.perf_counter() - t_start, 3),
        "per_episode": episodes,
    }
    tmp = out / "summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2) + "\n")
    os.replace(tmp, out / "summary.json")
    print(f"success rate {n_success}/{cfg.episodes} = {summary['success_rate']:.0%}; "
          f"{summary['env_steps_per_s']:.0f} env steps/s; wrote {strip} and {out / 'summary.json'}")
    return summary
