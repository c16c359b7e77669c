#!/usr/bin/env bash
# The cost model's GPU calibration (issue 31): micro-benchmarks, whole steps, the fit and the
# predicted-vs-measured table, in one command on one GPU (docs/benchmarks.md, "Calibrating the
# cost model on a GPU").
#
#   scripts/gpu_calibration.sh wheels
#       here, on a machine with pip and no GPU: download the wheels the GPU machine's image
#       lacks (pydantic and the few packages `conductor` imports that it does not ship) into
#       runs/gpu_wheels/, at the versions of this venv.
#   scripts/gpu_calibration.sh run OUT [CONFIG ...]
#       on the GPU machine: install runs/gpu_wheels/ if present, then one
#       `conductor calibrate validate` per CONFIG (default configs/calibrate/qwen3_8b.yaml),
#       each into OUT/<config>/: timings.json, validate.md, <model>_calibrated.yaml and the
#       log (nvidia-smi first). Each is stopped after STEP_TIMEOUT_S (default 300) seconds; its
#       own time_budget_s (240 s for the 8B config) skips rows before that. A dry run of the
#       script here (no wheels: they are for the GPU machine's Python 3.12): WHEELS=none DEVICE=cpu
#       PYTHON=.venv/bin/python scripts/gpu_calibration.sh run /tmp/out
#       configs/calibrate/tiny_cpu.yaml
#
# With the device tool: run(command="scripts/gpu_calibration.sh run $OUT", carry=["runs/gpu_wheels"],
# timeout_s=420); both models: add configs/calibrate/qwen3_8b.yaml configs/calibrate/qwen3_32b.yaml
# after $OUT and timeout_s=600. Every file comes back (4 per config, 2 configs at most).
set -euo pipefail
cd "$(dirname "$0")/.."

WHEELS=${WHEELS:-runs/gpu_wheels}
# What `conductor calibrate` imports that the GPU machine's image lacks
# (/work/.library/device/KINDS.md lists what it has); typing_extensions for a recent enough one.
MISSING=(pydantic pydantic_core annotated-types typing-inspection typing_extensions docker
  gymnasium Farama-Notifications orjson)

usage() {
  sed -n '2,27p' "$0" >&2
  exit 2
}

wheels() {
  local python=${PYTHON:-.venv/bin/python}
  mkdir -p "$WHEELS"
  for name in "${MISSING[@]}"; do
    local version
    version=$("$python" -c "import importlib.metadata as m; print(m.version('$name'))")
    "$python" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --platform any -d "$WHEELS" "$name==$version"
  done
  ls -l "$WHEELS"
}

run() {
  local out=${1:?usage: $0 run OUT [CONFIG ...]}
  shift
  local configs=("$@")
  [[ ${#configs[@]} -gt 0 ]] || configs=(configs/calibrate/qwen3_8b.yaml)
  local python=${PYTHON:-python3}
  if compgen -G "$WHEELS/*.whl" >/dev/null; then
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/gpu_calibration_site "$WHEELS"/*.whl
    export PYTHONPATH=/tmp/gpu_calibration_site
  fi
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 COLUMNS=160
  local status=0
  for config in "${configs[@]}"; do
    local name
    name=$(basename "$config" .yaml)
    mkdir -p "$out/$name"
    {
      nvidia-smi || true
      echo "== conductor calibrate validate --config $config --device ${DEVICE:-cuda}"
      timeout "${STEP_TIMEOUT_S:-300}" "$python" -m rollout.cli calibrate validate \
        --config "$config" --device "${DEVICE:-cuda}" --out "$out/$name"
    } >"$out/$name/log.txt" 2>&1 || status=$?
    tail -n 60 "$out/$name/log.txt"
  done
  return "$status"
}

case ${1:-} in
  wheels) wheels ;;
  run) shift; run "$@" ;;
  *) usage ;;
esac
