#!/usr/bin/env bash
# Horovod training via Horovod's own launcher, horovodrun (it calls mpirun, or Gloo when built with it).
#
#   demos/launch-horovodrun.sh [-n N] [-H host:slots,... | --hostfile FILE] [--dry-run] CONFIG [++key value ...]
#
# Runs
#   horovodrun -np N -H localhost:N python3 rnn.py CONFIG ++use_horovod 1 [++key value ...]
# The host list defaults to this machine with N slots. Remote hosts must be reachable by ssh without
# a password and have the same Python environment at the same path (set PYTHON to it).
# horovodrun adds --allow-run-as-root and the Open MPI flags (-bind-to none -map-by slot, ...) itself.
#
# Environment overrides: PYTHON (default: the .venv next to rnn.py, else python3), RNN (path of rnn.py), NP, HOSTS, HOSTFILE,
# HOROVODRUN (default horovodrun), HOROVODRUN_ARGS (more horovodrun arguments, e.g. "--verbose"
# or "--timeline-filename /tmp/tl.json"), DRY_RUN=1 (same as --dry-run).
set -euo pipefail

usage() { sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'; }

source "$(dirname "${BASH_SOURCE[0]}")/launch-common.sh"

NP="${NP:-}"
HOSTS="${HOSTS:-}"
HOSTFILE="${HOSTFILE:-}"
DRY_RUN="${DRY_RUN:-0}"
ARGS=()  # config files and ++key value pairs; options may come anywhere
while [ $# -gt 0 ]; do
  case "$1" in
    -n | -np | --np) [ $# -ge 2 ] || die "$1 needs a value"; NP="$2"; shift 2 ;;
    -n=* | --np=*) NP="${1#*=}"; shift ;;
    -H | --hosts) [ $# -ge 2 ] || die "$1 needs a value"; HOSTS="$2"; shift 2 ;;
    --hosts=*) HOSTS="${1#*=}"; shift ;;
    --hostfile) [ $# -ge 2 ] || die "$1 needs a value"; HOSTFILE="$2"; shift 2 ;;
    --hostfile=*) HOSTFILE="${1#*=}"; shift ;;
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
[ -z "$HOSTS" ] || [ -z "$HOSTFILE" ] || die "give either -H or --hostfile, not both"
if [ -z "$NP" ]; then
  if [ -n "$HOSTS" ]; then
    NP="$(sum_slots "$HOSTS")"
  else
    NP="$(cores)"
  fi
fi
check_np "$NP"

cmd=("${HOROVODRUN:-horovodrun}" -np "$NP")
if [ -n "$HOSTFILE" ]; then
  cmd+=(--hostfile "$HOSTFILE")
else
  cmd+=(-H "${HOSTS:-localhost:$NP}")
fi
# shellcheck disable=SC2206 # word splitting of HOROVODRUN_ARGS is intended
[ -z "${HOROVODRUN_ARGS:-}" ] || cmd+=(${HOROVODRUN_ARGS})
RNN_PY="$(find_rnn)"
PY="$(find_python "$RNN_PY")"
cmd+=("$PY" "$RNN_PY" "$CONFIG" ++use_horovod 1 "$@")

if [ "$DRY_RUN" = 1 ]; then
  print_cmd "${cmd[@]}"
else
  exec "${cmd[@]}"
fi
