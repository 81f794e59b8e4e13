#!/usr/bin/env bash
# The batched runs on a lent GPU (no network there), in phases that each fit one call:
#   bash scripts/gpu_run.sh measure STEP...   the named scripts/gpu/NN_*.sh steps, by lesson (e.g. 05 09 10; ex for the exercises)
#   bash scripts/gpu_run.sh pytest            the test suite on the GPU (browser, README and HTML tests left out)
#   bash scripts/gpu_run.sh notebooks NB...   execute these notebooks in place (lessons, solutions)
#   TIMED="NB..." bash scripts/gpu_run.sh all NB...
#                                             the suite beside the notebooks NB... that time nothing (4 at a
#                                             time), then the TIMED ones alone, one at a time, the GPU quiet
# Each phase leaves results/ (and, for notebooks, the notebooks it ran) in $OUT/<phase>.tgz, plus a log.
# Expects .whl/ (../shared/tools/gpu-wheels) carried along.
set -uo pipefail
phase=${1:?usage: gpu_run.sh measure STEP... | pytest | notebooks NOTEBOOK...}
shift
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null || exit 1
export PYTHONPATH=$PWD:/tmp/site
step() { echo "== step $1"; local t0=$SECONDS; timeout "${STEP_LIMIT:-240}" bash "$1"; echo "rc=$? ($1, $((SECONDS - t0)) s)"; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  python3 -c "import helpers; helpers.start()"
  case $phase in
    measure)
      for n in "$@"; do for s in scripts/gpu/"$n"_*.sh; do step "$s"; tar czf "$OUT/$phase.tgz" results; done; done ;;
    pytest)
      timeout "${PYTEST_LIMIT:-570}" make test-gpu PY=python3 JOBS="${JOBS:-12}" > "$OUT/pytest_gpu.log" 2>&1
      grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest_gpu.log" | tail -40 ;;
    notebooks)
      python3 scripts/execute_notebooks.py --jobs "${JOBS:-1}" "$@" 2>&1 | grep -v "running over TCP" ;;
    all)
      ( timeout "${PYTEST_LIMIT:-420}" make test-gpu PY=python3 JOBS="${JOBS:-10}" > "$OUT/pytest_gpu.log" 2>&1 ) &
      suite=$!
      python3 scripts/execute_notebooks.py --jobs "${NB_JOBS:-4}" "$@" 2>&1 | grep -v "running over TCP"
      wait $suite
      grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest_gpu.log" | tail -40
      if [ -n "${TIMED:-}" ]; then
        python3 scripts/execute_notebooks.py --jobs 1 $TIMED 2>&1 | grep -v "running over TCP"
      fi ;;
  esac
} 2>&1 | tee "$OUT/$phase.log"
case $phase in notebooks|all) ran=("$@" ${TIMED:-}) ;; *) ran=() ;; esac
tar czf "$OUT/$phase.tgz" results "${ran[@]}"
