"""Reward-classifier metrics: ROC-AUC, the threshold for a target precision, calibration, the k-gate replay."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from learners.rewards.metrics import (
    binary_metrics,
    calibration_table,
    expected_calibration_error,
    first_gated_index,
    floor_threshold,
    format_calibration_table,
    format_metrics_table,
    gate_stats,
    roc_auc,
    threshold_for_precision,
    wilson_lower_bound,
)


def test_roc_auc_matches_the_pairwise_definition_with_ties() -> None:
    rng = np.random.default_rng(0)
    p = rng.integers(0, 5, 40) / 4.0          # many ties
    y = rng.random(40) < 0.4
    pairs = [(a, b) for a, b in itertools.product(p[y], p[~y])]
    brute = np.mean([1.0 if a > b else 0.5 if a == b else 0.0 for a, b in pairs])
    assert roc_auc(p, y) == pytest.approx(brute)
    assert roc_auc(np.array([0.1, 0.9]), np.array([False, True])) == 1.0
    assert np.isnan(roc_auc(np.array([0.1, 0.2]), np.array([True, True])))


def test_binary_metrics_counts() -> None:
    p = np.array([0.9, 0.8, 0.7, 0.2, 0.6, 0.1])
    y = np.array([1, 1, 0, 1, 0, 0], bool)
    m = binary_metrics(p, y, 0.65)
    assert (m["tp"], m["fp"], m["fn"], m["tn"]) == (2, 1, 1, 2)
    assert m["precision"] == pytest.approx(2 / 3) and m["recall"] == pytest.approx(2 / 3)
    assert m["fp_per_1000"] == pytest.approx(1000 / 6)
    assert "0.667" in format_metrics_table({"test": m})


def test_threshold_envelope_ignores_a_lucky_dip_and_confidence_needs_enough_positives() -> None:
    # scores high to low: 20 positives, one negative at 0.5, then 5 positives, then negatives
    p = np.r_[np.linspace(0.99, 0.6, 20), 0.5, np.linspace(0.45, 0.4, 5), np.linspace(0.3, 0.0, 30)]
    y = np.r_[np.ones(20, bool), False, np.ones(5, bool), np.zeros(30, bool)]
    # precision 25/26 at 0.40 but 20/21 < 0.97 just below 0.6: the envelope stops above the negative
    point = threshold_for_precision(p, y, 0.97, confidence=0.0)
    assert point.rule == "point" and point.threshold == pytest.approx(0.6) and point.recall == pytest.approx(20 / 25)
    assert binary_metrics(p, y, 0.4)["precision"] > 0.96   # the dip the envelope refuses
    # 20 clean positives cannot make 0.97 believable at 90 % (needs ~53): falls back to the point rule
    assert threshold_for_precision(p, y, 0.97, confidence=0.9).rule == "point"
    # 400 clean positives, then one negative: 400/401 meets 0.995 as a point estimate (the point rule goes
    # below the negative), but only 400/400 is believable at 90 %: the confidence rule stays above it
    p2 = np.r_[np.linspace(0.99, 0.6, 400), 0.5, np.linspace(0.3, 0.0, 30)]
    y2 = np.r_[np.ones(400, bool), False, np.zeros(30, bool)]
    assert threshold_for_precision(p2, y2, 0.995, confidence=0.0).threshold == pytest.approx(0.3)
    c = threshold_for_precision(p2, y2, 0.995, confidence=0.9)
    assert c.rule == "confidence" and c.threshold == pytest.approx(0.6) and c.precision_lower_bound >= 0.995
    # unreachable: the most precise threshold, flagged
    bad = threshold_for_precision(np.array([0.9, 0.8]), np.array([False, True]), 0.99)
    assert not bad.met and bad.rule == "best"


def test_threshold_floor_keeps_frames_scored_as_failure_from_counting_as_success() -> None:
    # a near-perfectly separated split whose lowest positive scores 0.002: the precision rule goes down to it
    p = np.r_[np.linspace(0.999, 0.9, 300), 0.002, np.full(50, 0.001), np.linspace(0.0009, 0.0, 400)]
    y = np.r_[np.ones(301, bool), np.zeros(450, bool)]
    rule = threshold_for_precision(p, y, 0.99, confidence=0.9)
    assert rule.threshold == pytest.approx(0.002) and rule.recall == 1.0
    floored = floor_threshold(rule, 0.5)
    assert floored.threshold == 0.5 and floored.rule == f"{rule.rule}+floor" and floored.met == rule.met
    assert binary_metrics(p, y, floored.threshold)["recall"] == pytest.approx(300 / 301)
    # a threshold above the floor is left as it is; floor 0 turns it off
    assert floor_threshold(rule, 0.0) is rule
    high = threshold_for_precision(np.r_[np.full(200, 0.9), np.full(200, 0.1)], np.r_[np.ones(200, bool),
                                   np.zeros(200, bool)], 0.99)
    assert floor_threshold(high, 0.5) is high and high.threshold == pytest.approx(0.9)


def test_wilson_lower_bound() -> None:
    # 0 failures in n: lower bound n / (n + z^2)
    z2 = 1.2815515655446004 ** 2
    assert wilson_lower_bound(np.array([163]), np.array([163]), 0.9)[0] == pytest.approx(163 / (163 + z2))
    assert wilson_lower_bound(np.array([50]), np.array([100]), 0.9)[0] < 0.5


def test_calibration_table() -> None:
    p = np.array([0.05, 0.05, 0.95, 0.95, 0.55])
    y = np.array([0, 0, 1, 1, 0], bool)
    table = calibration_table(p, y, bins=10)
    assert [(r["lo"], r["frames"], r["positive_rate"]) for r in table] == [(0.0, 2, 0.0), (0.5, 1, 0.0),
                                                                            (pytest.approx(0.9), 2, 1.0)]
    assert expected_calibration_error(table) == pytest.approx((2 * 0.05 + 0.55 + 2 * 0.05) / 5)
    assert "expected calibration error" in format_calibration_table(table)


def test_gate_replay_counts_false_fires_misses_and_delay() -> None:
    assert first_gated_index(np.array([1, 0, 1, 1, 1], bool), 2) == 3
    assert first_gated_index(np.array([1, 0, 1, 1, 1], bool), 2, allowed=np.array([1, 1, 1, 0, 1], bool)) == 4
    assert first_gated_index(np.array([1, 0, 1], bool), 2) is None
    probs = [np.array([0.0, 0.9, 0.0, 0.9, 0.9, 0.9]),   # a lone positive frame before the real success
             np.array([0.0, 0.9, 0.9, 0.0]),              # a near miss the classifier believes for two frames
             np.array([0.0, 0.0, 0.9])]                    # a success seen for one frame only
    labels = [np.array([0, 0, 0, 1, 1, 1], bool), np.zeros(4, bool), np.array([0, 0, 1], bool)]
    k1 = gate_stats(probs, labels, 0.5, 1)
    assert (k1["fired"], k1["false_fires"], k1["missed"]) == (3, 2, 0)
    k2 = gate_stats(probs, labels, 0.5, 2)
    assert (k2["fired"], k2["false_fires"], k2["missed"], k2["delay_frames_mean"]) == (2, 1, 1, 1.0)
    k3 = gate_stats(probs, labels, 0.5, 3)
    assert (k3["fired"], k3["false_fires"], k3["missed"], k3["delay_frames_mean"]) == (1, 0, 1, 2.0)
