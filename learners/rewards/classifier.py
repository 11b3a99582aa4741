"""The reward classifier: per-camera image encoders + HIL-SERL's head, its card, and saving / loading it.

Network (HIL-SERL's reward classifier; the per-camera encoder is `learners.agents.encoders.CameraEncoder`, the same code
as the agent's): per camera a backbone (the small conv net trained from scratch, or the frozen ResNet-10 from a
local safetensors file) -> spatial learned embeddings -> dropout -> dense `image_latent_dim` -> LayerNorm ->
tanh; the cameras' features concatenated -> dense `hidden_dim` (256) -> dropout -> LayerNorm -> ReLU -> one
logit. Input: uint8 (B, H, W, 3) images per camera, keyed by their observation path ("images/front").

A classifier directory holds `model.safetensors` (every weight, frozen backbone included, so the directory is
self-contained) and `card.json`: format / version, task, cameras, image size, the model config, the decision
threshold and the precision it was chosen for, the run-time gate (k consecutive frames, proprio predicate),
metrics and calibration on the validation split, training details and the label sources. No pickle anywhere.

Usage::

    model = RewardClassifier({"images/front": (64, 64, 3)}, ClassifierModelConfig(encoder="conv"))
    save_classifier("runs/cls", model, card)
    loaded = load_classifier("runs/cls")              # ConfigError naming the file for a missing card/weights
    loaded.check_cameras(shapes, where="labels/episode_000003.npz")
    probs = loaded.predict_proba({"images/front": frames_uint8})      # (N,) float64 in [0, 1]
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from learners.agents.backbones import build_backbone, weights_architecture
from learners.agents.config import AgentConfig
from learners.agents.encoders import CameraEncoder, ConvBackbone, load_backbone_weights
from robot_rl.config import Config, require
from robot_rl.errors import ConfigError, ShapeError

CARD_FILE = "card.json"
WEIGHTS_FILE = "model.safetensors"
CARD_FORMAT = "robot-rl-reward-classifier"
CARD_VERSION = 1
CLASSIFIER_ENCODERS = ("conv", "resnet10", "resnet18")


@dataclasses.dataclass(frozen=True)
class ClassifierModelConfig(Config):
    """The classifier network (saved in the card; the same fields rebuild it)."""

    encoder: str = "conv"
    """Per-camera backbone: 'conv' (small conv net trained from scratch), 'resnet10' (frozen ResNet-10 from
    `encoder_weights`, HIL-SERL's choice) or 'resnet18' (frozen torchvision ResNet-18 from `encoder_weights`)."""
    encoder_weights: str | None = None
    """Local safetensors file with the ResNet weights (encoder='resnet10' / 'resnet18'; never downloaded)."""
    conv_channels: tuple[int, ...] = (16, 32, 64, 64)
    """Channels of the conv backbone's 3x3 layers."""
    conv_strides: tuple[int, ...] | None = None
    """The conv backbone's stride per layer; None: 1 for the first layer, 2 after (`strides`). A success that shows
    as one pixel row (a cube's bottom edge at a lift line) survives a stride-1 first layer and is sampled away by a
    stride-2 one (SERL's small encoder, all 2s; what cards written before this field had, and still load with)."""
    num_spatial_features: int = 8
    """Spatial learned embeddings per backbone channel."""
    image_latent_dim: int = 64
    """Per-camera feature size (dense -> LayerNorm -> tanh)."""
    encoder_dropout: float = 0.1
    """Dropout before each camera's dense layer (training only)."""
    hidden_dim: int = 256
    """The head's hidden layer (HIL-SERL: 256)."""
    dropout: float = 0.1
    """Dropout in the head (HIL-SERL: 0.1; training only)."""

    def validate(self) -> None:
        require(self.encoder in CLASSIFIER_ENCODERS, "encoder", self.encoder, f"must be one of {CLASSIFIER_ENCODERS}")
        require(self.encoder == "conv" or self.encoder_weights is not None, "encoder_weights",
                self.encoder_weights, f"encoder={self.encoder!r} needs a local safetensors file (a frozen random "
                "ResNet would never learn); or use encoder='conv'")
        require(len(self.conv_channels) > 0 and all(c > 0 for c in self.conv_channels), "conv_channels",
                self.conv_channels, "must be a non-empty tuple of positive ints")
        require(self.conv_strides is None or (len(self.conv_strides) == len(self.conv_channels)
                                              and all(s >= 1 for s in self.conv_strides)), "conv_strides",
                self.conv_strides, f"must give one stride >= 1 per conv layer ({len(self.conv_channels)})")
        for name in ("num_spatial_features", "image_latent_dim", "hidden_dim"):
            require(getattr(self, name) >= 1, name, getattr(self, name), "must be >= 1")
        for name in ("encoder_dropout", "dropout"):
            require(0.0 <= getattr(self, name) < 1.0, name, getattr(self, name), "must be in [0, 1)")

    def strides(self) -> tuple[int, ...]:
        """The conv backbone's stride per layer (`conv_strides`, or its default)."""
        if self.conv_strides is not None:
            return tuple(self.conv_strides)
        return (1,) + (2,) * (len(self.conv_channels) - 1)

    def encoder_config(self) -> AgentConfig:
        """The AgentConfig fields `learners.agents.encoders.CameraEncoder` reads."""
        return AgentConfig(encoder=self.encoder, encoder_weights=self.encoder_weights,
                           conv_channels=self.conv_channels, num_spatial_features=self.num_spatial_features,
                           encoder_dropout=self.encoder_dropout, image_latent_dim=self.image_latent_dim)


def classifier_encoder(encoder: str | None, encoder_weights: str | None) -> str:
    """The backbone a classifier command builds: `encoder` when given, else the architecture the weights file
    names (a metadata-less file is a ResNet-10), else 'conv'."""
    if encoder is not None:
        return encoder
    if encoder_weights is None:
        return "conv"
    return weights_architecture(encoder_weights) or "resnet10"


def _module_key(name: str) -> str:
    return name.replace("/", "__").replace(".", "_")


class RewardClassifier(nn.Module):
    """Per-camera encoders + head -> one success logit per frame (see the module docstring).

    cameras: {observation path: (H, W, C)}, in the order the features are concatenated.
    load_backbone: read `cfg.encoder_weights` into the frozen ResNet-10s (False when a saved classifier's full
    weights are about to be loaded anyway).
    """

    def __init__(self, cameras: Mapping[str, tuple[int, int, int]], cfg: ClassifierModelConfig,
                 load_backbone: bool = True) -> None:
        super().__init__()
        if not cameras:
            raise ConfigError("a reward classifier needs at least one camera")
        self.cfg = cfg
        self.camera_shapes = {name: tuple(int(v) for v in shape) for name, shape in cameras.items()}
        self.camera_keys = {name: _module_key(name) for name in cameras}
        enc_cfg = cfg.encoder_config()
        self.encoders = nn.ModuleDict()
        for name, (h, w, c) in self.camera_shapes.items():
            if cfg.encoder != "conv":
                backbone: nn.Module = build_backbone(cfg.encoder, c)
                if load_backbone and cfg.encoder_weights is not None:
                    load_backbone_weights(backbone, cfg.encoder_weights)
                frozen = True
            else:
                backbone = ConvBackbone(c, cfg.conv_channels, cfg.strides())
                frozen = False
            self.encoders[self.camera_keys[name]] = CameraEncoder(backbone, (h, w), enc_cfg, frozen)
        feat = cfg.image_latent_dim * len(self.camera_shapes)
        self.dense = nn.Linear(feat, cfg.hidden_dim)
        self.dropout = nn.Dropout(cfg.dropout)
        self.norm = nn.LayerNorm(cfg.hidden_dim)
        self.out = nn.Linear(cfg.hidden_dim, 1)
        nn.init.xavier_uniform_(self.dense.weight)
        nn.init.zeros_(self.dense.bias)
        nn.init.xavier_uniform_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    @property
    def cameras(self) -> list[str]:
        return list(self.camera_shapes)

    def forward(self, images: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """uint8 (B, H, W, C) per camera -> logits (B,)."""
        feats = [self.encoders[key](images[name]) for name, key in self.camera_keys.items()]
        x = feats[0] if len(feats) == 1 else torch.cat(feats, dim=-1)
        x = torch.relu(self.norm(self.dropout(self.dense(x))))
        return self.out(x).squeeze(-1)

    def trainable_parameters(self) -> list[nn.Parameter]:
        """Everything but frozen backbones."""
        encs = [cast(CameraEncoder, enc) for enc in self.encoders.values()]
        frozen = {id(p) for enc in encs if enc.frozen for p in enc.backbone.parameters()}
        return [p for p in self.parameters() if id(p) not in frozen]

    @torch.no_grad()
    def predict_logits(self, images: Mapping[str, np.ndarray], batch_size: int = 256,
                       device: torch.device | str = "cpu") -> np.ndarray:
        """Eval-mode logits (N,) float64 for uint8 image arrays (N, H, W, C) per camera, in batches."""
        was = self.training
        self.eval()
        try:
            n = len(next(iter(images.values())))
            out = np.empty(n, np.float64)
            for s in range(0, n, batch_size):
                batch = {name: torch.from_numpy(np.ascontiguousarray(images[name][s:s + batch_size])).to(device)
                         for name in self.camera_shapes}
                out[s:s + batch_size] = self(batch).double().cpu().numpy()
            return out
        finally:
            self.train(was)

    def predict_proba(self, images: Mapping[str, np.ndarray], batch_size: int = 256,
                      device: torch.device | str = "cpu") -> np.ndarray:
        """Eval-mode success probabilities (N,) float64 in [0, 1]."""
        return sigmoid(self.predict_logits(images, batch_size, device))


def sigmoid(x: np.ndarray) -> np.ndarray:
    """Numerically safe logistic function."""
    x = np.asarray(x, np.float64)
    return np.exp(-np.logaddexp(0.0, -x))


# -------------------------------------------------------------------------------------------------- the card


@dataclasses.dataclass
class ClassifierCard:
    """What `card.json` holds (see the module docstring); `to_dict` adds format and version."""

    task: str
    cameras: list[str]
    image_size: tuple[int, int]
    """(H, W) of every camera image the classifier takes."""
    model: dict[str, Any]
    """ClassifierModelConfig.to_dict()."""
    threshold: float
    """Decision threshold on the success probability (chosen on the validation split)."""
    target_precision: float
    gate: dict[str, Any]
    """Run-time gate: {"k": consecutive positive frames, "predicate": [proprio conditions, all must hold]}."""
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)
    calibration: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    training: dict[str, Any] = dataclasses.field(default_factory=dict)
    label_sources: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    REQUIRED = ("task", "cameras", "image_size", "model", "threshold", "target_precision", "gate")

    def model_config(self) -> ClassifierModelConfig:
        """The network config; a card without "conv_strides" (written before the field) had stride 2 everywhere."""
        model = dict(self.model)
        if "conv_strides" not in model:
            model["conv_strides"] = [2] * len(model.get("conv_channels", ClassifierModelConfig.conv_channels))
        return ClassifierModelConfig.from_dict(model)

    def to_dict(self) -> dict[str, Any]:
        d = {"format": CARD_FORMAT, "version": CARD_VERSION}
        d.update({f.name: getattr(self, f.name) for f in dataclasses.fields(self)})
        d["image_size"] = list(self.image_size)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = CARD_FILE) -> ClassifierCard:
        """Parse a card; ConfigError naming `where` and the field for anything missing or malformed."""
        if d.get("format") != CARD_FORMAT:
            raise ConfigError(f"{where}: field 'format' is {d.get('format')!r}, expected {CARD_FORMAT!r} (not a "
                              f"reward-classifier card)")
        if d.get("version") != CARD_VERSION:
            raise ConfigError(f"{where}: field 'version' is {d.get('version')!r}; this reader supports "
                              f"{CARD_VERSION}")
        for name in cls.REQUIRED:
            if name not in d:
                raise ConfigError(f"{where}: missing field '{name}'")
        cams = d["cameras"]
        if not isinstance(cams, list) or not cams or not all(isinstance(c, str) for c in cams):
            raise ConfigError(f"{where}: field 'cameras' must be a non-empty list of observation paths, got {cams!r}")
        size = d["image_size"]
        if not (isinstance(size, list | tuple) and len(size) == 2 and all(isinstance(v, int) and v > 0 for v in size)):
            raise ConfigError(f"{where}: field 'image_size' must be [H, W], got {size!r}")
        th = d["threshold"]
        if not isinstance(th, int | float) or not 0.0 <= float(th) <= 1.0:
            raise ConfigError(f"{where}: field 'threshold' must be a probability in [0, 1], got {th!r}")
        gate = d["gate"]
        if not isinstance(gate, dict) or not isinstance(gate.get("k"), int) or gate["k"] < 1 \
                or not isinstance(gate.get("predicate", []), list):
            raise ConfigError(f"{where}: field 'gate' must be {{'k': int >= 1, 'predicate': [...]}}, got {gate!r}")
        if not isinstance(d["model"], dict):
            raise ConfigError(f"{where}: field 'model' must be an object, got {d['model']!r}")
        known = {f.name for f in dataclasses.fields(cls)}
        card = cls(**{k: v for k, v in d.items() if k in known})
        card.image_size = (int(size[0]), int(size[1]))
        card.threshold = float(th)
        try:
            card.model_config()
        except (ConfigError, TypeError) as err:
            raise ConfigError(f"{where}: field 'model' is invalid: {err}") from err
        return card


# -------------------------------------------------------------------------------------------------- save / load


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def save_classifier(directory: str | os.PathLike[str], model: RewardClassifier, card: ClassifierCard) -> Path:
    """Write `model.safetensors` and `card.json` (with the weights' sha256) into `directory` (created);
    returns the card's path. Files are written atomically (temporary file + rename)."""
    from safetensors.torch import save_file

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    weights = d / WEIGHTS_FILE
    tmp = d / f".{WEIGHTS_FILE}.tmp"
    save_file({k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}, str(tmp))
    tmp.replace(weights)
    card.training = {**card.training, "weights_sha256": _sha256(weights)}
    _atomic_write_text(d / CARD_FILE, json.dumps(card.to_dict(), indent=1))
    return d / CARD_FILE


def read_card(directory: str | os.PathLike[str]) -> ClassifierCard:
    """The card of a classifier directory; ConfigError naming the directory or file for anything missing."""
    d = Path(directory)
    if not d.is_dir():
        raise ConfigError(f"{d}: classifier directory does not exist")
    path = d / CARD_FILE
    if not path.is_file():
        raise ConfigError(f"{d}: no {CARD_FILE} (a classifier directory holds {CARD_FILE} + {WEIGHTS_FILE}, "
                          f"written by robot-rl train-classifier)")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"{path}: not a readable JSON card ({type(err).__name__}: {err})") from err
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a JSON object")
    return ClassifierCard.from_dict(data, where=str(path))


@dataclasses.dataclass
class LoadedClassifier:
    """A classifier read from its directory: the model (eval mode, CPU), its card and where it came from."""

    model: RewardClassifier
    card: ClassifierCard
    directory: Path

    @property
    def card_path(self) -> Path:
        return self.directory / CARD_FILE

    def check_cameras(self, shapes: Mapping[str, Sequence[int]], where: str) -> None:
        """ConfigError naming `where` (a file, "the env's observation") unless `shapes` ({observation path:
        (H, W, C)}) has every camera of the card at the card's image size."""
        h, w = self.card.image_size
        missing = [c for c in self.card.cameras if c not in shapes]
        if missing:
            raise ConfigError(f"{where}: no camera {missing[0]!r}; the classifier ({self.card_path}: cameras) needs "
                              f"{self.card.cameras}, found {sorted(shapes)}")
        for cam in self.card.cameras:
            shape = tuple(int(v) for v in shapes[cam])
            if shape[:2] != (h, w) or len(shape) != 3:
                raise ConfigError(f"{where}: camera {cam!r} is {'x'.join(map(str, shape))}, the classifier "
                                  f"({self.card_path}: image_size) expects {h}x{w}x3")

    def predict_proba(self, images: Mapping[str, np.ndarray], batch_size: int = 256) -> np.ndarray:
        return self.model.predict_proba(images, batch_size)


def load_classifier(directory: str | os.PathLike[str]) -> LoadedClassifier:
    """Read a classifier directory (card + safetensors weights) into an eval-mode CPU model.

    ConfigError, naming the file and the field, for: a missing directory, card or weights file, a malformed
    card, weights that do not match the card's model (missing / unexpected / mis-shaped tensors)."""
    from safetensors.torch import load_file

    d = Path(directory)
    card = read_card(d)
    weights = d / WEIGHTS_FILE
    if not weights.is_file():
        raise ConfigError(f"{d}: no {WEIGHTS_FILE} (the classifier's weights) beside {CARD_FILE}")
    h, w = card.image_size
    model = RewardClassifier({c: (h, w, 3) for c in card.cameras}, card.model_config(), load_backbone=False)
    try:
        tensors = load_file(str(weights))
    except Exception as err:  # safetensors raises its own error types for malformed files
        raise ConfigError(f"{weights}: unreadable safetensors file ({type(err).__name__}: {err})") from err
    own = model.state_dict()
    missing = sorted(set(own) - set(tensors))
    unexpected = sorted(set(tensors) - set(own))
    bad = [f"{k}: file {tuple(tensors[k].shape)} vs card {tuple(v.shape)}" for k, v in own.items()
           if k in tensors and tuple(tensors[k].shape) != tuple(v.shape)]
    if missing or unexpected or bad:
        raise ConfigError(f"{weights}: weights do not match the model in {d / CARD_FILE} (cameras, image_size, "
                          f"model): missing {missing[:3]}, unexpected {unexpected[:3]}, mis-shaped {bad[:3]}")
    model.load_state_dict({k: t.to(own[k].dtype) for k, t in tensors.items()})
    model.eval()
    return LoadedClassifier(model, card, d)


def prior_correction(pos_weight: float) -> float:
    """The logit offset that undoes a positive-class loss weight: a classifier trained with BCE weighted by
    `pos_weight` on positives estimates logit(p) + log(pos_weight); subtracting it gives probabilities for the
    data's own class balance."""
    if not (pos_weight > 0 and math.isfinite(pos_weight)):
        raise ShapeError(f"pos_weight={pos_weight} must be finite and > 0")
    return math.log(pos_weight)
