#!/bin/sh
# Launch agent for simulated nodes (tests/netns.py), used as Open MPI's plm_rsh_agent in place of ssh:
#
#   netns_agent.sh [ssh-style options] HOST COMMAND [ARGS ...]
#
# Runs COMMAND on node HOST the way sshd would: inside the node's network namespace, with the
# node's hostname (a new UTS namespace), the node's /etc/hosts, a fresh login environment (only
# PATH, HOME, USER, LOGNAME, SHELL: nothing of the caller's environment leaks over, so what the
# ranks see must be exported by mpirun -x, as on a real cluster), in $HOME, with the words of
# COMMAND joined and run by sh -c. The node table ($RNN_NETNS_NODES, lines "hostname netns")
# maps host names to namespaces. Exit status: COMMAND's, or 255 (as ssh) when HOST is unknown.
set -eu
while [ $# -gt 0 ]; do
  case "$1" in
    -[1246AaCfGgKkMNnqsTtVvXxYy]*) shift ;;          # ssh flags without a value
    -[BbcDEeFIiJLlmOoPpQRSWw]) shift 2 ;;            # ssh options with a value
    -*) shift ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || { echo "netns_agent: usage: netns_agent.sh HOST COMMAND..." >&2; exit 255; }
host="$1"
shift
table="${RNN_NETNS_NODES:?netns_agent: RNN_NETNS_NODES (node table) is not set}"
netns="$(awk -v h="$host" '$1 == h { print $2; exit }' "$table")"
[ -n "$netns" ] || { echo "netns_agent: $host: unknown node (not in $table)" >&2; exit 255; }
home="${HOME:-/root}"
exec ip netns exec "$netns" unshare --uts env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME="$home" USER="$(id -un)" LOGNAME="$(id -un)" SHELL=/bin/sh \
  sh -c 'hostname "$0" && cd "$HOME" && exec sh -c "$1"' "$host" "$*"
