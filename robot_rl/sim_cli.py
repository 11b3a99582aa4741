"""`robot-rl sim`: distributed training in simulation, every part a separate process, one progress view.

Starts (each as ``python -m robot_rl.cli ...`` in its own process group): scripted demo recording (unless --demos),
one twin robot server per actor (``robot-server``), the learner (``learner``) and N actors (``actor --robot``).
Renders the learner's OUT/status.json as one live display (env steps, success rate, updates/s, weights version
per actor, buffer sizes). Finishes when the learner reaches --max-env-steps, then stops the actors and servers,
redraws the learning curves (OUT/learning_curve.png against env steps, OUT/learning_curve_time.png against wall
time) and evaluates the last checkpoint deterministically (``actor --evaluate``): success rate printed and in
OUT/summary.json. Ctrl-C or SIGTERM stops everything cleanly (terminate, then kill after a grace period; the
learner writes its final checkpoint) and still evaluates (a second Ctrl-C skips that). A dying actor is
restarted (up to --actor-restarts times); the learner keeps training meanwhile.

This module only spawns processes and reads files (it imports nothing outside robot_rl). Logs: OUT/logs/.

Usage::

    robot-rl sim --task twin-pick-cube                       # state obs, RLPD, 20 scripted demos, 2 actors
    robot-rl sim --task twin-reach --actors 1 --max-env-steps 3000 --out runs/reach
    robot-rl sim --task twin-pick-cube --out runs/pick --resume         # continue an interrupted run
    robot-rl sim --task twin-pick-cube --learner-args "--utd 1 --hidden 256,256" --actor-args "--chunk-steps 50"
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import json
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import IO, Any

from robot_rl.checkpoint import latest_checkpoint
from robot_rl.errors import ConfigError, RobotRLError
from robot_rl.metrics import plot_learning_curve, read_metrics
from robot_rl.presets import PRESETS, get_preset

# Run lengths per task (the task recipes update twice per transition; on a 2-core CPU the learner holds ~65-75
# updates/s beside 2 actors and 2 robot servers). twin-pick-cube trains plain RLPD with 5-step returns, which
# passes 90 % at 12-15k env steps in benchmarks/sample_efficiency.py: 20k steps take ~10 minutes.
TASK_DEFAULTS: dict[str, dict[str, Any]] = {
    "twin-reach": {"max_env_steps": 3000},
    "twin-pick-cube": {"max_env_steps": 20000},
    "twin-peg-insert": {"max_env_steps": 20000},
}
ADDRESS_RE = re.compile(r"(tcp://[^\s)]+)")
_PR_SET_PDEATHSIG = 1


class SimError(RobotRLError):
    """A child process failed in a way the orchestrator cannot recover from (names it and its log)."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="robot-rl sim", description=__doc__.split("\n\n")[0])
    p.add_argument("--task", required=True, help=f"task preset ({', '.join(PRESETS)})")
    p.add_argument("--actors", type=int, default=2, help="number of actor processes (each with a robot server)")
    p.add_argument("--max-env-steps", type=int, default=None, help="transitions to train on (default per task)")
    p.add_argument("--out", type=Path, default=None, help="run directory (default runs/sim-<task>)")
    p.add_argument("--demos", type=Path, default=None, help="demo episode directory (default: record scripted ones)")
    p.add_argument("--demo-episodes", type=int, default=20, help="scripted demos to record when --demos is not given")
    p.add_argument("--obs-mode", default="state", choices=("state", "pixels"), help="observation mode")
    p.add_argument("--image-size", type=int, default=None, help="camera image size (pixels mode)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out")
    p.add_argument("--in-process-twin", action="store_true",
                   help="actors run the twin themselves instead of talking to robot server processes")
    p.add_argument("--intervene", default=None, choices=("scripted",),
                   help="scripted human interventions in the actors (HIL-SERL)")
    p.add_argument("--eval-episodes", type=int, default=20, help="deterministic evaluation episodes at the end")
    p.add_argument("--actor-restarts", type=int, default=3, help="restarts allowed per actor when it dies")
    p.add_argument("--learner-args", default="", help="extra learner options, e.g. \"--utd 1 --hidden 256,256\"")
    p.add_argument("--actor-args", default="", help="extra actor options, e.g. \"--chunk-steps 50\"")
    p.add_argument("--display", default="auto", choices=("auto", "live", "lines", "none"),
                   help="live: redraw in place (a terminal); lines: a line every --print-every s")
    p.add_argument("--print-every", type=float, default=10.0, help="seconds between progress lines (lines mode)")
    p.add_argument("--start-timeout", type=float, default=120.0, help="seconds a child may take to start")
    p.add_argument("--grace", type=float, default=30.0, help="seconds a child gets to exit before it is killed")
    p.add_argument("--seed", type=int, default=0, help="base seed (actor i uses seed + 1000 i)")
    return p


# --------------------------------------------------------------------------------------------------- processes

def _pdeathsig() -> Callable[[], None] | None:
    """A preexec function making a child get SIGTERM when the sim process dies (Linux), or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)

    return preexec


@dataclasses.dataclass
class Child:
    """One child process in its own process group, its output copied to a log file."""

    name: str
    argv: list[str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    lines: queue.Queue[str] = dataclasses.field(default_factory=queue.Queue)
    _log: IO[bytes] | None = None
    _reader: threading.Thread | None = None
    restarts: int = 0
    stopped: bool = False
    terminated: bool = False

    def start(self, env: dict[str, str]) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")
        self._log.write(f"\n=== {time.strftime('%H:%M:%S')} {shlex.join(self.argv)}\n".encode())
        self._log.flush()
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                     preexec_fn=_pdeathsig())
        self.lines = queue.Queue()
        self._reader = threading.Thread(target=self._copy, name=f"sim-log-{self.name}", daemon=True)
        self._reader.start()

    def _copy(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None and self._log is not None
        for raw in self.proc.stdout:
            with contextlib.suppress(ValueError, OSError):
                self._log.write(raw)
                self._log.flush()
            self.lines.put(raw.decode(errors="replace"))

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def returncode(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    def wait_for_line(self, pattern: re.Pattern[str], timeout: float, stop: threading.Event) -> re.Match[str]:
        """The first output line matching `pattern` (SimError if the child exits or `timeout` passes first)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not stop.is_set():
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if not self.alive():
                    break
                continue
            m = pattern.search(line)
            if m:
                return m
        if stop.is_set():
            raise KeyboardInterrupt
        raise SimError(f"{self.name} did not start (exit code {self.returncode()}); see {self.log_path}:\n"
                       f"{tail(self.log_path)}")

    def signal(self, sig: int) -> None:
        """Send `sig` to the child's process group (SIGTERM only once: a second one may cut its cleanup short)."""
        if sig == signal.SIGTERM:
            if self.terminated:
                return
            self.terminated = True
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)

    def stop(self, grace_s: float) -> int | None:
        """SIGTERM the child's process group, SIGKILL it after `grace_s`; returns the exit code."""
        if self.proc is None:
            return None
        if self.stopped:
            return self.proc.returncode
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                self.proc.wait(timeout=10.0)
        # anything left in its group (grandchildren) goes too; only now, right after reaping its leader, while
        # the group id cannot belong to anyone else
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.stopped = True
        self.close()
        with contextlib.suppress(OSError), open(self.log_path, "ab") as f:
            f.write(f"=== {time.strftime('%H:%M:%S')} exit code {self.proc.returncode}\n".encode())
        return self.proc.returncode

    def close(self) -> None:
        if self._reader is not None:
            self._reader.join(timeout=2.0)
        if self._log is not None:
            self._log.close()
            self._log = None


def tail(path: Path, n: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


# --------------------------------------------------------------------------------------------------- display

def _k(n: Any) -> str:
    if not isinstance(n, int | float):
        return "-"
    return f"{n / 1000:.1f}k" if abs(n) >= 10_000 else f"{int(n)}"


def _rate(x: Any) -> str:
    return "-" if not isinstance(x, int | float) else f"{x:.2f}"


def _dur(s: float) -> str:
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def render_status(st: dict[str, Any], elapsed_s: float, task: str, max_steps: int) -> list[str]:
    """The combined progress display (one header line + one line per actor) from a status.json dict."""
    if not st:
        return [f"sim {task} | {_dur(elapsed_s)} | waiting for the learner ..."]
    head = (f"sim {task} | {_k(st.get('env_step'))}/{_k(max_steps)} env steps | {_dur(elapsed_s)} | "
            f"success {_rate(st.get('success_rate'))} (last {st.get('episodes', 0) and min(20, st['episodes'])} ep, "
            f"{st.get('episodes', 0)} total) | updates {_k(st.get('updates'))} "
            f"({(st.get('updates_per_s') or 0.0):.1f}/s) | weights v{st.get('weights_version', 0)} | buffers "
            f"online {_k(st.get('online_size'))} demo {_k(st.get('demo_size'))}")
    lines = [head]
    for aid, a in sorted(dict(st.get("actors", {})).items()):
        state = "alive" if a.get("alive") else "away "
        paused = " paused" if a.get("paused") else ""
        rate = a.get("env_steps_per_s")
        lines.append(f"  {aid:<10} {state} weights v{a.get('weights_version', -1):<5} {_k(a.get('transitions')):>6} "
                     f"steps {a.get('episodes', 0):>5} ep  success {_rate(a.get('success_rate'))}  interventions "
                     f"{_rate(a.get('intervention_rate'))}  {'-' if rate is None else f'{rate:.0f}'} steps/s{paused}")
    return lines


class Display:
    """Live (in-place redraw on a terminal) or line-by-line progress."""

    def __init__(self, mode: str, every_s: float, stream: IO[str] = sys.stdout) -> None:
        if mode == "auto":
            mode = "live" if stream.isatty() else "lines"
        self.mode, self.every_s, self.stream = mode, every_s, stream
        self._drawn = 0
        self._last = -1e9

    def show(self, lines: Sequence[str], force: bool = False) -> None:
        if self.mode == "none":
            return
        if self.mode == "live":
            out = "".join("\x1b[1A\x1b[2K" for _ in range(self._drawn))
            self.stream.write(out + "\n".join(lines) + "\n")
            self.stream.flush()
            self._drawn = len(lines)
            return
        now = time.monotonic()
        if force or now - self._last >= self.every_s:
            self._last = now
            self.stream.write("\n".join(lines) + "\n")
            self.stream.flush()

    def message(self, text: str) -> None:
        """A line above the live block (which is then redrawn below it)."""
        if self.mode == "live":
            self.stream.write("".join("\x1b[1A\x1b[2K" for _ in range(self._drawn)))
            self._drawn = 0
        self.stream.write(text + "\n")
        self.stream.flush()


def read_status(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    tmp.replace(path)


def milestones(rows: Sequence[dict[str, Any]], levels: Sequence[float] = (0.25, 0.5, 0.8, 0.9)) -> dict[str, Any]:
    """For each success level: the first metrics row reaching it (env_step, wall_s), or None."""
    out: dict[str, Any] = {}
    for level in levels:
        hit = next((r for r in rows if isinstance(r.get("success_rate"), int | float)
                    and r["success_rate"] >= level), None)
        out[f"{level:g}"] = None if hit is None else {"env_step": hit.get("env_step"), "wall_s": hit.get("wall_s")}
    return out


# --------------------------------------------------------------------------------------------------- the run

class Sim:
    """The orchestrator: owns every child process; `run()` returns the exit code."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        get_preset(args.task)
        if args.actors < 1:
            raise ConfigError(f"--actors={args.actors} must be >= 1")
        defaults = TASK_DEFAULTS.get(args.task, {})
        self.max_steps = int(args.max_env_steps or defaults.get("max_env_steps", 20000))
        if self.max_steps < 1:
            raise ConfigError(f"--max-env-steps={self.max_steps} must be >= 1")
        self.out = Path(args.out or f"runs/sim-{args.task}")
        ck = latest_checkpoint(self.out / "checkpoints") if (self.out / "checkpoints").is_dir() else None
        if ck is not None and not args.resume:
            raise ConfigError(f"--out {self.out} already holds a run (checkpoint {ck.name}); pass --resume to "
                              f"continue it, or choose another --out")
        self.logs = self.out / "logs"
        self.stop = threading.Event()
        self.interrupts = 0
        self.children: list[Child] = []
        self.servers: list[Child] = []
        self.actors: list[Child] = []
        self.learner: Child | None = None
        self.display = Display(args.display, args.print_every)
        self.env = dict(os.environ)
        self.env.setdefault("OMP_NUM_THREADS", "1")
        self.env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        self.env.setdefault("MUJOCO_GL", "egl")
        self.env["PYTHONUNBUFFERED"] = "1"
        self.t0 = time.monotonic()

    def cli(self, *argv: str) -> list[str]:
        return [sys.executable, "-m", "robot_rl.cli", *argv]

    def spawn(self, name: str, argv: list[str]) -> Child:
        child = Child(name, argv, self.logs / f"{name}.log")
        child.start(self.env)
        self.children.append(child)
        return child

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.interrupts += 1
        self.stop.set()
        if self.interrupts >= 2:  # second Ctrl-C: skip the evaluation too
            raise KeyboardInterrupt

    # -- phases
    def record_demos(self) -> Path | None:
        a = self.args
        if a.demos is not None:
            if not Path(a.demos).is_dir():
                raise ConfigError(f"--demos {a.demos} is not a directory")
            return Path(a.demos)
        if a.demo_episodes <= 0:
            return None
        demos = self.out / "demos"
        have = len(list(demos.glob("episode_*.npz"))) if demos.is_dir() else 0
        if have >= a.demo_episodes:
            self.display.message(f"sim: using {have} demo episode(s) in {demos}")
            return demos
        self.display.message(f"sim: recording {a.demo_episodes - have} scripted demo episode(s) into {demos} ...")
        argv = self.cli("record-demos", "--task", a.task, "--teleop", "scripted", "--episodes",
                        str(a.demo_episodes - have), "--out", str(demos), "--obs-mode", a.obs_mode)
        if a.image_size:
            argv += ["--image-size", str(a.image_size)]
        child = self.spawn("record-demos", argv)
        assert child.proc is not None
        while child.alive():
            if self.stop.is_set():
                child.stop(self.args.grace)
                raise KeyboardInterrupt
            time.sleep(0.1)
        child.close()
        if child.returncode() != 0:
            raise SimError(f"recording demos failed (exit code {child.returncode()}); see {child.log_path}:\n"
                           f"{tail(child.log_path)}")
        return demos

    def start_server(self, i: int) -> str:
        a = self.args
        argv = self.cli("robot-server", "--backend", "twin", "--task", a.task, "--bind", "tcp://127.0.0.1:0",
                        "--stats-every", "0")
        if a.obs_mode == "state":
            argv.append("--no-cameras")
        elif a.image_size:
            argv += ["--image-size", str(a.image_size)]
        child = self.spawn(f"robot-server-{i}", argv)
        self.servers.append(child)
        return child.wait_for_line(re.compile(r"serving .* on (tcp://\S+)"), a.start_timeout, self.stop).group(1)

    def start_learner(self, demos: Path | None) -> str:
        a = self.args
        argv = self.cli("learner", "--task", a.task, "--bind", "tcp://127.0.0.1:0", "--out", str(self.out),
                        "--obs-mode", a.obs_mode, "--max-env-steps", str(self.max_steps), "--seed", str(a.seed))
        if demos is not None:
            argv += ["--demos", str(demos)]
        if a.resume:
            argv.append("--resume")
        if a.image_size:
            argv += ["--image-size", str(a.image_size)]
        argv += shlex.split(a.learner_args)
        self.learner = self.spawn("learner", argv)
        return self.learner.wait_for_line(re.compile(r"listening on (tcp://\S+)"), a.start_timeout,
                                          self.stop).group(1)

    def actor_argv(self, i: int, learner: str, robot: str | None) -> list[str]:
        a = self.args
        argv = self.cli("actor", "--task", a.task, "--learner", learner, "--actor-id", f"actor-{i}",
                        "--obs-mode", a.obs_mode, "--seed", str(a.seed + 1000 * i), "--quiet",
                        "--stats-out", str(self.logs / f"actor-{i}.json"))
        if robot is not None:
            argv += ["--robot", robot]
        if a.image_size:
            argv += ["--image-size", str(a.image_size)]
        if a.intervene:
            argv += ["--intervene", a.intervene]
        return argv + shlex.split(a.actor_args)

    def evaluate(self) -> dict[str, Any] | None:
        a = self.args
        if a.eval_episodes <= 0 or latest_checkpoint(self.out / "checkpoints") is None:
            return None
        self.display.message(f"sim: evaluating the last checkpoint ({a.eval_episodes} deterministic episodes; "
                             f"Ctrl-C to skip) ...")
        result_path = self.out / "eval.json"
        argv = self.cli("actor", "--task", a.task, "--evaluate", str(self.out / "checkpoints"), "--episodes",
                        str(a.eval_episodes), "--obs-mode", a.obs_mode, "--summary", str(result_path))
        if a.image_size:
            argv += ["--image-size", str(a.image_size)]
        self.stop.clear()
        child = self.spawn("evaluate", argv)
        try:
            while child.alive():
                if self.stop.is_set():
                    raise KeyboardInterrupt
                time.sleep(0.1)
        except KeyboardInterrupt:
            child.stop(5.0)
            self.display.message("sim: evaluation skipped")
            return None
        child.close()
        if child.returncode() != 0:
            self.display.message(f"sim: evaluation failed (exit code {child.returncode()}); see {child.log_path}")
            return None
        return read_status(result_path) or None

    # -- main loop
    def run(self) -> int:
        a = self.args
        self.out.mkdir(parents=True, exist_ok=True)
        prev_term = signal.signal(signal.SIGTERM, self._on_signal)
        prev_int = signal.signal(signal.SIGINT, self._on_signal)
        interrupted = False
        error: str | None = None
        try:
            try:
                demos = self.record_demos()
                robots: list[str | None] = [None] * a.actors
                if not a.in_process_twin:
                    robots = [self.start_server(i) for i in range(a.actors)]
                learner_addr = self.start_learner(demos)
                self.display.message(f"sim: learner on {learner_addr}; {a.actors} actor(s); logs in {self.logs}")
                for i in range(a.actors):
                    self.actors.append(self.spawn(f"actor-{i}", self.actor_argv(i, learner_addr, robots[i])))
                self.watch(learner_addr, robots)
            except KeyboardInterrupt:
                pass
            interrupted = self.stop.is_set()
            self.shutdown()
            if interrupted:
                self.display.message("sim: interrupted; everything stopped (the learner wrote its final checkpoint)")
            result = self.finish(interrupted)
            return 0 if error is None and result else 1
        except SimError as err:
            error = str(err)
            self.display.message(f"sim: error: {error}")
            self.shutdown()
            return 1
        finally:
            signal.signal(signal.SIGTERM, prev_term)
            signal.signal(signal.SIGINT, prev_int)
            self.shutdown()

    def watch(self, learner_addr: str, robots: list[str | None]) -> None:
        a = self.args
        status_path = self.out / "status.json"
        while not self.stop.is_set():
            assert self.learner is not None
            if not self.learner.alive():
                rc = self.learner.returncode()
                st = read_status(status_path)
                if rc == 0 and st.get("done"):
                    self.display.show(render_status(st, time.monotonic() - self.t0, a.task, self.max_steps), True)
                    return
                raise SimError(f"the learner exited with code {rc}; see {self.learner.log_path}:\n"
                               f"{tail(self.learner.log_path)}")
            for i, child in enumerate(self.actors):
                if not child.alive():
                    rc = child.returncode()
                    if child.restarts >= a.actor_restarts:
                        continue
                    child.close()
                    self.display.message(f"sim: actor-{i} exited with code {rc}; restarting it "
                                         f"({child.restarts + 1}/{a.actor_restarts}); see {child.log_path}")
                    fresh = self.spawn(f"actor-{i}", self.actor_argv(i, learner_addr, robots[i]))
                    fresh.restarts = child.restarts + 1
                    self.actors[i] = fresh
            st = read_status(status_path)
            self.display.show(render_status(st, time.monotonic() - self.t0, a.task, self.max_steps))
            self.stop.wait(1.0)

    def shutdown(self) -> None:
        """Stop actors (they flush to the learner), then the learner (final checkpoint), then the servers."""
        grace = self.args.grace
        for group in (self.actors, [self.learner] if self.learner else [], self.servers, self.children):
            for child in group:
                if child.alive():
                    child.signal(signal.SIGTERM)
            for child in group:
                child.stop(grace)

    def finish(self, interrupted: bool) -> bool:
        a = self.args
        rows = read_metrics(self.out / "metrics.jsonl")
        curves = {}
        if rows:
            try:
                curves["env_step"] = str(plot_learning_curve(rows, self.out / "learning_curve.png",
                                                             title=f"{a.task} (sim, {a.actors} actors)"))
                curves["wall_s"] = str(plot_learning_curve(rows, self.out / "learning_curve_time.png", x="wall_s",
                                                           title=f"{a.task} (sim, {a.actors} actors)"))
            except ImportError as err:
                self.display.message(f"sim: no learning-curve plot ({err})")
        st = read_status(self.out / "status.json")
        evaluation = self.evaluate()
        ck = latest_checkpoint(self.out / "checkpoints") if (self.out / "checkpoints").is_dir() else None
        actors = {}
        for i in range(a.actors):
            actors[f"actor-{i}"] = read_status(self.logs / f"actor-{i}.json")
        summary = {
            "task": a.task, "obs_mode": a.obs_mode, "actors": a.actors, "max_env_steps": self.max_steps,
            "env_step": st.get("env_step"), "episodes": st.get("episodes"), "updates": st.get("updates"),
            "weights_version": st.get("weights_version"), "train_success_rate": st.get("success_rate"),
            "wall_s": round(time.monotonic() - self.t0, 1), "learner_elapsed_s": st.get("elapsed_s"),
            "interrupted": interrupted, "checkpoint": str(ck) if ck else None,
            "eval_success_rate": evaluation.get("success_rate") if evaluation else None,
            "eval_episodes": evaluation.get("episodes") if evaluation else 0,
            "eval_return": evaluation.get("return") if evaluation else None,
            "milestones": milestones(rows), "learning_curves": curves, "actor_stats": actors,
            "intervene": a.intervene, "learner_args": a.learner_args, "actor_args": a.actor_args,
        }
        _write_json(self.out / "summary.json", summary)
        ev = summary["eval_success_rate"]
        self.display.message(
            f"sim: {'interrupted' if interrupted else 'done'} after {_dur(summary['wall_s'])}: env_step "
            f"{summary['env_step']}, training success {_rate(summary['train_success_rate'])}, deterministic "
            f"evaluation {'-' if ev is None else f'{ev:.2f}'} over {summary['eval_episodes']} episodes; "
            f"{self.out / 'summary.json'}")
        return True


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    return Sim(args).run()
