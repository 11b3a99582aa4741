"""Tables of the reward benchmarks: the reward classifier (held-out metrics and the k-frame gate), learning with
the classifier's reward, the reset-free forward/backward runs and `robot-rl sim` in the faithful pixel mode."""

from __future__ import annotations

from .fmt import Results, first_at, ksteps, mean, minutes, pct, pcts, rnd, source, table


def classifier(res: Results) -> str:
    d = res("classifier.json")
    rows = []
    for size, s in d["sizes"].items():
        t = s["test"]
        tr = s["training"]
        kinds = [v for k, v in s["test_false_positives_by_kind"].items() if k.startswith("near")]
        near, near_fp = sum(v["negative_frames"] for v in kinds), sum(v["false_positives"] for v in kinds)
        early = " (early stop)" if tr["steps"] < d["args"]["max_steps"] else ""
        rows.append([f"{size}x{size}", f"{tr['steps']:,} steps{early}, **{minutes(tr['seconds'])} min**",
                     rnd(s["threshold"], 3), f"**{rnd(t['precision'], 3)}**", f"**{rnd(t['recall'], 3)}**",
                     rnd(t["fp_per_1000"], 1), rnd(t["roc_auc"], 4), f"{near_fp} of {near:,}", rnd(s["test_ece"], 3)])
    sizes = list(d["sizes"])
    k_rows = []
    for i, k in enumerate(d["sizes"][sizes[0]]["live_gate_with_predicate"]):
        g = [d["sizes"][z]["live_gate_with_predicate"][i] for z in sizes]
        k_rows.append([f"**{k['k']}**" if k["k"] == 3 else k["k"], *[x["false_ends"] for x in g],
                       sum(x["false_ends_in_failed_episodes"] for x in g),
                       " / ".join(str(x["misses"]) for x in g),
                       " / ".join(rnd(x["delay_steps_mean"], 1) for x in g)])
    s0 = d["sizes"][sizes[0]]
    lab, test = s0["labels"]["train"][0], s0["labels"]["test"][0]
    near_train = sum(v for k, v in lab["segments"].items() if k.startswith("near"))
    live = s0["live_gate_with_predicate"][0]
    note = (f"{d['task']}, both twin cameras; training labels {lab['frames']:,} frames in {lab['episodes']} episodes "
            f"({lab['segments']['expert']} expert + {near_train} near misses), held out {test['frames']:,} frames in "
            f"{test['episodes']} episodes; goal precision >= {s0['goal']['precision']} at recall >= "
            f"{s0['goal']['recall']}. The k table replays the gate on {live['episodes']} live episodes per size "
            f"({live['true_success_episodes']} truly succeed); an early end is the gate firing before the true "
            f"success.")
    return "\n\n".join([
        table(["image size", "training", "threshold", "held-out precision", "recall", "FP / 1,000 frames", "ROC-AUC",
               "near-miss frames called success", "calibration error"], rows),
        table(["k", *[f"early ends {z}x{z}" for z in sizes], "ends of failed episodes",
               f"misses ({' / '.join(sizes)})", f"mean delay after true success, steps ({' / '.join(sizes)})"],
              k_rows),
        note + " " + source("classifier.json")])


def learned_reward(res: Results) -> str:
    d = res("learned_reward_twin-pick-cube.json")
    rows = []
    for arm, label in [("true", "the twin's true success"), ("learned", "the classifier's gated reward")]:
        runs = d["arms"][arm]["runs"]
        rows.append([label, " / ".join(ksteps(r["first_step_at_90"]) for r in runs),
                     ksteps(d["arms"][arm]["mean_first_step_at_90"]), pcts([r["final_success_rate"] for r in runs])])
    c = res("classifier_learned_reward.json")["sizes"]["64"]
    note = (f"Learned / true env steps to 90 %: **{rnd(d['ratio_learned_to_true'], 2)}x** (goal <= "
            f"{d['goal_ratio']}x). "
            f"The classifier ended {d['learned_ended_by_classifier']} of {d['learned_training_episodes']} training "
            f"episodes, {d['learned_false_ends']} of them ({rnd(100 * d['learned_false_end_share'], 1)} % of all "
            f"episodes) without true success. Its card: 64x64, both cameras, threshold {rnd(c['threshold'], 3)}, "
            f"held-out precision {rnd(c['test']['precision'], 3)} / recall {rnd(c['test']['recall'], 3)}. "
            f"{len(d['seeds'])} seeds per arm, {d['steps']:,} env steps, {d['eval_episodes']} evaluation episodes "
            f"every {d['eval_every']} env steps scored by the true success. "
            + source("learned_reward_twin-pick-cube.json", "classifier_learned_reward.json"))
    return table(["reward", "first >= 90 % (seeds 0 / 1 / 2)", "mean", "final"], rows) + "\n\n" + note


FB_RUNS = [
    ("forward_backward_classifier.json", "classifiers, expert + noisy labels, 3 cm walls"),
    ("forward_backward.json", "true success (privileged), 3 cm walls"),
    ("forward_backward_classifier_3cm_walls.json", "classifiers + relocate near misses, rewards withdrawn, 3 cm walls"),
    ("forward_backward_classifier_demos_tray.json", "as above, 5 cm walls, demos from tray starts"),
    ("forward_backward_classifier_demos50.json", "5 cm walls, **50 demos** per direction (zone starts)"),
    ("forward_backward_classifier_qfilter.json",
     "**today's recipe**: Q-filtered BC term, withdrawn rewards stored as terminal, 50 demos"),
    ("forward_backward_classifier_relabel.json",
     "today's recipe, forward classifier retrained on the audits (`audit-labels --true-success`)"),
]


def forward_backward(res: Results) -> str:
    rows = []
    for name, label in FB_RUNS:
        d = res(name)
        for r in d["runs"]:
            fwd = [p["forward_success_rate"] for p in r["curve"]]
            bwd = [p["backward_success_rate"] for p in r["curve"]]

            def span(xs: list[float], full: bool) -> str:
                if full:
                    return pcts(xs)
                return f"{pct(min(xs)).removesuffix(' %')}-{pct(max(xs))} (final {pct(xs[-1])})"

            rows.append([f"{label} (`{name}`)", r["seed"], ksteps(r["env_steps_done"]).replace(".0k", "k"),
                         span(fwd, len(fwd) <= 12), span(bwd, len(bwd) <= 4),
                         f"{r['handovers']} ({r['handovers_without_true_success']})", r["false_positive_handovers"],
                         r["timeout_handovers"], f"{minutes(r['wall_s'])} / {minutes(r['cpu_s'])} min"])
    return "\n\n".join([fb_goal(res), table(["run (file)", "seed", "env steps", "forward evaluation (every 2k)",
                               "backward evaluation", "hand-overs (without true success)",
                               "false-positive hand-overs refused", "timeout hand-overs", "wall / CPU"], rows),
                        "One seed per row, state policy, 20 scripted demos per direction unless the row says 50, "
                        "evaluation every 2,000 env steps on 20 deterministic episodes per direction from the usual "
                        "start zones. Files in `benchmarks/results/`, each with its figure."])


def fb_goal(res: Results, name: str = "forward_backward_classifier_qfilter.json", bar: float = 0.8,
            held_from: int = 16000) -> str:
    """The goal paragraph: today's recipe against 'forward >= 80 % within 16k env steps, and held'."""
    runs = res(name)["runs"]
    later = [(r["seed"], p["forward_success_rate"]) for r in runs for p in r["curve"] if p["env_step"] >= held_from]
    below = [f"{pct(x)} (seed {seed})" for seed, x in later if x < bar - 1e-9]
    last4 = [mean([p["forward_success_rate"] for p in r["curve"][-4:]]) for r in runs]
    seeds = " / ".join(str(r["seed"]) for r in runs)
    return (f"Today's recipe (`{name}`, seeds {seeds}): the forward policy's evaluation first reaches "
            f"{pct(bar)} at {' / '.join(ksteps(first_at(r['curve'], bar, 'forward_success_rate')) for r in runs)} "
            f"env steps; from {ksteps(held_from)} on {len(later) - len(below)} of {len(later)} evaluations are >= "
            f"{pct(bar)} (the others: {', '.join(below) or 'none'}) and the last four average {pcts(last4)}; the "
            f"backward policy first reaches {pct(bar)} at "
            f"{' / '.join(ksteps(first_at(r['curve'], bar, 'backward_success_rate')) for r in runs)}; "
            f"{' / '.join(str(r['teleports_after_first_reset']) for r in runs)} teleports after the first reset.")


def classifier_rollouts_pretrained(res: Results) -> str:
    """The noisy arm again beside the same labels on a frozen ResNet-10 pretrained on the label frames."""
    return classifier_rollouts(res, "classifier_rollouts_pretrained.json")


def classifier_rollouts(res: Results, name: str = "classifier_rollouts.json") -> str:
    d = res(name)

    def p3(v: float | None) -> str:
        return "-" if v is None else rnd(v, 3)

    rows = []
    for a in d["arms"]:
        t = a["total"]
        wins = "; ".join(f"{ksteps(w['env_step'])}: {p3(w.get('frame_precision'))} / {p3(w.get('frame_recall'))}"
                         for w in a["windows"])
        arm = a["arm"] + (" (ResNet-10 pretrained on the labels)" if a.get("encoder") == "resnet10" else "")
        rows.append([arm, f"{a['label_frames']:,}", f"{p3(a['validation_precision'])} / "
                     f"{p3(a['validation_recall'])}", f"**{p3(t.get('frame_precision'))} / "
                     f"{p3(t.get('frame_recall'))}**",
                     f"{t.get('frame_tp')} / {t.get('frame_fp')} / {t.get('frame_fn')}",
                     wins, f"{a['ended_without_true_success']} of {a['ended_by_model']}",
                     f"{pct(a['final_success_rate'])} (best {pct(a['best_success_rate'])})"])
    args = d["args"]
    note = (f"One seed ({args['seed']}), {args['steps']:,} env steps per run, state recipe, 20 scripted demos, "
            f"evaluation {args['eval_episodes']} episodes every {args['eval_every']} steps (true success). Precision / "
            f"recall per evaluation window: of the training frames since the previous evaluation ('-': no positive "
            f"decision, or no truly successful frame). " + source(name))
    return "\n\n".join([table(["classifier", "label frames", "validation P / R", "rollouts P / R",
                               "tp / fp / fn frames", "per window P / R", "episodes ended wrongly",
                               "final eval"], rows), note])


FAITHFUL_REWARD_RUNS = [
    ("sample_efficiency_twin-pick-cube_pixels64_faithful_kpboth.json", "robot resets, timing on"),
    ("sample_efficiency_twin-pick-cube_pixels64_faithful_tray.json", "robot resets, a tray (probe), timing on"),
    ("sample_efficiency_twin-pick-cube_pixels64_faithful_opreset3.json", "+ a person's scene resets, timing on"),
    ("sample_efficiency_twin-pick-cube_pixels64_faithful_opreset3_notiming.json",
     "+ a person's scene resets, timing off"),
    ("sample_efficiency_twin-pick-cube_pixels64_faithful_opreset3_demotiming.json",
     "+ a person's scene resets, timing on, demos under the timing"),
    ("sample_efficiency_twin-pick-cube_pixels64_faithful_opreset3_demotiming_20k.json",
     "+ a person's scene resets, timing on, demos under the timing, 20k"),
    ("sample_efficiency_twin-pick-cube_pixels64_faithful_opreset3_intervene.json",
     "+ a person's scene resets and interventions, timing on"),
    ("sample_efficiency_twin-pick-cube_pixels64_classifier_timing_demotiming.json",
     "teleported scenes (not the faithful mode), timing on, demos under it"),
    ("sample_efficiency_twin-pick-cube_pixels64_classifier_slowlabels_timing_demotiming.json",
     "the same, the classifier's labels backing out 3x slower"),
]


def classifier_faithful_rollouts(res: Results) -> str:
    """The classifier that gives a pixel run its reward (the faithful runs, and one with teleported scenes), judged
    on that run's own training episodes against the twin's truth: per episode (did it end the episodes that truly
    succeeded, and only those) and per frame."""
    rows = []
    for name, label in FAITHFUL_REWARD_RUNS:
        d = res(name)
        for r in d["runs"]:
            c = r["curve"][-1]
            true, ended, false = (c["reward_true_success_episodes"], c["reward_ended_by_model"],
                                  c["reward_ended_without_true_success"])
            hits = ended - false
            rows.append([label, r["seed"], ksteps(r["env_steps_done"]), c["reward_episodes"], true, ended, false,
                         rnd(hits / ended, 2) if ended else "-", rnd(hits / true, 2) if true else "-",
                         rnd(c["reward_frame_precision"], 2) if c.get("reward_frame_precision") is not None else "-",
                         rnd(c["reward_frame_recall"], 2)])
    note = ("Per run, over all its training episodes: an episode truly succeeded when the twin's success held at its "
            "last step; episode precision = the classifier's ends with the true success / all its ends, episode "
            "recall = those / the truly successful episodes (an episode the classifier did not end but that ended "
            "truly successful, at its step limit, is a miss). Frames: every training frame's classifier decision "
            "(before the k-gate) against the twin's truth at the step the frame was rendered (twin-only; hardware "
            "has no truth)")
    return "\n\n".join([table(["pixel run with the classifier's reward", "seed", "env steps", "training episodes",
                               "truly successful", "ended by the classifier", "of them without true success",
                               "episode precision", "episode recall", "frame precision", "frame recall"], rows),
                        source(*(n for n, _ in FAITHFUL_REWARD_RUNS), note=note)])


MAIN_COMMAND_FAITHFUL_RUNS = [
    ("main_command_twin-pick-cube_faithful_pixels_side.json",
     "the commands above as printed (labels across the 5 cm line and up to 35 cm with the side camera's frames, "
     "`--target-precision 0.995`), as they run on this CPU (native bf16: the lean pixel learner by default), demos "
     "spread over the workspace"),
    ("main_command_twin-pick-cube_faithful_pixels_side_run2.json",
     "the same commands run again (the classifier came out the same, threshold and all; a second draw of the run's "
     "process timing and sampling)"),
    ("main_command_twin-pick-cube_faithful_pixels_side_run3.json",
     "the same commands, a third run (its audit log made the `side_audit` classifier)"),
    ("main_command_twin-pick-cube_faithful_pixels_side_run4.json",
     "the same commands, a fourth run, on another machine (the same labels; its classifier's threshold 0.984, not "
     "0.988; its audit log made `side_audit4`)"),
    ("main_command_twin-pick-cube_faithful_pixels_side_run5.json",
     "the same commands, a fifth run (its audit log, with the lead frames before each positive, made `side_audit5`)"),
    ("main_command_twin-pick-cube_faithful_pixels_side_audit.json",
     "the audit round: the same commands with `side_audit5` as the reward (the fifth run's audit log, its hard "
     "negatives and the lead frames' hard positives, `audit-labels --true-success`, as a fifth label set)"),
    ("main_command_twin-pick-cube_faithful_pixels_side_audit_p99.json",
     "the audit round with `--target-precision 0.99` (`side_audit5_p99`) as the reward"),
    ("main_command_twin-pick-cube_faithful_pixels_level.json",
     "the commands above with `--cameras front,wrist,level` on the four record-labels commands: the twin's `level` "
     "camera, at the height of the 5 cm line, instead of `side`"),
    ("main_command_twin-pick-cube_faithful_pixels_side_level.json",
     "the same with `--cameras front,wrist,side,level`: both reward cameras"),
    ("main_command_twin-pick-cube_faithful_pixels_level_s1.json",
     "the level row's four label sets and a fifth of 6,000 frames across the line (`labels_line2`), the classifier on "
     "the level camera alone (`train-classifier --cameras images/level`), its conv net's first stride 1 (the default "
     "now)"),
    ("main_command_twin-pick-cube_faithful_pixels_level_s1_audit.json",
     "the audit round on the row before: its audit log as a sixth label set with every camera (`audit-labels "
     "--all-cameras`), the classifier on the level and wrist cameras, first stride 1"),
    ("main_command_twin-pick-cube_faithful_pixels_boundary.json",
     "the commands above without `--cameras` (a classifier on the policy's front and wrist cameras only)"),
    ("main_command_twin-pick-cube_faithful_pixels_spread_lean.json",
     "the commands before (the first two record-labels commands without `--back-out-slowdown`, `train-classifier` "
     "defaults), the lean pixel learner (given as three `--set` flags: the run predates the default), demos spread"),
    ("main_command_twin-pick-cube_faithful_pixels_spread.json",
     "the same in float32 (the defaults before; a GPU's): sim's demos spread over the workspace (`record-demos "
     "--scenes spread`)"),
    ("main_command_twin-pick-cube_faithful_pixels.json", "the same, before: demos on seeds 0-19"),
    ("main_command_twin-pick-cube_faithful_pixels_slowlabels.json",
     "demos on seeds 0-19, `--back-out-slowdown 3` on both record-labels commands"),
]
"""(results file, how its demos and its classifier's labels were recorded)."""


_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
             "eleventh", "twelfth", "thirteenth", "fourteenth")


def sim_row(name: str) -> str:
    """'the fifth row of the table of `sim` runs' for the results file `main_command_twin-pick-cube_<name>.json`:
    the captions follow the table's order when rows are added."""
    files = [n for n, _ in MAIN_COMMAND_FAITHFUL_RUNS]
    return f"the {_ORDINALS[files.index(f'main_command_twin-pick-cube_{name}.json')]} row of the table of `sim` runs"


def main_command_faithful(res: Results) -> str:
    """`robot-rl sim` in the hardware-faithful pixel mode, end to end: the final deterministic evaluation in the
    twin's true success beside the classifier's count, the person's scene resets, the wall time."""
    rows = []
    for name, labels in MAIN_COMMAND_FAITHFUL_RUNS:
        d = res(name)
        r = d["result"]
        n = r["eval_episodes"]
        timing = r.get("timing") or {}
        frames = r.get("reward_model_frames")
        if frames:
            tp, fp, fn = frames["tp"], frames["fp"], frames["fn"]
            frame_pr = f"{rnd(tp / (tp + fp), 2) if tp + fp else '-'} / {rnd(tp / (tp + fn), 2) if tp + fn else '-'}"
        else:
            frame_pr = "-"
        on = r.get("reward_model_onsets")
        onsets = (f"{on['onset_early']} / {on['onset_on_time']} / {on['onset_late']} / {on['onset_missed']}"
                  if on else "-")
        rows.append([labels, f"`{d['command']}`", d["date"], f"{minutes(r['wall_s'])} min", ksteps(r["env_step"]),
                     f"{r['episodes']}", f"{r['guard_stops']}", f"{r['operator_scene_resets']}",
                     pct(r["train_success_rate"]), frame_pr, onsets,
                     f"**{rnd(r['eval_true_success_rate'] * n)} / {n}**", f"{rnd(r['eval_success_rate'] * n)} / {n}",
                     " / ".join(f"{rnd(timing[k])} ms" for k in ("camera_latency_ms", "action_delay_ms")
                                if k in timing) or "-"])
    return "\n\n".join([table(["demos and the classifier's labels", "command", "date",
                               "wall time (demos, encoder pretraining, training, evaluation)",
                               "env steps", "training episodes", "safety-guard stops (each ends its episode)",
                               "scene resets by a person",
                               "final training success (the classifier's)",
                               "classifier frame P / R in training (against the truth; - not recorded)",
                               "training episodes by the classifier's first positive against the first true "
                               "frame: early / on time / late / never",
                               "final checkpoint, deterministic: true success",
                               "the same, the classifier's count", "frames / targets late"], rows),
                        source(*(n for n, _ in MAIN_COMMAND_FAITHFUL_RUNS))])


CLASSIFIER_BOUNDARY_ARMS = {
    "readme": "the commands before (1,500 + 1,500 frames, the expert backing out at its own speed, lifting 12 cm)",
    "slow3": "the same with `--back-out-slowdown 3` on both record-labels commands",
    "slow3_6k": "`--back-out-slowdown 3`, twice the frames (3,000 + 3,000; seeds 40000 / 50000)",
    "lift": "the same labels plus 3,000 frames lifted 12-35 cm (`--lift-cm 12 35 --hold-steps 25 --back-out-slowdown "
            "3 --frames 3000 --seed 60000`)",
    "line": "the labels of the row before (backing out slower, lifted 12-35 cm) plus 3,000 frames lifted 3-8 cm "
            "(`--lift-cm 3 8 --hold-steps 25 --back-out-slowdown 3 --frames 3000 --seed 70000`)",
    "line_seed1": "the same, `train-classifier --seed 1`",
    "recipe": "the commands above (4 x 1,500 frames: backing out 3x slower, noisy, lifted 12-35 cm, lifted 3-8 cm) "
              "at the default target precision 0.99",
    "recipe_seed1": "the same, `train-classifier --seed 1`",
    "recipe_p995": "the commands above without `--cameras` (front and wrist frames only), `--target-precision "
                   "0.995`",
    "recipe_p995_seed1": "the same, `train-classifier --seed 1`",
    "side": "the commands above as printed: the same labels with the side camera's frames too (`--cameras "
            "front,wrist,side`)",
    "side_seed1": "the same, `train-classifier --seed 1`",
    "side_w06": "`side` with its card's predicate allowing fingers at most 6 cm apart (the twin's 'held'), not 7",
    "side_seed1_w06": "`side_seed1` with the same 6 cm predicate",
    "side_audit": "`side` retrained with a fifth label set: the third run's audit log (its actors' positive frames, "
                  "`audit-labels --true-success`, 833 frames)",
    "side_audit4": "the audit round as printed: `side` retrained with the fourth run's audit log as a fifth label set "
                   "(`audit-labels --audit RUN/reward_audit --true-success`: 658 frames, 30 failures)",
    "side_noshift": "`side` trained without random shifts (`--shift-pad 0`)",
    "side_audit4_p99": "`side_audit4` at `--target-precision 0.99`",
    "side_audit5": "the audit round as printed, the audit log with its lead frames: `side` retrained with the fifth "
                   "run's audit log as a fifth label set (1,855 frames: 910 positives, 37 of them failures, and 945 "
                   "lead frames, 164 of them successes)",
    "side_audit5_p99": "`side_audit5` at `--target-precision 0.99`",
    "level": "the commands above with the level camera's frames instead of the side camera's (`--cameras "
             "front,wrist,level`)",
    "level_noshift": "`level` trained without random shifts (`--shift-pad 0`)",
    "level_dense": "`level` with a fifth label set of 3,000 frames held 4-6 cm up (`--lift-cm 4 6 --frames 3000 "
                   "--seed 60000`, the rest as the line set)",
    "level_cam_s1_line2": "the level row's labels and `labels_line2` (6,000 frames across the line), the level camera "
                          "alone (`--cameras images/level`), first stride 1",
    "level_cam_s1": "the level row's four label sets, the level camera alone, first stride 1",
    "level_cam_s1_line2_p06": "`level_cam_s1_line2` with its card's predicate narrowed to the task's held width "
                              "(`state[12]<=0.06` instead of 0.07)",
    "level_wrist_s1_audit": "`level_cam_s1_line2`'s labels and the audit log of the run it rewarded (`audit-labels "
                            "--all-cameras --true-success`), the level and wrist cameras, first stride 1",
    "side_level": "the commands above with both reward cameras' frames (`--cameras front,wrist,side,level`)",
}


def classifier_boundary(res: Results, name: str = "classifier_boundary.json",
                        policy: str = "the faithful `robot-rl sim` run with its demos on seeds 0-19, the float32 row "
                                      "'demos on seeds 0-19' above") -> str:
    """Classifiers judged on the same frames of a trained faithful pixel policy's rollouts (success not ending them):
    frame precision / recall in all and up to the k-gate's end, how late the first positive comes after the twin's
    success, where the gate ends, and the share of frames called positive per height band of the cube; where the
    results hold the reward model's decision (the card's proprio predicate too), a row for it below each classifier's.
    `policy` names the run whose final checkpoint was rolled out."""
    d = res(name)

    def pr(x: dict[str, float | None]) -> str:
        vals = [x[k] for k in ("precision", "recall")]
        return " / ".join("-" if v is None else rnd(v, 3) for v in vals)

    rows, band_rows = [], []
    for a in d["arms"]:
        label = CLASSIFIER_BOUNDARY_ARMS.get(a["name"], a["name"])
        shown = [(label, a)]
        if "reward_model" in a:
            shown.append(("... as the reward model decides (+ the card's predicate)", {**a, **a["reward_model"]}))
        for lab, x in shown:
            rows.append([lab, rnd(x["threshold"], 2), pr(x["validation"]), pr(x["all_frames"]), pr(x["until_gate"]),
                         f"{x['gate_ends']} ({x['gate_ends_without_truth']})", x["never_fired"],
                         rnd(x["lateness_median"]), pct(x["on_time_or_early_share"]),
                         f"{rnd(x['height_at_first_positive_cm_median'], 1)} cm", rnd(x["gate_delay_median"], 1)])
        band_rows.append([label, *("-" if b["positive_share"] is None else pct(b["positive_share"])
                                   for b in a["bands"])])
    bands = [f"{b['band_cm'][0]:g}-{b['band_cm'][1]:g} cm ({b['true']} of {b['frames']} true)"
             for b in d["arms"][0]["bands"]]
    bands[0] = bands[0].replace("-1-", "< ")
    a0 = d["args"]
    note = (f"{d['frames']:,} frames of {a0['episodes']} episodes of the final checkpoint of {policy} "
            f"({'deterministic' if a0['deterministic'] else 'sampled'} actions, the run's timing: "
            f"frames {rnd(d['timing'].get('camera_latency_ms', 0))} ms late, targets "
            f"{rnd(d['timing'].get('action_delay_ms', 0))} ms; success does not end an episode; a frame compared "
            f"with the twin's truth of the step it was rendered at), "
            f"{d['true_frames']:,} of them truly successful; {d['time'][:10]}. "
            f"'until the gate': each episode's frames up to the step the k = {a0['gate_k']} gate would have ended "
            f"it (what a training run's frame counts cover). Lateness: first positive frame's step minus the first "
            f"truly successful frame's, per episode with a true success")
    predicates = sorted({", ".join(a["reward_model"]["predicate"]) or "none" for a in d["arms"] if "reward_model" in a})
    if predicates:
        note += (". 'As the reward model decides': a frame positive only where the card's proprio predicate ("
                 + "; ".join(f"`{p}`" for p in predicates) + ") holds too, on the state the policy saw with the frame")
    return "\n\n".join([
        table(["classifier", "threshold", "validation P / R", "all frames P / R", "until the gate P / R",
               "episodes the gate ends (at a frame without truth)", "truly successful episodes it never fires on",
               "first positive: steps late (median)", "on time or early", "cube height at first positive (median)",
               "gate end: steps after the truth (median)"], rows),
        table(["share of frames called success, by the cube bottom's height", *bands], band_rows),
        source(name, note=note)])


def classifier_boundary_lift(res: Results) -> str:
    """The same rollouts judged again, with a classifier whose labels also show the cube lifted 12-35 cm."""
    return classifier_boundary(res, "classifier_boundary_lift.json")


def _on_sim_run(res: Results, label: str, run: str, policy: str, reward: str) -> str:
    """`classifier_boundary` of `classifier_boundary_<label>.json`, on the rollouts of the sim run `run` (its results
    file's name after `main_command_twin-pick-cube_`), whose reward was the classifier `reward`."""
    return classifier_boundary(res, f"classifier_boundary_{label}.json",
                               policy=f"{policy} (`{reward}`; {sim_row(run)})")


def classifier_boundary_line_boundary_run(res: Results) -> str:
    """The same classifiers on another policy's rollouts: the final checkpoint of the faithful sim run whose reward was
    the documented commands' classifier."""
    return _on_sim_run(res, "line_boundary_run", "faithful_pixels_boundary",
                       "the faithful `robot-rl sim` run rewarded by the front-and-wrist classifier", "recipe_p995")


def classifier_boundary_line(res: Results) -> str:
    """The same rollouts judged again, with classifiers whose labels also hold the cube 3-8 cm up (across the task's
    5 cm line), each also as the reward model decides (its proprio predicate)."""
    return classifier_boundary(res, "classifier_boundary_line.json")


def classifier_boundary_side(res: Results) -> str:
    """The seeded policy's rollouts judged by classifiers that also read the twin's side camera (a separate camera for
    the classifier, beside the policy's front and wrist), against the same labels without it."""
    return classifier_boundary(res, "classifier_boundary_side.json")


def classifier_boundary_side_boundary_run(res: Results) -> str:
    """The same on the rollouts of the faithful sim run rewarded by the front-and-wrist classifier."""
    return _on_sim_run(res, "side_boundary_run", "faithful_pixels_boundary",
                       "the faithful `robot-rl sim` run rewarded by the front-and-wrist classifier", "recipe_p995")


def classifier_boundary_side_run(res: Results) -> str:
    """The same on the rollouts of the faithful sim run rewarded by the side-camera classifier itself."""
    return _on_sim_run(res, "side_run", "faithful_pixels_side", "the faithful `robot-rl sim` run of the commands "
                       "above, rewarded by their side-camera classifier", "side")


def classifier_boundary_side_run2(res: Results) -> str:
    """The same on the rollouts of the second faithful sim run of the same commands, each false positive listed in
    the results file."""
    return _on_sim_run(res, "side_run2", "faithful_pixels_side_run2",
                       "the second faithful `robot-rl sim` run of the commands above", "side")


def classifier_boundary_side_run3(res: Results) -> str:
    """The same on the rollouts of the third faithful sim run of the same commands, with a classifier retrained on
    that run's audit log."""
    return _on_sim_run(res, "side_run3", "faithful_pixels_side_run3",
                       "the third faithful `robot-rl sim` run of the commands above", "side")


def classifier_boundary_side_run4(res: Results) -> str:
    """The same on the rollouts of the fourth faithful sim run, with the audit round's classifier and two variants."""
    return _on_sim_run(res, "side_run4", "faithful_pixels_side_run4",
                       "the fourth faithful `robot-rl sim` run of the commands above", "side")


def _on_level_run(res: Results, label: str) -> str:
    """`_on_sim_run` of `classifier_boundary_<label>.json` on the rollouts of the sim run rewarded by the level camera's
    classifier (its own table and the probes beside it)."""
    return _on_sim_run(res, label, "faithful_pixels_level",
                       "the faithful `robot-rl sim` run rewarded by the level camera's classifier", "level")


def classifier_boundary_level_run(res: Results) -> str:
    """The same on the rollouts of the sim run rewarded by a classifier on the level camera, beside the side camera's
    classifier from the same commands."""
    return _on_level_run(res, "level_run")


def classifier_boundary_level_noshift_probe(res: Results) -> str:
    """The level camera's classifier on its own run's rollouts, beside the same labels trained without random shifts."""
    return _on_level_run(res, "level_noshift_probe")


def classifier_boundary_level_dense_probe(res: Results) -> str:
    """The level camera's classifier on its own run's rollouts, beside the same labels with 3,000 more frames held
    4-6 cm up."""
    return _on_level_run(res, "level_dense_probe")


def classifier_boundary_side_level_run(res: Results) -> str:
    """The same on the rollouts of the sim run rewarded by a classifier on both reward cameras."""
    return _on_sim_run(res, "side_level_run", "faithful_pixels_side_level",
                       "the faithful `robot-rl sim` run rewarded by the classifier on both reward cameras",
                       "side_level")


LINE_PROFILE_ARMS = {
    "level": "the four commands with `--cameras front,wrist,level`, all three cameras, every stride 2 (the default "
             "before)",
    "level_cam": "the same labels, the level camera only (`--cameras images/level`), every stride 2",
    "level_line2": "the four label sets and `labels_line2` (6,000 more frames across the line), all three cameras, "
                   "every stride 2",
    "level_cam_line2": "the five label sets, the level camera only, every stride 2",
    "level_s1_line2": "the five label sets, all three cameras, first stride 1 (the default now)",
    "level_cam_s1": "the four label sets, the level camera only, first stride 1",
    "level_cam_s1_line2": "the five label sets, the level camera only, first stride 1 (the tenth `sim` run's reward)",
    "level_cam_s1_audit": "the same with a sixth label set: the tenth `sim` run's audit log (`audit-labels "
                          "--true-success`)",
    "level_wrist_s1_line2": "the five label sets, the level and wrist cameras, first stride 1",
    "level_wrist_s1_audit": "the same with the audit log's label set (the level and wrist cameras' frames)",
}
"""classifier_line_profile arm name -> what its classifier was trained on (`train-classifier --target-precision
0.995`; the labels as in the faithful sim table's level row)."""


def classifier_line_profile(res: Results, name: str = "classifier_line_profile.json") -> str:
    """What the level camera's pixels hold at pick-cube's line (the lowest cube-coloured row against the cube's height
    and the truth), and where classifiers put the line on the same scripted expert frames (share called a success
    per height band)."""
    d = res(name)
    a0 = d["args"]
    parts = []
    for cam, rows in d["lowest_cube_rows"].items():
        parts.append(table([f"`{cam}` camera: lowest image row with a cube-coloured pixel", "frames",
                            "cube bottom's height", "truly a success"],
                           [[r["row"], r["frames"], f"{r['height_cm_min']:.2f}-{r['height_cm_max']:.2f} cm",
                             pct(r["true_share"])] for r in rows]))
    bands = [f"{b['lo_cm']:g}-{b['hi_cm']:g} cm ({b['frames']})" for b in d["arms"][0]["bands"]]
    rows = [[LINE_PROFILE_ARMS.get(a["name"], a["name"]),
             f"{minutes(a['train_seconds'])} min" if a.get("train_seconds") else "-",
             rnd(a["threshold"], 3),
             f"{rnd(a['precision'], 3)} / {rnd(a['recall'], 3)}",
             *("-" if b["positive_share"] is None else pct(b["positive_share"]) for b in a["bands"])]
            for a in d["arms"]]
    parts.append(table(["classifier (train-classifier on); share of frames called a success by the cube bottom's "
                        "height (frames) ->", "training time (one thread)", "threshold", "all frames P / R", *bands],
                       rows))
    note = (f"{d['frames']:,} frames of {a0['segments']} scripted expert segments on seeds {a0['seed']}-"
            f"{a0['seed'] + a0['segments'] - 1} (no label set's), {a0['image_size']}x{a0['image_size']}, the cube "
            f"lifted 3-8 cm, held 25 steps and backed out 3x slower; {d['true_frames']:,} truly successful; "
            f"{d['time'][:10]}. Heights and truth are the twin's (privileged); the rows table counts frames 3-9 cm up. "
            f"Training time: the card's, one torch thread, most classifiers trained two at a time on this 2-core "
            f"machine")
    parts.append(source(name, note=note))
    return "\n\n".join(parts)


def _on_level_s1_run(res: Results, label: str) -> str:
    """`_on_sim_run` of `classifier_boundary_<label>.json` on the rollouts of the sim run rewarded by the level camera
    alone with the conv net's first stride 1 (its own table and the probe beside it)."""
    return _on_sim_run(res, label, "faithful_pixels_level_s1", "the faithful `robot-rl sim` run rewarded by the level "
                       "camera alone, first stride 1", "level_cam_s1_line2")


def classifier_boundary_level_s1_run(res: Results) -> str:
    """The same on the rollouts of the sim run rewarded by the level camera alone, its conv net's first stride 1."""
    return _on_level_s1_run(res, "level_s1_run")


def classifier_boundary_level_s1_p06_probe(res: Results) -> str:
    """The tenth sim run's classifier on its own run's rollouts, beside the same with the predicate's finger width at
    the task's held limit (a card edit: the weights and threshold are the same)."""
    return _on_level_s1_run(res, "level_s1_p06_probe")


def classifier_boundary_level_s1_audit_run(res: Results) -> str:
    """The same on the rollouts of the audit round's run on the level-camera recipe (level and wrist cameras)."""
    return _on_sim_run(res, "level_s1_audit_run", "faithful_pixels_level_s1_audit", "the faithful `robot-rl sim` "
                       "run of the audit round on the level camera's recipe", "level_wrist_s1_audit")


def classifier_boundary_side_audit_run(res: Results) -> str:
    """The same on the rollouts of the audit round's sim run: the policy trained on the retrained classifier."""
    return _on_sim_run(res, "side_audit_run", "faithful_pixels_side_audit",
                       "the audit round's faithful `robot-rl sim` run", "side_audit5")
