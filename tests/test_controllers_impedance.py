"""The Cartesian impedance law and controller: the compiled kernel against the numpy reference, the task /
nullspace structure, reference (error) clipping and the force bound it gives, the integrator, the torque-rate
limit, saturation, the low-pass filters, input guards, and a closed loop on the Panda kinematics."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controllers import _kernels
from controllers.gains import ImpedanceGains, gain_profile
from controllers.impedance import (
    CartesianImpedanceController,
    ImpedanceConfig,
    impedance_torque,
    impedance_torque_numpy,
)
from controllers.kinematics import (
    PANDA_HOME_Q,
    PANDA_Q_MAX,
    PANDA_Q_MIN,
    PANDA_TORQUE_LIMITS_NM,
    panda_fk,
    panda_jacobian,
)
from controllers.transforms import axis_angle_to_quat, mat_to_quat, orientation_error, quat_mul
from robot_rl.errors import SafetyError, ShapeError

HOME = np.array(PANDA_HOME_Q)
DT = 1e-3
# no stiffness/damping/nullspace: a base to switch single terms on
ZERO = ImpedanceGains(translational_stiffness_n_per_m=0.0, translational_damping_ns_per_m=0.0,
                      rotational_stiffness_nm_per_rad=0.0, rotational_damping_nms_per_rad=0.0,
                      nullspace_stiffness=0.0, translational_clip_m=0.5, rotational_clip_rad=math.pi)

joint_configs = st.tuples(*[st.floats(lo + 0.1, hi - 0.1) for lo, hi in zip(PANDA_Q_MIN, PANDA_Q_MAX,
                                                                              strict=True)]).map(np.array)
small = st.floats(-1.0, 1.0)
vec3 = st.tuples(small, small, small).map(np.array)
vec7 = st.tuples(*[small] * 7).map(np.array)


def ee_pose(q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pos, R = panda_fk(q)
    return pos, mat_to_quat(R), panda_jacobian(q)


def task_wrench(J: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """The Cartesian wrench F with J^T F = tau (least squares; exact when tau lies in the range of J^T)."""
    return np.linalg.solve(J @ J.T, J @ tau)


def make_controller(gains: ImpedanceGains | None = None, **config: object) -> CartesianImpedanceController:
    ctrl = CartesianImpedanceController(ImpedanceConfig(**config),  # type: ignore[arg-type]
                                        gains or gain_profile("compliance"))
    pos, quat, _ = ee_pose(HOME)
    ctrl.reset(pos, quat)
    return ctrl


# ------------------------------------------------------------------------------------------------------------
# the stateless law


@settings(max_examples=80, deadline=None)
@given(joint_configs, vec7, vec3, vec3, vec3, vec7, st.sampled_from(["compliance", "precision"]))
def test_compiled_law_matches_numpy_reference(q: np.ndarray, dq: np.ndarray, dpos: np.ndarray, drot: np.ndarray,
                                              integral: np.ndarray, bias: np.ndarray, profile: str) -> None:
    pos, quat, J = ee_pose(q)
    gains = gain_profile(profile)
    args = (q, dq, J, pos, quat, pos + 0.05 * dpos, quat_mul(axis_angle_to_quat(drot), quat), gains)
    fi = np.concatenate([integral, integral])
    np.testing.assert_allclose(impedance_torque(*args, integral_wrench=fi, bias_nm=10 * bias),
                               impedance_torque_numpy(*args, integral_wrench=fi, bias_nm=10 * bias), atol=1e-9)


def test_pure_stiffness_torque_is_jacobian_transpose_times_k_e() -> None:
    """dq = 0, no nullspace, no integral, error inside the clip: tau == J^T (-K e) exactly."""
    q = HOME + np.array([0.1, -0.2, 0.1, 0.2, -0.1, 0.1, 0.3])
    pos, quat, J = ee_pose(q)
    gains = ZERO.replace(translational_stiffness_n_per_m=2000.0, translational_damping_ns_per_m=89.0,
                         rotational_stiffness_nm_per_rad=150.0, rotational_damping_nms_per_rad=7.0)
    dp, dr = np.array([0.003, -0.02, 0.01]), np.array([0.02, -0.05, 0.1])
    target_quat = quat_mul(axis_angle_to_quat(-dr), quat)  # R = exp(dr) R_target: e_rot = dr
    tau = impedance_torque(q, np.zeros(7), J, pos, quat, pos - dp, target_quat, gains)
    K = np.diag([2000.0] * 3 + [150.0] * 3)
    np.testing.assert_allclose(tau, J.T @ (-K @ np.concatenate([dp, dr])), atol=1e-10)


def test_damping_uses_the_twist_j_dq_which_matches_finite_differences_of_fk() -> None:
    """With only damping, the task wrench is -D v where v is the finite-difference TCP twist."""
    q = HOME + np.array([0.3, 0.1, -0.2, 0.1, 0.2, -0.1, 0.0])
    dq = np.array([0.5, -0.3, 0.2, 0.4, -0.6, 0.3, 0.9])
    pos, quat, J = ee_pose(q)
    gains = ZERO.replace(translational_damping_ns_per_m=89.0, rotational_damping_nms_per_rad=7.0)
    tau = impedance_torque(q, dq, J, pos, quat, pos, quat, gains)
    h = 1e-6
    p1, R1 = panda_fk(q + h * dq)
    p0, R0 = panda_fk(q - h * dq)
    twist_fd = np.concatenate([(p1 - p0) / (2 * h), orientation_error(mat_to_quat(R1), mat_to_quat(R0)) / (2 * h)])
    D = np.diag([89.0] * 3 + [7.0] * 3)
    np.testing.assert_allclose(task_wrench(J, tau), -D @ twist_fd, atol=1e-5)


@pytest.mark.parametrize("q", [HOME, HOME + np.array([0.5, 0.3, -0.4, 0.6, 0.2, -0.3, 0.4])])
def test_nullspace_torque_exerts_no_task_wrench(q: np.ndarray) -> None:
    pos, quat, J = ee_pose(q)
    dq = np.array([0.2, -0.1, 0.3, 0.1, -0.2, 0.4, 0.1])
    q_ns = q + np.array([0.4, -0.3, 0.5, 0.2, -0.6, 0.3, 0.7])
    kns = 5.0
    gains = ZERO.replace(nullspace_stiffness=kns)
    tau0 = kns * (q_ns - q) - 2 * math.sqrt(kns) * dq
    # lambda -> 0: the projected torque moves neither the TCP (J tau ~ 0) nor pushes on it (Jpinv^T tau ~ 0)
    tau = impedance_torque(q, dq, J, pos, quat, pos, quat, gains, q_nullspace=q_ns, jacobian_damping=1e-8)
    assert np.linalg.norm(J @ tau) < 1e-9 * np.linalg.norm(J @ tau0)
    assert np.linalg.norm(task_wrench(J, tau)) < 1e-8 * np.linalg.norm(task_wrench(J, tau0))
    assert np.linalg.norm(tau) > 0.1  # it does act in the nullspace
    # lambda = 1e-3: exactly J N tau0 = lambda^2 (J J^T + lambda^2 I)^-1 J tau0
    lam = 1e-3
    tau = impedance_torque(q, dq, J, pos, quat, pos, quat, gains, q_nullspace=q_ns, jacobian_damping=lam)
    np.testing.assert_allclose(J @ tau, lam**2 * np.linalg.solve(J @ J.T + lam**2 * np.eye(6), J @ tau0),
                               atol=1e-12)


def test_static_task_force_for_a_far_target_is_stiffness_times_clip() -> None:
    """Reference limiting in pure math: however far the target, each wrench axis is K * clip."""
    q = HOME + np.array([0.2, 0.1, -0.1, 0.2, 0.1, -0.2, 0.1])
    pos, quat, J = ee_pose(q)
    gains = gain_profile("compliance").replace(nullspace_stiffness=0.0)
    target_pos = pos + np.array([0.8, -0.5, 0.3])
    target_quat = quat_mul(axis_angle_to_quat(np.array([1.0, -1.5, 0.7])), quat)
    tau = impedance_torque(q, np.zeros(7), J, pos, quat, target_pos, target_quat, gains)
    e_sign = np.sign(np.concatenate([pos - target_pos, orientation_error(quat, target_quat)]))
    bound = np.array([2000.0 * 0.01] * 3 + [150.0 * 0.05] * 3)  # 20 N, 7.5 Nm per axis
    np.testing.assert_allclose(task_wrench(J, tau), -e_sign * bound, atol=1e-9)


# ------------------------------------------------------------------------------------------------------------
# the stateful controller


@settings(max_examples=30, deadline=None)
@given(joint_configs, vec3, vec3, st.sampled_from(["compliance", "precision"]))
def test_last_pose_error_is_clipped_per_axis(q: np.ndarray, dpos: np.ndarray, drot: np.ndarray,
                                             profile: str) -> None:
    gains = gain_profile(profile)
    ctrl = make_controller(gains, filter_time_constant_s=0.0)
    pos, quat, J = ee_pose(q)
    ctrl.set_target(pos + 0.3 * dpos, quat_mul(axis_angle_to_quat(2.0 * drot), quat))
    for _ in range(3):
        ctrl.torque(q, np.zeros(7), J, pos, quat, np.zeros(7), DT)
        err = ctrl.last_pose_error
        assert np.all(np.abs(err[:3]) <= gains.translational_clip_m + 1e-15)
        assert np.all(np.abs(err[3:]) <= gains.rotational_clip_rad + 1e-15)
    unclipped = np.concatenate([-0.3 * dpos, orientation_error(quat, ctrl.target_quat)])
    limits = np.array([gains.translational_clip_m] * 3 + [gains.rotational_clip_rad] * 3)
    np.testing.assert_allclose(err, np.clip(unclipped, -limits, limits), atol=1e-12)


def test_integrator_saturates_and_resets_on_a_new_target() -> None:
    gains = gain_profile("compliance").replace(translational_integral_n_per_m_s=2000.0,
                                               rotational_integral_nm_per_rad_s=100.0,
                                               integral_limit_n=4.0, integral_limit_nm=0.25)
    ctrl = make_controller(gains, filter_time_constant_s=0.0)
    pos, quat, J = ee_pose(HOME)
    target_pos = pos + np.array([0.002, -0.05, 0.0])  # y error clipped to 1 cm
    ctrl.set_target(target_pos, quat_mul(axis_angle_to_quat(np.array([0.0, 0.0, 0.01])), quat))
    ctrl.torque(HOME, np.zeros(7), J, pos, quat, np.zeros(7), DT)
    # one tick: f_i = K_i * e * dt, e being the clipped error
    np.testing.assert_allclose(ctrl.integral_wrench[:3], 2000.0 * np.array([-0.002, 0.01, 0.0]) * DT, atol=1e-12)
    for _ in range(3000):  # 3 s at a constant error: far beyond the limits
        ctrl.torque(HOME, np.zeros(7), J, pos, quat, np.zeros(7), DT)
    np.testing.assert_allclose(ctrl.integral_wrench, [-4.0, 4.0, 0.0, 0.0, 0.0, -0.25], atol=1e-12)
    # the saturated integral wrench is part of the task wrench: F = -K e - f_i
    tau = ctrl.torque(HOME, np.zeros(7), J, pos, quat, np.zeros(7), DT)
    assert np.linalg.norm(tau) > 0
    ctrl.set_target(target_pos, ctrl.commanded_quat)  # the same target again: kept
    assert np.abs(ctrl.integral_wrench).max() == 4.0
    ctrl.set_target(target_pos + np.array([0.0, 0.0, 1e-5]), ctrl.commanded_quat)  # a new target: reset
    np.testing.assert_array_equal(ctrl.integral_wrench, np.zeros(6))


def test_torque_rate_limit_holds_per_tick() -> None:
    ctrl = make_controller(gain_profile("precision"), filter_time_constant_s=0.0, max_torque_rate_nm_per_s=1000.0)
    pos, quat, J = ee_pose(HOME)
    ctrl.set_target(pos + np.array([0.1, 0.1, -0.1]), quat_mul(axis_angle_to_quat(np.array([0.3, 0, 0])), quat))
    rng = np.random.default_rng(0)
    prev = np.zeros(7)  # reset: the rate limiter starts from zero controller torque
    steps = []
    for k in range(200):
        dt = DT if k % 2 else 2 * DT
        bias = 5.0 * np.sin(0.01 * k + np.arange(7)) + rng.normal(0, 0.5, 7)  # bias passes through unlimited
        tau = ctrl.torque(HOME, np.zeros(7), J, pos, quat, bias, dt)
        step = np.abs((tau - bias) - prev)
        assert np.all(step <= 1000.0 * dt + 1e-9), (k, step)
        steps.append(step.max() / (1000.0 * dt))
        prev = tau - bias
    assert max(steps) == pytest.approx(1.0)  # the limit was active
    unlimited = impedance_torque(HOME, np.zeros(7), J, pos, quat, ctrl.commanded_pos, ctrl.commanded_quat,
                                 gain_profile("precision"), integral_wrench=ctrl.integral_wrench)
    np.testing.assert_allclose(ctrl.last_controller_torque, unlimited, atol=1e-9)  # and then caught up


def test_total_torque_is_saturated_to_the_joint_limits() -> None:
    stiff = ImpedanceGains(translational_stiffness_n_per_m=10000.0, translational_damping_ns_per_m=200.0,
                           rotational_stiffness_nm_per_rad=1000.0, rotational_damping_nms_per_rad=60.0,
                           translational_clip_m=0.5, rotational_clip_rad=3.0)
    ctrl = make_controller(stiff, filter_time_constant_s=0.0, max_torque_rate_nm_per_s=math.inf)
    pos, quat, J = ee_pose(HOME)
    ctrl.set_target(pos + np.array([0.4, -0.4, 0.4]), quat_mul(axis_angle_to_quat(np.array([2.0, 0, 0])), quat))
    bias = np.array([0.0, -30.0, 0.0, 20.0, 0.0, 1.0, 0.0])
    tau = ctrl.torque(HOME, np.zeros(7), J, pos, quat, bias, DT)
    limits = np.array(PANDA_TORQUE_LIMITS_NM)
    assert np.all(np.abs(tau) <= limits)
    assert np.sum(np.isclose(np.abs(tau), limits)) >= 3
    np.testing.assert_allclose(ctrl.last_controller_torque, tau - bias)  # the limiter remembers what was applied


@pytest.mark.parametrize("dt", [1e-3, 2e-3])
def test_gain_and_target_filters_have_the_configured_time_constant(dt: float) -> None:
    ctrl = make_controller(gain_profile("compliance"), filter_time_constant_s=0.2)
    pos, quat, J = ee_pose(HOME)
    k0 = gain_profile("compliance").translational_stiffness_n_per_m
    k1 = gain_profile("precision").translational_stiffness_n_per_m
    ctrl.set_gains(gain_profile("precision"))
    ctrl.set_target(pos + np.array([0.0, 0.0, 0.05]), quat)
    assert ctrl.gains.translational_stiffness_n_per_m == k0  # nothing moves before a tick
    for _ in range(round(0.2 / dt)):
        ctrl.torque(HOME, np.zeros(7), J, pos, quat, np.zeros(7), dt)
    frac = 1 - math.exp(-1)  # 63.2 % after one time constant
    assert ctrl.gains.translational_stiffness_n_per_m == pytest.approx(k0 + frac * (k1 - k0), rel=1e-9)
    assert ctrl.target_pos[2] - pos[2] == pytest.approx(frac * 0.05, rel=1e-9)
    for _ in range(round(1.8 / dt)):
        ctrl.torque(HOME, np.zeros(7), J, pos, quat, np.zeros(7), dt)
    for name, want in gain_profile("precision").to_dict().items():  # 10 tau: all but e^-10 of the way
        start = gain_profile("compliance").to_dict()[name]
        assert getattr(ctrl.gains, name) == pytest.approx(want - math.exp(-10) * (want - start), rel=1e-9)


def test_orientation_target_is_slerped() -> None:
    ctrl = make_controller(filter_time_constant_s=0.1)
    pos, quat, J = ee_pose(HOME)
    ctrl.set_target(pos, quat_mul(axis_angle_to_quat(np.array([0.0, 0.4, 0.0])), quat))
    for _ in range(100):
        ctrl.torque(HOME, np.zeros(7), J, pos, quat, np.zeros(7), DT)
    np.testing.assert_allclose(orientation_error(ctrl.target_quat, quat), [0, 0.4 * (1 - math.exp(-1)), 0],
                               atol=1e-9)
    np.testing.assert_allclose(ctrl.commanded_quat, quat_mul(axis_angle_to_quat(np.array([0.0, 0.4, 0.0])), quat))


def test_zero_time_constant_disables_filtering() -> None:
    ctrl = make_controller(filter_time_constant_s=0.0)
    pos, quat, J = ee_pose(HOME)
    ctrl.set_gains(gain_profile("precision"))
    ctrl.set_target(pos + 0.01, quat)
    ctrl.torque(HOME, np.zeros(7), J, pos, quat, np.zeros(7), DT)
    assert ctrl.gains == gain_profile("precision")
    np.testing.assert_array_equal(ctrl.target_pos, pos + 0.01)


def test_closed_loop_on_panda_kinematics_reaches_the_target() -> None:
    """Unit joint inertia, no gravity: the loop must bring the TCP to a target 6 cm and 0.3 rad away,
    which fails for any sign or frame mistake in the error, the Jacobian use or the projector."""
    ctrl = make_controller(gain_profile("precision"))
    q, dq = HOME.copy(), np.zeros(7)
    pos, quat, _ = ee_pose(q)
    target_pos = pos + np.array([0.03, -0.04, 0.03])
    target_quat = quat_mul(axis_angle_to_quat(np.array([0.1, -0.2, 0.2])), quat)
    ctrl.set_target(target_pos, target_quat)
    inertia = np.diag([2.0, 2.0, 1.5, 1.5, 0.3, 0.3, 0.1])
    for _ in range(3000):  # 3 s at 1 kHz, semi-implicit Euler
        pos, quat, J = ee_pose(q)
        tau = ctrl.torque(q, dq, J, pos, quat, np.zeros(7), DT)
        dq += np.linalg.solve(inertia, tau - 0.5 * dq) * DT  # a little joint friction
        q += dq * DT
    pos, quat, J = ee_pose(q)
    assert np.linalg.norm(pos - target_pos) < 5e-4
    assert np.linalg.norm(orientation_error(quat, target_quat)) < 2e-3
    assert np.linalg.norm(J @ dq) < 1e-3  # the TCP is at rest (the weak nullspace spring still drifts slowly)


# ------------------------------------------------------------------------------------------------------------
# guards


def test_targets_with_nan_or_bad_shape_are_refused() -> None:
    ctrl = make_controller()
    pos, quat, _ = ee_pose(HOME)
    with pytest.raises(SafetyError, match="pos_base_target"):
        ctrl.set_target(np.array([np.nan, 0, 0]), quat)
    with pytest.raises(SafetyError, match="quat_base_target"):
        ctrl.set_target(pos, np.array([1.0, np.inf, 0, 0]))
    with pytest.raises(SafetyError, match="quat_base_target"):
        ctrl.set_target(pos, np.zeros(4))
    with pytest.raises(SafetyError, match="pos_base_target"):
        ctrl.set_target(np.zeros(2), quat)
    np.testing.assert_array_equal(ctrl.commanded_pos, pos)  # nothing was taken


def test_torque_input_guards_leave_the_state_untouched() -> None:
    ctrl = make_controller()
    pos, quat, J = ee_pose(HOME)
    ctrl.torque(HOME, np.zeros(7), J, pos, quat, np.zeros(7), DT)
    before = ctrl._state.copy()
    bad_q = HOME.copy()
    bad_q[3] = np.nan
    with pytest.raises(SafetyError, match=r"^q:"):
        ctrl.torque(bad_q, np.zeros(7), J, pos, quat, np.zeros(7), DT)
    bad_J = J.copy()
    bad_J[2, 3] = np.inf
    with pytest.raises(SafetyError, match="jacobian_base"):
        ctrl.torque(HOME, np.zeros(7), bad_J, pos, quat, np.zeros(7), DT)
    with pytest.raises(SafetyError, match="dt_s"):
        ctrl.torque(HOME, np.zeros(7), J, pos, quat, np.zeros(7), 0.0)
    with pytest.raises(ShapeError, match="jacobian_base"):
        ctrl.torque(HOME, np.zeros(7), J[:, :6], pos, quat, np.zeros(7), DT)
    with pytest.raises(ShapeError, match="bias_nm"):
        ctrl.torque(HOME, np.zeros(7), J, pos, quat, np.zeros(6), DT)
    with pytest.raises(ShapeError, match="q"):
        ctrl.torque(np.zeros((7, 1)), np.zeros(7), J, pos, quat, np.zeros(7), DT)
    np.testing.assert_array_equal(ctrl._state, before)


def test_torque_before_reset_is_refused() -> None:
    ctrl = CartesianImpedanceController(ImpedanceConfig(), gain_profile("compliance"))
    pos, quat, J = ee_pose(HOME)
    with pytest.raises(SafetyError, match="reset"):
        ctrl.torque(HOME, np.zeros(7), J, pos, quat, np.zeros(7), DT)


def test_lists_float32_and_strided_inputs_give_the_same_torque() -> None:
    pos, quat, J = ee_pose(HOME)
    wide = np.zeros((6, 9))
    wide[:, :7] = J  # e.g. the arm's columns of a MuJoCo Jacobian that also has finger joints
    a, b = make_controller(), make_controller()
    for c in (a, b):
        c.set_target(pos + 0.01, quat)
    tau_a = a.torque(HOME, np.zeros(7), J, pos, quat, np.zeros(7), DT)
    tau_b = b.torque(list(HOME), np.zeros(7, np.float32), wide[:, :7], list(pos), tuple(quat), [0.0] * 7, DT)
    np.testing.assert_allclose(tau_b, tau_a, atol=1e-12)


def test_reset_sets_target_and_clears_integrator_and_rate_limiter() -> None:
    ctrl = make_controller(gain_profile("precision"), filter_time_constant_s=0.0)
    pos, quat, J = ee_pose(HOME)
    ctrl.set_target(pos + 0.02, quat)
    for _ in range(50):
        ctrl.torque(HOME, np.zeros(7), J, pos, quat, np.zeros(7), DT)
    assert np.abs(ctrl.integral_wrench).max() > 0 and np.abs(ctrl.last_controller_torque).max() > 0
    ctrl.reset(pos, -quat, tau_initial=np.full(7, 0.5))
    np.testing.assert_array_equal(ctrl.target_pos, pos)
    np.testing.assert_array_equal(ctrl.commanded_pos, pos)
    np.testing.assert_allclose(np.abs(orientation_error(ctrl.target_quat, quat)), 0, atol=1e-12)
    np.testing.assert_array_equal(ctrl.integral_wrench, np.zeros(6))
    np.testing.assert_array_equal(ctrl.last_pose_error, np.zeros(6))
    np.testing.assert_array_equal(ctrl.last_controller_torque, np.full(7, 0.5))


def test_kernel_state_layout_matches_gains_fields() -> None:
    assert len(ImpedanceGains().as_vector()) == _kernels.NG
    names = list(ImpedanceGains.__dataclass_fields__)
    assert names.index("translational_clip_m") == _kernels.G_CLIP_T
    assert names.index("nullspace_stiffness") == _kernels.G_KNS
    assert names.index("integral_limit_nm") == _kernels.G_ILIM_NM
