"""Named task presets: a task is data (which gymnasium env, with which options), not a copy of a script.

The kernel holds the table; `envs` registers the gymnasium ids on import. Entry points (train, sim, record)
resolve `--task NAME` here, import `env_module` to get the registration, and call `gymnasium.make`.
Third-party envs work the same way through `--env-id ID --env-module M`.

Usage::

    preset = get_preset("twin-pick-cube")
    preset.env_id, preset.env_module, preset.env_kwargs   # "robot_rl/TwinPickCube-v0", "envs", {...}
    preset.make_kwargs(obs_mode="state")                  # env kwargs with overrides applied
    preset.recipe("state")                                # AgentConfig overrides this task trains with
    preset.updates_per_step                               # agent updates per env step (train / learner UTD)

A preset also carries the task's training recipe: AgentConfig field overrides (learners.config names, plain
data so the kernel stays free of torch) applied by `robot-rl train`, `robot-rl learner` and `robot-rl sim`
on top of the algorithm's defaults, below any explicit flag (`--no-recipe` turns it off). The twin recipes
and the measurements behind them are documented in the README ("Learning on the twin") and in
tests/test_learning_twin.py.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from robot_rl.errors import UnknownTaskError


@dataclasses.dataclass(frozen=True)
class TaskPreset:
    """One named task: gymnasium id, the module whose import registers it, default env kwargs."""

    name: str
    env_id: str
    description: str
    env_module: str = "envs"
    env_kwargs: tuple[tuple[str, Any], ...] = ()
    agent_state: tuple[tuple[str, Any], ...] = ()
    """AgentConfig overrides (field, value) for state observations."""
    agent_pixels: tuple[tuple[str, Any], ...] = ()
    """AgentConfig overrides (field, value) for camera observations."""
    updates_per_step: int = 1
    """Agent updates per env step: `robot-rl train --updates-per-step`, the learner's `--utd`."""

    def recipe(self, obs_mode: str | None) -> dict[str, Any]:
        """The AgentConfig overrides for `obs_mode` ('pixels' or anything else = state)."""
        return dict(self.agent_pixels if obs_mode == "pixels" else self.agent_state)

    def make_kwargs(self, **overrides: Any) -> dict[str, Any]:
        """The env kwargs with `overrides` (None values ignored) applied on top of the preset's."""
        kw = dict(self.env_kwargs)
        kw.update({k: v for k, v in overrides.items() if v is not None})
        return kw


# The twin recipe (measured on a 2-core CPU; tests/test_learning_twin.py and the README give the numbers):
# RLPD (symmetric demo/online sampling, LayerNorm critics, random subset of 2 for the target min), a small
# ensemble of 4 at 1 critic update per actor update and 2 updates per env step, 256-wide MLPs at batch 128, the
# state vector scaled x10 (positions are ~0.1 m) and cut down to what the task needs (20 demos let a network
# memorise episodes by the rest: the reset orientation noise, the twist and wrench that follow the previous
# action), a short horizon (sparse terminal reward). State indices: state[0:3] TCP position, state[5] hand yaw,
# state[12] gripper width.
# Pick-cube (state) is plain RLPD with 5-step returns: its critic then ranks actions (one-step targets left Q
# nearly equal for demo, policy and random actions, and RLPD without a BC term never learned) and the policy
# keeps improving from its own data (>= 90 % by 14-18k env steps on seeds 0-2). Reach and the pixel recipes add a
# behaviour-cloning term on demo/intervention rows (bc_weight 30): fast (90 % on reach in 2-3k steps, the CI
# learning test), but carried by the demos; on pick-cube the BC recipe peaked at 80-90 % by 2k steps and then
# drifted down to 55-75 % by 20k.
_TWIN_COMMON: tuple[tuple[str, Any], ...] = (
    ("state_scale", 10.0), ("bc_weight", 30.0), ("hidden_dims", (256, 256)), ("batch_size", 128),
    ("critic_updates_per_actor_update", 1), ("ensemble_size", 4), ("ensemble_subsample", 2))
_TWIN_PIXELS: tuple[tuple[str, Any], ...] = (
    ("encoder", "conv"), ("state_select", ("state[0:3]", "state[5]", "state[12]")), ("discount", 0.95),
    ("state_scale", 10.0), ("bc_weight", 30.0), ("hidden_dims", (256, 256)), ("batch_size", 32),
    ("critic_updates_per_actor_update", 1), ("ensemble_size", 2), ("ensemble_subsample", 2))

PRESETS: dict[str, TaskPreset] = {
    p.name: p
    for p in (
        TaskPreset("twin-reach", "robot_rl/TwinReach-v0",
                   "MuJoCo twin: move the gripper to a random goal marker (easy; for fast tests)",
                   agent_state=(("state_select", ("object", "state[0:3]")), ("discount", 0.9), *_TWIN_COMMON),
                   agent_pixels=_TWIN_PIXELS, updates_per_step=2),
        TaskPreset("twin-pick-cube", "robot_rl/TwinPickCube-v0",
                   "MuJoCo twin: grasp a 4 cm cube from the table and lift it",
                   agent_state=(("state_select", ("object", "state[0:3]", "state[5]", "state[12]")),
                                ("discount", 0.95), *_TWIN_COMMON, ("bc_weight", 0.0), ("n_step", 5)),
                   agent_pixels=_TWIN_PIXELS, updates_per_step=2),
        # peg-insert: the same recipe, not yet tuned or measured on this task
        TaskPreset("twin-peg-insert", "robot_rl/TwinPegInsert-v0",
                   "MuJoCo twin: insert a grasped peg into a tight hole (needs compliance)",
                   agent_state=(("state_select", ("object", "state[0:3]", "state[5]")), ("discount", 0.95),
                                *_TWIN_COMMON),
                   agent_pixels=_TWIN_PIXELS, updates_per_step=2),
    )
}


def get_preset(name: str) -> TaskPreset:
    """The preset called `name`; UnknownTaskError lists the known names."""
    try:
        return PRESETS[name]
    except KeyError:
        raise UnknownTaskError(f"unknown task '{name}'; known tasks: {', '.join(sorted(PRESETS))}") from None
