"""The command line of `robot-rl sim` and the SimConfig it fills (supervisor.sim.Sim runs one). The command module
(supervisor.sim_cli) parses with these and calls supervisor.sim.run_sim; tests build the same configs here.

`--set FIELD=VALUE` and `--backend` reach the learner child as its own `--set` / `--backend`, `--learner-args` are
appended to the learner's command line as they are (e.g. "--ensemble 5 --hidden 256,256"): the learner resolves
them with the one AgentConfig resolver (learners.agents.options), so a sim run trains the agent `robot-rl learner`
and `robot-rl train` build from the same options.

Usage::

    cfg = sim_config(build_sim_parser().parse_args(["--task", "twin-reach", "--actors", "1"]))
    cfg.out_dir, cfg.steps                    # runs/sim-twin-reach, the task's default length

`--obs-mode` defaults to the task file's `[observation] mode` (robot_rl.presets.ObsModeFromTaskParser, as the actor's
and the learner's), `--reward` / `--reward-gate-k` to its `[reward]`; a flag wins. `--reward-gate-k` reaches the
actors and the final evaluation (the actors read the file's gate_k themselves when it is not given).

`--intervene scripted` gives every actor the twin's scripted operator. A hardware device (`--intervene spacemouse`,
`gamepad`, `keyboard`) is one person's and can be opened by one process only, so it needs `--actors 1` (refused
otherwise, in one line): that actor opens the device and its interventions and success key go to the learner as
`robot-rl actor --intervene DEVICE` would send them.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from robot_rl.config import Config
from robot_rl.errors import ConfigError
from robot_rl.operators import INTERVENE_CHOICES, check_intervene, is_hardware_device
from robot_rl.presets import PRESETS, ObsModeFromTaskParser, get_preset, task_reward
from robot_rl.timing import add_timing_flags, timing_overrides
from supervisor.display import DISPLAY_MODES

# Run lengths per task (the task recipes update twice per transition, and the learner, the run's bottleneck on a
# 2-core CPU, paces the actors to that). twin-pick-cube trains 5-step RLPD with a Q-filtered BC term, which passes
# 90 % at 2-4k env steps in benchmarks/sample_efficiency.py (its learner does ~35-40 updates/s beside 2 actors and
# 2 robot servers): 10k steps (benchmarks/results/main_command_twin-pick-cube.json has the measured run).
TASK_DEFAULTS: dict[str, dict[str, int]] = {
    "twin-reach": {"max_env_steps": 3000},
    "twin-pick-cube": {"max_env_steps": 10000},  # its recipe passes 90 % at 2-4k (README sample efficiency)
    "twin-peg-insert": {"max_env_steps": 20000},
}
DEFAULT_MAX_ENV_STEPS = 20000
"""The run length of a task without an entry in TASK_DEFAULTS."""


@dataclasses.dataclass(frozen=True)
class SimConfig(Config):
    """One `robot-rl sim` run (what the command parses into); the flags' help says what each field does."""

    task: str
    actors: int = 2
    max_env_steps: int | None = None
    out: Path | None = None
    demos: Path | None = None
    demo_episodes: int = 20
    obs_mode: str = "state"
    image_size: int | None = None
    resume: bool = False
    in_process_twin: bool = False
    intervene: str | None = None
    device_config: str | None = None
    reward: str = "env"
    reward_gate_k: int | None = None
    faithful: bool = False
    camera_latency_ms: float | None = None
    action_delay_ms: float | None = None
    eval_episodes: int = 20
    actor_restarts: int = 3
    set: tuple[str, ...] = ()
    backend: str | None = None
    learner_args: str = ""
    actor_args: str = ""
    display: str = "auto"
    print_every: float = 10.0
    start_timeout: float = 120.0
    grace: float = 30.0
    seed: int = 0

    def validate(self) -> None:
        get_preset(self.task)  # UnknownTaskError first
        if self.actors < 1:
            raise ConfigError(f"--actors={self.actors} must be >= 1")
        check_intervene(self.intervene, self.device_config, self.reward)
        if self.reward_gate_k is not None and self.reward_gate_k < 1:
            raise ConfigError(f"--reward-gate-k={self.reward_gate_k} must be an integer >= 1 (consecutive positive "
                              f"frames)")
        if is_hardware_device(self.intervene) and self.actors > 1:
            raise ConfigError(f"--intervene {self.intervene} with --actors {self.actors}: a hardware device is read by "
                              f"one actor process (one person, one device); pass --actors 1, or --intervene scripted "
                              f"for every actor")
        for item in self.set:
            if "=" not in item or not item.partition("=")[0].strip():
                raise ConfigError(f"--set {item!r}: expected FIELD=VALUE (an AgentConfig field)")
        timing_overrides(self.faithful, self.camera_latency_ms, self.action_delay_ms)  # bad values fail here
        if self.steps < 1:
            raise ConfigError(f"--max-env-steps={self.steps} must be >= 1")

    @property
    def steps(self) -> int:
        """The run's length in env steps: --max-env-steps, else the task's default."""
        return int(self.max_env_steps or TASK_DEFAULTS.get(self.task, {}).get("max_env_steps", DEFAULT_MAX_ENV_STEPS))

    @property
    def out_dir(self) -> Path:
        """The run directory (the learner's): --out, else runs/sim-<task>."""
        return Path(self.out or f"runs/sim-{self.task}")


def build_sim_parser(description: str | None = None) -> argparse.ArgumentParser:
    """`robot-rl sim`'s parser; `description`: the command's summary for --help."""
    p = ObsModeFromTaskParser(prog="robot-rl sim", description=description)
    p.add_argument("--task", required=True, help=f"task preset ({', '.join(PRESETS)}) or task file (.toml)")
    p.add_argument("--actors", type=int, default=2, help="number of actor processes (each with a robot server)")
    p.add_argument("--max-env-steps", type=int, default=None, help="transitions to train on (default per task)")
    p.add_argument("--out", type=Path, default=None, help="run directory (default runs/sim-<task>)")
    p.add_argument("--demos", type=Path, default=None, help="demo episode directory (default: record scripted ones)")
    p.add_argument("--demo-episodes", type=int, default=20, help="scripted demos to record when --demos is not given")
    p.add_argument("--obs-mode", default=None, choices=("state", "pixels"),
                   help="observation mode (default: the task file's [observation] mode, else state)")
    p.add_argument("--image-size", type=int, default=None, help="camera image size (pixels mode)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out")
    p.add_argument("--in-process-twin", action="store_true",
                   help="actors run the twin themselves instead of talking to robot server processes")
    p.add_argument("--intervene", default=None, choices=INTERVENE_CHOICES,
                   help="interventions in the actors (HIL-SERL): the twin's scripted operator in every actor, or a "
                        "person at a teleop device (spacemouse, gamepad, keyboard; one actor only: --actors 1)")
    p.add_argument("--device-config", default=None, metavar="FILE",
                   help="with a hardware --intervene: the device's config fields as a JSON object (passed on to the "
                        "actor)")
    p.add_argument("--reward", default=None,
                   help="the actors' reward: env (the twin's), classifier:DIR (a trained reward classifier, gated) "
                        "or human (the teleop success key; needs --intervene); default: the task file's [reward], "
                        "else env")
    p.add_argument("--reward-gate-k", type=int, default=None, metavar="K",
                   help="a classifier reward's gate, for the actors and the final evaluation: K consecutive positive "
                        "frames (default: the task file's reward.gate_k, else the classifier's card)")
    p.add_argument("--faithful", action="store_true",
                   help="hardware-faithful actors (no object observation, no task reward, no teleports after the "
                        "first reset); needs --reward classifier:DIR or human")
    add_timing_flags(p)  # passed on to the actors and the final evaluation
    p.add_argument("--eval-episodes", type=int, default=20, help="deterministic evaluation episodes at the end")
    p.add_argument("--actor-restarts", type=int, default=3, help="restarts allowed per actor when it dies")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="an AgentConfig field for the learner (repeatable; passed on as the learner's --set), "
                        "e.g. --set discount=0.99")
    p.add_argument("--backend", default=None, choices=("torch", "jax"),
                   help="learner backend (AgentConfig.backend, passed on to the learner): torch (default) or jax")
    p.add_argument("--learner-args", default="", help="extra learner options, e.g. \"--utd 1 --hidden 256,256\"")
    p.add_argument("--actor-args", default="", help="extra actor options, e.g. \"--chunk-steps 50\"")
    p.add_argument("--display", default="auto", choices=DISPLAY_MODES,
                   help="live: redraw in place (a terminal); lines: a line every --print-every s")
    p.add_argument("--print-every", type=float, default=10.0, help="seconds between progress lines (lines mode)")
    p.add_argument("--start-timeout", type=float, default=120.0, help="seconds a child may take to start")
    p.add_argument("--grace", type=float, default=30.0, help="seconds a child gets to exit before it is killed")
    p.add_argument("--seed", type=int, default=0, help="base seed (actor i uses seed + 1000 i)")
    return p


def sim_config(args: argparse.Namespace) -> SimConfig:
    """The SimConfig of parsed `robot-rl sim` arguments (validated: one-line errors)."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(SimConfig)}
    if values["reward"] is None:  # the task file's [reward] (its gate_k: each actor reads it from the file)
        values["reward"] = task_reward(values["task"])[0] or "env"
    return SimConfig(**{**values, "set": tuple(values["set"])})
