"""A store URL's password never shows: not in an open error's message, repr or traceback,
nor in a log record. No server needed (nothing listens on loopback port 1); repr and
`path` of an open PostgreSQL store are checked in tests_pg/test_postgres.py."""

import logging
import traceback

import pytest

import memstrata

SECRET = "hunter2"

UNREACHABLE = [
    f"postgres://bob:{SECRET}@127.0.0.1:1/mem?schema=team",
    f"postgres://bob@127.0.0.1:1/mem?password={SECRET}",
    f"POSTGRES://bob:{SECRET}@127.0.0.1:1/mem",
    f"PostgreSQL://bob@127.0.0.1:1/mem?password={SECRET}",
]

MALFORMED = [
    (f"postgres://bob:{SECRET}@127.0.0.1:99999/mem", "port"),
    (f"postgres://bob@127.0.0.1/mem?password={SECRET}&schema=Team-A", "`schema`"),
    (f"postgres:///mem?password={SECRET}", "no host"),
    # The client knows `password` only in lower case, and not `sslpassword`: refused, still masked.
    (f"postgres://bob@127.0.0.1:1/mem?schema=team&PassWord={SECRET}", "unknown option `PassWord`"),
    (f"postgres://bob@127.0.0.1:1/mem?sslpassword={SECRET}", "unknown option `sslpassword`"),
]


def everything_shown(e: BaseException) -> str:
    return " ".join([str(e), repr(e), *map(repr, e.args), *traceback.format_exception(e)])


@pytest.mark.parametrize("url", UNREACHABLE)
def test_an_unreachable_server_is_an_error_without_the_password(url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(memstrata.StorageError) as e:
        memstrata.Memory(url)
    shown = everything_shown(e.value)
    assert SECRET not in shown
    assert "127.0.0.1:1" in shown and "***" in shown
    assert SECRET not in caplog.text


@pytest.mark.parametrize("url, part", MALFORMED)
def test_a_malformed_url_is_refused_without_the_password(url: str, part: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(memstrata.InvalidInputError) as e:
        memstrata.Memory(url)
    shown = everything_shown(e.value)
    assert part in str(e.value) and "`path`" in str(e.value)
    assert SECRET not in shown
    assert SECRET not in caplog.text
