import pytest

import memstrata


def test_design_sketch(mem):
    s = mem.session_create("refactor", metadata={"repo": "x"})
    assert isinstance(s, memstrata.SessionCreated)
    assert isinstance(s.session_id, str) and s.session_id
    assert s.created_at.tzinfo is not None
    v = mem.session_save(s.session_id, {"step": 3}, compression_level=2)
    assert isinstance(v, memstrata.SessionSaved)
    assert (v.success, v.version) == (True, 1)
    assert v.saved_at.tzinfo is not None
    r = mem.session_restore(s.session_id)
    assert isinstance(r, memstrata.SessionRestored)
    assert (r.success, r.content, r.metadata, r.version) == (True, {"step": 3}, {"repo": "x"}, 1)
    mem.session_save(s.session_id, {"step": 4})
    assert mem.session_restore(s.session_id).content == {"step": 4}
    assert mem.session_restore(s.session_id, version=1).version == 1
    assert mem.session_restore(s.session_id, version=1).content == {"step": 3}
    assert "SessionRestored(success=True, version=1" in repr(mem.session_restore(s.session_id, version=1))


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_every_compression_level_round_trips(mem, level):
    s = mem.session_create("levels")
    content = {"text": "lorem ipsum " * 500, "items": list(range(200)), "nested": {"a": [None, True, 1.5]}}
    mem.session_save(s.session_id, content, compression_level=level)
    mem.session_save(s.session_id, {**content, "extra": level}, compression_level=level)
    assert mem.session_restore(s.session_id, version=1).content == content
    assert mem.session_restore(s.session_id).content == {**content, "extra": level}
    versions = mem.session_versions(s.session_id)
    assert [v.compression_level for v in versions] == [level, level]
    assert all(v.raw_bytes > 0 and v.stored_bytes > 0 for v in versions)
    if level > 0:
        assert versions[0].stored_bytes < versions[0].raw_bytes


def test_default_metadata_and_level(mem):
    s = mem.session_create("plain")
    mem.session_save(s.session_id, [1, 2, 3])
    r = mem.session_restore(s.session_id)
    assert r.metadata == {}
    assert mem.session_versions(s.session_id)[0].compression_level == 1


def test_list_versions_delete(mem):
    a = mem.session_create("a", metadata={"n": 1})
    b = mem.session_create("b")
    for i in range(3):
        mem.session_save(a.session_id, {"i": i})
    sessions = {s.session_id: s for s in mem.session_list()}
    assert set(sessions) == {a.session_id, b.session_id}
    info = sessions[a.session_id]
    assert isinstance(info, memstrata.SessionInfo)
    assert (info.name, info.metadata, info.latest_version, info.version_count) == ("a", {"n": 1}, 3, 3)
    assert sessions[b.session_id].latest_version is None
    assert sessions[b.session_id].version_count == 0
    versions = mem.session_versions(a.session_id)
    assert [v.version for v in versions] == [1, 2, 3]
    assert isinstance(versions[0], memstrata.SessionVersionInfo)
    assert mem.session_delete(a.session_id) is True
    assert mem.session_delete(a.session_id) is False
    assert [s.session_id for s in mem.session_list()] == [b.session_id]
    with pytest.raises(memstrata.NotFoundError):
        mem.session_restore(a.session_id)


def test_errors(mem):
    with pytest.raises(memstrata.NotFoundError):
        mem.session_restore("0190b6a2-0000-7000-8000-000000000000")
    with pytest.raises(memstrata.NotFoundError):
        mem.session_save("0190b6a2-0000-7000-8000-000000000000", {})
    s = mem.session_create("x")
    with pytest.raises(memstrata.NotFoundError):
        mem.session_restore(s.session_id)  # nothing saved yet
    mem.session_save(s.session_id, 1)
    with pytest.raises(memstrata.NotFoundError):
        mem.session_restore(s.session_id, version=9)
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.session_save(s.session_id, 2, compression_level=4)
    assert ei.value.field == "compression_level"
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.session_save(s.session_id, 2, compression_level=-1)
    assert ei.value.field == "compression_level"
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.session_restore(s.session_id, version=-1)
    assert ei.value.field == "version"
    with pytest.raises(TypeError, match=r"^content\.a: unsupported type set"):
        mem.session_save(s.session_id, {"a": set()})
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.session_create("")
    assert ei.value.field == "name"
    assert mem.session_restore(s.session_id).content == 1


def test_sessions_persist(store_path):
    with memstrata.Memory(store_path) as m:
        s = m.session_create("persisted", metadata={"k": "v"})
        m.session_save(s.session_id, {"state": "saved"}, compression_level=3)
    with memstrata.Memory(store_path) as m:
        r = m.session_restore(s.session_id)
        assert (r.content, r.metadata) == ({"state": "saved"}, {"k": "v"})
