"""The training defaults of a robot-rl task and the per-task recipes on top of them: the AgentConfig fields a task
trains with, typed and checked when this module is imported.

`TASK_DEFAULTS` is what every task on robot-rl's own arm env (a twin preset, or a lab's task file: its state in
metres and radians, a sparse success reward, demos) trains with when nothing else is said, `--no-recipe` included:
RLPD with the mechanisms the twin's grasping tasks were measured to need (below), and from cameras with demos a
frozen encoder pretrained on those demos. A recipe (`RECIPES`) holds what one task needs on top of them. An `--env-id`
run (any gymnasium env) gets neither: the algorithm's defaults, and with demos `DEMO_DEFAULTS` (the same learning
mechanisms, with the state normalised per element by the demos' statistics, since its units are unknown).

Which state leaves a policy observes (AgentConfig.state_select) is not a recipe's: it is the task's, in its task
file (robot_rl.task_file `[observation] state / pixels_state`; learners.agents.options applies it below the recipe).
A recipe holds AgentConfig field overrides per observation mode (state / pixels) and the number of agent updates
per env step (`robot-rl train --updates-per-step`, the learner's `--utd`; None: the task defaults'). `robot-rl
train` and `robot-rl learner` (and through the learner `robot-rl sim`) apply the task defaults, then the task's
recipe, on top of the algorithm's defaults and below any explicit flag or `--set FIELD=VALUE`
(learners.agents.options; `--no-recipe` turns the recipe off, not the task defaults). The task table itself (names,
env ids, env kwargs, descriptions) is robot_rl.presets; a task without an entry here trains with the task defaults
alone (DEFAULT_RECIPE: no overrides), and an `--env-id` run with one update per env step.

A misspelt field name or an invalid value (one AgentConfig refuses) raises ConfigError at construction, so a bad
entry in RECIPES fails on import, before any run starts; so does an entry for a task robot_rl.presets lacks.

Usage::

    TASK_DEFAULTS.overrides("state")            # {"discount": 0.95, "n_step": 5, "bc_q_filter": True, ...}
    recipe = recipe_for("twin-reach")           # DEFAULT_RECIPE for a task without one, or for None
    recipe.overrides("state")                   # {}: no twin task holds a learner setting in its recipe
    gripper_mode("twin-reach")                  # "locked_open": its task file's; GRIPPER_DEFAULTS[mode] applies
    without_privileged(("object", "state[0:3]"))  # ("state[0:3]",): what a faithful run observes
    TASK_DEFAULTS.updates_per_step              # 2 (state runs)
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
    updates_per_step: int | None = None
    """Agent updates per env step: `robot-rl train --updates-per-step`, the learner's `--utd` (None: not this
    recipe's to say: the task defaults', or 1 for an `--env-id` run)."""

    def __post_init__(self) -> None:
        for mode in OBS_MODES:
            overrides = dict(getattr(self, mode))
            check_agent_fields(overrides, where=f"recipe ({mode})")
            try:
                AgentConfig(**overrides)  # the values too: a recipe AgentConfig refuses never reaches a run
            except (TypeError, ValueError) as err:
                raise ConfigError(f"recipe ({mode}): {err}") from err
            object.__setattr__(self, mode, MappingProxyType(overrides))
        ups = self.updates_per_step
        require(ups is None or (isinstance(ups, int) and ups >= 1), "updates_per_step", ups,
                "must be None or an int >= 1")

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
"""The recipe of a task without one (and of an `--env-id` run): no overrides."""

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
# 12-15k env steps; unfiltered BC: 80-90 % by 2k, then down to 55-75 % by 20k). Once the actor sits at the
# critic's maximum the filter drops nearly every demo row (on peg insertion 99 %, where the critic then rated the
# policy's action 0.08 above the demo's while the policy failed a third of its episodes), so a dropped row keeps a
# floor weight of 0.1 for a task that holds what it works with (bc_q_filter_floor, LOCKED_CLOSED), which keeps its
# demos' pull there. A task that grasps nothing (reach) keeps the BC term unfiltered (LOCKED_OPEN).
_TWIN_COMMON: dict[str, Any] = {
    "state_scale": 10.0, "bc_weight": 30.0, "hidden_dims": (256, 256), "batch_size": 128,
    "critic_updates_per_actor_update": 1, "ensemble_size": 4, "ensemble_subsample": 2}
PIXEL_ENCODER_DEFAULTS = ("encoder", "encoder_pretrain_steps", "encoder_features")
"""The camera-encoder part of the pixel defaults: dropped when the run chooses its encoder itself (--encoder,
--encoder-weights, --set encoder / encoder_weights / encoder_features; learners.agents.options chose_encoder)."""
_PIXELS_WITH_DEMOS: dict[str, Any] = {
    "encoder": "resnet10", "encoder_pretrain_steps": 1000, "encoder_features": "both",
    "num_spatial_features": 2, "encoder_dropout": 0.0,
    "discount": 0.95, "n_step": 5, "state_scale": 10.0, "bc_weight": 30.0, "bc_q_filter": True,
    "bc_q_filter_gripper": True, "hidden_dims": (256, 256), "batch_size": 128, "critic_updates_per_actor_update": 1,
    "ensemble_size": 2, "ensemble_subsample": 2}
"""What a task on the arm env trains with from cameras + proprio when it has demos (measured on the twin: docs/
training.md "From pixels"): SERL's frozen ResNet-10, pretrained first on the run's own demos (`robot-rl
pretrain-encoder`'s objective, 1,000 steps: the TCP now and at the next gripper event, labels from proprio and the
recorded gripper command, so a real cell has them), its target heads' predictions beside a light trainable head (2
spatial features per channel, no dropout), the state recipe's learning mechanisms (5-step returns, the Q-filtered BC
term with the gripper filtered apart, discount 0.95, the x10 state scale), batch 128, 2 critics (CPU cost; the
frozen backbone's outputs are cached per stored frame, learners.replay.feature_cache)."""
_PICK_PLACE_STATE: dict[str, Any] = {
    "discount": 0.95, **_TWIN_COMMON,
    "bc_q_filter": True, "bc_q_filter_gripper": True, "n_step": 5}
"""The state recipe of the grasping tasks (pick-cube, and cube-relocate's two directions)."""

TASK_DEFAULTS = Recipe(state=_PICK_PLACE_STATE, pixels=_PIXELS_WITH_DEMOS, updates_per_step=2)
"""What a task on robot-rl's arm env trains with from its state (no cameras) below its recipe, and with
`--no-recipe` (learners.agents.options task_defaults_layer): the grasping tasks' state recipe, 2 updates per env
step. Measured without a recipe (benchmarks/sample_efficiency.py, 3 seeds; docs/training.md "Without a recipe"):
pick-cube is this configuration exactly; peg insertion (its Q filter, without the floor its recipe adds) and reach
(its n-step returns, filter and discount) learn slower with it than with their recipes; the x10 scale beat the
unscaled state on both of those. With
cameras and demos `_PIXELS_WITH_DEMOS` (an encoder pretrained on the demos at the run's start; its encoder part,
PIXEL_ENCODER_DEFAULTS, only when the run names no encoder of its own), 2 updates per env step; with cameras and no
demos nothing (SERL's image agent, 1 update per env step). Not for an `--env-id` run, whose observation need not be
metres and radians (the x10 state scale) nor its reward sparse."""

LOCKED_CLOSED = Recipe(state={"bc_q_filter_floor": 0.1},
                       pixels={"bc_q_filter_floor": 0.1, "bc_q_filter_gripper": False})
"""What the task defaults add for a task whose gripper is locked closed (its task file's `[gripper] mode`: it holds the
part it works with, a physical property of the task, not a learner setting): the Q filter keeps a floor (a dropped demo
row still counts at a tenth of its weight). Once the actor sits at the critic's maximum the filter drops nearly every
demo row; on peg insertion (the gripper holds the peg) the BC term then vanished and the policy drifted away from the
insertion (the defaults without it: first >= 90 % at never / 2.1k / never in 4k env steps; with it 1.0 / 1.0 / 1.0k,
last 100 / 100 / 95 % at 10k; 3 seeds, `--no-recipe`). Not for a free gripper: there the floor pulls the gripper's mode
toward the demos' "open" at the object (pick-cube's main command 18 / 20 and 16 / 20 with it, 20 / 20 twice without),
and on the arm dims alone it left pick-cube's late evaluations unsteady; a locked gripper has no such mode to pull. From
cameras the gripper is not filtered apart (the measured pixel run's setting)."""

LOCKED_OPEN = Recipe(state={"bc_q_filter": False}, pixels={"bc_q_filter": False})
"""What the task defaults add for a task whose gripper is locked open (it holds nothing and grasps nothing: a reach,
a push): the BC term unfiltered. With no grasp there is no moment where the demos' action and the policy's differ in
kind, and the demos' motion is the task; the filter then only drops the demos' pull while the critic is still
unsure. Measured on twin reach (3 seeds, 3k env steps, `--no-recipe` plus one setting each; docs/training.md
"Without a recipe"): first >= 90 % at 1.0 / 1.5 / 1.5k unfiltered, never / never / never with the filter,
1.5 / 2.5 / 3.0k with the filter and LOCKED_CLOSED's floor; its former recipe (unfiltered, discount 0.9, 1-step)
1.5 / 1.5 / 1.5k; discount 0.9 or 1-step returns alone with the filter never reached 90 %. From cameras: not
measured."""

GRIPPER_DEFAULTS: Mapping[str, Recipe] = MappingProxyType({"locked_closed": LOCKED_CLOSED, "locked_open": LOCKED_OPEN})
"""The task defaults' addition per `[gripper] mode` of the task file (a free gripper adds nothing)."""

DEMO_DEFAULTS = Recipe(state={
    "obs_norm": True, "discount": 0.95, "n_step": 5, "bc_weight": 30.0, "bc_q_filter": True})
"""What an `--env-id` run (any gymnasium env) with demos trains with from its state (learners.agents.options
task_defaults_layer; `robot-rl train --demos`): the grasping tasks' learning mechanisms (5-step returns, the
Q-filtered BC term, discount 0.95) on the algorithm's network and ensemble, with the state normalised per element
by the demos' mean and std (AgentConfig.obs_norm) in place of the twin's x10 scale: a third-party env's readings
need not be metres (gym-hil's gripper reads 0-255 beside positions in metres). Without demos (and with cameras)
nothing: the algorithm's defaults, which the gymnasium defaults benchmark measures. Measured on a third-party pick
task (benchmarks/third_party.py; docs/training.md "Without a recipe")."""

RECIPES: dict[str, Recipe] = {
    # reach: its gripper is locked open (its task file), so the task defaults add LOCKED_OPEN's unfiltered BC term.
    # Its former recipe (discount 0.9, 1-step returns, unfiltered BC) learned no faster than the defaults with the
    # filter off (LOCKED_OPEN's measurement).
    "twin-reach": Recipe(updates_per_step=2),
    # pick-cube and cube-relocate (both directions of the reset-free forward/backward run) train from state with the
    # task defaults, Q-filtered BC included. Probes of cube-relocate (forward task alone, with resets, 50 demos, 6k
    # env steps, evaluation every 1k on 20 episodes): the unfiltered BC term swung 0 / 65 / 60 / 0 / 40 / 45 % and its
    # stochastic policy, the one a reset-free run trains with, succeeded on 15 % of episodes at 6k (it dropped or
    # pushed the cube, so the next direction started from a scene no demo shows); with the filter 0 / 5 / 20 / 65 /
    # 95 / 90 % (seed 0) and 0 / 0 / 5 / 50 / 80 / 75 % (seed 1), stochastic 55 % at 6k (seed 0). Neither the HIL-SERL
    # gripper head (0 / 65 / 65 / 35 / 60 / 30 %) nor the Monte-Carlo lower bound (0 / 60 / 40 / 45 / 20 % at 5k)
    # steadied the unfiltered recipe (seed 0 each). benchmarks/forward_backward.py measures it in the reset-free run.
    "twin-pick-cube": Recipe(updates_per_step=2),
    "twin-cube-relocate": Recipe(updates_per_step=2),
    # peg-insert: the task locks the gripper closed (its task file), so the task defaults add LOCKED_CLOSED's floor;
    # its object observation is the peg's pose relative to the hole (README: the diagnosis and table). Its former
    # recipes: the BC term unfiltered (first >= 90 % at 2.0 / 1.0 / 1.0k), then the floor as a recipe (now the
    # locked gripper's default, so --no-recipe keeps it).
    "twin-peg-insert": Recipe(updates_per_step=2),
}
RECIPES["twin-cube-relocate-back"] = RECIPES["twin-cube-relocate"]

_unknown = sorted(set(RECIPES) - set(PRESETS))
if _unknown:  # a recipe for a task robot_rl.presets does not know would never be used
    raise ConfigError(f"learners.agents.recipes: recipes for unknown task(s) {_unknown}; tasks: {sorted(PRESETS)}")


def recipe_for(task: str | None) -> Recipe:
    """The training recipe of task preset `task` on top of TASK_DEFAULTS (DEFAULT_RECIPE when it has none, or for
    None)."""
    return RECIPES.get(task, DEFAULT_RECIPE) if task is not None else DEFAULT_RECIPE


def gripper_mode(task: str | None) -> str:
    """The task's `[gripper] mode` (robot_rl.task_file GRIPPER_MODES: free, locked_closed or locked_open); "free"
    for no task or one without a task file."""
    if task is None:
        return "free"
    from robot_rl.presets import get_preset

    tf = get_preset(task).task_file
    return "free" if tf is None else str(tf.value("gripper", "mode", "free"))


def with_task_defaults(task: str) -> Recipe:
    """What twin preset `task` trains with above the algorithm's defaults, as one Recipe: TASK_DEFAULTS (with
    GRIPPER_DEFAULTS' for a locked gripper) with the task's recipe on top (benchmarks that build an agent themselves,
    and result files, use it)."""
    recipe = recipe_for(task)
    locked = GRIPPER_DEFAULTS.get(gripper_mode(task), DEFAULT_RECIPE)
    return Recipe(state={**TASK_DEFAULTS.state, **locked.state, **recipe.state},
                  pixels={**TASK_DEFAULTS.pixels, **locked.pixels, **recipe.pixels},
                  updates_per_step=recipe.updates_per_step or TASK_DEFAULTS.updates_per_step)
