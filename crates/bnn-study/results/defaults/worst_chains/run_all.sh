#!/usr/bin/env bash
# Measures every finished run of the defaults study and rebuilds README.md and tables.md.
#
#   run_all.sh [--runs DIR] [--out DIR] [--cache DIR] [--data DIR]
#
# --runs   runs root holding <candidate>/<dataset>-splitN/ (default: env BNN_DEFAULTS_RUNS,
#          else runs/defaults relative to the current directory). Only run directories with a
#          summary.json (finished runs) are measured; they are only read.
# --out    generated JSON and tables (default: worst_chains_out/ under the system temp dir)
# --cache  parsed draws as .npy (default: worst_chains_cache/ under the system temp dir)
# --data   datasets folder (default: env BNN_DATA_DIR, else ../shared/datasets beside the
#          repository root)
# Interpreter: $PYTHON (default python3), which needs numpy and safetensors.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="${PYTHON:-python3}"
tmp="${TMPDIR:-/tmp}"
runs_root="${BNN_DEFAULTS_RUNS:-runs/defaults}"
out="$tmp/worst_chains_out"
cache="$tmp/worst_chains_cache"
data_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs_root="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --cache) cache="$2"; shift 2 ;;
    --data) data_args=(--data "$2"); shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
[ -d "$runs_root" ] || { echo "runs root $runs_root not found: set BNN_DEFAULTS_RUNS or pass --runs" >&2; exit 1; }

runs=()
for summary in "$runs_root"/*/*-split*/summary.json; do
  [ -f "$summary" ] && runs+=("$(dirname "$summary")")
done
[ ${#runs[@]} -gt 0 ] || { echo "no finished run (<candidate>/<dataset>-splitN/summary.json) under $runs_root" >&2; exit 1; }
echo "${#runs[@]} finished runs under $runs_root"

# Results of runs no longer present (or not finished) must not leak into the tables.
mkdir -p "$out"
rm -f "$out"/*__*.json

nice -n 19 "$py" "$here/chain_metrics.py" --out "$out" --cache "$cache" ${data_args[@]+"${data_args[@]}"} "${runs[@]}"
nice -n 19 "$py" "$here/rank_features.py" --out "$out"
nice -n 19 "$py" "$here/eps_pooled.py" --out "$out" > /dev/null
"$py" "$here/assemble_report.py" --out "$out"
