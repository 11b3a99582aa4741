"""Save and restore a whole training run (agent + optimizers, replay buffers, counters, RNG states) as one
atomic robot_rl.checkpoint: shared by `robot-rl train` (one process) and `robot-rl learner` (distributed).

Usage::

    run = TrainingRun(agent, online, demo, counters={"env_step": 0, "episode": 0})
    path = run.save(out / "checkpoints", extra_meta={"config": cfg.to_dict()})
    ...
    meta = TrainingRun(agent, online, demo).restore(latest_checkpoint(out / "checkpoints"))  # counters in meta
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from learners.agents.agent import LearnerAgent
from learners.replay.buffer import ReplayBuffer
from robot_rl.checkpoint import CheckpointError, load_checkpoint, save_checkpoint


class TrainingRun:
    """The resumable parts of a run. `counters` are plain ints (env_step, episode, updates, ...); `rng` an
    optional numpy Generator whose state is saved too (e.g. the warm-up action sampler)."""

    def __init__(self, agent: LearnerAgent, online: ReplayBuffer, demo: ReplayBuffer | None = None,
                 counters: Mapping[str, int] | None = None, rng: np.random.Generator | None = None) -> None:
        self.agent, self.online, self.demo = agent, online, demo
        self.counters: dict[str, int] = dict(counters or {})
        self.rng = rng

    def save(self, directory: str | os.PathLike[str], extra_meta: Mapping[str, Any] | None = None,
             keep: int = 2) -> Path:
        """Write a checkpoint named after counters['env_step'] (atomic; keeps the newest `keep`)."""
        groups: dict[str, Mapping[str, np.ndarray]] = {"agent": self.agent.state_dict(),
                                                        "replay_online": self.online.state_arrays()}
        if self.demo is not None:
            groups["replay_demo"] = self.demo.state_arrays()
        meta: dict[str, Any] = {"counters": self.counters, **dict(extra_meta or {})}
        if self.rng is not None:
            meta["rng"] = self.rng.bit_generator.state
        return save_checkpoint(directory, int(self.counters.get("env_step", 0)), groups, meta, keep=keep)

    def restore(self, path: str | os.PathLike[str]) -> dict[str, Any]:
        """Load a checkpoint into the agent, buffers and rng; sets and returns counters (meta under 'meta')."""
        groups, meta = load_checkpoint(path)
        for name in ("agent", "replay_online"):
            if name not in groups:
                raise CheckpointError(f"{path}: checkpoint has no '{name}' group")
        self.agent.load_state_dict(groups["agent"])
        self.online.load_state_arrays(groups["replay_online"])
        if self.demo is not None and "replay_demo" in groups:
            self.demo.load_state_arrays(groups["replay_demo"])
        if self.rng is not None and "rng" in meta:
            self.rng.bit_generator.state = meta["rng"]
        self.counters = {k: int(v) for k, v in dict(meta.get("counters", {})).items()}
        return meta
