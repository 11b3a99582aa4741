"""The JAX learner backend (`AgentConfig.backend = "jax"`, the `jax` extra): learners.agents.sac's SAC / RLPD / DrQ
update as ONE jitted function (the critic updates of one `update()` call as a `lax.scan`), behind the same Agent
seam (learners.agents.agent.LearnerAgent). This module holds the options check and the agent (state, batches,
weights, checkpoints); the update's phases are learners.agents.jax.update (`update_core`), the networks (pure jnp
functions), the name map (`ParamMap`: torch names and layouts <-> JAX paths) and Adam learners.agents.jax.nets.

Shared with the torch backend, not copied: batches come from the same samplers (learners.replay.buffer: RLPD mixing,
n-step rows), the same recipes and AgentConfig, the same checkpoints (learners.training.run_state.TrainingRun),
and the same acting policy: `act()` runs the torch `learners.agents.policy.Policy` with the JAX weights loaded
through the name map (learners.agents.jax.nets.ParamMap), exactly as an actor runs the weights this learner
publishes. The initial weights are the torch agent's for the same config and seed (learners.agents.sac.SACAgent
builds them), so both backends start from the same point.

The update, step for step as learners.agents.sac (tests/test_jax_agent.py checks losses and parameter changes against
the torch agent on the same parameters, batch and random draws): strided minibatches (rows i::k), DrQ random
shift of obs and next_obs, frozen backbones once per batch, critic ensemble with the target min over a random
subset, n-step returns and bootstraps, optional backup entropy, gradient clipping per optimizer (torch's
clip_grad_norm_), Adam as torch's (betas 0.9 / 0.999, eps 1e-8), soft target updates after every critic update,
the HIL-SERL gripper double-DQN head, then the actor (mean Q over the ensemble, BC term on human rows, optionally
Q-filtered: `bc_q_filter`) and the temperature on the last minibatch, with the encoder features detached. Random
draws come from one JAX key in the agent's state (checkpointed), so a JAX run is reproducible, but it does not
draw the same numbers as torch. `trainable_state()` and `state_dict()` give torch names and layouts.

Not supported (a one-line ConfigError naming the option, never ignored): `compile` (torch.compile; JAX always
compiles), `device='mps'`, and any AgentConfig option this module does not list in SUPPORTED_OPTIONS (options
added to the torch agent later are refused until mirrored here).

Threads and compilation: XLA's CPU thread pool follows torch's thread count when it is 1 (`--threads 1`: XLA
single-threaded) unless XLA_FLAGS says otherwise; compiled programs are cached on disk (JAX's persistent
compilation cache, in $ROBOT_RL_JAX_CACHE or ~/.cache/robot-rl/jax; `ROBOT_RL_JAX_CACHE=off` disables it).

Usage::

    agent = JaxSACAgent(spec, cfg.replace(backend="jax"))      # or learners.agents.agent.make_agent(spec, cfg)
    metrics = agent.update(sampler.sample(agent.cfg.samples_per_update))   # first call compiles (seconds)
    action = agent.act(obs)                                    # the torch policy with the current weights
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch

from learners.agents.config import AgentConfig
from learners.agents.jax.nets import Camera, ParamMap, Static, actor, adam_init, encode, gripper_q
from learners.agents.jax.update import draws_from_key, update_core
from learners.agents.policy import Policy
from learners.replay.buffer import mc_floor
from robot_rl.errors import ConfigError, ShapeError
from robot_rl.extras import optional_import
from robot_rl.specs import EnvSpec

SUPPORTED_OPTIONS = frozenset({
    "state_select", "state_scale", "hidden_dims", "layer_norm", "activation", "ensemble_size", "ensemble_subsample",
    "std_min", "std_max", "batch_size", "critic_updates_per_actor_update", "discount", "n_step", "actor_lr",
    "critic_lr", "temperature_lr", "tau", "temperature_init", "target_entropy", "target_entropy_per_dim",
    "learn_temperature", "backup_entropy", "grad_clip_norm", "bc_weight", "encoder", "encoder_weights",
    "freeze_encoder", "conv_channels", "num_spatial_features", "encoder_dropout", "image_latent_dim",
    "proprio_latent_dim", "augment_pad", "gripper_head", "gripper_hidden_dims", "gripper_flip_penalty",
    "gripper_epsilon", "backend", "device", "seed", "bc_q_filter", "bc_q_filter_gripper", "bc_q_filter_arm",
    "bc_q_filter_start", "bc_q_filter_floor", "mc_lower_bound",
    "device_replay",
})
"""AgentConfig options the JAX agent implements; any other option set away from its default is refused."""


# ------------------------------------------------------------------------------------------------ jax import
def import_jax() -> ModuleType:
    """`jax`, configured for this process (threads, compilation cache); MissingExtraError naming the `jax`
    extra when it is not installed."""
    if "jax" not in sys.modules:
        _configure_xla_threads()
    jax = optional_import("jax", extra="jax", purpose="the JAX learner backend (backend=jax)")
    _configure_cache(jax)
    return jax


def _configure_xla_threads() -> None:
    """One torch thread (`--threads 1`, the shared-CPU default) -> XLA single-threaded too, unless XLA_FLAGS
    already sets threading. Only possible before jax initialises its CPU backend."""
    flags = os.environ.get("XLA_FLAGS", "")
    if torch.get_num_threads() == 1 and "multi_thread_eigen" not in flags and "intra_op" not in flags:
        os.environ["XLA_FLAGS"] = (flags + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
                                   ).strip()


_CACHE_SET = False


def _configure_cache(jax: ModuleType) -> None:
    global _CACHE_SET
    if _CACHE_SET:
        return
    _CACHE_SET = True
    where = os.environ.get("ROBOT_RL_JAX_CACHE", str(Path.home() / ".cache" / "robot-rl" / "jax"))
    if where.lower() in ("", "off", "0", "none"):
        return
    try:
        Path(where).mkdir(parents=True, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", where)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    except (OSError, AttributeError):  # a read-only home: compile every time, still correct
        pass


def check_supported(cfg: AgentConfig) -> None:
    """ConfigError naming the first option the JAX agent does not implement (set away from its default)."""
    if cfg.compile:
        raise ConfigError("AgentConfig option compile=True is torch.compile: not available with backend=jax "
                          "(JAX compiles the whole update anyway); drop it or use backend=torch")
    if cfg.device == "mps":
        raise ConfigError("AgentConfig option device='mps' is not available with backend=jax (cpu, cuda[:N], auto)")
    if cfg.encoder == "resnet18":
        raise ConfigError("AgentConfig option encoder='resnet18' is not supported by backend=jax yet; use "
                          "encoder='resnet10' or backend=torch")
    default = AgentConfig()
    for f in dataclasses.fields(AgentConfig):
        if f.name not in SUPPORTED_OPTIONS and getattr(cfg, f.name) != getattr(default, f.name):
            raise ConfigError(f"AgentConfig option {f.name}={getattr(cfg, f.name)!r} is not supported by "
                              f"backend=jax yet; leave it at {getattr(default, f.name)!r} or use backend=torch")


def _static(cfg: AgentConfig, policy: Policy, target_entropy: float) -> Static:
    """The static shape of the agent's networks and update (never traced): from the config and the torch policy."""
    from learners.agents.encoders import CameraEncoder, ConvBackbone

    cams = []
    for name, enc in policy.encoder.camera_encoders().items():
        assert isinstance(enc, CameraEncoder)
        kind = "conv" if isinstance(enc.backbone, ConvBackbone) else "resnet10"
        cams.append(Camera(name, policy.encoder.camera_keys[name], kind, enc.frozen,
                           len(cfg.conv_channels) if kind == "conv" else 0))
    return Static(
        act=cfg.activation, n_hidden=len(cfg.hidden_dims), layer_norm=cfg.layer_norm,
        ensemble=cfg.ensemble_size, members=cfg.ensemble_subsample or cfg.ensemble_size, arm_dim=policy.arm_dim,
        gripper=cfg.gripper_head, n_gripper_hidden=len(cfg.gripper_hidden_dims),
        log_std_min=math.log(cfg.std_min), log_std_max=math.log(cfg.std_max), cameras=tuple(cams),
        state_dim=policy.layout.state_dim, proprio=policy.encoder.proprio is not None,
        dropout=cfg.encoder_dropout, augment_pad=cfg.augment_pad, tau=cfg.tau, actor_lr=cfg.actor_lr,
        critic_lr=cfg.critic_lr, temperature_lr=cfg.temperature_lr, bc_weight=cfg.bc_weight,
        bc_arm_filter=cfg.bc_filters[0], bc_q_filter_gripper=cfg.bc_filters[1],
        bc_q_filter_start=cfg.bc_q_filter_start, bc_q_filter_floor=cfg.bc_q_filter_floor,
        mc_lower_bound=cfg.mc_lower_bound, backup_entropy=cfg.backup_entropy,
        learn_temperature=cfg.learn_temperature, target_entropy=target_entropy, grad_clip_norm=cfg.grad_clip_norm,
        k=cfg.critic_updates_per_actor_update, minibatch=cfg.batch_size, feat_dim=policy.encoder.out_dim)


# ------------------------------------------------------------------------------------------------ the agent
class JaxSACAgent:
    """learners.agents.sac.SACAgent's interface and update, in JAX (see the module docstring)."""

    def __init__(self, spec: EnvSpec, cfg: AgentConfig | None = None) -> None:
        cfg = cfg or AgentConfig(backend="jax")
        check_supported(cfg)
        jax = import_jax()

        from learners.agents.sac import SACAgent

        self.cfg, self.spec = cfg, spec
        self._jax = jax
        self.device = self._jax_device(cfg.device)
        # the torch agent of the same config and seed: initial weights, the parameter names, the acting policy
        template = SACAgent(spec, cfg.replace(backend="torch", device="cpu", compile=False))
        self.policy: Policy = template.policy
        self.layout = self.policy.layout
        self.arm_dim = self.policy.arm_dim
        self._map_names(template)
        self._st = _static(cfg, self.policy, float(template.target_entropy))
        policy_arrays = {n: t.detach().cpu().numpy() for n, t in self.policy.state_dict().items()}
        self._s = self._initial_state(template, policy_arrays)
        self._frozen = self._put(self._policy_map.to_jax(policy_arrays, self._frozen_names))
        del template
        self._jit_functions()
        self._policy_dirty = False
        self.compile_s: float | None = None
        """Seconds the first `update()` took (tracing + XLA compilation + the update itself)."""

    def _map_names(self, template: Any) -> None:
        """The name maps (torch names <-> JAX paths) of every network, and the policy's parameter groups."""
        frozen_torch = {f"encoder.{n}" for n in self.policy.encoder.frozen_names()}
        self._policy_map = ParamMap(self.policy)
        self._critic_map = ParamMap(template.critic)
        self._target_encoder_map = ParamMap(template.target_encoder)
        self._gripper_map = ParamMap(template.target_gripper) if template.target_gripper is not None else None
        names = list(self.policy.state_dict())
        self._groups: dict[str, list[str]] = {
            "actor": [n for n in names if n.startswith("actor.")],
            "encoder": [n for n in names if n.startswith("encoder.") and n not in frozen_torch],
            "gripper": [n for n in names if n.startswith("gripper.")]}
        self._frozen_names = sorted(frozen_torch)
        self._target_encoder_names = [n for n in template.target_encoder.state_dict()
                                      if f"encoder.{n}" not in frozen_torch]

    def _initial_state(self, template: Any, policy_arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """The JAX state on the device: the torch template's weights, log_alpha, fresh Adam states, the key."""
        cfg, put = self.cfg, self._put

        def arrays(module: Any) -> dict[str, np.ndarray]:
            return {n: t.detach().cpu().numpy() for n, t in module.state_dict().items()}

        s: dict[str, Any] = {
            "actor": put(self._policy_map.to_jax(policy_arrays, self._groups["actor"])),
            "encoder": put(self._policy_map.to_jax(policy_arrays, self._groups["encoder"])),
            "gripper": put(self._policy_map.to_jax(policy_arrays, self._groups["gripper"])),
            "critic": put(self._critic_map.to_jax(arrays(template.critic))),
            "target_critic": put(self._critic_map.to_jax(arrays(template.target_critic))),
            "target_encoder": put(self._target_encoder_map.to_jax(arrays(template.target_encoder),
                                                                  self._target_encoder_names)),
            "target_gripper": {},
            "log_alpha": put(np.asarray(math.log(cfg.temperature_init), np.float32)),
            "num_updates": put(np.zeros((), np.int32)),
            "key": put(np.asarray(self._jax.random.PRNGKey(cfg.seed + 3), np.uint32)),
        }
        if template.target_gripper is not None and self._gripper_map is not None:
            s["target_gripper"] = put(self._gripper_map.to_jax(arrays(template.target_gripper)))
        for name, params in (("actor", s["actor"]), ("critic", (s["critic"], s["encoder"])),
                             ("temperature", s["log_alpha"]), ("gripper", s["gripper"])):
            s[f"opt_{name}"] = put(adam_init(params))  # committed like the rest: no second compile
        return s

    def _jit_functions(self) -> None:
        """The jitted update (random draws from the state's key, or given) and the policy's mode."""
        jax, st, n_rows = self._jax, self._st, self.cfg.samples_per_update

        def keyed(state: dict[str, Any], frozen: Any, batch: Any) -> tuple[dict[str, Any], dict[str, Any]]:
            key, draws = draws_from_key(state["key"], st, n_rows)
            state = dict(state, key=key)
            return update_core(state, frozen, batch, draws, st)

        def with_draws(state: dict[str, Any], frozen: Any, batch: Any, draws: Any,
                       ) -> tuple[dict[str, Any], dict[str, Any]]:
            return update_core(state, frozen, batch, draws, st)

        def mode_action(state: dict[str, Any], frozen: Any, images: Any, obs_state: Any) -> Any:
            feats = encode(state["encoder"], "encoder/", frozen, images, None, obs_state, st, None)
            arm = jax.numpy.tanh(actor(state["actor"], feats, st)[0])
            if not st.gripper:
                return arm
            grip = jax.numpy.argmax(gripper_q(state["gripper"], feats, st), -1).astype(arm.dtype) - 1.0
            return jax.numpy.concatenate([arm, grip[:, None]], -1)

        self._mode_fn = jax.jit(mode_action)
        self._update_fn = jax.jit(keyed, donate_argnums=(0,))
        self._update_draws_fn = jax.jit(with_draws)

    # ------------------------------------------------------------------ devices and transfers
    def _jax_device(self, name: str) -> Any:
        jax = self._jax
        if name == "auto":
            return jax.devices()[0]
        if name == "cpu":
            return jax.devices("cpu")[0]
        index = int(name.split(":")[1]) if ":" in name else 0
        try:
            gpus = jax.devices("gpu")
        except RuntimeError:
            gpus = []
        if index >= len(gpus):
            raise ConfigError(f"AgentConfig option device={name!r}: JAX sees {len(gpus)} GPU(s) here (install "
                              "a CUDA build of jax, or use device=cpu)")
        return gpus[index]

    def _put(self, tree: Any) -> Any:
        return self._jax.device_put(tree, self.device)

    # ------------------------------------------------------------------ acting / weights
    @property
    def num_updates(self) -> int:
        return int(self._s["num_updates"])

    @num_updates.setter
    def num_updates(self, value: int) -> None:
        self._s["num_updates"] = self._put(np.asarray(value, np.int32))

    @property
    def temperature(self) -> float:
        return float(np.exp(np.asarray(self._s["log_alpha"])))

    def _policy_arrays(self) -> dict[str, np.ndarray]:
        host = self._jax.device_get({g: self._s[g] for g in ("actor", "encoder", "gripper")})
        return {n: a for g in ("actor", "encoder", "gripper") for n, a in self._policy_map.to_torch(host[g]).items()}

    def _sync_policy(self) -> None:
        if not self._policy_dirty:
            return
        sd = self.policy.state_dict()
        with torch.no_grad():
            for n, a in self._policy_arrays().items():
                sd[n].copy_(torch.from_numpy(a))
        self._policy_dirty = False

    def act(self, obs: Any, deterministic: bool = False) -> np.ndarray:
        """Action in [-1, 1] (float32 (A,)): the torch policy with this agent's current weights."""
        self._sync_policy()
        return self.policy.act(obs, deterministic)

    def mode_actions(self, obs: Any) -> np.ndarray:
        """Deterministic actions (B, A) for a batch of observations computed by the JAX networks themselves (the
        mode of the policy, the gripper head's argmax); `act` runs the torch policy instead. For checking that
        the published weights give the torch policy the same actions (tests)."""
        images, state = self.layout.to_numpy(obs, batched=True)
        return np.asarray(self._mode_fn(self._s, self._frozen, images, state))

    def trainable_state(self) -> dict[str, np.ndarray]:
        """The policy's trainable weights under the torch policy's names and layouts (what actors load)."""
        return self._policy_arrays()

    def load_trainable_state(self, arrays: Mapping[str, Any]) -> None:
        """Load `trainable_state()`-style arrays (torch names) into the policy and the JAX parameters."""
        self._sync_policy()
        self.policy.load_trainable_state(arrays)  # validates names, shapes, finiteness first
        for g in ("actor", "encoder", "gripper"):
            self._s[g] = self._put(self._policy_map.to_jax(arrays, self._groups[g]))

    # ------------------------------------------------------------------ batches
    def _batch(self, batch: Mapping[str, Any], any_rows: bool = False) -> dict[str, Any]:
        """learners.agents.sac's batch checks and targets, in numpy: obs -> (images, state), returns, bootstraps.
        any_rows: any number of rows (learners.agents.jax.device_replay's tables), else cfg.samples_per_update."""
        for key in ("obs", "next_obs", "actions", "rewards", "terminated"):
            if key not in batch:
                raise ShapeError(f"batch is missing '{key}' (has {sorted(batch)})")
        images, state = self.layout.to_numpy(batch["obs"], batched=True)
        next_images, next_state = self.layout.to_numpy(batch["next_obs"], batched=True)
        actions = np.asarray(batch["actions"], np.float32)
        n = actions.shape[0]
        if actions.shape != (n, self.policy.action_dim):
            raise ShapeError(f"batch actions: expected (B, {self.policy.action_dim}), got {actions.shape}")
        k = self.cfg.critic_updates_per_actor_update
        if n != self.cfg.samples_per_update and not any_rows:
            raise ShapeError(f"batch of {n} rows: the JAX agent takes exactly cfg.samples_per_update = "
                             f"{self.cfg.samples_per_update} (batch_size x critic_updates_per_actor_update={k})")
        cols: dict[str, np.ndarray] = {}
        for key in ("rewards", "terminated", "grasp_penalty", "intervention"):
            if key not in batch:
                cols[key] = np.zeros(n, np.float32)
                continue
            a = np.asarray(batch[key]).astype(np.float32).reshape(-1)
            if a.shape != (n,):
                raise ShapeError(f"batch '{key}': expected ({n},), got {np.shape(batch[key])}")
            cols[key] = a
        gamma = np.float32(self.cfg.discount)
        if "n_steps" in batch:
            steps = np.asarray(batch["n_steps"]).astype(np.float32).reshape(-1)
            seqs = {}
            for key in ("n_rewards", "n_grasp_penalty"):
                if key not in batch:
                    raise ShapeError(f"batch has 'n_steps' but no '{key}'")
                seqs[key] = np.asarray(batch[key], np.float32)
                if seqs[key].ndim != 2 or seqs[key].shape[0] != n:
                    raise ShapeError(f"batch '{key}': expected ({n}, n_step), got {seqs[key].shape}")
            if steps.shape != (n,) or (steps < 1).any() or (steps > seqs["n_rewards"].shape[1]).any():
                raise ShapeError(f"batch 'n_steps': expected ({n},) values in [1, n_step]")
            powers = gamma ** np.arange(seqs["n_rewards"].shape[1], dtype=np.float32)
            returns = seqs["n_rewards"] @ powers
            gp_returns = seqs["n_grasp_penalty"] @ powers
            bootstrap = (gamma ** steps) * (1.0 - cols["terminated"])
        else:
            returns, gp_returns = cols["rewards"], cols["grasp_penalty"]
            bootstrap = gamma * (1.0 - cols["terminated"])
        for name, a in list(images.items()) + list(next_images.items()):
            if a.shape[0] != n:
                raise ShapeError(f"batch camera '{name}' has {a.shape[0]} rows, actions have {n}")
        for sv in (state, next_state):
            if sv is not None and sv.shape[0] != n:
                raise ShapeError(f"batch state has {sv.shape[0]} rows, actions have {n}")
        return {"images": images, "next_images": next_images, "state": state, "next_state": next_state,
                "actions": actions, "returns": returns.astype(np.float32), "bootstrap": bootstrap.astype(np.float32),
                "gp_returns": gp_returns.astype(np.float32), "intervention": cols["intervention"],
                "target_floor": mc_floor(batch, n, self.cfg.mc_lower_bound)}

    # ------------------------------------------------------------------ update
    def update(self, batch: Mapping[str, Any]) -> dict[str, float]:
        """learners.agents.sac.SACAgent.update, as one jitted call; returns float metrics (critic metrics averaged)."""
        b = self._batch(batch)
        first = self.compile_s is None
        t0 = time.perf_counter()
        self._s, metrics = self._update_fn(self._s, self._frozen, b)
        out = {key: float(v) for key, v in self._jax.device_get(metrics).items()}
        if first:
            self.compile_s = time.perf_counter() - t0
        self._policy_dirty = True
        return out

    def update_with_draws(self, batch: Mapping[str, Any], draws: Mapping[str, Any]) -> dict[str, float]:
        """`update` with the random numbers given (for comparing backends): noise (k, mb, A) float32, members
        (k, M) int32, actor_noise (mb, A) float32, shifts (2 x cameras, n, 2) int32 or None, dropout None or
        keys (k, 2, 2) uint32. The agent's own key is not advanced."""
        b = self._batch(batch)
        given = {"noise": np.asarray(draws["noise"], np.float32), "members": np.asarray(draws["members"], np.int32),
                 "actor_noise": np.asarray(draws["actor_noise"], np.float32),
                 "shifts": None if draws.get("shifts") is None else np.asarray(draws["shifts"], np.int32),
                 "dropout": None if draws.get("dropout") is None else np.asarray(draws["dropout"], np.uint32)}
        self._s, metrics = self._update_draws_fn(self._s, self._frozen, b, given)
        self._policy_dirty = True
        return {key: float(v) for key, v in self._jax.device_get(metrics).items()}

    def run_update(self, fn: Any, *args: Any) -> dict[str, float]:
        """`self._s, metrics = fn(state, frozen, *args)` for a jitted update of another batch source
        (learners.agents.jax.device_replay); float metrics."""
        self._s, metrics = fn(self._s, self._frozen, *args)
        self._policy_dirty = True
        return {key: float(v) for key, v in self._jax.device_get(metrics).items()}

    # ------------------------------------------------------------------ full state (checkpoints)
    def _net_entries(self) -> list[tuple[str, str, ParamMap]]:
        """(state-dict prefix, JAX state group, its name map) for every network."""
        out = [("policy", g, self._policy_map) for g in ("actor", "encoder", "gripper")]
        out += [("critic", "critic", self._critic_map), ("target_critic", "target_critic", self._critic_map),
                ("target_encoder", "target_encoder", self._target_encoder_map)]
        if self._gripper_map is not None:
            out.append(("target_gripper", "target_gripper", self._gripper_map))
        return out

    def _opt_groups(self) -> dict[str, list[tuple[str, str, ParamMap | None]]]:
        """optimizer -> its parameter groups (state-dict prefix, JAX group, map); None map = log_alpha."""
        pm = self._policy_map
        out: dict[str, list[tuple[str, str, ParamMap | None]]] = {
            "actor": [("policy", "actor", pm)],
            "critic": [("critic", "critic", self._critic_map), ("policy", "encoder", pm)],
            "temperature": [("log_alpha", "log_alpha", None)]}
        if self.cfg.gripper_head:
            out["gripper"] = [("policy", "gripper", pm)]
        return out

    def state_dict(self) -> dict[str, np.ndarray]:
        """Networks and targets under the torch agent's names and layouts (`policy/...`, `critic/...`,
        `target_*/...`, `log_alpha`), Adam moments as `optim/<optimizer>/<name>/{step,exp_avg,exp_avg_sq}`,
        `num_updates`, the JAX key (`rng/jax_key`) and the acting policy's torch generator (`rng/policy`).
        Frozen backbone weights are left out (they come from cfg.encoder_weights)."""
        host = self._jax.device_get(self._s)
        out: dict[str, np.ndarray] = {}
        for prefix, group, pmap in self._net_entries():
            for n, a in pmap.to_torch(host[group]).items():
                out[f"{prefix}/{n}"] = a
        out["log_alpha"] = np.asarray(host["log_alpha"], np.float32).copy()
        for oname, groups in self._opt_groups().items():
            opt = host[f"opt_{oname}"]
            moments = {"exp_avg": opt["m"], "exp_avg_sq": opt["v"]}
            for field, tree in moments.items():
                parts = tree if isinstance(tree, tuple) else (tree,)
                for (prefix, _, omap), part in zip(groups, parts, strict=True):
                    if omap is None:
                        out[f"optim/{oname}/{prefix}/{field}"] = np.asarray(part, np.float32).copy()
                        continue
                    for n, a in omap.to_torch(part).items():
                        out[f"optim/{oname}/{prefix}/{n}/{field}"] = a
            out[f"optim/{oname}/step"] = np.asarray(opt["step"], np.float32).copy()
        out["num_updates"] = np.array(int(host["num_updates"]), dtype=np.int64)
        out["rng/jax_key"] = np.asarray(host["key"], np.uint32).copy()
        out["rng/policy"] = self.policy.generator().get_state().numpy().copy()
        return out

    def load_state_dict(self, arrays: Mapping[str, Any]) -> None:
        """Restore `state_dict()` output; ShapeError (before anything changes) on unknown/missing names or shapes."""
        own = self.state_dict()
        missing, unexpected = sorted(set(own) - set(arrays)), sorted(set(arrays) - set(own))
        if missing or unexpected:
            hint = (" (a checkpoint of the torch backend? resume it with backend=torch)"
                    if any(k.startswith("rng/agent") for k in unexpected) else "")
            raise ShapeError(f"agent state does not match the JAX agent: missing {missing[:5]}, unexpected "
                             f"{unexpected[:5]}{hint}")
        bad = [k for k in own if k != "rng/policy" and tuple(np.shape(arrays[k])) != own[k].shape]
        if bad:
            raise ShapeError(f"agent state has wrong shapes: {bad[:5]}")
        s = dict(self._s)
        for prefix, group, pmap in self._net_entries():
            names = [e.torch_name for e in pmap.entries if f"{prefix}/{e.torch_name}" in own
                     and e.path in self._s[group]]
            s[group] = self._put(pmap.to_jax({n: arrays[f"{prefix}/{n}"] for n in names}, names))
        s["log_alpha"] = self._put(np.asarray(arrays["log_alpha"], np.float32))
        for oname, groups in self._opt_groups().items():
            fields: dict[str, list[Any]] = {"exp_avg": [], "exp_avg_sq": []}
            for field in fields:
                for prefix, group, omap in groups:
                    if omap is None:
                        fields[field].append(self._put(np.asarray(arrays[f"optim/{oname}/{prefix}/{field}"],
                                                                  np.float32)))
                        continue
                    names = [omap.by_path[p].torch_name for p in self._s[group]]
                    fields[field].append(self._put(omap.to_jax(
                        {n: arrays[f"optim/{oname}/{prefix}/{n}/{field}"] for n in names}, names)))
            m = fields["exp_avg"][0] if len(groups) == 1 else tuple(fields["exp_avg"])
            v = fields["exp_avg_sq"][0] if len(groups) == 1 else tuple(fields["exp_avg_sq"])
            s[f"opt_{oname}"] = {"step": self._put(np.asarray(arrays[f"optim/{oname}/step"], np.float32)),
                                 "m": m, "v": v}
        s["num_updates"] = self._put(np.asarray(int(np.asarray(arrays["num_updates"])), np.int32))
        s["key"] = self._put(np.asarray(arrays["rng/jax_key"], np.uint32))
        self._s = s
        self._policy_dirty = True
        self._sync_policy()
        self.policy.generator().set_state(torch.as_tensor(np.asarray(arrays["rng/policy"]), dtype=torch.uint8))


__all__ = ["SUPPORTED_OPTIONS", "JaxSACAgent", "check_supported", "import_jax"]
