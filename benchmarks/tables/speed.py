"""Tables of the speed benchmarks: the twin, the controller, the learner update (CPU, torch.compile, GPU), the
transport and the actor's step cost. Each function maps the results directory to one markdown table + notes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .fmt import Results, Row, grouped, rnd, source, table


def twin_speed(res: Results) -> str:
    d = res("twin_speed.json")
    by = {(r["env"], r["obs"]): r for r in d["rows"]}
    envs = list(dict.fromkeys(r["env"] for r in d["rows"]))
    rows: list[Row] = [[e.replace("_", "-"), rnd(by[e, "state"]["steps_per_s_p50"]),
                        rnd(by[e, "2x128px"]["steps_per_s_p50"], 1 if by[e, "2x128px"]["steps_per_s_p50"] < 10 else 0)]
                       for e in envs]
    g = d["goals"]
    rows.append(["worst twin task / gym-hil", f"**{rnd(g['state_min_ratio'], 1)}x**",
                 f"**{rnd(g['images_min_ratio'])}x**"])
    twin_state = [r for r in d["rows"] if r["env"].startswith("twin") and r["obs"] == "state"]
    hil = by["gym-hil PandaPickCube", "state"]
    note = (f"Physics {twin_state[0]['physics_steps_per_env_step']} steps per 10 Hz env step, "
            f"{rnd(min(r['physics_steps_per_s'] for r in twin_state) / 1000)}k-"
            f"{rnd(max(r['physics_steps_per_s'] for r in twin_state) / 1000)}k physics steps/s state-only; the "
            f"impedance law takes {rnd(100 * min(r['controller_share'] for r in twin_state))}-"
            f"{rnd(100 * max(r['controller_share'] for r in twin_state))} % of a state-only twin step "
            f"({rnd(min(r['controller_us_per_tick'] for r in twin_state), 1)}-"
            f"{rnd(max(r['controller_us_per_tick'] for r in twin_state), 1)} µs per tick) against "
            f"{rnd(100 * hil['controller_share'])} % for gym-hil's Python controller. Goal: >= "
            f"{rnd(g['state_min_ratio_goal'])}x gym-hil state-only and >= {rnd(g['images_min_ratio_goal'])}x with "
            f"images (1 / median step time, {d['rounds']} interleaved rounds).")
    return "\n\n".join([table(["env", "state-only steps/s", "2x128x128 cameras steps/s"], rows), note,
                        source("twin_speed.json")])


def controller_speed(res: Results) -> str:
    d = res("controller_speed.json")
    rows = [[name, rnd(us, 1)] for name, us in d["rows"].items()]
    ratio = d["rows"]["law in plain numpy (stateless)"] / d["rows"]["torque() numba"]
    note = (f"The plain numpy law is {rnd(ratio)}x slower than the numba kernel; numba compiles in "
            f"{rnd(d['compile_cold_s'], 1)} s cold, {rnd(d['compile_from_cache_s'], 1)} s from its cache.")
    return "\n\n".join([table(["impedance law, one 1 kHz tick", "µs"], rows), note, source("controller_speed.json")])


def _cases(d: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(c["case"], c["backend"]): c for c in d["cases"]}


def learner_speed_cpu(res: Results) -> str:
    d = res("learner_speed_cpu.json")
    c = _cases(d)
    labels = {"state RLPD": "state RLPD: ensemble 10 / subset 2, batch 256, MLP 256x256 LN, 8 critic updates per call",
              "state RLPD, reference config": "the reference's config (UTD 20, ReLU, 5-step rows, our sampler in "
                                              "the timing)",
              "image DrQ 128px x2": "image DrQ: 2 cameras 128x128, frozen ResNet-10, batch 32, 4 critic updates"}
    rows = []
    for case, label in labels.items():
        t, j = c[case, "torch"], c[case, "jax"]
        rows.append([label, rnd(t["critic_updates_per_s"], 2 if t["critic_updates_per_s"] < 10 else 1),
                     rnd(j["critic_updates_per_s"], 2 if j["critic_updates_per_s"] < 10 else 1),
                     f"{rnd(j['ratio_to_torch'], 2)}x, {rnd(j['ratio_to_torch_cpu'], 2)}x",
                     f"{rnd(j['first_update_cold_s'], 1)} s / {rnd(j['first_update_cached_s'], 1)} s"])
    ref = d["reference"]
    rt, rj = c["state RLPD, reference config", "torch"], c["state RLPD, reference config", "jax"]
    note = (f"The independent JAX reference (its bare jitted update on batches already on the device, same run): "
            f"{rnd(ref['critic_updates_per_s'], 1)} critic updates/s. Against it on its config: JAX backend "
            f"**{rnd(rj['ratio_to_reference'], 2)}x** (wall) / {rnd(rj['ratio_to_reference_cpu'], 2)}x (per CPU "
            f"second), torch {rnd(rt['ratio_to_reference'], 2)}x / {rnd(rt['ratio_to_reference_cpu'], 2)}x. "
            f"{d['threads']} threads, {d['rounds']} interleaved rounds (medians), measured matmul "
            f"{rnd(d['matmul_gflops'], 1)} GFLOP/s in the same run, {d['time'][:10]}.")
    return "\n\n".join([table(["case", "torch critic updates/s", "JAX critic updates/s",
                               "JAX / torch (wall, per CPU-s)", "JAX first update, cold / cached"], rows),
                        note, source("learner_speed_cpu.json")])


def learner_speed_cpu_compile(res: Results) -> str:
    d = res("learner_speed_cpu_compile.json")
    c = _cases(d)
    rows = []
    for case, label in [("state RLPD", "state RLPD (UTD 8, SiLU)"),
                        ("state RLPD, reference config", "the reference's config (UTD 20, ReLU, 5-step, our sampler)")]:
        eager, comp, jax = c[case, "torch"], c[case + " [compile]", "torch"], c[case, "jax"]
        vs_ref = ""
        if "ratio_to_reference" in eager:
            vs_ref = (f"{rnd(eager['ratio_to_reference'], 2)}x, **{rnd(comp['ratio_to_reference'], 2)}x**, "
                      f"{rnd(jax['ratio_to_reference'], 2)}x (wall); {rnd(eager['ratio_to_reference_cpu'], 2)}x, "
                      f"{rnd(comp['ratio_to_reference_cpu'], 2)}x, {rnd(jax['ratio_to_reference_cpu'], 2)}x per CPU-s")
        rows.append([label, rnd(eager["critic_updates_per_s"], 1), rnd(comp["critic_updates_per_s"], 1),
                     rnd(jax["critic_updates_per_s"], 1), f"{rnd(comp['ratio_to_torch'], 2)}x", vs_ref,
                     f"{rnd(comp['first_update_s'], 1)} s"])
    note = (f"Critic updates/s; the JAX reference did {rnd(d['reference']['critic_updates_per_s'], 1)} in the same "
            f"run ({d['threads']} threads, {d['rounds']} interleaved rounds, {d['time'][:10]}).")
    return "\n\n".join([table(["case", "torch eager", "torch compiled (the CPU default)", "JAX backend",
                               "compiled / eager", "vs the JAX reference (eager, compiled, JAX)",
                               "compile (first update)"], rows), note, source("learner_speed_cpu_compile.json")])


def learner_speed_gpu(res: Results) -> str:
    base, comp, jx = (res(f"learner_speed_cuda_h100{t}.json") for t in ("", "_compile", "_jax"))
    b, c, j = _cases(base), _cases(comp), _cases(jx)

    def ups(case: dict[str, Any]) -> str:
        u, cu = case["updates_per_s"], case["critic_updates_per_s"]
        return (f"{rnd(u, 2) if u < 10 else rnd(u, 1) if u < 100 else grouped(u)} "
                f"({rnd(cu, 1) if cu < 100 else grouped(cu)})")

    def ratio(case: dict[str, Any]) -> str:
        return f"{rnd(case['ratio_to_torch'], 2)}x"

    s, i = "state RLPD", "image DrQ 128px x2"
    sampled, pre = b[s + " [sampled]", "torch"], b[s + " [sampled+prefetch]", "torch"]
    isam, ipre = b[i + " [sampled]", "torch"], b[i + " [sampled+prefetch]", "torch"]
    ref = jx["reference"]["critic_updates_per_s"]
    rt, rj = j["state RLPD, reference config", "torch"], j["state RLPD, reference config", "jax"]
    rows: list[Row] = [
        ["state RLPD (ensemble 10 / subset 2, batch 256, UTD 8), eager, fixed batch", ups(b[s, "torch"]),
         f"{rnd(100 * b[s, 'torch']['fraction_of_matmul'], 1)} % of the matmul rate"],
        ["the same, bf16 autocast", ups(b[s + " [bf16]", "torch"]), ratio(b[s + " [bf16]", "torch"])],
        ["the same, torch.compile (losses)", ups(c[s + " [compile]", "torch"]),
         f"{rnd(c[s + ' [compile]', 'torch']['ratio_to_torch'], 2)}x (first update "
         f"{rnd(c[s + ' [compile]', 'torch']['first_update_s'], 1)} s)"],
        ["the same, sampling from replay in the loop / + prefetch",
         f"{rnd(sampled['updates_per_s'], 1)} / {rnd(pre['updates_per_s'], 1)}",
         f"{rnd(sampled['ratio_to_torch'], 2)}x / {rnd(pre['ratio_to_torch'], 2)}x (prefetch "
         f"{rnd(pre['ratio_to_sampled'], 2)}x the sampling row)"],
        ["the same, JAX backend", ups(j[s, "jax"]), f"**{rnd(j[s, 'jax']['ratio_to_torch'], 1)}x** (torch in its run: "
                                                   f"{rnd(j[s, 'torch']['updates_per_s'], 1)})"],
        ["image DrQ (2 cameras 128x128, frozen ResNet-10, batch 256, UTD 4), eager, fixed batch", ups(b[i, "torch"]),
         f"{rnd(100 * b[i, 'torch']['fraction_of_matmul'])} % of the matmul rate"],
        ["the same, bf16 autocast", ups(b[i + " [bf16]", "torch"]), ratio(b[i + " [bf16]", "torch"])],
        ["the same, torch.compile (losses)", ups(c[i + " [compile]", "torch"]),
         f"{rnd(c[i + ' [compile]', 'torch']['ratio_to_torch'], 2)}x (first update "
         f"{rnd(c[i + ' [compile]', 'torch']['first_update_s'], 1)} s)"],
        ["the same, sampling from replay in the loop", ups(isam), f"{rnd(isam['ratio_to_torch'], 2)}x"],
        ["the same, sampling + prefetch", ups(ipre),
         f"{rnd(ipre['ratio_to_torch'], 2)}x; **{rnd(ipre['ratio_to_sampled'], 2)}x** the sampling row"],
        ["reference config (UTD 20, ReLU, 5-step, our sampler): torch / JAX backend / JAX reference (bare)",
         f"{rnd(rt['updates_per_s'], 1)} / {rnd(rj['updates_per_s'])} / {rnd(ref / 20)} "
         f"({grouped(rt['critic_updates_per_s'])} / {grouped(rj['critic_updates_per_s'])} / {grouped(ref)})",
         f"torch {rnd(rt['ratio_to_reference'], 2)}x, JAX backend {rnd(rj['ratio_to_reference'], 2)}x the reference"],
    ]
    note = (f"{base['device_name']}, {base['cpu_count']} cores, torch {base['torch']}, jax {jx['jax']}, "
            f"{base['time'][:10]}; measured float32 matmul {rnd(base['matmul_gflops'] / 1000, 1)} TFLOP/s. The compile "
            f"rows' eager twins in their own run: {rnd(c[s, 'torch']['updates_per_s'], 1)} / "
            f"{rnd(c[i, 'torch']['updates_per_s'], 2)} updates/s.")
    return "\n\n".join([table(["case", "updates/s (critic updates/s)", "against the eager row of the same run"], rows),
                        note, source("learner_speed_cuda_h100.json", "learner_speed_cuda_h100_compile.json",
                                     "learner_speed_cuda_h100_jax.json")])


def transport(res: Results) -> str:
    d = res("transport.json")
    by = {(r["design"], r["images"]): r for r in d["rows"]}
    rows = []
    for images in dict.fromkeys(r["images"] for r in d["rows"]):
        p, o, c = by["pickle REQ/REP", images], by["robot-rl", images], by["robot-rl + CURVE", images]
        speedup = d["speedup_transitions_per_s"][f"robot-rl vs pickle REQ/REP, {images}"]
        rows.append([images, f"{rnd(p['transitions_per_s'])} /s, {rnd(p['MB_per_s'])} MB/s",
                     f"{rnd(o['transitions_per_s'])} /s, {rnd(o['MB_per_s'])} MB/s (**{rnd(speedup, 1)}x**)",
                     f"{rnd(c['transitions_per_s'])} /s, {rnd(c['MB_per_s'])} MB/s"])
    return "\n\n".join([table(["images", "pickle REQ/REP", "robot-rl", "robot-rl + CURVE"], rows),
                        f"Acknowledged transitions per second over loopback, chunks of {d['params']['chunk']}, "
                        f"{d['when'][:10]}. " + source("transport.json")])


def actor_latency(res: Results) -> str:
    d = res("actor_latency.json")

    def ms(row: dict[str, Any], key: str, digits: int) -> str:
        return rnd(row[key], digits)

    rows = []
    for r in d["rows"]:
        obs = r["obs"] + (", conv encoder" if r["encoder"] == "conv" else "")
        rows.append([obs, f"{ms(r, 'policy_ms_p50', 2)} / {ms(r, 'policy_ms_p99', 1)} ms",
                     f"{ms(r, 'rest_ms_p50', 2)} / **{ms(r, 'rest_ms_p99', 2)} ms** ({ms(r, 'rest_ms_max', 1)})",
                     f"{ms(r, 'weights_ready_ms_p50', 1)} / {ms(r, 'weights_ready_ms_p99', 1)} ms",
                     f"{ms(r, 'weights_used_ms_p50', 0)} / {ms(r, 'weights_used_ms_p99', 0)} ms"])
    note = (f"{d['rows'][0]['steps']} steps per row at {rnd(d['rows'][0]['hz'])} Hz, weights published every "
            f"{d['publish_every_s']} s; goal: {d['goal']}. " + source("actor_latency.json"))
    return "\n\n".join([table(["observation", "policy p50 / p99", "rest p50 / p99 (max)", "weights ready p50 / p99",
                               "weights in use p50 / p99"], rows), note])


def first_weights(res: Results) -> str:
    d = res("first_weights.json")
    rows = [[str(r["offline_updates"]), f"{rnd(100 * r['success_stochastic'])} %",
             f"{rnd(100 * r['success_deterministic'])} %", rnd(r["abs_error_to_demo"], 3),
             f"{rnd(r['policy_sample_std'], 3)} / {rnd(r['demo_action_std'], 3)}"] for r in d["rows"]]
    return "\n\n".join([
        table(["offline updates before the first weights", "success (stochastic, as actors act)",
               "success (deterministic)", "mean abs(a - a_demo) on demo states", "action std: policy / demos"],
              rows),
        f"Twin {d['task'].removeprefix('twin-')}, state recipe, {d['demos']} scripted demos, {d['episodes']} seeded "
        f"episodes per row, 8 sampled actions per demo state (256 states). " + source("first_weights.json")])


def guard_latency(res: Results) -> str:
    d = res("guard_latency.json")
    by_period: dict[float, list[float]] = {}
    for r in d["rows"]:
        by_period.setdefault(r["check_period_s"], []).append(r["latency_ms"])
    cost = {c["check_period_s"]: c for c in d["cost"]}
    rows = [[f"{rnd(1e3 * p)} ms", " / ".join(rnd(v, 1) for v in lat) + " ms", f"{rnd(cost[p]['ratio'], 2)}x"]
            for p, lat in by_period.items()]
    return "\n\n".join([
        table(["guard check period", "force above the limit -> hold (3 contact points)", "100 ms wait, wall time"],
              rows),
        f"Twin pick-cube, the arm pushing 1 cm into the table, limit {rnd(d['limit_n'])} N; sim time (deterministic), "
        f"latency from the first physics step above the limit; wall time of a 100 ms wait relative to a 100 ms "
        f"period, {d['waits']} interleaved waits each. " + source("guard_latency.json")])


def guard_latency_franky(res: Results) -> str:
    d = res("guard_latency.json")
    f = d["franky_sim"]
    by_path: dict[str, list[dict[str, Any]]] = {}
    for r in f["rows"]:
        by_path.setdefault(r["path"], []).append(r)
    how = {"reaction": "franky's force-limit reaction (inside libfranka's loop)",
           "listener": "the guard's per-state listener (franky's callback thread)",
           "polled 10 ms": "the guard's 10 ms polled check"}
    rows = [[how.get(p, p), " / ".join(rnd(r["latency_ms"], 1) for r in rs) + " ms",
             " / ".join(rnd(r["realtime_factor"], 2) for r in rs)] for p, rs in by_path.items()]
    return "\n\n".join([
        table(["path to the hold", "first state above the limit -> hold (3 contact points)",
               "franky-sim real-time factor"], rows),
        f"franky-sim (FrankyRobot through franky-control on loopback) with a table whose push is reported as the "
        f"external wrench estimate, the arm commanded 1 cm into it, limit {rnd(d['limit_n'])} N; nothing polls the "
        f"guard on the first two paths. Robot clock (franky-sim's 1 ms steps; it ran at the real-time factor shown, "
        f"so a wall-clock delay such as the 10 ms poll shows shortened by that factor; resolution one 1 ms "
        f"step); the first contact is a "
        f"one-step jump well above the limit. " + source("guard_latency.json")])


def guard_latency_ros2(res: Results) -> str:
    """The ROS 2 rows of guard_latency.json (its `ros2` part): message -> hold, listener vs polled path."""
    d = res("guard_latency.json")["ros2"]
    label = {"listener": "every message, in the executor thread (add_state_listener)",
             "polled": "polled: after each 10 ms wait slice (listener hidden)"}

    def ms(st: dict[str, Any]) -> str:
        return f"{rnd(st['median_ms'], 1)} / {rnd(st['p95_ms'], 1)} ms"

    rows = [[label[r["mode"]], f"{r['trials'] - r['left_out']} ({r['left_out']} left out)", ms(r["detect"]),
             ms(r["hold_out"])] for r in d["rows"]]
    return "\n\n".join([
        table(["ROS 2 guard checks", "force trips", "message -> hold command, median / p95",
               "message -> hold published, median / p95"], rows),
        f"Ros2Robot against `robot-rl ros2-twin` (pick-cube, its own process) over DDS on loopback; the arm pushed "
        f"1 cm into the table at three points, limit {rnd(d['limit_n'])} N; from the header stamp of the first "
        f"wrench message above the limit to the guard's hold command, and to the stamp of the first target_pose at "
        f"the held pose (published by the hold command itself, then re-published at {rnd(d['stream_hz'])} Hz); "
        f"the two paths alternate in "
        f"{d['blocks']} blocks; wall clock on a shared {d['cpu_count']}-core machine (load "
        f"{rnd(d['load_average'][0], 1)}). " + source("guard_latency.json")])


def faithful_timing(res: Results) -> str:
    d = res("faithful_timing.json")
    cost = [[f"{r['obs_mode']}" + (f" {r['image_size']}x{r['image_size']}, 2 cameras" if r["image_size"] else ""),
             r["timing"], f"{rnd(r['step_ms_p50'], 2)} ms", f"{rnd(r['ratio_p50'], 2)}x",
             f"{rnd(r['step_ms_mean'], 2)} ms"] for r in d["step_cost"]]
    expert = [[r["task"].replace("_", "-"), f"{rnd(r['action_delay_ms'])} ms", f"{rnd(100 * r['success_rate'])} %",
               rnd(r["steps_mean"], 1)] for r in d["expert"]]
    return "\n\n".join([
        table(["twin pick-cube", "camera latency / action delay", "step p50", "p50 vs off", "step mean"], cost),
        table(["scripted expert", "action delay", "success", "mean episode length (steps)"], expert),
        f"{d['step_cost'][0]['steps']} timed steps per row (interleaved; a shared 2-core machine, load "
        f"{rnd(d['load_average'][0], 1)}), {d['expert'][0]['episodes']} seeded expert "
        f"episodes per row (state mode: the expert acts on the measured state, so only the action delay reaches "
        f"it). " + source("faithful_timing.json")])


def pretrained_encoders(res: Results) -> str:
    d = res("pretrained_encoders.json")
    rows = [[r["option"], rnd(r["ms_per_frame_64px"], 1), rnd(r["ms_per_frame_128px"], 1), rnd(r["probe_r2_tcp"], 2),
             rnd(r["probe_r2_cube"], 2)] for r in d["rows"]]
    pre = d["pretrain"]
    note = (f"Backbone forward pass only, batch {d['batch']}, {d['threads']} CPU thread (median of {d['reps']}; the "
            f"cost depends on the architecture only: two rows of one architecture differ by the shared machine's "
            f"load). "
            f"Probe: ridge regression from the frozen features of both {d['image_px']}x{d['image_px']} cameras, "
            f"fitted on {d['train_frames']} frames of {d['train_episodes']} scripted pick-cube episodes, R^2 on "
            f"{d['probe_frames']} frames of {d['probe_episodes']} held-out episodes (1 = exact, 0 = the mean). The "
            f"cube position is the twin's privileged state, a probe target only: a robot does not have it. "
            f"pretrain-encoder (its defaults but the steps): {pre['steps']} steps of batch 32 on "
            f"{pre['train_episodes']} of those episodes in "
            f"{rnd(pre['seconds'] / 60, 1)} minutes on one thread; its loss on the other {pre['val_episodes']} went "
            f"from {rnd(pre['val_loss_first'], 2)} to {rnd(pre['val_loss_last'], 2)} (standardised targets).")
    parts = [table(["backbone (frozen)", "ms/frame 64x64", "ms/frame 128x128", "probe R^2 TCP", "probe R^2 cube"],
                   rows), note]
    heads = d.get("target_heads")
    if heads:
        parts.append(table(["pretrained file's target head", "grasp place, error (cm): median / p90"],
                           [[h["camera"], f"{rnd(h['grasp_err_cm_median'], 1)} / {rnd(h['grasp_err_cm_p90'], 1)}"]
                            for h in heads]))
        parts.append(f"Target heads: the head's prediction of the next grasp's place relative to the gripper (what "
                     f"`encoder_features=targets` gives a policy), de-standardised, against where each held-out "
                     f"episode's gripper really closed (its own proprio and gripper command), over the "
                     f"{heads[0]['frames']} frames at least 2 cm before the grasp.")
    parts.append(source("pretrained_encoders.json"))
    return "\n\n".join(parts)


def feature_cache_defaults(res: Results) -> str:
    """The same table from the run that added the pixel defaults' row (64x64 only)."""
    return feature_cache(res, "feature_cache_defaults.json")


FEATURE_CACHE_HEADER = ["learner", "cameras", "CPU ms per env step", "of which encoding new frames", "of which updates",
                        "x the state learner"]


def _feature_cache_rows(d: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for r in d["rows"]:
        size = f"2 x {r['size']}x{r['size']}" if r["size"] else "-"
        enc = rnd(1e3 * r["encode_s_per_step"], 1) if r["encode_s_per_step"] else "-"
        ratio = rnd(r["ratio_to_state"], 2)
        rows.append([r["case"], size, rnd(1e3 * r["cpu_s_per_step"], 1), enc, rnd(1e3 * r["update_s_per_step"], 1),
                     f"**{ratio}x**" if r["case"] != "state" and r["ratio_to_state"] <= 2 else f"{ratio}x"])
    return rows


def _timed_variants(res: Results, name: str, how: str, note: str) -> str:
    """A feature_cache result's rows with one note: the command's flags `how`, the machine, then `note`."""
    d = res(name)
    text = (f"twin-pick-cube, `python benchmarks/feature_cache.py --sizes 64 --only-defaults {how} --seconds "
            f"{d['seconds_per_case']:g}`: each agent as `robot-rl train` builds it, the pixel rows with the run's "
            f"demos and a frozen ResNet-10 with random weights and target heads; CPU seconds of the learner per env "
            f"step, {d['threads']} thread, {d['time'][:10]}, load average {rnd(d['load_average'][0], 1)} on "
            f"{d['cpu_count']} cores {note}")
    return "\n\n".join([table(FEATURE_CACHE_HEADER, _feature_cache_rows(d)), text, source(name)])


def _timed_table(name: str, how: str, note: str, doc: str) -> Callable[[Results], str]:
    """The table of one feature_cache result (`_timed_variants` with these arguments), documented by `doc`."""
    def render(res: Results) -> str:
        return _timed_variants(res, name, how, note)

    render.__doc__ = doc
    return render


_FIRST_ROW = " The ratio column divides by the first row, the state learner as a run gets it"

feature_cache_variants = _timed_table(
    "feature_cache_variants.json", "--default-variants",
    "(training runs shared the machine): the ratios are from one run. One crop with the 64-wide head was trained "
    "later (with the backbone in bf16, the next table): it learned worse.",
    "The pixel defaults (target-head predictions cached) and cheaper settings of them, against the state learner.")
feature_cache_bf16 = _timed_table(
    "feature_cache_bf16.json", "--variants ... --tag bf16",
    "(nothing else running); `backbone_precision=bf16` on this CPU (AVX512-BF16): the frozen backbone under bf16 "
    "autocast.",
    "The pixel defaults with the frozen backbone in bf16 and with the cheaper settings, timed on an idle machine.")
feature_cache_bf16_updates = _timed_table(
    "feature_cache_bf16_updates.json", "--state-bf16 --variants ... --tag bf16_updates",
    "(one training run on the other core); `mixed_precision=bf16`: the update's forward passes under bf16 autocast "
    f"(losses, targets, weights and Adam state in float32).{_FIRST_ROW} (float32).",
    "The pixel defaults with the update's forward passes under bf16 too, and with the 64-wide head; the state learner "
    "with bf16 updates beside its default.")
feature_cache_compiled = _timed_table(
    "feature_cache_compiled.json", "--variants ... --tag compiled",
    "(one training run on the other core); `compile=true`: torch.compile on the agent's losses, as the state learner "
    "gets it on a CPU.",
    "The pixel defaults with torch.compile on their losses (the state learner's CPU default), a short probe.")
feature_cache_lean_idle = _timed_table(
    "feature_cache_lean_idle.json", "--state-bf16 --variants ... --tag lean_idle",
    f"(nothing else running).{_FIRST_ROW} (float32, compiled).",
    "The lean pixel learner (64-wide head, bf16 backbone and updates), plain and compiled, on the idle machine.")


def feature_cache(res: Results, name: str = "feature_cache.json") -> str:
    d = res(name)
    rows = _feature_cache_rows(d)
    by = {(r["case"], r["size"]): r for r in d["rows"]}
    sizes = sorted({r["size"] for r in d["rows"] if r["size"]})
    k = min(r["agent"]["feature_cache_crops"] for r in d["rows"] if r["case"].startswith("resnet10 cached"))
    cost = {key: r["cpu_s_per_step"] for key, r in by.items()}
    gains = ", ".join(f"{rnd(cost['resnet10 uncached', s] / cost[f'resnet10 cached K={k}', s], 1)}x at {s}x{s}"
                      for s in sizes)
    within = [f"{r['case'].removeprefix('resnet10 ')} at {r['size']}x{r['size']}" for r in d["rows"]
              if r["size"] and r["ratio_to_state"] <= 2]
    summary = (f"The cache (K={k}) divides the frozen ResNet-10 learner's CPU time per env step by {gains}; within "
               f"2x of the state learner: {'; '.join(within) if within else 'none'}.")
    px = d["recipe_pixels"]["agent"]
    former = d.get("former_pixel_recipe")
    pixels = (f"the pixel defaults batch {px.get('batch_size')} / ensemble {px.get('ensemble_size')} with the "
              f"run's demos; the other pixel rows the twin's former pixel recipe, batch 32 / ensemble 2, as flags"
              if former else f"pixels batch {px.get('batch_size')} / ensemble {px.get('ensemble_size')}")
    note = (f"twin-pick-cube, each agent as `robot-rl train` builds it (state batch "
            f"{d['recipe_state']['agent'].get('batch_size')}, {pixels}; "
            f"{d['recipe_state']['updates_per_step']} updates per env step), the ResNet-10 "
            f"rows with a frozen backbone (random weights: the cost does not depend on them); CPU seconds of the "
            f"learner per env step (store the transition, encode new frames, sample, update; not the env step nor "
            f"the actor's forward), {d['threads']} thread, about {d['seconds_per_case']:g} CPU-s per case, "
            f"{d['time'][:10]}, load average {rnd(d['load_average'][0], 1)} on {d['cpu_count']} cores: the ratios "
            f"are from one run, the absolute times move with the load.")
    return "\n\n".join([table(FEATURE_CACHE_HEADER, rows), summary, note, source(name)])
