"""A small point-reaching gymnasium env for agent tests (train-bc, residual RL, the offline phase and the warm
start), its scripted expert and an episode recorder.

    from point_reach import ENV_ID, PointReachEnv, record_point_reach
    demos = record_point_reach(tmp_path / "demos", episodes=20)          # expert, human rows
    rollouts = record_point_reach(tmp_path / "r", 20, noise=0.08, human=False, seed=500)
    robot_rl.cli.main(["train", "--env-id", ENV_ID, "--demos", str(demos), ...])

`ENV_ID` is the 2-D env, `ENV_ID_3D` the same in 3-D (a different spec); both are registered with gymnasium on
import.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from robot_rl.episodes import Episode, save_episode
from robot_rl.specs import EnvSpec

ENV_ID = "RobotRLTest-PointReach-v0"
ENV_ID_3D = "RobotRLTest-PointReach3D-v0"


class PointReachEnv(gym.Env[np.ndarray, np.ndarray]):
    """A `dim`-D point (metres) sent to a goal 5-20 cm away in a random direction by displacements of at most
    10 cm per step; observation [position, goal - position], shape (2 dim,); reward 1 and success within 2 cm (the
    episode ends), 20 steps at most."""

    def __init__(self, dim: int = 2) -> None:
        self.dim = dim
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2 * dim,), np.float32)
        self.action_space = gym.spaces.Box(-0.1, 0.1, (dim,), np.float32)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.pos = self.np_random.uniform(-0.1, 0.1, self.dim)
        if self.dim == 2:  # a uniform angle (the draws the 2-D tests' thresholds were set on)
            ang, dist = self.np_random.uniform(0, 2 * np.pi), self.np_random.uniform(0.05, 0.2)
            self.goal = self.pos + dist * np.array([np.cos(ang), np.sin(ang)])
        else:  # a uniform direction on the sphere
            direction = self.np_random.normal(size=self.dim)
            self.goal = self.pos + self.np_random.uniform(0.05, 0.2) * direction / np.linalg.norm(direction)
        self.t = 0
        return self._obs(), {}

    def _obs(self) -> np.ndarray:
        return np.r_[self.pos, self.goal - self.pos].astype(np.float32)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.pos = self.pos + np.clip(np.asarray(action, np.float64), -0.1, 0.1)
        self.t += 1
        ok = bool(np.linalg.norm(self.goal - self.pos) < 0.02)
        return self._obs(), float(ok), ok, self.t >= 20, {"success": ok}


for _id, _dim in ((ENV_ID, 2), (ENV_ID_3D, 3)):
    if _id not in gym.registry:
        gym.register(id=_id, entry_point=lambda dim=_dim, **kwargs: PointReachEnv(dim))


def point_reach_spec(dim: int = 2) -> EnvSpec:
    env = PointReachEnv(dim)
    return EnvSpec.from_spaces(ENV_ID if dim == 2 else ENV_ID_3D, env.observation_space, env.action_space, 0.0)


def expert_action(obs: np.ndarray) -> np.ndarray:
    """Steps of at most 2 cm straight to the goal (env units), shape (dim,)."""
    dim = obs.shape[-1] // 2
    return np.clip(obs[dim:], -0.02, 0.02).astype(np.float32)


def record_point_reach(directory: Path, episodes: int, noise: float = 0.0, human: bool = True, seed: int = 100,
                       dim: int = 2) -> Path:
    """`episodes` episode files of the expert with Gaussian action noise `noise` (env units; 0: the expert),
    episode i from reset seed `seed` + i; `human` marks every row as a human (demo) row."""
    env, spec = PointReachEnv(dim), point_reach_spec(dim)
    rng = np.random.default_rng(seed)
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        frames, acts, rews, terms, succ = [obs], [], [], [], []
        while True:
            a = np.clip(expert_action(obs) + (rng.normal(0, noise, dim) if noise > 0 else 0.0), -0.1, 0.1)
            a = a.astype(np.float32)
            obs, r, term, trunc, info = env.step(a)
            frames.append(obs)
            acts.append(a)
            rews.append(r)
            terms.append(term)
            succ.append(info["success"])
            if term or trunc:
                break
        t = len(acts)
        save_episode(Episode({"obs": np.stack(frames)}, np.stack(acts), np.array(rews, np.float32), np.array(terms),
                             np.array([False] * (t - 1) + [not terms[-1]]), np.full(t, human), np.array(succ),
                             task=spec.task, spec=spec.to_dict()), directory)
    return directory
