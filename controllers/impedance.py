"""Cartesian impedance control with reference limiting (SERL's controller, ../shared/REFERENCE.md).

The law, per control tick (500-1000 Hz):

    e    = [p - p_t ; rotvec(R R_t^T)]              pose error in the base frame, clipped per axis
    F    = -K e - D (J dq) - f_i                     f_i = saturated integral of K_i e dt (anti-windup)
    t0   = k_ns (q_ns - q) - 2 sqrt(k_ns) dq         joint-space spring toward q_nullspace
    tau  = J^T F + (I - J^T Jpinv^T) t0 + bias       Jpinv = J^T (J J^T + lambda^2 I)^-1

J is the 6xN geometric Jacobian of the TCP in the base frame, rows [linear; angular]. `bias` is what the robot
needs on top (coriolis; the twin passes MuJoCo's qfrc_bias = coriolis + gravity, standing in for Franka's
internal gravity compensation).

What `CartesianImpedanceController.torque` adds around the law, in this order, each tick:
1. the target pose and the gains move toward the commanded ones with a first-order low-pass of time constant
   `filter_time_constant_s` (position lerp, orientation slerp, every gain field including the clips):
   x += (1 - exp(-dt / T)) (x_cmd - x), exact for any dt; T = 0 disables the filter;
2. the integral wrench f_i += K_i e dt, clipped per axis to the gains' integral limits; it is zeroed when a
   new target arrives (`set_target` with a target that differs from the last commanded one by more than
   new_target_epsilon_m / new_target_epsilon_rad);
3. the torque-rate limit: the controller's own torque (task + nullspace, bias excluded) changes by at most
   max_torque_rate_nm_per_s * dt per joint per tick. The bias passes through unlimited, as Franka's internal
   gravity compensation would (so a reset does not make the arm sag while the torque ramps up);
4. saturation of the total torque (controller + bias) to +-torque_limit_nm. The rate limiter remembers the
   torque actually applied (total - bias), so saturation never winds it up.

Everything numeric runs in one numba-compiled call (`controllers._kernels.tick`): ~4 us per `torque()` from
Python on the development machine, most of it numba's argument dispatch (benchmarks/controller_speed.py). The
class only holds the state vector. `impedance_torque` is the stateless law (steps above excluded) for tests and tools;
`impedance_torque_numpy` is the same law written plainly in numpy, the readable reference the tests compare
the compiled kernel against.

Usage::

    ctrl = CartesianImpedanceController(ImpedanceConfig(), gain_profile("compliance"))
    ctrl.reset(pos_ee, quat_ee)                    # target := current pose
    ctrl.set_target(pos_ee + [0, 0, 0.02], quat_ee)
    for _ in range(substeps):                      # e.g. 1 kHz inside a 10 Hz env step
        tau = ctrl.torque(q, dq, J, pos_ee, quat_ee, qfrc_bias, 1e-3)
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from controllers import _kernels as _k
from controllers.gains import ImpedanceGains
from controllers.kinematics import PANDA_HOME_Q, PANDA_TORQUE_LIMITS_NM
from controllers.safety import check_finite
from controllers.transforms import orientation_error, quat_normalize
from robot_rl.config import Config, require, require_finite
from robot_rl.errors import SafetyError, ShapeError


@dataclasses.dataclass(frozen=True)
class ImpedanceConfig(Config):
    """Fixed settings of the impedance controller (the tunable gains are `ImpedanceGains`)."""

    n_joints: int = 7
    """Number of joints N (the Jacobian is 6 x N)."""
    torque_limit_nm: tuple[float, ...] = PANDA_TORQUE_LIMITS_NM
    """Per-joint saturation of the total torque (Nm); Franka: 87 x 4, 12 x 3."""
    max_torque_rate_nm_per_s: float = 1000.0
    """Max change of the controller torque per second (1 Nm per 1 ms tick); math.inf disables."""
    filter_time_constant_s: float = 0.2
    """Time constant of the target and gain low-pass (s); 0 disables filtering."""
    jacobian_damping: float = 1e-3
    """lambda of the damped pseudo-inverse used by the nullspace projector (> 0)."""
    new_target_epsilon_m: float = 1e-6
    """A commanded target farther than this (per axis, m) from the previous one resets the integrator."""
    new_target_epsilon_rad: float = 1e-6
    """... or rotated by more than this angle (rad) from the previous one."""
    q_nullspace: tuple[float, ...] = PANDA_HOME_Q
    """Joint configuration the nullspace spring pulls toward (rad)."""

    def validate(self) -> None:
        require(isinstance(self.n_joints, int) and self.n_joints >= 1, "n_joints", self.n_joints, "must be >= 1")
        require(len(self.torque_limit_nm) == self.n_joints, "torque_limit_nm", self.torque_limit_nm,
                f"must have n_joints={self.n_joints} entries")
        require_finite("torque_limit_nm", self.torque_limit_nm)
        require(all(v > 0 for v in self.torque_limit_nm), "torque_limit_nm", self.torque_limit_nm, "must be > 0")
        require(self.max_torque_rate_nm_per_s > 0, "max_torque_rate_nm_per_s", self.max_torque_rate_nm_per_s,
                "must be > 0 (math.inf disables the limit)")
        require(math.isfinite(self.filter_time_constant_s) and self.filter_time_constant_s >= 0,
                "filter_time_constant_s", self.filter_time_constant_s, "must be finite and >= 0")
        require(math.isfinite(self.jacobian_damping) and self.jacobian_damping > 0, "jacobian_damping",
                self.jacobian_damping, "must be finite and > 0")
        for name in ("new_target_epsilon_m", "new_target_epsilon_rad"):
            v = getattr(self, name)
            require(math.isfinite(v) and v >= 0, name, v, "must be finite and >= 0")
        require(len(self.q_nullspace) == self.n_joints, "q_nullspace", self.q_nullspace,
                f"must have n_joints={self.n_joints} entries")
        require_finite("q_nullspace", self.q_nullspace)


def _vec(name: str, value: object, n: int) -> np.ndarray:
    """float64 (n,) copy of `value`; SafetyError naming the field on a bad shape or NaN/inf."""
    return check_finite(name, value, (n,))


def _unit_quat(name: str, value: object) -> np.ndarray:
    arr = _vec(name, value, 4)
    norm = float(np.linalg.norm(arr))
    if norm < 1e-6:
        raise SafetyError(f"{name}: zero quaternion {arr}")
    return arr / norm


def _raise_for(code: int) -> None:
    if code >= _k.CODE_BAD_SHAPE:
        raise ShapeError(f"{_k.BAD_VALUE_FIELDS[code - _k.CODE_BAD_SHAPE]}: wrong shape")
    field = _k.BAD_VALUE_FIELDS[code - _k.CODE_BAD_VALUE]
    what = "must be finite and > 0" if field == "dt_s" else "contains NaN/inf (or is a zero quaternion)"
    raise SafetyError(f"{field}: {what}")


def _coerce(arrays: tuple[object, ...]) -> tuple[np.ndarray, ...]:
    """float64 arrays with the dimensions the kernel is compiled for (the slow path for lists, float32...)."""
    out = []
    for name, value, ndim in zip(("q", "dq", "jacobian_base", "pos_base_ee", "quat_base_ee", "bias_nm"), arrays,
                                 (1, 1, 2, 1, 1, 1), strict=True):
        arr = np.asarray(value, dtype=np.float64)
        if arr.ndim != ndim:
            raise ShapeError(f"{name}: expected a {ndim}-D array, got shape {arr.shape}")
        out.append(arr)
    return tuple(out)


class CartesianImpedanceController:
    """The stateful controller: filters, integrator and rate limiter around the law (module docstring)."""

    def __init__(self, config: ImpedanceConfig, gains: ImpedanceGains) -> None:
        config.validate()
        gains.validate()
        self._config = config
        n = self._n = config.n_joints
        s = self._state = np.zeros(_k.state_size(n))
        self._tgt_pos = s[_k.S_TGT_POS:_k.S_TGT_POS + 3]
        self._tgt_quat = s[_k.S_TGT_QUAT:_k.S_TGT_QUAT + 4]
        self._cmd_pos = s[_k.S_CMD_POS:_k.S_CMD_POS + 3]
        self._cmd_quat = s[_k.S_CMD_QUAT:_k.S_CMD_QUAT + 4]
        self._gains_f = s[_k.S_GAINS:_k.S_GAINS + _k.NG]
        self._gains_cmd = s[_k.S_GAINS_CMD:_k.S_GAINS_CMD + _k.NG]
        self._integral = s[_k.S_INTEGRAL:_k.S_INTEGRAL + 6]
        self._err = s[_k.S_ERR:_k.S_ERR + 6]
        self._tau_last = s[_k.S_JOINTS:_k.S_JOINTS + n]
        s[_k.S_RATE] = config.max_torque_rate_nm_per_s
        s[_k.S_FILTER_TAU] = config.filter_time_constant_s
        s[_k.S_LAMBDA] = config.jacobian_damping
        s[_k.S_JOINTS + n:_k.S_JOINTS + 2 * n] = config.q_nullspace
        s[_k.S_JOINTS + 2 * n:_k.S_JOINTS + 3 * n] = config.torque_limit_nm
        self._gains_f[:] = self._gains_cmd[:] = gains.as_vector()
        self._tgt_quat[0] = self._cmd_quat[0] = 1.0
        self._has_target = False
        self._tick = _k.compiled("tick")
        # numba checks dtypes and dimensions at dispatch; the plain-Python fallback needs converted inputs
        self._jitted = hasattr(self._tick, "signatures")

    @property
    def config(self) -> ImpedanceConfig:
        return self._config

    def reset(self, pos_base_ee: npt.ArrayLike, quat_base_ee: npt.ArrayLike,
              tau_initial: npt.ArrayLike | None = None) -> None:
        """Target (filtered and commanded) := the given current TCP pose; integrator, last pose error and the
        rate limiter's last torque := 0 (or `tau_initial`: the controller torque, bias excluded, last applied).
        The gains and their filter are left as they are."""
        pos = _vec("pos_base_ee", pos_base_ee, 3)
        quat = _unit_quat("quat_base_ee", quat_base_ee)
        tau0 = np.zeros(self._n) if tau_initial is None else _vec("tau_initial", tau_initial, self._n)
        self._tgt_pos[:] = self._cmd_pos[:] = pos
        self._tgt_quat[:] = self._cmd_quat[:] = quat
        self._integral[:] = 0.0
        self._err[:] = 0.0
        self._tau_last[:] = tau0
        self._has_target = True

    def set_target(self, pos_base_target: npt.ArrayLike, quat_base_target: npt.ArrayLike) -> None:
        """Command a new target pose (reached through the low-pass filter). Raises SafetyError on NaN/inf or a
        bad shape. A target that moved (beyond the config's epsilons) resets the integrator."""
        pos = _vec("pos_base_target", pos_base_target, 3)
        quat = _unit_quat("quat_base_target", quat_base_target)
        if not self._has_target:
            raise SafetyError("set_target before reset: call reset(pos, quat) with the current pose first")
        cfg = self._config
        moved = float(np.max(np.abs(pos - self._cmd_pos))) > cfg.new_target_epsilon_m
        turned = float(np.linalg.norm(orientation_error(quat, self._cmd_quat))) > cfg.new_target_epsilon_rad
        if moved or turned:
            self._integral[:] = 0.0
        self._cmd_pos[:] = pos
        self._cmd_quat[:] = quat

    def set_gains(self, gains: ImpedanceGains) -> None:
        """Command new gains; the effective gains follow through the low-pass filter."""
        gains.validate()
        self._gains_cmd[:] = gains.as_vector()

    def torque(self, q: npt.ArrayLike, dq: npt.ArrayLike, jacobian_base: npt.ArrayLike, pos_base_ee: npt.ArrayLike,
               quat_base_ee: npt.ArrayLike, bias_nm: npt.ArrayLike, dt_s: float) -> np.ndarray:
        """One control tick: the total joint torque (n,) to apply, bias included. Advances the filters, the
        integrator and the rate limiter by dt_s. Raises SafetyError on NaN/inf inputs or dt_s <= 0 (the state is
        then left untouched), ShapeError on wrong shapes."""
        if not self._has_target:
            raise SafetyError("torque before reset: call reset(pos, quat) with the current pose first")
        args: tuple[Any, ...] = (q, dq, jacobian_base, pos_base_ee, quat_base_ee, bias_nm)
        if not self._jitted:
            args = _coerce(args)
        try:
            code, tau = self._tick(self._state, *args, dt_s)
        except TypeError:  # numba: not float64 arrays (lists, float32, ...); convert and retry
            code, tau = self._tick(self._state, *_coerce(args), float(dt_s))
        if code:
            _raise_for(code)
        return tau

    @property
    def target_pos(self) -> np.ndarray:
        """Filtered target position (3,)."""
        return self._tgt_pos.copy()

    @property
    def target_quat(self) -> np.ndarray:
        """Filtered target orientation (4,) wxyz."""
        return self._tgt_quat.copy()

    @property
    def commanded_pos(self) -> np.ndarray:
        return self._cmd_pos.copy()

    @property
    def commanded_quat(self) -> np.ndarray:
        return self._cmd_quat.copy()

    @property
    def gains(self) -> ImpedanceGains:
        """The filtered (currently effective) gains."""
        return ImpedanceGains.from_vector(self._gains_f)

    @property
    def commanded_gains(self) -> ImpedanceGains:
        return ImpedanceGains.from_vector(self._gains_cmd)

    @property
    def last_pose_error(self) -> np.ndarray:
        """The clipped pose error (6,) used by the last tick: [position (m); rotation vector (rad)]."""
        return self._err.copy()

    @property
    def integral_wrench(self) -> np.ndarray:
        """The integral term f_i (6,) [N; Nm] the last tick subtracted from the wrench."""
        return self._integral.copy()

    @property
    def last_controller_torque(self) -> np.ndarray:
        """The controller torque (task + nullspace, bias excluded) applied by the last tick (n,)."""
        return self._tau_last.copy()


def _law_inputs(q: object, dq: object, jacobian_base: object, gains: ImpedanceGains, integral_wrench: object,
                q_nullspace: object, bias_nm: object) -> tuple[np.ndarray, ...]:
    qa = np.asarray(q, dtype=np.float64)
    if qa.ndim != 1:
        raise ShapeError(f"q: expected a 1-D array, got shape {qa.shape}")
    n = qa.shape[0]
    J = np.asarray(jacobian_base, dtype=np.float64)
    if J.shape != (6, n):
        raise ShapeError(f"jacobian_base: expected shape (6, {n}), got {J.shape}")
    qns = np.asarray(PANDA_HOME_Q if q_nullspace is None else q_nullspace, dtype=np.float64)
    if qns.shape != (n,):
        raise ShapeError(f"q_nullspace: expected shape ({n},), got {qns.shape}")
    fi = np.zeros(6) if integral_wrench is None else np.asarray(integral_wrench, dtype=np.float64)
    bias = np.zeros(n) if bias_nm is None else np.asarray(bias_nm, dtype=np.float64)
    if bias.shape != (n,):
        raise ShapeError(f"bias_nm: expected shape ({n},), got {bias.shape}")
    return qa, np.asarray(dq, dtype=np.float64), J, gains.as_vector(), fi, qns, bias


def impedance_torque(q: npt.ArrayLike, dq: npt.ArrayLike, jacobian_base: npt.ArrayLike, pos_base_ee: npt.ArrayLike,
                     quat_base_ee: npt.ArrayLike, pos_base_target: npt.ArrayLike, quat_base_target: npt.ArrayLike,
                     gains: ImpedanceGains, integral_wrench: npt.ArrayLike | None = None,
                     q_nullspace: npt.ArrayLike | None = None, jacobian_damping: float = 1e-3,
                     bias_nm: npt.ArrayLike | None = None) -> np.ndarray:
    """The stateless law of one tick: J^T F + nullspace term + bias (module docstring), with the target and
    gains used as given (no filtering), `integral_wrench` (6,) [N; Nm] as the integral term f_i (default 0),
    no rate limit and no saturation. Runs the same compiled code as the controller. q_nullspace defaults to
    the Panda home pose."""
    qa, dqa, J, g, fi, qns, bias = _law_inputs(q, dq, jacobian_base, gains, integral_wrench, q_nullspace, bias_nm)
    code, tau, _ = _k.compiled("stateless_torque")(
        qa, dqa, J, np.asarray(pos_base_ee, dtype=np.float64), np.asarray(quat_base_ee, dtype=np.float64),
        np.asarray(pos_base_target, dtype=np.float64), np.asarray(quat_base_target, dtype=np.float64),
        g, fi, qns, float(jacobian_damping))
    if code:
        _raise_for(code)
    return tau + bias


def pose_error(pos_base_ee: npt.ArrayLike, quat_base_ee: npt.ArrayLike, pos_base_target: npt.ArrayLike,
               quat_base_target: npt.ArrayLike, translational_clip_m: float = math.inf,
               rotational_clip_rad: float = math.inf) -> np.ndarray:
    """[p - p_t; rotvec(R R_t^T)] (6,), each axis clipped to +-clip (no clipping by default)."""
    e = np.concatenate([np.asarray(pos_base_ee, dtype=np.float64) - np.asarray(pos_base_target, dtype=np.float64),
                        orientation_error(quat_base_ee, quat_base_target)])
    e[:3] = np.clip(e[:3], -translational_clip_m, translational_clip_m)
    e[3:] = np.clip(e[3:], -rotational_clip_rad, rotational_clip_rad)
    return e


def impedance_torque_numpy(q: npt.ArrayLike, dq: npt.ArrayLike, jacobian_base: npt.ArrayLike,
                           pos_base_ee: npt.ArrayLike, quat_base_ee: npt.ArrayLike,
                           pos_base_target: npt.ArrayLike, quat_base_target: npt.ArrayLike,
                           gains: ImpedanceGains, integral_wrench: npt.ArrayLike | None = None,
                           q_nullspace: npt.ArrayLike | None = None, jacobian_damping: float = 1e-3,
                           bias_nm: npt.ArrayLike | None = None) -> np.ndarray:
    """`impedance_torque` written plainly with numpy (explicit pseudo-inverse and projector): the reference."""
    qa, dqa, J, _, fi, qns, bias = _law_inputs(q, dq, jacobian_base, gains, integral_wrench, q_nullspace, bias_nm)
    e = pose_error(pos_base_ee, quat_normalize(quat_base_ee), pos_base_target, quat_normalize(quat_base_target),
                   gains.translational_clip_m, gains.rotational_clip_rad)
    K = np.diag([gains.translational_stiffness_n_per_m] * 3 + [gains.rotational_stiffness_nm_per_rad] * 3)
    D = np.diag([gains.translational_damping_ns_per_m] * 3 + [gains.rotational_damping_nms_per_rad] * 3)
    wrench = -K @ e - D @ (J @ dqa) - fi
    n = qa.shape[0]
    jpinv = J.T @ np.linalg.inv(J @ J.T + jacobian_damping**2 * np.eye(6))
    projector = np.eye(n) - J.T @ jpinv.T
    kns = gains.nullspace_stiffness
    tau_ns = projector @ (kns * (qns - qa) - 2.0 * math.sqrt(kns) * dqa)
    return J.T @ wrench + tau_ns + bias
