"""The twin's simulated hardware timing (envs.env_timing.SimulatedTiming): a camera latency returns frames rendered
that long before the step's end, an action delay changes the robot's target that long after the action, zero is
today's env bit for bit, and bad values are refused (hardware refuses simulated timing altogether).

The checks are deterministic: the twin is a pure function of its seed and actions, so a latency of k control periods
must return exactly the frames an undelayed twin returned k steps earlier, and a spy on the robot's `command` and
the cameras' `read` records the simulated time at which each target arrived and each frame was rendered.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("mujoco")

from envs.env import RobotEnvConfig, make_twin_env
from envs.env_config import FAITHFUL_TIMING, timing_overrides
from envs.env_timing import split_delay
from robot_rl.errors import ConfigError

PERIOD_S = 0.1  # 10 Hz, the default control rate


def _actions(n: int) -> list[np.ndarray]:
    """A sweep that moves the arm (and so the wrist camera's view) on every step."""
    out = []
    for t in range(n):
        a = np.zeros(7, np.float32)
        a[0] = 0.8 * np.sin(0.7 * t)
        a[1] = 0.8 * np.cos(0.5 * t)
        a[2] = -0.3
        out.append(a)
    return out


def _rollout(n: int, **kw: Any) -> tuple[list[dict[str, Any]], Any]:
    env = make_twin_env("pick_cube", obs_mode="pixels", image_size=32, reset_noise_m=0.0, reset_noise_rad=0.0,
                        max_lead_m=0.0, max_lead_rad=0.0, **kw)
    obs, _ = env.reset(seed=3)
    seq = [obs]
    for a in _actions(n):
        obs, *_ = env.step(a)
        seq.append(obs)
    return seq, env


@pytest.mark.parametrize("k", [1, 2])
def test_latency_of_k_periods_returns_the_frame_from_k_steps_earlier(k: int) -> None:
    n = 6
    plain, env0 = _rollout(n)
    late, env1 = _rollout(n, camera_latency_ms=1e3 * k * PERIOD_S)
    try:
        for t in range(n + 1):
            # the camera latency does not touch the physics: proprio is the same at every step
            np.testing.assert_array_equal(late[t]["state"], plain[t]["state"])
            src = plain[max(t - k, 0)]["images"]  # before k steps: the reset frame (the arm had settled)
            for cam in ("front", "wrist"):
                np.testing.assert_array_equal(late[t]["images"][cam], src[cam], err_msg=f"step {t} camera {cam}")
        # no two observations share an array (the reset frame is handed out k + 1 times)
        assert not any(np.shares_memory(late[0]["images"]["front"], late[t]["images"]["front"]) for t in range(1, n))
        # the arm moved, so the check could fail: consecutive wrist frames differ
        assert not np.array_equal(plain[n]["images"]["wrist"], plain[n - 1]["images"]["wrist"])
        assert not np.array_equal(late[n]["images"]["wrist"], plain[n]["images"]["wrist"])
    finally:
        env0.close()
        env1.close()


class _TimedCameras:
    """Wraps the twin's cameras: records (simulated time, frames) of every read."""

    def __init__(self, cameras: Any, robot: Any) -> None:
        self.inner, self.robot, self.names, self.reads = cameras, robot, cameras.names, []

    def read(self) -> dict[str, np.ndarray]:
        frames = self.inner.read()
        self.reads.append((self.robot.state().time_s, frames))
        return frames


@pytest.mark.parametrize("latency_ms", [40.0, 140.0])
def test_latency_within_a_period_renders_at_the_right_past_time(latency_ms: float) -> None:
    env = make_twin_env("pick_cube", obs_mode="pixels", image_size=32, camera_names=("wrist",),
                        camera_latency_ms=latency_ms)
    try:
        env.reset(seed=0)
        spy = _TimedCameras(env.cameras, env.robot)
        env.cameras = spy
        for t, a in enumerate(_actions(5)):
            obs, _, _, _, info = env.step(a)
            assert info["frame_age_ms"] == {"wrist": latency_ms}
            if t < 2:
                continue
            now = env.robot.state().time_s
            matches = [ts for ts, fr in spy.reads if np.array_equal(fr["wrist"], obs["images"]["wrist"])]
            assert matches == [pytest.approx(now - latency_ms / 1e3, abs=1e-9)]
        assert len(spy.reads) == 5  # still one render per step
    finally:
        env.close()


def _command_log(env: Any) -> list[tuple[float, np.ndarray]]:
    log: list[tuple[float, np.ndarray]] = []
    inner = env.robot.command

    def command(pos: np.ndarray, quat: np.ndarray, gripper: float) -> None:
        log.append((env.robot.state().time_s, np.array(pos)))
        inner(pos, quat, gripper)

    env.robot.command = command
    return log


@pytest.mark.parametrize("delay_ms", [20.0, 120.0])
def test_action_delay_shifts_the_command(delay_ms: float) -> None:
    env = make_twin_env("pick_cube", obs_mode="state", action_delay_ms=delay_ms)
    try:
        env.reset(seed=0)
        log = _command_log(env)
        start = env.robot.state().time_s
        reset_pos = env.commanded_pose[0]
        targets = []
        for a in _actions(5):
            env.step(a)
            targets.append(env.commanded_pose[0])  # the policy-side target of this step
        lag_steps, rem_s = split_delay(delay_ms, PERIOD_S)
        assert len(log) == 5 - lag_steps  # the first lag_steps steps send nothing: the arm holds the reset target
        for i, (ts, pos) in enumerate(log):
            assert ts == pytest.approx(start + i * PERIOD_S + delay_ms / 1e3, abs=1e-9)
            np.testing.assert_array_equal(pos, targets[i])
        assert not np.allclose(targets[0], reset_pos)  # the first step's target did move
        assert rem_s == pytest.approx(0.02)
        env.reset(seed=0)  # a reset drops the queued commands
        assert env.unwrapped._timing.pending_commands == 0
    finally:
        env.close()


def test_action_delay_slows_the_arm_by_the_delay() -> None:
    """The arm under a one-period delay reaches at step t+1 what the undelayed arm's target was at step t."""
    plain, env0 = _rollout(4)
    late, env1 = _rollout(4, action_delay_ms=100.0)
    try:
        assert not np.allclose(late[1]["state"][:3], plain[1]["state"][:3], atol=1e-3)
        # after the first step the delayed arm is still near its reset pose; the undelayed one has moved
        assert np.linalg.norm(late[1]["state"][:3]) < np.linalg.norm(plain[1]["state"][:3])
    finally:
        env0.close()
        env1.close()


def test_zero_is_todays_env_bit_for_bit() -> None:
    plain, env0 = _rollout(5)
    zero, env1 = _rollout(5, camera_latency_ms=0.0, action_delay_ms=0.0)
    try:
        assert env1.unwrapped._timing is None
        for a, b in zip(plain, zero, strict=True):
            np.testing.assert_array_equal(a["state"], b["state"])
            for cam in a["images"]:
                np.testing.assert_array_equal(a["images"][cam], b["images"][cam])
    finally:
        env0.close()
        env1.close()


def test_faithful_mode_has_stated_defaults_an_explicit_value_wins() -> None:
    env = make_twin_env("pick_cube", obs_mode="state", faithful=True)
    off = make_twin_env("pick_cube", obs_mode="state", faithful=True, camera_latency_ms=0.0, action_delay_ms=0.0)
    try:
        assert env.config.camera_latency_ms == FAITHFUL_TIMING["camera_latency_ms"] == 100.0
        assert env.config.action_delay_ms == FAITHFUL_TIMING["action_delay_ms"] == 20.0
        assert off.config.camera_latency_ms == 0.0 and off.faithful and env.faithful
    finally:
        env.close()
        off.close()


@pytest.mark.parametrize("field,value,why", [
    ("camera_latency_ms", -1.0, "must be finite"), ("action_delay_ms", float("nan"), "must be finite"),
    ("camera_latency_ms", 5000.0, "must be finite"), ("action_delay_ms", float("inf"), "must be finite"),
])
def test_bad_values_are_refused(field: str, value: float, why: str) -> None:
    with pytest.raises(ConfigError, match=f"{field}=.*{why}"):
        RobotEnvConfig(**{field: value})


def test_hardware_refuses_simulated_timing() -> None:
    with pytest.raises(ConfigError, match=r"camera_latency_ms=100\.0 simulates hardware timing.*realtime"):
        RobotEnvConfig(realtime=True, camera_latency_ms=100.0)
    with pytest.raises(ConfigError, match="action_delay_ms"):
        RobotEnvConfig(realtime=True, action_delay_ms=20.0)
    RobotEnvConfig(realtime=True)  # zero is fine


def test_split_delay() -> None:
    assert split_delay(100.0, 0.1) == (1, 0.0)
    assert split_delay(140.0, 0.1) == (1, pytest.approx(0.04))
    assert split_delay(100.0, 1 / 30) == (3, 0.0)  # within a microsecond of 3 periods
    assert split_delay(0.0, 0.1) == (0, 0.0)


def test_the_flags_reach_every_env_of_train_actor_and_sim(tmp_path: Any) -> None:
    from actors.actor_env import make_actor_env
    from actors.run import parse_actor_args
    from learners.training.flags import build_train_parser, train_config
    from learners.training.run_env import make_run_env
    from supervisor.sim import Sim
    from supervisor.sim_config import build_sim_parser, sim_config

    base = ["--task", "twin-reach", "--obs-mode", "state", "--out", str(tmp_path / "t")]
    cfg = train_config(build_train_parser().parse_args([*base, "--camera-latency-ms", "50", "--action-delay-ms",
                                                        "120"]))
    for env in (make_run_env(cfg), make_run_env(cfg, for_reward_model=True)):  # evaluation and training envs
        assert (env.unwrapped.config.camera_latency_ms, env.unwrapped.config.action_delay_ms) == (50.0, 120.0)
        env.close()
    assert train_config(build_train_parser().parse_args(base)).env_timing() == {}  # default: today's env
    faithful = train_config(build_train_parser().parse_args([*base, "--faithful", "--reward", "human",
                                                                "--intervene", "scripted"]))
    assert faithful.env_timing() == FAITHFUL_TIMING
    # --faithful with the timing turned off: the zeros reach the training env, whose faithful mode would otherwise
    # fill in FAITHFUL_TIMING (a bug once: the flags then changed only the evaluation envs)
    off = train_config(build_train_parser().parse_args([*base, "--faithful", "--reward", "human", "--intervene",
                                                        "scripted", "--camera-latency-ms", "0", "--action-delay-ms",
                                                        "0"]))
    for env in (make_run_env(off), make_run_env(off, for_reward_model=True)):
        assert (env.unwrapped.config.camera_latency_ms, env.unwrapped.config.action_delay_ms) == (0.0, 0.0)
        env.close()
    on = make_run_env(faithful, for_reward_model=True)
    assert on.unwrapped.config.camera_latency_ms == 100.0 and on.unwrapped.faithful
    on.close()
    with pytest.raises(ConfigError, match=r"--camera-latency-ms=-1\.0 must be finite"):
        train_config(build_train_parser().parse_args([*base, "--camera-latency-ms", "-1"]))
    with pytest.raises(ConfigError, match="needs a twin --task"):
        train_config(build_train_parser().parse_args(["--env-id", "Pendulum-v1", "--out", str(tmp_path / "p"),
                                                      "--action-delay-ms", "20"]))

    sim = Sim(sim_config(build_sim_parser().parse_args([
        "--task", "twin-reach", "--camera-latency-ms", "40", "--out", str(tmp_path / "s")])))
    actor_argv = sim.actor_argv(0, "tcp://127.0.0.1:1", None)
    assert "--camera-latency-ms" in sim.evaluate_argv(tmp_path / "e.json")
    assert "--action-delay-ms" not in actor_argv  # not given: the actor's own default
    args = parse_actor_args(actor_argv[actor_argv.index("actor") + 1:])
    env = make_actor_env(args.task, args.obs_mode, None, None, timing=timing_overrides(
        args.faithful, args.camera_latency_ms, args.action_delay_ms))
    assert (env.unwrapped.config.camera_latency_ms, env.unwrapped.config.action_delay_ms) == (40.0, 0.0)
    env.close()
    with pytest.raises(ConfigError, match="--action-delay-ms=nan"):
        parse_actor_args(["--task", "twin-reach", "--action-delay-ms", "nan"])


def test_sim_records_its_demos_under_the_timing_it_trains_with(tmp_path: Any) -> None:
    from demos.recording.demos import parse_record_demos_args
    from supervisor.sim import Sim
    from supervisor.sim_config import build_sim_parser, sim_config

    def demo_timing(*flags: str) -> dict[str, float]:
        sim = Sim(sim_config(build_sim_parser().parse_args(["--task", "twin-reach", "--out", str(tmp_path / "s"),
                                                             *flags])))
        argv = sim.demos_argv(tmp_path / "demos", 3)
        cfg = parse_record_demos_args(argv[argv.index("record-demos") + 1:])
        return timing_overrides(False, cfg.camera_latency_ms, cfg.action_delay_ms)

    assert demo_timing() == {}  # no timing: the demos as before
    assert demo_timing("--faithful", "--reward", "human", "--intervene", "scripted") == FAITHFUL_TIMING
    assert demo_timing("--camera-latency-ms", "40") == {"camera_latency_ms": 40.0, "action_delay_ms": 0.0}
    assert demo_timing("--faithful", "--reward", "human", "--intervene", "scripted", "--action-delay-ms", "0") == {
        "camera_latency_ms": 100.0, "action_delay_ms": 0.0}


def test_a_robot_server_serving_hardware_refuses_simulated_timing() -> None:
    from envs.remote import make_remote_env
    from envs.robot_server import RobotServerConfig, serve_in_thread
    from envs.twin import TwinRobot, TwinRobotConfig

    def factory() -> Any:  # a backend that says it is hardware
        return TwinRobot(TwinRobotConfig(task="reach", render=False)), None, {"backend": "franky", "task": "reach"}

    with serve_in_thread(factory, RobotServerConfig(bind="tcp://127.0.0.1:0")) as handle:
        with pytest.raises(ConfigError, match=r"serves franky hardware.*drop --faithful"):
            make_remote_env(handle.address, obs_mode="state", **FAITHFUL_TIMING)
        env = make_remote_env(handle.address, obs_mode="state", camera_latency_ms=0.0)  # zero is fine
        env.close()
