"""learners.replay.frame_align: transitions stored with the frames of their own step (--align-frames)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from learners.agents.config import AgentConfig
from learners.agents.sac import SACAgent
from learners.replay.frame_align import FrameAligner, Transition, align_episode, lag_of_recording, with_images
from robot_rl.episodes import Episode
from robot_rl.errors import ConfigError
from robot_rl.specs import EnvSpec
from tests.test_learners_agent import _FakeImageEnv

CAM = "images/front"


def _obs(scene: int, shown: int) -> dict:
    """The proprio state of step `scene` beside a frame of step `shown` (a late camera: shown < scene)."""
    return {"images": {"front": np.full((2, 2, 3), shown, np.uint8)}, "state": np.full(3, scene, np.float32)}


def _late_episode(length: int, lag: int) -> list[Transition]:
    """An episode whose frames are `lag` steps late: obs t holds the state of step t and the frame of t - lag."""
    return [Transition(_obs(t, max(0, t - lag)), np.full(2, t, np.float32), float(t), _obs(t + 1, max(0, t + 1 - lag)),
                       t == length - 1, False) for t in range(length)]


def _frame(obs: dict) -> int:
    return int(obs["images"]["front"][0, 0, 0])


@pytest.mark.parametrize("lag", [0, 1, 2, 3])
@pytest.mark.parametrize("length", [1, 2, 5, 8])
def test_each_released_step_shows_its_own_scene_where_the_frame_exists(lag: int, length: int) -> None:
    aligner = FrameAligner(lag, [CAM])
    out: list[Transition] = []
    for i, t in enumerate(_late_episode(length, lag)):
        got = aligner.push(t)
        assert aligner.held == min(lag, i + 1)   # each step waits `lag` steps for its frame
        out += got
    out += aligner.flush()
    assert aligner.held == 0
    assert [int(t.action[0]) for t in out] == list(range(length))  # every step once, in order, untouched
    assert [t.reward for t in out] == [float(t) for t in range(length)]
    for t, tr in enumerate(out):
        assert int(tr.obs["state"][0]) == t and int(tr.next_obs["state"][0]) == t + 1  # proprio unchanged
        # the frame of each step's own scene; a frame due after the episode's end is the newest one there is
        newest = max(0, length - lag)
        assert _frame(tr.obs) == min(t, newest) and _frame(tr.next_obs) == min(t + 1, newest)


def test_the_final_rows_repeat_the_newest_frame_and_earlier_next_frames_are_exact() -> None:
    out: list[Transition] = []
    aligner = FrameAligner(2, [CAM])
    for t in _late_episode(6, 2):
        out += aligner.push(t)
    assert len(out) == 4                                             # steps 0..3 released, 4 and 5 held
    out += aligner.flush()
    assert [_frame(t.obs) for t in out] == [0, 1, 2, 3, 4, 4]        # step 5's frame arrives after the end
    assert [_frame(t.next_obs) for t in out] == [1, 2, 3, 4, 4, 4]   # so do steps 5's and 6's
    assert out[-1].terminated


def test_lag_zero_and_no_cameras_pass_through_and_bad_lags_are_refused() -> None:
    t = _late_episode(1, 0)[0]
    assert FrameAligner(0, [CAM]).push(t) == [t]
    assert FrameAligner(2, []).push(t) == [t]                        # state runs: nothing to align
    for bad in (-1, 1.5, True):
        with pytest.raises(ConfigError, match="lag_steps"):
            FrameAligner(bad, [CAM])  # type: ignore[arg-type]


def test_terminate_last_marks_the_newest_held_step() -> None:
    aligner = FrameAligner(1, [CAM])
    assert not aligner.terminate_last()                              # nothing held
    steps = _late_episode(3, 1)
    steps[-1].terminated = False
    aligner.push(steps[0])
    aligner.push(steps[1])
    assert aligner.terminate_last()                                  # step 1 (held) before a takeover at step 2
    out = aligner.push(steps[2]) + aligner.flush()
    assert [t.terminated for t in out] == [True, False]              # step 1, then step 2
    assert not FrameAligner(0, [CAM]).terminate_last()


def test_with_images_copies_only_the_paths_it_replaces() -> None:
    obs = _obs(4, 3)
    new = with_images(obs, {CAM: np.zeros((2, 2, 3), np.uint8)})
    assert _frame(new) == 0 and _frame(obs) == 3                     # the original is not modified
    assert new["state"] is obs["state"]


def test_align_episode_matches_the_streaming_aligner_and_reads_the_recorded_latency() -> None:
    lag, length = 1, 5
    steps = _late_episode(length, lag)
    ep = Episode(observations={CAM: np.stack([s.obs["images"]["front"] for s in steps] +
                                             [steps[-1].next_obs["images"]["front"]]),
                               "state": np.stack([s.obs["state"] for s in steps] + [steps[-1].next_obs["state"]])},
                 actions=np.stack([s.action for s in steps]), rewards=np.zeros(length, np.float32),
                 terminated=np.eye(length, dtype=bool)[-1], truncated=np.zeros(length, bool),
                 intervention=np.zeros(length, bool), success=np.zeros(length, bool))
    aligned = align_episode(ep, lag, [CAM])
    aligner = FrameAligner(lag, [CAM])
    stream = [t for s in steps for t in aligner.push(s)] + aligner.flush()
    rows = aligned.observations[CAM][:, 0, 0, 0].tolist()
    assert rows == [_frame(t.obs) for t in stream] + [_frame(stream[-1].next_obs)] == [0, 1, 2, 3, 4, 4]
    np.testing.assert_array_equal(aligned.observations["state"], ep.observations["state"])
    assert align_episode(ep, 0, [CAM]) is ep
    assert lag_of_recording({"env_kwargs": {"camera_latency_ms": 100.0}}, 10.0) == 1
    assert lag_of_recording({"env_kwargs": {"camera_latency_ms": 200.0}}, 10.0) == 2
    assert lag_of_recording({"seed": 0}, 10.0) == 0 and lag_of_recording({}, 10.0) == 0  # hardware files: unknown


class _LateCameraEnv(_FakeImageEnv):
    """Frames one step late (the frame of step t - 1 beside the state of step t); 6-step episodes."""

    def __init__(self) -> None:  # the fake env's spaces, at another size
        self.observation_space = self._Dict({"images": self._Dict({"front": self._Box(0, 255, (8, 8, 3), np.uint8)}),
                                             "state": self._Box(-np.inf, np.inf, (3,), np.float32)})
        self.action_space = self._Box(-1.0, 1.0, (2,), np.float32)
        self.t = 0

    def _obs(self) -> dict:
        return {"images": {"front": np.full((8, 8, 3), max(0, self.t - 1), np.uint8)},
                "state": np.full(3, self.t, np.float32)}

    def reset(self, seed: int | None = None) -> tuple[dict, dict]:
        self.t = 0
        return self._obs(), {}

    def step(self, action: np.ndarray) -> tuple[dict, float, bool, bool, dict]:
        self.t += 1
        return self._obs(), 0.0, self.t == 6, False, {"intervention": self.t == 4}


@pytest.mark.parametrize("lag", [0, 1])
def test_the_training_loop_stores_frames_on_time_with_a_frame_lag(lag: int) -> None:
    from learners.replay.buffer import ReplayBuffer
    from learners.training.online import LoopConfig, train_online

    env = _LateCameraEnv()
    spec = EnvSpec.from_spaces("late", env.observation_space, env.action_space, 10.0)
    agent = SACAgent(spec, AgentConfig(encoder="conv", conv_channels=(8, 8), image_latent_dim=8, proprio_latent_dim=8,
                                       batch_size=4, hidden_dims=(8, 8), device="cpu"))
    online, demo = ReplayBuffer(spec, 100), ReplayBuffer(spec, 100)
    hist = list(train_online(env, agent, online, LoopConfig(total_steps=12, start_steps=12, learning_starts=50,
                                                            frame_lag_steps=lag), demo=demo))
    assert [h["env_step"] for h in hist] == [6, 12]
    batch = online.gather(np.flatnonzero(online.valid))
    step = batch["obs"]["state"][:, 0].astype(int)
    assert len(online) == 12 and sorted(step.tolist()) == sorted(list(range(6)) * 2)
    frame = batch["obs"][CAM][:, 0, 0, 0].astype(int)
    if lag:
        np.testing.assert_array_equal(frame, step)                           # each step's own frame
        nxt = batch["next_obs"][CAM][:, 0, 0, 0].astype(int)
        np.testing.assert_array_equal(nxt, np.minimum(step + 1, 5))          # the final frame: the newest there is
    else:
        np.testing.assert_array_equal(frame, np.maximum(step - 1, 0))        # as the env returned them
    # the takeover at step 4 relabels step 3 (1-based; 0-based 2) terminal either way, and routes to the demos
    assert sorted(step[batch["terminated"]].tolist()) == [2, 2, 5, 5] and len(demo) == 2


def test_train_takes_the_flag(tmp_path: Path) -> None:
    from learners.training.config import TrainConfig
    from learners.training.flags import build_train_parser, train_config

    cfg = train_config(build_train_parser().parse_args(["--task", "twin-pick-cube", "--align-frames",
                                                  "--out", str(tmp_path)]))
    assert isinstance(cfg, TrainConfig) and cfg.align_frames
    base = ["--task", "twin-pick-cube", "--out", str(tmp_path)]
    assert not train_config(build_train_parser().parse_args(base)).align_frames
