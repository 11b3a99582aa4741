"""InterventionWrapper + ScriptedHuman on the MuJoCo twin (state mode, reach)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
pytest.importorskip("gymnasium")
pytest.importorskip("mujoco")

from controllers.transforms import quat_to_mat
from envs.devices import HumanCommand, HumanDevice
from envs.env import make_twin_env
from envs.twin.experts import ScriptedExpert
from envs.twin.scripted_human import ScriptedHuman, ScriptedHumanConfig, cosine
from envs.wrappers import InterventionConfig, InterventionWrapper, RelativeFrameWrapper
from robot_rl.errors import ConfigError, SafetyError, ShapeError

POLICY_ACTION = np.array([0.0, 0.0, -1.0, 0.0, 0.0, 0.0, -1.0], np.float32)
HUMAN_DELTA = np.array([0.5, -0.5, 0.25, 0.0, 0.0, 0.0])


class ScriptDevice:
    """A device that is active on the given step indices (0-based polls) with a fixed command."""

    name = "script"

    def __init__(self, active_steps: set[int], delta: np.ndarray = HUMAN_DELTA, gripper: float = -1.0,
                 events: dict[int, frozenset[str]] | None = None) -> None:
        self.active_steps, self.delta, self.gripper = active_steps, delta, gripper
        self.events = events or {}
        self.polls = 0
        self.resets = 0
        self.commands: list[np.ndarray] = []

    def reset(self) -> None:
        self.polls = 0
        self.resets += 1

    def close(self) -> None:
        pass

    def poll(self, state: Any) -> HumanCommand:
        i = self.polls
        self.polls += 1
        active = i in self.active_steps
        cmd = HumanCommand(delta_ee=self.delta.copy() if active else np.zeros(6), gripper=self.gripper,
                           active=active, events=self.events.get(i, frozenset()))
        self.commands.append(cmd.action())
        return cmd


class RecordingDevice:
    """Wraps a device and records every command's action (base frame)."""

    def __init__(self, inner: HumanDevice) -> None:
        self.inner = inner
        self.commands: list[np.ndarray] = []

    def reset(self) -> None:
        self.inner.reset()

    def observe_policy_action(self, action: np.ndarray) -> None:
        self.inner.observe_policy_action(action)  # type: ignore[attr-defined]

    def poll(self, state: Any) -> Any:
        cmd = self.inner.poll(state)
        self.commands.append(np.asarray(cmd.action(), np.float64))
        return cmd


def reach_env(**kwargs: Any) -> Any:
    return make_twin_env("reach", obs_mode="state", **kwargs)


# ------------------------------------------------------------------------------------------- the wrapper
def test_intervention_replaces_the_action_and_flags_it() -> None:
    base = reach_env(reset_noise_m=0.0)
    device = ScriptDevice(active_steps={1, 2})
    env = InterventionWrapper(base, device, InterventionConfig(sticky_s=0.0))
    try:
        env.reset(seed=0)
        assert device.resets == 1
        flags = []
        for i in range(4):
            cmd0, _ = base.commanded_pose
            _, _, _, _, info = env.step(POLICY_ACTION)
            moved = base.commanded_pose[0] - cmd0
            flags.append(info["intervention"])
            np.testing.assert_array_equal(info["policy_action"], POLICY_ACTION)
            if info["intervention"]:
                expected = np.concatenate([HUMAN_DELTA, [-1.0]]).astype(np.float32)
                np.testing.assert_array_equal(info["intervene_action"], expected)
                np.testing.assert_allclose(moved, 0.02 * HUMAN_DELTA[:3], atol=1e-9)
            else:
                assert "intervene_action" not in info, i
                np.testing.assert_allclose(moved, 0.02 * POLICY_ACTION[:3], atol=1e-9)
        assert flags == [False, True, True, False]
        assert env.episode_stats() == {"steps": 4, "intervention_steps": 2, "intervention_rate": 0.5,
                                       "interventions": 1}
    finally:
        env.close()


@pytest.mark.parametrize(("sticky_s", "control_hz", "sticky_steps"), [(0.5, 0.0, 5), (0.3, 20.0, 6), (0.0, 0.0, 0)])
def test_sticky_window_holds_for_the_right_number_of_steps(sticky_s: float, control_hz: float,
                                                           sticky_steps: int) -> None:
    device = ScriptDevice(active_steps={2})
    env = InterventionWrapper(reach_env(), device, InterventionConfig(sticky_s=sticky_s, control_hz=control_hz))
    try:
        assert env.sticky_steps == sticky_steps
        env.reset(seed=0)
        flags, stored = [], []
        for _ in range(12):
            _, _, _, _, info = env.step(POLICY_ACTION)
            flags.append(info["intervention"])
            stored.append(info.get("intervene_action"))
        assert flags == [i in range(2, 3 + sticky_steps) for i in range(12)]
        # inside the sticky window the device's (inactive) command is executed: hold still, its gripper
        for a in stored[3:3 + sticky_steps]:
            np.testing.assert_array_equal(a, np.array([0, 0, 0, 0, 0, 0, -1], np.float32))
        assert env.episode_stats()["interventions"] == 1
    finally:
        env.close()


def test_episode_end_reports_the_intervention_rate_and_reset_clears_it() -> None:
    device = ScriptDevice(active_steps={0, 1, 2, 7})
    env = InterventionWrapper(reach_env(max_episode_steps=10), device, InterventionConfig(sticky_s=0.0))
    try:
        env.reset(seed=0)
        for i in range(10):
            _, _, terminated, truncated, info = env.step(POLICY_ACTION)
            assert ("intervention_rate" in info) == (terminated or truncated), i
        assert truncated and not terminated
        assert info["intervention_rate"] == pytest.approx(0.4)
        assert info["intervention_steps"] == 4 and info["interventions"] == 2 and info["steps"] == 10
        env.reset(seed=1)
        assert env.episode_stats() == {"steps": 0, "intervention_steps": 0, "intervention_rate": 0.0,
                                       "interventions": 0}
    finally:
        env.close()


def test_device_events_pass_through() -> None:
    events = {1: frozenset({"success"}), 2: frozenset({"quit", "failure"})}
    env = InterventionWrapper(reach_env(), ScriptDevice(set(), events=events))
    try:
        env.reset(seed=0)
        got = [env.step(POLICY_ACTION)[4]["events"] for _ in range(3)]
        assert got == [(), ("success",), ("failure", "quit")]
    finally:
        env.close()


class BadDevice:
    def __init__(self, action: np.ndarray) -> None:
        self._action = action

    def reset(self) -> None:
        pass

    def poll(self, state: Any) -> Any:
        action = self._action

        class Cmd:
            active = True
            events: frozenset[str] = frozenset()

            def action(self) -> np.ndarray:
                return action

        return Cmd()


def test_bad_devices_and_configs_get_typed_errors() -> None:
    env = InterventionWrapper(reach_env(), BadDevice(np.zeros(6)))
    env.reset(seed=0)
    with pytest.raises(ShapeError, match="BadDevice"):
        env.step(POLICY_ACTION)
    env = InterventionWrapper(reach_env(), BadDevice(np.array([np.nan] + [0.0] * 6)))
    env.reset(seed=0)
    with pytest.raises(SafetyError, match="non-finite"):
        env.step(POLICY_ACTION)
    with pytest.raises(ConfigError, match="poll"):
        InterventionWrapper(reach_env(), object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="sticky_s"):
        InterventionConfig(sticky_s=-0.1)
    with pytest.raises(ConfigError, match="inside the InterventionWrapper"):
        RelativeFrameWrapper(InterventionWrapper(reach_env(), ScriptDevice(set())))
    for bad in ({"cos_threshold": 2.0}, {"takeover_steps": 0}, {"max_intervention_fraction": 1.5},
                {"expert_noise_std": -1.0}):
        with pytest.raises(ConfigError):
            ScriptedHumanConfig(**bad)


# ------------------------------------------------------------------------------------------- relative frame
def test_intervene_action_under_the_relative_frame_replays_the_executed_motion() -> None:
    """The human commands in the base frame; the stored intervene_action is in the policy's TCP frame, and
    feeding the stored actions back as policy actions (same seed) reproduces the executed motion exactly."""
    rng = np.random.default_rng(0)
    device = RecordingDevice(ScriptedHuman(ScriptedHumanConfig(task="reach", seed=0)))
    base_a = reach_env()
    env = InterventionWrapper(RelativeFrameWrapper(base_a), device)
    stored, executed, positions, flags, quats = [], [], [], [], []
    try:
        env.reset(seed=5)
        while True:
            quats.append(base_a.last_state.quat_base_ee.copy())
            _, _, terminated, truncated, info = env.step(rng.uniform(-1, 1, 7).astype(np.float32))
            flags.append(info["intervention"])
            stored.append(info["intervene_action"] if info["intervention"] else info["policy_action"])
            executed.append(info["base_frame_action"])
            positions.append(base_a.last_state.pos_base_ee.copy())
            if terminated or truncated:
                break
    finally:
        env.close()
    assert any(flags) and not all(flags)
    differs = 0
    for i, on in enumerate(flags):
        if not on:
            continue
        human = device.commands[i]
        # executed in the base frame = the human's command (scaled down only if its TCP version left the box)
        for sl in (slice(0, 3), slice(3, 6)):
            if np.linalg.norm(human[sl]) > 1e-6:
                assert cosine(executed[i][sl], human[sl]) > 1 - 1e-5
            if np.max(np.abs(quat_to_mat(quats[i]).T @ human[sl])) <= 1.0:
                np.testing.assert_allclose(executed[i][sl], human[sl], atol=1e-6)
        differs += int(np.max(np.abs(stored[i][:6] - human[:6])) > 0.1)
        assert np.all(np.abs(stored[i]) <= 1.0)
    assert differs > 0, "the stored action should be in the TCP frame, not the base frame"

    # replay the stored (policy-frame) actions with no human: same base-frame actions, same trajectory
    base_b = reach_env()
    replay = RelativeFrameWrapper(base_b)
    try:
        replay.reset(seed=5)
        for i, a in enumerate(stored):
            _, _, terminated, truncated, info = replay.step(a)
            np.testing.assert_array_equal(info["base_frame_action"], executed[i])
            np.testing.assert_allclose(base_b.last_state.pos_base_ee, positions[i], atol=1e-12)
        assert terminated or truncated
    finally:
        replay.close()


# ------------------------------------------------------------------------------------------- scripted human
def run_episodes(policy: str, episodes: int, config: ScriptedHumanConfig | None = None,
                 sticky_s: float = 0.5) -> list[dict[str, Any]]:
    base = reach_env()
    human = ScriptedHuman(config or ScriptedHumanConfig(task="reach", seed=0))
    env = InterventionWrapper(base, human, InterventionConfig(sticky_s=sticky_s))
    expert = ScriptedExpert("reach")
    rng = np.random.default_rng(0)
    out = []
    try:
        for ep in range(episodes):
            env.reset(seed=100 + ep)
            expert.reset()
            while True:
                if policy == "random":
                    a = rng.uniform(-1, 1, 7).astype(np.float32)
                else:
                    a = expert.act(base.last_state)
                _, _, terminated, truncated, info = env.step(a)
                if terminated or truncated:
                    out.append({"success": info["success"], "rate": info["intervention_rate"],
                                "steps": info["steps"], "human_steps": human.intervention_steps})
                    break
    finally:
        env.close()
    return out


def test_random_policy_with_scripted_human_mostly_succeeds() -> None:
    results = run_episodes("random", 10)
    successes = sum(r["success"] for r in results)
    rates = [r["rate"] for r in results]
    assert successes >= 8, results
    assert all(0.0 < r < 1.0 for r in rates), rates
    assert 0.0 < float(np.mean(rates)) < 1.0


def test_random_policy_alone_fails_reach() -> None:
    """The baseline the human rescues: without interventions the random policy rarely reaches the goal."""
    results = run_episodes("random", 10, ScriptedHumanConfig(task="reach", max_intervention_fraction=0.0))
    assert all(r["rate"] == 0.0 for r in results)
    assert sum(r["success"] for r in results) <= 2


def test_expert_policy_triggers_no_interventions() -> None:
    results = run_episodes("expert", 10)
    assert all(r["success"] for r in results)
    assert sum(r["rate"] for r in results) / len(results) <= 0.01, results


def test_budget_caps_the_human() -> None:
    cfg = ScriptedHumanConfig(task="reach", seed=0, max_intervention_fraction=0.1, takeover_steps=4)
    human = ScriptedHuman(cfg)
    assert human.budget_steps == 5  # 10% of reach's 50 steps
    results = run_episodes("random", 4, cfg, sticky_s=0.0)
    assert all(0 < r["human_steps"] <= 5 for r in results), results
    assert all(r["rate"] * r["steps"] == pytest.approx(r["human_steps"]) for r in results)


def test_scripted_human_without_policy_hook_judges_tcp_progress() -> None:
    """In a plain poll loop (no observe_policy_action) it judges the TCP's displacement instead."""
    env = reach_env()
    human = ScriptedHuman(ScriptedHumanConfig(task="reach", seed=0))
    rng = np.random.default_rng(1)
    successes, takeovers = 0, 0
    try:
        for ep in range(5):
            env.reset(seed=200 + ep)
            human.reset()
            while True:
                cmd = human.poll(env.last_state)
                a = cmd.action() if cmd.active else rng.uniform(-1, 1, 7).astype(np.float32)
                assert cmd.active == ("intervene" in cmd.events)
                _, _, terminated, truncated, info = env.step(a)
                if terminated or truncated:
                    break
            successes += info["success"]
            takeovers += human.takeovers
    finally:
        env.close()
    assert takeovers >= 5 and successes >= 4


def test_observe_policy_action_checks_its_shape() -> None:
    human = ScriptedHuman(ScriptedHumanConfig(task="twin-reach"))
    with pytest.raises(ShapeError):
        human.observe_policy_action(np.zeros(3))


def test_demos_teleop_device_plugs_in_without_envs_importing_demos() -> None:
    from demos.devices.teleop import make_device

    device = make_device("scripted", task="twin-reach", seed=0)  # always active: the human drives everything
    env = InterventionWrapper(RelativeFrameWrapper(reach_env()), device)
    try:
        env.reset(seed=0)
        while True:
            _, _, terminated, truncated, info = env.step(POLICY_ACTION)
            assert info["intervention"]
            if terminated or truncated:
                break
        assert info["success"] and info["intervention_rate"] == 1.0
    finally:
        env.close()


def test_every_device_implements_the_one_device_interface() -> None:
    """Demos' teleop devices and the twin's scripted operators are all `envs.devices.HumanDevice`s: a name,
    reset(), poll(state) -> HumanCommand and close(); a plain object without them is not."""
    from demos.devices import KeyboardTeleop
    from demos.devices.teleop import make_device
    from envs.twin.near_miss import NearMissOperator

    devices = [make_device("scripted", task="twin-pick-cube", seed=0), KeyboardTeleop(listen=False),
               ScriptedHuman(ScriptedHumanConfig(task="pick_cube")), NearMissOperator("lift-drop", seed=0),
               ScriptDevice(set())]
    env = make_twin_env("pick_cube", obs_mode="state")
    try:
        env.reset(seed=0)
        for device in devices:
            assert isinstance(device, HumanDevice), type(device).__name__
            assert isinstance(device.name, str) and device.name
            device.reset()
            cmd = device.poll(env.unwrapped.last_state)
            assert isinstance(cmd, HumanCommand) and cmd.action().shape == (7,), type(device).__name__
            device.close()
    finally:
        env.close()
    assert not isinstance(object(), HumanDevice)


def test_takeover_replans_from_the_state_not_from_a_stale_expert_phase() -> None:
    # While the policy is in control the expert's phase follows the policy's states (a hover can time its
    # descent out into "grasp"); a takeover must start from a fresh plan for the state it finds.
    env = make_twin_env("pick_cube", obs_mode="state")
    try:
        env.reset(seed=3)
        state = env.robot.state()  # TCP 25 cm up, gripper open, cube on the table
        human = ScriptedHuman(ScriptedHumanConfig(task="pick_cube", patience_steps=2, check_gripper=False))
        human.expert._set_phase("grasp")  # stale: what the expert would say right above a cube it thinks is caught
        assert human.expert.act(state)[6] == 1.0  # the stale plan closes the gripper here
        human.expert._set_phase("grasp")
        away = -human.expert.act(state)[:3]
        cmds = []
        for _ in range(3):
            human.observe_policy_action(np.r_[away / max(np.linalg.norm(away), 1e-9), np.zeros(4)])
            cmds.append(human.poll(state))
        assert [c.active for c in cmds] == [False, True, True]
        assert human.expert.phase == "approach" and cmds[1].gripper == -1.0  # replanned: open, go to the hover
        fresh = ScriptedExpert("pick_cube").act(state)
        np.testing.assert_allclose(cmds[1].delta_ee, fresh[:6])
    finally:
        env.close()
