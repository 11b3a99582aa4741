"""benchmarks/_prelude.py (what the benchmark scripts share) and the scripts' command lines.

The prelude's logic is tested directly (atomic JSON, the '-' cells of tables, result names, learning-curve
helpers); every script in benchmarks/ must answer --help (they are not run by the suite otherwise, so a moved
helper would break them silently) and none may copy the prelude's set-up again.
"""

from __future__ import annotations

import importlib.util
import json
import operator
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))


def _load_prelude() -> Any:
    spec = importlib.util.spec_from_file_location("_prelude", BENCHMARKS / "_prelude.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


prelude = _load_prelude()


# ------------------------------------------------------------------------------------------------ result files


def test_write_json_writes_atomically_with_a_final_newline(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "x.json"
    assert prelude.write_json(path, {"a": [1, 2]}) == path
    text = path.read_text()
    assert json.loads(text) == {"a": [1, 2]} and text.endswith("}\n")
    assert text.startswith('{\n "a"')  # indent 1 by default
    prelude.write_json(path, {"b": 1}, indent=2)
    assert path.read_text() == '{\n  "b": 1\n}\n'
    assert sorted(p.name for p in path.parent.iterdir()) == ["x.json"]  # no temporary file left


def test_write_json_failure_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    prelude.write_json(path, {"old": True})
    with pytest.raises(TypeError):
        prelude.write_json(path, {"new": object()})
    assert json.loads(path.read_text()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]
    prelude.write_json(path, {"v": np.float32(0.5)}, default=float)  # numpy scalars through `default`
    assert json.loads(path.read_text()) == {"v": 0.5}


def test_result_name_joins_the_non_empty_suffixes() -> None:
    assert prelude.result_name("forward_backward") == "forward_backward"
    assert prelude.result_name("forward_backward", "", "pixels", "", "run2") == "forward_backward_pixels_run2"
    assert prelude.result_name("twin-pick-cube", "state64", "jax", "") == "twin-pick-cube_state64_jax"


def test_split_passthrough() -> None:
    assert prelude.split_passthrough(["--steps", "5"]) == (["--steps", "5"], [])
    assert prelude.split_passthrough(["--steps", "5", "--", "--utd", "4", "--"]) == (["--steps", "5"],
                                                                                     ["--utd", "4", "--"])


def test_set_env_defaults_never_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in (*prelude.RENDER_ENV, *prelude.ONE_THREAD_ENV):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    prelude.set_env_defaults()
    assert os.environ["MUJOCO_GL"] == "osmesa" and os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    assert "OMP_NUM_THREADS" not in os.environ
    prelude.set_env_defaults(one_thread=True)
    assert all(os.environ[k] == "1" for k in prelude.ONE_THREAD_ENV)


def test_parallel_map_keeps_the_order_in_process_and_in_spawned_processes() -> None:
    calls = [(1, 2), (3, 4), (5, 6)]
    assert prelude.parallel_map(operator.add, calls, jobs=1) == [3, 7, 11]
    assert prelude.parallel_map(operator.add, calls, jobs=2) == [3, 7, 11]


# ------------------------------------------------------------------------------------------------ tables


@pytest.mark.parametrize(("value", "spec", "shown"), [
    (None, "9.1f", "        -"),
    (12.345, "9.1f", "     12.3"),
    (None, ">6.0%", "     -"),
    (0.5, ">6.0%", "   50%"),
    (None, ".2f", "-"),
    (None, "<5", "-    "),
    (None, "*^5.1f", "**-**"),
    (None, "=+08.2f", "       -"),
])
def test_cell_pads_missing_values_like_the_number_would_be(value: Any, spec: str, shown: str) -> None:
    assert prelude.cell(value, spec) == shown


def test_cell_missing_text() -> None:
    assert prelude.cell(None, ">8", missing="never") == "   never"
    assert prelude.cell(1500, ">8", missing="never") == "    1500"


def test_print_table(capsys: pytest.CaptureFixture[str]) -> None:
    prelude.print_table("a    b", ["1    2", "3    4"])
    assert capsys.readouterr().out == "a    b\n------\n1    2\n3    4\n"


# ------------------------------------------------------------------------------------------------ learning curves


def _run(seed: int, points: list[tuple[int, float]]) -> dict[str, Any]:
    rows = [{"env_step": s, "success_rate": r, "updates_per_s": 10.0 * (i + 1)} for i, (s, r) in enumerate(points)]
    return prelude.summarize_run(seed, {"rows": rows, "wall_s": 1.0}, Path("run"), steps=3000)


def test_summarize_run_and_the_first_step_at_90() -> None:
    run = _run(0, [(1003, 0.2), (2001, 0.95), (2998, 0.85)])
    assert run["first_step_at_90"] == 2001 and run["final_success_rate"] == 0.85
    assert run["best_success_rate"] == 0.95 and run["env_steps_done"] == 2998
    assert run["stopped_by_budget"] is True  # 2998 < 3000 steps
    assert run["updates_per_s"] == pytest.approx(25.0)  # the first evaluation's rate is left out
    assert prelude.first_step_at(run["curve"], 0.5) == 2001
    assert prelude.first_step_at(run["curve"], 0.99) is None


def test_mean_curve_bins_evaluations_and_keeps_steps_every_seed_has() -> None:
    runs = [_run(0, [(1003, 0.2), (2001, 0.9)]), _run(1, [(998, 0.4), (2004, 1.0), (3002, 1.0)])]
    assert prelude.eval_bin(1003, 1000) == 1000 and prelude.eval_bin(1003, 0) == 1003
    assert prelude.mean_curve(runs, 1000) == [(1000, pytest.approx(0.3)), (2000, pytest.approx(0.95))]
    assert prelude.mean_first_step(runs, steps=3000) == pytest.approx((2001 + 2004) / 2)
    never = _run(2, [(1000, 0.1)])
    assert prelude.mean_first_step([runs[0], never], steps=3000) == pytest.approx((2001 + 3000) / 2)


def test_print_success_table_marks_missing_evaluations(capsys: pytest.CaptureFixture[str]) -> None:
    runs = [_run(0, [(1003, 0.2)]), _run(1, [(998, 0.4), (2004, 1.0)])]
    prelude.print_success_table([("seed 0", runs[0]), ("seed 1", runs[1])], 1000)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["env", "steps", "seed", "0", "seed", "1", "mean"]
    assert set(lines[1]) == {"-"}
    assert lines[2].split() == ["1000", "20%", "40%", "30%"]
    assert lines[3].split() == ["2000", "-", "100%", "100%"]


# ------------------------------------------------------------------------------------------------ the scripts


def test_there_are_benchmark_scripts() -> None:
    assert len(SCRIPTS) >= 14


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_every_benchmark_answers_help(script: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage:")
    assert not list(tmp_path.iterdir())  # --help writes nothing


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_no_benchmark_copies_the_prelude(script: Path) -> None:
    text = script.read_text()
    assert "from _prelude import" in text
    for copied in ("sys.path.insert", "parents[1]", 'os.environ.setdefault("MUJOCO_GL"', ".json.tmp",
                   "ProcessPoolExecutor", 'strftime("%Y-%m-%dT%H:%M:%S")'):
        assert copied not in text, f"{script.name} sets up {copied!r} itself: use benchmarks/_prelude.py"


# ------------------------------------------------------------------------------------------------ classifier_boundary


def _load_script(name: str) -> Any:
    """A benchmark script as a module (its set-up writes env defaults: restored afterwards)."""
    saved, path = dict(os.environ), list(sys.path)
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCHMARKS / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        os.environ.clear()
        os.environ.update(saved)
        sys.path[:] = path


def test_classifier_boundary_summary_counts_the_reward_models_decisions() -> None:
    cb = _load_script("classifier_boundary")
    # two episodes of 6 frames; truth from frame 2 of episode 0, never in episode 1
    truth = np.array([0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0], bool)
    height = np.where(truth, 0.08, 0.0)
    data = {"truth": truth, "height_m": height, "episode": np.repeat([0, 1], 6)}
    positive = np.array([0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0], bool)
    alone = cb._summary(positive, np.ones(12, bool), data, 3)
    # alone: frame 1 of ep 0 and frames 0-2 of ep 1 are false positives; the gate ends ep 0 at frame 3 (truth there)
    # and ep 1 at frame 2 (no truth)
    assert (alone["all_frames"]["tp"], alone["all_frames"]["fp"], alone["all_frames"]["fn"]) == (4, 4, 0)
    assert alone["gate_ends"] == 2 and alone["gate_ends_without_truth"] == 1
    assert alone["until_gate"]["tp"] + alone["until_gate"]["fn"] == 2  # ep 0 frames 2-3 are the truth it covers
    assert alone["lateness_steps"] == [-1] and alone["never_fired"] == 0
    # a predicate false on ep 0's frame 1 and on all of ep 1: those frames are not positive, ep 1 never ends
    ok = np.array([1, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0], bool)
    rm = cb._summary(positive, ok, data, 3)
    assert (rm["all_frames"]["tp"], rm["all_frames"]["fp"], rm["all_frames"]["fn"]) == (4, 0, 0)
    assert rm["all_frames"]["precision"] == 1.0
    assert rm["gate_ends"] == 1 and rm["gate_ends_without_truth"] == 0
    # the gate counts classifier positives in a row and checks the predicate only on the frame it ends at (as
    # ClassifierReward.step): frame 1's failing predicate does not reset the run, so ep 0 still ends at frame 3
    assert rm["lateness_steps"] == [0] and rm["gate_delay_steps"] == [1]
    assert rm["bands"][0]["positive_share"] == 0.0 and alone["bands"][0]["positive_share"] == 4 / 8
    # the false positives listed: where they are, the proprio with them, whether the truth comes next
    state = np.zeros((12, 19), np.float32)
    state[:, 12] = np.linspace(0.0, 0.066, 12)
    fps = cb._false_positives(positive, np.linspace(0.5, 1.0, 12), {**data, "state": state})
    assert [(f["episode"], f["step"], f["next_frame_true"]) for f in fps] == [(0, 1, True), (1, 0, False),
                                                                               (1, 1, False), (1, 2, False)]
    assert fps[0]["height_cm"] == 0.0 and fps[0]["finger_gap_m"] == pytest.approx(0.006, abs=1e-4)
    assert len(cb._false_positives(positive, np.ones(12), {**data, "state": state}, limit=2)) == 2


def test_classifier_line_profile_tables_the_lowest_cube_row_per_frame() -> None:
    lp = _load_script("classifier_line_profile")
    # four 8x8 frames: a green patch whose lowest row is 5, 5, 6 and (frame 3) none; the heights and truth beside
    images = np.full((4, 8, 8, 3), 40, np.uint8)
    images[0, 3:6, 2:4] = (40, 200, 60)
    images[1, 4:6, 5:7] = (40, 200, 60)
    images[2, 4:7, 2:4] = (40, 200, 60)
    images[2, 7, 0] = (200, 200, 200)  # grey, not the cube's colour
    height = np.array([5.6, 5.2, 4.8, 6.0])
    truth = np.array([True, True, False, True])
    rows = lp.lowest_cube_rows(images, height, truth)
    assert [(r["row"], r["frames"], r["true_share"]) for r in rows] == [(5, 2, 1.0), (6, 1, 0.0)]
    assert rows[0]["height_cm_min"] == 5.2 and rows[0]["height_cm_max"] == 5.6
    # frames outside 3-9 cm are not counted
    assert lp.lowest_cube_rows(images, np.array([2.0, 9.5, 4.8, 6.0]), truth) == [rows[1]]


def test_main_command_sums_the_actors_reward_model_frame_counts() -> None:
    mc = _load_script("main_command")
    rm = {"frame_tp": 3, "frame_fp": 1, "frame_fn": 2, "frame_tn": 10, "frame_precision": 0.75}
    summary = {"actor_stats": {"actor-0": {"reward_model": rm},
                               "actor-1": {"reward_model": {**rm, "frame_tp": 5}},
                               "actor-2": {"episodes": 4},  # no classifier reward: not counted
                               "actor-3": "not a dict"}}
    assert mc._reward_model_frames(summary) == {"tp": 8, "fp": 2, "fn": 4, "tn": 20}
    assert mc._reward_model_frames({"actor_stats": {"actor-0": {"episodes": 1}}}) is None
    assert mc._reward_model_frames({}) is None
    onsets = {"onset_on_time": 2, "onset_late": 3, "frame_fn_late": 4}
    summary["actor_stats"]["actor-0"]["reward_model"].update(onsets)
    summary["actor_stats"]["actor-1"]["reward_model"].update(onsets, onset_late=1)
    got = mc._reward_model_onsets(summary)
    assert got is not None and (got["onset_on_time"], got["onset_late"], got["frame_fn_late"]) == (4, 4, 8)
    assert got["onset_missed"] == 0 and mc._reward_model_onsets({}) is None
