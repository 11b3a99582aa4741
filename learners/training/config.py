"""The configuration of one `robot-rl train` run: TrainConfig (what the command parses into; saved as
OUT/config.json and in every checkpoint's meta), its validation, and the run's agent options (the task's recipe,
updates per env step, the warm start's warm-up).

Usage::

    cfg = TrainConfig(task="twin-reach", obs_mode="state", demos="demos/reach", max_env_steps=3000)
    cfg.agent_config(has_cameras=False)       # the resolved AgentConfig (learners.agents.options.resolve_agent)
    cfg.steps_per_update()                    # agent updates per env step: the flag, the recipe, else 1
    TrainConfig.from_dict(json.loads((out / "config.json").read_text())) == cfg
"""

from __future__ import annotations

import dataclasses
from typing import Any

from learners.agents.config import AgentConfig
from learners.agents.options import ALGOS, AgentFlags, machine_layer, recipe_layer, resolve_agent, updates_per_step
from learners.rewards.reward_model import parse_reward_source
from robot_rl.config import Config, require
from robot_rl.errors import ConfigError
from robot_rl.operators import check_intervene

DEFAULT_WARMUP_STEPS = 200
"""--warmup-steps default: WSRL's 5000 warm-up steps are ~0.5-1 % of its fine-tuning runs; 200 is 1 % of a
20k-step pick-cube run, 2-4 of its episodes (<= 100 steps) and twice the default --learning-starts."""
OFFLINE_BC_NOTE = (
    "offline phase: the Q-filtered BC term is off (bc_q_filter=false: every human row is cloned). Offline, "
    "with no conservative term, the critic overrates the policy's own out-of-data actions, the filter then drops "
    "the demo rows and the policy chases those errors (pick-cube, 4k offline updates: 0 % with the filter, 80 % "
    "without); --set bc_q_filter=true keeps it")
"""Printed by an offline run (`--offline-updates N`) whose task defaults or recipe have the Q-filtered BC term: that
run clones every human row instead (TD3+BC's offline recipe: the policy term plus plain BC)."""


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
    cameras: str | None = None
    """Twin presets in pixels mode: comma-separated names of the cameras the observation holds, e.g. 'front' or
    'wrist' (None: the preset's, front and wrist). Demo episodes recorded with more cameras lose the others."""
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
    source_demos: bool = False
    """A warm start without --demos whose source run learned from demos (set by `robot-rl train` from the source's
    checkpoint): an --env-id run keeps the demo defaults of the run it continues (learners.agents.options
    AgentFlags.demos), so the loaded agent fits."""
    warmup_steps: int | None = None
    """With --init-from: env steps collected with the loaded policy (its stochastic actions; no updates, no random
    actions) before fine-tuning starts; replaces --learning-starts. None: 200 (WSRL's 5000 scaled to our tasks:
    about 1 % of a 20k-step pick-cube run, 2-4 pick-cube episodes)."""
    reward: str = "env"
    """Where training rewards come from: env (the env's own), classifier:DIR (a trained reward classifier, gated;
    positives logged in OUT/reward_audit; with obs_mode 'state' the env renders the card's cameras for it, into
    info only) or human (the teleop success key); learners.rewards.reward_model. Evaluation
    always reports the env's true success. With --forward-backward: the forward direction's reward (env: the twin's
    true success of the direction's goal, privileged). `robot-rl train` without --reward takes the task file's
    `[reward]` (robot_rl.presets.task_reward; the twin presets: env)."""
    reward_gate_k: int | None = None
    """A classifier reward's gate: consecutive positive frames before its success counts (None: the classifier
    card's). `robot-rl train` without --reward-gate-k takes the task file's reward.gate_k."""
    faithful: bool = False
    """Twin presets: the hardware-faithful mode (no object observation, no reward or termination from the task's
    success, no teleport after the first reset; evaluation envs still report the true success). Needs a reward
    that is not the env's (--reward classifier:DIR or human; with --forward-backward also --backward-reward)."""
    camera_latency_ms: float | None = None
    """Twin presets: the simulated camera latency of every env of the run (ms; envs.env_config.RobotEnvConfig; the
    frames are rendered that long before the step ends). None: 100 with --faithful (FAITHFUL_TIMING), else 0."""
    action_delay_ms: float | None = None
    """Twin presets: the simulated action delay (ms; the arm's target changes that long after the action). None: 20
    with --faithful, else 0."""
    credit_first_positive: bool = False
    """With a classifier reward: its gated success is credited to the step whose frame first showed it (the gate's
    k - 1 frames and the camera lag before the step it fired at); the steps after it are not stored, as if the
    episode had ended there (learners.replay.gate_credit)."""
    align_frames: bool = False
    """Store each transition with the camera frames of its own step, not the late ones the policy acted on
    (learners.replay.frame_align): the online steps wait the env's camera lag (the twin's simulated latency) in
    the loop, demo episodes shift by the latency their files record. No effect without a camera latency."""
    intervene: str | None = None
    """Interventions in the training env (HIL-SERL; robot_rl.operators): scripted (the twin's scripted operator),
    spacemouse, gamepad or keyboard (a person at the teleop device, the `teleop` extra). The operator's action
    replaces the policy's and is stored in the online and the demo buffers; under --reward human its success key
    ends the episode. Not with --forward-backward."""
    device_config: str | None = None
    """With a hardware --intervene: a JSON file of the device's config fields (deadzone, scale, path, index, ...)."""
    operator_reset_after: int = 0
    """After this many training episodes in a row without success (by the run's reward), a person restores the scene
    before the next one (robot_rl.scene_resets; on the twin a teleport stands in for the person, counted in
    metrics.jsonl `operator_scene_resets`); 0: never, the robot's resets alone."""
    forward_backward: bool = False
    """Reset-free forward/backward training (learners.training.forward_backward) for a task that has a backward
    direction
    (twin-cube-relocate): two agents with their own buffers, demos and reward models take turns."""
    backward_demos: str | None = None
    """--forward-backward: demo episodes of the backward direction (e.g. recorded on twin-cube-relocate-back)."""
    backward_reward: str = "env"
    """--forward-backward: the backward direction's reward (env, classifier:DIR or human, as --reward)."""
    algo: str = "rlpd"
    """rlpd (SAC + symmetric demo sampling + RLPD defaults; SERL's DrQ agent with cameras), drq, sac (classic
    SAC), hil-serl (learners.agents.options.ALGORITHMS)."""
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
    """Agent updates (each: utd critic updates + 1 actor update) per env step (None: the task's recipe, else the task
    defaults' for an arm task, else 1)."""
    no_recipe: bool = False
    """Ignore the task's training recipe (learners.agents.recipes: what one task needs on top of the task defaults):
    the algorithm's defaults, the task defaults of an arm task and the task file's selection, plus the flags."""
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
    """Critic ensemble size (None: the algorithm's default); the target min keeps the algorithm's rule: a random
    subset of min(2, ensemble) members for rlpd / drq, all members for sac / hil-serl (learners.agents.options)."""
    bc_weight: float | None = None
    """Behaviour-cloning weight on demo/intervention rows in the actor loss (None: 0, plain RLPD/SAC)."""
    encoder: str | None = None
    """Image encoder: conv (small, trained from scratch), resnet10 or resnet18 (need encoder_weights); None: conv,
    or the architecture the encoder_weights file names."""
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
    threads: int = 0
    """torch CPU threads; 0 (default): one per core of this machine (os.cpu_count()). 1 when several runs share
    the machine (the benchmarks' seeds do)."""
    progress_every_s: float = 30.0
    """Seconds between progress lines during the online phase (env steps/s, updates/s, training success, ETA),
    between evaluations; 0: none."""
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
    diagnostics: bool = False
    """At each evaluation also log learning diagnostics to the metrics row (`diag_*` columns): Q against
    Monte-Carlo returns on demo and recent policy rows, the encoder's feature rank and drift, the BC term's share
    of the actor loss, the demo share, the policy's std (learners.training.diagnostics; torch backend)."""
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
        require(self.cameras is None or (self.task is not None and self.obs_mode == "pixels"), "cameras",
                self.cameras, "needs a twin --task with --obs-mode pixels")
        require(self.cameras is None or bool(self.camera_names()), "cameras", self.cameras,
                "must name at least one camera, e.g. front or wrist")
        require(not (self.diagnostics and self.forward_backward), "diagnostics", self.diagnostics,
                "is not supported with --forward-backward (its two agents log their own rows)")
        require(self.eval_every >= 1, "eval_every", self.eval_every, "must be >= 1")
        require(self.eval_episodes >= 1, "eval_episodes", self.eval_episodes, "must be >= 1")
        require(self.checkpoint_every >= 1, "checkpoint_every", self.checkpoint_every, "must be >= 1")
        require(self.threads >= 0, "threads", self.threads, "must be >= 0 (0: one per core)")
        require(self.progress_every_s >= 0, "progress_every_s", self.progress_every_s, "must be >= 0 (0: none)")
        require(self.updates_per_step is None or self.updates_per_step >= 1, "updates_per_step",
                self.updates_per_step, "must be >= 1")
        require(self.max_minutes >= 0, "max_minutes", self.max_minutes, "must be >= 0 (0 = no budget)")
        require(not self.credit_first_positive or self.reward.startswith("classifier:"), "credit_first_positive",
                self.credit_first_positive, "needs --reward classifier:DIR (only a classifier's gate fires late)")
        require(self.operator_reset_after >= 0, "operator_reset_after", self.operator_reset_after,
                "must be >= 0 (0 = never)")
        require(not (self.operator_reset_after and self.task is None), "operator_reset_after",
                self.operator_reset_after, "needs a twin --task (an --env-id env restores no scene)")
        require(not (self.operator_reset_after and self.forward_backward), "operator_reset_after",
                self.operator_reset_after, "is not for --forward-backward (each direction resets the other's scene)")
        self.agent_flags()  # an unknown --set field or a bad value fails here, before anything is built
        parse_reward_source(self.reward)
        require(self.reward_gate_k is None or self.reward_gate_k >= 1, "reward_gate_k", self.reward_gate_k,
                "must be an integer >= 1")
        parse_reward_source(self.backward_reward, flag="--backward-reward")
        require(not (self.faithful and self.task is None), "faithful", self.faithful,
                "needs a twin --task (an --env-id env has no faithful mode)")
        if self.task is None and (self.camera_latency_ms or self.action_delay_ms):
            raise ConfigError("--camera-latency-ms / --action-delay-ms: the twin's simulated timing needs a twin "
                              "--task (an --env-id env has no such option)")
        self.env_timing()  # a bad value fails here
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
        require(not (self.forward_backward and self.intervene), "intervene", self.intervene,
                "is not supported with --forward-backward")
        check_intervene(self.intervene, self.device_config, "env" if self.forward_backward else self.reward)
        require(self.intervene is None or self.task is not None, "intervene", self.intervene,
                "needs a twin --task (the operator's device drives the project's robot env)")
        require(bool(self.success_key.strip()), "success_key", self.success_key, "must be a non-empty info key")
        require(len(self.action_low) == len(self.action_high), "action_low/action_high",
                (self.action_low, self.action_high), "must have the same length")

    def env_timing(self) -> dict[str, float]:
        """The twin's simulated timing for every env of this run (robot_rl.timing.timing_overrides; {}: none)."""
        from robot_rl.timing import timing_overrides

        return timing_overrides(self.faithful, self.camera_latency_ms, self.action_delay_ms) if self.task else {}

    def camera_names(self) -> tuple[str, ...]:
        """The cameras --cameras names, in order (() when not given: the preset's)."""
        return tuple(c.strip() for c in self.cameras.split(",") if c.strip()) if self.cameras else ()

    @property
    def torch_threads(self) -> int:
        """The torch CPU threads of this run: `threads`, or one per core of this machine for 0."""
        import os

        return self.threads or os.cpu_count() or 1

    def agent_flags(self) -> AgentFlags:
        """This run's agent options for the one resolver (learners.agents.options)."""
        select = tuple(e.strip() for e in self.state_select.split(",") if e.strip()) if self.state_select else None
        return AgentFlags(algo=self.algo, task=self.task, faithful=self.faithful, no_recipe=self.no_recipe,
                          demos=self.demos is not None or self.source_demos, offline=self.offline_updates > 0,
                          device=self.device, seed=self.seed,
                          hidden_dims=(self.hidden, self.hidden) if self.hidden is not None else None,
                          ensemble_size=self.ensemble, batch_size=self.batch_size, critic_updates=self.utd,
                          discount=self.discount, state_select=select, state_scale=self.state_scale,
                          bc_weight=self.bc_weight, obs_norm=self.obs_norm, encoder=self.encoder,
                          encoder_weights=self.encoder_weights, backend=self.backend, set=self.agent_set)

    def recipe(self, has_cameras: bool) -> dict[str, Any]:
        """The task's recipe overrides (learners.agents.recipes; {} for --env-id runs and with no_recipe)."""
        return recipe_layer(self.agent_flags(), has_cameras)

    def offline_bc_note(self, has_cameras: bool, cfg: AgentConfig) -> str | None:
        """OFFLINE_BC_NOTE when this run's offline phase dropped the recipe's Q filter (and --set did not put it
        back), else None."""
        if self.offline_updates <= 0 or cfg.bc_q_filter:
            return None
        return OFFLINE_BC_NOTE if resolve_agent(self.agent_flags().replace(offline=False), has_cameras).bc_q_filter \
            else None

    def demo_dirs(self) -> tuple[str, ...]:
        """Every episode directory of the demo buffer (--demos DIR [DIR ...]); () without demos."""
        return (self.demos, *self.extra_demos) if self.demos else ()

    def warmup(self) -> int:
        """Env steps of the warm start's warm-up (--warmup-steps, default 200); 0 without --init-from."""
        if self.init_from is None:
            return 0
        return DEFAULT_WARMUP_STEPS if self.warmup_steps is None else self.warmup_steps

    def steps_per_update(self) -> int:
        """Agent updates per env step: the flag, else the task's recipe, else the task defaults' (a state run on
        the arm env), else 1."""
        if self.updates_per_step is not None:
            return self.updates_per_step
        return updates_per_step(self.task, self.no_recipe, has_cameras=self.obs_mode == "pixels",
                                demos=self.demos is not None or self.source_demos)

    def machine_defaults(self, has_cameras: bool) -> dict[str, Any]:
        """The device's defaults for this run's agent (learners.agents.device_defaults; {} on a GPU or with cameras)."""
        return machine_layer(self.agent_flags(), has_cameras)

    def agent_config(self, has_cameras: bool) -> AgentConfig:
        """The AgentConfig for this run (learners.agents.options.resolve_agent: the algorithm's defaults < the
        device's defaults < the task's recipe < the flags < --set)."""
        return resolve_agent(self.agent_flags(), has_cameras)
