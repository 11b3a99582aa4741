"""Demo episodes for a run's demo buffer: read episode directories (robot_rl.episodes), check them against the
run's EnvSpec, drop the observation leaves the run does not observe, rescale env-unit actions to the agent's
[-1, 1], and fill a ReplayBuffer (`robot-rl train`, the forward/backward run) or hand the episodes over
(`robot-rl learner`, whose Learner fills its own demo buffer).

Usage::

    demo = load_demo_buffer(["demos/pick", "rollouts/pick"], spec, seed=1, bounds=action_bounds(env))
    episodes = load_demo_episodes(Path("demos/pick"), spec, log=print)   # the learner's demos
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from learners.replay.buffer import ReplayBuffer, ReplayConfig
from learners.replay.frame_align import align_episode, lag_of_recording
from learners.training.online import from_env_action
from robot_rl.episodes import Episode, load_dir
from robot_rl.errors import ConfigError
from robot_rl.specs import EnvSpec


def without_extra_leaves(episode: Any, spec: EnvSpec) -> Any:
    """`episode` with the observation leaves that `spec` lacks dropped (e.g. the privileged "object" state of demos
    recorded on the twin, for a hardware-faithful run that observes proprio only); unchanged when it has none."""
    keep = {s.name for s in spec.observation}
    if all(k in keep for k in episode.observations):
        return episode
    ep_spec = episode.spec
    if isinstance(ep_spec, Mapping):
        ep_spec = {**ep_spec, "observation": [o for o in ep_spec.get("observation", []) if o.get("name") in keep]}
    return dataclasses.replace(episode, observations={k: v for k, v in episode.observations.items() if k in keep},
                               spec=ep_spec)


def load_demo_buffer(directory: str | Sequence[str], spec: EnvSpec, seed: int, flag: str = "--demos",
                     bounds: Any = None, narrowed_actions: bool = False, warn_action_space: Any = None,
                     align_frames: bool = False) -> ReplayBuffer:
    """A demo buffer holding every readable episode of `directory` (one directory or several: demos, recorded
    rollouts; each episode checked against `spec`); ConfigError naming `flag` and the directory when one holds
    none. Every row keeps its episode's `intervention` flags (a rollout's rows are not human rows).

    `bounds` (learners.training.gym_compat action bounds of the env, or None for a [-1, 1] env): episode files hold
    env-unit actions, the agent and its buffers act in [-1, 1], so actions are rescaled. `narrowed_actions`: the
    run narrowed the env's bounds (--action-scale), so the episodes' recorded action spec is replaced by the run's.
    `warn_action_space` (a gymnasium Box, --env-id runs): warn when the demos (the first directory) use only a
    sliver of its range. `align_frames` (--align-frames): each episode's camera rows are shifted by the camera
    latency its file records (learners.replay.frame_align), so every row shows its own step."""
    directories = [directory] if isinstance(directory, str) else list(directory)
    loaded: list[tuple[str, list[Any]]] = []
    for d in directories:
        episodes, errors = load_dir(d)
        for err in errors:
            print(f"[train] warning: skipped {err}", file=sys.stderr)
        if not episodes:
            raise ConfigError(f"{flag} {d}: no readable episodes")
        loaded.append((d, episodes))
    total = sum(ep.length + 1 for _, episodes in loaded for ep in episodes)
    demo = ReplayBuffer(spec, max(2, total + ReplayConfig().demo_capacity), seed=seed)
    for d, episodes in loaded:
        for ep in episodes:
            ep = without_extra_leaves(ep, spec)
            if ep.spec is not None:
                ep_spec = EnvSpec.from_dict(ep.spec)
                if narrowed_actions:  # recorded with the env's own bounds; the run narrowed them (--action-scale)
                    ep_spec = dataclasses.replace(ep_spec, action=spec.action)
                spec.require_equal(ep_spec, what=f"demo episodes in {d}")
            if bounds is not None:
                ep = dataclasses.replace(ep, actions=from_env_action(ep.actions, bounds))
            if align_frames:
                lag = lag_of_recording(ep.info, float((ep.spec or {}).get("control_hz", spec.control_hz)))
                ep = align_episode(ep, lag, [c.name for c in spec.cameras])
            demo.add_episode(ep)
    if warn_action_space is not None:
        from learners.training.gym_compat import demo_action_warning

        warning = demo_action_warning(np.concatenate([ep.actions for ep in loaded[0][1]]), warn_action_space.low,
                                      warn_action_space.high)
        if warning:
            print(f"[train] warning: {warning}", file=sys.stderr)
    return demo



def load_demo_episodes(directory: str | Path, spec: EnvSpec, prefix: str = "learner:") -> list[Episode]:
    """The episodes of one demo directory for `robot-rl learner` (whose Learner fills its own demo buffer): corrupt
    files reported on stderr and skipped, the leaves `spec` lacks dropped (the privileged "object" state in a
    faithful run); ConfigError for episodes recorded with another observation/action spec."""
    episodes, errors = load_dir(directory)
    for err in errors:
        print(f"{prefix} skipping {err}", file=sys.stderr)
    episodes = [without_extra_leaves(ep, spec) for ep in episodes]
    for ep in episodes:
        if ep.spec is not None:
            diff = [f for f in spec.diff(EnvSpec.from_dict(ep.spec)) if f != "task"]
            if diff:
                raise ConfigError(f"--demos {directory}: episodes were recorded with another observation/action "
                                  f"spec (differs in {diff}); record them with the same --obs-mode / image size")
    return episodes
