#!/usr/bin/env bash
# One entry point for setting up and running robot-rl on a fresh Debian 12 / Python 3.11 machine.
#
#   bash scripts/dev.sh setup   # system packages (if missing) + .venv with robot-rl[sim,learn,dev] + .venv-franky-sim
#   bash scripts/dev.sh demo    # setup, then the main job (robot-rl sim --task twin-pick-cube) or `demo ARGS` for sim ARGS
#   bash scripts/dev.sh test    # setup, then lint, type-check, the docs build (warnings are errors) and the test suite
#   bash scripts/dev.sh bench   # setup (+ bench extra), then the benchmarks under benchmarks/
#
# Nothing is installed by hand: apt packages come from the list below, Python packages from pyproject.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV=${ROBOT_RL_VENV:-$ROOT/.venv}
# franky-sim (a Franka simulator speaking libfranka's protocol, for the franky backend's tests) pins a newer MuJoCo
# than the twin's, so it lives in a virtualenv of its own; the tests start it from there as a subprocess.
FRANKY_SIM_VENV=${ROBOT_RL_FRANKY_SIM_VENV:-$ROOT/.venv-franky-sim}
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for cand in python3.11 python3; do
    if command -v "$cand" >/dev/null 2>&1; then PY=$cand; break; fi
  done
fi
[ -n "$PY" ] || { echo "error: no python3.11 found; install it (apt-get install python3)" >&2; exit 1; }

# Debian packages the runtime needs: EGL + Mesa's software rasteriser for headless MuJoCo rendering,
# venv support for the interpreter, libusb for pyrealsense2 (RealSense cameras), a C++ compiler and the Python
# headers for torch.compile's CPU code (the learner's default on a CPU; without them it trains eager, and says so).
APT_PKGS=(libegl1 libgl1 libgl1-mesa-dri libglib2.0-0 libusb-1.0-0 g++ python3-dev)

apt_install_missing() {
  command -v dpkg-query >/dev/null 2>&1 || return 0
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
      echo "warning: missing Debian packages ${missing[*]} and no root/sudo to install them" >&2; return 0
    fi
  fi
  echo "installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq || true
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
}

pip_quiet() {
  # pip's output goes to a log; shown only when it fails
  "$VENV/bin/python" -m pip "$@" >>"$VENV/pip.log" 2>&1 || { cat "$VENV/pip.log" >&2; return 1; }
}

setup() {
  apt_install_missing "${APT_PKGS[@]}"
  if ! "$PY" -c "import ensurepip, venv" >/dev/null 2>&1; then
    apt_install_missing python3-venv
  fi
  local stamp="$VENV/.robot-rl-installed"
  local want
  want=$(cat pyproject.toml scripts/dev.sh | sha256sum | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return 0; fi
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  # The CPU build of torch first (pinned: an unpinned torch pulls a multi-GB CUDA build).
  echo "installing Python packages into $VENV (log: $VENV/pip.log)"
  pip_quiet install "torch==2.13.0"
  pip_quiet install -e ".[sim,learn,dev]"
  setup_franky_sim
  echo "$want" > "$stamp"
}

setup_franky_sim() {
  [ -x "$FRANKY_SIM_VENV/bin/python" ] || "$PY" -m venv "$FRANKY_SIM_VENV"
  echo "installing franky-sim into $FRANKY_SIM_VENV (log: $FRANKY_SIM_VENV/pip.log)"
  "$FRANKY_SIM_VENV/bin/python" -m pip install -q "franky-sim>=1.0.4,<2" >>"$FRANKY_SIM_VENV/pip.log" 2>&1 \
    || { cat "$FRANKY_SIM_VENV/pip.log" >&2; return 1; }
}

export MUJOCO_GL=${MUJOCO_GL:-egl}
export PYOPENGL_PLATFORM=${PYOPENGL_PLATFORM:-egl}
# Learner, actor and sim share 2 cores: never let OpenMP spin-wait (see ../shared/REFERENCE.md).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

cmd=${1:-test}
shift || true
case "$cmd" in
  setup) setup ;;
  demo)
    setup
    # the main job: train on the MuJoCo twin, learner + actors + robot servers as separate processes over ZeroMQ
    if [ $# -eq 0 ]; then set -- --task twin-pick-cube; fi
    "$VENV/bin/robot-rl" sim "$@"
    ;;
  test)
    setup
    "$VENV/bin/ruff" check .
    "$VENV/bin/mypy"
    # the documentation site (docs/, Sphinx + MyST): a broken link, include or page fails the build
    "$VENV/bin/python" -m sphinx -W --keep-going -q -b html docs docs/_build/html
    "$VENV/bin/python" -m pytest "$@"
    ;;
  bench)
    setup
    pip_quiet install -e ".[sim,learn,dev,bench]"
    for b in benchmarks/[!_]*.py; do "$VENV/bin/python" "$b"; done
    ;;
  *) echo "usage: $0 {setup|demo|test|bench} [args]" >&2; exit 2 ;;
esac
