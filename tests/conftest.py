"""Test-wide settings: headless EGL rendering, one BLAS/torch thread (2 shared cores in CI), and no torch.compile
default (ROBOT_RL_COMPILE=0: a compile takes 20-70 s here; tests/test_compile_default.py runs the default itself);
the `close_remote_robots` fixture for tests that talk to robot servers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("ROBOT_RL_COMPILE", "0")


@pytest.fixture
def close_remote_robots(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Close every RemoteRobot a test made, also when it fails half-way: a client left open with its socket
    referenced from the failure's traceback can later block its ZeroMQ context's term() (a garbage cycle)."""
    from envs.remote import RemoteRobot

    made: list[RemoteRobot] = []
    original = RemoteRobot.__init__

    def tracking_init(self: RemoteRobot, *args: Any, **kwargs: Any) -> None:
        made.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(RemoteRobot, "__init__", tracking_init)
    yield
    for robot in made:
        if hasattr(robot, "_sock"):
            robot.close()
