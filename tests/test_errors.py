"""The three families of early ends (bad input, runtime failure, stop signal) and their exit codes."""
from __future__ import annotations

import signal

import pytest

from returnn.errors import (
    ConfigError, DataError, DistributedError, NetworkError, NonFiniteScoreError, ReturnnError, RuntimeFailure,
    StopSignal, Stopped, TrainingInterrupted,
)
from returnn.interrupts import StopRequest


@pytest.mark.parametrize("cls", [ConfigError, DataError, NetworkError, DistributedError])
def test_bad_input_family_exits_2(cls):
    exc = cls("x")
    assert isinstance(exc, ReturnnError) and not isinstance(exc, RuntimeFailure)
    assert exc.exit_code == 2


def test_nonfinite_score_is_a_runtime_failure_not_bad_input():
    exc = NonFiniteScoreError("Model seems broken, got inf or nan score.")
    assert isinstance(exc, RuntimeFailure) and not isinstance(exc, ReturnnError)
    assert exc.exit_code == 1


@pytest.mark.parametrize("exc", [StopSignal(signal.SIGUSR1), TrainingInterrupted(signal.SIGUSR1)])
def test_stop_family_exit_code_is_128_plus_signal(exc):
    assert isinstance(exc, Stopped) and not isinstance(exc, Exception)  # no `except Exception` swallows it
    assert exc.exit_code == 128 + signal.SIGUSR1


def test_stop_request_interrupts_with_the_received_signal():
    request = StopRequest()
    assert not request.requested
    assert request.interrupted().exit_code == 128 + signal.SIGTERM  # a rank told to stop by its peers
    request._handle(signal.SIGUSR1, None)
    request._handle(signal.SIGTERM, None)  # the first signal counts
    assert request.requested and request.interrupted().exit_code == 128 + signal.SIGUSR1
