"""CUDA-graph capture of the torch agent's whole update (AgentConfig.cuda_graphs).

On a GPU the eager state update is bound by kernel launches, not by arithmetic: one RLPD update (ensemble 10, batch
256, UTD 8) launches ~4,250 small kernels, each costing the host a few microseconds. `GraphedUpdate` records the
update once into a `torch.cuda.CUDAGraph` and replays it: the host then issues one graph launch per update.

What is in the graph: everything after the batch has been prepared (learners.agents.sac.SACAgent._update_tensors):
the target-subset draw of every critic step (torch.rand(...).argsort on the device, from the agent's generator,
registered with the graph so that each replay draws fresh numbers), the next-action noise, the k critic steps with
their Adam steps (capturable: the step counters live on the device) and soft target updates, the actor step and the
temperature step, and the metrics stacked into one (M,) tensor. What stays outside: `_prepare` (checks, the
host-to-device copy, n-step reward sums, the minibatch reordering; for cameras the DrQ shifts and the frozen
backbone, which are large kernels where launch cost does not matter) and the one device-to-host copy of the metrics.

Capture (the first update of a given batch shape; torch's recipe): copy the prepared batch into static tensors,
run `warmup` updates on a side stream (lazy initialisation: Adam states, cuBLAS workspaces, torch.compile's first
trace), put the agent back to its state before the warm-up (SACAgent.state_dict / load_state_dict: weights, Adam,
RNG, counters, so the warm-up leaves no trace), then capture one update and replay it for the batch at hand. Each
later update copies its prepared tensors into the static ones and replays. A batch of another shape (or
dtype, or with other columns) runs eager, with one warning. A capture that raises falls back to eager for good,
with one RuntimeWarning naming the error (`status` says which path runs). Loading a checkpoint
(SACAgent.load_state_dict replaces the Adam state tensors) drops the graph; the next update captures again.

Replay sampling: the state batch is small (2,048 rows x ~60 floats per update at UTD 8), so replay stays on the host
and learners.replay.prefetch.BatchPrefetcher (on by default on CUDA) draws the next batch in a thread into pinned
memory and copies it on a side stream while the graph of the current one runs: sampling leaves the critical path
without a second, device-side copy of the buffers (whose contents, n-step windows and Monte-Carlo returns change as
episodes arrive). The JAX backend keeps state replay on the device instead (learners.agents.jax.device_replay),
where the whole update is one XLA program anyway.

Not with mixed_precision=bf16 (autocast's cache of cast weights is not valid across replays; AgentConfig refuses
cuda_graphs='on' with it and 'auto' leaves it off). Equivalence with the eager update (same losses on the same
batches, the same weights after N updates) is tested on a GPU by tests/test_cuda_graphs.py.

Usage (SACAgent does this itself; `step` = its _update_tensors)::

    graphs = GraphedUpdate(step, agent.generator, optimizers, agent.state_dict, agent.load_state_dict)
    metrics = graphs(prepared_batch)      # (M,) float32 tensor on the device (the static output of the graph)
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from learners.agents.config import AgentConfig
from learners.agents.sac_batch import UpdateBatch

Step = Callable[[UpdateBatch], torch.Tensor]
"""The captured function: a prepared batch -> the update's metrics as one (M,) float32 tensor on the device."""

WARMUP_UPDATES = 3
"""Updates run (and then undone) on a side stream before the capture."""


def graphs_wanted(cfg: AgentConfig) -> bool:
    """cfg.cuda_graphs resolved for an agent on a CUDA device: 'auto' = the torch backend without mixed precision
    (with or without cameras: measured faster in both cases), 'on' = the torch backend, 'off' = never."""
    if cfg.cuda_graphs == "off" or cfg.backend != "torch":
        return False
    return cfg.cuda_graphs == "on" or cfg.mixed_precision == "off"


def graphs_mode(cfg: AgentConfig, device: torch.device) -> tuple[bool, str | None]:
    """(capture the update?, a one-line reason when cfg.cuda_graphs='on' cannot be honoured, else None):
    `graphs_wanted` on a CUDA device, never elsewhere."""
    if not graphs_wanted(cfg):
        return False, None
    cuda = device.type == "cuda" and torch.cuda.is_available()
    if cfg.cuda_graphs == "auto":
        return cuda, None
    if not cuda:
        return False, f"cuda_graphs=on needs a CUDA device (this agent runs on {device}); the update runs eager"
    return True, None


def make_capturable(optimizers: Sequence[torch.optim.Optimizer]) -> None:
    """Every param group capturable (torch refuses to capture an optimizer step otherwise), with any existing
    step counter moved to its parameter's device as capturable Adam keeps it."""
    for opt in optimizers:
        for group in opt.param_groups:
            group["capturable"] = True
            for p in group["params"]:
                st = opt.state.get(p)
                if st and "step" in st and st["step"].device != p.device:
                    st["step"] = st["step"].to(p.device, torch.float32)


def ensure_adam_state(optimizers: Sequence[torch.optim.Optimizer]) -> None:
    """Give every parameter of an Adam without state yet the fresh state Adam would create at its first step
    (step 0 on the device, zero moments): created inside a capture, that initialisation would be recorded and rerun
    by every replay."""
    for opt in optimizers:
        for group in opt.param_groups:
            for p in group["params"]:
                if not opt.state.get(p):
                    opt.state[p] = {"step": torch.zeros((), dtype=torch.float32, device=p.device),
                                    "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                                    "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format)}


def _signature(b: UpdateBatch) -> tuple[Any, ...]:
    """What a captured graph is specific to: every tensor's name, shape and dtype, k and the row order."""
    parts: list[Any] = [b.k, b.strided]
    for f in dataclasses.fields(b):
        v = getattr(b, f.name)
        if isinstance(v, torch.Tensor):
            parts.append((f.name, tuple(v.shape), v.dtype))
        elif isinstance(v, Mapping):
            parts.append((f.name, tuple((k, tuple(t.shape), t.dtype) for k, t in sorted(v.items()))))
        elif v is None:
            parts.append((f.name, None))
    return tuple(parts)


def _static_copy(b: UpdateBatch) -> UpdateBatch:
    """The same batch in fresh tensors (the graph's inputs)."""
    moved: dict[str, Any] = {}
    for f in dataclasses.fields(b):
        v = getattr(b, f.name)
        if isinstance(v, torch.Tensor):
            moved[f.name] = v.detach().clone()
        elif isinstance(v, Mapping):
            moved[f.name] = {k: t.detach().clone() for k, t in v.items()}
    return dataclasses.replace(b, **moved)


def _copy_into(static: UpdateBatch, b: UpdateBatch) -> None:
    """b's tensors into the static batch's (same signature)."""
    for f in dataclasses.fields(b):
        v = getattr(b, f.name)
        if isinstance(v, torch.Tensor):
            getattr(static, f.name).copy_(v, non_blocking=True)
        elif isinstance(v, Mapping):
            dst = getattr(static, f.name)
            for k, t in v.items():
                dst[k].copy_(t, non_blocking=True)


class GraphedUpdate:
    """One update captured as a CUDA graph and replayed (see the module docstring)."""

    def __init__(self, step: Step, generator: torch.Generator, optimizers: Sequence[torch.optim.Optimizer],
                 save_state: Callable[[], dict[str, np.ndarray]],
                 load_state: Callable[[Mapping[str, Any]], None], warmup: int = WARMUP_UPDATES) -> None:
        self._step, self._generator, self._optimizers = step, generator, list(optimizers)
        self._save, self._load, self._warmup = save_state, load_state, warmup
        self._graph: Any = None
        self._static: UpdateBatch | None = None
        self._out: torch.Tensor | None = None
        self._sig: tuple[Any, ...] | None = None
        self._failed = False
        self._warned_shape = False
        self._capturing = False
        self.status = "pending (captured at the first update)"
        """'pending ...', 'captured', or 'eager (...)' after a failed capture."""
        self.captures = 0
        """Graphs captured so far (a checkpoint load or nothing else makes a second)."""

    def reset(self) -> None:
        """Drop the graph (the optimizer states were replaced); the next update captures again."""
        if self._capturing:  # our own restore between warm-up and capture
            return
        self._graph, self._static, self._out, self._sig = None, None, None, None
        if not self._failed:
            self.status = "pending (captured at the next update)"

    def __call__(self, b: UpdateBatch) -> torch.Tensor:
        if self._failed:
            return self._step(b)
        if self._graph is None:
            return self._capture(b)
        if _signature(b) != self._sig:
            if not self._warned_shape:
                self._warned_shape = True
                warnings.warn("cuda_graphs: a batch of another shape than the captured one runs eager (the graph "
                              "is kept for the captured shape)", RuntimeWarning, stacklevel=3)
            return self._step(b)
        assert self._static is not None and self._out is not None
        _copy_into(self._static, b)
        self._graph.replay()
        return self._out

    def _capture(self, b: UpdateBatch) -> torch.Tensor:
        saved = self._save()
        try:
            if self._generator.device.type != "cuda":  # (torch crashes, not raises, on a CPU generator in a graph)
                raise RuntimeError(f"a CUDA graph needs the agent on a CUDA device, not {self._generator.device}")
            self._capturing = True
            make_capturable(self._optimizers)
            static = _static_copy(b)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(self._warmup):
                    self._step(static)
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            self._load(saved)  # the warm-up leaves no trace: weights, Adam, RNG, counters as before
            make_capturable(self._optimizers)
            ensure_adam_state(self._optimizers)
            for opt in self._optimizers:
                opt.zero_grad(set_to_none=True)  # gradients are allocated inside the graph's memory pool
            graph = torch.cuda.CUDAGraph()
            graph.register_generator_state(self._generator)
            # thread_local: the prefetcher's thread keeps copying batches (pinned allocations, side-stream copies)
            # while this thread captures; 'global' would fail the capture on those calls
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                out = self._step(static)
            _copy_into(static, b)
            graph.replay()
        except Exception as err:
            self._fall_back(err, saved)
            return self._step(b)
        finally:
            self._capturing = False
        self._graph, self._static, self._out, self._sig = graph, static, out, _signature(b)
        self.status = "captured"
        self.captures += 1
        return out

    def _fall_back(self, err: BaseException, saved: Mapping[str, Any]) -> None:
        """Eager from now on, with the agent's state as before the attempt and one warning."""
        self._failed = True
        self._graph = self._static = self._out = None
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        self.status = f"eager (CUDA graph capture failed: {type(err).__name__}: {reason})"
        try:
            torch.cuda.synchronize()
        except Exception:  # a broken capture can leave an error pending; the restore below still runs
            pass
        self._capturing = False
        self._load(saved)
        warnings.warn(f"cuda_graphs: capturing the update failed, training continues eager (--set cuda_graphs=off "
                      f"skips the attempt): {type(err).__name__}: {reason}", RuntimeWarning, stacklevel=4)


__all__ = ["GraphedUpdate", "ensure_adam_state", "graphs_mode", "graphs_wanted", "make_capturable"]
