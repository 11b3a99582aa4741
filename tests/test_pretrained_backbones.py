"""Pretrained backbones a lab can get: torchvision's ResNet-18 checkpoint (a synthetic .pth with the real key names
and shapes; nothing downloads), the self-describing safetensors format, the agent built from a weights file."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from learners.agents.backbones import (
    ResNet10,
    ResNet18,
    backbone_keys,
    load_backbone_weights,
    read_torchvision_resnet18,
    save_backbone_weights,
    weights_architecture,
)
from learners.agents.config import AgentConfig
from learners.agents.options import weights_file_encoder
from learners.agents.sac import SACAgent
from learners.agents.weights_convert import convert_encoder
from robot_rl.errors import ConfigError, ShapeError
from robot_rl.specs import ArraySpec, EnvSpec

torch.set_num_threads(1)

# A few entries of torchvision's published resnet18 state dict (resnet18-f37072fd.pth), written down by hand.
TORCHVISION_RESNET18_SAMPLE = {
    "conv1.weight": (64, 3, 7, 7), "bn1.running_var": (64,), "bn1.num_batches_tracked": (),
    "layer1.0.conv1.weight": (64, 64, 3, 3), "layer1.1.bn2.bias": (64,),
    "layer2.0.downsample.0.weight": (128, 64, 1, 1), "layer2.0.downsample.1.running_mean": (128,),
    "layer3.1.bn2.weight": (256,), "layer4.0.conv1.weight": (512, 256, 3, 3), "layer4.1.bn2.running_var": (512,),
    "fc.weight": (1000, 512), "fc.bias": (1000,),
}
TORCHVISION_RESNET18_ENTRIES = 122      # len(torchvision.models.resnet18().state_dict())
TORCHVISION_RESNET18_PARAMS = 11_689_512  # parameters including fc (torchvision's model card)


def _torchvision_like_state_dict(seed: int = 0) -> dict[str, torch.Tensor]:
    """What torchvision's .pth holds: our trunk's entries (random, BN stats non-trivial) plus the fc layer."""
    g = torch.Generator().manual_seed(seed)
    sd = {k: (torch.randn(v.shape, generator=g) * 0.05 if v.is_floating_point() else v.clone())
          for k, v in ResNet18().state_dict().items()}
    for k in sd:
        if k.endswith("running_var"):
            sd[k] = sd[k].abs() + 0.5
    sd["fc.weight"] = torch.randn(1000, 512, generator=g) * 0.01
    sd["fc.bias"] = torch.zeros(1000)
    return sd


def test_resnet18_has_torchvisions_names_and_shapes() -> None:
    sd = _torchvision_like_state_dict()
    assert len(sd) == TORCHVISION_RESNET18_ENTRIES
    for k, shape in TORCHVISION_RESNET18_SAMPLE.items():
        assert tuple(sd[k].shape) == shape, k
    n_params = sum(p.numel() for p in ResNet18().parameters()) + 1000 * 512 + 1000
    assert n_params == TORCHVISION_RESNET18_PARAMS
    out = ResNet18()(torch.zeros(2, 64, 64, 3, dtype=torch.uint8))
    assert out.shape == (2, 512, 2, 2) and ResNet18().output_hw(64, 64) == (2, 2)
    assert ResNet18().output_hw(128, 96) == (4, 3) and ResNet18()(torch.zeros(1, 128, 96, 3,
                                                                             dtype=torch.uint8)).shape[2:] == (4, 3)


def test_torchvision_pth_loads_with_fixed_batchnorm(tmp_path: Path) -> None:
    sd = _torchvision_like_state_dict()
    pth = tmp_path / "resnet18-f37072fd.pth"
    torch.save(sd, pth)
    net = ResNet18()
    load_backbone_weights(net, pth)
    for k, v in net.state_dict().items():
        assert torch.equal(v, sd[k]), k
    assert weights_architecture(pth) == "resnet18"
    # BatchNorm uses the file's running statistics in train mode too (a fixed affine map), matching eval-mode BN
    x = torch.randn(3, 64, 8, 8)
    bn = torch.nn.BatchNorm2d(64).eval()
    bn.load_state_dict({k[len("bn1."):]: v for k, v in sd.items() if k.startswith("bn1.")})
    net.train()
    assert torch.allclose(net.bn1(x), bn(x), atol=1e-5)
    # round trip through our safetensors format, which names the architecture
    st = tmp_path / "r18.safetensors"
    save_backbone_weights(net, st, source="test")
    assert weights_architecture(st) == "resnet18" and weights_file_encoder(str(st)) == "resnet18"
    other = ResNet18()
    load_backbone_weights(other, st)
    imgs = torch.randint(0, 256, (2, 32, 32, 3), dtype=torch.uint8)
    assert torch.equal(other.eval()(imgs), net.eval()(imgs))
    with pytest.raises(ShapeError, match="resnet18 backbone, not resnet10"):
        load_backbone_weights(ResNet10(), st)
    # the converter writes the same file from the .pth
    report = convert_encoder(pth, tmp_path / "conv" / "r18.safetensors")
    assert (report.architecture, report.source, report.tensors) == ("resnet18", "torchvision", 120)
    conv = ResNet18()
    load_backbone_weights(conv, report.out)
    assert torch.equal(conv.eval()(imgs), net(imgs))


def test_torchvision_pth_errors_are_clear(tmp_path: Path) -> None:
    sd = _torchvision_like_state_dict()
    with pytest.raises(ConfigError, match="not a file"):
        read_torchvision_resnet18(tmp_path / "absent.pth")
    bad = dict(sd)
    del bad["layer4.1.bn2.running_var"]
    torch.save(bad, tmp_path / "missing.pth")
    with pytest.raises(ShapeError, match=r"missing \['layer4.1.bn2.running_var'\]"):
        read_torchvision_resnet18(tmp_path / "missing.pth")
    bad = dict(sd, **{"layer5.0.conv1.weight": torch.zeros(1)})
    torch.save(bad, tmp_path / "extra.pth")
    with pytest.raises(ShapeError, match=r"unexpected \['layer5.0.conv1.weight'\]"):
        read_torchvision_resnet18(tmp_path / "extra.pth")
    bad = dict(sd, **{"conv1.weight": torch.zeros(64, 1, 7, 7)})
    torch.save(bad, tmp_path / "shape.pth")
    with pytest.raises(ShapeError, match=r"conv1.weight: file \(64, 1, 7, 7\) vs model \(64, 3, 7, 7\)"):
        read_torchvision_resnet18(tmp_path / "shape.pth")
    (tmp_path / "corrupt.pth").write_bytes(b"\x80\x04not a checkpoint")
    with pytest.raises(ShapeError, match="not a readable torch checkpoint"):
        read_torchvision_resnet18(tmp_path / "corrupt.pth")
    torch.save({"weights": sd, "net": torch.nn.Linear(2, 2)}, tmp_path / "code.pth")  # a pickled module: code
    with pytest.raises(ShapeError, match="not a readable torch checkpoint of plain tensors"):
        read_torchvision_resnet18(tmp_path / "code.pth")
    torch.save([1, 2], tmp_path / "list.pth")
    with pytest.raises(ShapeError, match="expected a state dict"):
        read_torchvision_resnet18(tmp_path / "list.pth")


def test_old_metadata_less_resnet10_files_still_load(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    net = ResNet10()
    path = tmp_path / "old.safetensors"
    save_file({k: v.contiguous() for k, v in net.state_dict().items()}, str(path))  # no metadata
    assert weights_architecture(path) is None and weights_file_encoder(str(path)) == "resnet10"
    load_backbone_weights(ResNet10(), path)
    assert set(backbone_keys("resnet10")) == set(net.state_dict())
    with pytest.raises(ShapeError, match="missing"):
        load_backbone_weights(ResNet18(), path)


def test_agent_with_frozen_resnet18_from_a_pth(tmp_path: Path) -> None:
    pth = tmp_path / "resnet18.pth"
    torch.save(_torchvision_like_state_dict(), pth)
    spec = EnvSpec("img", (ArraySpec("images/front", (32, 32, 3), "uint8", 0, 255),
                           ArraySpec("state", (4,), "float32")), ArraySpec("action", (2,), "float32", -1, 1), 10.0)
    cfg = AgentConfig(encoder="resnet18", encoder_weights=str(pth), image_latent_dim=16, proprio_latent_dim=8,
                      hidden_dims=(16,), ensemble_size=2, batch_size=4, device="cpu")
    agent = SACAgent(spec, cfg)
    assert agent.encoder.all_backbones_frozen
    frozen = agent.encoder.frozen_names()
    assert "cameras.images__front.backbone.layer4.1.bn2.running_var" in frozen
    with pytest.raises(ConfigError, match="encoder='resnet18' with freeze_encoder=True needs encoder_weights"):
        SACAgent(spec, AgentConfig(encoder="resnet18", device="cpu"))


def test_the_weights_file_picks_the_encoder_on_the_command_line_and_elsewhere(tmp_path: Path) -> None:
    """`--encoder-weights FILE` alone builds the file's architecture (train's flags, the reward classifier's
    command); the JAX backend refuses resnet18 in one line."""
    from learners.agents.jax.agent import check_supported
    from learners.rewards.classifier import ClassifierModelConfig, RewardClassifier, classifier_encoder
    from learners.training.flags import build_train_parser, train_config

    st = tmp_path / "r18.safetensors"
    torch.save(_torchvision_like_state_dict(), tmp_path / "r18.pth")
    convert_encoder(tmp_path / "r18.pth", st)
    args = ["--task", "twin-pick-cube", "--obs-mode", "pixels", "--encoder-weights", str(st), "--out", "x"]
    cfg = train_config(build_train_parser().parse_args(args)).agent_config(has_cameras=True)
    assert (cfg.encoder, cfg.encoder_weights) == ("resnet18", str(st))
    with pytest.raises(ConfigError, match="encoder='resnet18' is not supported by backend=jax"):
        check_supported(cfg.replace(backend="jax"))
    assert classifier_encoder(None, str(st)) == "resnet18" and classifier_encoder(None, None) == "conv"
    assert classifier_encoder("resnet10", str(st)) == "resnet10"  # named: then loading the file says it does not fit
    model = RewardClassifier({"images/front": (32, 32, 3)},
                             ClassifierModelConfig(encoder="resnet18", encoder_weights=str(st), image_latent_dim=8))
    backbone = model.encoders["images__front"].backbone
    assert isinstance(backbone, ResNet18) and not any(p.requires_grad for p in backbone.parameters())
