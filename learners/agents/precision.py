"""Float32 matmul precision of the torch agent's update on a CUDA device (AgentConfig.matmul_precision).

On Ampere and newer GPUs float32 matmuls and convolutions can run on the TF32 tensor cores (10-bit mantissa inputs,
float32 accumulation): several times the float32 rate of the image update's frozen ResNet and heads, which are
arithmetic-bound there. torch keeps two process-wide switches for it, `torch.backends.cuda.matmul.allow_tf32`
(off by default) and `torch.backends.cudnn.allow_tf32` (on by default: convolutions already use TF32). The option:

- 'default': leave both switches as the process has them (torch's defaults: float32 matmuls, TF32 convolutions);
- 'high': TF32 for matmuls and convolutions (torch.set_float32_matmul_precision('high') plus cuDNN's switch);
- 'highest': true float32 for both.

`matmul_precision(cfg, device)` sets the switches for the duration of one update (SACAgent.update, CUDA-graph
capture included, so a captured graph keeps the kernels chosen under them) and restores them after, so agents with
different settings can share a process (benchmarks/learner_speed.py interleaves them). On a CPU it does nothing:
results there are the same whatever the option says.

Usage::

    with matmul_precision(agent.cfg, agent.device):
        ...   # matmuls / convolutions on a CUDA device follow cfg.matmul_precision
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from learners.agents.config import AgentConfig


@contextlib.contextmanager
def matmul_precision(cfg: AgentConfig, device: torch.device) -> Iterator[None]:
    """cfg.matmul_precision in effect inside the block on a CUDA `device` (see the module docstring)."""
    if cfg.matmul_precision == "default" or device.type != "cuda":
        yield
        return
    tf32 = cfg.matmul_precision == "high"
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def precision_note(cfg: AgentConfig) -> str:
    """'matmul_precision=high (TF32 matmuls + convolutions)' etc.: the GPU notice's words for the option."""
    what = {"default": "float32 matmuls, TF32 convolutions", "high": "TF32 matmuls + convolutions",
            "highest": "float32 matmuls + convolutions"}[cfg.matmul_precision]
    return f"matmul_precision={cfg.matmul_precision} ({what})"


__all__ = ["matmul_precision", "precision_note"]
