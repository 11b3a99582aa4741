"""A classifier's success credited to the step whose frame first showed it, not to the step its gate fired at.

A classifier reward (learners.rewards.reward_model.ClassifierReward) ends an episode once `k` frames in a row are
positive, and a camera's frames arrive `lag` steps late: the gate fires `run - 1 + lag` steps after the step whose
scene the first of those frames shows (`run`, the positives in a row, is k unless the proprio predicate held it
back). With the env's own success the episode would have ended at that step; with the gate the arm acts on for a few
more steps, and the learner is told the success came with the last of them. `GateCredit` holds the newest
`hold_steps` transitions of an episode back; when it ends by the gate (`end(steps_back)`), the transition
`steps_back` before the last is released with the last one's reward as the terminal one, and the later ones are
dropped (counted in `dropped`): the stored episode ends where the success was seen. Any other end releases
everything unchanged. A success more than `hold_steps - 1` steps back (a predicate that held the gate for long) is
credited to the oldest held transition. Nothing here needs the simulator: the classifier's own decisions, its `k`
and the camera latency. Measured on pixel pick-cube (docs/twin.md) it learned worse than storing the success where
the gate fired (the first positive frames are the classifier's least sure ones), so it is an option
(`robot-rl train --credit-first-positive`), not a default.

Usage::

    credit = GateCredit(hold_steps=k + lag)
    for t in credit.push(transition): buffer.add(*t.as_args())
    credit.terminate_last()                           # a takeover marks the newest held step terminal
    for t in credit.end(steps_back=run - 1 + lag): ...   # the gate ended the episode (None: any other end)
"""

from __future__ import annotations

import dataclasses

from learners.replay.frame_align import Transition
from robot_rl.errors import ConfigError


class GateCredit:
    """Holds back the newest `hold_steps` transitions of an episode (module docstring); 0 passes them through."""

    def __init__(self, hold_steps: int) -> None:
        if isinstance(hold_steps, bool) or not isinstance(hold_steps, int) or hold_steps < 0:
            raise ConfigError(f"gate credit: hold_steps={hold_steps!r} must be an integer >= 0")
        self.hold_steps = hold_steps
        self._held: list[Transition] = []
        self.dropped = 0
        """Transitions dropped so far (the steps after a credited success)."""
        self.credited = 0
        """Episodes whose success was moved to an earlier step."""

    @property
    def held(self) -> int:
        return len(self._held)

    def push(self, transition: Transition) -> list[Transition]:
        """Take the newest step; return the ones older than `hold_steps` (oldest first)."""
        if self.hold_steps == 0:
            return [transition]
        self._held.append(transition)
        out = self._held[: max(0, len(self._held) - self.hold_steps)]
        del self._held[: len(out)]
        return out

    def end(self, steps_back: int | None) -> list[Transition]:
        """The episode ended; `steps_back` (>= 0) when a gated success ended it: the transition that many steps
        before the last becomes the terminal one with the last one's reward, the later ones are dropped."""
        held, self._held = self._held, []
        if steps_back is None or steps_back <= 0 or not held:
            return held
        last = held[-1]
        keep = max(0, len(held) - 1 - steps_back)
        self.dropped += len(held) - keep - 1
        self.credited += 1
        return [*held[:keep], dataclasses.replace(held[keep], reward=last.reward, terminated=True, truncated=False)]

    def terminate_last(self) -> bool:
        """Mark the newest held transition terminal (a human takeover follows it); False when none is held."""
        if not self._held:
            return False
        self._held[-1].terminated = True
        return True
