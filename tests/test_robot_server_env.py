"""The env over RemoteRobot vs over an in-process TwinRobot: the same seeded episodes give identical observations
and rewards (state mode and 64x64 pixels); timing stats over the wire; a client vanishing mid-episode leaves
the twin holding its last target and the server serving the next client; a killed server process gives
RobotTimeoutError within the deadline, never a hang."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
pytest.importorskip("gymnasium")
pytest.importorskip("mujoco")

from envs.env import make_twin_env
from envs.remote import RemoteRobot, RemoteRobotConfig, make_remote_env
from envs.robot_server import RobotServerConfig, make_backend, serve_in_thread
from envs.twin.experts import ScriptedExpert
from robot_rl.errors import RobotTimeoutError, SpecMismatchError

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.filterwarnings("ignore:.*Box observation space m.*:UserWarning")


def _run(env, actions: list[np.ndarray] | None, seeds: list[int | None], expert: ScriptedExpert | None = None):
    """Episodes on `env`: replay `actions` (or run `expert` and record its actions); returns the trace."""
    trace: list[tuple[str, object]] = []
    recorded: list[np.ndarray] = []
    i = 0
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        trace.append(("reset", obs, info["scene_seed"]))
        if expert is not None:
            expert.reset()
        while True:
            a = expert.act(env.unwrapped.last_state) if expert is not None else actions[i]
            i += 1
            recorded.append(a)
            obs, reward, terminated, truncated, info = env.step(a)
            trace.append(("step", obs, (reward, terminated, truncated, info["success"])))
            if terminated or truncated or (expert is None and i >= len(actions)):
                break
    return trace, recorded


def _assert_same(local: list, remote: list) -> None:
    assert len(local) == len(remote)
    for (kind_l, obs_l, extra_l), (kind_r, obs_r, extra_r) in zip(local, remote, strict=True):
        assert kind_l == kind_r and extra_l == extra_r
        assert obs_l.keys() == obs_r.keys()
        for key in obs_l:
            if key == "images":
                for cam in obs_l["images"]:
                    assert obs_r["images"][cam].dtype == np.uint8
                    assert np.array_equal(obs_l["images"][cam], obs_r["images"][cam]), cam
            else:
                assert obs_l[key].dtype == obs_r[key].dtype
                assert np.array_equal(obs_l[key], obs_r[key]), key


def test_state_mode_episode_identical_to_in_process_twin() -> None:
    local = make_twin_env("pick_cube", obs_mode="state")
    expert = ScriptedExpert("pick_cube")
    trace_local, actions = _run(local, None, [3], expert)
    rng = np.random.default_rng(0)
    actions += [rng.uniform(-1, 1, 7).astype(np.float32) for _ in range(15)]  # and a random unseeded episode
    more_local, _ = _run(local, actions[len(trace_local) - 1:], [None])
    local.close()
    rewards = [extra[0] for kind, _, extra in trace_local if kind == "step"]
    assert rewards[-1] == 1.0  # the expert's episode ends in success: rewards are compared, not just zeros

    with serve_in_thread(lambda: make_backend("twin", "pick_cube", cameras=False)) as handle:
        remote = make_remote_env(handle.address, obs_mode="state")
        assert remote.unwrapped.task.name == "pick_cube"
        trace_remote, _ = _run(remote, actions[:len(trace_local) - 1], [3])
        more_remote, _ = _run(remote, actions[len(trace_local) - 1:], [None])
        remote.close()  # stops the client: the server is free again
        assert handle.stats().owner == "" and handle.stats().errors == 0
    _assert_same(trace_local, trace_remote)
    _assert_same(more_local, more_remote)


def test_pixels_64_episode_identical_and_timing_over_the_wire() -> None:
    rng = np.random.default_rng(1)
    actions = [rng.uniform(-1, 1, 7).astype(np.float32) for _ in range(8)]
    local = make_twin_env("reach", obs_mode="pixels", image_size=64)
    trace_local, _ = _run(local, actions, [5])
    local.close()
    with serve_in_thread(lambda: make_backend("twin", "reach", image_size=64)) as handle:
        remote = make_remote_env(handle.address, obs_mode="pixels")  # task and image size from the server
        assert remote.observation_space["images"]["front"].shape == (64, 64, 3)
        trace_remote, _ = _run(remote, actions, [5])
        _assert_same(trace_local, trace_remote)
        stats = remote.unwrapped.timing_stats()
        assert stats["steps"] == len(actions) and np.isfinite(stats["step_ms_p99"]) and stats["step_ms_p50"] > 0
        remote.close()

        # realtime: the env sleeps to each 10 Hz deadline and reports jitter, with the robot behind the wire
        with pytest.raises(SpecMismatchError, match=r"renders 64x64 images"):
            make_remote_env(handle.address, obs_mode="pixels", image_size=96)
        with pytest.raises(SpecMismatchError, match="task"):
            make_remote_env(handle.address, task="pick_cube", obs_mode="state")
        rt = make_remote_env(handle.address, obs_mode="state", realtime=True)
        rt.reset(seed=0)
        for a in actions[:5]:
            rt.step(a)
        timing = rt.unwrapped.timing_stats()
        rt.close()
    assert timing["realtime"] and timing["steps"] == 5 and timing["period_ms"] == 100.0
    for key in ("jitter_ms_p50", "jitter_ms_p99", "jitter_ms_max"):
        assert np.isfinite(timing[key]) and timing[key] >= 0.0
    assert timing["wait_ms_mean"] > 50.0  # the loop really waited out its 100 ms periods (not a speed assertion)


def test_client_vanishing_mid_episode_leaves_the_twin_holding_and_a_new_client_served() -> None:
    config = RobotServerConfig(bind="tcp://127.0.0.1:0", hold_timeout_s=0.2)
    with serve_in_thread(lambda: make_backend("twin", "reach", cameras=False), config) as handle:
        env = make_remote_env(handle.address, obs_mode="state", reset_noise_m=0.0)
        env.reset(seed=0)
        for _ in range(3):
            env.step(np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], np.float32))
        target_pos, _ = env.unwrapped.commanded_pose
        env.unwrapped.robot.close()  # the actor dies: no stop, no goodbye
        deadline = time.monotonic() + 5.0
        while not handle.stats().holding and time.monotonic() < deadline:
            time.sleep(0.02)
        assert handle.stats().holding and handle.stats().holds == 1
        twin = handle.robot
        assert np.allclose(twin.controller.commanded_pos, target_pos)  # the last target stays

        robot = RemoteRobot(RemoteRobotConfig(address=handle.address))  # the restarted actor
        robot.wait(1.0)
        s = robot.state()
        assert np.linalg.norm(s.pos_base_ee - target_pos) < 0.005  # the arm settled on the held target
        assert s.error == ""
        env2 = make_remote_env(robot, obs_mode="state")
        env2.reset(seed=1)
        env2.step(np.zeros(7, np.float32))
        assert not handle.stats().holding and handle.stats().clients == 2
        env2.close()


def _start_server_process(*args: str) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "MUJOCO_GL": "egl", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "robot_rl.cli", "robot-server", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
    try:
        first = lines.get(timeout=60)
    except queue.Empty:
        proc.kill()
        raise AssertionError(f"robot server did not start: {proc.stderr.read() if proc.stderr else ''}") from None
    assert first.startswith("robot-server: serving twin"), first
    return proc, first.rsplit(" on ", 1)[1].split()[0]


def test_killed_server_process_gives_timeout_error_within_the_deadline() -> None:
    proc, address = _start_server_process("--task", "twin-reach", "--bind", "tcp://127.0.0.1:0", "--no-cameras",
                                          "--stats-every", "0")
    try:
        env = make_remote_env(address, obs_mode="state", remote=RemoteRobotConfig(deadline_s=0.5))
        env.reset(seed=0)
        env.step(np.zeros(7, np.float32))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        calls = [lambda: env.step(np.zeros(7, np.float32)), env.unwrapped.robot.state]
        for call in calls:  # the env step and a direct call both fail fast
            t0 = time.monotonic()
            with pytest.raises(RobotTimeoutError, match=r"robot server at tcp://127\.0\.0\.1"):
                call()
            assert time.monotonic() - t0 < 0.5 + 0.1 + 2.0  # at the deadline (+ wait's duration), not a hang
        env.close()  # closing over a dead server does not raise
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_server_process_stops_cleanly_on_sigterm() -> None:
    proc, address = _start_server_process("--task", "reach", "--bind", "tcp://127.0.0.1:0", "--no-cameras")
    try:
        robot = RemoteRobot(RemoteRobotConfig(address=address))
        assert robot.info["task"] == "reach" and robot.info["cameras"] == []
        robot.stop()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert "stopped after" in (proc.stderr.read() if proc.stderr else "")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
