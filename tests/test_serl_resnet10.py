"""SERL's released ResNet-10 parameters (resnet10_params.pkl): a synthetic pickle with SERL's flax key structure
and shapes converts to our safetensors format and computes what SERL's flax module computes (an independent
jax.lax reference of resnet_v1.ResNetEncoder below: 'SAME' padding, flax HWIO kernels, GroupNorm(4)); malicious
pickles are refused before anything in them runs."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch

from learners.agents.backbones import ResNet10, load_backbone_weights, weights_architecture
from learners.agents.options import weights_file_encoder
from learners.agents.weights_convert import RefusedPickle, convert_encoder, load_array_pickle
from robot_rl.errors import ConfigError, ShapeError

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[1]


def serl_params(seed: int = 0) -> dict:
    """SERL's resnetv1-10 parameter tree as flax names it (ResNetEncoder's submodules), with its shapes."""
    rng = np.random.default_rng(seed)

    def conv(k: int, cin: int, cout: int) -> dict:
        return {"kernel": (rng.standard_normal((k, k, cin, cout)) * np.sqrt(2.0 / (k * k * cin))).astype(np.float32)}

    def norm(c: int) -> dict:
        return {"scale": (1 + 0.1 * rng.standard_normal(c)).astype(np.float32),
                "bias": (0.1 * rng.standard_normal(c)).astype(np.float32)}

    tree: dict = {"conv_init": conv(7, 3, 64), "norm_init": norm(64)}
    prev = 64
    for i, c in enumerate((64, 128, 256, 512)):
        block = {"Conv_0": conv(3, prev, c), "MyGroupNorm_0": norm(c), "Conv_1": conv(3, c, c),
                 "MyGroupNorm_1": norm(c)}
        if prev != c:
            block.update(conv_proj=conv(1, prev, c), norm_proj=norm(c))
        tree[f"ResNetBlock_{i}"] = block
        prev = c
    return tree


def serl_forward_reference(p: dict, images: np.ndarray) -> np.ndarray:
    """SERL's flax ResNetEncoder (resnetv1-10, norm='group', pre_pooling) in plain jax.lax, NHWC."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def conv(x, k, stride, padding):  # type: ignore[no-untyped-def]
        return jax.lax.conv_general_dilated(x, jnp.asarray(k), (stride, stride), padding,
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def gn(x, q):  # type: ignore[no-untyped-def]  # flax GroupNorm(num_groups=4, epsilon=1e-5)
        b, h, w, c = x.shape
        g = x.reshape(b, h, w, 4, c // 4)
        mean = g.mean(axis=(1, 2, 4), keepdims=True)
        var = g.var(axis=(1, 2, 4), keepdims=True)
        g = (g - mean) / jnp.sqrt(var + 1e-5)
        return g.reshape(b, h, w, c) * q["scale"] + q["bias"]

    x = (jnp.asarray(images, jnp.float32) / 255.0 - jnp.array([0.485, 0.456, 0.406])) / jnp.array(
        [0.229, 0.224, 0.225])
    x = jax.nn.relu(gn(conv(x, p["conv_init"]["kernel"], 2, [(3, 3), (3, 3)]), p["norm_init"]))
    x = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")  # nn.max_pool SAME
    for i in range(4):
        q = p[f"ResNetBlock_{i}"]
        stride = 1 if i == 0 else 2
        y = jax.nn.relu(gn(conv(x, q["Conv_0"]["kernel"], stride, "SAME"), q["MyGroupNorm_0"]))
        y = gn(conv(y, q["Conv_1"]["kernel"], 1, "SAME"), q["MyGroupNorm_1"])
        r = x if "conv_proj" not in q else gn(conv(x, q["conv_proj"]["kernel"], stride, "SAME"), q["norm_proj"])
        x = jax.nn.relu(r + y)
    return np.asarray(x)


@pytest.mark.parametrize("size", [128, 50])  # SERL's size; an odd one (SAME pads symmetrically there)
def test_converted_serl_resnet10_computes_what_serl_computes(tmp_path: Path, size: int) -> None:
    params = serl_params()
    pkl = tmp_path / "resnet10_params.pkl"
    pkl.write_bytes(pickle.dumps(params))
    out = tmp_path / "serl_resnet10.safetensors"
    report = convert_encoder(pkl, out)
    assert report.architecture == "resnet10" and report.source == "serl" and report.tensors == 36
    n_leaves = sum(a.size for sub in params.values() for x in sub.values()
                   for a in (x.values() if isinstance(x, dict) else [x]))
    assert report.parameters == n_leaves == 4_905_792  # every array of the file, none invented
    assert weights_architecture(out) == "resnet10" and weights_file_encoder(str(out)) == "resnet10"
    net = ResNet10()
    load_backbone_weights(net, out)
    images = np.random.default_rng(1).integers(0, 256, (2, size, size, 3), dtype=np.uint8)
    ours = net.eval()(torch.from_numpy(images)).permute(0, 2, 3, 1).detach().numpy()
    ref = serl_forward_reference(params, images)
    assert ours.shape == ref.shape == (2, *net.output_hw(size, size), 512)
    np.testing.assert_allclose(ours, ref, atol=2e-4 * float(np.abs(ref).max()))


def test_serl_pickle_wrapped_and_other_pickle_forms(tmp_path: Path) -> None:
    """The encoder may sit under params / pretrained_encoder, in OrderedDicts; protocol 5 pickles read too."""
    params = serl_params()
    wrapped = {"params": OrderedDict(pretrained_encoder=params)}
    for proto in (2, 4, 5):
        pkl = tmp_path / f"p{proto}.pkl"
        pkl.write_bytes(pickle.dumps(wrapped, protocol=proto))
        convert_encoder(pkl, tmp_path / f"p{proto}.safetensors")
        sd = ResNet10()
        load_backbone_weights(sd, tmp_path / f"p{proto}.safetensors")
        np.testing.assert_array_equal(sd.stages[3].proj_conv.weight.detach().numpy(),
                                      params["ResNetBlock_3"]["conv_proj"]["kernel"].transpose(3, 2, 0, 1))


def test_serl_structure_errors_name_the_problem(tmp_path: Path) -> None:
    def write(tree: object, name: str) -> Path:
        p = tmp_path / name
        p.write_bytes(pickle.dumps(tree))
        return p

    params = serl_params()
    bad = serl_params()
    del bad["ResNetBlock_2"]["norm_proj"]
    with pytest.raises(ShapeError, match=r"missing \['stages.2.proj_norm.bias'"):
        convert_encoder(write(bad, "missing.pkl"), tmp_path / "o.safetensors")
    bad = serl_params()
    bad["ResNetBlock_1"]["Conv_0"]["kernel"] = np.zeros((3, 3, 64, 64), np.float32)
    with pytest.raises(ShapeError, match=r"stages.1.conv1.weight: file \(64, 64, 3, 3\) vs model \(128, 64, 3, 3\)"):
        convert_encoder(write(bad, "shape.pkl"), tmp_path / "o.safetensors")
    bad = dict(params, ResNetBlock_4=params["ResNetBlock_3"], ResNetBlock_5=params["ResNetBlock_3"])
    with pytest.raises(ShapeError, match="6 ResNet blocks"):
        convert_encoder(write(bad, "deep.pkl"), tmp_path / "o.safetensors")
    with pytest.raises(ShapeError, match="no SERL ResNet encoder"):
        convert_encoder(write({"a": np.zeros(3)}, "other.pkl"), tmp_path / "o.safetensors")
    (tmp_path / "trunc.pkl").write_bytes(pickle.dumps(params)[:1000])
    with pytest.raises(ShapeError, match="not a readable pickle"):
        convert_encoder(tmp_path / "trunc.pkl", tmp_path / "o.safetensors")
    with pytest.raises(ConfigError, match="no such file"):
        convert_encoder(tmp_path / "absent.pkl", tmp_path / "o.safetensors")
    with pytest.raises(ConfigError, match="cannot tell the weights' source"):
        convert_encoder(tmp_path / "w.bin", tmp_path / "o.safetensors")
    assert not (tmp_path / "o.safetensors").exists()


class _Evil:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickles_are_refused_before_anything_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    params = serl_params()
    params["conv_init"]["kernel"] = _Evil(marker)  # type: ignore[assignment]
    (tmp_path / "evil.pkl").write_bytes(pickle.dumps(params))
    with pytest.raises(RefusedPickle, match=r"asks for (posix|os|nt)\.system.*refused"):
        load_array_pickle(tmp_path / "evil.pkl")
    assert not marker.exists()
    (tmp_path / "obj.pkl").write_bytes(pickle.dumps({"a": np.array([_Evil(marker)], dtype=object)}))
    with pytest.raises(RefusedPickle):
        load_array_pickle(tmp_path / "obj.pkl")
    assert not marker.exists()
    (tmp_path / "eval.pkl").write_bytes(b"cbuiltins\neval\n(S'1+1'\ntR.")
    with pytest.raises(RefusedPickle, match=r"builtins\.eval"):
        load_array_pickle(tmp_path / "eval.pkl")


def test_convert_encoder_command(tmp_path: Path) -> None:
    pkl = tmp_path / "resnet10_params.pkl"
    pkl.write_bytes(pickle.dumps(serl_params()))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.run([sys.executable, "-m", "robot_rl.cli", "convert-encoder", str(pkl),
                          str(tmp_path / "w" / "r10.safetensors")], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    assert '"architecture": "resnet10"' in run.stdout and (tmp_path / "w" / "r10.safetensors").is_file()
    (tmp_path / "evil.pkl").write_bytes(pickle.dumps({"x": _Evil(tmp_path / "pwned")}))
    run = subprocess.run([sys.executable, "-m", "robot_rl.cli", "convert-encoder", str(tmp_path / "evil.pkl"),
                          str(tmp_path / "e.safetensors")], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=120)
    assert run.returncode == 1 and "refused" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "pwned").exists()
