"""Where a reward classifier fires on a trained policy's rollouts: how late after the task's success, at what height.

The frame recall the training runs log (learners.rewards.reward_model.RewardModelWrapper) counts the frames between
the twin's success condition first holding and the episode's end by the classifier's k-gate; this benchmark asks
why it is low. It rolls out a trained pick-cube policy (any run directory `robot-rl eval` accepts: a `train`, `learner`
or `sim` run) on the twin with the run's simulated timing, the episode NOT ended by success (`terminate_on_success`
off), its actions sampled as in training (`--deterministic` for the evaluation's), and keeps per step the frames the
policy saw (and those of the cameras a classifier reads beside them, e.g. the twin's side camera), the twin's TRUE
success of the scene each frame shows (with a camera latency the frame was rendered `lag` steps earlier: its truth
is that step's) and the cube's bottom height above the table (privileged: a twin-only diagnostic). Then every
classifier given (`--classifiers NAME=DIR ...`) judges the same frames, and per classifier:

- frames in all: precision / recall of prob >= the card's threshold against the truth;
- until the gate: the same over each episode's frames up to the step the k-gate (`--gate-k`, the cards' default 3)
  would have ended it, i.e. what a training run's window counts;
- lateness: per episode with a true success, the first positive frame's step minus the first true frame's (0: on
  time; negative: early), and the cube's height at the first positive;
- by height band of the cube's bottom (held or not): the share of frames called positive, so where the boundary sits;
- the same again for the reward model's decision (`reward_model`): a frame counts as positive only where the card's
  proprio predicate (the run-time gate's, e.g. pick-cube's finger width and TCP height) also holds on the proprio
  state the policy saw with it, and the gate ends an episode where learners.rewards.reward_model.ClassifierReward
  would (k positives in a row, the predicate holding on the last).

    python benchmarks/classifier_boundary.py --run RUN --classifiers old=W/cls new=W/cls_slow --episodes 30

Writes benchmarks/results/classifier_boundary[_LABEL].json and prints a table.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from _prelude import (
    add_classifiers,
    add_label,
    add_out_dir,
    bench_parser,
    host_info,
    load_average,
    named_classifiers,
    print_table,
    result_name,
    set_env_defaults,
    timestamp,
    write_json,
)

set_env_defaults(one_thread=True)

import numpy as np  # noqa: E402

BANDS_CM = ((-1.0, 3.0), (3.0, 4.0), (4.0, 5.0), (5.0, 6.0), (6.0, 8.0), (8.0, 12.0), (12.0, 20.0), (20.0, 100.0))
"""Height bands (cm) of the cube's bottom above the table; pick-cube's success needs >= 5 cm, held."""


def rollouts(run: Path, episodes: int, seed: int, deterministic: bool,
             reward_sources: tuple[str, ...] = ()) -> dict[str, Any]:
    """The policy's frames {camera path: uint8 (N, H, W, 3)}, its proprio state (N, D) (current: a real arm's state
    is not late), truth (N,) bool, height_m (N,), episode (N,) and the run's timing, over `episodes` episodes of the
    task's full length (success does not end them). The frames include the cameras the classifiers among
    `reward_sources` read beside the policy's (e.g. the twin's side camera; learners.rewards.reward_model
    .add_reward_cameras)."""
    import torch

    from envs.tasks import CUBE_HALF_SIZE_M
    from learners.rewards.reward_model import camera_frames, frame_lag_steps
    from learners.training.evaluation import checkpoint_actor, run_config, run_timing
    from learners.training.online import action_bounds, to_env_action
    from learners.training.run_env import make_run_env, run_env_spec
    from robot_rl.checkpoint import find_checkpoint, load_checkpoint

    torch.set_num_threads(1)
    ckpt = find_checkpoint(run)
    groups, meta = load_checkpoint(ckpt)
    cfg, agent_cfg, saved_spec = run_config(ckpt, meta)
    cfg = run_timing(cfg, ckpt, saved_spec is not None, None, None)
    timing = cfg.env_timing() or {}
    env = make_run_env(cfg, terminate_on_success=False, reward_sources=reward_sources)
    spec = run_env_spec(env, cfg)
    agent = checkpoint_actor(groups, spec, agent_cfg or cfg.agent_config(has_cameras=bool(spec.cameras)))
    bounds, lag = action_bounds(env), frame_lag_steps(env)  # frame lag: as the training runs' frame counts take it
    frames: dict[str, list[np.ndarray]] = {}
    states: list[np.ndarray] = []
    truth: list[bool] = []
    height: list[float] = []
    ep_of: list[int] = []
    try:
        for ep in range(episodes):
            obs, info = env.reset(seed=seed + ep)
            seen: list[tuple[bool, float]] = []  # (truth, height) of each step's scene, newest last
            for _ in range(100_000):
                obs, _, term, trunc, info = env.step(to_env_action(agent.act(obs, deterministic=deterministic),
                                                                   bounds, np.float32))
                cube_z = float(env.unwrapped.last_state.objects["cube_pos"][2])
                seen.append((bool(info["success"]), cube_z - CUBE_HALF_SIZE_M))
                shown = seen[-1 - lag] if len(seen) > lag else (False, seen[0][1])  # the scene the frame shows
                for path, img in camera_frames(obs, info).items():
                    frames.setdefault(path, []).append(np.asarray(img, np.uint8))
                states.append(np.asarray(obs["state"], np.float32))
                truth.append(shown[0])
                height.append(shown[1])
                ep_of.append(ep)
                if term or trunc:
                    break
    finally:
        env.close()
    return {"frames": {k: np.stack(v) for k, v in frames.items()}, "state": np.stack(states), "truth": np.array(truth),
            "height_m": np.array(height), "episode": np.array(ep_of),
            "timing": timing, "lag_steps": lag, "checkpoint": str(ckpt)}


def _pr(pos: np.ndarray, truth: np.ndarray) -> dict[str, Any]:
    tp, fp, fn = int((pos & truth).sum()), int((pos & ~truth).sum()), int((~pos & truth).sum())
    return {"tp": tp, "fp": fp, "fn": fn, "tn": int((~pos & ~truth).sum()),
            "precision": tp / (tp + fp) if tp + fp else None, "recall": tp / (tp + fn) if tp + fn else None}


def judge(data: dict[str, Any], classifier_dir: str, gate_k: int) -> dict[str, Any]:
    """One classifier's decisions on the rollout frames, summarised (see the module docstring): alone (top level)
    and as the reward model decides with the card's proprio predicate (`reward_model`)."""
    from learners.rewards.classifier import load_classifier
    from learners.rewards.reward_model import card_predicate

    clf = load_classifier(classifier_dir)
    frames = data["frames"]
    probs = clf.predict_proba({cam: frames[cam] for cam in clf.card.cameras})
    positive = probs >= clf.card.threshold
    out = {"classifier": classifier_dir, "threshold": float(clf.card.threshold),
           "validation": {k: dict(clf.card.metrics.get("validation") or {}).get(k) for k in ("precision", "recall")},
           **_summary(positive, np.ones_like(positive), data, gate_k)}
    if "state" in data:
        predicate = card_predicate(clf.card)
        ok = predicate.evaluate(data["state"])
        out["reward_model"] = {"predicate": list(predicate.conditions), **_summary(positive, ok, data, gate_k),
                               "false_positives": _false_positives(positive & ok, probs, data)}
    return out


def _false_positives(pos: np.ndarray, probs: np.ndarray, data: dict[str, Any],
                     limit: int = 100) -> list[dict[str, Any]]:
    """The first `limit` frames decided positive without the truth: episode, step in it, the cube bottom's height
    (cm), the finger gap and the TCP height relative to the reset pose (m; proprio state[12] and state[2]), and
    whether the next frame is true (a frame one step before the truth)."""
    truth, episode, state = data["truth"], data["episode"], data["state"]
    out = []
    for i in np.flatnonzero(pos & ~truth)[:limit]:
        first = int(np.flatnonzero(episode == episode[i])[0])
        nxt = i + 1 < len(truth) and episode[i + 1] == episode[i] and bool(truth[i + 1])
        out.append({"episode": int(episode[i]), "step": int(i - first),
                    "height_cm": round(float(data["height_m"][i]) * 100, 2),
                    "finger_gap_m": round(float(state[i, 12]), 4), "tcp_z_rel_m": round(float(state[i, 2]), 4),
                    "prob": round(float(probs[i]), 4), "next_frame_true": bool(nxt)})
    return out


def _summary(positive: np.ndarray, ok: np.ndarray, data: dict[str, Any], gate_k: int) -> dict[str, Any]:
    """Frame and episode figures of the decisions `positive & ok` (N,); the gate ends an episode at the first frame
    ending `gate_k` classifier positives in a row where `ok` holds (as ClassifierReward.step)."""
    truth, height, episode = data["truth"], data["height_m"], data["episode"]
    pos = positive & ok
    until = np.zeros_like(pos)
    lateness: list[int] = []
    height_at_first: list[float] = []
    never = 0
    gate_delay: list[int] = []
    gate_false = gate_ends = 0
    for ep in np.unique(episode):
        idx = np.flatnonzero(episode == ep)
        p, tr = pos[idx], truth[idx]
        run = np.convolve(positive[idx].astype(int), np.ones(gate_k, int))[:len(p)]  # positives in the window to t
        gate = np.flatnonzero((run >= gate_k) & ok[idx])
        until[idx[: (gate[0] + 1) if len(gate) else len(idx)]] = True
        if len(gate):
            gate_ends += 1
            gate_false += int(not tr[gate[0]])
            if tr.any():
                gate_delay.append(int(gate[0]) - int(np.argmax(tr)))
        if tr.any():
            if p.any():
                first = int(np.argmax(p))
                lateness.append(first - int(np.argmax(tr)))
                height_at_first.append(float(height[idx[first]]))
            else:
                never += 1
    bands = []
    for lo, hi in BANDS_CM:
        m = (height * 100 >= lo) & (height * 100 < hi)
        bands.append({"band_cm": [lo, hi], "frames": int(m.sum()), "true": int((m & truth).sum()),
                      "positive_share": float(pos[m].mean()) if m.any() else None})
    late = np.array(lateness)
    return {"all_frames": _pr(pos, truth), "until_gate": _pr(pos[until], truth[until]),
            "episodes_with_true_success": len(lateness) + never, "never_fired": never,
            "gate_ends": gate_ends,
            "gate_ends_without_truth": gate_false, "gate_delay_steps": gate_delay,
            "gate_delay_median": float(np.median(gate_delay)) if gate_delay else None,
            "lateness_steps": lateness, "lateness_median": float(np.median(late)) if len(late) else None,
            "on_time_or_early_share": float((late <= 0).mean()) if len(late) else None,
            "height_at_first_positive_cm_median": float(np.median(height_at_first)) * 100 if height_at_first else None,
            "bands": bands}


def main() -> None:
    p = bench_parser(__doc__)
    p.add_argument("--run", type=Path, required=True, help="a trained pick-cube run (train, learner or sim --out)")
    add_classifiers(p)
    p.add_argument("--episodes", type=int, default=30)
    p.add_argument("--seed", type=int, default=3_000_000, help="env seed of the first episode")
    p.add_argument("--gate-k", type=int, default=3)
    p.add_argument("--deterministic", action="store_true", help="the policy's deterministic actions (default: sampled)")
    add_label(p)
    add_out_dir(p)
    args = p.parse_args()
    named = named_classifiers(p, args)
    t0 = time.time()
    data = rollouts(args.run, args.episodes, args.seed, args.deterministic,
                    tuple(f"classifier:{d}" for _, d in named))
    rollout_s = time.time() - t0
    arms = [{"name": name, **judge(data, d, args.gate_k)} for name, d in named]
    print(f"{len(data['truth'])} frames in {args.episodes} episodes ({rollout_s:.0f} s), {int(data['truth'].sum())} "
          f"truly successful; timing {data['timing']}")
    cols = [("P all", 6, lambda a: _f(a["all_frames"]["precision"])),
            ("R all", 6, lambda a: _f(a["all_frames"]["recall"])),
            ("P gate", 6, lambda a: _f(a["until_gate"]["precision"])),
            ("R gate", 6, lambda a: _f(a["until_gate"]["recall"])),
            ("late med", 8, lambda a: _f(a["lateness_median"], 8, ".1f")),
            ("on time", 7, lambda a: _f(a["on_time_or_early_share"], 7)),
            ("never", 5, lambda a: f"{a['never_fired']:5d}"),
            ("z first", 7, lambda a: _f(a["height_at_first_positive_cm_median"], 7, ".1f")),
            ("ends", 4, lambda a: f"{a['gate_ends']:4d}"), ("false", 5, lambda a: f"{a['gate_ends_without_truth']:5d}"),
            ("gate delay", 10, lambda a: _f(a["gate_delay_median"], 10, ".1f"))]
    shown = arms + [{**a, **a["reward_model"], "name": f"{a['name']}+pred"} for a in arms if "reward_model" in a]
    print_table(f"{'classifier':<16} {'thr':>5} " + " ".join(f"{h:>{w}}" for h, w, _ in cols),
                [f"{a['name']:<16} {a['threshold']:5.2f} " + " ".join(fn(a) for _, _, fn in cols) for a in shown])
    print("positive share by height band (cm; +pred: the reward model's decision with the card's predicate): "
          + ", ".join(f"{lo:g}-{hi:g}" for lo, hi in BANDS_CM))
    for a in shown:
        print(f"  {a['name']:<16} " + " ".join(_f(b["positive_share"], 5, ".2f") for b in a["bands"]))
    out = args.out / f"{result_name('classifier_boundary', args.label)}.json"
    write_json(out, {"benchmark": "classifier_boundary", "task": "twin-pick-cube", "time": timestamp(),
                     **host_info(), "load_average": load_average(), "args": {**vars(args), "out": str(args.out),
                                                                             "run": str(args.run)},
                     "checkpoint": data["checkpoint"], "timing": data["timing"], "lag_steps": data["lag_steps"],
                     "frames": len(data["truth"]), "true_frames": int(data["truth"].sum()),
                     "rollout_s": rollout_s, "arms": arms})
    print(f"wrote {out}")


def _f(v: float | None, width: int = 6, spec: str = ".3f") -> str:
    return f"{'-':>{width}}" if v is None else f"{v:{width}{spec}}"


if __name__ == "__main__":
    main()
