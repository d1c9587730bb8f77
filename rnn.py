#!/usr/bin/env python3
"""Entry point: ``python rnn.py CONFIG [CONFIG2 ...] [++key value ...]``."""
from returnn.__main__ import exit_process, main

if __name__ == "__main__":
    exit_process(main())
