"""Benchmark: success vs env steps on a twin task with and without (scripted) human interventions.

Each condition trains RLPD (state observations, scripted demos in the demo buffer) with the same seeds; the
"interventions" condition wraps the training env in `InterventionWrapper(env, ScriptedHuman)` — the scripted
human takes over when the policy drifts from the expert's path, and the taken-over transitions go to both the
online and the demo buffer (HIL-SERL routing in learners.training.online). Both use the task's training recipe
(learners.agents.recipes, what `robot-rl train --task T` uses). Evaluation always runs the bare, deterministic policy
on a clean env (no human), on the same env seeds for both conditions. Prints a table, writes
benchmarks/results/interventions.json and interventions.png.

Usage::

    python benchmarks/interventions.py                      # twin-pick-cube, 3 seeds, 8000 steps, 2 at a time
    python benchmarks/interventions.py --task twin-reach --steps 1500 --seeds 1
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from _prelude import (
    RESULTS,
    bench_parser,
    parallel_map,
    pyplot,
    recipe_summary,
    save_figure,
    set_env_defaults,
    timestamp,
    write_result,
)

set_env_defaults()

import numpy as np  # noqa: E402


def run_condition(task: str, seed: int, steps: int, eval_every: int, eval_episodes: int, demos: Path,
                  intervene: bool, human_cfg: dict[str, Any], takeover_terminal: bool = False) -> dict[str, Any]:
    import torch

    from envs.presets import make_env, twin_task
    from envs.twin.scripted_human import ScriptedHuman, ScriptedHumanConfig
    from envs.wrappers import GripperPenaltyWrapper, InterventionConfig, InterventionWrapper
    from learners.agents.config import rlpd_state_config
    from learners.agents.recipes import with_task_defaults
    from learners.agents.sac import SACAgent
    from learners.replay.buffer import ReplayBuffer
    from learners.training.online import LoopConfig, LoopCounters, evaluate_episodes, train_online
    from robot_rl.episodes import load_dir
    from robot_rl.specs import EnvSpec

    torch.set_num_threads(1)
    env: Any = GripperPenaltyWrapper(make_env(task, obs_mode="state"))
    if intervene:
        human = ScriptedHuman(ScriptedHumanConfig(task=twin_task(task), seed=seed, **human_cfg))
        env = InterventionWrapper(env, human, InterventionConfig(sticky_s=0.0))
    eval_env = make_env(task, obs_mode="state")
    spec = EnvSpec.from_spaces(task, env.observation_space, env.action_space, control_hz=10.0)
    recipe = with_task_defaults(task)
    agent = SACAgent(spec, rlpd_state_config(**{**recipe.overrides("state"), "seed": seed}))
    online = ReplayBuffer(spec, steps + 10, seed=seed)
    demo = ReplayBuffer(spec, 50_000, seed=seed + 1)
    for ep in load_dir(demos)[0]:
        demo.add_episode(ep)
    curve: list[dict[str, Any]] = []
    interventions: list[float] = []
    t0 = time.perf_counter()
    next_eval = eval_every
    counters = LoopCounters()

    def evaluate_now() -> None:
        res = evaluate_episodes(eval_env, agent, episodes=eval_episodes, seed=500_000 + seed)
        curve.append({"env_step": counters.env_step, "success_rate": float(np.mean([r["success"] for r in res])),
                      "intervention_rate": float(np.mean(interventions[-20:])) if interventions else 0.0,
                      "demo_buffer": len(demo), "wall_s": time.perf_counter() - t0})
        print(f"  {'with' if intervene else 'without'} interventions seed {seed}: step {counters.env_step} "
              f"success {curve[-1]['success_rate']:.0%} intervention rate {curve[-1]['intervention_rate']:.2f}",
              flush=True)

    loop = LoopConfig(total_steps=steps, start_steps=0, learning_starts=100,
                      updates_per_step=recipe.updates_per_step or 1, seed=seed,
                      takeover_terminal=takeover_terminal)
    for m in train_online(env, agent, online, loop, demo=demo, counters=counters):
        interventions.append(float(m.get("intervention_rate", 0.0)))
        if m["env_step"] >= next_eval:
            next_eval += eval_every
            evaluate_now()
    if not curve or curve[-1]["env_step"] < counters.env_step:
        evaluate_now()  # the run ended mid-episode
    env.close()
    eval_env.close()
    return {"seed": seed, "interventions": intervene, "curve": curve, "wall_s": time.perf_counter() - t0}


def main() -> None:
    p = bench_parser(__doc__)
    p.add_argument("--task", default="twin-pick-cube")
    p.add_argument("--steps", type=int, default=8000)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--eval-every", type=int, default=2000)
    p.add_argument("--eval-episodes", type=int, default=20)
    p.add_argument("--demos", type=int, default=20, help="scripted demo episodes")
    p.add_argument("--jobs", type=int, default=2, help="runs in parallel processes (1 core each)")
    p.add_argument("--tag", default="", help="suffix of the result files (interventions<tag>.json/.png)")
    p.add_argument("--only", choices=("with", "without"), default=None, help="run one condition only")
    p.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds - 1")
    p.add_argument("--takeover-terminal", action=argparse.BooleanOptionalAction, default=True,
                   help="relabel the policy step before each takeover as terminal (learners.training.online; "
                        "default on)")
    p.add_argument("--cos-threshold", type=float, default=-0.3,
                   help="human: a step drifts when cos(policy, expert translation) is below this")
    p.add_argument("--patience", type=int, default=10, help="human: drifting steps before it takes over")
    p.add_argument("--takeover", type=int, default=20, help="human: steps it keeps control")
    p.add_argument("--budget", type=float, default=0.3, help="human: most intervention steps per episode (fraction)")
    args = p.parse_args()
    args.seed_list = list(range(args.first_seed, args.first_seed + args.seeds))
    args.conditions = [c == "with" for c in ([args.only] if args.only else ["without", "with"])]
    from demos.recording.demos import parse_record_demos_args, record_demos

    human_cfg = {"cos_threshold": args.cos_threshold, "patience_steps": args.patience,
                 "takeover_steps": args.takeover, "max_intervention_fraction": args.budget}
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        demos = Path(tmp) / "demos"
        record_demos(parse_record_demos_args(["--task", args.task, "--episodes", str(args.demos), "--out", str(demos),
                                              "--obs-mode", "state"]))
        jobs = [(args.task, seed, args.steps, args.eval_every, args.eval_episodes, demos, intervene, human_cfg,
                 args.takeover_terminal) for seed in args.seed_list for intervene in args.conditions]
        runs = parallel_map(run_condition, jobs, args.jobs)
    print(f"\n{'condition':<26}{'seed':>5}  success by env step")
    for r in runs:
        cond = "with interventions" if r["interventions"] else "without interventions"
        pts = "  ".join(f"{c['env_step']}:{c['success_rate']:.0%}" for c in r["curve"])
        print(f"{cond:<26}{r['seed']:>5}  {pts}")
    for intervene in args.conditions:
        curves = [r["curve"] for r in runs if r["interventions"] == intervene]
        n = min(len(cv) for cv in curves)
        mean = [float(np.mean([cv[i]["success_rate"] for cv in curves])) for i in range(n)]
        rate = float(np.mean([c["intervention_rate"] for cv in curves for c in cv]))
        print(f"{'mean ' + ('with' if intervene else 'without'):<26}{'':>5}  "
              + "  ".join(f"{m:.0%}" for m in mean) + (f"   (intervention rate {rate:.2f})" if intervene else ""))
    out = {"benchmark": "interventions", "task": args.task, "args": vars(args), "human": human_cfg, "runs": runs,
           "recipe": recipe_summary(args.task), "time": timestamp()}
    write_result(out, RESULTS / f"interventions{args.tag}.json", plot)


def plot(result: dict[str, Any], path: Path) -> None:
    """Success vs env steps per condition: each seed faint, the mean of the seeds solid."""
    plt = pyplot()
    runs = result["runs"]
    fig, ax = plt.subplots(figsize=(6, 4))
    for intervene, color in ((False, "tab:blue"), (True, "tab:orange")):
        curves = [r["curve"] for r in runs if r["interventions"] == intervene]
        if not curves:
            continue
        n = min(len(cv) for cv in curves)  # evaluations happen at episode ends: align by index
        steps = np.mean([[c["env_step"] for c in cv[:n]] for cv in curves], axis=0)
        mean = np.mean([[c["success_rate"] for c in cv[:n]] for cv in curves], axis=0)
        for cv in curves:
            ax.plot(steps, [c["success_rate"] for c in cv], color=color, alpha=0.25)
        ax.plot(steps, mean, color=color, label=("with" if intervene else "without") + " interventions")
    ax.set_xlabel("env steps")
    ax.set_ylabel("eval success rate")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title(f"{result['task']}: RLPD + {result['args']['demos']} demos, {result['args']['seeds']} seed(s)")
    ax.legend()
    ax.grid(alpha=0.3)
    save_figure(fig, path)


if __name__ == "__main__":
    main()
