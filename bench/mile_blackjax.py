#!/usr/bin/env python3
"""MILE (MCLMC from deep-ensemble members) against BlackJAX's MCLMC from the same members and split.

1. `bnn train` trains the members (or `--train DIR` names a finished `bnn train` run);
2. `bnn sample --sampler mclmc` tunes and samples one chain per member with MILE's budget,
   then `bnn predict` / `bnn evaluate` (reused with `--reuse` when `<out>/ours` is finished);
3. `bnn data split` writes that run's standardized train/test rows;
4. BlackJAX's `mclmc_find_L_and_step_size` (tuning fractions 0.8/0.1/0.1 of `--warmup`, energy
   variance target `--energy-variance`, diagonal preconditioning as its default) then
   `--draws` MCLMC steps kept every `--thin`-th, chain j from member j's safetensors, one XLA
   host device per chain (`pmap`), on the same cores. The pmapped function is lowered and
   compiled before the clock starts, so compile time is reported apart and not counted;
5. one JSON (stdout and `<out>/mile_blackjax.json`): both sides' tuning + sampling wall time,
   gradients, the tuned step size and L per chain, and test LPPD, RMSE and 90% coverage computed
   the same way for both (pooled draws; the helpers of `e2e_numpyro.py`).

    python3 bench/mile_blackjax.py --dataset yacht --members 4 --out runs/mile-blackjax-yacht
    python3 bench/mile_blackjax.py --dataset bikesharing --train runs/large/bikesharing/train \\
        --out runs/mile-blackjax-bikesharing

Needs `pip install blackjax==1.7.1` (it brings JAX). Ours uses its defaults for MILE (energy
target 5e-4 falling to 1e-4, ε starting at 0.005 and L at 1); BlackJAX 1.7's target is fixed,
so `--energy-variance` (5e-4, MILE's starting value) is what it aims at throughout. BlackJAX's
tuner starts from ours (`--start ours`, the default) since from its own start (ε = √D/4) it
freezes most chains of bikesharing and protein at ε = 0 (`--start blackjax` shows it).
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_numpyro import make_forward, read_members, read_rows, test_metrics  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bnn", default=os.environ.get("BNN_BIN", "target/release/bnn"))
    p.add_argument("--dataset", default="yacht")
    p.add_argument("--split-seed", type=int, default=0)
    p.add_argument("--hidden", default="16,16")
    p.add_argument("--activation", default="relu", choices=["relu", "tanh"])
    p.add_argument("--members", type=int, default=12)
    p.add_argument("--learning-rate", type=float, default=1e-2)
    p.add_argument("--train", help="a finished `bnn train` run to take the members from (else trained into <out>/train)")
    p.add_argument("--warmup", type=int, default=50000, help="tuning steps (MILE: 50,000)")
    p.add_argument("--draws", type=int, default=10000, help="sampling steps (MILE: 10,000)")
    p.add_argument("--thin", type=int, default=10)
    p.add_argument("--energy-variance", type=float, default=5e-4, help="BlackJAX's energy variance target per dimension")
    p.add_argument("--start", default="ours", choices=["ours", "blackjax"],
                   help="where BlackJAX's tuner starts: ours (ε = 0.005, L = 1, bnn's defaults) or its own "
                        "(ε = √D/4, L = √D), from which most chains of the large sets freeze at ε = 0")
    p.add_argument("--chain-groups", type=int, default=1,
                   help="run BlackJAX's chains in this many groups one after another (each group pmapped "
                        "over its own host devices; the wall times add up): XLA's host memory grows with "
                        "the steps and rows, about 9 KB per step and chain on bikesharing; protein in two groups "
                        "peaked at 24.3 GB, so a 24 GB machine wants 3 groups or swap")
    p.add_argument("--threads", type=int, default=2, help="our worker threads (XLA uses every core)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    p.add_argument("--reuse", action="store_true", help="keep <out>/ours if it already holds a finished run")
    p.add_argument("--skip-blackjax", action="store_true")
    a = p.parse_args()
    if a.draws % a.thin:
        p.error(f"--draws {a.draws} is not a multiple of --thin {a.thin}")
    if a.chain_groups < 1:
        p.error("--chain-groups must be at least 1")
    return a


def run(cmd):
    print("running:", " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True, stdout=sys.stderr)


def train_members(a):
    if a.train:
        return a.train
    train_dir = os.path.join(a.out, "train")
    os.makedirs(a.out, exist_ok=True)
    if not (a.reuse and os.path.isdir(os.path.join(train_dir, "ensemble"))):
        run([a.bnn, "train", "--dataset", a.dataset, "--split-seed", str(a.split_seed), "--standardize", "full",
             "--hidden", a.hidden, "--activation", a.activation, "--likelihood", "hetero", "--prior", "normal:1",
             "--members", str(a.members), "--learning-rate", str(a.learning_rate), "--seed", str(a.seed),
             "--threads", str(a.threads), "--out", train_dir])
    return train_dir


def run_ours(a, train_dir, run_dir):
    done = os.path.isfile(os.path.join(run_dir, "summary.json"))
    if not (a.reuse and done):
        run([a.bnn, "sample", "--from", train_dir, "--sampler", "mclmc", "--warmup", str(a.warmup),
             "--draws", str(a.draws), "--thin", str(a.thin), "--seed", str(a.seed), "--threads", str(a.threads),
             "--out", run_dir])
        run([a.bnn, "predict", run_dir])
        run([a.bnn, "evaluate", run_dir])
    with open(os.path.join(run_dir, "sampling.json")) as f:
        sampling = json.load(f)
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    return {
        "seconds_tuning_and_sampling": sampling["seconds_warmup"] + sampling["seconds_sampling"],
        "seconds_tuning": sampling["seconds_warmup"], "seconds_sampling": sampling["seconds_sampling"],
        "gradients": summary["warmup_gradients"] + summary["sampling_gradients"],
        "lppd": summary["lppd"], "rmse": summary.get("rmse"), "coverage_90": summary.get("coverage_90"),
        "rhat_test_loglik": summary.get("rhat_test_loglik"), "chains": summary["chains"],
    }


def run_blackjax(a, train_dir, split_dir):
    x_train, y_train = read_rows(os.path.join(split_dir, "train.csv"))
    widths = [x_train.shape[1]] + [int(h) for h in a.hidden.split(",") if h] + [2]
    init = read_members(train_dir, widths)
    chains = init.shape[0]
    group = chains // a.chain_groups  # divides: checked in main before anything ran
    os.environ.setdefault("XLA_FLAGS", f"--xla_force_host_platform_device_count={group}")
    import blackjax
    import jax
    import jax.numpy as jnp
    import numpy as np

    if jax.local_device_count() < group:
        raise SystemExit(f"JAX sees {jax.local_device_count()} host devices, {group} chains at once need one each "
                         "(was JAX imported before XLA_FLAGS was set?)")
    x_test, y_test = read_rows(os.path.join(split_dir, "test.csv"))
    forward = make_forward(widths, a.activation)
    x, y = jnp.asarray(x_train), jnp.asarray(y_train)

    def logdensity(theta):
        mean, log_sd = forward(theta, x)
        loglik = jnp.sum(-0.5 * jnp.square((y - mean) / jnp.exp(log_sd)) - log_sd - 0.5 * jnp.log(2 * jnp.pi))
        logprior = jnp.sum(-0.5 * jnp.square(theta) - 0.5 * jnp.log(2 * jnp.pi))
        return loglik + logprior

    kept = a.draws // a.thin

    def one_chain(key, theta0):
        init_key, tune_key, sample_key = jax.random.split(key, 3)
        state = blackjax.mcmc.mclmc.init(theta0, logdensity, init_key)
        kernel = blackjax.mcmc.mclmc.build_kernel(desired_energy_var=a.energy_variance)
        initial = None
        if a.start == "ours":
            initial = blackjax.adaptation.mclmc_adaptation.MCLMCAdaptationState(
                L=jnp.asarray(1.0), step_size=jnp.asarray(0.005), inverse_mass_matrix=jnp.ones_like(theta0))
        state, params, tuning_steps = blackjax.mclmc_find_L_and_step_size(
            mclmc_kernel=kernel, num_steps=a.warmup, state=state, rng_key=tune_key, logdensity_fn=logdensity,
            frac_tune1=0.8, frac_tune2=0.1, frac_tune3=0.1, desired_energy_var=a.energy_variance, params=initial)
        sampler = blackjax.mclmc(logdensity, L=params.L, step_size=params.step_size,
                                 inverse_mass_matrix=params.inverse_mass_matrix)

        def kept_draw(carry, keys):
            def one_step(carry, k):
                state, _ = carry
                state, info = sampler.step(k, state)
                return (state, info.energy_change), None

            carry, _ = jax.lax.scan(one_step, carry, keys)
            return carry, (carry[0].position, carry[1])

        keys = jax.random.split(sample_key, kept * a.thin).reshape(kept, a.thin, -1)
        (_, _), (positions, energy_change) = jax.lax.scan(kept_draw, (state, jnp.zeros(())), keys)
        return positions, params.step_size, params.L, energy_change

    keys = jax.random.split(jax.random.PRNGKey(a.seed), chains)
    init_j = jnp.asarray(init)
    start = time.perf_counter()
    compiled = jax.pmap(one_chain).lower(keys[:group], init_j[:group]).compile()
    compile_seconds = time.perf_counter() - start
    wall, results = 0.0, []
    for g in range(a.chain_groups):
        part = slice(g * group, (g + 1) * group)
        start = time.perf_counter()
        results.append(jax.block_until_ready(compiled(keys[part], init_j[part])))
        wall += time.perf_counter() - start
    positions, step_size, trajectory_length, energy_change = (
        np.concatenate([np.asarray(r[i]) for r in results]) for i in range(4))
    thetas = positions.reshape(-1, init.shape[1])
    lppd, rmse, coverage = test_metrics(forward, thetas, x_test, y_test, a.seed)
    # BlackJAX's tuning takes 0.8 + 0.1 (+ a third of 0.1 to re-tune ε after the preconditioner)
    # + 0.1 of --warmup steps; each McLachlan step is two gradients.
    phase2 = round(0.1 * a.warmup)
    tuning_steps = round(0.8 * a.warmup) + phase2 + phase2 // 3 + round(0.1 * a.warmup)
    return {
        "seconds_tuning_and_sampling": wall, "seconds_compile": compile_seconds,
        "gradients": chains * 2 * (tuning_steps + a.draws),
        "lppd": lppd, "rmse": rmse, "coverage_90": coverage, "chains": chains,
        "step_size": [float(s) for s in np.asarray(step_size)],
        "trajectory_length": [float(s) for s in np.asarray(trajectory_length)],
        "energy_change_variance_per_dim": [float(v) for v in np.var(np.asarray(energy_change), axis=1) / init.shape[1]],
        "versions": {"blackjax": blackjax.__version__, "jax": jax.__version__},
        "xla_host_devices": jax.local_device_count(), "chain_groups": a.chain_groups,
    }


def main():
    # glibc gives each of XLA's threads its own malloc arena, and with one host device per chain
    # the freed per-step buffers pile up: 12 bikesharing chains outgrew 24 GB before the end of
    # tuning. Two arenas keep it to a few GB; glibc reads this only at start, hence the re-exec.
    if os.environ.get("MALLOC_ARENA_MAX") is None:
        os.execve(sys.executable, [sys.executable] + sys.argv, {**os.environ, "MALLOC_ARENA_MAX": "2"})
    a = parse_args()
    train_dir = train_members(a)
    members = [f for f in os.listdir(os.path.join(train_dir, "ensemble")) if f.endswith(".safetensors")]
    if not a.skip_blackjax and len(members) % a.chain_groups:
        raise SystemExit(f"--chain-groups {a.chain_groups} does not divide the {len(members)} members of {train_dir}")
    os.makedirs(a.out, exist_ok=True)
    run_dir, split_dir = os.path.join(a.out, "ours"), os.path.join(a.out, "split")
    ours = run_ours(a, train_dir, run_dir)
    run([a.bnn, "data", "split", "--run", run_dir, "--out", split_dir])
    doc = {"settings": vars(a), "cpu": cpu_name(), "ours": ours}
    if not a.skip_blackjax:
        theirs = run_blackjax(a, train_dir, split_dir)
        doc["blackjax"] = theirs
        doc["wall_ratio_ours_vs_blackjax"] = ours["seconds_tuning_and_sampling"] / theirs["seconds_tuning_and_sampling"]
        doc["lppd_difference_ours_minus_blackjax"] = ours["lppd"] - theirs["lppd"]
    text = json.dumps(doc, indent=1)
    with open(os.path.join(a.out, "mile_blackjax.json"), "w") as f:
        f.write(text + "\n")
    print(text)


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
    except OSError:
        return None
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), None)
    isa = "AVX-512" if " avx512f" in info else ("AVX2" if " avx2" in info else "neither AVX2 nor AVX-512")
    return f"{model}, {os.cpu_count()} logical cores, {isa}"


if __name__ == "__main__":
    main()
