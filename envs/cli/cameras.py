"""`robot-rl cameras list|show|record`: check real cameras before a run (serials and profiles, framing, exposure).

- `list`: every RealSense (serial, model, colour profiles) and every /dev/video* node OpenCV opens.
- `show --camera SPEC ...`: a PNG strip (rows = cameras, columns = frames over `--seconds`) at the policy's image
  size (crop + resize as the robot server does), plus each camera's measured fps, frame age and exposure. Headless
  (actors and robot servers run without a display): look at the PNG.
- `record --camera SPEC ... --seconds S --out DIR`: DIR/cameras.npz (`images/<name>` uint8 (T, H, W, 3),
  `t_s/<name>` float64 (T,) capture times) and DIR/strip.png.

SPEC is `KIND:ID=NAME` (envs.hardware.cameras): `realsense:123456789012=front`, `realsense:rec.db3=front`,
`opencv:/dev/video0=wrist`.

The tools live in envs.hardware.camera_tools (list_cameras, CameraCaptureConfig, capture_cameras).

Usage::

    robot-rl cameras list
    robot-rl cameras show --camera realsense:123456789012=front --camera opencv:/dev/video0=wrist --out framing.png
    robot-rl cameras record --camera realsense:123456789012=front --seconds 5 --out runs/cams
"""

from __future__ import annotations

import argparse
from pathlib import Path

from envs.hardware.camera_tools import CameraCaptureConfig, capture_cameras, list_cameras


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
        return list_cameras()
    record = args.cmd == "record"
    return capture_cameras(CameraCaptureConfig(
        specs=tuple(args.camera), image_size=args.image_size, width=args.width, height=args.height, fps=args.fps,
        exposure_us=args.exposure, seconds=args.seconds, rate=args.rate,
        out=Path("cameras.png") if record else args.out, record_dir=args.out if record else None))
