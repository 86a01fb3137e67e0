#!/usr/bin/env python3
"""Ranks what separates the worst chains (by divergent fraction) from the rest, across runs.

Reads OUT/<candidate>__<run>.json (written by chain_metrics.py) and writes OUT/tables.md: the
feature ranking, per-run chain tables, and the per-member comparison across the ReLU candidates
(same ensemble, different warmup / target).

    python3 rank_features.py [--out DIR]     # default: worst_chains_out/ under the temp dir
"""
import argparse
import glob
import json
import os
import tempfile

import numpy as np

OUT = os.path.join(tempfile.gettempdir(), "worst_chains_out")
DATASET_ORDER = ["yacht", "energy", "concrete"]
CANDIDATE_ORDER = ["relu-0.80", "relu-fixed-0.80", "relu-0.95", "silu-0.95", "tanh-0.95",
                   "silu-0.90", "tanh-0.90"]
RELU_SHARED = ["relu-fixed-0.80", "relu-0.80", "relu-0.95"]


def run_label(r):
    """The dataset label of a run: the dataset, with -splitN appended for splits other than 0."""
    split = r.get("split", 0)
    return r["dataset"] if split == 0 else f"{r['dataset']}-split{split}"


def ordered(values, order):
    """values in the given order first, the rest sorted."""
    values = set(values)
    return [v for v in order if v in values] + sorted(values - set(order))


# Outcomes of divergence itself (a divergent draw ends its tree early): shown, never ranked.
OUTCOMES = {"div_frac", "first_div", "div_dispersion", "div_second_half_share", "p_div_after_div",
            "accept_mean", "treedepth_mean", "depth_max_frac", "n_leapfrog_mean", "chain"}
FEATURES = [
    ("step_size", "adapted step size ε"),
    ("eps_sqrt_inv_median", "ε·sqrt(median M⁻¹) (step in parameter units)"),
    ("eps_sqrt_inv_min", "ε·sqrt(min M⁻¹)"),
    ("metric_inv_median", "median inverse metric"),
    ("final_target", "target accept after warmup"),
    ("warmup_iterations", "warmup iterations"),
    ("member_final_loss", "member final training loss (members.json)"),
    ("member_train_nll_recomputed", "member training NLL (recomputed)"),
    ("member_sigma_min", "member min σ on train"),
    ("member_sigma_median", "member median σ on train"),
    ("member_norm", "member ‖θ‖"),
    ("sigma_min_mean", "draws: min σ over train rows"),
    ("sigma_q01_mean", "draws: 1% quantile σ"),
    ("sigma_median_mean", "draws: median σ"),
    ("n_rows_sigma_lt_0.01", "draws: rows with σ<0.01"),
    ("loglik_mean", "draws: mean log-likelihood"),
    ("lp_mean", "draws: mean lp__"),
    ("lp_sd", "draws: sd lp__"),
    ("lp_rise_first_last_tenth", "lp__ last tenth − first tenth"),
    ("theta_norm", "draws: ‖θ‖"),
    ("norm_rise_first_last_tenth", "‖θ‖ last tenth − first tenth"),
    ("dist_first_to_member", "first draw − member distance"),
    ("dist_mean_to_member", "chain mean − member distance"),
    ("within_chain_spread", "within-chain spread sqrt(tr Cov)"),
    ("jump_mean", "mean ‖θ_t − θ_{t−1}‖"),
    ("dist_mean_to_nearest_other_chain", "chain mean − nearest other chain mean"),
    ("w0_norm", "‖W0‖"),
    ("w1_norm", "‖W1‖"),
    ("w2_norm", "‖W2‖ (last layer)"),
    ("w_out_mu_norm", "‖W2[:,μ]‖"),
    ("w_out_sigma_norm", "‖W2[:,σ]‖"),
    ("w_out_sigma_maxabs", "max |W2[:,σ]|"),
    ("b_out_sigma", "σ-head bias"),
    ("dead_units_l0", "dead units layer 0"),
    ("dead_units_l1", "dead units layer 1"),
    ("near_kink_share", "share of pre-activations |z|<0.05"),
    ("zmax_mean", "max |standardized residual|"),
]


def rank(v):
    v = np.asarray(v, float)
    order = np.argsort(v, kind="mergesort")
    r = np.empty(len(v))
    r[order] = np.arange(len(v))
    for val in np.unique(v):
        m = v == val
        if m.sum() > 1:
            r[m] = r[m].mean()
    return r


def spearman(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    if len(a) < 4:
        return float("nan")
    ra, rb = rank(a), rank(b)
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def worst2_z(values, div):
    values = np.asarray(values, float)
    order = np.argsort(-np.asarray(div), kind="mergesort")
    w, rest = values[order[:2]], values[order[2:]]
    sd = rest.std(ddof=1)
    if not np.isfinite(sd) or sd == 0:
        return float("nan")
    return float((w.mean() - rest.mean()) / sd)


def get(m, key):
    v = m.get(key)
    return float("nan") if v is None else float(v)


def load_runs():
    runs = {}
    for path in sorted(glob.glob(os.path.join(OUT, "*__*.json"))):
        r = json.load(open(path))
        runs[(r["candidate"], run_label(r))] = r
    return runs


def fmt(v, digits=3):
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "–"
    if isinstance(v, (int, np.integer)):
        return str(v)
    if abs(v) >= 100 or v == 0:
        return f"{v:.0f}" if abs(v) >= 100 else "0"
    if abs(v) < 0.01:
        return f"{v:.1e}"
    return f"{v:.{digits}g}"


def tenths_string(t):
    """Each tenth's divergent fraction as one digit 0-9 (round(10·f), capped at 9)."""
    return "".join(str(min(9, int(round(10 * f)))) for f in t)


def ranking_table(runs, keys, title):
    sizes = sorted({len(runs[k]["chains"]) for k in keys})
    n = "/".join(map(str, sizes))
    rest = "/".join(str(x - 2) for x in sizes)
    lines = [f"#### {title}", "",
             f"Runs ({len(keys)}): {', '.join(f'{c}/{d}' for c, d in keys)}. ρ: Spearman of the "
             f"feature with the chain's divergent fraction over its {n} chains; z: (mean of the 2 "
             f"worst chains − mean of the other {rest}) / sd of the other {rest}.", "",
             "| feature | mean ρ | runs ρ>+0.5 | runs ρ<−0.5 | median z(worst 2) |",
             "|---|---|---|---|---|"]
    rows = []
    for key, label in FEATURES:
        rhos, zs = [], []
        for k in keys:
            ch = runs[k]["chains"]
            div = [m["div_frac"] for m in ch]
            vals = [get(m, key) for m in ch]
            rhos.append(spearman(vals, div))
            zs.append(worst2_z(vals, div))
        rhos, zs = np.array(rhos), np.array(zs)
        if np.all(~np.isfinite(rhos)):
            continue
        rows.append((np.nanmean(rhos), label, int(np.sum(rhos > 0.5)), int(np.sum(rhos < -0.5)),
                     np.nanmedian(zs)))
    rows.sort(key=lambda r: -abs(r[0]))
    for mean_rho, label, pos, neg, z in rows:
        lines.append(f"| {label} | {mean_rho:+.2f} | {pos} | {neg} | {z:+.2f} |")
    return lines + [""]


def chain_table(run):
    ch = sorted(run["chains"], key=lambda m: -m["div_frac"])
    head = ("| ch | div % | first div | div by tenth | disp. | ε | target | warmup | n_leapfrog | "
            "member NLL | σ_min | σ_med | rows σ<.01 | lp mean | lp rise | ‖θ‖ | ‖θ‖ rise | "
            "d(first,member) | d(mean,member) | spread | dead L0/L1 | ‖W2σ‖ | ρ(div,log σ_min) | "
            "ρ(div,loglik) |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for m in ch:
        lines.append("| " + " | ".join([
            str(m["chain"]), f"{100 * m['div_frac']:.1f}", fmt(m["first_div"]),
            f"`{tenths_string(m['div_tenths'])}`", fmt(m["div_dispersion"], 2), fmt(m["step_size"]),
            fmt(m.get("final_target"), 2), fmt(m.get("warmup_iterations")), fmt(m["n_leapfrog_mean"]),
            fmt(m["member_train_nll_recomputed"]), fmt(m["sigma_min_mean"]),
            fmt(m["sigma_median_mean"]), fmt(m["n_rows_sigma_lt_0.01"]), fmt(m["lp_mean"]),
            fmt(m["lp_rise_first_last_tenth"]), fmt(m["theta_norm"]),
            fmt(m["norm_rise_first_last_tenth"]), fmt(m["dist_first_to_member"]),
            fmt(m["dist_mean_to_member"]), fmt(m["within_chain_spread"]),
            f"{m['dead_units_l0']:.1f}/{m['dead_units_l1']:.1f}", fmt(m["w_out_sigma_norm"]),
            fmt(m.get("corr_div_logsmin_start"), 2), fmt(m.get("corr_div_loglik_start"), 2),
        ]) + " |")
    return lines + [""]


def member_table(runs, dataset):
    cands = [c for c in RELU_SHARED if (c, dataset) in runs]
    if len(cands) < 2:
        return []
    loss = {c: [m["member_train_nll_recomputed"] for m in runs[(c, dataset)]["chains"]] for c in cands}
    same = all(np.allclose(loss[c], loss[cands[0]], atol=1e-6) for c in cands)
    lines = [f"Same ensemble in all {len(cands)} runs: {same} (members' training NLL identical).", "",
             "| member | NLL | " + " | ".join(f"{c} div % (ε, target)" for c in cands) + " |",
             "|---|---|" + "---|" * len(cands)]
    for k in range(len(loss[cands[0]])):
        cells = []
        for c in cands:
            m = runs[(c, dataset)]["chains"][k]
            cells.append(f"{100 * m['div_frac']:.1f} ({m['step_size']:.2e}, {m.get('final_target', 0):.3g})")
        lines.append(f"| {k} | {loss[cands[0]][k]:.2f} | " + " | ".join(cells) + " |")
    lines.append("")
    for i in range(len(cands)):
        for j in range(i + 1, len(cands)):
            a = [m["div_frac"] for m in runs[(cands[i], dataset)]["chains"]]
            b = [m["div_frac"] for m in runs[(cands[j], dataset)]["chains"]]
            lines.append(f"- Spearman of per-member divergent fraction, {cands[i]} vs {cands[j]}: "
                         f"{spearman(a, b):+.2f}")
    lines.append("")
    return lines


def within_chain_summary(runs, keys):
    lines = ["| run | chains with divergences | mean ρ(div, log σ_min at start) | share < 0 | "
             "mean ρ(div, loglik at start) | share > 0 | mean ρ(div, kink share) | "
             "mean Spearman over tenths (div, log σ_min) |", "|---|---|---|---|---|---|---|---|"]
    for k in keys:
        ch = [m for m in runs[k]["chains"] if m.get("corr_div_logsmin_start") is not None
              and m["div_frac"] >= 0.02]
        if not ch:
            continue
        a = np.array([m["corr_div_logsmin_start"] for m in ch])
        b = np.array([m["corr_div_loglik_start"] for m in ch])
        c = np.array([m["corr_div_nearkink_start"] for m in ch])
        t = np.array([m["corr_tenths_div_logsmin"] for m in ch], float)
        lines.append(f"| {k[0]}/{k[1]} | {len(ch)} | {a.mean():+.2f} | {np.mean(a < 0):.2f} | "
                     f"{b.mean():+.2f} | {np.mean(b > 0):.2f} | {c.mean():+.2f} | {np.nanmean(t):+.2f} |")
    return lines + [""]


def rng(values, f="{:.2g}"):
    v = [x for x in values if x is not None and np.isfinite(x)]
    if not v:
        return "–"
    return f"{f.format(min(v))}…{f.format(max(v))} (median {f.format(float(np.median(v)))})"


def summary_numbers(runs, divergent, total):
    """The numbers the hand-written summary quotes, so that each can be traced to a table."""
    keys = sorted(runs)
    chains = [(k, m) for k in keys for m in runs[k]["chains"]]
    worst = {k: sorted(runs[k]["chains"], key=lambda m: -m["div_frac"])[:2] for k in divergent}
    out = ["## Numbers behind the summary", "",
           f"{len(keys)} runs, {len(chains)} chains; {len(divergent)} runs with ≥ 2% divergent "
           f"draws (\"divergent runs\"), {2 * len(divergent)} worst chains (2 per divergent run).", ""]

    out += ["### Checks of the recomputation", ""]
    lp = max(m["lp_check_max_abs"] for _, m in chains)
    out.append(f"- max |lp__ − (N(0,1) log prior + log likelihood)| over all draws of all chains: {lp:.3g}")
    members = {}  # the ReLU candidates share one ensemble per dataset: count each member once
    for k in keys:
        for m in runs[k]["chains"]:
            if m.get("member_final_loss") is not None:
                key = (k[1], m["chain"], round(m["member_train_nll_recomputed"], 6), m["member_final_loss"])
                members.setdefault(key, []).append(k[0])
    gaps = sorted(((abs(nll - fl), d, j, nll, fl, cands) for (d, j, nll, fl), cands in members.items()),
                  key=lambda x: -x[0])
    g = np.array([x[0] for x in gaps])
    out.append(f"- member NLL recomputed vs members.json final_loss, {len(g)} distinct members: median "
               f"|gap| {np.median(g):.3f}, {int((g > 0.1).sum())} above 0.1; largest: " +
               "; ".join(f"{d} member {j} of {'/'.join(cands)} {nll:.2f} vs {fl:.2f}"
                         for _, d, j, nll, fl, cands in gaps[:5]))
    out.append("")

    out += ["### σ on the training rows (standardized y units)", "",
            "Over all chains of all runs on the dataset; each chain's value is its mean over the 1000 draws.", "",
            "| dataset | training rows | parameters | median σ (median over chains) | min σ (median over chains) | "
            "rows with σ < 0.01 (median over chains) |", "|---|---|---|---|---|---|"]
    for d in ordered({d for _, d in keys}, DATASET_ORDER):
        ch = [m for k in keys if k[1] == d for m in runs[k]["chains"]]
        r0 = next(runs[k] for k in keys if k[1] == d)
        out.append(f"| {d} | {r0['n_train']} | {r0.get('n_params', '–')} (√ = "
                   f"{np.sqrt(r0.get('n_params', np.nan)):.1f}) | "
                   f"{np.median([m['sigma_median_mean'] for m in ch]):.2g} | "
                   f"{np.median([m['sigma_min_mean'] for m in ch]):.2g} | "
                   f"{np.median([m['n_rows_sigma_lt_0.01'] for m in ch]):.0f} |")
    out.append("")
    gap = {}
    for k in keys:
        ch = [m for m in runs[k]["chains"] if m.get("logsmin_at_div_start") is not None
              and m["div_frac"] >= 0.02]
        if ch:
            gap[k] = np.mean([m["logsmin_at_ok_start"] - m["logsmin_at_div_start"] for m in ch])
    out.append("- log σ_min at the start of non-divergent minus divergent transitions, mean over a "
               "run's chains with ≥ 2% divergences, range over runs: " + rng(gap.values()) +
               "; per run: " + ", ".join(f"{c}/{d} {v:+.2f}" for (c, d), v in gap.items()))
    out.append("")

    out += ["### Timing of the worst chains' divergences", ""]
    groups = {}
    for k in divergent:
        r = runs[k]
        g = f"target {r.get('target_accept')}, {r.get('warmup_policy')} warmup"
        groups.setdefault(g, []).extend((k, m) for m in worst[k])
    for g, lst in sorted(groups.items()):
        fd = [m["first_div"] for _, m in lst]
        out.append(f"- {g}: first divergent draw of the worst chains {min(fd)}–{max(fd)} "
                   f"(median {np.median(fd):.0f}; {len(fd)} chains in "
                   f"{', '.join(sorted({f'{c}/{d}' for (c, d), _ in lst}))})")
    fd = [m["first_div"] for k in divergent for m in worst[k]]
    out.append("- worst chains whose first divergence falls in the first L draws: " +
               ", ".join(f"L = {L}: {sum(x < L for x in fd)}/{len(fd)}" for L in (50, 100, 200, 300)))
    checked = [m for k in divergent for m in worst[k] if m.get("last_check_divergences") is not None]
    out.append(f"- worst chains of stationary-warmup runs whose last warmup check had 0 divergences: "
               f"{sum(m['last_check_divergences'] == 0 for m in checked)}/{len(checked)}")
    disp = [m["div_dispersion"] for k in divergent for m in worst[k]]
    out.append(f"- dispersion of the worst chains' divergences (variance/mean per 50 draws): {rng(disp)}")
    cap = max(abs(m["depth_max_frac"] - (1 - m["div_frac"])) for _, m in chains)
    out.append(f"- max over all chains of |share of draws at the depth cap − (1 − divergent share)|: {cap:.2g}")
    out.append("")

    out += ["### Distance from the member and drift", ""]
    out.append("- first kept draw to its member (L2), all chains: " +
               rng([m["dist_first_to_member"] for _, m in chains], "{:.1f}"))
    out.append("- member ‖θ‖, all chains: " + rng([m["member_norm"] for _, m in chains], "{:.1f}"))
    out.append("- ‖θ‖ last tenth − first tenth, median over a divergent run's chains, range over runs: " +
               "; ".join(f"{d} " + rng([np.median([m["norm_rise_first_last_tenth"] for m in runs[k]["chains"]])
                                        for k in divergent if k[1] == d], "{:+.1f}")
                         for d in ordered({d for _, d in divergent}, DATASET_ORDER)))
    out.append("- chain mean to the nearest other chain's mean, all chains: " +
               rng([m["dist_mean_to_nearest_other_chain"] for _, m in chains], "{:.1f}"))
    out.append("")

    out += ["### Last warmup check against the later divergent fraction (stationary warmup, divergent runs)",
            "", "ρ: Spearman over the run's chains of the last check's mean acceptance with the divergent "
            "fraction. The check passes at mean acceptance ≥ target − 0.1.", "",
            "| run | target | ρ | worst 2: last-check acceptance | rest: median (min) |", "|---|---|---|---|---|"]
    for k in divergent:
        ch = runs[k]["chains"]
        if any(m.get("last_check_accept") is None for m in ch):
            continue
        acc = [m["last_check_accept"] for m in ch]
        div = [m["div_frac"] for m in ch]
        order = np.argsort(-np.array(div), kind="mergesort")
        rest = [acc[i] for i in order[2:]]
        out.append(f"| {k[0]}/{k[1]} | {runs[k].get('target_accept')} | {spearman(acc, div):+.2f} | "
                   f"{acc[order[0]]:.3f}, {acc[order[1]]:.3f} | {np.median(rest):.3f} ({min(rest):.3f}) |")
    out.append("")

    out += ["### Cost and movement per run", "",
            "| run | divergent % | mean leapfrog steps per draw | mean ‖θ_t − θ_{t−1}‖ |", "|---|---|---|---|"]
    for d in ordered({d for _, d in keys}, DATASET_ORDER):
        for c in ordered({c for c, _ in keys}, CANDIDATE_ORDER):
            if (c, d) in runs:
                ch = runs[(c, d)]["chains"]
                out.append(f"| {c}/{d} | {100 * total[(c, d)]:.1f} | "
                           f"{np.mean([m['n_leapfrog_mean'] for m in ch]):.0f} | "
                           f"{np.mean([m['jump_mean'] for m in ch]):.2f} |")
    return out + [""]


def main():
    runs = load_runs()
    total = {k: np.mean([m["div_frac"] for m in r["chains"]]) for k, r in runs.items()}
    divergent = [k for k in runs if total[k] >= 0.02]
    relu = [k for k in divergent if k[0].startswith("relu")]
    smooth = [k for k in divergent if not k[0].startswith("relu")]
    out = ["# Generated tables (rank_features.py)", "",
           "Run-level divergent fraction: " + ", ".join(
               f"{c}/{d} {100 * total[(c, d)]:.1f}%" for c, d in sorted(runs)), ""]
    out += ["## Feature ranking", ""]
    out += ranking_table(runs, divergent, "All runs with ≥2% divergent draws")
    out += ranking_table(runs, relu, "ReLU runs")
    out += ranking_table(runs, smooth, "Smooth-activation runs (SiLU / tanh / GELU) with ≥2% divergent draws")
    out += ["## Where in the draws the divergences fall", "",
            "Worst 2 chains of each run (by divergent fraction): first divergent draw, divergent "
            "fraction per tenth of the draws (one digit per tenth, round(10 f) capped at 9), "
            "dispersion (variance/mean of counts in 50-draw blocks; 1 = Poisson). Rest: the other "
            "10 chains' mean fraction per tenth, in %.", "",
            "| run | worst chain: first div, tenths, disp. | 2nd worst | rest, % per tenth |",
            "|---|---|---|---|"]
    for k in sorted(divergent):
        ch = sorted(runs[k]["chains"], key=lambda m: -m["div_frac"])
        cell = lambda m: (f"#{m['chain']} {100 * m['div_frac']:.0f}%: {fmt(m['first_div'])}, "
                          f"`{tenths_string(m['div_tenths'])}`, {fmt(m['div_dispersion'], 2)}")
        rest = np.mean([m["div_tenths"] for m in ch[2:]], axis=0)
        out.append(f"| {k[0]}/{k[1]} | {cell(ch[0])} | {cell(ch[1])} | "
                   + " ".join(f"{100 * v:.0f}" for v in rest) + " |")
    out.append("")
    out += ["## Divergences against the state they start from (within chains)", "",
            "Transition t starts at draw t−1; ρ are point-biserial correlations over the 999 "
            "transitions of each chain with ≥2% divergences, averaged over those chains.", ""]
    out += within_chain_summary(runs, sorted(runs))
    out += ["## Same members, different warmup (ReLU)", ""]
    datasets = ordered({d for _, d in runs}, DATASET_ORDER)
    for d in datasets:
        t = member_table(runs, d)
        if t:
            out += [f"### {d}", ""] + t
    out += summary_numbers(runs, sorted(divergent), total)
    out += ["## Per-run chain tables", "",
            "Sorted by divergent fraction. `div by tenth`: each tenth of the 1000 draws as one digit, "
            "round(10 × divergent fraction) capped at 9. disp.: variance/mean of divergence counts "
            "in 20 blocks of 50 draws (1 = Poisson, ≫1 = clustered). σ in standardized y units, "
            "averaged over all 1000 draws. ρ(div, ·): within-chain correlation of a transition's "
            "divergence with its start draw's statistic.", ""]
    order = ordered({c for c, _ in runs}, CANDIDATE_ORDER)
    for d in datasets:
        for c in order:
            if (c, d) in runs:
                out += [f"### {c} / {d} (run divergent {100 * total[(c, d)]:.1f}%)", ""]
                out += chain_table(runs[(c, d)])
    with open(os.path.join(OUT, "tables.md"), "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote", os.path.join(OUT, "tables.md"))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=OUT, help=f"folder of chain_metrics.py's JSON (default {OUT})")
    OUT = ap.parse_args().out
    main()
