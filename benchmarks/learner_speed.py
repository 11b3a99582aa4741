"""Learner update speed next to the machine's measured matmul throughput.

Two workloads, both on synthetic batches (numpy in, so the host->device copy is included, replay sampling is not):
- state RLPD: ensemble 10, subset 2, batch 256, MLP 256x256 + LayerNorm, obs 19, act 7,
  `--state-utd` critic updates per actor update (default 8, SERL state SAC; the RLPD paper uses 20);
- image DrQ/RLPD: 2 cameras 128x128x3 + 19-D proprio, frozen ResNet-10 (random weights written to a local
  safetensors file) + trainable spatial-embedding heads, `--image-utd` (default 4, SERL), batch `--image-batch`
  (default 256 on CUDA, 32 on CPU where one 256-row critic update takes seconds).

For each: update() calls/s, critic updates/s, and achieved GFLOP/s (FLOPs of one update() counted with
torch.utils.flop_counter: matmuls and convolutions, forward + backward) as a fraction of the torch matmul
GFLOP/s measured in the same run on the same device. Prints a table; writes JSON to benchmarks/results/.

Beside the JAX reference (`--jax-python PY`, benchmarks/jax_reference.py): the state cases are timed in `--rounds`
rounds, each followed by one run of the independent JAX implementation of the same update on the same machine, and
each state row gets the ratio of its median critic updates/s to the reference's median (plus the reference update
configured in torch: obs 30, ReLU, backup entropy). `--compile` adds torch.compile'd rows beside the eager ones.

    python benchmarks/learner_speed.py                       # device auto (cuda when available)
    python benchmarks/learner_speed.py --device cpu --threads 1 --image-batch 16
    python benchmarks/learner_speed.py --device cpu --threads 2 --state-utd 20 --skip-image --compile \
        --jax-python .venv-jaxref/bin/python --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

import jax_reference  # noqa: E402  (benchmarks/jax_reference.py, beside this script)

from learners.config import AgentConfig, drq_config, rlpd_state_config  # noqa: E402
from learners.encoders import ResNet10, save_backbone_weights  # noqa: E402
from learners.policy import resolve_device  # noqa: E402
from learners.sac import SACAgent  # noqa: E402
from robot_rl.specs import ArraySpec, EnvSpec  # noqa: E402


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_gflops(device: torch.device, n: int, seconds: float) -> float:
    """Sustained float32 matmul throughput (n x n @ n x n) in GFLOP/s."""
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    for _ in range(3):
        a @ b
    _sync(device)
    reps, t0 = 0, time.perf_counter()
    while True:
        for _ in range(4):
            a @ b
        reps += 4
        _sync(device)
        dt = time.perf_counter() - t0
        if dt >= seconds:
            break
    return 2.0 * n**3 * reps / dt / 1e9


def state_spec() -> EnvSpec:
    return EnvSpec("bench-state", (ArraySpec("state", (19,), "float32"),),
                   ArraySpec("action", (7,), "float32", -1.0, 1.0), 10.0)


def image_spec(size: int) -> EnvSpec:
    return EnvSpec("bench-image", (ArraySpec("images/front", (size, size, 3), "uint8", 0, 255),
                                   ArraySpec("images/wrist", (size, size, 3), "uint8", 0, 255),
                                   ArraySpec("state", (19,), "float32")),
                   ArraySpec("action", (7,), "float32", -1.0, 1.0), 10.0)


def synthetic_batch(spec: EnvSpec, n: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)

    def obs() -> dict[str, np.ndarray]:
        return {s.name: (rng.integers(0, 256, (n, *s.shape), dtype=np.uint8) if s.is_image
                         else rng.standard_normal((n, *s.shape)).astype(np.float32)) for s in spec.observation}

    return {"obs": obs(), "next_obs": obs(),
            "actions": rng.uniform(-1, 1, (n, spec.action.shape[0])).astype(np.float32),
            "rewards": rng.standard_normal(n).astype(np.float32), "terminated": rng.random(n) < 0.01}


def count_flops(agent: SACAgent, batch: dict[str, Any]) -> float:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        agent.update(batch)
    return float(counter.get_total_flops())


def time_updates(agent: SACAgent, batch: dict[str, Any], seconds: float, min_reps: int, warmup: int,
                 ) -> tuple[float, int]:
    for _ in range(warmup):
        agent.update(batch)
    _sync(agent.device)
    reps, t0 = 0, time.perf_counter()
    while reps < min_reps or time.perf_counter() - t0 < seconds:
        agent.update(batch)  # returns floats: already synchronised with the device
        reps += 1
    return (time.perf_counter() - t0) / reps, reps


class Case:
    """One workload: the agent and a synthetic batch, built once; `time_round()` times one window of update()
    calls (and records how busy other processes kept the machine meanwhile); `row()` reports the median round."""

    def __init__(self, name: str, spec: EnvSpec, cfg: AgentConfig, args: argparse.Namespace, peak: float) -> None:
        self.name, self.spec, self.cfg, self.args, self.peak = name, spec, cfg, args, peak
        self.agent = SACAgent(spec, cfg)
        self.batch = synthetic_batch(spec, cfg.samples_per_update, seed=0)
        self.flops = count_flops(self.agent, self.batch)
        self.seconds: list[float] = []
        self.loads: list[float | None] = []
        self.reps = 0

    def time_round(self) -> None:
        with jax_reference.LoadMeter() as load:
            sec, n = time_updates(self.agent, self.batch, self.args.seconds, self.args.min_reps, self.args.warmup)
        self.seconds.append(sec)
        self.loads.append(load.others_cores)
        self.reps += n

    def row(self) -> dict[str, Any]:
        cfg, spec = self.cfg, self.spec
        sec = _median(self.seconds)
        achieved = self.flops / sec / 1e9
        return {"case": self.name, "batch": cfg.batch_size,
                "critic_updates_per_actor_update": cfg.critic_updates_per_actor_update,
                "ensemble": cfg.ensemble_size, "subsample": cfg.ensemble_subsample,
                "activation": cfg.activation, "backup_entropy": cfg.backup_entropy,
                "obs_dim": sum(int(np.prod(s.shape)) for s in spec.observation if not s.is_image),
                "encoder": cfg.encoder if spec.cameras else None,
                "frozen": cfg.freeze_encoder if spec.cameras else None,
                "compile": cfg.compile, "seconds_per_update": sec, "updates_per_s": 1.0 / sec,
                "critic_updates_per_s": cfg.critic_updates_per_actor_update / sec, "reps": self.reps,
                "critic_updates_per_s_rounds": [cfg.critic_updates_per_actor_update / x for x in self.seconds],
                "others_cores_rounds": self.loads,
                "gflop_per_update": self.flops / 1e9, "achieved_gflops": achieved,
                "fraction_of_matmul": achieved / self.peak}


def run_case(name: str, spec: EnvSpec, cfg: AgentConfig, args: argparse.Namespace, peak: float) -> dict[str, Any]:
    case = Case(name, spec, cfg, args, peak)
    case.time_round()
    return case.row()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="auto", help="auto (cuda when available), cpu, cuda, cuda:N")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch default)")
    p.add_argument("--state-utd", type=int, default=8, help="critic updates per actor update, state case")
    p.add_argument("--image-utd", type=int, default=4, help="critic updates per actor update, image case")
    p.add_argument("--image-batch", type=int, default=0, help="image minibatch (0 = 256 on cuda, 32 on cpu)")
    p.add_argument("--image-size", type=int, default=128)
    p.add_argument("--encoder", default="resnet10", choices=["resnet10", "conv"])
    p.add_argument("--compile", action="store_true", help="also torch.compile the losses (rows beside the eager ones)")
    p.add_argument("--jax-python", default=None,
                   help="interpreter of the JAX reference venv (../shared/reference/README.md): time the reference "
                        "update between rounds of the state cases and report the ratio")
    p.add_argument("--jax-script", default=None, help="the reference's bench_jax.py (default: ../shared/reference)")
    p.add_argument("--rounds", type=int, default=0, help="timing rounds of the state cases (0: 3 with --jax-python, "
                                                         "else 1)")
    p.add_argument("--skip-image", action="store_true")
    p.add_argument("--seconds", type=float, default=5.0, help="minimum timing window per case")
    p.add_argument("--min-reps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--matmul-n", type=int, default=1024)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = p.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    dev = str(device)
    peak = matmul_gflops(device, args.matmul_n, seconds=2.0)
    rows, jax_runs = state_rows(args, dev, peak)
    if not args.skip_image:
        image_batch = args.image_batch or (256 if device.type == "cuda" else 32)
        with tempfile.TemporaryDirectory() as tmp:
            weights = None
            if args.encoder == "resnet10":
                weights = os.path.join(tmp, "resnet10.safetensors")
                save_backbone_weights(ResNet10(), weights)
            cfg = drq_config(batch_size=image_batch, critic_updates_per_actor_update=args.image_utd, device=dev,
                             encoder=args.encoder, encoder_weights=weights)
            rows.append(run_case(f"image DrQ {args.image_size}px x2", image_spec(args.image_size), cfg, args, peak))
    header = (f"{'case':<24} {'batch':>5} {'utd':>4} {'update/s':>9} {'critic upd/s':>12} {'GFLOP/upd':>10} "
              f"{'GFLOP/s':>8} {'of matmul':>9}")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    print(f"device {dev} ({name}), "
          f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"matmul {args.matmul_n}^3 fp32: {peak:.1f} GFLOP/s")
    print(header + (f" {'vs JAX':>7}" if jax_runs else ""))
    print("-" * len(header))
    jax_median = _median([j["critic_updates_per_s_median"] for j in jax_runs]) if jax_runs else None
    for r in rows:
        if jax_median and "ratio_to_jax" not in r and r["case"].startswith("state"):
            r["ratio_to_jax"] = r["critic_updates_per_s"] / jax_median
        ratio = f" {r['ratio_to_jax']:>6.2f}x" if "ratio_to_jax" in r else ""
        print(f"{r['case']:<24} {r['batch']:>5} {r['critic_updates_per_actor_update']:>4} {r['updates_per_s']:>9.2f} "
              f"{r['critic_updates_per_s']:>12.2f} {r['gflop_per_update']:>10.2f} {r['achieved_gflops']:>8.1f} "
              f"{r['fraction_of_matmul']:>9.1%}{ratio}")
    if jax_runs:
        print(f"JAX reference (interleaved, {len(jax_runs)} runs): critic updates/s "
              f"{[round(j['critic_updates_per_s_median'], 1) for j in jax_runs]}, median {jax_median:.1f}")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    result = {"benchmark": "learner_speed", "device": dev,
              "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.machine(),
              "torch": torch.__version__, "threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
              "matmul_n": args.matmul_n, "matmul_gflops": peak, "cases": rows,
              "jax_reference": {"runs": [{k: j.get(k) for k in ("critic_updates_per_s_median", "steps_per_s",
                                                                 "others_cores", "version", "utd", "batch")}
                                         for j in jax_runs],
                                "critic_updates_per_s_median": jax_median} if jax_runs else None,
              "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
    path = out_dir / f"learner_speed_{device.type}.json"
    tmp_path = path.with_suffix(".json.tmp")
    tmp_path.write_text(json.dumps(result, indent=2))
    tmp_path.replace(path)
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


# ------------------------------------------------------------------ state cases, interleaved with the JAX reference
def _median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2] if len(xs) % 2 else 0.5 * sum(sorted(xs)[len(xs) // 2 - 1: len(xs) // 2 + 1])


def state_rows(args: argparse.Namespace, dev: str, peak: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The state cases (our default update; with --jax-python also the reference's update in torch), eager and
    (--compile) compiled, each timed in rounds with one JAX reference run after every round."""
    python = args.jax_python
    rounds = args.rounds or (3 if python else 1)
    cases: list[tuple[str, EnvSpec, AgentConfig]] = [
        ("state RLPD", state_spec(), rlpd_state_config(critic_updates_per_actor_update=args.state_utd, device=dev))]
    if python:
        cases.append(("state, reference update", jax_reference.reference_spec(),
                      jax_reference.reference_state_config(args.state_utd, device=dev)))
    if args.compile:
        cases += [(f"{name} +compile", spec, cfg.replace(compile=True)) for name, spec, cfg in cases]
    jax_runs: list[dict[str, Any]] = []

    def reference() -> None:
        if python:
            try:
                jax_runs.append(jax_reference.run_reference(python, args.state_utd, args.jax_script))
            except RuntimeError as err:
                print(f"warning: {err}", file=sys.stderr)

    built = [Case(name, spec, cfg, args, peak) for name, spec, cfg in cases]
    for _ in range(rounds):  # round-robin: round r of every case runs between the reference's runs r-1 and r
        for case in built:
            case.time_round()
        reference()
    rows = [case.row() for case in built]
    if jax_runs:
        jax_rates = [j["critic_updates_per_s_median"] for j in jax_runs]
        for row in rows:
            mine = row["critic_updates_per_s_rounds"]
            row["ratio_to_jax_rounds"] = [mine[i] / jax_rates[i] for i in range(min(len(mine), len(jax_rates)))]
            row["ratio_to_jax"] = row["critic_updates_per_s"] / _median(jax_rates)
    return rows, jax_runs


if __name__ == "__main__":
    raise SystemExit(main())
