"""A person puts the scene back when the robot's own resets have left it where the policy keeps failing.

Robot-driven resets (envs.resets, the hardware-faithful mode) never restore a scene the policy has pushed off the
spots its demos cover: a pushed cube stays where it lies, and on a real cell one pushed out of reach stays there
until somebody moves it (benchmarks/faithful_scenes.py measures how often; docs/rewards-and-resets.md). HIL-SERL's
and LeRobot's operators reset such scenes by hand. `OperatorSceneResets` asks for that after `after` episodes in a
row that ended without success, and only then: the next reset gets `options={"scene_reset": True}` (RobotEnv then
restores the scene: on the twin a teleport to a fresh seeded scene, the stand-in for the person; on hardware the
person has done it when `ask` returns). Success is what the training loop is told, never the twin's privileged
flag: an episode that ended `terminated` with a reward > 0 (the reward model's or the env's own success).

Usage::

    env = OperatorSceneResets(env, after=3, ask=lambda n: print(f"scene reset {n}: put the cube back"))
    env.requests            # how many scene resets it asked for so far
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from learners.training.gym_compat import ForwardingWrapper
from robot_rl.errors import ConfigError


class OperatorSceneResets(ForwardingWrapper):
    """After `after` consecutive unsuccessful episodes, call `ask(n)` (n: the request's number, from 1) and reset
    with options={"scene_reset": True} (see the module docstring); the count starts again after each request and
    after every success. Forwards every other attribute (spaces, close, unwrapped, ...) to the env."""

    def __init__(self, env: Any, after: int, ask: Callable[[int], None] | None = None) -> None:
        if not isinstance(after, int) or isinstance(after, bool) or after < 1:
            raise ConfigError(f"operator scene resets: after={after!r} must be an integer >= 1 (failed episodes in "
                              "a row)")
        super().__init__(env)
        self.after = after
        self.ask = ask
        self.requests = 0
        """Scene resets asked for so far."""
        self.failed_in_a_row = 0
        """Episodes that ended without success since the last success or request."""
        self._success = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        opts = dict(options or {})
        if self.failed_in_a_row >= self.after:
            self.requests += 1
            self.failed_in_a_row = 0
            if self.ask is not None:
                self.ask(self.requests)
            opts["scene_reset"] = True
        self._success = False
        return self.env.reset(seed=seed, options=opts or None)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._success = self._success or (bool(terminated) and float(reward) > 0.0)
        if terminated or truncated:
            self.failed_in_a_row = 0 if self._success else self.failed_in_a_row + 1
        return obs, float(reward), bool(terminated), bool(truncated), info
