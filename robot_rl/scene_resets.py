"""A person puts the scene back when the robot's own resets have left it where the policy keeps failing.

Robot-driven resets (envs.resets, the hardware-faithful mode) never restore a scene the policy has pushed off the
spots its demos cover: a pushed cube stays where it lies, and on a real cell one pushed out of reach stays there
until somebody moves it (benchmarks/faithful_scenes.py measures how often; docs/rewards-and-resets.md). HIL-SERL's
and LeRobot's operators reset such scenes by hand. `OperatorSceneResets` asks for that after `after` episodes in a
row that ended without success, and only then: the next reset gets `options={"scene_reset": True}` (RobotEnv then
restores the scene: on the twin a teleport to a fresh seeded scene, the stand-in for the person; on hardware the
person has done it when `ask` returns). Success is what the training loop is told, never the twin's privileged
flag: an episode that ended `terminated` with a reward > 0 (the reward model's or the env's own success).

On a robot (`robot-rl actor --operator-reset-after K`) `operator_prompt` is the `ask`: it tells the operator what to
put back and waits for them before the robot's reset motion starts (the arm holds its pose meanwhile): Enter on the
actor's terminal (`confirm="enter"`), or a fixed pause for a headless actor, e.g. one a launch file starts
(`confirm="pause"`); "auto" picks Enter when stdin is a terminal. On the twin nobody is asked: the teleport stands in.

Usage::

    env = OperatorSceneResets(env, after=3, ask=lambda n: print(f"scene reset {n}: put the cube back"))
    env.requests            # how many scene resets it asked for so far
    ask = operator_prompt("franky", after=3, confirm="auto", pause_s=20.0)   # a robot's actor
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from robot_rl.errors import ConfigError
from robot_rl.forwarding import ForwardingWrapper


class OperatorSceneResets(ForwardingWrapper):
    """After `after` consecutive unsuccessful episodes, call `ask(n)` (n: the request's number, from 1) and reset
    with options={"scene_reset": True} (see the module docstring); the count starts again after each request and
    after every success. Forwards every other attribute (spaces, close, unwrapped, ...) to the env."""

    def __init__(self, env: Any, after: int, ask: Callable[[int], None] | None = None) -> None:
        if not isinstance(after, int) or isinstance(after, bool) or after < 1:
            raise ConfigError(f"operator scene resets: after={after!r} must be an integer >= 1 (failed episodes in "
                              "a row)")
        super().__init__(env)
        self.after = after
        self.ask = ask
        self.requests = 0
        """Scene resets asked for so far."""
        self.failed_in_a_row = 0
        """Episodes that ended without success since the last success or request."""
        self._success = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        opts = dict(options or {})
        if self.failed_in_a_row >= self.after:
            self.requests += 1
            self.failed_in_a_row = 0
            if self.ask is not None:
                self.ask(self.requests)
            opts["scene_reset"] = True
        self._success = False
        return self.env.reset(seed=seed, options=opts or None)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._success = self._success or (bool(terminated) and float(reward) > 0.0)
        if terminated or truncated:
            self.failed_in_a_row = 0 if self._success else self.failed_in_a_row + 1
        return obs, float(reward), bool(terminated), bool(truncated), info


CONFIRM_CHOICES = ("auto", "enter", "pause")
"""How an actor on a robot waits for the operator's scene reset (`operator_prompt`)."""


def resolve_confirm(confirm: str, stdin: TextIO | None = None) -> str:
    """'enter' or 'pause' for `confirm` ('auto': Enter when stdin is a terminal, else the pause); ConfigError for an
    unknown choice or 'enter' without a terminal (a headless actor cannot read Enter: use the pause)."""
    if confirm not in CONFIRM_CHOICES:
        raise ConfigError(f"operator reset confirm {confirm!r}: must be one of {list(CONFIRM_CHOICES)}")
    stream = sys.stdin if stdin is None else stdin
    tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
    if confirm == "auto":
        return "enter" if tty else "pause"
    if confirm == "enter" and not tty:
        raise ConfigError("--operator-reset-confirm enter: stdin is not a terminal (a launch file or a service started "
                          "this actor), so nobody can press Enter; use --operator-reset-confirm pause with "
                          "--operator-reset-pause-s S")
    return confirm


def operator_prompt(backend: str, after: int, confirm: str = "auto", pause_s: float = 20.0,
                    log: Callable[[str], None] | None = None, read_line: Callable[[], str] | None = None,
                    sleep: Callable[[float], None] = time.sleep) -> Callable[[int], None]:
    """The `ask` of OperatorSceneResets for an actor on `backend` ('twin': a log line, the twin teleports; any other:
    the operator puts the scene back, confirmed as `resolve_confirm(confirm)` says: Enter (`read_line`, default
    stdin) or a `pause_s` pause). `log`: where the prompt goes (default stderr). ConfigError as resolve_confirm,
    or for a pause < 0."""
    if not pause_s >= 0:
        raise ConfigError(f"--operator-reset-pause-s {pause_s}: must be >= 0 seconds")
    out = log if log is not None else (lambda line: print(line, file=sys.stderr, flush=True))
    why = f"{after} episode{'' if after == 1 else 's'} in a row without success"
    if backend == "twin":
        return lambda n: out(f"scene reset {n}: {why}; the twin teleports a fresh scene (on a robot a person puts it "
                             "back)")
    how = resolve_confirm(confirm)
    reader = read_line if read_line is not None else sys.stdin.readline

    def ask(n: int) -> None:
        head = (f"scene reset {n}: {why}. Put the scene back as the task starts (objects on their start spots, "
                "within the safety box); the arm holds its pose until then, and its reset motion follows")
        if how == "enter":
            out(f"{head}: press Enter when the scene is back")
            if reader() == "":  # stdin closed meanwhile: nobody can confirm any more, fall back to the pause
                out(f"scene reset {n}: stdin closed; waiting {pause_s:g} s instead")
                sleep(pause_s)
        else:
            out(f"{head}: the reset starts in {pause_s:g} s")
            sleep(pause_s)
        out(f"scene reset {n}: done, resetting")

    return ask
