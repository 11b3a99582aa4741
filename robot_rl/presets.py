"""Named task presets: a task is data (which gymnasium env, with which options), not a copy of a script.

The kernel holds the table; `envs` registers the gymnasium ids on import. Entry points (train, sim, record)
resolve `--task NAME` here, import `env_module` to get the registration, and call `gymnasium.make`.
Third-party envs work the same way through `--env-id ID --env-module M`.

Usage::

    preset = get_preset("twin-pick-cube")
    preset.env_id, preset.env_module, preset.env_kwargs   # "robot_rl/TwinPickCube-v0", "envs", {...}
    preset.make_kwargs(obs_mode="state")                  # env kwargs with overrides applied

A task's training recipe (AgentConfig overrides, updates per env step) is not here: it lives beside AgentConfig
in learners.agents.recipes, typed and checked against AgentConfig's fields (the kernel stays free of torch).

A task that can be trained reset-free (`robot-rl train --forward-backward`) names its backward direction
(`TaskPreset.forward_backward`): the preset of the reverse task (its demos and recipe) and the env's goal names
(`info["goals"]`) that are each direction's true success.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from robot_rl.errors import UnknownTaskError


@dataclasses.dataclass(frozen=True)
class ForwardBackward:
    """How a task pairs with its reverse for reset-free forward/backward training."""

    backward_task: str
    """The preset of the backward direction (its scripted demos start where the forward task ends)."""
    forward_goal: str
    """The env's `info["goals"]` key that is the forward direction's true success."""
    backward_goal: str
    """... and the backward direction's."""


@dataclasses.dataclass(frozen=True)
class TaskPreset:
    """One named task: gymnasium id, the module whose import registers it, default env kwargs."""

    name: str
    env_id: str
    description: str
    env_module: str = "envs"
    env_kwargs: tuple[tuple[str, Any], ...] = ()
    forward_backward: ForwardBackward | None = None
    """Set for tasks `robot-rl train --forward-backward` can train reset-free (see the module docstring)."""

    def make_kwargs(self, **overrides: Any) -> dict[str, Any]:
        """The env kwargs with `overrides` (None values ignored) applied on top of the preset's."""
        kw = dict(self.env_kwargs)
        kw.update({k: v for k, v in overrides.items() if v is not None})
        return kw


PRESETS: dict[str, TaskPreset] = {
    p.name: p
    for p in (
        TaskPreset("twin-reach", "robot_rl/TwinReach-v0",
                   "MuJoCo twin: move the gripper to a random goal marker (easy; for fast tests)"),
        TaskPreset("twin-pick-cube", "robot_rl/TwinPickCube-v0",
                   "MuJoCo twin: grasp a 4 cm cube from the table and lift it"),
        TaskPreset("twin-peg-insert", "robot_rl/TwinPegInsert-v0",
                   "MuJoCo twin: insert a grasped peg into a tight hole (needs compliance)"),
        TaskPreset("twin-cube-relocate", "robot_rl/TwinCubeRelocate-v0",
                   "MuJoCo twin: move the cube from zone A to zone B and let go (forward/backward, reset-free)",
                   forward_backward=ForwardBackward("twin-cube-relocate-back", "in_zone_b", "in_zone_a")),
        TaskPreset("twin-cube-relocate-back", "robot_rl/TwinCubeRelocateBack-v0",
                   "MuJoCo twin: the backward direction of twin-cube-relocate (zone B to zone A)"),
    )
}


def get_preset(name: str) -> TaskPreset:
    """The preset called `name`; UnknownTaskError lists the known names."""
    try:
        return PRESETS[name]
    except KeyError:
        raise UnknownTaskError(f"unknown task '{name}'; known tasks: {', '.join(sorted(PRESETS))}") from None
