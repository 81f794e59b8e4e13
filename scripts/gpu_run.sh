#!/usr/bin/env bash
# The batched runs on a lent GPU (no network there), in phases that each fit one call:
#   bash scripts/gpu_run.sh tests      pytest on the GPU, then the ncu and roofline steps
#   bash scripts/gpu_run.sh sweeps     the benchmark sweep and the one-order-out step
#   bash scripts/gpu_run.sh retime     pytest, then every timing step again (roofline, sweeps, one order out)
#   bash scripts/gpu_run.sh notebooks  execute every lesson and solution notebook in place
#   bash scripts/gpu_run.sh final      pytest, then the notebooks (after the steps' results are committed)
# Each phase leaves results/ (and, for notebooks, notebooks/) in $OUT/<phase>.tgz, plus a log.
# Expects .whl/ (../shared/tools/gpu-wheels) carried along.
set -uo pipefail
phase=${1:?usage: gpu_run.sh tests|sweeps|retime|notebooks|final}
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null || exit 1
export PYTHONPATH=$PWD:/tmp/site
step() { echo "== step $1"; timeout "$2" bash "$1"; echo "rc=$? ($1)"; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  python3 -c "import helpers; helpers.start()"
  case $phase in
    tests|retime|final)
      echo "== pytest on the GPU"
      timeout 240 python3 -m pytest tests -q -p no:cacheprovider --timeout 200 -o addopts="" -rfs --tb=short \
        --ignore=tests/test_browser.py --ignore=tests/test_readme.py --ignore=tests/test_html.py \
        > "$OUT/pytest_gpu.log" 2>&1
      grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest_gpu.log" | tail -20
      [ "$phase" = tests ] && step scripts/gpu/20_ncu.sh 150
      [ "$phase" != final ] && step scripts/gpu/30_roofline.sh 150
      [ "$phase" = retime ] && { step scripts/gpu/35_bench.sh 300; step scripts/gpu/40_one_order_out.sh 240; } ;;
    sweeps)
      step scripts/gpu/35_bench.sh 300
      step scripts/gpu/40_one_order_out.sh 240 ;;
  esac
  case $phase in
    notebooks|final)
      python3 scripts/execute_notebooks.py notebooks/[0-9]*.ipynb notebooks/exercises/solutions/*.ipynb 2>&1 \
        | grep -v "running over TCP" ;;
  esac
} 2>&1 | tee "$OUT/$phase.log"
tar czf "$OUT/$phase.tgz" results $( case $phase in notebooks|final) echo notebooks;; esac )
