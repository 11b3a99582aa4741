"""Does the simulated timing hurt a policy when it acts, or only when it learns?

For each run directory given (any run `robot-rl eval` accepts; e.g. the faithful pixel runs of
benchmarks/sample_efficiency.py), its newest checkpoint is evaluated (`robot-rl eval`'s library,
learners.training.evaluation.evaluate_checkpoint: deterministic, the same env seeds for every timing, success
counted by the run's reward with the twin's true success beside it) under each `--timings` entry, a camera latency
and an action delay in ms: by default on time (0 0), late frames only (100 0), a late arm only (0 20) and both
(100 20, the faithful default). A policy trained on time that keeps its success under the timing says the timing
costs learning, not acting; the reverse says it costs acting.

Run: `python benchmarks/timing_eval.py RUN_DIR [RUN_DIR ...] [--labels NAME ...] [--episodes 20] [--label L]`.
Writes benchmarks/results/timing_eval.json (timing_eval_L.json with --label) and prints a table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _prelude import (
    add_label,
    add_out_dir,
    add_run_labels,
    bench_parser,
    host_info,
    load_average,
    print_table,
    result_name,
    run_labels,
    set_env_defaults,
    timestamp,
    write_json,
)

set_env_defaults(one_thread=True)

DEFAULT_TIMINGS = ("0,0", "100,0", "0,20", "100,20")
SEED = 2_000_000


def parse_timing(text: str) -> tuple[float, float]:
    """'LATENCY,DELAY' (ms) -> (camera_latency_ms, action_delay_ms)."""
    parts = text.split(",")
    if len(parts) != 2:
        raise SystemExit(f"--timings {text!r}: expected LATENCY_MS,DELAY_MS, e.g. 100,20")
    try:
        return float(parts[0]), float(parts[1])
    except ValueError:
        raise SystemExit(f"--timings {text!r}: expected two numbers (ms), e.g. 100,20") from None


def main(argv: list[str] | None = None) -> None:
    p = bench_parser(__doc__)
    p.add_argument("runs", nargs="+", type=Path, help="run directories (or checkpoints) robot-rl eval accepts")
    add_run_labels(p)
    p.add_argument("--episodes", type=int, default=20)
    p.add_argument("--timings", nargs="+", default=list(DEFAULT_TIMINGS), metavar="LATENCY,DELAY",
                   help="camera latency and action delay in ms per evaluation (default: %(default)s)")
    add_label(p)
    add_out_dir(p)
    args = p.parse_args(argv)
    labels = run_labels(p, args)
    timings = [parse_timing(t) for t in args.timings]

    from learners.training.evaluation import evaluate_checkpoint

    results: list[dict[str, Any]] = []
    lines = []
    for run, name in zip(args.runs, labels, strict=True):
        rows = []
        for latency, delay in timings:
            row = evaluate_checkpoint(run, args.episodes, seed=SEED, camera_latency_ms=latency,
                                      action_delay_ms=delay)
            row.update(camera_latency_ms=latency, action_delay_ms=delay)
            rows.append(row)
            true = row.get("true_success_rate", row["success_rate"])
            lines.append(f"{name:>24} {latency:8.0f} {delay:6.0f} {row['env_step']:8d} {row['success_rate']:7.0%} "
                         f"{true:6.0%} {row['mean_length']:7.1f}")
            print(lines[-1], flush=True)
        results.append({"run": str(run), "label": name, "evaluations": rows})
    print_table(f"{'run':>24} {'latency':>8} {'delay':>6} {'env step':>8} {'reward':>7} {'true':>6} {'length':>7}",
                lines)
    out = args.out / f"{result_name('timing_eval', args.label)}.json"
    write_json(out, {"benchmark": "timing_eval", "time": timestamp(), **host_info(), "load_average": load_average(),
                     "episodes": args.episodes, "first_seed": SEED, "runs": results})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
