"""What the benchmark scripts share: set-up, argument helpers, result files, tables and learning curves.

Importing this module puts the repository root on sys.path (so a script run as `python benchmarks/X.py` imports
this checkout's packages); Python puts benchmarks/ itself there, which is how a script finds this module. It
imports only the standard library at import time, so a script can set its environment before numpy loads::

    from _prelude import add_out_dir, bench_parser, host_info, set_env_defaults, timestamp, write_json

    set_env_defaults(one_thread=True)  # before numpy / MuJoCo are imported: BLAS reads its thread count at load

    import numpy as np  # noqa: E402

    p = bench_parser(__doc__)
    add_out_dir(p)
    args = p.parse_args()
    write_json(args.out / "x.json", {"benchmark": "x", "time": timestamp(), **host_info(), "rows": rows})

Public names:
- set-up: ROOT (the repository), RESULTS (benchmarks/results, where every figure the docs quote lives),
  set_env_defaults (MuJoCo rendering, OpenMP wait policy, optionally one BLAS thread);
- command line: bench_parser, add_out_dir, add_work_dir, add_label, add_run_labels / run_labels (names of
  positional run directories), split_passthrough (`-- ...` goes on to the
  command a benchmark runs), work_dir, result_name (file stems with optional suffixes), robot_rl_command,
  training_run_flags (the env-step, evaluation, checkpoint and seed flags of a `robot-rl train` run);
- running: parallel_map (independent runs, `jobs` at a time, in spawned processes);
- results: timestamp, load_average, host_info, recipe_summary, device_name, write_json (atomic), pyplot,
  save_figure (atomic), write_result (JSON + its figure), rate_axes;
- tables: cell (a value or '-'), print_table (a header, a rule and the rows);
- learning curves (metrics.jsonl rows of `robot-rl train`): SUCCESS_BAR, first_step_at, eval_bin, mean_curve,
  mean_first_step, summarize_run, print_success_table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
"""The repository root (benchmarks/ is one of its folders)."""
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "benchmarks" / "results"
"""Where the result files go by default (the docs' tables are generated from them)."""

SUCCESS_BAR = 0.9
"""The evaluation success rate a learning curve is timed to ("first env step at >= 90 %")."""

RENDER_ENV = {"MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "egl", "OMP_WAIT_POLICY": "PASSIVE"}
ONE_THREAD_ENV = {v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")}

T = TypeVar("T")


# ------------------------------------------------------------------------------------------------ set-up


def set_env_defaults(one_thread: bool = False) -> None:
    """Default (never override) the environment of MuJoCo runs: headless EGL rendering and a passive OpenMP wait
    policy (idle OpenMP threads sleep instead of spinning on a shared machine); with `one_thread`, also one BLAS /
    OpenMP / numexpr thread. Call it before numpy, torch or MuJoCo are imported."""
    for key, value in (RENDER_ENV | (ONE_THREAD_ENV if one_thread else {})).items():
        os.environ.setdefault(key, value)


# ------------------------------------------------------------------------------------------------ command line


def bench_parser(doc: str | None) -> argparse.ArgumentParser:
    """An argument parser whose --help shows the script's docstring `doc` as written."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def add_out_dir(p: argparse.ArgumentParser) -> None:
    """`--out DIR`: where the result files go (default benchmarks/results)."""
    p.add_argument("--out", type=Path, default=RESULTS, metavar="DIR",
                   help="directory of the result files (default: benchmarks/results)")


def add_work_dir(p: argparse.ArgumentParser, what: str) -> None:
    """`--work DIR`: where `what` (demos, labels, run directories ...) go; default a temporary directory."""
    p.add_argument("--work", type=Path, default=None, metavar="DIR", help=f"{what} (default: a temporary one)")


def add_label(p: argparse.ArgumentParser) -> None:
    """`--label L`: a suffix of the result files, so a variant is written beside the plain run."""
    p.add_argument("--label", default="", help="suffix of the result files (a variant beside the plain run)")


def add_classifiers(p: argparse.ArgumentParser) -> None:
    """`--classifiers NAME=DIR ...`: reward classifiers to judge frames, each under a name (`named_classifiers`)."""
    p.add_argument("--classifiers", nargs="+", required=True, metavar="NAME=DIR",
                   help="classifiers to judge the frames")


def named_classifiers(p: argparse.ArgumentParser, args: argparse.Namespace) -> list[tuple[str, str]]:
    """[(name, directory)] of `--classifiers`; the parser's error (exit 2) for an entry that is not NAME=DIR."""
    named = [c.split("=", 1) for c in args.classifiers]
    if any(len(n) != 2 or not n[0] for n in named):
        p.error("--classifiers: each must be NAME=DIR")
    return [(n[0], n[1]) for n in named]


def add_run_labels(p: argparse.ArgumentParser) -> None:
    """`--labels NAME ...`: a name per positional run directory (`runs`) for a benchmark's table."""
    p.add_argument("--labels", nargs="+", default=None, help="a name per run for the table (default: its directory)")


def run_labels(p: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The names of `args.runs` (`--labels`, else each directory's name); a parser error when the counts differ."""
    if args.labels is not None and len(args.labels) != len(args.runs):
        p.error(f"--labels: {len(args.labels)} given for {len(args.runs)} runs")
    return list(args.labels) if args.labels else [r.name for r in args.runs]


def split_passthrough(argv: list[str]) -> tuple[list[str], list[str]]:
    """(this script's arguments, the ones after `--` that go on to the command it runs)."""
    if "--" not in argv:
        return argv, []
    i = argv.index("--")
    return argv[:i], argv[i + 1:]


def work_dir(path: Path | None, prefix: str) -> Path:
    """`path` (created if missing), or a fresh temporary directory named `prefix...` when it is None."""
    if path is None:
        return Path(tempfile.mkdtemp(prefix=prefix))
    path.mkdir(parents=True, exist_ok=True)
    return path


def result_name(stem: str, *suffixes: str) -> str:
    """`stem` followed by `_suffix` for each non-empty suffix: result_name("x", "", "tag") == "x_tag"."""
    return "_".join([stem, *(s for s in suffixes if s)])


def robot_rl_command(prefer_installed: bool = True) -> list[str]:
    """The argv prefix that runs `robot-rl`: the installed command beside this interpreter (when
    `prefer_installed` and it exists), else `python -m robot_rl.cli` (this checkout's code when run from ROOT)."""
    exe = Path(sys.executable).with_name("robot-rl")
    return [str(exe)] if prefer_installed and exe.exists() else [sys.executable, "-m", "robot_rl.cli"]


def training_run_flags(steps: int, eval_every: int, eval_episodes: int, seed: int) -> list[str]:
    """`robot-rl train` flags of one benchmark run: `steps` env steps, an evaluation of `eval_episodes` episodes
    every `eval_every` steps, one checkpoint at the end, the seed."""
    return ["--max-env-steps", str(steps), "--eval-every", str(eval_every), "--eval-episodes", str(eval_episodes),
            "--checkpoint-every", str(steps), "--seed", str(seed)]


# ------------------------------------------------------------------------------------------------ running


def parallel_map(fn: Callable[..., T], calls: Sequence[tuple[Any, ...]], jobs: int) -> list[T]:
    """`fn(*args)` for each argument tuple of `calls`, results in order: in this process when `jobs` <= 1, else
    `jobs` at a time in spawned processes (no forked torch / MuJoCo state; `fn` must be a module-level function)."""
    if jobs <= 1:
        return [fn(*args) for args in calls]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(fn, *zip(*calls, strict=True)))


# ------------------------------------------------------------------------------------------------ results


def timestamp() -> str:
    """Local time as 2025-01-31T12:00:00 (the "time" of a result file)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S")


def load_average() -> list[float]:
    """The machine's 1, 5 and 15-minute load averages (NaN where the platform has none)."""
    try:
        return list(os.getloadavg())
    except OSError:
        return [float("nan")] * 3


def host_info(torch: bool = True) -> dict[str, Any]:
    """{"machine": architecture, "cpu_count": cores[, "torch": version]}: the host fields of a result file."""
    info: dict[str, Any] = {"machine": platform.machine(), "cpu_count": os.cpu_count()}
    if torch:
        import torch as _torch

        info["torch"] = _torch.__version__
    return info


def recipe_summary(task: str, obs_mode: str = "state") -> dict[str, Any]:
    """The task's training recipe as a result file records it: its AgentConfig overrides and updates per step."""
    from learners.agents.recipes import with_task_defaults

    recipe = with_task_defaults(task)
    return {"agent": recipe.overrides(obs_mode), "updates_per_step": recipe.updates_per_step}


def device_name(device: str) -> str:
    """The torch device a `--device` value runs on: "auto" is cuda when there is one, else cpu."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def write_json(path: Path, data: Any, *, indent: int = 1, default: Callable[[Any], Any] | None = None) -> Path:
    """Write `data` as JSON (+ a final newline) to `path` atomically: serialised first, written to a temporary
    file beside it, then renamed over it, so a reader never sees half a file and a failure leaves the old one.
    `default` converts what json cannot (e.g. float for numpy scalars). Creates the folder; returns `path`."""
    text = json.dumps(data, indent=indent, default=default) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg backend; MissingExtraError naming the `sim` extra without it."""
    from robot_rl.extras import optional_import

    matplotlib = optional_import("matplotlib", extra="sim", purpose="benchmark plots")
    matplotlib.use("Agg")
    return optional_import("matplotlib.pyplot", extra="sim")


def save_figure(fig: Any, path: Path) -> None:
    """Lay a matplotlib figure out (tight), write it to `path` (PNG) atomically (a temporary file, then a rename)
    and close it."""
    plt = pyplot()
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)


def write_result(result: dict[str, Any], path: Path, plot_fn: Callable[[dict[str, Any], Path], None]) -> None:
    """Write a benchmark's result dict as JSON to `path` (write_json), draw its figure with
    `plot_fn(result, png_path)` beside it (same name, .png) and say where both went."""
    write_json(path, result)
    plot_fn(result, path.with_suffix(".png"))
    print(f"wrote {path} and {path.with_suffix('.png').name}")


def rate_axes(ax: Any, xlabel: str, ylabel: str | None = None, legend_fontsize: int = 8) -> None:
    """Finish a matplotlib axes of rates in [0, 1] against env steps: labels, y range, grid, legend."""
    ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    ax.set_ylim(-0.03, 1.03)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=legend_fontsize)


# ------------------------------------------------------------------------------------------------ tables

_ALIGN_WIDTH = re.compile(r"(?:(?P<fill>.)?(?P<align>[<>=^]))?[-+ ]?z?#?0?(?P<width>\d*)")


def cell(value: Any, spec: str = "", missing: str = "-") -> str:
    """`format(value, spec)`, or `missing` ('-') when `value` is None, padded to the spec's width with its fill
    and alignment (right when it names none, as numbers are): cell(None, "9.1f") == "        -"."""
    if value is not None:
        return format(value, spec)
    m = _ALIGN_WIDTH.match(spec)
    assert m is not None  # every group is optional: it matches any string
    align = m["align"] if m["align"] in ("<", "^", ">") else ">"
    return format(missing, f"{m['fill'] or ''}{align}{m['width']}")


def print_table(header: str, rows: Iterable[str]) -> None:
    """Print `header`, a rule of '-' as long as it, then each (already formatted) row."""
    print(header)
    print("-" * len(header))
    for row in rows:
        print(row)


# ------------------------------------------------------------------------------------------------ learning curves


def first_step_at(rows: list[dict[str, Any]], bar: float, key: str = "success_rate") -> int | None:
    """The env step of the first metrics row whose `key` reaches `bar` (None if none does)."""
    for r in rows:
        if r.get(key) is not None and r[key] >= bar:
            return int(r["env_step"])
    return None


def eval_bin(env_step: int, every: int) -> int:
    """An evaluation's env step rounded to the nearest multiple of the evaluation period `every` (evaluations run
    at episode ends, a few steps after the period)."""
    return int(round(env_step / every) * every) if every > 0 else int(env_step)


def mean_curve(runs: list[dict[str, Any]], every: int) -> list[tuple[int, float]]:
    """(binned env step, mean success) where every seed has an evaluation."""
    import numpy as np

    grid: dict[int, list[float]] = {}
    for run in runs:
        for c in run["curve"]:
            grid.setdefault(eval_bin(c["env_step"], every), []).append(c["success_rate"])
    return sorted((x, float(np.mean(v))) for x, v in grid.items() if len(v) == len(runs))


def mean_first_step(runs: list[dict[str, Any]], steps: int) -> float:
    """Mean over seeds of the first env step at >= 90 % (a seed that never reaches it counts as `steps`)."""
    import numpy as np

    return float(np.mean([steps if r["first_step_at_90"] is None else r["first_step_at_90"] for r in runs]))


def summarize_run(seed: int, res: dict[str, Any], out: Path, steps: int) -> dict[str, Any]:
    """One seed's entry of a result file from a `robot-rl train` run's {"rows": metrics rows, "wall_s", "cpu_s"}:
    the evaluation curve (with the reward model's counters when the run had one, and the scene resets a person
    made: --operator-reset-after), the first env step at >= 90 %
    success, final / best rates, updates/s."""
    import numpy as np

    rows = res["rows"]
    curve = []
    for r in rows:
        c = {"env_step": r["env_step"], "success_rate": r["success_rate"], "return": r.get("return"),
             "updates": r.get("updates"), "train_success_rate": r.get("train_success_rate")}
        c.update({k: v for k, v in r.items() if k.startswith("reward_") or k == "operator_scene_resets"})
        curve.append(c)
    return {"seed": seed, "curve": curve, "wall_s": res["wall_s"], "cpu_s": res.get("cpu_s"),
            "stopped_by_budget": bool(rows) and rows[-1]["env_step"] < steps,
            "first_step_at_90": first_step_at(rows, SUCCESS_BAR),
            "final_success_rate": rows[-1]["success_rate"] if rows else None,
            "best_success_rate": max((r["success_rate"] for r in rows), default=None),
            "env_steps_done": rows[-1]["env_step"] if rows else 0,
            "updates_per_s": float(np.mean([r["updates_per_s"] for r in rows[1:]])) if len(rows) > 1 else None,
            "run_dir": str(out)}


def print_success_table(columns: list[tuple[str, dict[str, Any]]], every: int, width: int = 8,
                        mean: bool = True) -> None:
    """Evaluation success per binned env step (rows) and labelled run (columns), with the row mean unless `mean` is
    False; a run without an evaluation in a bin shows '-'."""
    import numpy as np

    steps = sorted({eval_bin(c["env_step"], every) for _, r in columns for c in r["curve"]})
    header = f"{'env steps':>9} " + " ".join(f"{label:>{width}}" for label, _ in columns) + \
        (f" {'mean':>6}" if mean else "")
    lines = []
    for s in steps:
        vals = [next((c["success_rate"] for c in r["curve"] if eval_bin(c["env_step"], every) == s), None)
                for _, r in columns]
        shown = " ".join(cell(v, f">{width}.0%") for v in vals)
        have = [v for v in vals if v is not None]
        lines.append(f"{s:>9} {shown} {np.mean(have):>6.0%}" if mean and have else f"{s:>9} {shown}")
    print_table(header, lines)
