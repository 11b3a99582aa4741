"""Safety on hardware, tested against the twin (and the robot server over it): the env's bounded lead in contact,
the server-side guard (workspace box, wrench limit, joint and velocity margins), the e-stop (a call and
SIGINT / SIGTERM on the server) and the actor's hold before the first weights."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from envs.env import RobotEnv, RobotEnvConfig
from envs.tasks import Task

pytestmark = pytest.mark.usefixtures("close_remote_robots")


def _press_env(**config: object) -> RobotEnv:
    """The twin's reach scene (its table top is z = 0) with a box that lets the target go 5 cm into the table."""
    from envs.twin import TwinRobot, TwinRobotConfig

    task = Task(name="press", twin_task="reach", reset_pos_m=(0.45, 0.0, 0.03), pos_min_m=(0.25, -0.3, -0.05),
                pos_max_m=(0.7, 0.3, 0.5), max_episode_steps=100)
    robot = TwinRobot(TwinRobotConfig(task="reach", render=False))
    return RobotEnv(robot, task, None, RobotEnvConfig(obs_mode="state", reset_noise_m=0.0, reset_noise_rad=0.0,
                                                      **config))  # type: ignore[arg-type]


@pytest.mark.parametrize("bounded", [True, False])
def test_pressing_on_the_table_keeps_the_target_near_the_arm(bounded: bool) -> None:
    """20 steps of 'down' from 3 cm above the table: with the bounded lead (the default) the target stays within
    the controller's error clip (1 cm per axis) of the measured TCP at every step in contact, the contact force
    stays ~K * clip (20 N), and 'up' starts lifting the arm at once (measured 2.9 mm in 3 steps; the twin's target
    filter slows the start). Unbounded (delta on the commanded pose, max_lead_m=0) the target winds 5 cm into the
    table, to the box edge, and 3 steps of 'up' do not lift it at all: the failure this guards against."""
    env = _press_env(**({} if bounded else {"max_lead_m": 0.0, "max_lead_rad": 0.0}))
    try:
        env.reset(seed=0)
        down = np.zeros(7, np.float32)
        down[2] = -1.0
        leads, forces = [], []
        for _ in range(20):
            before = env.last_state  # the measurement the step's target is bounded against
            assert before is not None
            env.step(down)
            leads.append(float(np.max(np.abs(env.commanded_pose[0] - before.pos_base_ee))))
            assert env.last_state is not None
            forces.append(float(np.linalg.norm(env.last_state.force_ee_n)))
        s = env.last_state
        assert s is not None and s.pos_base_ee[2] < 0.015 and forces[-1] > 10.0  # the fingers press on the table
        cmd_z_pressed = env.commanded_pose[0][2]
        in_contact = [lead for lead, f in zip(leads, forces, strict=True) if f > 10.0]
        assert len(in_contact) >= 15
        up = np.zeros(7, np.float32)
        up[2] = 1.0
        z0 = s.pos_base_ee[2]
        for _ in range(3):  # 0.3 s of 'up'
            env.step(up)
        assert env.last_state is not None
        rise = env.last_state.pos_base_ee[2] - z0
        print(f"bounded={bounded}: max lead in contact {1e3 * max(in_contact[1:]):.2f} mm, force {forces[-1]:.1f} N, "
              f"rise after 3 up steps {1e3 * rise:.1f} mm")
        if bounded:
            assert max(in_contact[1:]) <= 0.01 + 1e-9  # from the first step that starts in contact
            assert 15.0 < forces[-1] < 25.0  # K * clip = 2000 N/m * 1 cm
            assert rise > 0.002  # lifts off at once
        else:
            assert cmd_z_pressed == pytest.approx(-0.05) and leads[-1] > 0.04  # wound 5 cm into the table
            assert rise < 0.002  # still pressing: the wound-up target is below the table
    finally:
        env.close()


def test_bounded_lead_leaves_free_motion_alone() -> None:
    """In free space the arm follows its target, so the bound does not act once the arm moves: the commanded
    path is exactly the one without the bound (at full action the target leads the arm by ~5-6 cm: its 0.2 s
    low-pass filter plus v D / K)."""
    paths = {}
    for bounded in (True, False):
        env = _press_env(**({} if bounded else {"max_lead_m": 0.0, "max_lead_rad": 0.0}))
        try:
            env.reset(seed=0)
            a = np.zeros(7, np.float32)
            a[0], a[1], a[2] = 1.0, -0.5, 1.0
            path = []
            for _ in range(10):
                env.step(a)
                path.append(env.commanded_pose[0])
            paths[bounded] = np.array(path)
        finally:
            env.close()
    np.testing.assert_allclose(paths[True], paths[False], atol=1e-12)


def test_bound_lead_math() -> None:
    from controllers.transforms import axis_angle_to_quat, quat_angle, quat_conj, quat_mul
    from envs.motion import bound_lead

    q_meas = np.array([0.0, 1.0, 0.0, 0.0])
    q_tgt = quat_mul(axis_angle_to_quat(np.array([0.0, 0.0, 0.3])), q_meas)
    pos, quat = bound_lead(np.array([0.5, 0.0, 0.2]), -q_tgt, np.array([0.45, 0.0, 0.21]), q_meas, 0.01, 0.05)
    np.testing.assert_allclose(pos, [0.46, 0.0, 0.2])
    assert quat_angle(quat_mul(quat, quat_conj(q_meas))) == pytest.approx(0.05, abs=1e-9)
    assert float(np.dot(quat, -q_tgt)) > 0  # the target's sign is kept
    same = bound_lead(np.array([0.452, 0.0, 0.2]), q_meas, np.array([0.45, 0.0, 0.2]), q_meas, 0.01, 0.05)
    np.testing.assert_allclose(same[0], [0.452, 0.0, 0.2])
    assert dataclasses.is_dataclass(RobotEnvConfig()) and RobotEnvConfig().max_lead_m == 0.01


# ---------------------------------------------------------------------------------------------------------------
# the robot server's safety guard (every backend), against the twin


def _serve_twin(task: str = "pick_cube", **safety: object) -> Any:
    from envs.robot_server import RobotServerConfig, make_backend, serve_in_thread
    from envs.robot_server.safety import ServerSafetyConfig

    cfg = ServerSafetyConfig(**safety)  # type: ignore[arg-type]
    return serve_in_thread(lambda: make_backend("twin", task, cameras=False, safety=cfg),
                           RobotServerConfig(bind="tcp://127.0.0.1:0", hold_timeout_s=5.0))


def _client(address: str) -> Any:
    from envs.remote import RemoteRobot, RemoteRobotConfig

    return RemoteRobot(RemoteRobotConfig(address=address, deadline_s=3.0))


def test_server_clips_targets_into_the_workspace_box() -> None:
    """A client that does not clip (here: raw RemoteRobot calls) still cannot send the arm out of the task's box:
    the server clips the target (pick_cube box x <= 0.70 m, + 2 cm margin)."""
    with _serve_twin() as handle:
        robot = _client(handle.address)
        s = robot.state()
        robot.command(np.array([1.5, 0.0, 0.3]), s.quat_base_ee, 0.0)
        robot.wait(3.0)
        s = robot.state()
        assert 0.70 < s.pos_base_ee[0] < 0.725  # at the server's box edge, not 1.5 m out
        assert np.isclose(handle.robot.controller.commanded_pos[0], 0.72)  # the twin got the clipped target
        stats = robot.server_stats()
        assert stats["safety"]["clips"] == 1 and stats["errors"] == 0
        robot.stop()


def test_wrench_limit_stops_holds_and_reports() -> None:
    """Pressing on the table with more than the limit (here 10 N; the compliance profile pushes ~20 N): the server
    stops and holds, the state reports it (the env ends the episode), commands are refused until clear_errors,
    which succeeds once the force is gone."""
    from robot_rl.errors import RobotError

    with _serve_twin(max_force_n=10.0) as handle:
        robot = _client(handle.address)
        s0 = robot.state()
        target = np.array([0.5, 0.15, -0.01])  # 1 cm below the table top (the box allows z >= -1 cm)
        robot.command(target, s0.quat_base_ee, 0.0)
        for _ in range(60):
            robot.wait(0.1)
            s = robot.state()
            if s.error:
                break
        assert "external force" in s.error and s.pos_base_ee[2] < 0.03
        with pytest.raises(RobotError, match="safety stop"):
            robot.command(target, s0.quat_base_ee, 0.0)
        robot.wait(0.5)  # holding the measured pose: the push relaxes
        assert np.linalg.norm(robot.state().force_ee_n) < 10.0
        robot.clear_errors()
        assert robot.state().error == ""
        robot.command(s.pos_base_ee + np.array([0, 0, 0.05]), s0.quat_base_ee, 0.0)
        robot.wait(1.0)
        assert robot.state().pos_base_ee[2] > s.pos_base_ee[2] + 0.03  # moves again
        stats = robot.server_stats()
        assert stats["safety"]["trips"] == 1
        robot.stop()


@pytest.mark.parametrize("settle_s", [0.0, 1.0])
def test_clear_errors_right_after_a_wrench_trip_lets_the_push_relax(settle_s: float) -> None:
    """A client that calls clear_errors() at once after a wrench trip (the env's reset does; a restarted actor too)
    gets the arm back: the guard holds the measured pose and lets the twin's time pass (up to clear_settle_s) until
    the force is under the limit. Without that wait (clear_settle_s=0) the twin, whose time passes only in wait(),
    stays pressed and every call is refused (a peg run in `robot-rl sim` lost both actors this way)."""
    from envs.robot_server.safety import SafetyGuard, ServerSafetyConfig
    from envs.twin import TwinRobot, TwinRobotConfig
    from robot_rl.errors import RobotError

    # 15 N: above the first contact's short transient (~12 N, which the guard's 10 ms checks catch and which is
    # gone by the next call), below the steady push (~20 N) that this test is about
    guard = SafetyGuard(TwinRobot(TwinRobotConfig(task="pick_cube", render=False)),
                        ServerSafetyConfig(max_force_n=15.0, clear_settle_s=settle_s))
    try:
        s0 = guard.state()
        guard.command(np.array([0.5, 0.15, -0.01]), s0.quat_base_ee, 0.0)  # 1 cm into the table
        for _ in range(60):
            guard.wait(0.1)
            if guard.state().error:
                break
        assert "external force" in guard.state().error
        if settle_s == 0.0:
            with pytest.raises(RobotError, match="still exceeded"):
                guard.clear_errors()
            return
        guard.clear_errors()
        s = guard.state()
        assert s.error == "" and np.linalg.norm(s.force_ee_n) < 15.0
        guard.set_gains("compliance")  # no longer refused
    finally:
        guard.stop()


def test_joint_position_and_velocity_margins() -> None:
    """A joint inside its margin or too fast trips the guard; clear_errors refuses while the joint is still there;
    a recovery joint reset to a configuration inside the margins is the one motion allowed, then it clears."""
    from controllers.kinematics import PANDA_HOME_Q, PANDA_Q_MAX
    from envs.robot_server.safety import SafetyGuard, ServerSafetyConfig
    from envs.twin import TwinRobot, TwinRobotConfig
    from robot_rl.errors import RobotError

    # clear_settle_s=0: refuse at once (with the default 1 s the twin's posture control may pull the joint out of
    # its margin while the guard holds the pose, and clear_errors then succeeds)
    guard = SafetyGuard(TwinRobot(TwinRobotConfig(task="reach", render=False)), ServerSafetyConfig(clear_settle_s=0.0))
    try:
        assert guard.state().error == ""
        q = np.array(PANDA_HOME_Q)
        q[0] = PANDA_Q_MAX[0] - 0.02  # 2 cm-rad from the limit, inside the 0.05 rad margin
        guard.reset_joints(q)
        s = guard.state()
        assert "joint 1" in s.error and "limits" in s.error
        with pytest.raises(RobotError, match="still exceeded"):
            guard.clear_errors()
        with pytest.raises(RobotError, match="safety stop"):  # other motions stay refused
            guard.set_gains("compliance")
        with pytest.raises(RobotError, match="recovery joint reset"):  # only to a configuration inside the margins
            guard.reset_joints(q)
        guard.reset_joints(np.array(PANDA_HOME_Q))  # the way out: a joint move home
        guard.clear_errors()
        assert guard.state().error == "" and abs(guard.state().q_rad[0] - PANDA_HOME_Q[0]) < 0.01
    finally:
        guard.stop()
    guard = SafetyGuard(TwinRobot(TwinRobotConfig(task="reach", render=False)),
                        ServerSafetyConfig(max_joint_speed_fraction=0.02))  # ~0.04 rad/s
    try:
        s = guard.state()
        guard.command(s.pos_base_ee + np.array([0.1, 0.1, -0.1]), s.quat_base_ee, 0.0)
        guard.wait(0.3)
        assert "moves at" in guard.state().error
        with pytest.raises(RobotError, match="safety stop"):
            guard.command(s.pos_base_ee, s.quat_base_ee, 0.0)
        assert guard.stats()["trips"] == 1
    finally:
        guard.stop()


def test_estop_call_lands_during_a_long_call_and_latches(capsys: pytest.CaptureFixture[str]) -> None:
    """`robot-rl estop ADDR` is answered at once even while the owner's 3 s wait() is running (the I/O thread
    serves it); from then on every command is refused and the state says e-stopped."""
    import threading
    import time

    from envs.robot_server import RobotServerConfig, serve_in_thread
    from envs.robot_server.safety import SafetyGuard
    from envs.twin import TwinRobot, TwinRobotConfig
    from robot_rl import cli
    from robot_rl.errors import RobotError

    class RealTimeTwin(TwinRobot):
        """The twin whose wait() takes as long as it simulates (as a hardware backend's does)."""

        def wait(self, duration_s: float) -> None:
            super().wait(duration_s)
            time.sleep(duration_s)

    def factory() -> Any:
        return SafetyGuard(RealTimeTwin(TwinRobotConfig(task="reach", render=False))), None, {"task": "reach"}

    with serve_in_thread(factory, RobotServerConfig(bind="tcp://127.0.0.1:0")) as handle:
        robot = _client(handle.address)
        s = robot.state()
        done: dict[str, float] = {}

        def long_wait() -> None:
            t0 = time.monotonic()
            robot.wait(3.0)
            done["wait_s"] = time.monotonic() - t0

        t = threading.Thread(target=long_wait)
        t.start()
        time.sleep(0.2)
        t0 = time.monotonic()
        assert cli.main(["estop", handle.address]) == 0
        took = time.monotonic() - t0
        assert "wait_s" not in done  # the long call was still running
        out = capsys.readouterr().out
        t.join(10)
        print(f"estop acknowledged in {1e3 * took:.1f} ms during a 3 s wait")
        assert took < 0.1 and "motion stopped" in out  # within one 10 Hz control period
        with pytest.raises(RobotError, match="e-stopped"):
            robot.command(s.pos_base_ee, s.quat_base_ee, 0.0)
        assert "e-stopped" in robot.state().error
        with pytest.raises(RobotError, match="e-stopped"):
            robot.clear_errors()
        stats = robot.server_stats()
        assert stats["estops"] == 1 and stats["safety"]["estopped"]
        robot.close()


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_signal_on_the_robot_server_estops_then_exits(sig: str) -> None:
    """Ctrl-C / SIGTERM on `robot-rl robot-server`: the e-stop runs in the signal handler at once (measured from
    the signal to the server's 'e-stopped' line), then the server stops cleanly (exit 0, backend stopped)."""
    import os
    import queue
    import signal
    import subprocess
    import sys
    import threading
    import time

    env = {**os.environ, "MUJOCO_GL": "egl", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "robot_rl.cli", "robot-server", "--task", "reach", "--no-cameras",
                             "--bind", "tcp://127.0.0.1:0", "--stats-every", "0"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[tuple[float, str]] = queue.Queue()
    threading.Thread(target=lambda: [lines.put((time.monotonic(), ln)) for ln in proc.stderr],  # type: ignore[union-attr]
                     daemon=True).start()
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        address = first.split(" on ")[1].split()[0]
        robot = _client(address)
        s = robot.state()
        robot.command(s.pos_base_ee + np.array([0.05, 0, 0]), s.quat_base_ee, 0.0)
        t_signal = time.monotonic()
        proc.send_signal(getattr(signal, sig))
        t_line, line = lines.get(timeout=10)
        while "e-stopped" not in line:
            t_line, line = lines.get(timeout=10)
        assert f"{sig}: e-stopped" in line
        print(f"{sig}: e-stop {1e3 * (t_line - t_signal):.1f} ms after the signal")
        assert t_line - t_signal < 0.1  # within one 10 Hz control period
        assert proc.wait(10) == 0
        robot.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


class _NoWeightsEndpoint:
    """An actor endpoint whose learner never publishes weights; records what is sent."""

    def __init__(self, spec: Any) -> None:
        self.spec, self.sent = spec, []

    def send(self, chunk: Any, timeout: float = 0.0) -> bool:
        self.sent.append(chunk)
        return True

    def latest_weights(self) -> None:
        return None

    def flush(self, timeout: float) -> bool:
        return True

    def report(self, **stats: Any) -> bool:
        return True

    def stats(self) -> Any:
        class S:
            state, learner, acked_upto = "connected", {}, -1
        return S()


@pytest.mark.parametrize("warmup", ["hold", "random"])
def test_actor_holds_the_pose_before_the_first_weights(warmup: str) -> None:
    """Before any weights the actor's default ('hold') sends zero actions: the commanded pose never leaves the reset
    pose and the gripper stays; random warm-up is opt-in. The CLI's auto choice is random only on the twin."""
    from actors.actor import Actor, ActorConfig
    from actors.actor_env import backend_of
    from envs.presets import make_env
    from robot_rl.gym_env import env_spec_of

    env = make_env("twin-reach", obs_mode="state", reset_noise_m=0.0, reset_noise_rad=0.0)
    assert ActorConfig().warmup == "hold" and backend_of(env) == "twin"
    try:
        spec = env_spec_of(env, "twin-reach")
        actor = Actor(env, _NoWeightsEndpoint(spec), ActorConfig(warmup=warmup, pace=False, chunk_steps=10))
        actor.start()
        start = env.unwrapped.commanded_pose[0]
        for _ in range(10):
            actor.step()
        moved = float(np.linalg.norm(env.unwrapped.commanded_pose[0] - start))
        actions = np.asarray(actor.endpoint.sent[0].actions)
        if warmup == "hold":
            assert moved == 0.0 and np.all(actions == 0.0)
        else:
            assert moved > 0.01 and np.std(actions) > 0.3
        actor.close(flush_s=0.1)
    finally:
        env.close()


def test_actor_cli_holds_on_a_non_twin_backend() -> None:
    from actors.actor_env import backend_of
    from envs.remote import make_remote_env
    from envs.robot_server import RobotServerConfig, serve_in_thread
    from envs.twin import TwinRobot, TwinRobotConfig

    def factory() -> Any:  # a backend that says it is hardware
        return TwinRobot(TwinRobotConfig(task="reach", render=False)), None, {"backend": "franky", "task": "reach"}

    with serve_in_thread(factory, RobotServerConfig(bind="tcp://127.0.0.1:0")) as handle:
        env = make_remote_env(handle.address, obs_mode="state")
        try:
            assert backend_of(env) == "franky"  # -> warm-up 'hold' unless --warmup random
            assert env.unwrapped.config.realtime  # a hardware backend: the env keeps real-time deadlines
        finally:
            env.close()


def test_recorded_box_becomes_the_servers_box(tmp_path: Any) -> None:
    """box_from_poses holds every sample (euler relative to the nominal orientation); the task config written by
    `safety-box record` loads back as the task with that box, and a robot server given it (--task-config) clips
    targets to it (+ its margin)."""
    from controllers.transforms import axis_angle_to_quat, quat_mul
    from envs.hardware.safety_box import box_from_poses, load_task_config, write_task_config
    from envs.robot_server import RobotServerConfig, make_backend, serve_in_thread
    from robot_rl.errors import ConfigError

    down = np.array([0.0, 1.0, 0.0, 0.0])
    quats = [down, quat_mul(axis_angle_to_quat(np.array([0.0, 0.0, 0.3])), down)]
    box = box_from_poses([[0.40, -0.05, 0.10], [0.55, 0.08, 0.30]], quats, down, margin_m=0.01)
    assert box["pos_min_m"] == [0.39, -0.06, 0.09] and box["pos_max_m"] == [0.56, 0.09, 0.31]
    assert box["rot_min_rad"][2] == -0.3 and box["rot_max_rad"][2] == 0.0  # base z is -z in the gripper-down frame
    path = write_task_config(tmp_path / "box.json", "pick_cube", box, {"samples": 2})
    task = load_task_config(path)
    assert task.name == "pick_cube" and task.pos_max_m == (0.56, 0.09, 0.31) and task.object_keys  # still pick_cube
    with serve_in_thread(lambda: make_backend("twin", task, cameras=False),
                         RobotServerConfig(bind="tcp://127.0.0.1:0")) as handle:
        robot = _client(handle.address)
        s = robot.state()
        robot.command(np.array([0.5, 0.0, 0.2]), s.quat_base_ee, 0.0)  # inside the recorded box: untouched
        assert np.allclose(handle.robot.controller.commanded_pos, [0.5, 0.0, 0.2])
        robot.command(np.array([0.5, 0.3, 0.2]), s.quat_base_ee, 0.0)  # y 0.3 > 0.09 + 0.02 margin
        assert np.isclose(handle.robot.controller.commanded_pos[1], 0.11)
        robot.stop()
    (tmp_path / "bad.json").write_text('{"format": "robot-rl-task-config", "version": 1, "task": "pick_cube", '
                                        '"overrides": {"pos_min_m": [1, 0, 0], "pos_max_m": [0, 1, 1]}}')
    with pytest.raises(ConfigError, match="exceeds"):
        load_task_config(tmp_path / "bad.json")


def test_env_reset_recovers_from_a_joint_limit_trip() -> None:
    """An exploring policy drove a joint into its margin: the guard stopped, the episode ended, and the env's next
    reset must get the arm back by itself (clear_errors refuses while the joint is there; the env then does a
    recovery joint reset home and clears): a `robot-rl sim` pick-cube run lost both actors to this before."""
    from controllers.kinematics import PANDA_HOME_Q
    from envs.env import RobotEnv, RobotEnvConfig
    from envs.robot_server.safety import SafetyGuard, ServerSafetyConfig
    from envs.twin import TwinRobot, TwinRobotConfig

    guard = SafetyGuard(TwinRobot(TwinRobotConfig(task="reach", render=False)), ServerSafetyConfig(clear_settle_s=0.2))
    env = RobotEnv(guard, "reach", None, RobotEnvConfig(obs_mode="state"))
    try:
        env.reset(seed=0)
        _joint_1_into_its_margin(guard)  # as if the policy had driven joint 1 there (behind the guard's back)
        _, _, terminated, truncated, _ = env.step(np.zeros(7, np.float32))
        assert truncated and not terminated and "joint 1" in env.last_state.error
        env.reset()
        assert env.last_state.error == "" and guard.stats()["trips"] >= 1  # (the move home may trip once more)
        assert abs(guard.state().q_rad[0] - PANDA_HOME_Q[0]) < 0.05
        env.step(np.zeros(7, np.float32))  # commands are accepted again
        assert env.last_state.error == ""
    finally:
        env.close()


def test_the_guard_checks_within_its_period_and_slicing_changes_no_physics() -> None:
    """A 100 ms wait is served in check_period_s slices with a check after each: pushing into the table, the guard
    holds within one period (+ a physics step) of the first physics step above the force limit, where a check after
    the whole wait holds much later; in free motion the slices leave the twin's trajectory bit-identical."""
    from envs.robot_server.safety import SafetyGuard, ServerSafetyConfig
    from envs.twin import TwinRobot, TwinRobotConfig

    def press(robot: Any) -> tuple[np.ndarray, np.ndarray]:
        robot.reset_scene(seed=0)
        quat = robot.state().quat_base_ee
        return np.array([0.5, 0.15, -0.01]), quat

    ref = TwinRobot(TwinRobotConfig(task="pick_cube", render=False))
    pos, quat = press(ref)
    ref.command(pos, quat, 0.0)
    dt = 1.0 / ref.physics_hz
    t_exceed = None
    for _ in range(int(4.0 / dt)):
        ref.wait(dt)
        s = ref.state()
        if np.linalg.norm(s.force_ee_n) > 10.0:
            t_exceed = s.time_s
            break
    ref.stop()
    assert t_exceed is not None
    latency, trips = {}, {}
    for period in (0.01, 0.1):
        guard = SafetyGuard(TwinRobot(TwinRobotConfig(task="pick_cube", render=False)),
                            ServerSafetyConfig(max_force_n=10.0, check_period_s=period))
        pos, quat = press(guard.robot)
        guard.command(pos, quat, 0.0)
        for _ in range(40):
            guard.wait(0.1)
            if guard.trip_time_s is not None:
                break
        assert guard.trip_time_s is not None and "external force" in guard.state().error
        latency[period] = guard.trip_time_s - t_exceed
        trips[period] = guard.trip_time_s
        guard.stop()
    assert 0.0 <= latency[0.01] <= 0.01 + dt + 1e-9, latency
    # the check after the whole wait comes later, at the end of a 0.1 s wait (how much later depends on where in that
    # wait the force rose)
    assert latency[0.1] > latency[0.01], latency
    assert abs(trips[0.1] - round(trips[0.1], 1)) <= dt + 1e-9, trips
    free = [TwinRobot(TwinRobotConfig(task="pick_cube", render=False)) for _ in range(2)]
    sliced = SafetyGuard(free[1], ServerSafetyConfig(check_period_s=0.01))
    for robot, waiter in ((free[0], free[0]), (free[1], sliced)):
        s = robot.state()
        robot.command(s.pos_base_ee + np.array([0.05, -0.03, 0.04]), s.quat_base_ee, 0.0)
        for _ in range(5):
            waiter.wait(0.1)
    assert np.array_equal(free[0].state().q_rad, free[1].state().q_rad)
    assert np.array_equal(free[0].state().pos_base_ee, free[1].state().pos_base_ee)
    for r in free:
        r.stop()


def test_a_state_the_backend_receives_trips_the_guard_in_the_backend_thread() -> None:
    """A backend with add_state_listener (ROS 2) hands every received state to the guard: a force above the limit in
    one sample trips at that sample's time and re-targets the measured pose, with no state() / wait() call between;
    the trip latches once, and the polled checks report it."""
    import threading

    from envs.robot import StateSample
    from envs.robot_server.safety import SafetyGuard, ServerSafetyConfig
    from envs.twin import TwinRobot, TwinRobotConfig
    from robot_rl.errors import RobotError

    class ListeningTwin(TwinRobot):
        def __init__(self) -> None:
            super().__init__(TwinRobotConfig(task="reach", render=False))
            self.listeners: list[Any] = []
            self.commands: list[np.ndarray] = []

        def add_state_listener(self, callback: Any) -> None:
            self.listeners.append(callback)

        def command(self, pos: np.ndarray, quat: np.ndarray, gripper_closed: float) -> None:
            self.commands.append(np.array(pos))
            super().command(pos, quat, gripper_closed)

    robot = ListeningTwin()
    guard = SafetyGuard(robot, ServerSafetyConfig(max_force_n=20.0))
    try:
        assert len(robot.listeners) == 1  # the guard registered itself
        s = guard.state()
        guard.command(s.pos_base_ee + np.array([0.03, 0.0, 0.0]), s.quat_base_ee, 0.0)
        q, dq = np.asarray(s.q_rad), np.zeros(7)
        calm = StateSample(1.0, q, dq, np.array([0.0, 0.0, 5.0]), np.zeros(3))
        push = StateSample(1.001, q, dq, np.array([0.0, 0.0, 25.0]), np.zeros(3))
        robot.listeners[0](calm)
        assert guard.stats()["trips"] == 0 and len(robot.commands) == 1
        # the listener runs in the backend's thread (as rclpy's executor calls it)
        worker = threading.Thread(target=lambda: [robot.listeners[0](push) for _ in range(3)])
        worker.start()
        worker.join(10)
        assert guard.stats()["trips"] == 1 and guard.trip_time_s == 1.001  # once, at the sample's clock
        assert len(robot.commands) == 2 and np.allclose(robot.commands[-1], robot.state().pos_base_ee)  # the hold
        assert guard.checked_samples == 4
        assert "external force 25.0 N > 20.0 N" in guard.state().error
        with pytest.raises(RobotError, match="safety stop"):
            guard.command(s.pos_base_ee, s.quat_base_ee, 0.0)
    finally:
        guard.stop()


@pytest.mark.parametrize("ends", ["failure", "truncation"])
def test_a_trip_ends_the_episode_as_configured(ends: str) -> None:
    """robot_error_ends: a guard's trip ends the episode as a failure (terminated, reward 0: learning takes it for a
    dead end) or as a truncation (bootstrapped); info names the error either way."""
    from envs.robot_server.safety import SafetyGuard, ServerSafetyConfig
    from envs.twin import TwinRobot, TwinRobotConfig
    from robot_rl.errors import ConfigError

    guard = SafetyGuard(TwinRobot(TwinRobotConfig(task="reach", render=False)), ServerSafetyConfig(clear_settle_s=0.2))
    env = RobotEnv(guard, "reach", None, RobotEnvConfig(obs_mode="state", robot_error_ends=ends))
    try:
        env.reset(seed=0)
        _, _, terminated, truncated, info = env.step(np.zeros(7, np.float32))
        assert not (terminated or truncated) and "robot_error" not in info
        _joint_1_into_its_margin(guard)
        _, reward, terminated, truncated, info = env.step(np.zeros(7, np.float32))
        assert (terminated, truncated) == ((True, False) if ends == "failure" else (False, True))
        assert reward == 0.0 and not info["success"] and "joint 1" in info["robot_error"]
    finally:
        env.close()
    with pytest.raises(ConfigError, match="robot_error_ends"):
        RobotEnvConfig(robot_error_ends="stop")


def _joint_1_into_its_margin(guard: Any) -> None:
    """Drive joint 1 to 0.02 rad from its limit (inside the guard's 0.05 rad margin) behind the guard's back, as if
    a policy had driven it there: the guard trips at its next check."""
    from controllers.kinematics import PANDA_HOME_Q, PANDA_Q_MAX

    q = np.array(PANDA_HOME_Q)
    q[0] = PANDA_Q_MAX[0] - 0.02
    guard.robot.reset_joints(q)


def _tripped_at_joint_1(guard: Any) -> None:
    """`_joint_1_into_its_margin`, and the guard sees it (it trips and latches)."""
    _joint_1_into_its_margin(guard)
    assert "joint 1" in guard.state().error


def test_a_fresh_env_on_a_stopped_robot_recovers_at_its_first_reset() -> None:
    """An actor restarted after its robot server stopped connects to a robot still in its trip: the new env's first
    reset clears it (here by the recovery joint reset: the joint is still in its margin) instead of failing on the
    refused set_gains (a faithful `robot-rl sim` pixel run lost an actor and every restart of it to this)."""
    from envs.robot_server.safety import SafetyGuard, ServerSafetyConfig
    from envs.twin import TwinRobot, TwinRobotConfig
    from robot_rl.errors import RobotError

    guard = SafetyGuard(TwinRobot(TwinRobotConfig(task="reach", render=False)), ServerSafetyConfig(clear_settle_s=0.2))
    _tripped_at_joint_1(guard)
    with pytest.raises(RobotError, match="safety stop"):
        guard.set_gains("precision")  # what the first reset did first
    env = RobotEnv(guard, "reach", None, RobotEnvConfig(obs_mode="state"))
    try:
        env.reset(seed=0)
        assert env.last_state is not None and env.last_state.error == "" and guard.stats()["tripped"] == ""
        env.step(np.zeros(7, np.float32))
        assert env.last_state.error == ""
    finally:
        env.close()


class _TripsInTheRoutine:
    """A robot that trips its guard at the `n`-th set_gains call once armed (the pick-cube routine's first step is
    a gains change; a trip there stands for one during the routine's put-down), everything else passed through."""

    def __init__(self, guard: Any) -> None:
        self.guard, self.armed_calls = guard, 0

    def set_gains(self, profile: str) -> None:
        if self.armed_calls:
            self.armed_calls -= 1
            if not self.armed_calls:
                _tripped_at_joint_1(self.guard)
        self.guard.set_gains(profile)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.guard, name)


def test_a_trip_in_the_reset_routine_is_recovered_and_the_episode_starts_home() -> None:
    """Robot-driven resets (scene_resets='first'): a guard trip while the routine runs (a RobotError from its next
    command) used to escape reset() and stop the actor; the env clears it (or recovers by the joint reset), does the
    joint reset, counts it in routine_errors and starts the episode at the reset pose with no error."""
    from envs.robot_server.safety import SafetyGuard, ServerSafetyConfig
    from envs.twin import TwinRobot, TwinRobotConfig

    guard = SafetyGuard(TwinRobot(TwinRobotConfig(task="pick_cube", render=False)),
                        ServerSafetyConfig(clear_settle_s=0.2))
    robot = _TripsInTheRoutine(guard)
    env = RobotEnv(robot, "pick_cube", None, RobotEnvConfig(obs_mode="state", scene_resets="first"))
    try:
        env.reset(seed=0)
        env.step(np.zeros(7, np.float32))
        teleports, trips = env.scene_teleports, guard.stats()["trips"]
        robot.armed_calls = 2  # the reset's own precision gains first, then the routine's gains step trips
        _, info = env.reset()
        assert env.routine_errors == 1 and guard.stats()["trips"] > trips and env.scene_teleports == teleports
        assert env.last_state is not None and env.last_state.error == "" and not info["scene_reset"]
        assert abs(guard.state().q_rad[0] - env.config.home_q_rad[0]) < 0.2  # the joint reset brought it home
        env.step(np.zeros(7, np.float32))
        assert env.last_state.error == ""
    finally:
        env.close()
