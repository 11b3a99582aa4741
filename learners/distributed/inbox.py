"""The learner's durable inbox (a write-ahead log of received transition chunks) and its sequence ledger.

Every chunk an actor sends is written here as an episode-format file (`robot_rl.episodes`) before the actor gets
its acknowledgement, and the ledger records which (actor_id, session, seq) ranges were stored, so a duplicate
(a resend after a reconnect) is recognised and dropped. A checkpoint stores the ledger and the index of the last
inbox file it covers, then deletes the covered files; a restarted learner replays the newer ones (see
learners.distributed.learner). Nothing here knows about agents, replay buffers or the network.

Usage::

    inbox = Inbox(out / "inbox", fsync=False)
    inbox.write(7, "actor-0", "session-1", 0, chunk, task="twin-reach")    # atomic: temp file, then rename
    [rec] = inbox.records(after=6)       # InboxRecord(index=7, actor_id="actor-0", session="session-1", seq=0, chunk)
    inbox.delete_upto(7)                 # covered by a checkpoint

    ledger = SeqLedger()
    ledger.add("actor-0", "session-1", 0, chunk.length)
    ledger.covers("actor-0", "session-1", 0, chunk.length)                  # True: a resend is a duplicate
    SeqLedger.from_json(ledger.to_json())                                    # in the checkpoint meta
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.episodes import Episode, episode_to_arrays, load_episode
from robot_rl.errors import ConfigError, EpisodeFileError, ShapeError
from robot_rl.wire import TransitionChunk

log = logging.getLogger("robot_rl.learner")

_INBOX_RE = re.compile(r"^chunk_(\d{12})\.npz$")


class SeqLedger:
    """Which transition seqs were stored, per (actor_id, session): sorted disjoint [start, end) ranges.

    Usage::

        ledger = SeqLedger()
        ledger.covers("a0", "s1", 0, 10)    # False
        ledger.add("a0", "s1", 0, 10); ledger.covers("a0", "s1", 5, 8)   # True
        SeqLedger.from_json(ledger.to_json())
    """

    def __init__(self) -> None:
        self._ranges: dict[tuple[str, str], list[list[int]]] = {}

    def _get(self, actor_id: str, session: str) -> list[list[int]]:
        return self._ranges.get((actor_id, session), [])

    def covers(self, actor_id: str, session: str, start: int, end: int) -> bool:
        """Every seq in [start, end) was stored."""
        return any(s <= start and end <= e for s, e in self._get(actor_id, session))

    def overlaps(self, actor_id: str, session: str, start: int, end: int) -> bool:
        """Some seq in [start, end) was stored."""
        return any(s < end and start < e for s, e in self._get(actor_id, session))

    def add(self, actor_id: str, session: str, start: int, end: int) -> None:
        if end <= start:
            raise ShapeError(f"empty seq range [{start}, {end})")
        ranges = [*self._get(actor_id, session), [start, end]]
        ranges.sort()
        merged: list[list[int]] = []
        for s, e in ranges:
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        self._ranges[(actor_id, session)] = merged

    def count(self, actor_id: str | None = None) -> int:
        """Transitions stored (of one actor, all sessions; or of everyone)."""
        return sum(e - s for (a, _), rs in self._ranges.items() if actor_id is None or a == actor_id
                   for s, e in rs)

    def sessions(self) -> dict[str, dict[str, list[list[int]]]]:
        """{actor_id: {session: [[start, end], ...]}} (a copy)."""
        out: dict[str, dict[str, list[list[int]]]] = {}
        for (a, s), rs in self._ranges.items():
            out.setdefault(a, {})[s] = [list(r) for r in rs]
        return out

    def to_json(self) -> dict[str, Any]:
        return {"sessions": self.sessions()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SeqLedger:
        ledger = cls()
        try:
            for actor_id, sessions in dict(data.get("sessions", {})).items():
                for session, ranges in dict(sessions).items():
                    for s, e in ranges:
                        ledger.add(str(actor_id), str(session), int(s), int(e))
        except (TypeError, ValueError, ShapeError) as err:
            raise ConfigError(f"malformed seq ledger in checkpoint: {err}") from err
        return ledger


@dataclasses.dataclass(frozen=True)
class InboxRecord:
    """One durable chunk: where it came from and its transitions."""

    index: int
    actor_id: str
    session: str
    seq: int
    chunk: TransitionChunk


class Inbox:
    """Received chunks as episode-format files ``chunk_<index>.npz`` (atomic writes), until a checkpoint
    covers them.

    Usage::

        inbox = Inbox(out / "inbox")
        inbox.write(7, "a0", "s1", 0, chunk, task="twin-reach")
        [rec] = inbox.records(after=6)
        inbox.delete_upto(7)
    """

    def __init__(self, directory: str | os.PathLike[str], fsync: bool = False) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync

    def path(self, index: int) -> Path:
        return self.dir / f"chunk_{index:012d}.npz"

    def write(self, index: int, actor_id: str, session: str, seq: int, chunk: TransitionChunk,
              task: str = "") -> Path:
        info = {"actor_id": actor_id, "session": session, "seq": seq, "seq_end": seq + chunk.length,
                "episode": chunk.episode, "step": chunk.step,
                "stats": None if chunk.stats is None else dict(chunk.stats)}
        ep = Episode(observations=dict(chunk.observations), actions=chunk.actions, rewards=chunk.rewards,
                     terminated=chunk.terminated, truncated=chunk.truncated, intervention=chunk.intervention,
                     success=chunk.success, task=task, info=info)
        path = self.path(index)
        tmp = path.with_name(f".{path.name}.tmp")
        with open(tmp, "wb") as f:
            arrays: dict[str, Any] = episode_to_arrays(ep)
            np.savez(f, **arrays)
            if self.fsync:
                f.flush()
                os.fsync(f.fileno())
        tmp.replace(path)
        return path

    def indices(self) -> list[int]:
        return sorted(int(m.group(1)) for p in self.dir.iterdir() if (m := _INBOX_RE.match(p.name)))

    def records(self, after: int) -> list[InboxRecord]:
        """The chunks with index > `after`, in order (unreadable files are reported and skipped: they were
        never acknowledged, since a file is complete before its ack)."""
        out = []
        for i in self.indices():
            if i <= after:
                continue
            p = self.path(i)
            try:
                ep = load_episode(p)
                info = ep.info
                chunk = TransitionChunk(observations=ep.observations, actions=ep.actions, rewards=ep.rewards,
                                        terminated=ep.terminated, truncated=ep.truncated,
                                        intervention=ep.intervention, success=ep.success,
                                        episode=int(info.get("episode", 0)), step=int(info.get("step", 0)),
                                        stats=info.get("stats"))
                out.append(InboxRecord(i, str(info["actor_id"]), str(info["session"]), int(info["seq"]), chunk))
            except (EpisodeFileError, KeyError, TypeError, ValueError, ShapeError) as err:
                log.warning("inbox: skipping unreadable %s (%s)", p, err)
        return out

    def delete_upto(self, index: int) -> int:
        """Delete files with index <= `index` (covered by a checkpoint); returns how many."""
        n = 0
        for i in self.indices():
            if i <= index:
                self.path(i).unlink(missing_ok=True)
                n += 1
        for p in self.dir.glob(".chunk_*.tmp"):  # torn writes of a crashed process: never acknowledged
            p.unlink(missing_ok=True)
        return n
