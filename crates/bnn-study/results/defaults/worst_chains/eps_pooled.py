#!/usr/bin/env python3
"""Pooled view: chain divergent fraction against its step size relative to its run's median,
and, for the ReLU runs that share an ensemble, the same member under different warmups.

Reads OUT/<candidate>__<run>.json (written by chain_metrics.py), writes OUT/eps_pooled.md.

    python3 eps_pooled.py [--out DIR]     # default: worst_chains_out/ under the temp dir
"""
import argparse
import glob
import json
import os
import tempfile

import numpy as np

OUT = os.path.join(tempfile.gettempdir(), "worst_chains_out")
DATASET_ORDER = ["yacht", "energy", "concrete"]
FIXED, STATIONARY, HIGH = "relu-fixed-0.80", "relu-0.80", "relu-0.95"


def run_label(r):
    split = r.get("split", 0)
    return r["dataset"] if split == 0 else f"{r['dataset']}-split{split}"


def main():
    runs = {}
    for p in sorted(glob.glob(os.path.join(OUT, "*__*.json"))):
        r = json.load(open(p))
        runs[(r["candidate"], run_label(r))] = r
    lines = []
    say = lines.append

    rows = []
    for k, r in runs.items():
        eps = np.array([m["step_size"] * np.sqrt(m["metric_inv_median"]) for m in r["chains"]])
        med = np.median(eps)
        for m, e in zip(r["chains"], eps):
            rows.append((k, m["chain"], e / med, m["div_frac"]))
    rel = np.array([x[2] for x in rows])
    div = np.array([x[3] for x in rows])
    say(f"Step in parameter units (ε·sqrt(median M⁻¹)) relative to the run's median, all "
        f"{len(runs)} runs, {len(rows)} chains:\n")
    say("| ε_rel bin | chains | mean div % | chains with div ≥ 20% |")
    say("|---|---|---|---|")
    for lo, hi in [(0, 0.8), (0.8, 1.0), (1.0, 1.25), (1.25, 1.6), (1.6, 99)]:
        s = (rel >= lo) & (rel < hi)
        say(f"| [{lo}, {hi}) | {s.sum()} | {100 * div[s].mean():.1f} | {int((div[s] >= 0.2).sum())} |")
    say("")

    # worst-2 chains: ε rank within their run
    ranks = []
    for k, r in sorted(runs.items()):
        if np.mean([m["div_frac"] for m in r["chains"]]) < 0.02:
            continue
        eps = np.array([m["step_size"] * np.sqrt(m["metric_inv_median"]) for m in r["chains"]])
        order = np.argsort(-np.array([m["div_frac"] for m in r["chains"]]), kind="mergesort")
        er = (-eps).argsort().argsort() + 1  # 1 = largest step
        ranks.append((f"{k[0]}/{k[1]}", [int(er[i]) for i in order[:2]]))
    say(f"Rank of the two worst chains' parameter-unit step among their run's chains (1 = largest), "
        f"{len(ranks)} runs with ≥ 2% divergent draws:\n")
    for name, rk in ranks:
        say(f"- {name}: {rk}")
    allr = [x for _, rk in ranks for x in rk]
    say(f"- worst chains with a top-3 step: {sum(x <= 3 for x in allr)}/{len(allr)}; "
        f"top-6: {sum(x <= 6 for x in allr)}/{len(allr)}")
    say("")

    # same member, different warmup
    datasets = {d for _, d in runs}
    datasets = [d for d in DATASET_ORDER if d in datasets] + sorted(datasets - set(DATASET_ORDER))
    cands = [FIXED, STATIONARY, HIGH]
    for d in datasets:
        if not all((c, d) in runs for c in cands):
            continue
        n = len(runs[(FIXED, d)]["chains"])
        ch = {c: runs[(c, d)]["chains"] for c in cands}
        rhos = []
        for j in range(n):
            e = [ch[c][j]["step_size"] for c in cands]
            v = [ch[c][j]["div_frac"] for c in cands]
            rhos.append(np.sign(np.corrcoef(np.argsort(np.argsort(e)), np.argsort(np.argsort(v)))[0, 1])
                        if np.std(v) > 0 else np.nan)
        raised = [j for j in range(n) if ch[STATIONARY][j]["final_target"] > 0.8 + 1e-9]
        targets = sorted({round(ch[STATIONARY][j]["final_target"], 4) for j in raised})
        say(f"- {d}: members whose stationary checks raised the target above 0.8 (to "
            f"{', '.join(map(str, targets))}): {raised}")
        if raised:
            a = [ch[FIXED][j]["div_frac"] for j in raised]
            b = [ch[STATIONARY][j]["div_frac"] for j in raised]
            ea = [ch[FIXED][j]["step_size"] for j in raised]
            eb = [ch[STATIONARY][j]["step_size"] for j in raised]
            say(f"  div % fixed-0.80 {[round(100 * x, 1) for x in a]} (mean {100 * np.mean(a):.1f}) → "
                f"stationary {[round(100 * x, 1) for x in b]} (mean {100 * np.mean(b):.1f})")
            say(f"  ε fixed {[f'{x:.2e}' for x in ea]} → stationary {[f'{x:.2e}' for x in eb]}")
        f = [ch[FIXED][j]["div_frac"] for j in range(n)]
        s80 = [ch[STATIONARY][j]["div_frac"] for j in range(n)]
        s95 = [ch[HIGH][j]["div_frac"] for j in range(n)]
        say(f"  all members: fixed-0.80 mean {100 * np.mean(f):.1f}% → relu-0.80 mean "
            f"{100 * np.mean(s80):.1f}% → relu-0.95 mean {100 * np.mean(s95):.1f}%; members worse at "
            f"0.95 than at fixed 0.8: {[j for j in range(n) if s95[j] > f[j]]}")
        say(f"  per member, sign of rank-corr(ε, div) over the 3 runs: +1 in "
            f"{int(np.nansum(np.array(rhos) > 0))}/{n}, −1 in {int(np.nansum(np.array(rhos) < 0))}/{n}")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(OUT, "eps_pooled.md"), "w") as fh:
        fh.write(text)
    print(text, end="")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=OUT, help=f"folder of chain_metrics.py's JSON (default {OUT})")
    OUT = ap.parse_args().out
    main()
