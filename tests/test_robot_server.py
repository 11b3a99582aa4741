"""The robot server and RemoteRobot over real pyzmq on 127.0.0.1 (server on a thread), with a fake backend:
typed errors both ways, garbage and hostile calls answered and counted, one owner at a time, stale replies
after a timeout, CURVE keys, and the CLI's refusals (hardware extras, non-loopback binds)."""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
from pathlib import Path

import msgpack
import numpy as np
import pytest
import zmq

from envs.remote import RemoteRobot, RemoteRobotConfig, exception_for
from envs.robot import Robot, RobotState
from envs.robot_server import (
    RobotServerConfig,
    RobotServerCore,
    make_backend,
    serve_in_thread,
    state_from_wire,
    state_to_wire,
)
from robot_rl import cli
from robot_rl.errors import (
    ConfigError,
    MissingExtraError,
    ProtocolError,
    RobotError,
    RobotTimeoutError,
    SafetyError,
    ShapeError,
)
from robot_rl.keys import ClientKeys, ServerKeys, generate_keys
from robot_rl.wire import ErrorReply, Heartbeat, RobotCall, RobotReply, decode, encode


class FakeRobot:
    """A Robot with scripted behaviour: records calls, optional slow waits and injected failures."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.pos = np.array([0.4, 0.0, 0.3])
        self.quat = np.array([0.0, 1.0, 0.0, 0.0])
        self.t = 0.0
        self.sleep_in_wait_s = 0.0
        self.fail_with: Exception | None = None
        self.stopped = False

    def _maybe_fail(self) -> None:
        if self.fail_with is not None:
            err, self.fail_with = self.fail_with, None
            raise err

    def state(self) -> RobotState:
        self._maybe_fail()
        return RobotState(
            time_s=self.t, q_rad=np.arange(7.0), dq_rad_per_s=np.zeros(7), pos_base_ee=self.pos.copy(),
            quat_base_ee=self.quat.copy(), twist_ee_body=np.zeros(6), gripper_width_m=0.08, force_ee_n=np.ones(3),
            torque_ee_nm=np.zeros(3), tau_j_nm=np.zeros(7), objects={"cube_pos": np.array([0.5, 0.1, 0.02])})

    def command(self, pos_base_target: np.ndarray, quat_base_target: np.ndarray, gripper_closed: float) -> None:
        self._maybe_fail()
        self.calls.append(("command", (np.array(pos_base_target), np.array(quat_base_target), gripper_closed)))
        self.pos = np.array(pos_base_target, dtype=float)

    def wait(self, duration_s: float) -> None:
        self._maybe_fail()
        self.calls.append(("wait", duration_s))
        if self.sleep_in_wait_s:
            time.sleep(self.sleep_in_wait_s)
        self.t += duration_s

    def set_gains(self, profile: str) -> None:
        if profile not in ("compliance", "precision"):
            raise ConfigError(f"unknown gain profile {profile!r}")
        self.calls.append(("set_gains", profile))

    def reset_joints(self, q_rad: np.ndarray) -> None:
        self.calls.append(("reset_joints", np.array(q_rad)))

    def reset_scene(self, seed: int | None = None) -> None:
        self.calls.append(("reset_scene", seed))

    def clear_errors(self) -> None:
        self.calls.append(("clear_errors", None))

    def stop(self) -> None:
        self.stopped = True


@pytest.fixture()
def served():
    fake = FakeRobot()
    handle = serve_in_thread(lambda: (fake, None, {"backend": "fake", "task": "pick_cube"}),
                             RobotServerConfig(bind="tcp://127.0.0.1:0", hold_timeout_s=0.2))
    yield handle, fake
    handle.close()
    assert fake.stopped  # closing the server stops the backend


def _client(address: str, **kw) -> RemoteRobot:
    return RemoteRobot(RemoteRobotConfig(address=address, **{"deadline_s": 2.0, "connect_deadline_s": 5.0, **kw}))


def test_fake_satisfies_the_protocol() -> None:
    assert isinstance(FakeRobot(), Robot)


def test_robot_protocol_round_trip(served) -> None:
    handle, fake = served
    robot = _client(handle.address)
    assert isinstance(robot, Robot)
    assert robot.info["backend"] == "fake" and robot.info["task"] == "pick_cube" and robot.info["cameras"] == []
    s = robot.state()
    ref = fake.state()
    for name in ("q_rad", "pos_base_ee", "quat_base_ee", "force_ee_n"):
        assert np.array_equal(getattr(s, name), getattr(ref, name)) and getattr(s, name).dtype == np.float64
    assert s.objects.keys() == {"cube_pos"} and np.array_equal(s.objects["cube_pos"], [0.5, 0.1, 0.02])
    s.q_rad[0] = 99.0  # the caller may keep and modify its copy
    robot.command([0.45, 0.01, 0.25], [0.0, 1.0, 0.0, 0.0], 1.0)
    robot.wait(0.1)
    robot.set_gains("precision")
    robot.reset_joints(np.zeros(7))
    robot.reset_scene(7)
    robot.reset_scene(None)
    robot.clear_errors()
    assert [c[0] for c in fake.calls] == ["command", "wait", "set_gains", "reset_joints", "reset_scene",
                                          "reset_scene", "clear_errors"]
    assert np.array_equal(fake.calls[0][1][0], [0.45, 0.01, 0.25]) and fake.calls[0][1][2] == 1.0
    assert fake.calls[4][1] == 7 and fake.calls[5][1] is None
    assert robot.state().time_s == pytest.approx(0.1)
    with pytest.raises(ConfigError, match="serves no cameras"):
        robot.cameras()
    stats = robot.server_stats()
    assert stats["calls_by_method"]["command"] == 1 and stats["errors"] == 0 and stats["clients"] == 1
    robot.stop()
    with pytest.raises(RobotError, match="closed"):
        robot.state()
    robot.stop()  # idempotent


def test_typed_errors_travel_back_and_the_server_keeps_serving(served) -> None:
    handle, fake = served
    robot = _client(handle.address)
    pos, quat = [0.4, 0.0, 0.3], [0.0, 1.0, 0.0, 0.0]
    with pytest.raises(SafetyError, match="NaN/inf"):
        robot.command([np.nan, 0.0, 0.3], quat, 0.0)
    with pytest.raises(SafetyError, match="not finite"):
        robot.command(pos, quat, float("inf"))
    with pytest.raises(SafetyError, match="duration_s"):
        robot.wait(-1.0)
    with pytest.raises(SafetyError, match="max_wait_s"):
        robot.wait(1e9)  # would make the server deaf: refused
    with pytest.raises(SafetyError, match="shape"):  # checked locally, like the twin
        robot.command([0.4, 0.0], quat, 0.0)
    with pytest.raises(ConfigError, match="unknown gain profile"):
        robot.set_gains("wobbly")
    fake.fail_with = RobotError("reflex: cartesian reflex")
    with pytest.raises(RobotError, match="reflex"):
        robot.state()
    fake.fail_with = RobotTimeoutError("libfranka did not answer")
    with pytest.raises(RobotTimeoutError, match="libfranka"):
        robot.wait(0.1)
    fake.fail_with = RuntimeError("a bug in a backend")
    with pytest.raises(RobotError, match=r"internal.*a bug"):
        robot.command(pos, quat, 0.0)
    assert not any(c[0] == "command" for c in fake.calls)  # nothing unsafe reached the backend
    robot.command(pos, quat, 0.0)  # still serving
    codes = handle.stats().errors_by_code
    assert codes == {"safety": 4, "config": 1, "robot": 1, "timeout": 1, "internal": 1}
    robot.stop()


def test_error_code_mapping() -> None:
    assert isinstance(exception_for("safety", "m"), SafetyError)
    assert isinstance(exception_for("bad_shape", "m"), ShapeError)
    assert isinstance(exception_for("not_owner", "m"), RobotError)
    err = exception_for("bad_field", "m")
    assert isinstance(err, ProtocolError) and err.code == "bad_field"


def _raw(address: str, identity: bytes = b"raw-client") -> tuple[zmq.Context, zmq.Socket]:
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.ROUTING_ID, identity)
    sock.setsockopt(zmq.RCVTIMEO, 3000)
    sock.connect(address)
    return ctx, sock


def _ask(sock: zmq.Socket, frames: list) -> object:
    sock.send_multipart(frames)
    return decode(sock.recv_multipart())


def test_garbage_and_hostile_calls_get_error_replies_and_are_counted(served) -> None:
    handle, fake = served
    ctx, sock = _raw(handle.address)
    try:
        header = {"p": "robot-rl", "v": 99, "k": "ROBOT_CALL", "m": {}, "a": []}
        for frames, code in [
            ([b"garbage"], "bad_header"),
            ([b""], "bad_header"),
            ([msgpack.packb(header)], "bad_version"),
            (encode(Heartbeat(role="x")), "unexpected_kind"),
            ([*encode(RobotCall(1, "state")), b"extra frame"], "bad_frames"),
        ]:
            reply = _ask(sock, frames)
            assert isinstance(reply, ErrorReply) and reply.code == code, (frames[:1], reply)

        def call(msg: RobotCall) -> RobotReply:
            reply = _ask(sock, encode(msg))
            assert isinstance(reply, RobotReply) and reply.call_id == msg.call_id
            return reply

        assert call(RobotCall(2, "fly")).error_code == "unknown_method"
        assert call(RobotCall(3, "state")).error_code == "not_owner"  # no open yet
        assert call(RobotCall(4, "open")).ok
        quat = np.array([0.0, 1.0, 0.0, 0.0])
        hostile = [
            (RobotCall(5, "command", {"gripper_closed": 0.0}, {"pos_base_target": np.zeros(2),
                                                               "quat_base_target": quat}), "bad_shape"),
            (RobotCall(6, "command", {"gripper_closed": "shut"}, {"pos_base_target": np.zeros(3),
                                                                  "quat_base_target": quat}), "bad_field"),
            (RobotCall(7, "command", {"gripper_closed": 0.0}, {"pos_base_target": np.zeros(3)}), "bad_field"),
            (RobotCall(8, "command", {"gripper_closed": 0.0}, {"pos_base_target": np.zeros(3, bool),
                                                               "quat_base_target": quat}), "bad_dtype"),
            (RobotCall(9, "command", {"gripper_closed": 0.0}, {"pos_base_target": np.array([np.nan, 0, 0]),
                                                               "quat_base_target": quat}), "safety"),
            (RobotCall(10, "wait", {"duration_s": 0.1, "extra": 1}), "bad_field"),
            (RobotCall(11, "wait", {"duration_s": True}), "bad_field"),
            (RobotCall(12, "reset_scene", {"seed": -1}), "bad_field"),
            (RobotCall(13, "reset_joints", {}, {"q_rad": np.zeros((7, 1))}), "bad_shape"),
            (RobotCall(14, "set_gains", {"profile": "x" * 1000}), "bad_field"),
        ]
        for msg, code in hostile:
            reply = call(msg)
            assert not reply.ok and reply.error_code == code, (msg.call_id, reply.error_message)
        assert fake.calls == []  # none of it reached the backend
        # an oversized call: ZeroMQ drops that connection (MAXMSGSIZE); the server lives on
        sock.send_multipart([b"x" * (2 << 20)])
        robot = _client(handle.address)  # a new client takes over and is served normally
        robot.command([0.4, 0.0, 0.3], quat, 0.0)
        assert robot.state().pos_base_ee[0] == 0.4
        stats = robot.server_stats()
        assert stats["errors_by_code"] == {"bad_header": 2, "bad_version": 1, "unexpected_kind": 1, "bad_frames": 1,
                                           "unknown_method": 1, "not_owner": 1, "bad_shape": 2, "bad_field": 6,
                                           "bad_dtype": 1, "safety": 1}
        assert stats["errors"] == 17 and stats["calls_by_method"]["<unknown>"] == 1
        robot.stop()
    finally:
        sock.close()
        ctx.term()


def test_one_owner_at_a_time_newest_open_wins(served) -> None:
    handle, _ = served
    first = _client(handle.address, client_name="actor-0")
    first.state()
    second = _client(handle.address, client_name="actor-1")
    with pytest.raises(RobotError, match="not_owner"):
        first.command([0.4, 0.0, 0.3], [0.0, 1.0, 0.0, 0.0], 0.0)
    second.command([0.4, 0.0, 0.3], [0.0, 1.0, 0.0, 0.0], 0.0)
    stats = second.server_stats()
    assert stats["takeovers"] == 1 and stats["clients"] == 2
    second.stop()  # releases the robot: no owner, and a new open is not a takeover
    third = _client(handle.address)
    assert third.server_stats()["takeovers"] == 1 and handle.stats().owner != ""
    third.stop()
    first.close()
    assert handle.stats().owner == ""


def test_slow_server_times_out_then_late_reply_is_dropped(served) -> None:
    handle, fake = served
    robot = _client(handle.address, deadline_s=0.3)
    fake.sleep_in_wait_s = 0.8
    t0 = time.monotonic()
    with pytest.raises(RobotTimeoutError, match=r"did not answer wait\(\) within 0.35 s"):
        robot.wait(0.05)  # deadline = deadline_s + duration
    assert time.monotonic() - t0 < 0.3 + 0.05 + 1.0  # at the deadline, not after the server's 0.8 s
    fake.sleep_in_wait_s = 0.0
    time.sleep(0.8)  # the server finishes the slow call; its late reply waits in the socket
    assert robot.state().time_s == pytest.approx(0.05)  # the next call gets its own reply
    assert robot.stale_replies == 1
    robot.stop()


def test_watchdog_reports_holding_and_a_command_clears_it(served) -> None:
    handle, _ = served
    robot = _client(handle.address)
    assert not handle.stats().holding  # no command yet: nothing to hold
    robot.command([0.41, 0.0, 0.3], [0.0, 1.0, 0.0, 0.0], 0.0)
    deadline = time.monotonic() + 5.0
    while not handle.stats().holding and time.monotonic() < deadline:
        time.sleep(0.02)
    s = handle.stats()
    assert s.holding and s.holds == 1 and s.last_command_age_s > 0.2
    robot.command([0.42, 0.0, 0.3], [0.0, 1.0, 0.0, 0.0], 0.0)
    assert not handle.stats().holding
    robot.stop()


def test_unreachable_server_times_out_at_connect() -> None:
    t0 = time.monotonic()
    with pytest.raises(RobotTimeoutError, match="unreachable"):
        RemoteRobot(RemoteRobotConfig(address="tcp://127.0.0.1:1", connect_deadline_s=0.3))
    assert time.monotonic() - t0 < 3.0


def test_state_codec_round_trip_and_validation() -> None:
    s = FakeRobot().state()
    result, arrays = state_to_wire(s)
    back = state_from_wire(result, arrays)
    assert back.time_s == s.time_s and np.array_equal(back.tau_j_nm, s.tau_j_nm) and back.error == ""
    with pytest.raises(ProtocolError, match="missing arrays"):
        state_from_wire(result, {k: v for k, v in arrays.items() if k != "q_rad"})
    with pytest.raises(ProtocolError, match="expected float64"):
        state_from_wire(result, {**arrays, "q_rad": np.zeros(6)})
    with pytest.raises(ProtocolError, match="time_s"):
        state_from_wire({**result, "time_s": "now"}, arrays)


def test_core_without_sockets_is_deterministic() -> None:
    now = [0.0]
    core = RobotServerCore(FakeRobot(), config=RobotServerConfig(hold_timeout_s=1.0), clock=lambda: now[0])
    reply = decode(core.handle(b"a", encode(RobotCall(1, "open"))))
    assert isinstance(reply, RobotReply) and reply.ok
    pos, quat = np.array([0.4, 0.0, 0.3]), np.array([0.0, 1.0, 0.0, 0.0])
    core.handle(b"a", encode(RobotCall(2, "command", {"gripper_closed": 0}, {"pos_base_target": pos,
                                                                              "quat_base_target": quat})))
    now[0] = 0.9
    core.tick()
    assert not core.stats().holding
    now[0] = 1.1
    core.tick()
    core.tick()
    assert core.stats().holding and core.stats().holds == 1


def test_curve_keys(tmp_path: Path) -> None:
    generate_keys(tmp_path)
    fake = FakeRobot()
    with serve_in_thread(lambda: (fake, None, {"backend": "fake"}), keys=ServerKeys.from_dir(tmp_path)) as handle:
        robot = RemoteRobot(RemoteRobotConfig(address=handle.address), ClientKeys.from_dir(tmp_path))
        assert robot.state().gripper_width_m == 0.08
        robot.stop()
        stranger = ClientKeys.generate(ClientKeys.from_dir(tmp_path).server_public)
        with pytest.raises(RobotTimeoutError, match="CURVE key"):
            RemoteRobot(RemoteRobotConfig(address=handle.address, connect_deadline_s=0.5), stranger)
        assert handle.stats().errors_by_code.get("unauthorized", 0) >= 1


def test_non_loopback_needs_keys_or_insecure() -> None:
    with pytest.raises(ConfigError, match="not loopback"):
        serve_in_thread(lambda: (FakeRobot(), None, {}), RobotServerConfig(bind="tcp://0.0.0.0:0"))
    with pytest.raises(ConfigError, match="not loopback"):
        RemoteRobot(RemoteRobotConfig(address="tcp://10.1.2.3:5560"))


def test_hardware_backends_name_their_extra(capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "franky", None)  # as if franky-control were not installed
    with pytest.raises(MissingExtraError, match=r"\[real\]'"):
        make_backend("franky", "pick_cube", robot_ip="127.0.0.1")
    if importlib.util.find_spec("rclpy") is None:
        with pytest.raises(MissingExtraError, match=r"\[ros\]'"):
            make_backend("ros2", "pick_cube")
    assert cli.main(["robot-server", "--backend", "franky", "--task", "reach", "--robot-ip", "127.0.0.1",
                     "--allow-twin-box"]) == 1  # (without it: the lab box check, tests/test_task_file.py)
    assert "[real]'" in capsys.readouterr().err
    assert cli.main(["robot-server", "--backend", "franky", "--task", "reach", "--allow-twin-box"]) == 1
    assert "--robot-ip" in capsys.readouterr().err
    assert cli.main(["robot-server", "--task", "reach", "--bind", "tcp://0.0.0.0:5560"]) == 1
    assert "not loopback" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="unknown"):
        make_backend("kuka", "reach")


def test_server_thread_survives_concurrent_stats(served) -> None:
    handle, _ = served
    robot = _client(handle.address)
    errors: list[BaseException] = []

    def poll_stats() -> None:
        try:
            for _ in range(200):
                handle.stats()
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    t = threading.Thread(target=poll_stats)
    t.start()
    for _ in range(100):
        robot.state()
    t.join()
    assert not errors
    robot.stop()
