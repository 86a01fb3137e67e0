#!/usr/bin/env python3
"""Value+gradient cost of each hidden activation against ReLU, on one net, in one run.

Issue 70's speed goal: with the fused CPU kernel, SiLU, GELU, softplus and tanh each cost at
most 1.25x ReLU per gradient on the concrete and yacht nets (2x16, heteroscedastic head). For
each round, each problem runs `bnn bench --problem P --activation A` for every activation in a
rotated order (so no activation always runs first or last); every cell keeps each activation's
lowest median over the rounds, since the 2-vCPU VMs have slow phases of several seconds.

    python3 bench/activation_speed.py --bnn target/release/bnn --json bench/activation_speed_epyc.json

One thread (`RAYON_NUM_THREADS=1`), f32, the host's widest kernel path unless
`BNN_KERNEL_ISA=avx2` is set (the JSON's `kernel_isa` says which ran).
"""

import argparse
import json
import os
import subprocess
import sys

ACTIVATIONS = ["relu", "silu", "tanh", "gelu", "softplus"]


def cpu_name():
    flags = set()
    name = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and name == "unknown":
                name = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                flags |= set(line.split(":", 1)[1].split())
    isa = [f for f in ("avx512f", "avx2", "fma") if f in flags]
    return f"{name} ({', '.join(isa)})"


def bench(bnn, problem, activation, chains, evals, repeats):
    env = dict(os.environ, RAYON_NUM_THREADS="1")
    out = subprocess.run(
        [bnn, "bench", "--problem", problem, "--activation", activation,
         "--chains", chains, "--evals", str(evals), "--repeats", str(repeats)],
        capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bnn", default="target/release/bnn")
    p.add_argument("--problems", default="concrete,yacht")
    p.add_argument("--chains", default="1,12")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--evals", type=int, default=200)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--json")
    a = p.parse_args()
    best = {}
    rounds = []
    kernel_isa = None
    for r in range(a.rounds):
        order = ACTIVATIONS[r % len(ACTIVATIONS):] + ACTIVATIONS[:r % len(ACTIVATIONS)]
        for problem in a.problems.split(","):
            for activation in order:
                doc = bench(a.bnn, problem, activation, a.chains, a.evals, a.repeats)
                kernel_isa = doc.get("kernel_isa", kernel_isa)
                for row in doc["results"]:
                    key = (problem, activation, row["chains"])
                    us = row["us_per_chain_grad"]
                    rounds.append({"round": r, "problem": problem, "activation": activation,
                                   "chains": row["chains"], "us_per_chain_grad": us})
                    best[key] = min(best.get(key, float("inf")), us)
                print(f"round {r}: {problem} {activation} done", file=sys.stderr)
    cells = []
    for (problem, activation, chains), us in sorted(best.items()):
        relu = best[(problem, "relu", chains)]
        cells.append({"problem": problem, "activation": activation, "chains": chains,
                      "us_per_chain": us, "ratio_to_relu": us / relu})
    doc = {"cpu": cpu_name(), "kernel_isa": kernel_isa, "gradient": "host_kernel (fused)", "threads": 1, "rounds": a.rounds,
           "cells": cells, "rounds_us": rounds}
    text = json.dumps(doc, indent=1)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
