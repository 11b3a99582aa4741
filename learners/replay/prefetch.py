"""Batch prefetch: draw the next batch in a background thread while the current update runs.

On a CUDA device the thread also puts the batch's numpy arrays in pinned (page-locked) host memory and copies them to
the device on a side CUDA stream, so the update that takes the batch finds it already there: replay sampling (numpy
gathers; tens of MB per update with two 128x128 cameras) and the host-to-device copy overlap the previous update's GPU
work instead of following it. On a CPU only the sampling moves to the thread.

The batch an update trains on was drawn one update earlier: transitions stored meanwhile reach the next batch
instead. Buffers are safe to sample from the thread while the caller adds to them (learners.replay.buffer.ReplayBuffer
holds a lock). An error in the thread (an empty buffer, a corrupt row) is raised by the `next()` that would have
returned that batch, and the thread stops; `next()` on a stopped prefetcher raises again.

Only the columns the torch agent reads become tensors: obs / next_obs leaves, actions, rewards, terminated,
grasp_penalty, intervention, n_rewards, n_grasp_penalty, n_steps, a host feature cache's obs_features /
next_obs_features (and target-head predictions); anything else (mc_returns, mc_valid, crop ids) stays numpy.

Usage::

    prefetch = BatchPrefetcher(lambda: sampler.sample(rows), agent.device)
    try:
        for _ in range(updates):
            agent.update(prefetch.next())     # batch drawn (and copied) while the previous update ran
    finally:
        prefetch.close()
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from learners.agents.config import AgentConfig

TENSOR_COLUMNS = ("actions", "rewards", "terminated", "grasp_penalty", "intervention", "n_rewards", "n_grasp_penalty",
                  "n_steps", "obs_features", "next_obs_features", "obs_predictions", "next_obs_predictions")
"""Batch columns moved to the device (besides the obs / next_obs leaves)."""


def prefetch_enabled(cfg: AgentConfig, device: torch.device) -> bool:
    """AgentConfig.prefetch resolved: its value when set, else on for the torch backend on a CUDA device without a
    residual base."""
    if cfg.backend != "torch":
        return False
    if cfg.prefetch is not None:
        return bool(cfg.prefetch)
    return device.type == "cuda" and cfg.residual_base is None


def device_replay_enabled(agent: Any) -> bool:
    """AgentConfig.device_replay resolved for `agent`: only the JAX agent; 'on', or 'auto' on a GPU JAX device
    without cameras."""
    cfg = agent.cfg
    if cfg.backend != "jax" or cfg.device_replay == "off":
        return False
    if cfg.device_replay == "on":
        return True
    return not agent.spec.cameras and getattr(agent.device, "platform", "cpu") != "cpu"


def batch_to_device(batch: Mapping[str, Any], device: torch.device, pin: bool) -> dict[str, Any]:
    """`batch` with its obs / next_obs leaves and TENSOR_COLUMNS as tensors on `device` (from pinned memory and
    non-blocking when `pin`); other entries as they are. Nested observation dicts keep their nesting."""

    def move(x: Any) -> Any:
        if isinstance(x, Mapping):
            return {k: move(v) for k, v in x.items()}
        if isinstance(x, np.ndarray) and x.dtype != object:
            t = torch.from_numpy(np.ascontiguousarray(x))
            if pin:
                t = t.pin_memory()
            return t.to(device, non_blocking=pin)
        return x

    out = dict(batch)
    for key in ("obs", "next_obs", *TENSOR_COLUMNS):
        if key in out:
            out[key] = move(out[key])
    return out


def _tensors(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, Mapping):
        return [t for v in x.values() for t in _tensors(v)]
    return []


class BatchPrefetcher:
    """Keeps `depth` batches from `sample()` drawn ahead (see the module docstring); `next()` returns the oldest and
    starts drawing the next."""

    def __init__(self, sample: Callable[[], Mapping[str, Any]], device: torch.device | str, depth: int = 1) -> None:
        if depth < 1:
            raise ValueError(f"prefetch depth must be >= 1, got {depth}")
        self.device = torch.device(device)
        self._sample = sample
        self._cuda = self.device.type == "cuda"
        self._stream = torch.cuda.Stream(self.device) if self._cuda else None
        self._ready: queue.Queue[tuple[Any, Any]] = queue.Queue()
        self._wanted = threading.Semaphore(depth)  # a batch is drawn only when one was taken: `depth` in flight
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="batch-prefetch", daemon=True)
        self._thread.start()

    def _produce(self) -> tuple[Any, Any]:
        batch = self._sample()
        if not self._cuda:
            return batch, None
        assert self._stream is not None
        with torch.cuda.stream(self._stream):
            moved = batch_to_device(batch, self.device, pin=True)
            event = torch.cuda.Event()
            event.record(self._stream)
        return moved, event

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self._wanted.acquire(timeout=0.1):
                continue
            try:
                item = self._produce()
            except BaseException as err:  # handed to the consumer by next()
                item = (None, err)
            self._ready.put(item)
            if item[0] is None:
                return

    def next(self, timeout: float | None = None) -> dict[str, Any]:
        """The next batch (waiting for it); raises what the sampling raised, or RuntimeError when closed."""
        if self._error is not None:
            raise self._error
        if self._stop.is_set():
            raise RuntimeError("BatchPrefetcher.next() after close()")
        batch, extra = self._ready.get(timeout=timeout)
        self._wanted.release()
        if batch is None:
            self._error = extra
            raise extra
        if extra is not None:  # CUDA: the copies must finish before the current stream reads them
            stream = torch.cuda.current_stream(self.device)
            stream.wait_event(extra)
            for t in _tensors(batch):
                if t.device.type == "cuda":
                    t.record_stream(stream)  # freed after this stream's use, not the copy stream's
        return dict(batch)

    def close(self) -> None:
        """Stop the thread (waits for a sample in progress)."""
        self._stop.set()
        self._thread.join(timeout=30.0)

    def __enter__(self) -> BatchPrefetcher:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class BatchSource:
    """The batches an update loop trains on: drawn directly, or through a BatchPrefetcher started at the first
    `next()` (so buffers that fill up before learning starts are not sampled early) when AgentConfig.prefetch
    resolves on for the agent (`prefetch_enabled`). The JAX agent (no torch device) always draws directly.

        source = BatchSource(lambda: sampler.sample(rows), agent)
        metrics = agent.update(source.next())
        source.close()
    """

    def __init__(self, sample: Callable[[], Mapping[str, Any]], agent: Any, sampler: Any = None) -> None:
        self._sample, self.agent, self.sampler = sample, agent, sampler
        self.device_replay = sampler is not None and device_replay_enabled(agent)
        """The JAX agent draws its batches on the device (`update()`; AgentConfig.device_replay)."""
        self._replay: Any = None
        device = getattr(agent, "device", None)
        self.device = device if isinstance(device, torch.device) else None
        self.enabled = self.device is not None and prefetch_enabled(agent.cfg, self.device)
        self._prefetcher: BatchPrefetcher | None = None

    def next(self) -> Mapping[str, Any]:
        if not self.enabled:
            return self._sample()
        if self._prefetcher is None:
            assert self.device is not None
            self._prefetcher = BatchPrefetcher(self._sample, self.device)
        return self._prefetcher.next()

    def update(self) -> dict[str, float]:
        """One agent update: on a batch from `next()`, or with device replay a batch drawn on the device (the
        buffers' new rows appended to the device tables first: learners.agents.jax.device_replay)."""
        if not self.device_replay:
            return dict(self.agent.update(self.next()))
        if self._replay is None:
            from learners.agents.jax.device_replay import DeviceReplay

            self._replay = DeviceReplay(self.agent, self.sampler)
        else:
            self._replay.refresh()
        return self._replay.update()

    def close(self) -> None:
        if self._prefetcher is not None:
            self._prefetcher.close()
            self._prefetcher = None
