"""The hardware-faithful twin mode: no privileged value reaches the observation, the reward, the replay buffer or
the wire.

The twin's privileged values are poisoned with a sentinel: the robot reports every object coordinate as SENTINEL,
the task's object observation is all SENTINEL and its success is always True. A faithful actor then streams to a
real learner over the in-memory transport, every frame crossing the link is captured, and the captured bytes, the
learner's replay buffer and its counters are scanned. The same run without the faithful mode must show the
sentinel and the rewards (the scan can fail).
"""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("mujoco")
pytest.importorskip("torch")

from actors.actor import Actor, ActorConfig
from envs.env import FAITHFUL, RobotEnv, RobotEnvConfig, make_twin_env
from envs.robot import RobotState
from envs.tasks import PickCubeTask
from envs.twin import TwinRobot, TwinRobotConfig
from learners.config import rlpd_state_config
from learners.learner import Learner, LearnerConfig
from robot_rl.specs import EnvSpec
from robot_rl.transport import InMemoryHub, TransportConfig
from robot_rl.transport import memory as transport_memory

pytestmark = pytest.mark.filterwarnings("ignore:.*Box observation space m.*:UserWarning")

SENTINEL = 4321.125  # exact in float32 and float64


@dataclasses.dataclass(frozen=True)
class PoisonTask(PickCubeTask):
    """Pick-cube whose every privileged output is poisoned: success always, object state all SENTINEL."""

    def object_obs(self, state: RobotState, origin_pos_m: np.ndarray) -> np.ndarray:
        return np.full(self.object_dim, SENTINEL, np.float32)

    def success(self, state: RobotState) -> bool:
        return True


class PoisonRobot:
    """The twin, reporting every object value as SENTINEL (physics untouched); counts scene teleports."""

    def __init__(self) -> None:
        self.twin = TwinRobot(TwinRobotConfig(task="pick_cube", render=False))
        self.teleports = 0

    def state(self) -> RobotState:
        s = self.twin.state()
        s.objects = {k: np.full_like(v, SENTINEL) for k, v in s.objects.items()}
        return s

    def reset_scene(self, seed: int | None = None) -> None:
        self.teleports += 1
        self.twin.reset_scene(seed)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.twin, name)


def poisoned_env(faithful: bool, max_steps: int = 12) -> tuple[RobotEnv, PoisonRobot]:
    robot = PoisonRobot()
    options = FAITHFUL if faithful else {}
    cfg = RobotEnvConfig(obs_mode="state", max_episode_steps=max_steps, **options)
    return RobotEnv(robot, PoisonTask(), None, cfg), robot  # type: ignore[arg-type]


def sentinel_patterns() -> list[bytes]:
    """SENTINEL as raw arrays (little-endian float32/64) and as msgpack floats (big-endian)."""
    return [np.float32(SENTINEL).tobytes(), np.float64(SENTINEL).tobytes(), struct.pack(">f", SENTINEL),
            struct.pack(">d", SENTINEL)]


def test_faithful_env_observes_proprio_only_and_rewards_nothing() -> None:
    env, robot = poisoned_env(faithful=True, max_steps=5)
    assert env.faithful and set(env.observation_space.spaces) == {"state"}
    rewards, terminations, true_successes = [], [], []
    for episode in range(3):
        obs, info = env.reset(seed=0 if episode == 0 else None)
        assert set(obs) == {"state"} and "objects" not in info
        assert info["scene_reset"] == (episode == 0)
        done = False
        while not done:
            obs, reward, terminated, truncated, info = env.step(np.zeros(7, np.float32))
            assert set(obs) == {"state"} and not np.any(obs["state"] == SENTINEL)
            assert "objects" not in info
            rewards.append(reward)
            terminations.append(terminated)
            true_successes.append(info["success"])
            done = terminated or truncated
    assert rewards == [0.0] * 15 and not any(terminations)
    assert all(true_successes)  # the true (here: poisoned) success is still reported, in info only
    assert robot.teleports == 1 == env.scene_teleports  # the first reset only
    # without the faithful mode the same env gives the object state and a reward at once
    env2, robot2 = poisoned_env(faithful=False)
    obs, _ = env2.reset(seed=0)
    obs, reward, terminated, _, _ = env2.step(np.zeros(7, np.float32))
    assert np.all(obs["object"] == SENTINEL) and reward == 1.0 and terminated
    env2.reset()
    assert robot2.teleports == 2
    env.close()
    env2.close()


def run_actor_learner(faithful: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, steps: int = 30,
                      ) -> tuple[list[bytes], Learner, Actor]:
    captured: list[bytes] = []
    copy = transport_memory._copy_frames

    def capture(frames: Any) -> list[bytes]:
        out = copy(frames)
        captured.extend(out)
        return out

    monkeypatch.setattr(transport_memory, "_copy_frames", capture)
    env, _ = poisoned_env(faithful)
    spec = EnvSpec.from_spaces("twin-pick-cube", env.observation_space, env.action_space, control_hz=10.0)
    fast = TransportConfig(heartbeat_s=0.05, heartbeat_timeout_s=2.0, hello_retry_s=0.05, resend_after_s=0.3,
                           linger_ms=100, poll_ms=10)
    hub = InMemoryHub(fast)
    learner_ep = hub.bind_learner(spec)
    agent = rlpd_state_config(hidden_dims=(16, 16), ensemble_size=2, batch_size=8, critic_updates_per_actor_update=1,
                              device="cpu")
    lcfg = LearnerConfig(updates_per_transition=0.25, learning_starts=8, max_ahead=1000, publish_every=2,
                         checkpoint_every=10_000, tensorboard=False, log_every_s=1e6, status_every_s=1e6,
                         plot_every_s=1e6, capacity=500, demo_capacity=50, success_window=4)
    learner = Learner(spec, agent, lcfg, learner_ep, tmp_path / ("f" if faithful else "p"))
    actor_ep = hub.connect_actor(spec, "a0")
    actor = Actor(env, actor_ep, ActorConfig(chunk_steps=5, seed=1, pace=False, report_every_s=0.01))
    actor.start()
    for _ in range(steps):
        actor.step()
        learner.step(max_wait_s=0.0)
    actor.close(flush_s=2.0)
    for _ in range(50):
        learner.step(max_wait_s=0.01)
    actor_ep.close()
    learner_ep.close()
    env.close()
    return captured, learner, actor


def test_no_privileged_value_reaches_the_replay_buffer_or_the_wire(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    captured, learner, actor = run_actor_learner(True, tmp_path, monkeypatch)
    n = len(learner.online)
    assert n == learner.received == 30 and learner.episodes >= 2  # episodes of 12 steps crossed the link
    wire = b"".join(captured)
    for pattern in sentinel_patterns():
        assert pattern not in wire
    assert set(learner.online.frames) == {"state"}
    assert not any(np.any(a == SENTINEL) for a in learner.online.frames.values())
    assert np.all(learner.online.fields["rewards"][:n] == 0.0) and not np.any(learner.online.fields["terminated"][:n])
    st = actor.stats()
    assert st["success_rate"] == 0.0 and st["true_success_rate"] == 1.0  # the true success stayed in the actor
    assert b"true_success_rate" not in wire
    # control: the same run without the faithful mode carries the sentinel and the task's reward to the learner
    captured2, learner2, _ = run_actor_learner(False, tmp_path, monkeypatch, steps=6)
    wire2 = b"".join(captured2)
    assert any(p in wire2 for p in sentinel_patterns())
    assert np.any(learner2.online.frames["object"] == SENTINEL) and learner2.online.fields["rewards"][0] == 1.0


def test_faithful_is_one_switch_on_the_twin_and_its_presets() -> None:
    env = make_twin_env("pick_cube", obs_mode="state", faithful=True)
    assert env.faithful and env.config.scene_resets == "first" and not env.config.task_reward
    assert set(env.observation_space.spaces) == {"state"}
    env.close()
    env = make_twin_env("pick_cube", obs_mode="state", faithful=True, scene_resets="every")  # explicit field wins
    assert not env.faithful and env.config.scene_resets == "every"
    env.close()


def test_sim_passes_faithful_to_the_learner_the_actors_and_the_evaluation(tmp_path: Path) -> None:
    from actors.actor_cli import build_parser as actor_parser
    from actors.actor_cli import make_actor_env
    from learners.learner_cli import build_parser as learner_parser
    from learners.learner_cli import env_spec
    from supervisor.sim_cli import Sim, build_parser

    sim = Sim(build_parser().parse_args(["--task", "twin-pick-cube", "--faithful", "--out", str(tmp_path / "s")]))
    learner_argv, actor_argv = sim.learner_argv(None), sim.actor_argv(0, "tcp://127.0.0.1:1", None)
    evaluate_argv = sim.evaluate_argv(tmp_path / "e.json")
    assert all("--faithful" in argv for argv in (learner_argv, actor_argv, evaluate_argv))
    # each child parses it, and gets the faithful observation (the learner's spec matches the actor's env)
    learner_args = learner_parser().parse_args(learner_argv[learner_argv.index("learner") + 1:])
    actor_args = actor_parser().parse_args(actor_argv[actor_argv.index("actor") + 1:])
    spec = env_spec(learner_args.task, learner_args.obs_mode, None, faithful=learner_args.faithful)
    env = make_actor_env(actor_args.task, actor_args.obs_mode, None, None, faithful=actor_args.faithful)
    assert env.unwrapped.faithful and [s.name for s in spec.observation] == list(env.observation_space.spaces)
    env.close()
    evaluation = make_actor_env("twin-pick-cube", "state", None, None, faithful=True, evaluation=True)
    assert list(evaluation.observation_space.spaces) == ["state"] and evaluation.unwrapped.config.task_reward
    evaluation.close()
