"""The Python binding on a PostgreSQL store: `memstrata.Memory("postgres://...")`.

Run by scripts/test-mcp-pg.sh under scripts/pg-test.sh (`make test-pg`), which sets
MEMSTRATA_TEST_PG_URL; without it these tests fail rather than skip."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid

import pytest

import memstrata


@pytest.fixture
def url() -> str:
    base = os.environ.get("MEMSTRATA_TEST_PG_URL")
    if not base:
        pytest.fail("MEMSTRATA_TEST_PG_URL is not set: run through scripts/pg-test.sh (make test-pg)")
    return f"{base}?schema=py_{uuid.uuid4().hex[:12]}"


def test_layers_on_postgres(url: str) -> None:
    password = url.split("@", 1)[0].rsplit(":", 1)[1]
    with memstrata.Memory(url) as m:
        assert m.is_temporary is False
        assert password not in repr(m) and "***" in repr(m)
        # A URL store reports its URL as a str (not a pathlib.Path), password hidden.
        assert isinstance(m.path, str)
        assert m.path.startswith("postgres://") and "***" in m.path and password not in m.path
        m.short_term.store("k", {"a": 1})
        assert m.short_term.retrieve("k") == {"a": 1}
        eid = m.episodic.record("Deployed the search service to staging", tags=["deploy"])
        hits = m.episodic.search("search service")
        assert [h.episode.id for h in hits] == [eid]
        m.semantic.store("db", {"engine": "postgres"})
        assert m.semantic.update("db", {"major": 15}).version == 2
        sid = m.session_create("py").session_id
        m.session_save(sid, {"step": 1})
        ns = m.namespace("other")
        ns.semantic.store("db", "another context")
    # Reopened: everything is in the database.
    with memstrata.Memory(url) as m:
        assert m.semantic.retrieve("db") == {"engine": "postgres", "major": 15}
        assert m.namespace("other").semantic.retrieve("db") == "another context"
        assert m.session_restore(sid).content == {"step": 1}
        assert m.short_term.retrieve("k") == {"a": 1}


def test_another_process_sees_every_write(url: str) -> None:
    # Two processes on one store (a sled store would refuse the second with StoreLocked).
    with memstrata.Memory(url) as m:
        m.semantic.store("from-parent", "parent wrote this")
        child = textwrap.dedent(
            f"""
            import memstrata
            with memstrata.Memory({url!r}) as m:
                assert m.semantic.retrieve("from-parent") == "parent wrote this"
                print(m.episodic.record("written by the child process about lighthouses"))
            """
        )
        r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        eid = r.stdout.strip()
        # The parent, still open, reads and searches the child's write.
        assert m.episodic.get(eid).summary == "written by the child process about lighthouses"
        assert [h.episode.id for h in m.episodic.search("lighthouses")] == [eid]


def test_an_unreachable_server_is_an_error_without_the_password() -> None:
    with pytest.raises(memstrata.MemstrataError) as e:
        memstrata.Memory("postgres://bob:hunter2@127.0.0.1:1/mem?schema=x")
    assert "hunter2" not in str(e.value)


def test_a_password_parameter_never_shows(url: str) -> None:
    # The test URL's password moves to a `password=` parameter.
    scheme, rest = url.split("://", 1)
    user, host = rest.split("@", 1)
    user, password = user.split(":", 1)
    with memstrata.Memory(f"{scheme}://{user}@{host}&password={password}") as m:
        assert "password=***" in repr(m) and password not in repr(m)
        assert "password=***" in m.path and password not in m.path
        assert password not in str(m.status(include_metrics=True))

