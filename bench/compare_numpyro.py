#!/usr/bin/env python3
"""Gradient cost of burn-bnn against NumPyro, measured back to back on this machine.

For each problem of issue 6 it runs `bnn bench` (our value+gradient per chain, fused and
plain paths) and the NumPyro peer script (`../shared/bench/peers/numpyro_bnn.py`, jitted,
in-graph timing: the cost inside NumPyro's compiled NUTS loop), then prints one JSON document
with both numbers and the ratio ours / NumPyro for every chain count (below 1: we are faster).

    python3 bench/compare_numpyro.py \
        --bnn target/release/bnn --python ~/.cache/bnn-peer-venv/bin/python \
        --peer ../shared/bench/peers/numpyro_bnn.py --json bench-vs-numpyro.json

Our timing includes the whole host round trip of one sampler call (positions in, values and
gradients out; for the built-in MLP on the CPU the sampler's buffers go straight to the host
kernel); NumPyro's in-graph timing does not include its per-call dispatch (that is reported
too, as `numpyro_dispatch_us`). Same float type (f32) on both sides. Both sides report the
median and the fastest of `--repeats` timings: on a shared machine the fastest repeat is what
each costs when nothing else runs, so `ratio_fused_vs_numpyro_min` is the steadier ratio.
With `--rounds R` (default 3) each problem is measured R times, ours then NumPyro's, and
every cell reports each side's lowest median over the rounds (all rounds are in `rounds_us`):
on the 2-vCPU development VMs, phases of several seconds run 1.5-1.8x slow for whatever
process is running (seen on both sides), and one round can land a cell in such a phase.
`BNN_KERNEL_ISA=avx2` forces our AVX2 + FMA path on an AVX-512 machine (the JSON's
`kernel_isa` says which path ran; `cpu` names the processor and its instruction sets).
"""

import argparse
import json
import time
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


def ours(bnn, problem, chains, device, gradient, evals, repeats):
    out = subprocess.run(
        [bnn, "bench", "--problem", problem, "--chains", chains, "--device", device,
         "--gradient", gradient, "--evals", str(evals), "--repeats", str(repeats)],
        check=True, capture_output=True, text=True)
    report = json.loads(out.stdout)
    median = {r["chains"]: r["us_per_chain_grad"] for r in report["results"]}
    fastest = {r["chains"]: r["min_us_per_chain_grad"] for r in report["results"]}
    return median, fastest, report


def cpu_description():
    """The CPU's model name and whether it has AVX-512 and AVX2 (a speed claim names both)."""
    model, flags = "unknown", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown":
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return {"model": model, "avx512f": "avx512f" in flags, "avx2": "avx2" in flags, "fma": "fma" in flags,
            "threads": os.environ.get("RAYON_NUM_THREADS")}


def numpyro(python, peer, problem, chains, data_dir, evals, repeats):
    args = [a.replace("{data}", data_dir) for a in PROBLEMS[problem]]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "peer.json")
        subprocess.run(
            [python, peer, *args, "--split-seed", "0", "--data-seed", "0", "--mode", "throughput",
             "--evals", str(evals), "--repeats", str(repeats), "--batch-chains", chains, "--grad-fn", "numpyro",
             "--max-attempts", "1", "--json-out", path],
            check=True, capture_output=True, text=True)
        with open(path) as f:
            report = json.load(f)
    cases = report["throughput"]["cases"]
    in_graph = {c["chains"]: c["in_graph_us_per_chain_eval"]["median"] for c in cases}
    in_graph_min = {c["chains"]: c["in_graph_us_per_chain_eval"]["min"] for c in cases}
    dispatch = {c["chains"]: c["dispatch_us_per_chain_eval"]["median"] for c in cases}
    return in_graph, in_graph_min, dispatch, report["versions"]


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
    p.add_argument("--repeats", type=int, default=9,
                   help="timed repeats per case on both sides (median and fastest reported)")
    p.add_argument("--skip-plain", action="store_true", help="do not time Burn's plain tensor graph")
    p.add_argument("--rounds", type=int, default=3,
                   help="measure each problem this many times on both sides, alternating; each side's lowest "
                        "median over the rounds is reported (slow phases of the machine hit single rounds)")
    p.add_argument("--settle", type=float, default=3.0,
                   help="seconds to wait before each side's measurement: on a 2-vCPU VM the first cell timed "
                        "right after the other side's process exited came out up to 1.5x slow (both sides wait)")
    a = p.parse_args()
    rows = []
    versions = None
    kernel_isa = None
    for problem in a.problems.split(","):
        evals = 50 if problem == "protein" else 300
        rounds = []
        for _ in range(max(a.rounds, 1)):
            time.sleep(a.settle)
            fused, fused_min, report = ours(a.bnn, problem, a.chains, a.device, "auto", evals, a.repeats)
            kernel_isa = report.get("kernel_isa")
            time.sleep(a.settle)
            in_graph, in_graph_min, dispatch, versions = numpyro(a.python, a.peer, problem, a.chains, a.data_dir,
                                                                 evals, a.repeats)
            rounds.append((fused, fused_min, in_graph, in_graph_min, dispatch))
        plain = None if a.skip_plain else ours(a.bnn, problem, a.chains, a.device, "plain", max(evals // 5, 10), 5)[0]
        for c in sorted(rounds[0][0]):
            fused = min(r[0][c] for r in rounds)
            fused_min = min(r[1][c] for r in rounds)
            in_graph = min(r[2][c] for r in rounds)
            in_graph_min = min(r[3][c] for r in rounds)
            dispatch = min(r[4][c] for r in rounds)
            rows.append({
                "problem": problem, "chains": c, "n_train": report["n_train"], "n_params": report["n_params"],
                "ours_fused_us": round(fused, 2), "ours_fused_min_us": round(fused_min, 2),
                "numpyro_in_graph_us": round(in_graph, 2), "numpyro_in_graph_min_us": round(in_graph_min, 2),
                "numpyro_dispatch_us": round(dispatch, 2),
                "ratio_fused_vs_numpyro": round(fused / in_graph, 3),
                # Fastest repeat against fastest repeat: what each costs when nothing else runs.
                "ratio_fused_vs_numpyro_min": round(fused_min / in_graph_min, 3),
                # Every round's medians, ours and NumPyro's, in the order they ran.
                "rounds_us": [{"ours": round(r[0][c], 2), "numpyro": round(r[2][c], 2)} for r in rounds],
            })
            if plain is not None:
                rows[-1]["ours_plain_us"] = round(plain[c], 2)
                rows[-1]["ratio_plain_vs_numpyro"] = round(plain[c] / in_graph, 3)
            print(json.dumps(rows[-1]), file=sys.stderr)
    doc = {"device": a.device, "dtype": "f32", "unit": "microseconds per value+gradient per chain",
           "cpu": cpu_description(), "kernel_isa": kernel_isa, "repeats": a.repeats, "rounds": max(a.rounds, 1),
           "numpyro_versions": versions, "results": rows}
    text = json.dumps(doc, indent=1)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
