"""Sphinx configuration of the robot-rl documentation site: markdown pages (MyST) in this directory; the tables of
figures they include are generated from benchmarks/results by `python -m benchmarks.tables` (docs/generated/).

Build (warnings are errors, as in `bash scripts/dev.sh test`)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html
"""

project = "robot-rl"
author = "the robot-rl authors"
copyright = "the robot-rl authors, Apache-2.0"

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
# generated/ holds tables the pages include; they are not pages of their own
exclude_patterns = ["_build", "generated"]
# "page.md#a-section-title" links: anchors for headings down to level 3
myst_heading_anchors = 3

html_theme = "alabaster"
html_title = "robot-rl"
html_theme_options = {"page_width": "1200px", "sidebar_width": "240px"}
