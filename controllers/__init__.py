"""Pure control laws: Cartesian impedance with reference limiting, the safety box, gain profiles, rotations
and Panda kinematics. No I/O; numpy everywhere, numba for the 1 kHz impedance tick (compiled on first use).

Usage::

    from controllers import CartesianImpedanceController, ImpedanceConfig, gain_profile, SafetyBox, clip_pose
"""

from controllers.gains import GAIN_PROFILES, ImpedanceGains, gain_profile
from controllers.impedance import (
    CartesianImpedanceController,
    ImpedanceConfig,
    impedance_torque,
    impedance_torque_numpy,
    pose_error,
)
from controllers.kinematics import PANDA_HOME_Q, PANDA_TORQUE_LIMITS_NM, panda_fk, panda_jacobian
from controllers.safety import SafetyBox, check_finite, clip_pose, contains, limit_step
from controllers.transforms import (
    axis_angle_to_quat,
    euler_xyz_to_quat,
    mat_to_quat,
    orientation_error,
    quat_conj,
    quat_mul,
    quat_normalize,
    quat_slerp,
    quat_to_euler_xyz,
    quat_to_mat,
    quat_to_rotvec,
)

__all__ = [
    "GAIN_PROFILES",
    "PANDA_HOME_Q",
    "PANDA_TORQUE_LIMITS_NM",
    "CartesianImpedanceController",
    "ImpedanceConfig",
    "ImpedanceGains",
    "SafetyBox",
    "axis_angle_to_quat",
    "check_finite",
    "clip_pose",
    "contains",
    "euler_xyz_to_quat",
    "gain_profile",
    "impedance_torque",
    "impedance_torque_numpy",
    "limit_step",
    "mat_to_quat",
    "orientation_error",
    "panda_fk",
    "panda_jacobian",
    "pose_error",
    "quat_conj",
    "quat_mul",
    "quat_normalize",
    "quat_slerp",
    "quat_to_euler_xyz",
    "quat_to_mat",
    "quat_to_rotvec",
]
