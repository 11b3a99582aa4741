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
import functools
import warnings
from collections.abc import Iterator

import torch

from learners.agents.config import AgentConfig
from robot_rl.errors import ConfigError


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


@functools.cache
def cpu_has_native_bf16() -> bool:
    """Whether this CPU runs bf16 matmuls and convolutions in hardware (AVX512-BF16 or AMX, as oneDNN reports it).
    Without them torch emulates bf16 on a CPU, slower than float32, so a bf16 setting there costs instead of saving
    (benchmarks/feature_cache.py measured the gain on a CPU with AVX512-BF16). Cached: asked once per process."""
    try:
        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a torch build without the query: assume emulation
        return False


def bf16_cpu_warning(cfg: AgentConfig, device: torch.device) -> str | None:
    """One line when `cfg` asks for bf16 (mixed_precision or backbone_precision) on a CPU without native bf16
    (`cpu_has_native_bf16`), naming the settings to turn off; None otherwise."""
    if device.type != "cpu" or cpu_has_native_bf16():
        return None
    asked = [(name, off) for name, off in (("mixed_precision", "off"), ("backbone_precision", "float32"))
             if getattr(cfg, name) == "bf16"]  # each bf16 setting with the value that turns it off
    if not asked:
        return None
    return (f"{', '.join(f'{name}=bf16' for name, _ in asked)} on a CPU without native bf16 (AVX512-BF16 or AMX): "
            f"torch emulates it, slower than float32; {' '.join(f'--set {name}={off}' for name, off in asked)} "
            "turns it off")


def check_bf16(cfg: AgentConfig, device: torch.device) -> None:
    """ConfigError when cfg.mixed_precision='bf16' cannot run on `device` (neither a CPU nor a CUDA GPU with
    bfloat16); a RuntimeWarning (`bf16_cpu_warning`) when bf16 would be emulated on this CPU."""
    if cfg.mixed_precision == "bf16" and not (device.type == "cpu" or (
            device.type == "cuda" and torch.cuda.is_bf16_supported())):
        raise ConfigError(f"mixed_precision=bf16 needs a CPU or a CUDA GPU with bfloat16 (Ampere or newer); "
                          f"device {device} has none: use --set mixed_precision=off")
    emulated = bf16_cpu_warning(cfg, device)
    if emulated is not None:
        warnings.warn(emulated, RuntimeWarning, stacklevel=3)


def precision_note(cfg: AgentConfig) -> str:
    """'matmul_precision=high (TF32 matmuls + convolutions)' etc.: the GPU notice's words for the option."""
    what = {"default": "float32 matmuls, TF32 convolutions", "high": "TF32 matmuls + convolutions",
            "highest": "float32 matmuls + convolutions"}[cfg.matmul_precision]
    return f"matmul_precision={cfg.matmul_precision} ({what})"


__all__ = ["bf16_cpu_warning", "check_bf16", "cpu_has_native_bf16", "matmul_precision", "precision_note"]
