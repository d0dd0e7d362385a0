import datetime as dt

import pytest

import memstrata

UTC = dt.timezone.utc


def test_manual_clock():
    start = dt.datetime(2030, 1, 1, tzinfo=UTC)
    c = memstrata.ManualClock(start)
    assert c.now() == start
    c.advance(90)
    assert c.now() == start + dt.timedelta(seconds=90)
    c.advance(dt.timedelta(hours=1))
    assert c.now() == start + dt.timedelta(hours=1, seconds=90)
    c.set(dt.datetime(2031, 6, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=2))))
    assert c.now() == dt.datetime(2031, 6, 1, 10, tzinfo=UTC)
    assert repr(c).startswith("ManualClock(2031-06-01T10:00:00")


def test_manual_clock_defaults_to_now():
    before = dt.datetime.now(UTC) - dt.timedelta(seconds=5)
    assert memstrata.ManualClock().now() >= before


def test_manual_clock_bad_input():
    with pytest.raises(memstrata.InvalidInputError):
        memstrata.ManualClock(dt.datetime(2030, 1, 1))
    with pytest.raises(memstrata.InvalidInputError):
        memstrata.ManualClock().advance(-1)


def test_clock_drives_timestamps():
    c = memstrata.ManualClock(dt.datetime(2030, 1, 1, tzinfo=UTC))
    with memstrata.Memory(clock=c) as m:
        k = m.semantic.store("k", 1)
        c.advance(10)
        k2 = m.semantic.store("k", 2)
        assert k.created_at == dt.datetime(2030, 1, 1, tzinfo=UTC)
        assert k2.updated_at == dt.datetime(2030, 1, 1, 0, 0, 10, tzinfo=UTC)
        assert k2.created_at == k.created_at
        ep = m.episodic.get(m.episodic.record("x"))
        assert ep.timestamp == dt.datetime(2030, 1, 1, 0, 0, 10, tzinfo=UTC)
