"""`robot-rl sim`'s library: distributed training in simulation, every part a separate process, one progress view.

Starts (each as ``python -m robot_rl.cli ...`` in its own process group): scripted demo recording (unless --demos),
one twin robot server per actor (``robot-server``), from cameras the learner's preparation (``learner
--prepare-only``: the camera encoder pretrained on the demos when the agent's config asks), the learner
(``learner``) and N actors (``actor --robot``).
Renders the learner's OUT/status.json as one live display (env steps, success rate, updates/s, weights version
per actor, buffer sizes). Finishes when the learner reaches --max-env-steps, then stops the actors and servers,
redraws the learning curves (OUT/learning_curve.png against env steps, OUT/learning_curve_time.png against wall
time) and evaluates the last checkpoint deterministically (``actor --evaluate``): success rate printed and in
OUT/summary.json. Ctrl-C or SIGTERM stops everything cleanly (terminate, then kill after a grace period; the
learner writes its final checkpoint) and still evaluates (a second Ctrl-C skips that). A dying actor is
restarted (up to --actor-restarts times); the learner keeps training meanwhile.

Everything runs under a `supervisor.Supervisor`; this module is only the wiring of this one job (which children,
with which command lines, in which stop order, what happens when the learner finishes). It spawns processes and
reads files; it imports nothing outside robot_rl and supervisor. Logs: OUT/logs/. Its command line and SimConfig
are supervisor.sim_config; the command module supervisor.sim_cli parses and calls `run_sim`.

Usage::

    sim = Sim(sim_config(build_sim_parser().parse_args(["--task", "twin-reach"])))   # supervisor.sim_config
    sim.learner_argv(demos)            # the learner's command line; run_sim(cfg) runs the whole job

    robot-rl sim --task twin-pick-cube                       # state obs, RLPD, 20 scripted demos, 2 actors
    robot-rl sim --task twin-reach --actors 1 --max-env-steps 3000 --out runs/reach
    robot-rl sim --task twin-pick-cube --out runs/pick --resume         # continue an interrupted run
    robot-rl sim --task twin-pick-cube --learner-args "--utd 1 --hidden 256,256" --actor-args "--chunk-steps 50"
    robot-rl sim --task twin-pick-cube --set discount=0.99 --set bc_weight=1.0   # AgentConfig fields (learner --set)
    robot-rl sim --task twin-pick-cube --obs-mode pixels --image-size 64 --reward classifier:runs/cls --faithful

`--reward` and `--reward-gate-k` go to every actor (each computes its reward from its own frames, positives
audited in OUT/reward_audit/actor-i) and to the final evaluation, which counts a classifier's success with the same
gate and reports the twin's true success beside it (else the twin's true success); `--faithful` to the learner, the
actors and the final evaluation. `--obs-mode` defaults to the task file's `[observation] mode`, as the actor's and
the learner's do.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from robot_rl.errors import ConfigError
from robot_rl.extras import require_extras
from robot_rl.metrics import plot_learning_curve, read_metrics
from robot_rl.presets import task_reward
from robot_rl.reward_source import IMAGES_LEAF, POLICY_CAMERAS, parse_reward_source
from robot_rl.run_dir import CHECKPOINTS_DIR, METRICS_FILE, check_run_dir, latest_run_checkpoint
from robot_rl.timing import timing_overrides
from supervisor.display import Display, fmt_count, fmt_duration, fmt_rate, read_json
from supervisor.process import Child, ChildError, ChildSpec, tail
from supervisor.sim_config import SimConfig
from supervisor.supervisor import Supervisor

# Stop order (supervisor.ChildSpec.stop_order): actors first (they flush what the learner has not acknowledged),
# then the learner (final checkpoint), then the robot servers, then anything else.
STOP_ACTORS, STOP_LEARNER, STOP_SERVERS, STOP_REST = 0, 1, 2, 3
# The children's packages: robot servers and recording need the twin, the learner and the actors torch too.
EXTRAS = ("sim", "learn")


# --------------------------------------------------------------------------------------------------- display

def render_status(st: dict[str, Any], elapsed_s: float, task: str, max_steps: int) -> list[str]:
    """The combined progress display (one header line + one line per actor) from the learner's status.json."""
    if not st:
        return [f"sim {task} | {fmt_duration(elapsed_s)} | waiting for the learner ..."]
    head = (f"sim {task} | {fmt_count(st.get('env_step'))}/{fmt_count(max_steps)} env steps | "
            f"{fmt_duration(elapsed_s)} | success {fmt_rate(st.get('success_rate'))} (last "
            f"{st.get('episodes', 0) and min(20, st['episodes'])} ep, {st.get('episodes', 0)} total) | updates "
            f"{fmt_count(st.get('updates'))} "
            + ("(first update: compiling the learner's losses, ~20-70 s)" if st.get("compiling") else
               f"({(st.get('updates_per_s') or 0.0):.1f}/s)") + " | weights "
            f"v{st.get('weights_version', 0)} | buffers online {fmt_count(st.get('online_size'))} demo "
            f"{fmt_count(st.get('demo_size'))}")
    lines = [head]
    for aid, a in sorted(dict(st.get("actors", {})).items()):
        state = "alive" if a.get("alive") else "away "
        paused = " paused" if a.get("paused") else ""
        rate = a.get("env_steps_per_s")
        resets = a.get("operator_scene_resets")
        lines.append(f"  {aid:<10} {state} weights v{a.get('weights_version', -1):<5} "
                     f"{fmt_count(a.get('transitions')):>6} steps {a.get('episodes', 0):>5} ep  success "
                     f"{fmt_rate(a.get('success_rate'))}  interventions {fmt_rate(a.get('intervention_rate'))}  "
                     f"{'-' if rate is None else f'{rate:.0f}'} steps/s{paused}"
                     + (f"  scene resets {resets}" if resets is not None else ""))
    return lines


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

def guard_stops(logs: Path) -> int | None:
    """How many times the robot servers' safety guards stopped the arm (their 'safety: STOP' log lines: each ends
    the training episode it happened in); None without robot server logs (--in-process-twin)."""
    files = sorted(logs.glob("robot-server-*.log"))
    if not files:
        return None
    return sum(line.startswith("safety: STOP") for f in files for line in f.read_text(errors="replace").splitlines())


def _read_card(directory: Path, source: str) -> tuple[int, tuple[str, ...]]:
    """(square image size, camera names) a reward classifier's card (DIR/card.json, written by `robot-rl
    train-classifier`) reads, for the robot servers' cameras ("images/NAME" paths -> NAME). Read as plain JSON: the
    supervisor imports only the kernel; the actors check the whole card (cameras, size, weights) when they load the
    classifier. ConfigError naming the file."""
    path = directory / "card.json"
    try:
        card = json.loads(path.read_text())
        h, w = (int(v) for v in card["image_size"])
        cameras = tuple(str(c).partition("/")[2] for c in card.get("cameras", ())
                        if str(c).startswith(f"{IMAGES_LEAF}/"))
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"--reward {source}: {path} gives no image_size [H, W] ({type(err).__name__}: {err}); "
                          f"a classifier directory holds the card robot-rl train-classifier writes") from err
    if h != w or h < 1:
        raise ConfigError(f"--reward {source}: {path}: image_size {h}x{w} is not square; the robot servers render "
                          f"square frames")
    return h, cameras


class Sim:
    """The wiring of one `robot-rl sim` run over a Supervisor; `run()` returns the exit code."""

    def __init__(self, cfg: SimConfig) -> None:
        self.cfg = cfg
        self.check_reward()
        self.max_steps = cfg.steps
        self.out = cfg.out_dir
        # the learner's check (it also counts inbox chunks, which it reads; this process imports no learner)
        check_run_dir(self.out, cfg.resume, needs_checkpoint=False, metrics=False)
        self.logs = self.out / "logs"
        self.display = Display(cfg.display, cfg.print_every)
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", "1")
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        env.setdefault("MUJOCO_GL", "egl")
        env["PYTHONUNBUFFERED"] = "1"
        self.sup = Supervisor(env)
        self.t0 = time.monotonic()

    def check_reward(self) -> None:
        """--reward and --faithful, checked before any child starts (each actor would refuse them the same way).
        A classifier with a state policy sets `reward_image_size` (the card's): the robot servers then serve
        cameras at that size, which only the actors' reward model reads (never the observation). A card naming a
        camera beyond the policy's (the twin's side camera) sets `server_cameras`: the servers serve it too, and the
        actors read it for the classifier only (learners.rewards.reward_model.add_reward_cameras)."""
        a = self.cfg
        self.reward_image_size: int | None = None
        self.server_cameras: tuple[str, ...] | None = None
        kind, directory = parse_reward_source(a.reward)
        if kind == "classifier":
            assert directory is not None
            if not Path(directory).is_dir():
                raise ConfigError(f"--reward {a.reward}: no such classifier directory (robot-rl train-classifier "
                                  f"writes one)")
            size, cameras = _read_card(Path(directory), a.reward)
            extra = tuple(c for c in cameras if c not in POLICY_CAMERAS)
            if extra:
                self.server_cameras = POLICY_CAMERAS + extra
            if a.obs_mode != "pixels":  # a state policy: the servers serve the cameras at the card's size
                self.reward_image_size = size
                if a.image_size and a.image_size != self.reward_image_size:
                    raise ConfigError(f"--image-size {a.image_size}: the classifier of --reward {a.reward} reads "
                                      f"{self.reward_image_size}x{self.reward_image_size} frames; drop --image-size "
                                      f"or pass {self.reward_image_size}")
        if a.faithful and kind == "env":
            raise ConfigError("--faithful: the hardware-faithful env gives no reward (no Task.success); pass --reward "
                              "classifier:DIR (robot-rl train-classifier) or --reward human (with --intervene)")

    def cli(self, *argv: str) -> list[str]:
        return [sys.executable, "-m", "robot_rl.cli", *argv]

    def spec(self, name: str, argv: list[str], stop_order: int = STOP_REST, **kw: Any) -> ChildSpec:
        return ChildSpec(name, tuple(argv), self.logs / f"{name}.log", stop_order=stop_order,
                         grace_s=kw.pop("grace_s", self.cfg.grace), **kw)

    # -- command lines
    def demos_argv(self, demos: Path, episodes: int) -> list[str]:
        a = self.cfg
        argv = self.cli("record-demos", "--task", a.task, "--teleop", "scripted", "--episodes", str(episodes),
                        "--out", str(demos), "--obs-mode", a.obs_mode)
        if a.obs_mode == "pixels":
            # scenes spread over the start area, as a person spreads them on an arm (demos.recording.scenes: seeds
            # 0..19 left the corners without a demo, where the faithful pixel policy then failed); state runs keep
            # seeds 0..19 (the state main command ended 16/20 and 20/20 with spread demos, 20/20 twice without)
            argv += ["--scenes", "spread"]
        if a.image_size:
            argv += ["--image-size", str(a.image_size)]
        # the demos under the timing the run trains with (the faithful default included, record-demos has no
        # --faithful): demos recorded on an arm carry its cameras' latency, and demos on time taught the faithful
        # pixel runs less (docs/twin.md)
        return argv + self.timing_argv(resolved=True)

    def server_argv(self) -> list[str]:
        a = self.cfg
        argv = self.cli("robot-server", "--backend", "twin", "--task", a.task, "--bind", "tcp://127.0.0.1:0",
                        "--stats-every", "0")
        if a.obs_mode == "state" and self.reward_image_size is None:
            argv.append("--no-cameras")
        elif a.obs_mode == "state":  # cameras for the actors' classifier only (envs.env reward_cameras)
            argv += ["--image-size", str(self.reward_image_size)]
        elif a.image_size:
            argv += ["--image-size", str(a.image_size)]
        if self.server_cameras is not None and "--no-cameras" not in argv:
            argv += ["--cameras", ",".join(self.server_cameras)]
        return argv

    def learner_argv(self, demos: Path | None) -> list[str]:
        a = self.cfg
        argv = self.cli("learner", "--task", a.task, "--bind", "tcp://127.0.0.1:0", "--out", str(self.out),
                        "--obs-mode", a.obs_mode, "--max-env-steps", str(self.max_steps), "--seed", str(a.seed))
        if demos is not None:
            argv += ["--demos", str(demos)]
        if a.faithful:
            argv.append("--faithful")
        if a.resume:
            argv.append("--resume")
        if a.image_size:
            argv += ["--image-size", str(a.image_size)]
        if a.backend is not None:
            argv += ["--backend", a.backend]
        for item in a.set:
            argv += ["--set", item]
        return argv + shlex.split(a.learner_args)

    def actor_argv(self, i: int, learner: str, robot: str | None) -> list[str]:
        a = self.cfg
        argv = self.cli("actor", "--task", a.task, "--learner", learner, "--actor-id", f"actor-{i}",
                        "--obs-mode", a.obs_mode, "--seed", str(a.seed + 1000 * i), "--quiet",
                        "--stats-out", str(self.logs / f"actor-{i}.json"))
        if robot is not None:
            argv += ["--robot", robot]
        if a.image_size:
            argv += ["--image-size", str(a.image_size)]
        if a.intervene:
            argv += ["--intervene", a.intervene]
        if a.device_config:
            argv += ["--device-config", str(Path(a.device_config).resolve())]
        argv += self.reward_argv()
        if a.reward != "env":  # each actor computes its own reward; positives audited per actor in the run
            argv += ["--reward-audit", str(self.out / "reward_audit" / f"actor-{i}")]
        if a.faithful:
            argv.append("--faithful")
        return argv + self.timing_argv() + shlex.split(a.actor_args)

    def reward_argv(self) -> list[str]:
        """--reward where it is not the task file's (the actor's default) and --reward-gate-k where given (else
        the actor reads the file's gate_k itself): for the actors and the final evaluation, which counts a
        classifier's success with the same gate."""
        a = self.cfg
        argv = ["--reward", a.reward] if a.reward != (task_reward(a.task)[0] or "env") else []
        return argv + (["--reward-gate-k", str(a.reward_gate_k)] if a.reward_gate_k is not None else [])

    def timing_argv(self, resolved: bool = False) -> list[str]:
        """--camera-latency-ms / --action-delay-ms as given (None: the child's own default, left out); `resolved`:
        the values the run's envs get (robot_rl.timing.timing_overrides: with --faithful its defaults filled in)."""
        a = self.cfg
        values: dict[str, float | None] = {"camera_latency_ms": a.camera_latency_ms,
                                           "action_delay_ms": a.action_delay_ms}
        if resolved:
            values = dict(timing_overrides(a.faithful, a.camera_latency_ms, a.action_delay_ms))
        return [arg for name, v in values.items() if v is not None
                for arg in ("--" + name.replace("_", "-"), f"{v:g}")]

    def evaluate_argv(self, result_path: Path) -> list[str]:
        a = self.cfg
        argv = self.cli("actor", "--task", a.task, "--evaluate", str(self.out / CHECKPOINTS_DIR), "--episodes",
                        str(a.eval_episodes), "--obs-mode", a.obs_mode, "--summary", str(result_path))
        if a.faithful:
            argv.append("--faithful")
        if a.image_size:
            argv += ["--image-size", str(a.image_size)]
        return argv + self.reward_argv() + self.timing_argv()

    # -- phases
    def record_demos(self) -> Path | None:
        a = self.cfg
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
        child = self.sup.start(self.spec("record-demos", self.demos_argv(demos, a.demo_episodes - have)))
        rc = self.sup.wait(child)
        if rc != 0:
            raise ChildError(f"recording demos failed (exit code {rc}); see {child.log_path}:\n"
                             f"{tail(child.log_path)}")
        return demos

    def start_server(self, i: int) -> str:
        child = self.sup.start(self.spec(f"robot-server-{i}", self.server_argv(), STOP_SERVERS))
        return child.wait_for_line(re.compile(r"serving .* on (tcp://\S+)"), self.cfg.start_timeout,
                                   self.sup.stop_requested).group(1)

    def prepare_learner(self, demos: Path | None) -> None:
        """From cameras with demos the learner's agent may pretrain its encoder on them first (minutes on a CPU):
        run that as its own step (`learner --prepare-only`, no start timeout), so the learner starts in time."""
        if self.cfg.obs_mode != "pixels" or demos is None:
            return
        self.display.message("sim: preparing the learner (its camera encoder is pretrained on the demos when the "
                             "agent's config asks; minutes on a CPU) ...")
        child = self.sup.start(self.spec("learner-prepare", [*self.learner_argv(demos), "--prepare-only"]))
        self.relay(child, "learner: encoder: ")
        rc = self.sup.wait(child)
        if rc != 0:
            raise ChildError(f"preparing the learner failed (exit code {rc}); see {child.log_path}:\n"
                             f"{tail(child.log_path)}")

    def relay(self, child: Child, prefix: str) -> None:
        """Show `child`'s output lines that start with `prefix` on the display until it exits (or a stop is
        requested: `Supervisor.wait` then stops it)."""
        while True:
            try:
                line = child.lines.get(timeout=0.2)
            except queue.Empty:
                if not child.alive() or self.sup.stop_requested.is_set():
                    return
                continue
            if line.startswith(prefix):
                self.display.message(f"sim: {line.split(': ', 1)[1].rstrip()}")

    def start_learner(self, demos: Path | None) -> str:
        child = self.sup.start(self.spec("learner", self.learner_argv(demos), STOP_LEARNER))
        return child.wait_for_line(re.compile(r"listening on (tcp://\S+)"), self.cfg.start_timeout,
                                   self.sup.stop_requested).group(1)

    def start_actor(self, i: int, learner: str, robot: str | None) -> Child:
        return self.sup.start(self.spec(f"actor-{i}", self.actor_argv(i, learner, robot), STOP_ACTORS,
                                        restart="always", max_restarts=self.cfg.actor_restarts))

    def evaluate(self) -> dict[str, Any] | None:
        a = self.cfg
        if a.eval_episodes <= 0 or latest_run_checkpoint(self.out) is None:
            return None
        self.display.message(f"sim: evaluating the last checkpoint ({a.eval_episodes} deterministic episodes; "
                             f"Ctrl-C to skip) ...")
        result_path = self.out / "eval.json"
        self.sup.stop_requested.clear()
        child: Child | None = None
        try:
            child = self.sup.start(self.spec("evaluate", self.evaluate_argv(result_path), grace_s=5.0))
            rc = self.sup.wait(child)
        except KeyboardInterrupt:
            if child is not None:
                child.stop()
            self.display.message("sim: evaluation skipped")
            return None
        if rc != 0:
            self.display.message(f"sim: evaluation failed (exit code {rc}); see {child.log_path}")
            return None
        return read_json(result_path) or None

    # -- main loop
    def run(self) -> int:
        a = self.cfg
        self.out.mkdir(parents=True, exist_ok=True)
        with self.sup.handle_signals():
            try:
                try:
                    demos = self.record_demos()
                    robots: list[str | None] = [None] * a.actors
                    if not a.in_process_twin:
                        robots = [self.start_server(i) for i in range(a.actors)]
                    self.prepare_learner(demos)
                    learner_addr = self.start_learner(demos)
                    self.display.message(f"sim: learner on {learner_addr}; {a.actors} actor(s); logs in {self.logs}")
                    for i in range(a.actors):
                        self.start_actor(i, learner_addr, robots[i])
                    self.watch()
                except KeyboardInterrupt:
                    pass
                interrupted = self.sup.stop_requested.is_set()
                self.shutdown()
                if interrupted:
                    self.display.message("sim: interrupted; everything stopped (the learner wrote its final "
                                         "checkpoint)")
                return 0 if self.finish(interrupted) else 1
            except ChildError as err:
                self.display.message(f"sim: error: {err}")
                self.shutdown()
                return 1
            finally:
                self.shutdown()

    def watch(self) -> None:
        """Show progress until the learner is done (returns) or fails (ChildError); restart dying actors."""
        a = self.cfg
        status_path = self.out / "status.json"
        while not self.sup.stop_requested.is_set():
            for ex in self.sup.poll():
                if ex.name == "learner":
                    st = read_json(status_path)
                    if ex.returncode == 0 and st.get("done"):
                        self.display.show(render_status(st, time.monotonic() - self.t0, a.task, self.max_steps),
                                          True)
                        return
                    raise ChildError(f"the learner exited with code {ex.returncode}; see {ex.log_path}:\n"
                                     f"{tail(ex.log_path)}")
                if ex.restarted:
                    self.display.message(f"sim: {ex.name} exited with code {ex.returncode}; restarting it "
                                         f"({ex.restarts}/{a.actor_restarts}); see {ex.log_path}")
                else:
                    self.display.message(f"sim: {ex.name} exited with code {ex.returncode} (not restarted); see "
                                         f"{ex.log_path}")
            self._require_an_actor()
            st = read_json(status_path)
            self.display.show(render_status(st, time.monotonic() - self.t0, a.task, self.max_steps))
            self.sup.stop_requested.wait(1.0)

    def _require_an_actor(self) -> None:
        """ChildError when every actor has failed for good (dead, a nonzero exit, no restart left): the learner
        would wait for transitions forever. Actors that exited 0 (the run is finishing) do not count."""
        actors = [c for n, c in self.sup.children.items() if n.startswith("actor-")]
        if not actors or any(c.alive() for c in actors):
            return
        failed = [c for c in actors if c.returncode() not in (None, 0)
                  and not (c.spec.restart != "never" and c.restarts < c.spec.max_restarts)]
        if len(failed) == len(actors):
            last = failed[-1]
            raise ChildError(f"every actor exited and none is restarted any more ({last.name}: code "
                             f"{last.returncode()}); see {last.log_path}:\n{tail(last.log_path)}")

    def shutdown(self) -> None:
        """Stop actors (they flush to the learner), then the learner (final checkpoint), then the servers."""
        self.sup.stop()

    def finish(self, interrupted: bool) -> bool:
        a = self.cfg
        rows = read_metrics(self.out / METRICS_FILE)
        curves = {}
        if rows:
            try:
                curves["env_step"] = str(plot_learning_curve(rows, self.out / "learning_curve.png",
                                                             title=f"{a.task} (sim, {a.actors} actors)"))
                curves["wall_s"] = str(plot_learning_curve(rows, self.out / "learning_curve_time.png", x="wall_s",
                                                           title=f"{a.task} (sim, {a.actors} actors)"))
            except ImportError as err:
                self.display.message(f"sim: no learning-curve plot ({err})")
        st = read_json(self.out / "status.json")
        evaluation = self.evaluate()
        ck = latest_run_checkpoint(self.out)
        actors = {}
        for i in range(a.actors):
            actors[f"actor-{i}"] = read_json(self.logs / f"actor-{i}.json")
        summary: dict[str, Any] = {
            "task": a.task, "obs_mode": a.obs_mode, "actors": a.actors, "max_env_steps": self.max_steps,
            "env_step": st.get("env_step"), "episodes": st.get("episodes"), "updates": st.get("updates"),
            "weights_version": st.get("weights_version"), "train_success_rate": st.get("success_rate"),
            "wall_s": round(time.monotonic() - self.t0, 1), "learner_elapsed_s": st.get("elapsed_s"),
            "first_update_s": st.get("first_update_s"),
            "interrupted": interrupted, "checkpoint": str(ck) if ck else None,
            "eval_success_rate": evaluation.get("success_rate") if evaluation else None,
            "eval_success_source": evaluation.get("success_source") if evaluation else None,
            "eval_true_success_rate": evaluation.get("true_success_rate") if evaluation else None,
            "eval_episodes": evaluation.get("episodes") if evaluation else 0,
            "eval_return": evaluation.get("return") if evaluation else None,
            "milestones": milestones(rows), "guard_stops": guard_stops(self.logs), "learning_curves": curves,
            "actor_stats": actors,
            "intervene": a.intervene, "reward": a.reward, "reward_gate_k": a.reward_gate_k, "faithful": a.faithful,
            "learner_set": list(a.set),
            "timing": timing_overrides(a.faithful, a.camera_latency_ms, a.action_delay_ms),
            "backend": a.backend, "learner_args": a.learner_args, "actor_args": a.actor_args,
        }
        _write_json(self.out / "summary.json", summary)
        ev, truth = summary["eval_success_rate"], summary["eval_true_success_rate"]
        counted = "" if ev is None else (f" (the classifier's success{'' if truth is None else f'; true {truth:.2f}'})"
                                         if summary["eval_success_source"] not in (None, "env") else
                                         " (the twin's true success)")
        self.display.message(
            f"sim: {'interrupted' if interrupted else 'done'} after {fmt_duration(summary['wall_s'])}: env_step "
            f"{summary['env_step']}, training success {fmt_rate(summary['train_success_rate'])}, deterministic "
            f"evaluation {'-' if ev is None else f'{ev:.2f}'}{counted} over {summary['eval_episodes']} episodes; "
            f"{self.out / 'summary.json'}")
        if summary["guard_stops"]:
            self.display.message(
                f"sim: the robot servers' safety guards stopped {summary['guard_stops']} of {summary['episodes']} "
                f"training episodes (each ends its episode, counted a failure in the training success; why: "
                f"{self.logs}/robot-server-*.log)")
        return True


def run_sim(cfg: SimConfig) -> int:
    """Run one `robot-rl sim` job (checked before anything starts); the exit code."""
    sim = Sim(cfg)
    require_extras(EXTRAS, "robot-rl sim (robot servers, learner, actors)")
    if cfg.backend == "jax" or any(i.replace(" ", "") == "backend=jax" for i in cfg.set):
        require_extras(("jax",), "robot-rl sim --backend jax (the JAX learner)")
    return sim.run()
