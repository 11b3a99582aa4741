"""`robot-rl pretrain-encoder`: pretrain a camera backbone on the cell's own demo / label / play episodes and write
the safetensors file `--encoder-weights` freezes in the agent. The objective (one frame -> the TCP position now and
at the next gripper event, from proprio and the recorded gripper command only, so a real cell has every label) is
explained in learners.training.pretrain_encoder, the library behind this command.

Usage::

    robot-rl record-demos --task twin-pick-cube --obs-mode pixels --episodes 20 --out demos/pick
    robot-rl pretrain-encoder demos/pick --out weights/cell_resnet10.safetensors --steps 300
    robot-rl train --task twin-pick-cube --obs-mode pixels --encoder-weights weights/cell_resnet10.safetensors
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from learners.agents.backbones import ARCHITECTURES
from learners.training.pretrain_encoder import PretrainConfig, pretrain_encoder


def build_parser() -> argparse.ArgumentParser:
    d = PretrainConfig(episodes=("x",))
    p = argparse.ArgumentParser(prog="robot-rl pretrain-encoder",
                                description="Pretrain a camera backbone on recorded episodes (TCP now and at the "
                                            "next gripper event) and write a safetensors backbone file.")
    p.add_argument("episodes", nargs="+", help="episode directories or files (demos, labels, play)")
    p.add_argument("--out", required=True, help="the safetensors file to write (a JSON report goes beside it)")
    p.add_argument("--arch", default=d.architecture, choices=ARCHITECTURES, help="backbone architecture")
    p.add_argument("--init-weights", default=None, help="start from this weights file (e.g. convert-encoder's)")
    p.add_argument("--steps", type=int, default=d.steps, help="gradient steps")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="frames per step")
    p.add_argument("--lr", type=float, default=d.lr, help="Adam learning rate")
    p.add_argument("--augment-pad", type=int, default=d.augment_pad_px, help="random-shift padding, pixels")
    p.add_argument("--gripper-index", type=int, default=d.gripper_index, help="action element of the gripper")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--threads", type=int, default=d.threads, help="torch CPU threads (0: torch's default)")
    return p


def main(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    cfg = PretrainConfig(episodes=tuple(a.episodes), out=a.out, architecture=a.arch, init_weights=a.init_weights,
                         steps=a.steps, batch_size=a.batch_size, lr=a.lr, augment_pad_px=a.augment_pad,
                         gripper_index=a.gripper_index, seed=a.seed, threads=a.threads)
    report = pretrain_encoder(cfg, log=lambda s: print(f"[pretrain-encoder] {s}", file=sys.stderr, flush=True))
    print(json.dumps(dataclasses.asdict(report)))
    return 0
