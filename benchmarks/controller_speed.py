"""Microseconds per Cartesian impedance tick, as the MuJoCo twin calls it (500-1000 times per 10 Hz env step).

Rows (each measured in a fresh subprocess, Panda home pose, a target 2 cm away, float64 inputs):
- torque() numba:        CartesianImpedanceController.torque, the compiled kernel (what the twin runs)
- kernel only:           the compiled kernel called directly, without the Python method around it
- torque() NUMBA_DISABLE_JIT: the same code interpreted by Python (the fallback without numba)
- law in plain numpy:    impedance_torque_numpy, the stateless law with np.linalg (no filters, no limits)
plus the one-off compile cost: cold (empty numba cache) and warm (loaded from the on-disk cache).

Usage: python benchmarks/controller_speed.py   (prints a table; writes benchmarks/results/controller_speed.json)
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time

from _prelude import RESULTS, ROOT, bench_parser, print_table, timestamp, write_json

OUT = RESULTS / "controller_speed.json"


def _measure(mode: str, n: int) -> dict[str, float]:
    """Runs inside the subprocess: set up, time `n` calls (best of 3 repeats), print JSON."""
    t0 = time.perf_counter()
    import numpy as np

    from controllers import _kernels
    from controllers.gains import gain_profile
    from controllers.impedance import CartesianImpedanceController, ImpedanceConfig, impedance_torque_numpy
    from controllers.kinematics import PANDA_HOME_Q, panda_fk, panda_jacobian
    from controllers.transforms import mat_to_quat

    q = np.array(PANDA_HOME_Q)
    dq = np.full(7, 0.01)
    pos, R = panda_fk(q)
    quat = mat_to_quat(R)
    J = panda_jacobian(q)
    bias = np.zeros(7)
    t1 = time.perf_counter()
    ctrl = CartesianImpedanceController(ImpedanceConfig(), gain_profile("compliance"))  # compiles / loads
    setup_s = time.perf_counter() - t1
    ctrl.reset(pos, quat)
    ctrl.set_target(pos + 0.02, quat)
    if mode == "numpy":
        gains = gain_profile("compliance")
        target = pos + 0.02

        def call() -> object:
            return impedance_torque_numpy(q, dq, J, pos, quat, target, quat, gains, bias_nm=bias)
    elif mode == "kernel":
        tick, state = _kernels.compiled("tick"), ctrl._state

        def call() -> object:
            return tick(state, q, dq, J, pos, quat, bias, 1e-3)
    else:
        torque = ctrl.torque

        def call() -> object:
            return torque(q, dq, J, pos, quat, bias, 1e-3)

    for _ in range(min(n, 1000)):
        call()
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(n):
            call()
        best = min(best, (time.perf_counter() - t) / n)
    return {"us_per_call": best * 1e6, "setup_s": setup_s, "import_s": t1 - t0}


def _run(mode: str, n: int, env: dict[str, str] | None = None) -> dict[str, float]:
    proc = subprocess.run([sys.executable, __file__, "--child", mode, str(n)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, cwd=ROOT, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    bench_parser(__doc__).parse_args(argv)  # no options: --help
    import numba
    import numpy as np

    rows = {
        "torque() numba": _run("torque", 200_000),
        "kernel only (no Python wrapper)": _run("kernel", 200_000),
        "torque() NUMBA_DISABLE_JIT": _run("torque", 2_000, {"NUMBA_DISABLE_JIT": "1"}),
        "law in plain numpy (stateless)": _run("numpy", 20_000),
    }
    with tempfile.TemporaryDirectory() as cache:
        cold = _run("torque", 1_000, {"NUMBA_CACHE_DIR": cache})  # empty cache: compiles
        warm = _run("torque", 1_000, {"NUMBA_CACHE_DIR": cache})  # the cache it just wrote
    jit_us = rows["torque() numba"]["us_per_call"]
    print_table(f"{'variant':34s} {'us/call':>10s} {'vs numba':>9s}",
                [f"{name:34s} {r['us_per_call']:10.2f} {r['us_per_call'] / jit_us:8.1f}x" for name, r in rows.items()])
    print(f"compile: cold {cold['setup_s']:.1f} s, from cache {warm['setup_s']:.2f} s (first controller only)")
    substeps = 100
    print(f"at {substeps} substeps per env step: {jit_us * substeps / 1000:.2f} ms of controller per step "
          f"(a 415 steps/s budget is {1000 / 415:.2f} ms per step in all)")
    result = {
        "benchmark": "controller_speed",
        "unit": "microseconds per torque() call",
        "rows": {name: round(r["us_per_call"], 3) for name, r in rows.items()},
        "compile_cold_s": round(cold["setup_s"], 2),
        "compile_from_cache_s": round(warm["setup_s"], 3),
        "machine": {"python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__,
                    "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
        "when": timestamp(),
    }
    print(f"wrote {write_json(OUT, result, indent=2).relative_to(ROOT)}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(_measure(sys.argv[2], int(sys.argv[3]))))
    else:
        main()
