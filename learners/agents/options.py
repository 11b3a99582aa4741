"""The ONE way `robot-rl train`, `robot-rl learner` and `robot-rl sim` (which forwards its flags to its learner
child) turn their agent options into an AgentConfig: one typed flags dataclass (`AgentFlags`, which each command
fills from its own flag names) and one resolver (`resolve_agent(flags, has_cameras)`), so the same options give the
same agent on every command (tests/test_agent_options.py holds them to it). Also `--set FIELD=VALUE` for any
AgentConfig field (repeatable, parsed by the field's type) and printing / saving the resolved config.

Resolution, later wins (each layer a dict of AgentConfig fields):

1. the algorithm's preset (`ALGORITHMS`, learners.agents.config): `rlpd` is SERL's RLPD, `rlpd_state_config` for
   state observations and SERL's image agent (`drq_config`, DrQ with RLPD's sampling) with cameras; `drq`, `sac`
   and `hil-serl` name their presets (`--algo` on train, `--agent` on the learner; the same four on both);
2. the run's default encoder, `conv` (trained from scratch; no weights file needed), or, when an encoder weights
   file is given, the architecture its metadata names (`resnet10` or `resnet18`; `resnet10` for an older file);
3. this device's defaults (learners.agents.device_defaults.machine_defaults: the cheaper state RLPD agent and
   torch.compile on a CPU; with cameras, where the task's pixel defaults apply, the lean pixel learner on a CPU with
   native bf16, `cpu_pixel_defaults`; nothing on a GPU): the same on train and learner;
4. the task defaults (learners.agents.recipes TASK_DEFAULTS: RLPD with n-step returns, a Q-filtered BC term, the x10
   state scale, a small ensemble, 2 updates per env step; with cameras only with demos on the torch backend, then
   also a frozen ResNet-10 pretrained on the demos at the run's start unless the run names its encoder; with a gripper
   locked closed the Q filter's floor, locked open no filter: GRIPPER_DEFAULTS) for a task on robot-rl's arm env
   (`env_module` "envs": a twin preset or a lab's task file), also with `--no-recipe`; for an `--env-id` run with demos
   (`AgentFlags.demos`) DEMO_DEFAULTS (the same mechanisms with the state normalised per element; not obs_norm with the
   JAX backend, which lacks it), otherwise none; an offline phase drops their Q filter as the recipe's;
5. the task file's observation selection (`state_select` from `[observation] state`, or `pixels_state` with
   cameras; robot_rl.task_file): which state leaves the task's policy observes, a property of the task (what its
   observation holds and what matters), not a learner setting, so `--no-recipe` keeps it (`--set state_select=`
   with nothing after the `=` observes every leaf); a faithful run drops the privileged leaves
   (learners.agents.recipes PRIVILEGED_LEAVES), and so does a lab's task (its box from the lab: the arm has no
   object state) that inherits its selection from the twin preset it extends;
6. the task's recipe on top of the task defaults (learners.agents.recipes: only what one task needs; none for an
   `--env-id` run or with `--no-recipe`; an offline phase drops the recipe's Q filter, see `AgentFlags.offline`);
7. the explicit flags (hidden sizes, ensemble size, batch, critic updates per actor update, discount, ...);
8. `--set FIELD=VALUE`;

then `settle` (device_defaults: no compile default with backend=jax).

`--ensemble N` sets the critic ensemble size and keeps the algorithm's target rule: the target is the min over a
random subset of min(preset's subset, N) critics (RLPD / DrQ: 2, REDQ-style) or over all N where the algorithm
takes the min over all (SAC, HIL-SERL: their presets have no subset). The algorithm's preset decides, not the
device layer or the recipe: `--ensemble 10` on a CPU gives SERL's 10 critics with a subset of 2.

An unknown field or a value that does not parse is a one-line ConfigError naming the field (and the valid fields
or the expected syntax); values are then checked by AgentConfig itself (e.g. "discount=1.5 must be in (0, 1]").

VALUE syntax by the field's type: int and float as usual; bool true/false (or 1/0, yes/no, on/off); str as
given; tuples comma-separated (``hidden_dims=256,256``, ``state_select=object,state[0:3]``) or a JSON list
(``hidden_dims=[256,256]``); optional fields (ensemble_subsample, grad_clip_norm, ...) also take none / null.

The resolved config is printed at start (the fields that differ from `AgentConfig()`, and which layer gave the state
selection: `state_select_origin`) and saved in full as
``OUT/agent_config.json``.

Usage::

    flags = AgentFlags(task="twin-reach", ensemble_size=5, set=("n_step=3",))
    cfg = resolve_agent(flags, has_cameras=False)      # what train, learner and sim all build from these
    parser = argparse.ArgumentParser(); add_set_option(parser)
    args = parser.parse_args(["--set", "n_step=5", "--set", "hidden_dims=64,64"])
    parse_set(args.set)                               # {"n_step": 5, "hidden_dims": (64, 64)}
    announce_agent_config(cfg, out, prefix="[train]")   # one line on stdout + OUT/agent_config.json
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from learners.agents.config import (
    BACKENDS,
    AgentConfig,
    check_agent_fields,
    drq_config,
    hil_serl_config,
    rlpd_state_config,
    sac_config,
)
from learners.agents.device_defaults import cpu_pixel_defaults, machine_defaults, settle
from learners.agents.recipes import (
    DEMO_DEFAULTS,
    GRIPPER_DEFAULTS,
    PIXEL_ENCODER_DEFAULTS,
    RECIPES,
    TASK_DEFAULTS,
    Recipe,
    gripper_mode,
    recipe_for,
    without_privileged,
)
from robot_rl.config import Config, require
from robot_rl.errors import ConfigError

AGENT_CONFIG_FILE = "agent_config.json"
"""The resolved AgentConfig of a run, in its run directory (train and learner alike)."""
ALGORITHMS: dict[str, Callable[..., AgentConfig]] = {
    "rlpd": rlpd_state_config, "drq": drq_config, "sac": sac_config, "hil-serl": hil_serl_config}
"""The agent presets by name (train's --algo, the learner's --agent); `rlpd` with cameras is `drq_config`."""
ALGOS = tuple(ALGORITHMS)
DEFAULT_ENCODER = "conv"
"""The camera encoder of a run that names none and gives no weights file (resnet10 needs one)."""
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


def add_set_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup, dest: str = "set") -> None:
    """Add the repeatable ``--set FIELD=VALUE`` option (collected as a list of strings in `dest`)."""
    parser.add_argument("--set", dest=dest, action="append", default=[], metavar="FIELD=VALUE",
                        help="set any AgentConfig field (repeatable; after the task's recipe and the other flags), "
                             "e.g. --set n_step=5 --set hidden_dims=256,256 --set layer_norm=false")


@functools.cache
def _field_types() -> dict[str, Any]:
    return typing.get_type_hints(AgentConfig)


def _describe(kind: Any) -> str:
    """Human words for a field type: 'an integer', 'comma-separated integers', ..."""
    args = typing.get_args(kind)
    if typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in args:
        inner = next(a for a in args if a is not type(None))
        return f"{_describe(inner)} or none"
    if typing.get_origin(kind) is tuple:
        return {int: "comma-separated integers", float: "comma-separated numbers"}.get(args[0], "comma-separated "
                                                                                         "values")
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(kind, str(kind))


def _parse_as(kind: Any, text: str) -> Any:
    """`text` as a value of type `kind` (ValueError when it is not one)."""
    args = typing.get_args(kind)
    if typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in args:
        if text.lower() in ("none", "null"):
            return None
        return _parse_as(next(a for a in args if a is not type(None)), text)
    if typing.get_origin(kind) is tuple:
        if text.startswith("["):
            items = json.loads(text)
            if not isinstance(items, list):
                raise ValueError(text)
            parts = [str(x) for x in items]
        else:
            parts = [x.strip() for x in text.split(",") if x.strip()]
        return tuple(_parse_as(args[0], x) for x in parts)
    if kind is bool:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ValueError(text)
    if kind is int:
        return int(text)
    if kind is float:
        return float(text)
    if kind is str:
        return json.loads(text) if len(text) >= 2 and text[0] == text[-1] == '"' else text
    raise ValueError(f"no parser for {kind}")  # pragma: no cover - every AgentConfig field type is handled


def parse_value(field: str, text: str) -> Any:
    """The value `text` of AgentConfig field `field`, parsed by the field's type (ConfigError otherwise)."""
    check_agent_fields([field], where=f"--set {field}={text}")
    kind = _field_types()[field]
    try:
        return _parse_as(kind, text.strip())
    except ValueError:
        raise ConfigError(f"--set {field}={text}: expected {_describe(kind)} for AgentConfig field '{field}'") \
            from None


def parse_set(items: Iterable[str]) -> dict[str, Any]:
    """{field: typed value} from ``FIELD=VALUE`` strings (later items win); ConfigError names a bad one."""
    out: dict[str, Any] = {}
    for item in items:
        field, sep, text = item.partition("=")
        field = field.strip()
        if not sep or not field:
            raise ConfigError(f"--set {item!r}: expected FIELD=VALUE, e.g. --set n_step=5")
        out[field] = parse_value(field, text)
    return out


def resolve_agent_config(make: Callable[..., AgentConfig], *layers: Mapping[str, Any]) -> AgentConfig:
    """`make(**overrides)` with the override layers merged in order (later wins): recipe, flags, --set. Every
    name must be an AgentConfig field; the values are validated by AgentConfig (ConfigError naming the field)."""
    merged: dict[str, Any] = {}
    for layer in layers:
        check_agent_fields(layer, where="agent options")
        merged.update(layer)
    if isinstance(merged.get("residual_base"), str) and merged["residual_base"].strip():
        from learners.agents.residual import absolute_source

        merged["residual_base"] = absolute_source(merged["residual_base"])  # runs resume from any directory
    try:
        return make(**merged)
    except TypeError as err:  # a value of the wrong type reaching AgentConfig.validate
        raise ConfigError(f"agent options: {err}") from err


def describe_agent_config(cfg: AgentConfig) -> str:
    """The fields of `cfg` that differ from `AgentConfig()`, as ``name=value`` pairs on one line."""
    default = AgentConfig().to_dict()
    changed = [f"{k}={json.dumps(v)}" for k, v in cfg.to_dict().items() if default.get(k) != v]
    return ", ".join(changed) if changed else "(all AgentConfig defaults)"


def save_agent_config(cfg: AgentConfig, out: str | Path) -> Path:
    """Write `cfg` in full to OUT/agent_config.json (written whole, then renamed into place); returns the path."""
    path = Path(out) / AGENT_CONFIG_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(cfg.to_dict(), indent=1) + "\n")
    tmp.replace(path)
    return path


def announce_agent_config(cfg: AgentConfig, out: str | Path, prefix: str, log: Callable[[str], Any] = print,
                          origin: str | None = None) -> Path:
    """Save `cfg` to OUT/agent_config.json and log one line: where, the fields that differ from defaults and (given
    `origin`, `state_select_origin`'s words) where the state selection came from."""
    path = save_agent_config(cfg, out)
    note = f" (state_select from {origin})" if origin else ""
    log(f"{prefix} agent config (in full: {path}; other fields: AgentConfig defaults): {describe_agent_config(cfg)}"
        f"{note}")
    return path


def compile_what(agent: Any) -> str:
    """What an agent's timed first update held, for the CLIs' one-line report: JAX tracing + XLA, torch.compile's
    tracing + inductor, or the fallback to eager when torch.compile failed (SACAgent.compile_status)."""
    status = str(getattr(agent, "compile_status", ""))
    if status.startswith("eager"):
        return f"{status}; training goes on eager"
    if status == "compiled":
        return ("torch.compile: tracing + inductor compilation of the losses + the update; cached on disk for the "
                "next run")
    return "JAX: tracing + XLA compilation + the update; cached on disk for the next run"


# --------------------------------------------------------------------------------------------------- the resolver


@dataclasses.dataclass(frozen=True)
class AgentFlags(Config):
    """The agent options of one run, as `robot-rl train`, `robot-rl learner` and `robot-rl sim` (through its
    learner) take them; each command maps its own flag names onto these fields (None: not given)."""

    algo: str = "rlpd"
    """The algorithm's preset (ALGORITHMS): rlpd, drq, sac or hil-serl."""
    task: str | None = None
    """The task preset whose recipe applies (None: an --env-id run, no recipe)."""
    faithful: bool = False
    """A hardware-faithful run: the recipe's state selection loses the privileged leaves."""
    no_recipe: bool = False
    """--no-recipe: the task's recipe off (the task defaults and the task file's selection stay)."""
    demos: bool = False
    """The run learns from demos (train's --demos, or a warm start's source did: TrainConfig.source_demos): an
    --env-id run then gets DEMO_DEFAULTS (layer 4)."""
    offline: bool = False
    """The run has an offline phase (train's --offline-updates): the Q-filtered BC term (task defaults or recipe) is
    off (learners.training.config.OFFLINE_BC_NOTE says why); --set bc_q_filter=true puts it back."""
    device: str = "auto"
    """auto (cuda when available), cpu, cuda[:N]."""
    seed: int = 0
    hidden_dims: tuple[int, ...] | None = None
    ensemble_size: int | None = None
    """The critic ensemble size; the target subset follows the algorithm (module docstring)."""
    batch_size: int | None = None
    critic_updates: int | None = None
    """Critic updates per actor update (train's --utd, the learner's --critic-updates)."""
    discount: float | None = None
    state_select: tuple[str, ...] | None = None
    state_scale: float | None = None
    bc_weight: float | None = None
    obs_norm: bool = False
    encoder: str | None = None
    """conv, resnet10 or resnet18 (None: conv, or the architecture the encoder_weights file names)."""
    encoder_weights: str | None = None
    backend: str | None = None
    """torch or jax (None: AgentConfig's default, torch)."""
    set: tuple[str, ...] = ()
    """`--set FIELD=VALUE` items, applied last."""

    def validate(self) -> None:
        require(self.algo in ALGORITHMS, "algo", self.algo, f"must be one of {ALGOS}")
        require(self.backend is None or self.backend in BACKENDS, "backend", self.backend, f"must be one of {BACKENDS}")
        parse_set(self.set)  # an unknown field or a bad value fails here, before anything is built


@dataclasses.dataclass(frozen=True)
class AgentLayers:
    """The override layers of one resolution, lowest first (the module docstring's order)."""

    base: dict[str, Any]
    machine: dict[str, Any]
    defaults: dict[str, Any]
    task: dict[str, Any]
    recipe: dict[str, Any]
    flags: dict[str, Any]
    set: dict[str, Any]


def algorithm_preset(algo: str, has_cameras: bool) -> Callable[..., AgentConfig]:
    """The preset function of `algo`: rlpd is `rlpd_state_config` for state and `drq_config` with cameras."""
    if algo == "rlpd" and has_cameras:
        return drq_config
    return ALGORITHMS[algo]


def task_layer(flags: AgentFlags, has_cameras: bool) -> dict[str, Any]:
    """The task file's observation selection as {"state_select": ...} ({} for no task or a file that gives none; kept
    with --no-recipe; the module docstring says when the privileged leaves leave it)."""
    tf = _task_file(flags.task)
    select = None if tf is None else tf.state_selection("pixels" if has_cameras else "state")
    if tf is None or select is None:
        return {}
    from_twin = tf.owner("observation", "pixels_state" if has_cameras else "state").base is None
    if flags.faithful or (tf.box_source == "lab" and from_twin):
        select = without_privileged(select)
    return {"state_select": select}


def _task_file(task: str | None) -> Any:
    if task is None:
        return None
    from robot_rl.presets import get_preset

    return get_preset(task).task_file


def state_select_origin(flags: AgentFlags, has_cameras: bool) -> str:
    """Which layer gave the resolved state selection, in words for the agent-config line."""
    layers = agent_layers(flags, has_cameras)
    for layer, words in ((layers.set, "--set"), (layers.flags, "the flags"), (layers.recipe, "the task's recipe")):
        if "state_select" in layer:
            return words
    if "state_select" in layers.task:
        tf = _task_file(flags.task)
        key = "pixels_state" if has_cameras else "state"
        owner = tf.owner("observation", key)
        where = "observation" if owner is tf else f"{owner.name}'s observation"
        return f"the task file {tf.path} ({where}.{key})"
    return "the defaults: every state leaf"


def arm_task(task: str | None) -> bool:
    """True for a task on robot-rl's arm env (its preset's env_module is "envs": a twin preset or a lab's task
    file); False for None and for a task file naming another module's env."""
    if task is None:
        return False
    from robot_rl.presets import get_preset

    return get_preset(task).env_module == "envs"


def chose_encoder(flags: AgentFlags) -> bool:
    """The run names its camera encoder itself: --encoder, --encoder-weights, or --set of encoder, encoder_weights
    or encoder_features (`--set encoder_pretrain_steps=N` alone only changes how long the default one pretrains)."""
    return flags.encoder is not None or flags.encoder_weights is not None or bool(
        parse_set(flags.set).keys() & {"encoder", "encoder_weights", "encoder_features"})


def task_defaults_layer(flags: AgentFlags, has_cameras: bool) -> dict[str, Any]:
    """TASK_DEFAULTS' overrides for a task on robot-rl's arm env, kept with --no-recipe (with cameras only with
    demos and the torch backend, and without their encoder part when the run chose its encoder: `chose_encoder`),
    GRIPPER_DEFAULTS' on top for a task whose gripper is locked (closed: the Q filter's floor; open: no filter);
    DEMO_DEFAULTS' for an --env-id run with demos (without obs_norm on the JAX backend); {} otherwise. An offline
    phase drops their Q filter (as `recipe_layer` does the recipe's)."""
    if arm_task(flags.task):
        if has_cameras and not pixel_defaults_apply(flags, has_cameras):
            return {}
        out = _overrides(TASK_DEFAULTS, flags, has_cameras)
        gripper = GRIPPER_DEFAULTS.get(gripper_mode(flags.task))
        if gripper is not None:
            out.update(_overrides(gripper, flags, has_cameras))
        if has_cameras and chose_encoder(flags):
            for name in PIXEL_ENCODER_DEFAULTS:
                out.pop(name, None)
        return out
    if flags.task is None and flags.demos:
        out = _overrides(DEMO_DEFAULTS, flags, has_cameras)
        if flags.backend == "jax":
            out.pop("obs_norm", None)
        return out
    return {}


def recipe_layer(flags: AgentFlags, has_cameras: bool) -> dict[str, Any]:
    """The task recipe's overrides for this run ({} for no task or --no-recipe), the offline rule applied."""
    if flags.task is None or flags.no_recipe:
        return {}
    return _overrides(recipe_for(flags.task), flags, has_cameras)


def _overrides(recipe: Recipe, flags: AgentFlags, has_cameras: bool) -> dict[str, Any]:
    """`recipe`'s overrides for this run's observation (faithful: without the privileged leaves), the offline rule
    applied (an offline phase drops the Q filter: AgentFlags.offline)."""
    out: dict[str, Any] = recipe.overrides("pixels" if has_cameras else "state", faithful=flags.faithful)
    if flags.offline and out.get("bc_q_filter"):
        out["bc_q_filter"] = False
    return out


def flag_layer(flags: AgentFlags, has_cameras: bool) -> dict[str, Any]:
    """The explicit flags as AgentConfig fields (the ensemble's target subset by the algorithm's rule)."""
    out: dict[str, Any] = {"seed": flags.seed, "device": flags.device}
    named = {"hidden_dims": flags.hidden_dims, "ensemble_size": flags.ensemble_size, "batch_size": flags.batch_size,
             "critic_updates_per_actor_update": flags.critic_updates, "discount": flags.discount,
             "state_select": flags.state_select, "state_scale": flags.state_scale, "bc_weight": flags.bc_weight,
             "encoder": flags.encoder, "encoder_weights": flags.encoder_weights, "backend": flags.backend}
    out.update({k: v for k, v in named.items() if v is not None})
    if flags.encoder_weights is not None and flags.encoder is None:
        out["encoder"] = weights_file_encoder(flags.encoder_weights)
    if flags.ensemble_size is not None:
        subset = algorithm_preset(flags.algo, has_cameras)().ensemble_subsample
        out["ensemble_subsample"] = None if subset is None else min(subset, flags.ensemble_size)
    if flags.obs_norm:
        out["obs_norm"] = True
    return out


def weights_file_encoder(path: str) -> str:
    """The encoder a weights file is for: the architecture its metadata names, 'resnet10' for an older file
    without metadata (or one that is not there yet: building the agent then names the missing file)."""
    import os

    if not os.path.isfile(path):
        return "resnet10"
    from learners.agents.backbones import weights_architecture

    return weights_architecture(path) or "resnet10"


def agent_layers(flags: AgentFlags, has_cameras: bool) -> AgentLayers:
    """Every layer of the resolution of `flags` for a run with (or without) cameras."""
    given = parse_set(flags.set)
    if given.get("encoder_weights") is not None and "encoder" not in given:  # as --encoder-weights does
        given["encoder"] = weights_file_encoder(str(given["encoder_weights"]))
    return AgentLayers(base={"encoder": DEFAULT_ENCODER}, machine=machine_layer(flags, has_cameras),
                       defaults=task_defaults_layer(flags, has_cameras), task=task_layer(flags, has_cameras),
                       recipe=recipe_layer(flags, has_cameras),
                       flags=flag_layer(flags, has_cameras), set=given)


def pixel_defaults_apply(flags: AgentFlags, has_cameras: bool) -> bool:
    """True when a run with cameras gets the task's pixel defaults (`task_defaults_layer`): a task on robot-rl's arm
    env, with demos, on the torch backend."""
    return has_cameras and arm_task(flags.task) and bool(flags.demos) and flags.backend != "jax"


def machine_layer(flags: AgentFlags, has_cameras: bool) -> dict[str, Any]:
    """This device's defaults for the run's agent (learners.agents.device_defaults.machine_defaults), with the lean
    CPU pixel defaults (`cpu_pixel_defaults`: on a CPU with native bf16) where the task's pixel defaults apply."""
    layer = machine_defaults(flags.device, has_cameras, flags.algo)
    if pixel_defaults_apply(flags, has_cameras):
        layer.update(cpu_pixel_defaults(flags.device, flags.algo))
    return layer


def resolve_agent(flags: AgentFlags, has_cameras: bool) -> AgentConfig:
    """The AgentConfig of `flags` (the module docstring's order); ConfigError naming a bad field or value."""
    layers = agent_layers(flags, has_cameras)
    cfg = resolve_agent_config(algorithm_preset(flags.algo, has_cameras), layers.base, layers.machine,
                               layers.defaults, layers.task, layers.recipe, layers.flags, layers.set)
    return settle(cfg, layers.machine, explicit=(layers.defaults, layers.recipe, layers.flags, layers.set))


def updates_per_step(task: str | None, no_recipe: bool = False, has_cameras: bool = False,
                     demos: bool = False) -> int:
    """Agent updates per env step (train) or per received transition (learner) when no flag says: the task's
    recipe's, else the task defaults' for a run on robot-rl's arm env (from cameras only with demos), else 1."""
    recipe = None if no_recipe or task is None else RECIPES.get(task)
    if recipe is not None and recipe.updates_per_step is not None:
        return recipe.updates_per_step
    return (TASK_DEFAULTS.updates_per_step or 1) if arm_task(task) and (demos or not has_cameras) else 1
