"""Real-camera backends without a camera: pyrealsense2's software device + syncer (synthetic frames through the real
library), a .db3 recording made by rs.recorder played back through a pipeline, and OpenCV reading a video file
through the same VideoCapture path as /dev/videoN."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from envs.hardware.cameras import (
    CameraConfig,
    CameraError,
    MultiCameras,
    ThreadedCamera,
    crop_resize,
    make_cameras,
    parse_camera_spec,
)
from robot_rl.errors import ConfigError, MissingExtraError

W, H = 64, 48


def _rs() -> Any:
    try:
        import pyrealsense2 as rs
    except ImportError as err:
        if os.environ.get("CI"):
            pytest.fail(f"pyrealsense2 must import in CI ({err}); scripts/dev.sh installs it and libusb-1.0-0")
        pytest.skip(f"pyrealsense2 unavailable ({err})")
    return rs


def _video_stream(rs: Any, kind: Any, fmt: Any, uid: int, bpp: int) -> Any:
    intr = rs.intrinsics()
    intr.width, intr.height, intr.fx, intr.fy, intr.ppx, intr.ppy = W, H, 50.0, 50.0, W / 2, H / 2
    intr.model, intr.coeffs = rs.distortion.none, [0.0] * 5
    vs = rs.video_stream()
    vs.type, vs.index, vs.uid, vs.width, vs.height, vs.fps, vs.bpp = kind, 0, uid, W, H, 30, bpp
    vs.fmt, vs.intrinsics = fmt, intr
    return vs


class SoftwareCamera:
    """An rs.software_device whose sensors are named, streamed and ranged as the model's are, and whose colour
    sensor feeds a syncer; `push(value)` sends one frame filled with `value` (pixel (0, 0) holds the frame number).

    - "d435" (and D415 / D455): a "Stereo Module" first (depth; exposure in us, 1-165000), then the "RGB Camera"
      (colour; auto-exposure and exposure in 100 us units, 1-10000);
    - "d405": one "Stereo Module" that streams depth AND colour (exposure in us, 1-165000); no RGB sensor."""

    def __init__(self, rs: Any, recorder_path: str | None = None, model: str = "d435") -> None:
        self.rs = rs
        dev = self.device = rs.software_device()
        self.depth = dev.add_sensor("Stereo Module")  # option_range(min, max, default, step) below
        self.depth.add_option(rs.option.exposure, rs.option_range(1, 165000, 8500, 1), True)
        self.depth.add_video_stream(_video_stream(rs, rs.stream.depth, rs.format.z16, 2, 2))
        if model == "d405":
            self.depth.add_option(rs.option.enable_auto_exposure, rs.option_range(0, 1, 1, 1), True)
            self.color = self.depth
        else:
            self.color = dev.add_sensor("RGB Camera")
            self.color.add_option(rs.option.enable_auto_exposure, rs.option_range(0, 1, 1, 1), True)
            self.color.add_option(rs.option.exposure, rs.option_range(1, 10000, 156, 1), True)
        self.profile = self.color.add_video_stream(_video_stream(rs, rs.stream.color, rs.format.rgb8, 1, 3))
        dev.register_info(rs.camera_info.serial_number, "000000000042")
        dev.register_info(rs.camera_info.name, f"Intel RealSense {model.upper()} (software)")
        self.recorder = rs.recorder(recorder_path, dev) if recorder_path else None
        self.syncer = rs.syncer()
        started = self.color
        if self.recorder is not None:  # frames go through the recorder's sensor into the file
            name = self.color.get_info(rs.camera_info.name)
            started = next(s for s in self.recorder.query_sensors() if s.get_info(rs.camera_info.name) == name)
        self._started = started
        started.open(self.profile)
        started.start(self.syncer)
        self.n = 0

    def push(self, value: int) -> None:
        rs = self.rs
        img = np.full((H, W, 3), value % 256, np.uint8)
        img[0, 0] = [self.n % 256, 0, 255]
        f = rs.software_video_frame()
        f.pixels, f.stride, f.bpp = img, W * 3, 3
        f.timestamp, f.domain, f.frame_number = self.n * 1000.0 / 30, rs.timestamp_domain.system_time, self.n
        f.profile = self.profile.as_video_stream_profile()
        self.color.on_video_frame(f)
        self.n += 1

    def close(self) -> None:
        self._started.stop()
        self._started.close()
        self._started = None
        self.recorder = None  # the file is written when the recorder goes


class Pusher:
    """Pushes frames at ~30 fps on a thread until paused/stopped; `value` is what the next frames hold."""

    def __init__(self, cam: SoftwareCamera) -> None:
        self.cam, self.value = cam, 10
        self.running = threading.Event()
        self.running.set()
        self._stop = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.running.is_set():
                self.cam.push(self.value)
            time.sleep(1 / 30)

    def stop(self) -> None:
        self._stop.set()
        self.t.join(2)


@pytest.fixture
def software_camera() -> Iterator[SoftwareCamera]:
    cam = SoftwareCamera(_rs())
    yield cam
    cam.close()


def test_crop_resize_area_averages() -> None:
    img = np.zeros((4, 6, 3), np.uint8)
    img[:, 1:3] = 200  # the left half of the centred 4x4 square is [0, 200 | 200, 0]... columns 1..4
    out = crop_resize(img, 2)
    np.testing.assert_array_equal(out[:, 0, 0], [200, 200])   # square columns 1, 2 -> left output column
    np.testing.assert_array_equal(out[:, 1, 0], [0, 0])
    out = crop_resize(img, 2, crop_xywh=(0, 0, 2, 4))          # columns 0, 1: half 0, half 200 -> 100
    np.testing.assert_array_equal(out[..., 0], [[0, 200], [0, 200]])
    big = crop_resize(np.arange(4, dtype=np.uint8).reshape(1, 4, 1).repeat(4, 0).repeat(3, 2), 8)
    assert big.shape == (8, 8, 3) and big[0, 0, 0] == 0 and big[0, -1, 0] == 3 and np.all(np.diff(big[0, :, 0]) >= 0)


def test_specs_and_configs_are_checked() -> None:
    c = parse_camera_spec("opencv:/dev/video0=wrist", image_size=64)
    assert (c.kind, c.device, c.name, c.image_size) == ("opencv", "/dev/video0", "wrist", 64)
    assert parse_camera_spec("realsense:/data/a=b.db3=front").device == "/data/a=b.db3"
    for bad in ("realsense:123", "front", "usb:0=front", "realsense:=front"):
        with pytest.raises(ConfigError):
            parse_camera_spec(bad)
    with pytest.raises(ConfigError, match="crop_xywh"):
        CameraConfig(device="1", crop_xywh=(600, 0, 100, 100))
    with pytest.raises(ConfigError, match=r"'SERIAL' is a placeholder; put the camera's serial there \(`robot-rl "
                                          r"cameras list` prints them\), e.g. realsense:123456789012=front"):
        parse_camera_spec("realsense:SERIAL=front")


def test_missing_pyrealsense2_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyrealsense2", None)
    with pytest.raises(MissingExtraError, match=r"\[real\]'"):
        make_cameras(["realsense:123456789012=front"])


def test_d435_color_sensor_by_capability_and_exposure_in_100us_units(software_camera: SoftwareCamera) -> None:
    """The colour sensor is the one that streams colour although the stereo module comes first
    (query_sensors()[0]); auto exposure goes off, then 300 us is set as 3 units of 100 us (a D4xx RGB sensor's
    units) and read back in us; the stereo module is untouched."""
    from envs.hardware.realsense import RealSenseSource

    rs = software_camera.rs
    assert software_camera.device.query_sensors()[0].get_info(rs.camera_info.name) == "Stereo Module"
    cfg = CameraConfig(device="000000000042", name="front", width=W, height=H, exposure_us=300.0, image_size=32)
    src = RealSenseSource(cfg, device=software_camera.device, syncer=software_camera.syncer)
    src.open()
    assert software_camera.color.get_option(rs.option.enable_auto_exposure) == 0
    assert software_camera.color.get_option(rs.option.exposure) == 3
    assert software_camera.depth.get_option(rs.option.exposure) == 8500
    info = src.describe()
    assert info["serial"] == "000000000042" and info["exposure_us"] == 300 and info["color_sensor"] == "RGB Camera"
    assert info["exposure_range_us"] == (100.0, 1_000_000.0) and info["exposure_unit_us"] == 100.0


def test_d405_color_from_the_stereo_module_with_exposure_in_us() -> None:
    """A D405 has no RGB sensor: its colour comes from the stereo module (which also streams depth), whose exposure
    is in microseconds; frames flow from it."""
    from envs.hardware.realsense import RealSenseSource

    cam = SoftwareCamera(_rs(), model="d405")
    try:
        rs = cam.rs
        assert [s.get_info(rs.camera_info.name) for s in cam.device.query_sensors()] == ["Stereo Module"]
        cfg = CameraConfig(device="000000000042", name="wrist", width=W, height=H, exposure_us=300.0, image_size=32)
        src = RealSenseSource(cfg, device=cam.device, syncer=cam.syncer)
        src.open()
        assert cam.color.get_option(rs.option.exposure) == 300
        assert cam.color.get_option(rs.option.enable_auto_exposure) == 0
        assert src.describe()["exposure_us"] == 300 and src.describe()["color_sensor"] == "Stereo Module"
        cam.push(77)
        img = src.grab(2.0)
        assert img is not None and img.shape == (H, W, 3) and int(img[5, 5, 0]) == 77
    finally:
        cam.close()


def test_exposure_outside_the_device_range_and_no_colour_sensor_are_clear_errors(
        software_camera: SoftwareCamera) -> None:
    """An exposure the sensor cannot take names its range in us (and changes nothing); a device without any colour
    stream names its sensors and their streams."""
    from envs.hardware.realsense import RealSenseSource, color_sensor

    rs = software_camera.rs
    cfg = CameraConfig(device="000000000042", name="front", width=W, height=H, exposure_us=2e6, image_size=32)
    with pytest.raises(CameraError, match=r"outside this colour sensor's range 100-1e\+06 us \(it takes 100 us units"):
        RealSenseSource(cfg, device=software_camera.device, syncer=software_camera.syncer).open()
    assert software_camera.color.get_option(rs.option.enable_auto_exposure) == 1  # untouched
    dev = rs.software_device()
    depth_only = dev.add_sensor("Stereo Module")
    depth_only.add_video_stream(_video_stream(rs, rs.stream.depth, rs.format.z16, 2, 2))
    with pytest.raises(CameraError, match=r"no sensor that streams colour \(it has Stereo Module \(depth\)\)"):
        color_sensor(dev)


def test_newest_frame_age_stall_and_recovery(software_camera: SoftwareCamera) -> None:
    """A reader thread keeps the newest frame (not a queue), read() reports its age; when frames stop, read()
    raises CameraError within the stall deadline (and the reader keeps trying to reconnect); when frames come
    back, reads work again."""
    from envs.hardware.realsense import RealSenseSource

    cfg = CameraConfig(device="000000000042", name="front", width=W, height=H, image_size=16, stall_timeout_s=0.3,
                       reconnect_every_s=0.2)
    cam = ThreadedCamera(cfg, RealSenseSource(cfg, device=software_camera.device, syncer=software_camera.syncer))
    pusher = Pusher(software_camera)
    cams = MultiCameras([cam])
    try:
        time.sleep(0.5)
        pusher.value = 77
        time.sleep(0.2)
        img = cams.read()["front"]
        assert img.shape == (16, 16, 3) and img.dtype == np.uint8
        assert abs(int(img[8, 8, 0]) - 77) <= 1  # the newest frames, not ones queued before the change
        assert 0 <= cams.frame_ages_s()["front"] < 0.1
        pusher.running.clear()  # the camera stalls
        time.sleep(0.35)
        t0 = time.monotonic()
        with pytest.raises(CameraError, match="no frame"):
            cams.read()
        waited = time.monotonic() - t0
        assert waited <= cfg.stall_timeout_s + 0.1
        time.sleep(0.3)
        assert cam.reconnects >= 1
        pusher.value = 120
        pusher.running.set()
        time.sleep(0.6)
        assert abs(int(cams.read()["front"][8, 8, 0]) - 120) <= 1
    finally:
        pusher.stop()
        cams.close()


def _record(tmp_path: Path, n: int) -> Path:
    rs = _rs()
    path = tmp_path / "bench.db3"
    cam = SoftwareCamera(rs, recorder_path=str(path))
    for i in range(n):  # at 30 fps: the recording keeps the arrival times and plays back at that pace
        cam.push(20 * i)
        cam.syncer.wait_for_frames(1000)
        time.sleep(1 / 30)
    cam.close()
    del cam
    assert path.stat().st_size > 0
    return path


def test_recording_played_back_then_ended_then_reconnected(tmp_path: Path) -> None:
    """A .db3 recorded by rs.recorder, played through rs.config.enable_device_from_file + pipeline by the real
    RealSense source, next to a second camera in the same process; when the recording ends (as an unplugged
    camera) read() raises CameraError and the reader re-opens it (the recording plays again)."""
    path = _record(tmp_path, 12)
    software = SoftwareCamera(_rs())
    pusher = Pusher(software)
    from envs.hardware.realsense import RealSenseSource

    cfg2 = CameraConfig(device="000000000042", name="wrist", width=W, height=H, image_size=24)
    wrist = ThreadedCamera(cfg2, RealSenseSource(cfg2, device=software.device, syncer=software.syncer))
    front = make_cameras([f"realsense:{path}=front"], image_size=24,
                         options={"stall_timeout_s": 0.3, "reconnect_every_s": 0.8}).cameras[0]
    cams = MultiCameras([front, wrist])
    try:
        seen: set[int] = set()
        t0 = time.monotonic()
        errors, frames_after_error = 0, 0
        while time.monotonic() - t0 < 3.0:
            try:
                frames = cams.read()
            except CameraError as err:
                assert "front" in str(err)
                errors += 1
                time.sleep(0.05)
                continue
            assert frames["front"].shape == frames["wrist"].shape == (24, 24, 3)
            seen.add(int(frames["front"][12, 12, 0]) // 20)
            frames_after_error += errors > 0
            time.sleep(0.03)
        assert len(seen) >= 5            # the recording's frames (values 0, 20, 40, ...) came through
        assert errors >= 1 and front.reconnects >= 1 and frames_after_error >= 3  # it ended, was opened again
        assert front.describe()["serial"] == "000000000042"
    finally:
        cams.close()
        pusher.stop()
        software.close()


def test_opencv_source_reads_rgb(tmp_path: Path) -> None:
    """OpenCV through the same VideoCapture path as a USB camera, here on a video file: frames are RGB (OpenCV's
    BGR converted), cropped and resized."""
    cv2 = pytest.importorskip("cv2") if not os.environ.get("CI") else __import__("cv2")
    path = str(tmp_path / "clip.avi")
    writer = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"MJPG"), 30, (W, H))
    for _ in range(60):
        frame_rgb = np.zeros((H, W, 3), np.uint8)
        frame_rgb[..., 0] = 200  # red
        writer.write(np.ascontiguousarray(frame_rgb[..., ::-1]))
    writer.release()
    cams = make_cameras([f"opencv:{path}=wrist"], image_size=20, options={"width": W, "height": H})
    try:
        img = cams.read()["wrist"]
        assert img.shape == (20, 20, 3)
        assert img[10, 10, 0] > 180 and img[10, 10, 2] < 30  # red stays red
        assert cams.describe()[0]["width"] == W
    finally:
        cams.close()
    bad = make_cameras(["opencv:/dev/video99=x"], options={"stall_timeout_s": 0.2})
    try:
        with pytest.raises(CameraError, match=r"cannot open|no frame"):
            bad.read()
    finally:
        bad.close()


def test_real_cameras_through_the_robot_server_and_env(software_camera: SoftwareCamera) -> None:
    """A robot server serving real cameras (the software RealSense) next to a robot: the env's pixels observation
    carries the camera's newest frame and info reports the frame's age, measured on the server."""
    from envs.hardware.realsense import RealSenseSource
    from envs.remote import make_remote_env
    from envs.robot_server import serve_in_thread
    from envs.twin import TwinRobot, TwinRobotConfig

    cfg = CameraConfig(device="000000000042", name="front", width=W, height=H, image_size=32)
    pusher = Pusher(software_camera)
    pusher.value = 150

    def factory() -> Any:
        cams = MultiCameras([ThreadedCamera(cfg, RealSenseSource(cfg, device=software_camera.device,
                                                                 syncer=software_camera.syncer))])
        return TwinRobot(TwinRobotConfig(task="reach", render=False)), cams, {"backend": "test", "task": "reach"}

    handle = serve_in_thread(factory)
    try:
        time.sleep(0.3)
        env = make_remote_env(handle.address, obs_mode="pixels")
        try:
            obs, _ = env.reset(seed=0)
            assert obs["images"]["front"].shape == (32, 32, 3)
            assert abs(int(obs["images"]["front"][16, 16, 0]) - 150) <= 1
            _, _, _, _, info = env.step(np.zeros(7, np.float32))
            assert set(info["frame_age_ms"]) == {"front"} and 0 <= info["frame_age_ms"]["front"] < 100
        finally:
            env.close()
    finally:
        handle.close()  # the server closes the cameras: their reader thread ends
        assert not any(t.name == "camera-front" for t in threading.enumerate())
        pusher.stop()


def test_cameras_cli_list_show_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`robot-rl cameras`: list (no camera on this machine: says so), show (a PNG strip) and record (an npz of
    frames + times) from a RealSense recording, through the same RealSense source as a live device."""
    from robot_rl import cli

    path = _record(tmp_path, 15)
    assert cli.main(["cameras", "list"]) == 0
    out = capsys.readouterr().out
    assert "camera(s)" in out and "realsense" in out
    png = tmp_path / "framing.png"
    assert cli.main(["cameras", "show", "--camera", f"realsense:{path}=front", "--image-size", "32",
                     "--seconds", "0.4", "--out", str(png)]) == 0
    out = capsys.readouterr().out
    assert png.exists() and png.stat().st_size > 100 and "front:" in out and "000000000042" in out
    rec = tmp_path / "rec"
    assert cli.main(["cameras", "record", "--camera", f"realsense:{path}=front", "--image-size", "24",
                     "--seconds", "0.4", "--rate", "10", "--out", str(rec)]) == 0
    data = np.load(rec / "cameras.npz")
    imgs, t = data["images/front"], data["t_s/front"]
    assert imgs.dtype == np.uint8 and imgs.shape[1:] == (24, 24, 3) and 4 <= len(imgs) == len(t) <= 7
    assert np.all(np.diff(t) > 0.05)
    assert cli.main(["cameras", "show", "--camera", "bogus=x"]) == 1
    assert "KIND:ID=NAME" in capsys.readouterr().err
