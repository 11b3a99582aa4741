"""The hardware-faithful twin mode: no privileged value reaches the observation, the reward, the replay buffer or
the wire.

The twin's privileged values are poisoned with a sentinel: the robot reports every object coordinate as SENTINEL,
the task's object observation is all SENTINEL and its success is always True. A faithful actor then streams to a
real learner over the in-memory transport, every frame crossing the link is captured, and the captured bytes, the
learner's replay buffer and its counters are scanned. The same run without the faithful mode must show the
sentinel and the rewards (the scan can fail).

The reward then comes from a reward model (learners.rewards.reward_model): a faithful pixel actor with a classifier
reward
(a saved classifier that calls every frame a success, gated over k = 2 frames) sends the classifier's rewards,
terminations and success flags, none of the (poisoned, always true) task success, and still no sentinel.
"""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("mujoco")
pytest.importorskip("torch")

from actors.actor import Actor, ActorConfig
from envs.env import FAITHFUL, RobotEnv, RobotEnvConfig, make_twin_env
from envs.robot import RobotState
from envs.tasks import PickCubeTask
from envs.twin import TwinRobot, TwinRobotConfig
from learners.agents.config import drq_config, rlpd_state_config
from learners.distributed.learner import Learner, LearnerConfig
from learners.rewards.reward_model import RewardModelWrapper, image_shapes_of_space, make_reward_model
from robot_rl.reward_source import SUCCESS_UNKNOWN_INFO_KEY
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

    def __init__(self, image_size: int | None = None) -> None:
        cams: dict[str, Any] = {} if image_size is None else {"image_height": image_size, "image_width": image_size}
        self.twin = TwinRobot(TwinRobotConfig(task="pick_cube", render=image_size is not None, **cams))
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


IMAGE = 16  # camera size of the pixel runs (the classifier's card says the same)


def poisoned_env(faithful: bool, max_steps: int = 12, pixels: bool = False, **config: Any,
                 ) -> tuple[RobotEnv, PoisonRobot]:
    robot = PoisonRobot(IMAGE if pixels else None)
    options = {**(FAITHFUL if faithful else {}), **config}
    cfg = RobotEnvConfig(obs_mode="pixels" if pixels else "state", image_size=IMAGE, max_episode_steps=max_steps,
                         **options)
    cameras = robot.twin.cameras() if pixels else None
    return RobotEnv(robot, PoisonTask(), cameras, cfg), robot  # type: ignore[arg-type]


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


def capture_wire_frames(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """A list that receives every frame the in-memory transport copies from here on (everything that crosses the
    link, in both directions), for scanning what went over the wire."""
    captured: list[bytes] = []
    copy = transport_memory._copy_frames

    def capture(frames: Any) -> list[bytes]:
        out = copy(frames)
        captured.extend(out)
        return out

    monkeypatch.setattr(transport_memory, "_copy_frames", capture)
    return captured


def run_actor_learner(faithful: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, steps: int = 30,
                      classifier: Path | None = None) -> tuple[list[bytes], Learner, Actor, list[Any]]:
    """A (poisoned) actor streaming `steps` transitions to a real learner; returns the captured wire frames, the
    learner, the actor and the chunks the actor sent. `classifier`: a pixel env whose reward is that classifier's
    (learners.rewards.reward_model, as `robot-rl actor --reward classifier:DIR` wraps it)."""
    captured = capture_wire_frames(monkeypatch)
    env: Any
    if classifier is None:
        env, _ = poisoned_env(faithful)
    else:
        env, _ = poisoned_env(faithful, pixels=True, terminate_on_success=False)
        model = make_reward_model(f"classifier:{classifier}", image_shapes_of_space(env.observation_space),
                                  tmp_path / f"audit_{faithful}")
        assert model is not None
        env = RewardModelWrapper(env, model)
    spec = EnvSpec.from_spaces("twin-pick-cube", env.observation_space, env.action_space, control_hz=10.0)
    fast = TransportConfig(heartbeat_s=0.05, heartbeat_timeout_s=2.0, hello_retry_s=0.05, resend_after_s=0.3,
                           linger_ms=100, poll_ms=10)
    hub = InMemoryHub(fast)
    learner_ep = hub.bind_learner(spec)
    small = {"hidden_dims": (16, 16), "ensemble_size": 2, "batch_size": 8, "critic_updates_per_actor_update": 1,
             "device": "cpu"}
    agent = rlpd_state_config(**small) if classifier is None else drq_config(
        **small, encoder="conv", conv_channels=(8, 8), image_latent_dim=16, proprio_latent_dim=8)
    lcfg = LearnerConfig(updates_per_transition=0.25, learning_starts=8 if classifier is None else 10_000,
                         max_ahead=1000, publish_every=2, checkpoint_every=10_000, tensorboard=False,
                         log_every_s=1e6, status_every_s=1e6, plot_every_s=1e6, capacity=500, demo_capacity=50,
                         success_window=4)
    learner = Learner(spec, agent, lcfg, learner_ep, tmp_path / (("f" if faithful else "p") + str(classifier)[-1:]))
    actor_ep = hub.connect_actor(spec, "a0")
    actor = Actor(env, actor_ep, ActorConfig(chunk_steps=5, seed=1, pace=False, report_every_s=0.01))
    chunks: list[Any] = []
    queue = actor._queue

    def keep(chunk: Any) -> None:
        chunks.append(chunk)
        queue(chunk)

    monkeypatch.setattr(actor, "_queue", keep)
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
    return captured, learner, actor, chunks


def test_no_privileged_value_reaches_the_replay_buffer_or_the_wire(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    captured, learner, actor, _ = run_actor_learner(True, tmp_path, monkeypatch)
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
    captured2, learner2, _, _ = run_actor_learner(False, tmp_path, monkeypatch, steps=6)
    wire2 = b"".join(captured2)
    assert any(p in wire2 for p in sentinel_patterns())
    assert np.any(learner2.online.frames["object"] == SENTINEL) and learner2.online.fields["rewards"][0] == 1.0


def test_a_classifier_reward_reaches_the_learner_and_the_true_success_does_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.test_reward_classifier import constant_classifier

    cls = constant_classifier(tmp_path / "cls", 0.9, size=IMAGE, k=2, cameras=("images/front", "images/wrist"))
    captured, learner, actor, chunks = run_actor_learner(True, tmp_path, monkeypatch, steps=30, classifier=cls)
    wire = b"".join(captured)
    for pattern in sentinel_patterns():
        assert pattern not in wire
    n = len(learner.online)
    assert n == learner.received == 30 and "object" not in learner.online.frames
    assert {"images/front", "images/wrist"} <= set(learner.online.frames)
    # the classifier fires on every frame, the k = 2 gate ends every episode on its 2nd step with reward 1 ...
    assert np.concatenate([c.rewards for c in chunks]).tolist() == [0.0, 1.0] * 15
    assert np.concatenate([c.terminated for c in chunks]).tolist() == [False, True] * 15
    valid = learner.online.valid
    assert valid.sum() == 30 and learner.online.fields["rewards"][valid].sum() == 15
    assert learner.online.fields["terminated"][valid].sum() == 15
    # ... and the success flags sent are the classifier's, never the task's (poisoned: true on every step)
    assert np.concatenate([c.success for c in chunks]).tolist() == [False, True] * 15
    st = actor.stats()
    assert st["success_rate"] == 1.0 and st["true_success_rate"] == 1.0 and b"true_success_rate" not in wire
    # every positive frame was audited, in this process's files only
    assert len((tmp_path / "audit_True" / "positives.jsonl").read_text().splitlines()) == 30
    # outside the faithful mode the actor keeps sending the env's own success flag (metrics), reward from the model
    _, _, _, chunks2 = run_actor_learner(False, tmp_path, monkeypatch, steps=4, classifier=cls)
    assert np.concatenate([c.success for c in chunks2]).tolist() == [True] * 4
    assert np.concatenate([c.rewards for c in chunks2]).tolist() == [0.0, 1.0, 0.0, 1.0]


def test_faithful_is_one_switch_on_the_twin_and_its_presets() -> None:
    env = make_twin_env("pick_cube", obs_mode="state", faithful=True)
    assert env.faithful and env.config.scene_resets == "first" and not env.config.task_reward
    assert set(env.observation_space.spaces) == {"state"}
    env.close()
    env = make_twin_env("pick_cube", obs_mode="state", faithful=True, scene_resets="every")  # explicit field wins
    assert not env.faithful and env.config.scene_resets == "every"
    env.close()


def test_sim_passes_faithful_to_the_learner_the_actors_and_the_evaluation(tmp_path: Path) -> None:
    from actors.actor_env import make_actor_env
    from actors.run import parse_actor_args
    from learners.distributed.flags import build_learner_parser as learner_parser
    from learners.distributed.process import task_spec as env_spec
    from supervisor.sim import Sim
    from supervisor.sim_config import build_sim_parser, sim_config

    sim = Sim(sim_config(build_sim_parser().parse_args([
        "--task", "twin-pick-cube", "--faithful", "--reward", "human", "--intervene", "scripted",
        "--out", str(tmp_path / "s")])))
    learner_argv, actor_argv = sim.learner_argv(None), sim.actor_argv(0, "tcp://127.0.0.1:1", None)
    evaluate_argv = sim.evaluate_argv(tmp_path / "e.json")
    assert all("--faithful" in argv for argv in (learner_argv, actor_argv, evaluate_argv))
    # each child parses it, and gets the faithful observation (the learner's spec matches the actor's env)
    learner_args = learner_parser().parse_args(learner_argv[learner_argv.index("learner") + 1:])
    actor_args = parse_actor_args(actor_argv[actor_argv.index("actor") + 1:])
    spec = env_spec(learner_args.task, learner_args.obs_mode, None, faithful=learner_args.faithful)
    env = make_actor_env(actor_args.task, actor_args.obs_mode, None, None, actor_args.intervene,
                         reward=actor_args.reward, reward_audit=actor_args.reward_audit, faithful=actor_args.faithful)
    assert env.unwrapped.faithful and [s.name for s in spec.observation] == list(env.observation_space.spaces)
    assert isinstance(env, RewardModelWrapper)  # the human's key is the reward
    env.close()
    evaluation = make_actor_env("twin-pick-cube", "state", None, None, faithful=True, evaluation=True)
    assert list(evaluation.observation_space.spaces) == ["state"] and evaluation.unwrapped.config.task_reward
    evaluation.close()


def test_sim_passes_reward_to_every_actor_and_the_evaluation_not_the_learner(tmp_path: Path) -> None:
    from actors.actor_env import make_actor_env
    from actors.run import parse_actor_args
    from learners.rewards.reward_model import ClassifierReward
    from supervisor.sim import Sim
    from supervisor.sim_config import build_sim_parser, sim_config
    from tests.test_reward_classifier import constant_classifier

    cls = constant_classifier(tmp_path / "cls", 0.2, size=IMAGE, cameras=("images/front", "images/wrist"))
    out = tmp_path / "s"
    sim = Sim(sim_config(build_sim_parser().parse_args([
        "--task", "twin-pick-cube", "--obs-mode", "pixels", "--image-size", str(IMAGE), "--reward",
        f"classifier:{cls}", "--faithful", "--actors", "2", "--out", str(out)])))
    for i in (0, 1):
        argv = sim.actor_argv(i, "tcp://127.0.0.1:1", "tcp://127.0.0.1:2")
        args = parse_actor_args(argv[argv.index("actor") + 1:])
        assert args.reward == f"classifier:{cls}" and args.faithful
        assert args.reward_audit == out / "reward_audit" / f"actor-{i}"  # each actor audits into the run
    # the actor builds its env with that reward (here without the robot server: the twin in process)
    env = make_actor_env(args.task, args.obs_mode, args.image_size, None, reward=args.reward,
                         reward_audit=args.reward_audit, faithful=args.faithful)
    try:
        assert isinstance(env, RewardModelWrapper) and isinstance(env.model, ClassifierReward)
        assert env.unwrapped.faithful
    finally:
        env.close()
    # the learner computes no reward; the final evaluation counts the run's reward (the classifier's success, the
    # twin's true success reported beside it: actors.evaluation)
    assert "--reward" not in sim.learner_argv(None)
    ev = sim.evaluate_argv(tmp_path / "e.json")
    assert ev[ev.index("--reward") + 1] == f"classifier:{cls}"
    # without --reward the actors get none (the env's)
    plain = Sim(sim_config(build_sim_parser().parse_args(["--task", "twin-pick-cube", "--out", str(tmp_path / "p")])))
    assert "--reward" not in plain.actor_argv(0, "tcp://127.0.0.1:1", None)


def test_sim_refuses_a_reward_its_actors_cannot_use_in_one_line(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from robot_rl.cli import main
    from tests.test_reward_classifier import constant_classifier

    cls = constant_classifier(tmp_path / "cls", 0.2, size=IMAGE)
    out = tmp_path / "run"
    for argv, msg in (
            (["--faithful"], "--faithful: the hardware-faithful env gives no reward"),
            (["--reward", "oracle"], "--reward 'oracle': expected env, human or classifier:DIR"),
            (["--reward", f"classifier:{tmp_path / 'nope'}"], "no such classifier directory"),
            (["--reward", f"classifier:{cls}", "--image-size", str(IMAGE + 8)],
             f"reads {IMAGE}x{IMAGE} frames"),  # a state policy's reward cameras render at the card's size
            (["--reward", "human"], "--reward human: the success key comes from a teleop device")):
        assert main(["sim", "--task", "twin-pick-cube", *argv, "--out", str(out)]) == 1
        err = capsys.readouterr().err
        assert msg in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert not out.exists()


def test_actor_refuses_faithful_without_a_reward_model() -> None:
    from actors.actor_env import make_actor_env
    from robot_rl.errors import ConfigError

    with pytest.raises(ConfigError, match="--faithful: the hardware-faithful env gives no reward"):
        make_actor_env("twin-pick-cube", "state", None, None, faithful=True)


def test_train_faithful_learns_from_the_classifier_and_evaluates_with_the_true_success(tmp_path: Path) -> None:
    """`robot-rl train --faithful --reward classifier:DIR`: the training env is hardware-faithful and wrapped in
    the reward model (its rewards, never the task's); the evaluation env drops the object observation only."""
    from learners.training.config import TrainConfig
    from learners.training.online import LoopConfig, train_online
    from learners.training.train import build_run
    from tests.test_reward_classifier import constant_classifier

    size = 32  # the smallest the learner's conv encoder takes
    cls = constant_classifier(tmp_path / "always", 0.999, size=size, k=2, cameras=("images/front", "images/wrist"))
    cfg = TrainConfig(task="twin-pick-cube", obs_mode="pixels", image_size=size, faithful=True,
                      reward=f"classifier:{cls}", device="cpu", learning_starts=1000, start_steps=100)
    run = build_run(cfg, reward_audit=tmp_path / "audit")
    try:
        assert isinstance(run.env, RewardModelWrapper) and run.env.unwrapped.faithful
        ev = run.eval_env.unwrapped.config
        assert not run.eval_env.unwrapped.faithful and ev.task_reward and ev.scene_resets == "every"
        assert {s.name for s in run.spec.observation} == {"state", "images/front", "images/wrist"}
        episodes = list(train_online(run.env, run.agent, run.online, LoopConfig(total_steps=8, start_steps=100,
                                                                                learning_starts=1000)))
        valid = run.online.valid
        assert run.online.fields["rewards"][valid].tolist() == [0.0, 1.0] * 4
        assert [m["episode_length"] for m in episodes] == [2] * 4
        assert run.env.unwrapped.scene_teleports == 1  # the robot's reset routine ran between the episodes
    finally:
        run.env.close()
        run.eval_env.close()


def test_a_faithful_run_selects_no_privileged_state_from_its_task() -> None:
    from learners.agents.options import AgentFlags, task_layer
    from learners.agents.recipes import Recipe

    assert task_layer(AgentFlags(task="twin-pick-cube"), False)["state_select"][0] == "object"
    assert task_layer(AgentFlags(task="twin-pick-cube", faithful=True), False)["state_select"] == (
        "state[0:3]", "state[5]", "state[12]")
    assert task_layer(AgentFlags(task="twin-pick-cube", faithful=True), True) == task_layer(
        AgentFlags(task="twin-pick-cube"), True)
    recipe = Recipe(state={"state_select": ("object", "state[0:3]")})  # a recipe that selects: the same rule
    assert recipe.overrides("state", faithful=True)["state_select"] == ("state[0:3]",)


class _PlaceholderSuccessEnv(gym.Env):  # type: ignore[type-arg]
    """A hardware-like env: info["success"] is a placeholder False with SUCCESS_UNKNOWN_INFO_KEY, and a reward
    model's verdict (info["reward_success"]) ends each episode on its 3rd step."""

    observation_space = gym.spaces.Dict({"state": gym.spaces.Box(-1, 1, (3,), np.float32)})
    action_space = gym.spaces.Box(-1, 1, (2,), np.float32)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
        self.t = 0
        return {"state": np.zeros(3, np.float32)}, {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self.t += 1
        hit = self.t == 3
        info = {"success": False, SUCCESS_UNKNOWN_INFO_KEY: True, "reward_success": hit}
        return {"state": np.full(3, 0.1 * self.t, np.float32)}, float(hit), hit, False, info


def in_memory_actor(env: Any, chunk_steps: int) -> tuple[Actor, Any, Any]:
    """An Actor stepping `env` (a hardware-like env: no twin robot) over an in-memory transport; returns the actor and
    its learner and actor endpoints (close both when done)."""
    spec = EnvSpec.from_spaces("hw", env.observation_space, env.action_space, control_hz=10.0)
    hub = InMemoryHub(TransportConfig(heartbeat_s=0.05, heartbeat_timeout_s=2.0, hello_retry_s=0.05, linger_ms=100,
                                      poll_ms=10))
    learner_ep = hub.bind_learner(spec)
    actor_ep = hub.connect_actor(spec, "a0")
    actor = Actor(env, actor_ep, ActorConfig(chunk_steps=chunk_steps, seed=1, pace=False, report_every_s=0.01))
    return actor, learner_ep, actor_ep


def test_on_hardware_the_actor_reports_the_reward_models_success_not_the_placeholder(
        monkeypatch: pytest.MonkeyPatch) -> None:
    actor, learner_ep, actor_ep = in_memory_actor(_PlaceholderSuccessEnv(), chunk_steps=3)
    chunks: list[Any] = []
    monkeypatch.setattr(actor, "_queue", chunks.append)
    actor.start()
    for _ in range(9):
        actor.step()
    st = actor.stats()
    actor.close(flush_s=0.1)
    actor_ep.close()
    learner_ep.close()
    assert np.concatenate([c.success for c in chunks]).tolist() == [False, False, True] * 3
    assert [c.stats["success"] for c in chunks if c.stats] == [True] * 3
    assert st["success_rate"] == 1.0 and len(actor.true_successes) == 0  # no placeholder counted as a failure
