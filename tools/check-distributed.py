#!/usr/bin/env python3
"""Checks an MPI + Horovod set-up; run it under the launcher, e.g. ``mpirun -np 2 python3 tools/check-distributed.py``.

See ``returnn/distributed/check.py`` and docs/running.md.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from returnn.distributed.check import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
