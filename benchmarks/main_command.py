"""The README's main command, measured: `robot-rl sim` on its embedded default, end to end, as a user runs it.

Runs `robot-rl sim --task T` (default twin-pick-cube, every other option at its default) in a fresh run
directory as a subprocess of the installed command, times the whole run (demo recording, robot servers,
learner, actors, final deterministic evaluation), then reads the run's `summary.json` (env steps,
training success, the evaluation of the last checkpoint, milestones: the first env step and wall time at which
training success reached 25 / 50 / 80 / 90 %; the learner's updates over its run time give the mean updates/s).
Prints a table and writes `benchmarks/results/main_command_<task>.json`; the README's headline for the main
command comes from that file.

Usage::

    python benchmarks/main_command.py                              # twin-pick-cube, defaults (~10 min, 2 cores)
    python benchmarks/main_command.py --task twin-peg-insert
    python benchmarks/main_command.py --task twin-reach -- --actors 1  # anything after -- goes to robot-rl sim
    python benchmarks/main_command.py --label faithful_pixels -- --obs-mode pixels --image-size 64 --faithful \
        --reward classifier:CLS --actor-args "--operator-reset-after 3" --max-env-steps 20000
    python benchmarks/main_command.py --label L --from-run RUN -- FLAGS   # the row of a run kept with --keep

With a classifier reward the row holds both the final evaluation's counted success (the classifier's, gated) and
the twin's true success (`eval_true_success_rate`), and the scene resets a person was asked for (summed over the
actors' stats).

Run it on an otherwise idle machine: the learner, the actors and their robot servers share the cores, and the
wall time is the figure being measured.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _prelude import (
    ROOT,
    add_label,
    add_out_dir,
    bench_parser,
    cell,
    host_info,
    load_average,
    result_name,
    robot_rl_command,
    split_passthrough,
    write_json,
)


def run_sim(task: str, out: Path, extra: list[str]) -> tuple[int, float, str]:
    """Run `robot-rl sim` into `out`; (exit code, wall seconds, the last lines of its output)."""
    argv = [*robot_rl_command(), "sim", "--task", task, "--out", str(out), *extra]
    env = dict(os.environ, MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          check=False)
    return proc.returncode, time.monotonic() - t0, "\n".join(proc.stdout.splitlines()[-15:])


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _rate(count: Any, seconds: Any) -> float | None:
    """count / seconds, or None when either is missing (the learner's mean updates/s over its run)."""
    if not isinstance(count, int | float) or not isinstance(seconds, int | float) or seconds <= 0:
        return None
    return round(float(count) / float(seconds), 1)


def _sum_actor_stat(summary: dict[str, Any], key: str, group: str | None = None) -> int | None:
    """`key` summed over the actors' final stats in `summary` (inside each actor's `group` dict when given, e.g.
    "reward_model"); None when no actor reported it."""
    stats = [a if group is None else a.get(group) for a in (summary.get("actor_stats") or {}).values()
             if isinstance(a, dict)]
    values = [s[key] for s in stats if isinstance(s, dict) and isinstance(s.get(key), int | float)]
    return int(sum(values)) if values else None


def _reward_model_frames(summary: dict[str, Any]) -> dict[str, int] | None:
    """A classifier reward's frame decisions (prob >= threshold, before the gate) against the twin's truth over the
    actors' training episodes (tp / fp / fn / tn, learners.rewards.metrics.FrameConfusion: every frame up to each
    episode's end), summed over the actors; None without a classifier."""
    counts = {k: _sum_actor_stat(summary, f"frame_{k}", "reward_model") for k in ("tp", "fp", "fn", "tn")}
    return None if counts["tp"] is None else {k: v or 0 for k, v in counts.items()}


def _reward_model_onsets(summary: dict[str, Any]) -> dict[str, int] | None:
    """Per training episode, the classifier's first positive frame against the first true one (early / on time /
    late / missed, learners.rewards.metrics.SuccessOnsets), summed over the actors; None without them."""
    from learners.rewards.metrics import SuccessOnsets

    counts = {k: _sum_actor_stat(summary, k, "reward_model") for k in SuccessOnsets.KEYS}
    return None if counts["onset_on_time"] is None else {k: v or 0 for k, v in counts.items()}


def summarise(task: str, out: Path, wall_s: float, returncode: int, extra: list[str]) -> dict[str, Any]:
    """The result row from the run directory `out` (its summary.json)."""
    summary = _read_json(out / "summary.json")
    milestones = summary.get("milestones") or {}
    return {
        "task": task, "sim_args": extra, "returncode": returncode, "wall_s": round(wall_s, 1),
        "env_step": summary.get("env_step"), "episodes": summary.get("episodes"),
        "updates": summary.get("updates"),
        "updates_per_s": _rate(summary.get("updates"), summary.get("learner_elapsed_s")),
        "train_success_rate": summary.get("train_success_rate"),
        "eval_success_rate": summary.get("eval_success_rate"), "eval_episodes": summary.get("eval_episodes"),
        "eval_success_source": summary.get("eval_success_source"),
        "eval_true_success_rate": summary.get("eval_true_success_rate"),
        "operator_scene_resets": _sum_actor_stat(summary, "operator_scene_resets"),
        "reward_model_frames": _reward_model_frames(summary),
        "reward_model_onsets": _reward_model_onsets(summary),
        "guard_stops": summary.get("guard_stops"),  # training episodes the robot servers' safety guards stopped
        "timing": summary.get("timing"),
        "milestones": milestones,
        # the learner's agent: torch.compile on (the CPU default) or not (ROBOT_RL_COMPILE=0, --set compile=false)
        "compile": _read_json(out / "agent_config.json").get("compile"),
        "compile_env": os.environ.get("ROBOT_RL_COMPILE"),
        "first_update_s": _read_json(out / "status.json").get("first_update_s"),  # the learner's own record
    }


def print_table(row: dict[str, Any]) -> None:
    ev, n = row["eval_success_rate"], row["eval_episodes"] or 0
    evs = "-" if ev is None else f"{round(ev * n)}/{n}"
    print("| task | wall | env steps | learner updates/s | final training success | final checkpoint, deterministic |")
    print("|---|---|---|---|---|---|")
    print(f"| {row['task']} | {row['wall_s'] / 60:.1f} min | {row['env_step']} | "
          f"{cell(row['updates_per_s'], '.0f')} | {cell(row['train_success_rate'], '.0%')} | {evs} |")
    for level, m in sorted(row["milestones"].items()):
        if isinstance(m, dict):
            print(f"  training success >= {level}: env step {m.get('env_step')}, {m.get('wall_s')} s")


def main(argv: list[str] | None = None) -> int:
    args_in, extra = split_passthrough(list(sys.argv[1:] if argv is None else argv))
    p = bench_parser(__doc__)
    p.add_argument("--task", default="twin-pick-cube")
    add_out_dir(p)
    add_label(p)
    p.add_argument("--keep", action="store_true", help="keep the run directory (printed) instead of deleting it")
    p.add_argument("--from-run", type=Path, default=None, metavar="RUN_DIR",
                   help="no run: the row of a finished sim run directory (one kept with --keep; the wall time its "
                        "summary.json measured); give the flags that run had after --")
    args = p.parse_args(args_in)
    for own in ("--task", "--out"):
        if any(a == own or a.startswith(own + "=") for a in extra):
            p.error(f"{own} after --: this script sets robot-rl sim's {own} itself (give --task before --)")
    date = time.strftime("%Y-%m-%d")
    if args.from_run is not None:
        run_dir, summary_path = args.from_run, args.from_run / "summary.json"
        if not (summary := _read_json(summary_path)):
            raise SystemExit(f"{summary_path}: missing or unreadable (not a finished robot-rl sim run)")
        code, wall_s, tail = 0, float(summary.get("wall_s") or 0.0), ""
        row = {**summarise(args.task, run_dir, wall_s, code, extra), "from_run": str(run_dir)}
        date = time.strftime("%Y-%m-%d", time.localtime(summary_path.stat().st_mtime))
    else:
        run_dir = Path(tempfile.mkdtemp(prefix=f"main-command-{args.task}-")) / "run"
        load_before = load_average()[0]
        code, wall_s, tail = run_sim(args.task, run_dir, extra)
        row = summarise(args.task, run_dir, wall_s, code, extra)
        # the machine's 1-minute load average before and after the run: the wall time is only comparable between
        # runs on an equally idle machine (the run itself loads it with ~2-3 busy processes)
        row["load_avg_1min"] = {"before": round(load_before, 2), "after": round(load_average()[0], 2)}
    if code != 0:
        print(tail, file=sys.stderr)
    print_table(row)
    result = {"benchmark": "main_command", "command": f"robot-rl sim --task {args.task} {shlex.join(extra)}".strip(),
              **host_info(), "date": date, "result": row}
    name = result_name(f"main_command_{args.task}", args.label)
    print(f"wrote {write_json(args.out / f'{name}.json', result)}")
    if args.keep or args.from_run is not None:
        print(f"run directory: {run_dir}")
    else:
        shutil.rmtree(run_dir.parent, ignore_errors=True)
    return 0 if code == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
