"""RETURNN's old command-line options (``rnn.py CONFIG --task search``, ``-x search``, ``--num_epochs=3``).

RETURNN's ``Config.parse_cmd_args`` reads these with optparse; each sets one config key exactly as
``++key value`` does (typed by what the key holds). ``--config FILE`` loads one more config file.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

from returnn.errors import ConfigError

# (short flag, long flag, config key), the options of RETURNN's optparse parser that set keys
OLD_FLAGS: Tuple[Tuple[str, str, str], ...] = (
    ("-a", "--activation", "activation"),
    ("-b", "--batch_size", "batch_size"),
    ("-c", "--chunking", "chunking"),
    ("-d", "--description", "description"),
    ("-e", "--epoch", "epoch"),
    ("-E", "--eval", "eval"),
    ("-f", "--gate_factors", "gate_factors"),
    ("-g", "--lreg", "lreg"),
    ("-i", "--save_interval", "save_interval"),
    ("-j", "--dropout", "dropout"),
    ("-k", "--output_file", "output_file"),
    ("-l", "--log", "log"),
    ("-L", "--load", "load"),
    ("-m", "--momentum", "momentum"),
    ("-n", "--num_epochs", "num_epochs"),
    ("-o", "--order", "order"),
    ("-p", "--loss", "loss"),
    ("-q", "--cache", "cache"),
    ("-r", "--learning_rate", "learning_rate"),
    ("-s", "--hidden_sizes", "hidden_sizes"),
    ("-t", "--truncate", "truncate"),
    ("-u", "--device", "device"),
    ("-v", "--verbose", "log_verbosity"),
    ("-w", "--window", "window"),
    ("-x", "--task", "task"),
    ("-y", "--hidden_type", "hidden_type"),
    ("-z", "--max_sequences", "max_seqs"),
)
CONFIG_FLAG = "--config"  # loads one more config file
_KEY_OF: Dict[str, str] = {flag: key for short, long, key in OLD_FLAGS for flag in (short, long)}


def flag_help_lines() -> str:
    """The options for ``rnn.py --help``, a few per line."""
    items = ["%s/%s" % (short, long) for short, long, _ in OLD_FLAGS]
    return "\n".join("  " + ", ".join(items[i:i + 6]) for i in range(0, len(items), 6))


def match_flag(arg: str) -> Optional[Tuple[str, Optional[str]]]:
    """``(config key, attached value or None)`` when ``arg`` is one of RETURNN's options
    (``--task``, ``--task=search``, ``-x``, ``-xsearch``); ``("", value)`` for ``--config``;
    None otherwise."""
    if arg.startswith("--"):
        name, eq, value = arg.partition("=")
        if name == CONFIG_FLAG:
            return "", (value if eq else None)
        key = _KEY_OF.get(name)
        return (key, value if eq else None) if key else None
    if arg.startswith("-") and len(arg) >= 2 and arg[:2] in _KEY_OF:
        return _KEY_OF[arg[:2]], (arg[2:] or None)
    return None


def take_flag(args: Sequence[str], i: int) -> Optional[Tuple[str, str, int]]:
    """When ``args[i]`` is a RETURNN option: ``(key, value, index after it)`` (key "" for
    ``--config FILE``); the value is the next argument unless attached, as optparse takes it."""
    match = match_flag(args[i])
    if match is None:
        return None
    key, value = match
    if value is not None:
        return key, value, i + 1
    if i + 1 >= len(args):
        if not key:
            raise ConfigError("command line: %s needs a config file name" % args[i])
        raise ConfigError("command line: %s needs a value (it sets config key %r, as ++%s VALUE does)"
                          % (args[i], key, key))
    return key, args[i + 1], i + 2
