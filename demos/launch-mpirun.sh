#!/usr/bin/env bash
# Data-parallel training with Horovod on one machine (or a given host list) via Open MPI's mpirun.
#
#   demos/launch-mpirun.sh [-n N] [-H host1:slots,host2:slots] [--dry-run] CONFIG [++key value ...]  (options anywhere)
#
# Runs (one rank per GPU, or per core on a CPU-only machine):
#   mpirun -np N -bind-to none -map-by slot -x NCCL_DEBUG=INFO [-x LD_LIBRARY_PATH] -x PATH \
#     -mca pml ob1 -mca btl ^openib [--allow-run-as-root] [--oversubscribe] \
#     python3 rnn.py CONFIG ++use_horovod 1 [++key value ...]
# --allow-run-as-root is added only when running as root; --oversubscribe only when N exceeds the
# cores of this machine (and no host list is given). --dry-run prints the command instead of running it.
#
# Environment overrides:
#   PYTHON        interpreter for the ranks (default: the .venv next to rnn.py, as an absolute path, else python3)
#   RNN           path of rnn.py (default: ./rnn.py if present, else $RETURNN_ROOT/rnn.py, else next to demos/)
#   NP            number of ranks when -n is not given (default: the slots of the host list, else the
#                 number of GPUs, else the number of cores)
#   HOSTS         host list for -H
#   MPIRUN        mpirun binary (default mpirun)
#   MPI_BTL       value for -mca btl (default ^openib, i.e. no InfiniBand verbs; tcp,self forces TCP)
#   NCCL_DEBUG    exported to the ranks (default INFO)
#   MPI_EXPORT    further variable names to export with -x (space separated)
#   MPIRUN_ARGS   further mpirun arguments (word split), put before the program
#   MPI_IFACE     network for MPI (interface names or CIDR, e.g. eth0 or 10.1.0.0/16): adds
#                 -mca btl_tcp_if_include/oob_tcp_if_include and NCCL_SOCKET_IFNAME; unset = all interfaces
#   MPI_KEEPALIVE seconds until mpirun gives up on a silent node (default 120 with -H;
#                 adds -mca oob_tcp_keepalive_*; 0 = Open MPI's default, about 480 s)
#   MPI_TEARDOWN_GRACE  seconds mpirun may run on after the last rank on this host ended (default 60,
#                 then it is terminated: a lost node would otherwise keep it waiting); 0 = exec mpirun
#   DRY_RUN=1     same as --dry-run
set -euo pipefail

usage() { sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'; }

source "$(dirname "${BASH_SOURCE[0]}")/launch-common.sh"

default_np() {
  local gpus=0
  if command -v nvidia-smi >/dev/null 2>&1; then gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)"; fi
  if [ "${gpus:-0}" -gt 0 ]; then echo "$gpus"; else cores; fi
}

NP="${NP:-}"
HOSTS="${HOSTS:-}"
DRY_RUN="${DRY_RUN:-0}"
ARGS=()  # config files and ++key value pairs; options may come anywhere
while [ $# -gt 0 ]; do
  case "$1" in
    -n | -np | --np) [ $# -ge 2 ] || die "$1 needs a value"; NP="$2"; shift 2 ;;
    -n=* | --np=*) NP="${1#*=}"; shift ;;
    -H | --hosts) [ $# -ge 2 ] || die "$1 needs a value"; HOSTS="$2"; shift 2 ;;
    --hosts=*) HOSTS="${1#*=}"; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    -h | --help) usage; exit 0 ;;
    ++*=*) ARGS+=("$1"); shift ;;
    ++*) [ $# -ge 2 ] || die "$1 needs a value"; ARGS+=("$1" "$2"); shift 2 ;;
    --) shift; ARGS+=("$@"); break ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
set -- ${ARGS[@]+"${ARGS[@]}"}
[ $# -ge 1 ] || { usage >&2; exit 2; }
CONFIG="$1"
shift
if [ -z "$NP" ]; then
  if [ -n "$HOSTS" ]; then NP="$(sum_slots "$HOSTS")"; else NP="$(default_np)"; fi
fi
check_np "$NP"

cmd=("${MPIRUN:-mpirun}" -np "$NP")
[ -z "$HOSTS" ] || cmd+=(-H "$HOSTS")
cmd+=(-bind-to none -map-by slot -x "NCCL_DEBUG=${NCCL_DEBUG:-INFO}")
[ -z "${LD_LIBRARY_PATH:-}" ] || cmd+=(-x LD_LIBRARY_PATH)
cmd+=(-x PATH)
[ -z "${PYTHONPATH:-}" ] || cmd+=(-x PYTHONPATH)
for var in ${MPI_EXPORT:-}; do cmd+=(-x "$var"); done
cmd+=(-mca pml ob1 -mca btl "${MPI_BTL:-^openib}")
mpi_net_args cmd "$([ -n "$HOSTS" ] && echo 1 || echo 0)"
[ "$(id -u)" != 0 ] || cmd+=(--allow-run-as-root)
if [ -z "$HOSTS" ] && [ "$NP" -gt "$(cores)" ]; then cmd+=(--oversubscribe); fi
# shellcheck disable=SC2206 # word splitting of MPIRUN_ARGS is intended
[ -z "${MPIRUN_ARGS:-}" ] || cmd+=(${MPIRUN_ARGS})
RNN_PY="$(find_rnn)"
PY="$(find_python "$RNN_PY")"
cmd+=("$PY" "$RNN_PY" "$CONFIG" ++use_horovod 1 "$@")

if [ "$DRY_RUN" = 1 ]; then
  print_cmd "${cmd[@]}"
else
  run_mpirun "${cmd[@]}"
fi
