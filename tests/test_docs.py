"""The documentation tells the truth about the results and stays readable: every generated table of figures (docs/
and the README's blocks) equals what its results file gives today (benchmarks.tables regenerates them in memory) and
a changed result makes its table stale; README.md stays a short front page; no user-facing page carries an issue
number; every repository path and `robot-rl` command a page names exists; every page is in the table of contents."""

from __future__ import annotations

import json
import re
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


# ---- the pages -----------------------------------------------------------------------------------------------------

PAGES = sorted((ROOT / "docs").glob("*.md"))
README = ROOT / "README.md"
USER_FACING = [README, *PAGES, *sorted((ROOT / GENERATED).glob("*.md"))]
ISSUE_NUMBER = re.compile(r"\bissues?[ #-]*\d+|\(issue-\d+\)|\bturn[ -]\d+\b|(?<![\w/&`])#\d+\b", re.IGNORECASE)
REPO_PATH = re.compile(r"(?<![\w./-])((?:benchmarks|tests|launch|scripts|docs)/[\w./-]*[\w/])")


def test_readme_is_a_short_front_page() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 250, "README.md is over 250 lines: move the detail to docs/"
    for block in ("main_command", "glance"):
        assert f"<!-- BEGIN generated: {block} -->" in text, f"README.md lost its generated block {block}"
    for page in PAGES:
        if page.stem != "index":
            assert f"(docs/{page.name})" in text, f"README.md does not point to docs/{page.name}"


def test_every_generated_table_is_included_by_a_page() -> None:
    text = "\n".join(p.read_text() for p in PAGES)
    missing = [name for name in TABLES if f"{{include}} generated/{name}.md" not in text]
    assert not missing, f"generated tables no page includes: {missing}"


@pytest.mark.parametrize("path", USER_FACING, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_issue_numbers_in_user_facing_text(path: Path) -> None:
    hits = [m.group(0) for m in ISSUE_NUMBER.finditer(path.read_text())]
    assert not hits, f"{path.name} names issue or turn numbers {hits}: say what the section is about instead"


def test_the_issue_number_pattern_catches_what_it_should() -> None:
    for bad in ["(issue 17)", "issue-14", "issues 13", "Turn-3", "see #28"]:
        assert ISSUE_NUMBER.search(bad), bad
    for fine in ["ep000003", "2x128x128", "C#", "a 17 mm issue", "`#` comments"]:
        assert not ISSUE_NUMBER.search(fine), fine


def test_repository_paths_named_in_the_pages_exist() -> None:
    missing = set()
    for page in [README, *PAGES]:
        for rel in REPO_PATH.findall(page.read_text()):
            placeholder = re.search(r"/[A-Z][A-Z_]*(/|$)", rel)  # launch/FILE
            built = rel.startswith("docs/_build")  # the docs build's output (dev.sh test builds it before pytest)
            if not placeholder and not built and not (ROOT / rel).exists() and not (ROOT / "docs" / rel).exists():
                missing.add(f"{page.name}: {rel}")
    assert not missing, f"pages name paths that do not exist: {sorted(missing)}"


def test_commands_named_in_the_pages_exist() -> None:
    from robot_rl.cli import SUBCOMMANDS

    named = {m.group(1) for p in [README, *PAGES]
             for m in re.finditer(r"`robot-rl ([a-z][a-z0-9-]*)", p.read_text())}
    assert named, "no robot-rl command found in the pages"
    assert named <= set(SUBCOMMANDS), f"pages name unknown robot-rl commands: {sorted(named - set(SUBCOMMANDS))}"


def test_every_page_is_in_the_table_of_contents() -> None:
    index = (ROOT / "docs" / "index.md").read_text()
    toc = index[index.index("{toctree}"):]
    listed = {line.strip() for line in toc.splitlines()[1:] if line.strip() and not line.startswith((":", "`"))}
    assert listed == {p.stem for p in PAGES if p.stem != "index"}
