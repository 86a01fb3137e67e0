#!/usr/bin/env bash
# Submits a sharded DEI-MCMC run: an array of N shards, then a merge job after all succeed.
#   examples/slurm/submit.sh N ROOT [bnn run flags...]
#   examples/slurm/submit.sh 3 runs/concrete --dataset concrete --members 12
set -euo pipefail
shards="$1"; root="$2"; shift 2
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$root"
array=$(sbatch --parsable --array=0-$((shards - 1)) "$here/array.sbatch" "$root" "$@")
merge=$(sbatch --parsable --dependency=afterok:"${array%%;*}" "$here/merge.sbatch" "$root")
echo "array job $array ($shards shards), merge job $merge; the merged run will be in $root/merged"
