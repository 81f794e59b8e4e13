#!/usr/bin/env bash
# Between cards: peer-to-peer copies GPU0<->GPU1 (direct when peer access can be
# enabled, and the path staged through pinned host memory), each GPU's device-to-device
# copy and pinned host<->device copies, and the pipeline split across the two GPUs (add on
# GPU0, t1 copied over, multiply and scale on GPU1) against the three-kernel and fused
# pipelines on GPU0.  Writes results/<gpu>/two_gpus.json (devices, link, versions).
# With fewer than two GPUs it prints "needs two GPUs; found N" and exits 0 at once, so it
# can sit in the batched one-GPU run as a dry run.
# Run from the repository root:  PYTHONPATH=$PWD:/tmp/site bash scripts/gpu/08_two_gpus.sh
set -euo pipefail
if command -v nvidia-smi >/dev/null; then nvidia-smi topo -m || true; fi
python3 -m helpers.lessons.transfers two-gpus
