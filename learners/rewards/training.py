"""Training a reward classifier (`robot-rl train-classifier`): augmentation, class weighting, early stopping, the
threshold for a target precision, and the card.

Recipe (what HIL-SERL, SERL, LeRobot and RLinf do, plus what they lack; ../shared/REFERENCE.md):
- split by episode, stratified (learners.rewards.labels), validation 25 % of the episodes;
- augmentation per sample and camera: random shift (edge-pad `shift_pad` pixels, random crop back; DrQ's
  `learners.agents.encoders.random_shift`) and mild colour jitter (brightness +-`jitter`, contrast x(1 +- `jitter`),
  per colour channel gain x(1 +- `jitter` / 2));
- class weighting: BCE with the positive class weighted by negatives / positives of the training split; the
  logit offset it adds (log of that weight) is taken off the saved output bias afterwards, so probabilities are
  for the data's own class balance (`learners.rewards.classifier.prior_correction`);
- Adam, minibatches drawn uniformly from the training frames; the validation loss (same weighting, no
  augmentation, eval mode) every `eval_every` steps; the best weights are kept and training stops after
  `patience` evaluations without improvement (or at `max_steps`);
- the decision threshold is chosen on the validation split for `target_precision` (false positives are what
  break RL): the lowest threshold whose precision, at it and above, meets the target and whose Wilson lower
  bound at `precision_confidence` (90 %) does too (`learners.rewards.metrics.threshold_for_precision`), but
  never below `min_threshold` (0.5): a near-perfectly separated validation split lets that rule go down to the
  lowest positive's score (0.001 was seen on cube-relocate), where frames the classifier itself calls more likely
  failure than success count as successes, which on a learning policy's unseen states invites false positives;
- the card gets the metrics table at that threshold (validation and a sample of the training split), the
  calibration table, the k-gate replayed over the validation episodes for k = 1..5, training time.

Usage::

    cfg = TrainClassifierConfig(max_steps=1500, target_precision=0.99)
    result = train_classifier(cfg, ["labels/pick"], Path("runs/cls"), log=print)
    result.card.threshold, result.card.metrics["validation"]["precision"]
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from learners.agents.encoders import random_shift
from learners.agents.policy import resolve_device
from learners.rewards.classifier import (
    ClassifierCard,
    ClassifierModelConfig,
    RewardClassifier,
    prior_correction,
    save_classifier,
)
from learners.rewards.labels import LabelledFrames, load_labels, split_by_episode
from learners.rewards.metrics import (
    ThresholdChoice,
    binary_metrics,
    calibration_table,
    floor_threshold,
    format_calibration_table,
    format_metrics_table,
    gate_stats,
    roc_auc,
    threshold_for_precision,
)
from learners.rewards.reward_model import DEFAULT_GATE_K, ProprioPredicate, default_predicate
from robot_rl.config import Config, require
from robot_rl.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class TrainClassifierConfig(Config):
    """One classifier training run (what `robot-rl train-classifier` parses into)."""

    cameras: tuple[str, ...] = ()
    """Observation paths of the cameras to use ('images/front', ...); () = every camera in the labels."""
    model: ClassifierModelConfig = dataclasses.field(default_factory=ClassifierModelConfig)
    """The network (encoder, sizes)."""
    val_fraction: float = 0.25
    """Share of the episodes held out for validation (split by episode, stratified)."""
    min_episodes: int = 2
    """Each side of the split needs at least this many episodes (else a clear error)."""
    target_precision: float = 0.99
    """The threshold is the lowest one with at least this precision on the validation split ..."""
    precision_confidence: float = 0.9
    """... believably: the precision's Wilson lower bound at this confidence must reach the target too (0: the
    point estimate alone; see learners.rewards.metrics.threshold_for_precision)."""
    min_threshold: float = 0.5
    """Floor on the chosen threshold: a probability below it never counts as success, whatever recall the
    validation split would allow (0: no floor)."""
    batch_size: int = 64
    lr: float = 3e-4
    """Adam learning rate."""
    max_steps: int = 2000
    """Upper bound on gradient steps."""
    eval_every: int = 100
    """Validation loss every this many steps (early stopping)."""
    patience: int = 5
    """Stop after this many validations without a better validation loss."""
    shift_pad: int | None = None
    """Random-shift padding in pixels; None: 4 per 128 pixels of image height (4 at 128x128, 2 at 64x64)."""
    jitter: float = 0.1
    """Colour jitter strength (0: off)."""
    class_weighting: bool = True
    """Weight the positive class by negatives / positives in the loss."""
    gate_k: int = DEFAULT_GATE_K
    """Run-time gate written into the card: consecutive positive frames before a success counts."""
    predicate: str = "auto"
    """Run-time proprio predicate for the card: 'auto' (the task's default), 'none', or conditions such as
    'state[12]>=0.01,state[2]>=-0.2' (learners.rewards.reward_model.ProprioPredicate)."""
    train_metrics_frames: int = 2000
    """Training-split frames (a seeded sample) scored for the card's train row."""
    seed: int = 0
    threads: int = 1
    """torch CPU threads."""
    device: str = "cpu"
    """cpu, cuda[:N] or auto."""

    def validate(self) -> None:
        require(0.0 < self.val_fraction < 1.0, "val_fraction", self.val_fraction, "must be in (0, 1)")
        require(self.min_episodes >= 1, "min_episodes", self.min_episodes, "must be >= 1")
        require(0.0 < self.target_precision <= 1.0, "target_precision", self.target_precision, "must be in (0, 1]")
        require(0.0 <= self.precision_confidence < 1.0, "precision_confidence", self.precision_confidence,
                "must be in [0, 1)")
        require(0.0 <= self.min_threshold < 1.0, "min_threshold", self.min_threshold, "must be in [0, 1)")
        for name in ("batch_size", "max_steps", "eval_every", "patience", "gate_k", "threads"):
            require(getattr(self, name) >= 1, name, getattr(self, name), "must be >= 1")
        require(self.lr > 0 and math.isfinite(self.lr), "lr", self.lr, "must be finite and > 0")
        require(self.shift_pad is None or self.shift_pad >= 0, "shift_pad", self.shift_pad, "must be >= 0")
        require(0.0 <= self.jitter < 0.5, "jitter", self.jitter, "must be in [0, 0.5)")


def color_jitter(images: torch.Tensor, strength: float, generator: torch.Generator) -> torch.Tensor:
    """Mild photometric jitter of uint8 (B, H, W, 3) images, per image: contrast x(1 +- s) about the image mean,
    brightness +- s (of full scale), per-channel gain x(1 +- s/2); rounded back to uint8."""
    if strength <= 0:
        return images
    b = images.shape[0]
    x = images.float()

    def u(*shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=generator) * 2.0 - 1.0

    mean = x.mean(dim=(1, 2, 3), keepdim=True)
    x = (x - mean) * (1.0 + strength * u(b, 1, 1, 1)) + mean
    x = x * (1.0 + 0.5 * strength * u(b, 1, 1, 3)) + 255.0 * strength * u(b, 1, 1, 1)
    return x.round_().clamp_(0, 255).to(torch.uint8)


def augment(images: dict[str, torch.Tensor], pad: int, jitter: float, generator: torch.Generator,
            ) -> dict[str, torch.Tensor]:
    """Random shift then colour jitter, independently per camera and sample."""
    return {cam: color_jitter(random_shift(img, pad, generator), jitter, generator) for cam, img in images.items()}


@dataclasses.dataclass
class TrainResult:
    """What `train_classifier` returns besides the files it writes."""

    card: ClassifierCard
    model: RewardClassifier
    data: LabelledFrames
    train_episodes: list[int]
    val_episodes: list[int]
    val_probs: np.ndarray
    history: list[dict[str, float]]


def _weighted_bce(logits: torch.Tensor, y: torch.Tensor, pos_weight: float) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(logits, y, pos_weight=torch.tensor(pos_weight, device=logits.device))


def _resolve_predicate(spec: str, task: str) -> ProprioPredicate:
    if spec == "auto":
        return default_predicate(task)
    if spec in ("none", ""):
        return ProprioPredicate(())
    return ProprioPredicate.parse(spec)


def prepare_out_dir(out: Path) -> None:
    """Refuse to overwrite: `out` must not exist or be empty."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out}: already exists and is not empty; choose another directory (a classifier "
                          f"is never overwritten)")


@dataclasses.dataclass(frozen=True)
class Split:
    """The episode split of the labels: episode ids, frame indices, and what the loss and augmentation use."""

    train_episodes: list[int]
    val_episodes: list[int]
    train_idx: np.ndarray
    val_idx: np.ndarray
    pos_weight: float
    """Positive-class weight of the loss (negatives / positives of the training split; 1 without weighting)."""
    pad: int
    """Random-shift padding in pixels."""


@dataclasses.dataclass
class Fit:
    """What the training loop leaves: steps run, the best validation loss and its step, the validation history."""

    steps: int
    best_step: int
    best_loss: float
    history: list[dict[str, float]]
    seconds: float


def load_training_labels(cfg: TrainClassifierConfig, label_dirs: Sequence[str | os.PathLike[str]],
                         ) -> tuple[LabelledFrames, str, ProprioPredicate]:
    """The labelled frames, their (most common) task and the run-time predicate for the card (checked against the
    labels' state)."""
    data = load_labels(label_dirs, cfg.cameras or None)
    tasks = [e.task for e in data.episodes]
    task = max(set(tasks), key=tasks.count)
    predicate = _resolve_predicate(cfg.predicate, task)
    if data.state is not None:
        predicate.check_dim(data.state.shape[1], where=f"--predicate for the labels' state ({data.state.shape[1]} "
                                                         f"values)")
    return data, task, predicate


def split_labels(data: LabelledFrames, cfg: TrainClassifierConfig) -> Split:
    """Split by episode (stratified); ConfigError when the training split lacks a class."""
    train_eps, val_eps = split_by_episode(data, cfg.val_fraction, cfg.min_episodes, cfg.seed)
    tr_idx, va_idx = data.frames_of(train_eps), data.frames_of(val_eps)
    n_pos = int(data.labels[tr_idx].sum())
    n_neg = len(tr_idx) - n_pos
    if n_pos == 0 or n_neg == 0:
        raise ConfigError(f"--labels {' '.join(data.directories)}: the training split has a single class "
                          f"({n_pos} success / {n_neg} failure frames); record more episodes of both kinds")
    h, _ = data.image_size
    pad = cfg.shift_pad if cfg.shift_pad is not None else max(1, round(4 * h / 128))
    return Split(train_eps, val_eps, tr_idx, va_idx, n_neg / n_pos if cfg.class_weighting else 1.0, pad)


def fit_classifier(model: RewardClassifier, data: LabelledFrames, split: Split, cfg: TrainClassifierConfig,
                   device: torch.device, rng: np.random.Generator, log: Callable[[str], None]) -> Fit:
    """Adam on augmented minibatches; the validation loss every `eval_every` steps; the best weights kept and
    loaded back; stops after `patience` validations without improvement (or at `max_steps`)."""
    opt = torch.optim.Adam(model.trainable_parameters(), lr=cfg.lr)
    gen = torch.Generator().manual_seed(cfg.seed)
    y_all, tr_idx, va_idx = data.labels, split.train_idx, split.val_idx
    val_images = data.subset_images(va_idx)
    val_y = torch.from_numpy(y_all[va_idx].astype(np.float32))
    best_loss, best_step, bad = math.inf, 0, 0
    best_state = copy.deepcopy(model.state_dict())
    history: list[dict[str, float]] = []
    order, cursor = rng.permutation(tr_idx), 0
    losses: list[float] = []
    t_train = time.perf_counter()
    model.train()
    step = 0
    for step in range(1, cfg.max_steps + 1):
        if cursor + cfg.batch_size > len(order):
            order, cursor = rng.permutation(tr_idx), 0
        idx = np.sort(order[cursor:cursor + cfg.batch_size])
        cursor += cfg.batch_size
        batch = {cam: torch.from_numpy(arr[idx]) for cam, arr in data.images.items()}
        batch = {cam: img.to(device) for cam, img in augment(batch, split.pad, cfg.jitter, gen).items()}
        y = torch.from_numpy(y_all[idx].astype(np.float32)).to(device)
        loss = _weighted_bce(model(batch), y, split.pos_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % cfg.eval_every != 0 and step != cfg.max_steps:
            continue
        vlogits = model.predict_logits(val_images, device=device)
        vloss = float(_weighted_bce(torch.from_numpy(vlogits).float(), val_y, split.pos_weight))
        auc = roc_auc(vlogits, y_all[va_idx])
        row = {"step": step, "train_loss": float(np.mean(losses)), "val_loss": vloss, "val_roc_auc": auc,
               "seconds": time.perf_counter() - t_train}
        history.append(row)
        losses = []
        improved = vloss < best_loss - 1e-4
        if improved:
            best_loss, best_step, bad = vloss, step, 0
            best_state = copy.deepcopy(model.state_dict())
        else:
            bad += 1
        log(f"[train-classifier] step {step}: train loss {row['train_loss']:.4f}  val loss {vloss:.4f}  "
            f"val ROC-AUC {auc:.4f}  {row['seconds']:.0f}s{'  (best)' if improved else ''}")
        if bad >= cfg.patience:
            log(f"[train-classifier] early stop: no better validation loss for {cfg.patience} evaluations")
            break
    seconds = time.perf_counter() - t_train
    model.load_state_dict(best_state)
    return Fit(step, best_step, best_loss, history, seconds)


def choose_threshold(val_probs: np.ndarray, val_y: np.ndarray, cfg: TrainClassifierConfig,
                     log: Callable[[str], None]) -> tuple[ThresholdChoice, float]:
    """The decision threshold for `target_precision` on the validation split, raised to `min_threshold`; also the
    threshold the precision rule alone gave. Logs when the rule held only as a point estimate or not at all."""
    choice = threshold_for_precision(val_probs, val_y, cfg.target_precision, cfg.precision_confidence)
    if choice.rule == "point" and cfg.precision_confidence > 0:
        log(f"[train-classifier] note: too few validation positives for precision {cfg.target_precision} at "
            f"{cfg.precision_confidence:.0%} confidence (lower bound {choice.precision_lower_bound:.3f}); the "
            f"threshold meets it as a point estimate only. More label episodes make it believable")
    if not choice.met:
        log(f"[train-classifier] warning: no threshold reaches precision {cfg.target_precision} on the validation "
            f"split; using the most precise one ({choice.precision:.3f} at {choice.threshold:.3f})")
    rule_threshold = choice.threshold
    choice = floor_threshold(choice, cfg.min_threshold)
    if choice.threshold != rule_threshold:
        log(f"[train-classifier] the precision rule allowed threshold {rule_threshold:.4f}; raised to the floor "
            f"{cfg.min_threshold} (min_threshold)")
    return choice, rule_threshold


def train_classifier(cfg: TrainClassifierConfig, label_dirs: Sequence[str | os.PathLike[str]], out: Path,
                     log: Callable[[str], None] = print) -> TrainResult:
    """Load labels, split by episode, train with early stopping, pick the threshold, write `out` (model +
    card); see the module docstring."""
    prepare_out_dir(out)
    t_start = time.perf_counter()
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    device = resolve_device(cfg.device)
    data, task, predicate = load_training_labels(cfg, label_dirs)
    split = split_labels(data, cfg)
    y_all, tr_idx, va_idx = data.labels, split.train_idx, split.val_idx
    h, w = data.image_size
    log(f"[train-classifier] {len(data)} frames from {len(data.episodes)} episodes ({int(y_all.sum())} success); "
        f"cameras {data.cameras} at {h}x{w}; split by episode: {len(split.train_episodes)} train ({len(tr_idx)} "
        f"frames, {int(y_all[tr_idx].sum())} success) / {len(split.val_episodes)} validation ({len(va_idx)} frames, "
        f"{int(y_all[va_idx].sum())} success)")
    model = RewardClassifier({cam: (h, w, 3) for cam in data.cameras}, cfg.model).to(device)
    rng = np.random.default_rng(cfg.seed)
    fit = fit_classifier(model, data, split, cfg, device, rng, log)
    with torch.no_grad():
        model.out.bias.sub_(prior_correction(split.pos_weight))
    model.eval()
    val_probs = model.predict_proba(data.subset_images(va_idx), device=device)
    choice, rule_threshold = choose_threshold(val_probs, y_all[va_idx], cfg, log)
    sample = np.sort(rng.choice(tr_idx, size=min(len(tr_idx), cfg.train_metrics_frames), replace=False))
    train_probs = model.predict_proba(data.subset_images(sample), device=device)
    metrics = {"validation": binary_metrics(val_probs, y_all[va_idx], choice.threshold),
               "train": binary_metrics(train_probs, y_all[sample], choice.threshold)}
    card = ClassifierCard(
        task=task, cameras=data.cameras, image_size=(h, w), model=cfg.model.to_dict(),
        threshold=choice.threshold, target_precision=cfg.target_precision,
        gate={"k": cfg.gate_k, "predicate": list(predicate.conditions)},
        metrics={**metrics, "threshold_met_target": choice.met, "threshold_rule": choice.rule,
                 "threshold_by_rule": rule_threshold, "min_threshold": cfg.min_threshold,
                 "precision_lower_bound": choice.precision_lower_bound,
                 "precision_confidence": cfg.precision_confidence,
                 "gate_by_k_validation": gate_table(data, va_idx, val_probs, choice.threshold, predicate)},
        calibration=calibration_table(val_probs, y_all[va_idx]),
        training={"steps": fit.steps, "best_step": fit.best_step, "best_val_loss": fit.best_loss,
                  "seconds": fit.seconds, "total_seconds": time.perf_counter() - t_start, "threads": cfg.threads,
                  "device": str(device), "pos_weight": split.pos_weight,
                  "prior_correction": prior_correction(split.pos_weight), "shift_pad": split.pad,
                  "jitter": cfg.jitter, "batch_size": cfg.batch_size, "lr": cfg.lr, "seed": cfg.seed,
                  "val_fraction": cfg.val_fraction, "history": fit.history,
                  "train_episodes": [data.episodes[e].path for e in split.train_episodes],
                  "val_episodes": [data.episodes[e].path for e in split.val_episodes]},
        label_sources=data.sources(),
    )
    save_classifier(out, model, card)
    log(report_text(card))
    log(f"[train-classifier] wrote {out} (model.safetensors + card.json); {fit.steps} steps in {fit.seconds:.0f}s "
        f"(best at step {fit.best_step})")
    return TrainResult(card, model, data, split.train_episodes, split.val_episodes, val_probs, fit.history)


def gate_table(data: LabelledFrames, idx: np.ndarray, probs: np.ndarray, threshold: float,
               predicate: ProprioPredicate, ks: Sequence[int] = (1, 2, 3, 4, 5)) -> list[dict[str, Any]]:
    """`gate_stats` for each k over the episodes of the frames `idx` (probs aligned with idx), with the proprio
    predicate applied per frame when the labels have a state and the predicate has conditions (frames without a
    state, NaN rows from audit-labels files, are not held back: the predicate is unknown there)."""
    ep_ids = data.episode[idx]
    eps = list(dict.fromkeys(ep_ids.tolist()))
    labels = data.labels[idx]
    allowed = None
    if data.state is not None and predicate.conditions:
        st = data.state[idx]
        ok = predicate.evaluate(st) | np.isnan(st).any(axis=1)
        allowed = [ok[ep_ids == e] for e in eps]
    per_p = [probs[ep_ids == e] for e in eps]
    per_y = [labels[ep_ids == e] for e in eps]
    return [gate_stats(per_p, per_y, threshold, k, allowed) for k in ks]


def format_gate_table(rows: Sequence[dict[str, Any]]) -> str:
    """The k-gate replay (gate_stats rows) as fixed-width text."""
    head = f"{'k':>2} {'episodes':>8} {'success eps':>11} {'fired':>6} {'false fires':>11} {'missed':>6} " \
           f"{'delay (frames)':>14}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['k']:>2} {r['episodes']:>8} {r['success_episodes']:>11} {r['fired']:>6} "
                     f"{r['false_fires']:>11} {r['missed']:>6} {r['delay_frames_mean']:>14.2f}")
    return "\n".join(lines)


def report_text(card: ClassifierCard, rows: dict[str, Any] | None = None, calibration: list[Any] | None = None,
                gate_rows: list[dict[str, Any]] | None = None) -> str:
    """The console report: metrics table at the card's threshold, calibration, the k-gate replay."""
    m = rows if rows is not None else {k: v for k, v in card.metrics.items() if k in ("validation", "train")}
    calib = calibration if calibration is not None else card.calibration
    gates = gate_rows if gate_rows is not None else card.metrics.get("gate_by_k_validation", [])
    pred = card.gate.get("predicate") or ["none"]
    parts = [f"threshold {card.threshold:.4f} (chosen on validation for precision >= {card.target_precision}); "
             f"run-time gate: k={card.gate['k']} consecutive frames, predicate {' and '.join(pred)}",
             format_metrics_table(m), "", "calibration (validation)" if calibration is None else "calibration",
             format_calibration_table(calib)]
    if gates:
        parts += ["", "k-consecutive-frames gate replayed over the episodes (with the predicate)",
                  format_gate_table(gates)]
    return "\n".join(parts)

