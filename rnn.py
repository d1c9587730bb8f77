#!/usr/bin/env python3
"""Entry point: ``python rnn.py CONFIG [CONFIG2 ...] [++key value ...]``."""
import sys

from returnn.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
