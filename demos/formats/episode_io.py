"""Reading episode files for the episode tools (`robot-rl episodes`): every readable episode of a directory (or one
file) with the errors of the unreadable ones, the cameras an episode holds, the tools' error and exit codes.

Usage::

    loaded, errors = load_episodes("demos/pick")      # [(file, Episode)], [EpisodeFileError naming its file]
    camera_names(ep)                                   # ["front", "wrist"]: its obs/images/<name> keys
"""

from __future__ import annotations

import os
from pathlib import Path

from robot_rl.episodes import Episode, episode_paths, load_episode
from robot_rl.errors import EpisodeFileError, RobotRLError

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_SOME_SKIPPED = 3
EXIT_DRIFT = 4


class EpisodeToolError(RobotRLError):
    """An episode cannot be used for what was asked (no images to export, no seed to replay); names the file."""


def load_episodes(path: str | os.PathLike[str]) -> tuple[list[tuple[Path, Episode]], list[EpisodeFileError]]:
    """(file, episode) for every readable episode under `path` (a directory or one file), and the errors of
    the unreadable ones (each names its file). A missing path raises EpisodeFileError."""
    p = Path(path)
    if p.is_file():
        files = [p]
    elif p.is_dir():
        files = episode_paths(p)
    else:
        raise EpisodeFileError(f"{p}: no such episode file or directory")
    loaded: list[tuple[Path, Episode]] = []
    errors: list[EpisodeFileError] = []
    for f in files:
        try:
            loaded.append((f, load_episode(f)))
        except EpisodeFileError as err:
            errors.append(err)
    return loaded, errors


def camera_names(ep: Episode) -> list[str]:
    """Camera names of the episode's image observations (`obs/images/<name>`), in file order."""
    return [k[len("images/"):] for k in ep.observations if k.startswith("images/")]
