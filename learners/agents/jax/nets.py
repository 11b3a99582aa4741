"""The building blocks of the JAX learner backend (learners.agents.jax.agent, learners.agents.jax.update): the name map
between torch modules and JAX parameter dicts, the static shape of an agent's networks, the networks as pure jnp
functions, and torch's Adam.

- Name map: `ParamMap` (entries: `Entry`), described below.
- Static shape: `Static` (with one `Camera` per image input) holds every python value the jitted update closes
  over (layer counts, ensemble sizes, learning rates, ...); it is built once per agent, never traced.
- Networks: pure functions of a parameter dict {JAX path: array} and their inputs, each mirroring one torch
  module of learners (`dense`, `layer_norm`, `mlp` = learners.agents.nets.MLP, `ensemble` = EnsembleMLP, `actor` =
  policy.TanhGaussianActor, `tanh_gaussian`, `gripper_q`, `backbone` = encoders.ConvBackbone / ResNet10 on NHWC
  uint8 images, `camera_head`, `encode` = encoders.ObservationEncoder, `random_shift`).
- Optimiser: `adam` / `adam_init` (torch.optim.Adam's step: betas 0.9 / 0.999, eps 1e-8), `clip` (torch's
  clip_grad_norm_), `lerp` (soft target updates).

Name map (`ParamMap`): every parameter of a torch module <-> a JAX path with JAX's layouts: a Linear's
`weight` (out, in) is `.../kernel` (in, out); a Conv2d's (O, I, kh, kw) is `.../kernel` (kh, kw, I, O) for NHWC
images; Layer/GroupNorm `weight` is `.../scale`; the spatial embedding kernel (C, H, W, F) is (H, W, C, F);
the batched ensemble layers keep their (N, in, out) layout; dots become slashes
(`actor.trunk.hidden.0.weight` <-> `actor/trunk/hidden/0/kernel`). `trainable_state()` and `state_dict()` give
torch names and layouts, so actors, `robot-rl eval` and checkpoints see the same names from both backends
(the optimizer moments and the random key are the JAX agent's own entries).

jax is imported inside the functions that use it, never at module import time (the `jax` extra is optional).

Usage::

    pmap = ParamMap(policy)                    # learners.agents.policy.Policy (or a critic, a target encoder, ...)
    params = pmap.to_jax({n: t.detach().numpy() for n, t in policy.state_dict().items()})
    h = mlp(params, "actor/trunk", feats, n_hidden=2, norm=True, act="silu", out=False)  # feats (B, F) -> (B, H)
    torch_arrays = pmap.to_torch(params)       # back to the torch names and layouts
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from torch import nn

from learners.agents.nets import EnsembleLayerNorm, EnsembleLinear

_ADAM_B1, _ADAM_B2, _ADAM_EPS = 0.9, 0.999, 1e-8  # torch.optim.Adam's defaults
_LN_EPS = 1e-5  # torch LayerNorm / GroupNorm default
_IMAGENET_MEAN = (0.485, 0.456, 0.406)
_IMAGENET_STD = (0.229, 0.224, 0.225)
_TORCH_TO_JAX_AXES: dict[str, tuple[int, ...]] = {
    "linear": (1, 0),           # (out, in) -> (in, out)
    "conv": (2, 3, 1, 0),       # (O, I, kh, kw) -> (kh, kw, I, O)
    "spatial": (1, 2, 0, 3),    # (C, H, W, F) -> (H, W, C, F)
}
"""Axis permutation from a torch parameter's layout to the JAX path's, per Entry kind; kinds not listed keep theirs
(JAX -> torch is the inverse permutation)."""


# ------------------------------------------------------------------------------------------------ name map
@dataclasses.dataclass(frozen=True)
class Entry:
    torch_name: str
    path: str
    kind: str  # "linear" | "conv" | "norm" | "spatial" | "same"


class ParamMap:
    """torch parameter names and layouts of one nn.Module <-> JAX paths and layouts (see the module docstring).
    Every parameter of the module is mapped (a module type it does not know is a TypeError, so a new layer in the
    torch networks fails the tests instead of being sent with the wrong layout)."""

    def __init__(self, module: nn.Module) -> None:
        from learners.agents.encoders import SpatialLearnedEmbeddings

        entries: list[Entry] = []
        for mname, mod in module.named_modules():
            for pname, _ in mod.named_parameters(recurse=False):
                full = f"{mname}.{pname}" if mname else pname
                base = mname.replace(".", "/") + "/" if mname else ""
                if isinstance(mod, nn.Linear | nn.Conv2d) and pname == "weight":
                    entries.append(Entry(full, base + "kernel", "linear" if isinstance(mod, nn.Linear) else "conv"))
                elif isinstance(mod, nn.LayerNorm | nn.GroupNorm | EnsembleLayerNorm) and pname == "weight":
                    entries.append(Entry(full, base + "scale", "same"))
                elif isinstance(mod, EnsembleLinear) and pname == "weight":
                    entries.append(Entry(full, base + "kernel", "same"))
                elif isinstance(mod, SpatialLearnedEmbeddings) and pname == "kernel":
                    entries.append(Entry(full, base + "kernel", "spatial"))
                elif pname == "bias" and isinstance(mod, nn.Linear | nn.Conv2d | nn.LayerNorm | nn.GroupNorm
                                                    | EnsembleLinear | EnsembleLayerNorm):
                    entries.append(Entry(full, base + "bias", "same"))
                else:
                    raise TypeError(f"ParamMap: no JAX layout for {type(mod).__name__} parameter '{full}'")
        extra = set(module.state_dict()) - {e.torch_name for e in entries}
        if extra:  # buffers would be missed
            raise TypeError(f"ParamMap: state-dict entries without a parameter: {sorted(extra)}")
        self.entries = tuple(entries)
        self.by_torch = {e.torch_name: e for e in entries}
        self.by_path = {e.path: e for e in entries}

    @staticmethod
    def _to_jax(kind: str, a: np.ndarray) -> np.ndarray:
        perm = _TORCH_TO_JAX_AXES.get(kind)
        return a if perm is None else a.transpose(perm)

    @staticmethod
    def _to_torch(kind: str, a: np.ndarray) -> np.ndarray:
        perm = _TORCH_TO_JAX_AXES.get(kind)
        return a if perm is None else a.transpose(np.argsort(perm))  # the inverse permutation

    def to_jax(self, arrays: Mapping[str, Any], names: Any = None) -> dict[str, np.ndarray]:
        """{torch name: array} -> {JAX path: float32 array} for `names` (default: every mapped parameter)."""
        keep = self.by_torch if names is None else names
        return {self.by_torch[n].path: np.ascontiguousarray(self._to_jax(self.by_torch[n].kind,
                                                                         np.asarray(arrays[n], np.float32)))
                for n in keep}

    def to_torch(self, arrays: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """{JAX path: array} -> {torch name: float32 array} (C-contiguous copies)."""
        return {self.by_path[p].torch_name: np.array(self._to_torch(self.by_path[p].kind, np.asarray(a, np.float32)),
                                                     dtype=np.float32, order="C", copy=True)
                for p, a in arrays.items()}


# ------------------------------------------------------------------------------------------------ static shape
@dataclasses.dataclass(frozen=True)
class Camera:
    name: str
    key: str        # module key of the camera (learners.agents.encoders._module_key)
    backbone: str   # "conv" | "resnet10"
    frozen: bool
    conv_layers: int


@dataclasses.dataclass(frozen=True)
class Static:
    """Everything the jitted functions close over (python values, not traced)."""

    act: str
    n_hidden: int
    layer_norm: bool
    ensemble: int
    members: int
    arm_dim: int
    gripper: bool
    n_gripper_hidden: int
    log_std_min: float
    log_std_max: float
    cameras: tuple[Camera, ...]
    state_dim: int
    proprio: bool
    dropout: float
    augment_pad: int
    tau: float
    actor_lr: float
    critic_lr: float
    temperature_lr: float
    bc_weight: float
    bc_arm_filter: str  # the arm dims' filter: 'off', 'joint', 'own' (AgentConfig.bc_filters[0])
    bc_q_filter_gripper: bool  # the gripper dim's own filter (AgentConfig.bc_filters[1])
    bc_q_filter_start: int  # updates before the filters apply (AgentConfig.bc_q_filter_start)
    bc_q_filter_floor: float  # weight of a dropped row (AgentConfig.bc_q_filter_floor)
    mc_lower_bound: bool
    backup_entropy: bool
    learn_temperature: bool
    target_entropy: float
    grad_clip_norm: float | None
    k: int
    minibatch: int
    feat_dim: int

    @property
    def all_frozen(self) -> bool:
        return bool(self.cameras) and all(c.frozen for c in self.cameras)


# ------------------------------------------------------------------------------------------------ networks (jnp)
def activation(name: str) -> Callable[[Any], Any]:
    import jax

    table: dict[str, Callable[[Any], Any]] = {
        "silu": jax.nn.silu, "relu": jax.nn.relu, "tanh": jax.numpy.tanh,
        "gelu": lambda x: jax.nn.gelu(x, approximate=False),  # torch's F.gelu is the exact (erf) form
    }
    return table[name]


def dense(p: Mapping[str, Any], path: str, x: Any) -> Any:
    return x @ p[f"{path}/kernel"] + p[f"{path}/bias"]


def norm_affine(x: Any, scale: Any, bias: Any) -> Any:
    """LayerNorm over the last axis with an affine (scale, bias): the scale folded into the (..., 1) inverse std
    first, so the full-size work is one subtract, one multiply and one add."""
    import jax
    import jax.numpy as jnp

    mean = x.mean(-1, keepdims=True)
    var = jnp.maximum(jnp.square(x).mean(-1, keepdims=True) - jnp.square(mean), 0.0)
    return (x - mean) * (jax.lax.rsqrt(var + _LN_EPS) * scale) + bias


def normalize(x: Any) -> Any:
    """(x - mean) / sqrt(var + eps) over the last axis, the variance as E[x^2] - E[x]^2 (one pass over x: about
    1.6x faster for the whole critic update on CPU than the two-pass form; LayerNorm inputs here are centred
    enough that the difference to torch stays at float32 rounding, tests/test_jax_agent.py)."""
    import jax
    import jax.numpy as jnp

    mean = x.mean(-1, keepdims=True)
    var = jnp.maximum(jnp.square(x).mean(-1, keepdims=True) - jnp.square(mean), 0.0)
    return (x - mean) * jax.lax.rsqrt(var + _LN_EPS)


def layer_norm(p: Mapping[str, Any], path: str, x: Any) -> Any:
    return normalize(x) * p[f"{path}/scale"] + p[f"{path}/bias"]


def mlp(p: Mapping[str, Any], path: str, x: Any, n_hidden: int, norm: bool, act: str, out: bool) -> Any:
    """learners.agents.nets.MLP: Linear -> [LayerNorm] -> activation per hidden layer, optional output Linear."""
    f = activation(act)
    for i in range(n_hidden):
        x = dense(p, f"{path}/hidden/{i}", x)
        if norm:
            x = layer_norm(p, f"{path}/norms/{i}", x)
        x = f(x)
    return dense(p, f"{path}/out", x) if out else x


def ensemble(p: Mapping[str, Any], x: Any, st: Static, members: Any = None) -> Any:
    """learners.agents.nets.EnsembleMLP: x (B, in) -> (K, B) for all N members or the `members` subset."""
    import jax.numpy as jnp

    f = activation(st.act)

    def take(a: Any) -> Any:
        return a if members is None else jnp.take(a, members, axis=0)

    h = x
    for i in range(st.n_hidden):
        w, b = take(p[f"hidden/{i}/kernel"]), take(p[f"hidden/{i}/bias"])
        if i == 0:  # the shared input broadcast to every member: one batched matmul, no transpose of the output
            h = jnp.broadcast_to(h, (w.shape[0], *h.shape))
        h = jnp.einsum("kbi,kio->kbo", h, w) + b
        if st.layer_norm:
            h = norm_affine(h, take(p[f"norms/{i}/scale"]), take(p[f"norms/{i}/bias"]))
        h = f(h)
    w, b = take(p["out/kernel"]), take(p["out/bias"])
    return (jnp.einsum("kbi,kio->kbo", h, w) + b)[..., 0]


def actor(p: Mapping[str, Any], feats: Any, st: Static) -> tuple[Any, Any]:
    """learners.agents.policy.TanhGaussianActor: (mean, log_std), log_std smoothly bounded."""
    import jax.numpy as jnp

    h = mlp(p, "actor/trunk", feats, st.n_hidden, st.layer_norm, st.act, out=False)
    raw = dense(p, "actor/log_std", h)
    log_std = st.log_std_min + 0.5 * (st.log_std_max - st.log_std_min) * (jnp.tanh(raw) + 1.0)
    return dense(p, "actor/mean", h), log_std


def tanh_gaussian(mean: Any, log_std: Any, noise: Any) -> tuple[Any, Any]:
    """learners.agents.policy.tanh_gaussian: reparameterised sample and its log-probability."""
    import jax
    import jax.numpy as jnp

    u = mean + jnp.exp(log_std) * noise
    logp = (-0.5 * jnp.square(noise) - log_std - 0.5 * math.log(2.0 * math.pi)).sum(-1)
    logp = logp - (2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u))).sum(-1)
    return jnp.tanh(u), logp


def gripper_q(p: Mapping[str, Any], feats: Any, st: Static, prefix: str = "gripper/") -> Any:
    return mlp(p, f"{prefix}net", feats, st.n_gripper_hidden, True, st.act, out=True)


def conv(x: Any, kernel: Any, stride: int, pad: int | str) -> Any:
    """NHWC conv; `pad` pixels on every side, or 'SAME' (TensorFlow / flax: the odd padding pixel after)."""
    import jax

    padding = pad if isinstance(pad, str) else "VALID" if pad == 0 else [(pad, pad), (pad, pad)]
    return jax.lax.conv_general_dilated(x, kernel, (stride, stride), padding,
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))


def group_norm(p: Mapping[str, Any], path: str, x: Any, groups: int = 4) -> Any:
    import jax

    b, h, w, c = x.shape
    g = x.reshape(b, h, w, groups, c // groups)
    mean = g.mean((1, 2, 4), keepdims=True)
    var = ((g - mean) ** 2).mean((1, 2, 4), keepdims=True)
    g = (g - mean) * jax.lax.rsqrt(var + _LN_EPS)
    return g.reshape(b, h, w, c) * p[f"{path}/scale"] + p[f"{path}/bias"]


def backbone(p: Mapping[str, Any], path: str, images: Any, cam: Camera) -> Any:
    """learners.agents.encoders.ConvBackbone / ResNet10 on uint8 (B, H, W, C) -> float (B, h, w, c), NHWC."""
    import jax
    import jax.numpy as jnp

    x = images.astype(jnp.float32) / 255.0
    if cam.backbone == "conv":
        x = x - 0.5
        for i in range(cam.conv_layers):
            x = jax.nn.relu(conv(x, p[f"{path}/net/{2 * i}/kernel"], 2, 0) + p[f"{path}/net/{2 * i}/bias"])
        return x
    if x.shape[-1] == 3:
        x = (x - jnp.asarray(_IMAGENET_MEAN)) / jnp.asarray(_IMAGENET_STD)
    x = jax.nn.relu(group_norm(p, f"{path}/norm_init", conv(x, p[f"{path}/conv_init/kernel"], 2, 3)))
    x = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
    i = 0
    while f"{path}/stages/{i}/conv1/kernel" in p:
        s = f"{path}/stages/{i}"
        stride = 1 if i == 0 else 2
        y = jax.nn.relu(group_norm(p, f"{s}/norm1", conv(x, p[f"{s}/conv1/kernel"], stride, "SAME")))
        y = group_norm(p, f"{s}/norm2", conv(y, p[f"{s}/conv2/kernel"], 1, 1))
        r = x if f"{s}/proj_conv/kernel" not in p else group_norm(p, f"{s}/proj_norm",
                                                                    conv(x, p[f"{s}/proj_conv/kernel"], stride, 0))
        x = jax.nn.relu(r + y)
        i += 1
    return x


def camera_head(p: Mapping[str, Any], path: str, feats: Any, st: Static, dropout_key: Any) -> Any:
    """learners.agents.encoders.CameraEncoder.head: spatial embeddings -> dropout -> dense -> LayerNorm -> tanh."""
    import jax
    import jax.numpy as jnp

    b = feats.shape[0]
    x = jnp.einsum("bhwc,hwcf->bcf", feats, p[f"{path}/spatial/kernel"]).reshape(b, -1)
    if dropout_key is not None and st.dropout > 0:
        keep = jax.random.bernoulli(dropout_key, 1.0 - st.dropout, x.shape)
        x = jnp.where(keep, x / (1.0 - st.dropout), 0.0)
    return jnp.tanh(layer_norm(p, f"{path}/norm", dense(p, f"{path}/dense", x)))


def encode(p: Mapping[str, Any], prefix: str, frozen: Mapping[str, Any], images: Mapping[str, Any],
           backbone_feats: Mapping[str, Any] | None, state: Any, st: Static, dropout_key: Any) -> Any:
    """learners.agents.encoders.ObservationEncoder: [proprio branch or raw state] + one head per camera, concatenated.
    `prefix` is 'encoder/' for the online encoder (policy paths), '' for the target encoder; frozen backbone
    weights are always read from `frozen` (shared by both). `backbone_feats` (frozen backbones, computed once
    per batch) replaces running the backbones on `images`."""
    import jax
    import jax.numpy as jnp

    if not st.cameras:
        return state
    parts = []
    if state is not None and st.state_dim > 0:
        if st.proprio:
            parts.append(jnp.tanh(layer_norm(p, f"{prefix}proprio/1", dense(p, f"{prefix}proprio/0", state))))
        else:
            parts.append(state)
    keys = (jax.random.split(dropout_key, len(st.cameras)) if dropout_key is not None and st.dropout > 0
            else [None] * len(st.cameras))
    for cam, key in zip(st.cameras, keys, strict=True):
        path = f"{prefix}cameras/{cam.key}"
        if backbone_feats is not None:
            feats = backbone_feats[cam.name]
        elif cam.frozen:
            feats = jax.lax.stop_gradient(backbone(frozen, f"encoder/cameras/{cam.key}/backbone", images[cam.name],
                                                   cam))
        else:
            feats = backbone(p, f"{path}/backbone", images[cam.name], cam)
        parts.append(camera_head(p, path, feats, st, key))
    return parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=-1)


def random_shift(images: Any, shifts: Any) -> Any:
    """learners.agents.encoders.random_shift with given shifts (B, 2) in [-pad, pad]: edge-padded crop as a gather."""
    import jax.numpy as jnp

    b, h, w, _ = images.shape
    rows = jnp.clip(jnp.arange(h)[None, :] + shifts[:, :1], 0, h - 1)
    cols = jnp.clip(jnp.arange(w)[None, :] + shifts[:, 1:], 0, w - 1)
    return images[jnp.arange(b)[:, None, None], rows[:, :, None], cols[:, None, :]]


# ------------------------------------------------------------------------------------------------ optimiser
def adam(params: Any, grads: Any, opt: Mapping[str, Any], lr: float) -> tuple[Any, dict[str, Any]]:
    """torch.optim.Adam's step (single-tensor form: moments, bias corrections, eps outside the sqrt)."""
    import jax
    import jax.numpy as jnp

    step = opt["step"] + 1.0
    m = jax.tree.map(lambda m_, g: m_ + (1.0 - _ADAM_B1) * (g - m_), opt["m"], grads)
    v = jax.tree.map(lambda v_, g: _ADAM_B2 * v_ + (1.0 - _ADAM_B2) * g * g, opt["v"], grads)
    step_size = lr / (1.0 - _ADAM_B1 ** step)
    bc2_sqrt = jnp.sqrt(1.0 - _ADAM_B2 ** step)
    new = jax.tree.map(lambda p_, m_, v_: p_ - step_size * m_ / (jnp.sqrt(v_) / bc2_sqrt + _ADAM_EPS), params, m, v)
    return new, {"step": step, "m": m, "v": v}


def clip(grads: Any, max_norm: float | None) -> tuple[Any, Any]:
    """torch.nn.utils.clip_grad_norm_: scale by min(1, max_norm / (norm + 1e-6)); returns (grads, norm)."""
    import jax
    import jax.numpy as jnp

    leaves = jax.tree.leaves(grads)
    norm = jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in leaves)) if leaves else jnp.zeros(())
    if max_norm is None:
        return grads, norm
    coef = jnp.minimum(max_norm / (norm + 1e-6), 1.0)
    return jax.tree.map(lambda g: g * coef, grads), norm


def lerp(target: Any, online: Any, tau: float) -> Any:
    import jax

    return jax.tree.map(lambda t, o: t + tau * (o - t), target, online)


def adam_init(params: Any) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp

    return {"step": jnp.zeros((), jnp.float32), "m": jax.tree.map(jnp.zeros_like, params),
            "v": jax.tree.map(jnp.zeros_like, params)}


__all__ = ["Camera", "Entry", "ParamMap", "Static", "activation", "actor", "adam", "adam_init", "backbone",
           "camera_head", "clip", "conv", "dense", "encode", "ensemble", "gripper_q", "group_norm", "layer_norm",
           "lerp", "mlp", "norm_affine", "normalize", "random_shift", "tanh_gaussian"]
