"""Any gymnasium env as a new user meets it: where it reports success, how large its actions are, and checks that
say so when something does not fit, for `robot-rl train --env-id` (and `robot-rl eval`, which rebuilds the env).

- Success under another key: envs report success as `info["success"]`, `info["is_success"]` (gymnasium-robotics),
  `info["succeed"]`, ... `SuccessKeyWrapper(env, key)` copies `info[key]` to `info["success"]` (what training and
  evaluation read) and remembers the info keys it saw, so `success_warning()` can say, once, that the key never
  appeared (every success rate would read 0) and which keys look like it.
- Action bounds far wider than the demos: an env whose Box allows +-1 m per step while its demos move +-2.5 cm gets
  a policy whose first actions fling the arm into a corner (the agent acts in [-1, 1], mapped onto the env's bounds).
  `demo_action_warning()` compares the demos' action range with the bounds; `ActionBoxWrapper(env, low, high)`
  narrows the env's action Box (the agent's [-1, 1] then covers only it): `--action-scale S` (centre +- S, env units,
  per dim or one for all) or `--action-scale auto` (`auto_action_box`: the demos' own range per dim).

Usage::

    env = SuccessKeyWrapper(gymnasium.make(env_id), "succeed")
    low, high = auto_action_box(demo_actions, env.action_space.low, env.action_space.high)
    env = ActionBoxWrapper(env, low, high)
    print(demo_action_warning(demo_actions, env.action_space.low, env.action_space.high))   # or None
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from robot_rl.errors import ConfigError
from robot_rl.forwarding import ForwardingWrapper

SUCCESS_KEY = "success"
_SUCCESS_LIKE = re.compile(r"succ|solved|goal_reached|is_success", re.IGNORECASE)
NARROW_FRACTION = 0.25
"""demo_action_warning fires when the demos use less than this fraction of a dim's bounds (half-range, around the
centre), or go beyond the bounds."""


class SuccessKeyWrapper(ForwardingWrapper):
    """info[key] -> info["success"] (bool) on every step; records whether the key was ever seen and every info key
    seen (for `success_warning`)."""

    def __init__(self, env: Any, key: str = SUCCESS_KEY) -> None:
        super().__init__(env)
        self.key = key
        self.reported = False
        self.keys_seen: set[str] = set()
        self.steps = 0

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        if isinstance(info, dict):
            self.keys_seen.update(str(k) for k in info)
            if self.key in info:
                self.reported = True
                if self.key != SUCCESS_KEY:
                    info = dict(info)
                    info[SUCCESS_KEY] = bool(np.any(info[self.key]))
        return obs, reward, terminated, truncated, info


def success_warning(wrapper: SuccessKeyWrapper) -> str | None:
    """One line when the env never reported `info[key]` in any step seen so far (None when it did, or before any
    step): every success rate reads 0; names the info keys that look like a success flag."""
    if wrapper.reported or wrapper.steps == 0:
        return None
    like = sorted(k for k in wrapper.keys_seen if _SUCCESS_LIKE.search(k) and k != wrapper.key)
    hint = (f"; it reports {', '.join(repr(k) for k in like)}: pass --success-key {like[0]}" if like
            else f"; info keys seen: {sorted(wrapper.keys_seen) or 'none'} (pass --success-key KEY if one of them "
                 "is the success flag)")
    return (f"the env never reported info[{wrapper.key!r}] in {wrapper.steps} steps, so every success rate reads 0"
            f"{hint}")


class ActionBoxWrapper(ForwardingWrapper):
    """The env with a narrower action Box [low, high] (inside its own bounds): actions are clipped to it and passed
    on unchanged, so an agent acting in [-1, 1] over this Box moves at most as far as the Box allows."""

    def __init__(self, env: Any, low: Sequence[float], high: Sequence[float]) -> None:
        super().__init__(env)
        space = env.action_space
        lo, hi = np.asarray(low, np.float64), np.asarray(high, np.float64)
        if lo.shape != space.shape or hi.shape != space.shape or not np.all(lo < hi):
            raise ConfigError(f"action box: low {lo.tolist()} / high {hi.tolist()} must have the action's shape "
                              f"{tuple(space.shape)} with low < high")
        self.box_low, self.box_high = lo, hi
        self.action_space = type(space)(lo.astype(space.dtype), hi.astype(space.dtype), dtype=space.dtype)

    def step(self, action: Any) -> Any:
        a = np.clip(np.asarray(action, np.float64), self.box_low, self.box_high)
        return self.env.step(a.astype(self.env.action_space.dtype))


def parse_action_scale(text: str, dim: int) -> np.ndarray | None:
    """--action-scale: None for 'auto', else the half-ranges (dim,) from one number or `dim` comma-separated ones
    (env units, > 0); ConfigError (one line) otherwise."""
    if text.strip().lower() == "auto":
        return None
    try:
        vals = np.array([float(x) for x in text.split(",") if x.strip()], np.float64)
    except ValueError:
        raise ConfigError(f"--action-scale {text}: expected 'auto', a number or {dim} comma-separated numbers") \
            from None
    if vals.size == 1:
        vals = np.full(dim, vals[0])
    if vals.shape != (dim,) or not np.all(np.isfinite(vals)) or not np.all(vals > 0):
        raise ConfigError(f"--action-scale {text}: expected 'auto', one number > 0 or {dim} numbers > 0 (the "
                          f"half-range of each action dim around the centre of its bounds, env units)")
    return vals


def scaled_action_box(half: np.ndarray, low: np.ndarray, high: np.ndarray) -> tuple[list[float], list[float]]:
    """[centre - half, centre + half] per dim, inside the env's bounds [low, high]."""
    low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
    centre = 0.5 * (low + high)
    return (np.maximum(centre - half, low).tolist(), np.minimum(centre + half, high).tolist())


def auto_action_box(demo_actions: np.ndarray, low: np.ndarray, high: np.ndarray,
                    ) -> tuple[list[float], list[float]]:
    """The box the demos use: per dim, centre (of the env's bounds) +- the largest distance of a demo action from it,
    at least 1 % of the bounds' half-range (a dim the demos never moved stays usable), within the bounds."""
    low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
    acts = np.asarray(demo_actions, np.float64).reshape(-1, low.shape[0])
    if acts.shape[0] == 0:
        raise ConfigError("--action-scale auto needs demo episodes (--demos DIR) with at least one step")
    centre, half = 0.5 * (low + high), 0.5 * (high - low)
    used = np.max(np.abs(acts - centre), axis=0)
    return scaled_action_box(np.clip(used, 0.01 * half, half), low, high)


def demo_action_warning(demo_actions: np.ndarray, low: np.ndarray, high: np.ndarray) -> str | None:
    """One line when the demos' actions use less than NARROW_FRACTION of the env's action bounds in some dim, or
    leave the bounds; None when they fit."""
    low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
    acts = np.asarray(demo_actions, np.float64).reshape(-1, low.shape[0])
    if acts.shape[0] == 0 or not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        return None
    centre, half = 0.5 * (low + high), 0.5 * (high - low)
    used = np.max(np.abs(acts - centre), axis=0)
    narrow = [i for i in range(low.shape[0]) if used[i] < NARROW_FRACTION * half[i]]
    outside = [i for i in range(low.shape[0]) if np.any(acts[:, i] < low[i] - 1e-6) or np.any(acts[:, i] > high[i]
                                                                                            + 1e-6)]
    parts = []
    still = [i for i in narrow if used[i] <= 1e-9 * max(half[i], 1e-12)]  # a dim no demo ever moves
    moved = [i for i in narrow if i not in still]
    if moved:
        dims = ", ".join(f"{i}: +-{used[i]:.3g} of +-{half[i]:.3g}" for i in moved[:6])
        ratio = float(np.max(half[moved] / used[moved]))
        parts.append(f"the demos' actions use a small part of the env's action bounds (dim {dims}"
                     f"{', ...' if len(moved) > 6 else ''}): the policy acts over the whole bounds, so its first "
                     f"actions can be {ratio:.3g}x larger than any demo action")
    if still:
        parts.append(f"the demos never move action dim(s) {still[:6]}{' ...' if len(still) > 6 else ''} (the policy "
                     "explores them over the whole bounds)")
    if outside:
        parts.append(f"demo actions leave the env's bounds in dims {outside[:6]} (they are clipped)")
    if not parts:
        return None
    return "; ".join(parts) + ("; pass --action-scale auto (the agent's [-1, 1] covers the demos' range) or "
                               "--action-scale S (centre +- S, env units)" if narrow else "")
