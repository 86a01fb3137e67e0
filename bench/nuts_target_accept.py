#!/usr/bin/env python3
"""Which NUTS target acceptance should a ReLU or sigmoid network use? Measured, not guessed.

Runs `bnn run` (DEI-MCMC: an ensemble, one NUTS chain per member) on cos(2x) data with a 1-50-1
network, fixed σ = 0.1 and N(0, 1) priors, for each activation × target acceptance × seed, and
prints a markdown table of the effective sample size per 1000 gradient evaluations of the
sampling phase for two function-space quantities: the per-draw test log likelihood and the
pointwise predictive means (median over the test points). Higher is cheaper. Parameters are
not used: weight-space symmetries keep their ESS meaningless for BNNs.

    python3 bench/nuts_target_accept.py --bnn target/release/bnn \
        --out runs/nuts-target --json nuts-target.json

Everything except the target is the same across a seed's runs (same members, split, seed).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bnn", default="target/release/bnn")
    parser.add_argument("--out", default="runs/nuts-target")
    parser.add_argument("--activations", default="relu,sigmoid")
    parser.add_argument("--targets", default="0.45,0.65,0.8")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--json")
    args = parser.parse_args()

    rows = []
    for activation in args.activations.split(","):
        for target in args.targets.split(","):
            for seed in range(args.seeds):
                out = os.path.join(args.out, f"{activation}-{target}-seed{seed}")
                if os.path.exists(os.path.join(out, "summary.json")):
                    print(f"reusing {out}", file=sys.stderr)
                else:
                    command = [args.bnn, "run", "--dataset", "cos2x", "--hidden", "50", "--activation", activation,
                               "--likelihood", "fixed:0.1", "--prior", "normal:1", "--members", str(args.members),
                               "--epochs", "2000", "--learning-rate", "0.01", "--warmup", str(args.warmup),
                               "--draws", str(args.draws), "--max-depth", "10", "--target-accept", target,
                               "--seed", str(seed), "--split-seed", str(seed), "--out", out]
                    start = time.time()
                    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
                    print(f"{activation} δ={target} seed {seed}: {time.time() - start:.1f} s", file=sys.stderr)
                with open(os.path.join(out, "summary.json")) as f:
                    s = json.load(f)
                kilo = s["sampling_gradients"] / 1000.0
                # summary.json writes an undefined ESS (too few draws) as null.
                ess_loglik = s["ess_test_loglik"] if s["ess_test_loglik"] is not None else float("nan")
                ess_mean = s["pointwise_predictive_ess_median"] if s["pointwise_predictive_ess_median"] is not None else float("nan")
                rows.append({
                    "activation": activation, "target_accept": float(target), "seed": seed,
                    "mean_accept_stat": s["mean_accept_stat"], "divergences": s["divergences"],
                    "mean_leapfrog_per_draw": s["mean_leapfrog_per_draw"], "sampling_gradients": s["sampling_gradients"],
                    "ess_test_loglik": ess_loglik, "pointwise_predictive_ess_median": ess_mean,
                    "ess_loglik_per_1000_gradients": ess_loglik / kilo,
                    "ess_predictive_mean_per_1000_gradients": ess_mean / kilo,
                    "lppd": s["lppd"], "seconds_sampling": s["seconds_sampling"],
                })

    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)

    print("| activation | target δ | mean accept | leapfrog / draw | divergent | ESS(test loglik) / 1000 grad | ESS(pred. mean) / 1000 grad | test LPPD |")
    print("|---|---|---|---|---|---|---|---|")
    for activation in args.activations.split(","):
        for target in args.targets.split(","):
            group = [r for r in rows if r["activation"] == activation and r["target_accept"] == float(target)]

            def cell(key, fmt):
                values = [r[key] for r in group]
                mean = statistics.fmean(values)
                if len(values) > 1:
                    se = statistics.stdev(values) / len(values) ** 0.5
                    return f"{mean:{fmt}} ± {se:{fmt}}"
                return f"{mean:{fmt}}"

            print(f"| {activation} | {target} | {cell('mean_accept_stat', '.2f')} | {cell('mean_leapfrog_per_draw', '.0f')} | "
                  f"{cell('divergences', '.0f')} | {cell('ess_loglik_per_1000_gradients', '.2f')} | "
                  f"{cell('ess_predictive_mean_per_1000_gradients', '.2f')} | {cell('lppd', '.3f')} |")


if __name__ == "__main__":
    main()
