#!/usr/bin/env python3
"""The stationary warmup's goals table (issue: DEI-MCMC whose chains are stationary).

Reads two `bnn study table3` output folders, one per warmup policy, made from the same members
and chain seeds, and prints one markdown row per dataset, split and policy, then the per-dataset
means of the goal quantities:

    bnn study table3 --out runs/policy/fixed --splits 1 --datasets yacht --warmup-policy fixed
    bnn study table3 --out runs/policy/stationary --splits 1 --datasets yacht
    python3 bench/warmup_policy_table.py runs/policy/fixed runs/policy/stationary

Goals (per run): no chain with more than 10% divergent draws, at most 2% divergent over the
run, every chain's last-tenth acceptance within 0.1 of its first tenth's, test log-likelihood
R-hat at most 1.10, gradients and wall time at most 1.3x the fixed policy's; per dataset, the
mean test LPPD at least the fixed policy's minus 0.02.
"""

import json
import os
import sys


def runs(folder):
    out = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name, "summary.json")
        if os.path.isfile(path):
            with open(path) as f:
                out[name] = json.load(f)
    return out


def row(s):
    chains = s["chain_stationarity"]
    divergent = sum(c["divergent_draws"] for c in chains)
    draws = sum(c["draws"] for c in chains)
    return {
        "divergent": divergent,
        "share": divergent / draws,
        "over": sum(c["divergent_draws"] > 0.1 * c["draws"] for c in chains),
        "drift": sum(abs(c["accept_last_tenth"] - c["accept_first_tenth"]) > 0.1 for c in chains),
        "rhat": s["rhat_test_loglik"],
        "lppd": s["lppd"],
        "cov90": s["coverage_90"],
        "gradients": (s["warmup_gradients"] or 0) + s["sampling_gradients"],
        "warmup_gradients": s["warmup_gradients"] or 0,
        "seconds": (s["seconds_warmup"] or 0) + (s["seconds_sampling"] or 0),
        "warmup": [c["warmup_iterations"] for c in chains],
        "cap": sum(c["warmup_ended"] == "cap" for c in chains),
    }


def cap_note(r):
    return f", {r['cap']} at the cap" if r["cap"] else ""


def main():
    fixed, stationary = runs(sys.argv[1]), runs(sys.argv[2])
    print("| dataset | split | policy | divergent draws | chains > 10% divergent | chains with acceptance drift > 0.1 | test-loglik R-hat | test LPPD | cov. 90% | warmup iterations per chain | gradients (M): warmup + sampling | × fixed | wall s (warmup + sampling) | × fixed |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    per_dataset = {}
    for name in sorted(set(fixed) & set(stationary)):
        dataset, split = name.rsplit("-split", 1)
        base = row(fixed[name])
        for policy, s in (("fixed", fixed[name]), ("stationary", stationary[name])):
            r = row(s)
            w = r["warmup"]
            print(
                f"| {dataset} | {split} | {policy} | {r['divergent']} ({100 * r['share']:.1f}%) | {r['over']} | {r['drift']} | {r['rhat']:.3f} | {r['lppd']:.3f} | {r['cov90']:.3f} | {min(w)}–{max(w)}{cap_note(r)} | {r['warmup_gradients'] / 1e6:.2f} + {(r['gradients'] - r['warmup_gradients']) / 1e6:.2f} | {r['gradients'] / base['gradients']:.2f} | {r['seconds']:.0f} | {r['seconds'] / base['seconds']:.2f} |"
            )
            per_dataset.setdefault((dataset, policy), []).append(r)
    print()
    print("| dataset | policy | splits | divergent (mean share) | runs ≤ 2% | chains > 10% divergent (all runs) | chains drifting (all runs) | R-hat ≤ 1.10 (runs) | mean test LPPD | mean cov. 90% | gradients × fixed (mean) | wall × fixed (mean) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (dataset, policy), rows in sorted(per_dataset.items()):
        fixed_rows = per_dataset[(dataset, "fixed")]
        n = len(rows)
        ratio = sum(r["gradients"] / f["gradients"] for r, f in zip(rows, fixed_rows)) / n
        wall = sum(r["seconds"] / f["seconds"] for r, f in zip(rows, fixed_rows)) / n
        print(
            f"| {dataset} | {policy} | {n} | {100 * sum(r['share'] for r in rows) / n:.1f}% | {sum(r['share'] <= 0.02 for r in rows)} of {n} | {sum(r['over'] for r in rows)} | {sum(r['drift'] for r in rows)} | {sum(r['rhat'] <= 1.10 for r in rows)} of {n} | {sum(r['lppd'] for r in rows) / n:.3f} | {sum(r['cov90'] for r in rows) / n:.3f} | {ratio:.2f} | {wall:.2f} |"
        )


if __name__ == "__main__":
    main()
