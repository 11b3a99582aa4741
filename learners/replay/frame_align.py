"""Frames on time for the learner: each stored transition gets the camera frames that show its own step.

A camera's frames arrive late (a RealSense colour stream 60-140 ms; the twin simulates it with
`RobotEnvConfig.camera_latency_ms`): at step t the policy acts on a frame of step t - lag beside the proprio state of
step t. The policy has to act on what it has, but the learner need not learn from it: `lag` steps later the frame
of step t has arrived, and a transition stored then can pair each observation's proprio with the frames of the same
instant. Policies trained on time were measured to act well through the late frames (benchmarks/timing_eval.py).
Measured on pixel pick-cube with a classifier reward (docs/twin.md), storing frames on time learned slower than
storing the late frames the policy acted on, so it is an option (`robot-rl train --align-frames`), not a default.

`FrameAligner` does it for a stream of transitions (the in-process training loop): it holds the newest `lag`
transitions back and releases each with its obs' and next_obs' image leaves replaced by the frames delivered `lag`
steps later. At an episode's end (`flush`) the held transitions go out with the newest frames there are: the final
observation's own frame would arrive after the episode, so the last `lag` rows repeat the last delivered frame (for
a terminal step the learner does not bootstrap from next_obs; a time-limit truncation's last row is off by `lag`
steps). `align_episode` does the same for a recorded episode (rows shifted by `lag`, the last repeated). lag = 0
passes everything through unchanged.

Usage::

    aligner = FrameAligner(lag_steps=1, image_keys=("images/front", "images/wrist"))
    for t in aligner.push(Transition(obs, action, reward, next_obs, terminated, truncated)):
        buffer.add(*t.as_args())
    aligner.terminate_last()        # a takeover marks the newest held step terminal (False: none held)
    for t in aligner.flush(): ...   # at the episode's end
    ep = align_episode(episode, lag_steps=1, image_keys=["images/front"])   # a recorded episode (T+1 rows)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from learners.agents.obs import nested
from robot_rl.errors import ConfigError
from robot_rl.specs import flatten_value
from robot_rl.timing import latency_steps


@dataclasses.dataclass
class Transition:
    """One env step as the replay buffer's `add` takes it (obs / next_obs nested dicts as the env returns them)."""

    obs: Any
    action: Any
    reward: float
    next_obs: Any
    terminated: bool
    truncated: bool
    intervention: bool = False
    grasp_penalty: float = 0.0

    def as_args(self) -> tuple[Any, ...]:
        """The positional arguments of ReplayBuffer.add / route_transition after the buffers."""
        return (self.obs, self.action, self.reward, self.next_obs, self.terminated, self.truncated,
                self.intervention, self.grasp_penalty)


def with_images(obs: Any, images: Mapping[str, Any]) -> Any:
    """A copy of the nested observation dict `obs` with the leaves at the slash paths of `images` replaced (every
    other leaf shared)."""
    return nested({**flatten_value(obs), **images})


class FrameAligner:
    """Holds back `lag_steps` transitions and releases each with the frames of its own step (module docstring)."""

    def __init__(self, lag_steps: int, image_keys: Sequence[str]) -> None:
        if isinstance(lag_steps, bool) or not isinstance(lag_steps, int) or lag_steps < 0:
            raise ConfigError(f"frame alignment: lag_steps={lag_steps!r} must be an integer >= 0 (control periods)")
        self.lag = lag_steps
        self.image_keys = tuple(image_keys)
        self._held: list[Transition] = []
        self._rows: list[dict[str, Any]] = []  # delivered frames: the obs of each held transition, then next_obs

    @property
    def held(self) -> int:
        """Transitions held back now."""
        return len(self._held)

    def _frames(self, obs: Any) -> dict[str, Any]:
        flat = flatten_value(obs)
        return {k: flat[k] for k in self.image_keys}

    def _release(self, j: int) -> Transition:
        last = len(self._rows) - 1
        t = self._held[j]
        return dataclasses.replace(t, obs=with_images(t.obs, self._rows[min(j + self.lag, last)]),
                                   next_obs=with_images(t.next_obs, self._rows[min(j + 1 + self.lag, last)]))

    def push(self, transition: Transition) -> list[Transition]:
        """Take the newest step; return the transitions whose frames are now known (oldest first)."""
        if self.lag == 0 or not self.image_keys:
            return [transition]
        if not self._rows:
            self._rows.append(self._frames(transition.obs))
        self._held.append(transition)
        self._rows.append(self._frames(transition.next_obs))
        out = []
        while self._held and len(self._rows) >= self.lag + 2:
            out.append(self._release(0))
            self._held.pop(0)
            self._rows.pop(0)
        return out

    def flush(self) -> list[Transition]:
        """The episode ended: release every held transition with the newest frames there are (module docstring)."""
        out = [self._release(j) for j in range(len(self._held))]
        self._held.clear()
        self._rows.clear()
        return out

    def terminate_last(self) -> bool:
        """Mark the newest held transition terminal (a human takeover follows it); False when none is held."""
        if not self._held:
            return False
        self._held[-1].terminated = True
        return True


def align_episode(episode: Any, lag_steps: int, image_keys: Sequence[str]) -> Any:
    """A recorded episode (robot_rl.episodes.Episode: observations {path: (T+1, ...)}) with the image rows of
    `image_keys` shifted `lag_steps` earlier, the last row repeated: row i shows the scene of step i (module
    docstring). lag 0: the episode itself."""
    if lag_steps == 0:
        return episode
    obs = dict(episode.observations)
    for k in image_keys:
        rows = np.asarray(obs[k])
        idx = np.minimum(np.arange(rows.shape[0]) + lag_steps, rows.shape[0] - 1)
        obs[k] = rows[idx]
    return dataclasses.replace(episode, observations=obs)


def lag_of_recording(info: Mapping[str, Any], control_hz: float) -> int:
    """The camera lag in control periods an episode was recorded with: its `info["env_kwargs"]["camera_latency_ms"]`
    (record-demos on the twin writes it; 0 when absent: no simulated latency, or hardware, whose latency the file
    does not state), rounded as the twin's simulated timing takes it."""
    kwargs = info.get("env_kwargs") if isinstance(info, Mapping) else None
    return latency_steps(float((kwargs or {}).get("camera_latency_ms") or 0.0), control_hz)
