"""The operator of a training run: the device whose interventions replace the policy's actions (HIL-SERL) and whose
success key ends an episode under `--reward human`, for every command that acts (`actor`, `sim`'s actors, `train`).

`--intervene` (robot_rl.operators): "scripted" is the twin's scripted operator (envs.twin.scripted_human; it presses
the success key itself when the task's condition holds, under `--reward human`); "spacemouse", "gamepad" and
"keyboard" are a person at the teleop device `robot-rl record-demos --teleop` uses (demos.devices), with its
bindings: the intervention toggle button (or moving the device) takes over, the success button/key reports success.
The device is opened here, so a missing library ends the command with the `teleop` extra's one-line message and
an unplugged device with `DeviceNotFoundError` (which names what was found), before any step.

`wrap_with_operator` puts the device in an `envs.wrappers.InterventionWrapper` (inside the reward model, which reads
its `info["events"]`); the actor and the one-process train loop store the intervention rows in the online and demo
buffers (`info["intervention"]`, `info["intervene_action"]`). Commands reach this module through
robot_rl.gym_env.with_operator (learners import neither envs nor demos).

Usage::

    device = make_operator("spacemouse", task="twin-pick-cube", device_config={"deadzone": 0.15})
    env = wrap_with_operator(env, "keyboard", task="twin-pick-cube")            # opens the keyboard listener
    env = wrap_with_operator(env, "scripted", task="twin-pick-cube", press_success=True)
    options = teleop_device_options("spacemouse", "spacemouse.json")   # record-demos / record-labels --device-config
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envs.devices import HumanDevice
from robot_rl.errors import ConfigError
from robot_rl.operators import INTERVENE_CHOICES, is_hardware_device, load_device_config


def make_operator(intervene: str, task: str, seed: int = 0, press_success: bool = False,
                  device_config: Mapping[str, Any] | None = None) -> HumanDevice:
    """The opened device `intervene` names (robot_rl.operators.INTERVENE_CHOICES). `press_success` (`--reward
    human`): the scripted operator reports the success key when the twin's task condition holds; a hardware
    device must bind a success button (ConfigError otherwise, before it is opened: the SpaceMouse's two buttons
    bind none by default). `device_config`: a hardware device's config fields (`--device-config`)."""
    if intervene not in INTERVENE_CHOICES:
        raise ConfigError(f"--intervene {intervene!r}: expected one of {', '.join(INTERVENE_CHOICES)}")
    if intervene == "scripted":
        if device_config:
            raise ConfigError("--device-config: only with a hardware device, not --intervene scripted")
        from envs.presets import twin_task
        from envs.twin.scripted_human import ScriptedHuman, ScriptedHumanConfig

        return ScriptedHuman(ScriptedHumanConfig(task=twin_task(task), seed=seed, press_success=press_success))
    assert is_hardware_device(intervene)
    from demos.devices.teleop import build_hardware_device

    try:
        device = build_hardware_device(intervene, **dict(device_config or {}))
    except ConfigError as err:
        raise ConfigError(f"--device-config for --intervene {intervene}: {err}") from None
    if press_success:
        require_success_binding(intervene, device.config, "--reward human")
    device.open()
    return device


def require_success_binding(name: str, config: Any, why: str) -> None:
    """ConfigError (`why` first) when the hardware device `name`'s config binds no button or key to "success"."""
    bindings: tuple[tuple[Any, str], ...] = (getattr(config, "buttons", None) or getattr(config, "keys", None) or ())
    if not any(target == "success" for _, target in bindings):
        raise ConfigError(f"{why}: the {name}'s bindings have no success button "
                          f"({SUCCESS_HINTS.get(name, 'bind one in --device-config')})")


def teleop_device_options(teleop: str, device_config: str | None) -> dict[str, Any]:
    """The config fields of `--device-config` for the recorders' `--teleop` device ({} without a file);
    ConfigError for a file with the scripted device, or one that is not a JSON object."""
    if device_config is None:
        return {}
    if not is_hardware_device(teleop):
        raise ConfigError(f"--device-config {device_config}: only with a hardware device (--teleop spacemouse, "
                          f"gamepad or keyboard), not --teleop {teleop}")
    return load_device_config(device_config)


SUCCESS_HINTS = {
    "spacemouse": "a two-button SpaceMouse binds gripper toggle and intervention toggle by default; bind one with "
                  "--device-config, e.g. {\"buttons\": [[0, \"gripper_toggle\"], [1, \"success\"]]}: moving the cap "
                  "then takes over",
}
"""How to bind a success button on a device whose default bindings have none."""


def wrap_with_operator(env: Any, intervene: str, task: str, seed: int = 0, press_success: bool = False,
                       device_config: Mapping[str, Any] | None = None) -> Any:
    """`env` in an InterventionWrapper around the device `intervene` names (opened here; closing the wrapper closes
    it). `env` itself is closed by the caller when this fails."""
    from envs.wrappers import InterventionWrapper

    device = make_operator(intervene, task, seed=seed, press_success=press_success, device_config=device_config)
    try:
        return InterventionWrapper(env, device)
    except BaseException:
        device.close()
        raise
