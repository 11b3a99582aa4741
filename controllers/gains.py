"""Cartesian impedance gains and the two named profiles (SERL's compliance / precision).

Usage::

    gains = gain_profile("compliance")                  # the defaults below
    stiff = gains.replace(translational_stiffness_n_per_m=3000.0, translational_damping_ns_per_m=110.0)
    ImpedanceGains(translational_damping_ns_per_m=0.0)  # InvalidGainsError: undamped spring

Validity rules (`validate`, each error names the field):
- every field finite and >= 0;
- clips strictly > 0 (a zero clip would make the spring exert no force at all);
- a spring needs a damper: damping must be > 0 whenever the matching stiffness is > 0. Without damping the
  closed loop is only marginally stable (the arm oscillates for ever in the twin, and on hardware only joint
  friction would stop it), so it is refused rather than allowed;
- sanity ceilings far above any sensible setting (MAX_* below), to catch unit slips such as N/mm or a missing
  decimal point before they reach an arm.

Why these profiles
- compliance (defaults, SERL's): K = 2000 N/m, D = 89 Ns/m (= 2 sqrt(K): critically damped for 1 kg), rotational
  150 Nm/rad / 7 Nms/rad, clip 10 mm / 0.05 rad. The clip bounds the static contact force at K * clip = 20 N per
  axis (7.5 Nm in rotation); with free space motion limited by damping, the saturated approach speed is
  about K * clip / D = 0.22 m/s (1.1 rad/s). No integral action.
- precision (resets): K = 3000 N/m, D = 110 Ns/m (~2 sqrt(K)), rotational 200 Nm/rad / 10 Nms/rad, clip
  8 mm / 0.04 rad. Stiffer for a smaller steady-state error; the clip is tighter than compliance's in distance
  but K * clip = 24 N (8 Nm) gives it a little more authority against friction, and the saturated approach speed
  K * clip / D ~= 0.22 m/s (0.8 rad/s) still moves the arm across a 30 cm workspace in ~1.5 s. A small integral
  (500 N/(m s), 20 Nm/(rad s), saturated at 3 N / 0.3 Nm) removes the steady-state error that friction and model
  error leave on hardware; its saturation caps the overshoot it can cause at limit / K = 1 mm (1.5 mrad).
"""

from __future__ import annotations

import dataclasses
import math
import numbers

import numpy as np

from robot_rl.config import Config, require
from robot_rl.errors import ConfigError, InvalidGainsError

MAX_TRANSLATIONAL_STIFFNESS_N_PER_M = 10_000.0
MAX_ROTATIONAL_STIFFNESS_NM_PER_RAD = 1_000.0
MAX_TRANSLATIONAL_DAMPING_NS_PER_M = 1_000.0
MAX_ROTATIONAL_DAMPING_NMS_PER_RAD = 100.0
MAX_NULLSPACE_STIFFNESS = 100.0
MAX_TRANSLATIONAL_CLIP_M = 0.5
MAX_ROTATIONAL_CLIP_RAD = math.pi


@dataclasses.dataclass(frozen=True)
class ImpedanceGains(Config):
    """Gains of the Cartesian impedance law (see controllers.impedance). Defaults = the compliance profile."""

    translational_stiffness_n_per_m: float = 2000.0
    """K for x, y, z (N/m)."""
    translational_damping_ns_per_m: float = 89.0
    """D for x, y, z (N s/m)."""
    rotational_stiffness_nm_per_rad: float = 150.0
    """K for the rotation vector (Nm/rad)."""
    rotational_damping_nms_per_rad: float = 7.0
    """D for the angular velocity (Nm s/rad)."""
    translational_integral_n_per_m_s: float = 0.0
    """K_i on the clipped position error (N/(m s)); 0 disables."""
    rotational_integral_nm_per_rad_s: float = 0.0
    """K_i on the clipped rotation error (Nm/(rad s)); 0 disables."""
    integral_limit_n: float = 5.0
    """Per-axis saturation of the integral force K_i * int(e) dt (N); anti-windup."""
    integral_limit_nm: float = 0.5
    """Per-axis saturation of the integral torque (Nm); anti-windup."""
    nullspace_stiffness: float = 0.2
    """Joint-space spring toward q_nullspace, projected into the task nullspace (Nm/rad); damping 2 sqrt(k)."""
    translational_clip_m: float = 0.01
    """Per-axis clip of the position error (m): static contact force <= stiffness * clip."""
    rotational_clip_rad: float = 0.05
    """Per-axis clip of the rotation-vector error (rad)."""

    def validate(self) -> None:
        def check(name: str, ok: bool, why: str) -> None:
            require(ok, name, getattr(self, name), why, InvalidGainsError)

        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            check(f.name, isinstance(v, numbers.Real) and not isinstance(v, bool), "must be a real number")
            check(f.name, math.isfinite(v), "must be finite")
            check(f.name, v >= 0.0, "must be >= 0")
        check("translational_clip_m", self.translational_clip_m > 0.0, "must be > 0 (a zero clip exerts no force)")
        check("rotational_clip_rad", self.rotational_clip_rad > 0.0, "must be > 0 (a zero clip exerts no torque)")
        check("translational_damping_ns_per_m",
              self.translational_damping_ns_per_m > 0.0 or self.translational_stiffness_n_per_m == 0.0,
              "must be > 0 when translational_stiffness_n_per_m > 0 (an undamped spring oscillates)")
        check("rotational_damping_nms_per_rad",
              self.rotational_damping_nms_per_rad > 0.0 or self.rotational_stiffness_nm_per_rad == 0.0,
              "must be > 0 when rotational_stiffness_nm_per_rad > 0 (an undamped spring oscillates)")
        ceilings = {
            "translational_stiffness_n_per_m": MAX_TRANSLATIONAL_STIFFNESS_N_PER_M,
            "rotational_stiffness_nm_per_rad": MAX_ROTATIONAL_STIFFNESS_NM_PER_RAD,
            "translational_damping_ns_per_m": MAX_TRANSLATIONAL_DAMPING_NS_PER_M,
            "rotational_damping_nms_per_rad": MAX_ROTATIONAL_DAMPING_NMS_PER_RAD,
            "nullspace_stiffness": MAX_NULLSPACE_STIFFNESS,
            "translational_clip_m": MAX_TRANSLATIONAL_CLIP_M,
            "rotational_clip_rad": MAX_ROTATIONAL_CLIP_RAD,
        }
        for name, ceiling in ceilings.items():
            check(name, getattr(self, name) <= ceiling, f"must be <= {ceiling} (sanity ceiling; check units)")

    def as_vector(self) -> np.ndarray:
        """The fields as a float64 vector in declaration order (the layout the numba kernel uses)."""
        return np.array([getattr(self, f.name) for f in dataclasses.fields(self)], dtype=np.float64)

    @classmethod
    def from_vector(cls, values: np.ndarray) -> ImpedanceGains:
        """Inverse of `as_vector` (validated)."""
        names = [f.name for f in dataclasses.fields(cls)]
        if len(values) != len(names):
            raise InvalidGainsError(f"expected {len(names)} gain values, got {len(values)}")
        return cls(**{n: float(v) for n, v in zip(names, values, strict=True)})


GAIN_PROFILES: dict[str, ImpedanceGains] = {
    "compliance": ImpedanceGains(),
    "precision": ImpedanceGains(
        translational_stiffness_n_per_m=3000.0,
        translational_damping_ns_per_m=110.0,
        rotational_stiffness_nm_per_rad=200.0,
        rotational_damping_nms_per_rad=10.0,
        translational_integral_n_per_m_s=500.0,
        rotational_integral_nm_per_rad_s=20.0,
        integral_limit_n=3.0,
        integral_limit_nm=0.3,
        nullspace_stiffness=0.2,
        translational_clip_m=0.008,
        rotational_clip_rad=0.04,
    ),
}


def gain_profile(name: str) -> ImpedanceGains:
    """The named profile; raises ConfigError listing the known names."""
    try:
        return GAIN_PROFILES[name]
    except KeyError:
        raise ConfigError(f"unknown gain profile {name!r}; known: {sorted(GAIN_PROFILES)}") from None
