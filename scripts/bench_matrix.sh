#!/usr/bin/env bash
# The benchmark matrix of docs/benchmarks.md (SIMULATED): every cell is one `conductor bench
# rollout` whose Markdown table is appended to $OUT. Usage: scripts/bench_matrix.sh [OUT] [SEEDS]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/benchmarks.md}
SEEDS=${2:-0,1,2,3,4}
BENCH=(.venv/bin/conductor bench rollout --seeds "$SEEDS" --markdown "$OUT")
M32=model.path=../model/qwen3_32b_h200.yaml
ABLATIONS="no_priority,no_preemption,no_kv_hints,no_live_gate,no_kv_residency"
: >"$OUT"
cell() { echo "== $*" >&2; /usr/bin/time -f "   %e s" "${BENCH[@]}" "$@" >/dev/null; }

# KV-tight: swe_like with the 32B-like model (KV pool 248,576 tokens)
cell configs/simulate/swe_like.yaml "$M32" \
  "policies=[conductor,sync,traj_async,aggressive,kv_throttle,{name: kv_throttle_40, base: kv_throttle, low_priority_kv_watermark: 0.4},$ABLATIONS]" \
  --sweep traj_async:conductor.agent_slots=8,12,16
# KV-tight: heavy_tail with the 32B-like model
cell configs/simulate/heavy_tail.yaml "$M32" \
  "policies=[conductor,sync,traj_async,kv_throttle,no_kv_residency]" \
  --sweep traj_async:conductor.agent_slots=8,16
# KV-tight: swe_like with the 8B-like model at B=16
cell configs/simulate/swe_like.yaml groups_per_step=16 \
  "policies=[conductor,traj_async,kv_throttle,no_kv_residency]" \
  --sweep traj_async:conductor.agent_slots=32
# The 8B-like defaults
cell configs/simulate/swe_like.yaml \
  "policies=[conductor,sync,traj_async,aggressive,kv_throttle,$ABLATIONS]" \
  --sweep traj_async:conductor.agent_slots=16,32
cell configs/simulate/heavy_tail.yaml "policies=[conductor,sync,traj_async,kv_throttle]"
cell configs/simulate/short_context.yaml "policies=[conductor,sync,traj_async,aggressive]"
# On-policy (async_factor 1): the staleness bound leaves nothing to overlap
cell configs/simulate/swe_like.yaml async_factor=1 "policies=[conductor,sync,traj_async]"
