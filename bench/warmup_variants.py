"""Divergences, acceptance, gradients and test LPPD of warmup variants against the default.

python3 bench/warmup_variants.py NAME [NAME ...]

Each NAME is a folder under runs/warmup-variants/ written by warmup_variants.sh; its runs are
compared with the MILE comparison's DEI-NUTS runs of the same split and chain seed (the default
warmup, same members). Prints one markdown row for the default and one for the variant.
"""
import csv, glob, json, os, statistics, sys


def summarize(run):
    chains = sorted(glob.glob(f"{run}/draws_chain_*.csv"))
    if not chains:
        sys.exit(f"error: no draws in {run}")
    divergent, accept, gradients, draws = [], [], 0, 0
    for path in chains:
        rows = list(csv.DictReader(open(path)))
        draws += len(rows)
        divergent.append(sum(int(r["divergent__"]) for r in rows))
        accept.append(statistics.mean(float(r["accept_stat__"]) for r in rows))
        gradients += sum(int(r["n_leapfrog__"]) for r in rows)
    summary = json.load(open(f"{run}/summary.json"))
    return dict(divergent=sum(divergent), draws=draws, worst=max(divergent),
                over_half=sum(d > draws / len(chains) / 2 for d in divergent),
                accept=statistics.mean(accept), gradients=gradients / 1e6, lppd=summary["lppd"])


def default_run(name):
    dataset_split, seed = name.rsplit("-seed", 1)
    dataset, split = dataset_split.rsplit("-split", 1)
    base = f"runs/mile/{dataset}-split{split}"
    return f"{base}/dei-nuts" if seed == "0" else f"{base}/seed{seed}/dei-nuts"


def row(label, runs):
    rs = [summarize(r) for r in runs]
    mean = lambda k: statistics.mean(r[k] for r in rs)
    return (f"| {label} | {len(rs)} | {mean('divergent'):.0f} ({100 * mean('divergent') / mean('draws'):.0f}%) | "
            f"{mean('over_half'):.1f} | {max(r['worst'] for r in rs)} | {mean('accept'):.2f} | "
            f"{mean('gradients'):.2f} | {mean('lppd'):.3f} |")


if len(sys.argv) < 2:
    sys.exit(__doc__)
print("| warmup | runs | divergent draws per run | chains above 50% per run | worst chain | acceptance | gradients (M) per run | test LPPD |")
print("|---|---|---|---|---|---|---|---|")
for variant in sys.argv[1:]:
    runs = sorted(d for d in glob.glob(f"runs/warmup-variants/{variant}/*") if os.path.exists(f"{d}/summary.json"))
    if not runs:
        sys.exit(f"error: no finished runs under runs/warmup-variants/{variant}")
    print(row("default, same members and seeds", [default_run(os.path.basename(r)) for r in runs]))
    print(row(variant, runs))
