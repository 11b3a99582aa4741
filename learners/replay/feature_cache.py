"""Cached backbone outputs of stored frames, for frozen image backbones (AgentConfig.feature_cache).

With every camera backbone frozen (learners.agents.encoders.CameraEncoder.frozen), the backbone's output of a stored
frame never changes, so it is computed once per frame instead of on every batch: a `FeatureCache` attached to a
ReplayBuffer keeps, per slot, the backbone outputs of K random-shift crops of that slot's frame (K =
AgentConfig.feature_cache_crops; the crops' shifts are drawn once per frame and kept, so crop j is always the same
image), as float16 (or float32) arrays. Stale frames (new, or rewritten: ReplayBuffer.frame_gen) are encoded in
batches when the buffer is sampled and `min_batch` (16) of them have gathered (a CPU convolves a batch of 16 frames
2-3x faster per frame than one at a time), so the backbone runs once per stored frame and crop, never per update;
until its batch is encoded a new transition is not drawn (ReplayBuffer.sample_indices skips it: at most 15 env steps
of delay, like a learner that receives transitions in chunks). `ReplayBuffer.gather` then adds `obs_features` /
`next_obs_features` ({camera: (B, C, h, w)}) to the batch, each row's crop drawn uniformly from its K (independently
for obs and next_obs, like DrQ's two shifts), and the agent (learners.agents.sac) feeds them to the trainable heads
instead of shifting and encoding the images. Training batches (`ReplayBuffer.sample`) then leave the cached cameras'
raw images out (the cached update never reads them; kept only for a residual base, whose base policy reads the raw
observation): a 256 x 4 batch of two 128x128 cameras no longer gathers ~200 MB of images on the host per update.
With AgentConfig.feature_cache_device on the GPU (`cache_on_device`) the features are torch tensors there and a
batch's rows are gathered on the device from its slot and crop indices, so the host handles no image or feature bytes.

The cache is learner-side and derived: actors still run the backbone on live frames, checkpoints and the weights sent
to actors are unchanged, a loaded replay state is re-encoded on the next sample. The augmentation differs from the
uncached path in one way: each frame has K fixed crops instead of a fresh shift per batch (the features of a given
crop are exactly those the uncached path computes for that shift: tests/test_feature_cache.py).

Memory: frames x cameras x K x C x h x w x 2 bytes (float16); the arrays grow with the buffer's filled part.
`plan_feature_cache` estimates it for the frames a run can store and refuses (ConfigError) or falls back (mode
'auto') when it exceeds AgentConfig.feature_cache_budget_gb.

Usage::

    plan = plan_feature_cache(agent.cfg, agent.encoder, frames=40_000)    # CachePlan, or None (+ note) when off
    notes = attach_feature_caches(agent, [online, demo], frames=40_000)   # what build_run / the learner call
    batch = online.sample(256)      # ... batch["obs_features"]["front"]: (256, 512, 4, 4) float16
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from learners.agents.config import AgentConfig
from learners.agents.encoders import ObservationEncoder
from learners.replay.buffer import ReplayBuffer
from robot_rl.errors import ConfigError, ShapeError

Encode = Callable[[Mapping[str, torch.Tensor]], Mapping[str, torch.Tensor]]
"""{camera: uint8 (N, H, W, C)} -> {camera: float (N, C', h, w)}: the frozen backbones (no gradient)."""


def shift_images(images: torch.Tensor, shifts: torch.Tensor) -> torch.Tensor:
    """(B, H, W, C) images shifted by the given per-image offsets `shifts` (B, 2) (rows, cols), with edge padding:
    the deterministic half of learners.agents.encoders.random_shift (whose shifts are uniform in [-pad, pad])."""
    if images.dim() != 4 or shifts.shape != (images.shape[0], 2):
        raise ShapeError(f"shift_images expects (B, H, W, C) images and (B, 2) shifts, got "
                         f"{tuple(images.shape)} and {tuple(shifts.shape)}")
    b, h, w, _ = images.shape
    dev = images.device
    shifts = shifts.to(dev, torch.long)
    rows = (torch.arange(h, device=dev).unsqueeze(0) + shifts[:, :1]).clamp_(0, h - 1)
    cols = (torch.arange(w, device=dev).unsqueeze(0) + shifts[:, 1:]).clamp_(0, w - 1)
    bidx = torch.arange(b, device=dev)[:, None, None]
    return images[bidx, rows[:, :, None], cols[:, None, :]]


@dataclasses.dataclass(frozen=True)
class CachePlan:
    """What one buffer's cache stores per frame: {camera: backbone output shape (C, h, w)}, K crops, shift range,
    and {camera: P} the frozen target heads' predictions per crop (float32; empty without target heads)."""

    shapes: Mapping[str, tuple[int, int, int]]
    crops: int
    pad: int
    dtype: str
    predictions: Mapping[str, int] = dataclasses.field(default_factory=dict)

    @property
    def frame_bytes(self) -> int:
        """Bytes cached per stored frame (all cameras, all crops)."""
        item = np.dtype(self.dtype).itemsize
        preds = sum(self.crops * p * 4 for p in self.predictions.values())
        return int(sum(self.crops * math.prod(s) * item for s in self.shapes.values()) + preds)

    def nbytes(self, frames: int) -> int:
        """Bytes for `frames` stored frames."""
        return self.frame_bytes * int(frames)


def backbone_shapes(encoder: ObservationEncoder) -> dict[str, tuple[int, int, int]]:
    """{camera: (C, h, w)} of each camera backbone's output (one forward of a blank frame per camera)."""
    dev = next(iter(encoder.parameters())).device
    blank = {cam.name: torch.zeros((1, *cam.shape), dtype=torch.uint8, device=dev) for cam in encoder.layout.cameras}
    out = encoder.backbone_features(blank)
    return {name: (int(t.shape[1]), int(t.shape[2]), int(t.shape[3])) for name, t in out.items()}


def plan_feature_cache(cfg: AgentConfig, encoder: ObservationEncoder | None, frames: int,
                       ) -> tuple[CachePlan | None, str]:
    """(the cache plan, or None when the cache is off, and one line saying why) for a run whose buffers can store
    `frames` frames in all. ConfigError under feature_cache='on' when it cannot be used (a trainable backbone, no
    cameras, the JAX backend) or its estimate exceeds feature_cache_budget_gb; 'auto' then returns None."""
    mode = cfg.feature_cache
    if mode == "off":
        return None, "feature cache off (feature_cache=off)"
    why = None
    if cfg.backend != "torch":
        why = f"the {cfg.backend} backend runs its own encoder"
    elif encoder is None or not encoder.layout.cameras:
        why = "the observation has no camera"
    elif not encoder.all_backbones_frozen:
        why = "a camera backbone trains (the cache needs frozen backbones: encoder_weights + freeze_encoder)"
    if why is not None:
        if mode == "on":
            raise ConfigError(f"feature_cache=on: {why}; use feature_cache=auto or off")
        return None, f"feature cache off: {why}"
    assert encoder is not None
    crops = cfg.feature_cache_crops if cfg.augment_pad > 0 else 1
    plan = CachePlan(backbone_shapes(encoder), crops, cfg.augment_pad, cfg.feature_cache_dtype,
                     encoder.prediction_dims())
    need = plan.nbytes(frames) / 1e9
    shapes = ", ".join(f"{k} {'x'.join(map(str, v))}" for k, v in plan.shapes.items())
    what = (f"{frames} frames x {crops} crop(s) x ({shapes}) {cfg.feature_cache_dtype} = {need:.2f} GB "
            f"(budget {cfg.feature_cache_budget_gb:g} GB)")
    if need > cfg.feature_cache_budget_gb:
        msg = (f"the feature cache would need {what}: lower --replay-capacity or the run's env steps, or set "
               f"feature_cache_crops, feature_cache_dtype=float16, feature_cache_budget_gb")
        if mode == "on":
            raise ConfigError(msg)
        return None, f"feature cache off: {msg}"
    return plan, f"feature cache on: {what}"


class FeatureCache:
    """The cached backbone outputs of one ReplayBuffer's frames (see the module docstring). `encode`: the frozen
    backbones; `predict`: the frozen target heads ({camera: cached features} -> {camera: (N, P)}; needed when the
    plan has predictions); `device`: where they run; `seed`: the crops' shifts and the per-row crop draws."""

    def __init__(self, buffer: ReplayBuffer, encode: Encode, plan: CachePlan, device: torch.device | str = "cpu",
                 seed: int = 0, chunk: int = 128, min_batch: int = 16, on_device: bool = False,
                 keep_images: bool = False, predict: Encode | None = None) -> None:
        missing = sorted(set(plan.shapes) - set(buffer.frames))
        if missing:
            raise ShapeError(f"feature cache: cameras {missing} are not in the buffer's observation")
        if plan.predictions and predict is None:
            raise ConfigError("feature cache: the plan caches target-head predictions but no `predict` was given")
        self.buffer, self.encode, self.plan, self.device, self.chunk = buffer, encode, plan, torch.device(device), chunk
        self.predict = predict
        self.min_batch = min_batch
        self.on_device = on_device
        """The features are torch tensors on `device` (looked up there), else numpy arrays on the host."""
        self.keep_images = keep_images
        """Training batches (ReplayBuffer.sample) still carry the cached cameras' raw images (a residual base reads
        them); False leaves them out: the cached update never reads them."""
        self.rng = np.random.default_rng(seed)
        self.dtype = np.dtype(plan.dtype)
        self.rows = 0  # allocated slots (the arrays grow with the buffer's filled part, up to its capacity)
        self.features: dict[str, Any] = {k: self._zeros((0, plan.crops, *s)) for k, s in plan.shapes.items()}
        self.predictions: dict[str, Any] = {k: self._zeros((0, plan.crops, p), np.dtype(np.float32))
                                            for k, p in plan.predictions.items()}
        self.shifts = np.zeros((0, len(plan.shapes), plan.crops, 2), np.int8)  # per slot, camera, crop
        self.gen = np.zeros(0, np.int64)  # the buffer's frame_gen when each slot was encoded (-1: never)
        self.frames_encoded = 0
        """Frames encoded so far (each once per write of its slot)."""
        self.encode_cpu_s = 0.0
        """CPU seconds (time.process_time) spent encoding so far."""

    def _zeros(self, shape: tuple[int, ...], dtype: np.dtype[Any] | None = None) -> Any:
        dtype = self.dtype if dtype is None else dtype
        if self.on_device:
            return torch.zeros(shape, dtype=getattr(torch, dtype.name), device=self.device)
        return np.zeros(shape, dtype)

    def _grow(self, rows: int) -> None:
        if rows <= self.rows:
            return
        new = min(self.buffer.capacity, max(rows, 2 * self.rows, 64))

        def grown(a: Any, fill: int = 0) -> Any:
            out = np.full((new, *a.shape[1:]), fill, a.dtype) if isinstance(a, np.ndarray) else \
                torch.zeros((new, *a.shape[1:]), dtype=a.dtype, device=a.device)
            out[: self.rows] = a[: self.rows]
            return out

        self.features = {k: grown(v) for k, v in self.features.items()}
        self.predictions = {k: grown(v) for k, v in self.predictions.items()}
        self.shifts, self.gen, self.rows = grown(self.shifts), grown(self.gen, -1), new

    def stale(self) -> np.ndarray:
        """Slots whose current frame is not encoded (new or rewritten since)."""
        n = self.buffer._filled
        self._grow(n)
        return np.flatnonzero(self.buffer.frame_gen[:n] != self.gen[:n])

    def encoded(self, slots: np.ndarray) -> np.ndarray:
        """(B,) bool: the current frames of `slots` are encoded."""
        self._grow(self.buffer._filled)
        if self.rows == 0:
            return np.zeros(np.shape(slots), bool)
        inside = slots < self.rows
        return inside & (self.gen[np.minimum(slots, self.rows - 1)] == self.buffer.frame_gen[slots])

    def ready(self, idx: np.ndarray) -> np.ndarray:
        """(B,) bool: the transitions starting at slots `idx` have both frames encoded (obs and the next frame)."""
        return self.encoded(idx) & self.encoded((idx + 1) % self.buffer.capacity)

    def prepare(self) -> int:
        """Before a draw: encode the stale frames when there are `min_batch` of them, or when fewer than
        2 x min_batch frames are encoded at all (a buffer just filled); returns how many were encoded."""
        stale = self.stale()
        if stale.size >= self.min_batch or self.buffer._filled - stale.size < 2 * self.min_batch:
            return self.refresh()
        return 0

    def refresh(self) -> int:
        """Encode every stored frame whose slot changed since it was last encoded (in chunks); returns how many."""
        stale = self.stale()
        t0 = time.process_time()
        for start in range(0, stale.size, self.chunk):
            self._encode(stale[start: start + self.chunk])
        self.encode_cpu_s += time.process_time() - t0
        self.frames_encoded += int(stale.size)
        return int(stale.size)

    @torch.no_grad()
    def _encode(self, slots: np.ndarray) -> None:
        plan, k, pad = self.plan, self.plan.crops, self.plan.pad
        cams = list(plan.shapes)
        shifts = (self.rng.integers(-pad, pad + 1, size=(slots.size, len(cams), k, 2)) if pad > 0
                  else np.zeros((slots.size, len(cams), k, 2), np.int64))
        images = {}
        for c, cam in enumerate(cams):
            frames = torch.as_tensor(self.buffer.frames[cam][slots]).to(self.device)  # (n, H, W, C)
            frames = frames.repeat_interleave(k, dim=0)  # row i * k + j: crop j of frame i
            images[cam] = shift_images(frames, torch.as_tensor(shifts[:, c].reshape(-1, 2))) if pad > 0 else frames
        out = self.encode(images)
        where = torch.as_tensor(slots, device=self.device) if self.on_device else None
        for cam in cams:
            feats = out[cam].float().reshape(slots.size, k, *plan.shapes[cam])
            if where is not None:
                self.features[cam][where] = feats.to(self.features[cam].dtype)
            else:
                self.features[cam][slots] = feats.cpu().numpy().astype(self.dtype, copy=False)
        if plan.predictions:  # from the features as an update reads them back (rounded to the cache's dtype)
            assert self.predict is not None
            stored = {cam: (self.features[cam][where] if where is not None else
                            torch.as_tensor(self.features[cam][slots]).to(self.device)) for cam in cams}
            preds = self.predict({cam: stored[cam].float().reshape(-1, *plan.shapes[cam]) for cam in cams})
            for cam, dim in plan.predictions.items():
                p = preds[cam].float().reshape(slots.size, k, dim)
                if where is not None:
                    self.predictions[cam][where] = p
                else:
                    self.predictions[cam][slots] = p.cpu().numpy()
        self.shifts[slots] = shifts.astype(np.int8)
        self.gen[slots] = self.buffer.frame_gen[slots]

    def crop_images(self, slot: int, crop: int) -> dict[str, np.ndarray]:
        """{camera: uint8 (H, W, C)}: the image that crop `crop` of slot `slot` encodes (the shifted frame)."""
        out = {}
        for c, cam in enumerate(self.plan.shapes):
            frame = torch.as_tensor(self.buffer.frames[cam][slot : slot + 1])
            shift = torch.as_tensor(self.shifts[slot, c, crop][None].astype(np.int64))
            out[cam] = shift_images(frame, shift)[0].numpy()
        return out

    def lookup(self, idx: np.ndarray, nxt: np.ndarray) -> dict[str, Any]:
        """{"obs_features": {camera: (B, C, h, w)}, "next_obs_features": ...} for the rows whose obs is slot
        idx[i] and next_obs slot nxt[i], a uniformly random crop each; "obs_crops" / "next_obs_crops" (B,) say which;
        with target heads also "obs_predictions" / "next_obs_predictions" ({camera: (B, P)}, of the same crops).
        On the device (`on_device`) the rows are gathered there: only the slot and crop indices cross from the host."""
        if not (self.encoded(idx).all() and self.encoded(nxt).all()):
            self.refresh()  # a row drawn without the buffer's rejection, or an n-step row reaching a new frame
        out: dict[str, Any] = {}
        for key, slots in (("obs", idx), ("next_obs", nxt)):
            crop = self.rng.integers(0, self.plan.crops, size=slots.size)
            if self.on_device:
                at = torch.as_tensor(np.stack([slots, crop]), device=self.device)  # one small copy
                out[f"{key}_features"] = {cam: arr[at[0], at[1]] for cam, arr in self.features.items()}
                if self.predictions:
                    out[f"{key}_predictions"] = {cam: arr[at[0], at[1]] for cam, arr in self.predictions.items()}
            else:
                out[f"{key}_features"] = {cam: arr[slots, crop] for cam, arr in self.features.items()}
                if self.predictions:
                    out[f"{key}_predictions"] = {cam: arr[slots, crop] for cam, arr in self.predictions.items()}
            out[f"{key}_crops"] = crop
        return out

    def nbytes(self) -> int:
        """Bytes the cache holds now (its allocated rows)."""
        feats = sum(a.nbytes if isinstance(a, np.ndarray) else a.numel() * a.element_size()
                    for a in (*self.features.values(), *self.predictions.values()))
        return int(feats + self.shifts.nbytes + self.gen.nbytes)


def attach_feature_caches(agent: Any, buffers: Sequence[ReplayBuffer | None], frames: int, seed: int = 0,
                          ) -> str:
    """Attach a FeatureCache to each buffer when AgentConfig.feature_cache resolves to on for `agent` (a torch
    SACAgent; any other agent gets none) and `frames` (the frames the buffers can store in this run) fits the budget,
    kept where `cache_on_device` says; returns the one-line note plan_feature_cache gave (+ where the cache lives).
    ConfigError as plan_feature_cache."""
    encoder = getattr(agent, "encoder", None)
    plan, note = plan_feature_cache(agent.cfg, encoder if isinstance(encoder, ObservationEncoder) else None, frames)
    if plan is None:
        return note
    assert isinstance(encoder, ObservationEncoder)
    on_device, where = cache_on_device(agent.cfg, agent.device, plan.nbytes(frames))
    keep = agent.cfg.residual_base is not None  # the base policy reads the raw observation, images included
    for i, buf in enumerate(b for b in buffers if b is not None):
        buf.feature_cache = FeatureCache(buf, encoder.backbone_features, plan, device=agent.device, seed=seed + 17 * i,
                                         on_device=on_device, keep_images=keep, predict=encoder.target_predictions)
    return f"{note}, {where}"


def cache_on_device(cfg: AgentConfig, device: torch.device, need_bytes: int) -> tuple[bool, str]:
    """(keep the cache as tensors on `device`?, 'kept on ...' for the note): AgentConfig.feature_cache_device;
    'auto' = on a CUDA device when `need_bytes` fits half its free memory."""
    mode = cfg.feature_cache_device
    if mode == "auto" and device.type == "cuda":
        free = torch.cuda.mem_get_info(device)[0]
        mode = "device" if need_bytes <= free // 2 else "host"
    elif mode == "auto":
        mode = "host"
    return mode == "device", (f"kept on {device}" if mode == "device" else "kept on the host")


def run_frames(buffers: Sequence[ReplayBuffer | None], env_steps: int) -> int:
    """Upper bound of the frames `buffers` can hold after `env_steps` more env steps: what each holds now plus two
    frames per step (a step writes one frame, a new episode one more; an intervention also goes to the demo
    buffer), each capped at its capacity."""
    return int(sum(min(b.capacity, b._filled + 2 * max(0, env_steps)) for b in buffers if b is not None))


__all__ = ["CachePlan", "FeatureCache", "attach_feature_caches", "backbone_shapes", "cache_on_device",
           "plan_feature_cache",
           "run_frames", "shift_images"]
