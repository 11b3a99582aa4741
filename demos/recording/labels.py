"""Recording labelled frames for a reward classifier (`robot-rl record-labels`, HIL-SERL style): success / failure
per frame, the running counts shown live.

A teleop device drives the env; every frame is labelled *success* or *failure*, with the running counts shown
live. Where the labels come from (`--labels`):

- "events" (the default for hardware devices): the operator's success key. Devices report key presses as
  edges, so the key *toggles* success labelling: the first "success" event turns it on, the next "success"
  (or a "failure") turns it off. Frames are labelled success while it is on.
- "info" (the default for `--teleop scripted`, so the tool runs without a human): the task's own success
  condition (`Task.success` on the robot state, i.e. the env's `info["success"]`).

Negatives near success are the most useful ones (HIL-SERL), so a segment does not stop at success: it goes
on until `--after-success` frames after the success label went back off. With the scripted device the
driver holds the successful state for `--hold-steps` frames, then backs out along its own path (its arm
actions reversed and negated, gripper kept), which gives near-miss negatives right next to the positives;
`--back-out-slowdown N` splits each step of that way back into N, so the frames around the success boundary come N
times as densely. `--lift-cm LO HI` (scripted pick-cube) has the expert lift the cube a random LO-HI cm above its
grasp per segment instead of 12 cm, so the positives also show the heights a learning policy carries the cube to.
The env is made with `terminate_on_success=False` so the episode goes on past success; `info["success"]`
still reports the task's condition every step.

On disk (robot_rl.episodes format, one episode per recording segment = env reset to segment end):
`success[t]` is the label of observation t+1 (the frame after step t; observation 0, the reset frame, has no
label), `rewards[t]` = 1.0 on success frames else 0.0, `intervention[t]` = the device was active,
`terminated`/`truncated` are the env's flags, `spec` the env's EnvSpec (as in record-demos). `info` holds
"seed", "teleop", "labels" (the label source), "env_kwargs" (what the env was made with, for replay) and
"positives" / "negatives" (the segment's counts).
A segment the operator discards ("rerecord") is not written; "quit" writes the current segment and stops.

Near misses (`--near-misses N`, scripted device on pick-cube and both cube-relocate tasks, default 1 there):
after every expert segment the scripted device records N segments of `envs.twin.near_miss` routines, cycling through
the task's kinds. Pick-cube: "lift-drop" (cube lifted ~1.5 cm, then dropped), "grip-beside" (fingers closed
next to the cube, lifted empty) and "push" (cube pushed along the table). Cube-relocate (either direction; "the
zone" is the target zone): "place-outside" (cube carried and put down 2-5 cm beyond an edge of the zone,
released), "empty-visit" (the hand lowered to a release over the zone and opened, the cube left where it is) and
"hold-over" (cube held 2-4 cm up over the zone, never released). Each ends when its routine is done and is all
negatives. `info["segment"]` says which ("expert" or "near-miss:<kind>").

The options are `RecordLabelsConfig`, one field per command-line flag (`record_labels_arg_parser`; launch files build
these command lines, and tests parse them the same way). `make_continuing_env` (the preset's env with success not
ending the episode) also serves `robot-rl episodes replay`.

Usage::

    record_labels(RecordLabelsConfig(task="twin-pick-cube", out=Path("labels/pick"), frames=600))   # exit code 0
    env, task_success = make_continuing_env("twin-pick-cube", obs_mode="state")
    seg = record_segment(env, device, InfoLabeler(), task_success, seed=0, limits=SegmentLimits())
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from demos.devices.operators import require_success_binding, teleop_device_options
from demos.devices.teleop import DEVICES, build_hardware_device, make_device
from demos.recording.demos import env_spec_dict, make_recording_env
from envs.devices import HumanCommand, HumanDevice
from robot_rl.config import Config, require
from robot_rl.episodes import Episode, save_episode
from robot_rl.errors import ConfigError
from robot_rl.presets import PRESETS, get_preset

LABEL_SOURCES = ("auto", "events", "info")
"""--labels choices: "auto" = "info" for the scripted device, "events" for a human one."""


# ----------------------------------------------------------------------------------------------------------
# env helpers (also used by `robot-rl episodes replay`, demos.formats.episode_tools)


def make_continuing_env(task: str, **overrides: Any) -> tuple[Any, Callable[[Any, dict[str, Any]], bool]]:
    """gymnasium.make the preset `task` (with `overrides`) so that success does not end the episode
    (`RobotEnvConfig.terminate_on_success=False`).

    Returns (env, task_success) where `task_success(state, info)` is the task's success condition, read from
    `info["success"]` (the env still reports it every step).
    """
    from envs.presets import make_env

    env = make_env(task, terminate_on_success=False, **overrides)
    return env, lambda state, info: bool(info.get("success", False))


# ----------------------------------------------------------------------------------------------------------
# labels


class Labeler(Protocol):
    """Decides each frame's label from the device's events and the task's success condition."""

    def reset(self) -> None: ...

    def update(self, events: frozenset[str], task_success: bool) -> bool:
        """The label of the frame after this step."""
        ...


class EventLabeler:
    """Success while the operator's success toggle is on: "success" flips it, "failure" turns it off.

    Usage::

        lab = EventLabeler(); lab.update(frozenset({"success"}), False)   # True until the next success/failure
    """

    def __init__(self) -> None:
        self.on = False

    def reset(self) -> None:
        self.on = False

    def update(self, events: frozenset[str], task_success: bool) -> bool:
        if "success" in events:
            self.on = not self.on
        if "failure" in events:
            self.on = False
        return self.on


class InfoLabeler:
    """Success exactly when the task's success condition holds (no human needed)."""

    def reset(self) -> None:
        pass

    def update(self, events: frozenset[str], task_success: bool) -> bool:
        return bool(task_success)


def make_labeler(source: str) -> Labeler:
    """"events" -> EventLabeler, "info" -> InfoLabeler; ConfigError otherwise."""
    if source == "events":
        return EventLabeler()
    if source == "info":
        return InfoLabeler()
    raise ConfigError(f"label source {source!r}: must be 'events' or 'info'")


class BackOutAfterSuccess:
    """For a scripted device: after `hold_steps` success frames in a row, drive back along the path taken
    (the recorded arm actions in reverse order, negated; gripper 0 = keep), so the state leaves the success
    region slowly and the segment gets near-miss negatives. Hold still once the path is used up.

    `slowdown` (an integer >= 1): each step of the way back is split into that many equal steps, so the way back
    takes `slowdown` times as many frames and the frames just inside and just outside the success condition come
    `slowdown` times as densely (the classifier's decision boundary is what those frames teach; a person recording
    labels does the same by moving slowly across it).

    Usage::

        drv = BackOutAfterSuccess(hold_steps=5, slowdown=3); drv.reset()
        action = drv.action(cmd.action()); ...; drv.observe(action, label)
    """

    def __init__(self, hold_steps: int, slowdown: int = 1) -> None:
        if hold_steps < 0:
            raise ConfigError(f"hold_steps={hold_steps} must be >= 0")
        if slowdown < 1:
            raise ConfigError(f"--back-out-slowdown={slowdown} must be an integer >= 1")
        self.hold_steps = int(hold_steps)
        self.slowdown = int(slowdown)
        self.reset()

    def reset(self) -> None:
        self.history: list[np.ndarray] = []
        self.success_run = 0
        self.backing_out = False
        self._piece = np.zeros(6, np.float32)
        self._pieces_left = 0

    def action(self, device_action: np.ndarray) -> np.ndarray:
        if not self.backing_out:
            return device_action
        out = np.zeros(7, np.float32)
        if self._pieces_left == 0 and self.history:
            self._piece = (-self.history.pop()[:6] / self.slowdown).astype(np.float32)
            self._pieces_left = self.slowdown
        if self._pieces_left > 0:
            out[:6] = self._piece
            self._pieces_left -= 1
        return out

    def observe(self, action: np.ndarray, label: bool) -> None:
        if self.backing_out:
            return
        self.history.append(np.asarray(action, np.float32).copy())
        self.success_run = self.success_run + 1 if label else 0
        if self.success_run >= self.hold_steps and label:
            self.backing_out = True


# ----------------------------------------------------------------------------------------------------------
# recording


@dataclasses.dataclass(frozen=True)
class SegmentLimits:
    """When a recording segment ends (besides the env ending it, "quit" and "rerecord")."""

    after_success: int = 5
    """Frames to keep recording after the success label went back off (near-miss negatives)."""
    max_frames: int | None = None
    """Stop the segment after this many frames (the session's remaining budget)."""


@dataclasses.dataclass
class Segment:
    """One recorded segment: the episode (None if discarded or empty) and why it ended."""

    episode: Episode | None
    reason: str
    """"after-success", "env-ended" (terminated/truncated), "frames" (budget), "quit" or "rerecord"."""

    @property
    def positives(self) -> int:
        return 0 if self.episode is None else int(self.episode.success.sum())

    @property
    def negatives(self) -> int:
        return 0 if self.episode is None else int(self.episode.length - self.episode.success.sum())


def record_segment(
    env: Any,
    device: HumanDevice,
    labeler: Labeler,
    task_success: Callable[[Any, dict[str, Any]], bool],
    seed: int,
    limits: SegmentLimits,
    task: str = "",
    driver: BackOutAfterSuccess | None = None,
    info: dict[str, Any] | None = None,
    on_step: Callable[[int, int], None] | None = None,
    spec: dict[str, Any] | None = None,
) -> Segment:
    """Record one labelled segment from `env.reset(seed=seed)`; see the module docstring for the rules.

    `on_step(positives, negatives)` is called after every frame (live counts); `spec` (the env's EnvSpec dict)
    and `info` are stored in the episode.
    """
    device.reset()
    labeler.reset()
    if driver is not None:
        driver.reset()
    obs, _ = env.reset(seed=seed)
    robot_env = env.unwrapped
    observations, actions, labels, terms, truncs, active = [obs], [], [], [], [], []
    positives = 0
    since_positive: int | None = None  # frames since the label last went off (None: no positive yet)
    reason = ""
    while True:
        cmd: HumanCommand = device.poll(getattr(robot_env, "last_state", None))
        if "rerecord" in cmd.events:
            return Segment(None, "rerecord")
        if "quit" in cmd.events:
            reason = "quit"
            break
        action = cmd.action()
        if driver is not None:
            action = driver.action(action)
        obs, _, terminated, truncated, step_info = env.step(action)
        label = labeler.update(cmd.events, task_success(getattr(robot_env, "last_state", None), step_info))
        if driver is not None:
            driver.observe(action, label)
        observations.append(obs)
        actions.append(action)
        labels.append(label)
        terms.append(terminated)
        truncs.append(truncated)
        active.append(bool(cmd.active))
        positives += label
        if on_step is not None:
            on_step(positives, len(labels) - positives)
        if label:
            since_positive = 0
        elif since_positive is not None:
            since_positive += 1
        if terminated or truncated:
            reason = "env-ended"
            break
        if since_positive is not None and since_positive >= limits.after_success:
            reason = "after-success"
            break
        if limits.max_frames is not None and len(labels) >= limits.max_frames:
            reason = "frames"
            break
        if getattr(device, "done", False):  # a scripted routine that ends by itself (envs.twin.near_miss)
            reason = "device-done"
            break
    if not actions:
        return Segment(None, reason)
    meta = dict(info or {})
    meta.update(seed=seed, positives=positives, negatives=len(labels) - positives)
    ep = Episode.from_steps(observations, actions, [float(x) for x in labels], terms, truncs, intervention=active,
                            success=labels, task=task, spec=spec, info=meta)
    return Segment(ep, reason)


@dataclasses.dataclass(frozen=True)
class RecordLabelsConfig(Config):
    """The options of `robot-rl record-labels` (the field names are the flags' dests; see the parser for help)."""

    task: str = "twin-pick-cube"
    teleop: str = "scripted"
    out: Path = Path("labels")
    frames: int = 600
    positives: int | None = None
    labels: str = "auto"
    after_success: int = 5
    hold_steps: int = 5
    back_out_slowdown: int = 1
    lift_cm: tuple[float, float] | None = None
    obs_mode: str = "pixels"
    image_size: int | None = None
    cameras: str | None = None
    noise: float = 0.0
    seed: int = 0
    near_misses: int | None = None
    robot: str | None = None
    allow_twin_box: bool = False
    keys: str | None = None
    device_config: str | None = None

    def validate(self) -> None:
        if self.frames < 1:
            raise ConfigError(f"--frames={self.frames} must be >= 1")
        if self.positives is not None and self.positives < 1:
            raise ConfigError(f"--positives={self.positives} must be >= 1")
        if self.after_success < 0:
            raise ConfigError(f"--after-success={self.after_success} must be >= 0")
        if self.back_out_slowdown < 1:
            raise ConfigError(f"--back-out-slowdown={self.back_out_slowdown} must be an integer >= 1")
        if self.back_out_slowdown != 1 and self.teleop != "scripted":
            raise ConfigError(f"--back-out-slowdown={self.back_out_slowdown}: only the scripted device backs out by "
                              f"itself (got --teleop {self.teleop}); with a person at the device, move slowly across "
                              f"the success boundary instead")
        if self.lift_cm is not None:
            lo, hi = self.lift_cm
            if self.teleop != "scripted":
                raise ConfigError(f"--lift-cm: only the scripted device lifts by itself (got --teleop {self.teleop}); "
                                  f"with a person at the device, lift to the heights a policy will reach instead")
            if not 0 < lo <= hi <= 40:
                raise ConfigError(f"--lift-cm {lo:g} {hi:g}: needs 0 < LO <= HI <= 40 (cm above the grasp)")
        if self.cameras is not None and (self.obs_mode != "pixels" or not self.camera_names
                                         or len(set(self.camera_names)) != len(self.camera_names)):
            raise ConfigError(f"--cameras {self.cameras!r}: distinct comma-separated camera names, with --obs-mode "
                              f"pixels (e.g. front,wrist,side)")
        require(self.labels in LABEL_SOURCES, "labels", self.labels, f"must be one of {list(LABEL_SOURCES)}")
        require(self.teleop in DEVICES, "teleop", self.teleop, f"must be one of {list(DEVICES)}")

    @property
    def camera_names(self) -> tuple[str, ...]:
        """`cameras` split at commas (() when not given: the task's observation cameras)."""
        return tuple(n.strip() for n in (self.cameras or "").split(",") if n.strip())

    @property
    def label_source(self) -> str:
        """"info" or "events": `labels`, with "auto" resolved by the device (scripted: info)."""
        return self.labels if self.labels != "auto" else ("info" if self.teleop == "scripted" else "events")


def record_labels_arg_parser() -> argparse.ArgumentParser:
    """The `robot-rl record-labels` command line (one flag per `RecordLabelsConfig` field)."""
    p = argparse.ArgumentParser(prog="robot-rl record-labels", description="`robot-rl record-labels`: record success "
                                "/ failure labelled frames for a reward classifier (HIL-SERL style).")
    p.add_argument("--task", required=True, help=f"task preset ({', '.join(PRESETS)}) or task file (.toml)")
    p.add_argument("--teleop", default="scripted", choices=DEVICES, help="teleop device")
    p.add_argument("--out", required=True, type=Path, help="episode directory (created or appended to)")
    p.add_argument("--frames", type=int, default=600, help="stop after this many labelled frames in all")
    p.add_argument("--positives", type=int, default=None,
                   help="also stop once this many success frames are recorded (checked at segment ends)")
    p.add_argument("--labels", default="auto", choices=LABEL_SOURCES,
                   help="label source: the success key (events) or the task's success condition (info)")
    p.add_argument("--after-success", type=int, default=5,
                   help="frames recorded after the success label goes off before the segment ends")
    p.add_argument("--hold-steps", type=int, default=5,
                   help="scripted device: success frames before it backs out along its path")
    p.add_argument("--back-out-slowdown", type=int, default=1, metavar="N",
                   help="scripted device: back out N times slower than it came (N times as many frames near the "
                        "success boundary)")
    p.add_argument("--lift-cm", type=float, nargs=2, default=None, metavar=("LO", "HI"),
                   help="scripted pick-cube: lift the cube a random LO-HI cm above its grasp per segment (default "
                        "12), so the labels show the heights a learning policy lifts to")
    p.add_argument("--obs-mode", default="pixels", choices=("pixels", "state"), help="observation mode")
    p.add_argument("--image-size", type=int, default=None, help="camera image size (pixels mode)")
    p.add_argument("--cameras", default=None, metavar="NAMES",
                   help="comma-separated cameras to record (pixels mode; default: the task's observation cameras), "
                        "e.g. front,wrist,side: the twin's side camera (or level, at the height of pick-cube's "
                        "line), which a classifier may read beside a pixel policy's cameras")
    p.add_argument("--noise", type=float, default=0.0, help="scripted teleop: Gaussian action noise std")
    p.add_argument("--seed", type=int, default=0, help="seed of the first segment (then +1 per segment)")
    p.add_argument("--near-misses", type=int, default=None,
                   help="scripted pick-cube / cube-relocate: near-miss segments after each expert segment "
                        "(default 1; 0: none)")
    p.add_argument("--robot", default=None, metavar="ADDR",
                   help="record on a robot server (robot-rl robot-server: hardware or a twin) instead of an "
                        "in-process twin")
    p.add_argument("--allow-twin-box", action="store_true",
                   help="with --robot on a hardware server: run a task whose workspace box is the twin's, not one "
                        "recorded in the lab (at your own risk)")
    p.add_argument("--keys", default=None, help="CURVE client key directory for a non-loopback --robot")
    p.add_argument("--device-config", default=None, metavar="FILE",
                   help="a hardware --teleop device's config fields as a JSON object (deadzone, scale, buttons, ...); "
                        "--labels events needs a button bound to success (a two-button SpaceMouse binds none)")
    return p


def parse_record_labels_args(argv: Sequence[str]) -> RecordLabelsConfig:
    """`robot-rl record-labels`'s arguments as a config (argparse's usage error and exit on bad flags)."""
    args = record_labels_arg_parser().parse_args(list(argv))
    if args.lift_cm is not None:
        args.lift_cm = tuple(args.lift_cm)
    return RecordLabelsConfig(**vars(args))


class LiveCounts:
    """Prints the running counts: one rewritten line on a terminal, one line per segment otherwise."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.pos = self.neg = 0
        self.segment = 0

    def step(self, seg_pos: int, seg_neg: int) -> None:
        if self.tty:
            self.stream.write(f"\r[record-labels] segment {self.segment}: success {seg_pos}  failure {seg_neg}"
                              f"  | total success {self.pos + seg_pos}  failure {self.neg + seg_neg}   ")
            self.stream.flush()

    def end_segment(self, seg: Segment, saved: str) -> None:
        self.pos += seg.positives
        self.neg += seg.negatives
        end = "\n" if self.tty else ""
        self.stream.write(f"{end}[record-labels] segment {self.segment} ({seg.reason}): success {seg.positives}, "
                          f"failure {seg.negatives} ({saved}); total success {self.pos}, failure {self.neg}\n")
        self.stream.flush()
        self.segment += 1


def near_miss_count(requested: int | None, teleop: str, task: str) -> int:
    """Near-miss segments per expert segment: `requested`, or by default 1 for the scripted device on a task
    with near-miss routines (pick-cube, cube-relocate) and 0 otherwise; ConfigError where the routines do not
    exist."""
    if requested is None:
        return 1 if near_miss_task_kinds(teleop, task) else 0
    if requested < 0:
        raise ConfigError(f"--near-misses={requested} must be >= 0")
    if requested and not near_miss_task_kinds(teleop, task):
        raise ConfigError(f"--near-misses={requested}: scripted near misses exist only for pick-cube and the "
                          f"cube-relocate tasks with --teleop scripted (got --task {task} --teleop {teleop})")
    return requested


def near_miss_task_kinds(teleop: str, task: str) -> tuple[str, ...]:
    """The near-miss kinds (`envs.twin.near_miss.near_miss_kinds`) the scripted device records on the preset `task`;
    () for another device or a task without routines."""
    from envs.twin.near_miss import near_miss_kinds

    name = _twin_task_name(task)
    return near_miss_kinds(name) if teleop == "scripted" and name else ()


def _twin_task_name(task: str) -> str:
    """The twin task a preset runs (envs.presets.twin_task: "pick_cube", ...), "" for a preset that is no twin's."""
    from envs.presets import twin_task
    from robot_rl.errors import UnknownTaskError

    try:
        return twin_task(task)
    except UnknownTaskError:
        return ""


def record_labels(cfg: RecordLabelsConfig) -> int:
    """Record labelled segments until `cfg.frames` frames (or `cfg.positives` success frames, checked at segment
    ends), a device's "quit" or Ctrl-C (130; the finished segments are on disk); returns the exit code."""
    get_preset(cfg.task)  # unknown task: UnknownTaskError before anything is built
    labeler = make_labeler(cfg.label_source)
    driver = BackOutAfterSuccess(cfg.hold_steps, cfg.back_out_slowdown) if cfg.teleop == "scripted" else None
    near_misses = near_miss_count(cfg.near_misses, cfg.teleop, cfg.task)
    kinds = near_miss_task_kinds(cfg.teleop, cfg.task) if near_misses else ()
    env_kwargs = {k: v for k, v in (("obs_mode", cfg.obs_mode), ("image_size", cfg.image_size),
                                    ("camera_names", cfg.camera_names or None)) if v is not None}
    options = teleop_device_options(cfg.teleop, cfg.device_config)
    env, task_success = _labelling_env(cfg, env_kwargs)
    try:
        if cfg.label_source == "events" and cfg.teleop != "scripted":  # labels from the success key: it must exist
            require_success_binding(cfg.teleop, build_hardware_device(cfg.teleop, **options).config,
                                    "--labels events")
        if cfg.lift_cm is not None:
            options["lift_m"] = _lift_range_m(cfg.task, cfg.lift_cm)
        device = make_device(cfg.teleop, task=cfg.task, seed=cfg.seed, noise_std=cfg.noise, **options)
    except BaseException:
        env.close()
        raise
    live = LiveCounts(sys.stdout)
    info = {"teleop": getattr(device, "name", cfg.teleop), "labels": cfg.label_source, "env_kwargs": env_kwargs}
    spec = env_spec_dict(env, cfg.task)
    frames = saved = 0
    t0 = time.monotonic()
    try:
        while frames < cfg.frames and (cfg.positives is None or live.pos < cfg.positives):
            seg_seed = cfg.seed + live.segment
            seg_device, seg_driver, seg_info = device, driver, {**info, "segment": "expert"}
            if near_misses and live.segment % (near_misses + 1):
                seg_device, seg_driver = _near_miss_operator(cfg.task, kinds, near_misses, live.segment, seg_seed), None
                seg_info.update(teleop=seg_device.name, segment=seg_device.name)  # "near-miss:<kind>"
            seg = record_segment(env, seg_device, labeler, task_success, seed=seg_seed,
                                 limits=SegmentLimits(cfg.after_success, cfg.frames - frames), task=cfg.task,
                                 driver=seg_driver, info=seg_info, on_step=live.step, spec=spec)
            if seg.episode is not None:
                path = save_episode(seg.episode, cfg.out)
                frames += seg.episode.length
                saved += 1
                status = f"saved {path.name}"
            else:
                status = "discarded"
            live.end_segment(seg, status)
            if seg.reason == "quit":
                break
    except KeyboardInterrupt:
        print(f"\n[record-labels] interrupted: {saved} segment(s) saved, none lost", file=sys.stderr)
        return 130
    finally:
        env.close()
        device.close()
    print(f"[record-labels] done: {saved} segment(s), {frames} frames in {cfg.out}: success {live.pos}, "
          f"failure {live.neg} ({time.monotonic() - t0:.0f}s)")
    return 0


def _labelling_env(cfg: RecordLabelsConfig, env_kwargs: dict[str, Any]
                   ) -> tuple[Any, Callable[[Any, dict[str, Any]], bool]]:
    """The env to label on (success does not end its episodes) and the task's success condition."""
    if cfg.robot is not None:  # a robot server (hardware or a twin): the env's info still reports success
        env = make_recording_env(cfg.task, cfg.robot, cfg.keys, cfg.allow_twin_box, terminate_on_success=False,
                                 **env_kwargs)
        return env, lambda state, info: bool(info.get("success", False))
    return make_continuing_env(cfg.task, **env_kwargs)


def _lift_range_m(task: str, lift_cm: tuple[float, float]) -> tuple[float, float]:
    """--lift-cm in metres for the scripted expert; a ConfigError for a task whose expert does not lift a cube."""
    if _twin_task_name(task) != "pick_cube":
        raise ConfigError(f"--lift-cm: only the scripted pick-cube expert lifts to a chosen height (task {task})")
    return lift_cm[0] / 100, lift_cm[1] / 100


def _near_miss_operator(task: str, kinds: tuple[str, ...], near_misses: int, segment: int, seed: int) -> Any:
    """The scripted near-miss device of segment `segment` (every (near_misses + 1)-th segment is the expert's; the
    others cycle through the task's near-miss kinds)."""
    from envs.presets import twin_task
    from envs.twin.near_miss import NearMissOperator

    kind = kinds[(segment - segment // (near_misses + 1) - 1) % len(kinds)]
    return NearMissOperator(kind, seed=seed, task=twin_task(task))
