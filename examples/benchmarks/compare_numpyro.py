#!/usr/bin/env python3
"""Gradient cost of burn-bnn against NumPyro, measured back to back on this machine.

For each problem of issue 6 it runs `bnn bench` (our value+gradient per chain, fused and
plain paths) and the NumPyro peer script (`../shared/bench/peers/numpyro_bnn.py`, jitted,
in-graph timing: the cost inside NumPyro's compiled NUTS loop), then prints one JSON document
with both numbers and the ratio ours / NumPyro for every chain count (below 1: we are faster).

    python3 examples/benchmarks/compare_numpyro.py \
        --bnn target/release/bnn --python ~/.cache/bnn-peer-venv/bin/python \
        --peer ../shared/bench/peers/numpyro_bnn.py --json bench-vs-numpyro.json

Our timing includes the whole host round trip of one sampler call (positions in, values and
gradients out); NumPyro's in-graph timing does not include its per-call dispatch (that is
reported too, as `numpyro_dispatch_us`). Same float type (f32) on both sides.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

# (our problem name, NumPyro peer arguments). The peer's heteroscedastic head uses a softplus
# link, ours the exp link of the DEI-MCMC reference; both cost one transcendental per row.
PROBLEMS = {
    "cos2x-sigmoid": ["--dataset", "cos2x", "--n", "100", "--hidden", "50", "--fixed-sigma", "0.1",
                      "--activation", "sigmoid"],
    "cos2x-relu": ["--dataset", "cos2x", "--n", "100", "--hidden", "50", "--fixed-sigma", "0.1",
                   "--activation", "relu"],
    "concrete": ["--dataset", "csv", "--csv", "{data}/concrete/concrete.csv", "--hidden", "16,16",
                 "--activation", "tanh"],
    "protein": ["--dataset", "csv", "--csv", "{data}/protein/protein.csv", "--hidden", "16,16",
                "--activation", "relu"],
}


def ours(bnn, problem, chains, device, gradient, evals):
    out = subprocess.run(
        [bnn, "bench", "--problem", problem, "--chains", chains, "--device", device,
         "--gradient", gradient, "--evals", str(evals), "--repeats", "5"],
        check=True, capture_output=True, text=True)
    report = json.loads(out.stdout)
    return {r["chains"]: r["us_per_chain_grad"] for r in report["results"]}, report


def numpyro(python, peer, problem, chains, data_dir, evals):
    args = [a.replace("{data}", data_dir) for a in PROBLEMS[problem]]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "peer.json")
        subprocess.run(
            [python, peer, *args, "--split-seed", "0", "--data-seed", "0", "--mode", "throughput",
             "--evals", str(evals), "--repeats", "5", "--batch-chains", chains, "--grad-fn", "numpyro",
             "--max-attempts", "1", "--json-out", path],
            check=True, capture_output=True, text=True)
        with open(path) as f:
            report = json.load(f)
    cases = report["throughput"]["cases"]
    in_graph = {c["chains"]: c["in_graph_us_per_chain_eval"]["median"] for c in cases}
    dispatch = {c["chains"]: c["dispatch_us_per_chain_eval"]["median"] for c in cases}
    return in_graph, dispatch, report["versions"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bnn", default="target/release/bnn")
    p.add_argument("--python", default=os.path.expanduser("~/.cache/bnn-peer-venv/bin/python"))
    p.add_argument("--peer", default="../shared/bench/peers/numpyro_bnn.py")
    p.add_argument("--data-dir", default=os.environ.get("BNN_DATA_DIR", "../shared/datasets"))
    p.add_argument("--problems", default="cos2x-sigmoid,cos2x-relu,concrete")
    p.add_argument("--chains", default="1,8,64")
    p.add_argument("--device", default="flex")
    p.add_argument("--json", help="also write the JSON here")
    a = p.parse_args()
    rows = []
    versions = None
    for problem in a.problems.split(","):
        evals = 50 if problem == "protein" else 300
        fused, report = ours(a.bnn, problem, a.chains, a.device, "auto", evals)
        plain, _ = ours(a.bnn, problem, a.chains, a.device, "plain", max(evals // 5, 10))
        in_graph, dispatch, versions = numpyro(a.python, a.peer, problem, a.chains, a.data_dir, evals)
        for c in sorted(fused):
            rows.append({
                "problem": problem, "chains": c, "n_train": report["n_train"], "n_params": report["n_params"],
                "ours_fused_us": round(fused[c], 2), "ours_plain_us": round(plain[c], 2),
                "numpyro_in_graph_us": round(in_graph[c], 2), "numpyro_dispatch_us": round(dispatch[c], 2),
                "ratio_fused_vs_numpyro": round(fused[c] / in_graph[c], 3),
                "ratio_plain_vs_numpyro": round(plain[c] / in_graph[c], 3),
            })
            print(json.dumps(rows[-1]), file=sys.stderr)
    doc = {"device": a.device, "dtype": "f32", "unit": "microseconds per value+gradient per chain",
           "numpyro_versions": versions, "results": rows}
    text = json.dumps(doc, indent=1)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
