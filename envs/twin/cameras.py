"""`TwinCameras`: the twin's cameras (implements envs.robot.Cameras), rendered offscreen from the robot's MjData.

One mujoco.Renderer sized to the image serves every camera. Rendering needs an OpenGL backend: headless
machines use EGL (MUJOCO_GL=egl, set by envs.twin on import when nothing else is configured); the model
disables shadows and multisampling (envs/assets/twin_world.xml), which keeps software rendering fast.

Lifetime: the renderer (and its GL context) must be freed before the EGL display is terminated, which MuJoCo
does in an atexit hook. `close()` frees it (TwinRobot.stop and so RobotEnv.close call it); cameras still open
when the process exits are closed by our own atexit hook, registered after MuJoCo's so it runs first. Without
that, a renderer left to the garbage collector at interpreter shutdown prints "Exception ignored in
Renderer.__del__ ... EGLError" tracebacks.

Usage::

    cams = TwinCameras(model, data, ("front", "wrist"), 128, 128)
    frames = cams.read()           # {"front": uint8 (128, 128, 3), "wrist": ...}, fresh arrays
    cams.close()
"""

from __future__ import annotations

import atexit
import os
import weakref

import mujoco
import numpy as np

from robot_rl.errors import ConfigError, RobotError

_OPEN: weakref.WeakSet[TwinCameras] = weakref.WeakSet()
_exit_hook_registered = False


def close_all_cameras() -> None:
    """Close every TwinCameras still open (runs at exit, before MuJoCo terminates the EGL display)."""
    for cams in list(_OPEN):
        cams.close()


def _register_exit_hook() -> None:
    # atexit runs hooks last-in first-out: registered after the first renderer made MuJoCo register its
    # eglTerminate hook, ours runs before it
    global _exit_hook_registered
    if not _exit_hook_registered:
        atexit.register(close_all_cameras)
        _exit_hook_registered = True


class TwinCameras:
    """Named MuJoCo cameras rendered from `data` (whatever state it holds when read() is called)."""

    def __init__(self, model: mujoco.MjModel, data: mujoco.MjData, names: tuple[str, ...], height: int,
                 width: int) -> None:
        ids = []
        for name in names:
            cid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, name)
            if cid < 0:
                known = [model.camera(i).name for i in range(model.ncam)]
                raise ConfigError(f"camera {name!r} is not in the model; known: {known}")
            ids.append(cid)
        if width > model.vis.global_.offwidth or height > model.vis.global_.offheight:
            raise ConfigError(f"image {height}x{width} exceeds the model's offscreen buffer "
                              f"{model.vis.global_.offheight}x{model.vis.global_.offwidth}; build the model "
                              "with envs.twin.build_model(task, image_height, image_width)")
        self._names = tuple(names)
        self._ids = tuple(ids)
        self._data = data
        self._height, self._width = int(height), int(width)
        try:
            self._renderer: mujoco.Renderer | None = mujoco.Renderer(model, self._height, self._width)
        except Exception as err:  # mujoco.FatalError, GLFW/EGL errors: no usable OpenGL context
            raise RobotError(
                f"cannot create an OpenGL context for offscreen rendering: {err}. MuJoCo picks its GL backend "
                "when it is first imported (MUJOCO_GL is now "
                f"{os.environ.get('MUJOCO_GL', '<unset>')!r}): on a headless machine set MUJOCO_GL=egl before "
                "Python starts (or import envs.twin before mujoco) and install libegl1 + libgl1-mesa-dri; or "
                "use TwinRobotConfig(render=False).") from err
        _OPEN.add(self)
        _register_exit_hook()

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return (self._height, self._width, 3)

    def read(self) -> dict[str, np.ndarray]:
        """A fresh uint8 (H, W, 3) frame per camera, keyed by name. RobotError after close()."""
        r = self._renderer
        if r is None:
            raise RobotError("TwinCameras are closed")
        out = {}
        for name, cid in zip(self._names, self._ids, strict=True):
            r.update_scene(self._data, camera=cid)
            out[name] = r.render()
        return out

    def close(self) -> None:
        """Release the renderer and its GL context (idempotent)."""
        _OPEN.discard(self)
        if self._renderer is not None:
            renderer, self._renderer = self._renderer, None
            renderer.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the GL library may already be gone
            pass
