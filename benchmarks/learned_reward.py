"""Learning with a learned reward: pick-cube's state recipe trained on a reward classifier's gated decisions vs on
the twin's true success, the same seeds side by side in one process pool (same machine load for both arms).

Both arms run the real entry point (`robot-rl train --task T --obs-mode state`, the task's recipe, the same
scripted demos); the learned arm adds `--reward classifier:DIR`: the training env renders the classifier's cameras
into info only (never into the observation), the actor-side reward model turns its frames into reward and
termination (the default k-consecutive-frames gate and the card's threshold), and the true success is used for
nothing but the counters. Evaluation in both arms is the deterministic policy on the TRUE success (its own env,
no reward model). Reported per arm and seed: the first env step at >= 90 % evaluation success, final / best;
for the learned arm the share of training episodes the classifier ended without true success (false ends) and
how many it ended at all. Goal: the learned arm's mean first step at 90 % within 1.15x the true arm's.

Without `--classifier` the script records labels and trains one the way benchmarks/classifier.py does (scripted
teleop with near misses, 6,000 frames at 64x64, `train-classifier` defaults) into --work.

    python benchmarks/learned_reward.py --jobs 6                           # 3 seeds x 2 arms, 6k steps
    python benchmarks/learned_reward.py --classifier W/cls64 --seeds 0 --steps 3000 --jobs 2
    python benchmarks/learned_reward.py -- --set bc_weight=10              # anything after -- goes to both arms

Writes benchmarks/results/learned_reward_<task>.{json,png} and prints a table.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from _prelude import (
    SUCCESS_BAR,
    add_out_dir,
    add_work_dir,
    bench_parser,
    host_info,
    mean_curve,
    mean_first_step,
    print_success_table,
    pyplot,
    rate_axes,
    recipe_summary,
    save_figure,
    set_env_defaults,
    split_passthrough,
    summarize_run,
    timestamp,
    training_run_flags,
    work_dir,
    write_result,
)

set_env_defaults()

from sample_efficiency import record_demos, run_jobs  # noqa: E402

GOAL_RATIO = 1.15
ARMS = ("true", "learned")


def train_classifier_for(task: str, work: Path, image_size: int, frames: int, cameras: tuple[str, ...] = (),
                         noisy_frames: int = 0, noise: float = 0.5) -> Path:
    """Labels (scripted teleop, `robot-rl record-labels`: `frames` expert frames from seed 20000, with near misses
    where the task has them, plus `noisy_frames` frames of the expert with Gaussian action noise `noise` from seed
    30000, whose failures give negatives the expert never shows) and a classifier trained with the
    `train-classifier` defaults on `cameras` (default: every camera); reused when work/cls<size>/card.json
    exists."""
    import torch

    from demos.recording.labels import parse_record_labels_args, record_labels
    from learners.rewards.classifier import ClassifierModelConfig
    from learners.rewards.training import TrainClassifierConfig, train_classifier

    cls_dir, labels = work / f"cls{image_size}", [work / f"labels{image_size}"]
    if (cls_dir / "card.json").is_file():
        print(f"[learned-reward] reusing the classifier in {cls_dir}", flush=True)
        return cls_dir
    torch.set_num_threads(1)
    runs: list[tuple[Path, int, int, list[str]]] = [(labels[0], frames, 20000, [])]
    if noisy_frames > 0:
        labels.append(work / f"labels{image_size}_noisy")
        runs.append((labels[1], noisy_frames, 30000, ["--noise", str(noise)]))
    for out, n, seed, more in runs:
        argv = ["--task", task, "--out", str(out), "--frames", str(n), "--image-size", str(image_size),
                "--hold-steps", "8", "--seed", str(seed), *more]
        if record_labels(parse_record_labels_args(argv)) != 0:
            raise SystemExit(f"record-labels into {out} failed")
    train_classifier(TrainClassifierConfig(model=ClassifierModelConfig(), cameras=cameras), labels, cls_dir,
                     log=lambda s: print(f"[learned-reward] {s}", flush=True))
    return cls_dir


def plot(result: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for arm, colour in zip(ARMS, ("tab:blue", "tab:orange"), strict=True):
        runs = result["arms"][arm]["runs"]
        for run in runs:
            ax.plot([c["env_step"] for c in run["curve"]], [c["success_rate"] for c in run["curve"]], color=colour,
                    alpha=0.3, linewidth=1)
        n = len(runs)
        mean = mean_curve(runs, result["eval_every"])  # evaluations run at episode ends: binned
        ax.plot([m[0] for m in mean], [m[1] for m in mean], color=colour, linewidth=2,
                label=f"{arm} reward (mean of {n})")
    ax.axhline(SUCCESS_BAR, color="grey", linestyle=":", linewidth=1)
    rate_axes(ax, "env steps", f"TRUE success ({result['eval_episodes']} eval episodes)")
    ax.set_title(f"{result['task']} (state): learned vs true reward")
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    argv, extra = split_passthrough(list(sys.argv[1:] if argv is None else argv))
    p = bench_parser(__doc__)
    p.add_argument("--task", default="twin-pick-cube")
    p.add_argument("--classifier", type=Path, default=None,
                   help="classifier directory (robot-rl train-classifier); default: record labels and train one")
    p.add_argument("--classifier-size", type=int, default=64, help="image size of the classifier trained here")
    p.add_argument("--label-frames", type=int, default=6000, help="labelled frames for the classifier trained here")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=6000, help="env steps per run")
    p.add_argument("--eval-every", type=int, default=500)
    p.add_argument("--eval-episodes", type=int, default=20)
    p.add_argument("--demos", type=int, default=20, help="scripted demo episodes")
    p.add_argument("--jobs", type=int, default=2, help="runs trained in parallel processes (1 core each)")
    add_work_dir(p, "demos, labels, classifier, runs")
    add_out_dir(p)
    args = p.parse_args(argv)
    if args.classifier is not None and not (args.classifier / "card.json").is_file():
        raise SystemExit(f"--classifier {args.classifier}: no card.json there (a robot-rl train-classifier "
                         "output directory is expected)")

    work = work_dir(args.work, "learned_reward_")
    cls_dir = args.classifier or train_classifier_for(args.task, work, args.classifier_size, args.label_frames)
    demos = record_demos(args.task, "state", None, args.demos, work / f"demos_{args.task}_state")
    stamp = time.strftime("%H%M%S")
    jobs: list[tuple[str, int, list[str], Path]] = []
    for seed in args.seeds:
        for arm in ARMS:
            out = work / f"run_{arm}_seed{seed}_{stamp}"
            train_argv = ["--task", args.task, "--obs-mode", "state", "--demos", str(demos),
                          *training_run_flags(args.steps, args.eval_every, args.eval_episodes, seed),
                          "--device", "cpu", "--threads", "1",
                          *(["--reward", f"classifier:{cls_dir}"] if arm == "learned" else []), *extra]
            print(f"[learned-reward] {arm} seed {seed}: robot-rl train {' '.join(train_argv)} --out {out}",
                  flush=True)
            jobs.append((arm, seed, train_argv, out))
    results = run_jobs([(j[2], j[3]) for j in jobs], args.jobs)
    arms: dict[str, dict[str, Any]] = {arm: {"runs": []} for arm in ARMS}
    for (arm, seed, _, out), res in zip(jobs, results, strict=True):
        run = summarize_run(seed, res, out, args.steps)
        if arm == "learned" and run["curve"]:
            last = run["curve"][-1]
            run["reward_model"] = {k.removeprefix("reward_"): v for k, v in last.items() if k.startswith("reward_")}
        arms[arm]["runs"].append(run)
    for arm in ARMS:
        arms[arm].update(mean_first_step_at_90=mean_first_step(arms[arm]["runs"], args.steps),
                         seeds_never_at_90=sum(r["first_step_at_90"] is None for r in arms[arm]["runs"]))
    ratio = arms["learned"]["mean_first_step_at_90"] / max(arms["true"]["mean_first_step_at_90"], 1.0)
    fm = [r["reward_model"] for r in arms["learned"]["runs"] if r.get("reward_model")]
    episodes = sum(int(s.get("episodes", 0)) for s in fm)
    false_ends = sum(int(s.get("ended_without_true_success", 0)) for s in fm)
    ended = sum(int(s.get("ended_by_model", 0)) for s in fm)
    from learners.rewards.classifier import load_classifier

    card = load_classifier(cls_dir).card
    result = {
        "benchmark": "learned_reward", "task": args.task, "obs_mode": "state", "classifier": str(cls_dir),
        "classifier_card": {"cameras": list(card.cameras), "image_size": card.image_size,
                            "threshold": card.threshold},
        "demos": args.demos, "steps": args.steps, "eval_every": args.eval_every, "eval_episodes": args.eval_episodes,
        "seeds": args.seeds, "jobs": args.jobs, "extra_flags": extra,
        "recipe": recipe_summary(args.task),
        "arms": arms, "ratio_learned_to_true": ratio, "goal_ratio": GOAL_RATIO, "goal_met": bool(
            ratio <= GOAL_RATIO and arms["learned"]["seeds_never_at_90"] == 0),
        "learned_training_episodes": episodes, "learned_ended_by_classifier": ended,
        "learned_false_ends": false_ends, "learned_false_end_share": false_ends / episodes if episodes else None,
        **host_info(), "success_bar": SUCCESS_BAR, "time": timestamp(),
    }

    print(f"\n{args.task} (state), TRUE evaluation success over {args.eval_episodes} deterministic episodes:")
    print_success_table([(f"{a[:5]} s{r['seed']}", r) for a in ARMS for r in arms[a]["runs"]], args.eval_every,
                        width=9, mean=False)
    for a in ARMS:
        firsts = [r["first_step_at_90"] for r in arms[a]["runs"]]
        print(f"{a} reward: first >= {SUCCESS_BAR:.0%} at {firsts} (mean {arms[a]['mean_first_step_at_90']:.0f}, "
              f"never: {arms[a]['seeds_never_at_90']}); final {[r['final_success_rate'] for r in arms[a]['runs']]}")
    print(f"learned / true: {ratio:.2f}x (goal <= {GOAL_RATIO}x): {'MET' if result['goal_met'] else 'NOT MET'}; "
          f"the classifier ended {ended} of {episodes} training episodes, {false_ends} of them without true success "
          f"({result['learned_false_end_share'] or 0.0:.1%} of all episodes)")
    write_result(result, args.out / f"learned_reward_{args.task}.json", plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
