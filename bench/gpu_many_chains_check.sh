#!/usr/bin/env bash
# Issue "Thousands of chains on a GPU": every number it asks of a GPU in one call of at most
# 8 minutes on a lent GPU machine, which builds and fetches nothing. Writes one JSON,
# $OUT/many_chains.json (default OUT=gpu-out), with:
#   - kernel µs per chain-gradient at C = 1, 64, 256, 1024, 4096 on concrete and cos(2x), and one
#     CPU chain of the same host (`bnn bench --versus-cpu`); on concrete also with 2 × 2 gradient
#     tiles, the inputs read from global memory, 128 rows per block and no row splits (item 3's
#     levers, one at a time);
#   - end-to-end chain-gradients/s of LAPS and of batched NUTS at 1024 chains on concrete;
#   - LPPD and wall time of a 1024-chain LAPS run on yacht from the 12 members (100 draws each),
#     beside the 12-chain DEI-NUTS LPPD of the same members measured on the CPU.
#
# On the development machine, from the repository root (after `cargo test --release --workspace
# --no-run`, with BNN_DATA_DIR set):
#   bash bench/gpu_many_chains_check.sh prepare      # .gpu/: bnn.xz, data, members; .gl/: Vulkan loader
# On the GPU machine, with .gpu and .gl carried:
#   bash bench/gpu_many_chains_check.sh              # SMALL=1: a toy dry run on any Vulkan (lavapipe)
set -u
OUT=${OUT:-gpu-out}
SMALL=${SMALL:-0}
DEADLINE=${DEADLINE:-470}   # seconds in all (8 minutes less the start); each step gets what is left
TARGET=${CARGO_TARGET_DIR:-target}

if [ "${1:-}" = prepare ]; then
    set -e
    : "${BNN_DATA_DIR:?set BNN_DATA_DIR to the UCI datasets}"
    mkdir -p .gpu/data .gl
    grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo /.gpu/ >> .git/info/exclude
    grep -qx '/.gl/' .git/info/exclude 2>/dev/null || echo /.gl/ >> .git/info/exclude
    # The Vulkan loader and glvnd: NVIDIA's Vulkan driver lives in libGLX_nvidia, which needs
    # libGLdispatch (libglvnd0); without it the loader finds the ICD and no adapter.
    mkdir -p /tmp/amd64/partial
    apt_amd64='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
    (cd .gl && ls libglvnd0*.deb >/dev/null 2>&1 || { apt-get $apt_amd64 update >/dev/null &&
        apt-get $apt_amd64 download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2; }) ||
        echo "no Vulkan loader/glvnd packages (offline?): the GPU machine needs its own"
    strip -o /tmp/bnn-stripped "$TARGET/release/bnn" && xz -T0 -c /tmp/bnn-stripped > .gpu/bnn.xz
    cp -r "$BNN_DATA_DIR"/{concrete,yacht} .gpu/data/
    for set in concrete yacht; do
        rm -rf "/tmp/members-$set"
        "$TARGET/release/bnn" train --config bench/many_chains/$set.toml --out "/tmp/members-$set"
        rm -rf ".gpu/members-$set" && cp -r "/tmp/members-$set/ensemble" ".gpu/members-$set"
    done
    echo "prepared .gpu ($(du -sh .gpu | cut -f1)) and .gl"
    exit 0
fi

# Every intermediate file goes to $WORK; $OUT gets the JSON and one tarball of the logs (a lent
# machine sends back at most 8 files).
WORK=${WORK:-/tmp/many-chains-work}
rm -rf "$WORK"; mkdir -p "$OUT" "$WORK"
cap() { local left=$(( DEADLINE - SECONDS - 5 )); [ "$left" -lt "$1" ] && echo $(( left > 1 ? left : 1 )) || echo "$1"; }
if ls .gl/*.deb >/dev/null 2>&1 && command -v nvidia-smi >/dev/null; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
fi
for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
    if [ -f "$icd" ]; then export VK_DRIVER_FILES=$icd; break; fi
done
(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no nvidia-smi") > "$WORK/gpu.txt"
(grep -m1 'model name' /proc/cpuinfo; nproc; grep -o 'avx512f\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ') > "$WORK/cpu.txt"
BIN=/tmp/bnn-many-chains; mkdir -p $BIN
xz -d -c .gpu/bnn.xz > $BIN/bnn && chmod +x $BIN/bnn
export BNN_DATA_DIR=$PWD/.gpu/data

# Stop at once, with the loader's own words, when there is no adapter: every step needs one.
if ! $BIN/bnn bench --device wgpu --problem cos2x-sigmoid --chains 1 --evals 1 --repeats 1 > "$WORK/probe.log" 2>&1; then
    cat "$WORK/probe.log"; ldconfig -p | grep -E 'libvulkan|libGLdispatch|libGLX_nvidia'
    VK_LOADER_DEBUG=error,warn $BIN/bnn bench --device wgpu --problem cos2x-sigmoid --chains 1 --evals 1 --repeats 1 2>&1 | head -30
    tar -czf "$OUT/logs.tar.gz" -C "$WORK" .; exit 1
fi

if [ "$SMALL" = 1 ]; then CH=1,16; EV="--evals 2 --repeats 2"; RUNCH=16; W=60; D=10; NW=5; ND=5; DEPTH=3; SPD=2
else CH=1,64,256,1024,4096; EV="--evals 30 --repeats 3"; RUNCH=1024; W=1000; D=100; NW=30; ND=30; DEPTH=6; SPD=15; fi

for problem in concrete cos2x-sigmoid; do
    echo "== kernel: $problem, chains $CH"
    timeout "$(cap 120)" $BIN/bnn bench --device wgpu --problem $problem --chains $CH --versus-cpu $EV \
        --json "$WORK/bench_$problem.json" > "$WORK/bench_$problem.log" 2>&1
    echo "rc=$?"
done

# The gradient phase's 2 × 2 register tiles, and the inputs read from global memory (fewer
# shared columns per row): the same sums as the default; which is faster only a GPU says. Right
# after the default so all see the same card state.
for variant in BNN_DEVICE_GRADIENT_TILE=2x2 BNN_DEVICE_INPUT_COLUMNS=global; do
    echo "== kernel: concrete, $variant"
    env "$variant" timeout "$(cap 60)" $BIN/bnn bench --device wgpu --problem concrete \
        --chains $CH $EV --json "$WORK/bench_$variant.json" > "$WORK/bench_$variant.log" 2>&1
    echo "rc=$?"
done

# A run from the members trained on the CPU: chain c starts at member c mod 12.
run() {  # run NAME SET LIMIT FLAGS...
    local name=$1 set=$2 limit=$3; shift 3
    rm -rf "/tmp/run-$name"; mkdir -p "/tmp/run-$name"; cp -r ".gpu/members-$set" "/tmp/run-$name/ensemble"
    echo "== $name"
    local start=$SECONDS
    timeout "$(cap "$limit")" $BIN/bnn run --config "bench/many_chains/$set.toml" --device wgpu --batched true \
        --chains $RUNCH --checkpoint-every 0 --out "/tmp/run-$name" "$@" > "$WORK/run_$name.log" 2>&1
    echo "rc=$? wall $(( SECONDS - start )) s" | tee "$WORK/run_$name.rc"
    cp "/tmp/run-$name/summary.json" "$WORK/summary_$name.json" 2>/dev/null
    cp "/tmp/run-$name/sampling.json" "$WORK/sampling_$name.json" 2>/dev/null
}
run laps_concrete concrete 120 --sampler laps --warmup $W --draws $D --steps-per-draw $SPD
run nuts_concrete concrete 150 --sampler nuts --warmup-policy fixed --warmup $NW --draws $ND --max-depth $DEPTH
run laps_yacht yacht 120 --sampler laps --warmup $W --draws $D --steps-per-draw $SPD

# Item 3's levers one at a time, at the sizes where they matter: 128 rows per block (64 is the
# default), and one cube per chain (no row splits; the default splits a small batch's rows).
if [ "$SMALL" != 1 ]; then
    for variant in BNN_DEVICE_BLOCK_ROWS=128 BNN_DEVICE_ROW_SPLITS=1; do
        echo "== kernel: concrete, $variant"
        env "$variant" timeout "$(cap 60)" $BIN/bnn bench --device wgpu --problem concrete \
            --chains 1,64,256,1024 $EV --json "$WORK/bench_$variant.json" > "$WORK/bench_$variant.log" 2>&1
        echo "rc=$?"
    done
fi

python3 - "$WORK" "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except Exception:
        return None
result = {"gpu": open(os.path.join(out, "gpu.txt")).read().strip(),
          "cpu": open(os.path.join(out, "cpu.txt")).read().strip(), "kernel": {}, "runs": {}}
for problem in ["concrete", "cos2x-sigmoid"]:
    bench = load(f"bench_{problem}.json")
    result["kernel"][problem] = bench
for variant in ["BNN_DEVICE_GRADIENT_TILE=2x2", "BNN_DEVICE_INPUT_COLUMNS=global",
                "BNN_DEVICE_BLOCK_ROWS=128", "BNN_DEVICE_ROW_SPLITS=1"]:
    result["kernel"][f"concrete {variant}"] = load(f"bench_{variant}.json")
for name in ["laps_concrete", "nuts_concrete", "laps_yacht"]:
    summary, sampling = load(f"summary_{name}.json"), load(f"sampling_{name}.json")
    if not summary or not sampling:
        result["runs"][name] = {"finished": False}
        continue
    grads = summary["warmup_gradients"] + summary["sampling_gradients"]
    seconds = sampling["seconds_warmup"] + sampling["seconds_sampling"]
    result["runs"][name] = {
        "chains": summary["chains"], "sampler": summary["sampler"], "draws": summary["draws"],
        "chain_gradients": grads, "seconds_warmup_and_sampling": seconds,
        "chain_gradients_per_second": grads / seconds if seconds > 0 else None,
        "lppd": summary["lppd"], "rmse": summary["rmse"], "coverage_90": summary["coverage_90"],
        "rhat_test_loglik": summary["rhat_test_loglik"], "divergences": summary["divergences"],
        "wall_seconds_whole_command": int(open(os.path.join(out, f"run_{name}.rc")).read().split()[2]),
    }
json.dump(result, open(os.path.join(sys.argv[2], "many_chains.json"), "w"), indent=1)
print(json.dumps(result["runs"], indent=1))
PY
tar -czf "$OUT/logs.tar.gz" -C "$WORK" .
echo done
