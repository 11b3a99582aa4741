"""Convert published backbone weights into the project's safetensors format (learners.agents.backbones), so that
`--encoder-weights FILE` builds the right backbone from the file alone (its metadata names the architecture).

Two sources a lab can get:

- SERL / HIL-SERL's `resnet10_params.pkl` (ResNet-10 pretrained on ImageNet-1k, a pickled nested dict of arrays
  from flax: conv_init/kernel (7, 7, 3, 64), norm_init/{scale, bias}, ResNetBlock_i/{Conv_0, MyGroupNorm_0, Conv_1,
  MyGroupNorm_1[, conv_proj, norm_proj]}). It is read with a RESTRICTED unpickler: only numpy array (and numpy
  scalar / dtype) reconstruction, plain containers, and the flax / jax wrappers of those (FrozenDict, jax arrays)
  mapped onto plain dicts and numpy; any other global in the pickle is refused before anything runs, and object
  arrays are refused. Kernels go from flax HWIO to torch OIHW.
- torchvision's ResNet-18 `.pth` (read with torch.load(weights_only=True); `fc` dropped).

Usage::

    report = convert_encoder("resnet10_params.pkl", "serl_resnet10.safetensors")   # source detected by suffix
    report.architecture                                                            # 'resnet10'
    # then: robot-rl train --obs-mode pixels --encoder-weights serl_resnet10.safetensors
"""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from learners.agents.backbones import (
    ResNet10,
    ResNet18,
    check_state_dict,
    read_torchvision_resnet18,
    save_backbone_weights,
)
from robot_rl.errors import ConfigError, ShapeError

SOURCES = ("serl", "torchvision")
"""Weights sources `convert_encoder` reads: SERL's pickle ('serl'), torchvision's .pth ('torchvision')."""

_NUMPY_RECONSTRUCT: Any = np.zeros(1).__reduce__()[0]  # numpy's own array-reconstruction function (no private import)
_NUMPY_SCALAR: Any = np.float32(0).__reduce__()[0]


class RefusedPickle(ShapeError):
    """A pickle asked for something other than arrays and containers (it was not run)."""


def _safe_dtype(*args: Any) -> np.dtype[Any]:
    dt = np.dtype(*args)
    if dt.hasobject:
        raise RefusedPickle("the pickle holds an object array (arbitrary Python objects); only numeric arrays "
                            "are read")
    return dt


def _frombuffer(buf: Any, dtype: Any, shape: Any, order: str = "C") -> np.ndarray:
    dt = _safe_dtype(dtype)
    return np.frombuffer(bytes(buf), dtype=dt).reshape(shape, order=order).copy()  # type: ignore[call-overload]


def _jax_array(fun: Any, args: Any, arr_state: Any, aval_state: Any) -> np.ndarray:
    """A pickled jax Array as numpy: its payload is a numpy array pickled with numpy's own reduce."""
    del aval_state
    if fun is not _NUMPY_RECONSTRUCT:
        raise RefusedPickle("a pickled jax array whose payload is not a numpy array")
    arr = fun(*args)
    arr.__setstate__(arr_state)
    return np.asarray(arr)


def _encode(text: str, encoding: str = "utf-8") -> bytes:
    """Protocol-2 pickles write bytes as _codecs.encode(str, 'latin1'): a string to bytes, nothing else."""
    if not isinstance(text, str) or not isinstance(encoding, str):
        raise RefusedPickle("_codecs.encode on something other than a string")
    return text.encode(encoding)


def _frozen_dict(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return dict(*args, **kwargs)


_ALLOWED: dict[tuple[str, str], Any] = {
    **{(mod, "_reconstruct"): _NUMPY_RECONSTRUCT for mod in ("numpy.core.multiarray", "numpy._core.multiarray")},
    **{(mod, "scalar"): _NUMPY_SCALAR for mod in ("numpy.core.multiarray", "numpy._core.multiarray")},
    **{(mod, "_frombuffer"): _frombuffer for mod in ("numpy.core.numeric", "numpy._core.numeric")},
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): _safe_dtype,
    ("collections", "OrderedDict"): dict,
    ("_codecs", "encode"): _encode,
    ("flax.core.frozen_dict", "FrozenDict"): _frozen_dict,
    ("jax._src.array", "_reconstruct_array"): _jax_array,
}


class _ArraysOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise RefusedPickle(f"the pickle asks for {module}.{name}, which is not an array or a container; "
                                f"refused (only numpy arrays, dicts, lists and tuples are read, nothing runs)"
                                ) from None

    def persistent_load(self, pid: Any) -> Any:
        raise RefusedPickle("the pickle refers to external (persistent) objects; refused")


def load_array_pickle(path: str | os.PathLike[str]) -> Any:
    """A pickle of nested dicts / lists / tuples of numeric numpy arrays, read without running any other code.
    RefusedPickle (a ShapeError) for anything else; ConfigError for a missing file; ShapeError for a corrupt one."""
    if not os.path.isfile(path):
        raise ConfigError(f"{path}: no such file")
    data = Path(path).read_bytes()
    try:
        tree = _ArraysOnlyUnpickler(io.BytesIO(data)).load()
    except RefusedPickle as err:
        raise RefusedPickle(f"{path}: {err}") from None
    except Exception as err:  # truncated / not a pickle: UnpicklingError, EOFError, ValueError, ...
        raise ShapeError(f"{path}: not a readable pickle ({type(err).__name__}: {err})") from err
    _check_leaves(tree, str(path), "")
    return tree


def _check_leaves(node: Any, where: str, key: str) -> None:
    if isinstance(node, Mapping):
        for k, v in node.items():
            if not isinstance(k, str):
                raise ShapeError(f"{where}: key {k!r} under {key or '/'} is not a string")
            _check_leaves(v, where, f"{key}/{k}")
    elif isinstance(node, (list, tuple)):
        for i, v in enumerate(node):
            _check_leaves(v, where, f"{key}/{i}")
    elif isinstance(node, np.ndarray | np.generic):
        if np.asarray(node).dtype.kind not in "fiub":
            raise RefusedPickle(f"{where}: {key} is a {np.asarray(node).dtype} array, not numeric")
    elif node is not None and not isinstance(node, int | float | str | bool):
        raise RefusedPickle(f"{where}: {key} is a {type(node).__name__}")


def _find_resnet_root(tree: Any) -> Mapping[str, Any] | None:
    """The sub-dict holding conv_init and ResNetBlock_0 (the file may wrap it in params / pretrained_encoder)."""
    if not isinstance(tree, Mapping):
        return None
    if "conv_init" in tree and "ResNetBlock_0" in tree:
        return tree
    for v in tree.values():
        found = _find_resnet_root(v)
        if found is not None:
            return found
    return None


_SERL_BLOCK = {"Conv_0": "conv1", "MyGroupNorm_0": "norm1", "Conv_1": "conv2", "MyGroupNorm_1": "norm2",
               "conv_proj": "proj_conv", "norm_proj": "proj_norm"}


def _serl_leaf(module: str, leaf: str, arr: np.ndarray) -> tuple[str, torch.Tensor]:
    t = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32))
    if leaf == "kernel":
        return f"{module}.weight", (t.permute(3, 2, 0, 1).contiguous() if t.dim() == 4 else t)
    if leaf == "scale":
        return f"{module}.weight", t
    return f"{module}.{leaf}", t


def serl_resnet10_state_dict(tree: Any, where: str = "resnet10_params.pkl") -> dict[str, torch.Tensor]:
    """SERL's flax ResNet-10 parameter tree -> this project's ResNet10 state dict (names mapped, HWIO -> OIHW);
    ShapeError naming missing, unexpected or mis-shaped entries."""
    root = _find_resnet_root(tree)
    if root is None:
        raise ShapeError(f"{where}: no SERL ResNet encoder in the file (no dict with conv_init and ResNetBlock_0)")
    blocks = sorted(k for k in root if k.startswith("ResNetBlock_"))
    if len(blocks) != 4:
        raise ShapeError(f"{where}: {len(blocks)} ResNet blocks ({blocks[:6]}); SERL's resnetv1-10 has 4 "
                         f"(ResNetBlock_0..3); other depths are not converted")
    out: dict[str, torch.Tensor] = {}
    for name, sub in root.items():
        if not isinstance(sub, Mapping):
            raise ShapeError(f"{where}: {name} is not a parameter dict")
        if name in ("conv_init", "norm_init"):
            for leaf, arr in sub.items():
                k, t = _serl_leaf(name, leaf, arr)
                out[k] = t
        elif name.startswith("ResNetBlock_"):
            i = name[len("ResNetBlock_"):]
            for layer, params in sub.items():
                if layer not in _SERL_BLOCK or not isinstance(params, Mapping):
                    out[f"{name}.{layer}"] = torch.zeros(0)  # reported as unexpected below
                    continue
                for leaf, arr in params.items():
                    k, t = _serl_leaf(f"stages.{i}.{_SERL_BLOCK[layer]}", leaf, arr)
                    out[k] = t
        else:
            out[name] = torch.zeros(0)  # reported as unexpected below
    check_state_dict(ResNet10().state_dict(), out, where)
    return out


@dataclasses.dataclass(frozen=True)
class ConvertReport:
    """What `convert_encoder` wrote."""

    source: str
    architecture: str
    tensors: int
    parameters: int
    out: Path


def detect_source(path: str | os.PathLike[str]) -> str:
    """'serl' for a .pkl / .pickle, 'torchvision' for a .pth / .pt; ConfigError otherwise (say which)."""
    suffix = Path(path).suffix.lower()
    if suffix in (".pkl", ".pickle"):
        return "serl"
    if suffix in (".pth", ".pt"):
        return "torchvision"
    raise ConfigError(f"{path}: cannot tell the weights' source from the suffix {suffix!r}; name it "
                      f"(--from serl for SERL's resnet10_params.pkl, --from torchvision for a ResNet-18 .pth)")


def convert_encoder(src: str | os.PathLike[str], out: str | os.PathLike[str], source: str | None = None,
                    ) -> ConvertReport:
    """Convert `src` (SERL's resnet10_params.pkl or torchvision's resnet18 .pth) to a self-describing
    safetensors file `out`; the source is detected from the suffix unless given (one of SOURCES)."""
    kind = source or detect_source(src)
    if kind not in SOURCES:
        raise ConfigError(f"unknown weights source {kind!r}; one of {SOURCES}")
    net: ResNet10 | ResNet18
    if kind == "serl":
        net = ResNet10()
        net.load_state_dict(serl_resnet10_state_dict(load_array_pickle(src), str(src)))
        note = f"SERL resnetv1-10 (flax) from {Path(src).name}"
    else:
        net = ResNet18()
        net.load_state_dict(read_torchvision_resnet18(src))
        note = f"torchvision resnet18 from {Path(src).name}"
    out = Path(out)
    if out.parent and not out.parent.exists():
        out.parent.mkdir(parents=True)
    save_backbone_weights(net, out, source=note)
    sd = net.state_dict()
    return ConvertReport(kind, net.architecture, len(sd), sum(p.numel() for p in net.parameters()), out)
