"""README.md's generated blocks: the front page's headline figures, each from its results file. A block is
the lines between `<!-- BEGIN generated: NAME -->` and `<!-- END generated: NAME -->`; NAME is a key of
README_BLOCKS."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .fmt import Results, Row, ksteps, minutes, pct, pcts, rnd, table
from .learning import FAITHFUL_SPREAD_20K_LEAN, MAIN_COMMAND_RUNS


def first_reached(ms: dict) -> str:
    """'training-episode success first 90 % at 2.7k env steps (1.9 min)', or the highest level reached."""
    for level in ("0.9", "0.8", "0.5", "0.25"):
        if ms.get(level):
            return (f"training-episode success first {round(100 * float(level))} % at "
                    f"{ksteps(ms[level]['env_step'])} env steps ({minutes(ms[level]['wall_s'])} min)")
    return "training-episode success never 25 %"


def readme_main_command(res: Results) -> str:
    """The README's sentence on the default command's run."""
    d = res(MAIN_COMMAND_RUNS[0][0])
    r, n = d["result"], d["result"]["eval_episodes"]
    ms = r["milestones"]
    return (f"Measured on the 2-core CI machine ({d['date']}, `benchmarks/results/{MAIN_COMMAND_RUNS[0][0]}`): "
            f"{minutes(r['wall_s'])} minutes for {ksteps(r['env_step'])} env steps, the learner at "
            f"{rnd(r['updates_per_s'], 1)} updates/s; {first_reached(ms)}, and the final "
            f"checkpoint lifts the cube in **{rnd(r['eval_success_rate'] * n)} of {n}** deterministic evaluation "
            f"episodes.")


FAITHFUL_20K = "sample_efficiency_twin-pick-cube_pixels64_faithful_opreset3_demotiming_spread_20k.json"
LEAN_PICK = "sample_efficiency_twin-pick-cube_pixels64_lean_bf16.json"
LEAN_PICK_20K = "sample_efficiency_twin-pick-cube_pixels64_lean_bf16_seed2_20k.json"
LEAN_PEG = "sample_efficiency_twin-peg-insert_pixels64_lean_bf16.json"
CLASSIFIER_ON_POLICY = "classifier_boundary_side.json"
CLASSIFIER_ON_OWN_POLICY = "classifier_boundary_side_run.json"
CLASSIFIER_ON_OWN_POLICY_2 = "classifier_boundary_side_run2.json"
FAITHFUL_SIM_COVERAGE_SIDE = "demo_coverage_faithful_sim_side.json"
README_SIM_RUNS = ("main_command_twin-pick-cube_faithful_pixels_side.json",
                   "main_command_twin-pick-cube_faithful_pixels_side_run2.json",
                   "main_command_twin-pick-cube_faithful_pixels_boundary.json")
"""The `robot-rl sim` runs the README's row cites: the documented commands' first two, the front+wrist one."""
FAITHFUL_SIM_COVERAGE_SIDE_2 = "demo_coverage_faithful_sim_side_run2.json"
FAITHFUL_SIM_COVERAGE_BOUNDARY = "demo_coverage_faithful_sim_boundary.json"


def _faithful_arm(runs: list[dict[str, Any]]) -> str:
    """'5.1k / 5.0k / 2.0k env steps, last 85 (100) / 90 (100) / 95 (100) % at 20.0k, 70-100 % from 6k'."""
    late = [c["success_rate"] for r in runs for c in r["curve"] if c["env_step"] >= 6000]
    lasts = " / ".join(f"{_num(r['final_success_rate'])} ({_num(r['best_success_rate'])})" for r in runs)
    return (_first_steps(runs) + f", last {lasts} % at "
            f"{ksteps(runs[0]['env_steps_done'])}, {rnd(100 * min(late))}-{pct(max(late))} from 6k")


def _num(rate: float) -> str:
    return pct(rate).removesuffix(" %")


def _out_of(r: dict[str, Any]) -> str:
    """'20 / 20': a main-command row's final evaluation, counted by the twin's true success."""
    return f"{rnd(r['eval_true_success_rate'] * r['eval_episodes'])} / {r['eval_episodes']}"


def _firsts(runs: list[dict[str, Any]], longer: list[dict[str, Any]] | None = None) -> str:
    """'2.1k / 8.0k / 6.1k env steps; 100 / 90 / 90 %': each seed's first evaluation >= 90 % and its last, a seed
    of `longer` (the same seed run on) replacing its shorter run."""
    by_seed = {r["seed"]: r for r in runs} | {r["seed"]: r for r in (longer or [])}
    rs = [by_seed[k] for k in sorted(by_seed)]
    return _first_steps(rs) + "; " + pcts([r["final_success_rate"] for r in rs])


def _first_steps(runs: list[dict[str, Any]]) -> str:
    """'2.1k / 8.0k / 6.1k env steps': each run's first evaluation >= 90 % ('never' where none was)."""
    return " / ".join(ksteps(r["first_step_at_90"]) for r in runs) + " env steps"


def readme_glance(res: Results) -> str:
    """The README's headline figures, one row per benchmark family."""
    mc = res("main_command_twin-pick-cube.json")["result"]
    mc2 = res("main_command_twin-pick-cube_run2.json")["result"]
    pick = res("sample_efficiency_twin-pick-cube_state_norecipe_10k.json")["runs"]
    peg = res("sample_efficiency_twin-peg-insert_state_norecipe_floor01.json")["runs"]
    tp = res("third_party_gym_hil_pick_cube.json")["runs"]
    px = res("sample_efficiency_twin-pick-cube_pixels64_pixdefaults.json")["runs"]
    ff, ffl = res(FAITHFUL_20K)["runs"], res(FAITHFUL_SPREAD_20K_LEAN)["runs"]
    pp = res("sample_efficiency_twin-peg-insert_pixels64_pixdefaults.json")["runs"]
    lean, lean2, leanpeg = res(LEAN_PICK)["runs"], res(LEAN_PICK_20K)["runs"], res(LEAN_PEG)["runs"]
    fss, fss2, fsb = (res(f)["result"] for f in README_SIM_RUNS)
    covs, covs2, covb = (res(f)["runs"][0] for f in (FAITHFUL_SIM_COVERAGE_SIDE, FAITHFUL_SIM_COVERAGE_SIDE_2,
                                                     FAITHFUL_SIM_COVERAGE_BOUNDARY))
    cls = res("classifier.json")["sizes"]["64"]["test"]
    on_policy, on_own, on_own2 = ([next(a for a in res(f)["arms"] if a["name"] == n)["reward_model"]["all_frames"]
                                   for n in ("side", "side_seed1")]
                                  for f in (CLASSIFIER_ON_POLICY, CLASSIFIER_ON_OWN_POLICY, CLASSIFIER_ON_OWN_POLICY_2))
    lr = res("learned_reward_twin-pick-cube.json")
    twin = res("twin_speed.json")["goals"]
    tr = res("transport.json")["speedup_transitions_per_s"]["robot-rl vs pickle REQ/REP, 2x640x480"]
    act = res("actor_latency.json")["rows"]
    cost = {r["case"]: r["ratio_to_state"] for r in res("feature_cache_lean_idle.json")["rows"]}
    rows: list[Row] = [
        ["the main command, `robot-rl sim --task twin-pick-cube` (2 actors, 10k env steps, 2 CPU cores)",
         f"{minutes(mc['wall_s'])} / {minutes(mc2['wall_s'])} min; final checkpoint "
         f"{rnd(mc['eval_success_rate'] * mc['eval_episodes'])} / {mc['eval_episodes']} and "
         f"{rnd(mc2['eval_success_rate'] * mc2['eval_episodes'])} / {mc2['eval_episodes']} deterministic evaluation "
         "episodes (two runs)", "main_command_twin-pick-cube.json` and `main_command_twin-pick-cube_run2.json"],
        ["pick-cube from state, the defaults a new task gets (no recipe), 3 seeds: first evaluation >= 90 %; last",
         _firsts(pick) + f" at {ksteps(pick[0]['env_steps_done'])}",
         "sample_efficiency_twin-pick-cube_state_norecipe_10k.json"],
        ["peg-insert from state, no recipe (the defaults: a gripper locked closed keeps a Q filter floor), 3 seeds: "
         "first evaluation >= 90 %; last", _firsts(peg) + f" at {ksteps(peg[0]['env_steps_done'])}",
         "sample_efficiency_twin-peg-insert_state_norecipe_floor01.json"],
        ["pick-cube from two 64x64 cameras + proprio (no object state), the defaults a task gets from cameras with "
         "demos (a ResNet-10 pretrained on the 20 demos in the run, frozen, its target heads' predictions beside a "
         "light trainable head), 3 seeds: first evaluation >= 90 %; last. In float32 (a GPU, a CPU without native "
         "bf16); the lean learner a CPU with native bf16 gets (a 64-wide head, bf16 backbone and updates; seed 2 "
         "run on to 20k)",
         _firsts(px) + f" at {ksteps(px[0]['env_steps_done'])}; " + _firsts(lean, lean2)
         + f" at {ksteps(lean[0]['env_steps_done'])} / {ksteps(lean[0]['env_steps_done'])} / "
         f"{ksteps(lean2[0]['env_steps_done'])}",
         "sample_efficiency_twin-pick-cube_pixels64_pixdefaults.json`, `" + LEAN_PICK + "` and `" + LEAN_PICK_20K],
        ["peg-insert from the same two cameras + proprio, the same defaults (no agent flag), 3 seeds: first "
         "evaluation >= 90 %; last. In float32; lean",
         _firsts(pp) + f" at {ksteps(pp[0]['env_steps_done'])}; " + _firsts(leanpeg)
         + f" at {ksteps(leanpeg[0]['env_steps_done'])}",
         "sample_efficiency_twin-peg-insert_pixels64_pixdefaults.json` and `" + LEAN_PEG],
        ["the same in the hardware-faithful mode (the classifier's reward, robot resets and a person's scene reset "
         "after 3 failures, frames 100 ms and targets 20 ms late, demos recorded so and spread over the workspace), "
         "3 seeds: first evaluation >= 90 %; last (best); every evaluation from 6k on. Lean; float32",
         "; ".join(_faithful_arm(runs) for runs in (ffl, ff)), FAITHFUL_SPREAD_20K_LEAN + "` and `" + FAITHFUL_20K],
        ["the same as a lab runs it, `robot-rl sim ... --faithful` (robot servers with their safety guard, 2 actors, "
         "20 demos spread over the workspace), runs of 20k env steps: final checkpoint (true success); the whole "
         "job; the final policy on 100 further scenes. With the classifier the documented commands make now (it also "
         "reads a side camera the policy does not see; the lean learner, this CPU's default), two runs; with the one "
         "before (front and wrist)",
         f"{_out_of(fss)} and {_out_of(fss2)} deterministic evaluation episodes in {minutes(fss['wall_s'])} and "
         f"{minutes(fss2['wall_s'])} min, {pct(covs['true_success_rate'])} and {pct(covs2['true_success_rate'])} on "
         f"100 scenes; {_out_of(fsb)} in {minutes(fsb['wall_s'])} min, {pct(covb['true_success_rate'])} on 100 scenes",
         "`, `".join([*README_SIM_RUNS, FAITHFUL_SIM_COVERAGE_SIDE,
                      FAITHFUL_SIM_COVERAGE_SIDE_2, FAITHFUL_SIM_COVERAGE_BOUNDARY])],
        ["a third-party env never tuned on (gym-hil's pick-cube, random cube), the defaults with 20 demos, 3 seeds: "
         "first evaluation >= 90 %", _first_steps(tp),
         "third_party_gym_hil_pick_cube.json"],
        ["reward classifier on 64x64 frames, held out", f"precision {rnd(cls['precision'], 3)}, recall "
                                                        f"{rnd(cls['recall'], 3)}", "classifier.json"],
        ["the same on learning policies' own frames (the documented commands, two training seeds; each frame as the "
         "reward model decides, against the twin's truth of the scene it shows; frames 100 ms late): a policy trained "
         "on another reward; the policies of the two runs above trained on this classifier's",
         "; ".join("precision " + " / ".join(rnd(x["precision"], 3) for x in xs) + ", recall "
                   + " / ".join(rnd(x["recall"], 3) for x in xs) for xs in (on_policy, on_own, on_own2)),
         "`, `".join([CLASSIFIER_ON_POLICY, CLASSIFIER_ON_OWN_POLICY, CLASSIFIER_ON_OWN_POLICY_2])],
        ["training on the classifier's reward instead of the true success: env steps to 90 %",
         f"{rnd(lr['ratio_learned_to_true'], 2)}x", "learned_reward_twin-pick-cube.json"],
        ["twin env steps/s against gym-hil's pick-cube (worst twin task)",
         f"{rnd(twin['state_min_ratio'], 1)}x state-only, {rnd(twin['images_min_ratio'])}x with two cameras",
         "twin_speed.json"],
        ["a pixel learner's CPU per env step against the state learner's (1 thread, pick-cube, two 64x64 cameras): "
         "the float32 pixel defaults; the lean learner, the defaults on a CPU with native bf16",
         f"{rnd(cost['pixel defaults (target features, K=4)'], 1)}x; "
         f"{rnd(cost['pixel defaults, image latent 64, bf16 backbone and updates'], 1)}x",
         "feature_cache_lean_idle.json"],
        ["transitions/s against pickle over REQ/REP, two 640x480 cameras", f"{rnd(tr, 1)}x", "transport.json"],
        ["what the actor adds around policy and env step, p99",
         " / ".join(f"{rnd(r['rest_ms_p99'], 2)} ms" for r in act) + " (state / cameras)", "actor_latency.json"],
    ]
    return table(["measured", "figure", "results file"], [[a, b, f"`{c}`"] for a, b, c in rows])


README_BLOCKS: dict[str, Callable[[Results], str]] = {
    "main_command": readme_main_command,
    "glance": readme_glance,
}
