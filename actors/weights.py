"""The actor's weight swaps: a thread polls the endpoint for the learner's newest weights, builds the policy from the
AgentConfig sent along (`meta/agent_config`) and loads the arrays into a spare copy; the control loop picks it up
between steps with one pointer exchange (`PolicySwap.current`), so loading never stalls a step.

Usage::

    swap = PolicySwap(spec, endpoint.latest_weights); swap.start()
    policy, version = swap.current()          # (None, -1) until the first weights arrived
    swap.stop()
    config_from_weights(weights.arrays)       # the learner's AgentConfig (ConfigError when missing / malformed)
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from learners.agents.policy import AgentConfig, Policy, build_policy
from robot_rl.errors import ConfigError
from robot_rl.specs import EnvSpec
from robot_rl.wire import Weights

log = logging.getLogger("robot_rl.actor")

CONFIG_ARRAY = "meta/agent_config"
"""Weights entry with the learner's AgentConfig as JSON bytes (see learners.distributed.learner)."""
PUBLISHED_AT_ARRAY = "meta/published_at"
"""Weights entry with the learner's publish time (wall-clock seconds)."""



def config_from_weights(arrays: Mapping[str, Any]) -> AgentConfig:
    """The AgentConfig the learner sent with its weights (ConfigError when missing or malformed)."""
    import json

    if CONFIG_ARRAY not in arrays:
        raise ConfigError(f"weights lack '{CONFIG_ARRAY}': the learner must send its agent config with them")
    try:
        data = json.loads(np.asarray(arrays[CONFIG_ARRAY], dtype=np.uint8).tobytes().decode())
    except (ValueError, UnicodeDecodeError) as err:
        raise ConfigError(f"weights carry a malformed '{CONFIG_ARRAY}': {err}") from err
    if not isinstance(data, dict):
        raise ConfigError(f"weights carry a malformed '{CONFIG_ARRAY}': not a JSON object")
    return AgentConfig.from_dict(data)


@dataclasses.dataclass
class _Loaded:
    policy: Policy
    version: int
    published_at: float | None
    received_at: float


class PolicySwap:
    """Double-buffered policy weights: a thread loads new weights into a spare policy; `current()` (called by
    the control loop between steps) swaps it in with one pointer exchange.

    Usage::

        swap = PolicySwap(spec, endpoint.latest_weights); swap.start()
        policy, version = swap.current()          # (None, -1) until the first weights arrived
        swap.stop()
    """

    def __init__(self, spec: EnvSpec, poll: Callable[[], Weights | None], poll_s: float = 0.005,
                 device: str = "cpu", wall_clock: Callable[[], float] = time.time, nice: int = 10) -> None:
        self.spec, self._poll, self.poll_s, self.device, self.nice = spec, poll, poll_s, device, nice
        self.wall_clock = wall_clock
        self._lock = threading.Lock()
        self._current: _Loaded | None = None
        self._pending: _Loaded | None = None
        self._free: Policy | None = None
        self._cfg: AgentConfig | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors = 0
        self.last_error = ""
        self.loads = 0
        self.swaps = 0
        self.latencies_s: collections.deque[float] = collections.deque(maxlen=1000)
        """Per swap: wall time from the learner's publish to the control loop using the weights."""
        self.ready_latencies_s: collections.deque[float] = collections.deque(maxlen=1000)
        """Per load: wall time from the learner's publish to the weights being ready (loaded) here."""

    def start(self) -> PolicySwap:
        self._thread = threading.Thread(target=self._run, name="robot-rl-actor-weights", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)

    def _run(self) -> None:
        _lower_thread_priority(self.nice)
        while not self._stop.is_set():
            try:
                w = self._poll()
            except Exception as err:  # the endpoint failed (e.g. closed): the control loop notices on send
                self._note_error(f"weights poll failed: {err}")
                self._stop.wait(0.5)
                continue
            if w is None:
                self._stop.wait(self.poll_s)
                continue
            try:
                self.load(w)
            except Exception as err:  # bad weights never kill the actor: keep the last good ones
                self._note_error(f"weights version {w.version} refused: {err}")

    def _note_error(self, text: str) -> None:
        self.errors += 1
        self.last_error = text
        if self.errors & (self.errors - 1) == 0:
            log.warning("actor: %s [#%d]", text, self.errors)

    def load(self, weights: Weights) -> None:
        """Load `weights` into a spare policy and offer it to the control loop (runs on the loader thread; also
        callable directly, e.g. in tests)."""
        arrays = weights.arrays
        cfg = config_from_weights(arrays)
        published = arrays.get(PUBLISHED_AT_ARRAY)
        published_at = float(np.asarray(published).reshape(-1)[0]) if published is not None and \
            np.asarray(published).size else None
        # writable copies (torch refuses to wrap the read-only received buffers); off the control thread
        params = {k: np.array(v) for k, v in arrays.items() if not k.startswith("meta/")}
        time.sleep(0)  # let the control loop run between the copies and the load
        with self._lock:
            target = self._pending.policy if self._pending is not None else self._free
            self._pending = None
            self._free = None
            if cfg != self._cfg:  # a (new) learner with another config: build fresh policies
                target = None
        if target is None:
            target = build_policy(self.spec, cfg, device=self.device)
        target.load_trainable_state(params)
        loaded = _Loaded(target, int(weights.version), published_at, self.wall_clock())
        if published_at is not None:
            self.ready_latencies_s.append(loaded.received_at - published_at)
        with self._lock:
            if cfg != self._cfg:
                self._cfg = cfg
            self._pending = loaded
            self.loads += 1

    def current(self) -> tuple[Policy | None, int]:
        """The policy to act with now and its weights version (None, -1 before any); swaps in loaded weights."""
        with self._lock:
            pending = self._pending
            if pending is not None:
                old = self._current
                self._current, self._pending = pending, None
                if old is not None and old.policy.cfg == pending.policy.cfg:
                    self._free = old.policy
                self.swaps += 1
        if pending is not None and pending.published_at is not None:
            self.latencies_s.append(self.wall_clock() - pending.published_at)
        cur = self._current
        return (cur.policy, cur.version) if cur is not None else (None, -1)


def _lower_thread_priority(nice: int) -> None:
    """Raise the calling thread's nice value by `nice` (Linux: per thread), so that on a busy machine it yields
    the CPU to the control loop; best effort, silently skipped elsewhere."""
    if nice <= 0 or not sys.platform.startswith("linux"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
    except (OSError, AttributeError):
        pass
