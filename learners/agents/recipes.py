"""Per-task training recipes: the AgentConfig fields a task trains with, typed and checked when this module is
imported.

Which state leaves a policy observes (AgentConfig.state_select) is not a recipe's: it is the task's, in its task
file (robot_rl.task_file `[observation] state / pixels_state`; learners.agents.options applies it below the recipe).
A recipe holds AgentConfig field overrides per observation mode (state / pixels) and the number of agent updates
per env step (`robot-rl train --updates-per-step`, the learner's `--utd`). `robot-rl train` and `robot-rl learner`
(and through the learner `robot-rl sim`) apply the task's recipe on top of the algorithm's defaults and below any
explicit flag or `--set FIELD=VALUE` (learners.agents.options; `--no-recipe` turns the recipe off). The task table
itself (names, env ids, env kwargs, descriptions) is robot_rl.presets; a task without an entry here, and any
`--env-id` run, trains with DEFAULT_RECIPE (no overrides, one update per env step).

A misspelt field name or an invalid value (one AgentConfig refuses) raises ConfigError at construction, so a bad
entry in RECIPES fails on import, before any run starts; so does an entry for a task robot_rl.presets lacks.

Usage::

    recipe = recipe_for("twin-pick-cube")       # DEFAULT_RECIPE for a task without one, or for None
    recipe.overrides("state")                   # {"discount": 0.95, "n_step": 5, ...}
    without_privileged(("object", "state[0:3]"))  # ("state[0:3]",): what a faithful run observes
    recipe.updates_per_step                     # 2
    Recipe(state={"discout": 0.9})              # ConfigError: ... unknown AgentConfig field 'discout' (did you
                                                # mean 'discount'?); valid fields: ...
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from learners.agents.config import AgentConfig, check_agent_fields
from robot_rl.config import require
from robot_rl.errors import ConfigError
from robot_rl.presets import PRESETS

OBS_MODES = ("state", "pixels")
PRIVILEGED_LEAVES = ("object",)
"""Observation leaves only the twin has (the task's privileged state); a hardware-faithful run observes none."""


@dataclasses.dataclass(frozen=True)
class Recipe:
    """One task's training recipe: AgentConfig overrides per observation mode, and updates per env step.

    The override mappings are checked against AgentConfig's fields and values (ConfigError otherwise) and frozen
    (read-only views of copies) when the recipe is made."""

    state: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """AgentConfig overrides {field: value} for state observations."""
    pixels: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """AgentConfig overrides {field: value} for camera observations."""
    updates_per_step: int = 1
    """Agent updates per env step: `robot-rl train --updates-per-step`, the learner's `--utd`."""

    def __post_init__(self) -> None:
        for mode in OBS_MODES:
            overrides = dict(getattr(self, mode))
            check_agent_fields(overrides, where=f"recipe ({mode})")
            try:
                AgentConfig(**overrides)  # the values too: a recipe AgentConfig refuses never reaches a run
            except (TypeError, ValueError) as err:
                raise ConfigError(f"recipe ({mode}): {err}") from err
            object.__setattr__(self, mode, MappingProxyType(overrides))
        require(isinstance(self.updates_per_step, int) and self.updates_per_step >= 1, "updates_per_step",
                self.updates_per_step, "must be an int >= 1")

    def overrides(self, obs_mode: str | None, faithful: bool = False) -> dict[str, Any]:
        """The AgentConfig overrides for `obs_mode` ('pixels'; anything else means state), as a new dict.
        `faithful`: for a hardware-faithful run, whose observation has no privileged leaf: those
        (`PRIVILEGED_LEAVES`) leave the state selection."""
        out = dict(self.pixels if obs_mode == "pixels" else self.state)
        if faithful and "state_select" in out:
            out["state_select"] = without_privileged(out["state_select"])
        return out


def without_privileged(select: tuple[str, ...]) -> tuple[str, ...]:
    """A state selection without the entries of `PRIVILEGED_LEAVES` (what a hardware-faithful run observes)."""
    return tuple(e for e in select if e.split("[")[0].strip() not in PRIVILEGED_LEAVES)


DEFAULT_RECIPE = Recipe()
"""What a task without a recipe (and an `--env-id` run) trains with: the algorithm's defaults, 1 update per step."""

# The twin recipe (measured on a 2-core CPU; tests/test_learning_twin.py and the README give the numbers):
# RLPD (symmetric demo/online sampling, LayerNorm critics, random subset of 2 for the target min), a small
# ensemble of 4 at 1 critic update per actor update and 2 updates per env step, 256-wide MLPs at batch 128, the
# state vector scaled x10 (positions are ~0.1 m) and cut down to what the task needs (20 demos let a network
# memorise episodes by the rest: the reset orientation noise, the twist and wrench that follow the previous
# action; the cut is the task file's observation.state / pixels_state), a short horizon (sparse terminal reward).
# Pick-cube (state) is RLPD with 5-step returns (its critic then ranks actions: one-step targets left Q nearly
# equal for demo, policy and random actions) and a Q-filtered behaviour-cloning term (bc_q_filter): the BC term
# counts a demo row only while the critic rates the demo's action above the policy's own, so it gives BC's fast
# start and fades state by state as the policy overtakes the demos (plain RLPD without a BC term: >= 90 % only at
# 12-15k env steps; unfiltered BC: 80-90 % by 2k, then down to 55-75 % by 20k). Reach and the pixel recipes keep
# the unfiltered BC term (bc_weight 30): fast (90 % on reach in 2-3k steps, the CI learning test), carried by the
# demos.
_TWIN_COMMON: dict[str, Any] = {
    "state_scale": 10.0, "bc_weight": 30.0, "hidden_dims": (256, 256), "batch_size": 128,
    "critic_updates_per_actor_update": 1, "ensemble_size": 4, "ensemble_subsample": 2}
_TWIN_PIXELS: dict[str, Any] = {
    "encoder": "conv", "discount": 0.95,
    "state_scale": 10.0, "bc_weight": 30.0, "hidden_dims": (256, 256), "batch_size": 32,
    "critic_updates_per_actor_update": 1, "ensemble_size": 2, "ensemble_subsample": 2}
_PICK_PLACE_STATE: dict[str, Any] = {
    "discount": 0.95, **_TWIN_COMMON,
    "bc_q_filter": True, "n_step": 5}
"""The state recipe of the grasping tasks (pick-cube, and cube-relocate's two directions)."""

RECIPES: dict[str, Recipe] = {
    "twin-reach": Recipe(
        state={"discount": 0.9, **_TWIN_COMMON},
        pixels=_TWIN_PIXELS, updates_per_step=2),
    "twin-pick-cube": Recipe(state=_PICK_PLACE_STATE, pixels=_TWIN_PIXELS, updates_per_step=2),
    # cube-relocate (both directions of the reset-free forward/backward run): pick-cube's state recipe, Q-filtered BC
    # included. Probes (forward task alone, with resets, 50 demos, 6k env steps, evaluation every 1k on 20 episodes):
    # the unfiltered BC term swung 0 / 65 / 60 / 0 / 40 / 45 % and its stochastic policy, the one a reset-free run
    # trains with, succeeded on 15 % of episodes at 6k (it dropped or pushed the cube, so the next direction started
    # from a scene no demo shows); with the filter 0 / 5 / 20 / 65 / 95 / 90 % (seed 0) and 0 / 0 / 5 / 50 / 80 / 75 %
    # (seed 1), stochastic 55 % at 6k (seed 0). Neither the HIL-SERL gripper head (0 / 65 / 65 / 35 / 60 / 30 %) nor
    # the Monte-Carlo lower bound (0 / 60 / 40 / 45 / 20 % at 5k) steadied the unfiltered recipe (seed 0 each).
    # benchmarks/forward_backward.py measures the recipe in the reset-free run.
    "twin-cube-relocate": Recipe(state=_PICK_PLACE_STATE, pixels=_TWIN_PIXELS, updates_per_step=2),
    # peg-insert (state): the twin recipe (its BC term kept) plus 5-step returns; the task locks the gripper
    # closed and its object observation is the peg's pose relative to the hole (README: the diagnosis and table)
    "twin-peg-insert": Recipe(
        state={"discount": 0.95, **_TWIN_COMMON,
               "n_step": 5},
        pixels=_TWIN_PIXELS, updates_per_step=2),
}

RECIPES["twin-cube-relocate-back"] = RECIPES["twin-cube-relocate"]

_unknown = sorted(set(RECIPES) - set(PRESETS))
if _unknown:  # a recipe for a task robot_rl.presets does not know would never be used
    raise ConfigError(f"learners.agents.recipes: recipes for unknown task(s) {_unknown}; tasks: {sorted(PRESETS)}")


def recipe_for(task: str | None) -> Recipe:
    """The training recipe of task preset `task` (DEFAULT_RECIPE when it has none, or for None)."""
    return RECIPES.get(task, DEFAULT_RECIPE) if task is not None else DEFAULT_RECIPE
