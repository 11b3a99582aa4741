"""The JAX learner backend (`AgentConfig.backend = "jax"`, the `jax` extra): learners.sac's SAC / RLPD / DrQ
update as ONE jitted function (the critic updates of one `update()` call as a `lax.scan`), behind the same Agent
seam (learners.agents.LearnerAgent).

Shared with the torch backend, not copied: batches come from the same samplers (learners.replay: RLPD mixing,
n-step rows), the same recipes and AgentConfig, the same checkpoints (learners.state.TrainingRun), and the same
acting policy: `act()` runs the torch `learners.policy.Policy` with the JAX weights loaded through the name map
below, exactly as an actor runs the weights this learner publishes. The initial weights are the torch agent's
for the same config and seed (learners.sac.SACAgent builds them), so both backends start from the same point.

The update, step for step as learners.sac (tests/test_jax_agent.py checks losses and parameter changes against
the torch agent on the same parameters, batch and random draws): strided minibatches (rows i::k), DrQ random
shift of obs and next_obs, frozen backbones once per batch, critic ensemble with the target min over a random
subset, n-step returns and bootstraps, optional backup entropy, gradient clipping per optimizer (torch's
clip_grad_norm_), Adam as torch's (betas 0.9 / 0.999, eps 1e-8), soft target updates after every critic update,
the HIL-SERL gripper double-DQN head, then the actor (mean Q over the ensemble, BC term on human rows, optionally
Q-filtered: `bc_q_filter`) and the temperature on the last minibatch, with the encoder features detached. Random
draws come from one JAX key in the agent's state (checkpointed), so a JAX run is reproducible, but it does not
draw the same numbers as torch.

Name map (`ParamMap`): every parameter of a torch module <-> a JAX path with JAX's layouts: a Linear's
`weight` (out, in) is `.../kernel` (in, out); a Conv2d's (O, I, kh, kw) is `.../kernel` (kh, kw, I, O) for NHWC
images; Layer/GroupNorm `weight` is `.../scale`; the spatial embedding kernel (C, H, W, F) is (H, W, C, F);
the batched ensemble layers keep their (N, in, out) layout; dots become slashes
(`actor.trunk.hidden.0.weight` <-> `actor/trunk/hidden/0/kernel`). `trainable_state()` and `state_dict()` give
torch names and layouts, so actors, `robot-rl eval` and checkpoints see the same names from both backends
(the optimizer moments and the random key are the JAX agent's own entries).

Not supported (a one-line ConfigError naming the option, never ignored): `compile` (torch.compile; JAX always
compiles), `device='mps'`, and any AgentConfig option this module does not list in SUPPORTED_OPTIONS (options
added to the torch agent later are refused until mirrored here).

Threads and compilation: XLA's CPU thread pool follows torch's thread count when it is 1 (`--threads 1`: XLA
single-threaded) unless XLA_FLAGS says otherwise; compiled programs are cached on disk (JAX's persistent
compilation cache, in $ROBOT_RL_JAX_CACHE or ~/.cache/robot-rl/jax; `ROBOT_RL_JAX_CACHE=off` disables it).

Usage::

    agent = JaxSACAgent(spec, cfg.replace(backend="jax"))      # or learners.agents.make_agent(spec, cfg)
    metrics = agent.update(sampler.sample(agent.cfg.samples_per_update))   # first call compiles (seconds)
    action = agent.act(obs)                                    # the torch policy with the current weights
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch
from torch import nn

from learners.config import AgentConfig
from learners.nets import EnsembleLayerNorm, EnsembleLinear
from learners.policy import Policy
from learners.replay import mc_floor
from robot_rl.errors import ConfigError, ShapeError
from robot_rl.extras import optional_import
from robot_rl.specs import EnvSpec

SUPPORTED_OPTIONS = frozenset({
    "state_select", "state_scale", "hidden_dims", "layer_norm", "activation", "ensemble_size", "ensemble_subsample",
    "std_min", "std_max", "batch_size", "critic_updates_per_actor_update", "discount", "n_step", "actor_lr",
    "critic_lr", "temperature_lr", "tau", "temperature_init", "target_entropy", "target_entropy_per_dim",
    "learn_temperature", "backup_entropy", "grad_clip_norm", "bc_weight", "encoder", "encoder_weights",
    "freeze_encoder", "conv_channels", "num_spatial_features", "encoder_dropout", "image_latent_dim",
    "proprio_latent_dim", "augment_pad", "gripper_head", "gripper_hidden_dims", "gripper_flip_penalty",
    "gripper_epsilon", "backend", "device", "seed", "bc_q_filter", "mc_lower_bound",
})
"""AgentConfig options the JAX agent implements; any other option set away from its default is refused."""
_ADAM_B1, _ADAM_B2, _ADAM_EPS = 0.9, 0.999, 1e-8  # torch.optim.Adam's defaults
_LN_EPS = 1e-5  # torch LayerNorm / GroupNorm default
_IMAGENET_MEAN = (0.485, 0.456, 0.406)
_IMAGENET_STD = (0.229, 0.224, 0.225)


# ------------------------------------------------------------------------------------------------ jax import
def import_jax() -> ModuleType:
    """`jax`, configured for this process (threads, compilation cache); MissingExtraError naming the `jax`
    extra when it is not installed."""
    if "jax" not in sys.modules:
        _configure_xla_threads()
    jax = optional_import("jax", extra="jax", purpose="the JAX learner backend (backend=jax)")
    _configure_cache(jax)
    return jax


def _configure_xla_threads() -> None:
    """One torch thread (`--threads 1`, the shared-CPU default) -> XLA single-threaded too, unless XLA_FLAGS
    already sets threading. Only possible before jax initialises its CPU backend."""
    flags = os.environ.get("XLA_FLAGS", "")
    if torch.get_num_threads() == 1 and "multi_thread_eigen" not in flags and "intra_op" not in flags:
        os.environ["XLA_FLAGS"] = (flags + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
                                   ).strip()


_CACHE_SET = False


def _configure_cache(jax: ModuleType) -> None:
    global _CACHE_SET
    if _CACHE_SET:
        return
    _CACHE_SET = True
    where = os.environ.get("ROBOT_RL_JAX_CACHE", str(Path.home() / ".cache" / "robot-rl" / "jax"))
    if where.lower() in ("", "off", "0", "none"):
        return
    try:
        Path(where).mkdir(parents=True, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", where)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    except (OSError, AttributeError):  # a read-only home: compile every time, still correct
        pass


def check_supported(cfg: AgentConfig) -> None:
    """ConfigError naming the first option the JAX agent does not implement (set away from its default)."""
    if cfg.compile:
        raise ConfigError("AgentConfig option compile=True is torch.compile: not available with backend=jax "
                          "(JAX compiles the whole update anyway); drop it or use backend=torch")
    if cfg.device == "mps":
        raise ConfigError("AgentConfig option device='mps' is not available with backend=jax (cpu, cuda[:N], auto)")
    default = AgentConfig()
    for f in dataclasses.fields(AgentConfig):
        if f.name not in SUPPORTED_OPTIONS and getattr(cfg, f.name) != getattr(default, f.name):
            raise ConfigError(f"AgentConfig option {f.name}={getattr(cfg, f.name)!r} is not supported by "
                              f"backend=jax yet; leave it at {getattr(default, f.name)!r} or use backend=torch")


# ------------------------------------------------------------------------------------------------ name map
@dataclasses.dataclass(frozen=True)
class _Entry:
    torch_name: str
    path: str
    kind: str  # "linear" | "conv" | "norm" | "spatial" | "same"


class ParamMap:
    """torch parameter names and layouts of one nn.Module <-> JAX paths and layouts (see the module docstring).
    Every parameter of the module is mapped (a module type it does not know is a TypeError, so a new layer in the
    torch networks fails the tests instead of being sent with the wrong layout)."""

    def __init__(self, module: nn.Module) -> None:
        from learners.encoders import SpatialLearnedEmbeddings

        entries: list[_Entry] = []
        for mname, mod in module.named_modules():
            for pname, _ in mod.named_parameters(recurse=False):
                full = f"{mname}.{pname}" if mname else pname
                base = mname.replace(".", "/") + "/" if mname else ""
                if isinstance(mod, nn.Linear | nn.Conv2d) and pname == "weight":
                    entries.append(_Entry(full, base + "kernel", "linear" if isinstance(mod, nn.Linear) else "conv"))
                elif isinstance(mod, nn.LayerNorm | nn.GroupNorm | EnsembleLayerNorm) and pname == "weight":
                    entries.append(_Entry(full, base + "scale", "same"))
                elif isinstance(mod, EnsembleLinear) and pname == "weight":
                    entries.append(_Entry(full, base + "kernel", "same"))
                elif isinstance(mod, SpatialLearnedEmbeddings) and pname == "kernel":
                    entries.append(_Entry(full, base + "kernel", "spatial"))
                elif pname == "bias" and isinstance(mod, nn.Linear | nn.Conv2d | nn.LayerNorm | nn.GroupNorm
                                                    | EnsembleLinear | EnsembleLayerNorm):
                    entries.append(_Entry(full, base + "bias", "same"))
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
        if kind == "linear":
            return a.T
        if kind == "conv":
            return a.transpose(2, 3, 1, 0)
        if kind == "spatial":
            return a.transpose(1, 2, 0, 3)
        return a

    @staticmethod
    def _to_torch(kind: str, a: np.ndarray) -> np.ndarray:
        if kind == "linear":
            return a.T
        if kind == "conv":
            return a.transpose(3, 2, 0, 1)
        if kind == "spatial":
            return a.transpose(2, 0, 1, 3)
        return a

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
class _Camera:
    name: str
    key: str        # module key of the camera (learners.encoders._module_key)
    backbone: str   # "conv" | "resnet10"
    frozen: bool
    conv_layers: int


@dataclasses.dataclass(frozen=True)
class _Static:
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
    cameras: tuple[_Camera, ...]
    state_dim: int
    proprio: bool
    dropout: float
    augment_pad: int
    tau: float
    actor_lr: float
    critic_lr: float
    temperature_lr: float
    bc_weight: float
    bc_q_filter: bool
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
def _activation(name: str) -> Callable[[Any], Any]:
    import jax

    table: dict[str, Callable[[Any], Any]] = {
        "silu": jax.nn.silu, "relu": jax.nn.relu, "tanh": jax.numpy.tanh,
        "gelu": lambda x: jax.nn.gelu(x, approximate=False),  # torch's F.gelu is the exact (erf) form
    }
    return table[name]


def _dense(p: Mapping[str, Any], path: str, x: Any) -> Any:
    return x @ p[f"{path}/kernel"] + p[f"{path}/bias"]


def _norm_affine(x: Any, scale: Any, bias: Any) -> Any:
    """LayerNorm over the last axis with an affine (scale, bias): the scale folded into the (..., 1) inverse std
    first, so the full-size work is one subtract, one multiply and one add."""
    import jax
    import jax.numpy as jnp

    mean = x.mean(-1, keepdims=True)
    var = jnp.maximum(jnp.square(x).mean(-1, keepdims=True) - jnp.square(mean), 0.0)
    return (x - mean) * (jax.lax.rsqrt(var + _LN_EPS) * scale) + bias


def _normalize(x: Any) -> Any:
    """(x - mean) / sqrt(var + eps) over the last axis, the variance as E[x^2] - E[x]^2 (one pass over x: about
    1.6x faster for the whole critic update on CPU than the two-pass form; LayerNorm inputs here are centred
    enough that the difference to torch stays at float32 rounding, tests/test_jax_agent.py)."""
    import jax
    import jax.numpy as jnp

    mean = x.mean(-1, keepdims=True)
    var = jnp.maximum(jnp.square(x).mean(-1, keepdims=True) - jnp.square(mean), 0.0)
    return (x - mean) * jax.lax.rsqrt(var + _LN_EPS)


def _layer_norm(p: Mapping[str, Any], path: str, x: Any) -> Any:
    return _normalize(x) * p[f"{path}/scale"] + p[f"{path}/bias"]


def _mlp(p: Mapping[str, Any], path: str, x: Any, n_hidden: int, layer_norm: bool, act: str, out: bool) -> Any:
    """learners.nets.MLP: Linear -> [LayerNorm] -> activation per hidden layer, optional output Linear."""
    f = _activation(act)
    for i in range(n_hidden):
        x = _dense(p, f"{path}/hidden/{i}", x)
        if layer_norm:
            x = _layer_norm(p, f"{path}/norms/{i}", x)
        x = f(x)
    return _dense(p, f"{path}/out", x) if out else x


def _ensemble(p: Mapping[str, Any], x: Any, st: _Static, members: Any = None) -> Any:
    """learners.nets.EnsembleMLP: x (B, in) -> (K, B) for all N members or the `members` subset."""
    import jax.numpy as jnp

    f = _activation(st.act)

    def take(a: Any) -> Any:
        return a if members is None else jnp.take(a, members, axis=0)

    h = x
    for i in range(st.n_hidden):
        w, b = take(p[f"hidden/{i}/kernel"]), take(p[f"hidden/{i}/bias"])
        if i == 0:  # the shared input broadcast to every member: one batched matmul, no transpose of the output
            h = jnp.broadcast_to(h, (w.shape[0], *h.shape))
        h = jnp.einsum("kbi,kio->kbo", h, w) + b
        if st.layer_norm:
            h = _norm_affine(h, take(p[f"norms/{i}/scale"]), take(p[f"norms/{i}/bias"]))
        h = f(h)
    w, b = take(p["out/kernel"]), take(p["out/bias"])
    return (jnp.einsum("kbi,kio->kbo", h, w) + b)[..., 0]


def _actor(p: Mapping[str, Any], feats: Any, st: _Static) -> tuple[Any, Any]:
    """learners.policy.TanhGaussianActor: (mean, log_std), log_std smoothly bounded."""
    import jax.numpy as jnp

    h = _mlp(p, "actor/trunk", feats, st.n_hidden, st.layer_norm, st.act, out=False)
    raw = _dense(p, "actor/log_std", h)
    log_std = st.log_std_min + 0.5 * (st.log_std_max - st.log_std_min) * (jnp.tanh(raw) + 1.0)
    return _dense(p, "actor/mean", h), log_std


def _tanh_gaussian(mean: Any, log_std: Any, noise: Any) -> tuple[Any, Any]:
    """learners.policy.tanh_gaussian: reparameterised sample and its log-probability."""
    import jax
    import jax.numpy as jnp

    u = mean + jnp.exp(log_std) * noise
    logp = (-0.5 * jnp.square(noise) - log_std - 0.5 * math.log(2.0 * math.pi)).sum(-1)
    logp = logp - (2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u))).sum(-1)
    return jnp.tanh(u), logp


def _gripper_q(p: Mapping[str, Any], feats: Any, st: _Static, prefix: str = "gripper/") -> Any:
    return _mlp(p, f"{prefix}net", feats, st.n_gripper_hidden, True, st.act, out=True)


def _conv(x: Any, kernel: Any, stride: int, pad: int) -> Any:
    import jax

    padding = "VALID" if pad == 0 else [(pad, pad), (pad, pad)]
    return jax.lax.conv_general_dilated(x, kernel, (stride, stride), padding,
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _group_norm(p: Mapping[str, Any], path: str, x: Any, groups: int = 4) -> Any:
    import jax

    b, h, w, c = x.shape
    g = x.reshape(b, h, w, groups, c // groups)
    mean = g.mean((1, 2, 4), keepdims=True)
    var = ((g - mean) ** 2).mean((1, 2, 4), keepdims=True)
    g = (g - mean) * jax.lax.rsqrt(var + _LN_EPS)
    return g.reshape(b, h, w, c) * p[f"{path}/scale"] + p[f"{path}/bias"]


def _backbone(p: Mapping[str, Any], path: str, images: Any, cam: _Camera) -> Any:
    """learners.encoders.ConvBackbone / ResNet10 on uint8 (B, H, W, C) -> float (B, h, w, c), NHWC."""
    import jax
    import jax.numpy as jnp

    x = images.astype(jnp.float32) / 255.0
    if cam.backbone == "conv":
        x = x - 0.5
        for i in range(cam.conv_layers):
            x = jax.nn.relu(_conv(x, p[f"{path}/net/{2 * i}/kernel"], 2, 0) + p[f"{path}/net/{2 * i}/bias"])
        return x
    if x.shape[-1] == 3:
        x = (x - jnp.asarray(_IMAGENET_MEAN)) / jnp.asarray(_IMAGENET_STD)
    x = jax.nn.relu(_group_norm(p, f"{path}/norm_init", _conv(x, p[f"{path}/conv_init/kernel"], 2, 3)))
    x = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 3, 3, 1), (1, 2, 2, 1),
                              [(0, 0), (1, 1), (1, 1), (0, 0)])
    i = 0
    while f"{path}/stages/{i}/conv1/kernel" in p:
        s = f"{path}/stages/{i}"
        stride = 1 if i == 0 else 2
        y = jax.nn.relu(_group_norm(p, f"{s}/norm1", _conv(x, p[f"{s}/conv1/kernel"], stride, 1)))
        y = _group_norm(p, f"{s}/norm2", _conv(y, p[f"{s}/conv2/kernel"], 1, 1))
        r = x if f"{s}/proj_conv/kernel" not in p else _group_norm(p, f"{s}/proj_norm",
                                                                     _conv(x, p[f"{s}/proj_conv/kernel"], stride, 0))
        x = jax.nn.relu(r + y)
        i += 1
    return x


def _camera_head(p: Mapping[str, Any], path: str, feats: Any, st: _Static, dropout_key: Any) -> Any:
    """learners.encoders.CameraEncoder.head: spatial embeddings -> dropout -> dense -> LayerNorm -> tanh."""
    import jax
    import jax.numpy as jnp

    b = feats.shape[0]
    x = jnp.einsum("bhwc,hwcf->bcf", feats, p[f"{path}/spatial/kernel"]).reshape(b, -1)
    if dropout_key is not None and st.dropout > 0:
        keep = jax.random.bernoulli(dropout_key, 1.0 - st.dropout, x.shape)
        x = jnp.where(keep, x / (1.0 - st.dropout), 0.0)
    return jnp.tanh(_layer_norm(p, f"{path}/norm", _dense(p, f"{path}/dense", x)))


def _encode(p: Mapping[str, Any], prefix: str, frozen: Mapping[str, Any], images: Mapping[str, Any],
            backbone_feats: Mapping[str, Any] | None, state: Any, st: _Static, dropout_key: Any) -> Any:
    """learners.encoders.ObservationEncoder: [proprio branch or raw state] + one head per camera, concatenated.
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
            parts.append(jnp.tanh(_layer_norm(p, f"{prefix}proprio/1", _dense(p, f"{prefix}proprio/0", state))))
        else:
            parts.append(state)
    keys = (jax.random.split(dropout_key, len(st.cameras)) if dropout_key is not None and st.dropout > 0
            else [None] * len(st.cameras))
    for cam, key in zip(st.cameras, keys, strict=True):
        path = f"{prefix}cameras/{cam.key}"
        if backbone_feats is not None:
            feats = backbone_feats[cam.name]
        elif cam.frozen:
            feats = jax.lax.stop_gradient(_backbone(frozen, f"encoder/cameras/{cam.key}/backbone", images[cam.name],
                                                    cam))
        else:
            feats = _backbone(p, f"{path}/backbone", images[cam.name], cam)
        parts.append(_camera_head(p, path, feats, st, key))
    return parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=-1)


def _random_shift(images: Any, shifts: Any) -> Any:
    """learners.encoders.random_shift with given shifts (B, 2) in [-pad, pad]: edge-padded crop as a gather."""
    import jax.numpy as jnp

    b, h, w, _ = images.shape
    rows = jnp.clip(jnp.arange(h)[None, :] + shifts[:, :1], 0, h - 1)
    cols = jnp.clip(jnp.arange(w)[None, :] + shifts[:, 1:], 0, w - 1)
    return images[jnp.arange(b)[:, None, None], rows[:, :, None], cols[:, None, :]]


# ------------------------------------------------------------------------------------------------ optimiser
def _adam(params: Any, grads: Any, opt: Mapping[str, Any], lr: float) -> tuple[Any, dict[str, Any]]:
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


def _clip(grads: Any, max_norm: float | None) -> tuple[Any, Any]:
    """torch.nn.utils.clip_grad_norm_: scale by min(1, max_norm / (norm + 1e-6)); returns (grads, norm)."""
    import jax
    import jax.numpy as jnp

    leaves = jax.tree.leaves(grads)
    norm = jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in leaves)) if leaves else jnp.zeros(())
    if max_norm is None:
        return grads, norm
    coef = jnp.minimum(max_norm / (norm + 1e-6), 1.0)
    return jax.tree.map(lambda g: g * coef, grads), norm


def _lerp(target: Any, online: Any, tau: float) -> Any:
    import jax

    return jax.tree.map(lambda t, o: t + tau * (o - t), target, online)


def _adam_init(params: Any) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp

    return {"step": jnp.zeros((), jnp.float32), "m": jax.tree.map(jnp.zeros_like, params),
            "v": jax.tree.map(jnp.zeros_like, params)}


# ------------------------------------------------------------------------------------------------ the update
def _update_core(s: dict[str, Any], frozen: Mapping[str, Any], batch: Mapping[str, Any], draws: Mapping[str, Any],
                 st: _Static) -> tuple[dict[str, Any], dict[str, Any]]:
    """One `update()`: st.k critic (+ gripper, + target) updates on the strided minibatches, then one actor and
    temperature update on the last; pure function of (state, frozen weights, batch, random draws)."""
    import jax
    import jax.numpy as jnp

    k, mb = st.k, st.minibatch
    images, next_images = dict(batch["images"]), dict(batch["next_images"])
    if st.cameras and st.augment_pad > 0:
        for j, cam in enumerate(st.cameras):
            images[cam.name] = _random_shift(images[cam.name], draws["shifts"][j])
            next_images[cam.name] = _random_shift(next_images[cam.name], draws["shifts"][len(st.cameras) + j])
    bf = nbf = None
    if st.all_frozen:  # frozen backbones once for the whole batch (obs and next_obs), as learners.sac
        bf = {c.name: jax.lax.stop_gradient(_backbone(frozen, f"encoder/cameras/{c.key}/backbone", images[c.name], c))
              for c in st.cameras}
        nbf = {c.name: jax.lax.stop_gradient(_backbone(frozen, f"encoder/cameras/{c.key}/backbone", next_images[c.name],
                                                       c)) for c in st.cameras}

    def strided(x: Any) -> Any:  # (n, ...) -> (k, mb, ...): minibatch i = rows i::k
        return jnp.swapaxes(x.reshape(mb, k, *x.shape[1:]), 0, 1)

    xs: dict[str, Any] = {key: strided(batch[key])
                          for key in ("actions", "returns", "bootstrap", "gp_returns", "target_floor")}
    xs["state"] = None if batch["state"] is None else strided(batch["state"])
    xs["next_state"] = None if batch["next_state"] is None else strided(batch["next_state"])
    xs["images"] = {n: strided(v) for n, v in (bf if bf is not None else images).items()}
    xs["next_images"] = {n: strided(v) for n, v in (nbf if nbf is not None else next_images).items()}
    xs["noise"], xs["members"], xs["dropout"] = draws["noise"], draws["members"], draws["dropout"]
    use_bf = bf is not None

    def enc_call(p: Mapping[str, Any], prefix: str, imgs: Mapping[str, Any], state: Any, key: Any) -> Any:
        return _encode(p, prefix, frozen, imgs, imgs if use_bf else None, state, st, key)

    def critic_step(c: dict[str, Any], x: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        alpha = jnp.exp(c["log_alpha"])
        arm = x["actions"][:, : st.arm_dim]
        k_feat, k_next = (x["dropout"][0], x["dropout"][1]) if x["dropout"] is not None else (None, None)
        next_feats = jax.lax.stop_gradient(enc_call(c["encoder"], "encoder/", x["next_images"], x["next_state"],
                                                    k_next))
        target_feats = enc_call(c["target_encoder"], "", x["next_images"], x["next_state"], None)
        next_a, next_logp = _tanh_gaussian(*_actor(c["actor"], next_feats, st), x["noise"])
        tq = _ensemble(c["target_critic"], jnp.concatenate([target_feats, next_a], -1), st, x["members"]).min(0)
        if st.backup_entropy:
            tq = tq - alpha * next_logp
        td = x["returns"] + x["bootstrap"] * tq
        target = jax.lax.stop_gradient(jnp.maximum(td, x["target_floor"]))

        def loss_fn(critic: Any, encoder: Any) -> tuple[Any, tuple[Any, Any]]:
            feats = enc_call(encoder, "encoder/", x["images"], x["state"], k_feat)
            q = _ensemble(critic, jnp.concatenate([feats, arm], -1), st)
            return jnp.mean(jnp.square(q - target[None])), (q, feats)

        (loss, (q, feats)), grads = jax.value_and_grad(loss_fn, argnums=(0, 1), has_aux=True)(c["critic"],
                                                                                                c["encoder"])
        grads, norm = _clip(grads, st.grad_clip_norm)
        (critic, encoder), c_opt = _adam((c["critic"], c["encoder"]), grads, c["opt_critic"], st.critic_lr)
        c = dict(c, critic=critic, encoder=encoder, opt_critic=c_opt)
        info = {"critic_loss": loss, "q_mean": q.mean(),
                "q_ensemble_std": jnp.std(q, axis=0, ddof=1).mean() if st.ensemble > 1 else jnp.zeros(()),
                "target_q_mean": target.mean()}
        if st.mc_lower_bound:
            info["mc_bound_share"] = jnp.mean((x["target_floor"] > td).astype(jnp.float32))
        if st.grad_clip_norm is not None:
            info["critic_grad_norm"] = norm
        feats = jax.lax.stop_gradient(feats)
        if st.gripper:
            idx = (jnp.round(jnp.clip(x["actions"][:, -1], -1.0, 1.0)) + 1.0).astype(jnp.int32)
            best = jnp.argmax(_gripper_q(c["gripper"], next_feats, st), -1)
            next_q = jnp.take_along_axis(_gripper_q(c["target_gripper"], target_feats, st, prefix=""),
                                         best[:, None], -1)[:, 0]
            g_target = x["returns"] + x["gp_returns"] + x["bootstrap"] * next_q

            def g_loss_fn(gp: Any) -> tuple[Any, Any]:
                gq = jnp.take_along_axis(_gripper_q(gp, feats, st), idx[:, None], -1)[:, 0]
                return jnp.mean(jnp.square(gq - g_target)), gq

            (g_loss, gq), g_grads = jax.value_and_grad(g_loss_fn, has_aux=True)(c["gripper"])
            g_grads, _ = _clip(g_grads, st.grad_clip_norm)
            gripper, g_opt = _adam(c["gripper"], g_grads, c["opt_gripper"], st.actor_lr)
            c = dict(c, gripper=gripper, opt_gripper=g_opt,
                     target_gripper=_lerp(c["target_gripper"], _strip(gripper, "gripper/"), st.tau))
            info.update(gripper_loss=g_loss, gripper_q_mean=gq.mean())
        c = dict(c, target_critic=_lerp(c["target_critic"], c["critic"], st.tau),
                 target_encoder=_lerp(c["target_encoder"], _strip(c["encoder"], "encoder/"), st.tau))
        return dict(c, last_feats=feats), info

    carry = dict(s, last_feats=jnp.zeros((mb, st.feat_dim), jnp.float32))
    carry, infos = jax.lax.scan(critic_step, carry, xs)
    feats = carry.pop("last_feats")
    out = {key: v.mean() for key, v in infos.items()}

    # actor + temperature on the last minibatch (rows k-1::k), features detached
    alpha = jnp.exp(carry["log_alpha"])
    bc_actions = xs["actions"][k - 1][:, : st.arm_dim]
    bc_mask = strided(batch["intervention"])[k - 1]

    n_human = jnp.maximum(bc_mask.sum(), 1.0)

    def actor_loss_fn(actor: Any) -> tuple[Any, tuple[Any, Any, Any]]:
        mean, log_std = _actor(actor, feats, st)
        a, logp = _tanh_gaussian(mean, log_std, draws["actor_noise"])
        q = _ensemble(carry["critic"], jnp.concatenate([feats, a], -1), st).mean(0)
        mode = jnp.tanh(mean)
        sq = jnp.square(mode - bc_actions).sum(-1)
        mask = bc_mask
        if st.bc_q_filter:  # a human row counts only while the critic prefers its action to the mode (Nair 2018)
            q_human = _ensemble(carry["critic"], jnp.concatenate([feats, bc_actions], -1), st).mean(0)
            q_mode = _ensemble(carry["critic"], jnp.concatenate([feats, jax.lax.stop_gradient(mode)], -1),
                               st).mean(0)
            mask = mask * jax.lax.stop_gradient(q_human > q_mode).astype(mask.dtype)
        bc = (sq * mask).sum() / n_human  # over all human rows: the term fades as the filter drops rows
        return jnp.mean(alpha * logp - q) + st.bc_weight * bc, (logp, bc, mask.sum() / n_human)

    (actor_loss, (logp, bc, bc_share)), a_grads = jax.value_and_grad(actor_loss_fn, has_aux=True)(carry["actor"])
    a_grads, _ = _clip(a_grads, st.grad_clip_norm)
    actor, a_opt = _adam(carry["actor"], a_grads, carry["opt_actor"], st.actor_lr)
    carry = dict(carry, actor=actor, opt_actor=a_opt)
    entropy = -jax.lax.stop_gradient(logp).mean()
    temp_loss = jnp.exp(carry["log_alpha"]) * (entropy - st.target_entropy)
    if st.learn_temperature:
        t_grad, _ = _clip(temp_loss, st.grad_clip_norm)  # d/d log_alpha of exp(log_alpha) * c is the loss itself
        log_alpha, t_opt = _adam(carry["log_alpha"], t_grad, carry["opt_temperature"], st.temperature_lr)
        carry = dict(carry, log_alpha=log_alpha, opt_temperature=t_opt)
    if st.bc_weight > 0:
        out["bc_loss"] = bc
        if st.bc_q_filter:
            out["bc_kept"] = bc_share  # share of the human rows the Q filter kept
    out.update(actor_loss=actor_loss, entropy=entropy, temperature=jnp.exp(carry["log_alpha"]),
               temperature_loss=temp_loss)
    carry["num_updates"] = carry["num_updates"] + 1
    return carry, out


def _strip(params: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """{prefix + path: v} -> {path: v} (online encoder / gripper paths -> their target networks' paths)."""
    return {key[len(prefix):]: v for key, v in params.items()}


def _draws(key: Any, st: _Static, batch_rows: int) -> tuple[Any, dict[str, Any]]:
    """The random numbers of one update from `key` (returns the next key): critic noise (k, mb, A), target
    subsets (k, M), actor noise (mb, A), image shifts (2 x cameras, n, 2), dropout keys (k, 2)."""
    import jax

    keys = jax.random.split(key, 6)
    members = jax.vmap(lambda kk: jax.random.permutation(kk, st.ensemble)[: st.members])(
        jax.random.split(keys[2], st.k))
    draws: dict[str, Any] = {
        "noise": jax.random.normal(keys[1], (st.k, st.minibatch, st.arm_dim)),
        "members": members,
        "actor_noise": jax.random.normal(keys[3], (st.minibatch, st.arm_dim)),
        "shifts": None, "dropout": None}
    if st.cameras and st.augment_pad > 0:
        draws["shifts"] = jax.random.randint(keys[4], (2 * len(st.cameras), batch_rows, 2), -st.augment_pad,
                                             st.augment_pad + 1)
    if st.cameras and st.dropout > 0:
        draws["dropout"] = jax.random.split(keys[5], (st.k, 2))
    return keys[0], draws


# ------------------------------------------------------------------------------------------------ the agent
class JaxSACAgent:
    """learners.sac.SACAgent's interface and update, in JAX (see the module docstring)."""

    def __init__(self, spec: EnvSpec, cfg: AgentConfig | None = None) -> None:
        cfg = cfg or AgentConfig(backend="jax")
        check_supported(cfg)
        jax = import_jax()

        from learners.encoders import CameraEncoder, ConvBackbone
        from learners.sac import SACAgent

        self.cfg, self.spec = cfg, spec
        self._jax = jax
        self.device = self._jax_device(cfg.device)
        # the torch agent of the same config and seed: initial weights, the parameter names, the acting policy
        template = SACAgent(spec, cfg.replace(backend="torch", device="cpu", compile=False))
        self.policy: Policy = template.policy
        self.layout = self.policy.layout
        self.arm_dim = self.policy.arm_dim
        frozen_torch = {f"encoder.{n}" for n in self.policy.encoder.frozen_names()}
        self._policy_map = ParamMap(self.policy)
        self._critic_map = ParamMap(template.critic)
        self._target_encoder_map = ParamMap(template.target_encoder)
        self._gripper_map = ParamMap(template.target_gripper) if template.target_gripper is not None else None
        psd = {n: t.detach().cpu().numpy() for n, t in self.policy.state_dict().items()}
        names = list(psd)
        self._groups: dict[str, list[str]] = {
            "actor": [n for n in names if n.startswith("actor.")],
            "encoder": [n for n in names if n.startswith("encoder.") and n not in frozen_torch],
            "gripper": [n for n in names if n.startswith("gripper.")]}
        self._frozen_names = sorted(frozen_torch)
        tsd = {n: t.detach().cpu().numpy() for n, t in template.target_encoder.state_dict().items()}
        self._target_encoder_names = [n for n in tsd if f"encoder.{n}" not in frozen_torch]

        cams = []
        for name, enc in self.policy.encoder.camera_encoders().items():
            assert isinstance(enc, CameraEncoder)
            kind = "conv" if isinstance(enc.backbone, ConvBackbone) else "resnet10"
            cams.append(_Camera(name, self.policy.encoder.camera_keys[name], kind, enc.frozen,
                                len(cfg.conv_channels) if kind == "conv" else 0))
        k = cfg.critic_updates_per_actor_update
        self._st = _Static(
            act=cfg.activation, n_hidden=len(cfg.hidden_dims), layer_norm=cfg.layer_norm,
            ensemble=cfg.ensemble_size, members=cfg.ensemble_subsample or cfg.ensemble_size, arm_dim=self.arm_dim,
            gripper=cfg.gripper_head, n_gripper_hidden=len(cfg.gripper_hidden_dims),
            log_std_min=math.log(cfg.std_min), log_std_max=math.log(cfg.std_max), cameras=tuple(cams),
            state_dim=self.layout.state_dim, proprio=self.policy.encoder.proprio is not None,
            dropout=cfg.encoder_dropout, augment_pad=cfg.augment_pad, tau=cfg.tau, actor_lr=cfg.actor_lr,
            critic_lr=cfg.critic_lr, temperature_lr=cfg.temperature_lr, bc_weight=cfg.bc_weight,
            bc_q_filter=cfg.bc_q_filter, mc_lower_bound=cfg.mc_lower_bound, backup_entropy=cfg.backup_entropy,
            learn_temperature=cfg.learn_temperature,
            target_entropy=float(template.target_entropy), grad_clip_norm=cfg.grad_clip_norm, k=k,
            minibatch=cfg.batch_size, feat_dim=self.policy.encoder.out_dim)

        put = self._put
        s: dict[str, Any] = {
            "actor": put(self._policy_map.to_jax(psd, self._groups["actor"])),
            "encoder": put(self._policy_map.to_jax(psd, self._groups["encoder"])),
            "gripper": put(self._policy_map.to_jax(psd, self._groups["gripper"])),
            "critic": put(self._critic_map.to_jax({n: t.detach().numpy() for n, t in
                                                   template.critic.state_dict().items()})),
            "target_critic": put(self._critic_map.to_jax({n: t.detach().numpy() for n, t in
                                                          template.target_critic.state_dict().items()})),
            "target_encoder": put(self._target_encoder_map.to_jax(tsd, self._target_encoder_names)),
            "target_gripper": {},
            "log_alpha": put(np.asarray(math.log(cfg.temperature_init), np.float32)),
            "num_updates": put(np.zeros((), np.int32)),
            "key": put(np.asarray(jax.random.PRNGKey(cfg.seed + 3), np.uint32)),
        }
        if template.target_gripper is not None and self._gripper_map is not None:
            s["target_gripper"] = put(self._gripper_map.to_jax({n: t.detach().numpy() for n, t in
                                                                template.target_gripper.state_dict().items()}))
        for name, params in (("actor", s["actor"]), ("critic", (s["critic"], s["encoder"])),
                             ("temperature", s["log_alpha"]), ("gripper", s["gripper"])):
            s[f"opt_{name}"] = put(_adam_init(params))  # committed like the rest: no second compile
        self._s = s
        self._frozen = put(self._policy_map.to_jax(psd, self._frozen_names))
        del template
        st = self._st
        n_rows = cfg.samples_per_update

        def keyed(state: dict[str, Any], frozen: Any, batch: Any) -> tuple[dict[str, Any], dict[str, Any]]:
            key, draws = _draws(state["key"], st, n_rows)
            state = dict(state, key=key)
            return _update_core(state, frozen, batch, draws, st)

        def with_draws(state: dict[str, Any], frozen: Any, batch: Any, draws: Any,
                       ) -> tuple[dict[str, Any], dict[str, Any]]:
            return _update_core(state, frozen, batch, draws, st)

        def mode_action(state: dict[str, Any], frozen: Any, images: Any, obs_state: Any) -> Any:
            feats = _encode(state["encoder"], "encoder/", frozen, images, None, obs_state, st, None)
            arm = jax.numpy.tanh(_actor(state["actor"], feats, st)[0])
            if not st.gripper:
                return arm
            grip = jax.numpy.argmax(_gripper_q(state["gripper"], feats, st), -1).astype(arm.dtype) - 1.0
            return jax.numpy.concatenate([arm, grip[:, None]], -1)

        self._mode_fn = jax.jit(mode_action)
        self._update_fn = jax.jit(keyed, donate_argnums=(0,))
        self._update_draws_fn = jax.jit(with_draws)
        self._policy_dirty = False
        self.compile_s: float | None = None
        """Seconds the first `update()` took (tracing + XLA compilation + the update itself)."""

    # ------------------------------------------------------------------ devices and transfers
    def _jax_device(self, name: str) -> Any:
        jax = self._jax
        if name == "auto":
            return jax.devices()[0]
        if name == "cpu":
            return jax.devices("cpu")[0]
        index = int(name.split(":")[1]) if ":" in name else 0
        try:
            gpus = jax.devices("gpu")
        except RuntimeError:
            gpus = []
        if index >= len(gpus):
            raise ConfigError(f"AgentConfig option device={name!r}: JAX sees {len(gpus)} GPU(s) here (install "
                              "a CUDA build of jax, or use device=cpu)")
        return gpus[index]

    def _put(self, tree: Any) -> Any:
        return self._jax.device_put(tree, self.device)

    # ------------------------------------------------------------------ acting / weights
    @property
    def num_updates(self) -> int:
        return int(self._s["num_updates"])

    @num_updates.setter
    def num_updates(self, value: int) -> None:
        self._s["num_updates"] = self._put(np.asarray(value, np.int32))

    @property
    def temperature(self) -> float:
        return float(np.exp(np.asarray(self._s["log_alpha"])))

    def _policy_arrays(self) -> dict[str, np.ndarray]:
        host = self._jax.device_get({g: self._s[g] for g in ("actor", "encoder", "gripper")})
        return {n: a for g in ("actor", "encoder", "gripper") for n, a in self._policy_map.to_torch(host[g]).items()}

    def _sync_policy(self) -> None:
        if not self._policy_dirty:
            return
        sd = self.policy.state_dict()
        with torch.no_grad():
            for n, a in self._policy_arrays().items():
                sd[n].copy_(torch.from_numpy(a))
        self._policy_dirty = False

    def act(self, obs: Any, deterministic: bool = False) -> np.ndarray:
        """Action in [-1, 1] (float32 (A,)): the torch policy with this agent's current weights."""
        self._sync_policy()
        return self.policy.act(obs, deterministic)

    def mode_actions(self, obs: Any) -> np.ndarray:
        """Deterministic actions (B, A) for a batch of observations computed by the JAX networks themselves (the
        mode of the policy, the gripper head's argmax); `act` runs the torch policy instead. For checking that
        the published weights give the torch policy the same actions (tests)."""
        images, state = self.layout.to_numpy(obs, batched=True)
        return np.asarray(self._mode_fn(self._s, self._frozen, images, state))

    def trainable_state(self) -> dict[str, np.ndarray]:
        """The policy's trainable weights under the torch policy's names and layouts (what actors load)."""
        return self._policy_arrays()

    def load_trainable_state(self, arrays: Mapping[str, Any]) -> None:
        """Load `trainable_state()`-style arrays (torch names) into the policy and the JAX parameters."""
        self._sync_policy()
        self.policy.load_trainable_state(arrays)  # validates names, shapes, finiteness first
        for g in ("actor", "encoder", "gripper"):
            self._s[g] = self._put(self._policy_map.to_jax(arrays, self._groups[g]))

    # ------------------------------------------------------------------ batches
    def _batch(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        """learners.sac's batch checks and targets, in numpy: obs -> (images, state), returns, bootstraps."""
        for key in ("obs", "next_obs", "actions", "rewards", "terminated"):
            if key not in batch:
                raise ShapeError(f"batch is missing '{key}' (has {sorted(batch)})")
        images, state = self.layout.to_numpy(batch["obs"], batched=True)
        next_images, next_state = self.layout.to_numpy(batch["next_obs"], batched=True)
        actions = np.asarray(batch["actions"], np.float32)
        n = actions.shape[0]
        if actions.shape != (n, self.policy.action_dim):
            raise ShapeError(f"batch actions: expected (B, {self.policy.action_dim}), got {actions.shape}")
        k = self.cfg.critic_updates_per_actor_update
        if n != self.cfg.samples_per_update:
            raise ShapeError(f"batch of {n} rows: the JAX agent takes exactly cfg.samples_per_update = "
                             f"{self.cfg.samples_per_update} (batch_size x critic_updates_per_actor_update={k})")
        cols: dict[str, np.ndarray] = {}
        for key in ("rewards", "terminated", "grasp_penalty", "intervention"):
            if key not in batch:
                cols[key] = np.zeros(n, np.float32)
                continue
            a = np.asarray(batch[key]).astype(np.float32).reshape(-1)
            if a.shape != (n,):
                raise ShapeError(f"batch '{key}': expected ({n},), got {np.shape(batch[key])}")
            cols[key] = a
        gamma = np.float32(self.cfg.discount)
        if "n_steps" in batch:
            steps = np.asarray(batch["n_steps"]).astype(np.float32).reshape(-1)
            seqs = {}
            for key in ("n_rewards", "n_grasp_penalty"):
                if key not in batch:
                    raise ShapeError(f"batch has 'n_steps' but no '{key}'")
                seqs[key] = np.asarray(batch[key], np.float32)
                if seqs[key].ndim != 2 or seqs[key].shape[0] != n:
                    raise ShapeError(f"batch '{key}': expected ({n}, n_step), got {seqs[key].shape}")
            if steps.shape != (n,) or (steps < 1).any() or (steps > seqs["n_rewards"].shape[1]).any():
                raise ShapeError(f"batch 'n_steps': expected ({n},) values in [1, n_step]")
            powers = gamma ** np.arange(seqs["n_rewards"].shape[1], dtype=np.float32)
            returns = seqs["n_rewards"] @ powers
            gp_returns = seqs["n_grasp_penalty"] @ powers
            bootstrap = (gamma ** steps) * (1.0 - cols["terminated"])
        else:
            returns, gp_returns = cols["rewards"], cols["grasp_penalty"]
            bootstrap = gamma * (1.0 - cols["terminated"])
        for name, a in list(images.items()) + list(next_images.items()):
            if a.shape[0] != n:
                raise ShapeError(f"batch camera '{name}' has {a.shape[0]} rows, actions have {n}")
        for sv in (state, next_state):
            if sv is not None and sv.shape[0] != n:
                raise ShapeError(f"batch state has {sv.shape[0]} rows, actions have {n}")
        return {"images": images, "next_images": next_images, "state": state, "next_state": next_state,
                "actions": actions, "returns": returns.astype(np.float32), "bootstrap": bootstrap.astype(np.float32),
                "gp_returns": gp_returns.astype(np.float32), "intervention": cols["intervention"],
                "target_floor": mc_floor(batch, n, self.cfg.mc_lower_bound)}

    # ------------------------------------------------------------------ update
    def update(self, batch: Mapping[str, Any]) -> dict[str, float]:
        """learners.sac.SACAgent.update, as one jitted call; returns float metrics (critic metrics averaged)."""
        b = self._batch(batch)
        first = self.compile_s is None
        t0 = time.perf_counter()
        self._s, metrics = self._update_fn(self._s, self._frozen, b)
        out = {key: float(v) for key, v in self._jax.device_get(metrics).items()}
        if first:
            self.compile_s = time.perf_counter() - t0
        self._policy_dirty = True
        return out

    def update_with_draws(self, batch: Mapping[str, Any], draws: Mapping[str, Any]) -> dict[str, float]:
        """`update` with the random numbers given (for comparing backends): noise (k, mb, A) float32, members
        (k, M) int32, actor_noise (mb, A) float32, shifts (2 x cameras, n, 2) int32 or None, dropout None or
        keys (k, 2, 2) uint32. The agent's own key is not advanced."""
        b = self._batch(batch)
        given = {"noise": np.asarray(draws["noise"], np.float32), "members": np.asarray(draws["members"], np.int32),
                 "actor_noise": np.asarray(draws["actor_noise"], np.float32),
                 "shifts": None if draws.get("shifts") is None else np.asarray(draws["shifts"], np.int32),
                 "dropout": None if draws.get("dropout") is None else np.asarray(draws["dropout"], np.uint32)}
        self._s, metrics = self._update_draws_fn(self._s, self._frozen, b, given)
        self._policy_dirty = True
        return {key: float(v) for key, v in self._jax.device_get(metrics).items()}

    # ------------------------------------------------------------------ full state (checkpoints)
    def _net_entries(self) -> list[tuple[str, str, ParamMap]]:
        """(state-dict prefix, JAX state group, its name map) for every network."""
        out = [("policy", g, self._policy_map) for g in ("actor", "encoder", "gripper")]
        out += [("critic", "critic", self._critic_map), ("target_critic", "target_critic", self._critic_map),
                ("target_encoder", "target_encoder", self._target_encoder_map)]
        if self._gripper_map is not None:
            out.append(("target_gripper", "target_gripper", self._gripper_map))
        return out

    def _opt_groups(self) -> dict[str, list[tuple[str, str, ParamMap | None]]]:
        """optimizer -> its parameter groups (state-dict prefix, JAX group, map); None map = log_alpha."""
        pm = self._policy_map
        out: dict[str, list[tuple[str, str, ParamMap | None]]] = {
            "actor": [("policy", "actor", pm)],
            "critic": [("critic", "critic", self._critic_map), ("policy", "encoder", pm)],
            "temperature": [("log_alpha", "log_alpha", None)]}
        if self.cfg.gripper_head:
            out["gripper"] = [("policy", "gripper", pm)]
        return out

    def state_dict(self) -> dict[str, np.ndarray]:
        """Networks and targets under the torch agent's names and layouts (`policy/...`, `critic/...`,
        `target_*/...`, `log_alpha`), Adam moments as `optim/<optimizer>/<name>/{step,exp_avg,exp_avg_sq}`,
        `num_updates`, the JAX key (`rng/jax_key`) and the acting policy's torch generator (`rng/policy`).
        Frozen backbone weights are left out (they come from cfg.encoder_weights)."""
        host = self._jax.device_get(self._s)
        out: dict[str, np.ndarray] = {}
        for prefix, group, pmap in self._net_entries():
            for n, a in pmap.to_torch(host[group]).items():
                out[f"{prefix}/{n}"] = a
        out["log_alpha"] = np.asarray(host["log_alpha"], np.float32).copy()
        for oname, groups in self._opt_groups().items():
            opt = host[f"opt_{oname}"]
            moments = {"exp_avg": opt["m"], "exp_avg_sq": opt["v"]}
            for field, tree in moments.items():
                parts = tree if isinstance(tree, tuple) else (tree,)
                for (prefix, _, omap), part in zip(groups, parts, strict=True):
                    if omap is None:
                        out[f"optim/{oname}/{prefix}/{field}"] = np.asarray(part, np.float32).copy()
                        continue
                    for n, a in omap.to_torch(part).items():
                        out[f"optim/{oname}/{prefix}/{n}/{field}"] = a
            out[f"optim/{oname}/step"] = np.asarray(opt["step"], np.float32).copy()
        out["num_updates"] = np.array(int(host["num_updates"]), dtype=np.int64)
        out["rng/jax_key"] = np.asarray(host["key"], np.uint32).copy()
        out["rng/policy"] = self.policy.generator().get_state().numpy().copy()
        return out

    def load_state_dict(self, arrays: Mapping[str, Any]) -> None:
        """Restore `state_dict()` output; ShapeError (before anything changes) on unknown/missing names or shapes."""
        own = self.state_dict()
        missing, unexpected = sorted(set(own) - set(arrays)), sorted(set(arrays) - set(own))
        if missing or unexpected:
            hint = (" (a checkpoint of the torch backend? resume it with backend=torch)"
                    if any(k.startswith("rng/agent") for k in unexpected) else "")
            raise ShapeError(f"agent state does not match the JAX agent: missing {missing[:5]}, unexpected "
                             f"{unexpected[:5]}{hint}")
        bad = [k for k in own if k != "rng/policy" and tuple(np.shape(arrays[k])) != own[k].shape]
        if bad:
            raise ShapeError(f"agent state has wrong shapes: {bad[:5]}")
        s = dict(self._s)
        for prefix, group, pmap in self._net_entries():
            names = [e.torch_name for e in pmap.entries if f"{prefix}/{e.torch_name}" in own
                     and e.path in self._s[group]]
            s[group] = self._put(pmap.to_jax({n: arrays[f"{prefix}/{n}"] for n in names}, names))
        s["log_alpha"] = self._put(np.asarray(arrays["log_alpha"], np.float32))
        for oname, groups in self._opt_groups().items():
            fields: dict[str, list[Any]] = {"exp_avg": [], "exp_avg_sq": []}
            for field in fields:
                for prefix, group, omap in groups:
                    if omap is None:
                        fields[field].append(self._put(np.asarray(arrays[f"optim/{oname}/{prefix}/{field}"],
                                                                  np.float32)))
                        continue
                    names = [omap.by_path[p].torch_name for p in self._s[group]]
                    fields[field].append(self._put(omap.to_jax(
                        {n: arrays[f"optim/{oname}/{prefix}/{n}/{field}"] for n in names}, names)))
            m = fields["exp_avg"][0] if len(groups) == 1 else tuple(fields["exp_avg"])
            v = fields["exp_avg_sq"][0] if len(groups) == 1 else tuple(fields["exp_avg_sq"])
            s[f"opt_{oname}"] = {"step": self._put(np.asarray(arrays[f"optim/{oname}/step"], np.float32)),
                                 "m": m, "v": v}
        s["num_updates"] = self._put(np.asarray(int(np.asarray(arrays["num_updates"])), np.int32))
        s["key"] = self._put(np.asarray(arrays["rng/jax_key"], np.uint32))
        self._s = s
        self._policy_dirty = True
        self._sync_policy()
        self.policy.generator().set_state(torch.as_tensor(np.asarray(arrays["rng/policy"]), dtype=torch.uint8))


__all__ = ["SUPPORTED_OPTIONS", "JaxSACAgent", "ParamMap", "check_supported", "import_jax"]
