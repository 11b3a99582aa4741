"""A state policy with a classifier reward: the env renders the classifier's cameras (`RobotEnvConfig.reward_cameras`)
into `info["reward_images"]`, never into the observation; `train`, the actor and the forward/backward trainer
configure them from the classifier's card, the classifier's rewards reach the transitions and no frame reaches a
replay buffer or the wire; a card the env cannot serve is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("mujoco")
pytest.importorskip("torch")

from envs.env import RobotEnvConfig, make_twin_env
from learners.rewards.reward_model import (
    ClassifierReward,
    RewardModelWrapper,
    add_reward_cameras,
    camera_shapes_of_env,
    make_reward_model,
    reward_camera_overrides,
)
from robot_rl.errors import ConfigError
from tests.test_reward_classifier import constant_classifier

pytestmark = pytest.mark.filterwarnings("ignore:.*Box observation space m.*:UserWarning")

SIZE = 16
CAMS = ("images/front", "images/wrist")


def test_state_env_renders_reward_cameras_into_info_only() -> None:
    env = make_twin_env("pick_cube", obs_mode="state", image_size=SIZE, reward_cameras=("front", "wrist"),
                        max_episode_steps=20, reset_noise_m=0.0, reset_noise_rad=0.0)
    try:
        assert set(env.observation_space.spaces) == {"state", "object"}  # no images in the observation space
        assert env.reward_image_shapes == {"front": (SIZE, SIZE, 3), "wrist": (SIZE, SIZE, 3)}
        assert camera_shapes_of_env(env) == {"images/front": (SIZE, SIZE, 3), "images/wrist": (SIZE, SIZE, 3)}
        obs, info = env.reset(seed=0)
        assert set(obs) == {"state", "object"}
        frames0 = {k: v.copy() for k, v in info["reward_images"].items()}
        assert set(frames0) == {"front", "wrist"}
        assert all(f.shape == (SIZE, SIZE, 3) and f.dtype == np.uint8 and f.std() > 0 for f in frames0.values())
        # the arm moves down: the wrist camera's view changes with it
        for _ in range(5):
            obs, _, _, _, info = env.step(np.array([0, 0, -1, 0, 0, 0, 0], np.float32))
        assert set(obs) == {"state", "object"} and set(info["reward_images"]) == {"front", "wrist"}
        assert np.abs(info["reward_images"]["wrist"].astype(int) - frames0["wrist"]).sum() > 0
        # the same seed renders the same scene; another seed puts the cube elsewhere: another front frame
        _, again = env.reset(seed=0)
        np.testing.assert_array_equal(again["reward_images"]["front"], frames0["front"])
        _, other = env.reset(seed=1)
        assert np.abs(other["reward_images"]["front"].astype(int) - frames0["front"]).sum() > 0
    finally:
        env.close()
    # without reward cameras a state env renders nothing (no renderer at all) and info has no frames
    plain = make_twin_env("pick_cube", obs_mode="state", image_size=SIZE, max_episode_steps=5)
    try:
        assert plain.cameras is None and plain.reward_image_shapes == {}
        _, info = plain.reset(seed=0)
        assert "reward_images" not in info and "reward_images" not in plain.step(np.zeros(7, np.float32))[4]
    finally:
        plain.close()
    # faithful: the object leaf still leaves the observation, the reward cameras still render
    faithful = make_twin_env("pick_cube", obs_mode="state", image_size=SIZE, reward_cameras=("front",),
                             faithful=True, max_episode_steps=5)
    try:
        assert set(faithful.observation_space.spaces) == {"state"}
        obs, info = faithful.reset(seed=0)
        assert set(obs) == {"state"} and info["reward_images"]["front"].shape == (SIZE, SIZE, 3)
    finally:
        faithful.close()
    with pytest.raises(ConfigError, match=r"reward_cameras=.*must not repeat camera_names"):
        RobotEnvConfig(obs_mode="pixels", reward_cameras=("front",))
    with pytest.raises(ConfigError, match="reward_cameras: the twin has no camera 'top'"):
        make_twin_env("pick_cube", obs_mode="state", reward_cameras=("top",))


def random_classifier_reward(tmp_path: Path, cams: tuple[str, ...]) -> ClassifierReward:
    """A ClassifierReward over `cams` with seeded random (non-constant) weights, gate k=1 and no predicate."""
    import torch

    from learners.rewards.classifier import ClassifierCard, RewardClassifier, load_classifier, save_classifier
    from tests.test_reward_classifier import SMALL

    torch.manual_seed(0)
    model = RewardClassifier({c: (SIZE, SIZE, 3) for c in cams}, SMALL)
    card = ClassifierCard(task="twin-pick-cube", cameras=list(cams), image_size=(SIZE, SIZE), model=SMALL.to_dict(),
                          threshold=0.5, target_precision=0.99, gate={"k": 1, "predicate": []})
    save_classifier(tmp_path / "c", model, card)
    return ClassifierReward(load_classifier(tmp_path / "c"))


def test_the_classifier_reads_the_frames_in_info(tmp_path: Path) -> None:
    """A classifier with random (non-constant) weights gives the same probability for frames in info as for the
    same frames in a pixel observation, and another probability for other frames: it really reads them."""
    reward = random_classifier_reward(tmp_path, CAMS)
    rng = np.random.default_rng(0)
    a = {"front": rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8),
         "wrist": rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8)}
    b = {"front": np.zeros((SIZE, SIZE, 3), np.uint8), "wrist": np.full((SIZE, SIZE, 3), 255, np.uint8)}
    state = {"state": np.zeros(19, np.float32)}
    p_info = reward.prob(state, {"reward_images": a})
    assert p_info == pytest.approx(reward.prob({**state, "images": a}), abs=1e-6)
    assert abs(p_info - reward.prob(state, {"reward_images": b})) > 1e-4
    with pytest.raises(ConfigError, match=r"no camera 'images/front'"):
        reward.prob(state, {})  # neither the observation nor info has the card's cameras


def _train_run(cls: Path, tmp_path: Path, name: str) -> Any:
    from learners.training.config import TrainConfig
    from learners.training.train import build_run

    cfg = TrainConfig(task="twin-pick-cube", obs_mode="state", reward=f"classifier:{cls}", faithful=True,
                      device="cpu", hidden=16, batch_size=8, ensemble=2, learning_starts=4,
                      start_steps=100)
    return build_run(cfg, reward_audit=tmp_path / name)


def test_train_state_policy_gets_its_rewards_from_the_classifier(tmp_path: Path) -> None:
    """`robot-rl train --obs-mode state --reward classifier:DIR`: the card configures the training env's reward
    cameras (its size, its cameras); a classifier that always fires ends every episode at the gate (k = 2) with
    reward 1, one that never fires gives nothing; the replay buffer holds the proprio state only."""
    from learners.training.online import LoopConfig, train_online

    always = constant_classifier(tmp_path / "always", 0.999, size=SIZE, k=2, cameras=CAMS)
    never = constant_classifier(tmp_path / "never", 0.001, size=SIZE, k=2, cameras=CAMS)
    loop = LoopConfig(total_steps=8, start_steps=100, learning_starts=4, updates_per_step=1)
    rows = {}
    for name, cls in (("always", always), ("never", never)):
        run = _train_run(cls, tmp_path, name)
        try:
            assert isinstance(run.env, RewardModelWrapper) and isinstance(run.env.model, ClassifierReward)
            cfg = run.env.unwrapped.config
            assert cfg.reward_cameras == ("front", "wrist") and cfg.image_size == SIZE and cfg.obs_mode == "state"
            assert run.eval_env.unwrapped.config.reward_cameras == ()  # evaluation renders nothing
            assert not run.spec.cameras and [s.name for s in run.spec.observation] == ["state"]  # faithful
            list(train_online(run.env, run.agent, run.online, loop, counters=run.counters))
            valid = run.online.valid
            assert set(run.online.frames) == {"state"}  # nothing else could be stored
            rows[name] = (run.online.fields["rewards"][valid].tolist(),
                          run.online.fields["terminated"][valid].tolist(), run.counters.updates)
        finally:
            run.env.close()
            run.eval_env.close()
    assert rows["always"][:2] == ([0.0, 1.0] * 4, [False, True] * 4)
    assert rows["never"][:2] == ([0.0] * 8, [False] * 8)
    assert rows["always"][2] > 0  # the agent trained on those transitions
    audit = [json.loads(r) for r in (tmp_path / "always" / "positives.jsonl").read_text().splitlines()]
    assert len(audit) == 8 and all((tmp_path / "always" / r["image"]).is_file() for r in audit)  # frames from info


def test_actor_state_mode_classifier_reward_reaches_the_learner_and_no_frame_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from actors.actor import Actor, ActorConfig
    from actors.actor_env import make_actor_env
    from learners.agents.config import rlpd_state_config
    from learners.distributed.learner import Learner, LearnerConfig
    from robot_rl.gym_env import env_spec_of
    from robot_rl.transport import InMemoryHub, TransportConfig
    from tests.test_faithful import capture_wire_frames

    always = constant_classifier(tmp_path / "always", 0.999, size=SIZE, k=2, cameras=CAMS)
    env = make_actor_env("twin-pick-cube", "state", None, None, reward=f"classifier:{always}",
                         reward_audit=tmp_path / "audit", faithful=True)
    assert isinstance(env, RewardModelWrapper) and env.unwrapped.config.reward_cameras == ("front", "wrist")
    rendered: list[bytes] = []
    step = env.step

    def recording_step(action: Any) -> Any:
        out = step(action)
        rendered.extend(np.ascontiguousarray(f).tobytes() for f in out[4]["reward_images"].values())
        return out

    monkeypatch.setattr(env, "step", recording_step)
    captured = capture_wire_frames(monkeypatch)
    spec = env_spec_of(env, "twin-pick-cube")
    assert not spec.cameras
    fast = TransportConfig(heartbeat_s=0.05, heartbeat_timeout_s=2.0, hello_retry_s=0.05, resend_after_s=0.3,
                           linger_ms=100, poll_ms=10)
    hub = InMemoryHub(fast)
    learner_ep = hub.bind_learner(spec)
    agent = rlpd_state_config(hidden_dims=(16, 16), ensemble_size=2, batch_size=8,
                              critic_updates_per_actor_update=1, device="cpu")
    lcfg = LearnerConfig(updates_per_transition=0.25, learning_starts=10_000, max_ahead=1000, publish_every=2,
                         checkpoint_every=10_000, tensorboard=False, log_every_s=1e6, status_every_s=1e6,
                         plot_every_s=1e6, capacity=100, demo_capacity=10, success_window=4)
    learner = Learner(spec, agent, lcfg, learner_ep, tmp_path / "learner")
    actor_ep = hub.connect_actor(spec, "a0")
    actor = Actor(env, actor_ep, ActorConfig(chunk_steps=5, seed=1, pace=False, report_every_s=0.01))
    try:
        actor.start()
        for _ in range(10):
            actor.step()
            learner.step(max_wait_s=0.0)
        actor.close(flush_s=2.0)
        for _ in range(50):
            learner.step(max_wait_s=0.01)
    finally:
        actor_ep.close()
        learner_ep.close()
        env.close()
    n = len(learner.online)
    assert n == learner.received == 10 and set(learner.online.frames) == {"state"}
    valid = learner.online.valid
    assert learner.online.fields["rewards"][valid].tolist() == [0.0, 1.0] * 5  # the classifier's, gated (k = 2)
    assert learner.online.fields["terminated"][valid].tolist() == [False, True] * 5
    assert actor.stats()["success_rate"] == 1.0  # faithful: the classifier's success is what was sent
    wire = b"".join(captured)
    assert len(rendered) == 20 and len(set(rendered)) > 1  # frames were rendered, and they changed
    assert not any(frame in wire for frame in rendered)  # ... and none crossed the link


def test_forward_backward_state_obs_with_classifier_rewards(tmp_path: Path) -> None:
    """--forward-backward with --obs-mode state: each direction's classifier reads the rendered frames. Forward's
    always fires (k = 2: its episode ends at step 2, the guard confirms, backward takes over); backward's never does
    (it runs to the end of the budget). The checkpointed buffers hold no image."""
    from robot_rl.checkpoint import latest_checkpoint, load_checkpoint
    from robot_rl.cli import main as cli_main
    from robot_rl.metrics import read_metrics

    always = constant_classifier(tmp_path / "always", 0.999, size=SIZE, k=2, cameras=CAMS)
    never = constant_classifier(tmp_path / "never", 0.001, size=SIZE, k=2, cameras=("images/front",))
    out = tmp_path / "fb"
    assert cli_main(["train", "--task", "twin-cube-relocate", "--obs-mode", "state", "--forward-backward",
                     "--reward", f"classifier:{always}", "--backward-reward", f"classifier:{never}",
                     "--max-env-steps", "12", "--learning-starts", "1000", "--eval-every", "1000",
                     "--eval-episodes", "1", "--hidden", "16", "--batch-size", "8", "--ensemble", "2",
                     "--out", str(out)]) == 0
    [row] = read_metrics(out / "metrics.jsonl")
    assert row["forward_steps"] == 2 and row["forward_reward_successes"] == 1 and row["handovers"] == 1
    assert row["backward_steps"] == 10 and row["backward_reward_successes"] == 0
    assert row["false_positive_handovers"] == 0
    for where in ("checkpoints", "checkpoints_backward"):
        ckpt = latest_checkpoint(out / where)
        assert ckpt is not None
        groups, _ = load_checkpoint(ckpt)
        names = [k for g in ("replay_online",) for k in groups[g]]
        assert names and not any("images" in k for k in names), names
    assert (out / "reward_audit" / "forward" / "positives.jsonl").is_file()


def test_a_card_the_state_env_cannot_serve_is_refused_in_one_line(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from robot_rl.cli import main

    top = constant_classifier(tmp_path / "top", 0.5, size=SIZE, cameras=("images/top",))
    front = constant_classifier(tmp_path / "front", 0.5, size=SIZE, cameras=("images/front",))
    bare = constant_classifier(tmp_path / "bare", 0.5, size=SIZE, cameras=("front",))
    out = tmp_path / "run"
    for argv, msgs in (
            (["--reward", f"classifier:{top}"], ("--obs-mode state", "the twin has no camera 'top'")),
            (["--reward", f"classifier:{front}", "--image-size", "32"],
             ("reward cameras", "camera 'images/front' is 32x32x3", "expects 16x16x3")),
            (["--reward", f"classifier:{bare}"], ("camera 'front' is not an 'images/NAME' observation path",))):
        assert main(["train", "--task", "twin-pick-cube", "--obs-mode", "state", *argv, "--out", str(out)]) == 1
        err = capsys.readouterr().err
        assert all(m in err for m in msgs) and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert not out.exists()
    # forward/backward: two cards of different sizes (the env renders at the first card's)
    big = constant_classifier(tmp_path / "big", 0.5, size=32, cameras=("images/front",))
    assert main(["train", "--task", "twin-cube-relocate", "--obs-mode", "state", "--forward-backward", "--reward",
                 f"classifier:{front}", "--backward-reward", f"classifier:{big}", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "big/card.json: image_size 32x32, but" in err and "front/card.json is 16x16" in err, err
    assert len(err.strip().splitlines()) == 1 and not out.exists()
    # the actor: the same checks
    from actors.actor_env import make_actor_env

    with pytest.raises(ConfigError, match=r"--reward classifier:.*--obs-mode state.*no camera 'top'"):
        make_actor_env("twin-pick-cube", "state", None, None, reward=f"classifier:{top}")
    with pytest.raises(ConfigError, match=r"reward cameras.*is 32x32x3.*expects 16x16x3"):
        make_actor_env("twin-pick-cube", "state", 32, None, reward=f"classifier:{front}")
    # the overrides themselves: union of two cards' cameras, the first card's size; in pixels mode only the cameras
    # the observation lacks (tests below)
    assert reward_camera_overrides((f"classifier:{front}", f"classifier:{always_cams(tmp_path)}"), "state") == {
        "reward_cameras": ("front", "wrist"), "image_size": SIZE}
    assert reward_camera_overrides((f"classifier:{front}",), "pixels") == {}
    assert reward_camera_overrides(("env", "human"), "state") == {}
    assert make_reward_model("env") is None
    # the one rule the actor, the learner and record-demos apply: the cards' size unless one is named or served
    src = (f"classifier:{front}",)
    assert add_reward_cameras({"image_size": None}, src, "state") == {"reward_cameras": ("front",), "image_size": SIZE}
    assert add_reward_cameras({"image_size": 32}, src, "state") == {"reward_cameras": ("front",), "image_size": 32}
    assert add_reward_cameras({}, src, "state", served_size=True) == {"reward_cameras": ("front",)}
    assert add_reward_cameras({"image_size": 32}, src, "pixels") == {"image_size": 32}


def always_cams(tmp_path: Path) -> Path:
    return constant_classifier(tmp_path / "both", 0.5, size=SIZE, cameras=("images/wrist", "images/front"))


def test_actor_over_a_robot_server_reads_the_served_cameras_for_the_classifier(tmp_path: Path) -> None:
    """`robot-rl actor --robot ADDR --obs-mode state --reward classifier:DIR`: the env reads the server's cameras
    into info (the card's size must be what the server serves); a state-only server is refused in one line."""
    from actors.actor_env import make_actor_env
    from envs.robot_server import make_backend, serve_in_thread

    always = constant_classifier(tmp_path / "always", 0.999, size=SIZE, k=2, cameras=("images/front",))
    with serve_in_thread(lambda: make_backend("twin", "pick_cube", image_size=SIZE)) as handle:
        env = make_actor_env("twin-pick-cube", "state", None, handle.address, reward=f"classifier:{always}")
        try:
            assert env.unwrapped.config.reward_cameras == ("front",) and "images" not in env.observation_space.spaces
            obs, info = env.reset(seed=0)
            assert set(obs) == {"state", "object"} and info["reward_images"]["front"].shape == (SIZE, SIZE, 3)
            steps = [env.step(np.zeros(7, np.float32)) for _ in range(2)]
            assert [(s[1], s[2]) for s in steps] == [(0.0, False), (1.0, True)]
        finally:
            env.close()
    with serve_in_thread(lambda: make_backend("twin", "pick_cube", cameras=False)) as handle, \
            pytest.raises(ConfigError, match=r"--obs-mode state.*serves no cameras"):
        make_actor_env("twin-pick-cube", "state", None, handle.address, reward=f"classifier:{always}")


# ------------------------------------------------------------ pixels mode: a separate camera for the classifier


def test_pixel_env_renders_a_reward_camera_beside_the_observation() -> None:
    """A pixel policy observes front and wrist; `reward_cameras=("side",)` renders the twin's side camera into
    info only. The side frame shows the hand: it changes as the arm moves down, the observation's frames equal what
    an env without the reward camera renders (adding a camera changes nothing the policy sees)."""
    kw = dict(obs_mode="pixels", image_size=SIZE, max_episode_steps=20, reset_noise_m=0.0, reset_noise_rad=0.0)
    env = make_twin_env("pick_cube", reward_cameras=("side",), **kw)
    plain = make_twin_env("pick_cube", **kw)
    try:
        assert set(env.observation_space["images"].spaces) == {"front", "wrist"}
        assert env.reward_image_shapes == {"side": (SIZE, SIZE, 3)}
        assert camera_shapes_of_env(env) == {f"images/{c}": (SIZE, SIZE, 3) for c in ("front", "wrist", "side")}
        obs, info = env.reset(seed=0)
        obs_plain, _ = plain.reset(seed=0)
        assert set(obs["images"]) == {"front", "wrist"} and set(info["reward_images"]) == {"side"}
        for cam in ("front", "wrist"):
            np.testing.assert_array_equal(obs["images"][cam], obs_plain["images"][cam])
        side0 = info["reward_images"]["side"].copy()
        for _ in range(4):
            obs, _, _, _, info = env.step(np.array([0, 0, -1, 0, 0, 0, 0], np.float32))
        assert set(obs["images"]) == {"front", "wrist"}
        assert np.abs(info["reward_images"]["side"].astype(int) - side0).sum() > 0  # the hand came down in view
    finally:
        env.close()
        plain.close()


def test_pixel_mode_reward_cameras_are_the_cards_cameras_the_observation_lacks(tmp_path: Path) -> None:
    three = constant_classifier(tmp_path / "three", 0.999, size=SIZE, k=2,
                                cameras=("images/front", "images/wrist", "images/side"))
    front = constant_classifier(tmp_path / "front", 0.5, size=SIZE, cameras=("images/front",))
    src = (f"classifier:{three}",)
    assert reward_camera_overrides(src, "pixels") == {"reward_cameras": ("side",)}  # no image_size: the env's
    assert reward_camera_overrides(src, "pixels", ("front", "side")) == {"reward_cameras": ("wrist",)}
    assert reward_camera_overrides(src, "pixels", ("front", "wrist", "side")) == {}
    assert reward_camera_overrides((f"classifier:{front}",), "pixels") == {}
    assert add_reward_cameras({"image_size": 32}, src, "pixels") == {"image_size": 32, "reward_cameras": ("side",)}
    kw: dict[str, Any] = {"camera_names": ("side", "front")}  # the env's own cameras count first
    assert add_reward_cameras(kw, src, "pixels", camera_names=("front",))["reward_cameras"] == ("wrist",)
    # the actor's pixel env: front + wrist observed, side read for the classifier (k = 2: reward at step 2)
    from actors.actor_env import make_actor_env

    env = make_actor_env("twin-pick-cube", "pixels", SIZE, None, reward=f"classifier:{three}")
    try:
        assert env.unwrapped.config.reward_cameras == ("side",)
        assert set(env.observation_space["images"].spaces) == {"front", "wrist"}
        env.reset(seed=0)
        assert [env.step(np.zeros(7, np.float32))[1] for _ in range(2)] == [0.0, 1.0]
    finally:
        env.close()
    with pytest.raises(ConfigError, match=r"reward cameras.*'images/front' is 32x32x3.*expects 16x16x3"):
        make_actor_env("twin-pick-cube", "pixels", 32, None, reward=f"classifier:{three}")


def test_the_classifier_reads_the_side_camera_from_info_in_pixels_mode(tmp_path: Path) -> None:
    """A classifier with random weights over front, wrist and side: on a pixel env with the side reward camera its
    probability is the one it gives the same three frames in one observation; another side frame changes it."""
    reward = random_classifier_reward(tmp_path, ("images/front", "images/wrist", "images/side"))
    env = make_twin_env("pick_cube", obs_mode="pixels", image_size=SIZE, reward_cameras=("side",))
    try:
        obs, info = env.reset(seed=0)
        p = reward.prob(obs, info)
        side = info["reward_images"]["side"]
        assert p == pytest.approx(reward.prob({**obs, "images": {**obs["images"], "side": side}}), abs=1e-6)
        assert abs(p - reward.prob(obs, {"reward_images": {"side": 255 - side}})) > 1e-4
    finally:
        env.close()


def test_pixel_actor_over_a_robot_server_observes_the_policy_cameras_and_reads_the_side_one(tmp_path: Path) -> None:
    """`robot-rl robot-server --cameras front,wrist,side` + a pixel actor with a side-camera classifier: the
    observation keeps the policy's two cameras (the server serves three), the classifier reads side from info."""
    from actors.actor_env import make_actor_env
    from envs.robot_server import make_backend, serve_in_thread

    three = constant_classifier(tmp_path / "three", 0.999, size=SIZE, k=2,
                                cameras=("images/front", "images/wrist", "images/side"))
    with serve_in_thread(lambda: make_backend("twin", "pick_cube", image_size=SIZE,
                                              camera_names=("front", "wrist", "side"))) as handle:
        env = make_actor_env("twin-pick-cube", "pixels", None, handle.address, reward=f"classifier:{three}")
        try:
            assert env.unwrapped.config.reward_cameras == ("side",)
            assert set(env.observation_space["images"].spaces) == {"front", "wrist"}
            obs, info = env.reset(seed=0)
            assert set(obs["images"]) == {"front", "wrist"} and info["reward_images"]["side"].shape == (SIZE, SIZE, 3)
            assert [env.step(np.zeros(7, np.float32))[1] for _ in range(2)] == [0.0, 1.0]
        finally:
            env.close()
    # a server without the side camera: refused in one line naming it
    with serve_in_thread(lambda: make_backend("twin", "pick_cube", image_size=SIZE)) as handle, \
            pytest.raises(Exception, match=r"side"):
        make_actor_env("twin-pick-cube", "pixels", None, handle.address, reward=f"classifier:{three}")
