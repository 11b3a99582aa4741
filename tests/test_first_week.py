"""A lab's first week, rehearsed: every `robot-rl` command line of docs/hardware.md run as written, in the page's
order, against franky-sim (the real franky-control talking to `franky-sim -s mujoco` on loopback).

How the page and the rehearsal are kept together:

- `documented_lines()` reads every `robot-rl ...` command line of the page: inline code spans (which may wrap over
  two lines) and the lines of fenced blocks (joined where a line ends in `\\`), whitespace normalised.
- Each one is either a step of `REHEARSAL` (keyed by the line exactly as the page writes it) or in `EXEMPT` with
  the reason; a page line in neither, or an entry whose line is no longer on the page, fails
  `test_every_documented_line_is_rehearsed_or_exempt`. A short mention (`robot-rl estop`, `robot-rl learner`) counts
  as rehearsed when a rehearsed line contains its words in order (`COVERED_BY` names which).
- The page's placeholders are replaced by `SUBSTITUTIONS` only (ADDR -> the servers' addresses, 172.16.0.2 -> the
  simulator's, SERIAL and /dev/video0 -> the rehearsal's cameras, `check-hardware ...` -> the arm and the lab's
  cameras, `--seconds 60` / `--episodes 20` / `--offline-updates` N or 1000 -> small numbers); what is left must
  not look like a placeholder (an all-capitals word, `...`): an unknown one fails the test naming it. File names
  (configs/box.json, configs/lab.toml, demos/pick, ...) are used as written, relative to the rehearsal's working
  directory, so each step reads what the one before it wrote.
- A step may append `EXTRA` flags: bounds a person gives with Ctrl-C (`--max-steps`, `--frames`), a free port
  instead of the default one (tests run in parallel), sizes that keep CI fast (`--max-steps` of
  train-classifier, the learner's tiny networks). An extra may not repeat a flag the line gives (argparse would
  silently let it win); its {names} are filled in like the line's.
- `DOC_FIXES`: a line that cannot run as the page writes it, with the line that does and why. Each entry fails the
  test once the page is corrected (then drop the entry).

The rehearsal (`test_a_labs_first_week_against_franky_sim`, slow), the page's bring-up in its order: check-hardware,
cameras list / show, safety-box record, check-hardware --report, task init (the lab's task file: the recorded box,
the cameras, the home joints, pixels observations), robot-server --backend franky with that file, then with the same
file record-demos and record-labels with a virtual SpaceMouse, train-classifier, the learner (from the demos), the
actor lines (classifier reward; a person intervening; the person's success button as the reward), estop, and the
robot server restarted (resume) for the last actor line.

Choices (what stands in for the lab):
- Cameras: franky-sim has none. check-hardware reads a RealSense recording (.db3, pyrealsense2's rs.recorder:
  `realsense:FILE`, as tests/test_cameras.py makes one); `check-hardware --report` (and so the lab's task file
  and the robot server) and `cameras show` read OpenCV network cameras, MJPEG streams this test serves on
  loopback at 15 fps (a recording or a video file ends, and a file is read as fast as it decodes: neither stands
  in for a camera over minutes).
- The person: at the SpaceMouse, the stand-in hidraw module tests/virtual_hid/hidraw.py (scripted per poll: the cap
  pushed away, let go, the success button); guiding the arm for `safety-box record` (franky-sim cannot be
  hand-guided): a client moves the hand to the task's reset pose first, so the recorded box holds the poses the env
  walks through (it is stretched to the home pose by the server).
- Commands run in this process through robot_rl.cli.main (the `robot-rl` entry point) except the robot server and
  the learner, which run beside the others as `python -m robot_rl.cli` processes.
- The ROS 2 half (docs/ros2.md's plain commands against `robot-rl ros2-twin`) is tests/test_first_week_ros2.py, with
  this module's reader, `Step` and `Rehearsal` and a table of its own.
"""

from __future__ import annotations

import http.server
import importlib.util
import json
import os
import re
import shlex
import socketserver
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "hardware.md"


# ------------------------------------------------------------------------------------------ the page's lines
def documented_lines(text: str) -> list[str]:
    """Every `robot-rl ...` command line of a Markdown page, in the page's order: inline code spans starting with
    `robot-rl ` (a span may wrap: its whitespace is normalised) and the lines of fenced blocks (a trailing `\\`
    continues a line)."""
    lines: list[str] = []
    fence = re.compile(r"^\s*```")
    in_fence, pending = False, ""
    prose: list[str] = []

    def flush_prose() -> None:
        joined = "\n".join(prose)
        for m in re.finditer(r"(?<!`)`(robot-rl\s[^`]+)`(?!`)", joined):
            lines.append(" ".join(m.group(1).split()))
        prose.clear()

    for raw in text.splitlines():
        if fence.match(raw):
            if not in_fence:
                flush_prose()
            in_fence = not in_fence
            pending = ""
            continue
        if not in_fence:
            prose.append(raw)
            continue
        line = pending + raw.strip()
        if line.endswith("\\"):
            pending = line[:-1].rstrip() + " "
            continue
        pending = ""
        if line.startswith("robot-rl "):
            lines.append(" ".join(line.split()))
    flush_prose()
    return lines


@dataclass(frozen=True)
class Step:
    """One rehearsed page line: `extra` flags appended (see the module docstring), `why` says why they are needed."""

    extra: tuple[str, ...] = ()
    why: str = ""


ACTOR_EXTRA = ("--quiet", "--threads", "1", "--flush-timeout", "60")
ACTOR_WHY = "a person stops an actor with Ctrl-C (--max-steps here); the stats for the checks"

REHEARSAL: dict[str, Step] = {
    "robot-rl check-hardware --robot-ip 172.16.0.2 --camera realsense:SERIAL=front --camera opencv:/dev/video0=wrist":
        Step(),
    "robot-rl cameras list": Step(),
    "robot-rl cameras show --camera ... --out framing.png": Step(),
    "robot-rl safety-box record --robot-ip ... --task twin-pick-cube --seconds 60 --out configs/box.json": Step(),
    "robot-rl check-hardware ... --report configs/hw.json": Step(),
    "robot-rl task init --out configs/lab.toml --from-box configs/box.json --check-hardware configs/hw.json": Step(),
    "robot-rl robot-server --backend franky --robot-ip 172.16.0.2 --task configs/lab.toml":
        Step(("--bind", "tcp://127.0.0.1:0", "--stats-every", "0"),
             "a free port (tests run in parallel; the default is a fixed one); no periodic counters"),
    "robot-rl record-demos --task configs/lab.toml --robot ADDR --teleop spacemouse --device-config spacemouse.json "
    "--episodes 20 --out demos/pick": Step(),
    "robot-rl record-labels --task configs/lab.toml --robot ADDR --teleop spacemouse --device-config spacemouse.json "
    "--out labels/pick":
        Step(("--frames", "16"), "a person stops labelling at some point (600 frames by default)"),
    "robot-rl train-classifier --labels labels/pick --out classifiers/pick":
        Step(("--min-episodes", "1", "--max-steps", "10", "--eval-every", "10", "--batch-size", "8",
              "--threads", "1"),
             "two label episodes and a few gradient steps: the rehearsal checks the hand-over, not the accuracy"),
    "robot-rl learner --task configs/lab.toml --demos demos/pick --offline-updates 1000 --out runs/pick":
        Step(("--bind", "{learner}", "--hidden", "32,32", "--ensemble", "2", "--batch", "8", "--critic-updates", "1",
              "--learning-starts", "100000", "--log-every", "1", "--no-tensorboard", "--quiet", "--threads", "1",
              "--set", "encoder_pretrain_steps=2"),
             "a free port; tiny networks and batches, 2 steps of the encoder's pretraining on the demos, no online "
             "updates (CPU CI: the rehearsal checks the hand-over from the demos' policy to the actors, not the "
             "learning)"),
    "robot-rl actor --task configs/lab.toml --robot ADDR --learner ADDR --reward classifier:classifiers/pick":
        Step(("--max-steps", "3", *ACTOR_EXTRA, "--stats-out", "actor-classifier.json"), ACTOR_WHY),
    "robot-rl actor --task configs/lab.toml --robot ADDR --learner ADDR --reward classifier:classifiers/pick "
    "--intervene spacemouse":
        Step(("--max-steps", "8", *ACTOR_EXTRA, "--stats-out", "actor-intervene.json"), ACTOR_WHY),
    "robot-rl estop ADDR": Step(),
    "robot-rl actor --task configs/lab.toml --robot ADDR --learner ADDR --reward human --intervene spacemouse "
    "--device-config spacemouse.json":
        Step(("--max-steps", "8", *ACTOR_EXTRA, "--stats-out", "actor-human.json"), ACTOR_WHY),
}
"""The page's lines the rehearsal runs (with the placeholders substituted and `extra` appended; an extra's {name}
is filled in like the line's)."""

COVERED_BY: dict[str, str] = {
    "robot-rl robot-server --backend franky": "robot-rl robot-server --backend franky --robot-ip 172.16.0.2",
    "robot-rl actor --robot ADDR": "robot-rl actor --task configs/lab.toml --robot ADDR",
    "robot-rl learner": "robot-rl learner --task configs/lab.toml --demos demos/pick ...",
    "robot-rl learner --offline-updates N": "the same learner line: a fresh run with --demos demos/pick",
    "robot-rl estop": "robot-rl estop ADDR",
    "robot-rl check-hardware": "robot-rl check-hardware --robot-ip 172.16.0.2 ...",
}
"""Short mentions of a rehearsed command (the words of the mention, in order, are in what the rehearsal runs)."""

EXEMPT: dict[str, str] = {
    "robot-rl sim": "the twin's all-in-one command, named for comparison (tests/test_sim_cli.py)",
    "robot-rl train": "the twin's one-process trainer, named for comparison (tests/test_operators.py runs its flags)",
    "robot-rl keys generate": "keys are for links beyond loopback; the rehearsal runs on loopback "
                              "(tests/test_keys_cli.py)",
    "robot-rl actor --pace auto": "names the default the rehearsed actor lines run with (tests/test_actor_run.py "
                                  "tests the pacing)",
}
"""Page lines the rehearsal does not run, and why."""

DOC_FIXES: dict[str, tuple[str, str]] = {}
"""Page lines that cannot run as written: line -> (the line that does, why). Each entry fails the test once the
page reads the fixed line (drop the entry then). Empty: the page's lines run as written (the earlier entries,
`--device-config` for record-demos and `--obs-mode pixels` for the actor and learner lines, were fixed on the page
and by the lab task file's `[observation] mode = "pixels"`)."""

PLACEHOLDER = re.compile(r"(?:^|[\s:=/])([A-Z][A-Z_]*|\.\.\.)(?=$|[\s:=/])")
"""An all-capitals word (ADDR, SERIAL, N) or `...` in a command line, alone or between `:`, `=`, `/`."""

SUBSTITUTIONS: list[tuple[str, str, str]] = [
    # (command, text on the page, replacement); command "*" = any
    ("*", "--robot-ip 172.16.0.2", "--robot-ip {robot_ip}"),
    ("*", "--robot-ip ...", "--robot-ip {robot_ip}"),
    ("check-hardware", "realsense:SERIAL=front", "realsense:{recording}=front"),
    ("check-hardware", "check-hardware ... --report",
     "check-hardware --robot-ip {robot_ip} --camera opencv:{front_stream}=front --camera opencv:{wrist_stream}=wrist "
     "--report"),
    ("*", "opencv:/dev/video0=wrist", "opencv:{wrist_stream}=wrist"),
    ("cameras", "--camera ...", "--camera opencv:{front_stream}=front"),
    ("safety-box", "--seconds 60", "--seconds 1"),
    ("record-demos", "--episodes 20", "--episodes 1"),
    ("*", "--robot ADDR", "--robot {server}"),
    ("*", "--learner ADDR", "--learner {learner}"),
    ("estop", "estop ADDR", "estop {server}"),
    ("learner", "--offline-updates N", "--offline-updates 3"),
    ("learner", "--offline-updates 1000", "--offline-updates 3"),
]
"""The page's placeholders -> the rehearsal's values ({name}: filled in at run time)."""


def runnable(line: str, substitutions: list[tuple[str, str, str]] | None = None,
             fixes: dict[str, tuple[str, str]] | None = None) -> str:
    """The line the rehearsal runs for a page line: `fixes` (default DOC_FIXES) applied, placeholders substituted
    by `substitutions` (default SUBSTITUTIONS; still with the {name} fields of the run's values); AssertionError
    naming any placeholder left."""
    line = (DOC_FIXES if fixes is None else fixes).get(line, (line, ""))[0]
    command = line.split()[1]
    for cmd, old, new in SUBSTITUTIONS if substitutions is None else substitutions:
        if cmd in ("*", command):
            line = line.replace(old, new)
    left = PLACEHOLDER.findall(line)
    assert not left, f"unknown placeholder(s) {left} in the page's line {line!r}: add them to SUBSTITUTIONS"
    return line


def _words_in_order(needle: list[str], hay: list[str]) -> bool:
    it = iter(hay)
    return all(w in it for w in needle)


# ------------------------------------------------------------------------------------------ fast checks
def test_the_page_parser_reads_spans_blocks_and_continuations() -> None:
    text = ("Run `robot-rl estop ADDR` or `robot-rl\n  learner --x 1`, not ``robot-rl sim``.\n\n```bash\n"
            "robot-rl actor --task t \\\n    --robot ADDR\nrobot-rl learner\n# robot-rl not-this\n```\nthen "
            "`robot-rl train`\n")
    assert documented_lines(text) == ["robot-rl estop ADDR", "robot-rl learner --x 1", "robot-rl actor --task t "
                                      "--robot ADDR", "robot-rl learner", "robot-rl train"]
    assert PLACEHOLDER.findall("robot-rl x --camera realsense:SERIAL=front --a ... --n N --out a/FILE/b") == [
        "SERIAL", "...", "N", "FILE"]
    assert PLACEHOLDER.findall("robot-rl x --task pick_cube --reward classifier:classifiers/pick --arm FR3x") == []
    with pytest.raises(AssertionError, match=r"unknown placeholder\(s\) \['HOST'\]"):
        runnable("robot-rl estop tcp://HOST:5560")


def check_mentions_and_extras(rehearsal: dict[str, Step], covered_by: Any, to_argv_line: Any,
                              mention_cut: str = "") -> None:
    """Each short mention (`covered_by`, its `mention_cut` text removed) is held in order by a rehearsed line; no
    step's extras repeat a flag its line gives, and extras come with a reason. `to_argv_line` makes a page line
    runnable (the placeholders substituted)."""
    rehearsed = [shlex.split(to_argv_line(ln)) for ln in rehearsal]
    for mention in covered_by:
        words = shlex.split(to_argv_line(mention).replace(mention_cut, ""))  # ("" cut: the mention as it is)
        assert any(_words_in_order(words, argv) for argv in rehearsed), f"{mention!r}: no rehearsed line holds it"
    for line, step in rehearsal.items():
        given = {w for w in shlex.split(to_argv_line(line)) if w.startswith("--")}
        repeated = given & {w for w in step.extra if w.startswith("--")}
        assert not repeated, f"{line!r}: EXTRA repeats {sorted(repeated)}"
        assert not step.extra or step.why, f"{line!r}: extras without a reason"


def test_every_documented_line_is_rehearsed_or_exempt() -> None:
    """The page and the rehearsal cannot drift apart: every page line is run (or a mention of one that is), or
    exempt with a reason; no entry names a line the page no longer has; no placeholder is left unsubstituted;
    extras never repeat a flag of the line; DOC_FIXES entries are still needed."""
    lines = documented_lines(PAGE.read_text())
    assert len(lines) >= 15, lines
    unknown = [ln for ln in lines if ln not in REHEARSAL and ln not in COVERED_BY and ln not in EXEMPT]
    assert not unknown, f"docs/hardware.md lines neither rehearsed nor exempt (add them to REHEARSAL or EXEMPT in " \
                        f"{Path(__file__).name}): {unknown}"
    stale = [ln for ln in [*REHEARSAL, *COVERED_BY, *EXEMPT, *DOC_FIXES] if ln not in lines]
    assert not stale, f"entries for lines docs/hardware.md no longer has: {stale}"
    check_mentions_and_extras(REHEARSAL, COVERED_BY, runnable)
    for fixed, why in DOC_FIXES.values():
        assert fixed not in lines and why, f"docs/hardware.md now reads {fixed!r}: drop its DOC_FIXES entry"


def test_every_rehearsed_line_parses_with_its_commands_parser() -> None:
    """A dry run of the lines (as tests/test_launch_files.py does for the launch files), so a flag the page names
    that a command lost fails here in seconds, without franky-sim."""
    from actors.run import actor_arg_parser
    from demos.recording.demos import record_demos_arg_parser
    from demos.recording.labels import record_labels_arg_parser
    from envs.robot_server.run import robot_server_arg_parser
    from learners.distributed.flags import build_learner_parser

    parsers = {"actor": actor_arg_parser, "record-demos": record_demos_arg_parser,
               "record-labels": record_labels_arg_parser, "robot-server": robot_server_arg_parser,
               "learner": build_learner_parser}
    values = {"robot_ip": "127.0.0.1", "recording": "/x.db3", "front_stream": "http://127.0.0.1:1/f.mjpg",
              "wrist_stream": "http://127.0.0.1:1/w.mjpg", "server": "tcp://127.0.0.1:2",
              "learner": "tcp://127.0.0.1:3"}
    for line in REHEARSAL:
        argv = [*shlex.split(runnable(line).format(**values)), *(e.format(**values) for e in REHEARSAL[line].extra)]
        if argv[1] in parsers:
            parsers[argv[1]]().parse_args(argv[2:])


# ------------------------------------------------------------------------------------------ the rehearsal
class _Mjpeg(http.server.BaseHTTPRequestHandler):
    """An MJPEG stream (multipart/x-mixed-replace, as IP cameras serve it) of 64x48 frames at 15 fps whose grey level
    counts up: OpenCV's FFMPEG backend opens it as a network camera."""

    def do_GET(self) -> None:
        import cv2

        self.send_response(200)
        self.send_header("Content-Type", "multipart/x-mixed-replace; boundary=frame")
        self.end_headers()
        i = 0
        try:
            while not getattr(self.server, "stopping", False):
                jpg = cv2.imencode(".jpg", np.full((48, 64, 3), 40 + (5 * i) % 200, np.uint8))[1].tobytes()
                self.wfile.write(b"--frame\r\nContent-Type: image/jpeg\r\nContent-Length: %d\r\n\r\n" % len(jpg)
                                 + jpg + b"\r\n")
                i += 1
                time.sleep(1 / 15)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args: Any) -> None:
        pass


class _Streams(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    stopping = False


@pytest.fixture()
def streams() -> Iterator[str]:
    server = _Streams(("127.0.0.1", 0), _Mjpeg)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.stopping = True
        server.shutdown()
        server.server_close()


def wait_for_interventions(run_dir: Path, at_least: int = 3, timeout_s: float = 60.0) -> None:
    """Until the learner's status in `run_dir` shows an actor with interventions, each such actor with >= at_least
    (the status is written now and then: a first sight may show an actor's transitions only in part)."""
    from tests.test_runtime_faults import status

    def enough(seen: dict[str, Any]) -> bool:
        return bool(seen) and all(a["interventions"] >= at_least for a in seen.values())

    seen: dict[str, Any] = {}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not enough(seen):
        seen = {k: a for k, a in status(run_dir).get("actors", {}).items() if a.get("interventions")}
        time.sleep(0.2)
    assert enough(seen), status(run_dir)


def record_one_demo(r: Rehearsal, demo_line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[Any]:
    """Run the page's record-demos line with the person pushing the cap away for two polls, then pressing the
    success button: exactly one kept, successful episode, all of it the person's +x. Returns the episodes."""
    from robot_rl.episodes import load_dir

    r.person(_person(tmp_path / "demo-person.json", 100, {2: [PUSH], 4: [LET_GO], 6: RIGHT_BUTTON}))
    code, out = r.run(demo_line, capsys)
    assert code == 0, out
    demos, errors = load_dir(tmp_path / "demos" / "pick")
    assert not errors and len(demos) == 1 and demos[0].is_success and demos[0].success[-1], out
    assert demos[0].intervention.all() and demos[0].actions[:, 0].max() > 0.5  # the person's +x
    return demos


def assert_estopped(address: str) -> None:
    """The robot server at `address` answers its state and refuses commands as e-stopped."""
    from envs.remote import RemoteRobot, RemoteRobotConfig
    from robot_rl.errors import RobotError

    with RemoteRobot(RemoteRobotConfig(address=address)) as client:
        s = client.state()
        with pytest.raises(RobotError, match="e-stopped"):
            client.command(s.pos_base_ee, s.quat_base_ee, 0.0)


def _person(path: Path, cycle: int, polls: dict[int, list[bytes]]) -> Path:
    """A script for tests/virtual_hid/hidraw.py: poll K % cycle delivers polls[K] (HID reports)."""
    path.write_text(json.dumps({"cycle": cycle, "polls": {str(k): [r.hex() for r in v] for k, v in polls.items()}}))
    return path


PUSH = struct.pack("<B3h", 1, 0, -350, 0)  # the cap pushed away from the user: +x
LET_GO = struct.pack("<B3h", 1, 0, 0, 0)
RIGHT_BUTTON = [bytes([3, 2]), bytes([3, 0])]  # pressed and released


@dataclass
class Rehearsal:
    """The run's values (SUBSTITUTIONS' {names}), its working directory and the processes it started."""

    cwd: Path
    values: dict[str, str]
    monkeypatch: pytest.MonkeyPatch
    procs: list[subprocess.Popen[str]] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    steps: dict[str, Step] = field(default_factory=lambda: REHEARSAL)
    substitutions: list[tuple[str, str, str]] = field(default_factory=lambda: SUBSTITUTIONS)
    fixes: dict[str, tuple[str, str]] = field(default_factory=lambda: DOC_FIXES)
    """The page's table (another page's rehearsal, e.g. tests/test_first_week_ros2.py, passes its own)."""

    def argv(self, line: str) -> list[str]:
        argv = shlex.split(runnable(line, self.substitutions, self.fixes).format(**self.values))
        return [*argv[1:], *(e.format(**self.values) for e in self.steps[line].extra)]

    def run(self, line: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
        """`line` through robot_rl.cli.main in this process (cwd: the rehearsal's); (exit code, stdout+stderr)."""
        from robot_rl import cli

        self.ran.append(line)
        capsys.readouterr()
        code = cli.main(self.argv(line))
        out = capsys.readouterr()
        return code, out.out + out.err

    def person(self, script: Path | None) -> None:
        """The SpaceMouse the next command opens: tests/virtual_hid/hidraw.py playing `script` (None: unplugged)."""
        if script is None:
            self.monkeypatch.delenv("VIRTUAL_SPACEMOUSE_SCRIPT", raising=False)
        else:
            self.monkeypatch.setenv("VIRTUAL_SPACEMOUSE_SCRIPT", str(script))
        spec = importlib.util.spec_from_file_location("hidraw", ROOT / "tests" / "virtual_hid" / "hidraw.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        self.monkeypatch.setitem(sys.modules, "hidraw", module)
        self.monkeypatch.setitem(sys.modules, "hid", module)

    def start(self, name: str, argv: list[str]) -> subprocess.Popen[str]:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
        log = open(self.cwd / f"{name}.log", "w")
        proc = subprocess.Popen([sys.executable, "-m", "robot_rl.cli", *argv], stdout=subprocess.PIPE, stderr=log,
                                stdin=subprocess.DEVNULL, text=True, cwd=self.cwd, env=env)
        self.procs.append(proc)
        return proc

    def serve(self, line: str) -> tuple[subprocess.Popen[str], str]:
        """The robot server of `line` as a process; (process, the address it serves on)."""
        self.ran.append(line)
        proc = self.start("robot-server", self.argv(line))
        assert proc.stdout is not None
        seen = ""
        for first in iter(proc.stdout.readline, ""):  # a backend may say a line first (ros2: its controller)
            seen += first
            if first.startswith("robot-server: serving "):
                return proc, first.split(" on ")[1].split()[0]
        raise AssertionError(seen + (self.cwd / "robot-server.log").read_text()[-3000:])

    def stop(self, proc: subprocess.Popen[str], timeout: float = 60.0) -> int:
        proc.terminate()
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(10)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                self.stop(proc, 20.0)


def _guide_to_reset_pose(robot_ip: str) -> None:
    """The person guiding the arm before `safety-box record` (franky-sim cannot be hand-guided): the hand is walked to
    pick_cube's reset pose, gripper down, 2 cm per 0.1 s, then the client lets go."""
    from envs.hardware.franky_robot import FrankyRobot, FrankyRobotConfig
    from envs.tasks import get_task

    goal = np.asarray(get_task("pick_cube").reset_pos_m)
    down = np.array([0.0, 1.0, 0.0, 0.0])
    robot = FrankyRobot(FrankyRobotConfig(robot_ip=robot_ip))
    try:
        for _ in range(300):
            s = robot.state()
            if np.linalg.norm(goal - s.pos_base_ee) < 0.003:
                break
            robot.command(s.pos_base_ee + np.clip(goal - s.pos_base_ee, -0.02, 0.02), down, 0.0)
            robot.wait(0.1)
        assert np.linalg.norm(goal - robot.state().pos_base_ee) < 0.005
    finally:
        robot.stop()


@pytest.mark.slow
@pytest.mark.usefixtures("close_remote_robots")
def test_a_labs_first_week_against_franky_sim(tmp_path: Path, streams: str, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from franky_faults import FrankySim, require_franky

    require_franky()
    pytest.importorskip("pyrealsense2")
    from test_cameras import _record

    from envs.hardware.safety_box import load_task_config
    from envs.remote import RemoteRobot, RemoteRobotConfig
    from robot_rl.episodes import load_dir
    from robot_rl.task_file import load_task_file
    from tests.test_runtime_faults import free_port

    sim = FrankySim.start()
    monkeypatch.chdir(tmp_path)
    r = Rehearsal(tmp_path, {"robot_ip": sim.ip, "recording": str(_record(tmp_path, 10)),
                             "front_stream": f"{streams}/front.mjpg", "wrist_stream": f"{streams}/wrist.mjpg",
                             "learner": f"tcp://127.0.0.1:{free_port()}"}, monkeypatch)
    page = PAGE.read_text()
    quoted = re.search(r"a\s+`spacemouse\.json` holding `(\{.*?\})`", page, re.S)
    assert quoted is not None, "the page no longer quotes spacemouse.json"
    (tmp_path / "spacemouse.json").write_text(quoted.group(1))
    t0 = time.monotonic()
    took: dict[str, float] = {}

    def line(start: str, end: str = "") -> str:
        """The one REHEARSAL line that starts with `start` and ends with `end`."""
        found = [ln for ln in REHEARSAL if ln.startswith(start) and ln.endswith(end)]
        assert len(found) == 1, (start, end, found)
        return found[0]

    def lap(name: str) -> None:
        took[name] = round(time.monotonic() - t0 - sum(took.values()), 1)

    try:
        # 1. check-hardware: the arm and the cameras read, nothing moved
        code, out = r.run(line("robot-rl check-hardware --robot-ip"), capsys)
        assert code == 0 and "all good" in out and "camera front (realsense" in out, out
        assert "camera wrist (opencv" in out, out
        # 2. the framing
        code, out = r.run("robot-rl cameras list", capsys)
        assert code == 0, out
        code, out = r.run("robot-rl cameras show --camera ... --out framing.png", capsys)
        assert code == 0 and (tmp_path / "framing.png").stat().st_size > 0, out
        lap("check-hardware, cameras")
        # 3. the lab's box: the person guides the arm (to the reset pose), the recorder writes a task config; then
        # check-hardware's report (the joints there, the lab's cameras)
        _guide_to_reset_pose(sim.ip)
        code, out = r.run(line("robot-rl safety-box"), capsys)
        assert code == 0, out
        box = load_task_config(tmp_path / "configs" / "box.json")
        assert box.name == "pick_cube"
        np.testing.assert_allclose(box.pos_min_m, box.pos_max_m, atol=2e-3)  # the arm rested where it was guided
        code, out = r.run(line("robot-rl check-hardware ... --report"), capsys)
        assert code == 0 and "all good" in out, out
        report = json.loads((tmp_path / "configs" / "hw.json").read_text())
        assert [c["name"] for c in report["cameras"]] == ["front", "wrist"] and len(report["robot"]["q_rad"]) == 7
        lap("safety-box record, check-hardware --report")
        # 4. the lab's task file: the box, the cameras, the home joints; pixels observations
        code, out = r.run(line("robot-rl task init"), capsys)
        assert code == 0 and "the lab's box" in out, out
        lab = load_task_file(tmp_path / "configs" / "lab.toml")
        assert (lab.name, lab.box_source, lab.obs_mode) == ("lab", "lab", "pixels"), lab.sections
        assert lab.sections["cameras"]["front"]["device"] == r.values["front_stream"]
        np.testing.assert_allclose(lab.value("box", "pos_min_m"), box.pos_min_m)
        lap("task init")
        # 5. the robot server with the lab's task file: its box and its cameras
        server_line = line("robot-rl robot-server")
        server, r.values["server"] = r.serve(server_line)
        with RemoteRobot(RemoteRobotConfig(address=r.values["server"])) as probe:
            # the task the lab's file resolves to (its base's twin scene, with the lab's values)
            assert probe.info["backend"] == "franky" and probe.info["task"] == "pick_cube", probe.info
            assert sorted(probe.info["cameras"]) == ["front", "wrist"]
        lap("robot-server")
        # 6. demonstrations: the cap pushed away for two polls, then the success button: one kept episode
        demos = record_one_demo(r, line("robot-rl record-demos"), tmp_path, capsys)
        assert demos[0].observations["images/front"].shape[1:] == demos[0].observations["images/wrist"].shape[1:] \
            == (128, 128, 3)
        lap("record-demos")
        # 7. labels: per segment, success labelling on (button) and off again, then --after-success frames
        r.person(_person(tmp_path / "label-person.json", 1000, {2: RIGHT_BUTTON, 5: RIGHT_BUTTON,
                                                                14: RIGHT_BUTTON, 17: RIGHT_BUTTON}))
        code, out = r.run(line("robot-rl record-labels"), capsys)
        assert code == 0, out
        labels, errors = load_dir(tmp_path / "labels" / "pick")
        assert not errors and len(labels) >= 2 and all(e.success.any() and not e.success.all() for e in labels), out
        lap("record-labels")
        # 8. the classifier
        code, out = r.run(line("robot-rl train-classifier"), capsys)
        assert code == 0, out
        assert (tmp_path / "classifiers" / "pick").is_dir()
        lap("train-classifier")
        # 9. the learner (the demos' policy first: --offline-updates), then the actors
        learner_line = line("robot-rl learner")
        r.ran.append(learner_line)
        learner = r.start("learner", r.argv(learner_line))
        r.person(None)
        code, out = r.run(line("robot-rl actor", "--reward classifier:classifiers/pick"), capsys)
        assert code == 0, out + (tmp_path / "learner.log").read_text()[-3000:]
        stats = json.loads((tmp_path / "actor-classifier.json").read_text())
        assert stats["env_steps"] == 3 and stats["flushed"], stats
        lap("learner + actor (classifier)")
        # 10. a person intervening: the cap pushed on polls 2-4 of every 10
        r.person(_person(tmp_path / "intervene-person.json", 10, {2: [PUSH], 5: [LET_GO]}))
        code, out = r.run(line("robot-rl actor", "--intervene spacemouse"), capsys)
        assert code == 0, out
        stats = json.loads((tmp_path / "actor-intervene.json").read_text())
        assert stats["env_steps"] == 8 and stats["flushed"], stats
        wait_for_interventions(tmp_path / "runs" / "pick")
        lap("actor (intervene)")
        # 11. e-stop: the server refuses everything until it restarts
        code, out = r.run("robot-rl estop ADDR", capsys)
        assert code == 0, out
        assert_estopped(r.values["server"])
        assert r.stop(server) == 0, (tmp_path / "robot-server.log").read_text()[-3000:]
        lap("estop")
        # 12. resume: the robot server restarted, the person's success button as the reward
        server, r.values["server"] = r.serve(server_line)
        r.person(_person(tmp_path / "human-person.json", 100, {2: [PUSH], 4: [LET_GO], 6: RIGHT_BUTTON}))
        code, out = r.run(line("robot-rl actor", "--device-config spacemouse.json"), capsys)
        assert code == 0, out
        stats = json.loads((tmp_path / "actor-human.json").read_text())
        assert stats["env_steps"] == 8 and stats["flushed"], stats
        assert stats["reward_model"]["ended_by_model"] >= 1, stats  # the success button ended an episode
        lap("restart + actor (human reward)")
        assert r.stop(learner) == 0, (tmp_path / "learner.log").read_text()[-3000:]
        assert r.stop(server) == 0, (tmp_path / "robot-server.log").read_text()[-3000:]
    finally:
        r.close()
        sim.close()
    print(f"first week: {took} s")
    assert sorted(set(r.ran)) == sorted(REHEARSAL), set(REHEARSAL) - set(r.ran)
