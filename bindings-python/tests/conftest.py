import datetime as dt
import faulthandler
import sys

import pytest

import memstrata

UTC = dt.timezone.utc

# A test that hangs (a deadlock in the engine or the binding) dumps every
# thread's Python stack and ends the run instead of stalling CI.
HANG_TIMEOUT_S = 300


@pytest.fixture(autouse=True)
def hang_watchdog():
    faulthandler.dump_traceback_later(HANG_TIMEOUT_S, exit=True, file=sys.stderr)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture
def mem():
    """A temporary store, closed after the test."""
    m = memstrata.Memory()
    yield m
    m.close()


@pytest.fixture
def clock():
    return memstrata.ManualClock(dt.datetime(2030, 1, 1, 12, 0, tzinfo=UTC))


@pytest.fixture
def clocked(clock):
    """A temporary store driven by a ManualClock (TTL tests never sleep)."""
    m = memstrata.Memory(clock=clock)
    yield m, clock
    m.close()


@pytest.fixture
def store_path(tmp_path):
    return tmp_path / "agent.mem"
