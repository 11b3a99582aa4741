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

Backends (`--backends torch,jax`, the same cases in the same run, interleaved over `--rounds` rounds; medians):
every case runs on each backend (learners.agents.agent.make_agent); the JAX rows also give the first update's time
(tracing + XLA compilation) with an empty persistent compilation cache ("cold") and again from the cache
("cached"), and the ratio to torch. A third case compares our JAX update with the independent JAX reference
(`../shared/reference/bench_jax.py`, run from its own venv, `--reference PYTHON`, default .venv-jaxref/bin/python)
on the reference's configuration (obs 30, act 7, ensemble 10 / subset 2, batch 256, UTD 20, ReLU): ours is timed
as the learner runs it, `agent.update(sampler.sample(rows))` with our replay buffers, RLPD mixing and 5-step
targets (`--ref-n-step`); the reference times its bare jitted update on batches already on the device.

    python benchmarks/learner_speed.py                       # device auto (cuda when available)
    python benchmarks/learner_speed.py --device cpu --threads 1 --image-batch 16
    python benchmarks/learner_speed.py --device cpu --threads 1 --backends torch,jax --rounds 3
    python benchmarks/learner_speed.py --threads 2 --skip-image --compile --tag compile   # + torch.compile twins

`--amp` adds a bf16 mixed-precision twin of every eager torch case (name + " [bf16]", AgentConfig.mixed_precision);
`--prefetch` adds, for the state and image cases, the same update drawing every batch from replay buffers of
`--prefetch-transitions` synthetic transitions ("[sampled]": sampling + copy in the timed loop) and the same through
learners.replay.prefetch.BatchPrefetcher ("[sampled+prefetch]": the next batch drawn, pinned and copied in a thread
while
the update runs), with the ratio of the two. On a GPU:

    python benchmarks/learner_speed.py --device cuda --backends torch --compile --amp --prefetch --tag h100

`--compile` adds a torch.compile twin of every torch case (name + " [compile]"), timed in the same rounds, with its
first update (compilation) time and its ratios to the eager torch row and, on the reference config, to the
reference. `--tag T` writes learner_speed_<device>_T.json instead of learner_speed_<device>.json.

The GPU-speed twins (every base torch row is eager: cuda_graphs=off):
- `--graphs`: a CUDA-graph twin (AgentConfig.cuda_graphs=on, learners.agents.graphs) of every torch state case
  (" [graphs]"; with `--compile` also " [graphs+compile]"), and on the reference config one drawing its batches
  through the prefetcher (" [graphs+prefetch]": sampling off the critical path);
- `--device-replay`: the JAX reference-config case with its replay on the device (" [device replay]",
  learners.agents.jax.device_replay: indices drawn and rows gathered inside the jitted update);
- `--image-fast`: image twins with the frozen backbone under bf16 autocast (" [bf16 backbone]", backbone_precision),
  the same with channels-last weights (" [bf16 backbone+channels-last]"), and the feature-cache path (" [feature
  cache]": replay buffers with learners.replay.feature_cache attached, batches through the prefetcher, so the
  backbone runs once per stored frame, not per update); with `--graphs` also the plain and the feature-cache image
  cases as CUDA graphs (" [graphs]", " [feature cache+graphs]"); the feature cache lives where
  AgentConfig.feature_cache_device=auto puts it (the GPU on CUDA) and its batches carry no images;
- `--tf32` (with the above): TF32 twins (AgentConfig.matmul_precision=high, learners.agents.precision): state
  " [graphs+tf32]"; images " [tf32]", " [feature cache+tf32]" and with --graphs " [graphs+tf32]",
  " [feature cache+graphs+tf32]".
A case that fails (to build or to time) prints its error and is listed under "failures" in the JSON; the others
still run and are written. `--skip-state` / `--skip-image` leave a workload out; `--skip-first-update` skips the
JAX cold/cached first-update timing (two extra compilations per JAX case).

    python benchmarks/learner_speed.py --device cuda --backends torch,jax --graphs --device-replay --skip-image \
        --reference python3 --reference-script PATH/bench_jax.py --tag gpu_state
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _prelude import ROOT, add_out_dir, bench_parser, load_average, print_table, result_name, timestamp, write_json

from learners.agents.agent import LearnerAgent, make_agent
from learners.agents.config import AgentConfig, drq_config, rlpd_state_config
from learners.agents.encoders import ResNet10, save_backbone_weights
from learners.agents.policy import resolve_device
from learners.agents.sac import SACAgent
from learners.replay.buffer import MixedSampler, ReplayBuffer
from learners.replay.prefetch import BatchPrefetcher
from robot_rl.specs import ArraySpec, EnvSpec

REFERENCE = ROOT.parent / "shared" / "reference" / "bench_jax.py"


COMPILED = " [compile]"  # case-name suffix of the torch.compile twins (--compile)
BF16 = " [bf16]"  # ... of the bf16 mixed-precision twins (--amp)
SAMPLED = " [sampled]"  # ... of the cases timed with replay sampling (--prefetch)
PREFETCHED = " [sampled+prefetch]"  # ... the same with learners.replay.prefetch.BatchPrefetcher (--prefetch)
GRAPHS = " [graphs]"  # ... of the CUDA-graph twins (--graphs)
GRAPHS_COMPILED = " [graphs+compile]"  # ... CUDA graphs over the compiled losses (--graphs --compile)
CACHE_GRAPHS = " [feature cache+graphs]"  # ... the feature-cache image case as CUDA graphs (--image-fast --graphs)
GRAPHS_PREFETCHED = " [graphs+prefetch]"  # ... CUDA graphs, batches through the prefetcher (--graphs)
DEVICE_REPLAY = " [device replay]"  # ... the JAX agent sampling on the device (--device-replay)
BF16_BACKBONE = " [bf16 backbone]"  # ... image twins (--image-fast)
BF16_CL_BACKBONE = " [bf16 backbone+channels-last]"
FEATURE_CACHE = " [feature cache]"
TF32 = " [tf32]"  # ... TF32 twins (--tf32, AgentConfig.matmul_precision=high): images
GRAPHS_TF32 = " [graphs+tf32]"  # ... state and image cases as CUDA graphs with TF32 (--tf32 --graphs)
CACHE_TF32 = " [feature cache+tf32]"  # ... (--tf32 --image-fast)
CACHE_GRAPHS_TF32 = " [feature cache+graphs+tf32]"  # ... (--tf32 --image-fast --graphs)


def base_case(name: str) -> str:
    """The case a twin belongs to: its name without the ' [...]' suffix."""
    return name.split(" [")[0]


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


def state_spec(dim: int = 19) -> EnvSpec:
    return EnvSpec("bench-state", (ArraySpec("state", (dim,), "float32"),),
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


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def time_updates(agent: LearnerAgent,
                 batch: dict[str, Any] | MixedSampler | BatchPrefetcher | Callable[[], Any], seconds: float,
                 min_reps: int, warmup: int) -> tuple[float, int, float]:
    """(wall seconds per `agent.update`, calls timed, this process's CPU seconds per call) over >= `seconds` and
    >= `min_reps` calls; `batch` a MixedSampler times `update(sampler.sample(rows))`, sampling included, a
    BatchPrefetcher `update(prefetcher.next())` (sampling and the copy overlapping the previous update), a callable
    is called instead of `agent.update` (the JAX device replay's update)."""
    rows = agent.cfg.samples_per_update

    def one() -> None:
        if isinstance(batch, MixedSampler):
            agent.update(batch.sample(rows))  # floats: synchronised
        elif isinstance(batch, BatchPrefetcher):
            agent.update(batch.next())
        elif callable(batch):
            batch()
        else:
            agent.update(batch)

    for _ in range(warmup):
        one()
    if isinstance(agent, SACAgent):
        _sync(agent.device)
    reps, t0, c0 = 0, time.perf_counter(), _cpu_s()
    while reps < min_reps or time.perf_counter() - t0 < seconds:
        one()
        reps += 1
    return (time.perf_counter() - t0) / reps, reps, (_cpu_s() - c0) / reps


def first_update_s(spec: EnvSpec, cfg: AgentConfig, batch: dict[str, Any]) -> float:
    """Seconds of a fresh agent's first update (for JAX: tracing + compilation, or a persistent-cache hit)."""
    agent = make_agent(spec, cfg)
    t0 = time.perf_counter()
    agent.update(batch)
    return time.perf_counter() - t0


def synthetic_sampler(spec: EnvSpec, n: int, n_step: int, seed: int) -> MixedSampler:
    """Online and demo buffers of `n` random transitions each (episodes of 100 steps), RLPD 50/50 mixing."""
    rng = np.random.default_rng(seed)

    def frame() -> dict[str, np.ndarray]:
        return {s.name: (rng.integers(0, 256, s.shape, dtype=np.uint8) if s.is_image
                         else rng.standard_normal(s.shape).astype(np.float32)) for s in spec.observation}

    bufs = []
    for _ in range(2):
        buf = ReplayBuffer(spec, n + n // 100 + 2, seed=int(rng.integers(1 << 30)))
        obs = frame()
        for t in range(n):
            nxt = frame()
            end = (t + 1) % 100 == 0
            buf.add(obs, rng.uniform(-1, 1, spec.action.shape).astype(np.float32), float(rng.random() < 0.05), nxt,
                    bool(end and rng.random() < 0.5), end)
            obs = frame() if end else nxt
        bufs.append(buf)
    return MixedSampler(bufs[0], bufs[1], 0.5, n_step)


def run_reference(python: str, utd: int, steps: int, script: Path = REFERENCE) -> dict[str, Any] | None:
    """One run of the independent JAX reference (its own venv, with this process's XLA_FLAGS: single-threaded
    XLA when --threads 1); its JSON, or None when it failed."""
    argv = [python, str(script), "--task", "state", "--mode", "jit", "--no-infer", "--utd", str(utd),
            "--steps", str(steps), "--repeats", "1", "--warmup", "3"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800, env=dict(os.environ))
    if proc.returncode != 0:
        print(f"reference failed: {proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return None
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


class Case:
    """One workload on one backend: its agent and batch, timed once per round."""

    def __init__(self, name: str, spec: EnvSpec, cfg: AgentConfig, sampler: MixedSampler | None = None,
                 prefetch: bool = False, device_replay: bool = False, feature_cache_frames: int = 0,
                 first_update: bool = True) -> None:
        self.name, self.spec, self.cfg, self.sampler = name, spec, cfg, sampler
        self.batch = synthetic_batch(spec, cfg.samples_per_update, seed=0)
        if sampler is not None:  # the sampler's own rows (n-step columns included) for the first update
            self.batch = sampler.sample(cfg.samples_per_update)
        self.row: dict[str, Any] = {"case": name, "backend": cfg.backend, "batch": cfg.batch_size,
                                    "critic_updates_per_actor_update": cfg.critic_updates_per_actor_update,
                                    "ensemble": cfg.ensemble_size, "subsample": cfg.ensemble_subsample,
                                    "activation": cfg.activation, "n_step": cfg.n_step,
                                    "encoder": cfg.encoder if spec.cameras else None,
                                    "frozen": cfg.freeze_encoder if spec.cameras else None,
                                    "compile": cfg.compile, "sampler_in_timing": sampler is not None,
                                    "mixed_precision": cfg.mixed_precision, "prefetch": prefetch,
                                    "seconds_per_update_rounds": [], "cpu_seconds_per_update_rounds": []}
        self.row.update(cuda_graphs=cfg.cuda_graphs, device_replay=device_replay,
                        backbone_precision=cfg.backbone_precision, channels_last=cfg.channels_last,
                        feature_cache=feature_cache_frames > 0)
        if cfg.backend == "jax" and first_update:
            self.row["first_update_cold_s"] = first_update_s(spec, cfg, self.batch)
            self.row["first_update_cached_s"] = first_update_s(spec, cfg, self.batch)
        self.agent = make_agent(spec, cfg)
        if feature_cache_frames:  # the backbone once per stored frame (learners.replay.feature_cache)
            assert sampler is not None
            from learners.replay.feature_cache import attach_feature_caches

            self.row["feature_cache_note"] = attach_feature_caches(self.agent, [sampler.online, sampler.demo],
                                                                   frames=feature_cache_frames)
            t0 = time.perf_counter()
            self.batch = sampler.sample(cfg.samples_per_update)  # encodes every stored frame once
            self.row["feature_cache_fill_s"] = time.perf_counter() - t0
        self.replay: Any = None
        if device_replay:
            from learners.agents.jax.device_replay import DeviceReplay

            assert sampler is not None
            self.replay = DeviceReplay(self.agent, sampler)  # type: ignore[arg-type]
        t0 = time.perf_counter()
        if self.replay is not None:
            self.replay.update()
        else:
            self.agent.update(self.batch)
        if cfg.backend == "torch" or device_replay:  # compile: tracing + inductor; graphs: warm-up + capture
            self.row["first_update_s"] = time.perf_counter() - t0
        if isinstance(self.agent, SACAgent):
            self.row["graphs_status"] = self.agent.graphs_status
        self.prefetcher: BatchPrefetcher | None = None
        if prefetch:
            assert sampler is not None and isinstance(self.agent, SACAgent)
            rows = cfg.samples_per_update
            self.prefetcher = BatchPrefetcher(lambda: sampler.sample(rows), self.agent.device)

    def time(self, args: argparse.Namespace) -> None:
        source = (self.replay.update if self.replay is not None else None) or self.prefetcher or self.sampler \
            or self.batch
        sec, _, cpu = time_updates(self.agent, source, args.seconds, args.min_reps, args.warmup)
        self.row["seconds_per_update_rounds"].append(sec)
        self.row["cpu_seconds_per_update_rounds"].append(cpu)

    def finish(self, peak: float, flops: float | None) -> dict[str, Any]:
        sec = statistics.median(self.row["seconds_per_update_rounds"])
        cpu = statistics.median(self.row["cpu_seconds_per_update_rounds"])
        k = self.cfg.critic_updates_per_actor_update
        r = dict(self.row, seconds_per_update=sec, updates_per_s=1.0 / sec, critic_updates_per_s=k / sec,
                 cpu_seconds_per_update=cpu, critic_updates_per_cpu_s=k / cpu)
        if flops is not None:  # counted on the torch agent: the same math in both backends
            r.update(gflop_per_update=flops / 1e9, achieved_gflops=flops / sec / 1e9,
                     fraction_of_matmul=flops / sec / 1e9 / peak)
        return r


def main(argv: list[str] | None = None) -> int:
    p = bench_parser(__doc__)
    p.add_argument("--device", default="auto", help="auto (cuda when available), cpu, cuda, cuda:N")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch default; 1 also makes "
                   "XLA single-threaded)")
    p.add_argument("--backends", default=None, help="comma-separated: torch, jax (default: both when jax is "
                   "installed)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds (medians reported)")
    p.add_argument("--state-utd", type=int, default=8, help="critic updates per actor update, state case")
    p.add_argument("--image-utd", type=int, default=4, help="critic updates per actor update, image case")
    p.add_argument("--image-batch", type=int, default=0, help="image minibatch (0 = 256 on cuda, 32 on cpu)")
    p.add_argument("--image-size", type=int, default=128)
    p.add_argument("--encoder", default="resnet10", choices=["resnet10", "conv"])
    p.add_argument("--compile", action="store_true",
                   help="also time each torch case with torch.compile on (case name + ' [compile]')")
    p.add_argument("--amp", action="store_true",
                   help="also time each eager torch case with mixed_precision=bf16 (case name + ' [bf16]')")
    p.add_argument("--prefetch", action="store_true",
                   help="also time the state and image cases drawing every batch from replay buffers, directly "
                        "(' [sampled]') and through learners.replay.prefetch ('[sampled+prefetch]')")
    p.add_argument("--prefetch-transitions", type=int, default=2000,
                   help="transitions in each of the online and demo buffers of --prefetch")
    p.add_argument("--tag", default="", help="suffix of the results file (learner_speed_<device>_<tag>.json)")
    p.add_argument("--skip-image", action="store_true")
    p.add_argument("--skip-state", action="store_true", help="leave the state cases (and the reference) out")
    p.add_argument("--skip-first-update", action="store_true",
                   help="skip the JAX cold/cached first-update timing (two extra compilations per JAX case)")
    p.add_argument("--graphs", action="store_true",
                   help="also time CUDA-graph twins of the torch state cases (AgentConfig.cuda_graphs=on)")
    p.add_argument("--device-replay", action="store_true",
                   help="also time the JAX reference-config case with its replay on the device")
    p.add_argument("--image-fast", action="store_true",
                   help="also time image twins: bf16 frozen backbone, + channels-last, the feature-cache path")
    p.add_argument("--tf32", action="store_true",
                   help="with --graphs / --image-fast: also their TF32 twins (AgentConfig.matmul_precision=high)")
    p.add_argument("--reference", default=str(ROOT / ".venv-jaxref" / "bin" / "python"),
                   help="python of the JAX reference's venv ('none': skip the reference case)")
    p.add_argument("--reference-script", default=str(REFERENCE), help="the reference's bench_jax.py")
    p.add_argument("--ref-utd", type=int, default=20, help="UTD of the reference comparison")
    p.add_argument("--ref-steps", type=int, default=5, help="reference updates timed per round")
    p.add_argument("--ref-n-step", type=int, default=5, help="n-step targets of our side of the comparison")
    p.add_argument("--seconds", type=float, default=5.0, help="minimum timing window per case and round")
    p.add_argument("--min-reps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--matmul-n", type=int, default=1024)
    add_out_dir(p)
    args = p.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.threads == 1 and "XLA_FLAGS" not in os.environ:
        # ours (learners.agents.jax.agent does it too) and the reference
        os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    backends = args.backends.split(",") if args.backends else ["torch"]
    if args.backends is None:
        try:
            import jax  # noqa: F401

            backends.append("jax")
        except ImportError:
            pass
    os.environ.setdefault("ROBOT_RL_JAX_CACHE", tempfile.mkdtemp(prefix="jax_cache_"))  # cold, then cached
    device = resolve_device(args.device)
    dev = str(device)
    peak = matmul_gflops(device, args.matmul_n, seconds=2.0)
    cases: list[Case] = []
    failures: list[dict[str, str]] = []

    def build(name: str, make: Callable[[], Case]) -> None:
        """Build one case; a failure is printed and recorded, the other cases go on."""
        try:
            cases.append(make())
        except Exception as err:
            _record_failure(failures, name, "build", err)

    flops: dict[str, float] = {}
    state_cfg = rlpd_state_config(critic_updates_per_actor_update=args.state_utd, device=dev, cuda_graphs="off")
    if not args.skip_state:
        for b in backends:
            build("state RLPD", partial(Case, "state RLPD", state_spec(),
                                        state_cfg.replace(backend=b, **_torch_only(b)),
                                        first_update=not args.skip_first_update))
        flops["state RLPD"] = count_flops(SACAgent(state_spec(), state_cfg),
                                          synthetic_batch(state_spec(), state_cfg.samples_per_update, 0))
    ref_python = _reference_python(args.reference)
    ref_name = "state RLPD, reference config"
    ref_cfg = rlpd_state_config(critic_updates_per_actor_update=args.ref_utd, activation="relu",
                                n_step=args.ref_n_step, device=dev, cuda_graphs="off")
    ref_spec, ref_sampler = state_spec(30), None
    if ref_python is not None and "jax" in backends and not args.skip_state:
        ref_sampler = synthetic_sampler(ref_spec, 5000, args.ref_n_step, seed=1)
        for b in backends:
            build(ref_name, partial(Case, ref_name, ref_spec, ref_cfg.replace(backend=b, **_torch_only(b)),
                                    ref_sampler, first_update=not args.skip_first_update))
    elif "jax" in backends and not args.skip_state:
        print(f"no JAX reference python at {args.reference}: skipping the reference comparison (see "
              f"{REFERENCE.parent / 'README.md'})", file=sys.stderr)
    weights_dir = tempfile.TemporaryDirectory()
    img_cfg, img_name = None, f"image DrQ {args.image_size}px x2"
    if not args.skip_image:
        image_batch = args.image_batch or (256 if device.type == "cuda" else 32)
        weights = None
        if args.encoder == "resnet10":
            weights = os.path.join(weights_dir.name, "resnet10.safetensors")
            save_backbone_weights(ResNet10(), weights)
        img_cfg = drq_config(batch_size=image_batch, critic_updates_per_actor_update=args.image_utd, device=dev,
                             encoder=args.encoder, encoder_weights=weights, cuda_graphs="off", feature_cache="off")
        for b in backends:
            build(img_name, partial(Case, img_name, image_spec(args.image_size),
                                    img_cfg.replace(backend=b, **_torch_only(b)),
                                    first_update=not args.skip_first_update))
        flops[img_name] = count_flops(SACAgent(image_spec(args.image_size), img_cfg),
                                      synthetic_batch(image_spec(args.image_size), img_cfg.samples_per_update, 0))
    eager_torch = [c for c in cases if c.cfg.backend == "torch"]
    if args.compile:  # a compiled twin of every torch case, timed in the same rounds
        for c in eager_torch:
            build(c.name + COMPILED, partial(Case, c.name + COMPILED, c.spec, c.cfg.replace(compile=True),
                                             c.sampler))
    if args.amp:  # a bf16 mixed-precision twin of every eager torch case
        for c in eager_torch:
            build(c.name + BF16, partial(Case, c.name + BF16, c.spec, c.cfg.replace(mixed_precision="bf16"),
                                         c.sampler))
    if args.prefetch:  # replay sampling in the timing, without and with the prefetcher
        for c in eager_torch:
            if c.sampler is not None:
                continue
            sampler = synthetic_sampler(c.spec, args.prefetch_transitions, c.cfg.n_step, seed=2)
            build(c.name + SAMPLED, partial(Case, c.name + SAMPLED, c.spec, c.cfg, sampler))
            build(c.name + PREFETCHED, partial(Case, c.name + PREFETCHED, c.spec, c.cfg, sampler,
                                                 prefetch=True))
    if args.graphs:  # CUDA-graph twins of the torch state cases
        _graph_twins(build, eager_torch, args.compile, args.tf32)
    if args.device_replay and ref_sampler is not None and "jax" in backends:
        build(ref_name + DEVICE_REPLAY, partial(Case, ref_name + DEVICE_REPLAY, ref_spec, ref_cfg.replace(
            backend="jax", **_torch_only("jax")), ref_sampler, device_replay=True, first_update=False))
    if args.image_fast and img_cfg is not None and "torch" in backends:
        _image_twins(build, img_name, image_spec(args.image_size), img_cfg, args.prefetch_transitions, args.graphs,
                     args.tf32)
    refs: list[dict[str, Any]] = []
    for rnd in range(args.rounds):  # interleaved: every case (and the reference) once per round
        if ref_python is not None and "jax" in backends:
            ref = run_reference(ref_python, args.ref_utd, args.ref_steps, Path(args.reference_script))
            if ref is not None:
                refs.append(ref)
        for c in list(cases):
            try:
                c.time(args)
            except Exception as err:  # this case is dropped; the others are timed and written
                _record_failure(failures, c.name, "time", err)
                cases.remove(c)
                if c.prefetcher is not None:
                    c.prefetcher.close()
        print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    for c in cases:
        if c.prefetcher is not None:
            c.prefetcher.close()
    rows = [c.finish(peak, flops.get(base_case(c.name))) for c in cases]
    by = {(r["case"], r["backend"]): r for r in rows}
    for r in rows:  # JAX rows and the twins against the eager torch row of the same case
        torch_row = by.get((base_case(r["case"]), "torch"))
        if torch_row is not None and torch_row is not r:
            r["ratio_to_torch"] = r["updates_per_s"] / torch_row["updates_per_s"]
            r["ratio_to_torch_cpu"] = r["critic_updates_per_cpu_s"] / torch_row["critic_updates_per_cpu_s"]
        sampled = by.get((base_case(r["case"]) + SAMPLED, r["backend"]))
        if r["case"].endswith(PREFETCHED) and sampled is not None:
            r["ratio_to_sampled"] = r["updates_per_s"] / sampled["updates_per_s"]
    reference: dict[str, Any] | None = None
    if refs:
        rates = [x["critic_updates_per_s_median"] for x in refs]
        cpu_rates = [statistics.median(x["steps_per_cpu_s"]) * args.ref_utd for x in refs]
        reference = {"critic_updates_per_s_rounds": rates, "critic_updates_per_s": statistics.median(rates),
                     "critic_updates_per_cpu_s_rounds": cpu_rates,
                     "critic_updates_per_cpu_s": statistics.median(cpu_rates),
                     "version": refs[0].get("version"), "first_step_s": refs[0].get("warmup_step_s", [None])[0],
                     "others_cores": [x.get("others_cores") for x in refs]}
        for r in rows:
            if base_case(r["case"]) == ref_name:
                r["ratio_to_reference"] = r["critic_updates_per_s"] / reference["critic_updates_per_s"]
                r["ratio_to_reference_cpu"] = r["critic_updates_per_cpu_s"] / reference["critic_updates_per_cpu_s"]
    header = (f"{'case':<40} {'backend':<7} {'batch':>5} {'utd':>4} {'update/s':>9} {'critic upd/s':>12} "
              f"{'per CPU-s':>9} {'GFLOP/s':>8} {'of matmul':>9} {'vs torch':>13} {'vs ref':>13} "
              f"{'1st update cold/cached':>22}")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    print(f"device {dev} ({name}), torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"matmul {args.matmul_n}^3 fp32: {peak:.1f} GFLOP/s, {args.rounds} interleaved rounds (medians)")
    lines = []
    for r in rows:
        gf = f"{r['achieved_gflops']:>8.1f} {r['fraction_of_matmul']:>9.1%}" if "achieved_gflops" in r else \
            f"{'':>8} {'':>9}"
        vt = (f"{r['ratio_to_torch']:>5.2f}x/{r['ratio_to_torch_cpu']:.2f}x" if "ratio_to_torch" in r
              else f"{'':>13}")
        vr = (f"{r['ratio_to_reference']:>5.2f}x/{r['ratio_to_reference_cpu']:.2f}x" if "ratio_to_reference" in r
              else f"{'':>13}")
        fc = (f"{r['first_update_cold_s']:>10.1f} / {r['first_update_cached_s']:.1f} s"
              if "first_update_cold_s" in r else f"{r['first_update_s']:>10.1f} s" if r["compile"] else "")
        if "ratio_to_sampled" in r:
            fc += f" {r['ratio_to_sampled']:.2f}x the [sampled] row"
        lines.append(f"{r['case']:<40} {r['backend']:<7} {r['batch']:>5} {r['critic_updates_per_actor_update']:>4} "
                     f"{r['updates_per_s']:>9.2f} {r['critic_updates_per_s']:>12.2f} "
                     f"{r['critic_updates_per_cpu_s']:>9.2f} {gf} {vt} {vr} {fc}")
    print_table(header, lines)
    if reference is not None:
        print(f"{'JAX reference (bare update)':<40} {'jax':<7} {256:>5} {args.ref_utd:>4} "
              f"{reference['critic_updates_per_s'] / args.ref_utd:>9.2f} {reference['critic_updates_per_s']:>12.2f} "
              f"{reference['critic_updates_per_cpu_s']:>9.2f}   (first step incl. compile "
              f"{reference['first_step_s']:.1f} s; {reference['version']})")
    print("ratios: wall clock / per CPU second of this process (the machine is shared: CPU seconds are the steadier "
          "measure under load)")
    result = {"benchmark": "learner_speed", "device": dev,
              "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.machine(),
              "torch": torch.__version__, "threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
              "backends": backends, "rounds": args.rounds, "jax": _jax_version(backends),
              "matmul_n": args.matmul_n, "matmul_gflops": peak, "cases": rows, "reference": reference,
              "failures": failures,
              "load_average": load_average(), "time": timestamp()}
    path = write_json(args.out / f"{result_name('learner_speed', device.type, args.tag)}.json", result, indent=2)
    weights_dir.cleanup()
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


def _torch_only(backend: str) -> dict[str, Any]:
    """The torch-only options back at their defaults for a JAX case (the JAX agent refuses any other value)."""
    if backend != "jax":
        return {}
    default = AgentConfig()
    return {name: getattr(default, name) for name in ("cuda_graphs", "feature_cache", "backbone_precision",
                                                       "channels_last", "matmul_precision", "feature_cache_device")}


def _record_failure(failures: list[dict[str, str]], name: str, stage: str, err: BaseException) -> None:
    """Print a case's error (one line + the traceback's last frames) and keep it for the JSON."""
    line = (str(err).strip().splitlines() or [""])[0][:300]
    print(f"case '{name}' failed to {stage}: {type(err).__name__}: {line}", file=sys.stderr, flush=True)
    traceback.print_exc(limit=4, file=sys.stderr)
    failures.append({"case": name, "stage": stage, "error": f"{type(err).__name__}: {line}"})


def _reference_python(given: str) -> str | None:
    """The reference's python: a path, or a command on PATH (python3 on a machine whose python has jax);
    None for 'none' or when it is neither."""
    if given.lower() == "none":
        return None
    if Path(given).exists():
        return given
    return shutil.which(given)


def _graph_twins(build: Callable[[str, Callable[[], Case]], None], eager_torch: list[Case], compiled: bool,
                 tf32: bool = False) -> None:
    """CUDA-graph twins (cuda_graphs=on) of the torch state cases; on a case timed with sampling, also one drawing
    through the prefetcher; with `compiled` also graphs over the compiled losses; with `tf32` also graphs with
    TF32 matmuls (matmul_precision=high)."""
    for c in eager_torch:
        if c.spec.cameras:
            continue
        on = c.cfg.replace(cuda_graphs="on")
        build(c.name + GRAPHS, partial(Case, c.name + GRAPHS, c.spec, on, c.sampler))
        if c.sampler is not None:
            build(c.name + GRAPHS_PREFETCHED, partial(Case, c.name + GRAPHS_PREFETCHED, c.spec, on,
                                                      c.sampler, prefetch=True))
        if compiled:
            build(c.name + GRAPHS_COMPILED, partial(Case, c.name + GRAPHS_COMPILED, c.spec,
                                                    on.replace(compile=True), c.sampler))
        if tf32:
            build(c.name + GRAPHS_TF32, partial(Case, c.name + GRAPHS_TF32, c.spec,
                                                on.replace(matmul_precision="high"), c.sampler))


def _image_twins(build: Callable[[str, Callable[[], Case]], None], name: str, spec: EnvSpec, cfg: AgentConfig,
                 transitions: int, graphs: bool = False, tf32: bool = False) -> None:
    """The image case with a bf16 frozen backbone, + channels-last weights, and through feature caches; with
    `graphs` also the plain and the feature-cache case as CUDA graphs (cuda_graphs=on); with `tf32` each of the
    plain, feature-cache (and graphs) cases again with TF32 matmuls and convolutions (matmul_precision=high)."""
    bf = cfg.replace(backbone_precision="bf16")
    build(name + BF16_BACKBONE, partial(Case, name + BF16_BACKBONE, spec, bf))
    build(name + BF16_CL_BACKBONE, partial(Case, name + BF16_CL_BACKBONE, spec, bf.replace(channels_last=True)))
    sampler = synthetic_sampler(spec, transitions, cfg.n_step, seed=3)
    frames = 2 * (transitions + transitions // 100 + 2)
    cached = cfg.replace(feature_cache="on")
    twins = [(FEATURE_CACHE, cached, True)]
    if graphs:
        twins += [(GRAPHS, cfg.replace(cuda_graphs="on"), False),
                  (CACHE_GRAPHS, cached.replace(cuda_graphs="on"), True)]
    if tf32:
        tf = {"matmul_precision": "high"}
        twins += [(TF32, cfg.replace(**tf), False), (CACHE_TF32, cached.replace(**tf), True)]
        if graphs:
            twins += [(GRAPHS_TF32, cfg.replace(cuda_graphs="on", **tf), False),
                      (CACHE_GRAPHS_TF32, cached.replace(cuda_graphs="on", **tf), True)]
    for suffix, c, cache in twins:
        if cache:  # replay buffers with feature caches, batches through the prefetcher
            build(name + suffix, partial(Case, name + suffix, spec, c, sampler, prefetch=True,
                                         feature_cache_frames=frames))
        else:
            build(name + suffix, partial(Case, name + suffix, spec, c))


def _jax_version(backends: list[str]) -> str | None:
    if "jax" not in backends:
        return None
    import jax

    return str(jax.__version__)


if __name__ == "__main__":
    raise SystemExit(main())
