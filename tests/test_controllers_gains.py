"""Gain validation (each error names its field), the two profiles, and ImpedanceConfig validation."""

from __future__ import annotations

import math

import pytest

from controllers.gains import GAIN_PROFILES, ImpedanceGains, gain_profile
from controllers.impedance import ImpedanceConfig
from robot_rl.errors import ConfigError, InvalidGainsError


@pytest.mark.parametrize(("field", "value"), [
    ("translational_stiffness_n_per_m", -1.0),
    ("rotational_damping_nms_per_rad", math.nan),
    ("nullspace_stiffness", math.inf),
    ("translational_integral_n_per_m_s", -0.1),
    ("integral_limit_nm", -1.0),
    ("translational_clip_m", 0.0),
    ("rotational_clip_rad", 0.0),
    ("rotational_clip_rad", -0.01),
    ("translational_damping_ns_per_m", 0.0),  # undamped spring (stiffness 2000 by default)
    ("rotational_damping_nms_per_rad", 0.0),
    ("translational_stiffness_n_per_m", 2e6),  # N/mm instead of N/m
    ("translational_clip_m", 10.0),
])
def test_invalid_gains_raise_naming_the_field(field: str, value: float) -> None:
    with pytest.raises(InvalidGainsError, match=field):
        ImpedanceGains(**{field: value})


def test_zero_damping_is_fine_without_stiffness() -> None:
    gains = ImpedanceGains(translational_stiffness_n_per_m=0.0, translational_damping_ns_per_m=0.0)
    assert gains.translational_damping_ns_per_m == 0.0


def test_profiles() -> None:
    assert set(GAIN_PROFILES) == {"compliance", "precision"}
    compliance, precision = gain_profile("compliance"), gain_profile("precision")
    assert compliance == ImpedanceGains()  # the defaults
    assert (compliance.translational_stiffness_n_per_m, compliance.translational_damping_ns_per_m) == (2000, 89)
    assert (compliance.rotational_stiffness_nm_per_rad, compliance.rotational_damping_nms_per_rad) == (150, 7)
    assert compliance.translational_integral_n_per_m_s == compliance.rotational_integral_nm_per_rad_s == 0
    assert precision.translational_stiffness_n_per_m > compliance.translational_stiffness_n_per_m
    assert precision.rotational_stiffness_nm_per_rad > compliance.rotational_stiffness_nm_per_rad
    assert 0 < precision.translational_clip_m < compliance.translational_clip_m
    assert 0 < precision.rotational_clip_rad < compliance.rotational_clip_rad
    # precision still pushes at least as hard as compliance when saturated (it has to finish resets)
    assert (precision.translational_stiffness_n_per_m * precision.translational_clip_m
            >= compliance.translational_stiffness_n_per_m * compliance.translational_clip_m)
    for gains in GAIN_PROFILES.values():
        assert ImpedanceGains.from_dict(gains.to_dict()) == gains
        assert ImpedanceGains.from_vector(gains.as_vector()) == gains


def test_unknown_profile_lists_the_known_names() -> None:
    with pytest.raises(ConfigError, match=r"'stiff'.*\['compliance', 'precision'\]"):
        gain_profile("stiff")


@pytest.mark.parametrize(("field", "value"), [
    ("torque_limit_nm", (87.0,) * 6),
    ("torque_limit_nm", (87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 0.0)),
    ("max_torque_rate_nm_per_s", 0.0),
    ("filter_time_constant_s", -0.1),
    ("jacobian_damping", 0.0),
    ("new_target_epsilon_m", -1e-6),
    ("q_nullspace", (0.0,) * 6),
    ("q_nullspace", (0.0,) * 6 + (math.nan,)),
])
def test_invalid_impedance_config_raises_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=field):
        ImpedanceConfig(**{field: value})  # type: ignore[arg-type]


def test_impedance_config_defaults() -> None:
    cfg = ImpedanceConfig()
    assert cfg.torque_limit_nm == (87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0)
    assert cfg.max_torque_rate_nm_per_s == 1000.0 and cfg.filter_time_constant_s == 0.2
    assert cfg.q_nullspace == pytest.approx((0, -math.pi / 4, 0, -3 * math.pi / 4, 0, math.pi / 2, math.pi / 4))
    assert ImpedanceConfig.from_dict(cfg.to_dict()) == cfg
