# Sourced by the GPU steps that run one lesson's module in timed parts (12_attention.sh,
# 11_softmax.sh, 14_optimizer.sh); they set LESSON first, e.g. LESSON=softmax.
#   part LIMIT ARGS...   python3 -m helpers.lessons.$LESSON ARGS (with --out "$OUT" when $OUT is
#                        set), cut off after LIMIT seconds; prints its rc and goes on either way
set -uo pipefail
export PYTHONUNBUFFERED=1
out=()
[ -n "${OUT:-}" ] && out=(--out "$OUT")
part() { local limit=$1; shift; echo "== $*"; timeout "$limit" python3 -m "helpers.lessons.$LESSON" "$@" "${out[@]}"; echo "rc=$? ($*)"; }
