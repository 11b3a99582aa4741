"""Typed task recipes (learners.agents.recipes) and the one way to set any AgentConfig field (learners.agents.options):
`--set FIELD=VALUE` parsing by field type, one-line errors, and the resolution order defaults < recipe < flags <
--set as `robot-rl train` and `robot-rl learner` apply it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from learners.agents.config import AgentConfig, rlpd_state_config
from learners.agents.options import (
    AGENT_CONFIG_FILE,
    announce_agent_config,
    parse_set,
    parse_value,
    resolve_agent_config,
)
from learners.agents.recipes import (
    DEFAULT_RECIPE,
    DEMO_DEFAULTS,
    PIXEL_ENCODER_DEFAULTS,
    RECIPES,
    TASK_DEFAULTS,
    Recipe,
    gripper_mode,
    recipe_for,
    with_task_defaults,
)
from learners.distributed.flags import agent_config as learner_agent_config
from learners.distributed.flags import build_learner_parser, updates_per_transition
from learners.training.config import TrainConfig
from robot_rl.errors import ConfigError
from robot_rl.presets import PRESETS

# ------------------------------------------------------------------------------------------------- recipes


def test_a_recipe_with_a_misspelt_field_or_a_bad_value_fails_at_construction() -> None:
    with pytest.raises(ConfigError, match=r"unknown AgentConfig field 'discout' \(did you mean 'discount'\?\)"):
        Recipe(state={"discout": 0.9})
    with pytest.raises(ConfigError, match=r"recipe \(pixels\).*n_stepp"):
        Recipe(pixels={"n_stepp": 3})
    with pytest.raises(ConfigError, match="discount"):
        Recipe(state={"discount": 1.5})  # AgentConfig refuses the value
    with pytest.raises(ConfigError, match="updates_per_step"):
        Recipe(updates_per_step=0)
    ok = Recipe(state={"discount": 0.8}, updates_per_step=3)
    assert ok.overrides("state") == {"discount": 0.8} and ok.overrides("pixels") == {}


def test_task_defaults_and_the_recipes_on_top_of_them() -> None:
    """Every arm task trains with TASK_DEFAULTS (a locked gripper's addition on top); no twin task's recipe holds a
    learner setting any more; anything else gets DEFAULT_RECIPE (no overrides)."""
    assert set(RECIPES) == set(PRESETS)
    for name in PRESETS:
        assert recipe_for(name) is RECIPES[name] and recipe_for(name).updates_per_step == 2
    for name, recipe in RECIPES.items():  # peg's floor and reach's unfiltered BC: their grippers' defaults
        assert recipe.overrides("state") == {} == recipe.overrides("pixels"), name
    assert recipe_for(None) is DEFAULT_RECIPE and recipe_for("some-third-party-task") is DEFAULT_RECIPE
    assert DEFAULT_RECIPE.overrides("state") == {} and DEFAULT_RECIPE.updates_per_step is None
    pick = TASK_DEFAULTS.overrides("state")
    assert pick["n_step"] == 5 and pick["bc_weight"] == 30.0 and pick["bc_q_filter"] and pick["discount"] == 0.95
    assert TASK_DEFAULTS.updates_per_step == 2
    pix = TASK_DEFAULTS.overrides("pixels")  # the pixel study's setup: an encoder pretrained on the demos
    assert (pix["encoder"], pix["encoder_pretrain_steps"], pix["encoder_features"]) == ("resnet10", 1000, "both")
    assert pix["batch_size"] == 128 and pix["n_step"] == 5 and pix["bc_q_filter"] and pix["bc_q_filter_gripper"]
    assert set(PIXEL_ENCODER_DEFAULTS) <= set(pix)
    assert RECIPES["twin-pick-cube"].overrides("pixels") == {}  # no pixel recipe: the defaults
    reach = with_task_defaults("twin-reach").overrides("state")  # its gripper locked open: no Q filter
    assert (reach["n_step"], reach["bc_q_filter"], reach["discount"]) == (5, False, 0.95)
    assert gripper_mode("twin-reach") == "locked_open" and gripper_mode("twin-peg-insert") == "locked_closed"
    assert gripper_mode("twin-pick-cube") == "free" == gripper_mode(None)
    assert with_task_defaults("twin-pick-cube").overrides("state") == pick
    with pytest.raises(TypeError):
        RECIPES["twin-reach"].state["discount"] = 0.5  # type: ignore[index]  # read-only


def test_recipe_values_reach_the_agent_config_of_train_and_learner() -> None:
    def learner(*extra: str) -> Any:
        return build_learner_parser().parse_args(["--task", "twin-pick-cube", "--out", "/nonexistent", *extra])

    state = with_task_defaults("twin-pick-cube").overrides("state")
    for cfg in (TrainConfig(task="twin-pick-cube").agent_config(has_cameras=False),
                TrainConfig(task="twin-pick-cube", no_recipe=True).agent_config(has_cameras=False),
                learner_agent_config(learner()), learner_agent_config(learner("--no-recipe"))):
        assert {k: getattr(cfg, k) for k in state} == state  # the task defaults: --no-recipe keeps them
    pixels = with_task_defaults("twin-pick-cube").overrides("pixels")
    for cfg in (TrainConfig(task="twin-pick-cube", obs_mode="pixels", demos="/d").agent_config(has_cameras=True),
                learner_agent_config(learner("--obs-mode", "pixels", "--demos", "/d"))):
        assert {k: getattr(cfg, k) for k in pixels} == pixels
    assert TrainConfig(task="twin-pick-cube").steps_per_update() == 2
    assert TrainConfig(task="twin-pick-cube", no_recipe=True).steps_per_update() == 2  # the task defaults'
    assert TrainConfig(task="twin-pick-cube", obs_mode="pixels", no_recipe=True).steps_per_update() == 1
    assert TrainConfig(task="twin-pick-cube", obs_mode="pixels", no_recipe=True, demos="/d").steps_per_update() == 2
    assert updates_per_transition(learner("--no-recipe", "--obs-mode", "pixels")) == 1.0
    assert updates_per_transition(learner("--no-recipe", "--obs-mode", "pixels", "--demos", "/d")) == 2.0
    assert TrainConfig(env_id="Pendulum-v1").steps_per_update() == 1
    assert updates_per_transition(learner()) == 2.0  # what `robot-rl sim` gets when it passes no --utd
    assert updates_per_transition(learner("--no-recipe")) == 2.0
    assert updates_per_transition(learner("--utd", "0.5")) == 0.5


def test_pixel_defaults_need_demos_and_step_aside_for_a_chosen_encoder() -> None:
    """From cameras an arm task gets the pixel defaults only with demos (the encoder is pretrained on them) and on
    the torch backend; a run that names its encoder keeps the rest of the defaults but not their encoder part."""
    def train(**kw: Any) -> Any:
        return TrainConfig(task="twin-pick-cube", obs_mode="pixels", **kw).agent_config(has_cameras=True)

    plain = train()  # no demos: SERL's image agent (DrQ), a conv encoder from scratch, no pretraining
    assert (plain.encoder, plain.encoder_pretrain_steps, plain.n_step, plain.bc_q_filter) == ("conv", 0, 1, False)
    lab = TrainConfig(task="twin-pick-cube", obs_mode="pixels", demos="/d", no_recipe=True)
    cfg = lab.agent_config(has_cameras=True)  # --no-recipe keeps the task defaults
    assert (cfg.encoder, cfg.encoder_pretrain_steps, cfg.encoder_features, cfg.encoder_weights) == (
        "resnet10", 1000, "both", None)
    for chosen in (train(demos="/d", encoder="conv"), train(demos="/d", agent_set=("encoder=conv",))):
        assert (chosen.encoder, chosen.encoder_pretrain_steps, chosen.encoder_features) == ("conv", 0, "spatial")
        assert chosen.batch_size == 128 and chosen.n_step == 5  # the rest of the defaults stay
    weights = train(demos="/d", encoder_weights="/w/imagenet.safetensors")  # e.g. convert-encoder's: no heads
    assert (weights.encoder_pretrain_steps, weights.encoder_features) == (0, "spatial")
    steps = train(demos="/d", agent_set=("encoder_pretrain_steps=50",))  # only the steps: the default encoder
    assert (steps.encoder, steps.encoder_pretrain_steps, steps.encoder_features) == ("resnet10", 50, "both")
    jax = TrainConfig(task="twin-pick-cube", obs_mode="pixels", demos="/d", backend="jax")
    assert jax.agent_config(has_cameras=True).encoder_pretrain_steps == 0
    peg = TrainConfig(task="twin-peg-insert", obs_mode="pixels", demos="/d").agent_config(has_cameras=True)
    assert peg.bc_q_filter_floor == 0.1 and not peg.bc_q_filter_gripper and peg.encoder_pretrain_steps == 1000


def test_a_locked_gripper_sets_the_q_filter_with_or_without_a_recipe(tmp_path: Path) -> None:
    """The Q filter follows the task file's [gripper] mode (a physical property): locked closed (peg-insert) keeps a
    floor, locked open (reach) turns the filter off, with --no-recipe too, and a lab's task with that mode gets the
    same; a free gripper gets neither."""
    from learners.distributed.flags import agent_config as learner_cfg
    from learners.distributed.flags import build_learner_parser

    for no_recipe in (False, True):
        peg = TrainConfig(task="twin-peg-insert", no_recipe=no_recipe).agent_config(has_cameras=False)
        assert peg.bc_q_filter_floor == 0.1 and peg.bc_q_filter and peg.bc_q_filter_gripper
        pick = TrainConfig(task="twin-pick-cube", no_recipe=no_recipe).agent_config(has_cameras=False)
        assert pick.bc_q_filter_floor == 0.0 and pick.bc_q_filter
        reach = TrainConfig(task="twin-reach", no_recipe=no_recipe).agent_config(has_cameras=False)
        assert not reach.bc_q_filter and reach.n_step == 5
    for mode, floor, filtered in (("locked_closed", 0.1, True), ("locked_open", 0.0, False), ("free", 0.0, True)):
        task = tmp_path / f"lab-{mode}.toml"
        task.write_text(f'[task]\nname = "lab-{mode}"\nbase = "twin-pick-cube"\n\n[gripper]\nmode = "{mode}"\n')
        args = build_learner_parser().parse_args(["--task", str(task), "--out", str(tmp_path / "o"), "--no-recipe"])
        assert (learner_cfg(args).bc_q_filter_floor, learner_cfg(args).bc_q_filter) == (floor, filtered), mode
    assert with_task_defaults("twin-peg-insert").overrides("state")["bc_q_filter_floor"] == 0.1  # benchmarks' view
    assert "bc_q_filter_floor" not in with_task_defaults("twin-pick-cube").overrides("state")
    explicit = TrainConfig(task="twin-peg-insert", agent_set=("bc_q_filter_floor=0",)).agent_config(False)
    assert explicit.bc_q_filter_floor == 0.0  # --set wins


def test_an_env_id_run_with_demos_gets_the_demo_defaults_and_without_demos_nothing() -> None:
    demo = DEMO_DEFAULTS.overrides("state")
    assert demo == {"obs_norm": True, "discount": 0.95, "n_step": 5, "bc_weight": 30.0, "bc_q_filter": True}
    with_demos = TrainConfig(env_id="Pendulum-v1", demos="/some/demos").agent_config(has_cameras=False)
    assert {k: getattr(with_demos, k) for k in demo} == demo
    plain = TrainConfig(env_id="Pendulum-v1").agent_config(has_cameras=False)
    untouched = {k: getattr(plain, k) for k in demo}
    assert untouched == {k: getattr(rlpd_state_config(), k) for k in demo}  # the algorithm's defaults
    assert untouched != demo
    # with cameras nothing yet; explicit flags win; the JAX backend (no obs_norm) keeps the rest
    pixels = TrainConfig(env_id="Pendulum-v1", demos="/d").agent_config(has_cameras=True)
    assert not pixels.bc_q_filter and pixels.n_step == 1
    flagged = TrainConfig(env_id="Pendulum-v1", demos="/d", discount=0.99, agent_set=("n_step=3",))
    assert (flagged.agent_config(False).discount, flagged.agent_config(False).n_step) == (0.99, 3)
    jax = TrainConfig(env_id="Pendulum-v1", demos="/d", backend="jax").agent_config(has_cameras=False)
    assert not jax.obs_norm and jax.bc_q_filter and jax.n_step == 5
    # an offline phase drops the Q filter, as it does the task defaults'
    offline = TrainConfig(env_id="Pendulum-v1", demos="/d", offline_updates=10).agent_config(has_cameras=False)
    assert not offline.bc_q_filter and offline.bc_weight == 30.0
    assert TrainConfig(env_id="Pendulum-v1", demos="/d").steps_per_update() == 1


# ------------------------------------------------------------------------------------------------- --set


def _as_text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(AgentConfig)])
def test_set_reaches_every_field(field: str) -> None:
    """Every AgentConfig field parses from the text of its default value (every field type is handled)."""
    default = getattr(AgentConfig(), field)
    assert parse_value(field, _as_text(default)) == default


def test_set_parses_by_field_type() -> None:
    got = parse_set(["n_step=5", "hidden_dims=64,64", "gripper_hidden_dims=[32, 16]", "layer_norm=false",
                     "learn_temperature=Yes", "activation=relu", "state_select=object,state[0:3]",
                     "ensemble_subsample=none", "grad_clip_norm=1.5", "bc_weight=2", "encoder_weights=w.safetensors",
                     "discount=0.9", "discount=0.8"])
    assert got == {"n_step": 5, "hidden_dims": (64, 64), "gripper_hidden_dims": (32, 16), "layer_norm": False,
                   "learn_temperature": True, "activation": "relu", "state_select": ("object", "state[0:3]"),
                   "ensemble_subsample": None, "grad_clip_norm": 1.5, "bc_weight": 2.0,
                   "encoder_weights": "w.safetensors", "discount": 0.8}
    assert isinstance(got["bc_weight"], float) and isinstance(got["n_step"], int)


@pytest.mark.parametrize("item, pattern", [
    ("nosuch=1", r"--set nosuch=1: unknown AgentConfig field 'nosuch'; valid fields: .*n_step"),
    ("n_stpe=3", r"unknown AgentConfig field 'n_stpe' \(did you mean 'n_step'\?\)"),
    ("n_step=2.5", r"--set n_step=2.5: expected an integer for AgentConfig field 'n_step'"),
    ("layer_norm=maybe", r"expected true or false for AgentConfig field 'layer_norm'"),
    ("hidden_dims=wide", r"expected comma-separated integers for AgentConfig field 'hidden_dims'"),
    ("discount=", r"expected a number for AgentConfig field 'discount'"),
    ("ensemble_subsample=two", r"expected an integer or none"),
    ("bc_weight", r"expected FIELD=VALUE"),
    ("=3", r"expected FIELD=VALUE"),
])
def test_set_errors_are_one_line_and_name_the_field(item: str, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern) as err:
        parse_set([item])
    assert "\n" not in str(err.value)


def test_resolution_order_defaults_recipe_flags_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """defaults < task recipe < explicit flags < --set, the same on train and on the learner (no twin task has a
    learner setting in its recipe any more: the test gives reach one)."""
    monkeypatch.setitem(RECIPES, "twin-reach", Recipe(state={"discount": 0.9, "hidden_dims": (128, 128)},
                                                      updates_per_step=2))
    assert TrainConfig(task="twin-reach", no_recipe=True).agent_config(False).discount == 0.95  # task defaults
    assert TrainConfig(env_id="Pendulum-v1").agent_config(False).discount == 0.99  # rlpd default
    assert TrainConfig(task="twin-reach").agent_config(False).discount == 0.9  # recipe
    assert TrainConfig(task="twin-reach", discount=0.8).agent_config(False).discount == 0.8  # flag
    both = TrainConfig(task="twin-reach", discount=0.8, agent_set=("discount=0.7", "n_step=4"))
    assert (both.agent_config(False).discount, both.agent_config(False).n_step) == (0.7, 4)  # --set
    assert TrainConfig(task="twin-reach", agent_set=("device=cpu",)).agent_config(False).device == "cpu"

    def learner(*extra: str) -> AgentConfig:
        return learner_agent_config(build_learner_parser().parse_args(
            ["--task", "twin-reach", "--out", "/nonexistent", *extra]))

    assert learner("--no-recipe", "--device", "cpu").ensemble_size == 4  # the task defaults, above the CPU's 2
    assert learner().hidden_dims == (128, 128)  # recipe
    assert learner("--no-recipe").hidden_dims == (256, 256)  # task defaults
    assert learner("--hidden", "64,64").hidden_dims == (64, 64)  # flag
    assert learner("--hidden", "64,64", "--set", "hidden_dims=32").hidden_dims == (32,)  # --set
    assert learner("--set", "n_step=3", "--set", "layer_norm=false").n_step == 3
    assert learner("--set", "device=cpu", "--device", "auto").device == "cpu"  # --set wins over --device too
    with pytest.raises(ConfigError, match="must be in"):
        TrainConfig(task="twin-reach", agent_set=("discount=1.5",)).agent_config(False)
    with pytest.raises(ConfigError, match="unknown AgentConfig field 'nosuch'"):
        TrainConfig(env_id="Pendulum-v1", agent_set=("nosuch=1",))  # refused when the options are read
    with pytest.raises(ConfigError, match="unknown AgentConfig field 'bogus'"):
        resolve_agent_config(rlpd_state_config, {"bogus": 1})


def test_announce_prints_the_changes_and_saves_the_whole_config(tmp_path: Path) -> None:
    cfg = rlpd_state_config(n_step=3, hidden_dims=(64, 64))
    lines: list[str] = []
    path = announce_agent_config(cfg, tmp_path / "run", prefix="[train]", log=lines.append)
    assert path == tmp_path / "run" / AGENT_CONFIG_FILE
    assert AgentConfig.from_dict(json.loads(path.read_text())) == cfg
    [line] = lines
    assert line.startswith("[train] agent config") and str(path) in line
    assert "n_step=3" in line and "hidden_dims=[64, 64]" in line and "discount=0.99" in line
    assert "tau=" not in line  # unchanged from AgentConfig() defaults: only in the file


# ------------------------------------------------------------------------------------------------- device defaults


def test_cpu_defaults_apply_to_the_state_rlpd_agent_on_a_cpu_only_and_are_announced() -> None:
    from learners.agents.device_defaults import CPU_STATE_DEFAULTS, machine_defaults, notice

    assert machine_defaults("cpu", has_cameras=False, agent="rlpd") == CPU_STATE_DEFAULTS
    for device, cams, agent in (("cuda", False, "rlpd"), ("cpu", True, "rlpd"), ("cpu", False, "sac")):
        assert machine_defaults(device, cams, agent) == {}
    plain = TrainConfig(env_id="Pendulum-v1", device="cpu").agent_config(has_cameras=False)
    assert {k: getattr(plain, k) for k in CPU_STATE_DEFAULTS} == CPU_STATE_DEFAULTS
    msg = notice(plain, CPU_STATE_DEFAULTS)
    assert msg is not None and "ensemble_size=2 (GPU/SERL: 10)" in msg and "--set" in msg
    # a recipe, a flag or --set above the layer wins; the notice names only what is left
    recipe = TrainConfig(task="twin-reach", device="cpu").agent_config(has_cameras=False)
    assert recipe.ensemble_size == TASK_DEFAULTS.overrides("state")["ensemble_size"]
    override = TrainConfig(env_id="Pendulum-v1", device="cpu", agent_set=(
        "ensemble_size=10", "ensemble_subsample=2", "critic_updates_per_actor_update=8")).agent_config(False)
    assert (override.ensemble_size, override.critic_updates_per_actor_update) == (10, 8)
    assert notice(override, CPU_STATE_DEFAULTS) is None
    assert TrainConfig(env_id="Pendulum-v1", device="cuda").agent_config(has_cameras=False).ensemble_size == 10


def test_lean_pixel_defaults_apply_on_a_native_bf16_cpu_where_the_task_pixel_defaults_do(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With cameras, on a CPU with native bf16, a run that gets the task's pixel defaults (arm task, demos, torch)
    starts from the lean pixel learner, says so, and --set takes any of it back; elsewhere nothing changes."""
    from learners.agents import device_defaults
    from learners.agents.device_defaults import CPU_PIXEL_DEFAULTS, notice

    def lean(cfg: AgentConfig) -> dict[str, Any]:
        return {k: getattr(cfg, k) for k in CPU_PIXEL_DEFAULTS}

    float32 = {"image_latent_dim": 256, "backbone_precision": "float32", "mixed_precision": "off"}
    pick = TrainConfig(task="twin-pick-cube", obs_mode="pixels", demos="d", device="cpu")
    for native in (True, False):
        monkeypatch.setattr(device_defaults, "cpu_has_native_bf16", lambda native=native: native)
        cfg = pick.agent_config(has_cameras=True)
        assert lean(cfg) == (CPU_PIXEL_DEFAULTS if native else float32)
        msg = notice(cfg, pick.machine_defaults(has_cameras=True))
        if native:
            assert msg is not None and "image_latent_dim=64 (GPU/SERL: 256)" in msg and "mixed_precision=bf16" in msg
        else:
            assert msg is None
    monkeypatch.setattr(device_defaults, "cpu_has_native_bf16", lambda: True)
    # not where the task's pixel defaults do not apply: no demos, the JAX backend, a GPU, state, another algorithm
    for other in (dataclasses.replace(pick, demos=None), dataclasses.replace(pick, backend="jax"),
                  dataclasses.replace(pick, device="cuda"), dataclasses.replace(pick, algo="sac")):
        assert lean(other.agent_config(has_cameras=True)) == float32, other
    assert "image_latent_dim" not in pick.machine_defaults(has_cameras=False)
    # --set gives the float32 pixel defaults back, and the notice then names nothing of it
    back = dataclasses.replace(pick, agent_set=tuple(f"{k}={v}" for k, v in float32.items()))
    cfg = back.agent_config(has_cameras=True)
    assert lean(cfg) == float32 and notice(cfg, back.machine_defaults(has_cameras=True)) is None
    # the learner resolves the same
    args = build_learner_parser().parse_args(["--task", "twin-pick-cube", "--obs-mode", "pixels", "--demos", "d",
                                              "--out", "o"])
    assert lean(learner_agent_config(args)) == CPU_PIXEL_DEFAULTS


# ------------------------------------------------------------------------------------------------- one resolver

# The same options in each command's own flag names: (robot-rl train, robot-rl learner, robot-rl sim). Sim forwards
# --set, --backend, --seed, --obs-mode and --faithful as its learner's and anything else through --learner-args.
SAME_OPTIONS: list[tuple[list[str], list[str], list[str]]] = [
    ([], [], []),
    (["--ensemble", "5"], ["--ensemble", "5"], ["--learner-args=--ensemble 5"]),
    (["--ensemble", "1"], ["--ensemble", "1"], ["--learner-args=--ensemble 1"]),
    (["--no-recipe"], ["--no-recipe"], ["--learner-args=--no-recipe"]),
    (["--no-recipe", "--ensemble", "6"], ["--no-recipe", "--ensemble", "6"],
     ["--learner-args=--no-recipe --ensemble 6"]),
    (["--no-recipe", "--algo", "sac", "--ensemble", "4"], ["--no-recipe", "--agent", "sac", "--ensemble", "4"],
     ["--learner-args=--no-recipe --agent sac --ensemble 4"]),
    (["--algo", "hil-serl"], ["--agent", "hil-serl"], ["--learner-args=--agent hil-serl"]),
    (["--algo", "drq", "--no-recipe"], ["--agent", "drq", "--no-recipe"],
     ["--learner-args=--agent drq --no-recipe"]),
    (["--hidden", "64", "--batch-size", "32", "--utd", "2"],
     ["--hidden", "64,64", "--batch", "32", "--critic-updates", "2"],
     ["--learner-args=--hidden 64,64 --batch 32 --critic-updates 2"]),
    (["--set", "discount=0.9", "--set", "n_step=3"], ["--set", "discount=0.9", "--set", "n_step=3"],
     ["--set", "discount=0.9", "--set", "n_step=3"]),
    (["--backend", "jax"], ["--backend", "jax"], ["--backend", "jax"]),
    (["--seed", "7", "--device", "cpu"], ["--seed", "7", "--device", "cpu"],
     ["--seed", "7", "--learner-args=--device cpu"]),
    (["--faithful", "--reward", "human", "--intervene", "scripted"], ["--faithful"],
     ["--faithful", "--reward", "human", "--intervene", "scripted"]),
]


def _three_ways(tmp_path: Path, obs_mode: str, train: list[str], learner: list[str], sim: list[str],
                task: str = "twin-pick-cube") -> list[AgentConfig]:
    """The AgentConfig `robot-rl train`, `robot-rl learner` and `robot-rl sim` (the learner command line it builds,
    read by the learner's parser) resolve from the same options."""
    from learners.training.flags import build_train_parser, train_config
    from supervisor.sim import Sim
    from supervisor.sim_config import build_sim_parser, sim_config

    mode = ["--obs-mode", obs_mode]
    train_cfg = train_config(build_train_parser().parse_args(["--task", task, *mode, *train, "--out", "x"]))
    by_train = train_cfg.agent_config(has_cameras=obs_mode == "pixels")
    by_learner = learner_agent_config(build_learner_parser().parse_args(["--task", task, "--out", "x", *mode,
                                                                          *learner]))
    s = Sim(sim_config(build_sim_parser().parse_args(["--task", task, "--out", str(tmp_path / "sim"), *mode, *sim])))
    argv = s.learner_argv(None)
    assert argv[3] == "learner"
    by_sim = learner_agent_config(build_learner_parser().parse_args(argv[4:]))
    return [by_train, by_learner, by_sim]


@pytest.mark.parametrize("obs_mode", ["state", "pixels"])
@pytest.mark.parametrize("compile_works", [False, True], ids=["no-compile", "compile-default"])
@pytest.mark.parametrize("train, learner, sim", SAME_OPTIONS, ids=lambda v: " ".join(v) or "defaults")
def test_the_same_options_give_the_same_agent_on_train_learner_and_sim(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, obs_mode: str, compile_works: bool, train: list[str],
        learner: list[str], sim: list[str]) -> None:
    from learners.agents import device_defaults

    if compile_works:  # the compile default on, as on a machine with a C++ compiler (a device-layer field)
        monkeypatch.delenv(device_defaults.COMPILE_ENV, raising=False)
        monkeypatch.setattr(device_defaults, "_compile_check", lambda: None)
    by_train, by_learner, by_sim = _three_ways(tmp_path, obs_mode, train, learner, sim)
    assert by_train == by_learner, [f for f in AgentConfig.__dataclass_fields__
                                    if getattr(by_train, f) != getattr(by_learner, f)]
    assert by_sim == by_learner


def test_the_ensemble_flag_keeps_the_algorithms_target_rule(tmp_path: Path) -> None:
    """--ensemble N: RLPD / DrQ keep their random subset of 2 (min(2, N)), SAC and HIL-SERL their min over all
    critics; the same on every command (here through all three)."""
    def ensemble(obs_mode: str, train: list[str], learner: list[str]) -> tuple[int, int | None]:
        cfgs = _three_ways(tmp_path, obs_mode, train, learner, ["--learner-args=" + " ".join(learner)])
        assert cfgs[0] == cfgs[1] == cfgs[2]
        return cfgs[0].ensemble_size, cfgs[0].ensemble_subsample

    assert ensemble("state", ["--ensemble", "10"], ["--ensemble", "10"]) == (10, 2)  # SERL's state agent
    assert ensemble("state", ["--ensemble", "1"], ["--ensemble", "1"]) == (1, 1)
    assert ensemble("pixels", ["--ensemble", "5"], ["--ensemble", "5"]) == (5, 2)
    assert ensemble("state", ["--algo", "sac", "--ensemble", "4"], ["--agent", "sac", "--ensemble", "4"]) == (4, None)
    assert ensemble("state", ["--algo", "hil-serl", "--ensemble", "3"], ["--agent", "hil-serl", "--ensemble", "3"]) \
        == (3, None)


def test_rlpd_with_cameras_is_serls_image_agent_and_the_encoder_default(tmp_path: Path) -> None:
    """--algo / --agent rlpd on pixels is SERL's DrQ agent (drq_config, as --algo drq); a run names no encoder:
    conv, resnet10 when a weights file is given (both commands)."""
    from learners.agents.config import drq_config

    # no recipe, no device layer, no task selection (`state_select=`: every leaf): the preset itself
    same = ["--no-recipe", "--device", "cuda", "--set", "state_select="]
    rlpd = _three_ways(tmp_path, "pixels", ["--algo", "rlpd", *same], ["--agent", "rlpd", *same],
                       ["--learner-args=--agent rlpd " + " ".join(same)])
    drq = _three_ways(tmp_path, "pixels", ["--algo", "drq", *same], ["--agent", "drq", *same],
                      ["--learner-args=--agent drq " + " ".join(same)])
    assert set(rlpd) == set(drq) == {drq_config(encoder="conv", device="cuda")}  # no task defaults with cameras
    weights = ["--encoder-weights", "w.safetensors"]
    cfgs = _three_ways(tmp_path, "pixels", weights, weights, ["--learner-args=" + " ".join(weights)])
    assert {(c.encoder, c.encoder_weights) for c in cfgs} == {("resnet10", "w.safetensors")}
    by_set = ["--set", "encoder_weights=w.safetensors"]  # --set names the file alone: the same (sim has only --set)
    cfgs = _three_ways(tmp_path, "pixels", by_set, by_set, by_set)
    assert {(c.encoder, c.encoder_weights) for c in cfgs} == {("resnet10", "w.safetensors")}


def test_the_learner_names_the_lean_pixel_defaults_at_start(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """`robot-rl learner` (and so `robot-rl sim`'s learner) prints the CPU defaults in effect beside its agent config:
    the lean pixel line on a CPU with native bf16, none once --set took them back."""
    from types import SimpleNamespace

    from learners.agents import device_defaults
    from learners.agents.options import AgentFlags, resolve_agent
    from learners.distributed.learner import LearnerConfig
    from learners.distributed.process import LearnerProcessConfig, announce

    monkeypatch.setattr(device_defaults, "cpu_has_native_bf16", lambda: True)
    for given, expected in (((), True), (("image_latent_dim=256", "backbone_precision=float32",
                                           "mixed_precision=off"), False)):
        flags = AgentFlags(task="twin-pick-cube", demos=True, device="cpu", set=given)
        cfg = LearnerProcessConfig(task="twin-pick-cube", out=tmp_path / str(expected), agent=flags,
                                   schedule=LearnerConfig(), obs_mode="pixels")
        learner = SimpleNamespace(agent_cfg=resolve_agent(flags, has_cameras=True), resumed_from=None)
        announce(learner, cfg, "tcp://127.0.0.1:1", SimpleNamespace(cameras={"images/front": (64, 64, 3)}), 0)
        lines = capsys.readouterr().out.splitlines()
        lean = [ln for ln in lines if "lean CPU defaults" in ln]
        assert bool(lean) == expected, lines
        if expected:
            assert lean[0].startswith("learner: CPU learner with cameras") and "image_latent_dim=64" in lean[0]
