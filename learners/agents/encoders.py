"""Image encoders (DrQ path), the random-shift augmentation and the observation encoder shared by actor and critic.

- `random_shift(images, pad, generator)`: DrQ's augmentation on uint8 (B, H, W, C) images: edge-pad by `pad`
  pixels and crop back to H x W at a random offset per image, done as one clamped gather (no padded copy).
- Pretrained backbones (learners.agents.backbones, re-exported here): `ResNet10` (SERL's GroupNorm ResNet-10) and
  `ResNet18` (torchvision's names, BatchNorm as a fixed affine map); their weights load from a LOCAL safetensors
  file (`load_backbone_weights`), never downloaded; names, shapes and the file's architecture are validated.
- `ConvBackbone`: a small conv net trained from scratch (SERL's SmallEncoder: 3x3 convs, stride 2, valid).
- `CameraEncoder`: backbone -> spatial learned embeddings (8) -> dropout 0.1 -> dense 256 -> LayerNorm -> tanh;
  with AgentConfig.encoder_features 'targets' the frozen target head of a `robot-rl pretrain-encoder` file instead
  (its standardised predictions: TCP now, at the next gripper event, and the second relative to the first), with
  'both' the two concatenated.
- `ObservationEncoder`: one CameraEncoder per camera plus a proprio branch (dense 64 -> LayerNorm -> tanh);
  with no cameras it passes the state vector through unchanged (state-based SAC/RLPD).

Usage::

    enc = ObservationEncoder(ObsLayout.from_spec(spec), cfg)       # loads cfg.encoder_weights (resnet10/18)
    feats = enc(images, state)                                      # (B, enc.out_dim)
    save_backbone_weights(ResNet10(), "resnet10.safetensors")       # the file format load_backbone_weights reads
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import cast

import torch
from torch import nn

from learners.agents.backbones import (
    ResNet10,
    ResNet18,
    backbone_keys,
    build_backbone,
    load_backbone_weights,
    load_target_head,
    save_backbone_weights,
    to_float_nchw,
    weights_architecture,
)
from learners.agents.config import AgentConfig
from learners.agents.obs import ObsLayout
from robot_rl.errors import ConfigError, ShapeError


def random_shift(images: torch.Tensor, pad: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Random shift of (B, H, W, C) images by up to `pad` pixels per axis, with edge padding (any dtype).

    Equivalent to padding each image with its border pixels (mode 'edge'/'replicate') by `pad` and cropping an
    H x W window at a uniformly random offset in [0, 2 pad], independently per image.
    """
    if pad <= 0:
        return images
    if images.dim() != 4:
        raise ShapeError(f"random_shift expects (B, H, W, C) images, got shape {tuple(images.shape)}")
    b, h, w, _ = images.shape
    dev = images.device
    shifts = torch.randint(0, 2 * pad + 1, (b, 2), generator=generator, device=generator.device
                           if generator is not None else dev).to(dev) - pad
    rows = (torch.arange(h, device=dev).unsqueeze(0) + shifts[:, :1]).clamp_(0, h - 1)  # (B, H)
    cols = (torch.arange(w, device=dev).unsqueeze(0) + shifts[:, 1:]).clamp_(0, w - 1)  # (B, W)
    bidx = torch.arange(b, device=dev)[:, None, None]
    return images[bidx, rows[:, :, None], cols[:, None, :]]


def resnet10_keys() -> dict[str, tuple[int, ...]]:
    """The parameter names and shapes a ResNet-10 (3-channel) weights file must contain."""
    return backbone_keys("resnet10")


class ConvBackbone(nn.Module):
    """Small conv net from scratch: 3x3 convs, valid padding, ReLU (SERL's SmallEncoder: every stride 2).

    `strides`: one per layer (None: 2 for every layer). A stride-1 first layer keeps one-pixel detail that a
    stride-2 one samples away (the reward classifier's default, `learners.rewards.classifier`); it costs about 4x
    the compute of every layer after it.
    """

    def __init__(self, in_channels: int, channels: tuple[int, ...], strides: tuple[int, ...] | None = None) -> None:
        super().__init__()
        self.strides = tuple(strides) if strides is not None else (2,) * len(channels)
        if len(self.strides) != len(channels) or any(s < 1 for s in self.strides):
            raise ConfigError(f"conv strides {self.strides}: need one stride >= 1 per layer of {channels}")
        layers: list[nn.Module] = []
        prev = in_channels
        for c, stride in zip(channels, self.strides, strict=True):
            layers += [nn.Conv2d(prev, c, 3, stride, 0), nn.ReLU()]
            prev = c
        self.net = nn.Sequential(*layers)
        self.out_channels = prev
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(to_float_nchw(images, None, None) - 0.5)

    def output_hw(self, h: int, w: int) -> tuple[int, int]:
        for stride in self.strides:
            h, w = (h - 3) // stride + 1, (w - 3) // stride + 1
        return h, w


class SpatialLearnedEmbeddings(nn.Module):
    """out[b, c, f] = sum_{h, w} x[b, c, h, w] * kernel[c, h, w, f], flattened to (B, C * F) (SERL)."""

    def __init__(self, channels: int, height: int, width: int, num_features: int) -> None:
        super().__init__()
        std = 1.0 / math.sqrt(channels * height * width)  # lecun normal over the summed axes
        self.kernel = nn.Parameter(torch.randn(channels, height, width, num_features) * std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.einsum("bchw,chwf->bcf", x, self.kernel).flatten(1)


class CameraEncoder(nn.Module):
    """backbone -> spatial learned embeddings -> dropout -> dense -> LayerNorm -> tanh, for one camera."""

    def __init__(self, backbone: nn.Module, in_hw: tuple[int, int], cfg: AgentConfig, frozen: bool,
                 targets: nn.Module | None = None) -> None:
        super().__init__()
        self.backbone = backbone
        self.frozen = frozen
        out_hw = backbone.output_hw(*in_hw)  # type: ignore[operator]
        if min(out_hw) < 1:
            raise ShapeError(f"images of size {in_hw} are too small for the {type(backbone).__name__} backbone")
        c = int(backbone.out_channels)  # type: ignore[arg-type]
        self.feature_shape = (c, out_hw[0], out_hw[1])
        """The backbone's output shape per frame (C, h, w): what the head reads (and the feature cache stores)."""
        self.out_dim = 0
        self.spatial: SpatialLearnedEmbeddings | None = None
        if cfg.encoder_features != "targets":
            self.spatial = SpatialLearnedEmbeddings(c, out_hw[0], out_hw[1], cfg.num_spatial_features)
            self.dropout = nn.Dropout(cfg.encoder_dropout)
            self.dense = nn.Linear(c * cfg.num_spatial_features, cfg.image_latent_dim)
            nn.init.xavier_uniform_(self.dense.weight)
            nn.init.zeros_(self.dense.bias)
            self.norm = nn.LayerNorm(cfg.image_latent_dim)
            self.out_dim = cfg.image_latent_dim
        # the frozen target head (encoder_features 'targets' / 'both'): its predictions, never trained
        self.targets = targets
        if targets is not None:
            targets.requires_grad_(False)
            self.out_dim += int(targets[-1].out_features)  # type: ignore[index]
        # frozen backbones only: bf16 autocast for their forward (cfg.backbone_precision), channels-last weights
        self.bf16 = frozen and cfg.backbone_precision == "bf16"
        if frozen:
            self.backbone.requires_grad_(False)
            if cfg.channels_last:
                self.backbone.to(memory_format=torch.channels_last)  # type: ignore[call-overload]

    def backbone_features(self, images: torch.Tensor) -> torch.Tensor:
        """The backbone's spatial features; without autograd (and in eval mode) when the backbone is frozen, then
        under bf16 autocast with cfg.backbone_precision='bf16' (the output cast back to float32)."""
        if self.frozen:
            with torch.no_grad():
                was = self.backbone.training
                self.backbone.eval()
                if self.bf16:
                    with torch.autocast(device_type=images.device.type, dtype=torch.bfloat16):
                        out = self.backbone(images).float()
                else:
                    out = self.backbone(images)
                self.backbone.train(was)
            return out
        return self.backbone(images)

    @property
    def prediction_dim(self) -> int:
        """Outputs of the frozen target head (0 without one)."""
        return int(self.targets[-1].out_features) if self.targets is not None else 0  # type: ignore[index]

    def target_predictions(self, feats: torch.Tensor) -> torch.Tensor | None:
        """The frozen target head's predictions (B, prediction_dim) from the backbone's output (B, C, h, w), without
        autograd; None without a target head. A function of frozen weights only: computed once per batch (or per
        cached frame: learners.replay.feature_cache) and handed to `head`."""
        if self.targets is None:
            return None
        with torch.no_grad():  # no mode-dependent layer in a target head: train / eval mode is moot
            return self.targets(feats.float())

    def head(self, feats: torch.Tensor, predictions: torch.Tensor | None = None) -> torch.Tensor:
        """(B, out_dim) features from the backbone's output (B, C, h, w); `predictions`: the target head's
        (B, prediction_dim) when already computed (`target_predictions`), else the head runs here."""
        parts: list[torch.Tensor] = []
        if self.spatial is not None:
            parts.append(torch.tanh(self.norm(self.dense(self.dropout(self.spatial(feats))))))
        if self.targets is not None:
            pred = predictions if predictions is not None else self.target_predictions(feats)
            assert pred is not None
            parts.append(pred)
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone_features(images))


def pretrained_backbone(cfg: AgentConfig, in_channels: int) -> nn.Module:
    """The ResNet backbone `cfg.encoder` names, loaded from cfg.encoder_weights (a file naming another
    architecture is a ShapeError); ConfigError for a frozen backbone without weights (it would never learn)."""
    backbone = build_backbone(cfg.encoder, in_channels)
    if cfg.encoder_weights is not None:
        load_backbone_weights(backbone, cfg.encoder_weights)
    elif cfg.freeze_encoder:
        raise ConfigError(f"encoder={cfg.encoder!r} with freeze_encoder=True needs encoder_weights (a local "
                          "safetensors file); a frozen random ResNet would never learn. Set encoder_weights, "
                          "freeze_encoder=False, or encoder='conv'")
    return backbone


def _module_key(name: str) -> str:
    return name.replace("/", "__").replace(".", "_")


class StateNormalizer(nn.Module):
    """(state - mean) / std per element, clipped to +-clip; mean and std are buffers (identity until `set()`), so
    they travel with the policy's weights to actors and checkpoints (AgentConfig.obs_norm)."""

    mean: torch.Tensor
    inv_std: torch.Tensor

    def __init__(self, dim: int, clip: float = 10.0) -> None:
        super().__init__()
        self.clip = clip
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("inv_std", torch.ones(dim))

    def set(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        """Use these statistics (D,); an element that did not vary (std < 1e-6) is only centred, not scaled."""
        with torch.no_grad():
            std = std.to(self.inv_std)
            self.mean.copy_(mean.to(self.mean))
            self.inv_std.copy_(torch.where(std < 1e-6, torch.ones_like(std), 1.0 / std.clamp_min(1e-6)))

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return ((state - self.mean) * self.inv_std).clamp(-self.clip, self.clip)


class ObservationEncoder(nn.Module):
    """Per-camera encoders + proprio branch -> one feature vector; identity on the state without cameras."""

    def __init__(self, layout: ObsLayout, cfg: AgentConfig) -> None:
        super().__init__()
        self.layout = layout
        self.cameras = nn.ModuleDict()
        self.camera_keys: dict[str, str] = {}
        for cam in layout.cameras:
            h, w, c = cam.shape
            if cfg.encoder in ("resnet10", "resnet18"):
                backbone: nn.Module = pretrained_backbone(cfg, c)
                frozen = cfg.freeze_encoder
            else:
                backbone = ConvBackbone(c, cfg.conv_channels)
                frozen = False
            key = _module_key(cam.name)
            self.camera_keys[cam.name] = key
            targets = None
            if cfg.encoder_features != "spatial":  # AgentConfig asked for a frozen ResNet, pretrained_backbone
                assert cfg.encoder_weights is not None  # for its weights file (each refuses otherwise)
                oh, ow = backbone.output_hw(h, w)  # type: ignore[operator]
                targets = load_target_head(cfg.encoder_weights, cam.name,
                                           int(backbone.out_channels) * oh * ow)  # type: ignore[arg-type]
            self.cameras[key] = CameraEncoder(backbone, (h, w), cfg, frozen, targets)
        self.proprio: nn.Module | None = None
        self.state_norm: StateNormalizer | None = (StateNormalizer(layout.state_dim)
                                                   if cfg.obs_norm and layout.state_dim > 0 else None)
        out = 0
        if layout.state_dim > 0:
            if layout.cameras and cfg.proprio_latent_dim > 0:
                lin = nn.Linear(layout.state_dim, cfg.proprio_latent_dim)
                nn.init.xavier_uniform_(lin.weight)
                nn.init.zeros_(lin.bias)
                self.proprio = nn.Sequential(lin, nn.LayerNorm(cfg.proprio_latent_dim), nn.Tanh())
                out += cfg.proprio_latent_dim
            else:
                out += layout.state_dim
        out += sum(enc.out_dim for enc in self.camera_encoders().values())
        self.out_dim = out

    def camera_encoders(self) -> dict[str, CameraEncoder]:
        """{camera name (slash path): its CameraEncoder}, in spec order."""
        return {name: cast(CameraEncoder, self.cameras[key]) for name, key in self.camera_keys.items()}

    @property
    def has_frozen_backbone(self) -> bool:
        return any(enc.frozen for enc in self.camera_encoders().values())

    @property
    def all_backbones_frozen(self) -> bool:
        encs = self.camera_encoders()
        return bool(encs) and all(enc.frozen for enc in encs.values())

    def frozen_names(self) -> set[str]:
        """state_dict names of the frozen backbone and target-head weights (never trained, never sent, never
        checkpointed: actors and resumed runs load them from encoder_weights)."""
        out: set[str] = set()
        for name, enc in self.camera_encoders().items():
            key = self.camera_keys[name]
            if enc.frozen:
                out |= {f"cameras.{key}.backbone.{n}" for n in enc.backbone.state_dict()}
            if enc.targets is not None:
                out |= {f"cameras.{key}.targets.{n}" for n in enc.targets.state_dict()}
        return out

    def backbone_features(self, images: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {name: enc.backbone_features(images[name]) for name, enc in self.camera_encoders().items()}

    def prediction_dims(self) -> dict[str, int]:
        """{camera: outputs of its frozen target head}, for the cameras that have one."""
        return {name: enc.prediction_dim for name, enc in self.camera_encoders().items() if enc.targets is not None}

    def target_predictions(self, backbone_feats: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """{camera: (B, P)} the frozen target heads' predictions from backbone features (cameras without a target
        head left out; empty when none has one)."""
        out = {}
        for name, enc in self.camera_encoders().items():
            pred = enc.target_predictions(backbone_feats[name])  # None without a target head
            if pred is not None:
                out[name] = pred
        return out

    def head(self, backbone_feats: Mapping[str, torch.Tensor], state: torch.Tensor | None,
             predictions: Mapping[str, torch.Tensor] | None = None) -> torch.Tensor:
        """Features from precomputed backbone features (lets a frozen backbone run once per batch) and, when given,
        the target heads' precomputed predictions ({camera: (B, P)}: `target_predictions`)."""
        preds = predictions or {}
        parts = [enc.head(backbone_feats[name], preds.get(name)) for name, enc in self.camera_encoders().items()]
        if state is not None and self.layout.state_dim > 0:
            if self.state_norm is not None:
                state = self.state_norm(state)
            parts.insert(0, self.proprio(state) if self.proprio is not None else state)
        if not parts:
            raise ShapeError("the observation has neither cameras nor state entries")
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)

    def forward(self, images: Mapping[str, torch.Tensor], state: torch.Tensor | None) -> torch.Tensor:
        return self.head(self.backbone_features(images), state)

    def clone_for_target(self) -> ObservationEncoder:
        """A deep copy that shares (does not copy) frozen backbones: the target encoder of the critic."""
        memo: dict[int, object] = {}
        for enc in self.camera_encoders().values():
            if enc.frozen:
                memo[id(enc.backbone)] = enc.backbone
            if enc.targets is not None:
                memo[id(enc.targets)] = enc.targets
        clone = copy.deepcopy(self, memo)
        clone.requires_grad_(False)
        return clone

    def trainable_parameters(self) -> list[nn.Parameter]:
        """Parameters that train (everything but frozen backbones), in a fixed order."""
        frozen = {id(p) for enc in self.camera_encoders().values() if enc.frozen for p in enc.backbone.parameters()}
        frozen |= {id(p) for enc in self.camera_encoders().values() if enc.targets is not None
                   for p in enc.targets.parameters()}
        return [p for p in self.parameters() if id(p) not in frozen]


__all__ = ["CameraEncoder", "ConvBackbone", "ObservationEncoder", "ResNet10", "ResNet18", "SpatialLearnedEmbeddings",
           "StateNormalizer", "load_backbone_weights", "pretrained_backbone", "random_shift", "resnet10_keys",
           "save_backbone_weights", "weights_architecture"]
