"""Fault tests of the distributed runtime with real processes over loopback: `robot-rl learner`, `robot-rl actor`
and `robot-rl sim` (twin-reach, state observations, tiny networks, a few hundred env steps).

- kill -9 the learner mid-run and restart it with --resume: the actors reconnect by themselves, training goes on,
  and every transition an actor generated is stored exactly once (counted by (actor_id, session, seq)).
- kill -9 an actor: the learner keeps training; a restarted actor (same id, new session) rejoins.
- SIGINT to `robot-rl sim` stops every process it started (checked through /proc); `robot-rl eval` then evaluates
  its OUT (the learner's run directory plus demos and logs).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from robot_rl.episodes import load_episode

pytestmark = pytest.mark.slow

TINY = ["--hidden", "32,32", "--ensemble", "2", "--batch", "32", "--critic-updates", "1"]
HB = ["--heartbeat", "0.2"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MUJOCO_GL": "egl", "PYTHONUNBUFFERED": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Procs:
    """Processes started by a test; every one is killed at the end."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, *argv: str) -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"{name}.log", "ab")
        proc = subprocess.Popen([sys.executable, "-m", "robot_rl.cli", *argv], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=ENV, start_new_session=True)
        log.close()
        self.procs.append(proc)
        return proc

    def log(self, name: str) -> str:
        p = self.tmp / f"{name}.log"
        return p.read_text(errors="replace")[-3000:] if p.exists() else ""

    def kill_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    ps = Procs(tmp_path)
    try:
        yield ps
    finally:
        ps.kill_all()


def status(out: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((out / "status.json").read_text()))
    except (OSError, ValueError):
        return {}


def wait_for(pred: Callable[[], bool], timeout: float, what: str, procs: Procs | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.2)
    logs = "" if procs is None else "\n".join(f"--- {n}\n{procs.log(n)}" for n in ("learner", "learner2", "a0", "a1"))
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{logs}")


def learner_argv(addr: str, out: Path, *extra: str) -> list[str]:
    return ["learner", "--task", "twin-reach", "--bind", addr, "--out", str(out), *TINY, *HB, "--learning-starts",
            "50", "--utd", "0.5", "--publish-every", "5", "--max-ahead", "100", "--log-every", "1",
            "--no-tensorboard", "--quiet", *extra]


def actor_argv(addr: str, aid: str, tmp: Path, seed: int) -> list[str]:
    return ["actor", "--task", "twin-reach", "--learner", addr, "--actor-id", aid, "--seed", str(seed),
            "--chunk-steps", "20", *HB, "--flush-timeout", "20", "--stats-out", str(tmp / f"{aid}.json"), "--quiet"]


def stop(proc: subprocess.Popen[bytes], timeout: float = 60.0) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=timeout)


def _stopped(pid: int) -> bool:
    """Whether every thread of process `pid` is stopped (SIGSTOP is delivered asynchronously)."""
    states = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):
            continue  # a thread that just ended
    return bool(states) and all(st in ("T", "t") for st in states)


def kill_with_chunks_after_its_checkpoint(learner: subprocess.Popen[bytes], out: Path, n_chunks: int,
                                         timeout: float, procs: Procs) -> tuple[Path, int, list[int]]:
    """SIGKILL the learner in a state a resume must replay from its inbox: it has a complete checkpoint and at least
    `n_chunks` inbox chunks newer than that checkpoint. Every thread of the learner is stopped (SIGSTOP) before that
    is read from disk, so no checkpoint can cover the chunks between the check and the kill (SIGCONT and look again
    otherwise). A checkpoint it was writing when frozen is either complete (LATEST names it: the chunks it covers
    are not counted, also those it had not deleted yet) or not (the resume loads the previous one, as read here).
    Returns (the checkpoint a resume loads, its env_step, the inbox indices newer than it)."""
    from learners.distributed.inbox import Inbox
    from robot_rl.checkpoint import latest_checkpoint

    deadline = time.monotonic() + timeout
    frozen = 0
    while time.monotonic() < deadline:
        if (out / "checkpoints" / "LATEST").is_file() and len(list((out / "inbox").glob("chunk_*.npz"))) >= n_chunks:
            learner.send_signal(signal.SIGSTOP)
            frozen += 1
            wait_for(lambda: _stopped(learner.pid), 10, "the learner to stop on SIGSTOP")
            ckpt = latest_checkpoint(out / "checkpoints")
            if ckpt is not None:
                counters = json.loads((ckpt / "meta.json").read_text())["counters"]
                newer = [i for i in Inbox(out / "inbox").indices() if i > counters["inbox_index"]]
                if len(newer) >= n_chunks:
                    learner.send_signal(signal.SIGKILL)
                    learner.wait(timeout=10)
                    print(f"learner killed (frozen {frozen}x to look) with {len(newer)} inbox chunks after {ckpt.name}")
                    return ckpt, int(counters["env_step"]), newer
            learner.send_signal(signal.SIGCONT)
        time.sleep(0.2)
    logs = "\n".join(f"--- {n}\n{procs.log(n)}" for n in ("learner", "a0", "a1"))
    raise AssertionError(f"timed out after {timeout} s waiting for a checkpoint and {n_chunks} inbox chunks newer "
                         f"than it\n{logs}")


def test_learner_killed_and_resumed_loses_and_duplicates_nothing(tmp_path: Path, procs: Procs) -> None:
    out = tmp_path / "run"
    addr = f"tcp://127.0.0.1:{free_port()}"
    learner = procs.start("learner", *learner_argv(addr, out, "--checkpoint-every", "150"))
    actors = [procs.start(aid, *actor_argv(addr, aid, tmp_path, seed)) for aid, seed in (("a0", 0), ("a1", 1))]
    ckpt, ckpt_env_step, pending = kill_with_chunks_after_its_checkpoint(learner, out, 3, 120, procs)
    before = status(out)
    pending_steps = sum(len(load_episode(out / "inbox" / f"chunk_{i:012d}.npz").actions) for i in pending)
    time.sleep(1.5)  # the actors keep stepping (and buffering) while the learner is away
    assert all(a.poll() is None for a in actors)
    learner2 = procs.start("learner2", *learner_argv(addr, out, "--checkpoint-every", "150", "--resume"))
    wait_for(lambda: status(out).get("resumed_from") is not None and status(out).get("pid") == learner2.pid,
             90, "the resumed learner", procs)
    resumed = status(out)
    # the checkpoint and exactly the inbox chunks after it brought back what was acknowledged (the learner prints
    # its state after the replay, before it receives anything new)
    assert ckpt_env_step >= 150 and resumed["resumed_from"] == str(ckpt)
    assert resumed["replayed_chunks"] == len(pending) >= 3
    printed = (tmp_path / "learner2.log").read_text(errors="replace")
    assert f"resumed from {ckpt} at env_step {ckpt_env_step + pending_steps} " in printed, printed[-3000:]
    target = resumed["env_step"] + 250
    wait_for(lambda: status(out).get("env_step", 0) >= target and
             all(a.get("alive") for a in status(out).get("actors", {}).values()), 120,
             "training to go on with both actors reconnected", procs)
    assert status(out)["updates"] > before["updates"]
    for a in actors:
        assert stop(a) == 0
    assert stop(learner2) == 0
    final = status(out)
    total = 0
    for aid in ("a0", "a1"):
        st = json.loads((tmp_path / f"{aid}.json").read_text())
        assert st["flushed"], f"{aid} did not get every transition acknowledged: {st}"
        n = st["next_seq"]
        total += n
        assert st["acked_upto"] == n - 1 and st["reconnects"] >= 1
        # exactly once: the learner's stored seqs of this actor session are [0, n), one range, counted n times
        assert final["ledger"][aid] == {st["session"]: [[0, n]]}
        assert final["actors"][aid]["transitions"] == n
    assert final["env_step"] == total == final["online_size"]


def test_actor_killed_learner_keeps_training_and_restarted_actor_rejoins(tmp_path: Path, procs: Procs) -> None:
    out = tmp_path / "run"
    addr = f"tcp://127.0.0.1:{free_port()}"
    learner = procs.start("learner", *learner_argv(addr, out, "--checkpoint-every", "100000"))
    a0 = procs.start("a0", *actor_argv(addr, "a0", tmp_path, 0))
    a1 = procs.start("a1", *actor_argv(addr, "a1", tmp_path, 1))
    wait_for(lambda: len(status(out).get("ledger", {}).get("a1", {})) == 1 and status(out).get("updates", 0) > 20,
             120, "both actors streaming and learning", procs)
    a1.send_signal(signal.SIGKILL)
    a1.wait(timeout=10)
    u0 = status(out)["updates"]
    wait_for(lambda: status(out).get("updates", 0) > u0 + 30, 60, "updates with one actor left", procs)
    wait_for(lambda: not status(out)["actors"]["a1"]["alive"], 30, "the learner to notice a1 is gone", procs)
    assert learner.poll() is None and a0.poll() is None
    a1b = procs.start("a1b", *actor_argv(addr, "a1", tmp_path, 2))
    wait_for(lambda: len(status(out)["ledger"].get("a1", {})) == 2 and status(out)["actors"]["a1"]["alive"], 90,
             "the restarted actor (a new session) to rejoin", procs)
    sessions = status(out)["ledger"]["a1"]
    new_session = status(out)["actors"]["a1"]["session"]
    n_new = sessions[new_session][0][1]
    wait_for(lambda: status(out)["ledger"]["a1"][new_session][0][1] > n_new + 20, 60, "a1 to keep streaming", procs)
    for p in (a0, a1b):
        assert stop(p) == 0
    assert stop(learner) == 0


def _descendants(pid: int) -> dict[int, str]:
    """{pid: cmdline} of every live process below `pid` (through /proc)."""
    parents: dict[int, int] = {}
    cmd: dict[int, str] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            state = stat.rsplit(")", 1)[1].split()[0]
            if state == "Z":
                continue
            parents[int(d.name)] = ppid
            cmd[int(d.name)] = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
    out: dict[int, str] = {}
    frontier = [pid]
    while frontier:
        p = frontier.pop()
        for child, parent in parents.items():
            if parent == p and child not in out:
                out[child] = cmd[child]
                frontier.append(child)
    return out


def _alive(pid: int, cmdline: str) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        same = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace") == cmdline
    except OSError:
        return False
    return same and stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_sim_sigint_leaves_no_orphans(tmp_path: Path, procs: Procs, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sim"
    sim = procs.start("sim", "sim", "--task", "twin-reach", "--actors", "2", "--max-env-steps", "100000", "--out",
                      str(out), "--demo-episodes", "2", "--eval-episodes", "2", "--display", "lines",
                      "--print-every", "2", "--learner-args", " ".join([*TINY, *HB, "--learning-starts", "50"]),
                      "--actor-args", " ".join(HB))
    wait_for(lambda: status(out).get("env_step", 0) > 100 and len(status(out).get("actors", {})) == 2, 180,
             "the sim to run", procs)
    kids = _descendants(sim.pid)
    names = " ".join(kids.values())
    assert names.count("robot-server") == 2 and names.count(" actor ") == 2 and " learner " in names, kids
    sim.send_signal(signal.SIGINT)
    assert sim.wait(timeout=150) == 0, procs.log("sim")
    left = {p: c for p, c in kids.items() if _alive(p, c)}
    assert not left, f"orphans after SIGINT: {left}"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["env_step"] > 100
    assert summary["checkpoint"] is not None  # the learner wrote its final checkpoint on the way out
    assert (out / "learning_curve.png").is_file()
    # the sim's OUT is a run directory robot-rl eval understands; its demos/ is not, and eval says so
    from robot_rl.cli import main

    capsys.readouterr()
    assert main(["eval", "--checkpoint", str(out), "--episodes", "1"]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["checkpoint"] == summary["checkpoint"] and res["task"] == "twin-reach"
    assert res["env_step"] == summary["env_step"]
    assert main(["eval", "--checkpoint", str(out / "demos")]) == 1
    assert f"the run directory {out} above it has one" in capsys.readouterr().err
