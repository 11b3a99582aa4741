"""The wheel a lab installs: `python -m build --wheel` from a copy of this checkout holds every module of the
product and the twin's assets; installed with an extra into a clean virtualenv (no system site packages, nothing of
this checkout on the path), `robot-rl --help` and `robot-rl tasks` run from it, and a command whose extra is
missing names the wheel file with the extra (robot-rl is on no package index)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("robot_rl", "controllers", "envs", "learners", "actors", "demos", "supervisor")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        import build  # noqa: F401
    except ImportError as err:
        if os.environ.get("CI"):
            pytest.fail(f"the `build` package must import in CI ({err}); the dev extra installs it")
        pytest.skip(f"build is not installed ({err})")
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, src / name)
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("dist")
    res = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(src)],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    wheels = list(out.glob("robot_rl-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_the_wheel_holds_every_module_and_the_assets(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    sources = {p.relative_to(ROOT).as_posix() for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")
               if "__pycache__" not in p.parts}
    assert sources and not sources - names, f"missing from the wheel: {sorted(sources - names)[:10]}"
    assets = {p.relative_to(ROOT).as_posix() for p in (ROOT / "envs" / "assets").glob("*.xml")}
    assert assets and not assets - names, f"assets missing from the wheel: {sorted(assets - names)}"
    entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "robot-rl = robot_rl.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()


def test_the_wheel_installs_with_an_extra_into_a_clean_venv_and_runs(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py, exe = venv / "bin" / "python", venv / "bin" / "robot-rl"
    # nothing of the checkout on the path, for pip too: with it, pip takes the checkout's robot_rl.egg-info for an
    # installed robot-rl and installs nothing
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    res = subprocess.run([str(py), "-m", "pip", "install", "-q", f"{wheel}[video]"], capture_output=True, text=True,
                         timeout=900, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    run_dir = tmp_path / "elsewhere"  # not the checkout: nothing of it may be importable
    run_dir.mkdir()

    def robot_rl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=300, env=env, cwd=run_dir)

    where = subprocess.run([str(py), "-c", "import robot_rl, imageio_ffmpeg; print(robot_rl.__file__)"],
                           capture_output=True, text=True, env=env, cwd=run_dir)
    assert where.returncode == 0 and str(venv) in where.stdout and str(ROOT) not in where.stdout, where
    helped = robot_rl("--help")
    assert helped.returncode == 0 and "sim" in helped.stdout and "train" in helped.stdout, helped.stderr
    tasks = robot_rl("tasks")
    assert tasks.returncode == 0 and "twin-pick-cube" in tasks.stdout, tasks.stderr
    missing = robot_rl("sim", "--task", "twin-reach")  # needs the sim and learn extras, which are not installed
    err = missing.stderr.strip()
    assert missing.returncode == 1 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert f"pip install 'robot_rl-{wheel.name.split('-')[1]}-py3-none-any.whl[sim,learn]'" in err, err
