#!/bin/bash
# DEI-NUTS warmup variants from the members of the MILE comparison (same split, members and chain
# seed as its DEI-NUTS run, so each variant pairs with that run).
#
#   bnn study mile --out runs/mile --splits 3 --seeds 3 --datasets yacht
#   bench/warmup_variants.sh grad "--metric-estimate draws-and-gradients"
#   python3 bench/warmup_variants.py grad
#
# usage: [WARMUP=100] warmup_variants.sh NAME "FLAGS" [DATASET] [SPLITS] [SEED_INDICES]
# Writes runs/warmup-variants/NAME/<dataset>-split<s>-seed<k>/ (a finished run is kept, not redone).
set -euo pipefail
name=${1:?"a name for the variant"}; flags=${2:-}; dataset=${3:-yacht}; splits=${4:-"0 1 2"}; seeds=${5:-"0 1 2"}
bnn=${BNN:-${CARGO_TARGET_DIR:-target}/release/bnn}
[ -x "$bnn" ] || { echo "error: no bnn binary at $bnn (build with cargo build --release -p bnn-cli, or set BNN)" >&2; exit 1; }
for split in $splits; do for k in $seeds; do
  seed=$((100 * k + split))
  if [ "$k" = 0 ]; then base=runs/mile/$dataset-split$split/dei-nuts; else base=runs/mile/$dataset-split$split/seed$k/dei-nuts; fi
  [ -d "$base/ensemble" ] || { echo "error: $base/ensemble is missing; run the mile example first (see the header)" >&2; exit 1; }
  out=runs/warmup-variants/$name/$dataset-split$split-seed$k
  [ -f "$out/summary.json" ] && continue
  rm -rf "$out"; mkdir -p "$out/ensemble"; cp "$base"/ensemble/* "$out/ensemble/"
  echo "== $out: $flags" >&2
  # shellcheck disable=SC2086
  "$bnn" run --dataset "$dataset" --split-seed "$split" --seed "$seed" --hidden 16,16 --activation relu --target-accept 0.8 \
    --likelihood hetero --prior normal:1 --members 12 --chains 12 --standardize full --warmup "${WARMUP:-100}" \
    --draws 1000 --max-depth 10 --learning-rate 0.01 $flags --out "$out" > "$out.log" 2>&1
done; done
