"""launch/: ROS 2 XML launch files, checked without ROS (ROS 2's `launch` is not on PyPI): every file parses, every
declared argument has a description and is used, every used argument is declared, includes pass only arguments
the included file declares, and every robot-rl command line a file would run parses with robot-rl's own argument
parser (a dry run, with the declared defaults substituted). launch/ must not be an importable Python package
(it would shadow ROS 2's `launch`)."""

from __future__ import annotations

import importlib
import importlib.util
import re
import shlex
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from robot_rl.cli import SUBCOMMANDS

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = ROOT / "launch"
FILES = sorted(LAUNCH.glob("*.launch.xml"))
VAR = re.compile(r"\$\(var ([A-Za-z0-9_]+)\)")
SUBST = re.compile(r"\$\((?!var |dirname\))[^)]*\)")  # any other substitution: not used by our files


def _parse(path: Path) -> ET.Element:
    root = ET.parse(path).getroot()
    assert root.tag == "launch", f"{path.name}: root element is <{root.tag}>, not <launch>"
    return root


def _declared(root: ET.Element) -> dict[str, str | None]:
    return {a.get("name", ""): a.get("default") for a in root.findall("arg")}


def _texts(root: ET.Element) -> list[str]:
    """Every attribute value and text outside the <arg> declarations."""
    out: list[str] = []
    for el in root.iter():
        if el.tag == "arg" and el in list(root):  # a top-level declaration
            continue
        out.extend(el.attrib.values())
        if el.text and el.text.strip():
            out.append(el.text)
    return out


def _substitute(text: str, values: dict[str, str]) -> str:
    text = text.replace("$(dirname)", str(LAUNCH))
    return VAR.sub(lambda m: values[m.group(1)], text)


PARSERS = {
    "actor": "actors.run:actor_arg_parser",
    "record-demos": "demos.recording.demos:record_demos_arg_parser",
    "record-labels": "demos.recording.labels:record_labels_arg_parser",
    "robot-server": "envs.robot_server.run:robot_server_arg_parser",
    "ros2-twin": "envs.ros2.twin_run:ros2_twin_arg_parser",
    "learner": "learners.distributed.flags:build_learner_parser",
}
"""The library function that builds each command's argument parser (command modules are never imported)."""


def _parser(subcommand: str):  # type: ignore[no-untyped-def]
    module, _, name = PARSERS[subcommand].partition(":")
    return getattr(importlib.import_module(module), name)()


def test_there_are_launch_files_for_every_process() -> None:
    names = {p.name for p in FILES}
    assert {"robot_server_ros2.launch.xml", "robot_server_franky.launch.xml", "learner.launch.xml",
            "actor.launch.xml", "record_demos.launch.xml", "record_labels.launch.xml", "hardware.launch.xml",
            "twin.launch.xml"} <= names


def test_launch_is_not_a_python_package() -> None:
    assert not (LAUNCH / "__init__.py").exists() and not list(LAUNCH.glob("*.py"))
    spec = importlib.util.find_spec("launch")
    assert spec is None or ROOT not in Path(spec.origin or "/").parents  # ROS 2's, if any, never ours


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_arguments_are_declared_documented_and_used(path: Path) -> None:
    root = _parse(path)
    declared = _declared(root)
    for arg in root.findall("arg"):
        assert arg.get("description"), f"{path.name}: <arg {arg.get('name')}> has no description"
        assert arg.get("default") is not None, f"{path.name}: <arg {arg.get('name')}> has no documented default"
    used = {m for t in _texts(root) for m in VAR.findall(t)}
    assert not (set(declared) - used), f"{path.name}: declared but never used: {sorted(set(declared) - used)}"
    assert not (used - set(declared)), f"{path.name}: used but not declared: {sorted(used - set(declared))}"
    assert not [t for t in _texts(root) if SUBST.search(t)], f"{path.name}: a substitution other than var/dirname"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_includes_exist_and_pass_declared_arguments(path: Path) -> None:
    root = _parse(path)
    for inc in root.iter("include"):
        raw = inc.get("file", "")
        # a file chosen by an argument (robot_server_$(var backend)): every file the pattern can name
        pattern = VAR.sub("*", raw.replace("$(dirname)", str(LAUNCH)))
        candidates = sorted(Path("/").glob(pattern.lstrip("/")))
        default = Path(_substitute(raw, {k: v or "" for k, v in _declared(root).items()}))
        assert default in candidates, f"{path.name}: includes {default}, which does not exist"
        for arg in inc.findall("arg"):
            assert any(arg.get("name") in _declared(_parse(c)) for c in candidates), \
                f"{path.name}: passes {arg.get('name')} to {raw}, which no candidate file declares"


def _commands(path: Path) -> list[list[str]]:
    root = _parse(path)
    values = {k: (v if v != "" else "") for k, v in _declared(root).items() if v is not None}
    cmds = []
    for ex in root.iter("executable"):
        cmds.append(shlex.split(_substitute(ex.get("cmd", ""), values)))
    return cmds


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_command_line_parses_with_robot_rls_parsers(path: Path) -> None:
    cmds = _commands(path)
    root = _parse(path)
    assert cmds or root.findall("include"), f"{path.name}: runs nothing"
    for argv in cmds:
        assert argv[0] == "robot-rl" and argv[1] in SUBCOMMANDS, f"{path.name}: {argv[:2]} is not a robot-rl command"
        try:
            _parser(argv[1]).parse_args(argv[2:])
        except SystemExit as err:  # argparse's way to refuse a command line
            pytest.fail(f"{path.name}: `{shlex.join(argv)}` does not parse (exit {err.code})")


def test_the_dry_run_catches_a_bad_command_line(tmp_path: Path) -> None:
    """The check above can fail: an unknown option is refused."""
    with pytest.raises(SystemExit):
        _parser("actor").parse_args(["--task", "twin-reach", "--no-such-option", "1"])


def test_hardware_launch_includes_robot_server_learner_and_actor() -> None:
    root = _parse(LAUNCH / "hardware.launch.xml")
    files = [inc.get("file", "") for inc in root.iter("include")]
    assert any("robot_server_$(var backend)" in f for f in files)
    assert any(f.endswith("learner.launch.xml") for f in files) and any(f.endswith("actor.launch.xml") for f in files)
    backends = {p.name[len("robot_server_"):-len(".launch.xml")] for p in LAUNCH.glob("robot_server_*.launch.xml")}
    assert backends == {"ros2", "franky"}
    # and the twin file runs the twin, the ros2 robot server bridging it, a learner and an actor
    subcommands = {argv[1] for argv in _commands(LAUNCH / "twin.launch.xml")}
    assert subcommands == {"ros2-twin", "robot-server", "learner", "actor"}


def test_the_docs_show_the_launch_commands() -> None:
    docs = "".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))
    for name in ("hardware.launch.xml", "twin.launch.xml", "record_demos.launch.xml", "robot_server_ros2.launch.xml"):
        assert f"ros2 launch launch/{name}" in docs, name


def test_every_process_stops_the_whole_launch_when_it_dies() -> None:
    """on_exit="shutdown" on every executable and node: one process dying (robot server, learner, actor, camera
    node) ends the launch instead of leaving the rest running."""
    for path in FILES:
        for el in [*_parse(path).iter("executable"), *_parse(path).iter("node")]:
            assert el.get("on_exit") == "shutdown", f"{path.name}: <{el.tag} {el.get('name')}> lacks on_exit=shutdown"


def test_realsense_serials_reach_realsense2_camera_as_strings() -> None:
    """realsense2_camera reads an all-digit serial_no as an integer unless it starts with '_' (its documented
    workaround): the launch files prefix the serial a user gives."""
    params = [p for path in FILES for node in _parse(path).iter("node") for p in node.iter("param")
              if p.get("name") == "serial_no"]
    assert params and all(p.get("value", "").startswith("_$(var ") for p in params)


def _truthy(text: str) -> bool:
    return text.strip().lower() in ("true", "1")


def _expand(path: Path, given: dict[str, str]) -> tuple[list[list[str]], set[str]]:
    """The robot-rl command lines `ros2 launch path k:=v ...` would run (includes followed, if / unless evaluated,
    arguments given on the command line visible in included files as ROS 2 does) and every argument name the file
    and its includes declare."""
    root = _parse(path)
    values = {k: v or "" for k, v in _declared(root).items()}
    values.update(given)
    declared = set(_declared(root))
    cmds: list[list[str]] = []
    for el in root:
        if "if" in el.attrib and not _truthy(_substitute(el.get("if", ""), values)):
            continue
        if "unless" in el.attrib and _truthy(_substitute(el.get("unless", ""), values)):
            continue
        if el.tag == "executable":
            cmds.append(shlex.split(_substitute(el.get("cmd", ""), values)))
        elif el.tag == "include":
            passed = {a.get("name", ""): _substitute(a.get("value", ""), values) for a in el.findall("arg")}
            sub_cmds, sub_declared = _expand(Path(_substitute(el.get("file", ""), values)), {**given, **passed})
            cmds += sub_cmds
            declared |= sub_declared
    return cmds, declared


def _docs_launch_lines() -> list[tuple[str, str]]:
    out = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        out += [(page.name, line.strip()) for line in page.read_text().splitlines()
                if line.strip().startswith("ros2 launch launch/")]
    return out


def test_the_docs_launch_lines_dry_run_as_written() -> None:
    """Every `ros2 launch` line of the docs, in order, as written: its arguments are declared, the robot-rl command
    lines it starts parse, no camera spec is a placeholder, and a learner's demo directory is one an earlier line
    records (record_demos out:=)."""
    from envs.hardware.cameras import parse_camera_spec

    lines = _docs_launch_lines()
    assert len(lines) >= 8
    recorded: set[str] = set()
    for page, line in lines:
        words = shlex.split(line)
        path = ROOT / words[2]
        assert path.is_file(), f"{page}: {line}: no such launch file"
        given = dict(w.split(":=", 1) for w in words[3:])
        cmds, declared = _expand(path, given)
        assert not set(given) - declared, f"{page}: {line}: undeclared arguments {sorted(set(given) - declared)}"
        for argv in cmds:
            try:
                args = vars(_parser(argv[1]).parse_args(argv[2:]))
            except SystemExit as err:
                pytest.fail(f"{page}: {line}: `{shlex.join(argv)}` does not parse (exit {err.code})")
            for spec in args.get("camera") or []:
                parse_camera_spec(spec)  # ConfigError for a placeholder serial
            if argv[1] == "record-demos":
                recorded.add(args["out"])
            if argv[1] == "learner" and args.get("demos"):
                assert args["demos"] in recorded, \
                    f"{page}: {line}: the learner loads {args['demos']}, which no earlier line records"


def test_the_docs_dry_run_catches_what_it_claims(tmp_path: Path) -> None:
    """The checks above can fail: a placeholder serial, an undeclared argument, a demo directory never recorded."""
    from envs.hardware.cameras import parse_camera_spec
    from robot_rl.errors import ConfigError

    cmds, declared = _expand(LAUNCH / "hardware.launch.xml", {"backend": "franky"})
    server = next(c for c in cmds if c[1] == "robot-server")
    with pytest.raises(ConfigError, match="placeholder"):
        parse_camera_spec(server[server.index("--camera") + 1])
    assert "no_such_arg" not in declared and "front_camera" in declared and "start_realsense" not in declared
    learner = next(c for c in cmds if c[1] == "learner")
    assert learner[learner.index("--demos") + 1] == "demos/task"  # the default: recorded by no docs line
    cmds, _ = _expand(LAUNCH / "hardware.launch.xml", {"start_learner": "false"})
    assert "learner" not in {c[1] for c in cmds} and {"robot-server", "actor"} <= {c[1] for c in cmds}
