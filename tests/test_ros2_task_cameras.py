"""A task file's `[cameras.NAME]` tables on the ros2 backend, without ROS: each camera maps to an image topic
(`topic`, kind "ros2" defaulting to camera/NAME/image_raw), its crop and size are applied exactly as the franky
server applies them (envs.hardware.cameras.crop_resize), the flags win over the file, and a camera the backend
cannot serve is a ConfigError naming the file and the field. Over DDS: tests/test_ros2_dds.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from envs.hardware.cameras import crop_resize
from envs.robot_server.run import parse_robot_server_args, ros2_options
from envs.ros2.backend import Ros2BackendOptions, cameras_config, file_cameras
from envs.ros2.logic import policy_frame
from envs.ros2.twin_run import parse_ros2_twin_args
from envs.task_file import camera_configs
from robot_rl.errors import ConfigError
from robot_rl.task_file import load_task_file

LAB = """
[task]
name = "lab-pick"
base = "twin-pick-cube"

[box]
source = "lab"
pos_min_m = [0.35, -0.2, 0.02]
pos_max_m = [0.65, 0.2, 0.35]

[cameras.front]
kind = "ros2"
topic = "/cam_front/color/image_raw"
crop_xywh = [80, 0, 480, 480]
width = 640
height = 480

[cameras.wrist]
kind = "ros2"

[observation]
cameras = ["front", "wrist"]
image_size = 96
"""


def _write(tmp_path: Path, text: str, name: str = "lab.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _frame(h: int = 480, w: int = 640) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)


def test_policy_frame_is_the_franky_servers_crop_and_resize() -> None:
    img = _frame()
    assert np.array_equal(policy_frame(img, 96, (80, 0, 480, 480)), crop_resize(img, 96, (80, 0, 480, 480)))
    assert np.array_equal(policy_frame(img, 128), crop_resize(img, 128))  # no crop: the centre square, both
    assert np.array_equal(policy_frame(img, 0, (10, 20, 30, 40)), img[20:60, 10:40])  # size 0: the crop only
    assert policy_frame(img, 0) is img
    assert policy_frame(img, 64, None, (640, 0)).shape == (64, 64, 3)  # height 0: either
    with pytest.raises(ConfigError, match=r"camera front \(/t\): the topic sends 640x480 frames, but its width x "
                                          r"height say 1280 x 720"):
        policy_frame(img, 64, None, (1280, 720), "front (/t)")
    with pytest.raises(ConfigError, match=r"crop_xywh \[400, 0, 480, 480\] does not lie inside its 640x480 frames"):
        policy_frame(img, 64, (400, 0, 480, 480), None, "front (/t)")


def test_file_cameras_map_to_topics_crops_and_sizes(tmp_path: Path) -> None:
    tf = load_task_file(_write(tmp_path, LAB))
    front, wrist = file_cameras(tf)
    assert (front.name, front.topic, front.crop_xywh, front.frame_wh) == (
        "front", "/cam_front/color/image_raw", (80, 0, 480, 480), (640, 480))
    assert (wrist.name, wrist.topic, wrist.crop_xywh, wrist.frame_wh) == ("wrist", "camera/wrist/image_raw", None,
                                                                          None)
    cfg = cameras_config(Ros2BackendOptions(namespace="/arm", file_cameras=(front, wrist)), ("front", "wrist"), 96)
    assert [cfg.topic(i) for i in range(2)] == ["/cam_front/color/image_raw", "/arm/camera/wrist/image_raw"]
    assert cfg.crops == ((80, 0, 480, 480), None) and cfg.frame_sizes == ((640, 480), None)
    assert cfg.describe(0) == f"front (/cam_front/color/image_raw; task file {tf.path}, cameras.front)"


def test_the_server_takes_the_files_cameras_and_the_flags_win(tmp_path: Path) -> None:
    path = _write(tmp_path, LAB)
    tf = load_task_file(path)
    names, options = ros2_options(parse_robot_server_args(["--backend", "ros2", "--task", path]), tf)
    assert names == ("front", "wrist")  # no --cameras: the file's
    # --ros-camera redirects a camera's topic; the file's crop and size stay that camera's
    names, options = ros2_options(parse_robot_server_args(["--backend", "ros2", "--task", path, "--ros-camera",
                                                           "front=/other/image_raw"]), tf)
    cfg = cameras_config(options, names, 96)
    assert cfg.topics[0] == "/other/image_raw" and cfg.crops[0] == (80, 0, 480, 480)
    # --cameras picks the names: a name the file lacks gets the default topic, no crop
    names, options = ros2_options(parse_robot_server_args(["--backend", "ros2", "--task", path, "--cameras",
                                                           "side,front"]), tf)
    cfg = cameras_config(options, names, 96)
    assert cfg.names == ("side", "front") and cfg.topics == ("camera/side/image_raw", "/cam_front/color/image_raw")
    assert cfg.crops == (None, (80, 0, 480, 480))
    # a preset (no cameras in the file): the old defaults
    names, options = ros2_options(parse_robot_server_args(["--backend", "ros2", "--task", "twin-reach"]), None)
    assert names == ("front", "wrist") and options.file_cameras == ()
    assert cameras_config(options, names, 32).topics == ("camera/front/image_raw", "camera/wrist/image_raw")


def test_a_camera_the_ros2_backend_cannot_serve_names_the_file_and_field(tmp_path: Path) -> None:
    text = LAB.replace('kind = "ros2"\ntopic = "/cam_front/color/image_raw"', 'kind = "realsense"\nserial = "1234"')
    path = _write(tmp_path, text)
    tf = load_task_file(path)
    names, options = ros2_options(parse_robot_server_args(["--backend", "ros2", "--task", path]), tf)
    with pytest.raises(ConfigError, match=rf"task file {path}: cameras.front.topic is missing: the ros2 backend "
                                          r"reads every camera from a sensor_msgs/Image topic, and this realsense "
                                          r"camera \(serial 1234\) names none.*--ros-camera front=TOPIC"):
        cameras_config(options, names, 96)
    # the flag gives the topic: served, with the file's crop
    names, options = ros2_options(parse_robot_server_args(["--backend", "ros2", "--task", path, "--ros-camera",
                                                           "front=/camera/front/color/image_raw"]), tf)
    assert cameras_config(options, names, 96).crops[0] == (80, 0, 480, 480)
    # a realsense camera with a topic serves both backends; franky's camera fields leave the topic out
    both = text.replace('serial = "1234"', 'serial = "1234"\ntopic = "/rs/img"')
    both = both.replace('[cameras.wrist]\nkind = "ros2"\n',
                        '[cameras.wrist]\nkind = "opencv"\ndevice = "/dev/video0"\n')
    tf_both = load_task_file(_write(tmp_path, both, "both.toml"))
    assert file_cameras(tf_both)[0].topic == "/rs/img"
    assert "topic" not in camera_configs(tf_both)[0] and camera_configs(tf_both)[0]["device"] == "1234"
    # franky cannot open a ROS topic
    with pytest.raises(ConfigError, match=rf"task file {tmp_path / 'lab.toml'}: cameras.front.kind = \"ros2\" is "
                                          r"an image topic, which only --backend ros2 reads"):
        camera_configs(load_task_file(_write(tmp_path, LAB)))


@pytest.mark.parametrize("table, message", [
    ('kind = "ros2"\nexposure_us = 8000.0\n', "cameras.front.exposure_us: a kind = \"ros2\" camera is an image topic"),
    ('kind = "ros2"\nfps = 30\n', "cameras.front.fps: a kind = \"ros2\" camera"),
    ('kind = "ros2"\nserial = "1234"\n', "cameras.front.serial: a kind = \"ros2\" camera"),
    ('kind = "ros2"\ntopic = ""\n', "cameras.front.topic must name a sensor_msgs/Image topic"),
    ('kind = "ros2"\ncrop_xywh = [200, 0, 480, 480]\nwidth = 640\nheight = 480\n',
     r"cameras.front.crop_xywh \[200, 0, 480, 480\] must lie inside the 640x480 frame"),
    ('kind = "ros2"\ncrop_xywh = [0, 0, 0, 480]\n',
     r"cameras.front.crop_xywh \[0, 0, 0, 480\]: width and height must be > 0"),
    ('kind = "usb"\n', r"cameras.front.kind must be one of \['realsense', 'opencv', 'ros2'\]"),
])
def test_bad_ros2_camera_tables_name_the_file_and_field(tmp_path: Path, table: str, message: str) -> None:
    path = _write(tmp_path, LAB.split("[cameras.front]")[0] + "[cameras.front]\n" + table)
    with pytest.raises(ConfigError, match=rf"task file {path}: {message}"):
        load_task_file(path)


def test_the_ros2_twin_publishes_the_files_camera_topics_at_their_size(tmp_path: Path) -> None:
    path = _write(tmp_path, LAB.replace('[cameras.wrist]\nkind = "ros2"\n',
                                        '[cameras.wrist]\nkind = "ros2"\nwidth = 640\nheight = 480\n'))
    node = parse_ros2_twin_args(["--task", path]).node_config()
    assert node.camera_names == ("front", "wrist") and node.frame_wh == (640, 480)
    assert node.camera_topics == ("/cam_front/color/image_raw", "camera/wrist/image_raw")
    node = parse_ros2_twin_args(["--task", _write(tmp_path, LAB, "sizes_differ.toml")]).node_config()
    assert node.frame_wh is None  # the cameras' sizes differ: image_size squares
    node = parse_ros2_twin_args(["--task", path, "--cameras", "front"]).node_config()  # the flag wins
    assert node.camera_names == ("front",) and node.camera_topics == () and node.frame_wh is None
    assert parse_ros2_twin_args(["--task", path, "--no-cameras"]).node_config().camera_names == ()
