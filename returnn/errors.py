"""User-facing errors: the CLI prints them as one line and exits with code 2."""


class ReturnnError(Exception):
    """Bad input from the user (config, data, network). Printed as one line, exit code 2."""

    exit_code = 2


class ConfigError(ReturnnError):
    """Problem with a config file or a config value."""


class DataError(ReturnnError):
    """Problem with a dataset or data file (the message names the file or key)."""


class NetworkError(ReturnnError):
    """Problem with the network dict (the message names the layer)."""


class DistributedError(ReturnnError):
    """Problem with the distributed setup (Horovod/MPI)."""


def known_list(names) -> str:
    """Formats a collection of names for error messages: 'a, b, c'."""
    return ", ".join(sorted(names))
