"""A lab's task file may extend another lab file (`base = "PATH"`, relative to the file): it inherits that file's
values (its box from the lab included) and overrides its own; a cycle of bases or a missing base is one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from envs.task_file import require_lab_box, resolve_task
from learners.agents.options import AgentFlags, resolve_agent, state_select_origin
from robot_rl.errors import ConfigError
from robot_rl.presets import get_preset, task_reward
from robot_rl.task_file import load_task_file

SHARED = """[task]
name = "lab-shared"
base = "twin-pick-cube"

[box]
pos_min_m = [0.35, -0.2, 0.02]
pos_max_m = [0.65, 0.2, 0.3]

[reward]
source = "classifier"
classifier = "cls"

[observation]
state = ["state[0:3]", "state[12]"]
"""
ARM = """[task]
name = "lab-arm-2"
base = "shared/lab.toml"

[reset]
pos_m = [0.5, 0.05, 0.22]

[cameras.front]
kind = "realsense"
serial = "123"
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_file_extends_a_lab_file(tmp_path: Path) -> None:
    write(tmp_path / "shared" / "lab.toml", SHARED)
    arm = str(write(tmp_path / "arm.toml", ARM))
    tf = load_task_file(arm)
    assert tf.name == "lab-arm-2" and tf.base is not None and tf.base.name == "lab-shared"
    assert tf.base.base is not None and tf.base.base.name == "twin-pick-cube"
    assert tf.value("box", "pos_min_m") == (0.35, -0.2, 0.02) and tf.box_source == "lab"  # the shared file's box
    assert list(tf.sections["cameras"]) == ["front"]
    # relative paths stay relative to the file that writes them
    assert task_reward(arm) == (f"classifier:{tmp_path / 'shared' / 'cls'}", None)
    task = resolve_task(arm)  # the twin scene's task with both files' values
    assert task.pos_min_m == (0.35, -0.2, 0.02) and task.reset_pos_m == (0.5, 0.05, 0.22)
    fields = dict(dict(get_preset(arm).env_kwargs)["task_fields"])
    assert fields["pos_max_m"] == (0.65, 0.2, 0.3) and fields["reset_pos_m"] == (0.5, 0.05, 0.22)
    require_lab_box("franky", arm)  # no error: the box came from the lab
    assert resolve_agent(AgentFlags(task=arm), False).state_select == ("state[0:3]", "state[12]")
    assert state_select_origin(AgentFlags(task=arm), False) == f"the task file {arm} (lab-shared's observation.state)"


def test_a_file_over_a_twin_box_is_still_refused_on_hardware(tmp_path: Path) -> None:
    write(tmp_path / "plain.toml", '[task]\nname = "p"\nbase = "twin-pick-cube"\n')
    child = str(write(tmp_path / "child.toml", '[task]\nname = "c"\nbase = "plain.toml"\n'))
    assert load_task_file(child).box_source == "twin"
    with pytest.raises(ConfigError, match="workspace box is the twin's"):
        require_lab_box("franky", child)


@pytest.mark.parametrize(("files", "message"), [
    ({"a.toml": "a.toml"}, r"a.toml: task.base 'a.toml' makes a cycle of bases \(.*a.toml -> .*a.toml\)"),
    ({"a.toml": "b.toml", "b.toml": "a.toml"},
     r"b.toml: task.base 'a.toml' makes a cycle of bases \(.*a.toml -> .*b.toml -> .*a.toml\)"),
    ({"a.toml": "nope.toml"}, r"a.toml: task.base 'nope.toml': no such task file"),
    ({"a.toml": "twin-nope"}, r"a.toml: task.base must name a built-in preset .* or a task file"),
])
def test_a_bad_base_is_one_line(tmp_path: Path, files: dict[str, str], message: str) -> None:
    for name, base in files.items():
        write(tmp_path / name, f'[task]\nname = "{name}"\nbase = "{base}"\n')
    with pytest.raises(ConfigError, match=message):
        load_task_file(tmp_path / "a.toml")
