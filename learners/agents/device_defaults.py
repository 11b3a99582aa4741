"""Defaults by device: what the state RLPD agent trains with when it runs on a CPU, and the notice that says so.

SERL's state RLPD (learners.agents.config.rlpd_state_config: critic ensemble 10 with a random subset of 2 for the
target, 8 critic updates per actor update, batch 256) costs ~80 ensemble-member updates per env step; on the shared
2-core CPU `robot-rl train` with it ran at ~4 env steps/s, below one 10 Hz actor. On a CPU `robot-rl train` and
`robot-rl learner` (one resolver: learners.agents.options) therefore start the state agent from `CPU_STATE_DEFAULTS`
(ensemble 2 x 4 critic updates: a tenth of the critic work per env step) and print `notice()` once (measured:
benchmarks/gym_defaults.py, docs/training.md "Any gymnasium env as it comes").

torch.compile is on by default for the torch state agent (rlpd preset, no cameras) on a CPU, where it works:
`compile_usable()` needs dynamo support for this Python and a C++ compiler for inductor's CPU code, and
`ROBOT_RL_COMPILE=0` in the environment turns the default off (the test suite does; `--set compile=false` does it
per run). Measured against the independent JAX update (benchmarks/learner_speed.py, README): eager 0.82-0.87x,
compiled 1.11-1.17x (two runs). The first update then takes ~20-70 s (tracing + inductor compilation, cached on disk
for the next run), and a compile that fails on its first update falls back to eager with a warning
(learners.agents.sac.SACAgent.compile_status).
Not on a GPU (measured on an H100: 1.08x state, 1.04x image, not worth the compile; there the torch state update
is captured as a CUDA graph instead, learners.agents.graphs), not with cameras on a CPU (not measured), not with
backend=jax (JAX compiles anyway: `settle` drops it).

These values sit right above the algorithm's defaults: a task recipe, an explicit flag or `--set FIELD=VALUE`
overrides any of them (`--set ensemble_size=10 --set ensemble_subsample=2 --set critic_updates_per_actor_update=8`
gives SERL's state agent back on a CPU).

The state defaults do not apply to image observations (DrQ: one critic update per actor update already, and the
encoder, not the ensemble, is the cost) or to other agent presets (hil-serl, sac). With cameras, on a CPU with native
bf16, a run that gets the task's pixel defaults starts from `CPU_PIXEL_DEFAULTS` instead (the lean pixel learner:
a 64-wide head, bf16 backbone and updates), and `notice()` says so. On a GPU the choices are AgentConfig's own
defaults (`GPU_CHOICES`: torch backend, CUDA graphs for state agents, float32), and `gpu_notice` prints the ones in
effect when a learner starts.

Usage::

    layer = machine_defaults("cpu", has_cameras=False, agent="rlpd")   # {"ensemble_size": 2, ..., "compile": True}
    lean = cpu_pixel_defaults("cpu", agent="rlpd")   # {"image_latent_dim": 64, ...} on a CPU with native bf16, else {}
    cfg = resolve_agent_config(rlpd_state_config, layer, recipe, flags, set_fields)
    cfg = settle(cfg, layer, explicit=(recipe, flags, set_fields))      # no compile default with backend=jax
    msg = notice(cfg, layer)                                            # one line, or None
    gpu = gpu_notice(cfg, has_cameras=False)                            # CUDA: the GPU settings in effect
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

import torch

from learners.agents.config import AgentConfig
from learners.agents.graphs import graphs_wanted
from learners.agents.precision import cpu_has_native_bf16, precision_note

CPU_STATE_DEFAULTS: dict[str, Any] = {
    "ensemble_size": 2, "ensemble_subsample": None, "critic_updates_per_actor_update": 4,
}
"""The state RLPD agent on a CPU: two LayerNorm critics (min of both, as SAC / HIL-SERL), 4 critic updates per
actor update (SERL on a GPU: ensemble 10 / subset 2, 8 critic updates per actor update); batch 256 as SERL."""


GPU_CHOICES: dict[str, Any] = {"backend": "torch", "cuda_graphs": "auto", "mixed_precision": "off",
                               "matmul_precision": "high", "backbone_precision": "float32", "channels_last": False,
                               "feature_cache": "auto", "feature_cache_device": "auto"}
"""What an agent on a CUDA device trains with unless told otherwise (all AgentConfig defaults, so no layer is
needed): the torch backend with its update captured as a CUDA graph (cuda_graphs=auto, state and cameras), TF32
matmuls and convolutions (matmul_precision=high), no bf16 autocast (slower on an H100: 0.82x state, 0.87x image;
a bf16 backbone 0.90x on an H200), the frozen backbone in float32 and the feature cache on where it fits, on the
GPU (on an H200 with two 128x128 cameras at batch 256: eager 34 critic updates/s, feature cache 101, + graphs 393,
+ TF32 529). The JAX backend with device replay was faster still for state (0.60x the bare reference against
0.21-0.25x for torch graphs) but is an optional extra, so torch stays the default.
benchmarks/gpu_session.sh measures every alternative (graphs vs eager, the JAX backend with
host or device replay, bf16 / channels-last backbones, the feature cache): change a value here, and AgentConfig's
default, when its figures say so. `gpu_notice` prints the choices in effect at start."""


CPU_PIXEL_DEFAULTS: dict[str, Any] = {"image_latent_dim": 64, "backbone_precision": "bf16", "mixed_precision": "bf16"}
"""The lean pixel learner, what the rlpd agent with cameras trains with on a CPU with native bf16 (AVX512-BF16 or AMX:
`cpu_has_native_bf16`) when the task's pixel defaults apply (a robot-rl arm task with demos, torch backend:
learners.agents.options `pixel_defaults_apply`): a 64-wide head on each camera's features (256 elsewhere), the frozen
backbone in bf16 and the update's forward passes under bf16 autocast (losses, targets, weights and Adam state stay
float32). Measured on this project's 2-core CPU (benchmarks/feature_cache.py, `feature_cache_lean_idle.json`): 2.0x
the float32 state learner's CPU per env step against 3.4x for the float32 pixel defaults; on the twin it learned as
those did (pick-cube and peg-insert from two 64x64 cameras, 3 seeds each: docs/benchmarks.md "From pixels"). Without
native bf16 torch emulates it, slower than float32, so there (and on a GPU: `GPU_CHOICES`) nothing changes.
`--set image_latent_dim=256 --set backbone_precision=float32 --set mixed_precision=off` gives the float32 pixel
defaults back."""


def resolved_device_type(device: str) -> str:
    """'cpu', 'cuda', 'mps' for a device name ('auto': cuda when available, else cpu)."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device).type


COMPILE_ENV = "ROBOT_RL_COMPILE"
"""Environment variable: '0' turns the compile default off (tests, a machine where inductor misbehaves)."""


@cache
def _compile_check() -> str | None:
    """None when torch.compile can build CPU code here, else why not (one line). Cached: asked once per process."""
    try:
        import torch._dynamo

        if not torch._dynamo.is_dynamo_supported():
            return "torch.compile does not support this Python"
        from torch._inductor import cpp_builder

        cxx = cpp_builder.get_cpp_compiler()
    except Exception as err:
        return f"torch.compile unavailable ({type(err).__name__}: {err})"
    if not shutil.which(cxx):
        return f"no C++ compiler ({cxx}) for torch.compile's CPU code"
    return None


def compile_usable() -> str | None:
    """None when the compile default applies on this machine, else the reason it does not (one line)."""
    if os.environ.get(COMPILE_ENV, "").strip() == "0":
        return f"{COMPILE_ENV}=0"
    return _compile_check()


def machine_defaults(device: str, has_cameras: bool, agent: str = "rlpd") -> dict[str, Any]:
    """The AgentConfig overrides for this device (a layer right above the algorithm's defaults): the CPU state
    defaults for the rlpd agent on a CPU without cameras, with compile=True where `compile_usable()`; else none."""
    if agent != "rlpd" or has_cameras or resolved_device_type(device) != "cpu":
        return {}
    return {**CPU_STATE_DEFAULTS, **compile_default(device, has_cameras, agent)}


def cpu_pixel_defaults(device: str, agent: str = "rlpd") -> dict[str, Any]:
    """`CPU_PIXEL_DEFAULTS` for the rlpd agent on a CPU with native bf16, else {}. The caller decides whether the
    run gets the task's pixel defaults at all (learners.agents.options `machine_layer`)."""
    if agent != "rlpd" or resolved_device_type(device) != "cpu" or not cpu_has_native_bf16():
        return {}
    return dict(CPU_PIXEL_DEFAULTS)


def compile_default(device: str, has_cameras: bool, agent: str = "rlpd") -> dict[str, Any]:
    """{'compile': True} for the torch state agent (rlpd preset, no cameras) on a CPU where torch.compile works,
    else {} (`robot-rl learner` adds this to its own machine layer)."""
    if agent != "rlpd" or has_cameras or resolved_device_type(device) != "cpu" or compile_usable() is not None:
        return {}
    return {"compile": True}


def settle(cfg: AgentConfig, layer: Mapping[str, Any], explicit: Iterable[Mapping[str, Any]]) -> AgentConfig:
    """`cfg` without the layer's compile default where it does not apply: another backend than torch (JAX refuses
    compile=True; it compiles anyway). An explicit compile (recipe, flag or --set) is left for the agent to judge."""
    if layer.get("compile") and cfg.compile and cfg.backend != "torch" and not any("compile" in e for e in explicit):
        return cfg.replace(compile=False)
    return cfg


_COMPILE_COST = "first update ~20-70 s while it compiles; --set compile=false turns it off"


def notice(cfg: AgentConfig, layer: dict[str, Any]) -> str | None:
    """One line saying which CPU defaults the resolved `cfg` still uses (None when none is left: a recipe, a flag
    or --set replaced them all, or no layer applied)."""
    if resolved_device_type(cfg.device) != "cpu":
        return None
    kept = {k: v for k, v in layer.items() if getattr(cfg, k) == v and k != "compile"}
    compiled = bool(layer.get("compile")) and cfg.compile
    serl = AgentConfig(discount=0.99, critic_updates_per_actor_update=8)
    lean = {k: v for k, v in kept.items() if k in CPU_PIXEL_DEFAULTS}
    if lean:
        parts = ", ".join(f"{k}={v} (GPU/SERL: {getattr(serl, k)})" for k, v in lean.items())
        return (f"CPU learner with cameras: this CPU has native bf16, so the pixel agent uses the lean CPU defaults "
                f"{parts}, about 2x the state learner's CPU per env step instead of 3.4x; --set FIELD=VALUE "
                f"overrides any of them")
    if not kept:
        return f"CPU learner: torch.compile on for the agent's losses ({_COMPILE_COST})" if compiled else None
    parts = ", ".join(f"{k}={'none' if v is None else v} (GPU/SERL: "
                      f"{'none' if getattr(serl, k) is None else getattr(serl, k)})" for k, v in kept.items())
    comp = f", and torch.compile on for its losses ({_COMPILE_COST})" if compiled else ""
    return (f"CPU learner: the state agent uses the CPU defaults {parts} so the learner keeps up with a 10 Hz actor "
            f"on one core{comp}; --set FIELD=VALUE overrides any of them")


def gpu_notice(cfg: AgentConfig, has_cameras: bool) -> str | None:
    """One line for an agent on a CUDA device (None elsewhere), printed when `robot-rl train` / `robot-rl learner`
    start: the GPU speed settings in effect (backend; for torch the CUDA-graph capture of the update, mixed
    precision, the float32 matmul precision (TF32 or not: learners.agents.precision), batch prefetch and, with
    cameras, the frozen backbone's precision and layout and the feature cache and where it lives) and that
    `--set FIELD=VALUE` or `--backend` changes any of them. The GPU choices are AgentConfig's defaults
    (`GPU_CHOICES`); nothing changes by itself."""
    if resolved_device_type(cfg.device) != "cuda":
        return None
    if cfg.backend != "torch":
        return (f"GPU learner: backend {cfg.backend} (the whole update is one compiled XLA program); --backend torch "
                f"runs the torch update as one CUDA graph instead")
    graphs = "on" if graphs_wanted(cfg) else "off"
    prefetch = "on" if cfg.prefetch is not False and cfg.residual_base is None else "off"
    parts = [f"CUDA graphs {graphs} (cuda_graphs={cfg.cuda_graphs})", f"mixed_precision={cfg.mixed_precision}",
             precision_note(cfg), f"prefetch {prefetch}"]
    if has_cameras:
        parts += [f"backbone_precision={cfg.backbone_precision}", f"channels_last={str(cfg.channels_last).lower()}",
                  f"feature_cache={cfg.feature_cache} (on {cfg.feature_cache_device})"]
    return f"GPU learner (torch): {', '.join(parts)}; --set FIELD=VALUE or --backend jax changes any of them"
