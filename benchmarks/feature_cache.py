"""Learner CPU seconds per env step: the state learner against pixel learners with and without the feature cache.

The issue's cost goal: a pixel learner's CPU seconds per env step <= 2x the state learner's on the same task. Each
case builds the agent `robot-rl train` builds for twin-pick-cube (TrainConfig.agent_config: the task's recipe, its
updates per env step) on the env's own spec, fills a demo buffer (`--demo-transitions`, human rows) and the online
buffer (`--online-transitions`) with synthetic transitions of that spec, attaches the feature cache as build_run
does (learners.replay.feature_cache), then times env steps as the in-process loop runs them, in CPU seconds
(time.process_time, all threads of this process): per step one `online.add`, then `updates_per_step` x (sample +
agent.update); with the cache, `encode` is its share of the sampling (new frames, encoded in batches of 16). The env
step and the actor's policy forward are not counted (the actor's side). Frames encoded before the timed loop (the
demos, the prefilled online data) are timed separately (`one_off_s`): a run pays that once.

Cases (two cameras, `--sizes`, default 64 and 128): `state` (the state recipe; the ratio's denominator, measured in
the same run), `pixel defaults` (what a task gets from cameras with demos, learners.agents.recipes: a frozen
ResNet-10 with its target heads' predictions beside the light trainable head, batch 128, the feature cache at its
default 4 crops; random weights and heads of the pretrained file's shapes in a local safetensors file, since the
cost does not depend on their values), `pixels conv` (the twin's former pixel recipe, given as flags: a small conv
net trained from scratch at batch 32), `resnet10 uncached` (that recipe with a frozen ResNet-10, feature_cache=off:
the backbone runs on every batch), `resnet10 cached K=k` (feature_cache=on, float16, k crops each; `--crops`), and
the cached case with a lighter head (`--head-variants`: no dropout in the head, 2 spatial features instead of 8,
both) to show what the head costs, and the pixel defaults with fewer crops, a 64-wide image latent or bf16
(`--default-variants`; `--variants` picks some), and the state learner with bf16 updates beside its default
(`--state-bf16`: the reference for a pixel row whose updates run under bf16 too). Each case runs for `--seconds` of
CPU time (at least `--min-steps` steps).

    python benchmarks/feature_cache.py --threads 1                 # writes benchmarks/results/feature_cache.json
    python benchmarks/feature_cache.py --sizes 64 --seconds 5 --tag quick
    python benchmarks/feature_cache.py --sizes 64 --only-defaults --variants "K=1, image latent 64" --tag k1
    python benchmarks/feature_cache.py --sizes 64 --only-defaults --state-bf16 --variants "bf16 backbone and updates"
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path
from typing import Any

from _prelude import (
    add_out_dir,
    bench_parser,
    host_info,
    load_average,
    print_table,
    recipe_summary,
    result_name,
    set_env_defaults,
    timestamp,
    write_json,
)

set_env_defaults(one_thread=True)

import numpy as np  # noqa: E402
import torch  # noqa: E402

from learners.agents.agent import make_agent  # noqa: E402
from learners.agents.encoders import ResNet10, save_backbone_weights  # noqa: E402
from learners.agents.obs import nested  # noqa: E402
from learners.replay.buffer import ReplayBuffer, sampler_for  # noqa: E402
from learners.replay.feature_cache import attach_feature_caches, run_frames  # noqa: E402
from learners.training.config import TrainConfig  # noqa: E402
from learners.training.pretrain_encoder import TARGETS, PretrainModel  # noqa: E402
from learners.training.run_env import make_run_env, run_env_spec  # noqa: E402
from robot_rl.specs import EnvSpec  # noqa: E402

TASK = "twin-pick-cube"


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    obs_mode: str
    size: int | None = None
    sets: tuple[str, ...] = ()
    frozen: bool = False
    demos: bool = False
    """A run with demos: from cameras the pixel defaults (their encoder given here as the random weights file)."""


FORMER_PIXEL_RECIPE = ("encoder=conv", "discount=0.95", "state_scale=10", "bc_weight=30", "hidden_dims=256,256",
                       "batch_size=32", "critic_updates_per_actor_update=1", "ensemble_size=2", "ensemble_subsample=2")
"""The twin's pixel recipe before the pixel defaults (a CPU trim), as --set items."""


def _obs(spec: EnvSpec, rng: np.random.Generator) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for s in spec.observation:
        if s.is_image:
            flat[s.name] = rng.integers(0, 256, s.shape, dtype=np.uint8)
        else:
            flat[s.name] = rng.normal(0, 0.1, s.shape).astype(s.dtype)
    return nested(flat)


def _fill(buf: ReplayBuffer, spec: EnvSpec, n: int, rng: np.random.Generator, human: bool, ep_len: int = 60) -> None:
    act = spec.action.shape[0]
    obs = _obs(spec, rng)
    for t in range(n):
        nxt = _obs(spec, rng)
        end = (t + 1) % ep_len == 0
        buf.add(obs, rng.uniform(-1, 1, act), float(end), nxt, end, False, intervention=human)
        obs = _obs(spec, rng) if end else nxt


def random_weights(path: Path, size: int) -> Path:
    """A random ResNet-10 with random target heads for two cameras of `size` x `size` (the file
    `robot-rl pretrain-encoder` writes, same keys and shapes)."""
    torch.manual_seed(0)
    model = PretrainModel(ResNet10(), {"images/front": (size, size), "images/wrist": (size, size)}, len(TARGETS))
    save_backbone_weights(model.backbone, path, target_heads=model.camera_heads(), target_names=TARGETS)
    return path


DEFAULT_VARIANTS = (("K=2", ("feature_cache_crops=2",)), ("K=1", ("feature_cache_crops=1",)),
                    ("image latent 64", ("image_latent_dim=64",)),
                    ("K=2, image latent 64", ("feature_cache_crops=2", "image_latent_dim=64")),
                    ("K=1, image latent 64", ("feature_cache_crops=1", "image_latent_dim=64")),
                    ("bf16 backbone", ("backbone_precision=bf16",)),
                    ("K=1, image latent 64, bf16 backbone",
                     ("feature_cache_crops=1", "image_latent_dim=64", "backbone_precision=bf16")),
                    ("bf16 backbone and updates", ("backbone_precision=bf16", "mixed_precision=bf16")),
                    ("image latent 64, bf16 backbone and updates",
                     ("image_latent_dim=64", "backbone_precision=bf16", "mixed_precision=bf16")),
                    ("compiled", ("compile=true",)),
                    ("image latent 64, bf16 backbone and updates, compiled",
                     ("image_latent_dim=64", "backbone_precision=bf16", "mixed_precision=bf16", "compile=true")))
"""Cheaper settings of the pixel defaults (`--default-variants`, or the ones named by `--variants`): fewer cached
crops, a narrower trainable head, the frozen backbone and the update's forward passes under bf16 autocast (fast where
the CPU has bf16 instructions, e.g. AVX512-BF16), torch.compile on the losses."""


def measure(case: Case, args: Any, weights: Path | None) -> dict[str, Any]:
    assert weights is not None or not case.frozen
    sets = case.sets + ((f"encoder_weights={weights}", "encoder=resnet10", "freeze_encoder=true")
                        if case.frozen else ())
    cfg = TrainConfig(task=TASK, obs_mode=case.obs_mode, image_size=case.size, agent_set=sets, threads=args.threads,
                      device="cpu", max_env_steps=args.run_steps, demos="demos" if case.demos else None)
    env = make_run_env(cfg)
    spec = run_env_spec(env, cfg)
    env.close()
    agent = make_agent(spec, cfg.agent_config(has_cameras=bool(spec.cameras)))
    ups, rows = cfg.steps_per_update(), agent.cfg.samples_per_update
    rng = np.random.default_rng(0)
    online, demo = ReplayBuffer(spec, args.capacity, seed=0), ReplayBuffer(spec, args.capacity, seed=1)
    _fill(demo, spec, args.demo_transitions, rng, human=True)
    _fill(online, spec, args.online_transitions, rng, human=False)
    note = attach_feature_caches(agent, [online, demo], run_frames([online, demo], args.run_steps))
    caches = [b.feature_cache for b in (online, demo) if b.feature_cache is not None]
    t0 = time.process_time()
    for c in caches:
        c.refresh()
    one_off, one_off_frames = time.process_time() - t0, sum(c.frames_encoded for c in caches)
    sampler = sampler_for(online, demo, 0.5, agent.cfg)
    for _ in range(2):  # warm-up updates (allocations, first-call costs)
        agent.update(sampler.sample(rows))
    encode0 = sum(c.encode_cpu_s for c in caches)
    parts = {"insert": 0.0, "sample": 0.0, "update": 0.0}
    obs, steps, start = _obs(spec, rng), 0, time.process_time()
    while steps < args.min_steps or time.process_time() - start < args.seconds:
        t = time.process_time()
        nxt = _obs(spec, rng)
        online.add(obs, rng.uniform(-1, 1, spec.action.shape[0]), 0.0, nxt, False, False)
        obs = nxt
        t1 = time.process_time()
        parts["insert"] += t1 - t
        for _ in range(ups):
            batch = sampler.sample(rows)
            t2 = time.process_time()
            agent.update(batch)
            t3 = time.process_time()
            parts["sample"] += t2 - t1
            parts["update"] += t3 - t2
            t1 = t3
        steps += 1
    total = sum(parts.values())
    parts["encode"] = sum(c.encode_cpu_s for c in caches) - encode0  # inside "sample" (batches of new frames)
    parts["sample"] -= parts["encode"]
    cams = {c.name: list(c.shape) for c in spec.cameras}
    a = agent.cfg
    return {"case": case.name, "size": case.size, "cameras": cams, "steps": steps, "updates_per_step": ups,
            "batch_rows": rows, "cpu_s_per_step": total / steps,
            **{f"{k}_s_per_step": v / steps for k, v in parts.items()},
            "one_off_s": one_off, "one_off_frames": one_off_frames,
            "cache_note": note if spec.cameras else None,
            "agent": {k: getattr(a, k) for k in ("encoder", "batch_size", "ensemble_size", "hidden_dims",
                                                 "critic_updates_per_actor_update", "num_spatial_features",
                                                 "image_latent_dim", "augment_pad", "feature_cache",
                                                 "feature_cache_crops", "feature_cache_dtype", "encoder_dropout",
                                                 "encoder_features")}}


def cases(args: Any) -> list[Case]:
    out = [Case("state", "state")]
    if args.state_bf16:
        out.append(Case("state, bf16 updates", "state", sets=("mixed_precision=bf16",)))
    for size in args.sizes:
        out.append(Case("pixel defaults (target features, K=4)", "pixels", size, ("encoder_features=both",),
                        frozen=True, demos=True))
        for label, sets in DEFAULT_VARIANTS if args.default_variants or args.variants else ():
            if args.variants and label not in args.variants:
                continue
            out.append(Case(f"pixel defaults, {label}", "pixels", size, ("encoder_features=both", *sets), frozen=True,
                            demos=True))
        if args.only_defaults:
            continue
        out.append(Case("pixels conv (former recipe)", "pixels", size, FORMER_PIXEL_RECIPE))
        out.append(Case("resnet10 uncached", "pixels", size, (*FORMER_PIXEL_RECIPE, "feature_cache=off"),
                        frozen=True))
        for k in args.crops:
            out.append(Case(f"resnet10 cached K={k}", "pixels", size,
                            (*FORMER_PIXEL_RECIPE, "feature_cache=on", f"feature_cache_crops={k}"), frozen=True))
        if args.head_variants:
            k = min(args.crops)
            for label, sets in (("no head dropout", ("encoder_dropout=0",)),
                                ("spatial features 2", ("num_spatial_features=2",)),
                                ("spatial features 2, no dropout", ("num_spatial_features=2", "encoder_dropout=0"))):
                out.append(Case(f"resnet10 cached K={k}, {label}", "pixels", size,
                                (*FORMER_PIXEL_RECIPE, "feature_cache=on", f"feature_cache_crops={k}", *sets),
                                frozen=True))
    return out


def main() -> None:
    p = bench_parser(__doc__)
    p.add_argument("--sizes", type=int, nargs="+", default=[64, 128], help="camera image sizes")
    p.add_argument("--crops", type=int, nargs="+", default=[1, 4], help="cached crops K per frame")
    p.add_argument("--head-variants", action="store_true", help="also time lighter heads on the cache")
    p.add_argument("--only-defaults", action="store_true", help="time only the state learner and the pixel defaults")
    p.add_argument("--default-variants", action="store_true",
                   help="also time the pixel defaults with fewer cached crops and a narrower head")
    p.add_argument("--variants", nargs="+", default=None, metavar="LABEL",
                   choices=[label for label, _ in DEFAULT_VARIANTS],
                   help="time only these settings of the pixel defaults (labels of DEFAULT_VARIANTS)")
    p.add_argument("--state-bf16", action="store_true",
                   help="also time the state learner with its updates under bf16 autocast (mixed_precision=bf16): "
                        "the reference for pixel rows that use it too")
    p.add_argument("--seconds", type=float, default=20.0, help="CPU seconds per case (the timed loop)")
    p.add_argument("--min-steps", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--capacity", type=int, default=20_000, help="slots of each buffer")
    p.add_argument("--demo-transitions", type=int, default=1200)
    p.add_argument("--online-transitions", type=int, default=2000)
    p.add_argument("--run-steps", type=int, default=20_000, help="env steps of the run the cache plans for")
    p.add_argument("--tag", default="")
    add_out_dir(p)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        todo = cases(args)
        weights = {size: random_weights(Path(tmp) / f"resnet10_{size}.safetensors", size)
                   for size in {c.size for c in todo if c.frozen and c.size}}  # one file per image size
        rows = []
        for case in todo:
            r = measure(case, args, weights.get(case.size) if case.frozen and case.size else None)
            rows.append(r)
            print(f"  {case.name} {case.size or ''}: {r['cpu_s_per_step'] * 1e3:.1f} ms/step", flush=True)
    state = rows[0]["cpu_s_per_step"]
    for r in rows:
        r["ratio_to_state"] = r["cpu_s_per_step"] / state
    print_table(f"{'case':<40} {'size':>5} {'ms/step':>9} {'insert':>8} {'encode':>8} {'sample':>8} {'update':>8} "
                f"{'x state':>8}",
                (f"{r['case']:<40} {r['size'] or '-':>5} {r['cpu_s_per_step'] * 1e3:>9.1f} "
                 f"{r['insert_s_per_step'] * 1e3:>8.1f} {r['encode_s_per_step'] * 1e3:>8.1f} "
                 f"{r['sample_s_per_step'] * 1e3:>8.1f} "
                 f"{r['update_s_per_step'] * 1e3:>8.1f} {r['ratio_to_state']:>8.2f}" for r in rows))
    path = write_json(args.out / f"{result_name('feature_cache', args.tag)}.json", {
        "benchmark": "feature_cache", "time": timestamp(), **host_info(), "threads": args.threads,
        "load_average": load_average(), "task": TASK, "recipe_state": recipe_summary(TASK, "state"),
        "recipe_pixels": recipe_summary(TASK, "pixels"), "seconds_per_case": args.seconds,
        "buffers": {"demo": args.demo_transitions, "online": args.online_transitions, "run_steps": args.run_steps},
        "weights": "random ResNet-10 weights and target heads (the cost does not depend on their values)",
        "former_pixel_recipe": list(FORMER_PIXEL_RECIPE), "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
