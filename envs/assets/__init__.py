"""MJCF assets of the MuJoCo twin (our own simple-geometry models, no meshes).

Files: panda.xml (the arm, hand, wrist camera, actuators and the wrist force/torque sensor), twin_world.xml
(options, rendering settings, table, front camera) and one scene per task, scene_<task>.xml, which includes
both. Load a scene through `envs.twin.build_model(task, ...)`, which also sizes the offscreen buffer.

Usage::

    from envs.assets import asset_path
    path = asset_path("scene_reach.xml")       # absolute pathlib.Path inside the installed package
"""

from __future__ import annotations

from pathlib import Path

ASSETS_DIR = Path(__file__).resolve().parent
"""Directory holding the MJCF files."""


def asset_path(name: str) -> Path:
    """Absolute path of the asset `name` (e.g. "scene_reach.xml"); FileNotFoundError if it does not exist."""
    path = ASSETS_DIR / name
    if not path.is_file():
        known = sorted(p.name for p in ASSETS_DIR.glob("*.xml"))
        raise FileNotFoundError(f"no asset {name!r} in {ASSETS_DIR}; known: {known}")
    return path
