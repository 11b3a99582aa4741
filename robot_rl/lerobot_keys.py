"""Our observation keys <-> LeRobot's feature names: one mapping for the LeRobot dataset export / import
(demos.formats.lerobot) and a LeRobot policy as a residual base (learners.agents.lerobot_base).

`state` <-> `observation.state`, `object` <-> `observation.environment_state`, `images/NAME` <->
`observation.images.NAME` (and LeRobot's single-camera `observation.image` -> `images/image`), any other KEY <->
`observation.KEY` (slashes as dots).

Usage::

    feature_key("images/front")              # "observation.images.front"
    obs_key("observation.environment_state")  # "object"; None for "action", "next.reward", ...
"""

from __future__ import annotations


def feature_key(obs_key: str) -> str:
    """Our observation key -> LeRobot's feature name."""
    if obs_key == "state":
        return "observation.state"
    if obs_key == "object":
        return "observation.environment_state"
    if obs_key.startswith("images/"):
        return "observation.images." + obs_key[len("images/"):]
    return "observation." + obs_key.replace("/", ".")


def obs_key(feature: str) -> str | None:
    """LeRobot feature name -> our observation key (None for non-observation features)."""
    if feature == "observation.state":
        return "state"
    if feature == "observation.environment_state":
        return "object"
    if feature.startswith("observation.images."):
        return "images/" + feature[len("observation.images."):]
    if feature.startswith("observation.image"):
        return "images/" + (feature[len("observation.image"):].lstrip(".") or "image")
    if feature.startswith("observation."):
        return feature[len("observation."):].replace(".", "/")
    return None
