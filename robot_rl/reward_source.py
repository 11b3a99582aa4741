"""The `--reward` vocabulary shared by every command that takes it (`train`, `actor`, `sim`): where training rewards
come from. The reward models themselves live in learners.rewards.reward_model; this module only parses the flag, so
processes that do not import learners (`robot-rl sim`'s supervisor) check it the same way.

- "env": the env's own reward and termination (on the twin: `Task.success`, privileged);
- "classifier:DIR": a reward classifier written by `robot-rl train-classifier`;
- "human": the teleop device's success key.

A state-mode env can still feed a classifier: it renders the classifier's cameras (`RobotEnvConfig.reward_cameras`)
into `info[REWARD_IMAGES_INFO_KEY]` = {camera: uint8 (H, W, 3)}, never into the observation; the classifier looks
a camera of its card ("images/NAME", an observation path) up there when the observation has none
(`reward_image_path`).

Usage::

    parse_reward_source("classifier:runs/cls")     # ("classifier", "runs/cls")
    parse_reward_source("oracle")                  # ConfigError: --reward 'oracle': expected env, human or ...
"""

from __future__ import annotations

from robot_rl.errors import ConfigError

REWARD_SOURCES = ("env", "human", "classifier:DIR")

REWARD_IMAGES_INFO_KEY = "reward_images"
"""The `info` key under which an env puts the frames of its reward cameras: {camera: uint8 (H, W, 3)}."""

SUCCESS_UNKNOWN_INFO_KEY = "success_unknown"
"""The `info` key (True) by which an env says its `info["success"]` is no measurement, only a placeholder: on
hardware the task's success condition needs object state the robot lacks (envs.env), so "success" is always False
there. Reward audits then log no true success, and the reward wrapper counts no false positives against it."""

IMAGES_LEAF = "images"
"""The observation leaf of camera images (pixels mode): a camera NAME is the observation path "images/NAME"."""

POLICY_CAMERAS: tuple[str, ...] = ("front", "wrist")
"""The cameras a pixel policy observes unless told otherwise (envs.env_config.RobotEnvConfig.camera_names, the
twin's default render); a classifier's card naming more (the twin's "side") has them rendered for it alone."""


def reward_image_path(camera: str) -> str:
    """The observation path ("images/NAME") a camera of `info[REWARD_IMAGES_INFO_KEY]` stands for."""
    return f"{IMAGES_LEAF}/{camera}"


def parse_reward_source(text: str, flag: str = "--reward") -> tuple[str, str | None]:
    """'env' | 'human' | 'classifier:DIR' -> (kind, DIR or None); ConfigError naming `flag` otherwise."""
    if text in ("env", "human"):
        return text, None
    if text.startswith("classifier:") and len(text) > len("classifier:"):
        return "classifier", text[len("classifier:"):]
    raise ConfigError(f"{flag} {text!r}: expected env, human or classifier:DIR (a directory written by robot-rl "
                      f"train-classifier)")
