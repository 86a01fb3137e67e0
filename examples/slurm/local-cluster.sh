#!/usr/bin/env bash
# A one-node Slurm on localhost for the tests (no systemd): munged, slurmctld and slurmd started
# by hand with a generated slurm.conf in STATE_DIR. Debian's packages: slurmctld slurmd
# slurm-client munge (.ci/run installs them).
#   examples/slurm/local-cluster.sh start STATE_DIR   # prints `export SLURM_CONF=...`
#   examples/slurm/local-cluster.sh stop STATE_DIR
set -euo pipefail
action="$1"; state="$(mkdir -p "$2" && cd "$2" && pwd)"
conf="$state/slurm.conf"
host="$(hostname -s)"
cpus="$(nproc)"

stop() {
    for pidfile in "$state/slurmd.pid" "$state/slurmctld.pid" "$state/munged.pid"; do
        [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
    done
    sleep 1
}

if [ "$action" = stop ]; then stop; exit 0; fi

stop
mkdir -p "$state/spool" "$state/ctld" "$state/munge" "$state/log"
# munged: its own socket and key, so a system munged (if any) is left alone.
if [ ! -f "$state/munge/munge.key" ]; then
    dd if=/dev/urandom of="$state/munge/munge.key" bs=1024 count=1 status=none
fi
chown -R munge:munge "$state/munge" 2>/dev/null || true
touch "$state/log/munged.log"; chown munge:munge "$state/log/munged.log" 2>/dev/null || true
chmod 700 "$state/munge"; chmod 400 "$state/munge/munge.key"
socket="$state/munge/munge.socket"
if id munge >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
    runuser -u munge -- /usr/sbin/munged --key-file="$state/munge/munge.key" --socket="$socket" \
        --pid-file="$state/munge/munged.pid" --log-file="$state/log/munged.log" --seed-file="$state/munge/seed" --force
    cp "$state/munge/munged.pid" "$state/munged.pid"
else
    /usr/sbin/munged --key-file="$state/munge/munge.key" --socket="$socket" \
        --pid-file="$state/munged.pid" --log-file="$state/log/munged.log" --seed-file="$state/munge/seed" --force
fi

cat > "$conf" <<CONF
ClusterName=bnnlocal
SlurmctldHost=$host
SlurmUser=$(id -un)
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobRequeue=1
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.log
SlurmctldPort=16817
SlurmdPort=16818
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
MinJobAge=600
KillWait=30
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
export SLURM_CONF="$conf"
/usr/sbin/slurmctld -f "$conf" -i
/usr/sbin/slurmd -f "$conf"
for _ in $(seq 1 60); do
    if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
        echo "export SLURM_CONF=$conf"
        exit 0
    fi
    sleep 1
done
echo "slurm did not come up; logs in $state/log" >&2
tail -n 20 "$state/log/"*.log >&2 || true
exit 1
