"""Every `robot-rl` subcommand without the optional packages it needs: one line on stderr naming the extra to
install (``pip install -e 'CHECKOUT[learn]'`` in a checkout: robot_rl.extras.install_hint), exit code 1, no
traceback; and the commands that need no extra
still run with every extra missing. Each case runs `robot_rl.cli.main` in a fresh interpreter whose
``sys.modules`` maps the extra's packages to None, which makes importing them fail as if not installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from robot_rl.cli import SUBCOMMANDS
from robot_rl.episodes import Episode, save_episode
from robot_rl.errors import MissingExtraError
from robot_rl.extras import EXTRA_MODULES, extra_of, install_hint, missing_extra, require_extras

ROOT = Path(__file__).resolve().parents[1]
RUNNER = """
import sys
for extra in sys.argv[1].split(","):
    for name in EXTRA_MODULES[extra] if extra else ():
        sys.modules[name] = None   # `import name` now raises ModuleNotFoundError, as if not installed
from robot_rl.cli import main
raise SystemExit(main(sys.argv[2:]))
"""
ALL_EXTRAS = ",".join(EXTRA_MODULES)


def run_without(extras: str, *argv: str, tmp: Path, path_env: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MUJOCO_GL": "egl", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    if path_env is not None:
        env["PATH"] = path_env
    code = f"EXTRA_MODULES = {EXTRA_MODULES!r}\n{RUNNER}"
    return subprocess.run([sys.executable, "-c", code, extras, *argv], capture_output=True, text=True, cwd=tmp,
                          env=env, timeout=120)


@pytest.fixture(scope="module")
def episodes_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tiny recorded episode (state + an 8x8 camera, a seed to replay from)."""
    d = tmp_path_factory.mktemp("episodes")
    obs = [{"state": np.zeros(19, np.float32), "images": {"front": np.zeros((8, 8, 3), np.uint8)}}] * 3
    save_episode(Episode.from_steps(obs, np.zeros((2, 7)), [0, 0], [False, False], [False, True],
                                    task="twin-reach", info={"seed": 0}), d)
    return d


# (subcommand, the extra made unavailable, its arguments); "{tmp}" / "{episodes}" are filled in
MISSING: list[tuple[str, str, tuple[str, ...]]] = [
    ("demo", "sim", ("--task", "twin-reach", "--out", "{tmp}/demo", "--episodes", "1")),
    ("train", "learn", ("--task", "twin-reach", "--out", "{tmp}/train")),
    ("train", "sim", ("--task", "twin-reach", "--out", "{tmp}/train")),
    ("train", "jax", ("--task", "twin-reach", "--out", "{tmp}/train", "--backend", "jax")),
    ("eval", "learn", ("--checkpoint", "{tmp}/run")),
    ("train-bc", "learn", ("--task", "twin-reach", "--demos", "{episodes}", "--out", "{tmp}/bc")),
    ("train-bc", "sim", ("--task", "twin-reach", "--demos", "{episodes}", "--out", "{tmp}/bc")),
    ("record-demos", "sim", ("--task", "twin-reach", "--out", "{tmp}/demos", "--episodes", "1")),
    ("record-demos", "teleop", ("--task", "twin-reach", "--out", "{tmp}/demos", "--teleop", "gamepad")),
    ("record-labels", "sim", ("--task", "twin-reach", "--out", "{tmp}/labels")),
    ("record-labels", "teleop", ("--task", "twin-reach", "--out", "{tmp}/labels", "--teleop", "keyboard")),
    ("episodes", "sim", ("replay", "{episodes}")),
    ("train-classifier", "learn", ("--labels", "{episodes}", "--out", "{tmp}/cls")),
    ("eval-classifier", "learn", ("--classifier", "{tmp}/cls", "--labels", "{episodes}")),
    ("convert-encoder", "learn", ("{tmp}/resnet10_params.pkl", "{tmp}/r10.safetensors")),
    ("pretrain-encoder", "learn", ("{episodes}", "--out", "{tmp}/cell.safetensors")),
    ("audit-labels", "learn", ("--audit", "{tmp}/audit", "--classifier", "{tmp}/cls", "--out", "{tmp}/al",
                               "--true-success")),
    ("robot-server", "sim", ("--backend", "twin", "--task", "twin-reach", "--bind", "tcp://127.0.0.1:0")),
    ("robot-server", "ros", ("--backend", "ros2", "--task", "twin-reach", "--bind", "tcp://127.0.0.1:0",
                             "--allow-twin-box")),
    ("ros2-twin", "ros", ("--task", "twin-reach", "--max-seconds", "1")),
    ("ros2-twin", "sim", ("--task", "twin-reach", "--max-seconds", "1")),
    ("learner", "learn", ("--task", "twin-reach", "--out", "{tmp}/learner")),
    ("learner", "sim", ("--task", "twin-reach", "--out", "{tmp}/learner")),
    ("actor", "learn", ("--task", "twin-reach", "--max-steps", "1")),
    ("actor", "sim", ("--task", "twin-reach", "--max-steps", "1")),
    ("sim", "learn", ("--task", "twin-reach", "--out", "{tmp}/sim")),
    ("sim", "sim", ("--task", "twin-reach", "--out", "{tmp}/sim")),
    ("check-hardware", "real", ("--robot-ip", "127.0.0.1")),
    ("safety-box", "real", ("record", "--robot-ip", "127.0.0.1", "--task", "pick_cube", "--out", "{tmp}/box.json")),
]
# commands that need no extra at all: (subcommand, arguments, text expected on stdout)
NO_EXTRA: list[tuple[str, tuple[str, ...], str]] = [
    ("tasks", (), "twin-reach"),
    ("task", ("init", "--base", "twin-pick-cube", "--out", "{tmp}/lab.toml"), "lab.toml"),
    ("keys", ("generate", "{tmp}/keys"), ""),
    ("episodes", ("inspect", "{episodes}"), "episode_000000"),
    ("cameras", ("list",), install_hint("real")),  # lists each camera library's state, names the extra
]


def test_every_subcommand_is_covered() -> None:
    covered = {c for c, _, _ in MISSING} | {c for c, _, _ in NO_EXTRA} | {"estop"}  # estop: its own test below
    assert covered == set(SUBCOMMANDS), f"add the new command(s) {set(SUBCOMMANDS) - covered} to this file"


@pytest.mark.slow
@pytest.mark.parametrize(("command", "extra", "argv"), MISSING, ids=[f"{c}-{e}" for c, e, _ in MISSING])
def test_a_missing_extra_is_named_in_one_line(command: str, extra: str, argv: tuple[str, ...], tmp_path: Path,
                                              episodes_dir: Path) -> None:
    args = [a.format(tmp=tmp_path, episodes=episodes_dir) for a in argv]
    res = run_without(extra, command, *args, tmp=tmp_path)
    err = res.stderr.strip()
    assert res.returncode == 1, (res.returncode, res.stdout[-2000:], res.stderr[-3000:])
    assert "Traceback" not in res.stderr and len(err.splitlines()) == 1, res.stderr[-3000:]
    assert err.startswith(f"robot-rl {command}: error: ") and install_hint(extra) in err, err


@pytest.mark.slow
@pytest.mark.parametrize(("command", "argv", "expected"), NO_EXTRA, ids=[c for c, _, _ in NO_EXTRA])
def test_commands_without_extras_run_with_every_extra_missing(command: str, argv: tuple[str, ...], expected: str,
                                                              tmp_path: Path, episodes_dir: Path) -> None:
    args = [a.format(tmp=tmp_path, episodes=episodes_dir) for a in argv]
    res = run_without(ALL_EXTRAS, command, *args, tmp=tmp_path)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert expected in res.stdout


def test_video_export_without_the_video_extra_falls_back_to_png_and_names_it(tmp_path: Path,
                                                                             episodes_dir: Path) -> None:
    res = run_without("video", "episodes", "export", str(episodes_dir), "--video", "--out", str(tmp_path / "x"),
                      tmp=tmp_path, path_env="/nonexistent")  # no ffmpeg on PATH either
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    assert install_hint("video") in res.stderr and (tmp_path / "x" / "episode_000000.png").is_file()


def test_missing_extra_maps_import_errors_to_extras(monkeypatch: pytest.MonkeyPatch) -> None:
    err = ModuleNotFoundError("No module named 'torch'", name="torch")
    mapped = missing_extra(err)
    assert isinstance(mapped, MissingExtraError) and install_hint("learn") in str(mapped)
    assert missing_extra(ModuleNotFoundError("x", name="no_such_pkg")) is None  # a bug, not a missing extra
    assert extra_of("pynput.keyboard") == "teleop" and extra_of("imageio_ffmpeg") == "video"
    assert extra_of("numpy") is None
    require_extras(("sim", "learn"), "the tests")  # installed here: no error
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "mujoco", None)
    with pytest.raises(MissingExtraError,
                       match=r"robot-rl sim needs mujoco, torch .*install with: pip install -e '.*\[sim,learn\]'"):
        require_extras(("sim", "learn"), "robot-rl sim")


@pytest.mark.slow
def test_estop_needs_no_extra_and_reports_an_unreachable_server_in_one_line(tmp_path: Path) -> None:
    """The e-stop must work wherever robot-rl is installed: with every extra missing it reaches the server (here
    none listens) and says so in one line, never a traceback or a missing-extra error."""
    res = run_without(ALL_EXTRAS, "estop", "tcp://127.0.0.1:1", "--timeout", "0.5", tmp=tmp_path)
    err = res.stderr.strip()
    assert res.returncode == 1 and "Traceback" not in res.stderr and len(err.splitlines()) == 1, res.stderr[-3000:]
    assert err.startswith("robot-rl estop: error: ") and "unreachable" in err and "pip install" not in err, err
