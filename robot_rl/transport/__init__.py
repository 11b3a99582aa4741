"""The transport adapter between actors and the learner: ZeroMQ across hosts, or in memory for tests.

Actor and learner logic use only the two endpoint classes below and never import zmq. Every message goes
through `robot_rl.wire` (msgpack header + raw array frames, never pickle), in both transports.

Learner side (one ROUTER socket, many actors)::

    learner = bind_learner(spec, "tcp://127.0.0.1:5555")          # loopback needs no keys
    for msg in learner.recv(timeout=0.1):                        # list[wire.Transitions]
        replay.insert(msg.actor_id, msg.chunk)                   # arrays are read-only views: copy them in
    learner.publish_weights(version, agent.trainable_state())    # copied; latest wins per actor
    learner.stats().actors["a0"].duplicates                      # per-actor counters
    learner.close()

Actor side (one DEALER socket; all I/O on a background thread, so no call stalls the control loop)::

    actor = connect_actor(spec, "a0", "tcp://127.0.0.1:5555")
    actor.wait_connected(timeout=10.0)                           # SpecMismatchError names differing fields
    ok = actor.send(TransitionChunk.from_steps(obs, act, rew, term, trunc), timeout=0.0)  # False: buffer full
    w = actor.latest_weights()                                   # None, or the newest unseen wire.Weights
    actor.flush(timeout=5.0); actor.close()

Same wiring in one process (the same cores and the same encode/decode over bytes frames)::

    hub = InMemoryHub()
    learner = hub.bind_learner(spec)
    actor = hub.connect_actor(spec, "a0")

Delivery: the actor numbers transitions (seq) and keeps every unacknowledged message in a bounded buffer
(`max_unacked_messages` / `max_unacked_bytes`; `send` returns False when full). The learner acknowledges a
message when `recv` hands it to the caller, drops duplicates by (actor_id, seq), and after a clean learner
restart (close + bind again) the actor re-handshakes and resends what is unacknowledged: every transition is
delivered exactly once. (If a learner process dies between `recv` and sending the ack, those transitions may
be delivered again to its successor: at-least-once across crashes.)

Durable learners acknowledge explicitly: `recv_deliveries` hands messages over without acknowledging them (each
`Delivery` names the actor's session, so a learner can key its own duplicate ledger by (actor_id, session,
seq)), and `ack(deliveries)` acknowledges them once the learner has made them durable::

    batch = learner.recv_deliveries(timeout=0.1)
    for d in batch:
        inbox.write(d.actor_id, d.session, d.msg)                # durable first ...
    learner.ack(batch)                                           # ... then acknowledged

A delivery that is never acknowledged is not handed over again by this endpoint (its seqs count as received);
the actor keeps it buffered and a restarted learner receives it again.

Liveness: heartbeats both ways every `heartbeat_s`; an actor that hears nothing for `heartbeat_timeout_s`
recreates its socket and handshakes again, by itself, while the caller keeps stepping with the last weights.
Malformed, oversized, wrong-version or wrong-spec messages are answered with an ERROR (code + message),
counted per actor and per code, and never raise in the endpoint.

Security: tcp binds/connects to non-loopback addresses need CURVE keys (`robot_rl.keys`) or an explicit
`insecure=True`; otherwise `ConfigError` (`robot_rl.curve.check_address`). With keys the learner runs a ZAP
handler that accepts only the authorized client keys (`robot_rl.curve.serve_curve`); refusals are logged and
counted (`LearnerStats.unauthorized`), and the refused actor fails with `ProtocolError(code="unauthorized")`.

Layout (each module says what it holds; everything public is re-exported here, so import from
`robot_rl.transport`)::

    config.py        TransportConfig
    stats.py         ActorStats, PeerStats, LearnerStats (snapshots)
    cores.py         the I/O-free protocol cores (_SeqSet, _LearnerCore, _ActorCore) and Delivery
    endpoints.py     LearnerEndpoint, ActorEndpoint and the _Driver interface they move frames through
    zmq_drivers.py   the ZeroMQ I/O threads; bind_learner, connect_actor
    memory.py        InMemoryHub (and RawPeer): the same endpoints and cores in one process

The address check and the CURVE/ZAP set-up live in `robot_rl.curve` (shared with the robot server).
"""

from robot_rl.transport.config import TransportConfig
from robot_rl.transport.cores import Delivery
from robot_rl.transport.endpoints import ActorEndpoint, LearnerEndpoint
from robot_rl.transport.memory import InMemoryHub, RawPeer
from robot_rl.transport.stats import ActorStats, LearnerStats, PeerStats
from robot_rl.transport.zmq_drivers import bind_learner, connect_actor

__all__ = [
    "ActorEndpoint", "ActorStats", "Delivery", "InMemoryHub", "LearnerEndpoint", "LearnerStats", "PeerStats",
    "RawPeer", "TransportConfig", "bind_learner", "connect_actor",
]
