"""The pixel diagnosis tables: the 5-step + Q-filter arm against the pixel recipe, and the learning diagnostics
(`robot-rl train --diagnostics`) of each benchmarks/pixel_diagnosis.py arm that has a results file."""

from __future__ import annotations

from typing import Any

from .fmt import Results, ksteps, pct, rnd, signed, source, table
from .learning import compare

PIXEL_ARMS = [("base", "pixel recipe (front + wrist, 64x64)"), ("noaug", "no augmentation"),
              ("front", "front camera alone"), ("wrist", "wrist camera alone"),
              ("proprio", "proprio alone, no camera"), ("px96", "96x96 images"),
              ("n5q", "5-step returns + Q-filtered BC")]
"""benchmarks/pixel_diagnosis.py's arms (its ARMS), in order, with the label the table gives them."""
TASK = "twin-pick-cube"
N5Q_FILE = "sample_efficiency_twin-pick-cube_pixels64_n5q3k.json"
MSE_FILE = "sample_efficiency_twin-pick-cube_pixels64_mse3k.json"


def _exists(res: Results, name: str) -> bool:
    return (res.directory / name).exists()


def _q_cell(row: dict[str, Any], which: str) -> str:
    bias, corr = row.get(f"diag_{which}_bias"), row.get(f"diag_{which}_corr")
    if bias is None:
        return "-"
    return f"{signed(bias, 2)} (r {rnd(corr, 2) if corr is not None else '-'})"


def _diag_row(label: str, row: dict[str, Any]) -> list[object]:
    rank = row.get("diag_encoder_rank")
    drift = row.get("diag_encoder_drift")
    share, kept = row.get("diag_bc_share"), row.get("diag_bc_kept")
    return [label, ksteps(row["env_step"]), pct(row["success_rate"]), pct(row.get("train_success_rate")),
            _q_cell(row, "demo"), _q_cell(row, "policy"),
            f"{rnd(rank, 1)} / {row['diag_encoder_dim']}" if rank is not None else "-",
            rnd(drift, 2) if drift is not None else "-",
            (pct(share) if share is not None else "-") + (f" (kept {pct(kept)})" if kept is not None else ""),
            rnd(row["diag_policy_std"], 2) if row.get("diag_policy_std") is not None else "-"]


def pixel_diagnosis(res: Results) -> str:
    parts = []
    if _exists(res, N5Q_FILE):
        n5q = res(N5Q_FILE)
        base = list(res(MSE_FILE)["runs"])
        seeds = [r["seed"] for r in n5q["runs"]]
        seeds_text = " / ".join(map(str, seeds))
        same = [r for r in base if r["seed"] in seeds]  # the recipe on the same seeds, for a like-for-like row
        parts += [f"Pick-cube from two 64x64 cameras, {n5q['eval_episodes']} evaluation episodes every "
                  f"{n5q['eval_every']:,} env steps (first >= 90 %: one entry per seed of the row):",
                  compare([("the pixel recipe (1-step returns, unfiltered BC)", base),
                           *([(f"the pixel recipe, seed{'s' * (len(seeds) > 1)} {seeds_text} alone", same)]
                             if len(same) < len(base) else []),
                           (f"5-step returns + Q-filtered BC, seed{'s' * (len(seeds) > 1)} {seeds_text}",
                            list(n5q["runs"]))], 1000, [1000, 2000, 3000]),
                  source(MSE_FILE, N5Q_FILE)]
    have = [(arm, label) for arm, label in PIXEL_ARMS if _exists(res, f"pixel_diagnosis_{TASK}_{arm}.json")]
    rows, files = [], []
    for arm, label in have:
        name = f"pixel_diagnosis_{TASK}_{arm}.json"
        files.append(name)
        rows += [_diag_row(label, r) for r in res(name)["rows"]]
    if rows:
        parts += ["Learning diagnostics per arm (seed 0, one row per evaluation; Q - G: the critic's mean "
                  "over-estimation of the Monte-Carlo return, r: their correlation over the rows):",
                  table(["arm", "env step", "eval success", "train success", "demo rows: Q - G (r)",
                         "recent policy rows: Q - G (r)", "feature rank / dim", "feature drift",
                         "BC share of actor loss", "policy std"], rows),
                  source(*files)]
    missing = [label for arm, label in PIXEL_ARMS if (arm, label) not in have]
    if missing:
        parts.append("No diagnostics run yet for these arms: " + "; ".join(missing) + ".")
    return "\n\n".join(parts)


def timing_eval(res: Results, name: str = "timing_eval_faithful_notiming.json") -> str:
    """benchmarks/timing_eval.py: a run's final policy on time, with late frames, a late arm and both."""
    d = res(name)
    rows = []
    for run in d["runs"]:
        for e in run["evaluations"]:
            rows.append([run["label"], ksteps(e["env_step"]), f"{e['camera_latency_ms']:g} ms",
                         f"{e['action_delay_ms']:g} ms", pct(e["success_rate"]),
                         pct(e.get("true_success_rate", e["success_rate"])), rnd(e["mean_length"], 1)])
    return "\n\n".join([table(["policy", "env steps", "frames late", "targets late", "success (the run's reward)",
                               "true success", "mean episode length"], rows),
                        source(name, note=f"{d['episodes']} deterministic episodes per row, the same env seeds "
                                          f"(from {d['first_seed']:,}) in every row")])


def timing_eval_faithful_sim(res: Results) -> str:
    """The faithful `robot-rl sim` run's final policy (main_command_faithful's row 'the same, before: demos on seeds
    0-19') on 100 further seeds."""
    return timing_eval(res, "timing_eval_faithful_sim.json")


def demo_coverage_faithful_sim(res: Results) -> str:
    """benchmarks/demo_coverage.py on the faithful `robot-rl sim` runs: where the final policy fails against where
    its demos were."""
    name = "demo_coverage_faithful_sim.json"
    d = res(name)
    near_cm = rnd(100 * d["near_m"])

    def cm(x: float | None) -> str:
        return "-" if x is None else f"{rnd(100 * x, 1)} cm"

    def share(rate: float | None, n: int) -> str:
        return "-" if rate is None else f"{pct(rate)} of {n}"

    rows = []
    for r in d["runs"]:
        n = len(r["episodes_detail"])
        rows.append([r["label"], str(len(r["demo_seeds"])), ksteps(r["env_step"]), f"**{pct(r['true_success_rate'])}**",
                     share(r["success_near"], r["near_scenes"]), share(r["success_far"], n - r["near_scenes"]),
                     cm(r["failed_nearest_demo_m_median"]), cm(r["succeeded_nearest_demo_m_median"]),
                     cm(r["cover_m"])])
    return "\n\n".join([table(["sim run", "demos", "env steps", "final policy, deterministic (true success)",
                               f"on scenes within {near_cm} cm of a demo's", "on scenes farther", "failed scenes: "
                               "nearest demo's (median)", "succeeded scenes: the same", "farthest scene from any "
                               "demo's"], rows),
                        source(name, note=f"{d['episodes']} seeded scenes (from {d['first_seed']:,}) under the run's "
                                          "timing; distances between the twin's cube start positions (privileged: "
                                          "metrics only)")])
