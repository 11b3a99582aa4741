"""The documentation tells the truth about the results: every generated table of figures equals what its results
file gives today (benchmarks.tables regenerates them in memory), and a changed result makes its table stale."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # benchmarks/ is not an installed package
    sys.path.insert(0, str(ROOT))

from benchmarks.tables import GENERATED, RESULTS, TABLES, expected_files, fill_blocks, stale_files  # noqa: E402


def test_generated_tables_match_the_results_files() -> None:
    stale = stale_files(ROOT)
    assert not stale, f"stale generated files {[str(p) for p in stale]}: run `python -m benchmarks.tables`"


def test_every_table_has_its_file_and_no_file_is_left_over() -> None:
    on_disk = {p.stem for p in (ROOT / GENERATED).glob("*.md")}
    assert on_disk == set(TABLES), f"docs/generated/ holds {sorted(on_disk ^ set(TABLES))} unlike TABLES"


def test_a_changed_result_makes_its_table_stale(tmp_path: Path) -> None:
    shutil.copytree(ROOT / RESULTS, tmp_path / RESULTS)
    for rel, text in expected_files(ROOT).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert stale_files(tmp_path) == []
    path = tmp_path / RESULTS / "transport.json"
    d = json.loads(path.read_text())
    d["speedup_transitions_per_s"]["robot-rl vs pickle REQ/REP, 2x640x480"] = 1.5
    path.write_text(json.dumps(d))
    assert GENERATED / "transport.md" in stale_files(tmp_path)
    assert "(**1.5x**)" in expected_files(tmp_path)[GENERATED / "transport.md"]


def test_figures_are_rounded_half_up_not_to_even() -> None:
    from benchmarks.tables.fmt import ksteps, pct, rnd

    assert rnd(70.5) == "71" and rnd(0.125, 2) == "0.13" and rnd(92.5) == "93"
    assert pct(0.925) == "93 %" and pct(None) == "-"
    assert ksteps(2031) == "2.0k" and ksteps(None) == "never"


def test_readme_blocks_are_filled_by_name() -> None:
    text = "a\n<!-- BEGIN generated: x -->\nold\nlines\n<!-- END generated: x -->\nb\n"
    assert fill_blocks(text, {"x": "new"}) == "a\n<!-- BEGIN generated: x -->\nnew\n<!-- END generated: x -->\nb\n"
    with pytest.raises(KeyError, match="unknown generated block 'x'"):
        fill_blocks(text, {"y": "new"})
