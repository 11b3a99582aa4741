"""`robot-rl convert-encoder`: published backbone weights -> the project's self-describing safetensors file
(its metadata names the architecture, so `--encoder-weights OUT` builds the right backbone). Sources: SERL /
HIL-SERL's `resnet10_params.pkl` (read with an arrays-only unpickler: nothing in the pickle runs) and torchvision's
ResNet-18 `.pth` (torch.load(weights_only=True)). Nothing is downloaded. The library is
learners.agents.weights_convert.

Usage::

    robot-rl convert-encoder resnet10_params.pkl weights/serl_resnet10.safetensors
    robot-rl convert-encoder resnet18-f37072fd.pth weights/resnet18.safetensors
    robot-rl train --task twin-pick-cube --obs-mode pixels --encoder-weights weights/serl_resnet10.safetensors
"""

from __future__ import annotations

import argparse
import json

from learners.agents.weights_convert import SOURCES, convert_encoder


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="robot-rl convert-encoder",
                                description="Convert SERL's resnet10_params.pkl or torchvision's ResNet-18 .pth to "
                                            "a safetensors backbone file for --encoder-weights.")
    p.add_argument("src", help="resnet10_params.pkl (SERL / HIL-SERL) or a torchvision resnet18 .pth")
    p.add_argument("out", help="the safetensors file to write")
    p.add_argument("--from", dest="source", choices=SOURCES, default=None,
                   help="the weights' source (default: from the suffix: .pkl serl, .pth torchvision)")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    r = convert_encoder(args.src, args.out, args.source)
    print(json.dumps({"out": str(r.out), "architecture": r.architecture, "source": r.source, "tensors": r.tensors,
                      "parameters": r.parameters}))
    return 0
