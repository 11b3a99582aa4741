"""Pretrain a camera backbone on the cell's own recordings (demo, label or play episodes), writing the same
self-describing safetensors file as `robot-rl convert-encoder`, so `--encoder-weights FILE` freezes it in the agent.

The objective: from ONE camera frame, predict
  (a) the TCP position now (proprio `state[0:3]`),
  (b) the TCP position at the NEXT GRIPPER EVENT of the episode (the step where the recorded gripper command
      changes sign: the operator closes on the object or opens at the goal; the episode's last TCP position when
      no event follows), and
  (c) (b) minus (a): the event's place relative to the gripper, which a wrist camera sees without knowing where
      the arm is,
each target standardised over the data set, mean squared error, with DrQ's random shift on the frames.

Why this objective: a policy from pixels needs, above all, where the object (or goal) is relative to the gripper;
proprio already tells it where the gripper is. Target (b) is exactly where the object was grasped (or released),
so a backbone that predicts it must localise the object in the image, and target (a) makes it localise the arm.
Both labels come from the robot's own proprio and the recorded gripper command: no privileged state (no cube
pose) is an input or a target, so the same command runs on episodes recorded on a real cell. Alternatives weigh
worse here: inverse dynamics (predict a_t from two frames) rewards features of the arm's motion, not of where the
object sits; augmentation invariance (contrastive) needs large batches and many negatives to avoid collapse, which
a CPU cannot afford; reconstruction spends capacity on the background. The weakness: a frame whose next event is
far in the future (the approach's first steps) has an uncertain target (b) only if the scene does not show the
object; on pick tasks it does, the camera sees the cube.

The written file holds the backbone and, under `targets.<camera>.`, each camera's head (learners.agents.backbones
`load_target_head`): AgentConfig `encoder_features='targets'` feeds the heads' predictions to the agent.

A run's own encoder: with AgentConfig.encoder_pretrain_steps > 0 (the default from cameras with demos on the arm
env) and no encoder_weights, `with_run_encoder` pretrains on the run's demos into OUT/encoder.safetensors before the
agent is built (`robot-rl train`, `robot-rl learner`), or reuses that file (a resumed run).

Usage::

    report = pretrain_encoder(PretrainConfig(episodes=("demos/pick",), out="weights/cell_resnet10.safetensors"))
    report.val_loss_first, report.val_loss_last            # held-out loss before / after (standardised units)
    agent_cfg = with_run_encoder(agent_cfg, ["demos/pick"], "runs/pick")   # encoder_weights=.../encoder.safetensors
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from learners.agents.backbones import (
    ARCHITECTURES,
    build_backbone,
    build_target_head,
    load_backbone_weights,
    save_backbone_weights,
    weights_architecture,
)
from learners.agents.config import AgentConfig
from learners.agents.encoders import random_shift
from robot_rl.config import Config, require
from robot_rl.episodes import Episode, episode_paths, load_episode
from robot_rl.errors import ConfigError, ShapeError

TARGETS = ("tcp_x", "tcp_y", "tcp_z", "event_tcp_x", "event_tcp_y", "event_tcp_z", "event_rel_x", "event_rel_y",
           "event_rel_z")
"""The predicted quantities, in order (standardised over the training frames)."""


@dataclasses.dataclass(frozen=True)
class PretrainConfig(Config):
    """`robot-rl pretrain-encoder`'s settings."""

    episodes: tuple[str, ...] = ()
    """Episode directories or files (record-demos, record-labels, play recordings); every camera is used."""
    out: str = "encoder.safetensors"
    """The safetensors file to write (metadata names the architecture); a JSON report is written beside it."""
    architecture: str = "resnet10"
    """Backbone to train: 'resnet10' (SERL's GroupNorm ResNet-10) or 'resnet18' (torchvision's)."""
    init_weights: str | None = None
    """Start from this weights file (e.g. convert-encoder's ImageNet ResNet); None: random init."""
    steps: int = 300
    """Gradient steps."""
    batch_size: int = 32
    """Frames per step."""
    lr: float = 3e-4
    """Adam learning rate."""
    augment_pad_px: int = 4
    """Random-shift padding in pixels (0 = off)."""
    gripper_index: int = -1
    """Action element carrying the gripper command (sign change = gripper event); -1 = the last."""
    val_fraction: float = 0.2
    """Share of episodes (whole episodes, at least one) held out for the validation loss; with a single episode none
    (the report's validation losses are then the training frames')."""
    seed: int = 0
    """Seed of the split, the initialisation and the batches."""
    threads: int = 0
    """torch CPU threads (0 = leave torch's default)."""

    def validate(self) -> None:
        require(len(self.episodes) > 0, "episodes", self.episodes, "name at least one episode directory or file")
        require(self.architecture in ARCHITECTURES, "architecture", self.architecture,
                f"must be one of {ARCHITECTURES}")
        for name in ("steps", "batch_size"):
            require(getattr(self, name) > 0, name, getattr(self, name), "must be > 0")
        require(self.lr > 0, "lr", self.lr, "must be > 0")
        require(self.augment_pad_px >= 0, "augment_pad_px", self.augment_pad_px, "must be >= 0")
        require(0.0 < self.val_fraction < 1.0, "val_fraction", self.val_fraction, "must be in (0, 1)")


def event_targets(ep: Episode, gripper_index: int = -1) -> np.ndarray:
    """(T+1, 9) targets of every frame (TARGETS): TCP position now, TCP position at the next gripper event (the
    frame at which the recorded gripper command changes sign, zeros skipped; the last frame when none follows), and
    the second minus the first (where the event happens relative to the gripper now: what a wrist camera sees).
    Needs the proprio `state` observation."""
    if "state" not in ep.observations or ep.observations["state"].shape[-1] < 3:
        raise ShapeError("pretraining targets need the proprio 'state' observation (TCP position in state[0:3])")
    tcp = ep.observations["state"][:, :3].astype(np.float32)
    if ep.actions.shape[1] == 0:
        raise ShapeError("pretraining targets need the recorded actions (the gripper command)")
    grip = np.sign(ep.actions[:, gripper_index])
    events, last = [], 0.0  # a change of the last non-zero command (0 = "no change" on some devices)
    for t in range(ep.length):
        if grip[t] != 0:
            if last != 0 and grip[t] != last:
                events.append(t)
            last = grip[t]
    n = tcp.shape[0]
    nxt = np.full(n, n - 1)
    for e in reversed(events):
        nxt[: e + 1] = e
    return np.concatenate([tcp, tcp[nxt], tcp[nxt] - tcp], axis=1)


@dataclasses.dataclass
class FrameSet:
    """Frames of every camera with their targets: images[camera] (N, H, W, C) uint8, targets (N, 9), and the
    episode index of each row (for the split)."""

    images: dict[str, np.ndarray]
    targets: np.ndarray
    episode: np.ndarray


def load_frames(paths: tuple[str, ...], gripper_index: int = -1) -> FrameSet:
    """Every frame of the episodes under `paths`; ConfigError without episodes or cameras, ShapeError when the
    episodes' cameras differ."""
    files: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files += episode_paths(path)
        else:
            raise ConfigError(f"{p}: no such episode file or directory")
    if not files:
        raise ConfigError(f"no episode files under {list(paths)}")
    images: dict[str, list[np.ndarray]] = {}
    targets, owner = [], []
    cams: list[str] | None = None
    for i, f in enumerate(files):
        ep = load_episode(f)
        these = sorted(k for k in ep.observations if k.startswith("images/"))
        if cams is None:
            cams = these
            if not cams:
                raise ConfigError(f"{f}: no camera images (record with --obs-mode pixels)")
            images = {c: [] for c in cams}
        elif these != cams:
            raise ShapeError(f"{f}: cameras {these} differ from the first episode's {cams}")
        for c in cams:
            images[c].append(ep.observations[c])
        t = event_targets(ep, gripper_index)
        targets.append(t)
        owner.append(np.full(len(t), i))
    return FrameSet({c: np.concatenate(v) for c, v in images.items()}, np.concatenate(targets).astype(np.float32),
                    np.concatenate(owner))


class PretrainModel(nn.Module):
    """A shared backbone and one head per camera: flatten -> dense 256 -> relu -> dense (targets)
    (learners.agents.backbones.build_target_head; the file keeps the heads, AgentConfig.encoder_features)."""

    def __init__(self, backbone: nn.Module, cameras: dict[str, tuple[int, int]], n_out: int) -> None:
        super().__init__()
        self.backbone = backbone
        c = int(backbone.out_channels)  # type: ignore[arg-type]
        self.heads = nn.ModuleDict()
        self.camera_names = list(cameras)
        for name, (h, w) in cameras.items():
            oh, ow = backbone.output_hw(h, w)  # type: ignore[operator]
            self.heads[name.replace("/", "__")] = build_target_head(c * oh * ow, n_out)

    def camera_heads(self) -> dict[str, nn.Module]:
        """{camera name: its head}."""
        return {name: self.heads[name.replace("/", "__")] for name in self.camera_names}

    def forward(self, camera: str, images: torch.Tensor) -> torch.Tensor:
        return self.heads[camera.replace("/", "__")](self.backbone(images))


@dataclasses.dataclass(frozen=True)
class PretrainReport:
    """What a pretraining run did (also written as OUT.json)."""

    out: str
    architecture: str
    frames: int
    train_episodes: int
    val_episodes: int
    cameras: list[str]
    steps: int
    seconds: float
    train_loss_first: float
    train_loss_last: float
    val_loss_first: float
    val_loss_last: float
    fit_loss_first: float
    """The loss over every training frame without augmentation, before training (and `fit_loss_last` after)."""
    fit_loss_last: float
    targets: tuple[str, ...] = TARGETS


def _val_loss(model: PretrainModel, data: FrameSet, rows: np.ndarray, y: torch.Tensor) -> float:
    model.eval()
    total, n = 0.0, 0
    with torch.no_grad():
        for cam, imgs in data.images.items():
            for s in range(0, len(rows), 64):
                r = rows[s:s + 64]
                pred = model(cam, torch.from_numpy(imgs[r]))
                total += float(((pred - y[r]) ** 2).mean(dim=1).sum())
                n += len(r)
    model.train()
    return total / max(n, 1)


def pretrain_encoder(cfg: PretrainConfig, log: Callable[[str], Any] | None = None) -> PretrainReport:
    """Train a backbone on the objective in the module docstring; write cfg.out (+ cfg.out + '.json'). `log`: a
    progress line every tenth of the steps (step, mean training loss since the last line, ETA)."""
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    data = load_frames(cfg.episodes, cfg.gripper_index)
    rng = np.random.default_rng(cfg.seed)
    torch.manual_seed(cfg.seed)
    eps = np.unique(data.episode)
    n_val = max(1, round(cfg.val_fraction * len(eps))) if len(eps) >= 2 else 0
    val_eps = rng.permutation(eps)[:n_val]
    is_val = np.isin(data.episode, val_eps)
    train_rows, val_rows = np.flatnonzero(~is_val), np.flatnonzero(is_val)
    if n_val == 0:  # one episode: nothing to hold out; the "held-out" losses are the training frames'
        val_rows = train_rows
    mean = data.targets[train_rows].mean(0)
    std = data.targets[train_rows].std(0) + 1e-3
    y = torch.from_numpy((data.targets - mean) / std)
    in_ch = next(iter(data.images.values())).shape[-1]
    backbone = build_backbone(cfg.architecture, in_ch)
    if cfg.init_weights is not None:
        arch = weights_architecture(cfg.init_weights) or "resnet10"
        if arch != cfg.architecture:
            raise ConfigError(f"init_weights {cfg.init_weights} holds a {arch} backbone, not {cfg.architecture}")
        load_backbone_weights(backbone, cfg.init_weights)
    cams = {c: (int(v.shape[1]), int(v.shape[2])) for c, v in data.images.items()}
    model = PretrainModel(backbone, cams, y.shape[1])
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    gen = torch.Generator().manual_seed(cfg.seed)
    val_first = _val_loss(model, data, val_rows, y)
    fit_first = _val_loss(model, data, train_rows, y)
    losses: list[float] = []
    start = time.perf_counter()
    names = list(data.images)
    every = max(1, cfg.steps // 10)  # steps between progress lines
    for step in range(cfg.steps):
        cam = names[step % len(names)]
        rows = rng.choice(train_rows, size=min(cfg.batch_size, len(train_rows)), replace=False)
        imgs = random_shift(torch.from_numpy(data.images[cam][rows]), cfg.augment_pad_px, gen)
        loss = ((model(cam, imgs) - y[rows]) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if not math.isfinite(losses[-1]):
            raise ShapeError(f"pretraining diverged at step {step} (loss {losses[-1]}); lower lr")
        if log is not None and (step + 1) % every == 0 and step + 1 < cfg.steps:
            elapsed = time.perf_counter() - start
            log(f"pretraining step {step + 1}/{cfg.steps}: loss {np.mean(losses[-every:]):.3f}, "
                f"ETA {elapsed / (step + 1) * (cfg.steps - step - 1):.0f} s")
    seconds = time.perf_counter() - start
    val_last = _val_loss(model, data, val_rows, y)
    fit_last = _val_loss(model, data, train_rows, y)
    out = Path(cfg.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    save_backbone_weights(backbone, out, source=f"robot-rl pretrain-encoder: next-gripper-event TCP + TCP from "
                                                f"{len(eps)} episodes, {cfg.steps} steps",
                          target_heads=model.camera_heads(), target_names=TARGETS)
    k = max(1, min(20, cfg.steps // 5))
    report = PretrainReport(str(out), cfg.architecture, len(data.targets), len(eps) - n_val, n_val,
                            names, cfg.steps, round(seconds, 2), float(np.mean(losses[:k])),
                            float(np.mean(losses[-k:])), val_first, val_last, fit_first, fit_last)
    Path(str(out) + ".json").write_text(json.dumps(dataclasses.asdict(report), indent=2) + "\n")
    return report


RUN_ENCODER_FILE = "encoder.safetensors"
"""The file in a run directory that holds the encoder the run pretrained on its demos."""


def with_run_encoder(cfg: AgentConfig, demo_dirs: Sequence[str | Path], out_dir: str | Path,
                     log: Callable[[str], Any] = print, source_weights: str | None = None) -> AgentConfig:
    """`cfg` with the encoder pretraining it asks for done: when cfg.encoder_pretrain_steps > 0, the encoder is a
    ResNet and no encoder_weights are given, pretrain it on `demo_dirs` (this module's objective, the command's
    defaults, cfg.seed) into OUT/encoder.safetensors, or reuse that file when it is there with its report (a
    resumed run), and return cfg with encoder_weights = its absolute path (what the run's agent_config.json, the
    checkpoints and the actors then name); `source_weights` (a warm start's source run's encoder file) is taken
    instead of pretraining. Otherwise `cfg` unchanged. ConfigError when there are no demos."""
    if cfg.encoder_pretrain_steps <= 0 or cfg.encoder_weights is not None or cfg.encoder == "conv":
        return cfg
    if source_weights is not None:
        log(f"encoder: the warm start's source's ({source_weights})")
        return cfg.replace(encoder_weights=source_weights)
    path = (Path(out_dir) / RUN_ENCODER_FILE).resolve()
    if path.is_file() and Path(str(path) + ".json").is_file():
        log(f"encoder: the run's pretrained {cfg.encoder} ({path})")
        return cfg.replace(encoder_weights=str(path))
    if not demo_dirs:
        raise ConfigError(f"encoder_pretrain_steps={cfg.encoder_pretrain_steps}: the camera encoder is pretrained on "
                          f"the run's demos and this run has none: give --demos DIR (recorded with cameras), or "
                          f"--encoder-weights FILE (robot-rl pretrain-encoder's), or --encoder conv")
    log(f"encoder: pretraining {cfg.encoder} on the demos for {cfg.encoder_pretrain_steps} steps "
        f"(robot-rl pretrain-encoder's objective) into {path} ...")
    report = pretrain_encoder(PretrainConfig(episodes=tuple(str(d) for d in demo_dirs), out=str(path),
                                             architecture=cfg.encoder, steps=cfg.encoder_pretrain_steps,
                                             seed=cfg.seed), log=lambda s: log(f"encoder: {s}"))
    log(f"encoder: pretrained in {report.seconds:.0f} s on {report.frames} frames ({', '.join(report.cameras)}); "
        f"held-out loss {report.val_loss_first:.3f} -> {report.val_loss_last:.3f}")
    return cfg.replace(encoder_weights=str(path))
