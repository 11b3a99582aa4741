"""The documentation's tables of figures, generated from the benchmark results (benchmarks/results/*.json).

Every table of measured figures in docs/ and the README's headline figures are written from the results file that
holds the measurement, so a quoted figure cannot drift from its run. One function per table maps the results
directory to markdown (fmt: formatting, curve lookups; speed, learning, rewards, robots: the tables; readme: the
README's blocks). `python -m benchmarks.tables` writes each table to docs/generated/NAME.md (first line: a
"generated ... do not edit" comment; the pages include them with MyST's `{include}` directive) and refreshes
README.md's blocks, the lines between `<!-- BEGIN generated: NAME -->` and `<!-- END generated: NAME -->`.
tests/test_docs.py regenerates everything in memory and fails when a committed file differs: after a benchmark
writes new results, rerun this.

Usage (from the repository root; json only, no project dependencies needed)::

    python -m benchmarks.tables            # rewrite docs/generated/*.md and README.md's generated blocks
    python -m benchmarks.tables --check    # list stale files, exit 1 if there are any (writes nothing)

Public names: TABLES, README_BLOCKS, expected_files, stale_files, fill_blocks, main.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from .diagnosis import demo_coverage_faithful_sim, pixel_diagnosis, timing_eval, timing_eval_faithful_sim
from .fmt import Results
from .learning import (
    deterministic_gap,
    faithful_scenes,
    gym_defaults,
    hl_gauss,
    insertion_diagnosis,
    interventions,
    main_command,
    no_recipe,
    no_recipe_seeds,
    residual,
    se_peg_insert_state,
    se_pick_cube_jax,
    se_pick_cube_state,
    se_pixels,
    se_pixels_cellenc,
    se_pixels_cheap,
    se_pixels_classifier_aligned,
    se_pixels_classifier_credit,
    se_pixels_classifier_slowlabels,
    se_pixels_classifier_timing,
    se_pixels_defaults,
    se_pixels_defaults_peg,
    se_pixels_faithful,
    se_pixels_faithful_last_action,
    se_pixels_faithful_notiming,
    se_pixels_faithful_opreset,
    se_pixels_faithful_opreset_demotiming,
    se_pixels_faithful_opreset_demotiming_20k,
    se_pixels_faithful_opreset_evalnotiming,
    se_pixels_faithful_opreset_intervene,
    se_pixels_faithful_opreset_notiming,
    se_pixels_faithful_spread_20k,
    se_pixels_faithful_spread_20k_lean,
    se_pixels_faithful_tray,
    se_pixels_lean,
    se_pixels_lean_peg,
    se_pixels_lean_seed2,
    se_pixels_targets,
    se_pixels_timing_demotiming,
    third_party,
    warm_start,
)
from .readme import README_BLOCKS
from .rewards import (
    classifier,
    classifier_boundary,
    classifier_boundary_level_dense_probe,
    classifier_boundary_level_noshift_probe,
    classifier_boundary_level_run,
    classifier_boundary_level_s1_audit_run,
    classifier_boundary_level_s1_p06_probe,
    classifier_boundary_level_s1_run,
    classifier_boundary_lift,
    classifier_boundary_line,
    classifier_boundary_line_boundary_run,
    classifier_boundary_side,
    classifier_boundary_side_audit_run,
    classifier_boundary_side_boundary_run,
    classifier_boundary_side_level_run,
    classifier_boundary_side_run,
    classifier_boundary_side_run2,
    classifier_boundary_side_run3,
    classifier_boundary_side_run4,
    classifier_faithful_rollouts,
    classifier_line_profile,
    classifier_rollouts,
    classifier_rollouts_pretrained,
    forward_backward,
    learned_reward,
    main_command_faithful,
)
from .robots import robots_per_learner
from .speed import (
    actor_latency,
    controller_speed,
    faithful_timing,
    feature_cache,
    feature_cache_bf16,
    feature_cache_bf16_updates,
    feature_cache_compiled,
    feature_cache_defaults,
    feature_cache_lean_idle,
    feature_cache_variants,
    first_weights,
    guard_latency,
    guard_latency_franky,
    guard_latency_ros2,
    learner_speed_cpu,
    learner_speed_cpu_compile,
    learner_speed_gpu,
    pretrained_encoders,
    transport,
    twin_speed,
)

__all__ = ["README_BLOCKS", "TABLES", "expected_files", "fill_blocks", "main", "stale_files"]

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path("benchmarks/results")
GENERATED = Path("docs/generated")
README = Path("README.md")

# name -> table; written to docs/generated/NAME.md
TABLES: dict[str, Callable[[Results], str]] = {
    "twin_speed": twin_speed,
    "controller_speed": controller_speed,
    "learner_speed_cpu": learner_speed_cpu,
    "learner_speed_cpu_compile": learner_speed_cpu_compile,
    "learner_speed_gpu": learner_speed_gpu,
    "robots_per_learner": robots_per_learner,
    "feature_cache": feature_cache,
    "feature_cache_bf16": feature_cache_bf16,
    "feature_cache_bf16_updates": feature_cache_bf16_updates,
    "feature_cache_compiled": feature_cache_compiled,
    "feature_cache_lean_idle": feature_cache_lean_idle,
    "feature_cache_defaults": feature_cache_defaults,
    "feature_cache_variants": feature_cache_variants,
    "transport": transport,
    "actor_latency": actor_latency,
    "faithful_timing": faithful_timing,
    "guard_latency": guard_latency,
    "guard_latency_franky": guard_latency_franky,
    "guard_latency_ros2": guard_latency_ros2,
    "first_weights": first_weights,
    "pretrained_encoders": pretrained_encoders,
    "main_command": main_command,
    "main_command_faithful": main_command_faithful,
    "sample_efficiency_pick_cube_state": se_pick_cube_state,
    "sample_efficiency_peg_insert_state": se_peg_insert_state,
    "sample_efficiency_pick_cube_jax": se_pick_cube_jax,
    "sample_efficiency_pixels": se_pixels,
    "sample_efficiency_pixels_cellenc": se_pixels_cellenc,
    "sample_efficiency_pixels_targets": se_pixels_targets,
    "sample_efficiency_pixels_faithful": se_pixels_faithful,
    "sample_efficiency_pixels_faithful_notiming": se_pixels_faithful_notiming,
    "sample_efficiency_pixels_faithful_tray": se_pixels_faithful_tray,
    "sample_efficiency_pixels_faithful_opreset": se_pixels_faithful_opreset,
    "sample_efficiency_pixels_faithful_opreset_evalnotiming": se_pixels_faithful_opreset_evalnotiming,
    "sample_efficiency_pixels_faithful_opreset_demotiming": se_pixels_faithful_opreset_demotiming,
    "sample_efficiency_pixels_faithful_opreset_demotiming_20k": se_pixels_faithful_opreset_demotiming_20k,
    "sample_efficiency_pixels_faithful_last_action": se_pixels_faithful_last_action,
    "sample_efficiency_pixels_faithful_spread_20k": se_pixels_faithful_spread_20k,
    "sample_efficiency_pixels_faithful_spread_20k_lean": se_pixels_faithful_spread_20k_lean,
    "sample_efficiency_pixels_faithful_opreset_intervene": se_pixels_faithful_opreset_intervene,
    "sample_efficiency_pixels_faithful_opreset_notiming": se_pixels_faithful_opreset_notiming,
    "faithful_scenes": faithful_scenes,
    "timing_eval": timing_eval,
    "timing_eval_faithful_sim": timing_eval_faithful_sim,
    "demo_coverage_faithful_sim": demo_coverage_faithful_sim,
    "sample_efficiency_pixels_defaults": se_pixels_defaults,
    "sample_efficiency_pixels_defaults_peg": se_pixels_defaults_peg,
    "sample_efficiency_pixels_cheap": se_pixels_cheap,
    "sample_efficiency_pixels_lean": se_pixels_lean,
    "sample_efficiency_pixels_lean_seed2": se_pixels_lean_seed2,
    "sample_efficiency_pixels_lean_peg": se_pixels_lean_peg,
    "sample_efficiency_pixels_timing_demotiming": se_pixels_timing_demotiming,
    "sample_efficiency_pixels_classifier_timing": se_pixels_classifier_timing,
    "sample_efficiency_pixels_classifier_slowlabels": se_pixels_classifier_slowlabels,
    "sample_efficiency_pixels_classifier_aligned": se_pixels_classifier_aligned,
    "sample_efficiency_pixels_classifier_credit": se_pixels_classifier_credit,
    "residual": residual,
    "hl_gauss": hl_gauss,
    "warm_start": warm_start,
    "interventions": interventions,
    "classifier": classifier,
    "classifier_rollouts": classifier_rollouts,
    "classifier_rollouts_pretrained": classifier_rollouts_pretrained,
    "classifier_faithful_rollouts": classifier_faithful_rollouts,
    "classifier_boundary": classifier_boundary,
    "classifier_boundary_lift": classifier_boundary_lift,
    "classifier_boundary_line": classifier_boundary_line,
    "classifier_boundary_line_boundary_run": classifier_boundary_line_boundary_run,
    "classifier_boundary_side": classifier_boundary_side,
    "classifier_boundary_side_boundary_run": classifier_boundary_side_boundary_run,
    "classifier_boundary_side_run": classifier_boundary_side_run,
    "classifier_boundary_side_run2": classifier_boundary_side_run2,
    "classifier_boundary_side_run3": classifier_boundary_side_run3,
    "classifier_boundary_side_run4": classifier_boundary_side_run4,
    "classifier_boundary_side_audit_run": classifier_boundary_side_audit_run,
    "classifier_boundary_level_run": classifier_boundary_level_run,
    "classifier_boundary_level_noshift_probe": classifier_boundary_level_noshift_probe,
    "classifier_boundary_level_dense_probe": classifier_boundary_level_dense_probe,
    "classifier_boundary_side_level_run": classifier_boundary_side_level_run,
    "classifier_boundary_level_s1_run": classifier_boundary_level_s1_run,
    "classifier_boundary_level_s1_audit_run": classifier_boundary_level_s1_audit_run,
    "classifier_boundary_level_s1_p06_probe": classifier_boundary_level_s1_p06_probe,
    "classifier_line_profile": classifier_line_profile,
    "learned_reward": learned_reward,
    "forward_backward": forward_backward,
    "gym_defaults": gym_defaults,
    "no_recipe": no_recipe,
    "deterministic_gap": deterministic_gap,
    "no_recipe_seeds": no_recipe_seeds,
    "third_party": third_party,
    "insertion_diagnosis": insertion_diagnosis,
    "pixel_diagnosis": pixel_diagnosis,
}

BLOCK = re.compile(r"(<!-- BEGIN generated: (?P<name>[a-z_]+) -->\n)(?P<body>.*?)(<!-- END generated: (?P=name) -->)",
                   re.DOTALL)


def header(name: str) -> str:
    return f"<!-- generated by python -m benchmarks.tables ({name}) from benchmarks/results: do not edit -->"


def fill_blocks(text: str, bodies: dict[str, str]) -> str:
    """`text` with the body of every generated block replaced by the text of its name; an unknown name is an error."""

    def replace(m: re.Match[str]) -> str:
        name = m.group("name")
        if name not in bodies:
            raise KeyError(f"unknown generated block {name!r} (known: {', '.join(bodies)})")
        return m.group(1) + bodies[name] + "\n" + m.group(4)

    return BLOCK.sub(replace, text)


def expected_files(root: Path = ROOT) -> dict[Path, str]:
    """Every generated file's content as the results give it, by path relative to `root`."""
    res = Results(root / RESULTS)
    files = {GENERATED / f"{name}.md": f"{header(name)}\n\n{fn(res)}\n" for name, fn in TABLES.items()}
    readme = root / README
    if readme.exists():
        files[README] = fill_blocks(readme.read_text(), {name: fn(res) for name, fn in README_BLOCKS.items()})
    return files


def stale_files(root: Path = ROOT) -> list[Path]:
    """The generated files whose content on disk differs from what the results give, or that are missing."""
    return [rel for rel, text in expected_files(root).items()
            if not (root / rel).exists() or (root / rel).read_text() != text]


def main(argv: Sequence[str] | None = None, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tables",
                                     description="Generate the docs' tables of figures from benchmarks/results.")
    parser.add_argument("--check", action="store_true", help="list stale generated files, exit 1 if any")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files(root)
        for rel in stale:
            print(f"stale: {rel} (run: python -m benchmarks.tables)")
        return 1 if stale else 0
    (root / GENERATED).mkdir(parents=True, exist_ok=True)
    for rel, text in expected_files(root).items():
        path = root / rel
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {rel}")
    return 0
