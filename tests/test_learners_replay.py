"""Replay: frames stored once, episode boundaries, ring wraparound, RLPD mixing, routing, memory, state."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from learners.replay.buffer import MixedSampler, ReplayBuffer, ReplayEmptyError, concat_batches, route_transition
from robot_rl.episodes import Episode
from robot_rl.errors import ShapeError
from robot_rl.specs import ArraySpec, EnvSpec


def _spec(img: int = 4, cams: int = 1) -> EnvSpec:
    obs = [ArraySpec("state", (2,), "float32")]
    obs += [ArraySpec(f"images/cam{i}", (img, img, 3), "uint8", 0, 255) for i in range(cams)]
    return EnvSpec("r", tuple(sorted(obs, key=lambda s: s.name)), ArraySpec("action", (2,), "float32", -1, 1), 10.0)


def _obs(ep: int, t: int, img: int = 4) -> dict:
    """An observation that encodes (episode, step) in the state and in the image."""
    im = np.full((img, img, 3), (ep * 7 + t) % 256, np.uint8)
    return {"state": np.array([ep, t], np.float32), "images": {"cam0": im}}


def _run_episode(buf: ReplayBuffer, ep: int, length: int, truncate: bool = False) -> None:
    for t in range(length):
        last = t == length - 1
        buf.add(_obs(ep, t), np.array([ep, t], np.float32), float(ep * 1000 + t), _obs(ep, t + 1),
                terminated=last and not truncate, truncated=last and truncate)


def _check_consistent(batch: dict) -> None:
    """Every sampled transition is internally consistent: next_obs is the true successor of obs."""
    s, ns, a = batch["obs"]["state"], batch["next_obs"]["state"], batch["actions"]
    np.testing.assert_array_equal(s, a)                              # obs is the one the action was taken in
    np.testing.assert_array_equal(ns[:, 0], s[:, 0])                 # same episode
    np.testing.assert_array_equal(ns[:, 1], s[:, 1] + 1)             # the next step
    np.testing.assert_array_equal(batch["rewards"], s[:, 0] * 1000 + s[:, 1])
    im, nim = batch["obs"]["images/cam0"][:, 0, 0, 0], batch["next_obs"]["images/cam0"][:, 0, 0, 0]
    np.testing.assert_array_equal(im, (s[:, 0] * 7 + s[:, 1]) % 256)
    np.testing.assert_array_equal(nim, (ns[:, 0] * 7 + ns[:, 1]) % 256)


def test_frames_are_shared_and_episode_end_keeps_its_final_frame() -> None:
    buf = ReplayBuffer(_spec(), capacity=100)
    _run_episode(buf, 0, 5)
    _run_episode(buf, 1, 3, truncate=True)
    assert len(buf) == 8
    assert buf._filled == (5 + 1) + (3 + 1), "an episode of T steps must use T+1 frames"
    batch = buf.gather(np.flatnonzero(buf.valid))
    _check_consistent(batch)
    last = batch["obs"]["state"][:, 1] == 4
    assert last.sum() == 1
    np.testing.assert_array_equal(batch["next_obs"]["state"][last][0], [0, 5])  # the true final obs
    assert batch["terminated"][last][0] and not batch["truncated"][last][0]
    ep1_last = (batch["obs"]["state"][:, 0] == 1) & (batch["obs"]["state"][:, 1] == 2)
    assert batch["truncated"][ep1_last][0] and not batch["terminated"][ep1_last][0]
    np.testing.assert_array_equal(batch["next_obs"]["state"][ep1_last][0], [1, 3])


def test_wraparound_keeps_every_sampled_transition_correct() -> None:
    rng = np.random.default_rng(0)
    buf = ReplayBuffer(_spec(), capacity=13, seed=1)
    for ep in range(60):
        _run_episode(buf, ep, int(rng.integers(1, 9)), truncate=bool(rng.random() < 0.5))
        if len(buf):
            _check_consistent(buf.sample(64))
        # the valid count matches the flags and never exceeds capacity - 1
        assert len(buf) == int(buf.valid.sum()) <= 12
    _check_consistent(buf.gather(np.flatnonzero(buf.valid)))
    # only recent episodes survive
    assert buf.gather(np.flatnonzero(buf.valid))["obs"]["state"][:, 0].min() >= 55


def test_interrupted_stream_starts_a_new_segment() -> None:
    buf = ReplayBuffer(_spec(), capacity=50)
    buf.add(_obs(0, 0), np.array([0, 0], np.float32), 0.0, _obs(0, 1), False, False)
    # the next transition does not continue from (0, 1) although the episode did not end
    buf.add(_obs(0, 5), np.array([0, 5], np.float32), 5.0, _obs(0, 6), False, False)
    buf.add(_obs(0, 6), np.array([0, 6], np.float32), 6.0, _obs(0, 7), False, False)  # continues: shared
    assert len(buf) == 3 and buf._filled == 5
    _check_consistent(buf.gather(np.flatnonzero(buf.valid)))


def test_add_episode_and_shape_errors() -> None:
    spec = _spec()
    obs = [_obs(3, t) for t in range(5)]
    ep = Episode.from_steps(obs, [[3, t] for t in range(4)], [3000 + t for t in range(4)], [0, 0, 0, 1],
                            [0] * 4, intervention=[1, 1, 0, 1])
    buf = ReplayBuffer(spec, capacity=20)
    assert buf.add_episode(ep) == 4 and len(buf) == 4 and buf._filled == 5
    _check_consistent(buf.sample(16))
    demo = ReplayBuffer(spec, capacity=20)
    assert demo.add_episode(ep, only_interventions=True) == 3
    _check_consistent(demo.gather(np.flatnonzero(demo.valid)))
    with pytest.raises(ShapeError, match="state"):
        buf.add({"state": np.zeros(3, np.float32), "images": {"cam0": obs[0]["images"]["cam0"]}}, [0, 0], 0.0,
                obs[1], False, False)
    with pytest.raises(ShapeError, match="uint8"):
        buf.add({"state": np.zeros(2, np.float32), "images": {"cam0": np.zeros((4, 4, 3))}}, [0, 0], 0.0,
                obs[1], False, False)
    with pytest.raises(ShapeError, match="action"):
        buf.add(obs[0], [0, 0, 0], 0.0, obs[1], False, False)
    with pytest.raises(ShapeError, match="keys"):
        buf.add({"state": np.zeros(2, np.float32)}, [0, 0], 0.0, obs[1], False, False)
    with pytest.raises(ReplayEmptyError):
        ReplayBuffer(spec, 10).sample(4)


def test_mixed_sampler_ratio_and_routing() -> None:
    spec = _spec()
    online, demo = ReplayBuffer(spec, 200, seed=0), ReplayBuffer(spec, 200, seed=1)
    sampler = MixedSampler(online, demo, demo_ratio=0.5)
    with pytest.raises(ReplayEmptyError):
        sampler.sample(8)
    # before any demo data, the whole batch comes from the online buffer (and vice versa)
    route_transition(online, demo, _obs(0, 0), [0, 0], 0.0, _obs(0, 1), False, False, intervention=False)
    assert sampler.counts(256) == (256, 0)
    assert len(sampler.sample(10)["rewards"]) == 10
    for t in range(1, 40):
        where = route_transition(online, demo, _obs(0, t), [0, t], float(t), _obs(0, t + 1), t == 39, False,
                                 intervention=10 <= t < 20)
        assert where == (("online", "demo") if 10 <= t < 20 else ("online",))
    assert len(online) == 40 and len(demo) == 10
    assert demo.fields["intervention"][demo.valid].all()
    _check_consistent(demo.gather(np.flatnonzero(demo.valid)))
    for ratio in (0.5, 0.25, 1.0, 0.0):
        sampler = MixedSampler(online, demo, demo_ratio=ratio)
        batch = sampler.sample(256)
        n_demo = round(256 * ratio)
        assert sampler.counts(256) == (256 - n_demo, n_demo)
        # demo rows come last; every demo row is an intervention and lies in steps 10..19
        assert batch["intervention"][256 - n_demo:].all()
        steps = batch["obs"]["state"][256 - n_demo:, 1]
        assert ((steps >= 10) & (steps < 20)).all()
        _check_consistent(batch)
    empty_online = MixedSampler(ReplayBuffer(spec, 10), demo, 0.5)
    assert empty_online.counts(8) == (0, 8)


def test_bytes_per_transition_close_to_one_observation() -> None:
    spec = EnvSpec("mem", (ArraySpec("images/front", (128, 128, 3), "uint8", 0, 255),
                           ArraySpec("images/wrist", (128, 128, 3), "uint8", 0, 255),
                           ArraySpec("state", (19,), "float32")), ArraySpec("action", (7,), "float32", -1, 1), 10.0)
    raw_obs = 2 * 128 * 128 * 3 + 19 * 4
    buf = ReplayBuffer(spec, capacity=600)
    rng = np.random.default_rng(0)
    frame = {"images": {"front": rng.integers(0, 256, (128, 128, 3), np.uint8),
                        "wrist": rng.integers(0, 256, (128, 128, 3), np.uint8)}}
    ep_len = 100
    for i in range(700):  # wraps around; episodes of 100 steps
        t = i % ep_len
        o = {**frame, "state": np.full(19, t, np.float32)}
        n = {**frame, "state": np.full(19, t + 1, np.float32)}
        buf.add(o, np.zeros(7, np.float32), 0.0, n, t == ep_len - 1, False)
    per_transition = buf.nbytes() / len(buf)
    ratio = per_transition / raw_obs
    print(f"replay bytes/transition {per_transition:.0f} vs one raw observation {raw_obs} (ratio {ratio:.4f}); "
          f"float32 obs+next_obs would be {8 * 2 * 128 * 128 * 3 + 2 * 19 * 4} (x{8:.0f})")
    assert len(buf) >= 590
    assert ratio < 1.10


def test_state_round_trip_without_pickle(tmp_path: Path) -> None:
    spec = _spec()
    buf = ReplayBuffer(spec, capacity=30, seed=3)
    for ep in range(4):
        _run_episode(buf, ep, 6)
    path = buf.save(tmp_path / "replay.npz")
    with np.load(path, allow_pickle=False) as z:  # readable without pickle
        assert all(z[k].dtype != object for k in z.files)
    back = ReplayBuffer(spec, capacity=30, seed=99)
    back.load(path)
    assert len(back) == len(buf) and back.total_added == buf.total_added
    a, b = buf.sample(32), back.sample(32)  # same RNG state -> same samples
    np.testing.assert_array_equal(a["obs"]["state"], b["obs"]["state"])
    np.testing.assert_array_equal(a["next_obs"]["images/cam0"], b["next_obs"]["images/cam0"])
    # the stream continues where it left off (the open episode's pending frame is kept)
    _run_episode(back, 9, 3)
    _check_consistent(back.gather(np.flatnonzero(back.valid)))
    with pytest.raises(ShapeError, match="capacity"):
        ReplayBuffer(spec, capacity=31).load(path)
    with pytest.raises(ShapeError, match="spec"):
        ReplayBuffer(_spec(img=5), capacity=30).load(path)


def test_concat_batches() -> None:
    buf = ReplayBuffer(_spec(), 40)
    _run_episode(buf, 0, 10)
    a, b = buf.sample(3), buf.sample(5)
    c = concat_batches([a, b])
    assert c["obs"]["state"].shape == (8, 2) and c["rewards"].shape == (8,)


def _nstep_reference(episodes: list[list[tuple[float, bool, bool]]], n: int
                     ) -> dict[tuple[int, int], tuple[list[float], bool, int]]:
    """(episode, t) -> (the up-to-n rewards, terminated at the last of them, index of the bootstrap frame), by
    walking each stored episode directly."""
    out = {}
    for ep, steps in enumerate(episodes):
        for t in range(len(steps)):
            rewards, term, j = [], False, t
            while j < len(steps) and len(rewards) < n:
                r, te, tr = steps[j]
                rewards.append(r)
                term = te
                j += 1
                if te or tr:
                    break
            out[(ep, t)] = (rewards, term, j)
    return out


@pytest.mark.parametrize("n_step", [1, 3, 5])
def test_n_step_gather_matches_walking_each_episode(n_step: int) -> None:
    """Multi-step rows: rewards of the same episode only, stop at termination, truncation and a broken stream,
    next_obs = the frame after the last step taken, also across the ring's wraparound."""
    rng = np.random.default_rng(n_step)
    buf = ReplayBuffer(_spec(), capacity=37)  # small: the ring wraps several times
    episodes: list[list[tuple[float, bool, bool]]] = []
    for ep in range(12):
        length = int(rng.integers(1, 9))
        end = rng.choice(["terminated", "truncated", "cut"])  # "cut": the stream just stops (end_segment)
        steps = []
        for t in range(length):
            last = t == length - 1
            te, tr = last and end == "terminated", last and end == "truncated"
            r = float(ep * 1000 + t)
            buf.add(_obs(ep, t), np.array([ep, t], np.float32), r, _obs(ep, t + 1), terminated=te, truncated=tr)
            steps.append((r, te, tr))
        if end == "cut":
            buf.end_segment()
        episodes.append(steps)
    ref = _nstep_reference(episodes, n_step)
    batch = buf.gather(np.flatnonzero(buf.valid), n_step=n_step)
    assert len(batch["actions"]) == len(buf) > 10
    for i in range(len(batch["actions"])):
        ep, t = (int(v) for v in batch["obs"]["state"][i])
        rewards, term, j = ref[(ep, t)]
        assert batch["rewards"][i] == rewards[0]
        assert list(batch["next_obs"]["state"][i]) == [ep, j], (ep, t)
        assert bool(batch["terminated"][i]) == term
        if n_step > 1:
            assert batch["n_steps"][i] == len(rewards)
            np.testing.assert_array_equal(batch["n_rewards"][i], rewards + [0.0] * (n_step - len(rewards)))
        assert batch["next_obs"]["images/cam0"][i, 0, 0, 0] == (ep * 7 + j) % 256


def test_n_step_returns_in_the_critic_target() -> None:
    """The agent's target with multi-step rows: sum_j gamma^j r_j + gamma^k (1 - terminated) Q'; a one-step batch
    and the same rows given as n_step=1 multi-step rows train identically."""
    import torch

    from learners.agents.config import AgentConfig
    from learners.agents.sac import SACAgent
    from learners.agents.sac_batch import UpdateBatch, to_update_batch

    spec = EnvSpec("r", (ArraySpec("state", (2,), "float32"),), ArraySpec("action", (2,), "float32", -1, 1), 10.0)
    cfg = AgentConfig(batch_size=8, critic_updates_per_actor_update=1, hidden_dims=(16,), ensemble_size=2,
                      discount=0.9, device="cpu")
    rng = np.random.default_rng(0)
    one = {"obs": {"state": rng.standard_normal((8, 2)).astype(np.float32)},
           "next_obs": {"state": rng.standard_normal((8, 2)).astype(np.float32)},
           "actions": rng.uniform(-1, 1, (8, 2)).astype(np.float32),
           "rewards": rng.standard_normal(8).astype(np.float32), "terminated": rng.random(8) < 0.3}
    multi = {**one, "n_rewards": one["rewards"][:, None].copy(), "n_grasp_penalty": np.zeros((8, 1), np.float32),
             "n_steps": np.ones(8, np.int64)}
    a, b = SACAgent(spec, cfg), SACAgent(spec, cfg)
    ma, mb = a.update(one), b.update(multi)
    assert ma["critic_loss"] == pytest.approx(mb["critic_loss"], rel=1e-6)
    # k steps: the agent's returns and bootstrap weights follow the formula
    nr = np.array([[1.0, 2.0, 4.0], [1.0, 0.0, 0.0], [0.5, 0.5, 0.0]] + [[0.0, 0.0, 0.0]] * 5, np.float32)
    steps = np.array([3, 1, 2, 1, 1, 1, 1, 1])
    term = np.zeros(8, bool)
    term[1] = True
    def split(batch: dict) -> UpdateBatch:  # the agent's batch preparation, before any network runs
        return to_update_batch(batch, a.policy.layout, a.policy.action_dim, a.cfg, a.device)

    parts = split({**one, "terminated": term, "n_rewards": nr, "n_grasp_penalty": np.zeros_like(nr),
                   "n_steps": steps})
    np.testing.assert_allclose(parts.returns[:3].numpy(), [1 + 0.9 * 2 + 0.81 * 4, 1.0, 0.5 + 0.45], rtol=1e-6)
    np.testing.assert_allclose(parts.bootstrap[:3].numpy(), [0.9 ** 3, 0.0, 0.81], rtol=1e-6)
    with pytest.raises(ShapeError, match="n_steps"):
        split({**one, "n_rewards": nr, "n_grasp_penalty": np.zeros_like(nr), "n_steps": steps * 2})
    assert torch.isfinite(parts.returns).all()


def test_takeover_terminated_marks_the_step_before_each_takeover_start() -> None:
    from learners.replay.buffer import takeover_terminated

    human = np.array([0, 0, 1, 1, 0, 1, 0, 0, 1, 1], bool)
    term = np.zeros(10, bool)
    trunc = np.zeros(10, bool)
    out = takeover_terminated(term, trunc, human)
    assert np.flatnonzero(out).tolist() == [1, 4, 7]   # steps 2, 5, 8 start takeovers
    assert not term.any()                              # the input is not modified
    trunc[4] = True                                    # a step that already ended its episode stays as it was
    assert np.flatnonzero(takeover_terminated(term, trunc, human)).tolist() == [1, 7]
    assert not takeover_terminated(term, trunc, np.r_[True, np.zeros(9, bool)]).any()  # starts at step 0: no-op
    with pytest.raises(ShapeError):
        takeover_terminated(term, trunc, human[:5])


def _mc_reference(episodes: list[tuple[list[float], str]], gamma: float) -> dict[tuple[int, int], float | None]:
    """(episode, t) -> the discounted reward sum from t to the episode's end when it terminated, else None."""
    out: dict[tuple[int, int], float | None] = {}
    for ep, (rewards, end) in enumerate(episodes):
        g = 0.0
        for t in reversed(range(len(rewards))):
            g = rewards[t] + gamma * g
            out[(ep, t)] = g if end == "terminated" else None
    return out


@pytest.mark.parametrize("track_first", [True, False])
def test_monte_carlo_returns_match_walking_each_terminated_episode(track_first: bool, tmp_path: Path) -> None:
    """track_returns: rows of terminated episodes carry sum_j gamma^j r_{t+j} to the episode's end; truncated,
    cut and unfinished episodes carry none; the same when tracking starts after the data is in (and after a
    save / load round trip), and across the ring's wraparound."""
    gamma = 0.9
    rng = np.random.default_rng(3)
    buf = ReplayBuffer(_spec(), capacity=41)
    if track_first:
        buf.track_returns(gamma)
    episodes: list[tuple[list[float], str]] = []
    for ep in range(14):
        length = int(rng.integers(1, 9))
        end = str(rng.choice(["terminated", "truncated", "cut", "open"] if ep == 13 else
                             ["terminated", "truncated", "cut"]))
        rewards = []
        for t in range(length):
            last = t == length - 1
            r = float(rng.integers(0, 3))
            buf.add(_obs(ep, t), np.array([ep, t], np.float32), r, _obs(ep, t + 1),
                    terminated=last and end == "terminated", truncated=last and end == "truncated")
            rewards.append(r)
        if end == "cut":
            buf.end_segment()
        episodes.append((rewards, end))
    if not track_first:
        buf.save(tmp_path / "r.npz")
        buf = ReplayBuffer(_spec(), capacity=41)
        buf.track_returns(gamma)
        buf.load(tmp_path / "r.npz")
    ref = _mc_reference(episodes, gamma)
    batch = buf.gather(np.flatnonzero(buf.valid), n_step=3)
    seen_valid = 0
    for i in range(len(batch["actions"])):
        ep, t = (int(v) for v in batch["obs"]["state"][i])
        want = ref[(ep, t)]
        assert bool(batch["mc_valid"][i]) == (want is not None), (ep, t)
        if want is not None:
            assert batch["mc_returns"][i] == pytest.approx(want, rel=1e-6)
            seen_valid += 1
    assert 5 < seen_valid < len(batch["actions"])  # both kinds of rows are there


def test_monte_carlo_returns_after_a_takeover_relabel_and_in_the_sampler() -> None:
    """terminate_last() ends the episode at the policy step before a takeover: its rows get returns; a sampler
    built for an agent with mc_lower_bound tracks both buffers; without it batches carry no returns."""
    from learners.agents.config import AgentConfig
    from learners.replay.buffer import sampler_for

    online, demo = ReplayBuffer(_spec(), 50), ReplayBuffer(_spec(), 50)
    sampler = sampler_for(online, demo, 0.5, AgentConfig(discount=0.5, mc_lower_bound=True))
    for t in range(3):
        online.add(_obs(0, t), np.zeros(2, np.float32), 1.0, _obs(0, t + 1), False, False)
    assert not online.mc_valid[:3].any()
    assert online.terminate_last()
    np.testing.assert_allclose(online.mc_returns[:3], [1.75, 1.5, 1.0])
    _run_episode(demo, 1, 4)
    b = sampler.sample(16)
    assert b["mc_valid"].all() and b["mc_returns"].shape == (16,)
    plain = sampler_for(ReplayBuffer(_spec(), 50), None, 0.5, AgentConfig())
    plain.online.add(_obs(0, 0), np.zeros(2, np.float32), 1.0, _obs(0, 1), True, False)
    assert "mc_returns" not in plain.sample(4)
    with pytest.raises(ShapeError, match="discount"):
        online.track_returns(0.0)


def test_monte_carlo_lower_bound_in_the_critic_target() -> None:
    """mc_lower_bound: target = max(r + gamma^k Q', G) on rows with a known return G; rows without one, and
    agents without the option, keep the TD target; a batch without returns is refused in one line."""
    import torch

    from learners.agents.config import AgentConfig
    from learners.agents.sac import SACAgent

    spec = EnvSpec("r", (ArraySpec("state", (2,), "float32"),), ArraySpec("action", (2,), "float32", -1, 1), 10.0)
    rng = np.random.default_rng(0)
    batch = {"obs": {"state": rng.standard_normal((8, 2)).astype(np.float32)},
             "next_obs": {"state": rng.standard_normal((8, 2)).astype(np.float32)},
             "actions": rng.uniform(-1, 1, (8, 2)).astype(np.float32),
             "rewards": np.zeros(8, np.float32), "terminated": np.zeros(8, bool),
             "mc_returns": np.full(8, 50.0, np.float32), "mc_valid": np.arange(8) < 4}
    floors: dict[bool, torch.Tensor] = {}
    metrics = {}
    for on in (False, True):
        cfg = AgentConfig(batch_size=8, critic_updates_per_actor_update=1, hidden_dims=(16,), ensemble_size=2,
                          discount=0.9, device="cpu", mc_lower_bound=on)
        agent = SACAgent(spec, cfg)
        real = agent._critic_loss

        def spy(*args: torch.Tensor, _real=real, _on=on) -> object:  # type: ignore[no-untyped-def]
            floors[_on] = args[8]  # the lower bound the loss applies to its TD target
            return _real(*args)

        agent._critic_loss = spy
        metrics[on] = agent.update(batch)
    np.testing.assert_array_equal(floors[True].numpy(), [50.0] * 4 + [-np.inf] * 4)
    np.testing.assert_array_equal(floors[False].numpy(), [-np.inf] * 8)
    assert metrics[True]["mc_bound_share"] == pytest.approx(0.5)
    assert "mc_bound_share" not in metrics[False]
    # the target the critic regresses to is lifted: its Q on the bounded rows moves up, far more than on the others
    agent = SACAgent(spec, AgentConfig(batch_size=8, critic_updates_per_actor_update=1, hidden_dims=(16,),
                                       ensemble_size=2, discount=0.9, device="cpu", mc_lower_bound=True,
                                       critic_lr=1e-2))
    for _ in range(200):
        agent.update(batch)
    with torch.no_grad():
        x = torch.cat([torch.as_tensor(batch["obs"]["state"]), torch.as_tensor(batch["actions"])], -1)
        q = agent.critic(x).squeeze(-1).mean(0).numpy()
    assert q[:4].min() > 25.0 and q[4:].max() < q[:4].min() - 10.0, q
    cfg = AgentConfig(batch_size=8, critic_updates_per_actor_update=1, hidden_dims=(16,), device="cpu",
                      mc_lower_bound=True)
    with pytest.raises(ShapeError, match="mc_returns"):
        SACAgent(spec, cfg).update({k: v for k, v in batch.items() if k != "mc_returns"})
