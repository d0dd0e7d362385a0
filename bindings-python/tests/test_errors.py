import subprocess
import sys
import textwrap

import pytest

import memstrata

SUBCLASSES = {
    "NotFoundError": "NOT_FOUND",
    "InvalidInputError": "INVALID_INPUT",
    "LimitExceededError": "LIMIT_EXCEEDED",
    "StoreLockedError": "STORE_LOCKED",
    "CorruptedError": "CORRUPTED",
    "IoError": "IO",
    "StorageError": "STORAGE",
    "MemstrataIndexError": "INDEX",
    "ProcedureError": "PROCEDURE",
    "ConflictError": "CONFLICT",
    "ForkedError": "FORKED",
}


@pytest.mark.parametrize("name, code", sorted(SUBCLASSES.items()))
def test_hierarchy_and_codes(name, code):
    cls = getattr(memstrata, name)
    assert issubclass(cls, memstrata.MemstrataError)
    assert issubclass(cls, Exception)
    assert cls.code == code
    assert cls.__module__ == "memstrata"
    assert cls.__doc__


def test_base_class():
    assert issubclass(memstrata.MemstrataError, Exception)
    assert memstrata.MemstrataError.__module__ == "memstrata"
    assert memstrata.MemstrataError.code is None


def test_pythonic_extra_bases():
    assert issubclass(memstrata.InvalidInputError, ValueError)
    assert issubclass(memstrata.IoError, OSError)
    assert not issubclass(memstrata.NotFoundError, ValueError)


def test_invalid_input_carries_field_and_code(mem):
    with pytest.raises(ValueError) as ei:
        mem.short_term.store("", 1)
    e = ei.value
    assert isinstance(e, memstrata.InvalidInputError)
    assert e.code == "INVALID_INPUT"
    assert e.field == "key"
    assert str(e) == "invalid input for `key`: must not be empty"


def test_limit_exceeded_carries_field(mem):
    with pytest.raises(memstrata.LimitExceededError) as ei:
        mem.episodic.search("q" * 5000)
    assert ei.value.field == "query"
    assert "4096" in str(ei.value)


def test_not_found_has_no_field(mem):
    with pytest.raises(memstrata.NotFoundError) as ei:
        mem.semantic.update("missing", {})
    assert ei.value.field is None
    assert ei.value.code == "NOT_FOUND"


def test_io_error_from_unusable_path(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(memstrata.MemstrataError) as ei:
        memstrata.Memory(blocker / "store")
    assert isinstance(ei.value, (memstrata.InvalidInputError, memstrata.IoError))
    assert "store" in str(ei.value)


def test_panic_becomes_memstrata_error_not_panic_exception():
    with pytest.raises(memstrata.MemstrataError) as ei:
        memstrata._memstrata._panic_for_tests()
    assert ei.value.code == "INTERNAL"
    assert "deliberate panic" in str(ei.value)
    assert type(ei.value).__name__ == "MemstrataError"
    # The interpreter and the engine keep working afterwards.
    with memstrata.Memory() as m:
        m.short_term.store("k", 1)
        assert m.short_term.retrieve("k") == 1


def test_store_locked_by_another_process(store_path):
    holder = memstrata.Memory(store_path)
    try:
        code = textwrap.dedent(
            f"""
            import memstrata
            try:
                memstrata.Memory({str(store_path)!r})
            except memstrata.StoreLockedError as e:
                print("LOCKED", e.code, str(e))
            else:
                print("OPENED")
            """
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("LOCKED STORE_LOCKED"), out.stdout + out.stderr
        assert str(store_path.resolve()) in out.stdout
    finally:
        holder.close()


def test_exceptions_can_be_raised_and_caught_by_users():
    with pytest.raises(memstrata.MemstrataError):
        raise memstrata.NotFoundError("custom")
    with pytest.raises(OSError):
        raise memstrata.IoError(2, "no such thing")
