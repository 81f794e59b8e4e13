#!/usr/bin/env bash
# Notebook 07's measurement: every fused variant of helpers/lab/roofline.py, torch.compile on the
# same expression, the device-to-device copy and a 3-read/1-write streaming ceiling, all in
# one run, at n = 2^26 and 2^28 (and +3, for the scalar tail).  Writes
# results/h200/roofline.json (with the environment record) and results/h200/roofline.png.
# Run from the repository root with PYTHONPATH=$PWD:/tmp/site on a GPU; about a minute.
set -euo pipefail
python3 - <<'PY'
import helpers
helpers.start()
from helpers.lab import roofline
from helpers.results import write_result

record = roofline.benchmark(repeats=30)
path = write_result("roofline", record)
fig = roofline.plot_roofline(record, 2**28)
fig.savefig(path.with_suffix(".png"), dpi=120)
for n, row in record["runs"].items():
    print(f"n = {int(n):,}: copy {row['copy']['gbs']:.0f} GB/s")
    entries = {**row["variants"], **{k: row[k] for k in ("torch_compile", "stream3", "stream3_torch_compile") if k in row}}
    for name, e in entries.items():
        if "median_ms" in e:
            print(f"  {name:22s} {e['median_ms']:.3f} ms  {e['gbs']:6.0f} GB/s  {e['pct_copy']:5.1f}% of copy"
                  f"  bitwise={e.get('bitwise_equal')} regs={e.get('registers')}")
        else:
            print(f"  {name:22s} {e.get('error')}")
print("best:", record["best_variant"], "target met:", record["target_met"], record["target"])
print("wrote", path, path.with_suffix(".png"))
PY
