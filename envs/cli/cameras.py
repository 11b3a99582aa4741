"""`robot-rl cameras list|show|record`: check real cameras before a run (serials and profiles, framing, exposure).

- `list`: every RealSense (serial, model, colour profiles) and every /dev/video* node OpenCV opens.
- `show --camera SPEC ...`: a PNG strip (rows = cameras, columns = frames over `--seconds`) at the policy's image
  size (crop + resize as the robot server does), plus each camera's measured fps, frame age and exposure. Headless
  (actors and robot servers run without a display): look at the PNG.
- `record --camera SPEC ... --seconds S --out DIR`: DIR/cameras.npz (`images/<name>` uint8 (T, H, W, 3),
  `t_s/<name>` float64 (T,) capture times) and DIR/strip.png.

SPEC is `KIND:ID=NAME` (envs.hardware.cameras): `realsense:123456789012=front`, `realsense:rec.db3=front`,
`opencv:/dev/video0=wrist`.

Usage::

    robot-rl cameras list
    robot-rl cameras show --camera realsense:123456789012=front --camera opencv:/dev/video0=wrist --out framing.png
    robot-rl cameras record --camera realsense:123456789012=front --seconds 5 --out runs/cams
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from envs.hardware.cameras import CameraError, MultiCameras, make_cameras
from robot_rl.errors import MissingExtraError


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="robot-rl cameras", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="RealSense serials and profiles, /dev/video* nodes")
    for name, help_ in (("show", "a PNG strip + fps / age / exposure per camera"),
                        ("record", "a short recording (npz) + PNG strip")):
        p = sub.add_parser(name, help=help_)
        p.add_argument("--camera", action="append", required=True, metavar="SPEC",
                       help="KIND:ID=NAME, e.g. realsense:123456789012=front (repeat for several)")
        p.add_argument("--image-size", type=int, default=128, help="output size (the policy's)")
        p.add_argument("--width", type=int, default=640, help="capture width")
        p.add_argument("--height", type=int, default=480, help="capture height")
        p.add_argument("--fps", type=int, default=30, help="capture rate")
        p.add_argument("--exposure", type=float, default=None, help="fixed exposure in us (default: auto)")
        p.add_argument("--seconds", type=float, default=2.0 if name == "show" else 5.0, help="how long to capture")
        p.add_argument("--rate", type=float, default=10.0, help="frames read per second (the policy's rate)")
        p.add_argument("--out", type=Path, required=name == "record",
                       default=Path("cameras.png") if name == "show" else None,
                       help="PNG path (show) or output directory (record)")
    args = parser.parse_args(argv)
    if args.cmd == "list":
        return _list()
    options = {"width": args.width, "height": args.height, "fps": args.fps, "exposure_us": args.exposure}
    cams = make_cameras(args.camera, image_size=args.image_size, options=options)
    try:
        frames, times = _capture(cams, args.seconds, args.rate)
    finally:
        cams.close()
    from robot_rl.images import grid_frames, write_png

    names = cams.names
    n_cols = min(8, min(len(frames[n]) for n in names))
    picks = {n: np.linspace(0, len(frames[n]) - 1, n_cols).round().astype(int) for n in names}
    strip = grid_frames([[frames[n][i] for i in picks[n]] for n in names])
    png = write_png(args.out if args.cmd == "show" else args.out / "strip.png", strip)
    for d in cams.describe():
        n = d["name"]
        t = np.asarray(times[n])
        fps = (len(t) - 1) / (t[-1] - t[0]) if len(t) > 1 and t[-1] > t[0] else 0.0
        rest = {k: v for k, v in d.items() if k not in ("name", "frames")}
        print(f"{n}: {len(t)} frames read at {fps:.1f}/s, device frames {d['frames']}, {json.dumps(rest)}")
    if args.cmd == "record":
        args.out.mkdir(parents=True, exist_ok=True)
        arrays: dict[str, Any] = {}
        for n in names:
            arrays[f"images/{n}"] = np.stack(frames[n])
            arrays[f"t_s/{n}"] = np.asarray(times[n], np.float64)
        np.savez_compressed(args.out / "cameras.npz", **arrays)
        print(f"wrote {args.out / 'cameras.npz'} and {png}")
    else:
        print(f"wrote {png} (rows = cameras {', '.join(names)}; columns = {n_cols} moments)")
    return 0


def _capture(cams: MultiCameras, seconds: float, rate: float) -> tuple[dict[str, list[np.ndarray]],
                                                                       dict[str, list[float]]]:
    """Read every camera at `rate` for `seconds` (the first read waits for the devices to start)."""
    frames: dict[str, list[np.ndarray]] = {n: [] for n in cams.names}
    times: dict[str, list[float]] = {n: [] for n in cams.names}
    t_start = time.monotonic()
    deadline = t_start + max(seconds, 0.0) + 5.0  # devices take a moment to start
    while True:
        try:
            got = cams.read()
        except CameraError:
            if time.monotonic() > deadline or any(frames.values()):
                raise
            continue
        now = time.monotonic()
        for n, img in got.items():
            frames[n].append(np.array(img))
            times[n].append(now)
        if now - min(times[n][0] for n in cams.names) >= seconds:
            return frames, times
        time.sleep(max(0.0, 1.0 / rate - (time.monotonic() - now)))


def _list() -> int:
    found = 0
    try:
        from envs.hardware.realsense import list_realsense

        devices = list_realsense()
        for d in devices:
            profiles = ", ".join(d["color_profiles"]) or d.get("error", "-")
            print(f"realsense {d['serial']}  {d['name']}  colour: {profiles}")
        found += len(devices)
        if not devices:
            print("realsense: no device connected")
    except MissingExtraError as err:
        print(f"realsense: {err}")
    try:
        from envs.hardware.opencv_camera import list_opencv

        nodes = list_opencv()
        for n in nodes:
            detail = f"{n['width']}x{n['height']}@{n['fps']:.0f}" if n["opens"] else "does not open"
            print(f"opencv {n['device']}  {detail}")
        found += sum(1 for n in nodes if n["opens"])
        if not nodes:
            print("opencv: no /dev/video* node")
    except MissingExtraError as err:
        print(f"opencv: {err}")
    print(f"{found} camera(s)")
    return 0
