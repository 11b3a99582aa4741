"""Tables of the learning benchmarks: the main command, sample efficiency (state, JAX, pixels), the ablations
compared on one protocol (residual RL, HL-Gauss), warm starts, interventions, gymnasium defaults and the
peg-insertion diagnosis. Each function maps the results directory to markdown."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .fmt import (
    Results,
    Row,
    arrows,
    at,
    first_at,
    ksteps,
    mean,
    mean_at,
    minutes,
    pct,
    pcts,
    rnd,
    signed,
    source,
    table,
)

MAIN_COMMAND_RUNS = [("main_command_twin-pick-cube.json", "compiled (the default)"),
                     ("main_command_twin-pick-cube_run2.json", "compiled, again"),
                     ("main_command_twin-pick-cube_floor.json",
                      "compiled, with the Q filter's floor 0.1 (not the default)"),
                     ("main_command_twin-pick-cube_floor_run2.json", "compiled, the same again"),
                     ("main_command_twin-pick-cube_floor_arm.json",
                      "compiled, the floor on the arm dims only (not the default)"),
                     ("main_command_twin-pick-cube_2026-11-26.json", "compiled, before the gripper's own Q filter"),
                     ("main_command_twin-pick-cube_compile_run2.json", "compiled, again, before it"),
                     ("main_command_twin-pick-cube_eager.json", "eager (`ROBOT_RL_COMPILE=0`), before it"),
                     ("main_command_twin-peg-insert.json", "compiled (the default: its Q filter with a floor)"),
                     ("main_command_twin-peg-insert_2026-11-25.json", "compiled, its recipe then (BC unfiltered)")]


def main_command(res: Results) -> str:
    rows = []
    for name, variant in MAIN_COMMAND_RUNS:
        d = res(name)
        r = d["result"]
        ms = r["milestones"]
        reached = " / ".join("never" if not ms.get(k) else
                             f"{ksteps(ms[k]['env_step'])} ({minutes(ms[k]['wall_s'])} min)" for k in ("0.5", "0.9"))
        n = r["eval_episodes"]
        rows.append([f"`{d['command']}`", variant, d["date"], f"{minutes(r['wall_s'])} min", rnd(r["updates_per_s"], 1),
                     f"{ksteps(r['env_step'])}", reached, pct(r["train_success_rate"]),
                     f"**{rnd(r['eval_success_rate'] * n)} / {n}**"])
    return "\n\n".join([table(["command", "learner", "date", "wall time", "learner updates/s", "env steps",
                               "training success 50 % / 90 % first at (wall)", "final training success",
                               "final checkpoint, deterministic evaluation"], rows),
                        source(*(n for n, _ in MAIN_COMMAND_RUNS))])


def deterministic_gap(res: Results) -> str:
    """Deterministic vs stochastic success of pick-cube checkpoints on the same seeds, and how the mode fails."""
    d = res("deterministic_gap.json")
    rows = []
    for r in d["runs"] + res("deterministic_gap_floor.json")["runs"]:
        det, sto = r["deterministic"], r["stochastic"]
        o = det["outcomes"]
        miss = det["failed_tcp_cube_xy_m_median"]
        trips = "-" if r.get("guard_trips") is None else f"{r['guard_trips']} / {r['train_episodes']}"
        rows.append([r["label"], ksteps(r["env_step"]), pct(r["train_success_rate"]), trips,
                     f"**{pct(det['success_rate'])}**",
                     pct(sto["success_rate"]),
                     f"{o['not moved']} / {o['not lifted']} / {o['lifted, no success']}",
                     "-" if miss is None else f"{rnd(100 * miss, 1)} cm"])
    return "\n\n".join([
        table(["checkpoint (twin-pick-cube, state)", "env steps", "last training success",
               "training episodes the guard stopped", "deterministic",
               "stochastic", "deterministic failures: cube never moved / moved, not lifted / lifted, no success",
               "failures: TCP to cube at the end (median)"], rows),
        f"{d['episodes']} episodes per mode on the same env seeds (from {d['first_seed']}), one thread; 'moved' = "
        f"{rnd(100 * d['moved_m'])} cm, 'lifted' = {rnd(100 * d['lifted_m'])} cm above the start (the twin's "
        f"privileged cube position: metrics only). " + source("deterministic_gap.json",
                                                               "deterministic_gap_floor.json")])


# ---- sample efficiency ------------------------------------------------------------------------------------------

def seed_grid(res: Results, name: str, steps: Sequence[int]) -> str:
    """Per-seed evaluation success at `steps`, first >= bar, best / last; a mean row; a note with the protocol."""
    d = res(name)
    spacing, bar = d["eval_every"], d["success_bar"]
    header = ["seed", *[ksteps(s).replace(".0k", "k") for s in steps], f"first >= {pct(bar)}", "best / last"]
    rows: list[Row] = []
    for r in d["runs"]:
        rows.append([f"seed {r['seed']}", *[pct(at(r["curve"], s, spacing)) for s in steps],
                     ksteps(r["first_step_at_90"]), pcts([r["best_success_rate"], r["final_success_rate"]])])
    rows.append(["mean", *[pct(mean_at(d["runs"], s, spacing)) for s in steps], "", ""])
    train_final = [r["curve"][-1]["train_success_rate"] for r in d["runs"]]
    walls = [r["wall_s"] / 60 for r in d["runs"]]
    n_seeds, jobs = len(d["runs"]), d.get("jobs", len(d["runs"]))
    note = (f"{n_seeds} seed{'s' if n_seeds != 1 else ''}, {d['demos']} scripted demos, {d['steps']:,} env steps, "
            f"{d['eval_episodes']} deterministic evaluation episodes every {d['eval_every']:,} env steps "
            f"({d.get('backend') or 'torch'}, "
            f"{d['time'][:10]}); final training-episode success {rnd(100 * min(train_final))}-"
            f"{rnd(100 * max(train_final))} %; {rnd(min(walls), 1)}-{rnd(max(walls), 1)} min per seed, "
            + ("assembled from finished run directories (their own wall times). " if d.get("from_runs") else
               f"{jobs} seeds sharing the 2 cores. " if jobs > 1 else "one seed at a time. ") + source(name))
    return table(header, rows) + "\n\n" + note


GRID = list(range(2000, 20001, 2000))


def third_party(res: Results) -> str:
    """robot-rl train on gym-hil's pick-cube (random cube position) from a scripted expert's demos: the demo
    defaults, and the generic defaults (what such a run got before them) for reference."""
    name, generic = "third_party_gym_hil_pick_cube.json", "third_party_gym_hil_pick_cube_generic.json"
    d = res(name)
    noisy = [e for e in d["expert"]["by_noise"] if e["noise"] == d["demo_noise"]]
    expert = (f"{d['env_id']} (gym-hil {d['versions'].get('gym-hil', '?')}); the scripted expert succeeds in "
              f"{pct(d['expert']['success_rate'])} of {d['expert']['episodes']} episodes"
              + (f" ({pct(noisy[0]['success_rate'])} with the demos' noise)" if noisy else "")
              + f"; `robot-rl train {' '.join(d['train_flags'])} --demos DIR`, no agent flag (the demo defaults).")
    g = res(generic)
    steps = list(range(d["eval_every"], d["steps"] + 1, d["eval_every"]))
    return "\n\n".join([
        "**The demo defaults** (what `robot-rl train --env-id ... --demos DIR` trains with):",
        seed_grid(res, name, steps), expert,
        f"**The generic defaults** (RLPD without the demo defaults, as such a run trained before them: `-- "
        f"{' '.join(g['extra_flags'])}`):",
        seed_grid(res, generic, steps)])


def se_pick_cube_state(res: Results) -> str:
    return seed_grid(res, "sample_efficiency_twin-pick-cube_state.json", GRID)


def se_peg_insert_state(res: Results) -> str:
    return seed_grid(res, "sample_efficiency_twin-peg-insert_state.json", GRID)


def se_pick_cube_jax(res: Results) -> str:
    return seed_grid(res, "sample_efficiency_twin-pick-cube_state_jax.json", GRID)


PIXEL_RUNS = [("sample_efficiency_twin-pick-cube_pixels64.json", "pick-cube, true reward, teleported resets"),
              ("sample_efficiency_twin-peg-insert_pixels64.json", "peg-insert, true reward, teleported resets"),
              ("sample_efficiency_twin-pick-cube_pixels64_faithful.json",
               "pick-cube, faithful: classifier reward, robot resets, no object state"),
              ("sample_efficiency_twin-pick-cube_pixels64_timing.json",
               "pick-cube, true reward, teleported resets, simulated timing (frames 100 ms, targets 20 ms late)"),
              ("sample_efficiency_twin-pick-cube_pixels64_r10cache3k.json",
               "pick-cube, true reward, teleported resets, a frozen random ResNet-10 via the feature cache (4 crops)"),
              ("sample_efficiency_twin-pick-cube_pixels64_cellenc_defaults.json",
               "pick-cube, true reward, teleported resets, a frozen ResNet-10 pretrained on the 20 demos "
               "(`robot-rl pretrain-encoder`), the feature cache, the state defaults' 5-step returns and Q filters"),
              ("sample_efficiency_twin-pick-cube_pixels64_kptargets6.json",
               "the same at batch 128, each camera's features only its target head's predictions "
               "(`encoder_features=targets`; heads of the 6-target objective, 300 pretraining steps)"),
              ("sample_efficiency_twin-pick-cube_pixels64_kptargets.json",
               "the same with the 9-target heads (the grasp place relative to the gripper added), 1,000 "
               "pretraining steps"),
              ("sample_efficiency_twin-pick-cube_pixels64_kpboth.json",
               "the 6-target heads' predictions beside the light trainable head (`encoder_features=both`, 2 spatial "
               "features, no dropout)"),
              ("sample_efficiency_twin-pick-cube_pixels64_kpboth_rel20k.json",
               "the 9-target heads beside the light trainable head, seed 0 of the 3-seed study below run on to 20k "
               "env steps"),
              ("sample_efficiency_twin-peg-insert_pixels64_kpboth_rel.json",
               "peg-insert, the same setup (heads pretrained on its 20 demos; its recipe's Q filter with the floor 0.1 "
               "in place of the gripper filter)")]


def se_pixels_cellenc(res: Results) -> str:
    """Pick-cube from pixels with a cell-pretrained frozen ResNet-10, batch 128 and a light head, per seed."""
    return _pixel_seeds(res, "sample_efficiency_twin-pick-cube_pixels64_cellenc_b128.json")


def se_pixels_targets(res: Results) -> str:
    """The same with the pretrained file's target-head predictions beside the light head (encoder_features=both)."""
    return _pixel_seeds(res, "sample_efficiency_twin-pick-cube_pixels64_kpboth_rel.json")


def se_pixels_defaults(res: Results) -> str:
    """The pixel defaults as a new task gets them (no agent flag; the encoder pretrained in each run), per seed."""
    return _pixel_seeds(res, "sample_efficiency_twin-pick-cube_pixels64_pixdefaults.json")


def se_pixels_defaults_peg(res: Results) -> str:
    """Peg insertion from pixels with the pixel defaults as a new task gets them (no agent flag), per seed."""
    return _pixel_seeds(res, "sample_efficiency_twin-peg-insert_pixels64_pixdefaults.json")


def _against_pixel_defaults(res: Results, name: str, defaults_label: str, arm_label: str, intro: str,
                            baseline: str = "sample_efficiency_twin-pick-cube_pixels64_pixdefaults.json") -> str:
    """A pixel result's per-seed grid, then its arm beside the pixel defaults' (`baseline`; mean success every 2k
    env steps up to its shortest run)."""
    last = min(r["env_steps_done"] for r in res(name)["runs"]) // 1000 * 1000
    arms = compare([(defaults_label, _runs(res, baseline)), (arm_label, _runs(res, name))], 1000,
                   list(range(2000, last + 1, 2000)))
    return f"{_pixel_seeds(res, name)}\n\n{intro}\n\n{arms}"


LEAN_ARM = "64-wide head, bf16 backbone and updates"
"""The lean pixel learner's arm label: the pixel defaults with `image_latent_dim=64`, `backbone_precision=bf16` and
`mixed_precision=bf16`."""


def se_pixels_lean(res: Results) -> str:
    """The pixel defaults against the lean learner (64-wide trainable head, the frozen backbone and the update's
    forward passes under bf16 autocast), pick-cube, 3 seeds each, per seed and per arm."""
    return _against_pixel_defaults(res, "sample_efficiency_twin-pick-cube_pixels64_lean_bf16.json",
                                   "the pixel defaults", LEAN_ARM,
                                   "Against the pixel defaults (the same 20 demos, seeds and protocol):")


def se_pixels_lean_seed2(res: Results) -> str:
    """The lean learner's seed 2 on pick-cube, resumed from its 10k checkpoint and run on to 20k env steps."""
    return _pixel_seeds(res, "sample_efficiency_twin-pick-cube_pixels64_lean_bf16_seed2_20k.json")


def se_pixels_lean_peg(res: Results) -> str:
    """The same two arms on peg insertion, 3 seeds each, 12k env steps."""
    return _against_pixel_defaults(res, "sample_efficiency_twin-peg-insert_pixels64_lean_bf16.json",
                                   "the pixel defaults", LEAN_ARM,
                                   "Against the pixel defaults on peg insertion (the same protocol):",
                                   baseline="sample_efficiency_twin-peg-insert_pixels64_pixdefaults.json")


def se_pixels_cheap(res: Results) -> str:
    """The pixel defaults against the same with the cheaper learner settings (one cached shift per frame, a 64-wide
    trainable head, the frozen backbone in bf16), 3 seeds each, per seed and per arm."""
    return _against_pixel_defaults(res, "sample_efficiency_twin-pick-cube_pixels64_cheap.json", "the pixel defaults",
                                   "one cached shift, 64-wide head, bf16 backbone",
                                   "Against the pixel defaults (the same 20 demos, seeds and protocol):")


def se_pixels_timing_demotiming(res: Results) -> str:
    """The pixel defaults with the simulated timing on (and the demos recorded under it), true reward, teleported
    scenes, against the same without the timing, per seed and per arm."""
    return _against_pixel_defaults(res, "sample_efficiency_twin-pick-cube_pixels64_timing_demotiming.json",
                                   "the pixel defaults, no timing",
                                   "the same, frames 100 ms and targets 20 ms late, demos recorded so",
                                   "Against the pixel defaults without the timing (the same seeds and protocol; demos "
                                   "on time there):")


def _until(runs: Sequence[dict[str, Any]], last_step: int, spacing: int) -> list[dict[str, Any]]:
    """The runs as if stopped at `last_step` (evaluations binned by `spacing`): curves cut there, the final success
    their last evaluation's, so runs of different lengths compare on the same span."""
    cut = []
    for r in runs:
        curve = [p for p in r["curve"] if p["env_step"] < last_step + spacing // 2]
        cut.append({**r, "curve": curve, "final_success_rate": curve[-1]["success_rate"]})
    return cut


def _arms_to_shortest(res: Results, arms: list[tuple[str, str]], cut_by: tuple[str, ...]) -> tuple[int, str]:
    """(last, table): the arms (label, results file) compared per 1k env steps up to `last`, the shortest run's end
    among the files `cut_by` (whole thousands)."""
    last = min(r["env_steps_done"] for n in cut_by for r in res(n)["runs"]) // 1000 * 1000
    return last, compare([(label, _until(_runs(res, n), last, 1000)) for label, n in arms], 1000,
                         list(range(2000, last + 1, 2000)))


def se_pixels_classifier_timing(res: Results) -> str:
    """The timing arm again with the classifier's reward (teleported scenes), per seed; then the three arms that
    take the faithful mode apart (the true reward; the classifier's; the classifier's with robot resets and a
    person's), each cut at the shortest run's end."""
    name = "sample_efficiency_twin-pick-cube_pixels64_classifier_timing_demotiming.json"
    true_name = "sample_efficiency_twin-pick-cube_pixels64_timing_demotiming.json"
    faithful = "sample_efficiency_twin-pick-cube_pixels64_faithful_opreset3_demotiming_20k.json"
    last, arms = _arms_to_shortest(res, [("the true reward, teleported scenes", true_name),
                                         ("the classifier's reward, teleported scenes", name),
                                         ("the classifier's reward, robot resets, a person's after 3 failures (the "
                                          "faithful mode)", faithful)], cut_by=(name, true_name))
    intro = (f"The three arms to {ksteps(last)} env steps (the same seeds, protocol, timing and demos recorded "
             f"under it; the faithful arm's classifier another one made by the same commands):")
    return f"{_pixel_seeds(res, name)}\n\n{intro}\n\n{arms}"


def se_pixels_classifier_slowlabels(res: Results) -> str:
    """The classifier arm again with a classifier whose labels were recorded backing out 3x slower (record-labels
    --back-out-slowdown 3), per seed; then beside the true reward and the documented classifier, cut at the shortest
    run's end."""
    name = "sample_efficiency_twin-pick-cube_pixels64_classifier_slowlabels_timing_demotiming.json"
    cls_name = "sample_efficiency_twin-pick-cube_pixels64_classifier_timing_demotiming.json"
    true_name = "sample_efficiency_twin-pick-cube_pixels64_timing_demotiming.json"
    last, arms = _arms_to_shortest(res, [("the true reward", true_name),
                                         ("the classifier's reward, labels as documented", cls_name),
                                         ("the classifier's reward, labels backing out 3x slower", name)],
                                   cut_by=(name, cls_name, true_name))
    intro = (f"Beside the other arms to {ksteps(last)} env steps (the same seeds, protocol, timing, demos recorded "
             f"under it and teleported scenes):")
    return f"{_pixel_seeds(res, name)}\n\n{intro}\n\n{arms}"


def _slowlabels_option(res: Results, name: str, label: str) -> str:
    """An option of `train` on the slow-label classifier arm, per seed; then beside that arm without it."""
    base = "sample_efficiency_twin-pick-cube_pixels64_classifier_slowlabels_timing_demotiming.json"
    last, arms = _arms_to_shortest(res, [("without it (the late frames stored, the success where the gate fired)",
                                          base), (label, name)], cut_by=(name, base))
    intro = f"Beside the same arm without it to {ksteps(last)} env steps (the same seeds, classifier and demos):"
    return f"{_pixel_seeds(res, name)}\n\n{intro}\n\n{arms}"


def se_pixels_classifier_aligned(res: Results) -> str:
    """The slow-label classifier arm with the transitions stored on time (train --align-frames)."""
    return _slowlabels_option(res, "sample_efficiency_twin-pick-cube_pixels64_classifier_slowlabels_timing_demotiming"
                              "_aligned.json", "each step stored with its own frames (--align-frames)")


def se_pixels_classifier_credit(res: Results) -> str:
    """The slow-label classifier arm with its success credited to the first positive frame's step (train
    --credit-first-positive)."""
    return _slowlabels_option(res, "sample_efficiency_twin-pick-cube_pixels64_classifier_slowlabels_timing_demotiming"
                              "_credit.json", "the success credited to its first positive frame "
                              "(--credit-first-positive)")


def se_pixels_faithful_notiming(res: Results) -> str:
    """The faithful runs' training again (the timing stayed on there: a bug since fixed), evaluated without the
    simulated timing, per seed."""
    return _pixel_seeds(res, "sample_efficiency_twin-pick-cube_pixels64_faithful_kpboth_notiming.json")


def se_pixels_faithful_tray(res: Results) -> str:
    """A probe: the faithful runs with the pixel defaults in a pick-cube scene with a tray (not kept), per seed."""
    return _pixel_seeds(res, "sample_efficiency_twin-pick-cube_pixels64_faithful_tray.json")


def se_pixels_faithful_opreset(res: Results) -> str:
    """The faithful runs with a person's scene reset after 3 failed training episodes in a row, per seed."""
    return _pixel_seeds(res, "sample_efficiency_twin-pick-cube_pixels64_faithful_opreset3.json")


def se_pixels_faithful_opreset_evalnotiming(res: Results) -> str:
    """The operator-reset faithful runs' training again (the timing stayed on there: a bug since fixed), evaluated
    without the simulated timing, per seed."""
    return _pixel_seeds(res, "sample_efficiency_twin-pick-cube_pixels64_faithful_opreset3_evalnotiming.json")


def se_pixels_faithful_opreset_notiming(res: Results) -> str:
    """The operator-reset faithful runs without the simulated timing, in training and evaluation, per seed."""
    return _pixel_seeds(res, "sample_efficiency_twin-pick-cube_pixels64_faithful_opreset3_notiming.json")


def se_pixels_faithful_opreset_demotiming(res: Results) -> str:
    """The operator-reset faithful runs (timing on) with demos recorded under the same timing, per seed."""
    return _pixel_seeds(res, "sample_efficiency_twin-pick-cube_pixels64_faithful_opreset3_demotiming.json")


def se_pixels_faithful_opreset_demotiming_20k(res: Results) -> str:
    """The same with demos under the timing, 3 seeds to 20k env steps."""
    return _pixel_seeds(res, "sample_efficiency_twin-pick-cube_pixels64_faithful_opreset3_demotiming_20k.json")


def se_pixels_faithful_spread_20k(res: Results) -> str:
    """The same, its 20 demos spread over the workspace (`record-demos --scenes spread`), 3 seeds to 20k."""
    return _pixel_seeds(res, "sample_efficiency_twin-pick-cube_pixels64_faithful_opreset3_demotiming_spread_20k.json")


def se_pixels_faithful_spread_20k_lean(res: Results) -> str:
    """The same with the lean pixel learner (a 64-wide head, bf16 backbone and updates), 3 seeds to 20k."""
    return _pixel_seeds(res, FAITHFUL_SPREAD_20K_LEAN)


FAITHFUL_SPREAD_20K_LEAN = "sample_efficiency_twin-pick-cube_pixels64_faithful_opreset3_demotiming_spread_20k_lean.json"


def se_pixels_faithful_last_action(res: Results) -> str:
    """The same (demos under the timing) with the previous step's action in the observation, per seed."""
    return _pixel_seeds(res, "sample_efficiency_twin-pick-cube-last-action_pixels64_faithful_opreset3_demotiming.json")


def se_pixels_faithful_opreset_intervene(res: Results) -> str:
    """The operator-reset faithful runs with a person's interventions (the twin's scripted operator), per seed."""
    return _pixel_seeds(res, "sample_efficiency_twin-pick-cube_pixels64_faithful_opreset3_intervene.json")


FAITHFUL_SCENES = ("faithful_scenes_seed0.json", "faithful_scenes_seed1.json", "faithful_scenes_early.json")


def faithful_scenes(res: Results) -> str:
    """benchmarks/faithful_scenes.py: a faithful run's policy under robot resets and on teleported scenes."""
    files = [res(name) for name in FAITHFUL_SCENES]
    rows = []
    for r in (r for d in files for r in d["runs"]):
        for env in ("robot resets", "teleported"):
            for policy in ("deterministic", "stochastic"):
                s = r[env][policy]
                rows.append([r["label"], env, policy, pct(s["true_success_rate"]),
                             pct(s["reward_success_rate"]) if env == "robot resets" else "-",
                             pct(s["outside_start_region"]), pct(s["outside_box"]),
                             str(s["longest_unmoved_failures"])])
    return "\n\n".join([
        table(["policy of", "scenes", "actions", "true success", "reward's success", "cube starts outside the "
               "start region", "cube starts outside the box (no grasp reaches it)",
               "longest run of failures that left the cube unmoved"], rows),
        f"{files[0]['episodes']} consecutive episodes per row (the first seeded), the twin's privileged cube "
        "position (metrics only). " + source(*FAITHFUL_SCENES)])


def se_pixels_faithful(res: Results) -> str:
    """The same setup in the faithful mode (classifier reward, robot resets, simulated timing), per seed."""
    return _pixel_seeds(res, "sample_efficiency_twin-pick-cube_pixels64_faithful_kpboth.json")


def _pixel_seeds(res: Results, name: str) -> str:
    d = res(name)
    steps = list(range(d["eval_every"], d["steps"] + 1, d["eval_every"]))
    stopped = [f"seed {r['seed']} at {ksteps(r['env_steps_done'])}" for r in d["runs"] if r["stopped_by_budget"]]
    return seed_grid(res, name, steps) + (f" Stopped before {ksteps(d['steps'])} by the session's time: "
                                          f"{', '.join(stopped)}." if stopped else "")


def se_pixels(res: Results) -> str:
    rows = []
    for name, label in PIXEL_RUNS:
        d = res(name)
        r = d["runs"][0]
        curve = ", ".join(f"{pct(p['success_rate']).removesuffix(' %')}" for p in r["curve"]) + " %"
        stop = " (budget)" if r["stopped_by_budget"] else ""
        rows.append([label, f"{d['image_size']}x{d['image_size']}, {d['eval_episodes']} episodes every "
                     f"{d['eval_every']:,}", curve, ksteps(r["first_step_at_90"]), pct(r["best_success_rate"]),
                     f"{ksteps(r['env_steps_done'])}{stop}", f"{minutes(r['wall_s'])} min",
                     rnd(r["updates_per_s"], 1), f"`{name}`"])
    return table(["run (one seed, both cameras)", "images, evaluation", "evaluation success", "first >= 90 %",
                  "best", "env steps done", "wall", "learner updates/s", "file"], rows)


# ---- ablations: arms compared on the same protocol --------------------------------------------------------------

def _arm_row(label: str, runs: Sequence[dict[str, Any]], spacing: int, steps: Sequence[int],
             late_from: int | None) -> Row:
    firsts = [first_at(r["curve"], 0.9) for r in runs]
    reached = [f for f in firsts if f is not None]
    mean_first = f" (mean {ksteps(mean(reached))})" if len(reached) == len(firsts) else ""
    every = [p["success_rate"] for r in runs for p in r["curve"]]
    row: list[object] = [label, " / ".join(ksteps(f) for f in firsts) + mean_first,
                         pcts([mean_at(runs, s, spacing) for s in steps]), pct(mean(every))]
    if late_from is not None:
        row.append(pct(mean([p["success_rate"] for r in runs for p in r["curve"] if p["env_step"] >= late_from])))
    row.append(pcts([r["final_success_rate"] for r in runs]))
    return row


def compare(arms: Sequence[tuple[str, Sequence[dict[str, Any]]]], spacing: int, steps: Sequence[int],
            late_from: int | None = None) -> str:
    header = ["arm", "first >= 90 % (seeds 0 / 1 / 2)",
              "mean success at " + " / ".join(ksteps(s).replace(".0k", "k") for s in steps),
              "mean of all evaluations"]
    if late_from is not None:
        header.append(f"mean of the evaluations from {ksteps(late_from)}")
    header.append("final (seeds)")
    return table(header, [_arm_row(label, runs, spacing, steps, late_from) for label, runs in arms])


def _runs(res: Results, name: str) -> list[dict[str, Any]]:
    return list(res(name)["runs"])


def _pick_true(res: Results) -> list[dict[str, Any]]:
    return list(res("learned_reward_twin-pick-cube.json")["arms"]["true"]["runs"])


PICK_STEPS = [500, 1000, 2000, 3000, 4000, 5000, 6000]
PEG_STEPS = [1000, 2000, 3000, 4000, 5000, 6000]


def residual(res: Results) -> str:
    pick = compare([("residual RL on the BC base", _runs(res, "sample_efficiency_twin-pick-cube_state_residual.json")),
                    ("RLPD from scratch (+ demos, BC term)", _pick_true(res))], 500, PICK_STEPS)
    peg = compare([("residual RL on the BC base", _runs(res, "sample_efficiency_twin-peg-insert_state_residual.json")),
                   ("RLPD from scratch (+ demos, BC term)",
                    _runs(res, "sample_efficiency_twin-peg-insert_state_mse6k.json"))], 1000, PEG_STEPS)
    return ("Pick-cube (state), 20 evaluation episodes every 500 env steps:\n\n" + pick + "\n\n"
            + source("sample_efficiency_twin-pick-cube_state_residual.json", "learned_reward_twin-pick-cube.json",
                     note="its true-reward arm")
            + "\n\nPeg-insert (state), 20 evaluation episodes every 1,000 env steps:\n\n" + peg
            + "\n\n" + source("sample_efficiency_twin-peg-insert_state_residual.json",
                              "sample_efficiency_twin-peg-insert_state_mse6k.json"))


def hl_gauss(res: Results) -> str:
    pick = compare([("MSE (the recipe)", _pick_true(res)),
                    ("HL-Gauss, default support", _runs(res, "sample_efficiency_twin-pick-cube_state_hlgauss.json"))],
                   500, [2000, 3000, 4000, 5000, 6000], late_from=4500)
    peg = compare([("MSE (the recipe)", _runs(res, "sample_efficiency_twin-peg-insert_state_mse6k.json")),
                   ("HL-Gauss, default support", _runs(res, "sample_efficiency_twin-peg-insert_state_hlgauss.json")),
                   ("HL-Gauss, `hl_gauss_range=-0.5,1.5`",
                    _runs(res, "sample_efficiency_twin-peg-insert_state_hlgauss_fine.json"))], 1000, PEG_STEPS)
    pix = compare([("MSE (the recipe)", _runs(res, "sample_efficiency_twin-pick-cube_pixels64_mse3k.json")),
                   ("HL-Gauss, default support",
                    _runs(res, "sample_efficiency_twin-pick-cube_pixels64_hlgauss3k.json"))], 1000, [1000, 2000, 3000])
    return ("Pick-cube (state), 3 seeds, 20 evaluation episodes every 500 env steps:\n\n" + pick + "\n\n"
            + source("learned_reward_twin-pick-cube.json", "sample_efficiency_twin-pick-cube_state_hlgauss.json")
            + "\n\nPeg-insert (state), 3 seeds, 20 evaluation episodes every 1,000 env steps:\n\n" + peg + "\n\n"
            + source("sample_efficiency_twin-peg-insert_state_mse6k.json",
                     "sample_efficiency_twin-peg-insert_state_hlgauss.json",
                     "sample_efficiency_twin-peg-insert_state_hlgauss_fine.json")
            + "\n\nPick-cube from two 64x64 cameras, 3 seeds, 10 evaluation episodes every 1,000 env steps:\n\n" + pix
            + "\n\n" + source("sample_efficiency_twin-pick-cube_pixels64_mse3k.json",
                              "sample_efficiency_twin-pick-cube_pixels64_hlgauss3k.json"))


WARM_START_RUNS = [("warm_start_twin-pick-cube.json", "pick-cube, online data only"),
                   ("warm_start_twin-pick-cube_retain.json", "pick-cube, offline data retained"),
                   ("warm_start_twin-pick-cube_full.json", "pick-cube, online data only, full length"),
                   ("warm_start_twin-peg-insert.json", "peg-insert, online data only"),
                   ("warm_start_twin-peg-insert_retain.json", "peg-insert, offline data retained")]


def warm_start(res: Results) -> str:
    rows = []
    for name, label in WARM_START_RUNS:
        d = res(name)
        shown = range(0, d["steps"] + 1, 2000 if d["steps"] > 5000 else d["eval_every"])
        for r in d["runs"]:
            curve = [at(r["curve"], s, d["eval_every"]) for s in shown]
            offline = "reused" if d["retain"] else minutes(r["offline_wall_s"])
            rows.append([label, r["seed"], f"{d['offline_updates']:,} / {d['steps']:,}", pct(r["offline_success"]),
                         arrows(curve), f"{pct(r['min_after_switch'])} at {ksteps(r['min_step'])}",
                         pct(r["final_success"]), f"{offline} + {minutes(r['warm_wall_s'])}"])
    notes = []
    for name, _ in WARM_START_RUNS:
        d = res(name)
        if d["retain"]:
            continue
        q = sorted({rnd(r["offline_q_mean"], 2) for r in d["runs"]})
        notes.append(f"`{name}`: {d['demos']} demos + {d['rollouts']} noisy rollouts ({d['rollout_successes']} "
                     f"successful), offline q_mean {'-'.join(q[:1] + q[1:][-1:])}")
    return "\n\n".join([table(["run", "seed", "offline updates / env steps", "offline (switch) level",
                               "evaluation after the switch", "lowest after the switch", "final",
                               "minutes offline + warm start"], rows),
                        "Offline data: " + "; ".join(notes) + ". The retained runs reuse the offline agents of the "
                        "shortened run of their task. " + source(*(n for n, _ in WARM_START_RUNS))])


def interventions(res: Results) -> str:
    d = res("interventions.json")
    steps = list(range(d["args"]["eval_every"], d["args"]["steps"] + 1, d["args"]["eval_every"]))
    rows = []
    for flag, label in [(False, "without interventions"), (True, "with interventions")]:
        runs = [r for r in d["runs"] if r["interventions"] is flag]
        rate = " / ".join(rnd(r["curve"][0]["intervention_rate"], 2) for r in runs) + " → " + " / ".join(
            rnd(r["curve"][-1]["intervention_rate"], 2) for r in runs) if flag else "-"
        per_seed = "; ".join(pcts([at(r["curve"], s, d["args"]["eval_every"]) for s in steps]) for r in runs)
        rows.append([label, *[pct(mean_at(runs, s, d["args"]["eval_every"])) for s in steps], rate, per_seed])
    h = d["human"]
    note = (f"{d['task']}, state, {len(d['args']['seed_list'])} seeds, {d['args']['eval_episodes']} deterministic "
            f"evaluation episodes without the human. The scripted human takes over when the policy's translation "
            f"points away from the expert's (cosine < {h['cos_threshold']} for {h['patience_steps']} steps), drives "
            f"{h['takeover_steps']} steps, at most {rnd(100 * h['max_intervention_fraction'])} % of an episode. "
            + source("interventions.json"))
    header = ["pick-cube, mean of 3 seeds", *[ksteps(s).replace(".0k", "k") for s in steps],
              "intervention rate, first → last evaluation (seeds 0 / 1 / 2)", "per seed (0; 1; 2)"]
    return table(header, rows) + "\n\n" + note


def gym_defaults(res: Results) -> str:
    d = res("gym_defaults.json")
    rows = []
    for r in d["runs"]:
        curve = ", ".join(f"{rnd(p['return'])}" for p in r["curve"])
        rows.append([r["env_id"], rnd(r["bar"]), curve, ksteps(r["first_step_at_bar"]), rnd(r["final_return"]),
                     f"{minutes(r['wall_s'])} min", rnd(r["updates_per_s"], 1)])
    note = (f"`robot-rl train --env-id ENV --max-env-steps {d['steps']}` with no other flags, seed 0, "
            f"{d['eval_episodes']} evaluation episodes every {d['eval_every']:,} env steps, the {len(d['runs'])} runs "
            f"sharing the 2 cores ({d['time'][:10]}). " + source("gym_defaults.json"))
    return table(["env", "bar", "evaluation return at each 1k env steps", "first at the bar", "final", "wall",
                  "learner updates/s"], rows) + "\n\n" + note


DIAGNOSIS_RUNS = [("insertion_diagnosis_base.json", "gripper free, peg and hole positions, one-step targets"),
                  ("insertion_diagnosis_lock.json", "+ gripper locked closed"),
                  ("insertion_diagnosis_peg_relobs.json", "+ the peg's pose relative to the hole"),
                  ("insertion_diagnosis_peg_n5.json", "+ 5-step returns (the recipe)")]


def insertion_diagnosis(res: Results) -> str:
    base = res("insertion_diagnosis_base.json")
    expert = base["expert"]
    e_rows = [[f"{e['noise_std']}", pct(e["success_rate"]), rnd(e["max_force_n"]),
               f"{rnd(100 * e['box_clipped_share'])} %", f"{rnd(100 * e['ref_clip_share'])} %",
               rnd(1000 * e["max_windup_m"])] for e in expert]
    probes = [1000 * k for k in range(1, 9)]
    p_rows = []
    for name, label in DIAGNOSIS_RUNS:
        d = res(name)
        for mode in ("deterministic", "stochastic"):
            curve = [{"env_step": p["env_step"], "success_rate": p[mode]["success_rate"]} for p in d["probes"]]
            p_rows.append([f"{label} (`{name}`)", mode, *[pct(at(curve, s, 1000)) for s in probes]])
    first, last = base["probes"][0], base["probes"][-1]
    six = min(base["probes"], key=lambda p: abs(p["env_step"] - 6000))
    arm_std = first["policy_std"][:6]
    fails = [p["stochastic"] for p in base["probes"] if p["stochastic"]["success_rate"] < 1]
    note = (f"Critic of the first row against the Monte-Carlo return G: deterministic Q - G "
            f"{rnd(first['deterministic']['overestimate'], 2)} at {ksteps(first['env_step'])}, "
            f"{rnd(six['deterministic']['overestimate'], 2)} at {ksteps(six['env_step'])}; stochastic "
            f"{signed(first['stochastic']['overestimate'], 2)} at {ksteps(first['env_step'])}; entropy "
            f"{rnd(first['entropy'], 1)} → {rnd(last['entropy'], 1)}; pre-tanh std of the arm dims at "
            f"{ksteps(first['env_step'])}: {rnd(min(arm_std), 1)}-{rnd(max(arm_std), 1)}; "
            f"failed stochastic episodes ended with the peg tilted "
            f"{rnd(min(f['fail_tilt_rad'] for f in fails), 1)}-{rnd(max(f['fail_tilt_rad'] for f in fails), 1)} rad "
            f"and peak wrist forces {rnd(min(f['max_force_n'] for f in fails))}-"
            f"{rnd(max(f['max_force_n'] for f in fails))} N.")
    return "\n\n".join([
        "The scripted expert under Gaussian action noise (20 episodes each):",
        table(["noise std", "success", "peak wrist force, N", "steps whose target the safety box changed",
               "steps where the reference clip bound", "max target lead, mm"], e_rows),
        "Policy probes every 1,000 env steps (10 episodes each, seed 0):",
        table(["variant", "policy", *[ksteps(s).replace(".0k", "k") for s in probes]], p_rows),
        note + " " + source(*(n for n, _ in DIAGNOSIS_RUNS))])


# ---- the agent a new task gets: probes without the twin recipes -------------------------------------------------

NO_RECIPE_RUNS = [
    ("sample_efficiency_twin-pick-cube_state_norecipe_cand.json", "twin-pick-cube_state.json",
     "pick-cube: every state leaf, the CPU defaults + 5-step, Q-filtered BC 30, demo normalisation, discount 0.95"),
    ("sample_efficiency_twin-pick-cube_state_norecipe_sel.json", "twin-pick-cube_state.json",
     "pick-cube: the same + the task file's state selection"),
    ("sample_efficiency_twin-pick-cube_state_norecipe_sel_utd2.json", "twin-pick-cube_state.json",
     "pick-cube: the same + the recipe's networks and updates (ensemble 4, batch 128, 2 updates/step, 1 critic per "
     "actor update)"),
    ("sample_efficiency_twin-peg-insert_state_norecipe_cand.json", "twin-peg-insert_state.json",
     "peg-insert: task selection, recipe's networks/updates, 5-step, Q-filtered BC 30, demo normalisation"),
    ("sample_efficiency_twin-peg-insert_state_norecipe_nofilter.json", "twin-peg-insert_state.json",
     "peg-insert: the same with the BC term unfiltered"),
]


NO_RECIPE_SEEDS = [
    ("sample_efficiency_twin-pick-cube_state_norecipe_10k.json", "twin-pick-cube_state.json",
     "pick-cube, `--no-recipe`: the task defaults (5-step, Q-filtered BC 30 with the gripper's own filter, x10 "
     "state, discount 0.95, ensemble 4 / subset 2, batch 128, 2 updates per step)"),
    ("sample_efficiency_twin-peg-insert_state_norecipe_scale10_filter.json", "twin-peg-insert_state.json",
     "peg-insert, `--no-recipe`: the task defaults before a locked gripper's floor (and before the gripper's own "
     "filter, which the locked gripper makes moot)"),
    ("sample_efficiency_twin-peg-insert_state_norecipe_floor01.json", "twin-peg-insert_state.json",
     "peg-insert: the task defaults + a dropped demo row's floor 0.1 (`bc_q_filter_floor`; now the default for a "
     "locked gripper, so what `--no-recipe` gives peg-insert)"),
    ("sample_efficiency_twin-pick-cube_state_norecipe_floor01.json", "twin-pick-cube_state.json",
     "pick-cube: the task defaults + the floor 0.1 (its main command: 18 / 20 and 16 / 20)"),
    ("sample_efficiency_twin-pick-cube_state_norecipe_floorarm.json", "twin-pick-cube_state.json",
     "pick-cube: the task defaults + the floor on the arm dims only (the gripper's own filter without one)"),
    ("sample_efficiency_twin-pick-cube_state_norecipe_floor02.json", "twin-pick-cube_state.json",
     "pick-cube: the task defaults + the floor 0.2"),
    ("sample_efficiency_twin-peg-insert_state_norecipe_floor02.json", "twin-peg-insert_state.json",
     "peg-insert: the task defaults + the floor 0.2"),
    ("sample_efficiency_twin-pick-cube_state_norecipe_armfree.json", "twin-pick-cube_state.json",
     "pick-cube: the gripper filtered alone, every arm row cloned (`bc_q_filter_arm` off)"),
    ("sample_efficiency_twin-peg-insert_state_norecipe_warm4k.json", "twin-peg-insert_state.json",
     "peg-insert: the filter off for the first 4,000 updates (2k env steps, `bc_q_filter_start`)"),
    ("sample_efficiency_twin-peg-insert_state_norecipe_own.json", "twin-peg-insert_state.json",
     "peg-insert: the arm dims judged with the policy's own gripper command (`bc_q_filter_arm` own; 2 seeds, "
     "stopped at 2k)"),
    ("sample_efficiency_twin-peg-insert_state_norecipe_mc.json", "twin-peg-insert_state.json",
     "peg-insert: the task defaults + the Monte-Carlo floor under the target (`mc_lower_bound`)"),
    ("sample_efficiency_twin-pick-cube_state_norecipe_defaults.json", "twin-pick-cube_state.json",
     "pick-cube, `--no-recipe`: the task defaults before the gripper's own filter"),
    ("sample_efficiency_twin-pick-cube_state_norecipe_defaults_scale1.json", "twin-pick-cube_state.json",
     "pick-cube: the task defaults with the state unscaled (`--state-scale 1`)"),
    ("sample_efficiency_twin-pick-cube_state_norecipe_b_filter.json", "twin-pick-cube_state.json",
     "pick-cube: the task defaults with per-element demo normalisation (`--obs-norm`) in place of the x10 scale"),
    ("sample_efficiency_twin-pick-cube_state_norecipe_demo3.json", "twin-pick-cube_state.json",
     "pick-cube: the same, the target the min over all 4 critics (no subset)"),
    ("sample_efficiency_twin-peg-insert_state_norecipe_defaults_scale1.json", "twin-peg-insert_state.json",
     "peg-insert: the task defaults with the state unscaled (`--state-scale 1`)"),
    ("sample_efficiency_twin-peg-insert_state_norecipe_b_filter.json", "twin-peg-insert_state.json",
     "peg-insert: the task defaults with `--obs-norm` in place of the x10 scale (seed 1 stopped at 2k)"),
    ("sample_efficiency_twin-reach_state_norecipe_lockedopen.json", "twin-reach_state.json",
     "reach, `--no-recipe`: the task defaults with its gripper locked open (the BC term unfiltered; the recipe "
     "column: its former recipe, 1-step returns, no Q filter, discount 0.9; evaluation every 500 env steps)"),
    ("sample_efficiency_twin-reach_state_norecipe_defaults.json", "twin-reach_state.json",
     "reach, `--no-recipe` with a free gripper: the task defaults with the Q filter (evaluation every 500 env steps, "
     "as on the reach rows below)"),
    ("sample_efficiency_twin-reach_state_norecipe_defaults_scale1.json", "twin-reach_state.json",
     "reach: the task defaults with the state unscaled"),
    ("sample_efficiency_twin-reach_state_norecipe_disc09.json", "twin-reach_state.json",
     "reach: the task defaults + discount 0.9 (its former recipe's)"),
    ("sample_efficiency_twin-reach_state_norecipe_nstep1.json", "twin-reach_state.json",
     "reach: the task defaults + 1-step returns (its former recipe's)"),
    ("sample_efficiency_twin-reach_state_norecipe_nofilter.json", "twin-reach_state.json",
     "reach: the task defaults with the Q filter off (its former recipe's), a free gripper: the same curves as "
     "locked open"),
    ("sample_efficiency_twin-reach_state_norecipe_floor01.json", "twin-reach_state.json",
     "reach: the task defaults + the floor 0.1 (what a gripper locked closed gets)"),
]


def no_recipe_seeds(res: Results) -> str:
    """The task defaults without a recipe, and variants, over 3 seeds, beside the tuned recipe's 3 seeds."""
    rows = []
    for name, recipe_name, label in NO_RECIPE_SEEDS:
        d, base = res(name), res("sample_efficiency_" + recipe_name)
        runs = d["runs"]
        firsts = " / ".join(ksteps(r["first_step_at_90"]) for r in runs)
        finals = pcts([r["final_success_rate"] for r in runs])
        last3 = pcts([sum(p["success_rate"] for p in r["curve"][-3:]) / len(r["curve"][-3:]) for r in runs])
        recipe = " / ".join(ksteps(b["first_step_at_90"]) for b in base["runs"])
        rows.append([label, f"{rnd(d['steps'] / 1000, 1)}k", firsts, finals, last3, recipe, f"`{name}`"])
    return "\n\n".join([table(["configuration (20 evaluation episodes every 1k env steps unless said)", "env steps",
                               "first >= 90 % per seed", "last evaluation per seed",
                               "mean of the last 3 evaluations per seed", "the recipe's first >= 90 % (3 seeds)",
                               "file"], rows),
                        source(*sorted({n for n, _, _ in NO_RECIPE_SEEDS}),
                               *sorted({"sample_efficiency_" + b for _, b, _ in NO_RECIPE_SEEDS}))])


def no_recipe(res: Results) -> str:
    """One-seed probes of generic settings (no task recipe; flags in each file) beside the tuned recipe's 3 seeds."""
    rows = []
    for name, recipe_name, label in NO_RECIPE_RUNS:
        d, base = res(name), res("sample_efficiency_" + recipe_name)
        r = d["runs"][0]
        curve = ", ".join(pct(p["success_rate"]).removesuffix(" %") for p in r["curve"]) + " %"
        recipe_firsts = [b["first_step_at_90"] for b in base["runs"]]
        recipe = " / ".join(ksteps(f) for f in recipe_firsts)
        rows.append([label, curve, ksteps(r["first_step_at_90"]), recipe, f"`{name}`"])
    return "\n\n".join([table(["probe (seed 0, 20 evaluation episodes every 1k env steps)", "evaluation success",
                               "first >= 90 %", "the recipe's first >= 90 % (3 seeds)", "file"], rows),
                        source(*sorted({n for n, _, _ in NO_RECIPE_RUNS}),
                               *sorted({"sample_efficiency_" + b for _, b, _ in NO_RECIPE_RUNS}))])
