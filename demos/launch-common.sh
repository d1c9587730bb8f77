# Shell helpers shared by the launch scripts that run in place (launch-mpirun.sh,
# launch-horovodrun.sh). The qsub/sbatch scripts keep their own copies: batch systems copy a job
# script to a spool directory, where files next to it are not found.

# Quotes one word for display so that the printed line can be pasted into a shell.
q() {
  case "$1" in
    '' | *[!A-Za-z0-9_./:=,+@%^-]*) printf "'%s'" "${1//\'/\'\\\'\'}" ;;
    *) printf '%s' "$1" ;;
  esac
}
print_cmd() {
  local out="" a
  for a in "$@"; do out+="${out:+ }$(q "$a")"; done
  printf '%s\n' "$out"
}
die() { echo "$(basename "$0"): $*" >&2; exit 2; }
# Runs a command, or with DRY_RUN=1 only prints it.
run_or_print() { if [ "${DRY_RUN:-0}" = 1 ]; then print_cmd "$@"; else "$@"; fi; }

find_rnn() {
  if [ -n "${RNN:-}" ]; then echo "$RNN"; return; fi
  if [ -f rnn.py ]; then echo rnn.py; return; fi
  local here
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." 2>/dev/null && pwd || true)"
  for d in "${RETURNN_ROOT:-}" "$here"; do
    if [ -n "$d" ] && [ -f "$d/rnn.py" ]; then echo "$d/rnn.py"; return; fi
  done
  echo rnn.py
}

# Arguments of the demo scripts: --dry-run, -n N (only where NP has a default), ++key value (into ARGS).
parse_demo_args() {
  ARGS=()
  while [ $# -gt 0 ]; do
    case "$1" in
      -n | -np | --np)
        [ -n "${NP:-}" ] || die "unknown argument $1"
        [ $# -ge 2 ] || die "$1 needs a value"; NP="$2"; shift 2 ;;
      --dry-run) DRY_RUN=1; shift ;;
      -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
      ++*=*) ARGS+=("$1"); shift ;;
      ++*) [ $# -ge 2 ] || die "$1 needs a value"; ARGS+=("$1" "$2"); shift 2 ;;
      *) die "unknown argument $1 (options: ${NP:+-n N, }--dry-run; config keys: ++key value)" ;;
    esac
  done
}

# The 12AX task as HDF files in $RETURNN_DEMO_DIR (only the missing ones; a dry run prints the commands).
# Usage: make_demo_hdfs PYTHON name:num_seqs:seed ...
make_demo_hdfs() {
  local py="$1" part name num seed hdf
  shift
  for part in "$@"; do
    IFS=: read -r name num seed <<<"$part"
    hdf="$RETURNN_DEMO_DIR/12ax.$name.hdf"
    [ ! -f "$hdf" ] || continue
    [ "${DRY_RUN:-0}" = 1 ] || mkdir -p "$RETURNN_DEMO_DIR"
    run_or_print "$py" tools/hdf_dump.py "{'class': 'Task12AXDataset', 'num_seqs': $num, 'fixed_random_seed': $seed}" "$hdf"
  done
}

# Python for the ranks: $PYTHON; else the .venv of the repository that holds rnn.py (an absolute
# path, the same on every node of a shared file system); else python3 when it has TensorFlow.
# Otherwise one line saying what to do (a dry run only warns). Usage: find_python RNN_PATH
find_python() {
  if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
  local root
  root="$(cd "$(dirname "$1")" 2>/dev/null && pwd || true)"
  if [ -n "$root" ] && [ -x "$root/.venv/bin/python" ]; then echo "$root/.venv/bin/python"; return; fi
  if python3 -c "import importlib.util as u, sys; sys.exit(u.find_spec('tensorflow') is None)" 2>/dev/null; then
    echo python3; return
  fi
  local msg="python3 has no TensorFlow and there is no ${root:-.}/.venv: run 'make setup' in the repository, or set PYTHON=/path/to/python"
  if [ "${DRY_RUN:-0}" = 1 ]; then echo "$(basename "$0"): warning: $msg" >&2; echo python3; else die "$msg"; fi
}

# Usable cores (GNU nproc would also obey OMP_NUM_THREADS, which says nothing about the machine).
cores() { env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc; }

# Sum of the slots in a host list "a:4,b:4" (a host without ":N" counts 1).
sum_slots() {
  local n=0 e s entries
  IFS=, read -r -a entries <<<"$1"
  for e in "${entries[@]}"; do
    s="${e##*:}"; [ "$s" != "$e" ] || s=1
    [[ "$s" =~ ^[0-9]+$ ]] || die "bad slot count in host list entry '$e'"
    n=$((n + s))
  done
  echo "$n"
}

check_np() { [[ "$1" =~ ^[1-9][0-9]*$ ]] || die "number of ranks must be a positive integer, got '$1'"; }

# --- Multi-node: network choice and bounded teardown (launch-sge.qsub keeps a copy of this part) ---

# mpirun options for the network (appended to the array named $1; $2 = 1 when several hosts take part):
#   MPI_IFACE       interface name(s) or CIDR subnet(s), comma separated (eth0, ib0, 10.1.0.0/16): MPI's
#                   data (btl_tcp_if_include) and control (oob_tcp_if_include) traffic use only these;
#                   names are also exported as NCCL_SOCKET_IFNAME (GPU collectives)
#   MPI_KEEPALIVE   seconds after which mpirun gives up on a node that stopped answering (TCP keepalive
#                   on its control connections; default 120 when several hosts take part, 0 = Open
#                   MPI's default of about 480)
mpi_net_args() {
  local -n _args="$1"
  local iface="${MPI_IFACE:-}" keep="${MPI_KEEPALIVE:-}"
  [ -n "$keep" ] || { [ "${2:-0}" = 1 ] && keep=120 || keep=0; }
  if [ -n "$iface" ]; then
    _args+=(-mca btl_tcp_if_include "$iface" -mca oob_tcp_if_include "$iface")
    [[ "$iface" == */* ]] || _args+=(-x "NCCL_SOCKET_IFNAME=$iface")
  fi
  [[ "$keep" =~ ^[0-9]+$ ]] || die "MPI_KEEPALIVE must be a number of seconds, got '$keep'"
  if [ "$keep" -gt 0 ]; then
    local idle=$(((keep + 1) / 2)) intvl=$(((keep + 5) / 6))
    _args+=(-mca oob_tcp_keepalive_time "$idle" -mca oob_tcp_keepalive_intvl "$intvl"
      -mca oob_tcp_keepalive_probes 3)
  fi
}

# Number of mpirun's ranks running on this host (its children that carry an MPI rank).
local_ranks() {
  local n=0 child
  for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do
    if grep -qsz '^OMPI_COMM_WORLD_RANK=' "/proc/$child/environ"; then n=$((n + 1)); fi
  done
  echo "$n"
}

# Runs mpirun ("$@") with a bounded teardown. mpirun ends only when the daemons of all nodes have
# reported; after a node is lost (link down, crash) it can wait for that daemon for many minutes
# after its ranks have ended, holding the allocation. So once no rank is left on this host,
# mpirun gets MPI_TEARDOWN_GRACE seconds (default 60; 0 = no watchdog, mpirun is exec'ed) to end,
# then SIGTERM, 10 s later SIGKILL. Stop signals (TERM, INT, HUP, USR1, USR2) are passed on to mpirun.
run_mpirun() {
  local grace="${MPI_TEARDOWN_GRACE:-60}"
  [[ "$grace" =~ ^[0-9]+$ ]] || die "MPI_TEARDOWN_GRACE must be a number of seconds, got '$grace'"
  [ "$grace" -gt 0 ] || exec "$@"
  set -m  # mpirun in its own process group: a signal sent to this script's group reaches it once, via the trap
  "$@" &
  set +m
  local pid=$! seen=0 empty_since="" killed="" status sig n
  for sig in TERM INT HUP USR1 USR2; do trap "kill -$sig $pid 2>/dev/null" "$sig"; done
  while kill -0 "$pid" 2>/dev/null; do
    n="$(local_ranks "$pid")" || n=""  # empty when a signal cut the count short: count again
    if [ -z "$n" ]; then
      :
    elif [ "$n" -gt 0 ]; then
      seen=1 empty_since=""
    elif [ "$seen" = 1 ]; then
      : "${empty_since:=$SECONDS}"
      if [ -z "$killed" ] && [ $((SECONDS - empty_since)) -ge "$grace" ]; then
        echo "$(basename "$0"): mpirun still runs ${grace} s after the last rank on $(hostname) ended" \
          "(a node lost?); terminating it" >&2
        kill -TERM "$pid" 2>/dev/null
        killed=$SECONDS
      elif [ -n "$killed" ] && [ $((SECONDS - killed)) -ge 10 ]; then
        kill -KILL "$pid" 2>/dev/null
      fi
    fi
    sleep 1 &
    wait $! 2>/dev/null || true
  done
  while :; do
    wait "$pid" && status=0 || status=$?
    kill -0 "$pid" 2>/dev/null || break
  done
  return "$status"
}
