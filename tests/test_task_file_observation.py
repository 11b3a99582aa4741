"""A task file's observation selection (`[observation] state` / `pixels_state`): the state leaves a policy observes,
validated when the file is read, and applied by the one agent resolver (learners.agents.options) between the
device's defaults and the task's recipe, below the flags and --set; the twin presets carry the selections their
recipes used to, so the agents they train are unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from learners.agents.device_defaults import settle
from learners.agents.options import (
    AgentFlags,
    agent_layers,
    algorithm_preset,
    announce_agent_config,
    resolve_agent,
    resolve_agent_config,
    state_select_origin,
)
from learners.agents.recipes import RECIPES
from learners.training.flags import build_train_parser, train_config
from robot_rl.errors import ConfigError
from robot_rl.task_file import TASK_FILES_DIR, load_task_file

PICK = ("object", "state[0:3]", "state[5]", "state[12]")
PIXELS = ("state[0:3]", "state[5]", "state[12]")
# what the twin recipes selected before the selection moved into the task files
OLD_SELECT = {"twin-reach": ("object", "state[0:3]"), "twin-pick-cube": PICK, "twin-cube-relocate": PICK,
              "twin-cube-relocate-back": PICK, "twin-peg-insert": ("object", "state[0:3]", "state[5]")}


_COMMON = {"state_scale": 10.0, "bc_weight": 30.0, "hidden_dims": (256, 256), "batch_size": 128,
           "critic_updates_per_actor_update": 1, "ensemble_size": 4, "ensemble_subsample": 2}
_PICK_STATE = {"discount": 0.95, **_COMMON, "bc_q_filter": True, "n_step": 5}
_GRIPPER = {"bc_q_filter_gripper": True}
"""Since then the task defaults filter the gripper's BC on its own (inert where a recipe turns the filter off)."""
OLD_RECIPES = {"twin-reach": {"state": {**_PICK_STATE, **_GRIPPER, "bc_q_filter": False}, "pixels": {}},
               "twin-pick-cube": {"state": {**_PICK_STATE, **_GRIPPER}, "pixels": {}},
               "twin-cube-relocate": {"state": {**_PICK_STATE, **_GRIPPER}, "pixels": {}},
               "twin-cube-relocate-back": {"state": {**_PICK_STATE, **_GRIPPER}, "pixels": {}},
               "twin-peg-insert": {"state": {**_PICK_STATE, **_GRIPPER, "bc_q_filter_floor": 0.1},
                                   "pixels": {}}}
"""The twin recipes as they were, whole, before the task defaults (learners.agents.recipes TASK_DEFAULTS) took what
they shared, plus what changed since: the gripper's own Q filter in the defaults, peg-insert's recipe, which
turned the filter off, keeping it with a floor instead, and reach's (discount 0.9, 1-step returns, the filter off),
now the defaults with its locked-open gripper's unfiltered BC term. The presets train exactly these agents from
state. From cameras (this test's runs have no demos) the twin's CPU-trimmed pixel recipe is gone: a run without
demos gets SERL's image agent; with demos the pixel defaults (tests/test_agent_options.py), and a locked gripper's
addition (peg's floor, reach's unfiltered BC) comes with them."""


def old_resolution(task: str, has_cameras: bool, faithful: bool, device: str) -> object:
    """The AgentConfig the resolver built when the recipe held the selection (its faithful rule included)."""
    flags = AgentFlags(task=task, faithful=faithful, device=device)
    layers = agent_layers(flags, has_cameras)
    select = PIXELS if has_cameras else OLD_SELECT[task]
    if faithful:
        select = tuple(e for e in select if not e.startswith("object"))
    recipe = {**OLD_RECIPES[task]["pixels" if has_cameras else "state"], "state_select": select}
    cfg = resolve_agent_config(algorithm_preset(flags.algo, has_cameras), layers.base, layers.machine, recipe,
                               layers.flags, layers.set)
    return settle(cfg, layers.machine, explicit=(recipe, layers.flags, layers.set))


@pytest.mark.parametrize("task", sorted(OLD_SELECT))
def test_the_twin_presets_train_the_agent_they_trained_before(task: str) -> None:
    assert not any("state_select" in getattr(r, m) for r in RECIPES.values() for m in ("state", "pixels"))
    for mode in ("state", "pixels"):
        for faithful in (False, True):
            for device in ("cpu", "cuda"):
                argv = ["--task", task, "--obs-mode", mode, "--out", "/nonexistent", "--device", device]
                cfg = train_config(build_train_parser().parse_args([*argv, *(["--faithful", "--reward", "human",
                                                                               "--intervene", "scripted"]
                                                                              if faithful else [])]))
                got = cfg.agent_config(has_cameras=mode == "pixels")
                assert got == old_resolution(task, mode == "pixels", faithful, device), (mode, faithful, device)
    faithful_pick = resolve_agent(AgentFlags(task="twin-pick-cube", faithful=True), False).state_select
    assert faithful_pick == PIXELS  # the privileged 'object' leaf is gone


def lab(tmp_path: Path, observation: str = "", box: str = "") -> str:
    path = tmp_path / "lab.toml"
    path.write_text(f'[task]\nname = "lab-pick"\nbase = "twin-pick-cube"\n\n[observation]\n{observation}\n\n'
                    f'[box]\n{box}\n')
    return str(path)


def test_layers_file_then_recipe_then_flags_then_set(tmp_path: Path) -> None:
    own = lab(tmp_path, 'state = ["state[0:3]", "state[12]"]\npixels_state = ["state[12]"]')
    select = resolve_agent(AgentFlags(task=own), False).state_select
    assert select == ("state[0:3]", "state[12]")
    assert resolve_agent(AgentFlags(task=own), True).state_select == ("state[12]",)
    # the selection is the task's, not the recipe's: --no-recipe keeps it; `--set state_select=` observes every leaf
    assert resolve_agent(AgentFlags(task=own, no_recipe=True), False).state_select == ("state[0:3]", "state[12]")
    assert resolve_agent(AgentFlags(task=own, no_recipe=True, set=("state_select=",)), False).state_select == ()
    assert resolve_agent(AgentFlags(task=own, state_select=("state",)), False).state_select == ("state",)
    assert resolve_agent(AgentFlags(task=own, state_select=("state",), set=("state_select=object",)),
                         False).state_select == ("object",)
    assert resolve_agent(AgentFlags(), False).state_select == ()  # an --env-id run: every leaf
    assert state_select_origin(AgentFlags(task=own), False) == f"the task file {own} (observation.state)"
    assert state_select_origin(AgentFlags(task="twin-reach"), True) == \
        f"the task file {TASK_FILES_DIR / 'twin-reach.toml'} (observation.pixels_state)"
    assert state_select_origin(AgentFlags(task=own, state_select=("state",)), False) == "the flags"
    assert state_select_origin(AgentFlags(task=own, set=("state_select=state",)), False) == "--set"
    assert state_select_origin(AgentFlags(), False) == "the defaults: every state leaf"
    # a lab's task (its box from the lab) inherits no privileged leaf; its own selection is taken as written
    box = 'pos_min_m = [0.3, -0.2, 0.02]\npos_max_m = [0.6, 0.2, 0.3]'
    assert resolve_agent(AgentFlags(task=lab(tmp_path, box=box)), False).state_select == PIXELS
    assert state_select_origin(AgentFlags(task=lab(tmp_path, box=box)), False).endswith(
        "(twin-pick-cube's observation.state)")
    written = lab(tmp_path, 'state = ["object", "state[0:3]"]', box)
    assert resolve_agent(AgentFlags(task=written), False).state_select == ("object", "state[0:3]")


def test_the_agent_config_line_says_where_the_selection_came_from(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    flags = AgentFlags(task="twin-peg-insert")
    announce_agent_config(resolve_agent(flags, False), tmp_path, "[train]",
                          origin=state_select_origin(flags, False))
    line = capsys.readouterr().out
    assert 'state_select=["object", "state[0:3]", "state[5]"]' in line
    assert "(state_select from the task file" in line and "twin-peg-insert.toml (observation.state))" in line


@pytest.mark.parametrize(("body", "message"), [
    ('state = ["state[0:"]', r"lab.toml: observation.state\[0\] 'state\[0:': expected 'leaf', 'leaf\[i\]' or "
                             r"'leaf\[a:b\]'"),
    ('pixels_state = ["state[1]", "x[]"]', r"observation.pixels_state\[1\] 'x\[\]': expected"),
    ('state = "object"', r"observation.state must be a list, got 'object'"),
    ('state = ["object", 3]', r"observation.state\[1\] must be a non-empty string, got 3 \(int\)"),
    ('state_select = ["object"]', r"unknown key observation.state_select; known: .*'pixels_state'"),
])
def test_a_bad_selection_is_one_line_naming_the_field(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_task_file(lab(tmp_path, body))
