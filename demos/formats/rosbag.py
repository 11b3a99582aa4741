"""Episodes as rosbag2 bags in MCAP storage (`robot-rl episodes export PATH --mcap DIR`), written with the pure-Python
`rosbags` package (the `export` extra; no ROS install needed), so runs can be scrubbed in Foxglove or replayed with
`ros2 bag play DIR/episode_000000`.

One bag directory per episode (`DIR/<episode file stem>/`: metadata.yaml + one .mcap file). Observation i is
stamped t0 + i / fps; the action of step i at the same time as observation i (it was chosen from it), the reward
and flags of step i at t0 + (i + 1) / fps (they are its outcome). t0 is the episode file's modification time.

| topic | type | content |
|---|---|---|
| /robot_rl/images/NAME | sensor_msgs/msg/Image (rgb8) | each camera frame (`obs/images/NAME`) |
| /robot_rl/tcp_pose | geometry_msgs/msg/PoseStamped | TCP pose from `obs/state[:6]`, frame `reset_pose` (1) |
| /robot_rl/observation/KEY | std_msgs/msg/Float32MultiArray | every other observation array (`state`, `object`) |
| /robot_rl/action | std_msgs/msg/Float32MultiArray | the executed action |
| /robot_rl/reward | std_msgs/msg/Float32 | |
| /robot_rl/intervention, /robot_rl/success, /robot_rl/terminated, /robot_rl/truncated | std_msgs/msg/Bool | |

(1) relative to the task's nominal reset pose, as the observation is (position, then euler xyz as a quaternion).

Usage::

    paths = export_mcap(episodes, "runs/bags", fps=10.0)      # [(episode file, bag dir)]
    msgs = read_bag("runs/bags/episode_000000")              # {topic: [(t_ns, message), ...]} (tests, tools)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.episodes import Episode
from robot_rl.errors import RobotRLError
from robot_rl.extras import optional_import

PREFIX = "/robot_rl"


class ExportError(RobotRLError):
    """An export or import cannot be done (the output exists, an unusable input); names the file."""


def euler_xyz_to_quat_wxyz(rpy: np.ndarray) -> np.ndarray:
    """Quaternion (w, x, y, z) of extrinsic x-y-z euler angles, R = Rz(yaw) Ry(pitch) Rx(roll) (the observation's
    convention, controllers.transforms; repeated here because demos does not import controllers)."""
    r, p, y = (float(v) / 2 for v in rpy)
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([cr * cp * cy + sr * sp * sy, sr * cp * cy - cr * sp * sy, cr * sp * cy + sr * cp * sy,
                     cr * cp * sy - sr * sp * cy])


def _typestore() -> Any:
    typesys = optional_import("rosbags.typesys", extra="export", purpose="MCAP / rosbag2 export")
    return typesys.get_typestore(typesys.Stores.ROS2_KILTED)


def _multiarray(ts: Any, values: np.ndarray) -> Any:
    std = ts.types
    flat = np.asarray(values, np.float32).reshape(-1)
    dim = std["std_msgs/msg/MultiArrayDimension"](label="", size=int(flat.size), stride=int(flat.size))
    layout = std["std_msgs/msg/MultiArrayLayout"](dim=[dim], data_offset=0)
    return std["std_msgs/msg/Float32MultiArray"](layout=layout, data=flat)


def write_bag(ep: Episode, out_dir: str | os.PathLike[str], fps: float, t0_ns: int) -> Path:
    """Write one episode as a rosbag2 directory in MCAP storage; ExportError if `out_dir` exists."""
    rosbag2 = optional_import("rosbags.rosbag2", extra="export", purpose="MCAP / rosbag2 export")
    ts = _typestore()
    T = ts.types
    out = Path(out_dir)
    if out.exists():
        raise ExportError(f"{out}: already exists (rosbag2 refuses to overwrite a bag; remove it or pick another DIR)")
    out.parent.mkdir(parents=True, exist_ok=True)
    period_ns = round(1e9 / fps)

    def stamp(t_ns: int) -> Any:
        return T["builtin_interfaces/msg/Time"](sec=t_ns // 1_000_000_000, nanosec=t_ns % 1_000_000_000)

    def header(t_ns: int, frame: str) -> Any:
        return T["std_msgs/msg/Header"](stamp=stamp(t_ns), frame_id=frame)

    with rosbag2.Writer(out, version=9, storage_plugin=rosbag2.StoragePlugin.MCAP) as writer:
        conns: dict[str, Any] = {}

        def put(topic: str, msgtype: str, msg: Any, t_ns: int) -> None:
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msgtype, typestore=ts)
            writer.write(conns[topic], t_ns, ts.serialize_cdr(msg, msgtype))

        for i in range(ep.length + 1):
            t = t0_ns + i * period_ns
            for key, arr in ep.observations.items():
                if key.startswith("images/"):
                    img = np.ascontiguousarray(arr[i], np.uint8)
                    h, w = img.shape[:2]
                    msg = T["sensor_msgs/msg/Image"](header=header(t, key[len("images/"):]), height=h, width=w,
                                                    encoding="rgb8", is_bigendian=0, step=w * 3,
                                                    data=img.reshape(-1))
                    put(f"{PREFIX}/{key}", "sensor_msgs/msg/Image", msg, t)
                else:
                    put(f"{PREFIX}/observation/{key}", "std_msgs/msg/Float32MultiArray", _multiarray(ts, arr[i]), t)
            state = ep.observations.get("state")
            if state is not None and state.shape[1] >= 6:
                s = state[i].astype(np.float64)
                q = euler_xyz_to_quat_wxyz(s[3:6])
                pose = T["geometry_msgs/msg/Pose"](
                    position=T["geometry_msgs/msg/Point"](x=s[0], y=s[1], z=s[2]),
                    orientation=T["geometry_msgs/msg/Quaternion"](x=q[1], y=q[2], z=q[3], w=q[0]))
                put(f"{PREFIX}/tcp_pose", "geometry_msgs/msg/PoseStamped",
                    T["geometry_msgs/msg/PoseStamped"](header=header(t, "reset_pose"), pose=pose), t)
            if i < ep.length:
                put(f"{PREFIX}/action", "std_msgs/msg/Float32MultiArray", _multiarray(ts, ep.actions[i]), t)
                t_out = t + period_ns
                put(f"{PREFIX}/reward", "std_msgs/msg/Float32", T["std_msgs/msg/Float32"](data=float(ep.rewards[i])),
                    t_out)
                for name in ("intervention", "success", "terminated", "truncated"):
                    put(f"{PREFIX}/{name}", "std_msgs/msg/Bool",
                        T["std_msgs/msg/Bool"](data=bool(getattr(ep, name)[i])), t_out)
    return out


def export_mcap(episodes: Sequence[tuple[Path, Episode]], out_dir: str | os.PathLike[str],
                fps: float = 10.0) -> list[tuple[Path, Path]]:
    """Each (file, episode) as OUT/<file stem>/ (see the module docstring); returns (file, bag dir) pairs."""
    out = Path(out_dir)
    done = []
    for f, ep in episodes:
        t0_ns = int(os.stat(f).st_mtime * 1e9) if Path(f).exists() else 0
        done.append((f, write_bag(ep, out / Path(f).stem, fps, t0_ns)))
    return done


def read_bag(bag_dir: str | os.PathLike[str]) -> dict[str, list[tuple[int, Any]]]:
    """Every message of a bag, deserialised: {topic: [(timestamp ns, message), ...]} in time order."""
    rosbag2 = optional_import("rosbags.rosbag2", extra="export", purpose="reading rosbag2 bags")
    ts = _typestore()
    out: dict[str, list[tuple[int, Any]]] = {}
    with rosbag2.Reader(Path(bag_dir)) as reader:
        for conn, t, raw in reader.messages():
            out.setdefault(conn.topic, []).append((t, ts.deserialize_cdr(raw, conn.msgtype)))
    return out
