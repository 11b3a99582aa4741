"""`robot-rl episodes` (inspect / export / replay) on real recordings: short scripted twin-reach episodes
recorded with `robot-rl record-demos` (state mode, and 64x64 images)."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import stat
import struct
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from demos.formats import video
from demos.formats.episode_io import EXIT_DRIFT, EXIT_ERROR, EXIT_OK, EXIT_SOME_SKIPPED, EpisodeToolError
from demos.formats.episode_tools import export_episodes
from demos.formats.video import camera_strip, sample_indices
from demos.recording.demos import parse_record_demos_args, record_demos
from robot_rl import cli
from robot_rl.episodes import Episode, episode_paths, episode_to_arrays, load_episode

IMAGE = 64


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("episodes")
    state, pixels = root / "state", root / "pixels"
    assert record_demos(parse_record_demos_args(["--task", "twin-reach", "--episodes", "3", "--out", str(state),
                                                 "--obs-mode", "state", "--seed", "3"])) == 0
    assert record_demos(parse_record_demos_args(["--task", "twin-reach", "--episodes", "1", "--out", str(pixels),
                                                 "--image-size", str(IMAGE), "--seed", "7"])) == 0
    return {"state": state, "pixels": pixels}


def run(argv: list[str]) -> tuple[int, str, str]:
    """`robot-rl episodes ARGV`: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(["episodes", *argv])
    return rc, out.getvalue(), err.getvalue()


def copy_dir(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def rows_by_file(table: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in table.splitlines() if line.startswith("episode_")}


# ------------------------------------------------------------------------------------------------- inspect
def test_inspect_table_matches_the_files(recordings: dict[str, Path]) -> None:
    rc, out, err = run(["inspect", str(recordings["state"])])
    assert rc == EXIT_OK and err == ""
    rows = rows_by_file(out)
    files = episode_paths(recordings["state"])
    assert sorted(rows) == [f.name for f in files]
    total_steps = total_succ = 0
    for f in files:
        ep = load_episode(f)
        _name, steps, success, succ_steps, interv, rate, cams, ret = rows[f.name]
        assert int(steps) == ep.length
        assert success == ("yes" if ep.is_success else "no")
        assert int(succ_steps) == int(ep.success.sum())
        assert int(interv) == int(ep.intervention.sum()) and rate == "100%"   # demos: every step is teleop
        assert cams == "-"
        assert float(ret) == pytest.approx(float(ep.rewards.sum()), abs=0.005)
        total_steps += ep.length
        total_succ += ep.is_success
    total = out.strip().splitlines()[-1]
    assert total.startswith(f"total: 3 episodes, {total_steps} steps, {total_succ}/3 successful")


def test_inspect_lists_cameras_with_size(recordings: dict[str, Path]) -> None:
    rc, out, _ = run(["inspect", str(recordings["pixels"])])
    assert rc == EXIT_OK
    (row,) = rows_by_file(out).values()
    assert row[6:8] == [f"front:{IMAGE}x{IMAGE}", f"wrist:{IMAGE}x{IMAGE}"]


def test_inspect_names_corrupt_files_and_lists_the_others(recordings: dict[str, Path], tmp_path: Path) -> None:
    d = copy_dir(recordings["state"], tmp_path / "eps")
    good = [f.name for f in episode_paths(d)]
    data = (d / good[0]).read_bytes()
    (d / "episode_000010.npz").write_bytes(data[: len(data) // 2])          # truncated
    (d / "episode_000011.npz").write_bytes(b"not an npz at all")             # garbage
    rc, out, err = run(["inspect", str(d)])
    assert rc == EXIT_SOME_SKIPPED
    assert sorted(rows_by_file(out)) == good
    assert "total: 3 episodes" in out
    bad_lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(bad_lines) == 2
    assert any("episode_000010.npz" in line for line in bad_lines)
    assert any("episode_000011.npz" in line for line in bad_lines)


def test_inspect_through_the_robot_rl_command(recordings: dict[str, Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["episodes", "inspect", str(recordings["state"])]) == EXIT_OK
    assert "total: 3 episodes" in capsys.readouterr().out
    assert cli.main(["episodes", "inspect", str(tmp_path / "missing")]) == EXIT_ERROR
    assert "no such episode file or directory" in capsys.readouterr().err
    assert "episodes" in cli.SUBCOMMANDS and "record-labels" in cli.SUBCOMMANDS


def test_inspect_one_file(recordings: dict[str, Path]) -> None:
    f = episode_paths(recordings["state"])[1]
    rc, out, _ = run(["inspect", str(f)])
    assert rc == EXIT_OK and list(rows_by_file(out)) == [f.name]


# ------------------------------------------------------------------------------------------------- export
def decode_png(data: bytes) -> np.ndarray:
    """Minimal decoder for what robot_rl.images writes (8-bit RGB, filter 0 on every row)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w, h = 8, b"", 0, 0
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == struct.unpack(">I", data[pos + 8 + n : pos + 12 + n])[0]
        if kind == b"IHDR":
            w, h, depth, colour = struct.unpack(">IIBB", body[:10])
            assert (depth, colour) == (8, 2)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + 3 * w)
    assert np.all(raw[:, 0] == 0)
    return raw[:, 1:].reshape(h, w, 3)


def test_sample_indices_spread_over_time() -> None:
    np.testing.assert_array_equal(sample_indices(5, 10), [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(sample_indices(11, 3), [0, 5, 10])
    np.testing.assert_array_equal(sample_indices(9, 1), [0])
    for n_frames in range(1, 40):
        for n in range(1, n_frames + 1):
            idx = sample_indices(n_frames, n)
            assert len(idx) == n and idx[0] == 0 and np.all(np.diff(idx) > 0)
            assert n == 1 or idx[-1] == n_frames - 1


def test_export_png_strip_holds_the_episode_frames(recordings: dict[str, Path], tmp_path: Path) -> None:
    out_dir = tmp_path / "png"
    rc, out, err = run(["export", str(recordings["pixels"]), "--frames", "5", "--out", str(out_dir)])
    assert rc == EXIT_OK, err
    (src,) = episode_paths(recordings["pixels"])
    png = out_dir / f"{src.stem}.png"
    assert png.name in out
    img = decode_png(png.read_bytes())
    ep = load_episode(src)
    pad = 2
    assert img.shape == (2 * (IMAGE + pad) + pad, 5 * (IMAGE + pad) + pad, 3)   # rows = cameras, cols = frames
    idx = sample_indices(ep.length + 1, 5)
    assert idx[0] == 0 and idx[-1] == ep.length
    for r, cam in enumerate(("front", "wrist")):
        for c, i in enumerate(idx):
            y, x = pad + r * (IMAGE + pad), pad + c * (IMAGE + pad)
            np.testing.assert_array_equal(img[y : y + IMAGE, x : x + IMAGE], ep.observations[f"images/{cam}"][i])
    # the frames differ over time (the arm moves), so the check above is not vacuous
    assert not np.array_equal(ep.observations["images/front"][0], ep.observations["images/front"][-1])


def test_export_without_images_is_a_clear_error(recordings: dict[str, Path], tmp_path: Path) -> None:
    rc, out, err = run(["export", str(recordings["state"]), "--out", str(tmp_path / "x")])
    assert rc == EXIT_ERROR and out == ""
    for f in episode_paths(recordings["state"]):
        assert f"{f}: the episode has no camera images" in err
    assert not (tmp_path / "x").exists() or not any((tmp_path / "x").iterdir())
    with pytest.raises(EpisodeToolError, match="no camera images"):
        camera_strip(load_episode(episode_paths(recordings["state"])[0]), 4)


def test_export_mixed_dir_exports_the_good_ones(recordings: dict[str, Path], tmp_path: Path) -> None:
    d = copy_dir(recordings["pixels"], tmp_path / "mixed")
    shutil.copy(episode_paths(recordings["state"])[0], d / "episode_000001.npz")
    rc, _out, err = run(["export", str(d), "--frames", "3"])
    assert rc == EXIT_SOME_SKIPPED
    assert (d / "export" / "episode_000000.png").exists() and not (d / "export" / "episode_000001.png").exists()
    assert "episode_000001.npz: the episode has no camera images" in err


def fake_ffmpeg(bin_dir: Path, exit_code: int = 0) -> None:
    """An `ffmpeg` stand-in: reads the raw frames from stdin and writes its argv and the byte count as JSON
    to the output path (its last argument)."""
    bin_dir.mkdir()
    script = bin_dir / "ffmpeg"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        "data = sys.stdin.buffer.read()\n"
        f"if {exit_code}:\n"
        "    sys.stderr.write('encoder exploded')\n"
        f"    sys.exit({exit_code})\n"
        "open(sys.argv[-1], 'w').write(json.dumps({'argv': sys.argv[1:], 'nbytes': len(data)}))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def test_export_video_pipes_every_frame_to_ffmpeg(recordings: dict[str, Path], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    fake_ffmpeg(tmp_path / "bin")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    rc, _out, err = run(["export", str(recordings["pixels"]), "--video", "--out", str(tmp_path / "vid"), "--fps", "5"])
    assert rc == EXIT_OK, err
    (src,) = episode_paths(recordings["pixels"])
    ep = load_episode(src)
    mp4 = tmp_path / "vid" / f"{src.stem}.mp4"
    record = json.loads(mp4.read_text())
    argv = record["argv"]
    w, h = (int(v) for v in argv[argv.index("-s") + 1].split("x"))
    assert w % 2 == 0 and h % 2 == 0
    assert (h, w) == (IMAGE + 4, 2 * IMAGE + 6)          # two cameras side by side, 2 px padding
    assert record["nbytes"] == (ep.length + 1) * h * w * 3
    assert argv[argv.index("-r") + 1] == "5" and argv[argv.index("-pix_fmt") + 1] == "rgb24"
    assert [p.name for p in (tmp_path / "vid").iterdir()] == [mp4.name]       # no temp file left


def test_export_video_reports_an_ffmpeg_failure(recordings: dict[str, Path], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    fake_ffmpeg(tmp_path / "bin", exit_code=1)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    rc, _, err = run(["export", str(recordings["pixels"]), "--video", "--out", str(tmp_path / "vid")])
    assert rc == EXIT_ERROR and "ffmpeg failed (exit 1): encoder exploded" in err
    assert not any((tmp_path / "vid").iterdir())


def test_export_video_falls_back_to_png_without_ffmpeg(recordings: dict[str, Path], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(video, "bundled_ffmpeg", lambda: None)  # as without the video extra
    rc, _, err = run(["export", str(recordings["pixels"]), "--video", "--out", str(tmp_path / "vid")])
    assert rc == EXIT_OK
    assert "no ffmpeg binary on PATH" in err and "[video]'" in err
    assert [p.suffix for p in (tmp_path / "vid").iterdir()] == [".png"]


def test_export_video_writes_a_real_mp4_that_decodes_back(recordings: dict[str, Path], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Through a real ffmpeg (the imageio-ffmpeg wheel of the video/dev extras): encode, decode, compare."""
    import subprocess

    ffmpeg = video.bundled_ffmpeg()
    if ffmpeg is None:
        pytest.skip("imageio-ffmpeg (the video extra) is not installed")
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no system ffmpeg: the bundled one must be found
    rc, _out, err = run(["export", str(recordings["pixels"]), "--video", "--out", str(tmp_path / "vid"), "--fps",
                         "10"])
    assert rc == EXIT_OK, err
    (src,) = episode_paths(recordings["pixels"])
    ep = load_episode(src)
    frames = video.video_frames(ep, str(src))
    h, w, _ = frames[0].shape
    mp4 = tmp_path / "vid" / f"{src.stem}.mp4"
    assert mp4.read_bytes()[4:8] == b"ftyp"  # an ISO-BMFF (mp4) file, not a PNG fallback
    decoded = subprocess.run([ffmpeg, "-hide_banner", "-loglevel", "error", "-i", str(mp4), "-f", "rawvideo",
                              "-pix_fmt", "rgb24", "-"], capture_output=True, check=True).stdout
    assert len(decoded) == len(frames) * h * w * 3  # every frame, at the written size
    back = np.frombuffer(decoded, np.uint8).reshape(len(frames), h, w, 3).astype(np.int16)
    err_per_frame = np.abs(back - np.stack(frames).astype(np.int16)).mean(axis=(1, 2, 3))
    assert err_per_frame.max() < 10.0, err_per_frame  # lossy (yuv420p), but the same pictures in the same order
    if len(frames) > 1:  # and not just similar-looking: frame order matters where the frames differ
        moving = [i for i in range(1, len(frames)) if np.abs(np.int16(frames[i]) - frames[0]).mean() > 3 * 10.0]
        for i in moving[:1]:
            assert np.abs(back[i] - np.int16(frames[0])).mean() > err_per_frame[i]


# ------------------------------------------------------------------------------------------------- replay
def replay_rows(out: str) -> dict[str, list[str]]:
    return rows_by_file(out)


def test_replay_of_an_unmodified_recording_has_no_drift(recordings: dict[str, Path]) -> None:
    for kind in ("state", "pixels"):  # a pixels recording replays in state mode: rendering never moves the arm
        rc, out, err = run(["replay", str(recordings[kind]), "--tolerance", "1e-6"])
        assert rc == EXIT_OK, err
        rows = replay_rows(out)
        assert sorted(rows) == [f.name for f in episode_paths(recordings[kind])]
        for f in episode_paths(recordings[kind]):
            _, steps, replayed, max_mm, final_mm, succ, reproduced = rows[f.name]
            assert int(steps) == int(replayed) == load_episode(f).length
            assert float(max_mm) == 0.0 and float(final_mm) == 0.0
            assert succ == "yes/yes" and reproduced == "yes"


def rewrite(path: Path, ep: Episode) -> None:
    """Overwrite an episode file in place (to tamper with a recording)."""
    arrays: dict[str, Any] = episode_to_arrays(ep)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def perturb(path: Path, delta_x: float) -> None:
    ep = load_episode(path)
    ep.actions[:6, 0] = np.clip(ep.actions[:6, 0] + delta_x, -1, 1)
    rewrite(path, ep)


def test_replay_of_perturbed_actions_drifts(recordings: dict[str, Path], tmp_path: Path) -> None:
    d = copy_dir(recordings["state"], tmp_path / "eps")
    target = episode_paths(d)[1]
    perturb(target, delta_x=1.0)   # 6 steps pushed up to 2 cm/step further along +x
    rc, out, err = run(["replay", str(d), "--tolerance", "0.001"])
    assert rc == EXIT_DRIFT and "drift above the tolerance" in err
    rows = replay_rows(out)
    assert float(rows[target.name][3]) > 20.0            # max drift > 2 cm
    others = [n for n in rows if n != target.name]
    assert others and all(float(rows[n][3]) == 0.0 for n in others)
    # without a tolerance the drift is reported, not an error
    assert run(["replay", str(d)])[0] == EXIT_OK


def test_replay_needs_a_seed(recordings: dict[str, Path], tmp_path: Path) -> None:
    d = copy_dir(recordings["state"], tmp_path / "eps")
    target = episode_paths(d)[0]
    ep = load_episode(target)
    ep.info.pop("seed")
    rewrite(target, ep)
    rc, out, err = run(["replay", str(d)])
    assert rc == EXIT_SOME_SKIPPED
    assert f"{target}: no integer info['seed']" in err
    assert target.name not in replay_rows(out) and len(replay_rows(out)) == 2


def test_bad_arguments_raise_typed_errors(recordings: dict[str, Path]) -> None:
    with pytest.raises(EpisodeToolError, match="--frames"):
        export_episodes(recordings["pixels"], frames=0)
    rc, _out, err = run(["export", str(recordings["pixels"]), "--frames", "0"])  # the command: one line
    assert rc == EXIT_ERROR and "--frames=0 must be >= 1" in err and err.count("\n") == 1
    with pytest.raises(SystemExit):
        run(["nonsense"])
