"""Reward-classifier metrics (numpy only): threshold for a target precision, the metrics table, calibration, and
the k-consecutive-frames gate replayed over labelled episodes.

False positives are what break RL with a learned reward (a wrong success ends the episode and teaches the policy
to stop early), so the threshold is chosen for a precision target, and the table reports false positives per
1,000 frames beside precision, recall and ROC-AUC.

Usage::

    th = threshold_for_precision(probs_val, labels_val, target=0.99, confidence=0.9)
    m = binary_metrics(probs_test, labels_test, th.threshold)      # precision, recall, fp_per_1000, roc_auc, ...
    print(format_metrics_table({"validation": m}))
    print(format_calibration_table(calibration_table(probs_val, labels_val, bins=10)))
    gate_stats(probs_by_episode, labels_by_episode, th.threshold, k=2)  # episode-level effect of the k gate
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from robot_rl.errors import ShapeError


def _check(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(probs, np.float64).reshape(-1)
    y = np.asarray(labels).reshape(-1).astype(bool)
    if p.shape != y.shape:
        raise ShapeError(f"probs {p.shape} and labels {y.shape} differ in length")
    return p, y


def roc_auc(probs: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney U with tied scores counted half); NaN with a single class."""
    p, y = _check(probs, labels)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(p, kind="mergesort")
    ranks = np.empty(len(p), np.float64)
    sorted_p = p[order]
    # average ranks over ties
    _, first, counts = np.unique(sorted_p, return_index=True, return_counts=True)
    avg = first + (counts - 1) / 2.0 + 1.0
    ranks[order] = np.repeat(avg, counts)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


@dataclasses.dataclass(frozen=True)
class ThresholdChoice:
    """The chosen threshold and how it was reached."""

    threshold: float
    target_precision: float
    met: bool
    """True when the rule's conditions hold at the threshold (see `threshold_for_precision`)."""
    precision: float
    recall: float
    precision_lower_bound: float
    """Wilson lower confidence bound of the precision at the threshold (NaN when confidence is 0)."""
    rule: str
    """"confidence": point-estimate envelope + lower bound; "point": the envelope alone (the lower bound could
    not be met: too few validation positives); "best": neither reached the target."""


def wilson_lower_bound(successes: np.ndarray, n: np.ndarray, confidence: float) -> np.ndarray:
    """One-sided Wilson score lower bound of a binomial proportion (successes / n) at `confidence`."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf(confidence)
    n = np.maximum(np.asarray(n, np.float64), 1e-12)
    p = np.asarray(successes, np.float64) / n
    centre = p + z * z / (2 * n)
    margin = z * np.sqrt(np.maximum(p * (1 - p) / n + z * z / (4 * n * n), 0.0))
    return np.asarray((centre - margin) / (1 + z * z / n))


def threshold_for_precision(probs: np.ndarray, labels: np.ndarray, target: float,
                            confidence: float = 0.9) -> ThresholdChoice:
    """The decision threshold for a precision target, chosen on (validation) scores and labels.

    Candidates are the distinct scores. Rule: the LOWEST threshold t (highest recall) at which
    (1) the precision is >= `target` at t and at every higher threshold (the precision envelope: a lucky dip
        into target territory between two worse thresholds does not count), and
    (2) with `confidence` > 0, the Wilson lower confidence bound of the precision at t is >= `target`: the
        validation set must hold enough predicted positives for the target to be believable (with no false
        positive, 0.99 at 90 % confidence needs >= 163 of them), which keeps the threshold off the last few
        validation negatives.
    If (2) cannot be met, (1) alone ("point"); if neither, the most precise threshold ("best", met=False).
    """
    p, y = _check(probs, labels)
    if not y.any():
        raise ShapeError("threshold_for_precision needs at least one positive")
    order = np.argsort(-p, kind="mergesort")
    ps, ys = p[order], y[order]
    tp = np.cumsum(ys)
    fp = np.cumsum(~ys)
    # only cut between distinct scores: the last index of each run of equal scores
    last = np.r_[ps[1:] != ps[:-1], True]
    idx = np.flatnonzero(last)
    prec = tp[idx] / (tp[idx] + fp[idx])
    rec = tp[idx] / max(1, int(y.sum()))
    env = np.minimum.accumulate(prec)  # the worst precision at this or any higher threshold
    lb = wilson_lower_bound(tp[idx], tp[idx] + fp[idx], confidence) if confidence > 0 else np.full(len(idx), np.nan)

    def choice(j: int, met: bool, rule: str) -> ThresholdChoice:
        return ThresholdChoice(float(ps[idx[j]]), float(target), met, float(prec[j]), float(rec[j]), float(lb[j]),
                               rule)

    if confidence > 0:
        ok = np.flatnonzero((env >= target) & (lb >= target))
        if ok.size:
            return choice(int(ok[-1]), True, "confidence")
    ok = np.flatnonzero(env >= target)
    if ok.size:
        return choice(int(ok[-1]), True, "point")
    return choice(int(np.flatnonzero(prec == prec.max())[-1]), False, "best")


def floor_threshold(choice: ThresholdChoice, floor: float) -> ThresholdChoice:
    """`choice` with its threshold raised to `floor` when below it (rule gets "+floor"); unchanged otherwise. A
    higher threshold can only keep or raise precision: the floor trades recall the validation split would allow for
    frames the classifier itself scores as more likely failure never counting as success.

        floor_threshold(threshold_for_precision(p, y, 0.99), 0.5).threshold >= 0.5
    """
    if choice.threshold >= floor:
        return choice
    return dataclasses.replace(choice, threshold=float(floor), rule=f"{choice.rule}+floor")


def binary_metrics(probs: np.ndarray, labels: np.ndarray, threshold: float) -> dict[str, Any]:
    """Frame-level metrics at `threshold` (positive = prob >= threshold): frames, positives, negatives, tp, fp,
    fn, tn, precision (1.0 with no predicted positive), recall, accuracy, balanced_accuracy, fp_per_1000
    (false positives per 1,000 frames), roc_auc, threshold."""
    p, y = _check(probs, labels)
    pred = p >= threshold
    tp = int((pred & y).sum())
    fp = int((pred & ~y).sum())
    fn = int((~pred & y).sum())
    tn = int((~pred & ~y).sum())
    n = len(p)
    n_pos, n_neg = tp + fn, fp + tn
    tpr = tp / n_pos if n_pos else float("nan")
    tnr = tn / n_neg if n_neg else float("nan")
    return {
        "threshold": float(threshold), "frames": n, "positives": n_pos, "negatives": n_neg,
        "tp": tp, "fp": fp, "fn": fn, "tn": tn,
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tpr,
        "accuracy": (tp + tn) / n if n else float("nan"),
        "balanced_accuracy": (tpr + tnr) / 2.0,
        "fp_per_1000": 1000.0 * fp / n if n else float("nan"),
        "roc_auc": roc_auc(p, y),
    }


def calibration_table(probs: np.ndarray, labels: np.ndarray, bins: int = 10) -> list[dict[str, Any]]:
    """Reliability table: equal-width bins of predicted probability; per non-empty bin: lo, hi, frames,
    mean_prob, positive_rate. Well calibrated: mean_prob ~ positive_rate in every bin."""
    p, y = _check(probs, labels)
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.digitize(p, edges[1:-1], right=False), 0, bins - 1)
    rows = []
    for b in range(bins):
        m = which == b
        if m.any():
            rows.append({"lo": float(edges[b]), "hi": float(edges[b + 1]), "frames": int(m.sum()),
                         "mean_prob": float(p[m].mean()), "positive_rate": float(y[m].mean())})
    return rows


def expected_calibration_error(table: Sequence[Mapping[str, Any]]) -> float:
    """Frame-weighted mean |mean_prob - positive_rate| over the calibration table's bins."""
    n = sum(int(r["frames"]) for r in table)
    if n == 0:
        return float("nan")
    return float(sum(int(r["frames"]) * abs(r["mean_prob"] - r["positive_rate"]) for r in table) / n)


def _fmt(v: Any, digits: int = 3) -> str:
    if isinstance(v, float):
        return "nan" if v != v else f"{v:.{digits}f}"
    return str(v)


def format_metrics_table(rows: Mapping[str, Mapping[str, Any]]) -> str:
    """A fixed-width table, one line per named split: frames, positives, threshold, precision, recall,
    false positives per 1,000 frames, ROC-AUC."""
    head = f"{'split':<12} {'frames':>7} {'pos':>6} {'threshold':>9} {'precision':>9} {'recall':>7} " \
           f"{'FP/1000':>8} {'ROC-AUC':>8}"
    lines = [head, "-" * len(head)]
    for name, m in rows.items():
        lines.append(f"{name:<12} {m['frames']:>7} {m['positives']:>6} {_fmt(m['threshold']):>9} "
                     f"{_fmt(m['precision']):>9} {_fmt(m['recall']):>7} {_fmt(m['fp_per_1000'], 1):>8} "
                     f"{_fmt(m['roc_auc'], 4):>8}")
    return "\n".join(lines)


def format_calibration_table(table: Sequence[Mapping[str, Any]]) -> str:
    """The calibration table as fixed-width text (+ the expected calibration error)."""
    head = f"{'predicted p':<12} {'frames':>7} {'mean p':>7} {'positive rate':>13}"
    lines = [head, "-" * len(head)]
    for r in table:
        lines.append(f"{r['lo']:.1f}-{r['hi']:.1f}{'':<5} {r['frames']:>7} {r['mean_prob']:>7.3f} "
                     f"{r['positive_rate']:>13.3f}")
    lines.append(f"expected calibration error: {expected_calibration_error(table):.3f}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ the k gate


def first_gated_index(positive: np.ndarray, k: int, allowed: np.ndarray | None = None) -> int | None:
    """The first frame index at which `k` consecutive frames (ending there) are positive and `allowed` (the
    proprio predicate, per frame) holds at that frame; None if never."""
    if k < 1:
        raise ShapeError(f"k={k} must be >= 1")
    run = 0
    for i, pos in enumerate(np.asarray(positive, bool)):
        run = run + 1 if pos else 0
        if run >= k and (allowed is None or bool(allowed[i])):
            return i
    return None


def gate_stats(probs: Sequence[np.ndarray], labels: Sequence[np.ndarray], threshold: float, k: int,
               allowed: Sequence[np.ndarray] | None = None) -> dict[str, Any]:
    """The k-consecutive-frames gate replayed over labelled episodes (frames in order), as the run-time reward
    model would end them: per episode the first frame where the gate fires.

    Returns: episodes, success_episodes (with any positive label), fired, false_fires (fired on a frame
    labelled negative: the episode would end with a wrong reward), missed (success episodes where it never
    fires), delay_frames_mean (fired frame - first positive label, over correctly fired episodes)."""
    fired = false_fires = missed = success_eps = 0
    delays: list[int] = []
    for i, (p, y) in enumerate(zip(probs, labels, strict=True)):
        y = np.asarray(y, bool)
        idx = first_gated_index(np.asarray(p) >= threshold, k, None if allowed is None else allowed[i])
        if y.any():
            success_eps += 1
            if idx is None:
                missed += 1
        if idx is not None:
            fired += 1
            if not y[idx]:
                false_fires += 1
            else:
                delays.append(idx - int(np.flatnonzero(y)[0]))
    return {"k": k, "episodes": len(probs), "success_episodes": success_eps, "fired": fired,
            "false_fires": false_fires, "missed": missed,
            "delay_frames_mean": float(np.mean(delays)) if delays else float("nan")}


class FrameConfusion:
    """Per-frame counts of a classifier's decisions (prob >= threshold) against the true success, as a run goes:
    the reward model's precision and recall on the policy's own rollouts (on the twin, which knows the truth: a
    twin-only diagnostic; hardware has no true success). Cumulative counts plus a window since the last `window()`.

        conf = FrameConfusion()
        conf.add(positive=True, true=False)
        conf.summary()     # {"frame_tp": 0, "frame_fp": 1, "frame_fn": 0, "frame_tn": 0, "frame_precision": 0.0, ...}
        conf.window()      # the same over the frames since the previous window() call
    """

    KEYS = ("tp", "fp", "fn", "tn")

    def __init__(self) -> None:
        self.total = dict.fromkeys(self.KEYS, 0)
        self._since = dict.fromkeys(self.KEYS, 0)

    def add(self, positive: bool, true: bool) -> None:
        key = ("tp" if true else "fp") if positive else ("fn" if true else "tn")
        self.total[key] += 1
        self._since[key] += 1

    @staticmethod
    def _summary(c: Mapping[str, int], prefix: str) -> dict[str, Any]:
        tp, fp, fn = c["tp"], c["fp"], c["fn"]
        out: dict[str, Any] = {f"{prefix}_{k}": int(c[k]) for k in FrameConfusion.KEYS}
        out[f"{prefix}_precision"] = tp / (tp + fp) if tp + fp else None
        out[f"{prefix}_recall"] = tp / (tp + fn) if tp + fn else None
        return out

    def summary(self) -> dict[str, Any]:
        """Counts over every frame so far and precision / recall (None where undefined: no positive decision, or no
        truly successful frame)."""
        return self._summary(self.total, "frame")

    def window(self) -> dict[str, Any]:
        """The same over the frames since the previous call (keys `window_frame_*`); starts a new window."""
        out = self._summary(self._since, "window_frame")
        self._since = dict.fromkeys(self.KEYS, 0)
        return out


class SuccessOnsets:
    """Per episode, when a classifier's first positive frame comes against the episode's first truly successful
    frame (the truth of the scene each frame shows): early, on time, late (and by how many steps) or missed. The
    k-frame gate ends an episode a few frames after the classifier's first positive, so in training the frames
    judged around success are mostly these onset frames, and one step of lateness costs a window about 1/(k+1) of
    its recall: this says how much of a run's frame recall is lateness at the line and how much is misses. A
    twin-only diagnostic (it needs the truth).

        onsets = SuccessOnsets()
        for positive, true in [(False, False), (False, True), (True, True)]:
            onsets.add(positive, true)
        onsets.end()         # one episode, the classifier one step late
        onsets.counts        # {"onset_late": 1, "onset_late_steps": 1, "frame_fn_late": 1, ...}

    Keys: `onset_early` (first positive before the first true frame), `onset_on_time`, `onset_late`,
    `onset_late_steps` (summed over the late episodes), `onset_missed` (a true frame, never a positive),
    `onset_without_truth` (a positive, never a true frame), `frame_fn_before_first_positive` (true frames the
    `frame_fn_late` (the true frames a classifier that did fire called negative before its first positive: the
lateness part of the false negatives).
    """

    KEYS = ("onset_early", "onset_on_time", "onset_late", "onset_late_steps", "onset_missed", "onset_without_truth",
            "frame_fn_late")

    def __init__(self) -> None:
        self.counts = dict.fromkeys(self.KEYS, 0)
        self._start()

    def _start(self) -> None:
        self._t = 0
        self._first_true: int | None = None
        self._first_positive: int | None = None
        self._fn_before_positive = 0

    def add(self, positive: bool, true: bool) -> None:
        """One judged frame of the current episode."""
        if true and self._first_true is None:
            self._first_true = self._t
        if positive and self._first_positive is None:
            self._first_positive = self._t
        if true and self._first_positive is None:
            self._fn_before_positive += 1
        self._t += 1

    def end(self) -> None:
        """Close the current episode (a no-op when it judged no frame) and start the next."""
        first_true, first_positive = self._first_true, self._first_positive
        if first_true is None:
            if first_positive is not None:
                self.counts["onset_without_truth"] += 1
        elif first_positive is None:
            self.counts["onset_missed"] += 1
        elif first_positive < first_true:
            self.counts["onset_early"] += 1
        elif first_positive == first_true:
            self.counts["onset_on_time"] += 1
        else:
            self.counts["onset_late"] += 1
            self.counts["onset_late_steps"] += first_positive - first_true
        if first_positive is not None:
            self.counts["frame_fn_late"] += self._fn_before_positive
        self._start()
