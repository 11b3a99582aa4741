"""learners.distributed.learner (distributed learner logic, with learners.distributed.inbox and
learners.distributed.status) and actors.actor
(actor loop) in one process over InMemoryHub: the update-to-data hold, weight versions, duplicates, durability
across a crash, per-actor stats, chunks, weight swaps and pacing. Tiny networks; a fake clock where time matters."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from actors.actor import Actor, ActorConfig
from actors.chunks import ChunkBuilder
from actors.weights import PolicySwap, config_from_weights
from learners.agents.config import rlpd_state_config
from learners.distributed.inbox import Inbox, SeqLedger
from learners.distributed.learner import CONFIG_ARRAY, Learner, LearnerConfig
from robot_rl.run_dir import RunExistsError, latest_run_checkpoint
from robot_rl.specs import ArraySpec, EnvSpec
from robot_rl.transport import Delivery, InMemoryHub, LearnerStats, TransportConfig
from robot_rl.wire import TransitionChunk, Transitions, Weights

SPEC = EnvSpec("toy", (ArraySpec("state", (3,), "float32"),), ArraySpec("action", (2,), "float32", -1.0, 1.0), 10.0)
AGENT = rlpd_state_config(hidden_dims=(16, 16), ensemble_size=2, batch_size=8, critic_updates_per_actor_update=1,
                          device="cpu")
FAST = TransportConfig(heartbeat_s=0.05, heartbeat_timeout_s=2.0, hello_retry_s=0.05, resend_after_s=0.3,
                       linger_ms=100, poll_ms=10)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def lcfg(**kw: Any) -> LearnerConfig:
    base: dict[str, Any] = dict(updates_per_transition=0.5, learning_starts=10, max_ahead=20, publish_every=3,
                                checkpoint_every=10_000, tensorboard=False, log_every_s=1e6, status_every_s=1e6,
                                plot_every_s=1e6, capacity=1000, demo_capacity=100, success_window=4)
    base.update(kw)
    return LearnerConfig(**base)


def make_chunk(t: int, start: float = 0.0, end: str | None = None, success: bool = False,
               intervention: bool = False) -> TransitionChunk:
    obs = [{"state": np.full(3, start + i, np.float32)} for i in range(t + 1)]
    term = [False] * t
    trunc = [False] * t
    if end == "terminated":
        term[-1] = True
    elif end == "truncated":
        trunc[-1] = True
    stats = {"return": float(success), "length": t, "success": success} if end else None
    return TransitionChunk.from_steps(obs, np.full((t, 2), 0.1, np.float32), np.zeros(t), term, trunc,
                                      intervention=[intervention] * t, success=[success and i == t - 1 for i in
                                                                                range(t)], stats=stats)


class FakeEndpoint:
    """Hands over scripted deliveries; records acks, reports and published weights."""

    address = "fake://"

    def __init__(self) -> None:
        self.inbox: list[Delivery] = []
        self.acked: list[tuple[str, str, int]] = []
        self.published: list[tuple[int, dict[str, np.ndarray]]] = []
        self.reported: dict[str, Any] = {}

    def deliver(self, actor_id: str, session: str, seq: int, chunk: TransitionChunk) -> None:
        self.inbox.append(Delivery(Transitions(actor_id, seq, chunk), session))

    def recv_deliveries(self, timeout: float = 0.0, max_messages: int = 64) -> list[Delivery]:
        out, self.inbox = self.inbox[:max_messages], self.inbox[max_messages:]
        return out

    def ack(self, deliveries: Any) -> None:
        self.acked += [(d.actor_id, d.session, d.seq) for d in deliveries]

    def publish_weights(self, version: int, arrays: Any) -> None:
        self.published.append((version, dict(arrays)))

    def report(self, **stats: Any) -> None:
        self.reported.update(stats)

    def stats(self) -> LearnerStats:
        return LearnerStats({}, 0, {}, 0, 0, 0, 0, 0, -1, "")

    def close(self) -> None:
        pass


def drain(learner: Learner, max_steps: int = 10_000) -> None:
    for _ in range(max_steps):
        r = learner.step(max_wait_s=0.0)
        if not r["received"] and not r["updates"]:
            return


# --------------------------------------------------------------------------------------------------- ledger/inbox

def test_seq_ledger_covers_overlaps_and_round_trips() -> None:
    ledger = SeqLedger()
    ledger.add("a", "s", 0, 5)
    ledger.add("a", "s", 10, 12)
    ledger.add("a", "s", 5, 10)
    assert ledger.sessions() == {"a": {"s": [[0, 12]]}}
    assert ledger.covers("a", "s", 3, 12) and not ledger.covers("a", "s", 11, 13)
    assert ledger.overlaps("a", "s", 11, 13) and not ledger.overlaps("a", "t", 0, 1)
    ledger.add("a", "t", 0, 2)
    assert ledger.count() == 14 and ledger.count("a") == 14 and ledger.count("b") == 0
    assert SeqLedger.from_json(json.loads(json.dumps(ledger.to_json()))).sessions() == ledger.sessions()


def test_inbox_round_trip_and_cleanup(tmp_path: Path) -> None:
    inbox = Inbox(tmp_path / "inbox")
    c = make_chunk(3, start=2.0, end="terminated", success=True)
    inbox.write(1, "a0", "s1", 7, c, task="toy")
    inbox.write(2, "a0", "s1", 10, make_chunk(2))
    (tmp_path / "inbox" / "chunk_000000000003.npz").write_bytes(b"torn")  # never acknowledged: skipped
    recs = inbox.records(after=0)
    assert [(r.index, r.actor_id, r.session, r.seq) for r in recs] == [(1, "a0", "s1", 7), (2, "a0", "s1", 10)]
    np.testing.assert_array_equal(recs[0].chunk.observations["state"], c.observations["state"])
    assert recs[0].chunk.stats == {"return": 1.0, "length": 3, "success": True}
    assert inbox.delete_upto(2) == 2
    assert inbox.indices() == [3]


# --------------------------------------------------------------------------------------------------- learner

def test_utd_hold_waits_for_data_and_reports_a_budget(tmp_path: Path) -> None:
    ep = FakeEndpoint()
    learner = Learner(SPEC, AGENT, lcfg(), ep, tmp_path, clock=Clock())
    ep.deliver("a0", "s", 0, make_chunk(8))
    drain(learner)
    assert learner.received == 8 and learner.updates == 0  # before learning_starts
    assert ep.reported["env_step_budget"] == 10 + 0 + 20
    ep.deliver("a0", "s", 8, make_chunk(12, start=8))
    drain(learner)
    assert learner.received == 20
    assert learner.updates == learner.target_updates == 5  # floor(0.5 * (20 - 10))
    for _ in range(20):  # no new data: no update, however often it is asked
        learner.step(max_wait_s=0.0)
    assert learner.updates == 5
    assert ep.reported["env_step_budget"] == 10 + 10 + 20 and ep.reported["env_step"] == 20
    ep.deliver("a0", "s", 20, make_chunk(7, start=20))
    drain(learner)
    assert learner.updates == 8  # floor(0.5 * 17)


def test_weights_are_versioned_and_carry_the_config(tmp_path: Path) -> None:
    ep = FakeEndpoint()
    learner = Learner(SPEC, AGENT, lcfg(publish_every=5), ep, tmp_path, clock=Clock())
    ep.deliver("a0", "s", 0, make_chunk(30))
    drain(learner)
    assert learner.updates == 10
    assert [v for v, _ in ep.published] == [1, 2]  # after updates 5 and 10
    version, arrays = ep.published[-1]
    assert config_from_weights(arrays) == AGENT
    obs = {"state": np.array([0.1, -0.2, 0.3], np.float32)}
    swap = PolicySwap(SPEC, lambda: None)
    swap.load(Weights(version, arrays))
    policy, v = swap.current()
    assert v == 2 and policy is not None
    np.testing.assert_allclose(policy.act(obs, deterministic=True), learner.agent.act(obs, deterministic=True),
                               atol=1e-6)


def test_duplicates_are_dropped_and_still_acknowledged(tmp_path: Path) -> None:
    ep = FakeEndpoint()
    learner = Learner(SPEC, AGENT, lcfg(), ep, tmp_path, clock=Clock())
    c = make_chunk(4)
    ep.deliver("a0", "s1", 0, c)
    ep.deliver("a0", "s1", 0, c)                  # resent after a lost ack
    ep.deliver("a0", "s1", 2, make_chunk(4))      # partial overlap: refused
    ep.deliver("a0", "s2", 0, c)                  # the actor restarted: a new seq space
    drain(learner)
    assert learner.received == 8 and len(learner.online) == 8
    assert learner.duplicates == 2 and learner.actors["a0"].duplicates == 2
    assert ep.acked == [("a0", "s1", 0), ("a0", "s1", 0), ("a0", "s1", 2), ("a0", "s2", 0)]
    assert learner.ledger.sessions() == {"a0": {"s1": [[0, 4]], "s2": [[0, 4]]}}


def test_chunks_with_non_finite_values_are_rejected_not_trained_on(tmp_path: Path) -> None:
    ep = FakeEndpoint()
    learner = Learner(SPEC, AGENT, lcfg(), ep, tmp_path, clock=Clock())
    bad_reward = make_chunk(3)
    bad_reward.rewards.setflags(write=True)
    bad_reward.rewards[1] = np.nan
    bad_obs = make_chunk(3)
    bad_obs.observations["state"][2, 0] = np.inf
    ep.deliver("a0", "s", 0, bad_reward)
    ep.deliver("a0", "s", 3, bad_obs)
    ep.deliver("a0", "s", 6, make_chunk(3))
    drain(learner)
    assert learner.received == 3 and len(learner.online) == 3
    assert learner.rejected == 2 and learner.status()["actors"]["a0"]["rejected"] == 2
    assert len(ep.acked) == 3  # acknowledged: resending them would not make them valid


def test_crash_and_resume_keeps_exactly_the_acknowledged_data(tmp_path: Path) -> None:
    ep = FakeEndpoint()
    a = Learner(SPEC, AGENT, lcfg(checkpoint_every=10), ep, tmp_path, clock=Clock())
    for i in range(3):  # 12 transitions: a checkpoint at 12, inbox cleared
        ep.deliver("a0", "s", 4 * i, make_chunk(4, start=4 * i))
    drain(a)
    assert latest_run_checkpoint(tmp_path) is not None and Inbox(tmp_path / "inbox").indices() == []
    ep.deliver("a0", "s", 12, make_chunk(4, start=12, end="terminated", success=True))
    ep.deliver("a1", "x", 0, make_chunk(3, end="truncated", intervention=True))
    drain(a)
    assert a.received == 19 and len(Inbox(tmp_path / "inbox").indices()) == 2
    updates_before = a.updates
    # crash: no close(); a new process resumes from the checkpoint + inbox
    with pytest.raises(RunExistsError, match="--resume"):
        Learner(SPEC, AGENT, lcfg(checkpoint_every=10), FakeEndpoint(), tmp_path, clock=Clock())
    ep2 = FakeEndpoint()
    b = Learner(SPEC, AGENT, lcfg(checkpoint_every=10), ep2, tmp_path, resume=True, clock=Clock())
    assert b.received == 19 and len(b.online) == 19 and b.replayed_chunks == 2
    assert len(b.demo) == 3 and b.interventions == 3  # the intervention steps are in the demo buffer again
    assert b.episodes == 2 and b.actors["a0"].episodes == 1 and list(b.successes) == [1.0, 0.0]
    assert b.ledger.sessions() == {"a0": {"s": [[0, 16]]}, "a1": {"x": [[0, 3]]}}
    assert b.updates <= updates_before and ep2.published  # restored weights go out at once
    ep2.deliver("a0", "s", 12, make_chunk(4, start=12))  # written but never acked before the crash: resent
    ep2.deliver("a0", "s", 16, make_chunk(2, start=16))
    drain(b)
    assert b.received == 21 and b.duplicates == 1
    b.close()
    ep3 = FakeEndpoint()
    c = Learner(SPEC, AGENT, lcfg(), ep3, tmp_path, resume=True, clock=Clock())
    assert c.received == 21 and len(c.online) == 21 and c.replayed_chunks == 0


def test_resume_without_a_checkpoint_replays_the_inbox(tmp_path: Path) -> None:
    ep = FakeEndpoint()
    a = Learner(SPEC, AGENT, lcfg(), ep, tmp_path, clock=Clock())
    ep.deliver("a0", "s", 0, make_chunk(5))
    drain(a)
    assert latest_run_checkpoint(tmp_path) is None
    with pytest.raises(RunExistsError, match="inbox"):
        Learner(SPEC, AGENT, lcfg(), FakeEndpoint(), tmp_path, clock=Clock())
    b = Learner(SPEC, AGENT, lcfg(), FakeEndpoint(), tmp_path, resume=True, clock=Clock())
    assert b.received == 5 and b.ledger.count() == 5


def test_resume_refuses_another_agent_config(tmp_path: Path) -> None:
    a = Learner(SPEC, AGENT, lcfg(), FakeEndpoint(), tmp_path, clock=Clock())
    a.close()
    with pytest.raises(Exception, match="hidden_dims"):
        Learner(SPEC, AGENT.replace(hidden_dims=(8,)), lcfg(), FakeEndpoint(), tmp_path, resume=True)


def test_per_actor_stats_and_outputs(tmp_path: Path) -> None:
    ep = FakeEndpoint()
    clock = Clock()
    learner = Learner(SPEC, AGENT, lcfg(log_every_s=1.0, status_every_s=1.0), ep, tmp_path, clock=clock)
    ep.deliver("a0", "s", 0, make_chunk(5, end="terminated", success=True))
    ep.deliver("a0", "s", 5, make_chunk(5, end="truncated"))
    ep.deliver("a1", "t", 0, make_chunk(6, end="terminated", success=True, intervention=True))
    drain(learner)
    clock.t = 2.0
    learner.step(max_wait_s=0.0)
    st = json.loads((tmp_path / "status.json").read_text())
    assert st["env_step"] == 16 and st["episodes"] == 3
    assert st["success_rate"] == pytest.approx(2 / 3)
    assert st["actors"]["a0"]["success_rate"] == 0.5 and st["actors"]["a0"]["transitions"] == 10
    assert st["actors"]["a1"]["success_rate"] == 1.0 and st["actors"]["a1"]["interventions"] == 6
    assert st["demo_size"] == 6
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["env_step"] == 16 and rows[-1]["success_rate"] == pytest.approx(2 / 3)
    assert "critic_loss" in rows[-1]
    learner.close()
    assert (tmp_path / "learning_curve.png").is_file()


def test_update_means_average_between_metrics_rows_and_start_over() -> None:
    from learners.distributed.status import UpdateMeans

    means = UpdateMeans()
    assert means.pop() == {}
    means.add({"critic_loss": 1.0, "q_mean": 2})
    means.add({"critic_loss": 3.0, "q_mean": 4})
    assert means.pop() == {"critic_loss": 2.0, "q_mean": 3.0}
    assert means.pop() == {}  # a row without updates carries no stale losses


# --------------------------------------------------------------------------------------------------- actor

class ToyEnv:
    """A 1-D walk: state = [position, step, goal]; success when |position - goal| < 0.5 (terminates); 6 steps."""

    def __init__(self) -> None:
        self.t = 0
        self.pos = 0.0

    def _obs(self) -> dict[str, np.ndarray]:
        return {"state": np.array([self.pos, self.t, 2.0], np.float32)}

    def reset(self, seed: int | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        self.t, self.pos = 0, 0.0
        return self._obs(), {}

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        assert action.shape == (2,) and np.all(np.abs(action) <= 1.0)
        self.t += 1
        self.pos += float(action[0])
        success = abs(self.pos - 2.0) < 0.5
        info = {"success": success, "intervention": self.t == 2, "intervene_action": np.array([0.5, 0.5])}
        return self._obs(), float(success), success, self.t >= 6 and not success, info


def test_chunk_builder_layout() -> None:
    b = ChunkBuilder(SPEC, max_steps=3)
    b.start({"state": np.zeros(3, np.float32)}, episode=4, step=0)
    for i in range(3):
        b.add(np.full(2, i, np.float32), 1.0, False, False, i == 1, False, {"state": np.full(3, i + 1, np.float32)})
    assert b.full
    c = b.take()
    assert c.length == 3 and c.episode == 4 and c.step == 0
    np.testing.assert_array_equal(c.observations["state"][:, 0], [0, 1, 2, 3])
    np.testing.assert_array_equal(c.intervention, [False, True, False])
    b.start({"state": np.full(3, 3, np.float32)}, episode=4, step=3)
    b.add(np.zeros(2, np.float32), 0.0, True, False, False, True, {"state": np.full(3, 9, np.float32)})
    c2 = b.take(stats={"success": True})
    assert c2.step == 3 and c2.stats == {"success": True}
    np.testing.assert_array_equal(c.observations["state"][:, 0], [0, 1, 2, 3])  # the first chunk kept its arrays


def _fill_chunk(b: ChunkBuilder, value: float, steps: int = 3) -> Any:
    b.start({"state": np.full(3, value, np.float32)}, episode=0, step=0)
    for i in range(steps):
        b.add(np.full(2, value, np.float32), value, False, False, False, False,
              {"state": np.full(3, value + i + 1, np.float32)})
    return b.take()


def test_chunk_builder_recycles_array_sets_only_once_nothing_holds_them() -> None:
    import gc

    from robot_rl.errors import ConfigError
    from robot_rl.wire import encode

    b = ChunkBuilder(SPEC, max_steps=3, pool_size=2)
    assert b.sets_allocated == 2  # two sets allocated (and touched) up front
    c0 = _fill_chunk(b, 10.0)
    base0 = id(c0.observations["state"].base)  # an id: holding the array would keep the set lent
    frames = encode(Transitions("a", 0, _fill_chunk(b, 20.0)))  # the 2nd set, now held only by encoded frames
    assert b.sets_allocated == 3  # both pooled sets lent: a fresh, unpooled one, nothing held is overwritten
    c2 = _fill_chunk(b, 30.0)
    np.testing.assert_array_equal(c0.observations["state"][:, 0], [10, 11, 12, 13])
    np.testing.assert_array_equal(np.frombuffer(frames[1], np.float32).reshape(4, 3)[:, 0], [20, 21, 22, 23])
    assert b.sets_allocated == 4
    del frames, c2
    gc.collect()
    c3 = _fill_chunk(b, 40.0)  # written into the unpooled set; its take() finds the 2nd pooled set free
    c4 = _fill_chunk(b, 50.0)  # written into the 2nd pooled set; set 0 is still held by c0: fresh again
    assert b.sets_allocated == 5
    np.testing.assert_array_equal(c0.observations["state"][:, 0], [10, 11, 12, 13])
    np.testing.assert_array_equal(c3.observations["state"][:, 0], [40, 41, 42, 43])
    np.testing.assert_array_equal(c4.observations["state"][:, 0], [50, 51, 52, 53])
    del c0, c3, c4
    gc.collect()
    seen = set()
    for k in range(6):  # chunks consumed one at a time (as an actor whose sends are acked): pooled sets only
        c = _fill_chunk(b, 60.0 + k)
        np.testing.assert_array_equal(c.observations["state"][:, 0], 60.0 + k + np.arange(4))
        seen.add(id(c.observations["state"].base))
        del c
    assert b.sets_allocated == 5 and base0 in seen
    with pytest.raises(ConfigError, match="pool_size"):
        ChunkBuilder(SPEC, max_steps=3, pool_size=0)


def test_chunk_builder_writes_images_and_casts_or_refuses_other_inputs() -> None:
    from robot_rl.errors import ShapeError

    spec = EnvSpec("img", (ArraySpec("images/cam", (4, 5, 3), "uint8"), ArraySpec("state", (3,), "float32")),
                   ArraySpec("action", (2,), "float32", -1.0, 1.0), 10.0)
    b = ChunkBuilder(spec, max_steps=2)
    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 256, (4, 5, 3), dtype=np.uint8) for _ in range(3)]
    b.start({"images": {"cam": frames[0]}, "state": np.arange(3.0)}, episode=0, step=0)  # float64 state: cast
    b.add(np.zeros(2, np.float32), 0.0, False, False, False, False,
          {"images": {"cam": frames[1][::-1]}, "state": [1, 2, 3]})  # a non-contiguous view, a list
    b.add(np.zeros(2, np.float32), 0.0, False, False, False, False,
          {"images": {"cam": frames[2]}, "state": np.ones(3, np.float32)})
    c = b.take()
    np.testing.assert_array_equal(c.observations["images/cam"], np.stack([frames[0], frames[1][::-1], frames[2]]))
    np.testing.assert_array_equal(c.observations["state"], [[0, 1, 2], [1, 2, 3], [1, 1, 1]])
    b.start({"images": {"cam": frames[0]}, "state": np.zeros(3)}, episode=1, step=0)
    for bad in (frames[0][:, :4], frames[0].astype(np.float32)[:3]):  # wrong shape (same or other dtype)
        with pytest.raises(ShapeError, match="images/cam"):
            b.add(np.zeros(2, np.float32), 0.0, False, False, False, False,
                  {"images": {"cam": bad}, "state": [0, 0, 0]})


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_actor_streams_episodes_and_swaps_weights_between_steps(tmp_path: Path, backend: str) -> None:
    """The actor runs the torch policy whichever backend the learner trains with (JAX: published under the torch
    names, learners.agents.jax.agent)."""
    if backend == "jax":
        pytest.importorskip("jax")
    hub = InMemoryHub(FAST)
    learner_ep = hub.bind_learner(SPEC)
    learner = Learner(SPEC, AGENT.replace(backend=backend), lcfg(learning_starts=6, publish_every=2), learner_ep,
                      tmp_path)
    actor_ep = hub.connect_actor(SPEC, "a0")
    actor = Actor(ToyEnv(), actor_ep, ActorConfig(chunk_steps=4, seed=3, pace=False))
    actor.start()
    assert actor.swap.current() == (None, -1)
    for i in range(40):
        if i == 30:  # the loader thread runs at nice +10: on a busy machine give it time to load what was published
            deadline = time.monotonic() + 30.0
            while actor.swap.loads == 0 and time.monotonic() < deadline:
                learner.step(max_wait_s=0.0)
                time.sleep(0.01)
            assert learner.weights_version >= 1 and actor.swap.loads >= 1
        actor.step()
        learner.step(max_wait_s=0.0)
    actor.close(flush_s=2.0)
    drain(learner)
    st = actor.stats()
    assert st["env_steps"] == 40 and st["episodes"] == learner.episodes > 0
    assert learner.received == 40 == len(learner.online)
    assert learner.ledger.sessions() == {"a0": {actor_ep.stats().session: [[0, 40]]}}
    # step 2 of each episode is an intervention: every one the actor made reached the learner (and its demo buffer)
    assert learner.interventions == actor.intervention_steps == len(learner.demo) >= st["episodes"]
    assert st["intervention_rate"] is not None and st["intervention_rate"] > 0
    assert st["weights_version"] >= 1 and st["weights_swaps"] >= 1
    stored = learner.online.actions[: len(learner.online)]
    assert np.any(np.all(stored == 0.5, axis=1))  # the human's action was stored, not the policy's
    first = learner.status()["first_update_s"]  # JAX: the first update's tracing + compilation, reported
    assert (first is None) if backend == "torch" else (isinstance(first, float) and first > 0.0), first
    actor_ep.close()
    learner_ep.close()


class BudgetEndpoint:
    """An actor endpoint that reports a fixed learner budget and records what is sent."""

    spec = SPEC

    def __init__(self, budget: int, received: int, actors: int = 1) -> None:
        self.learner = {"env_step": received, "env_step_budget": budget, "actors": actors, "t": 1.0}
        self.sent: list[TransitionChunk] = []

    def send(self, chunk: TransitionChunk, timeout: float = 0.0) -> bool:
        self.sent.append(chunk)
        return True

    def latest_weights(self) -> Weights | None:
        return None

    def flush(self, timeout: float) -> bool:
        return True

    def report(self, **stats: Any) -> None:
        pass

    state = "connected"
    acked_upto = -1

    def stats(self) -> Any:
        class S:
            state = self.state
            learner = self.learner
            acked_upto = self.acked_upto
        return S()


def test_pacing_stops_at_the_budget_share_and_sends_the_partial_chunk() -> None:
    ep = BudgetEndpoint(budget=110, received=100, actors=2)  # 10 transitions of headroom, 2 actors: 5 each
    actor = Actor(ToyEnv(), ep, ActorConfig(chunk_steps=50, seed=0), spec=SPEC, sleep=lambda s: None)
    calls = {"n": 0}

    def stop_after_a_few_waits() -> bool:  # called every loop and every wait: stop after 3 paused checks
        calls["n"] += int(actor.paused)
        return calls["n"] > 3

    actor.run(stop_after_a_few_waits, max_steps=100)
    assert actor.steps == 5
    assert sum(c.length for c in ep.sent) == 5  # paused with a partial chunk: it went out
    ep.learner = {**ep.learner, "env_step": 105, "env_step_budget": 125}  # the learner took them: 20 headroom
    ep.acked_upto = 4
    calls["n"] = 0
    actor.run(stop_after_a_few_waits, max_steps=100)
    assert actor.steps == 5 + 10


def test_pacing_waits_for_a_first_learner_and_not_for_one_that_went_away() -> None:
    ep = BudgetEndpoint(budget=0, received=0)
    ep.learner = {}  # no report yet
    actor = Actor(ToyEnv(), ep, ActorConfig(chunk_steps=50, seed=0), spec=SPEC, sleep=lambda s: None)
    waits = {"n": 0}

    def stop_after_waits() -> bool:
        waits["n"] += int(actor.paused)
        return waits["n"] > 3

    actor.run(stop_after_waits, max_steps=20)
    assert actor.steps == 0  # never heard from a learner: waits for it
    ep.learner = {"env_step": 0, "env_step_budget": 5, "actors": 1, "t": 1.0}
    waits["n"] = 0
    actor.run(stop_after_waits, max_steps=20)
    assert actor.steps == 5
    ep.state = "connecting"  # the learner went away: keep stepping, the endpoint buffers
    actor.run(max_steps=20)
    actor.close()
    assert actor.steps == 25 and sum(c.length for c in ep.sent) == 25
    assert CONFIG_ARRAY == "meta/agent_config"


# --------------------------------------------------------------------------------------------------- CLIs

def test_learner_refuses_an_existing_run_without_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from robot_rl.cli import main

    a = Learner(SPEC, AGENT, lcfg(), FakeEndpoint(), tmp_path, clock=Clock())
    a.close()  # leaves a checkpoint
    assert main(["learner", "--task", "twin-reach", "--out", str(tmp_path), "--bind", "tcp://127.0.0.1:0"]) == 1
    assert "--resume" in capsys.readouterr().err


def test_learner_cli_agent_options() -> None:
    from learners.distributed.flags import agent_config, build_learner_parser
    from robot_rl.errors import ConfigError

    def cfg(*extra: str) -> Any:
        return agent_config(build_learner_parser().parse_args(["--task", "twin-reach", "--out", "/nonexistent",
                                                               *extra]))

    base = cfg("--no-recipe", "--device", "cpu")  # rlpd with the task defaults (learners.agents.recipes)
    assert (base.ensemble_size, base.critic_updates_per_actor_update, base.device) == (4, 1, "cpu")
    assert (base.hidden_dims, base.batch_size, base.discount, base.n_step) == ((256, 256), 128, 0.95, 5)
    assert cfg().device == "auto"  # cuda when available, as on robot-rl train
    assert base.bc_weight == 30 and base.state_select == ("object", "state[0:3]")  # the task file's, kept
    tuned = cfg()  # the task preset's recipe (none for reach) on the defaults, below explicit flags
    assert tuned.state_select == ("object", "state[0:3]") and tuned.discount == 0.95 and tuned.bc_weight == 30
    assert not tuned.bc_q_filter and not base.bc_q_filter  # reach's gripper is locked open: BC unfiltered
    assert (tuned.hidden_dims, tuned.ensemble_size, tuned.ensemble_subsample) == ((256, 256), 4, 2)
    assert cfg("--hidden", "64,64", "--set", "discount=0.99").discount == 0.99
    assert cfg("--obs-mode", "pixels").state_select == ("state[0:3]", "state[5]", "state[12]")
    c = cfg("--hidden", "64,64", "--ensemble", "2", "--set", "bc_weight=0.5", "--set", "activation=relu")
    assert c.hidden_dims == (64, 64) and c.ensemble_subsample == 2 and c.bc_weight == 0.5 and c.activation == "relu"
    assert cfg("--obs-mode", "pixels").encoder == "conv"
    with pytest.raises(ConfigError, match="unknown AgentConfig field 'no_such_field'"):
        cfg("--set", "no_such_field=1")
    with pytest.raises(ConfigError, match="FIELD=VALUE"):
        cfg("--set", "bc_weight")


def test_learner_cli_prints_and_saves_its_agent_config_and_a_failed_start_does_not_block_the_retry(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mujoco")
    from learners.distributed import process
    from learners.distributed.flags import build_learner_parser, learner_process_config
    from robot_rl.errors import ConfigError

    class StopAtOnce(Learner):  # start up, then stop: close() writes the final checkpoint
        @property
        def done(self) -> bool:
            return True

    monkeypatch.setattr(process, "Learner", StopAtOnce)

    def run_learner(argv: list[str]) -> int:  # `robot-rl learner ARGV` through the library: a refusal raises
        return process.run_learner_process(learner_process_config(build_learner_parser().parse_args(argv)))

    out = tmp_path / "run"
    argv = ["--task", "twin-reach", "--out", str(out), "--bind", "tcp://127.0.0.1:0", "--no-tensorboard", "--quiet",
            "--hidden", "32,32", "--ensemble", "2", "--batch", "32"]
    with pytest.raises(ConfigError, match="'nosuch'"):  # refused while the agent is built, after --out was made
        run_learner([*argv, "--set", "state_select=nosuch"])
    assert out.is_dir() and not (out / "agent_config.json").exists()
    assert run_learner([*argv, "--set", "n_step=3"]) == 0  # the same --out, no --resume
    printed = [ln for ln in capsys.readouterr().out.splitlines() if "agent config" in ln]
    assert len(printed) == 1 and printed[0].startswith("learner: agent config") and "n_step=3" in printed[0]
    saved = json.loads((out / "agent_config.json").read_text())
    assert (saved["n_step"], saved["hidden_dims"], saved["discount"]) == (3, [32, 32], 0.95)  # --set, flag, defaults
    assert latest_run_checkpoint(out) is not None
    # resumed: the checkpoint's config is the run's, whatever the flags say now; printed and saved the same way
    assert run_learner([*argv, "--set", "n_step=5", "--resume"]) == 0
    printed = [ln for ln in capsys.readouterr().out.splitlines() if "agent config" in ln]
    assert len(printed) == 1 and "n_step=3" in printed[0]
    assert json.loads((out / "agent_config.json").read_text()) == saved


@pytest.mark.parametrize("takeover_terminal", [True, False])
def test_learner_stores_the_step_before_a_takeover_as_terminal(tmp_path: Path, takeover_terminal: bool) -> None:
    ep = FakeEndpoint()
    learner = Learner(SPEC, AGENT, lcfg(takeover_terminal=takeover_terminal), ep, tmp_path, clock=Clock())
    obs = [{"state": np.full(3, i, np.float32)} for i in range(7)]
    human = [False, False, True, True, False, True]  # takeovers start at steps 2 and 5
    chunk = TransitionChunk.from_steps(obs, np.zeros((6, 2), np.float32), np.zeros(6), [False] * 6,
                                       [False] * 5 + [True], intervention=human, success=[False] * 6)
    ep.deliver("a0", "s", 0, chunk)
    drain(learner)
    batch = learner.online.gather(np.flatnonzero(learner.online.valid))
    ended = sorted(int(s) for s in batch["obs"]["state"][batch["terminated"], 0])
    assert ended == ([1, 4] if takeover_terminal else [])
    assert len(learner.online) == 6 and len(learner.demo) == 3 and not learner.demo.fields["terminated"].any()
    np.testing.assert_array_equal(batch["next_obs"]["state"][:, 0], batch["obs"]["state"][:, 0] + 1)
    learner.close()


def test_status_says_the_first_update_is_compiling_while_it_blocks(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """With compile on, status.json says `compiling` before the first update (which blocks the loop for up to a
    minute) and stops saying it after; `robot-rl sim` shows that instead of a rate of 0."""
    from learners.agents import sac

    monkeypatch.setattr(sac.torch, "compile", lambda fn, *a, **k: fn)  # the flag's path, not a real compile
    learner = Learner(SPEC, AGENT.replace(compile=True), lcfg(), ep := FakeEndpoint(), tmp_path, clock=Clock())
    seen: list[Any] = []
    update = learner.agent.update

    def spy(batch: Any) -> Any:
        seen.append(json.loads((tmp_path / "status.json").read_text())["compiling"])
        return update(batch)

    monkeypatch.setattr(learner.agent, "update", spy)
    ep.deliver("a0", "s", 0, make_chunk(14))
    drain(learner)
    assert learner.updates == 2 and seen[0] is True  # written before the first update
    assert learner.status()["compiling"] is False  # and no longer said once it is done


def test_pacing_between_episodes_never_pauses_mid_episode() -> None:
    """Hardware pacing (pace_mid_episode=False): with 2 transitions of headroom the actor still finishes its
    6-step episode (a robot is never left waiting mid-motion), then waits before the next episode's first step;
    pacing between steps stops after 2."""
    def run(mid_episode: bool) -> Actor:
        ep = BudgetEndpoint(budget=102, received=100)
        actor = Actor(ToyEnv(), ep, ActorConfig(chunk_steps=50, seed=0, pace_mid_episode=mid_episode), spec=SPEC,
                      sleep=lambda s: None)
        waits = {"n": 0}

        def stop_after_waits() -> bool:
            waits["n"] += int(actor.paused)
            return waits["n"] > 3

        actor.run(stop_after_waits, max_steps=100)
        return actor

    per_step, per_episode = run(True), run(False)
    assert per_step.steps == 2 and per_step.ep_step == 2
    assert per_episode.steps == 6 and per_episode.episodes == 1 and per_episode.ep_step == 0


@pytest.mark.parametrize("mode", ["hold", "continue"])
def test_learner_loss_hold_or_continue(mode: str) -> None:
    """The learner goes silent after 3 steps of a 1 Hz loop: 'hold' steps on for learner_loss_hold_s (5 s), then
    takes no step until it is back, and resumes; 'continue' steps on with the last weights throughout."""
    now = [0.0]

    class ClockedEnv(ToyEnv):
        def step(self, action: np.ndarray) -> Any:
            now[0] += 1.0  # one control step: 1 s
            return super().step(action)

    def sleep(s: float) -> None:
        now[0] += s

    ep = BudgetEndpoint(budget=10**6, received=0)
    actor = Actor(ClockedEnv(), ep, ActorConfig(chunk_steps=50, seed=0, pace=False, on_learner_loss=mode,
                                                learner_loss_hold_s=5.0), spec=SPEC, clock=lambda: now[0],
                  sleep=sleep)
    actor.run(max_steps=3)
    ep.state = "connecting"  # the learner is gone
    t_lost = now[0]
    waited = {"n": 0}

    def back_after_a_while() -> bool:
        waited["n"] += 1
        if now[0] - t_lost > 30.0:
            ep.state = "connected"  # it is back
        return now[0] - t_lost > 60.0

    actor.run(back_after_a_while, max_steps=20)
    if mode == "hold":
        assert actor.steps == 3 + 20 and actor.held_for_learner_s > 20.0
        assert actor.stats()["held_for_learner_s"] == pytest.approx(actor.held_for_learner_s, abs=1e-3)
    else:
        assert actor.steps == 3 + 20 and actor.held_for_learner_s == 0.0 and now[0] - t_lost == pytest.approx(20.0)


def test_actor_defaults_per_backend() -> None:
    """`robot-rl actor`'s auto choices: the twin paces between steps, warms up at random and acts on without the
    learner; hardware holds before the first weights, paces only between episodes and holds without the learner;
    flags win."""
    from actors.run import actor_config, parse_actor_args

    base = ["--task", "twin-reach"]
    twin = actor_config(parse_actor_args(base), "twin")
    assert (twin.warmup, twin.pace, twin.pace_mid_episode, twin.on_learner_loss) == ("random", True, True, "continue")
    hw = actor_config(parse_actor_args(base), "franky")
    assert (hw.warmup, hw.pace, hw.pace_mid_episode, hw.on_learner_loss) == ("hold", True, False, "hold")
    assert hw.learner_loss_hold_s == 10.0
    off = actor_config(parse_actor_args([*base, "--no-pace", "--on-learner-loss", "continue"]), "franky")
    assert off.pace is False and off.on_learner_loss == "continue"
    step = actor_config(parse_actor_args([*base, "--pace", "step", "--learner-loss-hold-s", "3"]), "ros2")
    assert step.pace_mid_episode is True and step.learner_loss_hold_s == 3.0


def test_the_offline_phase_trains_on_the_demos_and_publishes_the_first_weights(tmp_path: Path) -> None:
    """LearnerConfig.offline_updates: before any transition arrives, the learner trains on the demos alone and
    publishes those weights (version 1); the online schedule starts from zero updates; a resumed run skips it;
    `robot-rl learner --offline-updates` without demos is refused."""
    from learners.distributed.flags import build_learner_parser, learner_process_config
    from robot_rl.errors import ConfigError

    demos = [make_chunk(12, start=0.1 * k, end="terminated", success=True, intervention=True) for k in range(3)]
    ep = FakeEndpoint()
    fresh = Learner(SPEC, AGENT, lcfg(), FakeEndpoint(), tmp_path / "fresh", demos=demos, clock=Clock())
    learner = Learner(SPEC, AGENT, lcfg(offline_updates=30), ep, tmp_path / "off", demos=demos, clock=Clock())
    assert learner.offline_updates == 30 and learner.updates == 0 and learner.target_updates == 0
    assert [v for v, _ in ep.published] == [1]  # published at start, before any online data
    first = ep.published[0][1]
    before = fresh.weights_arrays()
    changed = [k for k in first if k in before and first[k].dtype.kind == "f" and not np.allclose(first[k], before[k])]
    assert changed, "the offline phase changed no policy weight"
    fresh.close()
    learner.checkpoint()
    learner.close()
    again = Learner(SPEC, AGENT, lcfg(offline_updates=30), FakeEndpoint(), tmp_path / "off", clock=Clock(),
                    resume=True)
    assert again.offline_updates == 0  # resumed: the checkpoint already holds the offline-trained agent
    again.close()
    args = build_learner_parser().parse_args(["--task", "twin-reach", "--out", str(tmp_path / "x"),
                                              "--offline-updates", "100"])
    with pytest.raises(ConfigError, match="--offline-updates needs --demos"):
        learner_process_config(args)
