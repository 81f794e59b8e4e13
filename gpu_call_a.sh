python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=$PWD:/tmp/site || exit 1
export PYTHONUNBUFFERED=1
name=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$name"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv
timeout 60 python3 scripts/attention_rounding_probe.py > $OUT/probe.log 2>&1; echo "probe rc=$?"; tail -24 $OUT/probe.log
if [[ "$name" == *H200* ]]; then
  timeout 40 python3 -m helpers.lessons.arithmetic sweep --out $OUT 2>&1 | tail -4
  timeout 100 bash scripts/gpu/ex_speedups.sh > $OUT/ex.log 2>&1; tail -6 $OUT/ex.log
  LESSON=attention; source scripts/gpu/lesson_parts.sh
  part 230 attention > $OUT/attention.log 2>&1; tail -22 $OUT/attention.log
  timeout 75 python3 -m pytest -q -p no:cacheprovider -o addopts="" -n 12 tests/test_attention_tiled.py tests/test_seed_claims.py tests/test_defaults.py tests/test_exercises.py > $OUT/pytest_some.log 2>&1; tail -5 $OUT/pytest_some.log
else
  timeout 430 python3 -m pytest tests -n 15 -q -rfs -p no:cacheprovider -o addopts="" --timeout 400 --ignore=tests/test_browser.py --ignore=tests/test_readme.py --ignore=tests/test_html.py > $OUT/pytest_gpu.log 2>&1
  grep -E "^(FAILED|ERROR)|passed|failed" $OUT/pytest_gpu.log | tail -30
fi
tar czf $OUT/results.tgz results
