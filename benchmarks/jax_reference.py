"""The independent JAX implementation of the state RLPD update (../shared/reference/bench_jax.py), run as a yardstick.

`benchmarks/learner_speed.py --jax-python PY` interleaves timing rounds of our torch update with runs of the JAX
reference on the same machine (each run: a fresh process that builds, jit-compiles and times the update; its
JSON line is parsed here), so the two figures see the same load and their ratio is meaningful on a shared machine.

The reference is not project code and needs its own virtual environment (jax, flax, optax; see
../shared/reference/README.md)::

    python3 -m venv .venv-jaxref && .venv-jaxref/bin/pip install jax==0.10.2 jaxlib==0.10.2 flax==0.12.8 optax==0.2.8
    python benchmarks/learner_speed.py --device cpu --threads 2 --state-utd 20 --skip-image --jax-python \
        .venv-jaxref/bin/python --rounds 3

The same update in torch (`reference_state_config`): observation 30, action 7, critic ensemble 10 x MLP 256x256 +
LayerNorm + ReLU, target min over a random subset of 2, backup entropy on, tanh-Gaussian actor, batch 256, Adam 3e-4,
tau 0.005, UTD critic updates then one actor + temperature update on the last minibatch.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from learners.config import AgentConfig, rlpd_state_config
from robot_rl.specs import ArraySpec, EnvSpec

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_OBS_DIM, REFERENCE_ACT_DIM = 30, 7


def default_script() -> Path:
    """bench_jax.py in the shared reference folder beside the checkout (../shared/reference), if it is there."""
    for base in (ROOT.parent / "shared" / "reference", ROOT.parent.parent / "shared" / "reference"):
        if (base / "bench_jax.py").is_file():
            return base / "bench_jax.py"
    return ROOT.parent / "shared" / "reference" / "bench_jax.py"


def default_python() -> Path | None:
    """The reference venv's interpreter in the checkout (.venv-jaxref), when it exists."""
    py = ROOT / ".venv-jaxref" / "bin" / "python"
    return py if py.is_file() else None


def reference_spec() -> EnvSpec:
    """The reference's shapes: a 30-D state observation, a 7-D action in [-1, 1]."""
    return EnvSpec("jax-reference", (ArraySpec("state", (REFERENCE_OBS_DIM,), "float32"),),
                   ArraySpec("action", (REFERENCE_ACT_DIM,), "float32", -1.0, 1.0), 10.0)


def reference_state_config(utd: int, **overrides: Any) -> AgentConfig:
    """Our agent configured as the reference's update (ReLU, backup entropy, discount 0.99, ensemble 10 / 2)."""
    base: dict[str, Any] = dict(critic_updates_per_actor_update=utd, activation="relu", backup_entropy=True,
                                discount=0.99, ensemble_size=10, ensemble_subsample=2, batch_size=256)
    base.update(overrides)
    return rlpd_state_config(**base)


def run_reference(python: str | Path, utd: int, script: str | Path | None = None, timeout_s: float = 600.0,
                  ) -> dict[str, Any]:
    """One run of the JAX reference's state update (jit mode, no inference timing): its JSON result, with
    `critic_updates_per_s_median`. RuntimeError (one line) when it fails or prints no JSON."""
    script = Path(script) if script is not None else default_script()
    if not script.is_file():
        raise RuntimeError(f"JAX reference script not found: {script}")
    cmd = [str(python), str(script), "--task", "state", "--mode", "jit", "--no-infer", "--utd", str(utd)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise RuntimeError(f"JAX reference did not run: {err}") from None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            out: dict[str, Any] = json.loads(line)
            return out
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    raise RuntimeError(f"JAX reference failed (exit {proc.returncode}): {tail}")


class LoadMeter:
    """Cores busy with OTHER processes while a section runs (from /proc/stat minus this process's CPU time), so a
    result says how loaded the shared machine was; None where /proc/stat is not readable.

        with LoadMeter() as load:
            ...
        load.others_cores      # e.g. 1.4 on a 2-core machine where others keep 1.4 cores busy
    """

    others_cores: float | None = None

    @staticmethod
    def _busy_s() -> float | None:
        try:
            with open("/proc/stat") as f:
                v = [int(x) for x in f.readline().split()[1:9]]
        except (OSError, ValueError):
            return None
        return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")

    def __enter__(self) -> LoadMeter:
        self._t0, self._b0, self._o0 = time.perf_counter(), self._busy_s(), sum(os.times()[:2])
        return self

    def __exit__(self, *exc: object) -> None:
        b1 = self._busy_s()
        if b1 is None or self._b0 is None:
            return
        wall = max(time.perf_counter() - self._t0, 1e-9)
        own = sum(os.times()[:2]) - self._o0
        self.others_cores = max(0.0, (b1 - self._b0 - own) / wall)
