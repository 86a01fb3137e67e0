#!/usr/bin/env python3
"""DEI-MCMC end to end against NumPyro NUTS from the same deep-ensemble members and split.

1. `bnn run` trains the members and samples NUTS from them (or reuses `<out>/bnn` when it holds a
   finished run with the same settings: `--reuse`);
2. `bnn data split` writes that run's standardized train/test rows;
3. NumPyro's NUTS (target acceptance, tree depth and warmup/draw counts as ours, diagonal mass
   matrix, Stan-style windowed adaptation) starts chain j from member j's safetensors, one XLA
   host device per chain (`chain_method="parallel"`), on the same cores;
4. one JSON (stdout and `<out>/e2e.json`) with both sides' wall time of warmup + sampling
   (NumPyro's tracing/lowering/compilation time measured through `jax.monitoring` and
   subtracted; our members' training is outside both), gradients, divergences, acceptance and
   step size per chain, test LPPD, RMSE and 90% coverage computed the same way for both (pooled
   draws; coverage from one predictive sample per draw and point, as `bnn evaluate` does).

    python3 bench/e2e_numpyro.py --dataset yacht --split-seed 0 \
        --members 12 --warmup 100 --draws 1000 --out runs/e2e-yacht

The model is the built-in heteroscedastic MLP (σ = exp(o₂), log σ clamped to [ln 1e-6, ln 1e6]),
ReLU by default, N(0, 1) prior on every weight and bias: the flat θ layout is burn's
(per layer: weight [d_in, d_out] row major, then bias), which is also the order NumPyro sees.
"""

import argparse
import csv
import json
import math
import os
import struct
import subprocess
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bnn", default=os.environ.get("BNN_BIN", "target/release/bnn"))
    p.add_argument("--dataset", default="yacht")
    p.add_argument("--split-seed", type=int, default=0)
    p.add_argument("--standardize", default="full", choices=["full", "train"])
    p.add_argument("--hidden", default="16,16")
    p.add_argument("--activation", default="relu", choices=["relu", "tanh"])
    p.add_argument("--members", type=int, default=12)
    p.add_argument("--epochs", type=int, default=5000)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--max-depth", type=int, default=10)
    p.add_argument("--target-accept", type=float, default=0.8)
    p.add_argument("--step-size-search", default="stan", choices=["stan", "target"],
                   help="our warmup's step-size search (NumPyro's own is the 'target' kind at 0.8)")
    p.add_argument("--metric-estimate", default="draws", choices=["draws", "draws-and-gradients"],
                   help="how our metric windows estimate the diagonal metric (NumPyro's is 'draws')")
    p.add_argument("--threads", type=int, default=2, help="our worker threads (NumPyro uses every core)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    p.add_argument("--reuse", action="store_true", help="keep <out>/bnn if it already holds a finished run")
    p.add_argument("--skip-numpyro", action="store_true")
    return p.parse_args()


def run_ours(a, run_dir):
    done = os.path.isfile(os.path.join(run_dir, "summary.json"))
    if not (a.reuse and done):
        cmd = [a.bnn, "run", "--dataset", a.dataset, "--split-seed", str(a.split_seed), "--standardize", a.standardize,
               "--hidden", a.hidden, "--activation", a.activation, "--members", str(a.members),
               "--epochs", str(a.epochs), "--learning-rate", str(a.learning_rate), "--warmup", str(a.warmup),
               "--draws", str(a.draws), "--max-depth", str(a.max_depth), "--target-accept", str(a.target_accept),
               "--step-size-search", a.step_size_search, "--metric-estimate", a.metric_estimate, "--seed", str(a.seed), "--threads", str(a.threads), "--out", run_dir]
        print("running:", " ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=True)
    with open(os.path.join(run_dir, "sampling.json")) as f:
        sampling = json.load(f)
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    chains = []
    for c in range(summary["chains"]):
        with open(os.path.join(run_dir, f"draws_chain_{c}.csv")) as f:
            rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
        chains.append({
            "divergent": sum(int(float(r["divergent__"])) for r in rows),
            "accept": sum(float(r["accept_stat__"]) for r in rows) / len(rows),
            "step_size": float(rows[-1]["stepsize__"]),
            "gradients_sampling": sum(int(float(r["n_leapfrog__"])) for r in rows),
        })
    return {
        "seconds_warmup_and_sampling": sampling["seconds_warmup"] + sampling["seconds_sampling"],
        "seconds_warmup": sampling["seconds_warmup"], "seconds_sampling": sampling["seconds_sampling"],
        "lppd": summary["lppd"], "rmse": summary.get("rmse"), "coverage_90": summary.get("coverage_90"),
        "divergent": sum(c["divergent"] for c in chains), "draws": sum(summary["draws_per_chain"]),
        "mean_accept": sum(c["accept"] for c in chains) / len(chains), "chains": chains,
    }


def read_member(path):
    """Flat θ of one member in burn's layout (weight then bias, layer by layer)."""
    import numpy as np
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        blob = f.read()
    layers = sorted({k.rsplit(".", 1)[0] for k in header if k != "__metadata__"}, key=lambda k: int(k.rsplit(".", 1)[1]))
    parts = []
    for layer in layers:
        for kind in ("weight", "bias"):
            t = header[f"{layer}.{kind}"]
            if t["dtype"] != "F32":
                raise SystemExit(f"{path}: {layer}.{kind} is {t['dtype']}, expected F32")
            lo, hi = t["data_offsets"]
            parts.append(np.frombuffer(blob[lo:hi], dtype="<f4").reshape(t["shape"]).ravel())
    return np.concatenate(parts)


def read_members(run_dir, widths):
    """Every member of `<run_dir>/ensemble` as one row of flat θ, checked against the MLP's size."""
    import numpy as np
    folder = os.path.join(run_dir, "ensemble")
    names = sorted(f for f in os.listdir(folder) if f.endswith(".safetensors"))
    thetas = np.stack([read_member(os.path.join(folder, m)) for m in names])
    expected = sum(i * o + o for i, o in zip(widths[:-1], widths[1:]))
    if thetas.shape[1] != expected:
        raise SystemExit(f"members have {thetas.shape[1]} parameters, the MLP {widths} has {expected}")
    return thetas


def read_rows(path):
    import numpy as np
    with open(path) as f:
        header = f.readline().strip().split(",")
    values = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    x_cols = [i for i, h in enumerate(header) if h.startswith("x")]
    y_cols = [i for i, h in enumerate(header) if h.startswith("y")]
    return values[:, x_cols].astype("float32"), values[:, y_cols[0]].astype("float32")


def make_forward(widths, activation):
    """The built-in heteroscedastic MLP on a flat θ: (mean, log σ clamped to [ln 1e-6, ln 1e6])."""
    import jax
    import jax.numpy as jnp
    act = jax.nn.relu if activation == "relu" else jnp.tanh
    lo, hi = math.log(1e-6), math.log(1e6)

    def forward(theta, x):
        h, o = x, 0
        for l, (i, w) in enumerate(zip(widths[:-1], widths[1:])):
            weight = theta[o:o + i * w].reshape(i, w)
            bias = theta[o + i * w:o + i * w + w]
            o += i * w + w
            h = h @ weight + bias
            if l < len(widths) - 2:
                h = act(h)
        return h[:, 0], jnp.clip(h[:, 1], lo, hi)

    return forward


def test_metrics(forward, thetas, x_test, y_test, seed):
    """LPPD, RMSE and 90% coverage on the standardized scale, pooled over every draw, as
    `bnn evaluate` computes them (coverage from one predictive sample per draw and point)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    means, log_sds = jax.vmap(lambda t: forward(t, x_test))(jnp.asarray(thetas))
    means, sds = np.asarray(means, dtype=np.float64), np.exp(np.asarray(log_sds, dtype=np.float64))
    y = y_test.astype(np.float64)
    log_p = -0.5 * ((y - means) / sds) ** 2 - np.log(sds) - 0.5 * math.log(2 * math.pi)
    top = log_p.max(axis=0)
    lppd = float(np.mean(top + np.log(np.mean(np.exp(log_p - top), axis=0))))
    rmse = float(np.sqrt(np.mean((means.mean(axis=0) - y) ** 2)))
    rng = np.random.default_rng(seed)
    samples = means + sds * rng.standard_normal(means.shape)
    lo90, hi90 = np.quantile(samples, 0.05, axis=0), np.quantile(samples, 0.95, axis=0)
    coverage = float(np.mean((y >= lo90) & (y <= hi90)))
    return lppd, rmse, coverage


def run_numpyro(a, run_dir, split_dir):
    os.environ.setdefault("XLA_FLAGS", f"--xla_force_host_platform_device_count={a.members}")
    import jax
    import jax.numpy as jnp
    import numpy as np
    import numpyro
    import numpyro.distributions as dist
    from numpyro.infer import MCMC, NUTS

    compile_seconds = [0.0]

    def on_duration(event, duration, **kwargs):
        if any(k in event for k in ("backend_compile", "jaxpr_trace", "jaxpr_to_mlir")):
            compile_seconds[0] += duration

    jax.monitoring.register_event_duration_secs_listener(on_duration)

    x_train, y_train = read_rows(os.path.join(split_dir, "train.csv"))
    x_test, y_test = read_rows(os.path.join(split_dir, "test.csv"))
    widths = [x_train.shape[1]] + [int(h) for h in a.hidden.split(",") if h] + [2]
    init = read_members(run_dir, widths)
    d = init.shape[1]
    forward = make_forward(widths, a.activation)

    def model(x, y):
        theta = numpyro.sample("theta", dist.Normal(0.0, 1.0).expand([d]).to_event(1))
        mean, log_sd = forward(theta, x)
        numpyro.sample("y", dist.Normal(mean, jnp.exp(log_sd)), obs=y)

    kernel = NUTS(model, target_accept_prob=a.target_accept, max_tree_depth=a.max_depth)
    mcmc = MCMC(kernel, num_warmup=a.warmup, num_samples=a.draws, num_chains=init.shape[0],
                chain_method="parallel", progress_bar=False)
    start = time.perf_counter()
    mcmc.run(jax.random.PRNGKey(a.seed), x_train, y_train, init_params={"theta": jnp.asarray(init)},
             extra_fields=("diverging", "accept_prob", "num_steps", "adapt_state.step_size"))
    jax.block_until_ready(mcmc.get_samples())
    wall = time.perf_counter() - start
    extra = mcmc.get_extra_fields(group_by_chain=True)
    thetas = np.asarray(mcmc.get_samples(group_by_chain=False)["theta"])

    lppd, rmse, coverage = test_metrics(forward, thetas, x_test, y_test, a.seed)
    divergent = np.asarray(extra["diverging"])
    chains = [{"divergent": int(divergent[c].sum()), "accept": float(np.mean(extra["accept_prob"][c])),
               "step_size": float(np.asarray(extra["adapt_state.step_size"][c])[-1]),
               "gradients_sampling": int(np.sum(extra["num_steps"][c]))} for c in range(divergent.shape[0])]
    return {
        "seconds_warmup_and_sampling": wall - compile_seconds[0], "seconds_wall_with_compile": wall,
        "seconds_compile": compile_seconds[0], "lppd": lppd, "rmse": rmse, "coverage_90": coverage,
        "divergent": int(divergent.sum()), "draws": int(divergent.size),
        "mean_accept": float(np.mean([c["accept"] for c in chains])), "chains": chains,
        "versions": {"numpyro": numpyro.__version__, "jax": jax.__version__},
    }


def main():
    a = parse_args()
    os.makedirs(a.out, exist_ok=True)
    run_dir, split_dir = os.path.join(a.out, "bnn"), os.path.join(a.out, "split")
    ours = run_ours(a, run_dir)
    subprocess.run([a.bnn, "data", "split", "--run", run_dir, "--out", split_dir], check=True, stdout=sys.stderr)
    doc = {"settings": vars(a), "ours": ours}
    if not a.skip_numpyro:
        theirs = run_numpyro(a, run_dir, split_dir)
        doc["numpyro"] = theirs
        doc["wall_ratio_ours_vs_numpyro"] = ours["seconds_warmup_and_sampling"] / theirs["seconds_warmup_and_sampling"]
        doc["lppd_difference_ours_minus_numpyro"] = ours["lppd"] - theirs["lppd"]
    text = json.dumps(doc, indent=1)
    with open(os.path.join(a.out, "e2e.json"), "w") as f:
        f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
