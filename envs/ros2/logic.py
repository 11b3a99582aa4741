"""The pure logic of the ROS 2 bridge, unit-tested without ROS: message fields <-> RobotState, target interpolation,
QoS choices, staleness, gain parameters, image and object encodings. The rclpy nodes (`envs.ros2.robot`,
`envs.ros2.cameras`, `envs.ros2.twin_node`) only move fields between messages and these functions.

Conventions: ROS quaternions are (x, y, z, w); ours are (w, x, y, z) (envs.robot). Poses and twists on ROS topics
are in the robot's base frame; RobotState's twist and wrench are in the TCP (body) frame, so they are rotated by
R_base_ee^T here. Times are seconds (float) from a ROS stamp (sec, nanosec).

QoS choices (`STATE_QOS`, `COMMAND_QOS`, `IMAGE_QOS`): we subscribe to state and images best effort (it matches
both best-effort publishers, like franka_ros2's state broadcaster and CRISP's sensor-data topics, and reliable
ones) keeping only the newest sample; we publish targets reliable (it matches reliable and best-effort
subscribers), newest only, volatile: a late joiner must never get an old target.

Usage::

    pos, quat = pose_from_xyzw(p.x, p.y, p.z, o.x, o.y, o.z, o.w)
    interp = TargetInterpolator(duration_s=0.1); interp.set(pos, quat, now_s=t); interp.sample(t + 0.05)
    watch = StreamWatch(max_age_s=0.5); watch.seen("current_pose", now_s); watch.stale(now_s)
    params = gain_parameters(gain_profile("precision"), "crisp")     # {"task.k_pos_x": 3000.0, ...}
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from controllers.gains import ImpedanceGains
from controllers.transforms import quat_conj, quat_mul, quat_normalize, quat_slerp, quat_to_mat, quat_to_rotvec
from envs.robot import RobotState
from robot_rl.errors import ConfigError, ShapeError

# ----------------------------------------------------------------------------------------------------------
# QoS


@dataclasses.dataclass(frozen=True)
class QosSpec:
    """A QoS profile as plain data (the nodes build rclpy's QoSProfile from it)."""

    reliability: str
    """'reliable' or 'best_effort'."""
    depth: int
    """keep-last history depth."""
    durability: str = "volatile"
    """'volatile' or 'transient_local'."""


STATE_QOS = QosSpec("best_effort", 1)
"""Subscriptions to robot state (pose, joints, twist, wrench, gripper, objects): newest only, matches any publisher."""
COMMAND_QOS = QosSpec("reliable", 1)
"""Targets we publish: reliable (matches every subscriber), newest only, never latched."""
IMAGE_QOS = QosSpec("best_effort", 1)
"""Camera images (subscriptions and the twin's publishers): a lost frame is replaced by the next one."""
TWIN_STATE_QOS = QosSpec("best_effort", 5)
"""The twin's state publishers (franka_ros2's state broadcaster is best effort too)."""


def qos_compatible(publisher: QosSpec, subscriber: QosSpec) -> bool:
    """DDS request/offer rule: a reliable subscriber needs a reliable publisher; transient-local likewise."""
    if subscriber.reliability == "reliable" and publisher.reliability != "reliable":
        return False
    return not (subscriber.durability == "transient_local" and publisher.durability != "transient_local")


# ----------------------------------------------------------------------------------------------------------
# stamps, poses, joints, twists, wrenches


def stamp_to_s(sec: int, nanosec: int) -> float:
    return float(sec) + float(nanosec) * 1e-9


def s_to_stamp(t_s: float) -> tuple[int, int]:
    """(sec, nanosec) of a non-negative time in seconds."""
    sec = math.floor(t_s)
    nanosec = min(round((t_s - sec) * 1e9), 999_999_999)
    return int(sec), int(nanosec)


def pose_from_xyzw(x: float, y: float, z: float, qx: float, qy: float, qz: float, qw: float
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(pos (3,), quat wxyz (4,), unit, w >= 0) from ROS Pose fields. ShapeError on a non-finite or zero pose."""
    pos = np.array([x, y, z], np.float64)
    quat = np.array([qw, qx, qy, qz], np.float64)
    if not (np.all(np.isfinite(pos)) and np.all(np.isfinite(quat))) or float(np.linalg.norm(quat)) < 1e-9:
        raise ShapeError(f"pose message is not finite or has a zero quaternion: pos {pos}, quat wxyz {quat}")
    quat = quat_normalize(quat)
    return pos, (-quat if quat[0] < 0 else quat)


def pose_to_xyzw(pos: np.ndarray, quat_wxyz: np.ndarray) -> tuple[float, float, float, float, float, float, float]:
    """ROS Pose fields (x, y, z, qx, qy, qz, qw) of a position and a wxyz quaternion."""
    q = quat_normalize(quat_wxyz)
    return (float(pos[0]), float(pos[1]), float(pos[2]), float(q[1]), float(q[2]), float(q[3]), float(q[0]))


def pick_joints(names: Sequence[str], position: Sequence[float], velocity: Sequence[float],
                wanted: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(q, dq) of the `wanted` joints, in that order, from a JointState's fields (any order, extra joints ok;
    missing velocities read 0). ShapeError names the missing joints."""
    index = {n: i for i, n in enumerate(names)}
    missing = [n for n in wanted if n not in index]
    if missing:
        raise ShapeError(f"joint_states lacks joints {missing} (has {list(names)})")
    pos = np.asarray(position, np.float64)
    vel = np.asarray(velocity, np.float64)
    idx = [index[n] for n in wanted]
    if pos.shape[0] < len(names):
        raise ShapeError(f"joint_states has {len(names)} names but {pos.shape[0]} positions")
    q = pos[idx]
    dq = vel[idx] if vel.shape[0] >= len(names) else np.zeros(len(wanted))
    return q, dq


def vector_to_ee(v_base: np.ndarray, quat_base_ee: np.ndarray) -> np.ndarray:
    """A base-frame vector expressed in the TCP frame (R^T v)."""
    return quat_to_mat(quat_base_ee).T @ np.asarray(v_base, np.float64)


def vector_to_base(v_ee: np.ndarray, quat_base_ee: np.ndarray) -> np.ndarray:
    """A TCP-frame vector expressed in the base frame (R v)."""
    return quat_to_mat(quat_base_ee) @ np.asarray(v_ee, np.float64)


def twist_from_poses(pos0: np.ndarray, quat0: np.ndarray, t0: float, pos1: np.ndarray, quat1: np.ndarray,
                     t1: float) -> np.ndarray:
    """Body twist (6,) [v; w] in the frame of pose 1, by finite differences of two stamped poses (zeros when the
    stamps do not increase)."""
    dt = t1 - t0
    if not dt > 0:
        return np.zeros(6)
    v_base = (np.asarray(pos1) - np.asarray(pos0)) / dt
    w_base = quat_to_rotvec(quat_mul(quat1, quat_conj(quat0))) / dt  # R1 R0^T = exp([w dt])
    return np.concatenate([vector_to_ee(v_base, quat1), vector_to_ee(w_base, quat1)])


def state_from_parts(time_s: float, q: np.ndarray, dq: np.ndarray, pos: np.ndarray, quat: np.ndarray,
                     twist_ee_body: np.ndarray, gripper_width_m: float, force_ee_n: np.ndarray,
                     torque_ee_nm: np.ndarray, objects: Mapping[str, np.ndarray] | None = None,
                     error: str = "", tau_j_nm: np.ndarray | None = None) -> RobotState:
    """A RobotState (float64 copies) from converted message parts."""
    f = np.asarray
    return RobotState(time_s=float(time_s), q_rad=f(q, np.float64).copy(), dq_rad_per_s=f(dq, np.float64).copy(),
                      pos_base_ee=f(pos, np.float64).copy(), quat_base_ee=f(quat, np.float64).copy(),
                      twist_ee_body=f(twist_ee_body, np.float64).copy(), gripper_width_m=float(gripper_width_m),
                      force_ee_n=f(force_ee_n, np.float64).copy(), torque_ee_nm=f(torque_ee_nm, np.float64).copy(),
                      tau_j_nm=np.zeros(7) if tau_j_nm is None else f(tau_j_nm, np.float64).copy(),
                      objects={k: f(v, np.float64).copy() for k, v in (objects or {}).items()}, error=error)


# ----------------------------------------------------------------------------------------------------------
# privileged objects (the twin's extra topic): std_msgs/Float64MultiArray, one layout dim per key


def objects_to_layout(objects: Mapping[str, np.ndarray]) -> tuple[list[str], list[int], list[float]]:
    """(labels, sizes, data) for a Float64MultiArray: dim i has label = key, size = its length."""
    labels: list[str] = []
    sizes: list[int] = []
    data: list[float] = []
    for key in sorted(objects):
        v = np.asarray(objects[key], np.float64).reshape(-1)
        labels.append(key)
        sizes.append(int(v.shape[0]))
        data.extend(float(x) for x in v)
    return labels, sizes, data


def objects_from_layout(labels: Sequence[str], sizes: Sequence[int], data: Sequence[float]) -> dict[str, np.ndarray]:
    """Inverse of `objects_to_layout`; ShapeError when sizes and data disagree."""
    if len(labels) != len(sizes) or sum(sizes) != len(data):
        raise ShapeError(f"objects message: labels {list(labels)}, sizes {list(sizes)} and {len(data)} values "
                         "do not match")
    arr = np.asarray(data, np.float64)
    out, i = {}, 0
    for label, n in zip(labels, sizes, strict=True):
        out[str(label)] = arr[i:i + n].copy()
        i += n
    return out


# ----------------------------------------------------------------------------------------------------------
# gains <-> controller parameters

_AXES = ("x", "y", "z")


def gain_parameters(gains: ImpedanceGains, profile: str) -> dict[str, float]:
    """The controller parameters (name -> value) that set `gains` on a `profile` controller.

    crisp: per-axis stiffness/damping (`task.k_pos_x`, `task.d_rot_z`, ...), the error clip (`task.error_clip.x`,
    `.rx`) and `nullspace.stiffness`. fzi: per-axis stiffness only (`stiffness.trans_x`, `stiffness.rot_z`; its
    forward-dynamics damping is not a gain).
    """
    g = gains
    if profile == "crisp":
        out: dict[str, float] = {}
        for a in _AXES:
            out[f"task.k_pos_{a}"] = float(g.translational_stiffness_n_per_m)
            out[f"task.k_rot_{a}"] = float(g.rotational_stiffness_nm_per_rad)
            out[f"task.d_pos_{a}"] = float(g.translational_damping_ns_per_m)
            out[f"task.d_rot_{a}"] = float(g.rotational_damping_nms_per_rad)
            out[f"task.error_clip.{a}"] = float(g.translational_clip_m)
            out[f"task.error_clip.r{a}"] = float(g.rotational_clip_rad)
        out["nullspace.stiffness"] = float(g.nullspace_stiffness)
        return out
    if profile == "fzi":
        out = {f"stiffness.trans_{a}": float(g.translational_stiffness_n_per_m) for a in _AXES}
        out.update({f"stiffness.rot_{a}": float(g.rotational_stiffness_nm_per_rad) for a in _AXES})
        return out
    raise ConfigError(f"profile {profile!r} has no gain parameters; known: crisp, fzi")


def gains_from_parameters(values: Mapping[str, float], profile: str, base: ImpedanceGains) -> ImpedanceGains:
    """The gains that `values` (parameters of a `profile` controller) describe, starting from `base`. Per-axis
    values must agree (our law has one stiffness per kind); ConfigError otherwise."""

    def one(prefix: str, suffixes: Iterable[str]) -> float | None:
        got = [float(values[f"{prefix}{s}"]) for s in suffixes if f"{prefix}{s}" in values]
        if not got:
            return None
        if max(got) - min(got) > 1e-9 * max(1.0, abs(max(got))):
            raise ConfigError(f"parameters {prefix}* differ per axis ({got}); the twin's law takes one value")
        return got[0]

    changes: dict[str, float] = {}
    names = {"crisp": (("task.k_pos_", _AXES, "translational_stiffness_n_per_m"),
                       ("task.k_rot_", _AXES, "rotational_stiffness_nm_per_rad"),
                       ("task.d_pos_", _AXES, "translational_damping_ns_per_m"),
                       ("task.d_rot_", _AXES, "rotational_damping_nms_per_rad"),
                       ("task.error_clip.", _AXES, "translational_clip_m"),
                       ("task.error_clip.r", _AXES, "rotational_clip_rad"),
                       ("nullspace.stiffness", ("",), "nullspace_stiffness")),
             "fzi": (("stiffness.trans_", _AXES, "translational_stiffness_n_per_m"),
                     ("stiffness.rot_", _AXES, "rotational_stiffness_nm_per_rad"))}
    if profile not in names:
        raise ConfigError(f"profile {profile!r} has no gain parameters; known: crisp, fzi")
    for prefix, suffixes, field in names[profile]:
        v = one(prefix, suffixes)
        if v is not None:
            changes[field] = v
    return base.replace(**changes)


# ----------------------------------------------------------------------------------------------------------
# targets: interpolation and the reset move


class TargetInterpolator:
    """The target stream of one controller: `set` a new goal, `sample` what to publish now.

    With duration_s > 0 the published target moves from where the stream was when the goal arrived to the goal
    over duration_s (position linearly, orientation by slerp), so a controller that needs smooth targets (FZI's,
    at ~100 Hz) sees no 10 Hz steps. With duration_s = 0 the goal is published at once.
    """

    def __init__(self, duration_s: float = 0.0) -> None:
        if not (math.isfinite(duration_s) and duration_s >= 0):
            raise ConfigError(f"duration_s={duration_s!r} must be finite and >= 0")
        self.duration_s = float(duration_s)
        self._start: tuple[np.ndarray, np.ndarray] | None = None
        self._goal: tuple[np.ndarray, np.ndarray] | None = None
        self._t0 = 0.0
        self._this_duration = self.duration_s

    @property
    def has_target(self) -> bool:
        return self._goal is not None

    @property
    def goal(self) -> tuple[np.ndarray, np.ndarray] | None:
        return None if self._goal is None else (self._goal[0].copy(), self._goal[1].copy())

    def set(self, pos: np.ndarray, quat_wxyz: np.ndarray, now_s: float, duration_s: float | None = None) -> None:
        """A new goal; the interpolation starts at the currently published target (or at the goal if none).
        `duration_s` overrides the default for this goal only (the reset move uses a longer one)."""
        goal = (np.asarray(pos, np.float64).copy(), quat_normalize(quat_wxyz))
        self._start = self.sample(now_s) if self._goal is not None else goal
        self._goal = goal
        self._t0 = float(now_s)
        self._this_duration = self.duration_s if duration_s is None else float(duration_s)

    def hold(self, pos: np.ndarray, quat_wxyz: np.ndarray) -> None:
        """Jump to (pos, quat) without interpolating (start-up, stop: hold where the arm is)."""
        goal = (np.asarray(pos, np.float64).copy(), quat_normalize(quat_wxyz))
        self._start = self._goal = goal
        self._this_duration = 0.0

    def alpha(self, now_s: float) -> float:
        d = self._this_duration
        if d <= 0:
            return 1.0
        return min(max((now_s - self._t0) / d, 0.0), 1.0)

    def sample(self, now_s: float) -> tuple[np.ndarray, np.ndarray]:
        """(pos, quat wxyz) to publish at `now_s`. RuntimeError before the first set/hold."""
        if self._goal is None or self._start is None:
            raise RuntimeError("TargetInterpolator.sample before any target")
        a = self.alpha(now_s)
        if a >= 1.0:
            return self._goal[0].copy(), self._goal[1].copy()
        p0, q0 = self._start
        p1, q1 = self._goal
        return p0 + a * (p1 - p0), quat_slerp(q0, q1, a)

    def done(self, now_s: float) -> bool:
        return self.alpha(now_s) >= 1.0


def move_duration_s(pos0: np.ndarray, quat0: np.ndarray, pos1: np.ndarray, quat1: np.ndarray,
                    speed_m_per_s: float, speed_rad_per_s: float, min_s: float = 0.5) -> float:
    """How long a straight Cartesian move from pose 0 to pose 1 takes at the given speeds (at least `min_s`)."""
    dist = float(np.linalg.norm(np.asarray(pos1) - np.asarray(pos0)))
    ang = float(np.linalg.norm(quat_to_rotvec(quat_mul(quat1, quat_conj(quat0)))))
    return max(dist / speed_m_per_s, ang / speed_rad_per_s, min_s)


def pose_close(pos: np.ndarray, quat: np.ndarray, pos_goal: np.ndarray, quat_goal: np.ndarray,
               tol_m: float = 0.01, tol_rad: float = 0.05) -> bool:
    ang = float(np.linalg.norm(quat_to_rotvec(quat_mul(quat, quat_conj(quat_goal)))))
    return float(np.linalg.norm(np.asarray(pos) - np.asarray(pos_goal))) <= tol_m and ang <= tol_rad


# ----------------------------------------------------------------------------------------------------------
# staleness


class StreamWatch:
    """Arrival times of the streams a backend needs; `stale` names the ones older than max_age_s (or never seen).

    Times are the receiver's monotonic clock (not the message stamps: robot and bridge clocks may differ)."""

    def __init__(self, max_age_s: float, required: Iterable[str] = ()) -> None:
        self.max_age_s = float(max_age_s)
        self.required = tuple(required)
        self._seen: dict[str, float] = {}
        self._count: dict[str, int] = {}

    def seen(self, name: str, now_s: float) -> None:
        self._seen[name] = float(now_s)
        self._count[name] = self._count.get(name, 0) + 1

    def age_s(self, name: str, now_s: float) -> float:
        """Seconds since `name` last arrived (inf: never)."""
        t = self._seen.get(name)
        return math.inf if t is None else max(0.0, now_s - t)

    def count(self, name: str) -> int:
        return self._count.get(name, 0)

    def stale(self, now_s: float, names: Iterable[str] | None = None) -> list[str]:
        """The streams (default: `required`) not seen within max_age_s."""
        return [n for n in (self.required if names is None else names) if self.age_s(n, now_s) > self.max_age_s]

    def describe(self, now_s: float, names: Iterable[str] | None = None) -> str:
        """'' when fresh, else one line naming each stale stream and its age."""
        bad = self.stale(now_s, names)
        if not bad:
            return ""
        parts = [f"{n} {'never received' if math.isinf(self.age_s(n, now_s)) else f'{self.age_s(n, now_s):.2f} s old'}"
                 for n in bad]
        return f"stale ROS state (max age {self.max_age_s:g} s): " + ", ".join(parts)


# ----------------------------------------------------------------------------------------------------------
# images

_CHANNELS = {"rgb8": 3, "bgr8": 3, "rgba8": 4, "bgra8": 4, "mono8": 1, "8UC1": 1, "8UC3": 3}


def image_from_fields(encoding: str, height: int, width: int, step: int, data: bytes | bytearray | memoryview
                      | Sequence[int] | np.ndarray) -> np.ndarray:
    """uint8 (H, W, 3) RGB from sensor_msgs/Image fields (rgb8, bgr8, rgba8, bgra8, mono8; row padding via step).
    ShapeError for other encodings or a short buffer."""
    if encoding not in _CHANNELS:
        raise ShapeError(f"image encoding {encoding!r} is not supported; use one of {sorted(_CHANNELS)}")
    c = _CHANNELS[encoding]
    try:
        buf = np.frombuffer(data, np.uint8)  # type: ignore[arg-type]  # bytes, array.array('B') (rclpy): no copy
    except TypeError:
        buf = np.asarray(data, np.uint8).reshape(-1)
    if step < width * c or buf.size < step * height:
        raise ShapeError(f"image {height}x{width} {encoding}: step {step}, {buf.size} bytes is too short")
    rows = buf[:step * height].reshape(height, step)[:, :width * c].reshape(height, width, c)
    if c == 1:
        return np.repeat(rows, 3, axis=2)
    if encoding in ("bgr8", "bgra8"):
        rows = rows[:, :, 2::-1]
    return np.ascontiguousarray(rows[:, :, :3])


def image_to_fields(rgb: np.ndarray) -> tuple[str, int, int, int, bytes]:
    """(encoding 'rgb8', height, width, step, data) of a uint8 (H, W, 3) image."""
    img = np.ascontiguousarray(rgb, np.uint8)
    if img.ndim != 3 or img.shape[2] != 3:
        raise ShapeError(f"image must be uint8 (H, W, 3), got {img.shape}")
    h, w, _ = img.shape
    return "rgb8", int(h), int(w), int(w * 3), img.tobytes()


def policy_frame(img: np.ndarray, image_size: int, crop_xywh: Sequence[int] | None = None,
                 frame_wh: Sequence[int] | None = None, what: str = "camera") -> np.ndarray:
    """A received RGB uint8 (H, W, 3) frame as the policy sees it, processed exactly as the franky server's cameras
    process theirs (envs.hardware.cameras.crop_resize: `crop_xywh` = (x, y, width, height) in pixels, None = the
    centre square, then area averaging to (image_size, image_size, 3)); image_size 0: the crop only, no resize.
    `frame_wh`: the (width, height) the frames must have (0 or None: any). ConfigError naming `what` (the camera, its
    topic and where its settings come from) when the frame does not fit them."""
    from envs.hardware.cameras import crop_resize

    h, w = img.shape[:2]
    if frame_wh is not None and any(want and got != want for got, want in zip((w, h), frame_wh, strict=True)):
        said = " x ".join(str(v) if v else "any" for v in frame_wh)
        raise ConfigError(f"camera {what}: the topic sends {w}x{h} frames, but its width x height say {said}")
    crop = None if crop_xywh is None else (int(crop_xywh[0]), int(crop_xywh[1]), int(crop_xywh[2]),
                                           int(crop_xywh[3]))
    if crop is not None and (crop[0] + crop[2] > w or crop[1] + crop[3] > h):
        raise ConfigError(f"camera {what}: crop_xywh {list(crop)} does not lie inside its {w}x{h} frames")
    if image_size == 0:
        if crop is None:
            return img
        x, y, cw, ch = crop
        return np.ascontiguousarray(img[y:y + ch, x:x + cw])
    return crop_resize(img, int(image_size), crop)


# ----------------------------------------------------------------------------------------------------------
# gripper


def gripper_width_command(closed: float, max_width_m: float) -> float:
    """Commanded finger distance (m) for a command in [0, 1] (0 open, 1 closed)."""
    c = min(max(float(closed), 0.0), 1.0)
    return max_width_m * (1.0 - c)


def gripper_closed_from_width(width_m: float, max_width_m: float) -> float:
    """Inverse of `gripper_width_command`, clipped to [0, 1]."""
    return min(max(1.0 - float(width_m) / max_width_m, 0.0), 1.0)
