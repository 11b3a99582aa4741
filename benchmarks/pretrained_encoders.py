"""Frozen camera backbones a lab can get: CPU cost per frame and what their features say about the scene.

Per option (conv from scratch as the cost reference; ResNet-10 and ResNet-18 with random weights, the untrained
baseline; ResNet-10 pretrained on the cell's own demo frames by `robot-rl pretrain-encoder`; and any weights file
passed with --weights NAME=FILE, e.g. SERL's converted resnet10_params.pkl or torchvision's ResNet-18 .pth, which
nothing downloads here):

- cost: milliseconds per frame of the backbone's forward pass, batch 32, one CPU thread, 64x64 and 128x128
  (median of repeats);
- linear probe: ridge regression from the frozen backbone's features (front + wrist camera, 64x64) to the TCP
  position and to the CUBE position, fitted on the frames of the training episodes and scored (R^2, 1 = perfect,
  0 = the mean) on held-out episodes (other seeds). The cube position is the twin's privileged state: a real
  robot does not have it, which is why it is only a probe target here, never a training target (pretrain-encoder
  trains on proprio and the recorded gripper command only).
- target heads (the pretrained file only): per camera, how far the head's prediction of the next grasp's place
  relative to the gripper (what AgentConfig encoder_features='targets' feeds a policy) lies from where the held-out
  episode's gripper really closed, in cm (median and 90th percentile over the frames before the grasp; the truth
  is the episode's own proprio and gripper command, no privileged state).

Usage: python benchmarks/pretrained_encoders.py [--train-episodes 16 --probe-episodes 8 --pretrain-steps 1000]
       (prints a table; writes benchmarks/results/pretrained_encoders.json)
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from _prelude import (
    add_out_dir,
    add_work_dir,
    bench_parser,
    host_info,
    print_table,
    set_env_defaults,
    timestamp,
    work_dir,
    write_json,
)

set_env_defaults(one_thread=True)

import numpy as np  # noqa: E402

IMAGE_PX = 64
TASK = "twin-pick-cube"


def record(seeds: range, out: Path | None) -> dict[str, Any]:
    """Scripted (noisy) pick-cube episodes: frames per camera, TCP and cube position per frame; saved as episode
    files under `out` when given (pretrain-encoder reads those)."""
    from demos.devices.teleop import make_device
    from demos.recording.demos import make_recording_env, record_episode
    from envs.presets import get_preset
    from robot_rl.episodes import save_episode

    preset = get_preset(TASK)
    kwargs = preset.make_kwargs(obs_mode="pixels", image_size=IMAGE_PX)
    env = make_recording_env(TASK, None, None, **kwargs)
    device = make_device("scripted", task=TASK, seed=seeds.start, noise_std=0.1)
    frames: dict[str, list[np.ndarray]] = {}
    tcp, cube, owner = [], [], []
    cube_log: list[np.ndarray] = []
    orig_step, orig_reset = env.step, env.reset

    def log_cube() -> None:
        cube_log.append(np.array(env.unwrapped.last_state.objects["cube_pos"], np.float32))

    def step(action: Any) -> Any:
        out = orig_step(action)
        log_cube()
        return out

    def reset(**kw: Any) -> Any:
        out = orig_reset(**kw)
        log_cube()
        return out

    env.step, env.reset = step, reset
    try:
        for i, seed in enumerate(seeds):
            cube_log.clear()
            ep = record_episode(env, device, seed=seed, task=TASK, env_kwargs=kwargs)
            if out is not None:
                save_episode(ep, out)
            for k, v in ep.observations.items():
                if k.startswith("images/"):
                    frames.setdefault(k, []).append(v)
            tcp.append(ep.observations["state"][:, :3])
            cube.append(np.stack(cube_log))
            owner.append(np.full(ep.length + 1, i))
    finally:
        env.close()
        device.close()
    return {"images": {k: np.concatenate(v) for k, v in frames.items()}, "tcp": np.concatenate(tcp),
            "cube": np.concatenate(cube), "episode": np.concatenate(owner)}


def features(backbone: Any, images: dict[str, np.ndarray]) -> np.ndarray:
    import torch

    backbone.eval()
    parts = []
    with torch.no_grad():
        for cam in sorted(images):
            x = images[cam]
            parts.append(np.concatenate([backbone(torch.from_numpy(x[s:s + 64])).flatten(1).numpy()
                                         for s in range(0, len(x), 64)]))
    return np.concatenate(parts, axis=1)


def ridge_r2(f_train: np.ndarray, y_train: np.ndarray, groups: np.ndarray, f_test: np.ndarray,
             y_test: np.ndarray) -> tuple[float, float]:
    """Ridge from features to targets; alpha by 2-fold split of the training episodes; (R^2 on test, alpha)."""
    mu, sd = f_train.mean(0), f_train.std(0) + 1e-6
    a, b = (f_train - mu) / sd, (f_test - mu) / sd
    ym = y_train.mean(0)

    def fit(x: np.ndarray, y: np.ndarray, alpha: float) -> np.ndarray:
        k = x @ x.T  # dual form: fewer frames than features
        return x.T @ np.linalg.solve(k + alpha * np.eye(len(x)), y - ym)

    def r2(pred: np.ndarray, y: np.ndarray) -> float:
        return float(1 - ((pred - y) ** 2).sum() / ((y - y.mean(0)) ** 2).sum())

    eps = np.unique(groups)
    half = np.isin(groups, eps[: len(eps) // 2])
    best = max((r2(a[~half] @ fit(a[half], y_train[half], al) + ym, y_train[~half]), al)
               for al in (1.0, 10.0, 100.0, 1e3, 1e4, 1e5))
    alpha = best[1]
    return r2(b @ fit(a, y_train, alpha) + ym, y_test), alpha


def target_head_errors(weights: str, train_dir: Path, probe_dir: Path) -> list[dict[str, Any]]:
    """Per camera: the target head's predicted grasp place relative to the gripper (de-standardised with the
    training frames' statistics) against the held-out episodes' recorded one (cm), over the frames before the
    grasp."""
    import torch

    from learners.agents.backbones import build_backbone, load_backbone_weights, load_target_head
    from learners.training.pretrain_encoder import TARGETS, load_frames

    rel = [TARGETS.index(n) for n in ("event_rel_x", "event_rel_y", "event_rel_z")]
    tr, te = load_frames((str(train_dir),)), load_frames((str(probe_dir),))
    mean, std = tr.targets.mean(0), tr.targets.std(0) + 1e-3
    truth = te.targets[:, rel]
    before = np.linalg.norm(truth, axis=1) > 0.02  # the gripper still > 2 cm from where it will close
    net = build_backbone("resnet10")
    load_backbone_weights(net, weights)
    net.eval()
    out = []
    with torch.no_grad():
        for cam, imgs in te.images.items():
            feats = torch.cat([net(torch.from_numpy(imgs[s:s + 64])) for s in range(0, len(imgs), 64)])
            pred = load_target_head(weights, cam, feats[0].numel())(feats).numpy() * std + mean
            grasp = 100 * np.linalg.norm(pred[:, rel] - truth, axis=1)[before]
            out.append({"camera": cam, "frames": int(before.sum()),
                        "grasp_err_cm_median": float(np.median(grasp)),
                        "grasp_err_cm_p90": float(np.percentile(grasp, 90))})
    return out


def ms_per_frame(backbone: Any, px: int, reps: int) -> float:
    import torch

    x = torch.randint(0, 256, (32, px, px, 3), dtype=torch.uint8)
    backbone.eval()
    times = []
    with torch.no_grad():
        backbone(x)
        for _ in range(reps):
            t0 = time.perf_counter()
            backbone(x)
            times.append(time.perf_counter() - t0)
    return 1000 * float(np.median(times)) / 32


def main() -> None:
    p = bench_parser(__doc__)
    add_out_dir(p)
    p.add_argument("--train-episodes", type=int, default=16)
    p.add_argument("--probe-episodes", type=int, default=8)
    p.add_argument("--pretrain-steps", type=int, default=1000)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--weights", action="append", default=[], help="NAME=FILE: also measure this weights file")
    add_work_dir(p, "where the recorded episodes and the pretrained file go")
    args = p.parse_args()
    import torch

    torch.set_num_threads(1)
    from learners.agents.backbones import build_backbone, load_backbone_weights, weights_architecture
    from learners.agents.encoders import ConvBackbone
    from learners.training.pretrain_encoder import PretrainConfig, pretrain_encoder

    work = work_dir(args.work, "pretrained_encoders_")
    t0 = time.perf_counter()
    train = record(range(0, args.train_episodes), work / "demos")
    test = record(range(1000, 1000 + args.probe_episodes), work / "probe")
    record_s = time.perf_counter() - t0
    pre = pretrain_encoder(PretrainConfig(episodes=(str(work / "demos"),), out=str(work / "cell_resnet10.safetensors"),
                                          steps=args.pretrain_steps, seed=0))
    torch.manual_seed(0)
    options: dict[str, Any] = {"conv (from scratch; untrained here)": ConvBackbone(3, (32, 64, 128, 256)),
                               "resnet10, random weights": build_backbone("resnet10"),
                               "resnet18, random weights": build_backbone("resnet18")}
    cell = build_backbone("resnet10")
    load_backbone_weights(cell, pre.out)
    options["resnet10, pretrain-encoder on the cell's demos"] = cell
    for item in args.weights:
        name, _, path = item.partition("=")
        net = build_backbone(weights_architecture(path) or "resnet10")
        load_backbone_weights(net, path)
        options[name] = net
    rows = []
    for name, net in options.items():
        f_tr, f_te = features(net, train["images"]), features(net, test["images"])
        r_tcp, a_tcp = ridge_r2(f_tr, train["tcp"], train["episode"], f_te, test["tcp"])
        r_cube, a_cube = ridge_r2(f_tr, train["cube"], train["episode"], f_te, test["cube"])
        rows.append({"option": name, "ms_per_frame_64px": ms_per_frame(net, 64, args.reps),
                     "ms_per_frame_128px": ms_per_frame(net, 128, args.reps), "feature_dim": int(f_tr.shape[1]),
                     "probe_r2_tcp": r_tcp, "probe_r2_cube": r_cube, "probe_alpha_tcp": a_tcp,
                     "probe_alpha_cube": a_cube})
    heads = target_head_errors(pre.out, work / "demos", work / "probe")
    print_table(f"{'camera':14s} {'grasp place err cm (median / p90)':>34s}",
                [f"{h['camera']:14s} {h['grasp_err_cm_median']:17.1f} / {h['grasp_err_cm_p90']:<14.1f}"
                 for h in heads])
    print_table(f"{'option':50s} {'ms/frame 64px':>14s} {'ms/frame 128px':>15s} {'R2 TCP':>7s} {'R2 cube':>8s}",
                [f"{r['option']:50s} {r['ms_per_frame_64px']:14.2f} {r['ms_per_frame_128px']:15.2f} "
                 f"{r['probe_r2_tcp']:7.2f} {r['probe_r2_cube']:8.2f}" for r in rows])
    write_json(args.out / "pretrained_encoders.json", {
        "benchmark": "pretrained_encoders", "time": timestamp(), **host_info(), "task": TASK, "image_px": IMAGE_PX,
        "train_episodes": args.train_episodes, "probe_episodes": args.probe_episodes,
        "train_frames": len(train["tcp"]), "probe_frames": len(test["tcp"]), "record_s": record_s,
        "threads": 1, "batch": 32, "reps": args.reps,
        "pretrain": {k: v for k, v in pre.__dict__.items() if k != "out"},
        "privileged_note": "the cube position is the twin's privileged state, a probe target only",
        "rows": rows, "target_heads": heads})


if __name__ == "__main__":
    main()
