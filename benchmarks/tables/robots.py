"""The robots-per-learner table: how many 10 Hz robots one learner keeps up with, from the learner-speed results.

A robot stepping at 10 Hz with an update-to-data ratio UTD asks for 10 x UTD critic updates per second, so one learner
that does C critic updates/s keeps C / (10 x UTD) robots. C is taken from each learner_speed row as measured at its
own UTD per `update()` call (state: 8 or 20, images: 4); the actor / temperature step, once per call, is amortised
at that ratio, so the figures at other UTDs are estimates (a few per cent for state). Rows: the CPU results, the
H100 results, and every later GPU file the GPU session writes (learner_speed_cuda_<gpu>_graphs.json,
learner_speed_cuda_<gpu>_images.json, and the torch.compile rows of
learner_speed_cuda_<gpu>_compile2.json), whichever are present.
"""

from __future__ import annotations

from typing import Any

from .fmt import Results, Row, grouped, rnd, source, table

UTDS = (4, 8, 16)
"""Update-to-data ratios of the table's columns."""

ROBOT_HZ = 10.0
"""Env steps per second of one robot."""


def robots(critic_updates_per_s: float, utd: int) -> float:
    """10 Hz robots one learner keeps at `utd` critic updates per env step."""
    return critic_updates_per_s / (ROBOT_HZ * utd)


def _fmt(x: float) -> str:
    return rnd(x, 2) if x < 1 else rnd(x, 1) if x < 10 else grouped(x)


def _row(machine: str, label: str, case: dict[str, Any]) -> Row:
    c = case["critic_updates_per_s"]
    work = (f"{label}, batch {case['batch']}, measured at UTD {case['critic_updates_per_actor_update']}")
    return [machine, work, grouped(c) if c >= 100 else rnd(c, 1), *(_fmt(robots(c, u)) for u in UTDS)]


def _label(case: dict[str, Any]) -> str:
    return f"{case['case']} ({case['backend']})"


def robots_per_learner(res: Results) -> str:
    cpu = res("learner_speed_cpu.json")
    comp = res("learner_speed_cpu_compile.json")
    h100, h100_jax = res("learner_speed_cuda_h100.json"), res("learner_speed_cuda_h100_jax.json")
    rows: list[Row] = []
    names = ["learner_speed_cpu.json", "learner_speed_cpu_compile.json"]
    cpu_name = f"CPU, {cpu['threads']} threads"
    for case in cpu["cases"]:
        if case["case"] in ("state RLPD", "image DrQ 128px x2"):
            rows.append(_row(cpu_name, _label(case), case))
    for case in comp["cases"]:
        if case["case"] == "state RLPD [compile]":
            rows.append(_row(f"CPU, {comp['threads']} threads", _label(case), case))
    for d, name in ((h100, "learner_speed_cuda_h100.json"), (h100_jax, "learner_speed_cuda_h100_jax.json")):
        names.append(name)
        for case in d["cases"]:
            if name.endswith("_jax.json") and case["backend"] != "jax":
                continue  # the torch rows of that run repeat the other file's
            rows.append(_row(d["device_name"], _label(case), case))
    later = sorted(p.name for p in res.directory.glob("learner_speed_cuda_*.json")
                   if p.name.endswith(("_graphs.json", "_images.json", "_compile2.json")))
    for name in later:
        d = res(name)
        names.append(name)
        for case in d["cases"]:
            if name.endswith("_compile2.json") and "compile" not in case["case"]:
                continue  # that run's eager and graphs rows repeat the _graphs file's
            rows.append(_row(d["device_name"], _label(case), case))
        ref = d.get("reference")
        if ref:
            rows.append([d["device_name"], "the bare JAX reference (its own config, batches already on the device)",
                         grouped(ref["critic_updates_per_s"]), *(_fmt(robots(ref["critic_updates_per_s"], u))
                                                                 for u in UTDS)])
    header = ["machine", "learner (case, backend)", "critic updates/s",
              *(f"10 Hz robots at UTD {u}" for u in UTDS)]
    note = ("Robots = critic updates/s / (10 x UTD): a learner's whole time spent updating, none left for "
            "receiving transitions or publishing weights. CPU image rows are at batch 32 (a 256-row image update "
            "takes seconds on a CPU); GPU image rows at batch 256.")
    return "\n\n".join([table(header, rows), note, source(*names)])


__all__ = ["ROBOT_HZ", "UTDS", "robots", "robots_per_learner"]
