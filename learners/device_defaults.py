"""Defaults by device: what the state RLPD agent trains with when it runs on a CPU, and the notice that says so.

SERL's state RLPD (learners.config.rlpd_state_config: critic ensemble 10 with a random subset of 2 for the target,
8 critic updates per actor update, batch 256) costs ~80 ensemble-member updates per env step; on the shared 2-core
CPU `robot-rl train` with it ran at ~4 env steps/s (issue 17), below one 10 Hz actor. On a CPU `robot-rl train`
therefore starts the state agent from `CPU_STATE_DEFAULTS` (ensemble 2 x 4 critic updates: a tenth of the critic
work per env step) and prints `notice()` once. NOT YET MEASURED: whether these values learn standard gymnasium
control tasks within 8,000 env steps and hold a 10 Hz actor has no benchmark result file yet (README: "Learner
speed on a CPU" gives the commands); `robot-rl learner` does not apply them (it has its own machine defaults).
They sit right above the algorithm's defaults: a task recipe, an explicit flag or `--set FIELD=VALUE` overrides
any of them (`--set ensemble_size=10 --set ensemble_subsample=2 --set critic_updates_per_actor_update=8` gives
SERL's state agent back on a CPU).

Nothing here applies to image observations (DrQ: one critic update per actor update already, and the encoder, not
the ensemble, is the cost) or to other agent presets (hil-serl, sac), and nothing applies on a GPU.

Usage::

    layer = machine_defaults("cpu", has_cameras=False, agent="rlpd")   # {"ensemble_size": 2, ...} or {}
    cfg = resolve_agent_config(rlpd_state_config, layer, recipe, flags, set_fields)
    msg = notice(cfg, layer)                                            # one line, or None
"""

from __future__ import annotations

from typing import Any

import torch

from learners.config import AgentConfig

CPU_STATE_DEFAULTS: dict[str, Any] = {
    "ensemble_size": 2, "ensemble_subsample": None, "critic_updates_per_actor_update": 4,
}
"""The state RLPD agent on a CPU: two LayerNorm critics (min of both, as SAC / HIL-SERL), 4 critic updates per
actor update (SERL on a GPU: ensemble 10 / subset 2, 8 critic updates per actor update); batch 256 as SERL."""


def resolved_device_type(device: str) -> str:
    """'cpu', 'cuda', 'mps' for a device name ('auto': cuda when available, else cpu)."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device).type


def machine_defaults(device: str, has_cameras: bool, agent: str = "rlpd") -> dict[str, Any]:
    """The AgentConfig overrides for this device (a layer right above the algorithm's defaults): the CPU state
    defaults for the rlpd agent on a CPU without cameras, else none."""
    if agent != "rlpd" or has_cameras or resolved_device_type(device) != "cpu":
        return {}
    return dict(CPU_STATE_DEFAULTS)


def notice(cfg: AgentConfig, layer: dict[str, Any]) -> str | None:
    """One line saying which CPU defaults the resolved `cfg` still uses (None when none is left: a recipe, a flag
    or --set replaced them all, or no layer applied)."""
    kept = {k: v for k, v in layer.items() if getattr(cfg, k) == v}
    if not kept:
        return None
    serl = AgentConfig(discount=0.99, critic_updates_per_actor_update=8)
    parts = ", ".join(f"{k}={'none' if v is None else v} (GPU/SERL: "
                      f"{'none' if getattr(serl, k) is None else getattr(serl, k)})" for k, v in kept.items())
    return (f"CPU learner: the state agent uses the CPU defaults {parts} so the learner keeps up with a 10 Hz actor "
            "on one core; --set FIELD=VALUE overrides any of them")
