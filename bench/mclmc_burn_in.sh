#!/bin/bash
# Prototype of an MCLMC burn-in before DEI-NUTS (issue: DEI-MCMC whose chains are stationary):
# MCLMC (MILE's budget: 50,000 tuning + 10,000 steps) from the members of a finished DEI-NUTS run,
# then NUTS from each MCLMC chain's last position, with the same config and chain seeds.
#
#   bnn study table3 --out runs/policy/fixed --splits 1 --datasets yacht --warmup-policy fixed
#   bench/mclmc_burn_in.sh runs/policy/fixed/yacht-split0 runs/burn-in fixed ""
#   bench/mclmc_burn_in.sh runs/policy/fixed/yacht-split0 runs/burn-in stationary "--warmup-policy stationary"
#
# usage: mclmc_burn_in.sh DEI_RUN OUT NAME "NUTS FLAGS"
# Writes OUT/mclmc (shared by every NAME of the same DEI_RUN; another DEI_RUN's is refused) and
# OUT/NAME (a finished one is kept, not redone).
set -euo pipefail
base=${1:?"a finished DEI-NUTS run directory"}; out=${2:?"an output folder"}
name=${3:?"a name for the NUTS variant"}; flags=${4:-}
bnn=${BNN:-${CARGO_TARGET_DIR:-target}/release/bnn}
[ -x "$bnn" ] || { echo "error: no bnn binary at $bnn (build with cargo build --release -p bnn-cli, or set BNN)" >&2; exit 1; }
[ -f "$base/summary.json" ] && [ -d "$base/ensemble" ] || { echo "error: $base is not a finished DEI-NUTS run directory with its ensemble" >&2; exit 1; }
here=$(dirname "$0")
thin=10
logged() { # LOG COMMAND...: run it into LOG; on failure show LOG's end and stop
  local log=$1; shift
  "$@" >> "$log" 2>&1 || { echo "error: $* failed; the end of $log:" >&2; tail -n 20 "$log" >&2; exit 1; }
}
from=$(cd "$base" && pwd)
if [ -f "$out/mclmc/from" ] && [ "$(cat "$out/mclmc/from")" != "$from" ]; then
  echo "error: $out/mclmc is the burn-in of $(cat "$out/mclmc/from"), not of $from; choose another OUT" >&2; exit 1
fi
if [ ! -f "$out/mclmc/sampling.json" ]; then
  rm -rf "$out/mclmc" "$out/mclmc.log"; mkdir -p "$out/mclmc"; cp -r "$base/ensemble" "$out/mclmc/"
  echo "$from" > "$out/mclmc/from"
  echo "== $out/mclmc: MCLMC from the members of $base" >&2
  logged "$out/mclmc.log" "$bnn" sample --config "$base/config.toml" --sampler mclmc --warmup 50000 \
    --draws 10000 --thin "$thin" --out "$out/mclmc"
fi
if [ ! -f "$out/$name/summary.json" ]; then
  rm -rf "${out:?}/$name" "$out/$name.log"
  python3 "$here/chain_ends_as_members.py" "$out/mclmc" "$out/$name"
  echo "== $out/$name: NUTS from the MCLMC chains' ends, $flags" >&2
  # shellcheck disable=SC2086
  logged "$out/$name.log" "$bnn" sample --config "$base/config.toml" $flags --out "$out/$name"
  logged "$out/$name.log" "$bnn" predict "$out/$name"
  logged "$out/$name.log" "$bnn" evaluate "$out/$name"
fi
python3 - "$thin" "$out/mclmc" "$base" "$out/$name" <<'PY'
import csv, glob, json, sys
thin = int(sys.argv.pop(1))
mclmc = json.load(open(sys.argv[1] + "/sampling.json"))
def leapfrogs(path, thin=1):
    with open(path) as f:
        rows = csv.reader(f)
        column = next(rows).index("n_leapfrog__")
        return thin * sum(float(r[column]) for r in rows)
burn_in = sum(leapfrogs(p) for p in glob.glob(sys.argv[1] + "/adaptation_chain_*.csv"))
burn_in += sum(leapfrogs(p, thin) for p in glob.glob(sys.argv[1] + "/draws_chain_*.csv"))
for d in sys.argv[2:]:
    s = json.load(open(d + "/summary.json"))
    chains = s["chain_stationarity"]
    div = sum(c["divergent_draws"] for c in chains)
    draws = sum(c["draws"] for c in chains)
    over = sum(c["divergent_draws"] > 0.1 * c["draws"] for c in chains)
    drift = sum(abs(c["accept_first_tenth"] - c["accept_last_tenth"]) > 0.1 for c in chains)
    print(f"{d}: divergent {div} of {draws} ({100 * div / draws:.1f}%), chains > 10% divergent {over}, "
          f"drifting {drift}, test-loglik R-hat {s['rhat_test_loglik']:.3f}, LPPD {s['lppd']:.3f}, "
          f"cov. 90% {s['coverage_90']:.3f}, gradients (M) {s['warmup_gradients'] / 1e6:.2f} + {s['sampling_gradients'] / 1e6:.2f}")
print(f"MCLMC burn-in: {burn_in / 1e6:.2f} M gradients, {mclmc['seconds_warmup'] + mclmc['seconds_sampling']:.1f} s")
PY
