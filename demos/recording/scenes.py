"""Demo scenes spread over the workspace: which env seeds a scripted (twin) recording uses.

Twenty demos on seeds 0..19 leave parts of a task's start area without a demo (on pick-cube from cameras, the
corners: the policies trained on such demos failed mostly there). A person recording demos on a real arm spreads the
objects over the workspace, corners included; `record-demos --scenes spread` does the same on the twin: it resets
the twin at a pool of candidate seeds, reads where each scene puts the task's objects (the twin's privileged object
positions, used here to choose seeds only, never observed by a policy), and records them in farthest-point order,
so the first N demos cover the start area as evenly as N points can. On a robot server (hardware) the objects are
where the person puts them: there is nothing to choose, and the option is refused.

Usage::

    order = spread_order(points_m)                  # points_m shape (N, D): indices, farthest-point first
    seeds = spread_seeds(env, first_seed=0, pool=200)  # the pool's seeds in that order (resets the env)
    points_m = scene_points(env, [0, 1, 2])            # shape (3, D): each seed's object positions
"""

from __future__ import annotations

from typing import Any

import numpy as np

from robot_rl.errors import ConfigError

SCENES = ("seeded", "spread")


def spread_order(points_m: np.ndarray) -> list[int]:
    """Greedy farthest-point order of `points_m` (shape (N, D), metres): index 0 first, then each next index the
    point farthest (Euclidean) from all chosen so far; ties go to the lower index. Returns all N indices."""
    pts = np.asarray(points_m, np.float64)
    if pts.ndim != 2 or len(pts) == 0:
        raise ValueError(f"points_m must have shape (N, D) with N >= 1, got {pts.shape}")
    order = [0]
    nearest = np.linalg.norm(pts - pts[0], axis=1)
    nearest[0] = -1.0
    for _ in range(len(pts) - 1):
        i = int(np.argmax(nearest))
        order.append(i)
        nearest = np.minimum(nearest, np.linalg.norm(pts - pts[i], axis=1))
        nearest[order] = -1.0
    return order


def scene_point(env: Any) -> np.ndarray:
    """The positions (`*_pos` entries, metres) of the task's objects in the env's current scene, concatenated,
    shape (D,); the twin's privileged state (`RobotState.objects`). ConfigError where there is none (hardware)."""
    objects = env.unwrapped.robot.state().objects
    parts = [np.asarray(v, np.float64).reshape(-1) for k, v in sorted(objects.items()) if k.endswith("_pos")]
    if not parts:
        raise ConfigError("--scenes spread: this env reports no object positions (a robot server: on an arm, "
                          "place the objects across the workspace yourself and record with the default --scenes "
                          "seeded)")
    return np.concatenate(parts)


def scene_points(env: Any, seeds: list[int]) -> np.ndarray:
    """`scene_point` after `env.reset(seed=s)` for each of `seeds`: shape (len(seeds), D), metres (one reset per
    seed, ~20 ms on the twin)."""
    points = []
    for s in seeds:
        env.reset(seed=s)
        points.append(scene_point(env))
    return np.stack(points)


def spread_seeds(env: Any, first_seed: int, pool: int) -> list[int]:
    """The seeds first_seed .. first_seed + pool - 1 in the farthest-point order of their scenes' object positions
    (`scene_points`)."""
    if pool < 1:
        raise ConfigError(f"the scene pool must be >= 1, got {pool}")
    seeds = [first_seed + i for i in range(pool)]
    return [seeds[i] for i in spread_order(scene_points(env, seeds))]
