"""Frozen-able image backbones and their weights files: SERL's ResNet-10 (GroupNorm), torchvision's ResNet-18
(BatchNorm, used with its running statistics as a fixed affine map) and the self-describing safetensors format
both load from. Nothing is ever downloaded: weights come from a LOCAL file.

- `ResNet10`: ResNet-v1-10 with GroupNorm(4), computing what SERL's flax `resnetv1-10` computes (its 3x3 stride-2
  convs and the 3x3 max pool use flax 'SAME' padding, which pads an even-sized input by 0 before and 1 after).
- `ResNet18`: torchvision's `resnet18` trunk with torchvision's parameter names (conv1, bn1, layer1.0.conv1, ...,
  layer2.0.downsample.0/1); the classifier `fc` is dropped. A torchvision `.pth` loads with
  `load_torchvision_resnet18` (torch.load(weights_only=True): tensors only, no code runs).
- Weights files: torchvision's `.pth` loads directly (encoder='resnet18');
  `save_backbone_weights(net, path)` writes safetensors with metadata
  {"architecture": "resnet10" | "resnet18", "format": "robot-rl-backbone-1", "source": ...};
  `weights_architecture(path)` reads it back (None for an older metadata-less file, which is a ResNet-10), so
  `--encoder-weights FILE` builds the right backbone; `load_backbone_weights(net, path)` checks names and shapes.
- Target heads: a file `robot-rl pretrain-encoder` writes also holds, per camera, the small head it trained on top
  of the backbone (flatten -> dense 256 -> ReLU -> dense, one output per pretraining target), under
  `target_head_prefix(camera)`; `load_target_head(path, camera, in_features)` rebuilds one (AgentConfig
  `encoder_features` 'targets' / 'both' feeds its predictions to the agent); the backbone loader ignores them.

Usage::

    net = build_backbone("resnet18", in_channels=3)
    load_backbone_weights(net, "resnet18.safetensors")      # ShapeError naming missing / unexpected / mis-shaped
    feats = net(images_uint8_bhwc)                          # (B, 512, ceil(H/32), ceil(W/32))
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn

from robot_rl.errors import ConfigError, ShapeError

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
ARCHITECTURES = ("resnet10", "resnet18")
"""Backbone architectures a weights file can name (AgentConfig.encoder values with pretrained weights)."""
FILE_FORMAT = "robot-rl-backbone-1"
TARGETS_PREFIX = "targets."
"""Key prefix of the target heads in a weights file (the rest of the file is the backbone)."""
TARGET_HEAD_HIDDEN = 256


def to_float_nchw(images: torch.Tensor, mean: tuple[float, ...] | None, std: tuple[float, ...] | None,
                  ) -> torch.Tensor:
    """uint8 (B, H, W, C) -> float (B, C, H, W) in [0, 1], optionally normalised per channel."""
    x = images.permute(0, 3, 1, 2).float().div_(255.0)
    if mean is not None and std is not None and x.shape[1] == len(mean):
        m = torch.tensor(mean, device=x.device).view(1, -1, 1, 1)
        s = torch.tensor(std, device=x.device).view(1, -1, 1, 1)
        x = (x - m) / s
    return x


def same_pad(x: torch.Tensor, kernel: int, stride: int, value: float = 0.0) -> torch.Tensor:
    """Pad (B, C, H, W) like TensorFlow / flax 'SAME': output ceil(n / stride), the odd pixel of padding after."""
    pads: list[int] = []
    for n in (x.shape[3], x.shape[2]):  # F.pad order: last dim first
        out = -(-n // stride)
        total = max((out - 1) * stride + kernel - n, 0)
        pads += [total // 2, total - total // 2]
    return F.pad(x, pads, value=value) if any(pads) else x


def _ceil_div(n: int, d: int) -> int:
    return -(-n // d)


class _GNBlock(nn.Module):
    """SERL's ResNetBlock: conv3x3(stride) -> GN -> relu -> conv3x3 -> GN, + (1x1 conv -> GN) projection, relu."""

    def __init__(self, in_ch: int, out_ch: int, stride: int, groups: int) -> None:
        super().__init__()
        self.stride = stride
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride, 0, bias=False)
        self.norm1 = nn.GroupNorm(groups, out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, 1, 1, bias=False)
        self.norm2 = nn.GroupNorm(groups, out_ch)
        self.proj_conv: nn.Module | None = None
        self.proj_norm: nn.Module | None = None
        if stride != 1 or in_ch != out_ch:
            self.proj_conv = nn.Conv2d(in_ch, out_ch, 1, stride, 0, bias=False)
            self.proj_norm = nn.GroupNorm(groups, out_ch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.norm1(self.conv1(same_pad(x, 3, self.stride))))
        y = self.norm2(self.conv2(y))
        r = x if self.proj_conv is None or self.proj_norm is None else self.proj_norm(self.proj_conv(x))
        return F.relu(r + y)


class ResNet10(nn.Module):
    """ResNet-v1-10 (stages of one basic block: 64, 128, 256, 512 filters) with GroupNorm(4), as SERL's flax
    `resnetv1-10`: conv 7x7/2 (pad 3) -> GN -> relu -> max pool 3x3/2 'SAME' -> 4 blocks. Output before pooling:
    (B, 512, ceil(H/32), ceil(W/32)). Input: uint8 (B, H, W, 3), normalised with the ImageNet mean/std."""

    architecture = "resnet10"

    def __init__(self, in_channels: int = 3, width: int = 64, groups: int = 4) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.conv_init = nn.Conv2d(in_channels, width, 7, 2, 3, bias=False)
        self.norm_init = nn.GroupNorm(groups, width)
        chans = [width, width * 2, width * 4, width * 8]
        blocks = []
        prev = width
        for i, c in enumerate(chans):
            blocks.append(_GNBlock(prev, c, 1 if i == 0 else 2, groups))
            prev = c
        self.stages = nn.Sequential(*blocks)
        self.out_channels = prev
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = to_float_nchw(images, IMAGENET_MEAN, IMAGENET_STD)
        x = F.relu(self.norm_init(self.conv_init(x)))
        x = F.max_pool2d(same_pad(x, 3, 2, float("-inf")), 3, 2)
        return self.stages(x)

    def output_hw(self, h: int, w: int) -> tuple[int, int]:
        return _ceil_div(h, 32), _ceil_div(w, 32)  # conv_init, pool and 3 stride-2 stages each halve (ceil)


class FixedBatchNorm2d(nn.Module):
    """BatchNorm with torchvision's state names (weight, bias, running_mean, running_var, num_batches_tracked)
    that always normalises with the running statistics, in train and eval alike: a fixed per-channel affine map
    (the statistics of ImageNet, not of the cell's frames; weight and bias may still train if unfrozen)."""

    running_mean: torch.Tensor
    running_var: torch.Tensor
    num_batches_tracked: torch.Tensor

    def __init__(self, channels: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        self.register_buffer("running_mean", torch.zeros(channels))
        self.register_buffer("running_var", torch.ones(channels))
        self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = self.weight * torch.rsqrt(self.running_var + self.eps)
        shift = self.bias - self.running_mean * scale
        return x * scale.view(1, -1, 1, 1) + shift.view(1, -1, 1, 1)


class _BNBlock(nn.Module):
    """torchvision's BasicBlock: conv3x3(stride) -> BN -> relu -> conv3x3 -> BN, + downsample (1x1 conv, BN)."""

    def __init__(self, in_ch: int, out_ch: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride, 1, bias=False)
        self.bn1 = FixedBatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, 1, 1, bias=False)
        self.bn2 = FixedBatchNorm2d(out_ch)
        self.downsample: nn.Sequential | None = None
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(nn.Conv2d(in_ch, out_ch, 1, stride, 0, bias=False),
                                            FixedBatchNorm2d(out_ch))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.downsample is None else self.downsample(x)))


class ResNet18(nn.Module):
    """torchvision's ResNet-18 trunk (no avgpool / fc): conv1 7x7/2 -> bn1 -> relu -> maxpool 3x3/2 -> layer1..4
    (two BasicBlocks each; 64, 128, 256, 512 channels). Output (B, 512, ceil(H/32), ceil(W/32)) for even sizes.
    Input: uint8 (B, H, W, 3), normalised with the ImageNet mean/std as torchvision's weights expect."""

    architecture = "resnet18"

    def __init__(self, in_channels: int = 3) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.conv1 = nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False)
        self.bn1 = FixedBatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        prev = 64
        for i, c in enumerate((64, 128, 256, 512)):
            stride = 1 if i == 0 else 2
            setattr(self, f"layer{i + 1}", nn.Sequential(_BNBlock(prev, c, stride), _BNBlock(c, c, 1)))
            prev = c
        self.out_channels = prev
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = to_float_nchw(images, IMAGENET_MEAN, IMAGENET_STD)
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        for i in range(1, 5):
            x = getattr(self, f"layer{i}")(x)
        return x

    def output_hw(self, h: int, w: int) -> tuple[int, int]:
        def down(n: int) -> int:
            n = (n + 6 - 7) // 2 + 1  # conv1
            n = (n + 2 - 3) // 2 + 1  # maxpool
            for _ in range(3):        # layers 2-4: 3x3 stride 2, pad 1
                n = (n + 2 - 3) // 2 + 1
            return n
        return down(h), down(w)


def build_backbone(architecture: str, in_channels: int = 3) -> nn.Module:
    """A fresh (randomly initialised) backbone of `architecture` (one of ARCHITECTURES)."""
    if architecture == "resnet10":
        return ResNet10(in_channels=in_channels)
    if architecture == "resnet18":
        return ResNet18(in_channels=in_channels)
    raise ConfigError(f"unknown backbone architecture {architecture!r}; one of {ARCHITECTURES}")


def backbone_keys(architecture: str) -> dict[str, tuple[int, ...]]:
    """The parameter names and shapes a weights file of `architecture` (3 channels) must contain."""
    return {k: tuple(v.shape) for k, v in build_backbone(architecture).state_dict().items()}


def save_backbone_weights(backbone: nn.Module, path: str | os.PathLike[str], source: str = "",
                          target_heads: Mapping[str, nn.Module] | None = None,
                          target_names: tuple[str, ...] = ()) -> None:
    """Write a backbone's weights as safetensors with metadata naming its architecture (and `source`, free text:
    where the weights came from), the format `load_backbone_weights` and `weights_architecture` read.
    `target_heads` {camera: build_target_head(...) module}: stored beside it under `target_head_prefix(camera)`,
    with `target_names` (what each output predicts) in the metadata."""
    from safetensors.torch import save_file

    arch = getattr(backbone, "architecture", None)
    meta = {"format": FILE_FORMAT, "source": source}
    if isinstance(arch, str):
        meta["architecture"] = arch
    tensors = {k: v.detach().cpu().contiguous() for k, v in backbone.state_dict().items()}
    for camera, head in (target_heads or {}).items():
        tensors |= {target_head_prefix(camera) + k: v.detach().cpu().contiguous()
                    for k, v in head.state_dict().items()}
    if target_heads:
        meta["targets"] = ",".join(target_names)
    save_file(tensors, str(path), metadata=meta)


def target_head_prefix(camera: str) -> str:
    """Key prefix of `camera`'s target head in a weights file ('images/front' -> 'targets.images__front.')."""
    return f"{TARGETS_PREFIX}{camera.replace('/', '__')}."


def build_target_head(in_features: int, n_out: int) -> nn.Sequential:
    """A target head: flatten (B, C, h, w) backbone features -> dense 256 -> ReLU -> dense n_out, shape (B, n_out)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(in_features, TARGET_HEAD_HIDDEN), nn.ReLU(),
                         nn.Linear(TARGET_HEAD_HIDDEN, n_out))


def load_target_head(path: str | os.PathLike[str], camera: str, in_features: int) -> nn.Sequential:
    """`camera`'s target head from a weights file `robot-rl pretrain-encoder` wrote, frozen (no grad). ConfigError
    when the file holds no head for that camera (naming the cameras it has), ShapeError when the head was trained
    on another feature size (other images than the agent's: pretrain on frames of the size the agent sees)."""
    from safetensors import safe_open

    _check_file(path)
    if str(path).endswith(TORCH_SUFFIXES):
        raise ConfigError(f"{path}: a torchvision checkpoint holds no target heads; encoder_features 'targets' / "
                          "'both' need a file written by `robot-rl pretrain-encoder`")
    prefix = target_head_prefix(camera)
    try:  # only the head's tensors are read (the backbone's are loaded once, by load_backbone_weights)
        with safe_open(str(path), framework="pt") as f:
            names = list(f.keys())
            own = {k[len(prefix):]: f.get_tensor(k) for k in names if k.startswith(prefix)}
    except Exception as err:  # safetensors raises its own error types for malformed files
        raise ShapeError(f"{path}: unreadable safetensors file ({type(err).__name__}: {err})") from err
    if not own:
        cams = sorted({k[len(TARGETS_PREFIX):].split(".")[0].replace("__", "/") for k in names
                       if k.startswith(TARGETS_PREFIX)})
        raise ConfigError(f"{path}: no target head for camera {camera!r} (heads for: {cams or 'none'}); "
                          "encoder_features 'targets' / 'both' need a file `robot-rl pretrain-encoder` wrote from "
                          "episodes with this camera")
    out = own.get("3.weight")
    if out is None or out.dim() != 2:
        raise ShapeError(f"{path}: the target head of {camera!r} is incomplete (no 2-D '{prefix}3.weight')")
    head = build_target_head(in_features, int(out.shape[0]))
    try:
        check_state_dict(head.state_dict(), own, f"{path} (target head of {camera!r})")
    except ShapeError as err:
        raise ShapeError(f"{err}; the head was trained on backbone features of another size: pretrain on frames "
                         f"of the image size the agent sees") from err
    head.load_state_dict({k: t.float() for k, t in own.items()})
    head.requires_grad_(False)
    return head.eval()


def _check_file(path: str | os.PathLike[str]) -> None:
    if not os.path.isfile(path):
        raise ConfigError(f"encoder_weights={str(path)!r} is not a file (weights are loaded from a local "
                          f"safetensors file; nothing is downloaded)")


TORCH_SUFFIXES = (".pth", ".pt")
"""Weights files read with torch.load(weights_only=True) (torchvision's checkpoints) rather than safetensors."""


def read_torchvision_resnet18(path: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """torchvision's ResNet-18 `.pth` (e.g. resnet18-f37072fd.pth, what its weights API downloads) as this
    module's ResNet18 state dict: read with torch.load(weights_only=True) (tensors and containers only; a file
    that needs code to unpickle is refused), the classifier `fc.*` dropped, names and shapes checked.
    ConfigError for a missing file, ShapeError for a corrupt or non-matching one."""
    _check_file(path)
    try:
        obj = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises UnpicklingError / RuntimeError / EOFError ... for bad files
        raise ShapeError(f"{path}: not a readable torch checkpoint of plain tensors ({type(err).__name__}: "
                         f"{str(err).splitlines()[0] if str(err) else ''})") from err
    if isinstance(obj, Mapping) and "state_dict" in obj and isinstance(obj["state_dict"], Mapping):
        obj = obj["state_dict"]
    if not isinstance(obj, Mapping) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise ShapeError(f"{path}: expected a state dict (name -> tensor), got {type(obj).__name__}")
    tensors = {str(k): v for k, v in obj.items() if not str(k).startswith("fc.")}
    own = ResNet18().state_dict()
    check_state_dict(own, tensors, str(path))
    return {k: t.to(own[k].dtype) for k, t in tensors.items()}


def weights_architecture(path: str | os.PathLike[str]) -> str | None:
    """The architecture a weights file names in its metadata; None for a file without (an older ResNet-10 file);
    'resnet18' for a torchvision `.pth`. ConfigError for a missing file, ShapeError for an unreadable one or an
    unknown architecture."""
    from safetensors import safe_open

    _check_file(path)
    if str(path).endswith(TORCH_SUFFIXES):
        return "resnet18"
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
    except Exception as err:  # safetensors raises its own error types for malformed files
        raise ShapeError(f"{path}: unreadable safetensors file ({type(err).__name__}: {err})") from err
    arch = meta.get("architecture")
    if arch is not None and arch not in ARCHITECTURES:
        raise ShapeError(f"{path}: weights for architecture {arch!r}, which this version does not build "
                         f"(one of {ARCHITECTURES})")
    return arch


def check_state_dict(own: Mapping[str, torch.Tensor], tensors: Mapping[str, torch.Tensor], where: str) -> None:
    """ShapeError naming missing, unexpected and mis-shaped tensors of `tensors` against the model's `own`."""
    missing = sorted(set(own) - set(tensors))
    unexpected = sorted(set(tensors) - set(own))
    if missing or unexpected:
        raise ShapeError(f"{where}: backbone weights do not match: missing {missing[:5]}"
                         f"{'...' if len(missing) > 5 else ''}, unexpected {unexpected[:5]}"
                         f"{'...' if len(unexpected) > 5 else ''}")
    bad = [f"{k}: file {tuple(tensors[k].shape)} vs model {tuple(v.shape)}" for k, v in own.items()
           if tuple(tensors[k].shape) != tuple(v.shape)]
    if bad:
        raise ShapeError(f"{where}: mis-shaped backbone weights: {bad[:5]}")


def load_backbone_weights(backbone: nn.Module, path: str | os.PathLike[str]) -> None:
    """Load a backbone's weights from a LOCAL safetensors file; ShapeError naming missing, unexpected or
    mis-shaped tensors or a file written for another architecture; ConfigError if the file does not exist."""
    from safetensors.torch import load_file

    arch = weights_architecture(path)
    if str(path).endswith(TORCH_SUFFIXES) and getattr(backbone, "architecture", None) == "resnet18":
        backbone.load_state_dict(read_torchvision_resnet18(path))
        return
    own_arch = getattr(backbone, "architecture", None)
    if arch is not None and own_arch is not None and arch != own_arch:
        raise ShapeError(f"{path}: weights for a {arch} backbone, not {own_arch} (set encoder={arch!r}, or leave "
                         f"encoder unset and the file's architecture is used)")
    try:
        tensors = load_file(str(path))
    except Exception as err:  # safetensors raises its own error types for malformed files
        raise ShapeError(f"{path}: unreadable safetensors file ({type(err).__name__}: {err})") from err
    tensors = {k: v for k, v in tensors.items() if not k.startswith(TARGETS_PREFIX)}
    own = backbone.state_dict()
    check_state_dict(own, tensors, str(path))
    backbone.load_state_dict({k: t.to(own[k].dtype) for k, t in tensors.items()})
