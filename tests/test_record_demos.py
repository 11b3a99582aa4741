"""`robot-rl record-demos` with the scripted teleop: files, appending, flags, and Ctrl-C safety."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from demos.recording import demos as record_lib
from robot_rl.episodes import load_dir
from robot_rl.specs import EnvSpec


def record_main(argv: list[str]) -> int:
    """`robot-rl record-demos ARGV` through its library (errors raise, typed)."""
    return record_lib.record_demos(record_lib.parse_record_demos_args(argv))


def test_records_successful_episodes_and_appends(tmp_path) -> None:
    out = tmp_path / "demos"
    args = ["--task", "twin-reach", "--episodes", "3", "--out", str(out), "--obs-mode", "state"]
    assert record_main(args) == 0
    assert record_main([*args[:3], "2", *args[4:], "--seed", "100"]) == 0
    eps, errors = load_dir(out)
    assert errors == [] and len(eps) == 5
    assert sorted(p.name for p in out.iterdir())[-1] == "episode_000004.npz"
    for ep in eps:
        assert ep.is_success and ep.success[-1] and ep.terminated[-1]
        assert ep.intervention.all()  # every demo step is a human (teleop) action
        assert ep.observations["state"].shape == (ep.length + 1, 19)
        assert np.abs(ep.actions).max() <= 1.0
        spec = EnvSpec.from_dict(ep.spec or {})
        assert spec.task == "twin-reach" and spec.action.shape == (7,)
    assert [ep.info["seed"] for ep in eps] == [0, 1, 2, 100, 101]


def test_ctrl_c_keeps_finished_episodes(tmp_path, monkeypatch) -> None:
    real_make = record_lib.make_device

    class Interrupting:
        def __init__(self, inner: Any) -> None:
            self.inner, self.name, self.episodes = inner, "scripted", 0

        def reset(self) -> None:
            self.episodes += 1
            self.inner.reset()

        def poll(self, state: Any) -> Any:
            if self.episodes == 3:
                raise KeyboardInterrupt
            return self.inner.poll(state)

        def close(self) -> None:
            pass

    monkeypatch.setattr(record_lib, "make_device", lambda *a, **k: Interrupting(real_make(*a, **k)))
    out = tmp_path / "demos"
    code = record_main(["--task", "twin-reach", "--episodes", "5", "--out", str(out), "--obs-mode", "state"])
    assert code == 130
    eps, errors = load_dir(out)
    assert len(eps) == 2 and errors == []
    assert not list(out.glob(".*tmp"))


def test_bad_arguments_are_clear_errors(tmp_path) -> None:
    from robot_rl.errors import ConfigError, UnknownTaskError

    with pytest.raises(UnknownTaskError, match="twin-reach"):
        record_main(["--task", "no-such-task", "--out", str(tmp_path)])
    with pytest.raises(ConfigError, match="episodes"):
        record_main(["--task", "twin-reach", "--episodes", "0", "--out", str(tmp_path)])


def test_the_success_button_ends_and_keeps_an_episode_and_hardware_needs_one(tmp_path, monkeypatch) -> None:
    """The person's success button (a "success" event) ends the episode on that step and keeps it, over a robot
    server as on hardware (here a twin server: the cube is far, the task's own success cannot be what kept it); over
    a hardware backend, which reports no task success, a device binding no success button is refused up front."""
    import json

    from envs.robot_server import make_backend, serve_in_thread
    from robot_rl.errors import ConfigError
    from tests.virtual_devices import VirtualSpaceMouse

    mouse = VirtualSpaceMouse()
    mouse.install(monkeypatch)
    cfg_file = tmp_path / "spacemouse.json"
    cfg_file.write_text(json.dumps({"buttons": [[0, "gripper_toggle"], [1, "success"]]}))
    handle = serve_in_thread(lambda: make_backend("twin", "twin-pick-cube", cameras=False))
    try:
        mouse.move(y=-350)  # the cap pushed away: +x
        mouse.tap(1)  # and the success button, before the first poll
        assert record_main(["--task", "twin-pick-cube", "--teleop", "spacemouse", "--device-config", str(cfg_file),
                            "--robot", handle.address, "--obs-mode", "state", "--episodes", "1",
                            "--out", str(tmp_path / "demos")]) == 0
    finally:
        handle.close()
    eps, errors = load_dir(tmp_path / "demos")
    assert errors == [] and len(eps) == 1
    ep = eps[0]
    assert ep.length == 1 and ep.success.tolist() == [True] and ep.is_success
    np.testing.assert_allclose(ep.actions[0, :3], [1.0, 0.0, 0.0], atol=1e-3)
    two_button = {}  # the SpaceMouse's defaults: gripper toggle and intervention toggle, no success
    with pytest.raises(ConfigError, match=r"record-demos over a franky robot server .*no success button"):
        record_lib.require_demo_success("spacemouse", two_button, "franky", keep_failures=False)
    with pytest.raises(ConfigError, match=r"--teleop scripted over a ros2 robot server"):
        record_lib.require_demo_success("scripted", {}, "ros2", keep_failures=False)
    record_lib.require_demo_success("spacemouse", two_button, "franky", keep_failures=True)
    record_lib.require_demo_success("spacemouse", two_button, "twin", keep_failures=False)
    record_lib.require_demo_success("spacemouse", {"buttons": [[1, "success"]]}, "franky", keep_failures=False)


def test_a_classifier_reward_ends_each_demo_and_decides_its_success(tmp_path) -> None:
    from robot_rl.errors import ConfigError
    from tests.test_reward_classifier import constant_classifier

    cams = ("images/front", "images/wrist")
    fires = constant_classifier(tmp_path / "fires", 0.999, size=16, k=3, cameras=cams)
    base = ["--task", "twin-pick-cube", "--episodes", "2", "--obs-mode", "pixels", "--image-size", "16"]
    assert record_main([*base, "--out", str(tmp_path / "a"), "--reward", f"classifier:{fires}"]) == 0
    eps, _ = load_dir(tmp_path / "a")
    # every frame positive: the gate (3 frames) ends each demo long before the expert could lift the cube
    assert [ep.length for ep in eps] == [3, 3] and all(ep.is_success and ep.terminated[-1] for ep in eps)
    assert [float(r) for r in eps[0].rewards] == [0.0, 0.0, 1.0]
    assert record_main([*base, "--out", str(tmp_path / "k"), "--reward", f"classifier:{fires}",
                        "--reward-gate-k", "5", "--obs-mode", "state"]) == 0  # state demos: cameras rendered to info
    assert [ep.length for ep in load_dir(tmp_path / "k")[0]] == [5, 5]
    never = constant_classifier(tmp_path / "never", 0.01, size=16, cameras=cams)
    # the twin's own success no longer ends or keeps a demo: the expert lifts and holds until the time limit
    assert record_main([*base, "--episodes", "1", "--out", str(tmp_path / "b"), "--reward", f"classifier:{never}",
                        "--keep-failures"]) == 0
    [ep] = load_dir(tmp_path / "b")[0]
    assert not ep.is_success and ep.truncated[-1] and ep.length > 30
    with pytest.raises(ConfigError, match="reward"):
        record_main([*base, "--out", str(tmp_path / "c"), "--reward", "human"])
    with pytest.raises(ConfigError, match=r"camera|size"):
        record_main([*base, "--image-size", "32", "--out", str(tmp_path / "d"), "--reward", f"classifier:{fires}"])


def test_demos_can_be_recorded_under_the_twins_simulated_timing(tmp_path) -> None:
    from robot_rl.errors import ConfigError

    base = ["--task", "twin-reach", "--episodes", "1", "--obs-mode", "pixels", "--image-size", "16"]
    assert record_main([*base, "--out", str(tmp_path / "late"), "--camera-latency-ms", "100"]) == 0
    assert record_main([*base, "--out", str(tmp_path / "now")]) == 0
    [late], [now] = load_dir(tmp_path / "late")[0], load_dir(tmp_path / "now")[0]
    assert late.info["env_kwargs"]["camera_latency_ms"] == 100.0 and "camera_latency_ms" not in now.info["env_kwargs"]
    # the same seeded expert episode (it acts on the true state, so the arm moves alike): a 100 ms latency, one
    # control period, shows each frame one step later
    frames_late, frames_now = late.observations["images/front"], now.observations["images/front"]
    assert late.length == now.length and not np.array_equal(frames_late[1:], frames_now[1:])
    assert np.array_equal(frames_late[2:], frames_now[1:-1])
    with pytest.raises(ConfigError, match="camera-latency-ms"):
        record_main([*base, "--out", str(tmp_path / "bad"), "--camera-latency-ms", "-5"])
