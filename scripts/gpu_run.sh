#!/usr/bin/env bash
# One batched run on a lent GPU (no network there): tests, every GPU step, every lesson
# notebook executed in place, then one tarball under $OUT with everything to commit.
#   usage on the device:  bash scripts/gpu_run.sh     (expects .whl/ carried along)
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site
log=$OUT/gpu_run.log
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  python3 -c "import helpers; helpers.start()"
  echo "== pytest on the GPU"; python3 -m pytest tests -q -x -p no:cacheprovider --timeout 600 -o addopts="" 2>&1 | tail -25
  for step in scripts/gpu/*.sh; do echo "== step $step"; timeout 240 bash "$step"; echo "rc=$?"; done
  echo "== execute lesson notebooks"; python3 scripts/execute_notebooks.py notebooks/[0-9]*.ipynb notebooks/exercises/solutions/*.ipynb
  echo "== nbval on the GPU"; python3 -m pytest -q -p no:cacheprovider -o addopts="" --nbval-lax --nbval-current-env notebooks 2>&1 | tail -15
} 2>&1 | tee "$log"
tar czf "$OUT/results.tgz" notebooks results
