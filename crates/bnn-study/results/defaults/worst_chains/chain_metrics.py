#!/usr/bin/env python3
"""Per-chain measurements of a finished DEI-NUTS run (issue 70, item 3: the worst chains).

Reads run directories read-only and writes one JSON of per-chain metrics per run to
OUT/<candidate>__<run>.json (run = the directory name, e.g. yacht-split0).

    python3 chain_metrics.py [--out DIR] [--cache DIR] [--data DIR] RUN_DIR...
    python3 chain_metrics.py runs/defaults/relu-0.80/yacht-split0

--out    default: worst_chains_out/ under the system temp dir.
--cache  parsed draws as .npy (the CSV parse is slow; ~3.5 MB per chain, safe to delete).
         Default: worst_chains_cache/ under the system temp dir.
--data   the datasets folder, holding <ds>/<ds>.csv. Default: env BNN_DATA_DIR, else
         ../shared/datasets beside the repository root (found from this script's location).

The network is recomputed in numpy from the stored draws: MLP (d, hidden..., 2), weights stored
[d_in, d_out] row-major (layout.json), head outputs (mu, o) with sigma = exp(o) clipped to
[1e-6, 1e6] (crates/bnn-model/src/likelihood.rs, ScaleLink::Exp, the "hetero" likelihood).
Data: <data>/<ds>/<ds>.csv, last column the target; standardize = "full" means mean/sd (ddof=0)
over all rows (crates/bnn-data/src/standardize.rs, StatsSource::FullData). The training rows are
all rows minus the test rows listed in predictions.csv (matched by value).
"""
import argparse
import json
import math
import os
import re
import sys
import tempfile

import numpy as np
from safetensors.numpy import load_file

OUT = os.path.join(tempfile.gettempdir(), "worst_chains_out")
CACHE = os.path.join(tempfile.gettempdir(), "worst_chains_cache")
DATA = None  # set in __main__


def repo_root():
    """The workspace root above this script: the first parent whose Cargo.toml has [workspace]."""
    d = os.path.dirname(os.path.abspath(__file__))
    while True:
        cargo = os.path.join(d, "Cargo.toml")
        if os.path.isfile(cargo) and "[workspace]" in open(cargo).read():
            return d
        parent = os.path.dirname(d)
        if parent == d:
            # not inside the workspace: assume the repository layout
            # <root>/crates/bnn-study/results/defaults/worst_chains/
            return os.path.abspath(os.path.join(os.path.dirname(__file__), *[".."] * 5))
        d = parent


def default_data_dir():
    env = os.environ.get("BNN_DATA_DIR")
    if env:
        return env
    return os.path.normpath(os.path.join(repo_root(), "..", "shared", "datasets"))


LOG_SMIN, LOG_SMAX = np.log(1e-6), np.log(1e6)
HALF_LOG_2PI = 0.5 * np.log(2 * np.pi)


def read_csv_header(path):
    with open(path) as f:
        return f.readline().strip().split(",")


def cache_path(run, k):
    """Cache file of a chain's draws, keyed by candidate, run name, chain and the CSV's size and
    modification time (so a rewritten CSV is parsed again)."""
    path = os.path.join(run, f"draws_chain_{k}.csv")
    st = os.stat(path)
    cand = os.path.basename(os.path.dirname(run))
    name = os.path.basename(run)
    return os.path.join(CACHE, f"{cand}__{name}__chain{k}__{st.st_size}_{st.st_mtime_ns}.npy")


def load_draws(run, k):
    """draws_chain_k.csv as (columns, float64 array), cached as .npy (the CSV parse is slow)."""
    cache = cache_path(run, k)
    path = os.path.join(run, f"draws_chain_{k}.csv")
    cols = read_csv_header(path)
    if os.path.exists(cache):
        return cols, np.load(cache)
    arr = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float64)
    os.makedirs(CACHE, exist_ok=True)
    np.save(cache, arr)
    return cols, arr


def training_data(run, dataset):
    """Standardized training X, y as the pipeline sees them (full-data standardization)."""
    raw = np.loadtxt(os.path.join(DATA, dataset, f"{dataset}.csv"), delimiter=",", skiprows=1)
    x_all, y_all = raw[:, :-1], raw[:, -1]
    pred_cols = read_csv_header(os.path.join(run, "predictions.csv"))
    pred = np.loadtxt(os.path.join(run, "predictions.csv"), delimiter=",", skiprows=1)
    xcols = [i for i, c in enumerate(pred_cols) if c.startswith("x") and c[1:].isdigit()]
    ycol = pred_cols.index("y")
    assert len(xcols) == x_all.shape[1], (len(xcols), x_all.shape)
    test_xy = np.column_stack([pred[:, xcols], pred[:, ycol]])
    all_xy = np.column_stack([x_all, y_all])
    taken = np.zeros(len(all_xy), bool)
    for row in test_xy:
        scale = np.maximum(np.abs(row), 1.0)
        hits = np.where(~taken & np.all(np.abs(all_xy - row) <= 1e-6 * scale, axis=1))[0]
        assert len(hits) >= 1, f"test row {row} not found in the CSV"
        taken[hits[0]] = True
    x_mean, x_sd = x_all.mean(0), x_all.std(0)
    y_mean, y_sd = y_all.mean(), y_all.std()
    # Check the standardization against predictions.csv's y_std.
    y_std_pred = pred[:, pred_cols.index("y_std")]
    err = np.max(np.abs((pred[:, ycol] - y_mean) / y_sd - y_std_pred))
    assert err < 1e-6, f"standardization mismatch {err}"
    train = ~taken
    return (x_all[train] - x_mean) / x_sd, (y_all[train] - y_mean) / y_sd


_erf = np.frompyfunc(math.erf, 1, 1)


def activation(name):
    """The hidden activations of crates/bnn-model/src/activation.rs."""
    sigmoid = lambda z: 0.5 * (1.0 + np.tanh(0.5 * z))
    acts = {
        "relu": lambda z: np.maximum(z, 0.0),
        "leaky_relu": lambda z: np.where(z > 0, z, 0.01 * z),
        "trunc_relu": lambda z: np.clip(z, 0.0, 1.0),
        "tanh": np.tanh,
        "sigmoid": sigmoid,
        "silu": lambda z: z * sigmoid(z),
        "gelu": lambda z: z * 0.5 * (1.0 + _erf(z / np.sqrt(2.0)).astype(np.float64)),
        "softplus": lambda z: np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z))),
        "identity": lambda z: z,
    }
    if name not in acts:
        sys.exit(f"activation {name!r} is not implemented here")
    return acts[name]


def unflatten(theta, entries):
    """theta (S, D) -> list of (W (S, din, dout), b (S, dout)) per layer."""
    layers = {}
    for e in entries:
        size = int(np.prod(e["shape"]))
        block = theta[:, e["offset"]: e["offset"] + size].reshape((theta.shape[0], *e["shape"]))
        layers.setdefault(e["layer"], {})[e["kind"]] = block
    return [(layers[i]["weight"], layers[i]["bias"]) for i in sorted(layers)]


def forward(theta, entries, x, act):
    """Pre-activations of the hidden layers and (mu, log sigma), each with a leading draw axis."""
    layers = unflatten(theta, entries)
    h = np.broadcast_to(x, (theta.shape[0], *x.shape))
    pre = []
    for i, (w, b) in enumerate(layers):
        z = np.einsum("snd,sdh->snh", h, w) + b[:, None, :]
        if i < len(layers) - 1:
            pre.append(z)
            h = act(z)
        else:
            out = z
    return pre, out[..., 0], np.clip(out[..., 1], LOG_SMIN, LOG_SMAX)


def log_lik(mu, log_sd, y):
    zz = (y - mu) * np.exp(-log_sd)
    return (-0.5 * zz**2 - log_sd - HALF_LOG_2PI).sum(-1)


def member_vector(path, entries):
    t = load_file(path)
    theta = np.zeros(sum(int(np.prod(e["shape"])) for e in entries))
    for e in entries:
        size = int(np.prod(e["shape"]))
        theta[e["offset"]: e["offset"] + size] = t[e["name"]].astype(np.float64).reshape(-1)
    return theta


def spearman(a, b):
    def rank(v):
        order = np.argsort(v, kind="mergesort")
        r = np.empty(len(v))
        r[order] = np.arange(len(v))
        # average ties
        for val in np.unique(v):
            m = v == val
            if m.sum() > 1:
                r[m] = r[m].mean()
        return r
    a, b = np.asarray(a, float), np.asarray(b, float)
    if np.std(a) == 0 or np.std(b) == 0:
        return float("nan")
    return float(np.corrcoef(rank(a), rank(b))[0, 1])


def chain_metrics(run, k, cfg, layout, x, y, members, member_thetas, act_name):
    cols, arr = load_draws(run, k)
    c = {name: i for i, name in enumerate(cols)}
    npar = layout["dim"]
    theta = arr[:, 7: 7 + npar]
    assert cols[7: 7 + npar] == layout["columns"], "parameter columns differ from layout"
    div = arr[:, c["divergent__"]] > 0
    n = len(div)
    m = {"chain": k}
    # 1. divergences: fraction, first, per tenth, clustering
    m["div_frac"] = float(div.mean())
    m["first_div"] = int(np.argmax(div)) if div.any() else None
    tenths = np.array_split(div, 10)
    m["div_tenths"] = [float(t.mean()) for t in tenths]
    blocks = np.array([b.sum() for b in np.array_split(div, 20)])  # 50-draw blocks
    m["div_dispersion"] = float(blocks.var() / blocks.mean()) if blocks.mean() > 0 else None
    m["div_second_half_share"] = float(div[n // 2:].sum() / div.sum()) if div.any() else None
    if div[:-1].sum() > 0:
        m["p_div_after_div"] = float(div[1:][div[:-1]].mean())
    else:
        m["p_div_after_div"] = None
    # 2. step size, trees
    m["step_size"] = float(arr[0, c["stepsize__"]])
    m["accept_mean"] = float(arr[:, c["accept_stat__"]].mean())
    m["treedepth_mean"] = float(arr[:, c["treedepth__"]].mean())
    m["depth_max_frac"] = float((arr[:, c["treedepth__"]] >= config_value(cfg, "max_tree_depth")).mean())
    m["n_leapfrog_mean"] = float(arr[:, c["n_leapfrog__"]].mean())
    # warmup / metric from the checkpoint
    ck = json.load(open(os.path.join(run, "checkpoints", f"chain_{k}.json")))
    st = ck["state"] if isinstance(ck["state"], dict) else None
    if st is not None:
        inv = np.array(st["metric"]["inverse_diag"])
        m["final_target"] = st["warmup"]["dual_averaging"]["target"]
        m["metric_inv_median"] = float(np.median(inv))
        m["metric_inv_min"] = float(inv.min())
        m["metric_inv_max"] = float(inv.max())
        # Step in parameter units along the stiffest / median coordinate.
        m["eps_sqrt_inv_min"] = float(m["step_size"] * np.sqrt(inv.min()))
        m["eps_sqrt_inv_median"] = float(m["step_size"] * np.sqrt(np.median(inv)))
        m["warmup_iterations"] = st["warmup"]["iteration"]
    # 3. member training loss
    mem = members[k]
    m["member_final_loss"] = mem.get("final_loss")
    m["member_best_valid_loss"] = mem.get("best_valid_loss")
    th0 = member_thetas[k]
    act = activation(act_name)
    pre0, mu0, ls0 = forward(th0[None, :], layout["entries"], x, act)
    m["member_train_nll_recomputed"] = float(-log_lik(mu0, ls0, y)[0] / len(y))
    m["member_sigma_min"] = float(np.exp(ls0.min()))
    m["member_sigma_median"] = float(np.exp(np.median(ls0)))
    # 4. sigma range per draw on the training rows (all draws, in chunks)
    per = {key: [] for key in ["smin", "sq01", "smed", "n_small", "loglik", "dead0", "dead1",
                               "near_kink", "zmax"]}
    for s in range(0, n, 100):
        pre, mu, ls = forward(theta[s: s + 100], layout["entries"], x, act)
        per["smin"].append(ls.min(1))
        per["sq01"].append(np.quantile(ls, 0.01, axis=1))
        per["smed"].append(np.median(ls, axis=1))
        per["n_small"].append((ls < np.log(0.01)).sum(1))
        per["loglik"].append(log_lik(mu, ls, y))
        per["zmax"].append(np.abs((y - mu) * np.exp(-ls)).max(1))
        per["dead0"].append((pre[0] <= 0).all(1).sum(1))
        per["dead1"].append((pre[1] <= 0).all(1).sum(1))
        # share of hidden pre-activations within 0.05 of the kink (relu's non-smooth set)
        per["near_kink"].append(np.mean([(np.abs(p) < 0.05).mean((1, 2)) for p in pre], axis=0))
    per = {key: np.concatenate(v) for key, v in per.items()}
    m["log_sigma_min_mean"] = float(per["smin"].mean())
    m["sigma_min_mean"] = float(np.exp(per["smin"]).mean())
    m["sigma_q01_mean"] = float(np.exp(per["sq01"]).mean())
    m["sigma_median_mean"] = float(np.exp(per["smed"]).mean())
    m["n_rows_sigma_lt_0.01"] = float(per["n_small"].mean())
    m["zmax_mean"] = float(per["zmax"].mean())
    m["loglik_mean"] = float(per["loglik"].mean())
    m["dead_units_l0"] = float(per["dead0"].mean())
    m["dead_units_l1"] = float(per["dead1"].mean())
    m["near_kink_share"] = float(per["near_kink"].mean())
    # sigma vs divergence: draw t is the end of transition t, which started at draw t-1
    start_smin = per["smin"][:-1]
    d1 = div[1:]
    if d1.any() and (~d1).any():
        m["logsmin_at_div_start"] = float(start_smin[d1].mean())
        m["logsmin_at_ok_start"] = float(start_smin[~d1].mean())
        m["corr_div_logsmin_start"] = float(np.corrcoef(d1.astype(float), start_smin)[0, 1])
        m["corr_div_nsmall_start"] = float(np.corrcoef(d1.astype(float), per["n_small"][:-1])[0, 1]) \
            if per["n_small"][:-1].std() > 0 else None
        m["corr_div_loglik_start"] = float(np.corrcoef(d1.astype(float), per["loglik"][:-1])[0, 1])
        m["corr_div_nearkink_start"] = float(np.corrcoef(d1.astype(float), per["near_kink"][:-1])[0, 1])
    tenth_s = [float(t.mean()) for t in np.array_split(per["smin"], 10)]
    m["logsmin_tenths"] = tenth_s
    m["corr_tenths_div_logsmin"] = spearman(m["div_tenths"], tenth_s) if div.any() else None
    # 5. mode: lp, distance to the member, drift
    lp = arr[:, c["lp__"]]
    m["lp_mean"] = float(lp.mean())
    m["lp_sd"] = float(lp.std())
    m["lp_rise_first_last_tenth"] = float(lp[-n // 10:].mean() - lp[: n // 10].mean())
    prior = -0.5 * (theta**2).sum(1) - HALF_LOG_2PI * npar
    m["lp_check_max_abs"] = float(np.max(np.abs(lp - (prior + per["loglik"]))))
    mean_theta = theta.mean(0)
    m["member_norm"] = float(np.linalg.norm(th0))
    m["dist_mean_to_member"] = float(np.linalg.norm(mean_theta - th0))
    m["dist_first_to_member"] = float(np.linalg.norm(theta[0] - th0))
    m["dist_last_to_member"] = float(np.linalg.norm(theta[-1] - th0))
    m["within_chain_spread"] = float(np.sqrt(theta.var(0).sum()))
    others = [np.linalg.norm(mean_theta - t) for j, t in enumerate(member_thetas) if j != k]
    m["dist_mean_to_nearest_other_member"] = float(min(others))
    norms = np.linalg.norm(theta, axis=1)
    m["norm_tenths"] = [float(t.mean()) for t in np.array_split(norms, 10)]
    m["norm_rise_first_last_tenth"] = m["norm_tenths"][-1] - m["norm_tenths"][0]
    jumps = np.linalg.norm(np.diff(theta, axis=0), axis=1)
    m["jump_mean"] = float(jumps.mean())
    m["lp_tenths"] = [float(t.mean()) for t in np.array_split(lp, 10)]
    if d1.any() and (~d1).any():
        m["jump_div"] = float(jumps[d1].mean())
        m["jump_ok"] = float(jumps[~d1].mean())
    m["_mean_theta"] = mean_theta
    # 6. weights
    layers = unflatten(theta, layout["entries"])
    w2, b2 = layers[-1]
    m["w_out_mu_norm"] = float(np.linalg.norm(w2[:, :, 0], axis=1).mean())
    m["w_out_sigma_norm"] = float(np.linalg.norm(w2[:, :, 1], axis=1).mean())
    m["b_out_sigma"] = float(b2[:, 1].mean())
    for i, (w, b) in enumerate(layers):
        m[f"w{i}_norm"] = float(np.linalg.norm(w.reshape(n, -1), axis=1).mean())
    m["theta_norm"] = float(np.linalg.norm(theta, axis=1).mean())
    # last layer's largest input-unit weight (a unit that drives sigma down hard)
    m["w_out_sigma_maxabs"] = float(np.abs(w2[:, :, 1]).max(1).mean())
    return m


def config_value(cfg, key, default=None):
    """A scalar `key = value` of config.toml (the first one; keys used here are unique)."""
    m = re.search(r"^%s\s*=\s*(.+?)\s*$" % re.escape(key), cfg, re.M)
    if not m and default is not None:
        return default
    assert m, f"{key} not in config.toml"
    v = m.group(1)
    if v.startswith('"'):
        return v.strip('"')
    return float(v) if "." in v else int(v)


def main(run):
    run = os.path.abspath(run.rstrip("/"))
    cand = os.path.basename(os.path.dirname(run))
    name = os.path.basename(run)
    dataset = name.split("-split")[0]
    split = int(name.split("-split")[1]) if "-split" in name else 0
    if not os.path.exists(os.path.join(run, "summary.json")):
        print(f"{run} has no summary.json (unfinished): skipped", file=sys.stderr)
        return
    cfg = open(os.path.join(run, "config.toml")).read()
    act_name = config_value(cfg, "activation")
    assert config_value(cfg, "likelihood") == "hetero"
    assert config_value(cfg, "standardize") == "full"
    assert config_value(cfg, "prior") == "normal:1"  # lp check below assumes N(0, 1)
    layout = json.load(open(os.path.join(run, "layout.json")))
    members = json.load(open(os.path.join(run, "ensemble", "members.json")))["members"]
    members = sorted(members, key=lambda r: r["index"])
    member_thetas = [member_vector(os.path.join(run, "ensemble", r["file"]), layout["entries"])
                     for r in members]
    x, y = training_data(run, dataset)
    diag = json.load(open(os.path.join(run, "diagnostics.json")))
    nchains = len(diag["chains"])
    out = []
    for k in range(nchains):
        m = chain_metrics(run, k, cfg, layout, x, y, members, member_thetas, act_name)
        dc = diag["chains"][k]
        m["verdict"] = dc.get("verdict")
        checks = dc.get("warmup_checks", [])
        # (outcome, end iteration, divergences, target, mean acceptance) of each warmup check
        m["warmup_checks"] = [(w["outcome"], w["end"], w["divergences"], round(w["target_accept"], 3),
                               w.get("mean_accept")) for w in checks]
        if checks:
            m["last_check_accept"] = checks[-1].get("mean_accept")
            m["last_check_divergences"] = checks[-1]["divergences"]
        out.append(m)
        print(f"{cand} {dataset} chain {k}: div {m['div_frac']:.3f} eps {m['step_size']:.2e}", flush=True)
    # nearest other chain's mean (are two chains in one mode?)
    means = [m.pop("_mean_theta") for m in out]
    for k, m in enumerate(out):
        m["dist_mean_to_nearest_other_chain"] = float(min(
            np.linalg.norm(means[k] - means[j]) for j in range(nchains) if j != k))
    os.makedirs(OUT, exist_ok=True)
    res = {"candidate": cand, "dataset": dataset, "split": split, "run_name": name,
           "activation": act_name, "n_train": int(len(y)), "n_params": int(layout["dim"]),
           "target_accept": config_value(cfg, "target_accept"),
           "warmup_policy": config_value(cfg, "warmup_policy", "unknown"), "chains": out}
    with open(os.path.join(OUT, f"{cand}__{name}.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", metavar="RUN_DIR", help="<runs root>/<candidate>/<dataset>-splitN")
    ap.add_argument("--out", default=OUT, help=f"per-run JSON folder (default {OUT})")
    ap.add_argument("--cache", default=CACHE, help=f"parsed-draws cache (default {CACHE})")
    ap.add_argument("--data", default=None, help="datasets folder (default: env BNN_DATA_DIR, "
                    "else ../shared/datasets beside the repository root)")
    args = ap.parse_args()
    OUT, CACHE = args.out, args.cache
    DATA = args.data or default_data_dir()
    if not os.path.isdir(DATA):
        sys.exit(f"datasets folder {DATA} not found: set BNN_DATA_DIR or pass --data")
    for r in args.runs:
        main(r)
