"""`robot-rl actor`: one actor process (actors.actor over a ZeroMQ endpoint), or a policy evaluation.

Without --robot it runs the task's MuJoCo twin in process; with --robot it drives the env over a robot server
(`robot-rl robot-server`, RemoteRobot). Until the learner's first weights arrive it holds the pose (zero
actions), or acts randomly where that is safe (--warmup: by default random on the twin, in process or served,
and hold on any other backend, i.e. hardware; `--warmup random` opts in), then acts with the newest weights
(swapped between control steps), streams transitions, keeps running while the learner is away
and reconnects by itself. Stops on Ctrl-C / SIGTERM (flushing what the learner has not acknowledged, bounded by
--flush-timeout) or after --max-steps / --max-episodes. With --stats-out it writes its final stats as JSON.

--faithful runs the env hardware-faithful (envs.env.FAITHFUL: no object observation, no reward or termination from
the task's success, no teleport after the first reset; the true success stays in this process, see actors.actor);
the reward must then come from a reward model (a classifier or a human). With --evaluate it only drops the object
observation (evaluation episodes still start from a seeded, teleported scene and report the true success).

--evaluate CKPT runs `--episodes` deterministic episodes with the policy of a learner checkpoint (a checkpoint
directory or a run's checkpoints/ directory: its newest) instead, prints the success rate and writes --summary.

Usage::

    robot-rl actor --task twin-pick-cube --learner tcp://127.0.0.1:5555 --actor-id a0 --obs-mode state
    robot-rl actor --task twin-pick-cube --learner tcp://127.0.0.1:5555 --robot tcp://127.0.0.1:5560
    robot-rl actor --task twin-pick-cube --evaluate runs/pick/checkpoints --episodes 20 --summary eval.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from actors.actor import Actor, ActorConfig, evaluate
from robot_rl.errors import ConfigError
from robot_rl.gym_env import env_spec_of
from robot_rl.presets import PRESETS, get_preset
from robot_rl.specs import EnvSpec


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="robot-rl actor", description=__doc__.split("\n\n")[0])
    p.add_argument("--task", required=True, help=f"task preset ({', '.join(PRESETS)})")
    p.add_argument("--learner", default="tcp://127.0.0.1:5555", help="the learner's address")
    p.add_argument("--robot", default=None, help="robot server address (default: the twin in this process)")
    p.add_argument("--actor-id", default=None, help="unique name of this actor (default: host-pid)")
    p.add_argument("--obs-mode", default="state", choices=("state", "pixels"), help="observation mode")
    p.add_argument("--image-size", type=int, default=None, help="camera image size (pixels mode)")
    p.add_argument("--seed", type=int, default=0, help="seed of the first reset and of the random warm-up")
    p.add_argument("--task-config", default=None,
                   help="with --robot: a task config file (robot-rl safety-box record) whose box the env clips to")
    p.add_argument("--warmup", default="auto", choices=("auto", "hold", "random"),
                   help="before the first weights: hold the pose or act randomly (auto: random on the twin only)")
    p.add_argument("--chunk-steps", type=int, default=ActorConfig().chunk_steps,
                   help="send transitions at every episode end and at least every N steps")
    p.add_argument("--no-pace", action="store_true",
                   help="never wait for the learner's budget (hardware; the sim default paces to the learner)")
    p.add_argument("--intervene", default=None, choices=("scripted",),
                   help="human-in-the-loop interventions: 'scripted' = the twin's scripted operator (HIL-SERL)")
    p.add_argument("--faithful", action="store_true",
                   help="hardware-faithful twin: proprio + cameras only, no task reward, no teleports after the first")
    p.add_argument("--reward", default="env",
                   help="env (the env's reward), classifier:DIR (a trained reward classifier, gated) or human (the "
                        "teleop device's success key; needs --intervene); --faithful needs classifier:DIR or human")
    p.add_argument("--reward-audit", type=Path, default=None,
                   help="where positives of a classifier/human reward are logged (default: reward_audit/ACTOR_ID)")
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many env steps (0: never)")
    p.add_argument("--max-episodes", type=int, default=0, help="stop after this many episodes (0: never)")
    p.add_argument("--flush-timeout", type=float, default=5.0, help="seconds to wait for acks when stopping")
    p.add_argument("--stats-out", type=Path, default=None, help="write the final stats here (JSON)")
    p.add_argument("--keys", default=None, help="CURVE client key directory (robot_rl.keys) for non-loopback")
    p.add_argument("--insecure", action="store_true", help="allow a non-loopback learner without keys")
    p.add_argument("--heartbeat", type=float, default=1.0, help="heartbeat interval (s)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    e = p.add_argument_group("evaluation")
    e.add_argument("--evaluate", type=Path, default=None, help="evaluate this checkpoint instead of acting")
    e.add_argument("--episodes", type=int, default=20, help="evaluation episodes")
    e.add_argument("--eval-seed", type=int, default=10_000, help="seed of the first evaluation episode")
    e.add_argument("--summary", type=Path, default=None, help="write the evaluation result here (JSON)")
    return p


def _backend_of(env: Any) -> str:
    """'twin' for the in-process twin or a robot server serving the twin, else the served backend's name."""
    robot = getattr(getattr(env, "unwrapped", env), "robot", None)
    info = getattr(robot, "info", None)
    if isinstance(info, dict):  # a RemoteRobot: what the server serves
        return str(info.get("backend", ""))
    return "twin" if type(robot).__name__ == "TwinRobot" else type(robot).__name__


def make_actor_env(task: str, obs_mode: str, image_size: int | None, robot: str | None,
                   intervene: str | None = None, seed: int = 0, reward: str = "env",
                   reward_audit: Path | None = None, task_config: str | None = None, faithful: bool = False,
                   evaluation: bool = False) -> Any:
    """The env an actor steps: the twin in process, or a RobotEnv over a robot server (`robot`); with a
    classifier or human `reward`, wrapped in learners.rewards.reward_model.RewardModelWrapper (outermost); `task_config`
    (a file from `robot-rl safety-box record`) replaces the task's box in the env over a robot server.
    `faithful`: the hardware-faithful mode (envs.env.FAITHFUL; for an `evaluation` env only its observation: no
    object state). A classifier `reward` in state mode: the env renders the card's cameras (at the card's size, or
    `image_size`; over a robot server at the size it serves) into info["reward_images"], never into the
    observation (learners.rewards.reward_model.reward_camera_overrides). A faithful acting env needs a reward model
    (`reward` classifier:DIR or human): ConfigError for 'env', whose reward would be 0 on every step."""
    from envs.env import FAITHFUL
    from envs.presets import make_env, twin_task
    from learners.rewards.reward_model import (
        RewardModelWrapper,
        camera_shapes_of_env,
        env_overrides,
        make_reward_model,
        parse_reward_source,
        reward_camera_overrides,
    )

    kind, _ = parse_reward_source(reward)
    if kind == "human" and intervene is None:
        raise ConfigError("--reward human: the success key comes from a teleop device; add --intervene DEVICE")
    if faithful and not evaluation and kind == "env":
        raise ConfigError("--faithful: the hardware-faithful env gives no reward (no Task.success); pass --reward "
                          "classifier:DIR (robot-rl train-classifier) or --reward human (with --intervene)")
    overrides = env_overrides(reward)
    if faithful:
        overrides.update({"object_obs": False} if evaluation else FAITHFUL)
    cams = {} if evaluation else reward_camera_overrides((reward,), obs_mode)
    if cams:  # state mode: the env renders the card's cameras into info for the classifier, never the observation
        overrides["reward_cameras"] = cams["reward_cameras"]
        if image_size is None and robot is None:  # a robot server: the size it serves (checked against the card)
            image_size = cams["image_size"]
    try:
        if robot is None:
            env = make_env(task, obs_mode=obs_mode, image_size=image_size, **overrides)
        else:
            from envs.remote import make_remote_env

            the_task: Any = twin_task(task)
            if task_config is not None:
                from envs.hardware.safety_box import load_task_config

                the_task = load_task_config(task_config)
            env = make_remote_env(robot, task=the_task, obs_mode=obs_mode, image_size=image_size, **overrides)
    except ConfigError as err:
        if not cams:
            raise
        raise ConfigError(f"--reward {reward} with --obs-mode state (the env renders the card's cameras): {err}",
                          ) from None
    if intervene == "scripted":
        from envs.twin.scripted_human import ScriptedHuman, ScriptedHumanConfig
        from envs.wrappers import InterventionWrapper

        human = ScriptedHumanConfig(task=twin_task(task), seed=seed, press_success=kind == "human")
        env = InterventionWrapper(env, ScriptedHuman(human))
    try:
        where = (f"the actor's {task} reward cameras (--obs-mode state renders the classifier's cameras; "
                 f"--image-size)" if cams else f"the actor's {task} observation (--obs-mode {obs_mode}, --image-size)")
        model = make_reward_model(reward, camera_shapes_of_env(env), reward_audit, where=where)
    except Exception:
        env.close()
        raise
    return env if model is None else RewardModelWrapper(env, model)


def _set_threads(n: int) -> None:
    if n > 0:
        import torch

        torch.set_num_threads(n)


def run_evaluation(args: argparse.Namespace) -> int:
    """--evaluate: deterministic episodes with a checkpoint's policy."""
    import numpy as np

    from learners.agents.policy import AgentConfig, build_policy
    from robot_rl.checkpoint import latest_checkpoint, load_checkpoint

    path = Path(args.evaluate)
    if not (path / "meta.json").is_file():
        found = latest_checkpoint(path) or latest_checkpoint(path / "checkpoints")
        if found is None:
            raise ConfigError(f"--evaluate {path}: no checkpoint there (expected a ckpt_* directory, a checkpoints/ "
                              f"directory or a run directory)")
        path = found
    groups, meta = load_checkpoint(path)
    if not isinstance(meta.get("agent_config"), dict) or "agent" not in groups:
        raise ConfigError(f"{path}: not a learner checkpoint (no agent group / agent_config)")
    cfg = AgentConfig.from_dict(meta["agent_config"]).replace(device="cpu")
    obs_mode = args.obs_mode
    env = make_actor_env(args.task, obs_mode, args.image_size, args.robot, faithful=args.faithful, evaluation=True)
    try:
        spec = env_spec_of(env, args.task)
        if isinstance(meta.get("spec"), dict):
            diff = [f for f in spec.diff(EnvSpec.from_dict(meta["spec"])) if f != "task"]
            if diff:
                raise ConfigError(f"{path} was trained on another spec (differs in {diff}); pass the run's "
                                  f"--obs-mode / --image-size")
        policy = build_policy(spec, cfg, device="cpu")
        prefix = "policy/"
        params = {k[len(prefix):]: np.array(v) for k, v in groups["agent"].items() if k.startswith(prefix)}
        policy.load_trainable_state({k: params[k] for k in policy.trainable_names() if k in params})
        t0 = time.monotonic()
        result = evaluate(env, policy, args.episodes, seed=args.eval_seed, deterministic=True)
    finally:
        env.close()
    result.update(checkpoint=str(path), env_step=int(meta.get("counters", {}).get("env_step", -1)),
                  updates=int(meta.get("counters", {}).get("updates", -1)), task=args.task,
                  eval_seconds=round(time.monotonic() - t0, 2))
    print(f"actor: evaluated {path.name} (env_step {result['env_step']}): success rate "
          f"{result['success_rate']:.2f} over {args.episodes} deterministic episodes, mean return "
          f"{result['return']:.3f}", flush=True)
    if args.summary is not None:
        args.summary.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.summary.with_name(f".{args.summary.name}.tmp")
        tmp.write_text(json.dumps(result, indent=1))
        tmp.replace(args.summary)
    return 0


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    _set_threads(args.threads)
    get_preset(args.task)  # UnknownTaskError early
    if args.evaluate is not None:
        return run_evaluation(args)
    actor_id = args.actor_id or f"{socket.gethostname()}-{os.getpid()}"
    from robot_rl.transport import TransportConfig, connect_actor

    keys = None
    if args.keys is not None:
        from robot_rl.keys import ClientKeys

        keys = ClientKeys.from_dir(args.keys)
    audit = args.reward_audit if args.reward_audit is not None else Path("reward_audit") / actor_id
    env = make_actor_env(args.task, args.obs_mode, args.image_size, args.robot, args.intervene, args.seed,
                         reward=args.reward, reward_audit=audit, task_config=args.task_config,
                         faithful=args.faithful)
    if args.faithful:
        print(f"actor {actor_id}: hardware-faithful env: rewards and successes sent to the learner come from "
              f"--reward {args.reward}, never from the task's true success", file=sys.stderr, flush=True)
    spec = env_spec_of(env, args.task)
    tcfg = TransportConfig(heartbeat_s=args.heartbeat, heartbeat_timeout_s=5 * args.heartbeat)
    endpoint = connect_actor(spec, actor_id, args.learner, tcfg, keys=keys, insecure=args.insecure)
    warmup = args.warmup if args.warmup != "auto" else ("random" if _backend_of(env) == "twin" else "hold")
    cfg = ActorConfig(chunk_steps=args.chunk_steps, seed=args.seed, pace=not args.no_pace, warmup=warmup)
    actor = Actor(env, endpoint, cfg)
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    prev_term = signal.signal(signal.SIGTERM, _on_signal)
    prev_int = signal.signal(signal.SIGINT, _on_signal)
    print(f"actor {actor_id}: {args.task} ({args.obs_mode}, {'robot ' + args.robot if args.robot else 'twin'}) -> "
          f"learner {args.learner} (pid {os.getpid()})", flush=True)
    flushed = False
    try:
        last = time.monotonic()
        actor.start()

        def should_stop() -> bool:
            nonlocal last
            if not args.quiet and time.monotonic() - last >= 10.0:
                last = time.monotonic()
                s = actor.stats()
                sr = s["success_rate"]
                print(f"actor {actor_id}: steps {s['env_steps']} episodes {s['episodes']} success "
                      f"{'-' if sr is None else f'{sr:.2f}'} weights v{s['weights_version']} "
                      f"{endpoint.stats().state}{' (paused)' if s['paused'] else ''}", file=sys.stderr, flush=True)
            return stop.is_set()

        actor.run(should_stop, max_steps=args.max_steps, max_episodes=args.max_episodes)
    finally:  # the signal handlers stay until the end: a second SIGTERM must not cut the flush short
        try:
            flushed = actor.close(flush_s=args.flush_timeout)
        except Exception as err:  # the endpoint failed (e.g. spec mismatch): report below, still clean up
            print(f"actor {actor_id}: {err}", file=sys.stderr)
        final = {**actor.stats(), "actor_id": actor_id, "flushed": flushed}
        if callable(getattr(env, "stats", None)):  # a reward model: episodes it ended, and without true success
            final["reward_model"] = env.stats()
        st = endpoint.stats()
        final.update(session=st.session, next_seq=st.next_seq, acked_upto=st.acked_upto, unacked=st.unacked_messages,
                     reconnects=st.reconnects, resent_messages=st.resent_messages, state=st.state)
        endpoint.close()
        env.close()
        if args.stats_out is not None:
            args.stats_out.parent.mkdir(parents=True, exist_ok=True)
            tmp = args.stats_out.with_name(f".{args.stats_out.name}.tmp")
            tmp.write_text(json.dumps(final, indent=1))
            tmp.replace(args.stats_out)
        signal.signal(signal.SIGTERM, prev_term)
        signal.signal(signal.SIGINT, prev_int)
    print(f"actor {actor_id}: stopped after {final['env_steps']} steps, {final['episodes']} episodes; sent up to seq "
          f"{final['next_seq'] - 1}, acked {final['acked_upto']}{'' if flushed else ' (not all acknowledged)'}",
          flush=True)
    return 0
