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


# Usable cores (GNU nproc would also obey OMP_NUM_THREADS, which says nothing about the machine).
cores() { env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc; }

check_np() { [[ "$1" =~ ^[1-9][0-9]*$ ]] || die "number of ranks must be a positive integer, got '$1'"; }
