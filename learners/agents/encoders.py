"""Image encoders (DrQ path), the random-shift augmentation and the observation encoder shared by actor and critic.

- `random_shift(images, pad, generator)`: DrQ's augmentation on uint8 (B, H, W, C) images: edge-pad by `pad`
  pixels and crop back to H x W at a random offset per image, done as one clamped gather (no padded copy).
- `ResNet10`: ResNet-v1-10 with GroupNorm (4 groups), SERL's frozen pretrained backbone; its weights load from a
  LOCAL safetensors file (`load_backbone_weights`), never downloaded; names and shapes are validated.
- `ConvBackbone`: a small conv net trained from scratch (SERL's SmallEncoder: 3x3 convs, stride 2, valid).
- `CameraEncoder`: backbone -> spatial learned embeddings (8) -> dropout 0.1 -> dense 256 -> LayerNorm -> tanh.
- `ObservationEncoder`: one CameraEncoder per camera plus a proprio branch (dense 64 -> LayerNorm -> tanh);
  with no cameras it passes the state vector through unchanged (state-based SAC/RLPD).

Usage::

    enc = ObservationEncoder(ObsLayout.from_spec(spec), cfg)       # loads cfg.encoder_weights if resnet10
    feats = enc(images, state)                                      # (B, enc.out_dim)
    save_backbone_weights(ResNet10(), "resnet10.safetensors")       # the file format load_backbone_weights reads
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Mapping
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from learners.agents.config import AgentConfig
from learners.agents.obs import ObsLayout
from robot_rl.errors import ConfigError, ShapeError

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


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


def _to_float_nchw(images: torch.Tensor, mean: tuple[float, ...] | None, std: tuple[float, ...] | None,
                   ) -> torch.Tensor:
    """uint8 (B, H, W, C) -> float (B, C, H, W) in [0, 1], optionally normalised per channel."""
    x = images.permute(0, 3, 1, 2).float().div_(255.0)
    if mean is not None and std is not None and x.shape[1] == len(mean):
        m = torch.tensor(mean, device=x.device).view(1, -1, 1, 1)
        s = torch.tensor(std, device=x.device).view(1, -1, 1, 1)
        x = (x - m) / s
    return x


class _BasicBlock(nn.Module):
    def __init__(self, in_ch: int, out_ch: int, stride: int, groups: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride, 1, bias=False)
        self.norm1 = nn.GroupNorm(groups, out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, 1, 1, bias=False)
        self.norm2 = nn.GroupNorm(groups, out_ch)
        self.proj_conv: nn.Module | None = None
        self.proj_norm: nn.Module | None = None
        if stride != 1 or in_ch != out_ch:
            self.proj_conv = nn.Conv2d(in_ch, out_ch, 1, stride, 0, bias=False)
            self.proj_norm = nn.GroupNorm(groups, out_ch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.norm1(self.conv1(x)))
        y = self.norm2(self.conv2(y))
        r = x if self.proj_conv is None or self.proj_norm is None else self.proj_norm(self.proj_conv(x))
        return F.relu(r + y)


class ResNet10(nn.Module):
    """ResNet-v1-10 (stages of one basic block: 64, 128, 256, 512 filters) with GroupNorm(4); output before
    pooling: (B, 512, H/32, W/32). Input: uint8 (B, H, W, 3), normalised with the ImageNet mean/std."""

    def __init__(self, in_channels: int = 3, width: int = 64, groups: int = 4) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.conv_init = nn.Conv2d(in_channels, width, 7, 2, 3, bias=False)
        self.norm_init = nn.GroupNorm(groups, width)
        self.pool = nn.MaxPool2d(3, 2, 1)
        chans = [width, width * 2, width * 4, width * 8]
        blocks = []
        prev = width
        for i, c in enumerate(chans):
            blocks.append(_BasicBlock(prev, c, 1 if i == 0 else 2, groups))
            prev = c
        self.stages = nn.Sequential(*blocks)
        self.out_channels = prev
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = _to_float_nchw(images, IMAGENET_MEAN, IMAGENET_STD)
        x = self.pool(F.relu(self.norm_init(self.conv_init(x))))
        return self.stages(x)

    def output_hw(self, h: int, w: int) -> tuple[int, int]:
        def down(n: int) -> int:
            n = (n + 2 * 3 - 7) // 2 + 1  # conv_init
            n = (n + 2 * 1 - 3) // 2 + 1  # max pool
            for _ in range(3):            # stages 1-3 stride 2 (3x3, pad 1)
                n = (n + 2 - 3) // 2 + 1
            return n
        return down(h), down(w)


def resnet10_keys() -> dict[str, tuple[int, ...]]:
    """The parameter names and shapes a ResNet-10 (3-channel) weights file must contain."""
    return {k: tuple(v.shape) for k, v in ResNet10().state_dict().items()}


class ConvBackbone(nn.Module):
    """Small conv net from scratch: 3x3 convs, stride 2, valid padding, ReLU (SERL's SmallEncoder)."""

    def __init__(self, in_channels: int, channels: tuple[int, ...]) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        prev = in_channels
        for c in channels:
            layers += [nn.Conv2d(prev, c, 3, 2, 0), nn.ReLU()]
            prev = c
        self.net = nn.Sequential(*layers)
        self.n_layers = len(channels)
        self.out_channels = prev
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(_to_float_nchw(images, None, None) - 0.5)

    def output_hw(self, h: int, w: int) -> tuple[int, int]:
        for _ in range(self.n_layers):
            h, w = (h - 3) // 2 + 1, (w - 3) // 2 + 1
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

    def __init__(self, backbone: nn.Module, in_hw: tuple[int, int], cfg: AgentConfig, frozen: bool) -> None:
        super().__init__()
        self.backbone = backbone
        self.frozen = frozen
        out_hw = backbone.output_hw(*in_hw)  # type: ignore[operator]
        if min(out_hw) < 1:
            raise ShapeError(f"images of size {in_hw} are too small for the {type(backbone).__name__} backbone")
        c = int(backbone.out_channels)  # type: ignore[arg-type]
        self.spatial = SpatialLearnedEmbeddings(c, out_hw[0], out_hw[1], cfg.num_spatial_features)
        self.dropout = nn.Dropout(cfg.encoder_dropout)
        self.dense = nn.Linear(c * cfg.num_spatial_features, cfg.image_latent_dim)
        nn.init.xavier_uniform_(self.dense.weight)
        nn.init.zeros_(self.dense.bias)
        self.norm = nn.LayerNorm(cfg.image_latent_dim)
        self.out_dim = cfg.image_latent_dim
        if frozen:
            self.backbone.requires_grad_(False)

    def backbone_features(self, images: torch.Tensor) -> torch.Tensor:
        """The backbone's spatial features; without autograd (and in eval mode) when the backbone is frozen."""
        if self.frozen:
            with torch.no_grad():
                was = self.backbone.training
                self.backbone.eval()
                out = self.backbone(images)
                self.backbone.train(was)
            return out
        return self.backbone(images)

    def head(self, feats: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.norm(self.dense(self.dropout(self.spatial(feats)))))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone_features(images))


def save_backbone_weights(backbone: nn.Module, path: str | os.PathLike[str]) -> None:
    """Write a backbone's weights as a safetensors file (the format `load_backbone_weights` reads)."""
    from safetensors.torch import save_file

    save_file({k: v.detach().cpu().contiguous() for k, v in backbone.state_dict().items()}, str(path))


def load_backbone_weights(backbone: nn.Module, path: str | os.PathLike[str]) -> None:
    """Load a backbone's weights from a LOCAL safetensors file; ShapeError naming missing, unexpected or
    mis-shaped tensors; ConfigError if the file does not exist (nothing is ever downloaded)."""
    from safetensors.torch import load_file

    if not os.path.isfile(path):
        raise ConfigError(f"encoder_weights={str(path)!r} is not a file (weights are loaded from a local "
                          f"safetensors file; nothing is downloaded)")
    try:
        tensors = load_file(str(path))
    except Exception as err:  # safetensors raises its own error types for malformed files
        raise ShapeError(f"{path}: unreadable safetensors file ({type(err).__name__}: {err})") from err
    own = backbone.state_dict()
    missing = sorted(set(own) - set(tensors))
    unexpected = sorted(set(tensors) - set(own))
    if missing or unexpected:
        raise ShapeError(f"{path}: backbone weights do not match: missing {missing[:5]}"
                         f"{'...' if len(missing) > 5 else ''}, unexpected {unexpected[:5]}"
                         f"{'...' if len(unexpected) > 5 else ''}")
    bad = [f"{k}: file {tuple(tensors[k].shape)} vs model {tuple(v.shape)}" for k, v in own.items()
           if tuple(tensors[k].shape) != tuple(v.shape)]
    if bad:
        raise ShapeError(f"{path}: mis-shaped backbone weights: {bad[:5]}")
    backbone.load_state_dict({k: t.to(own[k].dtype) for k, t in tensors.items()})


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
            if cfg.encoder == "resnet10":
                backbone: nn.Module = ResNet10(in_channels=c)
                frozen = cfg.freeze_encoder
                if cfg.encoder_weights is not None:
                    load_backbone_weights(backbone, cfg.encoder_weights)
                elif frozen:
                    raise ConfigError("encoder='resnet10' with freeze_encoder=True needs encoder_weights (a local "
                                      "safetensors file); a frozen random ResNet would never learn. Set "
                                      "encoder_weights, freeze_encoder=False, or encoder='conv'")
            else:
                backbone = ConvBackbone(c, cfg.conv_channels)
                frozen = False
            key = _module_key(cam.name)
            self.camera_keys[cam.name] = key
            self.cameras[key] = CameraEncoder(backbone, (h, w), cfg, frozen)
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
        out += sum(cfg.image_latent_dim for _ in layout.cameras)
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
        """state_dict names of the frozen backbone weights (never trained, never sent, never checkpointed)."""
        out: set[str] = set()
        for name, enc in self.camera_encoders().items():
            if enc.frozen:
                key = self.camera_keys[name]
                out |= {f"cameras.{key}.backbone.{n}" for n in enc.backbone.state_dict()}
        return out

    def backbone_features(self, images: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {name: enc.backbone_features(images[name]) for name, enc in self.camera_encoders().items()}

    def head(self, backbone_feats: Mapping[str, torch.Tensor], state: torch.Tensor | None) -> torch.Tensor:
        """Features from precomputed backbone features (lets a frozen backbone run once per batch)."""
        parts = [enc.head(backbone_feats[name]) for name, enc in self.camera_encoders().items()]
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
        clone = copy.deepcopy(self, memo)
        clone.requires_grad_(False)
        return clone

    def trainable_parameters(self) -> list[nn.Parameter]:
        """Parameters that train (everything but frozen backbones), in a fixed order."""
        frozen = {id(p) for enc in self.camera_encoders().values() if enc.frozen for p in enc.backbone.parameters()}
        return [p for p in self.parameters() if id(p) not in frozen]
