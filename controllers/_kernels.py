"""The numeric core: rotation helpers and the Cartesian impedance tick, in the subset of Python numba compiles.

This module imports no numba: every function here is plain Python on float64 arrays, used as-is by
`controllers.transforms` (pure numpy API) and compiled by `compiled()` for the 1 kHz loop. Keeping the helpers
and the kernels in one file matters for numba's on-disk cache, which is invalidated by the defining file only:
an edit to any helper here recompiles the kernels that inline it.

State layout of the controller (one float64 vector, see `state_size`):
  [S_TGT_POS:+3]  filtered target position      [S_TGT_QUAT:+4]  filtered target quaternion
  [S_CMD_POS:+3]  commanded target position     [S_CMD_QUAT:+4]  commanded target quaternion
  [S_GAINS:+NG]   filtered gains                [S_GAINS_CMD:+NG] commanded gains (ImpedanceGains order)
  [S_INTEGRAL:+6] integral wrench K_i int(e) dt [S_ERR:+6]       clipped pose error of the last tick
  [S_RATE] max torque rate (Nm/s)   [S_FILTER_TAU] filter time constant (s)   [S_LAMBDA] pinv damping
  [S_JOINTS + 0n:+n] last controller torque (bias excluded)  [+1n:+n] q_nullspace  [+2n:+n] torque limits
"""

from __future__ import annotations

import math
import types as pytypes
from collections.abc import Callable
from typing import Any

import numpy as np

_SMALL_ANGLE = 1e-8  # below this |v| (rad) the rotation-vector formulas use their Taylor series

# gains vector indices (declaration order of controllers.gains.ImpedanceGains)
G_KT, G_DT, G_KR, G_DR, G_KIT, G_KIR, G_ILIM_N, G_ILIM_NM, G_KNS, G_CLIP_T, G_CLIP_R = range(11)
NG = 11

S_TGT_POS = 0
S_TGT_QUAT = 3
S_CMD_POS = 7
S_CMD_QUAT = 10
S_GAINS = 14
S_GAINS_CMD = S_GAINS + NG
S_INTEGRAL = S_GAINS_CMD + NG
S_ERR = S_INTEGRAL + 6
S_RATE = S_ERR + 6
S_FILTER_TAU = S_RATE + 1
S_LAMBDA = S_FILTER_TAU + 1
S_JOINTS = S_LAMBDA + 1

# status codes of `tick` / `stateless_torque` (0 = ok); the Python wrapper turns them into exceptions
BAD_VALUE_FIELDS = ("q", "dq", "jacobian_base", "pos_base_ee", "quat_base_ee", "bias_nm", "dt_s",
                    "pos_base_target", "quat_base_target", "integral_wrench")
CODE_BAD_VALUE = 1  # + index into BAD_VALUE_FIELDS: NaN/inf (or zero quaternion, dt <= 0)
CODE_BAD_SHAPE = 100  # + index into BAD_VALUE_FIELDS


def state_size(n_joints: int) -> int:
    return S_JOINTS + 3 * n_joints


# ------------------------------------------------------------------------------------------------------------
# rotation helpers (w, x, y, z)


def quat_normalize(q: np.ndarray) -> np.ndarray:
    """q / |q|; NaNs for a zero or non-finite quaternion."""
    n = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    out = np.empty(4)
    if n == 0.0 or not math.isfinite(n):
        out[:] = math.nan
        return out
    for i in range(4):
        out[i] = q[i] / n
    return out


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty(4)
    out[0] = a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3]
    out[1] = a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2]
    out[2] = a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1]
    out[3] = a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0]
    return out


def quat_conj(q: np.ndarray) -> np.ndarray:
    out = np.empty(4)
    out[0] = q[0]
    out[1] = -q[1]
    out[2] = -q[2]
    out[3] = -q[3]
    return out


def quat_to_rotvec(q: np.ndarray) -> np.ndarray:
    """Rotation vector (angle in [0, pi]) of a unit quaternion of either sign."""
    w, x, y, z = q[0], q[1], q[2], q[3]
    if w < 0.0:
        w, x, y, z = -w, -x, -y, -z
    s = math.sqrt(x * x + y * y + z * z)
    if s < _SMALL_ANGLE:
        scale = 2.0 / w * (1.0 - s * s / (3.0 * w * w))  # 2 atan2(s, w) / s, Taylor
    else:
        scale = 2.0 * math.atan2(s, w) / s
    out = np.empty(3)
    out[0] = scale * x
    out[1] = scale * y
    out[2] = scale * z
    return out


def rotvec_to_quat(v: np.ndarray) -> np.ndarray:
    angle = math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
    half = 0.5 * angle
    if angle < _SMALL_ANGLE:
        k = 0.5 - angle * angle / 48.0  # sin(a/2) / a, Taylor
    else:
        k = math.sin(half) / angle
    out = np.empty(4)
    out[0] = math.cos(half)
    out[1] = k * v[0]
    out[2] = k * v[1]
    out[3] = k * v[2]
    return out


def orientation_error(q: np.ndarray, q_target: np.ndarray) -> np.ndarray:
    """rotvec(q * conj(q_target)) = log(R R_target^T) in the base frame, short way round."""
    return quat_to_rotvec(quat_mul(q, quat_conj(q_target)))


def quat_slerp(q0: np.ndarray, q1: np.ndarray, t: float) -> np.ndarray:
    """Spherical interpolation from unit q0 (t=0) to unit q1 (t=1) along the short arc; unit result."""
    dot = q0[0] * q1[0] + q0[1] * q1[1] + q0[2] * q1[2] + q0[3] * q1[3]
    sign = 1.0 if dot >= 0.0 else -1.0
    # angle between q0 and sign*q1 on the 4-sphere, stable for every angle (acos(dot) is not near 0)
    diff = 0.0
    summ = 0.0
    for i in range(4):
        diff += (q0[i] - sign * q1[i]) ** 2
        summ += (q0[i] + sign * q1[i]) ** 2
    theta = 2.0 * math.atan2(math.sqrt(diff), math.sqrt(summ))
    out = np.empty(4)
    if theta < 1e-6:  # normalised lerp: its deviation from the geodesic is O(theta^3) < 1e-18 rad; no 0/0
        for i in range(4):
            out[i] = (1.0 - t) * q0[i] + t * sign * q1[i]
        return quat_normalize(out)
    sin_theta = math.sin(theta)
    w0 = math.sin((1.0 - t) * theta) / sin_theta
    w1 = sign * math.sin(t * theta) / sin_theta
    for i in range(4):
        out[i] = w0 * q0[i] + w1 * q1[i]
    return quat_normalize(out)


def quat_to_mat(q: np.ndarray) -> np.ndarray:
    w, x, y, z = q[0], q[1], q[2], q[3]
    R = np.empty((3, 3))
    R[0, 0] = 1.0 - 2.0 * (y * y + z * z)
    R[0, 1] = 2.0 * (x * y - w * z)
    R[0, 2] = 2.0 * (x * z + w * y)
    R[1, 0] = 2.0 * (x * y + w * z)
    R[1, 1] = 1.0 - 2.0 * (x * x + z * z)
    R[1, 2] = 2.0 * (y * z - w * x)
    R[2, 0] = 2.0 * (x * z - w * y)
    R[2, 1] = 2.0 * (y * z + w * x)
    R[2, 2] = 1.0 - 2.0 * (x * x + y * y)
    return R


# ------------------------------------------------------------------------------------------------------------
# the impedance law


def _all_finite(a: np.ndarray) -> bool:
    for v in a.flat:
        if not math.isfinite(v):
            return False
    return True


def clipped_pose_error(pos: np.ndarray, quat: np.ndarray, tgt_pos: np.ndarray, tgt_quat: np.ndarray,
                       clip_t: float, clip_r: float, err: np.ndarray) -> None:
    """err[:] = [clip(p - p_target); clip(rotvec(R R_target^T))], per axis. Quaternions must be unit."""
    rot = orientation_error(quat, tgt_quat)
    for i in range(3):
        err[i] = min(max(pos[i] - tgt_pos[i], -clip_t), clip_t)
        err[3 + i] = min(max(rot[i], -clip_r), clip_r)


def _cholesky_solve_6(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x = A^-1 b for a 6x6 symmetric positive definite A (A is overwritten by its Cholesky factor)."""
    for j in range(6):
        s = A[j, j]
        for k in range(j):
            s -= A[j, k] * A[j, k]
        d = math.sqrt(s) if s > 1e-300 else 1e-150  # A = JJ^T + lambda^2 I is PD; guard roundoff only
        A[j, j] = d
        for i in range(j + 1, 6):
            s = A[i, j]
            for k in range(j):
                s -= A[i, k] * A[j, k]
            A[i, j] = s / d
    y = np.empty(6)
    for i in range(6):
        s = b[i]
        for k in range(i):
            s -= A[i, k] * y[k]
        y[i] = s / A[i, i]
    x = np.empty(6)
    for i in range(5, -1, -1):
        s = y[i]
        for k in range(i + 1, 6):
            s -= A[k, i] * x[k]
        x[i] = s / A[i, i]
    return x


def law_torque(q: np.ndarray, dq: np.ndarray, J: np.ndarray, err: np.ndarray, gains: np.ndarray,
               integral: np.ndarray, q_ns: np.ndarray, lam: float, tau: np.ndarray) -> None:
    """tau[:] = J^T (-K err - D J dq - integral) + (I - J^T Jpinv^T)(k_ns (q_ns - q) - 2 sqrt(k_ns) dq).

    Jpinv = J^T (J J^T + lam^2 I)^-1, so the projected term is t0 - J^T (J J^T + lam^2 I)^-1 J t0. No bias.
    """
    n = q.shape[0]
    kns = gains[G_KNS]
    dns = 2.0 * math.sqrt(kns)
    wrench = np.empty(6)
    jt0 = np.zeros(6)
    t0 = np.empty(n)
    for j in range(n):
        t0[j] = kns * (q_ns[j] - q[j]) - dns * dq[j]
    for i in range(6):
        v = 0.0
        for j in range(n):
            v += J[i, j] * dq[j]
            jt0[i] += J[i, j] * t0[j]
        if i < 3:
            wrench[i] = -gains[G_KT] * err[i] - gains[G_DT] * v - integral[i]
        else:
            wrench[i] = -gains[G_KR] * err[i] - gains[G_DR] * v - integral[i]
    A = np.empty((6, 6))
    lam2 = lam * lam
    for i in range(6):
        for k in range(i + 1):
            s = 0.0
            for j in range(n):
                s += J[i, j] * J[k, j]
            A[i, k] = s
            A[k, i] = s
        A[i, i] += lam2
    x = _cholesky_solve_6(A, jt0)
    for j in range(n):
        s = t0[j]
        for i in range(6):
            s += J[i, j] * (wrench[i] - x[i])
        tau[j] = s


def _check_inputs(q: np.ndarray, dq: np.ndarray, J: np.ndarray, pos: np.ndarray, quat: np.ndarray,
                  n: int) -> int:
    if q.shape[0] != n:
        return CODE_BAD_SHAPE + 0
    if dq.shape[0] != n:
        return CODE_BAD_SHAPE + 1
    if J.shape[0] != 6 or J.shape[1] != n:
        return CODE_BAD_SHAPE + 2
    if pos.shape[0] != 3:
        return CODE_BAD_SHAPE + 3
    if quat.shape[0] != 4:
        return CODE_BAD_SHAPE + 4
    if not _all_finite(q):
        return CODE_BAD_VALUE + 0
    if not _all_finite(dq):
        return CODE_BAD_VALUE + 1
    if not _all_finite(J):
        return CODE_BAD_VALUE + 2
    if not _all_finite(pos):
        return CODE_BAD_VALUE + 3
    if not _all_finite(quat) or quat[0] * quat[0] + quat[1] * quat[1] + quat[2] * quat[2] + quat[3] * quat[3] == 0:
        return CODE_BAD_VALUE + 4
    return 0


def stateless_torque(q: np.ndarray, dq: np.ndarray, J: np.ndarray, pos: np.ndarray, quat: np.ndarray,
                     tgt_pos: np.ndarray, tgt_quat: np.ndarray, gains: np.ndarray, integral: np.ndarray,
                     q_ns: np.ndarray, lam: float) -> tuple[int, np.ndarray, np.ndarray]:
    """(code, tau without bias, clipped error) for explicit target, gains and integral wrench."""
    n = q_ns.shape[0]
    tau = np.zeros(n)
    err = np.zeros(6)
    code = _check_inputs(q, dq, J, pos, quat, n)
    if code != 0:
        return code, tau, err
    if tgt_pos.shape[0] != 3:
        return CODE_BAD_SHAPE + 7, tau, err
    if tgt_quat.shape[0] != 4:
        return CODE_BAD_SHAPE + 8, tau, err
    if integral.shape[0] != 6:
        return CODE_BAD_SHAPE + 9, tau, err
    if not _all_finite(tgt_pos):
        return CODE_BAD_VALUE + 7, tau, err
    qt = quat_normalize(tgt_quat)
    if not _all_finite(qt):
        return CODE_BAD_VALUE + 8, tau, err
    if not _all_finite(integral):
        return CODE_BAD_VALUE + 9, tau, err
    clipped_pose_error(pos, quat_normalize(quat), tgt_pos, qt, gains[G_CLIP_T], gains[G_CLIP_R], err)
    law_torque(q, dq, J, err, gains, integral, q_ns, lam, tau)
    return 0, tau, err


def tick(state: np.ndarray, q: np.ndarray, dq: np.ndarray, J: np.ndarray, pos: np.ndarray, quat: np.ndarray,
         bias: np.ndarray, dt: float) -> tuple[int, np.ndarray]:
    """One control tick on `state` (layout in the module docstring): filters, error, integrator, law,
    torque-rate limit on the controller torque, saturation of the total. Returns (code, total torque)."""
    n = (state.shape[0] - S_JOINTS) // 3
    code = _check_inputs(q, dq, J, pos, quat, n)
    if code == 0 and bias.shape[0] != n:
        code = CODE_BAD_SHAPE + 5
    if code == 0 and not _all_finite(bias):
        code = CODE_BAD_VALUE + 5
    if code == 0 and not (dt > 0.0 and math.isfinite(dt)):
        code = CODE_BAD_VALUE + 6
    if code != 0:
        return code, np.zeros(n)

    # 1. first-order low-pass of target and gains toward the commanded ones: x += (1 - exp(-dt/T)) (x_cmd - x)
    ftau = state[S_FILTER_TAU]
    alpha = 1.0 - math.exp(-dt / ftau) if ftau > 0.0 else 1.0
    for i in range(3):
        state[S_TGT_POS + i] += alpha * (state[S_CMD_POS + i] - state[S_TGT_POS + i])
    qf = quat_slerp(state[S_TGT_QUAT:S_TGT_QUAT + 4], state[S_CMD_QUAT:S_CMD_QUAT + 4], alpha)
    state[S_TGT_QUAT:S_TGT_QUAT + 4] = qf
    for i in range(NG):
        state[S_GAINS + i] += alpha * (state[S_GAINS_CMD + i] - state[S_GAINS + i])
    gains = state[S_GAINS:S_GAINS + NG]

    # 2. clipped pose error and the saturated integral wrench (it integrates the clipped error)
    err = state[S_ERR:S_ERR + 6]
    clipped_pose_error(pos, quat_normalize(quat), state[S_TGT_POS:S_TGT_POS + 3], qf,
                       gains[G_CLIP_T], gains[G_CLIP_R], err)
    integral = state[S_INTEGRAL:S_INTEGRAL + 6]
    for i in range(6):
        if i < 3:
            ki, lim = gains[G_KIT], gains[G_ILIM_N]
        else:
            ki, lim = gains[G_KIR], gains[G_ILIM_NM]
        integral[i] = min(max(integral[i] + ki * err[i] * dt, -lim), lim)

    # 3. the law, then the rate limit on the controller's own torque and the saturation of the total
    tau = np.empty(n)
    law_torque(q, dq, J, err, gains, integral, state[S_JOINTS + n:S_JOINTS + 2 * n], state[S_LAMBDA], tau)
    max_step = state[S_RATE] * dt
    for j in range(n):
        last = state[S_JOINTS + j]
        limited = last + min(max(tau[j] - last, -max_step), max_step)
        lim = state[S_JOINTS + 2 * n + j]
        total = min(max(limited + bias[j], -lim), lim)
        state[S_JOINTS + j] = total - bias[j]
        tau[j] = total
    return 0, tau


_HELPERS = ("quat_normalize", "quat_mul", "quat_conj", "quat_to_rotvec", "orientation_error", "quat_slerp",
            "_all_finite", "clipped_pose_error", "_cholesky_solve_6", "law_torque", "_check_inputs")
_compiled: dict[str, Callable[..., Any]] = {}
_namespace: dict[str, Any] = {}


def compiled(name: str) -> Callable[..., Any]:
    """The kernel `name` ('tick' or 'stateless_torque') compiled with numba and cached on disk, or the plain
    Python function when numba is not installed or NUMBA_DISABLE_JIT=1. The first call per kernel compiles it:
    ~10 s once per machine, well under a second when loaded from numba's cache."""
    fn = _compiled.get(name)
    if fn is not None:
        return fn
    try:
        import numba
        from numba import types
    except ImportError:
        fn = _compiled[name] = globals()[name]
        return fn

    def clone(f: Callable[..., Any]) -> Any:
        return pytypes.FunctionType(f.__code__, _namespace, f.__name__, f.__defaults__, f.__closure__)

    if not _namespace:
        # Compile copies bound to a private namespace in which the helpers are dispatchers (numba resolves a
        # kernel's globals at compile time); this module's functions stay plain Python for the numpy API.
        _namespace.update(globals())
        for helper in _HELPERS:
            _namespace[helper] = numba.njit(clone(globals()[helper]))
    f8 = types.float64
    vec, mat = f8[:], f8[:, :]
    signatures = {
        "tick": types.Tuple((types.int64, f8[::1]))(f8[::1], vec, vec, mat, vec, vec, vec, f8),
        "stateless_torque": types.Tuple((types.int64, f8[::1], f8[::1]))(
            vec, vec, mat, vec, vec, vec, vec, vec, vec, vec, f8),
    }
    fn = _compiled[name] = numba.njit(signatures[name], cache=True)(clone(globals()[name]))
    return fn
