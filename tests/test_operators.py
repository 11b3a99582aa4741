"""`--intervene DEVICE` on the commands that act (actor, sim, train): a person at a SpaceMouse, gamepad or keyboard
(or the twin's scripted operator) takes over from the policy and presses the success key of `--reward human`.

End to end: an actor env over a twin robot server (as on hardware), opened with the real device adapters behind
virtual devices (tests/virtual_devices.py: hidapi and pynput stand-ins; the gamepad is an SDL virtual joystick),
an Actor streaming to a Learner in process: the device's interventions land in the learner's online and demo
buffers as intervention rows carrying the device's action, and its success key ends the episode with reward 1."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from actors.actor import Actor, ActorConfig
from actors.actor_env import make_actor_env
from actors.run import parse_actor_args
from demos.devices.errors import DeviceNotFoundError
from envs.robot_server import make_backend, serve_in_thread
from learners.distributed.learner import Learner
from robot_rl.cli import main
from robot_rl.errors import ConfigError, MissingExtraError
from robot_rl.gym_env import env_spec_of
from robot_rl.operators import INTERVENE_CHOICES, check_intervene
from robot_rl.transport import InMemoryHub
from tests.test_learner_runtime import AGENT, FAST, drain, lcfg
from tests.virtual_devices import VirtualKeyboard, VirtualSpaceMouse

TASK = "twin-reach"
SPACEMOUSE_SUCCESS = {"buttons": [[0, "gripper_toggle"], [1, "success"]]}


# ------------------------------------------------------------------------------------------------ flags
def test_every_acting_command_takes_every_device(tmp_path: Path) -> None:
    from learners.training.flags import build_train_parser, train_config
    from supervisor.sim_config import build_sim_parser, sim_config

    assert INTERVENE_CHOICES == ("scripted", "spacemouse", "gamepad", "keyboard")
    cfg_file = tmp_path / "pad.json"
    cfg_file.write_text(json.dumps({"layout": "sdl", "deadzone": 0.2}))
    for device in INTERVENE_CHOICES:
        extra = ["--device-config", str(cfg_file)] if device == "gamepad" else []
        actor = parse_actor_args(["--task", TASK, "--intervene", device, "--reward", "human", *extra])
        assert actor.intervene == device and actor.device_config == (str(cfg_file) if extra else None)
        train = train_config(build_train_parser().parse_args(["--task", TASK, "--out", "x", "--intervene", device,
                                                              "--reward", "human", *extra]))
        assert train.intervene == device
        sim = sim_config(build_sim_parser().parse_args(["--task", TASK, "--actors", "1", "--intervene", device,
                                                        "--reward", "human", *extra]))
        assert sim.intervene == device
    with pytest.raises(SystemExit):
        parse_actor_args(["--task", TASK, "--intervene", "joystick9000"])


def test_sim_hands_the_device_to_its_one_actor_and_refuses_more(tmp_path: Path) -> None:
    from supervisor.sim import Sim
    from supervisor.sim_config import build_sim_parser, sim_config

    cfg_file = tmp_path / "mouse.json"
    cfg_file.write_text(json.dumps(SPACEMOUSE_SUCCESS))
    args = ["--task", TASK, "--intervene", "spacemouse", "--reward", "human", "--device-config", str(cfg_file)]
    with pytest.raises(ConfigError, match=r"--intervene spacemouse with --actors 2: a hardware device is read by one "
                                          r"actor process.*--actors 1"):
        sim_config(build_sim_parser().parse_args(args))
    sim = Sim(sim_config(build_sim_parser().parse_args([*args, "--actors", "1", "--out", str(tmp_path / "s")])))
    argv = sim.actor_argv(0, "tcp://127.0.0.1:1", "tcp://127.0.0.1:2")
    actor = parse_actor_args(argv[argv.index("actor") + 1:])
    assert actor.intervene == "spacemouse" and actor.reward == "human"
    assert actor.device_config is not None and Path(actor.device_config) == cfg_file.resolve()
    # the scripted operator goes to every actor
    sim_config(build_sim_parser().parse_args(["--task", TASK, "--actors", "3", "--intervene", "scripted"]))


def test_bad_intervene_flags_are_one_line_config_errors(tmp_path: Path) -> None:
    from learners.training.config import TrainConfig

    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "bad.json").write_text("{deadzone: 1")
    for args, msg in (
            (("joystick", None, "env"), "--intervene 'joystick': expected one of scripted, spacemouse"),
            ((None, None, "human"), "--reward human: the success key comes from a teleop device; add --intervene"),
            (("scripted", str(tmp_path / "list.json"), "env"), "only with a hardware device"),
            (("keyboard", str(tmp_path / "nope.json"), "env"), "no such file"),
            (("keyboard", str(tmp_path / "bad.json"), "env"), "not JSON"),
            (("keyboard", str(tmp_path / "list.json"), "env"), "expected a JSON object"),
    ):
        with pytest.raises(ConfigError, match=msg):
            check_intervene(*args)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="--device-config"):
        parse_actor_args(["--task", TASK, "--intervene", "scripted", "--device-config", str(tmp_path / "list.json")])
    with pytest.raises(ConfigError, match="not supported with --forward-backward"):
        TrainConfig(task="twin-cube-relocate", forward_backward=True, intervene="keyboard")
    with pytest.raises(ConfigError, match="needs a twin --task"):
        TrainConfig(env_id="Pendulum-v1", intervene="keyboard")
    with pytest.raises(ConfigError, match="--reward human: the success key"):
        TrainConfig(task=TASK, reward="human")


def test_the_scripted_operator_is_refused_on_hardware() -> None:
    from actors.actor_env import check_operator_backend

    for backend in ("franky", "ros2", ""):
        with pytest.raises(ConfigError, match=r"--intervene scripted: the scripted operator steers by the object poses "
                                              r"only the twin reports.*spacemouse, gamepad or keyboard"):
            check_operator_backend("scripted", backend)
        check_operator_backend("spacemouse", backend)
    check_operator_backend("scripted", "twin")


def test_a_device_config_field_the_device_does_not_have_is_named(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    VirtualSpaceMouse().install(monkeypatch)
    (tmp_path / "m.json").write_text(json.dumps({"deadzonee": 0.1}))
    with pytest.raises(ConfigError, match=r"--device-config for --intervene spacemouse: .*deadzonee"):
        make_actor_env(TASK, "state", None, None, intervene="spacemouse", device_config=str(tmp_path / "m.json"))


def test_human_reward_needs_a_success_button_on_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    mouse = VirtualSpaceMouse()
    mouse.install(monkeypatch)
    with pytest.raises(ConfigError, match=r"--reward human: the spacemouse's bindings have no success button.*"
                                          r"\[1, \"success\"\]"):
        make_actor_env(TASK, "state", None, None, intervene="spacemouse", reward="human")
    assert mouse.opened is None  # refused before the device was opened


def test_missing_library_and_missing_device_end_the_actor_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["actor", "--task", TASK, "--learner", "tcp://127.0.0.1:1", "--max-steps", "1"]
    VirtualSpaceMouse(plugged=False).install(monkeypatch)
    assert main([*argv, "--intervene", "spacemouse"]) == 1
    err = capsys.readouterr().err
    assert "no SpaceMouse found" in err and "USB Keyboard" in err and "Traceback" not in err, err
    with pytest.raises(DeviceNotFoundError):
        make_actor_env(TASK, "state", None, None, intervene="spacemouse")
    for mod in ("hid", "hidraw"):
        monkeypatch.setitem(sys.modules, mod, None)
    assert main([*argv, "--intervene", "spacemouse"]) == 1
    err = capsys.readouterr().err
    assert "[teleop]'" in err and len(err.strip().splitlines()) == 1, err
    for mod in ("pynput", "pynput.keyboard"):
        monkeypatch.setitem(sys.modules, mod, None)
    with pytest.raises(MissingExtraError, match=r"keyboard.*\[teleop\]'"):
        make_actor_env(TASK, "state", None, None, intervene="keyboard")


# ----------------------------------------------------------------------------------------- end to end
class Driver:
    """What a person does at one device: take over (and what action that commands), let go, press success."""

    def __init__(self, take_over: Callable[[], None], let_go: Callable[[], None], success: Callable[[], None],
                 success_up: Callable[[], None], action: list[float]) -> None:
        self.take_over, self.let_go, self.success, self.success_up = take_over, let_go, success, success_up
        self.action = np.asarray(action, np.float32)


@pytest.fixture()
def server() -> Iterator[Any]:
    handle = serve_in_thread(lambda: make_backend("twin", TASK, cameras=False))
    yield handle
    handle.close()


def _spacemouse(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[str | None, Driver, Callable[[], None]]:
    mouse = VirtualSpaceMouse()
    mouse.install(monkeypatch)
    path = tmp_path / "spacemouse.json"
    path.write_text(json.dumps(SPACEMOUSE_SUCCESS))
    return str(path), Driver(lambda: mouse.move(y=-350), lambda: mouse.move(), lambda: mouse.tap(1), lambda: None,
                             [1, 0, 0, 0, 0, 0, 0]), lambda: None


def _keyboard(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[str | None, Driver, Callable[[], None]]:
    keys = VirtualKeyboard()
    keys.install(monkeypatch)
    return None, Driver(lambda: keys.press("w"), lambda: keys.release("w"), lambda: keys.tap("enter"), lambda: None,
                        [0.5, 0, 0, 0, 0, 0, 0]), lambda: None


def _gamepad(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[str | None, Driver, Callable[[], None]]:
    pygame = pytest.importorskip("pygame")
    from tests.test_teleop_gamepad import VirtualPad, _loaded_sdl

    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    monkeypatch.setenv("SDL_AUDIODRIVER", "dummy")
    pygame.display.init()
    pygame.joystick.init()
    sdl = _loaded_sdl()
    if sdl is None:
        pygame.quit()
        pytest.skip("could not reach the SDL library that pygame loaded (virtual joystick API)")
    pad = VirtualPad(sdl)
    pygame.event.pump()
    path = tmp_path / "pad.json"
    path.write_text(json.dumps({"layout": "sdl", "index": pad.index, "deadzone": 0.1}))

    def bound(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            if pad.handle is None:  # the actor env opened the pad: SDL's handle of it now exists
                pad.bind(pygame.joystick.Joystick(pad.index).get_instance_id())
            fn()
        return run

    def cleanup() -> None:
        pad.detach()
        pygame.event.get()
        pygame.quit()

    return str(path), Driver(bound(lambda: pad.axis(1, -1.0)), bound(lambda: pad.axis(1, 0.0)),
                             bound(lambda: pad.button(6, True)), bound(lambda: pad.button(6, False)),
                             [1, 0, 0, 0, 0, 0, 0]), cleanup


DEVICES: dict[str, Callable[[pytest.MonkeyPatch, Path], tuple[str | None, Driver, Callable[[], None]]]] = {
    "spacemouse": _spacemouse, "keyboard": _keyboard, "gamepad": _gamepad}


@pytest.mark.parametrize("device", list(DEVICES))
def test_a_person_at_the_device_intervenes_and_ends_the_episode_over_a_robot_server(
        device: str, server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    device_config, person, cleanup = DEVICES[device](monkeypatch, tmp_path)
    hub = InMemoryHub(FAST)
    closers: list[Callable[[], Any]] = [cleanup]
    try:
        env = make_actor_env(TASK, "state", None, server.address, intervene=device, reward="human",
                             reward_audit=tmp_path / "audit", device_config=device_config)
        closers.insert(0, env.close)
        spec = env_spec_of(env, TASK)
        learner_ep = hub.bind_learner(spec)
        closers.insert(0, learner_ep.close)
        learner = Learner(spec, AGENT, lcfg(learning_starts=10**6, capacity=200), learner_ep, tmp_path / "run")
        actor_ep = hub.connect_actor(spec, "a0")
        closers.insert(0, actor_ep.close)
        actor = Actor(env, actor_ep, ActorConfig(chunk_steps=4, seed=0, pace=False, warmup="hold"))
        closers.insert(0, lambda: actor.close(flush_s=0.5))
        actor.start()
        infos = []
        script = {3: person.take_over, 7: person.let_go, 9: person.success, 10: person.success_up}
        for t in range(11):
            script.get(t, lambda: None)()
            infos.append(actor.step())
        actor.close(flush_s=1.0)  # acks come once the learner steps (drain)
        drain(learner)
    finally:
        for close in closers:
            close()
    # the steps before the take-over are the policy's (the warm-up's hold), the take-over is the device's action
    assert [bool(i.get("intervention")) for i in infos[:3]] == [False] * 3
    assert all(i["intervention"] for i in infos[3:10]), [i.get("intervention") for i in infos]
    for i in infos[3:7]:
        np.testing.assert_allclose(i["intervene_action"], person.action, atol=1e-3)
    # the success key (pressed before step 9) ended the episode on that step, rewarded 1
    assert not any(i.get("reward_success") for i in infos[:9])
    assert infos[9]["reward_success"] and "success" in infos[9]["events"]
    st = actor.stats()
    assert st["episodes"] == 1 and st["env_steps"] == 11
    # the learner's buffers: intervention rows with the device's action, in the online and the demo buffer
    online = learner.online
    rows = np.flatnonzero(online.valid)
    flags = online.fields["intervention"][rows]
    assert flags.tolist()[:10] == [False] * 3 + [True] * 7
    np.testing.assert_allclose(online.actions[rows[3:7]], np.tile(person.action, (4, 1)), atol=1e-3)
    np.testing.assert_allclose(online.actions[rows[:3]], 0.0)
    assert online.fields["rewards"][rows[9]] == 1.0 and online.fields["terminated"][rows[9]]
    assert online.fields["rewards"][rows[:9]].sum() == 0.0
    assert learner.interventions == 7 + int(bool(infos[10].get("intervention"))) == len(learner.demo)
    demo_rows = np.flatnonzero(learner.demo.valid)
    assert learner.demo.fields["intervention"][demo_rows].all()
    np.testing.assert_allclose(learner.demo.actions[demo_rows[:4]], np.tile(person.action, (4, 1)), atol=1e-3)
    assert server.stats().calls > 11  # every step went through the robot server


def test_train_with_a_person_at_the_keyboard_stores_the_interventions_in_both_buffers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`robot-rl train --intervene keyboard --reward human` (no --demos): the keyboard's rows reach the online
    buffer and a demo buffer of their own, its success key ends the episodes with reward 1, the evaluation env has
    no operator, and closing the run closes the device."""
    from envs.wrappers import InterventionWrapper
    from learners.training.flags import build_train_parser, train_config
    from learners.training.session import TrainSession
    from learners.training.train import build_run

    keys = VirtualKeyboard()
    keys.install(monkeypatch)
    out = tmp_path / "run"
    cfg = train_config(build_train_parser().parse_args([
        "--task", TASK, "--obs-mode", "state", "--out", str(out), "--intervene", "keyboard", "--reward", "human",
        "--max-env-steps", "20", "--learning-starts", "1000", "--eval-episodes", "1", "--hidden", "32"]))
    run = build_run(cfg, reward_audit=out / "reward_audit")

    def operator(env: Any) -> InterventionWrapper | None:
        while env is not None and not isinstance(env, InterventionWrapper):
            env = getattr(env, "env", None)
        return env

    wrapper = operator(run.env)
    assert wrapper is not None and wrapper.device.name == "keyboard" and operator(run.eval_env) is None
    real_poll, polls = wrapper.device.poll, [0]

    def person(state: Any) -> Any:  # per 8 polls: hold "w" on polls 2-4, let go, press enter on poll 7
        i = polls[0] % 8
        polls[0] += 1
        if i == 2:
            keys.press("w")
        elif i == 5:
            keys.release("w")
        elif i == 7:
            keys.tap("enter")
        return real_poll(state)

    monkeypatch.setattr(wrapper.device, "poll", person)
    TrainSession(run, out, log=lambda *a: None).run()
    online, demo = run.online, run.demo
    assert demo is not None
    rows = np.flatnonzero(online.valid)
    assert len(rows) == 20
    flags = online.fields["intervention"][rows]
    # the sticky window (0.5 s at the twin's control rate) keeps the keyboard in control until the success key
    assert flags.tolist()[:16] == ([False] * 2 + [True] * 6) * 2
    for first in (2, 10):
        np.testing.assert_allclose(online.actions[rows[first:first + 3]], np.tile([0.5, 0, 0, 0, 0, 0, 0], (3, 1)),
                                   atol=1e-6)
    rewards, terminated = online.fields["rewards"][rows], online.fields["terminated"][rows]
    assert rewards[[7, 15]].tolist() == [1.0, 1.0] and terminated[[7, 15]].all() and rewards.sum() == 2.0
    demo_rows = np.flatnonzero(demo.valid)
    assert len(demo_rows) == int(flags.sum()) == 12 + int(flags[16:].sum())
    assert demo.fields["intervention"][demo_rows].all()
    assert not any(lst.running for lst in keys.listeners)  # the run closed the device with its env


def test_the_docs_intervene_command_lines_parse_and_open_their_device(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Every `robot-rl actor ... --intervene` line of the docs, as written: parsed by the actor's parser, and its
    device (a virtual one) opened with the --device-config file the page quotes and the success check it needs; the
    hardware page's record-labels SpaceMouse line binds a success button."""
    import re
    import shlex

    from demos.devices.operators import make_operator
    from robot_rl.operators import load_device_config

    root = Path(__file__).resolve().parents[1]
    page = (root / "docs" / "hardware.md").read_text()
    quoted = re.search(r"a\s+`spacemouse\.json` holding `(\{.*?\})`", page, re.S)
    assert quoted is not None
    (tmp_path / "spacemouse.json").write_text(quoted.group(1))
    monkeypatch.chdir(tmp_path)
    lines = [line.strip() for p in sorted((root / "docs").glob("*.md")) for line in p.read_text().splitlines()
             if line.strip().startswith("robot-rl actor ") and "--intervene" in line]
    assert len(lines) >= 2
    for line in lines:
        argv = shlex.split(line)
        cfg = parse_actor_args(argv[2:])
        assert cfg.intervene in INTERVENE_CHOICES
        if cfg.intervene == "spacemouse":
            mouse = VirtualSpaceMouse()
            mouse.install(monkeypatch)
            fields = load_device_config(cfg.device_config) if cfg.device_config else None
            device = make_operator(cfg.intervene, cfg.task, press_success=cfg.reward == "human", device_config=fields)
            assert mouse.opened is not None
            device.close()
    from demos.devices.operators import require_success_binding, teleop_device_options
    from demos.devices.teleop import build_hardware_device
    from demos.recording.labels import parse_record_labels_args

    labels = [shlex.split(line.strip()) for line in page.splitlines()
              if line.strip().startswith("robot-rl record-labels ") and "--teleop spacemouse" in line]
    assert labels
    for argv in labels:
        lcfg_ = parse_record_labels_args(argv[2:])
        options = teleop_device_options(lcfg_.teleop, lcfg_.device_config)
        require_success_binding("spacemouse", build_hardware_device("spacemouse", **options).config, "labels")


@pytest.mark.slow
def test_the_actor_command_with_a_spacemouse_streams_its_interventions_to_a_learner(tmp_path: Path,
                                                                                     server: Any) -> None:
    """`robot-rl actor --intervene spacemouse --device-config F --reward human` as typed, a process beside a
    `robot-rl learner` process, over a twin robot server; the SpaceMouse is the virtual hidraw module of
    tests/virtual_hid (a scripted person: per 10-step episode, push the cap forward on step 3, let go on step 7, press
    the success button on step 9)."""
    import os
    import signal
    import struct
    import subprocess
    import time

    from tests.test_runtime_faults import free_port, learner_argv, status

    root = Path(__file__).resolve().parents[1]
    script = tmp_path / "person.json"
    script.write_text(json.dumps({"cycle": 10, "polls": {
        "3": [struct.pack("<B3h", 1, 0, -350, 0).hex()], "7": [struct.pack("<B3h", 1, 0, 0, 0).hex()],
        "9": ["0302", "0300"]}}))
    (tmp_path / "spacemouse.json").write_text(json.dumps(SPACEMOUSE_SUCCESS))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MUJOCO_GL": "egl", "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join([str(root / "tests" / "virtual_hid"), str(root)]),
           "VIRTUAL_SPACEMOUSE_SCRIPT": str(script)}
    addr, out = f"tcp://127.0.0.1:{free_port()}", tmp_path / "run"

    def start(name: str, *argv: str) -> subprocess.Popen[bytes]:
        with open(tmp_path / f"{name}.log", "wb") as log:
            return subprocess.Popen([sys.executable, "-m", "robot_rl.cli", *argv], stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=tmp_path)

    learner = start("learner", *learner_argv(addr, out, "--learning-starts", "100000"))
    actor = None
    try:
        actor = start("actor", "actor", "--task", TASK, "--robot", server.address, "--learner", addr, "--reward",
                      "human", "--intervene", "spacemouse", "--device-config", "spacemouse.json", "--warmup", "hold",
                      "--max-steps", "30", "--chunk-steps", "5", "--flush-timeout", "60", "--quiet",
                      "--stats-out", "actor.json")
        rc = actor.wait(timeout=240)
        logs = (tmp_path / "actor.log").read_text() + (tmp_path / "learner.log").read_text()
        assert rc == 0, logs
        stats = json.loads((tmp_path / "actor.json").read_text())
        assert stats["flushed"] and stats["env_steps"] == 30 and stats["episodes"] == 3, stats
        assert stats["reward_model"]["ended_by_model"] == 3, stats  # the success button ended every episode
        deadline = time.monotonic() + 60
        ours: list[dict[str, Any]] = []
        while time.monotonic() < deadline and not ours:  # status.json is written every --log-every s
            ours = [a for a in status(out).get("actors", {}).values() if a.get("transitions") == 30]
            time.sleep(0.2)
        assert len(ours) == 1, (status(out), logs)
        assert ours[0]["interventions"] == 3 * 7 and ours[0]["episodes"] == 3, ours  # steps 3-9 of each episode
    finally:
        for proc in (actor, learner):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)


def test_the_recorders_take_a_device_config_and_label_with_its_success_button(
        tmp_path: Path, server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """record-labels --teleop spacemouse labels from the success key: refused when the SpaceMouse binds none, and
    with --device-config binding the right button, the button's press turns success labelling on."""
    from demos.recording.demos import parse_record_demos_args, record_demos
    from demos.recording.labels import parse_record_labels_args, record_labels
    from robot_rl.episodes import load_dir

    mouse = VirtualSpaceMouse()
    mouse.install(monkeypatch)
    cfg_file = tmp_path / "spacemouse.json"
    cfg_file.write_text(json.dumps(SPACEMOUSE_SUCCESS))
    base = ["--task", TASK, "--teleop", "spacemouse", "--obs-mode", "state", "--robot", server.address]
    with pytest.raises(ConfigError, match="--labels events: the spacemouse's bindings have no success button"):
        record_labels(parse_record_labels_args([*base, "--frames", "4", "--out", str(tmp_path / "no")]))
    assert mouse.opened is None
    with pytest.raises(ConfigError, match=r"--device-config .*only with a hardware device"):
        record_demos(parse_record_demos_args(["--task", TASK, "--teleop", "scripted", "--obs-mode", "state",
                                              "--device-config", str(cfg_file), "--out", str(tmp_path / "d")]))
    mouse.move(y=-350)
    mouse.tap(1)  # success labelling on from the first frame
    rc = record_labels(parse_record_labels_args([*base, "--device-config", str(cfg_file), "--frames", "4",
                                                 "--after-success", "0", "--out", str(tmp_path / "labels")]))
    assert rc == 0 and mouse.opened is not None
    episodes, errors = load_dir(tmp_path / "labels")
    assert not errors and sum(e.length for e in episodes) >= 4
    # the press labelled the first segment's frame success (it ends there: --after-success 0); the next segment
    # starts with labelling off, so its frames are failures; the pushed cap makes every frame the person's
    assert [e.success.tolist() for e in episodes] == [[True], [False, False, False]]
    assert all(e.intervention.all() for e in episodes)
