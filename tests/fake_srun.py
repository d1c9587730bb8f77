#!/usr/bin/env python3
"""A stand-in for SLURM's ``srun`` on the simulated nodes of tests/netns.py.

    fake_srun.py [--mpi=X] [--kill-on-bad-exit=1] --ntasks=N [--ntasks-per-node=K] [--nodelist=a,b] PROGRAM ...

Starts the N tasks on the nodes of ``--nodelist`` (default ``$SLURM_JOB_NODELIST``; a comma
separated list, K tasks per node in order, K default N / number of nodes) with what srun gives every task:
``SLURM_PROCID`` (global rank), ``SLURM_LOCALID`` (rank on the node), ``SLURM_NODEID``,
``SLURM_NTASKS``, ``SLURM_STEP_NUM_TASKS``, ``SLURM_JOB_NODELIST``, ``SLURMD_NODENAME``. Real srun
wires MPI up through its PMIx server; there is none here, so the tasks are started by
``mpirun -H node:K,...`` through the namespace agent (Open MPI's slurm components off), which also
gives srun's ``--kill-on-bad-exit`` behaviour (one failed task ends the step). ``--mpi`` is
accepted and ignored. Extra mpirun options: ``FAKE_SRUN_MPIRUN_ARGS`` (word split).
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import List, Optional, Sequence

TASK_ENV = (
    'export SLURM_PROCID="$OMPI_COMM_WORLD_RANK" SLURM_LOCALID="$OMPI_COMM_WORLD_LOCAL_RANK"'
    ' SLURM_NTASKS="$OMPI_COMM_WORLD_SIZE" SLURM_STEP_NUM_TASKS="$OMPI_COMM_WORLD_SIZE"'
    ' SLURMD_NODENAME="$(hostname)";'
    ' SLURM_NODEID=0; for n in $(echo "$SLURM_JOB_NODELIST" | tr , " "); do'
    ' [ "$n" = "$SLURMD_NODENAME" ] && break; SLURM_NODEID=$((SLURM_NODEID + 1)); done;'
    ' export SLURM_NODEID; exec "$@"'
)


def parse(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="srun", description=__doc__.split("\n\n")[0])
    p.add_argument("--mpi", default=None)
    p.add_argument("--kill-on-bad-exit", default="1")
    p.add_argument("-n", "--ntasks", type=int, required=True)
    p.add_argument("--ntasks-per-node", type=int, default=None)
    p.add_argument("-w", "--nodelist", default=os.environ.get("SLURM_JOB_NODELIST", ""))
    p.add_argument("program", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    if not args.program:
        p.error("no program given")
    return args


def mpirun_command(args: argparse.Namespace) -> List[str]:
    nodes = [n for n in args.nodelist.split(",") if n]
    if not nodes:
        raise SystemExit("srun: no nodes (--nodelist or SLURM_JOB_NODELIST)")
    per_node = args.ntasks_per_node or -(-args.ntasks // len(nodes))
    hosts = ",".join("%s:%i" % (n, per_node) for n in nodes)
    cmd = ["mpirun", "-np", str(args.ntasks), "-H", hosts, "--map-by", "slot", "--bind-to", "none",
           "-mca", "plm", "rsh", "-mca", "ras", "^slurm", "-x", "PATH", "-x", "SLURM_JOB_NODELIST=" + ",".join(nodes)]
    for var in ("PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL", "MPI_PROBE_OUT", "PYTHONUNBUFFERED"):
        if var in os.environ:
            cmd += ["-x", var]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += shlex.split(os.environ.get("FAKE_SRUN_MPIRUN_ARGS", ""))
    return cmd + ["sh", "-c", TASK_ENV, "task"] + list(args.program)


def main(argv: Optional[Sequence[str]] = None) -> None:
    cmd = mpirun_command(parse(sys.argv[1:] if argv is None else argv))
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    main()
