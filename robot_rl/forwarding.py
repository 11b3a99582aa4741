"""`ForwardingWrapper`: a plain env wrapper (no gymnasium import) that forwards every attribute it does not define
to the env it wraps; the base of the training loop's wrappers (learners.training.gym_compat) and of
robot_rl.scene_resets.OperatorSceneResets, which the actor uses too. `wrapper_of(env, cls)` finds a wrapper of a
class in a chain of them.

Usage::

    class Counting(ForwardingWrapper):
        def step(self, action):
            self.steps = getattr(self, "steps", 0) + 1
            return self.env.step(action)

    wrapper_of(env, Counting)   # the Counting wrapper in env's chain (env itself included), or None
"""

from __future__ import annotations

from typing import Any, TypeVar

W = TypeVar("W")


class ForwardingWrapper:
    """Forwards every attribute it does not define (observation_space, reset, close, np_random, ...) to `env`
    (gymnasium is imported only by the entry points, so these are plain wrappers, as
    learners.rewards.reward_model's)."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def __getattr__(self, name: str) -> Any:
        if name == "env":  # not set yet: no recursion
            raise AttributeError(name)
        return getattr(self.env, name)

    @property
    def unwrapped(self) -> Any:
        return self.env.unwrapped

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        return self.env.reset(seed=seed, options=options)


def wrapper_of(env: Any, cls: type[W]) -> W | None:
    """The outermost `cls` in `env`'s wrapper chain (`env` itself included, following `.env`), if any."""
    while env is not None:
        if isinstance(env, cls):
            return env
        env = getattr(env, "env", None)
    return None
