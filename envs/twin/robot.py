"""`TwinRobot`: the MuJoCo twin behind the Robot seam (envs.robot), in process.

The arm is torque-controlled by the project's Cartesian impedance controller
(controllers.impedance.CartesianImpedanceController), called at every physics step with MuJoCo's TCP Jacobian
and bias forces (qfrc_bias = gravity + coriolis, standing in for Franka's internal compensation). `wait(s)`
simulates s seconds: round(s * physics_hz) physics steps with one controller tick each. Everything is
deterministic: the same config, seeds and commands give bit-identical states.

Physics rate: physics_hz = 500 by default (2 ms steps; SERL's real controller runs at 1 kHz, which the twin
also supports, TwinRobotConfig(physics_hz=1000)). A physics step costs ~13 us without contacts and ~25 us
with a grasped peg on this project's CPU machine, whatever the rate, so 500 Hz gives ~750-1500 state-only env
steps/s at 10 Hz (robot.wait(0.1) calls) and 1 kHz half that (~350 with the peg task, below the ~450 that
1 kHz had to reach to be the default). The controller tick (numba) is ~15-20% of the step time.

Frames and conventions (envs.robot): base = world (the robot base stands at the origin, z up, on the table
top z = 0); TCP = site "tcp" between the fingertips, 0.1034 m past the flange, gripper pointing along +z of
the TCP frame; quaternions (w, x, y, z) with w >= 0.

Force/torque (RobotState.force_ee_n, torque_ee_nm): MuJoCo force + torque sensors at the wrist measure the
wrench between the hand subtree (hand + fingers) and link7. TwinRobot removes the subtree's static weight
(its mass at its centre of mass, under gravity) and reports the remaining wrench as the external wrench that
the environment applies to the hand, in the TCP frame, torque about the TCP. Pressing down on the table with
the gripper pointing down reads about (0, 0, -F) (the table pushes back along -z of the TCP frame).
Inertial forces of the hand (m a, about 1 N at 1 m/s^2) are not removed, and a grasped object's weight is
part of the external wrench (peg: ~0.5 N), as on a real wrist sensor after taring the hand only. The reading
is that of the last physics step (no filtering).

Objects (RobotState.objects, base frame, copies):
- "reach": goal_pos (3,) = centre of the goal marker.
- "pick_cube", "cube_relocate", "cube_relocate_back": cube_pos (3,) = cube centre (z = 0.02 when it rests on the
  table), cube_quat (4,).
- "peg_insert": peg_pos (3,) = centre of the peg's bottom face, peg_quat (4,) (identity = upright),
  hole_pos (3,) = centre of the hole's FLOOR (on the table, z = 0); the opening is HOLE_DEPTH_M = 0.035 m above
  it. A fully inserted peg has peg_pos ~= hole_pos (within ~1 mm: contacts are slightly soft).
  reset_scene() and reset_joints() put the peg back between the closed fingers (bottom 55 mm past the TCP);
  under a sustained 20 N push the grasped peg creeps into the hand by ~0.1 mm/s (soft friction).

Usage::

    robot = TwinRobot(TwinRobotConfig(task="reach"))
    robot.reset_scene(seed=0)
    s = robot.state()
    robot.command(s.pos_base_ee + [0, 0, 0.05], s.quat_base_ee, gripper_closed=0.0)
    robot.wait(0.5)
    images = robot.cameras().read()       # {"front": uint8 (H, W, 3), "wrist": ...}
    robot.stop()
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Self

import mujoco
import numpy as np

from controllers.gains import gain_profile
from controllers.impedance import CartesianImpedanceController, ImpedanceConfig
from controllers.kinematics import PANDA_HOME_Q, PANDA_Q_MAX, PANDA_Q_MIN
from controllers.transforms import mat_to_quat
from envs.robot import RobotState, check_command, check_duration, check_joint_target
from envs.tasks import CubeRelocateTask, get_task, in_zone, relocate_zone_m
from envs.twin.cameras import TwinCameras
from envs.twin.model import (
    ARM_JOINTS,
    CAMERA_NAMES,
    CUBE_HALF_SIZE_M,
    CUBE_TASKS,
    CUBE_XY_HIGH,
    CUBE_XY_LOW,
    DEFAULT_CAMERAS,
    FINGER_JOINTS,
    FIXTURE_XY_HIGH,
    FIXTURE_XY_LOW,
    FT_SITE,
    GOAL_HIGH,
    GOAL_LOW,
    GRIPPER_ACTUATOR,
    GRIPPER_MAX_WIDTH_M,
    HAND_BODY,
    PEG_BOTTOM_PAST_TCP_M,
    PEG_HALF_WIDTH_M,
    RELOCATE_START_XY,
    RELOCATE_TRAY_XY,
    TCP_SITE,
    TWIN_TASKS,
    build_model,
)
from robot_rl.config import Config, require
from robot_rl.errors import ConfigError, RobotError, SafetyError

_GRASP_SQUEEZE_M = 2e-4
"""reset_scene seats the fingers this far into the peg (each side) so the grasp holds from the first step."""


@dataclasses.dataclass(frozen=True)
class TwinRobotConfig(Config):
    """Settings of the MuJoCo twin."""

    task: str = "reach"
    """Scene: one of envs.twin.TWIN_TASKS ("reach", "pick_cube", "peg_insert", "cube_relocate", ...)."""
    physics_hz: float = 500.0
    """Physics (and controller) rate in Hz; the timestep is 1 / physics_hz. 500 (default) or 1000; the
    contacts are tuned for >= 500 (finger contact time constant 4 ms = two steps at 500 Hz)."""
    home_q_rad: tuple[float, ...] = PANDA_HOME_Q
    """Joint configuration at construction (rad); Franka's home [0, -pi/4, 0, -3pi/4, 0, pi/2, pi/4]."""
    image_height: int = 128
    """Camera image height (pixels); the offscreen buffer is sized to it."""
    image_width: int = 128
    """Camera image width (pixels)."""
    camera_names: tuple[str, ...] = DEFAULT_CAMERAS
    """Cameras that TwinCameras.read() renders, a subset of CAMERA_NAMES ("front", "wrist", "side", "level")."""
    render: bool = True
    """False: never create a renderer (state-only use); cameras() then raises ConfigError."""
    impedance: ImpedanceConfig = dataclasses.field(default_factory=ImpedanceConfig)
    """Fixed settings of the Cartesian impedance controller (gains are chosen by profile via set_gains)."""
    cube_start: str = "zone"
    """Cube-relocate scenes only: where reset_scene puts the cube. "zone": in the task's start zone
    (RELOCATE_START_XY); "tray": anywhere on the tray floor outside the target zone (RELOCATE_TRAY_XY), e.g. demos
    from the scenes a reset-free run leaves behind."""

    def validate(self) -> None:
        require(self.task in TWIN_TASKS, "task", self.task, f"must be one of {list(TWIN_TASKS)}")
        require(isinstance(self.physics_hz, int | float) and math.isfinite(self.physics_hz)
                and 250.0 <= self.physics_hz <= 10_000.0, "physics_hz", self.physics_hz,
                "must be a finite number in [250, 10000] Hz (the 1 kHz-class impedance loop needs it)")
        require(len(self.home_q_rad) == 7, "home_q_rad", self.home_q_rad, "must have 7 entries")
        q = np.asarray(self.home_q_rad, dtype=np.float64)
        require(bool(np.all(np.isfinite(q))) and bool(np.all(q >= PANDA_Q_MIN)) and bool(np.all(q <= PANDA_Q_MAX)),
                "home_q_rad", self.home_q_rad, "must be finite and within the joint limits")
        for name in ("image_height", "image_width"):
            v = getattr(self, name)
            require(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 4096, name, v,
                    "must be an int in [1, 4096]")
        require(len(self.camera_names) > 0 and len(set(self.camera_names)) == len(self.camera_names)
                and all(n in CAMERA_NAMES for n in self.camera_names), "camera_names", self.camera_names,
                f"must be distinct names from {list(CAMERA_NAMES)}")
        require(isinstance(self.render, bool), "render", self.render, "must be a bool")
        require(self.cube_start in ("zone", "tray"), "cube_start", self.cube_start, 'must be "zone" or "tray"')
        require(self.cube_start == "zone" or self.task in RELOCATE_START_XY, "cube_start", self.cube_start,
                f"'tray' is for the cube-relocate scenes {sorted(RELOCATE_START_XY)}, not {self.task!r}")
        require(isinstance(self.impedance, ImpedanceConfig) and self.impedance.n_joints == 7, "impedance",
                self.impedance, "must be an ImpedanceConfig with n_joints=7")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Config.from_dict, with the nested `impedance` dict turned back into an ImpedanceConfig."""
        data = dict(data)
        if isinstance(data.get("impedance"), dict):
            data["impedance"] = ImpedanceConfig.from_dict(data["impedance"])
        return super().from_dict(data)


class TwinRobot:
    """The MuJoCo twin of a Franka-Panda-like arm with a parallel gripper (implements envs.robot.Robot)."""

    def __init__(self, config: TwinRobotConfig | None = None) -> None:
        config = TwinRobotConfig() if config is None else config
        config.validate()
        self._config = config
        m = self._model = build_model(config.task, config.image_height, config.image_width)
        m.opt.timestep = 1.0 / config.physics_hz
        d = self._data = mujoco.MjData(m)
        self._dt = float(m.opt.timestep)

        # addresses; the arm's 7 joints and the two fingers are contiguous in qpos/qvel (checked)
        arm_q = [m.jnt_qposadr[m.joint(j).id] for j in ARM_JOINTS]
        arm_v = [m.jnt_dofadr[m.joint(j).id] for j in ARM_JOINTS]
        fq = [m.jnt_qposadr[m.joint(j).id] for j in FINGER_JOINTS]
        fv = [m.jnt_dofadr[m.joint(j).id] for j in FINGER_JOINTS]
        for name, adr in (("arm qpos", arm_q), ("arm qvel", arm_v), ("finger qpos", fq), ("finger qvel", fv)):
            if list(adr) != list(range(adr[0], adr[0] + len(adr))):
                raise RuntimeError(f"twin model: {name} addresses are not contiguous: {adr}")
        a0, v0 = arm_q[0], arm_v[0]
        self._q = d.qpos[a0:a0 + 7]
        self._dq = d.qvel[v0:v0 + 7]
        self._bias = d.qfrc_bias[v0:v0 + 7]
        self._finger_q = d.qpos[fq[0]:fq[0] + 2]
        self._finger_dq = d.qvel[fv[0]:fv[0] + 2]
        arm_act = [m.actuator(f"motor{i}").id for i in range(1, 8)]
        if arm_act != list(range(arm_act[0], arm_act[0] + 7)):
            raise RuntimeError(f"twin model: arm actuators are not contiguous: {arm_act}")
        self._ctrl_arm = d.ctrl[arm_act[0]:arm_act[0] + 7]
        self._gripper_act = m.actuator(GRIPPER_ACTUATOR).id
        self._gripper_act_adr = int(m.actuator_actadr[self._gripper_act])  # its low-pass filter state
        self._tcp_id = m.site(TCP_SITE).id
        self._tcp_pos = d.site_xpos[self._tcp_id]
        self._tcp_mat = d.site_xmat[self._tcp_id]
        self._ft_id = m.site(FT_SITE).id
        self._hand_id = m.body(HAND_BODY).id
        self._ft_force_adr = int(m.sensor_adr[m.sensor("ft_force").id])
        self._ft_torque_adr = int(m.sensor_adr[m.sensor("ft_torque").id])
        self._jac = np.zeros((6, m.nv))
        self._jacp = self._jac[:3]
        self._jacr = self._jac[3:]
        self._jac_arm = self._jac[:, v0:v0 + 7]
        self._quat = np.zeros(4)
        self._twist_buf = np.zeros(6)
        self._tau = np.zeros(7)
        self._torque_low = m.actuator_ctrlrange[arm_act[0]:arm_act[0] + 7, 0].copy()
        self._torque_high = m.actuator_ctrlrange[arm_act[0]:arm_act[0] + 7, 1].copy()
        self._task_ids = self._lookup_task_ids()

        self._controller = CartesianImpedanceController(config.impedance, gain_profile("compliance"))
        self._gains_profile = "compliance"
        self._gripper_cmd = 0.0
        self._error = ""
        self._stopped = False
        self._cameras: TwinCameras | None = None
        self._warnings_seen = 0

        self._finger_q[:] = GRIPPER_MAX_WIDTH_M / 2
        self._set_gripper(0.0, immediate=True)
        self.reset_joints(np.asarray(config.home_q_rad))

    # ------------------------------------------------------------------------------------------------------
    # properties

    @property
    def model(self) -> mujoco.MjModel:
        return self._model

    @property
    def data(self) -> mujoco.MjData:
        return self._data

    @property
    def physics_hz(self) -> float:
        return self._config.physics_hz

    @property
    def arm(self) -> str:
        """The arm model whose joint limits apply (controllers.arms): the twin's arm is a Panda."""
        return "panda"

    @property
    def config(self) -> TwinRobotConfig:
        return self._config

    @property
    def controller(self) -> CartesianImpedanceController:
        """The impedance controller (read its filtered target, gains, last pose error)."""
        return self._controller

    # ------------------------------------------------------------------------------------------------------
    # the Robot protocol

    def state(self) -> RobotState:
        """A snapshot of the arm (copies) and the task's objects."""
        m, d = self._model, self._data
        R = self._tcp_mat.reshape(3, 3)
        mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_SITE, self._tcp_id, self._twist_buf, 1)
        force, torque = self._external_wrench()
        return RobotState(
            time_s=float(d.time),
            q_rad=self._q.copy(),
            dq_rad_per_s=self._dq.copy(),
            pos_base_ee=self._tcp_pos.copy(),
            quat_base_ee=mat_to_quat(R),
            twist_ee_body=np.concatenate([self._twist_buf[3:], self._twist_buf[:3]]),
            gripper_width_m=float(self._finger_q[0] + self._finger_q[1]),
            force_ee_n=force,
            torque_ee_nm=torque,
            tau_j_nm=self._tau.copy(),
            objects=self._objects(),
            error=self._error,
        )

    def command(self, pos_base_target: np.ndarray, quat_base_target: np.ndarray, gripper_closed: float) -> None:
        """New impedance target (3,) + (4,) wxyz and gripper command in [0, 1] (0 open, 1 closed; values in
        between set the width proportionally). SafetyError (target unchanged) on NaN/inf or bad shapes;
        RobotError after stop() or while an error is pending."""
        if self._stopped:
            raise RobotError("TwinRobot is stopped: commands are refused")
        if self._error:
            raise RobotError(f"TwinRobot is in an error state ({self._error}); call clear_errors()")
        pos, quat, g = check_command(pos_base_target, quat_base_target, gripper_closed)
        self._controller.set_target(pos, quat)
        self._set_gripper(g)

    def wait(self, duration_s: float) -> None:
        """Simulate `duration_s` seconds: round(duration_s * physics_hz) physics steps, one controller tick
        each."""
        duration_s = check_duration(duration_s)
        self._simulate(round(duration_s * self._config.physics_hz))

    def set_gains(self, profile: str) -> None:
        """Switch to a named gain profile ("compliance", "precision"); the gains follow through the
        controller's low-pass filter. ConfigError for an unknown name."""
        self._controller.set_gains(gain_profile(profile))
        self._gains_profile = profile

    def reset_joints(self, q_rad: np.ndarray) -> None:
        """Teleport the arm to q (7,) with zero velocity and hold that pose (the controller's target := the new
        TCP pose). For "peg_insert" the peg is put back between the closed fingers."""
        q = check_joint_target(q_rad)
        self._q[:] = q
        self._dq[:] = 0.0
        self._finger_dq[:] = 0.0
        if self._config.task == "peg_insert":
            self._seat_peg()
        self._after_teleport()

    def reset_scene(self, seed: int | None = None) -> None:
        """Randomise the task's objects with np.random.default_rng(seed) (ranges in envs.twin.model). For
        "peg_insert" the peg is also put between the fingers and the gripper commanded closed."""
        rng = np.random.default_rng(seed)
        d, ids = self._data, self._task_ids
        task = self._config.task
        if task == "reach":
            d.mocap_pos[ids["goal_mocap"]] = rng.uniform(GOAL_LOW, GOAL_HIGH)
        elif task in CUBE_TASKS:
            low, high = RELOCATE_START_XY.get(task, (CUBE_XY_LOW, CUBE_XY_HIGH))
            xy = rng.uniform(low, high)
            if self._config.cube_start == "tray":  # anywhere on the tray floor but in the target zone
                relocate = get_task(task)
                assert isinstance(relocate, CubeRelocateTask)  # validate: "tray" only for the relocate scenes
                target = relocate_zone_m(relocate.target_zone)
                xy = rng.uniform(*RELOCATE_TRAY_XY)
                while in_zone(xy, target):
                    xy = rng.uniform(*RELOCATE_TRAY_XY)
            yaw = rng.uniform(-math.pi, math.pi)
            qa, va = ids["cube_qpos"], ids["cube_qvel"]
            d.qpos[qa:qa + 7] = [xy[0], xy[1], CUBE_HALF_SIZE_M, math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]
            d.qvel[va:va + 6] = 0.0
        elif task == "peg_insert":
            xy = rng.uniform(FIXTURE_XY_LOW, FIXTURE_XY_HIGH)
            d.mocap_pos[ids["fixture_mocap"]] = [xy[0], xy[1], 0.0]
            self._seat_peg()
        self._after_teleport(reset_controller=False)

    def clear_errors(self) -> None:
        """Clear the error state (e.g. after the simulation diverged and was re-homed)."""
        self._error = ""

    def stop(self) -> None:
        """Hold the current pose, close the cameras; further commands raise RobotError."""
        if not self._stopped:
            self._controller.set_target(self._tcp_pos.copy(), mat_to_quat(self._tcp_mat.reshape(3, 3)))
        self._stopped = True
        if self._cameras is not None:
            self._cameras.close()
            self._cameras = None

    # ------------------------------------------------------------------------------------------------------
    # twin extras

    def cameras(self) -> TwinCameras:
        """The cameras (created on first use, one renderer shared by all cameras). ConfigError when the
        config says render=False, RobotError after stop()."""
        if not self._config.render:
            raise ConfigError("TwinRobotConfig.render is False: this TwinRobot has no cameras "
                              "(construct it with render=True to get images)")
        if self._stopped:
            raise RobotError("TwinRobot is stopped: its cameras are closed")
        if self._cameras is None:
            self._cameras = TwinCameras(self._model, self._data, self._config.camera_names,
                                        self._config.image_height, self._config.image_width)
        return self._cameras

    @property
    def gains_profile(self) -> str:
        """The last profile passed to set_gains."""
        return self._gains_profile

    def __enter__(self) -> TwinRobot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------------------------------------------
    # internals

    def _simulate(self, n_steps: int) -> None:
        """The inner loop. Invariant between calls: mj_step1 has run for the current qpos/qvel, so the
        kinematics, Jacobians and bias forces are those of the current state (state() and the renderer read
        them). Each step: controller tick -> mj_step2 (actuation, constraints, integration) -> mj_step1."""
        m, d = self._model, self._data
        torque = self._controller.torque
        step1, step2, jac_site, mat2quat = mujoco.mj_step1, mujoco.mj_step2, mujoco.mj_jacSite, mujoco.mju_mat2Quat
        q, dq, bias, ctrl = self._q, self._dq, self._bias, self._ctrl_arm
        jacp, jacr, jac_arm, tcp = self._jacp, self._jacr, self._jac_arm, self._tcp_id
        pos, mat, quat, dt = self._tcp_pos, self._tcp_mat, self._quat, self._dt
        tau = self._tau
        t_start = d.time
        try:
            for _ in range(n_steps):
                jac_site(m, d, jacp, jacr, tcp)
                mat2quat(quat, mat)
                tau = torque(q, dq, jac_arm, pos, quat, bias, dt)
                ctrl[:] = tau
                step2(m, d)
                step1(m, d)
        except SafetyError:  # a non-finite state that MuJoCo's own checks did not catch: reset like MuJoCo
            mujoco.mj_resetData(m, d)
            mujoco.mj_forward(m, d)
        self._tau = tau
        self._check_divergence(t_start)

    def _after_teleport(self, reset_controller: bool = True) -> None:
        """Recompute everything for a teleported state (mj_forward: kinematics, contacts, sensors) and, for an
        arm teleport, make the controller hold the new TCP pose."""
        m, d = self._model, self._data
        mujoco.mj_forward(m, d)
        if reset_controller:
            self._controller.reset(self._tcp_pos.copy(), mat_to_quat(self._tcp_mat.reshape(3, 3)))
            # a held pose: the controller's first tick will command the bias torque (its error is zero), so
            # apply it now, so that the sensors of this snapshot see a held arm and not a falling one
            self._tau = np.clip(self._bias, self._torque_low, self._torque_high)
            self._ctrl_arm[:] = self._tau
            mujoco.mj_forward(m, d)

    def _set_gripper(self, closed: float, immediate: bool = False) -> None:
        """Gripper width target := (1 - closed) * max width. The servo follows the target through a 0.1 s
        low-pass (the actuator's filter state); `immediate` sets that state too (for teleports)."""
        c = min(max(closed, 0.0), 1.0)
        self._gripper_cmd = c
        width = GRIPPER_MAX_WIDTH_M * (1.0 - c)
        self._data.ctrl[self._gripper_act] = width
        if immediate:
            self._data.act[self._gripper_act_adr] = width

    def _seat_peg(self) -> None:
        """Put the peg between the fingers: axis along the TCP's z (pointing back at the hand), bottom face
        PEG_BOTTOM_PAST_TCP_M past the TCP, fingers just touching it, gripper commanded closed."""
        m, d, ids = self._model, self._data, self._task_ids
        mujoco.mj_kinematics(m, d)  # the TCP pose of the (possibly just teleported) arm
        R = self._tcp_mat.reshape(3, 3)
        bottom = self._tcp_pos + PEG_BOTTOM_PAST_TCP_M * R[:, 2]
        quat_tcp = mat_to_quat(R)
        flip = np.zeros(4)
        mujoco.mju_mulQuat(flip, quat_tcp, np.array([0.0, 1.0, 0.0, 0.0]))  # peg z = -TCP z
        qa, va = ids["peg_qpos"], ids["peg_qvel"]
        d.qpos[qa:qa + 3] = bottom
        d.qpos[qa + 3:qa + 7] = flip
        d.qvel[va:va + 6] = 0.0
        self._finger_q[:] = PEG_HALF_WIDTH_M - _GRASP_SQUEEZE_M
        self._finger_dq[:] = 0.0
        self._set_gripper(1.0, immediate=True)

    def _external_wrench(self) -> tuple[np.ndarray, np.ndarray]:
        """(force (3,), torque (3,)) applied by the environment on the hand, TCP frame, torque about the TCP
        (module docstring): minus the sensor's parent-on-child wrench, minus the hand subtree's weight."""
        m, d = self._model, self._data
        R = d.site_xmat[self._ft_id].reshape(3, 3)
        p = d.site_xpos[self._ft_id]
        f_sensor = d.sensordata[self._ft_force_adr:self._ft_force_adr + 3]
        t_sensor = d.sensordata[self._ft_torque_adr:self._ft_torque_adr + 3]
        weight = m.body_subtreemass[self._hand_id] * m.opt.gravity  # world frame
        lever = d.subtree_com[self._hand_id] - p
        force = -f_sensor - R.T @ weight
        lx, ly, lz = float(lever[0]), float(lever[1]), float(lever[2])
        wx, wy, wz = float(weight[0]), float(weight[1]), float(weight[2])  # np.cross's products, without its cost
        torque = -t_sensor - R.T @ np.array([ly * wz - lz * wy, lz * wx - lx * wz, lx * wy - ly * wx])
        return force, torque

    def _lookup_task_ids(self) -> dict[str, int]:
        m, task = self._model, self._config.task
        ids: dict[str, int] = {}
        if task == "reach":
            ids["goal_mocap"] = int(m.body_mocapid[m.body("goal").id])
        elif task in CUBE_TASKS:
            j = m.joint("cube_joint").id
            ids["cube_qpos"], ids["cube_qvel"] = int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])
        elif task == "peg_insert":
            j = m.joint("peg_joint").id
            ids["peg_qpos"], ids["peg_qvel"] = int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])
            ids["fixture_mocap"] = int(m.body_mocapid[m.body("fixture").id])
        return ids

    def _objects(self) -> dict[str, np.ndarray]:
        d, ids, task = self._data, self._task_ids, self._config.task
        if task == "reach":
            return {"goal_pos": d.mocap_pos[ids["goal_mocap"]].copy()}
        if task in CUBE_TASKS:
            qa = ids["cube_qpos"]
            return {"cube_pos": d.qpos[qa:qa + 3].copy(), "cube_quat": d.qpos[qa + 3:qa + 7].copy()}
        qa = ids["peg_qpos"]
        return {"peg_pos": d.qpos[qa:qa + 3].copy(), "peg_quat": d.qpos[qa + 3:qa + 7].copy(),
                "hole_pos": d.mocap_pos[ids["fixture_mocap"]].copy()}

    def _check_divergence(self, t_start: float) -> None:
        """MuJoCo resets the data (time included) when the simulation blows up (bad qacc / qpos / qvel). Then
        re-home the arm (objects are back at their XML poses) and raise the error flag until clear_errors()."""
        d = self._data
        n = sum(int(d.warning[w].number) for w in (mujoco.mjtWarning.mjWARN_BADQACC,
                                                    mujoco.mjtWarning.mjWARN_BADQPOS,
                                                    mujoco.mjtWarning.mjWARN_BADQVEL))
        if n != self._warnings_seen or d.time < t_start:
            self._warnings_seen = n
            self._error = f"simulation diverged (MuJoCo reset the data, t={d.time:.3f}s); arm re-homed"
            self._set_gripper(self._gripper_cmd, immediate=True)  # the reset zeroed ctrl and the filter state
            self.reset_joints(np.asarray(self._config.home_q_rad))
