"""Warm start from another run's agent, without its data (WSRL: Zhou et al. 2024, "Efficient Online Reinforcement
Learning Fine-Tuning Need Not Retain Offline Data"): `robot-rl train --init-from SOURCE --warmup-steps W`.

`init_agent_from(agent, spec, source)` loads into a freshly built agent what the SOURCE checkpoint's agent learned:
the actor, the critic ensemble, the target networks, the temperature (log_alpha) and the Adam moments (and step
counts) of the actor, critic and temperature optimizers. It does NOT load the source's replay buffers, its
update counter (this run counts its own updates from 0) or its RNG states (this run's --seed draws its own noise).

SOURCE is what `robot-rl eval --checkpoint` accepts: a `robot-rl train` run directory (e.g. one written by
`--offline-updates N --max-env-steps 0`), a `robot-rl learner` / `sim` run directory, its checkpoints/ or one
ckpt_* directory. Refused with one line each: a path without a checkpoint, an unreadable or corrupt checkpoint, a
`train-bc` checkpoint (a policy without a critic), a checkpoint of another env (task, observation or action spec),
and one whose agent differs from this run's in a field that decides what the weights are or mean
(`ARCHITECTURE_FIELDS`: network sizes, encoder, state selection and scale, backend, ...). Differences in training
settings (discount, n_step, learning rates, bc_weight, ...) are allowed, and listed by `init_agent_from`.

Usage::

    agent = make_agent(spec, cfg)
    notes = init_agent_from(agent, spec, "runs/pick_offline")   # -> (checkpoint path, [difference notes])
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from learners.agents.agent import LearnerAgent
from learners.agents.config import AgentConfig
from robot_rl.checkpoint import CheckpointError, find_checkpoint, load_checkpoint
from robot_rl.errors import ConfigError, ShapeError
from robot_rl.specs import EnvSpec

FLAG = "--init-from"

ARCHITECTURE_FIELDS = (
    "backend", "state_select", "state_scale", "obs_norm", "hidden_dims", "layer_norm", "activation", "ensemble_size",
    "std_min", "std_max", "residual_base", "residual_scale", "encoder", "encoder_weights", "freeze_encoder",
    "encoder_features", "conv_channels", "num_spatial_features", "image_latent_dim", "proprio_latent_dim",
    "gripper_head", "gripper_hidden_dims", "critic_loss", "hl_gauss_bins",
)
"""AgentConfig fields that must be equal in the source and this run: they decide the networks' shapes, their
inputs (state selection, scaling, normalisation) or the meaning of their outputs (residual base and scale, std
bounds, the HL-Gauss critic's value support: `compare_agent_configs` also compares `hl_gauss_support`), or the
layout of the saved state (backend)."""

SETTINGS_NOTED = ("discount", "n_step", "bc_weight", "bc_q_filter", "bc_q_filter_gripper", "bc_q_filter_arm",
                  "bc_q_filter_start", "bc_q_filter_floor", "mc_lower_bound", "critic_updates_per_actor_update",
                  "batch_size", "actor_lr", "critic_lr", "temperature_lr", "tau", "target_entropy",
                  "target_entropy_per_dim", "learn_temperature", "backup_entropy", "ensemble_subsample",
                  "grad_clip_norm", "hl_gauss_sigma_ratio")
"""Training settings that may differ (listed in the log when they do)."""

OWN_STATE_KEYS = ("num_updates",)
"""Agent state entries this run keeps as its own (with every `rng/...` entry): counters and random streams."""


def _spec_of(ckpt: Path, meta: Mapping[str, Any]) -> EnvSpec | None:
    """The env spec a checkpoint was trained on: meta['spec'] (learner runs, and train runs since the warm start
    was added), else the online replay buffer's saved spec (older train runs; read without loading the buffer)."""
    if isinstance(meta.get("spec"), dict):
        return EnvSpec.from_dict(meta["spec"])
    f = ckpt / "replay_online.npz"
    if not f.is_file():
        return None
    try:
        with np.load(f, allow_pickle=False) as z:
            replay_meta = json.loads(str(z["meta_json"]))
        return EnvSpec.from_dict(replay_meta["spec"])
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile, EOFError) as err:
        raise CheckpointError(f"{f}: unreadable checkpoint group ({err})") from err


def _show(value: Any) -> str:
    return str(tuple(value)) if isinstance(value, list | tuple) else repr(value)


def compare_agent_configs(source: AgentConfig, mine: AgentConfig) -> tuple[list[str], list[str]]:
    """(architecture differences, training-setting differences) as 'field source -> this run' strings."""
    def differ(fields: tuple[str, ...]) -> list[str]:
        out = []
        for f in fields:
            a, b = getattr(source, f), getattr(mine, f)
            if a != b:
                out.append(f"{f} {_show(a)} -> {_show(b)}")
        return out

    arch = differ(ARCHITECTURE_FIELDS)
    if source.critic_loss == mine.critic_loss == "hl_gauss" and source.hl_gauss_support != mine.hl_gauss_support:
        arch.append(f"hl_gauss_support {_show(source.hl_gauss_support)} -> {_show(mine.hl_gauss_support)} "
                    "(hl_gauss_range, or the discount it is derived from)")
    return arch, differ(SETTINGS_NOTED)


def read_source(source: str | Path) -> tuple[Path, dict[str, np.ndarray], dict[str, Any]]:
    """(checkpoint path, its agent state, its meta) for an --init-from SOURCE, reading no replay buffer;
    CheckpointError / ConfigError (one line, naming the flag and the path) otherwise."""
    try:
        ckpt = find_checkpoint(source)
        groups, meta = load_checkpoint(ckpt, only=("agent",))
    except CheckpointError as err:
        raise CheckpointError(f"{FLAG} {err}") from None
    if "agent" not in groups:
        if "policy" in meta.get("groups", []):
            raise ConfigError(f"{FLAG} {source}: {ckpt} is a robot-rl train-bc checkpoint (a policy without a critic); "
                              "warm-start from an agent checkpoint (robot-rl train --offline-updates N, or any train / "
                              "learner run), or use the BC policy as a residual base (--set residual_base=...)")
        raise CheckpointError(f"{FLAG} {source}: {ckpt} has no 'agent' group (groups: {meta.get('groups')})")
    return ckpt, groups["agent"], meta


def source_learned_from_demos(source: str | Path) -> bool:
    """Whether the `robot-rl train` run that wrote the checkpoint `source` names learned from demos (its --demos,
    or its own warm start's source did); False for a learner run or an unreadable source (init_agent_from then
    reports what is wrong)."""
    try:
        _, meta = load_checkpoint(find_checkpoint(source), only=())  # the meta alone: init_agent_from reads the agent
    except CheckpointError:
        return False
    config = meta.get("config")
    return isinstance(config, dict) and bool(config.get("demos") or config.get("source_demos"))


def source_encoder_weights(source: str | Path) -> str | None:
    """The camera encoder weights file the run that wrote the checkpoint `source` names trained with (its agent
    config's encoder_weights, e.g. the encoder it pretrained on its demos), so a warm start builds the same encoder;
    None without one or for an unreadable source (init_agent_from then reports what is wrong)."""
    try:
        _, meta = load_checkpoint(find_checkpoint(source), only=())
    except CheckpointError:
        return None
    cfg = meta.get("agent_config")
    weights = cfg.get("encoder_weights") if isinstance(cfg, dict) else None
    return weights if isinstance(weights, str) else None


def init_agent_from(agent: LearnerAgent, spec: EnvSpec, source: str | Path) -> tuple[Path, list[str]]:
    """Load the agent state of the checkpoint `source` names into `agent` (networks, targets, temperature, Adam
    moments; not the update counter or RNG states); returns (the checkpoint, notes on training settings that
    differ). Nothing in `agent` changes when it raises."""
    ckpt, arrays, meta = read_source(source)
    try:
        src_spec = _spec_of(ckpt, meta)
    except CheckpointError as err:
        raise CheckpointError(f"{FLAG} {err}") from None
    if src_spec is not None:
        diff = spec.diff(src_spec)
        if diff:
            raise ConfigError(f"{FLAG} {source}: the checkpoint was trained on another env (differs in {diff}: "
                              f"task {src_spec.task!r} vs {spec.task!r}); warm-start from a run of the same task, "
                              "observation mode and image size")
    notes: list[str] = []
    if isinstance(meta.get("agent_config"), dict):
        try:
            src_cfg = AgentConfig.from_dict(meta["agent_config"])
        except ConfigError as err:
            raise CheckpointError(f"{FLAG} {source}: {ckpt}/meta.json has an unreadable agent_config ({err})") from None
        arch, notes = compare_agent_configs(src_cfg, agent.cfg)
        if arch:
            raise ConfigError(f"{FLAG} {source}: the checkpoint's agent differs from this run's in {'; '.join(arch)} "
                              "(source -> this run); pass the same settings (its agent_config.json, e.g. with --set)")
    own = agent.state_dict()
    merged = {k: v for k, v in arrays.items() if not k.startswith("rng/") and k not in OWN_STATE_KEYS}
    merged.update({k: v for k, v in own.items() if k.startswith("rng/") or k in OWN_STATE_KEYS})
    try:
        agent.load_state_dict(merged)
    except ShapeError as err:
        raise ConfigError(f"{FLAG} {source}: the checkpoint's agent does not fit this run's ({err})") from None
    return ckpt, notes


__all__ = ["ARCHITECTURE_FIELDS", "compare_agent_configs", "init_agent_from", "read_source", "source_encoder_weights"]
