"""Panda and FR3: the joint limits the server's guard enforces follow the arm a backend drives (the twin: a Panda;
franky: its libfranka; ROS 2: its joint names), 'any' is the tighter of both, and franky sets libfranka's
collision thresholds at connect."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from controllers.arms import ANY, ARMS, FR3, PANDA, arm_for_joint_names, arm_for_libfranka, arm_limits
from controllers.kinematics import PANDA_HOME_Q
from envs.robot import RobotState
from robot_rl.errors import ConfigError


def test_the_tables_and_what_any_means() -> None:
    for arm in ARMS.values():
        assert len(arm.q_min_rad) == len(arm.q_max_rad) == len(arm.dq_max_rad_per_s) == 7
        assert all(lo < hi for lo, hi in zip(arm.q_min_rad, arm.q_max_rad, strict=True))
    assert np.all(np.asarray(ANY.q_min_rad) >= np.asarray(PANDA.q_min_rad))
    assert np.all(np.asarray(ANY.q_min_rad) >= np.asarray(FR3.q_min_rad))
    assert np.all(np.asarray(ANY.q_max_rad) <= np.minimum(PANDA.q_max_rad, FR3.q_max_rad))
    assert np.all(np.asarray(ANY.dq_max_rad_per_s) <= np.minimum(PANDA.dq_max_rad_per_s, FR3.dq_max_rad_per_s))
    assert ANY.q_min_rad[5] == FR3.q_min_rad[5] == 0.5445 and ANY.q_max_rad[0] == FR3.q_max_rad[0] == 2.7437
    assert all(ANY.q_min_rad[j] < PANDA_HOME_Q[j] < ANY.q_max_rad[j] for j in range(7))  # home is valid for both
    with pytest.raises(ConfigError, match=r"arm='ur5' is unknown; known: \['any', 'fr3', 'panda'\]"):
        arm_limits("ur5")


def test_which_arm_from_libfranka_and_from_joint_names() -> None:
    assert arm_for_libfranka("0.9.2") == "panda" and arm_for_libfranka("0.7.1") == "panda"
    assert arm_for_libfranka("0.10.0") == "fr3" and arm_for_libfranka("0.21.2") == "fr3"
    assert arm_for_libfranka("") == "any" and arm_for_libfranka("unknown") == "any"
    assert arm_for_joint_names([f"fr3_joint{i}" for i in range(1, 8)]) == "fr3"
    assert arm_for_joint_names([f"panda_joint{i}" for i in range(1, 8)]) == "panda"
    assert arm_for_joint_names(["joint1", "joint2"]) is None and arm_for_joint_names([]) is None


class _StillArm:
    """A Robot stub standing at joint configuration `q` moving at `dq`, optionally naming its arm."""

    def __init__(self, q: Any, dq: Any = (0.0,) * 7, arm: str | None = None) -> None:
        self.q, self.dq = np.asarray(q, np.float64), np.asarray(dq, np.float64)
        self.commands = 0
        if arm is not None:
            self.arm = arm

    def state(self) -> RobotState:
        z3 = np.zeros(3)
        return RobotState(time_s=0.0, q_rad=self.q.copy(), dq_rad_per_s=self.dq.copy(),
                          pos_base_ee=np.array([0.4, 0.0, 0.3]), quat_base_ee=np.array([0.0, 1.0, 0.0, 0.0]),
                          twist_ee_body=np.zeros(6), gripper_width_m=0.08, force_ee_n=z3, torque_ee_nm=z3,
                          tau_j_nm=np.zeros(7))

    def command(self, pos: Any, quat: Any, gripper_closed: float) -> None:
        self.commands += 1

    def stop(self) -> None:
        pass


@pytest.mark.parametrize(("robot_arm", "config_arm", "trips"), [
    ("panda", "auto", False),  # joint 6 at 0.3 rad: inside a Panda's range [-0.0175, 3.7525]
    ("fr3", "auto", True),     # ... outside an FR3's [0.5445, 4.5169]
    (None, "auto", True),      # a backend that does not say: 'any', the tighter limits
    ("fr3", "panda", False),   # the flag wins
])
def test_the_guard_enforces_the_arms_position_limits(robot_arm: str | None, config_arm: str, trips: bool) -> None:
    from envs.robot_server.safety import SafetyGuard, ServerSafetyConfig

    q = np.array(PANDA_HOME_Q)
    q[5] = 0.3
    guard = SafetyGuard(_StillArm(q, arm=robot_arm), ServerSafetyConfig(arm=config_arm))  # type: ignore[arg-type]
    err = guard.state().error
    assert ("joint 6" in err) == trips, err
    if trips:
        assert f"({guard.limits.name})" in err and "[0.5445, " in err


def test_the_guard_enforces_the_arms_velocity_limits() -> None:
    """Joint 5 at 4 rad/s: under 90 % of an FR3's 5.26 rad/s, over 90 % of a Panda's 2.61 rad/s."""
    from envs.robot_server.safety import SafetyGuard, ServerSafetyConfig

    dq = np.zeros(7)
    dq[4] = 4.0
    assert SafetyGuard(_StillArm(PANDA_HOME_Q, dq, arm="fr3"), ServerSafetyConfig()).state().error == ""  # type: ignore[arg-type]
    err = SafetyGuard(_StillArm(PANDA_HOME_Q, dq, arm="panda"), ServerSafetyConfig()).state().error  # type: ignore[arg-type]
    assert "joint 5 moves at 4.00 rad/s > 2.35 rad/s" in err
    with pytest.raises(ConfigError, match="arm"):
        ServerSafetyConfig(arm="kuka")


def test_robot_server_flags_for_the_arm_and_collision_thresholds(capsys: pytest.CaptureFixture[str]) -> None:
    from envs.robot_server.run import parse_robot_server_args

    cfg = parse_robot_server_args(["--backend", "franky", "--robot-ip", "172.16.0.2", "--arm", "panda",
                                   "--collision-torque", *["20"] * 7, "--collision-force", *["30"] * 6])
    assert cfg.arm == "panda" and cfg.collision_torque == (20.0,) * 7 and cfg.collision_force == (30.0,) * 6
    for argv, message in ((["--backend", "franky", "--robot-ip", "x", "--collision-torque", *["20"] * 7],
                           "go together"),
                          (["--collision-torque", *["20"] * 7, "--collision-force", *["30"] * 6],
                           "options of --backend franky"),
                          (["--arm", "ur5"], "invalid choice")):
        with pytest.raises(SystemExit):
            parse_robot_server_args(argv)
        assert message in capsys.readouterr().err


def test_franky_config_checks_the_collision_thresholds() -> None:
    from envs.hardware.franky_robot import FrankyRobotConfig

    FrankyRobotConfig(robot_ip="x", collision_torque_nm=(20.0,) * 7, collision_force_n=(30.0,) * 6)
    with pytest.raises(ConfigError, match="collision_torque_nm"):
        FrankyRobotConfig(robot_ip="x", collision_torque_nm=(20.0,) * 6, collision_force_n=(30.0,) * 6)
    with pytest.raises(ConfigError, match="both or neither"):
        FrankyRobotConfig(robot_ip="x", collision_torque_nm=(20.0,) * 7)
    with pytest.raises(ConfigError, match="arm"):
        FrankyRobotConfig(robot_ip="x", arm="ur5")


def test_collision_thresholds_come_from_the_task_config_and_the_flags_win(tmp_path: Any,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A lab's task config (`overrides`) carries libfranka's collision thresholds; the robot server hands them to
    the franky backend, `--collision-torque/--collision-force` win; bad ones are refused naming the file."""
    import json

    import envs.robot_server.run as server_run
    from envs.hardware.safety_box import load_task_config

    def config(overrides: dict[str, Any]) -> Any:
        path = tmp_path / f"task_{len(list(tmp_path.iterdir()))}.json"
        path.write_text(json.dumps({"format": "robot-rl-task-config", "version": 1, "task": "pick_cube",
                                    "overrides": overrides}))
        return path

    good = config({"collision_torque_nm": [30] * 7, "collision_force_n": [40] * 6,
                   "pos_min_m": [0.3, -0.2, 0.05], "pos_max_m": [0.6, 0.2, 0.4]})  # a lab's box: franky needs one
    assert load_task_config(good).collision_torque_nm == (30.0,) * 7
    seen: dict[str, Any] = {}

    def fake_backend(name: str, task: Any, **kw: Any) -> Any:
        seen.update(kw, task=task)
        return None, None, {}

    monkeypatch.setattr(server_run, "make_backend", fake_backend)
    base = ["--backend", "franky", "--robot-ip", "172.16.0.2", "--task", "pick_cube", "--task-config", str(good)]
    server_run._backend(server_run.parse_robot_server_args(base))
    assert seen["franky_options"] == {"collision_torque_nm": (30.0,) * 7, "collision_force_n": (40.0,) * 6}
    server_run._backend(server_run.parse_robot_server_args([*base, "--collision-torque", *["25"] * 7,
                                                             "--collision-force", *["35"] * 6]))
    assert seen["franky_options"] == {"collision_torque_nm": (25.0,) * 7, "collision_force_n": (35.0,) * 6}
    for bad, message in (({"collision_torque_nm": [30] * 6, "collision_force_n": [40] * 6},
                          "collision_torque_nm must have 7 entries"),
                         ({"collision_torque_nm": [30] * 7}, "go together")):
        with pytest.raises(ConfigError, match=message):
            load_task_config(config(bad))
