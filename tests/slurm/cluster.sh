#!/usr/bin/env bash
# A real single-node Slurm cluster on this machine, for tests and benchmarks:
#
#   tests/slurm/cluster.sh start DIR   # munged, slurmctld and slurmd, all under DIR
#   . DIR/env                          # SLURM_CONF for sbatch, squeue, sinfo, ...
#   tests/slurm/cluster.sh stop DIR    # every daemon it started, and checks none is left
#
# Everything lives under DIR: the munge key and socket, a generated
# slurm.conf (the node is localhost with this machine's CPUs and memory),
# state, spool, logs and pid files, on ports that were free at start. The
# system's /etc/slurm and /etc/munge are neither read nor changed, so
# several clusters (one per test) can run side by side.
#
# Needs root (slurmd runs jobs as their submitter) and Debian's slurm-wlm
# and munge (scripts/install-deps.sh --slurm). Without them it exits 77
# and says why, which ctest reports as a skip.
set -euo pipefail

die() { echo "cluster.sh: $*" >&2; exit 1; }
skip() { echo "cluster.sh: SKIP: $*" >&2; exit 77; }

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || die "usage: cluster.sh start|stop DIR"

# Refuses what would skip the test, so the reason is printed before any daemon runs.
check_prereqs() {
  [ "$(id -u)" -eq 0 ] || skip "not root (slurmd runs jobs as their owner; run as root)"
  local b
  for b in munged slurmctld slurmd sbatch sinfo squeue scancel scontrol; do
    command -v "$b" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin command -v "$b" >/dev/null 2>&1 ||
      skip "'$b' not installed (scripts/install-deps.sh --slurm installs slurm-wlm and munge)"
  done
}

# A TCP port nobody uses, from a range away from the usual 6817/6818 (the
# local ports of /proc/net/tcp{,6}, in hex: no ss or netstat needed).
free_port() {
  local p used
  used=$(awk 'FNR > 1 { split($2, a, ":"); print a[2] }' /proc/net/tcp /proc/net/tcp6 2>/dev/null | sort -u || true)
  for _ in $(seq 200); do
    p=$((20000 + RANDOM % 20000))
    grep -qx "$(printf '%04X' "$p")" <<<"$used" || { echo "$p"; return; }
  done
  die "no free TCP port found between 20000 and 40000"
}

# The pids of the daemons this cluster started (each writes a pid file under DIR).
our_pids() {
  local f
  for f in "$dir"/run/*.pid; do
    [ -s "$f" ] && cat "$f"
  done 2>/dev/null || true
}

stop() {
  [ -d "$dir" ] || return 0
  local pids pid i
  pids=$(our_pids)
  # jobs first: slurmd leaves running steps alone when it stops
  if [ -f "$dir/slurm.conf" ] && [ -n "$pids" ]; then
    SLURM_CONF=$dir/slurm.conf scancel --full --quiet -u "$(id -un)" 2>/dev/null || true
    for _ in $(seq 50); do
      [ -z "$(SLURM_CONF=$dir/slurm.conf squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  # slurmd first, so it stops its job steps while the controller is still there
  for name in slurmd slurmctld munged; do
    pid=$(cat "$dir/run/$name.pid" 2>/dev/null || true)
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  done
  for i in $(seq 100); do
    local alive=
    for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive="$alive $pid"; done
    [ -z "$alive" ] && break
    [ "$i" -eq 60 ] && kill -9 $alive 2>/dev/null || true
    sleep 0.1
  done
  # job steps of this cluster that outlived slurmd: slurmstepd inherits
  # slurmd's environment, SLURM_CONF included
  for pid in $(pgrep -x slurmstepd || true); do
    { tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null | grep -qx "SLURM_CONF=$dir/slurm.conf" &&
      kill -9 "$pid" 2>/dev/null || true
  done
  # nothing of ours may be left: daemons are found by the config or socket under DIR
  sleep 0.2
  local left
  left=$(pgrep -f -- "$dir/(slurm.conf|munge.socket)" || true)
  for pid in $(our_pids); do kill -0 "$pid" 2>/dev/null && left="$left $pid"; done
  for pid in $(pgrep -x slurmstepd || true); do
    { tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null | grep -qx "SLURM_CONF=$dir/slurm.conf" && left="$left $pid"
  done
  rm -f "$dir"/run/*.pid
  [ -z "${left// /}" ] || die "daemons still running after stop: $left"
}

start() {
  check_prereqs
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  case "$dir" in *" "*) die "DIR may not contain spaces: '$dir'";; esac
  mkdir -p "$dir"/{run,log,ctld,spool,munge}
  chmod 700 "$dir/munge"
  # any old cluster in DIR goes first
  stop

  local ctld_port slurmd_port cpus mem
  ctld_port=$(free_port)
  slurmd_port=$(free_port)
  while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port=$(free_port); done
  cpus=$(nproc)
  # what slurmd itself detects, less 5%, so the node is never drained for memory
  mem=$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.95}' /proc/meminfo)

  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge.socket" \
    --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/seed" || die "munged did not start: $(tail -3 "$dir/log/munged.log" 2>/dev/null)"

  cat >"$dir/slurm.conf" <<EOF
# generated by tests/slurm/cluster.sh
ClusterName=bitflip$$
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.socket
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
# a finished job stays visible to scontrol for 5 minutes (no accounting database)
MinJobAge=300
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
  cat >"$dir/env" <<EOF
export SLURM_CONF=$dir/slurm.conf
EOF
  export SLURM_CONF=$dir/slurm.conf
  # -c: a clean start, no jobs from an older state under DIR
  slurmctld -c -f "$dir/slurm.conf" || die "slurmctld did not start: $(tail -5 "$dir/log/slurmctld.log" 2>/dev/null)"
  slurmd -N localhost -f "$dir/slurm.conf" || die "slurmd did not start: $(tail -5 "$dir/log/slurmd.log" 2>/dev/null)"

  local state=
  for _ in $(seq 150); do
    state=$(sinfo -h -N -n localhost -o '%T' 2>/dev/null || true)
    [ "$state" = idle ] && break
    sleep 0.2
  done
  if [ "$state" != idle ]; then
    echo "cluster.sh: the node is '${state:-unknown}', not idle, after 30 s; logs:" >&2
    tail -5 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
    stop
    exit 1
  fi
  echo "cluster.sh: Slurm up in $dir (controller on port $ctld_port, node localhost idle, $cpus CPUs)"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  *) die "usage: cluster.sh start|stop DIR (not '$cmd')" ;;
esac
