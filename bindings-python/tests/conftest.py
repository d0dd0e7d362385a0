import datetime as dt

import pytest

import memstrata

UTC = dt.timezone.utc


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
