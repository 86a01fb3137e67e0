#!/usr/bin/env bash
# Issue 16 item 6 (and item 1's AVX-512 cells) in one call on a lent GPU machine.
#
# Prepared on the development machine (nothing can be fetched on the GPU machine), from the
# repository root, after `cargo build --release --workspace --tests`:
#   mkdir -p .gpu/data .gl && echo /.gpu/ >> .git/info/exclude && echo /.gl/ >> .git/info/exclude
#   (cd .gl && apt-get download libvulkan1)            # the Vulkan loader
#   strip + xz the `bnn` binary and the bnn-model test binaries into .gpu/<name>.xz
#   cp -r $BNN_DATA_DIR/{concrete,yacht} .gpu/data/;  cp ../shared/bench/peers/numpyro_bnn.py .gpu/
# and run with `.gl` and `.gpu` carried:
#   (and the 12 concrete members trained on the CPU by `bnn run --dataset concrete --split-seed 0
#   --preset sommer2024`, the paper's ReLU members
#   copied to .gpu/ensemble-concrete: 5000 full-batch Adam steps are launch-bound on a GPU)
#   bash bench/gpu_device_check.sh   (PART=gpu: bench, batched run, wgpu tests;
#   PART=cpu: fused vs NumPyro on this CPU; default both, within DEADLINE seconds)
#   SMALL=1: a dry run at toy size on any Vulkan (Mesa's lavapipe).
#   BLOCK_ROWS="32 128": the device kernel's rows per block to bench besides the default, then the
#   tensor program at the same C; W, D, DEPTH, RUNCH, RUN_CAP: the batched run's size and limit.
# Results land in $OUT (default: gpu-out/): the bench JSON, the run's summary, the test logs and
# the NumPyro comparison on this machine's CPU (AVX-512 if it has it, then forced AVX2).
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
SMALL=${SMALL:-0}
PART=${PART:-all}
DEADLINE=${DEADLINE:-570}      # seconds this script may take in all; each step gets what is left
cap() { local left=$(( DEADLINE - SECONDS - 5 )); [ "$left" -lt "$1" ] && echo $(( left > 1 ? left : 1 )) || echo "$1"; }
# The Vulkan loader and glvnd (NVIDIA's Vulkan driver lives in libGLX_nvidia, which needs
# libGLdispatch); unpacked only on the GPU machine.
if ls .gl/*.deb >/dev/null 2>&1 && command -v nvidia-smi >/dev/null; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
fi
for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
    if [ -f "$icd" ]; then export VK_DRIVER_FILES=$icd; break; fi
done
echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-unset}"; ldconfig -p | grep -E 'libvulkan|libGLdispatch|libGLX_nvidia' | head
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$OUT/gpu.txt"
(grep -m1 'model name' /proc/cpuinfo; nproc; grep -o 'avx512f\|avx2' /proc/cpuinfo | sort | uniq -c) | tee -a "$OUT/gpu.txt"

BIN=/tmp/bnn-gpu-bin
mkdir -p $BIN
for f in .gpu/*.xz; do [ "$PART" = cpu ] && [ "$(basename "$f")" != bnn.xz ] && continue; xz -d -c "$f" > $BIN/$(basename "$f" .xz); chmod +x $BIN/$(basename "$f" .xz); done
export BNN_DATA_DIR=$PWD/.gpu/data

if [ "$SMALL" = 1 ]; then CH=1,16; EV="--evals 3 --repeats 2"; RUNCH=8; W=5; D=5; DEPTH=3; EP=50
else CH=1,64,1024,4096; EV=""; RUNCH=${RUNCH:-1024}; W=${W:-100}; D=${D:-100}; DEPTH=${DEPTH:-8}; EP=5000; fi

if [ "$PART" != cpu ] && [ "${SKIP_BENCH:-0}" != 1 ]; then
echo "== wgpu bench (concrete)"
VK_LOADER_DEBUG=error timeout $(cap 120) $BIN/bnn bench --device wgpu --problem concrete --chains $CH --versus-cpu $EV --json "$OUT/bench_wgpu_concrete.json" 2>&1 > /dev/null | grep -v XDG_RUNTIME | head -20
echo "rc=$?"; cat "$OUT/bench_wgpu_concrete.json" 2>/dev/null | grep -E '"(chains|us_per_chain_grad|chain_grads_per_second|speedup[a-z_]*|cpu_[a-z_]*|gradient[a-z_]*)"' | head -40
# The device kernel's rows per block (threads per cube), and the tensor program as the baseline.
if [ "$SMALL" != 1 ]; then BCH=1024,4096; BEV="--evals 30 --repeats 3"; else BCH=16; BEV="$EV"; fi
for rows in ${BLOCK_ROWS:-32 128}; do
    echo "== device kernel, $rows rows per block"
    BNN_DEVICE_BLOCK_ROWS=$rows timeout $(cap 60) $BIN/bnn bench --device wgpu --problem concrete --chains $BCH $BEV --json "$OUT/bench_rows$rows.json" > /dev/null 2>&1
    echo "rc=$?"; grep -E '"(chains|us_per_chain_grad)"' "$OUT/bench_rows$rows.json" 2>/dev/null | paste - - | head
done
echo "== tensor program (the previous wgpu path)"
timeout $(cap 60) $BIN/bnn bench --device wgpu --problem concrete --gradient tensor-ops --chains ${BCH%%,*} $BEV --json "$OUT/bench_tensor_ops.json" > /dev/null 2>&1
echo "rc=$?"; grep -E '"(chains|us_per_chain_grad)"' "$OUT/bench_tensor_ops.json" 2>/dev/null | paste - - | head
fi
if [ "$PART" != cpu ]; then

echo "== batched run, $RUNCH chains on wgpu (members trained on the CPU)"
rm -rf /tmp/run-gpu; mkdir -p /tmp/run-gpu/ensemble; cp .gpu/ensemble-concrete/* /tmp/run-gpu/ensemble/
start=$SECONDS
timeout $(cap ${RUN_CAP:-240}) $BIN/bnn run --device wgpu --batched true --chains $RUNCH \
    --dataset concrete --split-seed 0 --activation relu --target-accept 0.8 \
    --members 12 --epochs $EP --warmup $W --draws $D --max-depth $DEPTH \
    --checkpoint-every 0 --out /tmp/run-gpu > "$OUT/run.log" 2>&1
echo "rc=$? wall $(( SECONDS - start )) s"; grep -v '^ \|^layer' "$OUT/run.log" | tail -25
(cd /tmp/run-gpu 2>/dev/null && cat sampling.json summary.json; tar czf "$OLDPWD/$OUT/run_summary.tgz" --exclude='draws*' --exclude='*.safetensors' --exclude=checkpoints . 2>/dev/null)

echo "== wgpu tests (bnn-model test binaries; ndarray and flex run too)"
for t in fused_gradient gradient_check posterior_values conjugate_posterior; do
    [ -x $BIN/$t ] || continue
    filter=""; [ "$SMALL" = 1 ] && { [ $t = fused_gradient ] && filter=device_kernel_agrees || continue; }
    timeout $(cap 40) $BIN/$t --test-threads 8 $filter > "$OUT/test_$t.log" 2>&1
    echo "$t rc=$? $(grep -E '^test result' "$OUT/test_$t.log") skipped: $(grep -c 'skipping' "$OUT/test_$t.log")"
done
fi

if [ "$PART" != gpu ] && [ "$SMALL" != 1 ] && python3 -c 'import numpyro' 2>/dev/null; then
    echo "== CPU: fused vs NumPyro on 2 cores (auto ISA, then forced AVX2)"
    export JAX_PLATFORMS=cpu RAYON_NUM_THREADS=1
    for isa in auto avx2; do
        [ $(cap 100) -lt 60 ] && { echo "isa=$isa: no time left"; continue; }
        BNN_KERNEL_ISA=$isa timeout $(cap 100) taskset -c 0,1 python3 bench/compare_numpyro.py --bnn $BIN/bnn \
            --python python3 --peer .gpu/numpyro_bnn.py --data-dir "$BNN_DATA_DIR" --skip-plain --repeats 7 \
            --json "$OUT/vs_numpyro_$isa.json" > /dev/null 2> "$OUT/vs_numpyro_$isa.log"
        echo "isa=$isa rc=$?"; grep -o '"problem[^}]*ratio_fused_vs_numpyro_min": [0-9.]*' "$OUT/vs_numpyro_$isa.log" \
            | sed 's/"n_train.*"ratio_fused_vs_numpyro"/ ratio/'
    done
fi
echo done
