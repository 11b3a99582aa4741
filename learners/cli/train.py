"""`robot-rl train`: one process (env + agent + replay, no ZeroMQ); `robot-rl eval` is learners.cli.eval.

Works on our twin presets (`--task twin-reach`) and on any gymnasium env with a Box action and a Box or Dict
observation (`--env-id Pendulum-v1`, plus `--env-module M` to import a third-party registration first).

The agent: the algorithm's defaults, then the device's (learners.agents.device_defaults: a cheaper state agent on a CPU,
announced at start), then the task's recipe (learners.agents.recipes; `--no-recipe` skips it), then the explicit flags
(--discount, --hidden, ...), then `--set FIELD=VALUE` for any AgentConfig field (repeatable; see
learners.agents.options). The resolved AgentConfig is printed at start and saved as `agent_config.json`.

A gymnasium env as it comes (learners.training.gym_compat): `--success-key KEY` reads success from info[KEY] (a warning
says
when the env never reports the key); on `--env-id` runs the demo actions are compared with the env's action bounds
(a warning when the demos use a small part of them; not on the twin presets, whose recipes were measured with
their bounds) and `--action-scale auto|S` narrows the bounds the agent's [-1, 1] covers;
`--obs-norm` normalises the state by statistics of the demos and the first online transitions.

Outputs in `--out DIR`: `config.json` (this command's options), `agent_config.json`, `metrics.jsonl` (one row per
evaluation: env_step, success_rate, return, updates, updates_per_s, the mean losses since the previous row, train
success rate, buffer sizes), TensorBoard scalars in `tb/` (when tensorboard is installed), `learning_curve.png`,
and atomic resumable checkpoints in `checkpoints/` (agent + optimizers, both replay buffers, counters, RNG states).
Nothing is written before the env and the agent are built. A directory becomes a run once it holds a checkpoint or
a metrics row: then it is resumed with `--resume` or refused with a clear message; anything less (e.g. what a
failed start left behind) is reused.

Usage::

    robot-rl record-demos --task twin-reach --episodes 20 --out demos/reach --obs-mode state
    robot-rl train --task twin-reach --obs-mode state --demos demos/reach --max-env-steps 3000 --out runs/reach
    robot-rl train ... --out runs/reach --max-env-steps 6000 --resume      # continue the same run
    robot-rl train --task twin-pick-cube --obs-mode state --demos demos/pick --set n_step=3 --out runs/pick3
    robot-rl eval --checkpoint runs/reach --episodes 20                      # one JSON line
    robot-rl train --task twin-cube-relocate --obs-mode state --forward-backward --demos demos/fwd \\
        --backward-demos demos/bwd --max-env-steps 20000 --out runs/fb     # reset-free
        (learners.training.forward_backward_run)

Offline, then a warm start that keeps no offline data (WSRL, Zhou et al. 2024; learners.training.warm_start):
`--offline-updates N` trains on the demo buffer alone (`--demos DIR [DIR ...]`: demonstrations, and e.g. recorded
rollouts whose rows stay unmarked as human rows) before any env step, evaluates (env step 0) and checkpoints;
`--init-from RUN` loads another run's agent (not its replay, update counter or RNG states), evaluates it at env step
0, collects `--warmup-steps` (200) steps with it before the first update, then fine-tunes on online data only. An
offline run clones every human row: a recipe's Q-filtered BC term is off in it (OFFLINE_BC_NOTE says why)::

    robot-rl train --task twin-pick-cube --obs-mode state --demos demos/pick rollouts/pick --offline-updates 20000 \\
        --max-env-steps 0 --out runs/pick_offline                           # offline phase only
    robot-rl train --task twin-pick-cube --obs-mode state --init-from runs/pick_offline --warmup-steps 200 \\
        --max-env-steps 20000 --out runs/pick_wsrl                          # warm start, online data only

`--reward env|classifier:DIR|human` (learners.rewards.reward_model) says where training rewards come from; evaluation
always reports the env's true success. `--faithful` makes the twin's training env hardware-faithful
(envs.env.FAITHFUL: no object observation, no reward from the task's success, no teleport after the first reset);
the run then needs a reward that is not the env's: `--reward classifier:DIR` or `human` (with `--forward-backward`
also `--backward-reward`), e.g.

    robot-rl train --task twin-pick-cube --obs-mode pixels --faithful --reward classifier:runs/cls \\
        --demos demos/pick_px --max-env-steps 20000 --out runs/pick_faithful

A classifier with `--obs-mode state` (a state policy, a camera reward): the training env renders the card's
cameras at the card's size into info["reward_images"] for the classifier only (envs.env RobotEnvConfig.reward_cameras;
never in the observation, the replay buffer or a checkpoint), e.g.

    robot-rl train --task twin-pick-cube --obs-mode state --faithful --reward classifier:runs/cls \\
        --demos demos/pick --max-env-steps 20000 --out runs/pick_state_cls
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from learners.agents.agent import LearnerAgent, make_agent
from learners.agents.config import BACKENDS, AgentConfig, drq_config, hil_serl_config, rlpd_state_config, sac_config
from learners.agents.device_defaults import gpu_notice, machine_defaults, notice, settle
from learners.agents.options import add_set_option, announce_agent_config, compile_what, parse_set, resolve_agent_config
from learners.agents.recipes import recipe_for
from learners.replay.buffer import ReplayBuffer, ReplayConfig, concat_batches
from learners.rewards.reward_model import (
    RewardModelWrapper,
    camera_shapes_of_env,
    env_overrides,
    make_reward_model,
    parse_reward_source,
    reward_camera_overrides,
)
from learners.training.online import (
    LoopConfig,
    LoopCounters,
    action_bounds,
    env_rng_state,
    evaluate_episodes,
    from_env_action,
    set_env_rng_state,
    train_offline,
    train_online,
)
from learners.training.run_state import TrainingRun
from robot_rl.checkpoint import latest_checkpoint
from robot_rl.config import Config, require
from robot_rl.episodes import load_dir
from robot_rl.errors import ConfigError
from robot_rl.gym_env import env_spec_of, make_gym_env
from robot_rl.metrics import MetricsLog, plot_learning_curve, read_metrics
from robot_rl.presets import PRESETS, get_preset
from robot_rl.specs import EnvSpec

ALGOS = ("rlpd", "sac", "hil-serl")
DEFAULT_WARMUP_STEPS = 200
"""--warmup-steps default: WSRL's 5000 warm-up steps are ~0.5-1 % of its fine-tuning runs; 200 is 1 % of a
20k-step pick-cube run, 2-4 of its episodes (<= 100 steps) and twice the default --learning-starts."""
OFFLINE_BC_NOTE = (
    "offline phase: the recipe's Q-filtered BC term is off (bc_q_filter=false: every human row is cloned). Offline, "
    "with no conservative term, the critic overrates the policy's own out-of-data actions, the filter then drops "
    "the demo rows and the policy chases those errors (pick-cube, 4k offline updates: 0 % with the filter, 80 % "
    "without); --set bc_q_filter=true keeps it")
"""Printed by an offline run (`--offline-updates N`) whose task recipe has the Q-filtered BC term: that run clones
every human row instead (TD3+BC's offline recipe: the policy term plus plain BC)."""


@dataclasses.dataclass(frozen=True)
class TrainConfig(Config):
    """One training run (what `robot-rl train` parses into; saved as OUT/config.json)."""

    task: str | None = None
    """Task preset name (see `robot-rl tasks`); or leave None and give env_id."""
    env_id: str | None = None
    """A gymnasium id (used when task is None)."""
    env_module: str | None = None
    """Module to import before gymnasium.make (registers env_id); presets set it themselves."""
    obs_mode: str | None = None
    """Twin presets: 'state' (privileged state, no rendering) or 'pixels' (cameras)."""
    image_size: int | None = None
    """Twin presets in pixels mode: camera image size."""
    demos: str | None = None
    """Directory of demo episodes (robot_rl.episodes format) for the demo buffer (RLPD); with --forward-backward
    the forward direction's."""
    extra_demos: tuple[str, ...] = ()
    """More episode directories for the same demo buffer (`--demos DIR DIR2 ...`), e.g. recorded rollouts of a
    policy, failures included. Each row keeps its episode's `intervention` flag: rows of episodes not driven by a
    human stay unmarked, so the behaviour-cloning term (bc_weight) never imitates them."""
    demo_ratio: float = 0.5
    """Fraction of each batch drawn from the demo buffer while it holds data (RLPD: 0.5); the rest from online data."""
    offline_updates: int = 0
    """Offline phase: this many agent updates on the demo buffer alone (--demos: demos and/or recorded rollouts)
    before the first env step; then one evaluation (env_step 0) and a checkpoint. With --max-env-steps 0 the run
    ends there (an offline-trained checkpoint for `robot-rl eval` and `--init-from`)."""
    init_from: str | None = None
    """Warm start (WSRL): load the agent (actor, critics, targets, temperature, Adam moments; not the update
    counter, the RNG states or any replay data) of this run directory or checkpoint (learners.training.warm_start),
    collect
    --warmup-steps env steps with it, then fine-tune on online data only (no demo buffer unless --demos is given).
    The loaded policy is evaluated at env step 0."""
    warmup_steps: int | None = None
    """With --init-from: env steps collected with the loaded policy (its stochastic actions; no updates, no random
    actions) before fine-tuning starts; replaces --learning-starts. None: 200 (WSRL's 5000 scaled to our tasks:
    about 1 % of a 20k-step pick-cube run, 2-4 pick-cube episodes)."""
    reward: str = "env"
    """Where training rewards come from: env (the env's own), classifier:DIR (a trained reward classifier, gated;
    positives logged in OUT/reward_audit; with obs_mode 'state' the env renders the card's cameras for it, into
    info only) or human (the teleop success key); learners.rewards.reward_model. Evaluation
    always reports the env's true success. With --forward-backward: the forward direction's reward (env: the twin's
    true success of the direction's goal, privileged)."""
    faithful: bool = False
    """Twin presets: the hardware-faithful mode (no object observation, no reward or termination from the task's
    success, no teleport after the first reset; evaluation envs still report the true success). Needs a reward
    that is not the env's (--reward classifier:DIR or human; with --forward-backward also --backward-reward)."""
    forward_backward: bool = False
    """Reset-free forward/backward training (learners.training.forward_backward) for a task that has a backward
    direction
    (twin-cube-relocate): two agents with their own buffers, demos and reward models take turns."""
    backward_demos: str | None = None
    """--forward-backward: demo episodes of the backward direction (e.g. recorded on twin-cube-relocate-back)."""
    backward_reward: str = "env"
    """--forward-backward: the backward direction's reward (env, classifier:DIR or human, as --reward)."""
    algo: str = "rlpd"
    """rlpd (SAC + symmetric demo sampling + RLPD defaults), sac (classic SAC), hil-serl."""
    backend: str | None = None
    """Learner backend: torch or jax (AgentConfig.backend; None: the AgentConfig default, torch)."""
    max_env_steps: int = 10_000
    """Total env steps of the run."""
    start_steps: int = 0
    """Uniform random actions for this many steps first (0 with demos: RLPD learns from demos at once)."""
    learning_starts: int = 100
    """No updates before the online buffer holds this many transitions (HIL-SERL: 100)."""
    utd: int | None = None
    """Critic updates per actor update (None: the algorithm's default)."""
    updates_per_step: int | None = None
    """Agent updates (each: utd critic updates + 1 actor update) per env step (None: the task's recipe, else 1)."""
    no_recipe: bool = False
    """Ignore the task's training recipe (learners.agents.recipes: state selection, discount, BC weight, network sizes,
    updates per step): the algorithm's plain defaults plus the flags given."""
    batch_size: int | None = None
    """Minibatch size (None: the algorithm's default)."""
    hidden: int | None = None
    """Width of the two hidden layers of actor and critics (None: 256)."""
    state_select: str | None = None
    """Comma-separated state leaves/elements the networks see, e.g. 'object,state[0:3]' (None: all; see
    learners.agents.obs). Demos and replay keep the whole observation."""
    state_scale: float | None = None
    """Multiply the state vector by this before the networks (None: 1)."""
    discount: float | None = None
    """Discount factor (None: the algorithm's default)."""
    ensemble: int | None = None
    """Critic ensemble size (None: the algorithm's default); the target min uses a random subset of
    min(2, ensemble) members."""
    bc_weight: float | None = None
    """Behaviour-cloning weight on demo/intervention rows in the actor loss (None: 0, plain RLPD/SAC)."""
    encoder: str = "conv"
    """Image encoder: conv (small, trained from scratch) or resnet10 (needs encoder_weights)."""
    encoder_weights: str | None = None
    """Local safetensors file with ResNet-10 weights (no downloads at run time)."""
    eval_every: int = 1000
    """Evaluate (deterministic policy) every this many env steps, and at the end."""
    eval_episodes: int = 10
    """Episodes per evaluation."""
    checkpoint_every: int = 5000
    """Checkpoint at the first episode end after every this many env steps (and at the end)."""
    replay_capacity: int = 200_000
    """Online buffer slots."""
    device: str = "auto"
    """auto (cuda when available), cpu, cuda[:N]."""
    threads: int = 1
    """torch CPU threads (1 is best on a shared 2-core machine)."""
    seed: int = 0
    """Seed of the agent, the env resets and the warm-up actions."""
    max_minutes: float = 0.0
    """Wall-clock budget: stop (evaluate, checkpoint) at the first evaluation after this many minutes; 0 = none."""
    agent_set: tuple[str, ...] = ()
    """AgentConfig overrides as FIELD=VALUE strings (`--set`, repeatable), applied after the recipe and the flags
    (learners.agents.options)."""
    success_key: str = "success"
    """The info key the env reports success under (e.g. 'succeed', 'is_success'); training and evaluation read it
    as info['success'] (learners.training.gym_compat). A warning says when the env never reports it."""
    action_scale: str | None = None
    """Narrow the env's action bounds: 'auto' (the demos' range per dim), one number S or one per dim (centre of the
    bounds +- S, env units); the agent's [-1, 1] then covers only that box (learners.training.gym_compat)."""
    obs_norm: bool = False
    """Normalise the state vector by per-element mean and std from the demos and the first online transitions
    (before learning starts; carried in the policy's weights to actors and checkpoints): AgentConfig.obs_norm."""
    action_low: tuple[float, ...] = ()
    """The resolved action box's low corner (from action_scale; set by `robot-rl train`, not a flag)."""
    action_high: tuple[float, ...] = ()
    """The resolved action box's high corner (from action_scale; set by `robot-rl train`, not a flag)."""

    def validate(self) -> None:
        require((self.task is None) != (self.env_id is None), "task/env_id", (self.task, self.env_id),
                "give exactly one of --task and --env-id")
        require(self.algo in ALGOS, "algo", self.algo, f"must be one of {ALGOS}")
        require(self.max_env_steps >= (0 if self.offline_updates > 0 else 1), "max_env_steps", self.max_env_steps,
                "must be >= 1 (0 only with --offline-updates: an offline-only run)")
        require(self.offline_updates >= 0, "offline_updates", self.offline_updates, "must be >= 0")
        require(self.offline_updates == 0 or self.demos is not None, "offline_updates", self.offline_updates,
                "needs --demos DIR [DIR ...]: the offline phase trains on the demo buffer alone")
        require(not self.extra_demos or self.demos is not None, "extra_demos", self.extra_demos, "needs --demos")
        require(0.0 <= self.demo_ratio <= 1.0, "demo_ratio", self.demo_ratio, "must be in [0, 1]")
        require(self.warmup_steps is None or self.init_from is not None, "warmup_steps", self.warmup_steps,
                "only with --init-from (a fresh run waits --learning-starts steps before its first update)")
        require(self.warmup_steps is None or self.warmup_steps >= 0, "warmup_steps", self.warmup_steps,
                "must be >= 0")
        require(self.init_from is None or self.start_steps == 0, "start_steps", self.start_steps,
                "must be 0 with --init-from: uniform random actions would throw the loaded policy away (the warm-up "
                "collects with it: --warmup-steps)")
        if self.forward_backward:
            for name, value, default in (("--init-from", self.init_from, None), ("--offline-updates",
                                         self.offline_updates, 0), ("--demos DIR DIR2", self.extra_demos, ())):
                require(value == default, name.lstrip("-").replace("-", "_"), value,
                        f"is not supported with --forward-backward ({name})")
        require(self.eval_every >= 1, "eval_every", self.eval_every, "must be >= 1")
        require(self.eval_episodes >= 1, "eval_episodes", self.eval_episodes, "must be >= 1")
        require(self.checkpoint_every >= 1, "checkpoint_every", self.checkpoint_every, "must be >= 1")
        require(self.threads >= 1, "threads", self.threads, "must be >= 1")
        require(self.updates_per_step is None or self.updates_per_step >= 1, "updates_per_step",
                self.updates_per_step, "must be >= 1")
        require(self.max_minutes >= 0, "max_minutes", self.max_minutes, "must be >= 0 (0 = no budget)")
        parse_set(self.agent_set)  # an unknown field or a bad value fails here, before anything is built
        parse_reward_source(self.reward)
        parse_reward_source(self.backward_reward, flag="--backward-reward")
        require(not (self.faithful and self.task is None), "faithful", self.faithful,
                "needs a twin --task (an --env-id env has no faithful mode)")
        require(self.forward_backward or self.backward_demos is None, "backward_demos", self.backward_demos,
                "only with --forward-backward")
        require(self.forward_backward or self.backward_reward == "env", "backward_reward", self.backward_reward,
                "only with --forward-backward")
        if self.faithful:
            for flag, source in (("--reward", self.reward),
                                 *((("--backward-reward", self.backward_reward),) if self.forward_backward else ())):
                if parse_reward_source(source)[0] == "env":
                    raise ConfigError(f"--faithful: the env gives no reward in the hardware-faithful mode (no "
                                      f"Task.success); pass {flag} classifier:DIR (robot-rl train-classifier) or "
                                      f"{flag} human")
        require(bool(self.success_key.strip()), "success_key", self.success_key, "must be a non-empty info key")
        require(len(self.action_low) == len(self.action_high), "action_low/action_high",
                (self.action_low, self.action_high), "must have the same length")

    def recipe(self, has_cameras: bool) -> dict[str, Any]:
        """The task's recipe overrides (learners.agents.recipes; {} for --env-id runs and with no_recipe)."""
        if self.task is None or self.no_recipe:
            return {}
        out = self._task_recipe(has_cameras)
        if self.offline_updates > 0 and out.get("bc_q_filter"):
            out["bc_q_filter"] = False  # OFFLINE_BC_NOTE says why; --set bc_q_filter=true still wins
        return out

    def _task_recipe(self, has_cameras: bool) -> dict[str, Any]:
        """learners.agents.recipes' overrides for this run's task and mode, as the recipe states them."""
        assert self.task is not None
        return recipe_for(self.task).overrides("pixels" if has_cameras else "state", faithful=self.faithful)

    def offline_bc_note(self, has_cameras: bool, cfg: AgentConfig) -> str | None:
        """OFFLINE_BC_NOTE when this run's offline phase dropped the recipe's Q filter (and --set did not put it
        back), else None."""
        if self.offline_updates <= 0 or self.task is None or self.no_recipe or cfg.bc_q_filter:
            return None
        return OFFLINE_BC_NOTE if self._task_recipe(has_cameras).get("bc_q_filter") else None

    def demo_dirs(self) -> tuple[str, ...]:
        """Every episode directory of the demo buffer (--demos DIR [DIR ...]); () without demos."""
        return (self.demos, *self.extra_demos) if self.demos else ()

    def warmup(self) -> int:
        """Env steps of the warm start's warm-up (--warmup-steps, default 200); 0 without --init-from."""
        if self.init_from is None:
            return 0
        return DEFAULT_WARMUP_STEPS if self.warmup_steps is None else self.warmup_steps

    def steps_per_update(self) -> int:
        """Agent updates per env step: the flag, else the task's recipe, else 1."""
        if self.updates_per_step is not None:
            return self.updates_per_step
        return recipe_for(None if self.no_recipe else self.task).updates_per_step

    def machine_defaults(self, has_cameras: bool) -> dict[str, Any]:
        """The device's defaults for this run's agent (learners.agents.device_defaults; {} on a GPU or with cameras)."""
        return machine_defaults(self.device, has_cameras, self.algo)

    def agent_config(self, has_cameras: bool) -> AgentConfig:
        """The AgentConfig for this run: the algorithm's defaults < the device's defaults < the task's recipe <
        the flags < --set."""
        over: dict[str, Any] = dict(seed=self.seed, device=self.device, encoder=self.encoder,
                                    encoder_weights=self.encoder_weights)
        if self.utd is not None:
            over["critic_updates_per_actor_update"] = self.utd
        if self.batch_size is not None:
            over["batch_size"] = self.batch_size
        if self.hidden is not None:
            over["hidden_dims"] = (self.hidden, self.hidden)
        if self.state_select:
            over["state_select"] = tuple(e.strip() for e in self.state_select.split(",") if e.strip())
        if self.state_scale is not None:
            over["state_scale"] = self.state_scale
        if self.discount is not None:
            over["discount"] = self.discount
        if self.ensemble is not None:
            over["ensemble_size"] = self.ensemble
            over["ensemble_subsample"] = min(2, self.ensemble)
        if self.bc_weight is not None:
            over["bc_weight"] = self.bc_weight
        if self.obs_norm:
            over["obs_norm"] = True
        if self.backend is not None:
            over["backend"] = self.backend
        make = {"sac": sac_config, "hil-serl": hil_serl_config}.get(
            self.algo, drq_config if has_cameras else rlpd_state_config)
        machine, recipe, set_fields = self.machine_defaults(has_cameras), self.recipe(has_cameras), \
            parse_set(self.agent_set)
        return settle(resolve_agent_config(make, machine, recipe, over, set_fields), machine,
                      explicit=(recipe, over, set_fields))


def make_env(cfg: TrainConfig, for_reward_model: bool = False, task: str | None = None,
             reward_sources: Sequence[str] = (), **env_kwargs: Any) -> Any:
    """gymnasium.make the run's env (preset or env id); ConfigError for a module or env id that does not exist.
    `for_reward_model`: the training env of a run whose reward is not the env's (a twin preset then does not end
    episodes on its own success; `reward_sources` defaults to (cfg.reward,)). `task`: another preset than cfg.task
    (the backward direction's); `env_kwargs`: extra env options (presets). In a faithful run every env drops the
    object observation; only the training env (`for_reward_model`) is made fully hardware-faithful (evaluation envs
    still teleport and report the true success). A state-mode twin preset whose `reward_sources` include a
    classifier renders the cards' cameras at the card's size (unless --image-size says otherwise) into
    info["reward_images"], never into the observation (learners.rewards.reward_model.reward_camera_overrides)."""
    module: str | None = cfg.env_module
    env_id, kwargs = str(cfg.env_id), {}
    if for_reward_model and not reward_sources:
        reward_sources = (cfg.reward,)
    if cfg.task is not None:
        preset = get_preset(task or cfg.task)
        module, env_id = preset.env_module, preset.env_id
        kwargs = preset.make_kwargs(obs_mode=cfg.obs_mode, image_size=cfg.image_size, **env_kwargs)
        if for_reward_model:
            kwargs.update(env_overrides(cfg.reward))
            if cfg.faithful:
                kwargs["faithful"] = True
        if cfg.faithful:  # every env of a faithful run observes the same (evaluation envs may still teleport)
            kwargs.setdefault("object_obs", False)
        cams = reward_camera_overrides(reward_sources, cfg.obs_mode)
        if cams:
            kwargs["reward_cameras"] = cams["reward_cameras"]
            kwargs.setdefault("image_size", cams["image_size"])
    try:
        base = make_gym_env(env_id, module, **kwargs)
    except ConfigError as err:
        if "reward_cameras" not in kwargs:
            raise
        raise ConfigError(f"{' and '.join(s for s in reward_sources if s.startswith('classifier:'))} with "
                          f"--obs-mode state (the env renders the card's cameras): {err}") from None
    from learners.training.gym_compat import ActionBoxWrapper, SuccessKeyWrapper

    env: Any = SuccessKeyWrapper(base, cfg.success_key)
    if cfg.action_low:
        env = ActionBoxWrapper(env, cfg.action_low, cfg.action_high)
    return env


def camera_source(obs_mode: str | None) -> str:
    """Where a run's reward classifier gets its frames, for its card-check errors."""
    if obs_mode == "state":
        return "reward cameras (--obs-mode state renders the classifier's cameras; --image-size)"
    return "observation (--obs-mode / --image-size)"


def resolve_action_box(cfg: TrainConfig, log: Any = print) -> TrainConfig:
    """`cfg` with action_low/high resolved from --action-scale (auto: from the demos' actions), or unchanged."""
    if cfg.action_scale is None or cfg.action_low:
        return cfg
    from learners.training.gym_compat import auto_action_box, parse_action_scale, scaled_action_box

    env = make_env(cfg)
    try:
        space = env.action_space
        low, high = np.asarray(space.low, np.float64), np.asarray(space.high, np.float64)
    finally:
        env.close()
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise ConfigError("--action-scale needs an env with finite action bounds")
    half = parse_action_scale(cfg.action_scale, int(low.shape[0]))
    if half is None:
        if not cfg.demos:
            raise ConfigError("--action-scale auto needs --demos DIR (it uses the demos' action range)")
        episodes, _ = load_dir(cfg.demos)  # the first --demos directory: the demonstrations, not extra rollouts
        acts = [ep.actions for ep in episodes]
        box = auto_action_box(np.concatenate(acts) if acts else np.zeros((0, low.shape[0])), low, high)
    else:
        box = scaled_action_box(half, low, high)
    log(f"[train] action box: the agent's [-1, 1] covers [{', '.join(f'{a:.3g}' for a in box[0])}] .. "
        f"[{', '.join(f'{b:.3g}' for b in box[1])}] of the env's bounds (--action-scale {cfg.action_scale})")
    return cfg.replace(action_low=tuple(box[0]), action_high=tuple(box[1]))


def env_spec(env: Any, cfg: TrainConfig) -> EnvSpec:
    """The run's EnvSpec (robot_rl.gym_env.env_spec_of), named after its task or env id."""
    return env_spec_of(env, cfg.task or str(cfg.env_id))


@dataclasses.dataclass
class Run:
    """Everything a training run holds in memory."""

    cfg: TrainConfig
    env: Any
    eval_env: Any
    spec: EnvSpec
    agent: LearnerAgent
    online: ReplayBuffer
    demo: ReplayBuffer | None
    counters: LoopCounters
    rng: np.random.Generator

    def training_run(self) -> TrainingRun:
        return TrainingRun(self.agent, self.online, self.demo, dataclasses.asdict(self.counters), self.rng)


def without_extra_leaves(episode: Any, spec: EnvSpec) -> Any:
    """`episode` with the observation leaves that `spec` lacks dropped (e.g. the privileged "object" state of demos
    recorded on the twin, for a hardware-faithful run that observes proprio only); unchanged when it has none."""
    keep = {s.name for s in spec.observation}
    if all(k in keep for k in episode.observations):
        return episode
    ep_spec = episode.spec
    if isinstance(ep_spec, Mapping):
        ep_spec = {**ep_spec, "observation": [o for o in ep_spec.get("observation", []) if o.get("name") in keep]}
    return dataclasses.replace(episode, observations={k: v for k, v in episode.observations.items() if k in keep},
                               spec=ep_spec)


def load_demo_buffer(directory: str | Sequence[str], spec: EnvSpec, seed: int, flag: str = "--demos",
                     bounds: Any = None, narrowed_actions: bool = False, warn_action_space: Any = None,
                     ) -> ReplayBuffer:
    """A demo buffer holding every readable episode of `directory` (one directory or several: demos, recorded
    rollouts; each episode checked against `spec`); ConfigError naming `flag` and the directory when one holds
    none. Every row keeps its episode's `intervention` flags (a rollout's rows are not human rows).

    `bounds` (learners.training.gym_compat action bounds of the env, or None for a [-1, 1] env): episode files hold
    env-unit actions, the agent and its buffers act in [-1, 1], so actions are rescaled. `narrowed_actions`: the
    run narrowed the env's bounds (--action-scale), so the episodes' recorded action spec is replaced by the run's.
    `warn_action_space` (a gymnasium Box, --env-id runs): warn when the demos (the first directory) use only a
    sliver of its range."""
    directories = [directory] if isinstance(directory, str) else list(directory)
    loaded: list[tuple[str, list[Any]]] = []
    for d in directories:
        episodes, errors = load_dir(d)
        for err in errors:
            print(f"[train] warning: skipped {err}", file=sys.stderr)
        if not episodes:
            raise ConfigError(f"{flag} {d}: no readable episodes")
        loaded.append((d, episodes))
    total = sum(ep.length + 1 for _, episodes in loaded for ep in episodes)
    demo = ReplayBuffer(spec, max(2, total + ReplayConfig().demo_capacity), seed=seed)
    for d, episodes in loaded:
        for ep in episodes:
            ep = without_extra_leaves(ep, spec)
            if ep.spec is not None:
                ep_spec = EnvSpec.from_dict(ep.spec)
                if narrowed_actions:  # recorded with the env's own bounds; the run narrowed them (--action-scale)
                    ep_spec = dataclasses.replace(ep_spec, action=spec.action)
                spec.require_equal(ep_spec, what=f"demo episodes in {d}")
            if bounds is not None:
                ep = dataclasses.replace(ep, actions=from_env_action(ep.actions, bounds))
            demo.add_episode(ep)
    if warn_action_space is not None:
        from learners.training.gym_compat import demo_action_warning

        warning = demo_action_warning(np.concatenate([ep.actions for ep in loaded[0][1]]), warn_action_space.low,
                                      warn_action_space.high)
        if warning:
            print(f"[train] warning: {warning}", file=sys.stderr)
    return demo


def build_run(cfg: TrainConfig, reward_audit: Path | None = None) -> Run:
    """Make the envs, agent and buffers (demo episodes loaded) for `cfg`. With a learned or human reward the
    training env is wrapped in `RewardModelWrapper` (positives logged in `reward_audit`); the evaluation env
    keeps the env's own reward and success. A faithful run's training env is hardware-faithful (TrainConfig.faithful;
    the reward model is then its only reward)."""
    torch.set_num_threads(cfg.threads)
    env, eval_env = make_env(cfg, for_reward_model=True), make_env(cfg)
    model = make_reward_model(cfg.reward, camera_shapes_of_env(env), reward_audit,
                              where=f"the {cfg.task or cfg.env_id} {camera_source(cfg.obs_mode)}")
    if model is not None:
        env = RewardModelWrapper(env, model)
    spec = env_spec(env, cfg)
    agent = make_agent(spec, cfg.agent_config(has_cameras=bool(spec.cameras)))
    online = ReplayBuffer(spec, cfg.replay_capacity, seed=cfg.seed)
    demo = (load_demo_buffer(cfg.demo_dirs(), spec, seed=cfg.seed + 1, bounds=action_bounds(env),
                             narrowed_actions=bool(cfg.action_low),
                             warn_action_space=env.action_space if not cfg.action_low and cfg.task is None else None)
            if cfg.demos else None)
    return Run(cfg, env, eval_env, spec, agent, online, demo, LoopCounters(), np.random.default_rng(cfg.seed))


class ScalarWriter:
    """TensorBoard scalars when tensorboard is installed (a no-op otherwise)."""

    def __init__(self, logdir: Path) -> None:
        self._writer: Any = None
        try:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(str(logdir))
        except ImportError:
            print("[train] tensorboard not installed: no TensorBoard scalars (pip install tensorboard)",
                  file=sys.stderr)

    def write(self, row: Mapping[str, Any], step: int) -> None:
        if self._writer is None:
            return
        for k, v in row.items():
            if isinstance(v, int | float) and not isinstance(v, bool) and k != "env_step":
                self._writer.add_scalar(k, v, step)
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


def prepare_out_dir(out: Path, resume: bool) -> Path | None:
    """Check the run directory: returns the checkpoint to resume from (or None for a fresh run).

    A directory holds a run once training wrote a checkpoint or a metrics row; a fresh run refuses it (pass
    --resume) and reuses anything less, such as the config.json of an attempt that failed before training."""
    ckpt = latest_checkpoint(out / "checkpoints") if (out / "checkpoints").is_dir() else None
    if resume:
        if ckpt is None:
            raise ConfigError(f"--resume: {out} has no checkpoint to resume from")
        return ckpt
    if ckpt is not None:
        raise ConfigError(f"output directory {out} already holds a run; pass --resume to continue it, or choose "
                          "another --out")
    if (out / "metrics.jsonl").is_file():
        raise ConfigError(f"output directory {out} holds the metrics of a run that stopped before its first "
                          "checkpoint (nothing to resume); delete it or choose another --out")
    return None


def train(cfg: TrainConfig, out: Path, resume: bool = False, log: Any = print) -> dict[str, Any]:
    """Run (or resume) a training run into `out`; returns the last metrics row. Nothing is written into `out`
    until the env, the agent and the buffers are built."""
    if cfg.forward_backward:
        from learners.training.forward_backward_run import train_forward_backward

        return train_forward_backward(cfg, out, resume=resume, log=log)
    ckpt = prepare_out_dir(out, resume)
    if ckpt is not None:
        saved = TrainConfig.from_dict(json.loads((out / "config.json").read_text()))
        cfg = saved.replace(max_env_steps=cfg.max_env_steps)  # a resumed run may be extended
    cfg = resolve_action_box(cfg, log=log)
    run = build_run(cfg, reward_audit=out / "reward_audit")
    init_ckpt: Path | None = None
    init_notes: list[str] = []
    init_source: str | None = None  # the checkpoint a warm start loaded (kept in this run's checkpoints)
    if cfg.init_from is not None and ckpt is None:  # a resumed warm start restores its own checkpoint instead
        from learners.training.warm_start import init_agent_from

        try:
            init_ckpt, init_notes = init_agent_from(run.agent, run.spec, cfg.init_from)
            init_source = str(init_ckpt.resolve())
        except BaseException:
            run.env.close()
            run.eval_env.close()
            raise
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg.to_dict(), indent=1))
    announce_agent_config(run.agent.cfg, out, prefix="[train]", log=log)
    cpu_notice = notice(run.agent.cfg, cfg.machine_defaults(has_cameras=bool(run.spec.cameras)))
    if cpu_notice and ckpt is None:
        log(f"[train] {cpu_notice}")
    cuda_notice = gpu_notice(run.agent.cfg, bool(run.spec.cameras))
    if cuda_notice and ckpt is None:
        log(f"[train] {cuda_notice}")
    offline_note = cfg.offline_bc_note(bool(run.spec.cameras), run.agent.cfg)
    if offline_note and ckpt is None:
        log(f"[train] {offline_note}")
    if run.demo is not None and ckpt is None:
        human = int(np.count_nonzero(run.demo.fields["intervention"] & run.demo.valid))
        log(f"[train] demo buffer: {len(run.demo)} transitions from {', '.join(cfg.demo_dirs())} ({human} human "
            f"rows, {len(run.demo) - human} not human); demo ratio {cfg.demo_ratio}")
    if init_ckpt is not None:
        log(f"[train] warm start from {init_ckpt}: actor, critics, targets, temperature and Adam moments loaded (not "
            f"its replay data, update counter or RNG states); warm-up: {cfg.warmup()} env steps with the loaded "
            "policy, no updates, then fine-tuning on "
            + ("online data only" if run.demo is None else f"online + demo data (demo ratio {cfg.demo_ratio})"))
        if init_notes:
            log(f"[train] --init-from: training settings differ from the source's (source -> this run): "
                f"{'; '.join(init_notes)}")
    if ckpt is not None:
        tr = run.training_run()
        meta = tr.restore(ckpt)
        if "env_rng" in meta:
            set_env_rng_state(run.env, meta["env_rng"])
        if isinstance(meta.get("init_checkpoint"), str):
            init_source = meta["init_checkpoint"]
        run.counters = LoopCounters(**{k: int(tr.counters.get(k, 0)) for k in ("env_step", "episode", "updates",
                                                                               "offline_updates")})
        log(f"[train] resumed from {ckpt.name}: env_step {run.counters.env_step}, episode {run.counters.episode}, "
            f"updates {run.counters.updates}, online buffer {len(run.online)}")
    metrics = MetricsLog(out / "metrics.jsonl")
    tb = ScalarWriter(out / "tb")
    start_steps = cfg.start_steps
    if run.agent.cfg.residual_base is not None and start_steps > 0:
        start_steps = 0  # uniform random actions would throw the base policy away
        if ckpt is None:
            log(f"[train] residual RL on the base policy {run.agent.cfg.residual_base}: no uniform random warm-up "
                "(--start-steps ignored); the base plus the exploring residual acts from the first step")
    # a warm start's warm-up: the loaded policy collects cfg.warmup() steps before the first update
    learning_starts = max(1, cfg.warmup()) if cfg.init_from is not None else cfg.learning_starts
    loop_cfg = LoopConfig(total_steps=max(1, cfg.max_env_steps), start_steps=start_steps,
                          learning_starts=learning_starts, updates_per_step=cfg.steps_per_update(),
                          demo_ratio=cfg.demo_ratio, seed=cfg.seed)
    last_eval = run.counters.env_step // cfg.eval_every
    last_ckpt = run.counters.env_step // cfg.checkpoint_every
    window: list[dict[str, Any]] = []
    t0, updates0 = time.perf_counter(), run.counters.updates
    started = t0
    row: dict[str, Any] = {}
    first_update_s: float | None = None  # JAX: the first update() traces and compiles (reported once, then logged)

    def note_first_update() -> None:
        nonlocal first_update_s
        compile_s = getattr(run.agent, "compile_s", None)
        if first_update_s is None and compile_s is not None:
            first_update_s = float(compile_s)
            log(f"[train] first update {first_update_s:.1f} s ({compile_what(run.agent)})")

    def evaluate_now(extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        nonlocal window, t0, updates0
        note_first_update()
        res = evaluate_episodes(run.eval_env, run.agent, episodes=cfg.eval_episodes, seed=1_000_000 + cfg.seed)
        dt = max(time.perf_counter() - t0, 1e-9)
        r: dict[str, Any] = {
            "env_step": run.counters.env_step, "episode": run.counters.episode, "updates": run.counters.updates,
            "success_rate": float(np.mean([e["success"] for e in res])),
            "return": float(np.mean([e["return"] for e in res])),
            "updates_per_s": (run.counters.updates - updates0) / dt,
            "online_buffer": len(run.online), "demo_buffer": len(run.demo) if run.demo is not None else 0,
        }
        if window:
            r["train_return"] = float(np.mean([m["episode_return"] for m in window]))
            if "success" in window[-1]:
                r["train_success_rate"] = float(np.mean([bool(m.get("success")) for m in window]))
            for k in ("critic_loss", "actor_loss", "temperature", "q_mean", "entropy"):
                vals = [m[k] for m in window if k in m]
                if vals:
                    r[k] = float(np.mean(vals))
        r.update(extra or {})
        if first_update_s is not None:
            r["first_update_s"] = first_update_s
        if isinstance(run.env, RewardModelWrapper):  # training episodes the reward model ended, and wrongly
            r.update({f"reward_{k}": v for k, v in run.env.stats().items()})
        metrics.write(r)
        tb.write(r, run.counters.env_step)
        plot_learning_curve(read_metrics(out / "metrics.jsonl"), out / "learning_curve.png", title=run.spec.task)
        log(f"[train] step {r['env_step']}/{cfg.max_env_steps}  episode {r['episode']}  "
            f"eval success {r['success_rate']:.0%}  return {r['return']:.2f}  updates {r['updates']} "
            f"({r['updates_per_s']:.1f}/s)  buffers {r['online_buffer']}+{r['demo_buffer']} demo")
        window, t0, updates0 = [], time.perf_counter(), run.counters.updates
        warn_success()
        return r

    warned: set[str] = set()

    def warn_success() -> None:
        from learners.training.gym_compat import success_warning, success_wrapper_of

        wrapper = success_wrapper_of(run.env)
        msg = success_warning(wrapper) if wrapper is not None and run.counters.episode > 0 else None
        if msg and "success" not in warned:
            warned.add("success")
            log(f"[train] warning: {msg}")

    def checkpoint_meta() -> dict[str, Any]:
        meta: dict[str, Any] = {"config": cfg.to_dict(), "agent_config": run.agent.cfg.to_dict(),
                                "spec": run.spec.to_dict(), "env_rng": env_rng_state(run.env)}
        if init_source is not None:
            meta["init_checkpoint"] = init_source
        return meta

    def fit_obs_norm() -> None:  # --obs-norm: statistics of the demos and the online data so far
        if not run.agent.cfg.obs_norm or cfg.init_from is not None:  # a warm start keeps the loaded statistics
            return
        from learners.agents.sac import SACAgent

        assert isinstance(run.agent, SACAgent)  # obs_norm is a torch-only option: the JAX backend refuses it
        parts = [buf.sample(min(len(buf) * 4, 20_000))["obs"] for buf in (run.demo, run.online)
                 if buf is not None and len(buf) > 0]
        obs = concat_batches([{"obs": p} for p in parts])["obs"]
        mean, std = run.agent.set_state_normalization(obs)
        log(f"[train] observation normalisation from {len(run.online)} online"
            f"{f' + {len(run.demo)} demo' if run.demo is not None else ''} transitions: mean "
            f"{np.round(mean, 3).tolist()[:8]}{'...' if mean.size > 8 else ''}, std "
            f"{np.round(std, 3).tolist()[:8]}{'...' if std.size > 8 else ''}")

    def offline_phase() -> dict[str, Any]:
        """--offline-updates: updates on the demo buffer alone, then an evaluation (env step 0) and a checkpoint."""
        assert run.demo is not None  # TrainConfig.validate: --offline-updates needs --demos
        nonlocal last_ckpt
        log(f"[train] offline phase: {cfg.offline_updates} updates on the demo buffer alone ({len(run.demo)} "
            f"transitions), no env steps" + (f"; {run.counters.offline_updates} done before" if
                                             run.counters.offline_updates else ""))
        every = max(1, min(1000, cfg.offline_updates // 10))
        t_start, u_start = time.perf_counter(), run.counters.offline_updates
        last: dict[str, Any] = {}
        for m in train_offline(run.agent, run.demo, cfg.offline_updates, run.counters, report_every=every,
                               on_learning_start=fit_obs_norm):
            note_first_update()
            last = m
            rate = (m["offline_updates"] - u_start) / max(time.perf_counter() - t_start, 1e-9)
            log(f"[train] offline update {m['offline_updates']}/{cfg.offline_updates}  critic_loss "
                f"{m.get('critic_loss', float('nan')):.4f}  actor_loss {m.get('actor_loss', float('nan')):.4f}  "
                f"q_mean {m.get('q_mean', float('nan')):.3f}  ({rate:.1f} updates/s)")
        extra: dict[str, Any] = {"offline_updates": run.counters.offline_updates,
                                 **{k: float(last[k]) for k in ("critic_loss", "actor_loss", "temperature",
                                                                "q_mean", "entropy") if k in last}}
        r = evaluate_now(extra)
        path = run.training_run().save(out / "checkpoints", extra_meta=checkpoint_meta())
        last_ckpt = run.counters.env_step // cfg.checkpoint_every
        log(f"[train] offline phase done: checkpoint {path.name}")
        return r

    try:
        if cfg.offline_updates > run.counters.offline_updates:
            row = offline_phase()
        if init_ckpt is not None:  # the loaded policy before any online step: the level at the switch
            row = evaluate_now({"warmup_steps": cfg.warmup()})
        online_steps = cfg.max_env_steps > run.counters.env_step
        for m in (train_online(run.env, run.agent, run.online, loop_cfg, demo=run.demo, counters=run.counters,
                               rng=run.rng, on_learning_start=fit_obs_norm) if online_steps else ()):
            window.append(m)
            step = run.counters.env_step
            note_first_update()
            done = step >= cfg.max_env_steps
            if step // cfg.eval_every > last_eval or done:
                last_eval = step // cfg.eval_every
                row = evaluate_now()
                if cfg.max_minutes > 0 and time.perf_counter() - started > 60.0 * cfg.max_minutes and not done:
                    log(f"[train] stopping at env step {step}: --max-minutes {cfg.max_minutes} reached")
                    done = True
            if step // cfg.checkpoint_every > last_ckpt or done:
                last_ckpt = step // cfg.checkpoint_every
                path = run.training_run().save(out / "checkpoints", extra_meta=checkpoint_meta())
                log(f"[train] checkpoint {path.name}")
            if done:
                break
        if not row or row.get("env_step") != run.counters.env_step:
            row = evaluate_now()  # the run ended mid-episode: evaluate what we have
            run.training_run().save(out / "checkpoints", extra_meta=checkpoint_meta())
    finally:
        tb.close()
        run.env.close()
        run.eval_env.close()
    return row


FLAG_HELP = {
    "demos": "episode directories of the demo buffer: demonstrations first (--action-scale auto reads the first), "
             "then e.g. recorded rollouts, failures included (rows keep their episodes' intervention flags)",
    "demo_ratio": "fraction of each batch from the demo buffer while it holds data (default: 0.5, RLPD)",
    "offline_updates": "offline phase: N agent updates on the demo buffer alone before any env step, then an "
                       "evaluation at env step 0 and a checkpoint; with --max-env-steps 0 the run ends there "
                       "(default: 0)",
    "init_from": "warm start (WSRL): load the agent of this run directory or checkpoint (actor, critics, targets, "
                 "temperature, Adam moments; not its replay, update counter or RNG states), evaluate it at env "
                 "step 0, collect --warmup-steps steps with it, then fine-tune on online data only (plus --demos "
                 "when given)",
    "warmup_steps": f"with --init-from: env steps collected with the loaded policy before the first update (no "
                    f"random actions; replaces --learning-starts; default: {DEFAULT_WARMUP_STEPS})",
}


class _DemoDirs(argparse.Action):
    """`--demos DIR [DIR ...]`: the first directory into `demos`, the others into `extra_demos` (TrainConfig)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        dirs = [str(v) for v in values]
        namespace.demos = dirs[0]
        namespace.extra_demos = tuple(dirs[1:])


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="robot-rl train", description=__doc__.split("\n\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--task", help=f"task preset ({', '.join(PRESETS)})")
    src.add_argument("--env-id", help="any gymnasium env id (Box action; Box or Dict observation)")
    p.add_argument("--env-module", help="module to import first (registers --env-id)")
    p.add_argument("--out", required=True, type=Path, help="run directory")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--demos", nargs="+", metavar="DIR", default=None, action=_DemoDirs, help=FLAG_HELP["demos"])
    p.set_defaults(extra_demos=())
    add_set_option(p, dest="agent_set")
    for f in dataclasses.fields(TrainConfig):
        if f.name in ("task", "env_id", "env_module", "agent_set", "action_low", "action_high", "demos",
                      "extra_demos"):
            continue
        flag = "--" + f.name.replace("_", "-")
        default = f.default
        kind = {"max_env_steps": int, "start_steps": int, "learning_starts": int, "utd": int, "batch_size": int,
                "hidden": int, "eval_every": int, "eval_episodes": int, "checkpoint_every": int,
                "replay_capacity": int, "threads": int, "seed": int, "image_size": int, "ensemble": int,
                "state_scale": float, "discount": float, "bc_weight": float, "updates_per_step": int,
                "max_minutes": float, "demo_ratio": float, "offline_updates": int, "warmup_steps": int,
                }.get(f.name, str)
        choices = {"algo": ALGOS, "obs_mode": ("state", "pixels"), "encoder": ("conv", "resnet10"),
                   "backend": BACKENDS}.get(f.name)
        if default is False:
            p.add_argument(flag, action="store_true", help="(flag)")
            continue
        metavar = {"offline_updates": "N", "init_from": "RUN_DIR_OR_CHECKPOINT", "warmup_steps": "W"}.get(f.name)
        p.add_argument(flag, type=kind, default=default, choices=choices, metavar=metavar,
                       help=FLAG_HELP.get(f.name, f"(default: {default})"))
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig) if hasattr(args, f.name)}
    cfg = TrainConfig(**{**values, "agent_set": tuple(args.agent_set)})
    row = train(cfg, args.out, resume=args.resume)
    print(json.dumps({"out": str(args.out), **{k: row.get(k) for k in ("env_step", "success_rate", "return")}}))
    return 0
