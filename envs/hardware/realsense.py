"""RealSense cameras through pyrealsense2 (imported lazily; the `real` extra; needs libusb-1.0.so.0).

`RealSenseSource` (an envs.hardware.camera_source.FrameSource): the colour stream of one device chosen by serial (or a
.db3 recording made by `rs.recorder`, played in a loop), RGB8 at the configured resolution and fps. The colour
sensor is chosen by capability, not by name: the sensor that streams colour (a D435 / D455 has a dedicated
"RGB Camera" beside its "Stereo Module", and `query_sensors()[0]` is the stereo module; a D405 has no RGB sensor,
its colour comes from the stereo module itself). With `exposure_us` set, auto-exposure is turned off first, then
the exposure is set in the sensor's own units: librealsense exposes a D4xx dedicated RGB sensor's exposure in units
of 100 us (range 1-10000, the firmware's granularity) and a stereo module's in microseconds; the value is checked
against the range the device reports, and read back in microseconds. For tests, a source can read from a
`rs.syncer` fed by an `rs.software_device` (`device=`, `syncer=`): the same code path from the frameset on.

Usage::

    cam = ThreadedCamera(cfg, RealSenseSource(cfg))          # or make_cameras(["realsense:SERIAL=front"])
    list_realsense()      # [{"serial": ..., "name": ..., "color_profiles": ["640x480@30 rgb8", ...]}, ...]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envs.hardware.camera_source import CameraConfig, CameraError

RGB_SENSOR_EXPOSURE_UNIT_US = 100.0
"""Microseconds per exposure unit of a dedicated RGB sensor (D415 / D435 / D455 "RGB Camera")."""
STEREO_SENSOR_EXPOSURE_UNIT_US = 1.0
"""Microseconds per exposure unit of a sensor that also streams depth (the stereo module; a D405's colour)."""


def _rs() -> Any:
    from robot_rl.extras import optional_import

    return optional_import("pyrealsense2", extra="real", purpose="RealSense cameras")


def _stream_types(sensor: Any) -> set[Any]:
    return {p.stream_type() for p in sensor.get_stream_profiles()}


def color_sensor(device: Any) -> Any:
    """The device's colour sensor, chosen by capability: a sensor with a colour stream, a dedicated one (no depth
    stream) first; CameraError listing each sensor's name and streams if none streams colour."""
    rs = _rs()
    found: list[tuple[bool, int, Any]] = []
    seen = []
    for i, s in enumerate(device.query_sensors()):
        types = _stream_types(s)
        name = s.get_info(rs.camera_info.name) if s.supports(rs.camera_info.name) else f"sensor {i}"
        seen.append(f"{name} ({', '.join(sorted(str(t).split('.')[-1] for t in types)) or 'no streams'})")
        if rs.stream.color in types:
            found.append((rs.stream.depth in types, i, s))
    if not found:
        raise CameraError(f"the RealSense device has no sensor that streams colour (it has {'; '.join(seen)})")
    return min(found, key=lambda t: (t[0], t[1]))[2]


def exposure_unit_us(sensor: Any) -> float:
    """Microseconds per unit of the sensor's `rs.option.exposure`: 1 for a sensor that also streams depth (the
    stereo module, e.g. a D405's colour), 100 for a dedicated RGB sensor (D415 / D435 / D455)."""
    rs = _rs()
    return STEREO_SENSOR_EXPOSURE_UNIT_US if rs.stream.depth in _stream_types(sensor) else RGB_SENSOR_EXPOSURE_UNIT_US


def set_exposure(sensor: Any, exposure_us: float | None) -> dict[str, Any]:
    """Auto-exposure off, then the fixed exposure `exposure_us` (when given) in the sensor's own units, checked
    against the range the device reports (CameraError naming the range in us); returns the values read back:
    auto_exposure, exposure_us, exposure_range_us, exposure_unit_us."""
    rs = _rs()
    out: dict[str, Any] = {}
    unit = exposure_unit_us(sensor)
    if exposure_us is not None:
        if not sensor.supports(rs.option.exposure):
            raise CameraError("the colour sensor has no exposure option; leave exposure_us unset (auto exposure)")
        rng = sensor.get_option_range(rs.option.exposure)
        value = round(float(exposure_us) / unit)
        if not rng.min <= value <= rng.max:
            raise CameraError(f"exposure_us={exposure_us:g} is outside this colour sensor's range "
                              f"{rng.min * unit:g}-{rng.max * unit:g} us (it takes {unit:g} us units)")
        if sensor.supports(rs.option.enable_auto_exposure):
            sensor.set_option(rs.option.enable_auto_exposure, 0)
        sensor.set_option(rs.option.exposure, float(value))
    if sensor.supports(rs.option.enable_auto_exposure):
        out["auto_exposure"] = float(sensor.get_option(rs.option.enable_auto_exposure))
    if sensor.supports(rs.option.exposure):
        rng = sensor.get_option_range(rs.option.exposure)
        out["exposure_us"] = float(sensor.get_option(rs.option.exposure)) * unit
        out["exposure_range_us"] = (float(rng.min) * unit, float(rng.max) * unit)
        out["exposure_unit_us"] = unit
    return out


class RealSenseSource:
    """The colour stream of one RealSense device (see the module docstring)."""

    def __init__(self, config: CameraConfig, device: Any = None, syncer: Any = None) -> None:
        self.config = config
        self._rs = _rs()
        self._device, self._syncer = device, syncer
        self._pipeline: Any = None
        self._source: Any = None
        self._info: dict[str, Any] = {}

    def open(self) -> None:
        rs, cfg = self._rs, self.config
        if self._syncer is not None:  # a software device feeding a syncer (tests)
            device, self._source = self._device, self._syncer
        else:
            pipeline, rcfg = rs.pipeline(), rs.config()
            if cfg.device.endswith((".db3", ".bag")):
                rcfg.enable_device_from_file(cfg.device, repeat_playback=False)
            else:
                rcfg.enable_device(cfg.device)
                rcfg.enable_stream(rs.stream.color, cfg.width, cfg.height, rs.format.rgb8, cfg.fps)
            try:
                profile = pipeline.start(rcfg)
            except RuntimeError as err:
                raise CameraError(f"cannot start RealSense {cfg.device!r}: {err} (list devices with "
                                  "'robot-rl cameras list')") from err
            device = profile.get_device()
            self._pipeline = self._source = pipeline
        self._info = {"serial": _info(device, rs.camera_info.serial_number),
                      "model": _info(device, rs.camera_info.name)}
        if not cfg.device.endswith((".db3", ".bag")):
            sensor = color_sensor(device)
            self._info["color_sensor"] = _info(sensor, rs.camera_info.name)
            self._info.update(set_exposure(sensor, cfg.exposure_us))

    def grab(self, timeout_s: float) -> np.ndarray | None:
        try:
            frames = self._source.wait_for_frames(max(1, int(timeout_s * 1000)))
        except RuntimeError:  # "Frame didn't arrive within ...": a stall (or the end of a recording)
            return None
        color = frames.first_or_default(self._rs.stream.color)
        if not color:
            return None
        vf = color.as_video_frame()
        img = np.asanyarray(vf.get_data())
        self._info.update(width=vf.get_width(), height=vf.get_height(), format=str(vf.get_profile().format()))
        if img.ndim != 3 or img.shape[2] != 3:
            raise CameraError(f"RealSense colour frame has shape {img.shape}; expected RGB8 (H, W, 3)")
        if "bgr" in self._info["format"]:
            img = img[..., ::-1]
        return np.array(img)  # a copy: the frame's buffer goes back to librealsense

    def close(self) -> None:
        if self._pipeline is not None:
            try:
                self._pipeline.stop()
            finally:
                self._pipeline = None

    def describe(self) -> dict[str, Any]:
        return dict(self._info)


def _info(device: Any, key: Any) -> str:
    return str(device.get_info(key)) if device.supports(key) else ""


def list_realsense() -> list[dict[str, Any]]:
    """Every connected RealSense: serial, model, the colour sensor's RGB8 profiles."""
    rs = _rs()
    out = []
    for dev in rs.context().query_devices():
        entry: dict[str, Any] = {"serial": _info(dev, rs.camera_info.serial_number),
                                 "name": _info(dev, rs.camera_info.name), "color_profiles": []}
        try:
            sensor = color_sensor(dev)
            profiles = set()
            for p in sensor.get_stream_profiles():
                if p.stream_type() == rs.stream.color:
                    v = p.as_video_stream_profile()
                    profiles.add((v.width(), v.height(), p.fps(), str(p.format()).split(".")[-1]))
            entry["color_profiles"] = [f"{w}x{h}@{f} {fmt}" for w, h, f, fmt in sorted(profiles)]
        except CameraError as err:
            entry["error"] = str(err)
        out.append(entry)
    return out
