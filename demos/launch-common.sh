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

check_np() { [[ "$1" =~ ^[1-9][0-9]*$ ]] || die "number of ranks must be a positive integer, got '$1'"; }
